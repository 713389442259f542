"""From pointwise records to the dense balanced array a G-study needs.

Rule for the largest balanced block (documented in ``docs/gstudy.md``):

1. Generations: by default the scores of a (system, item, judge, replicate) are
   averaged over the generations present (``generations="average"``); with
   ``"facet"`` the generation becomes a facet nested in system x item and only
   generations present in every kept cell are used.
2. A (system, item, judge) cell is present when it has at least one score.
   The block keeps some systems and judges and, of the items, every item
   complete over them (the most items any block on them can have: items are
   dropped before systems, as a system is a leaderboard row and an item one of
   hundreds). Which systems and judges: never none of either (the only level of
   a facet is never dropped); among the blocks holding at least half the
   observations of the largest block, the one with the most systems; then the
   most observations; then the most judges. Found by a search, not over every
   subset: greedy paths that drop one system or judge at a time (each to the
   block worth most), then flips of one or two systems or judges in or out
   while that is worth more (:func:`_prune`). Nothing is filled in.
   Worst case: by design the block may hold as little as half the observations
   of the largest one, to keep systems; the search may miss the best block, and
   then the largest block too (it measures "largest" on what it finds). Against
   every subset of tiny presence arrays (``tests/test_blocks.py``, up to
   4 x 5 x 4) it found the best block every time; on larger ones (up to
   4 x 7 x 4, 20-50% of cells missing) it missed 5 of 600, at worst 0.44 of the
   best block's observations and 1/3 of the largest's.
3. Replicates: keep the first ``k`` replicates (by replicate index) of every
   cell, ``k`` the smallest replicate count among the kept cells. With ``k = 1``
   the replicate facet is dropped from the design (its variance is then part of
   the residual).

Everything dropped is reported. Both generation modes first sum and count the
scores per cell in dense numpy arrays, streaming the records through polars in
batches, so memory is bounded by the cells, not by the records. The rules are
decided on a dense presence array (one byte a cell) with numpy sums
(:func:`fit_chunks`, both modes at once); the blocks' arrays then come item
chunk by item chunk, from one scan when a fit has at most :data:`CHUNK_CELLS`
cells and one scan per chunk otherwise, so a caller that sums the chunks (the
nightly fit) never holds a whole block; :func:`fit_blocks` and
:func:`balanced_block` join them. With several chunks and at least as many
records as cells, the blocks are first decided as if every cell held a record
(no presence scan), each chunk's counts confirm it as the chunk is read, and
the first chunk with a hole has the blocks decided on the real presence
(:class:`BlocksChanged`: the consumer starts over); the blocks are the same. Where the arrays would be too sparse (or keys
repeat in facet mode, or there are nulls), a polars group-by path over the
collected records runs instead; it is the reference the dense paths are tested
against.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field, fields
from typing import Any, Literal, TypeVar

import numpy as np
import polars as pl

from jurymeter.errors import DesignError
from jurymeter.stats.design import Design

GenerationMode = Literal["average", "facet"]
T = TypeVar("T")


@dataclass(frozen=True)
class BlockLayout:
    """What a balanced block is, without its scores: its design, the kept ids and what was left out.

    What a consumer of a block's item chunks needs before the first chunk
    (:class:`FitChunks`); a :class:`BalancedBlock` is a layout with its array.
    """

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
    # The observations every record makes (present (system, item, judge[, generation],
    # replicate) cells: what an every-record fit holds), ``None`` where not counted.
    # The block holds every record only when it uses all of them: every (system,
    # item, judge) cell present (``completeness``) is not enough with uneven replicates.
    observations_in: int | None = None

    @property
    def layout(self) -> BlockLayout:
        """The layout alone (a :class:`BalancedBlock` without its array)."""
        names = [f.name for f in fields(BlockLayout)]
        return BlockLayout(**{name: getattr(self, name) for name in names})

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


@dataclass(frozen=True)
class BalancedBlock(BlockLayout):
    """A complete block of scores and what was left out to get it.

    ``x`` has axes (system, item, judge[, replicate]) for ``generations="average"``
    and (system, item, judge, generation[, replicate]) for ``"facet"``, matching
    :attr:`design`.
    """

    x: np.ndarray = field(kw_only=True)


def _codes(frame: pl.DataFrame, column: str) -> tuple[np.ndarray, list[str]]:
    levels = frame.get_column(column).unique().sort()
    codes = frame.get_column(column).cast(pl.Enum(levels.to_list())).to_physical().to_numpy()
    return codes.astype(np.int64), levels.to_list()


# The dense paths allocate one float per (system, item, judge[, generation], replicate
# level); beyond this many per input record the polars path is used instead.
DENSE_CELLS_PER_RECORD = 4
# ``LazyFrame.collect_batches`` (recent polars; marked unstable there) streams the
# records through numpy in batches; without it the cells are summed by a streaming
# polars group-by, which holds a hash table of the cells (about 2-3x more memory).
_STREAM_BATCHES = hasattr(pl.LazyFrame, "collect_batches")


@dataclass(frozen=True)
class CellSums:
    """Score sums and record counts per cell of the full cross of the levels present.

    Made by :func:`_sum_cells` for a range of items (all of them, or one chunk).
    """

    levels: list[list[object]]  # sorted levels of each key column
    sums: np.ndarray  # float64, one axis per key column
    counts: np.ndarray  # int32, same shape
    records: int
    keys: tuple[str, ...] = ()  # the key columns, one per axis


def _level_index(column: str, levels: list[Any]) -> pl.Expr:
    """Each value's position in the sorted ``levels`` (every value is among them).

    Only element-wise expressions, so the streaming engine keeps to one batch at a
    time (``replace_strict`` would materialise the column).
    """
    if isinstance(levels[0], str):
        return pl.col(column).cast(pl.Enum(levels)).to_physical().cast(pl.Int64)
    first, last = int(levels[0]), int(levels[-1])
    if last - first + 1 == len(levels):
        return pl.col(column).cast(pl.Int64) - first
    return pl.col(column).cast(pl.String).cast(pl.Enum([str(v) for v in levels])).to_physical().cast(pl.Int64)


def _cell_levels(lazy: pl.LazyFrame, keys: tuple[str, ...]) -> tuple[list[list[Any]], int] | None:
    """The sorted levels of every key column and the record count, by streaming queries.

    Returns ``None`` (the caller falls back to the polars path) for what the
    dense paths do not cover: a missing column, id columns that are not text,
    generation or replicate columns that are not integers, nulls in a key or a
    score, and cells too sparse to be worth a dense array.
    """
    schema = lazy.collect_schema()
    if any(c not in schema for c in (*keys, "score")):
        return None  # the polars path raises polars' own error
    if any(schema[c] != pl.String for c in keys[:3]) or any(not schema[c].is_integer() for c in keys[3:]):
        return None
    # One query per column: run together (``collect_all``, or one select) they
    # peaked at 3x the memory on a store's scan (0.67 against 0.20 GB, 7.5M records).
    # The last (an integer column) is a group-by that also counts the records and
    # the null scores: one scan less than a query of its own.
    level_frames = [lazy.select(pl.col(c).unique().sort()).collect(engine="streaming") for c in keys[:-1]]
    last = keys[-1]
    counted = (
        lazy.group_by(last)
        .agg(pl.len().alias("n"), pl.col("score").null_count().alias("null_scores"))
        .sort(last)
        .collect(engine="streaming")
    )
    level_frames.append(counted.select(last))
    n = int(counted["n"].sum())
    if not n:
        msg = "no pointwise records to fit"
        raise DesignError(msg)
    if counted["null_scores"].sum() or any(frame.to_series().null_count() for frame in level_frames):
        return None
    levels = [frame.to_series().to_list() for frame in level_frames]
    if int(np.prod([len(v) for v in levels])) > DENSE_CELLS_PER_RECORD * n + 1_000_000:
        return None
    return levels, n


def _cell_index(keys: tuple[str, ...], levels: list[list[object]], items: tuple[int, int]) -> pl.Expr:
    """Each record's flat cell index among the items ``items[0] <= k < items[1]`` (axis 1)."""
    flat: pl.Expr | None = None
    for axis, (column, values) in enumerate(zip(keys, levels, strict=True)):
        index, size = _level_index(column, values), len(values)
        if axis == 1:
            index, size = index - items[0], items[1] - items[0]
        flat = index if flat is None else flat * size + index
    assert flat is not None
    return flat


