"""CyclicJudge decomposition against the paper's printed tables, definitions and simulated truth.

References, per contract (``jurymeter.stats.cyclic``):

| contract | reference |
|---|---|
| Proposition 1 contributions | [Zhu2026] tables 2 and 3, both benchmarks |
| judge F-test | hand computation (exact fractions) and scipy's F distribution; table 4 |
| eq. 20-25 estimators | the paper's formulas written out; ``fit_gstudy`` where the models coincide |
| judge x system offsets | table 1 and appendix A's statements |
| eq. 3-5 strategies | simulation from eq. 1 with known alpha, beta, gamma, epsilon |
| appendix G predictions | 5,000-repetition subsampling (``subsample_strategy_variance``) |
| appendix F coverage | eq. 35 and brute force over splits |
"""

from __future__ import annotations

import dataclasses
import json

import numpy as np
import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats

from jurymeter.errors import DesignError
from jurymeter.stats.cyclic import (
    CYCLIC_DESIGN,
    CyclicSums,
    VarianceComponents,
    fit_cyclic,
    fit_cyclic_sums,
    judge_system_offsets,
    pool_variances,
    scenario_coverage,
    score_cube,
    sigma2_judge_from_offsets,
    strategy_variances,
    subsample_strategy_curve,
    subsample_strategy_variance,
    variance_contributions,
)
from jurymeter.stats.cyclic.subsampling import _CHUNK_DRAWS
from jurymeter.stats.design import Design
from jurymeter.stats.gstudy import fit_gstudy, mean_squares

# Two exact computations of one quantity differ by float rounding only.
EXACT = 1e-9
# Monte Carlo checks: |estimate - truth| <= Z * standard error (two-sided p ~ 7e-6 per check).
Z = 4.5
# Half a unit in the last printed digit of table 2 (3 decimals).
HALF_T2 = 0.0005
# Half a unit in the last printed digit of table 3's contributions (x 1e-3, 2 decimals).
HALF_T3 = 0.005e-3
# Half a unit of table 4's F statistics (1 decimal).
HALF_T4 = 0.05

SYSTEMS = ("qwen", "llama", "gpt", "gemini", "claude")
K_TOTAL = 5

# [Zhu2026] table 2 / table 3 (per-observation components), columns in SYSTEMS order.
TABLE2 = {
    "mtbench": {
        "scenario": (1.530, 0.882, 0.634, 0.408, 0.393),
        "generation": (0.266, 0.238, 0.076, 0.000, 0.000),
        "judge": (0.947, 0.503, 0.339, 0.435, 0.427),
        "residual": (1.486, 1.130, 0.564, 0.661, 0.830),
    },
    "mindeval": {
        "scenario": (0.034, 0.014, 0.021, 0.015, 0.005),
        "generation": (0.100, 0.019, 0.047, 0.016, 0.002),
        "judge": (0.523, 0.280, 0.132, 0.150, 0.155),
        "residual": (0.159, 0.069, 0.207, 0.103, 0.061),
    },
}
# Table 3: contributions to Var(X-bar) x 1e-3 at m = 1, K = 1.
TABLE3 = {
    "mtbench": {
        "scenario": (19.13, 11.03, 7.92, 5.11, 4.92),
        "generation": (3.33, 2.97, 0.94, 0.00, 0.00),
        "judge": (946.50, 502.50, 339.00, 435.40, 426.60),
        "residual": (18.57, 14.12, 7.05, 8.27, 10.38),
    },
    "mindeval": {
        "scenario": (0.67, 0.28, 0.43, 0.29, 0.09),
        "generation": (2.01, 0.38, 0.93, 0.31, 0.04),
        "judge": (522.50, 280.20, 132.00, 150.20, 154.80),
        "residual": (3.18, 1.37, 4.14, 2.05, 1.23),
    },
}
N_SCENARIOS = {"mtbench": 80, "mindeval": 50}
M_GENERATIONS = {"mtbench": 10, "mindeval": 5}
# Table 4: F(4, 3196) and F(4, 996) of the judge main effect.
TABLE4 = {
    "mtbench": (638.2, 445.8, 601.7, 659.2, 514.9),
    "mindeval": (1029.5, 1280.1, 200.1, 458.0, 788.9),
}
# Table 1: mean score per system (rows, SYSTEMS order) and judge (columns, SYSTEMS order).
TABLE1 = {
    "mtbench": (
        (8.02, 8.39, 6.09, 7.16, 5.99),
        (7.87, 8.71, 6.90, 8.58, 7.26),
        (7.91, 8.81, 8.67, 9.71, 8.49),
        (8.02, 8.98, 8.20, 9.88, 8.68),
        (7.96, 9.06, 7.91, 9.62, 8.52),
    ),
    "mindeval": (
        (3.26, 3.38, 2.32, 1.69, 1.74),
        (3.70, 4.29, 3.16, 3.00, 2.85),
        (4.04, 4.51, 3.76, 3.95, 3.39),
        (3.90, 4.49, 3.63, 3.91, 3.31),
        (3.86, 4.67, 4.05, 4.72, 4.84),
    ),
}
# Table 3: mean score mu_theta.
MEAN_SCORE = {
    "mtbench": (7.13, 7.87, 8.72, 8.75, 8.61),
    "mindeval": (2.478, 3.400, 3.931, 3.846, 4.431),
}


