"""The sequential-judging analysis through the pipeline: ingest, ``jurymeter sequential``, the nightly fit path, the page.

| contract | independent reference |
| --- | --- |
| the lag-1 dependence of a judge who leans on the previous rating is found, and none for one who does not | the simulation's truth (rho 1.2 and 0, batch SD 0.6), through ingest and the CLI |
| an item set without batch positions is skipped with the reason; the command says why | the MT-Bench sample (no batch fields) |
| a continuous score scale leaves the GLMM out with its reason; the diagnostics still run | hand-built records |
| group contrasts carry the table-3 outcome against a reference; an unknown unit is named | the simulated groups' truth |
| rare score categories are pooled into a neighbour before the GLMM, and said | hand-built counts |
| the batch-plan command writes a Williams plan | the adjacency property counted in a loop |
| published tables follow the analysis's declared schemas | the declarations |
"""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import Any

import numpy as np
import orjson
import polars as pl
import pytest
from typer.testing import CliRunner

from jurymeter.analyses.sequential import SEQUENTIAL, pool_rare_categories
from jurymeter.cli.app import app
from jurymeter.io.ingest import ingest
from jurymeter.io.sources import discover_sources
from jurymeter.io.store import Store
from jurymeter.io.validate import ValidationOptions
from jurymeter.stats.sequential.plans import batch_plan
from jurymeter.stats.sequential.simulate import simulate_sequential
from samples import SAMPLES

SYSTEMS = [f"sys-{k}" for k in range(8)]
THETA = np.linspace(-0.8, 0.8, len(SYSTEMS))
TRUTH = {"judge-lean": 1.2, "judge-flat": 0.0}


def _log(seed: int = 3) -> pl.DataFrame:
    """Two judges rate the 8 systems' outputs in 80 batches of 8 (Williams orders); one leans on the rating before."""
    frames = []
    for k, (judge, rho) in enumerate(TRUTH.items()):
        plan = batch_plan(SYSTEMS, 80, [judge], design="williams", seed=seed + k)
        code = {s: i for i, s in enumerate(SYSTEMS)}
        orders = (plan.sort("batch_id", "batch_position").group_by("batch_id", maintain_order=True)
                  .agg(pl.col("item_id").replace_strict(code, return_dtype=pl.Int64))["item_id"].to_list())
        ratings = simulate_sequential(THETA, np.array(orders), rng=seed + 10 * k, rho=[rho], batch_sd=0.6,
                                      unit="system_id", unit_ids=SYSTEMS)
        frames.append(ratings.with_columns(pl.lit(judge).alias("judge_id"),
                                           (pl.lit(f"{judge}-") + pl.col("batch_id")).alias("batch_id")))
    log = pl.concat(frames)
    return log.with_columns(  # each rating is of a different question: the item is the batch slot
        pl.lit("seq").alias("item_set"),
        (pl.col("batch_id") + pl.lit("-") + pl.col("batch_position").cast(pl.String)).alias("item_id"),
    )


@pytest.fixture(scope="module")
def sequential_store(tmp_path_factory: pytest.TempPathFactory) -> Store:
    root = tmp_path_factory.mktemp("sequential")
    source = root / "seq.jsonl"
    _log().write_ndjson(source)
    store = Store(str(root / "store"))
    report = ingest(store, discover_sources([str(source)]), ValidationOptions())
    assert report.totals()["accepted"] == 2 * 80 * 8
    return store


def _cli(store: Store, *extra: str) -> Any:
    return CliRunner().invoke(app, ["sequential", "--store", store.url, "--item-set", "seq", "--boot", "60",
                                    "--simulations", "60", *extra])


