"""HTML building blocks of the report: escaping, numbers, tables, safe file names, one fit's section.

Every string that comes from data (ids, names, error messages, run ids) is
HTML-escaped with ``html.escape(..., quote=True)`` wherever it lands. Figure
file names are a sanitized slug of the fit's names plus a hash of the exact
names, so they never hold a path separator or ``..`` and names that differ
only in case or punctuation do not collide.
"""

from __future__ import annotations

import base64
import hashlib
import html
import json
import math
import re
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
import polars as pl

from jurymeter.errors import ReportError
from jurymeter.render.text import GLOSSARY

if TYPE_CHECKING:
    from matplotlib.figure import Figure

FitName = tuple[str, str, str]
# A fit on the page: its names and its protocol ("" where a summary does not say).
PageFit = tuple[FitName, str]
FIT_COLUMNS = ("item_set", "universe", "population")

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
p.lead{font-size:1rem;margin:.3rem 0 .6rem}caption{caption-side:top;text-align:left;font-size:.85rem;color:#555;padding:.2rem 0}p.nav{font-size:.9rem}p.csv{margin:-.3rem 0 .8rem;font-size:.8rem}
#alerts ul{margin:.3rem 0;padding-left:1.2rem}
p.glossary dfn{font-style:normal;font-weight:600}
"""

def glossary_html(body: str) -> str:
    """One line explaining each symbol of :data:`GLOSSARY` that ``body`` uses; ``""`` when it uses none.

    The pages put it before their first section, so each symbol is explained
    before (or at) its first use on the page.
    """
    used = [(term, meaning) for term, marks, meaning in GLOSSARY if any(m in body for m in marks)]
    if not used:
        return ""
    said = "; ".join(f"<dfn>{_e(term)}</dfn>: {_e(meaning)}" for term, meaning in used)
    return f'<p class="note glossary" id="glossary"><strong>Symbols on this page.</strong> {said}.</p>'


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
    ReportError
        ``kind`` holds a character other than letters, digits, ``-``, ``_``.

    Examples
    --------
    >>> figure_file_name(("mt-bench", "all", "all"), "erho2")
    'mt-bench__all__all__0a036048bb70__erho2.png'
    """
    if not re.fullmatch(r"[A-Za-z0-9_-]+", kind):
        msg = f"kind must hold only letters, digits, '-' and '_', got {kind!r}"
        raise ReportError(msg)
    return f"{_fit_token(fit)}__{kind}.png"


class FitTables(dict[str, pl.DataFrame]):
    """Run tables whose rows :func:`_rows` splits by fit once per table, on first use.

    A report of many fits asks every table for every fit's rows; filtering the
    whole table each time costs fits x rows (``bench/report.py``). The rows of
    a fit are the same as the filter's, in the same order. What is kept is
    each fit's row numbers, and a fit's rows are gathered when asked for: a
    copy of every table split into a frame per fit held the run's tables twice
    over, at about 30 KB a frame (19 tables a fit), while the pages were written.
    """

    def __init__(self, tables: Mapping[str, pl.DataFrame]) -> None:
        super().__init__(tables)
        self._rows_of: dict[str, dict[tuple[Any, ...], np.ndarray]] = {}

    def fit_rows(self, table: str, fit: FitName) -> pl.DataFrame | None:
        """The fit's rows of ``table``; ``None`` when its fit columns are not all strings."""
        frame = self[table]
        if table not in self._rows_of:
            if not all(frame.schema[c] == pl.String for c in FIT_COLUMNS):
                return None
            groups = frame.select(FIT_COLUMNS).with_row_index("_row").group_by(list(FIT_COLUMNS), maintain_order=True)
            self._rows_of[table] = {
                tuple(key): np.asarray(rows, dtype=np.int64)
                for *key, rows in groups.agg(pl.col("_row")).iter_rows()
            }
        rows = self._rows_of[table].get(tuple(fit))
        return frame.clear() if rows is None else frame[rows]


def _rows(tables: Mapping[str, pl.DataFrame], table: str, fit: FitName) -> pl.DataFrame:
    frame = tables.get(table)
    if frame is None or frame.height == 0 or not all(c in frame.columns for c in FIT_COLUMNS):
        return pl.DataFrame()
    if isinstance(tables, FitTables):
        rows = tables.fit_rows(table, fit)
        if rows is not None:
            return rows
    return frame.filter(
        (pl.col("item_set") == fit[0]) & (pl.col("universe") == fit[1]) & (pl.col("population") == fit[2])
    )


def _has_rows(tables: Mapping[str, pl.DataFrame], fit: FitName) -> bool:
    return any(_rows(tables, t, fit).height for t in tables)


def _fit_label(fit: FitName) -> str:
    return " / ".join(fit)


def _fit_token(fit: tuple[str, ...]) -> str:
    exact = json.dumps(list(fit), ensure_ascii=True).encode("ascii")
    digest = hashlib.sha256(exact).hexdigest()[:12]
    slug = "__".join(_slug(part) for part in fit)
    return f"{slug}__{digest}"


def _slug(text: str) -> str:
    slug = re.sub(r"[^a-z0-9_-]+", "-", text.lower()).strip("-_")
    return slug[:40].strip("-_") or "x"


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


P_VALUE_FLOOR = 1e-4  # p-values below it print as "< 1e-4"


def p_value_text(p: Any) -> str:
    """A p-value as the page prints it: below 1e-4 ``"< 1e-4"``, else 2 significant digits.

    Parameters
    ----------
    p : float or None
        The p-value; ``None`` (not estimated) prints as the em dash, NaN as ``"n/a"``,
        like :func:`_num`.

    Returns
    -------
    str
        ``"< 1e-4"`` for ``p < 1e-4`` (a smaller value only says how far into the
        tail the asymptotic distribution was read, not a better-supported claim);
        else ``format(p, ".2g")``, which never uses e-notation at or above 1e-4.

    Examples
    --------
    >>> [p_value_text(p) for p in (6.66e-93, 1e-4, 0.000512, 0.0321, 0.5, None)]
    ['< 1e-4', '0.0001', '0.00051', '0.032', '0.5', '—']
    """
    if p is None:
        return "\u2014"
    x = float(p)
    if math.isnan(x):
        return "n/a"
    if x < P_VALUE_FLOOR:
        return "< 1e-4"
    return format(x, ".2g")


def _interval(low: Any, high: Any, *, inf: str = "\u221e") -> str:
    if low is None and high is None:
        return "\u2014"
    # No-break spaces: an interval wraps as a whole, never between its ends.
    return f"{_num(low, inf=inf)}\u00a0\u2013\u00a0{_num(high, inf=inf)}"


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


class SectionBuilder:
    """One fit's report section as an analysis writes it: headings, paragraphs, tables, figures.

    ``rows(table)`` gives the fit's rows of a run table; ``entry`` is the fit's
    summary entry and ``summary`` that analysis's own part of it. Figures are
    taken from ``drawn`` (already drawn with the fit, on a worker) or drawn
    now, and recorded in ``figures`` under their safe file names.
    """

    def __init__(
        self,
        tables: Mapping[str, pl.DataFrame],
        fit: FitName,
        entry: Mapping[str, Any] | None,
        figures: dict[str, bytes],
        drawn: Mapping[str, bytes],
        label: str | None = None,
    ) -> None:
        self.tables, self.fit, self.entry = tables, fit, dict(entry or {})
        self.label = label
        self.figures, self.drawn = figures, drawn
        self.parts: list[str] = []
        self.summary: dict[str, Any] = {}

    @property
    def title(self) -> str:
        return self.label or _fit_label(self.fit)

    def rows(self, table: str) -> pl.DataFrame:
        return _rows(self.tables, table, self.fit)

    def lead(self, text: str) -> None:
        """Open a section or subsection with its lead: one sentence on what its figure or table
        shows and what to do about it (plain text, escaped here)."""
        if text:
            self.parts.append(f'<p class="lead">{_e(text)}</p>')

    def add(self, html_text: str) -> None:
        """Append already escaped HTML."""
        if html_text:
            self.parts.append(html_text)

    def figure(self, kind: str, draw: Callable[[], Figure | None], caption: str) -> None:
        """Embed the figure ``kind`` (drawn by ``draw`` unless already drawn); no data, no element."""
        self.add(_embed(self.fit, kind, draw, caption, self.figures, self.drawn))

    def html(self) -> str:
        return "\n".join(self.parts)


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
        from jurymeter.render.figures import png_bytes

        png = png_bytes(fig)
    figures[name] = png
    data = base64.b64encode(png).decode("ascii")
    return (
        f'<figure><img src="data:image/png;base64,{data}" alt="{_e(kind)}: {_e(_fit_label(fit))}">'
        f"<figcaption>{_e(caption)} File <code>{_e(name)}</code>.</figcaption></figure>"
    )


escape = _e
number = _num
interval_text = _interval
table_html = _table
fit_label = _fit_label
fit_token = _fit_token
