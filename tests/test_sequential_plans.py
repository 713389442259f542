"""Williams-square and randomized batch plans.

References, independent of the code under test: the defining properties of a
Williams design counted in plain loops (every row and column a permutation;
every ordered pair of distinct items adjacent once over the V rows for even V,
twice over the 2V rows for odd V; [Williams1949]), the textbook squares written
as literals (V = 4: ABDC / BCAD / CDBA / DACB, the cyclic square from the first
row 0, 1, V-1, 2, ... of Williams 1949 as printed in Jones & Kenward, *Design
and Analysis of Cross-Over Trials*; V = 3: the square and its mirror are the
six orders of three items), and a chi-square test of uniformity for the
randomized orders.
"""

from __future__ import annotations

import itertools
from collections import Counter
from collections.abc import Hashable, Sequence

import numpy as np
import polars as pl
import pytest
from scipy.stats import chisquare

from jurymeter.errors import ConfigError, DesignError
from jurymeter.stats.sequential.plans import Design, batch_plan, williams_square

# A uniform design fails the chi-square test this rarely by chance.
CHI2_ALPHA = 1e-3


def _adjacent(rows: Sequence[Sequence[Hashable]]) -> Counter[tuple[Hashable, Hashable]]:
    pairs: Counter[tuple[Hashable, Hashable]] = Counter()
    for row in rows:
        for t in range(1, len(row)):
            pairs[(row[t - 1], row[t])] += 1
    return pairs


