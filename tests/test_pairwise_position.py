"""Position bias (``jurymeter.stats.pairwise.position``) against hand counts, the paper, simulation and real logs.

Independent references: tiny frames whose rates are worked out by hand in the
comments; the two q values printed in ``who-judges-matters`` appendix A; a
numpy simulation with known truth (a pure position-following judge, a content
judge with known win probabilities, slot bias and ties), for bias within Monte
Carlo error and for the coverage of the item-bootstrap interval; and the real
MT-Bench / Arena-Hard samples, counted from their JSON lines with ``json``.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import polars as pl
import pytest

from jurymeter.errors import ConfigError, DesignError
from jurymeter.io.ingest import ingest
from jurymeter.io.sources import discover_sources
from jurymeter.io.store import Store
from jurymeter.io.validate import ValidationOptions
from jurymeter.stats.pairwise.games import games
from jurymeter.stats.pairwise.position import position_bias, position_following_q
from samples import SAMPLES

EXACT = 1e-12  # hand-built cases: sums of a few halves, exact in float64
MC_SIGMAS = 4.0  # simulation: |estimate - truth| within 4 standard errors (fails ~1 in 16,000)
# 200 replications at 95%: the count covered is Binomial(200, 0.95), sd 3.1; a percentile
# bootstrap on 40 items may undercover slightly, so accept 88%..99.5%.
COVERAGE_RANGE = (0.88, 0.995)
PAPER_Q = 0.005  # the paper prints q to two decimals


def _frame(rows: list[tuple[str, str, str, str, str]], unknown: list[int] | None = None) -> pl.DataFrame:
    """(item, system_a, system_b, judge, verdict) -> a games frame; replicate and generation 0."""
    score = {"A": 1.0, "B": 0.0, "tie": 0.5}
    return pl.DataFrame({
        "item_id": [r[0] for r in rows], "system_a": [r[1] for r in rows],
        "system_b": [r[2] for r in rows], "judge_id": [r[3] for r in rows],
        "generation": [0] * len(rows), "replicate": [0] * len(rows),
        "verdict": [r[4] for r in rows], "score_a": [score[r[4]] for r in rows],
        "order_known": [k not in (unknown or []) for k in range(len(rows))],
    })


# Judge h, systems x and y, both orders on items 1-4, plus one game of unknown order on item 5.
#   item 1: (x,y) A -> x wins; (y,x) A -> y wins            : reversed
#   item 2: (x,y) tie;          (y,x) B -> x wins            : reversed (tie vs win)
#   item 3: (x,y) B -> y wins;  (y,x) A -> y wins            : agrees
#   item 4: (x,y) tie;          (y,x) tie                    : agrees (tie vs tie)
#   item 5: (x,y) tie, order unknown: only the tie rate counts it
# reversal 2/4; known verdicts A,A,tie,B,B,A,tie,tie: first slot 3/8, second 2/8;
# ties 4 of all 9 games.
# x first (x,y): 1, .5, 0, .5 -> 2/4;  x second (y,x): 0, 1, 0, .5 -> 1.5/4;  Dx = 12.5
# y first (y,x): 1, 0, 1, .5 -> 2.5/4; y second (x,y): 0, .5, 1, .5 -> 2/4;   Dy = 12.5
# r = 1/2 exactly: q = 1/2.
JUDGE_H = [
    ("1", "x", "y", "h", "A"), ("1", "y", "x", "h", "A"),
    ("2", "x", "y", "h", "tie"), ("2", "y", "x", "h", "B"),
    ("3", "x", "y", "h", "B"), ("3", "y", "x", "h", "A"),
    ("4", "x", "y", "h", "tie"), ("4", "y", "x", "h", "tie"),
    ("5", "x", "y", "h", "tie"),
]
# Judge p on items 1-4:
#   item 1: A, A -> reversed;  item 2: A, A -> reversed
#   item 3: (x,y) A -> x, (y,x) B -> x : agrees;  item 4: (x,y) B -> y, (y,x) B -> x : reversed
# reversal 3/4; A 5 of 8, B 3 of 8: q = 1/2 + sqrt(2 * 3/4 - 1)/2 = 1/2 + sqrt(1/2)/2.
# x first: 1,1,1,0 -> 3/4; x second: 0,0,1,1 -> 2/4: Dx = 25; y first: 1,1,0,0 -> 2/4,
# y second: 0,0,0,1 -> 1/4: Dy = 25.
JUDGE_P = [
    ("1", "x", "y", "p", "A"), ("1", "y", "x", "p", "A"),
    ("2", "x", "y", "p", "A"), ("2", "y", "x", "p", "A"),
    ("3", "x", "y", "p", "A"), ("3", "y", "x", "p", "B"),
    ("4", "x", "y", "p", "B"), ("4", "y", "x", "p", "B"),
]


def _row(frame: pl.DataFrame, column: str, value: str) -> dict:
    [row] = frame.filter(pl.col(column) == value).to_dicts()
    return row


def test_one_judge_by_hand() -> None:
    pb = position_bias(_frame(JUDGE_H, unknown=[8]), n_boot=200)
    h = _row(pb.per_judge, "judge_id", "h")
    assert h["n_games"] == 9
    assert h["n_order_known"] == 8
    assert h["reversal_rate"] == pytest.approx(2 / 4, abs=EXACT)
    assert h["pairs_both_orders"] == 4
    assert h["first_slot_win_rate"] == pytest.approx(3 / 8, abs=EXACT)
    assert h["second_slot_win_rate"] == pytest.approx(2 / 8, abs=EXACT)
    assert h["tie_rate"] == pytest.approx(4 / 9, abs=EXACT)
    assert h["exceeds_content_noise_bound"] is False
    assert h["q_position_following"] == pytest.approx(0.5, abs=EXACT)
    assert h["slot_a_advantage"] == pytest.approx(12.5, abs=EXACT)
    assert pb.slot_a_advantage.value == pytest.approx(12.5, abs=EXACT)
    assert pb.slot_a_advantage_sd.value == pytest.approx(0.0, abs=EXACT)
    assert pb.slot_a_advantage_max.value == pytest.approx(12.5, abs=EXACT)
    # 5 outcomes: items 1-4 in both orders, item 5 alone.
    assert pb.both_orders_share == pytest.approx(4 / 5, abs=EXACT)
    for name in ("reversal_rate", "first_slot_win_rate", "tie_rate", "slot_a_advantage"):
        assert h[f"{name}_low"] <= h[name] <= h[f"{name}_high"], name


def test_two_judges_by_hand_per_judge_per_system_and_pooled() -> None:
    pb = position_bias(_frame(JUDGE_H[:8] + JUDGE_P), n_boot=200, seed=3)
    p = _row(pb.per_judge, "judge_id", "p")
    assert p["reversal_rate"] == pytest.approx(3 / 4, abs=EXACT)
    assert p["exceeds_content_noise_bound"] is True
    assert p["first_slot_win_rate"] == pytest.approx(5 / 8, abs=EXACT)
    assert p["tie_rate"] == 0.0
    assert p["q_position_following"] == pytest.approx(0.5 + math.sqrt(0.5) / 2, abs=EXACT)
    assert p["slot_a_advantage"] == pytest.approx(25.0, abs=EXACT)
    # Pooled over judges: x first h 1,.5,0,.5 + p 1,1,1,0 = 5/8; x second h 0,1,0,.5 + p 0,0,1,1
    # = 3.5/8: Dx = 18.75. y first h 1,0,1,.5 + p 1,1,0,0 = 4.5/8; second h 0,.5,1,.5 + p 0,0,0,1
    # = 3/8: Dy = 18.75.
    for system in ("x", "y"):
        row = _row(pb.per_system, "system_id", system)
        assert row["slot_a_advantage"] == pytest.approx(18.75, abs=EXACT)
        assert row["games_first"] == 8
        assert row["games_second"] == 8
    assert pb.slot_a_advantage.value == pytest.approx(18.75, abs=EXACT)
    # Pooled reversal (2 + 3)/8; first slot (3 + 5)/16.
    assert pb.reversal_rate.value == pytest.approx(5 / 8, abs=EXACT)
    assert pb.pairs_both_orders == 8
    assert pb.first_slot_win_rate.value == pytest.approx(8 / 16, abs=EXACT)
    # Pooled A 8/16, B 5/16, r = 5/8: q = 1/2 + sqrt(1/4)/2 = 3/4.
    assert pb.q_position_following == pytest.approx(0.75, abs=EXACT)


def test_unequal_systems_sd_and_max_by_hand() -> None:
    # Three systems, one judge, one item each pair:
    #   x vs y both orders: (x,y) A, (y,x) A   -> Dx gets first 1, Dy gets first 1
    #   x vs z both orders: (x,z) A, (z,x) B   -> x wins both
    # x first: 1, 1 -> 1; x second: (y,x) A -> 0, (z,x) B -> 1 -> 1/2: Dx = 50
    # y first: 1 -> 1; y second: (x,y) A -> 0: Dy = 100
    # z first: (z,x) B -> 0; z second: (x,z) A -> 0: Dz = 0
    # mean 50, sd (ddof 1) sqrt((0 + 2500 + 2500)/2) = 50, max 100.
    rows = [("1", "x", "y", "j", "A"), ("1", "y", "x", "j", "A"),
            ("2", "x", "z", "j", "A"), ("2", "z", "x", "j", "B")]
    pb = position_bias(_frame(rows), n_boot=50)
    got = dict(zip(pb.per_system["system_id"], pb.per_system["slot_a_advantage"], strict=True))
    assert got == pytest.approx({"x": 50.0, "y": 100.0, "z": 0.0}, abs=EXACT)
    assert pb.slot_a_advantage.value == pytest.approx(50.0, abs=EXACT)
    assert pb.slot_a_advantage_sd.value == pytest.approx(50.0, abs=EXACT)
    assert pb.slot_a_advantage_max.value == pytest.approx(100.0, abs=EXACT)


def test_undefined_quantities_are_none_with_a_reason() -> None:
    # One game in one order only: no pair in both orders, no system in both slots.
    pb = position_bias(_frame([("1", "x", "y", "j", "A")]), n_boot=20)
    assert pb.reversal_rate.value is None
    assert pb.reversal_rate.reason
    assert pb.slot_a_advantage.value is None
    assert pb.slot_a_advantage.reason
    assert pb.slot_a_advantage_sd.value is None
    assert pb.slot_a_advantage_sd.low is None
    assert pb.q_position_following is None
    assert pb.q_reason
    j = _row(pb.per_judge, "judge_id", "j")
    assert j["reversal_rate"] is None
    assert j["reversal_rate_reason"]
    assert j["q_position_following"] is None
    assert j["q_reason"]
    assert j["exceeds_content_noise_bound"] is None
    assert j["first_slot_win_rate"] == 1.0
    # Reversal below 1/2: q not identified.
    rows = [("1", "x", "y", "j", "A"), ("1", "y", "x", "j", "B")]
    j = _row(position_bias(_frame(rows), n_boot=20).per_judge, "judge_id", "j")
    assert j["reversal_rate"] == 0.0
    assert j["q_position_following"] is None
    assert "below 1/2" in j["q_reason"]


def test_bad_arguments_raise() -> None:
    g = _frame(JUDGE_H)
    with pytest.raises(ConfigError, match="n_boot"):
        position_bias(g, n_boot=0)
    with pytest.raises(ConfigError, match="level"):
        position_bias(g, level=1.5)
    with pytest.raises(DesignError, match="lacks"):
        position_bias(g.drop("order_known"))
    with pytest.raises(DesignError, match="sharing a key"):
        position_bias(pl.concat([g, g.head(1)]))
    with pytest.raises(DesignError, match="itself"):
        position_bias(_frame([("1", "x", "x", "j", "A")]))


def test_q_against_the_papers_printed_cases() -> None:
    # who-judges-matters appendix A: Gemma reverses on 78.8% -> q ~ 0.88; Yi 53.4% -> q ~ 0.63;
    # both prefer the first slot (panel first-position A-rate 0.778).
    gemma, _ = position_following_q(0.788, 0.778, 0.222)
    yi, _ = position_following_q(0.534, 0.6, 0.4)
    assert gemma == pytest.approx(0.88, abs=PAPER_Q)
    assert yi == pytest.approx(0.63, abs=PAPER_Q)
    # The other branch, and the model it inverts: q^2 + (1 - q)^2 = r.
    low, _ = position_following_q(0.788, 0.2, 0.8)
    assert low == pytest.approx(1 - gemma, abs=EXACT)
    assert gemma**2 + (1 - gemma) ** 2 == pytest.approx(0.788, abs=EXACT)
    none, why = position_following_q(0.6, 0.4, 0.4)
    assert none is None
    assert why
    none, why = position_following_q(0.473, 0.8, 0.2)  # Llama: below the bound
    assert none is None
    assert "below" in why


# ---------------------------------------------------------------- simulation with known truth


def _sigmoid(x: np.ndarray | float) -> np.ndarray:
    return 1.0 / (1.0 + np.exp(-np.asarray(x, dtype=np.float64)))


def _simulate(
    rng: np.random.Generator, n_items: int, theta: np.ndarray, *, judge: str,
    q: float = 0.5, delta: float = 0.0, tau: float = 0.0, item_sd: float = 0.0,
) -> pl.DataFrame:
    """Every pair of systems on every item in both orders.

    ``judge="position"``: slot A wins with probability q, whatever the content.
    ``judge="content"``: a tie with probability tau, else A wins with probability
    sigmoid(theta_A - theta_B + delta_i), delta_i ~ N(delta, item_sd) per item.
    """
    n_s = len(theta)
    pairs = [(a, b) for a in range(n_s) for b in range(n_s) if a != b]  # both orders
    a_idx = np.tile([p[0] for p in pairs], n_items)
    b_idx = np.tile([p[1] for p in pairs], n_items)
    item = np.repeat(np.arange(n_items), len(pairs))
    u = rng.random(len(item))
    if judge == "position":
        verdict = np.where(u < q, "A", "B")
    else:
        d_item = delta + item_sd * rng.standard_normal(n_items)
        p_a = _sigmoid(theta[a_idx] - theta[b_idx] + d_item[item])
        tie = rng.random(len(item)) < tau
        verdict = np.where(tie, "tie", np.where(u < p_a, "A", "B"))
    score = np.where(verdict == "A", 1.0, np.where(verdict == "B", 0.0, 0.5))
    n = len(item)
    return pl.DataFrame({
        "item_id": item.astype(str), "system_a": np.char.add("s", a_idx.astype(str)),
        "system_b": np.char.add("s", b_idx.astype(str)), "judge_id": [judge] * n,
        "generation": np.zeros(n, dtype=np.int64), "replicate": np.zeros(n, dtype=np.int64),
        "verdict": verdict, "score_a": score, "order_known": np.ones(n, dtype=bool),
    })


def _content_truth(theta: np.ndarray, delta: float, tau: float, item_sd: float, draws: int = 400_000):
    """Truths of the content judge, by Monte Carlo over the item effect (delta_i), exact given it."""
    rng = np.random.default_rng(12345)
    d_i = delta + item_sd * rng.standard_normal(draws) if item_sd else np.array([delta])
    n_s = len(theta)
    adv, first, reversal = [], [], []
    for s in range(n_s):
        win_first = np.mean([np.mean(tau / 2 + (1 - tau) * _sigmoid(theta[s] - theta[o] + d_i))
                             for o in range(n_s) if o != s])
        win_second = np.mean([np.mean(tau / 2 + (1 - tau) * _sigmoid(theta[s] - theta[o] - d_i))
                              for o in range(n_s) if o != s])
        adv.append(100 * (win_first - win_second))
    for s in range(n_s):
        for o in range(n_s):
            if s == o:
                continue
            first.append(np.mean((1 - tau) * _sigmoid(theta[s] - theta[o] + d_i)))
            if s < o:  # pair (s, o): s first then o first; same winner or tie both times agrees
                s_first = (1 - tau) * _sigmoid(theta[s] - theta[o] + d_i)  # s wins shown first
                o_first = (1 - tau) * _sigmoid(theta[o] - theta[s] + d_i)  # o wins shown first
                agree = s_first * (1 - tau - o_first) + tau * tau + (1 - tau - s_first) * o_first
                reversal.append(np.mean(1 - agree))
    return float(np.mean(adv)), float(np.mean(first)), float(np.mean(reversal))


def test_a_pure_position_following_judge_is_recovered() -> None:
    q = 0.8
    rng = np.random.default_rng(7)
    g = _simulate(rng, 600, np.zeros(3), judge="position", q=q)
    pb = position_bias(g, n_boot=200)
    row = _row(pb.per_judge, "judge_id", "position")
    n_games, n_pairs = g.height, row["pairs_both_orders"]
    assert n_pairs == n_games // 2
    r_true = q**2 + (1 - q) ** 2
    assert abs(row["first_slot_win_rate"] - q) < MC_SIGMAS * math.sqrt(q * (1 - q) / n_games)
    assert abs(row["reversal_rate"] - r_true) < MC_SIGMAS * math.sqrt(r_true * (1 - r_true) / n_pairs)
    assert row["exceeds_content_noise_bound"] is True
    # q is a smooth function of r: delta method, dq/dr = 1 / (2 sqrt(2r - 1)).
    se_q = math.sqrt(r_true * (1 - r_true) / n_pairs) / (2 * math.sqrt(2 * r_true - 1))
    assert abs(row["q_position_following"] - q) < MC_SIGMAS * se_q
    # Each system wins q of its first-slot games and 1 - q of its second-slot ones: 100 (2q - 1).
    se_adv = 100 * math.sqrt(2 * 0.25 / (n_games / 3))
    assert abs(pb.slot_a_advantage.value - 100 * (2 * q - 1)) < MC_SIGMAS * se_adv


def test_a_content_judge_with_slot_bias_and_ties_is_recovered() -> None:
    theta, delta, tau = np.array([0.0, 0.5, 1.0, -0.7]), 0.4, 0.15
    rng = np.random.default_rng(11)
    g = _simulate(rng, 800, theta, judge="content", delta=delta, tau=tau)
    pb = position_bias(g, n_boot=200)
    adv_true, first_true, rev_true = _content_truth(theta, delta, tau, 0.0)
    row = _row(pb.per_judge, "judge_id", "content")
    n_games, n_pairs = g.height, row["pairs_both_orders"]
    assert abs(row["tie_rate"] - tau) < MC_SIGMAS * math.sqrt(tau * (1 - tau) / n_games)
    assert abs(row["first_slot_win_rate"] - first_true) < MC_SIGMAS * math.sqrt(0.25 / n_games)
    assert abs(row["reversal_rate"] - rev_true) < MC_SIGMAS * math.sqrt(0.25 / n_pairs)
    # Each system: a difference of two means over n_games/4 games each, sd <= 100 sqrt(.5 / (n/4)).
    se_adv = 100 * math.sqrt(0.5 / (n_games / 4))  # a mean of correlated terms: sd <= the largest
    assert abs(pb.slot_a_advantage.value - adv_true) < MC_SIGMAS * se_adv
    assert adv_true > 5  # the slot bias is visible at all


def test_item_bootstrap_intervals_cover_the_truth_at_about_the_nominal_rate() -> None:
    # Item heterogeneity in the slot bias (delta_i ~ N(0.5, 0.8)) makes the games of an
    # item correlated: only an item-clustered interval keeps its coverage.
    theta, delta, tau, item_sd = np.array([0.0, 0.6, -0.4]), 0.5, 0.1, 0.8
    adv_true, first_true, rev_true = _content_truth(theta, delta, tau, item_sd)
    rng = np.random.default_rng(2024)
    reps, covered = 200, {"adv": 0, "first": 0, "rev": 0}
    for _ in range(reps):
        g = _simulate(rng, 40, theta, judge="content", delta=delta, tau=tau, item_sd=item_sd)
        pb = position_bias(g, n_boot=300, seed=int(rng.integers(2**31)))
        covered["adv"] += pb.slot_a_advantage.low <= adv_true <= pb.slot_a_advantage.high
        covered["first"] += pb.first_slot_win_rate.low <= first_true <= pb.first_slot_win_rate.high
        covered["rev"] += pb.reversal_rate.low <= rev_true <= pb.reversal_rate.high
    for name, count in covered.items():
        assert COVERAGE_RANGE[0] <= count / reps <= COVERAGE_RANGE[1], (name, count / reps)


def test_a_bench_sized_panel_gives_every_judge_and_system_a_row() -> None:
    # Its time is measured in bench/pairwise.py (tests never assert on wall time).
    rng = np.random.default_rng(0)
    n_items, n_judges, opponents = 500, 6, 19  # 19 systems against a baseline, both orders
    per_item = n_judges * opponents * 2
    item = np.repeat(np.arange(n_items), per_item)
    judge = np.tile(np.repeat(np.arange(n_judges), opponents * 2), n_items)
    other = np.tile(np.repeat(np.arange(1, opponents + 1), 2), n_items * n_judges)
    first = np.tile([True, False], n_items * n_judges * opponents)
    verdict = rng.choice(np.array(["A", "B", "tie"]), size=len(item), p=[0.5, 0.4, 0.1])
    n = len(item)
    g = pl.DataFrame({
        "item_id": item.astype(str),
        "system_a": np.where(first, "s0", np.char.add("s", other.astype(str))),
        "system_b": np.where(first, np.char.add("s", other.astype(str)), "s0"),
        "judge_id": np.char.add("j", judge.astype(str)), "generation": np.zeros(n, dtype=np.int64),
        "replicate": np.zeros(n, dtype=np.int64), "verdict": verdict,
        "score_a": np.where(verdict == "A", 1.0, np.where(verdict == "B", 0.0, 0.5)),
        "order_known": np.ones(n, dtype=bool),
    })
    pb = position_bias(g, n_boot=1000)
    assert pb.per_judge.height == 6
    assert pb.per_system.height == 20
    assert pb.slot_a_advantage.low is not None


# ---------------------------------------------------------------- the real logs

WINNER_SLOT_G1 = {"model_1": "A", "model_2": "B", "tie": "tie"}  # game 1 shows model_1 first
WINNER_SLOT_G2 = {"model_1": "B", "model_2": "A", "tie": "tie"}  # game 2 shows model_2 first
ARENA_SLOT = {"A>>B": "A", "A>B": "A", "A=B": "tie", "B>A": "B", "B>>A": "B"}


def _raw_games() -> dict[str, dict]:
    """Per judge: shown-slot verdicts and (reversed?) of pairs with both games judged, from json."""
    out: dict[str, dict] = {}

    def add(judge: str, verdicts: list[str], both: bool, reversed_: bool) -> None:
        d = out.setdefault(judge, {"verdicts": [], "pairs": 0, "reversed": 0})
        d["verdicts"].extend(verdicts)
        d["pairs"] += both
        d["reversed"] += both and reversed_

    for path in sorted((SAMPLES / "mt_bench").glob("pair__*.jsonl")):
        for line in path.read_text().splitlines():
            r = json.loads(line)
            g1, g2 = r["g1_winner"], r["g2_winner"]  # already model names; "error" = not stored
            verdicts = ([WINNER_SLOT_G1[g1]] if g1 != "error" else []) + (
                [WINNER_SLOT_G2[g2]] if g2 != "error" else [])
            add(r["judge"][0], verdicts, "error" not in (g1, g2), g1 != g2)
    seen = set()
    for path in sorted((SAMPLES / "arena_hard").glob("*.jsonl")):
        for line in path.read_text().splitlines():
            r = json.loads(line)
            key = (r["judge"], r.get("question_id", r.get("uid")), r["model"])
            if key in seen:  # the v2.0 shortest5 lines are lines of scores_only too
                continue
            seen.add(key)
            s0, s1 = (g["score"] for g in r["games"])  # slot-relative; null = not stored
            v0, v1 = ARENA_SLOT.get(s0), ARENA_SLOT.get(s1)
            # game 0: baseline first; game 1: model first. Winner as a system:
            won0 = {"A": "baseline", "B": "model", "tie": "tie"}.get(v0)
            won1 = {"A": "model", "B": "baseline", "tie": "tie"}.get(v1)
            add(r["judge"], [v for v in (v0, v1) if v], v0 is not None and v1 is not None, won0 != won1)
    return out


@pytest.fixture(scope="module")
def real_games(tmp_path_factory: pytest.TempPathFactory) -> pl.DataFrame:
    paths = sorted((SAMPLES / "mt_bench").glob("pair__*.jsonl")) + sorted(
        (SAMPLES / "arena_hard").glob("*.jsonl"))
    store = Store(str(tmp_path_factory.mktemp("store") / "store"))
    ingest(store, discover_sources([str(p) for p in paths]), ValidationOptions())
    return games(store.scan("pairwise").collect())


def test_real_logs_per_judge_counts_equal_the_raw_lines(real_games: pl.DataFrame) -> None:
    raw = _raw_games()
    pb = position_bias(real_games, n_boot=100)
    assert sorted(pb.per_judge["judge_id"]) == sorted(raw)
    for judge, d in raw.items():
        row = _row(pb.per_judge, "judge_id", judge)
        v = d["verdicts"]
        assert row["n_games"] == len(v), judge
        assert row["first_slot_win_rate"] == pytest.approx(v.count("A") / len(v), abs=EXACT), judge
        assert row["second_slot_win_rate"] == pytest.approx(v.count("B") / len(v), abs=EXACT), judge
        assert row["tie_rate"] == pytest.approx(v.count("tie") / len(v), abs=EXACT), judge
        assert row["pairs_both_orders"] == d["pairs"], judge
        assert row["reversal_rate"] == pytest.approx(d["reversed"] / d["pairs"], abs=EXACT), judge
    # Pooled over the panel.
    pairs = sum(d["pairs"] for d in raw.values())
    assert pb.pairs_both_orders == pairs
    assert pb.reversal_rate.value == pytest.approx(sum(d["reversed"] for d in raw.values()) / pairs)


def test_real_logs_slot_a_advantage_of_a_baseline_design_by_hand(real_games: pl.DataFrame) -> None:
    # ServiceNow's gemini-1.5-pro judge, model phi-3-medium against the v0.1 baseline: the model's
    # win rate shown first (game 1: A wins) minus shown second (game 0: B wins), ties 1/2.
    path = SAMPLES / "arena_hard" / "v0.1__ServiceNow__gemini-1.5-pro-api-0514__phi-3-medium-4k-instruct.jsonl"
    records = [json.loads(line) for line in path.read_text().splitlines()]
    value = {"A": 1.0, "tie": 0.5, "B": 0.0}
    first = [value[ARENA_SLOT[r["games"][1]["score"]]] for r in records]
    second = [1.0 - value[ARENA_SLOT[r["games"][0]["score"]]] for r in records]
    expected = 100 * (sum(first) / len(first) - sum(second) / len(second))
    judge = real_games.filter(pl.col("judge_id") == "gemini-1.5-pro-api-preview")
    pb = position_bias(judge, n_boot=100)
    row = _row(pb.per_system, "system_id", "phi-3-medium-4k-instruct")
    assert row["slot_a_advantage"] == pytest.approx(expected, abs=EXACT)
    # With two systems the baseline's advantage is the same number.
    assert pb.slot_a_advantage.value == pytest.approx(expected, abs=EXACT)


def test_samples_are_here() -> None:
    assert Path(SAMPLES / "mt_bench").is_dir()
    assert Path(SAMPLES / "arena_hard").is_dir()


def test_the_simulators_position_bias_is_recovered_per_judge_and_system() -> None:
    """The slot-A advantage of simulated judgments against its expectation from the simulator's truth.

    With no family preference, no prompt effects and only hard verdicts, a game
    of A against B by judge j gives A the expected score
    m = (sigma(eta - tau) + sigma(eta + tau)) / 2, eta = theta_A - theta_B + delta_j
    (``docs/simulation.md``); the expected advantage of system s is the mean of
    m over its games shown first minus the mean of 1 - m over its games shown
    second, pooled over the judges.
    """
    from jurymeter.simulate import SimulationParams, simulate_dump

    params = SimulationParams(n_systems=5, n_items=400, n_judges=3, n_generations=1, n_replicates=1,
                              pairwise_pairs=None, family_preference=0.0, sigma_pair_si=0.0,
                              weighted_fraction=0.0, seed=11)
    dump = simulate_dump(params)
    truth = dump.truth
    theta = truth["pairwise"]["theta"]
    delta = {j["judge_id"]: j["position_bias"] for j in truth["judges"]}
    tau = truth["pairwise"]["tie_threshold"]

    def m(a: str, b: str, judge: str) -> float:
        eta = theta[a] - theta[b] + delta[judge]
        return 0.5 * (1 / (1 + math.exp(-(eta - tau))) + 1 / (1 + math.exp(-(eta + tau))))

    played = games(dump.pairwise)
    pb = position_bias(played, n_boot=200)
    for system in theta:
        first = [m(system, o, j) for o in theta if o != system for j in delta]
        second = [1 - m(o, system, j) for o in theta if o != system for j in delta]
        expected = 100 * (sum(first) / len(first) - sum(second) / len(second))
        row = _row(pb.per_system, "system_id", system)
        # 400 items x 4 opponents x 3 judges per slot: the sd of one slot's mean is about 1.3 points.
        assert row["slot_a_advantage"] == pytest.approx(expected, abs=4 * 100 * math.sqrt(2 * 0.25 / 4800)), system
