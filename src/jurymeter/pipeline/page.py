r"""The nightly run's HTML report: one self-contained page and its figures as PNG.

Pure rendering: the run's tidy tables (``docs/results.md``) and its
``summary.json`` in, a :class:`RenderedReport` out. Nothing here reads or writes
files; the caller stores ``html`` as ``report/index.html`` and each entry of
``figures`` as ``report/<name>``.

The page knows no analysis by name: the Fits tables (one per set of analyses
the fits ran) have one column per headline of those registered analyses (:mod:`jurymeter.analyses`), and each
fit's section holds the section of every analysis, in registry order, that
has rows for that fit or a summary entry. A headline whose key starts with
``dropped_`` (what a fit left out: counts, and ids as text) is not a column:
under each Fits table, one note per fit that dropped anything says it
(:func:`jurymeter.analyses.base.dropped_line`). A headline ``<key>_reason`` that is
not null says why ``<key>`` is not estimable: its cell says "not estimable", with
the reason as its tooltip, and never a number.

Safety. Every string that comes from data (ids, names, error messages, run
ids) is HTML-escaped with ``html.escape(..., quote=True)`` wherever it lands,
attributes and ``<title>`` included. In figures, ``$`` in data strings is
escaped as ``\$`` so matplotlib never reads them as mathtext, and figures are
drawn under matplotlib's default style with ``text.usetex`` off, whatever the
user's ``matplotlibrc`` says. Figures are drawn on an explicit Agg canvas
(``FigureCanvasAgg``) without importing ``pyplot``: no window can open, and
the process-wide backend is left alone. Figure file names are a sanitized slug
of the fit's names plus a hash of the exact names, so they never hold a path
separator or ``..`` and names that differ only in case or punctuation do not
collide.

References
----------
.. [Anand2026] A. Anand, "Ask Which, Not How Good: Sizing Benchmarks Scored by
   an LLM", 2026 (``papers/ask-which-not-how-good.txt`` and its appendix).
.. [Zhu2026] Z. Zhu et al., "CyclicJudge: Mitigating Judge Bias Efficiently in
   LLM-based Evaluation", 2026 (``papers/cyclicjudge.txt``).
"""

from __future__ import annotations

import csv
import html
import io
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import polars as pl

from jurymeter.analyses import registered
from jurymeter.analyses.base import dropped_line, headline_why
from jurymeter.analyses.headlines import fit_label, names_label, run_headlines
from jurymeter.pipeline.outcome import seconds_by_analysis
from jurymeter.pipeline.plans import NAMES
from jurymeter.render.history import History, history_alerts, history_html, since_last_run_html
from jurymeter.render.html import (
    CSS,
    FIT_COLUMNS,
    FitName,
    FitTables,
    PageFit,
    SectionBuilder,
    _e,
    _fit_token,
    _has_rows,
    _interval,
    _num,
    _slug,
    _table,
    glossary_html,
)


@dataclass(frozen=True, slots=True)
class RenderedReport:
    """The rendered pages, their figures and their tables as CSV.

    Attributes
    ----------
    html : str
        The run's index page (``report/index.html``): alerts, one headline row
        per fit linking to its page, the run's facts, the run history.
    pages : dict[str, str]
        One page per fit, by path relative to ``report/``
        (``fits/<token>.html``; the token is :func:`jurymeter.render.html.fit_token`'s).
    figures : dict[str, bytes]
        File name (safe: no path separator, no ``..``) to the same figure's
        PNG bytes, in page order. Every page is self-contained: its figures
        are also inlined as ``data:image/png;base64,...`` URIs.
    downloads : dict[str, bytes]
        Every table of every page as CSV, by path relative to ``report/``
        (``csv/<page>__<n>-<heading>.csv``); each table links to its file.
    """

    html: str
    figures: dict[str, bytes]
    pages: dict[str, str] = field(default_factory=dict)
    downloads: dict[str, bytes] = field(default_factory=dict)

    def files(self) -> dict[str, bytes]:
        """Every file of the report folder by path relative to ``report/``, the index last."""
        out: dict[str, bytes] = dict(self.figures)
        out.update(self.downloads)
        out.update({path: page.encode() for path, page in self.pages.items()})
        out["index.html"] = self.html.encode()
        return out

    def text(self) -> str:
        """The index and every fit page, one after the other (what a reader of the whole report sees)."""
        return "\n".join([self.html, *self.pages.values()])


