"""The G-study's tidy tables: their schemas and one fit's rows, from its typed report (``docs/results.md``)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import polars as pl

from jurymeter.analyses.base import Table, TablesPart
from jurymeter.analyses.gstudy.result import GStudyResult

# The D-study quantities of the ``dstudy`` table, in order.
DSTUDY_QUANTITIES = (
    "erho2", "phi", "mdd95", "erho2_30", "mdd95_30", "mdd95_unlimited_items",
    "ceiling", "ceiling_3_judges", "mdd95_in_sd_of_system_means",
    "judges_needed", "items_needed",
)
# ... and those of a declared universe (report key universe_dstudy), published as universe_<quantity>.
UNIVERSE_QUANTITIES = ("erho2", "phi", "mdd95")


def _number(value: Any) -> float | None:
    return None if value is None else float(value)


class GStudyTables(TablesPart[GStudyResult]):
    """The G-study's nine tables ([Anand2026] sections 3-5, figures 1 and 4, appendix figure 2)."""

    tables = (
        Table("components", {"component": pl.String, "estimate": pl.Float64, "share": pl.Float64,
                             "df": pl.Float64, "ms": pl.Float64, "low": pl.Float64, "high": pl.Float64},
              "variance components with bootstrap intervals"),
        Table("dstudy", {"quantity": pl.String, "estimate": pl.Float64, "low": pl.Float64, "high": pl.Float64,
                         "reason": pl.String},
              "D-study quantities with intervals (a null estimate's reason)"),
        Table("ceilings", {"judges": pl.Int64, "ceiling": pl.Float64}, "E rho^2 with unlimited items by judge count"),
        Table("erho2_curve", {"judges": pl.Int64, "items": pl.Int64, "erho2": pl.Float64}, "figure 1"),
        Table("nomogram", {"judges": pl.Int64, "items": pl.Int64, "erho2": pl.Float64}, "figure 4"),
        Table("budget", {"budget": pl.Int64, "judges": pl.Int64, "items": pl.Int64, "replicates": pl.Int64,
                         "mdd95": pl.Float64, "optimal": pl.Boolean}, "appendix figure 2"),
        Table("leaderboard", {"system_id": pl.String, "mean": pl.Float64, "rank": pl.Int64,
                              "rank_low": pl.Int64, "rank_high": pl.Int64,
                              "tie_group": pl.Int64, "mdd95": pl.Float64},
              "system means, rank ranges and tie groups"),
        Table("items", {"item_id": pl.String, "discrimination": pl.Float64, "screened": pl.Boolean},
              "item discrimination and screen"),
        Table("judge_effects", {"judge_id": pl.String, "offset": pl.Float64, "se": pl.Float64,
                                "low": pl.Float64, "high": pl.Float64},
              "per-judge offsets (points) with SE and 95 % interval"),
    )

    def tabulate(self, result: GStudyResult) -> dict[str, list[dict[str, Any]]]:
        report = result.report
        rows: dict[str, list[dict[str, Any]]] = {}
        rows["components"] = [
            {
                "component": name, "estimate": c["raw"], "share": c["share"], "df": c["df"],
                "ms": c["ms"], "low": c["interval"].get("low"), "high": c["interval"].get("high"),
            }
            for name, c in report["components"].items()
        ]
        reasons = report.get("null_reasons") or {}
        rows["dstudy"] = _dstudy(report, report["intervals"], reasons)
        universe = report.get("universe_dstudy")
        if universe:  # the declared universe's D-study (fixed facets, finite pools), as universe_<quantity>
            rows["dstudy"] += [
                {**row, "quantity": f"universe_{row['quantity']}"}
                for row in _dstudy(universe, universe["intervals"],
                                   {k.removeprefix("universe_dstudy."): v for k, v in reasons.items()
                                    if k.startswith("universe_dstudy.")},
                                   UNIVERSE_QUANTITIES)
            ]
        rows["ceilings"] = [{"judges": int(j), "ceiling": v} for j, v in report["ceiling_by_judges"].items()]
        rows["erho2_curve"] = [dict(row) for row in report["erho2_curve"]]
        nomo = report["nomogram"]
        rows["nomogram"] = [
            {"judges": j, "items": n, "erho2": nomo["erho2"][a][b]}
            for a, j in enumerate(nomo["judges"])
            for b, n in enumerate(nomo["items"])
        ]
        rows["budget"] = [dict(row) for row in report["budget_curve"]]
        rows["leaderboard"] = [dict(row) for row in report["leaderboard"]]
        items = report.get("items") or {}
        screened = set(items.get("screened_items", []))
        rows["items"] = [
            {"item_id": item, "discrimination": d, "screened": item in screened}
            for item, d in items.get("discrimination", {}).items()
        ]
        rows["judge_effects"] = [
            {"judge_id": row["judge_id"], "offset": row["offset"], "se": row["se"], "low": row["low"],
             "high": row["high"]}
            for row in report.get("judge_offsets") or []
        ]
        return rows


def _reason(reasons: Mapping[str, str], quantity: str) -> str | None:
    """Why ``quantity`` is null: its own reason, else its interval's (where the estimate was read)."""
    found = reasons.get(quantity) or reasons.get(f"intervals.{quantity}")
    return None if found is None else str(found)


def _dstudy(top: Mapping[str, Any], intervals: Mapping[str, Mapping[str, Any]],
            reasons: Mapping[str, str], quantities: tuple[str, ...] = DSTUDY_QUANTITIES) -> list[dict[str, Any]]:
    """The ``dstudy`` rows: each quantity's estimate (the report's own, else its interval's), bounds and null reason.

    ``top``: the report, read by the quantity's name (some quantities, such as
    ``ceiling_3_judges``, are only in ``intervals``).
    """
    rows = []
    for q in quantities:
        estimate = _number(top.get(q, intervals.get(q, {}).get("estimate")))
        rows.append({
            "quantity": q,
            "estimate": estimate,
            "low": _number(intervals.get(q, {}).get("low")),
            "high": _number(intervals.get(q, {}).get("high")),
            # a quantity only in ``intervals`` has its reason there (``intervals.<q>``)
            "reason": None if estimate is not None else _reason(reasons, q),
        })
    return rows
