"""The G-study analysis: variance components, D-study, bootstrap intervals, diagnostics, leaderboard.

One fit is :class:`jurymeter.stats.reliability.GStudyChunks` fed the block of
the fit's records (generations averaged or as a facet), then the curves of
figures 1 and 2 and the leaderboard's tie groups (:mod:`jurymeter.stats.curves`).
The statistics live in :mod:`jurymeter.stats`; this package is the seam's
adapter, one module per part: the fit and the page section here, the typed
result in :mod:`~jurymeter.analyses.gstudy.result`, the tables in
:mod:`~jurymeter.analyses.gstudy.tables`, the report, summary and headline in
:mod:`~jurymeter.analyses.gstudy.summary`, the command in
:mod:`~jurymeter.analyses.gstudy.command`.

References
----------
.. [Anand2026] A. Anand, "Ask Which, Not How Good: Sizing Benchmarks Scored by
   an LLM", 2026 (``papers/ask-which-not-how-good.txt`` and its appendix).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, cast

from jurymeter.analyses.base import Analysis, FitPart, FitScope, FitSettings, SectionPart
from jurymeter.analyses.gstudy.result import GStudyReport, GStudyResult
from jurymeter.analyses.gstudy.result import finite as _finite
from jurymeter.analyses.gstudy.summary import GStudySummary, dropped_summary, dropped_text
from jurymeter.analyses.gstudy.tables import GStudyTables
from jurymeter.errors import DesignError, NotApplicableError

if TYPE_CHECKING:
    import numpy as np

    from jurymeter.render.html import SectionBuilder
    from jurymeter.stats.blocks import BalancedBlock, FitChunks, GenerationMode
    from jurymeter.stats.reliability import GStudyRequest

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
    # The universe of generalization (docs/gstudy.md, "Fixed facets and finite pools"): facets whose
    # levels in the study are all of the universe's ("judges": a fixed panel; "items": this benchmark),
    # and the size of a finite pool the judges or items were drawn from (0: unlimited, the paper's).
    fixed: tuple[str, ...] = ()
    judge_pool: int = 0
    item_pool: int = 0

    def __post_init__(self) -> None:
        from jurymeter.analyses.commands import OptionError
        from jurymeter.errors import ConfigError
        from jurymeter.stats.universe import FACET_ROLES

        if self.estimator not in ESTIMATOR_CHOICES:
            msg = f"[fit.gstudy] estimator (--estimator) must be one of {ESTIMATOR_CHOICES}; got {self.estimator!r}"
            raise ConfigError(msg)
        if self.henderson_intervals not in HENDERSON_INTERVAL_CHOICES:
            msg = (f"[fit.gstudy] henderson_intervals (--henderson-intervals) must be one of "
                   f"{HENDERSON_INTERVAL_CHOICES}; got {self.henderson_intervals!r}")
            raise ConfigError(msg)
        # OptionError: the configuration reader and the CLI rename the field to the key or flag written
        unknown = [f for f in self.fixed if f not in FACET_ROLES]
        if unknown or len(set(self.fixed)) != len(self.fixed):
            allowed = f"a list naming each of {', '.join(FACET_ROLES)} at most once"
            raise OptionError("fixed", allowed, list(self.fixed))  # noqa: EM101 (the field's name, not a message)
        for role, pool in (("judges", self.judge_pool), ("items", self.item_pool)):
            key = f"{role[:-1]}_pool"
            if isinstance(pool, bool) or not isinstance(pool, int) or pool < 0:
                raise OptionError(key, f"a whole number of {role} (0: unlimited)", pool)
            if pool and role in self.fixed:
                allowed = (f"0 while {role} are fixed (a fixed facet's universe is the study's own levels: "
                           "give one of the two)")
                raise OptionError(key, allowed, pool)


def request_of(item_set: str, settings: FitSettings, options: GStudyOptions) -> GStudyRequest:
    """The statistics' request for one fit (validated by :class:`GStudyRequest`)."""
    from jurymeter.stats.estimator_choice import gstudy_request

    return gstudy_request(
        item_set, judges=settings.judges, systems=settings.systems, generations=settings.generations,
        n_boot=settings.n_boot, seed=settings.seed, target=settings.target, interval=settings.interval,
        screen_threshold=options.screen_threshold, estimator_name=options.estimator,
        henderson_interval_name=options.henderson_intervals, fixed=options.fixed,
        judge_pool=options.judge_pool, item_pool=options.item_pool,
    )


