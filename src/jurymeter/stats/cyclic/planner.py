r"""Judge assignment plans: CyclicJudge round robin and a cost-weighted plan.

Round robin ([Zhu2026] section 3.3, strategy C). Every generation of every item
is scored by one judge of the panel of :math:`K` judges. Items are shuffled with
the seed, their generations laid out item after item, and the judges assigned in
a cycle that carries over from one item to the next: cell :math:`t` gets judge
:math:`(s + t) \bmod K`, with the start :math:`s` drawn from the same seed. So for
every system each judge gets :math:`\lfloor nm/K \rfloor` or
:math:`\lceil nm/K \rceil` calls, an item's :math:`\min(m, K)` generations get
distinct judges, and when :math:`K` divides :math:`nm` the mean of the plan's
scores is exactly the panel mean over the same generations (eq. 30). With one
generation per item the shuffle keeps the cycle from lining up with any ordering
of the dataset (section 3.3); it is applied for every :math:`m`, since the cycle
carries over between items whenever :math:`K` does not divide :math:`m`. All
systems get the same assignment (the same judge on the same item and
generation), so differences between systems are paired on judges.

Cost-weighted plan (beyond the paper; its limitations section names per-judge
prices as future work). Judge :math:`\ell` costs :math:`c_\ell` per call. Every item
gets the same calls, :math:`b_\ell \ge 1` from judge :math:`\ell`, each on its own
generation (a balanced design, as the paper's allocation analysis assumes). The
estimator is the mean of the judge means, :math:`\hat\mu = K^{-1}\sum_\ell \bar X_\ell`,
unbiased for the panel mean whatever the :math:`b_\ell` (the offsets sum to zero);
the plain mean of the scores is not, once the counts differ. In general, for
coefficients :math:`a_r = 1/(K N_{\ell(r)})` on the plan's rows :math:`r`
(:math:`N_\ell` the judge's calls),

.. math::

    \mathrm{Var}(\hat\mu) = \sigma^2_\alpha \sum_i \Big(\sum_{r \in i} a_r\Big)^2
    + \sigma^2_\beta \sum_{(i,g)} \Big(\sum_{r \in (i,g)} a_r\Big)^2
    + \sum_r a_r^2 \sigma^2_{\varepsilon,\ell(r)}

(:func:`plan_variance`); with the same calls on every item it is
:math:`\sigma^2_\alpha/n + (nK^2)^{-1}\sum_\ell v_\ell / b_\ell`,
:math:`v_\ell = \sigma^2_\beta + \sigma^2_{\varepsilon,\ell}`. Minimizing
:math:`\sum_\ell v_\ell/b_\ell` subject to :math:`\sum_\ell c_\ell b_\ell \le M/n` gives
:math:`b_\ell \propto \sqrt{v_\ell / c_\ell}` (optimum allocation with costs,
[Cochran1977] ch. 5, with equal stratum weights :math:`1/K`); the integers start from
that solution rounded down and filled greedily with the money left, and a branch and
bound then proves the integer optimum (:func:`allocate_calls`; past ``MAX_NODES``
nodes it returns the best found and says so). The uniform plan is the round robin
with every judge :math:`\lfloor M / (n \sum_\ell c_\ell) \rfloor` times on every item.

References
----------
.. [Zhu2026] Z. Zhu et al., "CyclicJudge: Mitigating Judge Bias Efficiently in
   LLM-based Evaluation", 2026 (``papers/cyclicjudge.txt``).
.. [Cochran1977] W. G. Cochran, *Sampling Techniques*, 3rd ed., Wiley, 1977.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import polars as pl

from jurymeter.errors import DesignError
from jurymeter.stats.cyclic.allocation import _TOL

# The allocation lives in allocation.py; its public names stay importable from here.
from jurymeter.stats.cyclic.allocation import MAX_NODES as MAX_NODES
from jurymeter.stats.cyclic.allocation import CallAllocation as CallAllocation
from jurymeter.stats.cyclic.allocation import allocate_calls as allocate_calls
from jurymeter.stats.cyclic.components import VarianceComponents
from jurymeter.stats.ids import count, id_list

PLAN_SCHEMA = {
    "system_id": pl.Utf8,
    "item_id": pl.Utf8,
    "generation": pl.Int64,
    "judge_id": pl.Utf8,
}


def _layout(order: np.ndarray, total: int) -> tuple[np.ndarray, np.ndarray]:
    """Item index and generation of ``total`` cells, items in ``order``, spread evenly.

    The first ``total mod n`` items of ``order`` get one generation more.
    """
    n = len(order)
    per = np.full(n, total // n, dtype=np.int64)
    per[: total % n] += 1
    item = np.repeat(order, per)
    starts = np.repeat(np.cumsum(per) - per, per)
    generation = np.arange(total, dtype=np.int64) - starts
    return item, generation


def _frame(
    systems: tuple[str, ...],
    items: tuple[str, ...],
    judges: tuple[str, ...],
    item: np.ndarray,
    generation: np.ndarray,
    judge: np.ndarray,
) -> pl.DataFrame:
    """The same assignment for every system, rows in assignment order within each system."""
    one = pl.DataFrame(
        {
            "item_id": np.asarray(items, dtype=object)[item].tolist(),
            "generation": generation,
            "judge_id": np.asarray(judges, dtype=object)[judge].tolist(),
        },
        schema={k: v for k, v in PLAN_SCHEMA.items() if k != "system_id"},
    )
    sys_frame = pl.DataFrame({"system_id": list(systems)}, schema={"system_id": pl.Utf8})
    return sys_frame.join(one, how="cross", maintain_order="left_right").select(list(PLAN_SCHEMA))


def _shuffle(n_items: int, n_judges: int, seed: int) -> tuple[np.ndarray, int]:
    rng = np.random.default_rng(count("seed", seed, minimum=0))
    order = rng.permutation(n_items)
    start = int(rng.integers(n_judges))
    return order, start


def plan_round_robin(
    items: Sequence[str],
    systems: Sequence[str],
    judges: Sequence[str],
    *,
    generations: int = 1,
    seed: int = 0,
) -> pl.DataFrame:
    r"""CyclicJudge assignment of one judge to every generation of every item and system.

    Parameters
    ----------
    items
        Item (scenario) ids.
    systems
        System ids.
    judges
        The judge panel, in cycle order.
    generations
        Generations per item, :math:`m` (default 1).
    seed
        Seed of the item shuffle and of the judge the cycle starts at.

    Returns
    -------
    polars.DataFrame
        ``system_id, item_id, generation, judge_id``, one row per call; within a system
        the rows are in cycle order (row :math:`t` has judge :math:`(s + t) \bmod K`).

    Raises
    ------
    DesignError
        Empty or repeated ids, ``generations < 1``, a negative seed.

    Notes
    -----
    [Zhu2026] section 3.3, strategy C (eq. 5, 30): round robin cancels the
    panel-relative offsets; with :math:`m = 1` scenarios are shuffled before the cycle.

    >>> plan = plan_round_robin(["q1", "q2", "q3", "q4"], ["sysA"], ["j1", "j2"], seed=3)
    >>> plan.group_by("judge_id").len().sort("judge_id")["len"].to_list()
    [2, 2]
    """
    item_ids = id_list("items", items, allow_empty=True)
    system_ids = id_list("systems", systems, allow_empty=True)
    judge_ids = id_list("judges", judges, allow_empty=True)
    m = count("generations", generations, minimum=1)
    order, start = _shuffle(len(item_ids), len(judge_ids), seed)
    total = len(item_ids) * m
    item, generation = _layout(order, total)
    judge = (start + np.arange(total)) % len(judge_ids)
    return _frame(system_ids, item_ids, judge_ids, item, generation, judge)


def plan_crossed(
    items: Sequence[str],
    systems: Sequence[str],
    judges: Sequence[str],
    *,
    generations: int = 1,
) -> pl.DataFrame:
    r"""Every judge on every generation of every item and system: the crossed design the D-study sizes.

    The plan a G-study's D-study describes (Brennan 2001, ch. 4: :math:`n_i`
    items and :math:`n_j` judges, all crossed with the systems), so the next
    run's MDD95 and E rho^2 can be predicted (:mod:`jurymeter.stats.plan_prediction`).

    Returns
    -------
    polars.DataFrame
        ``system_id, item_id, generation, judge_id``, one row per call, in item,
        generation and judge order within each system.

    Raises
    ------
    DesignError
        Empty or repeated ids, ``generations < 1``.

    >>> plan_crossed(["q1", "q2"], ["a", "b"], ["j1", "j2", "j3"]).height
    12
    """
    item_ids = id_list("items", items, allow_empty=True)
    system_ids = id_list("systems", systems, allow_empty=True)
    judge_ids = id_list("judges", judges, allow_empty=True)
    m = count("generations", generations, minimum=1)
    cells = len(item_ids) * m * len(judge_ids)
    item = np.repeat(np.arange(len(item_ids)), m * len(judge_ids))
    generation = np.tile(np.repeat(np.arange(m), len(judge_ids)), len(item_ids))
    judge = np.tile(np.arange(len(judge_ids)), len(item_ids) * m) if cells else np.zeros(0, dtype=np.int64)
    return _frame(system_ids, item_ids, judge_ids, item, generation, judge)


def plan_variance(
    plan: pl.DataFrame,
    components: VarianceComponents,
    *,
    noise_by_judge: Mapping[str, float] | None = None,
) -> pl.DataFrame:
    r"""Variance of the mean-of-judge-means score of each system under a plan.

    Parameters
    ----------
    plan
        ``system_id, item_id, generation, judge_id`` rows, one per judge call.
    components
        Per-observation variances (the same for every system).
    noise_by_judge
        Residual variance :math:`\sigma^2_{\varepsilon,\ell}` per judge (default
        ``components.sigma2_residual`` for all).

    Returns
    -------
    polars.DataFrame
        ``system_id, n_calls, variance``.

    Notes
    -----
    Estimator :math:`\hat\mu = K^{-1}\sum_\ell \bar X_\ell` over the :math:`K` judges the
    system's rows name, so the offsets cancel exactly and do not enter; the variance is
    the module's formula with :math:`a_r = 1/(K N_{\ell(r)})`. For a balanced round
    robin it is :math:`\sigma^2_\alpha/n + V_C` (eq. 5); for every judge on every
    generation, :math:`\sigma^2_\alpha/n + V_A` (eq. 3).
    """
    missing = [c for c in PLAN_SCHEMA if c not in plan.columns]
    if missing:
        msg = f"plan lacks column(s) {missing}; it has {plan.columns}"
        raise DesignError(msg)
    noise = _noise(noise_by_judge, plan.get_column("judge_id").unique().to_list(), components)
    rows = plan.select(list(PLAN_SCHEMA)).with_columns(
        a=1.0
        / (
            pl.col("judge_id").n_unique().over("system_id").cast(pl.Float64)
            * pl.len().over("system_id", "judge_id").cast(pl.Float64)
        ),
        eps=pl.col("judge_id").replace_strict(noise, return_dtype=pl.Float64),
    )
    item = (
        rows.group_by("system_id", "item_id")
        .agg(pl.col("a").sum())
        .group_by("system_id")
        .agg(item=(pl.col("a") ** 2).sum())
    )
    cell = (
        rows.group_by("system_id", "item_id", "generation")
        .agg(pl.col("a").sum())
        .group_by("system_id")
        .agg(cell=(pl.col("a") ** 2).sum())
    )
    resid = rows.group_by("system_id").agg(
        n_calls=pl.len(), resid=(pl.col("a") ** 2 * pl.col("eps")).sum()
    )
    order = plan.select(pl.col("system_id").unique(maintain_order=True))
    return (
        order.join(resid, on="system_id", maintain_order="left")
        .join(item, on="system_id", maintain_order="left")
        .join(cell, on="system_id", maintain_order="left")
        .select(
            "system_id",
            pl.col("n_calls").cast(pl.Int64),
            variance=components.sigma2_scenario * pl.col("item")
            + components.sigma2_generation * pl.col("cell")
            + pl.col("resid"),
        )
    )


def _noise(
    noise_by_judge: Mapping[str, float] | None,
    judges: Sequence[str],
    components: VarianceComponents,
) -> dict[str, float]:
    if noise_by_judge is None:
        return {j: components.sigma2_residual for j in judges}
    missing = [j for j in judges if j not in noise_by_judge]
    if missing:
        msg = f"noise_by_judge has no residual variance for judge(s) {missing}"
        raise DesignError(msg)
    out = {j: float(noise_by_judge[j]) for j in judges}
    bad = {j: v for j, v in out.items() if not np.isfinite(v) or v < 0}
    if bad:
        msg = f"noise_by_judge must be finite and >= 0, got {bad}"
        raise DesignError(msg)
    return out


def _checked_costs(
    items: Sequence[str],
    systems: Sequence[str],
    judges: Sequence[str],
    prices: Mapping[str, float],
    budget: float,
    components: VarianceComponents,
    noise_by_judge: Mapping[str, float] | None,
) -> tuple[tuple[str, ...], tuple[str, ...], tuple[str, ...], np.ndarray, dict[str, float], float]:
    """:func:`plan_cost_weighted`'s ids, prices, residual variance per judge and money, checked."""
    item_ids = id_list("items", items, allow_empty=True)
    system_ids = id_list("systems", systems, allow_empty=True)
    judge_ids = id_list("judges", judges, allow_empty=True)
    missing = [j for j in judge_ids if j not in prices]
    if missing:
        msg = f"prices has no price for judge(s) {missing}"
        raise DesignError(msg)
    c = np.asarray([float(prices[j]) for j in judge_ids])
    noise = _noise(noise_by_judge, judge_ids, components)
    n, money = len(item_ids), float(budget)
    if not np.isfinite(money) or money < n * c.sum() * (1 - _TOL):
        msg = (
            f"budget must cover every judge once on every item ({n} x {c.sum():g} = "
            f"{n * c.sum():g}), got {budget!r}; below that use plan_round_robin"
        )
        raise DesignError(msg)
    return item_ids, system_ids, judge_ids, c, noise, money


