"""The G-study analysis: variance components, D-study, bootstrap intervals, diagnostics, leaderboard.

One fit is :class:`jurymeter.stats.reliability.GStudyChunks` fed the block of
the fit's records (generations averaged or as a facet), then the curves of
figures 1 and 2 and the leaderboard's tie groups (:mod:`jurymeter.stats.curves`).
The statistics live in :mod:`jurymeter.stats`; this module is the seam's
adapter: tables, summary, section and command.

References
----------
.. [Anand2026] A. Anand, "Ask Which, Not How Good: Sizing Benchmarks Scored by
   an LLM", 2026 (``papers/ask-which-not-how-good.txt`` and its appendix).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import polars as pl

from jurymeter.analyses.base import (
    Analysis,
    FitScope,
    FitSettings,
    Headline,
    HeadlineContext,
    Table,
    Tracked,
)
from jurymeter.errors import DesignError, NotApplicableError

if TYPE_CHECKING:
    import numpy as np

    from jurymeter.render.html import SectionBuilder
    from jurymeter.stats.blocks import BalancedBlock, BlockLayout, FitChunks, GenerationMode
    from jurymeter.stats.reliability import GStudyRequest

# The D-study quantities of the ``dstudy`` table, in order.
DSTUDY_QUANTITIES = (
    "erho2", "phi", "mdd95", "erho2_30", "mdd95_30", "mdd95_unlimited_items",
    "ceiling", "ceiling_3_judges", "mdd95_in_sd_of_system_means",
    "judges_needed", "items_needed",
)


ESTIMATOR_CHOICES = ("auto", "henderson", "balanced")
HENDERSON_INTERVAL_CHOICES = ("auto", "records", "chisquare")


@dataclass(frozen=True, slots=True)
class GStudyOptions:
    """The G-study's own options (``[fit.gstudy]``; the ``gstudy`` command's flags)."""

    screen_threshold: float = 1.0
    # "auto": Henderson's Method I on every record when the balanced block would
    # drop anything, the balanced block otherwise; "henderson" or "balanced": always that.
    estimator: str = "auto"
    # The intervals of a Henderson fit: "auto" (the record bootstrap up to a size,
    # chi-square draws above it), "records" or "chisquare" (docs/henderson.md).
    henderson_intervals: str = "auto"

    def __post_init__(self) -> None:
        from jurymeter.errors import ConfigError

        if self.estimator not in ESTIMATOR_CHOICES:
            msg = f"[fit.gstudy] estimator (--estimator) must be one of {ESTIMATOR_CHOICES}; got {self.estimator!r}"
            raise ConfigError(msg)
        if self.henderson_intervals not in HENDERSON_INTERVAL_CHOICES:
            msg = (f"[fit.gstudy] henderson_intervals (--henderson-intervals) must be one of "
                   f"{HENDERSON_INTERVAL_CHOICES}; got {self.henderson_intervals!r}")
            raise ConfigError(msg)


@dataclass(frozen=True, slots=True)
class GStudyResult:
    """One fit's G-study: the headline numbers, typed, and the whole report (JSON-ready).

    ``erho2``, ``ceiling`` and ``mdd95`` are ``None`` where they cannot be
    estimated (the report says why); ``design_note`` says why the fitted design
    is not the block's (a facet with one level left it: one judge), else ``None``.
    """

    design: str
    systems: int
    items: int
    judges: int
    erho2: float | None
    ceiling: float | None
    mdd95: float | None
    report: Mapping[str, Any] = field(repr=False)
    design_note: str | None = None


def _finite(value: Any) -> float | None:
    if value is None:
        return None
    x = float(value)
    return x if math.isfinite(x) else None


def request_of(item_set: str, settings: FitSettings, options: GStudyOptions) -> GStudyRequest:
    """The statistics' request for one fit (validated by :class:`GStudyRequest`)."""
    from jurymeter.stats.reliability import (
        GStudyRequest,
        estimator,
        generation_mode,
        henderson_intervals,
        interval_method,
    )

    return GStudyRequest(
        item_set=item_set,
        judges=settings.judges,
        systems=settings.systems,
        generations=generation_mode(settings.generations),
        n_boot=settings.n_boot,
        seed=settings.seed,
        target=settings.target,
        interval_method=interval_method(settings.interval),
        screen_threshold=options.screen_threshold,
        estimator=estimator(options.estimator),
        henderson_intervals=henderson_intervals(options.henderson_intervals),
    )


