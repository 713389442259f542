"""The sequential-judging analysis's report section: serial dependence, the Markov GLMM, its check, selection, groups.

Figures: per judge, the lag-1 serial contrast of the raw ratings and the
GLMM's lag-1 coefficient, each with its batch-bootstrap 95% interval
([LiDing2026]_ figures 1-2: the dependence on the preceding rating, visible in
the raw data and net of the rated unit, its position and the batch's level).

References
----------
.. [LiDing2026] T. Li and J. Ding, "Trustworthy Method Comparison with AI Judges", 2026
   (``papers/trustworthy-comparison-ai-judges.txt``).
"""

from __future__ import annotations

import numpy as np
import polars as pl
from matplotlib.figure import Figure

from jurymeter.render.figures import draw as _draw
from jurymeter.render.figures import interval_bars as _bars
from jurymeter.render.figures import labelled_rows_figure as _horizontal
from jurymeter.render.figures import mpl_text as _mpl
from jurymeter.render.html import SectionBuilder, p_value_text
from jurymeter.render.html import escape as _e
from jurymeter.render.html import number as _num
from jurymeter.render.html import table_html as _table

# Okabe-Ito blue and vermillion: an interval that excludes 0 is drawn in vermillion.
INSIDE_COLOUR, EXCLUDES_COLOUR = "#0072B2", "#D55E00"


INTRO = (
    "<p>A judge that rates several outputs in one call or session leans on the rating before. The "
    "<em>serial contrast</em> is the slope of a rating on the previous one in the same batch (rating points "
    "per rating point; 0 = no dependence); the GLMM's <em>&rho;<sub>1</sub></em> is the same dependence net "
    "of the rated unit, its position and the batch's own level (logit per rating point). To shuffle the order "
    "in every batch, or to balance it with a Williams-square plan, see <code>jurymeter batch-plan</code> "
    "([LiDing2026] tables 2-3).</p>"
)
SELECTION_HEADERS = {"method": "method", "k": "k", "units": "units", "stability": "stability (% of resamples)",
                     "n_resamples": "resamples"}
GROUP_HEADERS = {"method": "method", "estimate": "A \u2212 B (naive: points; model: logit)", "se": "SE",
                 "z": "z", "p_value": "p (Wald)", "outcome": "outcome", "n_resamples": "resamples",
                 "reason": "why none"}
PERCENT_COLUMNS = frozenset({"stability"})
# The Wald test's conventional level, named in the group comparison's lead.
GROUP_TEST_LEVEL = 0.05
# Share of a check's terms outside their 95% intervals that chance alone leaves.
CHECK_CHANCE = 0.05


def sequential_section(page: SectionBuilder) -> None:
    """Every part that has rows; nothing when the analysis did not run on this fit.

    The section and each subsection open with a lead sentence (:meth:`SectionBuilder.lead`)
    built from the fit's numbers.
    """
    judges = page.rows("sequential_judges")
    if judges.height == 0:
        return
    page.lead(_section_lead(judges))
    page.add(INTRO)
    _subsection(page, "Serial dependence", _dependence_lead(judges))
    page.add(_judges_html(judges))
    page.figure("serial-dependence", lambda: _figure_dependence(judges, page.title),
                "Per judge: the lag-1 serial contrast of the raw ratings (rating points per rating point) and "
                "the Markov GLMM's lag-1 coefficient rho_1 (logit per rating point), with 95% batch-bootstrap "
                "intervals; vermillion where the interval excludes 0 ([LiDing2026] figures 1-2).")
    check = page.rows("sequential_check")
    if check.height:
        _subsection(page, "Predictive check", _check_lead(check))
        page.add(_check_html(check))
    selection = page.rows("sequential_selection")
    if selection.height:
        _subsection(page, "Selection", _selection_lead(selection))
        page.add(_per_judge_html(selection, SELECTION_HEADERS))
    groups = page.rows("sequential_groups")
    if groups.height:
        _subsection(page, "Group comparison", _groups_lead(groups))
        page.add(GROUPS_NOTE + _per_judge_html(groups, GROUP_HEADERS))