class _GStudyFitting:
    def __init__(self, scope: FitScope, chunked: FitChunks | None, options: GStudyOptions) -> None:
        from jurymeter.stats.estimator_choice import open_block

        self.scope = scope
        self.request = request_of(scope.item_set, scope.settings, options)
        self.mode: GenerationMode = self.request.generations
        # The one scan's cell sums, when the records were read so: Henderson's cells
        # without a second scan (10M records: about 3 s less).
        self.sums = chunked.cell_sums() if chunked is not None else None
        population = scope.systems if scope.systems.height else None
        # no_block: why there is no balanced block (the Henderson path fits anyway)
        self.layout, self.no_block, self.sink = open_block(self.request, chunked, population)

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
        from jurymeter.stats.estimator_choice import EstimatorChoice

        choice = EstimatorChoice(self.request, self.scope.records, layout=self.layout, no_block=self.no_block,
                                 sums=self.sums)
        self.sums = None  # the choice holds them until read: their memory may go
        return choice.report(self._balanced)

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
        typed: GStudyReport = cast("GStudyReport", report)  # the statistics' dict, its keys typed from here on
        return GStudyResult(
            design=str(report["design"]),
            systems=int(block["systems"]),
            items=int(block["items"]),
            judges=int(block["judges"]),
            erho2=_finite(report.get("erho2")),
            ceiling=_finite(report.get("ceiling")),
            mdd95=_finite(report.get("mdd95")),
            report=typed,
            design_note="; ".join(report.get("design_notes") or []) or None,
        )


class GStudyFit(FitPart[GStudyResult, GStudyOptions]):
    """The G-study's fit: the block of the fit's records, or Henderson's cells of every record."""

    protocols = ("pointwise",)
    compute_modules = ("jurymeter.stats.reliability", "jurymeter.stats.curves")

    def modes(self, settings: FitSettings, options: GStudyOptions) -> tuple[GenerationMode, ...]:
        # block_rule, not reliability: run_fit reads the cells while its thread imports the fit's modules
        from jurymeter.stats.block_rule import generation_mode

        return (generation_mode(settings.generations),)

    def start(self, scope: FitScope, chunked: FitChunks | None, options: GStudyOptions) -> _GStudyFitting:
        try:
            return _GStudyFitting(scope, chunked, options)
        except DesignError as error:  # estimator 'balanced' on data without a block: null with the reason
            raise NotApplicableError(str(error)) from error


class GStudySection(SectionPart):
    """The G-study's section of a fit's page (:mod:`jurymeter.analyses.gstudy.section`, imported when drawn)."""

    figure_modules = ("jurymeter.stats.reliability", "jurymeter.stats.dstudy", "jurymeter.analyses.gstudy.section")

    def section(self, page: SectionBuilder) -> None:
        from jurymeter.analyses.gstudy.section import gstudy_section

        gstudy_section(page)


class GStudyAnalysis(GStudyFit, GStudyTables, GStudySummary, GStudySection,
                     Analysis[GStudyResult, GStudyOptions]):
    """Generalizability theory for one pointwise item set ([Anand2026] sections 3-5 and appendix)."""

    name = "gstudy"
    title = "G-study and D-study"
    order = 10
    options_type = GStudyOptions

    # Its command, as data (imported by the CLI only): jurymeter.analyses.gstudy.command.
    command = "jurymeter.analyses.gstudy.command:COMMAND"


GSTUDY = GStudyAnalysis()

__all__ = ["GSTUDY", "GStudyAnalysis", "GStudyOptions", "GStudyResult", "dropped_summary", "dropped_text",
           "request_of"]
