"""A source file: what it is (:class:`SourceFile`), what reading it gives (:class:`RawBatch`), its bytes.

The records every reader and every log adapter shares: the file found
(format, compression, size, or why it cannot be read), the batches of raw
records read from it, the records that are not records at all
(:class:`MalformedRecord`); the file system of a local path or ``s3://`` URL;
the file's bytes decompressed so that a cut stream is told from a whole one
(:func:`open_decompressed`), its head (what format detection reads), its content key
and its lines split from blocks of bytes (:class:`LineSplitter`, the one line
splitter of every line-based reader).
"""

from __future__ import annotations

import hashlib
import io
import os
import zlib
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any, Literal

import fsspec
import numpy as np
import polars as pl

from jurymeter.errors import SourceError

SourceFormat = Literal["jsonl", "csv", "parquet", "json", "eval"]

_FORMATS: tuple[tuple[str, SourceFormat, str | None], ...] = (
    (".jsonl.gz", "jsonl", "gzip"),
    (".ndjson.gz", "jsonl", "gzip"),
    (".jsonl.zst", "jsonl", "zstd"),
    (".ndjson.zst", "jsonl", "zstd"),
    (".jsonl", "jsonl", None),
    (".ndjson", "jsonl", None),
    (".csv.gz", "csv", "gzip"),
    (".csv", "csv", None),
    (".parquet", "parquet", None),
    # Read by a log adapter only (AlpacaEval, inspect_ai): never canonical records.
    (".json", "json", None),
    (".eval", "eval", None),
)
DOCUMENT_FORMATS = ("json", "eval")
HEAD_BYTES = 64 * 1024  # what format detection reads of a file (head)


@dataclass(frozen=True, slots=True)
class SourceFile:
    """One file to ingest."""

    url: str
    path: str
    fs: Any = field(repr=False, compare=False)
    format: SourceFormat
    compression: str | None
    size: int
    adapter: str | None = None  # the log format an adapter reads it as (io.adapters); None: canonical records
    unreadable: str | None = None  # why discovery could not read it (never opened again): ingest reports it


@dataclass(frozen=True, slots=True)
class MalformedRecord:
    """A line that is not a record at all (not JSON, wrong CSV arity), or not text, or cut.

    ``reason`` is its quarantine reason: ``malformed_line``, ``invalid_text``
    (invalid UTF-8 or an unpaired surrogate in a field) or ``truncated`` (the
    record a compressed stream ends inside of).
    """

    line: int
    raw: str
    message: str
    reason: str = "malformed_line"


@dataclass(slots=True)
class RawBatch:
    """Records of one block, as they came.

    ``frame`` holds the parsed records, ``lines[k]`` the line or row of
    ``frame[k]``, and ``raw(rows)`` returns the raw text of the given frame rows
    (only called for records that go to quarantine).
    """

    frame: pl.DataFrame
    lines: np.ndarray
    malformed: list[MalformedRecord]
    raw: Callable[[np.ndarray], list[str]]
    # Set by the slow JSON path only: its text columns carry io.records.NOT_SCALAR marks
    # (and natural text that starts with the mark has it doubled); no other reader marks.
    marked: bool = False

    @property
    def n_read(self) -> int:
        return self.frame.height + len(self.malformed)


def format_of(path: str) -> tuple[SourceFormat, str | None] | None:
    """Format and compression of a file from its name, or ``None`` if unsupported."""
    lower = path.lower()
    for suffix, fmt, compression in _FORMATS:
        if lower.endswith(suffix):
            return fmt, compression
    return None


def filesystem_for(url: str, storage_options: dict[str, Any] | None = None) -> tuple[Any, str]:
    """An fsspec file system and the path inside it, for a local path or ``s3://`` URL."""
    if url.startswith("s3://"):
        fs = fsspec.filesystem("s3", **(storage_options or {}))
        return fs, url[len("s3://") :]
    if "://" in url and not url.startswith("file://"):
        msg = f"unsupported URL scheme in {url!r}: use a local path or s3://bucket/prefix"
        raise SourceError(msg)
    local = url[len("file://") :] if url.startswith("file://") else url
    return fsspec.filesystem("file"), os.path.abspath(os.path.expanduser(local))