def _components(bench: str, s: int) -> VarianceComponents:
    t = TABLE2[bench]
    return VarianceComponents(t["scenario"][s], t["generation"][s], t["judge"][s], t["residual"][s])


def simulate(
    rng: np.random.Generator,
    n: int,
    m: int,
    gamma: np.ndarray,
    truth: VarianceComponents,
    *,
    mu: float = 5.0,
) -> np.ndarray:
    """One data set from eq. 1 with fixed, centred judge offsets ``gamma``."""
    k = len(gamma)
    return (
        mu
        + rng.normal(0, np.sqrt(truth.sigma2_scenario), (n, 1, 1))
        + rng.normal(0, np.sqrt(truth.sigma2_generation), (n, m, 1))
        + gamma[None, None, :]
        + rng.normal(0, np.sqrt(truth.sigma2_residual), (n, m, k))
    )


GAMMA = np.array([0.9, -0.6, 0.3, -0.8, 0.2])
GAMMA = GAMMA - GAMMA.mean()
TRUTH = VarianceComponents(0.8, 0.3, float(np.mean(GAMMA**2)), 0.6)


# ----------------------------------------------------------------- paper tables
@pytest.mark.parametrize("bench", ["mtbench", "mindeval"])
def test_table3_contributions_follow_from_table2(bench: str) -> None:
    """Every table 3 contribution at (m, K) = (1, 1) from the printed table 2 component."""
    n = N_SCENARIOS[bench]
    divisors = {"scenario": n, "generation": n, "judge": 1, "residual": n}
    for s in range(len(SYSTEMS)):
        got = variance_contributions(_components(bench, s), n=n, m=1, k=1, k_total=K_TOTAL)
        assert got.fpc == 1.0
        for comp, printed in TABLE3[bench].items():
            tol = HALF_T2 / divisors[comp] + HALF_T3 + 1e-15
            assert getattr(got, comp) == pytest.approx(printed[s] * 1e-3, abs=tol), (
                bench,
                SYSTEMS[s],
                comp,
            )


def test_the_issue_example_1530_over_80() -> None:
    got = variance_contributions(_components("mtbench", 0), n=80, k_total=K_TOTAL)
    assert got.scenario == pytest.approx(1.530 / 80, rel=EXACT)
    assert got.scenario * 1e3 == pytest.approx(19.13, abs=0.01)
    frame = got.to_frame()
    assert frame["component"].to_list() == ["scenario", "generation", "judge", "residual"]
    assert frame["contribution"].sum() == pytest.approx(got.total, rel=EXACT)


@pytest.mark.parametrize("bench", ["mtbench", "mindeval"])
def test_judge_offsets_dominate_at_the_default_operating_point(bench: str) -> None:
    """Section 4.3: the judge term is > 94% of Var(X-bar) at m = 1, K = 1."""
    for s in range(len(SYSTEMS)):
        got = variance_contributions(_components(bench, s), n=N_SCENARIOS[bench], k_total=K_TOTAL)
        assert got.judge / got.total > 0.94


def test_fpc_vanishes_with_the_whole_panel_and_shrinks_with_k() -> None:
    comp = _components("mtbench", 0)
    full = variance_contributions(comp, n=80, m=10, k=5, k_total=5)
    assert full.judge == 0.0
    two = variance_contributions(comp, n=80, m=10, k=2, k_total=5)
    assert two.judge == pytest.approx(comp.sigma2_judge / 2 * 3 / 4, rel=EXACT)
    assert two.residual == pytest.approx(comp.sigma2_residual / 1600, rel=EXACT)


@pytest.mark.parametrize("bench", ["mtbench", "mindeval"])
def test_table4_f_statistics_follow_from_the_components(bench: str) -> None:
    """F = 1 + N K sigma2_gamma / ((K - 1) sigma2_eps) exactly (checked on data below), so
    table 4 follows from tables 2-3 within their rounding: sigma2_gamma from table 3 (four
    digits), sigma2_eps in the intersection of table 2's and table 3's rounding intervals.
    MindEval's Llama row misses by 0.8 (0.06%): the paper's own tables disagree there.
    """
    n, m = N_SCENARIOS[bench], M_GENERATIONS[bench]
    subjects = n * m
    for s in range(len(SYSTEMS)):
        gamma_lo = TABLE3[bench]["judge"][s] * 1e-3 - HALF_T3
        gamma_hi = TABLE3[bench]["judge"][s] * 1e-3 + HALF_T3
        eps_t3 = TABLE3[bench]["residual"][s] * 1e-3 * n
        eps_lo = max(TABLE2[bench]["residual"][s] - HALF_T2, eps_t3 - HALF_T3 * n)
        eps_hi = min(TABLE2[bench]["residual"][s] + HALF_T2, eps_t3 + HALF_T3 * n)
        assert eps_lo <= eps_hi
        scale = subjects * K_TOTAL / (K_TOTAL - 1)
        f_lo, f_hi = 1 + scale * gamma_lo / eps_hi, 1 + scale * gamma_hi / eps_lo
        printed = TABLE4[bench][s]
        if (bench, SYSTEMS[s]) == ("mindeval", "llama"):
            assert printed == pytest.approx(f_hi, rel=1e-3)
            continue
        assert f_lo - HALF_T4 <= printed <= f_hi + HALF_T4, (bench, SYSTEMS[s], f_lo, f_hi)


