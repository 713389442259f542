"""Rank intervals and tie groups (stats/ranking.py, stats/curves.py::leaderboard) and Bradley-Terry's rank intervals.

References: the rule written as plain loops over pairs (rank ranges: counts of
clearly better / clearly worse systems; groups: union-find over every pair closer
than the MDD); hypothesis permutations of the input; simulation with known
system effects (a balanced s x i x j design drawn with numpy, fitted by the
project's G-study, ``fit_gstudy`` and ``mdd95``, whose leaderboard is ``assess_block``'s
on a data set of each configuration) for the coverage of the true ranks; games
drawn from known Bradley-Terry strengths for the bootstrap's rank intervals.
"""

from __future__ import annotations

import math
import random

import numpy as np
import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from jurymeter.stats.blocks import BalancedBlock
from jurymeter.stats.curves import leaderboard
from jurymeter.stats.design import Design
from jurymeter.stats.dstudy import PAPER_ROLES, mdd95
from jurymeter.stats.gstudy import fit_gstudy
from jurymeter.stats.pairwise.bradley_terry import bradley_terry
from jurymeter.stats.ranking import rank_intervals
from jurymeter.stats.reliability import GStudyRequest, assess_block

IDS = st.text(alphabet="abcdefgh", min_size=1, max_size=4)
MEANS = st.one_of(
    st.sampled_from([0.0, -0.0, 0.3, 0.5, 0.8, 1.0, 1.5, 2.0]),
    st.floats(min_value=-50, max_value=50, allow_nan=False, allow_infinity=False),
)
MDDS = st.one_of(
    st.just(0.0), st.just(0.5), st.just(math.inf),
    st.floats(min_value=0.0, max_value=60.0, allow_nan=False, allow_infinity=False),
)


def brute_force(means: dict[str, float], mdd: float) -> dict[str, tuple[int, int, int, int]]:
    """Per system (rank, rank_low, rank_high, tie group) by the written rule, in plain loops."""
    ordered = sorted(means, key=lambda k: (-means[k], k))
    rank = {k: r for r, k in enumerate(ordered, start=1)}
    n = len(ordered)
    out = {}
    # union-find over every pair closer than the MDD (no sorted gaps)
    parent = {k: k for k in ordered}

    def root(k: str) -> str:
        while parent[k] != k:
            k = parent[k]
        return k

    for a in ordered:
        for b in ordered:
            if a != b and abs(means[a] - means[b]) < mdd:
                parent[root(a)] = root(b)
    labels: dict[str, int] = {}
    for k in ordered:  # groups numbered best first
        labels.setdefault(root(k), len(labels) + 1)
    for k in ordered:
        better = worse = 0
        for other in ordered:
            if means[other] - means[k] >= mdd and means[other] > means[k]:
                better += 1
            if means[k] - means[other] >= mdd and means[k] > means[other]:
                worse += 1
        out[k] = (rank[k], 1 + better, n - worse, labels[root(k)])
    return out


def as_dict(table: pl.DataFrame) -> dict[str, tuple[int, int, int, int]]:
    return {r[0]: tuple(r[1:]) for r in table.select("system_id", "rank", "rank_low", "rank_high", "tie_group").iter_rows()}


@settings(max_examples=200, deadline=None)
@given(means=st.dictionaries(IDS, MEANS, max_size=20), mdd=MDDS)
def test_rank_intervals_equal_the_rule_written_as_loops(means: dict[str, float], mdd: float) -> None:
    table = rank_intervals(means, mdd)
    assert table.columns == ["system_id", "mean", "rank", "rank_low", "rank_high", "tie_group", "mdd95"]
    assert as_dict(table) == brute_force(means, mdd)
    assert (table["rank_low"] <= table["rank"]).all()
    assert (table["rank"] <= table["rank_high"]).all()


@settings(max_examples=200, deadline=None)
@given(means=st.dictionaries(IDS, MEANS, min_size=2, max_size=20), mdd=MDDS)
def test_systems_closer_than_the_mdd_have_overlapping_ranges_and_share_a_group(
    means: dict[str, float], mdd: float
) -> None:
    rows = {r["system_id"]: r for r in rank_intervals(means, mdd).iter_rows(named=True)}
    for a in means:
        for b in means:
            if a != b and abs(means[a] - means[b]) < mdd:
                ra, rb = rows[a], rows[b]
                assert ra["rank_low"] <= rb["rank_high"], (ra, rb)
                assert rb["rank_low"] <= ra["rank_high"], (ra, rb)
                assert ra["tie_group"] == rb["tie_group"]


