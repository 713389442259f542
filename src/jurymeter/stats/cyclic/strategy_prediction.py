r"""A plan's predicted allocation-strategy variances, with intervals from tonight's mean squares.

A CyclicJudge plan fixes the next run's scenarios :math:`n`, its per-scenario
budget of judge calls :math:`B` and the panel :math:`K_{tot}`. At those sizes the
variance of a system's benchmark score, scenario term :math:`\sigma^2_\alpha/n`
excluded as in the paper ([Zhu2026] section 3.3, eq. 3-5), is

.. math::

    V_A = \frac{K_{tot}\sigma^2_\beta + \sigma^2_\varepsilon}{nB},\quad
    V_B = \frac{\sigma^2_\beta + \sigma^2_\gamma + \sigma^2_\varepsilon}{nB},\quad
    V_C = \frac{\sigma^2_\beta + \sigma^2_\varepsilon}{nB}

for all judges on :math:`B/K_{tot}` generations (A, defined when :math:`K_{tot}`
divides :math:`B`), one random judge per generation (B) and the round robin (C).
A cost-weighted plan's own allocation, judge :math:`\ell` on :math:`b_\ell` generations
of every scenario and the mean of the judge means as the score
(:mod:`jurymeter.stats.cyclic.planner`), has

.. math::

    V_{cw} = \frac{\sigma^2_\beta + \sigma^2_\varepsilon}{nK^2}\sum_\ell \frac{1}{b_\ell}

(:func:`~jurymeter.stats.cyclic.planner.plan_variance` without its scenario term;
:math:`V_C` when every :math:`b_\ell = B/K`).

Point: the formulas at tonight's components, each system's truncated at 0 as
its fit reports them (:func:`~jurymeter.stats.cyclic.decomposition.fit_cyclic`)
and averaged over the decomposed systems as
:func:`~jurymeter.stats.cyclic.fit.mean_components` does (the formulas are linear in
the components, so averaging the variances is the same).

Interval: generalized pivotal draws (Weerahandi 1993; Burdick and Graybill
1992, ch. 3), the G-study's convention (:func:`jurymeter.stats.bootstrap.mean_square_draws`,
``"pivotal"``). Under normality each of a system's four mean squares is an
independent :math:`E[MS]\,\chi^2_{df}/df` (Searle, Casella and McCulloch 1992,
sec. 4.5), so :math:`MS\,df/\chi^2_{df}` is a draw of :math:`E[MS]`; one draw of every
system's :math:`(MS_S, MS_G, MS_J, MS_W)` goes through the fit's own EMS solve
(:func:`~jurymeter.stats.cyclic.decomposition.cyclic_components_from_ms`), is truncated at 0 as
the point is, and gives each variance at the plan's sizes; the systems'
variances are averaged draw by draw, and the 2.5 and 97.5 percentiles
(:func:`jurymeter.stats.intervals.percentile_bounds`) are the interval. It is a
confidence interval for the variance the plan will have, tonight's uncertainty
only: a strategy's variance is not something one run of the plan measures.

The judge mean square is pivoted as a random effect on :math:`K-1` degrees of
freedom, so :math:`V_B`'s interval also holds which judges the panel happens to
have (conservative for this fixed panel, whose offsets are measured to
:math:`\sigma^2_\varepsilon/(nm)`); :math:`V_A`, :math:`V_C` and :math:`V_{cw}` do not
involve :math:`\sigma^2_\gamma`. With :math:`K_{tot}` not dividing the plan's
:math:`nB` calls, :math:`nB \bmod K_{tot}` judges of the round robin get one call more
and the offsets cancel up to a term of order :math:`\sigma^2_\gamma/(nB)^2`, left out.

References
----------
.. [Zhu2026] Z. Zhu et al., "CyclicJudge: Mitigating Judge Bias Efficiently in
   LLM-based Evaluation", 2026 (``papers/cyclicjudge.txt``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from jurymeter.errors import DesignError
from jurymeter.stats.bootstrap import DEFAULT_RESAMPLES, mean_square_draws
from jurymeter.stats.cyclic.checks import _positive_int
from jurymeter.stats.cyclic.decomposition import cyclic_components_from_ms
from jurymeter.stats.cyclic.strategies import strategy_numerators
from jurymeter.stats.intervals import percentile_bounds
from jurymeter.stats.plan_prediction import Predicted

# plan.json keys of the strategies A, B, C (eq. 3-5) and of a cost-weighted plan's own allocation.
STRATEGY_KEYS = ("var_all_judges", "var_random_judge", "var_round_robin")
COST_KEY = "var_cost_weighted"


@dataclass(frozen=True, slots=True)
class SystemMeanSquares:
    """One decomposed system's block sizes, mean squares and degrees of freedom.

    ``ms`` and ``df``: :math:`(MS_S, MS_G, MS_J, MS_W)` and :math:`(n-1, n(m-1), K-1, (nm-1)(K-1))`,
    a cyclic report's ``mean_squares`` and ``df`` of the system (:class:`~jurymeter.stats.cyclic.CyclicDecomposition`).
    """

    n_scenarios: int
    n_generations: int
    n_judges: int
    ms: tuple[float, float, float, float]
    df: tuple[int, int, int, int]

    def __post_init__(self) -> None:
        for name in ("n_scenarios", "n_generations", "n_judges"):
            _positive_int(name, getattr(self, name), minimum=2)
        if len(self.ms) != 4 or not all(np.isfinite(v) and v >= 0 for v in self.ms):
            msg = f"ms must be four finite mean squares >= 0 (MS_S, MS_G, MS_J, MS_W), got {self.ms!r}"
            raise DesignError(msg)
        if len(self.df) != 4:
            msg = f"df must be four degrees of freedom, got {self.df!r}"
            raise DesignError(msg)
        for d in self.df:
            _positive_int("df", d)

    def components(self) -> np.ndarray:
        """Tonight's components, truncated at 0 (the fit's point estimate)."""
        raw = cyclic_components_from_ms(np.asarray(self.ms), n=self.n_scenarios, m=self.n_generations,
                                        k=self.n_judges)
        return np.asarray(np.maximum(raw, 0.0), dtype=np.float64)

    def component_draws(self, n_draws: int, rng: np.random.Generator) -> np.ndarray:
        """``(n_draws, 4)`` pivotal draws of the components, truncated at 0 as the point is."""
        ms = mean_square_draws(np.asarray(self.ms, dtype=np.float64), np.asarray(self.df, dtype=np.float64),
                               n_draws, rng, method="pivotal")
        raw = cyclic_components_from_ms(ms, n=self.n_scenarios, m=self.n_generations, k=self.n_judges)
        return np.asarray(np.maximum(raw, 0.0), dtype=np.float64)


def _variances(sigma2: np.ndarray, *, n_items: int, budget: int, k_total: int,
               calls: np.ndarray | None) -> dict[str, np.ndarray]:
    """Each key's variance at the plan's sizes from ``(..., 4)`` components (module docstring)."""
    num = strategy_numerators(sigma2, k_total=k_total) / float(n_items * budget)
    out = dict(zip(STRATEGY_KEYS, np.moveaxis(num, -1, 0), strict=True))
    if calls is not None:
        noise = sigma2[..., 1] + sigma2[..., 3]
        out[COST_KEY] = noise * float(np.sum(1.0 / calls)) / (n_items * calls.size**2)
    return out


def predict_strategy_variances(
    systems: Sequence[SystemMeanSquares],
    *,
    n_items: int,
    budget: int,
    k_total: int,
    calls_per_judge: Sequence[int] | None = None,
    n_draws: int = DEFAULT_RESAMPLES,
    seed: int = 0,
    level: float = 0.95,
) -> dict[str, Predicted | None]:
    r"""Predicted :math:`V_A`, :math:`V_B`, :math:`V_C` (and a cost-weighted plan's) at a plan's sizes, with intervals.

    Parameters
    ----------
    systems : sequence of SystemMeanSquares
        Tonight's decomposed systems (each weighs one).
    n_items : int
        The plan's scenarios :math:`n`.
    budget : int
        The plan's judge calls per scenario :math:`B` (a round robin's generations per item).
    k_total : int
        The plan's panel :math:`K_{tot}`.
    calls_per_judge : sequence of int, optional
        A cost-weighted plan's :math:`b_\ell` per judge; adds :data:`COST_KEY`.
    n_draws, seed, level
        Pivotal draws (default 800, the G-study's), their seed, the interval's level.

    Returns
    -------
    dict
        :data:`STRATEGY_KEYS` (and :data:`COST_KEY`) to
        :class:`~jurymeter.stats.plan_prediction.Predicted`; ``var_all_judges`` is
        ``None`` when :math:`K_{tot}` does not divide :math:`B` (strategy A has no plan
        at that budget).

    Raises
    ------
    DesignError
        No system, a size below 1, ``calls_per_judge`` not one positive count per judge.

    Notes
    -----
    [Zhu2026] eq. 3-5 at the plan's sizes; the interval is the module docstring's.

    >>> s = SystemMeanSquares(80, 10, 5, (79.316, 2.816, 948.486, 1.486), (79, 720, 4, 3196))  # table 2, Qwen
    >>> p = predict_strategy_variances([s], n_items=80, budget=5, k_total=5)
    >>> round(p["var_round_robin"].point * 1e3, 2), p["var_round_robin"].low < p["var_round_robin"].point
    (4.38, True)
    """
    if not systems:
        msg = "systems must hold at least one decomposed system; got none"
        raise DesignError(msg)
    n = _positive_int("n_items", n_items)
    b = _positive_int("budget", budget)
    k = _positive_int("k_total", k_total)
    draws_n = _positive_int("n_draws", n_draws)
    calls = None
    if calls_per_judge is not None:
        calls = np.asarray([_positive_int("calls_per_judge", c) for c in calls_per_judge], dtype=np.float64)
        if calls.size != k or int(calls.sum()) != b:
            msg = (f"calls_per_judge must give each of the k_total={k} judges its calls, summing to the budget "
                   f"{b}; got {list(calls_per_judge)}")
            raise DesignError(msg)
    rng = np.random.default_rng(seed)
    point = _variances(np.mean([s.components() for s in systems], axis=0), n_items=n, budget=b, k_total=k,
                       calls=calls)
    draws = _variances(np.mean([s.component_draws(draws_n, rng) for s in systems], axis=0), n_items=n, budget=b,
                       k_total=k, calls=calls)
    out: dict[str, Predicted | None] = {}
    for key, value in point.items():
        if key == "var_all_judges" and b % k:
            out[key] = None
            continue
        low, high = percentile_bounds(draws[key], level)
        out[key] = Predicted(point=float(value), low=float(low), high=float(high), defined=1.0)
    return out
