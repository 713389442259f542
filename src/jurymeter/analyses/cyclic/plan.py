"""A round-robin or cost-weighted plan's predictions from tonight's CyclicJudge report: each strategy's variance.

The statistics are :mod:`jurymeter.stats.cyclic.strategy_prediction`; this module
reads the report (``docs/cyclic.md``, each decomposed system's ``mean_squares``
and ``df``) back into them at the plan's sizes (its items, its judges, its calls
per item), and says why a quantity is not predicted. The counterpart of
:mod:`jurymeter.analyses.gstudy.plan` for the plans the G-study does not
describe.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from jurymeter.errors import DesignError
from jurymeter.stats.cyclic.strategy_prediction import (
    COST_KEY,
    STRATEGY_KEYS,
    SystemMeanSquares,
    predict_strategy_variances,
)
from jurymeter.stats.plan_prediction import Predicted

_MS = ("ms_scenario", "ms_generation", "ms_judge", "ms_residual")
_DF = ("df_scenario", "df_generation", "df_judge", "df_residual")


def strategy_keys(*, cost_weighted: bool) -> tuple[str, ...]:
    """The ``plan.json`` keys of a round-robin (or cost-weighted) plan's strategy variances."""
    return (*STRATEGY_KEYS, COST_KEY) if cost_weighted else STRATEGY_KEYS


def system_mean_squares(report: Mapping[str, Any]) -> list[SystemMeanSquares]:
    """Each decomposed system of a cyclic report, as its block sizes, mean squares and degrees of freedom.

    Raises
    ------
    DesignError
        A system's entry lacks them (a report written by an older jurymeter) or they are not numbers.
    """
    out = []
    for sid, r in (report.get("systems") or {}).items():
        try:
            out.append(SystemMeanSquares(
                int(r["n_scenarios"]), int(r["n_generations"]), int(r["n_judges"]),
                tuple(float(r["mean_squares"][k]) for k in _MS),  # type: ignore[arg-type]  # four by _MS
                tuple(int(r["df"][k]) for k in _DF),  # type: ignore[arg-type]  # four by _DF
            ))
        except (KeyError, TypeError, ValueError) as exc:
            msg = f"system {sid!r} of the CyclicJudge report has no usable mean squares and df ({exc!r})"
            raise DesignError(msg) from None
    return out


def strategy_predictions(
    report: Mapping[str, Any] | None,
    counts: Mapping[str, int],
    *,
    budget: int,
    calls_per_judge: Sequence[int] | None = None,
    why: str | None = None,
    seed: int = 0,
) -> tuple[dict[str, Predicted | None], dict[str, str]]:
    """Strategy variances of a plan of ``counts['items']`` items, ``counts['judges']`` judges and ``budget`` calls per item.

    Parameters
    ----------
    report : Mapping or None
        Tonight's CyclicJudge report of the item set (``None``: ``why`` says why there is none).
    counts : Mapping[str, int]
        The plan's ``items`` and ``judges`` (``systems`` is not used: the
        variances are per system, averaged over tonight's decomposed systems).
    budget : int
        Judge calls per item (a round robin's generations per item; a
        cost-weighted plan's sum of its calls per judge).
    calls_per_judge : sequence of int, optional
        A cost-weighted plan's calls of each judge on every item: adds ``var_cost_weighted``.
    why : str, optional
        Why there is no report (the CyclicJudge analysis could not run).
    seed : int
        Seed of the pivotal draws.

    Returns
    -------
    predictions, null_reasons
        By key (:func:`strategy_keys`); ``None`` for one not predicted, with its reason.
    """
    keys = strategy_keys(cost_weighted=calls_per_judge is not None)
    if report is None:
        reason = why or "no CyclicJudge report of the item set"
        return dict.fromkeys(keys), dict.fromkeys(keys, reason)
    try:
        systems = system_mean_squares(report)
        if not systems:
            msg = "the CyclicJudge report decomposed no system"
            raise DesignError(msg)
        predicted = predict_strategy_variances(
            systems, n_items=int(counts["items"]), budget=budget, k_total=int(counts["judges"]),
            calls_per_judge=calls_per_judge, seed=seed,
        )
    except DesignError as exc:
        return dict.fromkeys(keys), dict.fromkeys(keys, f"the strategy variances cannot be predicted: {exc}")
    reasons = {}
    if predicted["var_all_judges"] is None:
        reasons["var_all_judges"] = (
            f"strategy A (every judge on each of B/K generations) has no plan at {budget} call(s) per item with "
            f"{counts['judges']} judges: B must be a multiple of K"
        )
    return predicted, reasons
