"""The ``jurymeter gstudy`` command, as data: its flags (the G-study's options and the shared settings) and its printout.

The CLI builds the typer command from :data:`COMMAND` and runs it through the
one fit path (:func:`jurymeter.pipeline.jobs.command_job`); this module holds no
statistics, so the fit's cache key leaves it out (:func:`jurymeter.pipeline.jobs.code_digest`).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from rich.table import Table

from jurymeter.analyses.commands import FIT_SETTINGS_RULES, Command, Flag, Output, Rule
from jurymeter.analyses.gstudy import (
    ESTIMATOR_CHOICES,
    HENDERSON_INTERVAL_CHOICES,
    dropped_summary,
    dropped_text,
)
from jurymeter.render.text import fmt, fmt_bound, out, safe_text


def write_screened(report: Mapping[str, Any], path: Path) -> None:
    """The item ids that pass the screen, one per line (``--screened-out``)."""
    kept = report["items"]["screened_items"] if report["items"] else []
    path.write_text("".join(f"{item}\n" for item in kept))


def print_gstudy(report: dict[str, Any]) -> None:
    """The G-study report for a terminal: the block, the components, the D-study, the checks."""
    _print_block(report)
    _print_components(report)
    _print_dstudy(report)
    _print_checks(report)


def _print_block(report: dict[str, Any]) -> None:
    """What was fitted: the names, the design and block, the estimator, what was dropped and the notes."""
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


def _print_components(report: dict[str, Any]) -> None:
    """The variance components with their shares and intervals, and which draws gave the intervals."""
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


def _unset(report: dict[str, Any], key: str | None) -> str:
    """How a null prints: "never" when its reason says the target is never reached, else n/a."""
    reasons = report.get("null_reasons") or {}
    return "never" if key is not None and str(reasons.get(key, "")).startswith("never") else "n/a"


def _print_dstudy(report: dict[str, Any]) -> None:
    """The D-study table (estimates and intervals) and the sizing sentence."""
    iv = report["intervals"]
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
    # judges/items needed: null means "never reached", unless a reason says it cannot be estimated.
    never = {"judges needed (30 items, 3 runs)": "judges_needed", "items needed (1 judge, 1 run)": "items_needed"}
    for name, value, interval in rows:
        key = never.get(name)
        d.add_row(
            name, fmt(value, none=_unset(report, key)),
            f"[{fmt_bound(interval.get('low'))}, {fmt_bound(interval.get('high'))}]" if interval else "",
        )
    out.print(d)
    out.print(
        f"P(ceiling >= 0.8) = {fmt(report['p_ceiling_at_least_0_8'])}; judges needed for "
        f"E rho^2 >= {report['target']} at 30 items, 3 runs: "
        f"{fmt(report['judges_needed'], none=_unset(report, 'judges_needed'))}; "
        f"items needed at 1 judge, 1 run: "
        f"{fmt(report['items_needed'], none=_unset(report, 'items_needed'))}",
        markup=False,
    )


def _print_checks(report: dict[str, Any]) -> None:
    """Budget optima, the naive bootstrap, rank reliability, ensembles, the nested design, items and notes."""
    block = report["block"]
    reasons = report.get("null_reasons") or {}
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


COMMAND = Command(
    help="G-study and D-study of one pointwise item set, with bootstrap intervals.",
    item_set_help="Item set to fit",
    title="the G-study",
    names=("item_set", "universe", "population"),
    flags=(
        Flag("generations", "--generations", "'average' (default) or 'facet'", FIT_SETTINGS_RULES["generations"],
             settings=True),
        Flag("n_boot", "--boot", "Parametric bootstrap resamples", FIT_SETTINGS_RULES["n_boot"], settings=True),
        Flag("seed", "--seed", "Random seed", FIT_SETTINGS_RULES["seed"], settings=True),
        Flag("target", "--target", "Target E rho^2 for sizing", FIT_SETTINGS_RULES["target"], settings=True),
        Flag("interval", "--interval", "'pivotal' (default) or 'percentile' (the paper's)",
             FIT_SETTINGS_RULES["interval"], settings=True),
        Flag("screen_threshold", "--screen-threshold", "Keep items with between-system variance >= this"),
        Flag("estimator", "--estimator", "'auto' (default: every record by Henderson I when the balanced "
             "block would drop any), 'henderson' or 'balanced'", Rule(choices=ESTIMATOR_CHOICES)),
        Flag("henderson_intervals", "--henderson-intervals", "Intervals of an every-record fit: 'auto' (default: "
             "the record bootstrap up to 200M records x draws, chi-square draws above), 'records' or 'chisquare'",
             Rule(choices=HENDERSON_INTERVAL_CHOICES)),
    ),
    show=print_gstudy,
    outputs=(Output("--screened-out", "Write the screened item ids here, one per line", write_screened),),
)
