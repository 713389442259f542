"""Fit jobs: which fits a run asks for, and the content key that says when a cached fit still holds.

A fit is one item set under one judge universe and one system population,
running every registered analysis that applies to the item set's protocol. Its
key is a digest of its inputs (the committed files of its partition and of the
metadata tables: parts are immutable once committed, so their names identify
their content), its settings, and the code that shapes a fit
(:func:`code_digest`), so a code change invalidates every cached fit.
"""

from __future__ import annotations

import datetime as dt
import functools
import hashlib
import uuid
from dataclasses import asdict, dataclass, field
from importlib import metadata
from pathlib import Path
from typing import TYPE_CHECKING, Any

import orjson

from jurymeter.analyses import registered, unasked
from jurymeter.analyses.base import FitSettings, ItemSet
from jurymeter.errors import ConfigError

if TYPE_CHECKING:
    from jurymeter.io.schema import Protocol
    from jurymeter.io.store import Store
    from jurymeter.pipeline.config import RunConfig

# Folders of the package whose code does not shape a fit's numbers, tables or figures:
# the CLI (flags, printing, exit codes) and the orchestration (where fits run).
NOT_SHAPING = ("cli", "orchestration")
# Modules of the package that do not either: each analysis's command declaration
# (flags, help texts, its terminal printout), so a help text edit refits nothing.
NOT_SHAPING_MODULES = ("analyses/*/command.py",)
# Libraries whose version shapes a fit's numbers or figures.
SHAPING_LIBRARIES = ("numpy", "scipy", "polars", "pyarrow", "matplotlib")


def code_digest(root: Path | None = None) -> str:
    """SHA-256 (first 16 hex digits) of the code that shapes a fit, and the versions of the numerical libraries.

    What counts: every module of the package that shapes a fit's numbers, tables or
    figures: the statistics (``stats/``, ``cyclic/``), the analyses (their fitting,
    options records and defaults, tables, sections: ``analyses/``), the pipeline
    (``pipeline/``: the fit path, tables, cache), ``io/`` (what a scan reads),
    ``render/`` and the rest. What does not: ``cli/`` and ``orchestration/``
    (:data:`NOT_SHAPING`), and each analysis's command declaration
    (``analyses/*/command.py``, :data:`NOT_SHAPING_MODULES`: flags, help texts, the
    terminal printout): the options a flag sets are in the job's key themselves
    (:meth:`FitJob.key`), so a CLI edit refits nothing.

    ``root``: the package folder (default: this installed package, digested once per process).
    """
    if root is None:
        return _installed_code_digest()
    return _digest(root)


@functools.cache
def _installed_code_digest() -> str:
    return _digest(Path(__file__).resolve().parents[1])


def _digest(root: Path) -> str:
    digest = hashlib.sha256()
    for path in sorted(root.rglob("*.py")):
        relative = path.relative_to(root)
        if relative.parts[0] in NOT_SHAPING or any(relative.match(p) for p in NOT_SHAPING_MODULES):
            continue
        digest.update(str(relative.as_posix()).encode())
        digest.update(b"\0")
        digest.update(path.read_bytes())
        digest.update(b"\0")
    for library in SHAPING_LIBRARIES:
        try:
            digest.update(f"{library}={metadata.version(library)}\n".encode())
        except metadata.PackageNotFoundError:  # pragma: no cover - every one is a dependency
            digest.update(f"{library}=absent\n".encode())
    return digest.hexdigest()[:16]


