"""The nightly run's HTML report: one self-contained page and its figures as PNG.

Pure rendering: the run's tidy tables (``docs/results.md``) and its
``summary.json`` in, a :class:`RenderedReport` out. Nothing here reads or writes
files; the caller stores ``html`` as ``report/index.html`` and each entry of
``figures`` as ``report/<name>``.

Per fit (item set x judge universe x system population) the page shows, in
order: the fit's design and status; the leaderboard with its tie groups
(:func:`jurymeter.stats.ranking.tie_groups`); the variance components; the
D-study with intervals; E rho^2 against items per judge count ([Anand2026]_
figure 1); the sizing nomogram ([Anand2026]_ figure 4); the split of a call
budget ([Anand2026]_ appendix figure 2); and, where CyclicJudge ran, the
variance of the three judge-allocation strategies against budget ([Zhu2026]_
figure 1) and the judge x system bias heatmap ([Zhu2026]_ figure 2).

Safety. Every string that comes from data (ids, names, error messages, run
ids) is HTML-escaped with ``html.escape(..., quote=True)`` wherever it lands,
attributes and ``<title>`` included. In figures, ``$`` in data strings is
escaped as ``\\$`` so matplotlib never reads them as mathtext, and figures are
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

import base64
import hashlib
import html
import io
import json
import math
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import matplotlib
import matplotlib.style
import numpy as np
import polars as pl
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.colors import CenteredNorm
from matplotlib.figure import Figure

FitName = tuple[str, str, str]
FIT_COLUMNS = ("item_set", "universe", "population")
# E rho^2 = 0.8 is the conventional threshold drawn in [Anand2026] figure 1.
CONVENTIONAL_THRESHOLD = 0.8
NOMOGRAM_CONTOURS = (0.7, 0.8, 0.9)
ROUND_TICKS = (1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000, 10000)
STRATEGY_LABELS = {
    "A": "A: all judges",
    "B": "B: random single judge",
    "C": "C: CyclicJudge",
}
DSTUDY_LABELS = {
    "erho2": "E\u03c1\u00b2 at the observed sizes",
    "phi": "\u03a6 at the observed sizes",
    "mdd95": "MDD95 at the observed sizes (points)",
    "erho2_30": "E\u03c1\u00b2 at 30 items, 1 judge, 1 run",
    "mdd95_30": "MDD95 at 30 items, 1 judge, 1 run",
    "mdd95_unlimited_items": "MDD95 with unlimited items, 1 judge",
    "ceiling": "single-judge ceiling (unlimited items)",
    "ceiling_3_judges": "ceiling with 3 judges",
    "mdd95_in_sd_of_system_means": "MDD95 in SDs of the system means",
    "judges_needed": "judges needed for the target (30 items, 3 runs)",
    "items_needed": "items needed for the target (1 judge, 1 run)",
}
# Longest data string drawn in a figure (tick labels, titles); the page shows it whole.
FIGURE_TEXT_MAX = 40
FIGURE_DPI = 100
# Above this many systems the heatmap labels every k-th row only (the figure height is capped).
HEATMAP_MAX_LABELS = 70
STYLE = {"text.usetex": False, "font.size": 9, "axes.titlesize": 10, "axes.titley": 1.0}
CSS = """
body{font-family:system-ui,-apple-system,"Segoe UI",sans-serif;margin:0 auto;max-width:1100px;
padding:1rem 1.5rem;color:#222;line-height:1.4}
h1{font-size:1.5rem}h2{font-size:1.25rem;border-bottom:2px solid #ccc;padding-bottom:.2rem;margin-top:2.5rem}
h3{font-size:1.05rem;margin-top:1.5rem}
table{border-collapse:collapse;margin:.5rem 0;font-size:.9rem}
th,td{border:1px solid #ddd;padding:.2rem .5rem;text-align:left;vertical-align:top}
th{background:#f3f3f3}td.n{text-align:right;font-variant-numeric:tabular-nums}
tr.tie-a td{background:#eef4fb}tr.tie-b td{background:#fff}
tr.group-start td{border-top:2px solid #6a8fbf}
.failed{background:#fdecea;border:1px solid #e0a39b;padding:.5rem 1rem}
.status-failed{color:#a12}.status-reused{color:#666}.note{color:#555;font-size:.9rem}
figure{margin:1rem 0}figure img{max-width:100%;height:auto;border:1px solid #eee}
figcaption{font-size:.85rem;color:#555}code{font-size:.85em}
"""


@dataclass(frozen=True, slots=True)
class RenderedReport:
    """The rendered page and its figures.

    Attributes
    ----------
    html : str
        One self-contained HTML page (CSS inline, every figure inlined as a
        ``data:image/png;base64,...`` URI).
    figures : dict[str, bytes]
        File name (safe: no path separator, no ``..``) to the same figure's
        PNG bytes, in page order.
    """

    html: str
    figures: dict[str, bytes]


def render_report(
    tables: Mapping[str, pl.DataFrame],
    summary: Mapping[str, Any],
    figures: Mapping[str, bytes] | None = None,
) -> RenderedReport:
    """Render a nightly run's tables and summary as one HTML page with figures.

    Parameters
    ----------
    tables : Mapping[str, polars.DataFrame]
        The run's tidy tables by name (``components``, ``dstudy``, ``ceilings``,
        ``erho2_curve``, ``nomogram``, ``budget``, ``leaderboard``,
        ``cyclic_systems``, ``cyclic_strategies``, ``judge_offsets``; columns
        as in ``docs/results.md``). Missing or empty tables leave their part of
        the page out.
    summary : Mapping[str, Any]
        The run's ``summary.json`` (``run_id``, ``started``, ``finished``,
        ``status``, ``ingest``, ``fits``, ...). Fits whose ``status`` is
        ``"failed"`` are listed at the top with their one-line error.
    figures : Mapping[str, bytes], optional
        PNGs already drawn (by :func:`fit_figures`, on the workers), by file
        name; a figure found here is embedded as it is, the others are drawn.

    Returns
    -------
    RenderedReport
        The page and the figures (file name to PNG bytes).

    Notes
    -----
    Figures reproduce [Anand2026]_ figure 1 (E rho^2 against items, one curve
    per judge count, dashed asymptotes at the ceilings
    :math:`\\sigma^2_s / (\\sigma^2_s + \\sigma^2_{sj}/n_j)`), figure 4 (the
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
    fits = _fits(tables, summary)
    drawn = dict(figures or {})
    used: dict[str, bytes] = {}
    sections = []
    for name, entry in fits:
        if entry is not None and entry.get("status") == "failed" and not _has_rows(tables, name):
            continue
        sections.append(_fit_section(tables, name, entry, used, drawn))
    run_id = str(summary.get("run_id", ""))
    body = "\n".join(
        [
            f"<h1>jurymeter run {_e(run_id)}</h1>",
            _summary_section(summary),
            _failed_section(summary),
            _fit_index(fits, tables),
            *sections,
        ]
    )
    page = (
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
        "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n"
        f"<title>jurymeter run {_e(run_id)}</title>\n<style>{CSS}</style>\n</head>\n"
        f"<body>\n{body}\n</body>\n</html>\n"
    )
    return RenderedReport(html=page, figures=used)


def fit_figures(tables: Mapping[str, pl.DataFrame], fit: FitName) -> dict[str, bytes]:
    """The PNG figures of one fit, by file name: what :func:`render_report` would draw for it.

    Called where the fit runs (a Dask worker), so the figures are drawn in
    parallel and cached with the fit; :func:`render_report` then embeds them.
    """
    figures: dict[str, bytes] = {}
    _fit_section(tables, fit, None, figures, {})
    return figures


def figure_file_name(fit: FitName, kind: str) -> str:
    """A safe, collision-free PNG file name for one figure of one fit.

    Parameters
    ----------
    fit : tuple of str
        ``(item_set, universe, population)``.
    kind : str
        The figure, e.g. ``"erho2"`` (letters, digits, ``-`` and ``_`` only).

    Returns
    -------
    str
        ``<slug>__<hash>__<kind>.png``: the slug keeps lowercase ASCII letters,
        digits, ``-`` and ``_`` of the names (anything else becomes ``-``); the
        hash is the first 12 hex digits of the SHA-256 of the exact names, so
        names differing only in case or punctuation get different files, also
        on case-insensitive file systems.

    Raises
    ------
    ValueError
        ``kind`` holds a character other than letters, digits, ``-``, ``_``.

    Examples
    --------
    >>> figure_file_name(("mt-bench", "all", "all"), "erho2")
    'mt-bench__all__all__0a036048bb70__erho2.png'
    """
    if not re.fullmatch(r"[A-Za-z0-9_-]+", kind):
        msg = f"kind must hold only letters, digits, '-' and '_', got {kind!r}"
        raise ValueError(msg)
    return f"{_fit_token(fit)}__{kind}.png"


# ----------------------------------------------------------------- fits


def _fits(tables: Mapping[str, pl.DataFrame], summary: Mapping[str, Any]) -> list[tuple[FitName, dict[str, Any] | None]]:
    """Fits in summary order, then fits found only in the tables (sorted)."""
    out: list[tuple[FitName, dict[str, Any] | None]] = []
    seen: set[FitName] = set()
    for entry in summary.get("fits") or []:
        name = (str(entry.get("item_set", "")), str(entry.get("universe", "")), str(entry.get("population", "")))
        if name not in seen:
            seen.add(name)
            out.append((name, dict(entry)))
    extra: set[FitName] = set()
    for frame in tables.values():
        if frame.height and all(c in frame.columns for c in FIT_COLUMNS):
            for row in frame.select(FIT_COLUMNS).unique().iter_rows():
                name = (str(row[0]), str(row[1]), str(row[2]))
                if name not in seen:
                    extra.add(name)
    out.extend((name, None) for name in sorted(extra))
    return out


def _rows(tables: Mapping[str, pl.DataFrame], table: str, fit: FitName) -> pl.DataFrame:
    frame = tables.get(table)
    if frame is None or frame.height == 0 or not all(c in frame.columns for c in FIT_COLUMNS):
        return pl.DataFrame()
    return frame.filter(
        (pl.col("item_set") == fit[0]) & (pl.col("universe") == fit[1]) & (pl.col("population") == fit[2])
    )


def _has_rows(tables: Mapping[str, pl.DataFrame], fit: FitName) -> bool:
    return any(_rows(tables, t, fit).height for t in tables)


def _fit_label(fit: FitName) -> str:
    return " / ".join(fit)


def _fit_token(fit: FitName) -> str:
    exact = json.dumps(list(fit), ensure_ascii=True).encode("ascii")
    digest = hashlib.sha256(exact).hexdigest()[:12]
    slug = "__".join(_slug(part) for part in fit)
    return f"{slug}__{digest}"


def _slug(text: str) -> str:
    slug = re.sub(r"[^a-z0-9_-]+", "-", text.lower()).strip("-_")
    return slug[:40].strip("-_") or "x"


# ----------------------------------------------------------------- HTML


def _e(value: Any) -> str:
    return html.escape(str(value), quote=True)


def _num(value: Any, *, inf: str = "\u221e") -> str:
    """A number to 3 significant digits (thousands and up: whole, with separators)."""
    if value is None:
        return "\u2014"
    x = float(value)
    if math.isnan(x):
        return "n/a"
    if math.isinf(x):
        return inf if x > 0 else f"-{inf}"
    if x == 0:
        return "0"
    if abs(x) >= 1000:
        return f"{x:,.0f}"
    return f"{x:.3g}"


def _interval(low: Any, high: Any, *, inf: str = "\u221e") -> str:
    if low is None and high is None:
        return "\u2014"
    return f"{_num(low, inf=inf)} \u2013 {_num(high, inf=inf)}"


def _table(header: Sequence[str] | None, rows: Sequence[Sequence[str]], *, numeric: Sequence[bool] = (), row_classes: Sequence[str] = ()) -> str:
    """An HTML table from already escaped cells."""
    head = "<thead><tr>" + "".join(f"<th>{h}</th>" for h in header) + "</tr></thead>" if header else ""
    body = []
    for k, row in enumerate(rows):
        cls = f' class="{row_classes[k]}"' if k < len(row_classes) and row_classes[k] else ""
        cells = "".join(
            f'<td class="n">{c}</td>' if (j < len(numeric) and numeric[j]) else f"<td>{c}</td>"
            for j, c in enumerate(row)
        )
        body.append(f"<tr{cls}>{cells}</tr>")
    return f"<table>{head}<tbody>{''.join(body)}</tbody></table>"


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
        f"<li><strong>{_e(_fit_label((str(f.get('item_set', '')), str(f.get('universe', '')), str(f.get('population', '')))))}"
        f"</strong>: <code>{_e(f.get('error') or 'no error message')}</code></li>"
        for f in failed
    )
    return (
        f'<section id="failed" class="failed"><h2>Failed fits ({len(failed)})</h2>'
        f"<p>These fits produced no tables; their error is shown as recorded.</p><ul>{items}</ul></section>"
    )


def _fit_index(fits: Sequence[tuple[FitName, dict[str, Any] | None]], tables: Mapping[str, pl.DataFrame]) -> str:
    if not fits:
        return '<p class="note">This run has no fits.</p>'
    rows = []
    for name, entry in fits:
        e = entry or {}
        status = str(e.get("status", "unknown"))
        shown = status != "failed" or _has_rows(tables, name)
        link = f'<a href="#fit-{_e(_fit_token(name))}">{_e(_fit_label(name))}</a>' if shown else _e(_fit_label(name))
        rows.append(
            [
                link,
                f'<span class="status-{_e(status)}">{_e(status)}</span>',
                _e(e.get("design", "")),
                _e(_sizes(e)),
                _e(_num(e.get("erho2"))),
                _e(_num(e.get("ceiling"))),
                _e(_num(e.get("mdd95"))),
            ]
        )
    header = ["fit (item set / universe / population)", "status", "design",
              "systems \u00d7 items \u00d7 judges", "E\u03c1\u00b2", "ceiling", "MDD95"]
    return '<section id="fits"><h2>Fits</h2>' + _table(header, rows, numeric=[False] * 4 + [True] * 3) + "</section>"


def _sizes(entry: Mapping[str, Any]) -> str:
    sizes = [entry.get(k) for k in ("systems", "items", "judges")]
    return " \u00d7 ".join(str(v) for v in sizes) if all(v is not None for v in sizes) else ""


def _fit_section(
    tables: Mapping[str, pl.DataFrame],
    fit: FitName,
    entry: dict[str, Any] | None,
    figures: dict[str, bytes],
    drawn: Mapping[str, bytes],
) -> str:
    e = entry or {}
    parts = [f'<section id="fit-{_e(_fit_token(fit))}">', f"<h2>{_e(_fit_label(fit))}</h2>"]
    facts = [
        f"item set <strong>{_e(fit[0])}</strong>",
        f"universe <strong>{_e(fit[1])}</strong>",
        f"population <strong>{_e(fit[2])}</strong>",
    ]
    if e.get("design"):
        facts.append(f"design <code>{_e(e['design'])}</code>")
    if _sizes(e):
        facts.append(f"{_e(e['systems'])} systems \u00d7 {_e(e['items'])} items \u00d7 {_e(e['judges'])} judges")
    status = str(e.get("status", "not in summary"))
    facts.append(f'status <span class="status-{_e(status)}">{_e(status)}</span>')
    if e.get("seconds") is not None:
        facts.append(f"{_e(_num(e['seconds']))} s")
    parts.append(f"<p>{'; '.join(facts)}.</p>")
    parts.append(_leaderboard_html(_rows(tables, "leaderboard", fit), e))
    parts.append(_components_html(_rows(tables, "components", fit)))
    parts.append(_dstudy_html(_rows(tables, "dstudy", fit)))
    title = _fit_label(fit)
    # Each figure as a function, so that one already drawn (``drawn``) is not drawn again.
    planned = [
        ("erho2", lambda: _figure_erho2_curve(_rows(tables, "erho2_curve", fit), _rows(tables, "ceilings", fit), title),
         "E\u03c1\u00b2 against the number of items, one curve per judge count; dashed: the ceiling "
         "(unlimited items) at that judge count; grey: the conventional 0.8 (after [Anand2026] figure 1)."),
        ("nomogram", lambda: _figure_nomogram(_rows(tables, "nomogram", fit), title),
         "Sizing nomogram: E\u03c1\u00b2 over judges \u00d7 items with the 0.7, 0.8 and 0.9 contours "
         "(after [Anand2026] figure 4)."),
        ("budget", lambda: _figure_budget(_rows(tables, "budget", fit), title),
         "MDD95 against how a budget of judge calls per system is split between judges and items; "
         "\u2605 the optimum (after [Anand2026] appendix figure 2)."),
    ]
    parts.extend(_embed(fit, kind, draw, caption, figures, drawn) for kind, draw, caption in planned)
    strategies = _rows(tables, "cyclic_strategies", fit)
    offsets = _rows(tables, "judge_offsets", fit)
    cyclic_systems = _rows(tables, "cyclic_systems", fit)
    if strategies.height or offsets.height or cyclic_systems.height:
        parts.append("<h3>CyclicJudge</h3>")
        parts.append(_cyclic_systems_html(cyclic_systems))
        parts.append(_embed(
            fit, "strategies", lambda: _figure_strategies(strategies, title),
            "Variance of the benchmark score against the per-scenario budget for three judge "
            "allocations, mean over systems (after [Zhu2026] figure 1).",
            figures, drawn,
        ))
        parts.append(_embed(
            fit, "judge-offsets", lambda: _figure_judge_offsets(offsets, title),
            "Judge bias per system: judge mean minus panel mean (after [Zhu2026] figure 2).",
            figures, drawn,
        ))
    parts.append("</section>")
    return "\n".join(parts)


def _embed(
    fit: FitName,
    kind: str,
    draw: Callable[[], Figure | None],
    caption: str,
    figures: dict[str, bytes],
    drawn: Mapping[str, bytes],
) -> str:
    """Record a figure's PNG under its file name and return its ``<figure>`` element.

    The PNG is taken from ``drawn`` when it is there, else drawn now; no
    figure (no data for it) gives no element.
    """
    name = figure_file_name(fit, kind)
    png = drawn.get(name)
    if png is None:
        fig = draw()
        if fig is None:
            return ""
        png = _png(fig)
    figures[name] = png
    data = base64.b64encode(png).decode("ascii")
    return (
        f'<figure><img src="data:image/png;base64,{data}" alt="{_e(kind)}: {_e(_fit_label(fit))}">'
        f"<figcaption>{_e(caption)} File <code>{_e(name)}</code>.</figcaption></figure>"
    )


def _leaderboard_html(rows: pl.DataFrame, entry: Mapping[str, Any]) -> str:
    parts = ["<h3>Leaderboard</h3>"]
    if rows.height == 0:
        parts.append('<p class="note">No leaderboard rows.</p>')
        return "\n".join(parts)
    rows = rows.sort("rank")
    mdd = rows["mdd95"][0] if "mdd95" in rows.columns else entry.get("mdd95")
    groups = rows["tie_group"].to_list()
    n_groups = len(set(groups))
    parts.append(
        f"<p>{rows.height} systems in {n_groups} tie group{'s' if n_groups != 1 else ''}. "
        f"Systems in one group differ by less than the MDD ({_e(_num(mdd))} points) "
        "and should not be ranked against each other.</p>"
    )
    cells, classes, previous = [], [], None
    for rank, system, mean, group in rows.select("rank", "system_id", "mean", "tie_group").iter_rows():
        shade = "tie-a" if group % 2 == 1 else "tie-b"
        classes.append(f"{shade} group-start" if previous is not None and group != previous else shade)
        previous = group
        cells.append([_e(rank), _e(system), _e(_num(mean)), _e(group)])
    parts.append(_table(["rank", "system", "mean", "tie group"], cells, numeric=[True, False, True, True], row_classes=classes))
    return "\n".join(parts)


def _components_html(rows: pl.DataFrame) -> str:
    parts = ["<h3>Variance components</h3>"]
    if rows.height == 0:
        parts.append('<p class="note">No variance components.</p>')
        return "\n".join(parts)
    cells = [
        [f"<code>{_e(r['component'])}</code>", _e(_num(r.get("estimate"))),
         _e(_num(None if r.get("share") is None else 100 * r["share"])) + " %",
         _e(_interval(r.get("low"), r.get("high")))]
        for r in rows.iter_rows(named=True)
    ]
    parts.append(_table(["component", "estimate", "share", "95 % interval"], cells, numeric=[False, True, True, True]))
    parts.append('<p class="note">Shares truncate negative estimates at zero; the D-study uses the raw values.</p>')
    return "\n".join(parts)


def _dstudy_html(rows: pl.DataFrame) -> str:
    parts = ["<h3>D-study</h3>"]
    if rows.height == 0:
        parts.append('<p class="note">No D-study quantities.</p>')
        return "\n".join(parts)
    cells = [
        [_e(DSTUDY_LABELS.get(r["quantity"], r["quantity"])), f"<code>{_e(r['quantity'])}</code>",
         _e(_num(r.get("estimate"), inf="never")), _e(_interval(r.get("low"), r.get("high"), inf="never"))]
        for r in rows.iter_rows(named=True)
    ]
    parts.append(_table(["quantity", "name", "estimate", "95 % interval"], cells, numeric=[False, False, True, True]))
    return "\n".join(parts)


def _cyclic_systems_html(rows: pl.DataFrame) -> str:
    if rows.height == 0:
        return ""
    columns = ["sigma2_scenario", "sigma2_generation", "sigma2_judge", "sigma2_residual", "f_statistic", "p_value"]
    present = [c for c in columns if c in rows.columns]
    cells = [[_e(r["system_id"]), *(_e(_num(r[c])) for c in present)] for r in rows.sort("system_id").iter_rows(named=True)]
    header = ["system", *(f"<code>{_e(c)}</code>" for c in present)]
    return _table(header, cells, numeric=[False] + [True] * len(present))


# ----------------------------------------------------------------- figures


def _mpl(text: Any) -> str:
    """A data string made literal for matplotlib: shortened, ``$`` escaped (no mathtext)."""
    s = str(text)
    if len(s) > FIGURE_TEXT_MAX:
        s = s[: FIGURE_TEXT_MAX - 1] + "\u2026"
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


def _figure_erho2_curve(curve: pl.DataFrame, ceilings: pl.DataFrame, title: str) -> Figure | None:
    """E rho^2 against items, one line per judge count ([Anand2026] figure 1)."""
    if curve.height == 0:
        return None

    def build() -> Figure:
        fig = _new_figure(6.4, 4.0)
        ax = fig.add_subplot()
        ceiling_of = (
            {int(j): float(c) for j, c in ceilings.select("judges", "ceiling").iter_rows() if c is not None}
            if ceilings.height
            else {}
        )
        values = []
        for k, (judges,) in enumerate(curve.select("judges").unique().sort("judges").iter_rows()):
            line = curve.filter(pl.col("judges") == judges).sort("items")
            colour = matplotlib.colormaps["tab10"](k % 10)
            y = line["erho2"].cast(pl.Float64).to_numpy()
            values.append(y)
            ax.plot(line["items"].to_numpy(), y, color=colour, label=f"{judges} judge{'s' if judges != 1 else ''}")
            ceiling = ceiling_of.get(int(judges))
            if ceiling is not None and math.isfinite(ceiling):
                ax.axhline(ceiling, color=colour, linestyle="--", linewidth=1)
                values.append(np.array([ceiling]))
        ax.axhline(CONVENTIONAL_THRESHOLD, color="0.4", linewidth=1)
        ax.set_xscale("log")
        items = curve["items"].to_numpy()
        ticks = [v for v in ROUND_TICKS if items.min() <= v <= items.max()]
        if len(ticks) >= 2:
            ax.set_xticks(ticks, [str(v) for v in ticks])
            ax.minorticks_off()
        data = np.concatenate(values)
        data = data[np.isfinite(data)]
        ax.set_ylim(min(0.0, float(data.min())) if data.size else 0.0, max(1.0, float(data.max())) if data.size else 1.0)
        ax.set_xlabel("items")
        ax.set_ylabel("E\u03c1\u00b2")
        ax.set_title(_mpl(title))
        ax.legend(loc="lower right", fontsize=8)
        ax.grid(True, which="major", alpha=0.3)
        return fig

    return _draw(build)


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


def _figure_nomogram(grid: pl.DataFrame, title: str) -> Figure | None:
    """Filled contours of E rho^2 over judges x items, 0.7/0.8/0.9 labelled ([Anand2026] figure 4)."""
    if grid.height == 0:
        return None
    judge_list, item_list, z = _matrix(grid, "judges", "items", "erho2")
    judges, items = np.array(judge_list), np.array(item_list)

    def build() -> Figure:
        fig = _new_figure(6.4, 4.2)
        ax = fig.add_subplot()
        finite = z[np.isfinite(z)]
        low = min(0.0, float(finite.min())) if finite.size else 0.0
        high = max(1.0, float(finite.max())) if finite.size else 1.0
        masked = np.ma.masked_invalid(z)
        if len(judges) >= 2 and len(items) >= 2 and finite.size:
            filled = ax.contourf(items, judges, masked, levels=np.linspace(low, high, 21), cmap="viridis")
            ax.set_xscale("log")
            ax.set_yscale("log")
            ax.set_xticks(items, [str(v) for v in items])
            ax.set_yticks(judges, [str(v) for v in judges])
            ax.minorticks_off()
            levels = [v for v in NOMOGRAM_CONTOURS if finite.min() <= v <= finite.max()]
            if levels:
                lines = ax.contour(items, judges, masked, levels=levels, colors="white", linewidths=1.2)
                ax.clabel(lines, fmt="%.1f", fontsize=8)
        else:
            filled = ax.imshow(masked, origin="lower", aspect="auto", cmap="viridis", vmin=low, vmax=high)
            ax.set_xticks(range(len(items)), [str(v) for v in items])
            ax.set_yticks(range(len(judges)), [str(v) for v in judges])
        fig.colorbar(filled, ax=ax, label="E\u03c1\u00b2")
        ax.set_xlabel("items")
        ax.set_ylabel("judges")
        ax.set_title(_mpl(title))
        return fig

    return _draw(build)


def _figure_budget(budget: pl.DataFrame, title: str) -> Figure | None:
    """MDD95 against judges per item for each call budget, optimum marked ([Anand2026] appendix figure 2)."""
    if budget.height == 0:
        return None

    def build() -> Figure:
        fig = _new_figure(6.4, 4.0)
        ax = fig.add_subplot()
        for k, (calls,) in enumerate(budget.select("budget").unique().sort("budget").iter_rows()):
            split = budget.filter(pl.col("budget") == calls).sort("judges")
            colour = matplotlib.colormaps["tab10"](k % 10)
            ax.plot(split["judges"].to_numpy(), split["mdd95"].cast(pl.Float64).to_numpy(), "o-",
                    color=colour, markersize=4, label=f"{calls} calls per system")
            best = split.filter(pl.col("optimal"))
            if best.height:
                ax.plot(best["judges"].to_numpy(), best["mdd95"].cast(pl.Float64).to_numpy(), "*",
                        color=colour, markersize=14, markeredgecolor="black")
                for j, n, m in best.select("judges", "items", "mdd95").iter_rows():
                    ax.annotate(f"{j} \u00d7 {n}", (j, m), textcoords="offset points", xytext=(6, -10), fontsize=7)
        ax.set_xlabel("judges per item (items = budget / judges)")
        ax.set_ylabel("MDD95 (score points)")
        ax.set_title(_mpl(title))
        ax.legend(fontsize=8)
        ax.grid(True, alpha=0.3)
        return fig

    return _draw(build)


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
