r"""The one G-study report builder: the JSON-ready dict both estimators publish, key by key.

The balanced block (:class:`jurymeter.stats.reliability.GStudyChunks`) and
Henderson's Method I on every record (:func:`jurymeter.stats.reliability.henderson_report`)
compute their parts differently (what a dense block gives, what every record
gives); :func:`gstudy_report` assembles the same report from either's
:class:`ReportParts`, in one key order, and the helpers here are the parts
both compute the same way (components, intervals and the MDD's scale, the
rank reliability, the judge offsets, the item diagnostics).
:func:`with_estimator` adds the estimator chosen (``[fit.gstudy] estimator``,
:mod:`jurymeter.stats.estimator_choice`) at its place.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from jurymeter.stats.bootstrap import Interval, ReliabilityIntervals
from jurymeter.stats.design import Design
from jurymeter.stats.diagnostics import wrong_order_probability
from jurymeter.stats.dstudy import PAPER_ROLES, error_variances
from jurymeter.stats.dstudy_report import UNLIMITED_ITEMS_FIXED, ReportNotes
from jurymeter.stats.fitted_design import FittedDesign, design_text
from jurymeter.stats.gstudy import GStudy
from jurymeter.stats.henderson_cells import Cells, judge_cells
from jurymeter.stats.intervals import percentile_bounds
from jurymeter.stats.judge_effects import balanced_offsets, incomplete_offsets


@dataclass(frozen=True, slots=True)
class HendersonParts:
    """What only the Henderson report has: the estimator's note, the balanced block it did not fit, ..."""

    estimator_note: str
    balanced_block: dict[str, Any] | None
    balanced_block_drops: list[str]
    system_means_kind: str
    method_note: str | None
    ems_coefficients: list[list[float]] | None = None  # E[MS] = C sigma2 on the observed pattern


@dataclass(frozen=True, slots=True)
class ReportParts:
    """The parts one G-study report is built from (:func:`gstudy_report`); the two estimators differ only here.

    ``scale`` is :func:`intervals_and_scale`'s triple; ``method`` the
    intervals' method as written (``"pivotal"``, ``"pivotal (records)"``);
    ``henderson`` is ``None`` on the balanced block.
    """

    item_set: str
    request: dict[str, Any]
    fitted: FittedDesign
    block_design: Design | None
    block: dict[str, Any]
    fit: GStudy
    boot: ReliabilityIntervals
    summary: dict[str, Any]
    scale: tuple[float | None, dict[str, dict[str, float | None]], float | None]
    sd_means: float
    system_means: dict[str, float]
    method: str
    naive: dict[str, Any]
    rank_reliability: dict[str, float | None]
    ensembles: dict[str, Any]
    items: dict[str, Any] | None
    nested: dict[str, Any] | None
    judge_offsets: list[dict[str, Any]]
    henderson: HendersonParts | None = None
    # The D-study of the declared universe (fixed facets, finite pools: jurymeter.stats.universe); None: random
    universe: dict[str, Any] | None = None


def gstudy_report(parts: ReportParts) -> dict[str, Any]:
    """The report (``docs/results.md``, the G-study's keys) from its parts, in the one key order.

    Parameters
    ----------
    parts : ReportParts
        What the estimator computed.

    Returns
    -------
    dict
        JSON-ready; the Henderson-only keys (``estimator``, ``estimator_note``,
        ``balanced_block``, ``balanced_block_drops``, ``system_means_kind``,
        ``intervals.method_note``) appear only with ``parts.henderson``.
    """
    h = parts.henderson
    mdd_sd, intervals, p_ceiling = parts.scale
    boot = parts.boot
    report: dict[str, Any] = {"item_set": parts.item_set, "request": parts.request}
    if h is not None:
        report.update(estimator="henderson", estimator_note=h.estimator_note)
    report.update({
        "design": design_text(parts.fitted.design),
        "block_design": None if parts.block_design is None else design_text(parts.block_design),
        "design_notes": list(parts.fitted.notes),
        "fixed_facets": dict(parts.fitted.fixed),
        "block": parts.block,
    })
    if h is not None:
        report.update(balanced_block=h.balanced_block, balanced_block_drops=h.balanced_block_drops)
    report.update({
        "grand_mean": parts.fit.grand_mean,
        "components": components(parts.fit, boot),
        **parts.summary,
        "mdd95_in_sd_of_system_means": mdd_sd,
        "sd_of_system_means": parts.sd_means,
        "system_means": parts.system_means,
        "universe_dstudy": parts.universe,
    })
    if h is not None:
        report["system_means_kind"] = h.system_means_kind
        # What maps Henderson's mean squares to components (a plan's predictions redraw them:
        # analyses/gstudy/plan.py).
        report["ems_coefficients"] = h.ems_coefficients
    report["intervals"] = {**intervals, "n_boot": boot.n_boot, "level": 0.95, "method": parts.method}
    if h is not None:
        report["intervals"]["method_note"] = h.method_note
    report.update({
        "p_ceiling_at_least_0_8": p_ceiling,
        "naive_item_bootstrap": parts.naive,
        "rank_reliability": parts.rank_reliability,
        "ensembles": parts.ensembles,
        "items": parts.items,
        "nested": parts.nested,
        "judge_offsets": parts.judge_offsets,
    })
    return report


