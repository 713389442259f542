"""The run history on the page: the followed numbers over runs, judge drift, and what changed since the last run.

Pure rendering of a run history (:class:`jurymeter.pipeline.history.RunHistory`,
read here only through the attributes of :class:`History`): no file is read.
Every string from data is escaped (:func:`jurymeter.render.html.escape`); the
figures are drawn by :func:`jurymeter.render.figures.history_figure` and
recorded in the caller's ``figures`` under safe file names.

Figures cost about 0.4 s each (multi-panel, 30 runs), so at most
``MAX_FIT_FIGURES`` item-set figures and ``MAX_JUDGE_FIGURES`` judge figures
are drawn (fits with a flagged change first, then by name); the tables below
them list every fit and every flagged change.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import partial
from typing import Any, Protocol

import polars as pl

from jurymeter.render.figures import history_figure
from jurymeter.render.html import _embed, escape, interval_text, number, p_value_text, table_html

MAX_FIT_FIGURES = 3
MAX_JUDGE_FIGURES = 3
FLAG_TABLE_RUNS = 5  # the table of judge changes beyond the intervals lists the last 5 runs
FAILURE_NAME = "failure rate"
FAILURE_UNIT = "share of judgments"
FIRST_RUN = "First run: no history yet."
MAX_ALERT_FITS = 5  # an alert names at most this many of a judge's flagged fits
FLAG_SHARE = 0.05  # the share of stable series the interval rule flags (stats.drift.FLAG_LEVEL)
FIT = ("item_set", "universe", "population")


class Since(Protocol):
    """What :func:`since_last_run_html` reads of :class:`jurymeter.pipeline.history.SinceLastRun`."""

    @property
    def run_id(self) -> str: ...
    @property
    def previous_run_id(self) -> str: ...
    @property
    def fits_added(self) -> tuple[tuple[str, str, str, str], ...]: ...
    @property
    def fits_removed(self) -> tuple[tuple[str, str, str, str], ...]: ...
    @property
    def fits_failed(self) -> tuple[tuple[str, str, str, str, str], ...]: ...
    @property
    def changes(self) -> pl.DataFrame: ...
    @property
    def flagged(self) -> pl.DataFrame: ...
    @property
    def failure_flags(self) -> pl.DataFrame: ...
    @property
    def judges_new(self) -> tuple[str, ...]: ...
    @property
    def judges_gone(self) -> tuple[str, ...]: ...
    @property
    def flag_counts(self) -> pl.DataFrame: ...


class History(Protocol):
    """What the page reads of :class:`jurymeter.pipeline.history.RunHistory`."""

    @property
    def runs(self) -> pl.DataFrame: ...
    @property
    def values(self) -> pl.DataFrame: ...
    @property
    def failure_rates(self) -> pl.DataFrame: ...
    @property
    def since(self) -> Since | None: ...


def history_html(history: History, figures: dict[str, bytes]) -> str:
    """The "Run history" section: followed numbers per item set and per judge over runs, with intervals.

    Parameters
    ----------
    history : History
        The run history (oldest run first).
    figures : dict of str to bytes
        Filled with the section's PNGs by file name (the caller stores them beside the page).

    Returns
    -------
    str
        The section's HTML (escaped).
    """
    parts = ['<section id="run-history"><h2>Run history</h2>']
    if history.runs.height < 2:
        parts.append(f'<p class="note">{escape(FIRST_RUN)}</p></section>')
        return "".join(parts)
    runs = [str(r) for r in history.runs["run_id"].to_list()]
    labels = [_run_label(s, r) for s, r in history.runs.select("started", "run_id").iter_rows()]
    values = history.values
    per_fit = values.filter(pl.col("subject").is_null())
    per_judge = values.filter(pl.col("subject").is_not_null())
    fit_names = _names(per_fit)
    judge_names = [*_names(per_judge), *([FAILURE_NAME] if history.failure_rates.height else [])]
    flagged = values.filter(pl.col("flagged").fill_null(False)).height + history.failure_rates.filter(
        pl.col("flagged").fill_null(False)).height
    lead = (
        f"These figures follow, over the last {len(runs)} runs, each item set's {_list(fit_names)} and each "
        f"judge's {_list(judge_names)}, with 95% intervals as bars; a ringed point moved more than the two "
        "runs' intervals allow (|z| > 1.96). "
        + (f"{flagged} change(s) are flagged: open that judge's logs for the flagged night before trusting "
           "the night's leaderboard, and refit or drop the judge if the change is real."
           if flagged else "No change is flagged: the judges behave as on earlier nights.")
    )
    parts.append(f"<p>{escape(lead)}</p>")
    parts.append('<p class="note">A change is judged against the standard errors read from the published 95% '
                 "intervals (half width / 1.96, as if symmetric); consecutive nights over a growing dump share "
                 "records, so the rule flags fewer changes than its nominal 5% then. A failure rate is compared "
                 "on the judgments added since the previous run against those before (two-proportion z test).</p>")
    if per_fit.height:
        parts.append("<h3>Per item set</h3>")
        parts.extend(_fit_figures(per_fit, runs, labels, figures))
        parts.append(_latest_table(per_fit, runs[-1], subject=False))
    if per_judge.height or history.failure_rates.height:
        parts.append("<h3>Per judge</h3>")
        parts.extend(_judge_figures(per_judge, runs, labels, figures))
        if history.failure_rates.height:
            parts.append(_failure_figure(history.failure_rates, runs, labels, figures))
            parts.append(_failure_table(history.failure_rates, runs[-1]))
        parts.append(_flag_table(per_judge, runs))
    parts.append("</section>")
    return "\n".join(parts)


def since_last_run_html(history: History) -> str:
    """The "Since the last run" section: fits added, removed or failed, per-fit changes, flags, judges."""
    parts = ['<section id="since-last-run"><h2>Since the last run</h2>']
    since = history.since
    if since is None:
        parts.append(f'<p class="note">{escape(FIRST_RUN)}</p></section>')
        return "".join(parts)
    parts.append(f"<p>Run <code>{escape(since.run_id)}</code> against run <code>{escape(since.previous_run_id)}</code>.</p>")
    items = []
    for label, fits in (("fits added", since.fits_added), ("fits no longer fitted", since.fits_removed)):
        if fits:
            items.append(f"{escape(label)}: " + ", ".join(escape(_fit(f) + f" ({f[3]})") for f in fits))
    for f in since.fits_failed:
        items.append(f'<span class="status-failed">fit failed</span>: {escape(_fit(f))} ({escape(f[3])}): {escape(f[4])}')
    if since.judges_new:
        items.append("judges new: " + ", ".join(escape(j) for j in since.judges_new))
    if since.judges_gone:
        items.append("judges gone: " + ", ".join(escape(j) for j in since.judges_gone))
    alerts = history_alerts(history)
    items.extend(f"<strong>{escape(a)}</strong>" for a in alerts)
    if not items:
        items.append("no fit added, removed or failed; no judge new or gone; no change flagged")
    parts.append("<ul>" + "".join(f"<li>{i}</li>" for i in items) + "</ul>")
    if since.changes.height:
        rows = [
            [escape(_fit(r)), escape(r["name"]), escape(r["unit"]), number(r["previous"]), number(r["current"]),
             _signed(r["change"])]
            for r in since.changes.iter_rows(named=True)
        ]
        parts.append(table_html(["fit", "number", "unit", "previous run", "this run", "change"], rows,
                                numeric=[False, False, False, True, True, True]))
    parts.append("</section>")
    return "\n".join(parts)


def history_alerts(history: History) -> list[str]:
    """Plain-text alert lines (index page, terminal): each change of the newest run beyond its intervals.

    A judge's offset, position bias or any other followed number whose change
    since its previous run has ``|z| > 1.96``, and a judge whose failure rate
    changed so (two-proportion z test). No history: no alert.
    """
    since = history.since
    if since is None:
        return []
    lines = []
    counts = {(r["subject"], r["name"]): r for r in since.flag_counts.iter_rows(named=True)}
    flagged = since.flagged.sort("subject", "name", *FIT, nulls_last=True)
    for (subject, name), rows in flagged.group_by("subject", "name", maintain_order=True):
        count = counts.get((subject, name))
        if subject is not None and count is not None and not count["alert"]:
            continue  # no more flags than chance gives a judge scoring this many fits
        if subject is not None and count is not None and count["tested"] > 1:
            shown = "; ".join(f"{_fit(r)} {number(r['previous_estimate'])} \u2192 {number(r['estimate'])}"
                              for r in rows.head(MAX_ALERT_FITS).iter_rows(named=True))
            more = f"; and {rows.height - MAX_ALERT_FITS} more" if rows.height > MAX_ALERT_FITS else ""
            lines.append(
                f"judge {subject}: {name} changed beyond the 95% intervals in {count['flagged']} of "
                f"{count['tested']} fits since run {rows['previous_run_id'][0]} (chance alone flags about "
                f"{FLAG_SHARE * count['tested']:.1f}; p = {p_value_text(count['p'])}): {shown}{more} "
                f"({rows['unit'][0]})"
            )
            continue
        for r in rows.iter_rows(named=True):
            who = f"judge {r['subject']}" if r["subject"] is not None else _fit(r)
            where = f" on {_fit(r)}" if r["subject"] is not None else ""
            lines.append(
                f"{who}: {r['name']} changed from {number(r['previous_estimate'])} to {number(r['estimate'])} "
                f"{r['unit']}{where} (z = {number(r['z'])}, beyond the 95% intervals) since run {r['previous_run_id']}"
            )
    for r in since.failure_flags.sort("judge_id").iter_rows(named=True):
        basis = (f"{r['new_failed']:,} of {r['new_total']:,} judgments added since run {r['previous_run_id']} failed"
                 if r["basis"] == "new judgments" else f"since run {r['previous_run_id']}")
        lines.append(
            f"judge {r['judge_id']}: failure rate now {_percent(r['estimate'])} of judgments ({basis}; "
            f"z = {number(r['z'])}, beyond the 95% level)"
        )
    return lines


# ------------------------------------------------------------ helpers


def _run_label(started: Any, run_id: Any) -> str:
    s = str(started or "")
    return f"{s[5:10]} {s[11:16]}" if len(s) >= 16 else str(run_id)[:16]


def _names(frame: pl.DataFrame) -> list[str]:
    return list(dict.fromkeys(frame.sort("analysis", maintain_order=True)["name"].to_list())) if frame.height else []


def _list(names: Sequence[str]) -> str:
    if len(names) <= 1:
        return "".join(names) or "numbers"
    return ", ".join(names[:-1]) + " and " + names[-1]


def _fit(row: Any) -> str:
    if isinstance(row, dict):
        return " / ".join(str(row[c]) for c in FIT)
    return " / ".join(str(v) for v in row[:3])


def _signed(value: Any) -> str:
    if value is None:
        return "\u2014"
    return ("+" if float(value) > 0 else "") + number(value)


def _percent(value: Any) -> str:
    return "\u2014" if value is None else f"{100 * float(value):.2g}%"


def _axis(name: str, unit: str) -> str:
    return f"{name} ({unit})"


def _priority(frame: pl.DataFrame, keys: list[str], latest: str) -> list[tuple[Any, ...]]:
    """Groups ordered for drawing: a flag in the newest run first, then a flag in any run, then by name."""
    if not frame.height:
        return []
    ranked = frame.group_by(keys).agg(
        now=(pl.col("flagged").fill_null(False) & (pl.col("run_id") == latest)).any(),
        ever=pl.col("flagged").fill_null(False).any(),
    ).sort(["now", "ever", *keys], descending=[True, True, *[False] * len(keys)])
    return [tuple(r) for r in ranked.select(keys).iter_rows()]


def _panels(frame: pl.DataFrame, line: pl.Expr) -> list[tuple[str, pl.DataFrame]]:
    out = []
    for name in _names(frame):
        rows = frame.filter(pl.col("name") == name)
        out.append((_axis(name, str(rows["unit"][0])),
                    rows.select("run_id", line.alias("line"), "estimate", "low", "high", "flagged")))
    return out


def _fit_figures(per_fit: pl.DataFrame, runs: list[str], labels: list[str], figures: dict[str, bytes]) -> list[str]:
    out = []
    groups = _priority(per_fit, ["item_set"], runs[-1])
    for (item_set,) in groups[:MAX_FIT_FIGURES]:
        rows = per_fit.filter(pl.col("item_set") == item_set)
        panels = _panels(rows, pl.concat_str("universe", "population", separator=" / "))
        fit = (str(item_set), "", "")
        out.append(_embed(
            fit, "history_item_set",
            partial(history_figure, panels, runs, labels, title=str(item_set)),
            f"{item_set}: each number over the runs, one line per judge universe / population, "
            "95% intervals as bars (none for counts).",
            figures, {}))
    if len(groups) > MAX_FIT_FIGURES:
        out.append(f'<p class="note">Figures for {MAX_FIT_FIGURES} of {len(groups)} item sets (flagged first); '
                   "the table lists every fit.</p>")
    return out


def _judge_figures(per_judge: pl.DataFrame, runs: list[str], labels: list[str], figures: dict[str, bytes]) -> list[str]:
    out = []
    groups = _priority(per_judge, list(FIT), runs[-1])
    for fit in groups[:MAX_JUDGE_FIGURES]:
        rows = per_judge.filter((pl.col("item_set") == fit[0]) & (pl.col("universe") == fit[1]) & (pl.col("population") == fit[2]))
        panels = _panels(rows, pl.col("subject"))
        name = (str(fit[0]), str(fit[1]), str(fit[2]))
        out.append(_embed(
            name, "history_judges",
            partial(history_figure, panels, runs, labels, title=" / ".join(name)),
            f"{' / '.join(name)}: each judge's numbers over the runs with 95% intervals; a ring marks a change "
            "beyond the intervals.",
            figures, {}))
    if len(groups) > MAX_JUDGE_FIGURES:
        out.append(f'<p class="note">Judge figures for {MAX_JUDGE_FIGURES} of {len(groups)} fits (flagged first); '
                   "the table of flagged changes lists them all.</p>")
    return out


def _failure_figure(rates: pl.DataFrame, runs: list[str], labels: list[str], figures: dict[str, bytes]) -> str:
    panel = rates.select("run_id", pl.col("judge_id").alias("line"), "estimate", "low", "high", "flagged")
    return _embed(
        ("store", "", ""), "history_failure_rate",
        lambda: history_figure([(_axis(FAILURE_NAME, FAILURE_UNIT), panel)], runs, labels,
                               title="judge failure rates in the store"),
        "Each judge's failed judgments out of all its judgments in the store at each run, with Wilson 95% "
        "intervals; a ring marks a run whose new judgments failed at a rate unlike the earlier ones.",
        figures, {})


def _latest_table(frame: pl.DataFrame, latest: str, *, subject: bool) -> str:
    now = frame.filter(pl.col("run_id") == latest).sort(*FIT, "analysis", "name")
    if not now.height:
        return ""
    rows = [
        [escape(_fit(r)), escape(r["name"]), escape(r["unit"]), number(r["estimate"]), interval_text(r["low"], r["high"]),
         _signed(r["change"]), number(r["z"]), escape(_flag_text(r))]
        for r in now.iter_rows(named=True)
    ]
    return table_html(["fit", "number", "unit", "this run", "95% interval", "change", "z", "flag"], rows,
                      numeric=[False, False, False, True, True, True, True, False])


def _flag_text(row: dict[str, Any]) -> str:
    if row["flagged"] is None:
        return str(row["reason"] or "")
    return "changed beyond the intervals" if row["flagged"] else "within the intervals"


def _flag_table(per_judge: pl.DataFrame, runs: list[str]) -> str:
    recent = runs[-FLAG_TABLE_RUNS:]
    flagged = per_judge.filter(pl.col("flagged").fill_null(False) & pl.col("run_id").is_in(recent))
    flagged = flagged.sort("started", *FIT, "subject", "name", descending=[True, False, False, False, False, False])
    if not flagged.height:
        return f'<p class="note">No judge change beyond the intervals in the last {len(recent)} runs.</p>'
    rows = [
        [escape(r["run_id"]), escape(_fit(r)), escape(r["subject"]), escape(r["name"]), escape(r["unit"]),
         number(r["previous_estimate"]), number(r["estimate"]), number(r["z"])]
        for r in flagged.iter_rows(named=True)
    ]
    return f"<p>Judge changes beyond the intervals in the last {len(recent)} runs, newest first:</p>" + table_html(
        ["run", "fit", "judge", "number", "unit", "previous", "this run", "z"], rows,
        numeric=[False, False, False, False, False, True, True, True])


def _failure_table(rates: pl.DataFrame, latest: str) -> str:
    now = rates.filter(pl.col("run_id") == latest).sort("judge_id")
    rows = [
        [escape(r["judge_id"]), f"{r['failed']:,} / {r['total']:,}", number(r["estimate"]),
         interval_text(r["low"], r["high"]),
         "\u2014" if r["new_total"] is None else f"{r['new_failed']:,} / {r['new_total']:,}",
         number(r["z"]), escape(_flag_text(r))]
        for r in now.iter_rows(named=True)
    ]
    return table_html(["judge", "failed / judgments", "failure rate (share)", "Wilson 95% interval",
                       "added since the previous run: failed / judgments", "z", "flag"], rows,
                      numeric=[False, True, True, True, True, True, False])