def test_f_identity_holds_on_data() -> None:
    rng = np.random.default_rng(11)
    x = simulate(rng, 12, 3, GAMMA, TRUTH)
    fit = fit_cyclic(x)
    subjects, k = 12 * 3, 5
    assert fit.f_statistic == pytest.approx(
        1 + subjects * k * fit.raw["sigma2_judge"] / ((k - 1) * fit.sigma2_residual), rel=EXACT
    )


def test_a_decomposition_summed_over_chunks_of_scenarios_equals_the_whole_one() -> None:
    rng = np.random.default_rng(5)
    x = simulate(rng, 13, 3, GAMMA, TRUTH)
    whole = fit_cyclic(x, budgets=[5, 10])
    for cuts in ([1] * 13, [6, 7], [12, 1]):
        sums, start = CyclicSums(), 0
        for size in cuts:
            sums.add(x[start : start + size])
            start += size
        chunked = fit_cyclic_sums(sums, budgets=[5, 10])
        _close_json(chunked.to_json(), whole.to_json())
        got, want = sums.pools(), pool_variances(x)  # eq. 36-38 summed per scenario
        assert (got.n, got.c_a, got.c_b, got.c_c) == pytest.approx((want.n, want.c_a, want.c_b, want.c_c), rel=1e-12)
    with pytest.raises(DesignError, match="needs >= 2"):
        fit_cyclic_sums(CyclicSums().add(x[:1]))


def _close_json(a: object, b: object) -> None:
    if isinstance(a, dict):
        assert isinstance(b, dict)
        assert a.keys() == b.keys()
        for key in a:
            _close_json(a[key], b[key])
    elif isinstance(a, list | tuple):
        assert len(a) == len(b)  # type: ignore[arg-type]
        for u, v in zip(a, b, strict=True):  # type: ignore[call-overload]
            _close_json(u, v)
    elif isinstance(a, float):
        assert a == pytest.approx(b, rel=1e-10, abs=1e-12, nan_ok=True)
    else:
        assert a == b


@pytest.mark.parametrize("bench", ["mtbench", "mindeval"])
def test_strategy_ranking_of_section_4_4(bench: str) -> None:
    """A vs B by the sign of (K-1) sigma2_beta - sigma2_gamma; C's cut against B at B = 5."""
    expected = {
        # Qwen 3.6 and Llama 2.1 < K - 1 = 4; GPT 4.5; Gemini and Claude: beta = 0, A = C.
        "mtbench": ("B", "B", "A", "A", "A"),
        "mindeval": ("A", "A", "B", "A", "A"),  # "nearly every model": GPT's ratio is 2.8
    }[bench]
    cuts, ratios = [], []
    for s, winner in enumerate(expected):
        comp = _components(bench, s)
        cmp = strategy_variances(comp, [5, 10, 50], n=N_SCENARIOS[bench], k_total=K_TOTAL)
        assert cmp.winner_ab == winner, SYSTEMS[s]
        assert cmp.ab_margin == pytest.approx(
            4 * comp.sigma2_generation - comp.sigma2_judge, abs=EXACT
        )
        if comp.sigma2_generation == 0:
            np.testing.assert_allclose(cmp.var_a, cmp.var_c, rtol=EXACT)
        # The section's numbers from the predicted variances at B = 5 (eq. 3-5):
        # V_B - V_C = sigma2_gamma / nB and V_A - V_C = (K - 1) sigma2_beta / nB.
        va, vb, vc = cmp.var_a[0], cmp.var_b[0], cmp.var_c[0]
        ratios.append((K_TOTAL - 1) * (vb - vc) / (va - vc) if va > vc else np.inf)
        cuts.append(1 - vc / vb)
        assert cmp.reduction_vs_b == pytest.approx(cuts[-1], rel=EXACT)
    if bench == "mtbench":
        # "this ratio is below the threshold for Qwen (3.6) and Llama (2.1)"
        assert round(ratios[0], 1) == 3.6
        assert round(ratios[1], 1) == 2.1
        assert ratios[2] > K_TOTAL - 1  # GPT: all-judges wins
        assert ratios[3:] == [np.inf, np.inf]  # "Gemini and Claude: all-judges converges to CyclicJudge"
        # "At B=5, switching from random to cycling cuts variance by ~27-40%"
        assert min(cuts) >= 0.265
        assert max(cuts) < 0.405
    else:
        # "the ratio exceeds the threshold for nearly every model": four of five
        assert sum(r > K_TOTAL - 1 for r in ratios) == 4