def _interleave(calls: np.ndarray) -> np.ndarray:
    """Judge sequence with each judge's calls spread evenly (stride scheduling)."""
    judge = np.repeat(np.arange(calls.size), calls)
    rank = np.arange(judge.size) - np.repeat(np.cumsum(calls) - calls, calls)
    key = (rank + 0.5) / calls[judge]
    return judge[np.lexsort((judge, key))]


@dataclass(frozen=True, slots=True)
class CostPlan:
    r"""A cost-weighted plan beside the uniform round robin for the same money (per system).

    Attributes
    ----------
    budget
        Money per system.
    plan, uniform_plan
        ``system_id, item_id, generation, judge_id`` tables.
    calls_per_item, uniform_calls_per_item
        Calls of each judge on every item, :math:`b_\ell` and :math:`q`.
    calls, uniform_calls
        Calls of each judge per system, :math:`n b_\ell` and :math:`n q`.
    cost, uniform_cost
        Money spent per system.
    variance, uniform_variance
        Predicted variance of the mean-of-judge-means score (:func:`plan_variance`).
    optimal
        Whether the allocation was proven optimal (:func:`allocate_calls`).
    """

    budget: float
    plan: pl.DataFrame
    calls_per_item: Mapping[str, int]
    calls: Mapping[str, int]
    cost: float
    variance: float
    optimal: bool
    uniform_plan: pl.DataFrame
    uniform_calls_per_item: int
    uniform_calls: Mapping[str, int]
    uniform_cost: float
    uniform_variance: float

    def to_json(self) -> dict[str, Any]:
        return {
            "budget": self.budget,
            "calls_per_item": dict(self.calls_per_item),
            "calls": dict(self.calls),
            "cost": self.cost,
            "variance": self.variance,
            "optimal": self.optimal,
            "uniform_calls_per_item": self.uniform_calls_per_item,
            "uniform_calls": dict(self.uniform_calls),
            "uniform_cost": self.uniform_cost,
            "uniform_variance": self.uniform_variance,
        }


