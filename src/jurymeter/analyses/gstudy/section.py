"""The G-study's report section: leaderboard, variance components, D-study and figures 1, 2, 4.

References
----------
.. [Anand2026] A. Anand, "Ask Which, Not How Good: Sizing Benchmarks Scored by
   an LLM", 2026 (``papers/ask-which-not-how-good.txt`` and its appendix).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import matplotlib
import numpy as np
import polars as pl
from matplotlib.figure import Figure

from jurymeter.analyses.gstudy import dropped_text
from jurymeter.render.figures import ROUND_TICKS, rank_interval_figure
from jurymeter.render.figures import draw as _draw
from jurymeter.render.figures import matrix as _matrix
from jurymeter.render.figures import mpl_text as _mpl
from jurymeter.render.figures import new_figure as _new_figure
from jurymeter.render.html import SectionBuilder
from jurymeter.render.html import escape as _e
from jurymeter.render.html import interval_text as _interval
from jurymeter.render.html import number as _num
from jurymeter.render.html import table_html as _table

if TYPE_CHECKING:
    from matplotlib.colorizer import ColorizingArtist

CONVENTIONAL_THRESHOLD = 0.8
NOMOGRAM_CONTOURS = (0.7, 0.8, 0.9)
DSTUDY_LABELS = {
    "erho2": "E\u03c1\u00b2 at the observed sizes",
    "phi": "\u03a6 at the observed sizes",
    "mdd95": "MDD95 at the observed sizes (points)",
    "erho2_30": "E\u03c1\u00b2 at 30 items, 1 judge, 1 run",
    "mdd95_30": "MDD95 at 30 items, 1 judge, 1 run",
    "mdd95_unlimited_items": "MDD95 with unlimited items, 1 judge",
    "ceiling": "single-judge ceiling (unlimited items)",
    "ceiling_3_judges": "ceiling with 3 judges",
    "mdd95_in_sd_of_system_means": "MDD95 in SDs of the system means",
    "judges_needed": "judges needed for the target (30 items, 3 runs)",
    "items_needed": "items needed for the target (1 judge, 1 run)",
}


def gstudy_section(page: SectionBuilder) -> None:
    """Leaderboard, components, D-study, then figures 1, 4 and appendix figure 2 of [Anand2026]."""
    note = page.summary.get("design_note")
    if note:  # the design read from the data (docs/gstudy.md, "Designs read from the data")
        page.add(f'<p class="note">Design {_e(page.summary.get("design"))}: {_e(note)}.</p>')
    dropped = dropped_text(page.summary)
    if dropped:  # what the fit left out (issue 14, point 5)
        page.add(f'<p class="note">Dropped: {_e(dropped)}.</p>')
    _leaderboard(page)
    page.add(_components_html(page.rows("components")))
    page.add(_dstudy_html(page.rows("dstudy")))
    title = page.title
    page.figure(
        "erho2", lambda: _figure_erho2_curve(page.rows("erho2_curve"), page.rows("ceilings"), title),
        "E\u03c1\u00b2 against the number of items, one curve per judge count; dashed: the ceiling "
        "(unlimited items) at that judge count; grey: the conventional 0.8 (after [Anand2026] figure 1).",
    )
    page.figure(
        "nomogram", lambda: _figure_nomogram(page.rows("nomogram"), title),
        "Sizing nomogram: E\u03c1\u00b2 over judges \u00d7 items with the 0.7, 0.8 and 0.9 contours "
        "(after [Anand2026] figure 4).",
    )
    page.figure(
        "budget", lambda: _figure_budget(page.rows("budget"), title),
        "MDD95 against how a budget of judge calls per system is split between judges and items; "
        "\u2605 the optimum (after [Anand2026] appendix figure 2).",
    )


def _leaderboard(page: SectionBuilder) -> None:
    """The leaderboard table, then its rank-interval figure (issue 16, point 3)."""
    rows = page.rows("leaderboard")
    page.add(_leaderboard_html(rows, page.summary))
    title = page.title
    page.figure(
        "rank-intervals", lambda: rank_interval_figure(rows, title),
        "Each system's rank range (bar) and point rank (dot), best first: the range spans every system "
        "it cannot be told apart from (a mean at least the MDD above it counts as clearly better, at "
        "least the MDD below as clearly worse); colours mark the tie groups. Two systems whose bars "
        "overlap should not be ranked against each other: more items or judges narrow the bars.",
    )


def _range_text(low: Any, high: Any) -> str:
    if low is None or high is None:
        return "\u2014"
    return str(low) if low == high else f"{low}\u2013{high}"


def _leaderboard_html(rows: pl.DataFrame, entry: Mapping[str, Any]) -> str:
    parts = ["<h4>Leaderboard</h4>"]
    if rows.height == 0:
        parts.append('<p class="note">No leaderboard rows.</p>')
        return "\n".join(parts)
    rows = rows.sort("rank")
    mdd = rows["mdd95"][0] if "mdd95" in rows.columns else entry.get("mdd95")
    groups = rows["tie_group"].to_list()
    if any(g is None for g in groups):  # no MDD (docs/gstudy.md, Boundaries): ranks only
        parts.append(
            f"<p>{rows.height} systems ranked by mean (points). No rank ranges or tie groups: the minimum "
            "detectable difference cannot be estimated from these data, so no difference between two "
            "systems can be called detectable.</p>"
        )
    else:
        n_groups = len(set(groups))
        parts.append(
            f"<p>{rows.height} systems in {n_groups} tie group{'s' if n_groups != 1 else ''}. "
            f"Neighbours in one group differ by less than the MDD ({_e(_num(mdd))} points) "
            "and should not be ranked against each other. A system's rank range spans every system "
            "it cannot be told apart from (means less than the MDD apart).</p>"
        )
    has_range = "rank_low" in rows.columns and "rank_high" in rows.columns
    cells, classes, previous = [], [], None
    for r in rows.iter_rows(named=True):
        group = r["tie_group"]
        shade = "tie-a" if group is None or group % 2 == 1 else "tie-b"
        classes.append(f"{shade} group-start" if previous is not None and group != previous else shade)
        previous = group
        span = [_e(_range_text(r["rank_low"], r["rank_high"]))] if has_range else []
        cells.append([_e(r["rank"]), *span, _e(r["system_id"]), _e(_num(r["mean"])),
                      _e("\u2014" if group is None else group)])
    header = ["rank", *(["rank range"] if has_range else []), "system", "mean (points)", "tie group"]
    numeric = [True, *([True] if has_range else []), False, True, True]
    parts.append(_table(header, cells, numeric=numeric, row_classes=classes))
    parts.append(_missing_rows_html(entry))
    return "\n".join(parts)


def _missing_rows_html(entry: Mapping[str, Any]) -> str:
    """The systems the balanced block dropped: leaderboard rows that are missing, named under the table."""
    ids = entry.get("dropped_system_ids")
    if not ids:
        return ""
    n = int(entry.get("dropped_systems") or len(str(ids).split(", ")))
    return (
        f'<p class="note">Not on the leaderboard: {_e(ids)} ({n} system{"s" if n != 1 else ""} dropped to '
        "balance the block: too many of their cells are missing).</p>"
    )


def _components_html(rows: pl.DataFrame) -> str:
    parts = ["<h4>Variance components</h4>"]
    if rows.height == 0:
        parts.append('<p class="note">No variance components.</p>')
        return "\n".join(parts)
    cells = [
        [f"<code>{_e(r['component'])}</code>", _e(_num(r.get("estimate"))),
         _e(_num(None if r.get("share") is None else 100 * r["share"])) + " %",
         _e(_interval(r.get("low"), r.get("high")))]
        for r in rows.iter_rows(named=True)
    ]
    parts.append(_table(["component", "estimate", "share", "95 % interval"], cells, numeric=[False, True, True, True]))
    parts.append('<p class="note">Shares truncate negative estimates at zero; the D-study uses the raw values.</p>')
    return "\n".join(parts)


def _dstudy_html(rows: pl.DataFrame) -> str:
    parts = ["<h4>D-study</h4>"]
    if rows.height == 0:
        parts.append('<p class="note">No D-study quantities.</p>')
        return "\n".join(parts)
    cells = [
        [_e(DSTUDY_LABELS.get(r["quantity"], r["quantity"])), f"<code>{_e(r['quantity'])}</code>",
         _e(_num(r.get("estimate"), inf="never")), _e(_interval(r.get("low"), r.get("high"), inf="never")),
         _e(r.get("reason") or "")]  # why a quantity is not estimated (one judge: the ceiling, judges needed)
        for r in rows.iter_rows(named=True)
    ]
    parts.append(_table(["quantity", "name", "estimate", "95 % interval", "why none"], cells,
                        numeric=[False, False, True, True, False]))
    return "\n".join(parts)


def _figure_erho2_curve(curve: pl.DataFrame, ceilings: pl.DataFrame, title: str) -> Figure | None:
    """E rho^2 against items, one line per judge count ([Anand2026] figure 1)."""
    if curve.height == 0:
        return None

    def build() -> Figure:
        fig = _new_figure(6.4, 4.0)
        ax = fig.add_subplot()
        ceiling_of = (
            {int(j): float(c) for j, c in ceilings.select("judges", "ceiling").iter_rows() if c is not None}
            if ceilings.height
            else {}
        )
        values = []
        for k, (judges,) in enumerate(curve.select("judges").unique().sort("judges").iter_rows()):
            line = curve.filter(pl.col("judges") == judges).sort("items")
            colour = matplotlib.colormaps["tab10"](k % 10)
            y = line["erho2"].cast(pl.Float64).to_numpy()
            values.append(y)
            ax.plot(line["items"].to_numpy(), y, color=colour, label=f"{judges} judge{'s' if judges != 1 else ''}")
            ceiling = ceiling_of.get(int(judges))
            if ceiling is not None and math.isfinite(ceiling):
                ax.axhline(ceiling, color=colour, linestyle="--", linewidth=1)
                values.append(np.array([ceiling]))
        ax.axhline(CONVENTIONAL_THRESHOLD, color="0.4", linewidth=1)
        ax.set_xscale("log")
        items = curve["items"].to_numpy()
        ticks = [v for v in ROUND_TICKS if items.min() <= v <= items.max()]
        if len(ticks) >= 2:
            ax.set_xticks(ticks, [str(v) for v in ticks])
            ax.minorticks_off()
        data = np.concatenate(values)
        data = data[np.isfinite(data)]
        ax.set_ylim(min(0.0, float(data.min())) if data.size else 0.0, max(1.0, float(data.max())) if data.size else 1.0)
        ax.set_xlabel("items")
        ax.set_ylabel("E\u03c1\u00b2")
        ax.set_title(_mpl(title))
        ax.legend(loc="lower right", fontsize=8)
        ax.grid(True, which="major", alpha=0.3)
        return fig

    return _draw(build)


def _figure_nomogram(grid: pl.DataFrame, title: str) -> Figure | None:
    """Filled contours of E rho^2 over judges x items, 0.7/0.8/0.9 labelled ([Anand2026] figure 4).

    No figure without rows (one judge, fixed: no judge counts to compare).
    """
    if grid.height == 0:
        return None
    judge_list, item_list, z = _matrix(grid, "judges", "items", "erho2")
    judges, items = np.array(judge_list), np.array(item_list)

    def build() -> Figure:
        fig = _new_figure(6.4, 4.2)
        ax = fig.add_subplot()
        finite = z[np.isfinite(z)]
        low = min(0.0, float(finite.min())) if finite.size else 0.0
        high = max(1.0, float(finite.max())) if finite.size else 1.0
        masked = np.ma.masked_invalid(z)
        if len(judges) >= 2 and len(items) >= 2 and finite.size:
            filled: ColorizingArtist = ax.contourf(items, judges, masked, levels=np.linspace(low, high, 21), cmap="viridis")
            ax.set_xscale("log")
            ax.set_yscale("log")
            ax.set_xticks(items, [str(v) for v in items])
            ax.set_yticks(judges, [str(v) for v in judges])
            ax.minorticks_off()
            levels = [v for v in NOMOGRAM_CONTOURS if finite.min() <= v <= finite.max()]
            if levels:
                lines = ax.contour(items, judges, masked, levels=levels, colors="white", linewidths=1.2)
                ax.clabel(lines, fmt="%.1f", fontsize=8)
        else:
            filled = ax.imshow(masked, origin="lower", aspect="auto", cmap="viridis", vmin=low, vmax=high)
            ax.set_xticks(range(len(items)), [str(v) for v in items])
            ax.set_yticks(range(len(judges)), [str(v) for v in judges])
        fig.colorbar(filled, ax=ax, label="E\u03c1\u00b2")
        ax.set_xlabel("items")
        ax.set_ylabel("judges")
        ax.set_title(_mpl(title))
        return fig

    return _draw(build)


def _figure_budget(budget: pl.DataFrame, title: str) -> Figure | None:
    """MDD95 against judges per item for each call budget, optimum marked ([Anand2026] appendix figure 2).

    No figure with fewer than two judge counts (one judge: every split is all items, nothing to compare).
    """
    if budget.height == 0 or budget["judges"].n_unique() < 2:
        return None

    def build() -> Figure:
        fig = _new_figure(6.4, 4.0)
        ax = fig.add_subplot()
        for k, (calls,) in enumerate(budget.select("budget").unique().sort("budget").iter_rows()):
            split = budget.filter(pl.col("budget") == calls).sort("judges")
            colour = matplotlib.colormaps["tab10"](k % 10)
            ax.plot(split["judges"].to_numpy(), split["mdd95"].cast(pl.Float64).to_numpy(), "o-",
                    color=colour, markersize=4, label=f"{calls} calls per system")
            best = split.filter(pl.col("optimal"))
            if best.height:
                ax.plot(best["judges"].to_numpy(), best["mdd95"].cast(pl.Float64).to_numpy(), "*",
                        color=colour, markersize=14, markeredgecolor="black")
                for j, n, m in best.select("judges", "items", "mdd95").iter_rows():
                    ax.annotate(f"{j} \u00d7 {n}", (j, m), textcoords="offset points", xytext=(6, -10), fontsize=7)
        ax.set_xlabel("judges per item (items = budget / judges)")
        ax.set_ylabel("MDD95 (score points)")
        ax.set_title(_mpl(title))
        ax.legend(fontsize=8)
        ax.grid(True, alpha=0.3)
        return fig

    return _draw(build)
