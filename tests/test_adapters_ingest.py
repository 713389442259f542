"""Real judgment logs through the one ingest path: recognised, reconciled per judgment, quarantined by reason.

Every sample file of ``../shared/samples/`` (MT-Bench, Arena-Hard-Auto,
AlpacaEval, inspect_ai) is ingested as a new user would (``--format auto``).
Independent references: the sources' own counts taken from the files here
with plain ``json`` (lines, elements), the committed Parquet rows counted by
``_source_id`` (``tests/ingest_util.py``), and the quarantine parts read back.
The adapters' field-by-field expectations are in ``tests/test_adapter_*.py``.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import orjson
import polars as pl
import pytest

from jurymeter.io.adapters import adapters
from jurymeter.io.ingest import ingest
from jurymeter.io.sources import discover_sources
from jurymeter.io.store import Store
from jurymeter.io.validate import ValidationOptions
from samples import SAMPLES

FORMAT_OF_FOLDER = {"mt_bench": "mt-bench", "arena_hard": "arena-hard", "alpaca_eval": "alpaca-eval",
                    "inspect_ai": "inspect"}
BUILT = {a.name for a in adapters()}


def _sample_files() -> list[Path]:
    return sorted(
        p for folder in FORMAT_OF_FOLDER for p in (SAMPLES / folder).glob("*")
        if p.suffix in (".jsonl", ".json", ".eval") and p.name != "PROVENANCE.json"
    )


def _lines_of(path: Path) -> int:
    """Records in a sample, counted without the adapter: lines, array elements, or sample-epochs."""
    if path.suffix == ".jsonl":
        return sum(1 for line in path.read_bytes().splitlines() if line.strip())
    if path.suffix == ".json":
        data = json.loads(path.read_text())  # json, not orjson: inspect logs hold bare NaN
        return len(data) if isinstance(data, list) else len(data["samples"])
    import zipfile

    with zipfile.ZipFile(path) as archive:
        return sum(1 for n in archive.namelist() if n.startswith("samples/") and n.endswith(".json"))


@pytest.mark.parametrize("path", _sample_files(), ids=lambda p: p.name)
def test_every_sample_is_recognised_and_reconciled_per_judgment(path: Path, tmp_path: Path) -> None:
    wanted = FORMAT_OF_FOLDER[path.parent.name]
    if wanted not in BUILT:
        pytest.skip(f"the {wanted} adapter is not built yet")
    [source] = discover_sources([str(path)])
    assert source.adapter == wanted  # recognised from its content
    store = Store(str(tmp_path / "store"))
    report = ingest(store, [source], ValidationOptions())
    [result] = report.sources
    assert result.format == wanted
    assert result.lines == _lines_of(path)
    assert result.read == result.accepted + result.quarantined + result.duplicates_dropped
    per_line = 2 if (wanted in ("mt-bench", "arena-hard") and "pair" in path.name) or wanted == "arena-hard" else None
    if per_line:
        assert result.read == per_line * result.lines  # two presentation orders a line
    committed = sum(store.read_parquet(f.path).height for p in ("pointwise", "pairwise") for f in store.data_files(p))
    assert committed == result.accepted
    quarantined = [store.read_parquet(q) for q in store.quarantine_files()]
    reasons = pl.concat(quarantined)["reason"].value_counts() if quarantined else None
    got = dict(reasons.iter_rows()) if reasons is not None else {}
    assert got == result.reasons


def test_a_folder_of_every_format_ingests_in_one_run_and_says_which_format_each_file_is(tmp_path: Path) -> None:
    present = [f for f in FORMAT_OF_FOLDER.values() if f in BUILT]
    landing = tmp_path / "landing"
    landing.mkdir()
    for path in _sample_files():
        if FORMAT_OF_FOLDER[path.parent.name] in present:
            shutil.copy2(path, landing / path.name)
    (landing / "notes.json").write_text('{"not": "a judgment log"}')  # skipped, not an error, in a folder
    found = discover_sources([str(landing)])
    assert {s.adapter for s in found} == set(present)
    assert all(not s.url.endswith("notes.json") for s in found)
    store = Store(str(tmp_path / "store"))
    report = ingest(store, found, ValidationOptions())
    assert all(s.balanced for s in report.sources)


def test_a_source_whose_every_judgment_is_quarantined_exits_5_with_one_line(tmp_path: Path) -> None:
    if "alpaca-eval" not in BUILT:
        pytest.skip("the alpaca-eval adapter is not built yet")
    failed = [{"instruction": "x", "output_1": "a", "generator_1": "ref", "output_2": "b", "generator_2": "sys",
               "annotator": "gpt4", "preference": None, "price_per_example": None, "time_per_example": None}]
    path = tmp_path / "annotations.json"
    path.write_bytes(orjson.dumps(failed))
    done = subprocess.run(
        [sys.executable, "-m", "jurymeter.cli", "ingest", str(path), "--store", str(tmp_path / "store")],
        capture_output=True, text=True, timeout=300,
    )
    assert done.returncode == 5, done.stdout + done.stderr
    assert done.stderr.count("\n") == 1
    assert "no judgment accepted" in done.stderr
    assert "Traceback" not in done.stderr


def test_a_json_file_that_is_no_log_is_one_clear_error(tmp_path: Path) -> None:
    path = tmp_path / "config.json"
    path.write_text('{"a": 1}')
    done = subprocess.run(
        [sys.executable, "-m", "jurymeter.cli", "ingest", str(path), "--store", str(tmp_path / "store")],
        capture_output=True, text=True, timeout=300,
    )
    assert done.returncode == 1
    assert "not a log format jurymeter reads" in done.stderr
    assert done.stderr.count("\n") == 1


def test_the_nightly_run_on_a_landing_of_every_format_completes_and_publishes(tmp_path: Path) -> None:
    """One file of each format in the landing folder: ingested, planned, fitted or named, published."""
    from jurymeter.pipeline.cache import run_fits
    from jurymeter.pipeline.config import load_config
    from jurymeter.pipeline.jobs import plan_fits
    from jurymeter.pipeline.landing import ingest_landing
    from jurymeter.pipeline.publish import publish_run

    landing = tmp_path / "landing"
    landing.mkdir()
    chosen: dict[str, Path] = {}
    for path in _sample_files():
        if FORMAT_OF_FOLDER[path.parent.name] in BUILT:
            chosen.setdefault(path.parent.name, path)
    for path in chosen.values():
        shutil.copy2(path, landing / path.name)
    (tmp_path / "jm.toml").write_text(
        f'store = "{tmp_path / "store"}"\nlanding = "{landing}"\n[fit]\nn_boot = 50\n'
    )
    config = load_config(tmp_path / "jm.toml", environ={})
    ingested = ingest_landing(config)
    assert ingested is not None
    formats = {s["format"] for s in ingested["sources"]}
    assert formats == {FORMAT_OF_FOLDER[f] for f in chosen}
    assert all(s["read"] == s["accepted"] + s["quarantined"] + s["duplicates_dropped"] for s in ingested["sources"])
    store = Store(config.store)
    plan = plan_fits(store, config)
    outcomes = run_fits(store, plan.jobs, figures=True)
    summary = publish_run(store, "every-format", config=config, started="t", ingest_report=ingested,
                          outcomes=outcomes, timings={}, skipped=plan.skipped)
    folder = tmp_path / "store" / "results" / "every-format"
    assert (folder / "summary.json").exists()
    assert (folder / "report" / "index.html").stat().st_size > 1000
    # Every item set is either fitted, failed with its one-line reason, or named as not fittable.
    named = {(f["item_set"], f["status"]) for f in summary["fits"]} | {(s["item_set"], "skipped") for s in summary["skipped"]}
    item_sets = {(p, s) for p in ("pointwise", "pairwise") for s in store.item_sets(p)}  # type: ignore[arg-type]
    assert {s for _, s in item_sets} == {s for s, _ in named}
    assert all(f["error"] for f in summary["fits"] if f["status"] == "failed")
    # Judge health reaches the summary.
    if "inspect" in BUILT:
        beta = next(j for j in summary["judges"] if j["judge_id"] == "mockllm/grader-beta")
        assert beta["unscored"] == 2


@pytest.mark.parametrize("name", ["pair__Stefanstud-FastChat__gpt-4_pair.subset.jsonl",
                                  "pair__lesnikow-fast-chat__gpt-4-turbo_pair.q81-82.jsonl"])
def test_mt_bench_position_consistency_from_the_store_equals_the_raw_lines(name: str, tmp_path: Path) -> None:
    """The share of pair lines whose winner differs between the two orders: from stored judgments
    (winner mapped back through the shown slots) and from the raw ``g1_winner != g2_winner``."""
    path = SAMPLES / "mt_bench" / name
    raw = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    judged = [r for r in raw if "error" not in (r["g1_winner"], r["g2_winner"])]
    raw_share = sum(r["g1_winner"] != r["g2_winner"] for r in judged) / len(judged)
    store = Store(str(tmp_path / "store"))
    ingest(store, discover_sources([str(path)]), ValidationOptions())
    stored = store.scan("pairwise", columns=["item_id", "system_a", "system_b", "winner", "game",
                                              "_source_line"]).collect()
    assert sorted(stored["game"].unique().to_list()) == ["1", "2"]  # provenance kept as text
    winning = stored.with_columns(
        pl.when(pl.col("winner") == "A").then(pl.col("system_a"))
        .when(pl.col("winner") == "B").then(pl.col("system_b")).otherwise(pl.lit("tie")).alias("won")
    )
    lines = winning.group_by("_source_line").agg(pl.col("won").n_unique().alias("kinds"), pl.len().alias("games"))
    both = lines.filter(pl.col("games") == 2)  # lines with one game failed are left out, as in the raw count
    store_share = both.filter(pl.col("kinds") > 1).height / both.height
    assert both.height == len(judged)
    assert store_share == pytest.approx(raw_share)
