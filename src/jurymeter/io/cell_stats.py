"""Mergeable cell statistics of pointwise item sets: what the G-study fits read instead of the records.

Per (system_id, item_id, judge_id, generation, replicate) cell of one item set:
``records`` (rows), ``count`` (non-null scores), ``sum`` and ``sumsq`` of the
score (float64; a cell holds one record unless the item set is flagged in
``_rated_cells.json``, so each sum is a score itself and exact). Layout::

    cells/protocol=pointwise/item_set=<enc>/part-<sid>-cells.parquet  one committed source's cells
    cells/protocol=pointwise/item_set=<enc>/merged.json               the merged table: levels, sources
                                                                      (or ``"dense": false``: none for them)
    cells/protocol=pointwise/item_set=<enc>/merged-<token>.npz        its dense arrays

A source's cell file is written at its commit, from its final parts (after the
duplicate pass rewrote them), just before its marker: it carries the source id
as a data part does, so it counts only once the marker exists, and
``Store.remove_uncommitted`` removes it otherwise. Committed parts never change
(the duplicate pass rewrites only the new source's parts), so a committed
source's cells never change either and statistics merge by addition.

The merged table is the sum of the cell files of the sources it names, as
dense arrays over the sorted levels of each key (the layout the fits' one-scan
sums have: ``stats.block_cells.CellSums``). A read (:func:`item_set_cells`)
adds the cell files of sources committed since to it, cost O(new cells +
cells), and rewrites it (arrays under a new token first, then ``merged.json``
in one atomic step) when it added any. A store without cell files (written
before them) builds each source's file from its parts on first need. Where the
cells would be too sparse for dense arrays, or a key is null, there is no
merged table (``None``): the fit scans the records.
"""

from __future__ import annotations

import contextlib
import functools
import io
import uuid
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import polars as pl

from jurymeter.errors import StoreError
from jurymeter.io.schema import POINTWISE, Protocol
from jurymeter.io.store import CELLS_ROOT, Store

if TYPE_CHECKING:
    from polars._typing import PolarsDataType

CELL_KEYS = ("system_id", "item_id", "judge_id", "generation", "replicate")
# A cell file's columns and their types.
CELL_DTYPES: dict[str, PolarsDataType] = {
    **{k: POINTWISE.dtypes[k] for k in CELL_KEYS},
    "records": pl.Int64(), "count": pl.Int64(), "sum": pl.Float64(), "sumsq": pl.Float64(),
}
MERGED_FILE = "merged.json"
CELLS_FORMAT = 1
# Dense arrays hold every cell of the levels' full cross; beyond this many per
# record (plus a constant) the merged table is not kept (the fits' own dense
# limit, ``stats.block_cells.DENSE_CELLS_PER_RECORD``, is the same).
CELLS_PER_RECORD = 4
# Nor beyond this many cells at all: a merge holds three arrays of them (20 bytes a
# cell), and a fit the counts and sums; larger item sets are read in item chunks
# from their records (``stats.blocks.CHUNK_CELLS``), whose memory does not grow so.
MAX_CELLS = 64_000_000
# Cells of a source's cell file read at a time when merged: the merge's memory beside its dense arrays.
CELL_BATCH = 500_000


@dataclass(frozen=True)
class DenseCells:
    """The merged cell statistics of one item set, dense over the sorted levels of :data:`CELL_KEYS`.

    ``counts`` (int32: non-null scores), ``sums`` and ``sumsq`` (float64) have
    one axis per key; ``records`` counts every record (null scores included),
    ``null_scores`` those without a score, ``most_records`` the most records of
    any cell (above 1 only in an item set with several ratings of a cell).
    """

    levels: list[list[Any]]
    counts: np.ndarray
    sums: np.ndarray
    sumsq: np.ndarray | None  # None when read for a fit, which needs no squares
    records: int
    null_scores: int
    most_records: int
    sources: tuple[str, ...]


def cells_dir(protocol: Protocol, item_set: str) -> str:
    """The folder of an item set's cell statistics (its data partition's path under ``cells/``)."""
    return CELLS_ROOT + Store.partition_dir(protocol, item_set)[len("data") :]


