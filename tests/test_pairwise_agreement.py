"""Judge agreement (``jurymeter.stats.pairwise.agreement``) against hand counts, statsmodels and real logs.

Independent references: tiny frames worked out by hand in the comments;
``statsmodels.stats.inter_rater.cohens_kappa`` on contingency tables built by
plain Python loops (``itertools.combinations`` over a judgment's replicates,
dicts matching two judges' judgments); the lesnikow MT-Bench re-runs read with
``json`` (replicates in ``tstamp`` order, as the samples' README says).
"""

from __future__ import annotations

import itertools
import json

import numpy as np
import polars as pl
import pytest
from statsmodels.stats.inter_rater import cohens_kappa

from jurymeter.errors import DesignError
from jurymeter.io.ingest import ingest
from jurymeter.io.sources import discover_sources
from jurymeter.io.store import Store
from jurymeter.io.validate import ValidationOptions
from jurymeter.stats.pairwise.agreement import judge_agreement, judge_failure_rates
from jurymeter.stats.pairwise.games import games
from samples import SAMPLES

EXACT = 1e-12  # ratios of small integers
VERDICTS = ("A", "B", "tie")


def _frame(rows: list[tuple], gold: list[str | None] | None = None) -> pl.DataFrame:
    """(item, system_a, system_b, judge, replicate, verdict) -> a games frame, generation 0."""
    data = {
        "item_id": [r[0] for r in rows], "system_a": [r[1] for r in rows],
        "system_b": [r[2] for r in rows], "judge_id": [r[3] for r in rows],
        "generation": [0] * len(rows), "replicate": [r[4] for r in rows],
        "verdict": [r[5] for r in rows],
    }
    if gold is not None:
        data["gold"] = gold
    return pl.DataFrame(data)


def _row(frame: pl.DataFrame, **match: str) -> dict:
    [row] = frame.filter(pl.all_horizontal(pl.col(k) == v for k, v in match.items())).to_dicts()
    return row


def test_kappa_between_judges_by_hand_and_against_statsmodels() -> None:
    # j: A A B B tie A;  k: A B B B tie tie  (6 shared judgments)
    # table (rows j A,B,tie; cols k): [[1,1,1],[0,2,0],[0,0,1]]; p_o = 4/6;
    # p_e = (3*1 + 2*3 + 1*2)/36 = 11/36; kappa = (24 - 11)/(36 - 11) = 13/25.
    # l judges item 9 only: shares nothing.
    vj = ["A", "A", "B", "B", "tie", "A"]
    vk = ["A", "B", "B", "B", "tie", "tie"]
    rows = [(str(i), "x", "y", "j", 0, v) for i, v in enumerate(vj)]
    rows += [(str(i), "x", "y", "k", 0, v) for i, v in enumerate(vk)]
    rows += [("9", "x", "y", "l", 0, "A")]
    pairs = judge_agreement(_frame(rows)).pairs
    jk = _row(pairs, judge_1="j", judge_2="k")
    assert jk["n_shared"] == 6
    assert jk["agreement"] == pytest.approx(4 / 6, abs=EXACT)
    assert jk["kappa"] == pytest.approx(13 / 25, abs=EXACT)
    reference = cohens_kappa(np.array([[1, 1, 1], [0, 2, 0], [0, 0, 1]])).kappa
    assert jk["kappa"] == pytest.approx(reference, abs=EXACT)
    jl = _row(pairs, judge_1="j", judge_2="l")
    assert jl["n_shared"] == 0
    assert jl["agreement"] is None
    assert jl["kappa"] is None
    assert jl["kappa_reason"]
    assert pairs.height == 3  # every pair of the 3 judges


def test_kappa_is_none_when_expected_agreement_is_one() -> None:
    rows = [(str(i), "x", "y", j, 0, "A") for i in range(4) for j in ("j", "k")]
    jk = _row(judge_agreement(_frame(rows)).pairs, judge_1="j", judge_2="k")
    assert jk["agreement"] == 1.0
    assert jk["kappa"] is None
    assert "expected agreement" in jk["kappa_reason"]


