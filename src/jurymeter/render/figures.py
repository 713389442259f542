r"""Shared matplotlib helpers of the report's figures.

Figures are drawn under matplotlib's default style with ``text.usetex`` off,
whatever the user's ``matplotlibrc`` says, on an explicit Agg canvas
(``FigureCanvasAgg``) without importing ``pyplot``: no window can open, and
the process-wide backend is left alone. In figures, ``$`` in data strings is
escaped as ``\$`` so matplotlib never reads them as mathtext.
"""

from __future__ import annotations

import io
from collections.abc import Callable
from typing import Any

import matplotlib
import matplotlib.style
import numpy as np
import polars as pl
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

ROUND_TICKS = (1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000, 10000)
FIGURE_TEXT_MAX = 40
FIGURE_DPI = 100
STYLE = {"text.usetex": False, "font.size": 9, "axes.titlesize": 10, "axes.titley": 1.0}
# Okabe-Ito, the colour-blind-safe qualitative palette (Okabe and Ito, "Color Universal Design", 2008),
# in its usual order without black (kept for reference lines): the colour of the k-th category is
# OKABE_ITO[k % 7]. Continuous scales are viridis or cividis, fitted to the data.
OKABE_ITO = ("#0072B2", "#E69F00", "#009E73", "#D55E00", "#56B4E9", "#CC79A7", "#F0E442")


def _mpl(text: Any) -> str:
    """A data string made literal for matplotlib: shortened, ``$`` escaped (no mathtext).

    A long string keeps its start and its end around an ellipsis: ids of one
    family often differ only at the end (``...-v1``, ``...-v2``).
    """
    s = str(text)
    if len(s) > FIGURE_TEXT_MAX:
        tail = (FIGURE_TEXT_MAX - 1) // 3
        s = s[: FIGURE_TEXT_MAX - 1 - tail] + "\u2026" + s[len(s) - tail:]
    return s.replace("$", r"\$")


def _new_figure(width: float, height: float, *, constrained: bool = False) -> Figure:
    """A figure on its own Agg canvas (no pyplot, no window, no global backend change).

    Fixed margins by default (the heatmap sets its own from its labels);
    constrained layout, two to four times slower to draw, on request.
    """
    if constrained:
        fig = Figure(figsize=(width, height), dpi=FIGURE_DPI, layout="constrained")
    else:
        fig = Figure(figsize=(width, height), dpi=FIGURE_DPI)
        fig.subplots_adjust(left=0.14, right=0.97, bottom=0.12, top=0.92)
    FigureCanvasAgg(fig)
    return fig


def _png(fig: Figure) -> bytes:
    buffer = io.BytesIO()
    with matplotlib.style.context(["default", STYLE]):
        fig.savefig(buffer, format="png", dpi=FIGURE_DPI, metadata={"Software": None})
    return buffer.getvalue()


def _draw(build: Callable[[], Figure]) -> Figure:
    """Run a figure builder under matplotlib's default style with usetex off."""
    with matplotlib.style.context(["default", STYLE]):
        return build()


def _matrix(frame: pl.DataFrame, rows: str, cols: str, value: str) -> tuple[list[Any], list[Any], np.ndarray]:
    """Long table -> (sorted row labels, sorted column labels, matrix with NaN where absent)."""
    row_labels = sorted(frame[rows].unique().to_list())
    col_labels = sorted(frame[cols].unique().to_list())
    z = np.full((len(row_labels), len(col_labels)), np.nan)
    row = {v: k for k, v in enumerate(row_labels)}
    col = {v: k for k, v in enumerate(col_labels)}
    for r, c, v in frame.select(rows, cols, value).iter_rows():
        z[row[r], col[c]] = np.nan if v is None else v
    return row_labels, col_labels, z


def _bars(rows: pl.DataFrame, value: str, low: str | None, high: str | None, *, label: str = "judge_id") -> tuple[list[str], np.ndarray, np.ndarray]:
    """One row per ``label`` with a ``value``, sorted: labels, values and the (2, n) error bars to ``low``/``high``."""
    finite = rows.filter(pl.col(value).is_not_null()).sort(label)
    labels = [_mpl(j) for j in finite[label].to_list()]
    y = finite[value].cast(pl.Float64).to_numpy()
    if low and high and low in finite.columns and high in finite.columns:
        lo = finite[low].cast(pl.Float64).fill_null(float("nan")).to_numpy()
        hi = finite[high].cast(pl.Float64).fill_null(float("nan")).to_numpy()
        err = np.vstack([np.clip(y - lo, 0, None), np.clip(hi - y, 0, None)])
        err = np.nan_to_num(err)
    else:
        err = np.zeros((2, len(y)))
    return labels, y, err


