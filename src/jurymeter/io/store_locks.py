"""The store's locks: the write lock (an OS file lock locally, a conditional-PUT lock object on S3) and the run lock."""


from __future__ import annotations

import contextlib
import os
import socket
import time
import uuid
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import orjson

from jurymeter.errors import StoreError, StoreLockedError
from jurymeter.io.source_files import short_message

if TYPE_CHECKING:
    pass

from jurymeter.io.store_files import StoreFiles

# An S3 lock older than this is presumed abandoned by a crashed writer.
S3_LOCK_STALE_SECONDS = 6 * 3600
S3_LOCK_FILE = "_lock.json"
RUN_LOCK_FILE = "_run_lock"  # held by a nightly run (Store.run_lock)
# Pause before an S3 lock owner reads its lock back, and between attempts.
S3_LOCK_CONFIRM_SECONDS = 0.2
S3_LOCK_POLL_SECONDS = 0.5
# S3 error codes of a conditional write that lost to another writer.
_S3_LOST_RACE = frozenset({"PreconditionFailed", "ConditionalRequestConflict", "NoSuchKey"})


class StoreLocks(StoreFiles):
    """A store's write lock and run lock (the layout: :class:`jurymeter.io.store.Store`)."""

    __slots__ = ()

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
            msg = f"cannot lock store {self.url}: {short_message(exc)}"
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
            msg = f"cannot read the lock of store {self.url}: {short_message(exc)}"
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


