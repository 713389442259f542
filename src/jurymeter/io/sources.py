"""Finding source files and reading them in bounded batches of raw records.

A source is a JSON Lines (plain, ``.gz``, ``.zst``), CSV (plain, ``.gz``) or
Parquet file on the local disk or on S3. Reading never interprets values: it
yields each batch as a polars frame with the columns as they came, the 1-based
line (JSONL, CSV) or row (Parquet) of every record, and the lines that could not
be parsed at all. Validation happens in :mod:`jurymeter.io.validate`.

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
import stat
import threading
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
    """A line that is not a record at all (not JSON, wrong CSV arity)."""

    line: int
    raw: str
    message: str


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

    @property
    def values(self) -> int:
        """Non-null values the text holds, if no string value contains a mark."""
        return self.key_marks - self.null_marks


_LOOKAHEAD = 6  # bytes after a colon that ': null' needs


def _marks(data: np.ndarray, start: int, stop: int) -> tuple[int, int]:
    """Key marks and null marks whose colon is at ``start <= index < stop``.

    Needs ``start >= 1`` and ``stop <= len(data) - _LOOKAHEAD`` (the bytes on
    both sides of each colon). Gathers only at colons, then only at the few
    followed by ``n`` or a space, so it stays near memory speed.
    """
    colons = np.flatnonzero(data[start:stop] == 58) + start
    colons = colons[data[colons - 1] == 34]
    first = data[colons + 1]
    tight = colons[first == 110]  # '":n...'
    spaced = colons[first == 32]  # '": ...'
    nulls = np.count_nonzero(
        (data[tight + 2] == 117) & (data[tight + 3] == 108) & (data[tight + 4] == 108)
    )
    spaced = spaced[data[spaced + 2] == 110]
    nulls += np.count_nonzero(
        (data[spaced + 3] == 117) & (data[spaced + 4] == 108) & (data[spaced + 5] == 108)
    )
    return len(colons), int(nulls)


def text_census(
    source: SourceFile, chunk: int = 8 * 1024 * 1024, cancel: threading.Event | None = None
) -> TextCensus | None:
    """Count lines, key marks and null marks of an uncompressed text file (numpy: no GIL held).

    The streaming path proves it lost nothing by comparing these with what the
    parser produced: one row per line and one non-null value per key mark that
    is not followed by ``null``. Colons near a chunk's end wait for the next
    chunk, which starts with the bytes they need on both sides. Returns
    ``None`` when ``cancel`` is set before the end (checked between chunks).
    """
    lines = marks = nulls = 0
    carry = b"\n"  # one byte of context before the first colon
    last = 10
    with source.fs.open(source.path, "rb") as handle:
        while block := handle.read(chunk):
            if cancel is not None and cancel.is_set():
                return None
            data = np.frombuffer(carry + block, dtype=np.uint8)
            lines += int(np.count_nonzero(data[len(carry) :] == 10))
            stop = max(1, len(data) - _LOOKAHEAD)
            found = _marks(data, 1, stop)
            marks, nulls = marks + found[0], nulls + found[1]
            carry = (carry + block)[stop - 1 :]
            last = block[-1]
    tail = np.frombuffer(carry + bytes(_LOOKAHEAD), dtype=np.uint8)
    found = _marks(tail, 1, len(carry))
    marks, nulls = marks + found[0], nulls + found[1]
    return TextCensus(lines=lines + (0 if last == 10 else 1), key_marks=marks, null_marks=nulls)


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
    """
    try:
        if source.format == "jsonl":
            yield from _jsonl_batches(source, block_bytes, text_fields)
        elif source.format == "csv":
            yield from _csv_batches(source, block_bytes)
        else:
            yield from _parquet_batches(source, parquet_rows)
    except (OSError, EOFError) as exc:
        msg = f"cannot read {source.url}: {exc}"
        raise SourceError(msg) from exc


# ---------------------------------------------------------------- JSON Lines


def _open_text_blocks(source: SourceFile, block_bytes: int) -> Iterator[bytes]:
    """Decompressed blocks of whole lines, each ending at a newline (but the file's last).

    A final line without a newline joins the last block instead of becoming a
    block (and a Parquet part) of its own. Each block is copied once.
    """
    with source.fs.open(source.path, "rb", compression=source.compression) as handle:
        carry = b""
        pending: bytes | None = None
        while True:
            block = handle.read(block_bytes)
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
    out = []
    for k in which:
        begin = int(starts[k])
        end = int(starts[k + 1]) if k + 1 < len(starts) else len(block)
        out.append(block[begin:end].rstrip(b"\r\n").decode("utf-8", errors="replace"))
    return out


def _jsonl_batches(
    source: SourceFile, block_bytes: int, text_fields: frozenset[str] | None
) -> Iterator[RawBatch]:
    first_line = 1
    for block in _open_text_blocks(source, block_bytes):
        batch, n_lines = _parse_jsonl_block(block, first_line, text_fields)
        yield batch
        first_line += n_lines


