"""Each fit's sections read well (issue 16, point 2): leads, p-values, legible figures.

- ``p_value_text`` against its definition: hand cases at the 1e-4 boundary and
  a property over random p (no e-notation at or above 1e-4, the printed value
  within half a unit of the second significant digit of p).
- Every figure function of the G-study, CyclicJudge, pairwise and sequential
  sections, called on small and on large synthetic data (long ids, many rows),
  is drawn on its Agg canvas; then every drawn text artist (titles, axis and
  tick labels, legends, annotations, colour-bar labels) lies inside the
  figure's canvas, and the tick labels of one axis do not overlap each other
  (their window extents, measured by matplotlib's renderer, are disjoint).
- The nomogram's colour limits are the data's own minimum and maximum (the
  numbers put in, not the code's).
- A page rendered from a real small fit (a simulated dump ingested into a
  store, fitted by the pipeline, ``render_report``): every analysis section and
  every subsection opens with ``<p class="lead">``; every p-value column prints
  no e-notation, and each p-value below 1e-4 in the published tables reads
  ``< 1e-4`` on its row. A fit with one generation says why CyclicJudge did
  not run and where the judges' offsets are.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from matplotlib.contour import ContourSet
from matplotlib.figure import Figure
from matplotlib.image import AxesImage
from matplotlib.text import Text

from jurymeter.analyses.cyclic import section as cyclic
from jurymeter.analyses.gstudy import section as gstudy
from jurymeter.analyses.pairwise import section as pairwise
from jurymeter.analyses.sequential import section as sequential
from jurymeter.io.ingest import ingest
from jurymeter.io.sources import discover_sources
from jurymeter.io.store import Store
from jurymeter.io.validate import ValidationOptions
from jurymeter.pipeline.cache import run_fits
from jurymeter.pipeline.config import load_config
from jurymeter.pipeline.jobs import plan_fits
from jurymeter.pipeline.page import render_report
from jurymeter.render.figures import rank_interval_figure
from jurymeter.render.html import p_value_text
from jurymeter.simulate import SimulationParams, simulate_dump, write_dump

# A drawn text may touch the canvas edge; extents are fractional pixels.
EDGE_SLACK_PX = 1.0
# Two tick labels may share a boundary pixel (rounding), not more.
OVERLAP_SLACK_PX = 0.5
E_NOTATION = re.compile(r"\d(?:\.\d+)?e[-+]?\d+", re.IGNORECASE)
LONG = "a-very-long-identifier-of-a-system-xyz"  # 38 characters: near the figures' 40-character cut


# ------------------------------------------------------------------ p-values


@pytest.mark.parametrize(("p", "text"), [
    (0.0, "< 1e-4"), (6.66e-93, "< 1e-4"), (9.99e-5, "< 1e-4"), (0.99999e-4, "< 1e-4"),
    (1e-4, "0.0001"), (1.04e-4, "0.0001"), (5.12e-4, "0.00051"), (0.0321, "0.032"), (0.05, "0.05"),
    (0.0999, "0.1"), (0.5, "0.5"), (1.0, "1"), (None, "\u2014"), (float("nan"), "n/a"),
])
def test_p_value_text_at_its_boundaries(p: float | None, text: str) -> None:
    assert p_value_text(p) == text


@settings(max_examples=300, deadline=None)
@given(st.floats(min_value=1e-4, max_value=1.0))
def test_p_values_from_1e_4_up_print_two_significant_digits_without_e_notation(p: float) -> None:
    text = p_value_text(p)
    assert not E_NOTATION.search(text), text
    value = float(text)
    half_unit = 0.5 * 10.0 ** (math.floor(math.log10(p)) - 1)  # half of the second significant digit
    assert abs(value - p) <= half_unit * (1 + 1e-9), (p, text)
    digits = text.replace("0.", "").lstrip("0").replace(".", "")
    assert 1 <= len(digits) <= 2, text


@settings(max_examples=100, deadline=None)
@given(st.floats(min_value=0.0, max_value=1e-4, exclude_max=True))
def test_p_values_below_1e_4_print_as_a_bound(p: float) -> None:
    assert p_value_text(p) == "< 1e-4"


# ------------------------------------------------------------------ figures: synthetic data


def _erho2(judges: np.ndarray, items: np.ndarray) -> np.ndarray:
    """E rho^2 of a crossed s x i x j design with fixed components (Brennan 2001, eq. 4.13)."""
    s, si, sj, e = 0.3, 0.4, 0.1, 0.6
    return s / (s + si / items + sj / judges + e / (judges * items))


def _curve(judges: list[int], items: list[int]) -> tuple[pl.DataFrame, pl.DataFrame]:
    rows = [{"judges": j, "items": n, "erho2": float(_erho2(np.array(j), np.array(n)))} for j in judges for n in items]
    ceilings = [{"judges": j, "ceiling": 0.3 / (0.3 + 0.1 / j)} for j in judges]
    return pl.DataFrame(rows), pl.DataFrame(ceilings)


def _budget(budgets: list[int], judges: list[int]) -> pl.DataFrame:
    rows = []
    for b in budgets:
        values = [1.96 * math.sqrt(2 * (0.4 / (b // j) + 0.1 / j + 0.6 / b)) for j in judges]
        best = int(np.argmin(values))
        rows += [{"budget": b, "judges": j, "items": b // j, "replicates": 1, "mdd95": v, "optimal": k == best}
                 for k, (j, v) in enumerate(zip(judges, values, strict=True))]
    return pl.DataFrame(rows)


def _names(prefix: str, n: int, long: bool) -> list[str]:
    return [f"{LONG}-{k:02d}" if long else f"{prefix}{k}" for k in range(n)]  # differ at the end only


def _strategies(n_systems: int, budgets: list[int]) -> pl.DataFrame:
    rows = [{"system_id": s, "budget": b, "strategy": k, "variance": v / b}
            for s in _names("s", n_systems, n_systems > 10) for b in budgets
            for k, v in (("A", 0.02), ("B", 0.03), ("C", 0.01))]
    return pl.DataFrame(rows)


def _offsets(n_systems: int, n_judges: int, long: bool, rng: np.random.Generator) -> pl.DataFrame:
    return pl.DataFrame([{"system_id": s, "judge_id": j, "offset": float(rng.normal(0, 0.8))}
                         for s in _names("s", n_systems, long) for j in _names("j", n_judges, long)])


def _pairwise_judges(n: int, long: bool, rng: np.random.Generator) -> pl.DataFrame:
    adv = rng.normal(5, 15, n)
    rev = rng.uniform(0.1, 0.7, n)
    return pl.DataFrame({"judge_id": _names("judge-", n, long), "slot_a_advantage": adv,
                         "slot_a_low": adv - 5, "slot_a_high": adv + 5, "reversal_rate": rev,
                         "reversal_low": rev - 0.05, "reversal_high": np.minimum(rev + 0.05, 1.0)})


def _agreement(n: int, long: bool, rng: np.random.Generator) -> pl.DataFrame:
    names = _names("judge-", n, long)
    return pl.DataFrame([{"judge_1": a, "judge_2": b, "kappa": float(rng.uniform(0, 0.6))}
                         for k, a in enumerate(names) for b in names[k + 1:]])


def _support(n: int, long: bool, rng: np.random.Generator) -> pl.DataFrame:
    names = _names("family-", n, long)
    return pl.DataFrame([{"judge_family": a, "candidate_family": b, "support": float(rng.uniform(0.3, 0.7))}
                         for a in names for b in names])


def _ratings(n: int, long: bool, rng: np.random.Generator) -> pl.DataFrame:
    rating = np.sort(rng.normal(1000, 60, n))[::-1]
    return pl.DataFrame({"system_id": _names("sys-", n, long), "rating_elo": rating, "low_elo": rating - 20,
                         "high_elo": rating + 20, "battle_low_elo": rating - 10, "battle_high_elo": rating + 10,
                         "rank": np.arange(1, n + 1), "tie_group": np.arange(n) // 3 + 1})


def _dependence(n: int, long: bool, rng: np.random.Generator) -> pl.DataFrame:
    contrast, rho = rng.normal(0.1, 0.05, n), rng.normal(0.1, 0.08, n)
    return pl.DataFrame({"judge_id": _names("judge-", n, long), "serial_contrast": contrast,
                         "serial_contrast_low": contrast - 0.04, "serial_contrast_high": contrast + 0.04,
                         "rho_1": rho, "rho_1_low": rho - 0.05, "rho_1_high": rho + 0.05})


def _ranks(n: int, long: bool, rng: np.random.Generator) -> pl.DataFrame:
    rank = np.arange(1, n + 1)
    spread = rng.integers(0, 4, n)
    return pl.DataFrame({"system_id": _names("sys-", n, long), "rank": rank,
                         "rank_low": np.maximum(1, rank - spread), "rank_high": np.minimum(n, rank + spread),
                         "tie_group": np.arange(n) // 4 + 1})


def _judge_effects(n: int, long: bool, rng: np.random.Generator) -> pl.DataFrame:
    offset = rng.normal(0, 0.8, n)
    return pl.DataFrame({"judge_id": _names("judge-", n, long), "offset": offset, "se": np.full(n, 0.1),
                         "low": offset - 0.2, "high": offset + 0.2})


def _history(n_runs: int, n_lines: int, long: bool, rng: np.random.Generator) -> Figure | None:
    from jurymeter.render.figures import history_figure

    runs = [f"run-{k:02d}" for k in range(n_runs)]
    lines = _names("judge-", n_lines, long)
    frame = pl.DataFrame([
        {"run_id": r, "line": line, "estimate": float(v), "low": float(v) - 0.2, "high": float(v) + 0.2,
         "flagged": bool(k == n_runs - 1 and j == 0)}
        for j, line in enumerate(lines) for k, (r, v) in enumerate(zip(runs, rng.normal(0, 1, n_runs), strict=True))
    ])
    labels = [f"12-{k + 1:02d} 02:15" for k in range(n_runs)]
    return history_figure([("judge offset (points)", frame), ("position bias (points)", frame)], runs, labels,
                          title=f"{LONG} / all / all" if long else "x / all / all")


ROUND_ITEMS = [5, 10, 20, 30, 50, 100, 200, 500, 1000]


def _cases() -> list[tuple[str, Callable[[], Figure | None]]]:
    rng = np.random.default_rng(16)
    title_long = f"{LONG} / {LONG} / all"
    small_curve, small_ceil = _curve([1, 2], [5, 50])
    large_curve, large_ceil = _curve([1, 2, 3, 5, 10, 20], [5, 10, 20, 50, 100, 200, 500, 1000])
    small_grid, _ = _curve([1, 2], [5, 50])
    large_grid, _ = _curve([1, 2, 3, 4, 5, 6, 8, 10, 15, 20], ROUND_ITEMS)
    one_judge, _ = _curve([1], ROUND_ITEMS)
    return [
        ("erho2-small", lambda: gstudy._figure_erho2_curve(small_curve, small_ceil, "x / all / all")),
        ("erho2-large", lambda: gstudy._figure_erho2_curve(large_curve, large_ceil, title_long)),
        ("nomogram-small", lambda: gstudy._figure_nomogram(small_grid, "x / all / all")),
        ("nomogram-large", lambda: gstudy._figure_nomogram(large_grid, title_long)),
        ("nomogram-one-judge", lambda: gstudy._figure_nomogram(one_judge, title_long)),
        ("budget-small", lambda: gstudy._figure_budget(_budget([120], [1, 2]), "x / all / all")),
        ("budget-large", lambda: gstudy._figure_budget(_budget([60, 120, 360, 1080, 3240], list(range(1, 11))),
                                                       title_long)),
        ("strategies-small", lambda: cyclic._figure_strategies(_strategies(1, [5, 10]), "x / all / all")),
        ("strategies-large", lambda: cyclic._figure_strategies(_strategies(80, list(range(1, 13))), title_long)),
        ("offsets-small", lambda: cyclic._figure_judge_offsets(_offsets(1, 2, False, rng), "x / all / all")),
        ("offsets-large", lambda: cyclic._figure_judge_offsets(_offsets(120, 12, True, rng), title_long)),
        ("position-small", lambda: pairwise._figure_position(_pairwise_judges(1, False, rng), "x")),
        ("position-large", lambda: pairwise._figure_position(_pairwise_judges(30, True, rng), title_long)),
        ("reversals-small", lambda: pairwise._figure_reversals(_pairwise_judges(1, False, rng), "x")),
        ("reversals-large", lambda: pairwise._figure_reversals(_pairwise_judges(30, True, rng), title_long)),
        ("agreement-small", lambda: pairwise._figure_agreement(_agreement(2, False, rng), "x")),
        ("agreement-large", lambda: pairwise._figure_agreement(_agreement(15, True, rng), title_long)),
        ("support-small", lambda: pairwise._figure_support(_support(2, False, rng), "x")),
        ("support-large", lambda: pairwise._figure_support(_support(10, True, rng), title_long)),
        ("ratings-small", lambda: pairwise._figure_ratings(_ratings(2, False, rng), "x")),
        ("ratings-large", lambda: pairwise._figure_ratings(_ratings(60, True, rng), title_long)),
        ("dependence-small", lambda: sequential._figure_dependence(_dependence(1, False, rng), "x")),
        ("dependence-large", lambda: sequential._figure_dependence(_dependence(25, True, rng), title_long)),
        ("ranks-small", lambda: rank_interval_figure(_ranks(3, False, rng), "x / all / all")),
        ("ranks-large", lambda: rank_interval_figure(_ranks(60, True, rng), title_long)),
        ("judge-effects-small", lambda: gstudy._figure_judge_effects(_judge_effects(2, False, rng), "x")),
        ("judge-effects-large", lambda: gstudy._figure_judge_effects(_judge_effects(20, True, rng), title_long)),
        ("history-small", lambda: _history(2, 1, False, rng)),
        ("history-large", lambda: _history(30, 8, True, rng)),
    ]


CASES = _cases()


def _drawn_texts(fig: Figure) -> list[tuple[str, Text]]:
    """Every text the renderer draws, with a group name for the overlap check ("" = not checked)."""
    texts: list[tuple[str, Text]] = []
    for k, ax in enumerate(fig.axes):
        for name, axis in (("x", ax.xaxis), ("y", ax.yaxis)):
            low, high = sorted(axis.get_view_interval())
            span = (high - low) * 1e-9
            for loc, label in zip(axis.get_majorticklocs(), axis.get_majorticklabels(), strict=False):
                if low - span <= loc <= high + span:
                    texts.append((f"{k}{name}", label))
            texts.append(("", axis.label))
        texts += [("", t) for t in (ax.title, ax._left_title, ax._right_title)]
        texts += [("", t) for t in ax.texts]
        legend = ax.get_legend()
        if legend is not None:
            texts += [("", t) for t in legend.get_texts()] + [("", legend.get_title())]
    for legend in fig.legends:
        texts += [("", t) for t in legend.get_texts()] + [("", legend.get_title())]
    texts += [("", t) for t in fig.texts]
    if fig._suptitle is not None:
        texts.append(("", fig._suptitle))
    return [(g, t) for g, t in texts if t.get_visible() and t.get_text().strip()]


@pytest.mark.parametrize(("name", "build"), CASES, ids=[n for n, _ in CASES])
def test_every_figure_keeps_its_text_on_the_canvas_without_overlapping_tick_labels(
    name: str, build: Callable[[], Figure | None]
) -> None:
    fig = build()
    assert fig is not None, name
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()  # type: ignore[attr-defined]
    canvas = fig.bbox
    texts = _drawn_texts(fig)
    assert texts
    # Control: the check sees the whole set of drawn texts, not just a few.
    assert len(texts) >= 5, (name, [t.get_text() for _, t in texts])
    outside = []
    for _, text in texts:
        box = text.get_window_extent(renderer)
        if (box.x0 < canvas.x0 - EDGE_SLACK_PX or box.y0 < canvas.y0 - EDGE_SLACK_PX
                or box.x1 > canvas.x1 + EDGE_SLACK_PX or box.y1 > canvas.y1 + EDGE_SLACK_PX):
            outside.append((text.get_text(), tuple(round(v) for v in box.extents)))
    assert not outside, (name, tuple(round(v) for v in canvas.extents), outside)
    groups: dict[str, list[Any]] = {}
    for group, text in texts:
        if group:
            groups.setdefault(group, []).append((text.get_text(), text.get_window_extent(renderer)))
    overlaps = []
    for group, boxes in groups.items():
        for a in range(len(boxes)):
            for b in range(a + 1, len(boxes)):
                (ta, ba), (tb, bb) = boxes[a], boxes[b]
                wide = min(ba.x1, bb.x1) - max(ba.x0, bb.x0)
                tall = min(ba.y1, bb.y1) - max(ba.y0, bb.y0)
                if wide > OVERLAP_SLACK_PX and tall > OVERLAP_SLACK_PX:
                    overlaps.append((group, ta, tb))
    assert not overlaps, (name, overlaps)


def test_the_overlap_and_canvas_checks_bite() -> None:
    """Control: a label pushed off the canvas and two tick labels on one spot are both caught."""
    from jurymeter.render.figures import new_figure

    fig = new_figure(3, 2)
    ax = fig.add_subplot()
    ax.set_xticks([0.0, 0.001], ["overlapping", "labels"])
    ax.set_xlim(0, 1)
    ax.set_title("a title far too long to fit on a figure only three inches wide, clipped at both edges")
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()  # type: ignore[attr-defined]
    boxes = [t.get_window_extent(renderer) for g, t in _drawn_texts(fig) if g == "0x"]
    assert len(boxes) == 2
    assert boxes[0].overlaps(boxes[1])
    assert ax.title.get_window_extent(renderer).x0 < fig.bbox.x0


@pytest.mark.parametrize("judges", [[1, 2, 3, 5, 10, 20], [1]], ids=["contours", "one-judge"])
def test_the_nomogram_colour_scale_spans_the_data(judges: list[int]) -> None:
    grid, _ = _curve(judges, ROUND_ITEMS)
    low, high = grid["erho2"].min(), grid["erho2"].max()
    assert isinstance(low, float)
    assert isinstance(high, float)
    assert low > 0.2  # the data do not start at 0: a scale from 0 would waste most of the colours
    fig = gstudy._figure_nomogram(grid, "x")
    assert fig is not None
    # The filled contours (or the image, with one judge) and the colour bar's axis.
    filled = [a for a in fig.findobj(lambda a: isinstance(a, (ContourSet, AxesImage))) if getattr(a, "filled", True)]
    assert len(filled) == 1
    assert filled[0].get_clim() == pytest.approx((low, high), rel=1e-12)
    bar = fig.axes[-1]
    assert sorted(bar.get_ylim()) == pytest.approx([low, high], rel=1e-12)


# ------------------------------------------------------------------ the page of a real small fit


class Elements(HTMLParser):
    """The page's start tags in order (tag, class), with each table's header and cell texts."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.order: list[tuple[str, str]] = []
        self.tables: list[dict[str, Any]] = []
        self.cell: list[str] | None = None
        self.row: list[str] = []
        self.in_head = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.order.append((tag, dict(attrs).get("class") or ""))
        if tag == "table":
            self.tables.append({"header": [], "rows": []})
        elif tag == "thead":
            self.in_head = True
        elif tag == "tr":
            self.row = []
        elif tag in ("td", "th"):
            self.cell = []

    def handle_endtag(self, tag: str) -> None:
        if tag in ("td", "th") and self.cell is not None:
            self.row.append("".join(self.cell).strip())
            self.cell = None
        elif tag == "tr" and self.tables:
            (self.tables[-1]["header"] if self.in_head else self.tables[-1]["rows"]).append(self.row)
        elif tag == "thead":
            self.in_head = False

    def handle_data(self, data: str) -> None:
        if self.cell is not None:
            self.cell.append(data)


