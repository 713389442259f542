"""The run history read back from run folders written here with ``Store`` (``pipeline/history.py``, ``render/history.py``).

Independent references: the run folders are built by hand in this file
(summaries and tables with known values, a failed fit, an old run without a
table or headline key, hostile names); the expected history is what those
values say, computed here; the page is parsed with ``html.parser``.
"""

from __future__ import annotations

import html
import math
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import polars as pl
import pytest

from jurymeter.io.store import Store
from jurymeter.pipeline.history import load_history, tracked_columns
from jurymeter.render.history import FIRST_RUN, history_alerts, history_html, since_last_run_html

Z = 1.959964
HOSTILE_SET = "<script>alert('set')</script>"
HOSTILE_JUDGE = '<img src=x onerror="alert(1)">'
FITS = [("chat", "all", "all"), ("chat", "two", "all")]


def _fit_entry(fit: tuple[str, str, str], *, records: int | None, status: str = "fitted", error: str | None = None) -> dict[str, Any]:
    gstudy: dict[str, Any] = {"status": "fitted", "erho2": 0.9}
    if records is not None:
        gstudy["records"] = records
    return {"item_set": fit[0], "universe": fit[1], "population": fit[2], "protocol": "pointwise",
            "key": "k" + "".join(fit), "status": status, "error": error,
            "analyses": {} if status == "failed" else {"gstudy": gstudy}}


def _write_run(
    store: Store,
    run_id: str,
    started: str,
    *,
    offsets: dict[str, float],
    se: float = 0.05,
    mdd: float = 0.5,
    records: int | None = 1000,
    failed_fit: tuple[str, str, str] | None = None,
    judge_effects: bool = True,
    failures: dict[str, tuple[int, int]] | None = None,
    fits: list[tuple[str, str, str]] = FITS,
) -> None:
    folder = f"results/{run_id}"
    good = [f for f in fits if f != failed_fit]
    dstudy = pl.DataFrame([
        {"item_set": f[0], "universe": f[1], "population": f[2], "quantity": q, "estimate": v, "low": v - 0.1,
         "high": v + 0.1, "reason": None}
        for f in good for q, v in (("erho2", 0.9), ("mdd95", mdd), ("ceiling", 0.7), ("phi", 0.5))
    ])
    store.write_parquet(f"{folder}/dstudy.parquet", dstudy)
    if judge_effects:
        effects = pl.DataFrame([
            {"item_set": f[0], "universe": f[1], "population": f[2], "judge_id": j, "offset": x, "se": se,
             "low": x - Z * se, "high": x + Z * se, "unread": "x" * 10}
            for f in good for j, x in offsets.items()
        ])
        store.write_parquet(f"{folder}/judge_effects.parquet", effects)
    entries = [_fit_entry(f, records=records, status="failed" if f == failed_fit else "fitted",
                          error="DesignError: boom" if f == failed_fit else None) for f in fits]
    counts = failures or {j: (0, 1000) for j in offsets}
    summary = {"run_id": run_id, "started": started, "finished": started, "status": "partial" if failed_fit else "complete",
               "fits": entries,
               "judges": [{"judge_id": j, "stored": n - k, "failed": k, "failed_share": k / n} for j, (k, n) in counts.items()]}
    store.write_json(f"{folder}/summary.json", summary)


@pytest.fixture
def store(tmp_path: Path) -> Store:
    return Store(str(tmp_path / "store"))


def test_one_run_says_first_run_no_history(store: Store) -> None:
    _write_run(store, "r1", "2026-12-01T02:00:00+00:00", offsets={"a": 0.1, "b": -0.1})
    history = load_history(store)
    assert history.run_ids == ["r1"]
    assert history.since is None
    assert history_alerts(history) == []
    figures: dict[str, bytes] = {}
    assert FIRST_RUN in history_html(history, figures)
    assert FIRST_RUN in since_last_run_html(history)
    assert figures == {}


