"""Reading canonical records in bounded batches of raw records (JSON Lines here; CSV, Parquet: :mod:`jurymeter.io.tabular`).

Reading never interprets values: it yields each batch as a polars frame with
the columns as they came, the 1-based line (JSONL, CSV) or row (Parquet) of
every record, and the lines that could not be parsed at all. Validation
happens in :mod:`jurymeter.io.validate`.

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

import dataclasses
import io
import json
import zlib
from collections.abc import Iterator
from typing import Any

import numpy as np
import orjson
import polars as pl

from jurymeter.errors import SourceError
from jurymeter.io.source_files import (
    BOM,
    MalformedRecord,
    RawBatch,
    SourceFile,
    open_decompressed,
    short_message,
    truncated_message,
    undecompressable,
)
from jurymeter.io.tabular import csv_batches, parquet_batches
from jurymeter.io.text import (
    escaped,
    has_surrogate_escape,
    has_unpaired_escape,
    invalid_fields,
    invalid_text_message,
)

# Prefix of a text value that was a JSON boolean, array or object (slow path only).
NOT_SCALAR = "\x1e"

DEFAULT_BLOCK_BYTES = 64 * 1024 * 1024
DEFAULT_PARQUET_ROWS = 500_000


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
            yield from csv_batches(source, block_bytes)
        else:
            yield from parquet_batches(source, parquet_rows)
    except SourceError:
        raise
    except (zlib.error, zstandard.ZstdError) as exc:
        raise SourceError(undecompressable(source, exc)) from exc
    except (OSError, EOFError) as exc:
        msg = f"cannot read {source.url}: {short_message(exc)}"
        raise SourceError(msg) from exc



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
                while 0 < len(block) < len(BOM) and BOM.startswith(block):
                    more = handle.read(block_bytes)
                    if not more:
                        break
                    block += more
                if block.startswith(BOM):
                    block = block[len(BOM) :] or handle.read(block_bytes)
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
        batches, n_lines = _parse_jsonl_block(block, first_line, text_fields)
        yield from batches
        first_line += n_lines


def _count_lines(block: bytes) -> int:
    if not block:
        return 0
    return block.count(b"\n") + (0 if block.endswith(b"\n") else 1)


# object, array or boolean turned into text, or a number (polars writes a JSON
# number in a text column its own way: 1.50 as "1.5", 1.0 as "1").
_SUSPECT_ID = r"^(?:[-0-9{\[]|true$|false$)"


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


# A block polars' reader refuses (one malformed line is enough) is split in halves and each half
# tried again, down to regions of SLOW_REGION_LINES lines, which are read line by line: a few bad
# lines cost their regions, not the whole block (parsing in Python is 10-20x polars' reader). The
# attempts stop once they have read SPLIT_BUDGET times the block's bytes, so a block that no
# split makes readable (a float id on every line) costs at most that more than the line-by-line
# read it ends in.
SLOW_REGION_LINES = 256
SPLIT_BUDGET = 4


def _parse_jsonl_block(
    block: bytes, first_line: int, text_fields: frozenset[str] | None = None
) -> tuple[list[RawBatch], int]:
    """Batches of the records of one block of whole lines, and the number of physical lines in it.

    One batch when polars' reader takes the whole block; otherwise one batch a
    schema for the regions it takes (see :data:`SLOW_REGION_LINES`) and one for
    the lines read one at a time. A record's verdict does not depend on the
    path that read it (the slow path's marks, :func:`_as_text`).
    """
    n_lines = _count_lines(block)
    if not n_lines:
        return [RawBatch(frame=pl.DataFrame(), lines=np.zeros(0, dtype=np.int64), malformed=[],
                         raw=lambda rows: [])], 0
    whole = _fast_frame(block, n_lines, text_fields)
    if whole is not None:
        frame, kept = whole
        return [_fast_batch(block, None, first_line, [(frame, _region_lines(kept, 0, n_lines))])], n_lines
    starts = _line_starts(block)
    fast: list[tuple[pl.DataFrame, np.ndarray]] = []
    slow: list[np.ndarray] = []
    budget = SPLIT_BUDGET * len(block)
    # Regions to try, the next one last: halves are pushed right then left, so regions come in file order.
    regions = [(n_lines // 2, n_lines), (0, n_lines // 2)] if n_lines > SLOW_REGION_LINES else []
    if not regions:
        slow.append(np.arange(n_lines, dtype=np.int64))
    while regions:
        lo, hi = regions.pop()
        parsed = None
        if budget > 0:
            begin, end = int(starts[lo]), int(starts[hi]) if hi < n_lines else len(block)
            budget -= end - begin
            parsed = _fast_frame(block[begin:end], hi - lo, text_fields)
        if parsed is not None:
            frame, kept = parsed
            if frame.height:
                fast.append((frame, _region_lines(kept, lo, hi)))
        elif hi - lo > SLOW_REGION_LINES and budget > 0:
            mid = (lo + hi) // 2
            regions += [(mid, hi), (lo, mid)]
        else:
            slow.append(np.arange(lo, hi, dtype=np.int64))
    by_schema: dict[tuple[tuple[str, pl.DataType], ...], list[tuple[pl.DataFrame, np.ndarray]]] = {}
    for frame, index in fast:
        by_schema.setdefault(tuple(frame.schema.items()), []).append((frame, index))
    batches = [_fast_batch(block, starts, first_line, parts) for parts in by_schema.values()]
    if slow:
        batches.append(_slow_batch(block, starts, np.concatenate(slow), first_line, text_fields))
    return batches, n_lines


def _region_lines(kept: np.ndarray | None, lo: int, hi: int) -> np.ndarray:
    """0-based block lines of the rows polars read from lines ``lo:hi``: all, or the non-blank ones (``kept``)."""
    return lo + (np.arange(hi - lo, dtype=np.int64) if kept is None else kept)


def _fast_batch(
    block: bytes, starts: np.ndarray | None, first_line: int, parts: list[tuple[pl.DataFrame, np.ndarray]]
) -> RawBatch:
    """One batch of frames polars' reader read (one schema), ``parts`` of (frame, 0-based lines of its rows)."""
    frame = parts[0][0] if len(parts) == 1 else pl.concat([f for f, _ in parts], rechunk=False)
    index = np.concatenate([i for _, i in parts])
    known: list[np.ndarray] = [] if starts is None else [starts]

    # Line offsets are only needed to quote rejected records; find them then.
    def raw(rows: np.ndarray) -> list[str]:
        if not known:
            known.append(_line_starts(block))
        return _slice_lines(block, known[0], index[rows])

    return RawBatch(frame=frame, lines=first_line + index, malformed=[], raw=raw)


def _slow_batch(
    block: bytes, starts: np.ndarray, which: np.ndarray, first_line: int, text_fields: frozenset[str] | None
) -> RawBatch:
    """The records of the lines ``which`` (0-based, ascending) of ``block``, one line at a time.

    A bad line costs only itself: it becomes a :class:`MalformedRecord`.
    """
    records: list[dict[str, Any]] = []
    kept_rows: list[int] = []
    malformed: list[MalformedRecord] = []
    ends = np.append(starts[1:], len(block))
    for k in map(int, which):
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
        bad = invalid_fields(value) if (bytes_invalid or has_surrogate_escape(line)) else []
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
    return RawBatch(
        frame=_frame_of_text_records(records),
        lines=first_line + kept_idx,
        malformed=malformed,
        raw=lambda rows: _slice_lines(block, starts, kept_idx[rows]),
        marked=True,
    )


def _as_text(value: Any) -> str | None:
    """A JSON value as text; booleans, arrays and objects carry :data:`NOT_SCALAR`.

    The marker keeps the slow path's verdicts equal to the fast path's, where
    such values arrive as boolean, list or struct columns: never an id or number.
    """
    if value is None:
        return value
    if isinstance(value, str):
        # Text that itself starts with the mark gets it twice, so it is never read as a non-scalar.
        return NOT_SCALAR + value if value.startswith(NOT_SCALAR) else value
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


