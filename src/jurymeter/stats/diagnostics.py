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

import itertools
import warnings
import weakref
from dataclasses import dataclass

import numpy as np
from scipy import special

from jurymeter.errors import DesignError
from jurymeter.stats.design import Design, Effect
from jurymeter.stats.dstudy import PAPER_ROLES, Facets, error_variances, mdd95
from jurymeter.stats.gstudy import (
    GStudy,
    components_from_ms,
    finite_mean,
    fit_gstudy,
    simulate_design,
)


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
    one pass over the whole block). A refit is a function of the T terms of
    its ensembles' block (the squared marginal sums of :class:`TermSums`), and
    an ensemble's score is a fixed linear combination of its judges' (their
    mean), so every T term of every partition is a quadratic form in the
    judges' Gram matrix of one marginal of the block: for a set of facets
    ``A`` and ``B = A - {judge}``, with ``M_B`` the block's marginal sums over
    the facets outside ``B`` and the judge (a cells(B) x judges matrix),
    ``T_A = trace(P' M_B' M_B P) / w_A`` when ``A`` holds the judge and
    ``u' M_B' M_B u / w_A`` when not (``P`` the judges x ensembles averaging
    matrix of the partition, ``u = P 1``, ``w_A`` the ensemble block's
    observations per cell of ``A``). So what is kept is, per marginal, the
    Gram matrix (a sum over the chunks' items when ``B`` holds the item, else
    the marginal sums, which add up over chunks); each partition then costs a
    few judges x judges products instead of a pass over the block. Equal to
    refitting every ensemble's array to rounding (``tests/test_diagnostics.py``).
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
        self.n_judges = n_judges
        self.label = design.label(frozenset({roles.system, roles.judge}))
        self.reduced = reduced = _cell_means_design(design)
        rng = np.random.default_rng(seed)
        self.orders = [rng.permutation(n_judges)[: groups * k] for _ in range(partitions)]
        # The T terms a fit of the ensembles' design needs (those of TermSums),
        # and the marginals they are quadratic forms of (judge axis kept, last).
        self._others = tuple(f for f in reduced.facets if f != roles.judge)
        self._terms = _term_sets(reduced)
        self._shift: float | None = None
        self._grams: dict[Effect, np.ndarray] = {}  # bases holding the item: sums of M_B' M_B
        self._sums: dict[Effect, np.ndarray] = {}  # the other bases: M_B, summed over chunks
        self._other_sizes: tuple[int, ...] | None = None
        self._items = 0

    def add(self, x: np.ndarray) -> EnsembleRefits:
        """Add the block's scores of some items (all of them, in chunks)."""
        found = _judge_marginals(np.asarray(x, dtype=np.float64), self.design, self.roles, self._shift)
        if found is None:  # no items
            return self
        shift, rest, items, parts = found
        if self._other_sizes is None:
            self._other_sizes = rest
        elif rest != self._other_sizes:
            msg = f"chunk sizes {np.shape(x)} differ from the first chunk's on axes other than {self.roles.item!r}"
            raise DesignError(msg)
        self._shift = shift
        for base, part in parts.items():
            kept = self._grams if self.roles.item in base else self._sums
            kept[base] = kept[base] + part if base in kept else part
        self._items += items
        return self

    def _sizes(self) -> dict[str, int]:
        if self._other_sizes is None:
            msg = "no data added"
            raise DesignError(msg)
        shape = list(self._other_sizes[:-1])
        shape.insert(self._others.index(self.roles.item), self._items)
        sizes = dict(zip(self._others, shape, strict=True))
        sizes[self.roles.judge] = self.groups
        return {f: sizes[f] for f in self.reduced.facets}

    def components(self) -> np.ndarray:
        """``(partitions, effects)``: the raw components of each partition's ensembles' design."""
        design, judge, sizes = self.reduced, self.roles.judge, self._sizes()
        n = int(np.prod(list(sizes.values())))
        grams = {**self._grams, **{b: m.T @ m for b, m in self._sums.items()}}
        average = np.zeros((len(self.orders), self.n_judges, self.groups))  # P of each partition
        for p, order in enumerate(self.orders):
            average[p, order, np.repeat(np.arange(self.groups), self.k)] = 1.0 / self.k
        weights = average.sum(axis=2)  # u = P 1
        t_terms: dict[Effect, np.ndarray] = {}
        for a in self._terms:
            gram = grams[a - {judge}]
            w = n / int(np.prod([sizes[f] for f in a]))
            if judge in a:
                t_terms[a] = np.einsum("pjg,jk,pkg->p", average, gram, average) / w
            else:
                t_terms[a] = np.einsum("pj,jk,pk->p", weights, gram, weights) / w
        df = np.array([design.df(e, sizes) for e in design.effects], dtype=np.float64)
        if np.any(df <= 0):
            msg = f"the ensembles' design has an effect with no degrees of freedom (sizes {sizes})"
            raise DesignError(msg)
        ss = np.zeros((len(self.orders), len(design.effects)))
        for col, effect in enumerate(design.effects):
            primary = sorted(design.primary(effect))
            for r in range(len(primary) + 1):
                for removed in itertools.combinations(primary, r):
                    ss[:, col] += (-1) ** r * t_terms[effect - frozenset(removed)]
        return components_from_ms(ss / df, design, sizes)

    def check(self, fit: GStudy) -> EnsembleCheck:
        """Observed over predicted sigma2_sj per partition; ``fit`` is the whole block's G-study.

        The prediction is the block's sigma2_sj divided by ``k``; when it is
        not positive there is nothing to compare against and every ratio is NaN.
        """
        predicted = fit.component(self.label) / self.k
        observed = self.components()[:, self.reduced.labels.index(self.label)]
        if not predicted > 0:
            return EnsembleCheck(k=self.k, ratios=np.full(len(observed), np.nan))
        return EnsembleCheck(k=self.k, ratios=observed / predicted)


