"""The nightly run's work, free of any orchestrator: plan fits, run one fit, tabulate, publish.

``src/jurymeter/orchestration/flow.py`` wraps these functions in Prefect tasks and sends
:func:`run_fit` to Dask workers; tests and benchmarks call them directly, which
is how the orchestration overhead is measured. The results layout is
documented in ``docs/results.md``.

A fit is keyed by the content of its inputs: the committed files of its
partition and of the metadata tables (parts are immutable once committed, so
their names identify their content), plus everything that shapes the result
(request, universe, population, code version). A fit whose key has a cached
report is reused instead of refitted.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import time
import uuid
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any

import orjson
import polars as pl

from jurymeter import __version__
from jurymeter.errors import JurymeterError
from jurymeter.io.store import Store
from jurymeter.pipeline.config import RunConfig

if TYPE_CHECKING:  # imported where the fits run (import_fit_modules)
    from jurymeter.cyclic.fit import CyclicChunks
    from jurymeter.stats.blocks import FitChunks

FIT_FAILED = "failed"


@dataclass(frozen=True, slots=True)
class FitJob:
    """One item set under one judge universe and one system population."""

    store: str
    storage_options: tuple[tuple[str, str], ...]
    item_set: str
    universe: str
    population: str
    judges: tuple[str, ...] | None
    systems: tuple[str, ...] | None
    n_boot: int
    seed: int
    target: float
    generations: str
    interval: str
    cyclic: bool
    inputs: tuple[str, ...]  # committed files the fit reads (their names identify content)

    @property
    def name(self) -> str:
        return f"{self.item_set} / {self.universe} / {self.population}"

    def key(self) -> str:
        """Content key: inputs and everything that shapes the result (not where the store is)."""
        shaping = {
            k: v for k, v in asdict(self).items() if k not in ("store", "storage_options")
        }
        shaping["code"] = __version__
        digest = hashlib.sha256(orjson.dumps(shaping, option=orjson.OPT_SORT_KEYS))
        return digest.hexdigest()[:32]


def new_run_id() -> str:
    stamp = dt.datetime.now(dt.UTC).strftime("%Y%m%dT%H%M%SZ")
    return f"{stamp}-{uuid.uuid4().hex[:8]}"


def plan_fits(store: Store, config: RunConfig) -> list[FitJob]:
    """Every fit the configuration asks for, over the item sets present in the store.

    Raises
    ------
    ConfigError
        An item set named in the configuration is not in the store.
    """
    from jurymeter.errors import ConfigError

    # One listing of the committed files serves every item set (each listing is
    # several requests on S3).
    by_set: dict[str, list[str]] = {}
    for f in store.data_files("pointwise"):
        by_set.setdefault(str(f.item_set), []).append(f.path[len(store.root) + 1 :])
    present = sorted(by_set)
    wanted = list(config.fit.item_sets) or present
    missing = [s for s in wanted if s not in present]
    if missing:
        msg = f"item set(s) {', '.join(map(repr, missing))} not in {store.url} (present: {', '.join(present) or 'none'})"
        raise ConfigError(msg)
    metadata = sorted(
        f.path[len(store.root) + 1 :]
        for protocol in ("systems", "judges")
        for f in store.data_files(protocol)  # type: ignore[arg-type]
    )
    jobs = []
    for item_set in wanted:
        data = sorted(by_set[item_set])
        for universe in config.fit.universes:
            for population in config.fit.populations:
                jobs.append(
                    FitJob(
                        store=store.url,
                        storage_options=tuple(sorted(config.storage_options.items())),
                        item_set=item_set,
                        universe=universe,
                        population=population,
                        judges=config.judges_of(universe),
                        systems=config.systems_of(population),
                        n_boot=config.fit.n_boot,
                        seed=config.fit.seed,
                        target=config.fit.target,
                        generations=config.fit.generations,
                        interval=config.fit.interval,
                        cyclic=config.fit.cyclic,
                        inputs=(*data, *metadata),
                    )
                )
    return jobs


# What a fit imports beyond this module (scipy and matplotlib among them).
FIT_MODULES = (
    "jurymeter.stats.reliability",
    "jurymeter.stats.dstudy",
    "jurymeter.cyclic.fit",
    "jurymeter.render.report",
)


def import_fit_modules() -> None:
    """Import every module a fit needs (2.7-2.9 s), so a worker can do it before its first fit."""
    import importlib

    for module in FIT_MODULES:
        importlib.import_module(module)


def run_fit(job: FitJob) -> dict[str, Any]:
    """Fit one job: the G/D-study report, its curves, the leaderboard and CyclicJudge.

    Runs on a Dask worker: it opens the store itself (workers share nothing
    with the client but the store's address). Returns JSON-ready data.
    """
    from jurymeter.cyclic.fit import CyclicChunks
    from jurymeter.stats.blocks import balanced_block, fit_chunks
    from jurymeter.stats.reliability import GStudyChunks, GStudyRequest, assess_block, restrict

    started = time.perf_counter()
    store = Store(job.store, dict(job.storage_options))
    records = store.scan("pointwise", job.item_set)
    systems = store.scan("systems").collect()
    request = GStudyRequest(
        item_set=job.item_set,
        judges=job.judges,
        systems=job.systems,
        generations=job.generations,  # type: ignore[arg-type]
        n_boot=job.n_boot,
        seed=job.seed,
        target=job.target,
        interval_method=job.interval,
    )
    scope = restrict(records, request)
    # Both blocks (the G-study's, CyclicJudge's) are decided first, then read
    # from one scan of the fit's records, or one scan per item chunk when the
    # cells are many (blocks.CHUNK_CELLS), and each chunk goes straight into the
    # fits' sums: no block is held whole, so memory follows systems x items.
    modes = tuple(dict.fromkeys([request.generations, *(["facet"] if job.cyclic else [])]))
    chunked = fit_chunks(scope, modes)  # type: ignore[arg-type]
    layout = chunked.layout(request.generations)
    population = systems if systems.height else None
    gstudy = GStudyChunks(layout, request, systems=population) if layout is not None else None
    cyclic = _cyclic_start(store, scope, systems, chunked) if job.cyclic else None
    feeds = [(request.generations, gstudy), ("facet", cyclic)]
    feeds = [(mode, sink) for mode, sink in feeds if isinstance(sink, GStudyChunks | CyclicChunks)]
    if feeds:
        for _, parts in chunked.parts():
            for mode, sink in feeds:
                sink.add(parts[mode])  # type: ignore[union-attr]
    if isinstance(cyclic, CyclicChunks):
        try:
            cyclic = cyclic.report(systems=systems, judges=store.scan("judges").collect())
        except JurymeterError as exc:  # no crossed panel: say why instead of failing the fit
            cyclic = {"skipped": str(exc)}
    if gstudy is not None:
        report = gstudy.report()
    else:  # the polars path decides this block
        report = assess_block(balanced_block(scope, generations=request.generations), request, systems=population)
    from jurymeter.stats.curves import curves, leaderboard

    report.update(curves(report))
    report["leaderboard"] = leaderboard(report)
    report["cyclic"] = cyclic
    report["seconds"] = time.perf_counter() - started
    return report


def _cyclic_start(
    store: Store, scope: pl.LazyFrame, systems: pl.DataFrame, chunked: FitChunks
) -> dict[str, Any] | CyclicChunks | None:
    """CyclicJudge where the data have 2+ generations and a crossed panel; else ``None``.

    ``scope`` is the fit's records (its universe and population), ``chunked``
    their blocks. Returns the sums to feed the facet block's chunks into, or the
    result when there is nothing to feed: ``{"skipped": why}`` when its rule
    finds no block, or the report of the polars path.
    """
    from jurymeter.cyclic.fit import CyclicChunks, cyclic_report

    generations = chunked.generations
    if generations is None:  # the distinct values by the streaming engine: not the whole column in memory
        generations = scope.select(pl.col("generation").unique()).collect(engine="streaming").height
    if generations < 2:
        return None
    try:
        layout = chunked.layout("facet")
        if layout is None:
            return cyclic_report(scope, systems=systems, judges=store.scan("judges").collect())
        return CyclicChunks(layout)
    except JurymeterError as exc:  # no crossed panel: say why instead of failing the fit
        return {"skipped": str(exc)}


def fit_tables(job: FitJob, report: dict[str, Any]) -> dict[str, pl.DataFrame]:
    """The tidy tables of one fit (``docs/results.md``), each starting with the fit's names."""
    rows: dict[str, list[dict[str, Any]]] = {}
    rows["components"] = [
        {
            "component": name,
            "estimate": c["raw"],
            "share": c["share"],
            "df": c["df"],
            "ms": c["ms"],
            "low": c["interval"].get("low"),
            "high": c["interval"].get("high"),
        }
        for name, c in report["components"].items()
    ]
    intervals = report["intervals"]
    rows["dstudy"] = [
        {
            "quantity": q,
            "estimate": _number(report.get(q, intervals.get(q, {}).get("estimate"))),
            "low": _number(intervals.get(q, {}).get("low")),
            "high": _number(intervals.get(q, {}).get("high")),
        }
        for q in (
            "erho2", "phi", "mdd95", "erho2_30", "mdd95_30", "mdd95_unlimited_items",
            "ceiling", "ceiling_3_judges", "mdd95_in_sd_of_system_means",
            "judges_needed", "items_needed",
        )
    ]
    rows["ceilings"] = [
        {"judges": int(j), "ceiling": v} for j, v in report["ceiling_by_judges"].items()
    ]
    rows["erho2_curve"] = report["erho2_curve"]
    nomo = report["nomogram"]
    rows["nomogram"] = [
        {"judges": j, "items": n, "erho2": nomo["erho2"][a][b]}
        for a, j in enumerate(nomo["judges"])
        for b, n in enumerate(nomo["items"])
    ]
    rows["budget"] = report["budget_curve"]
    rows["leaderboard"] = report["leaderboard"]
    items = report.get("items") or {}
    screened = set(items.get("screened_items", []))
    rows["items"] = [
        {"item_id": item, "discrimination": d, "screened": item in screened}
        for item, d in items.get("discrimination", {}).items()
    ]
    cyclic = report.get("cyclic") or {}
    per_system = cyclic.get("systems", {})
    rows["cyclic_systems"] = [
        {
            "system_id": system,
            **{k: r[k] for k in ("sigma2_scenario", "sigma2_generation", "sigma2_judge",
                                 "sigma2_residual", "f_statistic", "p_value")},
        }
        for system, r in per_system.items()
    ]
    rows["cyclic_strategies"] = [
        {"system_id": system, "budget": int(b), "strategy": s, "variance": float(v)}
        for system, r in per_system.items()
        for s in ("A", "B", "C")
        for b, v in zip(r["strategies"]["budgets"], r["strategies"][f"var_{s.lower()}"], strict=True)
    ]
    rows["judge_offsets"] = [
        {"system_id": system, "judge_id": judge, "offset": offset}
        for system, offsets in cyclic.get("judge_system_offsets", {}).items()
        for judge, offset in offsets.items()
    ]
    names = {"item_set": job.item_set, "universe": job.universe, "population": job.population}
    return {
        table: pl.DataFrame([{**names, **row} for row in table_rows], schema_overrides=SCHEMAS.get(table))
        if table_rows
        else _empty(table)
        for table, table_rows in rows.items()
    }


def _number(value: Any) -> float | None:
    if value is None:
        return None
    return float(value)


NAMES = {"item_set": pl.String, "universe": pl.String, "population": pl.String}
SCHEMAS: dict[str, dict[str, pl.DataType]] = {
    "components": {"component": pl.String, "estimate": pl.Float64, "share": pl.Float64,
                   "df": pl.Float64, "ms": pl.Float64, "low": pl.Float64, "high": pl.Float64},
    "dstudy": {"quantity": pl.String, "estimate": pl.Float64, "low": pl.Float64, "high": pl.Float64},
    "ceilings": {"judges": pl.Int64, "ceiling": pl.Float64},
    "erho2_curve": {"judges": pl.Int64, "items": pl.Int64, "erho2": pl.Float64},
    "nomogram": {"judges": pl.Int64, "items": pl.Int64, "erho2": pl.Float64},
    "budget": {"budget": pl.Int64, "judges": pl.Int64, "items": pl.Int64, "replicates": pl.Int64,
               "mdd95": pl.Float64, "optimal": pl.Boolean},
    "leaderboard": {"system_id": pl.String, "mean": pl.Float64, "rank": pl.Int64,
                    "tie_group": pl.Int64, "mdd95": pl.Float64},
    "items": {"item_id": pl.String, "discrimination": pl.Float64, "screened": pl.Boolean},
    "cyclic_systems": {"system_id": pl.String, "sigma2_scenario": pl.Float64,
                       "sigma2_generation": pl.Float64, "sigma2_judge": pl.Float64,
                       "sigma2_residual": pl.Float64, "f_statistic": pl.Float64, "p_value": pl.Float64},
    "cyclic_strategies": {"system_id": pl.String, "budget": pl.Int64, "strategy": pl.String,
                          "variance": pl.Float64},
    "judge_offsets": {"system_id": pl.String, "judge_id": pl.String, "offset": pl.Float64},
}
TABLES = tuple(SCHEMAS)


def _empty(table: str) -> pl.DataFrame:
    return pl.DataFrame(schema={**NAMES, **SCHEMAS[table]})


def combine_tables(parts: list[dict[str, pl.DataFrame]]) -> dict[str, pl.DataFrame]:
    """Concatenate the per-fit tables into the run's tables (empty tables keep their schema)."""
    out = {}
    for table in TABLES:
        frames = [p[table].select(list({**NAMES, **SCHEMAS[table]})) for p in parts]
        out[table] = (
            pl.concat([f.cast({**NAMES, **SCHEMAS[table]}) for f in frames]) if frames else _empty(table)
        )
    return out


def fit_summary(job: FitJob, status: str, report: dict[str, Any] | None, error: str | None,
                seconds: float, trace: str | None = None) -> dict[str, Any]:
    """One entry of ``summary.json``'s ``fits`` list."""
    entry: dict[str, Any] = {
        "item_set": job.item_set,
        "universe": job.universe,
        "population": job.population,
        "key": job.key(),
        "status": status,
        "error": error,
        "seconds": round(seconds, 3),
    }
    if trace:
        entry["traceback"] = trace
    if report is not None:
        block = report["block"]
        entry.update(
            design=report["design"],
            systems=block["systems"],
            items=block["items"],
            judges=block["judges"],
            mdd95=report["mdd95"],
            erho2=report["erho2"],
            ceiling=report["ceiling"],
            cyclic=bool(report.get("cyclic") and "systems" in report["cyclic"]),
        )
    return entry


def one_line(exc: BaseException) -> str:
    """An exception as one line for the summary (no traceback, no newlines)."""
    text = str(exc).splitlines()[0] if str(exc) else ""
    return f"{type(exc).__name__}: {text}"[:300]


def dumps(obj: Any) -> bytes:
    return orjson.dumps(obj, option=orjson.OPT_INDENT_2 | orjson.OPT_SERIALIZE_NUMPY | orjson.OPT_NON_STR_KEYS)


def fit_and_tabulate(job: FitJob, figures: bool = False) -> FitResult:
    """Fit and tabulate one job, and draw its report figures if asked: what a Dask worker returns.

    A fit's own error comes back as a value (status ``failed``, one line, and
    the traceback for the summary), so that Dask's retries are left for what
    they are for, a lost worker, and a deterministic failure is not run three times.
    The figures are drawn here, beside the fit, so that the workers draw them
    in parallel and the cache keeps them (:func:`jurymeter.render.report.fit_figures`).
    """
    import traceback

    try:
        report = run_fit(job)
        tables = fit_tables(job, report)
        drawn = None
        if figures:
            from jurymeter.render.report import fit_figures

            drawn = fit_figures(tables, (job.item_set, job.universe, job.population))
        return FitResult(report=report, tables=tables, error=None, trace=None, figures=drawn)
    except Exception as exc:  # reported per fit; the other fits go on
        return FitResult(report=None, tables=None, error=one_line(exc), trace=traceback.format_exc())


@dataclass(frozen=True, slots=True)
class FitResult:
    """A fit's report, tables and figures (PNG by file name, when drawn), or its error."""

    report: dict[str, Any] | None
    tables: dict[str, pl.DataFrame] | None
    error: str | None
    trace: str | None
    figures: dict[str, bytes] | None = None


def landing_sources(config: RunConfig) -> list[Any]:
    """The dump files in the landing location; none when it is unset, missing or empty."""
    from jurymeter.errors import SourceError
    from jurymeter.io.sources import discover_sources, filesystem_for

    if not config.landing:
        return []
    options = config.storage_options if config.landing.startswith("s3://") else None
    fs, path = filesystem_for(config.landing, options)
    if not fs.exists(path):
        return []
    try:
        return discover_sources([config.landing], storage_options=options)
    except SourceError:  # a landing folder with no dump in it: nothing landed tonight
        if fs.isdir(path):
            return []
        raise


CACHE = "results/cache"


def _cached(store: Store, job: FitJob) -> tuple[str, dict[str, Any]] | None:
    """The cache folder of a fit and its ``complete.json``, or ``None`` when it is not cached."""
    folder = f"{CACHE}/{job.key()}"
    try:
        return folder, store.read_json(f"{folder}/complete.json")
    except FileNotFoundError:
        return None


def read_cached_fit(store: Store, job: FitJob) -> dict[str, pl.DataFrame] | None:
    """The tables of an earlier fit with the same content key, or ``None``.

    Tables, not the JSON report, are the cache: Parquet keeps ``inf`` ("never
    reached") that JSON cannot.
    """
    cached = _cached(store, job)
    if cached is None:
        return None
    folder, marker = cached
    return {t: store.read_parquet(store.path(f"{folder}/{t}.parquet")) for t in marker["tables"]}


def read_cached_figures(store: Store, job: FitJob) -> dict[str, bytes]:
    """The report figures cached with a fit (none when it was fitted without them)."""
    cached = _cached(store, job)
    if cached is None:
        return {}
    folder, marker = cached
    return {
        name: store.fs.cat_file(store.path(f"{folder}/figures/{name}"))
        for name in marker.get("figures", [])
    }


def write_cached_fit(
    store: Store,
    job: FitJob,
    report: dict[str, Any],
    tables: dict[str, pl.DataFrame],
    figures: dict[str, bytes] | None = None,
) -> None:
    """Cache a fit's tables, report and figures under its key; ``complete.json`` last makes it visible."""
    folder = f"{CACHE}/{job.key()}"
    for table, frame in tables.items():
        store.write_parquet(f"{folder}/{table}.parquet", frame)
    for name, png in (figures or {}).items():
        store.write_bytes(f"{folder}/figures/{name}", png)
    store.write_bytes(f"{folder}/report.json", dumps(report))
    store.write_json(
        f"{folder}/complete.json",
        {"tables": sorted(tables), "figures": sorted(figures or {}), "fit": job.name},
    )


def publish_run(
    store: Store,
    run_id: str,
    *,
    config: RunConfig,
    started: str,
    ingest_report: dict[str, Any] | None,
    fits: list[dict[str, Any]],
    tables: dict[str, pl.DataFrame],
    reports: dict[str, dict[str, Any]],
    timings: dict[str, float],
    figures: dict[str, bytes] | None = None,
) -> dict[str, Any]:
    """Write ``results/<run_id>/`` (``docs/results.md``) and point ``results/latest.json`` at it.

    ``summary.json`` is written after everything else of the run folder, and
    ``latest.json`` after that, so a reader following either never sees half a run.
    ``figures`` are report figures already drawn with the fits; the report
    draws the rest.
    """
    folder = f"results/{run_id}"
    clock = time.perf_counter()
    for table, frame in tables.items():
        store.write_parquet(f"{folder}/{table}.parquet", frame)
    for key, report in reports.items():
        store.write_bytes(f"{folder}/fits/{key}.json", dumps(report))
    timings["write"] = time.perf_counter() - clock
    failed = sum(f["status"] == FIT_FAILED for f in fits)
    summary: dict[str, Any] = {
        "run_id": run_id,
        "started": started,
        "finished": None,
        "status": "partial" if failed else "complete",
        "store": store.url,
        "landing": config.landing,
        "config_digest": config.digest(),
        "ingest": ingest_report,
        "fits": fits,
        "timings": timings,
    }
    if config.report:
        clock = time.perf_counter()
        write_report(store, folder, tables, summary, figures)
        timings["report"] = time.perf_counter() - clock
    summary["timings"] = {k: round(v, 3) for k, v in timings.items()}
    summary["finished"] = dt.datetime.now(dt.UTC).isoformat(timespec="seconds")
    store.write_bytes(f"{folder}/summary.json", dumps(summary))
    store.write_json("results/latest.json", {"run_id": run_id, "path": store.path(folder)})
    return summary


def write_report(
    store: Store,
    folder: str,
    tables: dict[str, pl.DataFrame],
    summary: dict[str, Any],
    figures: dict[str, bytes] | None = None,
) -> str:
    """Render the HTML report and its figures into ``<folder>/report/``; the page's path."""
    from jurymeter.render.report import render_report

    rendered = render_report(tables, summary, figures)
    for name, png in rendered.figures.items():
        store.write_bytes(f"{folder}/report/{name}", png)
    store.write_bytes(f"{folder}/report/index.html", rendered.html.encode())
    return store.path(f"{folder}/report/index.html")


def read_run(store: Store, folder: str) -> tuple[dict[str, pl.DataFrame], dict[str, Any]]:
    """The tables and summary of a published run folder (relative to the store)."""
    summary = orjson.loads(store.fs.cat_file(store.path(f"{folder}/summary.json")))
    tables = {t: store.read_parquet(store.path(f"{folder}/{t}.parquet")) for t in TABLES}
    return tables, summary
