"""The G-study's typed result: :class:`GStudyResult` and the report it holds, as TypedDicts mypy checks.

The report is the dictionary the statistics build
(:func:`jurymeter.stats.reliability.assess_block`, ``henderson_report``, then
:func:`jurymeter.stats.curves.curves` and ``leaderboard``), kept as it is, so
``fits/<key>.json`` and ``gstudy --json`` are that dictionary, byte for byte.
The TypedDicts name each key the analysis's parts read, with its type;
keys only the JSON carries (the request, the ensembles, the nested design...)
are typed loosely. Every key is optional (``total=False``): the balanced and
the Henderson reports do not carry the same ones.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, TypedDict


class Interval(TypedDict, total=False):
    """A bootstrap interval of one quantity (``intervals[q]``, a component's ``interval``)."""

    estimate: float | None
    low: float | None
    high: float | None
    defined: float  # the share of resamples where the quantity was defined


class Component(TypedDict):
    """One variance component (``components[name]``): its raw estimate, share, df, mean square and interval."""

    raw: float
    share: float | None
    df: float | None
    ms: float | None
    interval: Interval


class BlockSummary(TypedDict, total=False):
    """The balanced block the fit used (``block``): its sizes and what it left out."""

    systems: int
    items: int
    judges: int
    replicates: int
    generations: int
    completeness: float
    records_in: int
    observations_used: int
    dropped_systems: list[str]
    dropped_items: list[str]
    dropped_judges: list[str]
    notes: list[str]


class ItemScreen(TypedDict, total=False):
    """The item screen (``items``): each item's discrimination and the items screened."""

    discrimination: dict[str, float]
    split_half_rho_median: float | None
    split_half_rho_low: float | None
    split_half_rho_high: float | None
    screen_threshold: float
    screened_items: list[str]


class CurveRow(TypedDict):
    """One point of figure 1 (``erho2_curve``)."""

    judges: int
    items: int
    erho2: float | None


class Nomogram(TypedDict):
    """Figure 4 (``nomogram``): E rho^2 by judge count (rows) and item count (columns)."""

    judges: list[int]
    items: list[int]
    erho2: list[list[float | None]]


class BudgetRow(TypedDict):
    """One split of a call budget (``budget_curve``, appendix figure 2)."""

    budget: int
    judges: int
    items: int
    replicates: int
    mdd95: float | None
    optimal: bool


class LeaderboardRow(TypedDict):
    """One system of the leaderboard (``leaderboard``): its mean, rank range and tie group."""

    system_id: str
    mean: float
    rank: int
    rank_low: int
    rank_high: int
    tie_group: int | None
    mdd95: float | None


class JudgeOffsetRow(TypedDict):
    """One judge's offset in points (``judge_offsets``) with its SE and 95 % interval."""

    judge_id: str
    offset: float | None
    se: float | None
    low: float | None
    high: float | None


class GStudyReport(TypedDict, total=False):
    """One fit's G-study report, as the statistics build it (the fit's JSON): its keys and their types."""

    item_set: str
    design: str
    block_design: str
    design_notes: list[str]
    estimator: str
    estimator_note: str
    block: BlockSummary
    sizes: dict[str, int]
    components: dict[str, Component]
    intervals: dict[str, Interval]
    null_reasons: dict[str, str]
    erho2: float | None
    phi: float | None
    ceiling: float | None
    mdd95: float | None
    erho2_30: float | None
    mdd95_30: float | None
    mdd95_unlimited_items: float | None
    mdd95_in_sd_of_system_means: float | None
    mdd95_t: float | None
    mdd95_t_df: float | None
    sd_of_system_means: float | None
    sigma2_delta: float | None
    sigma2_Delta: float | None
    tau: float | None
    grand_mean: float | None
    target: float | None
    p_ceiling_at_least_0_8: float | None
    judges_needed: int | None
    items_needed: int | None
    ceiling_by_judges: dict[str, float | None]
    erho2_curve: list[CurveRow]
    nomogram: Nomogram
    budget_curve: list[BudgetRow]
    leaderboard: list[LeaderboardRow]
    items: ItemScreen
    judge_offsets: list[JudgeOffsetRow]
    system_means: dict[str, float]
    # The declared universe's D-study (stats/universe.py: universe_report); None when none is declared
    universe_dstudy: dict[str, Any] | None
    # Read only by the JSON and the page's tables: typed loosely.
    request: dict[str, Any]
    budget_optimum: dict[str, Any]
    ensembles: dict[str, Any]
    extrapolated: dict[str, str]
    fixed_facets: dict[str, Any]
    truncated: dict[str, Any]
    naive_item_bootstrap: dict[str, Any]
    nested: dict[str, Any]
    rank_reliability: dict[str, Any]
    balanced_block: dict[str, Any]
    balanced_block_drops: dict[str, Any]
    dstudy_sizes: dict[str, Any]
    system_means_kind: str
    ems_coefficients: list[list[float]] | None


@dataclass(frozen=True, slots=True)
class GStudyResult:
    """One fit's G-study: the headline numbers, typed, and the whole report (JSON-ready).

    ``erho2``, ``ceiling`` and ``mdd95`` are ``None`` where they cannot be
    estimated (the report says why); ``design_note`` says why the fitted design
    is not the block's (a facet with one level left it: one judge), else ``None``.
    """

    design: str
    systems: int
    items: int
    judges: int
    erho2: float | None
    ceiling: float | None
    mdd95: float | None
    report: GStudyReport = field(repr=False)
    design_note: str | None = None


def finite(value: Any) -> float | None:
    """``value`` as a float, or ``None`` when it is missing or not finite (JSON has no NaN)."""
    if value is None:
        return None
    x = float(value)
    return x if math.isfinite(x) else None
