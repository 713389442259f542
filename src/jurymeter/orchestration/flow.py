"""The nightly reliability flow: ingest what landed, fit every item set in parallel, publish.

Thin orchestration over :mod:`jurymeter.pipeline`. Prefect runs in this process
only: the Dask workers receive plain functions (:func:`jurymeter.pipeline.fit.fit_and_tabulate`)
and never talk to a Prefect API, so no worker starts a server of its own and
the workers need no Prefect at all. Per-fit retries are Dask's (they also
cover a lost worker); stage retries on transient I/O are Prefect's.

Run it with ``jurymeter run`` (which brings up one temporary Prefect server
when no ``PREFECT_API_URL`` is set, and begins the landing ingest while it
starts: :func:`start_ingest_early`), or deploy it with ``infra/prefect.yaml``.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import Future
from dataclasses import replace
from typing import TYPE_CHECKING, Any, ParamSpec, Protocol, TypeVar

from prefect import Task, flow, task
from prefect.cache_policies import NO_CACHE
from prefect.utilities.annotations import quote

from jurymeter.io.ingest import StageMap
from jurymeter.io.store import Store
from jurymeter.orchestration.tasks import cluster_map, cluster_stage_map
from jurymeter.pipeline.cache import FitOutcome, record, reuse
from jurymeter.pipeline.config import DaskConfig, RunConfig, load_config
from jurymeter.pipeline.fit import fit_and_tabulate, one_line
from jurymeter.pipeline.jobs import FitJob, Plan, new_run_id, plan_fits
from jurymeter.pipeline.landing import ingest_landing as _ingest_landing
from jurymeter.pipeline.publish import clean_unpublished, publish_run

if TYPE_CHECKING:
    import distributed
    from prefect import State
    from prefect.client.schemas.objects import TaskRun
    from tornado.ioloop import IOLoop

P = ParamSpec("P")
R = TypeVar("R")
T = TypeVar("T")

# Transient I/O (a flaky S3 call, a busy disk) gets a second and third chance;
# a configuration error or a bug does not, since it would only fail again.
IO_RETRIES = 2
IO_RETRY_DELAY = 2.0




def _transient(task: Task[..., Any], task_run: TaskRun, state: State[Any]) -> bool:
    """Prefect retry condition: retry I/O failures only."""
    from jurymeter.errors import SourceError, StoreError

    error = state.result(raise_on_failure=False)
    return isinstance(error, OSError | StoreError | SourceError | TimeoutError)


def io_task(fn: Callable[P, R]) -> Task[P, R]:
    """A task of I/O: retried on transient failures (:func:`_transient`), never cached."""
    return task(
        retries=IO_RETRIES,
        retry_delay_seconds=IO_RETRY_DELAY,
        retry_condition_fn=_transient,
        cache_policy=NO_CACHE,
    )(fn)


# The parts of distributed's API the flow calls, typed: distributed leaves the constructors
# of Client and as_completed unannotated. Assigning the real classes to these checks them.
class _ClientOf(Protocol):
    def __call__(self, address: str, *, set_as_default: bool) -> distributed.Client: ...


class _AsCompleted(Protocol):
    def __call__(
        self, futures: Iterable[distributed.Future[T]], *, loop: IOLoop | None
    ) -> Iterator[distributed.Future[T]]: ...


@contextlib.contextmanager
def dask_client(settings: DaskConfig) -> Iterator[distributed.Client]:
    """A client of the configured scheduler, or of a LocalCluster started for the run."""
    from distributed import Client

    from jurymeter.orchestration.runtime import run_cluster

    client_of: _ClientOf = Client
    with (
        run_cluster(settings.address, settings.workers, settings.threads_per_worker) as address,
        client_of(address, set_as_default=False) as client,
    ):
        yield client


def _ingest(config: RunConfig) -> dict[str, Any] | None:
    """The landing ingest (:func:`jurymeter.pipeline.landing.ingest_landing`); a seam tests patch.

    Its stage steps go to the run's Dask cluster when there is one (the
    configured scheduler, or the LocalCluster ``jurymeter run`` is starting:
    :func:`start_ingest_early`), and are committed here in order.
    """
    return _ingest_landing(config, _stage_map(config))


def _stage_map(config: RunConfig) -> StageMap | None:
    """The landing ingest's stage steps on the cluster's workers, or ``None`` (staged in this process)."""
    address = config.dask.address
    if address:
        return cluster_stage_map(lambda: address)
    scheduler = _schedulers.get(_ingest_key(config))
    return None if scheduler is None else cluster_stage_map(scheduler)


# Ingests begun before the flow (start_ingest_early), by the configuration they ingest for.
_early_ingests: dict[str, Future[dict[str, Any] | None]] = {}
# The scheduler (once started) of the cluster a run is starting, by the configuration of its early ingest.
_schedulers: dict[str, Callable[[], str]] = {}


def _ingest_key(config: RunConfig) -> str:
    # The scheduler address is not the ingest's business, and the CLI only learns it later.
    return replace(config, dask=DaskConfig()).digest()


def start_ingest_early(config: RunConfig, scheduler: Callable[[], str] | None = None) -> None:
    """Begin the landing ingest in a thread now; the flow's ingest task takes its result.

    ``jurymeter run`` calls it while Prefect's temporary server starts (6-8 s,
    18-19 s when its database is new), which uses one core: the ingest needs no
    Prefect and no Dask. The task then waits for this ingest instead of
    starting one; if it failed, the task's retries run the ingest themselves.
    Nothing changes for a flow started any other way (a deployment).
    ``scheduler`` gives the address of the LocalCluster the run is starting
    (it waits for it): the ingest's stage steps go to its workers once it is
    up (:func:`_stage_map`).
    """
    import threading

    future: Future[dict[str, Any] | None] = Future()
    key = _ingest_key(config)
    if scheduler is not None:
        _schedulers[key] = scheduler

    def work() -> None:
        try:
            future.set_result(_ingest(config))
        except BaseException as exc:  # handed to the task that claims it
            future.set_exception(exc)
        finally:
            _schedulers.pop(key, None)

    _early_ingests[key] = future
    # A daemon: if the run fails before the flow claims it, the process may exit
    # mid-ingest, which the store's commit markers make harmless (a rerun redoes it).
    threading.Thread(target=work, name="jurymeter-early-ingest", daemon=True).start()


def hand_over_ingest(config: RunConfig, report: dict[str, Any] | None) -> None:
    """The landing ingest already ran (``jurymeter run`` ingested first, to check the plan): the task takes it."""
    future: Future[dict[str, Any] | None] = Future()
    future.set_result(report)
    _early_ingests[_ingest_key(config)] = future


@io_task
def ingest_landing(config: RunConfig) -> dict[str, Any] | None:
    """Ingest every dump in the landing location, or take the ingest begun before the flow."""
    early = _early_ingests.pop(_ingest_key(config), None)
    if early is not None:
        return early.result()  # its error, if any, is this attempt's: a retry ingests afresh
    return _ingest(config)


@io_task
def plan(config: RunConfig) -> Plan:
    return plan_fits(Store(config.store, config.storage_options), config)


_listeners: list[Callable[[FitOutcome], None]] = []
_ingest_listeners: list[Callable[[dict[str, Any] | None], None]] = []
_start_listeners: list[Callable[[FitJob, int], None]] = []


@contextlib.contextmanager
def listening(
    callback: Callable[[FitOutcome], None],
    on_ingest: Callable[[dict[str, Any] | None], None] | None = None,
    on_start: Callable[[FitJob, int], None] | None = None,
) -> Iterator[None]:
    """Call ``callback`` in this process as each fit finishes (the CLI's progress lines),
    ``on_ingest`` when the landing ingest is done (the CLI prints its line then, not after the fits),
    and ``on_start(job, n_fits)`` as each fit is sent to Dask (``n_fits``: the run's fits, reused included).

    Listeners, not flow parameters: Prefect records parameters, and a
    function is not a value it can record.
    """
    _listeners.append(callback)
    if on_ingest is not None:
        _ingest_listeners.append(on_ingest)
    if on_start is not None:
        _start_listeners.append(on_start)
    try:
        yield
    finally:
        _listeners.remove(callback)
        if on_ingest is not None:
            _ingest_listeners.remove(on_ingest)
        if on_start is not None:
            _start_listeners.remove(on_start)


def _tell(outcome: FitOutcome) -> None:
    for callback in list(_listeners):
        callback(outcome)


def _tell_start(job: FitJob, n_fits: int) -> None:
    for callback in list(_start_listeners):
        callback(job, n_fits)


@task(cache_policy=NO_CACHE)
def fit_all(jobs: list[FitJob], config: RunConfig, force: bool) -> list[FitOutcome]:
    """Reuse cached fits (:func:`jurymeter.pipeline.cache.reuse`), send the rest to Dask;
    one failure never stops the others."""
    store = Store(config.store, config.storage_options)
    outcomes, todo = reuse(store, jobs, force=force, figures=config.report)
    for outcome in outcomes.values():
        _tell(outcome)
    if todo:
        from distributed import as_completed

        completed: _AsCompleted = as_completed
        with dask_client(config.dask) as client:
            started = {k: time.perf_counter() for k in todo}
            futures: dict[distributed.Future[Any], int] = {}
            for k in todo:
                futures[client.submit(fit_and_tabulate, jobs[k], config.report, cluster_map,
                                      key=f"fit-{jobs[k].key()}-{k}", retries=config.dask.retries,
                                      pure=False)] = k
                _tell_start(jobs[k], len(jobs))
            for future in completed(list(futures), loop=client.loop):
                k = futures[future]
                seconds = time.perf_counter() - started[k]
                try:
                    result = future.result()
                except Exception as exc:  # the worker died past its retries: this fit only
                    outcomes[k] = FitOutcome(jobs[k], "failed", None, None, None, one_line(exc), seconds)
                else:
                    outcomes[k] = record(store, jobs[k], result, seconds)
                _tell(outcomes[k])
        from jurymeter.orchestration.runtime import retire_cluster

        if config.dask.address:  # no more Dask work in this run: a LocalCluster of the CLI's may go
            retire_cluster(config.dask.address)
    return [outcomes[k] for k in range(len(jobs))]


@io_task
def publish(
    config: RunConfig,
    run_id: str,
    started: str,
    ingest_report: dict[str, Any] | None,
    outcomes: list[FitOutcome],
    timings: dict[str, float],
    planned: Plan,
) -> dict[str, Any]:
    """Write the run folder (tables, summary, fit reports, HTML report); return the summary."""
    store = Store(config.store, config.storage_options)
    return publish_run(
        store, run_id, config=config, started=started, ingest_report=ingest_report,
        outcomes=outcomes, timings=timings, skipped=planned.skipped,
    )


@flow(name="jurymeter-nightly", log_prints=False)
def nightly(
    config_path: str | None = None,
    force: bool = False,
    overrides: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Ingest the landing location, fit every item set x universe x population, publish.

    Parameters
    ----------
    config_path
        TOML configuration (``None``: ``$JURYMETER_CONFIG`` or the defaults).
    force
        Refit every fit even when its inputs are unchanged.
    overrides
        Dotted configuration keys set by CLI flags (``{"dask.address": ...}``).

    Returns
    -------
    The run's ``summary.json`` content (``docs/results.md``).
    """
    config = load_config(config_path, overrides=overrides)
    store = Store(config.store, config.storage_options)
    # Held to the end (the kernel releases it if this process is killed): a run that
    # holds it knows a results folder without summary.json is a killed run's.
    with store.run_lock() as alone:
        clean_unpublished(store, alone=alone)
        return _nightly(config, force)


def _nightly(config: RunConfig, force: bool) -> dict[str, Any]:
    """The flow's stages, in the flow's run (see :func:`nightly`)."""
    import datetime as dt

    run_id = new_run_id()
    started = dt.datetime.now(dt.UTC).isoformat(timespec="seconds")
    timings: dict[str, float] = {}
    clock = time.perf_counter()
    ingest_report = ingest_landing(config)
    for callback in list(_ingest_listeners):
        callback(ingest_report)
    # What the flow waited for, and what the ingest took (more, when it began before the flow).
    timings["ingest_wait"] = time.perf_counter() - clock
    timings["ingest"] = ingest_report["seconds"] if ingest_report else timings["ingest_wait"]
    clock = time.perf_counter()
    planned = plan(config)
    outcomes = fit_all(planned.jobs, config, force)
    timings["fits"] = time.perf_counter() - clock
    # quote: Prefect walks every task argument looking for futures; the fits'
    # tables, reports and figures took it 1.3 s (two walks of 200,000 objects).
    # return_state=False is the default; it selects the signature Prefect types for
    # arguments it transforms (it unwraps quote), where the task's own wants the bare values.
    return publish(
        config, run_id, started, ingest_report, quote(outcomes), timings, quote(planned),
        return_state=False,
    )
