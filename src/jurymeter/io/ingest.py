"""Ingest: sources -> validated, de-duplicated, partitioned records in the store.

For every source file, ``records read = accepted + quarantined + duplicates
dropped`` holds and is written into the source's commit marker and the run's
manifest. One source is one transaction (see :mod:`jurymeter.io.store`):

1. hash the file; a file whose content is already committed is skipped;
2. stream it in bounded batches: parse, validate, write accepted rows as
   (invisible) parts per partition and rejected rows to quarantine parts;
3. find duplicates among the new rows and against committed rows of the same
   partitions (64-bit key hashes first, exact key comparison on collisions):
   an exact re-delivery is dropped and counted, a conflicting one goes to
   quarantine, and parts that lose rows are rewritten;
4. write the commit marker.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import errno
import queue
import threading
import uuid
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, field
from typing import Any, TypeVar, cast

import numpy as np
import polars as pl

from jurymeter.errors import SourceError, StoreError, StrictModeError
from jurymeter.io.adapters.reading import REJECT_MESSAGE, REJECT_REASON
from jurymeter.io.records import DEFAULT_BLOCK_BYTES, read_batches
from jurymeter.io.schema import (
    ID_LIKE_COLUMNS,
    QUARANTINE_SCHEMA,
    RATING_KEY,
    SCHEMAS,
    SOURCE_ID,
    SOURCE_LINE,
    Protocol,
    detect_protocol,
)
from jurymeter.io.source_files import DOCUMENT_FORMATS, RawBatch, SourceFile, content_sha256
from jurymeter.io.store import RATED_CELLS_FILE, Store
from jurymeter.io.streaming import Census, eligible, stream_source
from jurymeter.io.validate import ROW, ValidationOptions, apply_column_map, validate_batch

T = TypeVar("T")


@dataclass(slots=True)
class SourceReport:
    """Reconciliation of one source file."""

    source: str
    sha256: str
    status: str  # "ingested" | "already_ingested" | "unreadable" (nothing of it committed; ``note`` says why)
    protocol: str | None = None
    format: str = "canonical"  # or the log adapter that read it (io.adapters)
    lines: int = 0  # lines (or elements, samples) read; a line may hold several judgments
    read: int = 0  # judgments read: the unit of reconciliation
    accepted: int = 0
    quarantined: int = 0
    duplicates_dropped: int = 0
    reasons: dict[str, int] = field(default_factory=dict)
    note: str = ""
    notes: list[str] = field(default_factory=list)  # what the adapter says (a baseline it assumed)

    @property
    def balanced(self) -> bool:
        return self.read == self.accepted + self.quarantined + self.duplicates_dropped


@dataclass(slots=True)
class IngestReport:
    """What one ``jurymeter ingest`` run did."""

    run_id: str
    store: str
    started: str
    finished: str | None = None
    sources: list[SourceReport] = field(default_factory=list)
    removed_uncommitted: int = 0

    def totals(self) -> dict[str, int]:
        return {
            k: sum(getattr(s, k) for s in self.sources)
            for k in ("read", "accepted", "quarantined", "duplicates_dropped")
        }

    def unreadable(self) -> list[dict[str, str]]:
        """The sources that could not be read, each with its one-line reason (nothing of them is stored)."""
        return [{"source": s.source, "reason": s.note} for s in self.sources if s.status == UNREADABLE]

    def to_json(self) -> dict[str, Any]:
        return {
            "run_id": self.run_id,
            "store": self.store,
            "started": self.started,
            "finished": self.finished,
            "removed_uncommitted_files": self.removed_uncommitted,
            "totals": self.totals(),
            "sources_unreadable": self.unreadable(),
            "sources": [asdict(s) for s in self.sources],
        }


UNREADABLE = "unreadable"


def _now() -> str:
    return dt.datetime.now(dt.UTC).isoformat(timespec="seconds")


def new_run_id() -> str:
    stamp = dt.datetime.now(dt.UTC).strftime("%Y%m%dT%H%M%SZ")
    return f"{stamp}-{uuid.uuid4().hex[:8]}"


def ingest(
    store: Store,
    sources: list[SourceFile],
    options: ValidationOptions,
    *,
    strict: bool = False,
    lock_timeout: float = 600.0,
    block_bytes: int = DEFAULT_BLOCK_BYTES,
    on_source: Callable[[SourceReport], None] | None = None,
) -> IngestReport:
    """Ingest ``sources`` into ``store`` under its write lock.

    A source that cannot be read (marked by discovery, or whose reading fails
    part way: :class:`~jurymeter.errors.SourceError`) leaves nothing of it in
    the store and is reported with ``status="unreadable"`` and its reason in
    ``note``; the sources after it are ingested.

    Raises
    ------
    StoreError
        The store cannot be created, read, written or locked (disk full, S3):
        the source being ingested is not committed (its parts, invisible to
        readers, are removed by the next ingest).
    StrictModeError
        ``strict`` is set and a record went to quarantine (that source is not
        committed; earlier sources stay committed).
    """
    store.create()
    report = IngestReport(run_id=new_run_id(), store=store.url, started=_now())
    with store.lock(timeout=lock_timeout):
        report.removed_uncommitted = len(store.remove_uncommitted())
        seen: dict[str, str] = {}
        sizes: set[int] | None = None  # of the committed sources and those of this run so far
        for source in sources:
            if source.unreadable is not None:  # discovery could not read it: never opened here
                result = _unreadable(source, source.unreadable)
            else:
                if source.adapter is not None and not store.is_s3 and sizes is None:
                    sizes = {int(m.get("size", -1)) for m in store.markers()}
                result = _one_source(store, source, options, report.run_id, strict, block_bytes, seen, sizes)
                if source.adapter is not None and sizes is not None:
                    sizes.add(source.size)
            report.sources.append(result)
            store.write_json(f"runs/{report.run_id}.json", {**report.to_json(), "status": "running"})
            if on_source is not None:
                on_source(result)
        report.finished = _now()
        store.write_json(f"runs/{report.run_id}.json", {**report.to_json(), "status": "complete"})
    return report


def _unreadable(source: SourceFile, reason: str) -> SourceReport:
    """The report of a source that could not be read: nothing of it is in the store (read 0)."""
    # The report names the file: "<url>: why" and "cannot read <url>: why" say it once.
    prefix = f"{source.url}: "
    reason = reason[len(prefix):] if reason.startswith(prefix) else reason.replace(f" {prefix}", ": ", 1)
    return SourceReport(source=source.url, sha256="", status=UNREADABLE, format=source.adapter or "canonical",
                        note=reason.splitlines()[0] if reason else "cannot read")


# OS errors that are the store's (its disk), never the source's: they stop the ingest.
_STORE_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EROFS})


def _is_read_failure(exc: BaseException) -> bool:
    """Whether a failure while a source was ingested is its reading's (that source is reported, the rest go on).

    Every reader raises :class:`SourceError` for a file it cannot read; a
    decoder's own error (a cut stream) is taken as one too. A store error
    (disk full, S3) stops the ingest.
    """
    if isinstance(exc, StoreError):
        return False
    if isinstance(exc, SourceError | EOFError):
        return True
    return isinstance(exc, OSError) and exc.errno not in _STORE_ERRNOS


def _one_source(
    store: Store,
    source: SourceFile,
    options: ValidationOptions,
    run_id: str,
    strict: bool,
    block_bytes: int,
    seen: dict[str, str],
    sizes: set[int] | None,
) -> SourceReport:
    """One source's transaction; a read failure leaves nothing of it and is its report."""
    # The fast path's census, or an adapter's reading, runs beside the hash (two
    # cores, one pass's wall time); it is cancelled if the file needs no ingest.
    census = Census(source) if eligible(source, store) else None
    early = None
    # A source the size of one already seen is most likely a re-delivery: hash it
    # alone (the no-op costs only the hash); any other starts reading now (local stores).
    if source.adapter is not None and sizes is not None and source.size not in sizes:
        early = AdapterRead(source, options)
    before = set(seen)
    try:
        return _hash_and_ingest(store, source, census, options, run_id, strict, block_bytes, seen, early)
    except Exception as exc:
        if not _is_read_failure(exc):
            # A store failure (disk full, S3) stops the ingest: this source's parts have no
            # commit marker, so no reader sees them, and the next ingest removes them first.
            raise
        # This source's staged parts have no commit marker: remove them now, so the
        # store is as before it (the sources before it are committed, so keep theirs).
        store.remove_uncommitted()
        for sha in set(seen) - before:  # a later copy of its content is not "already ingested"
            del seen[sha]
        return _unreadable(source, str(exc) or type(exc).__name__)
    finally:
        if census is not None:
            census.cancel()
        if early is not None:
            early.close()


