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

import numpy as np
import polars as pl
from matplotlib.figure import Figure
from matplotlib.ticker import MaxNLocator

from jurymeter.analyses.gstudy.summary import dropped_text
from jurymeter.render.figures import (
    OKABE_ITO,
    ROUND_TICKS,
    judge_interval_figure,
    rank_interval_figure,
)
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
# Each quantity's label says its unit (E rho^2 and Phi are shares of variance, 0-1).
DSTUDY_LABELS = {
    "erho2": "E\u03c1\u00b2 at the observed sizes (0\u20131)",
    "phi": "\u03a6 at the observed sizes (0\u20131)",
    "mdd95": "MDD95 at the observed sizes (score points)",
    "erho2_30": "E\u03c1\u00b2 at 30 items, 1 judge, 1 run (0\u20131)",
    "mdd95_30": "MDD95 at 30 items, 1 judge, 1 run (score points)",
    "mdd95_unlimited_items": "MDD95 with unlimited items, 1 judge (score points)",
    "ceiling": "single-judge ceiling, unlimited items (0\u20131)",
    "ceiling_3_judges": "ceiling with 3 judges (0\u20131)",
    "mdd95_in_sd_of_system_means": "MDD95 in SDs of the system means (SD)",
    "judges_needed": "judges needed for the target, 30 items, 3 runs (judges)",
    "items_needed": "items needed for the target, 1 judge, 1 run (items)",
    # The declared universe's ([fit.gstudy] fixed, judge_pool, item_pool), at the observed sizes
    "universe_erho2": "E\u03c1\u00b2 in the declared universe (0\u20131)",
    "universe_phi": "\u03a6 in the declared universe (0\u20131)",
    "universe_mdd95": "MDD95 in the declared universe (score points)",
}


def gstudy_section(page: SectionBuilder) -> None:
    """Leaderboard, components, D-study, then figures 1, 4 and appendix figure 2 of [Anand2026].

    The section and each of its subsections open with a lead sentence
    (:meth:`SectionBuilder.lead`) built from the fit's own numbers.
    """
    summary = page.summary
    components, dstudy = page.rows("components"), page.rows("dstudy")
    page.lead(_section_lead(summary, _estimates(dstudy)))
    note = summary.get("design_note")
    if note:  # the design read from the data (docs/gstudy.md, "Designs read from the data")
        page.add(f'<p class="note">Design {_e(summary.get("design"))}: {_e(note)}.</p>')
    dropped = dropped_text(summary)
    if dropped:  # what the fit left out (issue 14, point 5)
        page.add(f'<p class="note">Dropped: {_e(dropped)}.</p>')
    _leaderboard(page)
    _subsection(page, "Variance components", _components_lead(components, summary))
    page.add(_components_html(components))
    _subsection(page, "D-study", _dstudy_lead(_estimates(dstudy)))
    page.add(_dstudy_html(dstudy))
    if summary.get("universe_declared"):  # why the declared universe's rows differ from the random ones
        page.add(f'<p class="note">Declared universe: {_e(summary["universe_declared"])} '
                 "(docs/gstudy.md, \u201cFixed facets and finite pools\u201d): a fixed facet\u2019s levels are all "
                 "of the universe\u2019s, so its interaction with the systems is part of what is measured, not "
                 "error; a pool of N levels leaves the error of sampling n of them, 1 \u2212 n/N of the random "
                 "one\u2019s.</p>")
    _judge_effects(page)
    title = page.title
    curve, ceilings, grid = page.rows("erho2_curve"), page.rows("ceilings"), page.rows("nomogram")
    if curve.height or grid.height:
        _subsection(page, "Sizing", _sizing_lead(ceilings))
    page.figure(
        "erho2", lambda: _figure_erho2_curve(curve, ceilings, title),
        "E\u03c1\u00b2 (0\u20131) against the number of items, one curve per judge count; dashed: the ceiling "
        "(unlimited items) at that judge count; grey: the conventional 0.8 (after [Anand2026] figure 1).",
    )
    page.figure(
        "nomogram", lambda: _figure_nomogram(grid, title),
        "Sizing nomogram: E\u03c1\u00b2 (0\u20131) over judges \u00d7 items with the 0.7, 0.8 and 0.9 contours; "
        "the colour scale spans the values shown (after [Anand2026] figure 4).",
    )
    budget = page.rows("budget")
    if _budget_drawable(budget):
        _subsection(page, "Budget", _budget_lead(budget))
    page.figure(
        "budget", lambda: _figure_budget(budget, title),
        "MDD95 (score points) against how a budget of judge calls per system is split between judges and "
        "items; \u2605 the optimum, named in the legend (after [Anand2026] appendix figure 2).",
    )


