"""Items of an iterator produced ahead in a background thread (:class:`Prefetch`): reading beside validating."""

from __future__ import annotations

import contextlib
import queue
import threading
from collections.abc import Iterator
from typing import Any, TypeVar, cast

T = TypeVar("T")


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

