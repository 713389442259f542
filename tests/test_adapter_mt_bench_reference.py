"""The MT-Bench single-answer samples through ``ingest`` against a minimal reader written here with ``json`` and ``re``.

Independent reference: each line of every real single-answer sample read with
the standard library's ``json``, FastChat's rules written out (a ``-1`` score
is no rating, ``$ERROR$`` a failed call; the scale 1-10 of its prompts), the
graded answer's length cut with one regular expression per template (not the
adapter's index arithmetic), replicates numbered by distinct ``(tstamp,
score)`` per key, and a byte-identical re-delivery one row. The committed rows
and the quarantine must be exactly that, line by line, so a faster reader of
these files (issue 25) is held to FastChat's rules, not to the code's own
earlier output.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import polars as pl
import pytest

from fastchat_reference import answer_length as _answer_length
from jurymeter.io.ingest import ingest
from jurymeter.io.sources import discover_sources
from jurymeter.io.store import Store
from jurymeter.io.validate import ValidationOptions
from samples import SAMPLES

SINGLES = sorted((SAMPLES / "mt_bench").glob("single__*.jsonl"))

pytestmark = pytest.mark.skipif(not SINGLES, reason="the MT-Bench samples are not here")

def _expected(path: Path) -> tuple[list[dict[str, Any]], list[tuple[int, str]]]:
    """The rows a store of ``path`` must hold (in line order) and the quarantine's (line, reason)."""
    lines = [(k, json.loads(text)) for k, text in enumerate(path.read_text("utf-8").splitlines(), 1) if text.strip()]
    values: dict[tuple[str, str, str], set[tuple[float, Any]]] = {}
    for _, obj in lines:
        key = (f"{obj['question_id']}-t{obj['turn']}", obj["model"], obj["judge"][0])
        values.setdefault(key, set()).add((float(obj["tstamp"]), obj["score"]))
    rows, quarantined, seen = [], [], set()
    for number, obj in lines:
        key = (f"{obj['question_id']}-t{obj['turn']}", obj["model"], obj["judge"][0])
        replicate = sorted(values[key]).index((float(obj["tstamp"]), obj["score"]))
        score = obj["score"]
        if score == -1:
            quarantined.append((number, "judge_call_failed" if obj["judgment"] == "$ERROR$" else "parse_failure"))
        elif not 1 <= score <= 10:
            quarantined.append((number, "score_out_of_scale"))
        elif (*key, replicate) not in seen:  # a re-delivery of the same judgment is one row
            seen.add((*key, replicate))
            rows.append({
                "_source_line": number, "item_id": key[0], "system_id": key[1], "judge_id": key[2],
                "score": float(score), "replicate": replicate,
                "response_length": _answer_length(obj["user_prompt"]),
                "question_id": str(obj["question_id"]), "turn": str(obj["turn"]), "judge_prompt": obj["judge"][1],
            })
    return rows, quarantined


def test_the_reference_reader_cuts_the_lengths_it_should() -> None:
    prompt = "[Instruction]\nx\n\n[The Start of Assistant's Answer]\nab\u00e9\U0001f600\n[The End of Assistant's Answer]"
    assert _answer_length(prompt) == 4
    assert _answer_length(prompt.replace("ab", "[The Start of Assistant's Answer]\n")) is None
    turns = "\n\n### Assistant A:\none\n\n### User:\nq\n\n### Assistant A:\ntwo!\n\n<|The End of Assistant A's Conversation with User|>"
    assert _answer_length("<|The Start|>\n\n### User:\nq" + turns) == 4
    assert _answer_length(turns.replace("one", "")) == 4
    assert _answer_length(turns.replace("one", "x\n\n### Assistant A:\n")) is None


@pytest.mark.parametrize("path", SINGLES, ids=[p.name for p in SINGLES])
def test_every_single_sample_is_stored_as_fastchats_rules_read_it(path: Path, tmp_path: Path) -> None:
    rows, quarantined = _expected(path)
    store = Store(str(tmp_path / "store"))
    [report] = ingest(store, discover_sources([str(path)], log_format="auto"), ValidationOptions()).sources
    assert report.format == "mt-bench"
    columns = list(rows[0])
    stored = pl.concat([store.read_parquet(f.path) for f in store.data_files("pointwise")]).sort("_source_line")
    assert stored.select(columns).to_dicts() == rows
    held = pl.concat([store.read_parquet(q) for q in store.quarantine_files()]) if quarantined else None
    assert (sorted(held.select("line", "reason").rows()) if held is not None else []) == quarantined
    assert report.read == len(rows) + len(quarantined) + report.duplicates_dropped
