"""The CyclicJudge analysis: per-system judge offsets, F-test, allocation-strategy variances.

Runs where the fit's data have two or more generations and a crossed panel: the
panel is the generation-facet block's judges, and each system is decomposed on
its own complete block (:func:`jurymeter.stats.cyclic.fit.system_blocks`), so a
system with more generations keeps them; elsewhere it is *not applicable* and
the run says why.

References
----------
.. [Zhu2026] Z. Zhu et al., "CyclicJudge: Mitigating Judge Bias Efficiently in
   LLM-based Evaluation", 2026 (``papers/cyclicjudge.txt``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal, TypedDict, cast

import polars as pl

from jurymeter.analyses.base import (
    Analysis,
    FitPart,
    FitScope,
    FitSettings,
    Headline,
    HeadlineContext,
    SectionPart,
    SummaryPart,
    Table,
    TablesPart,
)
from jurymeter.errors import JurymeterError, NotApplicableError

if TYPE_CHECKING:
    import numpy as np

    from jurymeter.render.html import SectionBuilder
    from jurymeter.stats.blocks import BlockLayout, FitChunks, GenerationMode

CyclicComponent = Literal["sigma2_scenario", "sigma2_generation", "sigma2_judge", "sigma2_residual",
                          "f_statistic", "p_value"]
CYCLIC_COMPONENTS: tuple[CyclicComponent, ...] = ("sigma2_scenario", "sigma2_generation", "sigma2_judge",
                                                  "sigma2_residual", "f_statistic", "p_value")


@dataclass(frozen=True, slots=True)
class CyclicOptions:
    """CyclicJudge's own options (``[fit.cyclic]``; the ``cyclic`` command's flags).

    ``budgets``: per-scenario judge-call budgets (``None``: the paper's
    default multiples of K); ``at_generations``/``at_judges``: the operating point.
    """

    budgets: tuple[int, ...] | None = None
    at_generations: int = 1
    at_judges: int = 1


class StrategyVariances(TypedDict, total=False):
    """Var(X-bar) of allocation strategies A, B and C at each budget ([Zhu2026] eq. 20-25), one system."""

    n: int
    k_total: int
    budgets: list[int]
    var_a: list[float]
    var_b: list[float]
    var_c: list[float]


class SystemDecomposition(TypedDict, total=False):
    """One system's variance decomposition and F-test (``systems[system_id]``); other keys typed loosely."""

    n_scenarios: int
    n_generations: int
    n_judges: int
    grand_mean: float
    sigma2_scenario: float
    sigma2_generation: float
    sigma2_judge: float
    sigma2_residual: float
    f_statistic: float | None
    p_value: float | None
    strategies: StrategyVariances
    raw: dict[str, float]
    truncated: dict[str, bool]
    mean_squares: dict[str, float]
    df: dict[str, float]
    judge_offsets: dict[str, float]
    contributions: dict[str, Any]


class SystemBlock(TypedDict):
    """The complete block one system was decomposed on (``system_blocks[system_id]``)."""

    scenarios: int
    generations: int
    judges: int
    scenarios_left_out: int
    records_in: int
    records_used: int


class CyclicReport(TypedDict, total=False):
    """One fit's CyclicJudge report, as :func:`jurymeter.stats.cyclic.fit.cyclic_report` builds it (the fit's JSON)."""

    block: dict[str, Any]  # the generation-facet block's sizes and drops (the panel)
    system_blocks: dict[str, SystemBlock]
    systems: dict[str, SystemDecomposition]
    judge_system_offsets: dict[str, dict[str, float]]
    system_means: dict[str, float]
    self_preference: list[dict[str, Any]]
    skipped_systems: dict[str, str]


@dataclass(frozen=True, slots=True)
class CyclicResult:
    """One fit's CyclicJudge decomposition: sizes, typed, and the whole report (JSON-ready).

    ``systems``: the systems decomposed; ``scenarios`` and ``generations``: the
    largest of their own blocks (``report["system_blocks"]`` has each); ``judges``: the panel.
    """

    systems: int
    scenarios: int
    generations: int
    judges: int
    report: CyclicReport = field(repr=False)


