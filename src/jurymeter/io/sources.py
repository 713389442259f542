"""Finding source files and reading them in bounded batches of raw records.

A source is a JSON Lines (plain, ``.gz``, ``.zst``), CSV (plain, ``.gz``) or
Parquet file on the local disk or on S3. Reading never interprets values: it
yields each batch as a polars frame with the columns as they came, the 1-based
line (JSONL, CSV) or row (Parquet) of every record, and the lines that could not
be parsed at all. Validation happens in :mod:`jurymeter.io.validate`.

Reading loses nothing (``docs/schema.md``): ids arrive as the text the file
wrote (the fast parsers step aside where they would change one); a field that
is not valid text (invalid UTF-8, an unpaired surrogate escape) makes its record
an ``invalid_text`` :class:`MalformedRecord`, never a replaced character; a
compressed stream that ends early keeps every complete record and ends with a
``truncated`` one; a byte-order mark is dropped; a file that cannot be read as
its format at all is one :class:`~jurymeter.errors.SourceError` line.

Memory is bounded by ``block_bytes`` (JSONL, CSV) or ``parquet_rows`` (Parquet),
never by the size of the file.
"""

from __future__ import annotations

import csv
import dataclasses
import glob as globmod
import hashlib
import io
import json
import os
import re
import stat
import threading
import zlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any, Literal

import fsspec
import numpy as np
import orjson
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

# Prefix of a text value that was a JSON boolean, array or object (slow path only).
NOT_SCALAR = "\x1e"

DEFAULT_BLOCK_BYTES = 64 * 1024 * 1024
DEFAULT_PARQUET_ROWS = 500_000


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


def discover_sources(
    specs: list[str], *, storage_options: dict[str, Any] | None = None, log_format: str = "auto"
) -> list[SourceFile]:
    """Expand files, folders and globs into an ordered, de-duplicated list of sources.

    ``log_format``: ``"auto"`` recognises each file's format from its content
    (:func:`jurymeter.io.adapters.detect`: MT-Bench, Arena-Hard-Auto,
    AlpacaEval, inspect_ai, else canonical records); ``"canonical"`` reads
    every file as canonical records; an adapter's name reads every file with it.

    A file that cannot be read (a dangling symbolic link, a FIFO, socket or
    device, no permission, a name that is not UTF-8, content detection cannot
    decode) is returned with :attr:`SourceFile.unreadable` set to the reason,
    in bounded time (a FIFO is never opened): the ingest reports it and goes on
    with the others.

    Raises
    ------
    SourceError
        When a spec matches nothing, names a single file of unsupported format,
        or a file cannot be read by the format asked for.
    """
    found = _discover(specs, storage_options)
    if log_format == "canonical":
        refused = [s for s in found.values() if s.format in DOCUMENT_FORMATS and s.unreadable is None]
        if refused:
            msg = (f"{refused[0].url}: a .{refused[0].format} file is read only by a log adapter "
                   "(--format auto, alpaca-eval or inspect), not as canonical records")
            raise SourceError(msg)
        return list(found.values())
    from jurymeter.io.adapters import adapter, detect
    from jurymeter.io.adapters.reading import head

    out = []
    for source in found.values():
        if source.unreadable is not None:
            out.append(source)
            continue
        if log_format == "auto":
            try:
                chosen = detect(head(source), source.url)
            except _DETECT_FAILURES as exc:  # a file its decoder refuses: this file only
                out.append(dataclasses.replace(source, unreadable=f"cannot read: {_short(exc)}"))
                continue
            if chosen is None and source.format in DOCUMENT_FORMATS:
                if len(found) == 1:
                    msg = (f"{source.url}: not a log format jurymeter reads (a .{source.format} file must be "
                           "an AlpacaEval annotations.json or an inspect_ai log)")
                    raise SourceError(msg)
                continue  # a folder may hold other .json files (configs, PROVENANCE.json)
        else:
            chosen = adapter(log_format)
            if not source.url.lower().endswith(chosen.suffixes):
                msg = f"{source.url}: the {chosen.name} format reads {', '.join(chosen.suffixes)} files"
                raise SourceError(msg)
        out.append(dataclasses.replace(source, adapter=chosen.name if chosen is not None else None))
    if not out:
        msg = f"source not found: {', '.join(specs)} holds no judgment log jurymeter reads"
        raise SourceError(msg)
    return out


def _detect_failures() -> tuple[type[BaseException], ...]:
    """What reading a file's head may raise for a file its decoder refuses (cut, not gzip, not zstd)."""
    kinds: list[type[BaseException]] = [OSError, EOFError, ValueError, SourceError]
    try:
        import zstandard
    except ImportError:  # pragma: no cover - fsspec's zstd codec needs it, so it is there when used
        pass
    else:
        kinds.append(zstandard.ZstdError)
    return tuple(kinds)


_DETECT_FAILURES = _detect_failures()

