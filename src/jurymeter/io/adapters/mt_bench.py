r"""MT-Bench judgment logs, as FastChat's ``llm_judge`` writes them (``<judge>_single.jsonl``, ``<judge>_pair.jsonl``).

Sources: FastChat's ``fastchat/llm_judge/common.py`` (``play_a_match_single``,
``play_a_match_pair``, ``run_judge_single``, ``run_judge_pair``) and
``fastchat/llm_judge/data/judge_prompts.jsonl`` (lm-sys/FastChat); the sample
files and their README in ``shared/samples/mt_bench/``.

One JSON object per line (``line`` below is the 1-based line number). A file
holds either single-answer grading or pairwise judgments, never both: the first
line that reads as either kind decides, and a line of the other kind is
:class:`~jurymeter.io.adapters.base.Unreadable` (one file holds one protocol).

Single-answer grading (``*_single.jsonl``) -> pointwise, one judgment per line
------------------------------------------------------------------------------
=================  ==========================================================
canonical column   from
=================  ==========================================================
``item_set``       ``options.item_set``, else ``"mt-bench"``
``item_id``        ``f"{question_id}-t{turn}"`` (the item is a question's turn:
                   turn 2 grades the second answer given the whole dialogue)
``system_id``      ``model``
``judge_id``       ``judge[0]`` (the judge model; the list is
                   ``[judge model, prompt name]``)
``score``          ``score`` as a float
``generation``     0 (MT-Bench judges one answer per model and question)
``replicate``      rank of the judgment among the re-runs of its key (below)
``timestamp``      ``tstamp`` (Unix seconds) as ISO 8601 UTC, microseconds
``response_length``  characters of the graded answer, cut out of ``user_prompt``
                   (below), else ``None``
=================  ==========================================================

Provenance columns: ``question_id`` and ``turn`` (as written, numbers stay
numbers), ``judge_prompt`` (``judge[1]``: ``single-v1``,
``single-math-v1-multi-turn``, ...), ``tstamp`` (the raw Unix float). The
judge's reply (``judgment``) and the prompt (``user_prompt``) are not stored: a
rejected line keeps them in its ``raw`` text.

Rejects: ``score == -1`` is FastChat's "no rating found" (``run_judge_single``
starts from ``rating = -1``): :data:`~jurymeter.io.adapters.base.PARSE_FAILURE`,
except when the reply is FastChat's ``API_ERROR_OUTPUT`` (``"$ERROR$"``, every
retry of the API call failed), which is
:data:`~jurymeter.io.adapters.base.JUDGE_CALL_FAILED`. A score outside the
declared scale (``options.scale``, else 1-10, the range every FastChat single
prompt asks for) is ``score_out_of_scale``: the ``0`` that FastChat's fallback
regex ``\[(\d+\.?\d*)\]`` reads out of code such as ``array[0]``.

Pairwise (``*_pair.jsonl``) -> pairwise, two judgments per line
---------------------------------------------------------------
Game 1 showed ``model_1`` as Assistant A, game 2 swapped the answers; FastChat
has already mapped both verdicts back to model names (``g1_map``/``g2_map``).

=================  ==========================================================
canonical column   game 1 / game 2
=================  ==========================================================
``item_id``        ``f"{question_id}-t{turn}"`` (both games)
``system_a``       ``model_1`` / ``model_2`` (the answer shown first)
``system_b``       ``model_2`` / ``model_1``
``winner``         ``g1_winner``: model_1 -> "A", model_2 -> "B", tie -> "tie" /
                   ``g2_winner``: model_1 -> "B", model_2 -> "A", tie -> "tie"
``judge_id``       ``judge[0]``
``replicate``      as for single (both games of a line share it)
``length_a``,      characters of the two answers as game 1 showed them, cut
``length_b``       out of ``g1_user_prompt`` (game 2 takes them swapped), else
                   ``None``
=================  ==========================================================

Provenance: ``question_id``, ``turn``, ``judge_prompt`` (``judge[1]``),
``game`` (1 or 2), ``tstamp``; ``timestamp`` and ``item_set`` as for single.

Rejects: ``error`` is what ``run_judge_pair`` gives when it finds no ``[[A]]``,
``[[B]]`` or ``[[C]]`` in the reply. When that reply is ``"$ERROR$"`` the judge
call failed (JUDGE_CALL_FAILED); otherwise the judge did reply and no verdict
could be read (PARSE_FAILURE). A winner label that is none of ``model_1``,
``model_2``, ``tie``, ``error`` is ``unknown_winner``.

FastChat's "single as pair" mode (a ``single`` prompt run through
``play_a_match_pair``) writes lines with ``m1_score``/``m2_score``, one
``winner`` copied into both games, and no ``turn``: each answer was scored
alone, so nothing was shown in either order, and two pairwise judgments with
shown orders would be invented (and perfectly position-consistent). Both
judgments of such a line are rejected with
:data:`~jurymeter.io.adapters.base.UNSUPPORTED_RECORD`; the same goes for an
older line with one ``winner`` and no ``g1_winner``/``g2_winner``.

Replicates
----------
A key judged more than once (lesnikow's files append re-runs) gets its
judgments numbered by distinct value in ``tstamp`` order, replicate 0 being the
earliest: the value is ``(tstamp, score)`` for single and ``(tstamp, model_1,
g1_winner, g2_winner)`` for pair. Byte-identical lines (and any two with the
same tstamp and value) share a number, so the store keeps one and drops the
exact re-delivery as a duplicate. The key is the canonical one less the
constant item set: ``(item_id, model, judge[0])`` for single, ``(item_id,
{model_1, model_2}, judge[0])`` for pair, so that a line listing the two
models in the other order cannot collide with the swapped game of another.
Rejected judgments are numbered too (a replicate is which judge call it was).
This needs the whole file's keys: :meth:`MtBenchAdapter.judgments` reads
``source.lines()`` twice (the same checks both times), the first time keeping
only the hash of each key and its distinct values: memory grows with the
number of distinct keys (about 220 bytes each), not with the lines' text. Two
keys whose 64-bit hashes collided would share one numbering: gaps in their
numbers, never one number for two values of a key.

Columns
-------
For a single-answer file the ingest reads :meth:`MtBenchAdapter.frames`
instead (:func:`_single_frames`): the same judgments, rejects, messages and
batches as typed columns, from one parse of the file rather than two. Each
batch's columns (no prompt or judgment text: about 350 bytes a judgment, the
raw text of the rejected ones included) wait in a temporary Arrow file while
the rest of the file is read, with each judgment's key hash (8 bytes) in
memory; the keys on more than one line are then ranked and the batches read
back with their replicates. Memory is one batch and the hashes, never the
file. ``tests/test_adapters_frames.py``
holds it to :meth:`MtBenchAdapter.judgments`.

Answer lengths
--------------
Cut only where the prompt has the exact layout of FastChat's templates, so
that an answer that quotes a template marker gives ``None``, never a wrong
length: ``single-v1``/``single-math-v1`` end with ``"\n[The End of Assistant's
Answer]"`` and hold ``"[The Start of Assistant's Answer]\n"`` once;
``*-multi-turn`` end with ``"\n\n<|The End of Assistant A's Conversation with
User|>"``, hold it once and hold ``"\n\n### Assistant A:\n"`` exactly twice
(the graded answer follows the second). Pair prompts likewise (each Assistant
A/B marker exactly once; for multi-turn the second ``### Assistant A:`` and
``### Assistant B:``). For turn 2 the length is that of the second answer, the
one the judge was asked to grade.

Unreadable: a line that is not a JSON object (a truncated line), a missing
required field (``question_id``, ``turn``, ``judge``, ``tstamp``, ``model``
and ``score``, or ``model_1``, ``model_2``, ``g1_winner``, ``g2_winner``), a
wrong type (``score: "nine"``, a ``judge`` that is not a two-string list, a
non-string winner), a ``tstamp`` no date can hold. A pair line that cannot be
read is one :class:`~jurymeter.io.adapters.base.Unreadable` (its two judgments
are not known), so for pair ``judgments = 2 x readable lines``. Blank lines are
skipped.
"""

