"""Arena-Hard-Auto ``model_judgment`` files (v0.1 and v2.0 layouts) as pairwise judgments.

Source of the format: lmarena/arena-hard-auto (``gen_judgment.py``, which writes
the files, and ``show_result.py``, which reads them), as described with real
samples in ``/work/shared/samples/arena_hard/README.md``. One JSON object a line:

- v0.1 (``data/arena-hard-v0.1/model_judgment/<judge>/<model>.jsonl``):
  ``{"question_id", "model", "judge", "games": [g0, g1]}``, each game
  ``{"user_prompt": str, "judgment": str, "score": str | null}``;
- v2.0 (``data/arena-hard-v2.0/model_judgment/<judge>/<model>.jsonl``):
  ``{"uid", "category", "judge", "model", "baseline", "games": [g0, g1]}``,
  each game ``{"score", "judgment": {"answer": str}, "prompt": [messages]}``.

Every record is two judgments, one per presentation order: game 0 shows the
baseline as Assistant A (``system_a`` = baseline, ``system_b`` = model), game 1
swaps them (``system_a`` = model, ``system_b`` = baseline). A game's ``score`` is
relative to the slots of that game (``A>>B``, ``A>B``, ``A=B``, ``B>A``,
``B>>A``) and is kept so, never mapped back to baseline/model: ``winner`` is
``"A"``, ``"tie"`` or ``"B"`` of the shown slots, ``strength`` (provenance) is 2
for ``>>``, 1 for ``>``, 0 for ``=``, and ``score_label`` the label as written.

Mapping of one game (``line`` is the 1-based line of the record; both games of
a record carry the same line and the same ``raw``, the whole source line):

==========================  =====================================================
column                      from
==========================  =====================================================
``item_set``                ``options.item_set``, else ``"arena-hard-v0.1"``;
                            v2.0: ``"arena-hard-v2.0/<category>"`` (upstream
                            reports v2.0 per category, each with its own
                            baseline), ``"arena-hard-v2.0"`` without a category
``item_id``                 v0.1 ``question_id``, v2.0 ``uid`` (an integer id is
                            written as text)
``system_a``/``system_b``   game 0: baseline/model; game 1: model/baseline
``judge_id``                ``judge``, as written (free text: it need not match
                            the judge folder)
``winner``                  ``A``/``tie``/``B`` from the score label, in the
                            game's own slots
``length_a``/``length_b``   characters of the two answers cut from the judge
                            prompt (v0.1 ``user_prompt``, v2.0 the ``prompt``
                            message holding them), between
                            ``<|The Start of Assistant X's Answer|>`` and
                            ``<|The End of Assistant X's Answer|>`` without the
                            template's newline on either side; ``None`` when the
                            game has no prompt or the markers are missing, and
                            for both games when the two prompts do not show the
                            same two answers swapped (see below)
``generation``              0: the format has no notion of it
``replicate``               0: Arena-Hard calls the judge once a game
``layout``                  ``"v0.1"`` or ``"v2.0"`` (provenance, as the rest)
``game``                    0 or 1
``strength``                2, 1 or 0 (``None`` for a rejected game)
``score_label``             the score as written (``None`` when null)
``question_id``             v0.1 only
``uid``, ``category``       v2.0 only
==========================  =====================================================

There is no timestamp in either layout. The v0.1 records do not name the
baseline (the judge configuration does): it is ``options.baseline``, else the
v0.1 default :data:`DEFAULT_V01_BASELINE` (``gpt-4-0314``), and ``notes.notes``
says which and whether it was assumed. A v2.0 record names its own
``baseline``, which is used (a differing ``options.baseline`` is reported as
not used).

Rejections (``reject=(reason, message)``, per game):

- a null score whose judgment text is only ``$ERROR$`` tokens (upstream's
  ``API_ERROR_OUTPUT``, one per failed attempt): ``JUDGE_CALL_FAILED``;
- any other null or absent score (no verdict label, or conflicting labels):
  ``PARSE_FAILURE``, saying so and how long the judgment was;
- a score that is not one of the five labels (``"A>>>B"``, ``"B=A"``,
  a number): ``PARSE_FAILURE`` naming the label (``show_result.py`` gives any
  other label weight 0).

A line that is not a record of the format (not JSON, e.g. a truncated last
line; not an object; ``question_id``/``uid``, ``model``, ``judge``, v2.0
``baseline`` or ``games`` absent or of the wrong type; ``games`` not a list of
exactly two objects) is :class:`~jurymeter.io.adapters.base.Unreadable` with a
message naming the field and what it held. Blank lines are not records and
are skipped.

Prompt consistency: upstream builds game 1's prompt from game 0's by swapping
the two answers, so game 0's A answer is game 1's B answer and vice versa. In
one of the sample files (a user's batch script, ``gpt-4o-batch``) the stored
prompts belong to other questions; when the two games' answers are not each
other's swap, neither game's lengths can be trusted and both are left empty
(the count and lines go to ``notes.notes``). A prompt from another question
that is still swap-consistent cannot be detected.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any, ClassVar

import orjson

from jurymeter.io.adapters.base import (
    JUDGE_CALL_FAILED,
    PARSE_FAILURE,
    Adapter,
    AdapterNotes,
    AdapterOptions,
    Judgment,
    SourceBytes,
    Unreadable,
    not_a_record,
)

DEFAULT_V01_BASELINE = "gpt-4-0314"
"""The baseline of Arena-Hard-Auto v0.1 (``config/judge_config.yaml``), assumed when none is given."""

V01_ITEM_SET = "arena-hard-v0.1"
V20_ITEM_SET = "arena-hard-v2.0"

# label -> (winner in the game's own slots, strength)
LABELS: dict[str, tuple[str, int]] = {
    "A>>B": ("A", 2),
    "A>B": ("A", 1),
    "A=B": ("tie", 0),
    "B>A": ("B", 1),
    "B>>A": ("B", 2),
}
_LABEL_LIST = ", ".join(LABELS)
_API_ERROR = "$ERROR$"

_A_START = "<|The Start of Assistant A's Answer|>"
_A_END = "<|The End of Assistant A's Answer|>"
_B_START = "<|The Start of Assistant B's Answer|>"
_B_END = "<|The End of Assistant B's Answer|>"

_BOM = b"\xef\xbb\xbf"
# A key is a quoted name followed by a colon; inside a JSON string a quote is escaped, so these
# match keys only. Used on a first line longer than the 64 KiB head (the judgments come last).
_GAMES_KEY = re.compile(rb'"games"\s*:')
_JUDGE_KEY = re.compile(rb'"judge"\s*:')
_ID_KEY = re.compile(rb'"(?:question_id|uid)"\s*:')
_NOTED_LINES = 10  # at most this many line numbers in a note


def _json_type(value: object) -> str:
    """The JSON name of a decoded value's type, for messages."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "an array"
    return "an object"


