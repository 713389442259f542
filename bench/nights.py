"""Nights benchmark: does a night cost what is new, or what is stored? (issue 25)

Runs ``--nights`` nights of the nightly flow (``jurymeter run``) into one store.
Each night, ``--records`` new pointwise judgments land as one JSON Lines file
(the panels of :func:`nightly.write_panel`: 40 systems x items x 6 judges x 3
generations x 2 replicates per item set), the run ingests them and fits and
publishes every analysis, and the night's file leaves the landing folder
afterwards (as a dump delivery tool would move it). Two layouts:

- ``new-item-sets``: every night's records are four new item sets (a
  leaderboard that grows by benchmarks); the fits of earlier nights' item sets
  are unchanged, so only the ingest, the dedupe and the publishing could grow
  with the history;
- ``growing-item-sets``: every night adds new items to the same four item sets
  (a benchmark that grows); every fit sees all items stored so far, so its
  cells grow with the history whatever the store does.

Each night is measured in a fresh process tree (wall, CPU of the tree, peak RSS
of each process by role: main, Dask worker, Prefect server; see
:func:`nightly.measure`). The Prefect home is kept across nights (what every
night after the first costs). The table gives every night and the ratio of the
last night to the first; the results are appended to ``bench/RESULTS.md``.

Run from the project root::

    .venv/bin/python bench/nights.py --nights 30 --records 3000000   # issue 25's size
    .venv/bin/python bench/nights.py --nights 6 --records 300000     # a quick look
"""

from __future__ import annotations

import argparse
import datetime as dt
import shutil
from pathlib import Path
from typing import Any

import nightly
from _common import append_results, command_line, facts_block, fmt_bytes, machine_facts

WORK = Path(__file__).resolve().parent / "_work" / "nights"
LAYOUTS = ("new-item-sets", "growing-item-sets")
BASE_SETS = tuple(nightly.ITEM_SETS)


def night_file(landing: Path, night: int, n_items: int, layout: str) -> int:
    """Write night ``night``'s records into ``landing``; return how many."""
    if layout == "new-item-sets":
        nightly.ITEM_SETS = list(f"{name}-n{night:03d}" for name in BASE_SETS)
        offset = 0
    else:
        nightly.ITEM_SETS = list(BASE_SETS)
        offset = night * n_items
    return nightly.write_panel(landing / f"night-{night:03d}.jsonl", n_items, item_offset=offset, seed=night)


def run_nights(opts: argparse.Namespace, work: Path) -> list[dict[str, Any]]:
    """Every night's measurement, in order."""
    store, landing, home, logs = work / "store", work / "landing", work / "home", work / "logs"
    for folder in (landing, home, logs):
        folder.mkdir(parents=True, exist_ok=True)
    config = work / "run.toml"
    nightly.write_config(config, store=store, landing=landing, home=home, n_boot=opts.n_boot,
                         universes=["all"], workers=opts.workers)
    env = nightly.clean_env(work / "prefect-home")
    n_items = opts.records // (len(BASE_SETS) * nightly.PER_ITEM)
    rows = []
    stored = 0
    for night in range(opts.nights):
        written = night_file(landing, night, n_items, opts.layout)
        result = nightly.measure([str(nightly.JURYMETER), "run", "--config", str(config)],
                                 logs, f"night-{night:03d}", env=env, cwd=nightly.ROOT)
        stored += written
        roles = result["roles"]
        rows.append({
            "night": night + 1, "new": written, "stored": stored, "wall": result["wall_seconds"],
            "cpu": result["tree_cpu_seconds"], "other_cpu": result["other_cpu_seconds"],
            "main": roles.get("main", {}).get("peak", 0), "worker": roles.get("dask worker", {}).get("peak", 0),
            "prefect": roles.get("prefect server", {}).get("peak", 0),
        })
        print(f"night {night + 1}: {written:,} new, {stored:,} stored, {result['wall_seconds']:.1f} s, "
              f"CPU {result['tree_cpu_seconds']:.1f} s, main peak {fmt_bytes(rows[-1]['main'])}, "
              f"worker peak {fmt_bytes(rows[-1]['worker'])}", flush=True)
        (landing / f"night-{night:03d}.jsonl").unlink()
    return rows


def table(rows: list[dict[str, Any]]) -> str:
    lines = ["| night | new records | stored records | wall s | CPU s | other procs' CPU-s | main peak | "
             "largest worker peak | Prefect server peak |", "|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for r in rows:
        lines.append(f"| {r['night']} | {r['new']:,} | {r['stored']:,} | {r['wall']:.1f} | {r['cpu']:.1f} | "
                     f"{r['other_cpu']:.1f} | {fmt_bytes(r['main'])} | {fmt_bytes(r['worker'])} | "
                     f"{fmt_bytes(r['prefect'])} |")
    first, last = rows[0], rows[-1]
    ratios = []
    for key, name in (("wall", "wall"), ("cpu", "CPU"), ("main", "main peak"), ("worker", "worker peak"),
                      ("prefect", "Prefect peak")):
        if first[key]:
            ratios.append(f"{name} {last[key] / first[key]:.2f}x")
    lines += ["", f"Last night against the first: {', '.join(ratios)} (goal of issue 25: within 1.2x)."]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nights", type=int, default=30)
    parser.add_argument("--records", type=int, default=3_000_000, help="new records a night")
    parser.add_argument("--layout", choices=LAYOUTS, default="new-item-sets")
    parser.add_argument("--n-boot", type=int, default=200)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--workdir", type=Path, default=WORK)
    parser.add_argument("--no-append", action="store_true")
    opts = parser.parse_args()
    work = opts.workdir
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    started = dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M UTC")
    rows = run_nights(opts, work)
    text = (f"## Nights: {opts.nights} nights of {opts.records:,} new records, layout {opts.layout} ({started})\n\n"
            f"Command: `{command_line('nights.py')}`\n\n{facts_block(machine_facts())}\n\n{table(rows)}\n")
    print(text)
    if not opts.no_append:
        append_results(text)


if __name__ == "__main__":
    main()
