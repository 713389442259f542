"""Games from stored pairwise records and the counterbalanced reconciliation, on cases worked by hand."""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest

from jurymeter.stats.pairwise.games import (
    GAME_SCHEMA,
    OUTCOME_SCHEMA,
    both_orders_share,
    games,
    reconcile,
)


def _records(rows: list[dict[str, object]]) -> pl.DataFrame:
    base = {"item_id": "i", "judge_id": "j", "generation": 0, "replicate": 0, "winner": None, "preference": None}
    return pl.DataFrame([{**base, **r} for r in rows], schema_overrides={"preference": pl.Float64,
                                                                         "winner": pl.String})


def test_games_take_the_winner_or_the_preference_and_score_ties_half() -> None:
    g = games(_records([
        {"system_a": "p", "system_b": "q", "winner": "A"},
        {"system_a": "p", "system_b": "q", "winner": "tie", "item_id": "i2"},
        {"system_a": "q", "system_b": "p", "winner": "B"},
        {"system_a": "p", "system_b": "q", "preference": 0.25, "item_id": "i3"},  # soft: B more likely
        {"system_a": "p", "system_b": "q", "preference": 0.5, "item_id": "i4"},
    ]))
    assert list(g.schema) == list(GAME_SCHEMA)
    # Sorted on every column (item i1 first, its (p, q) game before its (q, p) one), whatever the input order.
    assert g["verdict"].to_list() == ["A", "B", "tie", "B", "tie"]
    assert g["score_a"].to_list() == [1.0, 0.0, 0.5, 0.25, 0.5]
    assert g["order_known"].to_list() == [True] * 5  # no order_known column: every order is known
    assert g["gold"].null_count() == 5


def test_order_known_as_stored_text_and_gold_spellings() -> None:
    g = games(_records([
        {"system_a": "p", "system_b": "q", "winner": "A", "order_known": "false", "gold": "model_b"},
        {"system_a": "p", "system_b": "q", "winner": "A", "order_known": "true", "gold": " Tie ", "item_id": "i2"},
        {"system_a": "p", "system_b": "q", "winner": "A", "order_known": None, "gold": "a", "item_id": "i3"},
    ]))
    assert g["order_known"].to_list() == [False, True, True]
    assert g["gold"].to_list() == ["B", "tie", "A"]


@pytest.mark.parametrize(
    ("first", "second", "verdict", "score_x"),
    [
        # (winner with x=p shown first, winner with q shown first) -> reconciled verdict for x = p
        ("A", "B", "x", 1.0),  # p wins both orders
        ("B", "A", "y", 0.0),  # q wins both orders
        ("A", "A", "tie", 0.5),  # the slot wins both times: a reversal, so a tie
        ("B", "B", "tie", 0.5),
        ("A", "tie", "tie", 0.5),  # a tie in either order is a tie
        ("tie", "B", "tie", 0.5),
        ("tie", "tie", "tie", 0.5),
    ],
)
def test_two_orders_reconcile_by_the_counterbalanced_rule(first: str, second: str, verdict: str, score_x: float) -> None:
    outcomes = reconcile(games(_records([
        {"system_a": "p", "system_b": "q", "winner": first},
        {"system_a": "q", "system_b": "p", "winner": second},
    ])))
    assert list(outcomes.schema) == list(OUTCOME_SCHEMA)
    assert outcomes.select("system_x", "system_y", "verdict", "score_x", "orders").rows() == [
        ("p", "q", verdict, score_x, 2)]


def test_one_order_stands_alone_and_unknown_orders_never_pair() -> None:
    outcomes = reconcile(games(_records([
        # item i: only q shown first, q wins -> y for x = p
        {"system_a": "q", "system_b": "p", "winner": "A"},
        # item k: both orders but the order is unknown for both -> two separate outcomes
        {"system_a": "p", "system_b": "q", "winner": "A", "item_id": "k", "order_known": "false"},
        {"system_a": "q", "system_b": "p", "winner": "A", "item_id": "k", "order_known": "false"},
        # item m: both orders of another judge and replicate -> not paired with each other
        {"system_a": "p", "system_b": "q", "winner": "A", "item_id": "m", "judge_id": "j1"},
        {"system_a": "q", "system_b": "p", "winner": "B", "item_id": "m", "judge_id": "j2"},
        {"system_a": "p", "system_b": "q", "winner": "A", "item_id": "m", "judge_id": "j1", "replicate": 1},
    ])))
    rows = outcomes.select("item_id", "judge_id", "replicate", "verdict", "score_x", "orders").rows()
    assert sorted(rows) == sorted([
        ("i", "j", 0, "y", 0.0, 1),
        ("k", "j", 0, "x", 1.0, 1),
        ("k", "j", 0, "y", 0.0, 1),
        ("m", "j1", 0, "x", 1.0, 1),
        ("m", "j1", 1, "x", 1.0, 1),
        ("m", "j2", 0, "x", 1.0, 1),
    ])
    assert both_orders_share(outcomes) == 0.0
    assert both_orders_share(outcomes.clear()) is None


def test_soft_preferences_in_either_order_are_averaged() -> None:
    outcomes = reconcile(games(_records([
        {"system_a": "p", "system_b": "q", "preference": 0.8},  # p earns 0.8
        {"system_a": "q", "system_b": "p", "winner": "B"},  # p earns 1
    ])))
    assert outcomes["score_x"].to_list() == [pytest.approx(0.9)]
    assert outcomes["verdict"].to_list() == ["x"]  # p won both orders
    assert outcomes["orders"].to_list() == [2]


def test_games_and_the_sums_over_them_do_not_depend_on_the_order_records_were_read_in() -> None:
    """A crash and rerun may commit parts in another order; the published numbers must be the same bits."""
    from jurymeter.stats.pairwise.position import position_bias

    rng = np.random.default_rng(3)
    n = 400
    records = pl.DataFrame({
        "item_id": [f"i{k % 40}" for k in range(n)], "judge_id": [f"j{k % 3}" for k in range(n)],
        "system_a": [f"s{k % 5}" for k in range(n)], "system_b": [f"s{(k % 5 + 1 + k // 200) % 5}" for k in range(n)],
        "generation": [0] * n, "replicate": [k // 120 for k in range(n)], "winner": [None] * n,
        "preference": rng.uniform(0, 1, n).round(7),  # soft verdicts: their sums by item are not exact in floats
    }, schema_overrides={"winner": pl.String})
    first = position_bias(games(records), n_boot=20, seed=1)
    for seed in range(5):
        shuffled = records.sample(fraction=1.0, shuffle=True, seed=seed)
        assert games(shuffled).equals(games(records))
        again = position_bias(games(shuffled), n_boot=20, seed=1)
        assert (again.slot_a_advantage, again.slot_a_advantage_sd) == (first.slot_a_advantage, first.slot_a_advantage_sd)
        assert again.per_judge.equals(first.per_judge)
        assert again.per_system.equals(first.per_system)