def test_two_runs_a_shifted_offset_is_flagged_and_said(store: Store) -> None:
    _write_run(store, "r1", "2026-12-01T02:00:00+00:00", offsets={"a": 0.1, "b": -0.1}, records=1000)
    _write_run(store, "r2", "2026-12-02T02:00:00+00:00", offsets={"a": 0.6, "b": -0.12}, records=1500)
    history = load_history(store)
    offsets = history.values.filter(pl.col("name") == "judge offset")
    # 4 series (2 fits x 2 judges) over 2 runs
    assert offsets.height == 8
    second = offsets.filter(pl.col("run_id") == "r2")
    # a: z = 0.5 / (sqrt(2) * 0.05) = 7.07; b: 0.02 / 0.0707 = 0.28
    for r in second.iter_rows(named=True):
        expected = ({"a": 0.6, "b": -0.12}[r["subject"]] - {"a": 0.1, "b": -0.1}[r["subject"]]) / (math.sqrt(2) * 0.05)
        assert r["z"] == pytest.approx(expected, rel=1e-6)
        assert r["flagged"] is (r["subject"] == "a")
    since = history.since
    assert since is not None
    assert (since.run_id, since.previous_run_id) == ("r2", "r1")
    records = since.changes.filter(pl.col("name") == "records")
    assert records["change"].to_list() == [500.0, 500.0]
    assert sorted(since.flagged["subject"].to_list()) == ["a", "a"]
    # Judge a is flagged on both of its fits: more than chance (p = 0.05^2 = 0.0025), one alert naming both.
    counts = since.flag_counts.filter(pl.col("name") == "judge offset").sort("subject")
    assert counts.select("subject", "tested", "flagged").rows() == [("a", 2, 2), ("b", 2, 0)]
    assert counts["p"].to_list() == pytest.approx([0.05**2, 1.0])
    assert counts["alert"].to_list() == [True, False]
    alerts = history_alerts(history)
    assert len(alerts) == 1
    assert alerts[0].startswith("judge a: judge offset changed beyond the 95% intervals in 2 of 2 fits since run r1")
    assert "0.1 \u2192 0.6" in alerts[0]
    # The per-fit numbers are not followed for drift: their z is there, their flag is not.
    mdd = history.values.filter((pl.col("name") == "MDD95") & (pl.col("run_id") == "r2"))
    assert mdd["flagged"].to_list() == [None, None]
    assert set(mdd["reason"].to_list()) == {"not followed for drift"}


def test_three_runs_sorted_by_started_and_limited_to_the_most_recent(store: Store) -> None:
    # Folder names in the opposite order of their start times.
    _write_run(store, "c", "2026-12-01T02:00:00+00:00", offsets={"a": 0.0})
    _write_run(store, "b", "2026-12-02T02:00:00+00:00", offsets={"a": 0.0})
    _write_run(store, "a", "2026-12-03T02:00:00+00:00", offsets={"a": 1.0})
    assert load_history(store).run_ids == ["c", "b", "a"]
    history = load_history(store, limit=2)
    assert history.run_ids == ["b", "a"]
    assert set(history.values["run_id"].to_list()) == {"b", "a"}
    # A folder being written (no summary.json) is not a run.
    store.write_parquet("results/d/dstudy.parquet", pl.DataFrame({"item_set": ["chat"]}))
    assert load_history(store).run_ids == ["c", "b", "a"]


def test_a_failed_fit_is_listed_and_adds_no_values(store: Store) -> None:
    _write_run(store, "r1", "2026-12-01T02:00:00+00:00", offsets={"a": 0.1})
    _write_run(store, "r2", "2026-12-02T02:00:00+00:00", offsets={"a": 0.1}, failed_fit=FITS[1])
    history = load_history(store)
    since = history.since
    assert since is not None
    assert since.fits_failed == (("chat", "two", "all", "pointwise", "DesignError: boom"),)
    assert history.runs.filter(pl.col("run_id") == "r2")["failed"].to_list() == [1]
    assert history.values.filter((pl.col("run_id") == "r2") & (pl.col("universe") == "two")).height == 0
    page = since_last_run_html(history)
    assert "fit failed" in page
    assert "DesignError: boom" in page


def test_an_old_run_without_a_table_or_headline_key_is_read(store: Store) -> None:
    _write_run(store, "old", "2026-12-01T02:00:00+00:00", offsets={"a": 0.1}, judge_effects=False, records=None)
    _write_run(store, "new", "2026-12-02T02:00:00+00:00", offsets={"a": 0.1})
    history = load_history(store)
    old = history.values.filter(pl.col("run_id") == "old")
    assert set(old["name"].to_list()) == {"E\u03c1\u00b2", "MDD95", "single-judge ceiling"}
    offsets = history.values.filter((pl.col("name") == "judge offset") & (pl.col("run_id") == "new"))
    assert set(offsets["reason"].to_list()) == {"first run of this series"}
    since = history.since
    assert since is not None
    records = since.changes.filter(pl.col("name") == "records")
    assert records["previous"].to_list() == [None, None]
    assert records["current"].to_list() == [1000.0, 1000.0]


