"""New records into stores of growing size: does the duplicate pass cost O(new) (issue 25 point 2)?

The issue's goal: new 5M records into stores of 0, 50M and 100M records, the
largest within 1.1x of the first. Each store is built once from nights of
``--night`` records (each night its own systems, as a leaderboard adds models),
then every timed ingest goes into a fresh copy of it (hard links of the parts:
the store's committed files are never written again). Three kinds of new file:

fresh        new systems on the same items and judges (a night's new models):
             ``io.key_values`` prunes every committed source;
re-delivered one stored night's records in other bytes (all duplicates): the
             pass reads that night's source only;
gap fill     records of known systems, items and judges whose combinations no
             night delivered (each night leaves ``GAP_SHARE`` of its cells
             out), of the nights the smallest non-empty store holds: the pass
             reads those nights' sources (their values meet the new ones on
             every column) and no other, so its cost grows with the sources
             the file overlaps, not with the store.

Each ingest runs in a fresh child (``bench/_common.measure_child``: wall from
outside, the child's CPU, peak RSS, other processes' CPU meanwhile). With
``--no-pruning`` the child switches the pruning off (every committed source a
candidate: the pass before ``io.key_values``), the baseline in the same run.

    .venv/bin/python bench/dedupe_scale.py --stores 0,10000000,20000000 --new 1000000 --workdir /work/benchd
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import shutil
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import append_results, command_line, facts_block, fmt_rss, machine_facts, measure_child

ITEMS, JUDGES = 2000, 5
GAP_SHARE = 0.05


def systems_per_night(night: int) -> int:
    """The systems a night of ``night`` records spans (its cells, gaps included, fill whole systems)."""
    return -(-int(night / (1 - GAP_SHARE)) // (ITEMS * JUDGES))


def write_night(path: Path, n: int, first_system: int, *, seed: int, gaps: str = "leave", night: int = 0) -> None:
    """``n`` pointwise records of systems from ``first_system`` on.

    ``gaps``: "leave" out the night's gap cells, or write "only" (at most ``n``
    of) the gap cells the night of ``night`` records left out.
    """
    import numpy as np
    import polars as pl

    rng = np.random.default_rng(seed)
    size = int((n if gaps == "leave" else night) / (1 - GAP_SHARE))
    i = np.arange(size, dtype=np.int64)
    judge, rest = i % JUDGES, i // JUDGES
    item, system = rest % ITEMS, rest // ITEMS + first_system
    gap = (np.random.default_rng(first_system).random(size)) < GAP_SHARE
    keep = ~gap if gaps == "leave" else gap
    frame = pl.DataFrame({"item": item[keep][:n], "system": system[keep][:n], "judge": judge[keep][:n]})
    frame.select(
        pl.lit("chat").alias("item_set"),
        pl.format("item-{}", pl.col("item").cast(pl.String).str.zfill(5)).alias("item_id"),
        pl.format("sys-{}", pl.col("system").cast(pl.String).str.zfill(5)).alias("system_id"),
        pl.format("judge-{}", pl.col("judge")).alias("judge_id"),
        pl.Series("score", rng.integers(1, 11, frame.height).astype(np.float64)),
        pl.lit(0).alias("generation"),
        pl.lit(0).alias("replicate"),
    ).write_ndjson(path)


def child(argv: list[str]) -> None:
    src, store_dir, pruning = argv
    from jurymeter.io import duplicates
    from jurymeter.io.ingest import ingest
    from jurymeter.io.sources import discover_sources
    from jurymeter.io.store import Store
    from jurymeter.io.validate import ValidationOptions

    if pruning == "off":
        duplicates.candidate_sources = lambda store, protocol, item_set, files, values, columns: (  # type: ignore[assignment]
            {f.source_id for f in files}, set())
    t0, c0 = time.perf_counter(), time.process_time()
    report = ingest(Store(store_dir), discover_sources([src]), ValidationOptions())
    print(json.dumps({"seconds": time.perf_counter() - t0, "cpu_seconds": time.process_time() - c0,
                      "totals": report.totals()}), flush=True)


def build_stores(workdir: Path, sizes: list[int], night: int) -> dict[int, Path]:
    """Stores of each of ``sizes`` records, ingested night by night into one store and snapshot at each size."""
    stores = {size: workdir / f"store-{size}" for size in sizes}
    if all((workdir / f"store-{size}.built").exists() for size in sizes):
        return stores
    from jurymeter.io.ingest import ingest
    from jurymeter.io.sources import discover_sources
    from jurymeter.io.store import Store
    from jurymeter.io.validate import ValidationOptions

    growing = workdir / "store-growing"
    shutil.rmtree(growing, ignore_errors=True)
    growing.mkdir()
    for k in range(max(sizes) // night + 1):
        if k * night in stores:
            copy_store(growing, stores[k * night])
            (workdir / f"store-{k * night}.built").write_text("")
        if k == max(sizes) // night:
            break
        path = workdir / f"build-{k}.jsonl"
        write_night(path, night, k * systems_per_night(night), seed=k)
        ingest(Store(str(growing)), discover_sources([str(path)]), ValidationOptions())
        path.unlink()
    shutil.rmtree(growing, ignore_errors=True)
    return stores


def copy_store(src: Path, dst: Path) -> None:
    """A fresh copy to ingest into: committed files hard-linked (never written again), the rest copied."""
    shutil.rmtree(dst, ignore_errors=True)
    shutil.copytree(src, dst, copy_function=os.link)


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "--child":
        child(sys.argv[2:])
        return
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--stores", default="0,10000000,20000000")
    parser.add_argument("--new", type=int, default=1_000_000)
    parser.add_argument("--workdir", type=Path, required=True)
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--kinds", default="fresh,re-delivered,gap fill", help="which new files, comma-separated")
    parser.add_argument("--pruning", default="on,off", help="on, off or both, comma-separated")
    args = parser.parse_args()
    workdir: Path = args.workdir
    workdir.mkdir(parents=True, exist_ok=True)
    facts = machine_facts()
    night = args.new
    sizes = [int(s) for s in args.stores.split(",")]
    stores = build_stores(workdir, sizes, night)
    fresh = workdir / "new-fresh.jsonl"
    write_night(fresh, args.new, 10_000_000, seed=99)  # systems no store holds
    redelivered = workdir / "new-redelivered.jsonl"
    write_night(redelivered, args.new, 0, seed=0)  # the first night's records ...
    with open(redelivered, "rb+") as handle:  # ... in other bytes: without the final newline
        handle.truncate(redelivered.stat().st_size - 1)
    gap = workdir / "new-gap.jsonl"
    # The gaps of the nights every store but the empty one holds, so each store reads the same sources for them.
    gap_nights = max(1, min([s for s in sizes if s] or [night]) // night)
    gaps_per_night = max(1, args.new // gap_nights)
    with open(gap, "wb") as out:
        for k in range(gap_nights):
            part = workdir / "gap-part.jsonl"
            write_night(part, gaps_per_night, k * systems_per_night(night), seed=k, gaps="only",
                        night=night)
            out.write(part.read_bytes())
    rows: list[dict[str, Any]] = []
    for _ in range(args.repeats):
        for size in sizes:
            for kind, path in (("fresh", fresh), ("re-delivered", redelivered), ("gap fill", gap)):
                if (size == 0 and kind != "fresh") or kind not in args.kinds.split(","):
                    continue
                for pruning in args.pruning.split(","):
                    target = workdir / "target"
                    copy_store(stores[size], target)
                    name = f"{size}-{kind}-{pruning}".replace(" ", "_")
                    result = measure_child([sys.executable, __file__, "--child", str(path), str(target), pruning],
                                           workdir, name)
                    rows.append({"stored": size, "kind": kind, "pruning": pruning, **result})
    append_results(report(rows, facts, args))


def report(rows: list[dict[str, Any]], facts: dict[str, str], args: argparse.Namespace) -> str:
    import statistics

    stamp = dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M UTC")
    out = [f"## Dedupe against store size, key values pruning on and off, issue 25 point 2 ({stamp})\n",
           f"Command: `{command_line('dedupe_scale.py')}`\n", facts_block(facts),
           f"- {args.new:,} new records into stores of {args.stores} records (one item set; nights of {args.new:,} "
           f"records, each its own {systems_per_night(args.new)} systems x {ITEMS} items x {JUDGES} "
           "judges); each ingest in a fresh child into a fresh copy of the store; medians of "
           f"{args.repeats} runs; CPU = the child's CPU time around `ingest()`\n",
           "| stored | new records | pruning | wall s | CPU s | peak RSS | dropped | other CPU-s |",
           "|---:|---|---|---:|---:|---:|---:|---:|"]
    keys = sorted({(r["stored"], r["kind"], r["pruning"]) for r in rows}, key=lambda k: (k[1], k[0], k[2]))
    med: dict[tuple[Any, ...], float] = {}
    for key in keys:
        group = [r for r in rows if (r["stored"], r["kind"], r["pruning"]) == key]
        wall = statistics.median(r["seconds"] for r in group)
        cpu = statistics.median(r["cpu_seconds"] for r in group)
        med[key] = cpu
        rss = max(r["peak_rss"] for r in group)
        other = statistics.median(r["other_cpu_seconds"] for r in group)
        dropped = group[0]["totals"].get("duplicates_dropped", 0)
        out.append(f"| {key[0]:,} | {key[1]} | {key[2]} | {wall:.2f} | {cpu:.2f} | {fmt_rss(rss)} | {dropped:,} "
                   f"| {other:.1f} |")
    sizes = sorted({k[0] for k in keys})
    if ("fresh" in {k[1] for k in keys}) and len(sizes) > 1:
        first, last = (0 if 0 in sizes else sizes[0]), sizes[-1]
        for pruning in ("on", "off"):
            a, b = med.get((first, "fresh", pruning)), med.get((last, "fresh", pruning))
            if a and b:
                out.append(f"\n- fresh, pruning {pruning}: largest store / first, CPU: **{b / a:.2f}x** (goal <= 1.1x)")
    return "\n".join(out) + "\n"


if __name__ == "__main__":
    main()
