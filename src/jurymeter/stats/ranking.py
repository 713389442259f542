r"""Leaderboard tie groups: systems whose means differ by less than the MDD.

The rule (``docs/results.md``, "Tie groups"): systems are sorted by mean, best
first. The first system opens group 1; each next system joins the current group
if its mean is less than ``mdd95`` below the mean of the group's first system,
and otherwise opens the next group. Two systems in one group therefore differ by
less than the benchmark's minimum detectable difference at 95 %
(:math:`\mathrm{MDD}_{95} = 1.96 \sqrt{2 \sigma^2_\delta}`, [Anand2026]_
appendix), and no reader should rank them against each other.

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
    "tie_group": pl.Int64(),
    "mdd95": pl.Float64(),
}


def tie_groups(means: Mapping[str, float], mdd: float) -> pl.DataFrame:
    r"""Rank systems by mean and group those closer than the MDD to their group's leader.

    Parameters
    ----------
    means : Mapping[str, float]
        System id to the system's mean score (higher is better). Every mean must
        be finite.
    mdd : float
        The minimum detectable difference at 95 % (``mdd95``), in score points,
        ``>= 0``. ``inf`` puts every system in one group.

    Returns
    -------
    polars.DataFrame
        Columns ``system_id`` (str), ``mean`` (f64), ``rank`` (i64, 1 = best),
        ``tie_group`` (i64, 1 = top group), ``mdd95`` (f64, ``mdd`` on every
        row); one row per system, best first. Equal means are ordered by
        ``system_id`` so the result is deterministic; ranks are ``1..n`` with
        no shared ranks (the tie group, not the rank, says who is tied).

    Raises
    ------
    DesignError
        ``mdd`` is not a number, NaN or negative, or a mean is not a finite
        number; the message names the value and what is allowed. (A
        :class:`~jurymeter.errors.JurymeterError`, so the CLI reports it in
        one line; it was a ``ValueError`` before issue 11.)

    Notes
    -----
    The rule of ``docs/results.md`` ("Tie groups"): with means sorted best
    first, :math:`m_1 \ge m_2 \ge \dots`, system ``k`` joins the group opened
    by system ``g`` when :math:`m_g - m_k < \mathrm{MDD}_{95}` and opens a new
    group otherwise. The MDD is that of [Anand2026]_ (appendix): the smallest
    difference between two system means that the design detects at 95 %.

    Examples
    --------
    >>> tie_groups({"a": 3.0, "b": 2.9, "c": 2.0, "d": 1.95}, 0.5)["tie_group"].to_list()
    [1, 1, 2, 2]
    """
    value = _real(mdd)
    if value is None or math.isnan(value) or value < 0:
        msg = f"mdd must be a number >= 0 (inf allowed); got {_shown(mdd)!r}"
        raise DesignError(msg)
    mdd = value
    ids = [str(k) for k in means]
    reals = [_real(v) for v in means.values()]
    bad = [k for k, v in enumerate(reals) if v is None or not math.isfinite(v)]
    if bad:
        raw = list(means.values())
        shown = ", ".join(f"{ids[k]!r}: {_shown(raw[k])!r}" for k in bad[:5])
        msg = f"every mean must be a finite number; got {shown}"
        raise DesignError(msg)
    values = np.array(reals, dtype=np.float64)
    table = pl.DataFrame(
        {"system_id": ids, "mean": values},
        schema={"system_id": pl.String(), "mean": pl.Float64()},
    ).sort(["mean", "system_id"], descending=[True, False])
    ordered = table["mean"].to_numpy()
    group = np.zeros(len(ordered), dtype=np.int64)
    start, label = 0, 0
    while start < len(ordered):
        label += 1
        # Sorted best first, so the gaps to the group's first system never
        # decrease (rounding is monotone): the members are a prefix.
        gaps = ordered[start] - ordered[start:]
        size = max(1, int(np.searchsorted(gaps, mdd, side="left")))
        group[start : start + size] = label
        start += size
    return table.with_columns(
        pl.Series("rank", np.arange(1, len(ordered) + 1), dtype=pl.Int64),
        pl.Series("tie_group", group, dtype=pl.Int64),
        pl.lit(mdd, dtype=pl.Float64).alias("mdd95"),
    ).select(list(LEADERBOARD_SCHEMA))


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
