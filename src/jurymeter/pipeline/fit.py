"""One fit, free of any orchestrator: every analysis of a job from one read of its records.

:func:`fit_and_tabulate` is what a Dask worker runs (the flow sends it as a
plain function: workers need no Prefect) and what the CLI's analysis commands,
the tests and the benchmarks call directly, so every fit takes one path.
"""

from __future__ import annotations

import importlib
import sys
import threading
import time
import traceback
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, replace
from typing import Any

import polars as pl

from jurymeter.analyses import analysis as analysis_named
from jurymeter.analyses import registered
from jurymeter.analyses.base import FitScope, Mapper, SummaryPart
from jurymeter.errors import NotApplicableError
from jurymeter.io.schema import RATING_KEY, SCHEMAS, Protocol
from jurymeter.io.store import RATED_CELLS_FILE, Store
from jurymeter.pipeline.jobs import FitJob
from jurymeter.pipeline.outcome import FITTED, SKIPPED, AnalysisOutcome
from jurymeter.pipeline.tables import fit_tables

# Cells and records a CLI command's fit (the one fit of its process) reads in one
# scan, the chunks then cut from their sums, instead of a scan per chunk: for
# 10M records 0.36 against 0.55 s, and +0.38 GB of peak RSS (0.12 GB of sums and
# counts, the rest polars reading ahead; a raw polars group-by of those records
# peaks at 2.2 GB). A Dask worker's fits scan per chunk, so that its peak stays
# flat. The arrays, and so the report, are the same either way.
COMMAND_SCAN_CELLS = 16_000_000


def fit_modules() -> tuple[str, ...]:
    """The modules a fit imports beyond this one (scipy and matplotlib among them), every analysis's included."""
    return ("jurymeter.stats.blocks", "jurymeter.pipeline.page",
            *(m for a in registered() for m in a.figure_modules))


def import_fit_modules() -> None:
    """Import every module a fit needs (2.7-2.9 s), so a Dask worker can do it before its first fit."""
    import importlib

    for module in fit_modules():
        importlib.import_module(module)


def import_meanwhile(modules: tuple[str, ...]) -> threading.Thread | None:
    """Import ``modules`` (those not imported yet) in a thread; the thread, or ``None`` if none is missing.

    :func:`run_fit` starts it before it reads a fit's records: the reads are
    polars queries, which release the GIL, so the analyses' imports (scipy's
    among them: about half a second) run beside them instead of after. An
    import that fails here is left for the fit to make again, and report.
    """
    missing = [m for m in dict.fromkeys(modules) if m not in sys.modules]
    if not missing:
        return None

    def work() -> None:
        for module in missing:
            try:
                importlib.import_module(module)
            except Exception:  # the fit's own import raises it again, where it is reported
                return

    thread = threading.Thread(target=work, name="jurymeter-fit-imports", daemon=True)
    thread.start()
    return thread


def fit_scope(job: FitJob, mapper: Mapper = map) -> FitScope:
    """The fit's records (its universe and population applied) and metadata, opened where it runs.

    The records hold the protocol's columns and every ``record_columns`` an
    analysis of the job declares; the judge health is read when one of them
    sets ``reads_judge_health``. ``mapper`` is how the fit spreads independent
    tasks such as bootstrap refits (:attr:`FitScope.mapper`): the builtin ``map``
    runs them here; the flow passes one that runs them on the cluster.
    """
    store = Store(job.store, dict(job.storage_options))
    analyses = [analysis_named(name) for name, _ in job.analyses]
    extra = list(dict.fromkeys(c for a in analyses for c in a.record_columns))
    columns = [*SCHEMAS[job.protocol].dtypes, *(c for c in extra if c not in SCHEMAS[job.protocol].dtypes)]
    records = store.scan(job.protocol, job.item_set, columns=columns if extra else None)
    settings = job.settings
    if settings.judges is not None:
        records = records.filter(pl.col("judge_id").is_in(list(settings.judges)))
    if settings.systems is not None:
        population = list(settings.systems)
        if job.protocol == "pointwise":
            records = records.filter(pl.col("system_id").is_in(population))
        else:  # a pairwise judgment belongs to the population when both its systems do
            records = records.filter(pl.col("system_a").is_in(population) & pl.col("system_b").is_in(population))
    records = rated_replicates(records, job.protocol, flagged=_rated_cells(store, job))
    judge_health = None
    if any(a.reads_judge_health for a in analyses):
        from jurymeter.io.info import judge_health as read_judge_health

        judge_health = read_judge_health(store, job.protocol)
    return FitScope(item_set=job.item_set, protocol=job.protocol, records=records,
                    systems=store.scan("systems").collect(), judges=store.scan("judges").collect(),
                    settings=settings, judge_health=judge_health, mapper=mapper)


