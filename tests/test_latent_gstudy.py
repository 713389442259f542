r"""The latent-scale G-study (``jurymeter.stats.latent``) against independent references.

- R, live: ``lme4::glmer(binomial, nAGQ = 1)`` and ``ordinal::clmm`` (logit and probit,
  Laplace) on three small simulated designs (one incomplete, one with one judge and
  replicates), one ``Rscript`` call for the module (``tests/r/latent_reference.R``);
  skipped with the reason where R, lme4 or ordinal is missing.
- brute force: the block-arrowhead Laplace deviance against the same deviance from a
  dense :math:`Z` written out here; its analytic gradient against central differences
  (Richardson-extrapolated) of the deviance itself; with one random factor, against a 1-D Laplace
  approximation by hand and against the exact marginal likelihood by ``scipy.integrate.quad``;
- the D-study written out (Brennan 2001, eq. 4.12, with the link's residual :math:`\pi^2/3`);
  the score-scale slope against the probit's closed form and a finite difference of
  the expected score integrated by ``quad``;
- simulation with known truth: the components' mean and the Wald intervals' coverage.
"""

from __future__ import annotations

import csv
import math
import subprocess
from pathlib import Path

import numpy as np
import orjson
import pytest
from scipy import integrate, optimize, special, stats

from jurymeter.errors import DesignError
from jurymeter.stats.latent import (
    LatentCells,
    LatentFit,
    fit_latent,
    latent_dstudy,
    likelihood,
    link_variance,
    simulate_latent,
)
from jurymeter.stats.latent.likelihood import (
    Cube,
    cell_derivatives,
    laplace_deviance,
    laplace_gradient,
)
from jurymeter.stats.latent.model import design_terms
from jurymeter.stats.latent.report import score_slope
from r_reference import needs_r as needs_r_of

HERE = Path(__file__).parent
SCRIPT = HERE / "r" / "latent_reference.R"
# The bar against R: components within 1e-3 relative or 1e-4 absolute, log-likelihood 1e-3.
RELATIVE, ABSOLUTE, LOGLIK = 1e-3, 1e-4, 1e-3


needs_r = needs_r_of("lme4", "ordinal")

TRUTH = {"s": 0.6, "i": 1.0, "j": 0.3, "si": 0.5, "sj": 0.2, "ij": 0.4}
# name, method, link, sizes, thresholds, replicates, share of cells kept, seed
R_CASES = [
    ("glmer_logit_incomplete", "glmer", "logit", {"s": 8, "i": 25, "j": 3}, [0.3], 1, 0.8, 5),
    ("clmm_logit_ordinal", "clmm", "logit", {"s": 5, "i": 12, "j": 3}, [-1.0, 0.0, 1.2], 1, 1.0, 6),
    ("clmm_probit_one_judge", "clmm", "probit", {"s": 6, "i": 15, "j": 1}, [-0.5, 0.6], 2, 1.0, 7),
]


def _case_cells(sizes: dict[str, int], thresholds: list[float], link: str, replicates: int, keep: float,
                seed: int) -> LatentCells:
    rng = np.random.default_rng(seed)
    truth = {t: v for t, v in TRUTH.items() if all(sizes[f] >= 2 for f in t)}
    if sizes["j"] == 1:
        truth["si"] = 0.5
    cells = simulate_latent(sizes, truth, np.array(thresholds), link=link, replicates=replicates, rng=rng)  # type: ignore[arg-type]
    kept = rng.random(cells.counts.shape[0]) < keep
    return LatentCells(cells.system[kept], cells.item[kept], cells.judge[kept], cells.counts[kept])


