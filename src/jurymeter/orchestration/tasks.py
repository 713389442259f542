"""What the flow hands its Dask workers besides the fits: plain functions, importable without Prefect.

A worker unpickles a function by importing its module, so nothing here imports
Prefect (the workers never do: ``tests/test_nightly.py``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any


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
