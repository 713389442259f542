"""A fit's records as dense per-cell sums and counts: the chunked reading under :mod:`jurymeter.stats.blocks`.

Both generation modes of the block rule (``docs/gstudy.md``) first sum and count
the scores per cell of the full cross of the levels present, in dense numpy
arrays, streaming the records through polars in batches (``collect_batches``
where polars has it, else a streaming group-by), so memory is bounded by the
cells, not by the records; the presence array (one byte a cell) the rules are
decided on comes from the same streaming scan. Item chunks of the cells are
read one scan each (``items``: a range of item codes).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import polars as pl

from jurymeter.errors import DesignError

# The dense paths allocate one float per (system, item, judge[, generation], replicate
# level); beyond this many per input record the polars path is used instead.
DENSE_CELLS_PER_RECORD = 4


# ``LazyFrame.collect_batches`` (recent polars; marked unstable there) streams the
# records through numpy in batches; without it the cells are summed by a streaming
# polars group-by, which holds a hash table of the cells (about 2-3x more memory).
_STREAM_BATCHES = hasattr(pl.LazyFrame, "collect_batches")


@dataclass(frozen=True)
class CellSums:
    """Score sums and record counts per cell of the full cross of the levels present.

    Made by :func:`_sum_cells` for a range of items (all of them, or one chunk).
    """

    levels: list[list[object]]  # sorted levels of each key column
    sums: np.ndarray  # float64, one axis per key column
    counts: np.ndarray  # int32, same shape
    records: int
    keys: tuple[str, ...] = ()  # the key columns, one per axis


def _level_index(column: str, levels: list[Any]) -> pl.Expr:
    """Each value's position in the sorted ``levels`` (every value is among them).

    Only element-wise expressions, so the streaming engine keeps to one batch at a
    time (``replace_strict`` would materialise the column).
    """
    if isinstance(levels[0], str):
        return pl.col(column).cast(pl.Enum(levels)).to_physical().cast(pl.Int64)
    first, last = int(levels[0]), int(levels[-1])
    if last - first + 1 == len(levels):
        return pl.col(column).cast(pl.Int64) - first
    return pl.col(column).cast(pl.String).cast(pl.Enum([str(v) for v in levels])).to_physical().cast(pl.Int64)


def _cell_levels(lazy: pl.LazyFrame, keys: tuple[str, ...]) -> tuple[list[list[Any]], int] | None:
    """The sorted levels of every key column and the record count, by streaming queries.

    Returns ``None`` (the caller falls back to the polars path) for what the
    dense paths do not cover: a missing column, id columns that are not text,
    generation or replicate columns that are not integers, nulls in a key or a
    score, and cells too sparse to be worth a dense array.
    """
    schema = lazy.collect_schema()
    if any(c not in schema for c in (*keys, "score")):
        return None  # the polars path raises polars' own error
    if any(schema[c] != pl.String for c in keys[:3]) or any(not schema[c].is_integer() for c in keys[3:]):
        return None
    # One query per column: run together (``collect_all``, or one select) they
    # peaked at 3x the memory on a store's scan (0.67 against 0.20 GB, 7.5M records).
    # The last (an integer column) is a group-by that also counts the records and
    # the null scores: one scan less than a query of its own.
    level_frames = [lazy.select(pl.col(c).unique().sort()).collect(engine="streaming") for c in keys[:-1]]
    last = keys[-1]
    counted = (
        lazy.group_by(last)
        .agg(pl.len().alias("n"), pl.col("score").null_count().alias("null_scores"))
        .sort(last)
        .collect(engine="streaming")
    )
    level_frames.append(counted.select(last))
    n = int(counted["n"].sum())
    if not n:
        msg = "no pointwise records to fit"
        raise DesignError(msg)
    if counted["null_scores"].sum() or any(frame.to_series().null_count() for frame in level_frames):
        return None
    levels = [frame.to_series().to_list() for frame in level_frames]
    if int(np.prod([len(v) for v in levels])) > DENSE_CELLS_PER_RECORD * n + 1_000_000:
        return None
    return levels, n


def _cell_index(keys: tuple[str, ...], levels: list[list[object]], items: tuple[int, int]) -> pl.Expr:
    """Each record's flat cell index among the items ``items[0] <= k < items[1]`` (axis 1)."""
    flat: pl.Expr | None = None
    for axis, (column, values) in enumerate(zip(keys, levels, strict=True)):
        index, size = _level_index(column, values), len(values)
        if axis == 1:
            index, size = index - items[0], items[1] - items[0]
        flat = index if flat is None else flat * size + index
    assert flat is not None
    return flat


