"""inspect_ai evaluation logs (``.eval`` and ``.json``) as pointwise judgments.

Source: the log format of inspect-ai (https://github.com/UKGovernmentBEIS/inspect_ai,
``inspect_ai/log/``), as documented by the sample logs' README
(``samples/inspect_ai/README.md``, logs written by inspect-ai 0.3.285). inspect-ai
itself is not a dependency: the logs are read with the standard library and
``zstandard``.

The two encodings
-----------------
``.json``
    One object ``{version, status, eval, plan, results, stats, ..., samples,
    reductions}``. Unscored grades are written as a bare ``NaN``, which Python's
    :mod:`json` reads (orjson does not). The object is read key by key and
    ``samples`` element by element (:meth:`json.JSONDecoder.raw_decode`), so a
    truncated log still yields the samples written before the cut, and the cut
    is one :class:`Unreadable`.
``.eval``
    A ZIP of ``header.json`` (everything but the samples), ``samples/<id>_epoch_<n>.json``
    (one per sample-epoch), ``summaries.json``, ``reductions.json`` and
    ``_journal/``. Members are Zstandard-compressed (ZIP method 93) by recent
    versions, which Python 3.11's :mod:`zipfile` cannot decompress: the member's
    bytes are located through the central directory (``header_offset``,
    ``compress_size``) and the local header, decompressed with ``zstandard``
    (across frames) and checked against the stored size and CRC-32. Deflate and
    stored members (older versions) are read by :mod:`zipfile` itself. A log
    without ``header.json`` (one still being written) is read with the header of
    ``_journal/start.json``.

Mapping (one pointwise judgment per sample x epoch x model-graded scorer)
-------------------------------------------------------------------------
- ``item_set``: ``options.item_set``, else ``eval.task``.
- ``item_id``: the sample's ``id`` (as text), within the eval's task and
  dataset: prefixed by ``eval.dataset.name`` and ``/`` when the header names
  the dataset, and by ``eval.task`` and ``/`` when ``options.item_set``
  replaces the task as the item set (``<task>/<dataset>/<id>`` at most). An
  item is the same item in every log of one task and dataset, whatever model
  or run, so logs of two models share their items; the sample's own ``id`` is
  kept as ``sample_id``. Two runs of one model on one task are told apart by
  ``run_id``, which is part of the record key (``docs/schema.md``): each run's
  ratings are stored, neither merged nor in conflict.
- ``system_id``: ``eval.model``, the evaluated model.
- ``judge_id``: the grader model of the scorer. A scorer's parameters
  (``results.scores[].params``, falling back to ``eval.scorers[i].options``,
  matched to the score names of the samples, ``model_graded_qa``,
  ``model_graded_qa1``, ..., by inspect's own naming: the scorer's name with a
  counter from the second use on) name either a ``model`` or a ``model_role``;
  a role is resolved through ``eval.model_roles``. Where no grader is bound
  (no model, a role missing from ``model_roles``), the grader model calls in
  the scorer's span of the sample's ``events`` are used when they name one
  model; else the evaluated model graded itself (inspect's fallback) and
  ``judge_id`` is ``eval.model``.
- ``self_graded``: ``judge_id == system_id``.
- ``judge_role``: the model role the grader was bound through (``None`` when none).
- ``score``: inspect's own ``value_to_float`` convention
  (``inspect_ai/scorer/_metric.py``): ``C`` = 1, ``P`` = 0.5, ``I`` = 0,
  ``N`` (no answer) = 0, ``yes``/``true`` = 1 and ``no``/``false`` = 0 (any
  case), text holding a finite number = that number; numbers (and booleans) are
  kept as they are. The letter or text is kept as ``grade`` (``None`` for a
  number). inspect maps any other value to 0 with a warning; here it is
  rejected as ``parse_failure`` naming the value. A ``NaN`` value (inspect's
  unscored sentinel, with ``reason`` e.g. ``grader_failed``) is rejected as
  ``unscored`` with the reason and the grader's explanation in the message.
- ``generation``: ``epoch - 1``. An inspect epoch re-runs the whole sample,
  the solver included: the evaluated model answers again (the sample log's
  q03-q05 answer differently in epoch 2), so an epoch is a new sampled output
  of the system (``generation`` in ``docs/schema.md``), not a repeated judge call
  on the same output. ``epoch`` is kept as provenance (1-based, as inspect writes it).
- ``replicate``: 0 (inspect grades each output once per scorer).
- ``timestamp``: the sample's ``completed_at``, else ``eval.created``.
- ``response_length``: ``len(output.completion)`` in characters, when a string.
- ``run_id``: ``eval.run_id`` (a key column); provenance ``eval_id``, ``sample_id``, ``scorer`` (the score
  name), ``sample_uuid``, ``epoch``, ``grade``, ``self_graded``, ``judge_role``.

``line`` is the 1-based index of the sample-epoch in the log's sample order:
the ``samples`` array of a ``.json``, the order of the ``samples/*.json``
members in the ``.eval``'s central directory (inspect's write order, i.e.
completion order); sample-epochs listed in ``summaries.json`` without a member
follow, numbered on. A failure of the whole log (not a ZIP, no header, bad
JSON before the samples) is one :class:`Unreadable` at line 1. ``raw`` is the
compact JSON of ``{id, epoch, uuid, scorer, score}`` (the judgment's own
element).

Rejections: a score whose value is a list or an object (a multi-valued scorer),
a scorer bound to a panel of models (majority vote), and a scorer that is not
model-graded (no model or role in its parameters, no grading transcript, no
model call in its span, not ``model_graded_qa``/``model_graded_fact``: e.g.
``match``) are ``unsupported_record``. A sample with no score from a scorer of
the header (no ``scores`` at all, say, after a sample error) is ``unscored``
for that scorer, with the sample's error message when there is one.
"""