class _GStudyFitting:
    def __init__(self, scope: FitScope, chunked: FitChunks | None, options: GStudyOptions) -> None:
        from jurymeter.errors import DesignError
        from jurymeter.stats.reliability import GStudyChunks

        self.scope = scope
        self.request = request_of(scope.item_set, scope.settings, options)
        self.mode: GenerationMode = self.request.generations
        self.no_block: str | None = None  # why there is no balanced block (the Henderson path fits anyway)
        self.layout: BlockLayout | None = None
        # The one scan's cell sums, when the records were read so: Henderson's cells
        # without a second scan (10M records: about 3 s less).
        self.sums = chunked.cell_sums() if chunked is not None else None
        if chunked is not None:
            try:
                self.layout = chunked.layout(self.mode)
            except DesignError as error:
                if self.request.estimator == "balanced":
                    raise
                self.no_block = str(error)
        population = scope.systems if scope.systems.height else None
        self.sink = None
        if self.layout is not None and self.request.estimator != "henderson":
            try:
                self.sink = GStudyChunks(self.layout, self.request, systems=population)
            except DesignError as error:  # the block cannot be fitted (one system left): every record may be
                if self.request.estimator == "balanced":
                    raise
                self.no_block = str(error)

    def feeds(self) -> Mapping[GenerationMode, Callable[[np.ndarray], object]]:
        return {self.mode: self.sink.add} if self.sink is not None else {}

    def _balanced(self, block: BalancedBlock | None = None) -> dict[str, Any]:
        if self.sink is not None:
            return self.sink.report()
        from jurymeter.stats.blocks import balanced_block
        from jurymeter.stats.reliability import assess_block, restrict

        population = self.scope.systems if self.scope.systems.height else None
        if block is None:
            block = balanced_block(restrict(self.scope.records, self.request), generations=self.mode)
        return assess_block(block, self.request, systems=population)

    def _report(self) -> dict[str, Any]:
        """The balanced report, or Henderson's on every record (``estimator``; ``docs/gstudy.md``, "Estimators")."""
        from jurymeter.errors import DesignError
        from jurymeter.stats.blocks import balanced_block
        from jurymeter.stats.reliability import (
            block_dropped,
            cells_from_sums,
            henderson_cells,
            henderson_report,
            restrict,
        )

        if self.request.estimator == "balanced":
            report = self._balanced()
            report["estimator"] = "balanced"
            return report
        layout = self.layout
        if (self.request.estimator == "auto" and layout is not None and self.no_block is None
                and layout.observations_in is not None and layout.observations_used == layout.observations_in
                and not (layout.dropped_systems or layout.dropped_items or layout.dropped_judges)):
            # Complete: the block uses every observation the records make (each present cell with
            # all its replicates, and generations), so it holds every record; no pass over the records
            # for Henderson's cells (10M records: 1.5 s). Every (system, item, judge) cell present is
            # not enough: uneven replicate counts leave the repeats out of the block (issue 22).
            report = self._balanced()
            report["estimator"] = "balanced"
            report["estimator_note"] = "auto: the data are complete, so the balanced block holds every record"
            return report
        table = cells_from_sums(self.sums, self.mode) if self.sums is not None else None
        self.sums = None  # read: its memory may go
        cells = table if table is not None else henderson_cells(self.scope.records, self.request)
        why = self.no_block
        block = None
        if layout is None and why is None:
            try:
                block = balanced_block(restrict(self.scope.records, self.request), generations=self.mode)
                layout = block.layout
            except DesignError as error:
                why = str(error)
        if self.request.estimator == "auto" and layout is not None and why is None and not block_dropped(layout, cells):
            report = self._balanced(block)  # complete: the balanced block is every record (and equal to Henderson's)
            report["estimator"] = "balanced"
            report["estimator_note"] = "auto: the data are complete, so the balanced block holds every record"
            return report
        if self.request.estimator == "henderson":
            return henderson_report(cells, self.request, layout=layout, balanced=why)
        if why is not None:  # auto without a balanced block: every record, or both reasons
            try:
                return henderson_report(cells, self.request, layout=layout, balanced=why)
            except DesignError as error:
                msg = f"{why}; and every record (estimator 'henderson') cannot be fitted either: {error}"
                raise DesignError(msg) from error
        try:
            return henderson_report(cells, self.request, layout=layout, balanced=why)
        except DesignError as error:  # auto: every record does not identify the design; the block may
            report = self._balanced(block)
            report["estimator"] = "balanced"
            report["estimator_note"] = f"auto: every record cannot be fitted by Henderson I ({error}); the balanced block"
            return report

    def finish(self) -> GStudyResult:
        from jurymeter.stats.curves import curves, leaderboard

        try:
            report = self._report()
        except DesignError as error:
            # The data do not identify the design (one system, one item, no shared judges...):
            # the G-study is null with that reason and the fit's other analyses go on (issue 22).
            raise NotApplicableError(str(error)) from error
        report.update(curves(report))
        report["leaderboard"] = leaderboard(report)
        block = report["block"]
        return GStudyResult(
            design=str(report["design"]),
            systems=int(block["systems"]),
            items=int(block["items"]),
            judges=int(block["judges"]),
            erho2=_finite(report.get("erho2")),
            ceiling=_finite(report.get("ceiling")),
            mdd95=_finite(report.get("mdd95")),
            report=report,
            design_note="; ".join(report.get("design_notes") or []) or None,
        )


