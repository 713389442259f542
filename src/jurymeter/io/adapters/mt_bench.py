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
instead (:func:`single_frames`): the same judgments, rejects, messages and
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

from collections.abc import Generator, Iterator
from typing import Any, ClassVar

import orjson

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
from jurymeter.io.adapters.mt_bench_columns import single_frames
from jurymeter.io.adapters.mt_bench_lines import (
    API_ERROR_OUTPUT,
    DEFAULT_SCALE,
    GAME_1,
    GAME_2,
    HEAD_LINE,
    ITEM_SET,
    JUDGE_LIST,
    LABELS,
    UNKNOWN_WINNER,
    first_pass,
    iso_time,
    kind_of,
    note_file,
    other_kind,
    pair_lengths,
    parse_line,
    read_pair,
    read_single,
    records,
    show_value,
    single_length,
    single_reject,
    unsupported_reason,
)
from jurymeter.io.source_files import BOM


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
        if head.startswith(BOM):
            head = head[len(BOM) :]
        for line in head.split(b"\n"):
            line = line.strip()
            if not line:
                continue
            obj = parse_line(line)
            if isinstance(obj, str):
                return HEAD_LINE.match(line) is not None and JUDGE_LIST.search(line) is not None
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
        kind, replicates = first_pass(source)
        repeated = replicates.freeze()
        item_set = options.item_set or ITEM_SET
        note_file(notes, kind, options, repeated)
        if kind == "single":
            yield from _singles(source, item_set, options.scale or DEFAULT_SCALE, replicates.ranks)
        elif kind == "pair":
            yield from _pairs(source, item_set, replicates.ranks)
        else:
            for number, raw in records(source):
                obj = parse_line(raw)
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
        """A single-answer file as blocks of columns (see :func:`single_frames`); ``None`` for any other file."""
        if _kind_of_file(source) != "single":
            return None
        return single_frames(source, options, notes, batch_judgments)



def _singles(
    source: SourceBytes,
    item_set: str,
    scale: tuple[float, float],
    ranks: dict[int, dict[tuple[Any, ...], int]],
) -> Iterator[Judgment | Unreadable]:
    low, high = scale
    loads = orjson.loads
    for number, raw in source.lines():  # records(source), inlined: this loop is the hot one
        if number == 1 and raw.startswith(BOM):
            raw = raw[len(BOM) :]
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
            yield Unreadable(number, text, other_kind(obj, "single"))
            continue
        single = read_single(obj)
        if isinstance(single, str):
            yield Unreadable(number, text, single)
            continue
        item_id, qid, turn, judge_id, prompt, tstamp, model, score = single
        reject = single_reject(obj, score, low, high)
        rank = ranks.get(hash((item_id, model, judge_id))) if ranks else None
        fields: dict[str, Any] = {
            "item_set": item_set,
            "item_id": item_id,
            "system_id": model,
            "judge_id": judge_id,
            "score": float(score),
            "generation": 0,
            "replicate": 0 if rank is None else rank.get((tstamp, score), 0),
            "timestamp": iso_time(tstamp),
            "response_length": single_length(obj.get("user_prompt")),
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
        return UNKNOWN_WINNER, f"field {name!r}: {show_value(label)} is not one of {LABELS}"
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
    for number, raw in records(source):
        text = raw.decode("utf-8", "replace")
        obj = parse_line(raw)
        if isinstance(obj, str):
            yield not_a_record(number, raw, obj)
            continue
        if kind_of(obj) != "pair":
            yield Unreadable(number, text, other_kind(obj, "pair"))
            continue
        unsupported = unsupported_reason(obj)
        if unsupported is not None:
            for game in (1, 2):
                fields: dict[str, Any] = {"item_set": item_set, "game": game}
                yield Judgment(number, "pairwise", fields, text, (UNSUPPORTED_RECORD, unsupported))
            continue
        pair = read_pair(obj)
        if isinstance(pair, str):
            yield Unreadable(number, text, pair)
            continue
        item_id, qid, turn, judge_id, prompt, tstamp, m1, m2, g1, g2 = pair
        lo, hi = (m1, m2) if m1 <= m2 else (m2, m1)
        rank = ranks.get(hash((item_id, lo, hi, judge_id))) if ranks else None
        replicate = 0 if rank is None else rank.get((tstamp, m1, g1, g2), 0)
        timestamp = iso_time(tstamp)
        len_1, len_2 = pair_lengths(obj.get("g1_user_prompt"))
        for game, label, slots, first, second, length_a, length_b in (
            (1, g1, GAME_1, m1, m2, len_1, len_2),
            (2, g2, GAME_2, m2, m1, len_2, len_1),
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



def _kind_of_file(source: SourceBytes) -> str | None:
    """The file's kind as :func:`first_pass` decides it (its first line that reads as one), reading no further."""
    lines = source.lines()
    try:
        for number, raw in lines:
            if number == 1 and raw.startswith(BOM):
                raw = raw[len(BOM) :]
            try:
                obj = orjson.loads(raw)
            except orjson.JSONDecodeError:
                continue
            if type(obj) is dict:
                kind = kind_of(obj)
                if kind is not None:
                    return kind
        return None
    finally:
        if isinstance(lines, Generator):
            lines.close()



MT_BENCH = MtBenchAdapter()
