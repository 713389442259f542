"""Per-judge offsets of the G-study (stats/judge_effects.py through stats/reliability.py's two reports).

References: plain loops over a hand-built array (judge mean minus grand mean) and the
variance formula written out by hand from the fitted components; numpy least squares on
an explicit design matrix of (system, item) cell dummies and sum-to-zero judge effects
for the incomplete-data estimator, and its covariance from explicit dense incidence
matrices (no sparse algebra); simulation with a known offset added to every score of
each judge (bias, interval coverage) on balanced and on incomplete designs.
"""

from __future__ import annotations

import itertools
import math

import numpy as np
import polars as pl
import pytest

from jurymeter.stats.blocks import BalancedBlock
from jurymeter.stats.design import Design
from jurymeter.stats.gstudy import fit_gstudy
from jurymeter.stats.henderson import henderson1
from jurymeter.stats.judge_effects import balanced_offsets, incomplete_offsets
from jurymeter.stats.reliability import (
    GStudyRequest,
    assess_block,
    henderson_cells,
    henderson_report,
)

REQUEST = GStudyRequest(item_set="sim", n_boot=2, fpr_simulations=0, ensembles=(), splits=2)
OFFSETS = np.array([0.6, -0.5, 0.1, 0.0, -0.2])
SD = {"s": 0.6, "i": 0.5, "j": 0.0, "si": 0.7, "sj": 0.3, "ij": 0.25, "e": 0.9}


def _draw(rng: np.random.Generator, n_s: int, n_i: int, judges: np.ndarray, replicates: int = 1) -> np.ndarray:
    """s x i x j (x r) scores: random system, item and interaction effects, the judges' known offsets."""
    n_j = len(judges)
    x = (
        SD["s"] * rng.normal(size=(n_s, 1, 1)) + SD["i"] * rng.normal(size=(1, n_i, 1)) + judges[None, None, :]
        + SD["si"] * rng.normal(size=(n_s, n_i, 1)) + SD["sj"] * rng.normal(size=(n_s, 1, n_j))
        + SD["ij"] * rng.normal(size=(1, n_i, n_j))
    )
    return x[..., None] + SD["e"] * rng.normal(size=(n_s, n_i, n_j, replicates))


def _block(x: np.ndarray) -> BalancedBlock:
    n_s, n_i, n_j, n_r = x.shape
    spec = "s x i x j x r:sij" if n_r > 1 else "s x i x j"
    return BalancedBlock(
        x=x if n_r > 1 else x[..., 0], design=Design.parse(spec), systems=tuple(f"s{k:02d}" for k in range(n_s)),
        items=tuple(f"i{k:03d}" for k in range(n_i)), judges=tuple(f"j{k}" for k in range(n_j)),
        n_replicates=n_r, n_generations=1, completeness=1.0, records_in=x.size, observations_used=x.size,
    )


def _records(x: np.ndarray, keep: np.ndarray | None = None) -> pl.DataFrame:
    """The array as records; ``keep`` (s, i, j) marks the cells kept."""
    rows = []
    for s, i, j, r in itertools.product(*(range(n) for n in x.shape)):
        if keep is None or keep[s, i, j]:
            rows.append((f"s{s:02d}", f"i{i:03d}", f"j{j}", r, float(x[s, i, j, r])))
    return pl.DataFrame(rows, schema=["system_id", "item_id", "judge_id", "replicate", "score"], orient="row")


def _by_judge(report: dict) -> dict[str, dict]:
    return {row["judge_id"]: row for row in report["judge_offsets"]}


def test_balanced_offsets_equal_loops_and_the_written_variance() -> None:
    x = np.arange(3 * 4 * 3, dtype=float).reshape(3, 4, 3) ** 1.3 % 7.0  # hand-built, uneven
    report = assess_block(_block(x[..., None]), REQUEST)
    grand = sum(x[s, i, j] for s in range(3) for i in range(4) for j in range(3)) / 36
    comp = {name: max(c["raw"], 0.0) for name, c in report["components"].items()}
    # s x i x j: (1 - 1/3) (sigma2_sj / 3 + sigma2_ij / 4 + sigma2_sij / 12), written out
    var = (1 - 1 / 3) * (comp["sigma2_sj"] / 3 + comp["sigma2_ij"] / 4 + comp["sigma2_sij"] / 12)
    for j in range(3):
        mean_j = sum(x[s, i, j] for s in range(3) for i in range(4)) / 12
        row = _by_judge(report)[f"j{j}"]
        assert row["offset"] == pytest.approx(mean_j - grand, abs=1e-12)
        assert row["se"] == pytest.approx(math.sqrt(var), rel=1e-12)


