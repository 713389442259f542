"""The judgment store: Hive-partitioned Parquet on a local folder or S3, with commit markers.

Layout under the store root (a folder or ``s3://bucket/prefix``)::

    jurymeter-store.json                       store format marker
    data/protocol=pointwise/item_set=<enc>/part-<sid>-<seq>.parquet
    data/protocol=pairwise/item_set=<enc>/part-<sid>-<seq>.parquet
    data/protocol=systems/part-<sid>-<seq>.parquet     (metadata tables)
    data/protocol=judges/part-<sid>-<seq>.parquet
    quarantine/part-<sid>-<seq>.parquet        rejected records with reasons
    ingested/<sha256>.json                     commit marker of one source file
    runs/<run_id>.json                         per-run reconciliation manifest
    _lock                                      write lock (local stores)
    _lock.json                                 write lock (S3 stores)
    _staging/<sid>-<uuid>/...                  the streaming path's output before it is
                                               proven (local stores; never read)

``<sid>`` is the first 16 hex digits of the source file's SHA-256. A file under
``data/`` or ``quarantine/`` is part of the store only if ``ingested/`` holds the
marker of its source: the marker is written last, in one atomic step, so a crash
at any moment leaves each source either wholly in the store or not at all, and
readers never see half a source. Files of uncommitted sources are garbage that
the next ingest removes under the lock.
"""

from __future__ import annotations

import contextlib
import functools
import io
import os
import shutil
import socket
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import orjson
import polars as pl

from jurymeter.errors import ConfigError, StoreError, StoreLockedError
from jurymeter.io.naming import decode_item_set, is_digested, item_set_folder
from jurymeter.io.schema import JUDGMENT_PROTOCOLS, PROTOCOLS, SCHEMAS, SOURCE_LINE, Protocol
from jurymeter.io.source_files import filesystem_for

if TYPE_CHECKING:
    from polars._typing import PolarsDataType

STORE_FORMAT = 1
MARKER_FILE = "jurymeter-store.json"
DEFAULT_STORE = "jurymeter-store"
SOURCE_ID_LENGTH = 16
# An S3 lock older than this is presumed abandoned by a crashed writer.
S3_LOCK_STALE_SECONDS = 6 * 3600
S3_LOCK_FILE = "_lock.json"
STAGING = "_staging"
RUN_LOCK_FILE = "_run_lock"  # held by a nightly run (Store.run_lock)
# In a partition folder whose name is digested (a long item-set name): the full name.
ITEM_SET_FILE = "_item_set.json"
# In a partition folder: written when an ingest stores a second rating of one (system,
# item, judge, generation, replicate) cell, told apart by run, batch or position
# (io.schema.RATING_KEY). The fits renumber such ratings as replicates only where it
# is (pipeline.fit.rated_replicates). Written before the source's marker, so a crash
# can leave it behind with no such rating stored: it then costs the fits one check.
# Stores written before the key held those columns could not hold such ratings.
RATED_CELLS_FILE = "_rated_cells.json"
# Pause before an S3 lock owner reads its lock back, and between attempts.
S3_LOCK_CONFIRM_SECONDS = 0.2
S3_LOCK_POLL_SECONDS = 0.5
# S3 error codes of a conditional write that lost to another writer.
_S3_LOST_RACE = frozenset({"PreconditionFailed", "ConditionalRequestConflict", "NoSuchKey"})


def default_store_url() -> str:
    """``$JURYMETER_STORE`` if set, else ``./jurymeter-store``."""
    return os.environ.get("JURYMETER_STORE", DEFAULT_STORE)


@dataclass(frozen=True, slots=True)
class DataFile:
    """One committed Parquet file of the store."""

    protocol: Protocol
    item_set: str | None
    path: str
    source_id: str