def _chunk_records(
    lazy: pl.LazyFrame, keys: tuple[str, ...], levels: list[list[object]], items: tuple[int, int]
) -> pl.LazyFrame:
    """The records of the item range (all of them for every item)."""
    if items == (0, len(levels[1])):
        return lazy
    index = _level_index(keys[1], levels[1])
    return lazy.filter((index >= items[0]) & (index < items[1]))


def _sum_cells(
    lazy: pl.LazyFrame, keys: tuple[str, ...], levels: list[list[object]], records: int, items: tuple[int, int]
) -> CellSums:
    """Sum and count the scores per cell of the items ``items`` (one streaming pass).

    Memory is bounded by those items' cells, not by the records: one integer
    cell index per record, streamed in batches into dense sum and count arrays.
    """
    shape = (len(levels[0]), items[1] - items[0], *(len(v) for v in levels[2:]))
    size = int(np.prod(shape))
    frame = _chunk_records(lazy, keys, levels, items).select(
        _cell_index(keys, levels, items).alias("flat"), pl.col("score").cast(pl.Float64)
    )
    sums = np.zeros(size)
    counts = np.zeros(size, dtype=np.int32)
    if _STREAM_BATCHES:
        # Record order is kept so sums add up in the same order on every run, and
        # in every chunking of the items.
        for batch in frame.collect_batches(maintain_order=True, engine="streaming"):
            index = batch.get_column("flat").to_numpy()
            np.add.at(sums, index, batch.get_column("score").to_numpy())
            np.add.at(counts, index, np.int32(1))  # a typed scalar: numpy's fast path
    else:  # older polars (also tested)
        per_cell = frame.group_by("flat").agg(pl.col("score").sum(), pl.len()).collect(engine="streaming")
        index = per_cell.get_column("flat").to_numpy()
        sums[index] = per_cell.get_column("score").to_numpy()
        counts[index] = per_cell.get_column("len").to_numpy()
    chunk_levels = [levels[0], levels[1][items[0] : items[1]], *levels[2:]]
    return CellSums(levels=chunk_levels, sums=sums.reshape(shape), counts=counts.reshape(shape), records=records, keys=keys)