@settings(max_examples=100, deadline=None)
@given(means=st.dictionaries(IDS, MEANS, max_size=20), mdd=MDDS, seed=st.integers(0, 2**32 - 1))
def test_ranges_and_groups_do_not_depend_on_input_order(means: dict[str, float], mdd: float, seed: int) -> None:
    items = list(means.items())
    random.Random(seed).shuffle(items)
    assert rank_intervals(dict(items), mdd).equals(rank_intervals(means, mdd))


def test_the_issue_case_two_close_systems_share_a_group() -> None:
    # The greedy rule gave [1, 1, 2, 3]: b and c, 0.08 apart, in two groups (c is 0.48 below a).
    table = rank_intervals({"a": 3.0, "b": 2.6, "c": 2.52, "d": 1.0}, 0.457)
    assert table["tie_group"].to_list() == [1, 1, 1, 2]
    # a: c and d clearly worse; b: only d; c: a clearly better, d clearly worse (by hand)
    assert table["rank_low"].to_list() == [1, 1, 2, 4]
    assert table["rank_high"].to_list() == [2, 3, 3, 4]


def test_leaderboard_without_an_mdd_has_null_ranges_and_groups() -> None:
    rows = leaderboard({"mdd95": None, "system_means": {"a": 1.0, "b": 2.0}})
    assert [r["system_id"] for r in rows] == ["b", "a"]
    assert all(r["rank_low"] is None and r["rank_high"] is None and r["tie_group"] is None for r in rows)
    rows = leaderboard({"mdd95": 0.5, "system_means": {"a": 1.0, "b": 1.2}})
    assert [(r["rank_low"], r["rank_high"]) for r in rows] == [(1, 2), (1, 2)]


# ------------------------------------------------------------- coverage on simulated leaderboards

REQUEST = GStudyRequest(item_set="sim", n_boot=2, fpr_simulations=0, ensembles=(), splits=2)


def _simulate(rng: np.random.Generator, effects: np.ndarray, n_i: int, n_j: int, sd: dict[str, float]) -> np.ndarray:
    """A balanced s x i x j array with the given system effects and random other effects (numpy only)."""
    n_s = len(effects)
    return (
        effects[:, None, None]
        + sd["i"] * rng.normal(size=(1, n_i, 1))
        + sd["j"] * rng.normal(size=(1, 1, n_j))
        + sd["si"] * rng.normal(size=(n_s, n_i, 1))
        + sd["sj"] * rng.normal(size=(n_s, 1, n_j))
        + sd["ij"] * rng.normal(size=(1, n_i, n_j))
        + sd["e"] * rng.normal(size=(n_s, n_i, n_j))
    )


def _block(x: np.ndarray) -> BalancedBlock:
    n_s, n_i, n_j = x.shape
    return BalancedBlock(
        x=x, design=Design.parse("s x i x j"), systems=tuple(f"s{k:02d}" for k in range(n_s)),
        items=tuple(f"i{k:03d}" for k in range(n_i)), judges=tuple(f"j{k}" for k in range(n_j)),
        n_replicates=1, n_generations=1, completeness=1.0, records_in=x.size, observations_used=x.size,
    )


def _means_and_mdd(block: BalancedBlock) -> tuple[dict[str, float], float | None]:
    """The report's ``system_means`` and ``mdd95`` without the rest of the report (the D-study's counts and
    nomogram took most of a whole report's 0.07-0.3 CPU-s): the G-study fit and the MDD at the block's sizes."""
    fit = fit_gstudy(block.x, block.design)
    mdd = float(mdd95(fit.sigma2, block.design, PAPER_ROLES.observed(block.design, fit.sizes)))
    means = dict(zip(block.systems, block.x.mean(axis=(1, 2)).tolist(), strict=True))
    return means, None if math.isnan(mdd) else mdd


def _true_ranks(effects: np.ndarray) -> np.ndarray:
    return np.array([1 + int(np.sum(effects > e)) for e in effects])


SD = {"i": 0.5, "j": 0.3, "si": 0.8, "sj": 0.25, "ij": 0.2, "e": 1.0}
CONFIGURATIONS = {
    # 10 systems in two clumps of near-ties (0.02 apart) against an MDD of about 0.5
    "many near-ties": (np.r_[np.arange(5) * 0.02, 1.0 + np.arange(5) * 0.02], 30, 3),
    # 8 systems 0.6 apart: more than the MDD
    "well separated": (np.arange(8) * 0.6, 30, 3),
    # 12 systems drawn fresh each time from N(0, 0.3^2): the realistic mix
    "random effects": (None, 40, 3),
}


