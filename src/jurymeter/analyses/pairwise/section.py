"""The pairwise analysis's report section: judges and position bias, agreement, ratings, family preference, G-study.

Figures: the slot-A advantage per judge with its prompt-clustered interval, the
AB/BA reversal rate per judge against the 50% bound of the independent
content-noise model ([Awuni2026]_ section 8), the judge agreement matrix
(Cohen's kappa), Bradley-Terry ratings with prompt-bootstrap and battle-bootstrap
intervals and tie groups, and the family support matrix ([Awuni2026]_ figure 2).

References
----------
.. [Anand2026] A. Anand, "Ask Which, Not How Good: Sizing Benchmarks Scored by an
   LLM", 2026 (``papers/ask-which-not-how-good.txt``), table 3.
.. [Awuni2026] D. A. Awuni et al., "Who Judges Matters", 2026
   (``papers/who-judges-matters.txt``).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import polars as pl
from matplotlib.colors import CenteredNorm, Normalize
from matplotlib.figure import Figure

from jurymeter.analyses.pairwise.headline import position_text
from jurymeter.render.figures import draw as _draw
from jurymeter.render.figures import judge_interval_figure, rank_interval_figure
from jurymeter.render.figures import labelled_rows_figure as _horizontal
from jurymeter.render.figures import matrix as _matrix
from jurymeter.render.figures import mpl_text as _mpl
from jurymeter.render.figures import new_figure as _new_figure
from jurymeter.render.html import SectionBuilder, p_value_text
from jurymeter.render.html import escape as _e
from jurymeter.render.html import number as _num
from jurymeter.render.html import table_html as _table

# Colour-blind-safe pair (Okabe-Ito blue and vermillion) for the two interval kinds.
PROMPT_COLOUR, BATTLE_COLOUR = "#0072B2", "#D55E00"


# Conventional level of the per-family permutation test, named in its lead.
FAMILY_TEST_LEVEL = 0.05
# Cohen's kappa below this is "slight" agreement (Landis and Koch, 1977).
SLIGHT_KAPPA = 0.2
# Per-judge columns: (column, header with its unit, shown as a percentage).
JUDGE_COLUMNS = (
    ("games", "games", False), ("pairs_both_orders", "pairs in both orders", False),
    ("first_slot_win_rate", "first-slot share (%)", True), ("tie_rate", "tie rate (%)", True),
    ("reversal_rate", "reversal rate (%)", True), ("q_position_following", "q, position-following (%)", True),
    ("slot_a_advantage", "slot-A advantage (points)", False), ("failure_rate", "failure rate (%)", True),
    ("replicate_agreement", "replicate agreement (%)", True), ("gold_accuracy", "gold accuracy (%)", True),
)
FAMILY_COLUMNS = (
    ("same_family_support", "same-family support (0\u20131)"),
    ("other_judges_support", "other judges' support (0\u20131)"),
    ("naive", "naive lift (support)"), ("corrected", "corrected lift (support)"),
    ("corrected_p", "p (corrected lift)"),
)
GSTUDY_COLUMNS = (
    ("systems", "systems"), ("items", "items"), ("judges", "judges"),
    ("sigma2_s", "sigma2_s (win rate\u00b2)"), ("sigma2_sj", "sigma2_sj (win rate\u00b2)"),
    ("share", "sigma2_s share (%)"), ("ceiling", "ceiling (0\u20131)"), ("erho2", "E\u03c1\u00b2 (0\u20131)"),
    ("judges_needed", "judges needed"), ("reason", "why none"),
)


def pairwise_section(page: SectionBuilder) -> None:
    """Every part of the pairwise analysis that has rows; nothing when it did not run.

    The section and each subsection open with a lead sentence (:meth:`SectionBuilder.lead`)
    built from the fit's numbers.
    """
    judges = page.rows("pairwise_judges")
    ratings = page.rows("bt_ratings")
    if not (judges.height or ratings.height):
        return
    title = page.title
    summary = page.summary
    page.lead(_section_lead(judges, ratings))
    if judges.height:
        _subsection(page, "Judges and position bias", _judges_lead(judges))
    page.add(_judges_html(judges))
    position = position_text(summary)
    if position is not None and "not estimable" in position:  # the reason where the number would be
        page.add(f'<p class="note">{_e(position[0].upper() + position[1:])}.</p>')
    page.figure("position-bias", lambda: _figure_position(judges, title),
                "Slot-A advantage per judge: win rate of a system shown first minus the same system "
                "shown second, in percentage points, with its 95% prompt-bootstrap interval ([Anand2026] table 3).")
    page.figure("reversals", lambda: _figure_reversals(judges, title),
                "AB/BA reversal rate per judge (% of pairs seen in both orders whose winner differs) "
                "against the 50% bound of the independent content-noise model ([Awuni2026] section 8).")
    agreement = page.rows("judge_agreement")
    if _has_values(agreement, "kappa"):
        _subsection(page, "Judge agreement", _agreement_lead(agreement))
    page.figure("judge-agreement", lambda: _figure_agreement(agreement, title),
                "Cohen's kappa (\u22121 to 1, 0 = chance) between judges on the judgments they share (A / B / tie).")
    if ratings.height:
        _subsection(page, "Ratings", _ratings_lead(ratings))
    elif summary.get("interval_ratio_reason"):  # the section is there, with why it has no numbers (issue 24, point 4)
        page.add("<h4>Ratings</h4>")
        page.add(f'<p class="note">No Bradley-Terry ratings: {_e(summary["interval_ratio_reason"])}.</p>')
    page.add(_ratings_html(ratings, summary))
    page.figure("ratings", lambda: _figure_ratings(ratings, title),
                "Bradley-Terry ratings (Elo scale) with 95% intervals: a prompt bootstrap that resamples "
                "items with all their games and judges (blue) against the battle bootstrap of the common "
                "leaderboards (vermillion); shading marks the tie groups.")
    page.figure("bt-rank-intervals", lambda: rank_interval_figure(ratings, title),
                "Each system's Bradley-Terry rank range (bar: the 2.5 and 97.5 percentiles of its rank over "
                "the prompt bootstrap) and point rank (dot), best first; colours mark the tie groups. Systems "
                "whose bars overlap are not told apart by these prompts: more prompts narrow the bars.")
    support = page.rows("family_support")
    lifts = page.rows("family_lifts")
    if support.height or lifts.height:
        _subsection(page, "Family preference", _family_lead(lifts, summary))
    elif summary.get("fps_reason"):  # the section is there, with why it has no numbers (issue 24, point 4)
        page.add("<h4>Family preference</h4>")
        page.add(f'<p class="note">No family preference score: {_e(summary["fps_reason"])}.</p>')
    page.figure("family-support", lambda: _figure_support(support, title),
                "Family support matrix: mean support (0\u20131, 0.5 = even) a judge family gives candidates of "
                "each family; the diagonal is same-family support ([Awuni2026] figure 2).")
    page.add(_family_html(lifts, summary))
    gstudy = page.rows("pairwise_gstudy")
    if gstudy.height:
        _subsection(page, "Pairwise G-study", _gstudy_lead(gstudy))
    page.add(_gstudy_html(gstudy))


def _subsection(page: SectionBuilder, title: str, lead: str) -> None:
    page.add(f"<h4>{_e(title)}</h4>")
    page.lead(lead)


def _has_values(rows: pl.DataFrame, column: str) -> bool:
    return rows.height > 0 and column in rows.columns and rows[column].null_count() < rows.height


def _extreme(rows: pl.DataFrame, column: str, *, absolute: bool = False) -> tuple[str, float] | None:
    """The judge with the largest (absolute) value of ``column`` and that value; None without values."""
    if not _has_values(rows, column):
        return None
    known = rows.filter(pl.col(column).is_not_null())
    key = pl.col(column).abs() if absolute else pl.col(column)
    judge, value = known.sort(key, descending=True).select("judge_id", column).row(0)
    return str(judge), float(value)


def _pct(value: Any) -> str:
    """A share (0-1) as a percentage to 3 significant digits."""
    return _num(None if value is None else 100 * float(value))


def _section_lead(judges: pl.DataFrame, ratings: pl.DataFrame) -> str:
    text = "How far the pairwise judges can be trusted, and which systems their verdicts tell apart"
    slot = _extreme(judges, "slot_a_advantage", absolute=True)
    reversal = _extreme(judges, "reversal_rate")
    facts = []
    if slot is not None and abs(slot[1]) > 0:
        facts.append(f"the largest slot-A advantage is {slot[1]:+.3g} points ({slot[0]})")
    if reversal is not None:
        facts.append(f"the largest AB/BA reversal rate {_pct(reversal[1])} % ({reversal[0]})")
    if facts:
        text += ": " + " and ".join(facts) + "; judge every pair in both orders and trust a rating difference only "
        text += "where the intervals separate"
    elif ratings.height:
        text += ": trust a rating difference only where the intervals separate"
    return text + "."


def _judges_lead(judges: pl.DataFrame) -> str:
    text = ("One row per judge, rates in % of its games: a slot-A advantage far from 0 means the judge favours the "
            "answer shown first")
    slot = _extreme(judges, "slot_a_advantage", absolute=True)
    if slot is not None and abs(slot[1]) > 0:
        text += f" ({slot[0]}: {slot[1]:+.3g} points)"
    flagged = (judges.filter(pl.col("exceeds_content_noise_bound").fill_null(False)).height
               if "exceeds_content_noise_bound" in judges.columns else 0)
    if flagged:
        text += (f", and {flagged} judge{'s' if flagged != 1 else ''} reverse{'' if flagged != 1 else 's'} on more "
                 "than half the pairs seen in both orders, which content noise alone cannot do")
    return text + "; average both orders of every pair, or drop a judge that follows position."


def _agreement_lead(agreement: pl.DataFrame) -> str:
    text = "Cohen's kappa between two judges on the battles both judged (1 = always agree, 0 = chance)"
    known = agreement.filter(pl.col("kappa").is_not_null()).sort("kappa")
    if known.height:
        a, b, kappa = known.select("judge_1", "judge_2", "kappa").row(0)
        text += f": the weakest pair, {a} and {b}, agree at {_num(kappa)}"
        if kappa < SLIGHT_KAPPA:
            text += f" (below {SLIGHT_KAPPA}: barely above chance), so average several judges rather than trust one"
        else:
            text += ", so the judges largely agree and one of them is a fair stand-in for the panel"
    return text + "."


def _ratings_lead(ratings: pl.DataFrame) -> str:
    text = ("Bradley-Terry ratings in Elo points (400/ln 10 per logit) with 95 % intervals: systems whose "
            "prompt-bootstrap intervals overlap cannot be told apart, so report the prompt bootstrap, not the "
            "battle bootstrap")
    if "rank_low" in ratings.columns and ratings["rank_low"].null_count() < ratings.height:
        # Named from the rank ranges, the one statement of who can be told apart (issue 24, point 1).
        first = ratings.filter(pl.col("rank_low") == 1).sort("rank")["system_id"].to_list()
        if first:
            text += f"; {', '.join(str(s) for s in first)} could rank first (rank range from 1) of {ratings.height} systems"
    return text + "."


def _family_lead(lifts: pl.DataFrame, summary: dict[str, Any]) -> str:
    text = "Mean support each judge family gives each candidate family (0\u20131, 0.5 = even)"
    fps = summary.get("fps")
    if fps is not None:
        text += (f": the family preference score {float(fps):+.3g} (same-family minus cross-family support) is "
                 f"{'a self-preference' if fps > 0 else 'no self-preference'}")
    if _has_values(lifts, "corrected_p"):
        hits = lifts.filter(pl.col("corrected_p") < FAMILY_TEST_LEVEL)["family"].to_list()
        if hits:
            text += (f"; the corrected test finds it in {', '.join(map(str, hits))} (p < {FAMILY_TEST_LEVEL}), so "
                     "do not let those families judge their own candidates")
        else:
            text += f"; the corrected test finds no family preferring its own (p < {FAMILY_TEST_LEVEL})"
    return text + "."


def _gstudy_lead(rows: pl.DataFrame) -> str:
    text = ("Pairwise G-study on the win indicator against the baseline, per presentation order ([Anand2026] "
            "table 3): components in squared win-rate units, ceiling and E\u03c1\u00b2 from 0 to 1")
    if "judges_needed" in rows.columns and rows["judges_needed"].null_count() < rows.height:
        need = rows.filter(pl.col("judges_needed").is_not_null()).sort("judges_needed", descending=True)
        arm, judges = need.select("arm", "judges_needed").row(0)
        text += f"; the {arm} arm needs {_num(judges)} judges to reach the target"
    return text + "."


def _judges_html(rows: pl.DataFrame) -> str:
    if rows.height == 0:
        return ""
    present = [(c, label, pct) for c, label, pct in JUDGE_COLUMNS if c in rows.columns]
    cells = []
    flags = []
    for r in rows.sort("judge_id").iter_rows(named=True):
        cells.append([_e(r["judge_id"]), *(_e(_pct(r[c]) if pct else _num(r[c])) for c, _, pct in present)])
        flags.append("flag" if r.get("exceeds_content_noise_bound") else "")
    header = ["judge", *(_e(label) for _, label, _ in present)]
    note = ('<p class="note">Rows marked reverse on more than half of their pairs, which the independent '
            "content-noise model cannot produce: read them as position-following (q).</p>" if any(flags) else "")
    return _table(header, cells, numeric=[False] + [True] * len(present), row_classes=flags) + note + _why_none(rows)


def _why_none(rows: pl.DataFrame) -> str:
    """Why the position columns of some judges are empty (the JSON's ``null_reasons`` say it per number)."""
    def judges(mask: pl.Expr) -> list[str]:
        return [str(j) for j in rows.filter(mask)["judge_id"].to_list()]

    parts = []
    if "first_slot_win_rate" in rows.columns:
        unknown = judges(pl.col("first_slot_win_rate").is_null())
        if unknown:
            parts.append(f"no game of known presentation order ({', '.join(unknown)}): the log does not say "
                         "which answer was shown first, so no position statistic can be estimated")
    if "reversal_rate" in rows.columns and "first_slot_win_rate" in rows.columns:
        one_order = judges(pl.col("reversal_rate").is_null() & pl.col("first_slot_win_rate").is_not_null())
        if one_order:
            parts.append(f"no pair seen in both presentation orders ({', '.join(one_order)}): no reversal rate "
                         "or position-following q")
    if not parts:
        return ""
    return '<p class="note">\u2014: ' + _e("; ".join(parts)) + ".</p>"


def _ratings_html(rows: pl.DataFrame, summary: dict[str, Any]) -> str:
    if rows.height == 0:
        return ""
    ratio = summary.get("interval_ratio")
    lead = ""
    if ratio is not None:
        lead = (f"<p>The prompt bootstrap's intervals are {_e(_num(ratio))}x as wide as the battle bootstrap's "
                "(median over systems): a battle bootstrap treats the two orders of a prompt and every judge's "
                "verdict on it as independent. Ties count half a win each way.</p>")
    columns = ["rating_elo", "low_elo", "high_elo", "rank", "rank_low", "rank_high", "tie_group", "rating_lc_elo"]
    present = [c for c in columns if c in rows.columns]
    cells = [[_e(r["system_id"]), *(_e(_num(r[c])) for c in present)] for r in rows.sort("rank").iter_rows(named=True)]
    header = ["system", *(f"<code>{_e(c)}</code>" for c in present)]
    return lead + _table(header, cells, numeric=[False] + [True] * len(present))


def _family_html(rows: pl.DataFrame, summary: dict[str, Any]) -> str:
    if rows.height == 0:
        return ""
    fps = summary.get("fps")
    note = (f'<p class="note">Family preference score (mean same-family support minus mean cross-family support): '
            f"{_e(_num(fps))}. The naive per-family statistic compares a judge family's support across "
            "candidate families and so carries candidate quality; the corrected one holds the candidate family "
            "fixed and compares its same-family judges with the other judges (one-sided permutation p-value).</p>"
            ) if fps is not None else ""
    columns = [(c, label) for c, label in FAMILY_COLUMNS if c in rows.columns]
    cells = [[_e(r["family"]), *(_e(p_value_text(r[c]) if c.endswith("_p") else _num(r[c])) for c, _ in columns)]
             for r in rows.sort("family").iter_rows(named=True)]
    return note + _table(["family", *(_e(label) for _, label in columns)], cells,
                         numeric=[False] + [True] * len(columns))


def _gstudy_html(rows: pl.DataFrame) -> str:
    if rows.height == 0:
        return ""
    columns = [(c, label) for c, label in GSTUDY_COLUMNS if c in rows.columns]

    def cell(column: str, value: Any) -> str:
        if column == "reason":
            return str(value or "")
        return _pct(value) if column == "share" else _num(value)

    cells = [[_e(r["arm"]), *(_e(cell(c, r[c])) for c, _ in columns)] for r in rows.iter_rows(named=True)]
    return _table(["arm", *(_e(label) for _, label in columns)], cells,
                  numeric=[False] + [c != "reason" for c, _ in columns])


def _figure_position(rows: pl.DataFrame, title: str) -> Figure | None:
    # Symmetric about 0 and at least +-10 points: a bar of 0 reads as "no bias", not as a hair.
    return judge_interval_figure(rows, title, "slot_a_advantage", "slot_a_low", "slot_a_high",
                                 xlabel="slot-A advantage (percentage points)", min_half=10.0)


def _figure_reversals(rows: pl.DataFrame, title: str) -> Figure | None:
    return judge_interval_figure(rows, title, "reversal_rate", "reversal_low", "reversal_high", scale=100.0,
                                 xlabel="AB/BA reversal rate (% of pairs seen in both orders)", bound=50.0,
                                 bound_label="50% content-noise bound")


def _square_heatmap(z: np.ndarray, rows: list[str], cols: list[str], title: str, label: str,
                    norm: Normalize, xlabel: str, ylabel: str, fmt: str) -> Figure:
    row_labels = [_mpl(r) for r in rows]
    col_labels = [_mpl(c) for c in cols]
    left = 0.75 + 0.075 * max(map(len, row_labels))
    bottom = 0.6 + 0.075 * max(map(len, col_labels))  # column labels stand upright (90 degrees)
    width = max(4.5, min(14.0, left + 2.5 + 0.6 * len(cols)))
    # At least 2.1 in of heatmap: the colour bar's label must fit along it.
    height = max(bottom + 0.45 + 2.1, min(14.0, bottom + 0.8 + 0.4 * len(rows)))
    fig = _new_figure(width, height)
    fig.subplots_adjust(left=min(left / width, 0.5), right=1 - 1.2 / width, bottom=min(bottom / height, 0.5),
                        top=1 - 0.45 / height)
    ax = fig.add_subplot()
    image = ax.imshow(np.ma.masked_invalid(z), cmap="cividis", norm=norm, aspect="auto")
    ax.set_xticks(range(len(cols)), col_labels, rotation=90)
    ax.set_yticks(range(len(rows)), row_labels)
    if z.size <= 144:
        mid = 0.5 * (float(norm.vmin or 0.0) + float(norm.vmax or 1.0))
        for (r, c), v in np.ndenumerate(z):
            if np.isfinite(v):
                ax.text(c, r, format(v, fmt), ha="center", va="center", fontsize=7,
                        color="black" if v > mid else "white")
    fig.colorbar(image, ax=ax, label=label)
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.set_title(_mpl(title))
    return fig


def _figure_agreement(rows: pl.DataFrame, title: str) -> Figure | None:
    if rows.height == 0 or rows["kappa"].null_count() == rows.height:
        return None
    both = pl.concat([
        rows.select("judge_1", "judge_2", "kappa"),
        rows.select(pl.col("judge_2").alias("judge_1"), pl.col("judge_1").alias("judge_2"), "kappa"),
    ])
    judges, _, z = _matrix(both, "judge_1", "judge_2", "kappa")
    finite = z[np.isfinite(z)]
    low, high = float(finite.min()), float(finite.max())
    if high - low < 1e-9:
        low, high = low - 0.05, high + 0.05
    return _draw(lambda: _square_heatmap(z, judges, judges, title, "Cohen's kappa (\u22121 to 1)",
                                         Normalize(low, high), "judge", "judge", ".2f"))


def _figure_support(rows: pl.DataFrame, title: str) -> Figure | None:
    if rows.height == 0:
        return None
    judge_families, candidate_families, z = _matrix(rows, "judge_family", "candidate_family", "support")
    finite = z[np.isfinite(z)]
    if not finite.size:
        return None
    half = max(float(np.abs(finite - 0.5).max()), 0.02)
    return _draw(lambda: _square_heatmap(z, judge_families, candidate_families, title,
                                         "mean support (0\u20131, 0.5 = even)", CenteredNorm(0.5, half),
                                         "candidate family", "judge family", ".3f"))


def _figure_ratings(rows: pl.DataFrame, title: str) -> Figure | None:
    if rows.height == 0:
        return None
    ordered = rows.sort("rating_elo", descending=True)
    labels = [_mpl(s) for s in ordered["system_id"].to_list()]

    def column(name: str) -> np.ndarray:
        return ordered[name].cast(pl.Float64).fill_null(float("nan")).to_numpy() if name in ordered.columns \
            else np.full(ordered.height, np.nan)

    y = column("rating_elo")
    groups = ordered["tie_group"].to_list() if "tie_group" in ordered.columns else [None] * ordered.height

    def build() -> Figure:
        fig, ax = _horizontal(labels, title)
        positions = np.arange(len(labels))
        for k, group in enumerate(dict.fromkeys(g for g in groups if g is not None)):
            members = [p for p, g in zip(positions, groups, strict=True) if g == group]
            if k % 2 == 0 and members:
                ax.axhspan(min(members) - 0.5, max(members) + 0.5, color="0.92", zorder=0)
        for offset, (low, high, colour, name) in enumerate(
            ((column("low_elo"), column("high_elo"), PROMPT_COLOUR, "prompt bootstrap"),
             (column("battle_low_elo"), column("battle_high_elo"), BATTLE_COLOUR, "battle bootstrap"))
        ):
            shift = -0.15 if offset == 0 else 0.15
            ok = np.isfinite(low) & np.isfinite(high)
            ax.hlines(positions[ok] + shift, low[ok], high[ok], color=colour, linewidth=2.2, label=name)
        ax.plot(y, positions, "o", color="black", markersize=4, label="rating")
        ax.set_yticks(positions, labels)
        ax.invert_yaxis()
        ax.set_xlabel("Bradley-Terry rating (Elo scale: 400/ln 10 per logit)")
        ax.legend(fontsize=8, loc="lower right")
        ax.grid(True, axis="x", alpha=0.3)
        return fig

    return _draw(build)
