"""Turning an adapter's judgments into the raw batches every ingest reads (:class:`RawBatch`).

Judgments come out as text columns, as the JSON Lines slow path gives them, so
validation types and checks them exactly as it does any source's records; a
judgment the adapter rejected carries its reason in :data:`REJECT_REASON` and
:data:`REJECT_MESSAGE`, which the ingest quarantines before validation. An
adapter that reads the source as columns (``Adapter.frames``) hands over its
blocks as they are (typed canonical columns validate to the same rows as their
text). Memory is bounded by one batch of judgments (and, for a line-based
format, by a line).
"""

from __future__ import annotations

import itertools
import math
import threading
import zlib
from collections.abc import Iterator
from typing import Any

import numpy as np
import orjson
import polars as pl

from jurymeter.errors import SourceError
from jurymeter.io.adapters.base import (
    INVALID_TEXT,
    Adapter,
    AdapterNotes,
    AdapterOptions,
    Judgment,
    SourceBytes,
    Unreadable,
)
from jurymeter.io.source_files import (
    LineSplitter,
    MalformedRecord,
    RawBatch,
    SourceFile,
    open_decompressed,
    truncated_message,
    undecompressable,
)
from jurymeter.io.text import escape_text, is_text

REJECT_REASON = "_reject_reason"
REJECT_MESSAGE = "_reject_message"
BATCH_JUDGMENTS = 50_000
READ_BYTES = 8 * 1024 * 1024  # a file is read in blocks of this size and split into lines


class ReadCancelled(Exception):
    """The reading of a source was cancelled (it needs no ingest)."""


class FileBytes(SourceBytes):
    """A source file (local or S3, compressed or not) for an adapter.

    Once ``cancel`` is set, the next block read raises :class:`ReadCancelled`.
    """

    def __init__(self, source: SourceFile, cancel: threading.Event | None = None) -> None:
        self.source = source
        self.path = source.url
        self._cancel = cancel
        # Set by line_blocks when a compressed stream ends early: (line of the cut, its unfinished text).
        self.cut: tuple[int, str] | None = None

    def _check(self) -> None:
        if self._cancel is not None and self._cancel.is_set():
            raise ReadCancelled(self.path)

    def check(self) -> None:
        self._check()

    def local_file(self) -> str | None:
        protocol = self.source.fs.protocol
        local = "file" in (protocol if isinstance(protocol, tuple | list) else (protocol,))
        return self.source.path if local and self.source.compression is None else None

    def lines(self) -> Iterator[tuple[int, bytes]]:
        for first, block in self.line_blocks():
            yield from enumerate(block, start=first)

    def line_blocks(self) -> Iterator[tuple[int, list[bytes]]]:
        """The lines iterating the binary file gives (newline and carriage returns taken off), a block at a time.

        A compressed stream that ends early gives the lines before the cut and
        sets :attr:`cut` (the unfinished last line is no line of the file).
        """
        splitter = LineSplitter()
        with self.source.fs.open(self.source.path, "rb") as stored:
            handle = open_decompressed(self.source, stored)
            yield from splitter.split(self._blocks(handle))
            truncated = bool(getattr(handle, "truncated", False))
        rest = splitter.unfinished()
        if truncated:
            self.cut = (splitter.next_line, rest.decode("utf-8", "backslashreplace"))
        elif rest:
            yield splitter.next_line, [rest.rstrip(b"\r\n")]

    def _blocks(self, handle: Any) -> Iterator[bytes]:
        """The decompressed bytes in blocks of :data:`READ_BYTES`, the cancel checked before each."""
        while True:
            self._check()
            block = handle.read(READ_BYTES)
            if not block:
                return
            yield block

    def read(self) -> bytes:
        self._check()
        with self.source.fs.open(self.source.path, "rb", compression=self.source.compression) as handle:
            data: bytes = handle.read()
            return data


def _text(value: Any) -> str | None:
    """A field value as the text column validation expects (numbers as JSON numbers)."""
    if isinstance(value, str):
        return value
    if type(value) is int and -(2**63) <= value < 2**64:
        return str(value)  # what orjson.dumps writes for the integers it can write
    if value is None:
        return None
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    return orjson.dumps(value).decode()


