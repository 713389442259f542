r"""Two groups of units contrasted by the naive average and by the Markov GLMM ([LiDing2026]_ section 4, tables 2-3).

The naive contrast is the difference of the two groups' mean ratings; the model
contrast :math:`\bar\theta_A - \bar\theta_B` of the fit's unit qualities. Each
has a batch-bootstrap standard error (the weights and draws of
:mod:`jurymeter.stats.sequential.compare_cells`), a Wald test
:math:`z = \hat\Delta / \widehat{SE}`, two-sided :math:`p = 2\Phi(-|z|)`, and,
against a reference answer, the outcome of the paper's table 3 (correct /
inconclusive / wrong at :data:`ALPHA`). Why the two can disagree (Jensen's
inequality on the naive mean under unequal spread): the module docstring of
:mod:`jurymeter.stats.sequential.compare`.

References
----------
.. [LiDing2026] T. Li and J. Ding, "Trustworthy Method Comparison with AI Judges:
   Estimation and Design under Order, Batch, and Aggregation Effects", 2026
   (``papers/trustworthy-comparison-ai-judges.txt``).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Literal

import numpy as np
import polars as pl
from scipy.stats import norm

from jurymeter.errors import ConfigError, DesignError
from jurymeter.stats.sequential.compare_cells import (
    _Cells,
    _cells,
    _check_resamples,
    _fit_cells,
    _weights,
)
from jurymeter.stats.sequential.glmm import GLMMBootstrap, SequentialGLMM
from jurymeter.stats.sequential.schemas import GROUP_CONTRAST_SCHEMA as CONTRAST_SCHEMA

Method = Literal["naive", "model"]
Outcome = Literal["correct", "inconclusive", "wrong"]

ALPHA = 0.05
"""Significance level of the table-3 outcome ([LiDing2026]_ table 3: p < 0.05)."""


@dataclass(frozen=True, slots=True)
class Contrast:
    r"""One group contrast with its Wald test.

    Attributes
    ----------
    method : {"naive", "model"}
        ``naive``: mean rating of group A's ratings minus group B's; ``model``:
        :math:`\bar\theta_A - \bar\theta_B`.
    estimate : float
        The contrast on the full data.
    se : float or None
        Batch-bootstrap standard error (sd of the resampled contrasts, ``ddof=1``).
    z, p_value : float or None
        :math:`z = \hat\Delta / \widehat{se}` and :math:`p = 2\{1 - \Phi(|z|)\}`.
    outcome : {"correct", "inconclusive", "wrong"} or None
        Against the reference (``None`` without one, or without a p-value).
    n_resamples : int
        Resamples used.
    reason : str or None
        Why ``se``/``z``/``p_value`` are ``None``.
    """

    method: Method
    estimate: float
    se: float | None
    z: float | None
    p_value: float | None
    outcome: Outcome | None
    n_resamples: int
    reason: str | None


@dataclass(frozen=True, slots=True)
class GroupComparison:
    """The naive and the model contrast of two groups of units ([LiDing2026]_ table 3).

    Attributes
    ----------
    group_a, group_b : tuple of str
        The units of each group, sorted.
    reference : {"A", "B"} or None
        Which group the reference answer says is better.
    alpha : float
        Level of the outcome.
    naive, model : Contrast
        The two contrasts (positive: group A rated higher).
    n_boot_naive : int
        Naive resamples drawn.
    seed : int
        Seed of the naive resamples.
    table : polars.DataFrame
        :data:`CONTRAST_SCHEMA`, rows ``naive`` then ``model``.
    """

    group_a: tuple[str, ...]
    group_b: tuple[str, ...]
    reference: Literal["A", "B"] | None
    alpha: float
    naive: Contrast
    model: Contrast
    n_boot_naive: int
    seed: int
    table: pl.DataFrame = field(repr=False)


def _group(name: str, ids: Sequence[str], units: tuple[str, ...]) -> tuple[str, ...]:
    if isinstance(ids, str) or not isinstance(ids, Sequence) or len(ids) == 0:
        msg = f"{name} must be a non-empty sequence of unit ids; got {ids!r}"
        raise DesignError(msg)
    unknown = sorted({str(u) for u in ids} - set(units))
    if unknown:
        msg = f"{name} names unit(s) the fit does not know: {unknown[:10]} (the fit has {len(units)} units, e.g. {list(units[:3])})"
        raise DesignError(msg)
    dup = sorted({str(u) for u in ids if list(ids).count(u) > 1})
    if dup:
        msg = f"{name} repeats unit(s) {dup[:10]}"
        raise DesignError(msg)
    return tuple(sorted(str(u) for u in ids))


def _wald(
    method: Method,
    estimate: float,
    resampled: np.ndarray,
    reference: Literal["A", "B"] | None,
    alpha: float,
    why_empty: str,
) -> Contrast:
    n = int(resampled.shape[0])
    if n < 2:
        return Contrast(method, estimate, None, None, None, None, n, why_empty)
    se = float(np.std(resampled, ddof=1))
    if not (math.isfinite(se) and se > 0.0):
        reason = f"the {n} resampled contrasts do not vary (se = {se}): no Wald test"
        return Contrast(method, estimate, None, None, None, None, n, reason)
    z = estimate / se
    p = float(2.0 * norm.sf(abs(z)))
    outcome: Outcome | None = None
    if reference is not None:
        if p >= alpha:
            outcome = "inconclusive"
        else:
            outcome = "correct" if (estimate > 0) == (reference == "A") else "wrong"
    return Contrast(method, estimate, se, float(z), p, outcome, n, None)


def _naive_contrast(
    cells: _Cells, ia: list[int], ib: list[int], n_boot: int, seed: int
) -> tuple[float, np.ndarray]:
    """The naive contrast and its resampled values (resamples rating both groups)."""
    s_a, c_a = cells.sums[:, ia].sum(axis=1), cells.counts[:, ia].sum(axis=1)
    s_b, c_b = cells.sums[:, ib].sum(axis=1), cells.counts[:, ib].sum(axis=1)
    estimate = float(s_a.sum() / c_a.sum() - s_b.sum() / c_b.sum())
    w = _weights(len(cells.batches), n_boot, seed)
    den_a, den_b = w @ c_a, w @ c_b
    ok = (den_a > 0) & (den_b > 0)
    return estimate, (w @ s_a)[ok] / den_a[ok] - (w @ s_b)[ok] / den_b[ok]


def _check_test(reference: object, alpha: object) -> None:
    if reference not in ("A", "B", None):
        msg = f"reference must be 'A', 'B' or None; got {reference!r}"
        raise ConfigError(msg)
    if isinstance(alpha, bool) or not (isinstance(alpha, float | int) and 0.0 < alpha < 1.0):
        msg = f"alpha must be in (0, 1); got {alpha!r}"
        raise ConfigError(msg)


def _groups(
    group_a: Sequence[str], group_b: Sequence[str], units: tuple[str, ...]
) -> tuple[tuple[str, ...], tuple[str, ...]]:
    a = _group("group_a", group_a, units)
    b = _group("group_b", group_b, units)
    shared = sorted(set(a) & set(b))
    if shared:
        msg = f"group_a and group_b share unit(s) {shared[:10]}; the groups must be disjoint"
        raise DesignError(msg)
    return a, b


def naive_group_contrast(
    records: pl.DataFrame,
    group_a: Sequence[str],
    group_b: Sequence[str],
    *,
    unit: str | Sequence[str] = "item_id",
    reference: Literal["A", "B"] | None = None,
    alpha: float = ALPHA,
    n_boot: int = 200,
    seed: int = 0,
    batch: str = "batch_id",
    score: str = "score",
) -> Contrast:
    r"""The naive contrast alone (no model fit): mean rating of group A minus group B, with its Wald test.

    The same estimate, batch-bootstrap standard error, Wald test and outcome as
    ``compare_groups(...).naive`` (module docstring for the resample weights);
    the units are those of ``records`` (sorted labels).

    Parameters
    ----------
    records : polars.DataFrame
        One judge's ratings: ``batch``, the unit column(s) and ``score``.
    group_a, group_b : sequence of str
        Disjoint unit ids.
    unit : str or sequence of str, default "item_id"
        The unit column(s) (values joined with ``"/"`` when several).
    reference : {"A", "B"}, optional
        The group a reference answer says is better.
    alpha : float, default 0.05
        Level of the outcome.
    n_boot : int, default 200
        Resamples.
    seed : int, default 0
        Seed of the resample weights.
    batch, score : str
        Column names.

    Returns
    -------
    Contrast

    Raises
    ------
    DesignError
        As :func:`compare_groups` (groups, columns).
    ConfigError
        As :func:`compare_groups` (options).

    Examples
    --------
    >>> records = pl.DataFrame({"batch_id": ["b0", "b0", "b1", "b1"], "item_id": ["x", "y", "y", "x"],
    ...                         "score": [1.0, 0.0, 1.0, 1.0]})
    >>> naive_group_contrast(records, ["x"], ["y"], n_boot=10).estimate
    0.5
    """
    cols = (unit,) if isinstance(unit, str) else tuple(unit)
    if not cols or not all(isinstance(c, str) for c in cols):
        msg = f"unit must be a column name or a non-empty sequence of them; got {unit!r}"
        raise ConfigError(msg)
    _check_resamples(n_boot, seed, given=n_boot)
    _check_test(reference, alpha)
    cells = _cells(records, None, cols, batch, score)
    a, b = _groups(group_a, group_b, cells.units)
    index = {u: i for i, u in enumerate(cells.units)}
    estimate, resampled = _naive_contrast(
        cells, [index[u] for u in a], [index[u] for u in b], n_boot, seed
    )
    why = f"fewer than 2 of {n_boot} naive resamples rated both groups"
    return _wald("naive", estimate, resampled, reference, float(alpha), why)


def compare_groups(
    records: pl.DataFrame,
    fit: SequentialGLMM,
    boot: GLMMBootstrap,
    group_a: Sequence[str],
    group_b: Sequence[str],
    *,
    unit: str | Sequence[str] = "item_id",
    reference: Literal["A", "B"] | None = None,
    alpha: float = ALPHA,
    n_boot: int | None = None,
    seed: int = 0,
) -> GroupComparison:
    r"""The naive and the model contrast of two groups of units, with Wald tests.

    Parameters
    ----------
    records : polars.DataFrame
        One judge's ratings, the ones ``fit`` was fitted to.
    fit : SequentialGLMM
        The Markov GLMM fitted to ``records``.
    boot : GLMMBootstrap
        ``bootstrap_fits(records, fit)``: the model contrast's standard error.
    group_a, group_b : sequence of str
        Unit ids (labels of ``fit.units``) of the two groups; disjoint.
    unit : str or sequence of str, default "item_id"
        The unit column(s); must be the fit's.
    reference : {"A", "B"}, optional
        Which group a reference answer (human evaluation, a published result)
        says is better; gives each contrast its table-3 outcome.
    alpha : float, default 0.05
        Level of the outcome.
    n_boot : int, optional
        Naive resamples (default ``boot.n_boot``).
    seed : int, default 0
        Seed of the naive resample weights (module docstring).

    Returns
    -------
    GroupComparison

    Raises
    ------
    DesignError
        A group empty, naming units the fit does not know, repeating a unit, or
        the two groups sharing units (each error names them); records not
        those of the fit; ``boot`` not of this fit.
    ConfigError
        ``unit`` not the fit's, ``reference`` not ``"A"``/``"B"``/``None``,
        ``alpha`` outside (0, 1), ``n_boot`` < 2, a negative seed.

    Notes
    -----
    Naive: :math:`\hat\Delta_{naive} = \bar Y_A - \bar Y_B`, the mean of all of
    group A's ratings minus that of group B's (every non-null rating). Model:
    :math:`\hat\Delta_{GLMM} = |A|^{-1}\sum_{i\in A}\hat\theta_i - |B|^{-1}\sum_{i\in B}\hat\theta_i`
    (free of the identifying constraints: shifting every :math:`\theta` cancels).
    Each has the standard error of its batch bootstrap, :math:`z = \hat\Delta/\widehat{se}`
    and :math:`p = 2\{1 - \Phi(|z|)\}` ([LiDing2026]_ table 3: "p-values are from
    the Wald statistic with bootstrap standard error"). Outcome: ``correct`` when
    :math:`p < \alpha` and the sign agrees with ``reference``, ``wrong`` when
    :math:`p < \alpha` and it disagrees, ``inconclusive`` when :math:`p \ge \alpha`.

    Examples
    --------
    >>> from jurymeter.stats.sequential import simulate_sequential, fit_sequential_glmm, bootstrap_fits
    >>> rng = np.random.default_rng(0)
    >>> orders = np.array([rng.permutation(4) for _ in range(60)])
    >>> records = simulate_sequential([1.0, 1.0, -1.0, -1.0], orders, rng=2, rho=[0.3], batch_sd=0.3)
    >>> fit = fit_sequential_glmm(records, lags=1)
    >>> cmp = compare_groups(records, fit, bootstrap_fits(records, fit, n_boot=30),
    ...                      ["u00", "u01"], ["u02", "u03"], reference="A")
    >>> cmp.naive.outcome, cmp.model.outcome
    ('correct', 'correct')
    """
    # Long (127 lines) by its numpy docstring (every parameter, the formulas and their sources); the code below is 51 lines.
    cells, n_b, theta, draws = _fit_cells(records, fit, boot, unit, n_boot, seed)
    _check_test(reference, alpha)
    a, b = _groups(group_a, group_b, fit.units)
    index = {u: i for i, u in enumerate(fit.units)}
    ia, ib = [index[u] for u in a], [index[u] for u in b]
    naive_est, naive_boot = _naive_contrast(cells, ia, ib, n_b, seed)
    model_est = float(theta[ia].mean() - theta[ib].mean())
    model_boot = draws[:, ia].mean(axis=1) - draws[:, ib].mean(axis=1)
    naive = _wald(
        "naive",
        naive_est,
        naive_boot,
        reference,
        float(alpha),
        f"fewer than 2 of {n_b} naive resamples rated both groups",
    )
    model = _wald(
        "model",
        model_est,
        model_boot,
        reference,
        float(alpha),
        f"fewer than 2 bootstrap refits succeeded ({boot.n_failed} of {boot.n_boot} failed)",
    )
    table = pl.DataFrame(
        [
            {
                "method": c.method,
                "estimate": c.estimate,
                "se": c.se,
                "z": c.z,
                "p_value": c.p_value,
                "outcome": c.outcome,
                "n_resamples": c.n_resamples,
                "reason": c.reason,
            }
            for c in (naive, model)
        ],
        schema=CONTRAST_SCHEMA,
    )
    return GroupComparison(
        group_a=a,
        group_b=b,
        reference=reference,
        alpha=float(alpha),
        naive=naive,
        model=model,
        n_boot_naive=n_b,
        seed=seed,
        table=table,
    )
