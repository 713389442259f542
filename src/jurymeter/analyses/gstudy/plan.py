"""A plan's predictions from tonight's G-study report: the next run's MDD95 and E rho^2 at the planned sizes.

The statistics are :mod:`jurymeter.stats.plan_prediction`; this module reads
the report (``docs/results.md``, the G-study's keys) back into them. The
component draws are chi-square draws of the report's mean squares (its
``n_boot``, pivotal unless its intervals were percentile ones), redrawn from the
mean squares and degrees of freedom it keeps for each component. A balanced
fit's are its own intervals' draws; a Henderson fit's are
:func:`jurymeter.stats.henderson.chisquare_draws`' (its ``ems_coefficients``
map them to components), the approximation ``docs/henderson.md`` measures, even
where its intervals came from the record bootstrap. The planned run is crossed
and complete, so its sampling step is the balanced one either way.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from jurymeter.errors import DesignError
from jurymeter.stats.bootstrap import IntervalMethod, mean_square_draws
from jurymeter.stats.design import Design
from jurymeter.stats.dstudy import PAPER_ROLES, fixed_judge_reason
from jurymeter.stats.gstudy import components_from_ms
from jurymeter.stats.plan_prediction import (
    PREDICTED,
    Predicted,
    cheapest_crossed,
    planned_sizes,
    predict_plan,
)

# The D-study roles of the plan's counts (systems, items, judges) in a fitted design.
_ROLE = {"systems": PAPER_ROLES.system, "items": PAPER_ROLES.item, "judges": PAPER_ROLES.judge}


def plan_predictions(
    report: Mapping[str, Any], counts: Mapping[str, int], *, crossed: bool, seed: int = 0
) -> tuple[dict[str, Predicted | None], dict[str, str]]:
    """Each :data:`~jurymeter.stats.plan_prediction.PREDICTED` quantity of the planned run, or why it is not predicted.

    Parameters
    ----------
    report : Mapping
        Tonight's G-study report of the item set the plan is drawn from.
    counts : Mapping[str, int]
        The plan's ``systems``, ``items`` and ``judges``.
    crossed : bool
        Whether every planned judge scores every system on every item (the
        D-study's design). A round robin gives each cell one judge: the next
        run is then an incomplete design whose estimate this prediction does
        not describe.
    seed : int
        Seed of the component draws and of the sampling step.

    Returns
    -------
    predictions, null_reasons
        ``None`` for a quantity that is not predicted, with its reason.
    """
    reasons: dict[str, str] = {}
    why = _not_predictable(report, counts, crossed)
    if why is not None:
        return {key: None for key in PREDICTED}, {key: why for key in PREDICTED}
    design, sizes, sigma2 = _fitted(report)
    ms, df = _column(report, design, "ms"), _column(report, design, "df")
    intervals = report.get("intervals") or {}
    n_boot = int(intervals.get("n_boot") or 800)
    method: IntervalMethod = "percentile" if intervals.get("method") == "percentile" else "pivotal"
    ms_draws = mean_square_draws(ms, df, n_boot, np.random.default_rng(seed), method=method)
    if report.get("estimator") == "henderson":  # chi-square draws of its quadratic forms (henderson.chisquare_draws)
        draws = np.linalg.solve(np.asarray(report["ems_coefficients"], dtype=float), ms_draws.T).T
    else:
        draws = components_from_ms(ms_draws, design, sizes)
    try:
        planned = planned_sizes(design, sizes, {_ROLE[k]: int(n) for k, n in counts.items()
                                                if _ROLE[k] in design.facets})
    except DesignError as exc:  # e.g. one judge planned where tonight had several: its run has no judge facet
        return {key: None for key in PREDICTED}, {key: f"the plan's sizes cannot be predicted: {exc}" for key in PREDICTED}
    predicted = predict_plan(sigma2, draws, design, planned, seed=seed + 1)
    out: dict[str, Predicted | None] = {}
    for key in PREDICTED:
        p = predicted[key]
        out[key] = p
        if p.point is None:
            reasons[key] = "tonight's sigma2_delta at the planned sizes is <= 0: no floor to predict"
        elif p.low is None:
            reasons[key] = (f"only {100 * p.defined:.0f}% of the predictive draws define it: "
                            "the next run's estimate may well be undefined")
    return out, reasons


def _column(report: Mapping[str, Any], design: Design, field: str) -> np.ndarray:
    """One field (``raw``, ``ms``, ``df``) of every component of the report, in ``design.effects`` order
    (the report keys them ``sigma2_<label>``, ``:`` written ``_``: ``stats.gstudy_report.components``)."""
    components = report["components"]
    return np.array([components[f"sigma2_{label.replace(':', '_')}"][field] for label in design.labels], dtype=float)


def _fitted(report: Mapping[str, Any]) -> tuple[Design, dict[str, int], np.ndarray]:
    """The report's design, sizes and raw components (``design.effects`` order)."""
    design = Design.parse(str(report["design"]))
    sizes = {str(k): int(v) for k, v in report["sizes"].items()}
    return design, sizes, _column(report, design, "raw")


def cheapest_sizes(
    report: Mapping[str, Any], *, max_items: int, max_judges: int,
    target_mdd: float | None = None, target_erho2: float | None = None,
    prices: Sequence[float] | None = None,
) -> tuple[int, int] | str:
    """``(items, judges)`` of the crossed plan with the fewest calls (or, with ``prices``, the least money: the
    ``judges`` cheapest) reaching the target at tonight's components
    (:func:`~jurymeter.stats.plan_prediction.cheapest_crossed`), or why there is none, in words."""
    why = _not_predictable(report, {"judges": 1}, True)
    if why is not None:
        return f"the plan cannot be sized from this G-study: {why}"
    design, sizes, sigma2 = _fitted(report)
    if PAPER_ROLES.judge in design.facets and max_judges < 2:
        return "the plan cannot be sized: the item set has one judge in these ids, and a measured plan needs two"
    if report.get("estimator") == "henderson":  # a Henderson D-study is at its harmonic-mean sizes
        sizes = {f: max(1, round(float(v))) for f, v in {**sizes, **(report.get("dstudy_sizes") or {})}.items()}
    found = cheapest_crossed(sigma2, design, sizes, max_items=max_items, max_judges=max_judges,
                             target_mdd=target_mdd, target_erho2=target_erho2, prices=prices)
    if found is None:
        what = f"MDD95 <= {target_mdd:g}" if target_mdd is not None else f"E rho^2 >= {target_erho2:g}"
        return (f"no crossed plan within the item set's {max_items} items and {max_judges} judges reaches {what} "
                "at tonight's components: lower the target, or add items (or judges) to the item set")
    return found


def _not_predictable(report: Mapping[str, Any], counts: Mapping[str, int], crossed: bool) -> str | None:
    """Why the G-study report cannot predict this plan (``None``: it can)."""
    if not crossed:
        return ("a round robin gives each system-item cell one judge, so the G-study of its run cannot separate the "
                "judges' interactions (it fits one judge's balanced block) and would not measure the plan; "
                "predictions are made for a crossed plan (every judge on every cell: plan --crossed)")
    if report.get("estimator") == "henderson" and not report.get("ems_coefficients"):
        return ("tonight's Henderson report has no ems_coefficients (written by an older jurymeter): run the "
                "G-study again to predict from it")
    try:
        design = Design.parse(str(report["design"]))
    except (KeyError, DesignError):
        return "the G-study report names no design"
    if PAPER_ROLES.judge not in design.facets and counts.get("judges", 1) > 1:
        return fixed_judge_reason("a plan's prediction at more than one judge")
    extra = [f for f in design.facets if f not in _ROLE.values()
             and f not in (PAPER_ROLES.generation, PAPER_ROLES.replicate)]
    if extra:
        return f"the fitted design {report['design']!r} has facets {extra} a plan does not size"
    return None
