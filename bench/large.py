"""Larger than memory: up to 100 million records through ingest and the G-study on Dask.

One run, for each size of ``--sizes`` (default 10M, 30M, 100M records):

1. simulates the records in parts of ``--part-records`` (default: the greatest
   common divisor of the sizes, at most 10,000,000) as JSON Lines files with the
   generator of ``bench/nightly.py`` (4 item sets, each 40 systems x items x 6
   judges x 3 generations x 2 replicates, linear-model scores); part ``k`` holds
   new items of the same 4 item sets, written chunk by chunk (500 items per set
   at a time) in a measured subprocess, so the generator's memory stays small.
   Parts are written once and reused: the 30M store ingests parts 1-3, the 100M
   store parts 1-10;
2. ingests those parts into a fresh store: ``jurymeter.io.ingest.ingest`` of all
   of them in one call, in a fresh subprocess (peak RSS of the process, the time
   and the process's ``ru_maxrss`` after each part);
3. fits every item set on Dask as the nightly flow runs them: ``jurymeter run
   --config X --force --no-report`` with no landing folder (nothing to ingest),
   universe ``all`` only, ``n_boot`` 200 (``--boot``), a LocalCluster of 2
   worker processes; records the wall time and the peak RSS of every process of
   the tree (the client/main process, each Dask worker, the Prefect server) and
   of their sum;
4. prints a table (rows = sizes) and the verdict: does peak memory grow with the
   record count (smallest against largest size), and if so in which process;
   appends it to ``bench/RESULTS.md`` with the command, machine and code digest.

Run from the project root::

    .venv/bin/python bench/large.py                                   # 10M, 30M, 100M
    .venv/bin/python bench/large.py --sizes 1000000,2000000 --no-append  # quick check

Disk: about 2.2 GiB of JSON Lines per 10M records (22 GiB for 100M) plus the
stores (small); parts and stores are deleted at the end unless ``--keep``.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import math
import shutil
import sys
import time
from functools import reduce
from pathlib import Path
from typing import Any

from _common import machine_facts
from nightly import (
    ITEM_SETS,
    JURYMETER,
    N_GENERATIONS,
    N_JUDGES,
    N_REPLICATES,
    N_SYSTEMS,
    PER_ITEM,
    ROOT,
    SCALE,
    append_results,
    clean_env,
    command_line,
    facts_block,
    fmt_bytes,
    fmt_roles,
    fmt_rss,
    latest_summary,
    measure,
    prefect_version,
    write_config,
    write_panel,
)

BENCH_DIR = Path(__file__).resolve().parent
DEFAULT_WORKDIR = BENCH_DIR / "_work"
GROWTH_TOLERANCE = 1.25  # peak at the largest size / peak at the smallest: above this, "grows"


# ---------------------------------------------------------------- children


def child_main(argv: list[str]) -> None:
    task, *args = argv
    out: dict[str, Any] = {"task": task}
    t0, c0 = time.perf_counter(), time.process_time()
    if task == "generate":
        path, n_items, offset = args
        out["records"] = write_panel(Path(path), int(n_items), item_offset=int(offset))
    elif task == "ingest":
        import resource

        from jurymeter.io.ingest import ingest
        from jurymeter.io.sources import discover_sources
        from jurymeter.io.store import Store
        from jurymeter.io.validate import ValidationOptions

        store_dir, *parts = args
        store = Store(store_dir)
        sources = discover_sources(parts)
        per_part: list[dict[str, Any]] = []
        t0, c0 = time.perf_counter(), time.process_time()
        clock = [t0]

        def on_source(report: Any) -> None:
            now = time.perf_counter()
            per_part.append({
                "seconds": now - clock[0],
                "maxrss": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024,
                "status": report.status,
            })
            clock[0] = now

        report = ingest(store, sources, ValidationOptions(scale=SCALE), on_source=on_source)
        out.update(totals=report.totals(), per_part=per_part)
    else:
        msg = f"unknown child task {task!r}"
        raise SystemExit(msg)
    out["seconds"] = time.perf_counter() - t0
    out["cpu_seconds"] = time.process_time() - c0
    print(json.dumps(out), flush=True)


def child_cmd(*args: str) -> list[str]:
    return [sys.executable, str(Path(__file__).resolve()), "--child", *args]


# ---------------------------------------------------------------- main


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "--child":
        child_main(sys.argv[2:])
        return
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="10000000,30000000,100000000",
                        help="comma-separated record counts, each a multiple of the part size")
    parser.add_argument("--part-records", type=int, default=None,
                        help="records per JSON Lines part [default: gcd of the sizes, at most 10M]")
    parser.add_argument("--boot", type=int, default=200, help="bootstrap resamples per fit")
    parser.add_argument("--workers", type=int, default=2, help="LocalCluster worker processes")
    parser.add_argument("--workdir", type=Path, default=DEFAULT_WORKDIR, help="scratch folder")
    parser.add_argument("--keep", action="store_true", help="keep the parts and stores")
    parser.add_argument("--no-append", action="store_true", help="do not append to RESULTS.md")
    opts = parser.parse_args()

    sizes = sorted(int(s.replace("_", "")) for s in opts.sizes.split(",") if s.strip())
    part = opts.part_records or min(10_000_000, reduce(math.gcd, sizes))
    if any(s % part for s in sizes):
        raise SystemExit(f"every size must be a multiple of the part size {part}")
    part_items = part // (len(ITEM_SETS) * PER_ITEM)
    if part_items < 2:
        raise SystemExit(f"parts of {part} records are too small")
    work = opts.workdir.resolve() / "large"
    if work.exists():
        shutil.rmtree(work)
    logs = work / "logs"
    logs.mkdir(parents=True)
    started = dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M UTC")
    facts = machine_facts()
    try:
        bench(opts, sizes, part, part_items, work, logs, started, facts)
    finally:
        if not opts.keep:
            shutil.rmtree(work, ignore_errors=True)


def bench(opts: argparse.Namespace, sizes: list[int], part: int, part_items: int, work: Path,
          logs: Path, started: str, facts: dict[str, str]) -> None:
    parts: list[Path] = []
    part_records: list[int] = []
    generation: list[dict[str, Any]] = []
    rows: list[dict[str, Any]] = []
    failures: list[str] = []
    clock0 = time.perf_counter()
    for size in sizes:
        need = size // part
        while len(parts) < need:
            k = len(parts)
            path = work / "parts" / f"part-{k + 1:03d}.jsonl"
            path.parent.mkdir(exist_ok=True)
            print(f"simulating part {k + 1} ({part_items} items per set) ...", flush=True)
            g = measure(child_cmd("generate", str(path), str(part_items), str(k * part_items)), logs,
                        f"generate-{k + 1}", env=clean_env(), cwd=ROOT)
            g["bytes"] = path.stat().st_size
            generation.append(g)
            parts.append(path)
            part_records.append(g["records"])
            print(f"  {g['records']:,} records, {fmt_bytes(g['bytes'])}, {g['seconds']:.1f} s, "
                  f"peak RSS {fmt_rss(g['peak_rss'])}", flush=True)
        n = sum(part_records[:need])
        store = work / f"store-{size}"
        print(f"[{size:,}] ingest of {need} part(s), {n:,} records, into a fresh store ...", flush=True)
        ing = measure(child_cmd("ingest", str(store), *map(str, parts[:need])), logs, f"ingest-{size}",
                      env=clean_env(), cwd=ROOT)
        t = ing["totals"]
        if not (t["read"] == n and t["accepted"] == n and t["quarantined"] == 0
                and t["duplicates_dropped"] == 0):
            failures.append(f"ingest of {size:,}: {t}")
        print(f"  {ing['seconds']:.1f} s, peak RSS {fmt_rss(ing['peak_rss'])}; per part "
              + ", ".join(f"{p['seconds']:.0f} s" for p in ing["per_part"]), flush=True)
        cfg = work / f"run-{size}.toml"
        write_config(cfg, store=store, landing=None, home=work / "home", n_boot=opts.boot,
                     universes=["all"], workers=opts.workers, report=False)
        print(f"[{size:,}] jurymeter run --force --no-report (fits on Dask) ...", flush=True)
        fit = measure([str(JURYMETER), "run", "--config", str(cfg), "--force", "--no-report"], logs,
                      f"run-{size}", env=clean_env(work / "prefect-home"), cwd=ROOT)
        fit["summary"] = latest_summary(store)
        s = fit["summary"]
        if s["status"] != "complete" or len(s["fits"]) != len(ITEM_SETS):
            failures.append(f"fits of {size:,}: status {s['status']}, "
                            f"{[(f['item_set'], f['status'], f['error']) for f in s['fits']]}")
        store_bytes = sum(p.stat().st_size for p in (store / "data").rglob("*") if p.is_file())
        print(f"  {fit['wall_seconds']:.1f} s (fits stage {s['timings'].get('fits', float('nan')):.1f} s), "
              f"peak RSS {fmt_roles(fit['roles'])}, tree {fmt_rss(fit['peak_rss'])}", flush=True)
        rows.append({"size": size, "records": n, "parts": need, "ingest": ing, "fit": fit,
                     "store_bytes": store_bytes})
        if not opts.keep:
            shutil.rmtree(store, ignore_errors=True)
    total_seconds = time.perf_counter() - clock0
    report(opts, sizes, part, part_items, rows, generation, failures, total_seconds, started, facts)


def _role_peak(fit: dict[str, Any], name: str) -> float:
    return fit["roles"].get(name, {}).get("peak", 0.0)


def report(opts: argparse.Namespace, sizes: list[int], part: int, part_items: int,
           rows: list[dict[str, Any]], generation: list[dict[str, Any]], failures: list[str],
           total_seconds: float, started: str, facts: dict[str, str]) -> None:
    table = [
        "| records | parts | ingest (s) | ingest peak RSS | ingest other procs' CPU (s) "
        "| fit wall (s) | fits stage (s) | fit peak RSS, largest process | fit peak RSS, tree sum "
        "| main (client, scheduler, Prefect flow) | Dask worker (max) | Prefect server "
        "| fit other procs' CPU (s) | block per item set |",
        "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|",
    ]
    for r in rows:
        ing, fit = r["ingest"], r["fit"]
        f0 = fit["summary"]["fits"][0]
        table.append(
            f"| {r['records']:,} | {r['parts']} | {ing['seconds']:.1f} | {fmt_rss(ing['peak_rss'])} "
            f"| {ing['other_cpu_seconds']:.0f} | {fit['wall_seconds']:.1f} "
            f"| {fit['summary']['timings'].get('fits', float('nan')):.1f} | {fmt_rss(fit['max_process_rss'])} "
            f"| {fmt_rss(fit['peak_rss'])} | {fmt_rss(_role_peak(fit, 'main'))} "
            f"| {fmt_rss(_role_peak(fit, 'dask worker'))} | {fmt_rss(_role_peak(fit, 'prefect server'))} "
            f"| {fit['other_cpu_seconds']:.0f} "
            f"| {f0.get('systems')} x {f0.get('items')} x {f0.get('judges')} ({f0.get('design')}) |"
        )
    detail = []
    for r in rows:
        ing, fit = r["ingest"], r["fit"]
        per_part = ", ".join(f"{p['seconds']:.0f} s / {fmt_rss(p['maxrss'])}" for p in ing["per_part"])
        fits = ", ".join(f"{f['item_set']} {f['seconds']:.0f} s" for f in fit["summary"]["fits"])
        detail.append(
            f"- {r['records']:,} records: ingest per part (time / the process's high-water mark after "
            f"it): {per_part}; store {fmt_bytes(r['store_bytes'])}; ingest CPU {ing['cpu_seconds']:.0f} s. "
            f"Fits (submit to result, 2 at a time): {fits}; tree CPU {fit['tree_cpu_seconds']:.0f} s; "
            f"processes: {fmt_roles(fit['roles'])}"
        )
    verdict = []
    if len(rows) >= 2:
        lo, hi = rows[0], rows[-1]
        scale = hi["records"] / lo["records"]
        checks = [
            ("ingest process", lo["ingest"]["peak_rss"], hi["ingest"]["peak_rss"]),
            ("fits: main process (client, scheduler, Prefect flow)", _role_peak(lo["fit"], "main"),
             _role_peak(hi["fit"], "main")),
            ("fits: Dask worker (max of the workers)", _role_peak(lo["fit"], "dask worker"),
             _role_peak(hi["fit"], "dask worker")),
            ("fits: Prefect server", _role_peak(lo["fit"], "prefect server"),
             _role_peak(hi["fit"], "prefect server")),
            ("fits: largest single process", lo["fit"]["max_process_rss"], hi["fit"]["max_process_rss"]),
            ("fits: sum over the tree", lo["fit"]["peak_rss"], hi["fit"]["peak_rss"]),
        ]
        grows = []
        for name, a, b in checks:
            ratio = b / a if a else float("nan")
            flag = ratio > GROWTH_TOLERANCE
            if flag:
                grows.append(name)
            verdict.append(
                f"- {name}: {fmt_rss(a)} at {lo['records']:,} -> {fmt_rss(b)} at {hi['records']:,} "
                f"({ratio:.2f}x for {scale:.0f}x the records): **{'grows' if flag else 'flat'}**"
            )
        verdict.insert(
            0,
            "- verdict (goal: peak memory does not grow with the record count; 'grows' = more than "
            f"{GROWTH_TOLERANCE:.2f}x from the smallest to the largest size): **"
            + ("goal met: flat in every process" if not grows else "goal NOT met: grows in " + "; ".join(grows))
            + "**",
        )
    gen_peak = max(g["peak_rss"] for g in generation) if generation else 0
    section = (
        f"## Larger than memory: {', '.join(f'{s:,}' for s in sizes)} records, ingest and G-study on Dask "
        f"({started})\n\n"
        f"Command: `{command_line('large.py')}`\n\n"
        f"{facts_block(facts)}"
        f"- orchestration: {prefect_version()}; fits by `jurymeter run --config X --force --no-report` "
        f"(no landing, embedded Prefect server, LocalCluster {opts.workers} worker processes x 1 thread)\n"
        f"- data: JSON Lines parts of {part:,} records (simulated in a subprocess, chunk by chunk: "
        f"{len(generation)} parts, {sum(g['seconds'] for g in generation):.0f} s, peak RSS of the generator "
        f"{fmt_rss(gen_peak)}); each part adds {part_items:,} items to each of {len(ITEM_SETS)} item sets "
        f"({N_SYSTEMS} systems x items x {N_JUDGES} judges x {N_GENERATIONS} generations x {N_REPLICATES} "
        "replicates, fully crossed, linear-model scores as in the nightly benchmark); a size of k parts is "
        "ingested from parts 1..k into a fresh store (one `ingest` call, all parts as sources)\n"
        f"- fits: every item set, universe `all`, **n_boot {opts.boot}** (not 800, to keep the time down), "
        "ensemble partitions k = 2, 3, generations averaged, CyclicJudge on, no HTML report\n"
        "- peak RSS: per process, the largest RSS seen by polling the tree every 50 ms; tree sum: the "
        "largest sum over the tree at one poll (and the root's ru_maxrss); GB = 1e9 bytes; 'other procs' "
        "CPU': CPU-seconds the rest of the machine used during the step (near 0 = clean)\n"
        f"- whole run {total_seconds / 60:.1f} min\n\n"
        + "\n".join(table)
        + "\n\n"
        + "\n".join(verdict + detail)
        + "\n"
        + f"- checks (every ingest reconciles read = accepted = records; every fit complete): "
        f"{'all passed' if not failures else 'FAILED: ' + '; '.join(failures)}\n"
    )
    print()
    print(section)
    if not opts.no_append:
        append_results(section)
        print(f"appended to {BENCH_DIR / 'RESULTS.md'}")
    if failures:
        raise SystemExit("check failed: " + "; ".join(failures))


if __name__ == "__main__":
    main()
