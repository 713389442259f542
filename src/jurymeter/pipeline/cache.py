"""The fit cache and the cache-or-fit policy every run path shares (the flow, tests, benchmarks).

A fit whose content key (:meth:`jurymeter.pipeline.jobs.FitJob.key`) has a
complete cache folder is reused instead of refitted, and carries the same
summary, report and figures as when it was fitted. The folder is
``results/cache/<key>/``: each table as Parquet (Parquet keeps ``inf``,
"never reached", which JSON cannot), ``report.json``, ``summary.json``, the
figures, and ``complete.json`` written last, which makes it visible.

A run reuses most of its fits (every item set whose records did not change),
so what it reads of them is what the main process holds until the run is
published. It holds none of it: a reused fit's tables are read as the run's
combined tables are built, one table at a time (:class:`CachedTables`), its
figures as the report embeds them (:class:`CachedFigures`), and its report is
copied as it is (:attr:`FitOutcome.report_file`). Held whole, they grew the
main process's peak by about 3 MB per reused fit, so a night's peak grew with
the history (issue 25; ``bench/RESULTS.md``).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar

import orjson
import polars as pl

from jurymeter.io.store import Store
from jurymeter.pipeline.fit import FitResult, fit_and_tabulate
from jurymeter.pipeline.jobs import FitJob

if TYPE_CHECKING:
    from jurymeter.pipeline.config import RunConfig

CACHE = "results/cache"
T = TypeVar("T")
FITTED, REUSED, FAILED = "fitted", "reused", "failed"


@dataclass(slots=True)
class FitOutcome:
    """What became of one fit in a run."""

    job: FitJob
    status: str  # "fitted" | "reused" | "failed"
    tables: Mapping[str, pl.DataFrame] | None
    report: dict[str, Any] | None
    summary: dict[str, Any] | None  # each analysis's part of the run summary
    error: str | None
    seconds: float
    trace: str | None = None
    figures: Mapping[str, bytes] | None = None
    # A reused fit read without its report: the cached report.json (relative to the store), published as it is.
    report_file: str | None = None


class _ReadWhenLookedUp(Mapping[str, T]):
    """Files of a cache folder by name, each read from the store when it is looked up (not held)."""

    def __init__(self, store: Store, folder: str, names: Iterable[str]) -> None:
        self._store, self._folder, self._names = store, folder, frozenset(names)

    def _read(self, name: str) -> T:
        raise NotImplementedError

    def __getitem__(self, name: str) -> T:
        if name not in self._names:
            raise KeyError(name)
        return self._read(name)

    def __iter__(self) -> Iterator[str]:
        return iter(sorted(self._names))

    def __len__(self) -> int:
        return len(self._names)


class CachedTables(_ReadWhenLookedUp[pl.DataFrame]):
    """A cached fit's tables by name, read as they are looked up.

    Held, the 19 small frames of a fit cost about 0.5 MB of the process's memory each fit (polars's
    per-frame overhead, 3x their data); read one table at a time across fits, only the combined table is.
    """

    def _read(self, name: str) -> pl.DataFrame:
        return self._store.read_parquet(self._store.path(f"{self._folder}/{name}.parquet"))


class CachedFigures(_ReadWhenLookedUp[bytes]):
    """A cached fit's PNGs by file name, read as they are looked up."""

    def _read(self, name: str) -> bytes:
        data: bytes = self._store.fs.cat_file(self._store.path(f"{self._folder}/figures/{name}"))
        return data


class FiguresOf(Mapping[str, bytes]):
    """The figures of several outcomes as one mapping by file name, each looked up in its own fit's."""

    def __init__(self, outcomes: Iterable[FitOutcome]) -> None:
        self._owner = {name: o.figures for o in outcomes if o.figures for name in o.figures}

    def __getitem__(self, name: str) -> bytes:
        return self._owner[name][name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._owner)

    def __len__(self) -> int:
        return len(self._owner)


def dumps(obj: Any) -> bytes:
    return orjson.dumps(obj, option=orjson.OPT_INDENT_2 | orjson.OPT_SERIALIZE_NUMPY | orjson.OPT_NON_STR_KEYS)


def _folder(job: FitJob) -> str:
    return f"{CACHE}/{job.key()}"


def read_cached(store: Store, job: FitJob, *, figures: bool, hold: bool = True) -> FitOutcome | None:
    """The outcome of an earlier fit with the same content key, or ``None`` when there is none.

    Its figures (``figures``) are read from the store as they are looked up
    (:class:`CachedFigures`). ``hold`` reads its tables and report now;
    without it, the tables are read as they are looked up (:class:`CachedTables`)
    and :attr:`FitOutcome.report_file` names the report's file instead.
    """
    folder = _folder(job)
    report_file = f"{folder}/report.json"
    try:
        marker = store.read_json(f"{folder}/complete.json")
        summary = store.read_json(f"{folder}/summary.json")
        if hold:
            report = store.read_json(report_file)
        elif not store.fs.exists(store.path(report_file)):
            return None
    except FileNotFoundError:
        return None
    drawn = CachedFigures(store, folder, marker.get("figures", [])) if figures else None
    if hold:
        tables = {t: store.read_parquet(store.path(f"{folder}/{t}.parquet")) for t in marker["tables"]}
        return FitOutcome(job, REUSED, tables, report, summary, None, 0.0, figures=drawn)
    return FitOutcome(job, REUSED, CachedTables(store, folder, marker["tables"]), None, summary, None, 0.0,
                      figures=drawn, report_file=report_file)


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
    """The cached outcomes of ``jobs`` (by index) and the indices of the jobs left to fit.

    Their tables, figures and reports stay in the cache until the run publishes them (``hold=False`` of
    :func:`read_cached`): a run holds only the reused fits' summaries.
    """
    outcomes: dict[int, FitOutcome] = {}
    todo: list[int] = []
    for k, job in enumerate(jobs):
        cached = None if force else read_cached(store, job, figures=figures, hold=False)
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


def tables_of(outcomes: Iterable[FitOutcome]) -> list[Mapping[str, pl.DataFrame]]:
    return [o.tables for o in outcomes if o.tables is not None]
