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

from jurymeter.analyses import registered
from jurymeter.analyses.base import FitSettings, ItemSet
from jurymeter.errors import ConfigError

if TYPE_CHECKING:
    from jurymeter.io.schema import Protocol
    from jurymeter.io.store import Store
    from jurymeter.pipeline.config import RunConfig

# Folders of the package whose code does not shape a fit's numbers, tables or figures.
NOT_SHAPING = ("cli", "orchestration")
# Libraries whose version shapes a fit's numbers or figures.
SHAPING_LIBRARIES = ("numpy", "scipy", "polars", "pyarrow", "matplotlib")


def code_digest(root: Path | None = None) -> str:
    """SHA-256 (first 16 hex digits) of the code that shapes a fit: the package's sources
    outside ``cli/`` and ``orchestration/``, and the versions of the numerical libraries.

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
        if relative.parts[0] in NOT_SHAPING:
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
    fit = config.fit
    return FitSettings(
        judges=config.judges_of(universe), systems=config.systems_of(population),
        n_boot=fit.n_boot, seed=fit.seed, target=fit.target,
        generations=fit.generations, interval=fit.interval,
    )


def enabled_analyses(config: RunConfig) -> list[Any]:
    """The registered analyses the configuration runs (``[fit] analyses``; empty: all of them)."""
    wanted = set(config.fit.analyses) if config.fit.analyses else None
    return [a for a in registered() if wanted is None or a.name in wanted]


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
                jobs.append(FitJob(
                    store=store.url,
                    storage_options=tuple(sorted(config.storage_options.items())),
                    item_set=item_set,
                    universe=universe,
                    population=population,
                    settings=fit_settings(config, universe, population),
                    analyses=tuple(runs),
                    inputs=tuple(inputs),
                    protocol=protocol,
                ))
    _check_levels(store, config, planned)
    return Plan(jobs=jobs, skipped=skipped)


def _check_levels(store: Store, config: RunConfig, planned: list[tuple[Protocol, str]]) -> None:
    """Every judge of a used universe and every system of a used population occurs in the planned data."""
    import polars as pl

    used = [
        ("judge_id", "universe", name, config.universes[name]) for name in config.fit.universes if name != "all"
    ] + [
        ("system_id", "population", name, config.populations[name])
        for name in config.fit.populations if name != "all"
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
    for column, kind, name, ids in used:
        unknown = [i for i in ids if i not in seen[column]]
        if unknown:
            known = sorted(seen[column])
            shown = ", ".join(known[:20]) + (", ..." if len(known) > 20 else "")
            msg = (f"{kind} {name!r} names {column.removesuffix('_id')} id(s) "
                   f"{', '.join(map(repr, unknown))} that no planned item set holds (known: {shown})")
            raise ConfigError(msg)
