r"""Satterthwaite's degrees of freedom of a linear combination of mean squares: the one place it is written.

A combination :math:`V = \sum_k a_k MS_k` of independent mean squares, each
:math:`MS_k \sim E[MS_k] \chi^2_{df_k} / df_k`, is approximately a scaled
chi-square with

.. math::
   \nu = \frac{\bigl(\sum_k a_k MS_k\bigr)^2}{\sum_k (a_k MS_k)^2 / df_k}

degrees of freedom (Satterthwaite 1946, eq. 1; Brennan 2001, sec. 6.1). A
variance component or an error variance of a G-study is such a combination:
:math:`\hat\sigma^2 = A^{-1} MS` (``A`` the expected-mean-square matrix of
the design, or Henderson's coefficient matrix ``C``), so
:math:`w^\top \hat\sigma^2 = a^\top MS` with :math:`a = A^{-\top} w`
(:func:`component_combination_df`).

Convention for the undefined cases (chosen for what the callers need):

- a term with :math:`a_k MS_k = 0` adds no variance to :math:`V`, whatever
  its :math:`df_k`, and is left out of the denominator (a mean square with
  weight zero, or zero, cannot make the approximation undefined);
- the result is NaN when no term is left (the denominator is 0: ``V`` is an
  exact 0, no chi-square to match), or when a term left has no positive
  finite :math:`df_k` or is not finite (its chi-square is undefined);
- the sign of ``V`` is not checked: :math:`\nu = V^2 / D` is what the formula
  gives, and the D-study reports it next to an error variance estimated
  below zero (whose MDD is null for that reason); a caller that needs a
  positive variance (a t quantile for a standard error) checks it itself.

References
----------
F. E. Satterthwaite, "An approximate distribution of estimates of variance
components", *Biometrics Bulletin* 2(6), 110-114, 1946.
R. L. Brennan, *Generalizability Theory*, Springer, 2001.
"""

from __future__ import annotations

import numpy as np


def satterthwaite_df(coefficients: np.ndarray, mean_squares: np.ndarray, df: np.ndarray) -> float:
    r"""Satterthwaite's :math:`\nu` of :math:`V = \sum_k a_k MS_k` (module docstring: formula and NaN rule).

    Parameters
    ----------
    coefficients : numpy.ndarray
        The combination's coefficients :math:`a_k`, one per mean square.
    mean_squares : numpy.ndarray
        The mean squares :math:`MS_k`.
    df : numpy.ndarray
        Their degrees of freedom :math:`df_k`.

    Returns
    -------
    float
        :math:`\nu = V^2 / \sum_{k: a_k MS_k \ne 0} (a_k MS_k)^2 / df_k`; NaN
        when no term is non-zero, or a non-zero term has no positive finite df.
    """
    terms = np.asarray(coefficients, dtype=np.float64) * np.asarray(mean_squares, dtype=np.float64)
    dfs = np.asarray(df, dtype=np.float64)
    used = terms != 0
    if not used.any() or not (np.all(np.isfinite(terms[used])) and np.all(np.isfinite(dfs[used]) & (dfs[used] > 0))):
        return float("nan")
    denominator = float(np.sum(terms[used] ** 2 / dfs[used]))
    return float(terms.sum() ** 2 / denominator)


def component_combination_df(
    weights: np.ndarray, expectation: np.ndarray, mean_squares: np.ndarray, df: np.ndarray
) -> float:
    r"""Satterthwaite's :math:`\nu` of :math:`w^\top \hat\sigma^2`, the components being :math:`A^{-1} MS`.

    Parameters
    ----------
    weights : numpy.ndarray
        The weight :math:`w_E` of each component in the combination (an error
        variance's, a judge offset's variance).
    expectation : numpy.ndarray
        The matrix :math:`A` with :math:`E[MS] = A \sigma^2` (the balanced
        design's :meth:`~jurymeter.stats.design.Design.ems_matrix`, or a
        Henderson fit's ``coefficients``).
    mean_squares, df : numpy.ndarray
        The fit's mean squares and their degrees of freedom, in the same order.

    Returns
    -------
    float
        :func:`satterthwaite_df` of :math:`a = A^{-\top} w`.
    """
    a = np.linalg.solve(np.asarray(expectation, dtype=np.float64).T, np.asarray(weights, dtype=np.float64))
    return satterthwaite_df(a, mean_squares, df)
