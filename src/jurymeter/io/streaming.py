"""The streaming fast path: a clean local JSON Lines file in one polars pass.

The block path (:mod:`jurymeter.io.ingest`) reads 64 MiB blocks, validates them
eagerly and writes one part per block and item set; it handles every input.
For the common case, a large, clean, uncompressed JSON Lines dump on local
disk read into a local store, this module runs the same typing and the same
checks as one lazy polars query (scan -> validate -> partitioned sink), which
parses on every core and never holds more than a few morsels.

Flagged rows (:func:`jurymeter.io.validate.flag_rejected`: any rejection, a
timestamp in another spelling than the one detected, a text id that may hide a
boolean or object) are filtered out in the query, and each row's count of
non-null raw values is a partition key, so the written files' footers and paths
carry everything the proof needs. It only *accepts* a file when:

- the rows written equal the physical lines, counted from the bytes by
  :func:`jurymeter.io.census.text_census` (so no line was blank, unparsed or
  flagged);
- the values written, rows times values per row, equal the ``":`` marks of
  the text less those followed by ``null`` (so no key was dropped by schema
  inference from the first rows);
- the text values written, rows times text values per row (also a partition
  key), equal the marks followed by a quote (so no number was turned into
  polars' text of it: ``1.50`` into ``"1.5"``; ids stay as written). Where a
  column is nested (its strings have marks too) a text id that starts like a
  number flags its row instead;
- the text has no unpaired surrogate escape (polars reads one as NUL), no id
  column is a float column (its text as written is lost), and every byte is
  UTF-8 (polars refuses the file otherwise).

Otherwise it removes what it wrote and returns ``None``, and the caller runs
the block path, which quarantines with messages. Its parts are named like the
block path's (``part-<source id>-s<n>.parquet``), so until the source's commit
marker exists they are invisible, and a crash leaves nothing a rerun keeps.
"""

from __future__ import annotations

import os
import shutil
import threading
from dataclasses import dataclass, field
from typing import Any

import polars as pl
import pyarrow.parquet as pq

from jurymeter.io.census import TextCensus, text_census
from jurymeter.io.schema import SCHEMAS, SOURCE_ID, SOURCE_LINE, Protocol, detect_protocol
from jurymeter.io.source_files import SourceFile
from jurymeter.io.store import Store
from jurymeter.io.validate import (
    ROW,
    TIMESTAMP_FORMATS,
    ValidationOptions,
    apply_column_map,
    flag_rejected,
)

# Rows per written file at most; the sink also splits by size. Bounds the work a
# rewrite after a duplicate costs.
MAX_ROWS_PER_PART = 2_000_000
_SAMPLE_ROWS = 1000
# One partition key carries both counts of a row (one key groups faster than two):
# values + _SHIFT * texts, where values = its non-null raw values (the number of its
# keys if none was dropped) and texts = its non-null raw text values (its
# string-valued keys if no number became text).
_VALUES = "__values"
_SHIFT = 1 << 20  # more columns than any row holds


@dataclass(slots=True)
class StreamResult:
    """What the fast path wrote for one source (not yet committed)."""

    protocol: Protocol
    read: int
    parts: list[tuple[str, str]] = field(default_factory=list)  # (item_set, relpath)


@dataclass(frozen=True, slots=True)
class _Written:
    """One file the sink wrote: its item set, path and the raw values each of its rows had."""

    item_set: str
    relpath: str
    values_per_row: int
    strings_per_row: int = 0


def eligible(source: SourceFile, store: Store) -> bool:
    """Whether the fast path may try ``source`` (local uncompressed JSON Lines, local store)."""
    protocols = source.fs.protocol
    local = "file" in (protocols if isinstance(protocols, tuple) else (protocols,))
    return (source.format == "jsonl" and source.adapter is None and source.compression is None and local
            and not store.is_s3)


def _timestamp_format(records: pl.LazyFrame) -> str | None:
    """The first :data:`TIMESTAMP_FORMATS` entry that reads every sampled timestamp."""
    sample = records.select(pl.col("timestamp").str.strip_chars()).head(_SAMPLE_ROWS).collect()
    values = sample["timestamp"].drop_nulls()
    for fmt in TIMESTAMP_FORMATS:
        parsed = values.str.to_datetime(fmt, time_unit="us", time_zone="UTC", strict=False)
        if parsed.null_count() == 0:
            return fmt
    return None


class Census:
    """:func:`jurymeter.io.census.text_census` of one source, counted in a background thread.

    Started before the source's content hash is computed, so the two reads of
    the file run side by side on two cores (the hash alone is 2 s of one core
    for 2.2 GiB); :meth:`cancel` stops it between chunks when the source turns
    out to be ingested already or to need the block path.
    """

    def __init__(self, source: SourceFile) -> None:
        self._cancel = threading.Event()
        self._found: list[TextCensus | BaseException] = []
        self._thread = threading.Thread(target=self._count, args=(source,), name="jurymeter-census", daemon=True)
        self._thread.start()

    def _count(self, source: SourceFile) -> None:
        try:
            found = text_census(source, cancel=self._cancel)
        except OSError:
            return  # proves nothing: the block path runs and reports the read error
        except BaseException as exc:  # a bug: raised where the result is asked for
            self._found.append(exc)
            return
        if found is not None:
            self._found.append(found)

    def result(self) -> TextCensus | None:
        """The counts, once the whole file is read; ``None`` if cancelled or unreadable."""
        self._thread.join()
        if not self._found:
            return None
        if isinstance(self._found[0], BaseException):
            raise self._found[0]
        return self._found[0]

    def cancel(self) -> None:
        self._cancel.set()
        self._thread.join()


