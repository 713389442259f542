"""Variance components of eq. 1 and their contributions to Var(X-bar) (Proposition 1, FPC)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import polars as pl

from jurymeter.errors import DesignError
from jurymeter.stats.cyclic.checks import _positive_int, _ratio

COMPONENTS = ("scenario", "generation", "judge", "residual")


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