@dataclass(slots=True)
class Store:
    """A judgment store at ``url`` (local folder or ``s3://bucket/prefix``).

    Parameters
    ----------
    url
        Location of the store.
    storage_options
        fsspec/s3fs options (``endpoint_url``, ``key``...). Credentials normally
        come from the standard AWS environment variables instead; they are never
        printed.
    """

    url: str
    storage_options: dict[str, Any] = field(default_factory=dict, repr=False)
    fs: Any = field(init=False, repr=False)
    root: str = field(init=False)
    # Full names of digested partition folders: read from (or written to) the
    # folder's name file once per Store; a folder name determines its name.
    _names: dict[str, str] = field(init=False, repr=False, compare=False, default_factory=dict)
    # polars' S3 reader arguments ({} when the pyarrow dataset path reads), and
    # whether one footer has been read with them.
    _reader: dict[str, Any] | None = field(init=False, repr=False, compare=False, default=None)
    _reader_checked: bool = field(init=False, repr=False, compare=False, default=False)

    def __post_init__(self) -> None:
        if self.is_s3:
            s3_options = s3fs_options(self.storage_options)
            try:
                self.fs, self.root = filesystem_for(self.url, s3_options)
            except Exception as exc:  # s3fs checks some option combinations up front
                msg = f"cannot open store {self.url}: {_short(exc)}"
                raise StoreError(msg) from exc
        else:
            self.fs, self.root = filesystem_for(self.url, None)
        self.root = self.root.rstrip("/")

    # ------------------------------------------------------------ basics
    @property
    def is_s3(self) -> bool:
        return self.url.startswith("s3://")

    def path(self, *parts: str) -> str:
        return "/".join([self.root, *parts])

    def display(self, path: str) -> str:
        """A store path as the user would write it."""
        return ("s3://" + path) if self.is_s3 else path

    def exists(self) -> bool:
        try:
            return bool(self.fs.exists(self.path(MARKER_FILE)))
        except Exception as exc:  # s3fs/botocore raise many types for one cause
            msg = f"cannot read store {self.url}: {_short(exc)}"
            raise StoreError(msg) from exc

    def create(self) -> None:
        """Create the store if it does not exist; check its format if it does."""
        try:
            if self.fs.exists(self.path(MARKER_FILE)):
                self.check()
                return
            if not self.is_s3:
                if os.path.exists(self.root) and not os.path.isdir(self.root):
                    msg = f"cannot create store {self.url}: a file is in the way"
                    raise StoreError(msg)
                os.makedirs(self.root, exist_ok=True)
            self.write_json(MARKER_FILE, {"format": STORE_FORMAT, "kind": "jurymeter-store"})
        except StoreError:
            raise
        except Exception as exc:
            msg = f"cannot create store {self.url}: {_short(exc)}"
            raise StoreError(msg) from exc

    def check(self) -> None:
        """Raise :class:`StoreError` unless this is a readable store of a known format."""
        try:
            marker = orjson.loads(self.fs.cat_file(self.path(MARKER_FILE)))
        except FileNotFoundError as exc:
            msg = f"no jurymeter store at {self.url} (run `jurymeter ingest` to create one)"
            raise StoreError(msg) from exc
        except Exception as exc:
            msg = f"cannot read store {self.url}: {_short(exc)}"
            raise StoreError(msg) from exc
        if not isinstance(marker, dict) or marker.get("format") != STORE_FORMAT:
            msg = f"store {self.url} has an unknown format: {MARKER_FILE} is not format {STORE_FORMAT}"
            raise StoreError(msg)

    # ------------------------------------------------------------ writing
    def write_json(self, relpath: str, obj: Any) -> None:
        """Write JSON in one atomic step (rename locally, one PUT on S3)."""
        self.write_bytes(relpath, orjson.dumps(obj, option=orjson.OPT_INDENT_2 | orjson.OPT_SORT_KEYS))

    def write_bytes(self, relpath: str, data: bytes) -> None:
        """Write a file in one atomic step (rename locally, one PUT on S3)."""
        target = self.path(relpath)
        if self.is_s3:
            try:
                self.fs.pipe_file(target, data)
            except Exception as exc:  # s3fs/botocore raise many types for one cause
                raise self._write_error(target, exc) from exc
            return
        tmp = f"{target}.tmp-{uuid.uuid4().hex}"
        try:
            os.makedirs(os.path.dirname(target), exist_ok=True)
            with open(tmp, "wb") as handle:
                handle.write(data)
                handle.flush()
                os.fsync(handle.fileno())
            os.replace(tmp, target)
        except OSError as exc:  # disk full, read-only, no permission: the target is as it was
            with contextlib.suppress(OSError):
                os.remove(tmp)
            raise self._write_error(target, exc) from exc

    def _write_error(self, target: str, exc: BaseException) -> StoreError:
        """One line naming the store, the operation and the cause (``[Errno 28] No space left on device``)."""
        return StoreError(f"cannot write {self.display(target)}: {_short(exc)}")

    def read_json(self, relpath: str) -> Any:
        """A JSON file of the store; ``FileNotFoundError`` if it is not there, :class:`StoreError` if it cannot be read."""
        target = self.path(relpath)
        try:
            data = self.fs.cat_file(target)
        except FileNotFoundError:
            raise
        except Exception as exc:  # s3fs/botocore raise many types for one cause
            msg = f"cannot read {self.display(target)}: {_short(exc)}"
            raise StoreError(msg) from exc
        return orjson.loads(data)

    def write_parquet(self, relpath: str, frame: pl.DataFrame) -> None:
        """Write one zstd Parquet file (polars' writer: faster than pyarrow's here)."""
        target = self.path(relpath)
        if self.is_s3:
            # Serialise first, then one upload: a failed upload leaves no object.
            sink = io.BytesIO()
            frame.write_parquet(sink, compression="zstd")
            try:
                self.fs.pipe_file(target, sink.getvalue())
            except Exception as exc:  # s3fs/botocore raise many types for one cause
                raise self._write_error(target, exc) from exc
            return
        try:
            os.makedirs(os.path.dirname(target), exist_ok=True)
            frame.write_parquet(target, compression="zstd")
        except Exception as exc:  # OSError, or polars' own error around one (disk full)
            # Only parts not yet committed and a run's tables are written in place; a cut one goes.
            with contextlib.suppress(OSError):
                os.remove(target)
            raise self._write_error(target, exc) from exc

    def read_parquet(self, path: str, columns: list[str] | None = None) -> pl.DataFrame:
        """One Parquet file of the store (``path`` as returned by listings): whole, or only ``columns``."""
        import pyarrow.parquet as pq  # here, not at the top: a command that reads no file whole skips its import

        try:
            with self.fs.open(path, "rb") as handle:
                frame = pl.from_arrow(pq.ParquetFile(handle).read(columns=columns))
        except FileNotFoundError:
            raise
        except Exception as exc:  # s3fs/botocore/pyarrow raise many types for one cause
            msg = f"cannot read {self.display(path)}: {_short(exc)}"
            raise StoreError(msg) from exc
        assert isinstance(frame, pl.DataFrame)
        return frame

    def remove(self, paths: list[str]) -> None:
        if not paths:
            return
        try:
            self.fs.rm(paths)
        except FileNotFoundError:
            pass  # already gone: what removing wanted
        except Exception as exc:  # s3fs/botocore raise many types for one cause
            msg = f"cannot remove {self.display(paths[0])}: {_short(exc)}"
            raise StoreError(msg) from exc

    # ------------------------------------------------------------ layout
    @staticmethod
    def partition_dir(protocol: Protocol, item_set: str | None) -> str:
        if protocol in JUDGMENT_PROTOCOLS:
            if item_set is None:
                msg = f"{protocol} data needs an item set"
                raise ValueError(msg)
            return f"data/protocol={protocol}/item_set={item_set_folder(item_set)}"
        return f"data/protocol={protocol}"

    def name_partition(self, protocol: Protocol, item_set: str | None) -> str:
        """The partition folder of ``item_set``, its name file written if its folder name is digested.

        Writers call this before they put a part into the folder (the name file
        is written before any part, so before the source's commit marker). A
        name whose folder name is its encoding needs no file. The file's content
        follows from the folder name, so writing it again, or leaving it behind
        after a crash, changes nothing.
        """
        relpath = self.partition_dir(protocol, item_set)
        segment = relpath.rsplit("=", 1)[-1]
        if item_set is None or protocol not in JUDGMENT_PROTOCOLS or not is_digested(segment):
            return relpath
        folder = self.path(relpath)
        if self._names.get(folder) != item_set:
            self.write_json(f"{relpath}/{ITEM_SET_FILE}", {"item_set": item_set})
            self._names[folder] = item_set
        return relpath

    @staticmethod
    def source_id(sha256: str) -> str:
        return sha256[:SOURCE_ID_LENGTH]

    def committed(self) -> dict[str, str]:
        """Source id -> SHA-256 of every committed source."""
        names = self._list("ingested")
        out = {}
        for name in names:
            base = name.rsplit("/", 1)[-1]
            if base.endswith(".json") and len(base) == 64 + 5:
                sha = base[:-5]
                out[self.source_id(sha)] = sha
        return out

    def marker(self, sha256: str) -> dict[str, Any] | None:
        """The commit marker of a source, or ``None`` if it was never committed."""
        try:
            marker: dict[str, Any] = self.read_json(f"ingested/{sha256}.json")
        except FileNotFoundError:
            return None
        return marker

    def markers(self) -> list[dict[str, Any]]:
        return [m for sha in self.committed().values() if (m := self.marker(sha)) is not None]

    def _list(self, relpath: str) -> list[str]:
        try:
            return list(self.fs.find(self.path(relpath)))
        except FileNotFoundError:
            return []
        except Exception as exc:  # s3fs/botocore raise many types for one cause
            msg = f"cannot list {self.display(self.path(relpath))}: {_short(exc)}"
            raise StoreError(msg) from exc

    def _files(self, relpath: str, *, committed_only: bool) -> list[tuple[str, str]]:
        """(path, source id) of the Parquet parts under ``relpath``."""
        keep = set(self.committed()) if committed_only else None
        out = []
        for path in self._list(relpath):
            base = path.rsplit("/", 1)[-1]
            if not (base.startswith("part-") and base.endswith(".parquet")):
                continue
            sid = base[len("part-") : len("part-") + SOURCE_ID_LENGTH]
            if keep is None or sid in keep:
                out.append((path, sid))
        return sorted(out)

    def data_files(
        self, protocol: Protocol | None = None, item_set: str | None = None
    ) -> list[DataFile]:
        """Committed data files, optionally of one protocol and item set."""
        if protocol is not None and item_set is not None:
            relpath = self.partition_dir(protocol, item_set)
        elif protocol is not None:
            relpath = f"data/protocol={protocol}"
        else:
            relpath = "data"
        out = []
        for path, sid in self._files(relpath, committed_only=True):
            proto, found_set = self._partition_of(path)
            out.append(DataFile(protocol=proto, item_set=found_set, path=path, source_id=sid))
        return out

    def _partition_of(self, path: str) -> tuple[Protocol, str | None]:
        """Protocol and item set of a part, from its folder names (and a digested folder's name file)."""
        protocol: str | None = None
        item_set: str | None = None
        folder: list[str] = []
        for segment in path.split("/"):
            if segment.startswith("protocol="):
                protocol = segment[len("protocol=") :]
            elif segment.startswith("item_set="):
                encoded = segment[len("item_set=") :]
                item_set = (
                    self._digested_name("/".join([*folder, segment]), encoded)
                    if is_digested(encoded)
                    else decode_item_set(encoded)
                )
            folder.append(segment)
        if protocol not in PROTOCOLS:
            msg = f"unexpected file in store: {path}"
            raise StoreError(msg)
        return protocol, item_set

    def _digested_name(self, folder: str, segment: str) -> str:
        """The full item-set name kept in a digested partition folder; checked against the folder name."""
        if folder in self._names:
            return self._names[folder]
        name_file = f"{folder}/{ITEM_SET_FILE}"
        try:
            held = orjson.loads(self.fs.cat_file(name_file))
        except FileNotFoundError as exc:
            msg = f"store {self.url}: {self.display(name_file)} is missing (the item set's full name)"
            raise StoreError(msg) from exc
        except orjson.JSONDecodeError as exc:
            msg = f"store {self.url}: {self.display(name_file)} is not JSON"
            raise StoreError(msg) from exc
        name = held.get("item_set") if isinstance(held, dict) else None
        if not isinstance(name, str) or item_set_folder(name) != segment:
            msg = f"store {self.url}: {self.display(name_file)} does not hold the name of its folder"
            raise StoreError(msg)
        self._names[folder] = name
        return name

    def quarantine_files(self) -> list[str]:
        return [p for p, _ in self._files("quarantine", committed_only=True)]

    def remove_uncommitted(self) -> list[str]:
        """Delete parts of sources whose marker was never written (a crashed ingest).

        Also removes half-written JSON files and marks the manifest of a run that
        never finished as ``interrupted``.

        Call only under :meth:`lock`.
        """
        stale = [p for p, _ in self._files("data", committed_only=False)]
        stale += [p for p, _ in self._files("quarantine", committed_only=False)]
        keep = set(self.committed())
        doomed = [p for p in stale if _sid_of(p) not in keep]
        doomed += [p for p in self._list("ingested") + self._list("runs") if ".tmp-" in p]
        self.remove(doomed)
        if not self.is_s3:
            shutil.rmtree(self.path(STAGING), ignore_errors=True)
        for path in self._list("runs"):
            if path.endswith(".json"):
                manifest = orjson.loads(self.fs.cat_file(path))
                if manifest.get("status") == "running":
                    manifest["status"] = "interrupted"
                    self.write_json(path[len(self.root) + 1 :], manifest)
        return doomed

    def staging_area(self, sid: str) -> str:
        """A fresh local folder for output that may still be thrown away (local stores).

        Files a writer finishes after it has failed land here, never under
        ``data/``; :meth:`remove_uncommitted` clears the whole area.
        """
        if self.is_s3:
            msg = "a staging area exists on local stores only"
            raise ValueError(msg)
        area = self.path(STAGING, f"{sid}-{uuid.uuid4().hex[:8]}")
        try:
            os.makedirs(area)
        except OSError as exc:  # disk full, read-only
            raise self._write_error(area, exc) from exc
        return area

    def adopt(self, area: str, relpaths: list[str]) -> None:
        """Move files from a staging area to the same relative paths in the store.

        Each move is a rename. The files carry their source id, so until the
        source's marker exists they stay invisible, as if written in place.
        """
        for relpath in relpaths:
            target = self.path(relpath)
            try:
                os.makedirs(os.path.dirname(target), exist_ok=True)
                os.replace(os.path.join(area, relpath), target)
            except OSError as exc:  # disk full (a new folder): the moved parts stay invisible
                raise self._write_error(target, exc) from exc
        shutil.rmtree(area, ignore_errors=True)

    # ------------------------------------------------------------ reading
    def item_sets(self, protocol: Protocol) -> list[str]:
        return sorted({f.item_set for f in self.data_files(protocol) if f.item_set is not None})

    def scan(
        self,
        protocol: Protocol,
        item_set: str | None = None,
        *,
        columns: list[str] | None = None,
    ) -> pl.LazyFrame:
        """Lazy frame over the committed records of a protocol (and item set).

        Only the named partition's files are opened. Judgment protocols get their
        ``item_set`` column back from the partition; columns outside the schema
        are included only when ``columns`` names them.
        """
        schema = SCHEMAS[protocol]
        files = self.data_files(protocol, item_set)
        wanted = columns or list(schema.dtypes)
        frames = []
        by_set: dict[str | None, list[str]] = {}
        for f in files:
            by_set.setdefault(f.item_set, []).append(f.path)
        for found_set, paths in sorted(by_set.items(), key=lambda kv: str(kv[0])):
            lazy = self.scan_files(paths, [c for c in wanted if c != "item_set"], protocol)
            if protocol in JUDGMENT_PROTOCOLS:
                lazy = lazy.with_columns(pl.lit(found_set, dtype=pl.String).alias("item_set"))
            frames.append(lazy.select(wanted))
        if not frames:
            return pl.LazyFrame(
                {c: pl.Series(c, [], dtype=schema.dtypes.get(c, pl.String)) for c in wanted}
            )
        return pl.concat(frames, how="vertical_relaxed")

    def scan_files(
        self,
        paths: list[str],
        columns: list[str],
        protocol: Protocol,
        *,
        dtypes: dict[str, PolarsDataType] | None = None,
    ) -> pl.LazyFrame:
        """Scan parts of one protocol whose extra columns may differ; absent ones read as null.

        ``dtypes``: stored types that override the protocol's (the quarantine's
        parts, whose columns are not a protocol's: ``io.schema.QUARANTINE_SCHEMA``).

        Lazy on both backends: nothing is read until the frame is collected,
        and then only the columns and row groups the query needs (projection
        and predicate pushdown). On S3, polars' own object-store reader gets the
        s3fs options mapped onto its keys (:func:`polars_s3_options`); a store
        with an option that has no polars equivalent is scanned through
        ``pyarrow.dataset`` on the store's s3fs file system instead, still lazily.
        """
        # polars takes the first file's schema; name every wanted column's type so
        # a column missing from the first part (an extra column) still reads.
        wanted = {c: dtypes[c] if dtypes and c in dtypes else _dtype_of(c, protocol) for c in columns}
        if not paths:
            return pl.LazyFrame(schema=wanted)
        if not self.is_s3:
            return pl.scan_parquet(
                paths, schema=wanted, missing_columns="insert", extra_columns="ignore"
            ).select(columns)
        reader = self._s3_reader()
        if reader is None:
            return self._scan_pyarrow(paths, wanted)
        urls = ["s3://" + path for path in paths]

        def scan(sources: list[str]) -> pl.LazyFrame:
            return pl.scan_parquet(
                sources,
                schema=wanted,
                missing_columns="insert",
                extra_columns="ignore",
                glob=False,
                hive_partitioning=False,  # the store, not the folder names, gives item sets
                **reader,
            ).select(columns)

        if not self._reader_checked:
            # The scan is lazy, so a reader that cannot reach the store would fail
            # deep inside a fit: read one footer now, once per store object.
            try:
                scan(urls[:1]).select(pl.len()).collect()
            except Exception as exc:  # polars raises many types for one cause
                msg = f"cannot read {self.display(paths[0])} with polars' S3 reader: {_short(exc)}"
                raise StoreError(msg) from exc
            self._reader_checked = True
        return scan(urls)

    def _s3_reader(self) -> dict[str, Any] | None:
        """``pl.scan_parquet`` arguments that reach this S3 store as its s3fs file system does.

        ``None`` if an option has no polars equivalent (then ``pyarrow.dataset``
        reads through s3fs). The endpoint and region are those s3fs's client
        resolved (options, ``AWS_ENDPOINT_URL``, config files); credentials not
        given as options come from botocore's chain, the one s3fs uses.
        """
        if self._reader is None:
            client = self.fs.s3  # connected by the listing that found the files
            mapped = polars_s3_options(
                s3fs_options(self.storage_options),
                endpoint_url=client.meta.endpoint_url,
                region=client.meta.region_name,
            )
            self._reader = {} if mapped is None else mapped
        return self._reader or None

    def _scan_pyarrow(self, paths: list[str], wanted: dict[str, PolarsDataType]) -> pl.LazyFrame:
        """A lazy scan through ``pyarrow.dataset`` on the store's s3fs file system."""
        import pyarrow.dataset as ds
        from pyarrow.fs import FSSpecHandler, PyFileSystem

        schema = pl.DataFrame(schema=wanted).to_arrow(compat_level=pl.CompatLevel.oldest()).schema
        # pyarrow-stubs declare FSSpecHandler without the FileSystemHandler methods it implements.
        handler = FSSpecHandler(self.fs)  # type: ignore[abstract]
        dataset = ds.dataset(paths, schema=schema, format="parquet", filesystem=PyFileSystem(handler))
        return pl.scan_pyarrow_dataset(dataset).select(list(wanted))

    @contextlib.contextmanager
    def lock(self, *, timeout: float = 600.0) -> Iterator[None]:
        """Exclusive write lock: a second writer waits up to ``timeout`` seconds.

        Local stores use an OS file lock, released by the kernel if the process
        dies. S3 has no such lock: a lock object holds the owner's host and pid;
        a lock of a dead process on the same host, or older than
        ``S3_LOCK_STALE_SECONDS``, is taken over.
        """
        if not self.is_s3:
            import filelock

            lock = filelock.FileLock(self.path("_lock"))
            try:
                lock.acquire(timeout=timeout)
            except filelock.Timeout as exc:
                msg = (
                    f"store {self.url} is locked by another ingest; waited {timeout:.0f} s "
                    "(use --lock-timeout to wait longer)"
                )
                raise StoreLockedError(msg) from exc
            try:
                yield
            finally:
                lock.release()
            return
        token = self._acquire_s3_lock(timeout)
        try:
            yield
        finally:
            with contextlib.suppress(Exception):
                held = self.read_json(S3_LOCK_FILE)
                if held.get("token") == token:
                    self.fs.rm(self.path(S3_LOCK_FILE))

    @contextlib.contextmanager
    def run_lock(self) -> Iterator[bool]:
        """Held by a nightly run from its start to its end; yields whether no other run holds it.

        Local stores: an OS file lock beside the ingest's, never waited for
        (two runs may overlap; only one that holds it may clean what a killed
        run left) and released by the kernel when the process dies, SIGKILL
        included. S3 has no such lock: yields ``False`` (a run there cleans
        only by age, :func:`jurymeter.pipeline.publish.clean_unpublished`).
        """
        if self.is_s3:
            yield False
            return
        import filelock

        try:
            os.makedirs(self.root, exist_ok=True)
        except OSError as exc:
            raise self._write_error(self.root, exc) from exc
        lock = filelock.FileLock(self.path(RUN_LOCK_FILE))
        try:
            lock.acquire(timeout=0)
        except filelock.Timeout:
            yield False
            return
        try:
            yield True
        finally:
            lock.release()

    def folders(self, relpath: str) -> list[str]:
        """Names of the folders right under ``relpath`` (none: ``[]``), empty ones included on a local disk."""
        target = self.path(relpath)
        try:
            if not self.is_s3:
                return sorted(e.name for e in os.scandir(target) if e.is_dir(follow_symlinks=False))
            return sorted(str(p).rstrip("/").rsplit("/", 1)[-1] for p in self.fs.ls(target, detail=False)
                          if self.fs.isdir(p))
        except FileNotFoundError:
            return []
        except Exception as exc:  # s3fs/botocore raise many types for one cause
            msg = f"cannot list {self.display(target)}: {_short(exc)}"
            raise StoreError(msg) from exc

    def remove_folder(self, relpath: str, files: list[str]) -> None:
        """Remove ``files`` (full paths, as listings return them) and, on a local disk, the folder ``relpath``."""
        self.remove(files)
        if not self.is_s3:
            shutil.rmtree(self.path(relpath), ignore_errors=True)

    def ages(self, relpath: str) -> dict[str, float]:
        """Seconds since each file under ``relpath`` was last written, by path (none: ``{}``)."""
        try:
            found = self.fs.find(self.path(relpath), detail=True)
        except FileNotFoundError:
            return {}
        except Exception as exc:  # s3fs/botocore raise many types for one cause
            msg = f"cannot list {self.display(self.path(relpath))}: {_short(exc)}"
            raise StoreError(msg) from exc
        now = time.time()
        out = {}
        for path, info in found.items():
            stamp = info.get("mtime", info.get("LastModified"))
            seconds = stamp.timestamp() if hasattr(stamp, "timestamp") else float(stamp or now)
            out[path] = max(0.0, now - seconds)
        return out

    def _acquire_s3_lock(self, timeout: float) -> str:
        """Take the S3 lock object; return the token that proves ownership.

        The lock is created with a conditional PUT (``If-None-Match: *``), so of
        two writers exactly one succeeds; a stale lock is replaced with
        ``If-Match: <its ETag>``, so of two writers taking over the same stale
        lock exactly one succeeds. The owner then reads the lock back after a
        short pause, which still guards against S3-compatible services that
        ignore conditional headers.
        """
        token = uuid.uuid4().hex
        me = {"token": token, "host": socket.gethostname(), "pid": os.getpid(), "time": time.time()}
        data = orjson.dumps(me, option=orjson.OPT_INDENT_2 | orjson.OPT_SORT_KEYS)
        deadline = time.monotonic() + timeout
        held: dict[str, Any] | None = None
        while True:
            wrote = self._put_lock(data, mode="create")
            if not wrote:
                held, etag = self._read_lock()
                if held is None and time.monotonic() <= deadline:
                    continue  # released in the meantime: try again at once
                if held is not None and etag and _lock_is_stale(held):
                    wrote = self._put_lock(data, IfMatch=etag)
            if wrote:
                time.sleep(S3_LOCK_CONFIRM_SECONDS)
                held, _ = self._read_lock()
                if held is not None and held.get("token") == token:
                    return token
            if time.monotonic() > deadline:
                owner = (
                    f" (pid {held.get('pid')} on {held.get('host')})"
                    if isinstance(held, dict)
                    else ""
                )
                msg = (
                    f"store {self.url} is locked by another ingest{owner}; waited "
                    f"{timeout:g} s (use --lock-timeout to wait longer; a lock left by a "
                    f"crashed ingest on another host expires after "
                    f"{S3_LOCK_STALE_SECONDS // 3600} h, or delete "
                    f"{self.display(self.path(S3_LOCK_FILE))})"
                )
                raise StoreLockedError(msg)
            time.sleep(S3_LOCK_POLL_SECONDS)

    def _put_lock(self, data: bytes, **condition: Any) -> bool:
        """Write the lock object under ``condition``; ``False`` if the condition failed."""
        try:
            self.fs.pipe_file(self.path(S3_LOCK_FILE), data, **condition)
        except Exception as exc:  # s3fs/botocore raise many types for one cause
            code = _s3_error_code(exc)
            if isinstance(exc, FileExistsError) or code in _S3_LOST_RACE:
                return False
            if code == "NotImplemented":
                # A service without conditional writes: write, then rely on the read-back.
                self.write_json(S3_LOCK_FILE, orjson.loads(data))
                return True
            msg = f"cannot lock store {self.url}: {_short(exc)}"
            raise StoreError(msg) from exc
        return True

    def _read_lock(self) -> tuple[dict[str, Any] | None, str | None]:
        """The lock object and its ETag; ``(None, None)`` if there is none.

        A lock object that is not a JSON object cannot belong to a live writer
        (S3 writes objects whole) and reads as stale.
        """
        path = self.path(S3_LOCK_FILE)
        try:
            etag = self.fs.info(path, refresh=True).get("ETag")
            raw = self.fs.cat_file(path)
        except FileNotFoundError:
            return None, None
        except Exception as exc:  # s3fs/botocore raise many types for one cause
            msg = f"cannot read the lock of store {self.url}: {_short(exc)}"
            raise StoreError(msg) from exc
        try:
            held = orjson.loads(raw)
        except orjson.JSONDecodeError:
            held = None
        if not isinstance(held, dict):
            held = {"token": None, "host": None, "pid": None, "time": 0}
        return held, etag


