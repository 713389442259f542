"""The README's first command on a fresh clone (issue 24, point 9): under 90 s in all, fits under 30 s.

Clones this checkout's HEAD into a temporary folder, runs the README's first command there
exactly as written (``bash -c``, with no ``PREFECT_*``, ``JURYMETER_*`` or ``VIRTUAL_ENV`` of
this shell), and appends to ``bench/RESULTS.md``: wall time, the command's CPU time (it and
all its children), the CPU-seconds the rest of the machine used meanwhile (other jobs on the
same 2 cores), and the fits stage the run printed (``timings ... fits X s``).

Command: ``.venv/bin/python bench/demo.py`` (``--no-append`` to only print).
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import re
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _common import append_results, busy_cpu_seconds, command_line

ROOT = Path(__file__).resolve().parents[1]
WALL_GOAL, FITS_GOAL = 90.0, 30.0


def readme_first_command() -> str:
    """The first line of the README's opening bash block (what ``tests/test_readme.py`` checks)."""
    block = re.search(r"```bash\n(.*?)```", (ROOT / "README.md").read_text(), re.S)
    assert block, "README.md must open with a bash block"
    return next(line for line in block.group(1).splitlines() if line.strip())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--no-append", action="store_true", help="Print the section; do not append it")
    args = parser.parse_args()
    command = readme_first_command()
    commit = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"],
                            capture_output=True, text=True, check=True).stdout.strip()
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("PREFECT_", "JURYMETER_")) and k != "VIRTUAL_ENV"}
    with tempfile.TemporaryDirectory(prefix="jurymeter-demo-") as tmp:
        clone = Path(tmp) / "clone"
        subprocess.run(["git", "clone", "-q", str(ROOT), str(clone)], check=True)
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        busy0, t0 = busy_cpu_seconds(), time.perf_counter()
        result = subprocess.run(["bash", "-c", command], cwd=clone, env=env, capture_output=True, text=True)
        wall = time.perf_counter() - t0
        busy = busy_cpu_seconds() - busy0
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    if result.returncode != 0:
        sys.exit(f"the command failed ({result.returncode}):\n{result.stdout[-3000:]}\n{result.stderr[-3000:]}")
    fits = re.search(r"timings .*?fits ([0-9.]+) s", result.stdout)
    fits_s = float(fits.group(1)) if fits else float("nan")
    now = dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M UTC")
    verdict = "met" if wall < WALL_GOAL and fits_s < FITS_GOAL else "missed"
    section = (
        f"## The README's first command on a fresh clone ({now})\n\n"
        f"Command: `{command_line('demo.py')}` (clones HEAD {commit}, then runs in the clone: `{command}`)\n\n"
        "| wall (s) | CPU of the command (s) | other processes' CPU meanwhile (s) | fits stage (s) | goal |\n"
        "|---:|---:|---:|---:|---|\n"
        f"| {wall:.1f} | {cpu:.1f} | {max(busy - cpu, 0.0):.1f} | {fits_s:.1f} | "
        f"under {WALL_GOAL:.0f} s in all, fits under {FITS_GOAL:.0f} s: **{verdict}** |\n"
    )
    print(section)
    if not args.no_append:
        append_results(section)


if __name__ == "__main__":
    main()
