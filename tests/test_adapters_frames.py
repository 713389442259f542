"""The MT-Bench adapter's column path (``MtBenchAdapter.frames``) gives exactly what its judgments give.

Independent reference: the adapter's :class:`~jurymeter.io.adapters.base.Judgment`
path, which ``tests/test_adapter_mt_bench.py`` holds to counts taken from the
sample files by hand. Both are read as the ingest reads them
(``reading.adapted_batches``), batch by batch: the same lines, unreadable lines
and messages, adapter rejects with their reasons, messages, judges and raw
text, the raw text of every row, and the same rows out of ``validate_batch``;
then through ``ingest`` into two stores: the same committed rows, quarantine
and report. The inputs are every MT-Bench single sample and hostile variants
built from them (scores -1, 0, 9.5, 2**60 and 2**64 - 1, string ids, integer
and negative-zero tstamps, the first and last second a date holds, empty ids,
wrong types, missing fields, non-objects, blank lines, a BOM, CRLF, re-runs and
byte-identical re-deliveries, non-ASCII answers), in batches of 1 to 50,000.
"""

from __future__ import annotations

import json
import random
import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl
import pytest

from jurymeter.io.adapters import reading
from jurymeter.io.adapters.base import AdapterNotes, AdapterOptions
from jurymeter.io.adapters.mt_bench import MT_BENCH, MtBenchAdapter
from jurymeter.io.adapters.reading import REJECT_MESSAGE, REJECT_REASON, FileBytes, adapted_batches
from jurymeter.io.ingest import ingest
from jurymeter.io.source_files import SourceFile
from jurymeter.io.sources import discover_sources
from jurymeter.io.store import Store
from jurymeter.io.validate import ValidationOptions, validate_batch
from samples import SAMPLES

MT = SAMPLES / "mt_bench"
SINGLES = sorted(MT.glob("single__*.jsonl"))
PAIRS = sorted(MT.glob("pair__*.jsonl"))

pytestmark = pytest.mark.skipif(not MT.is_dir(), reason="the shared MT-Bench samples are not here")


def _lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def hostile_lines() -> list[bytes]:
    """Sample lines and variants of them that exercise every branch of the single-answer reading."""
    samples = [line for path in SINGLES for line in _lines(path)]
    base = samples[0]
    rng = random.Random(5)
    changes: list[dict[str, Any]] = [
        {"score": -1, "judgment": "$ERROR$"}, {"score": -1}, {"score": 0}, {"score": 11}, {"score": 9.5},
        {"score": 10.0}, {"score": 2**60}, {"score": 2**60 + 1}, {"score": 2**64 - 1}, {"score": -(2**63)},
        {"score": 2**64}, {"score": 2**53 + 1}, {"score": 9007199254740992.0},
        {"question_id": "81a"}, {"question_id": "81"}, {"tstamp": 1689492824},
        {"tstamp": -0.0, "score": 3}, {"tstamp": 0.0, "score": 3}, {"tstamp": 0, "score": 3},
        {"tstamp": 253402300799.0}, {"tstamp": -62135596800.0}, {"tstamp": -62135596799.9999996},
        {"tstamp": 1e11 + 0.5}, {"tstamp": 1.5e-7, "score": 4}, {"tstamp": 253402300799.5},
        {"model": ""}, {"judge": ["", "single-v1"]}, {"judge": ["gpt-4", ""]}, {"model": "\x1emarked"},
        {"score": None}, {"score": "nine"}, {"score": True}, {"turn": True}, {"turn": "1"},
        {"judge": "gpt-4"}, {"judge": ["gpt-4"]}, {"judge": ["gpt-4", 3]}, {"model": 7}, {"tstamp": "x"},
        {"tstamp": 1e300}, {"question_id": [81]}, {"user_prompt": 5}, {"extra": {"a": 1}}, {"model_1": "x"},
        {"user_prompt": base["user_prompt"].replace(
            "[The End of Assistant's Answer]",
            "[The Start of Assistant's Answer]\n[The End of Assistant's Answer]")},
        {"user_prompt": base["user_prompt"].replace("Hawaii", "Hawa\u00efi \U0001f600 \u2014")},
    ]
    out = [json.dumps(line).encode() for line in samples]
    out += [json.dumps(base | change).encode() for change in changes]
    for name in ("user_prompt", "model", "score", "question_id", "judge", "turn", "tstamp"):
        out.append(json.dumps({k: v for k, v in base.items() if k != name}).encode())
    pair = _lines(PAIRS[0])[0]
    out += [json.dumps(pair).encode(), b"[1, 2]", b"not json", b"   ", b"", b'{"question_id": 81, "model": "\xff"}',
            b"{}", b"null", json.dumps(base).encode()[:500]]
    for line in samples[:30]:  # re-runs: an earlier tstamp, another score, the same line again
        out.append(json.dumps(line | {"tstamp": line["tstamp"] - 50, "score": rng.randint(1, 10)}).encode())
        out.append(json.dumps(line | {"score": rng.randint(1, 10)}).encode())
        out.append(json.dumps(line).encode())
    for k in range(300):  # random timestamps over the years a date holds, some keys judged again
        stamp = rng.uniform(-6.2e10, 2.5e11) if k % 2 else rng.uniform(1.6e9, 1.8e9)
        out.append(json.dumps(samples[k % 7] | {"tstamp": stamp, "score": rng.randint(1, 10)}).encode())
    return out