from __future__ import annotations

import io
import json
import math
import re
import struct
import zipfile
import zlib
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any, ClassVar

import zstandard

from jurymeter.io.adapters.base import (
    MALFORMED,
    PARSE_FAILURE,
    TRUNCATED,
    UNSCORED,
    UNSUPPORTED_RECORD,
    Adapter,
    AdapterNotes,
    AdapterOptions,
    Judgment,
    SourceBytes,
    Unreadable,
)

_ZIP_MAGIC = b"PK\x03\x04"
_EOCD = b"PK\x05\x06"  # the end of central directory record's signature
_ZSTD = 93  # the ZIP compression method of Zstandard
_MEMBER_NAMES = (b"header.json", b"_journal/start.json", b"samples/", b"summaries.json", b"reductions.json")
_JSON_HEAD = re.compile(rb'\A\s*\{\s*"version"\s*:\s*\d+\s*,')
_JSON_EVAL = re.compile(rb'"eval"\s*:\s*\{')
_WS = re.compile(r"[ \t\n\r]*")
_COUNTER = re.compile(r"\d+\Z")
_MODEL_GRADED = frozenset({"model_graded_qa", "model_graded_fact"})
# inspect's value_to_float (inspect_ai/scorer/_metric.py): CORRECT, PARTIAL, INCORRECT, NOANSWER.
_LETTERS = {"C": 1.0, "P": 0.5, "I": 0.0, "N": 0.0}
_WORDS = {"yes": 1.0, "true": 1.0, "no": 0.0, "false": 0.0}
_RAW_CAP = 65536  # characters of a failed document kept as its raw text
_DECODER = json.JSONDecoder()


class _LogError(Exception):
    """The log (or one member) cannot be read: the message of an :class:`Unreadable`."""


@dataclass(slots=True)
class _Scorer:
    """What the header says about one scorer (keyed by its score name)."""

    name: str
    base: str
    judge: str | None = None
    role: str | None = None
    declared: bool = False  # its parameters name a grader model or role
    panel: tuple[str, ...] = ()


@dataclass(slots=True)
class _Log:
    """The header of one log: what every judgment of it shares."""

    item_set: Any
    system: Any
    created: Any
    eval_id: Any
    run_id: Any
    item_prefix: str = ""  # the eval's task and dataset, before each sample id (the item's identity)
    scorers: dict[str, _Scorer] = field(default_factory=dict)
    unsupported: set[str] = field(default_factory=set)  # scorers already noted as not model-graded