def test_replicate_agreement_by_hand() -> None:
    # Judgment (1, x, y): replicates 0 A, 1 A, 2 B -> pairs (A,A) (A,B) (A,B);
    # judgment (2, x, y): replicates 0 B, 1 tie   -> pair (B,tie).
    # p_o = 1/4. First ratings A,A,A,B: (3/4, 1/4, 0); second A,B,B,tie: (1/4, 2/4, 1/4).
    # p_e = 3/16 + 2/16 = 5/16; kappa = (4/16 - 5/16)/(11/16) = -1/11.
    # The same shown order only: (1, y, x) is another judgment and has one replicate.
    rows = [("1", "x", "y", "j", 0, "A"), ("1", "x", "y", "j", 1, "A"), ("1", "x", "y", "j", 2, "B"),
            ("2", "x", "y", "j", 0, "B"), ("2", "x", "y", "j", 1, "tie"), ("1", "y", "x", "j", 0, "A")]
    j = _row(judge_agreement(_frame(rows)).per_judge, judge_id="j")
    assert j["n_games"] == 6
    assert j["replicate_pairs"] == 4
    assert j["replicate_agreement"] == pytest.approx(1 / 4, abs=EXACT)
    assert j["replicate_kappa"] == pytest.approx(-1 / 11, abs=EXACT)
    # No replicates at all: None with a reason.
    one = _row(judge_agreement(_frame(rows[-1:])).per_judge, judge_id="j")
    assert one["replicate_agreement"] is None
    assert one["replicate_reason"]


def test_gold_accuracy_by_hand_and_none_without_gold() -> None:
    # j: verdicts A, B, tie against gold A, A, tie -> 2/3; k: gold missing on its games.
    rows = [("1", "x", "y", "j", 0, "A"), ("2", "x", "y", "j", 0, "B"), ("3", "x", "y", "j", 0, "tie"),
            ("1", "x", "y", "k", 0, "A")]
    per = judge_agreement(_frame(rows, gold=["A", "A", "tie", None])).per_judge
    j, k = _row(per, judge_id="j"), _row(per, judge_id="k")
    assert j["n_gold"] == 3
    assert j["gold_accuracy"] == pytest.approx(2 / 3, abs=EXACT)
    assert j["gold_reason"] is None
    assert k["n_gold"] == 0
    assert k["gold_accuracy"] is None
    assert k["gold_reason"]
    nogold = _row(judge_agreement(_frame(rows)).per_judge, judge_id="j")
    assert nogold["gold_accuracy"] is None
    assert "gold" in nogold["gold_reason"]
    other = judge_agreement(_frame(rows).with_columns(pl.lit("A").alias("human")), gold_column="human")
    assert _row(other.per_judge, judge_id="j")["gold_accuracy"] == pytest.approx(1 / 3, abs=EXACT)


def test_random_panel_against_brute_force_and_statsmodels() -> None:
    rng = np.random.default_rng(5)
    rows = []
    for item in range(30):
        for a, b in (("x", "y"), ("y", "x"), ("x", "z")):
            for judge in ("j1", "j2", "j3"):
                for rep in range(int(rng.integers(1, 4))):  # 1..3 replicates
                    if rng.random() < 0.9:  # some judgments missing: unequal sharing
                        rows.append((str(item), a, b, judge, rep, str(rng.choice(VERDICTS))))
    result = judge_agreement(_frame(rows))
    by_key: dict[str, dict[tuple, str]] = {}
    for item, a, b, judge, rep, v in rows:
        by_key.setdefault(judge, {})[(item, a, b, rep)] = v
    index = {v: k for k, v in enumerate(VERDICTS)}
    for j1, j2 in itertools.combinations(sorted(by_key), 2):
        table = np.zeros((3, 3))
        for key, v1 in by_key[j1].items():
            if key in by_key[j2]:
                table[index[v1], index[by_key[j2][key]]] += 1
        row = _row(result.pairs, judge_1=j1, judge_2=j2)
        assert row["n_shared"] == table.sum()
        assert row["agreement"] == pytest.approx(np.trace(table) / table.sum(), abs=EXACT)
        assert row["kappa"] == pytest.approx(cohens_kappa(table).kappa, abs=1e-10)
    for judge, judged in by_key.items():
        groups: dict[tuple, list[tuple[int, str]]] = {}
        for (item, a, b, rep), v in judged.items():
            groups.setdefault((item, a, b), []).append((rep, v))
        table = np.zeros((3, 3))
        for reps in groups.values():
            for (_, v1), (_, v2) in itertools.combinations(sorted(reps), 2):  # earlier first
                table[index[v1], index[v2]] += 1
        row = _row(result.per_judge, judge_id=judge)
        assert row["replicate_pairs"] == table.sum()
        assert row["replicate_agreement"] == pytest.approx(np.trace(table) / table.sum(), abs=EXACT)
        assert row["replicate_kappa"] == pytest.approx(cohens_kappa(table).kappa, abs=1e-10)


