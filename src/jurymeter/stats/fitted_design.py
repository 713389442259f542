"""The design a G-study fits, read from the data: a facet with one level leaves it.

The rule (``docs/gstudy.md``, "Designs read from the data"; issue 14, point 1)
for a balanced block (:func:`fitted_design`) and for the cells Henderson I
fits on every record (:func:`henderson_design`), and the design's text as the
report writes it (:func:`design_text`).
"""

from __future__ import annotations

from dataclasses import dataclass

import polars as pl

from jurymeter.errors import DesignError
from jurymeter.stats.blocks import BlockLayout, GenerationMode
from jurymeter.stats.design import Design
from jurymeter.stats.dstudy import PAPER_ROLES
from jurymeter.stats.henderson_cells import Cells, FrameCells


@dataclass(frozen=True, slots=True)
class FittedDesign:
    """The design a block is fitted with: the block's, less every facet with one level.

    ``squeeze`` holds the block array's axes that leave (each of length one),
    ``fixed`` the facets fixed for the study with their one level
    (``{"j": "gpt-4"}``), ``notes`` why, in words (the report's ``design_notes``).
    """

    design: Design
    squeeze: tuple[int, ...]
    fixed: dict[str, str]
    notes: tuple[str, ...]

    @property
    def judge_fixed(self) -> bool:
        return PAPER_ROLES.judge_fixed(self.design)


def fitted_design(layout: BlockLayout) -> FittedDesign:
    r"""The design read from a block: a facet with one level leaves it (issue 14, point 1).

    Rule (``docs/gstudy.md``, "Designs read from the data"): the systems are the
    object of measurement and the items the facet every D-study sizes, so a
    block needs at least two of each; a judge, generation or replicate facet
    with one level leaves the design, its letter removed from every nesting
    (``s x i x j x r:sij`` with one judge is ``s x i x r:si``;
    ``s x i x j x g:si x r:sijg`` is ``s x i x g:si x r:sig``). With one judge
    the judge is fixed: its interaction with the systems is part of
    :math:`\sigma^2_s` and every D-study quantity is for that judge.

    Raises
    ------
    DesignError
        Fewer than two systems or two items in the block; the message says
        which and what the user can do.
    """
    design = layout.design
    for facet, kept, dropped, name in (
        (PAPER_ROLES.system, layout.systems, layout.dropped_systems, "system"),
        (PAPER_ROLES.item, layout.items, layout.dropped_items, "item"),
    ):
        if facet in design.facets and len(kept) < 2:
            left = f" ({len(dropped)} dropped to balance the block)" if dropped else ""
            msg = (
                f"the balanced block has {len(kept)} {name}(s) {list(kept)}{left}; a G-study of systems needs "
                f"at least 2 {name}s judged by the same judges: add records of another {name} to the item set, "
                "or restrict the judges (a universe in the config, --universe) to those that judged several"
            )
            raise DesignError(msg)
    counts = {
        PAPER_ROLES.judge: len(layout.judges),
        PAPER_ROLES.generation: layout.n_generations,
        PAPER_ROLES.replicate: layout.n_replicates,
    }
    gone = [f for f in design.facets if counts.get(f, 2) < 2]
    fixed: dict[str, str] = {}
    notes: list[str] = []
    if PAPER_ROLES.judge in gone:
        judge = layout.judges[0]
        fixed[PAPER_ROLES.judge] = judge
        left = (
            f" ({len(layout.dropped_judges)} other judge(s) dropped to balance the block: "
            f"{', '.join(layout.dropped_judges)})" if layout.dropped_judges else ""
        )
        notes.append(
            f"one judge ({judge}) in the block{left}: the judge facet is fixed; E rho^2, MDD and items-needed "
            "are for that judge, and the ceiling, judges-needed, the budget split over judges and the "
            "ensembles are not estimable"
        )
    for facet in gone:
        if facet != PAPER_ROLES.judge:  # the block rule drops these itself; a layout that kept one says so
            notes.append(f"one level of facet {facet!r} in the block: the facet leaves the design")
    if not gone:
        return FittedDesign(design, (), {}, ())
    parts = []
    for f in design.facets:
        if f in gone:
            continue
        nest = "".join(g for g in design.facets if g in design.nests[f] and g not in gone)
        parts.append(f"{f}:{nest}" if nest else f)
    squeeze = tuple(design.facets.index(f) for f in gone)
    return FittedDesign(Design.parse(" x ".join(parts)), squeeze, fixed, tuple(notes))



def henderson_design(cells: pl.DataFrame | Cells, generations: GenerationMode) -> FittedDesign:
    """The design read from the cells Henderson I fits (the rule of :func:`fitted_design`, on every record).

    Systems and items are always facets (at least two of each, else
    :class:`DesignError`); the judge is a facet when there are two or more
    judges (else it is fixed, as with one judge in a block); with generations
    as a facet, ``g:si`` when some (system, item) has two or more generations;
    the replicate ``r`` (nested in every other facet) when some cell has two or more.
    """
    cells = FrameCells(cells) if isinstance(cells, pl.DataFrame) else cells
    counts = {c: cells.distinct(c) for c in ("system_id", "item_id", "judge_id")}
    for column, name in (("system_id", "system"), ("item_id", "item")):
        if counts[column] < 2:
            msg = (
                f"the records have {counts[column]} {name}(s); a G-study of systems needs at least 2 {name}s: "
                f"add records of another {name} to the item set"
            )
            raise DesignError(msg)
    facets = ["s", "i"]
    notes: list[str] = []
    fixed: dict[str, str] = {}
    if counts["judge_id"] >= 2:
        facets.append("j")
    else:
        judge = cells.first_level("judge_id")
        fixed["j"] = judge
        notes.append(
            f"one judge ({judge}) in the records: the judge facet is fixed; E rho^2, MDD and items-needed "
            "are for that judge, and the ceiling, judges-needed, the budget split over judges and the "
            "ensembles are not estimable"
        )
    inner = ["system_id", "item_id", "judge_id"]
    if generations == "facet":
        most = cells.max_distinct("generation", ["system_id", "item_id"])
        if most >= 2:
            facets.append("g")
            inner.append("generation")
        else:
            notes.append("one generation per system and item: the generation facet leaves the design")
    replicates = cells.max_rows(inner)
    if replicates >= 2:
        facets.append("r")
    else:
        notes.append("one replicate per cell: the replicate facet is confounded with the residual")
    nests = {"g": "si", "r": "".join(f for f in facets if f != "r")}
    spec = " x ".join(f"{f}:{nests[f]}" if f in nests else f for f in facets)
    return FittedDesign(Design.parse(spec), (), fixed, tuple(n for n in notes if "judge" in n))



def design_text(design: Design) -> str:
    """The design as the report writes it (``s x i x j x r:sij``)."""
    parts = []
    for f in design.facets:
        nest = "".join(g for g in design.facets if g in design.nests[f])
        parts.append(f"{f}:{nest}" if nest else f)
    return " x ".join(parts)
