"""The declared universe of generalization in the G-study report (issue 26 point 2): fixed facets, finite pools.

Independent references: generalizit's mixed-model coefficients (Brennan's rule 4.3.1) for a fixed judge
panel, through the whole report path; the finite pool's formulas written out by hand from the report's own
components; on complete data Henderson's report equals the balanced one. The D-study formula itself is
checked by simulation in tests/test_fixed_facets.py.
"""

from __future__ import annotations

import contextlib
import io
import re
from pathlib import Path

import numpy as np
import polars as pl
import pytest

from jurymeter.errors import ConfigError
from jurymeter.stats.reliability import (
    GStudyRequest,
    assess_item_set,
    henderson_cells,
    henderson_report,
)

BASE = {"item_set": "sim", "n_boot": 200, "fpr_simulations": 0, "splits": 4, "partitions": 4}


def _records(seed: int, shape: tuple[int, int, int] = (8, 12, 4)) -> pl.DataFrame:
    """Complete s x i x j records (one run) of the random model with every component 0.36."""
    rng = np.random.default_rng(seed)
    x = 5.0 + sum(rng.normal(scale=0.6, size=[n if k in axes else 1 for k, n in enumerate(shape)])
                  for axes in ((0,), (1,), (2,), (0, 1), (0, 2), (1, 2), (0, 1, 2)))
    s, i, j = np.indices(shape).reshape(3, -1)
    return pl.DataFrame({
        "system_id": np.char.add("s", s.astype(str)), "item_id": np.char.add("i", i.astype(str)),
        "judge_id": np.char.add("j", j.astype(str)), "replicate": np.zeros(s.size, dtype=np.int64),
        "generation": np.zeros(s.size, dtype=np.int64), "score": np.asarray(x).ravel(),
    })


def _raw(report: dict, name: str) -> float:
    return float(report["components"][f"sigma2_{name}"]["raw"])


@pytest.mark.parametrize("seed", [1, 2])
def test_a_fixed_panel_in_the_report_equals_generalizit(seed: int) -> None:
    generalizit = pytest.importorskip("generalizit")
    records = _records(seed)
    report = assess_item_set(records, GStudyRequest(**BASE, fixed=("judges",)))
    universe = report["universe_dstudy"]
    data = records.select(s="system_id", i="item_id", j="judge_id", score="score").to_pandas()
    with contextlib.redirect_stdout(io.StringIO()):
        gt = generalizit.GeneralizIT(data, "s x i x j", "score")
        gt.calculate_anova()
        gt.calculate_g_coefficients(fixed_facets=["j"])
    theirs = gt.design.g_coeffs_table.loc["s"]
    # generalizit rounds each adjusted component to 4 decimals before the ratios
    assert universe["erho2"] == pytest.approx(float(theirs["rho^2"]), abs=2e-4)
    assert universe["phi"] == pytest.approx(float(theirs["phi^2"]), abs=2e-4)
    assert universe["declared"] == "judges fixed"
    # the random universe's numbers are untouched by the declaration
    random = assess_item_set(records, GStudyRequest(**BASE))
    assert random["universe_dstudy"] is None
    assert "no facet is declared fixed" in random["null_reasons"]["universe_dstudy"]
    assert report["erho2"] == random["erho2"]
    assert report["mdd95"] == random["mdd95"]


def test_a_judge_pool_and_an_item_pool_follow_the_finite_universe_formulas() -> None:
    records = _records(3)
    report = assess_item_set(records, GStudyRequest(**BASE, judge_pool=10, item_pool=40))
    u = report["universe_dstudy"]
    n_i, n_j, big_i, big_j = 12.0, 4.0, 40.0, 10.0
    s, si, sj, sij = (_raw(report, k) for k in ("s", "si", "sj", "sij"))
    i, j, ij = (_raw(report, k) for k in ("i", "j", "ij"))
    # written out: each system effect's universe-score part sigma2 / prod N, its error sigma2 (1/prod n - 1/prod N)
    tau = s + si / big_i + sj / big_j + sij / (big_i * big_j)
    delta = si * (1 / n_i - 1 / big_i) + sj * (1 / n_j - 1 / big_j) + sij * (1 / (n_i * n_j) - 1 / (big_i * big_j))
    absolute = delta + i * (1 / n_i - 1 / big_i) + j * (1 / n_j - 1 / big_j) + ij * (
        1 / (n_i * n_j) - 1 / (big_i * big_j))
    assert u["tau"] == pytest.approx(tau, rel=1e-12)
    assert u["sigma2_delta"] == pytest.approx(delta, rel=1e-12)
    assert u["sigma2_Delta"] == pytest.approx(absolute, rel=1e-12)
    assert u["erho2"] == pytest.approx(max(tau, 0) / (max(tau, 0) + max(delta, 0)), rel=1e-12)
    assert u["mdd95"] == pytest.approx(1.959963984540054 * np.sqrt(2 * delta), rel=1e-12)
    assert u["declared"] == "judges from a pool of 10; items from a pool of 40"
    lo, hi = u["intervals"]["mdd95"]["low"], u["intervals"]["mdd95"]["high"]
    assert lo < u["mdd95"] < hi