def _number(value: Any) -> float | None:
    return None if value is None else float(value)


class GStudyAnalysis(Analysis[GStudyResult, GStudyOptions]):
    """Generalizability theory for one pointwise item set ([Anand2026] sections 3-5 and appendix)."""

    name = "gstudy"
    title = "G-study and D-study"
    protocols = ("pointwise",)
    order = 10
    options_type = GStudyOptions
    figure_modules = ("jurymeter.stats.reliability", "jurymeter.stats.dstudy", "jurymeter.analyses.gstudy.section")
    compute_modules = ("jurymeter.stats.reliability", "jurymeter.stats.curves")
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
    headline = (
        Headline("design", "design", "text"),
        Headline("systems", "systems", "count"),
        Headline("items", "items", "count"),
        Headline("judges", "judges", "count"),
        Headline("erho2", "E\u03c1\u00b2", doc="0-1: the share of the variance of system means that is real system difference, at the observed judges and items"),
        Headline("ceiling", "single-judge ceiling", doc="0-1: the E\u03c1\u00b2 one judge reaches with unlimited items (below E\u03c1\u00b2 when several judges are averaged: a judge's disagreement with the others does not shrink with items)"),
        Headline("mdd95", "MDD95 (points)", doc="the smallest difference of two system means the design detects at 95 %, in score points"),
        Headline("design_note", "design note", "text"),
        # What the fit left out (issue 14, point 5): from the report's block section.
        Headline("dropped_systems", "systems dropped", "count"),
        Headline("dropped_items", "items dropped", "count"),
        Headline("dropped_judges", "judges dropped", "count"),
        Headline("dropped_system_ids", "systems not on the leaderboard", "text"),
        # The index page's headline sentence (issue 16, point 1).
        Headline("records", "observations", "count", table=False),
        Headline("groups", "tie groups", "count", table=False),
        Headline("lenient_judge", "most lenient judge", "text", table=False),
        Headline("lenient_offset", "lenient offset (points)", table=False),
        Headline("harsh_judge", "harshest judge", "text", table=False),
        Headline("harsh_offset", "harsh offset (points)", table=False),
        Headline("judges_needed", "judges for the target at 30 items", "count", table=False),
        Headline("target", "E\u03c1\u00b2 target", table=False),
        Headline("pairs", "pairs of systems", "count", table=False),
        Headline("pairs_apart", "pairs told apart", "count", table=False),
        Headline("top_candidates", "systems that could rank first", "count", table=False),
    )
    # What the run history follows across published runs (pipeline.history, issue 16 point 4).
    tracked = (
        Tracked("records", "records", headline="records"),
        Tracked("E\u03c1\u00b2", "coefficient (0\u20131)", table="dstudy", low="low", high="high",
                select=("quantity", "erho2")),
        Tracked("single-judge ceiling", "coefficient (0\u20131)", table="dstudy", low="low", high="high",
                select=("quantity", "ceiling")),
        Tracked("MDD95", "points", table="dstudy", low="low", high="high", select=("quantity", "mdd95")),
        Tracked("judge offset", "points", table="judge_effects", estimate="offset", low="low", high="high",
                subject="judge_id", drift=True),
    )

    def modes(self, settings: FitSettings, options: GStudyOptions) -> tuple[GenerationMode, ...]:
        from jurymeter.stats.reliability import generation_mode

        return (generation_mode(settings.generations),)

    def start(self, scope: FitScope, chunked: FitChunks | None, options: GStudyOptions) -> _GStudyFitting:
        try:
            return _GStudyFitting(scope, chunked, options)
        except DesignError as error:  # estimator 'balanced' on data without a block: null with the reason
            raise NotApplicableError(str(error)) from error

    def report(self, result: GStudyResult) -> dict[str, Any]:
        return dict(result.report)

    def summarize(self, result: GStudyResult) -> dict[str, Any]:
        return {
            "design": result.design, "systems": result.systems, "items": result.items,
            "judges": result.judges, "erho2": result.erho2, "ceiling": result.ceiling,
            "mdd95": result.mdd95, "design_note": result.design_note, **dropped_summary(result.report),
            **index_summary(result.report),
        }

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
        intervals = report["intervals"]
        reasons = report.get("null_reasons") or {}
        rows["dstudy"] = []
        for q in DSTUDY_QUANTITIES:
            estimate = _number(report.get(q, intervals.get(q, {}).get("estimate")))
            rows["dstudy"].append({
                "quantity": q,
                "estimate": estimate,
                "low": _number(intervals.get(q, {}).get("low")),
                "high": _number(intervals.get(q, {}).get("high")),
                "reason": None if estimate is not None else (str(reasons[q]) if q in reasons else None),
            })
        rows["ceilings"] = [{"judges": int(j), "ceiling": v} for j, v in report["ceiling_by_judges"].items()]
        rows["erho2_curve"] = list(report["erho2_curve"])
        nomo = report["nomogram"]
        rows["nomogram"] = [
            {"judges": j, "items": n, "erho2": nomo["erho2"][a][b]}
            for a, j in enumerate(nomo["judges"])
            for b, n in enumerate(nomo["items"])
        ]
        rows["budget"] = list(report["budget_curve"])
        rows["leaderboard"] = list(report["leaderboard"])
        items = report.get("items") or {}
        screened = set(items.get("screened_items", []))
        rows["items"] = [
            {"item_id": item, "discrimination": d, "screened": item in screened}
            for item, d in items.get("discrimination", {}).items()
        ]
        rows["judge_effects"] = [
            {k: row[k] for k in ("judge_id", "offset", "se", "low", "high")} for row in report.get("judge_offsets") or []
        ]
        return rows

    def section(self, page: SectionBuilder) -> None:
        from jurymeter.analyses.gstudy.section import gstudy_section

        gstudy_section(page)

    def sentence(self, part: Mapping[str, Any], context: HeadlineContext) -> str | None:
        """Which systems can be told apart, the MDD, what one judge and more judges reach, the judges' offsets."""
        clauses = []
        systems, groups = part.get("systems"), part.get("groups")
        pairs, apart, top = part.get("pairs"), part.get("pairs_apart"), part.get("top_candidates")
        if systems is not None and pairs is not None and apart is not None and top is not None:
            clause = (f"{systems} systems: {top} could rank first, {apart} of {pairs} pairs can be told apart"
                      if systems > 1 else f"{systems} system")
            if groups is not None and 1 < groups < systems:
                clause += f" ({groups} groups separated by at least the MDD)"
            elif groups is not None and groups == systems and systems > 1:
                clause += " (every neighbour separated by at least the MDD)"
            clauses.append(clause)
        elif systems is not None:
            clauses.append(f"{systems} systems")
        if part.get("mdd95") is not None:
            clauses.append(f"MDD {part['mdd95']:.2f} {context.points()}")
        if part.get("erho2") is not None:
            judges = part.get("judges")
            clauses.append(f"E\u03c1\u00b2 {part['erho2']:.2f} with {judges} judge{'' if judges == 1 else 's'} "
                           f"and {part.get('items')} items")
        reach = []
        if part.get("ceiling") is not None:
            reach.append(f"one judge's ceiling {part['ceiling']:.2f}")
        if part.get("judges_needed") is not None and part.get("target") is not None:
            reach.append(f"{part['judges_needed']} judges reach E\u03c1\u00b2 {part['target']:g} at 30 items")
        if reach:
            clauses.append(", ".join(reach))
        if part.get("lenient_offset") is not None and part.get("harsh_offset") is not None:
            clauses.append(f"most lenient judge {part.get('lenient_judge')} {part['lenient_offset']:+.2f}, "
                           f"harshest {part.get('harsh_judge')} {part['harsh_offset']:+.2f} points")
        return "; ".join(clauses) or None

    # Its command, as data (imported by the CLI only): jurymeter.analyses.gstudy.command.
    command = "jurymeter.analyses.gstudy.command:COMMAND"