def _s3_error_code(exc: BaseException) -> str | None:
    """The S3 error code behind an s3fs exception (``NoSuchKey``...), if there is one."""
    for err in (exc, exc.__cause__):
        response = getattr(err, "response", None)
        if isinstance(response, dict):
            code: str | None = response.get("Error", {}).get("Code")
            return code
    return None


def _dtype_of(column: str, protocol: Protocol) -> PolarsDataType:
    """Stored type of a column: the protocol's schema, the lineage columns', else text."""
    if column in SCHEMAS[protocol].dtypes:
        return SCHEMAS[protocol].dtypes[column]
    if column == SOURCE_LINE:
        return pl.Int64()
    return pl.String()


def _lock_is_stale(held: dict[str, Any]) -> bool:
    try:
        since = float(held.get("time") or 0)
    except (TypeError, ValueError):
        since = 0.0
    if time.time() - since > S3_LOCK_STALE_SECONDS:
        return True
    if held.get("host") == socket.gethostname():
        try:
            os.kill(int(held.get("pid", -1)), 0)
        except ProcessLookupError:
            return True
        except (PermissionError, ValueError, TypeError, OverflowError):
            return False
    return False


def _sid_of(path: str) -> str:
    base = path.rsplit("/", 1)[-1]
    return base[len("part-") : len("part-") + SOURCE_ID_LENGTH]


