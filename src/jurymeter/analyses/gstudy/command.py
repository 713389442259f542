"""The ``jurymeter gstudy`` command, as data: its flags (the G-study's options and the shared settings) and its printout.

The CLI builds the typer command from :data:`COMMAND` and runs it through the
one fit path (:func:`jurymeter.pipeline.jobs.command_job`); this module holds no
statistics, so the fit's cache key leaves it out (:func:`jurymeter.pipeline.jobs.code_digest`).
"""

from __future__ import annotations

import math
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
from jurymeter.render.text import fmt, fmt_bound, out, print_notes, safe_text


def fixed_of(text: str) -> tuple[str, ...]:
    """``--fixed judges,items`` as the facets' names (checked by :class:`~jurymeter.analyses.gstudy.GStudyOptions`)."""
    return tuple(part.strip() for part in text.split(",") if part.strip())


def write_screened(report: Mapping[str, Any], path: Path) -> None:
    """The item ids that pass the screen, one per line (``--screened-out``)."""
    kept = report["items"]["screened_items"] if report["items"] else []
    path.write_text("".join(f"{item}\n" for item in kept))


def print_gstudy(report: dict[str, Any]) -> None:
    """The G-study report for a terminal: the block, the leaderboard, the judges, the components, the D-study, the checks.

    The notes (the block's, the design's, what is not estimable, at a bound or
    extrapolated) come last, folded into one line with their count unless ``--verbose``.
    """
    _print_block(report)
    _print_leaderboard(report)
    _print_judge_offsets(report)
    _print_components(report)
    _print_dstudy(report)
    _print_universe(report)
    _print_checks(report)
    print_notes(_notes(report))


def _print_leaderboard(report: dict[str, Any]) -> None:
    """The systems by mean, with their rank ranges under the fit's MDD (the report's ``leaderboard``)."""
    rows = report.get("leaderboard") or []
    if not rows:
        return
    table = Table(title="leaderboard", title_justify="left")
    for col in ("system", "mean", "rank", "rank range"):
        table.add_column(col, justify="left" if col == "system" else "right")
    for row in rows:
        low, high = row.get("rank_low"), row.get("rank_high")
        table.add_row(safe_text(row["system_id"]), fmt(row["mean"]), str(row["rank"]),
                      "n/a" if low is None or high is None else f"{low}-{high}")
    out.print(table)
    out.print("rank range: the ranks a system can take when means closer than the MDD95 may be in either order",
              markup=False)


def _print_judge_offsets(report: dict[str, Any]) -> None:
    """Each judge's offset in points from the mean of judges, with its 95% interval (``judge_offsets``)."""
    rows = report.get("judge_offsets") or []
    reason = (report.get("null_reasons") or {}).get("judge_offsets")
    if not rows:
        if reason:
            out.print(f"judge offsets: {safe_text(reason)}", markup=False)
        return
    table = Table(title="judge offsets (points)", title_justify="left")
    for col in ("judge", "offset", "95% interval"):
        table.add_column(col, justify="left" if col == "judge" else "right")
    for row in rows:
        table.add_row(safe_text(row["judge_id"]), fmt(row.get("offset")),
                      f"[{fmt(row.get('low'))}, {fmt(row.get('high'))}]")
    out.print(table)


def _notes(report: dict[str, Any]) -> list[str]:
    """Every note of the report, one line each, as ``--verbose`` lists them."""
    notes = [f"note: {safe_text(note)}" for note in report["block"]["notes"]]
    notes += [f"design {report['design']} (block {report.get('block_design')}): {safe_text(note)}"
              for note in report.get("design_notes") or []]
    for title, entries in (("not estimable", report.get("null_reasons") or {}),
                           ("at a bound", report.get("truncated") or {}),
                           ("extrapolated beyond the observed sizes", report.get("extrapolated") or {})):
        notes += [f"{title}: {key}: {safe_text(why)}" for key, why in entries.items()]
    return notes


def naive_comparison(halfwidth: float | None, mdd95: float | None, ratio: float | None) -> str:
    """The naive item bootstrap against the single-judge MDD95, in words that follow the ratio MDD95 / half-width.

    Above 1 the naive half-width is the narrower (it understates the MDD); below 1 it is the wider.
    """
    head = f"naive item bootstrap half-width {fmt(halfwidth)} vs single-judge MDD95 {fmt(mdd95)}: "
    if ratio is None or not math.isfinite(ratio):
        return head + "ratio n/a"
    if round(ratio, 2) == 1.0:
        return head + f"about equal ({fmt(ratio, 2)}x)"
    if ratio > 1.0:
        return head + f"understates {fmt(ratio, 2)}x"
    return head + f"the naive half-width is the wider ({fmt(1.0 / ratio, 2)}x the MDD95): it does not understate"


def _print_block(report: dict[str, Any]) -> None:
    """What was fitted: the names, the design and block, the estimator and what was dropped."""
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


def _print_universe(report: dict[str, Any]) -> None:
    """The declared universe's D-study (``--fixed``, ``--judge-pool``, ``--item-pool``) beside the random one."""
    universe = report.get("universe_dstudy")
    if not universe:
        reason = (report.get("null_reasons") or {}).get("universe_dstudy", "")
        if reason and not reason.startswith("no facet is declared"):  # declared, but it changes nothing
            out.print(f"declared universe: {safe_text(reason)}", markup=False)
        return
    iv = universe["intervals"]

    def with_interval(key: str) -> str:
        return (f"{fmt(universe[key], none='n/a')} [{fmt_bound(iv[key].get('low'))}, "
                f"{fmt_bound(iv[key].get('high'))}]")

    out.print(
        f"declared universe ({safe_text(universe['declared'])}): E rho^2 {with_interval('erho2')}, "
        f"Phi {with_interval('phi')}, MDD95 {with_interval('mdd95')} at the study's sizes "
        f"(the random universe's: E rho^2 {fmt(report['erho2'])}, MDD95 {fmt(report['mdd95'])})",
        markup=False,
    )


def _print_checks(report: dict[str, Any]) -> None:
    """Budget optima, the naive bootstrap, rank reliability, ensembles, the nested design and items."""
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
        out.print(naive_comparison(naive["halfwidth"], naive["mdd95_single_judge"], naive["mdd95_over_halfwidth"]),
                  markup=False)
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
        Flag("fixed", "--fixed", "Facets fixed in the universe: 'judges' (this panel), 'items' (this benchmark) "
             "or 'judges,items'", parse=fixed_of),
        Flag("judge_pool", "--judge-pool", "Judges in the pool the panel was drawn from (0: unlimited)",
             Rule(low=0, integer=True)),
        Flag("item_pool", "--item-pool", "Items in the pool the benchmark was drawn from (0: unlimited)",
             Rule(low=0, integer=True)),
    ),
    show=print_gstudy,
    outputs=(Output("--screened-out", "Write the screened item ids here, one per line", write_screened),),
    notes=True,
)