def test_an_unlimited_pool_gives_the_random_universe_and_its_intervals_from_the_same_draws() -> None:
    records = _records(4)
    report = assess_item_set(records, GStudyRequest(**BASE, judge_pool=10**12))
    u, iv = report["universe_dstudy"], report["intervals"]
    for key in ("erho2", "phi", "mdd95"):
        assert u[key] == pytest.approx(report[key], rel=1e-9)
        for bound in ("low", "high"):
            assert u["intervals"][key][bound] == pytest.approx(iv[key][bound], rel=1e-9)


def test_henderson_on_complete_data_gives_the_balanced_universe() -> None:
    records = _records(5)
    request = GStudyRequest(**BASE, fixed=("judges",), item_pool=30)
    balanced = assess_item_set(records, request)["universe_dstudy"]
    henderson = henderson_report(henderson_cells(records.lazy(), request), request)["universe_dstudy"]
    for key in ("tau", "sigma2_delta", "sigma2_Delta", "erho2", "phi", "mdd95"):
        assert henderson[key] == pytest.approx(balanced[key], rel=1e-9), key


def test_what_the_declaration_cannot_give_is_null_with_its_reason() -> None:
    records = _records(6)
    small = assess_item_set(records, GStudyRequest(**BASE, judge_pool=3))
    assert small["universe_dstudy"] is None
    assert small["null_reasons"]["universe_dstudy"] == "the pool of 3 judges is smaller than the 4 judges the fit has"
    # every facet of the system effects fixed (one run): no relative error, so no MDD to state
    both = assess_item_set(records, GStudyRequest(**BASE, fixed=("judges", "items")))
    u = both["universe_dstudy"]
    assert u["sigma2_delta"] == 0.0
    assert u["erho2"] == 1.0
    assert u["mdd95"] is None
    assert "every facet of the design (i, j) is fixed" in both["null_reasons"]["universe_dstudy.mdd95"]
    # one judge: the judge is not a facet of the design, already fixed
    one = records.filter(pl.col("judge_id") == "j0")
    single = assess_item_set(one, GStudyRequest(**BASE, fixed=("judges",)))
    assert single["universe_dstudy"] is None
    assert "not a facet of the fitted design" in single["null_reasons"]["universe_dstudy"]


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ('fixed = ["jduges"]', "bad.toml [fit.gstudy] fixed must be a list naming each of judges, items at most once, "
                               "got ['jduges']"),
        ("judge_pool = -1", "bad.toml [fit.gstudy] judge_pool must be at least 0, got -1"),
        ('fixed = ["judges"]\njudge_pool = 4', "bad.toml [fit.gstudy] judge_pool must be 0 while judges are fixed"),
    ],
)
def test_a_bad_declaration_is_an_error_naming_its_key(tmp_path: Path, body: str, message: str) -> None:
    from jurymeter.pipeline.config import load_config

    path = tmp_path / "bad.toml"
    path.write_text(f"[fit.gstudy]\n{body}\n")
    with pytest.raises(ConfigError, match=re.escape(message)):
        load_config(path, environ={})


def test_the_declaration_is_read_from_the_configuration(tmp_path: Path) -> None:
    from jurymeter.analyses.gstudy import GStudyOptions
    from jurymeter.pipeline.config import load_config

    path = tmp_path / "ok.toml"
    path.write_text('[fit.gstudy]\nfixed = ["judges"]\nitem_pool = 500\n')
    options = load_config(path, environ={}).fit.options["gstudy"]
    assert options == GStudyOptions(fixed=("judges",), item_pool=500)