def _subsection(page: SectionBuilder, title: str, lead: str) -> None:
    page.add(f"<h4>{_e(title)}</h4>")
    page.lead(lead)


def _excluding_zero(judges: pl.DataFrame, column: str) -> pl.DataFrame:
    """Judges whose 95% interval of ``column`` lies wholly on one side of 0."""
    low, high = f"{column}_low", f"{column}_high"
    if not {column, low, high} <= set(judges.columns):
        return judges.clear()
    return judges.filter((pl.col(low) > 0) | (pl.col(high) < 0))


def _section_lead(judges: pl.DataFrame) -> str:
    text = "Whether a judge's rating leans on the rating before it in the same batch"
    if "rho_1" not in judges.columns or judges["rho_1"].null_count() == judges.height:
        return text + ": the GLMM's lag-1 term \u03c1\u2081 could not be estimated here (see the reasons below)."
    excluding = _excluding_zero(judges, "rho_1")
    known = judges.filter(pl.col("rho_1").is_not_null())
    judge, rho = known.sort(pl.col("rho_1").abs(), descending=True).select("judge_id", "rho_1").row(0)
    if excluding.height == 0:
        return (text + f": no judge's \u03c1\u2081 interval excludes 0 (largest {rho:+.3g} logit per rating point, "
                f"{judge}), so batch order does not measurably move these ratings.")
    return (text + f": \u03c1\u2081's 95% interval excludes 0 for {excluding.height} of {known.height} judges (largest "
            f"{rho:+.3g} logit per rating point, {judge}), so shuffle the order in every batch and compare "
            "groups by the model contrast, not by raw averages.")


def _dependence_lead(judges: pl.DataFrame) -> str:
    text = ("Per judge, the lag-1 dependence with its 95% batch-bootstrap interval (serial contrast in rating "
            "points per rating point, \u03c1\u2081 in logit per rating point, batch SD in logit): bars in vermillion "
            "exclude 0")
    if {"top_naive", "top_model"} <= set(judges.columns):
        differ = judges.filter(pl.col("top_naive").is_not_null() & pl.col("top_model").is_not_null()
                               & (pl.col("top_naive") != pl.col("top_model"))).height
        text += (f"; the top unit by average and by model differ for {differ} judge{'s' if differ != 1 else ''}, "
                 "where the model's is the one to report" if differ else
                 "; the top unit by average and by model agree for every judge")
    return text + "."


def _check_lead(check: pl.DataFrame) -> str:
    outside = check.filter(pl.col("outside"))
    share = outside.height / check.height if check.height else 0.0
    text = (f"Held-out batches against the GLMM's 95% prediction intervals (transition frequencies as "
            f"probabilities, conditional entropies in bits): {outside.height} of {check.height} terms "
            f"({_num(100 * share)} %) fall outside")
    if outside.height:
        worst = outside.group_by("judge_id").len().sort("len", "judge_id", descending=[True, False]).row(0)
        text += f", most for {worst[0]} ({worst[1]})"
    if share <= CHECK_CHANCE:
        text += ", no more than chance leaves outside, so the model reproduces the batches"
    else:
        text += ", more than the 5 % chance leaves outside: the model misses a longer memory, so try more lags"
    return text + "."


def _selection_lead(selection: pl.DataFrame) -> str:
    text = ("The top units by the naive average of their ratings and by the model's quality \u03b8, with the "
            "share of batch-bootstrap resamples that pick the same (stability, %): report a top set only where "
            "its stability is high, and the model's where the two differ")
    known = selection.filter(pl.col("stability").is_not_null()) if "stability" in selection.columns else selection.clear()
    if known.height:
        judge, method, k, stability = known.sort("stability").select("judge_id", "method", "k", "stability").row(0)
        text += f" (least stable: {judge}'s top {k} by {method}, {_num(100 * stability)} %)"
    return text + "."