class InspectAdapter(Adapter):
    """inspect_ai logs: ``.eval`` (ZIP, Zstandard or deflate members) and ``.json``."""

    name: ClassVar[str] = "inspect"
    suffixes: ClassVar[tuple[str, ...]] = (".eval", ".json")

    def detect(self, head: bytes, path: str) -> bool:
        """An inspect log: a ZIP holding inspect's member names, or an object opening ``{"version": N, ..."eval": {``.

        The ``.eval``'s first member (``_journal/start.json`` or a sample) is
        named in its local header, within the first bytes; ``header.json`` is
        written last. A ``.json`` log starts with ``version`` and has the
        ``eval`` object right after ``status`` (inspect's key order); the head
        need not be valid JSON (it is cut at 64 KiB).
        """
        if head.startswith(_ZIP_MAGIC):
            return any(name in head for name in _MEMBER_NAMES)
        head = head.removeprefix(b"\xef\xbb\xbf")
        return bool(_JSON_HEAD.match(head)) and _JSON_EVAL.search(head, 0, 4096) is not None

    def judgments(
        self, source: SourceBytes, options: AdapterOptions, notes: AdapterNotes
    ) -> Iterator[Judgment | Unreadable]:
        """One pointwise judgment per sample x epoch x model-graded scorer (see the module's docstring)."""
        data = source.read()
        if data.startswith(b"PK"):
            yield from _read_eval(data, options, notes)
        else:
            yield from _read_json(data, options, notes)


INSPECT = InspectAdapter()


# -- .eval ------------------------------------------------------------------------------------


def _member(archive: zipfile.ZipFile, info: zipfile.ZipInfo, data: bytes) -> bytes:
    """The bytes of one member, Zstandard (method 93) decompressed here, others by :mod:`zipfile`."""
    if info.compress_type != _ZSTD:
        try:
            return archive.read(info)
        except (zipfile.BadZipFile, zlib.error, NotImplementedError, EOFError, OSError, ValueError, RuntimeError) as exc:
            msg = f"member {info.filename!r} cannot be read: {exc}"
            raise _LogError(msg) from exc
    offset = info.header_offset
    local = data[offset : offset + 30]
    if len(local) < 30 or not local.startswith(_ZIP_MAGIC):
        msg = f"member {info.filename!r}: no local header at offset {offset}"
        raise _LogError(msg)
    name_length, extra_length = struct.unpack_from("<HH", local, 26)
    start = offset + 30 + name_length + extra_length
    blob = data[start : start + info.compress_size]
    if len(blob) != info.compress_size:
        msg = f"member {info.filename!r} is truncated ({len(blob)} of {info.compress_size} compressed bytes)"
        raise _LogError(msg)
    out = bytearray()
    try:
        with zstandard.ZstdDecompressor().stream_reader(blob, read_across_frames=True) as reader:
            while len(out) <= info.file_size:
                chunk = reader.read(info.file_size + 1 - len(out))
                if not chunk:
                    break
                out += chunk
    except zstandard.ZstdError as exc:
        msg = f"member {info.filename!r}: Zstandard data cannot be decompressed: {exc}"
        raise _LogError(msg) from exc
    if len(out) != info.file_size or zlib.crc32(out) != info.CRC:
        msg = (
            f"member {info.filename!r}: decompressed to {len(out)} bytes (CRC {zlib.crc32(out):08x}), "
            f"the directory says {info.file_size} (CRC {info.CRC:08x})"
        )
        raise _LogError(msg)
    return bytes(out)


def _member_json(archive: zipfile.ZipFile, info: zipfile.ZipInfo, data: bytes) -> tuple[Any, str]:
    """A member's parsed JSON and its text."""
    # Undecodable bytes become lone surrogates: the judgments whose fields hold one are
    # quarantined as invalid_text (io.adapters.reading), the member's others are read.
    text = _member(archive, info, data).decode("utf-8", "surrogateescape")
    try:
        return json.loads(text), text
    except (ValueError, RecursionError) as exc:
        msg = f"member {info.filename!r} is not valid JSON: {exc}"
        raise _LogError(msg) from exc