def test_the_judge_who_leans_on_the_previous_rating_is_found(sequential_store: Store) -> None:
    result = _cli(sequential_store, "--json")
    assert result.exit_code == 0, result.output
    report = orjson.loads(result.stdout)
    lean, flat = report["judges"]["judge-lean"], report["judges"]["judge-flat"]
    assert lean["response"] == flat["response"] == "binary"
    # the GLMM's rho_1 covers each judge's truth, and only the leaning judge's excludes 0
    assert lean["rho_1_low"] <= TRUTH["judge-lean"] <= lean["rho_1_high"]
    assert lean["rho_1_low"] > 0
    assert flat["rho_1_low"] <= 0.0 <= flat["rho_1_high"]
    # the raw serial contrast leans the same way
    assert lean["serial_contrast"] > flat["serial_contrast"]
    assert lean["serial_contrast_low"] > 0
    # the model's top unit is the best system, by construction the last
    assert lean["top_model"] == SYSTEMS[-1]
    assert lean["check"]["n_outside"] <= 2  # the data follow the fitted model: few terms outside
    assert lean["reasons"]["groups"].startswith("no groups given")
    assert "; " not in lean["reasons"]["groups"]  # the page splits a judge's reasons by line, not by "; "


def test_the_command_prints_one_row_per_judge(sequential_store: Store) -> None:
    result = _cli(sequential_store)
    assert result.exit_code == 0, result.output
    text = " ".join(result.output.split())
    assert "judge-lean" in text
    assert "judge-flat" in text
    assert "groups not estimated: no groups given" in text


def test_group_contrast_and_its_outcome(sequential_store: Store) -> None:
    # the top half against the bottom half: group A is better by construction
    top, bottom = ",".join(SYSTEMS[4:]), ",".join(SYSTEMS[:4])
    result = _cli(sequential_store, "--json", "--group-a", top, "--group-b", bottom, "--reference", "A")
    assert result.exit_code == 0, result.output
    groups = {r["method"]: r for r in orjson.loads(result.stdout)["judges"]["judge-flat"]["groups"]}
    truth = float(np.mean(THETA[4:]) - np.mean(THETA[:4]))  # the model contrast's target (logits)
    model = groups["model"]
    # one draw of the log: within 4 bootstrap SEs of the truth (20 seeds of this log: mean 0.95, SD 0.21;
    # this seed's draw is 2.8 SD high)
    assert abs(model["estimate"] - truth) <= 4 * model["se"]
    assert model["outcome"] == "correct"
    assert groups["naive"]["estimate"] > 0
    unknown = _cli(sequential_store, "--json", "--group-a", "sys-0,nobody", "--group-b", "sys-1")
    assert unknown.exit_code == 0, unknown.output
    reason = orjson.loads(unknown.stdout)["judges"]["judge-flat"]["reasons"]["groups"]
    assert "nobody" in reason


def test_an_item_set_without_batch_positions_is_not_applicable(tmp_path: Path) -> None:
    store = Store(str(tmp_path / "store"))
    ingest(store, discover_sources([str(p) for p in sorted((SAMPLES / "mt_bench").glob("single__*.jsonl"))]),
           ValidationOptions())
    result = CliRunner().invoke(app, ["sequential", "--store", store.url, "--item-set", "mt-bench"])
    assert result.exit_code == 1
    assert "batch_id" in result.output
    assert "Traceback" not in result.output


def test_a_continuous_scale_leaves_the_glmm_out_with_its_reason() -> None:
    from jurymeter.analyses.base import FitScope, FitSettings
    from jurymeter.analyses.sequential import SequentialOptions

    rng = np.random.default_rng(0)
    n = 30 * 6
    records = pl.DataFrame({
        "judge_id": ["j"] * n, "system_id": [SYSTEMS[k % 4] for k in range(n)],
        "item_id": [f"i{k}" for k in range(n)], "batch_id": [f"b{k // 6}" for k in range(n)],
        "batch_position": [k % 6 for k in range(n)], "score": rng.normal(size=n).round(3),
    })
    scope = FitScope(item_set="x", protocol="pointwise", records=records.lazy(), systems=pl.DataFrame(),
                     judges=pl.DataFrame(), settings=FitSettings())
    result = SEQUENTIAL.start(scope, None, SequentialOptions(n_boot=20, n_sim=20)).finish()
    (judge,) = result.judges
    assert judge.glmm is None
    assert "glmm" in judge.reasons
    assert judge.reasons["bootstrap"].startswith("no GLMM fit")
    assert judge.diagnostics is not None  # the diagnostics do not need a model


