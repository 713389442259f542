"""``jurymeter run``, ``demo`` and ``report``: the nightly flow from the command line, and its printout."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import orjson
import typer
from rich.table import Table

from jurymeter.analyses import registered
from jurymeter.analyses.base import dropped_line, headline_why
from jurymeter.cli.common import (
    ConfigOpt,
    StorageOpt,
    StoreOpt,
    open_store,
    run_command,
)
from jurymeter.cli.plans import simulate_dump_to
from jurymeter.errors import ConfigError
from jurymeter.pipeline.config import DEFAULT_HOME, DaskConfig
from jurymeter.pipeline.outcome import seconds_by_analysis
from jurymeter.pipeline.plans import plan_line
from jurymeter.render.text import err, fmt, out, safe_text

if TYPE_CHECKING:
    from jurymeter.pipeline.cache import FitOutcome
    from jurymeter.pipeline.config import RunConfig
    from jurymeter.pipeline.jobs import FitJob


def run(
    config: ConfigOpt = None,
    store: StoreOpt = None,
    landing: Annotated[
        str | None, typer.Option("--landing", help="Folder or s3:// prefix where new dumps land")
    ] = None,
    scheduler: Annotated[
        str | None,
        typer.Option("--scheduler", help="Dask scheduler address [default: $DASK_SCHEDULER_ADDRESS or a LocalCluster]"),
    ] = None,
    workers: Annotated[
        int | None, typer.Option("--workers", help=f"LocalCluster worker processes [default: {DaskConfig().workers}]")
    ] = None,
    n_boot: Annotated[int | None, typer.Option("--boot", help="Bootstrap resamples per fit")] = None,
    force: Annotated[bool, typer.Option("--force", help="Refit even when inputs are unchanged")] = False,
    no_report: Annotated[bool, typer.Option("--no-report", help="Skip the HTML report")] = False,
    home: Annotated[
        str | None, typer.Option("--home", help=f"Run state folder (Prefect's database and logs) [default: {DEFAULT_HOME}]")
    ] = None,
) -> None:
    """The nightly flow: ingest what landed, fit every item set on Dask, publish results and report.

    Exit 4 when some fits failed, else 6 when some landing files could not be
    read (each an alert of the run; every readable one is ingested), else 7 when
    a limit of the gates table of --config failed (as ``jurymeter check``).
    """
    overrides = {
        "store": store, "landing": landing, "dask.address": scheduler, "dask.workers": workers,
        "fit.n_boot": n_boot, "home": home, "report": False if no_report else None,
    }
    summary = run_command(_run_flow, config, overrides, force)
    # The results are published; the status tells a scheduler that some part failed.
    if any(fit.get("status") == "failed" for fit in summary["fits"]):
        raise typer.Exit(4)
    if summary.get("sources_unreadable"):
        raise typer.Exit(6)
    if summary["status"] != "complete":
        raise typer.Exit(4)
    from jurymeter.cli.check import gates_at_end_of_run

    run_command(gates_at_end_of_run, config, overrides, summary, RUN_FLAGS)  # [gates]: exit 7 naming each failure


# The flags of `jurymeter run` that set a configuration key: an error in the value names the flag.
RUN_FLAGS = {"store": "--store", "landing": "--landing", "dask.address": "--scheduler", "dask.workers": "--workers",
             "fit.n_boot": "--boot", "home": "--home", "report": "--no-report"}


def check_run(config_path: Path | None, overrides: dict[str, Any]) -> tuple[RunConfig, dict[str, Any] | None]:
    """The configuration, checked whole before Prefect or Dask start, and the landing's ingest if it had to run first.

    The flow plans after its ingest; every check of its plan that the store as it is
    can answer is made here (:func:`jurymeter.pipeline.jobs.check_before_run`). Where
    a landed file may answer it (an id only a new dump holds), the landing is ingested
    first, then checked: a user error is one line, and nothing was started.
    """
    from jurymeter.io.store import Store
    from jurymeter.pipeline.config import load_config
    from jurymeter.pipeline.jobs import check_before_run, plan_fits
    from jurymeter.pipeline.landing import ingest_landing, landing_sources

    settings = load_config(config_path, overrides=overrides, flags=RUN_FLAGS)
    store = Store(settings.store, settings.storage_options)
    landed = bool(landing_sources(settings))
    if check_before_run(store, settings, landed=landed):
        return settings, None
    out.print("ingesting the landing folder first: the configuration names what only it may hold", markup=False)
    ingested = ingest_landing(settings)
    plan_fits(store, settings)  # its ConfigError, now that every landed dump is in the store
    return settings, ingested


def _run_flow(
    config_path: Path | None, overrides: dict[str, Any], force: bool, progress: RunProgress | None = None
) -> dict[str, Any]:
    if progress is None:
        with RunProgress() as progress:
            return _run_flow_with(progress, config_path, overrides, force)
    return _run_flow_with(progress, config_path, overrides, force)


def _run_flow_with(
    progress: RunProgress, config_path: Path | None, overrides: dict[str, Any], force: bool
) -> dict[str, Any]:
    settings, ingested = check_run(config_path, overrides)  # fail fast, before Prefect starts
    from jurymeter.orchestration.runtime import run_environment

    out.print(f"store {safe_text(settings.store)}, landing {safe_text(settings.landing or '(none)')}", markup=False)
    dask = settings.dask
    where = f"Dask scheduler {dask.address}" if dask.address else f"a LocalCluster of {dask.workers} workers"
    out.print(f"starting: Prefect's API and {where}"
              + ("" if ingested is not None else "; ingesting the landing folder meanwhile"), markup=False)
    progress.stage("starting Prefect's API and Dask" + ("" if ingested is not None else ", ingesting"))

    def ingest_meanwhile(scheduler: Callable[[], str]) -> None:  # the ingest needs no Prefect server
        from jurymeter.orchestration.flow import hand_over_ingest, start_ingest_early

        if ingested is not None:
            hand_over_ingest(settings, ingested)
        else:
            start_ingest_early(settings, scheduler)  # its stage steps go to the cluster once it is up

    with run_environment(
        settings.home, dask.address, dask.workers, dask.threads_per_worker,
        imports=("jurymeter.orchestration.flow", "jurymeter.io.ingest"), meanwhile=ingest_meanwhile,
    ) as address:
        from jurymeter.orchestration.flow import listening, nightly

        overrides = {**overrides, "dask.address": address}

        def on_ingest(ingest: dict[str, Any] | None) -> None:
            print_ingest_line(ingest)
            progress.stage("planning the fits")

        with listening(progress.fit_done, on_ingest, progress.fit_started):
            summary = nightly(str(config_path) if config_path else None, force, overrides)
    print_run_summary(summary, ingest_printed=True)
    return summary


# A line at least this often while a run works (issue 24: never more than 10 s of silence);
# the heartbeat thread looks this often whether it is due.
QUIET_SECONDS = 5.0
HEARTBEAT_POLL = 0.5


class RunProgress:
    """The run's progress lines on stdout: each fit sent to Dask and each fit back (with its
    seconds), and a "still ..." line whenever nothing was said for :data:`QUIET_SECONDS`.

    Every line starts with the seconds since the run began (``[  12.3 s]``), so a log shows
    where the time went. Lines, not a bar: they read the same on a terminal, in CI and in a
    log file. The fits' lines come from the flow's listeners
    (:func:`jurymeter.orchestration.flow.listening`), called in this process as each fit's
    future is submitted and as it completes.
    """

    def __init__(self, stage: str = "checking the configuration", clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._began = clock()
        self._last = self._began
        self._stage = stage
        self._lock = threading.Lock()
        self._running: dict[str, float] = {}  # "protocol item set / universe / population" -> when it was sent
        self._n_fits = 0
        self._sent = 0
        self._done = 0
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def __enter__(self) -> RunProgress:
        self._thread = threading.Thread(target=self._beat, name="jurymeter-progress", daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()

    def say(self, line: str) -> None:
        """Print ``line`` after the run's elapsed seconds."""
        with self._lock:
            now = self._clock()
            self._last = now
            out.print(f"[{now - self._began:6.1f} s] {line}", markup=False, highlight=False)

    def stage(self, what: str) -> None:
        """What the run does now: the "still ..." lines say it."""
        with self._lock:
            self._stage = what

    def fit_started(self, job: FitJob, n_fits: int) -> None:
        """A fit was sent to Dask (the flow's ``on_start`` listener)."""
        with self._lock:
            self._n_fits = n_fits
            self._running[_fit_label(job)] = self._clock()
            self._stage = "fitting"
            self._sent += 1
            sent = self._sent
        self.say(f"fit started ({sent} sent of {n_fits}): {_fit_label(job)}")

    def fit_done(self, outcome: FitOutcome) -> None:
        """A fit came back, was reused or failed (the flow's listener)."""
        label = _fit_label(outcome.job)
        with self._lock:
            self._running.pop(label, None)
            self._done += 1
            if self._n_fits and self._done >= self._n_fits:
                self._stage = "publishing the results and the report"
            done = f"{self._done} done" + (f" of {self._n_fits}" if self._n_fits else "")
        if outcome.status == "reused":
            self.say(f"fit reused, inputs unchanged ({done}): {label}")
            return
        # none for a failed fit (it has no summary); an analysis under the line's 0.1 s says nothing
        spent = [(name, sec) for name, sec in seconds_by_analysis(outcome.summary) if sec >= 0.05]
        own = f" ({', '.join(f'{safe_text(name)} {sec:.1f} s' for name, sec in spent)})" if spent else ""
        self.say(f"fit {outcome.status} in {outcome.seconds:.1f} s{own} ({done}): {label}")
        if outcome.status == "failed":
            err.print(f"fit failed: {safe_text(outcome.job.name)}: {safe_text(outcome.error)}", markup=False)

    def quiet_line(self) -> str | None:
        """The "still ..." line if nothing was said for :data:`QUIET_SECONDS`, else ``None``."""
        with self._lock:
            now = self._clock()
            if now - self._last < QUIET_SECONDS:
                return None
            running = ", ".join(f"{label} ({now - sent:.0f} s)" for label, sent in self._running.items())
            fits = f" ({self._done} of {self._n_fits} fits done; running {running or 'none'})" if self._n_fits else ""
            return f"still {self._stage}{fits}"

    def _beat(self) -> None:
        while not self._stop.wait(HEARTBEAT_POLL):
            line = self.quiet_line()
            if line is not None:
                self.say(line)


