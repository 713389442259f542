"""Reading a published report as a reader of the whole of it sees it: the index, then every fit's page."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from jurymeter.io.store import Store
    from jurymeter.pipeline.config import RunConfig


def report_text(report: Path) -> str:
    """``report/index.html`` followed by each ``report/fits/*.html`` (sorted)."""
    pages = [report / "index.html", *sorted((report / "fits").glob("*.html"))]
    return "\n".join(page.read_text() for page in pages)


def fit_publish_and_print(store: Store, config: RunConfig, run_id: str) -> tuple[dict[str, Any], str]:
    """Every planned fit of ``store`` under ``config`` fitted, published as ``run_id``, and the run's printout.

    Returns the summary and what ``jurymeter run`` prints for it (``print_run_summary``); fails when a
    fit did not fit, with its error.
    """
    from jurymeter.cli.run import print_run_summary
    from jurymeter.pipeline.cache import run_fits
    from jurymeter.pipeline.jobs import plan_fits
    from jurymeter.pipeline.publish import publish_run
    from jurymeter.render.text import out

    outcomes = run_fits(store, plan_fits(store, config).jobs, figures=False)
    assert all(o.status != "failed" for o in outcomes), [o.error for o in outcomes]  # fitted, or reused
    summary = publish_run(store, run_id, config=config, started="t", ingest_report=None,
                          outcomes=outcomes, timings={})
    with out.capture() as printed:
        print_run_summary(summary, ingest_printed=True)
    return summary, printed.get()
