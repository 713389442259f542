"""A round-robin plan's predicted strategy variances (stats/cyclic/strategy_prediction, analyses/cyclic/plan).

References, none of them the code under test:
- the point: the paper's eq. 3-5 written out here at the plan's sizes, from components computed here by the
  paper's own appendix D formulas (eq. 20-25) on simulated data; and the paper's printed "~27-40%" cut in
  variance from random to cycling on MT-Bench at B = 5, from its table 2;
- the cost-weighted plan's variance: plan_variance on the plan's own rows (the general a_r formula);
- the interval: coverage of the true strategy-C and A variances by simulation with known components, and
  the generalized pivotal interval inverted analytically (scipy's chi-square quantiles) where it has a
  closed form (one mean square carries the uncertainty).
"""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from jurymeter.analyses.cyclic.plan import strategy_predictions
from jurymeter.errors import DesignError
from jurymeter.stats.cyclic import VarianceComponents, fit_cyclic
from jurymeter.stats.cyclic.fit import mean_components
from jurymeter.stats.cyclic.planner import plan_cost_weighted, plan_variance
from jurymeter.stats.cyclic.strategy_prediction import SystemMeanSquares, predict_strategy_variances

EXACT = 1e-12  # the same arithmetic in another order
# Table 2 (a), MT-Bench, n = 80, m_max = 10, K_tot = 5: Qwen, Llama, GPT, Gemini, Claude.
TABLE2 = {
    "scenario": (1.530, 0.882, 0.634, 0.408, 0.393),
    "generation": (0.266, 0.238, 0.076, 0.000, 0.000),
    "judge": (0.947, 0.503, 0.339, 0.435, 0.427),
    "residual": (1.486, 1.130, 0.564, 0.661, 0.830),
}
# Coverage over REPS replicates: Monte Carlo SE sqrt(.95 .05 / 200) = 0.0154; the band is about 3 SE below
# and 2.6 SE above 0.95 (a correct interval fails it with probability < 0.01).
REPS = 200
COVER_LOW, COVER_HIGH = 0.90, 0.99


def simulate(rng: np.random.Generator, n: int, m: int, gamma: np.ndarray, truth: VarianceComponents) -> np.ndarray:
    """Eq. 1: x[i, g, l] = mu + alpha_i + beta_ig + gamma_l + eps_igl, fixed centred offsets gamma."""
    k = gamma.size
    return (5.0 + rng.normal(0, np.sqrt(truth.sigma2_scenario), (n, 1, 1))
            + rng.normal(0, np.sqrt(truth.sigma2_generation), (n, m, 1)) + gamma[None, None, :]
            + rng.normal(0, np.sqrt(truth.sigma2_residual), (n, m, k)))


def appendix_d(x: np.ndarray) -> np.ndarray:
    """Eq. 20-25 written out: (sigma2_alpha, sigma2_beta, sigma2_gamma, sigma2_eps), negatives set to 0."""
    n, m, k = x.shape
    grand = x.mean()
    cell = x.mean(axis=2, keepdims=True)          # X_ij.
    judge = x.mean(axis=(0, 1), keepdims=True)    # X_..l
    scen = x.mean(axis=(1, 2), keepdims=True)     # X_i..
    ms_w = ((x - cell - judge + grand) ** 2).sum() / ((n * m - 1) * (k - 1))          # eq. 20
    ms_g = k / (n * (m - 1)) * ((cell - scen) ** 2).sum()                             # eq. 21
    ms_s = m * k / (n - 1) * ((scen - grand) ** 2).sum()                              # eq. 22
    gamma = judge.ravel() - grand
    out = np.array([(ms_s - ms_g) / (m * k), (ms_g - ms_w) / k,                       # eq. 24, 23
                    np.mean(gamma**2) - ms_w / (n * m) * (k - 1) / k, ms_w])          # eq. 25, 20
    return np.maximum(out, 0.0)


def report_of(fits: dict[str, np.ndarray]) -> dict:
    """A cyclic report's ``systems`` part, from fit_cyclic on each system's scores."""
    return {"systems": {sid: fit_cyclic(x).to_json() for sid, x in fits.items()}}


def from_table2(s: int, *, n: int = 80, m: int = 10, k: int = 5) -> SystemMeanSquares:
    """A system whose mean squares give table 2's components (the EMS of appendix D, inverted by hand)."""
    a, b, g, e = (TABLE2[c][s] for c in ("scenario", "generation", "judge", "residual"))
    ms_g = e + k * b
    ms = (ms_g + m * k * a, ms_g, e + n * m * g * k / (k - 1), e)
    return SystemMeanSquares(n, m, k, ms, (n - 1, n * (m - 1), k - 1, (n * m - 1) * (k - 1)))


