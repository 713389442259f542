"""One system's decomposition: eq. 20-25 on the ``(g:i) x j`` engine, judge offsets, F-test (appendix D, H)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

import numpy as np
from scipy import stats

from jurymeter.errors import DesignError
from jurymeter.stats.cyclic.checks import _ids, _positive_int, _readonly, _scores
from jurymeter.stats.cyclic.components import (
    COMPONENTS,
    VarianceComponents,
    VarianceContributions,
    variance_contributions,
)
from jurymeter.stats.cyclic.strategies import StrategyComparison, strategy_variances
from jurymeter.stats.cyclic.sums import CYCLIC_DESIGN, CyclicSums
from jurymeter.stats.gstudy import components_from_ms

_LABEL = {lab: idx for idx, lab in enumerate(CYCLIC_DESIGN.labels)}


# --------------------------------------------------------------------------- appendix D and H
def cyclic_components_from_ms(ms: np.ndarray, *, n: int, m: int, k: int) -> np.ndarray:
    r"""Raw components (``COMPONENTS`` order) from :math:`(MS_S, MS_G, MS_J, MS_W)`: the EMS solve of every fit.

    Parameters
    ----------
    ms : numpy.ndarray
        ``(..., 4)`` mean squares of scenarios (eq. 22), generations (eq. 21),
        judges (appendix H) and the pooled residual (eq. 20); leading axes are
        draws (:mod:`jurymeter.stats.cyclic.strategy_prediction`).
    n, m, k
        Scenarios, generations per scenario, judges of the fitted block.

    Returns
    -------
    numpy.ndarray
        ``(..., 4)``: :math:`\sigma^2_\alpha, \sigma^2_\beta, \sigma^2_\gamma, \sigma^2_\varepsilon`
        before truncation.

    Notes
    -----
    The engine's EMS matrix of ``(g:i) x j`` (:func:`jurymeter.stats.gstudy.components_from_ms`)
    with :math:`MS_W` in both of the residual's effects (``ij`` and ``gj:i``, eq. 20) gives
    eq. 23-24 and :math:`\sigma^2_j`; the fixed panel's dispersion is
    :math:`\sigma^2_\gamma = \frac{K-1}{K}\sigma^2_j`, which is eq. 25 ([Zhu2026] appendix D).

    >>> [round(float(v), 12) for v in cyclic_components_from_ms(np.array([13.0, 5.0, 9.0, 1.0]), n=10, m=2, k=4)]
    [1.0, 1.0, 0.3, 1.0]
    """
    values = np.asarray(ms, dtype=np.float64)
    full = np.empty((*values.shape[:-1], len(CYCLIC_DESIGN.labels)))
    full[..., _LABEL["i"]] = values[..., 0]
    full[..., _LABEL["g:i"]] = values[..., 1]
    full[..., _LABEL["j"]] = values[..., 2]
    full[..., _LABEL["ij"]] = values[..., 3]
    full[..., _LABEL["gj:i"]] = values[..., 3]
    sigma = components_from_ms(full, CYCLIC_DESIGN, {"i": n, "g": m, "j": k})
    return np.stack(
        [sigma[..., _LABEL["i"]], sigma[..., _LABEL["g:i"]], sigma[..., _LABEL["j"]] * (k - 1) / k, values[..., 3]],
        axis=-1,
    )


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
    df, ss, ms = sums.terms.mean_squares()
    label = _LABEL
    pooled = (label["ij"], label["gj:i"])
    df_w = float(df[list(pooled)].sum())
    ms_w = float(ss[list(pooled)].sum() / df_w)
    sigma = cyclic_components_from_ms(
        np.array([ms[label["i"]], ms[label["g:i"]], ms[label["j"]], ms_w]), n=n, m=m, k=k
    )
    raw = {f"sigma2_{name}": float(v) for name, v in zip(COMPONENTS, sigma, strict=True)}
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