# Flat ``--storage-option`` keys and the type each must have. Values from the
# command line arrive as text: "false" is truthy, so booleans must be parsed.
_S3_BOOL_OPTIONS = frozenset(
    {
        "anon",
        "use_ssl",
        "requester_pays",
        "version_aware",
        "cache_regions",
        "fixed_upload_size",
        "local_expiry_check",
        "default_fill_cache",
        "use_listings_cache",
        "skip_instance_cache",
    }
)
_S3_INT_OPTIONS = frozenset({"default_block_size", "max_concurrency", "max_paths"})
_S3_FLOAT_OPTIONS = frozenset({"listings_expiry_time"})
_S3_TEXT_OPTIONS = frozenset(
    {"key", "secret", "token", "username", "password", "profile", "default_cache_type"}
)
_S3_TABLE_OPTIONS = frozenset({"client_kwargs", "config_kwargs", "s3_additional_kwargs"})
_S3_CLIENT_OPTIONS = {"endpoint_url": "endpoint_url", "region_name": "region_name", "region": "region_name"}
_S3_OPTIONS = (
    _S3_BOOL_OPTIONS
    | _S3_INT_OPTIONS
    | _S3_FLOAT_OPTIONS
    | _S3_TEXT_OPTIONS
    | _S3_TABLE_OPTIONS
    | frozenset(_S3_CLIENT_OPTIONS)
    | {"session"}
)
_TRUE = frozenset({"true", "1", "yes", "on"})
_FALSE = frozenset({"false", "0", "no", "off"})


