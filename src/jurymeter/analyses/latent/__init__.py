"""The latent-scale G-study: binary and ordinal scores on the scale the judge uses (issue 26, point 3).

A 0/1 correctness or a 1-10 rating is not an interval-scale number: a judge that
moves a system from 9 to 10 on a 10-point scale is near its ceiling, and the
G-study of raw scores mixes that floor and ceiling into its components. This
analysis fits crossed random intercepts of systems, items, judges and their
two-way interactions on a logit or probit scale to the item set's cell counts
(:mod:`jurymeter.stats.latent`: the Laplace approximation lme4's ``glmer`` and
ordinal's ``clmm`` use), and reports the latent components, E rho^2 and the
MDD95 on the latent scale and back on the score scale (``docs/latent.md``).

It applies to pointwise item sets whose scores take at most
:data:`MAX_CATEGORIES` distinct values (the ordered categories); continuous
scores are not applicable (the summary says why).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypedDict

import polars as pl

from jurymeter.analyses.base import (
    Analysis,
    FitPart,
    FitScope,
    Headline,
    HeadlineContext,
    SectionPart,
    SummaryPart,
    Table,
    TablesPart,
    Tracked,
)
from jurymeter.errors import ConfigError, JurymeterError, NotApplicableError

if TYPE_CHECKING:
    import numpy as np

    from jurymeter.render.html import SectionBuilder
    from jurymeter.stats.blocks import FitChunks, GenerationMode

LINKS = ("logit", "probit")
# More distinct score values than this: a continuous scale, fitted by the G-study of raw scores instead.
# 21 holds a 1-10 rating on half points (FastChat's MT-Bench judge writes [[7.5]]): ordered categories,
# whole or not.
MAX_CATEGORIES = 21


@dataclass(frozen=True, slots=True)
class LatentOptions:
    """The analysis's own options (``[fit.latent]``; the ``latent`` command's flags)."""

    link: str = "logit"

    def __post_init__(self) -> None:
        if self.link not in LINKS:
            msg = f"[fit.latent] link (--link) must be one of {LINKS}; got {self.link!r}"
            raise ConfigError(msg)


@dataclass(frozen=True, slots=True)
class LatentResult:
    """One fit's latent-scale G-study: the categories, the fit's components and its D-study (JSON-ready)."""

    link: str
    categories: tuple[float, ...]
    records: int
    cells: int
    levels: Mapping[str, int]
    components: Mapping[str, float]
    component_intervals: Mapping[str, tuple[float | None, float | None]]
    boundary: tuple[str, ...]
    residual: float
    loglik: float
    dstudy: Mapping[str, Any]


def _finite(value: Any) -> float | None:
    return float(value) if isinstance(value, int | float) and math.isfinite(value) else None


class _LatentFitting:
    def __init__(self, scope: FitScope, options: LatentOptions) -> None:
        self.scope, self.options = scope, options

    def feeds(self) -> Mapping[GenerationMode, Callable[[np.ndarray], object]]:
        return {}

    def finish(self) -> LatentResult:
        import numpy as np

        from jurymeter.stats.latent import LatentCells, fit_latent, latent_dstudy

        records = (self.scope.records.select("system_id", "item_id", "judge_id", "score")
                   .filter(pl.col("score").is_not_null()).collect())
        if records.height == 0:
            msg = "no scored judgments"
            raise NotApplicableError(msg)
        values = np.sort(records["score"].unique().to_numpy().astype(np.float64))
        if values.size > MAX_CATEGORIES:
            msg = (f"the scores take {values.size} distinct values: the latent-scale G-study is for binary or "
                   f"ordinal scores (at most {MAX_CATEGORIES} ordered values); the G-study of raw scores covers a "
                   "continuous scale")
            raise NotApplicableError(msg)
        if values.size < 2:
            msg = f"every score is {values[0]:g}: no categories to model"
            raise NotApplicableError(msg)
        codes = {c: records[c].rank("dense").cast(pl.Int64).to_numpy() - 1 for c in ("system_id", "item_id", "judge_id")}
        category = np.searchsorted(values, records["score"].to_numpy().astype(np.float64))
        counted = LatentCells.from_records(codes["system_id"], codes["item_id"], codes["judge_id"], category,
                                           int(values.size))
        cells = LatentCells(counted.system, counted.item, counted.judge, counted.counts, values)
        try:
            fit = fit_latent(cells, link=self.options.link)
            dstudy = latent_dstudy(fit, seed=self.scope.settings.seed)
        except JurymeterError as error:  # too few levels, no convergence: null with the reason
            raise NotApplicableError(str(error)) from error
        return LatentResult(
            link=fit.link, categories=tuple(float(v) for v in values), records=records.height, cells=fit.n_cells,
            levels=dict(fit.levels), components={k: float(v) for k, v in fit.sigma2.items()},
            component_intervals={k: (_finite(lo), _finite(hi)) for k, (lo, hi) in fit.ci_sigma2.items()},
            boundary=tuple(fit.boundary), residual=float(fit.residual), loglik=float(fit.loglik), dstudy=dstudy,
        )


class LatentFitPart(FitPart[LatentResult, LatentOptions]):
    """The latent fit: the item set's cell counts, crossed random intercepts by the Laplace approximation."""

    protocols = ("pointwise",)
    compute_modules = ("jurymeter.stats.latent",)

    def start(self, scope: FitScope, chunked: FitChunks | None, options: LatentOptions) -> _LatentFitting:
        return _LatentFitting(scope, options)