def _fit_label(job: FitJob) -> str:
    """A fit in the progress lines: its protocol, item set, universe and population (escaped)."""
    return f"{job.protocol} {safe_text(job.name)}"


def print_ingest_line(ingest: dict[str, Any] | None) -> None:
    if ingest:
        t = ingest["totals"]
        out.print(
            f"ingest: read {t['read']:,} = accepted {t['accepted']:,} + quarantined "
            f"{t['quarantined']:,} + duplicates dropped {t['duplicates_dropped']:,}",
            markup=False,
        )
    else:
        out.print("ingest: nothing new in the landing location", markup=False)


def print_run_summary(summary: dict[str, Any], *, ingest_printed: bool = False) -> None:
    if not ingest_printed:
        print_ingest_line(summary.get("ingest"))
    counts: dict[str, int] = {}
    for fit in summary["fits"]:
        counts[fit["status"]] = counts.get(fit["status"], 0) + 1
    # One table per protocol (a pointwise and a pairwise item set may share a name), each with
    # the headline columns of the analyses that fit that protocol.
    protocols = list(dict.fromkeys(fit.get("protocol") or "pointwise" for fit in summary["fits"])) or ["pointwise"]
    for protocol in protocols:
        # The analyses some fit of this protocol ran or skipped: an analysis the run did not enable
        # (the opt-in latent G-study) would be a column of dashes.
        ran = {name for fit in summary["fits"] if (fit.get("protocol") or "pointwise") == protocol
               for name in (fit.get("analyses") or {})}
        columns = [(a.name, h) for a in registered() if protocol in a.protocols and a.name in ran
                   for h in a.headline if h.kind == "number" and h.table]
        title = f"run {safe_text(summary['run_id'])}: {safe_text(summary['status'])}"
        table = Table(title=title if len(protocols) == 1 else f"{title} ({protocol} item sets)", title_justify="left")
        for col in ("item set", "universe", "population", "status"):
            table.add_column(col)
        for _, h in columns:
            table.add_column(h.label, justify="right")
        unestimable: list[str] = []  # under the table: why each "not estimable" cell has no number
        for fit in summary["fits"]:
            if (fit.get("protocol") or "pointwise") != protocol:
                continue
            parts = fit.get("analyses") or {}
            cells = []
            for name, h in columns:
                part = parts.get(name)
                if part is None:  # the analysis does not apply to this fit
                    cells.append("-")
                    continue
                why = headline_why(part, h.key)
                cells.append(fmt(part.get(h.key)) if why is None else why[0])
                if why is not None and why[0] == "not estimable":
                    unestimable.append(f"{h.label} not estimable in {_fit_name(fit)}: {safe_text(why[1])}")
            table.add_row(
                safe_text(fit["item_set"]), safe_text(fit["universe"]), safe_text(fit["population"]),
                fit["status"] if fit["status"] != "failed" else f"failed: {safe_text(fit['error'])}", *cells,
            )
        out.print(table)
        for note in unestimable:  # "not run" cells are explained below, one line per skipped analysis
            out.print(note, markup=False)
    for judge in summary.get("judges") or []:
        if judge.get("failed"):
            out.print(f"judge {safe_text(judge['judge_id'])}: {judge['failed']:,} of {judge['stored'] + judge['failed']:,} "
                      f"judgments failed ({100 * judge['failed_share']:.1f}%: parse failures "
                      f"{judge['parse_failure']:,}, failed calls {judge['judge_call_failed']:,}, "
                      f"unscored {judge['unscored']:,})", markup=False)
    for skip in summary.get("skipped") or []:
        out.print(f"not fitted: {skip['protocol']} item set {safe_text(skip['item_set'])}: {safe_text(skip['reason'])}",
                  markup=False)
    for fit in summary["fits"]:  # what a fit left out (issue 14, point 5): one line per fit that dropped anything
        for a in registered():
            line = dropped_line(a.headline, (fit.get("analyses") or {}).get(a.name) or {})
            if line:
                out.print(f"dropped in {_fit_name(fit)} ({a.name}): {safe_text(line)}", markup=False)
    for fit in summary["fits"]:
        for name, part in (fit.get("analyses") or {}).items():
            if part.get("status") == "skipped":
                out.print(f"{name} not run on {_fit_name(fit)}: {safe_text(part.get('reason'))}", markup=False)
    for row in summary.get("plans") or []:  # a plan's judgments fitted tonight: what it predicted, what came
        verdict = ("inside its prediction" if row["inside"] else "OUTSIDE its prediction") \
            if row["inside"] is not None else f"not compared: {row['reason']}"
        out.print(f"plan {safe_text(row['plan_id'])} on {safe_text(row['item_set'])}: {plan_line(row)}: "
                  f"{safe_text(verdict)}", markup=False)
    if not summary["fits"] and not summary.get("skipped"):
        out.print(
            "no fits: the store holds no item set yet "
            f"(drop judgment dumps into {safe_text(summary.get('landing') or 'a landing folder')} and run again)",
            markup=False,
        )
    timings = summary["timings"]
    out.print(
        (", ".join(f"{n} {status}" for status, n in sorted(counts.items())) or "0 fits")
        + "; timings " + ", ".join(f"{k} {v:.1f} s" for k, v in timings.items()),
        markup=False,
    )
    folder = safe_text(summary["store"].rstrip("/") + f"/results/{summary['run_id']}")
    if "report" in timings:
        out.print(f"report: {folder}/report/index.html", markup=False)
    out.print(f"results: {folder}/ (summary.json and tables)", markup=False)
    print_headlines(summary)


