"""Helpers shared by the benchmark scripts: machine facts and the code digest."""

from __future__ import annotations

import os
import platform
from pathlib import Path

GIB = 1024**3


def src_digest() -> str:
    """First 12 hex digits of the SHA-256 of ``src/jurymeter/*.py`` as imported."""
    import hashlib

    import jurymeter

    digest = hashlib.sha256()
    for py in sorted(Path(jurymeter.__file__).parent.glob("*.py")):
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
