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
   while that is worth more (:func:`~jurymeter.stats.block_rule._prune`). Nothing is filled in.
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

from collections.abc import Iterator
from dataclasses import dataclass, fields
from typing import TypeVar

import numpy as np
import polars as pl

from jurymeter.errors import DesignError
from jurymeter.stats.block_cells import (
    AVERAGE_KEYS,
    DENSE_CELLS_PER_RECORD,
    FACET_KEYS,
    CellSums,
    _cell_levels,
    _presence,
    _sum_cells,
    averaged_cells,
)
from jurymeter.stats.block_rule import (
    SWAP_CELLS,
    BalancedBlock,
    BlockLayout,
    GenerationMode,
    _average_x,
    _BlockPlan,
    _facet_x,
    _layout,
    _no_common_generation,
    _plans,
    _prune,
)
from jurymeter.stats.design import Design

__all__ = [
    "AVERAGE_KEYS",
    "CHUNK_CELLS",
    "DENSE_CELLS_PER_RECORD",
    "FACET_KEYS",
    "SWAP_CELLS",
    "BalancedBlock",
    "BlockLayout",
    "BlocksChanged",
    "CellSums",
    "FitBlocks",
    "FitChunks",
    "GenerationMode",
    "averaged_cells",
    "balanced_block",
    "chunks_of_sums",
    "fit_blocks",
    "fit_chunks",
]

T = TypeVar("T")


def _codes(frame: pl.DataFrame, column: str) -> tuple[np.ndarray, list[str]]:
    levels = frame.get_column(column).unique().sort()
    codes = frame.get_column(column).cast(pl.Enum(levels.to_list())).to_physical().to_numpy()
    return codes.astype(np.int64), levels.to_list()


# Cells read at a time by fit_chunks: sums and counts take 12 bytes a cell, and
# the chunk's block arrays and the fits' temporaries a few times that (about 0.1
# GB in all for this many). A fit with more cells is read item chunk by item
# chunk (a presence scan, then one scan per chunk) and its fits add up the
# chunks, so its peak does not grow with its records; one of fewer cells is read
# in one scan. Smaller chunks cost a scan of the fit's records each.
CHUNK_CELLS = 2_000_000


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
    chunks = _item_chunks(levels, chunk_cells)
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