def _leaderboard(page: SectionBuilder) -> None:
    """The leaderboard table, then its rank-interval figure (issue 16, point 3)."""
    rows = page.rows("leaderboard")
    page.add(_with_lead(_leaderboard_html(rows, page.summary), _leaderboard_lead(rows, page.summary)))
    title = page.title
    page.figure(
        "rank-intervals", lambda: rank_interval_figure(rows, title),
        "Each system's rank range (bar) and point rank (dot), best first: the range spans every system "
        "it cannot be told apart from (a mean at least the MDD above it counts as clearly better, at "
        "least the MDD below as clearly worse); a colour changes where a neighbour is at least the MDD below. Two systems whose bars "
        "overlap should not be ranked against each other: more items or judges narrow the bars.",
    )


def _range_text(low: Any, high: Any) -> str:
    if low is None or high is None:
        return "\u2014"
    return str(low) if low == high else f"{low}\u2013{high}"


def _subsection(page: SectionBuilder, title: str, lead: str) -> None:
    page.add(f"<h4>{_e(title)}</h4>")
    page.lead(lead)


def _with_lead(part: str, lead: str) -> str:
    """Put ``lead`` right after the first ``<h4>`` heading of ``part`` unless that part opens with its own."""
    heading = part.find("</h4>")
    if heading < 0 or not lead:
        return part
    cut = heading + len("</h4>")
    rest = part[cut:].lstrip()
    if rest.startswith('<p class="lead">'):
        return part
    return f'{part[:cut]}\n<p class="lead">{_e(lead)}</p>{part[cut:]}'


def _estimates(dstudy: pl.DataFrame) -> dict[str, float | None]:
    """The D-study's estimates by quantity (None where not estimated)."""
    if dstudy.height == 0:
        return {}
    return {str(q): (None if v is None else float(v)) for q, v in dstudy.select("quantity", "estimate").iter_rows()}


def _finite(value: Any) -> bool:
    return value is not None and math.isfinite(float(value))


def _plural(n: Any, word: str) -> str:
    return f"{n} {word}{'' if n == 1 else 's'}"


def _section_lead(summary: Mapping[str, Any], estimates: Mapping[str, float | None]) -> str:
    erho2 = summary.get("erho2", estimates.get("erho2"))
    mdd = summary.get("mdd95", estimates.get("mdd95"))
    sizes = ""
    if summary.get("judges") is not None and summary.get("items") is not None:
        sizes = f"With {_plural(summary['judges'], 'judge')} \u00d7 {_plural(summary['items'], 'item')} per system, "
    if not _finite(erho2):
        return (sizes or "Here, ") + (
            "how reliably the leaderboard orders its systems cannot be estimated: read the reasons in the D-study."
        )
    text = (f"{sizes}E\u03c1\u00b2 is {_num(erho2)} (0\u20131: the share of the ranking's variance that is real "
            "system difference)")
    if _finite(mdd):
        text += f" and two systems must differ by {_num(mdd)} score points (MDD95) to be told apart"
    if float(erho2) >= CONVENTIONAL_THRESHOLD:
        return text + f": at or above the conventional {CONVENTIONAL_THRESHOLD}, trust the order of systems whose rank ranges do not overlap."
    return text + f": below the conventional {CONVENTIONAL_THRESHOLD}, size the panel with the D-study before trusting the order."


def _leaderboard_lead(rows: pl.DataFrame, summary: Mapping[str, Any]) -> str:
    if rows.height == 0:
        return ""
    mdd = rows["mdd95"][0] if "mdd95" in rows.columns else summary.get("mdd95")
    if not _finite(mdd):
        return ("Systems by mean score (score points); with no MDD no difference can be called detectable, "
                "so report the order without claiming any system beats another.")
    ranges = [(lo, hi) for lo, hi in rows.select("rank_low", "rank_high").iter_rows()] if "rank_low" in rows.columns else []
    sure = sum(1 for lo, hi in ranges if lo is not None and lo == hi)
    return (f"Systems by mean score (score points), each with its rank range: systems closer than the MDD95 "
            f"({_num(mdd)} points) cannot be told apart, so publish the rank range, not the rank "
            f"({sure} of {rows.height} systems have a single plausible rank).")


def _component_value(rows: pl.DataFrame, name: str, column: str) -> float | None:
    if rows.height == 0 or column not in rows.columns:
        return None
    hit = rows.filter(pl.col("component") == name)
    value = hit[column][0] if hit.height else None
    return None if value is None else float(value)


