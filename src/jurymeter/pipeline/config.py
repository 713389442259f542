"""The run configuration: one TOML file, overridden by environment variables, then CLI flags.

Everything has a default, so ``jurymeter run`` works with nothing configured
(the embedded default: a local store, a LocalCluster, a temporary Prefect
server). The keys are documented in ``README.md`` (Configuration) and in
:class:`RunConfig`.
"""

from __future__ import annotations

import hashlib
import os
import tomllib
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import orjson

from jurymeter.analyses.commands import Rule
from jurymeter.errors import ConfigError

if TYPE_CHECKING:
    from _typeshed import DataclassInstance

    from jurymeter.stats.blocks import GenerationMode
    from jurymeter.stats.bootstrap import IntervalMethod

# A dataclass of settings, read from its TOML table by _section.
Settings = TypeVar("Settings", bound="DataclassInstance")

DEFAULT_STORE = "jurymeter-store"
DEFAULT_LANDING = "jurymeter-landing"
DEFAULT_HOME = ".jurymeter"

# Environment variable -> dotted config key. Flags override these, these override the file.
ENVIRONMENT = {
    "JURYMETER_STORE": "store",
    "JURYMETER_LANDING": "landing",
    "JURYMETER_HOME": "home",
    "DASK_SCHEDULER_ADDRESS": "dask.address",
    "JURYMETER_DASK_WORKERS": "dask.workers",
    "JURYMETER_N_BOOT": "fit.n_boot",
}


@dataclass(frozen=True, slots=True)
class DaskConfig:
    """Where fits run: an existing scheduler, or a LocalCluster started for the run."""

    address: str | None = None  # tcp://host:8786; None starts a LocalCluster
    workers: int = 2  # LocalCluster worker processes
    threads_per_worker: int = 1
    retries: int = 2  # per fit, on any error (a lost worker included)


@dataclass(frozen=True, slots=True)
class FitConfig:
    """Which fits to run and how (the shared settings: :class:`jurymeter.analyses.base.FitSettings`).

    ``analyses``: the registered analyses to run (empty: those that run unasked, :func:`jurymeter.analyses.unasked`);
    ``options``: each analysis's own options, from its ``[fit.<name>]`` table.
    """

    item_sets: tuple[str, ...] = ()  # empty: every item set in the store
    universes: tuple[str, ...] = ("all",)  # names from [universes]; "all" = every judge
    populations: tuple[str, ...] = ("all",)  # names from [populations]; "all" = every system
    n_boot: int = 800
    seed: int = 0
    target: float = 0.8
    generations: GenerationMode = "average"  # checked on reading (as FitSettings checks it)
    interval: IntervalMethod = "pivotal"  # checked on reading (as FitSettings checks it)
    cyclic: bool = True  # CyclicJudge where the data have generations
    analyses: tuple[str, ...] = ()
    options: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class AlertConfig:
    """``[alerts]``: when a run's numbers are an alert on their own, not only on change (issue 24, point 2).

    ``position_margin``: points of slot-A advantage by which a judge's interval
    must clear 0; ``failed_share``: a judge's share of failed judgments at or
    above which it is an alert; ``max_mdd``: an MDD95 (points) above which a fit
    is an alert (``None``: off). The reversal bound is fixed at 1/2, what a coin
    gives; the ceiling's target is ``[fit] target``.
    """

    position_margin: float = 5.0
    failed_share: float = 0.05
    max_mdd: float | None = None


@dataclass(frozen=True, slots=True)
class GateConfig:
    """``[gates]``: the limits ``jurymeter check`` (and the end of ``run``) holds a run to; ``None``: not checked.

    ``max_mdd``: a fit's MDD95 (points) at most this; ``min_erho2``: a fit's
    E rho^2 at least this; ``max_reversal``: a pairwise judge's reversal rate
    (0-1) at most this; ``max_failure``: a judge's share of failed judgments
    (0-1) at most this.
    """

    max_mdd: float | None = None
    min_erho2: float | None = None
    max_reversal: float | None = None
    max_failure: float | None = None


# What [alerts]' and [gates]' numbers admit (jurymeter.analyses.commands rules: an error names the key).
ALERT_RULES = {"position_margin": Rule(low=0), "failed_share": Rule(low=0, high=1, open=True),
               "max_mdd": Rule(low=0, open=True)}
GATE_RULES = {"max_mdd": Rule(low=0, open=True), "min_erho2": Rule(low=0, high=1),
              "max_reversal": Rule(low=0, high=1), "max_failure": Rule(low=0, high=1)}


