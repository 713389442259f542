"""Prefect with no server to set up: one temporary API server per run, state in a known folder.

With ``PREFECT_API_URL`` set (a long-lived server, Prefect Cloud), nothing is
started. Otherwise one ``SubprocessASGIServer`` starts for the run, its URL goes
into this process's settings and environment, and it is stopped after logs and
events are flushed (stopping first costs about 75 s of retries at exit).
Only this process talks to Prefect: the Dask workers run plain functions, so
they never start servers of their own.

Prefect's home (database, logs) is ``<home>/prefect`` (``home`` from the run
configuration, ``.jurymeter`` by default), never the user's home directory,
unless ``PREFECT_HOME`` says otherwise.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from pathlib import Path

# Quiet by default; any of these can be set by the user to override.
QUIET = {
    "PREFECT_LOGGING_LEVEL": "WARNING",
    "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
    "PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS": "120",
    "PREFECT_SERVER_LOGGING_LEVEL": "WARNING",
    "DASK_LOGGING__DISTRIBUTED": "warning",
}


def configure_environment(home: str) -> Path:
    """Point Prefect at ``<home>/prefect`` and quiet it; call before importing prefect."""
    prefect_home = Path(os.environ.get("PREFECT_HOME") or Path(home) / "prefect").resolve()
    prefect_home.mkdir(parents=True, exist_ok=True)
    os.environ["PREFECT_HOME"] = str(prefect_home)
    for name, value in QUIET.items():
        os.environ.setdefault(name, value)
    return prefect_home


@contextlib.contextmanager
def prefect_api(home: str) -> Iterator[str]:
    """Yield the API URL to use: the configured one, or a temporary server's."""
    configure_environment(home)
    if os.environ.get("PREFECT_API_URL"):
        yield os.environ["PREFECT_API_URL"]
        return
    from prefect.events.worker import EventsWorker
    from prefect.logging.handlers import APILogWorker
    from prefect.server.api.server import SubprocessASGIServer
    from prefect.settings import PREFECT_API_URL, temporary_settings

    server = SubprocessASGIServer()
    server.start(timeout=int(os.environ["PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS"]))
    os.environ["PREFECT_API_URL"] = server.api_url
    try:
        with temporary_settings(updates={PREFECT_API_URL: server.api_url}):
            try:
                yield server.api_url
            finally:
                with contextlib.suppress(RuntimeError):  # no log worker was started
                    APILogWorker.instance().drain()
                EventsWorker.drain_all()
    finally:
        server.stop()
        os.environ.pop("PREFECT_API_URL", None)


# Dask's nannies set MALLOC_TRIM_THRESHOLD_=65536 in their workers, which also
# turns off glibc's adaptive mmap threshold: every numpy temporary above 128 KiB
# is then a fresh mmap with its page faults, and one fit ran 8.8-10.1 s in a
# worker against 5.2-5.8 s in the client, and 5.2-5.4 s with this setting
# (bench/worker_malloc.py; bench/RESULTS.md, "Worker malloc settings").
# A fixed 64 MiB mmap threshold keeps the fits' temporaries on the heap; larger
# arrays still go back to the system when freed.
WORKER_MALLOC = {"MALLOC_MMAP_THRESHOLD_": 64 * 2**20, "MALLOC_TRIM_THRESHOLD_": 128 * 2**20}


@contextlib.contextmanager
def _worker_environ(values: dict[str, int]) -> Iterator[None]:
    """Set variables for the workers a nanny spawns meanwhile; restore them after.

    Through ``os.environ``, not Dask's config: a nanny takes a variable already
    in the environment over its config, and an earlier nanny in this process
    may have left ``MALLOC_TRIM_THRESHOLD_=65536`` there. This process's own
    allocator read its settings at start-up and is not affected.
    """
    saved = {k: os.environ.get(k) for k in values}
    os.environ.update({k: str(v) for k, v in values.items()})
    try:
        yield
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


@contextlib.contextmanager
def run_cluster(address: str | None, workers: int, threads_per_worker: int) -> Iterator[str]:
    """Yield a scheduler address: ``address`` itself, or a LocalCluster's, started for the run.

    Starting the cluster here, in a thread beside the Prefect server's start
    (both take seconds), overlaps the two; the flow then connects by address.
    """
    if address:
        yield address
        return
    from distributed import LocalCluster

    with (
        _worker_environ(WORKER_MALLOC),
        LocalCluster(
            n_workers=workers,
            threads_per_worker=threads_per_worker,
            processes=True,
            dashboard_address=":0",  # any free port: no warning when 8787 is taken
        ) as cluster,
    ):
        yield cluster.scheduler_address


@contextlib.contextmanager
def run_environment(home: str, address: str | None, workers: int, threads_per_worker: int) -> Iterator[str]:
    """Prefect API and Dask scheduler for one run, started side by side; yields the scheduler address."""
    import threading

    ready: list[str | BaseException] = []
    stack = contextlib.ExitStack()

    def start_cluster() -> None:
        try:
            ready.append(stack.enter_context(run_cluster(address, workers, threads_per_worker)))
        except BaseException as exc:  # handed to the caller
            ready.append(exc)

    starter = threading.Thread(target=start_cluster, name="jurymeter-cluster", daemon=True)
    with stack:
        starter.start()
        with prefect_api(home):
            starter.join()
            if isinstance(ready[0], BaseException):
                raise ready[0]
            yield ready[0]
