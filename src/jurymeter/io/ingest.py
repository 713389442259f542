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

import contextlib
import datetime as dt
import errno
import threading
import uuid
from collections import Counter
from collections.abc import Callable, Generator
from dataclasses import dataclass, replace
from typing import Any

from jurymeter.errors import JurymeterError, SourceError, StoreError
from jurymeter.io.commit import commit_staged, now, rows_for
from jurymeter.io.ingest_report import UNREADABLE, IngestReport, SourceReport
from jurymeter.io.prefetch import prefetch
from jurymeter.io.records import DEFAULT_BLOCK_BYTES, read_batches
from jurymeter.io.schema import (
    ID_LIKE_COLUMNS,
    Protocol,
)
from jurymeter.io.source_files import SourceFile, content_key, content_sha256
from jurymeter.io.staging import Staged, validate_stage
from jurymeter.io.store import BLAKE3_PREFIX, Store
from jurymeter.io.streaming import Census, eligible, stream_source
from jurymeter.io.validate import ValidationOptions


def new_run_id() -> str:
    stamp = dt.datetime.now(dt.UTC).strftime("%Y%m%dT%H%M%SZ")
    return f"{stamp}-{uuid.uuid4().hex[:8]}"


@dataclass(frozen=True, slots=True)
class StageSettings:
    """What every stage step of one ingest shares (picklable: a Dask worker opens the store by its address).

    ``old_keys`` are the store's SHA-256 markers by size as the run began
    (:func:`sha256_keys_by_size`); a stage step reads markers, never writes one.
    """

    store_url: str
    storage_options: dict[str, Any]
    options: ValidationOptions
    block_bytes: int
    old_keys: dict[int, set[str]]


@dataclass(frozen=True, slots=True)
class StageTask:
    """One source's stage step as data.

    ``key``: its content key when the driver computed it already (a source of
    the size of another of the run: :func:`mapped_stages`). ``sizes``: the
    committed sources' sizes where an adapter source may start reading beside
    its key (local stores), else ``None``.
    """

    settings: StageSettings
    source: SourceFile
    sizes: frozenset[int] | None = None
    key: str | None = None


@dataclass(slots=True)
class StagedSource:
    """What the stage step hands the commit step: small and picklable.

    Exactly one of: ``failure`` (the source could not be read; nothing of it is
    left in the store), ``committed_as`` (its content is in the store under
    that key, or earlier in this run: nothing was read or written), or the
    invisible parts in ``staged`` with what was read in ``report`` (its
    ``reasons``: the rejects so far; the commit adds conflicts).
    """

    url: str
    key: str | None = None
    report: SourceReport | None = None
    staged: Staged | None = None
    committed_as: str | None = None
    failure: str | None = None


class NotMapped(Exception):
    """A stage step a :data:`StageMap` did not run (no cluster reachable): the ingest stages it itself."""


# Runs the stage steps on a cluster (orchestration.tasks.cluster_stage_map): each task's result, or the
# exception it raised, in the tasks' order, each once it is done; closing it waits for every task to end.
StageMap = Callable[[Callable[[StageTask], StagedSource], list[StageTask]], Generator[Any, None, None]]


def ingest(
    store: Store,
    sources: list[SourceFile],
    options: ValidationOptions,
    *,
    strict: bool = False,
    lock_timeout: float = 600.0,
    block_bytes: int = DEFAULT_BLOCK_BYTES,
    on_source: Callable[[SourceReport], None] | None = None,
    stage_map: StageMap | None = None,
) -> IngestReport:
    """Ingest ``sources`` into ``store`` under its write lock.

    Each source is a stage step (:func:`stage_source`: content key, read,
    validate, invisible parts) and a commit step (:func:`commit_source`:
    already-ingested check, duplicates, marker), committed in the sources'
    order. Without ``stage_map`` each source is staged here when its turn
    comes (:func:`serial_stages`); with it the stage steps run side by side on
    a cluster's workers (:func:`mapped_stages`), with the same store and the
    same counts as a result. The lock is held throughout, so no other ingest's
    cleanup can remove parts being staged.

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
    report = IngestReport(run_id=new_run_id(), store=store.url, started=now())
    with store.lock(timeout=lock_timeout):
        report.removed_uncommitted = len(store.remove_uncommitted())
        seen: dict[str, str] = {}  # content key -> the URL of the run's first source of that content
        settings = StageSettings(store.url, store.storage_options, options, block_bytes, sha256_keys_by_size(store))
        stages = (serial_stages(store, sources, settings, seen) if stage_map is None
                  else mapped_stages(store, sources, settings, seen, stage_map))
        try:
            for source, staged in zip(sources, stages, strict=True):
                result = commit_source(store, source, staged, options, report.run_id, strict, block_bytes, seen)
                report.sources.append(result)
                store.write_json(f"runs/{report.run_id}.json", {**report.to_json(), "status": "running"})
                if on_source is not None:
                    on_source(result)
        finally:
            stages.close()  # a stopped ingest (strict, a store error) waits for the stage steps under way
        report.finished = now()
        store.write_json(f"runs/{report.run_id}.json", {**report.to_json(), "status": "complete"})
    return report


def _committed_sizes(store: Store, sources: list[SourceFile]) -> set[int] | None:
    """The committed sources' sizes, when an adapter source may read beside its key (local stores)."""
    if store.is_s3 or not any(s.adapter is not None and s.unreadable is None for s in sources):
        return None
    return {int(m.get("size", -1)) for m in store.markers()}


