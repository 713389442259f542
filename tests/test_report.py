"""The HTML report: structure, inlined figures, escaping of hostile names, safe file names.

Tables come from a real fit (``assess_item_set`` and ``cyclic_report`` on a
simulated dump), mapped to the columns of ``docs/results.md`` here, so the
test does not depend on the nightly module that produces them in a run.
"""

from __future__ import annotations

import base64
import html
import re
import sys
from html.parser import HTMLParser
from typing import Any

import numpy as np
import polars as pl
import pytest
from matplotlib import cbook
from matplotlib.text import Text

from jurymeter.analyses.cyclic import section as cyclic_section
from jurymeter.errors import ReportError
from jurymeter.pipeline.page import RenderedReport, fit_figures, render_report
from jurymeter.render import figures as figures_module
from jurymeter.render.html import figure_file_name, fit_token
from jurymeter.simulate import SimulationParams, simulate_dump
from jurymeter.stats.cyclic.fit import cyclic_report
from jurymeter.stats.design import Design
from jurymeter.stats.dstudy import PAPER_ROLES, erho2, mdd95
from jurymeter.stats.ranking import tie_groups
from jurymeter.stats.reliability import GStudyRequest, assess_item_set

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
SAFE_NAME = re.compile(r"[a-z0-9_-]+\.png")
SCRIPT = "<script>alert(1)</script>"
ATTRIBUTE_BREAKOUT = '"><img src=x onerror=alert(1)>'
MATH = "$\\alpha$"
# Not a mathtext symbol: matplotlib raises at draw time if it ever parses this as math.
BAD_MATH = "$\\notacommand$"
HOSTILE_FIT = (SCRIPT, ATTRIBUTE_BREAKOUT, MATH)
REAL_FIT = ("sim-chat", "all", "all")
FAILED_FIT = ("broken", "u", "p")
ERROR = 'DesignError: <b>no judges</b> & "nothing" left'
RUN_ID = "20261130T021500Z-<script>x</script>"
KINDS = ("rank-intervals", "erho2", "nomogram", "budget", "strategies", "judge-offsets")


def _tables_of_fit(
    names: tuple[str, str, str], fit: dict[str, Any], cyclic: dict[str, Any], means: dict[str, float]
) -> dict[str, pl.DataFrame]:
    """One fit's tables with the columns of docs/results.md."""
    design = Design.parse(fit["design"])
    sigma2 = np.array([fit["components"][f"sigma2_{label.replace(':', '_')}"]["raw"] for label in design.labels])
    items = np.array([5, 10, 20, 50, 100, 200, 500], dtype=np.float64)
    intervals = fit["intervals"]
    rows: dict[str, list[dict[str, Any]]] = {
        "components": [
            {"component": k, "estimate": c["raw"], "share": c["share"], "df": c["df"], "ms": c["ms"],
             "low": c["interval"]["low"], "high": c["interval"]["high"]}
            for k, c in fit["components"].items()
        ],
        "dstudy": [
            {"quantity": q, "estimate": float(intervals[q]["estimate"]), "low": intervals[q]["low"], "high": intervals[q]["high"]}
            for q in ("erho2", "phi", "mdd95", "erho2_30", "mdd95_30", "mdd95_unlimited_items", "ceiling",
                      "ceiling_3_judges", "mdd95_in_sd_of_system_means", "judges_needed", "items_needed")
        ],
        "ceilings": [{"judges": int(j), "ceiling": v} for j, v in fit["ceiling_by_judges"].items()],
        "erho2_curve": [
            {"judges": j, "items": int(n), "erho2": float(v)}
            for j in (1, 2, 3, 5, 10)
            for n, v in zip(items, erho2(sigma2, design, PAPER_ROLES.sizes(design, items, j, 1)), strict=True)
        ],
        "nomogram": [
            {"judges": j, "items": n, "erho2": fit["nomogram"]["erho2"][a][b]}
            for a, j in enumerate(fit["nomogram"]["judges"])
            for b, n in enumerate(fit["nomogram"]["items"])
        ],
        "budget": [],
        "leaderboard": tie_groups(means, fit["mdd95"]).to_dicts(),
        "cyclic_systems": [
            {"system_id": s, **{k: r[k] for k in ("sigma2_scenario", "sigma2_generation", "sigma2_judge",
                                                 "sigma2_residual", "f_statistic", "p_value")}}
            for s, r in cyclic["systems"].items()
        ],
        "cyclic_strategies": [
            {"system_id": s, "budget": int(b), "strategy": k, "variance": float(v)}
            for s, r in cyclic["systems"].items()
            for k in ("A", "B", "C")
            for b, v in zip(r["strategies"]["budgets"], r["strategies"][f"var_{k.lower()}"], strict=True)
        ],
        "judge_offsets": [
            {"system_id": s, "judge_id": j, "offset": v}
            for s, offsets in cyclic["judge_system_offsets"].items()
            for j, v in offsets.items()
        ],
    }
    for budget in (120, 360):
        judges = np.array([1, 2, 3, 4, 6, 8], dtype=np.float64)
        n_items = np.floor(budget / judges)
        values = mdd95(sigma2, design, PAPER_ROLES.sizes(design, n_items, judges, 1))
        rows["budget"] += [
            {"budget": budget, "judges": int(j), "items": int(n), "replicates": 1, "mdd95": float(m),
             "optimal": k == int(np.argmin(values))}
            for k, (j, n, m) in enumerate(zip(judges, n_items, values, strict=True))
        ]
    fit_names = dict(zip(("item_set", "universe", "population"), names, strict=True))
    return {name: pl.DataFrame([{**fit_names, **r} for r in table]) for name, table in rows.items()}


