"""One line of an MT-Bench log read: FastChat's fields checked, the answer lengths cut out, the replicates counted.

What :mod:`jurymeter.io.adapters.mt_bench` (judgment by judgment) and
:mod:`jurymeter.io.adapters.mt_bench_columns` (a single-answer file as column
blocks) share, so both read a line to the same fields, rejects and messages.
The format itself: the module docstring of :mod:`jurymeter.io.adapters.mt_bench`.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any, Final

import orjson

from jurymeter.io.adapters.base import (
    JUDGE_CALL_FAILED,
    PARSE_FAILURE,
    AdapterNotes,
    AdapterOptions,
    SourceBytes,
)
from jurymeter.io.source_files import BOM

ITEM_SET: Final = "mt-bench"
DEFAULT_SCALE: Final = (1.0, 10.0)  # every FastChat single prompt: "on a scale of 1 to 10"
API_ERROR_OUTPUT: Final = "$ERROR$"  # fastchat.llm_judge.common.API_ERROR_OUTPUT
NO_RATING: Final = -1  # run_judge_single's score when no [[rating]] was found
SCORE_OUT_OF_SCALE: Final = "score_out_of_scale"  # io.schema.Reason
UNKNOWN_WINNER: Final = "unknown_winner"  # io.schema.Reason

# FastChat's verdicts (already mapped back to model names) -> the slot that model was shown in.
GAME_1: Final = {"model_1": "A", "model_2": "B", "tie": "tie"}
GAME_2: Final = {"model_1": "B", "model_2": "A", "tie": "tie"}
LABELS: Final = "model_1, model_2, tie, error"

# Markers of FastChat's judge_prompts.jsonl templates (answer lengths).
_S_START: Final = "[The Start of Assistant's Answer]\n"
_S_END: Final = "\n[The End of Assistant's Answer]"
_P_A_START: Final = "[The Start of Assistant A's Answer]\n"
_P_A_END: Final = "\n[The End of Assistant A's Answer]"
_P_B_START: Final = "[The Start of Assistant B's Answer]\n"
_P_B_END: Final = "\n[The End of Assistant B's Answer]"
_M_A: Final = "\n\n### Assistant A:\n"
_M_B: Final = "\n\n### Assistant B:\n"
_M_A_END: Final = "\n\n<|The End of Assistant A's Conversation with User|>"
_M_B_END: Final = "\n\n<|The End of Assistant B's Conversation with User|>"

# detect() on a first line longer than the head: FastChat's json.dumps key order.
HEAD_LINE: Final = re.compile(rb'^\{"question_id":\s*[^,]{1,200},\s*"model(?:_1)?":\s*"')
JUDGE_LIST: Final = re.compile(rb'"judge":\s*\[\s*"')
_EPOCH: Final = datetime(1970, 1, 1, tzinfo=UTC)
# Unix seconds a datetime holds: 0001-01-01T00:00:00 to 9999-12-31T23:59:59.
_TSTAMP_MIN: Final = -62135596800.0
_TSTAMP_MAX: Final = 253402300799.0
_SHOWN: Final = 60
_MINUTES: dict[int, str] = {}  # minute since the epoch -> "YYYY-MM-DDTHH:MM:" (a bounded cache)

# (item_id, question_id, turn, judge model, prompt name, tstamp, model, score)
_Single = tuple[str, Any, int, str, str, float, str, Any]
# (item_id, question_id, turn, judge model, prompt name, tstamp, model_1, model_2, g1_winner, g2_winner)
_Pair = tuple[str, Any, int, str, str, float, str, str, str, str]


def show_value(value: Any) -> str:
    text = orjson.dumps(value).decode()
    return text if len(text) <= _SHOWN else text[: _SHOWN - 3] + "..."


def _wrong(name: str, expected: str, value: Any) -> str:
    return f"field {name!r}: expected {expected}, got {show_value(value)}"


def _common_error(obj: dict[str, Any]) -> str | None:
    """Why the fields both kinds share cannot be read (``None``: they can)."""
    qid, turn, judge, tstamp = obj["question_id"], obj["turn"], obj["judge"], obj["tstamp"]
    if type(qid) is not int and type(qid) is not str:
        return _wrong("question_id", "an integer or a string", qid)
    if type(turn) is not int:
        return _wrong("turn", "an integer (1 or 2)", turn)
    if type(judge) is not list or len(judge) != 2 or not all(type(part) is str for part in judge):
        return _wrong("judge", "a list [judge model, prompt name] of two strings", judge)
    if type(tstamp) is not float and type(tstamp) is not int:
        return _wrong("tstamp", "Unix seconds (a number)", tstamp)
    if not _TSTAMP_MIN <= tstamp <= _TSTAMP_MAX:
        return f"field 'tstamp': {show_value(tstamp)} is not a Unix time of the years 1-9999"
    return None


def read_single(obj: dict[str, Any]) -> _Single | str:
    """The fields of a single-answer line, type-checked; or why the line is unreadable."""
    try:
        qid, turn, judge, tstamp = obj["question_id"], obj["turn"], obj["judge"], obj["tstamp"]
        model, score = obj["model"], obj["score"]
    except KeyError as exc:
        return f"missing field {exc.args[0]!r}"
    kind_q, kind_t, kind_s = type(qid), type(tstamp), type(score)
    if (
        (kind_q is int or kind_q is str)
        and type(turn) is int
        and type(judge) is list
        and len(judge) == 2
        and type(judge[0]) is str
        and type(judge[1]) is str
        and (kind_t is float or kind_t is int)
        and _TSTAMP_MIN <= tstamp <= _TSTAMP_MAX
        and type(model) is str
        and (kind_s is int or kind_s is float)
    ):
        return f"{qid}-t{turn}", qid, turn, judge[0], judge[1], float(tstamp), model, score
    common = _common_error(obj)
    if common is not None:
        return common
    if type(model) is not str:
        return _wrong("model", "a string", model)
    return _wrong("score", "a number", score)


def read_pair(obj: dict[str, Any]) -> _Pair | str:
    """The fields of a pair line, type-checked; or why the line is unreadable."""
    try:
        qid, turn, judge, tstamp = obj["question_id"], obj["turn"], obj["judge"], obj["tstamp"]
        model_1, model_2, g1, g2 = (
            obj["model_1"],
            obj["model_2"],
            obj["g1_winner"],
            obj["g2_winner"],
        )
    except KeyError as exc:
        return f"missing field {exc.args[0]!r}"
    common = _common_error(obj)
    if common is not None:
        return common
    for name, value in (
        ("model_1", model_1),
        ("model_2", model_2),
        ("g1_winner", g1),
        ("g2_winner", g2),
    ):
        if type(value) is not str:
            return _wrong(name, "a string", value)
    return f"{qid}-t{turn}", qid, turn, judge[0], judge[1], float(tstamp), model_1, model_2, g1, g2


def unsupported_reason(obj: dict[str, Any]) -> str | None:
    """Why a pair line is of a kind this adapter does not read, if it is."""
    if "m1_score" in obj or "m2_score" in obj:
        return (
            "FastChat 'single as pair' line (m1_score/m2_score, no turn): each answer was "
            "scored alone and nothing was shown in either order; ingest the *_single.jsonl "
            "judgments instead"
        )
    if "g1_winner" not in obj and "g2_winner" not in obj and "winner" in obj:
        return "pair line with one 'winner' and no g1_winner/g2_winner: the shown order of its verdict is unknown"
    return None


def kind_of(obj: dict[str, Any]) -> str | None:
    if "model_1" in obj or "model_2" in obj:
        return "pair"
    if "model" in obj:
        return "single"
    return None


def other_kind(obj: dict[str, Any], kind: str) -> str:
    """Why a line that is not of the file's kind is unreadable."""
    found = kind_of(obj)
    if found is None:
        return (
            "missing field 'model'"
            if kind == "single"
            else "missing fields 'model_1' and 'model_2'"
        )
    if kind == "single":
        return "an MT-Bench pair line in a file of single-answer judgments (one file holds one protocol)"
    return "an MT-Bench single-answer line in a file of pairwise judgments (one file holds one protocol)"


