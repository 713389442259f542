"""One item set's CyclicJudge report: records -> balanced (system, scenario, generation, judge) cube -> fits.

Glue between the store's records and :mod:`jurymeter.cyclic`: the balanced
block comes from :func:`jurymeter.stats.blocks.balanced_block` with generations as a
facet (the same pruning rule as the G-study), replicates of a judge call are
averaged (the paper's model has one score per scenario, generation and judge),
and each system is fitted on its own (paper ``cyclicjudge`` section 3).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import polars as pl

from jurymeter.cyclic.decomposition import fit_cyclic_sums
from jurymeter.cyclic.offsets import offsets_from_judge_means
from jurymeter.cyclic.sums import CyclicSums
from jurymeter.errors import DesignError
from jurymeter.stats.blocks import BalancedBlock, BlockLayout, balanced_block


def _check_generations(layout: BlockLayout) -> None:
    if "g" not in layout.design.facets:
        msg = (
            "CyclicJudge needs at least two generations per scenario seen by every judge; "
            f"this item set has {layout.n_generations}"
        )
        raise DesignError(msg)


def _cube(x: np.ndarray, layout: BlockLayout) -> np.ndarray:
    """A block's (chunk's) scores as ``x[system, scenario, generation, judge]``, replicates averaged."""
    if "r" in layout.design.facets:
        x = x.mean(axis=layout.design.facets.index("r"))
    # Block axes are (s, i, j, g); the cyclic model wants (s, i, g, j).
    return np.moveaxis(x, 2, 3)


class CyclicChunks:
    """What :func:`cyclic_report` reads from a generation-facet block, accumulated item chunk by item chunk.

    Each system's :class:`jurymeter.cyclic.CyclicSums` (mean squares, judge
    totals, pool sums: sums over scenarios), so the report needs memory of the
    order of systems x judges, however many items.
    """

    def __init__(self, layout: BlockLayout) -> None:
        _check_generations(layout)
        self.layout = layout
        self.sums = [CyclicSums() for _ in layout.systems]

    def add(self, x: np.ndarray) -> CyclicChunks:
        """Add the block's scores of some items (axes of its design: s, i, j, g[, r])."""
        cube = _cube(x, self.layout)
        for k, sums in enumerate(self.sums):
            sums.add(cube[k])
        return self

    def report(
        self,
        *,
        systems: pl.DataFrame | None = None,
        judges: pl.DataFrame | None = None,
        budgets: Sequence[int] | None = None,
        at_generations: int = 1,
        at_judges: int = 1,
    ) -> dict[str, Any]:
        """What :func:`cyclic_report` returns."""
        system_ids, judge_ids = self.layout.systems, self.layout.judges
        per_system = {
            sid: fit_cyclic_sums(
                sums, judges=judge_ids, budgets=budgets, at_generations=at_generations, at_judges=at_judges
            ).to_json()
            for sid, sums in zip(system_ids, self.sums, strict=True)
        }
        offsets = offsets_from_judge_means(
            np.stack([sums.judge_means() for sums in self.sums]),
            systems=system_ids,
            judges=judge_ids,
            judge_family=_family(judges, "judge_id"),
            system_family=_family(systems, "system_id"),
        ).to_json()
        return {
            "block": self.layout.summary(),
            "systems": per_system,
            "judge_system_offsets": offsets["judge_offsets"],
            "system_means": offsets["system_means"],
            "self_preference": offsets["self_preference"],
        }


def cyclic_report(
    records: pl.LazyFrame | pl.DataFrame,
    *,
    systems: pl.DataFrame | None = None,
    judges: pl.DataFrame | None = None,
    budgets: Sequence[int] | None = None,
    at_generations: int = 1,
    at_judges: int = 1,
    block: BalancedBlock | None = None,
) -> dict[str, Any]:
    """Per-system decompositions, the judge x system offsets and self-preference, as JSON-ready data.

    ``block``: the records' generation-facet block, if already made. The block
    is one chunk of :class:`CyclicChunks`.
    """
    if block is None:
        lazy = records.lazy() if isinstance(records, pl.DataFrame) else records
        block = balanced_block(lazy, generations="facet")
    chunks = CyclicChunks(block.layout).add(block.x)
    del block  # the sums hold what the fits need
    return chunks.report(
        systems=systems, judges=judges, budgets=budgets, at_generations=at_generations, at_judges=at_judges
    )


def _family(table: pl.DataFrame | None, key: str) -> dict[str, str] | None:
    if table is None or not table.height or "family" not in table.columns:
        return None
    rows = table.filter(pl.col("family").is_not_null()).select(key, "family").unique(key, keep="first")
    return dict(zip(rows[key].to_list(), rows["family"].to_list(), strict=True)) or None
