"""What every command of the ``jurymeter`` command line shares: consoles, options, the store, errors.

Every :class:`~jurymeter.errors.JurymeterError` becomes one line on stderr and a
non-zero exit status: 1 for a fatal problem (missing source, unreadable store),
3 when ``--strict`` rejected a source, 4 when ``jurymeter run`` published a run
in which some fits failed. Other exceptions are bugs and keep their traceback.
"""

from __future__ import annotations

import math
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, ParamSpec, TypeVar

import typer
from rich.console import Console

from jurymeter.errors import ConfigError, JurymeterError, StrictModeError

if TYPE_CHECKING:
    import polars as pl
    from rich.progress import Progress

    from jurymeter.io.schema import Protocol
    from jurymeter.io.store import Store
    from jurymeter.pipeline.jobs import FitJob

P = ParamSpec("P")
T = TypeVar("T")

# Outside a terminal rich would wrap tables at 80 columns; logs read better wide.
_WIDTH = None if sys.stdout.isatty() else 160
out = Console(highlight=False, width=_WIDTH)
err = Console(stderr=True, highlight=False, soft_wrap=True)

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


def load_config(path: Path | None) -> dict[str, Any]:
    path = path or (Path(p) if (p := os.environ.get("JURYMETER_CONFIG")) else None)
    if path is None:
        return {}
    from jurymeter.pipeline.config import read_toml

    return read_toml(path)


def open_store(store: str | None, storage_option: list[str] | None, config: Path | None) -> Store:
    from jurymeter.io.store import Store, default_store_url

    settings = load_config(config)
    options = {
        **{str(k): v for k, v in settings.get("storage_options", {}).items()},
        **pairs(storage_option, "--storage-option"),
    }
    return Store(store or settings.get("store") or default_store_url(), options)


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


def store_with_item_set(store: str | None, storage_option: list[str] | None, config: Path | None, item_set: str,
                        protocol: Protocol = "pointwise") -> Store:
    """The store, checked readable and holding the item set of ``protocol`` asked for."""
    target_store = open_store(store, storage_option, config)
    target_store.check()
    if item_set not in target_store.item_sets(protocol):
        known = ", ".join(target_store.item_sets(protocol)) or "none"
        other: Protocol = "pairwise" if protocol == "pointwise" else "pointwise"
        hint = (f"; {item_set!r} is a {other} item set" if item_set in target_store.item_sets(other) else "")
        msg = f"no {protocol} item set {item_set!r} in {target_store.url} (item sets: {known}{hint})"
        raise ConfigError(msg)
    return target_store


def named_levels(settings: dict[str, Any], table: str, name: str | None) -> tuple[str, ...] | None:
    if name is None or name == "all":
        return None
    entries = settings.get(table, {})
    if name not in entries:
        known = ", ".join(sorted(entries)) or "none"
        msg = f"no {table[:-1]} {name!r} in the config file (known: {known})"
        raise ConfigError(msg)
    values = entries[name]
    if not isinstance(values, list) or not all(isinstance(v, str) for v in values):
        msg = f"{table}.{name} must be a list of ids"
        raise ConfigError(msg)
    return tuple(values)


def fmt(value: Any, digits: int = 3, *, none: str = "n/a") -> str:
    """A number for a table: ``none`` for a null (not estimable), "never" for infinity."""
    if value is None:
        return none
    if isinstance(value, float):
        if math.isnan(value):
            return "n/a"
        if math.isinf(value):
            return "never" if value > 0 else "-inf"
        return f"{value:.{digits}f}"
    return str(value)


def fmt_bound(value: float | None) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "n/a"
    if value == float("inf"):
        return "never"
    return f"{value:.0f}" if float(value).is_integer() and abs(value) >= 2 else f"{value:.3f}"


def int_list(text: str | None, what: str) -> list[int] | None:
    if text is None:
        return None
    try:
        return [int(p) for p in text.split(",") if p.strip()]
    except ValueError:
        msg = f"{what} expects integers separated by commas, got {text!r}"
        raise ConfigError(msg) from None


def write_table(table: pl.DataFrame, out_path: Path) -> None:
    """Write a plan's table to ``out_path`` as its suffix says (.csv, .jsonl or .parquet)."""
    suffix = out_path.suffix.lower()
    if suffix not in (".csv", ".jsonl", ".ndjson", ".parquet"):
        msg = f"--out must end in .csv, .jsonl or .parquet, got {out_path.name!r}"
        raise ConfigError(msg)
    out_path.parent.mkdir(parents=True, exist_ok=True)
    if suffix == ".csv":
        table.write_csv(out_path)
    elif suffix == ".parquet":
        table.write_parquet(out_path)
    else:
        table.write_ndjson(out_path)


def command_job(item_set: str, store: str | None, storage_option: list[str] | None, config: Path | None,
                universe: str | None, population: str | None, analyses: tuple[tuple[str, Any], ...], *,
                protocol: Protocol = "pointwise", **settings: Any) -> FitJob:
    """The fit an analysis command runs: the store checked to hold the item set, the named universe and
    population read from the config file, ``settings`` the rest of :class:`~jurymeter.analyses.base.FitSettings`."""
    from jurymeter.analyses.base import FitSettings
    from jurymeter.pipeline.jobs import FitJob

    config_settings = load_config(config)
    target_store = store_with_item_set(store, storage_option, config, item_set, protocol)
    return FitJob(
        store=target_store.url,
        storage_options=tuple(sorted(target_store.storage_options.items())),
        item_set=item_set, universe=universe or "all", population=population or "all",
        settings=FitSettings(judges=named_levels(config_settings, "universes", universe),
                             systems=named_levels(config_settings, "populations", population), **settings),
        analyses=analyses, inputs=(), protocol=protocol,
    )


def command_report(job: FitJob, *, as_json: bool) -> dict[str, Any] | None:
    """Run the job's one analysis through the nightly fit path and return its report (``item_set`` added).

    With ``as_json`` the report is printed as JSON and ``None`` returned; an analysis that does not apply
    raises :class:`~jurymeter.errors.DesignError` with its reason.
    """
    import orjson

    from jurymeter.analyses import analysis as analysis_named
    from jurymeter.errors import DesignError
    from jurymeter.pipeline.fit import run_fit

    ((name, _),) = job.analyses
    outcome = run_fit(job)[name]
    if outcome.result is None:
        msg = f"the {name} analysis cannot run on {job.item_set}: {outcome.reason}"
        raise DesignError(msg)
    report = analysis_named(name).report(outcome.result)
    report["item_set"] = job.item_set
    if as_json:
        sys.stdout.write(orjson.dumps(report, option=orjson.OPT_INDENT_2 | orjson.OPT_SERIALIZE_NUMPY).decode() + "\n")
        return None
    return report