from __future__ import annotations

import itertools
import os
import re
import tempfile
from collections.abc import Callable, Generator, Iterator
from datetime import UTC, datetime, timedelta
from typing import Any, ClassVar, Final

import numpy as np
import orjson
import polars as pl

from jurymeter.io.adapters.base import (
    JUDGE_CALL_FAILED,
    PARSE_FAILURE,
    UNSUPPORTED_RECORD,
    AdaptedFrame,
    Adapter,
    AdapterNotes,
    AdapterOptions,
    Judgment,
    SourceBytes,
    Unreadable,
    not_a_record,
)
from jurymeter.io.source_files import LineSplitter

ITEM_SET: Final = "mt-bench"
DEFAULT_SCALE: Final = (1.0, 10.0)  # every FastChat single prompt: "on a scale of 1 to 10"
API_ERROR_OUTPUT: Final = "$ERROR$"  # fastchat.llm_judge.common.API_ERROR_OUTPUT
NO_RATING: Final = -1  # run_judge_single's score when no [[rating]] was found
SCORE_OUT_OF_SCALE: Final = "score_out_of_scale"  # io.schema.Reason
UNKNOWN_WINNER: Final = "unknown_winner"  # io.schema.Reason

# FastChat's verdicts (already mapped back to model names) -> the slot that model was shown in.
_GAME_1: Final = {"model_1": "A", "model_2": "B", "tie": "tie"}
_GAME_2: Final = {"model_1": "B", "model_2": "A", "tie": "tie"}
_LABELS: Final = "model_1, model_2, tie, error"

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
_HEAD_LINE: Final = re.compile(rb'^\{"question_id":\s*[^,]{1,200},\s*"model(?:_1)?":\s*"')
_JUDGE_LIST: Final = re.compile(rb'"judge":\s*\[\s*"')
_BOM: Final = b"\xef\xbb\xbf"
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


def _show(value: Any) -> str:
    text = orjson.dumps(value).decode()
    return text if len(text) <= _SHOWN else text[: _SHOWN - 3] + "..."


def _wrong(name: str, expected: str, value: Any) -> str:
    return f"field {name!r}: expected {expected}, got {_show(value)}"


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
        return f"field 'tstamp': {_show(tstamp)} is not a Unix time of the years 1-9999"
    return None


def _read_single(obj: dict[str, Any]) -> _Single | str:
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


def _read_pair(obj: dict[str, Any]) -> _Pair | str:
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


def _unsupported(obj: dict[str, Any]) -> str | None:
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


def _kind(obj: dict[str, Any]) -> str | None:
    if "model_1" in obj or "model_2" in obj:
        return "pair"
    if "model" in obj:
        return "single"
    return None


