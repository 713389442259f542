"""One item set's CyclicJudge report: records -> each system's own complete (scenario, generation, judge) block -> fits.

Glue between the store's records and :mod:`jurymeter.stats.cyclic`. The judge panel
is the generation-facet balanced block's (:func:`jurymeter.stats.blocks.balanced_block`,
the G-study's pruning rule), so every system is judged by the same panel and the
judge x system offsets compare like with like. Each system then gets its own
block (:func:`system_blocks`, issue 14 point 4): the scenarios on which every
panel judge scored at least ``m`` of that system's generations, ``m`` chosen per
system, so a system with more generations is not cut to the smallest count of
any system. Replicates of a judge call are averaged (the paper's model has one
score per scenario, generation and judge), and each system is fitted on its own
(paper ``cyclicjudge`` section 3).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import polars as pl

from jurymeter.errors import NotApplicableError
from jurymeter.stats.blocks import BalancedBlock, BlockLayout, balanced_block
from jurymeter.stats.cyclic.components import VarianceComponents
from jurymeter.stats.cyclic.decomposition import fit_cyclic_sums
from jurymeter.stats.cyclic.offsets import offsets_from_judge_means
from jurymeter.stats.cyclic.sums import CyclicSums


@dataclass(frozen=True, slots=True)
class SystemBlock:
    """One system's complete ``x[scenario, generation, judge]`` block and what it left out.

    ``items``: the scenarios kept (sorted); ``x`` has shape
    ``(len(items), n_generations, len(judges))``, the generations of a scenario
    being its first ``n_generations`` complete ones in label order.
    ``scenarios_left_out``: the system's scenarios with fewer complete
    generations; ``records_in`` / ``records_used``: the system's records of the
    panel's judges, and those averaged into ``x``.
    """

    system_id: str
    items: tuple[str, ...]
    judges: tuple[str, ...]
    n_generations: int
    x: np.ndarray
    scenarios_left_out: int
    records_in: int
    records_used: int

    def summary(self) -> dict[str, Any]:
        return {
            "scenarios": len(self.items), "generations": self.n_generations, "judges": len(self.judges),
            "scenarios_left_out": self.scenarios_left_out, "records_in": self.records_in,
            "records_used": self.records_used,
        }


@dataclass(frozen=True, slots=True)
class SystemBlocks:
    """Every system's own block (:func:`system_blocks`), and why the others have none."""

    blocks: dict[str, SystemBlock]
    skipped: dict[str, str]


def _generation_count(m_per_item: np.ndarray) -> int:
    """The rule's ``m``: the count >= 2 with the most observations ``n(m) m`` (ties: more generations), else 0.

    ``n(m)`` is the number of scenarios with at least ``m`` complete generations;
    a block needs ``n(m) >= 2``.
    """
    best, best_worth = 0, 0
    for m in range(2, int(m_per_item.max(initial=0)) + 1):
        n = int(np.count_nonzero(m_per_item >= m))
        if n >= 2 and n * m >= best_worth:
            best, best_worth = m, n * m
    return best


