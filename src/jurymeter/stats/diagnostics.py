r"""Checks around a G-study: ensembles, items, the naive bootstrap and rank reliability.

All follow the appendix of paper ``ask-which-not-how-good``:

- *Ensemble partitions*: "we form disjoint ensembles of size k, refit on those
  floor(n_j/k) ensemble judges, and compare the resulting sigma2_sj against the
  prediction" sigma2_sj / k; observed over predicted, median and range over
  random partitions.
- *Item diagnostics*: per-item discrimination (between-system variance of the
  item's system means), the split-half Spearman correlation of discrimination
  between random halves of the systems, and the screening rule "retain items
  with between-system variance >= 1.0".
- *Naive bootstrap*: items resampled, judges fixed; its 95% half-width for the
  difference of two system means against the G-theory MDD ("understating by
  1.3x to 2.8x because it ignores the judge facet").
- *Rank reliability*: the probability that two systems adjacent in the true top
  ten come out in the wrong order, and the false-positive rate of the MDD rule
  on pairs whose true difference is zero.

Functions take the dense block and design (see :mod:`jurymeter.stats.blocks`); they
never read files. A check that its inputs cannot support (no positive
:math:`\sigma^2_\delta`, no positive predicted :math:`\sigma^2_{sj}`, fewer than
two resamples, constant discriminations) returns NaN without a numpy warning;
the report says why (``null_reasons``).
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass

import numpy as np
from scipy import stats

from jurymeter.errors import DesignError
from jurymeter.stats.design import Design
from jurymeter.stats.dstudy import PAPER_ROLES, Facets, error_variances, mdd95
from jurymeter.stats.gstudy import GStudy, TermSums, fit_gstudy, fit_terms, simulate_design


@dataclass(frozen=True)
class EnsembleCheck:
    """Observed over predicted sigma2_sj for ensembles of ``k`` judges."""

    k: int
    ratios: np.ndarray

    @property
    def defined(self) -> bool:
        """Whether the ratios exist (the prediction ``sigma2_sj / k`` is positive)."""
        return bool(self.ratios.size) and bool(np.all(np.isfinite(self.ratios)))

    @property
    def median(self) -> float:
        return float(np.median(self.ratios)) if self.defined else float("nan")

    @property
    def low(self) -> float:
        return float(np.min(self.ratios)) if self.defined else float("nan")

    @property
    def high(self) -> float:
        return float(np.max(self.ratios)) if self.defined else float("nan")


def ensemble_partitions(
    x: np.ndarray,
    design: Design,
    *,
    k: int,
    partitions: int = 60,
    seed: int = 0,
    roles: Facets = PAPER_ROLES,
) -> EnsembleCheck:
    """Refit on disjoint ensembles of ``k`` judges (their mean score) over random partitions.

    The prediction for the ensemble design is sigma2_sj / k (G-theory: the mean
    of k judges carries sigma2_sj / k). The refits run on the cell means when
    the design has replicates (:func:`_cell_means`: the same estimate of
    sigma2_sj from 1/n_r of the data). :class:`EnsembleRefits` over one chunk.
    """
    axis = design.facets.index(roles.judge)
    refits = EnsembleRefits(design, x.shape[axis], k=k, partitions=partitions, seed=seed, roles=roles)
    return refits.add(x).check(fit_gstudy(x, design))


class EnsembleRefits:
    """The refits of :func:`ensemble_partitions`, accumulated over item chunks of the block.

    The partitions are drawn up front (the same draws, in the same order, as
    one pass over the whole block); each keeps the :class:`TermSums` of its
    ensembles' block.
    """

    def __init__(
        self, design: Design, n_judges: int, *, k: int, partitions: int = 60, seed: int = 0,
        roles: Facets = PAPER_ROLES,
    ) -> None:
        groups = n_judges // k
        if groups < 2:
            msg = f"ensembles of {k} judges need at least {2 * k} judges; the block has {n_judges}"
            raise DesignError(msg)
        self.k, self.groups, self.design, self.roles = k, groups, design, roles
        self.label = design.label(frozenset({roles.system, roles.judge}))
        self.reduced = _cell_means_design(design)
        rng = np.random.default_rng(seed)
        self.orders = [rng.permutation(n_judges)[: groups * k] for _ in range(partitions)]
        self.terms = [TermSums(self.reduced, roles.item) for _ in self.orders]

    def add(self, x: np.ndarray) -> EnsembleRefits:
        """Add the block's scores of some items (all of them, in chunks)."""
        x, _ = _cell_means(x, self.design)
        axis = self.reduced.facets.index(self.roles.judge)
        moved = np.moveaxis(x, axis, -1)
        for order, terms in zip(self.orders, self.terms, strict=True):
            grouped = moved[..., order].reshape(*moved.shape[:-1], self.groups, self.k).mean(axis=-1)
            terms.add(np.moveaxis(grouped, -1, axis))
        return self

    def check(self, fit: GStudy) -> EnsembleCheck:
        """Observed over predicted sigma2_sj per partition; ``fit`` is the whole block's G-study.

        The prediction is the block's sigma2_sj divided by ``k``; when it is
        not positive there is nothing to compare against and every ratio is NaN.
        """
        predicted = fit.component(self.label) / self.k
        if not predicted > 0:
            return EnsembleCheck(k=self.k, ratios=np.full(len(self.terms), np.nan))
        ratios = np.array([fit_terms(terms).component(self.label) / predicted for terms in self.terms])
        return EnsembleCheck(k=self.k, ratios=ratios)


