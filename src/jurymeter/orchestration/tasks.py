"""What the flow hands its Dask workers besides the fits: plain functions, importable without Prefect.

The fits' ``mapper`` (:func:`cluster_map`) and the landing ingest's stage steps (:func:`cluster_stage_map`).

A worker unpickles a function by importing its module, so nothing here imports
Prefect (the workers never do: ``tests/test_nightly.py``).
"""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import Callable, Generator, Iterable
from typing import Any

from jurymeter.io.ingest import NotMapped, StagedSource, StageMap, StageTask


def cluster_map(function: Callable[[Any], Any], tasks: Iterable[Any]) -> list[Any]:
    """A fit's independent tasks (bootstrap refits) on the cluster, results in order: the fits' ``mapper``.

    Called inside a fit that runs on a Dask worker, ``worker_client`` secedes
    the fit's thread while the tasks run on every worker of the cluster (this
    one included); outside a worker (a test calling it directly), the builtin
    ``map``.
    """
    from distributed import get_worker, worker_client

    try:
        get_worker()
    except ValueError:
        return list(map(function, tasks))
    with worker_client() as client:
        futures = client.map(function, list(tasks), pure=False)
        results: list[Any] = client.gather(futures)
    return results


def cluster_stage_map(scheduler: Callable[[], str]) -> StageMap:
    """The landing ingest's stage steps (:func:`jurymeter.io.ingest.stage_task`) on the cluster's workers.

    ``scheduler`` gives the scheduler's address; it is called only when the
    ingest has steps to map (a LocalCluster still starting is waited for
    then). Results come in the tasks' order, each once it and those before it
    are done, so the ingest commits the first while the workers stage the
    rest. A task that raised (a lost worker, a store error) gives its
    exception; a cluster that cannot be reached gives :class:`NotMapped` for
    every task, and the ingest stages them itself. Closing the stream early
    (a strict ingest stopped) waits for every task to end, so nothing of the
    ingest still writes once its lock is released. No Dask retries: a retried
    step could race a lost attempt's writes; the ingest restages it instead.
    """

    def stage_map(function: Callable[[StageTask], StagedSource], tasks: list[StageTask]) -> Generator[Any, None, None]:
        if not tasks:
            return
        import distributed

        untyped: Any = distributed  # distributed leaves Client unannotated
        try:
            client = untyped.Client(scheduler(), set_as_default=False)
        except Exception as exc:  # no cluster: every step here, serially
            unmapped = NotMapped(f"no Dask cluster for the ingest: {exc}")
            yield from (unmapped for _ in tasks)
            return
        with client:
            futures = client.map(function, tasks, pure=False, retries=0, key=[f"stage-{uuid.uuid4().hex}"
                                                                               for _ in tasks])
            try:
                for future in futures:
                    try:
                        yield future.result()
                    except Exception as exc:  # handed to the ingest, which decides
                        yield exc
            finally:  # each to its end, results and errors alike (a stopped ingest's steps still running)
                for future in futures:
                    with contextlib.suppress(Exception):
                        future.result()

    return stage_map
