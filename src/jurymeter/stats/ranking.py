r"""Leaderboard rank intervals and tie groups from the MDD.

Two rules (``docs/results.md``, "Tie groups"), both functions of the set of
means alone, not of the order in which the systems are visited:

*Rank interval.* System ``k`` is *clearly better* than ``l`` when
:math:`m_k - m_l \ge \mathrm{MDD}_{95}` (and :math:`m_k > m_l`, which only
matters for an MDD of 0). Its rank range is
``rank_low = 1 + #{systems clearly better than k}`` to
``rank_high = n - #{systems clearly worse than k}``: it spans every system it
cannot be told apart from (issue 16, point 3).

*Tie groups.* The connected components of "closer than the MDD" on the sorted
means: a new group starts where the gap between two consecutive sorted means is
at least ``mdd95``. A group is a chain of systems each closer than the MDD to
the next; its two ends may be further apart.

The MDD is :math:`\mathrm{MDD}_{95} = 1.96 \sqrt{2 \sigma^2_\delta}`
([Anand2026]_ appendix): the smallest difference between two system means the
design detects at 95 %.

References
----------
.. [Anand2026] A. Anand, "Ask Which, Not How Good: Sizing Benchmarks Scored by
   an LLM", 2026 (``papers/ask-which-not-how-good.txt``).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import SupportsFloat, SupportsIndex

import numpy as np
import polars as pl

from jurymeter.errors import DesignError

LEADERBOARD_SCHEMA: dict[str, pl.DataType] = {
    "system_id": pl.String(),
    "mean": pl.Float64(),
    "rank": pl.Int64(),
    "rank_low": pl.Int64(),
    "rank_high": pl.Int64(),
    "tie_group": pl.Int64(),
    "mdd95": pl.Float64(),
}


def rank_intervals(means: Mapping[str, float], mdd: float) -> pl.DataFrame:
    r"""Rank systems by mean, with each one's rank range and tie group under the MDD rule.

    Parameters
    ----------
    means : Mapping[str, float]
        System id to the system's mean score (higher is better). Every mean must
        be finite.
    mdd : float
        The minimum detectable difference at 95 % (``mdd95``), in score points,
        ``>= 0``. ``inf`` gives every system the range ``1..n`` and one group.

    Returns
    -------
    polars.DataFrame
        Columns of :data:`LEADERBOARD_SCHEMA`: ``system_id`` (str), ``mean``
        (f64), ``rank`` (i64, 1 = best), ``rank_low``/``rank_high`` (i64, the
        rank range), ``tie_group`` (i64, 1 = top group), ``mdd95`` (f64,
        ``mdd`` on every row); one row per system, best first. Equal means are
        ordered by ``system_id`` so the point ranks are ``1..n``, distinct and
        deterministic; the range, not the rank, says who is tied.

    Raises
    ------
    DesignError
        ``mdd`` is not a number, NaN or negative, or a mean is not a finite
        number; the message names the value and what is allowed.

    Notes
    -----
    With :math:`d_{kl} = m_k - m_l` (computed in floating point),
    :math:`B_k = \{l : d_{lk} \ge \mathrm{MDD}, d_{lk} > 0\}` (clearly better
    than ``k``) and :math:`W_k = \{l : d_{kl} \ge \mathrm{MDD}, d_{kl} > 0\}`
    (clearly worse): ``rank_low = 1 + |B_k|``, ``rank_high = n - |W_k|``.
    Every member of :math:`B_k` has a larger mean and every member of
    :math:`W_k` a smaller one, so ``rank_low <= rank <= rank_high``.

    *Two systems closer than the MDD have overlapping ranges.* Let
    :math:`0 \le d_{ab} < \mathrm{MDD}`. An ``l`` in :math:`B_b` has
    :math:`d_{lb} \ge \mathrm{MDD} > d_{ab}`, so :math:`m_l > m_a`
    (floating-point subtraction is monotone in its first argument): ``l`` is
    not in :math:`W_a` and is not ``a``; and ``a`` is in neither set
    (:math:`d_{ab} < \mathrm{MDD}`, and no system is clearly worse than
    itself). So :math:`B_b` and :math:`W_a` are disjoint subsets of the
    ``n - 1`` systems other than ``a``: :math:`|B_b| + |W_a| \le n - 1`, i.e.
    ``rank_low(b) <= rank_high(a)``. Symmetrically an ``l`` in :math:`B_a` has
    :math:`m_l > m_a \ge m_b` and is not in :math:`W_b`, and ``b`` is in
    neither (:math:`m_b \le m_a`), so ``rank_low(a) <= rank_high(b)``. The two
    inequalities are the overlap of the ranges.

    *Tie groups* are the connected components of the graph "closer than the
    MDD": sorted best first, group ``g + 1`` starts at system ``k`` when
    :math:`m_{k-1} - m_k \ge \mathrm{MDD}`. Two systems closer than the MDD
    are in one group (every gap between them in sorted order is at most their
    difference). Before issue 16 a system joined the group of the group's
    first system (greedy), so two systems 0.08 apart could fall into two
    groups against an MDD of 0.46.

    Examples
    --------
    >>> t = rank_intervals({"a": 3.0, "b": 2.9, "c": 2.6, "d": 1.95}, 0.5)
    >>> t["tie_group"].to_list(), t["rank_low"].to_list(), t["rank_high"].to_list()
    ([1, 1, 1, 2], [1, 1, 1, 4], [3, 3, 3, 4])
    """
    # Long for its docstring: the proof that close systems' ranges overlap sits beside the code it is about.
    ids, values, mdd = _checked(means, mdd)
    table = pl.DataFrame(
        {"system_id": ids, "mean": values},
        schema={"system_id": pl.String(), "mean": pl.Float64()},
    ).sort(["mean", "system_id"], descending=[True, False])
    ordered = table["mean"].to_numpy()
    n = len(ordered)
    # d[k, l] = m_k - m_l; "k clearly above l" where d >= mdd and d > 0.
    d = ordered[:, None] - ordered[None, :]
    above = (d >= mdd) & (d > 0)
    rank_low = 1 + above.sum(axis=0)  # systems clearly above each column's system
    rank_high = n - above.sum(axis=1)  # systems each row's system is clearly above
    gaps = ordered[:-1] - ordered[1:]
    group = np.concatenate([[1], 1 + np.cumsum(gaps >= mdd)]).astype(np.int64) if n else np.zeros(0, np.int64)
    return table.with_columns(
        pl.Series("rank", np.arange(1, n + 1), dtype=pl.Int64),
        pl.Series("rank_low", rank_low.astype(np.int64), dtype=pl.Int64),
        pl.Series("rank_high", rank_high.astype(np.int64), dtype=pl.Int64),
        pl.Series("tie_group", group, dtype=pl.Int64),
        pl.lit(mdd, dtype=pl.Float64).alias("mdd95"),
    ).select(list(LEADERBOARD_SCHEMA))


def _checked(means: Mapping[str, float], mdd: float) -> tuple[list[str], np.ndarray, float]:
    """The ids, the means as floats and the MDD as a float, or a ``DesignError`` naming the bad value."""
    value = _real(mdd)
    if value is None or math.isnan(value) or value < 0:
        msg = f"mdd must be a number >= 0 (inf allowed); got {_shown(mdd)!r}"
        raise DesignError(msg)
    ids = [str(k) for k in means]
    reals = [_real(v) for v in means.values()]
    bad = [k for k, v in enumerate(reals) if v is None or not math.isfinite(v)]
    if bad:
        raw = list(means.values())
        shown = ", ".join(f"{ids[k]!r}: {_shown(raw[k])!r}" for k in bad[:5])
        msg = f"every mean must be a finite number; got {shown}"
        raise DesignError(msg)
    return ids, np.array(reals, dtype=np.float64), value


# The name before issue 16 (when it returned the greedy groups alone): the same table.
tie_groups = rank_intervals


def _real(value: object) -> float | None:
    """``value`` as a float when it is a real number (not a bool, not a string), else ``None``."""
    if isinstance(value, bool | str | bytes) or not isinstance(value, SupportsFloat | SupportsIndex):
        return None
    try:
        return float(value)
    except (TypeError, ValueError):
        return None


def _shown(value: object) -> object:
    """A numpy scalar shown as the Python number it is (``nan``, not ``np.float64(nan)``)."""
    real = _real(value)
    return real if real is not None else value
