"""What a fit reads from one system's scores: mean squares, judge totals, appendix G pool sums.

:class:`CyclicSums` adds them up a few scenarios at a time; :class:`PoolVariances`
are the pools of appendix G (eq. 36-38) it ends in.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from jurymeter.stats.cyclic.checks import _scores
from jurymeter.stats.design import Design
from jurymeter.stats.gstudy import TermSums

CYCLIC_DESIGN = Design.parse("(g:i) x j")



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
    few scenarios at a time (:func:`jurymeter.stats.cyclic.fit.cyclic_report`).
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