def _horizontal(labels: list[str], title: str) -> tuple[Figure, Any]:
    """A figure with one horizontal row per label, its left margin fitted to the longest label."""
    left = 0.6 + 0.075 * max(map(len, labels), default=4)
    height = max(2.4, 0.9 + 0.32 * len(labels))
    width = max(6.0, left + 4.5)
    fig = _new_figure(width, height)
    fig.subplots_adjust(left=min(left / width, 0.55), right=0.96, bottom=min(0.7 / height, 0.4), top=1 - 0.4 / height)
    ax = fig.add_subplot()
    ax.set_title(_mpl(title))
    return fig, ax


def judge_interval_figure(
    rows: pl.DataFrame, title: str, value: str, low: str, high: str, *, xlabel: str, scale: float = 1.0,
    bound: float | None = None, bound_label: str = "", min_half: float = 0.0,
    highlight: Callable[[float], bool] | None = None,
) -> Figure | None:
    """One horizontal bar per judge (``judge_id``) with its interval, ``scale`` times the columns' values.

    Without ``bound`` the axis is symmetric about a line at 0, at least
    ``min_half`` either side (so a bar of 0 reads as "none", not as a hair);
    with it, a dashed reference line at ``bound`` on a 0-100 axis. Bars for
    which ``highlight`` (of the scaled value) holds, or beyond ``bound``, are
    vermillion, the others blue (Okabe-Ito). ``None`` without a value.
    """
    if rows.height == 0 or value not in rows.columns or rows[value].null_count() == rows.height:
        return None
    labels, y, err = _bars(rows, value, low, high)

    def marked(v: float) -> bool:
        if highlight is not None:
            return highlight(v)
        return bound is not None and v > bound

    def build() -> Figure:
        fig, ax = _horizontal(labels, title)
        positions = np.arange(len(labels))
        colours = [OKABE_ITO[3] if marked(scale * v) else OKABE_ITO[0] for v in y]
        ax.barh(positions, scale * y, xerr=scale * err, color=colours, alpha=0.85, capsize=3)
        if bound is None:
            ax.axvline(0.0, color="black", linewidth=0.8)
            reach = float(np.nanmax(np.abs(scale * y) + scale * err.max(axis=0))) if len(y) else 0.0
            half = max(min_half, 1.1 * reach)
            ax.set_xlim(-half, half)
        else:
            ax.axvline(bound, color="black", linestyle="--", linewidth=1.0, label=bound_label)
            ax.set_xlim(0, 100)
            ax.legend(fontsize=8, loc="lower right")
        ax.set_yticks(positions, labels)
        ax.invert_yaxis()
        ax.set_xlabel(xlabel)
        ax.grid(True, axis="x", alpha=0.3)
        return fig

    return _draw(build)


mpl_text = _mpl
new_figure = _new_figure
png_bytes = _png
draw = _draw
interval_bars = _bars
labelled_rows_figure = _horizontal
matrix = _matrix

# --- rank intervals

# Tie groups take OKABE_ITO (above) in turn; black is left for the point ranks.
RANK_LEGEND_GROUPS = 8


FIRST_LABEL = "could rank first"
BELOW_LABEL = "cannot rank first"