def system_blocks(
    records: pl.LazyFrame | pl.DataFrame, *, judges: Sequence[str], systems: Sequence[str] | None = None
) -> SystemBlocks:
    r"""Each system's own complete (scenario, generation, judge) block on the panel ``judges``.

    Parameters
    ----------
    records : polars.LazyFrame or polars.DataFrame
        Pointwise records (``system_id, item_id, judge_id, generation, score``;
        replicates of a call are averaged).
    judges : sequence of str
        The panel: a generation is complete when every one of them scored it.
    systems : sequence of str, optional
        The systems to block (default: every system in the records).

    Returns
    -------
    SystemBlocks
        Per system its block; a system with no block of at least 2 scenarios
        and 2 generations is in ``skipped`` with the reason.

    Notes
    -----
    Rule (``docs/cyclic.md``, "From the store"): for system :math:`\theta` and
    scenario :math:`i`, :math:`m_i` is the number of generations every panel
    judge scored. The block takes
    :math:`m = \arg\max_{m \ge 2,\ n(m) \ge 2} n(m)\,m` with
    :math:`n(m) = \#\{i : m_i \ge m\}` (ties to the larger :math:`m`), the
    scenarios with :math:`m_i \ge m` and of each its first :math:`m` complete
    generations by label: the design of [Zhu2026] section 3.1 for that system
    alone.
    """
    panel = [str(j) for j in judges]
    cells, complete, per_item = _panel_cells(records, panel, systems)
    records_in = dict(cells.group_by("system_id").agg(pl.col("__n").sum()).iter_rows())
    names = sorted(cells["system_id"].unique().to_list()) if systems is None else [str(s) for s in systems]
    # One partition per system (not a filter of every cell per system).
    cells_of = {key[0]: part for key, part in cells.partition_by("system_id", as_dict=True).items()}
    complete_of = {key[0]: part for key, part in complete.partition_by("system_id", as_dict=True).items()}
    counts_of = {key[0]: part for key, part in per_item.partition_by("system_id", as_dict=True).items()}
    blocks: dict[str, SystemBlock] = {}
    skipped: dict[str, str] = {}
    for sid in names:
        counts = counts_of.get(sid, per_item.clear())
        own_cells = cells_of.get(sid, cells.clear())
        m = _generation_count(counts["__m"].to_numpy())
        if m < 2:
            most = int(counts["__m"].max() or 0) if counts.height else 0  # type: ignore[arg-type]  # a count column's max is an int
            skipped[sid] = (
                f"no block of at least 2 scenarios x 2 generations scored by every judge of the panel "
                f"{panel}: {own_cells['item_id'].n_unique()} scenario(s), at most {most} complete generation(s) on one"
            )
            continue
        blocks[sid] = _system_block(sid, panel, m, own_cells, complete_of[sid], counts,
                                    records_in=int(records_in.get(sid, 0)))
    return SystemBlocks(blocks=blocks, skipped=skipped)


def _panel_cells(
    records: pl.LazyFrame | pl.DataFrame, panel: list[str], systems: Sequence[str] | None
) -> tuple[pl.DataFrame, pl.DataFrame, pl.DataFrame]:
    """The panel's cells (replicates averaged, ``__n`` records each), the complete generations, their count per scenario.

    ``complete``: the (system, scenario, generation) every panel judge scored,
    ``__g`` their rank by label within the scenario; ``per_item``: ``__m``, the
    complete generations of each (system, scenario).
    """
    lazy = records.lazy() if isinstance(records, pl.DataFrame) else records
    lazy = lazy.filter(pl.col("score").is_not_null() & pl.col("judge_id").cast(pl.String).is_in(panel))
    if systems is not None:
        lazy = lazy.filter(pl.col("system_id").cast(pl.String).is_in([str(s) for s in systems]))
    cells = (
        lazy.group_by("system_id", "item_id", "generation", "judge_id")
        .agg(pl.col("score").cast(pl.Float64).mean(), pl.len().alias("__n"))
        .collect(engine="streaming")
        .with_columns(pl.col("system_id").cast(pl.String), pl.col("item_id").cast(pl.String),
                      pl.col("judge_id").cast(pl.String))
    )
    complete = (
        cells.group_by("system_id", "item_id", "generation").agg(pl.len().alias("__k"))
        .filter(pl.col("__k") == len(panel))
        .with_columns((pl.col("generation").rank("ordinal").over("system_id", "item_id") - 1).alias("__g"))
    )
    per_item = complete.group_by("system_id", "item_id").agg(pl.len().alias("__m"))
    return cells, complete, per_item


