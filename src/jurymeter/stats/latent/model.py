r"""The latent-scale model's data and layout: cell counts, links, and which terms a design fits.

Model (cumulative link with crossed random intercepts; Agresti 2010, ch. 10;
Christensen's ``ordinal::clmm``; for :math:`K = 2` the binomial GLMM of
``lme4::glmer``, Bates et al. 2015): a judgment of system ``s`` on item ``i``
by judge ``j`` falls in category ``k`` of ``K`` ordered ones with

.. math::

    P(Y \le k \mid \eta) = F(\theta_k - \eta), \qquad
    \eta = u_s + u_i + u_j + u_{si} + u_{sj} + u_{ij}, \qquad
    u_t \sim N(0, \sigma^2_t)\ \text{independent},

``F`` the logistic or standard normal distribution function. With ``K = 2``,
:math:`P(Y = 1) = F(\eta - \theta_1)`: glmer's intercept is :math:`-\theta_1`.
The latent response is :math:`Y^* = \eta + \varepsilon`, :math:`\varepsilon \sim F`,
so the residual (``s:i:j``, confounded with error) has the link's variance,
:math:`\pi^2/3` (logit) or 1 (probit) (Nakagawa and Schielzeth 2010, sec. 3;
Brennan 2001, sec. 3.4 for the G-study effects).

The data are cell counts: one row per (system, item, judge) cell with the
number of judgments in each category, so replicates of a cell, however many,
add to its counts and the fit's cost depends on the cells only.

Which terms a design fits (:func:`design_terms`): a facet with one level leaves
the design (:mod:`jurymeter.stats.fitted_design`'s rule; one judge gives
``s x i``); a two-way interaction is fitted when both its facets are present
and it is not the cell itself (the third facet present) or some cell has two
or more judgments (otherwise it is confounded with the residual).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Literal

import numpy as np

from jurymeter.errors import DesignError

Link = Literal["logit", "probit"]
LINKS: tuple[Link, ...] = ("logit", "probit")
FACETS = ("s", "i", "j")
# The six terms in a fixed order, as glmer's formula lists them.
TERMS = ("s", "i", "j", "si", "sj", "ij")


def link_variance(link: Link) -> float:
    r"""The latent residual variance of ``link``: :math:`\pi^2/3` (logistic) or 1 (normal).

    Nakagawa and Schielzeth (2010), sec. 3 ("distribution-specific variance").
    """
    return math.pi**2 / 3 if link == "logit" else 1.0


def check_link(link: str) -> Link:
    """``link`` as a :data:`Link`, or a :class:`DesignError` naming what is allowed."""
    if link not in LINKS:
        msg = f"The 'link' parameter of fit_latent must be one of {list(LINKS)}. Got {link!r} instead."
        raise DesignError(msg)
    return link


@dataclass(frozen=True)
class LatentCells:
    """Judgments as counts per (system, item, judge) cell.

    Parameters
    ----------
    system, item, judge : numpy.ndarray
        Integer codes (0-based) of each cell's levels, length ``C``. Several
        rows with the same codes are one cell (their counts add).
    counts : numpy.ndarray
        ``(C, K)`` non-negative integer counts of the ``K`` ordered categories
        (``K = 2``: column 0 the failures, column 1 the successes).
    values : numpy.ndarray, optional
        The score of each category (default ``0 .. K-1``), used on the score scale only.
    """

    system: np.ndarray
    item: np.ndarray
    judge: np.ndarray
    counts: np.ndarray
    values: np.ndarray = field(default_factory=lambda: np.array([]))

    def __post_init__(self) -> None:
        counts = np.asarray(self.counts)
        if counts.ndim != 2 or counts.shape[1] < 2:
            msg = f"counts must be a (cells, categories >= 2) array; got shape {counts.shape}"
            raise DesignError(msg)
        n = counts.shape[0]
        for name in ("system", "item", "judge"):
            codes = np.asarray(getattr(self, name))
            if codes.shape != (n,) or not np.issubdtype(codes.dtype, np.integer) or (n and codes.min() < 0):
                msg = f"{name} must be {n} non-negative integer codes; got shape {codes.shape}, dtype {codes.dtype}"
                raise DesignError(msg)
        if not np.issubdtype(counts.dtype, np.integer) and not np.all(counts == np.round(counts)):
            msg = "counts must be whole numbers"
            raise DesignError(msg)
        if counts.size and counts.min() < 0:
            msg = "counts must be >= 0"
            raise DesignError(msg)
        values = np.asarray(self.values, dtype=np.float64)
        if values.size == 0:
            values = np.arange(counts.shape[1], dtype=np.float64)
        if values.shape != (counts.shape[1],) or not np.all(np.diff(values) > 0):
            msg = f"values must be {counts.shape[1]} increasing category scores; got {self.values!r}"
            raise DesignError(msg)
        object.__setattr__(self, "values", values)

    @classmethod
    def from_records(
        cls, system: np.ndarray, item: np.ndarray, judge: np.ndarray, category: np.ndarray, n_categories: int
    ) -> LatentCells:
        """Cells from one row per judgment (``category`` 0-based): counted with one ``bincount``."""
        system, item, judge, category = (np.asarray(a, dtype=np.int64) for a in (system, item, judge, category))
        if category.size and (category.min() < 0 or category.max() >= n_categories):
            msg = f"category codes must be in 0..{n_categories - 1}"
            raise DesignError(msg)
        dims = (int(system.max()) + 1, int(item.max()) + 1, int(judge.max()) + 1)
        flat = np.ravel_multi_index((system, item, judge), dims)
        present, cell = np.unique(flat, return_inverse=True)
        counts = np.bincount(cell * n_categories + category, minlength=present.size * n_categories)
        s, i, j = np.unravel_index(present, dims)
        return cls(s, i, j, counts.reshape(present.size, n_categories))

    @property
    def n_records(self) -> int:
        return int(np.asarray(self.counts).sum())

    @property
    def n_categories(self) -> int:
        return int(np.asarray(self.counts).shape[1])


@dataclass(frozen=True)
class Layout:
    """The cells on a dense cube ``(L, X, Y)``: ``L`` the facet with most levels, then the other two.

    A facet with one level (or absent) has size 1. ``terms`` maps each fitted
    term of :data:`TERMS` to its position in the six-slot parameter vector;
    ``flat`` is each aggregated cell's index in the cube, ``counts`` its
    ``(cells, K)`` counts.
    """

    order: tuple[str, str, str]  # facets on the cube's axes L, X, Y
    dims: tuple[int, int, int]
    flat: np.ndarray
    counts: np.ndarray
    fitted: tuple[str, ...]
    facets: tuple[str, ...]
    levels: dict[str, int]

    @property
    def slots(self) -> tuple[str, ...]:
        """The cube's six terms in solver order: ``L, X, Y, LX, LY, XY`` as design labels."""
        lab = _label
        l_, x, y = self.order
        return (l_, x, y, lab(l_, x), lab(l_, y), lab(x, y))