@dataclass(frozen=True, slots=True)
class IndexParts:
    """What the run history adds to the index page (rendered by :mod:`jurymeter.render.history`)."""

    since_last_run: str = ""  # HTML: what changed since the last published run
    history: str = ""  # HTML: the run history section, its figures inlined
    alerts: tuple[str, ...] = ()  # plain text: changes larger than the intervals allow
    figures: Mapping[str, bytes] = field(default_factory=dict)  # the history's PNGs by file name


def index_parts(history: History, *, figures: bool = True) -> IndexParts:
    """The run history's parts of the index page (:mod:`jurymeter.render.history`); only its alerts
    without ``figures`` (a run without a report still prints them)."""
    alerts = tuple(history_alerts(history))
    if not figures:
        return IndexParts(alerts=alerts)
    drawn: dict[str, bytes] = {}
    section = history_html(history, drawn)
    return IndexParts(since_last_run=since_last_run_html(history), history=section, alerts=alerts, figures=drawn)


def render_report(
    tables: Mapping[str, pl.DataFrame],
    summary: Mapping[str, Any],
    figures: Mapping[str, bytes] | None = None,
    index: IndexParts | None = None,
    emit: Callable[[dict[str, bytes]], None] | None = None,
) -> RenderedReport:
    r"""Render a nightly run's tables and summary as an index page and one page per fit.

    Parameters
    ----------
    tables : Mapping[str, polars.DataFrame]
        The run's tidy tables by name (``components``, ``dstudy``, ``ceilings``,
        ... every registered analysis's tables; columns as in
        ``docs/results.md``). Missing or empty tables leave their part of the
        page out.
    summary : Mapping[str, Any]
        The run's ``summary.json`` (``run_id``, ``started``, ``finished``,
        ``status``, ``ingest``, ``fits``, ...; ``headlines`` when the run
        wrote them, else they are said again from ``fits``). Fits whose
        ``status`` is ``"failed"`` are alerts at the top with their one-line error.
    figures : Mapping[str, bytes], optional
        PNGs already drawn (by :func:`fit_figures`, on the workers), by file
        name; a figure found here is embedded as it is, the others are drawn.
    index : IndexParts, optional
        The run history's parts of the index page.
    emit : callable, optional
        Given, each fit page's files (the page, its CSV files, its figures; paths relative to
        ``report/``) are passed to it as soon as the page is rendered, and not kept: the report of
        a store with many fits is written without holding it whole (issue 25: the pages of 32 fits
        held 46 MB at the main process's peak).

    Returns
    -------
    RenderedReport
        The index, the fit pages, the figures (file name to PNG bytes) and the tables as CSV
        (with ``emit``, only the index's own).

    Notes
    -----
    Figures reproduce [Anand2026]_ figure 1 (E rho^2 against items, one curve
    per judge count, dashed asymptotes at the ceilings
    :math:`\sigma^2_s / (\sigma^2_s + \sigma^2_{sj}/n_j)`), figure 4 (the
    sizing nomogram) and appendix figure 2 (MDD against the split of a call
    budget, optimum marked), and [Zhu2026]_ figure 1 (Var of the benchmark
    score against budget for strategies A, B, C) and figure 2 (judge biases
    per system).

    Examples
    --------
    >>> page = render_report({}, {"run_id": "<r1>", "fits": []})
    >>> "<title>jurymeter run &lt;r1&gt;</title>" in page.html, page.figures
    (True, {})
    """
    index = index or IndexParts()
    tables = FitTables(tables)  # each table split by fit once, not filtered once per fit
    fits = _fits(tables, summary)
    drawn: Mapping[str, bytes] = figures or {}
    used: dict[str, bytes] = {}
    run_id = str(summary.get("run_id", ""))
    pages, downloads = _fit_pages(tables, fits, run_id, used, drawn, emit)
    used.update(index.figures)
    headlines = summary.get("headlines") or run_headlines(summary, index.alerts)
    sections = "\n".join(
        [
            _alerts_section(headlines.get("alerts") or []),
            _headlines_section(fits, headlines, tables),
            index.since_last_run,
            _summary_section(summary),
            _failed_section(summary),
            _skipped_section(summary),
            _judges_section(summary),
            _plans_section(summary),
            _fit_index(fits, tables),
            index.history,
        ]
    )
    # The symbols the page uses, explained before their first use (issue 24, point 6).
    body = "\n".join([f"<h1>jurymeter run {_e(run_id)}</h1>", _lead_line(summary), glossary_html(sections), sections])
    page, csv = _with_downloads(_document(f"jurymeter run {run_id}", body), "index.html")
    downloads.update(csv)
    return RenderedReport(html=page, figures=used, pages=pages, downloads=downloads)