def rank_interval_figure(rows: pl.DataFrame, title: str, *, label: str = "system_id") -> Figure | None:
    """Each system's rank range as a horizontal bar with its point rank, best first, coloured by whether it
    could rank first (its range includes rank 1).

    ``rows`` holds ``label``, ``rank``, ``rank_low`` and ``rank_high`` (the
    pointwise leaderboard, Bradley-Terry's ratings). The x axis is the rank (1 = best, integer ticks); one row per
    system, the figure's height growing with their count (3 to 60 systems
    stay legible at 1400 px) and its left margin with the longest label.
    The two kinds take the first two Okabe-Ito colours, and the legend names them. ``None``
    without a row that has a range (no MDD, no bootstrap).
    """
    from matplotlib.ticker import MultipleLocator

    needed = {label, "rank", "rank_low", "rank_high"}
    if rows.height == 0 or not needed <= set(rows.columns):
        return None
    ordered = rows.filter(pl.col("rank_low").is_not_null() & pl.col("rank_high").is_not_null()).sort("rank")
    if ordered.height == 0:
        return None
    labels = [_mpl(s) for s in ordered[label].to_list()]
    rank = ordered["rank"].cast(pl.Float64).to_numpy()
    low = ordered["rank_low"].cast(pl.Float64).to_numpy()
    high = ordered["rank_high"].cast(pl.Float64).to_numpy()
    # Coloured by what the rank ranges say (issue 24: the rank ranges are the one statement): whether a
    # system could rank first, not by tie groups, whose runs can contradict the ranges beside them.
    groups = [FIRST_LABEL if v <= 1.0 else BELOW_LABEL for v in low]
    order = [g for g in (FIRST_LABEL, BELOW_LABEL) if g in groups]
    colour_of = {g: OKABE_ITO[k % len(OKABE_ITO)] for k, g in enumerate(order)}
    n_ranks = int(max(float(high.max()), float(rank.max())))

    def build() -> Figure:
        fig, ax = _horizontal(labels, title)
        legend = bool(order) and len(order) <= RANK_LEGEND_GROUPS
        if legend:  # room on the right for the legend, outside the bars
            width, height = fig.get_size_inches()
            params = fig.subplotpars
            extra = 1.7
            fig.set_size_inches(width + extra, height)
            fig.subplots_adjust(left=params.left * width / (width + extra),
                                right=(params.right * width) / (width + extra))
        y = np.arange(len(labels))
        colours = [colour_of.get(g, OKABE_ITO[0]) for g in groups]
        # A bar from rank_low - 0.4 to rank_high + 0.4: a one-rank range still shows as a bar.
        ax.barh(y, high - low + 0.8, left=low - 0.4, height=0.55, color=colours, alpha=0.85, edgecolor="none")
        ax.plot(rank, y, "o", color="black", markersize=4, zorder=3, label="point rank")
        if legend:
            from matplotlib.patches import Patch

            handles = [Patch(color=colour_of[g], label=g) for g in order]
            ax.legend(handles=[*handles, *ax.get_legend_handles_labels()[0]], fontsize=8, loc="upper left",
                      bbox_to_anchor=(1.02, 1.0), borderaxespad=0.0, frameon=False)
        ax.set_yticks(y, labels)
        ax.set_ylim(len(labels) - 0.5, -0.5)  # best at the top
        ax.set_xlim(0.4, n_ranks + 0.6)
        if n_ranks <= 20:
            ax.set_xticks(np.arange(1, n_ranks + 1))
        else:
            step = 5 if n_ranks <= 60 else 10
            ax.set_xticks([1, *range(step, n_ranks + 1, step)])
            ax.xaxis.set_minor_locator(MultipleLocator(1))
        ax.set_xlabel("rank (1 = best)")
        ax.grid(True, axis="x", alpha=0.3)
        return fig

    return _draw(build)


# --- run history
# Okabe-Ito, yellow last (low contrast on white); each line also has its own marker,
# so lines stay apart in grey print and for every colour-vision type.
HISTORY_COLOURS = ("#0072B2", "#D55E00", "#009E73", "#CC79A7", "#56B4E9", "#E69F00", "#000000", "#F0E442")
HISTORY_MARKERS = ("o", "s", "^", "D", "v", "P", "X", "*")
HISTORY_FLAG_COLOUR = "#000000"  # black ring: no line takes black before its 7th judge
HISTORY_MAX_TICKS = 10


