"""Clean-path regression of ingest: this checkout against a baseline revision, same run, interleaved.

Issue 22 hardened the door (invalid text, cut streams, byte-order marks, bad
files among good ones) under the rule that none of it may slow the clean path
by more than 5%. This script measures that rule on clean inputs of every
reading path:

- ``jsonl``: canonical JSON Lines, local and uncompressed (the streaming path);
- ``jsonl.gz``: the same records gzip-compressed (the block path);
- ``csv``: the same records as CSV (the standard library's reader);
- ``parquet``: the same records as Parquet;
- ``mt-bench``: MT-Bench single judgments through the log adapter;
- ``duplicates``: the canonical records again under other bytes (no final
  newline) into the store that holds them: every record an exact duplicate
  (the store's first ingest is done before the clock starts).

Each measured step is ``jurymeter.io.ingest.ingest`` of one file into an empty
store, in a fresh subprocess (``_common.measure_child``), once with the
baseline's ``src/`` first on ``PYTHONPATH`` (``git archive`` of ``--baseline``)
and once with this checkout's, alternating which goes first, ``--repeat``
times. The ratio is of medians (wall time inside the child, and CPU time,
which other jobs on a shared machine disturb less).

Run from the project root::

    .venv/bin/python bench/ingest_regress.py --records 2000000 --baseline 39727fe
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import time
from pathlib import Path
from typing import Any

from _common import append_results, command_line, facts_block, machine_facts, measure_child
from adapters import export_baseline, wait_for_quiet, write_logs
from ingest import SCALE, make_duplicate_variant, write_records

BENCH_DIR = Path(__file__).resolve().parent
GOAL = 1.05
KINDS = ("jsonl", "jsonl.gz", "csv", "parquet", "mt-bench", "duplicates")


def child_main(argv: list[str]) -> None:
    """One ingest of ``src`` into a new store at ``store_dir``; one JSON line with the seconds."""
    from jurymeter.io.ingest import ingest
    from jurymeter.io.sources import discover_sources
    from jurymeter.io.store import Store
    from jurymeter.io.validate import ValidationOptions

    src, store_dir, log_format, *first = argv
    store = Store(store_dir)
    if first:  # the records already stored: what the measured ingest re-delivers
        ingest(store, discover_sources(first, log_format=log_format), ValidationOptions(scale=SCALE))
    sources = discover_sources([src], log_format=log_format)
    scale = None if log_format == "auto" else SCALE
    t0, c0 = time.perf_counter(), time.process_time()
    report = ingest(store, sources, ValidationOptions(scale=scale))
    out: dict[str, Any] = {
        "seconds": time.perf_counter() - t0,
        "cpu_seconds": time.process_time() - c0,
        "totals": report.totals(),
    }
    print(json.dumps(out), flush=True)


def run_child(args: list[str], log_dir: Path, name: str, pythonpath: Path) -> dict[str, Any]:
    """This script's ``--child`` step in a fresh process with ``pythonpath`` first (``_common.measure_child``)."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env["PYTHONPATH"] = str(pythonpath)
    return measure_child([sys.executable, str(Path(__file__).resolve()), "--child", *args], log_dir, name, env=env)


