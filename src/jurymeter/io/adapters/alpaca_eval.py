"""AlpacaEval ``annotations.json``: one pairwise judgment per element, against the reference generator.

Format source: tatsu-lab/alpaca_eval (Apache-2.0), the files under
``results/<model>/<annotator>/annotations.json``, described field by field in
``/work/shared/samples/alpaca_eval/README.md``. A file is one JSON array (pandas'
``to_json(orient="records", indent=2)``); each element is an object with
``instruction``, ``output_1``/``generator_1`` (the **reference** system: its answer and
name), ``output_2``/``generator_2`` (the evaluated system), ``dataset``,
``annotator``, ``preference`` and, depending on the annotator and the AlpacaEval
version, ``price_per_example``, ``time_per_example``, ``raw_completion``,
``referenced_models`` and ``id``.

Mapping
-------
``line`` is the 1-based index of the element in the array (there is no line
structure worth keeping: the file is indented JSON); ``raw`` is the element
re-serialised by :func:`orjson.dumps`.

==================  ====================================================================
column              value
==================  ====================================================================
``item_set``        ``options.item_set`` or ``"alpaca-eval"``
``item_id``         ``str(id)`` when the element has an ``id`` (a row index, in some
                    files only), else :data:`instruction_hash` of ``instruction``
``system_a``        the generator shown first when ``referenced_models`` records it,
                    else ``generator_1`` (the reference)
``system_b``        the other generator
``judge_id``        ``annotator``: the annotator **configuration** name (for example
                    ``alpaca_eval_gpt4_turbo_fn``), not a model name; the model is set
                    in that configuration's ``configs.yaml``
``winner``          ``A``/``B``/``tie`` from ``preference`` (below 1.5: ``output_1``
                    won; above: ``output_2``; 1.5 or 0: a tie), oriented to A
``preference``      P(A wins): AlpacaEval's value is 1 + P(``output_2`` better), so
                    P(``output_1`` wins) = 2 - value, and 1 - that when ``output_2``
                    was shown first; 0.5 for identical outputs
``length_a``,       ``len`` (characters) of the outputs of ``system_a`` / ``system_b``
``length_b``
``generation``,     0 (the format has neither notion)
``replicate``
==================  ====================================================================

Provenance columns (stored as text): ``preference_raw`` (the value as written:
int, float or whatever arrived), ``order_known`` (bool: whether ``system_a`` is
the output shown first, from ``referenced_models``), ``tie_kind``
(``"identical_outputs"``, ``"judged"`` or null), ``dataset``, ``annotator``,
``reference_system`` (``generator_1``, which ``system_a`` need not be),
``instruction_hash`` (always, so that files with and without ``id`` can be
joined on the instruction), ``price_per_example`` and ``time_per_example``
(a list or an object where these hold a scalar is kept as its JSON text).
There are no timestamps in the format.

The shown order
---------------
AlpacaEval randomises the presentation order per instruction and maps
``preference`` back to ``output_1``/``output_2`` before writing, so the order
shown is lost except in the files whose annotator adds ``referenced_models``
(the ``*_cot_*`` configurations, through ``ChainOfThoughtProcessor``). The
prompt template of those configurations
(``evaluators_configs/alpaca_eval_cot_gpt4_turbo_fn/alpaca_eval_fn.txt``)
labels the first output it shows ``"m"`` and the second ``"M"`` (its
``ranking_parser`` is configured with ``model_1_name: "m"``), and
``referenced_models`` maps each label to the column it stood for **after** the
order was undone (the rank-1 label maps to ``output_<preference>`` in every
element of the sample). Hence the rule: **the output shown first is
``referenced_models["m"]``**; ``system_a`` is its generator and ``order_known``
is true. Without ``referenced_models`` (null, absent, or a value that does not
map ``m`` and ``M`` to the two different outputs), ``system_a`` is
``generator_1`` and ``order_known`` is false; a ``referenced_models`` that is
present but unreadable is counted in the notes. The order is never guessed from
``raw_completion`` (the ``weighted_*`` logprobs and the ``v3_cot`` rankings are
in shown-label terms and could give it, but that is not what the format
records).

The three encodings of ``preference``
-------------------------------------
int ``0``/``1``/``2`` (old ``alpaca_eval_gpt4`` files; 0 means the two outputs
are identical and were not judged), float ``1.0``/``1.5``/``2.0`` (``*_fn``
files), a continuous float in [1, 2] (``weighted_*`` files). ``0``, and ``1.5``
with null ``price_per_example`` and ``time_per_example`` (no judge call was
made), are ties with ``tie_kind`` ``"identical_outputs"``; any other 1.5 is a
tie the judge gave (``"judged"``).

What is rejected
----------------
- a document that is not JSON (a truncated file): one :class:`Unreadable` for
  the whole file, line 1, with the parser's message (a file that only the
  standard library reads, with ``NaN``, is read by it);
- a document that is not an array, an element that is not an object, a missing
  field (``instruction``, ``output_1``, ``output_2``, ``generator_1``,
  ``generator_2``, ``annotator``, ``preference``), a field of the wrong type
  (the texts and names must be strings, ``id`` an integer or a string):
  :class:`Unreadable`;
- a null (or NaN) ``preference``: ``JUDGE_CALL_FAILED`` when
  ``price_per_example``, ``time_per_example`` and ``raw_completion`` are null
  or absent too (the call failed), else ``PARSE_FAILURE`` (the judge answered
  and nothing could be read from it);
- a ``preference`` that is not a number (``"two"``, ``true``) or is outside 0
  and [1, 2] (``3.0``): ``PARSE_FAILURE``, naming the value.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
import re
from collections.abc import Iterator
from typing import Any, ClassVar

import orjson

from jurymeter.io.adapters.base import (
    INVALID_TEXT,
    JUDGE_CALL_FAILED,
    PARSE_FAILURE,
    TRUNCATED,
    Adapter,
    AdapterNotes,
    AdapterOptions,
    Judgment,
    SourceBytes,
    Unreadable,
)

ITEM_SET = "alpaca-eval"
_BOM = b"\xef\xbb\xbf"
_REQUIRED = (
    "instruction",
    "output_1",
    "output_2",
    "generator_1",
    "generator_2",
    "annotator",
    "preference",
)
_TEXTS = ("instruction", "output_1", "output_2", "generator_1", "generator_2", "annotator")
# A complete JSON string, a lone quote (a string the head cuts), or a structural byte.
_TOKEN = re.compile(rb'"(?:[^"\\]|\\.)*"|"|[{}\[\]:]')
_WHITESPACE = b" \t\r\n"


def instruction_hash(instruction: str) -> str:
    """The item id of an element without ``id``: the first 16 hex digits of SHA-256 of the UTF-8 instruction."""
    return hashlib.sha256(instruction.encode("utf-8", "surrogatepass")).hexdigest()[:16]


def _kind(value: object) -> str:
    return "null" if value is None else type(value).__name__


def _describe(value: object) -> str:
    """``null`` or ``<type> <repr>`` (cut at 60 characters), for a message that names the value."""
    return "null" if value is None else f"{type(value).__name__} {value!r:.60}"


def _is_null(value: object) -> bool:
    """None, or NaN (what pandas means by null; only a file Python's ``json`` wrote holds it)."""
    return value is None or (isinstance(value, float) and math.isnan(value))


def _scalar(value: object) -> object:
    """``value`` when it is a scalar, else its JSON text (provenance columns hold scalars)."""
    if value is None or isinstance(value, str | int | float):
        return value
    return _raw(value)


def _raw(element: object) -> str:
    try:
        return orjson.dumps(element).decode("utf-8")
    except orjson.JSONEncodeError:  # an integer beyond 64 bits, read by Python's json
        return json.dumps(element, ensure_ascii=False)


class AlpacaEvalAdapter(Adapter):
    """AlpacaEval ``annotations.json`` (see the module docstring for the mapping)."""

    name: ClassVar[str] = "alpaca-eval"
    suffixes: ClassVar[tuple[str, ...]] = (".json",)

    def detect(self, head: bytes, path: str) -> bool:
        """A JSON array whose first element has the keys ``preference`` and ``generator_1``.

        ``head`` may end inside the document, even inside the first element: its
        top-level keys are read with a string-aware scan, not a JSON parse. When
        the head ends before the first element does (outputs longer than the
        head), ``generator_1`` with ``output_1`` or ``preference`` is enough.
        """
        start = len(_BOM) if head.startswith(_BOM) else 0
        while start < len(head) and head[start] in _WHITESPACE:
            start += 1
        if start >= len(head) or head[start] != ord("["):
            return False
        keys: set[bytes] = set()
        depth = 0
        previous = b""
        for match in _TOKEN.finditer(head, start + 1):
            token = match.group()
            if depth == 0:
                if token != b"{":  # an empty array, or an array of something else
                    return False
                depth = 1
            elif token == b'"':  # a string the head cuts: the element goes on beyond it
                break
            elif token in (b"{", b"["):
                depth += 1
            elif token in (b"}", b"]"):
                depth -= 1
                if depth == 0:
                    return b'"preference"' in keys and b'"generator_1"' in keys
            elif token == b":" and depth == 1 and previous.startswith(b'"'):
                keys.add(previous)
            previous = token
        return b'"generator_1"' in keys and bool(keys & {b'"preference"', b'"output_1"'})

    def judgments(
        self, source: SourceBytes, options: AdapterOptions, notes: AdapterNotes
    ) -> Iterator[Judgment | Unreadable]:
        """One pairwise judgment per element of the array, or why it cannot be read or stored."""
        data = source.read()
        if data.startswith(_BOM):
            data = data[len(_BOM) :]
        cut: Unreadable | None = None
        checked = False  # orjson read it: no string holds invalid UTF-8 or a lone surrogate
        try:
            document: Any = orjson.loads(data)
            checked = True
        except orjson.JSONDecodeError as exc:
            # Undecodable bytes become lone surrogates: an element holding one is invalid_text.
            text = data.decode("utf-8", "surrogateescape")
            try:  # Python's json.dump writes NaN, which orjson refuses
                document = json.loads(text)
            except (ValueError, RecursionError):
                document, cut = _elements_before_cut(text, f"{exc}")
                if document is None:
                    yield Unreadable(1, _safe(text), f"not a JSON document: {exc}")
                    return
        if not isinstance(document, list):
            text = data.decode("utf-8", "backslashreplace")
            yield Unreadable(
                1, text, f"the document is a JSON {_kind(document)}, not an array of annotations"
            )
            return
        item_set = options.item_set or ITEM_SET
        known = unreadable_order = 0
        annotators: set[str] = set()
        for index, element in enumerate(document, start=1):
            raw = _raw(element)
            if not isinstance(element, dict):
                yield Unreadable(index, raw, f"element {index} is a {_kind(element)}, not an object")
                continue
            problem = _structure(element)
            if problem is not None:
                yield Unreadable(index, raw, f"element {index}: {problem}")
                continue
            shown_first, readable = _shown_first(element.get("referenced_models"))
            if shown_first is not None:
                known += 1
            elif not readable:
                unreadable_order += 1
            annotators.add(element["annotator"])
            judgment = _judgment(index, raw, element, item_set, shown_first)
            bad = [] if checked else [key for key, value in element.items() if not _is_text(key, value)]
            if bad:
                message = f"element {index}: " + ", ".join(repr(_safe(k)) for k in bad) + (
                    " not valid text (invalid UTF-8 bytes or an unpaired surrogate escape)"
                )
                judgment = Judgment(index, "pairwise", judgment.fields, raw, (INVALID_TEXT, message))
            yield judgment
        if cut is not None:
            yield dataclasses.replace(cut, line=len(document) + 1)
        _notes(notes, source.path, len(document), known, unreadable_order, annotators)


_DECODER = json.JSONDecoder()
_RAW_CAP = 65536  # characters of a cut element kept as its raw text


def _safe(text: str) -> str:
    """``text`` with lone surrogates escaped (what a quarantine can store)."""
    return text.encode("utf-8", "backslashreplace").decode("utf-8")


def _is_text(key: str, value: object) -> bool:
    """Whether a field's name and every string in its value are valid text (no lone surrogate)."""
    try:
        json.dumps({key: value}, ensure_ascii=False).encode("utf-8")
    except (UnicodeEncodeError, ValueError, TypeError):
        return False
    return True


def _elements_before_cut(text: str, error: str) -> tuple[list[Any] | None, Unreadable | None]:
    """The complete elements of an array cut (or broken) inside one, and the cut one.

    ``(None, None)`` when the text is no JSON array at all. The cut element is
    ``truncated`` when the text ends inside it, else ``malformed_line``: in
    both cases it and any after it are not read.
    """
    pos = _skip(text, 0)
    if not text.startswith("[", pos):
        return None, None
    elements: list[Any] = []
    pos = _skip(text, pos + 1)
    while True:
        start = pos
        try:
            element, pos = _DECODER.raw_decode(text, pos)
        except (ValueError, RecursionError) as exc:
            at = getattr(exc, "pos", len(text))
            ended = at >= len(text.rstrip()) or str(exc).startswith("Unterminated string")
            message = (
                f"the JSON array is {'cut' if ended else 'invalid'} inside element {len(elements) + 1} "
                f"(char {start}): {exc}; the {len(elements)} elements before it are read, "
                "this one and any after it are not"
            )
            return elements, Unreadable(
                len(elements) + 1, _safe(text[start : start + _RAW_CAP]), message,
                TRUNCATED if ended else "malformed_line",
            )
        elements.append(element)
        pos = _skip(text, pos)
        if text.startswith(",", pos):
            pos = _skip(text, pos + 1)
        elif text.startswith("]", pos) and not text[pos + 1 :].strip():
            return elements, None  # complete after all: the first parse failed on something else
        else:
            ended = not text[pos:].strip()
            message = (
                f"the JSON array is {'cut' if ended else 'invalid'} after element {len(elements)} "
                f"(char {pos}): {error}; the {len(elements)} elements before it are read"
            )
            return elements, Unreadable(
                len(elements) + 1, _safe(text[pos : pos + _RAW_CAP]), message,
                TRUNCATED if ended else "malformed_line",
            )


def _skip(text: str, pos: int) -> int:
    """The position of the first non-whitespace character from ``pos``."""
    while pos < len(text) and text[pos] in " \t\r\n":
        pos += 1
    return pos


def _structure(element: dict[str, Any]) -> str | None:
    """What keeps ``element`` from being an annotation of the format, or None."""
    missing = [key for key in _REQUIRED if key not in element]
    if missing:
        return "missing field " + ", ".join(repr(key) for key in missing)
    for key in _TEXTS:
        value = element[key]
        if not isinstance(value, str):
            return f"{key} is {_describe(value)}, not a string"
    identifier = element.get("id")
    if identifier is not None and (
        isinstance(identifier, bool) or not isinstance(identifier, int | str)
    ):
        return f"id is {_describe(identifier)}, not an integer or a string"
    return None


def _shown_first(referenced: object) -> tuple[str | None, bool]:
    """``("output_1" | "output_2" | None, readable)``: the output labelled ``m`` (shown first)."""
    if referenced is None:
        return None, True
    if (
        isinstance(referenced, dict)
        and len(referenced) == 2
        and {referenced.get("m"), referenced.get("M")} == {"output_1", "output_2"}
    ):
        return str(referenced["m"]), True
    return None, False


def _judgment(
    index: int, raw: str, element: dict[str, Any], item_set: str, shown_first: str | None
) -> Judgment:
    instruction: str = element["instruction"]
    digest = instruction_hash(instruction)
    identifier = element.get("id")
    flipped = shown_first == "output_2"
    first, second = ("2", "1") if flipped else ("1", "2")
    price = element.get("price_per_example")
    seconds = element.get("time_per_example")
    price = None if _is_null(price) else price
    seconds = None if _is_null(seconds) else seconds
    value = element["preference"]
    fields: dict[str, Any] = {
        "item_set": item_set,
        "item_id": digest if identifier is None else str(identifier),
        "system_a": element[f"generator_{first}"],
        "system_b": element[f"generator_{second}"],
        "judge_id": element["annotator"],
        "generation": 0,
        "replicate": 0,
        "length_a": len(element[f"output_{first}"]),
        "length_b": len(element[f"output_{second}"]),
        "preference_raw": _scalar(value),
        "order_known": shown_first is not None,
        "tie_kind": None,
        "dataset": _scalar(element.get("dataset")),
        "annotator": element["annotator"],
        "reference_system": element["generator_1"],
        "instruction_hash": digest,
        "price_per_example": _scalar(price),
        "time_per_example": _scalar(seconds),
    }
    if _is_null(value):
        shown = "null" if value is None else "NaN"
        called = [
            key
            for key in ("price_per_example", "time_per_example", "raw_completion")
            if not _is_null(element.get(key))
        ]
        if not called:
            message = (
                f"preference is {shown}, and price_per_example, time_per_example and "
                "raw_completion are null: the judge call failed"
            )
            return Judgment(index, "pairwise", fields, raw, (JUDGE_CALL_FAILED, message))
        message = (
            f"preference is {shown} although the judge was called ({', '.join(called)} "
            "not null): no verdict could be read from its completion"
        )
        return Judgment(index, "pairwise", fields, raw, (PARSE_FAILURE, message))
    if isinstance(value, bool) or not isinstance(value, int | float):
        message = f"preference is {_describe(value)}, not a number"
        return Judgment(index, "pairwise", fields, raw, (PARSE_FAILURE, message))
    if value == 0:
        p_first, winner, tie_kind = 0.5, "tie", "identical_outputs"
    elif 1 <= value <= 2:
        p_first = 2.0 - value  # P(output_1 wins)
        if value == 1.5:
            winner = "tie"
            tie_kind = "identical_outputs" if price is None and seconds is None else "judged"
        else:
            winner = "A" if value < 1.5 else "B"
            tie_kind = None
        if flipped:
            p_first = value - 1.0
            winner = {"A": "B", "B": "A", "tie": "tie"}[winner]
    else:
        message = (
            f"preference {value!r} is out of range: AlpacaEval writes 0 (identical outputs) "
            "or a value in [1, 2] (1 = output_1 preferred, 2 = output_2 preferred)"
        )
        return Judgment(index, "pairwise", fields, raw, (PARSE_FAILURE, message))
    fields["winner"] = winner
    fields["preference"] = p_first
    fields["tie_kind"] = tie_kind
    return Judgment(index, "pairwise", fields, raw)


def _notes(
    notes: AdapterNotes,
    path: str,
    elements: int,
    known: int,
    unreadable_order: int,
    annotators: set[str],
) -> None:
    names = ", ".join(sorted(annotators)) or "none"
    notes.notes.append(
        f"judge_id is the AlpacaEval annotator configuration name ({names}), not a model name"
    )
    notes.notes.append(
        f"shown order known (referenced_models) for {known} of {elements} elements; elsewhere "
        "system_a is output_1's generator (the reference) and order_known is false"
    )
    if unreadable_order:
        notes.notes.append(
            f"{unreadable_order} elements have a referenced_models that does not map 'm' and "
            "'M' to output_1 and output_2: read as order unknown"
        )
    parts = path.replace("\\", "/").split("/")
    folder = parts[-2] if len(parts) >= 2 and parts[-1] == "annotations.json" else None
    if folder is not None and annotators and folder not in annotators:
        notes.notes.append(
            f"the folder names annotator {folder!r} but the records say {names}; "
            "judge_id follows the records"
        )


ALPACA_EVAL = AlpacaEvalAdapter()
