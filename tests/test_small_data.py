"""Small data (3 systems x 20 items x 3 judges): no impossible values, no numpy warnings (issue 11).

Independent references: the D-study written out by hand from the report's own
raw components with the documented boundary rule (docs/gstudy.md, "Boundaries,
nulls and extrapolation"), brute force over every budget split, and the same
checks over many simulated small data sets.
"""

from __future__ import annotations

import math
import warnings
from typing import Any

import numpy as np
import polars as pl
import pytest

from jurymeter.stats.curves import curves, leaderboard
from jurymeter.stats.design import Design
from jurymeter.stats.dstudy import (
    PAPER_ROLES,
    Z95,
    budget_optimum,
    ceiling,
    erho2,
    items_needed_draws,
    judges_needed_draws,
    mdd95,
    nomogram,
    phi,
)
from jurymeter.stats.gstudy import simulate_design
from jurymeter.stats.reliability import GStudyRequest, assess_item_set
from report_pages import report_text

DESIGN = Design.parse("s x i x j")
TRUTH = {"s": 0.3, "i": 0.3, "j": 0.1, "si": 0.05, "sj": 0.02, "ij": 0.05, "sij": 0.4}
SIZES = {"s": 3, "i": 20, "j": 3}
# Seed 47 draws negative sigma2_si, sigma2_sj and sigma2_ij: before issue 11 it
# gave a single-judge ceiling of 1.039, an E rho^2 interval reaching 1.007, a
# budget optimum of 1 item x 120 judges with MDD 0.000 and six RuntimeWarnings.
SEED = 47


def records(seed: int, sizes: dict[str, int] = SIZES, truth: dict[str, float] = TRUTH) -> pl.DataFrame:
    x = simulate_design(DESIGN, sizes, truth, np.random.default_rng(seed), grand_mean=3.0)
    s, i, j = np.indices(x.shape).reshape(3, -1)
    return pl.DataFrame({
        "system_id": [f"s{k}" for k in s], "item_id": [f"i{k:02d}" for k in i],
        "judge_id": [f"j{k}" for k in j], "generation": 0, "replicate": 0, "score": x.ravel(),
    })


def assess(seed: int, **request: Any) -> dict[str, Any]:
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # any RuntimeWarning (or other warning) fails the test
        report = assess_item_set(records(seed), GStudyRequest(item_set="small", **{"n_boot": 400, **request}))
        report.update(curves(report))
        report["leaderboard"] = leaderboard(report)
    return report


@pytest.fixture(scope="module")
def small() -> dict[str, Any]:
    return assess(SEED)


def raw(report: dict[str, Any]) -> dict[str, float]:
    return {k.removeprefix("sigma2_"): v["raw"] for k, v in report["components"].items()}


def hand_ratio(tau: float, error: float) -> float | None:
    """The documented rule: tau and the error variance truncated at zero, 0/0 undefined."""
    tau, error = max(tau, 0.0), max(error, 0.0)
    return None if tau + error == 0 else tau / (tau + error)


def hand_mdd(delta: float) -> float | None:
    return Z95 * math.sqrt(2 * delta) if delta > 0 else None


def test_the_case_has_the_negative_estimates_that_caused_the_impossible_values(small) -> None:
    c = raw(small)
    assert c["si"] < 0
    assert c["sj"] < 0
    assert c["ij"] < 0
    assert c["s"] > 0


def test_no_numpy_warning_reaches_the_user(small) -> None:
    # The fixture ran with every warning turned into an error; run the pieces too.
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        sigma2 = np.array([raw(small)[label.replace(":", "_")] for label in DESIGN.labels])
        draws = np.vstack([sigma2, sigma2 * [1, 1, 1, 1, -1, 1, 1], np.zeros(7)])
        items_needed_draws(draws, DESIGN, target=0.5)
        judges_needed_draws(draws, DESIGN)
        erho2(draws, DESIGN, PAPER_ROLES.sizes(DESIGN, 1, 1))
        mdd95(draws, DESIGN, PAPER_ROLES.sizes(DESIGN, 1, 1))
        nomogram(sigma2, DESIGN)