def _other_kind(obj: dict[str, Any], kind: str) -> str:
    """Why a line that is not of the file's kind is unreadable."""
    found = _kind(obj)
    if found is None:
        return (
            "missing field 'model'"
            if kind == "single"
            else "missing fields 'model_1' and 'model_2'"
        )
    if kind == "single":
        return "an MT-Bench pair line in a file of single-answer judgments (one file holds one protocol)"
    return "an MT-Bench single-answer line in a file of pairwise judgments (one file holds one protocol)"


def _iso(tstamp: float) -> str:
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


def _single_length(prompt: Any) -> int | None:
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


def _pair_lengths(prompt: Any) -> tuple[int | None, int | None]:
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


def _parse(raw: bytes) -> dict[str, Any] | str:
    try:
        obj = orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        return f"not a JSON object: {exc}"
    if type(obj) is not dict:
        return f"not a JSON object: a JSON {type(obj).__name__}"
    return obj


def _records(source: SourceBytes) -> Iterator[tuple[int, bytes]]:
    """Non-blank lines, a UTF-8 byte-order mark taken off the first."""
    for number, raw in source.lines():
        if number == 1 and raw.startswith(_BOM):
            raw = raw[len(_BOM) :]
        if raw and not raw.isspace():
            yield number, raw


class _Replicates:
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


def _first_pass(source: SourceBytes) -> tuple[str | None, _Replicates]:
    """The file's kind (that of its first MT-Bench line) and the distinct values of every key.

    Reads exactly the lines the second pass reads as judgments of that kind,
    with the same checks, so every value the second pass looks up is there.
    """
    replicates = _Replicates()
    add = replicates.add
    kind: str | None = None
    loads = orjson.loads
    for number, raw in source.lines():
        if number == 1 and raw.startswith(_BOM):
            raw = raw[len(_BOM) :]
        try:
            obj = loads(raw)
        except orjson.JSONDecodeError:
            continue
        if type(obj) is not dict:
            continue
        if kind is None:
            kind = _kind(obj)
        if kind == "single":
            if "model_1" in obj or "model_2" in obj or "model" not in obj:
                continue
            single = _read_single(obj)
            if type(single) is tuple:
                add(hash((single[0], single[6], single[3])), (single[5], single[7]))
        elif (
            kind == "pair" and ("model_1" in obj or "model_2" in obj) and _unsupported(obj) is None
        ):
            pair = _read_pair(obj)
            if type(pair) is tuple:
                m1, m2 = pair[6], pair[7]
                lo, hi = (m1, m2) if m1 <= m2 else (m2, m1)
                add(hash((pair[0], lo, hi, pair[3])), (pair[5], m1, pair[8], pair[9]))
    return kind, replicates


class MtBenchAdapter(Adapter):
    """FastChat ``llm_judge`` MT-Bench judgments: single-answer grading and pairwise (see the module)."""

    name: ClassVar[str] = "mt-bench"
    suffixes: ClassVar[tuple[str, ...]] = (".jsonl",)

    def detect(self, head: bytes, path: str) -> bool:
        """Whether the first non-blank line is an MT-Bench single or pair judgment.

        The line is parsed when the head holds all of it: a JSON object with
        ``question_id``, a ``judge`` list of two strings, and ``model`` and
        ``score`` (single) or ``model_1`` and ``model_2`` (pair). A first line
        longer than the head is recognised by FastChat's key order
        (``{"question_id": ..., "model": "`` or ``"model_1": "``) and a
        ``"judge": ["`` list. Arena-Hard-Auto lines, which also start with
        ``question_id`` and ``model``, have a string ``judge``.
        """
        if head.startswith(_BOM):
            head = head[len(_BOM) :]
        for line in head.split(b"\n"):
            line = line.strip()
            if not line:
                continue
            obj = _parse(line)
            if isinstance(obj, str):
                return _HEAD_LINE.match(line) is not None and _JUDGE_LIST.search(line) is not None
            judge = obj.get("judge")
            if "question_id" not in obj or type(judge) is not list or len(judge) != 2:
                return False
            if not all(type(part) is str for part in judge):
                return False
            return ("model" in obj and "score" in obj) or ("model_1" in obj and "model_2" in obj)
        return False

    def judgments(
        self, source: SourceBytes, options: AdapterOptions, notes: AdapterNotes
    ) -> Iterator[Judgment | Unreadable]:
        """Every judgment of an MT-Bench file, in file order (two passes over ``source.lines()``)."""
        kind, replicates = _first_pass(source)
        repeated = replicates.freeze()
        item_set = options.item_set or ITEM_SET
        _note(notes, kind, options, repeated)
        if kind == "single":
            yield from _singles(source, item_set, options.scale or DEFAULT_SCALE, replicates.ranks)
        elif kind == "pair":
            yield from _pairs(source, item_set, replicates.ranks)
        else:
            for number, raw in _records(source):
                obj = _parse(raw)
                message = (
                    obj
                    if isinstance(obj, str)
                    else "not an MT-Bench judgment (no 'model' nor 'model_1')"
                )
                yield Unreadable(number, raw.decode("utf-8", "replace"), message)


    def frames(
        self,
        source: SourceBytes,
        options: AdapterOptions,
        notes: AdapterNotes,
        *,
        batch_judgments: int,
    ) -> Iterator[AdaptedFrame] | None:
        """A single-answer file as blocks of columns (see :func:`_single_frames`); ``None`` for any other file."""
        if _kind_of_file(source) != "single":
            return None
        return _single_frames(source, options, notes, batch_judgments)