def _hash_and_ingest(
    store: Store,
    source: SourceFile,
    census: Census | None,
    options: ValidationOptions,
    run_id: str,
    strict: bool,
    block_bytes: int,
    seen: dict[str, str],
    early: AdapterRead | None = None,
) -> SourceReport:
    """Ingest one source unless its content (by SHA-256) is in the store or earlier in this run."""
    sha = content_sha256(source)
    marker = store.marker(sha)
    if marker is not None or sha in seen:
        first = seen.get(sha) or (marker or {}).get("source", "?")
        seen.setdefault(sha, source.url)
        return SourceReport(
            source=source.url,
            sha256=sha,
            status="already_ingested",
            protocol=(marker or {}).get("protocol"),
            note=f"same content as {first}, already in the store: nothing to do",
        )
    seen[sha] = source.url
    return _ingest_source(store, source, sha, options, run_id, strict, block_bytes, census, early)


@dataclass(slots=True)
class _Staged:
    """Parts written for one source before its commit."""

    sid: str
    parts: list[tuple[str | None, str]] = field(default_factory=list)  # (item_set, relpath)
    quarantine_parts: list[str] = field(default_factory=list)
    seq: int = 0

    def next_name(self) -> str:
        self.seq += 1
        return f"part-{self.sid}-{self.seq:05d}.parquet"