def _cell_means_design(design: Design) -> Design:
    """The design of :func:`_cell_means`: without a facet nested in all the others, if any."""
    for w in design.facets:
        others = frozenset(design.facets) - {w}
        if design.nests[w] == others and len(others) >= 3:
            kept = tuple(f for f in design.facets if f != w)
            return Design(kept, {f: design.nests[f] for f in kept})
    return design


def _cell_means(x: np.ndarray, design: Design) -> tuple[np.ndarray, Design]:
    """Average out a facet nested in all the others (the replicates of ``r:sij``).

    Only the residual contains such a facet ``w``, and every other effect's
    mean square on the cell means is its mean square on ``x`` divided by
    ``n_w``; so the components of the design without ``w``, fitted on the
    means, equal the full design's for every effect but the highest crossed
    one (which absorbs the residual). ``sigma2_sj`` is one of them when ``w``
    exists and the design has three or more other facets.
    """
    reduced = _cell_means_design(design)
    if reduced is design:
        return x, design
    (w,) = set(design.facets) - set(reduced.facets)
    return x.mean(axis=design.facets.index(w)), reduced


def system_item_means(x: np.ndarray, design: Design, roles: Facets = PAPER_ROLES) -> np.ndarray:
    """(systems, items) means over every other facet."""
    s, i = design.facets.index(roles.system), design.facets.index(roles.item)
    other = tuple(a for a in range(x.ndim) if a not in (s, i))
    means: np.ndarray = x.mean(axis=other)
    return means if s < i else means.T


@dataclass(frozen=True)
class ItemDiagnostics:
    """Per-item discrimination and its stability across halves of the systems."""

    discrimination: np.ndarray
    split_half_rho: np.ndarray

    def screened(self, threshold: float = 1.0) -> np.ndarray:
        """Indices of items whose between-system variance is at least ``threshold``."""
        return np.flatnonzero(self.discrimination >= threshold)


def item_diagnostics(
    x: np.ndarray,
    design: Design,
    *,
    splits: int = 200,
    seed: int = 0,
    roles: Facets = PAPER_ROLES,
) -> ItemDiagnostics:
    """Discrimination = variance over systems (ddof 1) of each item's system means.

    Split-half: the systems are split at random into two halves; the Spearman
    correlation between the items' discrimination in the two halves, per split.
    """
    return item_diagnostics_from_means(system_item_means(x, design, roles), splits=splits, seed=seed)


def item_diagnostics_from_means(means: np.ndarray, *, splits: int = 200, seed: int = 0) -> ItemDiagnostics:
    """:func:`item_diagnostics` from the (systems, items) means (gathered item chunk by item chunk)."""
    n_s = means.shape[0]
    if n_s < 4:
        msg = f"split-half item diagnostics need at least 4 systems; the block has {n_s}"
        raise DesignError(msg)
    rng = np.random.default_rng(seed)
    rhos = np.empty(splits)
    for k in range(splits):
        order = rng.permutation(n_s)
        half = n_s // 2
        a = means[order[:half]].var(axis=0, ddof=1)
        b = means[order[half : 2 * half]].var(axis=0, ddof=1)
        # Constant discriminations in a half (e.g. a single item) have no rank
        # correlation: NaN, and scipy's warning about it stays here.
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", stats.ConstantInputWarning)
            with np.errstate(divide="ignore", invalid="ignore"):
                rhos[k] = stats.spearmanr(a, b).statistic
    return ItemDiagnostics(discrimination=means.var(axis=0, ddof=1), split_half_rho=rhos)


NAIVE_BOOT_BLOCK = 64  # resamples drawn at a time by naive_item_bootstrap_halfwidth


def naive_item_bootstrap_halfwidth(
    x: np.ndarray,
    design: Design,
    *,
    n_boot: int = 800,
    seed: int = 0,
    roles: Facets = PAPER_ROLES,
) -> float:
    """95% half-width of a system-mean difference when only items are resampled.

    For every resample of items (judges and runs fixed), the system means; the
    bootstrap standard deviation of each pairwise difference, root-mean-square
    over pairs, times 1.96.
    """
    return naive_halfwidth_from_means(system_item_means(x, design, roles), n_boot=n_boot, seed=seed)