def _read_eval(data: bytes, options: AdapterOptions, notes: AdapterNotes) -> Iterator[Judgment | Unreadable]:
    """The judgments of a ``.eval`` ZIP: the header, then every ``samples/*.json`` member in directory order."""
    try:
        archive = zipfile.ZipFile(io.BytesIO(data))
    except (zipfile.BadZipFile, OSError, ValueError, EOFError) as exc:
        if data.startswith(_ZIP_MAGIC) and _EOCD not in data[-65558:]:
            # A ZIP's directory is its last bytes: a cut archive has none, and nothing of it is read.
            yield Unreadable(1, "", f"the inspect .eval ZIP archive is cut (no central directory at its end): {exc}; "
                             "no sample is read", TRUNCATED)
            return
        yield Unreadable(1, "", f"not a readable ZIP archive (an inspect .eval log): {exc}")
        return
    infos = {info.filename: info for info in archive.infolist()}
    header: Any = None
    failures = []
    for name in ("header.json", "_journal/start.json"):
        if name not in infos:
            failures.append(f"{name} is absent")
            continue
        try:
            header, _ = _member_json(archive, infos[name], data)
        except _LogError as exc:
            failures.append(str(exc))
            continue
        if name != "header.json":
            notes.notes.append(
                f"inspect: {'; '.join(failures)}; the header was read from {name} "
                "(a log still being written: no results, scorer parameters from eval.scorers)"
            )
        break
    if not isinstance(header, dict) or not isinstance(header.get("eval"), dict):
        reason = "; ".join(failures) if header is None else "its header has no eval object"
        yield Unreadable(1, "", f"inspect .eval log without a readable header: {reason}")
        return
    log = _log(header, options, notes)
    members = [info for info in archive.infolist() if info.filename.startswith("samples/") and info.filename.endswith(".json")]
    line = 0
    seen: set[tuple[str, int]] = set()
    for info in members:
        line += 1
        try:
            sample, text = _member_json(archive, info, data)
        except _LogError as exc:
            yield Unreadable(line, info.filename, f"sample member unreadable: {exc}")
            continue
        if isinstance(sample, dict):
            epoch = sample.get("epoch")
            seen.add((str(sample.get("id")), epoch if isinstance(epoch, int) else -1))
        yield from _sample_judgments(log, line, sample, text, notes)
    for sample_id, epoch in _summarised(archive, infos, data, notes):
        expected = f"samples/{sample_id}_epoch_{epoch}.json"
        if (sample_id, epoch) not in seen and expected not in infos:  # a member that failed is counted already
            line += 1
            yield Unreadable(
                line, expected, f"sample {sample_id!r} epoch {epoch} is listed in summaries.json but member {expected!r} is absent"
            )
    notes.notes.append(f"inspect: {line} sample-epochs read from {len(members)} sample members")


def _summarised(
    archive: zipfile.ZipFile, infos: dict[str, zipfile.ZipInfo], data: bytes, notes: AdapterNotes
) -> list[tuple[str, int]]:
    """The (id, epoch) pairs ``summaries.json`` lists (none when it is absent or unreadable)."""
    if "summaries.json" not in infos:
        return []
    try:
        summaries, _ = _member_json(archive, infos["summaries.json"], data)
    except _LogError as exc:
        notes.notes.append(f"inspect: summaries.json not read, so samples missing from the archive are not counted: {exc}")
        return []
    if not isinstance(summaries, list):
        return []
    return [
        (str(s["id"]), s["epoch"])
        for s in summaries
        if isinstance(s, dict) and "id" in s and isinstance(s.get("epoch"), int)
    ]


# -- .json ------------------------------------------------------------------------------------


def _skip(text: str, pos: int) -> int:
    """The position of the first non-whitespace character from ``pos`` (JSON whitespace)."""
    match = _WS.match(text, pos)
    return match.end() if match else pos


def _ends_inside(text: str, position: int) -> bool:
    """Whether the text from ``position`` is one JSON value the document's end cuts (not a broken one)."""
    try:
        _DECODER.raw_decode(text, position)
    except json.JSONDecodeError as exc:
        return exc.pos >= len(text.rstrip()) or exc.msg.startswith("Unterminated string")
    except (ValueError, RecursionError):
        return False
    return False


