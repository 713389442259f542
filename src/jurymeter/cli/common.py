"""What every command of the ``jurymeter`` command line shares: options, the store, errors, files of ids.

Every :class:`~jurymeter.errors.JurymeterError` becomes one line on stderr and a
non-zero exit status (:func:`run_command`): 1 for a fatal problem (missing source,
unreadable store, a flag or configuration value outside what it admits), 3 when
``--strict`` rejected a source, 4 when ``jurymeter run`` published a run in which
some fits failed. Other exceptions are bugs and keep their traceback. The consoles
and the escaping of what they print are :mod:`jurymeter.render.text`'s (the
analyses' printouts use them too).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, ParamSpec, TypeVar

import typer

from jurymeter.errors import ConfigError, JurymeterError, StrictModeError
from jurymeter.render.text import err

if TYPE_CHECKING:
    import polars as pl
    from rich.progress import Progress

    from jurymeter.io.store import Store
    from jurymeter.pipeline.config import RunConfig

P = ParamSpec("P")
T = TypeVar("T")

StoreOpt = Annotated[
    str | None,
    typer.Option(
        "--store",
        help="Store folder or s3://bucket/prefix [default: $JURYMETER_STORE or ./jurymeter-store]",
    ),
]
StorageOpt = Annotated[
    list[str] | None,
    typer.Option(
        "--storage-option",
        help="KEY=VALUE for S3 (endpoint_url, region, key, secret...); repeatable",
    ),
]
ConfigOpt = Annotated[
    Path | None,
    typer.Option("--config", help="TOML file with `store` and a \\[storage_options] table"),
]
UniverseOpt = Annotated[str | None, typer.Option("--universe", help="Judge universe named in the config file")]
PopulationOpt = Annotated[str | None, typer.Option("--population", help="System population named in the config file")]


def pairs(values: list[str] | None, what: str) -> dict[str, str]:
    out_: dict[str, str] = {}
    for value in values or []:
        name, sep, rest = value.partition("=")
        if not sep or not name.strip() or not rest.strip():
            # Never echo the value: it may be a credential typed without its name.
            msg = f"{what} expects NAME=VALUE (argument {len(out_) + 1} is not of that form)"
            raise ConfigError(msg)
        out_[name.strip()] = rest.strip()
    return out_


def run_config(config: Path | None, store: str | None, storage_option: list[str] | None,
               overrides: Mapping[str, Any] | None = None, flags: Mapping[str, str] | None = None) -> RunConfig:
    """``--config`` read as ``jurymeter run`` reads it (:func:`jurymeter.pipeline.config.load_config`: the file or
    ``$JURYMETER_CONFIG``, the environment, every value checked), ``--store``, ``--storage-option`` and
    ``overrides`` applied; ``flags`` names the flag of each override (for its error)."""
    from jurymeter.pipeline.config import load_config

    applied: dict[str, Any] = {"store": store, **(overrides or {})}
    named: dict[str, str] = {"store": "--store", **(flags or {})}
    for key, value in pairs(storage_option, "--storage-option").items():
        applied[f"storage_options.{key}"] = value
        named[f"storage_options.{key}"] = "--storage-option"
    return load_config(config, overrides=applied, flags=named)


def open_store(store: str | None, storage_option: list[str] | None, config: Path | None) -> Store:
    """The store of ``--store`` (else the configuration's), with the configuration's and the flags' storage options."""
    from jurymeter.io.store import Store

    settings = run_config(config, store, storage_option)
    return Store(settings.store, settings.storage_options)


def run_command(fn: Callable[P, T], *args: P.args, **kwargs: P.kwargs) -> T:
    try:
        return fn(*args, **kwargs)
    except StrictModeError as exc:
        err.print(f"error: {exc}", markup=False)
        raise typer.Exit(3) from None
    except JurymeterError as exc:
        err.print(f"error: {exc}", markup=False)
        raise typer.Exit(1) from None


def progress_bar(label: str, *, bytes_: bool = False) -> Progress:
    """A progress bar on stderr, shown only on a terminal (quiet in CI and in logs)."""
    from rich.progress import (
        BarColumn,
        DownloadColumn,
        MofNCompleteColumn,
        Progress,
        TextColumn,
        TimeElapsedColumn,
    )

    count = DownloadColumn() if bytes_ else MofNCompleteColumn()
    return Progress(
        TextColumn(label), BarColumn(), count, TimeElapsedColumn(),
        console=err, disable=not err.is_terminal,
    )


def write_table(table: pl.DataFrame, out_path: Path) -> None:
    """Write a plan's table to ``out_path`` as its suffix says (.csv, .jsonl or .parquet)."""
    suffix = out_path.suffix.lower()
    if suffix not in (".csv", ".jsonl", ".ndjson", ".parquet"):
        msg = f"--out must end in .csv, .jsonl or .parquet, got {out_path.name!r}"
        raise ConfigError(msg)
    try:
        out_path.parent.mkdir(parents=True, exist_ok=True)
        if suffix == ".csv":
            table.write_csv(out_path)
        elif suffix == ".parquet":
            table.write_parquet(out_path)
        else:
            table.write_ndjson(out_path)
    except OSError as exc:  # a file in the way, no permission: the user's path, said in one line
        msg = f"--out {out_path}: cannot write ({exc.strerror or type(exc).__name__})"
        raise ConfigError(msg) from None


def ids_from_file(path: Path | None) -> list[str] | None:
    """The ids of a file, one per line (blank lines skipped); ``None`` for no file."""
    if path is None:
        return None
    try:
        ids = [line.strip() for line in path.read_text().splitlines() if line.strip()]
    except FileNotFoundError:
        msg = f"file not found: {path}"
        raise ConfigError(msg) from None
    return ids


def store_args(store: str | None, config: Path | None) -> str:
    """The store flags a printed command line repeats: those the user gave (never --storage-option)."""
    import shlex

    if config is not None:
        return f" --config {shlex.quote(str(config))}"
    return f" --store {shlex.quote(store)}" if store else ""

