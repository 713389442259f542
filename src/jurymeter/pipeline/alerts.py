"""Alerts on what is wrong now, and the gates a CI holds a run to (issue 24, points 2 and 3).

Both read a run's published tables and ``summary.json`` only (``docs/results.md``):
a pairwise judge's reversal rate and slot-A advantage with their intervals
(``pairwise_judges``), a fit's D-study quantities (``dstudy``: ``ceiling``,
``mdd95``, ``erho2``), a judge's share of failed judgments (``summary.json``
``judges``). An alert says what to do; a gate says the value and the limit.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any

import polars as pl

from jurymeter.analyses.headlines import names_label

if TYPE_CHECKING:
    from jurymeter.pipeline.config import AlertConfig, GateConfig

# What a coin gives: a judge deciding each order independently at random reverses half its pairs
# (and no judge whose verdicts follow content alone reverses more: [Awuni2026] section 8).
COIN_REVERSAL = 0.5


def _fit(row: Mapping[str, Any], protocol: str) -> str:
    return names_label((str(row["item_set"]), str(row["universe"]), str(row["population"])), protocol)


def _pct(value: float) -> str:
    return f"{100 * value:.0f}%"


def judge_alerts(judges: pl.DataFrame, alerts: AlertConfig) -> list[str]:
    """Pairwise judges (``pairwise_judges`` rows) reversing more than a coin, or biased past the margin.

    A judge alerted the same way in several fits (its universes share its judgments) is one line: its
    first fit's numbers and how many other fits say the same.
    """
    found: dict[tuple[str, str], list[tuple[str, str]]] = {}  # (judge, kind) -> (fit, what it says)
    for row in judges.iter_rows(named=True):
        fit, judge = _fit(row, "pairwise"), str(row["judge_id"])
        low, high = row.get("reversal_low"), row.get("reversal_high")
        if low is not None and row.get("reversal_rate") is not None and low > COIN_REVERSAL:
            found.setdefault((judge, "reversal"), []).append((fit, (
                f"reverses {_pct(row['reversal_rate'])} [{_pct(low)}, {_pct(high or low)}] of verdicts when the "
                "order flips (a coin reverses 50%): randomize or counterbalance the order, or drop the judge")))
        a_low, a_high, adv = row.get("slot_a_low"), row.get("slot_a_high"), row.get("slot_a_advantage")
        if adv is None or a_low is None or a_high is None:
            continue
        if a_low > alerts.position_margin or a_high < -alerts.position_margin:
            slot = "first" if adv > 0 else "second"
            found.setdefault((judge, "slot"), []).append((fit, (
                f"favours the {slot} slot by {adv:+.1f} points [{a_low:+.1f}, {a_high:+.1f}] (more than the "
                f"{alerts.position_margin:g}-point margin): counterbalance the order (show every pair both ways) "
                "or drop the judge")))
    out = []
    for (judge, _), said in found.items():
        (fit, what), others = said[0], len(said) - 1
        also = f" (also in {others} other fit{'' if others == 1 else 's'})" if others else ""
        out.append(f"judge {judge} on {fit}{also} {what}")
    return out


def _dstudy(tables: Mapping[str, pl.DataFrame], quantity: str) -> list[tuple[str, float | None, str | None]]:
    """Per fit of the ``dstudy`` table: its label, the quantity's estimate and the reason for a null."""
    frame = tables.get("dstudy")
    if frame is None or frame.height == 0:
        return []
    rows = frame.filter(pl.col("quantity") == quantity).sort("item_set", "universe", "population")
    return [(_fit(r, "pointwise"), r["estimate"], r.get("reason")) for r in rows.iter_rows(named=True)]


def fit_alerts(tables: Mapping[str, pl.DataFrame], alerts: AlertConfig, target: float) -> list[str]:
    """Fits whose single-judge ceiling is below the target, or whose MDD95 is above ``max_mdd``."""
    out = []
    for fit, ceiling, _ in _dstudy(tables, "ceiling"):
        if ceiling is not None and ceiling < target:
            out.append(f"fit {fit}: one judge's ceiling {ceiling:.2f} is below the target {target:g}: more items "
                       "cannot reach it with one judge; average several judges")
    if alerts.max_mdd is not None:
        for fit, mdd, _ in _dstudy(tables, "mdd95"):
            if mdd is not None and mdd > alerts.max_mdd:
                out.append(f"fit {fit}: MDD95 {mdd:.2f} points is above the maximum {alerts.max_mdd:g}: add items "
                           "or judges (the G-study's budget table says which)")
    return out


