"""The judgment store: Hive-partitioned Parquet on a local folder or S3, with commit markers.

Layout under the store root (a folder or ``s3://bucket/prefix``)::

    jurymeter-store.json                       store format marker
    data/protocol=pointwise/item_set=<enc>/part-<sid>-<seq>.parquet
    data/protocol=pairwise/item_set=<enc>/part-<sid>-<seq>.parquet
    data/protocol=systems/part-<sid>-<seq>.parquet     (metadata tables)
    data/protocol=judges/part-<sid>-<seq>.parquet
    quarantine/part-<sid>-<seq>.parquet        rejected records with reasons
    cells/protocol=pointwise/item_set=<enc>/part-<sid>-cells.parquet, merged.json, merged-<token>.npz
                                               cell statistics (io/cell_stats.py)
    ingested/b3-<blake3>.json                  commit marker of one source file
    ingested/<sha256>.json                     (a marker written before BLAKE3 content keys)
    runs/<run_id>.json                         per-run reconciliation manifest
    _lock                                      write lock (local stores)
    _lock.json                                 write lock (S3 stores)
    _staging/<sid>-<uuid>/...                  the streaming path's output before it is
                                               proven (local stores; never read)

``<sid>`` is the first 16 hex digits of the source file's content key (BLAKE3;
SHA-256 for sources committed before it: :func:`source_id`). A file under
``data/`` or ``quarantine/`` is part of the store only if ``ingested/`` holds the
marker of its source: the marker is written last, in one atomic step, so a crash
at any moment leaves each source either wholly in the store or not at all, and
readers never see half a source. Files of uncommitted sources are garbage that
the next ingest removes under the lock.
"""

from __future__ import annotations

import os
import shutil
import uuid
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import orjson
import polars as pl

from jurymeter.errors import StoreError
from jurymeter.io.naming import decode_item_set, is_digested, item_set_folder
from jurymeter.io.schema import JUDGMENT_PROTOCOLS, PROTOCOLS, SCHEMAS, SOURCE_LINE, Protocol
from jurymeter.io.source_files import short_message
from jurymeter.io.store_locks import StoreLocks
from jurymeter.io.store_options import polars_s3_options, s3fs_options

if TYPE_CHECKING:
    from polars._typing import PolarsDataType

STORE_FORMAT = 1
MARKER_FILE = "jurymeter-store.json"
DEFAULT_STORE = "jurymeter-store"
SOURCE_ID_LENGTH = 16
STAGING = "_staging"
# Per-source cell statistics of pointwise item sets (``io/cell_stats.py``), named by source id as parts are.
CELLS_ROOT = "cells"
# Per-source key values that let the duplicate pass skip sources (``io.key_values``).
KEYS_ROOT = "keys"
# In a partition folder whose name is digested (a long item-set name): the full name.
ITEM_SET_FILE = "_item_set.json"
# In a partition folder: written when an ingest stores a second rating of one (system,
# item, judge, generation, replicate) cell, told apart by run, batch or position
# (io.schema.RATING_KEY). The fits renumber such ratings as replicates only where it
# is (pipeline.fit.rated_replicates). Written before the source's marker, so a crash
# can leave it behind with no such rating stored: it then costs the fits one check.
# Stores written before the key held those columns could not hold such ratings.
RATED_CELLS_FILE = "_rated_cells.json"
# A content key is its marker's name: "b3-" and the 64 hex digits of the file's BLAKE3,
# or (sources committed before BLAKE3) the 64 hex digits of its SHA-256 alone. The
# prefix keeps the two apart: no SHA-256 marker's name starts with "b3-".
BLAKE3_PREFIX = "b3-"
_HEX = frozenset("0123456789abcdef")


def is_content_key(name: str) -> bool:
    """Whether ``name`` is a content key (a marker's name without ``.json``): ``b3-<64 hex>`` or ``<64 hex>``."""
    digits = name.removeprefix(BLAKE3_PREFIX)
    return len(digits) == 64 and set(digits) <= _HEX


def marker_key(marker: dict[str, Any]) -> str:
    """The content key a commit marker was written under: its ``content_key``, or an old marker's ``sha256``."""
    return str(marker.get("content_key") or marker.get("sha256", ""))


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


