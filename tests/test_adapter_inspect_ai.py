"""The inspect_ai adapter over the sample logs and hostile variants of them.

Expectations are literals counted by hand from ``samples/inspect_ai/README.md``
(its grade table) and from the files, listed with
``python -c "import json; d = json.load(open('jm_mock_judge.6x2.json')); ..."``
(the ``.json``; jq rejects its bare NaN) and, for the ``.eval``, by
decompressing each ``samples/*.json`` member with ``zstandard`` after its
local header and printing ``id``, ``epoch``, ``uuid``, ``completed_at``,
``output.completion`` and ``scores[*].value``/``reason``. Never produced by
running the adapter.
"""

from __future__ import annotations

import io
import json
import math
import struct
import zipfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import polars as pl
import pytest
import zstandard

from jurymeter.io.adapters.base import (
    PARSE_FAILURE,
    UNSCORED,
    UNSUPPORTED_RECORD,
    AdapterNotes,
    AdapterOptions,
    Judgment,
    SourceBytes,
    Unreadable,
)
from jurymeter.io.adapters.inspect_ai import INSPECT
from samples import SAMPLES

FOLDER = SAMPLES / "inspect_ai"
EVAL = FOLDER / "jm_mock_judge.6x2.eval"
JSON = FOLDER / "jm_mock_judge.6x2.json"

pytestmark = pytest.mark.skipif(not FOLDER.is_dir(), reason="the shared sample logs are not here")

ALPHA, BETA = "model_graded_qa", "model_graded_qa1"
JUDGES = {ALPHA: "mockllm/grader-alpha", BETA: "mockllm/grader-beta"}
ROLES = {ALPHA: "grader_alpha", BETA: "grader_beta"}
# The README's table: (sample, epoch) -> (alpha grade, beta grade); None = NaN (unscored).
GRADES = {
    ("q01", 1): ("C", "C"), ("q02", 1): ("C", "C"), ("q03", 1): ("C", "C"),
    ("q04", 1): ("C", None), ("q05", 1): ("C", "C"), ("q06", 1): ("C", "C"),
    ("q01", 2): ("C", "C"), ("q02", 2): ("C", "C"), ("q03", 2): ("I", None),
    ("q04", 2): ("I", "I"), ("q05", 2): ("I", "C"), ("q06", 2): ("C", "C"),
}
# Sample order of both files (the .json's samples[], the .eval's central directory):
# q01..q06 of epoch 1, then q01..q06 of epoch 2, so line = 6 * (epoch - 1) + n.
ORDER = [(f"q0{n}", epoch) for epoch in (1, 2) for n in range(1, 7)]
# output.completion of each sample-epoch (same in both files), copied from the listing.
ANSWERS = {
    "q01": ("The answer is Paris.", "The answer is Paris."),
    "q02": ("The answer is 8.", "The answer is 8."),
    "q03": ("The answer is 51.", "17 * 3 = 53."),
    "q04": ("The answer is 7.", "There are 6 continents."),
    "q05": ("The answer is Jane Austen.", "It was written by Charlotte Bronte."),
    "q06": ("The answer is Au.", "The answer is Au."),
}
# Header ids and the first sample's uuid and completed_at, per file, from the listing.
HEADERS = {
    EVAL.name: ("D6qb4fvwoTcCejKAkXib3o", "Zibe37Wu5UjDmr4xmwB99E", "ZdhgUnVdM24RszQVAMmSrw",
                "2026-11-30T08:54:45.685531+00:00"),
    JSON.name: ("RmnpQuCzjH6kVb6H2hynRy", "JUkcfSDGdS95UHS5w5UeMb", "c4kSbxaA4eFUDLaT8kRULf",
                "2026-11-30T08:54:45.988883+00:00"),
}


class Bytes(SourceBytes):
    """A source over bytes in memory."""

    def __init__(self, data: bytes, path: str) -> None:
        self.data = data
        self.path = path

    def lines(self) -> Iterator[tuple[int, bytes]]:
        yield from enumerate(self.data.split(b"\n"), start=1)

    def read(self) -> bytes:
        return self.data