def iso_time(tstamp: float) -> str:
    """ISO 8601 UTC with microseconds, as ``datetime.fromtimestamp(tstamp, UTC)`` rounds them (half to even)."""
    secs = int(tstamp)
    micros = round((tstamp - secs) * 1e6)
    if micros < 0:
        secs -= 1
        micros += 1_000_000
    elif micros >= 1_000_000:
        secs += 1
        micros -= 1_000_000
    minute = secs // 60
    prefix = _MINUTES.get(minute)
    if prefix is None:
        if len(_MINUTES) >= 65536:
            _MINUTES.clear()
        prefix = _MINUTES[minute] = (_EPOCH + timedelta(minutes=minute)).isoformat()[:17]
    return f"{prefix}{secs - minute * 60:02d}.{micros:06d}Z"


def single_length(prompt: Any) -> int | None:
    """Characters of the graded answer in a single-answer ``user_prompt``, where the layout is exact."""
    if type(prompt) is not str:
        return None
    if prompt.endswith(_S_END):
        if prompt.count(_S_START) != 1:
            return None
        return len(prompt) - len(_S_END) - prompt.index(_S_START) - len(_S_START)
    if prompt.endswith(_M_A_END):
        if prompt.count(_M_A) != 2 or prompt.count(_M_A_END) != 1:
            return None
        return len(prompt) - len(_M_A_END) - prompt.rindex(_M_A) - len(_M_A)
    return None