def stream_source(
    store: Store,
    source: SourceFile,
    sid: str,
    options: ValidationOptions,
    text_fields: frozenset[str],
    census: Census,
) -> StreamResult | None:
    """Validate and write ``source`` in one streaming query, or return ``None``.

    ``None`` means the proof failed or the query could not run; nothing the
    call wrote remains, and the caller should use the block path. ``census``
    is the source's census, started by the caller (beside its content hash).
    """
    area = store.staging_area(sid)
    written: list[_Written] = []
    nested = [False]  # whether a raw column is nested (then text ids are checked row by row)
    try:
        protocol = _run_query(source, sid, options, text_fields, area, written, nested)
    except Exception:  # polars raises many types for one cause: this file needs the block path
        protocol = None
    counts = census.result() if protocol is not None else None
    census.cancel()
    if protocol is not None and counts is not None:
        rows = [_rows_in(area, w.relpath) for w in written]
        # Rejected rows were filtered out, so all rows written = all lines proves
        # there were none; the values count proves no key was dropped.
        proven = (
            sum(rows) == counts.lines
            and sum(n * w.values_per_row for n, w in zip(rows, written, strict=True))
            == counts.values
            and not counts.escapes
            and (nested[0] or sum(n * w.strings_per_row for n, w in zip(rows, written, strict=True))
                 == counts.string_marks)
        )
        if proven:
            for item_set in sorted({w.item_set for w in written}):
                store.name_partition(protocol, item_set)  # a long name's folder keeps the name
            store.adopt(area, [w.relpath for w in written])
            parts = [(w.item_set, w.relpath) for w in written]
            return StreamResult(protocol=protocol, read=sum(rows), parts=parts)
    # A failed query may still finish a file after it returned: the whole area goes.
    shutil.rmtree(area, ignore_errors=True)
    return None


def _run_query(
    source: SourceFile,
    sid: str,
    options: ValidationOptions,
    text_fields: frozenset[str],
    area: str,
    written: list[_Written],
    nested: list[bool],
) -> Protocol | None:
    """Run the query into ``area``, recording each file in ``written``; the protocol.

    ``nested[0]`` is set when a raw column is nested.
    """
    scanned = pl.scan_ndjson(source.path, infer_schema_length=100, row_index_name=ROW)
    raw_schema = {c: t for c, t in scanned.collect_schema().items() if c != ROW}
    if any(t.is_float() and c in text_fields for c, t in raw_schema.items()):
        return None  # a float id: the block path keeps its text as written
    nested[0] = any(isinstance(t, pl.Struct | pl.List | pl.Array) for t in raw_schema.values())
    # One sum: a text value counts 1 + _SHIFT (a value and a text value), any other 1.
    counts = pl.sum_horizontal(
        pl.col(c).is_not_null().cast(pl.UInt32) * (1 + _SHIFT if t == pl.String else 1)
        for c, t in raw_schema.items()
    )
    records = apply_column_map(scanned.with_columns(counts.alias(_VALUES)), options.column_map)
    names = set(records.collect_schema().names()) - {ROW, _VALUES}
    protocol = detect_protocol(names)
    if protocol is None or "item_set" not in SCHEMAS[protocol].dtypes:
        return None  # unknown protocol or a metadata table: small, the block path reports it
    timestamp_format = None
    if records.collect_schema().get("timestamp") == pl.String:
        timestamp_format = _timestamp_format(records)
        if timestamp_format is None:
            return None
    rows, _ = flag_rejected(
        records,
        protocol,
        options,
        timestamp_format=timestamp_format,
        text_fields=text_fields,
        keep=(_VALUES,),
        number_like_ids=nested[0],
    )
    accepted = rows.filter(~pl.col("__rejected")).select(
        pl.exclude(ROW, "__rejected"),
        pl.lit(sid, dtype=pl.String).alias(SOURCE_ID),
        (pl.col(ROW).cast(pl.Int64) + 1).alias(SOURCE_LINE),
    )

    def part_path(args: Any) -> str:
        # Called once per file; the raw values count is a partition key, so
        # the files carry the proof's numbers without a column of their own.
        item_set = str(args.partition_keys["item_set"][0])
        relpath = (
            f"{Store.partition_dir(protocol, item_set)}/"
            f"part-{sid}-s{len(written) + 1:05d}.parquet"
        )
        keys = args.partition_keys
        counts = int(keys[_VALUES][0])
        written.append(_Written(item_set, relpath, counts % _SHIFT, counts // _SHIFT))
        return relpath

    accepted.sink_parquet(
        pl.PartitionBy(
            area,
            key=["item_set", _VALUES],
            include_key=False,
            file_path_provider=part_path,
            max_rows_per_file=MAX_ROWS_PER_PART,
        ),
        compression="zstd",
        mkdir=True,
    )
    return protocol


def _rows_in(area: str, relpath: str) -> int:
    """Rows of a written file, from its Parquet footer."""
    return pq.ParquetFile(os.path.join(area, relpath)).metadata.num_rows