@dataclass(frozen=True, slots=True)
class FitJob:
    """One item set under one judge universe and one system population, and the analyses to run."""

    store: str
    storage_options: tuple[tuple[str, str], ...]
    item_set: str
    universe: str
    population: str
    settings: FitSettings
    analyses: tuple[tuple[str, Any], ...]  # (analysis name, its options), in registry order
    inputs: tuple[str, ...]  # committed files the fit reads (their names identify content)
    protocol: Protocol = "pointwise"
    code: str = field(default_factory=code_digest)

    @property
    def name(self) -> str:
        return f"{self.item_set} / {self.universe} / {self.population}"

    @property
    def names(self) -> dict[str, str]:
        return {"item_set": self.item_set, "universe": self.universe, "population": self.population}

    def key(self) -> str:
        """Content key: inputs, settings, options and code (not where the store is)."""
        shaping = {k: v for k, v in asdict(self).items() if k not in ("store", "storage_options")}
        digest = hashlib.sha256(orjson.dumps(shaping, option=orjson.OPT_SORT_KEYS))
        return digest.hexdigest()[:32]


@dataclass(frozen=True, slots=True)
class Skipped:
    """An item set (or an analysis of it) the run cannot fit, and why: said once per run."""

    item_set: str
    protocol: str
    reason: str
    analysis: str | None = None


@dataclass(frozen=True, slots=True)
class Plan:
    """A run's fits, and what it cannot fit."""

    jobs: list[FitJob]
    skipped: list[Skipped]


def new_run_id() -> str:
    stamp = dt.datetime.now(dt.UTC).strftime("%Y%m%dT%H%M%SZ")
    return f"{stamp}-{uuid.uuid4().hex[:8]}"


def fit_settings(config: RunConfig, universe: str, population: str) -> FitSettings:
    """The shared settings of one fit: ``[fit]`` (flags applied) and the universe's judges, the population's systems."""
    fit = config.fit
    return FitSettings(
        judges=config.judges_of(universe), systems=config.systems_of(population),
        n_boot=fit.n_boot, seed=fit.seed, target=fit.target,
        generations=fit.generations, interval=fit.interval,
    )


def fit_job(store: Store, config: RunConfig, item_set: str, protocol: Protocol, universe: str, population: str,
            analyses: tuple[tuple[str, Any], ...], inputs: tuple[str, ...] = ()) -> FitJob:
    """The one way a fit's job is built, for the nightly plan and every analysis command alike.

    Its settings are ``[fit]`` with the universe's judges and the population's
    systems (:func:`fit_settings`); ``analyses`` pairs each analysis with its options
    (:func:`analysis_options`: ``[fit.<name>]``, flags applied).
    """
    return FitJob(
        store=store.url,
        storage_options=tuple(sorted(config.storage_options.items())),
        item_set=item_set,
        universe=universe,
        population=population,
        settings=fit_settings(config, universe, population),
        analyses=analyses,
        inputs=inputs,
        protocol=protocol,
    )


def named_levels(config: RunConfig, universe: str, population: str) -> dict[str, tuple[str, ...]]:
    """The judge ids of ``--universe`` and the system ids of ``--population`` by record column (none for "all").

    Raises
    ------
    ConfigError
        A name the configuration's ``[universes]`` or ``[populations]`` does not define (the flag named).
    """
    levels: dict[str, tuple[str, ...]] = {}
    for kind, chosen, defined, column in (("universe", universe, config.universes, "judge_id"),
                                          ("population", population, config.populations, "system_id")):
        if chosen == "all":
            continue
        if chosen not in defined:
            msg = (f"--{kind} {chosen!r}: no {kind} {chosen!r} in the config file "
                   f"(known: {', '.join(sorted(defined)) or 'none'}; [{kind}s] defines them)")
            raise ConfigError(msg)
        levels[column] = defined[chosen]
    return levels