@pytest.mark.parametrize("bench", ["mtbench", "mindeval"])
def test_table1_offsets_reproduce_appendix_a_and_table_2(bench: str) -> None:
    """Offsets from table 1's per-judge means: table 3's mean score, eq. 25's sigma2_gamma
    against table 2 (within the propagated rounding), and appendix A's statements."""
    means = np.asarray(TABLE1[bench])
    x = means[:, None, None, :]
    got = judge_system_offsets(x, systems=SYSTEMS, judges=SYSTEMS)
    assert np.allclose(got.offsets.sum(axis=1), 0.0, atol=1e-12)
    # Table 3's mean score: each table 1 entry is rounded to 0.005, table 3 to 0.005 / 0.0005.
    np.testing.assert_allclose(got.system_means, MEAN_SCORE[bench], atol=0.005 + 0.005)
    subjects = N_SCENARIOS[bench] * M_GENERATIONS[bench]
    for s in range(len(SYSTEMS)):
        est = sigma2_judge_from_offsets(
            got.offsets[s], sigma2_residual=TABLE2[bench]["residual"][s], n_subjects=subjects
        )
        rounding = 2 * 0.005 * np.abs(got.offsets[s]).mean() + 0.005**2 + HALF_T2
        assert est == pytest.approx(TABLE2[bench]["judge"][s], abs=rounding), SYSTEMS[s]
    selfpref = got.self_preference
    assert selfpref.height == len(SYSTEMS)
    qwen = selfpref.filter(pl.col("judge_id") == "qwen").row(0, named=True)
    assert qwen["row_max"]  # "Qwen 2.5 7B's self-bias is the largest in its row on both benchmarks"
    assert qwen["excess"] > 0
    judge_col = {j: got.offsets[:, k] for k, j in enumerate(SYSTEMS)}
    if bench == "mindeval":
        claude = selfpref.filter(pl.col("judge_id") == "claude").row(0, named=True)
        assert claude["offset"] == pytest.approx(0.412, abs=1e-9)  # 4.84 - mean of Claude's row
        others = judge_col["claude"][np.arange(5) != SYSTEMS.index("claude")]
        assert np.all(
            others < 0
        )  # "the only positive entry in its otherwise uniformly negative row"
    else:
        assert np.all(
            judge_col["gemini"] > 0
        )  # "Gemini 3 Flash is the most lenient judge on MT-Bench"
        qwen_row = SYSTEMS.index("qwen")
        assert got.offsets[qwen_row, SYSTEMS.index("gpt")] < -1  # "penalize Qwen by over one point"
        assert got.offsets[qwen_row, SYSTEMS.index("claude")] < -1


def test_self_preference_by_family() -> None:
    rng = np.random.default_rng(3)
    x = rng.normal(size=(3, 4, 2, 3))
    judges = ["gpt-judge", "claude-judge", "llama-judge"]
    systems = ["gpt-5.2", "claude-4.6", "mistral"]
    got = judge_system_offsets(
        x,
        systems=systems,
        judges=judges,
        judge_family={"gpt-judge": "openai", "claude-judge": "anthropic", "llama-judge": "meta"},
        system_family={"gpt-5.2": "openai", "claude-4.6": "anthropic", "mistral": "mistral"},
    )
    pairs = got.self_preference.select("system_id", "judge_id", "family").rows()
    assert pairs == [
        ("gpt-5.2", "gpt-judge", "openai"),
        ("claude-4.6", "claude-judge", "anthropic"),
    ]
    row = got.self_preference.row(0, named=True)
    assert row["offset"] == pytest.approx(got.offsets[0, 0], rel=EXACT)
    assert row["other_offset"] == pytest.approx(got.offsets[1:, 0].mean(), rel=EXACT)
    none = judge_system_offsets(x, systems=systems, judges=judges)
    assert none.self_preference.height == 0
    assert none.to_frame().height == 9
    json.dumps(got.to_json())


# ----------------------------------------------------------------- definitions and engine
def test_f_test_on_a_hand_built_case() -> None:
    """Appendix H by hand: 4 subjects x 3 judges; SS_J = 18, SS_R = 10/3, F = 81/5."""
    x = np.array([[[1, 2, 4], [2, 2, 5]], [[3, 5, 6], [1, 4, 4]]], dtype=float)
    subjects = x.reshape(4, 3)
    grand = subjects.mean()
    ss_t = ((subjects - grand) ** 2).sum()
    ss_j = 4 * ((subjects.mean(axis=0) - grand) ** 2).sum()
    ss_s = 3 * ((subjects.mean(axis=1) - grand) ** 2).sum()
    ss_r = ss_t - ss_j - ss_s
    f_hand = (ss_j / 2) / (ss_r / (3 * 2))
    assert (ss_j, ss_r, f_hand) == pytest.approx((18.0, 10 / 3, 16.2), rel=EXACT)
    fit = fit_cyclic(x)
    assert (fit.df_judge, fit.df_residual) == (2, 6)
    assert fit.f_statistic == pytest.approx(f_hand, rel=EXACT)
    assert fit.p_value == pytest.approx(stats.f.sf(f_hand, 2, 6), rel=EXACT)
    assert fit.p_value == pytest.approx(6.4**-3, rel=EXACT)  # F(2, 6) tail: (1 + F/3)^-3