def run(data: bytes, path: str, options: AdapterOptions | None = None) -> tuple[list[Judgment | Unreadable], list[str]]:
    notes = AdapterNotes("inspect")
    out = list(INSPECT.judgments(Bytes(data, path), options or AdapterOptions(), notes))
    return out, notes.notes


def judgments(out: list[Judgment | Unreadable]) -> list[Judgment]:
    assert all(isinstance(j, Judgment) for j in out), [j for j in out if isinstance(j, Unreadable)]
    return [j for j in out if isinstance(j, Judgment)]


# -- helpers that rebuild logs (independent of the adapter's own reading) -------------------


def eval_members(data: bytes) -> list[tuple[str, bytes]]:
    """Every member of a Zstandard .eval, decompressed after its local header."""
    archive = zipfile.ZipFile(io.BytesIO(data))
    out = []
    for info in archive.infolist():
        assert info.compress_type == 93
        n, m = struct.unpack_from("<HH", data, info.header_offset + 26)
        start = info.header_offset + 30 + n + m
        blob = data[start : start + info.compress_size]
        out.append((info.filename, zstandard.ZstdDecompressor().stream_reader(blob).read(info.file_size)))
    return out


def deflate_eval(members: list[tuple[str, bytes]]) -> bytes:
    """An .eval written with deflate members, as inspect did before Zstandard."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        for name, text in members:
            archive.writestr(name, text)
    return buffer.getvalue()


def edited_json(edit: Any) -> bytes:
    """The .json sample log after ``edit(document)``, written back by Python's json (NaN kept)."""
    document = json.loads(JSON.read_bytes())
    edit(document)
    return json.dumps(document, indent=2).encode()


# -- the sample logs ------------------------------------------------------------------------


@pytest.mark.parametrize("path", [EVAL, JSON], ids=lambda p: p.suffix)
def test_every_sample_epoch_and_scorer_is_one_judgment(path: Path) -> None:
    out = judgments(run(path.read_bytes(), str(path))[0])
    # 12 sample-epochs x 2 scorers = 24 judgments; the NaN ones (q04 epoch 1 and q03 epoch 2,
    # beta) are rejected as unscored, the other 22 accepted.
    assert len(out) == 24
    assert [j.line for j in out] == [n for n in range(1, 13) for _ in (ALPHA, BETA)]
    eval_id, run_id, first_uuid, first_done = HEADERS[path.name]
    for j, (sample, epoch, scorer) in zip(out, [(s, e, sc) for s, e in ORDER for sc in (ALPHA, BETA)], strict=True):
        f = j.fields
        assert j.protocol == "pointwise"
        assert (f["item_id"], f["epoch"], f["scorer"]) == (sample, epoch, scorer)
        assert f["item_set"] == "jm_mock_judge"
        assert f["system_id"] == "mockllm/model"
        assert f["judge_id"] == JUDGES[scorer]
        assert f["judge_role"] == ROLES[scorer]
        assert f["self_graded"] is False
        assert (f["generation"], f["replicate"]) == (epoch - 1, 0)
        assert (f["eval_id"], f["run_id"]) == (eval_id, run_id)
        assert f["response_length"] == len(ANSWERS[sample][epoch - 1])
        assert f["timestamp"].startswith("2026-11-30T08:54:")
        grade = GRADES[(sample, epoch)][scorer == BETA]
        raw = json.loads(j.raw)
        assert (raw["id"], raw["epoch"], raw["scorer"]) == (sample, epoch, scorer)
        if grade is None:
            assert j.reject is not None
            assert j.reject[0] == UNSCORED
            assert "grader_failed" in j.reject[1]
            assert f"'{sample}' epoch {epoch}" in j.reject[1]
            assert f"'{scorer}'" in j.reject[1]
            assert math.isnan(raw["score"]["value"])
        else:
            assert j.reject is None
            assert f["grade"] == grade
            assert f["score"] == {"C": 1.0, "I": 0.0}[grade]
    assert (out[0].fields["sample_uuid"], out[0].fields["timestamp"]) == (first_uuid, first_done)
    accepted = [j for j in out if j.reject is None]
    assert len(accepted) == 22
    # alpha: 9 C, 3 I; beta: 9 C, 1 I (q04 epoch 2) -> 18 points.
    assert sum(j.fields["score"] for j in accepted) == 18.0
    # q03 epoch 2 beta replied "GRADE: P", which it was not offered: its explanation says so.
    q03 = next(j for j in out if j.fields["item_id"] == "q03" and j.fields["epoch"] == 2 and j.fields["scorer"] == BETA)
    assert q03.reject is not None
    assert "GRADE: P" in q03.reject[1]


