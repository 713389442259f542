"""Ingest: sources -> validated, de-duplicated, partitioned records in the store.

For every source file, ``records read = accepted + quarantined + duplicates
dropped`` holds and is written into the source's commit marker and the run's
manifest. One source is one transaction (see :mod:`jurymeter.io.store`):

1. compute its content key (BLAKE3: :func:`~jurymeter.io.source_files.content_key`);
   a file whose content is already committed is skipped (a store's older
   SHA-256 markers are compared by SHA-256 only for a file of one's size);
2. stream it in bounded batches: parse, validate, write accepted rows as
   (invisible) parts per partition and rejected rows to quarantine parts;
3. find duplicates among the new rows and against committed rows of the same
   partitions (64-bit key hashes first, exact key comparison on collisions):
   an exact re-delivery is dropped and counted, a conflicting one goes to
   quarantine, and parts that lose rows are rewritten;
4. write the commit marker.
"""

from __future__ import annotations

import datetime as dt
import errno
import threading
import uuid
from collections import Counter
from collections.abc import Callable
from typing import Any

import numpy as np

from jurymeter.errors import SourceError, StoreError, StrictModeError
from jurymeter.io.duplicates import resolve_duplicates
from jurymeter.io.ingest_report import UNREADABLE, IngestReport, SourceReport
from jurymeter.io.prefetch import prefetch
from jurymeter.io.records import DEFAULT_BLOCK_BYTES, read_batches
from jurymeter.io.schema import (
    ID_LIKE_COLUMNS,
    Protocol,
)
from jurymeter.io.source_files import DOCUMENT_FORMATS, SourceFile, content_key, content_sha256
from jurymeter.io.staging import Staged, quarantine_frame, validate_stage
from jurymeter.io.store import BLAKE3_PREFIX, Store
from jurymeter.io.streaming import Census, eligible, stream_source
from jurymeter.io.validate import ValidationOptions


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
        old_keys = sha256_keys_by_size(store)
        sizes: set[int] | None = None  # of the committed sources and those of this run so far
        for source in sources:
            if source.unreadable is not None:  # discovery could not read it: never opened here
                result = _unreadable(source, source.unreadable)
            else:
                if source.adapter is not None and not store.is_s3 and sizes is None:
                    sizes = {int(m.get("size", -1)) for m in store.markers()}
                result = _one_source(store, source, options, report.run_id, strict, block_bytes, seen, sizes,
                                     old_keys)
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
    return SourceReport(source=source.url, content_key="", status=UNREADABLE, format=source.adapter or "canonical",
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
    old_keys: dict[int, set[str]],
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
        return _hash_and_ingest(store, source, census, options, run_id, strict, block_bytes, seen, old_keys,
                                early)
    except Exception as exc:
        if not _is_read_failure(exc):
            # A store failure (disk full, S3) stops the ingest: this source's parts have no
            # commit marker, so no reader sees them, and the next ingest removes them first.
            raise
        # This source's staged parts have no commit marker: remove them now, so the
        # store is as before it (the sources before it are committed, so keep theirs).
        store.remove_uncommitted()
        for key in set(seen) - before:  # a later copy of its content is not "already ingested"
            del seen[key]
        return _unreadable(source, str(exc) or type(exc).__name__)
    finally:
        if census is not None:
            census.cancel()
        if early is not None:
            early.close()


def sha256_keys_by_size(store: Store) -> dict[int, set[str]]:
    """The store's SHA-256 markers (written before BLAKE3 content keys) by their source's size.

    One listing; a marker is read only in a store that has SHA-256 markers, so a
    store of BLAKE3 markers only costs no read here. A marker without a size
    (none was written so) would match no file and is left out.
    """
    out: dict[int, set[str]] = {}
    for key in store.committed().values():
        if key.startswith(BLAKE3_PREFIX):
            continue
        size = (store.marker(key) or {}).get("size")
        if isinstance(size, int):
            out.setdefault(size, set()).add(key)
    return out


def committed_as(store: Store, source: SourceFile, key: str, old_keys: dict[int, set[str]]) -> str | None:
    """The content key ``source`` is committed under (its own, or an old SHA-256 marker's), or ``None``.

    A file of the size of an old marker is hashed by SHA-256 too, and only
    then: a re-delivery into a store of the earlier format is found without
    hashing every new file twice.
    """
    if store.marker(key) is not None:
        return key
    if source.size in old_keys:
        sha = content_sha256(source)
        if sha in old_keys[source.size]:
            return sha
    return None


def _hash_and_ingest(
    store: Store,
    source: SourceFile,
    census: Census | None,
    options: ValidationOptions,
    run_id: str,
    strict: bool,
    block_bytes: int,
    seen: dict[str, str],
    old_keys: dict[int, set[str]],
    early: AdapterRead | None = None,
) -> SourceReport:
    """Ingest one source unless its content (by content key) is in the store or earlier in this run."""
    key = BLAKE3_PREFIX + content_key(source)
    found = key if key in seen else committed_as(store, source, key, old_keys)
    if found is not None:
        marker = store.marker(found)
        first = seen.get(key) or (marker or {}).get("source", "?")
        seen.setdefault(key, source.url)
        return SourceReport(
            source=source.url,
            content_key=found,
            status="already_ingested",
            protocol=(marker or {}).get("protocol"),
            note=f"same content as {first}, already in the store: nothing to do",
        )
    seen[key] = source.url
    return _ingest_source(store, source, key, options, run_id, strict, block_bytes, census, early)


def _ingest_source(
    store: Store,
    source: SourceFile,
    key: str,
    options: ValidationOptions,
    run_id: str,
    strict: bool,
    block_bytes: int = DEFAULT_BLOCK_BYTES,
    census: Census | None = None,
    early: AdapterRead | None = None,
) -> SourceReport:
    sid = store.source_id(key)
    staged = Staged(sid)
    result = SourceReport(source=source.url, content_key=key, status="ingested")
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
        dropped, conflicts = resolve_duplicates(store, staged, protocol)
        result.duplicates_dropped = dropped
        if conflicts is not None and conflicts.height:
            raws = _fetch_raw(source, conflicts["line"].to_numpy(), block_bytes)
            q = quarantine_frame(
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
    store.write_json(f"ingested/{key}.json", _marker(source, key, sid, protocol, run_id, options, result, staged))
    return result


def _marker(
    source: SourceFile,
    key: str,
    sid: str,
    protocol: Protocol | None,
    run_id: str,
    options: ValidationOptions,
    result: SourceReport,
    staged: Staged,
) -> dict[str, Any]:
    """The source's commit marker: what was read from it and where its parts are (step 4).

    ``content_key`` is the marker's name (``b3-<BLAKE3 hex>``) and ``algorithm``
    its hash; a marker without them (written before) is keyed by ``sha256``.
    """
    return {
        "content_key": key,
        "algorithm": "blake3",
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
    }


def _read_validate_stage(
    store: Store,
    source: SourceFile,
    staged: Staged,
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
            protocol = validate_stage(store, source, staged, options, read.batches, result, reasons)
        finally:
            read.close()
        result.notes = list(read.notes.notes)
        return protocol
    batches = prefetch(
        read_batches(source, block_bytes=block_bytes, parquet_rows=_rows_for(block_bytes), text_fields=watched)
    )
    try:
        return validate_stage(store, source, staged, options, batches, result, reasons)
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