def _shown(value: object, limit: int = 80) -> str:
    """A value as a message shows it: its JSON text, cut at ``limit`` characters."""
    text = orjson.dumps(value).decode() if not isinstance(value, str) else repr(value)
    return text if len(text) <= limit else text[:limit] + "..."


def _answers(text: str) -> tuple[str, str] | None:
    r"""The two answers of a judge prompt (A's, B's), or ``None`` when its markers are missing.

    The template is ``...<|The Start of Assistant A's Answer|>\n{a}\n<|The End of
    Assistant A's Answer|>\n\n<|The Start of Assistant B's Answer|>\n{b}\n<|The End
    of Assistant B's Answer|>``: the first A start, the first A end after it, the
    first B start after that and the last B end; one newline is taken off each side.
    """
    i = text.find(_A_START)
    if i < 0:
        return None
    i += len(_A_START)
    j = text.find(_A_END, i)
    if j < 0:
        return None
    k = text.find(_B_START, j)
    if k < 0:
        return None
    k += len(_B_START)
    m = text.rfind(_B_END)
    if m < k:
        return None
    a = text[i:j].removeprefix("\n").removesuffix("\n")
    b = text[k:m].removeprefix("\n").removesuffix("\n")
    return a, b


def _prompt_answers(game: dict[str, Any]) -> tuple[str, str] | None:
    """The two answers shown in a game's judge prompt: v0.1 ``user_prompt``, v2.0 ``prompt`` messages."""
    prompt = game.get("user_prompt")
    if prompt is None:
        prompt = game.get("prompt")
    if isinstance(prompt, str):
        return _answers(prompt)
    if isinstance(prompt, list):
        for message in prompt:
            if isinstance(message, dict):
                content = message.get("content")
                if isinstance(content, str) and _A_START in content:
                    return _answers(content)
    return None