def test_the_eval_and_the_json_hold_the_same_grades() -> None:
    def key(j: Judgment) -> tuple[Any, ...]:
        f = j.fields
        return (f["item_id"], f["epoch"], f["scorer"], f["judge_id"], f["score"], f["grade"], j.reject and j.reject[0])

    a = judgments(run(EVAL.read_bytes(), str(EVAL))[0])
    b = judgments(run(JSON.read_bytes(), str(JSON))[0])
    assert [key(j) for j in a] == [key(j) for j in b]


def test_item_set_option_overrides_the_task_name() -> None:
    out = judgments(run(JSON.read_bytes(), str(JSON), AdapterOptions(item_set="qa6"))[0])
    assert {j.fields["item_set"] for j in out} == {"qa6"}


def test_notes_name_the_graders() -> None:
    _, notes = run(EVAL.read_bytes(), str(EVAL))
    text = " ".join(notes)
    assert "model_graded_qa -> mockllm/grader-alpha (role grader_alpha)" in text
    assert "model_graded_qa1 -> mockllm/grader-beta (role grader_beta)" in text
    assert "12 sample-epochs" in text


# -- detect ---------------------------------------------------------------------------------


@pytest.mark.parametrize("path", [EVAL, JSON], ids=lambda p: p.suffix)
def test_detect_recognises_the_sample_logs(path: Path) -> None:
    assert INSPECT.detect(path.read_bytes()[:65536], str(path))


OTHERS = sorted(p for p in SAMPLES.glob("*/*") if p.is_file() and p not in (EVAL, JSON))