def test_coefficients_equal_the_hand_rule_and_stay_in_the_unit_interval(small) -> None:
    c = raw(small)
    delta = c["si"] / 20 + c["sj"] / 3 + c["sij"] / 60
    absolute = delta + c["i"] / 20 + c["j"] / 3 + c["ij"] / 60
    assert small["sigma2_delta"] == pytest.approx(delta, rel=1e-12)  # raw, as the paper
    assert small["erho2"] == pytest.approx(hand_ratio(c["s"], delta), rel=1e-12)
    assert small["phi"] == pytest.approx(hand_ratio(c["s"], absolute), rel=1e-12)
    assert small["erho2_30"] == pytest.approx(hand_ratio(c["s"], c["si"] / 30 + c["sj"] + c["sij"] / 30), rel=1e-12)
    # sigma2_sj < 0: the ceiling is the boundary 1, not 1.039, and says why.
    assert small["ceiling"] == 1.0 == hand_ratio(c["s"], c["sj"])
    assert "sigma2_sj" in small["truncated"]["ceiling"]
    for k, value in small["ceiling_by_judges"].items():
        assert value == hand_ratio(c["s"], c["sj"] / int(k))
    values = [small[q] for q in ("erho2", "phi", "erho2_30", "ceiling")]
    values += list(small["ceiling_by_judges"].values())
    values += [v for row in small["nomogram"]["erho2"] for v in row]
    values += [row["erho2"] for row in small["erho2_curve"]]
    for name in ("erho2", "phi", "erho2_30", "ceiling", "ceiling_3_judges"):
        interval = small["intervals"][name]
        values += [interval["low"], interval["high"]]
        assert 0 < interval["defined"] <= 1
    assert all(v is not None and 0.0 <= v <= 1.0 for v in values)


def test_an_mdd_without_a_positive_error_variance_is_null_with_a_reason(small) -> None:
    c = raw(small)
    # With unlimited items one judge's error is sigma2_sj alone, here negative.
    assert c["sj"] < 0
    assert small["mdd95_unlimited_items"] is None
    assert "sigma2_sj" in small["null_reasons"]["mdd95_unlimited_items"]
    assert small["mdd95"] == pytest.approx(hand_mdd(small["sigma2_delta"]), rel=1e-12)
    for name in ("mdd95", "mdd95_30", "mdd95_unlimited_items"):
        interval = small["intervals"][name]
        assert interval["low"] > 0  # draws with sigma2_delta <= 0 are undefined, not 0
        assert 0 < interval["defined"] < 1
    # Every null in the report has its reason.
    for key, value in small.items():
        if value is None and key not in ("nested", "items"):
            assert key in small["null_reasons"], key