def s3fs_options(options: dict[str, Any]) -> dict[str, Any]:
    """Map flat ``--storage-option`` keys onto s3fs arguments.

    ``endpoint_url`` and ``region`` go into s3fs's ``client_kwargs`` (merged with
    a ``client_kwargs`` table from the config file); text values of boolean and
    numeric options are parsed. An unknown key or a value of the wrong type is a
    :class:`ConfigError` that names the key, never the value (it may be a secret).
    """
    out: dict[str, Any] = {}
    client_kwargs: dict[str, Any] = {}
    for key, value in options.items():
        if key not in _S3_OPTIONS:
            msg = (
                f"unknown storage option {key!r}; known: endpoint_url, region, key, secret, "
                f"token, profile, anon, use_ssl and the other s3fs.S3FileSystem arguments"
            )
            raise ConfigError(msg)
        if key in _S3_CLIENT_OPTIONS:
            client_kwargs[_S3_CLIENT_OPTIONS[key]] = value
        elif key == "client_kwargs":
            if not isinstance(value, dict):
                msg = "storage option client_kwargs must be a table (set it in the --config file)"
                raise ConfigError(msg)
            client_kwargs = {**value, **client_kwargs}
        else:
            out[key] = _typed_option(key, value)
    if client_kwargs:
        out["client_kwargs"] = client_kwargs
    return out


