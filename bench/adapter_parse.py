"""Adapter parse benchmark (issue 25 point 5): the MT-Bench single adapter's reading+staging against polars alone.

One run, on one generated MT-Bench single file (``bench/adapters.py``'s
``write_logs``; generated once into ``--workdir`` and reused), each step in a
fresh subprocess, interleaved, ``--repeats`` times:

(a) the adapter's reading and staging path: every batch
    ``jurymeter.io.adapters.reading.adapted_batches`` yields for the file
    (no store, no hash), each batch's frame materialised;
(a0) the same with ``src/`` of ``--baseline-rev`` first on ``PYTHONPATH``
    (the code before a change), when given; (a1) likewise with the folder
    ``--variant-src`` (an uncommitted variant of ``src/``);
(b) a polars-only pipeline doing the same work: ``pl.scan_ndjson`` with a
    schema of only the fields the adapter stores (and ``judgment`` for the
    rating), ``str.extract`` of FastChat's ``[[rating]]`` from the judgment,
    ``write_parquet``; (b2) the same also reading ``user_prompt`` and cutting
    the answer length out of it, as the adapter does (``response_length``).

Wall time inside the child and its CPU time (``resource.getrusage`` of the
child itself and of its own children, i.e. the adapter's parse workers). The
goal: (a) within 1.5x of (b).

Run from the project root::

    .venv/bin/python bench/adapter_parse.py --records 250000 --workdir /work/bench25/adapters
    .venv/bin/python bench/adapter_parse.py --records 250000 --workdir /work/bench25/adapters --profile
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

BENCH_DIR = Path(__file__).resolve().parent
ROOT = BENCH_DIR.parent
GOAL_RATIO = 1.5


def _cpu() -> float:
    import resource

    own, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime


def adapter_child(path: str, profile_out: str | None) -> dict[str, Any]:
    """(a): every batch of ``adapted_batches`` for the file, frames materialised; counts of rows and rejects."""
    from jurymeter.io.adapters.base import AdapterNotes, AdapterOptions
    from jurymeter.io.adapters.mt_bench import MT_BENCH
    from jurymeter.io.adapters.reading import adapted_batches
    from jurymeter.io.sources import discover_sources

    [source] = discover_sources([path], log_format="canonical")
    profiler = None
    if profile_out is not None:
        import cProfile

        profiler = cProfile.Profile()
        profiler.enable()
    t0, c0 = time.perf_counter(), _cpu()
    rows = malformed = rejected = 0
    for batch in adapted_batches(source, MT_BENCH, AdapterOptions(), AdapterNotes("mt-bench")):
        rows += batch.frame.height
        malformed += len(batch.malformed)
        if "_reject_reason" in batch.frame.columns:
            rejected += batch.frame.height - batch.frame["_reject_reason"].null_count()
    seconds, cpu = time.perf_counter() - t0, _cpu() - c0
    if profiler is not None:
        profiler.disable()
        profiler.dump_stats(profile_out)
    return {"seconds": seconds, "cpu_seconds": cpu, "rows": rows, "malformed": malformed, "rejected": rejected}


def polars_child(path: str, lengths: bool = False) -> dict[str, Any]:
    """(b): scan_ndjson of the needed fields, str.extract of the rating, write_parquet.

    ``lengths`` (b2): also ``user_prompt`` and the graded answer's length cut out of it
    (characters after the last FastChat answer marker), which the adapter stores too.
    """
    import polars as pl

    schema = {
        "question_id": pl.Int64,
        "model": pl.String,
        "judge": pl.List(pl.String),
        "judgment": pl.String,
        "score": pl.Int64,
        "turn": pl.Int64,
        "tstamp": pl.Float64,
    }
    extra: list[pl.Expr] = []
    if lengths:
        schema["user_prompt"] = pl.String
        prompt = pl.col("user_prompt")
        extra = [
            pl.when(prompt.str.ends_with("\n[The End of Assistant's Answer]"))
            .then(prompt.str.split("[The Start of Assistant's Answer]\n").list.last().str.len_chars() - 32)
            .otherwise(prompt.str.split("\n\n### Assistant A:\n").list.last().str.len_chars() - 53)
            .alias("response_length")
        ]
    t0, c0 = time.perf_counter(), _cpu()
    with tempfile.TemporaryDirectory() as out:
        frame = pl.scan_ndjson(path, schema=schema).with_columns(
            pl.col("judgment").str.extract(r"\[\[(\d+\.?\d*)\]\]", 1).cast(pl.Float64).alias("rating"),
            pl.col("judge").list.get(0).alias("judge_id"),
            pl.col("judge").list.get(1).alias("judge_prompt"),
            *extra,
        ).drop("judgment", "judge", *(["user_prompt"] if lengths else []))
        frame.sink_parquet(os.path.join(out, "b.parquet"))
        rows = pl.scan_parquet(os.path.join(out, "b.parquet")).select(pl.len()).collect().item()
    return {"seconds": time.perf_counter() - t0, "cpu_seconds": _cpu() - c0, "rows": rows}


def run(step: str, path: Path, pythonpath: Path | None = None, profile_out: str | None = None) -> dict[str, Any]:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    if pythonpath is not None:
        env["PYTHONPATH"] = str(pythonpath)
    cmd = [sys.executable, str(Path(__file__).resolve()), "--child", step, str(path)]
    if profile_out is not None:
        cmd.append(profile_out)
    done = subprocess.run(cmd, capture_output=True, text=True, env=env, check=False)
    if done.returncode != 0:
        sys.stderr.write(done.stderr[-3000:])
        raise SystemExit(f"step {step} failed")
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "--child":
        step, path, *rest = sys.argv[2:]
        out = adapter_child(path, rest[0] if rest else None) if step == "adapter" else polars_child(path, step == "polars-lengths")
        print(json.dumps(out), flush=True)
        return
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=250_000, help="MT-Bench single lines to generate")
    parser.add_argument("--workdir", type=Path, default=BENCH_DIR / "_work" / "adapters")
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--baseline-rev", help="also time (a) with src/ of this git revision")
    parser.add_argument("--variant-src", type=Path, help="also time (a) with this src/ folder first on PYTHONPATH (a1)")
    parser.add_argument("--profile", action="store_true", help="only profile (a) under cProfile")
    parser.add_argument("--top", type=int, default=25)
    args = parser.parse_args()
    sys.path.insert(0, str(BENCH_DIR))
    from adapters import export_baseline, write_logs

    args.workdir.mkdir(parents=True, exist_ok=True)
    path = args.workdir / f"mt_bench_single_{args.records}.jsonl"
    if not path.exists():
        write_logs(path, args.workdir / f"canonical_{args.records}.jsonl", args.records)
    size = path.stat().st_size
    if args.profile:
        import pstats

        out = str(args.workdir / "adapter.prof")
        print(json.dumps(run("adapter", path, profile_out=out)))
        pstats.Stats(out).sort_stats("tottime").print_stats(args.top)
        return
    baseline = export_baseline(args.baseline_rev, args.workdir) if args.baseline_rev else None
    steps = [("a", "adapter", None), ("b", "polars", None), ("b2", "polars-lengths", None)]
    if baseline is not None:
        steps.insert(1, ("a0", "adapter", baseline))
    if args.variant_src is not None:
        steps.insert(1, ("a1", "adapter", args.variant_src))
    runs: dict[str, list[dict[str, Any]]] = {name: [] for name, _, _ in steps}
    for _ in range(args.repeats):
        for name, step, pythonpath in steps:
            result = run(step, path, pythonpath)
            runs[name].append(result)
            print(name, json.dumps(result), flush=True)
    med = {name: {k: statistics.median(r[k] for r in rs) for k in ("seconds", "cpu_seconds")}
           for name, rs in runs.items()}
    print(f"file: {path} ({size / 2**30:.2f} GiB, {args.records} lines)")
    for name in med:
        wall, cpu = med[name]["seconds"], med[name]["cpu_seconds"]
        print(f"{name}: wall {wall:.2f} s, CPU {cpu:.2f} s; /b wall {wall / med['b']['seconds']:.2f}x, "
              f"CPU {cpu / med['b']['cpu_seconds']:.2f}x")


if __name__ == "__main__":
    main()
