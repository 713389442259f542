"""The CyclicJudge analysis: per-system judge offsets, F-test, allocation-strategy variances.

Runs where the fit's data have two or more generations and a crossed panel: the
panel is the generation-facet block's judges, and each system is decomposed on
its own complete block (:func:`jurymeter.cyclic.fit.system_blocks`), so a
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
from typing import TYPE_CHECKING, Any

import polars as pl

from jurymeter.analyses.base import (
    Analysis,
    FitScope,
    FitSettings,
    Headline,
    HeadlineContext,
    Table,
)
from jurymeter.errors import JurymeterError, NotApplicableError

if TYPE_CHECKING:
    import numpy as np

    from jurymeter.render.html import SectionBuilder
    from jurymeter.stats.blocks import BlockLayout, FitChunks, GenerationMode

CYCLIC_COMPONENTS = ("sigma2_scenario", "sigma2_generation", "sigma2_judge", "sigma2_residual",
                     "f_statistic", "p_value")


@dataclass(frozen=True, slots=True)
class CyclicOptions:
    """CyclicJudge's own options (``[fit.cyclic]``; the ``cyclic`` command's flags).

    ``budgets``: per-scenario judge-call budgets (``None``: the paper's
    default multiples of K); ``at_generations``/``at_judges``: the operating point.
    """

    budgets: tuple[int, ...] | None = None
    at_generations: int = 1
    at_judges: int = 1


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
    report: Mapping[str, Any] = field(repr=False)


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
        from jurymeter.cyclic.fit import cyclic_report

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
            report=report,
        )


def _ignore(x: np.ndarray) -> None:
    """A chunk of the facet block, read only so that a speculative layout meets its holes."""


class CyclicAnalysis(Analysis[CyclicResult, CyclicOptions]):
    """CyclicJudge ([Zhu2026] sections 3-4, eq. 20-25, appendices F and G)."""

    name = "cyclic"
    title = "CyclicJudge"
    protocols = ("pointwise",)
    order = 20
    options_type = CyclicOptions
    figure_modules = ("jurymeter.cyclic.fit", "jurymeter.analyses.cyclic.section")
    compute_modules = ("jurymeter.cyclic.fit",)
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
    headline = (
        Headline("generations", "generations", "count"),
        Headline("strongest_offset", "largest |judge offset| (points)", doc="the largest judge mean minus panel mean on one system, in score points (CyclicJudge, per system)"),
    )
    # The run history follows nothing of CyclicJudge: no published column has an interval
    # (judge_offsets are per system, without one), so no change could be judged against it.
    tracked = ()

    def modes(self, settings: FitSettings, options: CyclicOptions) -> tuple[GenerationMode, ...]:
        return ("facet",)

    def start(self, scope: FitScope, chunked: FitChunks | None, options: CyclicOptions) -> _CyclicFitting:
        return _CyclicFitting(scope, chunked, options)

    def report(self, result: CyclicResult) -> dict[str, Any]:
        return dict(result.report)

    def summarize(self, result: CyclicResult) -> dict[str, Any]:
        offsets = [abs(float(v)) for row in result.report["judge_system_offsets"].values() for v in row.values()]
        return {"generations": result.generations, "strongest_offset": max(offsets) if offsets else None}

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
                for s in ("A", "B", "C")
                for b, v in zip(r["strategies"]["budgets"], r["strategies"][f"var_{s.lower()}"], strict=True)
            ],
            "judge_offsets": [
                {"system_id": system, "judge_id": judge, "offset": offset}
                for system, offsets in result.report.get("judge_system_offsets", {}).items()
                for judge, offset in offsets.items()
            ],
        }

    def section(self, page: SectionBuilder) -> None:
        from jurymeter.analyses.cyclic.section import cyclic_section

        cyclic_section(page)

    def sentence(self, part: Mapping[str, Any], context: HeadlineContext) -> str | None:
        """The largest judge offset on one system (CyclicJudge's offsets are per system)."""
        if part.get("strongest_offset") is None:
            return None
        return f"largest judge offset on one system {part['strongest_offset']:.2f} points"

    # Its command, as data (imported by the CLI only): jurymeter.analyses.cyclic.command.
    command = "jurymeter.analyses.cyclic.command:COMMAND"


CYCLIC = CyclicAnalysis()