def _fit_name(fit: dict[str, Any]) -> str:
    """A fit as the terminal names it: item set / universe / population, escaped."""
    return " / ".join(safe_text(fit[k]) for k in ("item_set", "universe", "population"))


def print_headlines(summary: dict[str, Any]) -> None:
    """The index page's alerts and one headline per fit (``summary.json`` ``headlines``; said again for older runs)."""
    from jurymeter.analyses.headlines import run_headlines

    headlines = summary.get("headlines") or run_headlines(summary)
    alerts = headlines.get("alerts") or []
    if alerts:
        out.print(f"alerts ({len(alerts)}):", style="bold red", markup=False)
        for alert in alerts:
            out.print(f"  ! {safe_text(alert)}", markup=False)
    else:
        out.print("alerts: none", markup=False)
    for fit in headlines.get("fits") or []:
        out.print(f"{safe_text(fit['label'])}: {safe_text(fit['sentence'])}", markup=False)


def report(
    results: Annotated[str, typer.Argument(help="A run folder (results/<run_id>) or 'latest'")] = "latest",
    store: StoreOpt = None,
    storage_option: StorageOpt = None,
    config: ConfigOpt = None,
    summary: Annotated[
        bool, typer.Option("--summary", help="Print the run's alerts and headlines; rebuild nothing")
    ] = False,
) -> None:
    """Rebuild every page of a run's report (index, one page per fit, run history) from its results folder."""
    run_command(_report, results, store, storage_option, config, summary)