def _groups_lead(groups: pl.DataFrame) -> str:
    text = ("Group A against group B by the naive contrast of mean ratings (rating points) and by the model "
            "contrast of mean quality (logit), each with a batch-bootstrap SE and a Wald p-value")
    model = groups.filter((pl.col("method") == "model") & pl.col("p_value").is_not_null())
    if model.height:
        hits = int((model["p_value"] < GROUP_TEST_LEVEL).sum())
        text += (f": the model contrast differs from 0 (p < {GROUP_TEST_LEVEL}) for {hits} of {model.height} "
                 "judges; trust it over the naive one")
    return text + "."


def _judges_html(rows: pl.DataFrame) -> str:
    columns = [("ratings", "ratings"), ("batches", "batches"), ("response", "scale"),
               ("serial_contrast", "serial contrast (points per point)"),
               ("rho_1", "&rho;<sub>1</sub> (logit per point)"),
               ("batch_sd", "batch SD (logit)"), ("check_outside", "check terms outside"),
               ("top_naive", "top by average"), ("top_model", "top by model")]
    cells = []
    for r in rows.sort("judge_id").iter_rows(named=True):
        row = [_e(r["judge_id"])]
        for c, _ in columns:
            value = r.get(c)
            if c in ("serial_contrast", "rho_1", "batch_sd") and value is not None:
                low, high = r.get(f"{c}_low"), r.get(f"{c}_high")
                text = _num(value) + (f" [{_num(low)}, {_num(high)}]" if low is not None and high is not None else "")
                row.append(_e(text))
            else:
                row.append(_e(_cell(value)))
        cells.append(row)
    table = _table(["judge", *(label for _, label in columns)], cells,
                   numeric=[False, True, True, False, True, True, True, True, False, False])
    # Each judge's parts that could not be estimated; "no groups given" is one setting, said once.
    notes, no_groups = [], False
    for r in rows.sort("judge_id").iter_rows(named=True):
        parts = [p for p in (r.get("reasons") or "").split("\n") if p]
        no_groups = no_groups or any(p.startswith("groups: no groups given") for p in parts)
        parts = [p for p in parts if not p.startswith("groups: no groups given")]
        if parts:
            notes.append(f"{r['judge_id']}: {'; '.join(parts)}")
        if r.get("pooled"):
            notes.append(f"{r['judge_id']}: {r['pooled']}")
    note = "".join(f'<p class="note">{_e(text)}.</p>' for text in notes)
    if no_groups:
        note += ('<p class="note">No group comparison: name two groups of units in <code>[fit.sequential]</code> '
                 "<code>group_a</code> and <code>group_b</code> (or <code>jurymeter sequential --group-a ... "
                 "--group-b ...</code>).</p>")
    return table + note


def _check_html(rows: pl.DataFrame) -> str:
    if rows.height == 0:
        return ""
    outside = rows.filter(pl.col("outside"))
    lead = ('<p class="note">The GLMM, fitted on the other batches, simulates the held-out batches '
            "in their own orders; each transition frequency P(Y<sub>t</sub> = a | Y<sub>t-1</sub> = b) and "
            "conditional entropy H(Y<sub>t</sub> | Y<sub>t-1</sub>, ..., Y<sub>t-k</sub>) (bits) observed on "
            "them is compared with its 95% prediction interval ([LiDing2026] figure 3).</p>")
    if outside.height == 0:
        return lead + f'<p class="note">All {rows.height} terms of every judge fall inside their intervals.</p>'
    cells = [[_e(r["judge_id"]), _e(r["name"]), _e(_num(r["observed"])), _e(_num(r["low"])), _e(_num(r["high"]))]
             for r in outside.sort("judge_id", "statistic", "order").iter_rows(named=True)]
    return lead + _table(["judge", "term", "observed (probability or bits)", "95% low", "95% high"], cells,
                         numeric=[False, False, True, True, True])


