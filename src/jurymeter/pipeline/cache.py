"""The fit cache and the cache-or-fit policy every run path shares (the flow, tests, benchmarks).

A fit whose content key (:meth:`jurymeter.pipeline.jobs.FitJob.key`) has a
complete cache folder is reused instead of refitted, and carries the same
summary, report and figures as when it was fitted. The folder is
``results/cache/<key>/``: each table as Parquet (Parquet keeps ``inf``,
"never reached", which JSON cannot), ``report.json``, ``summary.json``, the
figures, and ``complete.json`` written last, which makes it visible.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import orjson
import polars as pl

from jurymeter.io.store import Store
from jurymeter.pipeline.fit import FitResult, fit_and_tabulate
from jurymeter.pipeline.jobs import FitJob

if TYPE_CHECKING:
    from jurymeter.pipeline.config import RunConfig

CACHE = "results/cache"
FITTED, REUSED, FAILED = "fitted", "reused", "failed"


@dataclass(slots=True)
class FitOutcome:
    """What became of one fit in a run."""

    job: FitJob
    status: str  # "fitted" | "reused" | "failed"
    tables: dict[str, pl.DataFrame] | None
    report: dict[str, Any] | None
    summary: dict[str, Any] | None  # each analysis's part of the run summary
    error: str | None
    seconds: float
    trace: str | None = None
    figures: dict[str, bytes] | None = None


def dumps(obj: Any) -> bytes:
    return orjson.dumps(obj, option=orjson.OPT_INDENT_2 | orjson.OPT_SERIALIZE_NUMPY | orjson.OPT_NON_STR_KEYS)


def _folder(job: FitJob) -> str:
    return f"{CACHE}/{job.key()}"


def read_cached(store: Store, job: FitJob, *, figures: bool) -> FitOutcome | None:
    """The outcome of an earlier fit with the same content key, or ``None`` when there is none."""
    folder = _folder(job)
    try:
        marker = store.read_json(f"{folder}/complete.json")
        summary = store.read_json(f"{folder}/summary.json")
        report = store.read_json(f"{folder}/report.json")
    except FileNotFoundError:
        return None
    tables = {t: store.read_parquet(store.path(f"{folder}/{t}.parquet")) for t in marker["tables"]}
    drawn = (
        {name: store.fs.cat_file(store.path(f"{folder}/figures/{name}")) for name in marker.get("figures", [])}
        if figures else None
    )
    return FitOutcome(job, REUSED, tables, report, summary, None, 0.0, figures=drawn)


def cached_report(store: Store, config: RunConfig, item_set: str, analysis: str, *, universe: str = "all",
                  population: str = "all") -> dict[str, Any] | None:
    """One analysis's report of ``item_set`` (pointwise, in ``universe`` and ``population``: names of the
    configuration) as the nightly run last fitted these very records (the cache holds it under the fit's content
    key), or ``None`` when no run fitted them.

    A plan drawn after the run reads tonight's G-study this way instead of fitting again (``jurymeter plan``:
    a read per item set, ``bench/plans.py``).
    """
    from jurymeter.pipeline.jobs import plan_fits

    for job in plan_fits(store, config).jobs:
        if job.protocol == "pointwise" and job.names == {"item_set": item_set, "universe": universe,
                                                         "population": population}:
            cached = read_cached(store, job, figures=False)
            report = ((cached.report or {}).get("analyses") or {}).get(analysis) if cached is not None else None
            return report if isinstance(report, dict) else None
    return None


def write_cached(store: Store, job: FitJob, result: FitResult) -> None:
    """Cache a fit's tables, report, summary and figures under its key; ``complete.json`` last."""
    if result.tables is None or result.report is None:
        msg = f"a failed fit is not cached ({job.name})"
        raise ValueError(msg)
    folder = _folder(job)
    for table, frame in result.tables.items():
        store.write_parquet(f"{folder}/{table}.parquet", frame)
    for name, png in (result.figures or {}).items():
        store.write_bytes(f"{folder}/figures/{name}", png)
    store.write_bytes(f"{folder}/report.json", dumps(result.report))
    store.write_bytes(f"{folder}/summary.json", dumps(result.summary))
    store.write_json(
        f"{folder}/complete.json",
        {"tables": sorted(result.tables), "figures": sorted(result.figures or {}), "fit": job.name},
    )


def reuse(store: Store, jobs: list[FitJob], *, force: bool, figures: bool) -> tuple[dict[int, FitOutcome], list[int]]:
    """The cached outcomes of ``jobs`` (by index) and the indices of the jobs left to fit."""
    outcomes: dict[int, FitOutcome] = {}
    todo: list[int] = []
    for k, job in enumerate(jobs):
        cached = None if force else read_cached(store, job, figures=figures)
        if cached is None:
            todo.append(k)
        else:
            outcomes[k] = cached
    return outcomes, todo


def record(store: Store, job: FitJob, result: FitResult, seconds: float) -> FitOutcome:
    """A finished fit's outcome; a successful one is cached first."""
    if result.error is not None:
        return FitOutcome(job, FAILED, None, None, None, result.error, seconds, result.trace)
    write_cached(store, job, result)
    return FitOutcome(job, FITTED, result.tables, result.report, result.summary, None, seconds,
                      figures=result.figures)


def run_fits(
    store: Store,
    jobs: list[FitJob],
    *,
    force: bool = False,
    figures: bool = True,
    on_outcome: Callable[[FitOutcome], None] | None = None,
    fit: Callable[[FitJob, bool], FitResult] = fit_and_tabulate,
) -> list[FitOutcome]:
    """Every job's outcome, in job order: reused from the cache, or fitted here one after another.

    The no-orchestrator path (tests, benchmarks, the CLI's analysis commands);
    the flow does the same with the fits sent to Dask.
    """
    outcomes, todo = reuse(store, jobs, force=force, figures=figures)
    for outcome in outcomes.values():
        if on_outcome:
            on_outcome(outcome)
    for k in todo:
        started = time.perf_counter()
        result = fit(jobs[k], figures)
        outcomes[k] = record(store, jobs[k], result, time.perf_counter() - started)
        if on_outcome:
            on_outcome(outcomes[k])
    return [outcomes[k] for k in range(len(jobs))]


def tables_of(outcomes: Iterable[FitOutcome]) -> list[dict[str, pl.DataFrame]]:
    return [o.tables for o in outcomes if o.tables is not None]