def cell_file(protocol: Protocol, item_set: str, sid: str) -> str:
    return f"{cells_dir(protocol, item_set)}/part-{sid}-cells.parquet"


def part_cells(store: Store, paths: list[str]) -> pl.DataFrame:
    """The cells of some pointwise parts: records, non-null scores, sum and sum of squares per cell.

    Where every record is its own cell (distinct key hashes: the usual case, as
    the key is the cell's but for the rating columns) each row is its cell, read
    in one pass: 1.3 s for 10M records against 3.8 s for a streaming group-by
    (10 s in memory). A repeated hash (two ratings of a cell, or a collision)
    takes the group-by.
    """
    score = pl.col("score").cast(pl.Float64)
    records = store.scan_files(paths, [*CELL_KEYS, "score"], "pointwise")
    counted = records.select(pl.len(), pl.struct(*CELL_KEYS).hash().n_unique().alias("cells")).collect()
    if counted["cells"].item() == counted["len"].item():
        return records.select(*CELL_KEYS, pl.lit(1, dtype=pl.Int64).alias("records"),
                              score.is_not_null().cast(pl.Int64).alias("count"), score.fill_null(0.0).alias("sum"),
                              (score * score).fill_null(0.0).alias("sumsq")).collect()
    return (
        records.group_by(CELL_KEYS)
        .agg(pl.len().cast(pl.Int64).alias("records"), score.count().cast(pl.Int64).alias("count"),
             score.sum().alias("sum"), (score * score).sum().alias("sumsq"))
        .collect(engine="streaming")
    )


def write_source_cells(store: Store, sid: str, protocol: Protocol | None, parts: list[tuple[str | None, str]]) -> None:
    """Write one source's cell files, one per pointwise item set of its final ``parts`` (at its commit).

    Called by the ingest just before the source's marker; ``parts`` are
    ``(item_set, relpath)`` as staged, after the duplicate pass.
    """
    if protocol != "pointwise":
        return
    by_set: dict[str, list[str]] = {}
    for item_set, relpath in parts:
        if item_set is not None:
            by_set.setdefault(item_set, []).append(store.path(relpath))
    for item_set, paths in by_set.items():
        store.write_parquet_atomic(cell_file(protocol, item_set, sid), part_cells(store, paths))


def _source_cells(store: Store, protocol: Protocol, item_set: str, sid: str, parts: dict[str, list[str]]) -> Iterator[pl.DataFrame]:
    """A committed source's cells in batches of :data:`CELL_BATCH`: its cell file, or built from its parts and
    written (a store older than them)."""
    relpath = cell_file(protocol, item_set, sid)
    if store.fs.exists(store.path(relpath)):
        # polars' own reader on both backends, a slice at a time: each slice reads only its row groups (pyarrow's
        # reader of the whole object merged 6M cells from S3 in 1.88 GB peak; polars's whole, 1.24 GB). Not
        # `collect_batches`, whose engine runs ahead of the consumer: it held all 6M cells of a file (+296 MiB,
        # against +134 MiB for slices of 500K).
        scan = store.scan_files([store.path(relpath)], list(CELL_DTYPES), protocol, dtypes=CELL_DTYPES)
        total = int(scan.select(pl.len()).collect().item())
        for offset in range(0, total, CELL_BATCH):
            yield scan.slice(offset, CELL_BATCH).collect()
        return
    frame = part_cells(store, parts[sid])
    with contextlib.suppress(StoreError):  # a read-only store: built again next time
        store.write_parquet_atomic(relpath, frame)
    yield frame


def _read_merged(store: Store, folder: str, *, squares: bool) -> DenseCells | None:
    """The merged table as last written, or ``None`` (none yet, unreadable, or its arrays gone: rebuilt).

    ``squares``: read the sums of squares too (80 MB for 10M cells a fit does not need).
    """
    try:
        meta = store.read_json(f"{folder}/{MERGED_FILE}")
        if meta.get("format") != CELLS_FORMAT:
            return None
        with store.fs.open(store.path(f"{folder}/merged-{meta['token']}.npz"), "rb") as handle:
            arrays = np.load(handle)
            counts, sums = arrays["counts"], arrays["sums"]
            sumsq = arrays["sumsq"] if squares else None
    except (FileNotFoundError, StoreError, KeyError, ValueError, OSError):
        return None
    return DenseCells(levels=meta["levels"], counts=counts, sums=sums, sumsq=sumsq, records=int(meta["records"]),
                      null_scores=int(meta["null_scores"]), most_records=int(meta["most_records"]),
                      sources=tuple(meta["sources"]))


