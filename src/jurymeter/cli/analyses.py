"""Every registered analysis's command, built from its declaration (:class:`jurymeter.analyses.commands.Command`).

The CLI iterates over :func:`jurymeter.analyses.registered` and adds one typer
command per analysis that declares one: the shared flags (``--item-set``,
``--store``, ``--storage-option``, ``--config``, ``--universe``, ``--population``,
``--json``; ``--verbose`` where the printout folds notes: ``Command.notes``), then the analysis's own, each defaulting to its field's default.
A run reads ``--config`` as ``jurymeter run`` does; a flag given on the command
line overrides the file (``[fit]`` or ``[fit.<name>]``), a flag left out changes
nothing, and its error names the flag (:func:`jurymeter.pipeline.config.load_config`).
The job is the nightly run's (:func:`jurymeter.pipeline.jobs.command_job`), and so
is the fit (:func:`jurymeter.pipeline.fit.run_fit`).
"""

from __future__ import annotations

import contextlib
import dataclasses
import inspect
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.text import Text

from jurymeter.analyses.commands import Command, Flag, command_of, field_kind
from jurymeter.cli.common import (
    ConfigOpt,
    PopulationOpt,
    StorageOpt,
    StoreOpt,
    UniverseOpt,
    run_command,
    run_config,
)
from jurymeter.errors import ConfigError, DesignError
from jurymeter.render.text import VERBOSE, err, glossary_help, print_json, safe_text

if TYPE_CHECKING:
    from jurymeter.analyses.base import Analysis
    from jurymeter.pipeline.config import RunConfig
    from jurymeter.pipeline.jobs import FitJob


def add_analysis_commands(app: typer.Typer) -> None:
    """Add the command of every registered analysis that declares one (``Analysis.command``)."""
    from jurymeter.analyses import registered

    for analysis in registered():
        command = command_of(analysis.command)
        if command is not None:
            app.command(name=analysis.name, help=command.help, epilog=glossary_help())(
                analysis_command(analysis, command))


def _shared(name: str, annotation: Any, default: Any = None) -> inspect.Parameter:
    return inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, default=default, annotation=annotation)


def _own(flag: Flag, record_type: type) -> inspect.Parameter:
    """The typer parameter of one declared flag: its type and default from the record's field."""
    default = {f.name: f.default for f in dataclasses.fields(record_type)}[flag.field]
    kind = str if flag.parse is not None else field_kind(record_type, flag.field)
    if flag.parse is not None:
        default = None  # the text given, parsed; absent: the field's default
    option = typer.Option(flag.flag, help=flag.help, show_default=default is not None)
    annotation: Any = Annotated[kind if default is not None else kind | None, option]
    return _shared(_param(flag.flag), annotation, default)


def _param(flag: str) -> str:
    return "flag_" + flag.lstrip("-").replace("-", "_")


def analysis_command(analysis: Analysis[Any, Any], command: Command) -> Callable[..., None]:
    """The typer command function of one analysis: a signature built from the declaration."""
    from jurymeter.analyses.base import FitSettings

    params = [
        inspect.Parameter("context", inspect.Parameter.POSITIONAL_OR_KEYWORD, annotation=typer.Context),
        _shared("item_set", Annotated[str, typer.Option("--item-set", help=command.item_set_help)],
                inspect.Parameter.empty),
        _shared("store", StoreOpt), _shared("storage_option", StorageOpt), _shared("config", ConfigOpt),
        _shared("universe", UniverseOpt), _shared("population", PopulationOpt),
    ]
    for flag in command.flags:
        params.append(_own(flag, FitSettings if flag.settings else analysis.options_type))
    params.append(_shared("as_json", Annotated[bool, typer.Option("--json", help="Print the full report as JSON")],
                          False))
    if command.notes:  # only a printout that folds notes into a count has something to list
        params.append(_shared("verbose", Annotated[bool, typer.Option(
            "--verbose", help="List every note of the fit (by default one line counts them)")], False))
    for output in command.outputs:
        params.append(_shared(_param(output.flag), Annotated[Path | None, typer.Option(output.flag, help=output.help)]))

    def run(context: typer.Context, **given: Any) -> None:
        # Given on the command line (or by its environment): only those override the configuration.
        sources = {p: getattr(context.get_parameter_source(p), "name", "DEFAULT") for p in given}
        typed = {p: v for p, v in given.items() if sources[p] != "DEFAULT"}
        run_command(run_analysis, analysis.name, command, given, typed)

    run.__signature__ = inspect.Signature(params)  # type: ignore[attr-defined]
    run.__annotations__ = {p.name: p.annotation for p in params}
    run.__doc__ = command.help
    run.__name__ = analysis.name
    return run