def _quarantine_frame(
    source: SourceFile,
    sid: str,
    protocol: str | None,
    lines: np.ndarray,
    raws: list[str],
    reasons: list[str] | pl.Series,
    messages: list[str] | pl.Series,
    judges: pl.Series | None = None,
) -> pl.DataFrame:
    n = len(lines)
    return pl.DataFrame(
        {
            "source": [source.url] * n,
            "line": lines.astype(np.int64),
            "raw": raws,
            "reason": reasons,
            "message": messages,
            "protocol": [protocol] * n,
            SOURCE_ID: [sid] * n,
            "judge_id": judges if judges is not None else [None] * n,
        },
        schema=QUARANTINE_SCHEMA,
    )


def _ingest_source(
    store: Store,
    source: SourceFile,
    sha: str,
    options: ValidationOptions,
    run_id: str,
    strict: bool,
    block_bytes: int = DEFAULT_BLOCK_BYTES,
    census: Census | None = None,
    early: AdapterRead | None = None,
) -> SourceReport:
    sid = store.source_id(sha)
    staged = _Staged(sid)
    result = SourceReport(source=source.url, sha256=sha, status="ingested")
    reasons: Counter[str] = Counter()
    watched = frozenset(options.column_map.get(c, c) for c in ID_LIKE_COLUMNS)
    # ingest() started a census exactly for the sources the fast path may try (eligible).
    streamed = stream_source(store, source, sid, options, watched, census) if census is not None else None
    protocol: Protocol | None
    if source.adapter is not None:
        result.format = source.adapter
    if streamed is not None:
        result.read, protocol = streamed.read, streamed.protocol
        result.lines = streamed.read
        staged.parts = list(streamed.parts)
    else:
        protocol = _read_validate_stage(
            store, source, staged, options, watched, block_bytes, result, reasons, early
        )
    result.protocol = protocol
    if protocol is not None and staged.parts:
        dropped, conflicts = _resolve_duplicates(store, staged, protocol)
        result.duplicates_dropped = dropped
        if conflicts is not None and conflicts.height:
            raws = _fetch_raw(source, conflicts["line"].to_numpy(), block_bytes)
            q = _quarantine_frame(
                source,
                sid,
                protocol,
                conflicts["line"].to_numpy(),
                [raws.get(int(line), "") for line in conflicts["line"]],
                ["conflicting_duplicate"] * conflicts.height,
                conflicts["message"],
            )
            reasons.update(q["reason"].to_list())
            relpath = f"quarantine/{staged.next_name()}"
            store.write_parquet(relpath, q)
            staged.quarantine_parts.append(relpath)
    result.reasons = dict(sorted(reasons.items()))
    result.quarantined = sum(reasons.values())
    result.accepted = result.read - result.quarantined - result.duplicates_dropped
    if strict and result.quarantined:
        msg = (
            f"--strict: {result.quarantined} record(s) of {source.url} rejected "
            f"({', '.join(f'{k}: {v}' for k, v in result.reasons.items())}); source not committed"
        )
        raise StrictModeError(msg)
    store.write_json(
        f"ingested/{sha}.json",
        {
            "sha256": sha,
            "source_id": sid,
            "source": source.url,
            "size": source.size,
            "format": source.format,
            "log_format": result.format,
            "protocol": protocol,
            "run_id": run_id,
            "committed": _now(),
            "options": {
                "map": options.column_map,
                "item_set": options.item_set,
                "scale": list(options.scale) if options.scale else None,
            },
            "counts": {
                "lines": result.lines,
                "read": result.read,
                "accepted": result.accepted,
                "quarantined": result.quarantined,
                "duplicates_dropped": result.duplicates_dropped,
                "reasons": result.reasons,
            },
            "parts": [p for _, p in staged.parts],
            "quarantine_parts": staged.quarantine_parts,
        },
    )
    return result