def naive_halfwidth_from_means(means: np.ndarray, *, n_boot: int = 800, seed: int = 0) -> float:
    """:func:`naive_item_bootstrap_halfwidth` from the (systems, items) means; NaN below 2 resamples."""
    n_s, n_i = means.shape
    if n_boot < 2 or n_s < 2:
        return float("nan")  # no spread from fewer than two resamples, no pair from one system
    rng = np.random.default_rng(seed)
    boot = np.empty((n_boot, n_s))
    # Resamples in blocks: a (resamples x items) array of draws is the largest
    # thing here (three of 111 MB for 800 resamples of 17,360 items), a block's
    # is not. Drawn in the same order, the blocks' draws are one draw of all.
    for start in range(0, n_boot, NAIVE_BOOT_BLOCK):
        b = min(NAIVE_BOOT_BLOCK, n_boot - start)
        picks = rng.integers(0, n_i, size=(b, n_i))
        # How often each resample drew each item, then one product: the same means
        # as ``means[:, picks].mean(axis=2)`` without its (systems x b x items) temporary.
        counts = np.bincount((picks + n_i * np.arange(b)[:, None]).ravel(), minlength=b * n_i)
        boot[start : start + b] = counts.reshape(b, n_i).astype(np.float64) @ means.T / n_i
    centered = boot - boot.mean(axis=0)
    cov = centered.T @ centered / (n_boot - 1)
    var_diff = np.diag(cov)[:, None] + np.diag(cov)[None, :] - 2 * cov
    upper = var_diff[np.triu_indices(n_s, 1)]
    return float(stats.norm.ppf(0.975) * np.sqrt(upper.mean()))


def wrong_order_probability(
    fit: GStudy,
    *,
    judges: int,
    items: int | None = None,
    replicates: int = 1,
    top: int = 10,
    draws: int = 4000,
    seed: int = 0,
    roles: Facets = PAPER_ROLES,
) -> float:
    """P(two systems adjacent in the true top ``top`` are returned in the wrong order).

    True system effects are drawn from N(0, max(sigma2_s, 0)) for the study's
    number of systems; each system's observed mean adds an independent error of
    variance sigma2_delta (its interactions with the shared items and judges), so
    a pair with true gap d is inverted with probability Phi(-d / sqrt(2 sigma2_delta))
    (paper appendix, "Rank inversions are near chance for adjacent systems").
    NaN when sigma2_delta <= 0 at these sizes, the rule of :func:`mdd95`.
    """
    sigma_s2 = max(float(fit.sigma2[fit.effects.index(roles.system)]), 0.0)
    n_s = fit.sizes[roles.system]
    items = items if items is not None else fit.sizes[roles.item]
    _, delta, _ = error_variances(
        fit.sigma2, fit.design, roles.sizes(fit.design, items, judges, replicates), obj=roles.system
    )
    if not float(delta) > 0:
        return float("nan")
    rng = np.random.default_rng(seed)
    true = np.sort(rng.normal(0.0, np.sqrt(sigma_s2), size=(draws, n_s)), axis=1)[:, ::-1]
    gaps = -np.diff(true[:, : min(top, n_s)], axis=1)
    scale = np.sqrt(2 * float(delta))
    return float(stats.norm.cdf(-gaps / scale).mean())


def mdd_false_positive_rate(
    fit: GStudy,
    *,
    simulations: int = 200,
    seed: int = 0,
    roles: Facets = PAPER_ROLES,
) -> float:
    """Share of pairs with zero true difference that the MDD rule calls different.

    Whole data sets are simulated from the fitted components (truncated at zero)
    at the study's sizes, with systems 0 and 1 given the same true effect; each is
    refitted and the pair is flagged when its observed difference exceeds the
    refitted MDD at native sizes. A refit without a positive sigma2_delta has
    no MDD (:func:`mdd95`) and is left out; NaN when every refit is.
    """
    design, sizes = fit.design, fit.sizes
    truth = fit.sigma2_truncated
    rng = np.random.default_rng(seed)
    s_axis = design.facets.index(roles.system)
    native = roles.observed(design, sizes)
    hits, tried = 0, 0
    system = frozenset({roles.system})
    without_system = np.where([e == system for e in design.effects], 0.0, truth)
    for _ in range(simulations):
        x = simulate_design(design, sizes, without_system, rng)
        effect = rng.normal(scale=np.sqrt(truth[design.effects.index(system)]), size=sizes[roles.system])
        effect[1] = effect[0]  # the pair under test: zero true difference
        shape = [sizes[f] if f == roles.system else 1 for f in design.facets]
        x = x + effect.reshape(shape)
        refit = fit_gstudy(x, design)
        means = np.moveaxis(x, s_axis, 0).reshape(sizes[roles.system], -1).mean(axis=1)
        mdd = float(mdd95(refit.sigma2, design, native, obj=roles.system))
        if np.isfinite(mdd):
            tried += 1
            hits += bool(abs(means[0] - means[1]) > mdd)
    return hits / tried if tried else float("nan")