@pytest.fixture(scope="module")
def r_reference(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict[str, object], dict[str, object]]:
    folder = tmp_path_factory.mktemp("latent_r")
    ours: dict[str, object] = {}
    with (folder / "data.csv").open("w", newline="") as d, (folder / "cases.csv").open("w", newline="") as c:
        data, cases = csv.writer(d), csv.writer(c)
        data.writerow(["case", "s", "i", "j", "y"])
        cases.writerow(["case", "method", "link", "terms"])
        for name, method, link, sizes, thresholds, replicates, keep, seed in R_CASES:
            cells = _case_cells(sizes, thresholds, link, replicates, keep, seed)
            fit = fit_latent(cells, link=link, intervals=False)
            ours[name] = fit
            for row in range(cells.counts.shape[0]):
                for k in range(cells.counts.shape[1]):
                    for _ in range(int(cells.counts[row, k])):
                        data.writerow([name, cells.system[row], cells.item[row], cells.judge[row], k])
            cases.writerow([name, method, link, "+".join(fit.sigma2)])
    subprocess.run(["Rscript", str(SCRIPT), str(folder / "data.csv"), str(folder / "cases.csv"),
                    str(folder / "out.json")], check=True, timeout=600, capture_output=True)
    return ours, orjson.loads((folder / "out.json").read_bytes())


@needs_r
@pytest.mark.parametrize("case", [c[0] for c in R_CASES])
def test_the_fit_equals_glmer_and_clmm(r_reference: tuple[dict[str, object], dict[str, object]], case: str) -> None:
    ours, reference = r_reference
    fit = ours[case]
    ref = reference[case]
    assert isinstance(fit, LatentFit)
    assert isinstance(ref, dict)
    components = ref["components"]
    assert set(components) == set(fit.sigma2)  # type: ignore[attr-defined]
    for term, value in components.items():
        ours_v = fit.sigma2[term]  # type: ignore[attr-defined]
        assert abs(ours_v - value) <= max(ABSOLUTE, RELATIVE * abs(value)), (term, ours_v, value)
    np.testing.assert_allclose(fit.thresholds, ref["thresholds"], atol=1e-3)  # type: ignore[attr-defined]
    assert abs(fit.loglik - ref["loglik"]) < LOGLIK  # type: ignore[attr-defined]


def _dense_deviance(layout: object, sigma: np.ndarray, theta: np.ndarray, link: str) -> float:
    """The Laplace deviance with Z written out as a dense indicator matrix (one column per effect level)."""
    n_l, n_x, n_y = layout.dims  # type: ignore[attr-defined]
    ll, xx, yy = np.unravel_index(layout.flat, layout.dims)  # type: ignore[attr-defined]
    blocks = [(ll, n_l), (xx, n_x), (yy, n_y), (ll * n_x + xx, n_l * n_x), (ll * n_y + yy, n_l * n_y),
              (xx * n_y + yy, n_x * n_y)]
    columns = []
    scale = []
    for (code, size), sd in zip(blocks, sigma, strict=True):
        z = np.zeros((code.size, size))
        z[np.arange(code.size), code] = 1.0
        columns.append(z)
        scale.append(np.full(size, sd))
    zl = np.hstack(columns) * np.concatenate(scale)
    b = np.zeros(zl.shape[1])
    for _ in range(60):
        _, g, w = cell_derivatives(zl @ b, theta, layout.counts, link)  # type: ignore[attr-defined, arg-type]
        m = zl.T @ (w[:, None] * zl) + np.eye(b.size)
        b = b + np.linalg.solve(m, zl.T @ g - b)
    loglik, _, w = cell_derivatives(zl @ b, theta, layout.counts, link)  # type: ignore[attr-defined, arg-type]
    m = zl.T @ (w[:, None] * zl) + np.eye(b.size)
    return float(-2 * loglik + b @ b + np.linalg.slogdet(m)[1])