def _fit_pages(
    tables: FitTables,
    fits: Sequence[tuple[PageFit, dict[str, Any] | None]],
    run_id: str,
    used: dict[str, bytes],
    drawn: Mapping[str, bytes],
    emit: Callable[[dict[str, bytes]], None] | None = None,
) -> tuple[dict[str, str], dict[str, bytes]]:
    """One page per fit that has one (by path), and their tables' CSV downloads; the figures go to ``used``.

    With ``emit``, each page's files go to it instead (nothing is returned or added to ``used``).
    """
    pages: dict[str, str] = {}
    downloads: dict[str, bytes] = {}
    for fit, entry in fits:
        if not _has_page(tables, fit, entry):
            continue
        path = fit_page_path(fit)
        page_figures: dict[str, bytes] = {} if emit else used
        section = _fit_section(tables, fit, entry, page_figures, drawn)
        body = "\n".join([
            f'<p class="nav"><a href="../index.html">\u2190 run {_e(run_id)}: every fit</a></p>',
            glossary_html(section), section,
        ])
        page, csv = _with_downloads(_document(f"jurymeter {_page_label(fit)} (run {run_id})", body), path)
        if emit:
            emit({path: page.encode(), **csv, **page_figures})
        else:
            pages[path] = page
            downloads.update(csv)
    return pages, downloads


def _document(title: str, body: str) -> str:
    return (
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
        "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n"
        f"<title>{_e(title)}</title>\n<style>{CSS}</style>\n</head>\n"
        f"<body>\n{body}\n</body>\n</html>\n"
    )


def fit_page_path(fit: PageFit) -> str:
    """A fit's page, relative to ``report/``: ``fits/<token>.html`` (a safe file name)."""
    return f"fits/{_page_token(fit)}.html"


def _has_page(tables: Mapping[str, pl.DataFrame], fit: PageFit, entry: Mapping[str, Any] | None) -> bool:
    """A failed fit with no rows has nothing to show but its error (an alert on the index).

    Rows of its own protocol's tables: a pointwise and a pairwise item set may share a name.
    """
    if entry is None or entry.get("status") != "failed":
        return True
    name, protocol = fit
    protocols = _table_protocols()
    own = {t: f for t, f in tables.items() if not protocol or protocols.get(t) == protocol}
    return _has_rows(own, name)


_TABLE = re.compile(r"<table>.*?</table>", re.DOTALL)
_ROW = re.compile(r"<tr[^>]*>(.*?)</tr>", re.DOTALL)
_CELL = re.compile(r"<t[hd][^>]*>(.*?)</t[hd]>", re.DOTALL)
_TAG = re.compile(r"<[^>]+>")
_HEADING = re.compile(r"<h[1-4][^>]*>(.*?)</h[1-4]>", re.DOTALL)