def with_estimator(report: Mapping[str, Any], estimator: str, note: str | None = None) -> dict[str, Any]:
    """``report`` with ``estimator`` (and ``estimator_note``) at their place, after ``request``."""
    out: dict[str, Any] = {}
    for key, value in report.items():
        if key in ("estimator", "estimator_note"):
            continue
        out[key] = value
        if key == "request":
            out["estimator"] = estimator
            if note is not None:
                out["estimator_note"] = note
            elif "estimator_note" in report:
                out["estimator_note"] = report["estimator_note"]
    return out


def request_json(request: Any) -> dict[str, Any]:
    """A frozen request's fields as JSON (tuples as lists): the report's ``request``."""
    from dataclasses import asdict

    return {k: (list(v) if isinstance(v, tuple) else v) for k, v in asdict(request).items()}


def rank_reliability(
    notes: ReportNotes, fit: GStudy, items: float, seed: int, *, fixed: bool, sample_items: int | None = None
) -> dict[str, float | None]:
    """The chance of a wrong order among the top 10 with 1 and 3 judges at ``items`` items, with its nulls.

    ``sample_items``: the items each simulated leaderboard has (Henderson: the
    harmonic-mean items rounded; ``None``: the fit's own, a balanced block's).
    """
    design, roles = fit.design, PAPER_ROLES
    wrong: dict[str, float | None] = {}
    for judges, key in ((1, "wrong_order_top10_1_judge"), (3, "wrong_order_top10_3_judges")):
        if fixed and judges > 1:
            wrong[key] = notes.fixed_none(f"rank_reliability.{key}", f"the rank reliability at {judges} judges")
            continue
        n = roles.sizes(design, items, judges, 1)
        _, delta, _ = error_variances(fit.sigma2, design, n)
        probability = (
            wrong_order_probability(fit, judges=judges, seed=seed) if sample_items is None
            else wrong_order_probability(fit, judges=judges, items=sample_items, seed=seed)
        )
        wrong[key] = notes.value(
            f"rank_reliability.{key}", probability,
            f"sigma2_delta = {float(delta):.4g} <= 0 {notes.where(n)} ({notes.negative(n)})",
        )
    return wrong


def single_judge_mdd(notes: ReportNotes, design: Design, items: float, generations: float) -> float | None:
    """The MDD of one judge and one run at ``items`` items and ``generations`` (the naive bootstrap's comparison)."""
    return notes.mdd(
        "naive_item_bootstrap.mdd95_single_judge",
        PAPER_ROLES.sizes(design, items, 1, 1, generations=generations),
    )


def _interval(i: Interval) -> dict[str, float | None]:
    return i.to_json()


def components(fit: GStudy, boot: ReliabilityIntervals) -> dict[str, dict[str, Any]]:
    """The report's ``components``: each effect's raw estimate, share, df, mean square and interval."""
    return {
        f"sigma2_{label.replace(':', '_')}": {
            "raw": float(fit.sigma2[k]),
            "share": float(fit.shares[k]),
            "df": float(fit.df[k]),
            "ms": float(fit.ms[k]),
            "interval": _interval(boot.sigma2[label]),
        }
        for k, label in enumerate(fit.effects)
    }



JUDGE_OFFSETS_NOTE = (
    "offset: the judge's mean minus the grand mean of the fitted data, in points (with every record, "
    "adjusted for the (system, item) cells it scored); se and the 95 % interval are given the judges "
    "(docs/results.md, judge_effects)"
)


def one_judge_offsets(notes: ReportNotes, judge: str | None) -> list[dict[str, Any]]:
    notes.null_reasons["judge_offsets"] = (
        f"one judge ({judge}) in the fit: an offset is a judge against the rest of its panel, and there is no "
        "other judge" if judge else "no judge facet in the fitted design: no offsets"
    )
    return []