@pytest.mark.parametrize("link", ["logit", "probit"])
def test_the_block_laplace_deviance_equals_the_dense_one(link: str) -> None:
    rng = np.random.default_rng(1)
    s, i, j = (a.ravel() for a in np.meshgrid(np.arange(4), np.arange(6), np.arange(3), indexing="ij"))
    kept = rng.random(s.size) < 0.75  # an incomplete design
    cells = LatentCells(s[kept], i[kept], j[kept], rng.integers(0, 4, (int(kept.sum()), 3)))
    layout = design_terms(cells)
    sigma = np.array([0.7, 0.5, 0.3, 0.4, 0.6, 0.2])
    theta = np.array([-0.3, 0.8])
    ours = laplace_deviance(Cube(layout, link), sigma, theta).deviance  # type: ignore[arg-type]
    assert ours == pytest.approx(_dense_deviance(layout, sigma, theta, link), rel=1e-10)


def _dense_laplace_matrix(layout: object, sigma: np.ndarray, w: np.ndarray) -> tuple[np.ndarray, np.ndarray,
                                                                                  list[np.ndarray]]:
    """``M = I + Lambda Z' W Z Lambda`` written out, its columns in the order of ``Modes`` (per level of ``L``:
    ``L, LX, LY``; then ``X, Y, XY``), with ``Z Lambda`` and each slot's column of every cell."""
    n_l, n_x, n_y = layout.dims  # type: ignore[attr-defined]
    ll, xx, yy = np.unravel_index(layout.flat, layout.dims)  # type: ignore[attr-defined]
    m = 1 + n_x + n_y
    border = n_l * m
    columns = [ll * m, border + xx, border + n_x + yy, ll * m + 1 + xx, ll * m + 1 + n_x + yy,
               border + n_x + n_y + xx * n_y + yy]  # slots L, X, Y, LX, LY, XY
    zl = np.zeros((ll.size, border + n_x + n_y + n_x * n_y))
    for sd, col in zip(sigma, columns, strict=True):
        zl[np.arange(ll.size), col] += sd
    return zl.T @ (w[:, None] * zl) + np.eye(zl.shape[1]), zl, columns


# sizes (s, i, j), share of cells kept, SDs in solver slots (L, X, Y, LX, LY, XY; a 0 is a term on its boundary)
FACTOR_CASES = [
    ((4, 6, 3), 0.75, [0.7, 0.5, 0.3, 0.4, 0.6, 0.2]),
    ((3, 7, 2), 0.6, [0.8, 0.0, 0.4, 0.5, 0.0, 0.3]),
    ((5, 8, 1), 1.0, [0.7, 0.6, 0.0, 0.5, 0.0, 0.0]),
    ((4, 5, 2), 0.9, [0.7, 0.6, 0.2, 0.0, 0.3, 0.4]),
]


@pytest.mark.parametrize("case", FACTOR_CASES, ids=[str(c[0]) for c in FACTOR_CASES])
def test_the_three_level_factor_equals_the_dense_matrix(case: tuple) -> None:  # type: ignore[type-arg]
    # The log-determinant, a solve and the selected inverse (each cell's u_t = [M^{-1} v_c]_t) of the blocked
    # elimination against numpy's on M written out, with incomplete designs and terms at 0.
    sizes, keep, sds = case
    rng = np.random.default_rng(sum(sizes))
    s, i, j = (a.ravel() for a in np.meshgrid(*(np.arange(n) for n in sizes), indexing="ij"))
    kept = rng.random(s.size) < keep
    cells = LatentCells(s[kept], i[kept], j[kept], rng.integers(0, 3, (int(kept.sum()), 2)))
    layout = design_terms(cells)
    cube = Cube(layout, "logit")
    sigma = np.array(sds)
    w = rng.uniform(0.05, 2.0, layout.flat.size)
    factor = likelihood.Factor(sigma, cube.to_cube(w))
    m, zl, columns = _dense_laplace_matrix(layout, sigma, w)
    assert factor.logdet == pytest.approx(np.linalg.slogdet(m)[1], rel=1e-12)
    n_l, n_x, n_y = layout.dims
    r = likelihood.Modes(rng.normal(size=(n_l, 1 + n_x + n_y)), rng.normal(size=n_x + n_y + n_x * n_y))
    x = factor.solve(r)
    dense = np.linalg.solve(m, np.concatenate([r.local.ravel(), r.border]))
    np.testing.assert_allclose(np.concatenate([x.local.ravel(), x.border]), dense, rtol=0, atol=1e-12)
    u = np.stack([cube.cells_of(c) for c in factor.cell_inverse(sigma, layout.dims)])
    m_inv = np.linalg.inv(m)
    expected = np.stack([np.einsum("ce,ce->c", m_inv[col], zl) for col in columns])
    np.testing.assert_allclose(u, expected, rtol=0, atol=1e-12)