def _count_lines(block: bytes) -> int:
    if not block:
        return 0
    return block.count(b"\n") + (0 if block.endswith(b"\n") else 1)


def _fast_frame(
    block: bytes, n_lines: int, text_fields: frozenset[str] | None = None
) -> tuple[pl.DataFrame, np.ndarray | None] | None:
    """Parse a block with polars' reader when that provably loses nothing.

    polars infers the schema from the first rows and silently drops keys first
    seen later, and skips blank lines. So the result is accepted only if its rows
    match the non-blank lines one to one and every ``"key":`` in the text maps to
    a non-null parsed value; otherwise the block is re-read with full inference,
    and if that fails, line by line. Returns the frame and, when the block has
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
            return None if _may_hide_types(frame, text_fields) else (frame, kept)
    return None


def _non_blank_lines(block: bytes) -> np.ndarray:
    """Indices of the lines that hold more than whitespace (rare path: blank lines)."""
    lines = block.split(b"\n")
    if block.endswith(b"\n"):
        lines.pop()
    return np.asarray([k for k, line in enumerate(lines) if line.strip()], dtype=np.int64)


def _may_hide_types(frame: pl.DataFrame, text_fields: frozenset[str] | None = None) -> bool:
    """Whether a text column may hold booleans, arrays or objects turned into text.

    polars' reader turns a column that mixes strings with booleans or objects
    into text, and the type is lost; such blocks go the slow path, which keeps
    it. A real string that merely looks like one only costs speed.
    """
    text_columns = [
        c
        for c, t in frame.schema.items()
        if t == pl.String and (text_fields is None or c in text_fields)
    ]
    if not text_columns:
        return False
    suspicious = pl.any_horizontal(
        pl.col(c).str.starts_with("{")
        | pl.col(c).str.starts_with("[")
        | pl.col(c).is_in(["true", "false"])
        for c in text_columns
    )
    return bool(frame.select(suspicious.any()).item())


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
    texts = _slice_lines(block, starts, np.arange(n_lines))
    for k, text in enumerate(texts):
        if not text.strip():
            continue
        try:
            value = orjson.loads(text)
        except orjson.JSONDecodeError as exc:
            # Python's json writes NaN and Infinity by default; read them so that
            # such a score is rejected as non-finite, not as a malformed line.
            try:
                value = json.loads(text)
            except ValueError:
                malformed.append(MalformedRecord(first_line + k, text, f"not valid JSON: {exc}"))
                continue
        if not isinstance(value, dict):
            kind = type(value).__name__
            malformed.append(
                MalformedRecord(first_line + k, text, f"expected a JSON object, got {kind}")
            )
            continue
        records.append({key: _as_text(v) for key, v in value.items()})
        kept_rows.append(k)
    kept_idx = np.asarray(kept_rows, dtype=np.int64)
    batch = RawBatch(
        frame=_frame_of_text_records(records),
        lines=first_line + kept_idx,
        malformed=malformed,
        raw=lambda rows: _slice_lines(block, starts, kept_idx[rows]),
    )
    return batch, n_lines


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

    Every value is text; an empty field is missing.
    """
    with source.fs.open(
        source.path,
        "rt",
        compression=source.compression,
        encoding="utf-8",
        errors="replace",
        newline="",
    ) as handle:
        physical: list[str] = []

        def lines_iter() -> Iterator[str]:
            for line in handle:
                physical.append(line)
                yield line

        reader = csv.reader(lines_iter())
        try:
            header = next(reader)
        except StopIteration:
            return
        header = [h.strip() for h in header]
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
                text = "".join(physical).rstrip("\r\n")
                malformed.append(MalformedRecord(reader.line_num, text, f"bad CSV: {exc}"))
                continue
            text = "".join(physical).rstrip("\r\n")
            first = reader.line_num - max(len(physical) - 1, 0)
            if not row or (len(row) == 1 and not row[0].strip()):
                continue
            if len(row) != width:
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
        if rows or malformed:
            yield _csv_batch(header, rows, raws, lines, malformed)


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
    import pyarrow.parquet as pq  # here, not at the top: most commands read no Parquet source

    with source.fs.open(source.path, "rb") as handle:
        parquet = pq.ParquetFile(handle)
        first = 1
        for record_batch in parquet.iter_batches(batch_size=rows):
            frame = pl.from_arrow(record_batch)
            assert isinstance(frame, pl.DataFrame)
            n = frame.height

            def raw(which: np.ndarray, frame: pl.DataFrame = frame) -> list[str]:
                picked = frame[which.tolist()]
                return [orjson.dumps(r, default=str).decode() for r in picked.to_dicts()]

            yield RawBatch(
                frame=frame,
                lines=np.arange(first, first + n, dtype=np.int64),
                malformed=[],
                raw=raw,
            )
            first += n
