r"""The Arena-Hard-Auto adapter over the real sample files and hostile variants of them.

Samples: ``/work/shared/samples/arena_hard/`` (README.md there describes every
field and oddity; ``JURYMETER_SAMPLES`` points elsewhere). Every expectation
below was counted by hand from the files, never produced by the adapter:

- item ids and score labels per line: ``jq -c '[(.question_id // .uid),
  [.games[] | .score]]' FILE``;
- label totals per game: ``jq -r '.games | to_entries[] | "g\(.key)
  \(.value.score)"' FILE | sort | uniq -c``;
- failed calls vs. unparsed replies: for each null score, whether the judgment
  text (v0.1 ``judgment``, v2.0 ``judgment.answer``) is only ``$ERROR$`` tokens
  (a python -c loop over the games);
- answer lengths: a python -c ``re`` match of the whole judge prompt template
  (``<|The Start of Assistant A's Answer|>\n(.*?)\n<|The End ...|>\n\n<|The
  Start of Assistant B's Answer|>\n(.*)\n<|The End of Assistant B's
  Answer|>\Z``), and for each record whether game 0's (A, B) answers equal
  game 1's (B, A).

The winner/strength table :data:`SPEC` is the issue's wording, written out here
and not imported from the adapter.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest

from jurymeter.io.adapters.arena_hard import ARENA_HARD, ArenaHardAdapter
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

ARENA = SAMPLES / "arena_hard"
pytestmark = pytest.mark.skipif(not ARENA.is_dir(), reason=f"no Arena-Hard samples at {ARENA}")

# The issue: A>>B and A>B -> "A", A=B -> "tie", B>A and B>>A -> "B"; strength 2 for >>, 1 for >, 0 for =.
SPEC = {"A>>B": ("A", 2), "A>B": ("A", 1), "A=B": ("tie", 0), "B>A": ("B", 1), "B>>A": ("B", 2)}

SERVICENOW = "v0.1__ServiceNow__gemini-1.5-pro-api-0514__phi-3-medium-4k-instruct.jsonl"
BATCH = "v0.1__danielwetzel__gpt-4o-batch__llama3_8b.jsonl"
BATCH_2 = "v0.1__danielwetzel__gpt-4o-batch_2__llama3_8b.subset.jsonl"
PENFEVER = "v0.1__penfever__DeepSeek-R1-Distill-Llama-70B__bagel-8b-v1.0.subset.jsonl"
V2_SHORT = "v2.0__tiaan720__gemini-2.5-flash__gemini-2.0-flash-lite-001.shortest5.jsonl"
V2_SCORES = "v2.0__tiaan720__gemini-2.5-flash__gemini-2.0-flash-lite-001.scores_only.jsonl"

# file -> (layout, baseline, model, judge): the records' own "model"/"judge"/"baseline" (jq);
# v0.1 names no baseline, so the v0.1 default gpt-4-0314 is expected.
WHO = {
    SERVICENOW: ("v0.1", "gpt-4-0314", "phi-3-medium-4k-instruct", "gemini-1.5-pro-api-preview"),
    BATCH: ("v0.1", "gpt-4-0314", "llama3_8b", "gpt-4o-batch"),
    BATCH_2: ("v0.1", "gpt-4-0314", "llama3_8b", "gpt-4o-batch_2"),
    PENFEVER: ("v0.1", "gpt-4-0314", "jondurbin/bagel-8b-v1.0", "DeepSeek-R1-Distill-Llama-70B"),
    V2_SHORT: ("v2.0", "o3-mini-2025-01-31", "gemini-2.0-flash-lite-001", "gemini-2.5-flash"),
    V2_SCORES: ("v2.0", "o3-mini-2025-01-31", "gemini-2.0-flash-lite-001", "gemini-2.5-flash"),
}

# file -> one (item id, game 0 score, game 1 score) a line, in file order (jq); None = null score.
RECORDS: dict[str, list[tuple[str, str | None, str | None]]] = {
    SERVICENOW: [
        ("328c149ed45a41c0b9d6f14659e63599", "A>B", "B>>A"),
        ("51c444da19ec4cf1a5fc387667e4a7cf", "A>B", "A>B"),
        ("31615ee9cc8448cd9d225bdb87a5ffdc", "A>B", "B>A"),
        ("69120423cec04acca9f2b8d5f68b391c", "B>A", "B>A"),
        ("fae4f754f12f40db8178d3683eb1eddc", "A=B", "B>A"),
        ("ed426d6069064ad9bf21e83bcb29f356", "B>A", "B>A"),
        ("46e73778f43143199f88b2e354df85eb", "A>B", "B>A"),
    ],
    BATCH: [
        ("328c149ed45a41c0b9d6f14659e63599", "A>B", "A>B"),
        ("b43c07656ead4150b360294ee932b410", "A>>B", "B>>A"),
        ("9f25ff7c0d6a4d74846bfe76af8d925c", "A>B", "A>B"),
        ("93c9b4bb32f4422f954c7af9ea2bdfcd", "A>>B", "B>A"),
        ("f54e99e9686549e7a096dd16dbab28e1", "A>B", "B>A"),
        ("90b29911b57848ec89fc7d8c15f27c88", "B>A", "A>B"),
        ("1f07cf6d146d4038b2b93aaba3935ce0", "A>B", "B>A"),
        ("ed3077a3443a4cf88233f5bc636e7394", "B>A", "A>B"),
        ("7bcf40b22c164f36a85efcbf169da647", "A>B", "B>A"),
    ],
    BATCH_2: [
        ("b43c07656ead4150b360294ee932b410", None, None),
        ("04ba0aeb79524f6c8520d47cada34f25", None, None),
        ("328c149ed45a41c0b9d6f14659e63599", None, None),
        ("33166da9898f40b6aff3fa8d988dae7a", "A>B", "B>A"),
        ("2b9b644162d741b3a0f27c5d91752dd4", "A>>B", "B>A"),
        ("ab10af348f7f49e6813728282ade2ca9", "B>A", "A>B"),
        ("74c4255dd61d41d68ea69e4469a63fce", "B>>A", "A>B"),
    ],
    PENFEVER: [
        ("328c149ed45a41c0b9d6f14659e63599", "A>>B", "B>>A"),
        ("e9a2e1240f4a46b6a832bb5d71b20ee1", None, "B>A"),
        ("33166da9898f40b6aff3fa8d988dae7a", None, None),
        ("d65ce5eb33554e83a231d9b39ccd8bc5", "A>B", None),
    ],
    V2_SHORT: [
        ("d5cdf24c4e614beb", "B>A", "A>B"),
        ("0f93825f88454fb6", "B>>A", "A>>B"),
        ("707e6bd0d8994e71", "A>>B", "B>A"),
        ("4bf132b69be3469b", "A>>B", "A>>B"),
        ("7b2368abe4904c8f", "A>>B", "B>>A"),
    ],
    V2_SCORES: [
        ("d5cdf24c4e614beb", "B>A", "A>B"),
        ("ec71c09662a64365", "A>B", "B>>A"),
        ("dfc9be7c176d46bb", "A>>B", "B>>A"),
        ("2edbb5f36f5b42be", "A>>B", "B>>A"),
        ("666d2acdd7d64e17", "A>B", "A>B"),
        ("f0c5c62bd4a84fdf", "B>>A", "B>A"),
        ("8411a709b22b408a", "B>A", "A>B"),
        ("9d8a4964a985472e", "A>>B", "B>>A"),
        ("c1dcc4caf8174b3a", "A>>B", "B>>A"),
        ("045a786b4e5d4ec6", "B>>A", "A>>B"),
        ("62d77ecc66d04286", "A>B", "A>>B"),
        ("ac0ad233574047e3", "A>B", "A>>B"),
        ("0f93825f88454fb6", "B>>A", "A>>B"),
        ("22ed32babcd14390", "A>>B", "B>A"),
        ("8c27a1b0e01d4589", "B>>A", "A>B"),
        ("28b81667160545a9", "B>>A", "A>B"),
        ("44cb950712cb49bd", "A>>B", "B>>A"),
        ("148d878cae5748bb", "B>>A", "A>>B"),
        ("aa4b641079674b37", "A>>B", "B>>A"),
        ("7c6224e2cf384fc9", "A>>B", "B>>A"),
        ("ba83143680144f8c", "A>>B", "B>>A"),
        ("43fa067b20124cdc", "A>>B", "B>A"),
        ("63497fa57f3241fd", "A>B", "B>>A"),
        ("d85d2aaa41aa41df", "B>>A", "A>>B"),
        ("6b4cac41845d4147", "B>>A", "A>>B"),
        ("707e6bd0d8994e71", "A>>B", "B>A"),
        ("c7513c511b994e09", "A>>B", "B>>A"),
        ("390c28cd29624b2b", "B>>A", "A>B"),
        ("ea3f0b11012442e7", "A>>B", "A>>B"),
        ("07d8ea70be2b4a17", "A>>B", "B>A"),
        ("b9825cd52d934287", "B>>A", "A>>B"),
        ("8d06d08f63e64e56", "A>B", "B>>A"),
        ("e51d15007484432c", "A>>B", "B>>A"),
        ("f07bc8d6208141ef", "A>>B", "B>>A"),
        ("083cbf8d1ec54d91", "A>>B", "A>B"),
        ("4bf132b69be3469b", "A>>B", "A>>B"),
        ("5e2a85bac39943aa", "A>>B", "B>>A"),
        ("e205dd25a86740a2", "A>>B", "B>>A"),
        ("3932b636daa347c6", "A>B", "B>>A"),
        ("dcac3317be714a64", "A>B", "B>A"),
        ("4d652901a10945fe", "A>B", "B>>A"),
        ("7b2368abe4904c8f", "A>>B", "B>>A"),
        ("753af64fde034326", "A>>B", "B>>A"),
        ("9d2267b403ea4d9d", "A>B", "A>B"),
        ("c5c690ddb51c422c", "A>>B", "B>>A"),
        ("1a437e47d98f48da", "A>B", "B>>A"),
        ("cd58c7967f4b446e", "A>>B", "A>>B"),
        ("0f61132b48b04b93", "A>B", "B>A"),
        ("246e229a26a14ea7", "B>>A", "B>A"),
        ("a75053d1204e4793", "A>>B", "A>B"),
        ("17b64815203f458c", "B>>A", "A>>B"),
        ("5882af2d32934ff8", "A>B", "B>>A"),
        ("9c29b9b995834454", "A>>B", "B>>A"),
    ],
}

# file -> {(line, game): reason} of every null score. batch_2 lines 1-3: both judgments are
# "\n$ERROR$\n$ERROR$"; penfever's are <think> replies without a [[label]] (README, python -c).
REJECTED = {
    SERVICENOW: {},
    BATCH: {},
    BATCH_2: {(1, 0): JUDGE_CALL_FAILED, (1, 1): JUDGE_CALL_FAILED, (2, 0): JUDGE_CALL_FAILED,
              (2, 1): JUDGE_CALL_FAILED, (3, 0): JUDGE_CALL_FAILED, (3, 1): JUDGE_CALL_FAILED},
    PENFEVER: {(2, 0): PARSE_FAILURE, (3, 0): PARSE_FAILURE, (3, 1): PARSE_FAILURE,
               (4, 1): PARSE_FAILURE},
    V2_SHORT: {},
    V2_SCORES: {},
}

# file -> game 0's (len A answer, len B answer) a line (the re match); game 1 shows them swapped.
# None: no prompt (scores_only) or, in the batch file, a record whose two prompts are not each
# other's swap (lines 1, 2, 3, 4, 6, 7: e.g. line 1 game 0 shows (794, 1203), game 1 (119, 1172)).
LENGTHS: dict[str, list[tuple[int, int] | None]] = {
    SERVICENOW: [(119, 1242), (328, 350), (416, 1157), (1193, 1031), (518, 713), (1047, 1593),
                 (1570, 1664)],
    BATCH: [None, None, None, None, (2677, 1473), None, None, (3290, 2886), (2535, 3251)],
    BATCH_2: [(794, 1203), (2291, 3366), (119, 1172), (1558, 1472), (958, 1121), (3110, 5588),
              (965, 1612)],
    PENFEVER: [(119, 4095), (1298, 768), (1558, 904), (675, 362)],
    V2_SHORT: [(475, 913), (762, 3488), (840, 3773), (408, 653), (2049, 2899)],
    V2_SCORES: [None] * 53,
}

# file -> label totals per game, from `sort | uniq -c` (null scores left out).
TOTALS = {
    SERVICENOW: {(0, "A=B"): 1, (0, "A>B"): 4, (0, "B>A"): 2, (1, "A>B"): 1, (1, "B>>A"): 1,
                 (1, "B>A"): 5},
    BATCH: {(0, "A>>B"): 2, (0, "A>B"): 5, (0, "B>A"): 2, (1, "A>B"): 4, (1, "B>>A"): 1,
            (1, "B>A"): 4},
    BATCH_2: {(0, "A>>B"): 1, (0, "A>B"): 1, (0, "B>>A"): 1, (0, "B>A"): 1, (1, "A>B"): 2,
              (1, "B>A"): 2},
    PENFEVER: {(0, "A>>B"): 1, (0, "A>B"): 1, (1, "B>>A"): 1, (1, "B>A"): 1},
    V2_SHORT: {(0, "A>>B"): 3, (0, "B>>A"): 1, (0, "B>A"): 1, (1, "A>>B"): 2, (1, "A>B"): 1,
               (1, "B>>A"): 1, (1, "B>A"): 1},
    V2_SCORES: {(0, "A>>B"): 26, (0, "A>B"): 13, (0, "B>>A"): 12, (0, "B>A"): 2, (1, "A>>B"): 12,
                (1, "A>B"): 9, (1, "B>>A"): 24, (1, "B>A"): 8},
}

CANONICAL = b'{"item_set":"x","item_id":"1","system_id":"s","judge_id":"j","score":3}\n'


class _Source(SourceBytes):
    """A source over bytes: lines split on newlines, a final newline ending the last line."""

    def __init__(self, data: bytes, path: str = "judgments.jsonl") -> None:
        self.data = data
        self.path = path

    def lines(self) -> Iterator[tuple[int, bytes]]:
        parts = self.data.split(b"\n")
        if parts and parts[-1] == b"":
            parts.pop()
        yield from enumerate(parts, 1)

    def read(self) -> bytes:
        return self.data


def _run(
    data: bytes, options: AdapterOptions | None = None
) -> tuple[list[Judgment | Unreadable], AdapterNotes]:
    notes = AdapterNotes(ARENA_HARD.name)
    out = list(ARENA_HARD.judgments(_Source(data), options or AdapterOptions(), notes))
    return out, notes


def _sample(name: str) -> bytes:
    return (ARENA / name).read_bytes()


def _lines(name: str) -> list[bytes]:
    return _sample(name).rstrip(b"\n").split(b"\n")


def _judgments(out: list[Judgment | Unreadable]) -> list[Judgment]:
    assert all(isinstance(j, Judgment) for j in out), [j for j in out if isinstance(j, Unreadable)]
    return [j for j in out if isinstance(j, Judgment)]


def test_the_adapter_is_registered_under_its_name() -> None:
    assert isinstance(ARENA_HARD, ArenaHardAdapter)
    assert ARENA_HARD.name == "arena-hard"
    assert ARENA_HARD.suffixes == (".jsonl",)


def test_every_sample_file_has_expectations() -> None:
    assert sorted(p.name for p in ARENA.glob("*.jsonl")) == sorted(RECORDS)


@pytest.mark.parametrize("name", sorted(RECORDS))
def test_sample_file(name: str) -> None:
    layout, baseline, model, judge = WHO[name]
    lines = _lines(name)
    out, _ = _run(_sample(name))
    judgments = _judgments(out)
    assert len(judgments) == 2 * len(RECORDS[name]) == 2 * len(lines)
    for number, (item_id, label0, label1) in enumerate(RECORDS[name], 1):
        pair = [j for j in judgments if j.line == number]
        assert [j.fields["game"] for j in pair] == [0, 1]
        lengths = LENGTHS[name][number - 1]
        for game, (judgment, label) in enumerate(zip(pair, (label0, label1), strict=True)):
            f = judgment.fields
            assert judgment.protocol == "pairwise"
            assert judgment.raw == lines[number - 1].decode()
            assert f["item_id"] == item_id
            assert f["question_id" if layout == "v0.1" else "uid"] == item_id
            assert f["layout"] == layout
            assert f["judge_id"] == judge
            assert f["item_set"] == ("arena-hard-v0.1" if layout == "v0.1" else "arena-hard-v2.0/hard_prompt")
            if layout == "v2.0":
                assert f["category"] == "hard_prompt"
            # game 0 shows the baseline first; game 1 the model first.
            assert (f["system_a"], f["system_b"]) == ((baseline, model) if game == 0 else (model, baseline))
            assert (f["generation"], f["replicate"]) == (0, 0)
            assert f["score_label"] == label
            if label is None:
                assert judgment.reject is not None
                assert judgment.reject[0] == REJECTED[name][(number, game)]
                assert f"games[{game}].score is null" in judgment.reject[1]
                assert "winner" not in f
                assert f["strength"] is None
            else:
                assert judgment.reject is None
                assert (number, game) not in REJECTED[name]
                assert (f["winner"], f["strength"]) == SPEC[label]
            expected = None if lengths is None else (lengths if game == 0 else lengths[::-1])
            assert (f["length_a"], f["length_b"]) == (expected or (None, None))
    rejected = {(j.line, j.fields["game"]): j.reject[0] for j in judgments if j.reject}
    assert rejected == REJECTED[name]
    totals = Counter((j.fields["game"], j.fields["score_label"]) for j in judgments if not j.reject)
    assert dict(totals) == TOTALS[name]


def test_winners_are_of_the_shown_slots_not_mapped_back() -> None:
    # ServiceNow line 1: ("A>B", "B>>A") = the baseline wins game 0 (shown A) and game 1 (shown B).
    out, _ = _run(_lines(SERVICENOW)[0] + b"\n")
    g0, g1 = _judgments(out)
    assert (g0.fields["system_a"], g0.fields["winner"], g0.fields["strength"]) == ("gpt-4-0314", "A", 1)
    assert (g1.fields["system_b"], g1.fields["winner"], g1.fields["strength"]) == ("gpt-4-0314", "B", 2)
    # ServiceNow line 5, game 0 is the sample's one tie.
    out, _ = _run(_lines(SERVICENOW)[4] + b"\n")
    assert [(j.fields["winner"], j.fields["strength"]) for j in _judgments(out)] == [("tie", 0), ("B", 1)]


def test_failed_calls_and_unparsed_replies_say_why() -> None:
    out, _ = _run(_sample(BATCH_2))
    failed = _judgments(out)[0]
    assert failed.reject is not None
    assert failed.reject[0] == JUDGE_CALL_FAILED
    assert "judge call failed" in failed.reject[1]
    assert "$ERROR$" in failed.reject[1]
    assert "2 failed attempt(s)" in failed.reject[1]
    out, _ = _run(_sample(PENFEVER))
    unparsed = _judgments(out)[2]  # line 2, game 0: 17,407 chars of <think> without a verdict
    assert (unparsed.line, unparsed.fields["game"]) == (2, 0)
    assert unparsed.reject is not None
    assert unparsed.reject[0] == PARSE_FAILURE
    assert "no verdict label" in unparsed.reject[1]
    assert "17407 chars" in unparsed.reject[1]


def test_the_v01_baseline_is_the_documented_default_and_the_notes_say_it_was_assumed() -> None:
    out, notes = _run(_sample(SERVICENOW))
    assert {j.fields["system_a"] for j in _judgments(out) if j.fields["game"] == 0} == {"gpt-4-0314"}
    assert len(notes.notes) == 1
    assert "'gpt-4-0314' assumed" in notes.notes[0]
    assert "v0.1" in notes.notes[0]


def test_the_v01_baseline_comes_from_the_options_and_the_notes_say_so() -> None:
    out, notes = _run(_sample(SERVICENOW), AdapterOptions(baseline="gpt-4o-mini"))
    judgments = _judgments(out)
    assert {j.fields["system_a"] for j in judgments if j.fields["game"] == 0} == {"gpt-4o-mini"}
    assert {j.fields["system_b"] for j in judgments if j.fields["game"] == 1} == {"gpt-4o-mini"}
    assert len(notes.notes) == 1
    assert "'gpt-4o-mini' from options.baseline" in notes.notes[0]
    assert "assumed" not in notes.notes[0]


def test_v20_uses_its_own_baseline_and_says_an_option_is_not_used() -> None:
    out, notes = _run(_sample(V2_SHORT), AdapterOptions(baseline="gpt-4-0314"))
    assert {j.fields["system_a"] for j in _judgments(out) if j.fields["game"] == 0} == {"o3-mini-2025-01-31"}
    assert notes.notes == [
        "arena-hard v2.0 records name their baseline: 'o3-mini-2025-01-31' "
        "(options.baseline 'gpt-4-0314' is not used for v2.0 records)"
    ]


def test_the_item_set_option_overrides_both_layouts() -> None:
    for name in (SERVICENOW, V2_SCORES):
        out, _ = _run(_sample(name), AdapterOptions(item_set="my-run"))
        assert {j.fields["item_set"] for j in _judgments(out)} == {"my-run"}


def test_inconsistent_prompts_leave_the_lengths_empty_and_are_noted() -> None:
    _, notes = _run(_sample(BATCH))
    assert len(notes.notes) == 2
    assert notes.notes[1].startswith("6 record(s) whose two games' prompts")
    assert "(lines 1, 2, 3, 4, 6, 7)" in notes.notes[1]


# ---------------------------------------------------------------- detect


def _other_samples() -> list[Path]:
    return sorted(
        p for p in SAMPLES.glob("*/*") if p.parent.name != "arena_hard" and p.is_file()
    ) + sorted(p for p in ARENA.iterdir() if p.suffix != ".jsonl")


@pytest.mark.parametrize("name", sorted(RECORDS))
def test_detect_recognises_every_sample(name: str) -> None:
    data = _sample(name)
    assert ARENA_HARD.detect(data[:65536], str(ARENA / name))
    # A first line longer than the head (cut 300 bytes in, or 10 before its end): recognised
    # from its keys alone.
    head = data[: min(300, data.index(b"\n") - 10)]
    assert b"\n" not in head
    assert ARENA_HARD.detect(head, str(ARENA / name))


@pytest.mark.parametrize("path", _other_samples() if SAMPLES.is_dir() else [], ids=lambda p: p.name)
def test_detect_refuses_other_formats(path: Path) -> None:
    data = path.read_bytes()
    assert not ARENA_HARD.detect(data[:65536], str(path))
    assert not ARENA_HARD.detect(data[:300], str(path))


def test_detect_refuses_canonical_records() -> None:
    assert not ARENA_HARD.detect(CANONICAL, "records.jsonl")
    assert not ARENA_HARD.detect(CANONICAL.replace(b'"score":3', b'"winner":"A"'), "records.jsonl")
    assert not ARENA_HARD.detect(b"", "empty.jsonl")
    assert not ARENA_HARD.detect(b'{"games": [], "judge": "j"\n', "broken.jsonl")


# ---------------------------------------------------------------- hostile variants


def _edited(name: str, line: int, edit: Callable[[Any], object]) -> bytes:
    """The sample with one record changed by ``edit(record)`` (which mutates it)."""
    lines = _lines(name)
    record = orjson.loads(lines[line - 1])
    edit(record)
    lines[line - 1] = orjson.dumps(record)
    return b"\n".join(lines) + b"\n"


def _only_unreadable(out: list[Judgment | Unreadable], line: int) -> Unreadable:
    bad = [j for j in out if isinstance(j, Unreadable)]
    assert len(bad) == 1, bad
    assert bad[0].line == line
    assert not [j for j in out if isinstance(j, Judgment) and j.line == line]
    return bad[0]


def test_a_truncated_last_line_is_unreadable_and_the_rest_is_read() -> None:
    data = _sample(SERVICENOW).rstrip(b"\n")
    cut = data[: data.rfind(b"\n") + 2000]  # line 7 stops 2,000 bytes in
    out, _ = _run(cut)
    bad = _only_unreadable(out, 7)
    assert "not a JSON object" in bad.message
    assert bad.raw == cut[cut.rfind(b"\n") + 1 :].decode()
    assert len(_judgments([j for j in out if isinstance(j, Judgment)])) == 12


def test_a_truncated_line_cut_inside_a_character_is_unreadable() -> None:
    line = "{\"question_id\": \"q\", \"model\": \"m\", \"judge\": \"j\", \"games\": [\"é".encode()
    out, _ = _run(line[:-1])  # half of the two bytes of é
    assert isinstance(out[0], Unreadable)
    assert out[0].line == 1


@pytest.mark.parametrize(
    ("name", "key", "message"),
    [
        (SERVICENOW, "games", "record question_id '51c444da19ec4cf1a5fc387667e4a7cf' has no games"),
        (SERVICENOW, "model", "record question_id '51c444da19ec4cf1a5fc387667e4a7cf' has no model"),
        (SERVICENOW, "judge", "has no judge"),
        (SERVICENOW, "question_id", "no question_id (v0.1) or uid (v2.0)"),
        (V2_SHORT, "games", "v2.0 record uid '0f93825f88454fb6' has no games"),
        (V2_SHORT, "model", "v2.0 record uid '0f93825f88454fb6' has no model"),
        (V2_SHORT, "baseline", "v2.0 record uid '0f93825f88454fb6' has no baseline"),
    ],
)
def test_a_missing_field_is_unreadable(name: str, key: str, message: str) -> None:
    out, _ = _run(_edited(name, 2, lambda r: r.pop(key)))
    bad = _only_unreadable(out, 2)
    assert message in bad.message
    assert len(out) == 1 + 2 * (len(RECORDS[name]) - 1)


@pytest.mark.parametrize(
    ("key", "value", "message"),
    [
        ("games", "A>B", "games is a string ('A>B'), expected a list of two games"),
        ("games", {"0": {}}, "games is an object"),
        ("model", 7, "model is a number (7), expected a string"),
        ("judge", ["gpt-4"], 'judge is an array (["gpt-4"]), expected a string'),
        ("question_id", None, "question_id is null (null), expected a string"),
        ("question_id", True, "question_id is a boolean"),
    ],
)
def test_a_wrong_type_is_unreadable(key: str, value: object, message: str) -> None:
    out, _ = _run(_edited(SERVICENOW, 3, lambda r: r.__setitem__(key, value)))
    bad = _only_unreadable(out, 3)
    assert message in bad.message


def test_an_integer_item_id_is_written_as_text() -> None:
    out, _ = _run(_edited(SERVICENOW, 3, lambda r: r.__setitem__("question_id", 81)))
    assert {j.fields["item_id"] for j in _judgments(out) if j.line == 3} == {"81"}


@pytest.mark.parametrize("games", [1, 3, 0])
def test_a_games_list_not_of_two_is_unreadable(games: int) -> None:
    def edit(record: dict[str, list[object]]) -> None:
        record["games"] = (record["games"] * 2)[:games]

    out, _ = _run(_edited(V2_SHORT, 4, edit))
    bad = _only_unreadable(out, 4)
    assert f"games holds {games} game(s), expected 2" in bad.message


def test_a_game_that_is_not_an_object_is_unreadable() -> None:
    out, _ = _run(_edited(SERVICENOW, 1, lambda r: r["games"].__setitem__(1, "B>A")))
    assert "games[1] is a string ('B>A'), expected an object" in _only_unreadable(out, 1).message


@pytest.mark.parametrize(
    ("label", "shown"), [("A>>>B", "'A>>>B'"), ("B=A", "'B=A'"), ("a>b", "'a>b'"), (3, "3")]
)
def test_an_unknown_score_label_is_a_parse_failure_naming_it(label: object, shown: str) -> None:
    out, _ = _run(_edited(SERVICENOW, 2, lambda r: r["games"][1].__setitem__("score", label)))
    judgments = _judgments(out)
    assert len(judgments) == 14
    (bad,) = [j for j in judgments if j.reject]
    assert (bad.line, bad.fields["game"]) == (2, 1)
    assert bad.reject == (
        PARSE_FAILURE,
        f"games[1].score {shown} is not one of the five Arena-Hard labels A>>B, A>B, A=B, B>A, B>>A",
    )
    assert "winner" not in bad.fields
    # the other game of the record is stored
    (other,) = [j for j in judgments if j.line == 2 and j.fields["game"] == 0]
    assert other.reject is None
    assert other.fields["winner"] == "A"


def test_a_v20_failed_call_is_judge_call_failed() -> None:
    def edit(record: dict[str, list[dict[str, object]]]) -> None:
        record["games"][0]["score"] = None
        record["games"][0]["judgment"] = {"answer": "$ERROR$"}

    out, _ = _run(_edited(V2_SHORT, 1, edit))
    bad = _judgments(out)[0]
    assert bad.reject is not None
    assert bad.reject[0] == JUDGE_CALL_FAILED
    assert "games[0].score is null" in bad.reject[1]


def test_a_null_score_with_an_error_after_a_reply_is_a_parse_failure() -> None:
    def edit(record: dict[str, list[dict[str, object]]]) -> None:
        record["games"][1]["score"] = None
        record["games"][1]["judgment"] = "\nMy answer ... no label yet\n$ERROR$"

    out, _ = _run(_edited(SERVICENOW, 1, edit))
    bad = _judgments(out)[1]
    assert bad.reject is not None
    assert bad.reject[0] == PARSE_FAILURE
    assert "a follow-up call failed" in bad.reject[1]


def test_a_null_or_absent_score_without_a_judgment_is_a_parse_failure() -> None:
    # scores_only has no judgment text: a null score there cannot be told a failed call.
    out, _ = _run(_edited(V2_SCORES, 1, lambda r: r["games"][0].__setitem__("score", None)))
    bad = _judgments(out)[0]
    assert bad.reject == (PARSE_FAILURE, "games[0].score is null and no judgment text: no verdict to store")
    out, _ = _run(_edited(V2_SCORES, 1, lambda r: r["games"][1].pop("score")))
    bad = _judgments(out)[1]
    assert bad.reject == (PARSE_FAILURE, "games[1] has no score and no judgment text: no verdict to store")


def test_other_lines_that_are_not_records() -> None:
    data = b"\n".join(
        [
            _lines(SERVICENOW)[0],
            b"",  # blank: skipped
            b"   ",
            b"[1, 2]",
            b'"games"',
            b"\xff\xfe not utf-8",
            b'{"uid": "x", "model": "m", "judge": "j", "baseline": "b", "category": 5, "games": [{}, {}]}',
        ]
    )
    out, _ = _run(data)
    assert [type(j).__name__ for j in out] == ["Judgment", "Judgment"] + ["Unreadable"] * 4
    unreadable = [j for j in out if isinstance(j, Unreadable)]
    assert [u.line for u in unreadable] == [4, 5, 6, 7]
    assert "an array, not an Arena-Hard record" in unreadable[0].message
    assert "a string, not an Arena-Hard record" in unreadable[1].message
    # Bytes that are not UTF-8: a reason of their own (issue 22), the bytes kept as \xNN.
    assert (unreadable[2].reason, unreadable[2].raw) == ("invalid_text", "\\xff\\xfe not utf-8")
    assert "not valid text (invalid UTF-8 bytes at byte 0)" in unreadable[2].message
    assert {u.reason for u in unreadable[:2] + unreadable[3:]} == {"malformed_line"}
    assert "category is a number (5), expected a string" in unreadable[3].message


def test_a_byte_order_mark_is_skipped() -> None:
    data = b"\xef\xbb\xbf" + _sample(V2_SCORES)
    assert ARENA_HARD.detect(data[:65536], "x.jsonl")
    out, _ = _run(data)
    assert len(_judgments(out)) == 106


def test_a_v20_record_without_a_category_is_in_the_plain_item_set() -> None:
    out, _ = _run(_edited(V2_SCORES, 1, lambda r: r.pop("category")))
    first = _judgments(out)[0]
    assert first.fields["item_set"] == "arena-hard-v2.0"
    assert first.fields["category"] is None
