"""The ``jurymeter gstudy`` command: one item set's G-study and D-study, through the nightly fit path."""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.table import Table
from rich.text import Text

from jurymeter.analyses.gstudy import GStudyOptions, dropped_summary, dropped_text
from jurymeter.cli.common import (
    ConfigOpt,
    PopulationOpt,
    StorageOpt,
    StoreOpt,
    UniverseOpt,
    err,
    fmt,
    fmt_bound,
    load_config,
    named_levels,
    out,
    print_json,
    run_command,
    safe_text,
    store_with_item_set,
)


def register(app: typer.Typer) -> None:
    app.command(name="gstudy")(gstudy)


def gstudy(
    item_set: Annotated[str, typer.Option("--item-set", help="Item set to fit")],
    store: StoreOpt = None,
    storage_option: StorageOpt = None,
    config: ConfigOpt = None,
    universe: UniverseOpt = None,
    population: PopulationOpt = None,
    generations: Annotated[
        str, typer.Option("--generations", help="'average' (default) or 'facet'")
    ] = "average",
    boot: Annotated[int, typer.Option("--boot", help="Parametric bootstrap resamples")] = 800,
    seed: Annotated[int, typer.Option(help="Random seed")] = 0,
    target: Annotated[float, typer.Option(help="Target E rho^2 for sizing")] = 0.8,
    interval: Annotated[
        str, typer.Option("--interval", help="'pivotal' (default) or 'percentile' (the paper's)")
    ] = "pivotal",
    as_json: Annotated[bool, typer.Option("--json", help="Print the full report as JSON")] = False,
    screen_threshold: Annotated[
        float, typer.Option("--screen-threshold", help="Keep items with between-system variance >= this")
    ] = 1.0,
    screened_out: Annotated[
        Path | None, typer.Option("--screened-out", help="Write the screened item ids here, one per line")
    ] = None,
    estimator: Annotated[
        str, typer.Option("--estimator", help="'auto' (default: every record by Henderson I when the balanced "
                          "block would drop any), 'henderson' or 'balanced'")
    ] = "auto",
    henderson_intervals: Annotated[
        str, typer.Option("--henderson-intervals", help="Intervals of an every-record fit: 'auto' (default: the "
                          "record bootstrap up to 200M records x draws, chi-square draws above), 'records' or "
                          "'chisquare'")
    ] = "auto",
) -> None:
    """G-study and D-study of one pointwise item set, with bootstrap intervals."""
    run_command(_gstudy, item_set, store, storage_option, config, universe, population, generations,
         boot, seed, target, as_json, screen_threshold, screened_out, interval, estimator, henderson_intervals)




def _gstudy(item_set: str, store: str | None, storage_option: list[str] | None, config: Path | None, universe: str | None, population: str | None, generations: str,
            boot: int, seed: int, target: float, as_json: bool, screen_threshold: float = 1.0, screened_out: Path | None = None,
            interval: str = "pivotal", estimator: str = "auto", henderson_intervals: str = "auto") -> None:
    from jurymeter.analyses.base import FitSettings
    from jurymeter.pipeline.fit import COMMAND_SCAN_CELLS, run_fit
    from jurymeter.pipeline.jobs import FitJob

    settings = load_config(config)
    target_store = store_with_item_set(store, storage_option, config, item_set)
    job = FitJob(
        store=target_store.url,
        storage_options=tuple(sorted(target_store.storage_options.items())),
        item_set=item_set,
        universe=universe or "all",
        population=population or "all",
        settings=FitSettings(
            judges=named_levels(settings, "universes", universe),
            systems=named_levels(settings, "populations", population),
            n_boot=boot, seed=seed, target=target, generations=generations, interval=interval,
        ),
        analyses=(("gstudy", GStudyOptions(screen_threshold=screen_threshold, estimator=estimator,
                                             henderson_intervals=henderson_intervals)),),
        inputs=(),
    )
    # The nightly run's own fit path (one scan, or item chunks: memory follows the
    # cells); one process, one fit: it may read more cells in one scan than a worker.
    # A Text, not a str: rich's spinner would read a str as markup, past the console's escaping.
    status = Text(f"fitting {safe_text(item_set)} and {boot} bootstrap resamples")
    with err.status(status) if err.is_terminal else contextlib.nullcontext():
        outcome = run_fit(job, scan_cells=COMMAND_SCAN_CELLS)["gstudy"]
    if outcome.result is None:  # fewer than two systems or items: the reason says what to do
        from jurymeter.errors import DesignError

        msg = f"the G-study cannot run on {item_set}: {outcome.reason}"
        raise DesignError(msg)
    report = dict(outcome.result.report)
    report["universe"], report["population"] = job.universe, job.population
    if screened_out is not None:
        kept = report["items"]["screened_items"] if report["items"] else []
        screened_out.write_text("".join(f"{item}\n" for item in kept))
    if as_json:
        print_json(report)
        return
    print_gstudy(report)


