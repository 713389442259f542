"""Landing ingest on a Dask cluster: the flow's ingest with its stage steps on 2 LocalCluster workers vs one process.

One run:

1. writes ``--dumps`` simulated nightly dumps (``jurymeter.simulate``: the
   pointwise file of ``simulate_dump`` with ``--items`` items, 12 systems x 5
   judges x 2 generations x 2 replicates, and ``--faults`` bad records each, so
   the streaming fast path steps aside and the block path quarantines them, as
   on a real night) into one landing folder, each of its own item set;
2. starts one LocalCluster of ``--workers`` worker processes of 1 thread (as
   ``jurymeter run`` does: ``orchestration.runtime.run_cluster``), once, not
   timed: the flow's cluster is up before its ingest task runs;
3. times, interleaved, ``--repeats`` times, each into a fresh store and after
   waiting (up to ``--wait-max`` s) for the machine to be quiet: the
   flow's landing ingest (``orchestration.flow._ingest``, the function its
   ingest task and ``start_ingest_early`` run) (a) with no scheduler in the
   configuration (every stage step in this process) and (b) with the
   cluster's address (the stage steps mapped over the workers, commits here in
   order); wall time and CPU time of this process plus every worker process
   (``psutil``), and the machine's other busy CPU meanwhile;
4. checks that (a) and (b) stored the same rows (every column), markers'
   counts and quarantine, and appends the table to ``bench/RESULTS.md``.

Goal (issue 25): (b) at least 1.6x faster than (a).

Run from the project root::

    .venv/bin/python bench/ingest_cluster.py
    .venv/bin/python bench/ingest_cluster.py --dumps 8 --items 200 --repeats 1 --no-append   # quick check
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import shutil
import statistics
import sys
import time
from pathlib import Path
from typing import Any

from _common import (
    append_results,
    busy_cpu_seconds,
    command_line,
    facts_block,
    fmt_bytes,
    machine_facts,
)
from adapters import wait_for_quiet

BENCH_DIR = Path(__file__).resolve().parent
GOAL = 1.6


def write_landing(landing: Path, dumps: int, items: int, faults: int) -> int:
    """``dumps`` simulated pointwise dumps in ``landing``; their total size."""
    from jurymeter.simulate.dump import write_dump
    from jurymeter.simulate.model import simulate_dump
    from jurymeter.simulate.params import SimulationParams

    landing.mkdir(parents=True)
    for k in range(dumps):
        made = write_dump(simulate_dump(SimulationParams(seed=k, n_items=items, item_set=f"night-{k}")),
                          landing.parent / f"dump-{k}", faults=faults, seed=k)
        shutil.move(made["pointwise"], landing / f"dump-{k}.jsonl")
        shutil.rmtree(landing.parent / f"dump-{k}")
    return sum(p.stat().st_size for p in landing.iterdir())


def timed_ingest(config: Any, workers: list[Any]) -> dict[str, Any]:
    """The flow's landing ingest, timed: wall, CPU of this process and of the workers, others' CPU."""
    import psutil

    from jurymeter.orchestration import flow

    def worker_cpu() -> float:
        total = 0.0
        for proc in workers:
            times = proc.cpu_times()
            total += times.user + times.system
        return total

    own = psutil.Process()
    busy0, cpu0, w0, t0 = busy_cpu_seconds(), own.cpu_times(), worker_cpu(), time.perf_counter()
    report = flow._ingest(config)
    seconds = time.perf_counter() - t0
    cpu1, w1, busy1 = own.cpu_times(), worker_cpu(), busy_cpu_seconds()
    here = (cpu1.user + cpu1.system) - (cpu0.user + cpu0.system)
    assert report is not None
    return {"seconds": seconds, "cpu_here": here, "cpu_workers": w1 - w0, "cpu": here + w1 - w0,
            "other_cpu": max(0.0, (busy1 - busy0) - here - (w1 - w0)), "report": report}


def committed(store_dir: Path) -> tuple[Any, ...]:
    """Rows, markers' counts and quarantine of a store, read from its files (for the (a) = (b) check)."""
    import polars as pl
    import pyarrow.parquet as pq

    markers = [json.loads(p.read_text()) for p in sorted((store_dir / "ingested").glob("*.json"))]
    counts = sorted((m["source"], json.dumps(m["counts"], sort_keys=True)) for m in markers)
    rows = pl.concat([pl.from_arrow(pq.read_table(store_dir / p)) for m in markers for p in m["parts"]],
                     how="diagonal_relaxed")
    held = pl.concat([pl.from_arrow(pq.read_table(store_dir / p)) for m in markers for p in m["quarantine_parts"]],
                     how="diagonal_relaxed")
    return counts, rows.sort(rows.columns, nulls_last=True), held.sort(held.columns, nulls_last=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dumps", type=int, default=8)
    parser.add_argument("--items", type=int, default=1000, help="items of each dump (240 records an item)")
    parser.add_argument("--faults", type=int, default=20, help="bad records of each dump")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--workdir", type=Path, default=BENCH_DIR / "_work" / "ingest_cluster")
    parser.add_argument("--no-append", action="store_true")
    parser.add_argument("--wait-max", type=float, default=60.0,
                        help="before each timed run, wait up to this many seconds for the machine to be quiet")
    opts = parser.parse_args()

    from dataclasses import replace

    import psutil
    from distributed import LocalCluster

    from jurymeter.pipeline.config import DaskConfig, load_config

    started = dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M UTC")
    facts = machine_facts()
    work = opts.workdir.resolve()
    shutil.rmtree(work, ignore_errors=True)
    landing = work / "landing"
    print(f"writing {opts.dumps} dumps of {opts.items} items ...", flush=True)
    t0 = time.perf_counter()
    size = write_landing(landing, opts.dumps, opts.items, opts.faults)
    print(f"  {fmt_bytes(size)} in {time.perf_counter() - t0:.0f} s", flush=True)
    runs: dict[str, list[dict[str, Any]]] = {"serial": [], "mapped": []}
    waited = 0.0
    try:
        with LocalCluster(n_workers=opts.workers, threads_per_worker=1, processes=True,
                          dashboard_address=":0") as cluster:
            workers = [c for c in psutil.Process().children(recursive=True)]
            for k in range(opts.repeats):
                for what in ("serial", "mapped"):
                    store = work / f"store-{what}"
                    shutil.rmtree(store, ignore_errors=True)
                    config = load_config(None, environ={}, overrides={"store": str(store), "landing": str(landing)})
                    if what == "mapped":
                        config = replace(config, dask=DaskConfig(address=cluster.scheduler_address))
                    # 0.3 cores: the idle cluster itself uses about 0.1 (orchestration.runtime)
                    waited += wait_for_quiet(opts.wait_max, threshold=0.3)
                    r = timed_ingest(config, workers)
                    runs[what].append(r)
                    print(f"run {k + 1}/{opts.repeats} {what}: {r['seconds']:.2f} s, CPU {r['cpu']:.2f} s "
                          f"(here {r['cpu_here']:.2f}, workers {r['cpu_workers']:.2f}), others {r['other_cpu']:.1f} s",
                          flush=True)
        same = committed(work / "store-serial")
        other = committed(work / "store-mapped")
        equal = same[0] == other[0] and same[1].equals(other[1]) and same[2].equals(other[2])
        totals = runs["serial"][-1]["report"]["totals"]
        section = _section(opts, runs, size, totals, equal, started, facts, waited)
        print(section)
        if not opts.no_append:
            append_results(section)
            print("appended to bench/RESULTS.md")
        if not equal:
            raise SystemExit("check failed: the mapped ingest stored something else than the serial one")
    finally:
        shutil.rmtree(work, ignore_errors=True)


def _section(opts: argparse.Namespace, runs: dict[str, list[dict[str, Any]]], size: int, totals: dict[str, int],
             equal: bool, started: str, facts: dict[str, str], waited: float) -> str:
    def med(what: str, key: str) -> float:
        return float(statistics.median(r[key] for r in runs[what]))

    rows = []
    for label, what in (("(a) one process (no scheduler configured)", "serial"),
                        (f"(b) stage steps on the LocalCluster's {opts.workers} workers", "mapped")):
        each = ", ".join(f"{r['seconds']:.2f}" for r in runs[what])
        rows.append(f"| {label} | {med(what, 'seconds'):.2f} | {each} | {med(what, 'cpu'):.2f} "
                    f"| {med(what, 'cpu_here'):.2f} | {med(what, 'cpu_workers'):.2f} | {med(what, 'other_cpu'):.1f} |")
    speedup = med("serial", "seconds") / med("mapped", "seconds")
    best = min(r["seconds"] for r in runs["serial"]) / min(r["seconds"] for r in runs["mapped"])
    return (
        f"## Landing ingest on a Dask cluster: {opts.dumps} dumps, {opts.workers} workers against one process "
        f"({started})\n\n"
        f"Command: `{command_line('ingest_cluster.py')}`\n\n"
        f"{facts_block(facts)}"
        f"- input: {opts.dumps} simulated pointwise dumps (`simulate_dump`, {opts.items} items each, "
        f"{opts.faults} bad records each), {fmt_bytes(size)} in all; read {totals['read']:,} = accepted "
        f"{totals['accepted']:,} + quarantined {totals['quarantined']:,} + dropped {totals['duplicates_dropped']:,}\n"
        f"- the flow's landing ingest (`orchestration.flow._ingest`), each run into a fresh local store, "
        f"interleaved, {opts.repeats} times; one LocalCluster of {opts.workers} processes x 1 thread started "
        "before the runs; CPU = this process + the worker processes (psutil); others = the machine's other "
        f"busy CPU meanwhile; before each run the script waited until the rest of the machine used under 0.3 "
        f"cores (over 2 s, at most {opts.wait_max:.0f} s; {waited:.0f} s waited in all)\n"
        f"- goal (issue 25): (b) at least {GOAL}x faster than (a)\n\n"
        "| ingest | median (s) | runs (s) | CPU (s) | CPU here (s) | CPU workers (s) | others' CPU (s) |\n"
        "|---|---:|---|---:|---:|---:|---:|\n"
        + "\n".join(rows)
        + f"\n\n- (a) / (b): **{speedup:.2f}x** (medians), {best:.2f}x (best runs) — goal >= {GOAL}x: "
        f"**{'met' if speedup >= GOAL else 'NOT met'}**\n"
        f"- check ((a) and (b) store the same rows, markers' counts and quarantine, read from the files): "
        f"{'passed' if equal else 'FAILED'}\n"
    )


if __name__ == "__main__":
    sys.exit(main())