def _item_chunks(levels: list[list[object]], chunk_cells: int | None) -> list[tuple[int, int]]:
    """Item ranges of at most ``chunk_cells`` cells (default :data:`CHUNK_CELLS`), items in sorted order."""
    n_items = len(levels[1])
    per_item = int(np.prod([len(v) for v in levels])) // n_items
    step = max(1, (CHUNK_CELLS if chunk_cells is None else chunk_cells) // per_item)
    return [(lo, min(lo + step, n_items)) for lo in range(0, n_items, step)]


def chunks_of_sums(
    whole: CellSums, modes: tuple[GenerationMode, ...] = ("average",), *, chunk_cells: int | None = None
) -> FitChunks:
    """:func:`fit_chunks` of records whose per-cell sums and counts are ``whole`` (no record is read).

    ``whole`` holds what :func:`fit_chunks`'s one scan sums (the store's merged
    cell statistics, ``io/cell_stats.py``): keyed by :data:`FACET_KEYS` when
    ``modes`` has ``"facet"``, else :data:`AVERAGE_KEYS`, over the sorted levels
    present. The blocks are decided on its presence and the chunks cut from it,
    as for a one-scan read, so the layouts and arrays are those of the records'.
    """
    keys = FACET_KEYS if "facet" in modes else AVERAGE_KEYS
    if whole.keys != keys:
        msg = f"cell sums keyed by {whole.keys}, the modes {modes} need {keys}"
        raise ValueError(msg)
    plans = _plans(whole.counts > 0, modes, whole.levels, keys, whole.records)
    return FitChunks(pl.LazyFrame(), keys, whole.levels, whole.records, plans, _item_chunks(whole.levels, chunk_cells),
                     whole)


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
    if generations == "average":
        fast = _average_block_dense(lazy)
    elif generations == "facet":
        fast = _facet_block_dense(lazy)
    else:
        msg = f"generations must be 'average' or 'facet', got {generations!r}"
        raise DesignError(msg)
    if fast is not None:
        return fast
    return _polars_block(lazy, generations)


def _polars_cells(lazy: pl.LazyFrame, generations: GenerationMode) -> tuple[pl.DataFrame, int, int]:
    """The polars path's cells (generations averaged, or one row per record), the records in and the generations."""
    needed = ["system_id", "item_id", "judge_id", "generation", "replicate", "score"]
    keys = ["system_id", "item_id", "judge_id"]
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
    return cells, records_in, n_generations


def _polars_block(lazy: pl.LazyFrame, generations: GenerationMode) -> BalancedBlock:
    """Rules 1-3 by polars group-bys: the reference the dense paths are tested against, and
    what runs where they return None. It collects per-record data."""
    cells, records_in, n_generations = _polars_cells(lazy, generations)
    observations_in = cells.height  # one per (system, item, judge, replicate), or per record (facet)
    s_code, systems = _codes(cells, "system_id")
    i_code, items = _codes(cells, "item_id")
    j_code, judges = _codes(cells, "judge_id")
    present = np.zeros((len(systems), len(items), len(judges)), dtype=bool)
    present[s_code, i_code, j_code] = True
    completeness = float(present.mean())
    keep, dropped = _prune(present, (systems, items, judges))
    kept_s, kept_i, kept_j = (np.flatnonzero(k) for k in keep)
    cells = _kept_cells(cells, (s_code, i_code, j_code), (kept_s, kept_i, kept_j), (systems, items, judges))
    notes: list[str] = []
    group = ["__s", "__i", "__j"]
    if generations == "facet":
        cells, n_generations = _common_generations(cells, len(kept_s) * len(kept_i), [judges[k] for k in kept_j])
        group = [*group, "__g"]
    n_cells = int(np.prod([len(kept_s), len(kept_i), len(kept_j)])) * (
        n_generations if generations == "facet" else 1
    )
    cells, n_replicates = _polars_replicates(cells, group, n_cells)
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


def _kept_cells(
    cells: pl.DataFrame,
    codes: tuple[np.ndarray, np.ndarray, np.ndarray],
    kept: tuple[np.ndarray, np.ndarray, np.ndarray],
    names: tuple[list[str], list[str], list[str]],
) -> pl.DataFrame:
    """The cells of the kept systems, items and judges, with their codes in the block (``__s``, ``__i``, ``__j``)."""
    remap = [np.full(len(n), -1, dtype=np.int64) for n in names]
    for axis, kept_axis in enumerate(kept):
        remap[axis][kept_axis] = np.arange(len(kept_axis))
    s_new, i_new, j_new = remap[0][codes[0]], remap[1][codes[1]], remap[2][codes[2]]
    inside = (s_new >= 0) & (i_new >= 0) & (j_new >= 0)
    if not inside.all():
        cells = cells.filter(pl.Series(inside))
        s_new, i_new, j_new = s_new[inside], i_new[inside], j_new[inside]
    return cells.with_columns(pl.Series("__s", s_new), pl.Series("__i", i_new), pl.Series("__j", j_new))


def _common_generations(cells: pl.DataFrame, n_pairs: int, kept_judges: list[str]) -> tuple[pl.DataFrame, int]:
    """Rule 1 with generations as a facet: the first generations every kept judge judged in every
    (system, item) pair, indexed within the pair (``__g``), and how many."""
    # Generations judged by every kept judge, indexed within (system, item).
    complete = (
        cells.group_by(["__s", "__i", "generation"])
        .agg(pl.col("__j").n_unique().alias("__nj"))
        .filter(pl.col("__nj") == len(kept_judges))
        .with_columns(
            (pl.col("generation").rank("ordinal").over(["__s", "__i"]).cast(pl.Int64) - 1).alias("__g")
        )
    )
    per_pair = complete.group_by(["__s", "__i"]).agg(pl.len().alias("g"))
    n_generations = int(per_pair["g"].min()) if per_pair.height == n_pairs else 0  # type: ignore[arg-type]  # polars types Series.min() as any Python value or None: of a count column it is an int
    if n_generations < 1:
        raise DesignError(_no_common_generation(kept_judges))
    cells = cells.join(
        complete.select("__s", "__i", "generation", "__g"), on=["__s", "__i", "generation"]
    ).filter(pl.col("__g") < n_generations)
    return cells, n_generations


def _polars_replicates(cells: pl.DataFrame, group: list[str], n_cells: int) -> tuple[pl.DataFrame, int]:
    """Rule 3: the first ``k`` replicates of every cell (ranked within it, ``__r``), ``k`` the fewest any cell has."""
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
    return cells.filter(pl.col("__r") < n_replicates), n_replicates
