"""From pointwise records to the dense balanced array a G-study needs.

Rule for the largest balanced block (documented in ``docs/gstudy.md``):

1. Generations: by default the scores of a (system, item, judge, replicate) are
   averaged over the generations present (``generations="average"``); with
   ``"facet"`` the generation becomes a facet nested in system x item and only
   generations present in every kept cell are used.
2. A (system, item, judge) cell is present when it has at least one score.
   While any cell is missing, drop the one level (a system, an item or a judge)
   with the most missing cells among the levels still kept; ties go to the level
   with the larger share of its cells missing, then to systems before items
   before judges, then to the larger id. Nothing is filled in.
3. Replicates: keep the first ``k`` replicates (by replicate index) of every
   cell, ``k`` the smallest replicate count among the kept cells. With ``k = 1``
   the replicate facet is dropped from the design (its variance is then part of
   the residual).

Everything dropped is reported. Grouping and counting are polars group-bys; the
pruning loop works on a dense presence array with numpy sums.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

import numpy as np
import polars as pl

from jurymeter.design import Design
from jurymeter.errors import DesignError

GenerationMode = Literal["average", "facet"]


@dataclass(frozen=True)
class BalancedBlock:
    """A complete block of scores and what was left out to get it.

    ``x`` has axes (system, item, judge[, replicate]) for ``generations="average"``
    and (system, item, judge, generation[, replicate]) for ``"facet"``, matching
    :attr:`design`.
    """

    x: np.ndarray
    design: Design
    systems: tuple[str, ...]
    items: tuple[str, ...]
    judges: tuple[str, ...]
    n_replicates: int
    n_generations: int
    completeness: float
    records_in: int
    observations_used: int
    dropped_systems: tuple[str, ...] = ()
    dropped_items: tuple[str, ...] = ()
    dropped_judges: tuple[str, ...] = ()
    notes: tuple[str, ...] = field(default_factory=tuple)

    def summary(self) -> dict[str, object]:
        return {
            "systems": len(self.systems),
            "items": len(self.items),
            "judges": len(self.judges),
            "replicates": self.n_replicates,
            "generations": self.n_generations,
            "completeness": self.completeness,
            "records_in": self.records_in,
            "observations_used": self.observations_used,
            "dropped_systems": list(self.dropped_systems),
            "dropped_items": list(self.dropped_items),
            "dropped_judges": list(self.dropped_judges),
            "notes": list(self.notes),
        }


def _codes(frame: pl.DataFrame, column: str) -> tuple[np.ndarray, list[str]]:
    levels = frame.get_column(column).unique().sort()
    codes = frame.get_column(column).cast(pl.Enum(levels.to_list())).to_physical().to_numpy()
    return codes.astype(np.int64), levels.to_list()


# The dense path allocates one float per (system, item, judge, replicate level);
# beyond this many per input record the sparse polars path is used instead.
DENSE_CELLS_PER_RECORD = 4


def _average_block_dense(lazy: pl.LazyFrame) -> BalancedBlock | None:
    """Rules 1-3 with generations averaged, by integer codes and ``np.bincount``.

    Equal to the polars path (tested), ~5x faster on complete data: no group-by
    over string keys and no per-cell ranking. Returns ``None`` when the dense
    array would be too sparse to be worth it.
    """
    levels = pl.collect_all(
        [lazy.select(pl.col(c).unique().sort()) for c in ("system_id", "item_id", "judge_id", "replicate")]
    )
    systems, items, judges = (frame.to_series().to_list() for frame in levels[:3])
    replicates = levels[3].to_series().drop_nulls().to_numpy()
    shape = (len(systems), len(items), len(judges), len(replicates))
    _, n_i, n_j, n_r = shape
    size = int(np.prod(shape))
    # One flat cell index per record, computed by polars in parallel.
    r_code = pl.col("replicate").replace_strict(
        {int(v): k for k, v in enumerate(replicates)}, return_dtype=pl.Int64
    )
    flat_key = (
        (
            pl.col("system_id").cast(pl.Enum(systems)).to_physical().cast(pl.Int64) * n_i
            + pl.col("item_id").cast(pl.Enum(items)).to_physical().cast(pl.Int64)
        )
        * n_j
        + pl.col("judge_id").cast(pl.Enum(judges)).to_physical().cast(pl.Int64)
    ) * n_r + r_code
    codes = lazy.select(flat_key.alias("flat"), pl.col("score")).collect()
    n = codes.height
    if not n:
        msg = "no pointwise records to fit"
        raise DesignError(msg)
    if size > DENSE_CELLS_PER_RECORD * n + 1_000_000:
        return None
    flat = codes["flat"].to_numpy()
    counts = np.bincount(flat, minlength=size).reshape(shape)
    sums = np.bincount(flat, weights=codes["score"].to_numpy(), minlength=size).reshape(shape)
    has = counts > 0
    present = has.any(axis=3)
    completeness = float(present.mean())
    keep, dropped = _prune(present, (systems, items, judges))
    if not all(mask.all() for mask in keep):
        pick = np.ix_(*keep, np.ones(shape[3], dtype=bool))
        has, sums, counts = has[pick], sums[pick], counts[pick]
    means = sums / np.maximum(counts, 1)
    # Rule 3: the first k replicate levels present in each cell, k the smallest count.
    per_cell = has.sum(axis=3)
    k = int(per_cell.min())
    if k == has.shape[3]:
        x = means  # every cell has every replicate level: nothing to select
    else:
        rank = np.cumsum(has, axis=3) - 1
        take = has & (rank < k)
        x = np.empty((*has.shape[:3], k))
        index = np.nonzero(take)
        x[(*index[:3], rank[take])] = means[take]
    notes: list[str] = []
    spec = "s x i x j"
    if k > 1:
        spec += " x r:sij"
    else:
        x = x[..., 0]
        notes.append("one replicate per cell: the replicate facet is confounded with the residual")
    kept = [np.flatnonzero(mask) for mask in keep]
    return BalancedBlock(
        x=x,
        design=Design.parse(spec),
        systems=tuple(systems[i] for i in kept[0]),
        items=tuple(items[i] for i in kept[1]),
        judges=tuple(judges[i] for i in kept[2]),
        n_replicates=k,
        n_generations=1,
        completeness=completeness,
        records_in=n,
        observations_used=int(x.size),
        dropped_systems=tuple(dropped[0]),
        dropped_items=tuple(dropped[1]),
        dropped_judges=tuple(dropped[2]),
        notes=tuple(notes),
    )


def _prune(
    present: np.ndarray, names: tuple[list[str], list[str], list[str]]
) -> tuple[list[np.ndarray], list[list[str]]]:
    """The module's rule 2 on a (system, item, judge) presence array: which levels stay."""
    keep = [np.ones(n, dtype=bool) for n in present.shape]
    dropped: list[list[str]] = [[], [], []]
    while True:
        sub = present[np.ix_(*keep)]
        if sub.size == 0:
            msg = "no balanced block: every system, item or judge level was dropped"
            raise DesignError(msg)
        missing = [(~sub).sum(axis=tuple(a for a in range(3) if a != axis)) for axis in range(3)]
        if not any(m.any() for m in missing):
            break
        best_rank: tuple[int, float, int, str] | None = None
        chosen = (0, 0)
        for axis in range(3):
            kept_idx = np.flatnonzero(keep[axis])
            per_level = sub.size / sub.shape[axis]
            for pos in np.flatnonzero(missing[axis] == missing[axis].max()):
                level = int(kept_idx[pos])
                rank = (
                    int(missing[axis][pos]),
                    float(missing[axis][pos] / per_level),
                    -axis,
                    names[axis][level],
                )
                if best_rank is None or rank > best_rank:
                    best_rank, chosen = rank, (axis, level)
        axis, level = chosen
        keep[axis][level] = False
        dropped[axis].append(names[axis][level])

    return keep, dropped