_KINDS = (
    (stat.S_ISFIFO, "a FIFO (named pipe)"),
    (stat.S_ISSOCK, "a socket"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
)


def _local_problem(path: str) -> tuple[str | None, int, bool]:
    """Why a local path cannot be read as a source (``None`` if it can), its size, and whether it is a folder.

    Only ``stat`` calls and, for a regular file, an open and close: never a
    read, and never an open of a FIFO (which would wait for a writer).
    """
    try:
        st = os.stat(path)
    except FileNotFoundError:
        target = os.readlink(path) if os.path.islink(path) else None
        if target is not None:
            return f"dangling symbolic link (its target {_escaped(target)} does not exist)", 0, False
        return "the file disappeared while the folder was listed", 0, False
    except OSError as exc:  # ELOOP (a symbolic link loop), EACCES on a folder on the way...
        return f"cannot read: {exc.strerror or _short(exc)}", 0, False
    if stat.S_ISDIR(st.st_mode):
        return None, 0, True
    if not stat.S_ISREG(st.st_mode):
        kind = next((name for test, name in _KINDS if test(st.st_mode)), "not a regular file")
        return f"not a regular file: {kind}", 0, False
    try:
        os.close(os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC))
    except OSError as exc:  # EACCES: no permission
        return f"cannot read: {exc.strerror or _short(exc)}", int(st.st_size), False
    return None, int(st.st_size), False


def _escaped(name: str) -> str:
    r"""A file name as printable text: bytes that are not UTF-8 as ``\xNN`` (never a surrogate)."""
    return os.fsencode(name).decode("utf-8", "backslashreplace") if _not_utf8(name) else name


def _not_utf8(name: str) -> bool:
    try:
        name.encode("utf-8")
    except UnicodeEncodeError:  # os.fsdecode's surrogate escapes of bytes that are not UTF-8
        return True
    return False


def _discover(specs: list[str], storage_options: dict[str, Any] | None) -> dict[str, SourceFile]:
    """Every supported file the specs name, by URL, in order; those that cannot be read marked why."""
    found: dict[str, SourceFile] = {}
    for spec in specs:
        if spec.startswith("s3://"):
            try:
                fs, path = filesystem_for(spec, storage_options)
                candidates, explicit = _candidates(fs, path, spec)
            except SourceError:
                raise
            except Exception as exc:  # s3fs/botocore raise many types for one cause
                msg = f"cannot read {spec}: {_short(exc)}"
                raise SourceError(msg) from exc
        else:
            fs, path = filesystem_for(spec, storage_options)
            candidates, explicit = _candidates(fs, path, spec)
        scheme = "s3://" if spec.startswith("s3://") else ""
        matched = 0
        for candidate in candidates:
            kind = format_of(candidate)
            if kind is None:
                if explicit:
                    msg = (
                        f"unsupported source format: {_escaped(spec)} (expected .jsonl, .ndjson, "
                        ".jsonl.gz, .jsonl.zst, .csv, .csv.gz, .parquet, or a log adapter's "
                        ".json / .eval)"
                    )
                    raise SourceError(msg)
                continue
            problem: str | None
            if scheme:
                try:
                    if fs.isdir(candidate):
                        continue
                    problem, size = None, int(fs.size(candidate))
                except Exception as exc:  # s3fs/botocore raise many types for one cause
                    problem, size = f"cannot read: {_short(exc)}", 0
            else:
                problem, size, is_dir = _local_problem(candidate)
                if is_dir:
                    continue
            if _not_utf8(candidate):
                # Its name could be neither stored (the markers are JSON) nor printed as it is.
                problem = "file name is not UTF-8 (rename it)"
            url = scheme + _escaped(candidate)
            if url not in found:
                found[url] = SourceFile(
                    url=url,
                    path=candidate,
                    fs=fs,
                    format=kind[0],
                    compression=kind[1],
                    size=size,
                    unreadable=problem,
                )
            matched += 1
        if matched == 0:
            msg = f"source not found: {_escaped(spec)} matches no .jsonl/.csv/.parquet/.json/.eval file"
            raise SourceError(msg)
    return found


def _candidates(fs: Any, path: str, spec: str) -> tuple[list[str], bool]:
    """Paths a spec names, and whether it named one file explicitly."""
    if globmod.has_magic(path):
        return sorted(fs.glob(path)), False
    if fs.isdir(path):
        return sorted(fs.find(path)), False
    if fs.exists(path):
        return [path], True
    if not spec.startswith("s3://") and os.path.lexists(path):
        return [path], True  # a dangling symbolic link: discovery says so, it is not "not found"
    msg = f"source not found: {_escaped(spec)}"
    raise SourceError(msg)


def _short(exc: BaseException) -> str:
    """One line of an exception, without anything that could carry a credential."""
    text = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
    return text[:200]


def content_sha256(source: SourceFile, chunk: int = 8 * 1024 * 1024) -> str:
    """SHA-256 of the file's bytes as stored (compressed files are not decompressed)."""
    digest = hashlib.sha256()
    try:
        with source.fs.open(source.path, "rb") as handle:
            while block := handle.read(chunk):
                digest.update(block)
    except Exception as exc:  # fsspec/botocore raise many types for one cause
        first = str(exc).splitlines()[0][:200] if str(exc) else type(exc).__name__
        msg = f"cannot read {source.url}: {first}"
        raise SourceError(msg) from exc
    return digest.hexdigest()


@dataclass(frozen=True, slots=True)
class TextCensus:
    """What a JSON Lines file's bytes say, independently of any parser."""

    lines: int  # physical lines (a last line without a newline counts)
    key_marks: int  # occurrences of '":', the end of every object key
    null_marks: int  # occurrences of '":null' and '": null', a key whose value is null
    string_marks: int = 0  # occurrences of '":"' and '": "', a key whose value is a string
    escapes: bool = False  # whether it may hold an unpaired surrogate escape (has_unpaired_escape)

    @property
    def values(self) -> int:
        """Non-null values the text holds, if no string value contains a mark."""
        return self.key_marks - self.null_marks