def command_job(config: RunConfig, name: str, item_set: str, *, universe: str = "all",
                population: str = "all") -> FitJob:
    """The fit an analysis's command runs: one item set, the analysis ``name``, read from ``config`` as a run reads it.

    ``config`` is the run configuration of ``--config`` with the command's flags
    applied as overrides (``store``, ``storage_options``, ``[fit]``, ``[fit.<name>]``); the universe and population
    are names of its ``[universes]`` and ``[populations]``. Everything is checked
    here, before any fit: the store holds the item set in the analysis's protocol,
    the names are defined, and their ids occur in the item set.

    Raises
    ------
    ConfigError
        The item set is missing, a name is undefined, or names an id the item set lacks.
    """
    from jurymeter.analyses import analysis as analysis_named
    from jurymeter.io.store import Store

    store = Store(config.store, config.storage_options)
    analysis = analysis_named(name)
    protocol: Protocol = "pairwise" if analysis.protocols == ("pairwise",) else "pointwise"
    store.check()
    present = store.item_sets(protocol)
    if item_set not in present:
        other: Protocol = "pairwise" if protocol == "pointwise" else "pointwise"
        hint = f"; {item_set!r} is a {other} item set" if item_set in store.item_sets(other) else ""
        msg = f"no {protocol} item set {item_set!r} in {store.url} (item sets: {', '.join(present) or 'none'}{hint})"
        raise ConfigError(msg)
    named_levels(config, universe, population)
    check_levels(store, config, [(protocol, item_set)], universes=(universe,), populations=(population,),
                 flag=True)
    return fit_job(store, config, item_set, protocol, universe, population,
                   ((name, analysis_options(config, analysis)),))


def enabled_analyses(config: RunConfig) -> list[Any]:
    """The registered analyses the configuration runs: ``[fit] analyses``, or when it is empty every
    analysis that runs by default (:attr:`~jurymeter.analyses.base.FitPart.by_default`) and every one
    whose ``[fit.<name>]`` table the configuration gives."""
    if config.fit.analyses:
        return [a for a in registered() if a.name in set(config.fit.analyses)]
    return list(unasked(config.fit.options))


def analysis_options(config: RunConfig, analysis: Any) -> Any:
    return config.fit.options.get(analysis.name) or analysis.default_options()


def plan_fits(store: Store, config: RunConfig) -> Plan:
    """Every fit the configuration asks for, over the item sets present in the store.

    An item set to which no enabled analysis applies (a pairwise one today) is
    not fitted; the plan names it with the reason.

    Raises
    ------
    ConfigError
        An item set named in the configuration is not in the store, or a
        universe or population names a judge or system id that no planned item
        set holds (a typo would otherwise fit fewer judges without a word).
    """
    analyses = enabled_analyses(config)
    # One listing of the committed files serves every item set (each listing is
    # several requests on S3).
    by_set: dict[tuple[Protocol, str], list[str]] = {}
    for protocol in ("pointwise", "pairwise"):
        for f in store.data_files(protocol):
            by_set.setdefault((protocol, str(f.item_set)), []).append(f.path[len(store.root) + 1 :])
    present = sorted({name for _, name in by_set})
    wanted = list(config.fit.item_sets) or present
    missing = [s for s in wanted if s not in present]
    if missing:
        msg = (f"item set(s) {', '.join(map(repr, missing))} not in {store.url} "
               f"(present: {', '.join(present) or 'none'})")
        raise ConfigError(msg)
    metadata_files = sorted(
        f.path[len(store.root) + 1 :]
        for protocol in ("systems", "judges")
        for f in store.data_files(protocol)
    )
    quarantine_files: list[str] | None = None  # listed once, when an analysis reads the judge health
    jobs: list[FitJob] = []
    skipped: list[Skipped] = []
    planned: list[tuple[Protocol, str]] = []
    # Pointwise item sets first, then pairwise, each by name (the order of the plan and the summary).
    order = {"pointwise": 0, "pairwise": 1}
    for (protocol, item_set), files in sorted(by_set.items(), key=lambda kv: (order[kv[0][0]], kv[0][1])):
        if item_set not in wanted:
            continue
        item = ItemSet(protocol=protocol, name=item_set)
        runs = []
        reasons = []
        for analysis in analyses:
            why = analysis.applies(item)
            if why is None:
                runs.append((analysis.name, analysis_options(config, analysis)))
            else:
                reasons.append(why)
        if not runs:
            reason = "; ".join(reasons) if reasons else "no analysis is enabled"
            skipped.append(Skipped(item_set, protocol, f"no analysis applies ({reason})"))
            continue
        planned.append((protocol, item_set))
        inputs = [*sorted(files), *metadata_files]
        if any(analysis.reads_judge_health for analysis in analyses if analysis.applies(item) is None):
            if quarantine_files is None:
                quarantine_files = sorted(p[len(store.root) + 1 :] for p in store.quarantine_files())
            inputs += quarantine_files
        for universe in config.fit.universes:
            for population in config.fit.populations:
                jobs.append(fit_job(store, config, item_set, protocol, universe, population, tuple(runs),
                                    tuple(inputs)))
    check_levels(store, config, planned)
    return Plan(jobs=jobs, skipped=skipped)