def _store(root: Path, **params: Any) -> Store:
    paths = write_dump(simulate_dump(SimulationParams(**params)), root / "dump")
    store = Store(str(root / "store"))
    ingest(store, discover_sources([str(p) for n, p in paths.items() if n != "truth"]),
           ValidationOptions(scale=(1.0, 10.0)))
    return store


def _page(root: Path, store: Store, extra: str = "") -> tuple[str, dict[str, pl.DataFrame]]:
    path = root / "jm.toml"
    path.write_text(f'store = "{store.url}"\nlanding = ""\n[fit]\nn_boot = 30\n{extra}')
    config = load_config(path, environ={})
    outcomes = run_fits(store, plan_fits(store, config).jobs, figures=False, force=True)
    tables: dict[str, list[pl.DataFrame]] = {}
    fits = []
    for outcome in outcomes:
        assert outcome.error is None, outcome.error
        fits.append({**outcome.job.names, "protocol": outcome.job.protocol, "status": "fitted",
                     "analyses": outcome.summary})
        for name, frame in (outcome.tables or {}).items():
            if frame.height:
                tables.setdefault(name, []).append(frame)
    merged = {name: pl.concat(frames, how="diagonal_relaxed") for name, frames in tables.items()}
    return render_report(merged, {"run_id": "r", "fits": fits}).text(), merged


