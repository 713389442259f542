"""One simulated dump with a few bad records against the same dump without them: the block path's cost of a bad line.

A JSON Lines block that polars' reader refuses is split in halves and tried again, down to regions of
``io.records.SLOW_REGION_LINES`` lines read line by line (118a2cc). With ``--no-split`` the split is off
(``SPLIT_BUDGET = 0``): the whole block is read line by line, as before that commit. Each ingest runs in this
process into a fresh store, ``--repeats`` times, alternating the two dumps. Run from the project root::

    .venv/bin/python bench/ingest_faults.py --items 600 --faults 20
"""

from __future__ import annotations

import argparse
import shutil
import time
from pathlib import Path

import jurymeter.io.records as records
from _common import (
    append_results,
    busy_cpu_seconds,
    command_line,
    facts_block,
    fmt_bytes,
    machine_facts,
)
from jurymeter.io.ingest import ingest
from jurymeter.io.sources import discover_sources
from jurymeter.io.store import Store
from jurymeter.io.validate import ValidationOptions
from jurymeter.simulate import SimulationParams, simulate_dump, write_dump


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--items", type=int, default=600, help="items of the simulated dump")
    parser.add_argument("--faults", type=int, default=20, help="bad records appended (write_dump's faults)")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--no-split", action="store_true", help="read a refused block line by line (the old path)")
    parser.add_argument("--workdir", type=Path, default=Path("/tmp/jm-ingest-faults"))
    parser.add_argument("--no-append", action="store_true")
    opts = parser.parse_args()
    if opts.no_split:
        records.SPLIT_BUDGET = 0
    shutil.rmtree(opts.workdir, ignore_errors=True)
    dump = simulate_dump(SimulationParams(seed=0, n_items=opts.items, item_set="night-0"))
    paths = {faults: write_dump(dump, opts.workdir / f"faults-{faults}", faults=faults)["pointwise"]
             for faults in (0, opts.faults)}
    rows = []
    for repeat in range(opts.repeats):
        for faults, path in paths.items():
            store_dir = opts.workdir / "store"
            shutil.rmtree(store_dir, ignore_errors=True)
            busy = busy_cpu_seconds()
            wall, cpu = time.perf_counter(), time.process_time()
            report = ingest(Store(str(store_dir)), discover_sources([str(path)]), ValidationOptions(scale=(1.0, 10.0)))
            wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
            others = busy_cpu_seconds() - busy - cpu
            (source,) = report.sources
            assert source.read == source.accepted + source.quarantined + source.duplicates_dropped
            rows.append(f"| {repeat + 1} | {faults} | {fmt_bytes(path.stat().st_size)} | {wall:.2f} | {cpu:.2f} "
                        f"| read {source.read:,} = accepted {source.accepted:,} + quarantined {source.quarantined} "
                        f"+ dropped {source.duplicates_dropped}; {dict(sorted(source.reasons.items()))} | {others:.1f} |")
    text = "\n".join([
        f"## Ingest of a dump with {opts.faults} bad records against the same dump clean, block split "
        f"{'off' if opts.no_split else 'on'} ({time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())})", "",
        f"Command: `{command_line(__file__)}`", "", facts_block(machine_facts()), "",
        "| run | faults | file | wall s | CPU s | counts | other procs' CPU-s |", "|---:|---:|---:|---:|---:|---|---:|",
        *rows, ""])
    print(text)
    if not opts.no_append:
        append_results(text)


if __name__ == "__main__":
    main()
