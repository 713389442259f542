"""Logs shaped like the two real ones of issue 14, through the whole pipeline as a user runs it.

Each log is simulated, written as JSONL, ingested into a temporary store, then
fitted by the ``jurymeter gstudy`` and ``jurymeter cyclic`` commands and by the
nightly run's own fit path (plan, fit, publish: what ``jurymeter run`` does on
its Dask workers, here in-process) whose page ``jurymeter report`` rebuilds.

- **TriviaQA judges**: 9 systems x 400 items x 12 judges, binary scores, 245 of
  43,200 (system, item, judge) cells missing (0.57%): one judge misses 140 cells
  (one system's each, on 140 items), ``llama2-7b-chat`` misses 105 cells on 10
  items among the other judges.
- **Arena-bench**: 16 systems x 302 items, one judge (``gpt-4``), 4,802 of 4,832
  (system, item) cells present (30 cells of one system missing); four systems
  have 2 or 3 generations on hundreds of items, the others 1; every generation
  re-judged 2 or 3 times; generations vary more than re-judgings (5.3 vs 0.9).

Independent references: the simulation's own presence arrays and counts (the
records written, the cells made missing), the block that keeps every system
found by brute force over every subset of judges with numpy, the variance
components the simulation drew from, harmonic-mean sizes and the one-judge
E rho^2 / MDD95 written out, and the strings a user reads.

CyclicJudge splits variance between judges, so on one judge it does not run: the
command exits 1 naming the facet and what it needs, and the nightly fit goes on
without it, with that reason. (Its per-system blocks, each system with its own
generation count, are ``tests/test_cyclic_per_system.py``'s.) ``jurymeter run``
itself (Prefect and a Dask cluster) is ``tests/test_nightly.py``'s; here its fit,
publish and printout functions run in-process.
"""

from __future__ import annotations

import html
import itertools
from pathlib import Path
from typing import Any

import numpy as np
import orjson
import polars as pl
import pytest
from typer.testing import CliRunner

from ingest_util import run_ingest, write_jsonl
from jurymeter.cli import app
from jurymeter.io.store import Store
from report_pages import report_text

Z = 1.959963984540054
BOOT = 40  # bootstrap resamples per fit: the intervals are not what these tests check

# ---------------------------------------------------------------- TriviaQA-shaped

TQA_SYSTEMS = ["falcon-40b-instruct", "gpt-3.5-turbo", "gpt-4", "llama2-13b-chat", "llama2-70b-chat",
               "llama2-7b-chat", "mistral-7b-instruct", "vicuna-13b", "zephyr-7b-beta"]
TQA_ITEMS = [f"tqa-{k:04d}" for k in range(400)]
TQA_JUDGES = [f"judge-{k:02d}" for k in range(12)]
THIN_SYSTEM = TQA_SYSTEMS.index("llama2-7b-chat")
HEAVY_JUDGE = 7  # the judge holding most missing cells