def _read_json(data: bytes, options: AdapterOptions, notes: AdapterNotes) -> Iterator[Judgment | Unreadable]:
    """The judgments of a ``.json`` log, read key by key and sample by sample (a cut keeps what precedes it)."""
    # Undecodable bytes become lone surrogates, so a sample holding one is read and its
    # judgments are quarantined as invalid_text (io.adapters.reading), the others kept.
    text = data.removeprefix(b"\xef\xbb\xbf").decode("utf-8", "surrogateescape")
    top: dict[str, Any] = {}
    samples: list[tuple[Any, str]] = []
    cut: tuple[int, int, str] | None = None  # (position, sample index or 0, message)
    pos = _skip(text, 0)
    if not text.startswith("{", pos):
        yield Unreadable(1, text[:_RAW_CAP], "inspect .json log is not a JSON object")
        return
    pos = _skip(text, pos + 1)
    key = ""
    try:
        while not text.startswith("}", pos):
            start = pos
            key, pos = _DECODER.raw_decode(text, pos)
            if not isinstance(key, str):
                msg = f"an object key is expected at char {start}"
                raise ValueError(msg)
            pos = _skip(text, pos)
            if not text.startswith(":", pos):
                msg = f"':' expected after key {key!r} at char {pos}"
                raise ValueError(msg)
            pos = _skip(text, pos + 1)
            if key == "samples" and text.startswith("[", pos):
                pos = _skip(text, pos + 1)
                while not text.startswith("]", pos):
                    start = pos
                    try:
                        sample, pos = _DECODER.raw_decode(text, pos)
                    except (ValueError, RecursionError) as exc:
                        cut = (start, len(samples) + 1, str(exc))
                        raise
                    samples.append((sample, text[start:pos]))
                    pos = _skip(text, pos)
                    if text.startswith(",", pos):
                        pos = _skip(text, pos + 1)
                    elif not text.startswith("]", pos):
                        cut = (pos, len(samples) + 1, f"',' or ']' expected at char {pos}")
                        msg = cut[2]
                        raise ValueError(msg)
                pos += 1
            else:
                top[key], pos = _DECODER.raw_decode(text, pos)
            pos = _skip(text, pos)
            if text.startswith(",", pos):
                pos = _skip(text, pos + 1)
            elif not text.startswith("}", pos):
                msg = f"',' or '}}' expected at char {pos}"
                raise ValueError(msg)
    except (ValueError, RecursionError) as exc:
        if cut is None:
            cut = (pos, 0, f"after key {key!r}: {exc}")
    if not isinstance(top.get("eval"), dict):
        why = f"invalid or truncated JSON {cut[2]}" if cut else "it has no eval object"
        yield Unreadable(1, text[:_RAW_CAP], f"inspect .json log without a readable header: {why}")
        return
    log = _log(top, options, notes)
    for line, (sample, raw) in enumerate(samples, start=1):
        yield from _sample_judgments(log, line, sample, raw, notes)
    if cut is not None:
        position, index, message = cut
        if index:
            ended = _ends_inside(text, position)
            yield Unreadable(
                index, text[position : position + _RAW_CAP],
                f"inspect .json log is {'truncated' if ended else 'invalid'} at sample {index} (char {position}): "
                f"{message}; this sample and any after it are not read",
                TRUNCATED if ended else MALFORMED,
            )
        else:
            notes.notes.append(f"inspect: the log is truncated or invalid after its samples (char {position}): {message}")
    if not samples and cut is None:
        notes.notes.append("inspect: the log holds no samples (written with log_samples=False?): no judgments")
    notes.notes.append(f"inspect: {len(samples)} sample-epochs read")


# -- the header -------------------------------------------------------------------------------


def _base(name: str) -> str:
    """A scorer's unqualified name, as inspect names its scores (``pkg/scorer`` -> ``scorer``)."""
    return name.rsplit("/", 1)[-1]