def _note(notes: AdapterNotes, kind: str | None, options: AdapterOptions, repeated: int) -> None:
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


def _single_reject(obj: dict[str, Any], score: Any, low: float, high: float) -> tuple[str, str] | None:
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


def _singles(
    source: SourceBytes,
    item_set: str,
    scale: tuple[float, float],
    ranks: dict[int, dict[tuple[Any, ...], int]],
) -> Iterator[Judgment | Unreadable]:
    low, high = scale
    loads = orjson.loads
    for number, raw in source.lines():  # _records(source), inlined: this loop is the hot one
        if number == 1 and raw.startswith(_BOM):
            raw = raw[len(_BOM) :]
        if not raw or raw.isspace():
            continue
        text = raw.decode("utf-8", "replace")
        try:
            obj = loads(raw)
        except orjson.JSONDecodeError as exc:
            yield not_a_record(number, raw, f"not a JSON object: {exc}")
            continue
        if type(obj) is not dict:
            yield Unreadable(number, text, f"not a JSON object: a JSON {type(obj).__name__}")
            continue
        if "model_1" in obj or "model_2" in obj or "model" not in obj:
            yield Unreadable(number, text, _other_kind(obj, "single"))
            continue
        single = _read_single(obj)
        if isinstance(single, str):
            yield Unreadable(number, text, single)
            continue
        item_id, qid, turn, judge_id, prompt, tstamp, model, score = single
        reject = _single_reject(obj, score, low, high)
        rank = ranks.get(hash((item_id, model, judge_id))) if ranks else None
        fields: dict[str, Any] = {
            "item_set": item_set,
            "item_id": item_id,
            "system_id": model,
            "judge_id": judge_id,
            "score": float(score),
            "generation": 0,
            "replicate": 0 if rank is None else rank.get((tstamp, score), 0),
            "timestamp": _iso(tstamp),
            "response_length": _single_length(obj.get("user_prompt")),
            "question_id": qid,
            "turn": turn,
            "judge_prompt": prompt,
            "tstamp": obj["tstamp"],
        }
        yield Judgment(number, "pointwise", fields, text, reject)


def _verdict(obj: dict[str, Any], game: int, label: str) -> tuple[str, str]:
    """The reject of a game whose winner label is not a verdict."""
    name = f"g{game}_winner"
    if label != "error":
        return UNKNOWN_WINNER, f"field {name!r}: {_show(label)} is not one of {_LABELS}"
    if obj.get(f"g{game}_judgment") == API_ERROR_OUTPUT:
        return (
            JUDGE_CALL_FAILED,
            f"field {name!r}: 'error', g{game}_judgment is {API_ERROR_OUTPUT!r} (the judge call failed)",
        )
    return (
        PARSE_FAILURE,
        f"field {name!r}: 'error', no verdict [[A]], [[B]] or [[C]] in g{game}_judgment",
    )


def _pairs(
    source: SourceBytes, item_set: str, ranks: dict[int, dict[tuple[Any, ...], int]]
) -> Iterator[Judgment | Unreadable]:
    for number, raw in _records(source):
        text = raw.decode("utf-8", "replace")
        obj = _parse(raw)
        if isinstance(obj, str):
            yield not_a_record(number, raw, obj)
            continue
        if _kind(obj) != "pair":
            yield Unreadable(number, text, _other_kind(obj, "pair"))
            continue
        unsupported = _unsupported(obj)
        if unsupported is not None:
            for game in (1, 2):
                fields: dict[str, Any] = {"item_set": item_set, "game": game}
                yield Judgment(number, "pairwise", fields, text, (UNSUPPORTED_RECORD, unsupported))
            continue
        pair = _read_pair(obj)
        if isinstance(pair, str):
            yield Unreadable(number, text, pair)
            continue
        item_id, qid, turn, judge_id, prompt, tstamp, m1, m2, g1, g2 = pair
        lo, hi = (m1, m2) if m1 <= m2 else (m2, m1)
        rank = ranks.get(hash((item_id, lo, hi, judge_id))) if ranks else None
        replicate = 0 if rank is None else rank.get((tstamp, m1, g1, g2), 0)
        timestamp = _iso(tstamp)
        len_1, len_2 = _pair_lengths(obj.get("g1_user_prompt"))
        for game, label, slots, first, second, length_a, length_b in (
            (1, g1, _GAME_1, m1, m2, len_1, len_2),
            (2, g2, _GAME_2, m2, m1, len_2, len_1),
        ):
            winner = slots.get(label)
            fields = {
                "item_set": item_set,
                "item_id": item_id,
                "system_a": first,
                "system_b": second,
                "judge_id": judge_id,
                "winner": winner,
                "generation": 0,
                "replicate": replicate,
                "timestamp": timestamp,
                "length_a": length_a,
                "length_b": length_b,
                "question_id": qid,
                "turn": turn,
                "judge_prompt": prompt,
                "game": game,
                "tstamp": obj["tstamp"],
            }
            reject = None if winner is not None else _verdict(obj, game, label)
            yield Judgment(number, "pairwise", fields, text, reject)


# ---------------------------------------------------------------- single-answer files as columns

