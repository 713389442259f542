"""The ``jurymeter pairwise`` command: one pairwise item set's diagnostics, through the nightly fit path."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Any

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
)

if TYPE_CHECKING:
    from pathlib import Path


def register(app: typer.Typer) -> None:
    app.command(name="pairwise")(pairwise)


def pairwise(
    item_set: Annotated[str, typer.Option("--item-set", help="Pairwise item set to analyse")],
    store: StoreOpt = None,
    storage_option: StorageOpt = None,
    config: ConfigOpt = None,
    universe: UniverseOpt = None,
    population: PopulationOpt = None,
    boot: Annotated[int, typer.Option("--boot", help="Prompt-bootstrap resamples")] = 1000,
    permutations: Annotated[int, typer.Option("--permutations", help="Permutations of the family test")] = 1000,
    resample_judges: Annotated[
        bool, typer.Option("--resample-judges", help="Resample judges too in the ratings' bootstrap")
    ] = False,
    anchor: Annotated[
        str | None, typer.Option("--anchor", help="System placed at 1000 on the Elo scale (default: the mean)")
    ] = None,
    baseline: Annotated[
        str | None, typer.Option("--baseline", help="Baseline of the pairwise G-study (default: the system in every pair)")
    ] = None,
    seed: Annotated[int, typer.Option(help="Random seed")] = 0,
    as_json: Annotated[bool, typer.Option("--json", help="Print the full report as JSON")] = False,
) -> None:
    """Position bias, order reversals, judge agreement, Bradley-Terry ratings, family preference, pairwise G-study."""
    run_command(_pairwise, item_set, store, storage_option, config, universe, population, boot, permutations,
                resample_judges, anchor, baseline, seed, as_json)


def _pairwise(item_set: str, store: str | None, storage_option: list[str] | None, config: Path | None,
              universe: str | None, population: str | None, boot: int, permutations: int, resample_judges: bool,
              anchor: str | None, baseline: str | None, seed: int, as_json: bool) -> None:
    from jurymeter.analyses.pairwise import PairwiseOptions
    options = PairwiseOptions(n_boot=boot, n_perm=permutations, resample_judges=resample_judges,
                              anchor=anchor, baseline=baseline)
    job = command_job(item_set, store, storage_option, config, universe, population, (("pairwise", options),),
                      protocol="pairwise", seed=seed)
    report = command_report(job, as_json=as_json)
    if report is not None:
        _print(report)


def _print(report: dict[str, Any]) -> None:
    share = report.get("both_orders_share")
    out.print(
        f"item set {safe_text(report['item_set'])}: {report['games']} judgments, {report['outcomes']} outcomes "
        f"({report['systems']} systems, {report['items']} items, {len(report['judges'])} judges); "
        f"in both orders: {fmt(None if share is None else 100 * share, 1)}%",
        markup=False,
    )
    judges = Table(title="judges (position bias and health)", title_justify="left")
    columns = [("judge", None), ("games", "games"), ("both orders", "pairs_both_orders"),
               ("first slot", "first_slot_win_rate"), ("ties", "tie_rate"), ("reversals", "reversal_rate"),
               ("q", "q_position_following"), ("slot-A adv. (pts)", "slot_a_advantage"),
               ("failures", "failure_rate")]
    for label, _ in columns:
        judges.add_column(label, justify="left" if label == "judge" else "right")
    for judge, row in report["judges"].items():
        flag = " *" if row.get("exceeds_content_noise_bound") else ""
        judges.add_row(safe_text(judge), *[fmt(row.get(key), 1 if key == "slot_a_advantage" else 3)
                                + (flag if key == "reversal_rate" else "") for _, key in columns[1:]])
    out.print(judges)
    if any(r.get("exceeds_content_noise_bound") for r in report["judges"].values()):
        out.print("* reversal rate above the 50% bound of the independent content-noise model", markup=False)
    bt = report.get("bradley_terry", {})
    if "systems" in bt:
        ratings = Table(title="Bradley-Terry (Elo scale; ties half a win; prompt-bootstrap intervals)",
                        title_justify="left")
        for label in ("system", "rating", "low", "high", "rank", "rank range", "group"):
            ratings.add_column(label, justify="left" if label == "system" else "right")
        rows = sorted(bt["systems"].items(), key=lambda kv: kv[1]["rank"])
        for system, r in rows:
            ratings.add_row(safe_text(system), fmt(r["rating_elo"], 0), fmt(r["low_elo"], 0), fmt(r["high_elo"], 0),
                            str(r["rank"]), f"{r['rank_low']}-{r['rank_high']}", str(r["tie_group"]))
        out.print(ratings)
        out.print(f"prompt-bootstrap / battle-bootstrap interval width: {fmt(bt.get('interval_ratio'), 2)}x",
                  markup=False)
    elif bt.get("reason"):
        out.print(f"Bradley-Terry: {safe_text(bt['reason'])}", markup=False)
    family = report.get("family_preference", {})
    if family.get("fps") is not None:
        out.print(f"family preference score {fmt(family['fps'], 3)} (permutation p = "
                  f"{fmt(family.get('p_permutation'), 4)})", markup=False)
    elif family.get("reason"):
        out.print(f"family preference: {safe_text(family['reason'])}", markup=False)
    gstudy = report.get("gstudy", {})
    if gstudy.get("arms"):
        table = Table(title="pairwise G-study (win indicator against the baseline)", title_justify="left")
        for label in ("arm", "design", "sigma2_s", "sigma2_sj", "ceiling", "E rho^2", "judges needed"):
            table.add_column(label, justify="left" if label in ("arm", "design") else "right")
        for arm in gstudy["arms"]:
            design = f"{arm['systems']} x {arm['items']} x {arm['judges']}"
            table.add_row(safe_text(arm["arm"]), design, fmt(arm["sigma2_s"], 5), fmt(arm["sigma2_sj"], 5),
                          fmt(arm["ceiling"]), fmt(arm["erho2"]), fmt(arm["judges_needed"], 0))
        out.print(table)
    elif gstudy.get("reason"):
        out.print(f"pairwise G-study: {safe_text(gstudy['reason'])} (--baseline; [fit.pairwise] baseline in the config)",
                  markup=False)