# name, link, sizes, thresholds, replicates, share of cells kept, SDs (solver slots; a 0 is a component on
# its boundary), seed
GRADIENT_CASES = [
    ("binary", "logit", {"s": 4, "i": 7, "j": 3}, [0.3], 1, 1.0, [0.7, 0.5, 0.3, 0.4, 0.6, 0.2], 11),
    ("ordinal_k5", "logit", {"s": 4, "i": 6, "j": 3}, [-1.0, 0.0, 0.5, 1.5], 2, 1.0, [0.9, 0.4, 0.3, 0.5, 0.6, 0.3], 12),
    ("probit", "probit", {"s": 5, "i": 6, "j": 2}, [-0.5, 0.7], 2, 1.0, [0.6, 0.8, 0.3, 0.4, 0.2, 0.5], 13),
    ("unbalanced", "logit", {"s": 5, "i": 9, "j": 3}, [-0.4, 0.9], 3, 0.6, [1.1, 0.5, 0.4, 0.3, 0.5, 0.7], 14),
    ("at_zero", "logit", {"s": 4, "i": 8, "j": 3}, [0.1], 2, 1.0, [0.8, 0.0, 0.4, 0.5, 0.0, 0.3], 15),
    ("one_judge", "probit", {"s": 5, "i": 8, "j": 1}, [0.2, 1.1], 3, 1.0, [0.7, 0.6, 0.0, 0.5, 0.0, 0.0], 16),
]


@pytest.mark.parametrize("case", GRADIENT_CASES, ids=[c[0] for c in GRADIENT_CASES])
def test_the_analytic_gradient_equals_central_differences_of_the_deviance(
    case: tuple, monkeypatch: pytest.MonkeyPatch  # type: ignore[type-arg]
) -> None:
    # The formula is the gradient at the exact mode; Newton's default stop (decrement 1e-12) leaves the modes
    # about 1e-6 off, which moves log det M, and so both sides, by up to ~5e-7 relative: modes to 1e-10 here.
    monkeypatch.setattr(likelihood, "DECREMENT", 1e-20)
    _, link, sizes, thresholds, replicates, keep, sds, seed = case
    rng = np.random.default_rng(seed)
    cells = _case_cells(sizes, thresholds, link, replicates, keep, seed)
    layout = design_terms(cells)
    cube = Cube(layout, link)
    # a random point near the truth, not the optimum (the gradient is not 0 there)
    sigma = np.array(sds) * rng.uniform(0.8, 1.2, 6)
    theta = np.array(thresholds) + rng.normal(0, 0.1, len(thresholds))
    value = laplace_deviance(cube, sigma, theta)
    analytic = np.concatenate(laplace_gradient(cube, sigma, theta, value))

    def deviance(x: np.ndarray) -> float:
        return laplace_deviance(cube, x[:6], x[6:], value.modes).deviance

    def central(x: np.ndarray, n: int, h: float) -> float:
        e = np.zeros_like(x)
        e[n] = h
        return (deviance(x + e) - deviance(x - e)) / (2 * h)

    x0 = np.concatenate([sigma, theta])
    h = 1e-3  # Richardson's extrapolation of h and h/2: truncation O(h^4), rounding about 1e-10 / h
    numeric = np.array([(4 * central(x0, n, h / 2) - central(x0, n, h)) / 3 for n in range(x0.size)])
    scale = np.maximum(np.abs(numeric), 1e-3 * np.linalg.norm(numeric))
    assert np.max(np.abs(analytic - numeric) / scale) < 1e-7, np.c_[analytic, numeric]
    # a component at 0 has gradient 0 there (the deviance is even in each SD)
    assert np.all(analytic[:6][sigma == 0] == 0)