_LOOKAHEAD = 6  # bytes after a colon that ': null' needs
_ESCAPE_OVERLAP = 12  # bytes of the previous chunk an escape pair may start in


def _marks(data: np.ndarray, start: int, stop: int) -> tuple[int, int, int]:
    """Key marks, null marks and string marks whose colon is at ``start <= index < stop``.

    Needs ``start >= 1`` and ``stop <= len(data) - _LOOKAHEAD`` (the bytes on
    both sides of each colon). Gathers only at colons, then only at the few
    followed by ``n``, a quote or a space, so it stays near memory speed.
    """
    colons = np.flatnonzero(data[start:stop] == 58) + start
    colons = colons[data[colons - 1] == 34]
    first = data[colons + 1]
    tight = colons[first == 110]  # '":n...'
    spaced = colons[first == 32]  # '": ...'
    strings = np.count_nonzero(first == 34) + np.count_nonzero(data[spaced + 2] == 34)
    nulls = np.count_nonzero(
        (data[tight + 2] == 117) & (data[tight + 3] == 108) & (data[tight + 4] == 108)
    )
    spaced = spaced[data[spaced + 2] == 110]
    nulls += np.count_nonzero(
        (data[spaced + 3] == 117) & (data[spaced + 4] == 108) & (data[spaced + 5] == 108)
    )
    return len(colons), int(nulls), int(strings)


def text_census(
    source: SourceFile, chunk: int = 8 * 1024 * 1024, cancel: threading.Event | None = None
) -> TextCensus | None:
    """Count lines, key, null and string marks of an uncompressed text file (numpy: no GIL held).

    The streaming path proves it lost nothing by comparing these with what the
    parser produced: one row per line, one non-null value per key mark that
    is not followed by ``null``, one text value per mark followed by a quote
    (so no number was turned into text), and no unpaired surrogate escape
    (which polars reads as NUL). Colons near a chunk's end wait for the next
    chunk, which starts with the bytes they need on both sides. Returns
    ``None`` when ``cancel`` is set before the end (checked between chunks).
    """
    lines = marks = nulls = strings = 0
    escapes = False
    carry = b"\n"  # one byte of context before the first colon
    tail = b""  # the previous chunk's last bytes, for an escape cut by the chunk's edge
    last = 10
    with source.fs.open(source.path, "rb") as handle:
        while block := handle.read(chunk):
            if cancel is not None and cancel.is_set():
                return None
            data = np.frombuffer(carry + block, dtype=np.uint8)
            lines += int(np.count_nonzero(data[len(carry) :] == 10))
            stop = max(1, len(data) - _LOOKAHEAD)
            found = _marks(data, 1, stop)
            marks, nulls, strings = marks + found[0], nulls + found[1], strings + found[2]
            if not escapes and (block.find(b"\\") >= 0 or tail.find(b"\\") >= 0):  # memchr; rare: copy
                escapes = has_unpaired_escape(tail + block)
            tail = block[-_ESCAPE_OVERLAP:]
            carry = (carry + block)[stop - 1 :]
            last = block[-1]
    padded = np.frombuffer(carry + bytes(_LOOKAHEAD), dtype=np.uint8)
    found = _marks(padded, 1, len(carry))
    marks, nulls, strings = marks + found[0], nulls + found[1], strings + found[2]
    return TextCensus(
        lines=lines + (0 if last == 10 else 1), key_marks=marks, null_marks=nulls,
        string_marks=strings, escapes=escapes,
    )


def read_batches(
    source: SourceFile,
    *,
    block_bytes: int = DEFAULT_BLOCK_BYTES,
    parquet_rows: int = DEFAULT_PARQUET_ROWS,
    text_fields: frozenset[str] | None = None,
) -> Iterator[RawBatch]:
    """Yield the records of ``source`` in batches of bounded size.

    ``text_fields`` names the source columns whose values must not be a JSON
    boolean, array or object passed off as text (the columns that become ids);
    ``None`` checks every text column.

    Raises
    ------
    SourceError
        The file cannot be read as its format at all (not gzip or Zstandard
        data, corrupt compressed data, not a Parquet file, a CSV header that
        is not UTF-8, a file holding only a byte-order mark): one line naming
        the file. A compressed stream that merely ends early is no error: the
        records before the cut are yielded and the cut one is a ``truncated``
        :class:`MalformedRecord`.
    """
    import zstandard  # here: importing it costs only the readers that may need it

    try:
        if source.format == "jsonl":
            yield from _jsonl_batches(source, block_bytes, text_fields)
        elif source.format == "csv":
            yield from _csv_batches(source, block_bytes)
        else:
            yield from _parquet_batches(source, parquet_rows)
    except SourceError:
        raise
    except (zlib.error, zstandard.ZstdError) as exc:
        raise SourceError(undecompressable(source, exc)) from exc
    except (OSError, EOFError) as exc:
        msg = f"cannot read {source.url}: {_short(exc)}"
        raise SourceError(msg) from exc


def undecompressable(source: SourceFile, exc: BaseException) -> str:
    """One line: the source's compressed data is not what its name says, or is corrupt."""
    kind = {"gzip": "gzip", "zstd": "Zstandard"}.get(source.compression or "", source.compression or "")
    return f"cannot read {source.url}: not {kind} data, or corrupt ({_short(exc)})"