def _read_validate_stage(
    store: Store,
    source: SourceFile,
    staged: _Staged,
    options: ValidationOptions,
    watched: frozenset[str],
    block_bytes: int,
    result: SourceReport,
    reasons: Counter[str],
    early: AdapterRead | None = None,
) -> Protocol | None:
    """The block path: read, validate and stage ``source`` batch by batch; its protocol."""
    if source.adapter is not None:
        read = early if early is not None else AdapterRead(source, options)
        try:
            protocol = _validate_stage(store, source, staged, options, read.batches, result, reasons)
        finally:
            read.close()
        result.notes = list(read.notes.notes)
        return protocol
    batches = prefetch(
        read_batches(source, block_bytes=block_bytes, parquet_rows=_rows_for(block_bytes), text_fields=watched)
    )
    try:
        return _validate_stage(store, source, staged, options, batches, result, reasons)
    finally:
        batches.close()


class AdapterRead:
    """An adapter source's raw batches, read in a background thread from the moment it is made.

    :func:`ingest` makes one before it hashes the source, so the adapter reads
    (and an MT-Bench single file is parsed) on one core while the hash runs on
    the other; :meth:`close` stops the reading at its next block when the
    source needs no ingest, or once the ingest is done with it.
    """

    def __init__(self, source: SourceFile, options: ValidationOptions) -> None:
        from jurymeter.io.adapters import adapter
        from jurymeter.io.adapters.base import AdapterNotes, AdapterOptions
        from jurymeter.io.adapters.reading import adapted_batches

        assert source.adapter is not None
        self.notes = AdapterNotes(format=source.adapter)
        told = AdapterOptions(item_set=options.item_set, baseline=options.baseline, scale=options.scale)
        self._cancel = threading.Event()
        self.batches = prefetch(adapted_batches(source, adapter(source.adapter), told, self.notes, cancel=self._cancel))

    def close(self) -> None:
        self._cancel.set()
        self.batches.close()


