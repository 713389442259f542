"""G-study: mean squares and variance components of a balanced design from a dense array.

The data are a dense array with one axis per facet of the :class:`~jurymeter.stats.design.Design`
(in ``design.facets`` order); for a nested facet the axis holds its levels within
each level of its nest. Sums of squares are the squared norms of the effect
projections (see :mod:`jurymeter.stats.design`), the components solve
``E[MS] = C sigma2`` exactly (method of moments / ANOVA estimator; paper
``ask-which-not-how-good``, appendix "We estimate components by expected mean
squares on the complete crossed block"). Raw components can be negative; shares
are truncated at zero, as the paper does.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from jurymeter.errors import DesignError
from jurymeter.stats.design import Design, Effect


@dataclass(frozen=True)
class GStudy:
    """A fitted G-study.

    Attributes
    ----------
    design
        The design.
    sizes
        Levels per facet.
    effects
        Effect labels, in the order of every array below.
    df, ss, ms
        Degrees of freedom, sums of squares and mean squares per effect.
    sigma2
        Raw variance components (may be negative).
    grand_mean
        Mean of all observations.
    """

    design: Design
    sizes: dict[str, int]
    effects: tuple[str, ...]
    df: np.ndarray
    ss: np.ndarray
    ms: np.ndarray
    sigma2: np.ndarray
    grand_mean: float

    @property
    def sigma2_truncated(self) -> np.ndarray:
        truncated: np.ndarray = np.maximum(self.sigma2, 0.0)
        return truncated

    @property
    def shares(self) -> np.ndarray:
        """Share of total variance per effect, components truncated at zero first."""
        positive = self.sigma2_truncated
        total = positive.sum()
        return positive / total if total > 0 else np.zeros_like(positive)

    def component(self, label: str) -> float:
        """Raw component of an effect by label (``"sj"``, ``"r:sij"``)."""
        return float(self.sigma2[self.effects.index(label)])

    def components(self) -> dict[str, float]:
        return {f"sigma2_{e.replace(':', '_')}": float(v) for e, v in zip(self.effects, self.sigma2, strict=True)}


# Elements of x centred at a time by mean_squares: its temporaries stay this
# size (8 MB a copy) however large the block.
TERM_CHUNK_ELEMENTS = 1_000_000


class TermSums:
    r"""The T terms of :func:`mean_squares`, accumulated over chunks of one facet's levels.

    Data may arrive in chunks along the axis of ``facet`` (by default the first
    facet nested in no other; the items of ``s x i x j`` are not: chunks along
    any such facet work). A T term of a facet set containing ``facet`` is a sum
    over its levels, so the chunks' terms add up; any other is a function of
    marginal sums, which add up over chunks and are squared at the end.
    :func:`mean_squares` is this over chunks of one array.

    Notes
    -----
    With marginal sums :math:`S_A` over the facets outside ``A``, each the sum of
    :math:`w_A = N / \mathrm{cells}(A)` observations, and a shift :math:`c`
    (the first chunk's mean; ``P_S`` removes constants, so SS does not depend on
    it, and centring near the grand mean keeps the T terms small),
    :math:`T_A = \sum (S_A - c\,w_A)^2 / w_A`.
    """

    def __init__(self, design: Design, facet: str | None = None) -> None:
        self.design = design
        self.facet = facet if facet is not None else next(f for f in design.facets if not design.nests[f])
        self.axis = design.facets.index(self.facet)
        full = frozenset(design.facets)
        subsets = {
            effect - frozenset(removed)
            for effect in design.effects
            for r in range(len(design.primary(effect)) + 1)
            for removed in itertools.combinations(sorted(design.primary(effect)), r)
        }
        self._subsets = subsets - {full, frozenset()}
        self.shift: float | None = None
        self.levels = 0  # levels of ``facet`` seen
        self.other_sizes: tuple[int, ...] | None = None
        self._inner: dict[Effect, float] = {full: 0.0}  # T terms of sets containing ``facet``
        self._outer: dict[Effect, np.ndarray] = {}  # marginal sums of the other sets
        self._total = 0.0  # sum of (x - shift)

    def add(self, x: np.ndarray) -> TermSums:
        """Add a chunk: the data of some levels of ``facet`` (all of them, any number of times)."""
        x = np.asarray(x, dtype=np.float64)
        design = self.design
        if x.ndim != len(design.facets):
            msg = f"data have {x.ndim} axes; design {design.facets} needs {len(design.facets)}"
            raise DesignError(msg)
        others = x.shape[: self.axis] + x.shape[self.axis + 1 :]
        if self.other_sizes is None:
            self.other_sizes = others
        elif others != self.other_sizes:
            msg = f"chunk sizes {x.shape} differ from the first chunk's on axes other than {self.facet!r}"
            raise DesignError(msg)
        if x.size == 0:
            return self
        mean = finite_mean(x)
        if self.shift is None:
            self.shift = mean
        sizes = dict(zip(design.facets, x.shape, strict=True))
        full = frozenset(design.facets)

        def cells(keep: Effect) -> int:
            return int(np.prod([sizes[f] for f in keep]))

        centred = x - self.shift
        self._total += float(centred.sum())
        self._inner[full] += float(np.vdot(centred, centred))
        means: dict[Effect, np.ndarray] = {full: centred}
        for keep in sorted(self._subsets, key=cells, reverse=True):
            source = min((k for k in means if keep < k), key=cells)
            drop = tuple(a for a, f in enumerate(design.facets) if f in source and f not in keep)
            means[keep] = means[source].mean(axis=drop, keepdims=True)
            weight = x.size / cells(keep)  # observations per cell of ``keep``
            if self.facet in keep:
                self._inner[keep] = self._inner.get(keep, 0.0) + float(np.vdot(means[keep], means[keep])) * weight
            else:
                sums = means[keep] * weight
                self._outer[keep] = self._outer[keep] + sums if keep in self._outer else sums
        self.levels += x.shape[self.axis]
        return self

    @property
    def sizes(self) -> dict[str, int]:
        """Levels per facet of the data added so far."""
        if self.other_sizes is None:
            msg = "no data added"
            raise DesignError(msg)
        shape = list(self.other_sizes)
        shape.insert(self.axis, self.levels)
        return dict(zip(self.design.facets, shape, strict=True))

    @property
    def grand_mean(self) -> float:
        n = int(np.prod(list(self.sizes.values())))
        return float((self.shift or 0.0) + self._total / n)

    def mean_squares(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Degrees of freedom, sums of squares and mean squares of every effect (as :func:`mean_squares`)."""
        design, sizes = self.design, self.sizes
        n = int(np.prod(list(sizes.values())))
        if n == 0:
            msg = "data must be complete and finite: extract a balanced block first (no observations)"
            raise DesignError(msg)

        def cells(keep: Effect) -> int:
            return int(np.prod([sizes[f] for f in keep]))

        t_terms: dict[Effect, float] = dict(self._inner)
        t_terms[frozenset()] = self._total**2 / n
        for keep, sums in self._outer.items():
            t_terms[keep] = float(np.vdot(sums, sums)) / (n / cells(keep))
        dfs, sss = [], []
        for effect in design.effects:
            primary = sorted(design.primary(effect))
            ss = 0.0
            for r in range(len(primary) + 1):
                for removed in itertools.combinations(primary, r):
                    ss += (-1) ** r * t_terms[effect - frozenset(removed)]
            sss.append(ss)
            dfs.append(design.df(effect, sizes))
        df = np.asarray(dfs, dtype=np.float64)
        ss_all = np.asarray(sss)
        with np.errstate(divide="ignore", invalid="ignore"):
            ms = np.where(df > 0, ss_all / df, np.nan)
        return df, ss_all, ms


