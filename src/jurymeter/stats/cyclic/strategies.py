"""Where the judge calls go: strategies A, B, C (section 3.3, eq. 3-5) and scenario coverage (appendix F)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
import polars as pl

from jurymeter.stats.cyclic.checks import _budgets, _positive_int, _ratio, _readonly
from jurymeter.stats.cyclic.components import VarianceComponents
from jurymeter.stats.cyclic.sums import PoolVariances

Winner = Literal["A", "B", "tie"]



# --------------------------------------------------------------------------- section 3.3
@dataclass(frozen=True, slots=True)
class StrategyComparison:
    r"""Variance of the three allocation strategies against the per-scenario budget.

    Attributes
    ----------
    budgets
        Per-scenario judge-call budgets :math:`B` (multiples of :math:`K_{tot}`).
    var_a, var_b, var_c
        Eq. 3-5: all judges, random single judge, round robin (scenario term excluded).
    exact_a, exact_b, exact_c
        Appendix G predictions from the empirical pools (``None`` without data).
    ab_margin
        :math:`(K_{tot}-1)\sigma^2_\beta - \sigma^2_\gamma`; its sign picks the winner of A vs B (eq. 34).
    winner_ab
        ``"A"`` when the margin is negative, ``"B"`` when positive, ``"tie"`` at zero.
    reduction_vs_a, reduction_vs_b, reduction_vs_best
        :math:`1 - V_C/V_A`, :math:`1 - V_C/V_B`, :math:`1 - V_C/\min(V_A, V_B)`; independent of B.
    """

    components: VarianceComponents
    n: int
    k_total: int
    budgets: tuple[int, ...]
    var_a: np.ndarray
    var_b: np.ndarray
    var_c: np.ndarray
    exact_a: np.ndarray | None
    exact_b: np.ndarray | None
    exact_c: np.ndarray | None
    ab_margin: float
    winner_ab: Winner
    reduction_vs_a: float
    reduction_vs_b: float
    reduction_vs_best: float

    def to_frame(self) -> pl.DataFrame:
        """One row per budget and strategy: formula (eq. 3-5) and exact prediction (eq. 36-38)."""
        exact = (self.exact_a, self.exact_b, self.exact_c)
        parts = []
        for name, formula, pred in zip(
            "ABC", (self.var_a, self.var_b, self.var_c), exact, strict=True
        ):
            parts.append(
                pl.DataFrame(
                    {
                        "budget": list(self.budgets),
                        "strategy": [name] * len(self.budgets),
                        "variance": formula.tolist(),
                        "exact": pred.tolist() if pred is not None else [None] * len(self.budgets),
                    },
                    schema={
                        "budget": pl.Int64,
                        "strategy": pl.Utf8,
                        "variance": pl.Float64,
                        "exact": pl.Float64,
                    },
                )
            )
        return pl.concat(parts)

    def to_json(self) -> dict[str, Any]:
        def arr(a: np.ndarray | None) -> list[float] | None:
            return None if a is None else [float(v) for v in a]

        return {
            "n": self.n,
            "k_total": self.k_total,
            "budgets": list(self.budgets),
            "var_a": arr(self.var_a),
            "var_b": arr(self.var_b),
            "var_c": arr(self.var_c),
            "exact_a": arr(self.exact_a),
            "exact_b": arr(self.exact_b),
            "exact_c": arr(self.exact_c),
            "ab_margin": self.ab_margin,
            "winner_ab": self.winner_ab,
            "reduction_vs_a": self.reduction_vs_a,
            "reduction_vs_b": self.reduction_vs_b,
            "reduction_vs_best": self.reduction_vs_best,
        }


def strategy_numerators(sigma2: np.ndarray, *, k_total: int) -> np.ndarray:
    r"""Numerators of eq. 3-5, :math:`nB\,V_A, nB\,V_B, nB\,V_C`, from components in ``COMPONENTS`` order.

    Parameters
    ----------
    sigma2 : numpy.ndarray
        ``(..., 4)``: :math:`\sigma^2_\alpha, \sigma^2_\beta, \sigma^2_\gamma, \sigma^2_\varepsilon`
        (leading axes: draws).
    k_total : int
        Panel size :math:`K_{tot}`.

    Returns
    -------
    numpy.ndarray
        ``(..., 3)``: :math:`K_{tot}\sigma^2_\beta + \sigma^2_\varepsilon`,
        :math:`\sigma^2_\beta + \sigma^2_\gamma + \sigma^2_\varepsilon`,
        :math:`\sigma^2_\beta + \sigma^2_\varepsilon` ([Zhu2026] eq. 3-5; see :func:`strategy_variances`).

    >>> strategy_numerators(np.array([1.53, 0.266, 0.947, 1.486]), k_total=5).round(3).tolist()
    [2.816, 2.699, 1.752]
    """
    c = np.asarray(sigma2, dtype=np.float64)
    beta, gamma, eps = c[..., 1], c[..., 2], c[..., 3]
    return np.stack([k_total * beta + eps, beta + gamma + eps, beta + eps], axis=-1)


def strategy_variances(
    components: VarianceComponents,
    budgets: Sequence[int],
    *,
    n: int,
    k_total: int,
    pools: PoolVariances | None = None,
) -> StrategyComparison:
    r"""Variance of strategies A (all judges), B (random judge) and C (round robin).

    Parameters
    ----------
    components
        Per-observation variances.
    budgets
        Per-scenario judge-call budgets :math:`B`, each a multiple of ``k_total``.
    n
        Scenarios.
    k_total
        Panel size.
    pools
        Appendix G pools of the data (:func:`pool_variances`); adds the exact predictions.

    Returns
    -------
    StrategyComparison

    Notes
    -----
    [Zhu2026] section 3.3 and appendix E, scenario term :math:`\sigma^2_\alpha/n` excluded:

    .. math::

        V_A = \frac{K_{tot}\sigma^2_\beta + \sigma^2_\varepsilon}{nB}\ (3),\quad
        V_B = \frac{\sigma^2_\beta + \sigma^2_\gamma + \sigma^2_\varepsilon}{nB}\ (4),\quad
        V_C = \frac{\sigma^2_\beta + \sigma^2_\varepsilon}{nB}\ (5),

    and :math:`V_A - V_B = ((K_{tot}-1)\sigma^2_\beta - \sigma^2_\gamma)/(nB)` (eq. 34).

    >>> s = strategy_variances(VarianceComponents(1.53, 0.266, 0.947, 1.486), [5], n=80, k_total=5)
    >>> s.winner_ab, round(s.reduction_vs_b, 3)
    ('B', 0.351)
    """
    n = _positive_int("n", n)
    k_total = _positive_int("k_total", k_total)
    b = _budgets(budgets, k_total)
    c = components
    beta, gamma = c.sigma2_generation, c.sigma2_judge
    num_a, num_b, num_c = (float(v) for v in strategy_numerators(
        np.array([c.sigma2_scenario, beta, gamma, c.sigma2_residual]), k_total=k_total))
    scale = 1.0 / (n * b.astype(np.float64))
    margin = (k_total - 1) * beta - gamma
    winner: Winner = "B" if margin > 0 else "A" if margin < 0 else "tie"
    exact = pools.predict(b) if pools is not None else (None, None, None)
    return StrategyComparison(
        components=c,
        n=n,
        k_total=k_total,
        budgets=tuple(int(v) for v in b),
        var_a=_readonly(num_a * scale),
        var_b=_readonly(num_b * scale),
        var_c=_readonly(num_c * scale),
        exact_a=None if exact[0] is None else _readonly(exact[0]),
        exact_b=None if exact[1] is None else _readonly(exact[1]),
        exact_c=None if exact[2] is None else _readonly(exact[2]),
        ab_margin=float(margin),
        winner_ab=winner,
        reduction_vs_a=1.0 - _ratio(num_c, num_a),
        reduction_vs_b=1.0 - _ratio(num_c, num_b),
        reduction_vs_best=1.0 - _ratio(num_c, min(num_a, num_b)),
    )



# --------------------------------------------------------------------------- appendix F
@dataclass(frozen=True, slots=True)
class CoverageSplit:
    r"""Split of a total generation budget between scenarios and generations (appendix F).

    Attributes
    ----------
    total_generations
        :math:`B_{gen}`, generations (one judge call each under cycling).
    n_available
        Scenarios in the dataset, :math:`N`.
    n_scenarios
        Recommended number of scenarios, :math:`n = \min(N, B_{gen})`.
    generations
        Generations per scenario, :math:`m = \lfloor B_{gen}/n \rfloor`.
    extra
        Scenarios that get one generation more, :math:`r = B_{gen} - n m`.
    variance
        Predicted :math:`\mathrm{Var}(\bar X)` under cycling at that split (scenario term included).
    curve
        The same at every :math:`n \le \min(N, B_{gen})` (generations spread evenly):
        columns ``n_scenarios, generations, extra, variance``.
    """

    total_generations: int
    n_available: int
    n_scenarios: int
    generations: int
    extra: int
    variance: float
    curve: pl.DataFrame

    def to_json(self) -> dict[str, Any]:
        return {
            "total_generations": self.total_generations,
            "n_available": self.n_available,
            "n_scenarios": self.n_scenarios,
            "generations": self.generations,
            "extra": self.extra,
            "variance": self.variance,
        }


def scenario_coverage(
    components: VarianceComponents, *, total_generations: int, n_available: int
) -> CoverageSplit:
    r"""Recommended scenarios and generations per scenario for a total generation budget.

    Parameters
    ----------
    components
        Per-observation variances.
    total_generations
        Total generation budget :math:`B_{gen}` (one judge call per generation, cycling).
    n_available
        Scenarios in the dataset, :math:`N`.

    Returns
    -------
    CoverageSplit

    Notes
    -----
    [Zhu2026] appendix F, eq. 35: with :math:`n = B_{gen}/m` scenarios,
    :math:`V_C = (m\sigma^2_\alpha + \sigma^2_\beta + \sigma^2_\varepsilon)/B_{gen}`, increasing
    in :math:`m`: use as many scenarios as the dataset has, then add generations.
    When :math:`B_{gen}` is not a multiple of :math:`n`, scenario :math:`i` gets
    :math:`m_i \in \{m, m+1\}` generations and the score (the grand mean over generations) has

    .. math::

        \mathrm{Var}(\bar X) = \sigma^2_\alpha \frac{\sum_i m_i^2}{B_{gen}^2}
        + \frac{\sigma^2_\beta + \sigma^2_\varepsilon}{B_{gen}},

    which reduces to eq. 35 for an even split. The second term does not depend on the
    split and :math:`\sum_i m_i^2` is smallest for the most scenarios and the most even
    split, so :math:`n = \min(N, B_{gen})` is optimal whatever the components; the
    curve shows what fewer scenarios would cost.

    >>> split = scenario_coverage(VarianceComponents(1.53, 0.266, 0.947, 1.486),
    ...                           total_generations=400, n_available=80)
    >>> split.n_scenarios, split.generations, split.extra
    (80, 5, 0)
    """
    total = _positive_int("total_generations", total_generations)
    n_avail = _positive_int("n_available", n_available)
    n = np.arange(1, min(n_avail, total) + 1, dtype=np.int64)
    m = total // n
    r = total - n * m
    sum_sq = ((n - r) * m**2 + r * (m + 1) ** 2).astype(np.float64)
    noise = components.sigma2_generation + components.sigma2_residual
    var = components.sigma2_scenario * sum_sq / float(total) ** 2 + noise / total
    best = len(n) - 1
    curve = pl.DataFrame({"n_scenarios": n, "generations": m, "extra": r, "variance": var})
    return CoverageSplit(
        total_generations=total,
        n_available=n_avail,
        n_scenarios=int(n[best]),
        generations=int(m[best]),
        extra=int(r[best]),
        variance=float(var[best]),
        curve=curve,
    )