@pytest.mark.parametrize("path", OTHERS, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_detect_refuses_the_other_sample_files(path: Path) -> None:
    assert not INSPECT.detect(path.read_bytes()[:65536], str(path))


def test_detect_refuses_a_canonical_line_and_a_plain_zip() -> None:
    line = b'{"item_set":"x","item_id":"1","system_id":"s","judge_id":"j","score":3}\n'
    assert not INSPECT.detect(line, "x.json")
    assert not INSPECT.detect(deflate_eval([("data.csv", b"a,b\n")]), "x.eval")
    assert not INSPECT.detect(b'{"version": 2, "items": []}', "x.json")


def test_detect_reads_a_head_cut_anywhere() -> None:
    head = JSON.read_bytes()[:300]  # inside eval: not valid JSON
    assert INSPECT.detect(head, str(JSON))


# -- .eval variants -------------------------------------------------------------------------


def test_a_deflate_eval_reads_like_the_zstandard_one() -> None:
    members = eval_members(EVAL.read_bytes())
    out = judgments(run(deflate_eval(members), "old.eval")[0])
    assert len(out) == 24
    assert sum(j.reject is None for j in out) == 22


def test_without_header_json_the_journal_header_is_used() -> None:
    members = [(n, t) for n, t in eval_members(EVAL.read_bytes()) if n != "header.json"]
    out, notes = run(deflate_eval(members), "running.eval")
    out_j = judgments(out)
    assert len(out_j) == 24
    assert {j.fields["judge_id"] for j in out_j} == set(JUDGES.values())
    assert any("header.json is absent" in n and "_journal/start.json" in n for n in notes)


def test_without_any_header_the_log_is_one_unreadable() -> None:
    members = [(n, t) for n, t in eval_members(EVAL.read_bytes()) if n not in ("header.json", "_journal/start.json")]
    out, _ = run(deflate_eval(members), "broken.eval")
    assert len(out) == 1
    assert isinstance(out[0], Unreadable)
    assert out[0].line == 1
    assert "header.json is absent" in out[0].message


def test_a_corrupt_zstandard_member_is_one_unreadable_sample() -> None:
    data = bytearray(EVAL.read_bytes())
    info = zipfile.ZipFile(io.BytesIO(bytes(data))).getinfo("samples/q03_epoch_1.json")
    n, m = struct.unpack_from("<HH", data, info.header_offset + 26)
    start = info.header_offset + 30 + n + m
    for i in range(start + 100, start + 140):
        data[i] ^= 0xFF
    out, _ = run(bytes(data), "corrupt.eval")
    bad = [j for j in out if isinstance(j, Unreadable)]
    assert len(bad) == 1
    assert bad[0].line == 3  # the third sample member
    assert "samples/q03_epoch_1.json" in bad[0].message
    assert len([j for j in out if isinstance(j, Judgment)]) == 22  # the 11 other sample-epochs


def test_a_sample_listed_in_summaries_but_absent_is_unreadable() -> None:
    members = [(n, t) for n, t in eval_members(EVAL.read_bytes()) if n != "samples/q05_epoch_2.json"]
    out, _ = run(deflate_eval(members), "gap.eval")
    bad = [j for j in out if isinstance(j, Unreadable)]
    assert len(bad) == 1
    assert bad[0].line == 12  # after the 11 members present
    assert "'q05' epoch 2" in bad[0].message
    assert "summaries.json" in bad[0].message
    assert len([j for j in out if isinstance(j, Judgment)]) == 22


def test_a_truncated_or_foreign_zip_is_unreadable() -> None:
    out, _ = run(EVAL.read_bytes()[:20000], "cut.eval")
    assert len(out) == 1
    assert isinstance(out[0], Unreadable)
    assert "ZIP" in out[0].message
    assert out[0].reason == "truncated"  # a ZIP that starts as one but has no directory: cut
    out, _ = run(deflate_eval([("data.csv", b"a,b\n")]), "other.eval")
    assert len(out) == 1
    assert isinstance(out[0], Unreadable)


def test_a_sample_member_that_is_not_json_is_unreadable() -> None:
    members = [(n, b"{not json" if n == "samples/q01_epoch_1.json" else t) for n, t in eval_members(EVAL.read_bytes())]
    out, _ = run(deflate_eval(members), "bad.eval")
    bad = [j for j in out if isinstance(j, Unreadable)]
    assert [(u.line, "not valid JSON" in u.message) for u in bad] == [(1, True)]


# -- .json variants -------------------------------------------------------------------------


def test_a_json_truncated_inside_the_samples_keeps_the_samples_before_the_cut() -> None:
    data = JSON.read_bytes()
    cut = data.index(b'"id": "q03",\n      "epoch": 2')  # inside the 9th sample (q03 epoch 2)
    out, _ = run(data[:cut], "cut.json")
    good = [j for j in out if isinstance(j, Judgment)]
    bad = [j for j in out if isinstance(j, Unreadable)]
    assert len(good) == 16  # the 8 complete sample-epochs x 2 scorers
    assert [(u.line, "sample 9" in u.message, u.reason) for u in bad] == [(9, True, "truncated")]


def test_a_json_truncated_in_its_header_is_one_unreadable() -> None:
    out, _ = run(JSON.read_bytes()[:1500], "cut.json")
    assert len(out) == 1
    assert isinstance(out[0], Unreadable)
    assert out[0].line == 1
    assert "header" in out[0].message


def test_not_json_at_all_is_one_unreadable() -> None:
    for data in (b"", b"[1, 2]", b"\xff\xfe{", b"{" * 100000):
        out, _ = run(data, "x.json")
        assert len(out) == 1
        assert isinstance(out[0], Unreadable), data[:10]


def test_an_unknown_letter_is_a_parse_failure_naming_it() -> None:
    def edit(d: dict[str, Any]) -> None:
        d["samples"][4]["scores"][ALPHA]["value"] = "X"  # q05 epoch 1, alpha

    out = judgments(run(edited_json(edit), "x.json")[0])
    bad = [j for j in out if j.reject and j.reject[0] == PARSE_FAILURE]
    assert len(bad) == 1
    assert (bad[0].line, bad[0].fields["item_id"], bad[0].fields["grade"]) == (5, "q05", "X")
    assert "'X'" in bad[0].reject[1]  # type: ignore[index]
    assert ALPHA in bad[0].reject[1]  # type: ignore[index]


def test_numbers_partial_and_inspect_spellings_map_by_inspect_convention() -> None:
    values = {0: 0.7, 1: "P", 2: 1, 3: "yes", 4: "0.25", 5: True, 6: "N"}
    expected = {0: (0.7, None), 1: (0.5, "P"), 2: (1.0, None), 3: (1.0, "yes"), 4: (0.25, "0.25"),
                5: (1.0, None), 6: (0.0, "N")}

    def edit(d: dict[str, Any]) -> None:
        for i, value in values.items():
            d["samples"][i]["scores"][ALPHA]["value"] = value

    out = judgments(run(edited_json(edit), "x.json")[0])
    alpha = [j for j in out if j.fields["scorer"] == ALPHA]
    for i, (score, grade) in expected.items():
        assert alpha[i].reject is None
        assert (alpha[i].fields["score"], alpha[i].fields["grade"]) == (score, grade)


def test_a_multi_valued_score_is_unsupported() -> None:
    def edit(d: dict[str, Any]) -> None:
        d["samples"][0]["scores"][ALPHA]["value"] = {"accuracy": 1, "style": 0.5}

    out = judgments(run(edited_json(edit), "x.json")[0])
    assert out[0].reject is not None
    assert out[0].reject[0] == UNSUPPORTED_RECORD
    assert "multi-valued" in out[0].reject[1]


def test_a_sample_with_no_scores_is_unscored_for_each_scorer() -> None:
    def edit(d: dict[str, Any]) -> None:
        d["samples"][0]["scores"] = None
        d["samples"][0]["error"] = {"message": "RuntimeError('grader API down')"}
        del d["samples"][1]["scores"][BETA]

    out = judgments(run(edited_json(edit), "x.json")[0])
    assert len(out) == 24
    first = [j for j in out if j.line == 1]
    assert [(j.fields["scorer"], j.reject and j.reject[0]) for j in first] == [(ALPHA, UNSCORED), (BETA, UNSCORED)]
    assert all("grader API down" in j.reject[1] for j in first if j.reject)
    assert first[1].fields["judge_id"] == "mockllm/grader-beta"
    second = [j for j in out if j.line == 2]
    assert [j.reject and j.reject[0] for j in second] == [None, UNSCORED]
    assert "no score from scorer 'model_graded_qa1'" in second[1].reject[1]  # type: ignore[index]


def test_a_sample_without_id_or_epoch_is_unreadable() -> None:
    def edit(d: dict[str, Any]) -> None:
        del d["samples"][2]["id"]
        d["samples"][3]["epoch"] = "one"
        d["samples"][4] = [1, 2]

    out, _ = run(edited_json(edit), "x.json")
    bad = [j for j in out if isinstance(j, Unreadable)]
    assert [u.line for u in bad] == [3, 4, 5]
    assert "no id" in bad[0].message
    assert "epoch" in bad[1].message
    assert len(out) == 3 + 9 * 2


def test_an_unbound_grader_role_is_found_in_the_events_else_self_graded() -> None:
    def unbind(d: dict[str, Any]) -> None:
        d["eval"]["model_roles"] = {}

    out = judgments(run(edited_json(unbind), "x.json")[0])
    # the model events inside each scorer's span still name the grader.
    assert {(j.fields["scorer"], j.fields["judge_id"], j.fields["judge_role"]) for j in out} == {
        (ALPHA, "mockllm/grader-alpha", "grader_alpha"), (BETA, "mockllm/grader-beta", "grader_beta")
    }

    def unbind_no_events(d: dict[str, Any]) -> None:
        unbind(d)
        for sample in d["samples"]:
            sample["events"] = []

    out = judgments(run(edited_json(unbind_no_events), "x.json")[0])
    assert len(out) == 24
    assert {j.fields["judge_id"] for j in out} == {"mockllm/model"}
    assert all(j.fields["self_graded"] is True for j in out)


def test_a_grader_given_as_a_model_and_a_rule_based_scorer() -> None:
    def edit(d: dict[str, Any]) -> None:
        d["eval"]["scorers"][0]["options"] = {"model": "openai/gpt-4o"}
        d["results"]["scores"][0]["params"] = {"model": "openai/gpt-4o"}
        d["eval"]["scorers"].append({"name": "match", "options": {}})
        for sample in d["samples"]:
            sample["scores"]["match"] = {"value": "C", "answer": "x"}

    out, notes = run(edited_json(edit), "x.json")
    out_j = judgments(out)
    assert len(out_j) == 36
    assert {j.fields["judge_id"] for j in out_j if j.fields["scorer"] == ALPHA} == {"openai/gpt-4o"}
    match = [j for j in out_j if j.fields["scorer"] == "match"]
    assert len(match) == 12
    assert all(j.reject and j.reject[0] == UNSUPPORTED_RECORD and "not model-graded" in j.reject[1] for j in match)
    assert any("'match' is not model-graded" in n for n in notes)


def test_a_panel_of_graders_is_unsupported() -> None:
    def edit(d: dict[str, Any]) -> None:
        d["results"]["scores"][0]["params"] = {"model": ["a/x", "b/y", "c/z"]}

    out = judgments(run(edited_json(edit), "x.json")[0])
    alpha = [j for j in out if j.fields["scorer"] == ALPHA]
    assert all(j.reject and j.reject[0] == UNSUPPORTED_RECORD and "panel" in j.reject[1] for j in alpha)


def test_a_json_without_samples_yields_nothing_and_says_so() -> None:
    def edit(d: dict[str, Any]) -> None:
        del d["samples"]

    out, notes = run(edited_json(edit), "x.json")
    assert out == []
    assert any("no samples" in n for n in notes)


def test_a_score_that_is_not_an_object_is_unreadable_not_an_exception() -> None:
    def edit(d: dict[str, Any]) -> None:
        d["samples"][0]["scores"][ALPHA] = "C"
        d["samples"][1]["scores"][ALPHA] = {"answer": "no value"}

    out, _ = run(edited_json(edit), "x.json")
    assert isinstance(out[0], Unreadable)
    assert "not an object" in out[0].message
    second = out[2]
    assert isinstance(second, Judgment)
    assert second.reject is not None
    assert second.reject[0] == PARSE_FAILURE
    assert "no value" in second.reject[1]



@pytest.mark.parametrize("path", [EVAL, JSON], ids=lambda p: p.suffix)
def test_cuts_and_flipped_bytes_anywhere_never_raise(path: Path) -> None:
    data = path.read_bytes()
    for k in range(1, 40):
        at = len(data) * k // 40
        flipped = bytearray(data)
        flipped[at] ^= 0x5A
        for variant in (data[:at], bytes(flipped)):
            out, _ = run(variant, path.name)
            assert all(isinstance(j, Judgment | Unreadable) for j in out)


# -- item identity: the eval's task and dataset, runs told apart by the key -----------------


def another_eval(*, run_id: str, eval_id: str, model: str | None = None, regrade: str | None = None) -> bytes:
    """The .eval sample as another run: its header's (and journal's) ids and model edited, written with deflate.

    ``regrade``: the grade grader-alpha gives q01 in epoch 1 of this run (the sample's is ``C``).
    """
    members = []
    for name, text in eval_members(EVAL.read_bytes()):
        if name in ("header.json", "_journal/start.json"):
            document = json.loads(text)
            document["eval"]["run_id"], document["eval"]["eval_id"] = run_id, eval_id
            if model is not None:
                document["eval"]["model"] = model
            text = json.dumps(document).encode()
        elif name == "samples/q01_epoch_1.json" and regrade is not None:
            document = json.loads(text)
            assert document["scores"][ALPHA]["value"] == "C"
            document["scores"][ALPHA]["value"] = regrade
            text = json.dumps(document).encode()
        members.append((name, text))
    return deflate_eval(members)


def _ingest(tmp_path: Path, logs: dict[str, bytes]) -> Any:
    from ingest_util import run_ingest
    from jurymeter.io.store import Store

    paths = []
    for name, data in logs.items():
        (tmp_path / name).write_bytes(data)
        paths.append(tmp_path / name)
    store = Store(str(tmp_path / "store"))
    return store, run_ingest(store, *paths)


def test_two_runs_of_one_model_are_both_stored(tmp_path: Path) -> None:
    second = another_eval(run_id="run-two", eval_id="eval-two", regrade="I")
    store, report = _ingest(tmp_path, {"first.eval": EVAL.read_bytes(), "second.eval": second})
    # each run: 12 sample-epochs x 2 graders = 24 judgments, 22 graded, 2 unscored; nothing merged
    for source in report.sources:
        assert (source.read, source.accepted, source.quarantined, source.duplicates_dropped) == (24, 22, 2, 0)
        assert source.reasons == {"unscored": 2}
    stored = store.scan("pointwise", "jm_mock_judge").collect()
    assert stored.height == 44
    assert sorted(stored["item_id"].unique().to_list()) == [f"q0{n}" for n in range(1, 7)]
    q01 = stored.filter((pl.col("item_id") == "q01") & (pl.col("generation") == 0)
                        & (pl.col("judge_id") == JUDGES[ALPHA]))
    assert sorted(zip(q01["run_id"].to_list(), q01["score"].to_list(), strict=True)) == [
        ("Zibe37Wu5UjDmr4xmwB99E", 1.0), ("run-two", 0.0)]


def test_two_models_share_their_items(tmp_path: Path) -> None:
    other = another_eval(run_id="run-other", eval_id="eval-other", model="mockllm/other")
    store, _ = _ingest(tmp_path, {"model.eval": EVAL.read_bytes(), "other.eval": other})
    stored = store.scan("pointwise", "jm_mock_judge").collect()
    items = {s: set(stored.filter(pl.col("system_id") == s)["item_id"].to_list())
             for s in ("mockllm/model", "mockllm/other")}
    assert items["mockllm/model"] == items["mockllm/other"] == {f"q0{n}" for n in range(1, 7)}


def test_the_dataset_and_an_overridden_task_prefix_the_item() -> None:
    def named(document: dict[str, Any]) -> None:
        document["eval"]["dataset"]["name"] = "capitals"

    data = edited_json(named)
    plain = judgments(run(data, "named.json")[0])
    assert {j.fields["item_id"] for j in plain} == {f"capitals/q0{n}" for n in range(1, 7)}
    assert {j.fields["sample_id"] for j in plain} == {f"q0{n}" for n in range(1, 7)}
    # another item set than the task: the task keeps two tasks' samples apart in it
    override = judgments(run(data, "named.json", AdapterOptions(item_set="bench"))[0])
    assert {j.fields["item_id"] for j in override} == {f"jm_mock_judge/capitals/q0{n}" for n in range(1, 7)}
    unnamed = judgments(run(JSON.read_bytes(), str(JSON), AdapterOptions(item_set="bench"))[0])
    assert {j.fields["item_id"] for j in unnamed} == {f"jm_mock_judge/q0{n}" for n in range(1, 7)}