def plan_cost_weighted(
    items: Sequence[str],
    systems: Sequence[str],
    judges: Sequence[str],
    *,
    prices: Mapping[str, float],
    budget: float,
    components: VarianceComponents,
    seed: int = 0,
    noise_by_judge: Mapping[str, float] | None = None,
) -> CostPlan:
    r"""Plan minimizing the predicted variance under a money budget, beside the uniform plan.

    Parameters
    ----------
    items, systems, judges
        Ids; every system gets the same assignment.
    prices
        Price per call of every judge.
    budget
        Money per system, :math:`M \ge n \sum_\ell c_\ell` (every judge once on every item).
    components
        Per-observation variances used for the prediction.
    seed
        Seed of the item shuffle and of the uniform cycle's start (as :func:`plan_round_robin`).
    noise_by_judge
        Residual variance per judge (default ``components.sigma2_residual`` for all).

    Returns
    -------
    CostPlan

    Raises
    ------
    DesignError
        Bad ids, a missing or non-positive price, or a budget below one call of every
        judge on every item (then the offsets can only cancel across items: use
        :func:`plan_round_robin`).

    Notes
    -----
    Every item gets the same calls, :math:`b_\ell` from judge :math:`\ell` (a balanced
    design, as the paper's allocation analysis assumes), so every item weighs
    :math:`1/n` in the mean of judge means and

    .. math::

        \mathrm{Var}(\hat\mu) = \frac{\sigma^2_\alpha}{n}
        + \frac{1}{nK^2}\sum_\ell \frac{\sigma^2_\beta + \sigma^2_{\varepsilon,\ell}}{b_\ell},

    minimized exactly over integers by :func:`allocate_calls` with money :math:`M/n` per
    item. An item's :math:`\sum_\ell b_\ell` generations get the judges interleaved
    (stride scheduling). The uniform plan is :func:`plan_round_robin` with
    :math:`q K` generations, :math:`q = \lfloor M / (n\sum_\ell c_\ell) \rfloor`: every judge
    :math:`q` times on every item, strategy C at :math:`B = qK` (eq. 5). It is feasible for
    the optimization, so the cost-weighted variance is never larger.

    >>> comp = VarianceComponents(0.4, 0.3, 0.5, 0.8)
    >>> plan = plan_cost_weighted(["q1", "q2"], ["s"], ["a", "b"], prices={"a": 1.0, "b": 4.0},
    ...                           budget=60.0, components=comp)
    >>> plan.calls_per_item, plan.uniform_calls_per_item
    ({'a': 10, 'b': 5}, 6)
    """
    # Long for its docstring: the variance it minimizes, and why the uniform plan is never better.
    item_ids, system_ids, judge_ids, c, noise, money = _checked_costs(
        items, systems, judges, prices, budget, components, noise_by_judge
    )
    v = components.sigma2_generation + np.asarray([noise[j] for j in judge_ids])
    n, k = len(item_ids), len(judge_ids)
    allocation = allocate_calls(c, money / n, noise=v)
    per_item = allocation.calls
    order, _ = _shuffle(n, k, seed)
    sequence = _interleave(per_item)
    item, generation = _layout(order, n * len(sequence))
    plan = _frame(system_ids, item_ids, judge_ids, item, generation, np.tile(sequence, n))
    q = int(np.floor(money / (n * c.sum()) * (1 + _TOL)))
    uniform = plan_round_robin(item_ids, system_ids, judge_ids, generations=q * k, seed=seed)
    var, u_var = (plan_variance(p.filter(pl.col("system_id") == system_ids[0]), components, noise_by_judge=noise)
                  for p in (plan, uniform))
    return CostPlan(
        budget=money,
        plan=plan,
        calls_per_item=dict(zip(judge_ids, per_item.tolist(), strict=True)),
        calls=dict(zip(judge_ids, (n * per_item).tolist(), strict=True)),
        cost=float(n * (c @ per_item)),
        variance=float(var["variance"][0]),
        optimal=allocation.optimal,
        uniform_plan=uniform,
        uniform_calls_per_item=q,
        uniform_calls=dict.fromkeys(judge_ids, n * q),
        uniform_cost=float(n * q * c.sum()),
        uniform_variance=float(u_var["variance"][0]),
    )
