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
import re
import struct
import zipfile
import zlib
from collections.abc import Iterator
from typing import Any, ClassVar

import zstandard

from jurymeter.io.adapters.base import (
    MALFORMED,
    TRUNCATED,
    Adapter,
    AdapterNotes,
    AdapterOptions,
    Judgment,
    SourceBytes,
    Unreadable,
)
from jurymeter.io.adapters.inspect_ai_samples import RAW_CAP, read_header, sample_judgments

_ZIP_MAGIC = b"PK\x03\x04"
_EOCD = b"PK\x05\x06"  # the end of central directory record's signature
_ZSTD = 93  # the ZIP compression method of Zstandard
_MEMBER_NAMES = (b"header.json", b"_journal/start.json", b"samples/", b"summaries.json", b"reductions.json")
_JSON_HEAD = re.compile(rb'\A\s*\{\s*"version"\s*:\s*\d+\s*,')
_JSON_EVAL = re.compile(rb'"eval"\s*:\s*\{')
_WS = re.compile(r"[ \t\n\r]*")
_DECODER = json.JSONDecoder()


class _LogError(Exception):
    """The log (or one member) cannot be read: the message of an :class:`Unreadable`."""




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
    log = read_header(header, options, notes)
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
        yield from sample_judgments(log, line, sample, text, notes)
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
        yield Unreadable(1, text[:RAW_CAP], "inspect .json log is not a JSON object")
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
        yield Unreadable(1, text[:RAW_CAP], f"inspect .json log without a readable header: {why}")
        return
    log = read_header(top, options, notes)
    for line, (sample, raw) in enumerate(samples, start=1):
        yield from sample_judgments(log, line, sample, raw, notes)
    if cut is not None:
        position, index, message = cut
        if index:
            ended = _ends_inside(text, position)
            yield Unreadable(
                index, text[position : position + RAW_CAP],
                f"inspect .json log is {'truncated' if ended else 'invalid'} at sample {index} (char {position}): "
                f"{message}; this sample and any after it are not read",
                TRUNCATED if ended else MALFORMED,
            )
        else:
            notes.notes.append(f"inspect: the log is truncated or invalid after its samples (char {position}): {message}")
    if not samples and cut is None:
        notes.notes.append("inspect: the log holds no samples (written with log_samples=False?): no judgments")
    notes.notes.append(f"inspect: {len(samples)} sample-epochs read")


