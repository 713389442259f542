"""The ``jurymeter`` command line (typer + rich): the commands, and every registered analysis's own.

Every :class:`~jurymeter.errors.JurymeterError` becomes one line on stderr and a
non-zero exit status: 1 for a fatal problem (missing source, unreadable or full
store: nothing of the source being ingested is committed), 3 when ``--strict``
rejected a source, 4 when ``jurymeter run`` published a run in which some fits
failed, 5 when ``ingest`` stored no judgment of a source (all quarantined), 6
when some sources could not be read (each named on stderr with its reason)
and the rest were ingested (``ingest``), or, with no fit failed, published
(``run``: the sources are alerts of the run). Other exceptions are bugs and
keep their traceback.
"""

from __future__ import annotations

import gc
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import orjson
import typer
from rich.table import Table

from jurymeter.analyses import registered
from jurymeter.analyses.base import dropped_line
from jurymeter.cli.common import (
    ConfigOpt,
    StorageOpt,
    StoreOpt,
    err,
    fmt,
    open_store,
    out,
    pairs,
    print_json,
    progress_bar,
    run_command,
    safe_text,
    shorten,
    write_table,
)
from jurymeter.errors import ConfigError, JurymeterError

if TYPE_CHECKING:
    import polars as pl

    from jurymeter.cyclic import VarianceComponents
    from jurymeter.io.ingest_report import IngestReport
    from jurymeter.io.store import Store