def test_balanced_intervals_take_t_with_satterthwaite_df_written_out() -> None:
    """s x i x j with every component positive: V = (1 - 1/n_j)(MS_sj + MS_ij - MS_sij) / (n_s n_i), so
    Satterthwaite's df is (MS_sj + MS_ij - MS_sij)^2 / (MS_sj^2/df_sj + MS_ij^2/df_ij + MS_sij^2/df_sij)."""
    from scipy.stats import t

    rng = np.random.default_rng(11)
    x = _draw(rng, 6, 12, OFFSETS[:4], replicates=1)[..., 0]
    report = assess_block(_block(x[..., None]), REQUEST)
    c = report["components"]
    assert all(c[name]["raw"] > 0 for name in ("sigma2_sj", "sigma2_ij", "sigma2_sij"))
    ms = {name: c[name]["ms"] for name in ("sigma2_sj", "sigma2_ij", "sigma2_sij")}
    df = {name: c[name]["df"] for name in ("sigma2_sj", "sigma2_ij", "sigma2_sij")}
    combo = ms["sigma2_sj"] + ms["sigma2_ij"] - ms["sigma2_sij"]
    nu = combo**2 / sum(ms[k] ** 2 / df[k] for k in ms)
    assert df == {"sigma2_sj": 15, "sigma2_ij": 33, "sigma2_sij": 165}
    for row in report["judge_offsets"]:
        assert row["se"] == pytest.approx(math.sqrt((1 - 1 / 4) * combo / (6 * 12)), rel=1e-10)
        assert row["high"] - row["offset"] == pytest.approx(t.ppf(0.975, nu) * row["se"], rel=1e-10)
        assert row["offset"] - row["low"] == pytest.approx(t.ppf(0.975, nu) * row["se"], rel=1e-10)


def test_incomplete_offsets_equal_least_squares_and_the_dense_covariance() -> None:
    rng = np.random.default_rng(5)
    n_s, n_i, n_j = 4, 6, 3
    x = _draw(rng, n_s, n_i, OFFSETS[:n_j], replicates=2)
    keep = rng.random((n_s, n_i, n_j)) < 0.7
    keep[:, :, 0] = True  # every cell has a judge: j0 links the others
    report = henderson_report(henderson_cells(_records(x, keep), REQUEST), REQUEST)
    cells = [(s, i, j) for s, i, j in itertools.product(range(n_s), range(n_i), range(n_j)) if keep[s, i, j]]
    y = np.array([x[s, i, j].mean() for s, i, j in cells])
    si = sorted({(s, i) for s, i, _ in cells})
    # design: one dummy per (system, item) cell, judges coded sum-to-zero (the last = minus the others)
    a = np.zeros((len(cells), len(si) + n_j - 1))
    for row, (s, i, j) in enumerate(cells):
        a[row, si.index((s, i))] = 1.0
        if j < n_j - 1:
            a[row, len(si) + j] = 1.0
        else:
            a[row, len(si):] = -1.0
    coef = np.linalg.lstsq(a, y, rcond=None)[0]
    b = np.r_[coef[len(si):], -coef[len(si):].sum()]
    got = _by_judge(report)
    for j in range(n_j):
        assert got[f"j{j}"]["offset"] == pytest.approx(b[j], abs=1e-10)
    # Covariance of the least-squares judge effects given the judges: (A'A)^- A' Sigma A (A'A)^-, with Sigma
    # built cell by cell from the fitted components (sj and ij shared across cells, the rest per cell / 2 runs).
    comp = {name: max(c["raw"], 0.0) for name, c in report["components"].items()}
    sigma = np.zeros((len(cells), len(cells)))
    for p, (s1, i1, j1) in enumerate(cells):
        for q, (s2, i2, j2) in enumerate(cells):
            sigma[p, q] = (comp["sigma2_sj"] * (s1 == s2 and j1 == j2) + comp["sigma2_ij"] * (i1 == i2 and j1 == j2)
                           + (comp["sigma2_sij"] + comp["sigma2_r_sij"] / 2) * (p == q))
    solve = np.linalg.pinv(a.T @ a) @ a.T
    cov_free = solve @ sigma @ solve.T
    back = np.vstack([np.eye(n_j - 1), -np.ones((1, n_j - 1))])  # free judge coefficients -> all n_j offsets
    cov = back @ cov_free[len(si):, len(si):] @ back.T
    for j in range(n_j):
        assert got[f"j{j}"]["se"] == pytest.approx(math.sqrt(cov[j, j]), rel=1e-8)


def _coverage(estimates: list[np.ndarray], lows: list[np.ndarray], highs: list[np.ndarray], truth: np.ndarray) -> tuple[float, float, float, float]:
    est, lo, hi = np.array(estimates), np.array(lows), np.array(highs)
    bias = est.mean(axis=0) - truth
    bias_se = est.std(axis=0, ddof=1) / math.sqrt(len(est))
    per_rep = ((lo <= truth) & (truth <= hi)).mean(axis=1)
    return float(np.abs(bias / bias_se).max()), float(per_rep.mean()), float(per_rep.std(ddof=1) / math.sqrt(len(per_rep))), float(np.abs(bias).max())


