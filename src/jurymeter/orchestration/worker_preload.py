"""Imported by each LocalCluster worker as it starts (Dask's ``preload``; see ``jurymeter.orchestration.runtime``).

The modules a fit needs (scipy, matplotlib: 2.7-2.9 s) are imported while the
Prefect server starts, instead of delaying each worker's first fit.
"""

from __future__ import annotations

import logging
from typing import Any

from distributed.core import Status

from jurymeter.pipeline.fit import import_fit_modules

import_fit_modules()

HEARTBEAT_FAILURE = "Failed to communicate with scheduler during heartbeat"


class ClosingWorkerHeartbeatFilter(logging.Filter):
    """Drop the heartbeat failure a worker logs while it is closing itself.

    A worker that closes stops its heartbeat callback but not a heartbeat
    already in flight, then closes its own connection pool under it; that
    heartbeat fails with ``CommClosedError`` and is logged at ERROR with a
    traceback (dask/distributed#7891). On a busy machine the run's cluster
    retirement hit it (CI, 2026-11-30): a clean run printed a traceback. The
    same message from a running worker is a real failure and is kept.
    """

    def __init__(self, worker: Any) -> None:
        super().__init__()
        self._worker = worker

    def filter(self, record: logging.LogRecord) -> bool:
        closing = self._worker.status in (Status.closing, Status.closed)
        return not (closing and str(record.msg).startswith(HEARTBEAT_FAILURE))


def dask_setup(worker: Any) -> None:
    """Dask's preload hook, called with the worker once it is created."""
    logging.getLogger("distributed.worker").addFilter(ClosingWorkerHeartbeatFilter(worker))