# ---------------------------------------------------------------- decompression

_BOM = b"\xef\xbb\xbf"
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


# ---------------------------------------------------------------- text


def escaped(data: bytes) -> str:
    r"""Bytes as text, any invalid UTF-8 byte written as ``\xNN`` (what quarantine keeps)."""
    return data.decode("utf-8", "backslashreplace")


def escape_text(text: str) -> str:
    r"""A str holding lone surrogates as valid text: ``\xNN`` for a byte it was decoded from, else ``\uDNNN``."""
    try:
        return text.encode("utf-8").decode("utf-8")
    except UnicodeEncodeError:
        return "".join(
            c if not 0xD800 <= ord(c) <= 0xDFFF
            else (f"\\x{ord(c) - 0xDC00:02x}" if 0xDC80 <= ord(c) <= 0xDCFF else f"\\u{ord(c):04x}")
            for c in text
        )


def is_text(value: str) -> bool:
    """Whether ``value`` is valid text (no lone surrogate: neither an undecodable byte nor an unpaired escape)."""
    if value.isascii():
        return True
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _json_is_text(value: Any) -> bool:
    """Whether every string of a parsed JSON value (keys included) is valid text."""
    if isinstance(value, str):
        return is_text(value)
    if isinstance(value, dict):
        return all(is_text(k) and _json_is_text(v) for k, v in value.items())
    if isinstance(value, list):
        return all(_json_is_text(v) for v in value)
    return True


def invalid_text_message(name: str, value: Any, *, bytes_invalid: bool) -> str:
    """``field 'x' is not valid text (...): <the value, escaped>`` for an ``invalid_text`` record."""
    why = "invalid UTF-8 bytes" if bytes_invalid else "an unpaired surrogate escape"
    shown = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    # Quoted by hand: repr would double the backslash of each \\xNN.
    return f"field '{escape_text(name)}' is not valid text ({why}): \"{escape_text(shown)[:60]}\""


def _invalid_fields(record: dict[str, Any]) -> list[str]:
    """The fields (top-level keys) of a parsed record whose name or value holds a lone surrogate."""
    return [k for k, v in record.items() if not (is_text(k) and _json_is_text(v))]


# ---------------------------------------------------------------- JSON Lines


def _open_text_blocks(source: SourceFile, block_bytes: int) -> Iterator[bytes | MalformedRecord]:
    """Decompressed blocks of whole lines, each ending at a newline (but the file's last).

    A final line without a newline joins the last block instead of becoming a
    block (and a Parquet part) of its own. Each block is copied once. A
    byte-order mark at the start is dropped; a file of nothing but one is a
    :class:`SourceError`. A compressed stream that ends early ends with a
    ``truncated`` record (its ``line`` is the number of lines before it,
    which the caller adds to) instead of the unfinished last line.
    """
    with source.fs.open(source.path, "rb") as stored:
        handle = open_decompressed(source, stored)
        carry = b""
        pending: bytes | None = None
        first = True
        while True:
            block = handle.read(block_bytes)
            if first:
                first = False
                while 0 < len(block) < len(_BOM) and _BOM.startswith(block):
                    more = handle.read(block_bytes)
                    if not more:
                        break
                    block += more
                if block.startswith(_BOM):
                    block = block[len(_BOM) :] or handle.read(block_bytes)
                    if not block:
                        msg = f"{source.url}: the file holds only a byte-order mark, no records"
                        raise SourceError(msg)
            if not block:
                break
            cut = block.rfind(b"\n")
            if cut < 0:
                carry += block
                continue
            if pending is not None:
                yield pending
            pending = b"".join((carry, memoryview(block)[: cut + 1]))
            carry = block[cut + 1 :]
        if getattr(handle, "truncated", False):
            # The unfinished last line is the cut record: never parsed (a cut number still parses).
            if pending:
                yield pending
            yield MalformedRecord(
                _count_lines(pending or b""), escaped(carry),
                truncated_message(source, "the last line is incomplete" if carry else "it ends at a line's end"),
                "truncated",
            )
            return
        if pending is not None and carry:
            pending += carry
        elif carry:
            pending = carry
        if pending:
            yield pending


def _line_starts(block: bytes) -> np.ndarray:
    """Byte offsets at which each physical line of ``block`` starts."""
    newlines = np.flatnonzero(np.frombuffer(block, dtype=np.uint8) == 10)
    starts = np.concatenate(([0], newlines + 1))
    return starts[starts < len(block)] if len(block) else starts[:0]


def _slice_lines(block: bytes, starts: np.ndarray, which: np.ndarray) -> list[str]:
    r"""The text of the given lines, an invalid UTF-8 byte written as ``\xNN`` (``escaped``)."""
    out = []
    for k in which:
        begin = int(starts[k])
        end = int(starts[k + 1]) if k + 1 < len(starts) else len(block)
        out.append(escaped(block[begin:end].rstrip(b"\r\n")))
    return out


def _jsonl_batches(
    source: SourceFile, block_bytes: int, text_fields: frozenset[str] | None
) -> Iterator[RawBatch]:
    first_line = 1
    for block in _open_text_blocks(source, block_bytes):
        if isinstance(block, MalformedRecord):
            cut = dataclasses.replace(block, line=first_line)
            yield RawBatch(frame=pl.DataFrame(), lines=np.zeros(0, dtype=np.int64), malformed=[cut],
                           raw=lambda rows: [])
            return
        batch, n_lines = _parse_jsonl_block(block, first_line, text_fields)
        yield batch
        first_line += n_lines


