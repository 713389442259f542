"""Ensembles, items, naive bootstrap and rank reliability against simulated truth and brute force."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from jurymeter.stats.design import Design
from jurymeter.stats.diagnostics import (
    EnsembleRefits,
    ensemble_partitions,
    item_diagnostics,
    mdd_false_positive_rate,
    naive_item_bootstrap_halfwidth,
    wrong_order_probability,
)
from jurymeter.stats.dstudy import PAPER_ROLES, mdd95
from jurymeter.stats.gstudy import fit_gstudy, simulate_design

DESIGN = Design.parse("s x i x j x r:sij")


def _truth(**values: float) -> np.ndarray:
    return np.array([values.get(label.replace(":", "_"), 0.0) for label in DESIGN.labels])


TRUTH = _truth(s=0.5, i=0.3, j=0.1, si=0.3, sj=0.15, ij=0.05, sij=0.4, r_sij=0.3)


def _simulate(sizes: dict[str, int], truth: np.ndarray, seed: int) -> np.ndarray:
    return simulate_design(DESIGN, sizes, truth, np.random.default_rng(seed), grand_mean=3.0)


def test_ensembles_of_k_judges_carry_sigma2_sj_over_k() -> None:
    x = _simulate({"s": 40, "i": 30, "j": 12, "r": 2}, TRUTH, seed=3)
    for k in (2, 3):
        check = ensemble_partitions(x, DESIGN, k=k, partitions=60, seed=k)
        assert len(check.ratios) == 60
        # Same-data refits: the median ratio sits near 1, as in the paper (0.93-1.11).
        assert 0.8 < check.median < 1.25, check.median


def test_item_discrimination_is_the_variance_of_system_means() -> None:
    x = _simulate({"s": 12, "i": 9, "j": 3, "r": 2}, TRUTH, seed=4)
    result = item_diagnostics(x, DESIGN, splits=50)
    for item in range(9):
        means = [x[s, item].mean() for s in range(12)]
        assert result.discrimination[item] == pytest.approx(np.var(means, ddof=1))
    assert result.split_half_rho.shape == (50,)
    assert np.all(np.abs(result.split_half_rho) <= 1)


@pytest.mark.parametrize(("systems", "items", "splits"), [(13, 57, 45), (100, 300, 30), (4, 1, 3)])
def test_split_half_rho_is_scipy_spearman_of_each_splits_half_discriminations(
        systems: int, items: int, splits: int) -> None:
    # The splits drawn as documented (one permutation of the systems per split from
    # default_rng(seed)); each half's discriminations by a loop over items and
    # statistics' sample variance, their rank correlation by scipy.
    import statistics

    x = _simulate({"s": systems, "i": items, "j": 3, "r": 2}, TRUTH, seed=9)
    result = item_diagnostics(x, DESIGN, splits=splits, seed=11)
    means = x.mean(axis=(2, 3))
    rng = np.random.default_rng(11)
    half = systems // 2
    for k in range(splits):
        order = rng.permutation(systems)
        a = [statistics.variance(means[order[:half], i].tolist()) for i in range(items)]
        b = [statistics.variance(means[order[half : 2 * half], i].tolist()) for i in range(items)]
        if items == 1:
            assert np.isnan(result.split_half_rho[k])
            continue
        assert result.split_half_rho[k] == pytest.approx(stats.spearmanr(a, b).statistic, rel=1e-12, abs=1e-12)


def test_the_screen_keeps_the_items_built_to_discriminate() -> None:
    # Item k scores system s as a[k] * q[s], plus judge and run offsets that cancel
    # in every item's system means, plus an item difficulty. q has variance 1 (ddof 1:
    # sum 0, sum of squares 8 over 9 systems), so item k's discrimination is a[k]^2,
    # exactly: every value is a binary fraction, so no step rounds.
    a = np.array([0.0, 1.0, 0.5, 2.0, 0.75, 1.5, 0.25, 3.0])
    q = np.array([1.0, -1.0, 1.0, -1.0, 1.0, -1.0, 1.0, -1.0, 0.0])
    judge = np.array([0.5, -0.25, -0.25])
    run = np.array([0.125, -0.125])
    x = (a[None, :, None, None] * q[:, None, None, None] + 2.0 * np.arange(8)[None, :, None, None]
         + judge[None, None, :, None] + run[None, None, None, :])
    result = item_diagnostics(x, DESIGN, splits=5)
    np.testing.assert_array_equal(result.discrimination, a**2)
    # Default threshold 1.0 (docs/gstudy.md: the screen is discrimination >= threshold):
    # a = 1 is on the threshold and kept, 0.75 and below are not.
    assert result.screened().tolist() == [1, 3, 5, 7]
    assert result.screened(2.25).tolist() == [3, 5, 7]
    assert result.screened(2.2).tolist() == [3, 5, 7]
    assert result.screened(0.0).tolist() == list(range(8))
    assert result.screened(9.5).tolist() == []


def test_split_half_is_high_when_items_differ_in_discrimination() -> None:
    rng = np.random.default_rng(5)
    spread = np.linspace(0.1, 3.0, 20)  # item i separates systems with scale spread[i]
    quality = rng.normal(size=(30, 1, 1, 1))
    x = quality * spread[None, :, None, None] + rng.normal(scale=0.3, size=(30, 20, 3, 2))
    result = item_diagnostics(x, DESIGN, splits=100)
    assert np.median(result.split_half_rho) > 0.8


def test_naive_halfwidth_equals_its_explicit_loop() -> None:
    design = Design.parse("s x i x j")
    truth = np.array([0.5, 0.3, 0.0, 0.3, 0.2, 0.0, 0.4])
    one_judge = _simulate_design(design, {"s": 20, "i": 30, "j": 4}, truth, seed=6)[:, :, :1]
    half = naive_item_bootstrap_halfwidth(one_judge, design, n_boot=2000, seed=1)
    rng = np.random.default_rng(1)
    means = one_judge.mean(axis=2)
    picks = rng.integers(0, 30, size=(2000, 30))
    boot = np.array([means[:, p].mean(axis=1) for p in picks])
    sds = [np.std(boot[:, a] - boot[:, b], ddof=1) for a in range(20) for b in range(a + 1, 20)]
    assert half == pytest.approx(1.959963985 * np.sqrt(np.mean(np.square(sds))), rel=1e-9)


def _simulate_design(design: Design, sizes: dict[str, int], truth: np.ndarray, seed: int) -> np.ndarray:
    return simulate_design(design, sizes, truth, np.random.default_rng(seed))


def test_naive_halfwidth_is_below_the_single_judge_mdd() -> None:
    truth = _truth(s=0.5, i=0.3, j=0.1, si=0.3, sj=0.3, ij=0.05, sij=0.4, r_sij=0.3)
    x = _simulate({"s": 30, "i": 30, "j": 6, "r": 2}, truth, seed=8)
    fit = fit_gstudy(x, DESIGN)
    single = x[:, :, :1, :1]
    half = naive_item_bootstrap_halfwidth(single, DESIGN, n_boot=1000, seed=2)
    mdd = float(mdd95(fit.sigma2, DESIGN, PAPER_ROLES.sizes(DESIGN, 30, 1, 1)))
    assert mdd / half > 1.3


def test_wrong_order_probability_matches_its_closed_form_and_falls_with_judges() -> None:
    x = _simulate({"s": 30, "i": 20, "j": 6, "r": 2}, TRUTH, seed=9)
    fit = fit_gstudy(x, DESIGN)
    one = wrong_order_probability(fit, judges=1, draws=20_000, seed=1)
    three = wrong_order_probability(fit, judges=3, draws=20_000, seed=1)
    assert 0 < three < one < 0.5
    # Closed form for one adjacent gap distribution: same draws, explicit loop.
    rng = np.random.default_rng(1)
    s2 = fit.component("s")
    true = np.sort(rng.normal(0, np.sqrt(s2), size=(20_000, 30)), axis=1)[:, ::-1][:, :10]
    delta = fit.component("si") / 20 + fit.component("sj") + fit.component("sij") / 20 + fit.component("r:sij") / 20
    expected = stats.norm.cdf(-(true[:, :-1] - true[:, 1:]) / np.sqrt(2 * delta)).mean()
    assert one == pytest.approx(expected, rel=1e-9)


@pytest.mark.slow
def test_mdd_rule_false_positive_rate_is_near_nominal() -> None:
    x = _simulate({"s": 20, "i": 20, "j": 3, "r": 2}, TRUTH, seed=10)
    fit = fit_gstudy(x, DESIGN)
    rate = mdd_false_positive_rate(fit, simulations=400, seed=3)
    # 5% nominal; binomial SE at n=400 is 1.1 points.
    assert 0.015 <= rate <= 0.085, rate


@pytest.mark.parametrize(("spec", "sizes"), [
    ("s x i x j x r:sij", {"s": 7, "i": 6, "j": 6, "r": 3}),
    ("s x i x j x g:si x r:sijg", {"s": 5, "i": 4, "j": 6, "g": 2, "r": 2}),
    ("s x i x j", {"s": 7, "i": 6, "j": 6}),
])
def test_ensemble_refits_on_cell_means_equal_refits_of_the_whole_design(spec: str, sizes: dict[str, int]) -> None:
    """The shortcut (replicates averaged before the refits) against refitting every ensemble's full array."""
    design = Design.parse(spec)
    rng = np.random.default_rng(9)
    x = rng.normal(size=[sizes[f] for f in design.facets]) + rng.normal(size=(sizes["s"], 1, sizes["j"]) + (1,) * (len(design.facets) - 3))
    axis = design.facets.index("j")
    for k in (2, 3):
        predicted = fit_gstudy(x, design).component("sj") / k
        draw = np.random.default_rng(k)
        expected = []
        for _ in range(8):
            order = draw.permutation(sizes["j"])[: (sizes["j"] // k) * k]
            moved = np.moveaxis(x, axis, -1)[..., order]
            grouped = moved.reshape(*moved.shape[:-1], -1, k).mean(axis=-1)
            expected.append(fit_gstudy(np.moveaxis(grouped, -1, axis), design).component("sj") / predicted)
        check = ensemble_partitions(x, design, k=k, partitions=8, seed=k)
        np.testing.assert_allclose(check.ratios, expected, rtol=1e-9)


def test_checks_without_a_positive_error_or_prediction_are_nan_without_warnings() -> None:
    """Issue 11: small data give sigma2_delta <= 0 or sigma2_sj <= 0; no warning, no made-up number."""
    import warnings

    from jurymeter.stats.diagnostics import EnsembleRefits, naive_halfwidth_from_means

    x = _simulate({"s": 5, "i": 6, "j": 4, "r": 2}, _truth(s=0.5, sij=0.3, r_sij=0.3), seed=4)
    fit = fit_gstudy(x, DESIGN)
    sigma2 = fit.sigma2.copy()
    sigma2[list(fit.effects).index("sj")] = -0.2  # sigma2_delta at one judge is then negative
    negative = type(fit)(**{**fit.__dict__, "sigma2": sigma2})
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert np.isnan(wrong_order_probability(negative, judges=1, seed=1))
        refits = EnsembleRefits(DESIGN, 4, k=2, partitions=3, seed=1).add(x)
        check = refits.check(negative)
        assert np.all(np.isnan(check.ratios))
        assert np.isnan(check.median)
        assert np.isnan(naive_halfwidth_from_means(x.mean(axis=(2, 3)), n_boot=1))
@pytest.mark.parametrize(("spec", "sizes"), [
    ("s x i x j x r:sij", {"s": 7, "i": 9, "j": 7, "r": 3}),
    ("s x i x j x g:si x r:sijg", {"s": 5, "i": 6, "j": 6, "g": 2, "r": 2}),
    ("s x i x j", {"s": 7, "i": 8, "j": 9}),
])
def test_ensemble_refits_summed_over_item_chunks_equal_refits_of_each_ensembles_array(
    spec: str, sizes: dict[str, int]
) -> None:
    """Refits accumulated over uneven item chunks against every partition's ensembles refitted whole."""
    design = Design.parse(spec)
    rng = np.random.default_rng(11)
    x = 4.0 + rng.normal(size=[sizes[f] for f in design.facets]) + rng.normal(
        size=(sizes["s"], 1, sizes["j"]) + (1,) * (len(design.facets) - 3)
    )
    axis = design.facets.index("j")
    fit = fit_gstudy(x, design)
    for k in (2, 3):
        refits = EnsembleRefits(design, sizes["j"], k=k, partitions=12, seed=k)
        for lo, hi in ((0, 1), (1, 5), (5, sizes["i"])):
            refits.add(x[:, lo:hi])
        draw = np.random.default_rng(k)
        expected = []
        for _ in range(12):
            order = draw.permutation(sizes["j"])[: (sizes["j"] // k) * k]
            moved = np.moveaxis(x, axis, -1)[..., order]
            grouped = moved.reshape(*moved.shape[:-1], -1, k).mean(axis=-1)
            expected.append(fit_gstudy(np.moveaxis(grouped, -1, axis), design).component("sj"))
        np.testing.assert_allclose(refits.check(fit).ratios, np.array(expected) / (fit.component("sj") / k), rtol=1e-9)


def test_the_normal_quantile_and_cdf_from_scipy_special_are_scipy_stats_norm_s() -> None:
    """diagnostics uses scipy.special (a light import) where scipy.stats.norm was called: the same floats."""
    from scipy import special

    assert special.ndtri(0.975) == stats.norm.ppf(0.975)
    x = np.concatenate([np.linspace(-40, 40, 20_001), [-np.inf, np.inf, -0.0, 0.0, 1e-300, -1e-300]])
    np.testing.assert_array_equal(special.ndtr(x), stats.norm.cdf(x))


def test_ensemble_refits_fed_one_chunk_object_for_each_size_equal_refits_fed_copies() -> None:
    """The chunk's judge marginals are computed once for the sizes fed the same array (as GStudyChunks does)."""
    import jurymeter.stats.diagnostics as diagnostics

    design = Design.parse("s x i x j x r:sij")
    x = _simulate({"s": 9, "i": 12, "j": 7, "r": 2}, TRUTH, seed=12)
    fit = fit_gstudy(x, design)
    shared = {k: EnsembleRefits(design, 7, k=k, partitions=9, seed=k) for k in (2, 3)}
    alone = {k: EnsembleRefits(design, 7, k=k, partitions=9, seed=k) for k in (2, 3)}
    for lo, hi in ((0, 5), (5, 12)):
        chunk = x[:, lo:hi]
        for k in (2, 3):
            shared[k].add(chunk)
            assert diagnostics._last_marginals is not None
            assert diagnostics._last_marginals[0]() is chunk
        for k in (2, 3):
            alone[k].add(chunk.copy())  # a new array each time: computed afresh
    for k in (2, 3):
        np.testing.assert_array_equal(shared[k].check(fit).ratios, alone[k].check(fit).ratios)
