"""What every command of the ``jurymeter`` command line shares: consoles, options, the store, errors.

Every :class:`~jurymeter.errors.JurymeterError` becomes one line on stderr and a
non-zero exit status: 1 for a fatal problem (missing source, unreadable store),
3 when ``--strict`` rejected a source, 4 when ``jurymeter run`` published a run
in which some fits failed. Other exceptions are bugs and keep their traceback.
"""

from __future__ import annotations

import math
import os
import re
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
    from rich.text import Text

    from jurymeter.io.schema import Protocol
    from jurymeter.io.store import Store
    from jurymeter.pipeline.jobs import FitJob

P = ParamSpec("P")
T = TypeVar("T")

# The characters a terminal may act on instead of showing: C0 and C1 controls and DEL
# (ANSI escapes, a carriage return that overwrites the line, NUL), format characters
# (bidi overrides such as U+202E that reorder what follows, zero-width characters),
# lone surrogates (which cannot even be encoded) and the line and paragraph separators:
# Unicode's categories Cc, Cf, Cs, Zl and Zp (Unicode 14, Python 3.11's; the test
# derives the set from unicodedata and compares).
CONTROL_RANGES: tuple[tuple[int, int], ...] = (
    (0x0, 0x1F), (0x7F, 0x9F), (0xAD, 0xAD), (0x600, 0x605), (0x61C, 0x61C), (0x6DD, 0x6DD),
    (0x70F, 0x70F), (0x890, 0x891), (0x8E2, 0x8E2), (0x180E, 0x180E), (0x200B, 0x200F),
    (0x2028, 0x202E), (0x2060, 0x2064), (0x2066, 0x206F), (0xD800, 0xDFFF), (0xFEFF, 0xFEFF),
    (0xFFF9, 0xFFFB), (0x110BD, 0x110BD), (0x110CD, 0x110CD), (0x13430, 0x13438),
    (0x1BCA0, 0x1BCA3), (0x1D173, 0x1D17A), (0xE0001, 0xE0001), (0xE0020, 0xE007F),
)


def _char_class(ranges: tuple[tuple[int, int], ...]) -> re.Pattern[str]:
    return re.compile("[" + "".join(f"{re.escape(chr(a))}-{re.escape(chr(b))}" for a, b in ranges) + "]")


_CONTROL = _char_class(CONTROL_RANGES)
_CONTROL_BUT_NEWLINE = _char_class(((0x0, 0x9), (0xB, 0x1F), *CONTROL_RANGES[1:]))
# In orjson's output C0 controls inside strings are escaped already; those left are its layout.
_JSON_UNSAFE = _char_class(CONTROL_RANGES[1:])
_SHORT_ESCAPES = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}


def _escaped(match: re.Match[str]) -> str:
    char = match.group()
    if char in _SHORT_ESCAPES:
        return _SHORT_ESCAPES[char]
    code = ord(char)
    return f"\\x{code:02x}" if code <= 0xFF else (f"\\u{code:04x}" if code <= 0xFFFF else f"\\U{code:08x}")


def safe_text(value: object, *, newlines: bool = False) -> str:
    r"""``value`` as text a terminal shows as written: every control character escaped.

    ANSI escapes, ``\r``, ``\x00``, the other C0 and C1 controls, bidi overrides
    and the other format characters, lone surrogates and the line separators
    become Python-style escapes (``\x1b``, ``\r``, ``\u202e``), so an id cannot
    recolour, overwrite or reorder a terminal's output, and two ids that differ
    only there still look different. Everything else, backslashes included, is
    kept: JSON and CSV output (``--json``, ``--csv``) is where the exact value is.

    Parameters
    ----------
    value
        Any value; a non-string is shown as ``str(value)``.
    newlines
        Keep ``\n`` (a whole message of several lines); an id's newline is escaped.

    Returns
    -------
    str
        The escaped text (``value`` itself when it holds no such character).
    """
    text = value if isinstance(value, str) else str(value)
    return (_CONTROL_BUT_NEWLINE if newlines else _CONTROL).sub(_escaped, text)


def _json_escaped(match: re.Match[str]) -> str:
    units = match.group().encode("utf-16-be", "surrogatepass")
    return "".join(f"\\u{int.from_bytes(units[i:i + 2], 'big'):04x}" for i in range(0, len(units), 2))


def json_text(value: Any) -> str:
    r"""``value`` as indented JSON whose every character a terminal acts on is a ``\u`` escape.

    orjson escapes the C0 controls; DEL, the C1 controls, bidi overrides and the
    other format characters and the line separators it writes as they are. Written
    as escapes they are the same value to any JSON reader, and harmless on a terminal.
    """
    import orjson

    text = orjson.dumps(value, option=orjson.OPT_INDENT_2 | orjson.OPT_SERIALIZE_NUMPY).decode()
    return text if text.isascii() and "\x7f" not in text else _JSON_UNSAFE.sub(_json_escaped, text)


def print_json(value: Any) -> None:
    """Write ``value`` to stdout as :func:`json_text` and a newline (a command's ``--json`` output)."""
    sys.stdout.write(json_text(value) + "\n")


def shorten(value: object, width: int) -> str:
    """``value`` escaped (:func:`safe_text`) and cut to about ``width`` characters, the cut said.

    The cut falls between escapes, never inside one, and says how many characters
    of the original were left out.
    """
    text = value if isinstance(value, str) else str(value)
    shown: list[str] = []
    length = 0
    for used, char in enumerate(text):
        piece = safe_text(char)
        if length + len(piece) > width:
            return "".join(shown) + f"... (+{len(text) - used:,} characters)"
        shown.append(piece)
        length += len(piece)
    return "".join(shown)


class SafeConsole(Console):
    r"""A rich console that shows every string it renders with its control characters escaped.

    Each string a command prints (a line, a table's cell, title or header) becomes
    rich ``Text`` through :meth:`render_str`; escaping there, before rich measures
    it, keeps tables aligned, and no printer can forget it. Printers still pass
    ids through :func:`safe_text` so an id's newline shows as ``\n`` (a message
    keeps its own line breaks here). The consoles read no markup and no emoji
    codes: ids such as ``[/]`` (a markup error), ``[n/a, n/a]`` (swallowed as a
    style) or ``:cat:`` (an emoji) are printed as written.
    """

    def render_str(self, text: str, *args: Any, **kwargs: Any) -> Text:
        return super().render_str(safe_text(text, newlines=True), *args, **kwargs)


# Outside a terminal rich would wrap tables at 80 columns; logs read better wide.
_WIDTH = None if sys.stdout.isatty() else 160
out = SafeConsole(highlight=False, width=_WIDTH, markup=False, emoji=False)
err = SafeConsole(stderr=True, highlight=False, soft_wrap=True, markup=False, emoji=False)

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
        print_json(report)
        return None
    return report