def _with_downloads(page: str, path: str) -> tuple[str, dict[str, bytes]]:
    """Every table of ``page`` also as a CSV file, linked under the table.

    The CSV holds what the table shows (cells as text: tags dropped,
    entities unescaped), so it is every table, whichever analysis wrote it.
    The page's tables come from :func:`jurymeter.render.html.table_html`,
    whose cells hold only escaped text and markup, so the cells are found
    exactly. Files are ``csv/<page>__<n>-<heading>.csv``, ``<heading>`` the
    slug of the heading above the table.
    """
    stem = path.removesuffix(".html").replace("/", "__")
    up = "../" * path.count("/")
    files: dict[str, bytes] = {}
    out: list[str] = []
    last = 0
    for n, match in enumerate(_TABLE.finditer(page), start=1):
        headings = _HEADING.findall(page, 0, match.start())
        heading = _slug(html.unescape(_TAG.sub("", headings[-1]))) if headings else "table"
        name = f"csv/{stem}__{n:02d}-{heading}.csv"
        buffer = io.StringIO()
        writer = csv.writer(buffer, lineterminator="\n")
        for row in _ROW.findall(match.group(0)):
            writer.writerow([html.unescape(_TAG.sub("", cell)).strip() for cell in _CELL.findall(row)])
        files[name] = buffer.getvalue().encode()
        out.append(page[last : match.end()])
        out.append(f'<p class="csv"><a href="{up}{_e(name)}" download>CSV</a></p>')
        last = match.end()
    out.append(page[last:])
    return "".join(out), files


def _lead_line(summary: Mapping[str, Any]) -> str:
    fits = summary.get("fits") or []
    counts = {s: sum(1 for f in fits if f.get("status") == s) for s in ("fitted", "reused", "failed")}
    return (f'<p class="lead">Run {_e(summary.get("status", "unknown"))}: {len(fits)} fits '
            f"({counts['fitted']} fitted, {counts['reused']} reused from an earlier run, {counts['failed']} failed). "
            "Alerts come first; each fit's row says which systems can be told apart and what it would take "
            "to tell the rest apart, and links to its page.</p>")


def _alerts_section(alerts: Sequence[str]) -> str:
    if not alerts:
        return '<section id="alerts"><p class="note">No alerts: no fit failed, no judge changed more than its intervals allow, nothing was dropped.</p></section>'
    items = "".join(f"<li>{_e(a)}</li>" for a in alerts)
    return f'<section id="alerts" class="failed"><h2>Alerts ({len(alerts)})</h2><ul>{items}</ul></section>'


def _headlines_section(
    fits: Sequence[tuple[PageFit, dict[str, Any] | None]],
    headlines: Mapping[str, Any],
    tables: Mapping[str, pl.DataFrame],
) -> str:
    """One row per fit: its link, status and headline sentence (``summary.json`` ``headlines``)."""
    said = {
        ((str(h.get("item_set", "")), str(h.get("universe", "")), str(h.get("population", ""))), str(h.get("protocol") or "")): h
        for h in headlines.get("fits") or []
    }
    rows = []
    for fit, entry in fits:
        h = said.get(fit) or {}
        status = str((entry or {}).get("status", "unknown"))
        label = _e(_page_label(fit))
        link = f'<a href="{_e(fit_page_path(fit))}">{label}</a>' if _has_page(tables, fit, entry) else label
        rows.append([link, f'<span class="status-{_e(status)}">{_e(status)}</span>', _e(h.get("sentence") or "")])
    if not rows:
        return ""
    return ('<section id="headlines"><h2>Headlines</h2>'
            + _table(["fit (item set / universe / population)", "status", "headline"], rows) + "</section>")


def fit_figures(tables: Mapping[str, pl.DataFrame], fit: FitName, protocol: str = "") -> dict[str, bytes]:
    """The PNG figures of one fit, by file name: what :func:`render_report` would draw for it.

    Called where the fit runs (a Dask worker), so the figures are drawn in
    parallel and cached with the fit; :func:`render_report` then embeds them.
    """
    figures: dict[str, bytes] = {}
    _fit_section(tables, (fit, protocol), None, figures, {})
    return figures


def _table_protocols() -> dict[str, str]:
    """Which protocol's fits each registered table holds (an analysis's first protocol)."""
    return {t.name: a.protocols[0] for a in registered() for t in a.tables}


