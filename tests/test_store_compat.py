"""A store written by main before issue 22 (format 1) opens, fits and re-ingests as a no-op with the current code.

| contract | independent reference |
| --- | --- |
| ``store info`` reads the old store: records per item set, quarantine by reason, metadata | counted by hand from ``tests/data/store_v1/sources`` and the inspect sample's README |
| a G-study fits on it; its system means are the plain means of the source's scores | the 12 scores of ``sources/pointwise.jsonl`` summed by hand |
| re-ingesting every source it was built from is ``already_ingested``, and adds no data, marker or quarantine file | the file listing before and after |
| a new batched log ingests into it under the new key: a re-delivered rating is a duplicate, another batch's rating of the same output is kept | hand-written records |
| content keys: a file of an old marker's size but other bytes is ingested (under a BLAKE3 marker); a store of BLAKE3 markers re-ingests as a no-op without SHA-256; the key is the BLAKE3 of the file's bytes as stored (gzip: the compressed bytes) | the ``blake3`` package called on the bytes in the test; a SHA-256 that fails if called |
"""

from __future__ import annotations

import gzip
import shutil
from pathlib import Path

import blake3
import orjson
import pytest
from typer.testing import CliRunner

import jurymeter.io.ingest as ingest_module
from ingest_util import run_ingest, write_jsonl
from jurymeter.cli.app import app
from jurymeter.io.store import STORE_FORMAT, Store
from samples import SAMPLES

FIXTURE = Path(__file__).parent / "data" / "store_v1"
SOURCES = [FIXTURE / "sources" / name for name in ("pointwise.jsonl", "pairwise.csv", "systems.csv",
                                                  "mt_bench_single.jsonl")]
INSPECT = SAMPLES / "inspect_ai" / "jm_mock_judge.6x2.eval"


@pytest.fixture
def old_store(tmp_path: Path) -> Store:
    root = tmp_path / "store"
    shutil.copytree(FIXTURE / "store", root)
    return Store(str(root))


def _files(store: Store) -> set[str]:
    root = Path(store.root)
    return {str(p.relative_to(root)) for p in root.rglob("*")
            if p.is_file() and p.parts[len(root.parts)] in ("data", "ingested", "quarantine")}


def test_the_fixture_is_format_1() -> None:
    marker = orjson.loads((FIXTURE / "store" / "jurymeter-store.json").read_bytes())
    assert marker["format"] == 1 == STORE_FORMAT  # bump it and this store, every user's, stops opening


def test_store_info_reads_the_old_store(old_store: Store) -> None:
    result = CliRunner().invoke(app, ["store", "info", "--store", old_store.url, "--json"])
    assert result.exit_code == 0, result.output
    info = orjson.loads(result.stdout)
    records = {(r["protocol"], r["item_set"]): r["records"] for r in info["item_sets"]}
    assert records == {("pointwise", "fixture"): 12, ("pointwise", "mt-bench"): 12,
                       ("pointwise", "jm_mock_judge"): 22, ("pairwise", "fixture-pairs"): 6}
    replicates = {r["item_set"]: r["replicates"] for r in info["item_sets"]}
    # mt_bench_single.jsonl: 6 keys judged twice; the others rate each output once (batches or not)
    assert replicates == {"fixture": 1, "mt-bench": 2, "jm_mock_judge": 1, "fixture-pairs": 1}
    assert info["quarantine"] == {"unscored": 2}
    assert info["metadata"] == {"systems": 2, "judges": 0}


def test_a_gstudy_fits_on_the_old_store(old_store: Store) -> None:
    result = CliRunner().invoke(app, ["gstudy", "--store", old_store.url, "--item-set", "fixture", "--json",
                                      "--boot", "20"])
    assert result.exit_code == 0, result.output
    report = orjson.loads(result.stdout)
    assert report["block"]["observations_used"] == 12
    # sources/pointwise.jsonl: s1 scores 7 5 6 (j1) and 8 6 6 (j2), s2 4 3 5 and 5 4 4
    assert report["system_means"] == pytest.approx({"s1": 38 / 6, "s2": 25 / 6}, abs=1e-12)