# A judgment's replicate key and value, as the Judgment path's pass one has them: the 64-bit hash
# of (item_id, model, judge model), tstamp, score, and the exact rest of an integer score that a
# float does not hold (Python compares int and float exactly: (t, 2**53 + 1) > (t, 2.0**53)).
_H: Final = "__h"
_T: Final = "__t"
_S: Final = "__s"
_R: Final = "__r"
_VALUE: Final = [_H, _T, _S, _R]
_LINE: Final = "__line"
_RAW: Final = "__raw"
_EXACT: Final = 2**53  # integers up to this size are exact as floats
_PROVENANCE: Final = ("question_id", "turn", "judge_prompt", "tstamp")
_REJECT_REASON: Final = "_reject_reason"  # io.adapters.reading.REJECT_REASON
_REJECT_MESSAGE: Final = "_reject_message"  # io.adapters.reading.REJECT_MESSAGE


def _kind_of_file(source: SourceBytes) -> str | None:
    """The file's kind as :func:`_first_pass` decides it (its first line that reads as one), reading no further."""
    lines = source.lines()
    try:
        for number, raw in lines:
            if number == 1 and raw.startswith(_BOM):
                raw = raw[len(_BOM) :]
            try:
                obj = orjson.loads(raw)
            except orjson.JSONDecodeError:
                continue
            if type(obj) is dict:
                kind = _kind(obj)
                if kind is not None:
                    return kind
        return None
    finally:
        if isinstance(lines, Generator):
            lines.close()


def _single_frames(
    source: SourceBytes, options: AdapterOptions, notes: AdapterNotes, batch_judgments: int
) -> Iterator[AdaptedFrame]:
    """A single-answer file as column blocks: exactly what :func:`_singles` gives, in the same batches.

    One parse of the file instead of two: the lines are read once (orjson, as
    :func:`_singles` does, with the same checks, rejects and messages), each
    batch's columns go to a temporary Arrow file, and every judgment's key hash
    stays in memory (8 bytes a line). When the file is read, the values of the
    keys on more than one line are read back from those files and ranked
    (:data:`_VALUE` sorted as Python sorts ``(tstamp, score)``), and the
    batches are read back with their replicates. Memory holds one batch and the
    hashes, never the file; the temporary files hold the batches' columns
    without the prompt or judgment text (about 350 bytes a judgment) and are
    removed batch by batch.

    A plain local file of at least :data:`PARALLEL_BYTES` on a machine with
    more than one core is parsed in ranges of lines, by this thread and by
    worker processes (orjson holds the GIL), see :func:`_parallel_pieces`; the
    pieces are then cut into the same batches.
    """
    item_set = options.item_set or ITEM_SET
    low, high = options.scale or DEFAULT_SCALE
    with tempfile.TemporaryDirectory(prefix="jurymeter-mt-bench-") as spill:
        workers = _parallel_workers(source)
        if workers:
            pieces = _parallel_pieces(source, workers, low, high, spill, batch_judgments)
        else:
            pieces = [(0, _scan(source.line_blocks(), 1, low, high, batch_judgments, spill, "", source.check))]
        hashes = [h for _, scanned in pieces for _, _, h in scanned if h is not None]
        ranks = _ranks(hashes, [path for _, scanned in pieces for path, _, _ in scanned if path is not None])
        hashes.clear()
        _note(notes, "single", options, ranks[_H].n_unique() if ranks.height else 0)
        if not workers:  # the batches as they were spilled
            for path, bad, _ in pieces[0][1]:
                unread = [Unreadable(*row) for row in _read_back(bad).iter_rows()] if bad is not None else []
                if path is None:
                    yield AdaptedFrame(pl.DataFrame(), np.zeros(0, dtype=np.int64), lambda rows: [], unread)
                else:
                    yield _adapted(source, _read_back(path), ranks, item_set, unread)
            return
        for frame, unread in _recut(pieces, batch_judgments):
            if not frame.height:
                yield AdaptedFrame(pl.DataFrame(), np.zeros(0, dtype=np.int64), lambda rows: [], unread)
            else:
                yield _adapted(source, frame, ranks, item_set, unread)


# Spilled pieces of a scan: (judgments' Arrow file, unreadable lines' Arrow file, the judgments' key hashes).
_Piece = tuple[str | None, str | None, np.ndarray | None]

PARALLEL_BYTES = 256 * 1024 * 1024  # a smaller file is parsed by one thread
RANGE_BYTES = 32 * 1024 * 1024  # the ranges of lines the parallel parse hands out
MAX_WORKERS = 3  # worker processes at most (beside the reading thread)
_READ_BYTES: Final = 8 * 1024 * 1024  # io.adapters.reading.READ_BYTES