def _chunk_records(
    lazy: pl.LazyFrame, keys: tuple[str, ...], levels: list[list[object]], items: tuple[int, int]
) -> pl.LazyFrame:
    """The records of the item range (all of them for every item)."""
    if items == (0, len(levels[1])):
        return lazy
    index = _level_index(keys[1], levels[1])
    return lazy.filter((index >= items[0]) & (index < items[1]))


def _sum_cells(
    lazy: pl.LazyFrame, keys: tuple[str, ...], levels: list[list[object]], records: int, items: tuple[int, int]
) -> CellSums:
    """Sum and count the scores per cell of the items ``items`` (one streaming pass).

    Memory is bounded by those items' cells, not by the records: one integer
    cell index per record, streamed in batches into dense sum and count arrays.
    """
    shape = (len(levels[0]), items[1] - items[0], *(len(v) for v in levels[2:]))
    size = int(np.prod(shape))
    frame = _chunk_records(lazy, keys, levels, items).select(
        _cell_index(keys, levels, items).alias("flat"), pl.col("score").cast(pl.Float64)
    )
    sums = np.zeros(size)
    counts = np.zeros(size, dtype=np.int32)
    if _STREAM_BATCHES:
        # Record order is kept so sums add up in the same order on every run, and
        # in every chunking of the items.
        for batch in frame.collect_batches(maintain_order=True, engine="streaming"):
            index = batch.get_column("flat").to_numpy()
            np.add.at(sums, index, batch.get_column("score").to_numpy())
            np.add.at(counts, index, np.int32(1))  # a typed scalar: numpy's fast path
    else:  # older polars (also tested)
        per_cell = frame.group_by("flat").agg(pl.col("score").sum(), pl.len()).collect(engine="streaming")
        index = per_cell.get_column("flat").to_numpy()
        sums[index] = per_cell.get_column("score").to_numpy()
        counts[index] = per_cell.get_column("len").to_numpy()
    chunk_levels = [levels[0], levels[1][items[0] : items[1]], *levels[2:]]
    return CellSums(levels=chunk_levels, sums=sums.reshape(shape), counts=counts.reshape(shape), records=records, keys=keys)


def _presence(
    lazy: pl.LazyFrame, keys: tuple[str, ...], levels: list[list[object]], chunks: list[tuple[int, int]]
) -> np.ndarray:
    """Which cells hold a record, one byte a cell; what the rules decide on.

    One streaming pass per chunk of items: polars' streaming engine holds about
    a batch of every key column per record it has read ahead, so one pass over
    all records peaked at +0.45 GB for 25M records against +0.12 GB in chunks
    of 2M cells, in about the same time (ad-hoc, ``bench/_work``).
    """
    shape = tuple(len(v) for v in levels)
    has = np.zeros(shape, dtype=bool)
    for items in chunks:
        frame = _chunk_records(lazy, keys, levels, items).select(_cell_index(keys, levels, items).alias("flat"))
        part = np.zeros((shape[0], items[1] - items[0], *shape[2:]), dtype=bool)
        flat = part.reshape(-1)  # a view: setting it sets ``part``
        if _STREAM_BATCHES:
            for batch in frame.collect_batches(engine="streaming"):
                flat[batch.get_column("flat").to_numpy()] = True
        else:  # older polars
            flat[frame.unique().collect(engine="streaming").get_column("flat").to_numpy()] = True
        has[:, items[0] : items[1]] = part
    return has


FACET_KEYS = ("system_id", "item_id", "judge_id", "generation", "replicate")


AVERAGE_KEYS = ("system_id", "item_id", "judge_id", "replicate")


def averaged_cells(cells: CellSums) -> CellSums:
    """The (system, item, judge, replicate) cells of facet-keyed cells: sums and counts over generations."""
    if cells.keys == AVERAGE_KEYS:
        return cells
    systems, items, judges, _, replicates = cells.levels
    return CellSums(
        levels=[systems, items, judges, replicates],
        sums=cells.sums.sum(axis=3),
        counts=cells.counts.sum(axis=3, dtype=np.int32),
        records=cells.records,
        keys=AVERAGE_KEYS,
    )
