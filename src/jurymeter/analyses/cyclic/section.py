"""CyclicJudge's report section: per-system decomposition, strategies (figure 1) and judge offsets (figure 2).

References
----------
.. [Zhu2026] Z. Zhu et al., "CyclicJudge: Mitigating Judge Bias Efficiently in
   LLM-based Evaluation", 2026 (``papers/cyclicjudge.txt``).
"""

from __future__ import annotations

import math

import matplotlib
import numpy as np
import polars as pl
from matplotlib.colors import CenteredNorm
from matplotlib.figure import Figure

from jurymeter.render.figures import draw as _draw
from jurymeter.render.figures import matrix as _matrix
from jurymeter.render.figures import mpl_text as _mpl
from jurymeter.render.figures import new_figure as _new_figure
from jurymeter.render.html import SectionBuilder
from jurymeter.render.html import escape as _e
from jurymeter.render.html import number as _num
from jurymeter.render.html import table_html as _table

STRATEGY_LABELS = {
    "A": "A: all judges",
    "B": "B: random single judge",
    "C": "C: CyclicJudge",
}
# Above this many systems the heatmap labels every k-th row only (the figure height is capped).
HEATMAP_MAX_LABELS = 70


def cyclic_section(page: SectionBuilder) -> None:
    """The decomposition table, then [Zhu2026] figures 1 and 2; nothing when CyclicJudge did not run."""
    strategies = page.rows("cyclic_strategies")
    offsets = page.rows("judge_offsets")
    systems = page.rows("cyclic_systems")
    if not (strategies.height or offsets.height or systems.height):
        return
    title = page.title
    page.add(_cyclic_systems_html(systems))
    page.figure(
        "strategies", lambda: _figure_strategies(strategies, title),
        "Variance of the benchmark score against the per-scenario budget for three judge "
        "allocations, mean over systems (after [Zhu2026] figure 1).",
    )
    page.figure(
        "judge-offsets", lambda: _figure_judge_offsets(offsets, title),
        "Judge bias per system: judge mean minus panel mean (after [Zhu2026] figure 2).",
    )


def _cyclic_systems_html(rows: pl.DataFrame) -> str:
    if rows.height == 0:
        return ""
    columns = ["sigma2_scenario", "sigma2_generation", "sigma2_judge", "sigma2_residual", "f_statistic", "p_value"]
    present = [c for c in columns if c in rows.columns]
    cells = [[_e(r["system_id"]), *(_e(_num(r[c])) for c in present)] for r in rows.sort("system_id").iter_rows(named=True)]
    header = ["system", *(f"<code>{_e(c)}</code>" for c in present)]
    return _table(header, cells, numeric=[False] + [True] * len(present))


def _figure_strategies(strategies: pl.DataFrame, title: str) -> Figure | None:
    """Var(X-bar) against budget for strategies A, B, C, mean over systems ([Zhu2026] figure 1)."""
    if strategies.height == 0:
        return None
    mean = (
        strategies.group_by("strategy", "budget")
        .agg(pl.col("variance").mean(), pl.col("system_id").n_unique().alias("systems"))
        .sort("strategy", "budget")
    )
    n_systems = strategies["system_id"].n_unique()

    def build() -> Figure:
        fig = _new_figure(6.4, 4.0)
        ax = fig.add_subplot()
        positive = False
        markers = {"A": "s", "B": "^", "C": "o"}
        for k, (strategy,) in enumerate(mean.select("strategy").unique().sort("strategy").iter_rows()):
            line = mean.filter(pl.col("strategy") == strategy)
            y = line["variance"].cast(pl.Float64).to_numpy()
            positive = positive or bool((y > 0).any())
            ax.plot(line["budget"].to_numpy(), y, marker=markers.get(strategy, "o"), linestyle="--",
                    color=matplotlib.colormaps["tab10"](k % 10),
                    label=_mpl(STRATEGY_LABELS.get(strategy, strategy)))
        if positive:
            ax.set_yscale("log")
        budgets = np.sort(mean["budget"].unique().to_numpy())
        if len(budgets) <= 12:
            ax.set_xticks(budgets, [str(b) for b in budgets])
        ax.set_xlabel("per-scenario budget (judge calls)")
        ax.set_ylabel("Var(X\u0304), mean over systems")
        ax.set_title(_mpl(title) + f" ({n_systems} system{'s' if n_systems != 1 else ''})")
        ax.legend(fontsize=8)
        ax.grid(True, which="both", alpha=0.3)
        return fig

    return _draw(build)


def _figure_judge_offsets(offsets: pl.DataFrame, title: str) -> Figure | None:
    """Heatmap of judge mean minus panel mean, systems x judges, centred at 0 ([Zhu2026] figure 2)."""
    if offsets.height == 0:
        return None
    systems, judges, z = _matrix(offsets, "system_id", "judge_id", "offset")
    finite = np.abs(z[np.isfinite(z)])
    half = float(finite.max()) if finite.size and finite.max() > 0 else 1.0

    def build() -> Figure:
        # Margins in inches from the longest tick labels (about 0.075 in per
        # character at 10 pt) and the colorbar's ticks and label (1 in):
        # constrained layout drew a 40 x 6 heatmap in 0.64 s, the slowest
        # figure of a fit; fixed margins take 0.25-0.36 s.
        system_labels = [_mpl(s) for s in systems]
        judge_labels = [_mpl(j) for j in judges]
        left = 0.75 + 0.075 * max(map(len, system_labels))
        bottom = 0.6 + 0.075 * max(map(len, judge_labels)) * math.sin(math.radians(60))
        right = 1.0
        width = max(4.5, min(14.0, left + right + 1.5 + 0.55 * len(judges)))
        height = max(2.5, min(20.0, bottom + 0.45 + 0.3 + 0.28 * len(systems)))
        fig = _new_figure(width, height)
        fig.subplots_adjust(left=min(left / width, 0.5), right=1 - right / width,
                            bottom=min(bottom / height, 0.5), top=1 - 0.45 / height)
        ax = fig.add_subplot()
        image = ax.imshow(np.ma.masked_invalid(z), cmap="RdBu_r", norm=CenteredNorm(vcenter=0.0, halfrange=half), aspect="auto")
        ax.set_xticks(range(len(judges)), judge_labels, rotation=60, ha="right", rotation_mode="anchor")
        step = max(1, math.ceil(len(systems) / HEATMAP_MAX_LABELS))
        ax.set_yticks(range(0, len(systems), step), system_labels[::step])
        if z.size <= 200:
            for (r, c), v in np.ndenumerate(z):
                if np.isfinite(v):
                    ax.text(c, r, f"{v:+.2f}", ha="center", va="center", fontsize=7,
                            color="white" if abs(v) > 0.6 * half else "black")
        fig.colorbar(image, ax=ax, label="judge mean \u2212 panel mean")
        ax.set_xlabel("judge")
        ax.set_ylabel("system")
        ax.set_title(_mpl(title))
        return fig

    return _draw(build)
