"""``jurymeter ingest``: judgment logs into the store, and the report of what was read, accepted and quarantined."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.table import Table

from jurymeter.cli.common import (
    ConfigOpt,
    StorageOpt,
    StoreOpt,
    open_store,
    pairs,
    progress_bar,
    run_command,
    store_args,
)
from jurymeter.cli.quarantine import (
    EXAMPLE_SOURCES,
    EXAMPLES_PER_SOURCE,
    MESSAGE_WIDTH,
    RAW_WIDTH,
    quarantine_tables,
)
from jurymeter.errors import ConfigError
from jurymeter.render.text import err, out, print_json, safe_text

if TYPE_CHECKING:

    from jurymeter.io.ingest_report import IngestReport
    from jurymeter.io.store import Store


def ingest(
    sources: Annotated[list[str], typer.Argument(help="Files, folders or globs; local or s3://")],
    store: StoreOpt = None,
    map_: Annotated[
        list[str] | None,
        typer.Option("--map", help="CANONICAL=SOURCE column rename, e.g. score=rating; repeatable"),
    ] = None,
    item_set: Annotated[
        str | None, typer.Option("--item-set", help="Item set for records that have none")
    ] = None,
    scale: Annotated[
        str | None, typer.Option("--scale", help="Score range LOW,HIGH, e.g. 1,10")
    ] = None,
    storage_option: StorageOpt = None,
    config: ConfigOpt = None,
    strict: Annotated[
        bool, typer.Option("--strict", help="Fail (exit 3) if any record is quarantined")
    ] = False,
    lock_timeout: Annotated[
        float, typer.Option("--lock-timeout", help="Seconds to wait for another ingest")
    ] = 600.0,
    as_json: Annotated[bool, typer.Option("--json", help="Print the run manifest as JSON")] = False,
    block_mb: Annotated[
        float, typer.Option("--block-mb", help="Megabytes of input per batch (bounds memory)")
    ] = 64.0,
    log_format: Annotated[
        str, typer.Option("--format", help="auto (recognise each file), canonical, mt-bench, arena-hard, "
                          "alpaca-eval or inspect")
    ] = "auto",
    baseline: Annotated[
        str | None, typer.Option("--baseline", help="Baseline system of Arena-Hard-Auto v0.1 logs "
                                 "(they do not name it) [default: gpt-4-0314]")
    ] = None,
) -> None:
    """Ingest judgment logs into the store, with quarantine and reconciliation.

    Reads canonical records and the logs of MT-Bench, Arena-Hard-Auto,
    AlpacaEval and inspect_ai as they are (``--format auto`` recognises each
    file and says which format it chose). A file that cannot be read (a
    dangling link, a FIFO, a cut or undecodable stream, a name that is not
    UTF-8) is one line with its reason; nothing of it is stored and the other
    files are ingested. Exit 6 when a source could not be read, else 5 when a
    source yielded no accepted judgment at all.
    """
    run_command(_ingest, sources, store, map_, item_set, scale, storage_option, config, strict,
         lock_timeout, as_json, block_mb, log_format, baseline)


def _parse_scale(scale: str | None) -> tuple[float, float] | None:
    if scale is None:
        return None
    parts = scale.split(",")
    try:
        low, high = (float(p) for p in parts)
    except ValueError:
        msg = f"--scale expects LOW,HIGH (two numbers), got {scale!r}"
        raise ConfigError(msg) from None
    return low, high


def _ingest(sources: list[str], store: str | None, map_: list[str] | None, item_set: str | None,
            scale: str | None, storage_option: list[str] | None, config: Path | None, strict: bool,
            lock_timeout: float, as_json: bool, block_mb: float, log_format: str = "auto",
            baseline: str | None = None) -> None:
    from jurymeter.io.ingest import ingest as run_ingest
    from jurymeter.io.sources import discover_sources
    from jurymeter.io.store_options import s3fs_options
    from jurymeter.io.validate import ValidationOptions

    target = open_store(store, storage_option, config)
    from jurymeter.io.adapters import FORMATS

    if log_format not in FORMATS:
        msg = f"--format must be one of {', '.join(FORMATS)}, got {log_format!r}"
        raise ConfigError(msg)
    options = ValidationOptions(
        column_map=pairs(map_, "--map"), item_set=item_set, scale=_parse_scale(scale), baseline=baseline
    )
    found = discover_sources(sources, storage_options=s3fs_options(target.storage_options), log_format=log_format)
    if not block_mb > 0:
        msg = f"--block-mb must be positive, got {block_mb}"
        raise ConfigError(msg)
    progress = progress_bar("ingest", bytes_=True)
    with progress:
        task_id = progress.add_task("ingest", total=sum(f.size for f in found))
        sizes = {f.url: f.size for f in found}
        report = run_ingest(
            target, found, options, strict=strict, lock_timeout=lock_timeout,
            block_bytes=int(block_mb * 1024 * 1024),
            on_source=lambda r: progress.advance(task_id, sizes.get(r.source, 0)),
        )
    if as_json:
        print_json(report.to_json())
    else:
        print_ingest_report(report, target, store_args(store, config))
    empty = [s for s in report.sources if s.status == "ingested" and s.read and s.quarantined == s.read]
    for s in empty:
        err.print(f"error: {safe_text(s.source)}: no judgment accepted ({s.read:,} read, all quarantined: "
                  + ", ".join(f"{k} {v}" for k, v in s.reasons.items()) + ")", markup=False)
    unreadable = report.unreadable()
    for u in unreadable:  # nothing of it is stored; the other sources are
        err.print(f"error: {u['source']}: not ingested: {u['reason']}", markup=False)
    if unreadable:
        raise typer.Exit(6)
    if empty:
        raise typer.Exit(5)


def print_ingest_report(report: IngestReport, store: Store | None = None, store_args: str = "") -> None:
    """The ingest's table and notes; with ``store``, each source's first quarantined records after them."""
    table = Table(title=f"ingest {safe_text(report.run_id)} -> {safe_text(report.store)}", title_justify="left")
    for col in ("source", "format", "status", "protocol", "lines", "judgments", "accepted", "quarantined",
                "duplicates"):
        table.add_column(col, justify="right" if col in ("lines", "judgments", "accepted", "quarantined",
                                                         "duplicates") else "left")
    for s in report.sources:
        table.add_row(
            safe_text(s.source), safe_text(s.format), s.status, s.protocol or "-", f"{s.lines:,}", f"{s.read:,}",
            f"{s.accepted:,}", f"{s.quarantined:,}", f"{s.duplicates_dropped:,}",
        )
    t = report.totals()
    table.add_row("total", "", "", "", f"{sum(s.lines for s in report.sources):,}", f"{t['read']:,}",
                  f"{t['accepted']:,}", f"{t['quarantined']:,}", f"{t['duplicates_dropped']:,}")
    out.print(table)
    for s in report.sources:
        name = safe_text(s.source)
        if s.format != "canonical" and s.status == "ingested":
            out.print(f"{name}: read as {safe_text(s.format)}", markup=False)
        for note in s.notes:
            out.print(f"{name}: {safe_text(note)}", markup=False)
        if s.note:
            out.print(f"{name}: {safe_text(s.note)}", markup=False)
        if s.reasons:
            out.print(
                f"{name}: quarantined " + ", ".join(f"{safe_text(k)} {v}" for k, v in s.reasons.items()),
                markup=False,
            )
    balanced = all(s.balanced for s in report.sources)
    out.print(
        "reconciliation: judgments read = accepted + quarantined + duplicates dropped "
        + ("holds for every source" if balanced else "DOES NOT HOLD")
    )
    if store is not None:
        print_quarantine_examples(store, report, store_args)



def print_quarantine_examples(store: Store, report: IngestReport, store_args: str = "") -> None:
    """The first quarantined records of each source this ingest committed, read back from the store."""
    import shlex

    from jurymeter.io.quarantine import first_quarantined

    quarantined = [s for s in report.sources if s.status == "ingested" and s.quarantined]
    if not quarantined:
        return
    shown = quarantined[:EXAMPLE_SOURCES]
    try:
        rows = first_quarantined(store, [s.content_key for s in shown], EXAMPLES_PER_SOURCE)
    except Exception as exc:  # the sources are committed: a failed read-back must not cost the ingest's exit status
        err.print(f"note: the quarantined records could not be read back ({type(exc).__name__}: "
                  f"{safe_text(str(exc).splitlines()[0] if str(exc) else '')}); jurymeter quarantine lists them",
                  markup=False)
        return
    if not rows.height:
        return
    out.print(f"first quarantined records (up to {EXAMPLES_PER_SOURCE} per source):", markup=False)
    tables, cut = quarantine_tables(rows, {s.source: s.quarantined for s in shown})
    for table in tables:
        out.print(table)
    if cut:
        out.print(f"(text cut at {RAW_WIDTH} characters of raw, {MESSAGE_WIDTH} of message; "
                  "jurymeter quarantine --csv or --json gives it whole)", markup=False)
    counted = rows.group_by("source").len()
    seen = dict(zip(counted["source"].to_list(), counted["len"].to_list(), strict=True))
    for s in shown:
        if s.quarantined > seen.get(s.source, 0):
            out.print(f"the rest of {safe_text(s.source)}: jurymeter quarantine{safe_text(store_args)} "
                      f"--source {safe_text(shlex.quote(s.source))}", markup=False, soft_wrap=True)
    if len(quarantined) > len(shown):
        out.print(f"{len(quarantined) - len(shown):,} more sources have quarantined records: "
                  f"jurymeter quarantine{safe_text(store_args)} lists every source's", markup=False, soft_wrap=True)
