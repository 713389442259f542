"""The ``jurymeter pairwise`` command, as data: the pairwise analysis's options as flags, and its printout.

The CLI builds the typer command from :data:`COMMAND` (the one fit path:
:func:`jurymeter.pipeline.jobs.command_job`); no statistics here.
"""

from __future__ import annotations

from typing import Any

from rich.table import Table

from jurymeter.analyses.commands import FIT_SETTINGS_RULES, Command, Flag, Rule
from jurymeter.render.text import fmt, out, safe_text


def print_pairwise(report: dict[str, Any]) -> None:
    """Judges' position bias and health, ratings, family preference and the pairwise G-study, for a terminal."""
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
        groups = rank_range_groups([(r["rank_low"], r["rank_high"]) for _, r in rows])
        for (system, r), group in zip(rows, groups, strict=True):
            ratings.add_row(safe_text(system), fmt(r["rating_elo"], 0), fmt(r["low_elo"], 0), fmt(r["high_elo"], 0),
                            str(r["rank"]), f"{r['rank_low']}-{r['rank_high']}", str(group))
        out.print(ratings)
        out.print("group: systems whose rank ranges overlap, directly or through others; systems of different "
                  "groups are told apart (their rank ranges do not overlap)", markup=False)
        for first, second in _apart_but_overlapping(rows, groups):
            out.print(f"{safe_text(first)} and {safe_text(second)}: rating intervals overlap, but the ratings "
                      "move together over the resamples, which order the two the same way: their rank ranges "
                      "do not overlap", markup=False)
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


def rank_range_groups(ranges: list[tuple[int, int]]) -> list[int]:
    """Groups (1 = top) of systems sorted by rank: a system joins the group before when its rank range overlaps it.

    A group is a maximal chain of overlapping rank ranges (an interval graph's
    connected component), so two systems of different groups never share a rank
    the bootstrap gives them, and the printout says no more than the rank ranges do.
    """
    groups: list[int] = []
    reach = 0  # the highest rank_high of the group so far
    for low, high in ranges:
        if not groups or low > reach:
            groups.append(len(set(groups)) + 1)
            reach = high
        else:
            groups.append(groups[-1])
            reach = max(reach, high)
    return groups


def _apart_but_overlapping(rows: list[tuple[str, dict[str, Any]]], groups: list[int]) -> list[tuple[str, str]]:
    """Neighbours in rank of different groups whose Elo intervals overlap (the ranks, not the intervals, decide)."""
    pairs = []
    for k in range(len(rows) - 1):
        (first, a), (second, b) = rows[k], rows[k + 1]
        bounds = (a.get("low_elo"), a.get("high_elo"), b.get("low_elo"), b.get("high_elo"))
        if groups[k] != groups[k + 1] and None not in bounds and b["high_elo"] >= a["low_elo"]:
            pairs.append((first, second))
    return pairs


COMMAND = Command(
    help="Position bias, order reversals, judge agreement, Bradley-Terry ratings, family preference, pairwise G-study.",
    item_set_help="Pairwise item set to analyse",
    title="the pairwise analysis",
    flags=(
        Flag("n_boot", "--boot", "Prompt-bootstrap resamples", Rule(low=1, integer=True)),
        Flag("n_perm", "--permutations", "Permutations of the family test", Rule(low=1, integer=True)),
        Flag("resample_judges", "--resample-judges", "Resample judges too in the ratings' bootstrap"),
        Flag("anchor", "--anchor", "System placed at 1000 on the Elo scale (default: the mean)"),
        Flag("baseline", "--baseline", "Baseline of the pairwise G-study (default: the system in every pair)"),
        Flag("seed", "--seed", "Random seed", FIT_SETTINGS_RULES["seed"], settings=True),
    ),
    show=print_pairwise,
)
