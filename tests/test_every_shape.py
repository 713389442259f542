"""Every registered analysis on every real shape, through the nightly fit path (issue 22, points 4 and 5).

The matrix: each sample log of ``tests/data/samples`` alone, each sample folder,
the whole samples folder, an AlpacaEval file without ``referenced_models`` (as
every file of alpaca_eval's results folder is: no game has a known order), the
demo's dump (``jurymeter simulate``) and a sequential log laid out as
``jurymeter batch-plan`` writes it, filled in with scores. Each is ingested into
its own store, planned (``pipeline.jobs.plan_fits``) and fitted by
``pipeline.fit.fit_and_tabulate``, what a Dask worker of ``jurymeter run`` runs.

Asserted for every fit: no exception (the fit's error is ``None``); every
registered analysis of the protocol is in the summary, fitted or skipped with a
non-empty reason; in a fitted analysis's report every null (or non-finite)
number has its reason (the report's own conventions: ``reason`` beside or
above it, ``<key>_reason``, ``null_reasons``, ``reasons``), and the analysis
computed some finite number.

Then the numbers the logs' own tools give, written here from the raw files with
the standard library: FastChat's ``show_result`` single-answer averages (drop
``score == -1``, group by model, mean: ``fastchat/llm_judge/show_result.py``,
``display_result_single``), equal to the default G-study's system means, also on
a real file's keys judged more than once (the default fit is then every record);
alpaca_eval's win rate (the mean of ``preference - 1`` over the judged elements,
0 read as 1.5, times 100), equal to 100 sigmoid of the two systems' Bradley-Terry
rating difference (a two-system Bradley-Terry with ties as half a win is the win
share); and the counts of Arena-Hard, MT-Bench pair and inspect_ai games and grades.
"""

from __future__ import annotations

import csv
import json
import math
import random
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import polars as pl
import pytest
from typer.testing import CliRunner

from jurymeter.analyses import registered
from jurymeter.cli import app
from jurymeter.io.ingest import ingest
from jurymeter.io.sources import discover_sources
from jurymeter.io.store import Store
from jurymeter.io.validate import ValidationOptions
from report_pages import report_text
from samples import SAMPLES

BOOT = 20  # small bootstraps: the matrix checks shapes and reasons, not intervals
CONFIG = f"""
[fit]
n_boot = {BOOT}
[fit.pairwise]
n_boot = {BOOT}
n_perm = 9
[fit.sequential]
n_boot = 5
n_sim = 5
"""

SAMPLE_FILES = sorted(p for p in SAMPLES.glob("*/*") if p.suffix in (".jsonl", ".json", ".eval")
                      and p.name != "PROVENANCE.json")
MT = SAMPLES / "mt_bench"
LESNIKOW = MT / "single__lesnikow-fast-chat__gpt-4-turbo_single.jsonl"
COT = SAMPLES / "alpaca_eval" / "alpaca_eval_cot_gpt4_turbo_fn__alpaca-7b.subset.json"


# ---------------------------------------------------------------- the shapes

def _without_referenced_models(root: Path) -> Path:
    """The cot sample with ``referenced_models`` taken out of every element (alpaca_eval's results files)."""
    elements = json.loads(COT.read_text())
    assert any("referenced_models" in e for e in elements)
    for e in elements:
        e.pop("referenced_models", None)
    path = root / "alpaca_no_order.json"
    path.write_text(json.dumps(elements, indent=2))
    return path


def _two_systems_with_repeats(root: Path) -> Path:
    """Lesnikow's real single file (16 keys judged twice, one system) beside a second system.

    The second system is the same file's first judgment of each key, renamed and
    scored ``11 - score``: every (system, item, judge) cell is present, but only
    the first system has the repeats, so the balanced block (one replicate)
    would drop 16 of its records.
    """
    lines = LESNIKOW.read_text().splitlines()
    seen: set[tuple[int, int]] = set()
    mirror = []
    for line in lines:
        r = json.loads(line)
        key = (r["question_id"], r["turn"])
        if key in seen:
            continue
        seen.add(key)
        r["model"] = "mirror"
        r["score"] = 11 - r["score"] if r["score"] != -1 else -1
        mirror.append(json.dumps(r))
    path = root / "single__two_systems.jsonl"
    path.write_text("\n".join([*lines, *mirror]) + "\n")
    return path


