r"""The G-study's curves and leaderboard, recomputed from a fitted report's components.

Figure 1 (E rho^2 against items, per judge count), figure 2 (MDD of budget
splits), the ceiling by judge count, and the leaderboard's rank ranges and tie groups.

Values follow the boundary rule of :mod:`jurymeter.stats.dstudy` ("Boundaries";
``docs/gstudy.md``): coefficients in [0, 1], an undefined value is ``None``
(a ratio 0/0, an MDD whose :math:`\sigma^2_\delta \le 0`). The budget splits
use at most the block's judges (the universe's judges that survived the block
rule), as the report's budget optimum does; the other curves keep their fixed
judge counts and list the points beyond the observed sizes in the report's
``extrapolated`` dict. With one judge (a design without the judge facet, the
judge fixed: ``docs/gstudy.md``, "Designs read from the data") figure 1 has the
one curve of that judge, the budget splits are over items only, and every
ceiling is ``None`` with that reason.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from jurymeter.stats.design import Design
from jurymeter.stats.ranking import rank_intervals

# Figure 1's curves: judge counts and item counts (log-spaced, 5..500).
CURVE_JUDGES = (1, 2, 3, 5, 10)
CURVE_ITEMS = tuple(int(v) for v in np.unique(np.geomspace(5, 500, 40).round()))
# Figure 2's splits: judges per item tried for each budget (at most the block's judges).
BUDGET_JUDGES = (1, 2, 3, 4, 5, 6, 8, 10)


def curves(report: dict[str, Any]) -> dict[str, Any]:
    r"""Figure 1 (E rho^2 against items per judge count) and figure 2 (budget splits) data.

    Recomputed from the fitted components with :mod:`jurymeter.stats.dstudy`
    (paper section 3, :math:`E\rho^2 = \sigma^2_s / (\sigma^2_s + \sigma^2_\delta)`
    and :math:`\mathrm{MDD}_{95} = 1.96\sqrt{2\sigma^2_\delta}`; appendix, the
    budget optimum; eq. 4, the ceilings).

    Returns
    -------
    dict
        ``erho2_curve`` (rows ``judges``, ``items``, ``erho2``), ``budget_curve``
        (rows ``budget``, ``judges``, ``items``, ``replicates``, ``mdd95``,
        ``optimal``: judges at most the block's; ``optimal`` marks the split
        with the smallest :math:`\sigma^2_\delta`, and no row when that
        smallest value is <= 0, since the estimates then cannot rank the
        splits), ``ceiling_by_judges``, and the report's ``null_reasons``,
        ``truncated`` and ``extrapolated`` dicts with the curves' entries added
        (``report.update(curves(report))`` keeps both).
    """
    # Imported here: the fits run on the workers, and the flow's own process
    # then never loads scipy (a second of its start-up).
    from jurymeter.stats.dstudy import PAPER_ROLES

    design = Design.parse(report["design"])
    sigma2 = np.array([report["components"][_label(e)]["raw"] for e in design.labels])
    roles = PAPER_ROLES
    observed = report.get("sizes") or {
        roles.item: report["block"]["items"], roles.judge: report["block"]["judges"]
    }
    notes = _Notes(
        null_reasons=dict(report.get("null_reasons") or {}),
        truncated=dict(report.get("truncated") or {}),
        extrapolated=dict(report.get("extrapolated") or {}),
    )
    fit = _Fit(design=design, sigma2=sigma2, observed=observed, fixed=roles.judge_fixed(design),
               n_judges=int(observed.get(roles.judge, 1)))
    return {
        "erho2_curve": _erho2_curve(fit, notes),
        "budget_curve": _budget_curve(fit, report["request"]["budgets"], notes),
        "ceiling_by_judges": _ceilings(fit, notes),
        "null_reasons": notes.null_reasons,
        "truncated": notes.truncated,
        "extrapolated": notes.extrapolated,
    }


@dataclass(frozen=True, slots=True)
class _Fit:
    """What every curve reads of the report: the design, the raw components, the observed sizes."""

    design: Design
    sigma2: np.ndarray
    observed: dict[str, Any]
    fixed: bool  # a design without the judge facet: the judge is fixed
    n_judges: int


@dataclass(frozen=True, slots=True)
class _Notes:
    """The report's ``null_reasons``, ``truncated`` and ``extrapolated``, which the curves add to."""

    null_reasons: dict[str, str]
    truncated: dict[str, str]
    extrapolated: dict[str, str]