def _hostile(tables: dict[str, pl.DataFrame]) -> dict[str, pl.DataFrame]:
    """The same fit under hostile names, with hostile system and judge ids and an unreachable target."""
    systems = {"sys-00": ATTRIBUTE_BREAKOUT, "sys-01": BAD_MATH, "sys-02": MATH}
    out = {}
    for name, frame in tables.items():
        frame = frame.with_columns(
            item_set=pl.lit(HOSTILE_FIT[0]), universe=pl.lit(HOSTILE_FIT[1]), population=pl.lit(HOSTILE_FIT[2])
        )
        if "system_id" in frame.columns:
            frame = frame.with_columns(pl.col("system_id").replace(systems))
        if "judge_id" in frame.columns:
            frame = frame.with_columns(pl.col("judge_id").replace({"judge-a": SCRIPT}))
        if name == "dstudy":
            frame = frame.with_columns(
                estimate=pl.when(pl.col("quantity") == "items_needed").then(np.inf).otherwise(pl.col("estimate"))
            )
        out[name] = frame
    return out


@pytest.fixture(scope="module")
def run() -> tuple[RenderedReport, dict[str, pl.DataFrame], dict[str, Any], bool]:
    dump = simulate_dump(
        SimulationParams(seed=3, n_systems=6, n_items=20, n_judges=4, n_generations=2, n_replicates=1,
                         round_scores=False, carry_over=0.0, pairwise_pairs=None)
    )
    records = dump.pointwise
    fit = assess_item_set(
        records, GStudyRequest(item_set="sim-chat", n_boot=50, partitions=5, splits=20, fpr_simulations=0)
    )
    means = dict(records.group_by("system_id").agg(pl.col("score").mean()).iter_rows())
    real = _tables_of_fit(REAL_FIT, fit, cyclic_report(records), means)
    hostile = _hostile(real)
    tables = {name: pl.concat([real[name], hostile[name]]) for name in real}
    summary = {
        "run_id": RUN_ID, "started": "2026-11-30T02:15:00+00:00", "finished": "2026-11-30T02:16:40+00:00",
        "status": "partial", "store": "/data/store",
        "ingest": {"totals": {"read": 1000, "accepted": 990, "quarantined": 7, "duplicates_dropped": 3}},
        "fits": [
            {"item_set": REAL_FIT[0], "universe": REAL_FIT[1], "population": REAL_FIT[2], "status": "fitted",
             "error": None, "seconds": 1.5, "analyses": {
                 "gstudy": {"status": "fitted", "reason": None, "design": fit["design"], "systems": 6,
                            "items": 20, "judges": 4, "mdd95": fit["mdd95"], "erho2": fit["erho2"],
                            "ceiling": fit["ceiling"]},
                 "cyclic": {"status": "fitted", "reason": None, "generations": 2, "strongest_offset": 0.5}}},
            {"item_set": HOSTILE_FIT[0], "universe": HOSTILE_FIT[1], "population": HOSTILE_FIT[2],
             "status": "reused", "error": None, "analyses": {
                 "gstudy": {"status": "fitted", "reason": None, "design": fit["design"], "systems": 6,
                            "items": 20, "judges": 4, "mdd95": fit["mdd95"], "erho2": fit["erho2"],
                            "ceiling": fit["ceiling"]}}},
            {"item_set": FAILED_FIT[0], "universe": FAILED_FIT[1], "population": FAILED_FIT[2],
             "status": "failed", "error": ERROR, "seconds": 0.1},
        ],
    }
    pyplot_before = "matplotlib.pyplot" in sys.modules
    rendered = render_report(tables, summary)
    return rendered, tables, summary, pyplot_before