@dataclass(frozen=True, slots=True)
class RunConfig:
    """The whole configuration of a nightly run."""

    store: str = DEFAULT_STORE
    landing: str | None = DEFAULT_LANDING  # None or a missing folder: nothing to ingest
    home: str = DEFAULT_HOME  # Prefect's home (database, logs) and other run state
    # Text values (s3fs_options parses booleans and numbers), and tables as they are (``client_kwargs``).
    storage_options: dict[str, Any] = field(default_factory=dict)
    scale: tuple[float, float] | None = None  # declared score range of ingested dumps
    column_map: dict[str, str] = field(default_factory=dict)
    log_format: str = "auto"  # `format`: how landed dumps are read (io.adapters; "auto" recognises each)
    baseline: str | None = None  # Arena-Hard-Auto v0.1's baseline (its logs do not name it)
    universes: dict[str, tuple[str, ...]] = field(default_factory=dict)
    populations: dict[str, tuple[str, ...]] = field(default_factory=dict)
    fit: FitConfig = field(default_factory=FitConfig)
    dask: DaskConfig = field(default_factory=DaskConfig)
    report: bool = True
    alerts: AlertConfig = field(default_factory=AlertConfig)
    gates: GateConfig = field(default_factory=GateConfig)

    def digest(self) -> str:
        """SHA-256 of the resolved configuration, credentials left out."""
        public = asdict(self)
        public["storage_options"] = sorted(public["storage_options"])  # names only
        return hashlib.sha256(orjson.dumps(public, option=orjson.OPT_SORT_KEYS)).hexdigest()

    def judges_of(self, universe: str) -> tuple[str, ...] | None:
        return None if universe == "all" else self.universes[universe]

    def systems_of(self, population: str) -> tuple[str, ...] | None:
        return None if population == "all" else self.populations[population]


def load_config(
    path: Path | str | None = None,
    *,
    environ: Mapping[str, str] | None = None,
    overrides: Mapping[str, Any] | None = None,
    flags: Mapping[str, str] | None = None,
) -> RunConfig:
    """Read ``path`` (or ``$JURYMETER_CONFIG``), then apply the environment and ``overrides``.

    ``overrides`` maps dotted keys (``"dask.address"``, ``"fit.pairwise.n_boot"``)
    to values; ``None`` values are ignored, so CLI flags that were not given change
    nothing. ``flags`` names the flag that set a dotted key (``{"fit.n_boot":
    "--boot"}``): an error in that value names the flag, not the file.

    Raises
    ------
    ConfigError
        The file is missing or not TOML, a key is unknown, or a value has the wrong
        type or is outside what it admits (one line naming the key, the variable or the flag).
    """
    env = os.environ if environ is None else environ
    path = path or env.get("JURYMETER_CONFIG") or None
    settings = read_toml(path) if path is not None else {}
    given: dict[str, str] = {}  # dotted key -> what the user wrote, where not the file
    for variable, key in ENVIRONMENT.items():
        if env.get(variable):
            _set(settings, key, env[variable])
            given[key] = f"${variable}"
    for key, value in (overrides or {}).items():
        if value is not None:
            _set(settings, key, value)
            given[key] = (flags or {}).get(key, key)
    return _build(settings, str(path) if path else "the configuration", given)


def read_toml(path: Path | str) -> dict[str, Any]:
    """The TOML file at ``path`` as a dict, or a :class:`ConfigError` naming the file."""
    try:
        return tomllib.loads(Path(path).read_text())
    except FileNotFoundError as exc:
        msg = f"config file not found: {path}"
        raise ConfigError(msg) from exc
    except tomllib.TOMLDecodeError as exc:
        msg = f"config file {path} is not valid TOML: {exc}"
        raise ConfigError(msg) from exc


def _set(settings: dict[str, Any], dotted: str, value: Any) -> None:
    *parents, last = dotted.split(".")
    node = settings
    for name in parents:
        node = node.setdefault(name, {})
    node[last] = value


_TOP = {"store", "landing", "home", "storage_options", "scale", "map", "format", "baseline", "universes",
        "populations", "fit", "dask", "report", "alerts", "gates"}


