"""The ``jurymeter cyclic`` command: CyclicJudge on one item set."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated

import typer
from rich.table import Table

from jurymeter.cli.common import (
    ConfigOpt,
    StorageOpt,
    StoreOpt,
    int_list,
    out,
    print_json,
    run_command,
    safe_text,
    store_with_item_set,
)

if TYPE_CHECKING:
    from pathlib import Path


def register(app: typer.Typer) -> None:
    app.command(name="cyclic")(cyclic)


def cyclic(
    item_set: Annotated[str, typer.Option("--item-set", help="Item set to decompose")],
    store: StoreOpt = None,
    storage_option: StorageOpt = None,
    config: ConfigOpt = None,
    budgets: Annotated[
        str | None,
        typer.Option("--budgets", help="Per-scenario judge-call budgets, e.g. 5,10,20 (multiples of K)"),
    ] = None,
    at_generations: Annotated[int, typer.Option("--at-generations", help="Operating point m")] = 1,
    at_judges: Annotated[int, typer.Option("--at-judges", help="Operating point K")] = 1,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON")] = False,
) -> None:
    """CyclicJudge: per-system judge offsets, F-test and allocation-strategy variances."""
    run_command(_cyclic, item_set, store, storage_option, config, budgets, at_generations, at_judges, as_json)




def _cyclic(item_set: str, store: str | None, storage_option: list[str] | None, config: Path | None, budgets: str | None, at_generations: int, at_judges: int, as_json: bool) -> None:
    from jurymeter.analyses.base import FitSettings
    from jurymeter.analyses.cyclic import CyclicOptions
    from jurymeter.errors import DesignError
    from jurymeter.pipeline.fit import COMMAND_SCAN_CELLS, run_fit
    from jurymeter.pipeline.jobs import FitJob

    target_store = store_with_item_set(store, storage_option, config, item_set)
    given = int_list(budgets, "--budgets")
    job = FitJob(
        store=target_store.url,
        storage_options=tuple(sorted(target_store.storage_options.items())),
        item_set=item_set, universe="all", population="all", settings=FitSettings(),
        analyses=(("cyclic", CyclicOptions(budgets=tuple(given) if given else None,
                                           at_generations=at_generations, at_judges=at_judges)),),
        inputs=(),
    )
    outcome = run_fit(job, scan_cells=COMMAND_SCAN_CELLS)["cyclic"]  # the nightly run's own fit path
    if outcome.result is None:
        msg = f"CyclicJudge cannot run on {item_set}: {outcome.reason}"
        raise DesignError(msg)
    report = dict(outcome.result.report)
    report["item_set"] = item_set
    if as_json:
        print_json(report)
        return
    block, own = report["block"], report["system_blocks"]
    out.print(
        f"item set {safe_text(item_set)}: {len(own)} systems decomposed, each on its own complete block of "
        f"scenarios x generations x the panel's {block['judges']} judges (replicates averaged)",
        markup=False,
    )
    for system, why in (report.get("skipped_systems") or {}).items():
        out.print(f"not decomposed: {safe_text(system)}: {safe_text(why)}", markup=False)
    table = Table(title="per-system decomposition", title_justify="left")
    for col in ("system", "scenarios", "generations", "sigma2_scenario", "sigma2_generation", "sigma2_judge",
                "sigma2_residual", "F", "p", "A vs B"):
        table.add_column(col, justify="left" if col in ("system", "A vs B") else "right")
    for system, r in report["systems"].items():
        b = own[system]
        table.add_row(
            safe_text(system), str(b["scenarios"]), str(b["generations"]), f"{r['sigma2_scenario']:.4f}",
            f"{r['sigma2_generation']:.4f}", f"{r['sigma2_judge']:.4f}", f"{r['sigma2_residual']:.4f}",
            f"{r['f_statistic']:.2f}", f"{r['p_value']:.2g}", safe_text(r["strategies"].get("winner_ab", "")),
        )
    out.print(table)
    offsets = report["judge_system_offsets"]
    judges = list(next(iter(offsets.values())).keys()) if offsets else []
    heat = Table(title="judge offsets by system (judge mean - panel mean)", title_justify="left")
    heat.add_column("system")
    for j in judges:
        heat.add_column(safe_text(j), justify="right")
    for system, row in offsets.items():
        heat.add_row(safe_text(system), *[f"{row[j]:+.3f}" for j in judges])
    out.print(heat)
    for p in report.get("self_preference", []):
        out.print(
            f"self-preference: {safe_text(p['judge_id'])} on {safe_text(p['system_id'])} ({safe_text(p['family'])}): offset "
            f"{p['offset']:+.3f}, on other families {p['other_offset']:+.3f}, excess {p['excess']:+.3f}",
            markup=False,
        )