def test_bad_games_raise() -> None:
    rows = [("1", "x", "y", "j", 0, "A")]
    with pytest.raises(DesignError, match="verdict"):
        judge_agreement(_frame([("1", "x", "y", "j", 0, "C")]))
    with pytest.raises(DesignError, match="sharing a key"):
        judge_agreement(_frame(rows + rows))
    with pytest.raises(DesignError, match="lacks"):
        judge_agreement(_frame(rows).drop("replicate"))


def test_failure_rates_by_hand() -> None:
    # j: 8 stored, 1 parse failure, 1 failed call -> 1/10 each;
    # k: 3 stored, 2 failed calls, 1 other reason -> 0/6 and 2/6; l: nothing at all.
    out = judge_failure_rates(
        {"j": 8, "k": 3, "l": 0},
        {"j": {"parse_failure": 1, "judge_call_failed": 1},
         "k": {"judge_call_failed": 2, "score_out_of_scale": 1}},
    )
    j, k, l_ = _row(out, judge_id="j"), _row(out, judge_id="k"), _row(out, judge_id="l")
    assert j["parse_failure_rate"] == pytest.approx(0.1, abs=EXACT)
    assert j["judge_call_failed_rate"] == pytest.approx(0.1, abs=EXACT)
    assert k["parse_failure_rate"] == 0.0
    assert k["failures"] == 3
    assert k["judge_call_failed_rate"] == pytest.approx(2 / 6, abs=EXACT)
    assert l_["parse_failure_rate"] is None
    assert l_["reason"]
    with pytest.raises(DesignError, match="judgments_by_judge"):
        judge_failure_rates({"j": -1}, {})


def test_real_mt_bench_reruns_replicate_agreement_equals_the_raw_lines(tmp_path) -> None:
    path = SAMPLES / "mt_bench" / "pair__lesnikow-fast-chat__gpt-4-turbo_pair.q81-82.jsonl"
    store = Store(str(tmp_path / "store"))
    ingest(store, discover_sources([str(path)]), ValidationOptions())
    result = judge_agreement(games(store.scan("pairwise").collect()))
    # From the raw lines: each line is two judgments (game 1 model_1 first, game 2 model_2 first);
    # the re-runs of one (question, turn) are replicates in tstamp order.
    slot = {1: {"model_1": "A", "model_2": "B", "tie": "tie"},
            2: {"model_1": "B", "model_2": "A", "tie": "tie"}}
    groups: dict[tuple, list[tuple[float, str]]] = {}
    for line in path.read_text().splitlines():
        r = json.loads(line)
        for game in (1, 2):
            groups.setdefault((r["question_id"], r["turn"], game), []).append(
                (r["tstamp"], slot[game][r[f"g{game}_winner"]]))
    index = {v: k for k, v in enumerate(VERDICTS)}
    table = np.zeros((3, 3))
    for reps in groups.values():
        for (_, v1), (_, v2) in itertools.combinations(sorted(reps), 2):
            table[index[v1], index[v2]] += 1
    row = _row(result.per_judge, judge_id="gpt-4-turbo")
    assert row["replicate_pairs"] == table.sum() == 16
    assert row["replicate_agreement"] == pytest.approx(np.trace(table) / table.sum(), abs=EXACT)
    assert row["replicate_kappa"] == pytest.approx(cohens_kappa(table).kappa, abs=1e-10)
    assert row["gold_accuracy"] is None  # MT-Bench pair logs carry no gold label