def _write(tmp_path: Path, name: str, data: bytes) -> SourceFile:
    path = tmp_path / name
    path.write_bytes(data)
    [source] = discover_sources([str(path)], log_format="mt-bench")
    return source


def _inputs(tmp_path: Path) -> Iterator[SourceFile]:
    for path in SINGLES:
        yield _write(tmp_path, path.name, path.read_bytes())
    body = b"\n".join(hostile_lines()) + b"\n"
    yield _write(tmp_path, "hostile.jsonl", b"\xef\xbb\xbf" + body)
    yield _write(tmp_path, "crlf.jsonl", body.replace(b"\n", b"\r\n"))
    yield _write(tmp_path, "junk-first.jsonl", b"not json\n[3]\n{}\n\n" + body.rstrip(b"\n"))


class _NoFrames(MtBenchAdapter):
    """The MT-Bench adapter without its column path: the reference."""

    def frames(self, *args: Any, **kwargs: Any) -> None:
        return None


def _read(source: SourceFile, adapter: MtBenchAdapter, options: AdapterOptions, batch: int) -> list[Any]:
    """Everything the ingest takes from each batch, validated."""
    notes = AdapterNotes("mt-bench")
    out: list[Any] = []
    for b in adapted_batches(source, adapter, options, notes, batch_judgments=batch):
        frame = b.frame
        record: dict[str, Any] = {
            "lines": b.lines.tolist(),
            "malformed": [(m.line, m.raw, m.message) for m in b.malformed],
            "width": frame.width,
            "raw": b.raw(np.arange(frame.height)),
        }
        if frame.height:
            if REJECT_REASON in frame.columns:
                told = frame.with_row_index("k").filter(pl.col(REJECT_REASON).is_not_null())
                record["rejects"] = told.select("k", REJECT_REASON, REJECT_MESSAGE, "judge_id").rows()
                frame = frame.filter(pl.col(REJECT_REASON).is_null()).drop(REJECT_REASON, REJECT_MESSAGE)
            accepted, rejected = validate_batch(frame, "pointwise", ValidationOptions(scale=options.scale))
            record["accepted"] = accepted
            record["rejected"] = rejected.rows()
        out.append(record)
    out.append(notes.notes)
    return out


def _same(got: list[Any], expected: list[Any]) -> None:
    assert len(got) == len(expected)
    for g, e in zip(got, expected, strict=True):
        if isinstance(e, dict) and "accepted" in e:
            assert g.keys() == e.keys()
            assert g["accepted"].schema == e["accepted"].schema
            assert g["accepted"].equals(e["accepted"]), (g["accepted"], e["accepted"])
            g, e = {k: v for k, v in g.items() if k != "accepted"}, {k: v for k, v in e.items() if k != "accepted"}
        assert g == e


@pytest.mark.parametrize("batch", [1, 13, 50_000])
def test_the_column_path_reads_every_batch_as_the_judgments_do(batch: int, tmp_path: Path) -> None:
    sources = list(_inputs(tmp_path))
    if batch == 1:  # every line a batch of its own: the hostile variants without the samples and re-runs
        sources = [_write(tmp_path, "short.jsonl", b"\xef\xbb\xbf" + b"\n".join(hostile_lines()[140:260]))]
    for source in sources:
        for options in (AdapterOptions(), AdapterOptions(scale=(0.0, 1e30), item_set="mt-bench-x")):
            expected = _read(source, _NoFrames(), options, batch)
            got = _read(source, MT_BENCH, options, batch)
            _same(got, expected)


