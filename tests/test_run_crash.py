"""A nightly run killed at any stage, then run again, publishes as one clean run; its Prefect server dies with it.

Real ``jurymeter run`` processes (against one long-lived Prefect server, as
``tests/test_nightly.py`` starts it) are killed with SIGKILL during the
ingest, the fits and the publishing. Independent references: what a reader
finds in the store after the kill (no ``summary.json``, no ``latest.json``,
``jurymeter report latest`` refusing), and after the rerun the run folder's
files, tables and summary against those of a clean run in another store
(run ids and timings aside). The end of the run's Prefect server (and of its
LocalCluster's processes) is checked with psutil on the processes themselves.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson
import polars as pl
import psutil
import pytest
from typer.testing import CliRunner

from flow_util import venv_env
from ingest_util import assert_same_store
from jurymeter.cli.app import app
from jurymeter.io.store import Store
from jurymeter.pipeline.history import load_history, published_runs
from test_nightly import _landing

pytestmark = pytest.mark.slow

# n_boot: few draws, the sequential analysis's fewer still (its GLMM refits are most of a fit's
# time: tests/test_nightly.py, SEQUENTIAL_DRAWS); the kills wait for the store's state, not for a
# time, and the rerun's tables equal the clean run's at any count.
CONFIG = """\
store = "{root}/store"
landing = "{root}/landing"
home = "{root}/.jurymeter"
scale = [1, 10]
[fit]
n_boot = 12
[fit.sequential]
n_boot = 2
[dask]
workers = 1
"""

# Changes from run to run whatever happened: the ids, the clocks, the configuration's digest (it holds
# the LocalCluster's address, a free port), and the ingest's own report (a rerun after a kill finds
# the landing already ingested).
VOLATILE = {"run_id", "started", "finished", "timings", "ingest", "config_digest"}


def _same_fit(entry: dict[str, Any]) -> dict[str, Any]:
    """A fit entry as a clean run would have it: a fit the killed run cached is reused, not fitted, now."""
    status = "fitted" if entry.get("status") == "reused" else entry.get("status")
    analyses = {name: {k: v for k, v in part.items() if k != "seconds"}
                for name, part in (entry.get("analyses") or {}).items()}
    return {**{k: v for k, v in entry.items() if k != "seconds"}, "status": status, "analyses": analyses}


def _setup(root: Path) -> Path:
    landing = _landing(root)
    (landing / "not-gzip.jsonl.gz").write_bytes(b"not gzip at all\n")  # every run reports it, none stops for it
    config = root / "jm.toml"
    config.write_text(CONFIG.format(root=root))
    return config


def _command(config: Path) -> list[str]:
    return [sys.executable, "-m", "jurymeter.cli", "run", "--config", str(config)]


def _run(root: Path, api: str, config: Path) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(_command(config), capture_output=True, text=True, timeout=300, cwd=root,
                          env=venv_env(PREFECT_API_URL=api, PREFECT_HOME=str(root / "prefect-client")))
    assert "Traceback" not in done.stderr, done.stderr
    return done


def _run_folders(store: Path) -> list[Path]:
    return sorted(p for p in (store / "results").glob("*") if p.is_dir() and p.name != "cache")


def _snapshot(store_dir: Path) -> dict[str, Any]:
    """What a reader of the published runs sees, run ids and timings aside."""
    store = Store(str(store_dir))
    [folder] = _run_folders(store_dir)
    latest = orjson.loads((store_dir / "results" / "latest.json").read_bytes())
    assert latest["run_id"] == folder.name
    summary = orjson.loads((folder / "summary.json").read_bytes())
    summary["fits"] = [_same_fit(f) for f in summary["fits"]]
    summary["headlines"]["fits"] = [_same_fit(f) for f in summary["headlines"]["fits"]]
    tables = {p.name: pl.read_parquet(p) for p in sorted(folder.glob("*.parquet"))}
    tables = {name: frame.sort(frame.columns, nulls_last=True) for name, frame in tables.items()}
    history = load_history(store)
    values = history.values.drop([c for c in history.values.columns if c in ("run_id", "started")])
    return {
        "runs": published_runs(store),
        "files": sorted(str(p.relative_to(folder)) for p in folder.rglob("*") if p.is_file()),
        "summary": {k: v for k, v in summary.items() if k not in VOLATILE},
        "tables": tables,
        "history": (len(history.run_ids), values.sort(values.columns, nulls_last=True)),
    }


def _assert_same(got: dict[str, Any], want: dict[str, Any]) -> None:
    assert len(got["runs"]) == len(want["runs"]) == 1
    assert got["files"] == want["files"]
    assert got["summary"] == want["summary"]
    assert got["tables"].keys() == want["tables"].keys()
    for name in want["tables"]:
        assert got["tables"][name].equals(want["tables"][name]), name
    assert got["history"][0] == want["history"][0]
    assert got["history"][1].equals(want["history"][1])


def _has(pattern: str) -> Callable[[Path], bool]:
    return lambda store: any(store.glob(pattern))


def _publishing(store: Path) -> bool:
    return any(p.is_dir() for p in _run_folders(store))


STAGES: list[tuple[str, Callable[[Path], bool]]] = [
    ("ingest", _has("data/**/part-*.parquet")),  # the first part staged, nothing committed yet
    ("fits", _has("results/cache/*/complete.json")),  # the first fit cached
    ("publish", _publishing),  # the run folder's first file written, its summary.json not yet
]


def _kill_during(root: Path, api: str, config: Path, stage: str, when: Callable[[Path], bool]) -> None:
    """Start a run, SIGKILL it once ``when`` holds of its store; check nothing half-published is visible."""
    store_dir = root / "store"
    env = venv_env(PREFECT_API_URL=api, PREFECT_HOME=str(root / "prefect-client"))
    proc = subprocess.Popen(_command(config), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd=root, env=env)
    deadline = time.monotonic() + 300
    while not when(store_dir) and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.002)
    assert proc.poll() is None, f"the run ended before its {stage} could be killed"
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    assert not (store_dir / "results" / "latest.json").exists(), stage
    assert published_runs(Store(str(store_dir))) == [], stage
    if stage == "publish":
        assert _run_folders(store_dir), "killed while the run folder was written"
    # The command in this process (a subprocess's start and imports were 2-3 s of each kill's time).
    latest = CliRunner().invoke(app, ["report", "latest", "--store", str(store_dir)])
    assert latest.exit_code == 1, latest.output
    assert "no run in" in latest.stderr


def test_sigkill_during_each_stage_of_a_run_then_rerun_equals_a_clean_run(tmp_path: Path, prefect_server: str) -> None:
    """One store: a clean run for reference, then (store removed) runs killed during the ingest, the fits
    and the publishing, each start cleaning what the one before left, then a run to the end.

    The same folder for both, so paths, configuration digest and alerts are the same; the kills
    follow one another (each next start is the rerun of the one before) to keep the test's time.
    """
    config = _setup(tmp_path)
    store_dir = tmp_path / "store"
    done = _run(tmp_path, prefect_server, config)
    assert done.returncode == 6, done.stdout + done.stderr  # some part failed: the unreadable file
    clean = _snapshot(store_dir)
    reference = tmp_path / "reference"
    shutil.move(store_dir, reference)

    summary = clean["summary"]
    assert summary["status"] == "partial"
    [unreadable] = summary["sources_unreadable"]
    assert unreadable["source"] == str(tmp_path / "landing" / "not-gzip.jsonl.gz")
    assert "not gzip data, or corrupt" in unreadable["reason"]
    assert summary["headlines"]["alerts"][0].startswith(f"source not ingested: {unreadable['source']}: ")
    assert summary["fits"]
    assert {f["status"] for f in summary["fits"]} == {"fitted"}
    page = (_run_folders(reference)[0] / "report" / "index.html").read_text()
    assert f"source not ingested: {unreadable['source']}" in page
    assert re.search(r"alerts \(\d+\):", done.stdout)  # the unreadable source among what is wrong now
    assert "source not ingested:" in done.stdout

    for stage, when in STAGES:
        _kill_during(tmp_path, prefect_server, config, stage, when)
    rerun = _run(tmp_path, prefect_server, config)
    assert rerun.returncode == 6, rerun.stdout + rerun.stderr
    _assert_same(_snapshot(store_dir), clean)
    assert_same_store(Store(str(store_dir)), Store(str(reference)))
    assert not [p for p in store_dir.rglob("*") if ".tmp-" in p.name]


def test_a_results_folder_of_a_killed_run_is_removed_only_by_a_run_alone(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from jurymeter.pipeline.publish import clean_unpublished

    store = Store(str(tmp_path / "store"))
    listed: list[str] = []
    ages = Store.ages
    monkeypatch.setattr(Store, "ages", lambda self, relpath: (listed.append(relpath), ages(self, relpath))[1])
    for run, done in (("20260101T000000Z-aaaaaaaa", True), ("20260102T000000Z-bbbbbbbb", False)):
        folder = tmp_path / "store" / "results" / run
        (folder / "report").mkdir(parents=True)
        (folder / "leaderboard.parquet").write_bytes(b"x")
        (folder / "report" / "index.html").write_text("<p>")
        if done:
            (folder / "summary.json").write_text("{}")
    (tmp_path / "store" / "results" / "20260103T000000Z-cccccccc").mkdir()  # killed before its first file
    (tmp_path / "store" / "results" / "cache" / "k").mkdir(parents=True)
    (tmp_path / "store" / "results" / "cache" / "k" / "report.json").write_text("{}")
    (tmp_path / "store" / "results" / "cache" / "k" / "report.json.tmp-0123").write_text("{")
    (tmp_path / "store" / "results" / "latest.json.tmp-4567").write_text("{")  # cut before its rename
    with store.run_lock() as alone:
        assert alone
        with store.run_lock() as second:  # another run meanwhile: it must not touch a folder being written
            assert not second
            assert clean_unpublished(store, alone=second) == []
        assert (tmp_path / "store" / "results" / "20260102T000000Z-bbbbbbbb").exists()
        assert clean_unpublished(store, alone=alone) == ["20260102T000000Z-bbbbbbbb", "20260103T000000Z-cccccccc"]
    assert sorted(p.name for p in (tmp_path / "store" / "results").iterdir()) == ["20260101T000000Z-aaaaaaaa", "cache"]
    left = sorted(str(p.relative_to(tmp_path / "store")) for p in (tmp_path / "store").rglob("*") if p.is_file())
    assert left == ["_run_lock", "results/20260101T000000Z-aaaaaaaa/leaderboard.parquet",
                    "results/20260101T000000Z-aaaaaaaa/report/index.html",
                    "results/20260101T000000Z-aaaaaaaa/summary.json", "results/cache/k/report.json"]
    # A published run's files are never listed: every night would list the whole history's pages.
    assert listed
    assert not [r for r in listed if r.startswith("results/20260101T000000Z-aaaaaaaa")]


def _server_of(proc: psutil.Process, timeout: float) -> psutil.Process:
    """The uvicorn child of ``proc`` (after its launcher's exec), once it is there."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for child in proc.children(recursive=True):
            try:
                if "uvicorn" in child.cmdline():
                    return child
            except psutil.NoSuchProcess:
                continue
        time.sleep(0.05)
    pytest.fail("no uvicorn child appeared")


LAUNCH = """\
import sys, time
from pathlib import Path
from jurymeter.orchestration.runtime import TemporaryServer
TemporaryServer(Path(sys.argv[1])).launch()
print("launched", flush=True)
time.sleep(120)
"""


@pytest.mark.parametrize("how", [signal.SIGKILL, signal.SIGTERM, signal.SIGINT], ids=lambda s: s.name)
def test_the_temporary_server_ends_with_the_process_that_started_it(tmp_path: Path, how: signal.Signals) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PREFECT_")}
    proc = subprocess.Popen([sys.executable, "-c", LAUNCH, str(tmp_path)], stdout=subprocess.PIPE, text=True, env=env)
    assert proc.stdout is not None
    assert proc.stdout.readline().strip() == "launched"
    server = _server_of(psutil.Process(proc.pid), 30)
    proc.send_signal(how)
    proc.wait(timeout=30)
    _gone, alive = psutil.wait_procs([server], timeout=20)
    for left in alive:
        left.kill()
    assert not alive, f"the server outlived the process killed with {how.name}"


def test_a_run_killed_with_sigkill_leaves_no_prefect_server_and_no_worker(tmp_path: Path) -> None:
    # No PREFECT_API_URL: the run starts its own temporary server.
    config = _setup(tmp_path)
    env = venv_env(PREFECT_HOME=str(tmp_path / "prefect-home"))
    proc = subprocess.Popen(_command(config), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            cwd=tmp_path, env=env)
    run = psutil.Process(proc.pid)
    server = _server_of(run, 120)  # its launcher has exec'd uvicorn: the kernel's request is set
    assert proc.stdout is not None
    for line in proc.stdout:  # the flow runs: the server answered, the LocalCluster is up
        if line.startswith("ingest: "):
            break
    children = run.children(recursive=True)
    assert server in children
    assert len(children) >= 3, children  # the server, the cluster's worker processes
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    _, alive = psutil.wait_procs(children, timeout=30)
    for left in alive:
        left.kill()
    assert not alive, f"outlived the run: {[' '.join(p.cmdline())[:80] for p in alive]}"