def test_the_tables_are_read_with_a_projection_onto_the_tracked_columns() -> None:
    columns = tracked_columns()
    assert columns["judge_effects"] == ("item_set", "universe", "population", "offset", "low", "high", "judge_id")
    assert "se" not in columns["judge_effects"]
    assert "unread" not in columns["judge_effects"]
    assert columns["dstudy"][-1] == "quantity"


def test_the_current_run_in_memory_is_the_newest_and_replaces_its_folder(store: Store) -> None:
    _write_run(store, "r1", "2026-12-01T02:00:00+00:00", offsets={"a": 0.1})
    _write_run(store, "r2", "2026-12-02T02:00:00+00:00", offsets={"a": 0.1})
    effects = pl.DataFrame({"item_set": ["chat"], "universe": ["all"], "population": ["all"], "judge_id": ["a"],
                            "offset": [0.9], "se": [0.05], "low": [0.9 - Z * 0.05], "high": [0.9 + Z * 0.05]})
    summary = {"run_id": "r2", "started": "2026-12-02T02:00:00+00:00", "fits": [_fit_entry(FITS[0], records=10)],
               "judges": [{"judge_id": "a", "stored": 1000, "failed": 0}]}
    history = load_history(store, current=({"judge_effects": effects}, summary))
    assert history.run_ids == ["r1", "r2"]
    now = history.values.filter((pl.col("run_id") == "r2") & (pl.col("name") == "judge offset"))
    assert now["estimate"].to_list() == [0.9]
    assert now["flagged"].to_list() == [True]
    since = history.since
    assert since is not None
    assert since.fits_removed == (("chat", "two", "all", "pointwise"),)


def test_a_judge_failing_tonight_is_an_alert_and_a_new_judge_is_said(store: Store) -> None:
    _write_run(store, "r1", "2026-12-01T02:00:00+00:00", offsets={"a": 0.1}, failures={"a": (10, 1000)})
    _write_run(store, "r2", "2026-12-02T02:00:00+00:00", offsets={"a": 0.1},
               failures={"a": (60, 1500), "b": (0, 500)})
    history = load_history(store)
    since = history.since
    assert since is not None
    assert since.judges_new == ("b",)
    assert since.judges_gone == ()
    assert since.failure_flags["judge_id"].to_list() == ["a"]
    [alert] = history_alerts(history)
    assert alert.startswith("judge a: failure rate now 4% of judgments (50 of 500 judgments added since run r1 failed")


class _Collect(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.tags: list[str] = []
        self.text: list[str] = []
        self.images: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append(tag)
        if tag == "img":
            self.images.append(dict(attrs)["src"] or "")

    def handle_data(self, data: str) -> None:
        self.text.append(data)


def test_hostile_names_stay_escaped_and_figures_are_pngs(store: Store) -> None:
    fits = [(HOSTILE_SET, "all", "all")]
    _write_run(store, "r1", "2026-12-01T02:00:00+00:00", offsets={HOSTILE_JUDGE: 0.1, "b": 0.0}, fits=fits)
    _write_run(store, "<r2>", "2026-12-02T02:00:00+00:00", offsets={HOSTILE_JUDGE: 0.9, "b": 0.0}, fits=fits,
               failures={HOSTILE_JUDGE: (1, 1000), "b": (0, 1000)})
    history = load_history(store)
    figures: dict[str, bytes] = {}
    page = history_html(history, figures) + since_last_run_html(history)
    for raw in (HOSTILE_SET, HOSTILE_JUDGE, "<r2>"):
        assert raw not in page
    assert html.escape(HOSTILE_SET, quote=True) in page
    assert html.escape(HOSTILE_JUDGE, quote=True) in page
    parsed = _Collect()
    parsed.feed(page)
    assert "script" not in parsed.tags
    assert HOSTILE_JUDGE in "".join(parsed.text)  # the name is shown, as text
    assert len(parsed.images) == len(figures) >= 3
    for name, png in figures.items():
        assert png.startswith(b"\x89PNG\r\n\x1a\n")
        assert "/" not in name
        assert ".." not in name
    assert any(a.startswith(f"judge {HOSTILE_JUDGE}: judge offset") for a in history_alerts(history))
