"""Reading CSV and Parquet sources in bounded batches of raw records (see :mod:`jurymeter.io.records`)."""

from __future__ import annotations

import csv
import io
from collections.abc import Iterator
from typing import Any

import numpy as np
import orjson
import polars as pl

from jurymeter.errors import SourceError
from jurymeter.io.source_files import (
    MalformedRecord,
    RawBatch,
    SourceFile,
    open_decompressed,
    short_message,
    truncated_message,
)
from jurymeter.io.text import escape_text, escaped, invalid_text_message, is_text


def csv_batches(source: SourceFile, block_bytes: int) -> Iterator[RawBatch]:
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

        reader = csv.reader(_physical_lines(handle, binary, physical, cut, bom))
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
            problem = _row_problem(text, row, header, first)
            if problem is not None:
                malformed.append(problem)
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


def _physical_lines(
    handle: Any, binary: Any, physical: list[str], cut: list[str], bom: list[bool]
) -> Iterator[str]:
    """The text file's lines for the CSV reader, each also kept in ``physical`` (the raw text of a record).

    A byte-order mark at the start is dropped (``bom`` says whether there was
    one); the unfinished last line of a cut stream goes to ``cut``, not to the reader.
    """
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


def _row_problem(text: str, row: list[str], header: list[str], first: int) -> MalformedRecord | None:
    """Why a CSV row is no record (text that is not text, the wrong number of fields), or ``None``."""
    width = len(header)
    if not text.isascii() and not is_text(text):
        # Named by the header's column (by position past its end); a byte outside every
        # field (a quote's neighbour) still makes the line invalid_text.
        message = "; ".join(
            invalid_text_message(header[j] if j < width else f"#{j + 1}", v, bytes_invalid=True)
            for j, v in enumerate(row)
            if not is_text(v)
        ) or "the line is not valid text (invalid UTF-8 bytes)"
        return MalformedRecord(first, escape_text(text), message, "invalid_text")
    if len(row) != width:
        return MalformedRecord(first, text, f"expected {width} fields as in the header, got {len(row)}")
    return None


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


def parquet_batches(source: SourceFile, rows: int) -> Iterator[RawBatch]:
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
            msg = f"cannot read {source.url} as Parquet: {short_message(exc)}"
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
