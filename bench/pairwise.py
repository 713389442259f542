"""Pairwise benchmark: the whole pairwise analysis of 1M judgments, and choix refits as the baseline.

The data (issue 13's size): 20 systems, every unordered pair judged in both
orders on 500 items by 6 judges (190 x 2 x 500 x 6 = 1,140,000 judgments), from
``jurymeter.simulate`` with prompt effects (``sigma_pair_si = 0.5``), ties and a
judge position bias; the registries relabelled into 4 families (systems by
index mod 4, judges likewise). The store is built once under
``bench/_work/pairwise-<seed>/`` and reused.

Measured in one run, each ``--repeats`` times (medians reported):

1. the whole analysis through the nightly fit path
   (``jurymeter.pipeline.fit.run_fit`` of the pairwise job: the store's
   records read as games, orders reconciled, position bias with 1,000
   item-bootstrap resamples, judge agreement, Bradley-Terry with 1,000
   prompt-bootstrap and 1,000 battle-bootstrap resamples, the sandwich and the
   length-controlled fit, family preference with 1,000 permutations and 1,000
   placebo shuffles, the pairwise G-study's not-applicable check), in this
   process, imports done before; and its parts timed one by one;
2. the ``jurymeter pairwise --json`` process (interpreter start to exit);
3. like for like against choix, on the same 1,000 prompt-bootstrap item
   weights as ``bradley_terry`` draws (``bench/bradley_terry.py``'s
   ``resample_weights``):
   (a) the loop a user would write (per resample: gather the drawn items'
   outcome rows, count the wins matrix, ``choix.ilsr_pairwise_dense``)
   against our prompt bootstrap alone (``bradley_terry(...,
   battle_bootstrap=False)``: coding, fit, sandwich, prompt bootstrap, ranks)
   and against the whole ``bradley_terry`` (both bootstraps);
   (b) 1,000 ``choix.ilsr_pairwise_dense`` refits on the resamples' wins
   matrices (given) against our batched refit (``_batched_newton``) on the
   same matrices.

Wall-clock seconds, and the process's CPU seconds beside them (the machine is
shared: under load the wall clock runs ahead of the CPU time).

Goals (issue 13): (1) under 10 s on 2 cores; (3) ours at least 50x faster.
Appends a section to ``bench/RESULTS.md``.

Command: ``uv run python bench/pairwise.py``
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))

from _common import machine_facts  # noqa: E402

RESULTS = ROOT / "bench" / "RESULTS.md"
FAMILIES = ("fam-a", "fam-b", "fam-c", "fam-d")


def build_store(work: Path, seed: int) -> Any:
    import polars as pl

    from jurymeter.io.ingest import ingest
    from jurymeter.io.sources import discover_sources
    from jurymeter.io.store import Store
    from jurymeter.io.validate import ValidationOptions
    from jurymeter.simulate import SimulationParams, simulate_dump

    store = Store(str(work / "store"))
    if (work / "built").exists():
        return store
    params = SimulationParams(seed=seed, n_systems=20, n_items=500, n_judges=6, n_generations=1, n_replicates=1,
                              pairwise_pairs=None, sigma_pair_si=0.5, weighted_fraction=0.0, item_set="bench-pairs")
    dump = simulate_dump(params)
    work.mkdir(parents=True, exist_ok=True)
    pairs = work / "pairwise.parquet"
    dump.pairwise.write_parquet(pairs)
    systems = dump.systems.with_columns(
        pl.Series("family", [FAMILIES[k % 4] for k in range(dump.systems.height)]))
    judges = dump.judges.with_columns(pl.Series("family", [FAMILIES[k % 4] for k in range(dump.judges.height)]))
    systems.write_ndjson(work / "systems.jsonl")
    judges.write_ndjson(work / "judges.jsonl")
    ingest(store, discover_sources([str(pairs), str(work / "systems.jsonl"), str(work / "judges.jsonl")]),
           ValidationOptions())
    (work / "built").write_text(str(dump.pairwise.height))
    return store


def job_of(store: Any, n_boot: int, n_perm: int) -> Any:
    from jurymeter.analyses.base import FitSettings
    from jurymeter.analyses.pairwise import PairwiseOptions
    from jurymeter.pipeline.jobs import FitJob

    return FitJob(store=store.url, storage_options=(), item_set="bench-pairs", universe="all", population="all",
                  settings=FitSettings(), analyses=(("pairwise", PairwiseOptions(n_boot=n_boot, n_perm=n_perm)),),
                  inputs=(), protocol="pairwise")


def clock() -> tuple[float, float]:
    return time.perf_counter(), time.process_time()


def since(t: tuple[float, float]) -> tuple[float, float]:
    return time.perf_counter() - t[0], time.process_time() - t[1]


def parts(store: Any, n_boot: int, n_perm: int) -> dict[str, tuple[float, float]]:
    """Each part of the analysis on its own (the store read once, as games): (wall, CPU) seconds."""
    from jurymeter.analyses.pairwise import _READ, _families
    from jurymeter.stats.pairwise.agreement import judge_agreement
    from jurymeter.stats.pairwise.bradley_terry import bradley_terry
    from jurymeter.stats.pairwise.family import family_preference
    from jurymeter.stats.pairwise.games import games, reconcile
    from jurymeter.stats.pairwise.position import position_bias

    out: dict[str, tuple[float, float]] = {}
    t = clock()
    records = store.scan("pairwise", "bench-pairs", columns=[c for c in _READ if c not in ("gold",)])
    played = games(records)
    out["read as games"] = since(t)
    t = clock()
    outcomes = reconcile(played)
    out["reconcile"] = since(t)
    t = clock()
    position_bias(played, n_boot=n_boot)
    out["position bias"] = since(t)
    t = clock()
    judge_agreement(played)
    out["judge agreement"] = since(t)
    t = clock()
    bt = bradley_terry(outcomes, n_boot=n_boot, games=played)
    out["bradley-terry"] = since(t)
    abilities = dict(bt.table.select("system_id", "rating").iter_rows())
    t = clock()
    family_preference(outcomes, judge_family=_families(store.scan("judges").collect(), "judge_id"),
                      system_family=_families(store.scan("systems").collect(), "system_id"), abilities=abilities,
                      n_perm=n_perm, n_placebo=n_perm, games=played)
    out["family preference"] = since(t)
    return out


def choix_baseline(store: Any, n_boot: int, seed: int) -> dict[str, float]:
    """(a) the user's choix loop vs our prompt bootstrap alone and our whole call; (b) refits alone."""
    import bradley_terry as bench_bt  # bench/bradley_terry.py
    from jurymeter.stats.pairwise.bradley_terry import bradley_terry
    from jurymeter.stats.pairwise.games import games, reconcile

    outcomes = reconcile(games(store.scan("pairwise", "bench-pairs")))
    n_items = outcomes["item_id"].n_unique()
    weights = bench_bt.resample_weights(n_items, n_boot, seed)
    out: dict[str, float] = {}
    out["user loop"], fits = bench_bt.user_loop(outcomes, weights)
    t = time.perf_counter()
    prompt_only = bradley_terry(outcomes, n_boot=n_boot, seed=seed, battle_bootstrap=False)
    out["ours: prompt bootstrap alone"] = time.perf_counter() - t
    t = time.perf_counter()
    bradley_terry(outcomes, n_boot=n_boot, seed=seed)
    out["ours: whole bradley_terry"] = time.perf_counter() - t
    ours = prompt_only.table.sort("system_id")
    lo_q, hi_q = (1 - prompt_only.level) / 2, (1 + prompt_only.level) / 2
    c_low, c_high = np.quantile(fits, [lo_q, hi_q], axis=0)
    out["interval ends |diff|"] = max(float(np.abs(ours["low"].to_numpy() - c_low).max()),
                                      float(np.abs(ours["high"].to_numpy() - c_high).max()))
    out["choix refits"], out["ours: batched refits"], out["refit |diff|"] = bench_bt.refit_only(
        outcomes, weights, ours["rating"].to_numpy())
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--seed", type=int, default=13)
    parser.add_argument("--boot", type=int, default=1000)
    parser.add_argument("--perm", type=int, default=1000)
    parser.add_argument("--no-write", action="store_true", help="print, do not append to RESULTS.md")
    args = parser.parse_args()

    from jurymeter.analyses.pairwise import PAIRWISE
    from jurymeter.pipeline.fit import import_fit_modules, run_fit

    store = build_store(ROOT / "bench" / "_work" / f"pairwise-{args.seed}", args.seed)
    n_records = store.scan("pairwise", "bench-pairs").select("item_id").collect().height
    import_fit_modules()
    job = job_of(store, args.boot, args.perm)
    whole: list[tuple[float, float]] = []
    for _ in range(args.repeats):
        t = clock()
        outcome = run_fit(job)["pairwise"]
        whole.append(since(t))
    assert outcome.result is not None, outcome.reason
    summary = PAIRWISE.summarize(outcome.result)
    split = [parts(store, args.boot, args.perm) for _ in range(args.repeats)]
    part_medians = {k: (statistics.median(s[k][0] for s in split), statistics.median(s[k][1] for s in split))
                    for k in split[0]}
    jm = Path(sys.executable).with_name("jurymeter")
    process: list[float] = []
    for _ in range(args.repeats):
        t = time.perf_counter()
        subprocess.run([str(jm), "pairwise", "--store", store.url, "--item-set", "bench-pairs", "--json"],
                       check=True, stdout=subprocess.DEVNULL)
        process.append(time.perf_counter() - t)
    baseline = [choix_baseline(store, args.boot, args.seed + r) for r in range(args.repeats)]
    base_medians = {k: statistics.median(b[k] for b in baseline) for k in baseline[0]}
    user_s, prompt_s, whole_bt = (base_medians[k] for k in (
        "user loop", "ours: prompt bootstrap alone", "ours: whole bradley_terry"))
    choix_s, refit_s = base_medians["choix refits"], base_medians["ours: batched refits"]
    whole_wall, whole_cpu = statistics.median(w[0] for w in whole), statistics.median(w[1] for w in whole)

    facts = machine_facts()
    lines = [
        f"## Pairwise analysis, 1M judgments ({dt.datetime.now(dt.UTC):%Y-%m-%d %H:%M} UTC)",
        "",
        f"Command: `uv run python bench/pairwise.py --repeats {args.repeats} --seed {args.seed}`; "
        f"{os.cpu_count()} cores, load average {os.getloadavg()[0]:.2f} at the end; "
        + ", ".join(f"{k} {v}" for k, v in facts.items()),
        "",
        f"Data: {n_records:,} pairwise judgments (20 systems, all 190 pairs in both orders, 500 items, 6 judges, "
        f"4 families), {args.boot} bootstrap resamples, {args.perm} permutations. Medians of {args.repeats}.",
        "",
        "| measurement | wall s | CPU s | goal |",
        "|---|---:|---:|---|",
        f"| whole analysis (`run_fit`, in process) | {whole_wall:.2f} | {whole_cpu:.2f} | < 10 "
        f"({'met' if whole_wall < 10 else 'missed'}) |",
        f"| `jurymeter pairwise --json` process | {statistics.median(process):.2f} | | |",
        *(f"| part: {k} | {w:.2f} | {c:.2f} | |" for k, (w, c) in part_medians.items()),
        "",
        f"Like for like against choix ({args.boot:,} prompt-bootstrap resamples, the same item weights; "
        f"wall s, medians of {args.repeats}):",
        "",
        "| measurement | seconds | speed-up | goal |",
        "|---|---:|---:|---|",
        f"| (a) user loop: gather the drawn items' rows, count wins, `choix.ilsr_pairwise_dense` | {user_s:.2f} | | |",
        f"| (a) ours: prompt bootstrap alone (`battle_bootstrap=False`) | {prompt_s:.3f} | {user_s / prompt_s:.0f}x "
        f"| >= 50x ({'met' if user_s / prompt_s >= 50 else 'missed'}) |",
        f"| (a) ours: whole `bradley_terry` (prompt + battle bootstraps, sandwich) | {whole_bt:.3f} "
        f"| {user_s / whole_bt:.0f}x | >= 50x ({'met' if user_s / whole_bt >= 50 else 'missed'}) |",
        f"| (b) {args.boot:,} `choix.ilsr_pairwise_dense` refits on the resamples' matrices (given) | {choix_s:.3f} | | |",
        f"| (b) ours: batched refit (`_batched_newton`) on the same matrices | {refit_s:.3f} "
        f"| {choix_s / refit_s:.1f}x | |",
        "",
        f"Largest |difference| of the prompt intervals' ends, ours vs the user loop's: "
        f"{base_medians['interval ends |diff|']:.1e}; of the refitted ratings, (b): {base_medians['refit |diff|']:.1e}.",
        "",
        f"Headline of the fit: {summary}.",
        "",
    ]
    text = "\n".join(lines)
    print(text)
    if not args.no_write:
        with RESULTS.open("a") as handle:
            handle.write("\n" + text)


if __name__ == "__main__":
    main()