def _system_block(
    sid: str,
    panel: list[str],
    m: int,
    own_cells: pl.DataFrame,
    own_complete: pl.DataFrame,
    counts: pl.DataFrame,
    *,
    records_in: int,
) -> SystemBlock:
    """System ``sid``'s block: its scenarios with ``m`` complete generations, the first ``m`` of each by label."""
    kept = counts.filter(pl.col("__m") >= m).select("item_id")
    chosen = (
        own_complete.filter(pl.col("__g") < m)
        .join(kept, on="item_id")
        .select("item_id", "generation", "__g")
    )
    judge_order = {j: n for n, j in enumerate(panel)}
    picked = (
        own_cells.join(chosen, on=["item_id", "generation"])
        .with_columns(pl.col("judge_id").replace_strict(judge_order, return_dtype=pl.Int64).alias("__j"))
        .sort("item_id", "__g", "__j")
    )
    items = tuple(kept["item_id"].sort().to_list())
    x = picked["score"].to_numpy().reshape(len(items), m, len(panel))
    return SystemBlock(
        system_id=sid, items=items, judges=tuple(panel), n_generations=m, x=x,
        scenarios_left_out=own_cells["item_id"].n_unique() - len(items), records_in=records_in,
        records_used=int(picked["__n"].sum()),
    )


def cyclic_report(
    records: pl.LazyFrame | pl.DataFrame,
    *,
    systems: pl.DataFrame | None = None,
    judges: pl.DataFrame | None = None,
    budgets: Sequence[int] | None = None,
    at_generations: int = 1,
    at_judges: int = 1,
    block: BalancedBlock | BlockLayout | None = None,
) -> dict[str, Any]:
    """Per-system decompositions, the judge x system offsets and self-preference, as JSON-ready data.

    ``block``: the records' generation-facet block (or its layout), if already
    made; its judges are the panel of every system's own block
    (:func:`system_blocks`).

    Raises
    ------
    NotApplicableError
        No system has a block of at least 2 scenarios x 2 generations x 2 judges.
    """
    lazy = records.lazy() if isinstance(records, pl.DataFrame) else records
    layout = (balanced_block(lazy, generations="facet") if block is None else block).layout
    if len(layout.judges) < 2:
        msg = f"the balanced block has {len(layout.judges)} judge(s) {list(layout.judges)}; CyclicJudge needs >= 2"
        raise NotApplicableError(msg)
    found = system_blocks(lazy, judges=layout.judges)
    if not found.blocks:
        reasons = "; ".join(f"{sid}: {why}" for sid, why in found.skipped.items())
        msg = f"needs at least two generations per scenario seen by every judge, in some system ({reasons})"
        raise NotApplicableError(msg)
    per_system: dict[str, Any] = {}
    means = []
    for sid, own in found.blocks.items():
        sums = CyclicSums().add(own.x)
        per_system[sid] = fit_cyclic_sums(
            sums, judges=own.judges, budgets=budgets, at_generations=at_generations, at_judges=at_judges
        ).to_json()
        means.append(sums.judge_means())
    fitted = tuple(found.blocks)
    offsets = offsets_from_judge_means(
        np.stack(means),
        systems=fitted,
        judges=layout.judges,
        judge_family=_family(judges, "judge_id"),
        system_family=_family(systems, "system_id"),
    ).to_json()
    return {
        "block": layout.summary(),
        "system_blocks": {sid: own.summary() for sid, own in found.blocks.items()},
        "skipped_systems": dict(found.skipped),
        "systems": per_system,
        "judge_system_offsets": offsets["judge_offsets"],
        "system_means": offsets["system_means"],
        "self_preference": offsets["self_preference"],
    }


def mean_components(report: Mapping[str, Any]) -> VarianceComponents:
    """The variance components of a :func:`cyclic_report`, averaged over its decomposed systems (each weighs one).

    A planner's components when none are given (``jurymeter plan --item-set``):
    :func:`jurymeter.stats.cyclic.planner.plan_cost_weighted` sizes one plan for every system.
    """
    systems = report["systems"]
    names = ("sigma2_scenario", "sigma2_generation", "sigma2_judge", "sigma2_residual")
    return VarianceComponents(*(sum(r[n] for r in systems.values()) / len(systems) for n in names))


def _family(table: pl.DataFrame | None, key: str) -> dict[str, str] | None:
    if table is None or not table.height or "family" not in table.columns:
        return None
    rows = table.filter(pl.col("family").is_not_null()).select(key, "family").unique(key, keep="first")
    return dict(zip(rows[key].to_list(), rows["family"].to_list(), strict=True)) or None