GSTUDY = GStudyAnalysis()


def dropped_summary(report: Mapping[str, Any]) -> dict[str, Any]:
    """What a fit's block left out, from its report's ``block`` section (``summary.json``'s G-study entry).

    Counts of the systems, items and judges dropped to balance the block and
    the dropped system ids (the leaderboard rows that are missing; ``None``
    when none).
    """
    block = report.get("block") or {}
    ids = [str(s) for s in block.get("dropped_systems") or []]
    return {
        "dropped_systems": len(ids),
        "dropped_items": len(block.get("dropped_items") or []),
        "dropped_judges": len(block.get("dropped_judges") or []),
        "dropped_system_ids": ", ".join(ids) or None,
    }


def index_summary(report: Mapping[str, Any]) -> dict[str, Any]:
    """The headline numbers of the index page's sentence (issue 16, point 1), from a fit's report.

    ``records``: the observations the fit used (the block's, or every record's
    cells with Henderson: with generations averaged one is the mean of a cell's
    generations); ``groups``: the leaderboard's tie groups (``None`` when the MDD
    is not estimable); the most lenient and the harshest judge with their
    offsets in points (``None`` with fewer than two judges:
    ``null_reasons["judge_offsets"]`` says why).
    """
    block = report.get("block") or {}
    used = block.get("observations_used")
    board = report.get("leaderboard") or []
    groups = {row.get("tie_group") for row in board}
    offsets = [row for row in report.get("judge_offsets") or [] if row.get("offset") is not None]
    lenient = max(offsets, key=lambda r: (r["offset"], r["judge_id"]), default=None)
    harsh = min(offsets, key=lambda r: (r["offset"], r["judge_id"]), default=None)
    return {
        "records": None if used is None else int(used),
        "groups": None if not board or None in groups else len(groups),
        "lenient_judge": None if lenient is None else str(lenient["judge_id"]),
        "lenient_offset": None if lenient is None else _finite(lenient["offset"]),
        "harsh_judge": None if harsh is None else str(harsh["judge_id"]),
        "harsh_offset": None if harsh is None else _finite(harsh["offset"]),
        "judges_needed": report.get("judges_needed"),
        "target": _finite(report.get("target")),
        **_told_apart(board),
    }


