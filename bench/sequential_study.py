"""Simulation study of [LiDing2026] tables 1, 2 and S1 with the Markov GLMM simulator (issue 15 point 6).

Table 2 / S1 (group comparison under equal mean quality, unequal spread). V = 30
rated outputs split 15 / 15, group A spread wide, group B narrow, equal means
``theta_A = MU + SD_A q``, ``theta_B = MU + SD_B q`` (``q``: 15 equally spaced
values standardised to mean 0, sd 1, so the group means are exactly equal).
Every batch rates the 30 outputs once, in a random order (``batch_plan(...,
design="random")``) or a Williams order (``design="williams"``, N a multiple of
30: complete squares), lag-3 truth, flat position profile, batch SD 0.5.
For each N the naive contrast (``naive_group_contrast``, B = 200 batch
resamples) is run on every replicate; the GLMM (lag 3, position effects,
``n_agq`` 10) is fitted on the first ``--glmm-reps`` of them (its sign rate), and
on the first ``--boot-reps`` of those its contrast is tested with a
batch-bootstrap SE (``bootstrap_fits(n_boot=--glmm-boot)`` + ``compare_groups``).

Table 1 (top-1 accuracy). V = 6, ``theta = (delta, 0, 0, 0, 0, 0)``, ``delta =
2.8 / sqrt(N)``; N = 6, 12, 18 batches of the 6 items (Williams: complete
squares), lag-1 truth, batch SD 0.5; Setting 1 a flat position profile, Setting 2
an uneven one (``UNEVEN``). Top-1 by the naive mean (ties: fractional credit, the
expected accuracy of a uniformly random tie-break) and by the GLMM's theta (lag
1, position effects); a GLMM fit that fails (separation in a small sample)
counts as a miss of the GLMM and is reported.

Settings the paper does not give (chosen so the stated effects appear; documented
in the output): 5-point ordinal ratings (cumulative logit, cutpoints ``CUTS``;
the binary model separates too often at these sample sizes: a unit whose ~27
responses are all 0 has an infinite MLE), lag coefficients ``RHO3`` / ``RHO1``
per scale point, batch SD 0.5, the spreads ``SD_A`` / ``SD_B`` and ``MU``, the
position profiles.

Command: ``uv run python bench/sequential_study.py --append`` (about 10-15 min on
2 cores; ``--quick`` for a smoke run). Prints a markdown block with the paper's
numbers beside ours; ``--append`` adds it to ``bench/RESULTS.md``.
"""

from __future__ import annotations

import argparse
import datetime as dt
import math
import os
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import polars as pl

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from jurymeter.errors import JurymeterError  # noqa: E402
from jurymeter.stats.sequential import bootstrap_fits, fit_sequential_glmm, simulate_sequential  # noqa: E402
from jurymeter.stats.sequential.compare import compare_groups, naive_group_contrast  # noqa: E402
from jurymeter.stats.sequential.plans import batch_plan  # noqa: E402

RESULTS = ROOT / "bench" / "RESULTS.md"

CUTS = (-0.5, 1.0, 2.5, 4.0)  # 5 categories; eta = 0 puts ~38% at 1, ~35% at 2
BATCH_SD = 0.5
# Table 2: lag-3 truth.
RHO3 = (0.15, 0.08, 0.04)
MU, SD_A, SD_B = -0.5, 1.3, 0.3
V2 = 30
# Table 1: lag-1 truth.
RHO1 = (0.15,)
V1 = 6
FLAT = (0.0,) * V1
UNEVEN = (1.5, 0.9, 0.3, -0.3, -0.9, -1.5)

PAPER_T2 = {  # N: (naive type-I, GLMM lag-3 type-I, naive sign A, GLMM lag-3 sign A), percent
    30: (26.0, 25.0, 86.5, 40.5),
    60: (38.0, 11.5, 95.5, 44.5),
    90: (51.0, 4.5, 97.5, 46.5),
    120: (66.5, 6.0, 99.0, 51.5),
}
PAPER_S1 = {  # N: (naive random, naive Williams, GLMM random, GLMM Williams), percent naming A
    30: (83.1, 82.7, 43.7, 42.7),
    60: (90.3, 91.3, 44.7, 47.3),
    90: (95.1, 94.6, 47.6, 48.0),
    120: (96.9, 97.3, 45.2, 48.0),
}
PAPER_T1 = {  # (setting, N): (naive random, naive Williams, GLMM random, GLMM Williams), percent
    ("flat", 6): (44.6, 44.1, 44.4, 44.5),
    ("flat", 12): (47.8, 47.7, 47.8, 48.2),
    ("flat", 18): (49.8, 49.3, 49.8, 49.5),
    ("uneven", 6): (46.7, 47.9, 49.6, 49.0),
    ("uneven", 12): (48.0, 49.9, 51.3, 51.5),
}


