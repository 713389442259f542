"""The ``jurymeter sequential`` command (one item set's order and batch effects) and ``jurymeter batch-plan``."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer
from rich.table import Table

from jurymeter.cli.common import (
    ConfigOpt,
    PopulationOpt,
    StorageOpt,
    StoreOpt,
    UniverseOpt,
    command_job,
    command_report,
    fmt,
    out,
    run_command,
    safe_text,
    write_table,
)


def register(app: typer.Typer) -> None:
    app.command(name="sequential")(sequential)
    app.command(name="batch-plan")(batch_plan_command)


def sequential(
    item_set: Annotated[str, typer.Option("--item-set", help="Pointwise item set with batch_id and batch_position")],
    store: StoreOpt = None,
    storage_option: StorageOpt = None,
    config: ConfigOpt = None,
    universe: UniverseOpt = None,
    population: PopulationOpt = None,
    lags: Annotated[int, typer.Option("--lags", help="Markov order of the GLMM (1-3)")] = 1,
    boot: Annotated[int, typer.Option("--boot", help="Batch-bootstrap resamples (GLMM refits)")] = 200,
    unit: Annotated[str, typer.Option("--unit", help="What a rated unit is: system, item or output")] = "system",
    top_k: Annotated[int, typer.Option("--top-k", help="k of the top-k selection")] = 3,
    group_a: Annotated[str, typer.Option("--group-a", help="Units of group A, comma-separated")] = "",
    group_b: Annotated[str, typer.Option("--group-b", help="Units of group B, comma-separated")] = "",
    reference: Annotated[
        str, typer.Option("--reference", help="The group a reference answer says is better: A or B")
    ] = "",
    simulations: Annotated[int, typer.Option("--simulations", help="Simulated sets of the predictive check")] = 200,
    seed: Annotated[int, typer.Option(help="Random seed")] = 0,
    as_json: Annotated[bool, typer.Option("--json", help="Print the full report as JSON")] = False,
) -> None:
    """Serial dependence, the Markov GLMM, its predictive check, top-k selection and group contrasts per judge."""
    run_command(_sequential, item_set, store, storage_option, config, universe, population, lags, boot, unit,
                top_k, group_a, group_b, reference, simulations, seed, as_json)


def _sequential(item_set: str, store: str | None, storage_option: list[str] | None, config: Path | None,
                universe: str | None, population: str | None, lags: int, boot: int, unit: str, top_k: int,
                group_a: str, group_b: str, reference: str, simulations: int, seed: int, as_json: bool) -> None:
    from jurymeter.analyses.sequential import SequentialOptions

    options = SequentialOptions(lags=lags, n_boot=boot, n_sim=simulations, unit=unit, top_k=top_k,
                                group_a=group_a, group_b=group_b, reference=reference)
    job = command_job(item_set, store, storage_option, config, universe, population, (("sequential", options),),
                      seed=seed)
    report = command_report(job, as_json=as_json)
    if report is not None:
        _print(report)


def _print(report: dict[str, Any]) -> None:
    out.print(f"item set {safe_text(report['item_set'])}: unit {report['unit']}, GLMM lags {report['lags']}"
              + (f"; {report['ratings_without_batch']:,} ratings without a batch position left out"
                 if report["ratings_without_batch"] else ""), markup=False)
    table = Table(title="per judge (95% batch-bootstrap intervals)", title_justify="left")
    columns = ("judge", "ratings", "batches", "scale", "serial contrast", "rho_1 (logit)", "batch SD",
               "check outside", "top (average)", "top (model)")
    for label in columns:
        table.add_column(label, justify="left" if label in ("judge", "scale") or label.startswith("top") else "right")
    def with_interval(j: dict[str, Any], key: str) -> str:
        low, high = j.get(f"{key}_low"), j.get(f"{key}_high")
        return fmt(j.get(key)) + (f" [{fmt(low)}, {fmt(high)}]" if low is not None and high is not None else "")

    for judge, j in report["judges"].items():
        checked = "" if j.get("check_outside") is None else f"{j['check_outside']}/{j['check_terms']}"
        table.add_row(safe_text(judge), str(j["ratings"]), str(j["batches"]), j.get("response") or "",
                      with_interval(j, "serial_contrast"), with_interval(j, "rho_1"), with_interval(j, "batch_sd"),
                      checked, safe_text(j.get("top_naive") or ""), safe_text(j.get("top_model") or ""))
    out.print(table)
    for judge, j in report["judges"].items():
        for part, reason in j["reasons"].items():
            out.print(f"{safe_text(judge)}: {part} not estimated: {safe_text(reason)}", markup=False)
        for row in j.get("groups") or []:
            out.print(f"{safe_text(judge)}: group A - group B ({row.get('method')}): {fmt(row.get('estimate'))} "
                      f"(SE {fmt(row.get('se'))}, p {fmt(row.get('p_value'), 4)})"
                      + (f", {row['outcome']}" if row.get("outcome") else ""), markup=False)


def batch_plan_command(
    out_path: Annotated[Path, typer.Option("--out", help="Assignment table: .csv, .jsonl or .parquet")],
    items: Annotated[Path, typer.Option("--items", help="File of the rated units' ids, one per line")],
    judges: Annotated[Path, typer.Option("--judges", help="File of judge ids, one per line")],
    batches: Annotated[int, typer.Option("--batches", help="Batches in all (over every judge)")],
    design: Annotated[str, typer.Option("--design", help="'williams' (default) or 'random'")] = "williams",
    seed: Annotated[int, typer.Option(help="Random seed")] = 0,
) -> None:
    """Write a batch plan (batch_id, batch_position, item_id, judge_id): Williams-square or randomized orders."""
    run_command(_batch_plan, out_path, items, judges, batches, design, seed)


def _batch_plan(out_path: Path, items: Path, judges: Path, batches: int, design: str, seed: int) -> None:
    from jurymeter.cli.app import _ids_from_file
    from jurymeter.stats.sequential.plans import batch_plan

    item_ids, judge_ids = _ids_from_file(items), _ids_from_file(judges)
    assert item_ids is not None
    assert judge_ids is not None
    table = batch_plan(item_ids, batches, judge_ids, design=design, seed=seed)  # type: ignore[arg-type]
    write_table(table, out_path)
    out.print(f"wrote {table.height:,} ratings in {batches:,} batches of {len(item_ids)} to {safe_text(out_path)} "
              f"({design} orders, seed {seed}; judges in turn: {', '.join(map(safe_text, judge_ids))})", markup=False)