def adapted_batches(
    source: SourceFile,
    adapter: Adapter,
    options: AdapterOptions,
    notes: AdapterNotes,
    *,
    batch_judgments: int = BATCH_JUDGMENTS,
    cancel: threading.Event | None = None,
) -> Iterator[RawBatch]:
    """The source's judgments as raw batches of at most ``batch_judgments`` rows.

    The adapter's column blocks (``Adapter.frames``) when it offers them for
    this source, else its judgments, a batch at a time. Setting ``cancel``
    stops the reading at its next block (:class:`ReadCancelled`).
    """
    import zstandard

    try:
        yield from _adapted_batches(source, adapter, options, notes, batch_judgments, cancel)
    except SourceError:
        raise
    except (zlib.error, zstandard.ZstdError) as exc:
        raise SourceError(undecompressable(source, exc)) from exc
    except (OSError, EOFError) as exc:
        first = str(exc).splitlines()[0][:200] if str(exc) else type(exc).__name__
        msg = f"cannot read {source.url}: {first}"
        raise SourceError(msg) from exc


def _adapted_batches(
    source: SourceFile,
    adapter: Adapter,
    options: AdapterOptions,
    notes: AdapterNotes,
    batch_judgments: int,
    cancel: threading.Event | None,
) -> Iterator[RawBatch]:
    file = FileBytes(source, cancel)
    blocks = adapter.frames(file, options, notes, batch_judgments=batch_judgments)
    if blocks is not None:
        for block in blocks:
            yield RawBatch(
                frame=block.frame,
                lines=block.lines,
                malformed=[_malformed(u) for u in block.unreadable],
                raw=block.raw,
            )
        if file.cut is not None:
            yield _cut_batch(source, file.cut)
        return
    rows: list[dict[str, str | None]] = []
    lines: list[int] = []
    raws: list[str] = []
    malformed: list[MalformedRecord] = []

    def flush() -> RawBatch:
        frame = _frame(rows)
        kept = list(raws)
        batch = RawBatch(
            frame=frame,
            lines=np.asarray(lines, dtype=np.int64),
            malformed=list(malformed),
            raw=lambda which: [kept[int(k)] for k in which],
        )
        rows.clear()
        lines.clear()
        raws.clear()
        malformed.clear()
        return batch

    for item in adapter.judgments(file, options, notes):
        if isinstance(item, Unreadable):
            malformed.append(_malformed(item))
        else:
            rows.append(_row(item))
            lines.append(item.line)
            raws.append(item.raw if is_text(item.raw) else escape_text(item.raw))
        if len(rows) + len(malformed) >= batch_judgments:
            yield flush()
    if file.cut is not None:
        malformed.append(_cut_batch(source, file.cut).malformed[0])
    if rows or malformed:
        yield flush()


def _malformed(item: Unreadable) -> MalformedRecord:
    raw = item.raw if is_text(item.raw) else escape_text(item.raw)
    message = item.message if is_text(item.message) else escape_text(item.message)
    return MalformedRecord(line=item.line, raw=raw, message=message, reason=item.reason)


def _cut_batch(source: SourceFile, cut: tuple[int, str]) -> RawBatch:
    """The one ``truncated`` record of a compressed line-based log that ends early."""
    line, text = cut
    what = "the last line is incomplete" if text else "it ends at a line's end"
    record = MalformedRecord(line=line, raw=text, message=truncated_message(source, what), reason="truncated")
    return RawBatch(frame=pl.DataFrame(), lines=np.zeros(0, dtype=np.int64), malformed=[record], raw=lambda rows: [])


def _row(judgment: Judgment) -> dict[str, str | None]:
    r"""A judgment's fields as text; one whose text is not valid (lone surrogates) is rejected as ``invalid_text``.

    Its fields are then stored escaped in the quarantine only (``\xNN``
    for an undecodable byte, ``\udNNN`` for an unpaired escape), never
    replaced or merged with another id.
    """
    row = {name: _text(value) for name, value in judgment.fields.items()}
    bad = [name for name, value in row.items() if value is not None and not is_text(value)]
    if bad:
        shown = "; ".join(f"field '{name}' is not valid text: \"{escape_text(row[name] or '')[:60]}\"" for name in bad)
        row = {name: (escape_text(value) if value is not None else None) for name, value in row.items()}
        row[REJECT_REASON], row[REJECT_MESSAGE] = INVALID_TEXT, shown
        return row
    if judgment.reject is not None:
        reason, message = judgment.reject
        row[REJECT_REASON], row[REJECT_MESSAGE] = reason, message if is_text(message) else escape_text(message)
    return row


def _frame(rows: list[dict[str, str | None]]) -> pl.DataFrame:
    """Text columns, one per field any row has, in the order they first appear (missing fields are null)."""
    names = dict.fromkeys(itertools.chain.from_iterable(rows), pl.String)
    return pl.DataFrame(rows, schema=names) if rows else pl.DataFrame()