def _tqa_presence() -> np.ndarray:
    """(system, item, judge) presence: 140 holes of one judge (other systems), 105 of llama2-7b-chat on 10 items."""
    rng = np.random.default_rng(2014)
    present = np.ones((9, 400, 12), dtype=bool)
    rest = [s for s in range(9) if s != THIN_SYSTEM]
    for item in rng.choice(400, 140, replace=False):
        present[rng.choice(rest), item, HEAVY_JUDGE] = False
    others = [j for j in range(12) if j != HEAVY_JUDGE]
    hole_items = rng.choice(400, 10, replace=False)
    for h in rng.choice(10 * 11, 105, replace=False):
        present[THIN_SYSTEM, hole_items[h // 11], others[h % 11]] = False
    return present


def _tqa_records(present: np.ndarray) -> list[dict[str, Any]]:
    """Binary correct/incorrect verdicts: a latent score from system, item, interactions, judge leniency."""
    rng = np.random.default_rng(7)
    n_s, n_i, n_j = present.shape
    latent = (
        rng.normal(0, 0.5, (n_s, 1, 1)) + rng.normal(0, 1.0, (1, n_i, 1)) + rng.normal(0, 0.3, (1, 1, n_j))
        + rng.normal(0, 0.6, (n_s, n_i, 1)) + rng.normal(0, 0.2, (n_s, 1, n_j)) + rng.normal(0, 0.4, (n_s, n_i, n_j))
    )
    scores = (latent > 0).astype(float)
    return [
        {"item_set": "triviaqa", "item_id": TQA_ITEMS[i], "system_id": TQA_SYSTEMS[s], "judge_id": TQA_JUDGES[j],
         "generation": 0, "replicate": 0, "score": float(scores[s, i, j])}
        for s, i, j in zip(*np.nonzero(present), strict=True)
    ]


def _block_keeping_every_system(present: np.ndarray) -> tuple[list[str], list[str]]:
    """The largest complete block with all 9 systems, by brute force over every subset of judges.

    Returns the dropped judges and the dropped items (the items not complete over
    all systems and the kept judges).
    """
    best, best_judges, best_items = -1, tuple[int, ...](), np.zeros(0, dtype=bool)
    n_j = present.shape[2]
    for r in range(1, n_j + 1):
        for judges in itertools.combinations(range(n_j), r):
            items = np.asarray(present[:, :, list(judges)].all(axis=(0, 2)))
            cells = present.shape[0] * int(items.sum()) * r
            if cells > best:
                best, best_judges, best_items = cells, judges, items
    dropped_judges = [TQA_JUDGES[j] for j in range(n_j) if j not in best_judges]
    dropped_items = [TQA_ITEMS[i] for i in np.flatnonzero(~best_items)]
    return dropped_judges, dropped_items


# ---------------------------------------------------------------- arena-bench-shaped

ARENA_SYSTEMS = [f"model-{k:02d}" for k in range(16)]
ARENA_ITEMS = [f"arena-{k:03d}" for k in range(302)]
ARENA_JUDGE = "gpt-4"
# Generations per system (on how many items); the others have one generation everywhere.
MORE_GENERATIONS = {0: (3, 250), 1: (3, 220), 2: (2, 200), 3: (2, 180)}
SPARSE_SYSTEM = 9  # the 30 missing (system, item) cells are all this system's
TRUTH = {"s": 1.0, "i": 1.5, "si": 1.2, "g": 5.3, "r": 0.9}  # sigma2_g:si = 5.3 > sigma2_r:sig = 0.9


def _arena_records() -> tuple[list[dict[str, Any]], dict[str, int]]:
    """Records and each system's largest generation count."""
    rng = np.random.default_rng(4832)
    n_s, n_i = len(ARENA_SYSTEMS), len(ARENA_ITEMS)
    missing = set(rng.choice(n_i, 30, replace=False).tolist())
    s_eff = rng.normal(0, np.sqrt(TRUTH["s"]), n_s)
    i_eff = rng.normal(0, np.sqrt(TRUTH["i"]), n_i)
    si_eff = rng.normal(0, np.sqrt(TRUTH["si"]), (n_s, n_i))
    out, generations = [], {}
    for s, system in enumerate(ARENA_SYSTEMS):
        n_g, on = MORE_GENERATIONS.get(s, (1, 0))
        more = set(rng.choice(n_i, on, replace=False).tolist())
        generations[system] = n_g
        for i, item in enumerate(ARENA_ITEMS):
            if s == SPARSE_SYSTEM and i in missing:
                continue
            for g in range(n_g if i in more else 1):
                answer = 6.0 + s_eff[s] + i_eff[i] + si_eff[s, i] + rng.normal(0, np.sqrt(TRUTH["g"]))
                for r in range(3 if rng.random() < 0.4 else 2):  # re-judgings of one answer
                    out.append({"item_set": "arena", "item_id": item, "system_id": system, "judge_id": ARENA_JUDGE,
                                "generation": g, "replicate": r,
                                "score": round(float(answer + rng.normal(0, np.sqrt(TRUTH["r"]))), 3)})
    return out, generations


# ---------------------------------------------------------------- the pipeline

def _nightly(store: Store, root: Path, run_id: str, fit: str) -> dict[str, Any]:
    """The nightly run's fit path (plan, fit, publish), its printout, and the page rebuilt by ``jurymeter report``."""
    from jurymeter.cli.run import print_run_summary
    from jurymeter.pipeline.cache import run_fits
    from jurymeter.pipeline.config import load_config
    from jurymeter.pipeline.jobs import plan_fits
    from jurymeter.pipeline.publish import publish_run
    from jurymeter.render.text import out

    path = root / f"{run_id}.toml"
    path.write_text(f'store = "{store.url}"\nlanding = ""\n[fit]\nn_boot = {BOOT}\n{fit}')
    config = load_config(path, environ={})
    outcomes = run_fits(store, plan_fits(store, config).jobs, figures=False)
    summary = publish_run(store, run_id, config=config, started="t", ingest_report=None, outcomes=outcomes,
                          timings={})
    with out.capture() as printed:
        print_run_summary(summary, ingest_printed=True)
    rebuilt = CliRunner().invoke(app, ["report", f"results/{run_id}", "--store", store.url])
    assert rebuilt.exit_code == 0, rebuilt.output
    folder = Path(store.root) / "results" / run_id
    (fit_report,) = (orjson.loads(f.read_bytes()) for f in (folder / "fits").glob("*.json"))  # one fit a run
    return {
        "report": fit_report["analyses"],
        "summary": orjson.loads((folder / "summary.json").read_bytes()),
        "leaderboard": pl.read_parquet(folder / "leaderboard.parquet"),
        "page": html.unescape(report_text(folder / "report")),
        "printed": printed.get(),
    }


def _harmonic(counts: list[int]) -> float:
    return len(counts) / sum(1 / n for n in counts)


def _gstudy(store: Store, item_set: str, *flags: str) -> dict[str, Any]:
    result = CliRunner().invoke(app, ["gstudy", "--store", store.url, "--item-set", item_set, "--boot", str(BOOT),
                                      "--json", *flags])
    assert result.exit_code == 0, result.output
    return dict(orjson.loads(result.stdout))


def _board(page: str) -> str:
    """The page's leaderboard section."""
    start = page.index("<h4>Leaderboard</h4>")
    return page[start:page.index("<h4>", start + 1)]


@pytest.fixture(scope="module")
def tqa(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    root = tmp_path_factory.mktemp("triviaqa")
    present = _tqa_presence()
    records = _tqa_records(present)
    store = Store(str(root / "store"))
    report = run_ingest(store, write_jsonl(root / "triviaqa.jsonl", [*records]))
    return {
        "root": root, "store": store, "present": present, "records": records,
        "accepted": sum(s.accepted for s in report.sources),
        "reference": _block_keeping_every_system(present),
        "default": _nightly(store, root, "tqa-default", ""),
        "balanced": _nightly(store, root, "tqa-balanced", '[fit.gstudy]\nestimator = "balanced"\n'),
    }


@pytest.fixture(scope="module")
def arena(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    root = tmp_path_factory.mktemp("arena")
    records, generations = _arena_records()
    store = Store(str(root / "store"))
    report = run_ingest(store, write_jsonl(root / "arena.jsonl", [*records]))
    return {
        "root": root, "store": store, "records": records, "generations": generations,
        "accepted": sum(s.accepted for s in report.sources),
        "run": _nightly(store, root, "arena-facet", 'generations = "facet"\n'),
    }


# ---------------------------------------------------------------- TriviaQA: tests

def test_the_triviaqa_log_has_the_issue_s_shape(tqa: dict[str, Any]) -> None:
    present = tqa["present"]
    assert present.shape == (9, 400, 12)
    assert int((~present).sum()) == 245  # 0.57% of 43,200 cells
    assert int((~present[THIN_SYSTEM]).sum()) == 105
    assert int((~present).sum(axis=(0, 1)).argmax()) == HEAVY_JUDGE
    assert tqa["accepted"] == len(tqa["records"]) == 42_955


def test_triviaqa_by_default_every_system_and_every_record_is_fitted(tqa: dict[str, Any]) -> None:
    report = _gstudy(tqa["store"], "triviaqa")
    assert report["estimator"] == "henderson"
    block = report["block"]
    assert (block["systems"], block["items"], block["judges"]) == (9, 400, 12)
    assert block["records_in"] == block["observations_used"] == tqa["accepted"]
    assert block["dropped_systems"] == block["dropped_items"] == block["dropped_judges"] == []
    assert sorted(row["system_id"] for row in report["leaderboard"]) == sorted(TQA_SYSTEMS)
    # What the balanced block would have dropped is said, and it is not a system.
    judges, _ = tqa["reference"]
    assert report["balanced_block"]["dropped_systems"] == []
    assert report["balanced_block"]["dropped_judges"] == judges
    assert judges[0] in report["estimator_note"]


def test_triviaqa_nightly_summary_leaderboard_and_page_have_all_9_systems(tqa: dict[str, Any]) -> None:
    run = tqa["default"]
    fit = next(f for f in run["summary"]["fits"] if f["item_set"] == "triviaqa")
    assert fit["status"] == "fitted", fit["error"]
    entry = fit["analyses"]["gstudy"]
    assert entry["systems"] == 9
    assert (entry["dropped_systems"], entry["dropped_items"], entry["dropped_judges"]) == (0, 0, 0)
    assert entry["dropped_system_ids"] is None
    block = run["report"]["gstudy"]["block"]
    assert run["report"]["gstudy"]["estimator"] == "henderson"
    assert block["records_in"] == block["observations_used"] == tqa["accepted"]
    assert sorted(run["leaderboard"]["system_id"].to_list()) == sorted(TQA_SYSTEMS)
    board = _board(run["page"])
    assert all(f"<td>{s}</td>" in board for s in TQA_SYSTEMS), board
    assert "Not on the leaderboard" not in run["page"]
    assert "dropped in triviaqa" not in run["printed"]


def test_triviaqa_balanced_keeps_all_9_systems_and_says_what_it_dropped(tqa: dict[str, Any]) -> None:
    judges, items = tqa["reference"]
    assert judges == [TQA_JUDGES[HEAVY_JUDGE]]
    assert len(items) == 10
    report = _gstudy(tqa["store"], "triviaqa", "--estimator", "balanced")
    block = report["block"]
    assert report["estimator"] == "balanced"
    assert (block["systems"], block["items"], block["judges"]) == (9, 390, 11)
    assert block["dropped_systems"] == []
    assert block["dropped_judges"] == judges
    assert sorted(block["dropped_items"]) == items
    assert block["observations_used"] == 9 * 390 * 11
    assert sorted(row["system_id"] for row in report["leaderboard"]) == sorted(TQA_SYSTEMS)
    text = CliRunner().invoke(app, ["gstudy", "--store", tqa["store"].url, "--item-set", "triviaqa", "--boot",
                                    str(BOOT), "--estimator", "balanced"])
    assert text.exit_code == 0, text.output
    said = (f"dropped: the balanced block left out 0 systems, 10 items, 1 judge; it uses {9 * 390 * 11:,} "
            f"observations of {tqa['accepted']:,} records")
    assert said in " ".join(text.output.split())
    # The nightly run with [fit.gstudy] estimator = "balanced": summary.json, printout and page.
    run = tqa["balanced"]
    entry = next(f for f in run["summary"]["fits"] if f["item_set"] == "triviaqa")["analyses"]["gstudy"]
    assert (entry["systems"], entry["dropped_systems"], entry["dropped_items"], entry["dropped_judges"]) == (9, 0, 10, 1)
    assert sorted(run["leaderboard"]["system_id"].to_list()) == sorted(TQA_SYSTEMS)
    assert "Dropped: the balanced block left out 0 systems, 10 items, 1 judge." in run["page"]
    assert "Not on the leaderboard" not in run["page"]
    line = next(x for x in run["printed"].splitlines() if x.startswith("dropped in triviaqa"))
    assert "items dropped 10" in line
    assert "judges dropped 1" in line
    assert "systems" not in line


# ---------------------------------------------------------------- arena-bench: tests

def test_the_arena_log_has_the_issue_s_shape(arena: dict[str, Any]) -> None:
    records = arena["records"]
    cells = {(r["system_id"], r["item_id"]) for r in records}
    assert len(cells) == 4_802
    assert {r["judge_id"] for r in records} == {ARENA_JUDGE}
    assert sorted(arena["generations"].values()).count(1) == 12
    assert arena["accepted"] == len(records)
    assert 13_000 < len(records) < 30_000


def test_arena_gstudy_fits_the_one_judge_design_with_generations_and_re_judgings(arena: dict[str, Any]) -> None:
    report = _gstudy(arena["store"], "arena", "--generations", "facet")
    assert report["design"] == "s x i x g:si x r:sig"
    assert report["fixed_facets"] == {"j": ARENA_JUDGE}
    block = report["block"]
    assert block["systems"] == 16
    assert block["records_in"] == block["observations_used"] == arena["accepted"]  # every generation, every re-judging
    assert sorted(row["system_id"] for row in report["leaderboard"]) == ARENA_SYSTEMS
    # The judge-dependent D-study is null, with its reason; the judge's own is there.
    for key in ("ceiling", "judges_needed", "mdd95_unlimited_items"):
        assert report[key] is None, key
        assert "one judge" in report["null_reasons"][key], key
    assert 0 < report["erho2"] < 1
    assert report["mdd95"] > 0
    assert report["mdd95_30"] > report["mdd95"]  # 30 items, one run: less precise than 302 items
    # Generations vary more than re-judgings, as simulated (5.3 vs 0.9).
    g = report["components"]["sigma2_g_si"]["raw"]
    r = report["components"]["sigma2_r_sig"]["raw"]
    assert g > r
    assert abs(g - TRUTH["g"]) < 1.0, g  # ~4.5 SE (df ~ 1,320 extra generations)
    assert abs(r - TRUTH["r"]) < 0.06, r  # ~4.5 SE (df ~ 8,500)
    # The D-study sizes are harmonic means (docs/gstudy.md, "Estimators"), by plain Python over the records:
    # items per system, generations per (system, item) -- each system's own -- and re-judgings per generation.
    items: dict[str, set[str]] = {}
    gens: dict[tuple[str, str], set[int]] = {}
    reps: dict[tuple[str, str, int], int] = {}
    for rec in arena["records"]:
        items.setdefault(rec["system_id"], set()).add(rec["item_id"])
        gens.setdefault((rec["system_id"], rec["item_id"]), set()).add(rec["generation"])
        cell = (rec["system_id"], rec["item_id"], rec["generation"])
        reps[cell] = reps.get(cell, 0) + 1
    sizes = {"i": _harmonic([len(v) for v in items.values()]), "g": _harmonic([len(v) for v in gens.values()]),
             "r": _harmonic(list(reps.values()))}
    assert sizes["g"] > 1.1  # 3 generations where a system has them: not cut to 1
    assert report["dstudy_sizes"] == pytest.approx(sizes, rel=1e-12)
    # E rho^2 and MDD95 for that judge, written out (one judge: sigma2_delta is the item interaction,
    # the generations and the re-judgings over their sizes), at those sizes and the fitted components.
    c = {k: v["raw"] for k, v in report["components"].items()}
    n_i, n_g, n_r = sizes["i"], sizes["g"], sizes["r"]
    delta = c["sigma2_si"] / n_i + c["sigma2_g_si"] / (n_i * n_g) + c["sigma2_r_sig"] / (n_i * n_g * n_r)
    assert report["erho2"] == pytest.approx(c["sigma2_s"] / (c["sigma2_s"] + delta), rel=1e-10)
    assert report["mdd95"] == pytest.approx(Z * np.sqrt(2 * delta), rel=1e-10)


def test_arena_gstudy_with_generations_averaged_and_balanced_keeps_every_system(arena: dict[str, Any]) -> None:
    averaged = _gstudy(arena["store"], "arena")
    assert averaged["design"] == "s x i x r:si"
    assert averaged["block"]["systems"] == 16
    balanced = _gstudy(arena["store"], "arena", "--estimator", "balanced")
    block = balanced["block"]
    assert (block["systems"], block["items"]) == (16, 302 - 30)  # the sparse system's 30 items go, not it
    assert block["dropped_systems"] == block["dropped_judges"] == []


def test_arena_nightly_summary_leaderboard_and_page(arena: dict[str, Any]) -> None:
    run = arena["run"]
    fit = next(f for f in run["summary"]["fits"] if f["item_set"] == "arena")
    assert fit["status"] == "fitted", fit["error"]
    entry = fit["analyses"]["gstudy"]
    assert entry["design"] == "s x i x g:si x r:sig"
    assert entry["systems"] == 16
    assert entry["ceiling"] is None
    assert entry["erho2"] is not None
    assert entry["mdd95"] is not None
    assert "one judge (gpt-4)" in entry["design_note"]
    assert entry["dropped_system_ids"] is None
    assert sorted(run["leaderboard"]["system_id"].to_list()) == ARENA_SYSTEMS
    board = _board(run["page"])
    assert all(f"<td>{s}</td>" in board for s in ARENA_SYSTEMS), board
    # The published fit's nulls carry their reasons; the page says why they are missing.
    published = run["report"]["gstudy"]
    for key in ("ceiling", "judges_needed", "mdd95_unlimited_items"):
        assert published[key] is None, key
        assert "one judge" in published["null_reasons"][key], key
    assert ("Design s x i x g:si x r:sig: one judge (gpt-4) in the records: the judge facet is fixed; "
            "E rho^2, MDD and items-needed are for that judge, and the ceiling, judges-needed") in run["page"]
    # ... and the D-study table gives each missing number its reason, beside the dash
    dstudy = run["page"][run["page"].index("<h4>D-study</h4>"):]
    dstudy = dstudy[: dstudy.index("</table>")]
    row = dstudy[dstudy.index("<code>ceiling</code>"):]
    row = row[: row.index("</tr>")]
    assert "one judge" in row, row
    # CyclicJudge does not apply to one judge: skipped, with the reason, not a failed fit.
    cyclic = fit["analyses"]["cyclic"]
    assert cyclic["status"] == "skipped"
    assert "one judge (gpt-4)" in cyclic["reason"]
    assert "cyclic not run on arena / all / all: the balanced block has one judge (gpt-4)" in run["printed"]
    assert "<h3>CyclicJudge</h3>\n<p class=\"note\">Not fitted: the balanced block has one judge (gpt-4)" in run["page"]


def test_arena_cyclic_on_one_judge_says_which_facet_and_what_it_needs(arena: dict[str, Any]) -> None:
    result = CliRunner().invoke(app, ["cyclic", "--store", arena["store"].url, "--item-set", "arena"])
    assert result.exit_code == 1, result.output
    message = " ".join(result.output.split())
    assert message.startswith("error: CyclicJudge cannot run on arena: ")
    assert "one judge (gpt-4)" in message  # the facet and its one level
    assert "at least two judges on the same systems, scenarios and generations" in message  # what to add
    assert "jurymeter plan" in message
    assert "G-study" in message
    assert "Traceback" not in result.output
