"""One judge in the block: the judge facet leaves the design and the D-study answers what it can (issue 14, point 1).

References, independent of the code under test:

- expected mean squares of ``s x i x r:si``, ``s x i`` and ``s x i x g:si x r:sig``
  written out by hand (Brennan 2001, ch. 3) and computed with numpy loops over
  cell means;
- simulation with known components (bias within 3 Monte Carlo SE);
- E rho^2, Phi, MDD and items-needed from their formulas written out here;
- the real MT-Bench single-answer sample read from the store with polars.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import orjson
import polars as pl
import pytest
from typer.testing import CliRunner

from jurymeter.cli import app
from jurymeter.errors import DesignError
from jurymeter.io.ingest import ingest
from jurymeter.io.sources import discover_sources
from jurymeter.io.store import Store
from jurymeter.io.validate import ValidationOptions
from jurymeter.stats.blocks import balanced_block
from jurymeter.stats.fitted_design import fitted_design
from jurymeter.stats.gstudy import fit_gstudy
from jurymeter.stats.reliability import GStudyRequest, assess_item_set
from samples import SAMPLES

# Components equal the hand-written EMS solution to rounding of sums of squares.
EMS_TOL = 1e-10
Z = 1.959963984540054
JUDGE_KEYS = (
    "ceiling", "ceiling_by_judges.1", "ceiling_by_judges.3", "judges_needed", "mdd95_unlimited_items",
    "budget_optimum.120.n_j", "ensembles.2", "ensembles.3", "intervals.ceiling", "intervals.ceiling_3_judges",
    "intervals.judges_needed", "p_ceiling_at_least_0_8", "nomogram", "rank_reliability.wrong_order_top10_3_judges",
)


def _records(x: np.ndarray, *, judge: str = "gpt-4", generations: bool = False) -> pl.DataFrame:
    """Long records of an (s, i[, g], r) array, one judge."""
    index = np.indices(x.shape).reshape(x.ndim, -1)
    frame: dict[str, Any] = {
        "item_set": "one", "system_id": [f"s{k:02d}" for k in index[0]], "item_id": [f"i{k:03d}" for k in index[1]],
        "judge_id": judge, "score": x.reshape(-1),
        "generation": index[2] if generations else 0, "replicate": index[-1],
    }
    return pl.DataFrame(frame)


def _simulate(rng: np.random.Generator, n_s: int, n_i: int, n_r: int, comp: dict[str, float]) -> np.ndarray:
    s = rng.normal(0, np.sqrt(comp["s"]), (n_s, 1, 1))
    i = rng.normal(0, np.sqrt(comp["i"]), (1, n_i, 1))
    si = rng.normal(0, np.sqrt(comp["si"]), (n_s, n_i, 1))
    e = rng.normal(0, np.sqrt(comp["e"]), (n_s, n_i, n_r))
    return 5.0 + s + i + si + e


def _ems_sir(x: np.ndarray) -> dict[str, float]:
    """``s x i x r:si`` by hand: mean squares from cell means, then the EMS equations solved."""
    n_s, n_i, n_r = x.shape
    grand = x.mean()
    ms = [x[a].mean() for a in range(n_s)]
    mi = [x[:, b].mean() for b in range(n_i)]
    ss_s = ss_i = ss_si = ss_e = 0.0
    for a in range(n_s):
        ss_s += n_i * n_r * (ms[a] - grand) ** 2
        for b in range(n_i):
            cell = x[a, b].mean()
            ss_si += n_r * (cell - ms[a] - mi[b] + grand) ** 2
            for c in range(n_r):
                ss_e += (x[a, b, c] - cell) ** 2
    for b in range(n_i):
        ss_i += n_s * n_r * (mi[b] - grand) ** 2
    ms_s, ms_i = ss_s / (n_s - 1), ss_i / (n_i - 1)
    ms_si, ms_e = ss_si / ((n_s - 1) * (n_i - 1)), ss_e / (n_s * n_i * (n_r - 1))
    # E[MS_e] = e; E[MS_si] = e + n_r si; E[MS_s] = e + n_r si + n_i n_r s; E[MS_i] = e + n_r si + n_s n_r i
    return {"e": ms_e, "si": (ms_si - ms_e) / n_r, "s": (ms_s - ms_si) / (n_i * n_r), "i": (ms_i - ms_si) / (n_s * n_r)}


def _ems_si(x: np.ndarray) -> dict[str, float]:
    """``s x i`` (one replicate) by hand: the residual is the interaction."""
    n_s, n_i = x.shape
    grand = x.mean()
    ms_s = n_i * sum((x[a].mean() - grand) ** 2 for a in range(n_s)) / (n_s - 1)
    ms_i = n_s * sum((x[:, b].mean() - grand) ** 2 for b in range(n_i)) / (n_i - 1)
    resid = sum(
        (x[a, b] - x[a].mean() - x[:, b].mean() + grand) ** 2 for a in range(n_s) for b in range(n_i)
    ) / ((n_s - 1) * (n_i - 1))
    return {"si": resid, "s": (ms_s - resid) / n_i, "i": (ms_i - resid) / n_s}


def _ems_sigr(x: np.ndarray) -> dict[str, float]:
    """``s x i x g:si x r:sig`` by hand (generations nested in system-item cells, replicates in those)."""
    n_s, n_i, n_g, n_r = x.shape
    grand = x.mean()
    ms_a = np.array([x[a].mean() for a in range(n_s)])
    mi_b = np.array([x[:, b].mean() for b in range(n_i)])
    cell = np.array([[x[a, b].mean() for b in range(n_i)] for a in range(n_s)])
    ss_s = n_i * n_g * n_r * float(((ms_a - grand) ** 2).sum())
    ss_i = n_s * n_g * n_r * float(((mi_b - grand) ** 2).sum())
    ss_si = n_g * n_r * sum(
        (cell[a, b] - ms_a[a] - mi_b[b] + grand) ** 2 for a in range(n_s) for b in range(n_i)
    )
    ss_g = n_r * sum(
        (x[a, b, g].mean() - cell[a, b]) ** 2 for a in range(n_s) for b in range(n_i) for g in range(n_g)
    )
    ss_e = sum(
        (x[a, b, g, r] - x[a, b, g].mean()) ** 2
        for a in range(n_s) for b in range(n_i) for g in range(n_g) for r in range(n_r)
    )
    ms_s, ms_i = ss_s / (n_s - 1), ss_i / (n_i - 1)
    ms_si = ss_si / ((n_s - 1) * (n_i - 1))
    ms_g = ss_g / (n_s * n_i * (n_g - 1))
    ms_e = ss_e / (n_s * n_i * n_g * (n_r - 1))
    return {
        "e": ms_e, "g": (ms_g - ms_e) / n_r, "si": (ms_si - ms_g) / (n_g * n_r),
        "s": (ms_s - ms_si) / (n_i * n_g * n_r), "i": (ms_i - ms_si) / (n_s * n_g * n_r),
    }


@pytest.fixture(scope="module")
def one_judge() -> tuple[np.ndarray, dict[str, Any]]:
    x = _simulate(np.random.default_rng(7), 8, 30, 2, {"s": 1.0, "i": 0.5, "si": 0.6, "e": 0.4})
    report = assess_item_set(_records(x), GStudyRequest(item_set="one", n_boot=60, fpr_simulations=20))
    return x, report


def test_one_judge_fits_s_x_i_x_r_si_and_equals_the_hand_written_ems(one_judge: tuple[np.ndarray, dict[str, Any]]) -> None:
    x, report = one_judge
    assert report["design"] == "s x i x r:si"
    assert report["block_design"] == "s x i x j x r:sij"
    assert report["fixed_facets"] == {"j": "gpt-4"}
    assert any("one judge (gpt-4)" in n and "fixed" in n for n in report["design_notes"])
    hand = _ems_sir(x)
    got = {k: v["raw"] for k, v in report["components"].items()}
    assert set(got) == {"sigma2_s", "sigma2_i", "sigma2_si", "sigma2_r_si"}
    for name, key in (("s", "sigma2_s"), ("i", "sigma2_i"), ("si", "sigma2_si"), ("e", "sigma2_r_si")):
        assert got[key] == pytest.approx(hand[name], abs=EMS_TOL, rel=EMS_TOL), name


def test_d_study_for_the_judge_follows_the_formulas_written_out(one_judge: tuple[np.ndarray, dict[str, Any]]) -> None:
    x, report = one_judge
    c = _ems_sir(x)
    n_i, n_r = x.shape[1], x.shape[2]
    delta = c["si"] / n_i + c["e"] / (n_i * n_r)
    assert report["erho2"] == pytest.approx(c["s"] / (c["s"] + delta), rel=1e-12)
    assert report["phi"] == pytest.approx(c["s"] / (c["s"] + delta + c["i"] / n_i), rel=1e-12)
    assert report["mdd95"] == pytest.approx(Z * np.sqrt(2 * delta), rel=1e-12)
    delta30 = c["si"] / 30 + c["e"] / 30  # 30 items, one run
    assert report["erho2_30"] == pytest.approx(c["s"] / (c["s"] + delta30), rel=1e-12)
    assert report["mdd95_30"] == pytest.approx(Z * np.sqrt(2 * delta30), rel=1e-12)
    n = 1
    while c["s"] / (c["s"] + (c["si"] + c["e"]) / n) < report["target"]:
        n += 1
    assert report["items_needed"] == n
    for key in JUDGE_KEYS:
        assert "one judge" in report["null_reasons"][key], key
    assert report["ceiling"] is None
    assert report["judges_needed"] is None
    assert report["mdd95_unlimited_items"] is None
    assert report["p_ceiling_at_least_0_8"] is None
    assert all(v is None for v in report["ceiling_by_judges"].values())
    assert report["ensembles"] == {}
    assert report["rank_reliability"]["wrong_order_top10_3_judges"] is None
    assert all(report["intervals"][k]["low"] is None for k in ("ceiling", "ceiling_3_judges", "judges_needed"))
    for best in report["budget_optimum"].values():  # the split over items and runs for that judge
        assert best["n_j"] is None
        assert best["n_i"] is not None
        assert best["n_i"] * best["n_r"] <= 120 * 9


def test_components_are_unbiased_over_simulations() -> None:
    truth = {"s": 0.8, "i": 0.5, "si": 0.6, "e": 0.4}
    rng = np.random.default_rng(11)
    draws = []
    for _ in range(100):
        x = _simulate(rng, 6, 20, 2, truth)
        block = balanced_block(_records(x))
        fitted = fitted_design(block.layout)
        fit = fit_gstudy(np.squeeze(block.x, axis=fitted.squeeze), fitted.design)
        draws.append([fit.component(k) for k in ("s", "i", "si", "r:si")])
    values = np.array(draws)
    mean, se = values.mean(axis=0), values.std(axis=0, ddof=1) / np.sqrt(len(values))
    for k, name in enumerate(("s", "i", "si", "e")):
        assert abs(mean[k] - truth[name]) < 3 * se[k], (name, mean[k], se[k])


def test_one_replicate_gives_s_x_i() -> None:
    x = _simulate(np.random.default_rng(3), 5, 12, 1, {"s": 1.0, "i": 0.3, "si": 0.5, "e": 0.2})
    report = assess_item_set(_records(x), GStudyRequest(item_set="one", n_boot=40, fpr_simulations=0))
    assert report["design"] == "s x i"
    hand = _ems_si(x[..., 0])
    assert report["components"]["sigma2_s"]["raw"] == pytest.approx(hand["s"], abs=EMS_TOL)
    assert report["components"]["sigma2_i"]["raw"] == pytest.approx(hand["i"], abs=EMS_TOL)
    assert report["components"]["sigma2_si"]["raw"] == pytest.approx(hand["si"], abs=EMS_TOL)
    assert report["erho2"] == pytest.approx(hand["s"] / (hand["s"] + hand["si"] / 12), rel=1e-12)


def test_generations_and_replicates_are_separate_facets() -> None:
    rng = np.random.default_rng(5)
    n_s, n_i, n_g, n_r = 5, 10, 3, 2
    x = (rng.normal(0, 1, (n_s, 1, 1, 1)) + rng.normal(0, 0.5, (1, n_i, 1, 1))
         + rng.normal(0, 0.6, (n_s, n_i, 1, 1)) + rng.normal(0, 0.9, (n_s, n_i, n_g, 1))
         + rng.normal(0, 0.3, (n_s, n_i, n_g, n_r)))
    request = GStudyRequest(item_set="one", generations="facet", n_boot=40, fpr_simulations=0)
    report = assess_item_set(_records(x, generations=True), request)
    assert report["design"] == "s x i x g:si x r:sig"
    hand = _ems_sigr(x)
    got = {k: v["raw"] for k, v in report["components"].items()}
    for name, key in (("s", "sigma2_s"), ("i", "sigma2_i"), ("si", "sigma2_si"), ("g", "sigma2_g_si"),
                      ("e", "sigma2_r_sig")):
        assert got[key] == pytest.approx(hand[name], abs=EMS_TOL), name
    assert report["ceiling"] is None
    assert "one judge" in report["null_reasons"]["ceiling"]


def test_one_system_is_refused_with_what_to_do() -> None:
    x = _simulate(np.random.default_rng(1), 1, 6, 2, {"s": 1.0, "i": 0.3, "si": 0.5, "e": 0.2})
    with pytest.raises(DesignError, match=r"1 system\(s\).*at least 2 systems"):
        assess_item_set(_records(x), GStudyRequest(item_set="one", n_boot=10))


# ---------------------------------------------------------------- the real samples
CONFIG = """store = "{url}"
landing = ""
[universes]
gpt4 = ["gpt-4"]
alpha = ["mockllm/grader-alpha"]
[populations]
turbo35 = ["gpt-3.5-turbo_sad", "gpt-3.5-turbo_happy"]
[fit]
universes = ["all", "gpt4", "alpha"]
populations = ["all", "turbo35"]
n_boot = 40
"""


@pytest.fixture(scope="module")
def samples(tmp_path_factory: pytest.TempPathFactory) -> tuple[Store, Path]:
    """MT-Bench's single-answer logs and the inspect_ai sample, ingested as a user would."""
    paths = sorted((SAMPLES / "mt_bench").glob("single__*.jsonl"))
    paths += [p for p in sorted((SAMPLES / "inspect_ai").iterdir()) if p.suffix in (".eval", ".json")
              and p.name != "PROVENANCE.json"]
    root = tmp_path_factory.mktemp("onejudge")
    store = Store(str(root / "store"))
    ingest(store, discover_sources([str(p) for p in paths]), ValidationOptions())
    config = root / "jm.toml"
    config.write_text(CONFIG.format(url=store.url))
    return store, config