def _log(header: dict[str, Any], options: AdapterOptions, notes: AdapterNotes) -> _Log:
    """What the header (``eval``, ``results``) says every judgment shares, and each scorer's grader."""
    ev: dict[str, Any] = header["eval"]
    log = _Log(
        item_set=options.item_set if options.item_set is not None else ev.get("task"),
        system=ev.get("model"),
        created=ev.get("created"),
        eval_id=ev.get("eval_id"),
        run_id=ev.get("run_id"),
        item_prefix=_item_prefix(ev, options),
    )
    roles = ev.get("model_roles")
    if not isinstance(roles, dict):
        roles = {}
    params: dict[str, tuple[str, dict[str, Any]]] = {}  # score name -> (scorer name, parameters)
    used: list[str] = []
    for scorer in ev.get("scorers") or []:
        if not isinstance(scorer, dict) or not isinstance(scorer.get("name"), str):
            continue
        # inspect's unique_scorer_name: the second scorer of a name gets "1", the third "2", ...
        base = unique = _base(scorer["name"])
        count = 1
        while unique in used:
            unique, count = f"{base}{count}", count + 1
        used.append(unique)
        opts = scorer.get("options")
        params[unique] = (base, dict(opts) if isinstance(opts, dict) else {})
    results = header.get("results")
    for score in (results.get("scores") or []) if isinstance(results, dict) else []:
        if not isinstance(score, dict):
            continue
        name = score.get("scorer") or score.get("name")
        if isinstance(name, str) and isinstance(score.get("params"), dict):
            base, opts = params.get(name, (_COUNTER.sub("", name), {}))
            params[name] = (base, {**opts, **score["params"]})
    for name, (base, opts) in params.items():
        log.scorers[name] = _scorer(name, base, opts, roles)
    if not isinstance(log.system, str):
        notes.notes.append(f"inspect: eval.model is {log.system!r}: no system id")
    described = ", ".join(
        f"{s.name} -> {s.judge or '(unbound: the grader of the sample events, else the evaluated model)'}"
        + (f" (role {s.role})" if s.role else "")
        for s in log.scorers.values()
    )
    notes.notes.append(
        f"inspect: task {ev.get('task')!r}, evaluated model {log.system!r}, eval {log.eval_id!r}; "
        f"scorers: {described or 'none in the header'}; epoch n -> generation n-1"
    )
    if header.get("status") not in (None, "success"):
        notes.notes.append(f"inspect: the log's status is {header.get('status')!r}")
    if header.get("invalidated") is True:
        notes.notes.append("inspect: the log is marked invalidated")
    return log


def _item_prefix(ev: dict[str, Any], options: AdapterOptions) -> str:
    """What goes before a sample id in its item id: the task (when it is not the item set) and the dataset.

    A sample id is unique only within its eval's dataset, and the item set is
    the task unless ``options.item_set`` replaces it; the prefix keeps two
    tasks (or datasets) in one item set apart, and is the same for every log
    of one task and dataset, so the items of two models' logs are shared.
    """
    parts = []
    task = ev.get("task")
    if options.item_set is not None and isinstance(task, str) and task:
        parts.append(task)
    dataset = ev.get("dataset")
    name = dataset.get("name") if isinstance(dataset, dict) else None
    if isinstance(name, str) and name:
        parts.append(name)
    return "".join(f"{p}/" for p in parts)


def _scorer(name: str, base: str, opts: dict[str, Any], roles: dict[str, Any]) -> _Scorer:
    """A scorer's grader from its parameters: ``model`` (one, or a panel), else ``model_role`` via ``model_roles``."""
    out = _Scorer(name=name, base=base)
    model, role = opts.get("model"), opts.get("model_role")
    if isinstance(model, list) and len(model) == 1:
        model = model[0]
    if isinstance(model, list) and model:
        out.declared, out.panel = True, tuple(str(m) for m in model)
    elif isinstance(model, str) and model:
        out.declared, out.judge = True, model
    elif isinstance(role, str) and role:
        out.declared, out.role = True, role
        bound = roles.get(role)
        if isinstance(bound, dict):
            bound = bound.get("model")
        if isinstance(bound, str) and bound:
            out.judge = bound
    return out


# -- one sample ---------------------------------------------------------------------------------