def _store_rows(store: Store) -> tuple[pl.DataFrame, pl.DataFrame]:
    frames = [store.read_parquet(f.path).with_columns(item_set=pl.lit(f.item_set)) for f in store.data_files("pointwise")]
    data = pl.concat(frames).sort("_source_line", "item_set") if frames else pl.DataFrame()
    quarantined = [store.read_parquet(q) for q in store.quarantine_files()]
    return data, (pl.concat(quarantined).sort("line", "reason", "message") if quarantined else pl.DataFrame())


@pytest.mark.parametrize("scale", [None, (0.0, 100.0)])
def test_the_column_path_ingests_the_same_store(
    scale: tuple[float, float] | None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for source in _inputs(tmp_path):
        reports = []
        stores = []
        for k, frames in enumerate((False, True)):
            if not frames:
                monkeypatch.setattr(MtBenchAdapter, "frames", _NoFrames.frames)
            else:
                monkeypatch.undo()
            store = Store(str(tmp_path / f"store-{source.path.rsplit('/', 1)[-1]}-{k}"))
            [report] = ingest(store, [source], ValidationOptions(scale=scale)).sources
            reports.append({k: v for k, v in vars_of(report).items() if k != "source"})
            stores.append(_store_rows(store))
        assert reports[0] == reports[1]
        for got, expected in zip(stores[1], stores[0], strict=True):
            assert got.equals(expected)


def vars_of(report: Any) -> dict[str, Any]:
    return {name: getattr(report, name) for name in report.__slots__}


def test_frames_are_offered_for_single_answer_files_only(tmp_path: Path) -> None:
    options, notes = AdapterOptions(), AdapterNotes("mt-bench")
    for path in SINGLES:
        source = _write(tmp_path, path.name, path.read_bytes())
        assert MT_BENCH.frames(FileBytes(source), options, notes, batch_judgments=10) is not None
    for path in PAIRS:
        source = _write(tmp_path, path.name, path.read_bytes())
        assert MT_BENCH.frames(FileBytes(source), options, notes, batch_judgments=10) is None
    nothing = _write(tmp_path, "nothing.jsonl", b'{"a": 1}\nnot json\n')
    assert MT_BENCH.frames(FileBytes(nothing), options, notes, batch_judgments=10) is None


def test_the_column_path_leaves_no_temporary_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    spill = tmp_path / "tmp"
    spill.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(spill))
    source = _write(tmp_path, "hostile.jsonl", b"\n".join(hostile_lines()))
    blocks = adapted_batches(source, MT_BENCH, AdapterOptions(), AdapterNotes("mt-bench"), batch_judgments=20)
    next(blocks)
    assert len(list(spill.iterdir())) == 1  # the batches wait there, read back one at a time
    list(blocks)
    assert list(spill.iterdir()) == []
    blocks = adapted_batches(source, MT_BENCH, AdapterOptions(), AdapterNotes("mt-bench"), batch_judgments=20)
    next(blocks)
    blocks.close()  # a consumer that stops early
    assert list(spill.iterdir()) == []


