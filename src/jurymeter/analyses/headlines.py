"""A run's headlines: one sentence per fit and the alerts that come first (issue 16, points 1 and 5).

Built from ``summary.json`` alone (each fit's entry holds every analysis's
headline numbers, the same numbers as the fit's JSON), so the index page, the
end of ``jurymeter run`` and ``jurymeter report latest --summary`` say the
same thing, and an old run's summary can be said again without its tables.
Each fit's sentence is the clauses of the registered analyses that ran on it
(:meth:`jurymeter.analyses.base.SummaryPart.sentence`), in registry order; no
analysis is named here.

Alerts, in this order: landing files the run could not read (nothing of
them was ingested; ``sources_unreadable``, each with its reason); fits that failed; judges whose change since the last
run is larger than the intervals allow (given by the run history,
``extra_alerts``, followed there by the alerts on what is wrong now:
:mod:`jurymeter.pipeline.alerts`); judges with a large share of failed judgments; what a fit
left out (``dropped_*`` headlines).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from jurymeter.analyses import registered
from jurymeter.analyses.base import HeadlineContext, dropped_line

# A judge whose judgments failed this often is an alert even on a first run: every
# analysis of its item sets sees that much less of it (a choice; the issue names none).
FAILED_SHARE_ALERT = 0.05


def names_label(names: tuple[str, str, str], protocol: str) -> str:
    """``item set / universe / population``, a pairwise item set marked (a name may be both); pointwise,
    the common case, keeps the plain label. The one label of a fit: the pages, the alerts, the terminal."""
    item_set = f"{names[0]} (pairwise)" if protocol == "pairwise" else names[0]
    return " / ".join([item_set, names[1], names[2]])


def fit_label(entry: Mapping[str, Any]) -> str:
    """:func:`names_label` of a ``summary.json`` fit entry."""
    names = (str(entry.get("item_set", "")), str(entry.get("universe", "")), str(entry.get("population", "")))
    return names_label(names, str(entry.get("protocol") or ""))


def fit_sentence(entry: Mapping[str, Any], context: HeadlineContext) -> str:
    """One fit's headline: its analyses' clauses joined by "; ", or why there is none."""
    if entry.get("status") == "failed":  # its error is an alert, said once
        kind = str(entry.get("error") or "").split(":", 1)[0] or "no error message"
        return f"failed ({kind}): the error is in the alerts"
    parts = entry.get("analyses") or {}
    clauses, skipped = [], []
    for analysis in registered():
        part = parts.get(analysis.name)
        if part is None:
            continue
        if part.get("status") == "skipped":
            # Its reason's first clause: why the number is missing, said where the number would be.
            skipped.append(f"{analysis.title}: {str(part.get('reason') or 'not fitted').split(';', 1)[0]}")
            continue
        clause = analysis.sentence(part, context)
        if clause:
            clauses.append(clause)
    if clauses:
        return "; ".join(clauses)
    return ("nothing could be estimated: " + "; ".join(skipped[:1])) if skipped else "no headline numbers"


def run_alerts(summary: Mapping[str, Any], extra_alerts: Sequence[str] = (),
               failed_share: float = FAILED_SHARE_ALERT) -> list[str]:
    """The alerts of a run, most urgent first (see the module docstring); ``failed_share`` is
    ``[alerts] failed_share``, the share of failed judgments at or above which a judge is an alert."""
    alerts = [f"source not ingested: {u.get('source')}: {u.get('reason')}"
              for u in summary.get("sources_unreadable") or []]
    for entry in summary.get("fits") or []:
        if entry.get("status") == "failed":
            error = str(entry.get("error") or "no error message").splitlines()[0]
            alerts.append(f"fit failed: {fit_label(entry)}: {error}")
    alerts.extend(extra_alerts)
    for judge in summary.get("judges") or []:
        share = judge.get("failed_share")
        if share is not None and share >= failed_share:
            total = int(judge.get("stored", 0)) + int(judge.get("failed", 0))
            alerts.append(f"judge {judge.get('judge_id')}: {100 * share:.1f}% of its judgments failed "
                          f"({int(judge.get('failed', 0)):,} of {total:,}): find why its calls fail "
                          "(the ingest report's quarantine) before trusting its fits")
    for entry in summary.get("fits") or []:
        for analysis in registered():
            line = dropped_line(analysis.headline, (entry.get("analyses") or {}).get(analysis.name) or {})
            if line:
                alerts.append(f"{fit_label(entry)} ({analysis.title}) dropped: {line}")
    return alerts


def run_headlines(summary: Mapping[str, Any], extra_alerts: Sequence[str] = (),
                  failed_share: float = FAILED_SHARE_ALERT) -> dict[str, Any]:
    """The run's headlines, JSON-ready (``summary.json`` ``headlines``).

    Returns
    -------
    dict
        ``alerts``: list of str; ``fits``: one dict per fit in summary order
        (``item_set``, ``universe``, ``population``, ``protocol``, ``status``,
        ``label``, ``sentence``).
    """
    scale = summary.get("scale")
    context = HeadlineContext(scale=(float(scale[0]), float(scale[1])) if scale else None)
    fits = [
        {
            "item_set": entry.get("item_set"), "universe": entry.get("universe"),
            "population": entry.get("population"), "protocol": entry.get("protocol") or "",
            "status": entry.get("status"), "label": fit_label(entry), "sentence": fit_sentence(entry, context),
        }
        for entry in summary.get("fits") or []
    ]
    return {"alerts": run_alerts(summary, extra_alerts, failed_share), "fits": fits}