def test_reingesting_the_sources_is_a_no_op(old_store: Store) -> None:
    before = _files(old_store)
    report = run_ingest(old_store, *SOURCES, INSPECT)
    assert [s.status for s in report.sources] == ["already_ingested"] * 5
    assert report.totals()["accepted"] == 0
    assert _files(old_store) == before


def test_a_new_batched_log_joins_the_old_store(old_store: Store, tmp_path: Path) -> None:
    base = {"item_set": "fixture", "item_id": "i1", "system_id": "s1", "judge_id": "j1"}
    rows: list[dict | str] = [
        {**base, "score": 7, "batch_id": "b-s1", "batch_position": 0},  # stored already: a duplicate
        {**base, "score": 9, "batch_id": "b-s1-again", "batch_position": 2},  # another batch: a new rating
        {**base, "item_id": "i2", "judge_id": "j2", "score": 6},  # stored already, no batch: a duplicate
    ]
    report = run_ingest(old_store, write_jsonl(tmp_path / "more.jsonl", rows))
    (source,) = report.sources
    assert (source.accepted, source.quarantined, source.duplicates_dropped) == (1, 0, 2)
    assert old_store.scan("pointwise", "fixture").collect().height == 13


def _marker_names(store: Store) -> set[str]:
    return {p.name for p in (Path(store.root) / "ingested").glob("*.json")}


def test_a_file_of_an_old_markers_size_with_other_bytes_is_ingested(old_store: Store, tmp_path: Path) -> None:
    text = (FIXTURE / "sources" / "pointwise.jsonl").read_bytes()
    changed = text.replace(b'"score": 7', b'"score": 9', 1)
    assert len(changed) == len(text)
    assert changed != text
    path = tmp_path / "pointwise.jsonl"
    path.write_bytes(changed)
    before = _marker_names(old_store)
    (source,) = run_ingest(old_store, path).sources
    assert source.status == "ingested"
    assert (source.accepted, source.quarantined, source.duplicates_dropped) == (0, 1, 11)  # i1's 7 now a 9
    digest = blake3.blake3(changed).hexdigest()
    assert source.content_key == f"b3-{digest}"
    assert _marker_names(old_store) - before == {f"b3-{digest}.json"}
    marker = orjson.loads((Path(old_store.root) / "ingested" / f"b3-{digest}.json").read_bytes())
    assert (marker["content_key"], marker["algorithm"]) == (f"b3-{digest}", "blake3")


def test_a_blake3_store_reingests_without_sha256(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    store = Store(str(tmp_path / "store"))
    first = run_ingest(store, *SOURCES, INSPECT)
    assert [s.status for s in first.sources] == ["ingested"] * 5
    before = _files(store)

    def no_sha256(*args: object) -> str:
        raise AssertionError("SHA-256 computed for a store of BLAKE3 markers")

    monkeypatch.setattr(ingest_module, "content_sha256", no_sha256)
    again = run_ingest(store, *SOURCES, INSPECT)
    assert [s.status for s in again.sources] == ["already_ingested"] * 5
    assert _files(store) == before


def test_the_content_key_is_the_blake3_of_the_bytes_as_stored(tmp_path: Path) -> None:
    plain = FIXTURE / "sources" / "pointwise.jsonl"
    packed = tmp_path / "packed.jsonl.gz"
    packed.write_bytes(gzip.compress(b"".join(
        line.replace(b'"fixture"', b'"packed"') + b"\n" for line in plain.read_bytes().splitlines())))
    store = Store(str(tmp_path / "store"))
    report = run_ingest(store, plain, packed)
    expected = [f"b3-{blake3.blake3(p.read_bytes()).hexdigest()}" for p in (plain, packed)]
    assert [s.content_key for s in report.sources] == expected
    assert _marker_names(store) == {f"{key}.json" for key in expected}
    assert sorted(store.committed()) == sorted(key[3:19] for key in expected)  # the source ids