def _told_apart(board: list[dict[str, Any]]) -> dict[str, Any]:
    """Pairs of systems whose means differ by at least the MDD, and the systems that could rank first.

    From the leaderboard's rows (``mean``, ``mdd95``, ``rank_low``); ``None``
    without an MDD. A pair is told apart by the rule of the rank ranges: one
    mean at least ``mdd95`` above the other (``docs/results.md``, "Rank ranges").
    """
    mdd = board[0].get("mdd95") if board else None
    if mdd is None:
        return {"pairs": None, "pairs_apart": None, "top_candidates": None}
    means = [float(row["mean"]) for row in board]
    apart = sum(1 for a in range(len(means)) for b in range(a + 1, len(means)) if abs(means[a] - means[b]) >= mdd)
    return {
        "pairs": len(means) * (len(means) - 1) // 2,
        "pairs_apart": apart,
        "top_candidates": sum(1 for row in board if row.get("rank_low") == 1),
    }


def dropped_text(part: Mapping[str, Any], block: Mapping[str, Any] | None = None) -> str | None:
    """One line saying what a fit's G-study left out, from its summary entry; ``None`` when nothing was.

    With the report's ``block`` section, the line also says how many
    observations the block uses of how many records.
    """
    dropped = [(part.get(f"dropped_{kind}") or 0, kind) for kind in ("systems", "items", "judges")]
    if not any(n for n, _ in dropped):
        return None
    said = ", ".join(f"{n} {kind if n != 1 else kind[:-1]}" for n, kind in dropped)
    ids = part.get("dropped_system_ids")
    line = f"the balanced block left out {said}" + (f" (systems {ids})" if ids else "")
    used, records = (block or {}).get("observations_used"), (block or {}).get("records_in")
    if used is not None and records is not None:
        line += f"; it uses {used:,} observations of {records:,} records"
    return line