def balanced_judge_offsets(
    judges: tuple[str, ...], judge_means: np.ndarray | None, fitted: FittedDesign, fit: GStudy, notes: ReportNotes
) -> list[dict[str, Any]]:
    """Each judge's offset on the balanced block (:func:`jurymeter.stats.judge_effects.balanced_offsets`)."""
    design = fitted.design
    if judge_means is None or PAPER_ROLES.judge not in design.facets:
        return one_judge_offsets(notes, fitted.fixed.get(PAPER_ROLES.judge))
    return balanced_offsets(
        judges, judge_means, design, fit.sizes,
        dict(zip(design.effects, fit.sigma2.tolist(), strict=True)), mean_squares=(fit.ms, fit.df),
    )


def henderson_judge_offsets(
    cells: Cells, fitted: FittedDesign, fit: GStudy, notes: ReportNotes
) -> list[dict[str, Any]]:
    """Each judge's within-cell offset on every record (:func:`jurymeter.stats.judge_effects.incomplete_offsets`)."""
    design = fitted.design
    if PAPER_ROLES.judge not in design.facets:
        return one_judge_offsets(notes, fitted.fixed.get(PAPER_ROLES.judge))
    judges, arrays = judge_cells(cells)
    rows, reason = incomplete_offsets(
        judges, arrays["system"], arrays["item"], arrays["judge"], arrays["y"], design,
        dict(zip(design.effects, fit.sigma2.tolist(), strict=True)),
        generations=arrays["generations"], rows=arrays["rows"],
    )
    if reason is not None:
        notes.null_reasons["judge_offsets"] = reason
    return rows



def item_report(
    items: Any, item_ids: tuple[str, ...] | list[str], screen_threshold: float, screened: list[str], notes: ReportNotes
) -> dict[str, Any]:
    """The report's ``items``: discriminations, the split-half rho's median and 95 % bounds, the screen."""
    rho = items.split_half_rho[np.isfinite(items.split_half_rho)]
    reason = "every split has constant discriminations in a half: no rank correlation"

    median = float(np.median(rho)) if rho.size else None
    low, high = (float(b) for b in percentile_bounds(rho, 0.95)) if rho.size else (None, None)
    return {
        "discrimination": dict(zip(item_ids, items.discrimination.tolist(), strict=True)),
        "split_half_rho_median": notes.value("items.split_half_rho_median", median, reason),
        "split_half_rho_low": notes.value("items.split_half_rho_low", low, reason),
        "split_half_rho_high": notes.value("items.split_half_rho_high", high, reason),
        "screen_threshold": screen_threshold,
        "screened_items": screened,
    }



def intervals_and_scale(
    notes: ReportNotes, summary: Mapping[str, Any], boot: ReliabilityIntervals, sd_means: float, *, fixed: bool
) -> tuple[float | None, dict[str, dict[str, float | None]], float | None]:
    """The MDD in SDs of the system means, the bootstrap intervals and P(ceiling >= 0.8), with their nulls.

    Shared by the balanced and the Henderson report; with the judge fixed
    (one judge) the judge-dependent intervals are null with that reason.
    """
    mdd_sd = None
    if summary["mdd95"] is None:
        notes.null_reasons["mdd95_in_sd_of_system_means"] = "mdd95 is undefined"
    elif not sd_means > 0:
        notes.null_reasons["mdd95_in_sd_of_system_means"] = f"the system means do not vary (SD {sd_means!r})"
    else:
        mdd_sd = summary["mdd95"] / sd_means
    intervals = {name: _interval(i) for name, i in boot.derived.items()}
    judge_quantities = {
        "ceiling": "the single-judge ceiling", "ceiling_3_judges": "the ceiling at 3 judges",
        "judges_needed": "the number of judges needed", "mdd95_unlimited_items": UNLIMITED_ITEMS_FIXED,
    }
    for name, interval in intervals.items():
        if fixed and name in judge_quantities:
            intervals[name] = {key: None for key in interval}
            notes.judge_fixed(f"intervals.{name}", f"an interval of {judge_quantities[name]}")
        elif interval["low"] is None:
            notes.null_reasons[f"intervals.{name}"] = "no bootstrap draw defines it"
        elif any(v is None or (isinstance(v, float) and not math.isfinite(v)) for v in interval.values()):
            # A size never reached (judges or items needed: infinite) is null with its reason, as
            # the point estimate's own entry is (never an impossible value; issue 22).
            intervals[name] = {k: None if isinstance(v, float) and not math.isfinite(v) else v
                               for k, v in interval.items()}
            notes.null_reasons[f"intervals.{name}"] = (
                notes.null_reasons.get(name)
                or "some bootstrap draws never reach the target: the bound is unbounded")
    if fixed:
        p_ceiling = notes.fixed_none("p_ceiling_at_least_0_8", "the chance that the ceiling reaches 0.8")
    else:
        p_ceiling = notes.value(
            "p_ceiling_at_least_0_8", boot.p_ceiling_at_least_080, "no bootstrap draw defines the ceiling"
        )
    return mdd_sd, intervals, p_ceiling