def _count_lines(block: bytes) -> int:
    if not block:
        return 0
    return block.count(b"\n") + (0 if block.endswith(b"\n") else 1)


# A \u escape of a surrogate code point: polars reads an unpaired high surrogate
# as NUL and fails on every other unpaired form (tests/test_hostile_ingest.py
# holds it to that). A false alarm (an escaped backslash before "ud800") only
# costs the slow path.
_SURROGATE_ESCAPE = re.compile(rb"\\u[dD][89a-fA-F]")
_UNPAIRED = re.compile(
    rb"\\u[dD][89abAB][0-9a-fA-F]{2}(?!\\u[dD][c-fC-F][0-9a-fA-F]{2})"
    rb"|(?<!\\u[dD][89abAB][0-9a-fA-F]{2})\\u[dD][c-fC-F][0-9a-fA-F]{2}"
)
# What a text id column's value starts with when polars may have changed it: an
# object, array or boolean turned into text, or a number (polars writes a JSON
# number in a text column its own way: 1.50 as "1.5", 1.0 as "1").
_SUSPECT_ID = r"^(?:[-0-9{\[]|true$|false$)"


def has_unpaired_escape(block: bytes) -> bool:
    """Whether ``block`` may hold an unpaired surrogate escape (conservative: never misses one)."""
    if block.find(b"\\") < 0:  # memchr: no escape at all, the common case
        return False
    found = _SURROGATE_ESCAPE.search(block)
    return found is not None and _UNPAIRED.search(block, found.start()) is not None


def _fast_frame(
    block: bytes, n_lines: int, text_fields: frozenset[str] | None = None
) -> tuple[pl.DataFrame, np.ndarray | None] | None:
    """Parse a block with polars' reader when that provably loses nothing.

    polars infers the schema from the first rows and silently drops keys first
    seen later, and skips blank lines. So the result is accepted only if its rows
    match the non-blank lines one to one and every ``"key":`` in the text maps to
    a non-null parsed value; otherwise the block is re-read with full inference,
    and if that fails, line by line. polars refuses invalid UTF-8 (the slow
    path then quarantines the lines that hold it), but reads an unpaired
    surrogate escape as NUL and a number as its own text: a block that may
    hold such an escape, whose id column is a float column, or whose text id
    column may hold a number (:func:`_text_as_written`) takes the slow path,
    which keeps ids as written. Returns the frame and, when the block has
    blank lines, the 0-based indices of the lines its rows came from.
    """
    kept: np.ndarray | None = None
    for infer in (100, None):
        try:
            frame = pl.read_ndjson(io.BytesIO(block), infer_schema_length=infer)
        except Exception:  # polars raises several types for one cause: bad input
            return None
        if frame.height != n_lines:
            if kept is None:
                kept = _non_blank_lines(block)
            if frame.height != len(kept):
                return None
        keys_in_text = block.count(b'":')
        keys_parsed = sum(frame.height - c.null_count() for c in frame.iter_columns())
        if keys_in_text == keys_parsed or infer is None:
            if _float_ids(frame, text_fields) or not _text_as_written(block, frame, text_fields):
                return None
            return frame, kept
    return None


def _float_ids(frame: pl.DataFrame, text_fields: frozenset[str] | None) -> bool:
    """Whether an id column was read as floats (its text as written is lost there).

    Without ``text_fields`` nothing is known to be an id (a score is a float):
    no column is.
    """
    return text_fields is not None and any(t.is_float() and c in text_fields for c, t in frame.schema.items())


def _text_as_written(block: bytes, frame: pl.DataFrame, text_fields: frozenset[str] | None) -> bool:
    """Whether polars' text columns hold the text as written: no surrogate escape read as NUL, no id changed.

    One ``select`` (its expressions run in parallel) asks two things:

    - only with a backslash in the block: does a text column hold NUL? polars
      reads an unpaired surrogate escape as NUL (and fails on every other
      unpaired form), so a NUL (or a nested column, not searched) sends the
      block to the exact check :func:`has_unpaired_escape`;
    - does a text id column hold a value that starts like a number, an object
      or an array, or is ``true``/``false``? polars turns a column that mixes
      strings with those into text, and a number's text (``1.50`` becomes
      ``"1.5"``) or the type is lost. A boolean or object sends the block to
      the slow path (which keeps the type); a number-like value is proven a
      string by counting the column's ``"key":"`` marks against its values (a
      real id that merely looks like a number costs that count, or the slow
      path when the counts differ).
    """
    nested = any(isinstance(t, pl.Struct | pl.List | pl.Array) for t in frame.dtypes)
    strings = [c for c, t in frame.schema.items() if t == pl.String]
    ids = [c for c in strings if text_fields is None or c in text_fields]
    escapes = block.find(b"\\") >= 0  # memchr: no escape at all is the common case
    nul = [pl.col(c).str.contains("\x00", literal=True).any().alias(f"nul:{c}") for c in strings] if escapes else []
    suspect = [pl.col(c).str.contains(_SUSPECT_ID).any().alias(f"id:{c}") for c in ids]
    if not nul and not suspect:
        return not (escapes and nested and has_unpaired_escape(block))
    found = frame.select(*nul, *suspect).row(0)
    if escapes and (nested or any(found[: len(nul)])) and has_unpaired_escape(block):
        return False
    for name, flagged in zip(ids, found[len(nul) :], strict=True):
        if not flagged:
            continue
        column = frame[name]
        if column.str.starts_with("{").any() or column.str.starts_with("[").any() or column.is_in(["true", "false"]).any():
            return False
        key = orjson.dumps(name) + b":"
        values = column.len() - column.null_count()
        # Without nested values, '"name":' occurs only as this column's key (a string's
        # content holds no bare quote), so string-valued occurrences = values proves
        # that none was a number. Nested ones may share the name: all occurrences then.
        marks = block.count(key + b'"')
        if marks != values:
            marks += block.count(key + b' "')
        if marks != values or (nested and block.count(key) != marks):
            return False
    return True


