"""``jurymeter quarantine``: the committed quarantine's records, as tables, JSON or CSV; the tables ``ingest`` shows too."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.table import Table

from jurymeter.cli.common import (
    ConfigOpt,
    StorageOpt,
    StoreOpt,
    open_store,
    run_command,
)
from jurymeter.errors import ConfigError
from jurymeter.render.text import err, out, print_json, safe_text, shorten

if TYPE_CHECKING:
    import polars as pl



# What `ingest` shows of the records it quarantined: the first few of each source, of
# the first few sources; `jurymeter quarantine` shows the rest.
EXAMPLES_PER_SOURCE = 5
EXAMPLE_SOURCES = 20
# Characters of a raw line and of a message in a terminal table (the cut is said).
RAW_WIDTH = 60
MESSAGE_WIDTH = 80



def quarantine_tables(rows: pl.DataFrame, counts: dict[str, int],
                      noun: str = "quarantined records") -> tuple[list[Table], bool]:
    """Quarantined records as terminal tables, one per source in the rows' order, titled with how many of
    the source's ``counts`` are shown; every cell escaped, long text cut. The tables, and whether a cut was made."""
    tables: list[Table] = []
    cut = False
    for (source,), part in rows.group_by("source", maintain_order=True):
        table = Table(title=f"{safe_text(source)}: {part.height:,} of {counts.get(str(source), part.height):,} "
                            f"{noun}", title_justify="left")
        for col in ("line", "reason", "message", "raw"):
            table.add_column(col, justify="right" if col == "line" else "left", overflow="fold")
        for row in part.iter_rows(named=True):
            raw, message = row["raw"] or "", row["message"] or ""
            cut = cut or len(raw) > RAW_WIDTH or len(message) > MESSAGE_WIDTH
            table.add_row("-" if row["line"] is None else f"{row['line']:,}", safe_text(row["reason"]),
                          shorten(message, MESSAGE_WIDTH), shorten(raw, RAW_WIDTH))
        tables.append(table)
    return tables, cut



def quarantine(
    store: StoreOpt = None,
    storage_option: StorageOpt = None,
    config: ConfigOpt = None,
    source: Annotated[
        str | None, typer.Option("--source", help="Only this source: its URL as ingested, its path, or its file name")
    ] = None,
    reason: Annotated[str | None, typer.Option("--reason", help="Only this reason (docs/schema.md)")] = None,
    limit: Annotated[int, typer.Option("--limit", help="Records to show")] = 20,
    show_all: Annotated[
        bool, typer.Option("--all", help="Every matching record, whatever --limit says (for --csv and --json)")
    ] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Print the records as a JSON array (exact text)")] = False,
    as_csv: Annotated[
        bool, typer.Option("--csv", help="Write the records as CSV to stdout (exact and whole raw text)")
    ] = False,
) -> None:
    """Rejected records: source, line, reason, message and raw text, the first 20 by source and line.

    Reads the committed quarantine only (a crashed ingest's records are not
    there). The table cuts long text and escapes control characters; --json
    and --csv give every field exactly. How many records match in all is said
    (on stderr with --json and --csv).
    """
    run_command(_quarantine, store, storage_option, config, source, reason, limit, show_all, as_json, as_csv)


def _quarantine(store: str | None, storage_option: list[str] | None, config: Path | None, source: str | None,
                reason: str | None, limit: int, show_all: bool, as_json: bool, as_csv: bool) -> None:
    from jurymeter.io.quarantine import (
        committed_sources,
        list_quarantine,
        matching_sources,
        quarantined_sources,
    )
    from jurymeter.io.schema import REASONS

    if as_json and as_csv:
        msg = "--json and --csv exclude each other: give one"
        raise ConfigError(msg)
    if reason is not None and reason not in REASONS:
        msg = f"--reason must be one of {', '.join(REASONS)}, got {reason!r}"
        raise ConfigError(msg)
    if limit < 1:
        msg = f"--limit must be positive, got {limit}"
        raise ConfigError(msg)
    target = open_store(store, storage_option, config)
    target.check()
    chosen = quarantined_sources(target)  # their markers only: a store of many clean sources reads few
    if source is not None:
        chosen = matching_sources(chosen, source)
        if not chosen and not matching_sources(every := committed_sources(target), source):
            msg = (f"--source {source!r}: no source of that URL or file name in {target.url} "
                   f"({len(every):,} sources ingested; `jurymeter store info` names those with quarantined records)")
            raise ConfigError(msg)
    listing = list_quarantine(target, sources=chosen, reason=reason, limit=None if show_all else limit)
    rows, matched = listing.rows, listing.matched
    what = " and ".join(p for p in (f"source {source!r}" if source else "", f"reason {reason}" if reason else "") if p)
    counted = (f"{rows.height:,} of {matched:,} quarantined records"
               + (f" of {safe_text(what)}" if what else "") + " shown")
    if as_json or as_csv:
        if as_json:
            print_json(rows.to_dicts())
        else:
            sys.stdout.write(rows.write_csv())
        err.print(f"quarantine: {counted}" + ("" if rows.height == matched else " (--all for every one)"),
                  markup=False)
        return
    if not matched:
        out.print(f"quarantine of {safe_text(target.url)}: no record"
                  + (f" of {safe_text(what)}" if what else " (the quarantine is empty)"), markup=False, soft_wrap=True)
        return
    out.print(f"quarantine of {safe_text(target.url)}: {counted} (by source, then line)", markup=False,
              soft_wrap=True)
    tables, cut = quarantine_tables(rows, listing.by_source, "matching records" if what else "quarantined records")
    for table in tables:
        out.print(table)
    if cut:
        out.print(f"(text cut at {RAW_WIDTH} characters of raw, {MESSAGE_WIDTH} of message; "
                  "--csv or --json gives it whole)", markup=False)
    if rows.height < matched:
        out.print(f"{matched - rows.height:,} more: --limit N, or --all with --csv or --json", markup=False)