def _erho2_curve(fit: _Fit, notes: _Notes) -> list[dict[str, Any]]:
    """Figure 1: E rho^2 at every item count of ``CURVE_ITEMS``, per judge count (a fixed judge: its own)."""
    from jurymeter.stats.dstudy import PAPER_ROLES, beyond_observed, erho2

    roles, design = PAPER_ROLES, fit.design
    items = np.array(CURVE_ITEMS, dtype=np.float64)
    curve = []
    for j in (1,) if fit.fixed else CURVE_JUDGES:  # a fixed judge: its own curve only
        values = erho2(fit.sigma2, design, roles.sizes(design, items, j, 1))
        curve += [
            {"judges": j, "items": int(n), "erho2": _number(v)} for n, v in zip(CURVE_ITEMS, values, strict=True)
        ]
    if any(row["erho2"] is None for row in curve):
        notes.null_reasons["erho2_curve"] = "sigma2_s <= 0 and sigma2_delta <= 0 at some points (0/0)"
    largest = roles.sizes(design, max(CURVE_ITEMS), max(CURVE_JUDGES), 1)
    beyond = beyond_observed(design, largest, fit.observed, roles)
    if beyond:
        notes.extrapolated["erho2_curve"] = "points beyond the observed sizes: " + "; ".join(beyond)
    return curve


def _budget_curve(fit: _Fit, budgets: list[int], notes: _Notes) -> list[dict[str, Any]]:
    """Figure 2: the MDD of every split of each budget over at most the block's judges, the best marked."""
    from jurymeter.stats.dstudy import PAPER_ROLES, beyond_observed, error_variances, mdd95

    roles, design, sigma2 = PAPER_ROLES, fit.design, fit.sigma2
    budget_rows = []
    judge_counts = [j for j in BUDGET_JUDGES if j <= fit.n_judges]
    for budget in budgets:
        judges = np.array([j for j in judge_counts if budget // j >= 1], dtype=np.float64)
        n_items = np.floor(budget / judges)
        sizes = roles.sizes(design, n_items, judges, 1)
        _, delta, _ = error_variances(sigma2, design, sizes)
        values = mdd95(sigma2, design, sizes)
        best = int(np.argmin(delta))
        ranked = bool(delta[best] > 0)
        if not ranked:
            notes.null_reasons[f"budget_curve.{budget}"] = (
                f"sigma2_delta = {float(delta[best]):.4g} <= 0 at the split minimizing it: no split is optimal"
            )
        for k in range(len(judges)):
            budget_rows.append(
                {
                    "budget": int(budget),
                    "judges": int(judges[k]),
                    "items": int(n_items[k]),
                    "replicates": 1,
                    "mdd95": _number(values[k]),
                    "optimal": ranked and k == best,
                }
            )
        beyond = beyond_observed(design, sizes, fit.observed, roles)
        if beyond:
            notes.extrapolated[f"budget_curve.{budget}"] = "splits beyond the observed sizes: " + "; ".join(beyond)
    return budget_rows


def _ceilings(fit: _Fit, notes: _Notes) -> dict[str, float | None]:
    """Eq. 4's ceiling at each judge count of ``CURVE_JUDGES`` (``None`` with the reason for a fixed judge)."""
    from jurymeter.stats.dstudy import ceiling, fixed_judge_reason

    design, sigma2 = fit.design, fit.sigma2
    ceilings = {}
    for j in CURVE_JUDGES:
        ceilings[str(j)] = _number(float(ceiling(sigma2, design, judges=j)))
        if fit.fixed:
            notes.null_reasons[f"ceiling_by_judges.{j}"] = fixed_judge_reason(f"the ceiling at {j} judge(s)")
            continue
        if ceilings[str(j)] is None:
            notes.null_reasons[f"ceiling_by_judges.{j}"] = "sigma2_s <= 0 and sigma2_sj <= 0 (0/0)"
        elif sigma2[design.labels.index("s")] < 0 or sigma2[design.labels.index("sj")] < 0:
            notes.truncated.setdefault(f"ceiling_by_judges.{j}", "sigma2_s or sigma2_sj < 0, taken as 0")
        if j > fit.n_judges:
            notes.extrapolated[f"ceiling_by_judges.{j}"] = f"{j} judges > {fit.n_judges} observed"
    return ceilings


def _label(effect: str) -> str:
    return f"sigma2_{effect.replace(':', '_')}"


def _number(value: float) -> float | None:
    return None if np.isnan(value) else float(value)


def leaderboard(report: dict[str, Any]) -> list[dict[str, Any]]:
    r"""The fit's system means with rank ranges and tie groups under the fit's MDD (docs/results.md).

    The block's means, not all records', so the ranking and the MDD describe
    the same data (:func:`jurymeter.stats.ranking.rank_intervals`: ``rank_low``
    and ``rank_high`` span every system a system cannot be told apart from;
    the tie groups are the connected components of "closer than the MDD").
    When the report's ``mdd95`` is ``None`` (no positive
    :math:`\sigma^2_\delta`; its reason is in ``null_reasons``), the systems
    are still ranked, but ``rank_low``, ``rank_high``, ``tie_group`` and
    ``mdd95`` are ``None``: no range or grouping can be drawn without a floor.
    """
    mdd = report["mdd95"]
    if mdd is None:
        rows = rank_intervals(report["system_means"], 0.0).to_dicts()
        return [{**row, "rank_low": None, "rank_high": None, "tie_group": None, "mdd95": None} for row in rows]
    return rank_intervals(report["system_means"], mdd).to_dicts()
