"""Publishing a run folder: tidy tables, each fit's report, the HTML report, then ``summary.json``.

The layout is documented in ``docs/results.md``. ``summary.json`` is written
after everything else of the run folder, and ``results/latest.json`` after
that, so a reader following either never sees half a run.
"""

from __future__ import annotations

import datetime as dt
import time
from collections.abc import Mapping
from dataclasses import asdict
from typing import TYPE_CHECKING, Any

import orjson
import polars as pl

from jurymeter.analyses.headlines import run_headlines
from jurymeter.io.store import Store
from jurymeter.pipeline.alerts import now_alerts
from jurymeter.pipeline.cache import CACHE, FAILED, FiguresOf, FitOutcome, dumps, tables_of
from jurymeter.pipeline.history import load_history
from jurymeter.pipeline.plans import load_plans, plan_alerts, plan_checks
from jurymeter.pipeline.tables import combine_tables, schemas

if TYPE_CHECKING:
    from jurymeter.pipeline.config import RunConfig
    from jurymeter.pipeline.jobs import Skipped
    from jurymeter.pipeline.page import IndexParts


def fit_entry(outcome: FitOutcome) -> dict[str, Any]:
    """One entry of ``summary.json``'s ``fits`` list: the fit, its status, and each analysis's headline."""
    job = outcome.job
    entry: dict[str, Any] = {
        **job.names,
        "protocol": job.protocol,  # an item set name may be both a pointwise and a pairwise item set
        "key": job.key(),
        "status": outcome.status,
        "error": outcome.error,
        "seconds": round(outcome.seconds, 3),
        "analyses": outcome.summary or {},
    }
    if outcome.trace:
        entry["traceback"] = outcome.trace
    return entry


def publish_run(
    store: Store,
    run_id: str,
    *,
    config: RunConfig,
    started: str,
    ingest_report: dict[str, Any] | None,
    outcomes: list[FitOutcome],
    timings: dict[str, float],
    skipped: list[Skipped] | None = None,
) -> dict[str, Any]:
    """Write ``results/<run_id>/`` and point ``results/latest.json`` at it; return the summary.

    Figures already drawn with the fits are embedded as they are; the report draws the rest.
    """
    folder = f"results/{run_id}"
    clock = time.perf_counter()
    tables = combine_tables(tables_of(outcomes))
    for table, frame in tables.items():
        store.write_parquet(f"{folder}/{table}.parquet", frame)
    for o in outcomes:
        if o.report is not None:
            store.write_bytes(f"{folder}/fits/{o.job.key()}.json", dumps(o.report))
        elif o.report_file is not None:  # a reused fit: its cached report as it is, one at a time
            store.write_bytes(f"{folder}/fits/{o.job.key()}.json", store.fs.cat_file(store.path(o.report_file)))
    timings["write"] = time.perf_counter() - clock
    fits = [fit_entry(o) for o in outcomes]
    failed = sum(f["status"] == FAILED for f in fits)
    # Landing files the ingest could not read (nothing of them stored): alerts of the run.
    unreadable = list((ingest_report or {}).get("sources_unreadable") or [])
    summary: dict[str, Any] = {
        "run_id": run_id,
        "started": started,
        "finished": None,
        "status": "partial" if failed or unreadable else "complete",
        "store": store.url,
        "landing": config.landing,
        "config_digest": config.digest(),
        "ingest": ingest_report,
        "sources_unreadable": unreadable,
        "fits": fits,
        "skipped": [asdict(s) for s in skipped or []],
        "judges": _judge_health(store),
        "timings": timings,
        "scale": list(config.scale) if config.scale else None,
    }
    from jurymeter.pipeline.page import index_parts  # matplotlib: only where a run is published

    clock = time.perf_counter()
    plans, unreadable_plans = load_plans(store)
    summary["plans"] = plan_checks(plans, tables, summary)
    timings["plans"] = time.perf_counter() - clock
    clock = time.perf_counter()
    history = load_history(store, current=(tables, summary))
    index = index_parts(history, figures=config.report)
    extra = [*index.alerts, *now_alerts(tables, config.alerts, config.fit.target),
             *plan_alerts(summary["plans"]), *unreadable_plans]
    summary["headlines"] = run_headlines(summary, extra, config.alerts.failed_share)
    timings["history"] = time.perf_counter() - clock
    if config.report:
        clock = time.perf_counter()
        # Looked up by name as each page embeds them (a reused fit's are read from the cache then).
        figures = FiguresOf(outcomes)
        write_report(store, folder, tables, summary, figures, index)
        timings["report"] = time.perf_counter() - clock
    summary["timings"] = {k: round(v, 3) for k, v in timings.items()}
    summary["finished"] = dt.datetime.now(dt.UTC).isoformat(timespec="seconds")
    store.write_bytes(f"{folder}/summary.json", dumps(summary))
    store.write_json("results/latest.json", {"run_id": run_id, "path": store.path(folder)})
    return summary