def serial_stages(
    store: Store, sources: list[SourceFile], settings: StageSettings, seen: dict[str, str]
) -> Generator[StagedSource, None, None]:
    """Each source staged here as its turn comes, after the commit of those before it.

    ``seen`` is then up to date, so a copy of a source committed earlier in
    this run is never read; the sizes grow with the run's adapter sources
    (a source of the size of one met before is keyed before it is read).
    """
    sizes = _committed_sizes(store, sources)
    for source in sources:
        task = StageTask(settings, source, None if sizes is None else frozenset(sizes))
        yield stage_source(task, store, frozenset(seen))
        if source.adapter is not None and sizes is not None:
            sizes.add(source.size)


def mapped_stages(
    store: Store, sources: list[SourceFile], settings: StageSettings, seen: dict[str, str], stage_map: StageMap
) -> Generator[StagedSource, None, None]:
    """The stage steps of ``sources`` run by ``stage_map`` side by side, yielded in the sources' order.

    Two copies of one content must never be staged at once (their parts would
    carry one source id), and only files of one size can be copies: the
    sources of a size another source of the run has are keyed here first, and
    each content is mapped once, for its first source; a later copy is staged
    here at its turn (its key then ``seen``, unless the first could not be
    read). A task that failed without a result (a lost worker) is staged again
    here; a store error is raised, as the serial ingest raises it.
    """
    sizes = _committed_sizes(store, sources)
    frozen = None if sizes is None else frozenset(sizes)
    keys = _keys_of_copies(sources)
    firsts: set[str] = set()
    mapped: dict[int, StageTask] = {}
    for k, source in enumerate(sources):
        key = keys.get(k)
        if source.unreadable is None and (key is None or key not in firsts):
            mapped[k] = StageTask(settings, source, frozen, key)
        if key is not None:
            firsts.add(key)
    results = stage_map(stage_task, list(mapped.values()))
    try:
        for k, source in enumerate(sources):
            staged = next(results) if k in mapped else None
            if isinstance(staged, JurymeterError):
                raise staged
            if not isinstance(staged, StagedSource):  # not mapped, not run (NotMapped), or its worker was lost
                lost = staged is not None and not isinstance(staged, NotMapped)
                staged = _restage(store, StageTask(settings, source, frozen, keys.get(k)), frozenset(seen), lost)
            # Other processes wrote parts: listings this process cached (s3fs keeps them) are stale,
            # and the commit lists and reads them (duplicates against the committed rows).
            store.fs.invalidate_cache()
            yield staged
    finally:
        results.close()


def _keys_of_copies(sources: list[SourceFile]) -> dict[int, str]:
    """The content keys of the sources that share their size with another (the only possible copies)."""
    counts = Counter(s.size for s in sources if s.unreadable is None)
    keys = {}
    for k, source in enumerate(sources):
        if source.unreadable is None and counts[source.size] > 1:
            with contextlib.suppress(Exception):  # unreadable: its stage step, at its turn, says why
                keys[k] = BLAKE3_PREFIX + content_key(source)
    return keys


def stage_task(task: StageTask) -> StagedSource:
    """The stage step on a Dask worker: the store opened by its address, nothing of this run seen."""
    return stage_source(task, Store(task.settings.store_url, task.settings.storage_options), frozenset())


def _restage(store: Store, task: StageTask, seen: frozenset[str], lost: bool) -> StagedSource:
    """Stage a source here: one not mapped, or one whose worker was ``lost`` (its parts, if any, removed first)."""
    key = task.key
    if not lost:
        return stage_source(task, store, seen)
    if key is None and task.source.unreadable is None:
        with contextlib.suppress(Exception):  # unreadable: stage_source says why
            key = BLAKE3_PREFIX + content_key(task.source)
    if key is not None and key not in seen and store.marker(key) is None:
        store.remove_parts_of(store.source_id(key))
    return stage_source(replace(task, key=key), store, seen)