def _components_lead(rows: pl.DataFrame, summary: Mapping[str, Any]) -> str:
    text = "Where the score variance comes from, in squared score points and % of the total"
    share = _component_value(rows, "sigma2_s", "share")
    if share is not None:
        text += f": the systems' own differences (sigma2_s) are {_num(100 * share)} %"
    sj, si = _component_value(rows, "sigma2_sj", "estimate"), _component_value(rows, "sigma2_si", "estimate")
    judges, items = summary.get("judges"), summary.get("items")
    if sj is not None and si is not None and judges and items:
        judge_part, item_part = max(sj, 0.0) / judges, max(si, 0.0) / items
        more = "judges" if judge_part > item_part else "items"
        text += (f"; the ranking's error from judges (sigma2_sj / {judges} = {_num(judge_part)}) is "
                 f"{'larger' if more == 'judges' else 'smaller'} than from items (sigma2_si / {items} = "
                 f"{_num(item_part)}), so more {more} shrink it faster")
    return text + "."


def _dstudy_lead(estimates: Mapping[str, float | None]) -> str:
    text = ("E\u03c1\u00b2 (0\u20131) and MDD95 (score points) at the observed sizes and at other panel sizes: ")
    ceiling = estimates.get("ceiling")
    judges = estimates.get("judges_needed")
    items = estimates.get("items_needed")
    target = CONVENTIONAL_THRESHOLD
    if not _finite(ceiling):
        return text + "one judge's ceiling cannot be estimated here (see why none), so size the panel by judges."
    if float(ceiling) < target:  # type: ignore[arg-type]
        text += (f"to reach {target}, add judges before items: the single-judge ceiling {_num(ceiling)} is all "
                 "one judge can reach with unlimited items")
        if _finite(judges):
            text += f", while {_num(judges)} judges reach {target} at 30 items"
        return text + "."
    text += (f"one judge can reach {target} (its ceiling with unlimited items is {_num(ceiling)}), so more items "
             "are enough")
    if _finite(items):
        text += f": {_num(items)} items with one judge"
    return text + "."


def _sizing_lead(ceilings: pl.DataFrame) -> str:
    text = ("E\u03c1\u00b2 (0\u20131) for more judges and items: pick the cheapest judges \u00d7 items on or above "
            f"the {CONVENTIONAL_THRESHOLD} line")
    known = [] if ceilings.height == 0 else [
        (int(j), float(c)) for j, c in ceilings.select("judges", "ceiling").sort("judges").iter_rows() if _finite(c)
    ]
    if known:
        shown = ", ".join(f"{_plural(j, 'judge')} {_num(c)}" for j, c in known[:3])
        text += f"; each dashed line is what that many judges reach with unlimited items ({shown})"
    return text + "."


def _budget_drawable(budget: pl.DataFrame) -> bool:
    return budget.height > 0 and budget["judges"].n_unique() >= 2


def _budget_lead(budget: pl.DataFrame) -> str:
    text = ("MDD95 (score points) when a fixed number of judge calls per system is split between judges and "
            "items: use the starred split")
    best = budget.filter(pl.col("optimal")).sort("budget") if "optimal" in budget.columns else pl.DataFrame()
    if best.height:
        calls, judges, items, mdd = best.select("budget", "judges", "items", "mdd95").row(best.height - 1)
        text += (f"; at {calls} calls the best is {_plural(judges, 'judge')} \u00d7 {_plural(items, 'item')} "
                 f"(MDD95 {_num(mdd)} points)")
    return text + "."


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
            f"<p>{rows.height} systems ranked by mean (points). No rank ranges: the minimum "
            "detectable difference cannot be estimated from these data, so no difference between two "
            "systems can be called detectable.</p>"
        )
    else:
        # The rank ranges are the one statement (issue 24, point 1): a count of tie groups (runs of
        # neighbours closer than the MDD) reads as "all tied" beside pairs the MDD tells apart.
        top = [str(r["system_id"]) for r in rows.iter_rows(named=True) if r.get("rank_low") == 1]
        parts.append(
            f"<p>{rows.height} systems; {_e(', '.join(top))} could rank first (rank range from 1). "
            f"Two systems are told apart when their means differ by at least the MDD ({_e(_num(mdd))} points); "
            "a system's rank range spans every system it cannot be told apart from. Shading alternates "
            "where a neighbour is at least the MDD below the one above it.</p>"
        )
    has_range = "rank_low" in rows.columns and "rank_high" in rows.columns
    cells, classes, previous = [], [], None
    for r in rows.iter_rows(named=True):
        group = r["tie_group"]
        shade = "tie-a" if group is None or group % 2 == 1 else "tie-b"
        classes.append(f"{shade} group-start" if previous is not None and group != previous else shade)
        previous = group
        span = [_e(_range_text(r["rank_low"], r["rank_high"]))] if has_range else []
        cells.append([_e(r["rank"]), *span, _e(r["system_id"]), _e(_num(r["mean"]))])
    header = ["rank", *(["rank range"] if has_range else []), "system", "mean (points)"]
    numeric = [True, *([True] if has_range else []), False, True]
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
    if rows.height == 0:
        return '<p class="note">No variance components.</p>'
    cells = [
        [f"<code>{_e(r['component'])}</code>", _e(_num(r.get("estimate"))),
         _e(_num(None if r.get("share") is None else 100 * r["share"])) + " %",
         _e(_interval(r.get("low"), r.get("high")))]
        for r in rows.iter_rows(named=True)
    ]
    table = _table(["component", "estimate (points\u00b2)", "share (% of total)", "95 % interval (points\u00b2)"],
                   cells, numeric=[False, True, True, True])
    return table + '\n<p class="note">Shares truncate negative estimates at zero; the D-study uses the raw values.</p>'


