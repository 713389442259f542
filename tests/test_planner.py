"""Round-robin and cost-weighted plans: properties, exact variances, brute force and simulation.

| contract | reference |
|---|---|
| balance, coverage, cycle, determinism, shuffle | hypothesis properties |
| round-robin mean = panel mean | exact arithmetic on eq. 1 without noise ([Zhu2026] eq. 30) |
| plan_variance | eq. 3 and 5 of [Zhu2026]; simulation of the estimator on a plan |
| allocate_calls | brute-force enumeration; the continuous optimum |
"""

from __future__ import annotations

import dataclasses
import itertools
import json

import numpy as np
import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from jurymeter.errors import DesignError
from jurymeter.stats.cyclic import VarianceComponents, strategy_variances
from jurymeter.stats.cyclic.planner import (
    PLAN_SCHEMA,
    allocate_calls,
    plan_cost_weighted,
    plan_round_robin,
    plan_variance,
)

# Two exact computations of one quantity differ by float rounding only.
EXACT = 1e-9
# Monte Carlo checks: |estimate - truth| <= Z * standard error.
Z = 4.5
PROPERTY = settings(max_examples=60, deadline=None)

COMPONENTS = VarianceComponents(0.4, 0.3, 0.5, 0.8)


def _ids(prefix: str, n: int) -> list[str]:
    return [f"{prefix}{k:02d}" for k in range(n)]


sizes = st.fixed_dictionaries(
    {
        "n_items": st.integers(1, 30),
        "n_systems": st.integers(1, 3),
        "n_judges": st.integers(1, 7),
        "generations": st.integers(1, 6),
        "seed": st.integers(0, 2**32 - 1),
    }
)


def _plan(s: dict[str, int]) -> pl.DataFrame:
    return plan_round_robin(
        _ids("q", s["n_items"]),
        _ids("s", s["n_systems"]),
        _ids("j", s["n_judges"]),
        generations=s["generations"],
        seed=s["seed"],
    )


# ----------------------------------------------------------------- round robin properties
@PROPERTY
@given(sizes)
def test_every_judge_gets_the_same_calls_to_within_one(s: dict[str, int]) -> None:
    plan = _plan(s)
    judges = pl.DataFrame({"judge_id": _ids("j", s["n_judges"])})
    for system in _ids("s", s["n_systems"]):
        counts = judges.join(
            plan.filter(pl.col("system_id") == system).group_by("judge_id").len(),
            on="judge_id",
            how="left",
        )["len"].fill_null(0)
        assert counts.max() - counts.min() <= 1
        assert counts.sum() == s["n_items"] * s["generations"]


@PROPERTY
@given(sizes)
def test_every_generation_scored_once_and_systems_paired(s: dict[str, int]) -> None:
    plan = _plan(s)
    assert plan.schema == pl.Schema(PLAN_SCHEMA)
    m = s["generations"]
    assert plan.height == s["n_items"] * s["n_systems"] * m
    assert plan.select("system_id", "item_id", "generation").n_unique() == plan.height
    assert plan["generation"].min() == 0
    assert plan["generation"].max() == m - 1
    first = plan.filter(pl.col("system_id") == "s00").drop("system_id")
    for system in _ids("s", s["n_systems"]):
        assert plan.filter(pl.col("system_id") == system).drop("system_id").equals(first)
    # Rows follow the cycle: row t has judge (start + t) mod K.
    k = s["n_judges"]
    codes = first["judge_id"].str.slice(1).cast(pl.Int64).to_numpy()
    assert np.all(codes == (codes[0] + np.arange(len(codes))) % k)
    # An item's first min(m, K) generations get distinct judges.
    distinct = first.group_by("item_id").agg(pl.col("judge_id").n_unique())["judge_id"]
    assert distinct.min() == min(m, k)


@PROPERTY
@given(sizes)
def test_deterministic_for_a_seed(s: dict[str, int]) -> None:
    assert _plan(s).equals(_plan(s))


@PROPERTY
@given(n_items=st.integers(12, 60), n_judges=st.integers(2, 6), seed=st.integers(0, 2**32 - 2))
def test_items_are_shuffled_before_the_cycle(n_items: int, n_judges: int, seed: int) -> None:
    """With one generation per item the cycle runs over a seeded permutation of the items."""
    items = _ids("q", n_items)
    plan = plan_round_robin(items, ["s"], _ids("j", n_judges), seed=seed)
    order = plan["item_id"].to_list()
    assert sorted(order) == items
    other = plan_round_robin(items, ["s"], _ids("j", n_judges), seed=seed + 1)["item_id"].to_list()
    # 12! orders: two seeds agreeing, or a seed keeping the dataset order, is a defect.
    assert order != items
    assert order != other