def _presence(
    lazy: pl.LazyFrame, keys: tuple[str, ...], levels: list[list[object]], chunks: list[tuple[int, int]]
) -> np.ndarray:
    """Which cells hold a record, one byte a cell; what the rules decide on.

    One streaming pass per chunk of items: polars' streaming engine holds about
    a batch of every key column per record it has read ahead, so one pass over
    all records peaked at +0.45 GB for 25M records against +0.12 GB in chunks
    of 2M cells, in about the same time (ad-hoc, ``bench/_work``).
    """
    shape = tuple(len(v) for v in levels)
    has = np.zeros(shape, dtype=bool)
    for items in chunks:
        frame = _chunk_records(lazy, keys, levels, items).select(_cell_index(keys, levels, items).alias("flat"))
        part = np.zeros((shape[0], items[1] - items[0], *shape[2:]), dtype=bool)
        flat = part.reshape(-1)  # a view: setting it sets ``part``
        if _STREAM_BATCHES:
            for batch in frame.collect_batches(engine="streaming"):
                flat[batch.get_column("flat").to_numpy()] = True
        else:  # older polars
            flat[frame.unique().collect(engine="streaming").get_column("flat").to_numpy()] = True
        has[:, items[0] : items[1]] = part
    return has


FACET_KEYS = ("system_id", "item_id", "judge_id", "generation", "replicate")
AVERAGE_KEYS = ("system_id", "item_id", "judge_id", "replicate")
# Cells read at a time by fit_chunks: sums and counts take 12 bytes a cell, and
# the chunk's block arrays and the fits' temporaries a few times that (about 0.1
# GB in all for this many). A fit with more cells is read item chunk by item
# chunk (a presence scan, then one scan per chunk) and its fits add up the
# chunks, so its peak does not grow with its records; one of fewer cells is read
# in one scan. Smaller chunks cost a scan of the fit's records each.
CHUNK_CELLS = 2_000_000


def averaged_cells(cells: CellSums) -> CellSums:
    """The (system, item, judge, replicate) cells of facet-keyed cells: sums and counts over generations."""
    if cells.keys == AVERAGE_KEYS:
        return cells
    systems, items, judges, _, replicates = cells.levels
    return CellSums(
        levels=[systems, items, judges, replicates],
        sums=cells.sums.sum(axis=3),
        counts=cells.counts.sum(axis=3, dtype=np.int32),
        records=cells.records,
        keys=AVERAGE_KEYS,
    )


@dataclass(frozen=True)
class _BlockPlan:
    """Rules 1-3 decided on the presence of every cell: what each item chunk keeps."""

    keep: list[np.ndarray]  # kept systems, items, judges
    dropped: list[list[str]]
    completeness: float
    n_replicates: int
    n_generations: int
    spec: str
    notes: tuple[str, ...]
    observations_in: int  # present cells of the mode's keys (BlockLayout.observations_in)

    def chunk_keep(self, items: tuple[int, int]) -> list[np.ndarray]:
        return [self.keep[0], self.keep[1][items[0] : items[1]], self.keep[2]]


def _pick(keep: list[np.ndarray], *arrays: np.ndarray) -> list[np.ndarray]:
    """The kept (system, item, judge) levels of arrays with those three leading axes."""
    if all(mask.all() for mask in keep):
        return list(arrays)
    rest = arrays[0].shape[3:]
    pick = np.ix_(*keep, *(np.ones(n, dtype=bool) for n in rest))
    return [a[pick] for a in arrays]


def _replicate_notes(n_replicates: int) -> list[str]:
    if n_replicates > 1:
        return []
    return ["one replicate per cell: the replicate facet is confounded with the residual"]


def _fewest_replicates(has: np.ndarray) -> int:
    """Rule 3's ``k``: the smallest count of present levels on the last axis.

    Counted in 16 bits where the levels allow: an int64 count per cell was the
    largest array of a plan (8 bytes a (system, item, judge, generation) cell,
    against the presence's 1 byte a cell).
    """
    if has.all():  # complete (speculative blocks): every count is the axis's length
        return int(has.shape[-1])
    dtype = np.uint16 if has.shape[-1] < 2**16 else np.int64
    return int(has.sum(axis=-1, dtype=dtype).min())


def _average_plan(has: np.ndarray, names: list[list[str]]) -> _BlockPlan:
    """Rules 2-3 with generations averaged, on (system, item, judge, replicate) presence."""
    present = np.any(has, axis=3)
    keep, dropped = _prune(present, tuple(names))
    (kept,) = _pick(keep, has)
    k = _fewest_replicates(kept)  # rule 3
    return _BlockPlan(
        keep=keep, dropped=dropped, completeness=float(present.mean()), n_replicates=k, n_generations=1,
        spec="s x i x j" + (" x r:sij" if k > 1 else ""), notes=tuple(_replicate_notes(k)),
        observations_in=int(np.count_nonzero(has)),
    )


def _average_x(cells: CellSums, plan: _BlockPlan, items: tuple[int, int]) -> np.ndarray:
    """The averaged block's scores of the items ``items``, from their (s, i, j, r) cells."""
    has, sums, counts = _pick(plan.chunk_keep(items), cells.counts > 0, cells.sums, cells.counts)
    means = sums / np.maximum(counts, 1)
    del sums, counts
    x = _first_replicates(means, has, plan.n_replicates)
    return x if plan.n_replicates > 1 else x[..., 0]


def _chosen_generations(complete: np.ndarray, n_generations: int) -> np.ndarray | None:
    """Rule 1: per (system, item), the positions of its first ``n_generations`` complete generations."""
    if n_generations == complete.shape[2]:
        return None
    chosen = complete & (np.cumsum(complete, axis=2) <= n_generations)
    position = np.nonzero(chosen)[2].reshape(*complete.shape[:2], n_generations)
    return position[:, :, None, :, None]


