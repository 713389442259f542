"""Fixed facets (issue 26 point 2, library part): the D-study of a mixed universe, Brennan (2001) sec. 4.3-4.4.

References: generalizit's mixed-model coefficients (`calculate_g_coefficients(fixed_facets=...)`, Brennan's
rule 4.3.1; it rounds the adjusted components to 4 decimals), and the p x I x H formulas written out.
"""

from __future__ import annotations

import contextlib
import io

import numpy as np
import polars as pl
import pytest

from jurymeter.errors import DesignError
from jurymeter.stats.design import Design
from jurymeter.stats.dstudy import error_variances, truncated_ratio
from jurymeter.stats.gstudy import fit_gstudy, simulate_design

DESIGN = Design.parse("s x i x j")
SIZES = {"s": 10, "i": 15, "j": 4}
TRUTH = {"s": 0.5, "i": 0.4, "j": 0.3, "si": 0.3, "sj": 0.2, "ij": 0.1, "sij": 0.8}


def _fit(seed: int) -> tuple[np.ndarray, np.ndarray]:
    x = simulate_design(DESIGN, SIZES, TRUTH, np.random.default_rng(seed))
    return x, fit_gstudy(x, DESIGN).sigma2


@pytest.mark.parametrize("seed", [3, 4])
def test_a_fixed_judge_panel_equals_generalizit(seed: int) -> None:
    generalizit = pytest.importorskip("generalizit")
    x, sigma2 = _fit(seed)
    rows = [(f"s{a}", f"i{b}", f"j{c}", float(x[a, b, c]))
            for a in range(SIZES["s"]) for b in range(SIZES["i"]) for c in range(SIZES["j"])]
    data = pl.DataFrame(rows, schema=["s", "i", "j", "score"], orient="row").to_pandas()
    with contextlib.redirect_stdout(io.StringIO()):
        gt = generalizit.GeneralizIT(data, "s x i x j", "score")
        gt.calculate_anova()
        gt.calculate_g_coefficients(fixed_facets=["j"])
    theirs = gt.design.g_coeffs_table.loc["s"]
    tau, delta, absolute = error_variances(sigma2, DESIGN, {"i": 15, "j": 4}, fixed=frozenset({"j"}))
    # generalizit rounds each adjusted component to 4 decimals before the ratios
    assert float(truncated_ratio(tau, delta)) == pytest.approx(float(theirs["rho^2"]), abs=2e-4)
    assert float(truncated_ratio(tau, absolute)) == pytest.approx(float(theirs["phi^2"]), abs=2e-4)


def test_the_mixed_universe_written_out() -> None:
    _, s2 = _fit(5)
    k = {DESIGN.label(e): i for i, e in enumerate(DESIGN.effects)}
    n_i, n_j = 30.0, 4.0
    tau, delta, absolute = error_variances(s2, DESIGN, {"i": n_i, "j": n_j}, fixed=frozenset({"j"}))
    # p x I x H with H (the judges) fixed: the universe score averages the system x judge effect over the panel
    assert tau == pytest.approx(s2[k["s"]] + s2[k["sj"]] / n_j, rel=1e-12)
    assert delta == pytest.approx(s2[k["si"]] / n_i + s2[k["sij"]] / (n_i * n_j), rel=1e-12)
    assert absolute == pytest.approx(float(delta) + s2[k["i"]] / n_i + s2[k["ij"]] / (n_i * n_j), rel=1e-12)
    # random judges: sj is error, and the judges' main effect enters the absolute error
    r_tau, r_delta, r_abs = error_variances(s2, DESIGN, {"i": n_i, "j": n_j})
    assert r_tau == pytest.approx(s2[k["s"]], rel=1e-12)
    assert r_delta == pytest.approx(float(delta) + s2[k["sj"]] / n_j, rel=1e-12)
    assert r_abs - r_delta == pytest.approx(float(absolute - delta) + s2[k["j"]] / n_j, rel=1e-12)


def test_a_fixed_facet_must_be_a_facet_beside_the_object() -> None:
    _, s2 = _fit(6)
    with pytest.raises(DesignError, match="fixed facets \\['q'\\]"):
        error_variances(s2, DESIGN, {"i": 15, "j": 4}, fixed=frozenset({"q"}))
    with pytest.raises(DesignError, match="fixed facets \\['s'\\]"):
        error_variances(s2, DESIGN, {"i": 15, "j": 4}, fixed=frozenset({"s"}))
