r"""Per-judge offsets of a G-study fit: each judge's leniency in score points, with its SE.

The model is the G-study's random-effects model
:math:`y_{sij\ldots} = \mu + \nu_s + \nu_i + \nu_j + \nu_{sj} + \nu_{ij} + \ldots + e`
([Anand2026]_ section 3; Brennan 2001, ch. 3). A judge's *offset* is its
effect relative to the panel's average judge, :math:`b_j = \nu_j - \bar\nu_\cdot`
(unweighted over the fit's judges), in points; positive is lenient. The
intervals are conditional on the judges (the panel's judge effects are what
they are; the systems, items and noise are random), which is what a
maintainer comparing a judge with the rest of its panel asks about.

*Balanced block* (:func:`balanced_offsets`). The estimate is the judge's mean
minus the grand mean. Every effect without ``j`` enters every judge's mean
equally (balanced data) and cancels; an effect :math:`E \ni j`, :math:`E \ne
\{j\}`, enters as the mean of its :math:`\prod_{f \in E, f \ne j} n_f`
independent levels for that judge, minus the average over judges of the same.
So, conditional on the judges,

.. math::
   \operatorname{Var}(\hat b_j) = \Bigl(1 - \frac{1}{n_j}\Bigr)
   \sum_{E \ni j,\, E \ne \{j\}} \frac{\sigma^2_E}{\prod_{f \in E \setminus \{j\}} n_f},

which for ``s x i x j`` is :math:`(1 - 1/n_j)(\sigma^2_{sj}/n_s +
\sigma^2_{ij}/n_i + \sigma^2_{sij,e}/(n_s n_i))`; replicates (``r:sij``) and
generations (``gj:si``, ``r:sijg``) divide their terms by their counts as well.
Components are taken at their fitted values, negative ones as 0.

*Every record* (:func:`incomplete_offsets`, the Henderson path). On incomplete
data a judge's raw mean mixes its leniency with which systems and items it
happened to score. The estimate is the within-cell least-squares judge effect:
the (system, item) cells :math:`c` are fixed effects and
:math:`\hat b = C^{+} q`, with :math:`q_j = \sum_{c \ni j} (y_{cj} - \bar y_c)`
(:math:`\bar y_c` the mean over the judges that scored cell ``c``) and
:math:`C = \sum_c (D_c - p_c p_c^\top / |J_c|)` (:math:`p_c` the indicator of
the judges of ``c``, :math:`D_c = \operatorname{diag}(p_c)`). The cell
effects absorb every effect without ``j`` exactly, so :math:`\hat b` is
unbiased for :math:`b` whenever the judges are connected through shared cells
(else :math:`C` has rank below :math:`n_j - 1` and there is no estimate). On
complete data it is the balanced estimate. With :math:`L` the map
:math:`y \mapsto q` and the noise
:math:`Z_{sj} u_{sj} + Z_{ij} u_{ij} + e` (``e`` the (system, item, judge)
cell's remaining terms, its variance divided by its generations or rows),
:math:`\operatorname{Var}(\hat b) = C^{+} L \Sigma L^\top C^{+}`,
:math:`L \Sigma L^\top = \sigma^2_{sj} (L Z_{sj})(L Z_{sj})^\top + \sigma^2_{ij}
(L Z_{ij})(L Z_{ij})^\top + L D L^\top`, all sparse products of the cells'
incidence (no matrix of size cells x cells).

Intervals are the estimate :math:`\pm t_{0.975,\nu}` SE on the balanced block
(:math:`\nu` Satterthwaite's degrees of freedom of the variance's combination
of mean squares) and :math:`\pm z_{0.975}` SE on every record.

References
----------
.. [Anand2026] A. Anand, "Ask Which, Not How Good: Sizing Benchmarks Scored by
   an LLM", 2026 (``papers/ask-which-not-how-good.txt``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

# scipy.special, not scipy.stats (0.5-1.2 CPU-s of a command's imports): ``norm.ppf``
# and ``t.ppf`` are these functions of it, the same floats (scipy's ``t._ppf`` is
# ``stdtrit(df, q)``; checked on 62,000 degrees of freedom from 1e-3 to 1e9).
from scipy import special

from jurymeter.stats.design import Design, Effect
from jurymeter.stats.satterthwaite import component_combination_df

Z95 = float(special.ndtri(0.975))  # scipy.stats.norm.ppf(0.975)
JUDGE = "j"


def _dense(m: Any) -> np.ndarray:
    """A sparse (or dense) matrix as a dense float array."""
    dense: Any = m.toarray() if hasattr(m, "toarray") else m
    out: np.ndarray = np.asarray(dense, dtype=np.float64)
    return out


def _rows(judges: Sequence[str], offset: np.ndarray, se: np.ndarray, quantile: float = Z95) -> list[dict[str, Any]]:
    return [
        {"judge_id": str(j), "offset": float(o), "se": float(e), "low": float(o - quantile * e),
         "high": float(o + quantile * e)}
        for j, o, e in zip(judges, offset, se, strict=True)
    ]


def balanced_offsets(
    judges: Sequence[str],
    judge_means: np.ndarray,
    design: Design,
    sizes: Mapping[str, int],
    sigma2: Mapping[Effect, float],
    mean_squares: tuple[np.ndarray, np.ndarray] | None = None,
) -> list[dict[str, Any]]:
    r"""Offsets of the judges of a balanced block: judge mean minus the grand mean, with their SE.

    Parameters
    ----------
    judges : sequence of str
        The block's judge ids, in the judge axis' order.
    judge_means : numpy.ndarray
        Each judge's mean over the block (same order).
    design : Design
        The fitted design (with the judge facet ``j``, crossed).
    sizes : Mapping[str, int]
        Levels per facet (for a nested facet, per level of its nest).
    sigma2 : Mapping[Effect, float]
        The fitted components by effect (negative ones are taken as 0).
    mean_squares : (ms, df), optional
        The fit's mean squares and their degrees of freedom in ``design.effects``
        order: the interval is then :math:`\pm t_{0.975,\nu}` SE with
        :math:`\nu` Satterthwaite's df of the variance
        (:func:`jurymeter.stats.satterthwaite.component_combination_df`;
        the variance is estimated from a few dozen df on small panels, where
        :math:`\pm z` covers short: 93.6 % measured on 10 x 30 x 5, 94.0 % with t), else :math:`\pm z_{0.975}` SE.

    Returns
    -------
    list of dict
        One row per judge: ``judge_id``, ``offset`` (points), ``se``, ``low``,
        ``high`` (95 %). The variance is the module docstring's formula.
    """
    means = np.asarray(judge_means, dtype=np.float64)
    n_j = len(judges)
    offset = means - means.mean()
    weights = np.zeros(len(design.effects))
    for k, effect in enumerate(design.effects):
        if JUDGE not in effect or effect == frozenset({JUDGE}) or float(sigma2[effect]) <= 0:
            continue
        weights[k] = (1.0 - 1.0 / n_j) / float(np.prod([sizes[f] for f in effect if f != JUDGE]))
    var = float(sum(w * float(sigma2[e]) for w, e in zip(weights, design.effects, strict=True)))
    se = np.full(n_j, np.sqrt(var))
    quantile = Z95
    if mean_squares is not None:
        nu = component_combination_df(weights, design.ems_matrix(sizes), *mean_squares)
        # No positive variance (every weighted component <= 0): z, as without mean squares.
        if var > 0 and np.isfinite(nu) and nu > 0:
            quantile = float(special.stdtrit(nu, 0.975))  # scipy.stats.t.ppf(0.975, nu)
    return _rows(judges, offset, se, quantile)


def incomplete_offsets(
    judges: Sequence[str],
    system: np.ndarray,
    item: np.ndarray,
    judge: np.ndarray,
    y: np.ndarray,
    design: Design,
    sigma2: Mapping[Effect, float],
    *,
    generations: np.ndarray | None = None,
    rows: np.ndarray | None = None,
) -> tuple[list[dict[str, Any]], str | None]:
    r"""Within-cell least-squares judge offsets on incomplete data, with their SE (module docstring).

    Parameters
    ----------
    judges : sequence of str
        Judge ids; ``judge`` codes index them.
    system, item, judge : numpy.ndarray
        Integer codes of each observed (system, item, judge) cell (one entry
        per such cell).
    y : numpy.ndarray
        The cell's mean score (over its generations and replicates).
    design : Design
        The fitted design (with ``j``).
    sigma2 : Mapping[Effect, float]
        The fitted components by effect (negative ones as 0).
    generations, rows : numpy.ndarray, optional
        Per cell, its generations and its rows (generation x replicate
        observations) averaged into ``y``; an effect nested below ``s, i, j``
        is divided by the generations when it holds ``g`` but not ``r``, by the
        rows when it holds ``r`` (1 when not given).

    Returns
    -------
    (rows, reason)
        The offsets as :func:`balanced_offsets` gives them, or ``([], reason)``
        when the judges are not connected through shared (system, item) cells.
    """
    import scipy.sparse as sp  # here: the balanced path needs none

    n = len(y)
    n_j = len(judges)
    y = np.asarray(y, dtype=np.float64)
    s_codes = np.unique(system, return_inverse=True)[1]
    i_codes = np.unique(item, return_inverse=True)[1]
    n_s, n_i = int(s_codes.max()) + 1, int(i_codes.max()) + 1
    cell = np.unique(s_codes * n_i + i_codes, return_inverse=True)[1]
    n_c = int(cell.max()) + 1
    ones = np.ones(n)
    zj: Any = sp.csr_matrix((ones, (np.arange(n), judge)), shape=(n, n_j))
    zc: Any = sp.csr_matrix((ones, (np.arange(n), cell)), shape=(n, n_c))
    size = np.asarray(zc.sum(axis=0)).ravel()  # judges per cell
    w = sp.diags(1.0 / size)
    jc = (zj.T @ zc).tocsr()  # judges x cells
    jcw = (jc @ w).tocsr()

    def l_times(x: Any) -> Any:
        """L @ x (``x`` rows are the cells): the judge sums of x minus those of x's cell means."""
        return zj.T @ x - jcw @ (zc.T @ x)

    c_matrix = _dense(l_times(zj))
    q = (zj.T @ y) - jcw @ (zc.T @ y)
    if np.linalg.matrix_rank(c_matrix, tol=1e-9 * max(1.0, float(np.abs(c_matrix).max()))) < n_j - 1:
        return [], (
            "the judges are not all connected through (system, item) cells they both scored: their offsets "
            "cannot be compared"
        )
    c_plus = np.linalg.pinv(c_matrix, hermitian=True)
    offset = c_plus @ q
    component = {e: max(float(v), 0.0) for e, v in sigma2.items()}
    sj, ij = frozenset({"s", JUDGE}), frozenset({"i", JUDGE})
    v = np.zeros((n_j, n_j))
    for effect, codes, levels in ((sj, s_codes, n_s), (ij, i_codes, n_i)):
        if component.get(effect, 0.0) > 0:
            z = sp.csr_matrix((ones, (np.arange(n), codes * n_j + judge)), shape=(n, levels * n_j))
            lz = sp.csr_matrix(l_times(z))
            v += component[effect] * _dense(lz @ lz.T)
    gens = np.ones(n) if generations is None else np.asarray(generations, dtype=np.float64)
    per_row = np.ones(n) if rows is None else np.asarray(rows, dtype=np.float64)
    d = np.zeros(n)
    base = frozenset({"s", "i", JUDGE})
    for effect in design.effects:
        if not base <= effect:
            continue
        if "r" in effect:
            d += component.get(effect, 0.0) / per_row
        elif "g" in effect:
            d += component.get(effect, 0.0) / gens
        else:
            d += component.get(effect, 0.0)
    # L D L' = Zj'DZj - Zj'D Zc W Zc'Zj - (..)' + Zj'Zc W (Zc'D Zc) W Zc'Zj
    dmat = sp.diags(d)
    a = _dense(zj.T @ dmat @ zj)
    b = _dense(zj.T @ dmat @ zc @ w @ jc.T)
    cdc = sp.diags(np.asarray((zc.T @ dmat @ zc).diagonal()).ravel())
    cterm = _dense(jcw @ cdc @ jcw.T)
    v += a - b - b.T + cterm
    cov = c_plus @ v @ c_plus
    se = np.sqrt(np.clip(np.diag(cov), 0.0, None))
    return _rows(judges, offset, se), None
