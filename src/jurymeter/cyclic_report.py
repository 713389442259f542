"""One item set's CyclicJudge report: records -> balanced (system, scenario, generation, judge) cube -> fits.

Glue between the store's records and :mod:`jurymeter.cyclic`: the balanced
block comes from :func:`jurymeter.blocks.balanced_block` with generations as a
facet (the same pruning rule as the G-study), replicates of a judge call are
averaged (the paper's model has one score per scenario, generation and judge),
and each system is fitted on its own (paper ``cyclicjudge`` section 3).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import polars as pl

from jurymeter.blocks import BalancedBlock, balanced_block
from jurymeter.cyclic import fit_cyclic, judge_system_offsets
from jurymeter.errors import DesignError


def cyclic_cube(
    records: pl.LazyFrame | pl.DataFrame, block: BalancedBlock | None = None
) -> tuple[np.ndarray, dict[str, Any], tuple[str, ...], tuple[str, ...]]:
    """Scores ``x[system, scenario, generation, judge]`` of the largest balanced block.

    Returns the cube, the block summary, and the system and judge ids.
    ``block``: the records' generation-facet block, if already made
    (:func:`jurymeter.blocks.fit_blocks`); else it is extracted here.
    """
    if block is None:
        lazy = records.lazy() if isinstance(records, pl.DataFrame) else records
        block = balanced_block(lazy, generations="facet")
    if "g" not in block.design.facets:
        msg = (
            "CyclicJudge needs at least two generations per scenario seen by every judge; "
            f"this item set has {block.n_generations}"
        )
        raise DesignError(msg)
    x = block.x
    if "r" in block.design.facets:
        x = x.mean(axis=block.design.facets.index("r"))
    # Block axes are (s, i, j, g); the cyclic model wants (s, i, g, j).
    cube = np.moveaxis(x, 2, 3)
    return cube, block.summary(), block.systems, block.judges


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

    ``block``: the records' generation-facet block, if already made.
    """
    cube, summary, system_ids, judge_ids = cyclic_cube(records, block)
    del block  # the cube holds what the fits need: without this, x with its replicates stays alive
    per_system = {
        sid: fit_cyclic(
            cube[k], judges=judge_ids, budgets=budgets, at_generations=at_generations, at_judges=at_judges
        ).to_json()
        for k, sid in enumerate(system_ids)
    }
    offsets = judge_system_offsets(
        cube,
        systems=system_ids,
        judges=judge_ids,
        judge_family=_family(judges, "judge_id"),
        system_family=_family(systems, "system_id"),
    ).to_json()
    return {
        "block": summary,
        "systems": per_system,
        "judge_system_offsets": offsets["judge_offsets"],
        "system_means": offsets["system_means"],
        "self_preference": offsets["self_preference"],
    }


def _family(table: pl.DataFrame | None, key: str) -> dict[str, str] | None:
    if table is None or not table.height or "family" not in table.columns:
        return None
    rows = table.filter(pl.col("family").is_not_null()).select(key, "family").unique(key, keep="first")
    return dict(zip(rows[key].to_list(), rows["family"].to_list(), strict=True)) or None