def now_alerts(tables: Mapping[str, pl.DataFrame], alerts: AlertConfig, target: float) -> list[str]:
    """Every alert on a run's numbers as they are (judges first, then fits); the failed-share alert is
    :func:`jurymeter.analyses.headlines.run_alerts`'s (its threshold ``alerts.failed_share``)."""
    judges = tables.get("pairwise_judges")
    found = judge_alerts(judges.sort("item_set", "universe", "population", "judge_id"), alerts) \
        if judges is not None and judges.height else []
    return found + fit_alerts(tables, alerts, target)


@dataclass(frozen=True, slots=True)
class GateFailure:
    """One gate a run failed: which gate, what (fit or judge), its value (``None``: not estimable) and the limit."""

    gate: str
    subject: str
    value: float | None
    limit: float
    reason: str | None = None

    def line(self) -> str:
        shown = "not estimable" + (f" ({self.reason})" if self.reason else "") if self.value is None \
            else f"{self.value:.4g}"
        bound = "at least" if self.gate.startswith("min_") else "at most"
        return f"gate {self.gate} failed: {self.subject}: {shown}, limit {bound} {self.limit:g}"


def check_gates(tables: Mapping[str, pl.DataFrame], summary: Mapping[str, Any],
                gates: GateConfig) -> dict[str, Any]:
    """Hold a run to ``gates`` (each limit ``None`` is not checked).

    Returns
    -------
    dict
        JSON-ready: ``run_id``, ``passed`` (bool), ``gates``: one entry per limit set
        (``gate``, ``limit``, ``checked``: how many fits or judges it held,
        ``failures``: list of ``{subject, value, limit, reason}``).
    """
    results = []
    for gate, limit in asdict(gates).items():
        if limit is None:
            continue
        checked, failures = _gate(gate, float(limit), tables, summary)
        results.append({"gate": gate, "limit": float(limit), "checked": checked,
                        "failures": [asdict(f) for f in failures]})
    return {"run_id": summary.get("run_id"), "passed": all(not r["failures"] for r in results), "gates": results}


def _gate(gate: str, limit: float, tables: Mapping[str, pl.DataFrame],
          summary: Mapping[str, Any]) -> tuple[int, list[GateFailure]]:
    """How many subjects ``gate`` held, and those that failed it (a null value fails: nothing shows it passes)."""
    if gate in ("max_mdd", "min_erho2"):
        rows = _dstudy(tables, "mdd95" if gate == "max_mdd" else "erho2")
        fails = [GateFailure(gate, f"fit {fit}", v, limit, why) for fit, v, why in rows
                 if v is None or (v > limit if gate == "max_mdd" else v < limit)]
        return len(rows), fails
    if gate == "max_reversal":
        frame = tables.get("pairwise_judges")
        if frame is None or frame.height == 0:
            return 0, []
        judged = frame.filter(pl.col("reversal_rate").is_not_null()).sort("item_set", "universe", "population",
                                                                          "judge_id")
        return judged.height, [
            GateFailure(gate, f"judge {r['judge_id']} on {_fit(r, 'pairwise')}", r["reversal_rate"], limit)
            for r in judged.iter_rows(named=True) if r["reversal_rate"] > limit]
    judges = [j for j in summary.get("judges") or [] if j.get("failed_share") is not None]
    return len(judges), [GateFailure(gate, f"judge {j.get('judge_id')}", float(j["failed_share"]), limit)
                         for j in judges if float(j["failed_share"]) > limit]


def failure_lines(result: Mapping[str, Any]) -> list[str]:
    """One line per failed gate of a :func:`check_gates` result."""
    return [GateFailure(r["gate"], **{k: v for k, v in f.items() if k != "gate"}).line()
            for r in result["gates"] for f in r["failures"]]