def _scan(
    blocks: Iterator[tuple[int, list[bytes]]],
    bom_line: int,
    low: float,
    high: float,
    batch_judgments: int,
    spill: str,
    prefix: str,
    check: Callable[[], None] | None = None,
) -> list[_Piece]:
    """Parse lines as :func:`_singles` does and spill them every ``batch_judgments`` judgments and unreadable lines.

    ``blocks`` as ``SourceBytes.line_blocks`` gives them (line numbers as
    counted from the first line of ``blocks``); a byte-order mark is taken off
    line ``bom_line`` only (0: none). ``check`` runs before each block.
    """
    loads, dumps, decode_error = orjson.loads, orjson.dumps, orjson.JSONDecodeError
    lines: list[int] = []
    items: list[str] = []
    qids: list[str] = []
    turns: list[str] = []
    models: list[str] = []
    judges: list[str] = []
    prompts: list[str] = []
    scores: list[float] = []
    stamps: list[float] = []
    stamp_texts: list[str] = []
    lengths: list[int | None] = []
    rejects: dict[int, tuple[str, str]] = {}
    raws: dict[int, str] = {}
    rests: dict[int, int] = {}
    unreadable: list[Unreadable] = []
    written: list[_Piece] = []  # each batch's judgments, unreadable lines and key hashes

    def flush() -> None:
        path = bad = hashes = None
        name = f"{prefix}{len(written):06d}"
        if lines:
            frame = _block_frame(
                lines, items, qids, turns, models, judges, prompts, scores, stamps,
                stamp_texts, lengths, rejects, raws, rests,
            )
            hashes = frame[_H].to_numpy()
            path = os.path.join(spill, f"{name}.arrow")
            frame.write_ipc(path)
        if unreadable:
            bad = os.path.join(spill, f"{name}-unreadable.arrow")
            pl.DataFrame(
                [(u.line, u.raw, u.message, u.reason) for u in unreadable],
                schema={"line": pl.Int64, "raw": pl.String, "message": pl.String, "reason": pl.String},
                orient="row",
            ).write_ipc(bad)
        written.append((path, bad, hashes))
        for column in (lines, items, qids, turns, models, judges, prompts, scores, stamps, stamp_texts, lengths):
            column.clear()
        for sparse in (rejects, raws, rests):
            sparse.clear()
        unreadable.clear()

    for first, block in blocks:
        if check is not None:
            check()
        number = first - 1
        for raw in block:  # the loop of _singles, writing columns
            number += 1
            if len(lines) + len(unreadable) >= batch_judgments:
                flush()
            if number == bom_line and raw.startswith(_BOM):
                raw = raw[len(_BOM) :]
            if not raw or raw.isspace():
                continue
            try:
                obj = loads(raw)
            except decode_error as exc:
                unreadable.append(not_a_record(number, raw, f"not a JSON object: {exc}"))
                continue
            if type(obj) is not dict:
                message = f"not a JSON object: a JSON {type(obj).__name__}"
                unreadable.append(Unreadable(number, raw.decode("utf-8", "replace"), message))
                continue
            if "model_1" in obj or "model_2" in obj or "model" not in obj:
                unreadable.append(Unreadable(number, raw.decode("utf-8", "replace"), _other_kind(obj, "single")))
                continue
            single = _read_single(obj)
            if isinstance(single, str):
                unreadable.append(Unreadable(number, raw.decode("utf-8", "replace"), single))
                continue
            item_id, qid, turn, judge_id, prompt, tstamp, model, score = single
            row = len(lines)
            reject = _single_reject(obj, score, low, high)
            if reject is not None:
                rejects[row] = reject
                raws[row] = raw.decode("utf-8", "replace")
            elif not model or not judge_id:  # validation will reject it: keep its text at hand
                raws[row] = raw.decode("utf-8", "replace")
            if type(score) is int and not -_EXACT <= score <= _EXACT:
                rests[row] = score - int(float(score))
            written_stamp = obj["tstamp"]
            lines.append(number)
            items.append(item_id)
            qids.append(qid if type(qid) is str else str(qid))
            turns.append(str(turn))
            models.append(model)
            judges.append(judge_id)
            prompts.append(prompt)
            scores.append(float(score))
            stamps.append(tstamp)
            stamp_texts.append(dumps(written_stamp).decode() if type(written_stamp) is float else str(written_stamp))
            lengths.append(_single_length(obj.get("user_prompt")))
    if lines or unreadable:
        flush()
    return written


def _parallel_workers(source: SourceBytes) -> int:
    """Worker processes to parse ``source`` beside this thread (0: parse it here alone)."""
    import multiprocessing

    path = source.local_file()
    if path is None or multiprocessing.current_process().daemon:  # a daemonic process has no children
        return 0
    try:
        if os.path.getsize(path) < PARALLEL_BYTES:
            return 0
    except OSError:
        return 0
    return max(0, min(len(os.sched_getaffinity(0)) - 1, MAX_WORKERS))


def _ranges(path: str, size: int) -> list[tuple[int, int]]:
    """Byte ranges of about :data:`RANGE_BYTES` that cover the file, each ending after a newline (or at its end)."""
    bounds = [0]
    with open(path, "rb") as handle:
        while bounds[-1] + RANGE_BYTES < size:
            handle.seek(bounds[-1] + RANGE_BYTES - 1)
            while True:
                chunk = handle.read(64 * 1024)
                if not chunk:
                    break
                newline = chunk.find(b"\n")
                if newline >= 0:
                    break
            if not chunk:
                break
            end = handle.tell() - len(chunk) + newline + 1
            if end >= size:
                break
            bounds.append(end)
    bounds.append(size)
    return list(itertools.pairwise(bounds))


def _range_blocks(path: str, start: int, end: int) -> Iterator[tuple[int, list[bytes]]]:
    """The lines of ``path``'s bytes ``start`` to ``end`` as ``FileBytes.line_blocks`` splits them, numbered from 1."""
    splitter = LineSplitter()
    with open(path, "rb") as handle:
        handle.seek(start)
        yield from splitter.split(_range_reads(handle, end - start))
    rest = splitter.unfinished()
    if rest:
        yield splitter.next_line, [rest.rstrip(b"\r\n")]


def _range_reads(handle: Any, left: int) -> Iterator[bytes]:
    """The next ``left`` bytes of ``handle`` in blocks of at most :data:`_READ_BYTES`."""
    while left > 0:
        block = handle.read(min(_READ_BYTES, left))
        if not block:
            return
        left -= len(block)
        yield block


