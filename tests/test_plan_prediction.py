"""A plan's predicted MDD95 and E rho^2 (stats.plan_prediction) against simulations with known truth.

References, none of them the code under test:
- the sampling step against brute force: data sets drawn at the planned sizes
  (``simulate_design``) and fitted by ANOVA give the same distribution of the
  MDD95 as the chi-square draws of the mean squares (two-sample KS);
- the whole prediction by coverage: today's data set is drawn from a known
  truth, fitted and planned; the next run's data set is drawn from the same
  truth at the planned sizes and fitted; its MDD95 and E rho^2 fall inside the
  95 % prediction interval in about 95 % of 300 repetitions;
- the test's power: the same intervals shrunk by 30 % around their centre
  cover clearly less (the check a too-narrow interval could not pass).
"""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from jurymeter.errors import DesignError
from jurymeter.stats.bootstrap import resample_components
from jurymeter.stats.design import Design
from jurymeter.stats.dstudy import PAPER_ROLES, erho2, mdd95
from jurymeter.stats.gstudy import fit_gstudy, simulate_design
from jurymeter.stats.plan_prediction import planned_sizes, predict_plan, predictive_components

DESIGN = Design.parse("s x i x j")
TRUTH = {"s": 0.3, "i": 0.5, "j": 0.1, "si": 0.4, "sj": 0.05, "ij": 0.1, "sij": 1.0}
TODAY = {"s": 8, "i": 20, "j": 2}
PLAN = {"s": 8, "i": 40, "j": 3}


def _truth() -> np.ndarray:
    return np.array([TRUTH[DESIGN.label(e)] for e in DESIGN.effects])


def _estimates(x: np.ndarray) -> dict[str, float]:
    fit = fit_gstudy(x, DESIGN)
    native = PAPER_ROLES.observed(DESIGN, fit.sizes)
    return {"mdd95": float(mdd95(fit.sigma2, DESIGN, native)), "erho2": float(erho2(fit.sigma2, DESIGN, native))}


def test_sampling_step_matches_simulated_data_sets() -> None:
    rng = np.random.default_rng(11)
    draws = np.tile(_truth(), (4000, 1))  # no uncertainty about the truth: only the next run's sampling
    native = PAPER_ROLES.observed(DESIGN, PLAN)
    chi2 = mdd95(predictive_components(draws, DESIGN, PLAN, rng), DESIGN, native)
    brute = np.array([_estimates(simulate_design(DESIGN, PLAN, TRUTH, rng))["mdd95"] for _ in range(600)])
    chi2, brute = chi2[np.isfinite(chi2)], brute[np.isfinite(brute)]
    assert stats.ks_2samp(chi2, brute).pvalue > 0.01
    # and the centre is the truth's MDD (the ANOVA estimate of sigma2_delta is unbiased)
    truth_mdd = float(mdd95(_truth(), DESIGN, native))
    assert abs(np.median(brute) - truth_mdd) < 0.05 * truth_mdd


def _coverage(repetitions: int, seed: int, shrink: float = 1.0) -> dict[str, float]:
    rng = np.random.default_rng(seed)
    inside = {"mdd95": 0, "erho2": 0}
    for rep in range(repetitions):
        today = fit_gstudy(simulate_design(DESIGN, TODAY, TRUTH, rng), DESIGN)
        draws = resample_components(today, 400, seed=rep)
        predicted = predict_plan(today.sigma2, draws, DESIGN, planned_sizes(DESIGN, today.sizes, PLAN), seed=rep)
        realised = _estimates(simulate_design(DESIGN, PLAN, TRUTH, rng))
        for key, value in realised.items():
            p = predicted[key]
            assert p.low is not None
            assert p.high is not None
            centre, half = (p.low + p.high) / 2, (p.high - p.low) / 2 * shrink
            inside[key] += int(centre - half <= value <= centre + half)
    return {k: v / repetitions for k, v in inside.items()}


def test_prediction_intervals_cover_the_next_run() -> None:
    covered = _coverage(300, seed=5)
    # 300 repetitions: binomial SE of 95 % coverage is 1.3 points
    for key, share in covered.items():
        assert 0.91 <= share <= 0.99, (key, share)


def test_coverage_check_has_power() -> None:
    covered = _coverage(300, seed=5, shrink=0.7)
    for key, share in covered.items():
        assert share < 0.88, (key, share)


