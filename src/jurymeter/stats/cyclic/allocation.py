r"""The integer allocation of judge calls under a money budget (the cost-weighted plan's optimizer).

Judge :math:`\ell` costs :math:`c_\ell` per call and adds :math:`v_\ell / N_\ell` to the
variance of the mean of judge means with :math:`N_\ell` calls. Minimizing
:math:`\sum_\ell v_\ell/N_\ell` subject to :math:`\sum_\ell c_\ell N_\ell \le M` gives
:math:`N_\ell \propto \sqrt{v_\ell / c_\ell}` (optimum allocation with costs,
[Cochran1977] ch. 5, with equal stratum weights); the integers start from that
solution rounded down and filled greedily with the money left, and a branch and
bound then proves the integer optimum (:func:`allocate_calls`; past ``MAX_NODES``
nodes it returns the best found and says so).
:func:`jurymeter.stats.cyclic.planner.plan_cost_weighted` lays the calls out.

References
----------
.. [Cochran1977] W. G. Cochran, *Sampling Techniques*, 3rd ed., Wiley, 1977.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from jurymeter.errors import DesignError
from jurymeter.stats.ids import count

# Relative slack for money and objective comparisons (float rounding of prices).
_TOL = 1e-12
# Node limit of the exact allocation search; beyond it the best allocation found is returned.
MAX_NODES = 200_000


def _fill(noise: np.ndarray, prices: np.ndarray, calls: np.ndarray, money: float) -> np.ndarray:
    """Add calls one at a time to the affordable judge with the largest variance drop per unit price."""
    calls = calls.copy()
    while True:
        affordable = prices <= money * (1 + _TOL)
        if not affordable.any():
            return calls
        gain = np.where(affordable, noise / (calls * (calls + 1.0)) / prices, -np.inf)
        best = int(np.argmax(gain))
        calls[best] += 1
        money -= float(prices[best])


def _relaxed(noise: np.ndarray, prices: np.ndarray, budget: float) -> np.ndarray:
    """Continuous optimum with ``N >= 1``: judges below the bound fixed at 1, the rest re-solved."""
    weight = np.sqrt(noise / prices)
    fixed = np.zeros(prices.size, dtype=bool)
    while True:
        money = budget - prices[fixed].sum()
        denom = float(np.sum((prices * weight)[~fixed]))
        cont = np.where(fixed, 1.0, money * weight / denom if denom > 0 else 1.0)
        low = ~fixed & (cont < 1)
        if not low.any():
            return cont
        fixed |= low


def _branch_and_bound(
    noise: np.ndarray, prices: np.ndarray, budget: float, incumbent: np.ndarray, max_nodes: int
) -> tuple[np.ndarray, bool]:
    r"""Exact integer optimum by depth-first search, pruned with the continuous bound.

    The bound for judges ``k..`` with money ``R`` is :math:`(\sum \sqrt{v c})^2 / R`; along one
    judge's count it is convex, so each direction stops at the first count it prunes.
    Returns the best allocation and whether the search finished within ``max_nodes``.
    """
    k_total = prices.size
    root = np.sqrt(noise * prices)
    tail_root = np.append(np.cumsum(root[::-1])[::-1], 0.0)
    tail_price = np.append(np.cumsum(prices[::-1])[::-1], 0.0)
    best_calls = incumbent.copy()
    best = [float(np.sum(noise / incumbent))]
    current = np.zeros(k_total)
    nodes = [0]

    def bound(k: int, money: float) -> float:
        if k == k_total:
            return 0.0
        return tail_root[k] ** 2 / money if money > 0 else np.inf

    def search(k: int, money: float, acc: float) -> bool:
        nodes[0] += 1
        if nodes[0] > max_nodes:
            return False
        if k == k_total - 1:
            last = np.floor(money / prices[k] * (1 + _TOL))
            if last >= 1 and acc + noise[k] / last < best[0] * (1 - _TOL):
                current[k] = last
                best[0] = acc + noise[k] / last
                best_calls[:] = current
            return True
        high = int(np.floor((money - tail_price[k + 1]) / prices[k] * (1 + _TOL)))
        if high < 1:
            return True
        centre = money * np.sqrt(noise[k] / prices[k]) / tail_root[k] if tail_root[k] > 0 else 1.0
        first = min(max(round(centre), 1), high)
        for counts in (range(first, high + 1), range(first - 1, 0, -1)):
            for n_k in counts:
                rest = money - prices[k] * n_k
                if acc + noise[k] / n_k + bound(k + 1, rest) >= best[0] * (1 - _TOL):
                    break
                current[k] = n_k
                if not search(k + 1, rest, acc + noise[k] / n_k):
                    return False
        return True

    finished = search(0, budget, 0.0)
    return best_calls, finished


@dataclass(frozen=True, slots=True)
class CallAllocation:
    r"""Integer calls per judge under a money budget.

    Attributes
    ----------
    calls
        :math:`N_\ell \ge 1` per judge.
    objective
        :math:`\sum_\ell v_\ell / N_\ell`.
    bound
        The same at the continuous optimum (a lower bound on any integer plan).
    optimal
        Whether the branch and bound finished, proving ``calls`` optimal; otherwise the best found.
    """

    calls: np.ndarray
    objective: float
    bound: float
    optimal: bool


def allocate_calls(
    prices: np.ndarray,
    budget: float,
    *,
    noise: np.ndarray | None = None,
    max_nodes: int = MAX_NODES,
) -> CallAllocation:
    r"""Integer calls per judge minimizing :math:`\sum_\ell v_\ell/N_\ell` under a money budget.

    Parameters
    ----------
    prices
        Price per call :math:`c_\ell > 0` of each judge.
    budget
        Money :math:`M`, at least :math:`\sum_\ell c_\ell` (one call per judge).
    noise
        Per-call variance :math:`v_\ell` of each judge (default all 1; all zero is read as all 1).
    max_nodes
        Node limit of the exact search (default ``MAX_NODES``).

    Returns
    -------
    CallAllocation

    Notes
    -----
    The continuous solution is :math:`N_\ell = \lambda\sqrt{v_\ell/c_\ell}` with
    :math:`\sum_\ell c_\ell N_\ell = M` (judges pushed below 1 are fixed at 1 and the rest
    re-solved). Rounded down and filled greedily with the money left, it starts a branch
    and bound that proves the integer optimum; panels up to 10 judges finish in
    milliseconds at thousands of calls.

    >>> allocate_calls(np.array([1.0, 4.0]), 30.0).calls.tolist()
    [10, 5]
    """
    c = np.asarray(prices, dtype=np.float64)
    if c.ndim != 1 or c.size == 0 or not np.all(np.isfinite(c)) or np.any(c <= 0):
        msg = f"prices must be a non-empty vector of finite prices > 0, got {c.tolist()}"
        raise DesignError(msg)
    v = np.ones_like(c) if noise is None else np.asarray(noise, dtype=np.float64)
    if v.shape != c.shape or not np.all(np.isfinite(v)) or np.any(v < 0):
        msg = f"noise must be {c.size} finite value(s) >= 0, got {np.asarray(noise).tolist()}"
        raise DesignError(msg)
    if not np.any(v > 0):
        v = np.ones_like(c)
    if not np.isfinite(budget) or budget < c.sum() * (1 - _TOL):
        msg = f"budget must cover one call of every judge ({c.sum():g}), got {budget!r}"
        raise DesignError(msg)
    max_nodes = count("max_nodes", max_nodes, minimum=1)
    cont = _relaxed(v, c, budget)
    calls = np.maximum(np.floor(cont * (1 + _TOL)), 1.0)
    while float(c @ calls) > budget * (1 + _TOL):  # rounding overshoot: drop from the largest spend
        calls[int(np.argmax(np.where(calls > 1, calls * c, -np.inf)))] -= 1
    calls = _fill(v, c, calls, budget - float(c @ calls))
    calls, optimal = _branch_and_bound(v, c, budget, calls, max_nodes)
    return CallAllocation(
        calls=calls.astype(np.int64),
        objective=float(np.sum(v / calls)),
        bound=float(np.sum(v / cont)),
        optimal=optimal,
    )
