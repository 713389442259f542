"""The block rule of :mod:`jurymeter.stats.blocks`: which systems, items, judges, generations and replicates a balanced block keeps.

The rule (documented in ``docs/gstudy.md`` and in :mod:`jurymeter.stats.blocks`,
points 1-3) is decided here on a dense presence array: generations averaged or
kept as a facet (every generation present in every kept cell), the systems and
judges by a greedy search with one- and two-level flips (:func:`_prune`: never
the only level of a facet, items before systems, then the most observations,
then the most judges), the first ``k`` replicates of every cell. The decision is
a :class:`_BlockPlan`; its arrays, cut from a chunk's cell sums, are
:func:`_average_x` and :func:`_facet_x`, and what it keeps a :class:`BlockLayout`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, fields
from typing import Any, Literal

import numpy as np

from jurymeter.errors import DesignError
from jurymeter.stats.block_cells import (
    FACET_KEYS,
    CellSums,
)
from jurymeter.stats.design import Design

GenerationMode = Literal["average", "facet"]
GENERATION_MODES: tuple[GenerationMode, ...] = ("average", "facet")


def generation_mode(value: str) -> GenerationMode:
    """``value`` as a generation mode, refused as :class:`~jurymeter.stats.reliability.GStudyRequest` refuses it.

    Here, not in :mod:`~jurymeter.stats.reliability`: an analysis's ``modes`` call it
    before the fit's heavy modules are imported (``pipeline.fit.run_fit`` reads the
    cells meanwhile).
    """
    for mode in GENERATION_MODES:
        if value == mode:
            return mode
    msg = f"GStudyRequest.generations must be one of {GENERATION_MODES}; got {value!r}"
    raise DesignError(msg)


@dataclass(frozen=True)
class BlockLayout:
    """What a balanced block is, without its scores: its design, the kept ids and what was left out.

    What a consumer of a block's item chunks needs before the first chunk
    (:class:`~jurymeter.stats.blocks.FitChunks`); a :class:`BalancedBlock` is a layout with its array.
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
