"""The run history: the numbers the analyses follow, read back from a store's published run folders.

Nothing is refitted: every value comes from a run folder's tables and
``summary.json`` (``docs/results.md``), read with a projection onto the
columns the registered analyses' :attr:`~jurymeter.analyses.base.SummaryPart.tracked`
declarations name. This module is the only place the history reads; the
statistics are :mod:`jurymeter.stats.drift` and the page is
:mod:`jurymeter.render.history`. It iterates the registry and names no analysis.

A run whose report is being written has no ``summary.json`` yet: its tables
and summary are passed in memory (``current``) and taken as the newest run.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import orjson
import polars as pl

from jurymeter.analyses import registered
from jurymeter.errors import ConfigError
from jurymeter.stats.drift import (
    CHANGE_SCHEMA,
    FLAG_LEVEL,
    SERIES,
    excess_flags_p,
    failure_rate_changes,
    flag_changes,
)

if TYPE_CHECKING:
    from jurymeter.analyses.base import Analysis, Tracked
    from jurymeter.io.store import Store

FIT_COLUMNS = ("item_set", "universe", "population")
DEFAULT_LIMIT = 30
HISTORY_SERIES = (*SERIES[:3], "analysis", *SERIES[3:])

VALUE_SCHEMA: dict[str, Any] = {
    "run_id": pl.String,
    "started": pl.String,
    "item_set": pl.String,
    "universe": pl.String,
    "population": pl.String,
    "analysis": pl.String,
    "name": pl.String,
    "unit": pl.String,
    "subject_column": pl.String,
    "subject": pl.String,
    "estimate": pl.Float64,
    "low": pl.Float64,
    "high": pl.Float64,
    "drift": pl.Boolean,
}
FIT_SCHEMA: dict[str, Any] = {
    "run_id": pl.String,
    "started": pl.String,
    "item_set": pl.String,
    "universe": pl.String,
    "population": pl.String,
    "protocol": pl.String,
    "status": pl.String,
    "error": pl.String,
}
RUN_SCHEMA: dict[str, Any] = {
    "run_id": pl.String,
    "started": pl.String,
    "status": pl.String,
    "fits": pl.Int64,
    "failed": pl.Int64,
}
CHANGE_COLUMNS = ("item_set", "universe", "population", "analysis", "name", "unit", "previous", "current", "change")

Run = tuple[Mapping[str, pl.DataFrame], Mapping[str, Any]]
FitKey = tuple[str, str, str, str]  # item_set, universe, population, protocol


@dataclass(frozen=True, eq=False)
class SinceLastRun:
    """What changed between the last two runs of a history.

    Attributes
    ----------
    run_id, previous_run_id : str
        The newest run and the one before it.
    fits_added, fits_removed : tuple of (item_set, universe, population, protocol)
        Fits in one run and not the other.
    fits_failed : tuple of (item_set, universe, population, protocol, error)
        Fits that failed in the newest run.
    changes : polars.DataFrame
        Per fit, every followed number with one value per fit (records, MDD...):
        ``CHANGE_COLUMNS`` (previous and current value, their difference).
    flagged : polars.DataFrame
        The newest run's rows of :attr:`RunHistory.values` whose change was flagged.
    failure_flags : polars.DataFrame
        The newest run's rows of :attr:`RunHistory.failure_rates` that were flagged.
    judges_new, judges_gone : tuple of str
        Judges seen in the newest run and not the previous one, and the reverse.
    flag_counts : polars.DataFrame
        Per judge and followed number of the newest run: ``tested`` (its series
        with a flag decided), ``flagged``, ``p`` (:func:`jurymeter.stats.drift.excess_flags_p`:
        how surprising that many flags are when nothing changed) and ``alert``
        (``p <= 0.05``): what the alerts say, so that a judge scoring 100 fits is
        not alerted for the 5 flags chance gives it every night.
    """

    run_id: str
    previous_run_id: str
    fits_added: tuple[FitKey, ...]
    fits_removed: tuple[FitKey, ...]
    fits_failed: tuple[tuple[str, str, str, str, str], ...]
    changes: pl.DataFrame
    flagged: pl.DataFrame
    failure_flags: pl.DataFrame
    judges_new: tuple[str, ...]
    judges_gone: tuple[str, ...]
    flag_counts: pl.DataFrame = field(default_factory=lambda: pl.DataFrame(schema=FLAG_COUNT_SCHEMA))


FLAG_COUNT_SCHEMA: dict[str, Any] = {"subject": pl.String, "name": pl.String, "tested": pl.Int64,
                                     "flagged": pl.Int64, "p": pl.Float64, "alert": pl.Boolean}


@dataclass(frozen=True, eq=False)
class RunHistory:
    """The published runs of a store, oldest first, and what they say of the followed numbers.

    Attributes
    ----------
    runs : polars.DataFrame
        One row per run (``RUN_SCHEMA``), oldest first by ``started``.
    fits : polars.DataFrame
        One row per run and fit (``FIT_SCHEMA``): its protocol, status and error.
    values : polars.DataFrame
        The long frame of followed values (``VALUE_SCHEMA``) with the drift
        columns of :func:`jurymeter.stats.drift.flag_changes`, one series per
        ``HISTORY_SERIES``.
    failure_rates : polars.DataFrame
        Per run and judge, the store's failure rate with its Wilson interval and
        its comparison with the previous run (:func:`jurymeter.stats.drift.failure_rate_changes`).
    since : SinceLastRun or None
        What changed between the last two runs; ``None`` with one run.
    """

    runs: pl.DataFrame
    fits: pl.DataFrame
    values: pl.DataFrame
    failure_rates: pl.DataFrame
    since: SinceLastRun | None

    @property
    def run_ids(self) -> list[str]:
        return list(self.runs["run_id"])


def tracked_columns(analyses: Iterable[Analysis[Any, Any]] | None = None) -> dict[str, tuple[str, ...]]:
    """Per published table, the columns the tracked declarations read (the fit's names first)."""
    wanted: dict[str, dict[str, None]] = {}
    for analysis in registered() if analyses is None else analyses:
        for tracked in analysis.tracked:
            if tracked.table is not None:
                cols = wanted.setdefault(tracked.table, dict.fromkeys(FIT_COLUMNS))
                cols.update(dict.fromkeys(tracked.columns()))
    return {table: tuple(cols) for table, cols in wanted.items()}


def published_runs(store: Store) -> list[str]:
    """The store's published run folders (``results/<run_id>/`` holding ``summary.json``), as folder names."""
    pattern = store.path("results", "*", "summary.json")
    try:
        found = store.fs.glob(pattern)
    except FileNotFoundError:
        return []
    return sorted(str(p).rstrip("/").rsplit("/", 2)[-2] for p in found)


def load_history(
    store: Store,
    *,
    limit: int = DEFAULT_LIMIT,
    current: Run | None = None,
) -> RunHistory:
    """The history of the store's published runs (at most ``limit``, the most recent), oldest first.

    Parameters
    ----------
    store : Store
        The store whose ``results/`` is read.
    limit : int, default 30
        How many of the most recent runs to keep (the current one included).
    current : (tables, summary), optional
        A run not yet published (its report is written before its
        ``summary.json``): taken as the newest run, in place of a folder of
        the same ``run_id``.

    Returns
    -------
    RunHistory
    """
    if limit < 1:
        msg = f"limit must be at least 1, got {limit}"
        raise ConfigError(msg)
    columns = tracked_columns()
    current_id = str(current[1].get("run_id", "")) if current is not None else None
    # Each summary holds every fit of its run, so the summaries of a long history are not held together:
    # a first pass keeps only their order keys, and the runs kept are read again one at a time as the
    # history is built (issue 25: what a night holds must not grow with the history).
    order: list[tuple[str, str, str]] = []  # (started, run_id, folder)
    for run in published_runs(store):
        if run == current_id:
            continue
        summary = _read_summary(store, run)
        if summary is not None:
            order.append((str(summary.get("started") or ""), str(summary["run_id"]), run))
    order.sort()
    if current is not None:  # a report rebuilt for an older run shows the history up to that run
        until = str(current[1].get("started") or "")
        order = [o for o in order if o[0] <= until]
    keep = limit - (current is not None)
    order = order[len(order) - keep:] if keep > 0 else []

    def runs() -> Iterator[Run]:
        for _, _, run in order:
            again = _read_summary(store, run)
            if again is not None:  # removed since the first pass: left out
                yield _read_tables(store, run, columns), again
        if current is not None:
            tables, now = current
            yield {t: _project(tables[t], cols) for t, cols in columns.items() if t in tables}, now

    return history_of(runs())


def _read_summary(store: Store, run: str) -> dict[str, Any] | None:
    """A published run's ``summary.json`` (its ``run_id`` defaulting to the folder's name), or ``None``."""
    try:
        summary = orjson.loads(store.fs.cat_file(store.path("results", run, "summary.json")))
    except (FileNotFoundError, orjson.JSONDecodeError):
        return None  # a folder being written, or damaged: not a published run
    if not isinstance(summary, dict):
        return None
    summary.setdefault("run_id", run)
    return summary


def history_of(runs: Iterable[Run], analyses: Sequence[Analysis[Any, Any]] | None = None) -> RunHistory:
    """The history of runs (oldest first): their tables (projected or whole) and summaries, each taken
    once and not kept."""
    chosen = registered() if analyses is None else tuple(analyses)
    value_parts: list[pl.DataFrame] = []
    fit_rows: list[dict[str, Any]] = []
    run_rows: list[dict[str, Any]] = []
    health_rows: list[dict[str, Any]] = []
    judges_of: list[set[str]] = []
    for tables, summary in runs:
        run_id, started = str(summary.get("run_id", "")), str(summary.get("started") or "")
        fits = [f for f in summary.get("fits") or [] if isinstance(f, dict)]
        for f in fits:
            fit_rows.append({"run_id": run_id, "started": started, **{c: f.get(c) for c in FIT_SCHEMA if c not in ("run_id", "started")}})
        run_rows.append({"run_id": run_id, "started": started, "status": summary.get("status"),
                         "fits": len(fits), "failed": sum(f.get("status") == "failed" for f in fits)})
        judges = set()
        for row in summary.get("judges") or []:
            stored, failed = int(row.get("stored") or 0), int(row.get("failed") or 0)
            health_rows.append({"run_id": run_id, "started": started, "judge_id": str(row.get("judge_id")),
                                "failed": failed, "total": stored + failed})
            judges.add(str(row.get("judge_id")))
        for analysis in chosen:
            for tracked in analysis.tracked:
                part = _tracked_values(tables, fits, analysis.name, tracked)
                if part.height:
                    value_parts.append(part.with_columns(run_id=pl.lit(run_id), started=pl.lit(started)))
                    if tracked.subject == "judge_id":
                        judges.update(s for s in part["subject"].to_list() if s is not None)
        judges_of.append(judges)
    values = pl.concat([p.select(list(VALUE_SCHEMA)) for p in value_parts]) if value_parts else pl.DataFrame(schema=VALUE_SCHEMA)
    flagged = flag_changes(values, series=HISTORY_SERIES) if values.height else pl.DataFrame(schema={**VALUE_SCHEMA, **CHANGE_SCHEMA})
    health = pl.DataFrame(health_rows, schema={"run_id": pl.String, "started": pl.String, "judge_id": pl.String,
                                               "failed": pl.Int64, "total": pl.Int64})
    history = RunHistory(
        runs=pl.DataFrame(run_rows, schema=RUN_SCHEMA),
        fits=pl.DataFrame(fit_rows, schema=FIT_SCHEMA),
        values=flagged,
        failure_rates=failure_rate_changes(health),
        since=None,
    )
    if len(judges_of) < 2:
        return history
    since = _since(history, judges_of[-2], judges_of[-1])
    return RunHistory(history.runs, history.fits, history.values, history.failure_rates, since)


# ------------------------------------------------------------ reading


def _read_tables(store: Store, run_id: str, columns: Mapping[str, Sequence[str]]) -> dict[str, pl.DataFrame]:
    """The tracked columns of each tracked table of one run folder (a table the run lacks is left out)."""
    import pyarrow.parquet as pq

    out: dict[str, pl.DataFrame] = {}
    for table, cols in columns.items():
        path = store.path("results", run_id, f"{table}.parquet")
        try:
            with store.fs.open(path, "rb") as handle:
                parquet = pq.ParquetFile(handle)
                present = [c for c in cols if c in parquet.schema_arrow.names]
                frame = pl.from_arrow(parquet.read(columns=present))
        except FileNotFoundError:
            continue
        assert isinstance(frame, pl.DataFrame)
        out[table] = frame
    return out


def _project(frame: pl.DataFrame, cols: Sequence[str]) -> pl.DataFrame:
    return frame.select([c for c in cols if c in frame.columns])


def _tracked_values(tables: Mapping[str, pl.DataFrame], fits: Sequence[Mapping[str, Any]], analysis: str, tracked: Tracked) -> pl.DataFrame:
    """One tracked number's rows of one run, in ``VALUE_SCHEMA`` (without the run's columns)."""
    meta = {"analysis": analysis, "name": tracked.name, "unit": tracked.unit,
            "subject_column": tracked.subject, "drift": tracked.drift}
    if tracked.headline is not None:
        rows = []
        for f in fits:
            part = (f.get("analyses") or {}).get(analysis)
            if not isinstance(part, Mapping) or tracked.headline not in part:
                continue  # the analysis did not run for this fit, or an older run lacks the key
            value = part[tracked.headline]
            number = float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None
            rows.append({**{c: f.get(c) for c in FIT_COLUMNS}, "subject": None, "estimate": number,
                         "low": None, "high": None, **meta})
        return pl.DataFrame(rows, schema={c: t for c, t in VALUE_SCHEMA.items() if c not in ("run_id", "started")})
    frame = tables.get(str(tracked.table))
    if frame is None or frame.height == 0 or not all(c in frame.columns for c in (*FIT_COLUMNS, tracked.estimate)):
        return pl.DataFrame()
    if tracked.select is not None:
        column, value = tracked.select
        if column not in frame.columns:
            return pl.DataFrame()
        frame = frame.filter(pl.col(column) == value)

    def col(name: str | None, dtype: Any) -> pl.Expr:
        if name is None or name not in frame.columns:
            return pl.lit(None, dtype)
        return pl.col(name).cast(dtype)

    return frame.select(
        *[pl.col(c).cast(pl.String) for c in FIT_COLUMNS],
        col(tracked.subject, pl.String).alias("subject"),
        col(tracked.estimate, pl.Float64).alias("estimate"),
        col(tracked.low, pl.Float64).alias("low"),
        col(tracked.high, pl.Float64).alias("high"),
        *[pl.lit(v, VALUE_SCHEMA[k]).alias(k) for k, v in meta.items()],
    )


# ------------------------------------------------------------ since the last run


def _since(history: RunHistory, judges_before: set[str], judges_now: set[str]) -> SinceLastRun:
    previous_id, run_id = history.run_ids[-2], history.run_ids[-1]

    def fits_of(run: str) -> pl.DataFrame:
        return history.fits.filter(pl.col("run_id") == run)

    def keys(frame: pl.DataFrame) -> set[FitKey]:
        return {(str(a), str(b), str(c), str(d or "")) for a, b, c, d in frame.select(*FIT_COLUMNS, "protocol").iter_rows()}

    now, before = fits_of(run_id), fits_of(previous_id)
    failed = now.filter(pl.col("status") == "failed")
    per_fit = history.values.filter(pl.col("subject").is_null() & pl.col("run_id").is_in([previous_id, run_id]))
    key = [*FIT_COLUMNS, "analysis", "name", "unit"]
    changes = (
        per_fit.filter(pl.col("run_id") == previous_id).select(*key, pl.col("estimate").alias("previous"))
        .join(per_fit.filter(pl.col("run_id") == run_id).select(*key, pl.col("estimate").alias("current")),
              on=key, how="full", coalesce=True, nulls_equal=True)
        .with_columns(change=pl.col("current") - pl.col("previous"))
        .select(CHANGE_COLUMNS)
        .sort(key)
    )
    return SinceLastRun(
        run_id=run_id,
        previous_run_id=previous_id,
        fits_added=tuple(sorted(keys(now) - keys(before))),
        fits_removed=tuple(sorted(keys(before) - keys(now))),
        fits_failed=tuple(
            (str(r[0]), str(r[1]), str(r[2]), str(r[3] or ""), str(r[4] or ""))
            for r in failed.select(*FIT_COLUMNS, "protocol", "error").iter_rows()
        ),
        changes=changes,
        flagged=history.values.filter((pl.col("run_id") == run_id) & pl.col("flagged").fill_null(False)),
        failure_flags=history.failure_rates.filter((pl.col("run_id") == run_id) & pl.col("flagged").fill_null(False)),
        judges_new=tuple(sorted(judges_now - judges_before)),
        judges_gone=tuple(sorted(judges_before - judges_now)),
        flag_counts=_flag_counts(history.values.filter(pl.col("run_id") == run_id)),
    )


def _flag_counts(newest: pl.DataFrame) -> pl.DataFrame:
    """Per judge and number, of the newest run: series tested, flagged, and whether that is more than chance."""
    tested = newest.filter(pl.col("subject").is_not_null() & pl.col("drift") & pl.col("flagged").is_not_null())
    if tested.height == 0:
        return pl.DataFrame(schema=FLAG_COUNT_SCHEMA)
    counts = (tested.group_by("subject", "name")
              .agg(tested=pl.len().cast(pl.Int64), flagged=pl.col("flagged").sum().cast(pl.Int64))
              .sort("subject", "name"))
    p = [excess_flags_p(k, n) for k, n in counts.select("flagged", "tested").iter_rows()]
    return counts.with_columns(p=pl.Series(p, dtype=pl.Float64)).with_columns(
        alert=(pl.col("flagged") > 0) & (pl.col("p") <= FLAG_LEVEL)).select(list(FLAG_COUNT_SCHEMA))
