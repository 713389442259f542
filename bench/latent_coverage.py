"""Bias and Wald coverage of the latent fit over many simulated data sets (issue 26, point 3).

The design of ``tests/test_latent_gstudy.py::test_simulation_bias_and_wald_coverage``
(8 systems x 16 items x one judge, 10 judgments per cell, three ordinal categories,
sigma2 s 0.5, i 0.8, si 0.4), ``--fits`` times (the test does 24), or another
``--judgments`` per cell. Prints each component's mean, its Monte Carlo SE and the
95 % Wald intervals' coverage with its binomial SE.

    OPENBLAS_NUM_THREADS=1 .venv/bin/python bench/latent_coverage.py --fits 100
"""

from __future__ import annotations

import argparse
import math
import time

import numpy as np

from jurymeter.stats.latent import fit_latent, simulate_latent

TRUTH = {"s": 0.5, "i": 0.8, "si": 0.4}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--fits", type=int, default=100)
    ap.add_argument("--judgments", type=int, default=10)
    ap.add_argument("--seed", type=int, default=7)
    args = ap.parse_args()
    rng = np.random.default_rng(args.seed)
    est = {t: [] for t in TRUTH}
    cover = dict.fromkeys(TRUTH, 0)
    cpu0 = time.process_time()
    for _ in range(args.fits):
        cells = simulate_latent({"s": 8, "i": 16, "j": 1}, TRUTH, np.array([-0.3, 0.7]), replicates=args.judgments,
                                rng=rng)
        fit = fit_latent(cells)
        for t, v in TRUTH.items():
            est[t].append(fit.sigma2[t])
            lo, hi = fit.ci_sigma2[t]
            cover[t] += int(lo <= v <= hi)
    print(f"{args.fits} fits, {args.judgments} judgments per cell, {time.process_time() - cpu0:.0f} CPU-s")
    print("| component | truth | mean | MC SE | coverage | binomial SE |")
    print("|---|---:|---:|---:|---:|---:|")
    for t, v in TRUTH.items():
        c = cover[t] / args.fits
        print(f"| sigma2_{t} | {v} | {np.mean(est[t]):.3f} | {np.std(est[t], ddof=1) / math.sqrt(args.fits):.3f} "
              f"| {c:.2f} | {math.sqrt(c * (1 - c) / args.fits):.3f} |")


if __name__ == "__main__":
    main()