def _non_blank_lines(block: bytes) -> np.ndarray:
    """Indices of the lines that hold more than whitespace (rare path: blank lines)."""
    lines = block.split(b"\n")
    if block.endswith(b"\n"):
        lines.pop()
    return np.asarray([k for k, line in enumerate(lines) if line.strip()], dtype=np.int64)


class _Number(str):
    """A JSON number's text exactly as written (what :func:`_verbatim` reads numbers as)."""

    __slots__ = ()


def _verbatim(text: str) -> Any:
    """``text`` parsed with every number kept as its text (:class:`_Number`)."""
    return json.loads(text, parse_int=_Number, parse_float=_Number, parse_constant=_Number)


def _integer(text: str) -> int | str:
    return int(text) if len(text) < 4000 else _Number(text)


def _parse_line(line: bytes) -> tuple[Any, str | None, bool]:
    """``(value, error, bytes_invalid)`` of one JSON line; ``value`` may hold lone surrogates then.

    orjson first (it refuses invalid UTF-8 and unpaired surrogate escapes);
    then Python's ``json`` on the text with undecodable bytes as lone
    surrogates (``surrogateescape``), which also reads NaN and Infinity.
    """
    try:
        return orjson.loads(line), None, False
    except orjson.JSONDecodeError as exc:
        first_error = str(exc)
    try:
        text = line.decode("utf-8")
        bytes_invalid = False
    except UnicodeDecodeError:
        text = line.decode("utf-8", "surrogateescape")
        bytes_invalid = True
    try:  # an integer too long for int() (4300 digits) is kept as its text
        return json.loads(text, parse_int=_integer), None, bytes_invalid
    except (ValueError, RecursionError):
        return None, f"not valid JSON: {first_error}", bytes_invalid


def _parse_jsonl_block(
    block: bytes, first_line: int, text_fields: frozenset[str] | None = None
) -> tuple[RawBatch, int]:
    """Records of one block of whole lines, and the number of physical lines in it."""
    n_lines = _count_lines(block)
    parsed = _fast_frame(block, n_lines, text_fields) if n_lines else (pl.DataFrame(), None)
    if parsed is not None:
        frame, kept = parsed
        index = np.arange(n_lines, dtype=np.int64) if kept is None else kept

        # Line offsets are only needed to quote rejected records; find them then.
        def raw(rows: np.ndarray) -> list[str]:
            return _slice_lines(block, _line_starts(block), index[rows])

        batch = RawBatch(frame=frame, lines=first_line + index, malformed=[], raw=raw)
        return batch, n_lines
    starts = _line_starts(block)
    # Slow path: one line at a time, so a bad line costs only itself.
    records: list[dict[str, Any]] = []
    kept_rows: list[int] = []
    malformed: list[MalformedRecord] = []
    ends = np.append(starts[1:], len(block))
    for k in range(n_lines):
        line = block[int(starts[k]) : int(ends[k])].rstrip(b"\r\n")
        if not line.strip():
            continue
        value, error, bytes_invalid = _parse_line(line)
        if error is not None:
            malformed.append(MalformedRecord(first_line + k, escaped(line), error))
            continue
        if not isinstance(value, dict):
            kind = type(value).__name__
            malformed.append(
                MalformedRecord(first_line + k, escaped(line), f"expected a JSON object, got {kind}")
            )
            continue
        # Lone surrogates come only from invalid bytes or a surrogate escape (orjson refuses both).
        bad = _invalid_fields(value) if (bytes_invalid or _maybe_surrogates(line)) else []
        if bad:
            message = "; ".join(invalid_text_message(n, value[n], bytes_invalid=bytes_invalid) for n in bad)
            malformed.append(MalformedRecord(first_line + k, escaped(line), message, "invalid_text"))
            continue
        record = {key: _as_text(v) for key, v in value.items()}
        exact = [
            key for key, v in value.items()
            if isinstance(v, float) and ((text_fields is not None and key in text_fields) or not -(2.0**63) <= v < 2.0**63)
        ]
        if exact:
            # A float id, or an integer orjson read as a float (beyond 64 bits): its text as written.
            numbers = _verbatim(line.decode("utf-8"))
            for key in exact:
                record[key] = str.__str__(numbers[key])
        records.append(record)
        kept_rows.append(k)
    kept_idx = np.asarray(kept_rows, dtype=np.int64)
    batch = RawBatch(
        frame=_frame_of_text_records(records),
        lines=first_line + kept_idx,
        malformed=malformed,
        raw=lambda rows: _slice_lines(block, starts, kept_idx[rows]),
    )
    return batch, n_lines