def _fits(tables: Mapping[str, pl.DataFrame], summary: Mapping[str, Any]) -> list[tuple[PageFit, dict[str, Any] | None]]:
    """Fits in summary order, then fits found only in the tables (sorted).

    A fit is its names and its protocol: an item set name may be both a
    pointwise and a pairwise item set (MT-Bench's single and pair files), two
    fits the page keeps apart. Summaries written before the protocol was
    recorded say none (``""``).
    """
    out: list[tuple[PageFit, dict[str, Any] | None]] = []
    seen: set[PageFit] = set()
    for entry in summary.get("fits") or []:
        name = (str(entry.get("item_set", "")), str(entry.get("universe", "")), str(entry.get("population", "")))
        fit = (name, str(entry.get("protocol") or ""))
        if fit not in seen:
            seen.add(fit)
            out.append((fit, dict(entry)))
    named = {name for name, _ in seen}
    protocols = _table_protocols()
    extra: set[PageFit] = set()
    for table, frame in tables.items():
        if frame.height and all(c in frame.columns for c in FIT_COLUMNS):
            for row in frame.select(FIT_COLUMNS).unique().iter_rows():
                name = (str(row[0]), str(row[1]), str(row[2]))
                fit = (name, protocols.get(table, ""))
                if fit not in seen and name not in named:
                    extra.add(fit)
    out.extend((fit, None) for fit in sorted(extra))
    return out


def _page_label(fit: PageFit) -> str:
    return names_label(*fit)


def _page_token(fit: PageFit) -> str:
    name, protocol = fit
    return _fit_token((*name, protocol)) if protocol == "pairwise" else _fit_token(name)


def _summary_section(summary: Mapping[str, Any]) -> str:
    fits = summary.get("fits") or []
    counts = {s: sum(1 for f in fits if f.get("status") == s) for s in ("fitted", "reused", "failed")}
    facts = [
        ("run id", summary.get("run_id")),
        ("status", summary.get("status")),
        ("started", summary.get("started")),
        ("finished", summary.get("finished")),
        ("store", summary.get("store")),
        ("landing", summary.get("landing")),
        ("config digest", summary.get("config_digest")),
        ("fits", f"{counts['fitted']} fitted, {counts['reused']} reused, {counts['failed']} failed"),
    ]
    timings = summary.get("timings") or {}
    if timings:
        facts.append(("timings (s)", ", ".join(f"{k} {_num(v)}" for k, v in timings.items())))
    rows = [[_e(k), _e(v)] for k, v in facts if v is not None]
    parts = ['<section id="summary"><h2>Run</h2>', _table(None, rows)]
    ingest = summary.get("ingest")
    totals = ingest.get("totals") if isinstance(ingest, Mapping) else None
    if totals:
        parts.append("<h3>Ingest reconciliation</h3>")
        parts.append(_table([_e(k) for k in totals], [[_e(_num(v)) for v in totals.values()]], numeric=[True] * len(totals)))
        read = totals.get("read")
        rest = [totals.get(k) for k in ("accepted", "quarantined", "duplicates_dropped")]
        if read is not None and all(v is not None for v in rest):
            balanced = read == sum(rest)
            parts.append(
                f'<p class="note">read = accepted + quarantined + duplicates dropped: '
                f"{'balanced' if balanced else '<strong>NOT balanced</strong>'}.</p>"
            )
    elif ingest is None and "ingest" in summary:
        parts.append('<p class="note">Nothing new to ingest.</p>')
    parts.append("</section>")
    return "\n".join(parts)


def _failed_section(summary: Mapping[str, Any]) -> str:
    failed = [f for f in summary.get("fits") or [] if f.get("status") == "failed"]
    if not failed:
        return ""
    items = "".join(
        f"<li><strong>{_e(fit_label(f))}"
        f"</strong>: <code>{_e(f.get('error') or 'no error message')}</code></li>"
        for f in failed
    )
    return (
        f'<section id="failed" class="failed"><h2>Failed fits ({len(failed)})</h2>'
        f"<p>These fits produced no tables; their error is shown as recorded.</p><ul>{items}</ul></section>"
    )