def test_estimators_equal_the_paper_formulas() -> None:
    """Eq. 20-25 written out term by term."""
    rng = np.random.default_rng(5)
    n, m, k = 9, 4, 5
    x = simulate(rng, n, m, GAMMA, TRUTH)
    g = x.mean()
    cell = x.mean(axis=2, keepdims=True)  # X-bar_ij.
    judge = x.mean(axis=(0, 1), keepdims=True)  # X-bar_..l
    scen = x.mean(axis=(1, 2), keepdims=True)  # X-bar_i..
    ms_w = ((x - cell - judge + g) ** 2).sum() / ((n * m - 1) * (k - 1))  # eq. 20
    ms_g = k / (n * (m - 1)) * ((cell - scen) ** 2).sum()  # eq. 21
    ms_s = m * k / (n - 1) * ((scen - g) ** 2).sum()  # eq. 22
    gamma_hat = judge.ravel() - g
    fit = fit_cyclic(x, judges=list("abcde"))
    assert fit.ms_residual == pytest.approx(ms_w, rel=EXACT)
    assert fit.ms_generation == pytest.approx(ms_g, rel=EXACT)
    assert fit.ms_scenario == pytest.approx(ms_s, rel=EXACT)
    assert fit.raw["sigma2_generation"] == pytest.approx((ms_g - ms_w) / k, rel=EXACT)  # eq. 23
    assert fit.raw["sigma2_scenario"] == pytest.approx((ms_s - ms_g) / (m * k), rel=EXACT)  # eq. 24
    eq25 = np.mean(gamma_hat**2) - ms_w / (n * m) * (k - 1) / k
    assert fit.raw["sigma2_judge"] == pytest.approx(eq25, rel=EXACT)
    assert sigma2_judge_from_offsets(
        gamma_hat, sigma2_residual=ms_w, n_subjects=n * m
    ) == pytest.approx(eq25, rel=EXACT)
    np.testing.assert_allclose(fit.judge_offsets, gamma_hat, rtol=EXACT, atol=1e-12)
    assert fit.grand_mean == pytest.approx(g, rel=EXACT)


def test_agrees_with_the_gstudy_engine() -> None:
    """Exact where the models coincide; within sampling error where they differ."""
    rng = np.random.default_rng(8)
    n, m, k = 40, 4, 5
    x = simulate(rng, n, m, GAMMA, TRUTH)
    fit = fit_cyclic(x)
    design = Design.parse("(g:i) x j")
    assert design.facets == CYCLIC_DESIGN.facets == ("i", "g", "j")
    df, ss, ms = mean_squares(x, design)
    lab = dict(zip(design.labels, range(len(design.labels)), strict=True))
    assert fit.ms_scenario == pytest.approx(ms[lab["i"]], rel=EXACT)
    assert fit.ms_generation == pytest.approx(ms[lab["g:i"]], rel=EXACT)
    pooled = (ss[lab["ij"]] + ss[lab["gj:i"]]) / (df[lab["ij"]] + df[lab["gj:i"]])
    assert fit.ms_residual == pytest.approx(pooled, rel=EXACT)
    # Subjects (scenario-generation pairs) crossed with judges: the paper's appendix H view.
    sxj = fit_gstudy(x.reshape(n * m, k), Design.parse("s x j"))
    assert fit.sigma2_residual == pytest.approx(sxj.component("sj"), rel=EXACT)
    assert fit.raw["sigma2_judge"] == pytest.approx((k - 1) / k * sxj.component("j"), rel=EXACT)
    # The full (g:i) x j model also has the ij interaction (zero here): sigma2_i and sigma2_g:i
    # differ from the pooled estimates by (MS_gj:i - MS_ij)/(mK) and (MS_W - MS_gj:i)/K.
    full = fit_gstudy(x, design)
    se_ms = TRUTH.sigma2_residual * np.sqrt(2 / df[lab["ij"]] + 2 / df[lab["gj:i"]])
    assert abs(full.component("i") - fit.sigma2_scenario) <= Z * se_ms / (m * k)
    assert abs(full.component("g:i") - fit.sigma2_generation) <= Z * se_ms / k
    assert abs(full.component("ij")) <= Z * se_ms / m


# ----------------------------------------------------------------- simulated truth
def test_estimates_recover_the_truth() -> None:
    """Means of the raw estimates over 300 simulated data sets against eq. 1's truth."""
    rng = np.random.default_rng(2026)
    reps, n, m = 300, 30, 4
    keys = ("sigma2_scenario", "sigma2_generation", "sigma2_judge", "sigma2_residual")
    est = np.empty((reps, 4))
    offsets = np.empty((reps, len(GAMMA)))
    for r in range(reps):
        fit = fit_cyclic(simulate(rng, n, m, GAMMA, TRUTH))
        est[r] = [fit.raw[key] for key in keys]
        offsets[r] = fit.judge_offsets
    se = est.std(axis=0, ddof=1) / np.sqrt(reps)
    truth = np.array([getattr(TRUTH, key) for key in keys])
    assert np.all(np.abs(est.mean(axis=0) - truth) <= Z * se), (est.mean(axis=0), truth, se)
    off_se = offsets.std(axis=0, ddof=1) / np.sqrt(reps)
    assert np.all(np.abs(offsets.mean(axis=0) - GAMMA) <= Z * off_se)


