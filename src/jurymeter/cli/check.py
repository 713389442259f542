"""``jurymeter check``: hold a published run to limits, for a CI (issue 24, point 3).

Exit 0 when every gate passes, :data:`GATE_FAILED` when one failed (each named
on stderr: the fit or judge, its value and the limit), 1 for a user error (an
unknown run, a bad number: one line, no traceback). ``--json`` prints the result
of :func:`jurymeter.pipeline.alerts.check_gates` on stdout.
"""

from __future__ import annotations

from dataclasses import asdict
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import orjson
import typer

from jurymeter.cli.common import ConfigOpt, StorageOpt, StoreOpt, run_command, run_config
from jurymeter.errors import ConfigError
from jurymeter.render.text import err, out, safe_text

if TYPE_CHECKING:
    from jurymeter.pipeline.config import GateConfig

# The exit status of a failed gate (1, 3, 4, 5 and 6 say other things: cli/app.py's docstring).
GATE_FAILED = 7
GATE_FLAGS = {"gates.max_mdd": "--max-mdd", "gates.min_erho2": "--min-erho2",
              "gates.max_reversal": "--max-reversal", "gates.max_failure": "--max-failure"}


def check(
    results: Annotated[str, typer.Argument(help="A run id, a run folder (results/<run_id>) or 'latest'")] = "latest",
    max_mdd: Annotated[float | None, typer.Option("--max-mdd", help="Fail a fit whose MDD95 (points) is above this")] = None,
    min_erho2: Annotated[float | None, typer.Option("--min-erho2", help="Fail a fit whose E rho^2 is below this")] = None,
    max_reversal: Annotated[
        float | None, typer.Option("--max-reversal", help="Fail a pairwise judge whose reversal rate (0-1) is above this")
    ] = None,
    max_failure: Annotated[
        float | None, typer.Option("--max-failure", help="Fail a judge whose share of failed judgments (0-1) is above this")
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the result as JSON")] = False,
    config: ConfigOpt = None,
    store: StoreOpt = None,
    storage_option: StorageOpt = None,
) -> None:
    """Hold a published run to limits (these flags, else the gates table of --config).

    Exit 0 when every gate passes, 7 when one failed (each named: fit or judge, value, limit), 1 for a user error.
    """
    limits = {"gates.max_mdd": max_mdd, "gates.min_erho2": min_erho2, "gates.max_reversal": max_reversal,
              "gates.max_failure": max_failure}
    result = run_command(_check, results, limits, config, store, storage_option)
    if as_json:
        out.print(orjson.dumps(result, option=orjson.OPT_INDENT_2).decode(), markup=False, soft_wrap=True)
    else:
        _print(result)
    if not result["passed"]:
        raise typer.Exit(GATE_FAILED)


def _check(results: str, limits: dict[str, float | None], config: Path | None, store: str | None,
           storage_option: list[str] | None) -> dict[str, Any]:
    from jurymeter.io.store import Store
    from jurymeter.pipeline.alerts import check_gates
    from jurymeter.pipeline.publish import read_run

    settings = run_config(config, store, storage_option, limits, GATE_FLAGS)
    if all(v is None for v in vars_of(settings.gates).values()):
        msg = "no gate to check: give --max-mdd, --min-erho2, --max-reversal or --max-failure, or [gates] in --config"
        raise ConfigError(msg)
    target = Store(settings.store, settings.storage_options)
    folder = run_folder(target, results)
    try:
        tables, summary = read_run(target, folder)
    except FileNotFoundError as exc:
        msg = f"not a published run: {target.path(folder)} (no summary.json)"
        raise ConfigError(msg) from exc
    return check_gates(tables, summary, settings.gates)


def vars_of(gates: GateConfig) -> dict[str, float | None]:
    """Each gate's limit by name (``None``: not checked)."""
    return asdict(gates)


def run_folder(target: Any, results: str) -> str:
    """The store-relative folder of ``latest``, a run id or a run folder."""
    if results == "latest":
        try:
            latest = target.read_json("results/latest.json")
        except FileNotFoundError as exc:
            msg = f"no run in {target.url} yet (results/latest.json is missing)"
            raise ConfigError(msg) from exc
        return f"results/{latest['run_id']}"
    folder = results.rstrip("/")
    if folder.startswith(target.root + "/"):
        folder = folder[len(target.root) + 1:]
    return folder if folder.startswith("results/") else f"results/{folder}"


def _print(result: dict[str, Any]) -> None:
    from jurymeter.pipeline.alerts import failure_lines

    for line in failure_lines(result):
        err.print(line, markup=False)
    for gate in result["gates"]:
        state = "failed" if gate["failures"] else "passed"
        out.print(f"{gate['gate']} {gate['limit']:g}: {state} ({len(gate['failures'])} of {gate['checked']} failed)",
                  markup=False)
    out.print(f"run {safe_text(result.get('run_id'))}: {'all gates passed' if result['passed'] else 'gates failed'}",
              markup=False)


def gates_at_end_of_run(config: Path | None, overrides: dict[str, Any], summary: dict[str, Any],
                        flags: dict[str, str]) -> None:
    """``[gates]`` of the run's configuration held to the run just published; exit 7 naming each failure."""
    from jurymeter.io.store import Store
    from jurymeter.pipeline.alerts import check_gates
    from jurymeter.pipeline.config import load_config
    from jurymeter.pipeline.publish import read_run

    settings = load_config(config, overrides=overrides, flags=flags)
    if all(v is None for v in vars_of(settings.gates).values()):
        return
    target = Store(settings.store, settings.storage_options)
    tables, published = read_run(target, f"results/{summary['run_id']}")
    result = check_gates(tables, published, settings.gates)
    _print(result)
    if not result["passed"]:
        raise typer.Exit(GATE_FAILED)