def _one_factor(replicates: int) -> tuple[float, float, float]:
    """The Laplace deviance with sigma on systems only; the 1-D Laplace by hand; the exact integral by quad."""
    rng = np.random.default_rng(2)
    cells = simulate_latent({"s": 5, "i": 40, "j": 1}, {"s": 0.8}, np.array([0.2]), replicates=replicates, rng=rng)
    layout = design_terms(cells)
    sd, theta = 0.9, 0.2
    sigma = np.zeros(6)
    sigma[layout.slots.index("s")] = sd
    ours = laplace_deviance(Cube(layout, "logit"), sigma, np.array([theta])).deviance
    hand = exact = 0.0
    for system in range(5):
        rows = cells.system == system
        y1, n = int(cells.counts[rows, 1].sum()), int(cells.counts[rows].sum())  # P(Y=1) = expit(u - theta)

        def h(u: float, y1: int = y1, n: int = n) -> float:
            return float(y1 * np.log(special.expit(u - theta)) + (n - y1) * np.log(special.expit(theta - u))
                         + stats.norm.logpdf(u, scale=sd))

        mode = float(optimize.minimize_scalar(lambda u, h=h: -h(u)).x)
        p = special.expit(mode - theta)
        curvature = n * p * (1 - p) + 1 / sd**2
        hand += -2 * (h(mode) + 0.5 * math.log(2 * math.pi) - 0.5 * math.log(curvature))
        value, _ = integrate.quad(lambda u, m=mode, h=h: math.exp(h(u) - h(m)), -10, 10, points=[mode])
        exact += -2 * (math.log(value) + h(mode))
    return ours, hand, exact


def test_with_one_random_factor_the_deviance_is_the_hand_laplace_and_tends_to_the_integral() -> None:
    ours, hand, exact = _one_factor(3)
    assert ours == pytest.approx(hand, abs=1e-8)
    # Laplace's error is O(1/n) per system (n = 120 judgments here): small, and shrinking with n.
    assert abs(ours - exact) < 0.05
    ours4, _, exact4 = _one_factor(12)
    assert abs(ours4 - exact4) < abs(ours - exact) / 2


def test_the_dstudy_is_brennans_with_the_link_variance() -> None:
    rng = np.random.default_rng(3)
    cells = simulate_latent({"s": 6, "i": 20, "j": 3}, TRUTH, np.array([0.1]), rng=rng)
    fit = fit_latent(cells, intervals=False)
    out = latent_dstudy(fit, n_items=50, n_judges=4)
    c = fit.sigma2
    delta = c["si"] / 50 + c["sj"] / 4 + (math.pi**2 / 3) / (50 * 4 * 1)
    assert out["erho2"] == pytest.approx(c["s"] / (c["s"] + delta), rel=1e-12)
    assert out["mdd95"] == pytest.approx(1.959963984540054 * math.sqrt(2 * delta), rel=1e-12)
    assert out["sigma2"]["r:sij"] == pytest.approx(math.pi**2 / 3)
    assert link_variance("probit") == 1.0


def test_the_score_slope_is_the_derivative_of_the_expected_score() -> None:
    theta = np.array([-1.0, 0.3, 1.5])
    tau2 = 0.7
    values = np.array([1.0, 2.0, 4.0, 7.0])
    closed = np.sum(np.diff(values) * stats.norm.pdf(theta / math.sqrt(1 + tau2)) / math.sqrt(1 + tau2))
    assert float(score_slope(theta, tau2, "probit", values)) == pytest.approx(closed, rel=1e-10)

    def expected(u: float) -> float:  # E over eta' ~ N(0, tau2) of the expected score, by quad
        def score(e: float) -> float:
            cum = np.concatenate([[0.0], special.expit(theta - u - e), [1.0]])
            return float(values @ np.diff(cum)) * stats.norm.pdf(e, scale=math.sqrt(tau2))
        return integrate.quad(score, -12, 12)[0]

    fd = (expected(1e-4) - expected(-1e-4)) / 2e-4
    assert float(score_slope(theta, tau2, "logit", values)) == pytest.approx(fd, rel=1e-6)


