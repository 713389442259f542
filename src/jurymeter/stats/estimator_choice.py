"""Which estimator a G-study fit takes: the balanced block or Henderson's Method I on every record.

The rule (``docs/gstudy.md``, "Estimators"; ``[fit.gstudy] estimator``):

- ``"balanced"``: the largest balanced block, always (its error is the fit's);
- ``"henderson"``: Henderson I on every record, always;
- ``"auto"`` (default): the balanced block when it holds every record (complete
  data: both estimators agree, and the block's report has the dense checks),
  Henderson I on every record otherwise; when every record does not identify
  the design, the balanced block after all, and when neither fits, one error
  naming both reasons.

The analysis (:mod:`jurymeter.analyses.gstudy`) wires this to its fit's
records and one-scan sums; the report says which was taken and why
(``estimator``, ``estimator_note``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import polars as pl

from jurymeter.errors import DesignError
from jurymeter.stats.blocks import BalancedBlock, BlockLayout, CellSums, FitChunks, balanced_block
from jurymeter.stats.gstudy_report import with_estimator
from jurymeter.stats.henderson_cells import block_dropped, cells_from_sums
from jurymeter.stats.reliability import (
    GStudyChunks,
    GStudyRequest,
    estimator,
    generation_mode,
    henderson_cells,
    henderson_intervals,
    henderson_report,
    interval_method,
    restrict,
)

COMPLETE_NOTE = "auto: the data are complete, so the balanced block holds every record"


def gstudy_request(
    item_set: str,
    *,
    judges: tuple[str, ...] | None,
    systems: tuple[str, ...] | None,
    generations: str,
    n_boot: int,
    seed: int,
    target: float,
    interval: str,
    screen_threshold: float,
    estimator_name: str,
    henderson_interval_name: str,
    fixed: tuple[str, ...] = (),
    judge_pool: int = 0,
    item_pool: int = 0,
) -> GStudyRequest:
    """The statistics' request for one fit, from a fit's settings and the G-study's options (validated)."""
    return GStudyRequest(
        item_set=item_set,
        judges=judges,
        systems=systems,
        generations=generation_mode(generations),
        n_boot=n_boot,
        seed=seed,
        target=target,
        interval_method=interval_method(interval),
        screen_threshold=screen_threshold,
        estimator=estimator(estimator_name),
        henderson_intervals=henderson_intervals(henderson_interval_name),
        fixed=fixed,
        judge_pool=judge_pool,
        item_pool=item_pool,
    )


def block_holds_every_record(layout: BlockLayout | None, no_block: str | None) -> bool:
    """Whether the block uses every observation the records make, so it holds every record.

    Every (system, item, judge) cell present is not enough: uneven replicate
    counts leave the repeats out of the block (issue 22).
    """
    return (layout is not None and no_block is None and layout.observations_in is not None
            and layout.observations_used == layout.observations_in
            and not (layout.dropped_systems or layout.dropped_items or layout.dropped_judges))


def open_block(
    request: GStudyRequest, chunked: FitChunks | None, population: pl.DataFrame | None
) -> tuple[BlockLayout | None, str | None, GStudyChunks | None]:
    """The fit's balanced block before its chunks are read: its layout, why there is none, and its sink.

    With ``estimator="balanced"`` a block that cannot be had or fitted is the
    fit's error; otherwise its reason is kept (``no_block``) and the Henderson
    path fits every record. No sink with ``estimator="henderson"``.

    Parameters
    ----------
    request : GStudyRequest
        The fit's request.
    chunked : FitChunks or None
        The fit's one-scan reader (``None``: the records are read by the report).
    population : polars.DataFrame or None
        The systems table (the nested split), or ``None``.

    Raises
    ------
    DesignError
        ``estimator="balanced"`` and the block cannot be had or fitted.
    """
    layout: BlockLayout | None = None
    no_block: str | None = None
    if chunked is not None:
        try:
            layout = chunked.layout(request.generations)
        except DesignError as error:
            if request.estimator == "balanced":
                raise
            no_block = str(error)
    sink = None
    if layout is not None and request.estimator != "henderson":
        try:
            sink = GStudyChunks(layout, request, systems=population)
        except DesignError as error:  # the block cannot be fitted (one system left): every record may be
            if request.estimator == "balanced":
                raise
            no_block = str(error)
    return layout, no_block, sink


class EstimatorChoice:
    """One fit's estimator choice and its report (module docstring's rule).

    ``layout``: the balanced block's layout from the one scan (``None`` when
    there was none or it failed: ``no_block`` says why); ``sums``: the one
    scan's cell sums (Henderson's cells without a second scan), released once
    read.
    """

    def __init__(
        self,
        request: GStudyRequest,
        records: pl.LazyFrame,
        *,
        layout: BlockLayout | None,
        no_block: str | None,
        sums: CellSums | None,
    ) -> None:
        self.request, self.records = request, records
        self.layout, self.no_block, self.sums = layout, no_block, sums

    def report(self, balanced: Callable[[BalancedBlock | None], dict[str, Any]]) -> dict[str, Any]:
        """The report; ``balanced(block)`` is the balanced block's report (``None``: the fit's own block)."""
        request, layout = self.request, self.layout
        if request.estimator == "balanced":
            return with_estimator(balanced(None), "balanced")
        if request.estimator == "auto" and block_holds_every_record(layout, self.no_block):
            # Complete: no pass over the records for Henderson's cells (10M records: 1.5 s).
            return with_estimator(balanced(None), "balanced", COMPLETE_NOTE)
        table = cells_from_sums(self.sums, request.generations) if self.sums is not None else None
        self.sums = None  # read: its memory may go
        cells = table if table is not None else henderson_cells(self.records, request)
        why, block = self.no_block, None
        if layout is None and why is None:
            try:
                block = balanced_block(restrict(self.records, request), generations=request.generations)
                layout = block.layout
            except DesignError as error:
                why = str(error)
        if request.estimator == "auto" and layout is not None and why is None and not block_dropped(layout, cells):
            # complete: the balanced block is every record (and equal to Henderson's)
            return with_estimator(balanced(block), "balanced", COMPLETE_NOTE)
        if request.estimator == "henderson":
            return henderson_report(cells, request, layout=layout, balanced=why)
        try:
            return henderson_report(cells, request, layout=layout, balanced=why)
        except DesignError as error:
            if why is not None:  # auto without a balanced block: both reasons
                msg = f"{why}; and every record (estimator 'henderson') cannot be fitted either: {error}"
                raise DesignError(msg) from error
            # auto: every record does not identify the design; the block may
            note = f"auto: every record cannot be fitted by Henderson I ({error}); the balanced block"
            return with_estimator(balanced(block), "balanced", note)