class Page(HTMLParser):
    """Start tags with their attributes, the title, and the text of each element id."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.tags: list[tuple[str, dict[str, str | None]]] = []
        self.stack: list[str] = []
        self.text_by_id: dict[str, str] = {}
        self.open_ids: list[tuple[str, int]] = []
        self.title = ""
        self.in_title = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        attributes = dict(attrs)
        self.tags.append((tag, attributes))
        if tag in ("img", "meta", "br"):
            return
        self.stack.append(tag)
        if attributes.get("id"):
            self.open_ids.append((str(attributes["id"]), len(self.stack)))
            self.text_by_id[str(attributes["id"])] = ""
        self.in_title = tag == "title"

    def handle_endtag(self, tag: str) -> None:
        assert self.stack, f"</{tag}> closes nothing"
        assert self.stack[-1] == tag, f"</{tag}> closes <{self.stack[-1]}>"
        if self.open_ids and self.open_ids[-1][1] == len(self.stack):
            self.open_ids.pop()
        self.stack.pop()
        self.in_title = False

    def handle_data(self, data: str) -> None:
        if self.in_title:
            self.title += data
        for element, _ in self.open_ids:
            self.text_by_id[element] += data


def parse(page: str) -> Page:
    parser = Page()
    parser.feed(page)
    parser.close()
    assert parser.stack == [], f"unclosed elements {parser.stack}"
    return parser


def parse_all(rendered: RenderedReport) -> Page:
    """Every page of a report parsed (each must be well formed), their tags and element texts together.

    The title is the index page's (the first page)."""
    merged = Page()
    for n, text in enumerate([rendered.html, *rendered.pages.values()]):
        page = parse(text)
        merged.tags.extend(page.tags)
        merged.text_by_id.update(page.text_by_id)
        if n == 0:
            merged.title = page.title
    return merged


def test_page_is_well_formed_and_inlines_each_figure_once_as_png(run) -> None:
    rendered, _, _, pyplot_before = run
    page = parse_all(rendered)
    images = [attrs for tag, attrs in page.tags if tag == "img"]
    sources = [str(attrs["src"]) for attrs in images]
    assert all(src.startswith("data:image/png;base64,") for src in sources)
    assert rendered.text().count('<img src="data:image/png;base64,') == len(rendered.figures) == len(sources)
    # Two complete fits with CyclicJudge rows: five figures each, in page order.
    assert len(rendered.figures) == 2 * len(KINDS)
    inlined = [base64.b64decode(src.split(",", 1)[1], validate=True) for src in sources]
    assert inlined == list(rendered.figures.values())
    for png in rendered.figures.values():
        assert png.startswith(PNG_MAGIC)
        assert png[12:16] == b"IHDR"
        width, height = int.from_bytes(png[16:20], "big"), int.from_bytes(png[20:24], "big")
        assert 200 <= width <= 2000
        assert 150 <= height <= 2500
    # Self-contained: no external stylesheet, script or image.
    assert not [t for t, a in page.tags if t in ("script", "link", "iframe")]
    if not pyplot_before:
        assert "matplotlib.pyplot" not in sys.modules


def test_hostile_names_appear_only_escaped(run) -> None:
    rendered, _, _, _ = run
    text = rendered.text()
    for raw in (SCRIPT, ATTRIBUTE_BREAKOUT, ERROR, RUN_ID, "<b>no judges</b>"):
        assert raw not in text, raw
        assert html.escape(raw, quote=True) in text, raw
    for download in rendered.downloads.values():  # the CSV files hold the names as they are (no markup there)
        assert b"&lt;" not in download
    page = parse_all(rendered)
    # Nothing from the data became a tag or an attribute; the title round-trips exactly.
    assert not [a for _, a in page.tags if "onerror" in a]
    assert [t for t, _ in page.tags].count("img") == len(rendered.figures)
    assert page.title == f"jurymeter run {RUN_ID}"
    hostile_alts = [a["alt"] for t, a in page.tags if t == "img" and SCRIPT in str(a.get("alt"))]
    assert len(hostile_alts) == len(KINDS)
    assert all(ATTRIBUTE_BREAKOUT in str(alt) and MATH in str(alt) for alt in hostile_alts)
    # The hostile system ids reach the leaderboard as text.
    hostile_section = next(k for k in page.text_by_id if k.startswith("fit-script-alert-1-script"))
    assert ATTRIBUTE_BREAKOUT in page.text_by_id[hostile_section]
    assert BAD_MATH in page.text_by_id[hostile_section]


