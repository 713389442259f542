"""`jurymeter cyclic` and `jurymeter plan` end to end through the store."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import orjson
import polars as pl
import pytest
from typer.testing import CliRunner

from ingest_util import run_ingest
from jurymeter.cli import app
from jurymeter.io.store import Store
from jurymeter.simulate import SimulationParams, simulate_dump, write_dump
from jurymeter.stats.cyclic import fit_cyclic

PARAMS = SimulationParams(
    seed=9, n_systems=4, n_items=30, n_judges=4, n_generations=3, n_replicates=2,
    round_scores=False, carry_over=0.0, pairwise_pairs=None,
)


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Store:
    root = tmp_path_factory.mktemp("cyclic")
    dump = simulate_dump(PARAMS)
    paths = write_dump(dump, root / "dump")
    target = Store(str(root / "store"))
    run_ingest(target, paths["pointwise"], paths["systems"], paths["judges"])
    return target


def test_cyclic_json_matches_a_direct_fit_of_the_averaged_cube(store: Store) -> None:
    result = CliRunner().invoke(app, ["cyclic", "--store", store.url, "--item-set", "sim-chat", "--json", "--budgets", "4,8,12"])
    assert result.exit_code == 0, result.output
    report = orjson.loads(result.stdout)
    assert report["block"]["generations"] == 3
    records = store.scan("pointwise", "sim-chat").collect()
    # Independent path: pivot one system by hand, average replicates, fit.
    one = (
        records.filter(pl.col("system_id") == "sys-00")
        .group_by("item_id", "generation", "judge_id").agg(pl.col("score").mean())
        .sort("item_id", "generation", "judge_id")
    )
    x = one["score"].to_numpy().reshape(30, 3, 4)
    direct = fit_cyclic(x, judges=sorted(records["judge_id"].unique().to_list()), budgets=[4, 8, 12]).to_json()
    ours = report["systems"]["sys-00"]
    for key in ("sigma2_scenario", "sigma2_generation", "sigma2_judge", "sigma2_residual", "f_statistic", "p_value"):
        assert ours[key] == pytest.approx(direct[key], rel=1e-12), key
    assert ours["judge_offsets"] == pytest.approx(direct["judge_offsets"])
    assert set(report["judge_system_offsets"]) == {f"sys-{k:02d}" for k in range(4)}
    human = CliRunner().invoke(app, ["cyclic", "--store", store.url, "--item-set", "sim-chat"])
    assert human.exit_code == 0, human.output
    assert "per-system decomposition" in human.output


def test_cyclic_needs_generations(tmp_path: Path) -> None:
    dump = simulate_dump(SimulationParams(seed=1, n_systems=3, n_items=10, n_judges=3, n_generations=1, n_replicates=1, pairwise_pairs=None))
    paths = write_dump(dump, tmp_path / "dump")
    target = Store(str(tmp_path / "store"))
    run_ingest(target, paths["pointwise"])
    result = CliRunner().invoke(app, ["cyclic", "--store", target.url, "--item-set", "sim-chat"])
    assert result.exit_code == 1
    assert "two generations" in result.output


@pytest.mark.parametrize("suffix", [".csv", ".jsonl", ".parquet"])
def test_plan_from_the_store_is_balanced_and_deterministic(store: Store, tmp_path: Path, suffix: str) -> None:
    out = tmp_path / f"plan{suffix}"
    args = ["plan", "--store", store.url, "--item-set", "sim-chat", "--generations", "2", "--seed", "7", "--out", str(out)]
    first = CliRunner().invoke(app, args)
    assert first.exit_code == 0, first.output
    read = {".csv": pl.read_csv, ".jsonl": pl.read_ndjson, ".parquet": pl.read_parquet}[suffix]
    table = read(out)
    assert table.columns == ["system_id", "item_id", "generation", "judge_id"]
    assert table.height == 4 * 30 * 2
    counts = table.group_by("system_id", "judge_id").len()["len"].to_numpy()
    assert counts.max() - counts.min() <= 1
    again = tmp_path / f"again{suffix}"
    CliRunner().invoke(app, [*args[:-1], str(again)])
    assert read(again).equals(table)


def test_plan_from_files_and_bad_output(tmp_path: Path) -> None:
    for name, ids in (("items", ["q1", "q2", "q3"]), ("systems", ["a", "b"]), ("judges", ["j1", "j2", "j3"])):
        (tmp_path / f"{name}.txt").write_text("\n".join(ids) + "\n")
    files = ["--items", str(tmp_path / "items.txt"), "--systems", str(tmp_path / "systems.txt"), "--judges", str(tmp_path / "judges.txt")]
    ok = CliRunner().invoke(app, ["plan", *files, "--out", str(tmp_path / "p.csv")])
    assert ok.exit_code == 0, ok.output
    table = pl.read_csv(tmp_path / "p.csv")
    assert np.unique(table.filter(pl.col("system_id") == "a")["judge_id"]).size == 3
    bad = CliRunner().invoke(app, ["plan", *files, "--out", str(tmp_path / "p.txt")])
    assert bad.exit_code == 1
    assert "--out must end" in bad.output


def test_cost_weighted_plan_prints_its_variance_beside_the_uniform_plan(store: Store, tmp_path: Path) -> None:
    out = tmp_path / "cost.parquet"
    args = ["plan", "--store", store.url, "--item-set", "sim-chat", "--out", str(out),
            "--price", "judge-a=1", "--price", "judge-b=1", "--price", "judge-c=4", "--price", "judge-d=4",
            "--budget", str(30 * 12)]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    assert "cost-weighted plan: predicted variance" in result.output
    assert "uniform round robin for the same money" in result.output
    plan = pl.read_parquet(out)
    calls = dict(plan.filter(pl.col("system_id") == "sys-00").group_by("judge_id").len().iter_rows())
    # Cheaper judges get more calls; the money per system stays within the budget.
    assert calls["judge-a"] > calls["judge-c"]
    assert sum(calls[j] * p for j, p in {"judge-a": 1, "judge-b": 1, "judge-c": 4, "judge-d": 4}.items()) <= 360
    no_budget = CliRunner().invoke(app, [*args[:5], "--out", str(tmp_path / "y.csv"), "--price", "judge-a=1"])
    assert no_budget.exit_code == 1
    assert "--price needs --budget" in no_budget.output