# Report files written in one store call once they reach this size (about 5 fit pages with their figures, ~100
# files: one concurrent pipe on S3; 16 MiB was the largest thing a 24-fit run held while it published).
REPORT_BATCH_BYTES = 4 * 2**20


# A results folder without summary.json whose newest file is older than this is a
# killed run's, also where no run lock says so (S3): no run publishes for a day.
UNPUBLISHED_STALE_SECONDS = 24 * 3600


def clean_unpublished(store: Store, *, alone: bool) -> list[str]:
    """Remove what killed runs left: results folders without ``summary.json``, temporary files.

    A run folder counts only once its ``summary.json`` is written (the
    history and ``results/latest.json`` never point at one without it), so
    such a folder is a run being published or one that was killed. ``alone``
    (this run holds :meth:`Store.run_lock`, so no other run is publishing)
    removes them all; otherwise only those untouched for
    :data:`UNPUBLISHED_STALE_SECONDS`. Returns the folders removed.

    Only the unpublished folders, ``results/`` itself and the fit cache are
    listed: the published runs' files (a report's pages, every night's) would
    make each night list the whole history (issue 25).
    """
    cache = CACHE.split("/", 1)[1]  # the fit cache lives under results/ too; its entries have their own marker
    removed = []
    for run in store.folders("results"):
        if run == cache or store.fs.exists(store.path("results", run, "summary.json")):
            continue
        ages = store.ages(f"results/{run}")
        # No file yet: a folder made by a run killed before its first file (or being published
        # this instant, which only a run alone can rule out).
        if alone or (ages and min(ages.values()) > UNPUBLISHED_STALE_SECONDS):
            store.remove_folder(f"results/{run}", list(ages))
            removed.append(run)
    if alone:  # a write cut between its temporary file and the rename: results/latest.json's, the cache's
        candidates = [*store.files("results"), *store.ages(CACHE)]
        store.remove([p for p in candidates if ".tmp-" in p.rsplit("/", 1)[-1]])
    return removed


def _judge_health(store: Store) -> list[dict[str, Any]]:
    """Per judge, the share of its judgments that failed (``io.info.judge_health``), for the summary."""
    from jurymeter.io.info import judge_health

    rows: list[dict[str, Any]] = judge_health(store).to_dicts()
    return rows


def write_report(
    store: Store,
    folder: str,
    tables: Mapping[str, pl.DataFrame],
    summary: Mapping[str, Any],
    figures: Mapping[str, bytes] | None = None,
    index: IndexParts | None = None,
) -> str:
    """Render the report (index, fit pages, figures, CSV) into ``<folder>/report/``; the index's path.

    ``index`` holds the run history's parts; without it they are read from the
    store's published runs up to this one (``jurymeter report`` rebuilding a run).
    """
    from jurymeter.pipeline.page import index_parts, render_report

    if index is None:
        index = index_parts(load_history(store, current=(tables, summary)))
    # The fit pages are written as they are rendered, in batches of about REPORT_BATCH_BYTES: the report is
    # never held whole, and on S3 each batch is still one concurrent `pipe` (a PUT a page, one after
    # another, took about 100 s of a 3,400-page night at 30 ms a PUT).
    pending: dict[str, bytes] = {}

    def flush() -> None:
        store.write_files(pending)
        pending.clear()

    def write_page(files: Mapping[str, bytes]) -> None:
        pending.update({f"{folder}/report/{name}": data for name, data in files.items()})
        if sum(map(len, pending.values())) >= REPORT_BATCH_BYTES:  # ~5 pages a batch: cheap to sum
            flush()

    rendered = render_report(tables, summary, figures, index, emit=write_page)
    files = {f"{folder}/report/{name}": data for name, data in rendered.files().items()}
    index_file = f"{folder}/report/index.html"
    # The index last: a reader following it finds every page.
    pending.update({relpath: data for relpath, data in files.items() if relpath != index_file})
    flush()
    if index_file in files:
        store.write_bytes(index_file, files[index_file])
    return store.path(index_file)


def read_run(store: Store, folder: str) -> tuple[dict[str, pl.DataFrame], dict[str, Any]]:
    """The tables and summary of a published run folder (relative to the store).

    Tables of analyses registered now but absent from the folder (a run of
    older code) are empty.
    """
    summary = orjson.loads(store.fs.cat_file(store.path(f"{folder}/summary.json")))
    tables = {}
    for table, schema in schemas().items():
        try:
            tables[table] = store.read_parquet(store.path(f"{folder}/{table}.parquet"))
        except FileNotFoundError:
            tables[table] = pl.DataFrame(schema=schema)
    return tables, summary