def test_data_strings_in_figures_are_never_mathtext() -> None:
    # Control: the raw id as a title makes matplotlib's mathtext parser fail at draw time.
    control = figures_module.new_figure(3, 2)
    control.add_subplot().set_title(BAD_MATH)
    with pytest.raises(ValueError, match="notacommand"):
        control.canvas.draw()
    offsets = pl.DataFrame(
        {"system_id": [BAD_MATH, MATH, "sys-$x"], "judge_id": [SCRIPT, "judge-$b$", SCRIPT],
         "offset": [0.2, -0.1, 0.05]}
    )
    fig = cyclic_section._figure_judge_offsets(offsets, f"{MATH} / {BAD_MATH}")
    assert fig is not None
    fig.canvas.draw()  # would raise as above if any data string were parsed as math
    texts = [t.get_text() for t in fig.findobj(Text) if t.get_text()]
    data_texts = [t for t in texts if "alpha" in t or "notacommand" in t or "$b" in t]
    assert len(data_texts) >= 4
    assert not [t for t in data_texts if cbook.is_math_text(t)]
    assert "\\$\\alpha\\$" in texts  # shown literally as $\alpha$


def test_figure_file_names_are_safe_and_distinct() -> None:
    names = ["sim-chat", "Sim-Chat", "SIM-CHAT", "sim_chat", "sim.chat", "sim chat", "sim/chat", "sim\\chat",
             "../sim-chat", "..", ".", "", "x" * 500, SCRIPT, ATTRIBUTE_BREAKOUT, MATH, "sim-chat\x00"]
    files = [figure_file_name((n, "all", "all"), "erho2") for n in names]
    files += [figure_file_name(("sim-chat", "all", "all"), k) for k in ("nomogram", "budget")]
    files += [figure_file_name(("sim-chat", "All", "all"), "erho2"), figure_file_name(("sim", "chat", "all"), "erho2")]
    assert len({f.lower() for f in files}) == len(files)  # distinct even on case-insensitive file systems
    for f in files:
        assert SAFE_NAME.fullmatch(f), f
        assert "/" not in f
        assert "\\" not in f
        assert ".." not in f
        assert len(f) < 200
    with pytest.raises(ReportError, match="kind"):
        figure_file_name(REAL_FIT, "../x")


def test_rendered_figure_names_match_the_fits(run) -> None:
    rendered, _, _, _ = run
    assert all(SAFE_NAME.fullmatch(name) for name in rendered.figures)
    expected = [figure_file_name(fit, kind) for fit in (REAL_FIT, HOSTILE_FIT) for kind in KINDS]
    assert list(rendered.figures) == expected


def test_case_and_punctuation_variants_render_to_separate_files() -> None:
    curve = pl.DataFrame({"judges": [1, 1, 3, 3], "items": [5, 50, 5, 50], "erho2": [0.4, 0.7, 0.6, 0.85]})
    variants = [("sim-chat", "all", "all"), ("Sim-Chat", "all", "all"), ("sim_chat", "all", "all")]
    tables = {"erho2_curve": pl.concat([
        curve.with_columns(item_set=pl.lit(a), universe=pl.lit(b), population=pl.lit(c)) for a, b, c in variants
    ])}
    rendered = render_report(tables, {"run_id": "r", "fits": []})
    assert len(rendered.figures) == 3
    assert len({name.lower() for name in rendered.figures}) == 3
    # Fits found only in the tables are still shown, each with its own section.
    page = parse_all(rendered)
    assert sum(1 for k in page.text_by_id if k.startswith("fit-")) == 3
    assert len(rendered.pages) == 3


