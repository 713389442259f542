"""A fit's blocks from the store's merged cell statistics (``io/cell_stats.py``) instead of its records.

The blocks of the G-study and CyclicJudge are decided on, and filled from, the
per-cell sums and counts of the fit's records (``stats.block_cells``); those
are the merged cell statistics of the item set, restricted to the fit's judge
universe and system population, so :func:`cell_chunks` hands the fit the same
:class:`~jurymeter.stats.blocks.FitChunks` a one-scan read of the records
makes, without reading a record. It declines (``None``: the records are
scanned as before) where the cells do not carry what the scan would: an item
set flagged in ``_rated_cells.json`` (several ratings of one cell are
renumbered as replicates, ``pipeline.fit.rated_replicates``, which needs the
rating columns of each record), a cell with more than one record or a null
score (the scan's fallbacks treat those), cells too sparse for the dense
arrays, a store whose cells cannot be merged (``io.cell_stats.item_set_cells``).
"""

from __future__ import annotations

import numpy as np

from jurymeter.io.cell_stats import DenseCells, item_set_cells
from jurymeter.io.store import RATED_CELLS_FILE, Store
from jurymeter.pipeline.jobs import FitJob
from jurymeter.stats.block_cells import AVERAGE_KEYS, DENSE_CELLS_PER_RECORD, FACET_KEYS, CellSums
from jurymeter.stats.blocks import FitChunks, GenerationMode, chunks_of_sums


def cell_chunks(job: FitJob, modes: tuple[GenerationMode, ...]) -> FitChunks | None:
    """The fit's chunks from the merged cell statistics, or ``None`` where the records must be scanned."""
    if job.protocol != "pointwise" or not modes or job.item_set is None:
        return None
    store = Store(job.store, dict(job.storage_options))
    try:
        store.read_json(f"{store.partition_dir(job.protocol, job.item_set)}/{RATED_CELLS_FILE}")
        return None  # several ratings of a cell: renumbered from the records' rating columns
    except FileNotFoundError:
        pass
    dense = item_set_cells(store, job.protocol, job.item_set)
    if dense is None or dense.null_scores or dense.most_records > 1:
        return None
    cells = fit_cells(dense, job.settings.judges, job.settings.systems, "facet" in modes)
    return chunks_of_sums(cells, modes) if cells is not None else None


def fit_cells(dense: DenseCells, judges: tuple[str, ...] | None, systems: tuple[str, ...] | None,
              facet: bool) -> CellSums | None:
    """The cell sums a one-scan read of the fit's records makes (``stats.block_cells._sum_cells``).

    The judges and systems outside the universe and population are cut, then
    every level without a score (the records would not show it); with
    generations averaged, the cells are summed over generations. ``None``
    where the scan would not take the dense path (no record; too sparse).
    """
    counts, sums, levels = dense.counts, dense.sums, [list(v) for v in dense.levels]
    cut = False
    for axis, wanted in ((0, systems), (2, judges)):
        if wanted is not None:
            cut = True
            keep = np.isin(np.array(levels[axis], dtype=object), np.array(list(wanted), dtype=object))
            counts, sums = counts.compress(keep, axis=axis), sums.compress(keep, axis=axis)
            levels[axis] = [v for v, k in zip(levels[axis], keep, strict=True) if k]
    if not facet:
        if counts.shape[3] == 1:  # one generation: a view, no sum
            counts, sums = counts[:, :, :, 0], sums[:, :, :, 0]
        else:
            counts, sums = counts.sum(axis=3, dtype=np.int32), sums.sum(axis=3)
        levels = [levels[0], levels[1], levels[2], levels[4]]
    records = int(counts.sum())
    if not records:
        return None
    # Every level of the merged table has a score (a level of null scores only makes
    # ``null_scores`` non-zero, and the fit scans the records), so only a cut can empty one.
    present = counts > 0 if cut else np.ones((), dtype=bool)
    for axis in range(counts.ndim if cut else 0):
        others = tuple(k for k in range(counts.ndim) if k != axis)
        keep = np.asarray(present.any(axis=others))
        if not keep.all():
            counts, sums, present = (a.compress(keep, axis=axis) for a in (counts, sums, present))
            levels[axis] = [v for v, k in zip(levels[axis], keep, strict=True) if k]
    if int(np.prod(counts.shape)) > DENSE_CELLS_PER_RECORD * records + 1_000_000:
        return None
    return CellSums(levels=levels, sums=np.ascontiguousarray(sums), counts=np.ascontiguousarray(counts),
                    records=records, keys=FACET_KEYS if facet else AVERAGE_KEYS)
