r"""The directions of [LiDing2026] tables 1 and 2 by simulation with known truth (slow).

A small version of ``bench/sequential_study.py`` (whose full-size numbers are in
``bench/RESULTS.md``), checking directions with modest sizes, all seeded:

- group comparison under equal mean quality (group A spread wide, B narrow, V = 10
  split 5 / 5, 5-point ordinal ratings, lag-1 truth): the naive contrast's Wald
  test rejects clearly more than 5% at the larger N and more than at the smaller
  N; the GLMM contrast (batch-bootstrap SE) rejects at most 15% at N = 40
  (40 replicates, B = 20: the band is wide because the replicates are few) and names
  group A about half the time;
- top-1 selection under an uneven position profile (V = 6, N = 6): the naive
  average picks the best item more often under a Williams order than under
  random orders.

The truth is the simulator's parameters; the reference for "nominal" is the 5%
level of a valid test.
"""

from __future__ import annotations

import math

import numpy as np
import polars as pl
import pytest

from jurymeter.stats.sequential import bootstrap_fits, fit_sequential_glmm, simulate_sequential
from jurymeter.stats.sequential.compare import compare_groups, naive_group_contrast
from jurymeter.stats.sequential.plans import batch_plan

pytestmark = pytest.mark.slow

CUTS = (-0.5, 1.0, 2.5, 4.0)
RHO = (0.15,)
V = 10
Q = np.linspace(-1, 1, V // 2) / np.linspace(-1, 1, V // 2).std()  # mean 0, sd 1
THETA = np.r_[-0.5 + 1.3 * Q, -0.5 + 0.3 * Q]  # equal group means, unequal spread
UNITS = [f"u{i:02d}" for i in range(V)]
A, B = UNITS[: V // 2], UNITS[V // 2 :]


def _orders(v: int, n: int, design: str, seed: int) -> np.ndarray:
    plan = batch_plan([f"{i:02d}" for i in range(v)], n, ["j"], design=design, seed=seed)  # type: ignore[arg-type]
    return plan["item_id"].cast(pl.Int64).to_numpy().reshape(n, v)


def _records(n: int, rep: int) -> pl.DataFrame:
    orders = _orders(V, n, "random", seed=1000 * n + rep)
    return simulate_sequential(
        THETA, orders, rng=np.random.default_rng([n, rep]), rho=RHO, batch_sd=0.5, cutpoints=CUTS
    )


def test_equal_means_naive_inflates_glmm_nominal() -> None:
    assert abs(THETA[: V // 2].mean() - THETA[V // 2 :].mean()) < 1e-12
    reps = 60
    rate = {}
    for n in (20, 160):
        rejects = [
            naive_group_contrast(_records(n, r), A, B, n_boot=200, seed=r).p_value
            for r in range(reps)
        ]
        rate[n] = float(np.mean([p is not None and p < 0.05 for p in rejects]))
    # 60 replicates: Monte Carlo SE <= 6.5 points.
    assert rate[160] > 0.2
    assert rate[160] > rate[20]

    glmm_rejects = 0
    glmm_signs = 0
    tested = 40
    for r in range(tested):
        records = _records(40, r)
        fit = fit_sequential_glmm(records, lags=1)
        boot = bootstrap_fits(records, fit, n_boot=20, seed=r)
        cmp = compare_groups(records, fit, boot, A, B, n_boot=100, seed=r)
        assert cmp.model.p_value is not None
        glmm_rejects += cmp.model.p_value < 0.05
        glmm_signs += cmp.model.estimate > 0
    assert glmm_rejects / tested <= 0.15
    # The model names A about half the time (binomial 40, p = 1/2: 10..30 holds with prob. > 0.99).
    assert 10 <= glmm_signs <= 30


def test_williams_raises_naive_top1_under_uneven_profile() -> None:
    n, reps = 6, 1500
    theta = np.r_[2.8 / math.sqrt(n), np.zeros(5)]
    profile = (1.5, 0.9, 0.3, -0.3, -0.9, -1.5)
    acc = {}
    for design in ("random", "williams"):
        hits = []
        for r in range(reps):
            orders = _orders(6, n, design, seed=r)
            rec = simulate_sequential(
                theta,
                orders,
                rng=np.random.default_rng([7, r]),
                position_effects=profile,
                rho=RHO,
                batch_sd=0.5,
                cutpoints=CUTS,
            )
            means = (
                rec.group_by("item_id")
                .agg(pl.col("score").mean())
                .sort("item_id")["score"]
                .to_numpy()
            )
            best = np.flatnonzero(means == means.max())
            hits.append(1.0 / best.size if 0 in best else 0.0)
        acc[design] = (float(np.mean(hits)), float(np.var(hits, ddof=1) / reps))
    gain = acc["williams"][0] - acc["random"][0]
    se = math.sqrt(acc["williams"][1] + acc["random"][1])
    assert gain > 2.0 * se, (acc, gain, se)
