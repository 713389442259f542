"""Helpers of the tests that start real processes: a free port, the venv's environment, an infra script.

Shared by ``tests/conftest.py`` (the session's Prefect server), ``tests/test_nightly.py`` and
``tests/test_run_crash.py``.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
from pathlib import Path

import pytest


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def venv_env(**extra: str) -> dict[str, str]:
    """This process's environment without Prefect's settings, the venv's bin first on PATH, plus ``extra``."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PREFECT_")}
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    env.update(extra)
    return env


def start_ready(command: list[str], ready: str, env: dict[str, str], cwd: Path) -> tuple[subprocess.Popen, str]:
    """Start an infra script in its own session; wait for its ready line; return it and the line's value."""
    proc = subprocess.Popen(
        command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env, cwd=cwd,
        start_new_session=True,
    )
    assert proc.stdout is not None
    for line in proc.stdout:
        if line.startswith(ready):
            return proc, line.strip().split("=", 1)[1]
    proc.wait(timeout=10)
    pytest.fail(f"{command[0]} exited before it was ready")


def stop_group(proc: subprocess.Popen) -> None:
    """SIGTERM the process group ``start_ready`` made; SIGKILL it if it is not gone in 30 s."""
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
