"""Record keys that lose nothing: one output rated in several batches or runs is several observations.

| contract | independent reference |
| --- | --- |
| a ``batch-plan`` filled in with scores (each output rated in 30 batches) ingests whole: nothing quarantined, every rating stored | the filled-in CSV read back with the standard library's ``csv``, compared as a multiset |
| ``jurymeter sequential`` on it recovers the generating carry-over within its batch-bootstrap interval, and finds none for the judge without one | the simulation's truth (rho 1.2 and 0) |
| ``jurymeter gstudy`` on it counts each output's 30 batch ratings as replicates (``r:sij``), keeps every record, and its system means are the plain means | 30 replicates by construction; means summed in plain Python |
| the same rating delivered again is an exact duplicate; the same batch and position with another score is a conflict; logs without batches keep their old keys | hand-written records, hand-counted |
| a second run (``run_id``) of one output is stored beside the first | hand-written records |
| ``store info`` counts the batch ratings as replicates; only an item set with such cells is flagged for the fits | 30 by construction; hand-written records over three files |
| with 15 ratings left out, Henderson's every-record fit keeps 1425 observations as replicates and its system means are the plain means | the CSV's scores summed in plain Python |
"""

from __future__ import annotations

import csv
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

import numpy as np
import orjson
import pytest
from typer.testing import CliRunner

from ingest_util import run_ingest, write_jsonl
from jurymeter.cli.app import app
from jurymeter.io.store import Store
from jurymeter.stats.sequential.simulate import simulate_sequential

ITEMS = [f"q{k}" for k in range(1, 9)]
SYSTEMS = ["sys-a", "sys-b", "sys-c"]
# Output quality (logits): system effect + item effect, so the G-study has both.
SYSTEM_EFFECT = {"sys-a": -0.6, "sys-b": 0.0, "sys-c": 0.6}
ITEM_EFFECT = dict(zip(ITEMS, np.linspace(-0.5, 0.5, len(ITEMS)), strict=True))
TRUTH = {"judge-lean": 1.2, "judge-flat": 0.0}
CYCLES = 30  # batches of each (judge, system): each output is rated 30 times by each judge


def _fill(plan_rows: list[dict[str, str]]) -> list[dict[str, Any]]:
    """Scores for the plan's rows from the Markov GLMM: batch b rates system (b // 2) mod 3's answers."""
    units = [(s, i) for s in SYSTEMS for i in ITEMS]
    theta = np.array([SYSTEM_EFFECT[s] + ITEM_EFFECT[i] for s, i in units])
    code = {u: k for k, u in enumerate(units)}
    batches: dict[str, list[dict[str, str]]] = defaultdict(list)
    for row in plan_rows:
        batches[row["batch_id"]].append(row)
    filled = []
    for judge, rho in TRUTH.items():
        ids = sorted(b for b, rows in batches.items() if rows[0]["judge_id"] == judge)
        orders, systems = [], []
        for b in ids:
            rows = sorted(batches[b], key=lambda r: int(r["batch_position"]))
            m = int(b[1:]) // len(TRUTH)  # the judge's m-th batch (judges take batches in turn)
            system = SYSTEMS[m % len(SYSTEMS)]
            systems.append(system)
            orders.append([code[(system, r["item_id"])] for r in rows])
        drawn = simulate_sequential(theta, np.array(orders), rng=7 + len(filled), rho=[rho], batch_sd=0.5,
                                    batch_ids=ids)
        for (batch, position, _unit, score) in drawn.iter_rows():
            row = next(r for r in batches[batch] if int(r["batch_position"]) == position)
            filled.append({**row, "system_id": systems[ids.index(batch)], "score": str(int(score))})
    return filled


@pytest.fixture(scope="module")
def batched(tmp_path_factory: pytest.TempPathFactory) -> tuple[Store, list[dict[str, Any]]]:
    root = tmp_path_factory.mktemp("batched")
    (root / "items.txt").write_text("\n".join(ITEMS) + "\n")
    (root / "judges.txt").write_text("\n".join(TRUTH) + "\n")
    plan = root / "plan.csv"
    n_batches = len(TRUTH) * len(SYSTEMS) * CYCLES
    made = CliRunner().invoke(app, ["batch-plan", "--out", str(plan), "--items", str(root / "items.txt"),
                                    "--judges", str(root / "judges.txt"), "--batches", str(n_batches)])
    assert made.exit_code == 0, made.output
    with plan.open(newline="") as f:
        rows = list(csv.DictReader(f))
    assert list(rows[0]) == ["batch_id", "batch_position", "item_id", "judge_id"]
    filled = _fill(rows)
    log = root / "ratings.csv"
    with log.open("w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=["batch_id", "batch_position", "item_id", "judge_id", "system_id",
                                               "score"])
        writer.writeheader()
        writer.writerows(filled)
    store = Store(str(root / "store"))
    result = CliRunner().invoke(app, ["ingest", "--store", store.url, "--item-set", "seq", "--json", str(log)])
    assert result.exit_code == 0, result.output
    return store, filled