def history_figure(
    panels: list[tuple[str, pl.DataFrame]],
    runs: list[str],
    run_labels: list[str],
    *,
    title: str,
) -> Figure | None:
    """Followed numbers over runs: one panel per number, one line per subject, 95% intervals as bars.

    Parameters
    ----------
    panels : list of (y-axis label with its unit, frame)
        Each frame holds ``run_id``, ``line`` (the line's label: a judge, a
        universe), ``estimate``, ``low``, ``high`` and ``flagged`` (a change
        beyond the intervals: drawn as a large open ring).
    runs, run_labels : list of str
        The runs in order (the x positions) and their tick labels.
    title : str
        The figure's title (a data string: shortened, ``$`` escaped).

    Returns
    -------
    Figure or None
        ``None`` when no panel has a value. Drawn under the report's style (:func:`draw`).
    """
    panels = [(label, frame.filter(pl.col("estimate").is_not_null())) for label, frame in panels]
    panels = [(label, frame) for label, frame in panels if frame.height]
    if not panels:
        return None
    def build() -> Figure:
        position = {run: k for k, run in enumerate(runs)}
        lines = sorted({str(v) for _, frame in panels for v in frame["line"].to_list()})
        style = {line: (HISTORY_COLOURS[k % len(HISTORY_COLOURS)], HISTORY_MARKERS[k % len(HISTORY_MARKERS)]) for k, line in enumerate(lines)}
        # As many legend columns as fit the 9-inch width at 7 pt (about 0.055 in a character,
        # 0.5 in for the marker and the gap), at most 4: long judge ids get fewer columns.
        longest = max([len("change beyond the intervals"), *(len(_mpl(line)) for line in lines)])
        columns = max(1, min(4, int(8.6 // (0.055 * longest + 0.5))))
        legend_rows = -(-(len(lines) + 1) // columns)
        height = 0.9 + 1.7 * len(panels) + 0.22 * legend_rows
        fig = _new_figure(9.0, height)
        fig.subplots_adjust(left=0.11, right=0.98, top=1 - 0.45 / height, bottom=(0.75 + 0.22 * legend_rows) / height,
                            hspace=0.35)
        fig.suptitle(_mpl(title), fontsize=10)
        axes = fig.subplots(len(panels), 1, sharex=True, squeeze=False)[:, 0]
        step = max(1, -(-len(runs) // HISTORY_MAX_TICKS))
        flagged_any = False
        for ax, (label, frame) in zip(axes, panels, strict=True):
            for (line,), rows in frame.sort("line").group_by(["line"], maintain_order=True):
                rows = rows.with_columns(x=pl.col("run_id").replace_strict(position, default=None, return_dtype=pl.Int64))
                rows = rows.filter(pl.col("x").is_not_null()).sort("x")
                # Lines side by side around each run, so their intervals do not hide each other.
                shift = (lines.index(str(line)) - (len(lines) - 1) / 2) * min(0.3 / len(lines), 0.06)
                flagged_any = _history_line(ax, rows, shift, str(line), style[str(line)]) or flagged_any
            ax.set_ylabel(_mpl(label), fontsize=8)
            ax.grid(axis="y", color="#dddddd", linewidth=0.6)
            ax.margins(x=0.03)
        axes[-1].set_xticks(range(0, len(runs), step), [_mpl(run_labels[k]) for k in range(0, len(runs), step)],
                            rotation=30, ha="right", fontsize=7)
        axes[-1].set_xlim(-0.5, max(len(runs) - 0.5, 0.5))
        axes[-1].set_xlabel("run (started, UTC)")
        _history_legend(fig, axes, flagged=flagged_any, columns=columns)
        return fig

    return _draw(build)


def _history_line(ax: Any, rows: pl.DataFrame, shift: float, line: str, style: tuple[str, str]) -> bool:
    """One line of a history panel: its estimates, their intervals as bars, flagged changes ringed.

    ``rows`` hold the line's runs with their x positions (``x``); ``shift``
    moves the line beside the others at each run. True when a change is flagged.
    """
    x = rows["x"].to_numpy() + shift
    y = rows["estimate"].cast(pl.Float64).to_numpy()
    lo = rows["low"].cast(pl.Float64).fill_null(float("nan")).to_numpy()
    hi = rows["high"].cast(pl.Float64).fill_null(float("nan")).to_numpy()
    colour, marker = style
    # Intervals as one line collection (cheaper to draw than errorbar's caps and segments).
    has = ~(np.isnan(lo) | np.isnan(hi))
    if has.any():
        ax.vlines(x[has], lo[has], hi[has], colors=colour, linewidth=0.9, alpha=0.8)
    ax.plot(x, y, color=colour, marker=marker, markersize=4, linewidth=1.2, label=_mpl(line))
    flags = rows["flagged"].fill_null(False).to_numpy().astype(bool)
    if not flags.any():
        return False
    ax.plot(x[flags], y[flags], linestyle="none", marker="o", markersize=11, markerfacecolor="none",
            markeredgecolor=HISTORY_FLAG_COLOUR, markeredgewidth=1.8)
    return True


def _history_legend(fig: Figure, axes: Any, *, flagged: bool, columns: int) -> None:
    """The history figure's one legend: every panel's lines once, and the ring of a flagged change if any."""
    handles, labels = axes[0].get_legend_handles_labels()
    seen = dict(zip(labels, handles, strict=True))
    for ax in axes[1:]:
        for h, lab in zip(*ax.get_legend_handles_labels(), strict=True):
            seen.setdefault(lab, h)
    if flagged:
        from matplotlib.lines import Line2D

        seen["change beyond the intervals"] = Line2D([], [], linestyle="none", marker="o", markersize=9,
                                                     markerfacecolor="none", markeredgecolor=HISTORY_FLAG_COLOUR,
                                                     markeredgewidth=1.8)
    fig.legend(list(seen.values()), list(seen.keys()), loc="lower center", ncol=min(columns, len(seen)), fontsize=7,
               frameon=False, bbox_to_anchor=(0.5, 0.0))
