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


def _finite_pool_moments(n_i: int, n_j: int, pool: int, reps: int, seed: int) -> dict[str, tuple[float, float]]:
    """Monte Carlo truth of tau, sigma2_delta and sigma2_Delta for judges drawn n_j of a pool of ``pool``.

    Each replicate draws every effect of the random model (TRUTH), a universe of ``pool`` judges and
    ``n_i`` new items (items unlimited), samples ``n_j`` of the pool's judges without replacement, and
    measures the definitions: the universe score is a system's mean over all the pool's judges and
    unlimited items (the item effects average to 0), delta_s the deviation of its observed mean from
    it around the systems' average, Delta_s the deviation itself. Returns (mean, standard error) each.
    """
    rng = np.random.default_rng(seed)
    systems = 8
    sd = {k: np.sqrt(v) for k, v in TRUTH.items()}
    a_s = rng.normal(0, sd["s"], (reps, systems))
    b_j = rng.normal(0, sd["j"], (reps, 1, pool))
    c_sj = rng.normal(0, sd["sj"], (reps, systems, pool))
    b_i = rng.normal(0, sd["i"], (reps, 1, n_i, 1))
    c_si = rng.normal(0, sd["si"], (reps, systems, n_i, 1))
    chosen = np.argsort(rng.random((reps, pool)), axis=1)[:, :n_j]  # n_j of the pool, without replacement
    take = np.take_along_axis
    bj_n = take(b_j, chosen[:, None, :], axis=2)
    csj_n = take(c_sj, np.broadcast_to(chosen[:, None, :], (reps, systems, n_j)), axis=2)
    c_ij = rng.normal(0, sd["ij"], (reps, 1, n_i, n_j))
    e = rng.normal(0, sd["sij"], (reps, systems, n_i, n_j))
    observed = (a_s[:, :, None, None] + b_i + c_si + bj_n[:, :, None, :] + csj_n[:, :, None, :] + c_ij + e)
    x_bar = observed.mean(axis=(2, 3))
    universe = a_s + (b_j + c_sj).mean(axis=2)
    rel = (x_bar - x_bar.mean(axis=1, keepdims=True)) - (universe - universe.mean(axis=1, keepdims=True))
    per_rep = {
        "tau": universe.var(axis=1, ddof=1),
        "delta": rel.var(axis=1, ddof=1),
        "Delta": ((x_bar - universe) ** 2).mean(axis=1),
    }
    return {k: (float(v.mean()), float(v.std(ddof=1) / np.sqrt(reps))) for k, v in per_rep.items()}


@pytest.mark.parametrize(("n_j", "pool"), [(3, 6), (2, 2), (4, 40)])
def test_a_finite_judge_pool_matches_its_definition_by_simulation(n_j: int, pool: int) -> None:
    # Known truth by definition (sampling n_j of a pool's judges): the formula is not used to make it.
    n_i = 5
    truth = _finite_pool_moments(n_i, n_j, pool, reps=6000, seed=11 + pool)
    sigma2 = np.array([TRUTH[DESIGN.label(e).replace(":", "")] for e in DESIGN.effects])
    n = {"i": float(n_i), "j": float(n_j)}
    tau, delta, absolute = error_variances(sigma2, DESIGN, n, universe={"j": pool})
    for name, value in (("tau", tau), ("delta", delta), ("Delta", absolute)):
        mean, se = truth[name]
        assert float(value) == pytest.approx(mean, abs=4 * se), (name, float(value), mean, se)
    if n_j == pool:  # every judge of the pool: the fixed panel
        fixed = error_variances(sigma2, DESIGN, n, fixed=frozenset({"j"}))
        np.testing.assert_allclose(np.array(fixed), np.array([tau, delta, absolute]), rtol=1e-12)
    # an unlimited pool is the random model; the finite one lies strictly between it and the fixed panel
    random_tau, random_delta, _ = error_variances(sigma2, DESIGN, n)
    if n_j < pool:
        assert float(random_delta) > float(delta)
        assert float(tau) > float(random_tau)


def test_a_pool_smaller_than_the_panel_or_named_twice_is_refused() -> None:
    _, s2 = _fit(7)
    with pytest.raises(DesignError, match="a universe of 3 levels cannot give a D-study of 4"):
        error_variances(s2, DESIGN, {"i": 15, "j": 4}, universe={"j": 3})
    with pytest.raises(DesignError, match="both fixed and with a finite universe"):
        error_variances(s2, DESIGN, {"i": 15, "j": 4}, fixed=frozenset({"j"}), universe={"j": 9})
    with pytest.raises(DesignError, match="fixed facets \\['q'\\]"):
        error_variances(s2, DESIGN, {"i": 15, "j": 4}, universe={"q": 9})
