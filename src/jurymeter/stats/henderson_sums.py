r"""Henderson's Method I, the sums: integer-coded group counts and sums of the records.

Every :math:`T_A = \sum_l y_{l\cdot}^2 / n_l` and every
:math:`k(A, c) = \sum_{l \in A} \sum_{m \in c} n_{lm}^2 / n_l` of
:mod:`jurymeter.stats.henderson` (Searle, Casella and McCulloch 1992,
*Variance Components*, sec. 5.2, eq. 5.11-5.16) comes from the tables built
here with ``numpy.bincount``: one ``bincount`` of the records' full key when the
facets' full crossing has at most ``DENSE_CODES_PER_RECORD`` cells per record
(:class:`_Tensor`: each record read once, every facet set's table a sum over
axes), otherwise one per facet set on compressed group codes (:class:`_Codes`).
The D-study's harmonic-mean sizes (``docs/henderson.md``) are counted here too.
The method-of-moments solve is :func:`jurymeter.stats.henderson.henderson1`.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping

import numpy as np
import polars as pl

from jurymeter.errors import DesignError
from jurymeter.stats.design import Design, Effect

# Columns of the store's pointwise records playing the design letters of the engine.
DEFAULT_COLUMNS: Mapping[str, str] = {
    "s": "system_id",
    "i": "item_id",
    "j": "judge_id",
    "g": "generation",
    "r": "replicate",
}


# Combined codes are compressed through a dense lookup table of at most this many
# entries per record (O(records)); a larger radix product falls back to a sort.
DENSE_CODES_PER_RECORD = 8


class _Codes:
    """Integer codes of the records' levels for any set of facets, built once per set and cached."""

    def __init__(self, facet_codes: Mapping[str, np.ndarray], order: tuple[str, ...], n: int) -> None:
        self.order = order
        self.n = n
        self._codes: dict[tuple[str, ...], tuple[np.ndarray, int]] = {
            (): (np.zeros(n, dtype=np.int64), 1),
        }
        for facet, codes in facet_codes.items():
            self._codes[(facet,)] = (codes, int(codes.max()) + 1 if n else 0)
        self._counts: dict[tuple[str, ...], np.ndarray] = {}
        self._reps: dict[tuple[str, ...], np.ndarray] = {}

    def _key(self, facets: frozenset[str]) -> tuple[str, ...]:
        return tuple(f for f in self.order if f in facets)

    def codes(self, facets: frozenset[str]) -> tuple[np.ndarray, int]:
        """Codes ``0..L-1`` of the records' levels of ``facets`` and ``L``."""
        key = self._key(facets)
        if key in self._codes:
            return self._codes[key]
        head, _ = self.codes(frozenset(key[:-1]))
        tail, size_tail = self._codes[(key[-1],)]
        out = _dense(head.astype(np.int64, copy=False) * size_tail + tail)
        result = (out, int(out.max()) + 1)
        self._codes[key] = result
        return result

    def counts(self, facets: frozenset[str]) -> np.ndarray:
        """Records per level of ``facets``."""
        key = self._key(facets)
        if key not in self._counts:
            codes, levels = self.codes(facets)
            self._counts[key] = np.bincount(codes, minlength=levels).astype(np.float64)
        return self._counts[key]

    def representatives(self, facets: frozenset[str]) -> np.ndarray:
        """One record index per level of ``facets``."""
        key = self._key(facets)
        if key not in self._reps:
            codes, levels = self.codes(facets)
            reps = np.empty(levels, dtype=np.int64)
            reps[codes] = np.arange(self.n, dtype=np.int64)
            self._reps[key] = reps
        return self._reps[key]

    def parent(self, inner: frozenset[str], outer: frozenset[str]) -> np.ndarray:
        """For each level of ``inner`` (a superset of ``outer``), its level of ``outer``."""
        parents: np.ndarray = self.codes(outer)[0][self.representatives(inner)]
        return parents


def _columns(design: Design, facets: Mapping[str, str] | None) -> dict[str, str]:
    chosen = dict(DEFAULT_COLUMNS)
    if facets is not None:
        chosen.update(facets)
    missing = [f for f in design.facets if f not in chosen]
    if missing:
        msg = (
            f"facets: design letters {missing} have no column; pass facets={{letter: column}} "
            f"(defaults {dict(DEFAULT_COLUMNS)})"
        )
        raise DesignError(msg)
    return {f: chosen[f] for f in design.facets}


def _dense(values: np.ndarray) -> np.ndarray:
    """Codes ``0..L-1`` of integer values: a lookup table over their range (O(n)), or a sort when it is too wide."""
    if not len(values):
        return values.astype(np.int64)
    low, high = int(values.min()), int(values.max())
    if high - low < DENSE_CODES_PER_RECORD * len(values) + 1024:
        shifted = values.astype(np.int64, copy=False) - low
        seen = np.zeros(high - low + 1, dtype=bool)
        seen[shifted] = True
        remap = np.cumsum(seen, dtype=np.int64) - 1
        dense: np.ndarray = remap[shifted]
        return dense
    inverse: np.ndarray = np.unique(values, return_inverse=True)[1].astype(np.int64, copy=False)
    return inverse