def _group_theta() -> np.ndarray:
    q = np.linspace(-1.0, 1.0, V2 // 2)
    q = (q - q.mean()) / q.std()
    return np.r_[MU + SD_A * q, MU + SD_B * q]


def _orders(v: int, n: int, design: str, seed: int) -> np.ndarray:
    """(n, v) unit indices from the planner (items named by index)."""
    items = [f"{i:02d}" for i in range(v)]
    plan = batch_plan(items, n, ["j"], design=design, seed=seed)  # type: ignore[arg-type]
    return plan["item_id"].cast(pl.Int64).to_numpy().reshape(n, v)


# ------------------------------------------------------------------ table 2 / S1


@dataclass(frozen=True)
class GroupTask:
    n: int
    rep: int
    design: str
    glmm: bool
    boot: int  # 0: no bootstrap test


@dataclass(frozen=True)
class GroupOut:
    n: int
    design: str
    naive_sign: bool
    naive_reject: bool
    glmm_sign: bool | None
    glmm_reject: bool | None
    glmm_failed: bool
    crash: str


def group_replicate(task: GroupTask) -> GroupOut:
    seed = [2, task.n, task.rep, 0 if task.design == "random" else 1]
    orders = _orders(
        V2, task.n, task.design, seed=int(np.random.SeedSequence(seed).generate_state(1)[0])
    )
    units = [f"u{i:02d}" for i in range(V2)]
    records = simulate_sequential(
        _group_theta(),
        orders,
        rng=np.random.default_rng(seed),
        rho=RHO3,
        batch_sd=BATCH_SD,
        cutpoints=CUTS,
    )
    a, b = units[: V2 // 2], units[V2 // 2 :]
    naive = naive_group_contrast(records, a, b, n_boot=200, seed=task.rep)
    g_sign: bool | None = None
    g_rej: bool | None = None
    failed = False
    crash = ""
    if task.glmm:
        try:
            fit = fit_sequential_glmm(records, lags=3)
            theta = np.asarray(fit.theta)
            g_sign = bool(theta[: V2 // 2].mean() > theta[V2 // 2 :].mean())
            if task.boot:
                boot = bootstrap_fits(records, fit, n_boot=task.boot, seed=task.rep)
                cmp = compare_groups(records, fit, boot, a, b, n_boot=200, seed=task.rep)
                g_rej = cmp.model.p_value is not None and cmp.model.p_value < 0.05
        except JurymeterError:
            failed = True
        except (
            ValueError,
            np.linalg.LinAlgError,
        ) as exc:  # not a library error: a GLMM bug, reported
            failed = True
            crash = f"{type(exc).__name__}: {exc}"
    return GroupOut(
        task.n,
        task.design,
        naive.estimate > 0,
        naive.p_value is not None and naive.p_value < 0.05,
        g_sign,
        g_rej,
        failed,
        crash,
    )


# ------------------------------------------------------------------ table 1


@dataclass(frozen=True)
class TopTask:
    setting: str
    n: int
    design: str
    reps: tuple[int, ...]
    glmm: int  # GLMM on the first `glmm` of reps


@dataclass(frozen=True)
class TopOut:
    setting: str
    n: int
    design: str
    naive: tuple[float, ...]
    glmm: tuple[float, ...]
    glmm_failed: int
    crashes: tuple[str, ...]


def top_replicates(task: TopTask) -> TopOut:
    delta = 2.8 / math.sqrt(task.n)
    theta = np.r_[delta, np.zeros(V1 - 1)]
    profile = FLAT if task.setting == "flat" else UNEVEN
    naive_hits: list[float] = []
    glmm_hits: list[float] = []
    crashes: list[str] = []
    failed = 0
    for rep in task.reps:
        seed = [
            1,
            task.n,
            rep,
            0 if task.setting == "flat" else 1,
            0 if task.design == "random" else 1,
        ]
        orders = _orders(
            V1, task.n, task.design, seed=int(np.random.SeedSequence(seed).generate_state(1)[0])
        )
        records = simulate_sequential(
            theta,
            orders,
            rng=np.random.default_rng(seed),
            position_effects=profile,
            rho=RHO1,
            batch_sd=BATCH_SD,
            cutpoints=CUTS,
        )
        means = (
            records.group_by("item_id")
            .agg(pl.col("score").mean())
            .sort("item_id")["score"]
            .to_numpy()
        )
        best = np.flatnonzero(means == means.max())
        naive_hits.append(1.0 / best.size if 0 in best else 0.0)
        if len(glmm_hits) < task.glmm:
            try:
                fit = fit_sequential_glmm(records, lags=1)
                glmm_hits.append(float(int(np.argmax(fit.theta)) == 0))
            except JurymeterError:
                failed += 1
                glmm_hits.append(0.0)
            except (
                ValueError,
                np.linalg.LinAlgError,
            ) as exc:  # not a library error: a GLMM bug, reported
                failed += 1
                glmm_hits.append(0.0)
                crashes.append(
                    f"{task.setting} N={task.n} {task.design} rep {rep}: {type(exc).__name__}: {exc}"
                )
    return TopOut(
        task.setting,
        task.n,
        task.design,
        tuple(naive_hits),
        tuple(glmm_hits),
        failed,
        tuple(crashes),
    )


# ------------------------------------------------------------------ driver


def _pct(x: list[bool] | list[float]) -> tuple[float, float, int]:
    a = np.asarray(x, dtype=np.float64)
    p = float(a.mean())
    se = float(a.std(ddof=1) / math.sqrt(a.size)) if a.size > 1 else float("nan")
    return 100 * p, 100 * se, int(a.size)


def _fmt(x: list[bool] | list[float]) -> str:
    if not x:
        return "-"
    p, se, n = _pct(x)
    return f"{p:.1f} ± {se:.1f} ({n})"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument(
        "--naive-reps", type=int, default=200, help="table 2 replicates per N (naive contrast)"
    )
    ap.add_argument(
        "--glmm-reps", type=int, default=40, help="of those, GLMM fits (sign rate) per N"
    )
    ap.add_argument(
        "--boot-reps", type=int, default=30, help="of those, GLMM bootstrap tests (type-I) per N"
    )
    ap.add_argument("--glmm-boot", type=int, default=25, help="bootstrap refits per GLMM test")
    ap.add_argument("--boot-ns", default="30,120", help="the N with GLMM bootstrap tests")
    ap.add_argument(
        "--williams-glmm-reps",
        type=int,
        default=20,
        help="GLMM sign-rate fits per N under Williams (table S1)",
    )
    ap.add_argument(
        "--top-reps", type=int, default=2000, help="table 1 replicates per cell (naive)"
    )
    ap.add_argument("--top-glmm", type=int, default=300, help="of those, GLMM fits per cell")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--quick", action="store_true", help="a smoke run with few replicates")
    ap.add_argument("--append", action="store_true", help="append the block to bench/RESULTS.md")
    args = ap.parse_args()
    if args.quick:
        args.naive_reps, args.glmm_reps, args.boot_reps, args.glmm_boot = 20, 4, 2, 5
        args.williams_glmm_reps, args.top_reps, args.top_glmm = 2, 100, 20
    ns = (30, 60, 90, 120)
    boot_ns = {int(x) for x in args.boot_ns.split(",") if x}
    tasks = [
        GroupTask(
            n,
            r,
            "random",
            r < args.glmm_reps,
            args.glmm_boot if (n in boot_ns and r < args.boot_reps) else 0,
        )
        for n in ns
        for r in range(args.naive_reps)
    ] + [
        GroupTask(n, r, "williams", r < args.williams_glmm_reps, 0)
        for n in ns
        for r in range(args.naive_reps)
    ]
    # Expensive tasks first so the pool's tail is short.
    tasks.sort(key=lambda t: (-(t.boot * t.n), -int(t.glmm) * t.n))
    top_tasks = []
    chunk = 250
    for setting, n in PAPER_T1:
        for design in ("random", "williams"):
            for lo in range(0, args.top_reps, chunk):
                reps = tuple(range(lo, min(lo + chunk, args.top_reps)))
                top_tasks.append(
                    TopTask(setting, n, design, reps, max(0, min(args.top_glmm - lo, len(reps))))
                )
    load0 = os.getloadavg()
    t0 = time.perf_counter()
    with ProcessPoolExecutor(args.workers) as pool:
        group = list(pool.map(group_replicate, tasks, chunksize=1))
        t_group = time.perf_counter() - t0
        tops = list(pool.map(top_replicates, top_tasks, chunksize=1))
    wall = time.perf_counter() - t0
    load1 = os.getloadavg()

    lines = [
        f"## Sequential judging: simulation study of [LiDing2026] tables 1, 2, S1 ({dt.datetime.now(dt.UTC):%Y-%m-%d %H:%M} UTC)",
        "",
        f"Command: `uv run python bench/sequential_study.py {' '.join(sys.argv[1:])}`; "
        f"{args.workers} worker processes (`concurrent.futures.ProcessPoolExecutor`); wall {wall:.0f} s "
        f"(group comparison {t_group:.0f} s); load average before {load0[0]:.2f}, after {load1[0]:.2f} "
        f"({os.cpu_count()} CPUs).",
        "",
        "Settings (the paper's where given; the rest chosen here): 5-point ordinal ratings, cutpoints "
        f"{CUTS}; batch SD {BATCH_SD}. Table 2/S1: V = 30 (15 vs 15), theta_A = {MU} + {SD_A} q, "
        f"theta_B = {MU} + {SD_B} q (equal means), flat positions, lag-3 truth rho = {RHO3}, GLMM lag 3 "
        f"with position effects; naive B = 200; GLMM test B = {args.glmm_boot} (the paper: 200; reduced for time). "
        f"Table 1: V = 6, theta = (2.8/sqrt(N), 0, ..., 0), lag-1 truth rho = {RHO1}, GLMM lag 1; "
        f"uneven profile {UNEVEN}. Cells are `% ± Monte Carlo SE (replicates)`.",
        "",
        "**Table 2 (random orders): type-I error of the Wald test and rate of naming group A, equal means**",
        "",
        "| N | naive type-I (paper) | ours | GLMM type-I (paper, lag 3) | ours | naive names A (paper) | ours | GLMM names A (paper) | ours | GLMM fits failed |",
        "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for n in ns:
        rows = [g for g in group if g.n == n and g.design == "random"]
        fitted = [g for g in rows if g.glmm_sign is not None]
        tested = [g for g in rows if g.glmm_reject is not None]
        p = PAPER_T2[n]
        lines.append(
            f"| {n} | {p[0]} | {_fmt([g.naive_reject for g in rows])} | {p[1]} | "
            f"{_fmt([bool(g.glmm_reject) for g in tested])} | {p[2]} | {_fmt([g.naive_sign for g in rows])} | {p[3]} | "
            f"{_fmt([bool(g.glmm_sign) for g in fitted])} | {sum(g.glmm_failed for g in rows)} |"
        )
    lines += [
        "",
        "**Table S1: rate of naming group A (%), random vs Williams orders, equal means**",
        "",
        "| N | naive random (paper) | ours | naive Williams (paper) | ours | GLMM random (paper) | ours | GLMM Williams (paper) | ours |",
        "|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for n in ns:
        p = PAPER_S1[n]
        cells = []
        for design in ("random", "williams"):
            rows = [g for g in group if g.n == n and g.design == design]
            cells.append(
                (
                    _fmt([g.naive_sign for g in rows]),
                    _fmt([bool(g.glmm_sign) for g in rows if g.glmm_sign is not None]),
                )
            )
        lines.append(
            f"| {n} | {p[0]} | {cells[0][0]} | {p[1]} | {cells[1][0]} | {p[2]} | {cells[0][1]} | {p[3]} | {cells[1][1]} |"
        )
    lines += [
        "",
        "**Table 1: top-1 accuracy (%), V = 6**",
        "",
        "| setting | N | naive random (paper) | ours | naive Williams (paper) | ours | GLMM random (paper) | ours | GLMM Williams (paper) | ours | GLMM fits failed (random, Williams) |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for (setting, n), p in PAPER_T1.items():
        got = {}
        fails = {}
        for design in ("random", "williams"):
            outs = [o for o in tops if o.setting == setting and o.n == n and o.design == design]
            got[design] = ([h for o in outs for h in o.naive], [h for o in outs for h in o.glmm])
            fails[design] = sum(o.glmm_failed for o in outs)
        gain = np.mean(got["williams"][0]) - np.mean(got["random"][0])
        gain_se = math.sqrt(
            np.var(got["williams"][0], ddof=1) / len(got["williams"][0])
            + np.var(got["random"][0], ddof=1) / len(got["random"][0])
        )
        lines.append(
            f"| {setting} | {n} | {p[0]} | {_fmt(got['random'][0])} | {p[1]} | {_fmt(got['williams'][0])} "
            f"(gain {100 * gain:+.1f} ± {100 * gain_se:.1f}) | {p[2]} | {_fmt(got['random'][1])} | {p[3]} | "
            f"{_fmt(got['williams'][1])} | {fails['random']}, {fails['williams']} |"
        )
    crashes = [f"group N={g.n} {g.design}: {g.crash}" for g in group if g.crash] + [
        c for o in tops for c in o.crashes
    ]
    lines += [
        "",
        f"GLMM fits that raised a non-library exception (a bug in `glmm.py`, counted as failed above): {len(crashes)}"
        + "".join(f"\n- {c}" for c in crashes[:10]),
    ]
    block = "\n".join(lines) + "\n"
    print(block)
    if args.append:
        with RESULTS.open("a") as fh:
            fh.write("\n" + block)


if __name__ == "__main__":
    main()