def test_shuffle_is_uniform_over_positions() -> None:
    """Which item opens the cycle is uniform over 2,000 seeds (chi-square, 9 d.f.)."""
    items = _ids("q", 10)
    firsts = [
        plan_round_robin(items, ["s"], ["a", "b"], seed=s)["item_id"][0] for s in range(2_000)
    ]
    counts = np.array([firsts.count(i) for i in items])
    chi2 = ((counts - 200) ** 2 / 200).sum()
    assert chi2 < 33.7  # 0.9999 quantile of chi-square(9)


@PROPERTY
@given(
    n_judges=st.integers(1, 6),
    generations=st.integers(1, 5),
    n_items=st.integers(1, 25),
    seed=st.integers(0, 2**32 - 1),
)
def test_round_robin_mean_is_the_panel_mean_when_offsets_are_the_only_error(
    n_judges: int, generations: int, n_items: int, seed: int
) -> None:
    """Eq. 30: scores mu + alpha_i + beta_ig + gamma_l; the plan's mean is the mean over the
    whole panel on the same generations exactly when K divides n m, and within
    sum |gamma| / (n m) otherwise."""
    rng = np.random.default_rng(seed)
    gamma = rng.normal(0, 2, n_judges)
    gamma -= gamma.mean()
    x = (
        7.0
        + rng.normal(0, 1, (n_items, 1, 1))
        + rng.normal(0, 0.5, (n_items, generations, 1))
        + gamma[None, None, :]
    )
    items, judges = _ids("q", n_items), _ids("j", n_judges)
    plan = plan_round_robin(items, ["s"], judges, generations=generations, seed=seed)
    i = plan["item_id"].str.slice(1).cast(pl.Int64).to_numpy()
    j = plan["judge_id"].str.slice(1).cast(pl.Int64).to_numpy()
    g = plan["generation"].to_numpy()
    cycled = x[i, g, j].mean()
    panel = x.mean()
    cells = n_items * generations
    if cells % n_judges == 0:
        assert cycled == pytest.approx(panel, rel=EXACT, abs=1e-12)
    else:
        assert abs(cycled - panel) <= np.abs(gamma).sum() / cells + 1e-12


# ----------------------------------------------------------------- plan variance
@pytest.mark.parametrize(("n_items", "budget"), [(20, 5), (12, 10), (7, 15)])
def test_plan_variance_of_round_robin_is_eq_5(n_items: int, budget: int) -> None:
    plan = plan_round_robin(
        _ids("q", n_items), ["a", "b"], _ids("j", 5), generations=budget, seed=2
    )
    got = plan_variance(plan, COMPONENTS)
    assert got["system_id"].to_list() == ["a", "b"]
    expected = (
        COMPONENTS.sigma2_scenario / n_items
        + strategy_variances(COMPONENTS, [budget], n=n_items, k_total=5).var_c[0]
    )
    np.testing.assert_allclose(got["variance"].to_numpy(), expected, rtol=EXACT)


def test_plan_variance_of_all_judges_is_eq_3() -> None:
    n_items, k, budget = 9, 5, 10
    m = budget // k
    rows = list(itertools.product(_ids("q", n_items), range(m), _ids("j", k)))
    plan = pl.DataFrame(
        {
            "system_id": ["a"] * len(rows),
            "item_id": [r[0] for r in rows],
            "generation": [r[1] for r in rows],
            "judge_id": [r[2] for r in rows],
        }
    )
    expected = (
        COMPONENTS.sigma2_scenario / n_items
        + strategy_variances(COMPONENTS, [budget], n=n_items, k_total=k).var_a[0]
    )
    assert plan_variance(plan, COMPONENTS)["variance"][0] == pytest.approx(expected, rel=EXACT)