def _scan_range(
    path: str, start: int, end: int, low: float, high: float, batch_judgments: int, spill: str, unit: int
) -> tuple[int, list[_Piece]]:
    """One range of lines parsed and spilled (in any process): its count of lines and its pieces."""
    count = 0

    def counted() -> Iterator[tuple[int, list[bytes]]]:
        nonlocal count
        for first, block in _range_blocks(path, start, end):
            count = first - 1 + len(block)
            yield first, block

    pieces = _scan(counted(), 1 if start == 0 else 0, low, high, batch_judgments, spill, f"r{unit:05d}-")
    return count, pieces


def _parallel_pieces(
    source: SourceBytes, workers: int, low: float, high: float, spill: str, batch_judgments: int
) -> list[tuple[int, list[_Piece]]]:
    """Every range's pieces with the number of lines before the range, in file order.

    This thread parses a range whenever the worker processes have two queued
    each (the processes start in about a second); ``source.check`` runs between
    ranges (a cancelled read stops there, once the ranges being parsed are done).
    """
    import multiprocessing
    from concurrent.futures import Future, ProcessPoolExecutor

    path = source.local_file()
    assert path is not None
    ranges = _ranges(path, os.path.getsize(path))
    done: dict[int, tuple[int, list[_Piece]]] = {}
    queued: dict[int, Future[tuple[int, list[_Piece]]]] = {}
    pool = ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("spawn"))
    try:
        unit = 0
        while unit < len(ranges) or queued:
            source.check()
            for k in [k for k, future in queued.items() if future.done()]:
                done[k] = queued.pop(k).result()
            while unit < len(ranges) and len(queued) < 2 * workers:  # a range ready for each when it is done
                start, end = ranges[unit]
                queued[unit] = pool.submit(_scan_range, path, start, end, low, high, batch_judgments, spill, unit)
                unit += 1
            if unit < len(ranges):
                start, end = ranges[unit]
                done[unit] = _scan_range(path, start, end, low, high, batch_judgments, spill, unit)
                unit += 1
            elif queued:
                k = min(queued)
                done[k] = queued.pop(k).result()
    finally:
        pool.shutdown(wait=True, cancel_futures=True)
    out: list[tuple[int, list[_Piece]]] = []
    before = 0
    for k in range(len(ranges)):
        count, pieces = done[k]
        out.append((before, pieces))
        before += count
    return out


def _recut(
    pieces: list[tuple[int, list[_Piece]]], batch_judgments: int
) -> Iterator[tuple[pl.DataFrame, list[Unreadable]]]:
    """The spilled ranges read back in file order and cut into batches of ``batch_judgments`` lines as one scan cuts.

    A batch holds the next ``batch_judgments`` judgments and unreadable lines
    in line order; its reject columns are there when one of its judgments is
    rejected (as :func:`_block_frame` writes them).
    """
    frames: list[pl.DataFrame] = []
    unread: list[Unreadable] = []
    held = 0

    def cut(last: bool) -> Iterator[tuple[pl.DataFrame, list[Unreadable]]]:
        nonlocal frames, unread, held
        while held >= batch_judgments or (last and held):
            frame = pl.concat(frames, how="diagonal") if len(frames) > 1 else frames[0] if frames else pl.DataFrame()
            at_f = frame[_LINE].to_numpy() if frame.height else np.zeros(0, dtype=np.int64)
            at_u = np.asarray([u.line for u in unread], dtype=np.int64)
            take = min(held, batch_judgments)
            end = np.sort(np.concatenate([at_f, at_u]))[take - 1]
            kf, ku = int(np.searchsorted(at_f, end, "right")), int(np.searchsorted(at_u, end, "right"))
            batch = frame.slice(0, kf)
            if _REJECT_REASON in batch.columns and batch[_REJECT_REASON].null_count() == batch.height:
                batch = batch.drop(_REJECT_REASON, _REJECT_MESSAGE)
            yield batch, unread[:ku]
            frames = [frame.slice(kf)] if kf < frame.height else []
            unread = unread[ku:]
            held -= kf + ku

    for before, scanned in pieces:
        for path, bad, _ in scanned:
            if path is not None:
                frame = _read_back(path)
                frames.append(frame.with_columns(pl.col(_LINE) + before) if before else frame)
                held += frame.height
            if bad is not None:
                back = _read_back(bad)
                unread.extend(Unreadable(line + before, raw, message, reason)
                              for line, raw, message, reason in back.iter_rows())
                held += back.height
            yield from cut(last=False)
    yield from cut(last=True)


def _read_back(path: str) -> pl.DataFrame:
    """A spilled frame, read whole (not mapped) and its file removed."""
    with open(path, "rb") as handle:
        frame = pl.read_ipc(handle.read())
    os.remove(path)
    return frame


