"""G-study: mean squares and variance components of a balanced design from a dense array.

The data are a dense array with one axis per facet of the :class:`~jurymeter.design.Design`
(in ``design.facets`` order); for a nested facet the axis holds its levels within
each level of its nest. Sums of squares are the squared norms of the effect
projections (see :mod:`jurymeter.design`), the components solve
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

from jurymeter.design import Design, Effect
from jurymeter.errors import DesignError


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
        return np.maximum(self.sigma2, 0.0)

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


def mean_squares(x: np.ndarray, design: Design) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Degrees of freedom, sums of squares and mean squares of every effect.

    Parameters
    ----------
    x
        Dense balanced data, one axis per facet in ``design.facets`` order.
    design
        The design.

    Notes
    -----
    :math:`SS_S = \\lVert P_S x \\rVert^2` with
    :math:`P_S = \\sum_{U \\subseteq R(S)} (-1)^{|U|} A_{S \\setminus U}`
    (module docstring of :mod:`jurymeter.design`). The averaging operators are
    commuting orthogonal projections, so the norm expands into the "T terms" of
    Brennan (2001, ch. 3):
    :math:`SS_S = \\sum_{U \\subseteq R(S)} (-1)^{|U|} T_{S \\setminus U}`, with
    :math:`T_A = (N / \\mathrm{cells}(A)) \\sum (\\bar x_A - \\bar x)^2` over the
    ``A``-marginal means. Centring on the grand mean leaves every SS unchanged
    (``P_S`` removes constants) and keeps the T terms small, so their
    differences lose no precision. Each marginal is the mean of the smallest
    marginal already computed that contains it (balanced data: a mean of equal-size
    means is the mean), so ``x`` itself is read twice, not once per effect.
    """
    x = np.asarray(x, dtype=np.float64)
    if x.ndim != len(design.facets):
        msg = f"data have {x.ndim} axes; design {design.facets} needs {len(design.facets)}"
        raise DesignError(msg)
    grand = float(x.mean())
    # A NaN or an infinity anywhere makes the mean non-finite: one pass checks both.
    if not np.isfinite(grand):
        msg = "data must be complete and finite: extract a balanced block first"
        raise DesignError(msg)
    sizes = dict(zip(design.facets, x.shape, strict=True))
    total = x.size
    full = frozenset(design.facets)

    def cells(keep: Effect) -> int:
        return int(np.prod([sizes[f] for f in keep]))

    subsets = {
        effect - frozenset(removed)
        for effect in design.effects
        for r in range(len(design.primary(effect)) + 1)
        for removed in itertools.combinations(sorted(design.primary(effect)), r)
    }
    means: dict[Effect, np.ndarray] = {full: x}
    t_terms: dict[Effect, float] = {frozenset(): 0.0}
    centred = x - grand
    t_terms[full] = float(np.vdot(centred, centred))
    del centred
    for keep in sorted(subsets - {full, frozenset()}, key=cells, reverse=True):
        source = min((k for k in means if keep < k), key=cells)
        drop = tuple(a for a, f in enumerate(design.facets) if f in source and f not in keep)
        means[keep] = means[source].mean(axis=drop, keepdims=True)
        deviation = means[keep] - grand
        t_terms[keep] = float(np.vdot(deviation, deviation)) * total / cells(keep)
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
    df, ss, ms = mean_squares(x, design)
    sizes = dict(zip(design.facets, np.shape(x), strict=True))
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
        grand_mean=float(np.mean(x)),
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

