"""The MT-Bench single adapter's column path against a minimal reader written here (json + re, FastChat's rating rule).

The reference knows nothing of the adapter: it reads each line with ``json``,
re-derives the rating from the ``judgment`` as FastChat's
``run_judge_single`` does (the first ``[[x]]``, else the first ``[x]``, else
-1) and checks it is the written ``score``, and cuts the graded answer out of
the prompt with one regular expression per template. Every line is then
expected as a stored judgment, a rejected one (with its reason) or a
quarantined line, at its line number, row for row.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from fastchat_reference import answer_length, fastchat_rating
from jurymeter.io.adapters import mt_bench_columns
from jurymeter.io.adapters.base import AdapterNotes, AdapterOptions
from jurymeter.io.adapters.mt_bench import MT_BENCH
from jurymeter.io.adapters.reading import REJECT_REASON, adapted_batches
from jurymeter.io.sources import discover_sources
from samples import SAMPLES as ALL_SAMPLES

SAMPLES = ALL_SAMPLES / "mt_bench"  # the repository's copy of ../shared/samples
BENCH = Path(__file__).resolve().parents[1] / "bench"

def _text_ok(value: Any) -> bool:
    """Whether every string in a JSON value is Unicode text (no lone surrogate)."""
    if isinstance(value, str):
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            return False
        return True
    if isinstance(value, list):
        return all(_text_ok(v) for v in value)
    if isinstance(value, dict):
        return all(_text_ok(k) and _text_ok(v) for k, v in value.items())
    return True


def _number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def reference(data: bytes) -> tuple[dict[int, tuple[Any, ...]], set[int]]:
    """Judgments by line (item, model, judge, prompt name, score, answer length, reject reason) and unreadable lines."""
    rows: dict[int, tuple[Any, ...]] = {}
    unreadable: set[int] = set()
    for number, raw in enumerate(data.split(b"\n"), start=1):
        raw = raw.removeprefix(b"\xef\xbb\xbf") if number == 1 else raw
        raw = raw.rstrip(b"\r")
        if not raw.strip():
            continue
        try:
            obj = json.loads(raw.decode("utf-8"), parse_constant=lambda name: 1 / 0)
        except (ValueError, ZeroDivisionError):
            unreadable.add(number)
            continue
        judge = obj.get("judge") if isinstance(obj, dict) else None
        if (
            not isinstance(obj, dict)
            or not _text_ok(obj)
            or "model_1" in obj
            or "model_2" in obj
            or not isinstance(obj.get("model"), str)
            or not isinstance(obj.get("question_id"), int | str)
            or isinstance(obj.get("question_id"), bool)
            or type(obj.get("turn")) is not int
            or not (isinstance(judge, list) and len(judge) == 2 and all(isinstance(j, str) for j in judge))
            or not _number(obj.get("tstamp"))
            or not -62135596800.0 <= obj["tstamp"] <= 253402300799.0
            or not _number(obj.get("score"))
        ):
            unreadable.add(number)
            continue
        score = obj["score"]
        if isinstance(obj.get("judgment"), str):
            assert fastchat_rating(obj["judgment"]) == score, f"line {number}: the test's file is not FastChat's"
        reason = None
        if score == -1:
            reason = "judge_call_failed" if obj.get("judgment") == "$ERROR$" else "parse_failure"
        elif not 1 <= score <= 10:
            reason = "score_out_of_scale"
        item = f"{obj['question_id']}-t{obj['turn']}"
        rows[number] = (item, obj["model"], judge[0], judge[1], float(score), answer_length(obj.get("user_prompt")), reason)
    return rows, unreadable


def adapter_rows(path: Path, batch: int) -> tuple[dict[int, tuple[Any, ...]], set[int]]:
    """What the adapter's batches hold, in the reference's terms."""
    [source] = discover_sources([str(path)], log_format="mt-bench")
    rows: dict[int, tuple[Any, ...]] = {}
    unreadable: set[int] = set()
    for b in adapted_batches(source, MT_BENCH, AdapterOptions(), AdapterNotes("mt-bench"), batch_judgments=batch):
        frame = b.frame
        reasons = frame[REJECT_REASON].to_list() if REJECT_REASON in frame.columns else [None] * frame.height
        columns = ["item_id", "system_id", "judge_id", "judge_prompt", "score", "response_length"]
        for line, values, reason in zip(np.asarray(b.lines).tolist(), frame.select(columns).rows(), reasons, strict=True):
            assert line not in rows
            rows[line] = (*values, reason)
        for m in b.malformed:
            assert m.line not in unreadable
            unreadable.add(m.line)
    return rows, unreadable


def _fastchat_line(rng: Any, base: dict[str, Any], k: int) -> dict[str, Any]:
    """A variant of a sample line whose score is what FastChat reads out of its judgment."""
    reply = rng.choice(
        ["Good.\n\nRating: [[7]]", "Rating: [[9.5]] then [[3]]", "no rating here", "$ERROR$",
         "uses array[0] and no double brackets", "Rating: [[11]]", "caf\u00e9 \U0001f600 [[4]]"]
    )
    return base | {"judgment": reply, "score": fastchat_rating(reply), "tstamp": base["tstamp"] + k}


HOSTILE = [
    b"not json", b"[1, 2]", b"null", b"{}", b"", b"   ", b'{"question_id": 81, "model": "\xff"}',
    b'{"question_id": 81, "model": "a\\ud800", "judge": ["gpt-4", "single-v1"], "score": 3, "turn": 1, "tstamp": 1.5}',
    b'{"question_id": 81, "model": "m", "judge": ["gpt-4", "single-v1"], "score": NaN, "turn": 1, "tstamp": 1.5}',
    b'{"question_id": 81, "model": "m", "judge": ["gpt-4", "single-v1"], "score": true, "turn": 1, "tstamp": 1.5}',
    b'{"question_id": 81, "model": "m", "judge": ["gpt-4", "single-v1"], "score": 3, "score": -1, "turn": 1, '
    b'"tstamp": 1.5, "judgment": "$ERROR$"}',
    b'{"question_id": 81, "model_1": "a", "model_2": "b", "judge": ["gpt-4", "pair-v2"], "turn": 1, "tstamp": 1.5}',
]


def _samples() -> list[Path]:
    return sorted(SAMPLES.glob("single__*.jsonl"))


@pytest.mark.parametrize("name", [p.name for p in _samples()])
def test_real_samples_read_as_the_reference_does(name: str) -> None:
    path = SAMPLES / name
    assert adapter_rows(path, 50_000) == reference(path.read_bytes())


@pytest.mark.parametrize("parallel", [False, True])
def test_hostile_fastchat_files_read_as_the_reference_does(
    parallel: bool, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import random

    rng = random.Random(25)
    bases = [json.loads(line) for p in _samples() for line in p.read_bytes().splitlines() if line.strip()]
    lines = [json.dumps(_fastchat_line(rng, rng.choice(bases), k)).encode() for k in range(400)]
    for k, bad in enumerate(HOSTILE):
        lines.insert(7 + 41 * k, bad)
    cut = json.dumps(bases[0]).encode()[:300]
    data = b"\xef\xbb\xbf" + b"\r\n".join(lines) + b"\n" + cut
    path = tmp_path / "gpt-4_single.jsonl"
    path.write_bytes(data)
    if parallel:  # ranges parsed here and in one worker process, as a large file is
        monkeypatch.setattr(mt_bench_columns, "PARALLEL_BYTES", 0)
        monkeypatch.setattr(mt_bench_columns, "RANGE_BYTES", 20_000)
        monkeypatch.setattr(mt_bench_columns, "_parallel_workers", lambda source: 1)
    expected = reference(data)
    assert len(expected[1]) >= 9  # the hostile lines and the cut last line are in the file
    assert adapter_rows(path, 37) == expected


def test_generated_benchmark_file_reads_as_the_reference_does(tmp_path: Path) -> None:
    sys.path.insert(0, str(BENCH))
    try:
        from adapters import write_logs
    finally:
        sys.path.remove(str(BENCH))
    path = tmp_path / "gpt-4_single.jsonl"
    write_logs(path, tmp_path / "canonical.jsonl", 2000, seed=3)
    rows, unreadable = reference(path.read_bytes())
    assert len(rows) == 2000
    assert not unreadable
    assert adapter_rows(path, 500) == (rows, unreadable)