@pytest.mark.slow
@pytest.mark.parametrize("name", list(CONFIGURATIONS))
def test_mdd_rank_ranges_cover_the_true_ranks(name: str) -> None:
    fixed, n_i, n_j = CONFIGURATIONS[name]
    rng = np.random.default_rng(160 + len(name))
    covered = total = 0
    all_covered = []
    for rep in range(200):
        effects = 0.3 * rng.normal(size=12) if fixed is None else fixed
        block = _block(_simulate(rng, effects, n_i, n_j, SD))
        means, mdd = _means_and_mdd(block)
        if rep == 0:  # the report's leaderboard is this one
            report = assess_block(block, REQUEST)
            assert means == pytest.approx(report["system_means"], rel=1e-12, abs=1e-12)
            assert mdd == pytest.approx(report["mdd95"], rel=1e-12)
        table = rank_intervals(means, mdd)
        truth = dict(zip(_block(np.zeros((len(effects), 1, 1))).systems, _true_ranks(effects), strict=True))
        inside = [lo <= truth[s] <= hi for s, lo, hi in table.select("system_id", "rank_low", "rank_high").iter_rows()]
        covered += sum(inside)
        total += len(inside)
        all_covered.append(all(inside))
    rate = covered / total
    se = math.sqrt(0.95 * 0.05 / 200)  # per leaderboard; the systems of one leaderboard are not independent
    print(f"{name}: per-system coverage {rate:.3f}, whole-leaderboard coverage {np.mean(all_covered):.3f}")
    assert rate >= 0.95 - 3 * se


# ------------------------------------------------------------- Bradley-Terry's bootstrap rank intervals


def _bt_games(rng: np.random.Generator, strength: np.ndarray, n_items: int, pairs_per_item: int) -> pl.DataFrame:
    """Games drawn from known Bradley-Terry strengths: each item a few random pairs, random sides."""
    n_s = len(strength)
    pairs = [(a, b) for a in range(n_s) for b in range(a + 1, n_s)]
    item, x, y = [], [], []
    for i in range(n_items):
        for p in rng.choice(len(pairs), size=pairs_per_item, replace=False):
            a, b = pairs[p]
            if rng.random() < 0.5:
                a, b = b, a
            item.append(f"q{i:03d}")
            x.append(a)
            y.append(b)
    xa, ya = np.array(x), np.array(y)
    win = rng.random(len(xa)) < 1.0 / (1.0 + np.exp(-(strength[xa] - strength[ya])))
    return pl.DataFrame({
        "item_id": item, "system_x": [f"m{k}" for k in xa], "system_y": [f"m{k}" for k in ya],
        "judge_id": "j", "score_x": win.astype(np.float64),
    })


BT_CONFIGURATIONS = {
    "many near-ties": np.r_[np.arange(3) * 0.03, 0.8 + np.arange(3) * 0.03],
    "well separated": np.arange(6) * 0.5,
    "random strengths": None,
}


@pytest.mark.parametrize("name", list(BT_CONFIGURATIONS))
def test_bradley_terry_rank_intervals_cover_the_true_ranks(name: str) -> None:
    fixed = BT_CONFIGURATIONS[name]
    rng = np.random.default_rng(1600 + len(name))
    inside = []
    for rep in range(300):
        strength = 0.4 * rng.normal(size=6) if fixed is None else fixed
        table = bradley_terry(_bt_games(rng, strength, 60, 5), n_boot=200, battle_bootstrap=False, seed=rep).table
        truth = {f"m{k}": 1 + int(np.sum(strength > strength[k])) for k in range(6)}
        inside += [lo <= truth[s] <= hi for s, lo, hi in table.select("system_id", "rank_low", "rank_high").iter_rows()]
    rate = float(np.mean(inside))
    se = math.sqrt(0.95 * 0.05 / 300)
    print(f"Bradley-Terry {name}: per-system rank coverage {rate:.3f}")
    assert rate >= 0.95 - 3 * se


@settings(max_examples=15, deadline=None)
@given(seed=st.integers(0, 2**16), relabel=st.permutations(range(6)))
def test_bradley_terry_groups_do_not_depend_on_the_order_of_systems(seed: int, relabel: list[int]) -> None:
    rng = np.random.default_rng(seed)
    outcomes = _bt_games(rng, np.array([0.0, 0.05, 0.1, 0.9, 0.95, 2.0]), 40, 4)
    names = {f"m{k}": f"m{relabel[k]}" for k in range(6)}  # another name order: systems are visited otherwise
    back = {v: k for k, v in names.items()}
    shuffled = outcomes.sample(fraction=1.0, shuffle=True, seed=seed).with_columns(
        pl.col("system_x").replace_strict(names), pl.col("system_y").replace_strict(names)
    )
    columns = ["system_id", "rank", "rank_low", "rank_high", "tie_group"]
    first = bradley_terry(outcomes, n_boot=100, battle_bootstrap=False, seed=1).table.select(columns)
    second = bradley_terry(shuffled, n_boot=100, battle_bootstrap=False, seed=1).table.select(columns)
    second = second.with_columns(pl.col("system_id").replace_strict(back)).sort("system_id")
    assert second.equals(first.sort("system_id"))