def _write_merged(store: Store, folder: str, cells: DenseCells) -> None:
    """Arrays under a new token, then ``merged.json`` (atomic), then older arrays removed (best effort)."""
    token = uuid.uuid4().hex[:12]
    sink = io.BytesIO()
    assert cells.sumsq is not None
    np.savez(sink, counts=cells.counts, sums=cells.sums, sumsq=cells.sumsq)
    with contextlib.suppress(StoreError):  # a read-only store: merged again next time
        store.write_bytes(f"{folder}/merged-{token}.npz", sink.getbuffer())  # not a copy of the arrays' bytes
        store.write_json(f"{folder}/{MERGED_FILE}", {
            "format": CELLS_FORMAT, "token": token, "levels": cells.levels, "sources": sorted(cells.sources),
            "records": cells.records, "null_scores": cells.null_scores, "most_records": cells.most_records,
        })
        # A reader that read the old merged.json and finds its arrays gone rebuilds (never reads wrong arrays).
        old = [p for p in store.fs.find(store.path(folder))
               if p.rsplit("/", 1)[-1].startswith("merged-") and not p.endswith(f"merged-{token}.npz")]
        store.remove(old)


def merge_cells(
    base: DenseCells | None,
    frames: Sequence[pl.DataFrame | Callable[[], Iterable[pl.DataFrame]]],
    sources: tuple[str, ...],
) -> DenseCells | None:
    """``base`` plus the cells of ``frames`` (added cell by cell), over the union of their levels.

    A source given as a callable yields its cells in batches when it is needed,
    twice (once for their levels, once for the cells themselves): the merge holds
    the dense arrays and one batch, not every new source's cells at once (6M cells
    of one source merged in 1.23 GB peak, held whole; ``bench/s3_memory.py``).

    ``None`` when a key is null or the full cross of the levels would exceed
    :data:`CELLS_PER_RECORD` cells a record (plus a million), or :data:`MAX_CELLS`.
    """

    def batches() -> Iterator[pl.DataFrame]:
        for given in frames:
            for batch in [given] if isinstance(given, pl.DataFrame) else given():
                if batch.height:
                    yield batch

    found: list[list[pl.Series]] = [[] for _ in CELL_KEYS]
    records = base.records if base is not None else 0
    for new in batches():
        if any(new.get_column(c).null_count() for c in CELL_KEYS):
            return None
        for axis, column in enumerate(CELL_KEYS):
            found[axis].append(new.get_column(column).unique())
        records += int(new.get_column("records").sum())
    levels: list[list[Any]] = []
    for axis, column in enumerate(CELL_KEYS):
        seen = found[axis] or [pl.Series(column, [], dtype=pl.Int64)]
        old = pl.Series(column, base.levels[axis] if base is not None else [], dtype=seen[0].dtype)
        levels.append(pl.concat([old, *seen]).unique().sort().to_list())
    shape = tuple(len(v) for v in levels)
    size = int(np.prod(shape))
    if not records or size > CELLS_PER_RECORD * records + 1_000_000 or size > MAX_CELLS:
        return None
    counts, sums, sumsq = np.zeros(shape, dtype=np.int32), np.zeros(shape), np.zeros(shape)
    if base is not None:
        where = np.ix_(*(_positions(v, o) for v, o in zip(levels, base.levels, strict=True)))
        assert base.sumsq is not None
        counts[where], sums[where], sumsq[where] = base.counts, base.sums, base.sumsq
    most = base.most_records if base is not None else 0
    nulls = base.null_scores if base is not None else 0
    if any(found):
        # Records already in the touched cells (counts are records when no score is null), and those added.
        before = counts.reshape(-1).copy() if base is not None else None
        added = np.zeros(size, dtype=np.int32)  # as counts: records of a cell
        for new in batches():
            flat = new.select(_flat_index(levels)).to_series().to_numpy()
            for target, column in ((counts, "count"), (sums, "sum"), (sumsq, "sumsq"), (added, "records")):
                _add(target.reshape(-1), flat, new.get_column(column).to_numpy())
            nulls += int((new.get_column("records") - new.get_column("count")).sum())
        touched = np.flatnonzero(added)
        rows = added[touched] + (before[touched] if before is not None else 0)
        most = max(most, int(rows.max()))
    return DenseCells(levels=levels, counts=counts, sums=sums, sumsq=sumsq, records=records, null_scores=nulls,
                      most_records=most, sources=sources)