def _skipped_section(summary: Mapping[str, Any]) -> str:
    """The item sets no registered analysis can fit (``summary.json`` ``skipped``), with the reason."""
    skipped = summary.get("skipped") or []
    if not skipped:
        return ""
    rows = [[_e(s.get("item_set", "")), _e(s.get("protocol", "")), _e(s.get("reason", ""))] for s in skipped]
    return ('<section id="skipped"><h2>Not fitted</h2><p class="note">No registered analysis fits these '
            "item sets; their records are stored.</p>" + _table(["item set", "protocol", "reason"], rows)
            + "</section>")


def _judges_section(summary: Mapping[str, Any]) -> str:
    """Judge health (``summary.json`` ``judges``): the judges any of whose judgments failed."""
    failing = [j for j in summary.get("judges") or [] if j.get("failed")]
    if not failing:
        return ""
    rows = [
        [_e(j["judge_id"]), _e(_num(j["stored"])), _e(_num(j["failed"])), _e(f"{100 * j['failed_share']:.1f} %"),
         _e(_num(j["parse_failure"])), _e(_num(j["judge_call_failed"])), _e(_num(j["unscored"]))]
        for j in failing
    ]
    header = ["judge", "judgments stored", "failed", "failed share", "parse failures", "failed calls", "unscored"]
    return ('<section id="judges"><h2>Judge health</h2><p class="note">Judgments quarantined because the judge '
            "gave no usable verdict: a judge with many is thinner in every analysis.</p>"
            + _table(header, rows, numeric=[False] + [True] * 6) + "</section>")


def _plans_section(summary: Mapping[str, Any]) -> str:
    """Each stored plan whose item set this run fitted: its predictions against what the run measured."""
    rows = summary.get("plans") or []
    if not rows:
        return ""
    body = []
    for r in rows:
        verdict = ("inside" if r["inside"] else "OUTSIDE") if r["inside"] is not None else f"not compared: {r['reason']}"
        body.append([
            _e(r["plan_id"]), _e(r["item_set"]), _e(NAMES.get(str(r["quantity"]), r["quantity"])),
            _e(f"{_num(r['predicted'])} [{_interval(r['predicted_low'], r['predicted_high'])}]"),
            _e(f"{_num(r['realised'])} [{_interval(r['realised_low'], r['realised_high'])}]"),
            _e(verdict),
        ])
    header = ["plan", "item set", "quantity", "planned [95% prediction]", "realised [95% interval]", "realised against the plan"]
    return ('<section id="plans"><h2>Plans against their runs</h2><p class="note">A plan (jurymeter plan) predicted '
            "what the run of its judgments would measure, with an interval holding both tonight's uncertainty and "
            "the next run's own sampling; a realised value outside it means the judges or items changed.</p>"
            + _table(header, body, numeric=[False, False, False, True, True, False]) + "</section>")


def _part(entry: Mapping[str, Any], analysis: str) -> Mapping[str, Any]:
    """A fit's summary entry for one analysis (empty when the fit has none)."""
    return (entry.get("analyses") or {}).get(analysis) or {}