# The D-study quantities of the latent_dstudy table: (quantity, scale, report key, interval key).
QUANTITIES = (
    ("erho2", "latent", "erho2", "erho2_ci"),
    ("mdd95", "latent", "mdd95", "mdd95_ci"),
    ("mdd95", "score", "mdd95_score", "mdd95_score_ci"),
)


def _dstudy_rows(result: LatentResult) -> list[dict[str, Any]]:
    rows = []
    for quantity, scale, key, interval in QUANTITIES:
        estimate = _finite(result.dstudy.get(key))
        low, high = result.dstudy.get(interval) or (None, None)
        reason = None if estimate is not None else _null_reason(result, quantity)
        if quantity == "erho2" and "s" in result.boundary:
            # The Wald draws keep a boundary component at 0, so their interval would be [0, 0]: no upper bound.
            high = None
            reason = reason or ("sigma2_s is estimated at its boundary 0, where the Wald draws cannot leave it: "
                                "the upper bound is not estimated (a profile likelihood would give it)")
        if reason is None and (_finite(low) is None or _finite(high) is None):
            reason = NO_COVARIANCE
        rows.append({"quantity": quantity, "scale": scale, "estimate": estimate, "low": _finite(low),
                     "high": _finite(high), "reason": reason})
    return rows


# Why the D-study's intervals are missing when the fit has no Wald covariance (stats.latent.solve).
NO_COVARIANCE = ("the Wald covariance of the fit is not defined (the Laplace deviance's Hessian is not positive "
                 "definite: a flat direction, too few systems or items): no draws to take an interval from")


def _component_reason(result: LatentResult, term: str) -> str | None:
    """Why a component's Wald interval is missing (``None``: it has one)."""
    low, high = result.component_intervals.get(term, (None, None))
    if low is not None and high is not None:
        return None
    if term in result.boundary:
        return "estimated at its boundary 0: a Wald interval on the log-SD scale has no bound there"
    return ("the Laplace deviance's Hessian is not positive definite here (a flat direction: too few systems or "
            "items to bound this component), so no Wald interval")


def _null_reason(result: LatentResult, quantity: str) -> str:
    """Why a latent D-study number is null (the same rule as the raw G-study's: docs/gstudy.md, "Boundaries")."""
    if quantity == "mdd95":
        return ("the latent relative error is <= 0 (every interaction of the systems at its boundary 0): no floor "
                "can be estimated")
    return "the latent system variance and its error variance are both 0: no ratio (0/0)"


class LatentTables(TablesPart[LatentResult]):
    """The latent components and D-study."""

    tables = (
        Table("latent_components", {"component": pl.String, "estimate": pl.Float64, "low": pl.Float64,
                                    "high": pl.Float64, "boundary": pl.Boolean, "reason": pl.String},
              "latent-scale variance components (logit or probit units squared) with 95 % Wald intervals"),
        Table("latent_dstudy", {"quantity": pl.String, "scale": pl.String, "estimate": pl.Float64,
                                "low": pl.Float64, "high": pl.Float64, "reason": pl.String},
              "E rho^2 and MDD95 on the latent scale and the MDD95 on the score scale, with 95 % intervals"),
    )

    def tabulate(self, result: LatentResult) -> dict[str, list[dict[str, Any]]]:
        components = [
            {"component": f"sigma2_{name}", "estimate": value,
             "low": result.component_intervals.get(name, (None, None))[0],
             "high": result.component_intervals.get(name, (None, None))[1], "boundary": name in result.boundary,
             "reason": _component_reason(result, name)}
            for name, value in result.components.items()
        ]
        components.append({"component": "sigma2_residual", "estimate": result.residual, "low": None, "high": None,
                           "boundary": False, "reason": "the link's own variance, fixed by the model: no interval"})
        return {"latent_components": components, "latent_dstudy": _dstudy_rows(result)}