def test_budget_optimum_stays_within_the_universe_and_never_claims_a_zero_mdd(small) -> None:
    c = raw(small)
    for budget, best in small["budget_optimum"].items():
        budget = int(budget)
        splits = [(budget // j, j) for j in range(1, 4)]  # at most the 3 judges of the block
        deltas = {s: c["si"] / s[0] + c["sj"] / s[1] + c["sij"] / (s[0] * s[1]) for s in splits}
        n_i, n_j = min(deltas, key=deltas.get)
        assert best["max_judges"] == 3
        if deltas[n_i, n_j] > 0:
            assert (best["n_i"], best["n_j"]) == (n_i, n_j)
            assert best["mdd95"] == pytest.approx(hand_mdd(deltas[n_i, n_j]))
        else:  # the smallest sigma2_delta is not positive: no split can be ranked
            assert best == {"n_i": None, "n_j": None, "n_r": None, "mdd95": None, "max_judges": 3}
            assert f"budget_optimum.{budget}" in small["null_reasons"]
        rows = [r for r in small["budget_curve"] if r["budget"] == budget]
        assert {r["judges"] for r in rows} <= {1, 2, 3}
        assert all(r["mdd95"] is None or r["mdd95"] > 0 for r in rows)


def test_recommendations_beyond_the_observed_sizes_are_marked_extrapolated(small) -> None:
    flagged = small["extrapolated"]
    assert "30 items > 20 observed" in flagged["erho2_30"]
    for k in ("5", "10"):
        assert "judges" in flagged[f"ceiling_by_judges.{k}"]
    assert "ceiling_by_judges.3" not in flagged
    if small["judges_needed"] is not None and small["judges_needed"] > 3:
        assert "judges_needed" in flagged
    if small["items_needed"] is not None:
        assert ("items_needed" in flagged) == (small["items_needed"] > 20)


def test_leaderboard_has_groups_only_with_a_defined_mdd(small) -> None:
    assert [row["rank"] for row in small["leaderboard"]] == [1, 2, 3]
    assert all(row["mdd95"] == small["mdd95"] for row in small["leaderboard"])


@pytest.mark.parametrize("seed", range(25))
def test_many_small_data_sets_give_possible_values_only(seed: int) -> None:
    report = assess(seed, n_boot=100, fpr_simulations=20)
    for name in ("erho2", "phi", "erho2_30", "ceiling"):
        for value in (report[name], report["intervals"][name]["low"], report["intervals"][name]["high"]):
            assert value is None or 0.0 <= value <= 1.0, (name, value)
    for name in ("mdd95", "mdd95_30", "mdd95_unlimited_items", "mdd95_t"):
        assert report[name] is None or report[name] > 0, (name, report[name])
        if report[name] is None:
            assert name in report["null_reasons"]
    for best in report["budget_optimum"].values():
        assert best["mdd95"] is None or best["mdd95"] > 0
        assert best["n_j"] is None or best["n_j"] <= 3
    assert all(v is None or 0 <= v <= 1 for row in report["nomogram"]["erho2"] for v in row)


def test_dstudy_functions_follow_the_boundary_rule_on_hand_vectors() -> None:
    n = PAPER_ROLES.sizes(DESIGN, 10, 2)
    order = DESIGN.labels  # s, i, j, si, sj, ij, sij

    def vec(**v: float) -> np.ndarray:
        return np.array([v.get(label, 0.0) for label in order])

    negative_error = vec(s=0.2, si=-0.5, sj=0.01, sij=0.1)  # delta = -0.05 + 0.005 + 0.005 < 0
    assert float(erho2(negative_error, DESIGN, n)) == 1.0
    assert np.isnan(mdd95(negative_error, DESIGN, n))
    negative_s = vec(s=-0.1, si=0.2, sj=0.1, sij=0.1)
    assert float(erho2(negative_s, DESIGN, n)) == 0.0
    assert float(phi(negative_s, DESIGN, n)) == 0.0
    assert float(mdd95(negative_s, DESIGN, n)) == pytest.approx(Z95 * math.sqrt(2 * (0.02 + 0.05 + 0.005)))
    nothing = vec(s=-0.1, sj=-0.1, sij=0.01)
    assert np.isnan(ceiling(nothing, DESIGN))  # 0/0
    # The budget search with a judge limit equals brute force over the allowed splits.
    sigma2 = vec(s=0.3, si=0.05, sj=0.3, sij=0.3)
    n_i, n_j, n_r, mdd = budget_optimum(sigma2, DESIGN, 360, max_judges=4)
    assert (n_i, n_j, n_r) == (90, 4, 1)
    assert mdd == pytest.approx(Z95 * math.sqrt(2 * (0.05 / 90 + 0.3 / 4 + 0.3 / 360)))
    assert budget_optimum(sigma2, DESIGN, 360)[1] > 4  # unrestricted, it would take more judges


def test_the_cli_and_the_nightly_path_print_and_publish_small_data_without_warnings_or_crashes(
    tmp_path: Any,
) -> None:
    """The seed-47 case through the store: `jurymeter gstudy` prints it, a run publishes and renders it."""
    import subprocess
    import sys

    import orjson

    from jurymeter.io.ingest import ingest
    from jurymeter.io.sources import discover_sources
    from jurymeter.io.store import Store
    from jurymeter.io.validate import ValidationOptions
    from jurymeter.pipeline.cache import run_fits
    from jurymeter.pipeline.config import load_config
    from jurymeter.pipeline.jobs import plan_fits
    from jurymeter.pipeline.publish import publish_run

    source = tmp_path / "small.jsonl"
    records(SEED).with_columns(item_set=pl.lit("small")).write_ndjson(source)
    store = Store(str(tmp_path / "store"))
    ingest(store, discover_sources([str(source)]), ValidationOptions())
    shown = subprocess.run(
        [sys.executable, "-W", "error::RuntimeWarning", "-m", "jurymeter.cli", "gstudy", "--item-set", "small",
         "--store", store.url, "--boot", "200", "--verbose"],  # the notes listed: each null says why
        capture_output=True, text=True, timeout=300,
    )
    assert shown.returncode == 0, shown.stderr
    assert "Warning" not in shown.stderr, shown.stderr
    assert "no optimum can be estimated" in shown.stdout
    assert "not estimable: mdd95_unlimited_items" in shown.stdout
    (tmp_path / "jm.toml").write_text(f'store = "{store.url}"\nlanding = ""\n[fit]\nn_boot = 200\n')
    config = load_config(tmp_path / "jm.toml", environ={})
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        plan = plan_fits(store, config)
        outcomes = run_fits(store, plan.jobs, figures=True)
        assert [o.status for o in outcomes] == ["fitted"], outcomes[0].error
        summary = publish_run(store, "small-run", config=config, started="t", ingest_report=None,
                              outcomes=outcomes, timings={})
    headline = summary["fits"][0]["analyses"]["gstudy"]
    for key in ("erho2", "ceiling"):
        assert headline[key] is None or 0.0 <= headline[key] <= 1.0, (key, headline[key])
    ceilings = pl.read_parquet(tmp_path / "store" / "results" / "small-run" / "ceilings.parquet")
    assert ceilings["ceiling"].drop_nulls().is_between(0.0, 1.0).all()
    page = report_text(tmp_path / "store" / "results" / "small-run" / "report")
    assert "G-study and D-study" in page
    orjson.loads((tmp_path / "store" / "results" / "small-run" / "summary.json").read_bytes())