def _report(results: str, store: str | None, storage_option: list[str] | None, config: Path | None,
            summary_only: bool = False) -> str:
    from jurymeter.pipeline.publish import read_run, write_report

    target = open_store(store, storage_option, config)
    target.check()
    if results == "latest":
        try:
            latest = target.read_json("results/latest.json")
        except FileNotFoundError as exc:
            msg = f"no run in {target.url} yet (results/latest.json is missing)"
            raise ConfigError(msg) from exc
        folder = f"results/{latest['run_id']}"
    else:
        folder = results.rstrip("/")
        if folder.startswith(target.root + "/"):
            folder = folder[len(target.root) + 1 :]
        if not folder.startswith("results/"):
            folder = f"results/{folder}"
    if summary_only:
        try:
            summary = orjson.loads(target.fs.cat_file(target.path(f"{folder}/summary.json")))
        except FileNotFoundError as exc:
            msg = f"not a complete run folder: {target.path(folder)} (no summary.json)"
            raise ConfigError(msg) from exc
        out.print(f"run {safe_text(summary.get('run_id'))}: {safe_text(summary.get('status'))}", markup=False)
        print_headlines(summary)
        return str(target.path(f"{folder}/report/index.html"))
    try:
        tables, summary = read_run(target, folder)
    except FileNotFoundError as exc:
        msg = f"not a complete run folder: {target.path(folder)} (no summary.json or tables)"
        raise ConfigError(msg) from exc
    page = write_report(target, folder, tables, summary)
    out.print(f"report: {safe_text(page)}", markup=False)
    return page


