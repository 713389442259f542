"""The pairwise analysis end to end on the real sample logs: `jurymeter pairwise --json` and the nightly page.

The position figures are counted by hand from the raw JSON lines
(``test_pairwise_position._raw_games``), not from anything jurymeter wrote.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import orjson
import polars as pl
import pytest
from typer.testing import CliRunner

from jurymeter.cli import app
from jurymeter.io.ingest import ingest
from jurymeter.io.sources import discover_sources
from jurymeter.io.store import Store
from jurymeter.io.validate import ValidationOptions
from report_pages import report_text
from samples import SAMPLES
from test_pairwise_position import _raw_games

PAIRWISE_SETS = ("mt-bench", "arena-hard-v0.1", "arena-hard-v2.0/hard_prompt")


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Store:
    """Every sample log (pointwise and pairwise) in one store, as a new user would ingest them."""
    paths = [p for folder in ("mt_bench", "arena_hard", "alpaca_eval", "inspect_ai")
             for p in sorted((SAMPLES / folder).iterdir()) if p.suffix in (".jsonl", ".json", ".eval")
             and p.name != "PROVENANCE.json"]
    target = Store(str(tmp_path_factory.mktemp("samples") / "store"))
    ingest(target, discover_sources([str(p) for p in paths]), ValidationOptions())
    return target


def _command(store: Store, item_set: str) -> dict[str, Any]:
    result = CliRunner().invoke(app, ["pairwise", "--store", store.url, "--item-set", item_set, "--json",
                                      "--boot", "200", "--permutations", "99"])
    assert result.exit_code == 0, result.output
    report: dict[str, Any] = orjson.loads(result.stdout)
    return report


def test_the_command_on_the_real_logs_gives_the_position_figures_counted_from_the_raw_lines(store: Store) -> None:
    judges: dict[str, dict[str, Any]] = {}
    for item_set in PAIRWISE_SETS:
        report = _command(store, item_set)
        assert report["item_set"] == item_set
        for judge, row in report["judges"].items():
            assert judge not in judges  # each sample judge judged one item set
            judges[judge] = row
    raw = _raw_games()
    assert sorted(judges) == sorted(raw)
    for judge, counted in raw.items():
        row, verdicts = judges[judge], counted["verdicts"]
        assert row["games"] == len(verdicts), judge
        assert row["first_slot_win_rate"] == pytest.approx(verdicts.count("A") / len(verdicts)), judge
        assert row["tie_rate"] == pytest.approx(verdicts.count("tie") / len(verdicts)), judge
        assert row["pairs_both_orders"] == counted["pairs"], judge
        assert row["reversal_rate"] == pytest.approx(counted["reversed"] / counted["pairs"]), judge
        # The keys the issue names, every judge.
        for key in ("first_slot_win_rate", "reversal_rate", "slot_a_advantage", "pairs_both_orders",
                    "tie_rate", "failure_rate"):
            assert key in row, (judge, key)


def _failed_games(judge: str) -> tuple[int, int]:
    """(stored, failed) judgments of one judge, from the raw lines: MT-Bench's `error` winners,
    Arena-Hard's null-scored games (its adapter's parse failures and $ERROR$ calls)."""
    stored = failed = 0
    for path in sorted((SAMPLES / "mt_bench").glob("pair__*.jsonl")):
        for line in path.read_text().splitlines():
            r = json.loads(line)
            if r["judge"][0] == judge:
                for g in (r["g1_winner"], r["g2_winner"]):
                    failed += g == "error"
                    stored += g != "error"
    return stored, failed


def test_the_failure_rate_is_the_judges_failed_share_of_its_pairwise_judgments(store: Store) -> None:
    report = _command(store, "mt-bench")
    for judge in ("gpt-4", "gpt-4-turbo"):
        stored, failed = _failed_games(judge)
        assert report["judges"][judge]["failure_rate"] == pytest.approx(failed / (stored + failed))
    # gpt-4 also grades pointwise single files with 30 parse failures: those are not its pairwise health.
    assert report["judges"]["gpt-4"]["parse_failure_rate"] == 0.0


def test_parts_that_cannot_be_estimated_are_null_with_their_reason(store: Store) -> None:
    alpaca = _command(store, "alpaca-eval")
    # AlpacaEval's shown order is mostly unknown: those judgments stay out of the position statistics.
    unknown = [j for j, row in alpaca["judges"].items() if row["pairs_both_orders"] == 0]
    assert unknown
    # Its systems meet only their own reference, in two groups: no Bradley-Terry ratings, and why.
    assert "systems" not in alpaca["bradley_terry"]
    assert "not connected" in alpaca["bradley_terry"]["reason"]
    # No family metadata in any sample: family preference is null with its reason.
    assert alpaca["family_preference"]["reason"]
    v2 = _command(store, "arena-hard-v2.0/hard_prompt")
    assert set(v2["bradley_terry"]["systems"]) == {"o3-mini-2025-01-31", "gemini-2.0-flash-lite-001"}
    assert "baseline" in v2["gstudy"]["reason"]


def test_a_pointwise_item_set_named_is_one_clear_error(store: Store) -> None:
    result = CliRunner().invoke(app, ["pairwise", "--store", store.url, "--item-set", "jm_mock_judge"])
    assert result.exit_code != 0
    assert "no pairwise item set 'jm_mock_judge'" in result.output
    assert "is a pointwise item set" in result.output
    assert "Traceback" not in result.output


def test_the_nightly_page_keeps_a_pointwise_and_a_pairwise_item_set_of_one_name_apart(
    store: Store, tmp_path: Path
) -> None:
    from jurymeter.pipeline.cache import run_fits
    from jurymeter.pipeline.config import load_config
    from jurymeter.pipeline.jobs import plan_fits
    from jurymeter.pipeline.publish import publish_run

    config_path = tmp_path / "jm.toml"
    config_path.write_text(f'store = "{store.url}"\nlanding = ""\n[fit]\nn_boot = 40\n')
    config = load_config(config_path, environ={})
    plan = plan_fits(store, config)
    outcomes = run_fits(store, plan.jobs, figures=True)
    # The pairwise fits all run; the one-judge pointwise fits (MT-Bench single, inspect) fail until
    # every-record estimation (issue 14) lands, and must not take the pairwise ones with them.
    assert all(o.error is None for o in outcomes if o.job.protocol == "pairwise")
    summary = publish_run(store, "samples", config=config, started="t", ingest_report=None,
                          outcomes=outcomes, timings={}, skipped=plan.skipped)
    fits = {(f["protocol"], f["item_set"]) for f in summary["fits"]}
    assert {("pairwise", s) for s in PAIRWISE_SETS} <= fits
    assert ("pointwise", "mt-bench") in fits  # MT-Bench's single files: the same name
    page = report_text(Path(store.root) / "results" / "samples" / "report")
    assert page.count("<h2>mt-bench (pairwise) / all / all</h2>") == 1
    pointwise = next(o for o in outcomes if (o.job.protocol, o.job.item_set) == ("pointwise", "mt-bench"))
    if pointwise.error is None:
        assert page.count("<h2>mt-bench / all / all</h2>") == 1
    else:  # named among the failed fits, apart from the pairwise fit of the same name
        assert "<li><strong>mt-bench / all / all</strong>" in page
    assert page.count("<h3>Pairwise judging</h3>") == 4  # the four pairwise item sets
    section = page[page.index("<h2>mt-bench (pairwise) / all / all</h2>"):]
    section = section[: section.index("</section>")]
    assert "<h3>G-study" not in section
    assert "<h3>CyclicJudge" not in section
    judges = pl.read_parquet(Path(store.root) / "results" / "samples" / "pairwise_judges.parquet")
    assert set(judges["item_set"]) == {*PAIRWISE_SETS, "alpaca-eval"}


def test_the_q_interval_is_the_reversal_interval_through_the_q_formula(store: Store) -> None:
    import math

    report = _command(store, "mt-bench")
    row = report["judges"]["gpt-4"]  # reverses on 5 of its 8 pairs: q on the first-slot branch
    first = row["first_slot_win_rate"]
    second = 1.0 - first - row["tie_rate"]
    sign = math.copysign(1.0, first - second)

    def q(r: float) -> float:  # written out from who-judges-matters section 8: r = q^2 + (1 - q)^2
        return 0.5 + sign * math.sqrt(2 * max(r, 0.5) - 1) / 2

    assert row["q_position_following"] == pytest.approx(q(row["reversal_rate"]))
    ends = sorted((q(row["reversal_low"]), q(row["reversal_high"])))
    assert (row["q_low"], row["q_high"]) == (pytest.approx(ends[0]), pytest.approx(ends[1]))
