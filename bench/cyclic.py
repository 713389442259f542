"""CyclicJudge benchmark: decomposition and the 5,000-repetition subsampling check.

The MT-Bench shape of paper ``cyclicjudge`` (5 systems x 80 scenarios x 10
generations x 5 judges), scores simulated from components of the size of its
table 2. Times, in one run:

1. ``fit_cyclic`` for every system (decomposition, offsets, F-test, strategies);
2. ``subsample_strategy_variance`` with 5,000 repetitions at 5 budget levels for
   every system, in this process;
3. the same check spread over a Dask LocalCluster with 2 worker processes
   (``jurymeter.orchestration.cyclic_check.subsampling_check``), cluster start-up timed apart.

Goal: under 5 s in all on 2 cores. Appends a section to ``bench/RESULTS.md``.

Command: ``.venv/bin/python bench/cyclic.py``
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import platform
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from jurymeter.orchestration.cyclic_check import subsampling_check  # noqa: E402
from jurymeter.stats.cyclic import fit_cyclic  # noqa: E402

RESULTS = ROOT / "bench" / "RESULTS.md"


def simulate(systems: int, scenarios: int, generations: int, judges: int, seed: int) -> dict[str, np.ndarray]:
    """x[scenario, generation, judge] per system from eq. 1 with MT-Bench-sized components."""
    rng = np.random.default_rng(seed)
    judge_offsets = rng.normal(scale=np.sqrt(0.95), size=judges)
    cubes = {}
    for s in range(systems):
        alpha = rng.normal(scale=np.sqrt(1.5), size=(scenarios, 1, 1))
        beta = rng.normal(scale=np.sqrt(0.27), size=(scenarios, generations, 1))
        eps = rng.normal(scale=np.sqrt(1.49), size=(scenarios, generations, judges))
        cubes[f"sys-{s}"] = 7.0 + alpha + beta + judge_offsets[None, None, :] + eps
    return cubes


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--systems", type=int, default=5)
    parser.add_argument("--scenarios", type=int, default=80)
    parser.add_argument("--generations", type=int, default=10)
    parser.add_argument("--judges", type=int, default=5)
    parser.add_argument("--reps", type=int, default=5000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--no-append", action="store_true")
    args = parser.parse_args()
    cubes = simulate(args.systems, args.scenarios, args.generations, args.judges, args.seed)
    budgets = [args.judges * k for k in (1, 2, 4, 6, args.generations)]

    t0 = time.perf_counter()
    fits = {sid: fit_cyclic(x, budgets=budgets) for sid, x in cubes.items()}
    t_fit = time.perf_counter() - t0

    t0 = time.perf_counter()
    local = subsampling_check(cubes, budgets, reps=args.reps, seed=args.seed)
    t_local = time.perf_counter() - t0

    from distributed import Client, LocalCluster

    t0 = time.perf_counter()
    cluster = LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None)
    client = Client(cluster)
    # Workers import jurymeter (polars, scipy) on first use: part of start-up, not of the check.
    client.run(lambda: __import__("jurymeter.stats.cyclic"))
    t_start = time.perf_counter() - t0
    t0 = time.perf_counter()
    remote = subsampling_check(cubes, budgets, reps=args.reps, seed=args.seed, client=client)
    t_dask = time.perf_counter() - t0
    client.close()
    cluster.close()
    same = remote.equals(local)

    worst = float((abs(local["empirical"] - local["predicted"]) / local["se"]).max())
    total_local = t_fit + t_local
    total_dask = t_fit + t_dask
    lines = [
        f"## CyclicJudge: decomposition and 5,000-repetition check ({dt.datetime.now(dt.UTC):%Y-%m-%d %H:%M} UTC)",
        "",
        f"Command: `.venv/bin/python bench/cyclic.py{' ' + ' '.join(sys.argv[1:]) if sys.argv[1:] else ''}`",
        "",
        f"- machine: {os.cpu_count()} CPUs, Python {platform.python_version()}, load average {os.getloadavg()[0]:.2f}",
        f"- data: {args.systems} systems x {args.scenarios} scenarios x {args.generations} generations x "
        f"{args.judges} judges (simulated, MT-Bench-sized components); budgets {budgets}; {args.reps:,} repetitions each",
        "",
        "| step | time (s) |",
        "|---|---:|",
        f"| `fit_cyclic`, all {args.systems} systems | {t_fit:.3f} |",
        f"| subsampling check, {len(cubes) * len(budgets)} (system, budget) jobs, one process | {t_local:.3f} |",
        f"| the same on a LocalCluster of 2 worker processes (start-up and worker imports, {t_start:.2f} s, not included) | {t_dask:.3f} |",
        f"| **total, one process** | **{total_local:.3f}** |",
        f"| **total, Dask** | **{total_dask:.3f}** |",
        "",
        f"- goal < 5 s: one process **{'met' if total_local < 5 else 'missed'}**, Dask **{'met' if total_dask < 5 else 'missed'}**",
        f"- Dask result identical to the local loop: {same}",
        f"- largest |empirical - predicted| / SE over all jobs and strategies: {worst:.2f}",
        f"- A vs B winner per system: {', '.join(f'{k} {f.strategies.winner_ab}' for k, f in fits.items())}",
        "",
    ]
    text = "\n".join(lines)
    print(text)
    if not args.no_append:
        with RESULTS.open("a") as handle:
            handle.write("\n" + text)


if __name__ == "__main__":
    main()