def demo(
    workdir: Annotated[
        Path, typer.Option("--workdir", help="Where the dump, the store and the report go")
    ] = Path("jurymeter-demo"),
    seed: Annotated[int, typer.Option(help="Random seed")] = 0,
) -> None:
    """The main job on the embedded default: simulate a dump into a landing folder, run the nightly flow."""
    run_command(_demo, workdir, seed)


DEMO_CONFIG = r"""# Written by `jurymeter demo`: a nightly run over a simulated dump.
store = "{store}"
landing = "{landing}"
home = "{home}"
scale = [1, 10]

[universes]
three-judges = ["judge-a", "judge-b", "judge-c"]

[fit]
universes = ["all", "three-judges"]
n_boot = 800

# The demo's one size that differs from a nightly run's: each sequential resample is a GLMM
# refit (0.1-0.15 CPU-s on the demo's judges), and at the default 200 (+ 200 predictive-check
# sets) per judge they were 90 % of the demo's fits. 20 keeps every table and figure of the
# analysis; its intervals are rougher (docs/demo.md).
[fit.sequential]
n_boot = 20
"""


def _demo(workdir: Path, seed: int) -> None:
    workdir = workdir.resolve()
    landing = workdir / "landing"
    try:
        landing.mkdir(parents=True, exist_ok=True)
    except OSError as exc:  # a file in the way, no permission: the user's folder, said in one line
        msg = f"--workdir {workdir}: cannot make the folder ({exc.strerror or type(exc).__name__})"
        raise ConfigError(msg) from None
    with RunProgress("simulating the dump") as progress:
        simulate_dump_to(landing, seed, None, None, None, 12)
        config_path = workdir / "jurymeter.toml"
        config_path.write_text(
            DEMO_CONFIG.format(store=workdir / "store", landing=landing, home=workdir / ".jurymeter")
        )
        out.print(f"config: {safe_text(config_path)}", markup=False)
        progress.stage("checking the configuration")
        _run_flow(config_path, {}, False, progress)