def column_codes(series: pl.Series) -> tuple[np.ndarray, pl.Series]:
    """Codes ``0..L-1`` of a column's values in their sorted order, and the sorted distinct values.

    Integers by their range (a lookup table, O(n)); anything else as strings
    through an ``Enum`` of the sorted distinct values (a hash per record, one
    sort of the L distinct values), so the codes follow the values' order.
    """
    if series.dtype.is_integer():
        values = series.to_numpy()
        if not len(values):
            return values.astype(np.int64), series.clear()
        low, high = int(values.min()), int(values.max())
        if high - low < DENSE_CODES_PER_RECORD * len(values) + 1024:
            shifted = values.astype(np.int64) - low
            seen = np.zeros(high - low + 1, dtype=bool)
            seen[shifted] = True
            remap = np.cumsum(seen, dtype=np.int64) - 1
            return remap[shifted], pl.Series(series.name, np.flatnonzero(seen) + low, dtype=series.dtype)
        uniques_np, inverse = np.unique(values, return_inverse=True)
        return inverse.astype(np.int64, copy=False), pl.Series(series.name, uniques_np, dtype=series.dtype)
    if isinstance(series.dtype, pl.Enum):
        categories = series.dtype.categories
        if categories.is_sorted() and not series.null_count():
            return series.to_physical().to_numpy(), categories
    text = series.cast(pl.String)
    uniques = text.unique().sort()
    codes = text.cast(pl.Enum(uniques.to_list())).to_physical().to_numpy()
    return codes, uniques


def _facet_codes(frame: pl.DataFrame, columns: Mapping[str, str]) -> dict[str, np.ndarray]:
    """Codes ``0..L-1`` per facet column (:func:`column_codes`)."""
    return {facet: column_codes(frame.get_column(column))[0] for facet, column in columns.items()}


class _Tensor:
    r"""Count and sum tables of the records over the full crossing of the facets' codes.

    Used when the crossing has at most ``DENSE_CODES_PER_RECORD`` cells per record:
    one ``bincount`` of the records' full key gives the counts :math:`n` and the
    sums :math:`y_\cdot` of every cell; the table of any facet set is a sum of
    the full one over the other axes (computed from the smallest cached
    superset), so every T, every :math:`k(A, c)` and every level count is
    arithmetic on tables no larger than the crossing, and each record is read
    once per refit.
    """

    def __init__(self, order: tuple[str, ...], key: np.ndarray | None, full: np.ndarray) -> None:
        self.order, self.shape = order, full.shape
        self.key = key  # each record's cell (None: the records were given as a table)
        self.size = int(full.size)
        self._counts: dict[frozenset[str], np.ndarray] = {frozenset(order): full}

    @classmethod
    def of_table(cls, order: tuple[str, ...], present: np.ndarray) -> _Tensor:
        """The tables of records given as a presence table (one record per present cell; axes in ``order``)."""
        return cls(order, None, present.astype(np.float64))

    @classmethod
    def build(cls, codes: Mapping[str, np.ndarray], order: tuple[str, ...], n: int) -> _Tensor | None:
        """The tables, or ``None`` when the crossing is too large for them."""
        shape = tuple(int(codes[f].max()) + 1 if n else 1 for f in order)
        size = 1
        for length in shape:
            size *= length
        if n == 0 or size > DENSE_CODES_PER_RECORD * n + 1024:
            return None
        key = np.zeros(n, dtype=np.int64)
        for f, length in zip(order, shape, strict=True):
            key *= length
            key += codes[f]
        return cls(order, key, np.bincount(key, minlength=size).astype(np.float64).reshape(shape))

    def _axes(self, superset: frozenset[str], subset: frozenset[str]) -> tuple[int, ...]:
        kept = [f for f in self.order if f in superset]
        return tuple(k for k, f in enumerate(kept) if f not in subset)

    def _reduce(self, tables: dict[frozenset[str], np.ndarray], facets: frozenset[str]) -> np.ndarray:
        if facets in tables:
            return tables[facets]
        source = min((s for s in tables if facets <= s), key=len)
        out: np.ndarray = tables[source].sum(axis=self._axes(source, facets))
        tables[facets] = out
        return out

    def counts(self, facets: frozenset[str]) -> np.ndarray:
        """Records per cell of ``facets``' crossing (axes in design order)."""
        return self._reduce(self._counts, facets)

    def levels(self, facets: frozenset[str]) -> int:
        """Observed levels of ``facets``."""
        return int(np.count_nonzero(self.counts(facets)))

    def sums(self, y: np.ndarray) -> dict[frozenset[str], np.ndarray]:
        """A cache of sum tables of ``y`` (records, or a table of the full crossing), starting from the full one."""
        if y.ndim > 1:  # already the table (a design has two facets or more)
            return {frozenset(self.order): y}
        key = self.records()
        return {frozenset(self.order): np.bincount(key, weights=y, minlength=self.size).reshape(self.shape)}

    def records(self) -> np.ndarray:
        """Each record's cell (flat index of the full crossing), in the records' order."""
        if self.key is None:
            present = self._counts[frozenset(self.order)].reshape(-1) > 0
            self.key = np.flatnonzero(present)
        return self.key

    def t(self, sums: dict[frozenset[str], np.ndarray], facets: frozenset[str]) -> float:
        r""":math:`T_A = \sum_l y_{l\cdot}^2 / n_l` over the observed levels."""
        total = self._reduce(sums, facets)
        n = self.counts(facets)
        # A level with no record has a zero sum: dividing by max(n, 1) keeps it out
        # without a boolean pick (a third of the time on 10M cells).
        return float(np.sum(total * total / np.maximum(n, 1.0)))

    def k(self, a: frozenset[str], c: frozenset[str], n: int) -> float:
        r""":math:`k(A, c) = \sum_l \sum_m n_{lm}^2 / n_l`."""
        if c <= a:
            return float(n)
        if len(c) == len(self.order):  # the residual, one record per level: k is A's level count
            return float(self.levels(a))
        union = a | c
        n_union = self.counts(union)
        if not a:
            return float(np.sum(n_union * n_union)) / n
        n_a = np.expand_dims(self.counts(a), self._axes(union, a))
        # n_union is zero wherever n_a is (and elsewhere too): max(n_a, 1) leaves those terms zero.
        return float(np.sum(n_union * n_union / np.maximum(n_a, 1.0)))

    def per_group(self, facet: str, group: frozenset[str]) -> np.ndarray:
        """Levels of ``facet`` observed within each observed level of ``group``."""
        within = (self.counts(group | {facet}) > 0).sum(axis=self._axes(group | {facet}, group))
        seen = self.counts(group) > 0 if group else np.array(True)
        return np.asarray(within[seen], dtype=np.float64).ravel()