def test_rare_categories_are_pooled_into_a_neighbour() -> None:
    scores = [1.0] * 3 + [2.0] * 40 + [3.0] * 4 + [4.0] * 30 + [5.0] * 12
    pooled, note = pool_rare_categories(pl.DataFrame({"score": scores}), minimum=10)
    # 1 (3 ratings) joins 2; 3 (4 ratings) joins its larger neighbour 2 (43 > 30)
    assert note is not None
    assert "1 -> 2" in note
    assert "3 -> 2" in note
    counts = dict(pooled.group_by("score").len().iter_rows())
    assert counts == {2.0: 47, 4.0: 30, 5.0: 12}
    binary, none = pool_rare_categories(pl.DataFrame({"score": [0.0] * 3 + [1.0] * 50}), minimum=10)
    assert none is None
    assert binary["score"].to_list() == [0.0] * 3 + [1.0] * 50


def test_batch_plan_command_writes_a_williams_plan(tmp_path: Path) -> None:
    items, judges = tmp_path / "items.txt", tmp_path / "judges.txt"
    items.write_text("\n".join(SYSTEMS[:6]) + "\n")
    judges.write_text("j1\nj2\n")
    out = tmp_path / "plan.csv"
    result = CliRunner().invoke(app, ["batch-plan", "--out", str(out), "--items", str(items), "--judges",
                                      str(judges), "--batches", "12", "--seed", "4"])
    assert result.exit_code == 0, result.output
    plan = pl.read_csv(out)
    assert plan.columns == ["batch_id", "batch_position", "item_id", "judge_id"]
    assert plan.height == 12 * 6
    for judge in ("j1", "j2"):  # each judge's 6 batches are a Williams square: every ordered pair adjacent once
        adjacent: dict[tuple[str, str], int] = {}
        for _, batch in plan.filter(pl.col("judge_id") == judge).sort("batch_position").group_by(
                "batch_id", maintain_order=True):
            seq = batch["item_id"].to_list()
            for a, b in itertools.pairwise(seq):
                adjacent[(a, b)] = adjacent.get((a, b), 0) + 1
        assert set(adjacent.values()) == {1}
        assert len(adjacent) == 6 * 5


def test_published_tables_follow_the_declared_schemas(sequential_store: Store) -> None:
    from jurymeter.analyses.base import FitScope, FitSettings
    from jurymeter.analyses.sequential import SequentialOptions

    scope = FitScope(item_set="seq", protocol="pointwise", records=sequential_store.scan("pointwise", "seq"),
                     systems=pl.DataFrame(), judges=pl.DataFrame(), settings=FitSettings())
    result = SEQUENTIAL.start(scope, None, SequentialOptions(n_boot=30, n_sim=30, group_a="sys-7",
                                                             group_b="sys-0")).finish()
    rows = SEQUENTIAL.tabulate(result)
    for table in SEQUENTIAL.tables:
        frame = pl.DataFrame(rows[table.name], schema=dict(table.schema), orient="row")
        assert frame.height > 0, table.name
        assert set(rows[table.name][0]) == set(table.schema), table.name
    summary = SEQUENTIAL.summarize(result)
    assert set(summary) == {h.key for h in SEQUENTIAL.headline}
    assert summary["max_rho_1"] == max((j.glmm.rho[0] for j in result.judges if j.glmm), key=abs)


def test_the_section_says_each_judges_missing_parts_once_and_the_missing_groups_once(sequential_store: Store) -> None:
    from jurymeter.analyses.base import FitScope, FitSettings
    from jurymeter.analyses.sequential import SequentialOptions
    from jurymeter.render.html import SectionBuilder

    scope = FitScope(item_set="seq", protocol="pointwise", records=sequential_store.scan("pointwise", "seq"),
                     systems=pl.DataFrame(), judges=pl.DataFrame(), settings=FitSettings())
    result = SEQUENTIAL.start(scope, None, SequentialOptions(n_boot=20, n_sim=20)).finish()
    names = {"item_set": "seq", "universe": "all", "population": "all"}
    tables = {name: pl.DataFrame([{**names, **row} for row in rows]) if rows else pl.DataFrame()
              for name, rows in SEQUENTIAL.tabulate(result).items()}
    page = SectionBuilder(tables, ("seq", "all", "all"), None, {}, {})
    SEQUENTIAL.section(page)
    html = page.html()
    assert html.count("No group comparison") == 1
    assert "--group-a, --group-b)" not in html  # no fragment of a reason split apart
    assert 'src="data:image/png' in html or "serial-dependence" in html