def _validate_stage(
    store: Store,
    source: SourceFile,
    staged: _Staged,
    options: ValidationOptions,
    batches: Iterator[RawBatch],
    result: SourceReport,
    reasons: Counter[str],
) -> Protocol | None:
    """Validate and stage the batches of ``source``; its protocol."""
    sid = staged.sid
    protocol: Protocol | None = None
    decided = False
    last_line = 0
    for batch in batches:
        result.read += batch.n_read
        # Lines come in file order; one line may hold several judgments.
        # Counted vectorized: a Python loop here ran once a line on every canonical block.
        seen = np.unique(np.concatenate([batch.lines, np.asarray([m.line for m in batch.malformed], dtype=np.int64)]))
        if len(seen):
            result.lines += len(seen) - int(seen[0] == last_line)  # a line split across two batches counts once
            last_line = int(seen[-1])
        frame = apply_column_map(batch.frame, options.column_map) if source.adapter is None else batch.frame
        if not decided and frame.width:
            protocol, decided = detect_protocol(set(frame.columns)), True
        quarantined: list[pl.DataFrame] = []
        if batch.malformed:
            quarantined.append(
                _quarantine_frame(
                    source,
                    sid,
                    protocol,
                    np.asarray([m.line for m in batch.malformed]),
                    [m.raw for m in batch.malformed],
                    [m.reason for m in batch.malformed],  # malformed_line, invalid_text or truncated
                    [m.message for m in batch.malformed],
                )
            )
        if frame.height and protocol is None:
            rows = np.arange(frame.height)
            quarantined.append(
                _quarantine_frame(
                    source,
                    sid,
                    None,
                    batch.lines,
                    batch.raw(rows),
                    ["unknown_protocol"] * frame.height,
                    [
                        "cannot tell the protocol from the columns "
                        f"{sorted(frame.columns)}: expected 'score' (pointwise), "
                        "'system_a'/'system_b' with 'winner' or 'preference' (pairwise), "
                        "or a systems/judges metadata table (use --map to rename)"
                    ]
                    * frame.height,
                )
            )
        elif frame.height and protocol is not None:
            if REJECT_REASON in frame.columns:  # judgments the adapter rejected (parse failures, failed calls)
                told_rows = np.flatnonzero(frame[REJECT_REASON].is_not_null().to_numpy())
                if len(told_rows):
                    quarantined.append(
                        _quarantine_frame(
                            source, sid, protocol, batch.lines[told_rows], batch.raw(told_rows),
                            frame[REJECT_REASON].gather(told_rows), frame[REJECT_MESSAGE].gather(told_rows),
                            frame["judge_id"].gather(told_rows) if "judge_id" in frame.columns else None,
                        )
                    )
                keep = np.flatnonzero(frame[REJECT_REASON].is_null().to_numpy())
                frame = frame.drop(REJECT_REASON, REJECT_MESSAGE)[keep]
                batch = RawBatch(frame=frame, lines=batch.lines[keep], malformed=[],
                                 raw=_subset_raw(batch.raw, keep))
            accepted, rejected = validate_batch(frame, protocol, options)
            if rejected.height:
                rows = rejected[ROW].to_numpy()
                quarantined.append(
                    _quarantine_frame(
                        source,
                        sid,
                        protocol,
                        batch.lines[rows],
                        batch.raw(rows),
                        rejected["reason"],
                        rejected["message"],
                    )
                )
            _write_accepted(store, staged, protocol, accepted, batch)
        for q in quarantined:
            reasons.update(q["reason"].to_list())
            relpath = f"quarantine/{staged.next_name()}"
            store.write_parquet(relpath, q)
            staged.quarantine_parts.append(relpath)
    return protocol


def _subset_raw(raw: Callable[[np.ndarray], list[str]], keep: np.ndarray) -> Callable[[np.ndarray], list[str]]:
    """The raw text of a batch's rows ``keep[rows]``: rows of its subset, numbered anew."""
    return lambda rows: raw(keep[rows])


def _write_accepted(
    store: Store, staged: _Staged, protocol: Protocol, accepted: pl.DataFrame, batch: RawBatch
) -> None:
    if not accepted.height:
        return
    lines = pl.Series(SOURCE_LINE, batch.lines, dtype=pl.Int64).gather(accepted[ROW])
    accepted = accepted.drop(ROW).with_columns(
        pl.lit(staged.sid, dtype=pl.String).alias(SOURCE_ID), lines
    )
    if "item_set" in SCHEMAS[protocol].dtypes:
        groups = accepted.partition_by("item_set", as_dict=True, include_key=False)
        items: list[tuple[str | None, pl.DataFrame]] = [
            (str(key[0]), part) for key, part in groups.items()
        ]
    else:
        items = [(None, accepted)]
    for item_set, part in items:
        relpath = f"{store.name_partition(protocol, item_set)}/{staged.next_name()}"
        store.write_parquet(relpath, part)
        staged.parts.append((item_set, relpath))