def _facet_plan(has: np.ndarray, names: list[list[str]]) -> _BlockPlan:
    """Rules 1-3 with generations as a facet, on (system, item, judge, generation, replicate) presence."""
    present = np.any(has, axis=(3, 4))
    observations_in = int(np.count_nonzero(has))
    keep, dropped = _prune(present, tuple(names))
    (has,) = _pick(keep, has)
    # Rule 1: generations judged by every kept judge, indexed within (system, item).
    complete = np.any(has, axis=4).all(axis=2)  # (system, item, generation)
    n_generations = int(complete.sum(axis=2).min())
    if n_generations < 1:
        raise DesignError(_no_common_generation([names[2][k] for k in np.flatnonzero(keep[2])]))
    position = _chosen_generations(complete, n_generations)
    if position is not None:
        has = np.take_along_axis(has, position, axis=3)
    k = _fewest_replicates(has)
    notes = _replicate_notes(k)
    spec = "s x i x j"
    if n_generations < 2:
        notes.append("fewer than two generations in some cell: the generation facet is dropped")
    else:
        spec += " x g:si"
    if k > 1:
        spec += " x r:" + ("sijg" if n_generations > 1 else "sij")
    return _BlockPlan(
        keep=keep, dropped=dropped, completeness=float(present.mean()), n_replicates=k,
        n_generations=n_generations, spec=spec, notes=tuple(notes), observations_in=observations_in,
    )


def _no_common_generation(judges: list[str]) -> str:
    """The facet rule's error: which facet lacks a level, and what a user can do."""
    return (
        "generations='facet': some system-item pair has no generation seen by every judge of the "
        f"block ({', '.join(judges)}), so the block has no level of the generation facet; average "
        "the generations instead (generations='average': the gstudy command's --generations average), "
        "or add records of one generation of each item scored by every one of these judges"
    )


def _facet_x(cells: CellSums, plan: _BlockPlan, items: tuple[int, int]) -> np.ndarray:
    """The generation-facet block's scores of the items ``items``, from their facet-keyed cells."""
    # One record per present cell (checked before planning): the sum is its score.
    has, x = _pick(plan.chunk_keep(items), cells.counts.astype(bool), cells.sums)
    position = _chosen_generations(np.any(has, axis=4).all(axis=2), plan.n_generations)
    if position is not None:
        has = np.take_along_axis(has, position, axis=3)
        x = np.take_along_axis(x, position, axis=3)
    x = _first_replicates(x, has, plan.n_replicates)
    if plan.n_replicates == 1:
        x = x[..., 0]
    if plan.n_generations < 2:
        x = x[:, :, :, 0]
    return x


def _first_replicates(values: np.ndarray, has: np.ndarray, k: int) -> np.ndarray:
    """Rule 3 on the last axis: the first ``k`` present levels of every cell."""
    if k == has.shape[-1]:
        return values  # every cell has every replicate level: nothing to select
    rank = np.cumsum(has, axis=-1, dtype=np.int32) - 1
    take = has & (rank < k)
    x = np.empty((*has.shape[:-1], k))
    index: tuple[np.ndarray, ...] = np.nonzero(take)
    x[(*index[:-1], rank[take])] = values[take]
    return x


def _layout(plan: _BlockPlan, levels: list[list[object]], records: int) -> BlockLayout:
    """The layout of a dense path's block: its design, the kept ids and what was dropped."""
    systems, items, judges = levels[:3]
    kept = [np.flatnonzero(mask) for mask in plan.keep]
    design = Design.parse(plan.spec)
    sizes = {"s": len(kept[0]), "i": len(kept[1]), "j": len(kept[2]), "g": plan.n_generations, "r": plan.n_replicates}
    return BlockLayout(
        design=design,
        systems=tuple(str(systems[i]) for i in kept[0]),
        items=tuple(str(items[i]) for i in kept[1]),
        judges=tuple(str(judges[i]) for i in kept[2]),
        n_replicates=plan.n_replicates,
        n_generations=plan.n_generations,
        completeness=plan.completeness,
        records_in=records,
        observations_used=int(np.prod([sizes[f] for f in design.facets])),
        dropped_systems=tuple(plan.dropped[0]),
        dropped_items=tuple(plan.dropped[1]),
        dropped_judges=tuple(plan.dropped[2]),
        notes=plan.notes,
        observations_in=plan.observations_in,
    )


def _or_raise(found: T | DesignError | None) -> T | None:
    """A mode's layout or block; the error its rule raised is raised here, where it is asked for."""
    if isinstance(found, DesignError):
        raise found
    return found


class BlocksChanged(Exception):
    """:meth:`FitChunks.parts` found a cell without a record while its blocks assumed none.

    The blocks were decided as if every cell held a record (checked chunk by
    chunk as the chunks are read); a chunk showed a hole, so the blocks were
    decided again on the presence of every cell (the layouts changed). Whatever
    was fed from the chunks so far is void: start again from the layouts.
    """