def _judgment_text(game: dict[str, Any]) -> str | None:
    """The judge's reply: v0.1 ``judgment`` (a string), v2.0 ``judgment.answer``."""
    judgment = game.get("judgment")
    if isinstance(judgment, str):
        return judgment
    if isinstance(judgment, dict):
        answer = judgment.get("answer")
        if isinstance(answer, str):
            return answer
    return None


def _rejection(game_index: int, game: dict[str, Any]) -> tuple[str, str]:
    """Why a game whose score is not one of the five labels is rejected."""
    if game.get("score") is None:
        return _null_score(game_index, game, "score" not in game)
    return (
        PARSE_FAILURE,
        f"games[{game_index}].score {_shown(game['score'])} is not one of the five "
        f"Arena-Hard labels {_LABEL_LIST}",
    )


def _null_score(game_index: int, game: dict[str, Any], absent: bool) -> tuple[str, str]:
    """Why a game without a score is rejected: a failed judge call, or no verdict in the reply."""
    where = f"games[{game_index}]"
    what = f"{where} has no score" if absent else f"{where}.score is null"
    text = _judgment_text(game)
    if text is None:
        return PARSE_FAILURE, f"{what} and no judgment text: no verdict to store"
    tokens = text.split()
    if tokens and all(token == _API_ERROR for token in tokens):
        return (
            JUDGE_CALL_FAILED,
            f"{what}: the judge call failed (judgment {text!r}: {len(tokens)} failed attempt(s))",
        )
    failed = f"; it also holds {_API_ERROR} (a follow-up call failed)" if _API_ERROR in text else ""
    return (
        PARSE_FAILURE,
        f"{what}: no verdict label [[A>>B]] ... [[B>>A]] was read from the judgment "
        f"({len(text)} chars; none found, or conflicting labels){failed}",
    )


