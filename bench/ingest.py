"""Ingest benchmark: jurymeter's ``ingest`` against a raw polars/pyarrow baseline.

One run:

1. writes ``--records`` pointwise JSON Lines records (canonical schema, unique
   keys) to ``<workdir>/judgments.jsonl``, vectorised (numpy + polars
   ``write_ndjson`` in chunks);
2. times the raw baselines, each in a fresh subprocess with its peak RSS:
   ``pl.read_ndjson`` + pyarrow ``write_dataset`` (hive, zstd),
   ``pl.read_ndjson`` + polars ``write_parquet(partition_by=...)``, and
   ``pl.scan_ndjson(...).sink_parquet(pl.PartitionBy(...))`` (streaming); plus a
   reference row (not a baseline) that reads the file in the same blocks as
   ingest and writes one Parquet file per block and item set;
3. times ``jurymeter.io.ingest.ingest`` of the same file into an empty store (fresh
   subprocess, peak RSS), checks read == accepted == N and nothing quarantined,
   and prints the ratio ingest / fastest baseline;
4. times a second ingest of the same file (no-op: content hash only) and an
   ingest of the same records under another name whose bytes differ (the final
   newline is removed), where every record is an exact duplicate and is dropped;
5. prints a markdown table and appends it to ``bench/RESULTS.md`` with the
   command, date, machine facts and the goals.

``--profile`` instead generates the file and runs the first ingest and the
all-duplicates re-ingest under cProfile (main thread and ingest's background
threads separately), printing (and appending to RESULTS.md) the hotspots in
``src/jurymeter``.

Run from the project root with the project's virtualenv::

    .venv/bin/python bench/ingest.py --records 10000000
    .venv/bin/python bench/ingest.py --records 2000000 --profile

Peak RSS is the larger of ``ru_maxrss`` of the child (``os.wait4``, exact
high-water mark) and the sum of RSS over the child's process tree polled every
50 ms with psutil. Times are measured inside the child around the operation
itself (imports excluded); the parent's wall time, including interpreter start
and imports, is reported too, and so are the child's CPU time and the CPU time
the rest of the machine used meanwhile (other jobs on a shared machine). The source file is in the page cache for every
measurement (it was just written), so these are warm-cache numbers.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import shutil
import sys
import threading
import time
from pathlib import Path
from typing import Any

from _common import (
    append_results,
    command_line,
    facts_block,
    fmt_bytes,
    fmt_rss,
    machine_facts,
    measure_child,
    src_digest,
)

BENCH_DIR = Path(__file__).resolve().parent
RESULTS = BENCH_DIR / "RESULTS.md"
DEFAULT_WORKDIR = BENCH_DIR / "_work"

ITEM_SETS = ["mt-bench", "arena-hard", "alpaca-eval", "wildbench"]
N_SYSTEMS = 40
N_JUDGES = 6
N_GENERATIONS = 3
N_ITEMS = 1000
BATCH_SIZE = 64
CHUNK_ROWS = 1_000_000
SCALE = (1.0, 10.0)
GOAL_RATIO = 2.0
GOAL_RSS_BYTES = 3_000_000_000  # "3 GB", decimal: the stricter reading
GIB = 1024**3


# ---------------------------------------------------------------- data


def write_records(path: Path, n: int, seed: int = 0) -> None:
    """Write ``n`` pointwise records with unique keys, in chunks of ``CHUNK_ROWS``.

    Record ``i`` is a mixed-radix decomposition of ``i`` into judge, system,
    generation, item set, item and replicate, so no key repeats.
    """
    import numpy as np
    import polars as pl

    rng = np.random.default_rng(seed)
    sets = pl.Series("item_set", ITEM_SETS, dtype=pl.String)
    base = dt.datetime(2025, 1, 1, tzinfo=dt.UTC)
    tmp = path.with_suffix(".partial")
    with open(tmp, "wb") as handle:
        for start in range(0, n, CHUNK_ROWS):
            i = np.arange(start, min(start + CHUNK_ROWS, n), dtype=np.int64)
            r = i
            judge, r = r % N_JUDGES, r // N_JUDGES
            system, r = r % N_SYSTEMS, r // N_SYSTEMS
            generation, r = r % N_GENERATIONS, r // N_GENERATIONS
            item_set, r = r % len(ITEM_SETS), r // len(ITEM_SETS)
            item, replicate = r % N_ITEMS, r // N_ITEMS
            frame = pl.DataFrame(
                {
                    "i": i,
                    "item_set": sets.gather(item_set),
                    "item": item,
                    "system": system,
                    "judge": judge,
                    "score": rng.integers(1, 11, len(i)).astype(np.float64),
                    "generation": generation,
                    "replicate": replicate,
                }
            )
            frame = frame.select(
                pl.col("item_set"),
                pl.format("item-{}", pl.col("item").cast(pl.String).str.zfill(5)).alias("item_id"),
                pl.format("sys-{}", pl.col("system").cast(pl.String).str.zfill(2)).alias(
                    "system_id"
                ),
                pl.format("judge-{}", pl.col("judge")).alias("judge_id"),
                pl.col("score"),
                pl.col("generation"),
                pl.col("replicate"),
                pl.format(
                    "batch-{}", (pl.col("i") // BATCH_SIZE).cast(pl.String).str.zfill(8)
                ).alias("batch_id"),
                (pl.col("i") % BATCH_SIZE).alias("batch_position"),
                (pl.lit(base) + pl.duration(seconds=pl.col("i")))
                .dt.strftime("%Y-%m-%dT%H:%M:%SZ")
                .alias("timestamp"),
                pl.format("run-{}", (pl.col("i") // 1_000_000).cast(pl.String).str.zfill(4)).alias(
                    "run_id"
                ),
            )
            frame.write_ndjson(handle)
    os.replace(tmp, path)


def make_duplicate_variant(src: Path, dst: Path) -> None:
    """Same records, different bytes: a copy without the final newline."""
    shutil.copyfile(src, dst)
    with open(dst, "rb+") as handle:
        handle.seek(-1, os.SEEK_END)
        if handle.read(1) != b"\n":
            msg = f"{src} does not end with a newline"
            raise RuntimeError(msg)
        handle.truncate(os.path.getsize(dst) - 1)


# ---------------------------------------------------------------- children


def child_main(argv: list[str]) -> None:
    """Run one measured operation; print one JSON line with its results."""
    task, *args = argv
    out: dict[str, Any] = {"task": task}
    if task == "baseline-pyarrow":
        import polars as pl
        import pyarrow.dataset as ds

        src, dst = args
        t0, c0 = time.perf_counter(), time.process_time()
        frame = pl.read_ndjson(src)
        t1 = time.perf_counter()
        ds.write_dataset(
            frame.to_arrow(),
            dst,
            format="parquet",
            partitioning=["item_set"],
            partitioning_flavor="hive",
            file_options=ds.ParquetFileFormat().make_write_options(compression="zstd"),
            existing_data_behavior="overwrite_or_ignore",
        )
        t2 = time.perf_counter()
        out.update(seconds=t2 - t0, read_seconds=t1 - t0, rows=frame.height)
    elif task == "baseline-polars-eager":
        import polars as pl

        src, dst = args
        t0, c0 = time.perf_counter(), time.process_time()
        frame = pl.read_ndjson(src)
        t1 = time.perf_counter()
        frame.write_parquet(dst, partition_by="item_set", compression="zstd")
        t2 = time.perf_counter()
        out.update(seconds=t2 - t0, read_seconds=t1 - t0, rows=frame.height)
    elif task == "baseline-sink":
        import polars as pl

        src, dst = args
        t0, c0 = time.perf_counter(), time.process_time()
        pl.scan_ndjson(src).sink_parquet(
            pl.PartitionBy(dst, key="item_set"), compression="zstd", mkdir=True
        )
        t1 = time.perf_counter()
        out.update(seconds=t1 - t0)
    elif task == "reference-blocks":
        import io

        import polars as pl

        src, dst, block_bytes = args
        t0, c0 = time.perf_counter(), time.process_time()
        rows = parts = 0
        with open(src, "rb") as handle:
            carry = b""
            while True:
                block = handle.read(int(block_bytes))
                data = carry + block
                cut = data.rfind(b"\n") if block else len(data) - 1
                carry, data = data[cut + 1 :], data[: cut + 1]
                if data:
                    frame = pl.read_ndjson(io.BytesIO(data))
                    rows += frame.height
                    for (key,), part in frame.partition_by(
                        "item_set", as_dict=True, include_key=False
                    ).items():
                        folder = Path(dst) / f"item_set={key}"
                        folder.mkdir(parents=True, exist_ok=True)
                        parts += 1
                        part.write_parquet(folder / f"part-{parts:05d}.parquet", compression="zstd")
                if not block:
                    break
        t1 = time.perf_counter()
        out.update(seconds=t1 - t0, rows=rows)
    elif task == "ingest":
        from jurymeter.io.ingest import ingest
        from jurymeter.io.sources import discover_sources
        from jurymeter.io.store import Store
        from jurymeter.io.validate import ValidationOptions

        src, store_dir, block_bytes, *rest = args
        prof_out = rest[0] if rest else None
        out["src_digest"] = src_digest()  # the code this child imported
        store = Store(store_dir)
        sources = discover_sources([src])
        options = ValidationOptions(scale=SCALE)
        profiled = prof_out is not None
        if profiled:
            main_prof, thread_profs = _start_profiling()
        t0, c0 = time.perf_counter(), time.process_time()
        report = ingest(store, sources, options, block_bytes=int(block_bytes))
        t1 = time.perf_counter()
        if profiled:
            _save_profiles(main_prof, thread_profs, prof_out)
        out.update(
            seconds=t1 - t0,
            totals=report.totals(),
            sources=[
                {"status": s.status, "reasons": s.reasons, "balanced": s.balanced}
                for s in report.sources
            ],
        )
    else:
        msg = f"unknown child task {task!r}"
        raise SystemExit(msg)
    # CPU time of all threads of this process during the operation.
    out["cpu_seconds"] = time.process_time() - c0
    print(json.dumps(out), flush=True)


def _start_profiling() -> tuple[Any, list[Any]]:
    """cProfile the main thread and, separately, every thread started from now on.

    ``python -m cProfile`` sees only the main thread; ingest parses in a
    background thread, so each new thread gets its own profiler too.
    """
    import cProfile

    thread_profs: list[cProfile.Profile] = []

    def start_in_thread(*_: Any) -> None:
        prof = cProfile.Profile()
        thread_profs.append(prof)
        sys.setprofile(None)
        prof.enable()

    threading.setprofile(start_in_thread)
    main_prof = cProfile.Profile()
    main_prof.enable()
    return main_prof, thread_profs


def _save_profiles(main_prof: Any, thread_profs: list[Any], path: str) -> None:
    import pstats

    main_prof.disable()
    threading.setprofile(None)  # type: ignore[arg-type]
    main_prof.dump_stats(path)
    if thread_profs:
        stats = pstats.Stats(thread_profs[0])
        for prof in thread_profs[1:]:
            stats.add(prof)
        stats.dump_stats(path + ".threads")


def run_child(
    args: list[str], log_dir: Path, name: str, *, python_args: list[str] | None = None
) -> dict[str, Any]:
    """Run ``python [python_args] bench/ingest.py --child ARGS`` and measure it (``_common.measure_child``)."""
    cmd = [sys.executable, *(python_args or []), str(Path(__file__).resolve()), "--child", *args]
    return measure_child(cmd, log_dir, name)


# ---------------------------------------------------------------- reporting


def dir_size(path: Path) -> tuple[int, int]:
    """(bytes, number of .parquet files) under ``path``."""
    total = files = 0
    for p in path.rglob("*"):
        if p.is_file():
            total += p.stat().st_size
            files += p.suffix == ".parquet"
    return total, files


# ---------------------------------------------------------------- main


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "--child":
        child_main(sys.argv[2:])
        return
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--records", type=int, default=10_000_000, help="records to generate")
    parser.add_argument("--workdir", type=Path, default=DEFAULT_WORKDIR, help="scratch folder")
    parser.add_argument(
        "--block-mb",
        type=int,
        default=64,
        help="block size passed to ingest(block_bytes=...) and used by the reference row (MiB)",
    )
    parser.add_argument("--keep", action="store_true", help="keep the generated files and stores")
    parser.add_argument(
        "--profile",
        action="store_true",
        help="only generate the file and profile the first and the duplicate ingest",
    )
    parser.add_argument("--top", type=int, default=25, help="profile rows to show")
    parser.add_argument("--no-append", action="store_true", help="do not append to RESULTS.md")
    opts = parser.parse_args()

    n = opts.records
    work = opts.workdir.resolve() / f"n{n}"
    if work.exists():
        shutil.rmtree(work)
    logs = work / "logs"
    logs.mkdir(parents=True)
    src = work / "judgments.jsonl"
    block_bytes = opts.block_mb * 1024 * 1024
    started = dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M UTC")
    facts = machine_facts()

    print(f"writing {n:,} records to {src} ...", flush=True)
    t0 = time.perf_counter()
    write_records(src, n)
    gen_seconds = time.perf_counter() - t0
    size = src.stat().st_size
    print(f"  {fmt_bytes(size)} in {gen_seconds:.1f} s", flush=True)

    try:
        if opts.profile:
            profile(opts, n, work, logs, src, size, block_bytes, started, facts)
        else:
            bench(opts, n, work, logs, src, size, gen_seconds, block_bytes, started, facts)
    finally:
        if not opts.keep:
            shutil.rmtree(work, ignore_errors=True)


def bench(
    opts: argparse.Namespace,
    n: int,
    work: Path,
    logs: Path,
    src: Path,
    size: int,
    gen_seconds: float,
    block_bytes: int,
    started: str,
    facts: dict[str, str],
) -> None:
    import polars as pl

    rows: list[tuple[str, dict[str, Any], str]] = []
    failures: list[str] = []

    baselines = [
        ("baseline-sink", "`pl.scan_ndjson(f).sink_parquet(pl.PartitionBy(dir, key='item_set'))`"),
        (
            "baseline-polars-eager",
            "`pl.read_ndjson(f).write_parquet(dir, partition_by='item_set')`",
        ),
        ("baseline-pyarrow", "`pl.read_ndjson(f)` + pyarrow `write_dataset` (hive, zstd)"),
    ]
    base_results: dict[str, dict[str, Any]] = {}
    reference = (
        "reference-blocks",
        f"reference (not a baseline): `pl.read_ndjson` per {opts.block_mb} MiB block "
        "+ `write_parquet` per item set",
    )
    for task, label in [*baselines, reference]:
        out_dir = work / task
        print(f"{task} ...", flush=True)
        extra = [str(block_bytes)] if task == reference[0] else []
        r = run_child([task, str(src), str(out_dir), *extra], logs, task)
        nbytes, nfiles = dir_size(out_dir)
        check = pl.scan_parquet(str(out_dir / "**" / "*.parquet")).select(pl.len()).collect().item()
        if check != n:
            failures.append(f"{task} wrote {check} rows, expected {n}")
        note = f"{nfiles} files, {fmt_bytes(nbytes)}"
        if "read_seconds" in r:
            note += f"; read {r['read_seconds']:.1f} s"
        print(f"  {r['seconds']:.1f} s, peak RSS {fmt_rss(r['peak_rss'])} ({note})", flush=True)
        if task != reference[0]:
            base_results[task] = r
        else:
            ref = r
        rows.append((label, r, note))
        shutil.rmtree(out_dir, ignore_errors=True)
    best_task = min(base_results, key=lambda t: base_results[t]["seconds"])
    best = base_results[best_task]

    store = work / "store"
    print("ingest into an empty store ...", flush=True)
    first = run_child(["ingest", str(src), str(store), str(block_bytes)], logs, "ingest-first")
    totals = first["totals"]
    if not (
        totals["read"] == n
        and totals["accepted"] == n
        and totals["quarantined"] == 0
        and totals["duplicates_dropped"] == 0
        and first["sources"][0]["status"] == "ingested"
    ):
        failures.append(f"first ingest reconciliation: {totals}, {first['sources']}")
    nbytes, nfiles = dir_size(store / "data")
    ratio = first["seconds"] / best["seconds"]
    ratio_ref = first["seconds"] / ref["seconds"]
    ratio_rss = first["peak_rss"] / best["peak_rss"]
    print(
        f"  {first['seconds']:.1f} s, peak RSS {fmt_rss(first['peak_rss'])}; "
        f"ratio to {best_task}: {ratio:.2f}x; totals {totals}",
        flush=True,
    )
    rows.append(
        (
            "**jurymeter ingest**, empty store",
            first,
            f"read {totals['read']:,} = accepted {totals['accepted']:,} + quarantined "
            f"{totals['quarantined']} + dropped {totals['duplicates_dropped']}; "
            f"{nfiles} parts, {fmt_bytes(nbytes)}",
        )
    )

    print("second ingest of the same file (no-op) ...", flush=True)
    noop = run_child(["ingest", str(src), str(store), str(block_bytes)], logs, "ingest-noop")
    if noop["sources"][0]["status"] != "already_ingested" or noop["totals"]["read"] != 0:
        failures.append(f"no-op ingest: {noop['totals']}, {noop['sources']}")
    print(f"  {noop['seconds']:.1f} s, peak RSS {fmt_rss(noop['peak_rss'])}", flush=True)
    rows.append(
        (
            "jurymeter ingest, same file again (no-op)",
            noop,
            f"status {noop['sources'][0]['status']}",
        )
    )

    dup = work / "judgments-redelivered.jsonl"
    make_duplicate_variant(src, dup)
    print("ingest of the same records under another name (all duplicates) ...", flush=True)
    again = run_child(["ingest", str(dup), str(store), str(block_bytes)], logs, "ingest-dups")
    t = again["totals"]
    if not (
        t["read"] == n
        and t["duplicates_dropped"] == n
        and t["accepted"] == 0
        and t["quarantined"] == 0
    ):
        failures.append(f"duplicate re-ingest reconciliation: {t}, {again['sources']}")
    stored = (
        pl.scan_parquet(str(store / "data" / "**" / "*.parquet")).select(pl.len()).collect().item()
    )
    if stored != n:
        failures.append(f"store holds {stored} rows after the re-ingest, expected {n}")
    print(
        f"  {again['seconds']:.1f} s, peak RSS {fmt_rss(again['peak_rss'])}; totals {t}; "
        f"store rows {stored:,}",
        flush=True,
    )
    rows.append(
        (
            "jurymeter ingest, same records, other bytes (all duplicates)",
            again,
            f"read {t['read']:,} = accepted {t['accepted']} + quarantined {t['quarantined']} "
            f"+ dropped {t['duplicates_dropped']:,}; store still {stored:,} rows",
        )
    )

    worst_rss = max(first["peak_rss"], noop["peak_rss"], again["peak_rss"])
    speed_ok = ratio <= GOAL_RATIO
    rss_ok = worst_rss < GOAL_RSS_BYTES
    table = [
        "| step | time (s) | CPU (s) | wall incl. start-up (s) | peak RSS | peak anon RSS "
        "| other procs' CPU (s) | notes |",
        "|---|---:|---:|---:|---:|---:|---:|---|",
    ]
    for label, r, note in rows:
        if r.get("src_digest", facts["src_digest"]) != facts["src_digest"]:
            note += f"; ran on changed library code {r['src_digest']}"
        table.append(
            f"| {label} | {r['seconds']:.1f} | {r['cpu_seconds']:.1f} | {r['wall_seconds']:.1f} "
            f"| {fmt_rss(r['peak_rss'])} | {fmt_rss(r['anon_rss'])} "
            f"| {r['other_cpu_seconds']:.0f} | {note} |"
        )
    summary = [
        f"- ingest / fastest baseline ({best_task}): **{ratio:.2f}x** time, {ratio_rss:.2f}x peak RSS "
        f"— goal <= {GOAL_RATIO:.0f}x: **{'met' if speed_ok else 'NOT met'}**",
        f"- CPU-time ratio ingest / {best_task}: "
        f"{first['cpu_seconds'] / best['cpu_seconds']:.2f}x (less sensitive to other load)",
        f"- ingest / block-wise reference (same {opts.block_mb} MiB blocks, no validation, "
        f"no lineage, no duplicate check): {ratio_ref:.2f}x time (informational)",
        f"- peak RSS of jurymeter ingest (worst of the three runs): **{fmt_rss(worst_rss)}** "
        f"— goal < 3 GB (3e9 bytes): **{'met' if rss_ok else 'NOT met'}**",
        f"- reconciliation checks: {'all passed' if not failures else 'FAILED: ' + '; '.join(failures)}",
    ]
    section = (
        f"## Ingest, {n:,} pointwise records ({started})\n\n"
        f"Command: `{command_line('ingest.py')}`\n\n"
        f"{facts_block(facts)}"
        f"- input: one JSON Lines file, {n:,} records, {fmt_bytes(size)} "
        f"(generated in {gen_seconds:.1f} s); {len(ITEM_SETS)} item sets, {N_SYSTEMS} systems, "
        f"{N_JUDGES} judges, {N_GENERATIONS} generations; warm page cache\n"
        f"- ingest(block_bytes={block_bytes}); ValidationOptions(scale={SCALE})\n"
        f"- goals: ingest within {GOAL_RATIO:.0f}x of the raw baseline; peak memory under 3 GB\n"
        "- memory in GB = 1e9 bytes; peak RSS (the goal) includes file pages a process maps, and polars'\n"
        "  whole-file readers memory-map the input; peak anon RSS (sampled every 50 ms) leaves them out\n"
        f"- CPU (s): all threads of the child during the step ({facts['nproc']} cores); other procs' CPU: "
        "CPU-seconds the rest of the machine used during the step (other jobs on a shared machine "
        "slow the step down; near 0 means the numbers are clean)\n\n"
        + "\n".join(table)
        + "\n\n"
        + "\n".join(summary)
        + "\n"
    )
    print()
    print(section)
    if not opts.no_append:
        append_results(section)
        print(f"appended to {RESULTS}")
    if failures:
        raise SystemExit("reconciliation check failed: " + "; ".join(failures))


def profile(
    opts: argparse.Namespace,
    n: int,
    work: Path,
    logs: Path,
    src: Path,
    size: int,
    block_bytes: int,
    started: str,
    facts: dict[str, str],
) -> None:
    """Profile the first ingest into an empty store, then the all-duplicates re-ingest."""
    store = work / "store"
    dup = work / "judgments-redelivered.jsonl"
    steps = [
        ("first ingest into an empty store", src, "ingest-profile"),
        ("re-ingest of the same records under another name (all duplicates)", dup, "dups-profile"),
    ]
    bodies = []
    for what, path, name in steps:
        if path == dup:
            make_duplicate_variant(src, dup)
        prof = work / f"{name}.prof"
        print(f"profiling the {what} ...", flush=True)
        r = run_child(["ingest", str(path), str(store), str(block_bytes), str(prof)], logs, name)
        print(
            f"  {r['seconds']:.1f} s under cProfile, peak RSS {fmt_rss(r['peak_rss'])}; "
            f"{r['totals']}",
            flush=True,
        )
        bodies.append(
            f"### {what[0].upper() + what[1:]}\n\n"
            f"{r['seconds']:.1f} s under cProfile ({r['cpu_seconds']:.1f} CPU-s), peak RSS "
            f"{fmt_rss(r['peak_rss'])}; totals {r['totals']}; other processes used "
            f"{r['other_cpu_seconds']:.0f} CPU-s meanwhile; library code {r['src_digest']}\n\n"
            + _profile_tables(prof, r["seconds"], opts.top)
        )
    section = (
        f"## Profile: ingest of {n:,} records under cProfile ({started})\n\n"
        f"Command: `{command_line('ingest.py')}`\n\n"
        f"{facts_block(facts)}"
        f"- input {fmt_bytes(size)}; ingest(block_bytes={block_bytes})\n"
        "- cProfile (`cProfile.Profile`, enabled around `ingest()` only, so imports are out) in the "
        "main thread and in each thread ingest starts; `python -m cProfile` would miss the "
        "background threads. Times are inflated by the profiler.\n"
        "- polars/pyarrow run in native threads: their time is charged to the Python call "
        "that waits for them (e.g. `read_ndjson`, `collect`, `write_table`); a main-thread wait "
        "on a background thread shows as `queue.get`/`lock.acquire`.\n\n" + "\n".join(bodies)
    )
    print()
    print(section)
    if not opts.no_append:
        append_results(section)
        print(f"appended to {RESULTS}")


def _profile_tables(prof: Path, total: float, top: int) -> str:
    """Markdown: src/jurymeter functions by cumulative time, and all code by own time."""
    import io
    import pstats

    def ours(path: Path) -> list[str]:
        stats = pstats.Stats(str(path))
        rows = []
        for (filename, line, func), (_, nc, tt, ct, _) in stats.stats.items():  # type: ignore[attr-defined]
            if "/jurymeter/" in filename and "/bench/" not in filename and func != "<module>":
                module = filename.rsplit("/jurymeter/", 1)[1].removesuffix(".py")
                rows.append((ct, tt, nc, f"{module}.{func}:{line}"))
        rows.sort(reverse=True)
        table = [
            "| function (src/jurymeter) | cumulative (s) | % of ingest time | own (s) | calls |",
            "|---|---:|---:|---:|---:|",
        ]
        for ct, tt, nc, name in rows[:top]:
            table.append(f"| `{name}` | {ct:.2f} | {100 * ct / total:.0f}% | {tt:.2f} | {nc} |")
        return table

    def by_own_time(path: Path) -> str:
        buf = io.StringIO()
        pstats.Stats(str(path), stream=buf).sort_stats("tottime").print_stats(15)
        text = "\n".join(ln for ln in buf.getvalue().splitlines() if ln.strip())
        return text[text.find("ncalls") :]

    threads = Path(str(prof) + ".threads")
    parts = ["Main thread:\n", *ours(prof)]
    if threads.exists():
        parts += [
            "",
            "Background threads (their time overlaps the main thread's):\n",
            *ours(threads),
        ]
    for label, path in (("main thread", prof), ("background threads", threads)):
        if path.exists():
            parts += [
                "",
                f"<details><summary>top 15 by own time, {label} (all code)</summary>\n",
                "```",
                by_own_time(path),
                "```\n",
                "</details>",
            ]
    return "\n".join(parts) + "\n"


if __name__ == "__main__":
    main()
