"""Prefect with no server to set up: one temporary API server per run, state in a known folder.

With ``PREFECT_API_URL`` set (a long-lived server, Prefect Cloud), nothing is
started. Otherwise one temporary server starts for the run (the uvicorn command
Prefect's ``SubprocessASGIServer`` runs, launched first and awaited last so
that its start-up overlaps this process's imports and the Dask cluster's), its
URL goes into this process's settings and environment, and it is stopped after
logs and events are flushed (stopping first costs about 75 s of retries at exit).
Only this process talks to Prefect: the Dask workers run plain functions, so
they never start servers of their own.

Prefect's home (database, logs) is ``<home>/prefect`` (``home`` from the run
configuration, ``.jurymeter`` by default), never the user's home directory,
unless ``PREFECT_HOME`` says otherwise.
"""

from __future__ import annotations

import contextlib
import importlib
import importlib.util
import os
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from jurymeter.errors import OrchestrationError

if TYPE_CHECKING:
    import distributed

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


# What Prefect's own ``SubprocessASGIServer`` sets for its temporary server.
SERVER_ENV = {"PREFECT_UI_ENABLED": "0", "PREFECT__SERVER_EPHEMERAL": "1", "PREFECT__SERVER_FINAL": "1"}
PORT_IN_USE = 3  # uvicorn's exit status when its port is taken


# The server's command runs through this: on Linux it asks the kernel to send it
# SIGTERM when its parent dies (prctl PR_SET_PDEATHSIG, kept across exec), so a
# run killed with SIGKILL, which can tell no child, still ends its server. The
# "parent" is the thread that started it: TemporaryServer starts it from the thread
# that runs the run (the main thread). If the parent is gone before the request
# took effect, it exits at once. Elsewhere it just runs the command.
_DIES_WITH_PARENT = """\
import ctypes, os, signal, sys
try:
    ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
except (AttributeError, OSError):
    pass
if os.getppid() != int(sys.argv[1]):
    sys.exit(0)
os.execv(sys.argv[2], sys.argv[2:])
"""


def dies_with_parent(command: list[str]) -> list[str]:
    """``command`` run so that it ends when this process ends, SIGKILL included (Linux)."""
    return [sys.executable, "-c", _DIES_WITH_PARENT, str(os.getpid()), *command]


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class TemporaryServer:
    """Prefect's temporary API server, as ``SubprocessASGIServer`` runs it, launched without waiting.

    Prefect's class imports the whole server application into the calling
    process (5-6 s) and blocks until the server answers (8 s with an existing
    database, 17-21 s with a new one). Launching the same uvicorn command
    first and waiting for it last lets this process import the flow and start
    the Dask cluster meanwhile, on the other core. The server's output goes to
    ``<PREFECT_HOME>/server.log``.
    """

    def __init__(self, prefect_home: Path) -> None:
        self.log_path = prefect_home / "server.log"
        self.process: subprocess.Popen[bytes] | None = None
        self.port = 0

    @property
    def api_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/api"

    def launch(self) -> TemporaryServer:
        spec = importlib.util.find_spec("prefect")  # locates the package without importing it
        if spec is None or not spec.submodule_search_locations:
            msg = "prefect is not installed"
            raise OrchestrationError(msg)
        app_dir = str(Path(next(iter(spec.submodule_search_locations))).parent)
        self.port = _free_port()
        with open(self.log_path, "ab") as log:
            self.process = subprocess.Popen(
                dies_with_parent([
                    sys.executable, "-m", "uvicorn", "--app-dir", app_dir, "--factory",
                    "prefect.server.api.server:create_app", "--host", "127.0.0.1",
                    "--port", str(self.port), "--log-level", "error", "--lifespan", "on",
                ]),
                env={**os.environ, **SERVER_ENV},
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
            )
        return self

    def wait(self, timeout: float) -> str:
        """Block until the API answers; return its URL. Relaunch once if the port was taken."""
        import httpx

        deadline = time.monotonic() + timeout
        relaunched = False
        with httpx.Client(timeout=2.0) as client:
            while time.monotonic() < deadline:
                assert self.process is not None
                status = self.process.poll()
                if status == PORT_IN_USE and not relaunched:
                    relaunched = True
                    self.launch()
                    continue
                if status is not None:
                    msg = f"Prefect's temporary server exited with status {status}; see {self.log_path}"
                    raise OrchestrationError(msg)
                with contextlib.suppress(httpx.TransportError):
                    if client.get(f"{self.api_url}/health").status_code == 200:
                        return self.api_url
                time.sleep(0.1)
        self.stop()
        msg = f"Prefect's temporary server did not answer within {timeout:.0f} s; see {self.log_path}"
        raise OrchestrationError(msg)

    def stop(self) -> None:
        if self.process is None:
            return
        self.process.terminate()
        try:
            self.process.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        self.process = None