def test_point_prediction_is_the_dstudy_at_planned_sizes() -> None:
    today = fit_gstudy(simulate_design(DESIGN, TODAY, TRUTH, np.random.default_rng(3)), DESIGN)
    predicted = predict_plan(today.sigma2, resample_components(today, 200), DESIGN, PLAN)
    # by hand: sigma2_delta = s:i/n_i + s:j/n_j + s:i:j/(n_i n_j) (Brennan 2001, eq. 4.12 for s x i x j)
    k = {DESIGN.label(e): i for i, e in enumerate(DESIGN.effects)}
    s2 = today.sigma2
    delta = s2[k["si"]] / 40 + s2[k["sj"]] / 3 + s2[k["sij"]] / 120
    assert predicted["mdd95"].point == pytest.approx(1.959963984540054 * np.sqrt(2 * delta), rel=1e-12)
    tau = max(s2[k["s"]], 0.0)
    assert predicted["erho2"].point == pytest.approx(tau / (tau + delta), rel=1e-12)


def test_planned_sizes_refuse_what_cannot_be_estimated() -> None:
    with pytest.raises(DesignError, match="facets \\['q'\\]"):
        planned_sizes(DESIGN, TODAY, {"q": 3})
    with pytest.raises(DesignError, match="at least 2 levels"):
        planned_sizes(DESIGN, TODAY, {"j": 1})
    assert planned_sizes(DESIGN, TODAY, {"i": 50}) == {"s": 8, "i": 50, "j": 2}


@pytest.mark.parametrize(("target_mdd", "target_erho2"), [(0.5, None), (0.8, None), (None, 0.9), (None, 0.6)])
def test_cheapest_crossed_design_is_the_brute_force_search(target_mdd: float | None, target_erho2: float | None) -> None:
    from jurymeter.stats.plan_prediction import cheapest_crossed

    s2 = _truth()
    k = {DESIGN.label(e): i for i, e in enumerate(DESIGN.effects)}
    best = None
    for n_i in range(2, 151):
        for n_j in range(2, 6):  # a measured plan has two judges at least (its run keeps the judge facet)
            # sigma2_delta of s x i x j written out (Brennan 2001, eq. 4.12)
            delta = s2[k["si"]] / n_i + s2[k["sj"]] / n_j + s2[k["sij"]] / (n_i * n_j)
            ok = (1.959963984540054 * np.sqrt(2 * delta) <= target_mdd if target_mdd is not None
                  else s2[k["s"]] / (s2[k["s"]] + delta) >= target_erho2)
            if ok and (best is None or (n_i * n_j, n_j) < (best[0] * best[1], best[1])):
                best = (n_i, n_j)
    got = cheapest_crossed(s2, DESIGN, TODAY, max_items=150, max_judges=5,
                           target_mdd=target_mdd, target_erho2=target_erho2)
    assert got == best


@pytest.mark.parametrize("target", [0.5, 0.8, 1.0])
@pytest.mark.parametrize("prices", [(3.0, 1.0, 1.0, 2.5, 0.5), (1.0, 1.0, 1.0, 1.0, 1.0), (0.2, 5.0, 5.0, 5.0, 4.0)])
def test_the_least_cost_crossed_design_is_the_brute_force_search_over_judge_subsets(
        prices: tuple[float, ...], target: float) -> None:
    import itertools

    from jurymeter.stats.plan_prediction import cheapest_crossed

    s2 = _truth()
    k = {DESIGN.label(e): i for i, e in enumerate(DESIGN.effects)}
    best = None
    for n_i in range(2, 151):
        for n_j in range(2, 6):
            delta = s2[k["si"]] / n_i + s2[k["sj"]] / n_j + s2[k["sij"]] / (n_i * n_j)
            if 1.959963984540054 * np.sqrt(2 * delta) > target:
                continue
            # every subset of n_j judges, priced: the cheapest subset is what a user would pick by hand
            cost = min(n_i * sum(c) for c in itertools.combinations(prices, n_j))
            if best is None or (cost, n_j, n_i) < best:
                best = (cost, n_j, n_i)
    got = cheapest_crossed(s2, DESIGN, TODAY, max_items=150, max_judges=5, target_mdd=target, prices=list(prices))
    assert best is not None
    assert got == (best[2], best[1])


def test_cheapest_crossed_says_none_when_out_of_reach() -> None:
    from jurymeter.stats.plan_prediction import cheapest_crossed

    assert cheapest_crossed(_truth(), DESIGN, TODAY, max_items=20, max_judges=3, target_mdd=0.1) is None
    with pytest.raises(DesignError, match="one target"):
        cheapest_crossed(_truth(), DESIGN, TODAY, max_items=20, max_judges=3)