def test_plan_variance_matches_simulation_of_the_estimator() -> None:
    """The mean of judge means on a cost-weighted plan, redrawn 6,000 times from eq. 1."""
    judges = _ids("j", 4)
    noise = {"j00": 0.3, "j01": 1.2, "j02": 0.8, "j03": 2.0}
    result = plan_cost_weighted(
        _ids("q", 15),
        ["s"],
        judges,
        prices={"j00": 1.0, "j01": 3.0, "j02": 0.5, "j03": 2.0},
        budget=15 * 20.0,
        components=COMPONENTS,
        seed=5,
        noise_by_judge=noise,
    )
    plan = result.plan
    item = plan["item_id"].str.slice(1).cast(pl.Int64).to_numpy()
    cell = plan.select(pl.struct("item_id", "generation").rank("dense") - 1).to_series().to_numpy()
    judge = plan["judge_id"].str.slice(1).cast(pl.Int64).to_numpy()
    counts = np.bincount(judge, minlength=4)
    a = 1.0 / (4 * counts[judge])
    gamma = np.array([0.7, -0.2, 0.4, -0.9])
    sd_eps = np.sqrt(np.array([noise[j] for j in judges]))[judge]
    rng = np.random.default_rng(0)
    reps = 6_000
    x = (
        3.0
        + rng.normal(0, np.sqrt(COMPONENTS.sigma2_scenario), (reps, 15))[:, item]
        + rng.normal(0, np.sqrt(COMPONENTS.sigma2_generation), (reps, int(cell.max()) + 1))[:, cell]
        + (gamma - gamma.mean())[judge]
        + rng.normal(0, 1, (reps, plan.height)) * sd_eps
    )
    estimates = x @ a
    var = estimates.var(ddof=1)
    assert abs(var - result.variance) <= Z * result.variance * np.sqrt(2 / (reps - 1))
    assert abs(estimates.mean() - 3.0) <= Z * np.sqrt(result.variance / reps)  # offsets cancel


# ----------------------------------------------------------------- allocation
@settings(max_examples=150, deadline=None)
@given(
    prices=st.lists(st.floats(0.2, 5.0), min_size=1, max_size=3),
    noise=st.lists(st.floats(0.0, 3.0), min_size=3, max_size=3),
    extra=st.floats(0.0, 20.0),
)
def test_allocation_is_the_brute_force_optimum(
    prices: list[float], noise: list[float], extra: float
) -> None:
    c = np.asarray(prices)
    v = np.asarray(noise[: len(prices)])
    budget = float(c.sum() + extra)
    got = allocate_calls(c, budget, noise=v)
    assert got.optimal
    assert np.all(got.calls >= 1)
    assert c @ got.calls <= budget * (1 + 1e-12)
    v_eff = v if np.any(v > 0) else np.ones_like(v)
    tops = [int((budget - c.sum() + c[k]) / c[k] * (1 + 1e-12)) for k in range(len(c))]
    best = min(
        np.sum(v_eff / np.asarray(n))
        for n in itertools.product(*(range(1, t + 1) for t in tops))
        if c @ np.asarray(n) <= budget * (1 + 1e-12)
    )
    assert got.objective == pytest.approx(best, rel=1e-12, abs=1e-15)
    assert got.bound <= got.objective * (1 + 1e-12) + 1e-300  # denormal noise underflows


def test_allocation_follows_the_square_root_rule_at_large_budgets() -> None:
    """N_l proportional to sqrt(v_l / c_l) (Neyman allocation with costs)."""
    c = np.array([1.0, 4.0, 9.0, 0.25])
    v = np.array([1.0, 1.0, 2.0, 0.5])
    got = allocate_calls(c, 10_000.0, noise=v)
    ratio = np.sqrt(v / c)
    expected = 10_000.0 * ratio / (c @ ratio)
    # The integer optimum trades a few calls of the cheap judges to spend the remainder.
    np.testing.assert_allclose(got.calls, expected, rtol=0.005, atol=1)
    assert got.optimal
    assert got.objective / got.bound - 1 < 1e-4