def overrides_of(name: str, command: Command, typed: Mapping[str, Any]) -> tuple[dict[str, Any], dict[str, str]]:
    """The dotted configuration keys the flags given on the command line set, and the flag that set each."""
    overrides: dict[str, Any] = {}
    flags: dict[str, str] = {}
    for flag in command.flags:
        param = _param(flag.flag)
        if param not in typed or typed[param] is None:
            continue
        value = flag.parse(typed[param]) if flag.parse is not None else typed[param]
        if value is None:  # a text meaning the field's default (``--budgets ""``)
            continue
        key = f"fit.{flag.field}" if flag.settings else f"fit.{name}.{flag.field}"
        overrides[key] = value
        flags[key] = flag.flag
    return overrides, flags


def fit_report(config: RunConfig, name: str, item_set: str, universe: str = "all", population: str = "all",
               title: str | None = None) -> tuple[FitJob, dict[str, Any]]:
    """The job of one analysis on one item set (the nightly run's: :func:`~jurymeter.pipeline.jobs.command_job`),
    fitted on the nightly run's fit path, and the analysis's report.

    Raises
    ------
    ConfigError
        The configuration, the item set or the universe or population is not right (nothing was fitted).
    DesignError
        The analysis cannot run on these data (the reason says why).
    """
    from jurymeter.analyses import analysis as analysis_named
    from jurymeter.pipeline.fit import COMMAND_SCAN_CELLS, run_fit
    from jurymeter.pipeline.jobs import command_job

    job = command_job(config, name, item_set, universe=universe, population=population)
    # The nightly run's own fit path (one scan, or item chunks: memory follows the
    # cells); one process, one fit: it may read more cells in one scan than a worker.
    # A Text, not a str: rich's spinner would read a str as markup, past the console's escaping.
    status = Text(f"fitting {safe_text(item_set)} ({name}, {job.settings.n_boot} bootstrap resamples)")
    with err.status(status) if err.is_terminal else contextlib.nullcontext():
        outcome = run_fit(job, scan_cells=COMMAND_SCAN_CELLS)[name]
    if outcome.result is None:  # the data do not allow it: the reason says what to do
        msg = f"{title or f'the {name} analysis'} cannot run on {item_set}: {outcome.reason}"
        raise DesignError(msg)
    return job, dict(analysis_named(name).report(outcome.result))


def run_analysis(name: str, command: Command, given: Mapping[str, Any], typed: Mapping[str, Any]) -> None:
    """Read the configuration as a run does (flags applied), fit through the one job, print or write JSON."""
    overrides, flags = overrides_of(name, command, typed)
    config = run_config(given.get("config"), given.get("store"), given.get("storage_option"), overrides, flags)
    job, report = fit_report(config, name, given["item_set"], given.get("universe") or "all",
                             given.get("population") or "all", command.title)
    for key in command.names:
        report[key] = job.names[key]
    for output in command.outputs:
        path = given.get(_param(output.flag))
        if path is not None:
            try:
                output.write(report, path)
            except OSError as exc:  # a folder that is not there, no permission: the user's path
                msg = f"{output.flag} {path}: cannot write ({exc.strerror or type(exc).__name__})"
                raise ConfigError(msg) from None
    if given.get("as_json") or command.show is None:
        print_json(report)
        return
    token = VERBOSE.set(bool(given.get("verbose")))
    try:
        command.show(report)
    finally:
        VERBOSE.reset(token)