def test_failed_fit_is_listed_at_the_top_with_its_error(run) -> None:
    rendered, _, _, _ = run
    page = parse_all(rendered)
    failed = page.text_by_id["failed"]
    assert "broken / u / p" in failed
    assert ERROR in failed
    # An alert at the top of the index, and given no page of its own.
    assert ERROR in page.text_by_id["alerts"]
    assert rendered.html.index('id="alerts"') < rendered.html.index('id="headlines"') < rendered.html.index('id="failed"')
    assert not [k for k in page.text_by_id if k.startswith("fit-broken")]
    assert not [p for p in rendered.pages if p.startswith("fits/broken")]


def test_summary_leaderboard_and_tables(run) -> None:
    rendered, tables, _, _ = run
    page = parse_all(rendered)
    summary = page.text_by_id["summary"]
    assert "1 fitted, 1 reused, 1 failed" in summary
    assert all(v in summary for v in ("1,000", "990", "7", "3", "balanced"))
    # The leaderboard's sentence names the systems that could rank first and the MDD to 3 significant
    # digits; the rank ranges are the one statement: no count of tie groups (issue 24, point 1).
    board = tables["leaderboard"].filter(pl.col("item_set") == REAL_FIT[0]).sort("rank")
    mdd = board["mdd95"][0]
    real = page.text_by_id[f"fit-{fit_token(REAL_FIT)}"]
    first = ", ".join(board.filter(pl.col("rank_low") == 1)["system_id"].to_list())
    assert f"{first} could rank first (rank range from 1)" in real
    assert f"told apart when their means differ by at least the MDD ({mdd:.3g} points)" in real
    assert "tie group" not in real
    # Rows are shaded by group parity, with a border where a new group starts.
    section = rendered.text().split('id="fit-sim-chat', 1)[1].split("<h4>Variance components", 1)[0]
    classes = re.findall(r'<tr class="([^"]+)"><td class="n">(\d+)</td>', section)
    assert [int(rank) for _, rank in classes] == board["rank"].to_list()
    for (cls, _), group, previous in zip(classes, board["tie_group"], [None, *board["tie_group"][:-1]], strict=True):
        assert cls.startswith("tie-a" if group % 2 else "tie-b")
        assert ("group-start" in cls) == (previous is not None and group != previous)
    # Components with shares in percent and intervals; D-study with inf printed as "never".
    assert "sigma2_sj" in real
    assert " %" in real
    hostile = rendered.text().split('id="fit-script-alert-1-script', 1)[1]
    assert re.search(r"<code>items_needed</code></td><td class=\"n\">never</td>", hostile)
    assert "<h3>CyclicJudge</h3>" in hostile


def test_an_empty_run_renders_without_figures() -> None:
    rendered = render_report({}, {"run_id": "empty", "status": "complete", "ingest": None, "fits": []})
    assert rendered.figures == {}
    page = parse(rendered.html)
    assert page.title == "jurymeter run empty"
    assert "This run has no fits." in rendered.html
    assert "Nothing new to ingest." in rendered.html


def test_figures_drawn_per_fit_are_embedded_as_given(run) -> None:
    """fit_figures (what a worker draws) gives exactly the report's figures of that fit, and
    render_report embeds figures handed to it instead of drawing them again."""
    rendered, tables, summary, _ = run
    per_fit = fit_figures(tables, REAL_FIT)
    ours = {n: png for n, png in rendered.figures.items() if n.startswith(figure_file_name(REAL_FIT, "x")[:-6])}
    assert set(per_fit) == set(ours)
    assert len(per_fit) >= 4
    # Drawing is deterministic (no timestamps in the PNG), so the bytes agree too.
    assert all(per_fit[n] == ours[n] for n in per_fit)
    marker = b"\x89PNG\r\n\x1a\n-not-drawn-here"
    given = dict.fromkeys(per_fit, marker)
    again = render_report(tables, summary, given)
    assert all(again.figures[n] == marker for n in per_fit)
    assert again.text().count(base64.b64encode(marker).decode()) == len(per_fit)
    # Figures of the other fits were still drawn.
    others = set(rendered.figures) - set(per_fit)
    assert others
    assert all(again.figures[n] == rendered.figures[n] for n in others)