def test_a_component_at_zero_is_on_its_boundary() -> None:
    rng = np.random.default_rng(4)
    cells = simulate_latent({"s": 6, "i": 30, "j": 3}, {"s": 0.5, "i": 1.0}, np.array([0.0]), rng=rng)
    fit = fit_latent(cells)
    assert fit.boundary  # some of j, si, sj, ij estimated at 0
    for term in fit.boundary:
        assert fit.sigma2[term] == 0.0
        assert fit.ci_sigma2[term][0] == 0.0
    assert all(np.isfinite(v) and v >= 0 for v in fit.sigma2.values())


def test_one_judge_gives_s_x_i_and_bad_input_is_refused() -> None:
    rng = np.random.default_rng(5)
    one = simulate_latent({"s": 5, "i": 10, "j": 1}, {"s": 0.5, "i": 0.5}, np.array([0.0]), rng=rng)
    assert set(design_terms(one).fitted) == {"s", "i"}  # s:i is the cell: confounded without replicates
    with pytest.raises(DesignError, match="link"):
        fit_latent(one, link="cloglog")
    with pytest.raises(DesignError, match="system"):
        fit_latent(LatentCells(np.zeros(3, int), np.arange(3), np.zeros(3, int), np.ones((3, 2), int)))


# Simulation: an s x i design with 10 judgments per cell (three components), small enough for 24 fits.
# With 3 judgments per cell the Laplace estimate of sigma2_si is biased low (0.28 for 0.40 over 40 fits,
# as clmm's would be: the same approximation; Breslow and Lin 1995): the clusters must not be tiny.
SIM_TRUTH = {"s": 0.5, "i": 0.8, "si": 0.4}
SIM_FITS = 24
SIM_SIZES = {"s": 8, "i": 16, "j": 1}
SIM_REPLICATES = 10


def test_simulation_bias_and_wald_coverage() -> None:
    rng = np.random.default_rng(2026)
    est: dict[str, list[float]] = {t: [] for t in SIM_TRUTH}
    cover = dict.fromkeys(SIM_TRUTH, 0)
    erho2 = []
    for _ in range(SIM_FITS):
        cells = simulate_latent(SIM_SIZES, SIM_TRUTH, np.array([-0.3, 0.7]), replicates=SIM_REPLICATES, rng=rng)
        fit = fit_latent(cells)
        for t, v in SIM_TRUTH.items():
            est[t].append(fit.sigma2[t])
            lo, hi = fit.ci_sigma2[t]
            cover[t] += int(lo <= v <= hi)
        erho2.append(latent_dstudy(fit, n_items=16, n_replicates=SIM_REPLICATES)["erho2"])
    # sigma2_s and sigma2_i from 8 and 16 levels are ML estimates (biased low by about 1/n) and noisy:
    # only the interaction's mean, estimated from 128 cells, is held to its truth.
    mean, se = np.mean(est["si"]), np.std(est["si"], ddof=1) / math.sqrt(SIM_FITS)
    assert abs(mean - SIM_TRUTH["si"]) < 3 * se + 0.05 * SIM_TRUTH["si"], (mean, se)
    # Coverage of the log-SD Wald intervals, within 3 Monte Carlo SEs of 95 % (a weak check at 24 fits).
    mc = 3 * math.sqrt(0.95 * 0.05 / SIM_FITS)
    for t in ("i", "si"):
        assert cover[t] / SIM_FITS >= 0.95 - mc, (t, cover[t])
    delta = SIM_TRUTH["si"] / 16 + (math.pi**2 / 3) / (16 * SIM_REPLICATES)
    truth = SIM_TRUTH["s"] / (SIM_TRUTH["s"] + delta)
    assert abs(np.median(erho2) - truth) < 0.05, (np.median(erho2), truth)