def stage_source(task: StageTask, store: Store, seen: frozenset[str]) -> StagedSource:
    """The stage step of one source: its content key; unless committed, read, validate, write invisible parts.

    Runs anywhere the store and the source can be reached (the ingest's
    process or a Dask worker); writes only parts no reader sees before the
    commit step writes the marker. ``seen``: content keys committed earlier
    in this run (the serial ingest's). A read failure removes what the
    source wrote and is its ``failure``; a store failure is raised.
    """
    source, key = task.source, task.key
    if source.unreadable is not None:  # discovery could not read it: never opened here
        return StagedSource(source.url, failure=source.unreadable)
    # The fast path's census, or an adapter's reading, runs beside the key (two
    # cores, one pass's wall time); it is cancelled if the file needs no ingest.
    census = Census(source) if key is None and eligible(source, store) else None
    early = None
    # A source the size of one already seen is most likely a re-delivery: key it
    # alone (the no-op costs only the key); any other starts reading now (local stores).
    if key is None and source.adapter is not None and task.sizes is not None and source.size not in task.sizes:
        early = AdapterRead(source, task.settings.options)
    reading = False
    try:
        if key is None:
            key = BLAKE3_PREFIX + content_key(source)
        found = key if key in seen else committed_as(store, source, key, task.settings.old_keys)
        if found is not None:
            return StagedSource(source.url, key, committed_as=found)
        if census is None and eligible(source, store):
            census = Census(source)
        reading = True
        return _read_source(store, source, key, task.settings, census, early)
    except Exception as exc:
        if not _is_read_failure(exc):
            # A store failure (disk full, S3) stops the ingest: this source's parts have no
            # commit marker, so no reader sees them, and the next ingest removes them first.
            raise
        if reading:  # its staged parts have no marker: removed now, the store is as before it
            store.remove_parts_of(store.source_id(key))  # type: ignore[arg-type]
        return StagedSource(source.url, key, failure=str(exc) or type(exc).__name__)
    finally:
        if census is not None:
            census.cancel()
        if early is not None:
            early.close()


def _read_source(
    store: Store,
    source: SourceFile,
    key: str,
    settings: StageSettings,
    census: Census | None,
    early: AdapterRead | None,
) -> StagedSource:
    """Read, validate and stage one source (the fast path where it applies, else the block path)."""
    options = settings.options
    staged = Staged(store.source_id(key))
    result = SourceReport(source=source.url, content_key=key, status="ingested")
    reasons: Counter[str] = Counter()
    watched = frozenset(options.column_map.get(c, c) for c in ID_LIKE_COLUMNS)
    # A census was started exactly for the sources the fast path may try (eligible).
    streamed = stream_source(store, source, staged.sid, options, watched, census) if census is not None else None
    if source.adapter is not None:
        result.format = source.adapter
    if streamed is not None:
        result.read, result.protocol = streamed.read, streamed.protocol
        result.lines = streamed.read
        staged.parts = list(streamed.parts)
    else:
        result.protocol = _read_validate_stage(
            store, source, staged, options, watched, settings.block_bytes, result, reasons, early
        )
    result.reasons = dict(reasons)
    return StagedSource(source.url, key, report=result, staged=staged)


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


def commit_source(
    store: Store,
    source: SourceFile,
    staged: StagedSource,
    options: ValidationOptions,
    run_id: str,
    strict: bool,
    block_bytes: int,
    seen: dict[str, str],
) -> SourceReport:
    """The commit step of one source, in the sources' order under the lock: its report.

    An unreadable source is reported; one whose content is committed (before
    or earlier in this run) is ``already_ingested``; any other is committed
    by :func:`commit_staged`. A read failure there (the conflicts' lines read
    again) removes the source's parts and reports it unreadable.
    """
    if staged.failure is not None:
        return _unreadable(source, staged.failure)
    key = staged.key
    assert key is not None
    if staged.committed_as is not None or key in seen:
        found = staged.committed_as or key
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
    assert staged.report is not None
    assert staged.staged is not None
    seen[key] = source.url
    try:
        return commit_staged(store, source, staged.report, staged.staged, options, run_id, strict, block_bytes)
    except Exception as exc:
        if not _is_read_failure(exc):
            raise
        store.remove_parts_of(staged.staged.sid)
        del seen[key]  # a later copy of its content is not "already ingested"
        return _unreadable(source, str(exc) or type(exc).__name__)


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
        read_batches(source, block_bytes=block_bytes, parquet_rows=rows_for(block_bytes), text_fields=watched)
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
