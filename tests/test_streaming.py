"""The streaming fast path equals the block path, and steps aside whenever it cannot prove that.

Independent reference: the block path (``jurymeter.io.streaming.eligible`` patched
to refuse), whose behaviour the rest of the ingest tests pin down. Each case
ingests the same file both ways and compares everything a reader can see,
then checks which path actually wrote the parts (the fast path names them
``part-<sid>-s<n>``).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import tempfile
import threading
from pathlib import Path

import orjson
import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import jurymeter.io.ingest as ingest_module
from ingest_util import assert_same_store, pointwise_records, run_ingest, write_jsonl
from jurymeter.io.census import text_census
from jurymeter.io.sources import discover_sources
from jurymeter.io.store import STAGING, Store
from test_crash import _command, _kill_when


def _both_ways(tmp_path: Path, records: list[dict | str], **options) -> tuple[Store, Store]:
    source = write_jsonl(tmp_path / "dump.jsonl", records)
    fast, block = Store(str(tmp_path / "fast")), Store(str(tmp_path / "block"))
    run_ingest(fast, source, **options)
    original = ingest_module.eligible
    ingest_module.eligible = lambda source, store: False
    try:
        run_ingest(block, source, **options)
    finally:
        ingest_module.eligible = original
    assert_same_store(fast, block)
    return fast, block


def _streamed(store: Store) -> bool:
    """Whether the fast path wrote the parts (and left no staging folder behind)."""
    names = [f.path.rsplit("/", 1)[-1] for f in store.data_files()]
    assert names, "no data files"
    streamed = all(name.split("-", 2)[2].startswith("s") for name in names)
    if streamed:
        # A failed query may finish a file late, so only a proven run must leave none.
        area = store.path(STAGING)
        assert not os.path.exists(area) or not os.listdir(area)
    return streamed


def _clean(n: int = 3000) -> list[dict]:
    records = pointwise_records(n, item_set="chat")
    for k, record in enumerate(records):
        record["timestamp"] = f"2025-01-01T00:{k % 60:02d}:00Z"
        record["batch_id"] = f"b{k // 10}"
        record["extra"] = k
        if k % 3 == 0:
            record["item_set"] = "code/v2 (hard)"
    return records


def test_clean_file_takes_the_fast_path_and_equals_the_block_path(tmp_path: Path) -> None:
    fast, _ = _both_ways(tmp_path, _clean(), scale=(1.0, 10.0))
    assert _streamed(fast)
    assert sorted(fast.item_sets("pointwise")) == ["chat", "code/v2 (hard)"]


def test_exact_duplicates_in_a_clean_file_are_dropped_the_same_way(tmp_path: Path) -> None:
    records = _clean()
    fast, _ = _both_ways(tmp_path, [*records, records[5], records[17]])
    assert _streamed(fast)


def test_pairwise_clean_file(tmp_path: Path) -> None:
    records = [
        {
            "item_set": "arena",
            "item_id": f"q{k}",
            "system_a": "a",
            "system_b": "b",
            "judge_id": "j",
            "winner": ["A", "b", "tie", "model_a"][k % 4],
        }
        for k in range(500)
    ]
    fast, _ = _both_ways(tmp_path, records)
    assert _streamed(fast)


def test_item_sets_too_long_for_a_folder_stream_and_equal_the_block_path(tmp_path: Path) -> None:
    """Long names once made the fast path step aside (and the block path quarantine them)."""
    records = _clean()
    long_a, long_b = "x" * 299 + "a", "x" * 299 + "b"  # differ only at the end
    for k, record in enumerate(records):
        if k % 3 == 1:
            record["item_set"] = long_a if k % 2 else long_b
    fast, block = _both_ways(tmp_path, records)
    assert _streamed(fast)
    want = sorted(["chat", "code/v2 (hard)", long_a, long_b])
    assert fast.item_sets("pointwise") == block.item_sets("pointwise") == want


def _late_key(records: list[dict]) -> list[dict]:
    records[2000] = {**records[2000], "judge_logprob": -0.5}  # after schema inference
    return records


def _blank_line(records: list[dict]) -> list[dict | str]:
    return [*records[:10], "", *records[10:]]


def _rejected(records: list[dict]) -> list[dict]:
    records[50] = {**records[50], "score": 42.0}
    return records


def _other_timestamp(records: list[dict]) -> list[dict]:
    records[1500] = {**records[1500], "timestamp": "2025-01-01 10:00:00.5+02:00"}
    return records


def _hidden_boolean(records: list[dict]) -> list[dict]:
    records[1500] = {**records[1500], "judge_id": True}
    return records


def _malformed(records: list[dict]) -> list[dict | str]:
    return [*records, "{not json"]


def _nested(records: list[dict]) -> list[dict]:
    records[1] = {**records[1], "extra": {"a": 1, "b": [1, 2]}}
    return records


def _mapped_missing(records: list[dict]) -> list[dict]:
    for r in records:
        r["rating"] = r.pop("score")
    del records[9]["rating"]
    return records


def _number_among_text_ids(records: list[dict]) -> list[dict]:
    records[5] = {**records[5], "item_id": 1.50}  # polars would write it "1.5" in a text column
    return records


def _float_ids(records: list[dict]) -> list[dict]:
    for k, r in enumerate(records):
        r["item_id"] = k + 0.5
    return records


def _unpaired_surrogate(records: list[dict]) -> list[dict | str]:
    text = orjson.dumps(records[7]).decode().replace('"judge_id":"', '"judge_id":"\\ud800', 1)
    return [*records[:7], text, *records[8:]]


FALLBACKS = {
    "key first seen after row 100": (_late_key, {}),
    "blank line": (_blank_line, {}),
    "rejected record": (_rejected, {"scale": (1.0, 10.0)}),
    "timestamp in a second spelling": (_other_timestamp, {}),
    "boolean among text ids": (_hidden_boolean, {}),
    "malformed line": (_malformed, {}),
    "nested object": (_nested, {}),
    "mapped column missing once": (_mapped_missing, {"column_map": {"score": "rating"}}),
    "number among text ids": (_number_among_text_ids, {}),
    "float ids": (_float_ids, {}),
    "unpaired surrogate escape": (_unpaired_surrogate, {}),
}


def test_text_ids_that_look_like_numbers_still_stream(tmp_path: Path) -> None:
    records = _clean()
    for r in records:
        r["item_id"] = str(int(r["item_id"].split("-")[1]))  # "81": a text id, not a number
    fast, _ = _both_ways(tmp_path, records)
    assert _streamed(fast)
    assert fast.scan("pointwise").select(pl.col("item_id").str.len_bytes().min()).collect().item() >= 1


@pytest.mark.parametrize("case", list(FALLBACKS), ids=list(FALLBACKS))
def test_files_it_cannot_prove_go_the_block_path_with_the_same_result(
    tmp_path: Path, case: str
) -> None:
    make, options = FALLBACKS[case]
    fast, _ = _both_ways(tmp_path, make(_clean()), **options)
    assert not _streamed(fast), case


def test_a_late_key_is_not_lost(tmp_path: Path) -> None:
    fast, _ = _both_ways(tmp_path, _late_key(_clean()))
    frame = fast.scan("pointwise").collect()
    assert frame["judge_logprob"].drop_nulls().to_list() == [-0.5]


@pytest.mark.slow
@pytest.mark.parametrize("when", ["staging written", "parts adopted"])
def test_sigkill_during_the_fast_path_then_rerun_equals_one_clean_ingest(
    tmp_path: Path, when: str
) -> None:
    records = pointwise_records(300_000, item_set="chat")
    source = write_jsonl(tmp_path / "dump.jsonl", records)
    reference = Store(str(tmp_path / "reference"))
    run_ingest(reference, source)
    assert _streamed(reference)
    store_dir = tmp_path / "store"
    pattern = f"{STAGING}/**/*.parquet" if when == "staging written" else "data/**/part-*.parquet"
    proc = subprocess.Popen(_command([source], store_dir), stdout=subprocess.DEVNULL)
    _kill_when(proc, store_dir, lambda root: any(root.glob(pattern)))
    store = Store(str(store_dir))
    if store.exists():
        assert not store.data_files()  # nothing visible before the marker
    rerun = subprocess.run(_command([source], store_dir), capture_output=True, text=True, timeout=300)
    assert rerun.returncode == 0, rerun.stderr
    assert_same_store(store, reference)
    assert not os.path.exists(store.path(STAGING)) or not os.listdir(store.path(STAGING))


def test_rows_with_different_numbers_of_fields_and_nulls_stream(tmp_path: Path) -> None:
    records = _clean()
    for k, record in enumerate(records):
        if k % 2:
            record["judge_logprob"] = -0.1 * (k % 7)
        if k % 5 == 0:
            record["run_id"] = None  # a key mark followed by null: no value
    fast, _ = _both_ways(tmp_path, records)
    assert _streamed(fast)


@settings(max_examples=200, deadline=None)
@given(
    records=st.lists(
        st.dictionaries(
            st.text("ab\":{} ,", max_size=4),
            st.one_of(st.none(), st.integers(), st.text("nul: \"", max_size=6)),
            max_size=4,
        ),
        max_size=12,
    ),
    spaced=st.booleans(),
    final_newline=st.booleans(),
    chunk=st.integers(1, 40),
)
def test_text_census_matches_a_brute_force_count(
    records: list[dict], spaced: bool, final_newline: bool, chunk: int
) -> None:
    separators = (", ", ": ") if spaced else (",", ":")
    text = "\n".join(json.dumps(r, separators=separators) for r in records)
    data = (text + ("\n" if final_newline and text else "")).encode()
    with tempfile.NamedTemporaryFile(suffix=".jsonl", delete=False) as handle:
        handle.write(data)
    try:
        census = text_census(discover_sources([handle.name])[0], chunk=chunk)
    finally:
        os.unlink(handle.name)
    lines = data.count(b"\n") + (0 if not data or data.endswith(b"\n") else 1)
    nulls = len(re.findall(rb'":null', data)) + len(re.findall(rb'": null', data))
    # One mark per colon: '":":"' holds two (the lookahead counts overlapping ones).
    strings = len(re.findall(rb'(?=":")', data)) + len(re.findall(rb'(?=": ")', data))
    assert (census.lines, census.key_marks, census.null_marks, census.string_marks) == (
        lines, data.count(b'":'), nulls, strings
    )


def test_census_in_its_thread_equals_the_direct_count_and_a_cancelled_one_says_nothing(
    tmp_path: Path,
) -> None:
    from jurymeter.io.streaming import Census

    path = write_jsonl(tmp_path / "dump.jsonl", _clean())
    source = discover_sources([str(path)])[0]
    direct = text_census(source, chunk=256)
    assert direct is not None
    assert direct.lines == len(_clean())
    assert Census(source).result() == direct
    cancelled = threading.Event()
    cancelled.set()
    assert text_census(source, chunk=256, cancel=cancelled) is None
    census = Census(source)
    census.cancel()
    assert census.result() in (None, direct)  # cancelled, or finished first: never a partial count
