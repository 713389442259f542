"""Where one ingest's CPU goes: stage timers around its steps, beside the parts measured alone (issue 25).

cProfile distorts an ingest whose work is in polars' and numpy's threads (stop 32's profile put the
census at 7.4 s); this wraps the ingest's steps with wall and process-CPU timers instead (a step's
figures include the steps it calls), then times the census, BLAKE3 and ``scan_ndjson`` +
``sink_parquet`` of the same file alone. Run from the project root on a canonical JSON Lines file
(``bench/ingest.py --keep`` writes one)::

    .venv/bin/python bench/ingest_stages.py /tmp/bi/n2000000/judgments.jsonl --workdir /tmp/stages
"""

from __future__ import annotations

import argparse
import collections
import functools
import os
import shutil
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import jurymeter.io.commit as commit
import jurymeter.io.ingest as ingest
from _common import append_results, busy_cpu_seconds, command_line, facts_block, machine_facts
from jurymeter.io.census import text_census
from jurymeter.io.source_files import content_key
from jurymeter.io.sources import discover_sources
from jurymeter.io.store import Store
from jurymeter.io.validate import ValidationOptions

STEPS = ((ingest, "stage_source"), (ingest, "content_key"), (ingest, "stream_source"), (ingest, "commit_staged"),
         (commit, "resolve_duplicates"), (commit, "write_source_cells"), (commit, "write_source_values"))


def timed(call: Callable[[], Any]) -> tuple[float, float]:
    """Wall and process CPU seconds of ``call()``."""
    wall, cpu = time.perf_counter(), time.process_time()
    call()
    return time.perf_counter() - wall, time.process_time() - cpu


def wrap_steps(totals: dict[str, list[float]]) -> None:
    """Replace each step in :data:`STEPS` by a timed wrapper adding to ``totals[name]``."""
    for module, name in STEPS:
        step = getattr(module, name)

        def wrapper(*args: Any, _step: Callable[..., Any] = step, _name: str = name, **kwargs: Any) -> Any:
            wall, cpu = time.perf_counter(), time.process_time()
            try:
                return _step(*args, **kwargs)
            finally:
                totals[_name][0] += time.perf_counter() - wall
                totals[_name][1] += time.process_time() - cpu

        setattr(module, name, wrapper)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("source", type=Path, help="a canonical JSON Lines file")
    parser.add_argument("--workdir", type=Path, default=Path("/tmp/jm-ingest-stages"))
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--no-append", action="store_true")
    opts = parser.parse_args()
    path = str(opts.source)
    totals: dict[str, list[float]] = collections.defaultdict(lambda: [0.0, 0.0])
    wrap_steps(totals)
    rows = []
    for repeat in range(opts.repeats):
        store_dir = opts.workdir / f"store-{repeat}"
        shutil.rmtree(store_dir, ignore_errors=True)
        totals.clear()
        busy = busy_cpu_seconds()
        sources = discover_sources([path])
        whole = timed(functools.partial(ingest.ingest, Store(str(store_dir)), sources, ValidationOptions(scale=(1.0, 10.0))))
        others = busy_cpu_seconds() - busy - whole[1]
        rows.append(f"| {repeat + 1} | whole ingest | {whole[0]:.2f} | {whole[1]:.2f} | {others:.1f} |")
        rows += [f"| {repeat + 1} | {name} | {w:.2f} | {c:.2f} | |" for name, (w, c) in totals.items()]
        source = sources[0]
        for label, call in (("census alone (`text_census`)", functools.partial(text_census, source)),
                            ("BLAKE3 alone (`content_key`)", functools.partial(content_key, source)),
                            ("`scan_ndjson` + `sink_parquet` alone", functools.partial(_sink, path, opts.workdir))):
            wall, cpu = timed(call)
            rows.append(f"| {repeat + 1} | {label} | {wall:.2f} | {cpu:.2f} | |")
    text = "\n".join([
        f"## Ingest stage timers, {os.path.getsize(path) / 1e9:.2f} GB canonical JSON Lines (issue 25, "
        f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())})", "",
        f"Command: `{command_line(__file__)}`", "", facts_block(machine_facts()), "",
        "A step's figures include the steps it calls (`stage_source` holds `content_key` and `stream_source`; "
        "`commit_staged` the three after it); CPU is the whole process's (every thread).", "",
        "| run | step | wall s | CPU s | other procs' CPU-s |", "|---:|---|---:|---:|---:|", *rows, ""])
    print(text)
    if not opts.no_append:
        append_results(text)


def _sink(path: str, workdir: Path) -> None:
    import polars as pl

    pl.scan_ndjson(path).sink_parquet(str(workdir / "sink.parquet"))


if __name__ == "__main__":
    main()