def content_key(source: SourceFile, chunk: int = 8 * 1024 * 1024) -> str:
    """BLAKE3 of the file's bytes as stored (compressed files are not decompressed), 64 hex digits.

    The store's content key (``docs/schema.md``, "Content keys"): BLAKE3 is a
    cryptographic hash, so a crafted file cannot pass for an ingested one, and
    its tree mode hashes a block on every core (``max_threads=AUTO``). Local
    files are streamed in ``chunk`` blocks too, like S3 objects: memory-mapping
    (``update_mmap``) was no faster on a 3.09 GiB file (2.43 s against 2.23 s,
    2.0 CPU-s each) and put the whole file into the process's resident memory
    (3.4 GB peak RSS: ``bench/RESULTS.md``, 2026-12-02).
    """
    import blake3

    digest = blake3.blake3(max_threads=blake3.blake3.AUTO)
    return _hashed(source, lambda: _stream_into(source, digest, chunk), digest)


def content_sha256(source: SourceFile, chunk: int = 8 * 1024 * 1024) -> str:
    """SHA-256 of the file's bytes as stored: the key of markers written before BLAKE3 (compared only then)."""
    digest = hashlib.sha256()
    return _hashed(source, lambda: _stream_into(source, digest, chunk), digest)


def _stream_into(source: SourceFile, digest: Any, chunk: int) -> None:
    with source.fs.open(source.path, "rb") as handle:
        while block := handle.read(chunk):
            digest.update(block)


def _hashed(source: SourceFile, feed: Callable[[], object], digest: Any) -> str:
    """``digest``'s hex after ``feed`` put the file into it; a failed read is one :class:`SourceError` line."""
    try:
        feed()
    except Exception as exc:  # fsspec/botocore raise many types for one cause
        first = str(exc).splitlines()[0][:200] if str(exc) else type(exc).__name__
        msg = f"cannot read {source.url}: {first}"
        raise SourceError(msg) from exc
    hexdigest: str = digest.hexdigest()
    return hexdigest



def short_message(exc: BaseException) -> str:
    """One line of an exception, without anything that could carry a credential."""
    text = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
    return text[:200]


def undecompressable(source: SourceFile, exc: BaseException) -> str:
    """One line: the source's compressed data is not what its name says, or is corrupt."""
    kind = {"gzip": "gzip", "zstd": "Zstandard"}.get(source.compression or "", source.compression or "")
    return f"cannot read {source.url}: not {kind} data, or corrupt ({short_message(exc)})"




# ---------------------------------------------------------------- decompression

BOM = b"\xef\xbb\xbf"
# Compressed bytes fed at a time: bounds one step's output (gzip expands at most ~1000x).
_COMPRESSED_CHUNK = 64 * 1024


class _Decompressed(io.RawIOBase):
    """A gzip (every member) or Zstandard (every frame) stream, decompressed, that tells a cut.

    The standard readers either raise at a cut and lose what the last read
    decompressed (gzip's ``EOFError``) or end quietly (Zstandard): here the
    stream simply ends, with :attr:`truncated` set when it ended inside a
    member or frame, so the caller keeps every byte before the cut and says
    so. Corrupt data raises (``zlib.error``, ``zstandard.ZstdError``).
    """

    def __init__(self, handle: Any, compression: str) -> None:
        import zstandard

        self._handle = handle
        self._gzip = compression == "gzip"
        self._zstd = zstandard
        self._decompressor: Any = None
        self._in_member = False
        self._pending = b""  # compressed bytes after the end of a member, not fed yet
        self._out = b""
        self._pos = 0
        self._done = False
        self.truncated = False

    def readable(self) -> bool:
        return True

    def _fresh(self) -> Any:
        if self._gzip:
            return zlib.decompressobj(wbits=31)
        return self._zstd.ZstdDecompressor().decompressobj()

    def _fill(self) -> None:
        """Decompress the next chunk into ``_out`` (may give nothing; sets ``_done`` at the end)."""
        chunk = self._pending or self._handle.read(_COMPRESSED_CHUNK)
        self._pending = b""
        if not self._in_member:
            if self._gzip:
                chunk = chunk.lstrip(b"\x00")  # gzip allows zero padding after a member
            if not chunk:
                if not self._handle_exhausted():
                    return
                self._done = True
                return
            self._decompressor = self._fresh()
            self._in_member = True
        elif not chunk:
            self._done = True
            self.truncated = True  # the input ended inside a member or frame
            return
        self._out = self._decompressor.decompress(chunk)
        self._pos = 0
        if self._decompressor.eof:
            self._in_member = False
            self._pending = self._decompressor.unused_data

    def _handle_exhausted(self) -> bool:
        more = self._handle.read(_COMPRESSED_CHUNK)
        if more:
            self._pending = more
            return False
        return True

    def readinto(self, buffer: Any) -> int:
        while self._pos >= len(self._out):
            if self._done:
                return 0
            self._fill()
        n = min(len(buffer), len(self._out) - self._pos)
        buffer[:n] = self._out[self._pos : self._pos + n]
        self._pos += n
        return n

    def read(self, size: int = -1) -> bytes:
        """Up to ``size`` bytes (everything when negative); fewer only at the end."""
        parts: list[bytes] = []
        have = 0
        while size < 0 or have < size:
            if self._pos >= len(self._out):
                if self._done:
                    break
                self._fill()
                continue
            take = len(self._out) - self._pos if size < 0 else min(size - have, len(self._out) - self._pos)
            parts.append(self._out[self._pos : self._pos + take] if take < len(self._out) else self._out)
            self._pos += take
            have += take
        return b"".join(parts)