class ArenaHardAdapter(Adapter):
    """Arena-Hard-Auto v0.1 and v2.0 ``model_judgment`` JSON Lines: two pairwise judgments a record.

    See the module docstring for the mapping, the baseline rule and the rejections.
    """

    name: ClassVar[str] = "arena-hard"
    suffixes: ClassVar[tuple[str, ...]] = (".jsonl",)

    def detect(self, head: bytes, path: str) -> bool:
        """Whether the first record has ``games``, ``judge`` and ``question_id`` (v0.1) or ``uid`` (v2.0).

        The first non-blank line is parsed when it ends within ``head``; a longer
        one (the judgments come after the short keys) is recognised by its keys.
        MT-Bench records have no ``games``; canonical records neither.
        """
        head = head.removeprefix(_BOM).lstrip()
        if not head.startswith(b"{"):
            return False
        first, newline, _ = head.partition(b"\n")
        try:
            record = orjson.loads(first)
        except orjson.JSONDecodeError:
            if newline:  # a whole line that is not JSON
                return False
            return bool(
                _GAMES_KEY.search(first) and _JUDGE_KEY.search(first) and _ID_KEY.search(first)
            )
        return (
            isinstance(record, dict)
            and "games" in record
            and "judge" in record
            and ("question_id" in record or "uid" in record)
        )

    def judgments(
        self, source: SourceBytes, options: AdapterOptions, notes: AdapterNotes
    ) -> Iterator[Judgment | Unreadable]:
        """Two judgments per record line (game 0, game 1), in file order; see the module docstring."""
        v01_baseline = options.baseline or DEFAULT_V01_BASELINE
        v01_noted = False
        v20_noted: set[str] = set()
        inconsistent: list[int] = []
        for line, data in source.lines():
            if line == 1:
                data = data.removeprefix(_BOM)
            if not data.strip():
                continue
            try:
                record = orjson.loads(data)
            except orjson.JSONDecodeError as exc:
                yield not_a_record(line, data, f"not a JSON object (a truncated or corrupt line?): {exc}")
                continue
            raw = data.decode("utf-8")  # orjson accepted it, so it is UTF-8
            if not isinstance(record, dict):
                yield Unreadable(
                    line, raw, f"{_json_type(record)}, not an Arena-Hard record (a JSON object)"
                )
                continue
            header = _header(record)
            if isinstance(header, str):
                yield Unreadable(line, raw, header)
                continue
            layout, item_id, model, judge, baseline, category, games = header
            if layout == "v0.1":
                baseline = v01_baseline
                base: dict[str, Any] = {
                    "item_set": options.item_set or V01_ITEM_SET,
                    "item_id": item_id,
                    "judge_id": judge,
                    "generation": 0,
                    "replicate": 0,
                    "layout": layout,
                    "question_id": item_id,
                }
                if not v01_noted:
                    v01_noted = True
                    notes.notes.append(_v01_note(options.baseline))
            else:
                assert baseline is not None
                base = {
                    "item_set": options.item_set
                    or (f"{V20_ITEM_SET}/{category}" if category else V20_ITEM_SET),
                    "item_id": item_id,
                    "judge_id": judge,
                    "generation": 0,
                    "replicate": 0,
                    "layout": layout,
                    "uid": item_id,
                    "category": category,
                }
                if baseline not in v20_noted:
                    v20_noted.add(baseline)
                    notes.notes.append(_v20_note(baseline, options.baseline))
            yield from _games(line, raw, base, games, baseline, model, inconsistent)
        if inconsistent:
            shown_lines = ", ".join(map(str, inconsistent[:_NOTED_LINES]))
            more = ", ..." if len(inconsistent) > _NOTED_LINES else ""
            notes.notes.append(
                f"{len(inconsistent)} record(s) whose two games' prompts do not show the same two "
                f"answers swapped (the stored prompts cannot both be the record's): length_a and "
                f"length_b left empty for them (lines {shown_lines}{more})"
            )


def _games(
    line: int,
    raw: str,
    base: dict[str, Any],
    games: list[dict[str, Any]],
    baseline: str,
    model: str,
    inconsistent: list[int],
) -> Iterator[Judgment]:
    """A record's two judgments (game 0: baseline in slot A; game 1: swapped); a record whose
    prompts do not show the same two answers swapped is added to ``inconsistent``."""
    game0, game1 = games
    shown0 = _prompt_answers(game0)
    shown1 = _prompt_answers(game1)
    if shown0 is not None and shown1 is not None and (
        shown0[0] != shown1[1] or shown0[1] != shown1[0]
    ):
        inconsistent.append(line)
        shown0 = shown1 = None
    for index, game, shown, system_a, system_b in (
        (0, game0, shown0, baseline, model),
        (1, game1, shown1, model, baseline),
    ):
        fields = {
            **base,
            "system_a": system_a,
            "system_b": system_b,
            "game": index,
            "length_a": None if shown is None else len(shown[0]),
            "length_b": None if shown is None else len(shown[1]),
        }
        score = game.get("score")
        verdict = LABELS.get(score) if type(score) is str else None
        if verdict is not None:
            fields["winner"] = verdict[0]
            fields["strength"] = verdict[1]
            fields["score_label"] = score
            yield Judgment(line, "pairwise", fields, raw)
        else:
            fields["strength"] = None
            fields["score_label"] = (
                score if score is None or isinstance(score, str) else _shown(score)
            )
            yield Judgment(line, "pairwise", fields, raw, reject=_rejection(index, game))