def make_inputs(work: Path, records: int) -> dict[str, tuple[Path, str]]:
    """Every clean input, written once: kind -> (path, --format)."""
    import gzip

    import polars as pl

    jsonl = work / "records.jsonl"
    if not jsonl.exists():
        write_records(jsonl, records)
    gz = work / "records.jsonl.gz"
    if not gz.exists():
        with open(jsonl, "rb") as src, gzip.open(gz, "wb", compresslevel=1) as dst:
            shutil.copyfileobj(src, dst, 16 * 1024 * 1024)
    frame = None
    csv_path, parquet = work / "records.csv", work / "records.parquet"
    if not csv_path.exists() or not parquet.exists():
        frame = pl.read_ndjson(jsonl)
        frame.write_csv(csv_path)
        frame.write_parquet(parquet)
    variant = work / "records-other-bytes.jsonl"
    if not variant.exists():
        make_duplicate_variant(jsonl, variant)
    mt = work / "mt_bench_single.jsonl"
    if not mt.exists():
        write_logs(mt, work / "mt_bench_canonical.jsonl", max(1, records // 4))
    return {
        "jsonl": (jsonl, "canonical"),
        "jsonl.gz": (gz, "canonical"),
        "csv": (csv_path, "canonical"),
        "parquet": (parquet, "canonical"),
        "mt-bench": (mt, "auto"),
        "duplicates": (variant, "canonical"),
    }


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "--child":
        child_main(sys.argv[2:])
        return
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=2_000_000)
    parser.add_argument("--baseline", default="39727fe", help="git revision before the change")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--kinds", default=",".join(KINDS))
    parser.add_argument("--workdir", type=Path, default=BENCH_DIR / "_work" / "ingest_regress")
    parser.add_argument("--no-append", action="store_true")
    parser.add_argument("--quiet", type=float, default=20.0, help="seconds to wait at most for an idle machine")
    args = parser.parse_args()
    work = args.workdir
    work.mkdir(parents=True, exist_ok=True)
    kinds = [k for k in args.kinds.split(",") if k]
    inputs = make_inputs(work, args.records)
    baseline_src = export_baseline(args.baseline, work)
    here_src = BENCH_DIR.parent / "src"
    facts = machine_facts()
    runs: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for rep in range(args.repeat):
        for kind in kinds:
            path, log_format = inputs[kind]
            order = [("baseline", baseline_src), ("this", here_src)]
            if rep % 2:
                order.reverse()
            for name, src in order:
                wait_for_quiet(args.quiet)
                store = work / f"store-{name}-{kind}"
                shutil.rmtree(store, ignore_errors=True)
                first = [str(inputs["jsonl"][0])] if kind == "duplicates" else []
                result = run_child([str(path), str(store), log_format, *first], work, f"{name}-{kind}-{rep}", src)
                runs.setdefault((kind, name), []).append(result)
                shutil.rmtree(store, ignore_errors=True)
                print(f"{kind:9s} {name:8s} rep {rep}: {result['seconds']:.2f} s, "
                      f"cpu {result['cpu_seconds']:.2f} s, other procs {result['other_cpu_seconds']:.1f} cpu-s",
                      flush=True)
    rows = ["| input | baseline s | this s | ratio | baseline CPU s | this CPU s | CPU ratio | "
            "records (accepted) | other procs' CPU-s (max) |", "|---|---|---|---|---|---|---|---|---|"]
    verdicts = []
    for kind in kinds:
        base, this = runs[(kind, "baseline")], runs[(kind, "this")]
        b, t = (statistics.median(r["seconds"] for r in x) for x in (base, this))
        bc, tc = (statistics.median(r["cpu_seconds"] for r in x) for x in (base, this))
        accepted = {r["totals"]["accepted"] for r in base + this}
        other = max(r["other_cpu_seconds"] for r in base + this)
        rows.append(f"| {kind} | {b:.2f} | {t:.2f} | {t / b:.3f} | {bc:.2f} | {tc:.2f} | {tc / bc:.3f} | "
                    f"{', '.join(f'{a:,}' for a in sorted(accepted))} | {other:.1f} |")
        verdicts.append(f"- {kind}: {t / b:.3f}x time, {tc / bc:.3f}x CPU: "
                        + ("within 5%" if min(t / b, tc / bc) <= GOAL else "**NOT within 5%**"))
    text = (
        f"## Ingest clean-path regression ({time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())})\n\n"
        f"Command: `{command_line('ingest_regress.py')}`\n\n"
        + facts_block(facts)
        + f"- baseline: `{args.baseline}`; {args.repeat} interleaved runs each, medians; "
        f"{args.records:,} canonical records (MT-Bench: {max(1, args.records // 4):,} judgment lines)\n\n"
        + "\n".join(rows) + "\n\n" + "\n".join(verdicts) + "\n"
    )
    print(text)
    if not args.no_append:
        append_results(text)


if __name__ == "__main__":
    main()