app = typer.Typer(
    help="How far to trust a leaderboard scored by LLM judges.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
store_app = typer.Typer(help="Inspect a judgment store.", no_args_is_help=True)
app.add_typer(store_app, name="store")
@app.command()
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
        print_ingest_report(report, target, _store_args(store, config))
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


# What `ingest` shows of the records it quarantined: the first few of each source, of
# the first few sources; `jurymeter quarantine` shows the rest.
EXAMPLES_PER_SOURCE = 5
EXAMPLE_SOURCES = 20
# Characters of a raw line and of a message in a terminal table (the cut is said).
RAW_WIDTH = 60
MESSAGE_WIDTH = 80


def _store_args(store: str | None, config: Path | None) -> str:
    """The store flags a printed command line repeats: those the user gave (never --storage-option)."""
    import shlex

    if config is not None:
        return f" --config {shlex.quote(str(config))}"
    return f" --store {shlex.quote(store)}" if store else ""


def _source_names(urls: list[str]) -> dict[str, str]:
    """A short name per source URL: its file name, or the whole URL where two share a file name."""
    base = {u: u.rstrip("/").rsplit("/", 1)[-1] or u for u in dict.fromkeys(urls)}
    taken: dict[str, int] = {}
    for name in base.values():
        taken[name] = taken.get(name, 0) + 1
    return {u: name if taken[name] == 1 else u for u, name in base.items()}


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


def print_quarantine_examples(store: Store, report: IngestReport, store_args: str = "") -> None:
    """The first quarantined records of each source this ingest committed, read back from the store."""
    import shlex

    from jurymeter.io.quarantine import first_quarantined

    quarantined = [s for s in report.sources if s.status == "ingested" and s.quarantined]
    if not quarantined:
        return
    shown = quarantined[:EXAMPLE_SOURCES]
    try:
        rows = first_quarantined(store, [s.sha256 for s in shown], EXAMPLES_PER_SOURCE)
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


@store_app.command("info")
def store_info_cmd(
    store: StoreOpt = None,
    storage_option: StorageOpt = None,
    config: ConfigOpt = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON")] = False,
) -> None:
    """Records, systems, items, judges and crossing completeness per item set."""
    run_command(_store_info, store, storage_option, config, as_json)


def _store_info(store: str | None, storage_option: list[str] | None, config: Path | None, as_json: bool) -> None:
    from jurymeter.io.info import judge_health, metadata_counts, quarantine_summary, store_info

    target = open_store(store, storage_option, config)
    summary = store_info(target)
    quarantine = quarantine_summary(target)
    meta = metadata_counts(target)
    health = judge_health(target)
    if as_json:
        payload = {
            "store": target.url,
            "item_sets": summary.to_dicts(),
            "metadata": meta,
            "quarantine": {r["reason"]: r["records"] for r in quarantine.to_dicts()},
            "quarantine_sources": {
                r["reason"]: dict(zip(r["sources"], r["source_records"], strict=True)) for r in quarantine.to_dicts()
            },
            "judges": health.to_dicts(),
        }
        print_json(payload)
        return
    print_store_info(target.url, summary, quarantine, meta, _store_args(store, config))
    print_judge_health(health)


def print_judge_health(health: Any) -> None:
    """Per judge, the share of its judgments that failed (parse failures, failed calls, unscored grades)."""
    if not health.height:
        return
    table = Table(title="judge health (failed = parse failures + failed calls + unscored grades)",
                  title_justify="left")
    for col in ("judge", "stored", "failed", "failed share", "parse_failure", "judge_call_failed", "unscored"):
        table.add_column(col, justify="left" if col == "judge" else "right")
    for row in health.iter_rows(named=True):
        table.add_row(safe_text(row["judge_id"]), f"{row['stored']:,}", f"{row['failed']:,}",
                      f"{100 * row['failed_share']:.1f}%", f"{row['parse_failure']:,}",
                      f"{row['judge_call_failed']:,}", f"{row['unscored']:,}")
    out.print(table)


# Sources named per reason in `store info`'s quarantine table; the rest are counted.
SOURCES_PER_REASON = 3


def print_store_info(url: str, summary: pl.DataFrame, quarantine: pl.DataFrame, meta: dict[str, int],
                     store_args: str = "") -> None:
    """The store's item sets, its metadata counts and its quarantine by reason (``io.info.quarantine_summary``)."""
    table = Table(title=f"store {safe_text(url)}", title_justify="left")
    for col in summary.columns:
        table.add_column(col, justify="left" if col in ("protocol", "item_set") else "right")
    for row in summary.iter_rows(named=True):
        table.add_row(*[
            f"{v:.3f}" if k == "completeness" else (f"{v:,}" if isinstance(v, int) else safe_text(v))
            for k, v in row.items()
        ])
    out.print(table)
    out.print(f"metadata: {meta['systems']} systems, {meta['judges']} judges")
    if not quarantine.height:
        out.print("quarantine: empty")
        return
    names = _source_names([u for urls in quarantine["sources"].to_list() for u in urls])
    q = Table(title=f"quarantine: {quarantine['records'].sum():,} records", title_justify="left")
    for col in ("reason", "records", "sources"):
        q.add_column(col, justify="right" if col == "records" else "left")
    for row in quarantine.iter_rows(named=True):
        ranked = sorted(zip(row["sources"], row["source_records"], strict=True), key=lambda kv: (-kv[1], kv[0]))
        named = ", ".join(f"{safe_text(names[u])} ({n:,})" for u, n in ranked[:SOURCES_PER_REASON])
        rest = len(ranked) - SOURCES_PER_REASON
        q.add_row(safe_text(row["reason"]), f"{row['records']:,}", named + (f" and {rest:,} more" if rest > 0 else ""))
    out.print(q)
    out.print(f"the records: jurymeter quarantine{safe_text(store_args)} --reason R (--source F, --csv)",
              markup=False, soft_wrap=True)


@app.command()
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


@app.command()
def plan(
    out_path: Annotated[Path, typer.Option("--out", help="Assignment table: .csv, .jsonl or .parquet")],
    store: StoreOpt = None,
    storage_option: StorageOpt = None,
    config: ConfigOpt = None,
    item_set: Annotated[
        str | None, typer.Option("--item-set", help="Take items, systems and judges from this item set")
    ] = None,
    items: Annotated[Path | None, typer.Option("--items", help="File of item ids, one per line")] = None,
    systems: Annotated[Path | None, typer.Option("--systems", help="File of system ids")] = None,
    judges: Annotated[Path | None, typer.Option("--judges", help="File of judge ids")] = None,
    generations: Annotated[int, typer.Option("--generations", help="Generations per item")] = 1,
    seed: Annotated[int, typer.Option(help="Random seed")] = 0,
    prices: Annotated[
        list[str] | None,
        typer.Option("--price", help="JUDGE=PRICE per call; with --budget gives a cost-weighted plan"),
    ] = None,
    budget: Annotated[
        float | None, typer.Option("--budget", help="Money per system for the cost-weighted plan")
    ] = None,
    components: Annotated[
        str | None,
        typer.Option(
            "--components",
            help="sigma2 scenario,generation,judge,residual for the cost plan "
            "[default: fitted from --item-set]",
        ),
    ] = None,
) -> None:
    """Write a round-robin judge assignment (system, item, generation, judge) for the next run.

    With --price and --budget, the plan instead minimizes the predicted variance
    under the money budget, and its predicted variance is printed beside the
    uniform round robin's for the same money.
    """
    run_command(_plan, out_path, store, storage_option, config, item_set, items, systems, judges,
         generations, seed, prices, budget, components)


def _ids_from_file(path: Path | None) -> list[str] | None:
    if path is None:
        return None
    try:
        ids = [line.strip() for line in path.read_text().splitlines() if line.strip()]
    except FileNotFoundError:
        msg = f"file not found: {path}"
        raise ConfigError(msg) from None
    return ids


def _plan_components(components: str | None, item_set: str | None, store: str | None, storage_option: list[str] | None, config: Path | None) -> VarianceComponents:
    from jurymeter.cyclic import VarianceComponents

    if components is not None:
        try:
            values = [float(v) for v in components.split(",")]
            return VarianceComponents(*values)
        except (TypeError, ValueError, JurymeterError):
            msg = "--components expects four numbers >= 0: scenario,generation,judge,residual"
            raise ConfigError(msg) from None
    if item_set is None:
        msg = "a cost-weighted plan needs --components or an --item-set to fit them from"
        raise ConfigError(msg)
    from jurymeter.cyclic.fit import cyclic_report

    target_store = open_store(store, storage_option, config)
    report = cyclic_report(target_store.scan("pointwise", item_set))
    names = ("sigma2_scenario", "sigma2_generation", "sigma2_judge", "sigma2_residual")
    means = [sum(r[n] for r in report["systems"].values()) / len(report["systems"]) for n in names]
    return VarianceComponents(*means)


def _plan(out_path: Path, store: str | None, storage_option: list[str] | None, config: Path | None, item_set: str | None, items: Path | None, systems: Path | None, judges: Path | None, generations: int, seed: int,
          prices: list[str] | None = None, budget: float | None = None, components: str | None = None) -> None:
    import polars as pl

    from jurymeter.cyclic.planner import plan_cost_weighted, plan_round_robin

    found = {"items": _ids_from_file(items), "systems": _ids_from_file(systems), "judges": _ids_from_file(judges)}
    if any(v is None for v in found.values()):
        if item_set is None:
            msg = "give --item-set (to read ids from the store) or all of --items, --systems and --judges"
            raise ConfigError(msg)
        target_store = open_store(store, storage_option, config)
        target_store.check()
        records = target_store.scan("pointwise", item_set, columns=["item_id", "system_id", "judge_id"]).collect()
        if not records.height:
            msg = f"no pointwise records for item set {item_set!r} in {target_store.url}"
            raise ConfigError(msg)
        for key, column in (("items", "item_id"), ("systems", "system_id"), ("judges", "judge_id")):
            if found[key] is None:
                found[key] = records[column].unique().sort().to_list()
    ids = {k: v for k, v in found.items() if v is not None}  # all three, from the files or the store
    cost_note = None
    if prices:
        if budget is None:
            msg = "--price needs --budget (money per system)"
            raise ConfigError(msg)
        price_map = {k: float(v) for k, v in pairs(prices, "--price").items()}
        cost = plan_cost_weighted(
            ids["items"], ids["systems"], ids["judges"], prices=price_map, budget=budget,
            components=_plan_components(components, item_set, store, storage_option, config), seed=seed,
        )
        table = cost.plan
        cost_note = (
            f"cost-weighted plan: predicted variance {cost.variance:.6g} for {cost.cost:g} per system; "
            f"uniform round robin for the same money: {cost.uniform_variance:.6g} for {cost.uniform_cost:g}"
            + ("" if cost.optimal else " (allocation not proven optimal)")
        )
    else:
        table = plan_round_robin(
            ids["items"], ids["systems"], ids["judges"], generations=generations, seed=seed
        )
    write_table(table, out_path)
    calls = table.group_by("judge_id").agg(pl.len().alias("calls")).sort("judge_id")
    out.print(
        f"wrote {table.height:,} assignments to {safe_text(out_path)} ({len(ids['systems'])} systems x "
        f"{len(ids['items'])} items x {generations} generations); calls per judge: "
        + ", ".join(f"{safe_text(r['judge_id'])} {r['calls']:,}" for r in calls.to_dicts()),
        markup=False,
    )
    if cost_note:
        out.print(cost_note, markup=False)


@app.command()
def simulate(
    out_dir: Annotated[Path, typer.Option("--out", help="Folder to write the dump into")],
    seed: Annotated[int, typer.Option(help="Random seed")] = 0,
    systems: Annotated[int | None, typer.Option(help="Number of systems")] = None,
    items: Annotated[int | None, typer.Option(help="Number of items")] = None,
    judges: Annotated[int | None, typer.Option(help="Number of judges")] = None,
    faults: Annotated[int, typer.Option(help="Bad records to inject (for the quarantine)")] = 0,
) -> None:
    """Write a seeded, realistic dump with its true parameters in truth.json."""
    run_command(_simulate, out_dir, seed, systems, items, judges, faults)


def _simulate(out_dir: Path, seed: int, systems: int | None, items: int | None, judges: int | None, faults: int) -> dict[str, Path]:
    import dataclasses

    from jurymeter.simulate import SimulationParams, simulate_dump, write_dump

    changes: dict[str, Any] = {"seed": seed}
    for name, value in (("n_systems", systems), ("n_items", items), ("n_judges", judges)):
        if value is not None:
            changes[name] = value
    if systems is not None:
        # The default number of judged pairs cannot exceed the pairs that exist.
        changes["pairwise_pairs"] = min(SimulationParams().pairwise_pairs or 0, systems * (systems - 1) // 2)
    try:
        params = dataclasses.replace(SimulationParams(), **changes)
    except ValueError as exc:
        raise ConfigError(str(exc)) from exc
    dump = simulate_dump(params)
    paths = write_dump(dump, out_dir, faults=faults, seed=seed)
    for name, path in paths.items():
        out.print(f"wrote {name}: {safe_text(path)}", markup=False)
    return paths


@app.command()
def run(
    config: ConfigOpt = None,
    store: StoreOpt = None,
    landing: Annotated[
        str | None, typer.Option("--landing", help="Folder or s3:// prefix where new dumps land")
    ] = None,
    scheduler: Annotated[
        str | None,
        typer.Option("--scheduler", help="Dask scheduler address [default: $DASK_SCHEDULER_ADDRESS or a LocalCluster]"),
    ] = None,
    workers: Annotated[
        int | None, typer.Option("--workers", help="LocalCluster worker processes [default: 2]")
    ] = None,
    n_boot: Annotated[int | None, typer.Option("--boot", help="Bootstrap resamples per fit")] = None,
    force: Annotated[bool, typer.Option("--force", help="Refit even when inputs are unchanged")] = False,
    no_report: Annotated[bool, typer.Option("--no-report", help="Skip the HTML report")] = False,
    home: Annotated[
        str | None, typer.Option("--home", help="Run state folder (Prefect's database and logs) [default: .jurymeter]")
    ] = None,
) -> None:
    """The nightly flow: ingest what landed, fit every item set on Dask, publish results and report.

    Exit 4 when some fits failed, else 6 when some landing files could not be
    read (each an alert of the run; every readable one is ingested).
    """
    overrides = {
        "store": store, "landing": landing, "dask.address": scheduler, "dask.workers": workers,
        "fit.n_boot": n_boot, "home": home, "report": False if no_report else None,
    }
    summary = run_command(_run_flow, config, overrides, force)
    # The results are published; the status tells a scheduler that some part failed.
    if any(fit.get("status") == "failed" for fit in summary["fits"]):
        raise typer.Exit(4)
    if summary.get("sources_unreadable"):
        raise typer.Exit(6)
    if summary["status"] != "complete":
        raise typer.Exit(4)


def _run_flow(config_path: Path | None, overrides: dict[str, Any], force: bool) -> dict[str, Any]:
    from jurymeter.pipeline.config import load_config

    settings = load_config(config_path, overrides=overrides)  # fail fast, before Prefect starts
    from jurymeter.orchestration.runtime import run_environment

    out.print(f"store {safe_text(settings.store)}, landing {safe_text(settings.landing or '(none)')}", markup=False)
    dask = settings.dask
    where = f"Dask scheduler {dask.address}" if dask.address else f"a LocalCluster of {dask.workers} workers"
    out.print(f"starting: Prefect's API and {where}; ingesting the landing folder meanwhile", markup=False)

    def ingest_meanwhile() -> None:  # the ingest needs neither the Prefect server nor Dask
        from jurymeter.orchestration.flow import start_ingest_early

        start_ingest_early(settings)

    with run_environment(
        settings.home, dask.address, dask.workers, dask.threads_per_worker,
        imports=("jurymeter.orchestration.flow", "jurymeter.io.ingest"), meanwhile=ingest_meanwhile,
    ) as address:
        from jurymeter.orchestration.flow import listening, nightly

        overrides = {**overrides, "dask.address": address}

        progress = progress_bar("fits")

        def on_fit(outcome: Any) -> None:
            progress.advance(task_id)
            if outcome.status == "failed":
                err.print(f"fit failed: {safe_text(outcome.job.name)}: {safe_text(outcome.error)}", markup=False)

        with progress, listening(on_fit, print_ingest_line):
            task_id = progress.add_task("fits", total=None)
            summary = nightly(str(config_path) if config_path else None, force, overrides)
    print_run_summary(summary, ingest_printed=True)
    return summary


def print_ingest_line(ingest: dict[str, Any] | None) -> None:
    if ingest:
        t = ingest["totals"]
        out.print(
            f"ingest: read {t['read']:,} = accepted {t['accepted']:,} + quarantined "
            f"{t['quarantined']:,} + duplicates dropped {t['duplicates_dropped']:,}",
            markup=False,
        )
    else:
        out.print("ingest: nothing new in the landing location", markup=False)


def print_run_summary(summary: dict[str, Any], *, ingest_printed: bool = False) -> None:
    if not ingest_printed:
        print_ingest_line(summary.get("ingest"))
    counts: dict[str, int] = {}
    for fit in summary["fits"]:
        counts[fit["status"]] = counts.get(fit["status"], 0) + 1
    # One table per protocol (a pointwise and a pairwise item set may share a name), each with
    # the headline columns of the analyses that fit that protocol.
    protocols = list(dict.fromkeys(fit.get("protocol") or "pointwise" for fit in summary["fits"])) or ["pointwise"]
    for protocol in protocols:
        columns = [(a.name, h) for a in registered() if protocol in a.protocols
                   for h in a.headline if h.kind == "number" and h.table]
        title = f"run {safe_text(summary['run_id'])}: {safe_text(summary['status'])}"
        table = Table(title=title if len(protocols) == 1 else f"{title} ({protocol} item sets)", title_justify="left")
        for col in ("item set", "universe", "population", "status"):
            table.add_column(col)
        for _, h in columns:
            table.add_column(h.label, justify="right")
        for fit in summary["fits"]:
            if (fit.get("protocol") or "pointwise") != protocol:
                continue
            parts = fit.get("analyses") or {}
            table.add_row(
                safe_text(fit["item_set"]), safe_text(fit["universe"]), safe_text(fit["population"]),
                fit["status"] if fit["status"] != "failed" else f"failed: {safe_text(fit['error'])}",
                *(fmt((parts.get(name) or {}).get(h.key)) if name in parts else "-" for name, h in columns),
            )
        out.print(table)
    for judge in summary.get("judges") or []:
        if judge.get("failed"):
            out.print(f"judge {safe_text(judge['judge_id'])}: {judge['failed']:,} of {judge['stored'] + judge['failed']:,} "
                      f"judgments failed ({100 * judge['failed_share']:.1f}%: parse failures "
                      f"{judge['parse_failure']:,}, failed calls {judge['judge_call_failed']:,}, "
                      f"unscored {judge['unscored']:,})", markup=False)
    for skip in summary.get("skipped") or []:
        out.print(f"not fitted: {skip['protocol']} item set {safe_text(skip['item_set'])}: {safe_text(skip['reason'])}",
                  markup=False)
    for fit in summary["fits"]:  # what a fit left out (issue 14, point 5): one line per fit that dropped anything
        for a in registered():
            line = dropped_line(a.headline, (fit.get("analyses") or {}).get(a.name) or {})
            if line:
                out.print(f"dropped in {_fit_name(fit)} ({a.name}): {safe_text(line)}", markup=False)
    for fit in summary["fits"]:
        for name, part in (fit.get("analyses") or {}).items():
            if part.get("status") == "skipped":
                out.print(f"{name} not run on {_fit_name(fit)}: {safe_text(part.get('reason'))}", markup=False)
    if not summary["fits"] and not summary.get("skipped"):
        out.print(
            "no fits: the store holds no item set yet "
            f"(drop judgment dumps into {safe_text(summary.get('landing') or 'a landing folder')} and run again)",
            markup=False,
        )
    timings = summary["timings"]
    out.print(
        (", ".join(f"{n} {status}" for status, n in sorted(counts.items())) or "0 fits")
        + "; timings " + ", ".join(f"{k} {v:.1f} s" for k, v in timings.items()),
        markup=False,
    )
    folder = safe_text(summary["store"].rstrip("/") + f"/results/{summary['run_id']}")
    if "report" in timings:
        out.print(f"report: {folder}/report/index.html", markup=False)
    out.print(f"results: {folder}/ (summary.json and tables)", markup=False)
    print_headlines(summary)


def _fit_name(fit: dict[str, Any]) -> str:
    """A fit as the terminal names it: item set / universe / population, escaped."""
    return " / ".join(safe_text(fit[k]) for k in ("item_set", "universe", "population"))


def print_headlines(summary: dict[str, Any]) -> None:
    """The index page's alerts and one headline per fit (``summary.json`` ``headlines``; said again for older runs)."""
    from jurymeter.analyses.headlines import run_headlines

    headlines = summary.get("headlines") or run_headlines(summary)
    alerts = headlines.get("alerts") or []
    if alerts:
        out.print(f"alerts ({len(alerts)}):", style="bold red", markup=False)
        for alert in alerts:
            out.print(f"  ! {safe_text(alert)}", markup=False)
    else:
        out.print("alerts: none", markup=False)
    for fit in headlines.get("fits") or []:
        out.print(f"{safe_text(fit['label'])}: {safe_text(fit['sentence'])}", markup=False)


@app.command()
def report(
    results: Annotated[str, typer.Argument(help="A run folder (results/<run_id>) or 'latest'")] = "latest",
    store: StoreOpt = None,
    storage_option: StorageOpt = None,
    config: ConfigOpt = None,
    summary: Annotated[
        bool, typer.Option("--summary", help="Print the run's alerts and headlines; rebuild nothing")
    ] = False,
) -> None:
    """Rebuild every page of a run's report (index, one page per fit, run history) from its results folder."""
    run_command(_report, results, store, storage_option, config, summary)


def _report(results: str, store: str | None, storage_option: list[str] | None, config: Path | None,
            summary_only: bool = False) -> str:
    from jurymeter.pipeline.publish import read_run, write_report

    target = open_store(store, storage_option, config)
    target.check()
    if results == "latest":
        try:
            latest = target.read_json("results/latest.json")
        except FileNotFoundError as exc:
            msg = f"no run in {target.url} yet (results/latest.json is missing)"
            raise ConfigError(msg) from exc
        folder = f"results/{latest['run_id']}"
    else:
        folder = results.rstrip("/")
        if folder.startswith(target.root + "/"):
            folder = folder[len(target.root) + 1 :]
        if not folder.startswith("results/"):
            folder = f"results/{folder}"
    if summary_only:
        try:
            summary = orjson.loads(target.fs.cat_file(target.path(f"{folder}/summary.json")))
        except FileNotFoundError as exc:
            msg = f"not a complete run folder: {target.path(folder)} (no summary.json)"
            raise ConfigError(msg) from exc
        out.print(f"run {safe_text(summary.get('run_id'))}: {safe_text(summary.get('status'))}", markup=False)
        print_headlines(summary)
        return str(target.path(f"{folder}/report/index.html"))
    try:
        tables, summary = read_run(target, folder)
    except FileNotFoundError as exc:
        msg = f"not a complete run folder: {target.path(folder)} (no summary.json or tables)"
        raise ConfigError(msg) from exc
    page = write_report(target, folder, tables, summary)
    out.print(f"report: {safe_text(page)}", markup=False)
    return page


@app.command()
def demo(
    workdir: Annotated[
        Path, typer.Option("--workdir", help="Where the dump, the store and the report go")
    ] = Path("jurymeter-demo"),
    seed: Annotated[int, typer.Option(help="Random seed")] = 0,
) -> None:
    """The main job on the embedded default: simulate a dump into a landing folder, run the nightly flow."""
    run_command(_demo, workdir, seed)


DEMO_CONFIG = r"""# Written by `jurymeter demo`: a nightly run over a simulated dump.
store = "{store}"
landing = "{landing}"
home = "{home}"
scale = [1, 10]

[universes]
three-judges = ["judge-a", "judge-b", "judge-c"]

[fit]
universes = ["all", "three-judges"]
n_boot = 800
"""


def _demo(workdir: Path, seed: int) -> None:
    workdir = workdir.resolve()
    landing = workdir / "landing"
    _simulate(landing, seed, None, None, None, 12)
    config_path = workdir / "jurymeter.toml"
    config_path.write_text(
        DEMO_CONFIG.format(store=workdir / "store", landing=landing, home=workdir / ".jurymeter")
    )
    out.print(f"config: {safe_text(config_path)}", markup=False)
    _run_flow(config_path, {}, False)


for _analysis in registered():  # each analysis brings its own command (gstudy, cyclic, ...)
    _analysis.register_command(app)


# The cyclic garbage collector's thresholds in a command's process. A command's
# imports make most of its objects (scipy's alone hundreds of thousands) and keep
# them to the end; at Python's default (700) the collector traversed them again
# and again: 265 collections, 0.08 s, while one `jurymeter gstudy` imported its fit's
# modules; at 10,000 a few, a third of that time. (The CLI's own imports, before
# this runs, cost 0.01 s of collections.)
GC_THRESHOLDS = (10_000, 10, 10)


def main() -> None:  # pragma: no cover - console entry point
    # Piped (CI, a scheduler's log), stdout is block-buffered: a run's lines
    # would arrive all at once at the end. Line buffering shows them as they happen.
    sys.stdout.reconfigure(line_buffering=True)  # type: ignore[union-attr]  # typeshed: TextIO; a console script's stdout is an io.TextIOWrapper
    gc.set_threshold(*GC_THRESHOLDS)
    try:
        app()
    finally:
        # The interpreter's exit collects every object once more (0.09 s after a
        # G-study, most of it scipy's modules); frozen, the collector skips them
        # and the process's end frees them. atexit handlers still run; no command
        # leaves a file to be closed by that collection (stdout and stderr are
        # flushed by the interpreter).
        gc.freeze()


if __name__ == "__main__":  # pragma: no cover
    main()