def _hand_mt_bench(store: Store) -> dict[str, float]:
    """The gpt-4 judge's scores of the two gpt-3.5-turbo systems, as an (s, i) array, fitted by hand."""
    records = (
        store.scan("pointwise", "mt-bench").collect()
        .filter((pl.col("judge_id") == "gpt-4") & pl.col("system_id").str.starts_with("gpt-3.5-turbo"))
        .sort("system_id", "item_id")
    )
    systems, items = sorted(set(records["system_id"])), sorted(set(records["item_id"]))
    x = np.full((len(systems), len(items)), np.nan)
    for system, item, score in records.select("system_id", "item_id", "score").iter_rows():
        x[systems.index(system), items.index(item)] = score
    assert not np.isnan(x).any()
    return _ems_si(x)


def test_gstudy_json_on_the_mt_bench_single_judge_sample(samples: tuple[Store, Path]) -> None:
    store, config = samples
    result = CliRunner().invoke(app, ["gstudy", "--store", store.url, "--config", str(config), "--item-set",
                                      "mt-bench", "--universe", "gpt4", "--population", "turbo35", "--json",
                                      "--boot", "40"])
    assert result.exit_code == 0, result.output
    report = orjson.loads(result.stdout)
    assert report["design"] == "s x i"
    assert report["fixed_facets"] == {"j": "gpt-4"}
    hand = _hand_mt_bench(store)
    for name in ("s", "i", "si"):
        assert report["components"][f"sigma2_{name}"]["raw"] == pytest.approx(hand[name], abs=EMS_TOL)
    for key in ("ceiling", "judges_needed", "ensembles.2", "p_ceiling_at_least_0_8"):
        assert "one judge" in report["null_reasons"][key], key
    text = CliRunner().invoke(app, ["gstudy", "--store", store.url, "--config", str(config), "--item-set",
                                    "mt-bench", "--universe", "gpt4", "--population", "turbo35", "--boot", "40",
                                    "--verbose"])  # the notes, listed (folded into a count by default)
    assert text.exit_code == 0, text.output
    assert "design s x i (block s x i x j): one judge (gpt-4)" in " ".join(text.output.split())