# The last chunk's judge marginals (:func:`_judge_marginals`): GStudyChunks feeds
# each chunk to an EnsembleRefits per ensemble size, and theirs are the same.
_last_marginals: tuple[weakref.ref[np.ndarray], tuple[object, ...], object] | None = None


def _judge_marginals(
    x: np.ndarray, design: Design, roles: Facets, shift: float | None
) -> tuple[float, tuple[int, ...], int, dict[Effect, np.ndarray]] | None:
    """What :meth:`EnsembleRefits.add` adds for one chunk: the shift, the sizes of the axes other than the item, the items, and per marginal its Gram matrix (marginals holding the item) or its sums.

    The cell means of ``x`` (:func:`_cell_means`) minus ``shift`` (their mean
    when ``None``), with the judge axis last; ``None`` for a chunk with no
    items. The same chunk (the same array object) with the same design, roles
    and shift gives the result of the call before, without computing it again.
    """
    global _last_marginals
    key = (design, roles, shift)
    last = _last_marginals
    if last is not None and last[0]() is x and last[1] == key:
        return last[2]  # type: ignore[return-value]
    cell_means, reduced = _cell_means(x, design)
    others = tuple(f for f in reduced.facets if f != roles.judge)
    z = np.moveaxis(cell_means, reduced.facets.index(roles.judge), -1)  # other facets in order, then judge
    item_axis = others.index(roles.item)
    rest = z.shape[:item_axis] + z.shape[item_axis + 1 :]  # the judge axis included
    if z.size == 0:
        return None
    mean = finite_mean(z)
    shift = mean if shift is None else shift  # any constant: centring keeps the sums of squares small
    sizes = dict(zip(others, z.shape[:-1], strict=True))

    def cells(base: Effect) -> int:
        return int(np.prod([sizes[f] for f in base]))

    bases = _marginal_bases(reduced, roles)
    full = frozenset(others)
    marginals: dict[Effect, np.ndarray] = {full: z - shift}
    for base in sorted(bases - {full}, key=lambda b: (-cells(b), sorted(b))):
        source = min((b for b in marginals if base < b), key=cells)
        drop = tuple(a for a, f in enumerate(others) if f in source and f not in base)
        marginals[base] = marginals[source].sum(axis=drop, keepdims=True)
    parts: dict[Effect, np.ndarray] = {}
    for base in bases:
        m = marginals[base].reshape(-1, z.shape[-1])
        parts[base] = m.T @ m if roles.item in base else m
    found = (shift, rest, z.shape[item_axis], parts)
    _last_marginals = (weakref.ref(x), key, found)
    return found


def _term_sets(design: Design) -> set[Effect]:
    """The facet sets whose T terms a fit of ``design`` needs (those of :class:`TermSums`)."""
    return {
        effect - frozenset(removed)
        for effect in design.effects
        for r in range(len(design.primary(effect)) + 1)
        for removed in itertools.combinations(sorted(design.primary(effect)), r)
    }


def _marginal_bases(design: Design, roles: Facets) -> set[Effect]:
    """The marginals (the judge axis kept) of which every T term of ``design`` is a quadratic form."""
    return {a - {roles.judge} for a in _term_sets(design)}


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


# Elements of the (splits x items) running sums of the split-half check's
# halves (:func:`_half_variances`) at a time (320 KB: a block's stay in cache).
SPLIT_BLOCK_ELEMENTS = 40_000