def open_decompressed(source: SourceFile, handle: Any) -> Any:
    """``handle`` (the file's bytes as stored) decompressed as the source's compression says."""
    return handle if source.compression is None else _Decompressed(handle, source.compression)


def truncated_message(source: SourceFile, what: str) -> str:
    """The message of the ``truncated`` record of a compressed stream that ends early."""
    kind = {"gzip": "gzip", "zstd": "Zstandard"}.get(source.compression or "", source.compression or "")
    return (f"the {kind} stream ends early (the file is cut): {what}; every complete record "
            "before the cut is kept, anything after it is lost")


def head(source: SourceFile) -> bytes:
    """The first :data:`HEAD_BYTES` of a source, decompressed (what detection looks at).

    Raises
    ------
    OSError
        The file cannot be read, or its compressed data is corrupt (one line).
    """
    import zstandard

    try:
        with source.fs.open(source.path, "rb") as stored:
            data: bytes = open_decompressed(source, stored).read(HEAD_BYTES)
            return data
    except (zlib.error, zstandard.ZstdError) as exc:
        # discover_sources turns an OSError into its one line ("cannot read <file>: ...").
        kind = {"gzip": "gzip", "zstd": "Zstandard"}.get(source.compression or "", source.compression)
        msg = f"not {kind} data, or corrupt ({exc})"
        raise OSError(msg) from exc


class LineSplitter:
    r"""Blocks of bytes split into lines: the one line splitter of every line-based reader.

    The lines are what iterating the binary file gives, the newline and any
    carriage return taken off (``bytes.split`` at ``\n``, then
    ``rstrip(b"\r\n")``), numbered from 1. A line the blocks so far have
    not ended waits for the next block; after the last block,
    :meth:`unfinished` is the file's last line if it had no newline (or, for a
    cut stream, the unfinished line of the cut), and :attr:`next_line` its
    number.
    """

    def __init__(self) -> None:
        self.next_line = 1
        self._pending: list[bytes] = []  # the start of a line that the blocks read so far have not ended

    def split(self, blocks: Iterable[bytes]) -> Iterator[tuple[int, list[bytes]]]:
        """The number of each block's first complete line and the block's complete lines."""
        for block in blocks:
            if block.rfind(b"\n") < 0:
                self._pending.append(block)
                continue
            lines = block.split(b"\n")
            if self._pending:  # the block's first piece ends the line the earlier blocks began
                lines[0] = b"".join((*self._pending, lines[0]))
            tail = lines.pop()
            self._pending = [tail] if tail else []
            yield self.next_line, [line.rstrip(b"\r\n") for line in lines]
            self.next_line += len(lines)

    def unfinished(self) -> bytes:
        """The bytes after the last newline (empty when the blocks ended with one)."""
        return b"".join(self._pending)
