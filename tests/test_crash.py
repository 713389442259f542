"""Crash safety and concurrency of ingest, with real processes.

A subprocess ingest is killed with SIGKILL at several points; the store must stay
readable with each source either wholly present or absent, and rerunning the
same command must leave the store equal to one clean ingest.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from ingest_util import assert_same_store, pointwise_records, run_ingest, write_jsonl
from jurymeter.io.store import Store

pytestmark = pytest.mark.slow

BLOCK_MB = "0.25"


def _sources(root: Path) -> list[Path]:
    root.mkdir(parents=True, exist_ok=True)
    paths = []
    for k in range(3):
        records: list[dict | str] = list(pointwise_records(12_000, item_set=f"set-{k % 2}", seed=k))
        records[k * 7] = {**records[k * 7], "score": "bad"}
        records.append("{broken")
        records.append(records[3 + k])  # an exact duplicate
        paths.append(write_jsonl(root / f"dump-{k}.jsonl", records))
    return paths


@pytest.fixture(scope="module")
def dumps(tmp_path_factory: pytest.TempPathFactory) -> tuple[list[Path], Store]:
    root = tmp_path_factory.mktemp("crash")
    paths = _sources(root / "src")
    reference = Store(str(root / "reference"))
    run_ingest(reference, *paths, block_bytes=int(float(BLOCK_MB) * 1024 * 1024))
    return paths, reference


def _command(paths: list[Path], store: Path, *extra: str) -> list[str]:
    return [
        sys.executable, "-m", "jurymeter.cli", "ingest", *map(str, paths),
        "--store", str(store), "--block-mb", BLOCK_MB, *extra,
    ]


def _has(pattern: str) -> Callable[[Path], bool]:
    return lambda store: any(store.glob(pattern))


KILL_POINTS: list[tuple[str, Callable[[Path], bool] | float]] = [
    ("very early", 0.05),
    ("first data part written", _has("data/**/part-*.parquet")),
    ("first quarantine part written", _has("quarantine/part-*.parquet")),
    ("first source committed", _has("ingested/*.json")),
    ("after 2.0 s", 2.0),
    ("after 3.0 s", 3.0),
]


def _kill_when(proc: subprocess.Popen, store: Path, when: Callable[[Path], bool] | float) -> bool:
    """SIGKILL ``proc`` at the point; return whether it was still running then."""
    deadline = time.monotonic() + 60
    if isinstance(when, float):
        time.sleep(when)
    else:
        while not when(store) and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.005)
    alive = proc.poll() is None
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    return alive


@pytest.mark.parametrize(("label", "when"), KILL_POINTS, ids=[k for k, _ in KILL_POINTS])
def test_sigkill_then_rerun_equals_one_clean_ingest(
    tmp_path: Path, dumps: tuple[list[Path], Store], label: str, when
) -> None:
    paths, reference = dumps
    store_dir = tmp_path / "store"
    proc = subprocess.Popen(_command(paths, store_dir), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _kill_when(proc, store_dir, when)

    # Readable, and each source either wholly present or absent.
    store = Store(str(store_dir))
    if store.exists():
        store.check()
        expected = {
            f.source_id: 0 for f in reference.data_files()
        }
        for f in reference.data_files():
            expected[f.source_id] += reference.read_parquet(f.path).height
        seen: dict[str, int] = {}
        for f in store.data_files():
            seen[f.source_id] = seen.get(f.source_id, 0) + store.read_parquet(f.path).height
        for sid, rows in seen.items():
            assert rows == expected[sid], (label, sid, rows, expected[sid])
        store.scan("pointwise").collect()

    rerun = subprocess.run(_command(paths, store_dir), capture_output=True, text=True, timeout=300)
    assert rerun.returncode == 0, rerun.stderr
    assert_same_store(Store(str(store_dir)), reference)
    leftovers = [p for p in store_dir.rglob("*") if ".tmp-" in p.name]
    assert leftovers == []
    statuses = {Store(str(store_dir)).read_json(f"runs/{p.name}")["status"] for p in (store_dir / "runs").glob("*.json")}
    assert statuses <= {"complete", "interrupted"}


def test_concurrent_ingests_both_land(tmp_path: Path) -> None:
    # Disjoint item sets, so the result cannot depend on which ingest goes first.
    paths = [
        write_jsonl(tmp_path / f"c-{k}.jsonl", pointwise_records(12_000, item_set=f"conc-{k}"))
        for k in range(2)
    ]
    reference = Store(str(tmp_path / "reference"))
    run_ingest(reference, *paths)
    store_dir = tmp_path / "store"
    procs = [
        subprocess.Popen(_command([p], store_dir), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        for p in paths
    ]
    for proc in procs:
        _, stderr = proc.communicate(timeout=300)
        assert proc.returncode == 0, stderr
    assert_same_store(Store(str(store_dir)), reference)


def test_second_writer_stops_with_a_clear_message_when_the_lock_is_held(tmp_path: Path) -> None:
    source = write_jsonl(tmp_path / "x.jsonl", pointwise_records(10))
    store = Store(str(tmp_path / "store"))
    store.create()
    holding, release = threading.Event(), threading.Event()

    def hold() -> None:
        with store.lock():
            holding.set()
            release.wait(30)

    holder = threading.Thread(target=hold)
    holder.start()
    holding.wait(10)
    try:
        blocked = subprocess.run(
            _command([source], tmp_path / "store", "--lock-timeout", "1"),
            capture_output=True, text=True, timeout=120,
        )
    finally:
        release.set()
        holder.join()
    assert blocked.returncode == 1
    assert blocked.stderr.strip().startswith("error: store")
    assert "locked by another ingest" in blocked.stderr
    assert "Traceback" not in blocked.stderr
    assert store.scan("pointwise").collect().height == 0
    assert os.path.exists(tmp_path / "store" / "jurymeter-store.json")