def _rated_cells(store: Store, job: FitJob) -> bool:
    """Whether an ingest stored two ratings of one cell in the job's item set (``io.store.RATED_CELLS_FILE``)."""
    try:
        store.read_json(f"{store.partition_dir(job.protocol, job.item_set)}/{RATED_CELLS_FILE}")
    except FileNotFoundError:
        return False
    return True


def rated_replicates(records: pl.LazyFrame, protocol: Protocol, *, flagged: bool = True) -> pl.LazyFrame:
    """The records with every rating of a cell under its own ``replicate``: what the fits index.

    The stored key (``io.schema``) tells apart ratings of one (system, item,
    judge, generation, replicate) cell that differ in ``run_id``, ``batch_id``
    or ``batch_position`` (one output rated in several batches of a sequential
    plan, or in two inspect runs). The fits index a cell's ratings by
    ``replicate`` alone, and would average such ratings into one; so where a
    cell holds more than one, its ratings are renumbered ``0, 1, ...`` in the
    order of (replicate, run_id, batch_id, batch_position), and the G-study
    counts them as replicates (the ``r:sij`` facet), as it counts repeated
    judge calls. The numbering keeps each cell's replicates in their order, so
    rule 3 of the balanced block (the first ``k`` replicates) keeps the same
    records. ``flagged``: whether the item set may hold such cells (the ingest
    that stored one wrote ``io.store.RATED_CELLS_FILE``); unflagged records are
    handed on untouched and unread, so a store without them pays nothing.
    Flagged, one scan of the key columns checks; the renumbered records are
    read into memory (a sequential log's size: 2M records take about 5 s).
    """
    names = records.collect_schema().names()
    extra = [c for c in RATING_KEY if c in names]
    if not extra or not flagged:
        return records
    cell = [c for c in SCHEMAS[protocol].key if c not in ("item_set", "replicate", *RATING_KEY)]
    counted = records.select(pl.len(), pl.struct(*cell, "replicate").hash().n_unique().alias("cells")).collect()
    if counted["cells"].item() == counted["len"].item():  # a hash collision only makes this renumber
        return records
    rank = pl.struct("replicate", *extra).rank("dense").over(cell) - 1
    return records.with_columns(rank.cast(pl.Int64).alias("replicate")).collect().lazy()


def run_fit(job: FitJob, *, scan_cells: int | None = None, mapper: Mapper = map) -> dict[str, AnalysisOutcome]:
    """Run every analysis of ``job`` and return their outcomes, by analysis name.

    ``scan_cells``: read up to this many cells and records in one scan even
    when they make several chunks (:func:`jurymeter.stats.blocks.fit_chunks`;
    the CLI's commands pass :data:`COMMAND_SCAN_CELLS`).

    Every analysis's blocks are decided first, then read from one scan of the
    fit's records, or one scan per item chunk when the cells are many
    (:data:`jurymeter.stats.blocks.CHUNK_CELLS`); each chunk goes to every
    analysis that asked for its block, so no block is held whole and memory
    follows systems x items, not records. When the blocks were decided as if
    every cell held a record and a chunk shows a hole
    (:class:`jurymeter.stats.blocks.BlocksChanged`), the analyses start over
    from the blocks decided on the real presence. The analyses' own imports
    run in a thread meanwhile (:func:`import_meanwhile`).
    """
    from jurymeter.pipeline.fit_cells import cell_chunks
    from jurymeter.stats.blocks import (  # imported before the thread starts
        BlocksChanged,
        fit_chunks,
    )

    analyses = [(analysis_named(name), options) for name, options in job.analyses]
    importing = import_meanwhile(tuple(m for a, _ in analyses for m in a.compute_modules))
    scope = fit_scope(job, mapper)
    modes = tuple(dict.fromkeys(m for a, o in analyses for m in a.modes(job.settings, o)))
    # The store's merged cell statistics where they carry what the records' scan would (pipeline/fit_cells.py).
    chunked = cell_chunks(job, modes) or (fit_chunks(scope.records, modes, scan_cells=scan_cells) if modes else None)
    if chunked is not None:
        chunked.read_first()  # a scan more while the imports run; a hole there is met before any analysis starts
    if importing is not None:
        importing.join()
    while True:
        outcomes: dict[str, AnalysisOutcome] = {}
        fittings = {}
        spent = dict.fromkeys((a.name for a, _ in analyses), 0.0)  # which analysis spends the night
        for a, options in analyses:
            with _charged_to(spent, a.name):
                try:
                    fittings[a.name] = a.start(scope, chunked, options)
                except NotApplicableError as exc:
                    outcomes[a.name] = AnalysisOutcome(a.name, SKIPPED, None, str(exc))
        feeds = [(name, mode, add) for name, f in fittings.items() for mode, add in f.feeds().items()]
        try:
            if feeds and chunked is not None:
                for _, parts in chunked.parts():
                    for name, mode, add in feeds:
                        with _charged_to(spent, name):
                            add(parts[mode])
        except BlocksChanged:  # the blocks assumed no hole and met one: start over from the new layouts
            continue
        break
    for a, _ in analyses:
        if a.name in fittings:
            with _charged_to(spent, a.name):
                try:
                    outcomes[a.name] = AnalysisOutcome(a.name, FITTED, fittings[a.name].finish())
                except NotApplicableError as exc:
                    outcomes[a.name] = AnalysisOutcome(a.name, SKIPPED, None, str(exc))
    return {a.name: replace(outcomes[a.name], seconds=spent[a.name]) for a, _ in analyses}