@pytest.mark.parametrize("v", range(2, 13))
def test_williams_square_properties(v: int) -> None:
    sq = williams_square(v).tolist()
    n_rows = v if v % 2 == 0 else 2 * v
    assert len(sq) == n_rows
    for row in sq:
        assert sorted(row) == list(range(v))
    # every column of each V x V square is a permutation
    for half in range(n_rows // v):
        block = sq[half * v:(half + 1) * v]
        for p in range(v):
            assert sorted(r[p] for r in block) == list(range(v))
    # each item at each position equally often: once (even V) or twice (odd V)
    per = n_rows // v
    for p in range(v):
        assert Counter(r[p] for r in sq) == dict.fromkeys(range(v), per)
    pairs = _adjacent(sq)
    expected = {(a, b): per for a in range(v) for b in range(v) if a != b}
    assert dict(pairs) == expected


def test_textbook_squares() -> None:
    # Williams (1949); Jones & Kenward: A B D C / B C A D / C D B A / D A C B
    assert williams_square(4).tolist() == [[0, 1, 3, 2], [1, 2, 0, 3], [2, 3, 1, 0], [3, 0, 2, 1]]
    assert williams_square(2).tolist() == [[0, 1], [1, 0]]
    three = williams_square(3).tolist()
    assert three == [[0, 1, 2], [1, 2, 0], [2, 0, 1], [2, 1, 0], [0, 2, 1], [1, 0, 2]]
    assert sorted(map(tuple, three)) == sorted(itertools.permutations(range(3)))


def _orders(plan: pl.DataFrame, unit: str = "item_id") -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for r in plan.sort("batch_id", "batch_position").iter_rows(named=True):
        out.setdefault(r["batch_id"], []).append(r[unit])
    return out


@pytest.mark.parametrize(("v", "k"), [(2, 1), (4, 2), (5, 3), (6, 1), (7, 2)])
@pytest.mark.parametrize("seed", [0, 5])
def test_each_judges_full_cycle_is_balanced(v: int, k: int, seed: int) -> None:
    items = [f"item-{i}" for i in range(v)]
    judges = [f"judge-{j}" for j in range(k)]
    rows = v if v % 2 == 0 else 2 * v
    plan = batch_plan(items, rows * k * 2, judges, seed=seed)  # two full cycles per judge
    for judge in judges:
        mine = plan.filter(pl.col("judge_id") == judge)
        orders = list(_orders(mine).values())
        assert len(orders) == 2 * rows
        for order in orders:
            assert sorted(order) == sorted(items)
        per = 2 * rows // v
        for p in range(v):
            assert Counter(o[p] for o in orders) == dict.fromkeys(items, per)
        pairs = _adjacent(orders)
        assert dict(pairs) == {(a, b): 2 * rows // v for a in items for b in items if a != b}


def test_table_columns_dtypes_ids_and_round_robin() -> None:
    plan = batch_plan(["x", "y", "z", "w"], 12, ["j1", "j2", "j3"], seed=2)
    assert plan.schema == pl.Schema({"batch_id": pl.String, "batch_position": pl.Int64,
                                     "item_id": pl.String, "judge_id": pl.String})
    assert plan.height == 12 * 4
    ids = plan["batch_id"].unique(maintain_order=True).to_list()
    assert ids == [f"b{i:02d}" for i in range(12)]
    assert ids == sorted(ids)
    judge_of = dict(plan.select("batch_id", "judge_id").unique().iter_rows())
    assert [judge_of[b] for b in ids] == ["j1", "j2", "j3"] * 4
    assert plan["batch_position"].to_list() == list(range(4)) * 12
    renamed = batch_plan(["x", "y"], 3, ["j"], seed=2, unit="output_id", batch_prefix="call-")
    assert renamed.columns == ["batch_id", "batch_position", "output_id", "judge_id"]
    assert renamed["batch_id"].unique(maintain_order=True).to_list() == ["call-0", "call-1", "call-2"]


def test_partial_cycle_restarts_the_row_order() -> None:
    # one judge, V = 4: batches 0-3 are a full square, 4 and 5 repeat rows of batches 0 and 1
    orders = list(_orders(batch_plan(list("abcd"), 6, ["j"], seed=9)).values())
    assert _adjacent(orders[:4]) == {(a, b): 1 for a in "abcd" for b in "abcd" if a != b}
    assert orders[4:] == orders[:2]


def test_seeded_deterministic_and_different_across_seeds() -> None:
    items = [f"i{n}" for n in range(6)]
    designs: tuple[Design, ...] = ("williams", "random")
    for design in designs:
        a = batch_plan(items, 12, ["j1", "j2"], design=design, seed=4)
        b = batch_plan(items, 12, ["j1", "j2"], design=design, seed=4)
        c = batch_plan(items, 12, ["j1", "j2"], design=design, seed=5)
        assert a.equals(b)
        assert not a.equals(c)
    # the relabelling: the first order differs across seeds (not always the same square)
    firsts = {tuple(next(iter(_orders(batch_plan(items, 1, ["j"], seed=s)).values())))
              for s in range(20)}
    assert len(firsts) > 10


def test_random_orders_are_uniform_permutations() -> None:
    items = ["a", "b", "c"]
    plan = batch_plan(items, 6000, ["j1", "j2"], design="random", seed=1)
    orders = list(_orders(plan).values())
    for order in orders:
        assert sorted(order) == items
    counts = Counter(tuple(o) for o in orders)
    observed = [counts[p] for p in itertools.permutations(items)]
    assert chisquare(observed).pvalue > CHI2_ALPHA


@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        ({"items": ["a"]}, DesignError, "at least 2"),
        ({"items": []}, DesignError, "at least 2"),
        ({"items": ["a", "b", "a"]}, DesignError, "repeats"),
        ({"items": "abc"}, DesignError, "sequence"),
        ({"items": ["a", 2]}, DesignError, "strings"),
        ({"items": ["a", ""]}, DesignError, "strings"),
        ({"n_batches": 0}, DesignError, "n_batches"),
        ({"n_batches": 2.0}, DesignError, "n_batches"),
        ({"judges": []}, DesignError, "judges"),
        ({"judges": ["j", "j"]}, DesignError, "repeats"),
        ({"design": "latin"}, ConfigError, "design"),
        ({"seed": -1}, ConfigError, "seed"),
        ({"unit": "judge_id"}, ConfigError, "unit"),
    ],
)
def test_bad_input_is_refused(kwargs: dict[str, object], error: type[Exception], match: str) -> None:
    args: dict[str, object] = {"items": ["a", "b", "c"], "n_batches": 3, "judges": ["j"]}
    args.update(kwargs)
    with pytest.raises(error, match=match):
        batch_plan(**args)  # type: ignore[arg-type]
    with pytest.raises(DesignError, match="n_items"):
        williams_square(1)