@contextlib.contextmanager
def _flow_api(url: str) -> Iterator[str]:
    """Point this process's Prefect at ``url``; flush logs and events before leaving.

    The flush must come before the server stops (stopping first costs about
    75 s of retries at exit).
    """
    from prefect.events.worker import EventsWorker
    from prefect.logging.handlers import APILogWorker
    from prefect.settings import PREFECT_API_URL, temporary_settings

    os.environ["PREFECT_API_URL"] = url
    try:
        with temporary_settings(updates={PREFECT_API_URL: url}):
            try:
                yield url
            finally:
                with contextlib.suppress(RuntimeError):  # no log worker was started
                    APILogWorker.instance().drain()
                EventsWorker.drain_all()
    finally:
        os.environ.pop("PREFECT_API_URL", None)


def _startup_timeout() -> float:
    return float(os.environ["PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS"])


@contextlib.contextmanager
def prefect_api(home: str) -> Iterator[str]:
    """Yield the API URL to use: the configured one, or a temporary server's."""
    prefect_home = configure_environment(home)
    if os.environ.get("PREFECT_API_URL"):
        yield os.environ["PREFECT_API_URL"]
        return
    server = TemporaryServer(prefect_home).launch()
    try:
        with _flow_api(server.wait(_startup_timeout())) as url:
            yield url
    finally:
        server.stop()


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


# A run's LocalCluster is a batch engine, not a dashboard. By default its event
# loops tick every 20 ms, each worker samples its stacks every 10 ms and every
# process polls system metrics every 0.5 s and memory every 0.1 s: an idle
# 2-worker cluster then used 2.0 CPU-s per 10 s (0.2 of this machine's 2 cores,
# taken from the ingest, which runs beside it), and 0.2 with these settings
# (ad-hoc measurement of each process's CPU time, not in bench/). Set for the
# clusters run_cluster starts only; a scheduler given by address keeps its own.
LOCAL_CLUSTER_CONFIG = {
    "distributed.admin.tick.interval": "1s",
    "distributed.worker.profile.enabled": False,
    "distributed.admin.system-monitor.interval": "5s",
    "distributed.worker.memory.monitor-interval": "500ms",
}

# Imported by each LocalCluster worker as it starts (Dask's ``preload``): the
# fits' modules (scipy, matplotlib; 2.7-2.9 s) load while the Prefect server
# starts instead of delaying each worker's first fit.
WORKER_PRELOAD = "jurymeter.orchestration.worker_preload"


class _LocalClusterOf(Protocol):
    """The part of ``LocalCluster``'s constructor run_cluster calls, typed (distributed leaves it unannotated)."""

    def __call__(
        self,
        *,
        n_workers: int,
        threads_per_worker: int,
        processes: bool,
        dashboard_address: str,
        preload: list[str],
    ) -> distributed.LocalCluster: ...