@pytest.fixture(scope="module")
def page(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, dict[str, pl.DataFrame]]:
    root = tmp_path_factory.mktemp("sections")
    store = _store(root, n_systems=6, n_items=20, n_judges=4, n_replicates=1, pairwise_pairs=6, seed=7)
    return _page(root, store, '[fit.sequential]\nn_boot = 20\nn_sim = 20\n')


def test_every_section_and_subsection_opens_with_a_lead(page: tuple[str, dict[str, pl.DataFrame]]) -> None:
    html, _ = page
    parser = Elements()
    parser.feed(html)
    order = parser.order
    headings = [k for k, (tag, _) in enumerate(order) if tag in ("h3", "h4")]
    titles = re.findall(r"<h3>([^<]*)</h3>", html)
    # The analyses that ran: G-study, CyclicJudge, sequential (pointwise) and pairwise.
    assert {"G-study and D-study", "CyclicJudge", "Pairwise judging"} <= set(titles), titles
    assert any(t.startswith("Sequential") for t in titles), titles
    assert len(headings) >= 15
    missing = [(order[k], order[k + 1] if k + 1 < len(order) else None) for k in headings
               if k + 1 >= len(order) or order[k + 1] != ("p", "lead")]
    assert not missing, missing
    # Each lead is one sentence with something in it.
    leads = re.findall(r'<p class="lead">([^<]*)</p>', html)
    assert len(leads) >= len(headings)  # the index page and each section open with one too
    assert all(len(t) > 40 and t.rstrip().endswith(".") for t in leads), leads