def pair_lengths(prompt: Any) -> tuple[int | None, int | None]:
    """Characters of the answers shown as A and B in a pair ``user_prompt``, where the layout is exact."""
    if type(prompt) is not str:
        return None, None
    if prompt.endswith(_P_B_END):
        if (prompt.count(_P_A_START), prompt.count(_P_A_END), prompt.count(_P_B_START)) != (
            1,
            1,
            1,
        ):
            return None, None
        a0 = prompt.index(_P_A_START) + len(_P_A_START)
        a1 = prompt.index(_P_A_END)
        b0 = prompt.index(_P_B_START) + len(_P_B_START)
        b1 = len(prompt) - len(_P_B_END)
    elif prompt.endswith(_M_B_END):
        counts = (
            prompt.count(_M_A),
            prompt.count(_M_B),
            prompt.count(_M_A_END),
            prompt.count(_M_B_END),
        )
        if counts != (2, 2, 1, 1):
            return None, None
        a0 = prompt.rindex(_M_A) + len(_M_A)
        a1 = prompt.index(_M_A_END)
        b0 = prompt.rindex(_M_B) + len(_M_B)
        b1 = len(prompt) - len(_M_B_END)
    else:
        return None, None
    if not a0 <= a1 < b0 <= b1:
        return None, None
    return a1 - a0, b1 - b0


def parse_line(raw: bytes) -> dict[str, Any] | str:
    try:
        obj = orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        return f"not a JSON object: {exc}"
    if type(obj) is not dict:
        return f"not a JSON object: a JSON {type(obj).__name__}"
    return obj


def records(source: SourceBytes) -> Iterator[tuple[int, bytes]]:
    """Non-blank lines, a UTF-8 byte-order mark taken off the first."""
    for number, raw in source.lines():
        if number == 1 and raw.startswith(BOM):
            raw = raw[len(BOM) :]
        if raw and not raw.isspace():
            yield number, raw


