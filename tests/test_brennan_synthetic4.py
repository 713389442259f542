"""Brennan (2001)'s Synthetic Data Set No. 4, the book's own numbers (issue 26 point 2).

The data: 10 persons, 3 tasks, 4 raters nested in each task, Brennan (2001), *Generalizability Theory*,
Table 3.2, p. 73 (the 12 columns are t1's raters 1-4, t2's 5-8, t3's 9-12). References:

- recast as a p x i design (the 12 rater-task columns as items), Brennan's printed G study (Table 6.2,
  p. 182: sigma2(p) .6258, sigma2(i) .8840, sigma2(pi,e) 2.7872) and D study at n_i = 12 (Table 6.5, p. 198:
  E rho^2 .729, Phi .672), as the R package gt4ireval's tests cite them;
- as p x (r:t), the mixed model with tasks fixed (Brennan sec. 4.4): generalizit's ANOVA components and its
  mixed-model coefficients (``fixed_facets=["t"]``), and the universe of Brennan's rule written out.
"""

from __future__ import annotations

import contextlib
import io

import numpy as np
import polars as pl
import pytest

from jurymeter.stats.design import Design
from jurymeter.stats.dstudy import erho2, error_variances, phi, truncated_ratio
from jurymeter.stats.gstudy import fit_gstudy

# Persons' scores, one row per person, the 12 rater-task columns in Table 3.2's order.
SYNTHETIC_4 = np.array([
    [5, 6, 5, 5, 5, 3, 4, 5, 6, 7, 3, 3],
    [9, 3, 7, 7, 7, 5, 5, 5, 7, 7, 5, 2],
    [3, 4, 3, 3, 5, 3, 3, 5, 6, 5, 1, 6],
    [7, 5, 5, 3, 3, 1, 4, 3, 5, 3, 3, 5],
    [9, 2, 9, 7, 7, 7, 3, 7, 2, 7, 5, 3],
    [3, 4, 3, 5, 3, 3, 6, 3, 4, 5, 1, 2],
    [7, 3, 7, 7, 7, 5, 5, 7, 5, 5, 5, 4],
    [5, 8, 5, 7, 7, 5, 5, 4, 3, 2, 1, 1],
    [9, 9, 8, 8, 6, 6, 6, 5, 5, 8, 1, 1],
    [4, 4, 4, 3, 3, 5, 6, 5, 5, 7, 1, 1],
], dtype=np.float64)


def test_as_p_x_i_it_gives_brennans_printed_g_and_d_study() -> None:
    design = Design.parse("s x i")
    fit = fit_gstudy(SYNTHETIC_4, design)
    sigma2 = dict(zip((design.label(e) for e in design.effects), fit.sigma2, strict=True))
    assert sigma2["s"] == pytest.approx(0.6258, abs=5e-5)
    assert sigma2["i"] == pytest.approx(0.8840, abs=5e-5)
    assert sigma2["si"] == pytest.approx(2.7872, abs=5e-5)
    assert float(erho2(fit.sigma2, design, {"i": 12})) == pytest.approx(0.729, abs=5e-4)
    assert float(phi(fit.sigma2, design, {"i": 12})) == pytest.approx(0.672, abs=5e-4)


def _nested() -> tuple[Design, dict[str, float], np.ndarray]:
    design = Design.parse("s x (r:t)")
    assert design.facets == ("s", "t", "r")
    fit = fit_gstudy(SYNTHETIC_4.reshape(10, 3, 4), design)  # (person, task, rater within task)
    return design, dict(zip((design.label(e) for e in design.effects), fit.sigma2, strict=True)), fit.sigma2


def test_as_p_x_r_in_t_with_tasks_fixed_it_equals_generalizit() -> None:
    generalizit = pytest.importorskip("generalizit")
    design, sigma2, raw = _nested()
    x = SYNTHETIC_4.reshape(10, 3, 4)
    rows = [(f"p{a}", f"t{b}", f"r{b}{c}", float(x[a, b, c])) for a in range(10) for b in range(3) for c in range(4)]
    data = pl.DataFrame(rows, schema=["p", "t", "r", "score"], orient="row").to_pandas()
    with contextlib.redirect_stdout(io.StringIO()):
        gt = generalizit.GeneralizIT(data, "p x (r:t)", "score")
        gt.calculate_anova()
        gt.calculate_g_coefficients(fixed_facets=["t"])
    theirs = gt.design.anova_table["Variance"]
    names = {"s": "p", "t": "t", "r:t": "r:t", "st": "p x t", "sr:t": "p x (r:t)"}
    for ours, their in names.items():  # generalizit prints the components to 4 decimals
        assert sigma2[ours] == pytest.approx(float(theirs[their]), abs=5e-5), ours
    tau, delta, absolute = error_variances(raw, design, {"t": 3, "r": 4}, fixed=frozenset({"t"}))
    coefficients = gt.design.g_coeffs_table.loc["p"]
    assert float(truncated_ratio(tau, delta)) == pytest.approx(float(coefficients["rho^2"]), abs=2e-4)
    assert float(truncated_ratio(tau, absolute)) == pytest.approx(float(coefficients["phi^2"]), abs=2e-4)


def test_the_mixed_universe_of_fixed_tasks_written_out() -> None:
    """Brennan sec. 4.4: with T fixed, sigma2(pt) averaged over the 3 tasks joins the universe score; the
    error keeps only the raters' terms; against random tasks, E rho^2 rises (0.551 -> 0.769 here)."""
    design, s2, raw = _nested()
    tau, delta, absolute = error_variances(raw, design, {"t": 3, "r": 4}, fixed=frozenset({"t"}))
    assert float(tau) == pytest.approx(s2["s"] + s2["st"] / 3, rel=1e-12)
    assert float(delta) == pytest.approx(s2["sr:t"] / 12, rel=1e-12)
    assert float(absolute) == pytest.approx(s2["sr:t"] / 12 + s2["r:t"] / 12, rel=1e-12)
    r_tau, r_delta, r_abs = error_variances(raw, design, {"t": 3, "r": 4})
    assert float(r_tau) == pytest.approx(s2["s"], rel=1e-12)
    assert float(r_delta) == pytest.approx(s2["st"] / 3 + s2["sr:t"] / 12, rel=1e-12)
    assert float(r_abs) == pytest.approx(float(r_delta) + s2["t"] / 3 + s2["r:t"] / 12, rel=1e-12)
    assert float(truncated_ratio(r_tau, r_delta)) < float(truncated_ratio(tau, delta))
