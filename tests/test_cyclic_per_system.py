"""CyclicJudge per system: each system is decomposed on its own complete block (issue 14, point 4).

Independent reference: each system's cube pivoted by hand with plain Python
loops over the records (replicates averaged, the generations every judge
scored, the largest generation count with the most observations), then
:func:`jurymeter.stats.cyclic.fit_cyclic` on that cube. Two systems have 3
generations on every scenario; the others 1-2, so a block shared by all
systems would have at most 2.
"""

from __future__ import annotations

from collections import defaultdict

import numpy as np
import orjson
import polars as pl
import pytest
from typer.testing import CliRunner

from ingest_util import run_ingest, write_jsonl
from jurymeter.cli import app
from jurymeter.io.store import Store
from jurymeter.stats.cyclic import fit_cyclic
from jurymeter.stats.cyclic.fit import cyclic_report

# The fit and the hand-pivoted fit agree to rounding of sums of squares.
REL = 1e-10
JUDGES = ("judge-a", "judge-b", "judge-c")
ITEMS = [f"item-{k:02d}" for k in range(12)]
KEYS = ("sigma2_scenario", "sigma2_generation", "sigma2_judge", "sigma2_residual", "f_statistic", "p_value")


def _generations(system: int, item: int) -> int:
    """Generations system ``system`` has on item ``item``: 3, 3, 2, 2-or-1, 1."""
    return [3, 3, 2, 2 if item < 8 else 1, 1][system]


def _records() -> list[dict]:
    rng = np.random.default_rng(14)
    out = []
    for s in range(5):
        for i, item in enumerate(ITEMS):
            for g in range(_generations(s, i)):
                for judge in JUDGES:
                    if s == 2 and i == 0 and g == 1 and judge == "judge-c":
                        continue  # one hole: item-00 of sys-2 has one complete generation
                    for r in range(2):
                        out.append({
                            "item_set": "gen", "item_id": item, "system_id": f"sys-{s}", "judge_id": judge,
                            "generation": 10 * g + 3, "replicate": r, "score": float(rng.uniform(1, 10)),
                        })
    return out


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> tuple[Store, list[dict]]:
    root = tmp_path_factory.mktemp("cyclic-per-system")
    records = _records()
    target = Store(str(root / "store"))
    run_ingest(target, write_jsonl(root / "gen.jsonl", records))
    return target, records


def _hand_cube(records: list[dict], system: str) -> np.ndarray:
    """The system's complete block, by loops: replicate means, complete generations, the best m."""
    sums: dict[tuple, list[float]] = defaultdict(list)
    for r in records:
        if r["system_id"] == system:
            sums[(r["item_id"], r["generation"], r["judge_id"])].append(r["score"])
    complete: dict[str, list[int]] = {}
    for item in ITEMS:
        gens = sorted({g for (i, g, _) in sums if i == item})
        complete[item] = [g for g in gens if all((item, g, j) in sums for j in JUDGES)]
    best, worth = 0, 0
    for m in range(2, 4):
        n = sum(len(c) >= m for c in complete.values())
        if n >= 2 and n * m >= worth:
            best, worth = m, n * m
    kept = [item for item in ITEMS if len(complete[item]) >= best]
    x = np.empty((len(kept), best, len(JUDGES)))
    for a, item in enumerate(kept):
        for b, g in enumerate(complete[item][:best]):
            for c, judge in enumerate(JUDGES):
                scores = sums[(item, g, judge)]
                x[a, b, c] = sum(scores) / len(scores)
    return x


def _check(report: dict, records: list[dict]) -> None:
    own = report["system_blocks"]
    assert own["sys-0"]["generations"] == own["sys-1"]["generations"] == 3
    assert own["sys-2"]["generations"] == 2
    assert own["sys-2"]["scenarios"] == 11
    assert own["sys-3"]["generations"] == 2
    assert own["sys-3"]["scenarios"] == 8
    assert "sys-4" not in report["systems"]
    assert "sys-4" in report["skipped_systems"]
    for system in ("sys-0", "sys-1", "sys-2", "sys-3"):
        x = _hand_cube(records, system)
        assert own[system]["scenarios"] == x.shape[0]
        assert own[system]["generations"] == x.shape[1]
        direct = fit_cyclic(x, judges=list(JUDGES), budgets=[3, 6]).to_json()
        ours = report["systems"][system]
        for key in KEYS:
            assert ours[key] == pytest.approx(direct[key], rel=REL, abs=1e-14), (system, key)
        assert ours["judge_offsets"] == pytest.approx(direct["judge_offsets"], rel=REL)
        offsets = report["judge_system_offsets"][system]
        assert [offsets[j] for j in JUDGES] == pytest.approx(x.mean(axis=(0, 1)) - x.mean(), abs=1e-12)


def test_the_command_decomposes_each_system_on_its_own_block(store: tuple[Store, list[dict]]) -> None:
    target, records = store
    result = CliRunner().invoke(app, ["cyclic", "--store", target.url, "--item-set", "gen", "--json",
                                      "--budgets", "3,6"])
    assert result.exit_code == 0, result.output
    _check(orjson.loads(result.stdout), records)
    human = CliRunner().invoke(app, ["cyclic", "--store", target.url, "--item-set", "gen"])
    assert human.exit_code == 0, human.output
    assert "not decomposed: sys-4" in human.output


def test_the_polars_path_gives_the_same_blocks(store: tuple[Store, list[dict]]) -> None:
    _, records = store
    frame = pl.DataFrame(records)
    _check(cyclic_report(frame, budgets=[3, 6]), records)