class FitChunks:
    """A fit's blocks by generation mode, as layouts and item chunks of their arrays.

    Made by :func:`fit_chunks`. ``layouts`` maps a mode to its block's layout,
    to the :class:`DesignError` its rule raised, or to ``None`` where the dense
    path does not apply. :meth:`parts` scans the records (once, or once per
    chunk of items) and yields each chunk's arrays; joined along the item axis
    they are the blocks' arrays.

    ``speculative``: the blocks were decided as if every cell held a record,
    without a presence scan (:func:`fit_chunks` does so when there are at least
    as many records as cells); :meth:`parts` checks each chunk's counts and, at
    the first hole, decides the blocks on the real presence and raises
    :class:`BlocksChanged`. A consumer then starts over from the new layouts.
    """

    def __init__(
        self,
        lazy: pl.LazyFrame,
        keys: tuple[str, ...],
        levels: list[list[object]],
        records: int,
        plans: dict[str, _BlockPlan | DesignError | None],
        chunks: list[tuple[int, int]],
        whole: CellSums | None,
        speculative: bool = False,
    ) -> None:
        self._lazy, self._keys, self._levels, self._records = lazy, keys, levels, records
        self._whole = whole  # the sums of every cell, when read in one scan
        self._first: CellSums | None = None  # the first chunk's, when read ahead (read_first)
        self.chunks = chunks
        self.speculative = speculative
        self._decide(plans)
        # Distinct generation values in the records, when counted (facet-keyed cells).
        self.generations = len(levels[3]) if keys == FACET_KEYS and plans and records else None

    def _decide(self, plans: dict[str, _BlockPlan | DesignError | None]) -> None:
        self._plans = plans
        self.layouts: dict[str, BlockLayout | DesignError | None] = {
            mode: _layout(plan, self._levels, self._records) if isinstance(plan, _BlockPlan) else plan
            for mode, plan in plans.items()
        }

    def cell_sums(self) -> CellSums | None:
        """The sums and counts of every cell when the records were read in one scan, else ``None``.

        A consumer that fits every record (Henderson I) reads its cells from
        these instead of scanning the records again; holding the result keeps
        its memory (12 bytes a cell) after :meth:`parts` has let it go.
        """
        return self._whole

    def layout(self, mode: GenerationMode) -> BlockLayout | None:
        """The mode's layout; raises its rule's error; ``None`` where the polars path must run."""
        return _or_raise(self.layouts.get(mode))

    def _settle(self, items: tuple[int, int], cells: CellSums) -> None:
        """The speculation failed at chunk ``items``: decide the blocks on the real presence."""
        shape = tuple(len(v) for v in self._levels)
        has = np.ones(shape, dtype=bool)  # the chunks before this one were complete
        has[:, items[0] : items[1]] = cells.counts > 0
        rest = [c for c in self.chunks if c[0] >= items[1]]
        if rest:
            has[:, rest[0][0] :] = _presence(self._lazy, self._keys, self._levels, rest)[:, rest[0][0] :]
        self.speculative = False
        self._decide(_plans(has, list(self._plans), self._levels, self._keys, self._records))

    def read_first(self) -> None:
        """Sum the first chunk's cells now (:meth:`parts` yields them first; a no-op once read).

        :func:`jurymeter.pipeline.fit.run_fit` reads it before any analysis
        starts (while the analyses' modules are imported), so that a hole in
        the first chunk of speculative blocks has the blocks decided again
        before anything is fed (the sums stay: they do not depend on the blocks).
        """
        if self._whole is not None or self._first is not None or not self.chunks:
            return
        if not any(isinstance(p, _BlockPlan) for p in self._plans.values()):
            return
        items = self.chunks[0]
        self._first = _sum_cells(self._lazy, self._keys, self._levels, self._records, items)
        if self.speculative and not self._first.counts.all():
            self._settle(items, self._first)

    def _cells(self, items: tuple[int, int]) -> CellSums:
        """The sums and counts of the chunk ``items``: cut from the one scan's, read ahead, or a scan."""
        whole = self._whole
        if whole is not None:
            if items == (0, len(self._levels[1])):
                return whole
            lo, hi = items
            sums, counts = whole.sums[:, lo:hi], whole.counts[:, lo:hi]
            if whole.keys != AVERAGE_KEYS:
                # Laid out as a chunk's own scan lays them out: the facet block can be
                # the sums themselves, and a reduction's order follows the layout.
                # (The averaged block's arrays are computed element by element.)
                sums, counts = np.ascontiguousarray(sums), np.ascontiguousarray(counts)
            return CellSums(
                levels=[whole.levels[0], whole.levels[1][lo:hi], *whole.levels[2:]],
                sums=sums, counts=counts, records=whole.records, keys=whole.keys,
            )
        if self._first is not None and items == self.chunks[0]:
            first, self._first = self._first, None
            return first
        return _sum_cells(self._lazy, self._keys, self._levels, self._records, items)

    def parts(self) -> Iterator[tuple[tuple[int, int], dict[str, np.ndarray]]]:
        """Each chunk's kept-item offset range in the blocks and its arrays, by mode, in item order.

        Raises :class:`BlocksChanged` when speculative blocks meet a cell with
        no record (the layouts are then decided again; call again to read them).
        """
        modes = {m: p for m, p in self._plans.items() if isinstance(p, _BlockPlan)}
        for k, items in enumerate(self.chunks):
            cells = self._cells(items)
            if k == len(self.chunks) - 1:
                self._whole = None  # read once: its memory goes with the last chunk
            if self.speculative and not cells.counts.all():
                self._settle(items, cells)
                raise BlocksChanged
            arrays = {}
            for mode, plan in modes.items():
                arrays[mode] = (
                    _average_x(averaged_cells(cells), plan, items) if mode == "average" else _facet_x(cells, plan, items)
                )
            del cells
            first = next(iter(modes.values()), None)
            start = int(first.keep[1][: items[0]].sum()) if first is not None else 0
            count = int(first.keep[1][items[0] : items[1]].sum()) if first is not None else 0
            yield (start, start + count), arrays


