r"""What the next run will measure if it follows a plan: predictive intervals of its MDD95 and E rho^2.

A plan fixes the next study's sizes (items, judges, generations per system).
The MDD95 the next run will report differs from the one predicted tonight for
two reasons, and the interval of a prediction has to hold both:

1. tonight's components are estimates: their uncertainty is that of the
   G-study's own pivotal draws (:func:`jurymeter.stats.bootstrap.resample_components`);
2. the next run's estimate is itself a sample at the planned sizes.

One predictive draw composes the two (a posterior-predictive draw in the
generalized-pivotal sense of Weerahandi 1993). A component draw, truncated at
0 (the truth is a variance), gives the next run's expected mean squares at the
planned sizes, :math:`E[MS'] = C(n')\,\sigma^2` (Brennan 2001, sec. 3.4, the
expected mean squares of a balanced random design). Under the normal random
effects model the next run's mean squares are independent
:math:`E[MS']\,\chi^2_{df'}/df'` (Searle, Casella and McCulloch 1992, sec. 4.5);
its components solve :math:`C(n')\,\hat\sigma^{2\prime} = MS'`, and its MDD95
and E rho^2 follow by the report's own rules (:func:`jurymeter.stats.dstudy.mdd95`,
:func:`jurymeter.stats.dstudy.erho2`) at the planned sizes. The 2.5 and 97.5
percentiles of those draws are the prediction's interval; a realised value
outside it is a surprise at the 5 % level if the model and the plan held.

The point prediction is the quantity at tonight's point estimate and the
planned sizes, the number a D-study prints.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from jurymeter.errors import DesignError
from jurymeter.stats.design import Design
from jurymeter.stats.dstudy import PAPER_ROLES, Facets, erho2, mdd95
from jurymeter.stats.gstudy import components_from_ms
from jurymeter.stats.intervals import percentile_bounds

# The quantities a plan predicts, by the key the G-study report uses for them.
PREDICTED = ("mdd95", "erho2")


@dataclass(frozen=True, slots=True)
class Predicted:
    """One predicted quantity: the D-study's point value and the interval the next run's estimate should fall in.

    ``low``/``high`` are ``None`` when fewer than half the predictive draws
    define the quantity (an MDD whose error variance is <= 0 in most draws);
    ``defined`` is the share of draws that do.
    """

    point: float | None
    low: float | None
    high: float | None
    defined: float

    def contains(self, value: float) -> bool | None:
        """Whether ``value`` is inside the interval (``None``: the interval does not exist)."""
        if self.low is None or self.high is None:
            return None
        return self.low <= value <= self.high


def planned_sizes(design: Design, sizes: Mapping[str, int], planned: Mapping[str, int]) -> dict[str, int]:
    """The next study's sizes of every facet of ``design``: ``planned`` where given, else tonight's ``sizes``.

    Raises
    ------
    DesignError
        ``planned`` names a facet the design does not have, or a size below 2
        (an effect without degrees of freedom cannot be estimated).
    """
    unknown = sorted(set(planned) - set(design.facets))
    if unknown:
        msg = f"the plan sizes facets {unknown} that the fitted design {design.facets} does not have"
        raise DesignError(msg)
    out = {f: int(planned.get(f, sizes[f])) for f in design.facets}
    small = {f: n for f, n in out.items() if n < 2}
    if small:
        msg = f"planned sizes {small}: every facet needs at least 2 levels to be estimated again"
        raise DesignError(msg)
    return out


def predictive_components(
    component_draws: np.ndarray, design: Design, planned: Mapping[str, int], rng: np.random.Generator
) -> np.ndarray:
    r"""``(n_draws, n_effects)`` draws of the next run's estimated components at the ``planned`` sizes.

    Each row of ``component_draws`` (tonight's uncertainty), truncated at 0, is
    the truth of one draw; the next run's mean squares are
    :math:`(C(n')\sigma^2)\,\chi^2_{df'}/df'` and its estimates
    :math:`C(n')^{-1} MS'` (module docstring).
    """
    truth = np.maximum(np.asarray(component_draws, dtype=np.float64), 0.0)
    ems = design.ems_matrix(planned)
    expected = truth @ ems.T
    df = np.array([design.df(e, planned) for e in design.effects], dtype=np.float64)
    ms = expected * rng.chisquare(df, size=expected.shape) / df
    return components_from_ms(ms, design, planned)


def predict_plan(
    sigma2: np.ndarray,
    component_draws: np.ndarray,
    design: Design,
    planned: Mapping[str, int],
    *,
    roles: Facets = PAPER_ROLES,
    seed: int = 0,
    level: float = 0.95,
) -> dict[str, Predicted]:
    """The next run's MDD95 and E rho^2 at the ``planned`` sizes: point (tonight's estimate) and predictive interval.

    Parameters
    ----------
    sigma2 : numpy.ndarray
        Tonight's raw components, ``design.effects`` order.
    component_draws : numpy.ndarray
        ``(n_draws, n_effects)`` draws of them (the G-study's pivotal draws).
    design : Design
        The fitted (balanced) design; the next run is assumed to have it too.
    planned : Mapping[str, int]
        Every facet's size in the next run (:func:`planned_sizes`).
    roles, seed, level
        The D-study roles, the seed of the sampling step, the interval's level.

    Returns
    -------
    dict
        :data:`PREDICTED` keys to :class:`Predicted`.
    """
    rng = np.random.default_rng(seed)
    native = roles.observed(design, planned)
    next_run = predictive_components(component_draws, design, planned, rng)
    point = {"mdd95": mdd95(sigma2, design, native), "erho2": erho2(sigma2, design, native)}
    draws = {"mdd95": mdd95(next_run, design, native), "erho2": erho2(next_run, design, native)}
    out: dict[str, Predicted] = {}
    for key in PREDICTED:
        values = draws[key]
        finite = values[np.isfinite(values)]
        defined = float(finite.size / values.size) if values.size else 0.0
        value = float(point[key])
        low = high = None
        if finite.size and defined >= 0.5:
            lo, hi = percentile_bounds(finite, level)
            low, high = float(lo), float(hi)
        out[key] = Predicted(point=value if np.isfinite(value) else None, low=low, high=high, defined=defined)
    return out


def cheapest_crossed(
    sigma2: np.ndarray,
    design: Design,
    sizes: Mapping[str, int],
    *,
    max_items: int,
    max_judges: int,
    target_mdd: float | None = None,
    target_erho2: float | None = None,
    prices: Sequence[float] | None = None,
    roles: Facets = PAPER_ROLES,
) -> tuple[int, int] | None:
    r"""The crossed design with the fewest judge calls whose D-study reaches the target: ``(items, judges)``.

    ``prices``: the price of a call to each of the ``max_judges`` candidate judges. The
    cheapest design is then the one of least money: the D-study does not tell judges
    apart, so ``n_j`` judges are the ``n_j`` cheapest, and a design costs
    :math:`n_s n_i \sum_{k \le n_j} p_{(k)}` (the iso-cost trade-off of the paper's
    appendix, "Minimising :math:`\sigma^2_\delta` subject to cost", turned round: the
    least cost that reaches the target).

    Every ``(n_i, n_j)`` with ``2 <= n_i <= max_items`` and ``2 <= n_j <= max_judges``
    (a run of one judge could not be measured as the plan: its G-study has no
    judge facet; ``n_j`` is 1 when tonight's design has none either) is evaluated at
    tonight's components (the D-study of Brennan 2001, ch. 4); the cost of a
    crossed plan is :math:`n_s n_i n_j` calls, so the cheapest is the smallest
    :math:`n_i n_j` reaching ``MDD95 <= target_mdd`` or ``E rho^2 >= target_erho2``
    (ties: fewer judges, the dearer facet to add in practice). Other facets
    keep tonight's sizes. ``None`` when no such design reaches it.

    Raises
    ------
    DesignError
        Neither or both targets, or a bound below its minimum.
    """
    if (target_mdd is None) == (target_erho2 is None):
        msg = "give one target: an MDD95 or an E rho^2"
        raise DesignError(msg)
    judged = roles.judge in design.facets
    least_judges = 2 if judged else 1
    if max_items < 2 or max_judges < least_judges:
        msg = (f"a crossed plan needs at least 2 items and {least_judges} judge{'s' if judged else ''} "
               f"(got {max_items} and {max_judges})")
        raise DesignError(msg)
    items = np.arange(2, max_items + 1, dtype=np.float64)[:, None]
    judges = np.arange(least_judges, (max_judges if judged else 1) + 1, dtype=np.float64)[None, :]
    n: dict[str, np.ndarray | float] = {f: float(sizes[f]) for f in design.facets if f != roles.system}
    n[roles.item] = items
    if judged:
        n[roles.judge] = judges
    grid = np.asarray(sigma2, dtype=np.float64)
    if target_mdd is not None:
        reaches = np.nan_to_num(mdd95(grid, design, n), nan=np.inf) <= target_mdd
    else:
        reaches = np.nan_to_num(erho2(grid, design, n), nan=-np.inf) >= float(target_erho2 or 0.0)
    reaches = np.broadcast_to(reaches, (items.shape[0], judges.shape[1]))
    if not reaches.any():
        return None
    if prices is not None:
        if len(prices) != max_judges or not all(np.isfinite(p) and p >= 0 for p in prices):
            msg = f"prices must be {max_judges} numbers >= 0, one per candidate judge; got {list(prices)!r}"
            raise DesignError(msg)
        cheapest = np.cumsum(np.sort(np.asarray(prices, dtype=np.float64)))  # the k cheapest judges' price
        per_item = cheapest[judges.astype(int) - 1] if judged else cheapest[:1][None, :]
        calls = np.where(reaches, items * per_item, np.inf)
    else:
        calls = np.where(reaches, items * judges, np.inf)
    best = np.argwhere(calls == calls.min())
    i, j = min(best.tolist(), key=lambda ij: (ij[1], ij[0]))
    return int(items[i, 0]), int(judges[0, j])