def test_cost_weighted_plan_beats_uniform_for_the_same_money() -> None:
    prices = {"cheap": 0.2, "mid": 1.0, "dear": 5.0}
    n = 40
    result = plan_cost_weighted(
        _ids("q", n),
        ["x", "y"],
        list(prices),
        prices=prices,
        budget=n * 30.0,
        components=COMPONENTS,
        seed=1,
    )
    assert result.cost <= n * 30.0
    assert result.uniform_cost <= n * 30.0
    assert result.variance < result.uniform_variance
    b = result.calls_per_item
    assert b["cheap"] > b["mid"] > b["dear"] >= 1
    assert result.uniform_calls_per_item == 4  # floor(30 / 6.2)
    counts = result.plan.filter(pl.col("system_id") == "x").group_by("judge_id").len()
    assert dict(counts.rows()) == dict(result.calls) == {j: n * b[j] for j in prices}
    per_item = result.plan.group_by("system_id", "item_id", "judge_id").len()
    assert per_item.height == 2 * n * 3
    assert set(
        per_item.select(pl.col("len") == pl.col("judge_id").replace_strict(b)).to_series()
    ) == {True}
    assert result.plan.select("system_id", "item_id", "generation").n_unique() == result.plan.height
    per = plan_variance(result.plan, COMPONENTS)["variance"].to_numpy()
    np.testing.assert_allclose(per, result.variance, rtol=EXACT)
    # Balanced: sigma2_alpha / n + sum_l v_l / b_l / (n K^2).
    v = COMPONENTS.sigma2_generation + COMPONENTS.sigma2_residual
    closed = COMPONENTS.sigma2_scenario / n + sum(v / b[j] for j in prices) / (n * 9)
    assert result.variance == pytest.approx(closed, rel=EXACT)
    payload = result.to_json()
    assert {"variance", "uniform_variance", "calls", "uniform_calls", "optimal"} <= set(payload)
    json.dumps(payload)
    with pytest.raises(dataclasses.FrozenInstanceError):
        result.variance = 0.0  # type: ignore[misc]


def test_equal_prices_give_the_round_robin_plan() -> None:
    """With equal prices the uniform plan is plan_round_robin and the cost plan matches its variance."""
    items, judges = _ids("q", 10), _ids("j", 5)
    prices = dict.fromkeys(judges, 2.0)
    result = plan_cost_weighted(
        items, ["s"], judges, prices=prices, budget=200.0, components=COMPONENTS, seed=7
    )
    assert set(result.calls.values()) == {20} == set(result.uniform_calls.values())
    assert result.uniform_plan.equals(
        plan_round_robin(items, ["s"], judges, generations=10, seed=7)
    )
    assert result.variance == pytest.approx(result.uniform_variance, rel=EXACT)


@pytest.mark.parametrize(
    ("call", "match"),
    [
        (lambda: plan_round_robin([], ["s"], ["j"]), "items"),
        (lambda: plan_round_robin(["q", "q"], ["s"], ["j"]), "repeats"),
        (lambda: plan_round_robin(["q"], "s", ["j"]), "string"),
        (lambda: plan_round_robin(["q"], ["s"], ["j"], generations=0), "generations"),
        (lambda: plan_round_robin(["q"], ["s"], ["j"], seed=-1), "seed"),
        (lambda: allocate_calls(np.array([1.0, 2.0]), 2.5), "budget"),
        (lambda: allocate_calls(np.array([1.0, -2.0]), 10.0), "prices"),
        (
            lambda: plan_cost_weighted(
                ["q"], ["s"], ["a", "b"], prices={"a": 1.0}, budget=9.0, components=COMPONENTS
            ),
            "price",
        ),
        (
            lambda: plan_variance(pl.DataFrame({"system_id": ["s"]}), COMPONENTS),
            "lacks",
        ),
        (
            lambda: plan_cost_weighted(
                ["q", "r"],
                ["s"],
                ["a", "b"],
                prices={"a": 1.0, "b": 2.0},
                budget=5.0,
                components=COMPONENTS,
            ),
            "every judge once on every item",
        ),
    ],
)
def test_bad_arguments_raise_design_error(call: object, match: str) -> None:
    with pytest.raises(DesignError, match=match):
        call()  # type: ignore[operator]


@PROPERTY
@given(
    n_items=st.integers(1, 20),
    extra=st.floats(0.0, 30.0),
    seed=st.integers(0, 1000),
    sigma2=st.lists(st.floats(0.0, 2.0), min_size=4, max_size=4),
)
def test_cost_weighted_plan_is_balanced_and_never_worse(
    n_items: int, extra: float, seed: int, sigma2: list[float]
) -> None:
    """Same calls on every item, within budget, and never above the uniform plan's variance."""
    prices = {"a": 0.5, "b": 1.5, "c": 3.0}
    budget = n_items * (5.0 + extra)
    components = VarianceComponents(*sigma2)
    result = plan_cost_weighted(
        _ids("q", n_items),
        ["s"],
        list(prices),
        prices=prices,
        budget=budget,
        components=components,
        seed=seed,
    )
    per_item = result.plan.group_by("item_id").len()["len"]
    assert per_item.len() == n_items
    assert per_item.n_unique() == 1
    assert per_item[0] == sum(result.calls_per_item.values())
    assert result.cost <= budget * (1 + 1e-12)
    assert result.variance <= result.uniform_variance * (1 + 1e-9) + 1e-15