_Header = tuple[str, str, str, str, str | None, str | None, list[dict[str, Any]]]


def _header(record: dict[str, Any]) -> _Header | str:
    """``(layout, item_id, model, judge, baseline, category, games)`` of a record, or why it is none."""
    if "uid" in record:
        layout, id_key = "v2.0", "uid"
    elif "question_id" in record:
        layout, id_key = "v0.1", "question_id"
    else:
        return "no question_id (v0.1) or uid (v2.0): not an Arena-Hard judgment record"
    item_id = record[id_key]
    if type(item_id) is not str:
        if not isinstance(item_id, int) or isinstance(item_id, bool):
            return f"{id_key} is {_json_type(item_id)} ({_shown(item_id)}), expected a string"
        item_id = str(item_id)
    model = record.get("model")
    judge = record.get("judge")
    baseline = record.get("baseline") if layout == "v2.0" else None
    category = record.get("category") if layout == "v2.0" else None
    games = record.get("games")
    if (
        type(model) is not str
        or type(judge) is not str
        or (layout == "v2.0" and type(baseline) is not str)
        or (category is not None and type(category) is not str)
        or type(games) is not list
        or len(games) != 2
        or type(games[0]) is not dict
        or type(games[1]) is not dict
    ):
        return _header_problem(record, layout, f"{layout} record {id_key} {item_id!r}")
    return layout, item_id, model, judge, baseline, category, games


def _header_problem(record: dict[str, Any], layout: str, where: str) -> str:
    """What is wrong with a record's fields (``_header`` found something wrong)."""
    keys = ("model", "judge", "baseline") if layout == "v2.0" else ("model", "judge")
    for key in keys:
        if key not in record:
            return f"{where} has no {key}"
        value = record[key]
        if not isinstance(value, str):
            return f"{where}: {key} is {_json_type(value)} ({_shown(value)}), expected a string"
    category = record.get("category") if layout == "v2.0" else None
    if category is not None and not isinstance(category, str):
        return f"{where}: category is {_json_type(category)} ({_shown(category)}), expected a string"
    if "games" not in record:
        return f"{where} has no games (the two judgments)"
    games = record["games"]
    if not isinstance(games, list):
        return (
            f"{where}: games is {_json_type(games)} ({_shown(games)}), expected a list of two games"
        )
    if len(games) != 2:
        return (
            f"{where}: games holds {len(games)} game(s), expected 2 "
            "(game 0 shows the baseline as A, game 1 the model as A)"
        )
    for index, game in enumerate(games):
        if not isinstance(game, dict):
            return f"{where}: games[{index}] is {_json_type(game)} ({_shown(game)}), expected an object"
    return f"{where}: not an Arena-Hard judgment record"  # unreachable: _header found a problem


def _v01_note(given: str | None) -> str:
    """What the report says about the v0.1 baseline (the records do not name it)."""
    if given:
        return (
            f"arena-hard v0.1 records name no baseline: {given!r} from options.baseline is "
            "system_a of game 0 and system_b of game 1"
        )
    return (
        f"arena-hard v0.1 records name no baseline: {DEFAULT_V01_BASELINE!r} assumed (the "
        "Arena-Hard-Auto v0.1 default) as system_a of game 0 and system_b of game 1; set "
        "options.baseline if the judge configuration named another"
    )


def _v20_note(baseline: str, given: str | None) -> str:
    """What the report says about a v2.0 baseline (named by the records)."""
    note = f"arena-hard v2.0 records name their baseline: {baseline!r}"
    if given and given != baseline:
        note += f" (options.baseline {given!r} is not used for v2.0 records)"
    return note


ARENA_HARD = ArenaHardAdapter()
