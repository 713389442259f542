"""CyclicJudge's report section: per-system decomposition, strategies (figure 1) and judge offsets (figure 2).

References
----------
.. [Zhu2026] Z. Zhu et al., "CyclicJudge: Mitigating Judge Bias Efficiently in
   LLM-based Evaluation", 2026 (``papers/cyclicjudge.txt``).
"""

from __future__ import annotations

import math

import numpy as np
import polars as pl
from matplotlib.colors import CenteredNorm
from matplotlib.figure import Figure

from jurymeter.render.figures import OKABE_ITO
from jurymeter.render.figures import draw as _draw
from jurymeter.render.figures import matrix as _matrix
from jurymeter.render.figures import mpl_text as _mpl
from jurymeter.render.figures import new_figure as _new_figure
from jurymeter.render.html import SectionBuilder, p_value_text
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


# The judge-effect F test's conventional level, named in the table's lead.
F_TEST_LEVEL = 0.05
SYSTEM_COLUMNS = {  # column -> header, with its unit
    "sigma2_scenario": "scenario variance (points\u00b2)",
    "sigma2_generation": "generation variance (points\u00b2)",
    "sigma2_judge": "judge variance (points\u00b2)",
    "sigma2_residual": "residual variance (points\u00b2)",
    "f_statistic": "F (judge effect)",
    "p_value": "p (judge effect)",
}
SYSTEMS_CAPTION = (
    "Per system: the variance of one score split into scenario, generation, judge and residual parts "
    "(squared score points, from the system's scenario \u00d7 generation \u00d7 judge ANOVA), and the F "
    "statistic with its p-value for the hypothesis that every judge gives the system the same mean "
    "([Zhu2026] section 3)."
)


def cyclic_section(page: SectionBuilder) -> None:
    """The decomposition table, then [Zhu2026] figures 1 and 2; nothing when CyclicJudge did not run.

    The section and each subsection open with a lead sentence (:meth:`SectionBuilder.lead`)
    built from the fit's numbers.
    """
    strategies = page.rows("cyclic_strategies")
    offsets = page.rows("judge_offsets")
    systems = page.rows("cyclic_systems")
    if not (strategies.height or offsets.height or systems.height):
        return
    title = page.title
    page.lead(_section_lead(strategies))
    if systems.height:
        _subsection(page, "Per-system decomposition", _systems_lead(systems))
        page.add(_cyclic_systems_html(systems))
    if strategies.height:
        _subsection(page, "Judge allocations", _strategies_lead(strategies))
    page.figure(
        "strategies", lambda: _figure_strategies(strategies, title),
        "Variance of the benchmark score (squared score points, log scale) against the per-scenario budget "
        "for three judge allocations, mean over systems (after [Zhu2026] figure 1).",
    )
    if offsets.height:
        _subsection(page, "Judge offsets", _offsets_lead(offsets))
    page.figure(
        "judge-offsets", lambda: _figure_judge_offsets(offsets, title),
        "Judge bias per system: judge mean minus panel mean, in score points (after [Zhu2026] figure 2).",
    )


def _subsection(page: SectionBuilder, title: str, lead: str) -> None:
    page.add(f"<h4>{_e(title)}</h4>")
    page.lead(lead)


def _strategy_means(strategies: pl.DataFrame) -> dict[str, float]:
    """Mean variance over systems of each strategy at the largest budget they all share."""
    budgets = strategies.group_by("strategy").agg(pl.col("budget").max())["budget"]
    if strategies.height == 0 or budgets.len() == 0:
        return {}
    top = budgets.min()
    at = strategies.filter((pl.col("budget") == top) & pl.col("variance").is_not_null())
    return {str(k): float(v) for k, v in at.group_by("strategy").agg(pl.col("variance").mean()).iter_rows()}


def _section_lead(strategies: pl.DataFrame) -> str:
    text = ("How much the choice of judge moves each system's score, and how to spend judge calls so it "
            "moves the benchmark least")
    means = _strategy_means(strategies)
    c, b = means.get("C"), means.get("B")
    if c is not None and b is not None and c > 0:
        text += (f": rotating judges over scenarios (CyclicJudge) leaves {_num(b / c)}\u00d7 less variance than "
                 "one randomly chosen judge per scenario at the same budget, so rotate judges")
    return text + "."