def _judge_effects(page: SectionBuilder) -> None:
    """Each judge's offset (its mean minus the grand mean) with its 95 % interval: table and figure.

    From the G-study's ``judge_effects`` (every fit with two or more judges;
    CyclicJudge's per-system offsets need generations). With one judge the
    table is empty and the report's reason is said instead.
    """
    rows = page.rows("judge_effects")
    if rows.height:
        rows = rows.sort("offset", descending=True, nulls_last=True)
    else:
        if page.summary.get("judges") == 1:
            _subsection(page, "Judge offsets", "No judge offsets: the fit has one judge, so there is no panel "
                        "mean to be lenient or harsh against; ingest a second judge's scores of the same outputs.")
        return
    top, bottom = rows.row(0, named=True), rows.row(rows.height - 1, named=True)
    _subsection(page, "Judge offsets", (
        f"Each judge's mean score minus the panel's (score points, 95 % interval): {top['judge_id']} is the most "
        f"lenient ({top['offset']:+.2f}) and {bottom['judge_id']} the harshest ({bottom['offset']:+.2f}); a "
        "judge whose interval excludes 0 moves every system it scores, so never compare systems scored by "
        "different single judges, and rotate judges (CyclicJudge) when each system gets one."))
    cells = [[_e(r["judge_id"]), _e(f"{r['offset']:+.3f}" if r["offset"] is not None else "\u2014"),
              _e(_num(r["se"])), _e(_interval(r["low"], r["high"]))]
             for r in rows.iter_rows(named=True)]
    page.add(_table(["judge", "offset (points)", "SE (points)", "95 % interval (points)"], cells,
                    numeric=[False, True, True, True]))
    title = page.title
    page.figure("judge-effects", lambda: _figure_judge_effects(rows, title),
                "Judge offsets from the G-study: each judge's mean minus the grand mean over the fitted records, "
                "in score points, with 95 % intervals (docs/results.md, \"Judge offsets\").")


def _figure_judge_effects(rows: pl.DataFrame, title: str) -> Figure | None:
    return judge_interval_figure(rows, title, "offset", "low", "high",
                                 xlabel="judge mean \u2212 grand mean (score points)", highlight=lambda v: v < 0)