def _rows(report: dict, n_j: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    got = _by_judge(report)
    return tuple(np.array([got[f"j{j}"][k] for j in range(n_j)]) for k in ("offset", "low", "high"))  # type: ignore[return-value]


def _balanced_offsets(block: BalancedBlock) -> dict:
    """The report's ``judge_offsets`` without the rest of the report: the G-study fit and ``balanced_offsets``."""
    fit = fit_gstudy(block.x, block.design)
    judge_axis = block.design.facets.index("j")
    judge_means = block.x.mean(axis=tuple(a for a in range(block.x.ndim) if a != judge_axis))
    return {"judge_offsets": balanced_offsets(
        block.judges, judge_means, block.design, fit.sizes, dict(zip(block.design.effects, fit.sigma2.tolist(),
                                                                     strict=True)), mean_squares=(fit.ms, fit.df),
    )}


@pytest.mark.parametrize("replicates", [1, 2])
def test_balanced_offsets_are_unbiased_and_their_intervals_cover(replicates: int) -> None:
    rng = np.random.default_rng(40 + replicates)
    truth = OFFSETS - OFFSETS.mean()
    est, lows, highs = [], [], []
    for rep in range(300):
        block = _block(_draw(rng, 10, 30, OFFSETS, replicates))
        report = _balanced_offsets(block)  # a whole report per data set took 0.1 CPU-s, mostly the D-study's
        if rep == 0:  # the report's offsets are these
            whole = _rows(assess_block(block, REQUEST), len(OFFSETS))
            for mine, theirs in zip(_rows(report, len(OFFSETS)), whole, strict=True):
                np.testing.assert_allclose(mine, theirs, rtol=1e-12, atol=1e-12)
        o, lo, hi = _rows(report, len(OFFSETS))
        est.append(o)
        lows.append(lo)
        highs.append(hi)
    z_bias, rate, se, bias = _coverage(est, lows, highs, truth)
    print(f"balanced r={replicates}: max |bias| {bias:.4f} ({z_bias:.2f} SE), coverage {rate:.3f} (MC SE {se:.3f})")
    assert z_bias < 3.5  # five judges: the largest of five |z| stays under 3.5 nearly always
    assert abs(rate - 0.95) < 3 * se


def _incomplete_offsets(records: pl.DataFrame, x: np.ndarray, keep: np.ndarray) -> dict:
    """The Henderson report's ``judge_offsets`` without the rest of the report: Henderson I's components and
    ``incomplete_offsets`` on the kept cells (each the mean of its replicates)."""
    fit = henderson1(records, "s x i x j x r:sij")
    s, i, j = np.nonzero(keep)
    rows, _ = incomplete_offsets(
        [f"j{k}" for k in range(x.shape[2])], s, i, j, x[s, i, j].mean(axis=-1), fit.design,
        dict(zip(fit.design.effects, fit.sigma2.tolist(), strict=True)),
        generations=np.ones(len(s), dtype=np.int64), rows=np.full(len(s), x.shape[3]),
    )
    return {"judge_offsets": rows}


def test_incomplete_offsets_are_unbiased_and_their_intervals_cover() -> None:
    rng = np.random.default_rng(77)
    truth = OFFSETS - OFFSETS.mean()
    n_s, n_i, n_j = 10, 30, len(OFFSETS)
    est, lows, highs = [], [], []
    for rep in range(200):
        x = _draw(rng, n_s, n_i, OFFSETS, replicates=2)
        # cells missing at random, more often for the lenient judge on the weaker systems (so a raw
        # mean would be biased); every (system, item) keeps at least one judge
        p_keep = np.full((n_s, n_i, n_j), 0.75)
        p_keep[: n_s // 2, :, 0] = 0.35
        keep = rng.random((n_s, n_i, n_j)) < p_keep
        keep[:, :, 3] |= ~keep.any(axis=2)
        records = _records(x, keep)
        report = _incomplete_offsets(records, x, keep)  # a whole report per data set took 0.11 CPU-s
        if rep == 0:  # the report's offsets are these
            whole = henderson_report(henderson_cells(records, REQUEST), REQUEST)
            assert whole["estimator"] == "henderson"
            for mine, theirs in zip(_rows(report, n_j), _rows(whole, n_j), strict=True):
                np.testing.assert_allclose(mine, theirs, rtol=1e-12, atol=1e-12)
        o, lo, hi = _rows(report, n_j)
        est.append(o)
        lows.append(lo)
        highs.append(hi)
    z_bias, rate, se, bias = _coverage(est, lows, highs, truth)
    print(f"incomplete: max |bias| {bias:.4f} ({z_bias:.2f} SE), coverage {rate:.3f} (MC SE {se:.3f})")
    assert z_bias < 3.5
    assert abs(rate - 0.95) < 3 * se


def test_one_judge_has_no_offsets_and_says_why() -> None:
    rng = np.random.default_rng(3)
    x = _draw(rng, 5, 8, OFFSETS[:1], replicates=2)
    block = BalancedBlock(
        x=x, design=Design.parse("s x i x j x r:sij"), systems=tuple(f"s{k:02d}" for k in range(5)),
        items=tuple(f"i{k:03d}" for k in range(8)), judges=("j0",), n_replicates=2, n_generations=1,
        completeness=1.0, records_in=x.size, observations_used=x.size,
    )
    for report in (assess_block(block, REQUEST), henderson_report(henderson_cells(_records(x), REQUEST), REQUEST)):
        assert report["judge_offsets"] == []
        assert "one judge (j0)" in report["null_reasons"]["judge_offsets"]