def item_diagnostics_from_means(means: np.ndarray, *, splits: int = 200, seed: int = 0) -> ItemDiagnostics:
    """:func:`item_diagnostics` from the (systems, items) means (gathered item chunk by item chunk).

    The splits are drawn one by one as before; the halves' discriminations are
    computed for blocks of splits at once (the same numpy reductions, so the
    same values), and each split's Spearman correlation as scipy's
    ``spearmanr`` computes it: average ranks, then ``np.corrcoef`` of the
    ranks. Ranks are integers or halves, so that correlation's sums are exact.
    A split with a constant or NaN discrimination goes to ``spearmanr`` itself
    (its warning and NaN).
    """
    n_s, n_i = means.shape
    if n_s < 4:
        msg = f"split-half item diagnostics need at least 4 systems; the block has {n_s}"
        raise DesignError(msg)
    rng = np.random.default_rng(seed)
    half = n_s // 2
    orders = np.array([rng.permutation(n_s) for _ in range(splits)], dtype=np.intp).reshape(splits, n_s)
    rhos = np.empty(splits)
    step = max(1, SPLIT_BLOCK_ELEMENTS // max(1, n_i))
    for start in range(0, splits, step):
        block = orders[start : start + step]
        a = _half_variances(means, block[:, :half])
        b = _half_variances(means, block[:, half : 2 * half])
        ranks_a, ranks_b = _average_ranks(a), _average_ranks(b)
        for k in range(len(block)):
            rhos[start + k] = _spearman(a[k], b[k], ranks_a[k], ranks_b[k])
    return ItemDiagnostics(discrimination=means.var(axis=0, ddof=1), split_half_rho=rhos)


def _half_variances(means: np.ndarray, halves: np.ndarray) -> np.ndarray:
    """``means[halves].var(axis=1, ddof=1)``: each half's variance over its systems, per item, the same floats.

    numpy's own steps for a reduction over an axis that is not the last: the
    half's rows summed in order, divided by ``n``; the squared deviations summed
    in order, divided by ``n - 1``. Here one row of every half at a time, so the
    (halves x n x items) gather is never made (0.08 against 0.11 CPU-s for the
    200 splits of 100 systems x 2,000 items).
    """
    n = halves.shape[1]
    total = means[halves[:, 0]]
    for k in range(1, n):
        total += means[halves[:, k]]
    mean = total / n
    squares = np.zeros_like(mean)
    for k in range(n):
        deviation = means[halves[:, k]] - mean
        np.multiply(deviation, deviation, out=deviation)
        squares += deviation
    out: np.ndarray = squares / (n - 1)
    return out


def _spearman(a: np.ndarray, b: np.ndarray, ranks_a: np.ndarray, ranks_b: np.ndarray) -> float:
    """``scipy.stats.spearmanr(a, b).statistic`` for two 1-D float arrays and their average ranks (the same float)."""
    if len(a) <= 1 or (a[0] == a).all() or (b[0] == b).all() or np.isnan(a).any() or np.isnan(b).any():
        from scipy import stats

        # Constant discriminations in a half (e.g. a single item) have no rank
        # correlation: NaN, and scipy's warning about it stays here.
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", stats.ConstantInputWarning)
            with np.errstate(divide="ignore", invalid="ignore"):
                return float(stats.spearmanr(a, b).statistic)
    return float(np.corrcoef(np.column_stack((ranks_a, ranks_b)), rowvar=False)[1, 0])


def _average_ranks(x: np.ndarray) -> np.ndarray:
    """Ranks from 1 along the last axis, ties given their mean rank (``scipy.stats.rankdata``'s ``"average"``)."""
    order = np.argsort(x, axis=-1)  # any order of ties: they share one rank
    ordered = np.take_along_axis(x, order, axis=-1)
    new = np.ones(x.shape, dtype=bool)
    new[..., 1:] = ordered[..., 1:] != ordered[..., :-1]  # a NaN row is left to spearmanr
    n = x.shape[-1]
    position = np.broadcast_to(np.arange(n), x.shape)
    start = np.maximum.accumulate(np.where(new, position, 0), axis=-1)  # first position of each tie group
    end = np.flip(np.minimum.accumulate(np.flip(np.where(np.roll(new, -1, axis=-1), position + 1, n), -1), axis=-1), -1)
    end[..., -1] = n
    ranks = np.empty(x.shape)
    np.put_along_axis(ranks, order, (start + 1 + end) / 2, axis=-1)
    return ranks


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
    return float(special.ndtri(0.975) * np.sqrt(upper.mean()))  # scipy.stats.norm.ppf, the same float


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
    return float(special.ndtr(-gaps / scale).mean())  # scipy.stats.norm.cdf, the same floats


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