def _maybe_surrogates(line: bytes) -> bool:
    """Whether a valid UTF-8 line may have parsed into lone surrogates (it has a surrogate escape)."""
    return _SURROGATE_ESCAPE.search(line) is not None


def _as_text(value: Any) -> str | None:
    """A JSON value as text; booleans, arrays and objects carry :data:`NOT_SCALAR`.

    The marker keeps the slow path's verdicts equal to the fast path's, where
    such values arrive as boolean, list or struct columns: never an id or number.
    """
    if value is None or isinstance(value, str):
        return value
    if isinstance(value, bool):
        return NOT_SCALAR + ("true" if value else "false")
    if isinstance(value, int | float):
        return repr(value) if isinstance(value, float) else str(value)
    return NOT_SCALAR + orjson.dumps(value).decode()


def _frame_of_text_records(records: list[dict[str, str | None]]) -> pl.DataFrame:
    columns: dict[str, list[str | None]] = {}
    for k, record in enumerate(records):
        for key, value in record.items():
            column = columns.get(key)
            if column is None:
                column = columns[key] = [None] * k
            column.append(value)
        for column in columns.values():
            if len(column) == k:
                column.append(None)
    return pl.DataFrame(
        {key: pl.Series(key, values, dtype=pl.String) for key, values in columns.items()},
        height=len(records),
    )


# ---------------------------------------------------------------- CSV


def _csv_batches(source: SourceFile, block_bytes: int) -> Iterator[RawBatch]:
    """CSV through the standard library's reader, which knows quoting and arity.

    Every value is text; an empty field is missing. A byte-order mark before
    the header is dropped. Bytes that are not UTF-8 are read as lone
    surrogates (``surrogateescape``) so that a row holding them is
    quarantined as ``invalid_text`` naming its column, its raw text escaped;
    in the header they are a :class:`SourceError`. A compressed stream that
    ends early ends with a ``truncated`` record instead of its unfinished row.
    """
    with source.fs.open(source.path, "rb") as stored:
        binary = open_decompressed(source, stored)
        buffered = io.BufferedReader(binary) if binary is not stored else binary
        handle = io.TextIOWrapper(buffered, encoding="utf-8", errors="surrogateescape", newline="")
        physical: list[str] = []
        cut: list[str] = []  # the unfinished last line of a stream that ends early
        bom: list[bool] = []

        def lines_iter() -> Iterator[str]:
            previous: str | None = None
            for line in handle:
                if not bom:
                    bom.append(line.startswith("\ufeff"))
                    line = line.removeprefix("\ufeff")
                    if not line:
                        continue
                if previous is not None:
                    physical.append(previous)
                    yield previous
                previous = line
            if previous is None:
                return
            if getattr(binary, "truncated", False) and not previous.endswith(("\n", "\r")):
                cut.append(previous)
                return
            physical.append(previous)
            yield previous

        reader = csv.reader(lines_iter())
        try:
            header = next(reader)
        except StopIteration:
            if cut or getattr(binary, "truncated", False):
                yield _csv_cut(source, 1, cut)
            elif bom and bom[0]:
                msg = f"{source.url}: the file holds only a byte-order mark, no records"
                raise SourceError(msg) from None
            return
        except csv.Error as exc:
            msg = f"{source.url}: the CSV header cannot be read: {exc}"
            raise SourceError(msg) from exc
        header = [h.strip() for h in header]
        if not all(map(is_text, header)):
            shown = escape_text(",".join(header))[:200]
            msg = f"{source.url}: the CSV header is not valid UTF-8 text: \"{shown}\""
            raise SourceError(msg)
        width = len(header)
        rows: list[list[str]] = []
        raws: list[str] = []
        lines: list[int] = []
        malformed: list[MalformedRecord] = []
        size = 0
        while True:
            physical.clear()
            try:
                row = next(reader)
            except StopIteration:
                break
            except csv.Error as exc:
                text = escape_text("".join(physical).rstrip("\r\n"))
                malformed.append(MalformedRecord(reader.line_num, text, f"bad CSV: {exc}"))
                continue
            text = "".join(physical).rstrip("\r\n")
            first = reader.line_num - max(len(physical) - 1, 0)
            if not row or (len(row) == 1 and not row[0].strip()):
                continue
            if not text.isascii() and not is_text(text):
                # Named by the header's column (by position past its end); a byte outside every
                # field (a quote's neighbour) still makes the line invalid_text.
                message = "; ".join(
                    invalid_text_message(header[j] if j < width else f"#{j + 1}", v, bytes_invalid=True)
                    for j, v in enumerate(row)
                    if not is_text(v)
                ) or "the line is not valid text (invalid UTF-8 bytes)"
                malformed.append(MalformedRecord(first, escape_text(text), message, "invalid_text"))
            elif len(row) != width:
                malformed.append(
                    MalformedRecord(
                        first, text, f"expected {width} fields as in the header, got {len(row)}"
                    )
                )
            else:
                rows.append(row)
                raws.append(text)
                lines.append(first)
            size += len(text)
            if size >= block_bytes:
                yield _csv_batch(header, rows, raws, lines, malformed)
                rows, raws, lines, malformed, size = [], [], [], [], 0
        if cut or getattr(binary, "truncated", False):
            malformed.append(_csv_cut(source, reader.line_num + 1, cut).malformed[0])
        if rows or malformed:
            yield _csv_batch(header, rows, raws, lines, malformed)


