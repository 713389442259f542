"""Bradley-Terry benchmark: 1M pairwise records, 1,000 prompt-bootstrap refits.

Simulates 20 systems x 500 items x 6 judges, every pair in both orders (1,140,000
pairwise records, ``jurymeter.simulate`` with prompt effects, no position bias),
then times

1. ``games`` and ``reconcile`` (both orders paired: 570,000 outcomes);
2. ``bradley_terry`` with 1,000 prompt-bootstrap and 1,000 battle-bootstrap
   resamples (sandwich, ranks and tie groups included), and again with the
   length-controlled fit on the games;
3. the baseline a user would write, on the same 1,000 prompt-bootstrap resamples
   (the same item weights, drawn here from the same seed): per resample, gather the
   outcome rows of the drawn items, count their wins matrix and refit it with
   ``choix.ilsr_pairwise_dense``, in a Python loop;
4. the refits alone: ``choix.ilsr_pairwise_dense`` on the 1,000 resamples' wins
   matrices (built beforehand) against the batched Newton on the same matrices.

Goal: ``bradley_terry`` at least 50x faster than the choix loop. The script also
checks that the percentile intervals of the choix refits equal ours. Appends a
section to ``bench/RESULTS.md``.

Command: ``.venv/bin/python bench/bradley_terry.py``
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import platform
import sys
import time
from importlib import metadata
from pathlib import Path

import choix
import numpy as np
import polars as pl

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from jurymeter.simulate import SimulationParams, simulate_dump  # noqa: E402
from jurymeter.stats.pairwise.bradley_terry import _batched_newton, bradley_terry  # noqa: E402
from jurymeter.stats.pairwise.games import games, reconcile  # noqa: E402

RESULTS = ROOT / "bench" / "RESULTS.md"


def resample_weights(n_items: int, n_boot: int, seed: int) -> np.ndarray:
    """The item weights of ``bradley_terry``'s prompt bootstrap (its first child stream)."""
    item_rng = np.random.default_rng(seed).spawn(3)[0]
    picks = item_rng.integers(0, n_items, size=(n_boot, n_items))
    return np.stack([np.bincount(row, minlength=n_items) for row in picks])