@contextlib.contextmanager
def run_cluster(address: str | None, workers: int, threads_per_worker: int) -> Iterator[str]:
    """Yield a scheduler address: ``address`` itself, or a LocalCluster's, started for the run.

    Starting the cluster here, in a thread beside the Prefect server's start
    (both take seconds), overlaps the two; the flow then connects by address.
    """
    if address:
        yield address
        return
    import dask
    from distributed import LocalCluster

    local_cluster: _LocalClusterOf = LocalCluster
    with (
        _worker_environ(WORKER_MALLOC),
        dask.config.set(LOCAL_CLUSTER_CONFIG),
        local_cluster(
            n_workers=workers,
            threads_per_worker=threads_per_worker,
            processes=True,
            dashboard_address=":0",  # any free port: no warning when 8787 is taken
            preload=[WORKER_PRELOAD],
        ) as cluster,
    ):
        yield cluster.scheduler_address


# Closers of the LocalClusters run_environment started, by scheduler address.
_retirable: dict[str, Callable[[], None]] = {}


def retire_cluster(address: str) -> None:
    """Start closing the LocalCluster at ``address`` in the background, if this process started it.

    The flow calls it when its last Dask work is done, so the workers' shutdown
    (1-2 s) overlaps publishing; a scheduler given by address is left alone.
    """
    close = _retirable.pop(address, None)
    if close is not None:
        close()


@contextlib.contextmanager
def run_environment(
    home: str,
    address: str | None,
    workers: int,
    threads_per_worker: int,
    *,
    imports: tuple[str, ...] = (),
    meanwhile: Callable[[Callable[[], str]], None] | None = None,
) -> Iterator[str]:
    """Prefect API and Dask scheduler for one run, started side by side; yields the scheduler address.

    Order, so that the slow parts overlap: launch the temporary Prefect server
    (a subprocess), start the LocalCluster in a thread, import ``imports`` (the
    flow's modules: Prefect's client takes seconds to import) here, call
    ``meanwhile`` (work that needs neither, such as starting the ingest; it is
    given a function that waits for the cluster and returns its scheduler's
    address, for work that can use it once it is up), and only then wait for
    the server to answer.
    """
    import threading

    prefect_home = configure_environment(home)
    external = os.environ.get("PREFECT_API_URL")
    ready: list[str | BaseException] = []
    cluster_stack = contextlib.ExitStack()  # closed by retire_cluster's thread or on exit

    def start_cluster() -> None:
        try:
            ready.append(cluster_stack.enter_context(run_cluster(address, workers, threads_per_worker)))
        except BaseException as exc:  # handed to the caller
            ready.append(exc)

    def cluster_address() -> str:  # the cluster's address once it is up (another thread may wait for it)
        starter.join()
        if isinstance(ready[0], BaseException):
            raise ready[0]
        return ready[0]

    closer = threading.Thread(target=cluster_stack.close, name="jurymeter-cluster-close", daemon=True)

    def close_cluster() -> None:
        if closer.ident is None:  # never retired: close it now
            cluster_stack.close()
        else:
            closer.join()

    with contextlib.ExitStack() as stack:
        server = None if external else TemporaryServer(prefect_home).launch()
        if server is not None:
            stack.callback(server.stop)
        stack.callback(close_cluster)  # before the server stops: LIFO
        starter = threading.Thread(target=start_cluster, name="jurymeter-cluster", daemon=True)
        starter.start()
        try:
            for module in imports:
                importlib.import_module(module)
            if meanwhile is not None:
                meanwhile(cluster_address)
            url = None if server is None else server.wait(_startup_timeout())  # None: external
        finally:
            starter.join()  # the cluster must be in its stack before the stacks unwind
        if isinstance(ready[0], BaseException):
            raise ready[0]
        scheduler = ready[0]
        if not address:  # a LocalCluster of ours: the flow may retire it early
            _retirable[scheduler] = closer.start
            stack.callback(_retirable.pop, scheduler, None)
        if url is None:
            yield scheduler
        else:
            with _flow_api(url):
                yield scheduler
