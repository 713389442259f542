r"""Leaderboard selection and group comparison under sequential judging ([LiDing2026]_).

Two ways to turn one judge's batched ratings into a decision:

- the **naive average**: the mean rating of each unit (rated output), or of
  each group's ratings; the randomize-and-average practice;
- the **model**: the unit qualities :math:`\theta_i` of the Markov GLMM
  (:func:`~jurymeter.stats.sequential.glmm.fit_sequential_glmm`), which take
  the position effects, the serial dependence and the batch intercept out.

:func:`select_top` names the top-1 and top-k units by both and reports how often
a batch-bootstrap resample names the same unit (set); :func:`compare_groups`
contrasts two named groups of units by both, with a batch-bootstrap standard
error, a Wald test and, against a reference answer, the outcome of the paper's
table 3 (correct / inconclusive / wrong).

Why the two can disagree ([LiDing2026]_ section 4, table 2). The naive mean rating
of a unit estimates :math:`E\,\operatorname{logit}^{-1}(\theta_i + \dots)`, a
nonlinear function of :math:`\theta_i`; under equal mean quality two groups with
unequal spread have unequal mean ratings (Jensen's inequality), so the naive
contrast converges to a nonzero value and its test rejects more and more surely
as the number of batches grows. The model contrast
:math:`\bar\theta_A - \bar\theta_B` targets the latent quality itself.

The bootstraps. The model side uses the refits of
:func:`~jurymeter.stats.sequential.glmm.bootstrap_fits` (its ``draws`` of
:math:`\theta`). The naive side draws its own batch resamples: with the records'
:math:`n_b` distinct batch ids in sorted order and
``rng = numpy.random.default_rng(seed)``, the weights are
``W = rng.multinomial(n_b, [1 / n_b] * n_b, size=n_boot)`` (row :math:`r`: how many
times resample :math:`r` draws each batch), and a resample's mean of a set of
ratings is :math:`\sum_b W_{rb} S_b / \sum_b W_{rb} C_b` with :math:`S_b, C_b` the
sum and the count of those ratings in batch :math:`b` (the mean over the
resampled batches, a batch drawn :math:`m` times counting :math:`m` times). A
resample that leaves some unit (or a group) without a rating is not used; the
results count them.

Ranking and ties. Units are ranked by decreasing score; ties (frequent for the
naive mean of binary ratings) go to the unit that sorts first by label, in the
full data and in every resample alike, so a tie-break never counts as instability.

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
from jurymeter.stats.sequential.glmm import GLMMBootstrap, SequentialGLMM
from jurymeter.stats.sequential.schemas import GROUP_CONTRAST_SCHEMA as CONTRAST_SCHEMA
from jurymeter.stats.sequential.schemas import SELECTION_SCHEMA

__all__ = [
    "CONTRAST_SCHEMA",
    "SELECTION_SCHEMA",
    "Contrast",
    "GroupComparison",
    "TopSelection",
    "compare_groups",
    "naive_group_contrast",
    "select_top",
]

Method = Literal["naive", "model"]
Outcome = Literal["correct", "inconclusive", "wrong"]

ALPHA = 0.05
"""Significance level of the table-3 outcome ([LiDing2026]_ table 3: p < 0.05)."""


# --------------------------------------------------------------------------
# results
# --------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class TopSelection:
    r"""The top-1 and top-k units by the naive average and by the model.

    Attributes
    ----------
    ks : tuple of int
        The k reported, increasing (1 always among them).
    naive_scores : tuple of float
        Mean rating per unit, in the order of ``units``.
    units : tuple of str
        Unit labels (the fit's, sorted).
    naive_top, model_top : tuple of tuple of str
        Per k, the top-k units best first.
    naive_stability, model_stability : tuple of float or None
        Per k, the share of usable resamples whose top-k *set* is the same as
        the full data's (for k = 1: the same unit); ``None`` when no resample
        was usable (``reason`` says why).
    n_naive, n_model : int
        Usable resamples (naive: with every unit rated; model: successful refits).
    n_boot_naive : int
        Naive resamples drawn.
    seed : int
        Seed of the naive resamples.
    reason : str or None
        Why a stability is ``None``.
    table : polars.DataFrame
        :data:`SELECTION_SCHEMA`.
    """

    ks: tuple[int, ...]
    units: tuple[str, ...]
    naive_scores: tuple[float, ...]
    naive_top: tuple[tuple[str, ...], ...]
    model_top: tuple[tuple[str, ...], ...]
    naive_stability: tuple[float | None, ...]
    model_stability: tuple[float | None, ...]
    n_naive: int
    n_model: int
    n_boot_naive: int
    seed: int
    reason: str | None
    table: pl.DataFrame = field(repr=False)


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


# --------------------------------------------------------------------------
# helpers
# --------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Cells:
    """Per-batch sums and counts of the ratings of each unit."""

    units: tuple[str, ...]
    batches: tuple[str, ...]
    sums: np.ndarray  # (n_batches, n_units)
    counts: np.ndarray  # (n_batches, n_units)


def _unit_columns(unit: str | Sequence[str], fit: SequentialGLMM) -> tuple[str, ...]:
    cols = (unit,) if isinstance(unit, str) else tuple(unit)
    if not cols or not all(isinstance(c, str) for c in cols):
        msg = f"unit must be a column name or a non-empty sequence of them; got {unit!r}"
        raise ConfigError(msg)
    if cols != fit.unit_columns:
        msg = f"unit {list(cols)} differs from the fit's unit columns {list(fit.unit_columns)}"
        raise ConfigError(msg)
    return cols


def _cells(
    records: pl.DataFrame,
    units: tuple[str, ...] | None,
    cols: tuple[str, ...],
    batch_col: str,
    score_col: str,
) -> _Cells:
    """Sum and count of the non-null scores per (batch, unit), dense over ``units`` (default: those found)."""
    missing = [c for c in (batch_col, score_col, *cols) if c not in records.columns]
    if missing:
        msg = f"records lack the column(s) {missing}; needed: {[batch_col, score_col, *cols]}"
        raise DesignError(msg)
    label = (
        pl.col(cols[0]).cast(pl.String)
        if len(cols) == 1
        else pl.concat_str([pl.col(c).cast(pl.String) for c in cols], separator="/")
    )
    frame = records.select(
        pl.col(batch_col).cast(pl.String).alias("_b"),
        label.alias("_u"),
        pl.col(score_col).cast(pl.Float64).alias("_y"),
    ).filter(pl.col("_y").is_not_null() & pl.col("_y").is_not_nan() & pl.col("_b").is_not_null())
    found = set(frame["_u"].unique().to_list())
    if units is None:
        units = tuple(sorted(found))
        if not units:
            msg = "records hold no rating with a non-null score"
            raise DesignError(msg)
    if found != set(units):
        extra = sorted(str(u) for u in found - set(units))
        absent = sorted(set(units) - found)
        msg = f"records must be the ones the fit was fitted to: units not in the fit {extra[:5]}, fit units without a rating {absent[:5]}"
        raise DesignError(msg)
    batches = tuple(sorted(frame["_b"].unique().to_list()))
    b_code = (
        frame["_b"]
        .replace_strict(dict(zip(batches, range(len(batches)), strict=True)), return_dtype=pl.Int64)
        .to_numpy()
    )
    u_index = {u: i for i, u in enumerate(units)}
    u_code = frame["_u"].replace_strict(u_index, return_dtype=pl.Int64).to_numpy()
    n_b, n_u = len(batches), len(units)
    flat = b_code * n_u + u_code
    y = frame["_y"].to_numpy()
    sums = np.bincount(flat, weights=y, minlength=n_b * n_u).reshape(n_b, n_u)
    counts = np.bincount(flat, minlength=n_b * n_u).reshape(n_b, n_u).astype(np.float64)
    return _Cells(units=units, batches=batches, sums=sums, counts=counts)


def _weights(n_batches: int, n_boot: int, seed: int) -> np.ndarray:
    """The naive resample weights (module docstring): ``(n_boot, n_batches)`` multinomial counts."""
    rng = np.random.default_rng(seed)
    out: np.ndarray = rng.multinomial(
        n_batches, np.full(n_batches, 1.0 / n_batches), size=n_boot
    ).astype(np.float64)
    return out


def _check_boot(n_boot: int | None, seed: int, boot: GLMMBootstrap) -> int:
    n = boot.n_boot if n_boot is None else n_boot
    if isinstance(n, bool) or not isinstance(n, int) or n < 2:
        msg = f"n_boot must be an integer >= 2; got {n_boot!r}"
        raise ConfigError(msg)
    if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
        msg = f"seed must be an integer >= 0; got {seed!r}"
        raise ConfigError(msg)
    return n


def _theta_draws(fit: SequentialGLMM, boot: GLMMBootstrap) -> np.ndarray:
    """``(n_ok, n_units)`` bootstrap draws of theta, in the order of ``fit.units``."""
    index = {name: j for j, name in enumerate(boot.names)}
    wanted = [f"theta[{u}]" for u in fit.units]
    absent = [w for w in wanted if w not in index]
    if absent or boot.draws.shape[1] != len(boot.names):
        msg = f"boot does not hold draws of the fit's theta (missing {absent[:3]}): pass bootstrap_fits(records, fit)"
        raise DesignError(msg)
    out: np.ndarray = boot.draws[:, [index[w] for w in wanted]]
    return out


def _order(scores: np.ndarray) -> np.ndarray:
    """Indices by decreasing score along the last axis, ties to the lower index (the label order)."""
    out: np.ndarray = np.argsort(-scores, axis=-1, kind="stable")
    return out


def _stability(full: np.ndarray, resampled: np.ndarray, k: int) -> float | None:
    """Share of rows of ``resampled`` whose top-k set equals that of ``full``."""
    if resampled.shape[0] == 0:
        return None
    n_u = full.shape[0]
    target = np.zeros(n_u, dtype=bool)
    target[_order(full)[:k]] = True
    top = _order(resampled)[:, :k]
    member = np.zeros(resampled.shape, dtype=bool)
    np.put_along_axis(member, top, True, axis=1)
    return float(np.mean(np.all(member == target[None, :], axis=1)))


def _ks(k: int | Sequence[int], n_units: int) -> tuple[int, ...]:
    raw = [k] if isinstance(k, int | np.integer) else list(k)
    bad = [
        v
        for v in raw
        if isinstance(v, bool) or not isinstance(v, int | np.integer) or not 1 <= v <= n_units
    ]
    if bad or not raw:
        msg = f"k must be an integer (or a sequence of them) in 1..{n_units} (the number of units); got {k!r}"
        raise ConfigError(msg)
    return tuple(sorted({1, *(int(v) for v in raw)}))


# --------------------------------------------------------------------------
# leaderboard selection
# --------------------------------------------------------------------------


def select_top(
    records: pl.DataFrame,
    fit: SequentialGLMM,
    boot: GLMMBootstrap,
    *,
    unit: str | Sequence[str] = "item_id",
    k: int | Sequence[int] = 1,
    n_boot: int | None = None,
    seed: int = 0,
) -> TopSelection:
    r"""The top-1 and top-k units by the naive average and by the model, with their stability.

    Parameters
    ----------
    records : polars.DataFrame
        One judge's ratings, the ones ``fit`` was fitted to (its batch, unit
        and score columns).
    fit : SequentialGLMM
        The Markov GLMM fitted to ``records``.
    boot : GLMMBootstrap
        ``bootstrap_fits(records, fit)``: its draws of :math:`\theta` give the
        model side's stability.
    unit : str or sequence of str, default "item_id"
        The unit column(s); must be the fit's.
    k : int or sequence of int, default 1
        The top-k sizes to report besides 1.
    n_boot : int, optional
        Naive resamples (default ``boot.n_boot``).
    seed : int, default 0
        Seed of the naive resample weights (module docstring).

    Returns
    -------
    TopSelection

    Raises
    ------
    DesignError
        Records missing a column, or not those of the fit (a unit not in the
        fit, a fit unit without a rating); ``boot`` not of this fit.
    ConfigError
        ``unit`` not the fit's, ``k`` out of 1..(number of units), ``n_boot`` < 2,
        a negative seed.

    Notes
    -----
    Naive score: the mean of a unit's ratings (every non-null rating, the
    first ratings of a batch included). Model score: :math:`\hat\theta_i`.
    Stability of top-k: the share of resamples whose top-k set is the full
    data's ([LiDing2026]_ table 1 measures the accuracy of the same top-1 choice
    in simulation). Ties break by unit label (module docstring).

    Examples
    --------
    >>> from jurymeter.stats.sequential import simulate_sequential, fit_sequential_glmm, bootstrap_fits
    >>> rng = np.random.default_rng(0)
    >>> orders = np.array([rng.permutation(5) for _ in range(40)])
    >>> records = simulate_sequential([1.5, 0.0, 0.0, -0.5, 0.5], orders, rng=1, rho=[0.3], batch_sd=0.3)
    >>> fit = fit_sequential_glmm(records, lags=1)
    >>> top = select_top(records, fit, bootstrap_fits(records, fit, n_boot=20), k=2)
    >>> top.naive_top[0], top.model_top[0]
    (('u00',), ('u00',))
    """
    cols = _unit_columns(unit, fit)
    n_b = _check_boot(n_boot, seed, boot)
    ks = _ks(k, len(fit.units))
    cells = _cells(records, fit.units, cols, fit.columns[0], fit.columns[2])
    naive = cells.sums.sum(axis=0) / cells.counts.sum(axis=0)
    w = _weights(len(cells.batches), n_b, seed)
    num, den = w @ cells.sums, w @ cells.counts
    usable = np.all(den > 0, axis=1)
    naive_boot = num[usable] / den[usable]
    theta = np.asarray(fit.theta, dtype=np.float64)
    theta_boot = _theta_draws(fit, boot)
    naive_rank, model_rank = _order(naive), _order(theta)
    units = np.asarray(fit.units, dtype=object)
    naive_top = tuple(tuple(str(u) for u in units[naive_rank[:kk]]) for kk in ks)
    model_top = tuple(tuple(str(u) for u in units[model_rank[:kk]]) for kk in ks)
    naive_stab = tuple(_stability(naive, naive_boot, kk) for kk in ks)
    model_stab = tuple(_stability(theta, theta_boot, kk) for kk in ks)
    reasons = []
    if naive_boot.shape[0] == 0:
        reasons.append(f"no naive resample of {n_b} rated every unit")
    if theta_boot.shape[0] == 0:
        reasons.append("no bootstrap refit succeeded")
    table = pl.DataFrame(
        {
            "method": ["naive"] * len(ks) + ["model"] * len(ks),
            "k": list(ks) * 2,
            "units": [list(t) for t in naive_top + model_top],
            "stability": list(naive_stab + model_stab),
            "n_resamples": [int(naive_boot.shape[0])] * len(ks)
            + [int(theta_boot.shape[0])] * len(ks),
        },
        schema=SELECTION_SCHEMA,
    )
    return TopSelection(
        ks=ks,
        units=fit.units,
        naive_scores=tuple(float(v) for v in naive),
        naive_top=naive_top,
        model_top=model_top,
        naive_stability=naive_stab,
        model_stability=model_stab,
        n_naive=int(naive_boot.shape[0]),
        n_model=int(theta_boot.shape[0]),
        n_boot_naive=n_b,
        seed=seed,
        reason="; ".join(reasons) or None,
        table=table,
    )


# --------------------------------------------------------------------------
# group comparison
# --------------------------------------------------------------------------


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
    if isinstance(n_boot, bool) or not isinstance(n_boot, int) or n_boot < 2:
        msg = f"n_boot must be an integer >= 2; got {n_boot!r}"
        raise ConfigError(msg)
    if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
        msg = f"seed must be an integer >= 0; got {seed!r}"
        raise ConfigError(msg)
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
    cols = _unit_columns(unit, fit)
    n_b = _check_boot(n_boot, seed, boot)
    _check_test(reference, alpha)
    a, b = _groups(group_a, group_b, fit.units)
    cells = _cells(records, fit.units, cols, fit.columns[0], fit.columns[2])
    index = {u: i for i, u in enumerate(fit.units)}
    ia, ib = [index[u] for u in a], [index[u] for u in b]
    naive_est, naive_boot = _naive_contrast(cells, ia, ib, n_b, seed)
    theta = np.asarray(fit.theta, dtype=np.float64)
    draws = _theta_draws(fit, boot)
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