# ----------------------------------------------------------------- (a) the point
def test_point_is_eq_3_to_5_at_the_plans_sizes_from_appendix_d_components() -> None:
    rng = np.random.default_rng(7)
    gamma = np.array([0.7, -0.4, 0.1, -0.4])
    truth = VarianceComponents(0.8, 0.3, float(np.mean(gamma**2)), 0.6)
    data = {f"s{q}": simulate(rng, 15, 3, gamma + 0.1 * q - np.mean(gamma + 0.1 * q), truth) for q in range(3)}
    comp = np.mean([appendix_d(x) for x in data.values()], axis=0)  # averaged over systems, each weighs one
    _alpha, beta, gam, eps = comp
    n, budget, k = 40, 8, 4  # the plan: 40 items, 8 generations each (one call each), 4 judges
    got, reasons = strategy_predictions(report_of(data), {"systems": 3, "items": n, "judges": k}, budget=budget)
    assert reasons == {}
    want = {"var_all_judges": (k * beta + eps) / (n * budget),             # eq. 3
            "var_random_judge": (beta + gam + eps) / (n * budget),        # eq. 4
            "var_round_robin": (beta + eps) / (n * budget)}               # eq. 5
    for key, value in want.items():
        p = got[key]
        assert p is not None
        assert p.point == pytest.approx(value, rel=EXACT), key
        assert p.low is not None
        assert p.high is not None
        assert p.low < p.point < p.high
    # The cost plan's components are the same average (mean_components), so the two agree.
    mc = mean_components(report_of(data))
    assert got["var_round_robin"].point == pytest.approx(  # type: ignore[union-attr]
        (mc.sigma2_generation + mc.sigma2_residual) / (n * budget), rel=EXACT)


def test_the_papers_27_to_40_percent_cut_from_random_to_cycling_at_b5() -> None:
    """Section 4.4: "At B=5, switching from random to cycling cuts variance by ~27-40% across models on MT-Bench"."""
    cuts = []
    for s in range(5):
        p = predict_strategy_variances([from_table2(s)], n_items=80, budget=5, k_total=5, n_draws=10)
        assert p["var_round_robin"] is not None
        assert p["var_random_judge"] is not None
        cuts.append(1 - p["var_round_robin"].point / p["var_random_judge"].point)
        if TABLE2["generation"][s] == 0:  # "for Gemini and Claude, all-judges converges to CyclicJudge"
            assert p["var_all_judges"].point == pytest.approx(p["var_round_robin"].point, rel=1e-9)  # type: ignore[union-attr]
    assert round(min(cuts), 2) == 0.27
    assert round(max(cuts), 2) == 0.40


def test_strategy_a_needs_a_budget_that_is_a_multiple_of_the_panel() -> None:
    got, reasons = strategy_predictions({"systems": {"a": _json(from_table2(0))}}, {"items": 80, "judges": 5},
                                        budget=1)
    assert got["var_all_judges"] is None
    assert "B must be a multiple of K" in reasons["var_all_judges"]
    assert got["var_round_robin"] is not None
    assert got["var_round_robin"].point == pytest.approx((0.266 + 1.486) / 80, rel=1e-9)


def _json(s: SystemMeanSquares) -> dict:
    keys = ("scenario", "generation", "judge", "residual")
    return {"n_scenarios": s.n_scenarios, "n_generations": s.n_generations, "n_judges": s.n_judges,
            "mean_squares": {f"ms_{c}": v for c, v in zip(keys, s.ms, strict=True)},
            "df": {f"df_{c}": v for c, v in zip(keys, s.df, strict=True)}}


def test_the_cost_weighted_plans_variance_is_plan_variance_on_its_own_rows() -> None:
    system = from_table2(1)
    comp = VarianceComponents(*system.components().tolist())
    items = [f"q{i}" for i in range(12)]
    judges = ["a", "b", "c"]
    cost = plan_cost_weighted(items, ["s"], judges, prices={"a": 1.0, "b": 3.0, "c": 9.0}, budget=12 * 40.0,
                              components=comp)
    calls = [cost.calls_per_item[j] for j in judges]
    assert len(set(calls)) > 1  # a plan that is not a round robin
    got = predict_strategy_variances([system], n_items=12, budget=sum(calls), k_total=3, calls_per_judge=calls)
    rows = plan_variance(cost.plan, comp)["variance"].item()
    assert got["var_cost_weighted"] is not None
    assert got["var_cost_weighted"].point == pytest.approx(rows - comp.sigma2_scenario / 12, rel=1e-9)
    # every judge the same calls: the cost plan is the round robin (eq. 5)
    even = predict_strategy_variances([system], n_items=12, budget=6, k_total=3, calls_per_judge=[2, 2, 2])
    assert even["var_cost_weighted"].point == pytest.approx(even["var_round_robin"].point, rel=EXACT)  # type: ignore[union-attr]


