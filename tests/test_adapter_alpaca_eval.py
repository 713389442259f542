"""The AlpacaEval ``annotations.json`` adapter over the sample files and hostile variants.

Every expected number below was counted from the sample files with ``jq``
(commands quoted next to each literal), not by running the adapter; the samples
and their README are in ``/work/shared/samples/alpaca_eval/``.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from jurymeter.io.adapters.alpaca_eval import ALPACA_EVAL, instruction_hash
from jurymeter.io.adapters.base import (
    JUDGE_CALL_FAILED,
    PARSE_FAILURE,
    AdapterNotes,
    AdapterOptions,
    Judgment,
    SourceBytes,
    Unreadable,
)
from samples import SAMPLES

ALPACA = SAMPLES / "alpaca_eval"
COT = "alpaca_eval_cot_gpt4_turbo_fn__alpaca-7b.subset.json"
GPT4 = "alpaca_eval_gpt4__alpaca-7b.subset.json"
REMAX = "alpaca_eval_gpt4_turbo_fn__Mistral-7B-ReMax-v0.1.subset.json"
V3 = "alpaca_eval_v3_cot_gpt4_turbo_fn__claude-2.64.json"
WEIGHTED = "weighted_alpaca_eval_gpt4_turbo__llama-2-7b-chat-hf.64.json"
ANNOTATIONS = (COT, GPT4, REMAX, V3, WEIGHTED)

pytestmark = pytest.mark.skipif(not ALPACA.is_dir(), reason=f"no sample files in {ALPACA}")


class _Source(SourceBytes):
    """A file, or bytes under a made-up name, as the adapter reads it."""

    def __init__(self, path: str, data: bytes) -> None:
        self.path = path
        self._data = data

    def lines(self) -> Iterator[tuple[int, bytes]]:
        for number, line in enumerate(self._data.split(b"\n"), start=1):
            yield number, line.removesuffix(b"\r")

    def read(self) -> bytes:
        return self._data


def _run(
    data: bytes, path: str = "annotations.json", options: AdapterOptions | None = None
) -> tuple[list[Judgment | Unreadable], AdapterNotes]:
    notes = AdapterNotes("alpaca-eval")
    out = list(ALPACA_EVAL.judgments(_Source(path, data), options or AdapterOptions(), notes))
    return out, notes


def _sample(name: str) -> list[Judgment | Unreadable]:
    path = ALPACA / name
    return _run(path.read_bytes(), str(path))[0]


def _accepted(out: list[Judgment | Unreadable]) -> list[Judgment]:
    return [o for o in out if isinstance(o, Judgment) and o.reject is None]


def _element(name: str = REMAX, index: int = 0) -> dict[str, Any]:
    element: dict[str, Any] = json.loads((ALPACA / name).read_text())[index]
    return element


def _doc(*elements: object) -> bytes:
    return json.dumps(list(elements), indent=2).encode()


# --- the sample files ------------------------------------------------------------------------

# (elements, winners A/B/tie among accepted, order_known true, rejects by reason), counted with
#   jq length F;  jq '[.[] | .preference] | group_by(.) | map({v: .[0], n: length})' F
#   jq '[.[] | .referenced_models.m // "none"] | group_by(.) | map({m: .[0], n: length})' F
# COT: 20 x 1.0 (9 with m -> output_1, 11 with m -> output_2: output_1 won, shown second in 11),
#      3 x 1.5 with null price/time/referenced_models;
# GPT4: 23 x 1, 6 x 2, 16 x 0; REMAX: 30 x 2.0, 2 x null (null price, time, raw_completion);
# V3: 33 x 1.0, 31 x 2.0; WEIGHTED: 59 below 1.5, 5 above, none equal
#   (jq '[.[] | .preference | select(. < 1.5)] | length').
EXPECTED = {
    COT: (23, {"A": 9, "B": 11, "tie": 3}, 20, {}),
    GPT4: (45, {"A": 23, "B": 6, "tie": 16}, 0, {}),
    REMAX: (32, {"B": 30}, 0, {JUDGE_CALL_FAILED: 2}),
    V3: (64, {"A": 33, "B": 31}, 0, {}),
    WEIGHTED: (64, {"A": 59, "B": 5}, 0, {}),
}


@pytest.mark.parametrize("name", ANNOTATIONS)
def test_every_sample_element_is_one_judgment_with_the_hand_counted_outcomes(name: str) -> None:
    elements, winners, known, rejects = EXPECTED[name]
    out = _sample(name)
    assert len(out) == elements
    assert all(isinstance(o, Judgment) for o in out)
    assert [o.line for o in out] == list(range(1, elements + 1))
    accepted = _accepted(out)
    assert Counter(o.fields["winner"] for o in accepted) == winners
    assert sum(o.fields["order_known"] for o in out if isinstance(o, Judgment)) == known
    assert Counter(o.reject[0] for o in out if isinstance(o, Judgment) and o.reject) == rejects
    for judgment in accepted:
        fields = judgment.fields
        assert fields["item_set"] == "alpaca-eval"
        assert fields["generation"] == 0
        assert fields["replicate"] == 0
        assert 0.0 <= fields["preference"] <= 1.0
        assert fields["system_a"] != fields["system_b"]
        assert json.loads(judgment.raw)["instruction"]  # the element's JSON text


def test_the_item_id_is_the_instruction_hash_or_the_id() -> None:
    # jq -j '.[0].instruction' F | sha256sum | cut -c1-16, the same in all five files;
    # jq -j '.[30].instruction' GPT4 | sha256sum | cut -c1-16
    first = "f0aa9c85c9cd3bff"
    for name in (COT, GPT4, V3, WEIGHTED):
        assert _sample(name)[0].fields["item_id"] == first  # type: ignore[union-attr]
    gpt4 = _sample(GPT4)
    assert gpt4[30].fields["item_id"] == "201e5d0d329d3d46"  # type: ignore[union-attr]
    # jq -c '[.[].id]' REMAX: 0..29, then 106 and 305; its instruction hash is still kept
    remax = [o for o in _sample(REMAX) if isinstance(o, Judgment)]
    assert [o.fields["item_id"] for o in remax] == [str(i) for i in range(30)] + ["106", "305"]
    assert remax[0].fields["instruction_hash"] == first
    # jq '[.[] | .instruction] | unique | length' F == length: no item twice in a file
    for name in ANNOTATIONS:
        ids = [o.fields["item_id"] for o in _sample(name) if isinstance(o, Judgment)]
        assert len(set(ids)) == len(ids)
    assert instruction_hash("What are the names of some famous actors that started their careers on Broadway?") == first


def test_the_cot_file_gives_the_shown_order_from_referenced_models() -> None:
    # jq -c 'to_entries[] | select(.value.referenced_models.m == "output_2") | .key' COT
    # -> 0 1 2 6 9 10 11 13 14 17 18, i.e. lines 1 2 3 7 10 11 12 14 15 18 19: alpaca-7b
    # (output_2) was labelled m, shown first. Every judged element has preference 1.0:
    # output_1 (gpt4_1106_preview) won, so B won where output_2 was shown first.
    out = [o for o in _sample(COT) if isinstance(o, Judgment)]
    flipped = {1, 2, 3, 7, 10, 11, 12, 14, 15, 18, 19}
    for judgment in out:
        fields = judgment.fields
        assert fields["reference_system"] == "gpt4_1106_preview"
        if judgment.line in flipped:
            assert (fields["system_a"], fields["system_b"]) == ("alpaca-7b", "gpt4_1106_preview")
            assert (fields["winner"], fields["preference"], fields["order_known"]) == ("B", 0.0, True)
        elif judgment.line <= 20:
            assert (fields["system_a"], fields["system_b"]) == ("gpt4_1106_preview", "alpaca-7b")
            assert (fields["winner"], fields["preference"], fields["order_known"]) == ("A", 1.0, True)
        else:  # lines 21-23: preference 1.5, price/time/referenced_models null
            assert (fields["system_a"], fields["system_b"]) == ("gpt4_1106_preview", "alpaca-7b")
            assert (fields["winner"], fields["preference"], fields["order_known"]) == ("tie", 0.5, False)
            assert fields["tie_kind"] == "identical_outputs"
            assert fields["preference_raw"] == 1.5
    # jq -c '.[0] | [(.output_1|length), (.output_2|length)]' COT -> [2104,147] (flipped)
    # jq -c '.[3] | [(.output_1|length), (.output_2|length)]' COT -> [2908,166] (not flipped)
    assert (out[0].fields["length_a"], out[0].fields["length_b"]) == (147, 2104)
    assert (out[3].fields["length_a"], out[3].fields["length_b"]) == (2908, 166)


def test_the_integer_encoding_and_identical_outputs() -> None:
    # jq -c 'to_entries[] | select(.value.preference == 0) | .key + 1' GPT4 -> 25, 31..45
    # jq -c 'to_entries[] | select(.value.preference == 2) | .key + 1' GPT4 -> 12 14 16 19 21 27
    out = [o for o in _sample(GPT4) if isinstance(o, Judgment)]
    zero = {25, *range(31, 46)}
    two = {12, 14, 16, 19, 21, 27}
    for judgment in out:
        fields = judgment.fields
        assert (fields["system_a"], fields["system_b"]) == ("text_davinci_003", "alpaca-7b")
        assert fields["order_known"] is False
        if judgment.line in zero:
            assert (fields["winner"], fields["preference"], fields["tie_kind"]) == ("tie", 0.5, "identical_outputs")
            assert fields["preference_raw"] == 0
        elif judgment.line in two:
            assert (fields["winner"], fields["preference"], fields["tie_kind"]) == ("B", 0.0, None)
        else:
            assert (fields["winner"], fields["preference"], fields["tie_kind"]) == ("A", 1.0, None)
        assert isinstance(fields["preference_raw"], int)
    # jq -c '.[30] | [.output_1, .output_2]' GPT4 -> "D. Prescreening" twice (15 characters)
    assert (out[30].fields["length_a"], out[30].fields["length_b"]) == (15, 15)


def test_failed_judge_calls_are_rejected_with_their_keys() -> None:
    # jq '[.[] | select(.preference == null) | {id, ...}]' REMAX: ids 106 and 305, lines 31-32,
    # price_per_example, time_per_example and raw_completion null
    out = [o for o in _sample(REMAX) if isinstance(o, Judgment)]
    failed = [o for o in out if o.reject]
    assert [o.line for o in failed] == [31, 32]
    for judgment in failed:
        assert judgment.reject is not None
        reason, message = judgment.reject
        assert reason == JUDGE_CALL_FAILED
        assert "preference is null" in message
        assert "winner" not in judgment.fields
        assert "preference" not in judgment.fields
        assert judgment.fields["system_b"] == "Mistral-7B-ReMax-v0.1"
    assert [o.fields["item_id"] for o in failed] == ["106", "305"]
    # jq -c '.[30] | [(.output_1|length), (.output_2|length)]' REMAX -> [698,821]
    assert (failed[0].fields["length_a"], failed[0].fields["length_b"]) == (698, 821)


def test_the_continuous_encoding_becomes_p_of_a() -> None:
    # jq -c '.[0,1,63] | .preference' WEIGHTED -> 1.0064882697, 1.0000231875, 1.0000010511
    # jq -c '[.[] | 2 - .preference] | add' WEIGHTED -> 59.0075857483
    # jq -c 'to_entries[] | select(.value.preference > 1.5) | [.key + 1, .value.preference]'
    # -> lines 23 25 32 35 46 (line 46: 1.7371581723)
    out = _accepted(_sample(WEIGHTED))
    assert out[0].fields["preference"] == pytest.approx(0.9935117303)
    assert out[1].fields["preference"] == pytest.approx(0.9999768125)
    assert out[63].fields["preference"] == pytest.approx(0.9999989489)
    assert out[0].fields["preference_raw"] == 1.0064882697
    assert sum(o.fields["preference"] for o in out) == pytest.approx(59.0075857483)
    assert [o.line for o in out if o.fields["winner"] == "B"] == [23, 25, 32, 35, 46]
    assert out[45].fields["preference"] == pytest.approx(0.2628418277)
    assert all(o.fields["tie_kind"] is None and o.fields["order_known"] is False for o in out)
    # jq -c '.[0] | [(.output_1|length), (.output_2|length)]' WEIGHTED -> [1494,1636]
    assert (out[0].fields["length_a"], out[0].fields["length_b"]) == (1494, 1636)
    assert out[0].fields["judge_id"] == "weighted_alpaca_eval_gpt4_turbo"
    assert out[0].fields["dataset"] == "helpful_base"


def test_the_v3_cot_winners() -> None:
    # jq -c 'to_entries[] | select(.value.preference == 2) | .key + 1' V3
    b_lines = [1, 6, 7, 11, 14, 19, 21, 23, 25, 27, 28, 29, 34, 35, 36, 38, 39, 40, 41, 42, 44,
               45, 47, 51, 52, 54, 55, 56, 57, 60, 64]
    out = _accepted(_sample(V3))
    assert [o.line for o in out if o.fields["winner"] == "B"] == b_lines
    assert {(o.fields["system_a"], o.fields["system_b"]) for o in out} == {("gpt4_0613", "claude-2")}


def test_item_set_option_and_notes(tmp_path: Path) -> None:
    data = (ALPACA / REMAX).read_bytes()
    out, notes = _run(data, options=AdapterOptions(item_set="ae-805"))
    assert {o.fields["item_set"] for o in out if isinstance(o, Judgment)} == {"ae-805"}
    assert any("not a model name" in note for note in notes.notes)
    assert any("0 of 32" in note for note in notes.notes)
    # The README's oddity: ReMax's folder is alpaca_eval_gpt4_turbo_fn, its records say alpaca_eval_gpt4.
    path = tmp_path / "Mistral-7B-ReMax-v0.1" / "alpaca_eval_gpt4_turbo_fn" / "annotations.json"
    out, notes = _run(data, str(path))
    assert {o.fields["judge_id"] for o in out if isinstance(o, Judgment)} == {"alpaca_eval_gpt4"}
    assert any("'alpaca_eval_gpt4_turbo_fn'" in note and "records" in note for note in notes.notes)
    _, notes = _run((ALPACA / COT).read_bytes())
    assert any("20 of 23" in note for note in notes.notes)


# --- hostile variants -------------------------------------------------------------------------


def test_a_truncated_file_keeps_the_complete_elements_and_quarantines_the_cut_one() -> None:
    whole = (ALPACA / GPT4).read_bytes()
    data = whole[:-300]
    elements = json.loads(whole)
    # Independently: the elements whose closing brace is before the cut are complete.
    text = data.decode()
    complete = 0
    for k in range(1, len(elements) + 1):
        try:
            json.loads(text[: _nth_element_end(text, k)] + "]")
            complete = k
        except ValueError:
            break
    out, _ = _run(data)
    judged = [o for o in out if isinstance(o, Judgment)]
    assert len(judged) == complete == len(elements) - 1
    assert [j.line for j in judged] == list(range(1, complete + 1))
    cut = out[-1]
    assert isinstance(cut, Unreadable)
    assert (cut.line, cut.reason) == (complete + 1, "truncated")
    assert "cut inside element" in cut.message


def _nth_element_end(text: str, k: int) -> int:
    """The end of the k-th top-level element of a JSON array (a brute-force depth scan)."""
    depth, seen, in_string, escape = 0, 0, False, False
    for i, c in enumerate(text):
        if in_string:
            escape, in_string = (not escape and c == "\\"), in_string and not (c == '"' and not escape)
            continue
        if c == '"':
            in_string = True
        elif c in "{[":
            depth += 1
        elif c in "}]":
            depth -= 1
            if depth == 1:
                seen += 1
                if seen == k:
                    return i + 1
    return len(text)


@pytest.mark.parametrize(
    ("data", "words"),
    [
        (b'{"instruction": "x"}', "JSON dict, not an array"),
        (b"\xff\xfe[", "not a JSON document"),
        (b"", "not a JSON document"),
    ],
)
def test_a_document_that_is_not_an_array_is_unreadable(data: bytes, words: str) -> None:
    out, _ = _run(data)
    assert len(out) == 1
    assert isinstance(out[0], Unreadable)
    assert words in out[0].message


def test_elements_that_are_not_objects_are_unreadable_and_the_others_are_read() -> None:
    good = _element()
    out, _ = _run(_doc(good, "oops", 3, None, [good], good))
    kinds = [type(o).__name__ for o in out]
    assert kinds == ["Judgment", "Unreadable", "Unreadable", "Unreadable", "Unreadable", "Judgment"]
    assert [o.line for o in out] == [1, 2, 3, 4, 5, 6]
    assert isinstance(out[1], Unreadable)
    assert out[1].message == "element 2 is a str, not an object"
    assert out[1].raw == '"oops"'
    assert isinstance(out[3], Unreadable)
    assert "null" in out[3].message


def test_a_missing_field_is_unreadable() -> None:
    element = _element()
    del element["generator_2"]
    out, _ = _run(_doc(element))
    assert len(out) == 1
    assert isinstance(out[0], Unreadable)
    assert out[0].message == "element 1: missing field 'generator_2'"
    assert json.loads(out[0].raw) == element


@pytest.mark.parametrize(
    ("key", "value", "words"),
    [
        ("generator_1", None, "generator_1 is null, not a string"),
        ("output_2", 42, "output_2 is int 42, not a string"),
        ("annotator", ["gpt4"], "annotator is list ['gpt4'], not a string"),
        ("id", 1.5, "id is float 1.5, not an integer or a string"),
        ("id", True, "id is bool True, not an integer or a string"),
    ],
)
def test_a_wrong_type_in_a_field_of_the_record_is_unreadable(key: str, value: object, words: str) -> None:
    element = _element()
    element[key] = value
    out, _ = _run(_doc(element))
    assert len(out) == 1
    assert isinstance(out[0], Unreadable)
    assert words in out[0].message


@pytest.mark.parametrize(
    ("value", "words"),
    [
        ("two", "preference is str 'two', not a number"),
        (True, "preference is bool True, not a number"),
        ({"p": 1}, "preference is dict"),
        (3.0, "preference 3.0 is out of range"),
        (0.5, "preference 0.5 is out of range"),
        (-1, "preference -1 is out of range"),
    ],
)
def test_an_unreadable_preference_is_a_parse_failure_naming_the_value(value: object, words: str) -> None:
    element = _element()
    element["preference"] = value
    out, _ = _run(_doc(element))
    assert len(out) == 1
    judgment = out[0]
    assert isinstance(judgment, Judgment)
    assert judgment.reject is not None
    assert judgment.reject[0] == PARSE_FAILURE
    assert words in judgment.reject[1]
    assert judgment.fields["preference_raw"] == (value if not isinstance(value, dict) else '{"p":1}')
    assert "winner" not in judgment.fields
    assert judgment.fields["item_id"] == "0"


def test_a_null_preference_after_a_judge_call_is_a_parse_failure() -> None:
    element = _element()  # price_per_example 0.03018: the judge was called
    element["preference"] = None
    out, _ = _run(_doc(element))
    judgment = out[0]
    assert isinstance(judgment, Judgment)
    assert judgment.reject is not None
    assert judgment.reject[0] == PARSE_FAILURE
    assert "price_per_example" in judgment.reject[1]


def test_nan_written_by_pythons_json_reads_as_null() -> None:
    element = _element()
    element.update(preference=float("nan"), price_per_example=float("nan"),
                   time_per_example=float("nan"), raw_completion=None)
    data = json.dumps([element]).encode()
    assert b"NaN" in data
    out, _ = _run(data)
    judgment = out[0]
    assert isinstance(judgment, Judgment)
    assert judgment.reject is not None
    assert judgment.reject[0] == JUDGE_CALL_FAILED
    assert "preference is NaN" in judgment.reject[1]


def test_a_judged_tie_and_an_unreadable_referenced_models() -> None:
    judged = _element(COT, 0)  # price and time present: the judge said 1.5
    judged["preference"] = 1.5
    odd = _element(COT, 3)
    odd["referenced_models"] = {"x": "output_1", "M": "output_2"}  # an unknown label
    same = _element(COT, 4)
    same["referenced_models"] = {"m": "output_1", "M": "output_1"}
    out, notes = _run(_doc(judged, odd, same))
    assert all(isinstance(o, Judgment) and o.reject is None for o in out)
    first = out[0]
    assert isinstance(first, Judgment)
    assert (first.fields["winner"], first.fields["preference"], first.fields["tie_kind"]) == ("tie", 0.5, "judged")
    assert first.fields["order_known"] is True
    assert first.fields["system_a"] == "alpaca-7b"  # its referenced_models: m -> output_2
    for judgment in out[1:]:
        assert isinstance(judgment, Judgment)
        assert judgment.fields["order_known"] is False
        assert judgment.fields["system_a"] == "gpt4_1106_preview"
    assert any(note.startswith("2 elements have a referenced_models") for note in notes.notes)


def test_an_empty_array_has_no_judgment() -> None:
    out, notes = _run(b"[]")
    assert out == []
    assert any("0 of 0" in note for note in notes.notes)


# --- detect -----------------------------------------------------------------------------------


@pytest.mark.parametrize("name", ANNOTATIONS)
def test_detect_recognises_every_sample(name: str) -> None:
    data = (ALPACA / name).read_bytes()
    assert ALPACA_EVAL.detect(data[:65536], name)
    # A head cut inside the first element, once generator_1 is in it
    # (grep -bo '"generator_1"' GPT4 -> byte 405 in GPT4; found per file here).
    cut = data.index(b'"generator_1"') + 20
    assert ALPACA_EVAL.detect(data[:cut], name)
    assert not ALPACA_EVAL.detect(data[:40], name)  # too little to tell


def _other_samples() -> list[Path]:
    return sorted(
        p for p in SAMPLES.glob("*/*") if p.is_file() and not (p.parent == ALPACA and p.name in ANNOTATIONS)
    )


@pytest.mark.parametrize("path", _other_samples(), ids=lambda p: f"{p.parent.name}/{p.name}")
def test_detect_refuses_the_other_sample_files(path: Path) -> None:
    assert not ALPACA_EVAL.detect(path.read_bytes()[:65536], str(path))


@pytest.mark.parametrize(
    "head",
    [
        b'{"item_set":"x","item_id":"1","system_id":"s","judge_id":"j","score":3}\n',
        b'[{"item_set":"x","item_id":"1","system_a":"a","system_b":"b","judge_id":"j","preference":0.3}]',
        b'[{"note": "\\"generator_1\\": 1, \\"preference\\": 2"}]',  # the names inside a value
        b'[{"meta": {"generator_1": "a", "preference": 1}}]',  # the names one level down
        b"[1, 2, 3]",
        b"[]",
        b"",
    ],
)
def test_detect_refuses_other_json(head: bytes) -> None:
    assert not ALPACA_EVAL.detect(head, "x.json")


def test_detect_accepts_a_byte_order_mark_and_leading_space() -> None:
    element = _element()
    assert ALPACA_EVAL.detect(b"\xef\xbb\xbf\n  " + _doc(element), "annotations.json")
    out, _ = _run(b"\xef\xbb\xbf" + _doc(element))
    assert isinstance(out[0], Judgment)
    assert out[0].reject is None