def coded(outcomes: pl.DataFrame) -> tuple[int, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    systems = sorted(set(outcomes["system_x"]) | set(outcomes["system_y"]))
    code = {s: k for k, s in enumerate(systems)}
    x = outcomes["system_x"].replace_strict(code, return_dtype=pl.Int64).to_numpy()
    y = outcomes["system_y"].replace_strict(code, return_dtype=pl.Int64).to_numpy()
    item = (outcomes["item_id"].rank("dense") - 1).cast(pl.Int64).to_numpy()
    return len(systems), x, y, item, outcomes["score_x"].to_numpy()


def user_loop(outcomes: pl.DataFrame, weights: np.ndarray) -> tuple[float, np.ndarray]:
    """What a user writes: per resample, gather the rows of the drawn items, count, choix."""
    s, x, y, item, score = coded(outcomes)
    order = np.argsort(item, kind="stable")
    bounds = np.searchsorted(item[order], np.arange(weights.shape[1] + 1))
    fits = np.empty((weights.shape[0], s))
    t0 = time.perf_counter()
    for b in range(weights.shape[0]):
        drawn = np.repeat(np.arange(weights.shape[1]), weights[b])
        rows = np.concatenate([order[bounds[i]:bounds[i + 1]] for i in drawn])
        w = np.bincount(x[rows] * s + y[rows], weights=score[rows], minlength=s * s)
        w += np.bincount(y[rows] * s + x[rows], weights=1 - score[rows], minlength=s * s)
        theta = choix.ilsr_pairwise_dense(w.reshape(s, s))
        fits[b] = theta - theta.mean()
    return time.perf_counter() - t0, fits


def refit_only(outcomes: pl.DataFrame, weights: np.ndarray, start: np.ndarray) -> tuple[float, float, float]:
    """choix on the resamples' wins matrices (given) against the batched Newton on the same."""
    s, x, y, item, score = coded(outcomes)
    n_items = weights.shape[1]
    per_item = np.bincount(item * s * s + x * s + y, weights=score, minlength=n_items * s * s)
    per_item += np.bincount(item * s * s + y * s + x, weights=1 - score, minlength=n_items * s * s)
    wins = (weights.astype(np.float64) @ per_item.reshape(n_items, s * s)).reshape(-1, s, s)
    t0 = time.perf_counter()
    fits = np.empty((wins.shape[0], s))
    for b in range(wins.shape[0]):
        theta = choix.ilsr_pairwise_dense(wins[b])
        fits[b] = theta - theta.mean()
    t_choix = time.perf_counter() - t0
    a, bb = np.triu_indices(s, 1)
    t0 = time.perf_counter()
    ours, ok = _batched_newton(a, bb, wins[:, a, bb], wins[:, a, bb] + wins[:, bb, a], start, s)
    t_ours = time.perf_counter() - t0
    assert ok.all()
    return t_choix, t_ours, float(np.abs(ours - fits).max())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--systems", type=int, default=20)
    parser.add_argument("--items", type=int, default=500)
    parser.add_argument("--judges", type=int, default=6)
    parser.add_argument("--n-boot", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--no-append", action="store_true")
    args = parser.parse_args()

    t0 = time.perf_counter()
    dump = simulate_dump(
        SimulationParams(
            seed=args.seed, n_systems=args.systems, n_items=args.items, n_judges=args.judges,
            n_generations=1, n_replicates=1, pairwise_pairs=None, sigma_pair_si=0.8,
            position_bias=0.0, sigma_position=0.0, family_preference=0.0,
        )
    )
    t_sim = time.perf_counter() - t0
    records = dump.pairwise

    t_games, t_rec, t_bt, t_lc = [], [], [], []
    for _ in range(args.repeats):
        t0 = time.perf_counter()
        g = games(records)
        t_games.append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        outcomes = reconcile(g)
        t_rec.append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        fit = bradley_terry(outcomes, n_boot=args.n_boot, seed=args.seed)
        t_bt.append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        fit_lc = bradley_terry(outcomes, n_boot=args.n_boot, seed=args.seed, games=g)
        t_lc.append(time.perf_counter() - t0)
    weights = resample_weights(args.items, args.n_boot, args.seed)
    t_user, fits = user_loop(outcomes, weights)
    lo_q, hi_q = (1 - fit.level) / 2, (1 + fit.level) / 2
    c_low, c_high = np.quantile(fits, [lo_q, hi_q], axis=0)
    ours = fit.table.sort("system_id")
    diff = max(
        float(np.abs(ours["low"].to_numpy() - c_low).max()),
        float(np.abs(ours["high"].to_numpy() - c_high).max()),
    )
    start = ours["rating"].to_numpy()
    t_choix, t_batched, refit_diff = refit_only(outcomes, weights, start)
    best_bt, best_rec = min(t_bt), min(t_rec)
    speedup = t_user / best_bt
    lc = fit_lc.length_control
    assert lc is not None
    lines = [
        f"## Bradley-Terry: 1,000 prompt-bootstrap refits on {records.height:,} pairwise records "
        f"({dt.datetime.now(dt.UTC):%Y-%m-%d %H:%M} UTC)",
        "",
        f"Command: `.venv/bin/python bench/bradley_terry.py{' ' + ' '.join(sys.argv[1:]) if sys.argv[1:] else ''}`",
        "",
        f"- machine: {os.cpu_count()} CPUs, Python {platform.python_version()}, numpy {np.__version__}, "
        f"polars {pl.__version__}, choix {metadata.version('choix')}, OPENBLAS_NUM_THREADS {os.environ.get('OPENBLAS_NUM_THREADS', 'unset')}, load average "
        f"{os.getloadavg()[0]:.2f}",
        f"- data: {args.systems} systems (all {args.systems * (args.systems - 1) // 2} pairs, both orders) x "
        f"{args.items} items x {args.judges} judges, simulated (sigma_pair_si 0.8, no position bias) "
        f"in {t_sim:.1f} s: {records.height:,} records, {outcomes.height:,} outcomes",
        f"- times: best of {args.repeats} (all runs in brackets); the choix loop once",
        "",
        "| step | time (s) |",
        "|---|---:|",
        f"| `games` | {min(t_games):.3f} ({', '.join(f'{t:.3f}' for t in t_games)}) |",
        f"| `reconcile` | {best_rec:.3f} ({', '.join(f'{t:.3f}' for t in t_rec)}) |",
        f"| **`bradley_terry`, {args.n_boot:,} prompt + {args.n_boot:,} battle resamples** | "
        f"**{best_bt:.3f}** ({', '.join(f'{t:.3f}' for t in t_bt)}) |",
        f"| `bradley_terry` with length control on the games | {min(t_lc):.3f} "
        f"({', '.join(f'{t:.3f}' for t in t_lc)}) |",
        f"| **reconcile + bradley_terry** | **{best_rec + best_bt:.3f}** |",
        f"| baseline a user writes: {args.n_boot:,} times (gather the drawn items' outcome rows, "
        f"count the wins matrix, `choix.ilsr_pairwise_dense`), the same item weights | {t_user:.3f} |",
        f"| refits only: {args.n_boot:,} `choix.ilsr_pairwise_dense` calls on the resamples' wins "
        f"matrices (given) | {t_choix:.3f} |",
        f"| refits only: our batched Newton (`_batched_newton`) on the same matrices | {t_batched:.3f} |",
        "",
        f"- speed-up, user loop / `bradley_terry` (which also runs the {args.n_boot:,}-resample battle "
        f"bootstrap, the sandwich, ranks and tie groups): **{speedup:.1f}x** — goal >= 50x: "
        f"**{'met' if speedup >= 50 else 'missed'}**",
        f"- refits alone: choix loop / batched Newton **{t_choix / t_batched:.1f}x**; largest "
        f"|difference| of the refitted ratings {refit_diff:.2e} (choix stops at an L1 step of 1e-8)",
        f"- largest |difference| of the prompt-bootstrap interval ends, ours vs the user loop's: {diff:.2e}",
        f"- width ratio (prompt / battle, median over systems): {fit.width_ratio:.2f}; tie groups "
        f"{fit.table['tie_group'].max()}; degenerate resamples {fit.prompt_degenerate} / "
        f"{fit.battle_degenerate}",
        f"- length control: beta {lc.beta:.4f} (SE {lc.beta_se:.4f}; the simulation has no length "
        f"effect), {len(lc.changed)} systems change rank",
        "",
    ]
    text = "\n".join(lines)
    print(text)
    if not args.no_append:
        with RESULTS.open("a") as handle:
            handle.write("\n" + text)


if __name__ == "__main__":
    main()