def _t_sets(design: Design) -> list[Effect]:
    """Every facet set whose T enters some SS: each effect less any subset of its primary facets."""
    found: set[Effect] = set()
    for effect in design.effects:
        primary = sorted(design.primary(effect))
        for r in range(len(primary) + 1):
            for removed in itertools.combinations(primary, r):
                found.add(effect - frozenset(removed))
    return sorted(found, key=lambda s: (len(s), sorted(design.facets.index(f) for f in s)))


def _k(codes: _Codes, a: Effect, c: Effect, n: int) -> float:
    r""":math:`k(A, c) = \sum_{l \in A} \sum_{m \in c} n_{lm}^2 / n_l` from the counts of :math:`A \cup c`."""
    if c <= a:
        return float(n)
    if len(c) == len(codes.order):  # the residual, one record per level: k is A's level count
        return float(codes.codes(a)[1])
    union = a | c
    n_union = codes.counts(union)
    if not a:
        return float(np.dot(n_union, n_union)) / n
    n_a = codes.counts(a)[codes.parent(union, a)]
    return float(np.sum(n_union * n_union / n_a))


def _harmonic(values: np.ndarray) -> float:
    if values.min() == values.max():  # balanced: the size itself, without rounding
        return float(values[0])
    return float(len(values) / np.sum(1.0 / values))


def _sizes(design: Design, codes: _Codes, system: str) -> tuple[dict[str, int], dict[str, float]]:
    sizes: dict[str, int] = {}
    dstudy: dict[str, float] = {}
    for facet in design.facets:
        nest = design.nests[facet]
        if nest:
            group = nest
        elif facet != system and system in design.facets:
            group = frozenset({system}) | design.nests[system]
        else:
            group = frozenset()
        per_group = np.bincount(
            codes.parent(group | {facet}, group), minlength=codes.codes(group)[1]
        ).astype(np.float64)
        sizes[facet] = int(per_group.max()) if nest else codes.codes(frozenset({facet}))[1]
        if facet != system:
            dstudy[facet] = _harmonic(per_group)
    return sizes, dstudy


def _sizes_group(design: Design, facet: str, system: str) -> frozenset[str]:
    nest = design.nests[facet]
    if nest:
        return nest
    if facet != system and system in design.facets:
        return frozenset({system}) | design.nests[system]
    return frozenset()


def _tensor_sizes(design: Design, tensor: _Tensor, system: str) -> tuple[dict[str, int], dict[str, float]]:
    """:func:`_sizes` from the count tables."""
    sizes: dict[str, int] = {}
    dstudy: dict[str, float] = {}
    for facet in design.facets:
        per_group = tensor.per_group(facet, _sizes_group(design, facet, system))
        sizes[facet] = int(per_group.max()) if design.nests[facet] else tensor.levels(frozenset({facet}))
        if facet != system:
            dstudy[facet] = _harmonic(per_group)
    return sizes, dstudy
