"""Latent-scale G-study (issue 26, point 3): our Laplace fit against lme4::glmer, and on 10M records.

1. ``--systems x --items x --judges`` binary cells (default 20 x 500 x 5 = 50,000 rows), one
   judgment each: ``fit_latent`` timed here, then ``lme4::glmer(binomial, nAGQ = 1)`` on the same
   rows through ``Rscript`` (``tests/r/latent_reference.R``, timed inside R around the fit, and
   its wall including R's start). Goal: >= 100x faster at equal answers.
2. ``--records`` judgments (default 10,000,000) on the same cells (``records / cells`` replicates
   each): drawn as one row per judgment, aggregated to cells (``LatentCells.from_records``), fitted.
   Goal: < 60 s on 2 cores.
3. ``--large-items``: a design with many more cells (the exact fit's cost grows with the cells'
   cube, not the records), to say what bounds it.

Times are wall and CPU (this process: ``time.process_time``, every thread) around each step, with
the CPU-seconds the rest of the machine used meanwhile (a shared machine slows a step down).

    OPENBLAS_NUM_THREADS=1 .venv/bin/python bench/latent.py   # appends to bench/RESULTS.md
    .venv/bin/python bench/latent.py --no-append --no-r   # ours only
"""

from __future__ import annotations

import argparse
import csv
import json
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).parent))
from _common import append_results, busy_cpu_seconds, command_line, facts_block, machine_facts
from jurymeter.stats.latent import LatentCells, fit_latent, simulate_latent

ROOT = Path(__file__).resolve().parents[1]
TRUTH = {"s": 0.5, "i": 1.0, "j": 0.2, "si": 0.4, "sj": 0.1, "ij": 0.3}