def _build(settings: dict[str, Any], where: str, given: Mapping[str, str] | None = None) -> RunConfig:
    given = given or {}
    unknown = sorted(set(settings) - _TOP)
    if unknown:
        msg = f"{where}: unknown key(s) {', '.join(unknown)} (known: {', '.join(sorted(_TOP))})"
        raise ConfigError(msg)
    fit = _fit_section(settings.get("fit", {}), where, given)
    dask = _dask_section(settings.get("dask", {}), where, given)
    universes = _levels(settings.get("universes", {}), f"{where} [universes]")
    populations = _levels(settings.get("populations", {}), f"{where} [populations]")
    for name in fit.universes:
        if name != "all" and name not in universes:
            msg = f"{where}: [fit] universes names {name!r}, which [universes] does not define"
            raise ConfigError(msg)
    for name in fit.populations:
        if name != "all" and name not in populations:
            msg = f"{where}: [fit] populations names {name!r}, which [populations] does not define"
            raise ConfigError(msg)
    scale = settings.get("scale")
    if scale is not None:
        if not (isinstance(scale, list | tuple) and len(scale) == 2):
            msg = f"{where}: scale must be [low, high]"
            raise ConfigError(msg)
        scale = (float(scale[0]), float(scale[1]))
    from jurymeter.io.adapters import FORMATS

    log_format = settings.get("format", "auto")
    if log_format not in FORMATS:
        msg = f"{where}: format must be one of {', '.join(FORMATS)}, got {log_format!r}"
        raise ConfigError(msg)
    baseline = settings.get("baseline")
    landing = settings.get("landing", DEFAULT_LANDING)
    return RunConfig(
        store=str(settings.get("store", DEFAULT_STORE)),
        landing=str(landing) if landing else None,
        home=str(settings.get("home", DEFAULT_HOME)),
        storage_options={str(k): v if isinstance(v, dict) else str(v)
                         for k, v in settings.get("storage_options", {}).items()},
        scale=scale,
        column_map={str(k): str(v) for k, v in settings.get("map", {}).items()},
        log_format=str(log_format),
        baseline=str(baseline) if baseline is not None else None,
        universes=universes,
        populations=populations,
        fit=fit,
        dask=dask,
        report=_as(settings.get("report", True), bool, f"{where}: report"),
        alerts=_limits_section(settings.get("alerts", {}), AlertConfig(), ALERT_RULES, f"{where} [alerts]",
                               "alerts", given),
        gates=_limits_section(settings.get("gates", {}), GateConfig(), GATE_RULES, f"{where} [gates]",
                              "gates", given),
    )


def _limits_section(table: Any, default: Settings, rules: Mapping[str, Rule], where: str, name: str,
                    given: Mapping[str, str]) -> Settings:
    """``[alerts]`` or ``[gates]``: numbers (or none), each checked by its rule; an error names the key."""
    from jurymeter.analyses.commands import build

    def key(field: str) -> str:
        return given.get(f"{name}.{field}", f"{where} {field}")

    if not isinstance(table, dict):
        msg = f"{where} must be a table"
        raise ConfigError(msg)
    values = {**asdict(default), **_values(table, default, where, key)}
    set_rules = {f: rule for f, rule in rules.items() if values.get(f) is not None}  # None: the limit is off
    return build(type(default), values, set_rules, key)  # type: ignore[no-any-return]


def _fit_section(table: Any, path: str, given: Mapping[str, str]) -> FitConfig:
    """``[fit]``: the shared settings, checked here (not on the workers), and ``[fit.<analysis>]`` tables.

    The settings are checked as :class:`~jurymeter.analyses.base.FitSettings` checks
    them and each analysis's options as its command's rules say
    (:func:`jurymeter.analyses.commands.build`): an error names the key as written
    (``c.toml [fit] n_boot``), or the flag or variable that set it (``given``).
    """
    from jurymeter.analyses import registered, unasked
    from jurymeter.analyses.base import FitSettings
    from jurymeter.analyses.commands import FIT_SETTINGS_RULES, build, command_of

    where = f"{path} [fit]"
    if not isinstance(table, dict):
        msg = f"{where} must be a table"
        raise ConfigError(msg)
    known = {a.name: a for a in registered()}
    subtables = {k: v for k, v in table.items() if isinstance(v, dict)}
    for name in subtables:
        if name not in known:
            msg = f"{where}: [fit.{name}] names no analysis (analyses: {', '.join(known)})"
            raise ConfigError(msg)

    def fit_key(field: str) -> str:
        return given.get(f"fit.{field}", f"{where} {field}")

    fit = _section({k: v for k, v in table.items() if k not in subtables}, FitConfig(), where, fit_key)
    shared = {f: getattr(fit, f) for f in FIT_SETTINGS_RULES}
    build(FitSettings, shared, FIT_SETTINGS_RULES, fit_key)
    unknown = [a for a in fit.analyses if a not in known]
    if unknown:
        msg = f"{where}: analyses names {', '.join(map(repr, unknown))} (registered: {', '.join(known)})"
        raise ConfigError(msg)
    options = {}
    for name, values in subtables.items():
        default = known[name].default_options()
        command = command_of(known[name].command)
        rules = command.option_rules() if command else {}

        def option_key(field: str, name: str = name) -> str:
            return given.get(f"fit.{name}.{field}", f"{path} [fit.{name}] {field}")

        typed = _values(values, default, f"{path} [fit.{name}]", option_key)
        options[name] = build(type(default), typed, rules, option_key)
    if not fit.cyclic:  # the older key for leaving CyclicJudge out: the same as naming the others
        default = tuple(a.name for a in unasked(subtables))
        fit = replace(fit, analyses=tuple(a for a in (fit.analyses or default) if a != "cyclic"))
    return replace(fit, options=options)