def _strategy_scores(
    rng: np.random.Generator, alpha: np.ndarray, budget: int, reps: int, strategy: str
) -> np.ndarray:
    """Benchmark scores of ``reps`` fresh evaluations of fixed scenarios under one strategy."""
    n, k = len(alpha), len(GAMMA)
    sd_b, sd_e = np.sqrt(TRUTH.sigma2_generation), np.sqrt(TRUTH.sigma2_residual)
    if strategy == "A":
        m = budget // k
        x = (
            alpha[None, :, None, None]
            + rng.normal(0, sd_b, (reps, n, m, 1))
            + GAMMA
            + rng.normal(0, sd_e, (reps, n, m, k))
        )
        return x.mean(axis=(1, 2, 3))
    if strategy == "B":
        judge = GAMMA[rng.integers(0, k, (reps, n, budget))]
    else:
        judge = np.broadcast_to(GAMMA[np.arange(budget) % k], (reps, n, budget))
    x = (
        alpha[None, :, None]
        + rng.normal(0, sd_b, (reps, n, budget))
        + judge
        + rng.normal(0, sd_e, (reps, n, budget))
    )
    return x.mean(axis=(1, 2))


@pytest.mark.parametrize("budget", [5, 10])
def test_strategies_match_eq_3_to_5_by_simulation(budget: int) -> None:
    rng = np.random.default_rng(budget)
    n, reps = 20, 5_000
    alpha = rng.normal(0, np.sqrt(TRUTH.sigma2_scenario), n)  # scenarios fixed (appendix E)
    pred = strategy_variances(TRUTH, [budget], n=n, k_total=len(GAMMA))
    empirical = {}
    for name, formula in zip("ABC", (pred.var_a, pred.var_b, pred.var_c), strict=True):
        scores = _strategy_scores(rng, alpha, budget, reps, name)
        empirical[name] = scores.var(ddof=1)
        se = formula[0] * np.sqrt(2 / (reps - 1))  # normal data: Var(s^2) = 2 sigma^4 / (R - 1)
        assert abs(empirical[name] - formula[0]) <= Z * se, (name, empirical[name], formula[0])
    assert empirical["C"] < empirical["A"]
    assert empirical["C"] < empirical["B"]


def test_subsampling_matches_appendix_g() -> None:
    """5,000 subsamples per budget against eq. 36-38, and C below A and B."""
    rng = np.random.default_rng(17)
    x = simulate(rng, 40, 10, GAMMA, TRUTH)
    curve = subsample_strategy_curve(x, [5, 10, 25], reps=5_000, seed=4)
    assert curve.height == 9
    deviation = (curve["empirical"] - curve["predicted"]).abs() / curve["se"]
    assert deviation.max() <= Z, curve
    for budget, group in curve.group_by("budget"):
        by = dict(zip(group["strategy"], group["empirical"], strict=True))
        assert by["C"] < by["A"], budget
        assert by["C"] < by["B"], budget
    fit = fit_cyclic(x, budgets=[5, 10, 25])
    exact = fit.strategies.to_frame().sort("strategy", "budget")["exact"].to_numpy()
    predicted = curve.sort("strategy", "budget")["predicted"].to_numpy()
    np.testing.assert_allclose(exact, predicted, rtol=EXACT)


def test_subsampling_is_a_pure_function_of_data_budget_reps_seed() -> None:
    rng = np.random.default_rng(1)
    x = simulate(rng, 10, 4, GAMMA, TRUTH)
    one = subsample_strategy_variance(x, 10, reps=300, seed=9)
    assert one == subsample_strategy_variance(x.copy(), 10, reps=300, seed=9)
    assert one != subsample_strategy_variance(x, 10, reps=300, seed=10)
    curve = subsample_strategy_curve(x, [5, 10], reps=300, seed=9)
    # The definition replayed by explicit loops on the documented stream
    # default_rng([seed, budget]), whatever the other budgets of the curve.
    for budget in (5, 10):
        want = _subsample_by_hand(x, budget, reps=300, seed=9)
        rows = curve.filter(pl.col("budget") == budget).sort("strategy")
        np.testing.assert_allclose(rows["empirical"].to_numpy(), [want[s] for s in "ABC"], rtol=FLOAT32)
    alone = _subsample_by_hand(x, 10, reps=300, seed=9)
    np.testing.assert_allclose([one.var_a, one.var_b, one.var_c], [alone[s] for s in "ABC"], rtol=FLOAT32)
    # eq. 37 by hand: C_B = mean over scenarios of the plug-in variance of its m_max x K cells.
    c_b = np.mean([np.mean((x[i] - x[i].mean()) ** 2) for i in range(x.shape[0])])
    assert one.pred_b == pytest.approx(c_b / (x.shape[0] * 10), rel=EXACT)
    assert set(one.to_json()) >= {"budget", "reps", "seed", "var_a", "pred_c", "se_b"}