def timed(fn, *args, **kwargs):  # type: ignore[no-untyped-def]
    busy0, wall0, cpu0 = busy_cpu_seconds(), time.perf_counter(), time.process_time()
    out = fn(*args, **kwargs)
    wall, cpu = time.perf_counter() - wall0, time.process_time() - cpu0
    other = max(busy_cpu_seconds() - busy0 - cpu, 0.0)
    return out, wall, cpu, other


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--systems", type=int, default=20)
    ap.add_argument("--items", type=int, default=500)
    ap.add_argument("--judges", type=int, default=5)
    ap.add_argument("--records", type=int, default=10_000_000)
    ap.add_argument("--large-items", type=int, default=0)
    ap.add_argument("--no-r", action="store_true")
    ap.add_argument("--no-append", action="store_true")
    args = ap.parse_args()
    facts = machine_facts()
    rng = np.random.default_rng(26)
    sizes = {"s": args.systems, "i": args.items, "j": args.judges}
    cells = simulate_latent(sizes, TRUTH, np.array([0.2]), rng=rng)
    rows = []
    fit, wall, cpu, other = timed(fit_latent, cells, intervals=False)
    rows.append((f"fit_latent, {cells.counts.shape[0]} cells x 1 judgment", wall, cpu, other,
                 f"{fit.evaluations} deviance evaluations, {fit.iterations} L-BFGS-B iterations"))
    fit_ci, wall_ci, cpu_ci, other_ci = timed(fit_latent, cells, intervals=True)
    rows.append(("fit_latent with Wald intervals (numerical Hessian)", wall_ci, cpu_ci, other_ci,
                 f"{fit_ci.evaluations} evaluations"))
    lines = []
    if not args.no_r:
        with tempfile.TemporaryDirectory() as tmp:
            d, c, o = Path(tmp) / "d.csv", Path(tmp) / "c.csv", Path(tmp) / "o.json"
            with d.open("w", newline="") as fh:
                w = csv.writer(fh)
                w.writerow(["case", "s", "i", "j", "y"])
                y = cells.counts[:, 1]
                for n in range(y.size):
                    w.writerow(["b", cells.system[n], cells.item[n], cells.judge[n], int(y[n])])
            with c.open("w", newline="") as fh:
                w = csv.writer(fh)
                w.writerow(["case", "method", "link", "terms"])
                w.writerow(["b", "glmer", "logit", "+".join(fit.sigma2)])
            busy0, wall0 = busy_cpu_seconds(), time.perf_counter()
            run = subprocess.run(["Rscript", str(ROOT / "tests/r/latent_reference.R"), str(d), str(c), str(o)],
                                 capture_output=True, text=True)
            r_wall = time.perf_counter() - wall0
            r_other = busy_cpu_seconds() - busy0
            if run.returncode != 0:
                lines.append(f"- glmer failed: {run.stderr[-500:]}")
            else:
                ref = json.loads(o.read_text())["b"]
                rows.append(("lme4::glmer(binomial, nAGQ = 1), bobyqa (time inside R)", ref["seconds"], float("nan"),
                             r_other, f"wall incl. R start and CSV read: {r_wall:.1f} s"))
                diffs = {t: fit.sigma2[t] - ref["components"][t] for t in fit.sigma2}
                lines.append("- equal answers: ours - glmer per component: "
                             + ", ".join(f"{t} {v:+.2e}" for t, v in diffs.items())
                             + f"; log-likelihood ours {fit.loglik:.6f}, glmer {ref['loglik']:.6f}")
                lines.append(f"- speed-up (glmer's fit time / ours): **{ref['seconds'] / wall:.1f}x** "
                             "(goal >= 100x)")
    # 10M records on the same cells: one row per judgment, aggregated, fitted.
    reps = max(args.records // cells.counts.shape[0], 1)
    n = reps * cells.counts.shape[0]
    big = simulate_latent(sizes, TRUTH, np.array([0.2]), replicates=reps, rng=rng)
    cell_of = np.repeat(np.arange(big.counts.shape[0]), big.counts.sum(axis=1))
    ones = np.repeat(np.tile([0, 1], big.counts.shape[0]), big.counts.ravel())  # cell by cell: 0s then 1s
    records = (big.system[cell_of], big.item[cell_of], big.judge[cell_of], ones)
    agg, wall_a, cpu_a, other_a = timed(LatentCells.from_records, *records, 2)
    rows.append((f"LatentCells.from_records, {n:,} records -> {agg.counts.shape[0]:,} cells", wall_a, cpu_a, other_a, ""))
    fit_big, wall_b, cpu_b, other_b = timed(fit_latent, agg, intervals=False)
    rows.append((f"fit_latent on them ({reps} judgments per cell)", wall_b, cpu_b, other_b,
                 f"{fit_big.evaluations} evaluations; sigma2 " + ", ".join(f"{t} {v:.3f}" for t, v in fit_big.sigma2.items())))
    lines.append(f"- {n:,} records: aggregation + fit **{wall_a + wall_b:.1f} s** wall (goal < 60 s on 2 cores)")
    if args.large_items:
        large = simulate_latent({"s": args.systems, "i": args.large_items, "j": args.judges}, TRUTH, np.array([0.2]),
                                rng=rng)
        fit_l, wall_l, cpu_l, other_l = timed(fit_latent, large, intervals=False)
        rows.append((f"fit_latent, {large.counts.shape[0]:,} cells x 1 judgment", wall_l, cpu_l, other_l,
                     f"{fit_l.evaluations} evaluations"))
    table = ["| step | time (s) | CPU (s) | other procs' CPU (s) | notes |", "|---|---:|---:|---:|---|"]
    table += [f"| {a} | {b:.2f} | {c:.2f} | {d:.0f} | {e} |" for a, b, c, d, e in rows]
    stamp = datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")
    text = (
        f"## Latent-scale G-study, {args.systems} x {args.items} x {args.judges} binary, and {n:,} records ({stamp})\n\n"
        f"Command: `{command_line('latent.py')}`\n\n" + facts_block(facts)
        + "- truth: " + ", ".join(f"sigma2_{t} {v}" for t, v in TRUTH.items()) + ", logit, threshold 0.2\n\n"
        + "\n".join(table) + "\n\n" + "\n".join(lines) + "\n"
    )
    print(text)
    if not args.no_append:
        append_results(text)


if __name__ == "__main__":
    main()