GROUPS_NOTE = ('<p class="note">Under equal mean quality the naive contrast names the group with the larger '
               "spread more and more surely as batches grow ([LiDing2026] table 2): trust the model contrast.</p>")


def _per_judge_html(rows: pl.DataFrame, headers: dict[str, str]) -> str:
    """A per-judge table (its own columns after the judge, headed with their units); nothing without rows."""
    if rows.height == 0:
        return ""
    value_columns = [c for c in rows.columns if c not in ("judge_id", "item_set", "universe", "population")]

    def text(column: str, value: object) -> str:
        if column == "p_value" or column.endswith("_p"):
            return p_value_text(value)
        if column in PERCENT_COLUMNS and isinstance(value, float):
            return _num(100 * value)
        return _cell(value)

    cells = [[_e(r["judge_id"]), *(_e(text(c, r[c])) for c in value_columns)] for r in rows.iter_rows(named=True)]
    return _table(["judge", *(_e(headers.get(c, c)) for c in value_columns)], cells,
                  numeric=[False] + [rows[c].dtype.is_numeric() for c in value_columns])


def _cell(value: object) -> str:
    """A table cell's text: numbers as the page prints them, lists joined, nulls empty."""
    if value is None:
        return ""
    if isinstance(value, float):
        return _num(value)
    if isinstance(value, list):
        return ", ".join(str(v) for v in value)
    return str(value)


def _figure_dependence(rows: pl.DataFrame, title: str) -> Figure | None:
    panels = [(c, f"{c}_low", f"{c}_high", label) for c, label in (
        ("serial_contrast", "serial contrast (points per point)"),
        ("rho_1", "GLMM rho_1 (logit per point)")) if c in rows.columns and rows[c].null_count() < rows.height]
    if not panels:
        return None
    ids = sorted(str(j) for j in rows["judge_id"].to_list())
    labels = [_mpl(j) for j in ids]  # shortened for the figure: rows are placed by the full id

    def build() -> Figure:
        fig, _ = _horizontal(labels, title)
        # The labelled-rows figure's size and side margins (in inches: clf() resets them), for two panels.
        pars, width = fig.subplotpars, fig.get_figwidth()
        left, right = pars.left * width, (1 - pars.right) * width
        fig.clf()
        wide = max(width, 9.0)
        fig.set_size_inches(wide, fig.get_figheight() + 0.5)
        axes = fig.subplots(1, len(panels), sharey=True, squeeze=False)[0]
        tall = fig.get_figheight()  # 0.7 in below the panels for the axis, 0.75 in above for both titles
        fig.subplots_adjust(left=left / wide, right=1 - right / wide, wspace=0.08, bottom=0.7 / tall,
                            top=1 - 0.75 / tall)
        for ax, (value, low, high, xlabel) in zip(axes, panels, strict=True):
            _, y, err = _bars(rows, value, low, high)
            placed = rows.filter(pl.col(value).is_not_null()).sort("judge_id")["judge_id"].cast(pl.String).to_list()
            positions = np.array([ids.index(j) for j in placed], dtype=int)
            lo, hi = y - err[0], y + err[1]
            colours = [EXCLUDES_COLOUR if (a > 0 or b < 0) and (a != b) else INSIDE_COLOUR for a, b in zip(lo, hi, strict=True)]
            ax.barh(positions, y, xerr=err, color=colours, alpha=0.85, capsize=3)
            ax.axvline(0.0, color="black", linewidth=0.8)
            reach = float(np.nanmax(np.abs(np.concatenate([lo, hi])))) if len(y) else 1.0
            half = 1.15 * reach if reach > 0 else 1.0
            ax.set_xlim(-half, half)
            ax.set_title(xlabel, fontsize=9)
            ax.grid(True, axis="x", alpha=0.3)
        axes[0].set_yticks(np.arange(len(labels)), labels)
        axes[0].invert_yaxis()
        fig.suptitle(_mpl(title))
        return fig

    return _draw(build)