def test_a_row_validation_rejects_gets_its_raw_text_even_when_not_kept(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    line = _lines(SINGLES[0])[0]
    data = b"\n".join(json.dumps(line | change).encode() for change in ({}, {"model": ""}, {"tstamp": 5.0}))
    source = _write(tmp_path, "three.jsonl", b"\xef\xbb\xbf" + data)
    [batch] = adapted_batches(source, MT_BENCH, AdapterOptions(), AdapterNotes("mt-bench"))
    texts = [t.decode() for t in data.split(b"\n")]
    assert batch.raw(np.arange(3)) == texts  # rows 0 and 2 read again from the file, the BOM taken off
    assert batch.raw(np.asarray([2, 1])) == [texts[2], texts[1]]
    monkeypatch.setattr(reading, "READ_BYTES", 7)
    [batch] = adapted_batches(source, MT_BENCH, AdapterOptions(), AdapterNotes("mt-bench"))
    assert batch.raw(np.arange(3)) == texts


def _parallel(monkeypatch: pytest.MonkeyPatch, range_bytes: int) -> None:
    """Parse every local file in ranges of ``range_bytes``, by this thread and one worker process."""
    from jurymeter.io.adapters import mt_bench_columns as mt_bench

    monkeypatch.setattr(mt_bench, "PARALLEL_BYTES", 0)
    monkeypatch.setattr(mt_bench, "RANGE_BYTES", range_bytes)
    monkeypatch.setattr(mt_bench, "_parallel_workers", lambda source: 1 if source.local_file() else 0)


@pytest.mark.parametrize("range_bytes", [1, 3000, 1 << 20])
def test_ranges_split_the_lines_as_the_file_reader_does(range_bytes: int, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from jurymeter.io.adapters import mt_bench_columns as mt_bench

    monkeypatch.setattr(mt_bench, "RANGE_BYTES", range_bytes)
    monkeypatch.setattr(mt_bench, "_READ_BYTES", 1000)
    body = b"\n".join(hostile_lines()[:200])
    for data in (body, body + b"\n", body.replace(b"\n", b"\r\n") + b"\n\n", b"", b"\n", b"x", b"\n\nx\n"):
        source = _write(tmp_path, "lines.jsonl", data)
        expected = [line for _, block in FileBytes(source).line_blocks() for line in block]
        got: list[bytes] = []
        ranges = mt_bench._ranges(source.path, len(data))
        assert [s for s, _ in ranges[1:]] == [e for _, e in ranges[:-1]]
        assert ranges[0][0] == 0
        assert ranges[-1][1] == len(data)
        for start, end in ranges:
            assert start == 0 or data[start - 1 : start] == b"\n"
            got += [line for _, block in mt_bench._range_blocks(source.path, start, end) for line in block]
        assert got == expected


@pytest.mark.parametrize("batch", [13, 50_000])
def test_the_parallel_parse_reads_every_batch_as_the_judgments_do(
    batch: int, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    sources = list(_inputs(tmp_path))[-3:]  # the hostile files: a BOM, CRLF, unreadable lines first
    expected = [_read(source, _NoFrames(), AdapterOptions(), batch) for source in sources]
    _parallel(monkeypatch, 3000)  # several ranges, parsed here and in the worker
    for source, reference in zip(sources, expected, strict=True):
        _same(_read(source, MT_BENCH, AdapterOptions(), batch), reference)


def test_the_parallel_parse_ingests_the_same_store(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import multiprocessing

    source = list(_inputs(tmp_path))[-3]
    stores, reports = [], []
    for k, parallel in enumerate((False, True)):
        if parallel:
            monkeypatch.undo()
            _parallel(monkeypatch, 5000)
        else:
            monkeypatch.setattr(MtBenchAdapter, "frames", _NoFrames.frames)
        store = Store(str(tmp_path / f"store-{k}"))
        [report] = ingest(store, [source], ValidationOptions()).sources
        reports.append({k: v for k, v in vars_of(report).items() if k != "source"})
        stores.append(_store_rows(store))
    assert reports[0] == reports[1]
    for got, expected in zip(stores[1], stores[0], strict=True):
        assert got.equals(expected)
    assert multiprocessing.active_children() == []


def test_the_parallel_parse_leaves_no_temporary_file_or_process(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import multiprocessing

    spill = tmp_path / "tmp"
    spill.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(spill))
    _parallel(monkeypatch, 2000)
    source = _write(tmp_path, "hostile.jsonl", b"\n".join(hostile_lines()))
    blocks = adapted_batches(source, MT_BENCH, AdapterOptions(), AdapterNotes("mt-bench"), batch_judgments=20)
    next(blocks)
    assert multiprocessing.active_children() == []  # the parse is over before the first batch
    blocks.close()
    assert list(spill.iterdir()) == []
    class Later(threading.Event):  # set from its third look on: during the parse
        looks = 0

        def is_set(self) -> bool:
            self.looks += 1
            return self.looks > 2

    cancel = Later()
    with pytest.raises(reading.ReadCancelled):
        list(adapted_batches(source, MT_BENCH, AdapterOptions(), AdapterNotes("mt-bench"), cancel=cancel))
    assert list(spill.iterdir()) == []
    assert multiprocessing.active_children() == []