def _demo_dump(root: Path) -> Path:
    out = root / "demo"
    # The demo's dump (`jurymeter demo`: the simulator's defaults, seed 0, 12 faults) at a smaller
    # size: the default one takes 28 s a fit here, and its shape (both protocols, batches, faults) is the same.
    result = CliRunner().invoke(app, ["simulate", "--out", str(out), "--seed", "0", "--faults", "12",
                                      "--systems", "4", "--items", "30", "--judges", "3"])
    assert result.exit_code == 0, result.output
    return out


SEQ_SYSTEMS = [f"sys-{k}" for k in range(6)]


def _batch_plan_log(root: Path) -> Path:
    """``jurymeter batch-plan`` over six systems and two judges, filled in with 1-5 ratings.

    Each rating is of its own question (the item is the batch slot), so every
    (item, system, judge) is rated in one batch only.
    """
    (root / "units.txt").write_text("".join(f"{s}\n" for s in SEQ_SYSTEMS))
    (root / "judges.txt").write_text("lean\nflat\n")
    plan = root / "plan.csv"
    result = CliRunner().invoke(app, ["batch-plan", "--out", str(plan), "--items", str(root / "units.txt"),
                                      "--judges", str(root / "judges.txt"), "--batches", "24", "--seed", "1"])
    assert result.exit_code == 0, result.output
    with plan.open(newline="") as f:
        rows = sorted(csv.DictReader(f), key=lambda r: (r["batch_id"], int(r["batch_position"])))
    rng = random.Random(5)
    quality = {s: k - 2.5 for k, s in enumerate(SEQ_SYSTEMS)}
    out, previous = [], {}
    for r in rows:
        lean = 0.6 if r["judge_id"] == "lean" else 0.0
        before = previous.get(r["batch_id"], 3)
        latent = 3 + 0.5 * quality[r["item_id"]] + lean * (before - 3) + rng.gauss(0, 0.8)
        score = min(5, max(1, round(latent)))
        previous[r["batch_id"]] = score
        out.append({"item_set": "seq", "batch_id": r["batch_id"], "batch_position": r["batch_position"],
                    "item_id": f"q-{r['batch_id']}-{r['batch_position']}", "system_id": r["item_id"],
                    "judge_id": r["judge_id"], "score": score})
    path = root / "filled.csv"
    with path.open("w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(out[0]))
        writer.writeheader()
        writer.writerows(out)
    return path


def _fits(root: Path, sources: list[Path]) -> list[tuple[Any, Any]]:
    """Ingest ``sources`` into a store of their own and fit every planned job as a nightly worker does."""
    from jurymeter.pipeline.config import load_config
    from jurymeter.pipeline.fit import fit_and_tabulate
    from jurymeter.pipeline.jobs import plan_fits

    store = Store(str(root / "store"))
    ingest(store, discover_sources([str(p) for p in sources]), ValidationOptions())
    path = root / "jm.toml"
    path.write_text(f'store = "{store.url}"\nlanding = ""\n{CONFIG}')
    plan = plan_fits(store, load_config(path, environ={}))
    assert plan.jobs, f"nothing planned for {sources}: {plan.skipped}"
    return [(job, fit_and_tabulate(job, figures=True)) for job in plan.jobs]  # the nightly run draws them


def _cases() -> Iterator[Any]:
    for p in SAMPLE_FILES:
        yield pytest.param(("file", p), id=p.name[:48])
    for folder in sorted({p.parent for p in SAMPLE_FILES}):
        yield pytest.param(("file", folder), id=f"{folder.name}/")
    yield pytest.param(("file", SAMPLES), id="samples/")
    yield pytest.param(("made", _without_referenced_models), id="alpaca-no-referenced-models")
    yield pytest.param(("made", _two_systems_with_repeats), id="mt-bench-two-systems-repeats")
    yield pytest.param(("made", _demo_dump), id="demo-dump")
    yield pytest.param(("made", _batch_plan_log), id="batch-plan-filled")


CASES = list(_cases())
_CACHE: dict[str, list[tuple[Any, Any]]] = {}


def _case_fits(case: tuple[str, Any], tmp_path_factory: pytest.TempPathFactory) -> list[tuple[Any, Any]]:
    kind, what = case
    key = f"{kind}:{what}"
    if key not in _CACHE:
        root = tmp_path_factory.mktemp("shape")
        source = what if kind == "file" else what(root)
        _CACHE[key] = _fits(root, [source])
    return _CACHE[key]


# ---------------------------------------------------------------- the reason checks

def _text(value: Any) -> bool:
    return isinstance(value, str) and bool(value.strip())


def _null(value: Any) -> bool:
    return value is None or (isinstance(value, float) and not math.isfinite(value))


def _unexplained(report: dict[str, Any]) -> list[str]:
    """Paths of the report's null (or non-finite) numbers that carry no reason, by the report's conventions.

    A null is explained by a non-empty ``reason`` in its own dict or any dict
    above it; by ``<key>_reason``, ``null_reasons[key]`` or ``reasons[key]``
    beside it; by the G-study's top-level ``null_reasons`` (its dotted path or a
    prefix of it). Keys that are reasons themselves, notes and the request's
    options (``None`` = the default) are not numbers.
    """
    top = report.get("null_reasons") if isinstance(report.get("null_reasons"), dict) else {}
    found: list[str] = []

    def explained_at_top(path: tuple[str, ...]) -> bool:
        dotted = [".".join(path[:k]) for k in range(1, len(path) + 1)]
        return any(_text(top.get(d)) for d in dotted)

    def walk(node: Any, path: tuple[str, ...], why: bool) -> None:
        if isinstance(node, dict):
            here = why or _text(node.get("reason"))
            beside = {**(node.get("reasons") or {}), **(node.get("null_reasons") or {})} \
                if isinstance(node.get("reasons") or {}, dict) and isinstance(node.get("null_reasons") or {}, dict) \
                else {}
            for key, value in node.items():
                key = str(key)
                if key in ("reason", "reasons", "null_reasons", "notes", "request", "design_notes") \
                        or key.endswith("_reason"):
                    continue
                walk(value, (*path, key), here or _text(node.get(f"{key}_reason")) or _text(beside.get(key)))
        elif isinstance(node, list):
            for k, value in enumerate(node):
                walk(value, (*path, str(k)), why)
        elif _null(node) and not why and not explained_at_top(path):
            found.append(".".join(path))

    walk(report, (), False)
    return found


# Nulls that are an option's value, or explained by a sibling part's reason (documented per analysis).
def _known_null(name: str, path: str, report: dict[str, Any]) -> bool:
    if name == "pairwise":
        bt = report.get("bradley_terry") or {}
        position = report.get("position") or {}
        if path == "bradley_terry.anchor":  # the option: None is the mean
            return True
        if path == "bradley_terry.length_control" or path.endswith((".rating_lc", ".rating_lc_elo")):
            return _text(bt.get("length_control_reason"))
        if path == "position.exceeds_content_noise_bound":
            return _text((position.get("reversal_rate") or {}).get("reason"))
        if path == "position.q_position_following":
            return _text(position.get("q_reason"))
        if path.startswith("family_preference.") and path.endswith("_ability_r"):
            return _text((report.get("family_preference") or {}).get("ability_reason"))
    if name == "sequential":  # labels, not numbers: a coefficient's level, a check term's states, what was pooled
        return path.rsplit(".", 1)[-1] in ("level", "previous", "current", "pooled")
    return False


def _finite_numbers(node: Any) -> int:
    if isinstance(node, dict):
        return sum(_finite_numbers(v) for v in node.values())
    if isinstance(node, list):
        return sum(_finite_numbers(v) for v in node)
    return int(isinstance(node, int | float) and not isinstance(node, bool) and math.isfinite(node))


# ---------------------------------------------------------------- the matrix

@pytest.mark.parametrize("case", CASES)
def test_every_analysis_runs_and_every_null_has_its_reason(
    case: tuple[str, Any], tmp_path_factory: pytest.TempPathFactory
) -> None:
    for job, result in _case_fits(case, tmp_path_factory):
        where = f"{job.protocol} {job.item_set}"
        assert result.error is None, f"{where}: {result.error}\n{result.trace}"
        # the analyses a night runs unasked (the opt-in latent G-study has its own real-sample test:
        # tests/test_latent_analysis.py::test_every_real_sample_*)
        expected = {a.name for a in registered() if job.protocol in a.protocols and a.by_default}
        assert set(result.summary) == expected, where
        for name, part in result.summary.items():
            report = result.report["analyses"][name]
            if part["status"] == "skipped":
                assert _text(part["reason"]), (where, name)
                assert report == {"skipped": part["reason"]}
                continue
            assert part["status"] == "fitted", (where, name)
            missing = [p for p in _unexplained(report) if not _known_null(name, p, report)]
            assert not missing, (where, name, missing)
            assert _finite_numbers(report) > 0, (where, name)
            for key, value in part.items():  # the summary's headline numbers: a number or null, never NaN
                assert not (isinstance(value, float) and not math.isfinite(value)), (where, name, key)


def _analysis(fits: list[tuple[Any, Any]], protocol: str, name: str) -> dict[str, Any]:
    (result,) = [r for job, r in fits if job.protocol == protocol]
    report: dict[str, Any] = result.report["analyses"][name]
    return report


def test_without_a_known_order_the_position_part_is_null_and_the_rest_is_computed(
    tmp_path_factory: pytest.TempPathFactory
) -> None:
    fits = _case_fits(("made", _without_referenced_models), tmp_path_factory)
    report = _analysis(fits, "pairwise", "pairwise")
    position = report["position"]
    assert position["games_order_known"] == 0
    for key in ("slot_a_advantage", "slot_a_advantage_sd", "slot_a_advantage_max", "first_slot_win_rate",
                "reversal_rate"):
        assert position[key]["value"] is None, key
        assert _text(position[key]["reason"]), key
    (judge,) = report["judges"].values()
    elements = json.loads(COT.read_text())
    systems = {elements[0]["generator_1"], elements[0]["generator_2"]}
    ties = sum(e["preference"] in (0, 1.5) for e in elements if e["preference"] is not None)
    assert judge["tie_rate"] == pytest.approx(ties / len(elements))  # tie share: every game, order or not
    assert judge["slot_a_advantage"] is None
    assert "known presentation order" in judge["null_reasons"]["first_slot_win_rate"]
    assert set(report["bradley_terry"]["systems"]) == systems


def test_one_system_leaves_the_g_study_null_with_its_reason_and_cyclic_judge_fits(
    tmp_path_factory: pytest.TempPathFactory
) -> None:
    # inspect_ai's sample: one system, two graders, two epochs. The G-study needs two systems;
    # CyclicJudge (per system) does not, and used to be lost with the G-study's error.
    fits = _case_fits(("file", SAMPLES / "inspect_ai" / "jm_mock_judge.6x2.eval"), tmp_path_factory)
    ((_, result),) = fits
    assert result.summary["gstudy"]["status"] == "skipped"
    assert "at least 2 systems" in result.summary["gstudy"]["reason"]
    assert result.summary["cyclic"]["status"] == "fitted"


# ---------------------------------------------------------------- the logs' own tools

def _fastchat_single_averages(path: Path) -> dict[str, tuple[int, float]]:
    """FastChat ``show_result --mode single``: drop ``score == -1``, group by model, mean (and the rows)."""
    scores: dict[str, list[float]] = {}
    for line in path.read_text().splitlines():
        r = json.loads(line)
        if r["score"] != -1:
            scores.setdefault(r["model"], []).append(float(r["score"]))
    return {m: (len(v), sum(v) / len(v)) for m, v in scores.items()}


def _store_counts(fits: list[tuple[Any, Any]], protocol: str) -> dict[str, int]:
    (job,) = [j for j, _ in fits if j.protocol == protocol]
    store = Store(job.store)
    records = store.scan(protocol, job.item_set).collect()
    key = "system_id" if protocol == "pointwise" else "judge_id"
    return dict(records.group_by(key).len().iter_rows())


@pytest.mark.parametrize("make", [
    pytest.param(("file", MT / "single__SumanthRH-FastChat__gpt-4_single.jsonl"), id="SumanthRH"),
    pytest.param(("made", _two_systems_with_repeats), id="lesnikow-repeats"),
])
def test_the_default_g_study_means_are_fastchats_averages(
    make: tuple[str, Any], tmp_path_factory: pytest.TempPathFactory
) -> None:
    fits = _case_fits(make, tmp_path_factory)
    source = make[1] if make[0] == "file" else next(Path(j.store).parent for j, _ in fits) / "single__two_systems.jsonl"
    fastchat = _fastchat_single_averages(source)
    report = _analysis(fits, "pointwise", "gstudy")
    board = {row["system_id"]: row["mean"] for row in report["leaderboard"]}
    ((_, result),) = [f for f in fits if f[0].protocol == "pointwise"]
    published = dict(result.tables["leaderboard"].select("system_id", "mean").iter_rows())  # the run's table
    assert set(board) == set(published) == set(fastchat)
    for model, (_, mean) in fastchat.items():
        assert board[model] == pytest.approx(mean, abs=1e-12), model
        assert published[model] == pytest.approx(mean, abs=1e-12), model
    assert _store_counts(fits, "pointwise") == {m: n for m, (n, _) in fastchat.items()}
    if make[0] == "made":  # the repeats are in: every record, and the note says why
        assert report["estimator"] == "henderson"
        assert "would drop 16 of 144 observations" in report["estimator_note"]
    else:  # complete, one judgment a key: the balanced block is every record, and says so truly
        assert report["estimator"] == "balanced"
        assert report["block"]["observations_used"] == sum(n for n, _ in fastchat.values())


def test_mt_bench_single_files_of_one_system_store_fastchats_rows(tmp_path_factory: pytest.TempPathFactory) -> None:
    # One system: no G-study (null with its reason); the stored records are FastChat's rows, less the
    # scores outside FastChat's own 1-10 scale (instructlab's two 0s, quarantined: docs/adapters.md).
    for name, out_of_scale in (("single__lesnikow-fast-chat__gpt-4-turbo_single.jsonl", 0),
                               ("single__instructlab-eval__gpt-4_single.subset.jsonl", 2)):
        path = MT / name
        fits = _case_fits(("file", path), tmp_path_factory)
        fastchat = _fastchat_single_averages(path)
        assert _store_counts(fits, "pointwise") == {m: n - out_of_scale for m, (n, _) in fastchat.items()}
        ((_, result),) = fits
        assert "at least 2 systems" in result.summary["gstudy"]["reason"]


def _alpaca_win_rate(path: Path) -> tuple[int, float]:
    """alpaca_eval's win rate of ``generator_2``: mean of ``preference - 1`` (0 read as 1.5; null dropped) x 100."""
    prefs = [1.5 if e["preference"] == 0 else float(e["preference"])
             for e in json.loads(path.read_text()) if e["preference"] is not None]
    return len(prefs), 100.0 * sum(p - 1.0 for p in prefs) / len(prefs)


@pytest.mark.parametrize("path", [p for p in sorted((SAMPLES / "alpaca_eval").glob("*.json"))
                                  if p.name != "PROVENANCE.json"], ids=lambda p: p.name[:40])
def test_alpaca_eval_win_rate_is_the_two_system_bradley_terry_win_share(
    path: Path, tmp_path_factory: pytest.TempPathFactory
) -> None:
    fits = _case_fits(("file", path), tmp_path_factory)
    n, win_rate = _alpaca_win_rate(path)
    report = _analysis(fits, "pairwise", "pairwise")
    assert report["games"] == n  # one game a judged element (failed calls quarantined)
    elements = json.loads(path.read_text())
    reference, model = elements[0]["generator_1"], elements[0]["generator_2"]
    bt = report["bradley_terry"]
    if win_rate in (0.0, 100.0):  # one system won every game: no finite rating, and why
        assert "systems" not in bt
        assert _text(bt["reason"])
        return
    share = 100.0 / (1.0 + math.exp(bt["systems"][reference]["rating"] - bt["systems"][model]["rating"]))
    assert share == pytest.approx(win_rate, abs=1e-6)


def _arena_games(path: Path) -> int:
    """Arena-Hard: two games a line (``games``), less those without a verdict (``score`` null)."""
    n = 0
    for line in path.read_text().splitlines():
        r = json.loads(line)
        n += sum(g.get("score") is not None for g in r["games"])
    return n


@pytest.mark.parametrize("path", sorted((SAMPLES / "arena_hard").glob("*.jsonl")), ids=lambda p: p.name[:40])
def test_arena_hard_games_are_the_lines_verdicts(path: Path, tmp_path_factory: pytest.TempPathFactory) -> None:
    fits = _case_fits(("file", path), tmp_path_factory)
    assert sum(_store_counts(fits, "pairwise").values()) == _arena_games(path)


@pytest.mark.parametrize("path", sorted(MT.glob("pair__*.jsonl")), ids=lambda p: p.name[:40])
def test_mt_bench_pair_games_are_fastchats_non_error_verdicts(
    path: Path, tmp_path_factory: pytest.TempPathFactory
) -> None:
    # FastChat's show_result (pairwise modes) counts the verdicts that are not "error"; jurymeter
    # stores each of them as a game (docs/adapters.md: why it publishes no win rate of its own).
    fits = _case_fits(("file", path), tmp_path_factory)
    verdicts = sum(g != "error" for line in path.read_text().splitlines()
                   for g in (json.loads(line)["g1_winner"], json.loads(line)["g2_winner"]))
    assert sum(_store_counts(fits, "pairwise").values()) == verdicts


def _fastchat_adjusted_win_rate(path: Path, *, one_sided_errors: bool) -> float:
    """FastChat ``show_result --mode pairwise-baseline``'s ``win_rate_adjusted`` of ``model_1`` (``model_2`` the baseline).

    A line is one verdict: a tie when either game is a tie or the two games
    disagree, else the model both games chose; (wins + ties / 2) / lines. FastChat
    drops a line when either game is ``error``; ``one_sided_errors`` counts such a
    line by its other game instead (what jurymeter keeps: an outcome of one order).
    """
    wins = ties = lines = 0
    for line in path.read_text().splitlines():
        r = json.loads(line)
        verdicts = [r["g1_winner"], r["g2_winner"]]
        if "error" in verdicts:
            verdicts = [v for v in verdicts if v != "error"]
            if not one_sided_errors or not verdicts:
                continue
            verdict = verdicts[0]
        else:
            verdict = "tie" if "tie" in verdicts or verdicts[0] != verdicts[1] else verdicts[0]
        lines += 1
        wins += verdict == "model_1"
        ties += verdict == "tie"
    return 100.0 * (wins + 0.5 * ties) / lines


@pytest.mark.parametrize("path", sorted(MT.glob("pair__*.jsonl")), ids=lambda p: p.name[:40])
def test_mt_bench_pair_win_rate_is_the_two_system_bradley_terry_win_share(
    path: Path, tmp_path_factory: pytest.TempPathFactory
) -> None:
    # Both samples pit two models: Bradley-Terry on the orders reconciled (both games agree, else a
    # tie) gives 100 sigmoid(rating difference) = the reconciled win share, FastChat's adjusted rate.
    first = json.loads(path.read_text().splitlines()[0])
    fits = _case_fits(("file", path), tmp_path_factory)
    bt = _analysis(fits, "pairwise", "pairwise")["bradley_terry"]["systems"]
    share = 100.0 / (1.0 + math.exp(bt[first["model_2"]]["rating"] - bt[first["model_1"]]["rating"]))
    assert share == pytest.approx(_fastchat_adjusted_win_rate(path, one_sided_errors=True), abs=1e-6)
    failed = sum("error" in (json.loads(line)["g1_winner"], json.loads(line)["g2_winner"])
                 for line in path.read_text().splitlines())
    if not failed:  # lesnikow's: no failed game, FastChat's own number exactly
        assert path.name.startswith("pair__lesnikow")
        assert share == pytest.approx(_fastchat_adjusted_win_rate(path, one_sided_errors=False), abs=1e-6)


def _inspect_accuracy(path: Path) -> dict[str, tuple[int, float]]:
    """inspect_ai's ``accuracy`` per grader from the ``.json`` log: C = 1, I = 0 (its value_to_float), unscored left out."""
    grades: dict[str, list[float]] = {}
    for sample in json.loads(path.read_text())["samples"]:
        for score in sample["scores"].values():
            value = score.get("value")
            if value in ("C", "I"):
                grader = score["metadata"]["grading"][-1]["model"]
                grades.setdefault(grader, []).append(1.0 if value == "C" else 0.0)
    return {g: (len(v), sum(v) / len(v)) for g, v in grades.items()}


@pytest.mark.parametrize("name", ["jm_mock_judge.6x2.eval", "jm_mock_judge.6x2.json"])
def test_inspect_ai_grades_are_the_logs_accuracy(name: str, tmp_path_factory: pytest.TempPathFactory) -> None:
    reference = _inspect_accuracy(SAMPLES / "inspect_ai" / "jm_mock_judge.6x2.json")  # the .eval holds the same
    fits = _case_fits(("file", SAMPLES / "inspect_ai" / name), tmp_path_factory)
    ((job, _),) = fits
    stored = Store(job.store).scan("pointwise", job.item_set).collect()
    got = {j.split("/")[-1]: (n, m) for j, n, m in
           stored.group_by("judge_id").agg(pl.len(), pl.col("score").mean()).iter_rows()}
    assert set(got) == set(reference)
    for grader, (n, accuracy) in reference.items():
        assert got[grader][0] == n, grader
        assert got[grader][1] == pytest.approx(accuracy, abs=1e-12), grader


# ---------------------------------------------------------------- the auto rule's count

def _uneven_records() -> list[dict[str, Any]]:
    """2 systems x 3 items x 2 judges, every cell present once; two cells re-judged (replicate 1)."""
    rows = [{"system_id": s, "item_id": i, "judge_id": j, "generation": 0, "replicate": 0,
             "score": float(k % 7)}
            for k, (s, i, j) in enumerate((s, i, j) for s in ("a", "b") for i in ("i1", "i2", "i3")
                                          for j in ("j1", "j2"))]
    rows += [{"system_id": "a", "item_id": "i1", "judge_id": "j1", "generation": 0, "replicate": 1, "score": 3.0},
             {"system_id": "b", "item_id": "i2", "judge_id": "j2", "generation": 0, "replicate": 1, "score": 5.0}]
    return rows


def test_the_block_counts_the_observations_every_record_makes(monkeypatch: pytest.MonkeyPatch) -> None:
    import jurymeter.stats.blocks as blocks

    records = pl.DataFrame(_uneven_records())
    # By hand: 12 (system, item, judge) cells, all present; 14 (system, item, judge, replicate) ones.
    dense = blocks.balanced_block(records)
    assert (dense.completeness, dense.observations_used, dense.observations_in) == (1.0, 12, 14)
    chunked = blocks.fit_chunks(records, ("average",), chunk_cells=4, speculate=False)  # a presence scan
    layout = chunked.layout("average")
    assert layout is not None
    assert (layout.observations_used, layout.observations_in) == (12, 14)
    monkeypatch.setattr(blocks, "_average_block_dense", lambda lazy: None)  # the polars path, the reference
    reference = blocks.balanced_block(records)
    assert (reference.observations_used, reference.observations_in) == (12, 14)
    complete = blocks.balanced_block(records.filter(pl.col("replicate") == 0))
    assert complete.observations_used == complete.observations_in == 12


@pytest.mark.parametrize("make", [pytest.param(_without_referenced_models, id="alpaca-no-referenced-models"),
                                  pytest.param(_demo_dump, id="demo-dump")])
def test_the_published_run_of_a_shape_with_null_parts_has_every_page(make: Any, tmp_path: Path) -> None:
    """The nightly run's publish step (pages, tables) on shapes whose parts are null: one page a fit."""
    from jurymeter.pipeline.cache import run_fits
    from jurymeter.pipeline.config import load_config
    from jurymeter.pipeline.jobs import plan_fits
    from jurymeter.pipeline.publish import publish_run

    source = make(tmp_path)
    store = Store(str(tmp_path / "store"))
    ingest(store, discover_sources([str(source)]), ValidationOptions())
    path = tmp_path / "jm.toml"
    path.write_text(f'store = "{store.url}"\nlanding = ""\n{CONFIG}')
    config = load_config(path, environ={})
    plan = plan_fits(store, config)
    outcomes = run_fits(store, plan.jobs, figures=True)
    summary = publish_run(store, "shape", config=config, started="t", ingest_report=None,
                          outcomes=outcomes, timings={}, skipped=plan.skipped)
    assert [f["status"] for f in summary["fits"]] == ["fitted"] * len(plan.jobs)
    report = tmp_path / "store" / "results" / "shape" / "report"
    assert len(list((report / "fits").glob("*.html"))) == len(plan.jobs)
    page = report_text(report)
    assert "Traceback" not in page
    if make is _without_referenced_models:
        assert "no game of known presentation order" in page