def _one_judge(judges: tuple[str, ...]) -> str:
    """Why CyclicJudge does not apply to a block with one judge (issue 14, point 1)."""
    named = f" ({judges[0]})" if judges else ""
    return (
        f"the balanced block has one judge{named}; CyclicJudge splits the variance "
        "between judges and allocates scenarios among them, so it needs at least two judges on the same "
        "systems, scenarios and generations: ingest a second judge's scores of them (the planner's round-robin "
        "plan, `jurymeter plan`, says which judge scores what), or use the G-study, which fits one judge"
    )


class _CyclicFitting:
    """The panel comes from the generation-facet block's layout; each system's own block from the records.

    No block chunks are read (each system's block is its own, not the shared
    block's): ``feeds`` asks for the facet block's chunks only while its layout
    is speculative, so a hole met in a chunk re-decides the layout (and the panel).
    """

    def __init__(self, scope: FitScope, chunked: FitChunks | None, options: CyclicOptions) -> None:
        self.scope, self.options = scope, options
        self.layout: BlockLayout | None = None
        self.speculative = False
        generations = chunked.generations if chunked is not None else None
        if generations is None:  # the distinct values by the streaming engine: not the whole column
            generations = (
                scope.records.select(pl.col("generation").unique()).collect(engine="streaming").height
            )
        if generations < 2:
            msg = (f"needs at least two generations per scenario seen by every judge; this item set has {generations} "
                   "(each judge's offset is in the G-study section, table judge_effects)")
            raise NotApplicableError(msg)
        if chunked is not None:
            try:
                self.layout = chunked.layout("facet")
            except JurymeterError as exc:  # no crossed panel: say why instead of failing the fit
                raise NotApplicableError(str(exc)) from exc
            self.speculative = bool(chunked.speculative)
        if self.layout is not None and len(self.layout.judges) < 2:
            raise NotApplicableError(_one_judge(self.layout.judges))

    def feeds(self) -> Mapping[GenerationMode, Callable[[np.ndarray], object]]:
        return {"facet": _ignore} if self.layout is not None and self.speculative else {}

    def finish(self) -> CyclicResult:
        from jurymeter.stats.cyclic.fit import cyclic_report

        options = self.options
        kwargs: dict[str, Any] = {
            "systems": self.scope.systems, "judges": self.scope.judges,
            "budgets": list(options.budgets) if options.budgets else None,
            "at_generations": options.at_generations, "at_judges": options.at_judges,
        }
        try:  # without a layout, the polars path decides the facet block
            report = cyclic_report(self.scope.records, block=self.layout, **kwargs)
        except NotApplicableError:
            raise
        except JurymeterError as exc:  # no crossed panel: say why instead of failing the fit
            raise NotApplicableError(str(exc)) from exc
        block = report["block"]
        if int(block["judges"]) < 2:
            raise NotApplicableError(_one_judge(()))
        own = report["system_blocks"]
        return CyclicResult(
            systems=len(own), scenarios=max(int(b["scenarios"]) for b in own.values()),
            generations=max(int(b["generations"]) for b in own.values()), judges=int(block["judges"]),
            report=cast("CyclicReport", report),  # the statistics' dict, its keys typed from here on
        )


def _ignore(x: np.ndarray) -> None:
    """A chunk of the facet block, read only so that a speculative layout meets its holes."""


class CyclicFit(FitPart[CyclicResult, CyclicOptions]):
    """CyclicJudge's fit: the panel from the generation-facet block, each system on its own block."""

    protocols = ("pointwise",)
    compute_modules = ("jurymeter.stats.cyclic.fit",)

    def modes(self, settings: FitSettings, options: CyclicOptions) -> tuple[GenerationMode, ...]:
        return ("facet",)

    def start(self, scope: FitScope, chunked: FitChunks | None, options: CyclicOptions) -> _CyclicFitting:
        return _CyclicFitting(scope, chunked, options)


