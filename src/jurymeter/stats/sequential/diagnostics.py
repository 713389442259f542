r"""Serial dependence of ratings given in sequence: transitions, conditional entropies, lag-1 contrast.

Notation. A judge rates items one after another in *batches* (one call or
session); ``batch_position`` is the 0-based place of a rating in its batch. Let
:math:`Y_t` be the rating at position :math:`t` of a batch, on a discrete scale
of :math:`C` categories :math:`c_1 < \dots < c_C` (binary, or ordinal such as
1-5 or 1-10: the categories observed, or those given). Everything here is a
function of the *chains*: the maximal runs of consecutive positions
:math:`t, t+1, \dots` present in one batch. A missing position (a gap in
``batch_position``) breaks the chain: the rating after a gap has no
predecessor, exactly as the first rating of a batch. Ratings never chain across
batches.

Transition table. Over the pairs :math:`(Y_{t-1}, Y_t)` of consecutive positions
of one batch, :math:`n_{ab}` counts previous rating :math:`a` followed by current
rating :math:`b`, and

.. math::

    \hat P(Y_t = b \mid Y_{t-1} = a) = n_{ab} / n_{a\cdot}.

Conditional entropies (plug-in, in bits). For :math:`k \ge 1` let
:math:`h = (Y_{t-1}, \dots, Y_{t-k})` be the history of a position with a full
:math:`k`-history in its chain (its chain holds positions :math:`t-k, \dots, t`),
:math:`n_{hy}` the number of such positions with history :math:`h` and current
rating :math:`y`, :math:`n_{h\cdot} = \sum_y n_{hy}` and :math:`n_k = \sum_{h,y} n_{hy}`:

.. math::

    \hat H(Y_t \mid Y_{t-1}, \dots, Y_{t-k})
    = -\sum_{h, y} \frac{n_{hy}}{n_k} \log_2 \frac{n_{hy}}{n_{h\cdot}},

and :math:`\hat H(Y_t) = -\sum_y (n_y/n) \log_2 (n_y/n)` over every rating
(:math:`k = 0`). Each :math:`k` uses its own positions (those with a full
:math:`k`-history), so the estimates need not decrease with :math:`k` exactly;
the plug-in estimate is biased down by about :math:`(\#\text{cells} - \#\text{histories})
/ (2 n_k \ln 2)` bits (Miller-Madow), which matters when :math:`C^{k+1}` is not
small beside :math:`n_k`. These are the three entropies of [LiDing2026]_ figure 3.

Lag-1 serial contrast. The least-squares slope of the current rating on the
previous one over the consecutive pairs,

.. math::

    \hat\beta_1 = \frac{\sum (Y_{t-1} - \bar Y_{-})(Y_t - \bar Y_{+})}{\sum (Y_{t-1} - \bar Y_{-})^2},

(:math:`\bar Y_{-}, \bar Y_{+}` the means of the previous and current ratings of
the pairs), the slope of :math:`E[Y_t \mid Y_{t-1}]` in rating points per rating
point. For a binary scale it is exactly

.. math::

    \hat\beta_1 = \hat P(Y_t = c_2 \mid Y_{t-1} = c_2) - \hat P(Y_t = c_2 \mid Y_{t-1} = c_1),

the difference of the two conditional probabilities of the high rating that
[LiDing2026]_ figure 1 shows in the raw data (dependence on the immediately
preceding rating) and figure 2 compares across judges with bootstrap 95%
intervals. Zero under ratings independent of their predecessor; positive when a
high rating tends to follow a high one. For an ordinal scale it uses the
numeric spacing of the categories (the scores as stored); the transition table
is beside it for a spacing-free view. It is undefined when every previous rating
of the pairs is the same category.

Intervals: batch bootstrap. A resample draws the batches with replacement and
takes every rating of a drawn batch as many times as it was drawn: batch
:math:`b` (the batches sorted by ``batch_id``) gets weight :math:`w_{rb}`, the
rows of ``numpy.random.default_rng(seed).multinomial(B, [1/B] * B, size=n_boot)``.
Every statistic here is a function of the per-batch counts of the (history,
current) cells, so those counts are formed once and every resample's counts are
one matrix product, weights times per-batch counts. Intervals are percentile
intervals (``numpy.quantile``'s default linear rule) over the resamples in which
the statistic is defined. The plug-in entropy is biased down in every
resample too, so its percentile interval sits a little low by the same order.

References
----------
.. [LiDing2026] T. Li and J. Ding, "Trustworthy Method Comparison with AI Judges:
   Estimation and Design under Order, Batch, and Aggregation Effects", 2026
   (``papers/trustworthy-comparison-ai-judges.txt``).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

import numpy as np
import polars as pl
from scipy.sparse import csr_matrix

from jurymeter.errors import ConfigError, DesignError
from jurymeter.stats.intervals import percentile_bounds
from jurymeter.stats.pairwise.position import Estimate
from jurymeter.stats.sequential.schemas import ENTROPY_SCHEMA, TRANSITION_SCHEMA
from jurymeter.stats.sequential.schemas import SERIAL_CONTRAST_SCHEMA as CONTRAST_SCHEMA

ENTROPY_UNIT = "bits"
"""The unit of every entropy here (logarithms to base 2)."""
MAX_LAG = 3
"""The default largest history length :math:`k` of the conditional entropies ([LiDing2026]_ figure 3)."""
# Resamples per matrix product: bounds the memory of (resamples x cells) count matrices.
_BOOT_CHUNK = 256
# The largest number of (history, current) cells a code may index (int64 headroom).
_MAX_CELLS = 2**62

BATCH_FIELDS = ("batch_id", "batch_position")
"""The stored fields every serial statistic needs."""


@dataclass(frozen=True, slots=True)
class SerialDiagnostics:
    r"""Serial dependence of one judge's ratings of one item set (see :func:`serial_diagnostics`).

    Attributes
    ----------
    categories
        The scale :math:`c_1 < \dots < c_C` (given, or observed).
    serial_contrast
        The lag-1 slope :math:`\hat\beta_1` with its batch-bootstrap interval.
    entropies
        ``lag, n_positions, n_histories, entropy, entropy_low, entropy_high, reason``:
        one row per :math:`k = 0..` ``max_lag``, entropy in bits (``lag`` 0 is
        :math:`H(Y_t)`), ``n_histories`` the distinct histories observed.
    transitions
        ``previous, current, count, n_previous, probability, probability_low,
        probability_high, reason``: one row per ordered pair of categories
        (:math:`C^2` rows, previous-major), ``n_previous`` = :math:`n_{a\cdot}`.
    n_ratings
        Ratings used (rows with a batch, a position and a score).
    n_batches
        Batches among them.
    n_pairs
        Consecutive pairs :math:`(Y_{t-1}, Y_t)` (the transitions' total).
    n_chain_breaks
        Gaps in ``batch_position`` inside a batch (each starts a new chain).
    n_without_batch
        Rows left out for a missing ``batch_id``, ``batch_position`` or score.
    max_lag, n_boot, level, seed
        The options used.
    """

    categories: tuple[float, ...]
    serial_contrast: Estimate
    entropies: pl.DataFrame
    transitions: pl.DataFrame
    n_ratings: int
    n_batches: int
    n_pairs: int
    n_chain_breaks: int
    n_without_batch: int
    max_lag: int
    n_boot: int
    level: float
    seed: int

    def entropy(self, lag: int) -> Estimate:
        """The conditional entropy of history length ``lag`` (bits) as an :class:`Estimate`."""
        row = self.entropies.filter(pl.col("lag") == lag)
        if row.height != 1:
            msg = f"lag must be one of 0..{self.max_lag}; got {lag!r}"
            raise ConfigError(msg)
        r = row.row(0, named=True)
        return Estimate(r["entropy"], r["entropy_low"], r["entropy_high"], r["reason"])


@dataclass(frozen=True, slots=True)
class SerialDiagnosticsByGroup:
    """:func:`serial_diagnostics` per group (see :func:`serial_diagnostics_by`).

    ``groups`` maps each group's key (a tuple of the ``by`` values) to its result;
    ``contrasts``, ``entropies`` and ``transitions`` are the tidy frames of every
    group, the ``by`` columns first.
    """

    by: tuple[str, ...]
    groups: Mapping[tuple[Any, ...], SerialDiagnostics]
    contrasts: pl.DataFrame
    entropies: pl.DataFrame
    transitions: pl.DataFrame


@dataclass(frozen=True, slots=True)
class _Request:
    score: str
    batch: str
    position: str
    categories: tuple[float, ...] | None
    max_lag: int
    n_boot: int
    seed: int
    level: float


def _request(
    records: pl.DataFrame, score: str, batch: str, position: str,
    categories: Sequence[float] | None, max_lag: int, n_boot: int, seed: int, level: float,
) -> _Request:
    if not isinstance(records, pl.DataFrame):
        msg = f"records must be a polars DataFrame; got {type(records).__name__}"
        raise DesignError(msg)
    missing_batch = [c for c in (batch, position) if c not in records.columns]
    if missing_batch:
        msg = (f"records have no {' and no '.join(repr(c) for c in missing_batch)} column: serial "
               f"diagnostics need the fields {batch!r} (the batch, call or session of a rating) and "
               f"{position!r} (its 0-based position in the batch)")
        raise DesignError(msg)
    if score not in records.columns:
        msg = f"records have no {score!r} column (the rating); columns: {records.columns}"
        raise DesignError(msg)
    for name, value, low in (("max_lag", max_lag, 1), ("n_boot", n_boot, 1)):
        if isinstance(value, bool) or not isinstance(value, int) or value < low:
            msg = f"{name} must be an integer >= {low}; got {value!r}"
            raise ConfigError(msg)
    if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
        msg = f"seed must be an integer >= 0; got {seed!r}"
        raise ConfigError(msg)
    if isinstance(level, bool) or not (isinstance(level, float | int) and 0.0 < float(level) < 1.0):
        msg = f"level must be a number in (0, 1); got {level!r}"
        raise ConfigError(msg)
    cats: tuple[float, ...] | None = None
    if categories is not None:
        if isinstance(categories, str):
            msg = f"categories must be a sequence of numbers; got the string {categories!r}"
            raise ConfigError(msg)
        try:
            cats = tuple(float(c) for c in categories)
        except (TypeError, ValueError):
            msg = f"categories must be numbers; got {list(categories)!r}"
            raise ConfigError(msg) from None
        if not cats or not all(math.isfinite(c) for c in cats) or list(cats) != sorted(set(cats)):
            msg = f"categories must be finite numbers, increasing, without repeats; got {list(categories)!r}"
            raise ConfigError(msg)
    return _Request(score, batch, position, cats, max_lag, n_boot, seed, float(level))


@dataclass(frozen=True, slots=True)
class _Chains:
    """Ratings sorted by (batch, position) with their chain offsets, as integer codes."""

    y: np.ndarray        # category code 0..C-1
    batch: np.ndarray    # batch code 0..B-1 (batches sorted by id)
    offset: np.ndarray   # place in the chain: 0 at a batch's first rating and after a gap
    n_batches: int
    n_breaks: int
    n_dropped: int
    categories: tuple[float, ...]


def _chains(records: pl.DataFrame, req: _Request) -> _Chains:
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
    return _Chains(
        y=code.astype(np.int64), batch=batch.astype(np.int64), offset=offset.astype(np.int64),
        n_batches=int(batch.max()) + 1, n_breaks=int(gap.sum()), n_dropped=n_dropped,
        categories=cats,
    )


@dataclass(frozen=True, slots=True)
class _Cells:
    """The observed (lag, history, current) cells and their per-batch counts."""

    counts: csr_matrix   # batches x cells
    lag: np.ndarray      # per cell
    history: np.ndarray  # per cell: sum_j Y_{t-j} C^(j-1)
    current: np.ndarray  # per cell


def _cells(ch: _Chains, max_lag: int) -> _Cells:
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
    return _Cells(counts=counts, lag=uniq[:, 0], history=uniq[:, 1] // c, current=uniq[:, 1] % c)


def _xlogx(x: np.ndarray) -> np.ndarray:
    out = np.zeros_like(x)
    np.multiply(x, np.log2(x, out=np.zeros_like(x), where=x > 0), out=out, where=x > 0)
    return out


def _boot_stats(
    total: np.ndarray, cells: _Cells, c: int, max_lag: int, values: np.ndarray
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
        num = _xlogx(n_h).sum(axis=1) - _xlogx(n_hy).sum(axis=1)
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


def _intervals(point: np.ndarray, draws: np.ndarray, level: float) -> tuple[np.ndarray, np.ndarray]:
    """Percentile bounds over the defined resamples of each column (NaN where none or no point)."""
    low = np.full(point.shape, np.nan)
    high = np.full(point.shape, np.nan)
    some = ~np.isnan(point) & (~np.isnan(draws)).any(axis=0)
    if some.any():
        low[some], high[some] = percentile_bounds(draws[:, some], level, axis=0, keep_inf=True)
    return low, high


def _num(x: float) -> float | None:
    return None if math.isnan(x) else float(x)


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


def serial_diagnostics(
    records: pl.DataFrame,
    *,
    score: str = "score",
    batch: str = "batch_id",
    position: str = "batch_position",
    categories: Sequence[float] | None = None,
    max_lag: int = MAX_LAG,
    n_boot: int = 1000,
    seed: int = 0,
    level: float = 0.95,
) -> SerialDiagnostics:
    r"""Transition table, conditional entropies and lag-1 serial contrast of one judge's ratings.

    Parameters
    ----------
    records
        Ratings of one judge on one item set: a row per rating with ``batch``,
        ``position`` and ``score``; other columns are ignored (the rated unit, an
        item or a (system, item) output, does not enter these statistics).
    score, batch, position : str
        Column names of the rating, its batch and its 0-based position in the batch.
    categories : sequence of float, optional
        The scale's categories (default: the scores observed). Every score must be one.
    max_lag : int, default 3
        Largest history length :math:`k` of the conditional entropies.
    n_boot : int, default 1000
        Batch-bootstrap resamples.
    seed : int, default 0
        Seed of the resampling (:func:`batch_weights`).
    level : float, default 0.95
        Coverage of the percentile intervals.

    Returns
    -------
    SerialDiagnostics

    Raises
    ------
    DesignError
        ``batch`` or ``position`` is missing (the message names both fields), no
        row has a batch, a position and a finite score, two ratings share a
        (batch, position), or a score is not among ``categories``.
    ConfigError
        An option out of range.

    Notes
    -----
    Rows with a null batch, position or score are left out (counted in
    ``n_without_batch``); a left-out position breaks its chain as any gap does.
    The transition probability :math:`\hat P(b \mid a) = n_{ab}/n_{a\cdot}`, the
    plug-in entropy :math:`-\sum_{h,y} (n_{hy}/n_k)\log_2(n_{hy}/n_{h\cdot})` over
    positions with a full :math:`k`-history in their chain, and the lag-1 slope
    :math:`\hat\beta_1` (for a binary scale
    :math:`\hat P(c_2 \mid c_2) - \hat P(c_2 \mid c_1)`), as in the module notes
    ([LiDing2026]_ figures 1-3). Intervals: batch bootstrap, percentile.

    Examples
    --------
    >>> r = pl.DataFrame({"batch_id": ["a"] * 4 + ["b"] * 4,
    ...                   "batch_position": [0, 1, 2, 3] * 2,
    ...                   "score": [1.0, 1.0, 0.0, 0.0, 0.0, 0.0, 1.0, 1.0]})
    >>> d = serial_diagnostics(r, n_boot=20)
    >>> d.n_pairs, d.serial_contrast.value
    (6, 0.3333333333333333)
    >>> d.transitions["count"].to_list()
    [2, 1, 1, 2]
    """
    req = _request(records, score, batch, position, categories, max_lag, n_boot, seed, level)
    return _diagnose(records, req)


def _diagnose(records: pl.DataFrame, req: _Request) -> SerialDiagnostics:
    ch = _chains(records, req)
    c = len(ch.categories)
    if c ** (req.max_lag + 1) >= _MAX_CELLS:
        msg = f"{c} categories and max_lag {req.max_lag} give too many histories to index; lower max_lag"
        raise ConfigError(msg)
    cells = _cells(ch, req.max_lag)
    values = np.asarray(ch.categories, dtype=np.float64)
    counts_t = cells.counts.T.tocsr()  # cells x batches
    point_total = np.asarray(counts_t.sum(axis=1)).reshape(1, -1)
    ent0, prob0, slope0 = _boot_stats(point_total, cells, c, req.max_lag, values)
    weights = batch_weights(ch.n_batches, n_boot=req.n_boot, seed=req.seed).astype(np.float64)
    ent_b, prob_b, slope_b = [], [], []
    for lo in range(0, req.n_boot, _BOOT_CHUNK):
        w = weights[lo:lo + _BOOT_CHUNK]
        total = np.asarray(counts_t @ w.T).T
        e, p, s = _boot_stats(total, cells, c, req.max_lag, values)
        ent_b.append(e)
        prob_b.append(p)
        slope_b.append(s)
    ent_draws, prob_draws, slope_draws = np.vstack(ent_b), np.vstack(prob_b), np.concatenate(slope_b)

    # point counts
    lag_counts = np.bincount(cells.lag, weights=point_total[0], minlength=req.max_lag + 1)
    n_pairs = round(float(lag_counts[1]))

    e_low, e_high = _intervals(ent0[0], ent_draws, req.level)
    ent_rows: dict[str, list[Any]] = {name: [] for name in ENTROPY_SCHEMA}
    for k in range(req.max_lag + 1):
        n_k = round(float(lag_counts[k]))
        value = _num(ent0[0, k])
        ent_rows["lag"].append(k)
        ent_rows["n_positions"].append(n_k)
        ent_rows["n_histories"].append(int(np.unique(cells.history[cells.lag == k]).size))
        ent_rows["entropy"].append(value)
        ent_rows["entropy_low"].append(None if value is None else _num(e_low[k]))
        ent_rows["entropy_high"].append(None if value is None else _num(e_high[k]))
        ent_rows["reason"].append(
            None if value is not None else
            f"no position has {k} consecutive predecessor(s) in its batch"
        )
    entropies = pl.DataFrame(ent_rows, schema=ENTROPY_SCHEMA)

    table = np.zeros(c * c)
    cols1 = np.flatnonzero(cells.lag == 1)
    table[cells.history[cols1] * c + cells.current[cols1]] = point_total[0, cols1]
    n_prev = table.reshape(c, c).sum(axis=1)
    p_low, p_high = _intervals(prob0[0], prob_draws, req.level)
    prev_idx, cur_idx = np.divmod(np.arange(c * c), c)
    transitions = pl.DataFrame(
        {
            "previous": values[prev_idx],
            "current": values[cur_idx],
            "count": np.round(table).astype(np.int64),
            "n_previous": np.round(n_prev[prev_idx]).astype(np.int64),
            "probability": [_num(v) for v in prob0[0]],
            "probability_low": [_num(v) for v in p_low],
            "probability_high": [_num(v) for v in p_high],
            "reason": [None if n_prev[a] > 0 else
                       f"no rating {values[a]:g} was followed by a rating at the next position"
                       for a in prev_idx],
        },
        schema=TRANSITION_SCHEMA,
    )

    s_low, s_high = _intervals(slope0, slope_draws.reshape(-1, 1), req.level)
    if n_pairs == 0:
        contrast = Estimate(None, None, None,
                            "no batch holds two ratings at consecutive positions")
    elif math.isnan(slope0[0]):
        contrast = Estimate(None, None, None,
                            "every rating followed by another is the same category: the slope on "
                            "the previous rating is not identified")
    else:
        contrast = Estimate(float(slope0[0]), _num(s_low[0]), _num(s_high[0]))
    return SerialDiagnostics(
        categories=ch.categories,
        serial_contrast=contrast,
        entropies=entropies,
        transitions=transitions,
        n_ratings=len(ch.y),
        n_batches=ch.n_batches,
        n_pairs=n_pairs,
        n_chain_breaks=ch.n_breaks,
        n_without_batch=ch.n_dropped,
        max_lag=req.max_lag,
        n_boot=req.n_boot,
        level=req.level,
        seed=req.seed,
    )


def serial_diagnostics_by(
    records: pl.DataFrame,
    *,
    by: Sequence[str] = ("judge_id",),
    score: str = "score",
    batch: str = "batch_id",
    position: str = "batch_position",
    categories: Sequence[float] | None = None,
    max_lag: int = MAX_LAG,
    n_boot: int = 1000,
    seed: int = 0,
    level: float = 0.95,
) -> SerialDiagnosticsByGroup:
    """:func:`serial_diagnostics` for every group of ``by`` (a judge, an item set).

    Parameters
    ----------
    records
        Ratings of several groups.
    by : sequence of str, default ("judge_id",)
        Grouping columns; each group is one judge's ratings of one item set.
    score, batch, position, categories, max_lag, n_boot, seed, level
        As :func:`serial_diagnostics`; every group is resampled with the same
        ``seed`` over its own batches.

    Returns
    -------
    SerialDiagnosticsByGroup
        Groups in sorted key order; the tidy frames carry the ``by`` columns first.

    Raises
    ------
    DesignError
        A ``by`` column is missing, or any group fails as in :func:`serial_diagnostics`.

    Examples
    --------
    >>> r = pl.DataFrame({"judge_id": ["j", "j", "k", "k"], "batch_id": ["a", "a", "a", "a"],
    ...                   "batch_position": [0, 1, 0, 1], "score": [1.0, 0.0, 1.0, 1.0]})
    >>> out = serial_diagnostics_by(r, n_boot=10)
    >>> out.contrasts["judge_id"].to_list(), out.contrasts["n_pairs"].to_list()
    (['j', 'k'], [1, 1])
    """
    if isinstance(by, str):
        by = (by,)
    by_cols = tuple(by)
    if not by_cols:
        msg = "by must name at least one column"
        raise ConfigError(msg)
    missing = [b for b in by_cols if not isinstance(records, pl.DataFrame) or b not in records.columns]
    if missing:
        msg = f"records have no grouping column(s) {missing}"
        raise DesignError(msg)
    req = _request(records, score, batch, position, categories, max_lag, n_boot, seed, level)
    parts = records.partition_by(list(by_cols), as_dict=True, maintain_order=True)
    keys = sorted(parts, key=lambda k: tuple((v is None, v) for v in k))
    groups: dict[tuple[Any, ...], SerialDiagnostics] = {}
    contrasts, entropies, transitions = [], [], []
    key_frame = records.select(by_cols).head(0)
    for key in keys:
        part = parts[key]
        result = _diagnose(part, req)
        groups[key] = result
        key_row = part.select(by_cols).head(1)
        ce = result.serial_contrast
        contrast = pl.DataFrame(
            {"n_pairs": [result.n_pairs], "serial_contrast": [ce.value],
             "serial_contrast_low": [ce.low], "serial_contrast_high": [ce.high],
             "reason": [ce.reason]},
            schema=CONTRAST_SCHEMA,
        )
        contrasts.append(key_row.join(contrast, how="cross"))
        entropies.append(key_row.join(result.entropies, how="cross"))
        transitions.append(key_row.join(result.transitions, how="cross"))

    def stack(frames: list[pl.DataFrame], schema: dict[str, pl.DataType]) -> pl.DataFrame:
        if frames:
            return pl.concat(frames, how="vertical")
        return key_frame.join(pl.DataFrame(schema=schema), how="cross")

    return SerialDiagnosticsByGroup(
        by=by_cols,
        groups=MappingProxyType(groups),
        contrasts=stack(contrasts, CONTRAST_SCHEMA),
        entropies=stack(entropies, ENTROPY_SCHEMA),
        transitions=stack(transitions, TRANSITION_SCHEMA),
    )
