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
3. the baseline a user would write: 1,000 ``choix.ilsr_pairwise_dense`` refits
   on the same 1,000 prompt-bootstrap resamples' win matrices (the matrices
   built before the clock starts), against our batched refit of those
   resamples alone (``bradley_terry`` minus its battle bootstrap is not
   separable, so the whole ``bradley_terry`` call is compared too).

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


def parts(store: Any, n_boot: int, n_perm: int) -> dict[str, float]:
    """Each part of the analysis on its own (the store read once, as games)."""
    from jurymeter.analyses.pairwise import _READ, _families
    from jurymeter.stats.pairwise.agreement import judge_agreement
    from jurymeter.stats.pairwise.bradley_terry import bradley_terry
    from jurymeter.stats.pairwise.family import family_preference
    from jurymeter.stats.pairwise.games import games, reconcile
    from jurymeter.stats.pairwise.position import position_bias

    out: dict[str, float] = {}
    t = time.perf_counter()
    records = store.scan("pairwise", "bench-pairs", columns=[c for c in _READ if c not in ("gold",)])
    played = games(records)
    out["read as games"] = time.perf_counter() - t
    t = time.perf_counter()
    outcomes = reconcile(played)
    out["reconcile"] = time.perf_counter() - t
    t = time.perf_counter()
    position_bias(played, n_boot=n_boot)
    out["position bias"] = time.perf_counter() - t
    t = time.perf_counter()
    judge_agreement(played)
    out["judge agreement"] = time.perf_counter() - t
    t = time.perf_counter()
    bt = bradley_terry(outcomes, n_boot=n_boot, games=played)
    out["bradley-terry"] = time.perf_counter() - t
    abilities = dict(bt.table.select("system_id", "rating").iter_rows())
    t = time.perf_counter()
    family_preference(outcomes, judge_family=_families(store.scan("judges").collect(), "judge_id"),
                      system_family=_families(store.scan("systems").collect(), "system_id"), abilities=abilities,
                      n_perm=n_perm, n_placebo=n_perm, games=played)
    out["family preference"] = time.perf_counter() - t
    return out


def choix_baseline(store: Any, n_boot: int, seed: int) -> dict[str, float]:
    """1,000 choix refits on prompt-bootstrap resamples' win matrices, and our whole BT call on the same data."""
    import choix
    import numpy as np
    import polars as pl

    from jurymeter.stats.pairwise.bradley_terry import bradley_terry
    from jurymeter.stats.pairwise.games import games, reconcile

    outcomes = reconcile(games(store.scan("pairwise", "bench-pairs")))
    systems = sorted(set(outcomes["system_x"].unique().to_list()) | set(outcomes["system_y"].unique().to_list()))
    code = {s: k for k, s in enumerate(systems)}
    items = outcomes["item_id"].unique().sort().to_list()
    item_code = {s: k for k, s in enumerate(items)}
    x = np.array([code[s] for s in outcomes["system_x"].to_list()])
    y = np.array([code[s] for s in outcomes["system_y"].to_list()])
    it = np.array([item_code[s] for s in outcomes["item_id"].to_list()])
    score = outcomes["score_x"].cast(pl.Float64).to_numpy()
    n = len(systems)
    per_item = np.zeros((len(items), n, n))
    np.add.at(per_item, (it, x, y), score)
    np.add.at(per_item, (it, y, x), 1.0 - score)
    rng = np.random.default_rng(seed)
    weights = rng.multinomial(len(items), np.full(len(items), 1.0 / len(items)), size=n_boot).astype(float)
    matrices = np.einsum("bi,ijk->bjk", weights, per_item)
    t = time.perf_counter()
    for b in range(n_boot):
        choix.ilsr_pairwise_dense(matrices[b])
    choix_seconds = time.perf_counter() - t
    t = time.perf_counter()
    bradley_terry(outcomes, n_boot=n_boot, seed=seed)
    ours = time.perf_counter() - t
    return {"choix 1,000 refits": choix_seconds, "bradley_terry (prompt + battle bootstraps, sandwich)": ours}


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
    whole: list[float] = []
    for _ in range(args.repeats):
        t = time.perf_counter()
        outcome = run_fit(job)["pairwise"]
        whole.append(time.perf_counter() - t)
    assert outcome.result is not None, outcome.reason
    summary = PAIRWISE.summarize(outcome.result)
    split = [parts(store, args.boot, args.perm) for _ in range(args.repeats)]
    part_medians = {k: statistics.median(s[k] for s in split) for k in split[0]}
    jm = Path(sys.executable).with_name("jurymeter")
    process: list[float] = []
    for _ in range(args.repeats):
        t = time.perf_counter()
        subprocess.run([str(jm), "pairwise", "--store", store.url, "--item-set", "bench-pairs", "--json"],
                       check=True, stdout=subprocess.DEVNULL)
        process.append(time.perf_counter() - t)
    baseline = [choix_baseline(store, args.boot, args.seed + r) for r in range(args.repeats)]
    base_medians = {k: statistics.median(b[k] for b in baseline) for k in baseline[0]}
    choix_s = base_medians["choix 1,000 refits"]
    ours_s = base_medians["bradley_terry (prompt + battle bootstraps, sandwich)"]

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
        "| measurement | seconds | goal |",
        "|---|---|---|",
        f"| whole analysis (`run_fit`, in process) | {statistics.median(whole):.2f} | < 10 |",
        f"| `jurymeter pairwise --json` process | {statistics.median(process):.2f} | |",
        *(f"| part: {k} | {v:.2f} | |" for k, v in part_medians.items()),
        f"| choix: 1,000 `ilsr_pairwise_dense` refits of the prompt-bootstrap resamples | {choix_s:.2f} | |",
        f"| ours: the whole `bradley_terry` (1,000 prompt + 1,000 battle resamples, sandwich) | {ours_s:.2f} | |",
        f"| speed-up over the choix loop | {choix_s / ours_s:.0f}x | >= 50x |",
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
