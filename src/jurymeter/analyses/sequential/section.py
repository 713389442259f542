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
from jurymeter.render.html import SectionBuilder
from jurymeter.render.html import escape as _e
from jurymeter.render.html import number as _num
from jurymeter.render.html import table_html as _table

# Okabe-Ito blue and vermillion: an interval that excludes 0 is drawn in vermillion.
INSIDE_COLOUR, EXCLUDES_COLOUR = "#0072B2", "#D55E00"


def sequential_section(page: SectionBuilder) -> None:
    """Every part that has rows; nothing when the analysis did not run on this fit."""
    judges = page.rows("sequential_judges")
    if judges.height == 0:
        return
    page.add(
        "<p>A judge that rates several outputs in one call or session leans on the rating before. The "
        "<em>serial contrast</em> is the slope of a rating on the previous one in the same batch (rating points "
        "per rating point; 0 = no dependence); the GLMM's <em>&rho;<sub>1</sub></em> is the same dependence net "
        "of the rated unit, its position and the batch's own level (logit per rating point). Where "
        "&rho;<sub>1</sub>'s interval excludes 0, shuffle the order in every batch or use a Williams-square "
        "plan (<code>jurymeter batch-plan</code>), and compare groups with the model contrast below, not with "
        "raw averages ([LiDing2026] tables 2-3).</p>"
    )
    page.add(_judges_html(judges))
    page.figure("serial-dependence", lambda: _figure_dependence(judges, page.title),
                "Per judge: the lag-1 serial contrast of the raw ratings (rating points per rating point) and "
                "the Markov GLMM's lag-1 coefficient rho_1 (logit per rating point), with 95% batch-bootstrap "
                "intervals; vermillion where the interval excludes 0 ([LiDing2026] figures 1-2).")
    page.add(_check_html(page.rows("sequential_check")))
    page.add(_per_judge_html(page.rows("sequential_selection"), SELECTION_LEAD))
    page.add(_per_judge_html(page.rows("sequential_groups"), GROUPS_LEAD))


def _judges_html(rows: pl.DataFrame) -> str:
    columns = [("ratings", "ratings"), ("batches", "batches"), ("response", "scale"),
               ("serial_contrast", "serial contrast"), ("rho_1", "&rho;<sub>1</sub> (logit)"),
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
    lead = ("<h4>Predictive check</h4><p>The GLMM, fitted on the other batches, simulates the held-out batches "
            "in their own orders; each transition frequency P(Y<sub>t</sub> = a | Y<sub>t-1</sub> = b) and "
            "conditional entropy H(Y<sub>t</sub> | Y<sub>t-1</sub>, ..., Y<sub>t-k</sub>) (bits) observed on "
            "them is compared with its 95% prediction interval ([LiDing2026] figure 3). Terms outside say "
            "what the model misses (a longer memory: try more lags).</p>")
    if outside.height == 0:
        return lead + f'<p class="note">All {rows.height} terms of every judge fall inside their intervals.</p>'
    cells = [[_e(r["judge_id"]), _e(r["name"]), _e(_num(r["observed"])), _e(_num(r["low"])), _e(_num(r["high"]))]
             for r in outside.sort("judge_id", "statistic", "order").iter_rows(named=True)]
    return lead + _table(["judge", "term", "observed", "95% low", "95% high"], cells,
                         numeric=[False, False, True, True, True])


SELECTION_LEAD = ("<h4>Selection</h4><p>The top units by the naive average of their ratings and by the model's "
                  "quality &theta;, with the share of batch-bootstrap resamples that pick the same (stability).</p>")
GROUPS_LEAD = ("<h4>Group comparison</h4><p>Group A against group B by the naive contrast of mean ratings and by "
               "the model contrast of mean quality, each with a batch-bootstrap SE and a Wald p-value. Under equal "
               "mean quality the naive contrast names the group with the larger spread more and more surely as "
               "batches grow ([LiDing2026] table 2): trust the model contrast.</p>")


def _per_judge_html(rows: pl.DataFrame, lead: str) -> str:
    """A per-judge table (its own columns after the judge), under its lead paragraph; nothing without rows."""
    if rows.height == 0:
        return ""
    value_columns = [c for c in rows.columns if c not in ("judge_id", "item_set", "universe", "population")]
    cells = [[_e(r["judge_id"]), *(_e(_cell(r[c])) for c in value_columns)] for r in rows.iter_rows(named=True)]
    return lead + _table(["judge", *(f"<code>{_e(c)}</code>" for c in value_columns)], cells,
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
    labels = sorted(str(j) for j in rows["judge_id"].to_list())

    def build() -> Figure:
        fig, _ = _horizontal(labels, title)
        fig.clf()  # the labelled-rows figure's size and margins, for two panels side by side
        fig.set_size_inches(max(fig.get_figwidth(), 9.0), fig.get_figheight() + 0.5)
        axes = fig.subplots(1, len(panels), sharey=True, squeeze=False)[0]
        fig.subplots_adjust(wspace=0.08, bottom=max(fig.subplotpars.bottom, 0.18), top=min(fig.subplotpars.top, 0.84))
        for ax, (value, low, high, xlabel) in zip(axes, panels, strict=True):
            names, y, err = _bars(rows, value, low, high)
            positions = np.array([labels.index(n) for n in names]) if names else np.array([], dtype=int)
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
        fig.suptitle(title)
        return fig

    return _draw(build)
