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


mpl_text = _mpl
new_figure = _new_figure
png_bytes = _png
draw = _draw
interval_bars = _bars
labelled_rows_figure = _horizontal
matrix = _matrix
