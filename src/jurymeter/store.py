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

``<sid>`` is the first 16 hex digits of the source file's SHA-256. A file under
``data/`` or ``quarantine/`` is part of the store only if ``ingested/`` holds the
marker of its source: the marker is written last, in one atomic step, so a crash
at any moment leaves each source either wholly in the store or not at all, and
readers never see half a source. Files of uncommitted sources are garbage that
the next ingest removes under the lock.
"""

from __future__ import annotations

import contextlib
import os
import socket
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import orjson
import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq

from jurymeter.errors import StoreError, StoreLockedError
from jurymeter.naming import decode_item_set, encode_item_set
from jurymeter.schema import JUDGMENT_PROTOCOLS, PROTOCOLS, SCHEMAS, Protocol
from jurymeter.sources import filesystem_for

STORE_FORMAT = 1
MARKER_FILE = "jurymeter-store.json"
DEFAULT_STORE = "jurymeter-store"
SOURCE_ID_LENGTH = 16
# An S3 lock older than this is presumed abandoned by a crashed writer.
S3_LOCK_STALE_SECONDS = 6 * 3600


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

    def __post_init__(self) -> None:
        s3_options = s3fs_options(self.storage_options) if self.is_s3 else None
        self.fs, self.root = filesystem_for(self.url, s3_options)
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
        data = orjson.dumps(obj, option=orjson.OPT_INDENT_2 | orjson.OPT_SORT_KEYS)
        target = self.path(relpath)
        if self.is_s3:
            self.fs.pipe_file(target, data)
            return
        os.makedirs(os.path.dirname(target), exist_ok=True)
        tmp = f"{target}.tmp-{uuid.uuid4().hex}"
        with open(tmp, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, target)

    def read_json(self, relpath: str) -> Any:
        return orjson.loads(self.fs.cat_file(self.path(relpath)))

    def write_parquet(self, relpath: str, frame: pl.DataFrame) -> None:
        target = self.path(relpath)
        table = frame.to_arrow()
        if self.is_s3:
            with self.fs.open(target, "wb") as handle:
                pq.write_table(table, handle, compression="zstd")
            return
        os.makedirs(os.path.dirname(target), exist_ok=True)
        pq.write_table(table, target, compression="zstd")

    def read_parquet(self, path: str) -> pl.DataFrame:
        """One Parquet file of the store, whole (``path`` as returned by listings)."""
        with self.fs.open(path, "rb") as handle:
            frame = pl.from_arrow(pq.read_table(handle))
        assert isinstance(frame, pl.DataFrame)
        return frame

    def remove(self, paths: list[str]) -> None:
        if paths:
            self.fs.rm(paths)

    # ------------------------------------------------------------ layout
    @staticmethod
    def partition_dir(protocol: Protocol, item_set: str | None) -> str:
        if protocol in JUDGMENT_PROTOCOLS:
            if item_set is None:
                msg = f"{protocol} data needs an item set"
                raise ValueError(msg)
            return f"data/protocol={protocol}/item_set={encode_item_set(item_set)}"
        return f"data/protocol={protocol}"

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
            return self.read_json(f"ingested/{sha256}.json")
        except FileNotFoundError:
            return None

    def markers(self) -> list[dict[str, Any]]:
        return [m for sha in self.committed().values() if (m := self.marker(sha)) is not None]

    def _list(self, relpath: str) -> list[str]:
        try:
            return list(self.fs.find(self.path(relpath)))
        except FileNotFoundError:
            return []

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
            proto, found_set = _partition_of(path)
            out.append(DataFile(protocol=proto, item_set=found_set, path=path, source_id=sid))
        return out

    def quarantine_files(self) -> list[str]:
        return [p for p, _ in self._files("quarantine", committed_only=True)]

    def remove_uncommitted(self) -> list[str]:
        """Delete parts of sources whose marker was never written (a crashed ingest).

        Call only under :meth:`lock`.
        """
        stale = [p for p, _ in self._files("data", committed_only=False)]
        stale += [p for p, _ in self._files("quarantine", committed_only=False)]
        keep = set(self.committed())
        doomed = [p for p in stale if _sid_of(p) not in keep]
        doomed += [p for p in self._list("ingested") if ".tmp-" in p]
        self.remove(doomed)
        return doomed

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
            lazy = self._scan_files(paths, [c for c in wanted if c != "item_set"])
            if protocol in JUDGMENT_PROTOCOLS:
                lazy = lazy.with_columns(pl.lit(found_set, dtype=pl.String).alias("item_set"))
            frames.append(lazy.select(wanted))
        if not frames:
            return pl.LazyFrame(
                {c: pl.Series(c, [], dtype=schema.dtypes.get(c, pl.String)) for c in wanted}
            )
        return pl.concat(frames, how="vertical_relaxed")

    def _scan_files(self, paths: list[str], columns: list[str]) -> pl.LazyFrame:
        """Scan parts whose sets of extra columns may differ; absent columns read as null."""
        if self.is_s3:
            tables = []
            for path in paths:
                with self.fs.open(path, "rb") as handle:
                    tables.append(_select_arrow(pq.read_table(handle), columns))
            frame = pl.from_arrow(pa.concat_tables(tables, promote_options="default"))
            assert isinstance(frame, pl.DataFrame)
            return frame.lazy()
        return pl.scan_parquet(paths, missing_columns="insert", extra_columns="ignore").select(
            columns
        )

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
                held = self.read_json("_lock.json")
                if held.get("token") == token:
                    self.fs.rm(self.path("_lock.json"))

    def _acquire_s3_lock(self, timeout: float) -> str:
        token = uuid.uuid4().hex
        me = {"token": token, "host": socket.gethostname(), "pid": os.getpid(), "time": time.time()}
        deadline = time.monotonic() + timeout
        while True:
            try:
                held = self.read_json("_lock.json")
            except FileNotFoundError:
                held = None
            if held is None or _lock_is_stale(held):
                self.write_json("_lock.json", me)
                time.sleep(0.2)
                confirmed = self.read_json("_lock.json")
                if confirmed.get("token") == token:
                    return token
            if time.monotonic() > deadline:
                msg = (
                    f"store {self.url} is locked by another ingest (pid {held and held.get('pid')} "
                    f"on {held and held.get('host')}); waited {timeout:.0f} s"
                )
                raise StoreLockedError(msg)
            time.sleep(0.5)


def _lock_is_stale(held: dict[str, Any]) -> bool:
    if time.time() - float(held.get("time", 0)) > S3_LOCK_STALE_SECONDS:
        return True
    if held.get("host") == socket.gethostname():
        try:
            os.kill(int(held.get("pid", -1)), 0)
        except ProcessLookupError:
            return True
        except (PermissionError, ValueError):
            return False
    return False


def _select_arrow(table: pa.Table, columns: list[str]) -> pa.Table:
    arrays = []
    for name in columns:
        if name in table.column_names:
            arrays.append(table.column(name))
        else:
            arrays.append(pa.nulls(table.num_rows, pa.string()))
    return pa.table(dict(zip(columns, arrays, strict=True)))


def _sid_of(path: str) -> str:
    base = path.rsplit("/", 1)[-1]
    return base[len("part-") : len("part-") + SOURCE_ID_LENGTH]


def _partition_of(path: str) -> tuple[Protocol, str | None]:
    protocol: str | None = None
    item_set: str | None = None
    for segment in path.split("/"):
        if segment.startswith("protocol="):
            protocol = segment[len("protocol=") :]
        elif segment.startswith("item_set="):
            item_set = decode_item_set(segment[len("item_set=") :])
    if protocol not in PROTOCOLS:
        msg = f"unexpected file in store: {path}"
        raise StoreError(msg)
    return protocol, item_set  # type: ignore[return-value]


def s3fs_options(options: dict[str, Any]) -> dict[str, Any]:
    """Map flat ``--storage-option`` keys onto s3fs arguments."""
    out: dict[str, Any] = {}
    client_kwargs: dict[str, Any] = {}
    for key, value in options.items():
        if key in ("endpoint_url", "region_name"):
            client_kwargs[key] = value
        elif key == "region":
            client_kwargs["region_name"] = value
        elif key in ("key", "secret", "token", "anon", "profile", "use_ssl"):
            out[key] = value
        else:
            out[key] = value
    if client_kwargs:
        out["client_kwargs"] = client_kwargs
    return out


def _short(exc: BaseException) -> str:
    """One line of an exception, without anything that could carry a credential."""
    text = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
    return text[:200]
