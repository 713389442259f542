"""Say what was dropped, everywhere a number is shown (issue 14, point 5).

A simulated store: 5 systems x 30 items x 3 judges, one score a cell, where
``sys-4`` has cells on 6 items only (so the balanced block drops it) and
``sys-0`` lacks one judge's score on ``item-29`` (so the block drops that item).
Independent reference: the dropped levels and the counts worked out by plain
Python over the records (a system is kept when it has every item that the
other systems have; an item is kept when every kept system has all judges on
it: the obvious block of this hand-built case), not by the block rule's code. Checked in ``summary.json``, the nightly
printout (:func:`jurymeter.cli.run.print_run_summary`), ``jurymeter gstudy``
and the report page.
"""

from __future__ import annotations

import html
from typing import Any

import numpy as np
import orjson
import pytest
from typer.testing import CliRunner

from ingest_util import run_ingest, write_jsonl
from jurymeter.cli import app
from jurymeter.io.store import Store
from report_pages import fit_publish_and_print, report_text

SYSTEMS = [f"sys-{k}" for k in range(5)]
ITEMS = [f"item-{k:02d}" for k in range(30)]
JUDGES = ["judge-a", "judge-b", "judge-c"]


def _records() -> list[dict]:
    rng = np.random.default_rng(5)
    quality = {s: float(k) for k, s in enumerate(SYSTEMS)}
    out = []
    for s in SYSTEMS:
        for i, item in enumerate(ITEMS):
            if s == "sys-4" and i >= 6:
                continue  # sys-4: most of its cells missing
            for judge in JUDGES:
                if s == "sys-0" and item == "item-29" and judge == "judge-c":
                    continue  # one hole: item-29 cannot be complete over the kept systems
                out.append({"item_set": "holes", "item_id": item, "system_id": s, "judge_id": judge,
                            "generation": 0, "replicate": 0,
                            "score": float(np.clip(5 + quality[s] + rng.normal(0, 1.5), 1, 10))})
    return out


def _by_hand(records: list[dict]) -> tuple[dict[str, Any], dict[str, int]]:
    """Dropped levels and counts by plain loops over the records."""
    cells = {(r["system_id"], r["item_id"], r["judge_id"]) for r in records}
    items_of = {s: {i for (t, i, _) in cells if t == s} for s in SYSTEMS}
    kept_systems = [s for s in SYSTEMS if len(items_of[s]) > len(ITEMS) // 2]  # not the one missing most items
    kept_items = [i for i in ITEMS if all((s, i, j) in cells for s in kept_systems for j in JUDGES)]
    return {  # the summary entry's keys, then the block's sizes
        "dropped_systems": len(SYSTEMS) - len(kept_systems),
        "dropped_items": len(ITEMS) - len(kept_items),
        "dropped_judges": 0,
        "dropped_system_ids": ", ".join(s for s in SYSTEMS if s not in kept_systems),
    }, {
        "records_in": len(records),
        "observations_used": len(kept_systems) * len(kept_items) * len(JUDGES),
    }


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    from jurymeter.pipeline.config import load_config

    root = tmp_path_factory.mktemp("dropped")
    records = _records()
    store = Store(str(root / "store"))
    run_ingest(store, write_jsonl(root / "holes.jsonl", records))
    # The balanced block's estimator: the default on incomplete data (Henderson I) drops nothing;
    # what it would have dropped is its estimator note (tests/test_unbalanced.py).
    (root / "jm.toml").write_text(
        f'store = "{store.url}"\nlanding = ""\n[fit]\nn_boot = 50\n[fit.gstudy]\nestimator = "balanced"\n')
    config = load_config(root / "jm.toml", environ={})
    _, printed = fit_publish_and_print(store, config, "holes-run")
    folder = root / "store" / "results" / "holes-run"
    return {
        "store": store, "expected": _by_hand(records)[0], "sizes": _by_hand(records)[1], "printed": printed,
        "summary": orjson.loads((folder / "summary.json").read_bytes()),
        "page": html.unescape(report_text(folder / "report")),
    }


def test_the_reference_drops_the_thin_system_and_the_item_with_a_hole(run: dict[str, Any]) -> None:
    expected = run["expected"]
    assert expected["dropped_system_ids"] == "sys-4"
    assert (expected["dropped_systems"], expected["dropped_items"]) == (1, 1)


def test_summary_json_says_what_was_dropped(run: dict[str, Any]) -> None:
    entry = run["summary"]["fits"][0]["analyses"]["gstudy"]
    for key, value in run["expected"].items():
        assert entry[key] == value, key
    assert entry["systems"] == 4


def test_the_nightly_printout_has_one_line_for_the_fit_that_dropped(run: dict[str, Any]) -> None:
    lines = [line for line in run["printed"].splitlines() if line.startswith("dropped in holes")]
    assert len(lines) == 1, run["printed"]
    e = run["expected"]
    assert f"systems dropped {e['dropped_systems']}" in lines[0]
    assert f"items dropped {e['dropped_items']}" in lines[0]
    assert "judges dropped" not in lines[0]  # zero counts are not said
    assert "systems not on the leaderboard: sys-4" in lines[0]


def test_the_gstudy_command_prints_the_counts(run: dict[str, Any]) -> None:
    result = CliRunner().invoke(app, ["gstudy", "--store", run["store"].url, "--item-set", "holes", "--boot", "50",
                                      "--estimator", "balanced"])
    assert result.exit_code == 0, result.output
    e = {**run["expected"], **run["sizes"]}
    assert (
        f"dropped: the balanced block left out {e['dropped_systems']} system, {e['dropped_items']} item, "
        f"0 judges (systems sys-4); it uses {e['observations_used']:,} observations of {e['records_in']:,} records"
    ) in result.output


def test_the_report_names_the_missing_leaderboard_row_and_notes_the_counts(run: dict[str, Any]) -> None:
    page = run["page"]
    assert "Not on the leaderboard: sys-4 (1 system dropped" in page
    assert "Dropped: the balanced block left out 1 system, 1 item, 0 judges (systems sys-4)." in page
    note = "holes / all / all (G-study and D-study) dropped: systems dropped 1, items dropped 1; " \
        "systems not on the leaderboard: sys-4."
    assert note in page
    # The leaderboard table itself has no sys-4 row.
    board = page[page.index("<h4>Leaderboard</h4>"):page.index("Not on the leaderboard")]
    assert "sys-4" not in board


def test_by_default_every_record_is_fitted_and_the_block_s_drops_are_said(run: dict[str, Any]) -> None:
    result = CliRunner().invoke(app, ["gstudy", "--store", run["store"].url, "--item-set", "holes", "--boot", "50"])
    assert result.exit_code == 0, result.output
    assert "estimator: henderson" in result.output
    assert "sys-4" in result.output  # named as what the balanced block would have dropped
    assert "dropped: " not in result.output  # the fit itself left nothing out