def _label(a: str, b: str) -> str:
    return "".join(f for f in FACETS if f in (a, b))


def design_terms(cells: LatentCells) -> Layout:
    """The design the cells support and their cube (module docstring, "Which terms").

    Raises
    ------
    DesignError
        Fewer than two systems or two items, or no judgment at all.
    """
    codes = {f: np.asarray(getattr(cells, n), dtype=np.int64) for f, n in zip(FACETS, ("system", "item", "judge"), strict=True)}
    counts = np.asarray(cells.counts, dtype=np.float64)
    keep = counts.sum(axis=1) > 0
    if not keep.any():
        msg = "the cells hold no judgment"
        raise DesignError(msg)
    codes = {f: c[keep] for f, c in codes.items()}
    counts = counts[keep]
    # Re-code to the levels present, so an absent level is no parameter.
    levels: dict[str, int] = {}
    for f in FACETS:
        present, codes[f] = np.unique(codes[f], return_inverse=True)
        levels[f] = int(present.size)
    for f, name in (("s", "system"), ("i", "item")):
        if levels[f] < 2:
            msg = f"the cells have {levels[f]} {name}(s); a G-study of systems needs at least 2 {name}s"
            raise DesignError(msg)
    facets = tuple(f for f in FACETS if levels[f] >= 2)
    order_ = sorted(FACETS, key=lambda f: (-levels[f], FACETS.index(f)))
    order = (order_[0], order_[1], order_[2])
    dims = (levels[order[0]], levels[order[1]], levels[order[2]])
    flat_all = np.ravel_multi_index(tuple(codes[f] for f in order), dims)
    flat, inverse = np.unique(flat_all, return_inverse=True)
    k = counts.shape[1]
    merged = np.zeros((flat.size, k))
    np.add.at(merged, inverse, counts)
    replicated = bool(merged.sum(axis=1).max() >= 2)
    fitted: list[str] = list(facets)
    for a, b in (("s", "i"), ("s", "j"), ("i", "j")):
        third = next(f for f in FACETS if f not in (a, b))
        if a in facets and b in facets and (third in facets or replicated):
            fitted.append(a + b)
    return Layout(order, dims, flat, merged, tuple(fitted), facets, levels)