def _dstudy_html(rows: pl.DataFrame) -> str:
    if rows.height == 0:
        return '<p class="note">No D-study quantities.</p>'
    cells = [
        [_e(DSTUDY_LABELS.get(r["quantity"], r["quantity"])), f"<code>{_e(r['quantity'])}</code>",
         _e(_num(r.get("estimate"), inf="never")), _e(_interval(r.get("low"), r.get("high"), inf="never")),
         _e(r.get("reason") or "")]  # why a quantity is not estimated (one judge: the ceiling, judges needed)
        for r in rows.iter_rows(named=True)
    ]
    return _table(["quantity (unit)", "name", "estimate", "95 % interval", "why none"], cells,
                  numeric=[False, False, True, True, False])


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
            colour = OKABE_ITO[k % len(OKABE_ITO)]
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
        ax.set_xlabel("items per system (log scale)")
        ax.set_ylabel("E\u03c1\u00b2 (0\u20131)")
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
        fig = _new_figure(6.4, 4.2, constrained=True)
        ax = fig.add_subplot()
        finite = z[np.isfinite(z)]
        low, high = _colour_limits(finite)
        masked = np.ma.masked_invalid(z)
        if len(judges) >= 2 and len(items) >= 2 and finite.size:
            filled: ColorizingArtist = ax.contourf(items, judges, masked, levels=np.linspace(low, high, 21),
                                                   cmap="viridis", vmin=low, vmax=high)
            ax.set_xscale("log")
            ax.set_yscale("log")
            ax.set_xticks(*_log_ticks(items, fig.get_figwidth(), gap=0.35))
            ax.set_yticks(*_log_ticks(judges, fig.get_figheight(), gap=0.2))
            ax.minorticks_off()
            levels = [v for v in NOMOGRAM_CONTOURS if finite.min() <= v <= finite.max()]
            if levels:
                lines = ax.contour(items, judges, masked, levels=levels, colors="white", linewidths=1.2)
                ax.clabel(lines, fmt="%.1f", fontsize=8)
        else:
            filled = ax.imshow(masked, origin="lower", aspect="auto", cmap="viridis", vmin=low, vmax=high)
            ax.set_xticks(range(len(items)), [str(v) for v in items])
            ax.set_yticks(range(len(judges)), [str(v) for v in judges])
        bar = fig.colorbar(filled, ax=ax, label="E\u03c1\u00b2 (0\u20131)")
        bar.set_ticks([t for t in MaxNLocator(nbins=6).tick_values(low, high) if low <= t <= high])
        ax.set_xlabel("items per system")
        ax.set_ylabel("judges per item")
        ax.set_title(_mpl(title))
        return fig

    return _draw(build)


def _colour_limits(values: np.ndarray) -> tuple[float, float]:
    """The colour scale's limits: the data's own minimum and maximum (widened by 0.05 when they are equal)."""
    if not values.size:
        return 0.0, 1.0
    low, high = float(values.min()), float(values.max())
    if high - low < 1e-9:
        return low - 0.05, high + 0.05
    return low, high


def _log_ticks(values: np.ndarray, inches: float, *, gap: float) -> tuple[list[float], list[str]]:
    """Ticks at the grid's values on a log axis ``inches`` long, thinned so that neighbours are ``gap`` in apart."""
    values = np.sort(np.asarray(values, dtype=np.float64))
    span = math.log(values[-1] / values[0]) if values[0] > 0 and values[-1] > values[0] else 1.0
    per_inch = 0.8 * inches / span  # the axes take about 80 % of the figure
    kept: list[float] = []
    for v in values:
        if not kept or math.log(v / kept[-1]) * per_inch >= gap:
            kept.append(float(v))
    return kept, [f"{v:g}" for v in kept]


def _figure_budget(budget: pl.DataFrame, title: str) -> Figure | None:
    """MDD95 against judges per item for each call budget, optimum marked ([Anand2026] appendix figure 2).

    No figure with fewer than two judge counts (one judge: every split is all items, nothing to compare).
    """
    if budget.height == 0 or budget["judges"].n_unique() < 2:
        return None

    def build() -> Figure:
        # Constrained layout keeps the legend and labels on the canvas; the optimum of each budget is
        # named in its legend entry, not annotated beside its star (labels there overlap and clip).
        fig = _new_figure(8.4, 4.0, constrained=True)
        ax = fig.add_subplot()
        for k, (calls,) in enumerate(budget.select("budget").unique().sort("budget").iter_rows()):
            split = budget.filter(pl.col("budget") == calls).sort("judges")
            colour = OKABE_ITO[k % len(OKABE_ITO)]
            best = split.filter(pl.col("optimal"))
            label = f"{calls} calls per system"
            if best.height:
                j, n = best.select("judges", "items").row(0)
                label += f" (best {j} \u00d7 {n})"
            ax.plot(split["judges"].to_numpy(), split["mdd95"].cast(pl.Float64).to_numpy(), "o-",
                    color=colour, markersize=4, label=label)
            if best.height:
                ax.plot(best["judges"].to_numpy(), best["mdd95"].cast(pl.Float64).to_numpy(), "*",
                        color=colour, markersize=14, markeredgecolor="black")
        judges = np.sort(budget["judges"].unique().to_numpy())
        ax.xaxis.set_major_locator(MaxNLocator(nbins=10, integer=True, min_n_ticks=min(len(judges), 3)))
        ax.set_xlabel("judges per item (items = calls / judges)")
        ax.set_ylabel("MDD95 (score points)")
        ax.set_title(_mpl(title))
        # Beside the axes, not over the curves (constrained layout makes room for it).
        fig.legend(loc="outside right upper", fontsize=8, title="\u2605 optimum (judges \u00d7 items)",
                   title_fontsize=8)
        ax.grid(True, alpha=0.3)
        return fig

    return _draw(build)
