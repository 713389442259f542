"""The latent-scale G-study as an analysis of the pipeline (issue 26 point 3): opt-in, its tables and its nulls.

The estimator itself is checked against glmer and clmm, by brute force and by simulation in
tests/test_latent_gstudy.py; here: that a stored item set's records reach it as the same cells (the
analysis's numbers equal ``fit_latent`` on cells counted here by hand from the JSON Lines), that a night
fits it only when asked, and that scores it cannot model are said, not fitted.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import orjson
import pytest
from typer.testing import CliRunner

from ingest_util import run_ingest
from jurymeter.cli import app
from jurymeter.io.store import Store
from jurymeter.pipeline.config import load_config
from jurymeter.stats.latent import LatentCells, fit_latent, simulate_latent
from report_pages import fit_publish_and_print
from samples import SAMPLES  # the repository's copy of ../shared/samples

TRUTH = {"s": 0.6, "i": 0.8, "j": 0.2, "si": 0.3}


def _binary_dump(path: Path, seed: int = 3) -> list[dict]:
    """One JSON line per judgment of a binary item set drawn from the latent model (2 per cell)."""
    cells = simulate_latent({"s": 6, "i": 12, "j": 3}, TRUTH, np.array([0.2]), replicates=2,
                            rng=np.random.default_rng(seed))
    rows = []
    for s, i, j, counts in zip(cells.system, cells.item, cells.judge, cells.counts, strict=True):
        for category, n in enumerate(counts):
            rows += [{"item_set": "bin", "system_id": f"sys-{s}", "item_id": f"q{i:02d}", "judge_id": f"judge-{j}",
                      "score": float(category), "replicate": r} for r in range(int(n))]
    # a replicate index per cell, as a log with repeated calls writes it
    seen: dict[tuple[str, str, str], int] = {}
    for row in rows:
        key = (row["system_id"], row["item_id"], row["judge_id"])
        row["replicate"] = seen.get(key, 0)
        seen[key] = row["replicate"] + 1
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return rows


def _by_hand(rows: list[dict]) -> LatentCells:
    """The cells of the rows, counted with plain Python (ids sorted as strings, as the store sorts them)."""
    codes = {c: {v: k for k, v in enumerate(sorted({r[c] for r in rows}))} for c in ("system_id", "item_id", "judge_id")}
    counts: dict[tuple[int, int, int], list[int]] = {}
    for r in rows:
        key = (codes["system_id"][r["system_id"]], codes["item_id"][r["item_id"]], codes["judge_id"][r["judge_id"]])
        counts.setdefault(key, [0, 0])[int(r["score"])] += 1
    keys = sorted(counts)
    return LatentCells(np.array([k[0] for k in keys]), np.array([k[1] for k in keys]), np.array([k[2] for k in keys]),
                       np.array([counts[k] for k in keys]))


@pytest.fixture(scope="module")
def binary_store(tmp_path_factory: pytest.TempPathFactory) -> tuple[Store, list[dict]]:
    root = tmp_path_factory.mktemp("latent")
    rows = _binary_dump(root / "bin.jsonl")
    store = Store(str(root / "store"))
    run_ingest(store, root / "bin.jsonl")
    return store, rows


def test_the_command_fits_the_stored_cells(binary_store: tuple[Store, list[dict]]) -> None:
    store, rows = binary_store
    got = CliRunner().invoke(app, ["latent", "--store", store.url, "--item-set", "bin", "--json"])
    assert got.exit_code == 0, got.output
    report = orjson.loads(got.stdout)
    reference = fit_latent(_by_hand(rows), link="logit")
    assert report["records"] == len(rows)
    assert report["categories"] == [0.0, 1.0]
    for term, value in reference.sigma2.items():
        assert report["components"][term] == pytest.approx(value, rel=1e-9, abs=1e-12), term
    assert report["dstudy"]["erho2"] is not None
    lo, hi = report["dstudy"]["erho2_ci"]
    assert lo <= report["dstudy"]["erho2"] <= hi


def test_a_night_fits_it_only_when_asked(binary_store: tuple[Store, list[dict]], tmp_path: Path) -> None:
    store, _ = binary_store
    plain = tmp_path / "plain.toml"
    plain.write_text(f'store = "{store.url}"\nlanding = ""\n[fit]\nn_boot = 50\n')
    summary, _ = fit_publish_and_print(store, load_config(plain, environ={}), "r-plain")
    [fit] = [f for f in summary["fits"] if f["item_set"] == "bin"]
    assert "latent" not in fit["analyses"]  # not a default analysis: about a minute of CPU at 50K cells
    asked = tmp_path / "asked.toml"
    asked.write_text(f'store = "{store.url}"\nlanding = ""\n[fit]\nn_boot = 50\n[fit.latent]\nlink = "probit"\n')
    summary, printed = fit_publish_and_print(store, load_config(asked, environ={}), "r-asked")
    [fit] = [f for f in summary["fits"] if f["item_set"] == "bin"]
    part = fit["analyses"]["latent"]
    assert part["latent_link"] == "probit"
    assert part["latent_categories"] == 2
    assert 0 < part["latent_erho2"] < 1
    assert "on the latent (probit) scale" in " ".join(printed.split())
    results = Path(store.url) / "results" / "r-asked"
    import polars as pl

    dstudy = pl.read_parquet(results / "latent_dstudy.parquet")
    assert sorted(zip(dstudy["quantity"], dstudy["scale"], strict=True)) == [
        ("erho2", "latent"), ("mdd95", "latent"), ("mdd95", "score")]


def test_continuous_scores_are_not_fitted_and_say_why(tmp_path: Path) -> None:
    rng = np.random.default_rng(1)
    rows = [{"item_set": "cont", "system_id": f"s{s}", "item_id": f"q{i}", "judge_id": "j0",
             "score": float(rng.normal(5, 1))} for s in range(4) for i in range(8)]
    (tmp_path / "c.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    store = Store(str(tmp_path / "store"))
    run_ingest(store, tmp_path / "c.jsonl")
    got = CliRunner().invoke(app, ["latent", "--store", store.url, "--item-set", "cont"])
    assert got.exit_code == 1
    assert "the scores take 32 distinct values" in " ".join(got.output.split())
    assert "Traceback" not in got.output
    bad = CliRunner().invoke(app, ["latent", "--store", store.url, "--item-set", "cont", "--link", "cloglog"])
    assert bad.exit_code == 1
    assert "--link must be one of logit, probit" in bad.output


POINTWISE_SAMPLES = sorted([*(SAMPLES / "mt_bench").glob("single__*.jsonl"), *(SAMPLES / "inspect_ai").glob("*.eval")])


@pytest.mark.parametrize("sample", POINTWISE_SAMPLES, ids=lambda p: p.name[:40])
def test_every_real_sample_fits_or_says_why_and_every_null_has_its_reason(sample: Path, tmp_path: Path) -> None:
    from jurymeter.pipeline.fit import fit_and_tabulate
    from jurymeter.pipeline.jobs import plan_fits
    from test_every_shape import _finite_numbers, _unexplained

    if not sample.exists():
        pytest.skip(f"sample {sample} not present")
    store = Store(str(tmp_path / "store"))
    run_ingest(store, sample)
    config = tmp_path / "jm.toml"
    config.write_text(f'store = "{store.url}"\nlanding = ""\n[fit]\nanalyses = ["latent"]\n')
    jobs = plan_fits(store, load_config(config, environ={})).jobs
    assert jobs
    for job in jobs:
        result = fit_and_tabulate(job, figures=True)
        assert result.error is None, result.trace
        part = result.summary["latent"]
        report = result.report["analyses"]["latent"]
        if part["status"] == "skipped":  # e.g. one system, or every score the same
            assert part["reason"].strip(), job.item_set
            continue
        assert not _unexplained(report), (job.item_set, _unexplained(report))
        assert _finite_numbers(report) > 0


def test_real_logs_whose_systems_each_have_their_own_judge_give_no_component_at_the_optimizers_bound(
    tmp_path: Path,
) -> None:
    # The three MT-Bench single logs together, as a user's landing folder: gpt-4 scored two repositories'
    # systems and gpt-4-turbo a third's, so judges are confounded with systems. The fit either separates the
    # terms or says it cannot; a variance of MAX_SD**2 (400) is the optimizer's bound, not an estimate.
    from jurymeter.pipeline.fit import fit_and_tabulate
    from jurymeter.pipeline.jobs import plan_fits
    from jurymeter.stats.latent.solve import MAX_SD

    samples = sorted((SAMPLES / "mt_bench").glob("single__*.jsonl"))
    if len(samples) < 2:
        pytest.skip("the MT-Bench single samples are not present")
    store = Store(str(tmp_path / "store"))
    for sample in samples:
        run_ingest(store, sample)
    config = tmp_path / "jm.toml"
    config.write_text(f'store = "{store.url}"\nlanding = ""\n[fit]\nanalyses = ["latent"]\n')
    for job in plan_fits(store, load_config(config, environ={})).jobs:
        result = fit_and_tabulate(job, figures=False)
        assert result.error is None, result.trace
        part = result.summary["latent"]
        if part["status"] == "skipped":  # not identified: the reason names the terms and what to do
            assert "does not identify sigma2_" in part["reason"], part
            assert "one judge at a time" in part["reason"], part
            continue
        components = result.report["analyses"]["latent"]["components"]
        assert all(v is None or v < 0.99 * MAX_SD**2 for v in components.values()), components