def _span_models(sample: dict[str, Any]) -> dict[str, list[tuple[str, str | None]]]:
    """Per scorer span name, the (model, role) of the model calls inside it (inspect's ``events``)."""
    events = sample.get("events")
    if not isinstance(events, list):
        return {}
    spans: dict[str, tuple[str | None, str | None]] = {}  # span id -> (scorer name or None, parent id)
    found: dict[str, list[tuple[str, str | None]]] = {}
    for event in events:
        if not isinstance(event, dict):
            continue
        kind = event.get("event")
        if kind == "span_begin" and isinstance(event.get("id"), str):
            scorer = event.get("name") if event.get("type") == "scorer" else None
            parent = event.get("parent_id")
            spans[event["id"]] = (scorer if isinstance(scorer, str) else None, parent if isinstance(parent, str) else None)
        elif kind == "model" and isinstance(event.get("model"), str):
            span = event.get("span_id")
            for _ in range(64):  # nested spans, bounded
                if not isinstance(span, str) or span not in spans:
                    break
                scorer, span = spans[span]
                if scorer is not None:
                    role = event.get("role")
                    found.setdefault(scorer, []).append((event["model"], role if isinstance(role, str) else None))
                    break
    return found


def _value(value: Any) -> tuple[float | None, Any, str | None]:
    """``(score, grade, why not)`` of a score value, by inspect's ``value_to_float`` (no fallback to 0)."""
    if isinstance(value, bool):
        return float(value), None, None
    if isinstance(value, int | float):
        return float(value), None, None
    if isinstance(value, str):
        if value in _LETTERS:
            return _LETTERS[value], value, None
        if value.lower() in _WORDS:
            return _WORDS[value.lower()], value, None
        try:
            number = float(value)
        except ValueError:
            number = math.nan
        if math.isfinite(number):
            return number, value, None
        return None, value, f"value {value!r} is not a grade inspect maps to a number (C, P, I, N, yes/no, true/false, a number)"
    if isinstance(value, list | dict):
        return None, None, f"value {json.dumps(value)[:200]} is a multi-valued score (a {type(value).__name__}), not one grade"
    return None, None, f"value {value!r} is not a grade"


