"""The store's files: one file system (local or S3) under a root, atomic writes, reads, removal, listings.

The base of :class:`jurymeter.io.store.Store`: every operation's failure is one
:class:`~jurymeter.errors.StoreError` line naming the path and the operation
(a write cut by a full disk removed). The layout and the commit protocol are
:mod:`jurymeter.io.store`'s; the locks :mod:`jurymeter.io.store_locks`'.
"""


from __future__ import annotations

import contextlib
import io
import os
import shutil
import time
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import orjson
import polars as pl

from jurymeter.errors import StoreError
from jurymeter.io.source_files import filesystem_for, short_message

if TYPE_CHECKING:
    pass

from jurymeter.io.store_options import s3fs_options


@dataclass(slots=True)
class StoreFiles:
    """The files of a store at ``url`` (local folder or ``s3://bucket/prefix``): see :class:`jurymeter.io.store.Store`."""

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
                msg = f"cannot open store {self.url}: {short_message(exc)}"
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

    # ------------------------------------------------------------ writing
    def write_json(self, relpath: str, obj: Any) -> None:
        """Write JSON in one atomic step (rename locally, one PUT on S3)."""
        self.write_bytes(relpath, orjson.dumps(obj, option=orjson.OPT_INDENT_2 | orjson.OPT_SORT_KEYS))

    def write_bytes(self, relpath: str, data: bytes | memoryview) -> None:
        """Write a file in one atomic step (rename locally, one PUT on S3).

        ``data`` may be a view of a buffer (``io.BytesIO.getbuffer``): written without a copy on a local disk.
        """
        target = self.path(relpath)
        if self.is_s3:
            try:
                self.fs.pipe_file(target, bytes(data) if isinstance(data, memoryview) else data)
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

    def write_files(self, files: Mapping[str, bytes]) -> None:
        """Write many files, each in one atomic step; on S3 the PUTs run concurrently.

        One ``pipe`` of them all (s3fs batches the requests): a report's 3,400
        pages took one 30 ms PUT after another. No order among them holds, so
        a caller that needs one file last writes it after.
        """
        if not self.is_s3:
            for relpath, data in files.items():
                self.write_bytes(relpath, data)
            return
        targets = {self.path(relpath): data for relpath, data in files.items()}
        try:
            self.fs.pipe(targets)
        except Exception as exc:  # s3fs/botocore raise many types for one cause
            raise self._write_error(next(iter(targets), self.root), exc) from exc

    def _write_error(self, target: str, exc: BaseException) -> StoreError:
        """One line naming the store, the operation and the cause (``[Errno 28] No space left on device``)."""
        return StoreError(f"cannot write {self.display(target)}: {short_message(exc)}")

    def read_json(self, relpath: str) -> Any:
        """A JSON file of the store; ``FileNotFoundError`` if it is not there, :class:`StoreError` if it cannot be read."""
        target = self.path(relpath)
        try:
            data = self.fs.cat_file(target)
        except FileNotFoundError:
            raise
        except Exception as exc:  # s3fs/botocore raise many types for one cause
            msg = f"cannot read {self.display(target)}: {short_message(exc)}"
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

    def write_parquet_atomic(self, relpath: str, frame: pl.DataFrame) -> None:
        """Parquet in one atomic step (:meth:`write_bytes`): a reader never sees half a file.

        For the files that sit beside committed data (cell statistics, key
        values), which a later ingest may write for a source committed long ago.
        """
        sink = io.BytesIO()
        frame.write_parquet(sink, compression="zstd")
        self.write_bytes(relpath, sink.getvalue())

    def read_parquet(self, path: str, columns: list[str] | None = None) -> pl.DataFrame:
        """One Parquet file of the store (``path`` as returned by listings): whole, or only ``columns``."""
        import pyarrow.parquet as pq  # here, not at the top: a command that reads no file whole skips its import

        try:
            with self.fs.open(path, "rb") as handle:
                frame = pl.from_arrow(pq.ParquetFile(handle).read(columns=columns))
        except FileNotFoundError:
            raise
        except Exception as exc:  # s3fs/botocore/pyarrow raise many types for one cause
            msg = f"cannot read {self.display(path)}: {short_message(exc)}"
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
            msg = f"cannot remove {self.display(paths[0])}: {short_message(exc)}"
            raise StoreError(msg) from exc


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
            msg = f"cannot list {self.display(target)}: {short_message(exc)}"
            raise StoreError(msg) from exc

    def files(self, relpath: str) -> list[str]:
        """Full paths of the files right under ``relpath``, not those in its folders (none: ``[]``)."""
        target = self.path(relpath)
        try:
            return sorted(str(e["name"]) for e in self.fs.ls(target, detail=True) if e.get("type") == "file")
        except FileNotFoundError:
            return []
        except Exception as exc:  # s3fs/botocore raise many types for one cause
            msg = f"cannot list {self.display(target)}: {short_message(exc)}"
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
            msg = f"cannot list {self.display(self.path(relpath))}: {short_message(exc)}"
            raise StoreError(msg) from exc
        now = time.time()
        out = {}
        for path, info in found.items():
            stamp = info.get("mtime", info.get("LastModified"))
            seconds = stamp.timestamp() if hasattr(stamp, "timestamp") else float(stamp or now)
            out[path] = max(0.0, now - seconds)
        return out