def _systems_lead(systems: pl.DataFrame) -> str:
    text = ("Each system's score variance by source, in squared score points, and the F test of a judge effect")
    if "p_value" in systems.columns:
        p = systems["p_value"].drop_nulls()
        if p.len():
            hits = int((p < F_TEST_LEVEL).sum())
            text += (f": judges disagree (p < {F_TEST_LEVEL}) on {hits} of {p.len()} systems, so compare systems "
                     "only under the same judges or a rotation" if hits else
                     f": no system shows a judge effect at p < {F_TEST_LEVEL}, so one judge per scenario is "
                     "defensible here")
    return text + "."


STRATEGY_WORDS = {"A": "all judges", "B": "one random judge", "C": "CyclicJudge"}


def _strategies_lead(strategies: pl.DataFrame) -> str:
    text = ("Variance of the benchmark score (squared score points) against the judge calls per scenario for three "
            "allocations: use the lowest curve")
    means = _strategy_means(strategies)
    if means:
        best = min(means, key=lambda k: means[k])
        text += f"; at the largest budget it is {STRATEGY_WORDS.get(best, best)} ({_num(means[best])} points\u00b2)"
    return text + "."


def _offsets_lead(offsets: pl.DataFrame) -> str:
    text = ("Each judge's mean minus the panel's mean per system (score points): a column of one colour is a judge "
            "lenient or harsh on every system")
    per_judge = offsets.group_by("judge_id").agg(pl.col("offset").mean()).drop_nulls().sort("offset")
    if per_judge.height >= 2:
        harsh, low = per_judge.row(0)
        lenient, high = per_judge.row(per_judge.height - 1)
        text += (f" (most lenient {lenient} {high:+.2f}, harshest {harsh} {low:+.2f} points on average), which is "
                 "why systems scored by different single judges must not be compared")
    return text + "."


def _cyclic_systems_html(rows: pl.DataFrame) -> str:
    if rows.height == 0:
        return ""
    present = [c for c in SYSTEM_COLUMNS if c in rows.columns]
    cells = [
        [_e(r["system_id"]), *(_e(p_value_text(r[c]) if c == "p_value" else _num(r[c])) for c in present)]
        for r in rows.sort("system_id").iter_rows(named=True)
    ]
    header = ["system", *(_e(SYSTEM_COLUMNS[c]) for c in present)]
    table = _table(header, cells, numeric=[False] + [True] * len(present))
    # The caption goes inside the table, first, as HTML requires.
    return table.replace("<table>", f"<table><caption>{_e(SYSTEMS_CAPTION)}</caption>", 1)


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
                    color=OKABE_ITO[k % len(OKABE_ITO)],
                    label=_mpl(STRATEGY_LABELS.get(strategy, strategy)))
        if positive:
            ax.set_yscale("log")
        budgets = np.sort(mean["budget"].unique().to_numpy())
        if len(budgets) <= 12:
            ax.set_xticks(budgets, [str(b) for b in budgets])
        ax.set_xlabel("per-scenario budget (judge calls)")
        ax.set_ylabel("Var(X\u0304), mean over systems (points\u00b2)")
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
        bottom = 0.6 + 0.075 * max(map(len, judge_labels))  # judge labels stand upright (90 degrees)
        right = 1.0
        width = max(4.5, min(14.0, left + right + 1.5 + 0.55 * len(judges)))
        # At least 1.9 in of heatmap: the colour bar's label must fit along it.
        height = max(bottom + 0.45 + 1.9, min(20.0, bottom + 0.45 + 0.3 + 0.28 * len(systems)))
        fig = _new_figure(width, height)
        fig.subplots_adjust(left=min(left / width, 0.5), right=1 - right / width,
                            bottom=min(bottom / height, 0.5), top=1 - 0.45 / height)
        ax = fig.add_subplot()
        image = ax.imshow(np.ma.masked_invalid(z), cmap="RdBu_r", norm=CenteredNorm(vcenter=0.0, halfrange=half), aspect="auto")
        ax.set_xticks(range(len(judges)), judge_labels, rotation=90)
        step = max(1, math.ceil(len(systems) / HEATMAP_MAX_LABELS))
        ax.set_yticks(range(0, len(systems), step), system_labels[::step])
        if z.size <= 200:
            for (r, c), v in np.ndenumerate(z):
                if np.isfinite(v):
                    ax.text(c, r, f"{v:+.2f}", ha="center", va="center", fontsize=7,
                            color="white" if abs(v) > 0.6 * half else "black")
        fig.colorbar(image, ax=ax, label="judge \u2212 panel mean (points)")
        ax.set_xlabel("judge")
        ax.set_ylabel("system")
        ax.set_title(_mpl(title))
        return fig

    return _draw(build)