# s3fs options that only tune listing, caching or writing: nothing to map for a reader.
_S3_WRITE_OR_CACHE_OPTIONS = frozenset(
    {
        "use_ssl",  # the endpoint's scheme says it
        "version_aware",
        "cache_regions",
        "fixed_upload_size",
        "local_expiry_check",
        "default_fill_cache",
        "use_listings_cache",
        "skip_instance_cache",
        "default_block_size",
        "max_concurrency",
        "max_paths",
        "listings_expiry_time",
        "default_cache_type",
    }
)
# Hosts whose endpoint polars finds by itself from the region (virtual-hosted requests).
_AWS_HOSTS = (".amazonaws.com", ".amazonaws.com.cn")


def polars_s3_options(
    options: dict[str, Any], *, endpoint_url: str | None = None, region: str | None = None
) -> dict[str, Any] | None:
    """``pl.scan_parquet`` arguments (``storage_options``, ``credential_provider``) for s3fs ``options``.

    ``options`` is what :func:`s3fs_options` returns. ``endpoint_url`` and
    ``region`` are what s3fs's client resolved, used where ``options`` name
    none (an endpoint on an AWS host is left to polars, which addresses buckets
    by region). Keys map onto polars' object-store keys: ``key``/``username``
    -> ``aws_access_key_id``, ``secret``/``password`` ->
    ``aws_secret_access_key``, ``token`` -> ``aws_session_token``, the endpoint
    -> ``aws_endpoint_url`` (with ``aws_allow_http`` for ``http://``), the region
    -> ``aws_region``, ``anon`` -> ``aws_skip_signature``, ``requester_pays`` ->
    ``aws_request_payer``. Without a key, credentials come from botocore's chain
    (``profile`` included), the one s3fs uses. Returns ``None`` when an option
    has no equivalent (``session``, ``config_kwargs``, ``s3_additional_kwargs``,
    other ``client_kwargs``).
    """
    options = dict(options)
    client = dict(options.pop("client_kwargs", {}))
    endpoint = client.pop("endpoint_url", None) or endpoint_url
    region = client.pop("region_name", None) or region
    if client or {"session", "config_kwargs", "s3_additional_kwargs"} & set(options):
        return None
    out: dict[str, str] = {}
    if endpoint and not _is_aws_host(endpoint):
        out["aws_endpoint_url"] = str(endpoint)
        if str(endpoint).lower().startswith("http://"):
            out["aws_allow_http"] = "true"
    if region:
        out["aws_region"] = str(region)
    key = options.pop("key", None) or options.pop("username", None)
    secret = options.pop("secret", None) or options.pop("password", None)
    token = options.pop("token", None)
    profile = options.pop("profile", None)
    anon = bool(options.pop("anon", False))
    if options.pop("requester_pays", False):
        out["aws_request_payer"] = "true"
    if set(options) - _S3_WRITE_OR_CACHE_OPTIONS:
        return None
    provider: Any = None
    if anon:
        out["aws_skip_signature"] = "true"
    elif key and secret:
        out["aws_access_key_id"] = str(key)
        out["aws_secret_access_key"] = str(secret)
        if token:
            out["aws_session_token"] = str(token)
    else:
        provider = _botocore_credentials(profile)
    return {"storage_options": out, "credential_provider": provider}