def _block_frame(
    lines: list[int],
    items: list[str],
    qids: list[str],
    turns: list[str],
    models: list[str],
    judges: list[str],
    prompts: list[str],
    scores: list[float],
    stamps: list[float],
    stamp_texts: list[str],
    lengths: list[int | None],
    rejects: dict[int, tuple[str, str]],
    raws: dict[int, str],
    rests: dict[int, int],
) -> pl.DataFrame:
    """One batch's judgments: typed canonical columns, provenance text, rejects, raw text, key and value."""
    n = len(lines)
    t = np.asarray(stamps, dtype=np.float64)
    # _iso(tstamp), as microseconds: datetime.fromtimestamp's rounding (half to even).
    secs = np.trunc(t)
    micros = np.round((t - secs) * 1e6)
    below, above = micros < 0, micros >= 1_000_000
    secs = np.where(below, secs - 1, np.where(above, secs + 1, secs))
    micros = np.where(below, micros + 1_000_000, np.where(above, micros - 1_000_000, micros))
    timestamp = secs.astype(np.int64) * 1_000_000 + micros.astype(np.int64)
    rest = np.zeros(n, dtype=np.int64)
    for row, value in rests.items():
        rest[row] = value
    columns: dict[str, Any] = {
        "item_id": pl.Series(items, dtype=pl.String),
        "system_id": pl.Series(models, dtype=pl.String),
        "judge_id": pl.Series(judges, dtype=pl.String),
        "score": pl.Series(scores, dtype=pl.Float64),
        "timestamp": pl.Series(timestamp).cast(pl.Datetime("us", "UTC")),
        "response_length": pl.Series(lengths, dtype=pl.Int64),
        "question_id": pl.Series(qids, dtype=pl.String),
        "turn": pl.Series(turns, dtype=pl.String),
        "judge_prompt": pl.Series(prompts, dtype=pl.String),
        "tstamp": pl.Series(stamp_texts, dtype=pl.String),
    }
    if rejects:
        reasons: list[str | None] = [None] * n
        messages: list[str | None] = [None] * n
        for row, (reason, message) in rejects.items():
            reasons[row], messages[row] = reason, message
        columns[_REJECT_REASON] = pl.Series(reasons, dtype=pl.String)
        columns[_REJECT_MESSAGE] = pl.Series(messages, dtype=pl.String)
    texts: list[str | None] = [None] * n
    for row, text in raws.items():
        texts[row] = text
    columns[_LINE] = pl.Series(lines, dtype=pl.Int64)
    columns[_RAW] = pl.Series(texts, dtype=pl.String)
    # +0.0: -0.0 and 0.0 are one value, as in Python.
    columns[_T] = pl.Series(t + 0.0)
    columns[_S] = pl.Series(np.asarray(scores, dtype=np.float64) + 0.0)
    columns[_R] = pl.Series(rest)
    frame = pl.DataFrame(columns)
    return frame.with_columns(pl.struct("item_id", "system_id", "judge_id").hash(seed=0).alias(_H))


def _ranks(hashes: list[np.ndarray], paths: list[str]) -> pl.DataFrame:
    """Replicate of every value of a key with more than one value: its rank in the key's sorted values.

    The hashes of keys on more than one line are found by sorting all the
    hashes (numpy, 8 bytes a judgment); only those keys' values are read back
    from the batches' files.
    """
    everything = np.sort(np.concatenate(hashes)) if hashes else np.zeros(0, dtype=np.uint64)
    again = np.unique(everything[1:][everything[1:] == everything[:-1]])
    del everything
    schema = {_H: pl.UInt64, _T: pl.Float64, _S: pl.Float64, _R: pl.Int64}
    if not len(again):
        return pl.DataFrame(schema={**schema, "replicate": pl.Int64})
    wanted = pl.DataFrame({_H: pl.Series(again, dtype=pl.UInt64)})
    values = pl.concat(
        [pl.read_ipc(path, columns=_VALUE).join(wanted, on=_H, how="semi") for path in paths]
    ).unique()
    repeated = values.filter(pl.len().over(_H) > 1).sort(_VALUE)
    return repeated.with_columns(pl.int_range(pl.len(), dtype=pl.Int64).over(_H).alias("replicate"))


def _adapted(
    source: SourceBytes, frame: pl.DataFrame, ranks: pl.DataFrame, item_set: str, bad: list[Unreadable]
) -> AdaptedFrame:
    """A batch read back: the columns :func:`_singles`'s judgments become, in their order, typed."""
    if ranks.height:
        frame = frame.join(ranks, on=_VALUE, how="left", maintain_order="left")
        replicate = pl.col("replicate").fill_null(0)
    else:
        replicate = pl.lit(0, dtype=pl.Int64)
    rejected = [_REJECT_REASON, _REJECT_MESSAGE] if _REJECT_REASON in frame.columns else []
    out = frame.select(
        pl.lit(item_set, dtype=pl.String).alias("item_set"),
        "item_id",
        "system_id",
        "judge_id",
        "score",
        pl.lit(0, dtype=pl.Int64).alias("generation"),
        replicate.alias("replicate"),
        "timestamp",
        "response_length",
        *_PROVENANCE,
        *rejected,
    )
    lines = frame[_LINE].to_numpy()
    texts = frame[_RAW]

    def raw(rows: np.ndarray) -> list[str]:
        kept: list[str | None] = texts.gather(rows).to_list()
        wanted = {int(lines[k]) for k, text in zip(rows, kept, strict=True) if text is None}
        found = _reread(source, wanted) if wanted else {}
        return [found[int(lines[k])] if text is None else text for k, text in zip(rows, kept, strict=True)]

    return AdaptedFrame(out, lines, raw, bad)


def _reread(source: SourceBytes, wanted: set[int]) -> dict[int, str]:
    """The text of some lines, read again (only a judgment validation rejects that the adapter did not)."""
    found: dict[int, str] = {}
    for number, raw in source.lines():
        if number in wanted:
            if number == 1 and raw.startswith(_BOM):
                raw = raw[len(_BOM) :]
            found[number] = raw.decode("utf-8", "replace")
            if len(found) == len(wanted):
                break
    return found


MT_BENCH = MtBenchAdapter()
