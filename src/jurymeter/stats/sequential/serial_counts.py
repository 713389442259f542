r"""The counts every serial statistic is a function of, and their batch-bootstrap resamples.

Ratings sorted by (batch, position) become integer chains (:func:`chains`);
their observed (lag, history, current) cells are counted per batch once
(:func:`cells`), so each resample's counts are one matrix product of the
multinomial batch weights (:func:`batch_weights`) and those per-batch counts
(:func:`resampled_stats`), and :func:`boot_stats` turns count rows into the
conditional entropies, the lag-1 transition probabilities and the serial
contrast (:mod:`jurymeter.stats.sequential.diagnostics`, which publishes them).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import polars as pl
from scipy.sparse import csr_matrix

from jurymeter.errors import ConfigError, DesignError

# Resamples per matrix product: bounds the memory of (resamples x cells) count matrices.
_BOOT_CHUNK = 256
# The largest number of (history, current) cells a code may index (int64 headroom).
_MAX_CELLS = 2**62


@dataclass(frozen=True, slots=True)
class SerialRequest:
    """What the serial diagnostics are asked for (validated by the public functions)."""

    score: str
    batch: str
    position: str
    categories: tuple[float, ...] | None
    max_lag: int
    n_boot: int
    seed: int
    level: float



@dataclass(frozen=True, slots=True)
class Chains:
    """Ratings sorted by (batch, position) with their chain offsets, as integer codes."""

    y: np.ndarray        # category code 0..C-1
    batch: np.ndarray    # batch code 0..B-1 (batches sorted by id)
    offset: np.ndarray   # place in the chain: 0 at a batch's first rating and after a gap
    n_batches: int
    n_breaks: int
    n_dropped: int
    categories: tuple[float, ...]


def chains(records: pl.DataFrame, req: SerialRequest) -> Chains:
    """The usable ratings as chains of category codes (a gap in positions starts a new chain)."""
    frame = records.select(
        pl.col(req.batch).cast(pl.String).alias("b"),
        pl.col(req.position).cast(pl.Int64).alias("t"),
        pl.col(req.score).cast(pl.Float64).alias("y"),
    )
    usable = frame.filter(
        pl.col("b").is_not_null() & pl.col("t").is_not_null()
        & pl.col("y").is_not_null() & pl.col("y").is_finite()
    )
    n_dropped = frame.height - usable.height
    if usable.height == 0:
        msg = (f"no record has a {req.batch!r}, a {req.position!r} and a finite {req.score!r}"
               f" ({frame.height} record(s)): serial diagnostics need the fields {req.batch!r} and "
               f"{req.position!r} on the ratings")
        raise DesignError(msg)
    usable = usable.sort("b", "t")
    dup = usable.select(pl.struct("b", "t").is_duplicated().sum()).item()
    if dup:
        msg = (f"records hold {dup} rating(s) sharing a ({req.batch!r}, {req.position!r}) pair: "
               "pass the records of one judge and item set, one rating per batch position")
        raise DesignError(msg)
    values = usable["y"].to_numpy()
    cats = req.categories if req.categories is not None else tuple(float(v) for v in np.unique(values))
    cat_arr = np.asarray(cats, dtype=np.float64)
    code = np.clip(np.searchsorted(cat_arr, values), 0, len(cats) - 1)
    off_scale = cat_arr[code] != values
    if off_scale.any():
        bad = sorted(set(values[off_scale].tolist()))[:5]
        msg = f"scores {bad} are not among the categories {list(cats)}"
        raise DesignError(msg)
    batch = (usable["b"].rank("dense").cast(pl.Int64) - 1).to_numpy()
    t = usable["t"].to_numpy()
    n = len(values)
    new_batch = np.ones(n, dtype=bool)
    new_batch[1:] = batch[1:] != batch[:-1]
    gap = np.zeros(n, dtype=bool)
    gap[1:] = ~new_batch[1:] & (t[1:] != t[:-1] + 1)
    start = new_batch | gap
    idx = np.arange(n)
    offset = idx - np.maximum.accumulate(np.where(start, idx, 0))
    return Chains(
        y=code.astype(np.int64), batch=batch.astype(np.int64), offset=offset.astype(np.int64),
        n_batches=int(batch.max()) + 1, n_breaks=int(gap.sum()), n_dropped=n_dropped,
        categories=cats,
    )


@dataclass(frozen=True, slots=True)
class Cells:
    """The observed (lag, history, current) cells and their per-batch counts."""

    counts: csr_matrix   # batches x cells
    lag: np.ndarray      # per cell
    history: np.ndarray  # per cell: sum_j Y_{t-j} C^(j-1)
    current: np.ndarray  # per cell


def cells(ch: Chains, max_lag: int) -> Cells:
    """Every observed (lag, history, current) cell and its count in each batch."""
    c = len(ch.categories)
    keys, rows = [], []
    history = np.zeros(len(ch.y), dtype=np.int64)
    scale = 1
    n_hist = 1  # C^k: histories of length k
    for k in range(max_lag + 1):
        if k > 0:
            shifted = np.zeros_like(ch.y)
            shifted[k:] = ch.y[:-k]
            history = history + shifted * scale
            scale *= c
            n_hist *= c
        ok = ch.offset >= k
        cell = history[ok] * c + ch.y[ok]
        keys.append(np.column_stack([np.full(cell.size, k, dtype=np.int64), cell]))
        rows.append(ch.batch[ok])
    key = np.concatenate(keys)
    uniq, col = np.unique(key, axis=0, return_inverse=True)
    col = col.reshape(-1)
    row = np.concatenate(rows)
    counts = csr_matrix((np.ones(row.size), (row, col)), shape=(ch.n_batches, uniq.shape[0]))
    return Cells(counts=counts, lag=uniq[:, 0], history=uniq[:, 1] // c, current=uniq[:, 1] % c)


def xlogx(x: np.ndarray) -> np.ndarray:
    r""":math:`x \log_2 x`, 0 at 0."""
    out = np.zeros_like(x)
    np.multiply(x, np.log2(x, out=np.zeros_like(x), where=x > 0), out=out, where=x > 0)
    return out


def boot_stats(
    total: np.ndarray, cells: Cells, c: int, max_lag: int, values: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Entropies (r, K+1), transition probabilities (r, C*C) and contrast (r,) of count rows."""
    r = total.shape[0]
    ent = np.full((r, max_lag + 1), np.nan)
    for k in range(max_lag + 1):
        cols = np.flatnonzero(cells.lag == k)
        if cols.size == 0:
            continue
        n_hy = total[:, cols]
        hist, inv = np.unique(cells.history[cols], return_inverse=True)
        to_hist = csr_matrix(
            (np.ones(cols.size), (inv.reshape(-1), np.arange(cols.size))), shape=(hist.size, cols.size)
        )
        n_h = np.asarray(to_hist @ n_hy.T).T
        n_k = n_h.sum(axis=1)
        num = xlogx(n_h).sum(axis=1) - xlogx(n_hy).sum(axis=1)
        np.divide(num, n_k, out=ent[:, k], where=n_k > 0)
    cols1 = np.flatnonzero(cells.lag == 1)
    table = np.zeros((r, c * c))
    table[:, cells.history[cols1] * c + cells.current[cols1]] = total[:, cols1]
    table3 = table.reshape(r, c, c)
    n_prev = table3.sum(axis=2)
    prob = np.full((r, c, c), np.nan)
    np.divide(table3, n_prev[:, :, None], out=prob, where=n_prev[:, :, None] > 0)
    # least-squares slope of current on previous, centred values
    v = values - values.mean()
    n = n_prev.sum(axis=1)
    n_cur = table3.sum(axis=1)
    sx, sy = n_prev @ v, n_cur @ v
    sxx = n_prev @ (v * v)
    sxy = np.einsum("rab,a,b->r", table3, v, v)
    den = n * sxx - sx * sx
    slope = np.full(r, np.nan)
    defined = ((n_prev > 0).sum(axis=1) >= 2) & (den > 0)
    np.divide(n * sxy - sx * sy, den, out=slope, where=defined)
    return ent, prob.reshape(r, c * c), slope



