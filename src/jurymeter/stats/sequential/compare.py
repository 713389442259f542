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

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
import polars as pl

from jurymeter.errors import ConfigError
from jurymeter.stats.sequential.compare_cells import _fit_cells, _weights
from jurymeter.stats.sequential.contrasts import (
    ALPHA,
    Contrast,
    GroupComparison,
    Method,
    Outcome,
    compare_groups,
    naive_group_contrast,
)
from jurymeter.stats.sequential.glmm import GLMMBootstrap, SequentialGLMM
from jurymeter.stats.sequential.schemas import GROUP_CONTRAST_SCHEMA as CONTRAST_SCHEMA
from jurymeter.stats.sequential.schemas import SELECTION_SCHEMA

__all__ = [
    "ALPHA",
    "CONTRAST_SCHEMA",
    "SELECTION_SCHEMA",
    "Contrast",
    "GroupComparison",
    "Method",
    "Outcome",
    "TopSelection",
    "compare_groups",
    "naive_group_contrast",
    "select_top",
]


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
    # Long (108 lines) by its numpy docstring (every parameter, the formulas and their sources); the code below is 44 lines.
    cells, n_b, theta, theta_boot = _fit_cells(records, fit, boot, unit, n_boot, seed)
    ks = _ks(k, len(fit.units))
    naive = cells.sums.sum(axis=0) / cells.counts.sum(axis=0)
    w = _weights(len(cells.batches), n_b, seed)
    num, den = w @ cells.sums, w @ cells.counts
    usable = np.all(den > 0, axis=1)
    naive_boot = num[usable] / den[usable]
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