def test_bad_arguments_and_reports_are_refused_or_said() -> None:
    with pytest.raises(DesignError, match="calls_per_judge"):
        predict_strategy_variances([from_table2(0)], n_items=5, budget=6, k_total=3, calls_per_judge=[2, 2])
    with pytest.raises(DesignError, match="at least one"):
        predict_strategy_variances([], n_items=5, budget=6, k_total=3)
    got, reasons = strategy_predictions(None, {"items": 5, "judges": 3}, budget=3, why="needs two generations")
    assert set(got) == {"var_all_judges", "var_random_judge", "var_round_robin"}
    assert all(v is None for v in got.values())
    assert reasons["var_round_robin"] == "needs two generations"
    got, reasons = strategy_predictions({"systems": {"a": {"sigma2_scenario": 1.0}}}, {"items": 5, "judges": 3},
                                        budget=3)
    assert all(v is None for v in got.values())
    assert "no usable mean squares" in reasons["var_round_robin"]


# ----------------------------------------------------------------- (b) interval coverage
def test_interval_covers_the_true_strategy_variances_95_percent() -> None:
    """Fit tonight's data (known components), predict a plan, count how often the truth is inside."""
    rng = np.random.default_rng(2026)
    gamma = np.array([0.9, -0.6, 0.3, -0.6])
    truth = VarianceComponents(0.8, 0.3, float(np.mean(gamma**2)), 0.6)
    n_plan, budget, k = 30, 4, 4
    true_c = (truth.sigma2_generation + truth.sigma2_residual) / (n_plan * budget)
    true_a = (k * truth.sigma2_generation + truth.sigma2_residual) / (n_plan * budget)
    hits_c = hits_a = 0
    for rep in range(REPS):
        report = report_of({"s": simulate(rng, 20, 3, gamma, truth)})
        got, _ = strategy_predictions(report, {"items": n_plan, "judges": k}, budget=budget, seed=rep)
        c, a = got["var_round_robin"], got["var_all_judges"]
        assert c is not None
        assert a is not None
        assert c.low is not None
        assert a.low is not None
        hits_c += c.low <= true_c <= c.high  # type: ignore[operator]
        hits_a += a.low <= true_a <= a.high  # type: ignore[operator]
    assert COVER_LOW <= hits_c / REPS <= COVER_HIGH, hits_c
    assert COVER_LOW <= hits_a / REPS <= COVER_HIGH, hits_a


# ----------------------------------------------------------------- (c) the pivot itself
def test_interval_is_the_generalized_pivot_inverted_analytically() -> None:
    r"""Where MS_G carries all the uncertainty the pivotal interval has a closed form.

    With df_W ~ 1e9 the residual mean square is known; V_C = (MS_G/K + MS_W (K-1)/K)/(nB) and the pivot
    MS_G df_G / chi2_{df_G} has quantiles MS_G df_G / chi2_{df_G}(1 - q). MS_G is large enough that the
    truncation of sigma2_beta at 0 never binds. A draw with df+1, or no chi-square draw, misses it.
    """
    k, n, budget, df_g = 4, 10, 4, 3
    ms_g, ms_w = 50.0, 1.0
    system = SystemMeanSquares(4, 2, k, (80.0, ms_g, 30.0, ms_w), (3, df_g, 3, 10**9))
    got = predict_strategy_variances([system], n_items=n, budget=budget, k_total=k, n_draws=200_000, seed=3)
    c = got["var_round_robin"]
    assert c is not None
    bounds = [(ms_g * df_g / stats.chi2.ppf(1 - q, df_g) / k + ms_w * (k - 1) / k) / (n * budget)
              for q in (0.025, 0.975)]
    # 200,000 draws: the 2.5% and 97.5% quantiles of the pivot are within about 1% (their Monte Carlo SE
    # is 0.3% and 0.6% here); df_G + 1 moves them by 10% and 40%.
    assert c.low == pytest.approx(bounds[0], rel=0.02)
    assert c.high == pytest.approx(bounds[1], rel=0.02)


def test_bounds_keep_eq_32_and_33_order_as_truncated_draws_do() -> None:
    """V_A - V_C = (K-1) sigma2_beta/(nB) >= 0 and V_B - V_C = sigma2_gamma/(nB) >= 0 (eq. 32-33) hold draw by
    draw once each draw's components are truncated at 0 as the point's are; so they hold for the bounds. With
    MS_G below MS_W (sigma2_beta truncated to 0, as for Gemini and Claude in table 2) untruncated draws
    would put V_A's lower bound below V_C's."""
    system = SystemMeanSquares(20, 3, 4, (9.0, 0.9, 1.2, 1.0), (19, 40, 3, 177))
    got = predict_strategy_variances([system], n_items=20, budget=4, k_total=4, seed=1)
    a, b, c = got["var_all_judges"], got["var_random_judge"], got["var_round_robin"]
    assert a is not None
    assert b is not None
    assert c is not None
    assert a.point == pytest.approx(c.point, rel=EXACT)  # sigma2_beta = 0 at the point
    assert a.low >= c.low
    assert a.high > c.high
    assert b.low >= c.low
    assert b.high > c.high