def test_every_rating_of_a_filled_in_batch_plan_is_stored(batched: tuple[Store, list[dict[str, Any]]]) -> None:
    store, filled = batched
    assert len(filled) == 2 * 3 * CYCLES * 8  # 1440 ratings, each output 30 times by each judge
    repeats = Counter((r["item_id"], r["system_id"], r["judge_id"]) for r in filled)
    assert set(repeats.values()) == {CYCLES}  # under the old key every one of them was a conflict
    marker = next(store.marker(p) for p in store.committed().values())
    assert marker is not None
    assert marker["counts"]["accepted"] == 1440
    assert marker["counts"]["quarantined"] == 0
    assert marker["counts"]["duplicates_dropped"] == 0
    stored = store.scan("pointwise", "seq").select(
        "batch_id", "batch_position", "item_id", "judge_id", "system_id", "score").collect()
    got = Counter((b, int(p), i, j, s, float(v)) for b, p, i, j, s, v in stored.iter_rows())
    want = Counter((r["batch_id"], int(r["batch_position"]), r["item_id"], r["judge_id"], r["system_id"],
                    float(r["score"])) for r in filled)
    assert got == want


def test_sequential_recovers_the_carry_over(batched: tuple[Store, list[dict[str, Any]]]) -> None:
    store, _ = batched
    result = CliRunner().invoke(app, ["sequential", "--store", store.url, "--item-set", "seq", "--unit", "output",
                                      "--boot", "60", "--simulations", "40", "--json"])
    assert result.exit_code == 0, result.output
    report = orjson.loads(result.stdout)
    lean, flat = report["judges"]["judge-lean"], report["judges"]["judge-flat"]
    assert lean["ratings"] == flat["ratings"] == 720
    assert lean["batches"] == flat["batches"] == 90
    assert lean["rho_1_low"] <= TRUTH["judge-lean"] <= lean["rho_1_high"]
    assert lean["rho_1_low"] > 0
    assert flat["rho_1_low"] <= 0.0 <= flat["rho_1_high"]
    assert report["ratings_without_batch"] == 0


def test_gstudy_counts_the_batch_ratings_as_replicates(batched: tuple[Store, list[dict[str, Any]]]) -> None:
    store, filled = batched
    result = CliRunner().invoke(app, ["gstudy", "--store", store.url, "--item-set", "seq", "--json",
                                      "--boot", "20"])
    assert result.exit_code == 0, result.output
    report = orjson.loads(result.stdout)
    assert report["design"] == "s x i x j x r:sij", report["design"]
    block = report["block"]
    assert block["replicates"] == CYCLES
    assert block["records_in"] == 1440
    assert block["observations_used"] == 1440
    sums: dict[str, list[float]] = defaultdict(list)
    for r in filled:
        sums[r["system_id"]].append(float(r["score"]))
    means = {row["system_id"]: row["mean"] for row in report["leaderboard"]}
    for system, scores in sums.items():
        assert means[system] == pytest.approx(sum(scores) / len(scores), abs=1e-12)


BASE = {"item_set": "keys", "item_id": "i1", "system_id": "a", "judge_id": "j"}


def test_batch_and_run_join_the_key(tmp_path: Path) -> None:
    rows: list[dict[str, Any] | str] = [
        {**BASE, "score": 3, "batch_id": "b1", "batch_position": 0},
        {**BASE, "score": 4, "batch_id": "b2", "batch_position": 1},  # another batch: kept
        {**BASE, "score": 4, "batch_id": "b2", "batch_position": 1},  # the same rating again: dropped
        {**BASE, "score": 5, "batch_id": "b2", "batch_position": 2},  # the same batch, another position: kept
        {**BASE, "score": 6, "batch_id": "b3", "batch_position": 0},
        {**BASE, "score": 7, "batch_id": "b3", "batch_position": 0},  # b3 position 0 twice, two scores: conflict
        {**BASE, "score": 8},  # no batch: the old key
        {**BASE, "score": 8, "run_id": "run-2"},  # another run of the same output: kept
    ]
    report = run_ingest(tmp_path / "store", write_jsonl(tmp_path / "b.jsonl", rows))
    (source,) = report.sources
    assert (source.accepted, source.quarantined, source.duplicates_dropped) == (5, 2, 1)
    store = Store(str(tmp_path / "store"))
    scores = sorted(store.scan("pointwise", "keys").collect()["score"].to_list())
    assert scores == [3.0, 4.0, 5.0, 8.0, 8.0]
    # a later file: a re-delivered batch rating is a duplicate, a new score for it a conflict
    later = [{**BASE, "score": 3, "batch_id": "b1", "batch_position": 0},
             {**BASE, "score": 9, "batch_id": "b2", "batch_position": 2},
             {**BASE, "score": 8, "batch_id": "b4", "batch_position": 0}]
    again = run_ingest(store, write_jsonl(tmp_path / "later.jsonl", later))
    (second,) = again.sources
    assert (second.accepted, second.quarantined, second.duplicates_dropped) == (1, 1, 1)


