"""Helpers shared by the benchmark scripts: machine facts and the code digest."""

from __future__ import annotations

import os
import platform
import shlex
import sys
from pathlib import Path
from typing import Any

GIB = 1024**3
RESULTS = Path(__file__).resolve().parent / "RESULTS.md"


def src_digest() -> str:
    """First 12 hex digits of the SHA-256 of every ``src/jurymeter/**/*.py`` as imported."""
    import hashlib

    import jurymeter

    digest = hashlib.sha256()
    for py in sorted(Path(jurymeter.__file__).parent.rglob("*.py")):
        digest.update(py.name.encode() + b"\0" + py.read_bytes())
    return digest.hexdigest()[:12]


def machine_facts() -> dict[str, str]:
    """CPU, memory, OS and the versions of the stack, for the results file."""
    import numpy as np
    import polars as pl
    import psutil
    import pyarrow as pa

    cpu = "?"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    try:
        from importlib.metadata import version

        jm = version("jurymeter")
    except Exception:
        jm = "?"
    return {
        "src_digest": src_digest(),
        "nproc": str(len(os.sched_getaffinity(0))),
        "cpu": cpu,
        "ram": f"{psutil.virtual_memory().total / GIB:.1f} GiB",
        "os": platform.platform(),
        "python": platform.python_version(),
        "polars": pl.__version__,
        "pyarrow": pa.__version__,
        "numpy": np.__version__,
        "jurymeter": jm,
    }


def busy_cpu_seconds() -> float:
    """CPU-seconds the whole machine has spent busy (not idle or waiting on I/O)."""
    import psutil

    t = psutil.cpu_times()
    return sum(getattr(t, k, 0.0) for k in ("user", "nice", "system", "irq", "softirq", "steal"))


def anon_rss(pid: int) -> int:
    """Anonymous resident memory of a process (Linux ``RssAnon``), in bytes; 0 if unknown.

    Unlike RSS it leaves out file pages the process maps, such as the input
    file polars memory-maps.
    """
    try:
        with open(f"/proc/{pid}/status") as handle:
            for line in handle:
                if line.startswith("RssAnon:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return 0


def fmt_bytes(n: float) -> str:
    return f"{n / GIB:.2f} GiB" if n >= GIB / 4 else f"{n / 1024**2:.0f} MiB"


def fmt_rss(n: float) -> str:
    return f"{n / 1e9:.2f} GB"


def command_line(script: str) -> str:
    """The command that produced a results section, as run from the project root."""
    return shlex.join([".venv/bin/python", f"bench/{script}", *sys.argv[1:]])


def append_results(text: str) -> None:
    header = "" if RESULTS.exists() else "# Benchmark results\n\nAppended by `bench/*.py`; newest last.\n"
    with open(RESULTS, "a") as handle:
        handle.write(header + "\n" + text)


def facts_block(facts: dict[str, str]) -> str:
    return (
        f"- machine: {facts['nproc']} CPUs ({facts['cpu']}), {facts['ram']} RAM, {facts['os']}\n"
        f"- software: Python {facts['python']}, polars {facts['polars']}, pyarrow {facts['pyarrow']}, "
        f"numpy {facts['numpy']}, jurymeter {facts['jurymeter']} "
        f"(sha256 of src/jurymeter/*.py at start: {facts['src_digest']}; the library is edited concurrently)\n"
    )


def measure_child(cmd: list[str], log_dir: Path, name: str, env: dict[str, str] | None = None) -> dict[str, Any]:
    """Run ``cmd`` (a benchmark's ``--child`` step), measure it, and return its last JSON line with the measures.

    Wall time, peak RSS (``ru_maxrss`` and the process tree polled every 50 ms,
    anonymous memory too), and the CPU-seconds the rest of the machine used
    meanwhile (other jobs compete for the same cores and slow the step down).
    The child's stdout and stderr go to ``<log_dir>/<name>.out`` / ``.err``;
    ``env``: the child's environment (None: this process's).
    """
    import contextlib
    import json
    import subprocess
    import threading
    import time

    import psutil

    stdout_path, stderr_path = log_dir / f"{name}.out", log_dir / f"{name}.err"
    peak_polled = peak_anon = 0
    stop = threading.Event()
    busy0, load0 = busy_cpu_seconds(), os.getloadavg()[0]
    t0 = time.perf_counter()
    with open(stdout_path, "wb") as so, open(stderr_path, "wb") as se:
        proc = subprocess.Popen(cmd, stdout=so, stderr=se, env=env)

        def poll() -> None:
            nonlocal peak_polled, peak_anon
            try:
                root = psutil.Process(proc.pid)
            except psutil.NoSuchProcess:
                return
            while not stop.is_set():
                try:
                    rss, anon = root.memory_info().rss, anon_rss(root.pid)
                    for child in root.children(recursive=True):
                        with contextlib.suppress(psutil.NoSuchProcess):
                            rss += child.memory_info().rss
                            anon += anon_rss(child.pid)
                except psutil.NoSuchProcess:
                    return
                peak_polled, peak_anon = max(peak_polled, rss), max(peak_anon, anon)
                stop.wait(0.05)

        poller = threading.Thread(target=poll, daemon=True)
        poller.start()
        _, status, usage = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - t0
        proc.returncode = os.waitstatus_to_exitcode(status)
        busy = busy_cpu_seconds() - busy0
        stop.set()
        poller.join()
    if proc.returncode != 0:
        sys.stderr.write(stderr_path.read_text()[-5000:])
        msg = f"child {name} failed with exit status {proc.returncode}: {shlex.join(cmd)}"
        raise RuntimeError(msg)
    lines = [ln for ln in stdout_path.read_text().splitlines() if ln.startswith("{")]
    result: dict[str, Any] = json.loads(lines[-1])
    maxrss = usage.ru_maxrss * 1024  # KiB on Linux
    result.update(
        wall_seconds=wall,
        peak_rss=max(maxrss, peak_polled),
        ru_maxrss=maxrss,
        polled_rss=peak_polled,
        anon_rss=peak_anon,
        other_cpu_seconds=max(0.0, busy - usage.ru_utime - usage.ru_stime),
        load_before=load0,
        stdout=str(stdout_path),
    )
    return result
