"""Plans benchmark, whole command (issue 26, performance): ``jurymeter plan`` for 100 item sets in one call.

Goal: the plan for 100 item sets under 10 s. ``bench/plans.py`` times the
library parts; this times what a user runs: a store of 100 crossed item sets
(6 systems x 24 items x 3 judges each, one simulated dump relabelled), the
nightly flow (``jurymeter run``, the G-study alone, 200 resamples) to fill the
fit cache, then one process

    jurymeter plan --config jm.toml --item-set set-000 ... --item-set set-099 --crossed --out plans/

timed from start to exit (wall, and the CPU of the process and its children),
against 100 separate ``jurymeter plan`` calls for the first 10 item sets
(extrapolated x10: the start-up a shell loop pays per item set).

    .venv/bin/python bench/plans_cli.py --append
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import polars as pl

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(ROOT / "bench"))

from _common import append_results, command_line, facts_block, machine_facts  # noqa: E402

ITEM_SETS = 100
JURYMETER = str(ROOT / ".venv" / "bin" / "jurymeter")


def _timed(args: list[str], cwd: Path) -> tuple[float, float]:
    """Wall and CPU seconds (the process and its children) of one command, which must succeed."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    done = subprocess.run(args, cwd=cwd, capture_output=True, text=True, env={**os.environ, "COLUMNS": "200"})
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(args[:3])} failed:\n{done.stdout}\n{done.stderr}")
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--append", action="store_true", help="append the results to bench/RESULTS.md")
    args = parser.parse_args()
    from jurymeter.simulate import SimulationParams, simulate_dump

    workdir = Path(tempfile.mkdtemp(prefix="jurymeter-bench-plans-cli-"))
    try:
        dump = simulate_dump(SimulationParams(seed=1, n_systems=6, n_items=24, n_judges=3, n_generations=1,
                                              n_replicates=1, carry_over=0.0, self_preference=0.0,
                                              pairwise_pairs=None))
        one = dump.pointwise
        names = [f"set-{k:03d}" for k in range(ITEM_SETS)]
        landing = workdir / "landing"
        landing.mkdir()
        pl.concat([one.with_columns(item_set=pl.lit(n)) for n in names]).write_ndjson(landing / "dump.jsonl")
        config = workdir / "jm.toml"
        config.write_text(f'store = "{workdir / "store"}"\nlanding = "{landing}"\n[fit]\nn_boot = 200\n'
                          'analyses = ["gstudy"]\n')
        run_wall, _ = _timed([JURYMETER, "run", "--config", str(config), "--workers", "2", "--no-report"], workdir)
        many = [a for n in names for a in ("--item-set", n)]
        wall, cpu = _timed([JURYMETER, "plan", "--config", str(config), *many, "--crossed", "--out", "plans"],
                           workdir)
        written = sorted(p.name for p in (workdir / "plans").iterdir())
        stored = sorted(p.name for p in (workdir / "store" / "plans").iterdir())
        assert len(written) == ITEM_SETS, len(written)
        assert len(stored) == ITEM_SETS, len(stored)
        singles = [_timed([JURYMETER, "plan", "--config", str(config), "--item-set", n, "--crossed",
                           "--out", f"one-{n}.csv"], workdir) for n in names[:10]]
        single_wall = sum(w for w, _ in singles) / len(singles)
        single_cpu = sum(c for _, c in singles) / len(singles)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)

    lines = [
        f"## `jurymeter plan` for {ITEM_SETS} item sets in one call (issue 26)",
        "",
        f"Command: `{command_line('plans_cli.py')}`",
        "",
        facts_block(machine_facts()),
        f"- store: {ITEM_SETS} crossed item sets of 6 systems x 24 items x 3 judges; the nightly run before it "
        f"(G-study only, 200 resamples, 2 workers) took {run_wall:.1f} s and filled the fit cache",
        "",
        "| what | wall s | CPU s | goal |",
        "|---|---:|---:|---|",
        f"| one `plan --crossed` call for all {ITEM_SETS} item sets (read the cached fits, predict, write, store) "
        f"| {wall:.2f} | {cpu:.2f} | < 10 s |",
        f"| one `plan` call per item set, mean of 10 | {single_wall:.2f} | {single_cpu:.2f} | |",
        f"| ... x {ITEM_SETS} (a shell loop) | {single_wall * ITEM_SETS:.1f} | {single_cpu * ITEM_SETS:.1f} | |",
        "",
    ]
    text = "\n".join(lines)
    print(text)
    if args.append:
        append_results(text)


if __name__ == "__main__":
    main()
