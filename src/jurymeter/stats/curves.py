"""The G-study's curves and leaderboard, recomputed from a fitted report's components.

Figure 1 (E rho^2 against items, per judge count), figure 2 (MDD of budget
splits), the ceiling by judge count, and the leaderboard's tie groups.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from jurymeter.stats.design import Design
from jurymeter.stats.ranking import tie_groups

# Figure 1's curves: judge counts and item counts (log-spaced, 5..500).
CURVE_JUDGES = (1, 2, 3, 5, 10)
CURVE_ITEMS = tuple(int(v) for v in np.unique(np.geomspace(5, 500, 40).round()))
# Figure 2's splits: judges per item tried for each budget.
BUDGET_JUDGES = (1, 2, 3, 4, 5, 6, 8, 10)


def curves(report: dict[str, Any]) -> dict[str, Any]:
    """Figure 1 (E rho^2 against items per judge count) and figure 2 (budget splits) data.

    Recomputed from the fitted components with :mod:`jurymeter.stats.dstudy`
    (paper section 5, eq. for E rho^2 and MDD; appendix, budget optimum).
    """
    # Imported here: the fits run on the workers, and the flow's own process
    # then never loads scipy (a second of its start-up).
    from jurymeter.stats.dstudy import PAPER_ROLES, ceiling, erho2, error_variances, mdd95

    design = Design.parse(report["design"])
    sigma2 = np.array([report["components"][_label(e)]["raw"] for e in design.labels])
    roles = PAPER_ROLES
    items = np.array(CURVE_ITEMS, dtype=np.float64)
    curve = [
        {"judges": j, "items": int(n), "erho2": float(v)}
        for j in CURVE_JUDGES
        for n, v in zip(
            CURVE_ITEMS, erho2(sigma2, design, roles.sizes(design, items, j, 1)), strict=True
        )
    ]
    budget_rows = []
    for budget in report["request"]["budgets"]:
        judges = np.array([j for j in BUDGET_JUDGES if budget // j >= 1], dtype=np.float64)
        n_items = np.floor(budget / judges)
        sizes = roles.sizes(design, n_items, judges, 1)
        _, delta, _ = error_variances(sigma2, design, sizes)
        values = mdd95(sigma2, design, sizes)
        best = int(np.argmin(delta))
        for k in range(len(judges)):
            budget_rows.append(
                {
                    "budget": int(budget),
                    "judges": int(judges[k]),
                    "items": int(n_items[k]),
                    "replicates": 1,
                    "mdd95": float(values[k]),
                    "optimal": k == best,
                }
            )
    ceilings = {str(j): float(ceiling(sigma2, design, judges=j)) for j in CURVE_JUDGES}
    return {"erho2_curve": curve, "budget_curve": budget_rows, "ceiling_by_judges": ceilings}


def _label(effect: str) -> str:
    return f"sigma2_{effect.replace(':', '_')}"


def leaderboard(report: dict[str, Any]) -> list[dict[str, Any]]:
    """The balanced block's system means, grouped into ties below the fit's MDD (docs/results.md).

    The block's means, not all records', so the ranking and the MDD describe
    the same data.
    """
    return tie_groups(report["system_means"], report["mdd95"]).to_dicts()