def print_gstudy(report: dict[str, Any]) -> None:
    block = report["block"]
    out.print(
        f"item set {safe_text(report['item_set'])}  universe {safe_text(report['universe'])}  population "
        f"{safe_text(report['population'])}  design {report['design']}  "
        f"({block['systems']} systems x {block['items']} items x {block['judges']} judges x "
        f"{block['replicates']} replicates; completeness {block['completeness']:.3f})",
        markup=False,
    )
    out.print(f"estimator: {report.get('estimator', 'balanced')}"
              + (f" ({safe_text(report['estimator_note'])})" if report.get("estimator_note") else ""), markup=False)
    dropped = dropped_text(dropped_summary(report), block)
    if dropped:  # the counts first (issue 14, point 5), then the ids
        out.print(f"dropped: {safe_text(dropped)}", markup=False)
    for kind in ("systems", "items", "judges"):
        if block[f"dropped_{kind}"]:
            out.print(f"dropped {kind} to balance: {', '.join(map(safe_text, block[f'dropped_{kind}']))}",
                      markup=False)
    for note in block["notes"]:
        out.print(f"note: {safe_text(note)}", markup=False)
    for note in report.get("design_notes") or []:
        out.print(f"design {report['design']} (block {report.get('block_design')}): {safe_text(note)}", markup=False)
    table = Table(title="variance components", title_justify="left")
    for col in ("component", "raw", "share", "95% interval"):
        table.add_column(col, justify="left" if col == "component" else "right")
    for name, c in report["components"].items():
        i = c["interval"]
        table.add_row(name, fmt(c["raw"], 4), f"{fmt(100 * c['share'], 1)}%",
                      f"[{fmt(i.get('low'), 4)}, {fmt(i.get('high'), 4)}]")
    out.print(table)
    iv = report["intervals"]
    if iv.get("method"):  # which draws gave the intervals (an every-record fit's choice and why)
        out.print(f"intervals: {iv['method']}, {iv.get('n_boot')} draws"
                  + (f"; {safe_text(iv['method_note'])}" if iv.get("method_note") else ""), markup=False)
    rows = [
        ("E rho^2 (native)", report["erho2"], iv["erho2"]),
        ("Phi (native)", report["phi"], iv["phi"]),
        ("single-judge ceiling", report["ceiling"], iv["ceiling"]),
        ("MDD95 (native)", report["mdd95"], iv["mdd95"]),
        ("MDD95 @30 items, 1 judge, 1 run", report["mdd95_30"], iv["mdd95_30"]),
        ("MDD95, unlimited items, 1 judge", report["mdd95_unlimited_items"], iv["mdd95_unlimited_items"]),
        ("MDD95 in SD of system means", report["mdd95_in_sd_of_system_means"], iv.get("mdd95_in_sd_of_system_means")),
        ("judges needed (30 items, 3 runs)", report["judges_needed"], iv["judges_needed"]),
        ("items needed (1 judge, 1 run)", report["items_needed"], iv["items_needed"]),
    ]
    d = Table(title="D-study", title_justify="left")
    for col in ("quantity", "estimate", "95% interval"):
        d.add_column(col, justify="left" if col == "quantity" else "right")
    reasons = report.get("null_reasons") or {}

    def unset(key: str | None) -> str:
        """How a null prints: "never" when its reason says the target is never reached, else n/a."""
        return "never" if key is not None and str(reasons.get(key, "")).startswith("never") else "n/a"

    # judges/items needed: null means "never reached", unless a reason says it cannot be estimated.
    never = {"judges needed (30 items, 3 runs)": "judges_needed", "items needed (1 judge, 1 run)": "items_needed"}
    for name, value, interval in rows:
        key = never.get(name)
        d.add_row(
            name, fmt(value, none=unset(key)),
            f"[{fmt_bound(interval.get('low'))}, {fmt_bound(interval.get('high'))}]" if interval else "",
        )
    out.print(d)
    out.print(
        f"P(ceiling >= 0.8) = {fmt(report['p_ceiling_at_least_0_8'])}; judges needed for "
        f"E rho^2 >= {report['target']} at 30 items, 3 runs: "
        f"{fmt(report['judges_needed'], none=unset('judges_needed'))}; "
        f"items needed at 1 judge, 1 run: "
        f"{fmt(report['items_needed'], none=unset('items_needed'))}",
        markup=False,
    )
    for budget, best in report["budget_optimum"].items():
        if best is None or best.get("n_i") is None:
            out.print(f"budget {budget} calls: no optimum can be estimated", markup=False)
            continue
        judges = "the one judge" if best.get("n_j") is None else f"{best['n_j']} judges"
        out.print(
            f"budget {budget} calls: {best['n_i']} items x {judges} x {best['n_r']} runs "
            f"(MDD95 {fmt(best['mdd95'])})"
        )
    naive = report["naive_item_bootstrap"]
    if naive["halfwidth"] is None and "naive_item_bootstrap.halfwidth" in reasons:
        out.print(f"naive item bootstrap: {safe_text(reasons['naive_item_bootstrap.halfwidth'])}", markup=False)
    else:
        out.print(
            f"naive item bootstrap half-width {fmt(naive['halfwidth'])} vs single-judge MDD95 "
            f"{fmt(naive['mdd95_single_judge'])}: understates {fmt(naive['mdd95_over_halfwidth'], 2)}x"
        )
    rank = report["rank_reliability"]
    out.print(
        f"adjacent top-10 pairs in the wrong order: {fmt(rank['wrong_order_top10_1_judge'])} at 1 judge, "
        f"{fmt(rank['wrong_order_top10_3_judges'])} at 3 judges; MDD rule false-positive rate "
        f"{fmt(rank['mdd_false_positive_rate'])}"
    )
    for k, e in report["ensembles"].items():
        out.print(
            f"ensembles of {k}: observed/predicted sigma2_sj median {fmt(e['median'], 2)} "
            f"[{fmt(e['low'], 2)}, {fmt(e['high'], 2)}] over {e['partitions']} partitions"
        )
    nested = report.get("nested")
    if nested:
        share = nested["config_share_of_system_variance"]
        out.print(
            f"nested ({nested['design']}, {len(nested['models'])} models x "
            f"{nested['configs_per_model']} configs): sigma2_m {fmt(nested['sigma2_m'], 4)}, "
            f"sigma2_c:m {fmt(nested['sigma2_c_m'], 4)}, configuration share "
            f"{fmt(None if share is None else 100 * share, 1)}%, ceiling with the model as object "
            f"{fmt(nested['ceiling_model_as_object'])}"
        )
    if report["items"]:
        it = report["items"]
        out.print(
            f"item split-half Spearman {fmt(it['split_half_rho_median'])} "
            f"[{fmt(it['split_half_rho_low'])}, {fmt(it['split_half_rho_high'])}]; "
            f"{len(it['screened_items'])} of {block['items']} items pass the screen "
            f"(between-system variance >= {it['screen_threshold']})"
        )
    for title, notes in (("not estimable", reasons), ("at a bound", report.get("truncated") or {}),
                         ("extrapolated beyond the observed sizes", report.get("extrapolated") or {})):
        for key, why in notes.items():
            out.print(f"{title}: {key}: {safe_text(why)}", markup=False)
