r"""CyclicJudge: scenario, generation, judge and residual variance of one system's scores.

Model ([Zhu2026] section 3.1, eq. 1). For one system (the paper's model
:math:`\theta`), scenario :math:`i = 1..n`, generation :math:`j = 1..m` nested in
the scenario and judge :math:`\ell = 1..K` crossed with both,

.. math::

    X_{ij\ell} = \mu_\theta + \alpha_i + \beta_{ij} + \gamma_\ell + \varepsilon_{ij\ell},

with :math:`\alpha_i \sim (0, \sigma^2_\alpha)` (scenario),
:math:`\beta_{ij} \sim (0, \sigma^2_\beta)` (generation),
:math:`\varepsilon_{ij\ell} \sim (0, \sigma^2_\varepsilon)` (residual, all
interactions pooled; appendix I) and fixed judge offsets :math:`\gamma_\ell`
centred over the panel of :math:`K_{tot}` judges, with dispersion
:math:`\sigma^2_\gamma = K_{tot}^{-1} \sum_\ell \gamma_\ell^2`.

Data are a dense array ``x[scenario, generation, judge]``: the ``(g:i) x j``
design of :mod:`jurymeter.stats.design` (facets ``('i', 'g', 'j')``). The mean squares
come from :func:`jurymeter.stats.gstudy.mean_squares`; the paper's residual pools the
engine's ``ij`` and ``gj:i`` effects (eq. 20), and the components are solved by
the engine's EMS matrix with that pooled mean square, which reproduces eq. 23-25
exactly.

Public names use the issue's spelling: ``sigma2_scenario`` (:math:`\sigma^2_\alpha`),
``sigma2_generation`` (:math:`\sigma^2_\beta`), ``sigma2_judge``
(:math:`\sigma^2_\gamma`), ``sigma2_residual`` (:math:`\sigma^2_\varepsilon`).
The panel observed in the data is the whole pool, :math:`K = K_{tot}`.

References
----------
.. [Zhu2026] Z. Zhu et al., "CyclicJudge: Mitigating Judge Bias Efficiently in
   LLM-based Evaluation", 2026 (``papers/cyclicjudge.txt``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, fields
from types import MappingProxyType
from typing import Any, Literal

import numpy as np
import polars as pl
from scipy import stats

from jurymeter.errors import DesignError
from jurymeter.stats.design import Design
from jurymeter.stats.gstudy import TermSums, components_from_ms

CYCLIC_DESIGN = Design.parse("(g:i) x j")
DEFAULT_REPS = 5_000
# Largest number of draws held in memory at once by the subsampling check.
_CHUNK_DRAWS = 1 << 16  # cache-sized chunks: 1.7x faster than 1 << 22 (bench/cyclic.py)

Winner = Literal["A", "B", "tie"]
COMPONENTS = ("scenario", "generation", "judge", "residual")


# --------------------------------------------------------------------------- checks
def _positive_int(name: str, value: object, *, minimum: int = 1) -> int:
    if isinstance(value, bool) or not isinstance(value, int | np.integer) or value < minimum:
        msg = f"{name} must be an integer >= {minimum}, got {value!r}"
        raise DesignError(msg)
    return int(value)


def _scores(x: object) -> np.ndarray:
    """A finite ``(n, m, K)`` float array with at least two levels on every axis."""
    arr = np.asarray(x, dtype=np.float64)
    if arr.ndim != 3:
        msg = f"x must be a 3-d array x[scenario, generation, judge], got {arr.ndim} axis/axes"
        raise DesignError(msg)
    if not np.all(np.isfinite(arr)):
        msg = "x must be complete and finite: every scenario x generation x judge cell scored"
        raise DesignError(msg)
    for axis, name in enumerate(("scenarios", "generations", "judges")):
        if arr.shape[axis] < 2:
            msg = (
                f"x has {arr.shape[axis]} {name} (shape {arr.shape}); the decomposition needs >= 2"
            )
            raise DesignError(msg)
    return arr


def _ids(name: str, ids: Sequence[str] | None, size: int, prefix: str) -> tuple[str, ...]:
    if ids is None:
        return tuple(f"{prefix}{k}" for k in range(size))
    out = tuple(str(v) for v in ids)
    if len(out) != size:
        msg = f"{name} has {len(out)} id(s); the data have {size}"
        raise DesignError(msg)
    if len(set(out)) != len(out):
        msg = f"{name} repeats an id: {out}"
        raise DesignError(msg)
    return out


def _budgets(budgets: Sequence[int], k_total: int) -> np.ndarray:
    values = [_positive_int("budget", b) for b in budgets]
    if not values:
        msg = "budgets must name at least one per-scenario budget"
        raise DesignError(msg)
    bad = [b for b in values if b % k_total]
    if bad:
        msg = (
            f"budgets {bad} are not multiples of the panel size K_tot={k_total}; strategies A "
            "(B/K_tot generations) and C (B/K_tot calls per judge) need one"
        )
        raise DesignError(msg)
    return np.asarray(values, dtype=np.int64)


def _readonly(arr: np.ndarray) -> np.ndarray:
    """A result array nobody can write to (results are never mutated after return)."""
    arr.setflags(write=False)
    return arr


def _ratio(num: float, den: float) -> float:
    return float(num / den) if den > 0 else float("nan")


# --------------------------------------------------------------------------- components
@dataclass(frozen=True, slots=True)
class VarianceComponents:
    """Per-observation variance components of eq. 1, all >= 0 ([Zhu2026] table 2).

    Build from a fit (:attr:`CyclicDecomposition.components`) or from printed values:

    >>> VarianceComponents(1.530, 0.266, 0.947, 1.486).sigma2_judge
    0.947
    """

    sigma2_scenario: float
    sigma2_generation: float
    sigma2_judge: float
    sigma2_residual: float

    def __post_init__(self) -> None:
        for name in COMPONENTS:
            value = getattr(self, f"sigma2_{name}")
            if not np.isfinite(value) or value < 0:
                msg = f"sigma2_{name} must be finite and >= 0, got {value!r}"
                raise DesignError(msg)

    def to_json(self) -> dict[str, float]:
        return {f"sigma2_{c}": float(getattr(self, f"sigma2_{c}")) for c in COMPONENTS}


# --------------------------------------------------------------------------- Proposition 1
@dataclass(frozen=True, slots=True)
class VarianceContributions:
    r"""Each component's share of :math:`\mathrm{Var}(\bar X)` at an operating point (table 3).

    Attributes
    ----------
    n, m, k, k_total
        Scenarios, generations per scenario, judges per generation, panel size.
    fpc
        Finite-population correction :math:`(K_{tot} - K)/(K_{tot} - 1)` (eq. 19).
    scenario, generation, judge, residual
        :math:`\sigma^2_\alpha/n`, :math:`\sigma^2_\beta/(nm)`,
        :math:`\sigma^2_\gamma \mathrm{FPC}/K`, :math:`\sigma^2_\varepsilon/(nmK)`.
    total
        Their sum, :math:`\mathrm{Var}(\bar X)` of eq. 2.
    """

    components: VarianceComponents
    n: int
    m: int
    k: int
    k_total: int
    fpc: float
    scenario: float
    generation: float
    judge: float
    residual: float
    total: float

    def to_frame(self) -> pl.DataFrame:
        """Table 3 layout: one row per component, per-observation variance and contribution."""
        return pl.DataFrame(
            {
                "component": list(COMPONENTS),
                "sigma2": [getattr(self.components, f"sigma2_{c}") for c in COMPONENTS],
                "divisor": ["n", "n m", "K / FPC", "n m K"],
                "contribution": [getattr(self, c) for c in COMPONENTS],
                "share": [_ratio(getattr(self, c), self.total) for c in COMPONENTS],
            }
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "n": self.n,
            "m": self.m,
            "k": self.k,
            "k_total": self.k_total,
            "fpc": self.fpc,
            **{c: float(getattr(self, c)) for c in COMPONENTS},
            "total": self.total,
        }


def variance_contributions(
    components: VarianceComponents, *, n: int, m: int = 1, k: int = 1, k_total: int
) -> VarianceContributions:
    r"""Contribution of each component to the variance of the benchmark score (Proposition 1).

    Parameters
    ----------
    components
        Per-observation variances.
    n
        Scenarios.
    m
        Generations per scenario (default 1, the paper's default operating point).
    k
        Judges scoring every generation, ``1 <= k <= k_total`` (default 1).
    k_total
        Panel size :math:`K_{tot}` the ``k`` judges are drawn from without replacement.

    Returns
    -------
    VarianceContributions

    Notes
    -----
    [Zhu2026] eq. 2 (proof in appendix C, FPC eq. 12 and 19):

    .. math::

        \mathrm{Var}(\bar X) = \frac{\sigma^2_\alpha}{n} + \frac{\sigma^2_\beta}{nm}
        + \frac{\sigma^2_\varepsilon}{nmK}
        + \frac{\sigma^2_\gamma}{K}\cdot\frac{K_{tot}-K}{K_{tot}-1}.

    With ``k_total = 1`` the FPC is taken as 0 (one judge is the whole panel).

    >>> c = variance_contributions(VarianceComponents(1.530, 0.266, 0.9465, 1.486), n=80, k_total=5)
    >>> round(c.scenario * 1e3, 2), round(c.judge * 1e3, 2)
    (19.12, 946.5)
    """
    n = _positive_int("n", n)
    m = _positive_int("m", m)
    k_total = _positive_int("k_total", k_total)
    k = _positive_int("k", k)
    if k > k_total:
        msg = f"k must be <= k_total={k_total}, got {k}"
        raise DesignError(msg)
    fpc = (k_total - k) / (k_total - 1) if k_total > 1 else 0.0
    scenario = components.sigma2_scenario / n
    generation = components.sigma2_generation / (n * m)
    judge = components.sigma2_judge * fpc / k
    residual = components.sigma2_residual / (n * m * k)
    return VarianceContributions(
        components=components,
        n=n,
        m=m,
        k=k,
        k_total=k_total,
        fpc=fpc,
        scenario=scenario,
        generation=generation,
        judge=judge,
        residual=residual,
        total=scenario + generation + judge + residual,
    )


# --------------------------------------------------------------------------- appendix G pools
@dataclass(frozen=True, slots=True)
class PoolVariances:
    """Empirical pool variances of appendix G (eq. 36-38): ``V(B) = C / (n B)``."""

    n: int
    c_a: float
    c_b: float
    c_c: float

    def predict(self, budget: int | np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Exact subsampling variance of strategies A, B, C at per-scenario budget(s) ``B``."""
        b = np.asarray(budget, dtype=np.float64)
        return self.c_a / (self.n * b), self.c_b / (self.n * b), self.c_c / (self.n * b)


def pool_variances(x: np.ndarray) -> PoolVariances:
    r"""Pool variances for subsampling a finite set of observed generations (appendix G).

    Parameters
    ----------
    x
        Scores ``x[scenario, generation, judge]`` of one system, all judges on all
        :math:`m_{max}` generations.

    Returns
    -------
    PoolVariances

    Notes
    -----
    [Zhu2026] eq. 36-38, plug-in (divide by :math:`m_{max}`) variances:

    .. math::

        C_A = K_{tot}\,\frac1n\sum_i \frac1{m_{max}}\sum_g (\bar X_{ig\cdot} - \bar X_{i\cdot\cdot})^2,\quad
        C_B = \frac1n\sum_i \frac{1}{m_{max}K_{tot}}\sum_{g,\ell}(X_{ig\ell} - \bar X_{i\cdot\cdot})^2,

    .. math::

        C_C = \frac{1}{nK_{tot}}\sum_{i,\ell}\frac1{m_{max}}\sum_g (X_{ig\ell} - \bar X_{i\cdot\ell})^2.
    """
    return CyclicSums().add(_scores(x)).pools()


class CyclicSums:
    """What :func:`fit_cyclic` reads from one system's scores, accumulated over chunks of scenarios.

    The mean squares of ``(g:i) x j`` (:class:`~jurymeter.stats.gstudy.TermSums`),
    each judge's score total and the three pool sums of :func:`pool_variances`
    are sums over scenarios, so ``x[scenario, generation, judge]`` may arrive a
    few scenarios at a time (:class:`jurymeter.cyclic.fit.CyclicChunks`).
    """

    def __init__(self) -> None:
        self.terms = TermSums(CYCLIC_DESIGN, "i")
        self.judge_totals: np.ndarray | None = None
        self.pool_sums = np.zeros(3)  # eq. 36-38 before their means: A, B, C

    def add(self, x: np.ndarray) -> CyclicSums:
        """Add the scores of some scenarios, ``x[scenario, generation, judge]``."""
        x = np.asarray(x, dtype=np.float64)
        self.terms.add(x)
        totals = x.sum(axis=(0, 1))
        self.judge_totals = totals if self.judge_totals is None else self.judge_totals + totals
        scen = x.mean(axis=(1, 2), keepdims=True)
        gen = x.mean(axis=2, keepdims=True)
        col = x.mean(axis=1, keepdims=True)
        self.pool_sums += [float(np.sum((gen - scen) ** 2)), float(np.sum((x - scen) ** 2)), float(np.sum((x - col) ** 2))]
        return self

    @property
    def shape(self) -> tuple[int, int, int]:
        sizes = self.terms.sizes
        return sizes["i"], sizes["g"], sizes["j"]

    def pools(self) -> PoolVariances:
        """:func:`pool_variances` of the scores added."""
        n, m, k = self.shape
        sum_a, sum_b, sum_c = self.pool_sums
        return PoolVariances(n=n, c_a=k * sum_a / (n * m), c_b=sum_b / (n * m * k), c_c=sum_c / (n * m * k))

    def judge_means(self) -> np.ndarray:
        n, m, _ = self.shape
        assert self.judge_totals is not None
        return self.judge_totals / (n * m)


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
    beta, gamma, eps = c.sigma2_generation, c.sigma2_judge, c.sigma2_residual
    num_a = k_total * beta + eps
    num_b = beta + gamma + eps
    num_c = beta + eps
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


# --------------------------------------------------------------------------- Monte Carlo check
@dataclass(frozen=True, slots=True)
class SubsampleCheck:
    r"""Empirical against predicted variance of the three strategies at one budget (section 4.4).

    ``var_*`` are the variances of the benchmark score over ``reps`` subsamples,
    ``pred_*`` the appendix G predictions, ``se_*`` the Monte Carlo standard error
    of each ``var_*`` (standard deviation of the squared deviations over :math:`\sqrt{reps}`).
    """

    budget: int
    reps: int
    seed: int
    var_a: float
    var_b: float
    var_c: float
    pred_a: float
    pred_b: float
    pred_c: float
    se_a: float
    se_b: float
    se_c: float

    def to_json(self) -> dict[str, float | int]:
        return {f.name: getattr(self, f.name) for f in fields(self)}


def _var_and_se(draws: np.ndarray) -> tuple[float, float]:
    dev2 = (draws - draws.mean()) ** 2
    var = float(dev2.sum() / (len(draws) - 1))
    se = float(dev2.std(ddof=1) / np.sqrt(len(draws)))
    return var, se


def subsample_strategy_variance(
    x: np.ndarray, budget: int, *, reps: int = DEFAULT_REPS, seed: int = 0
) -> SubsampleCheck:
    r"""Monte Carlo subsampling of strategies A, B, C from observed generations (section 4.4).

    A pure function of ``(x, budget, reps, seed)``: the random stream is
    ``numpy.random.default_rng([seed, budget])``, so budgets can run on separate
    workers and give the same answer as a local loop.

    Parameters
    ----------
    x
        Scores ``x[scenario, generation, judge]``, all :math:`K_{tot}` judges on all
        :math:`m_{max}` generations.
    budget
        Per-scenario judge calls :math:`B`, a multiple of :math:`K_{tot}`.
    reps
        Subsampling repetitions (default 5,000, as in the paper's figure 1).
    seed
        Seed.

    Returns
    -------
    SubsampleCheck

    Notes
    -----
    Draws are i.i.d. with replacement within each scenario, as appendix G assumes:

    - A: :math:`B/K_{tot}` generations, each scored by every judge (mean of :math:`\bar X_{ig\cdot}`);
    - B: :math:`B` cells :math:`(g, \ell)` uniform over :math:`m_{max} \times K_{tot}`;
    - C: :math:`B/K_{tot}` generations per judge, each judge from its own column.

    The benchmark score is the mean over scenarios of these per-scenario means; the
    predictions are :math:`C_X / (nB)` (eq. 36-38).
    """
    x = _scores(x)
    n, m_max, k = x.shape
    budget = int(_budgets([budget], k)[0])
    reps = _positive_int("reps", reps, minimum=2)
    seed = _positive_int("seed", seed, minimum=0)
    rng = np.random.default_rng([seed, budget])
    per = budget // k
    # Flat arrays and int32 offsets: 1-D np.take is several times faster than
    # broadcast fancy indexing over three or four axes.
    # float32 pools halve the memory traffic of the gathers; sums accumulate in float64.
    gen_means = x.mean(axis=2).ravel().astype(np.float32)
    cells = x.ravel().astype(np.float32)
    by_judge = np.ascontiguousarray(np.moveaxis(x, 2, 1)).ravel().astype(np.float32)
    rows = np.arange(n, dtype=np.int32)
    base_a = (rows * m_max)[None, :, None]
    base_b = (rows * m_max * k)[None, :, None]
    base_c = (rows[:, None] * (k * m_max) + np.arange(k, dtype=np.int32)[None, :] * m_max)[
        None, :, :, None
    ]
    chunk = max(1, _CHUNK_DRAWS // (n * budget))
    out = np.empty((3, reps))
    for start in range(0, reps, chunk):
        size = min(chunk, reps - start)
        idx_a = rng.integers(0, m_max, size=(size, n, per), dtype=np.int32) + base_a
        out[0, start : start + size] = np.take(gen_means, idx_a).mean(axis=(1, 2), dtype=np.float64)
        idx_b = rng.integers(0, m_max * k, size=(size, n, budget), dtype=np.int32) + base_b
        out[1, start : start + size] = np.take(cells, idx_b).mean(axis=(1, 2), dtype=np.float64)
        idx_c = rng.integers(0, m_max, size=(size, n, k, per), dtype=np.int32) + base_c
        out[2, start : start + size] = np.take(by_judge, idx_c).mean(
            axis=(1, 2, 3), dtype=np.float64
        )
    (va, sa), (vb, sb), (vc, sc) = (_var_and_se(row) for row in out)
    pa, pb, pc = (float(v) for v in pool_variances(x).predict(budget))
    return SubsampleCheck(
        budget=budget,
        reps=reps,
        seed=seed,
        var_a=va,
        var_b=vb,
        var_c=vc,
        pred_a=pa,
        pred_b=pb,
        pred_c=pc,
        se_a=sa,
        se_b=sb,
        se_c=sc,
    )


def subsample_strategy_curve(
    x: np.ndarray, budgets: Sequence[int], *, reps: int = DEFAULT_REPS, seed: int = 0
) -> pl.DataFrame:
    """:func:`subsample_strategy_variance` at every budget, as a tidy table.

    Columns ``budget, strategy, empirical, predicted, se``; each budget's draws
    depend only on ``(seed, budget)``, not on the other budgets.
    """
    checks = [subsample_strategy_variance(x, b, reps=reps, seed=seed) for b in budgets]
    return pl.DataFrame(
        {
            "budget": [c.budget for c in checks for _ in "ABC"],
            "strategy": [s for _ in checks for s in "ABC"],
            "empirical": [getattr(c, f"var_{s}") for c in checks for s in "abc"],
            "predicted": [getattr(c, f"pred_{s}") for c in checks for s in "abc"],
            "se": [getattr(c, f"se_{s}") for c in checks for s in "abc"],
        }
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


# --------------------------------------------------------------------------- appendix D and H
def sigma2_judge_from_offsets(
    offsets: np.ndarray, *, sigma2_residual: float, n_subjects: int
) -> float:
    r"""Panel dispersion of the judge offsets, corrected for residual noise (eq. 25), raw.

    Parameters
    ----------
    offsets
        :math:`\hat\gamma_\ell = \bar X_{\cdot\cdot\ell} - \bar X_{\cdots}` of the whole panel.
    sigma2_residual
        :math:`\hat\sigma^2_\varepsilon`.
    n_subjects
        Scenario-generation pairs each judge scored, :math:`nm`.

    Returns
    -------
    float
        :math:`K_{tot}^{-1}\sum_\ell\hat\gamma_\ell^2 - \hat\sigma^2_\varepsilon (K_{tot}-1)/(nm K_{tot})`
        ([Zhu2026] appendix D, eq. 25); may be negative.

    >>> sigma2_judge_from_offsets(np.array([1.0, -1.0]), sigma2_residual=4.0, n_subjects=8)
    0.75
    """
    gamma = np.asarray(offsets, dtype=np.float64)
    if gamma.ndim != 1 or gamma.size < 1 or not np.all(np.isfinite(gamma)):
        msg = f"offsets must be a finite vector with one value per judge, got shape {gamma.shape}"
        raise DesignError(msg)
    n_subjects = _positive_int("n_subjects", n_subjects)
    k = gamma.size
    return float(np.mean(gamma**2) - sigma2_residual / n_subjects * (k - 1) / k)


@dataclass(frozen=True, slots=True)
class CyclicDecomposition:
    r"""Variance decomposition of one system's crossed scores (section 3, appendix D and H).

    Attributes
    ----------
    n_scenarios, n_generations, n_judges
        :math:`n`, :math:`m`, :math:`K = K_{tot}`.
    judges
        Judge ids, in the order of ``judge_offsets``.
    grand_mean
        :math:`\hat\mu_\theta = \bar X_{\cdots}`.
    ms_scenario, ms_generation, ms_judge, ms_residual
        :math:`MS_S` (eq. 22), :math:`MS_G` (eq. 21), :math:`MS_J` (appendix H), :math:`MS_W` (eq. 20).
    df_scenario, df_generation, df_judge, df_residual
        :math:`n-1`, :math:`n(m-1)`, :math:`K-1`, :math:`(nm-1)(K-1)`.
    sigma2_scenario, sigma2_generation, sigma2_judge, sigma2_residual
        Components, negative estimates set to zero (eq. 24, 23, 25, 20).
    raw
        The same before truncation, by key ``sigma2_*``.
    truncated
        Keys of the components that were negative and set to zero.
    judge_offsets
        :math:`\hat\gamma_\ell = \bar X_{\cdot\cdot\ell} - \bar X_{\cdots}`.
    f_statistic, p_value
        :math:`F = MS_J/MS_W` on :math:`(K-1, (nm-1)(K-1))` d.f., ``scipy.stats.f.sf``.
    contributions
        Proposition 1 at the chosen operating point.
    strategies
        Eq. 3-5 and appendix G predictions.
    """

    n_scenarios: int
    n_generations: int
    n_judges: int
    judges: tuple[str, ...]
    grand_mean: float
    ms_scenario: float
    ms_generation: float
    ms_judge: float
    ms_residual: float
    df_scenario: int
    df_generation: int
    df_judge: int
    df_residual: int
    sigma2_scenario: float
    sigma2_generation: float
    sigma2_judge: float
    sigma2_residual: float
    raw: Mapping[str, float]
    truncated: tuple[str, ...]
    judge_offsets: np.ndarray
    f_statistic: float
    p_value: float
    contributions: VarianceContributions
    strategies: StrategyComparison

    @property
    def components(self) -> VarianceComponents:
        return VarianceComponents(
            self.sigma2_scenario, self.sigma2_generation, self.sigma2_judge, self.sigma2_residual
        )

    def to_json(self) -> dict[str, Any]:
        """Full-precision JSON-ready dict (keys ``sigma2_*``, ``judge_offsets``, ``f_statistic``, ...)."""
        return {
            "n_scenarios": self.n_scenarios,
            "n_generations": self.n_generations,
            "n_judges": self.n_judges,
            "grand_mean": self.grand_mean,
            "sigma2_scenario": self.sigma2_scenario,
            "sigma2_generation": self.sigma2_generation,
            "sigma2_judge": self.sigma2_judge,
            "sigma2_residual": self.sigma2_residual,
            "raw": dict(self.raw),
            "truncated": list(self.truncated),
            "mean_squares": {
                "ms_scenario": self.ms_scenario,
                "ms_generation": self.ms_generation,
                "ms_judge": self.ms_judge,
                "ms_residual": self.ms_residual,
            },
            "df": {
                "df_scenario": self.df_scenario,
                "df_generation": self.df_generation,
                "df_judge": self.df_judge,
                "df_residual": self.df_residual,
            },
            "judge_offsets": {
                j: float(g) for j, g in zip(self.judges, self.judge_offsets, strict=True)
            },
            "f_statistic": self.f_statistic,
            "p_value": self.p_value,
            "contributions": self.contributions.to_json(),
            "strategies": self.strategies.to_json(),
        }


def _judge_f_test(ms_j: float, ms_w: float, df_j: int, df_w: int) -> tuple[float, float]:
    """F = MS_J / MS_W and its survival probability (appendix H); no residual noise gives inf or nan."""
    if ms_w > 0:
        f_stat = ms_j / ms_w
        return f_stat, float(stats.f.sf(f_stat, df_j, df_w))
    if ms_j > 0:
        return float("inf"), 0.0
    return float("nan"), float("nan")


def fit_cyclic(
    x: np.ndarray,
    *,
    judges: Sequence[str] | None = None,
    at_generations: int = 1,
    at_judges: int = 1,
    budgets: Sequence[int] | None = None,
) -> CyclicDecomposition:
    r"""Decompose one system's scores into scenario, generation, judge and residual variance.

    Parameters
    ----------
    x
        Scores ``x[scenario, generation, judge]``: every judge scores every generation
        (the ``(g:i) x j`` design), at least 2 levels per axis.
    judges
        Judge ids (default ``"j0", "j1", ...``).
    at_generations, at_judges
        Operating point :math:`(m, K)` of the contributions to :math:`\mathrm{Var}(\bar X)`
        (default ``(1, 1)``, the paper's default operating point of table 3).
    budgets
        Per-scenario budgets of the strategy comparison, multiples of :math:`K_{tot}`
        (default :math:`K_{tot}, 2K_{tot}, \dots, m K_{tot}`).

    Returns
    -------
    CyclicDecomposition

    Raises
    ------
    DesignError
        Non-finite data, fewer than 2 scenarios, generations or judges, bad ids or budgets.

    Notes
    -----
    [Zhu2026] appendix D. With :math:`N = nm` scenario-generation subjects,

    .. math::

        \hat\sigma^2_\varepsilon = MS_W\ (20),\quad
        \hat\sigma^2_\beta = (MS_G - MS_W)/K\ (23),\quad
        \hat\sigma^2_\alpha = (MS_S - MS_G)/(mK)\ (24),

    .. math::

        \hat\sigma^2_\gamma = \frac{1}{K_{tot}}\sum_\ell \hat\gamma_\ell^2
        - \frac{\hat\sigma^2_\varepsilon}{nm}\cdot\frac{K_{tot}-1}{K_{tot}}\ (25).

    On the engine: :math:`MS_W` pools the ``ij`` and ``gj:i`` effects of
    ``(g:i) x j``; solving the engine's EMS system with that pooled value gives
    eq. 23-24 for ``g:i`` and ``i``, and :math:`\hat\sigma^2_\gamma = \frac{K-1}{K}\hat\sigma^2_j`
    (fixed-panel dispersion against a random-effect variance). Negative estimates are
    set to zero and listed in ``truncated`` (appendix B). The judge F-test
    (appendix H) is :math:`F = MS_J / MS_W`, :math:`MS_J = N\sum_\ell \hat\gamma_\ell^2/(K-1)`,
    on :math:`K-1` and :math:`(N-1)(K-1)` degrees of freedom.

    >>> rng = np.random.default_rng(0)
    >>> fit = fit_cyclic(rng.normal(size=(20, 3, 4)))
    >>> fit.df_residual, fit.df_judge
    (177, 3)
    """
    return fit_cyclic_sums(
        CyclicSums().add(_scores(x)), judges=judges, at_generations=at_generations, at_judges=at_judges,
        budgets=budgets,
    )


def fit_cyclic_sums(
    sums: CyclicSums,
    *,
    judges: Sequence[str] | None = None,
    at_generations: int = 1,
    at_judges: int = 1,
    budgets: Sequence[int] | None = None,
) -> CyclicDecomposition:
    """:func:`fit_cyclic` from :class:`CyclicSums` (the scores added a few scenarios at a time)."""
    n, m, k = sums.shape
    for size, name in ((n, "scenarios"), (m, "generations"), (k, "judges")):
        if size < 2:
            msg = f"the scores have {size} {name} (shape {(n, m, k)}); the decomposition needs >= 2"
            raise DesignError(msg)
    judge_ids = _ids("judges", judges, k, "j")
    at_m = _positive_int("at_generations", at_generations)
    at_k = _positive_int("at_judges", at_judges)
    if at_k > k:
        msg = f"at_judges must be <= the panel size {k}, got {at_k}"
        raise DesignError(msg)
    design = CYCLIC_DESIGN
    df, ss, ms = sums.terms.mean_squares()
    label = {lab: idx for idx, lab in enumerate(design.labels)}
    pooled = (label["ij"], label["gj:i"])
    df_w = float(df[list(pooled)].sum())
    ms_w = float(ss[list(pooled)].sum() / df_w)
    ms_pooled = ms.copy()
    ms_pooled[list(pooled)] = ms_w
    sigma = components_from_ms(ms_pooled, design, sums.terms.sizes)
    raw = {
        "sigma2_scenario": float(sigma[label["i"]]),
        "sigma2_generation": float(sigma[label["g:i"]]),
        "sigma2_judge": float(sigma[label["j"]] * (k - 1) / k),
        "sigma2_residual": ms_w,
    }
    truncated = tuple(key for key, value in raw.items() if value < 0)
    kept = {key: max(value, 0.0) for key, value in raw.items()}
    grand = sums.terms.grand_mean
    offsets = sums.judge_means() - grand
    ms_j = float(ms[label["j"]])
    df_j = int(df[label["j"]])
    f_stat, p_value = _judge_f_test(ms_j, ms_w, df_j, int(df_w))
    components = VarianceComponents(**kept)
    grid = budgets if budgets is not None else [k * b for b in range(1, m + 1)]
    return CyclicDecomposition(
        n_scenarios=n,
        n_generations=m,
        n_judges=k,
        judges=judge_ids,
        grand_mean=grand,
        ms_scenario=float(ms[label["i"]]),
        ms_generation=float(ms[label["g:i"]]),
        ms_judge=ms_j,
        ms_residual=ms_w,
        df_scenario=int(df[label["i"]]),
        df_generation=int(df[label["g:i"]]),
        df_judge=df_j,
        df_residual=int(df_w),
        raw=MappingProxyType(raw),
        truncated=truncated,
        judge_offsets=_readonly(offsets),
        f_statistic=float(f_stat),
        p_value=p_value,
        contributions=variance_contributions(components, n=n, m=at_m, k=at_k, k_total=k),
        strategies=strategy_variances(components, grid, n=n, k_total=k, pools=sums.pools()),
        **kept,
    )


# --------------------------------------------------------------------------- appendix A
@dataclass(frozen=True, slots=True)
class JudgeSystemOffsets:
    r"""Judge biases for every judge and system (appendix A, figure 2).

    Attributes
    ----------
    systems, judges
        Ids, in the order of the rows and columns of ``offsets``.
    offsets
        ``offsets[s, l]`` :math:`= \bar X_{\cdot\cdot\ell}(s) - \bar X_{\cdots}(s)`, system ``s``'s
        panel-relative judge offsets (each row sums to zero).
    system_means
        :math:`\hat\mu_\theta` per system, the panel mean (table 3's mean score).
    self_preference
        One row per (system, judge) pair of the same identity or family:
        ``system_id, judge_id, family, offset`` (the self-bias), ``other_offset``
        (mean offset of that judge on systems of other families), ``excess``
        (``offset - other_offset``) and ``row_max`` (the judge's largest offset over systems).
    """

    systems: tuple[str, ...]
    judges: tuple[str, ...]
    offsets: np.ndarray
    system_means: np.ndarray
    self_preference: pl.DataFrame

    def to_frame(self) -> pl.DataFrame:
        """Tidy table ``system_id, judge_id, offset``."""
        s, k = self.offsets.shape
        return pl.DataFrame(
            {
                "system_id": np.repeat(np.asarray(self.systems, dtype=object), k).tolist(),
                "judge_id": list(self.judges) * s,
                "offset": self.offsets.ravel(),
            }
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "systems": list(self.systems),
            "judges": list(self.judges),
            "judge_offsets": {
                sys: {j: float(v) for j, v in zip(self.judges, row, strict=True)}
                for sys, row in zip(self.systems, self.offsets, strict=True)
            },
            "system_means": {
                s: float(v) for s, v in zip(self.systems, self.system_means, strict=True)
            },
            "self_preference": self.self_preference.to_dicts(),
        }


def judge_system_offsets(
    x: np.ndarray,
    *,
    systems: Sequence[str],
    judges: Sequence[str],
    judge_family: Mapping[str, str] | None = None,
    system_family: Mapping[str, str] | None = None,
) -> JudgeSystemOffsets:
    r"""Panel-relative judge offsets per system and the self-preference pairs (appendix A).

    Parameters
    ----------
    x
        Scores ``x[system, scenario, generation, judge]`` (any sizes >= 1 on the middle axes).
    systems, judges
        Ids of the first and last axis.
    judge_family, system_family
        Optional maps from id to model identity or family; an id missing from its map
        is its own family. A judge "scores its own system" when the two families match.

    Returns
    -------
    JudgeSystemOffsets

    Notes
    -----
    [Zhu2026] appendix A: :math:`\hat\gamma_\ell = \bar X_{\cdot\cdot\ell} - \bar X_{\cdots}`
    computed per system.

    >>> x = np.array([[[[3.0, 1.0]]], [[[2.0, 2.0]]]])
    >>> judge_system_offsets(x, systems=["a", "b"], judges=["a", "b"]).offsets.tolist()
    [[1.0, -1.0], [0.0, 0.0]]
    """
    arr = np.asarray(x, dtype=np.float64)
    if arr.ndim != 4:
        msg = f"x must be 4-d x[system, scenario, generation, judge], got {arr.ndim} axis/axes"
        raise DesignError(msg)
    if arr.size == 0 or not np.all(np.isfinite(arr)):
        msg = "x must be non-empty, complete and finite"
        raise DesignError(msg)
    return offsets_from_judge_means(
        arr.mean(axis=(1, 2)), systems=systems, judges=judges, judge_family=judge_family, system_family=system_family
    )


def offsets_from_judge_means(
    judge_means: np.ndarray,
    *,
    systems: Sequence[str],
    judges: Sequence[str],
    judge_family: Mapping[str, str] | None = None,
    system_family: Mapping[str, str] | None = None,
) -> JudgeSystemOffsets:
    """:func:`judge_system_offsets` from each system's mean score per judge, ``judge_means[system, judge]``.

    Balanced data: a system's mean is the mean of its judges' means.
    """
    sys_ids = _ids("systems", systems, judge_means.shape[0], "s")
    judge_ids = _ids("judges", judges, judge_means.shape[1], "j")
    means = judge_means.mean(axis=1)
    offsets = judge_means - means[:, None]
    jf = np.asarray([(judge_family or {}).get(j, j) for j in judge_ids], dtype=object)
    sf = np.asarray([(system_family or {}).get(s, s) for s in sys_ids], dtype=object)
    same = sf[:, None] == jf[None, :]
    other = np.where(~same, offsets, np.nan)
    with np.errstate(invalid="ignore"):
        counts = (~same).sum(axis=0)
        other_mean = np.where(counts > 0, np.nansum(other, axis=0) / np.maximum(counts, 1), np.nan)
    row_max = offsets >= offsets.max(axis=0, keepdims=True)
    si, ji = np.nonzero(same)
    table = pl.DataFrame(
        {
            "system_id": [sys_ids[s] for s in si],
            "judge_id": [judge_ids[j] for j in ji],
            "family": [str(jf[j]) for j in ji],
            "offset": offsets[si, ji],
            "other_offset": other_mean[ji],
            "excess": offsets[si, ji] - other_mean[ji],
            "row_max": row_max[si, ji],
        },
        schema={
            "system_id": pl.Utf8,
            "judge_id": pl.Utf8,
            "family": pl.Utf8,
            "offset": pl.Float64,
            "other_offset": pl.Float64,
            "excess": pl.Float64,
            "row_max": pl.Boolean,
        },
    )
    return JudgeSystemOffsets(
        systems=sys_ids,
        judges=judge_ids,
        offsets=_readonly(offsets),
        system_means=_readonly(means),
        self_preference=table,
    )


# --------------------------------------------------------------------------- long frames
@dataclass(frozen=True, slots=True)
class ScoreCube:
    """Dense scores ``x[system, item, generation, judge]`` and the ids of each axis.

    Generation labels are per (system, item): axis 2 holds the generations of each
    item in sorted order of their labels.
    """

    x: np.ndarray
    systems: tuple[str, ...]
    items: tuple[str, ...]
    judges: tuple[str, ...]

    def system(self, system_id: str) -> np.ndarray:
        """``x[scenario, generation, judge]`` of one system, ready for :func:`fit_cyclic`."""
        return self.x[self.systems.index(system_id)]


def score_cube(frame: pl.DataFrame, *, score: str = "score") -> ScoreCube:
    """Arrange a long frame ``system_id, item_id, generation, judge_id, <score>`` densely.

    Raises
    ------
    DesignError
        A column is missing, a cell is duplicated, or the cells are not fully crossed
        (every system x item x generation x judge, the same generation count per item).
    """
    keys = ["system_id", "item_id", "generation", "judge_id"]
    missing = [c for c in [*keys, score] if c not in frame.columns]
    if missing:
        msg = f"frame lacks column(s) {missing}; it has {frame.columns}"
        raise DesignError(msg)
    if frame.height == 0:
        msg = "frame has no rows"
        raise DesignError(msg)
    coded = frame.select(
        (pl.col("system_id").cast(pl.Utf8).rank("dense") - 1).alias("s"),
        (pl.col("item_id").cast(pl.Utf8).rank("dense") - 1).alias("i"),
        (pl.col("generation").rank("dense").over("system_id", "item_id") - 1).alias("g"),
        (pl.col("judge_id").cast(pl.Utf8).rank("dense") - 1).alias("j"),
        pl.col(score).cast(pl.Float64).alias("y"),
    )
    shape = tuple(int(coded[c].max()) + 1 for c in "sigj")  # type: ignore[arg-type]
    flat = np.ravel_multi_index(tuple(coded[c].to_numpy() for c in "sigj"), shape)
    if len(np.unique(flat)) != frame.height:
        msg = "frame has more than one score for a (system_id, item_id, generation, judge_id) cell"
        raise DesignError(msg)
    expected = int(np.prod(shape))
    if frame.height != expected:
        msg = (
            f"frame is not fully crossed: {frame.height} cells of {expected} "
            f"(systems x items x generations x judges = {' x '.join(map(str, shape))})"
        )
        raise DesignError(msg)
    x = np.empty(expected)
    x[flat] = coded["y"].to_numpy()

    def labels(col: str) -> tuple[str, ...]:
        return tuple(frame.get_column(col).cast(pl.Utf8).unique().sort().to_list())

    return ScoreCube(
        x=x.reshape(shape),
        systems=labels("system_id"),
        items=labels("item_id"),
        judges=labels("judge_id"),
    )