def term_sums(x: np.ndarray, design: Design, facet: str | None = None) -> TermSums:
    """:class:`TermSums` of a whole array, added in chunks of :data:`TERM_CHUNK_ELEMENTS` elements."""
    terms = TermSums(design, facet)
    x = np.asarray(x)
    if x.ndim != len(design.facets):
        terms.add(x)  # raises the shape error
    n_levels = x.shape[terms.axis]
    step = max(1, TERM_CHUNK_ELEMENTS // max(1, x.size // max(1, n_levels)))
    if step >= n_levels:
        return terms.add(x)
    lead = (slice(None),) * terms.axis
    for start in range(0, n_levels, step):
        terms.add(x[(*lead, slice(start, start + step))])  # a view: only add's centred copy is made
    return terms


def mean_squares(x: np.ndarray, design: Design) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    r"""Degrees of freedom, sums of squares and mean squares of every effect.

    Parameters
    ----------
    x
        Dense balanced data, one axis per facet in ``design.facets`` order.
    design
        The design.

    Notes
    -----
    :math:`SS_S = \lVert P_S x \rVert^2` with
    :math:`P_S = \sum_{U \subseteq R(S)} (-1)^{|U|} A_{S \setminus U}`
    (module docstring of :mod:`jurymeter.stats.design`). The averaging operators are
    commuting orthogonal projections, so the norm expands into the "T terms" of
    Brennan (2001, ch. 3):
    :math:`SS_S = \sum_{U \subseteq R(S)} (-1)^{|U|} T_{S \setminus U}`, with
    :math:`T_A = (N / \mathrm{cells}(A)) \sum (\bar x_A - \bar x)^2` over the
    ``A``-marginal means. Centring on the grand mean leaves every SS unchanged
    (``P_S`` removes constants) and keeps the T terms small, so their
    differences lose no precision. Each marginal is the mean of the smallest
    marginal already computed that contains it (balanced data: a mean of equal-size
    means is the mean), so ``x`` itself is read twice, not once per effect.
    The terms are summed over chunks of one facet's levels (:func:`term_sums`,
    centred on the first chunk's mean, the grand mean when ``x`` is one chunk),
    so the centred copy is chunk-sized however large ``x`` is.
    """
    return term_sums(x, design).mean_squares()


def components_from_ms(ms: np.ndarray, design: Design, sizes: Mapping[str, int]) -> np.ndarray:
    """Solve ``E[MS] = C sigma2`` for the components; ``ms`` may be (..., n_effects)."""
    return np.linalg.solve(design.ems_matrix(sizes), np.asarray(ms).T).T


def fit_gstudy(x: np.ndarray, design: Design) -> GStudy:
    """Variance components of a balanced design by expected mean squares.

    Raises
    ------
    DesignError
        When an effect has no degrees of freedom (a facet with one level): drop
        that facet from the design instead.
    """
    return fit_terms(term_sums(x, design))


def fit_terms(terms: TermSums) -> GStudy:
    """:func:`fit_gstudy` from accumulated :class:`TermSums` (data added in chunks)."""
    design = terms.design
    df, ss, ms = terms.mean_squares()
    sizes = terms.sizes
    if np.any(df <= 0):
        flat = [design.label(e) for e, d in zip(design.effects, df, strict=True) if d <= 0]
        msg = (
            f"effects {flat} have no degrees of freedom (a facet has one level: "
            f"sizes {sizes}); drop that facet from the design"
        )
        raise DesignError(msg)
    sigma2 = components_from_ms(ms, design, sizes)
    return GStudy(
        design=design,
        sizes=sizes,
        effects=design.labels,
        df=df,
        ss=ss,
        ms=ms,
        sigma2=sigma2,
        grand_mean=terms.grand_mean,
    )


def simulate_design(
    design: Design,
    sizes: Mapping[str, int],
    sigma2: Mapping[str, float] | np.ndarray,
    rng: np.random.Generator,
    *,
    grand_mean: float = 0.0,
) -> np.ndarray:
    """Draw one balanced data set from the random-effects model of ``design``.

    Every effect contributes an independent normal draw per level combination,
    with variance ``sigma2`` (by label, or a vector in ``design.effects`` order).
    The reference data of the tests and of the MDD false-positive check.
    """
    values = (
        [float(sigma2[design.label(e)]) for e in design.effects]
        if isinstance(sigma2, Mapping)
        else [float(v) for v in np.asarray(sigma2)]
    )
    x = np.full([sizes[f] for f in design.facets], float(grand_mean))
    for effect, variance in zip(design.effects, values, strict=True):
        shape = [sizes[f] if f in effect else 1 for f in design.facets]
        x = x + rng.normal(scale=np.sqrt(max(variance, 0.0)), size=shape)
    return x


def finite_mean(x: np.ndarray) -> float:
    """The mean of a non-empty block's scores; :class:`DesignError` when a score is missing or infinite.

    A NaN or an infinity anywhere makes the mean non-finite: one pass checks both.
    """
    mean = float(x.mean())
    if not np.isfinite(mean):
        msg = "data must be complete and finite: extract a balanced block first"
        raise DesignError(msg)
    return mean