@dataclass(frozen=True)
class FitBlocks:
    """The dense blocks of one fit by generation mode (:func:`fit_blocks`).

    A mode maps to its block, to the :class:`DesignError` its rule raised, or to
    ``None`` where the dense path does not apply (:func:`balanced_block`'s polars
    path then decides). ``generations`` is the number of distinct generation
    values in the records, when they were counted (facet-keyed cells), else ``None``.
    """

    blocks: dict[str, BalancedBlock | DesignError | None]
    generations: int | None = None
    chunks: int = 1

    def block(self, mode: GenerationMode) -> BalancedBlock | None:
        """The mode's block; raises its rule's error; ``None`` where the polars path must run."""
        return _or_raise(self.blocks.get(mode))


def fit_chunks(
    records: pl.LazyFrame | pl.DataFrame,
    modes: tuple[GenerationMode, ...] = ("average",),
    *,
    chunk_cells: int | None = None,
    scan_cells: int | None = None,
    speculate: bool = True,
) -> FitChunks:
    """Decide the blocks of ``modes`` (module rules 1-3); their arrays come chunk by chunk.

    The rules are decided on the presence of every cell (one byte a cell); the
    scores are then summed for at most ``chunk_cells`` cells (default
    :data:`CHUNK_CELLS`) at a time, items in sorted order. With one chunk the
    records are scanned once for the presence and the sums together, as they
    are when a caller allows ``scan_cells`` cells and records in one scan (the
    chunks are then cut from the sums of every cell, the same arrays; the
    CLI's commands do, :data:`jurymeter.pipeline.fit.COMMAND_SCAN_CELLS`): one
    scan of many records costs more memory than a scan per chunk, as polars'
    streaming engine reads ahead of the numpy sums (+0.3 GB for 10M records),
    and less time (0.36 against 0.55 s, five chunks). With more chunks and at
    least as many records as cells, ``speculate`` skips the
    presence scan: the blocks are decided as if every cell held a record, and
    :meth:`FitChunks.parts` raises :class:`BlocksChanged` (having decided them
    on the real presence) at the first chunk with a hole. The blocks and their
    arrays are the same either way.
    """
    lazy = records.lazy() if isinstance(records, pl.DataFrame) else records
    keys = FACET_KEYS if "facet" in modes else AVERAGE_KEYS
    found = _cell_levels(lazy, keys)
    if found is None:
        return FitChunks(lazy, keys, [[], [], [], []], 0, dict.fromkeys(modes), [], None)
    levels, n = found
    n_items = len(levels[1])
    cells = int(np.prod([len(v) for v in levels]))
    per_item = cells // n_items
    chunk_budget = CHUNK_CELLS if chunk_cells is None else chunk_cells
    step = max(1, chunk_budget // per_item)
    chunks = [(lo, min(lo + step, n_items)) for lo in range(0, n_items, step)]
    one_scan = len(chunks) == 1 or (scan_cells is not None and max(cells, n) <= scan_cells)
    whole = _sum_cells(lazy, keys, levels, n, (0, n_items)) if one_scan else None
    # With at least as many records as cells, every cell may hold one: decide the
    # blocks as if so and let the chunks' counts confirm it (no presence scan).
    speculative = whole is None and n >= cells and speculate
    if whole is not None:
        has = whole.counts > 0
    elif speculative:
        has = np.broadcast_to(np.True_, tuple(len(v) for v in levels))
    else:
        has = _presence(lazy, keys, levels, chunks)
    return FitChunks(lazy, keys, levels, n, _plans(has, modes, levels, keys, n), chunks, whole, speculative)


def _plans(
    has: np.ndarray, modes: tuple[GenerationMode, ...] | list[str], levels: list[list[Any]],
    keys: tuple[str, ...], n: int,
) -> dict[str, _BlockPlan | DesignError | None]:
    """Each mode's rules 1-3 decided on the presence ``has`` of every cell (facet-keyed or not)."""
    names = levels[:3]
    plans: dict[str, _BlockPlan | DesignError | None] = {}
    for mode in modes:
        try:
            if mode == "average":
                plans[mode] = _average_plan(np.any(has, axis=3) if keys == FACET_KEYS else has, names)
            elif int(has.sum()) == n:  # one record per cell; repeats: the polars path ranks them
                plans[mode] = _facet_plan(has, names)
            else:
                plans[mode] = None
        except DesignError as exc:
            plans[mode] = exc
    return plans


def fit_blocks(
    records: pl.LazyFrame | pl.DataFrame,
    modes: tuple[GenerationMode, ...] = ("average",),
    *,
    chunk_cells: int | None = None,
    scan_cells: int | None = None,
) -> FitBlocks:
    """The blocks of ``modes`` (module rules 1-3) from one scan of the records, or one per item chunk.

    :func:`fit_chunks` with each block's array filled chunk by chunk in place
    (joining the chunks' arrays at the end would hold every block twice).
    Equal to :func:`balanced_block` of each mode (tested), in every chunking.
    """
    chunked = fit_chunks(records, modes, chunk_cells=chunk_cells, scan_cells=scan_cells)
    while True:
        arrays: dict[str, np.ndarray] = {}
        try:
            for (start, stop), parts in chunked.parts():
                for mode, part in parts.items():
                    if len(chunked.chunks) == 1:
                        arrays[mode] = part
                        continue
                    layout = chunked.layouts[mode]
                    assert isinstance(layout, BlockLayout)
                    if mode not in arrays:
                        arrays[mode] = np.empty((part.shape[0], len(layout.items), *part.shape[2:]))
                    arrays[mode][:, start:stop] = part
        except BlocksChanged:
            continue  # a hole: the blocks were decided again, read them afresh
        break
    blocks: dict[str, BalancedBlock | DesignError | None] = {}
    for mode, layout in chunked.layouts.items():
        if isinstance(layout, BlockLayout):
            blocks[mode] = BalancedBlock(**{f.name: getattr(layout, f.name) for f in fields(BlockLayout)}, x=arrays.pop(mode))
        else:
            blocks[mode] = layout
    return FitBlocks(blocks, generations=chunked.generations, chunks=len(chunked.chunks))


# balanced_block holds its whole block anyway, so it reads the records in one
# scan: item chunks would bound only the cells' sums, at a scan per chunk (the
# G-study benchmark's 10M-cell block would take 10 scans instead of 1).
_ONE_SCAN = 1 << 62


def _average_block_dense(lazy: pl.LazyFrame) -> BalancedBlock | None:
    """Rules 1-3 with generations averaged on dense per-cell sums; ``None`` where they do not apply."""
    return fit_blocks(lazy, ("average",), chunk_cells=_ONE_SCAN).block("average")


def _facet_block_dense(lazy: pl.LazyFrame) -> BalancedBlock | None:
    """Rules 1-3 with generations as a facet on dense per-cell sums; ``None`` where they do not apply
    (also when a cell holds more than one record: the polars path ranks repeated keys)."""
    return fit_blocks(lazy, ("facet",), chunk_cells=_ONE_SCAN).block("facet")


# A block of rule 2 is (kept systems, kept items, kept judges); the items of one
# are every item complete over its systems and judges (the most any block on them has).
_State = tuple[np.ndarray, np.ndarray, np.ndarray]


def _size(state: _State) -> tuple[int, int, int]:
    return int(state[0].sum()), int(state[1].sum()), int(state[2].sum())


def _path(present: np.ndarray, worth: Any, names: Sequence[list[str]]) -> list[_State]:
    """Rule 2's greedy search: drop one system or judge at a time, down to one of each.

    Each step drops the system or judge (never the last one of either) whose
    block is worth most (``worth(systems, items, judges)``), its items every item
    complete over the systems and judges kept; ties go to the candidate leaving
    fewer missing cells among the kept systems and judges (this steers the search
    while no item is complete), then to a judge before a system, then to the
    larger id. Returns every block on the way, the first with every level.

    Kept up to date by subtraction: the missing cells of every (system, item) over
    the kept judges and of every (judge, item) over the kept systems, so a step
    costs O((systems + judges) x items), not a pass over the presence array.
    """
    n_s, _, n_j = present.shape
    miss_si = n_j - present.sum(axis=2, dtype=np.int32)  # (system, item), over the kept judges
    miss_ji = n_s - present.sum(axis=0, dtype=np.int32).T  # (judge, item), over the kept systems
    total = miss_si.sum(axis=0)  # missing cells of every item among the kept systems and judges
    ks, kj = np.ones(n_s, dtype=bool), np.ones(n_j, dtype=bool)
    states: list[_State] = [(ks.copy(), total == 0, kj.copy())]
    while ks.sum() > 1 or kj.sum() > 1:
        ns, nj = int(ks.sum()), int(kj.sum())
        best: tuple[Any, ...] | None = None
        chosen = (0, 0)
        for axis, kept, miss in ((0, ks, miss_si), (2, kj, miss_ji)):
            if kept.sum() < 2:
                continue
            idx = np.flatnonzero(kept)
            rest = total[None, :] - miss[idx]  # each candidate's missing cells per item once dropped
            complete = (rest == 0).sum(axis=1)
            left = rest.sum(axis=1)
            for pos, at in enumerate(idx):
                sizes = (ns - 1, int(complete[pos]), nj) if axis == 0 else (ns, int(complete[pos]), nj - 1)
                rank = (worth(*sizes), -int(left[pos]), axis, names[axis][at])
                if best is None or rank > best:
                    best, chosen = rank, (axis, int(at))
        axis, level = chosen
        if axis == 0:
            ks[level] = False
            total -= miss_si[level]
            miss_ji -= (~present[level]).T
        else:
            kj[level] = False
            total -= miss_ji[level]
            miss_si -= ~present[:, :, level]
        states.append((ks.copy(), total == 0, kj.copy()))
    return states


def _size_of(state: _State) -> int:
    return int(np.prod(_size(state)))


# Pairs of flips (two systems or judges in or out of the block) are tried while
# their evaluations cost at most this many cell reads; beyond it, single flips.
SWAP_CELLS = 50_000_000


def _improve(present: np.ndarray, state: _State, worth: Any) -> _State:
    """Local search after the greedy paths: flip one or two systems or judges (in or out) while worth more.

    Never leaves a facet without a level; the items of a block are every item
    complete over its systems and judges.
    """
    n_s, _, n_j = present.shape
    swaps = (n_s + n_j) ** 2 * present.size <= SWAP_CELLS
    every_item = np.ones(present.shape[1], dtype=bool)
    absent = ~present
    while True:
        ks, _, kj = state
        # Missing cells of every (system, item) over the kept judges and of every
        # (judge, item) over the kept systems: a single flip's items are then one
        # O(items) sum, not a pass over the presence (the pairs below read it).
        miss_si = absent[:, :, kj].sum(axis=2, dtype=np.int32)
        miss_ji = absent[ks].sum(axis=0, dtype=np.int32).T
        total = miss_si[ks].sum(axis=0)
        flips = [(0, k) for k in range(n_s)] + [(2, k) for k in range(n_j)]
        moves = [[f] for f in flips]
        if swaps:
            moves += [[f, g] for f in flips for g in flips if f < g]
        current = worth(*_size(state))
        best: _State | None = None
        for move in moves:
            new = [ks.copy(), kj.copy()]
            for axis, k in move:
                new[axis // 2][k] = not new[axis // 2][k]
            if not new[0].any() or not new[1].any():
                continue
            if len(move) == 1:
                axis, k = move[0]
                # a system's own missing cells over the kept judges (or a judge's over the kept
                # systems) leave or join the total; a joining judge's are over the kept systems too
                change = miss_si[k] if axis == 0 else miss_ji[k]
                items = total - change == 0 if (ks if axis == 0 else kj)[k] else total + change == 0
            else:
                items = present[np.ix_(new[0], every_item, new[1])].all(axis=(0, 2))
            candidate = (new[0], np.asarray(items), new[1])
            if worth(*_size(candidate)) > current and (best is None or worth(*_size(candidate)) > worth(*_size(best))):
                best = candidate
        if best is None:
            return state
        state = best


def _prune(
    present: np.ndarray, names: Sequence[list[str]]  # the system, item and judge ids
) -> tuple[list[np.ndarray], list[list[str]]]:
    """The module's rule 2 on a (system, item, judge) presence array: which levels stay."""
    keep = [np.ones(n, dtype=bool) for n in present.shape]
    dropped: list[list[str]] = [[], [], []]
    if present.size and present.all():  # nothing missing: what the search below finds
        return keep, dropped
    if not present.any():  # pragma: no cover - the callers have at least one record
        msg = "no balanced block: no (system, item, judge) cell holds a score"
        raise DesignError(msg)

    def observations(ns: int, ni: int, nj: int) -> tuple[int, int, int]:
        return ns * ni * nj, ns, nj

    # The largest block the search finds (a first pass), and the best 1 x items x 1
    # block (exact: the most items of one system and one judge).
    states = _path(present, observations, names)
    per_pair = present.sum(axis=1)
    s0, j0 = np.unravel_index(int(np.argmax(per_pair)), per_pair.shape)
    ks, kj = np.zeros(present.shape[0], dtype=bool), np.zeros(present.shape[2], dtype=bool)
    ks[s0] = kj[j0] = True
    states.append((ks, present[s0, :, j0].copy(), kj))
    largest = _size_of(_improve(present, max(states, key=lambda st: observations(*_size(st))), observations))

    def worth(ns: int, ni: int, nj: int) -> tuple[bool, int, int, int]:
        # The most systems among blocks of at least half the largest block's
        # observations, then the most observations, then the most judges.
        enough = 2 * ns * ni * nj >= largest
        return enough, ns if enough else 0, ns * ni * nj, nj

    def judges_first(ns: int, ni: int, nj: int) -> tuple[int, tuple[bool, int, int, int]]:
        return ns, worth(ns, ni, nj)  # a system goes only once one judge is left

    states += _path(present, worth, names) + _path(present, judges_first, names)
    chosen = _improve(present, max(states, key=lambda state: worth(*_size(state))), worth)  # the first of equals
    keep = [chosen[0].copy(), chosen[1].copy(), chosen[2].copy()]
    dropped = [[names[axis][k] for k in np.flatnonzero(~keep[axis])] for axis in range(3)]
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

    A fit that needs both modes, or more cells than fit at once, calls
    :func:`fit_blocks` and falls back here for a mode it returns ``None`` for.
    """
    lazy = records.lazy() if isinstance(records, pl.DataFrame) else records
    needed = ["system_id", "item_id", "judge_id", "generation", "replicate", "score"]
    keys = ["system_id", "item_id", "judge_id"]
    if generations == "average":
        fast = _average_block_dense(lazy)
    elif generations == "facet":
        fast = _facet_block_dense(lazy)
    else:
        msg = f"generations must be 'average' or 'facet', got {generations!r}"
        raise DesignError(msg)
    if fast is not None:
        return fast
    # The polars path: the reference the dense paths are tested against, and what
    # runs where they return None. It collects per-record data.
    if generations == "average":
        cells = (
            lazy.select(needed)
            .group_by([*keys, "replicate"])
            .agg(pl.col("score").mean(), pl.len().alias("__n"))
            .collect()
        )
        records_in = int(cells["__n"].sum()) if cells.height else 0
        n_generations = 1
    else:
        cells = lazy.select(needed).collect()
        records_in = cells.height
        n_generations = 0
    if not cells.height:
        msg = "no pointwise records to fit"
        raise DesignError(msg)
    observations_in = cells.height  # one per (system, item, judge, replicate), or per record (facet)

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
        n_generations = int(per_pair["g"].min()) if per_pair.height == n_pairs else 0  # type: ignore[arg-type]  # polars types Series.min() as any Python value or None: of a count column it is an int
        if n_generations < 1:
            raise DesignError(_no_common_generation([judges[k] for k in kept_j]))
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
        n_replicates = int(cells.group_by(group).agg(pl.len().alias("n"))["n"].min())  # type: ignore[arg-type]  # as above: a count column's min is an int
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
        observations_in=observations_in,
    )