# What [dask]'s numbers admit (a LocalCluster of no worker would fail only once started).
DASK_RULES = {"workers": Rule(low=1, integer=True), "threads_per_worker": Rule(low=1, integer=True),
              "retries": Rule(low=0, integer=True)}


def _dask_section(table: Any, path: str, given: Mapping[str, str]) -> DaskConfig:
    """``[dask]``, each number checked (:data:`DASK_RULES`); an error names the key, variable or flag."""
    from jurymeter.analyses.commands import build

    def key(field: str) -> str:
        return given.get(f"dask.{field}", f"{path} [dask] {field}")

    return build(DaskConfig, _values(table, DaskConfig(), f"{path} [dask]", key), DASK_RULES, key)  # type: ignore[no-any-return]


def _levels(table: Any, where: str) -> dict[str, tuple[str, ...]]:
    if not isinstance(table, dict):
        msg = f"{where} must be a table of name = [ids]"
        raise ConfigError(msg)
    out = {}
    for name, ids in table.items():
        if not isinstance(ids, list) or not ids or not all(isinstance(i, str) for i in ids):
            msg = f"{where}: {name} must be a non-empty list of ids"
            raise ConfigError(msg)
        out[str(name)] = tuple(ids)
    return out


def _section(table: object, default: Settings, where: str,
             key_of: Callable[[str], str] | None = None) -> Settings:
    """A dataclass of settings from its TOML table: known keys only, types following the fields.

    A tuple-valued setting takes a list (or a tuple, from a flag): of integers where
    the field holds integers (``budgets``), else of names (a comma-separated string
    is split). ``key_of`` names a field in an error (default: ``where: field``).
    """
    return replace(default, **_values(table, default, where, key_of))


def _values(table: object, default: DataclassInstance, where: str,
            key_of: Callable[[str], str] | None = None) -> dict[str, object]:
    """The values of a TOML table as the fields of ``default``'s dataclass type them (:func:`_section`)."""
    from jurymeter.analyses.commands import field_kind, tuple_of_ints

    def key(name: str) -> str:
        return key_of(name) if key_of is not None else f"{where}: {name}"

    if not isinstance(table, dict):
        msg = f"{where} must be a table"
        raise ConfigError(msg)
    known = {f: getattr(default, f) for f in default.__dataclass_fields__}
    unknown = sorted(set(table) - set(known))
    if unknown:
        msg = f"{where}: unknown key(s) {', '.join(unknown)} (known: {', '.join(sorted(known))})"
        raise ConfigError(msg)
    values: dict[str, object] = {}
    for name, value in table.items():
        current = known[name]
        kind = tuple if isinstance(current, tuple) else field_kind(type(default), name)
        if kind is tuple and tuple_of_ints(type(default), name):
            if not isinstance(value, list | tuple) or not all(
                    isinstance(v, int) and not isinstance(v, bool) for v in value):
                msg = f"{key(name)} must be a list of integers, got {value!r}"
                raise ConfigError(msg)
            values[name] = tuple(value)
        elif kind is tuple:
            if isinstance(value, str):
                value = [v.strip() for v in value.split(",") if v.strip()]
            if not isinstance(value, list | tuple) or not all(isinstance(v, str) for v in value):
                msg = f"{key(name)} must be a list of names"
                raise ConfigError(msg)
            values[name] = tuple(value)
        elif name == "address":
            values[name] = str(value) if value else None
        elif current is None and value is None:
            values[name] = None
        else:
            values[name] = _as(value, kind, key(name))
    return values


def _as(value: Any, kind: type, where: str) -> Any:
    """``value`` as ``kind``; strings (from the environment) are parsed."""
    if isinstance(value, kind) and not (kind is int and isinstance(value, bool)):
        return value
    if isinstance(value, str):
        text = value.strip().lower()
        try:
            if kind is bool and text in ("1", "true", "yes", "on", "0", "false", "no", "off"):
                return text in ("1", "true", "yes", "on")
            if kind is int:
                return int(text)
            if kind is float:
                return float(text)
        except ValueError:
            pass
    if kind is float and isinstance(value, int) and not isinstance(value, bool):
        return float(value)
    msg = f"{where} must be {kind.__name__}, got {value!r}"
    raise ConfigError(msg)
