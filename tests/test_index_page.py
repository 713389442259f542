"""The index page, the fit pages, their CSV files and the terminal's headlines (issue 16, points 1, 2 and 5).

A small run is published by the library (``tests/published.py``). The
headline sentence is checked against each fit's own JSON (``fits/<key>.json``,
read here, not the summary the sentence is built from); the CSV files against
the tables of the pages, parsed with the standard library's HTML parser (the
report cuts tables with regular expressions).
"""

from __future__ import annotations

import csv
import html
import io
import re
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import orjson
import pytest
from typer.testing import CliRunner

from jurymeter.analyses.headlines import FAILED_SHARE_ALERT, run_alerts
from jurymeter.cli import app
from published import publish_small_run

RUN_ID = "20260102T021500Z"


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = publish_small_run(tmp_path_factory.mktemp("index"), RUN_ID)
    return root / "results" / RUN_ID


def _json(path: Path) -> Any:
    return orjson.loads(path.read_bytes())


class Tables(HTMLParser):
    """Every ``<table>`` of a page as rows of cell texts, and each CSV link that follows a table."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.tables: list[list[list[str]]] = []
        self.links: list[str] = []
        self.headline_rows: list[list[str]] = []
        self._cell: list[str] | None = None
        self._in_table = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "table":
            self.tables.append([])
            self._in_table = True
        elif tag == "tr" and self._in_table:
            self.tables[-1].append([])
        elif tag in ("td", "th") and self._in_table:
            self._cell = []
        elif tag == "a" and "download" in dict(attrs):
            self.links.append(str(dict(attrs)["href"]))

    def handle_endtag(self, tag: str) -> None:
        if tag == "table":
            self._in_table = False
        elif tag in ("td", "th") and self._cell is not None:
            self.tables[-1][-1].append("".join(self._cell).strip())
            self._cell = None

    def handle_data(self, data: str) -> None:
        if self._cell is not None:
            self._cell.append(data)


def _tables(page: Path) -> Tables:
    parser = Tables()
    parser.feed(page.read_text())
    return parser


def test_every_fit_has_a_page_linked_from_its_headline_row(run: Path) -> None:
    summary = _json(run / "summary.json")
    index = (run / "report" / "index.html").read_text()
    pages = sorted((run / "report" / "fits").glob("*.html"))
    assert len(pages) == len(summary["fits"]) == 4
    for page in pages:
        assert f'href="fits/{page.name}"' in index
        assert 'href="../index.html"' in page.read_text()
    # Alerts first, then the headlines, then the run's facts.
    assert index.index('id="alerts"') < index.index('id="headlines"') < index.index('id="summary"')


def test_headline_numbers_equal_the_fits_own_json(run: Path) -> None:
    summary = _json(run / "summary.json")
    index = html.unescape((run / "report" / "index.html").read_text())
    for entry in summary["fits"]:
        fit = _json(run / "fits" / f"{entry['key']}.json")["analyses"]
        [said] = [h["sentence"] for h in summary["headlines"]["fits"]
                  if (h["item_set"], h["universe"], h["protocol"]) == (entry["item_set"], entry["universe"], entry["protocol"])]
        assert said in index  # the row on the page is the summary's sentence
        if entry["protocol"] == "pointwise":
            g = fit["gstudy"]
            assert f"MDD {g['mdd95']:.2f} points (1-10 scale)" in said
            assert f"E\u03c1\u00b2 {g['erho2']:.2f} with " in said
            # Which systems can be told apart, from the fit's own system means and MDD.
            means = list(g["system_means"].values())
            apart = sum(abs(a - b) >= g["mdd95"] for k, a in enumerate(means) for b in means[k + 1:])
            first = sum(max(means) - m < g["mdd95"] for m in means)
            n = len(means)
            assert f"{n} systems: " in said
            assert f"{apart} of {n * (n - 1) // 2} pairs can be told apart" in said
            # The systems named as could-rank-first are those whose rank range in the fit's JSON includes 1.
            named = {r["system_id"] for r in g["leaderboard"] if r["rank_low"] == 1}
            assert len(named) == first
            best = max(g["leaderboard"], key=lambda r: r["mean"])["system_id"]
            if first == 1:
                assert f"{best} ranks first" in said
            elif first < n:
                shown = said.split(f"{n} systems: ", 1)[1].split(" could rank first", 1)[0]
                if " more" in shown:  # the first NAMED_TOP by mean, then a count
                    assert set(shown.split(" and ", 1)[0].split(", ")) < named
                    assert shown.endswith(f" and {first - 5} more")
                else:
                    assert set(shown.split(", ")) == named
            assert "tie group" not in said
            assert f"one judge's ceiling {g['ceiling']:.2f}" in said
            if g["judges_needed"] is not None:
                assert f"{g['judges_needed']} judges reach E\u03c1\u00b2 {g['target']:g} at 30 items" in said
            offsets = [abs(v) for row in fit["cyclic"]["judge_system_offsets"].values() for v in row.values()]
            assert f"largest judge offset on one system {max(offsets):.2f} points" in said
            rho = [j["rho_1"] for j in fit["sequential"]["judges"].values() if j["rho_1"] is not None]
            assert f"up to {max(rho, key=abs):+.2f} logit" in said
        else:
            p = fit["pairwise"]
            assert f"position bias {p['position']['slot_a_advantage']['value']:.1f} points" in said
            reversal = max(j["reversal_rate"] for j in p["judges"].values() if j["reversal_rate"] is not None)
            assert f"up to {100 * reversal:.0f}% of verdicts flip" in said


def test_every_table_of_every_page_is_also_a_csv_file_with_the_same_cells(run: Path) -> None:
    report = run / "report"
    pages = [report / "index.html", *sorted((report / "fits").glob("*.html"))]
    count = 0
    for page in pages:
        parsed = _tables(page)
        assert len(parsed.links) == len(parsed.tables) > 0, page.name
        for table, link in zip(parsed.tables, parsed.links, strict=True):
            target = (page.parent / link).resolve()
            assert target.is_relative_to(report.resolve())
            assert target.suffix == ".csv"
            rows = list(csv.reader(io.StringIO(target.read_text())))
            assert rows == table, (page.name, link)
            count += 1
    assert count >= 20


def test_alerts_come_in_order_failed_fits_changes_failing_judges_then_drops() -> None:
    summary = {
        "fits": [
            {"item_set": "a", "universe": "all", "population": "all", "protocol": "pointwise", "status": "fitted",
             "analyses": {"gstudy": {"dropped_systems": 1, "dropped_items": 0, "dropped_judges": 0,
                                     "dropped_system_ids": "s9"}}},
            {"item_set": "<b>", "universe": "all", "population": "all", "protocol": "pointwise",
             "status": "failed", "error": "boom\ntraceback line"},
        ],
        "judges": [
            {"judge_id": "j1", "stored": 95, "failed": 5, "failed_share": FAILED_SHARE_ALERT},
            {"judge_id": "j2", "stored": 99, "failed": 1, "failed_share": 0.01},
        ],
    }
    alerts = run_alerts(summary, ["judge j3: offset changed"])
    assert alerts[0] == "fit failed: <b> / all / all: boom"
    assert alerts[1] == "judge j3: offset changed"
    assert alerts[2].startswith("judge j1: 5.0% of its judgments failed (5 of 100)")
    assert alerts[3].startswith("a / all / all (G-study")
    assert "s9" in alerts[3]
    assert len(alerts) == 4  # j2's 1% is no alert


def test_report_summary_prints_the_alerts_and_headlines_and_report_rebuilds_every_page(run: Path) -> None:
    store = str(run.parents[1])
    summary = _json(run / "summary.json")
    printed = CliRunner().invoke(app, ["report", "latest", "--store", store, "--summary"])
    assert printed.exit_code == 0, printed.output
    lines = printed.output.splitlines()
    assert lines[0] == f"run {RUN_ID}: complete"
    assert lines[1] == f"alerts ({len(summary['headlines']['alerts'])}):"  # the judges reversing more than a coin (issue 24)
    text = " ".join(printed.output.split())  # rich wraps long lines
    for h in summary["headlines"]["fits"]:
        assert " ".join(f"{h['label']}: {h['sentence']}".split()) in text
    # `jurymeter report` rebuilds every page and CSV from the run folder.
    before = {p.relative_to(run): p.read_bytes() for p in (run / "report").rglob("*") if p.is_file()}
    for p in (run / "report").rglob("*.html"):
        p.unlink()
    rebuilt = CliRunner().invoke(app, ["report", RUN_ID, "--store", store])
    assert rebuilt.exit_code == 0, rebuilt.output
    after = {p.relative_to(run): p.read_bytes() for p in (run / "report").rglob("*") if p.is_file()}
    assert set(after) == set(before)
    # The same pages, except the run's timings (and the finish time), which the rebuild knows in full
    # (the run's own report is written before its report and finish times are).
    def settled(data: bytes) -> bytes:
        return re.sub(rb"<tr><td>(timings \(s\)|finished)</td><td>[^<]*</td></tr>|(timings \(s\)|finished),[^\n]*\n", b"", data)

    assert [k for k in before if settled(after[k]) != settled(before[k])] == []


def test_the_run_printout_ends_with_the_alerts_and_the_headlines(run: Path) -> None:
    from jurymeter.cli.run import print_run_summary
    from jurymeter.render.text import out

    summary = _json(run / "summary.json")
    with out.capture() as captured:
        print_run_summary(summary, ingest_printed=True)
    said = " ".join(captured.get().split("results: ", 1)[1].split())
    assert f"alerts ({len(summary['headlines']['alerts'])}):" in said
    assert " ".join(f"{summary['headlines']['fits'][-1]['label']}: {summary['headlines']['fits'][-1]['sentence']}".split()) in said


def test_the_fits_tables_say_what_each_number_means_and_its_unit(run: Path) -> None:
    from jurymeter.analyses import registered

    index = html.unescape((run / "report" / "index.html").read_text())
    fits = re.sub(r"<[^>]+>", "", index.split('id="fits"', 1)[1])
    for analysis in registered():
        for h in analysis.headline:
            if h.table and h.kind == "number" and analysis.name in ("gstudy", "pairwise"):
                assert h.doc, (analysis.name, h.key)  # every number column is explained
                assert f"{h.label}: {h.doc}" in fits
    assert "in score points" in fits


def test_a_fit_with_nothing_estimated_says_why_in_its_headline() -> None:
    # Every analysis skipped (the MT-Bench samples together: each system judged by its own judge):
    # the headline gives the first skipped analysis's reason, not "no headline numbers".
    from jurymeter.analyses.base import HeadlineContext
    from jurymeter.analyses.headlines import fit_sentence

    entry = {"status": "fitted", "analyses": {
        "gstudy": {"status": "skipped", "reason": "needs at least 2 systems judged by the same judges; add records"},
        "cyclic": {"status": "skipped", "reason": "needs at least two generations"},
    }}
    assert fit_sentence(entry, HeadlineContext()) == (
        "nothing could be estimated: G-study and D-study: needs at least 2 systems judged by the same judges")