def test_no_p_value_is_printed_in_e_notation(page: tuple[str, dict[str, pl.DataFrame]]) -> None:
    html, tables = page
    parser = Elements()
    parser.feed(html)
    p_columns = 0
    for table in parser.tables:
        if not table["header"]:
            continue
        header = table["header"][0]
        for j, title in enumerate(header):
            if re.match(r"p\b|p-value|p_value|.*_p$", title):
                p_columns += 1
                cells = [row[j] for row in table["rows"] if j < len(row)]
                assert cells
                assert not [c for c in cells if c != "< 1e-4" and E_NOTATION.search(c)], (title, cells)
    assert p_columns >= 2  # CyclicJudge's judge-effect test and the family test at least
    # Each CyclicJudge p-value below 1e-4 (read from the published table) is "< 1e-4" on its system's row.
    systems = tables["cyclic_systems"].filter(pl.col("universe") == "all")
    tiny = systems.filter(pl.col("p_value") < 1e-4)["system_id"].to_list()
    assert tiny  # the simulated judges differ strongly: the bound is exercised
    cyclic_table = next(t for t in parser.tables if t["header"] and "p (judge effect)" in t["header"][0])
    column = cyclic_table["header"][0].index("p (judge effect)")
    by_system = {row[0]: row[column] for row in cyclic_table["rows"]}
    assert all(by_system[s] == "< 1e-4" for s in tiny)


def test_a_fit_without_generations_says_where_the_judge_offsets_are(tmp_path: Path) -> None:
    store = _store(tmp_path, n_systems=4, n_items=12, n_judges=3, n_generations=1, n_replicates=1,
                   pairwise_pairs=None, seed=2)
    html, _ = _page(tmp_path, store, 'analyses = ["gstudy", "cyclic"]\n')
    section = html[html.index("<h3>CyclicJudge</h3>"):]
    note = section[:section.index("</p>")]
    assert "generations" in note
    assert "G-study section" in note
    assert "judge_effects" in note