def _sample_judgments(
    log: _Log, line: int, sample: Any, text: str, notes: AdapterNotes
) -> Iterator[Judgment | Unreadable]:
    """One judgment per score of a sample-epoch, then an ``unscored`` one per header scorer it lacks."""
    if not isinstance(sample, dict):
        yield Unreadable(line, text[:_RAW_CAP], f"sample {line} is not a JSON object")
        return
    sample_id, epoch = sample.get("id"), sample.get("epoch")
    if isinstance(sample_id, bool) or not isinstance(sample_id, str | int) or sample_id == "":
        yield Unreadable(line, text[:_RAW_CAP], f"sample {line} has no id (id = {sample_id!r})")
        return
    if isinstance(epoch, bool) or not isinstance(epoch, int) or epoch < 1:
        yield Unreadable(line, text[:_RAW_CAP], f"sample {sample_id!r} has no epoch >= 1 (epoch = {epoch!r})")
        return
    output = sample.get("output")
    completion = output.get("completion") if isinstance(output, dict) else None
    completed = sample.get("completed_at")
    base: dict[str, Any] = {
        "item_set": log.item_set,
        "item_id": log.item_prefix + str(sample_id),
        "system_id": log.system,
        "generation": epoch - 1,
        "replicate": 0,
        "timestamp": completed if isinstance(completed, str) and completed else log.created,
        "response_length": len(completion) if isinstance(completion, str) else None,
        "run_id": log.run_id,
        "eval_id": log.eval_id,
        "sample_id": str(sample_id),
        "epoch": epoch,
        "sample_uuid": sample.get("uuid"),
    }
    scores = sample.get("scores")
    if not isinstance(scores, dict):
        scores = {}
    missing = [name for name in log.scorers if name not in scores]
    if not scores and not missing:
        yield Unreadable(line, text[:_RAW_CAP], f"sample {sample_id!r} epoch {epoch} has no scores and the header names no scorer")
        return
    events: dict[str, list[tuple[str, str | None]]] | None = None
    for name, entry in scores.items():
        raw = json.dumps(
            {"id": sample_id, "epoch": epoch, "uuid": sample.get("uuid"), "scorer": name, "score": entry},
            ensure_ascii=False, separators=(",", ":"),
        )
        where = f"sample {sample_id!r} epoch {epoch}, scorer {name!r}"
        if not isinstance(entry, dict):
            yield Unreadable(line, raw, f"{where}: the score is not an object")
            continue
        scorer = log.scorers.get(name) or _Scorer(name=name, base=_COUNTER.sub("", name))
        judge, role = scorer.judge, scorer.role
        if judge is None and not scorer.panel:
            if events is None:
                events = _span_models(sample)
            called = {model for model, _ in events.get(name, [])}
            if len(called) == 1:
                judge = called.pop()
                role = role or next((r for _, r in events[name] if r), None)
            elif scorer.declared or events.get(name) or scorer.base in _MODEL_GRADED or _graded(entry):
                judge = log.system  # no grader bound: inspect grades with the evaluated model
        fields = _score_fields(base, judge, name, role, log.system)
        if scorer.panel:
            yield Judgment(line, "pointwise", fields, raw, (
                UNSUPPORTED_RECORD,
                f"{where}: graded by a panel of models {list(scorer.panel)} (majority vote), not one judge",
            ))
            continue
        if judge is None:
            if name not in log.unsupported:
                log.unsupported.add(name)
                notes.notes.append(f"inspect: scorer {name!r} is not model-graded: its scores are quarantined as {UNSUPPORTED_RECORD}")
            yield Judgment(line, "pointwise", fields, raw, (
                UNSUPPORTED_RECORD,
                f"{where}: scorer {name!r} is not model-graded (no grader model or role, no model call in its span)",
            ))
            continue
        if "value" not in entry:
            yield Judgment(line, "pointwise", fields, raw, (PARSE_FAILURE, f"{where}: the score has no value"))
            continue
        value = entry["value"]
        if isinstance(value, float) and math.isnan(value):
            explanation = entry.get("explanation")
            yield Judgment(line, "pointwise", fields, raw, (
                UNSCORED,
                f"{where}: value NaN (unscored), reason {entry.get('reason')!r}"
                + (f": {explanation[:300]}" if isinstance(explanation, str) and explanation else ""),
            ))
            continue
        score, grade, why = _value(value)
        fields["grade"] = grade
        if why is not None:
            reason = UNSUPPORTED_RECORD if isinstance(value, list | dict) else PARSE_FAILURE
            yield Judgment(line, "pointwise", fields, raw, (reason, f"{where}: {why}"))
            continue
        fields["score"] = score
        yield Judgment(line, "pointwise", fields, raw)
    for name in missing:
        scorer = log.scorers[name]
        error = sample.get("error")
        message = error.get("message") if isinstance(error, dict) else error
        judge = scorer.judge
        if judge is None and not scorer.panel and (scorer.declared or scorer.base in _MODEL_GRADED):
            judge = log.system
        fields = _score_fields(base, judge, name, scorer.role, log.system)
        raw = json.dumps(
            {"id": sample_id, "epoch": epoch, "uuid": sample.get("uuid"), "scorer": name, "score": None, "error": error},
            ensure_ascii=False, separators=(",", ":"), default=str,
        )
        yield Judgment(line, "pointwise", fields, raw, (
            UNSCORED,
            f"sample {sample_id!r} epoch {epoch} has no score from scorer {name!r}"
            + (f" (sample error: {str(message)[:300]})" if message else ""),
        ))


def _graded(entry: dict[str, Any]) -> bool:
    """Whether a score carries a model grader's transcript (``metadata.grading`` of ``model_graded_qa``)."""
    metadata = entry.get("metadata")
    return isinstance(metadata, dict) and "grading" in metadata


def _score_fields(
    base: dict[str, Any], judge: str | None, scorer: str, role: str | None, system: str | None
) -> dict[str, Any]:
    """One score's fields before its value is read: the sample's fields, the grader, and ``self_graded``."""
    return {
        **base,
        "judge_id": judge,
        "score": None,
        "scorer": scorer,
        "grade": None,
        "self_graded": judge is not None and judge == system,
        "judge_role": role,
    }