class Store(StoreLocks):
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

    __slots__ = ()

    def exists(self) -> bool:
        try:
            return bool(self.fs.exists(self.path(MARKER_FILE)))
        except Exception as exc:  # s3fs/botocore raise many types for one cause
            msg = f"cannot read store {self.url}: {short_message(exc)}"
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
            msg = f"cannot create store {self.url}: {short_message(exc)}"
            raise StoreError(msg) from exc

    def check(self) -> None:
        """Raise :class:`StoreError` unless this is a readable store of a known format."""
        try:
            marker = orjson.loads(self.fs.cat_file(self.path(MARKER_FILE)))
        except FileNotFoundError as exc:
            msg = f"no jurymeter store at {self.url} (run `jurymeter ingest` to create one)"
            raise StoreError(msg) from exc
        except Exception as exc:
            msg = f"cannot read store {self.url}: {short_message(exc)}"
            raise StoreError(msg) from exc
        if not isinstance(marker, dict) or marker.get("format") != STORE_FORMAT:
            msg = f"store {self.url} has an unknown format: {MARKER_FILE} is not format {STORE_FORMAT}"
            raise StoreError(msg)


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
    def source_id(key: str) -> str:
        """A source's id: the first 16 hex digits of its content key (either algorithm's)."""
        return key.removeprefix(BLAKE3_PREFIX)[:SOURCE_ID_LENGTH]

    def committed(self) -> dict[str, str]:
        """Source id -> content key (its marker's name) of every committed source."""
        names = self._list("ingested")
        out = {}
        for name in names:
            base = name.rsplit("/", 1)[-1]
            if base.endswith(".json") and is_content_key(base[:-5]):
                key = base[:-5]
                out[self.source_id(key)] = key
        return out

    def marker(self, key: str) -> dict[str, Any] | None:
        """The commit marker of the source of content key ``key``, or ``None`` if it was never committed."""
        try:
            marker: dict[str, Any] = self.read_json(f"ingested/{key}.json")
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
            msg = f"cannot list {self.display(self.path(relpath))}: {short_message(exc)}"
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

    def source_files(self, relpath: str) -> list[tuple[str, str]]:
        """(path, source id) of the Parquet files under ``relpath`` (``part-<sid>...``), committed or not.

        The caller keeps the sources it knows are committed: it saves a listing of
        every marker (on S3, a LIST of ``ingested/``) that it has made already.
        """
        return self._files(relpath, committed_only=False)

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
        stale += [p for p, _ in self._files(CELLS_ROOT, committed_only=False)]
        stale += [p for p, _ in self._files(KEYS_ROOT, committed_only=False)]
        keep = set(self.committed())
        doomed = [p for p in stale if _sid_of(p) not in keep]
        doomed += [p for p in self._list("ingested") + self._list("runs") + self._list(CELLS_ROOT)
                   + self._list(KEYS_ROOT) if ".tmp-" in p]
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

    def remove_parts_of(self, sid: str) -> list[str]:
        """Delete the parts of the uncommitted source ``sid`` (its read failed): the store as before it.

        Unlike :meth:`remove_uncommitted`, the parts other sources are staging
        meanwhile (a mapped ingest's workers) stay. Call only under :meth:`lock`.
        """
        if sid in self.committed():
            msg = f"source {sid} of {self.url} is committed: its parts are the store's"
            raise ValueError(msg)
        doomed = [p for p, found in self._files("data", committed_only=False) + self._files(
            "quarantine", committed_only=False) if found == sid]
        self.remove(doomed)
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
                msg = f"cannot read {self.display(paths[0])} with polars' S3 reader: {short_message(exc)}"
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



def _dtype_of(column: str, protocol: Protocol) -> PolarsDataType:
    """Stored type of a column: the protocol's schema, the lineage columns', else text."""
    if column in SCHEMAS[protocol].dtypes:
        return SCHEMAS[protocol].dtypes[column]
    if column == SOURCE_LINE:
        return pl.Int64()
    return pl.String()



def _sid_of(path: str) -> str:
    base = path.rsplit("/", 1)[-1]
    return base[len("part-") : len("part-") + SOURCE_ID_LENGTH]