def test_pages_emitted_as_rendered_are_the_whole_reports_files(run) -> None:
    """With ``emit``, each fit page leaves with its CSV files and figures as soon as it is rendered (a report
    of many fits is never held whole), and the files emitted and returned are those of the whole report."""
    rendered, tables, summary, _ = run
    batches: list[dict[str, bytes]] = []
    rest = render_report(tables, summary, emit=batches.append)
    assert len(batches) == len(rendered.pages) >= 2
    for batch in batches:
        [page] = [name for name in batch if name.endswith(".html")]
        stem = page.removesuffix(".html").replace("/", "__")
        assert all(name == page or name.startswith(f"csv/{stem}__") or name.endswith(".png") for name in batch)
    assert not rest.pages
    emitted = {name: data for batch in batches for name, data in batch.items()}
    assert not set(emitted) & set(rest.files())
    assert {**emitted, **rest.files()} == rendered.files()


def test_a_report_written_in_batches_is_the_whole_report_with_its_index_last(run, tmp_path, monkeypatch) -> None:
    """write_report writes the fit pages in batches as they are rendered (here one page a batch): the files on
    disk are the whole report's, byte for byte, and the index is written after every other file."""
    from jurymeter.io.store import Store
    from jurymeter.pipeline import publish
    from jurymeter.pipeline.page import IndexParts

    written: list[list[str]] = []

    class Recording(Store):
        def write_files(self, files: Any) -> None:
            written.append(list(files))
            super().write_files(files)

        def write_bytes(self, relpath: str, data: bytes) -> None:
            if relpath.endswith("index.html"):
                written.append([relpath])
            super().write_bytes(relpath, data)

    rendered, tables, summary, _ = run
    store = Recording(str(tmp_path / "store"))
    monkeypatch.setattr(publish, "REPORT_BATCH_BYTES", 1)
    publish.write_report(store, "results/r", tables, summary, index=IndexParts())
    folder = tmp_path / "store" / "results" / "r" / "report"
    on_disk = {str(f.relative_to(folder)): f.read_bytes() for f in folder.rglob("*") if f.is_file()}
    assert on_disk == rendered.files()
    assert len(written) >= len(rendered.pages) + 1  # a batch a page, then the index's own files, then the index
    assert written[-1] == ["results/r/report/index.html"]
    assert all("results/r/report/index.html" not in batch for batch in written[:-1])


def test_item_sets_not_fitted_and_failing_judges_are_on_the_page() -> None:
    """summary.json's `skipped` and `judges` (written here by hand) reach the page, escaped; healthy judges are left out."""
    summary = {
        "run_id": "r", "fits": [],
        "skipped": [{"item_set": SCRIPT, "protocol": "pairwise", "reason": "no analysis applies (gstudy fits pointwise)"}],
        "judges": [
            {"judge_id": "gpt-4", "stored": 47, "failed": 33, "failed_share": 33 / 80, "parse_failure": 30,
             "judge_call_failed": 3, "unscored": 0},
            {"judge_id": "healthy-judge", "stored": 12, "failed": 0, "failed_share": 0.0, "parse_failure": 0,
             "judge_call_failed": 0, "unscored": 0},
        ],
    }
    page = parse(render_report({}, summary).html)
    skipped = page.text_by_id["skipped"]
    assert SCRIPT in skipped  # as text, not markup
    assert "no analysis applies (gstudy fits pointwise)" in skipped
    judges = page.text_by_id["judges"]
    assert "gpt-4" in judges
    assert "41.2 %" in judges  # 33 of 80
    assert "healthy-judge" not in judges
    assert SCRIPT not in render_report({}, summary).html.replace(html.escape(SCRIPT), "")


def test_rows_split_by_fit_once_equal_a_filter_of_the_whole_table() -> None:
    """FitTables (the report's one split per table) gives each fit the rows a plain filter gives, in order."""
    from jurymeter.render.html import FitTables, _rows

    rng = np.random.default_rng(5)
    names = ["a", "b", "<c>", "a "]
    frame = pl.DataFrame({
        "item_set": rng.choice(names, 500), "universe": rng.choice(["all", "u"], 500),
        "population": rng.choice(["all", "p"], 500), "x": np.arange(500),
    })
    split = FitTables({"t": frame, "empty": frame.clear()})
    for fit in [(i, u, p) for i in [*names, "absent"] for u in ("all", "u") for p in ("all", "p")]:
        expected = frame.filter((pl.col("item_set") == fit[0]) & (pl.col("universe") == fit[1])
                                & (pl.col("population") == fit[2]))
        got = _rows(split, "t", fit)
        assert got.equals(expected), fit
        assert got.columns == frame.columns
        assert _rows(split, "empty", fit).height == 0
