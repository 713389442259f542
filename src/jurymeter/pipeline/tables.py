"""The run's tidy tables: every registered analysis's tables, each row starting with the fit's names.

The schemas are the analyses' own, read through each analysis's tables part
(:attr:`jurymeter.analyses.base.TablesPart.tables`); ``docs/results.md``
documents them and ``tests/test_results_doc.py`` holds the two together.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import polars as pl

from jurymeter.analyses import analysis as analysis_named
from jurymeter.analyses import registered
from jurymeter.analyses.base import TablesPart

if TYPE_CHECKING:
    from polars._typing import PolarsDataType

    from jurymeter.pipeline.jobs import FitJob
    from jurymeter.pipeline.outcome import AnalysisOutcome

NAMES: dict[str, PolarsDataType] = {"item_set": pl.String(), "universe": pl.String(), "population": pl.String()}


def schemas() -> dict[str, dict[str, PolarsDataType]]:
    """Every published table's columns (the fit's names first), by table name, in registry order."""
    return {t.name: {**NAMES, **t.schema} for a in registered() for t in a.tables}


def empty(table: str) -> pl.DataFrame:
    return pl.DataFrame(schema=schemas()[table])


def frame(table: str, names: Mapping[str, str], rows: list[dict[str, Any]]) -> pl.DataFrame:
    """One fit's rows of ``table`` in its documented schema."""
    schema = schemas()[table]
    if not rows:
        return empty(table)
    return pl.DataFrame([{**names, **row} for row in rows], schema_overrides=schema).select(list(schema)).cast(schema)  # type: ignore[arg-type]  # polars types cast's mapping with an invariant key (str | selector | dtype): a dict[str, dtype] is refused


def fit_tables(job: FitJob, outcomes: Mapping[str, AnalysisOutcome]) -> dict[str, pl.DataFrame]:
    """The tidy tables of one fit: every table of every analysis of the job (empty where it did not run)."""
    out: dict[str, pl.DataFrame] = {}
    for name, outcome in outcomes.items():
        part: TablesPart[Any] = analysis_named(name)  # the tables part only
        rows = part.tabulate(outcome.result) if outcome.result is not None else {}
        for table in part.tables:
            out[table.name] = frame(table.name, job.names, rows.get(table.name, []))
    return out


def combine_tables(parts: Sequence[Mapping[str, pl.DataFrame]]) -> dict[str, pl.DataFrame]:
    """Concatenate the per-fit tables into the run's tables (every table present; empty ones keep their schema).

    One table at a time: a part that reads its tables as they are looked up
    (:class:`jurymeter.pipeline.cache.CachedTables`) holds only that table's frames meanwhile.
    """
    out = {}
    for table, schema in schemas().items():
        frames = [p[table].select(list(schema)).cast(schema) for p in parts if table in p]  # type: ignore[arg-type]  # as in frame()
        out[table] = pl.concat(frames) if frames else empty(table)
    return out