def _fit_index(fits: Sequence[tuple[PageFit, dict[str, Any] | None]], tables: Mapping[str, pl.DataFrame]) -> str:
    """The Fits tables: one per set of analyses the fits ran (pointwise and pairwise fits apart), so
    that each table has the headline columns of its own analyses only."""
    if not fits:
        return '<p class="note">This run has no fits.</p>'
    analyses = registered()
    groups: dict[tuple[str, ...], list[tuple[PageFit, dict[str, Any]]]] = {}
    for name, entry in fits:
        e = entry or {}
        names = set(e.get("analyses") or {})
        groups.setdefault(tuple(a.name for a in analyses if a.name in names), []).append((name, e))
    titles = {a.name: a.title for a in analyses}
    parts = []
    for ran, members in groups.items():
        # What a fit left out (``dropped_*`` headlines) is a note under the table, not a column.
        columns = [(a.name, h) for a in analyses if a.name in ran for h in a.headline if h.table and not h.key.startswith("dropped_")]
        rows = []
        for name, e in members:
            status = str(e.get("status", "unknown"))
            shown = _has_page(tables, name, e)
            link = (f'<a href="{_e(fit_page_path(name))}">{_e(_page_label(name))}</a>' if shown
                    else _e(_page_label(name)))
            cells = [link, f'<span class="status-{_e(status)}">{_e(status)}</span>']
            for analysis, h in columns:
                part = _part(e, analysis)
                value, why = part.get(h.key), headline_why(part, h.key)
                if why:  # a missing number says so, and why, in its cell (issue 24, point 4)
                    cells.append(f'<abbr title="{_e(why[1])}">{_e(why[0])}</abbr>')
                    continue
                cells.append(_e(_num(value) if h.kind == "number" else ("" if value is None else value)))
            rows.append(cells)
        header = ["fit (item set / universe / population)", "status", *(_e(h.label) for _, h in columns)]
        numeric = [False, False, *(h.kind in ("number", "count") for _, h in columns)]
        caption = ""
        if len(groups) > 1:
            caption = f'<p class="note">{_e(", ".join(titles[n] for n in ran) or "no analysis")}</p>'
        parts.append(caption + _table(header, rows, numeric=numeric))
        meanings = [f"<strong>{_e(h.label)}</strong>: {_e(h.doc)}" for _, h in columns if h.doc]
        if meanings:
            parts.append(f'<p class="note">{"; ".join(meanings)}.</p>')
        parts.append(_dropped_notes(members, [a for a in analyses if a.name in ran]))
    return '<section id="fits"><h2>Fits</h2>' + "".join(parts) + "</section>"


def _dropped_notes(members: Sequence[tuple[PageFit, dict[str, Any]]], analyses: Sequence[Any]) -> str:
    """Under a Fits table, one note per fit and analysis that left anything out (:func:`jurymeter.analyses.base.dropped_line`)."""
    notes = []
    for name, e in members:
        for a in analyses:
            line = dropped_line(a.headline, (e.get("analyses") or {}).get(a.name) or {})
            if line:
                notes.append(f'<p class="note">{_e(_page_label(name))} ({_e(a.title)}) dropped: {_e(line)}.</p>')
    return "".join(notes)


def _fit_section(
    tables: Mapping[str, pl.DataFrame],
    page_fit: PageFit,
    entry: dict[str, Any] | None,
    figures: dict[str, bytes],
    drawn: Mapping[str, bytes],
) -> str:
    e = entry or {}
    fit, protocol = page_fit
    parts = [f'<section id="fit-{_e(_page_token(page_fit))}">', f"<h2>{_e(_page_label(page_fit))}</h2>"]
    facts = [
        f"item set <strong>{_e(fit[0])}</strong>" + (f" ({_e(protocol)})" if protocol else ""),
        f"universe <strong>{_e(fit[1])}</strong>",
        f"population <strong>{_e(fit[2])}</strong>",
    ]
    status = str(e.get("status", "not in summary"))
    facts.append(f'status <span class="status-{_e(status)}">{_e(status)}</span>')
    if e.get("seconds") is not None:
        spent = seconds_by_analysis(e.get("analyses"))
        own = f" ({', '.join(f'{_e(name)} {_e(_num(sec))} s' for name, sec in spent)})" if spent else ""
        facts.append(f"{_e(_num(e['seconds']))} s{own}")
    parts.append(f"<p>{'; '.join(facts)}.</p>")
    for analysis in registered():
        if protocol and protocol not in analysis.protocols:  # another protocol's fit of the same name
            continue
        page = SectionBuilder(tables, fit, e, figures, drawn, label=_page_label(page_fit))
        part = (e.get("analyses") or {}).get(analysis.name)
        page.summary = dict(part or {})
        has_rows = any(page.rows(t.name).height for t in analysis.tables)
        if part is not None and part.get("status") == "skipped" and not has_rows:
            parts.append(f"<h3>{_e(analysis.title)}</h3>")
            parts.append(f'<p class="note">Not fitted: {_e(part.get("reason") or "no reason given")}.</p>')
            continue
        if part is None and not has_rows:
            continue
        analysis.section(page)
        if page.parts:
            parts.append(f"<h3>{_e(analysis.title)}</h3>")
            parts.append(page.html())
    parts.append("</section>")
    return "\n".join(parts)
