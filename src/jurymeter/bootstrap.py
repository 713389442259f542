"""Parametric bootstrap of variance components and everything derived from them.

In a balanced design under normality each mean square is an independent scaled
chi-square variable, :math:`MS_S \\sim E[MS_S] \\, \\chi^2_{df_S} / df_S`
(Searle, Casella and McCulloch 1992, sec. 4.5). A resample therefore draws mean
squares, not data: plug the observed mean squares in for their expectations,
draw, and solve for the components. The paper (``ask-which-not-how-good``,
appendix) uses a parametric bootstrap rather than Wald intervals because a
component near zero has an asymmetric sampling distribution; intervals here are
percentile intervals.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from jurymeter.dstudy import PAPER_ROLES, Facets, ceiling, erho2, mdd95
from jurymeter.gstudy import GStudy, components_from_ms

DEFAULT_RESAMPLES = 800


def resample_mean_squares(
    ms: np.ndarray, df: np.ndarray, n_boot: int, rng: np.random.Generator
) -> np.ndarray:
    """``(n_boot, n_effects)`` draws of :math:`MS \\, \\chi^2_{df}/df`."""
    ms, df = np.asarray(ms, dtype=np.float64), np.asarray(df, dtype=np.float64)
    return ms * rng.chisquare(df, size=(n_boot, len(df))) / df


def resample_components(fit: GStudy, n_boot: int = DEFAULT_RESAMPLES, seed: int = 0) -> np.ndarray:
    """``(n_boot, n_effects)`` parametric-bootstrap draws of the raw components."""
    rng = np.random.default_rng(seed)
    draws = resample_mean_squares(fit.ms, fit.df, n_boot, rng)
    return components_from_ms(draws, fit.design, fit.sizes)


@dataclass(frozen=True)
class Interval:
    """A point estimate with a percentile interval."""

    estimate: float
    low: float
    high: float

    def to_json(self) -> dict[str, float]:
        return {"estimate": self.estimate, "low": self.low, "high": self.high}


def percentile_interval(estimate: float, draws: np.ndarray, level: float = 0.95) -> Interval:
    tail = (1 - level) / 2 * 100
    finite = draws[np.isfinite(draws)]
    low, high = np.percentile(finite, [tail, 100 - tail]) if len(finite) else (np.nan, np.nan)
    return Interval(float(estimate), float(low), float(high))


@dataclass(frozen=True)
class ReliabilityIntervals:
    """Bootstrap intervals of the headline quantities (paper table 1)."""

    sigma2: dict[str, Interval]
    ceiling: Interval
    p_ceiling_at_least_080: float
    erho2_native: Interval
    mdd95_native: Interval
    erho2_30: Interval
    mdd95_30: Interval
    n_boot: int


def bootstrap_reliability(
    fit: GStudy,
    *,
    roles: Facets = PAPER_ROLES,
    n_boot: int = DEFAULT_RESAMPLES,
    seed: int = 0,
    level: float = 0.95,
) -> ReliabilityIntervals:
    """Percentile intervals for components, ceiling, :math:`E\\rho^2` and MDD.

    Native sizes are the G-study's own; the ``_30`` quantities are at 30 items,
    one judge and one run, the paper's common comparison point (table 1).
    """
    draws = resample_components(fit, n_boot, seed)
    design = fit.design
    native = roles.sizes(
        design,
        fit.sizes[roles.item],
        fit.sizes[roles.judge],
        fit.sizes.get(roles.replicate or "", 1),
    )
    at30 = roles.sizes(design, 30, 1, 1)

    def both(f, **kw):
        return f(fit.sigma2, design, **kw), f(draws, design, **kw)

    ceiling_hat, ceiling_draws = both(ceiling, roles=roles)
    e_native, e_native_draws = both(erho2, n=native, obj=roles.system)
    m_native, m_native_draws = both(mdd95, n=native, obj=roles.system)
    e30, e30_draws = both(erho2, n=at30, obj=roles.system)
    m30, m30_draws = both(mdd95, n=at30, obj=roles.system)
    return ReliabilityIntervals(
        sigma2={
            label: percentile_interval(fit.sigma2[k], draws[:, k], level)
            for k, label in enumerate(fit.effects)
        },
        ceiling=percentile_interval(ceiling_hat, ceiling_draws, level),
        p_ceiling_at_least_080=float(np.mean(ceiling_draws >= 0.8)),
        erho2_native=percentile_interval(e_native, e_native_draws, level),
        mdd95_native=percentile_interval(m_native, m_native_draws, level),
        erho2_30=percentile_interval(e30, e30_draws, level),
        mdd95_30=percentile_interval(m30, m30_draws, level),
        n_boot=n_boot,
    )