def test_williams_squares_use_numpy_ints() -> None:
    assert williams_square(np.int64(6)).dtype == np.int64  # type: ignore[arg-type]


def _adjacent_pairs(frame: pl.DataFrame) -> dict[tuple[str, str], int]:
    """Ordered (item, next item) pairs over every batch of ``frame``, counted by brute force."""
    found: dict[tuple[str, str], int] = {}
    for _, batch in frame.sort("batch_position").group_by("batch_id", maintain_order=True):
        ids = batch["item_id"].to_list()
        for a, b in itertools.pairwise(ids):
            found[(a, b)] = found.get((a, b), 0) + 1
    return found


def test_a_crossed_plan_in_batches_keeps_its_calls_and_balances_each_judges_orders() -> None:
    from jurymeter.stats.cyclic.planner import plan_crossed
    from jurymeter.stats.sequential.plans import batched_plan

    items = [f"q{k}" for k in range(8)]
    systems = [f"s{k}" for k in range(4)]  # 4 systems x 2 generations = 8 batches per group: one full square
    plan = plan_crossed(items, systems, ["j1", "j2"], generations=2)
    batched = batched_plan(plan, 4, seed=5)
    # the same calls, each in exactly one batch, positions 0..V-1 within a batch
    assert batched.drop("batch_id", "batch_position").sort(plan.columns).equals(plan.sort(plan.columns))
    per_batch = batched.group_by("batch_id").agg(
        pl.len(), pl.col("judge_id").n_unique().alias("judges"), pl.col("system_id").n_unique().alias("systems"),
        pl.col("generation").n_unique().alias("generations"), pl.col("batch_position").sort().alias("positions"))
    assert per_batch["len"].to_list() == [4] * per_batch.height
    assert set(per_batch["judges"]) == set(per_batch["systems"]) == set(per_batch["generations"]) == {1}
    assert all(p == [0, 1, 2, 3] for p in per_batch["positions"].to_list())
    for judge in ("j1", "j2"):
        mine = batched.filter(pl.col("judge_id") == judge)
        for group in mine["batch_id"].str.split("/").list.get(1).unique().to_list():
            one = mine.filter(pl.col("batch_id").str.starts_with(f"{judge}/{group}/"))
            group_items = sorted(one["item_id"].unique().to_list())
            # Williams: over the full square (8 batches of 4 items: 2 cycles of 4 rows) every item is at every
            # position twice, and every ordered pair of distinct items is adjacent twice
            positions = one.group_by("item_id", "batch_position").len()["len"].to_list()
            assert positions == [2] * (len(group_items) * 4)
            pairs = _adjacent_pairs(one)
            assert pairs == {(a, b): 2 for a in group_items for b in group_items if a != b}


def test_batches_need_a_crossed_plan_and_two_items() -> None:
    from jurymeter.errors import DesignError
    from jurymeter.stats.cyclic.planner import plan_crossed, plan_round_robin
    from jurymeter.stats.sequential.plans import batched_plan

    rr = plan_round_robin([f"q{k}" for k in range(6)], ["a", "b"], ["j1", "j2", "j3"], generations=1, seed=0)
    with pytest.raises(DesignError, match="need a crossed plan"):
        batched_plan(rr, 3)
    with pytest.raises(DesignError, match="at least 2 items"):
        batched_plan(plan_crossed(["q0"], ["a", "b"], ["j1"]), 2)
    # 5 items in batches of 4: two groups (3 and 2), never a batch of one
    sizes = batched_plan(plan_crossed([f"q{k}" for k in range(5)], ["a"], ["j1"]), 4).group_by("batch_id").len()
    assert sorted(sizes["len"].to_list()) == [2, 3]
