"""A Fits-table number that is missing says why, on the page and in the nightly printout.

A one-judge item set (the usual real log: MT-Bench single, Arena-Hard) has no single-judge
ceiling: the judge facet is fixed, so sigma2_sj cannot be told from sigma2_s. CyclicJudge and the
sequential analysis do not run on it (one generation, no batch order). Before, the printout's
table showed "n/a" in those columns with no reason; now each cell says "not estimable" or "not
run" and a line under the table (or the page cell's title) gives the reason.
"""

from __future__ import annotations

import html
import re
from typing import Any

import numpy as np
import orjson
import pytest

from ingest_util import run_ingest, write_jsonl
from jurymeter.io.store import Store
from report_pages import fit_publish_and_print, report_text


def _records() -> list[dict]:
    rng = np.random.default_rng(11)
    return [{"item_set": "solo", "item_id": f"item-{i:02d}", "system_id": f"sys-{s}", "judge_id": "judge-a",
             "generation": 0, "replicate": 0, "score": float(np.clip(4 + s + rng.normal(0, 1.5), 1, 10))}
            for s in range(4) for i in range(25)]


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    from jurymeter.pipeline.config import load_config

    root = tmp_path_factory.mktemp("missing")
    store = Store(str(root / "store"))
    run_ingest(store, write_jsonl(root / "solo.jsonl", _records()))
    (root / "jm.toml").write_text(f'store = "{store.url}"\nlanding = ""\n[fit]\nn_boot = 30\n')
    _, printed = fit_publish_and_print(store, load_config(root / "jm.toml", environ={}), "solo-run")
    folder = root / "store" / "results" / "solo-run"
    return {"printed": printed, "summary": orjson.loads((folder / "summary.json").read_bytes()),
            "page": report_text(folder / "report"), "folder": folder}


def test_the_summary_gives_the_reason_of_the_null_ceiling(run: dict[str, Any]) -> None:
    entry = run["summary"]["fits"][0]["analyses"]["gstudy"]
    assert entry["judges"] == 1
    assert entry["ceiling"] is None
    assert "one judge" in entry["ceiling_reason"]
    assert entry["erho2"] is not None
    assert entry["erho2_reason"] is None  # a number that is there has no reason


def test_the_printout_says_not_estimable_and_not_run_with_the_reasons(run: dict[str, Any]) -> None:
    printed = run["printed"]
    row = next(line for line in printed.splitlines() if line.startswith("│ solo "))
    cells = [c.strip() for c in row.strip("│").split("│")]
    assert "n/a" not in cells, row
    assert "not estimable" in cells  # the ceiling
    assert cells.count("not run") == 2  # CyclicJudge's offset and the sequential lag-1
    flat = re.sub(r"\s+", " ", printed)
    assert "single-judge ceiling not estimable in solo / all / all: one judge" in flat
    assert "cyclic not run on solo / all / all: " in flat
    assert "sequential not run on solo / all / all: " in flat


def test_the_page_cells_carry_the_reasons(run: dict[str, Any]) -> None:
    page = html.unescape(run["page"])
    reasons = re.findall(r'<abbr title="([^"]*)">(not estimable|not run)</abbr>', page)
    parts = run["summary"]["fits"][0]["analyses"]
    assert {why for why, word in reasons if word == "not run"} == {parts["cyclic"]["reason"], parts["sequential"]["reason"]}
    assert {why for why, word in reasons if word == "not estimable"} == {parts["gstudy"]["ceiling_reason"]}


def test_every_null_d_study_row_of_the_published_table_says_why(run: dict[str, Any]) -> None:
    # ceiling_3_judges is read from the bootstrap intervals; with one judge its row was null with no reason
    # on the page's D-study table, as its reason is recorded under intervals.ceiling_3_judges.
    import polars as pl

    table = pl.read_parquet(run["folder"] / "dstudy.parquet")
    missing = table.filter(pl.col("estimate").is_null())
    assert "ceiling_3_judges" in missing["quantity"].to_list()
    assert missing.filter(pl.col("reason").is_null()).is_empty(), missing.select("quantity", "reason").rows()
    three = missing.filter(pl.col("quantity") == "ceiling_3_judges")["reason"][0]
    assert "one judge" in three
    assert "ceiling at 3 judges" in three