@contextmanager
def _charged_to(spent: dict[str, float], name: str) -> Iterator[None]:
    """Add the block's wall time to ``spent[name]`` (an analysis's own seconds in a fit)."""
    began = time.perf_counter()
    try:
        yield
    finally:
        spent[name] += time.perf_counter() - began


@dataclass(frozen=True, slots=True)
class FitResult:
    """A fit's reports, tables, summaries and figures (PNG by file name, when drawn), or its error.

    ``report``: ``{"analyses": {name: report or {"skipped": why}}, "seconds": s}``;
    ``summary``: ``{name: {"status", "reason", "seconds", **headline}}``, what the run's
    summary says of each analysis (and what a reused fit says again).
    """

    report: dict[str, Any] | None
    tables: dict[str, pl.DataFrame] | None
    summary: dict[str, Any] | None
    error: str | None
    trace: str | None
    figures: dict[str, bytes] | None = None


def summarize(outcomes: Mapping[str, AnalysisOutcome]) -> dict[str, Any]:
    """Each analysis's part of a fit's summary entry: its status, the reason if skipped, its headline."""
    out: dict[str, Any] = {}
    for name, outcome in outcomes.items():
        summary: SummaryPart[Any] = analysis_named(name)  # the summary part only
        part: dict[str, Any] = {"status": outcome.status, "reason": outcome.reason}
        if outcome.seconds is not None:
            part["seconds"] = round(outcome.seconds, 3)
        headline = summary.summarize(outcome.result) if outcome.result is not None else {}
        part.update({h.key: headline.get(h.key) for h in summary.headline})
        out[name] = part
    return out


def fit_and_tabulate(job: FitJob, figures: bool = False, mapper: Mapper = map) -> FitResult:
    """Fit and tabulate one job, and draw its report figures if asked: what a Dask worker returns.

    A fit's own error comes back as a value (one line, and the traceback for
    the summary), so that Dask's retries are left for what they are for, a
    lost worker, and a deterministic failure is not run three times. The
    figures are drawn here, beside the fit, so the workers draw them in
    parallel and the cache keeps them.
    """
    started = time.perf_counter()
    try:
        outcomes = run_fit(job, mapper=mapper)
        report: dict[str, Any] = {
            "analyses": {
                name: analysis_named(name).report(o.result) if o.result is not None else {"skipped": o.reason}
                for name, o in outcomes.items()
            },
        }
        tables = fit_tables(job, outcomes)
        drawn = None
        if figures:
            from jurymeter.pipeline.page import fit_figures

            drawn = fit_figures(tables, (job.item_set, job.universe, job.population), job.protocol)
        report["seconds"] = time.perf_counter() - started
        return FitResult(report=report, tables=tables, summary=summarize(outcomes), error=None,
                         trace=None, figures=drawn)
    except Exception as exc:  # reported per fit; the other fits go on
        return FitResult(report=None, tables=None, summary=None, error=one_line(exc),
                         trace=traceback.format_exc())


def one_line(exc: BaseException) -> str:
    """An exception as one line for the summary (no traceback, no newlines)."""
    text = str(exc).splitlines()[0] if str(exc) else ""
    line = f"{type(exc).__name__}: {text}"
    # Long enough for the actionable messages (what to add, what to restrict), which run to
    # 300-500 characters; cut where it is, then said to be cut (the summary keeps the traceback).
    return line if len(line) <= ONE_LINE_MAX else line[: ONE_LINE_MAX - 1] + "\u2026"


ONE_LINE_MAX = 1000