class Replicates:
    """Pass one: every key's distinct values; then the replicate of a (key, value)."""

    __slots__ = ("ranks", "seen")

    def __init__(self) -> None:
        self.seen: dict[int, Any] = {}  # hash of a key -> its one value, or the set of its values
        self.ranks: dict[int, dict[tuple[Any, ...], int]] = {}

    def add(self, key: int, value: tuple[Any, ...]) -> None:
        prev = self.seen.setdefault(key, value)
        if prev is value or prev == value:
            return
        if type(prev) is set:
            prev.add(value)
        else:
            self.seen[key] = {prev, value}

    def freeze(self) -> int:
        """Rank the values of every key seen with more than one; how many such keys."""
        self.ranks = {
            key: {value: rank for rank, value in enumerate(sorted(values))}
            for key, values in self.seen.items()
            if type(values) is set
        }
        self.seen = {}
        return len(self.ranks)


def first_pass(source: SourceBytes) -> tuple[str | None, Replicates]:
    """The file's kind (that of its first MT-Bench line) and the distinct values of every key.

    Reads exactly the lines the second pass reads as judgments of that kind,
    with the same checks, so every value the second pass looks up is there.
    """
    replicates = Replicates()
    add = replicates.add
    kind: str | None = None
    loads = orjson.loads
    for number, raw in source.lines():
        if number == 1 and raw.startswith(BOM):
            raw = raw[len(BOM) :]
        try:
            obj = loads(raw)
        except orjson.JSONDecodeError:
            continue
        if type(obj) is not dict:
            continue
        if kind is None:
            kind = kind_of(obj)
        if kind == "single":
            if "model_1" in obj or "model_2" in obj or "model" not in obj:
                continue
            single = read_single(obj)
            if type(single) is tuple:
                add(hash((single[0], single[6], single[3])), (single[5], single[7]))
        elif (
            kind == "pair" and ("model_1" in obj or "model_2" in obj) and unsupported_reason(obj) is None
        ):
            pair = read_pair(obj)
            if type(pair) is tuple:
                m1, m2 = pair[6], pair[7]
                lo, hi = (m1, m2) if m1 <= m2 else (m2, m1)
                add(hash((pair[0], lo, hi, pair[3])), (pair[5], m1, pair[8], pair[9]))
    return kind, replicates



def note_file(notes: AdapterNotes, kind: str | None, options: AdapterOptions, repeated: int) -> None:
    """What the report says about the file: its kind, the scale read, the keys judged more than once."""
    if kind == "single":
        notes.notes.append("mt-bench: single-answer grading, one pointwise judgment per line")
        if options.scale is None:
            notes.notes.append(
                "mt-bench: scores read on the scale 1-10 that FastChat's single prompts ask for "
                "(--scale to declare another); scores outside it are quarantined"
            )
    elif kind == "pair":
        notes.notes.append(
            "mt-bench: pairwise, two judgments per line (game 1 shows model_1 first, game 2 model_2)"
        )
    else:
        notes.notes.append("mt-bench: no line is an MT-Bench single or pair judgment")
    if repeated:
        notes.notes.append(
            f"mt-bench: {repeated} keys judged more than once, numbered as replicates in tstamp order"
        )


def single_reject(obj: dict[str, Any], score: Any, low: float, high: float) -> tuple[str, str] | None:
    """Why a single-answer judgment cannot be stored (``None``: it can)."""
    if score == NO_RATING:
        if obj.get("judgment") == API_ERROR_OUTPUT:
            return (
                JUDGE_CALL_FAILED,
                f"field 'judgment': {API_ERROR_OUTPUT!r}, the judge call failed (score -1)",
            )
        return (
            PARSE_FAILURE,
            f"field 'score': {score!r}, FastChat found no rating [[x]] in the judgment",
        )
    if not low <= score <= high:
        return (
            SCORE_OUT_OF_SCALE,
            f"field 'score': {score!r} is outside the scale {low:g}-{high:g}",
        )
    return None


