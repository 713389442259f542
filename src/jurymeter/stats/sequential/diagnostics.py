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

from jurymeter.errors import ConfigError, DesignError
from jurymeter.stats.intervals import percentile_bounds
from jurymeter.stats.pairwise.position import Estimate
from jurymeter.stats.sequential.schemas import ENTROPY_SCHEMA, TRANSITION_SCHEMA
from jurymeter.stats.sequential.schemas import SERIAL_CONTRAST_SCHEMA as CONTRAST_SCHEMA
from jurymeter.stats.sequential.serial_counts import (
    Cells,
    SerialRequest,
    cells,
    chains,
    check_cells,
    resampled_stats,
)

ENTROPY_UNIT = "bits"
"""The unit of every entropy here (logarithms to base 2)."""
MAX_LAG = 3
"""The default largest history length :math:`k` of the conditional entropies ([LiDing2026]_ figure 3)."""

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


def _request(
    records: pl.DataFrame, score: str, batch: str, position: str,
    categories: Sequence[float] | None, max_lag: int, n_boot: int, seed: int, level: float,
) -> SerialRequest:
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
    return SerialRequest(score, batch, position, cats, max_lag, n_boot, seed, float(level))



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
        Seed of the resampling (:func:`jurymeter.stats.sequential.serial_counts.batch_weights`).
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


def _diagnose(records: pl.DataFrame, req: SerialRequest) -> SerialDiagnostics:
    ch = chains(records, req)
    c = len(ch.categories)
    check_cells(c, req.max_lag)
    cell = cells(ch, req.max_lag)
    values = np.asarray(ch.categories, dtype=np.float64)
    (ent0, prob0, slope0), (ent_draws, prob_draws, slope_draws), point_total = resampled_stats(
        cell, c, req.max_lag, values, n_batches=ch.n_batches, n_boot=req.n_boot, seed=req.seed)
    lag_counts = np.bincount(cell.lag, weights=point_total, minlength=req.max_lag + 1)
    n_pairs = round(float(lag_counts[1]))
    return SerialDiagnostics(
        categories=ch.categories,
        serial_contrast=_contrast(slope0, slope_draws, n_pairs, req.level),
        entropies=_entropy_table(cell, lag_counts, ent0[0], ent_draws, req),
        transitions=_transition_table(cell, point_total, values, prob0[0], prob_draws, req.level),
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


def _entropy_table(
    cell: Cells, lag_counts: np.ndarray, point: np.ndarray, draws: np.ndarray, req: SerialRequest
) -> pl.DataFrame:
    """The conditional entropies by history length, with their intervals and nulls."""
    e_low, e_high = _intervals(point, draws, req.level)
    ent_rows: dict[str, list[Any]] = {name: [] for name in ENTROPY_SCHEMA}
    for k in range(req.max_lag + 1):
        n_k = round(float(lag_counts[k]))
        value = _num(point[k])
        ent_rows["lag"].append(k)
        ent_rows["n_positions"].append(n_k)
        ent_rows["n_histories"].append(int(np.unique(cell.history[cell.lag == k]).size))
        ent_rows["entropy"].append(value)
        ent_rows["entropy_low"].append(None if value is None else _num(e_low[k]))
        ent_rows["entropy_high"].append(None if value is None else _num(e_high[k]))
        ent_rows["reason"].append(
            None if value is not None else
            f"no position has {k} consecutive predecessor(s) in its batch"
        )
    return pl.DataFrame(ent_rows, schema=ENTROPY_SCHEMA)


def _transition_table(
    cell: Cells, point_total: np.ndarray, values: np.ndarray, point: np.ndarray, draws: np.ndarray, level: float
) -> pl.DataFrame:
    """The lag-1 transition counts and probabilities, with their intervals and nulls."""
    c = len(values)
    table = np.zeros(c * c)
    cols1 = np.flatnonzero(cell.lag == 1)
    table[cell.history[cols1] * c + cell.current[cols1]] = point_total[cols1]
    n_prev = table.reshape(c, c).sum(axis=1)
    p_low, p_high = _intervals(point, draws, level)
    prev_idx, cur_idx = np.divmod(np.arange(c * c), c)
    return pl.DataFrame(
        {
            "previous": values[prev_idx],
            "current": values[cur_idx],
            "count": np.round(table).astype(np.int64),
            "n_previous": np.round(n_prev[prev_idx]).astype(np.int64),
            "probability": [_num(v) for v in point],
            "probability_low": [_num(v) for v in p_low],
            "probability_high": [_num(v) for v in p_high],
            "reason": [None if n_prev[a] > 0 else
                       f"no rating {values[a]:g} was followed by a rating at the next position"
                       for a in prev_idx],
        },
        schema=TRANSITION_SCHEMA,
    )


def _contrast(slope0: np.ndarray, slope_draws: np.ndarray, n_pairs: int, level: float) -> Estimate:
    """The lag-1 serial contrast with its interval, or why it is undefined."""
    s_low, s_high = _intervals(slope0, slope_draws.reshape(-1, 1), level)
    if n_pairs == 0:
        return Estimate(None, None, None, "no batch holds two ratings at consecutive positions")
    if math.isnan(slope0[0]):
        return Estimate(None, None, None,
                        "every rating followed by another is the same category: the slope on "
                        "the previous rating is not identified")
    return Estimate(float(slope0[0]), _num(s_low[0]), _num(s_high[0]))


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

