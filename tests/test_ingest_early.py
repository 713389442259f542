"""An adapter source is read beside its content hash (``io.ingest.AdapterRead``), and stopped when not needed.

Independent references: the threads and temporary folders that exist before
and after (``threading.enumerate``, a private ``tempfile.tempdir``), the call
order recorded by wrapped functions, and the store's own already-ingested
verdict.
"""

from __future__ import annotations

import json
import shutil
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from jurymeter.io import ingest as ingest_module
from jurymeter.io.adapters.reading import FileBytes, ReadCancelled
from jurymeter.io.ingest import ingest
from jurymeter.io.prefetch import Prefetch
from jurymeter.io.sources import discover_sources
from jurymeter.io.store import Store
from jurymeter.io.validate import ValidationOptions
from samples import SAMPLES

SINGLE = SAMPLES / "mt_bench" / "single__lesnikow-fast-chat__gpt-4-turbo_single.jsonl"


def _prefetch_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name == "jurymeter-prefetch"]


def test_prefetch_produces_ahead_from_the_start_and_raises_where_the_producer_did() -> None:
    produced: list[int] = []

    def items() -> Iterator[int]:
        for k in range(3):
            produced.append(k)
            yield k
        raise ValueError("at the fourth item")

    ahead = Prefetch(items())
    deadline = time.monotonic() + 5
    while not produced and time.monotonic() < deadline:
        time.sleep(0.01)
    assert produced  # before anything was asked for
    assert [next(ahead), next(ahead), next(ahead)] == [0, 1, 2]
    with pytest.raises(ValueError, match="fourth"):
        next(ahead)
    with pytest.raises(StopIteration):
        next(ahead)
    assert not _prefetch_threads()


def test_closing_a_prefetch_stops_its_producer_and_closes_the_items() -> None:
    closed = threading.Event()

    def endless() -> Iterator[int]:
        try:
            k = 0
            while True:
                yield k
                k += 1
        finally:
            closed.set()

    ahead = Prefetch(endless())
    assert next(ahead) == 0
    started = time.monotonic()
    ahead.close()
    assert time.monotonic() - started < 5
    assert closed.is_set()
    assert not _prefetch_threads()
    with pytest.raises(StopIteration):
        next(ahead)


def test_a_cancelled_file_read_stops_at_its_next_block(tmp_path: Path) -> None:
    [source] = discover_sources([str(SINGLE)])
    cancel = threading.Event()
    lines = FileBytes(source, cancel).lines()
    assert next(lines)[0] == 1
    cancel.set()
    with pytest.raises(ReadCancelled):
        list(lines)
    with pytest.raises(ReadCancelled):
        FileBytes(source, cancel).read()


def test_a_new_adapter_source_is_read_while_it_is_hashed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    events: list[str] = []
    hash_of = ingest_module.content_key
    made = ingest_module.AdapterRead

    def hashing(source: Any) -> str:
        events.append("hash")
        return hash_of(source)

    def reading(*args: Any) -> Any:
        events.append("read")
        return made(*args)

    monkeypatch.setattr(ingest_module, "content_key", hashing)
    monkeypatch.setattr(ingest_module, "AdapterRead", reading)
    store = Store(str(tmp_path / "store"))
    [source] = discover_sources([str(SINGLE)])
    [first] = ingest(store, [source], ValidationOptions()).sources
    assert events == ["read", "hash"]
    assert first.status == "ingested"
    assert first.accepted == 80
    events.clear()
    [again] = ingest(store, [source], ValidationOptions()).sources
    assert again.status == "already_ingested"
    assert events == ["hash"]  # a committed source has its size: a re-delivery is only hashed
    assert not _prefetch_threads()


def test_a_speculative_read_of_a_committed_source_is_stopped_and_leaves_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = Store(str(tmp_path / "store"))
    big = tmp_path / "big_single.jsonl"
    big.write_bytes(SINGLE.read_bytes() * 200)  # 16,000 lines
    [source] = discover_sources([str(big)])
    ingest(store, [source], ValidationOptions())
    marker = next((tmp_path / "store" / "ingested").glob("*.json"))
    written = json.loads(marker.read_text())
    del written["size"]  # a marker without the size (or a same-size file): the read starts beside the hash
    marker.write_text(json.dumps(written))
    spill = tmp_path / "tmp"
    spill.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(spill))
    hash_of = ingest_module.content_key
    seen_spilling: list[bool] = []

    def hashing(source: Any) -> str:
        sha = hash_of(source)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:  # the hash is known once the read is under way
            if any(spill.iterdir()):
                seen_spilling.append(True)
                break
            time.sleep(0.001)
        return sha

    monkeypatch.setattr(ingest_module, "content_key", hashing)
    [again] = ingest(store, [source], ValidationOptions()).sources
    assert again.status == "already_ingested"
    assert seen_spilling == [True]
    assert not _prefetch_threads()
    assert list(spill.iterdir()) == []
    shutil.rmtree(spill)
