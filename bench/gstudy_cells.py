"""The whole ``jurymeter gstudy`` process reading the merged cell statistics, against a raw polars process.

Issue 25 point 3's goal: the whole ``jurymeter gstudy`` process (default
settings) on a 10M-record item set at most 0.5x a raw polars scan + group-by
process over the same records. Reuses ``bench/gstudy.py``'s store (built by
its ``build_store``, whose ingest now writes the cell file at commit) and its
measuring (``run_measured``: wall time from outside, the child's CPU, its peak
RSS, the CPU others used meanwhile). Three processes, interleaved, each run
``--repeats`` times:

(a') ``python -c``: polars scans the item set's part files and groups by
     (system, item, judge, replicate), as ``bench/gstudy.py`` 1b;
(b') ``jurymeter gstudy --item-set bench-gstudy --store <store>``: the fit's
     blocks from the merged cell table (``io/cell_stats.py``);
(c') the same command with the cell path switched off (the records scanned,
     as before issue 25), for the before/after.

Before the timings: the first fit after the ingest, which merges the source's
cell file into the merged table and writes it (timed once, reported).

    .venv/bin/python bench/gstudy_cells.py --workdir /work/bench25 --repeats 5
"""

from __future__ import annotations

import argparse
import datetime as dt
import shlex
import shutil
import sys
from pathlib import Path

from _common import machine_facts
from gstudy import (
    ITEM_SET,
    KEYS,
    RAW_PROCESS,
    RESULTS,
    build_store,
    median,
    run_measured,
    runs_text,
)

GOAL = 0.5
NO_CELLS = """\
import sys
import jurymeter.pipeline.fit_cells as fit_cells
fit_cells.cell_chunks = lambda job, modes: None
from jurymeter.cli.app import app
sys.argv = ["jurymeter", *{args!r}]
app()
"""


def _row(label: str, runs: list[dict], note: str) -> str:
    walls = [r["wall_seconds"] for r in runs]
    cpu = median([r["process_cpu"] for r in runs])
    others = median([r["other_cpu_seconds"] for r in runs])
    rss = max(r["peak_rss"] for r in runs) / 1024**3
    return f"| {label} | {median(walls):.2f} | {runs_text(walls)} | {cpu:.2f} | {others:.1f} | {rss:.2f} GB | {note} |"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--workdir", type=Path, default=Path("/work/bench25"))
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--sizes", default="100,2000,10,5", help="systems,items,judges,replicates")
    parser.add_argument("--rebuild", action="store_true", help="ingest the store again (its ingest time reported)")
    parser.add_argument("--no-append", action="store_true")
    opts = parser.parse_args()
    sizes = tuple(int(v) for v in opts.sizes.split(","))
    work = opts.workdir.resolve()
    logs = work / f"logs-cells-{dt.datetime.now(dt.UTC).strftime('%Y%m%dT%H%M%S')}"
    logs.mkdir(parents=True, exist_ok=True)
    started = dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M UTC")
    built = build_store(work, sizes, 0, opts.rebuild)  # type: ignore[arg-type]
    store = built["store"]

    from jurymeter.io.cell_stats import cells_dir
    from jurymeter.io.store import Store

    folder = Path(Store(store).path(cells_dir("pointwise", ITEM_SET)))
    for merged in folder.glob("merged*"):  # the first fit after the ingest merges and writes the table
        merged.unlink()
    exe = str(Path(sys.executable).parent / "jurymeter")
    args = ["gstudy", "--item-set", ITEM_SET, "--store", store]
    first = run_measured([exe, *args], logs, "first-fit")
    part_files = [f.path for f in Store(store).data_files("pointwise", ITEM_SET)]
    raw_code = RAW_PROCESS.format(files=part_files, keys=KEYS)
    raw, cells, scan = [], [], []
    for k in range(opts.repeats):
        raw.append(run_measured([sys.executable, "-c", raw_code], logs, f"raw-{k}"))
        cells.append(run_measured([exe, *args], logs, f"cells-{k}"))
        scan.append(run_measured([sys.executable, "-c", NO_CELLS.format(args=args)], logs, f"scan-{k}"))
        print(f"run {k + 1}: raw {raw[-1]['wall_seconds']:.2f} s, cells {cells[-1]['wall_seconds']:.2f} s, "
              f"scan {scan[-1]['wall_seconds']:.2f} s", flush=True)
    outputs = {Path(r["stdout_path"]).read_text() for r in [first, *cells, *scan]}
    same = "the same" if len(outputs) == 1 else "DIFFERENT"
    ratio = median([r["wall_seconds"] for r in cells]) / median([r["wall_seconds"] for r in raw])
    cpu_ratio = median([r["process_cpu"] for r in cells]) / median([r["process_cpu"] for r in raw])
    before = median([r["wall_seconds"] for r in scan]) / median([r["wall_seconds"] for r in raw])
    facts = machine_facts()
    size = sum(p.stat().st_size for p in folder.iterdir()) / 1024**2
    lines = [
        "", f"## Whole `jurymeter gstudy` from the merged cell statistics, issue 25 point 3 ({started})", "",
        f"Command: `{shlex.join(['.venv/bin/python', 'bench/gstudy_cells.py', *sys.argv[1:]])}`", "",
        f"- machine: {facts['nproc']} CPUs ({facts['cpu']}), {facts['ram']} RAM, {facts['os']}; Python "
        f"{facts['python']}, sha256 of src/jurymeter/*.py {facts['src_digest']}",
        f"- store: {built['records']:,} pointwise records ({' x '.join(map(str, sizes))}), "
        f"{'reused' if built['reused'] else 'built'} in {store} (ingested in {built['ingest_seconds']:.1f} s, "
        f"the cell file written at its commit included); cell files and merged table {size:.0f} MiB",
        f"- each process timed from outside, interleaved, {opts.repeats} runs; CPU = the process's CPU time "
        "(median); other CPU-s = CPU-seconds the rest of the machine used meanwhile (median)",
        f"- the first fit after the ingest (merges the source's cell file, writes the merged table): "
        f"{first['wall_seconds']:.2f} s wall, {first['process_cpu']:.2f} s CPU",
        "", "| process | median (s) | runs (s) | CPU (s) | other CPU-s | peak RSS | notes |",
        "|---|---:|---:|---:|---:|---:|---|",
        _row("(a') `python -c` raw polars scan + group-by", raw, "10,000,000 groups"),
        _row("(b') `jurymeter gstudy` (cells)", cells, "the merged cell table"),
        _row("(c') `jurymeter gstudy`, cell path off", scan, "the records scanned (before)"),
        "",
        f"- whole process, cells / raw: **{ratio:.2f}x** wall, {cpu_ratio:.2f}x CPU — goal <= {GOAL}x: "
        f"**{'met' if ratio <= GOAL else 'not met'}**; record scan / raw: {before:.2f}x",
        f"- printed output of (b'), (c') and the first fit: {same}",
    ]
    text = "\n".join(lines) + "\n"
    print(text)
    if not opts.no_append:
        with open(RESULTS, "a") as handle:
            handle.write(text)
    shutil.rmtree(logs, ignore_errors=True)


if __name__ == "__main__":
    main()