def test_the_laplace_weights_stay_non_negative_in_far_tails() -> None:
    # A cumulative logit is log-concave in eta, so minus the second derivative of a cell's log-likelihood
    # is >= 0; in far tails rounding made it negative, the Laplace matrix indefinite, and a 10-category
    # fit of simulated 1-10 ratings (2 ratings of 1 in 2,880) failed with LinAlgError. These thresholds
    # are that fit's.
    from jurymeter.stats.latent.likelihood import cell_derivatives

    theta = np.array([-12.91, -11.37, -9.41, -7.23, -4.79, -2.46, -0.07, 2.52, 5.04])
    eta = np.linspace(-60.0, 60.0, 241)
    for category in range(theta.size + 1):
        counts = np.zeros((eta.size, theta.size + 1))
        counts[:, category] = 1.0
        _, _, weights = cell_derivatives(eta, theta, counts, "logit")
        assert np.all(weights >= 0), category


def test_the_binary_logit_cells_equal_the_general_cumulative_formulas_and_differences() -> None:
    # The binary logit has closed-form cell formulas (a speed path). References: (1) the general K-category
    # cumulant formulas, reached with a third, empty category above a threshold at +45 (its probability
    # e^-45 of the second's changes nothing at double precision); (2) central differences of the
    # log-likelihood written out from its definition, n0 log F(theta - eta) + n1 log(1 - F(theta - eta)).
    from jurymeter.stats.latent.likelihood import cell_higher_derivatives

    rng = np.random.default_rng(7)
    eta = rng.uniform(-6.0, 6.0, 200)
    counts = rng.integers(0, 5, (200, 2)).astype(float)
    theta = np.array([0.4])
    loglik, g, w = cell_derivatives(eta, theta, counts, "logit")
    wide = np.column_stack([counts, np.zeros(200)])
    general = cell_derivatives(eta, np.array([0.4, 45.0]), wide, "logit")
    assert loglik == pytest.approx(general[0], rel=1e-13)
    np.testing.assert_allclose(g, general[1], rtol=1e-11, atol=1e-12)
    np.testing.assert_allclose(w, general[2], rtol=1e-11, atol=1e-12)
    fast = cell_higher_derivatives(eta, theta, counts, "logit")
    slow = cell_higher_derivatives(eta, np.array([0.4, 45.0]), wide, "logit")
    np.testing.assert_allclose(fast.w_eta, slow.w_eta, rtol=1e-10, atol=1e-12)
    for name in ("l_theta", "g_theta", "w_theta"):
        np.testing.assert_allclose(getattr(fast, name)[:, 0], getattr(slow, name)[:, 0], rtol=1e-10, atol=1e-12)

    def cell_loglik(e: np.ndarray, t: float) -> np.ndarray:
        f = 1.0 / (1.0 + np.exp(-(t - e)))
        return counts[:, 0] * np.log(f) + counts[:, 1] * np.log(1.0 - f)

    h = 1e-4
    np.testing.assert_allclose(g, (cell_loglik(eta + h, 0.4) - cell_loglik(eta - h, 0.4)) / (2 * h), rtol=1e-6, atol=1e-7)
    h2 = 1e-3  # a second difference's rounding grows as 1/h^2
    second = (cell_loglik(eta + h2, 0.4) - 2 * cell_loglik(eta, 0.4) + cell_loglik(eta - h2, 0.4)) / h2**2
    np.testing.assert_allclose(w, -second, rtol=1e-5, atol=1e-6)
    d_theta = (cell_loglik(eta, 0.4 + h) - cell_loglik(eta, 0.4 - h)) / (2 * h)
    np.testing.assert_allclose(fast.l_theta[:, 0], d_theta, rtol=1e-6, atol=1e-7)