class CyclicTables(TablesPart[CyclicResult]):
    """CyclicJudge's tables: the per-system decomposition, the strategies' variances, the judge offsets."""

    tables = (
        Table("cyclic_systems", {"system_id": pl.String, "sigma2_scenario": pl.Float64,
                                 "sigma2_generation": pl.Float64, "sigma2_judge": pl.Float64,
                                 "sigma2_residual": pl.Float64, "f_statistic": pl.Float64,
                                 "p_value": pl.Float64}, "per-system decomposition and F-test"),
        Table("cyclic_strategies", {"system_id": pl.String, "budget": pl.Int64, "strategy": pl.String,
                                    "variance": pl.Float64}, "Var(X-bar) of strategies A, B, C"),
        Table("judge_offsets", {"system_id": pl.String, "judge_id": pl.String, "offset": pl.Float64},
              "judge mean minus panel mean per system"),
    )

    def tabulate(self, result: CyclicResult) -> dict[str, list[dict[str, Any]]]:
        per_system = result.report.get("systems", {})
        return {
            "cyclic_systems": [
                {"system_id": system, **{k: r[k] for k in CYCLIC_COMPONENTS}}
                for system, r in per_system.items()
            ],
            "cyclic_strategies": [
                {"system_id": system, "budget": int(b), "strategy": s, "variance": float(v)}
                for system, r in per_system.items()
                for s, variances in (("A", r["strategies"]["var_a"]), ("B", r["strategies"]["var_b"]),
                                     ("C", r["strategies"]["var_c"]))
                for b, v in zip(r["strategies"]["budgets"], variances, strict=True)
            ],
            "judge_offsets": [
                {"system_id": system, "judge_id": judge, "offset": offset}
                for system, offsets in result.report.get("judge_system_offsets", {}).items()
                for judge, offset in offsets.items()
            ],
        }


class CyclicHeadline(TypedDict):
    """CyclicJudge's entry in the run summary: exactly the keys of :attr:`CyclicSummary.headline`."""

    generations: int
    strongest_offset: float | None


class CyclicSummary(SummaryPart[CyclicResult]):
    """CyclicJudge's report (the statistics' own, as built), headline numbers and sentence."""

    headline = (
        Headline("generations", "generations", "count"),
        Headline("strongest_offset", "largest |judge offset| (points)", doc="the largest judge mean minus panel mean on one system, in score points (CyclicJudge, per system)"),
    )
    # The run history follows nothing of CyclicJudge: no published column has an interval
    # (judge_offsets are per system, without one), so no change could be judged against it.
    tracked = ()

    def report(self, result: CyclicResult) -> dict[str, Any]:
        return dict(result.report)

    def summarize(self, result: CyclicResult) -> CyclicHeadline:
        offsets = [abs(float(v)) for row in result.report["judge_system_offsets"].values() for v in row.values()]
        return {"generations": result.generations, "strongest_offset": max(offsets) if offsets else None}

    def sentence(self, part: Mapping[str, Any], context: HeadlineContext) -> str | None:
        """The largest judge offset on one system (CyclicJudge's offsets are per system)."""
        if part.get("strongest_offset") is None:
            return None
        return f"largest judge offset on one system {part['strongest_offset']:.2f} points"


class CyclicSection(SectionPart):
    """CyclicJudge's section of a fit's page (:mod:`jurymeter.analyses.cyclic.section`, imported when drawn)."""

    figure_modules = ("jurymeter.stats.cyclic.fit", "jurymeter.analyses.cyclic.section")

    def section(self, page: SectionBuilder) -> None:
        from jurymeter.analyses.cyclic.section import cyclic_section

        cyclic_section(page)


class CyclicAnalysis(CyclicFit, CyclicTables, CyclicSummary, CyclicSection, Analysis[CyclicResult, CyclicOptions]):
    """CyclicJudge ([Zhu2026] sections 3-4, eq. 20-25, appendices F and G)."""

    name = "cyclic"
    title = "CyclicJudge"
    order = 20
    options_type = CyclicOptions

    # Its command, as data (imported by the CLI only): jurymeter.analyses.cyclic.command.
    command = "jurymeter.analyses.cyclic.command:COMMAND"


CYCLIC = CyclicAnalysis()