def _value_text(protocol: Protocol) -> pl.Expr:
    """The judged value of a record as one comparable string (nulls included)."""
    value_columns = SCHEMAS[protocol].value
    return pl.concat_str(
        [pl.col(c).cast(pl.String).fill_null("\x00") for c in value_columns], separator="\x1f"
    )


# Candidate rows (keys whose hash repeats) compared exactly per pass; beyond this
# the comparison runs in hash buckets so memory stays bounded when a whole dump
# is re-delivered under another name.
CANDIDATES_PER_PASS = 1_000_000


def _resolve_duplicates(
    store: Store, staged: _Staged, protocol: Protocol
) -> tuple[int, pl.DataFrame | None]:
    """Drop exact re-deliveries and pull out conflicts; rewrite the parts that shrink.

    Returns the number of rows dropped and a frame (``line``, ``message``) of the
    new records that conflict with another record of the same key.
    """
    schema = SCHEMAS[protocol]
    key = [c for c in schema.key if c != "item_set"]
    # Candidates are found by a hash of the key without the rating columns (run, batch,
    # position): rows equal on the whole key are equal on it, so no pair is missed, and
    # the pass reads and hashes no more than before those columns joined the key (a log
    # that rates an output in several batches makes them all candidates, compared exactly).
    hashed = [c for c in key if c not in RATING_KEY]
    needed = [*key, *schema.value, SOURCE_ID, SOURCE_LINE]
    dropped = 0
    conflicts: list[pl.DataFrame] = []
    by_set: dict[str | None, list[str]] = {}
    for item_set, relpath in staged.parts:
        by_set.setdefault(item_set, []).append(store.path(relpath))
    for item_set, new_paths in by_set.items():
        old_paths = [f.path for f in store.data_files(protocol, item_set)]
        frames = [store.scan_files(new_paths, needed, protocol).with_columns(is_new=pl.lit(True))]
        if old_paths:
            frames.append(
                store.scan_files(old_paths, needed, protocol).with_columns(is_new=pl.lit(False))
            )
        both = pl.concat(frames).with_columns(pl.struct(hashed).hash().alias("__h"))
        repeated = (
            both.group_by("__h").agg(pl.len().alias("n")).filter(pl.col("n") > 1).select("__h")
        ).collect()
        if not repeated.height:
            continue
        buckets = -(-repeated.height // CANDIDATES_PER_PASS)
        drop_parts, conflict_parts = [], []
        rated = False
        for bucket in range(buckets):
            in_bucket = (pl.col("__h") % buckets) == bucket
            candidates = both.filter(in_bucket).join(
                repeated.lazy().filter(in_bucket), on="__h", how="semi"
            ).collect()
            drop_lines, conflict = _classify_candidates(candidates, key, protocol)
            drop_parts.append(drop_lines)
            conflict_parts.append(conflict)
            rated = rated or _several_ratings(candidates, hashed, pl.concat([drop_lines, conflict[SOURCE_LINE]]))
        if rated and item_set is not None:
            store.write_json(f"{store.partition_dir(protocol, item_set)}/{RATED_CELLS_FILE}", {"rated_cells": True})
        drop_lines = pl.concat(drop_parts)
        conflict = pl.concat(conflict_parts)
        if conflict.height:
            conflicts.append(_conflict_messages(store, conflict, key))
        removed = pl.concat([drop_lines, conflict[SOURCE_LINE]])
        dropped += drop_lines.len()
        if removed.len():
            emptied = _rewrite_without(store, new_paths, removed)
            staged.parts = [p for p in staged.parts if store.path(p[1]) not in emptied]
    return dropped, (pl.concat(conflicts) if conflicts else None)


def _several_ratings(candidates: pl.DataFrame, cell: list[str], removed: pl.Series) -> bool:
    """Whether the rows that stay (stored, or new and neither dropped nor in conflict) rate one cell twice.

    The rows that stay have distinct keys, so two of them equal on ``cell`` (the
    key without its rating columns) are two ratings of one cell, told apart by
    run, batch or position. Only a cell with a new row that stays can be new
    such a cell (the stored rows' were flagged when they came), so a re-delivery
    whose every row is dropped costs nothing more.
    """
    stay = candidates.filter(~(pl.col("is_new") & pl.col(SOURCE_LINE).is_in(removed.implode())))
    fresh = stay.filter(pl.col("is_new")).select(cell)
    if not fresh.height:
        return False
    touched = stay.join(fresh.unique(), on=cell, how="semi", nulls_equal=True)
    return bool(touched.select(pl.struct(cell).is_duplicated().any()).item())


def _classify_candidates(
    candidates: pl.DataFrame, key: list[str], protocol: Protocol
) -> tuple[pl.Series, pl.DataFrame]:
    """Among rows whose key hashes repeat, the new rows to drop and those in conflict.

    A new row equal to the stored record of its key is dropped; different from
    it, a conflict. Without a stored record, the first of equal new rows is kept
    and the rest dropped; new rows with different values all conflict.
    """
    candidates = candidates.with_columns(_value_text(protocol).alias("__v"))
    first_old = (
        candidates.filter(~pl.col("is_new"))
        .sort(SOURCE_ID, SOURCE_LINE)
        .group_by(key, maintain_order=True)
        .agg(
            pl.col("__v").first().alias("__old_v"),
            pl.col(SOURCE_ID).first().alias("__old_sid"),
            pl.col(SOURCE_LINE).first().alias("__old_line"),
        )
    )
    fresh = candidates.filter(pl.col("is_new")).join(
        first_old, on=key, how="left", nulls_equal=True
    )
    fresh = fresh.with_columns(
        pl.col("__v").n_unique().over(key).alias("__n_values"),
        pl.col(SOURCE_LINE).min().over(key).alias("__first"),
        pl.len().over(key).alias("__n_new"),
    )
    has_old = pl.col("__old_v").is_not_null()
    is_first = pl.col(SOURCE_LINE) == pl.col("__first")
    status = (
        pl.when(has_old & (pl.col("__v") == pl.col("__old_v")))
        .then(pl.lit("drop"))
        .when(has_old)
        .then(pl.lit("conflict"))
        .when(pl.col("__n_new") == 1)
        .then(pl.lit("keep"))
        .when(pl.col("__n_values") == 1)
        .then(pl.when(is_first).then(pl.lit("keep")).otherwise(pl.lit("drop")))
        .otherwise(pl.lit("conflict"))
    )
    fresh = fresh.with_columns(status.alias("__status"))
    drop_lines = fresh.filter(pl.col("__status") == "drop")[SOURCE_LINE]
    conflict = fresh.filter(pl.col("__status") == "conflict").with_columns(
        pl.col(SOURCE_LINE).implode().over(key).alias("__lines")
    )
    return drop_lines, conflict.select(SOURCE_LINE, "__old_v", "__old_sid", "__old_line", "__lines")


def _conflict_messages(store: Store, conflict: pl.DataFrame, key: list[str]) -> pl.DataFrame:
    """``line`` and ``message`` of conflicting new records (few: a loop is fine)."""
    committed = store.committed()
    sources_of = {
        sid: (store.marker(committed[sid]) or {}).get("source", sid)
        for sid in conflict["__old_sid"].drop_nulls().unique().to_list()
        if sid in committed
    }
    messages = []
    for row in conflict.iter_rows(named=True):
        if row["__old_v"] is not None:
            origin = sources_of.get(row["__old_sid"], row["__old_sid"])
            messages.append(
                f"same key as the stored record from {origin} line {row['__old_line']}, "
                "which has a different value; the stored record is kept"
            )
        else:
            mates = [line for line in row["__lines"] if line != row[SOURCE_LINE]]
            messages.append(
                "same key as line(s) "
                + ", ".join(str(m) for m in mates[:10])
                + " of this file with a different value; all of them are quarantined"
            )
    return pl.DataFrame({"line": conflict[SOURCE_LINE], "message": messages})


def _rewrite_without(store: Store, paths: list[str], lines: pl.Series) -> set[str]:
    """Rewrite the (uncommitted) parts that hold any of ``lines``; return those emptied."""
    doomed = lines.to_frame(SOURCE_LINE)
    emptied = set()
    for path in paths:
        # The lines alone first: a part that loses nothing, or everything (a whole re-delivery),
        # is never read whole.
        in_part = store.read_parquet(path, [SOURCE_LINE])
        losing = in_part.join(doomed, on=SOURCE_LINE, how="semi").height
        if not losing:
            continue
        if losing == in_part.height:
            store.remove([path])
            emptied.add(path)
            continue
        frame = store.read_parquet(path)
        store.write_parquet(path[len(store.root) + 1 :], frame.join(doomed, on=SOURCE_LINE, how="anti"))
    return emptied


class Prefetch(Iterator[T]):
    """The items of an iterator, produced ``depth`` ahead in a background thread started at once.

    Parsing (polars, GIL released) then overlaps validation and writing on the
    second core; memory holds at most ``depth + 1`` items. An exception in the
    producer is re-raised in the caller at the item where it happened.
    :meth:`close` (also at the end of the items) stops the producer at its next
    item and waits for it; the producer closes the items (a generator's
    ``finally`` runs then).
    """

    def __init__(self, items: Iterator[T], depth: int = 1) -> None:
        self._slots: queue.Queue[tuple[str, Any]] = queue.Queue(maxsize=depth)
        self._stop = threading.Event()
        self._done = False
        self._items = items
        self._worker = threading.Thread(target=self._produce, daemon=True, name="jurymeter-prefetch")
        self._worker.start()

    def _put(self, slot: tuple[str, Any]) -> bool:
        while not self._stop.is_set():
            try:
                self._slots.put(slot, timeout=0.05)
                return True
            except queue.Full:
                continue
        return False

    def _produce(self) -> None:
        try:
            for item in self._items:
                if not self._put(("item", item)):
                    return
            self._put(("done", None))
        except BaseException as exc:  # handed to the consumer, never lost
            self._put(("error", exc))
        finally:
            close = getattr(self._items, "close", None)
            if close is not None:  # a generator stopped early cleans up now (its temporary files)
                close()

    def __next__(self) -> T:
        if self._done:
            raise StopIteration
        kind, value = self._slots.get()
        if kind == "item":
            return cast(T, value)
        self.close()
        if kind == "error":
            raise value
        raise StopIteration

    def close(self) -> None:
        self._done = True
        self._stop.set()
        with contextlib.suppress(queue.Empty):
            while True:
                self._slots.get_nowait()
        self._worker.join(timeout=60)


def prefetch(items: Iterator[T], depth: int = 1) -> Prefetch[T]:
    """:class:`Prefetch` of ``items``: produced ``depth`` ahead in a background thread, started now."""
    return Prefetch(items, depth)


def _rows_for(block_bytes: int) -> int:
    """Parquet rows per batch for a byte budget (about 128 bytes a record in JSON)."""
    return max(1, block_bytes // 128)


def _fetch_raw(source: SourceFile, lines: np.ndarray, block_bytes: int) -> dict[int, str]:
    """Raw text of the given lines, by reading the source again (conflicts only)."""
    if source.adapter is not None:
        if source.format in DOCUMENT_FORMATS:
            return {}  # a document has no lines to show; the message names the key
        from jurymeter.io.adapters.reading import FileBytes

        wanted_lines = set(int(x) for x in lines)
        return {n: text.decode("utf-8", "replace") for n, text in FileBytes(source).lines() if n in wanted_lines}
    wanted = set(int(x) for x in lines)
    out: dict[int, str] = {}
    for batch in read_batches(
        source, block_bytes=block_bytes, parquet_rows=_rows_for(block_bytes)
    ):
        hit = np.flatnonzero(np.isin(batch.lines, list(wanted)))
        if len(hit):
            for line, text in zip(batch.lines[hit], batch.raw(hit), strict=True):
                out[int(line)] = text
    return out
