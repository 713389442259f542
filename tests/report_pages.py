"""Reading a published report as a reader of the whole of it sees it: the index, then every fit's page."""

from __future__ import annotations

from pathlib import Path


def report_text(report: Path) -> str:
    """``report/index.html`` followed by each ``report/fits/*.html`` (sorted)."""
    pages = [report / "index.html", *sorted((report / "fits").glob("*.html"))]
    return "\n".join(page.read_text() for page in pages)