def _is_aws_host(endpoint: str) -> bool:
    from urllib.parse import urlsplit

    host = (urlsplit(str(endpoint)).hostname or "").lower()
    return host == "amazonaws.com" or host.endswith(_AWS_HOSTS)


@functools.cache
def _botocore_credentials(profile: str | None) -> _BotocoreCredentials:
    """The credential provider of a profile: one per profile, so polars reuses its clients."""
    return _BotocoreCredentials(profile)


@dataclass(frozen=True, slots=True)
class _BotocoreCredentials:
    """A polars credential provider over botocore's credential chain.

    botocore comes with s3fs (through aiobotocore) and looks where s3fs looks:
    the environment, the shared credentials and config files, SSO, container
    and instance metadata. A plain picklable object, so a Store holding it can
    still be pickled.
    """

    profile: str | None

    def __call__(self) -> tuple[dict[str, str], int | None]:
        import botocore.session

        credentials = botocore.session.Session(profile=self.profile).get_credentials()
        frozen = None if credentials is None else credentials.get_frozen_credentials()
        if frozen is None or frozen.access_key is None or frozen.secret_key is None:
            msg = "no AWS credentials found (environment, shared files or instance metadata)"
            raise StoreError(msg)
        out = {"aws_access_key_id": frozen.access_key, "aws_secret_access_key": frozen.secret_key}
        if frozen.token:
            out["aws_session_token"] = frozen.token
        expiry = getattr(credentials, "_expiry_time", None)
        return out, (int(expiry.timestamp()) if expiry is not None else None)


def _typed_option(key: str, value: Any) -> Any:
    if key in _S3_TABLE_OPTIONS and not isinstance(value, dict):
        msg = f"storage option {key} must be a table (set it in the --config file)"
        raise ConfigError(msg)
    if not isinstance(value, str):
        return value
    text = value.strip().lower()
    if key in _S3_BOOL_OPTIONS:
        if text in _TRUE:
            return True
        if text in _FALSE:
            return False
        msg = f"storage option {key} must be true or false"
        raise ConfigError(msg)
    try:
        if key in _S3_INT_OPTIONS:
            return int(text)
        if key in _S3_FLOAT_OPTIONS:
            return float(text)
    except ValueError:
        msg = f"storage option {key} must be a number"
        raise ConfigError(msg) from None
    return value


def _short(exc: BaseException) -> str:
    """One line of an exception, without anything that could carry a credential."""
    text = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
    return text[:200]