def batch_weights(n_batches: int, *, n_boot: int, seed: int) -> np.ndarray:
    """The batch-bootstrap weights: ``n_boot`` multinomial draws of ``n_batches`` over the batches.

    Parameters
    ----------
    n_batches
        Batches :math:`B` (sorted by ``batch_id``).
    n_boot
        Resamples.
    seed
        Seed of ``numpy.random.default_rng``.

    Returns
    -------
    numpy.ndarray
        ``(n_boot, n_batches)`` integer counts, each row summing to :math:`B`: the
        number of times each batch is drawn in each resample.

    Examples
    --------
    >>> batch_weights(3, n_boot=2, seed=0).sum(axis=1).tolist()
    [3, 3]
    """
    rng = np.random.default_rng(seed)
    weights: np.ndarray = rng.multinomial(n_batches, np.full(n_batches, 1.0 / n_batches), size=n_boot)
    return weights



def resampled_stats(
    cells: Cells, c: int, max_lag: int, values: np.ndarray, *, n_batches: int, n_boot: int, seed: int
) -> tuple[tuple[np.ndarray, np.ndarray, np.ndarray], tuple[np.ndarray, np.ndarray, np.ndarray], np.ndarray]:
    """The point statistics, their ``n_boot`` batch-bootstrap draws and the point counts per cell.

    Returns ``(entropies, probabilities, slope)`` of the data (one row), the
    same of each resample (``n_boot`` rows), and the cells' point counts.
    """
    counts_t = cells.counts.T.tocsr()  # cells x batches
    point_total = np.asarray(counts_t.sum(axis=1)).reshape(1, -1)
    point = boot_stats(point_total, cells, c, max_lag, values)
    weights = batch_weights(n_batches, n_boot=n_boot, seed=seed).astype(np.float64)
    ent_b, prob_b, slope_b = [], [], []
    for lo in range(0, n_boot, _BOOT_CHUNK):
        w = weights[lo:lo + _BOOT_CHUNK]
        total = np.asarray(counts_t @ w.T).T
        e, p, s = boot_stats(total, cells, c, max_lag, values)
        ent_b.append(e)
        prob_b.append(p)
        slope_b.append(s)
    return point, (np.vstack(ent_b), np.vstack(prob_b), np.concatenate(slope_b)), point_total[0]


def check_cells(c: int, max_lag: int) -> None:
    """Refuse a history space too large to index with int64 codes."""
    if c ** (max_lag + 1) >= _MAX_CELLS:
        msg = f"{c} categories and max_lag {max_lag} give too many histories to index; lower max_lag"
        raise ConfigError(msg)