def test_logs_without_batches_keep_their_keys(tmp_path: Path) -> None:
    rows: list[dict[str, Any] | str] = [{**BASE, "score": 3}, {**BASE, "score": 3}, {**BASE, "score": 4},
                                        {**BASE, "item_id": "i2", "score": 1},
                                        {**BASE, "item_id": "i2", "score": 1, "replicate": 1}]
    report = run_ingest(tmp_path / "store", write_jsonl(tmp_path / "plain.jsonl", rows))
    (source,) = report.sources
    # i1: three records of one key with two values, all conflicts; i2: two replicates
    assert (source.accepted, source.quarantined, source.duplicates_dropped) == (2, 3, 0)


def test_store_info_counts_the_batch_ratings_as_replicates(batched: tuple[Store, list[dict[str, Any]]]) -> None:
    store, _ = batched
    result = CliRunner().invoke(app, ["store", "info", "--store", store.url, "--json"])
    assert result.exit_code == 0, result.output
    (row,) = orjson.loads(result.stdout)["item_sets"]
    assert (row["records"], row["replicates"], row["cells_present"]) == (1440, CYCLES, 3 * 8 * 2)


def test_only_an_item_set_with_several_ratings_of_a_cell_is_flagged(
        batched: tuple[Store, list[dict[str, Any]]], tmp_path: Path) -> None:
    from jurymeter.io.store import RATED_CELLS_FILE

    store, _ = batched
    assert (Path(store.root) / store.partition_dir("pointwise", "seq") / RATED_CELLS_FILE).is_file()
    # one rating per cell, batched or not, over two files: no flag (the fits read such records as they are)
    once = [{**BASE, "score": 3, "batch_id": "b1", "batch_position": 0},
            {**BASE, "item_id": "i2", "score": 4, "batch_id": "b1", "batch_position": 1}]
    plain = Store(str(tmp_path / "plain"))
    run_ingest(plain, write_jsonl(tmp_path / "once.jsonl", once))
    run_ingest(plain, write_jsonl(tmp_path / "again.jsonl", [*once, {**BASE, "item_id": "i3", "score": 1}]))
    assert not (Path(plain.root) / plain.partition_dir("pointwise", "keys") / RATED_CELLS_FILE).exists()
    # a later file rates i1 in another batch: now flagged
    run_ingest(plain, write_jsonl(tmp_path / "more.jsonl", [{**BASE, "score": 5, "batch_id": "b2",
                                                            "batch_position": 0}]))
    assert (Path(plain.root) / plain.partition_dir("pointwise", "keys") / RATED_CELLS_FILE).is_file()


def test_the_every_record_fit_counts_uneven_batch_ratings(
        batched: tuple[Store, list[dict[str, Any]]], tmp_path: Path) -> None:
    _, filled = batched
    kept = [r for k, r in enumerate(filled) if k % 97 != 5]  # 15 ratings left out: uneven cells
    log = tmp_path / "uneven.csv"
    with log.open("w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(kept[0]))
        writer.writeheader()
        writer.writerows(kept)
    store = Store(str(tmp_path / "store"))
    run_ingest(store, log, item_set="seq")
    result = CliRunner().invoke(app, ["gstudy", "--store", store.url, "--item-set", "seq", "--json",
                                      "--boot", "20", "--estimator", "henderson"])
    assert result.exit_code == 0, result.output
    report = orjson.loads(result.stdout)
    assert len(kept) == 1440 - 15
    assert report["estimator"] == "henderson"
    assert report["design"] == "s x i x j x r:sij"
    assert report["block"]["observations_used"] == 1425
    # every rating is its own cell (system, item, judge, renumbered replicate): the system means are plain means
    sums: dict[str, list[float]] = defaultdict(list)
    for r in kept:
        sums[r["system_id"]].append(float(r["score"]))
    for system, scores in sums.items():
        assert report["system_means"][system] == pytest.approx(sum(scores) / len(scores), abs=1e-12)


def test_a_pairwise_game_judged_in_two_batches_is_two_games(tmp_path: Path) -> None:
    systems = ["a", "b", "c"]
    rows: list[dict[str, Any] | str] = []
    for item in range(12):
        for x, y in ((x, y) for x in systems for y in systems if x != y):
            for batch in ("b1", "b2"):  # each ordered game in two batches, with verdicts that differ
                rows.append({"item_set": "pw", "item_id": f"i{item}", "system_a": x, "system_b": y,
                             "judge_id": "j", "winner": ("A", "B", "tie")[(item + len(batch + x + y) + ord(batch[1]))
                                                                          % 3],
                             "batch_id": f"{batch}-{item}", "batch_position": 3 * systems.index(x) + systems.index(y)})
    report = run_ingest(tmp_path / "store", write_jsonl(tmp_path / "pw.jsonl", rows))
    (source,) = report.sources
    assert (source.accepted, source.quarantined, source.duplicates_dropped) == (144, 0, 0)
    result = CliRunner().invoke(app, ["pairwise", "--store", str(tmp_path / "store"), "--item-set", "pw",
                                      "--json", "--boot", "20"])
    assert result.exit_code == 0, result.output
    out = orjson.loads(result.stdout)
    # 12 items x 6 ordered games x 2 batches; the two orders of a pair reconciled per replicate: 12 x 3 x 2
    assert (out["games"], out["outcomes"]) == (144, 72)