class LatentHeadline(TypedDict):
    """The latent analysis's entry in the run summary: exactly the keys of :attr:`LatentSummary.headline`."""

    latent_erho2: float | None
    latent_mdd95_score: float | None
    latent_link: str
    latent_categories: int


class LatentSummary(SummaryPart[LatentResult]):
    """The latent report, headline and sentence."""

    headline = (
        Headline("latent_erho2", "latent E\u03c1\u00b2", doc="0-1: E\u03c1\u00b2 on the latent (logit or probit) scale of a binary or ordinal score, at the observed judges and items"),
        Headline("latent_mdd95_score", "latent MDD95 (points)", doc="the latent MDD95 back on the score scale (probability or rating points) at the grand mean"),
        Headline("latent_link", "latent link", "text", table=False),
        Headline("latent_categories", "score categories", "count", table=False),
    )
    tracked = (
        Tracked("latent E\u03c1\u00b2", "coefficient (0\u20131)", table="latent_dstudy", low="low", high="high",
                select=("quantity", "erho2")),
    )

    def report(self, result: LatentResult) -> dict[str, Any]:
        dstudy = _json(result.dstudy)
        intervals = {k: list(v) for k, v in result.component_intervals.items()}
        # Each null with its reason, by its path in this report (the G-study's convention: docs/results.md).
        reasons: dict[str, str] = {}
        for term in intervals:
            why = _component_reason(result, term)
            if why is not None:
                reasons[f"component_intervals.{term}"] = why
        for row in _dstudy_rows(result):
            key = {"erho2": "erho2", "mdd95": "mdd95"}[row["quantity"]] + ("_score" if row["scale"] == "score" else "")
            if row["reason"] and row["estimate"] is None:
                reasons[f"dstudy.{key}"] = row["reason"]
            interval = dstudy.get(f"{key}_ci")
            if key == "erho2" and "s" in result.boundary and interval is not None:
                dstudy["erho2_ci"] = [interval[0], None]
                interval = dstudy["erho2_ci"]
            if interval is not None and any(v is None for v in interval):
                reasons[f"dstudy.{key}_ci"] = row["reason"] or NO_COVARIANCE
        return {
            "link": result.link, "categories": list(result.categories), "records": result.records,
            "cells": result.cells, "levels": dict(result.levels), "components": dict(result.components),
            "component_intervals": intervals, "boundary": list(result.boundary), "residual": result.residual,
            "loglik": result.loglik, "dstudy": dstudy, "null_reasons": reasons,
        }

    def summarize(self, result: LatentResult) -> LatentHeadline:
        rows = {(r["quantity"], r["scale"]): r for r in _dstudy_rows(result)}
        return {"latent_erho2": rows[("erho2", "latent")]["estimate"],
                "latent_mdd95_score": rows[("mdd95", "score")]["estimate"],
                "latent_link": result.link, "latent_categories": len(result.categories)}

    def sentence(self, part: Mapping[str, Any], context: HeadlineContext) -> str | None:
        if part.get("latent_erho2") is None:
            return None
        clause = f"on the latent ({part.get('latent_link')}) scale E\u03c1\u00b2 {part['latent_erho2']:.2f}"
        if part.get("latent_mdd95_score") is not None:
            clause += f", MDD {part['latent_mdd95_score']:.2f} {context.points()} at the grand mean"
        return clause


def _json(value: Any) -> Any:
    """The D-study dict with tuples as lists and non-finite numbers as null."""
    if isinstance(value, Mapping):
        return {str(k): _json(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_json(v) for v in value]
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    return value


class LatentSection(SectionPart):
    """The latent section of a fit's page (:mod:`jurymeter.analyses.latent.section`)."""

    figure_modules = ("jurymeter.analyses.latent.section",)

    def section(self, page: SectionBuilder) -> None:
        from jurymeter.analyses.latent.section import latent_section

        latent_section(page)


class LatentAnalysis(LatentFitPart, LatentTables, LatentSummary, LatentSection,
                     Analysis[LatentResult, LatentOptions]):
    """The G-study of binary and ordinal scores on a latent scale (``docs/latent.md``)."""

    name = "latent"
    title = "Latent-scale G-study (binary and ordinal scores)"
    order = 15
    options_type = LatentOptions
    # Its exact fit costs about a minute of CPU at 50K cells (bench/latent.py): a night runs it when asked
    # ([fit] analyses names it, or a [fit.latent] table is given), not on every item set.
    by_default = False

    command = "jurymeter.analyses.latent.command:COMMAND"


LATENT = LatentAnalysis()