def _add(target: np.ndarray, flat: np.ndarray, values: np.ndarray) -> None:
    """``target[flat] += values`` with repeated indices added: ``np.add.at`` for a few rows (O(rows)),
    one ``bincount`` over the whole table for many (a pass, much faster per row than ``add.at``)."""
    if 16 * len(flat) < target.size:
        np.add.at(target, flat, values.astype(target.dtype))
    else:
        target += np.bincount(flat, weights=values, minlength=target.size).astype(target.dtype)


def _flat_index(levels: list[list[Any]]) -> pl.Expr:
    """Each row's flat index in the dense arrays over ``levels`` (C order), by element-wise expressions."""
    flat: pl.Expr | None = None
    for column, values in zip(CELL_KEYS, levels, strict=True):
        if values and isinstance(values[0], str):
            index = pl.col(column).cast(pl.Enum(values)).to_physical().cast(pl.Int64)
        else:
            index = pl.col(column).replace_strict(values, list(range(len(values))), return_dtype=pl.Int64)
        flat = index if flat is None else flat * len(values) + index
    assert flat is not None
    return flat.alias("flat")


def _positions(levels: list[Any], old: list[Any]) -> np.ndarray:
    """Where each of ``old`` levels is among ``levels`` (their union)."""
    index = {v: k for k, v in enumerate(levels)}
    return np.array([index[v] for v in old], dtype=np.int64)


def item_set_cells(store: Store, protocol: Protocol, item_set: str) -> DenseCells | None:
    """The merged cell statistics of every committed record of ``item_set``, brought up to date.

    ``None`` when the item set has no committed records or its cells cannot be
    dense (:func:`merge_cells`): the caller scans the records.
    """
    parts: dict[str, list[str]] = {}
    for f in store.data_files(protocol, item_set):
        parts.setdefault(f.source_id, []).append(f.path)
    if not parts or protocol != "pointwise":
        return None
    folder = cells_dir(protocol, item_set)
    if _known_not_dense(store, folder, set(parts)):
        return None
    base = _read_merged(store, folder, squares=False)
    if base is not None and set(base.sources) == set(parts):
        return base  # up to date: the fit reads counts and sums only
    base = _read_merged(store, folder, squares=True)
    if base is not None and not set(base.sources) <= set(parts):
        base = None  # names a source no longer committed: rebuilt from the cell files
    covered = set(base.sources) if base is not None else set()
    new = sorted(set(parts) - covered)
    if not new:
        return base
    # Each source's cells read when the merge needs them (twice), not all held at once.
    frames = [functools.partial(_source_cells, store, protocol, item_set, sid, parts) for sid in new]
    merged = merge_cells(base, frames, tuple(sorted(covered | set(new))))
    if merged is not None:
        _write_merged(store, folder, merged)
    else:  # said once, so the next fit does not merge every cell file again to find it out
        with contextlib.suppress(StoreError):
            store.write_json(f"{folder}/{MERGED_FILE}", {"format": CELLS_FORMAT, "dense": False,
                                                         "sources": sorted(parts)})
    return merged


def _known_not_dense(store: Store, folder: str, sources: set[str]) -> bool:
    """Whether ``merged.json`` says these very sources make no dense table (sparse cells, a null key)."""
    try:
        meta = store.read_json(f"{folder}/{MERGED_FILE}")
    except (FileNotFoundError, StoreError, ValueError):
        return False
    return isinstance(meta, dict) and meta.get("dense") is False and set(meta.get("sources", ())) == sources