def check_levels(store: Store, config: RunConfig, planned: list[tuple[Protocol, str]], *,
                 universes: tuple[str, ...] | None = None, populations: tuple[str, ...] | None = None,
                 flag: bool = False) -> None:
    """Every judge of a used universe and every system of a used population occurs in the planned data.

    ``universes``/``populations``: the names used (default: ``[fit] universes`` and
    ``[fit] populations``); ``flag``: they were chosen with ``--universe`` and
    ``--population`` (the error names the flag). Each id is checked whether or not
    the fit would select anything by it: a typo never fits fewer judges without a word.
    """
    import polars as pl

    universes = config.fit.universes if universes is None else universes
    populations = config.fit.populations if populations is None else populations
    used = [
        ("judge_id", "universe", name, config.universes[name]) for name in universes if name != "all"
    ] + [
        ("system_id", "population", name, config.populations[name]) for name in populations if name != "all"
    ]
    if not used or not planned:
        return
    seen: dict[str, set[str]] = {"judge_id": set(), "system_id": set()}
    for protocol, item_set in planned:
        columns = ["judge_id", "system_id"] if protocol == "pointwise" else ["judge_id"]
        frame = store.scan(protocol, item_set).select(columns).unique().collect()
        for column in columns:
            seen[column].update(frame[column].drop_nulls().to_list())
        if protocol == "pairwise":
            pairs = store.scan(protocol, item_set).select(
                pl.concat_list("system_a", "system_b").explode().unique().alias("system_id")
            ).collect()
            seen["system_id"].update(pairs["system_id"].drop_nulls().to_list())
    where = (f"item set {planned[0][1]!r}" if len(planned) == 1 else "no planned item set")
    for column, kind, name, ids in used:
        unknown = [i for i in ids if i not in seen[column]]
        if unknown:
            known = sorted(seen[column])
            shown = ", ".join(known[:20]) + (", ..." if len(known) > 20 else "")
            verb = "lacks" if len(planned) == 1 else "holds"
            msg = (f"{f'--{kind} {name!r}: ' if flag else ''}{kind} {name!r} names {column.removesuffix('_id')} "
                   f"id(s) {', '.join(map(repr, unknown))} that {where} {verb} (known: {shown}; "
                   f"[{kind}s] {name} in the config file lists them)")
            raise ConfigError(msg)


def check_before_run(store: Store, config: RunConfig, *, landed: bool) -> bool:
    """What a run's plan checks (:func:`plan_fits`), on the store as it is, before Prefect or Dask start.

    ``landed``: the landing location holds dump files, which the run ingests before
    it plans. Returns ``True`` when the plan holds, and ``False`` when it cannot be
    told before those files are ingested: an item set named or an id of a universe or
    population the store lacks (or, with a universe or population used, a store with
    none of the item sets yet), which a landed file may bring.

    Raises
    ------
    ConfigError
        Nothing landed, and the plan would fail: the error the run would give after starting.
    """
    try:
        plan = plan_fits(store, config)
    except ConfigError:
        if landed:
            return False
        raise
    levels_used = any(n != "all" for n in (*config.fit.universes, *config.fit.populations))
    return not (landed and levels_used and not plan.jobs)