def _csv_cut(source: SourceFile, line: int, cut: list[str]) -> RawBatch:
    """A batch of the one ``truncated`` record of a CSV stream that ends early."""
    text = "".join(cut)
    record = MalformedRecord(
        line, escape_text(text),
        truncated_message(source, "the last line is incomplete" if text else "it ends at a line's end"),
        "truncated",
    )
    return RawBatch(frame=pl.DataFrame(), lines=np.zeros(0, dtype=np.int64), malformed=[record],
                    raw=lambda rows: [])


def _csv_batch(
    header: list[str],
    rows: list[list[str]],
    raws: list[str],
    lines: list[int],
    malformed: list[MalformedRecord],
) -> RawBatch:
    columns = list(zip(*rows, strict=True)) if rows else [() for _ in header]
    frame = pl.DataFrame(
        {
            name: pl.Series(name, values, dtype=pl.String)
            for name, values in zip(_dedupe(header), columns, strict=True)
        },
        height=len(rows),
    ).with_columns(pl.all().replace("", None))
    return RawBatch(
        frame=frame,
        lines=np.asarray(lines, dtype=np.int64),
        malformed=malformed,
        raw=lambda which: [raws[int(k)] for k in which],
    )


def _dedupe(names: list[str]) -> list[str]:
    seen: dict[str, int] = {}
    out = []
    for name in names:
        n = seen.get(name, 0)
        out.append(name if n == 0 else f"{name}__{n}")
        seen[name] = n + 1
    return out


# ---------------------------------------------------------------- Parquet


def _parquet_batches(source: SourceFile, rows: int) -> Iterator[RawBatch]:
    """Parquet record batches; a file that is not Parquet is a :class:`SourceError`.

    pyarrow does not check that a string column is UTF-8, and polars takes
    what it is given: each batch is validated once (Arrow's full validation),
    and only a batch that fails it is read value by value, its invalid rows
    quarantined as ``invalid_text``. Binary columns are read as UTF-8 text the
    same way (an id written as bytes is the id).
    """
    import pyarrow as pa  # here, not at the top: most commands read no Parquet source
    import pyarrow.parquet as pq

    with source.fs.open(source.path, "rb") as handle:
        try:
            parquet = pq.ParquetFile(handle)
            batches = parquet.iter_batches(batch_size=rows)
            first = 1
            while True:
                try:
                    record_batch = next(batches)
                except StopIteration:
                    break
                yield _parquet_batch(record_batch, first, pa)
                first += record_batch.num_rows
        except pa.ArrowException as exc:
            msg = f"cannot read {source.url} as Parquet: {_short(exc)}"
            raise SourceError(msg) from exc


def _parquet_batch(record_batch: Any, first: int, pa: Any) -> RawBatch:
    """One Parquet batch as a raw batch, its rows with text that is not UTF-8 set aside."""
    texts = [j for j, f in enumerate(record_batch.schema)
             if pa.types.is_binary(f.type) or pa.types.is_large_binary(f.type)
             or pa.types.is_string(f.type) or pa.types.is_large_string(f.type)]
    binaries = [j for j in texts if not pa.types.is_string(record_batch.schema.field(j).type)
                and not pa.types.is_large_string(record_batch.schema.field(j).type)]
    try:
        record_batch.validate(full=True)
        clean = not binaries
    except pa.ArrowInvalid:
        clean = False
    n = record_batch.num_rows
    malformed: list[MalformedRecord] = []
    keep = np.arange(n)
    if clean:
        frame = pl.from_arrow(record_batch)
    else:
        columns: dict[str, Any] = {}
        bad_rows: dict[int, list[str]] = {}
        for j, f in enumerate(record_batch.schema):
            column = record_batch.column(j)
            if j not in texts:
                columns[f.name] = column
                continue
            values = column.view(pa.large_binary() if "large" in str(f.type) else pa.binary()).to_pylist()
            decoded: list[str | None] = []
            for row, value in enumerate(values):
                if value is None:
                    decoded.append(None)
                    continue
                try:
                    decoded.append(value.decode("utf-8"))
                except UnicodeDecodeError:
                    decoded.append(escaped(value))
                    bad_rows.setdefault(row, []).append(f.name)
            columns[f.name] = pa.array(decoded, type=pa.large_string())
        table = pa.table(columns)
        frame = pl.from_arrow(table)
        assert isinstance(frame, pl.DataFrame)
        for row in sorted(bad_rows):
            shown = orjson.dumps(frame.row(row, named=True), default=str).decode()
            message = "; ".join(
                f"field '{name}' is not valid text (invalid UTF-8 bytes): \"{frame[row, name][:60]}\""
                for name in bad_rows[row]
            )
            malformed.append(MalformedRecord(first + row, shown, message, "invalid_text"))
        keep = np.asarray([r for r in range(n) if r not in bad_rows], dtype=np.int64)
        frame = frame[keep.tolist()] if len(bad_rows) else frame
    assert isinstance(frame, pl.DataFrame)

    def raw(which: np.ndarray, frame: pl.DataFrame = frame) -> list[str]:
        picked = frame[which.tolist()]
        return [orjson.dumps(r, default=str).decode() for r in picked.to_dicts()]

    return RawBatch(
        frame=frame,
        lines=first + keep.astype(np.int64),
        malformed=malformed,
        raw=raw,
    )