# The subsampling pools are float32: each score of about 5 rounds by up to 3e-7,
# which moves the variance of the means (deviations of about 0.1) by well under
# 1e-6 relative (3e-8 seen here).
FLOAT32 = 1e-6


def _subsample_by_hand(x: np.ndarray, budget: int, *, reps: int, seed: int) -> dict[str, float]:
    """Section 4.4's subsampling, one repetition and one scenario at a time.

    The indices come from ``default_rng([seed, budget])`` in the order
    ``subsample_strategy_variance`` draws them when all repetitions fit in one
    chunk: A's generations (reps, n, B/K), B's cells (reps, n, B) numbered
    ``generation * K + judge``, C's generations (reps, n, K, B/K).
    """
    n, m_max, k = x.shape
    per = budget // k
    assert reps * n * budget <= _CHUNK_DRAWS, "one chunk of draws, so one call per strategy"
    rng = np.random.default_rng([seed, budget])
    pick_a = rng.integers(0, m_max, size=(reps, n, per), dtype=np.int32)
    pick_b = rng.integers(0, m_max * k, size=(reps, n, budget), dtype=np.int32)
    pick_c = rng.integers(0, m_max, size=(reps, n, k, per), dtype=np.int32)
    scores: dict[str, list[float]] = {"A": [], "B": [], "C": []}
    for r in range(reps):
        a, b, c = [], [], []
        for i in range(n):
            # A: B/K generations, each the mean of all K judges.
            a.append(np.mean([np.mean(x[i, g, :]) for g in pick_a[r, i]]))
            # B: B cells (generation, judge), uniform over m_max x K.
            b.append(np.mean([x[i, cell // k, cell % k] for cell in pick_b[r, i]]))
            # C: each judge scores B/K generations drawn from its own column.
            c.append(np.mean([np.mean([x[i, g, judge] for g in pick_c[r, i, judge]]) for judge in range(k)]))
        for name, per_scenario in zip("ABC", (a, b, c), strict=True):
            scores[name].append(float(np.mean(per_scenario)))
    return {name: float(np.var(values, ddof=1)) for name, values in scores.items()}


def test_pools_approach_the_population_formulas() -> None:
    """Appendix G: the pool constants converge to eq. 3-5's numerators as m_max grows."""
    rng = np.random.default_rng(23)
    x = simulate(rng, 60, 200, GAMMA, TRUTH)
    pools = pool_variances(x)
    k = len(GAMMA)
    beta, gamma, eps = TRUTH.sigma2_generation, TRUTH.sigma2_judge, TRUTH.sigma2_residual
    assert pools.c_a == pytest.approx(k * beta + eps, rel=0.08)
    assert pools.c_b == pytest.approx(beta + gamma + eps, rel=0.08)
    assert pools.c_c == pytest.approx(beta + eps, rel=0.08)


@settings(max_examples=60, deadline=None)
@given(
    beta=st.floats(0, 5),
    gamma=st.floats(0, 5),
    eps=st.floats(0, 5),
    k_total=st.integers(1, 8),
    n=st.integers(1, 200),
    mult=st.lists(st.integers(1, 20), min_size=1, max_size=5),
)
def test_cycling_is_never_worse(
    beta: float, gamma: float, eps: float, k_total: int, n: int, mult: list[int]
) -> None:
    """Appendix E, eq. 32-34: V_C <= min(V_A, V_B) at every budget, gaps as printed."""
    comp = VarianceComponents(1.0, beta, gamma, eps)
    budgets = [k_total * b for b in mult]
    got = strategy_variances(comp, budgets, n=n, k_total=k_total)
    b = np.asarray(budgets, dtype=float)
    assert np.all(got.var_c <= got.var_a * (1 + EXACT) + 1e-300)
    assert np.all(got.var_c <= got.var_b * (1 + EXACT) + 1e-300)
    np.testing.assert_allclose(got.var_a - got.var_c, (k_total - 1) * beta / (n * b), atol=1e-12)
    np.testing.assert_allclose(got.var_b - got.var_c, gamma / (n * b), atol=1e-12)
    np.testing.assert_allclose(got.var_a - got.var_b, got.ab_margin / (n * b), atol=1e-12)
    assert got.winner_ab == ("B" if got.ab_margin > 0 else "A" if got.ab_margin < 0 else "tie")


# ----------------------------------------------------------------- truncation, coverage, contract
def test_negative_estimates_are_set_to_zero_and_flagged() -> None:
    rng = np.random.default_rng(4)
    x = simulate(rng, 10, 3, GAMMA, TRUTH)
    # Remove all between-generation variation: MS_G = 0 < MS_W, so eq. 23 is negative.
    x = x - x.mean(axis=2, keepdims=True) + x.mean(axis=(1, 2), keepdims=True)
    fit = fit_cyclic(x)
    assert fit.raw["sigma2_generation"] < 0
    assert fit.sigma2_generation == 0.0
    assert "sigma2_generation" in fit.truncated
    assert fit.components.sigma2_generation == 0.0
    assert fit.contributions.generation == 0.0


def test_scenario_coverage_follows_appendix_f() -> None:
    comp = _components("mtbench", 0)
    noise = comp.sigma2_generation + comp.sigma2_residual
    split = scenario_coverage(comp, total_generations=400, n_available=80)
    assert (split.n_scenarios, split.generations, split.extra) == (80, 5, 0)
    curve = split.curve
    for m in (5, 8, 10, 20, 25, 40):  # balanced splits with n = 400 / m <= 80: eq. 35
        row = curve.filter(pl.col("n_scenarios") == 400 // m)
        assert row["variance"][0] == pytest.approx(
            (m * comp.sigma2_scenario + noise) / 400, rel=EXACT
        )
    assert split.variance == curve["variance"].min()
    few = scenario_coverage(comp, total_generations=30, n_available=80)
    assert (few.n_scenarios, few.generations, few.extra) == (30, 1, 0)
    odd = scenario_coverage(comp, total_generations=130, n_available=50)
    assert (odd.n_scenarios, odd.generations, odd.extra) == (50, 2, 30)
    sizes = np.array([3] * 30 + [2] * 20)
    brute = comp.sigma2_scenario * np.sum(sizes**2) / 130**2 + noise / 130
    assert odd.variance == pytest.approx(brute, rel=EXACT)
    assert odd.variance == odd.curve["variance"].min()


def test_to_json_contract_and_frozen_results() -> None:
    rng = np.random.default_rng(6)
    fit = fit_cyclic(
        simulate(rng, 8, 3, GAMMA, TRUTH), judges=list("vwxyz"), at_generations=2, at_judges=2
    )
    payload = fit.to_json()
    required = {
        "sigma2_scenario",
        "sigma2_generation",
        "sigma2_judge",
        "sigma2_residual",
        "judge_offsets",
        "f_statistic",
        "p_value",
        "strategies",
    }
    assert required <= set(payload)
    assert list(payload["judge_offsets"]) == list("vwxyz")
    assert payload["strategies"]["budgets"] == [5, 10, 15]
    assert payload["contributions"]["m"] == 2
    assert payload["contributions"]["k"] == 2
    json.dumps(payload, allow_nan=False)
    with pytest.raises(dataclasses.FrozenInstanceError):
        fit.sigma2_judge = 0.0  # type: ignore[misc]
    with pytest.raises(dataclasses.FrozenInstanceError):
        fit.components.sigma2_judge = 0.0  # type: ignore[misc]


@pytest.mark.parametrize(
    ("call", "match"),
    [
        (lambda: fit_cyclic(np.zeros((3, 3))), "3-d"),
        (lambda: fit_cyclic(np.full((3, 3, 3), np.nan)), "finite"),
        (lambda: fit_cyclic(np.zeros((3, 1, 3))), "generations"),
        (lambda: fit_cyclic(np.zeros((3, 2, 3)), judges=["a", "a", "b"]), "repeats"),
        (lambda: fit_cyclic(np.zeros((3, 2, 3)), budgets=[4]), "multiples"),
        (lambda: fit_cyclic(np.zeros((3, 2, 3)), at_judges=4), "at_judges"),
        (lambda: variance_contributions(TRUTH, n=0, k_total=5), "n must"),
        (lambda: VarianceComponents(-1.0, 0.0, 0.0, 0.0), "sigma2_scenario"),
        (lambda: subsample_strategy_variance(np.zeros((3, 2, 5)), 7), "multiples"),
        (lambda: scenario_coverage(TRUTH, total_generations=0, n_available=5), "total_generations"),
    ],
)
def test_bad_arguments_raise_design_error(call: object, match: str) -> None:
    with pytest.raises(DesignError, match=match):
        call()  # type: ignore[operator]


def test_score_cube_round_trip() -> None:
    rng = np.random.default_rng(12)
    x = rng.normal(size=(2, 3, 2, 4))
    idx = np.indices(x.shape).reshape(4, -1)
    frame = pl.DataFrame(
        {
            "system_id": [f"s{v}" for v in idx[0]],
            "item_id": [f"q{v}" for v in idx[1]],
            "generation": idx[2] * 10,
            "judge_id": [f"j{v}" for v in idx[3]],
            "score": x.ravel(),
        }
    ).sample(fraction=1.0, shuffle=True, seed=1)
    cube = score_cube(frame)
    np.testing.assert_array_equal(cube.x, x)
    assert cube.judges == ("j0", "j1", "j2", "j3")
    fit = fit_cyclic(cube.system("s1"), judges=cube.judges)
    assert fit.n_scenarios == 3
    with pytest.raises(DesignError, match="not fully crossed"):
        score_cube(frame.slice(1))
    with pytest.raises(DesignError, match="more than one"):
        score_cube(pl.concat([frame, frame.head(1)]))