def test_nightly_fits_of_the_samples(samples: tuple[Store, Path]) -> None:
    from jurymeter.pipeline.cache import run_fits
    from jurymeter.pipeline.config import load_config
    from jurymeter.pipeline.jobs import plan_fits

    store, path = samples
    plan = plan_fits(store, load_config(path, environ={}))
    outcomes = {(o.job.item_set, o.job.universe, o.job.population): o for o in run_fits(store, plan.jobs, figures=True)}
    fitted = outcomes[("mt-bench", "gpt4", "turbo35")]
    assert fitted.error is None, fitted.error
    entry = fitted.summary["gstudy"]
    assert entry["status"] == "fitted"
    assert entry["design"] == "s x i"
    assert entry["ceiling"] is None
    assert "one judge (gpt-4)" in entry["design_note"]
    hand = _hand_mt_bench(store)
    report = fitted.report["analyses"]["gstudy"]
    assert report["components"]["sigma2_s"]["raw"] == pytest.approx(hand["s"], abs=EMS_TOL)
    assert "one judge" in report["null_reasons"]["ceiling_by_judges.2"]
    assert fitted.figures is not None  # figure 1 (one curve); no nomogram or budget figure: nothing to draw
    assert not any("nomogram" in name or "budget" in name for name in fitted.figures)
    # inspect_ai with one judge: one system, so no G-study, its reason saying what the user can do;
    # the fit goes on with the analyses that need no second system (issue 22)
    alpha = outcomes[("jm_mock_judge", "alpha", "all")]
    assert alpha.error is None, alpha.error
    gstudy = alpha.summary["gstudy"]
    assert gstudy["status"] == "skipped"
    assert "1 system(s)" in gstudy["reason"]
    assert "at least 2 systems" in gstudy["reason"]