def balanced_block(
    records: pl.DataFrame | pl.LazyFrame,
    *,
    generations: GenerationMode = "average",
) -> BalancedBlock:
    """Extract the largest balanced block by the module's rule.

    Parameters
    ----------
    records
        Pointwise records with ``system_id``, ``item_id``, ``judge_id``,
        ``generation``, ``replicate`` and ``score`` (one item set).
    generations
        Average generations (default) or keep them as a nested facet.
    """
    lazy = records.lazy() if isinstance(records, pl.DataFrame) else records
    needed = ["system_id", "item_id", "judge_id", "generation", "replicate", "score"]
    keys = ["system_id", "item_id", "judge_id"]
    if generations == "average":
        fast = _average_block_dense(lazy)
        if fast is not None:
            return fast
    if generations == "average":
        cells = (
            lazy.select(needed)
            .group_by([*keys, "replicate"])
            .agg(pl.col("score").mean(), pl.len().alias("__n"))
            .collect()
        )
        records_in = int(cells["__n"].sum()) if cells.height else 0
        n_generations = 1
    elif generations == "facet":
        cells = lazy.select(needed).collect()
        records_in = cells.height
        n_generations = 0
    else:
        msg = f"generations must be 'average' or 'facet', got {generations!r}"
        raise DesignError(msg)
    if not cells.height:
        msg = "no pointwise records to fit"
        raise DesignError(msg)

    s_code, systems = _codes(cells, "system_id")
    i_code, items = _codes(cells, "item_id")
    j_code, judges = _codes(cells, "judge_id")
    present = np.zeros((len(systems), len(items), len(judges)), dtype=bool)
    present[s_code, i_code, j_code] = True
    completeness = float(present.mean())
    keep, dropped = _prune(present, (systems, items, judges))
    names = (systems, items, judges)
    kept_s, kept_i, kept_j = (np.flatnonzero(k) for k in keep)
    remap = [np.full(len(n), -1, dtype=np.int64) for n in names]
    for axis, kept in enumerate((kept_s, kept_i, kept_j)):
        remap[axis][kept] = np.arange(len(kept))
    s_new, i_new, j_new = remap[0][s_code], remap[1][i_code], remap[2][j_code]
    inside = (s_new >= 0) & (i_new >= 0) & (j_new >= 0)
    if not inside.all():
        cells = cells.filter(pl.Series(inside))
        s_new, i_new, j_new = s_new[inside], i_new[inside], j_new[inside]
    cells = cells.with_columns(pl.Series("__s", s_new), pl.Series("__i", i_new), pl.Series("__j", j_new))
    notes: list[str] = []
    group = ["__s", "__i", "__j"]
    if generations == "facet":
        # Generations judged by every kept judge, indexed within (system, item).
        complete = (
            cells.group_by(["__s", "__i", "generation"])
            .agg(pl.col("__j").n_unique().alias("__nj"))
            .filter(pl.col("__nj") == len(kept_j))
            .with_columns(
                (pl.col("generation").rank("ordinal").over(["__s", "__i"]).cast(pl.Int64) - 1).alias("__g")
            )
        )
        per_pair = complete.group_by(["__s", "__i"]).agg(pl.len().alias("g"))
        n_pairs = len(kept_s) * len(kept_i)
        n_generations = int(per_pair["g"].min()) if per_pair.height == n_pairs else 0
        if n_generations < 1:
            msg = "generations='facet': some system-item pair has no generation seen by every judge"
            raise DesignError(msg)
        cells = cells.join(
            complete.select("__s", "__i", "generation", "__g"), on=["__s", "__i", "generation"]
        ).filter(pl.col("__g") < n_generations)
        group = [*group, "__g"]
    n_cells = int(np.prod([len(kept_s), len(kept_i), len(kept_j)])) * (
        n_generations if generations == "facet" else 1
    )
    replicate = cells["replicate"]
    k = cells.height // n_cells if n_cells else 0
    if k >= 1 and cells.height == n_cells * k and replicate.min() == 0 and replicate.max() == k - 1:
        # Keys are unique per cell, so k distinct indices in [0, k) per cell are
        # exactly 0..k-1: the index already is the rank (the common, complete case).
        cells = cells.with_columns(pl.col("replicate").alias("__r"))
        n_replicates = k
    else:
        cells = cells.with_columns(
            (pl.col("replicate").rank("ordinal").over(group).cast(pl.Int64) - 1).alias("__r")
        )
        n_replicates = int(cells.group_by(group).agg(pl.len().alias("n"))["n"].min())
    cells = cells.filter(pl.col("__r") < n_replicates)
    if n_replicates == 1:
        notes.append("one replicate per cell: the replicate facet is confounded with the residual")
    shape = [len(kept_s), len(kept_i), len(kept_j)]
    index = [cells["__s"].to_numpy(), cells["__i"].to_numpy(), cells["__j"].to_numpy()]
    spec = "s x i x j"
    if generations == "facet":
        if n_generations < 2:
            notes.append("fewer than two generations in some cell: the generation facet is dropped")
        else:
            shape.append(n_generations)
            index.append(cells["__g"].to_numpy())
            spec += " x g:si"
    if n_replicates > 1:
        shape.append(n_replicates)
        index.append(cells["__r"].to_numpy())
        spec += " x r:" + ("sijg" if spec.endswith("g:si") else "sij")
    x = np.full(shape, np.nan)
    x[tuple(index)] = cells["score"].to_numpy()
    if np.isnan(x).any():  # pragma: no cover - the rule above guarantees completeness
        msg = "internal error: the balanced block has holes"
        raise AssertionError(msg)
    return BalancedBlock(
        x=x,
        design=Design.parse(spec),
        systems=tuple(systems[k] for k in kept_s),
        items=tuple(items[k] for k in kept_i),
        judges=tuple(judges[k] for k in kept_j),
        n_replicates=n_replicates,
        n_generations=n_generations if generations == "facet" else 1,
        completeness=completeness,
        records_in=records_in,
        observations_used=int(x.size),
        dropped_systems=tuple(dropped[0]),
        dropped_items=tuple(dropped[1]),
        dropped_judges=tuple(dropped[2]),
        notes=tuple(notes),
    )
