"""The cells Henderson I fits on every record, as a table or as rows, and what the balanced block leaves of them.

:class:`CellTable` is cut from a fit's one-scan sums (:func:`cells_from_sums`,
no second scan of the records); :class:`FrameCells` wraps the rows
:func:`jurymeter.stats.reliability.henderson_cells` reads. Both answer what the
Henderson report asks of the cells (counts, the record pattern, the system
means, the (system, item, judge) cells of the judge offsets: :func:`judge_cells`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import polars as pl

from jurymeter.errors import DesignError
from jurymeter.stats.blocks import FACET_KEYS as BLOCK_FACET_KEYS
from jurymeter.stats.blocks import BlockLayout, CellSums, GenerationMode, averaged_cells
from jurymeter.stats.design import Design
from jurymeter.stats.henderson import DEFAULT_COLUMNS, RecordPattern

# What the Henderson path reads of a fit's records: the cells it fits are the
# (system, item, judge, replicate) means over generations (``generations="average"``,
# as the balanced block's cells) or the (system, item, judge, generation, replicate)
# records (``"facet"``).
AVERAGE_CELL_KEYS = ("system_id", "item_id", "judge_id", "replicate")
FACET_CELL_KEYS = ("system_id", "item_id", "judge_id", "generation", "replicate")



class CellTable:
    """Henderson's cells as a table of the keys' full crossing: what a one-scan fit already holds.

    Made by :func:`cells_from_sums`. ``present`` marks the cells holding at
    least one record, ``means`` their mean scores and ``counts`` their records;
    axes follow ``keys`` (:data:`AVERAGE_CELL_KEYS` or :data:`FACET_CELL_KEYS`)
    and their sorted ``levels``. It answers what the report asks of the cells
    (:class:`FrameCells` answers the same of a frame) without a row per cell.
    """

    def __init__(self, keys: tuple[str, ...], levels: list[list[Any]], sums: np.ndarray, counts: np.ndarray) -> None:
        self.keys, self.levels, self.counts = keys, levels, counts
        self.present = counts > 0
        self.means = np.divide(sums, counts, out=np.zeros(counts.shape), where=self.present)
        self.height = int(np.count_nonzero(self.present))

    def _over(self, keys: Sequence[str]) -> np.ndarray:
        """Present cells per combination of ``keys`` (summed over the other axes)."""
        others = tuple(k for k, c in enumerate(self.keys) if c not in keys)
        counted: np.ndarray = self.present.sum(axis=others, dtype=np.int64) if others else self.present.astype(np.int64)
        return counted

    def distinct(self, column: str) -> int:
        """Levels of ``column`` with a record."""
        return int(np.count_nonzero(self._over([column])))

    def first_level(self, column: str) -> str:
        """The first level of ``column`` with a record."""
        return str(self.levels[self.keys.index(column)][int(np.flatnonzero(self._over([column]))[0])])

    def max_rows(self, keys: Sequence[str]) -> int:
        """The most cells of any combination of ``keys``."""
        return int(self._over(keys).max())

    def combinations(self, keys: Sequence[str]) -> int:
        """Combinations of ``keys`` with a record."""
        return int(np.count_nonzero(self._over(keys)))

    def max_distinct(self, column: str, by: Sequence[str]) -> int:
        """The most levels of ``column`` with a record within one combination of ``by``."""
        within = self._over([*by, column]) > 0
        axis = [c for c in self.keys if c in (*by, column)].index(column)
        return int(within.sum(axis=axis).max())

    def records_in(self) -> int:
        return int(self.counts.sum())

    def system_means(self) -> tuple[list[str], np.ndarray]:
        """Each system's mean over its cells (raw), by sorted system id."""
        others = tuple(range(1, len(self.keys)))
        n = self.present.sum(axis=others)
        total = self.means.sum(axis=others)
        seen = n > 0
        ids = [str(v) for v, ok in zip(self.levels[0], seen, strict=True) if ok]
        return ids, total[seen] / n[seen]

    def pattern(self, design: Design) -> RecordPattern:
        """Henderson's record pattern of the present cells for ``design`` (its facets among the keys)."""
        columns = {f: DEFAULT_COLUMNS[f] for f in design.facets}
        axes = [self.keys.index(columns[f]) for f in design.facets]
        others = tuple(k for k in range(len(self.keys)) if k not in axes)
        present = self.present.sum(axis=others) if others else self.present.astype(np.int64)
        if int(present.max()) > 1:
            repeated = int((present - (present > 0)).sum())
            msg = (
                f"records: {repeated} record(s) repeat a level of every facet {design.label(design.effects[-1])!r} "
                f"({[columns[f] for f in design.facets]}); the residual needs one record per level: add a "
                "replicate facet (e.g. 'r:sij') or average the repeats first"
            )
            raise DesignError(msg)
        values = self.means.sum(axis=others) if others else self.means
        order = sorted(range(len(axes)), key=lambda k: axes[k])  # the kept axes in key order
        position = [order.index(k) for k in range(len(axes))]  # design facet k is kept axis position[k]
        return RecordPattern.of_table(design, np.transpose(present > 0, position), np.transpose(values, position))


class FrameCells:
    """:class:`CellTable`'s answers for cells as rows (:func:`henderson_cells`)."""

    def __init__(self, frame: pl.DataFrame) -> None:
        self.frame = frame
        self.height = frame.height

    def distinct(self, column: str) -> int:
        return int(self.frame.get_column(column).n_unique())

    def first_level(self, column: str) -> str:
        return str(self.frame.get_column(column)[0])

    def max_rows(self, keys: Sequence[str]) -> int:
        return int(_rows_per_key(self.frame, list(keys)).max())

    def combinations(self, keys: Sequence[str]) -> int:
        return int(np.count_nonzero(_rows_per_key(self.frame, list(keys))))

    def max_distinct(self, column: str, by: Sequence[str]) -> int:
        most = self.frame.group_by(*by).agg(pl.col(column).n_unique().alias("n"))["n"].max()
        return int(most) if isinstance(most, int) else 0

    def records_in(self) -> int:
        return int(self.frame.get_column("__n").sum())

    def system_means(self) -> tuple[list[str], np.ndarray]:
        by_system = self.frame.group_by("system_id").agg(pl.col("score").mean()).sort("system_id")
        return [str(v) for v in by_system.get_column("system_id").to_list()], by_system.get_column("score").to_numpy()

    def pattern(self, design: Design) -> RecordPattern:
        return RecordPattern.of(self.frame, design)


Cells = CellTable | FrameCells


def cells_from_sums(sums: CellSums, generations: GenerationMode) -> CellTable | None:
    """Henderson's cells from a fit's one-scan cell sums (no scan of the records); ``None`` if they cannot.

    ``sums`` are :meth:`FitChunks.cell_sums <jurymeter.stats.blocks.FitChunks.cell_sums>`
    of the fit's records (already those of its judges and systems, with no null
    score: :func:`jurymeter.stats.blocks.fit_chunks` reads no sums otherwise):
    the cells :func:`henderson_cells` reads from the records, as a table.
    Generations averaged from facet-keyed sums are summed over that axis;
    generations as a facet from averaged sums cannot be had (``None``).
    """
    if generations == "average":
        sums = averaged_cells(sums)
    elif sums.keys != BLOCK_FACET_KEYS:
        return None
    keys = AVERAGE_CELL_KEYS if generations == "average" else FACET_CELL_KEYS
    if tuple(sums.keys) != keys:
        return None
    return CellTable(keys, sums.levels, sums.sums, sums.counts)


def block_dropped(layout: BlockLayout, cells: pl.DataFrame | Cells) -> list[str]:
    """What the balanced block leaves out of ``cells`` (:func:`henderson_cells`), in words; empty when nothing."""
    found = [
        f"{len(ids)} {name}(s) ({', '.join(ids[:5])}{', ...' if len(ids) > 5 else ''})"
        for name, ids in (("system", layout.dropped_systems), ("judge", layout.dropped_judges),
                          ("item", layout.dropped_items))
        if ids
    ]
    left = cells.height - layout.observations_used
    if left > 0:
        found.append(f"{left} of {cells.height} observations")
    return found


def _rows_per_key(cells: pl.DataFrame, keys: list[str]) -> np.ndarray:
    """Rows of ``cells`` per combination of ``keys`` (zeros for absent combinations when counted densely)."""
    from jurymeter.stats.henderson import DENSE_CODES_PER_RECORD, column_codes

    n = cells.height
    coded = [column_codes(cells.get_column(c)) for c in keys]
    size = 1
    for _, uniques in coded:
        size *= len(uniques)
    if n == 0 or size > DENSE_CODES_PER_RECORD * n + 1024:
        return cells.group_by(keys).len().get_column("len").to_numpy()
    key = np.zeros(n, dtype=np.int64)
    for codes, uniques in coded:
        key *= len(uniques)
        key += codes
    counts: np.ndarray = np.bincount(key, minlength=size)
    return counts



def judge_cells(cells: Cells) -> tuple[list[str], dict[str, np.ndarray]]:
    """The (system, item, judge) cells of Henderson's cells: codes, mean score, generations and rows averaged."""
    if isinstance(cells, CellTable):
        keys = cells.keys
        inner = tuple(range(3, len(keys)))
        count = cells.present.sum(axis=inner) if inner else cells.present.astype(np.int64)
        total = (cells.means * cells.present).sum(axis=inner) if inner else cells.means
        if "generation" in keys:
            g = keys.index("generation")
            seen = cells.present.any(axis=tuple(k for k in inner if k != g))
            gens = seen.sum(axis=-1)
        else:
            gens = (count > 0).astype(np.int64)
        s_code, i_code, j_code = np.nonzero(count)
        judges = [str(v) for v in cells.levels[2]]
        return judges, {
            "system": s_code, "item": i_code, "judge": j_code,
            "y": total[s_code, i_code, j_code] / count[s_code, i_code, j_code],
            "generations": gens[s_code, i_code, j_code], "rows": count[s_code, i_code, j_code],
        }
    frame = cells.frame
    has_g = "generation" in frame.columns
    grouped = (
        frame.group_by("system_id", "item_id", "judge_id")
        .agg(
            pl.col("score").mean().alias("y"), pl.len().alias("rows"),
            (pl.col("generation").n_unique() if has_g else pl.lit(1)).alias("generations"),
        )
        .with_columns(pl.col(c).cast(pl.String) for c in ("system_id", "item_id", "judge_id"))
        .sort("system_id", "item_id", "judge_id")
    )
    judges = sorted(str(v) for v in grouped.get_column("judge_id").unique().to_list())

    def codes(column: str, levels: list[str]) -> np.ndarray:
        out: np.ndarray = grouped.get_column(column).cast(pl.Enum(levels)).to_physical().to_numpy().astype(np.int64)
        return out

    return judges, {
        "system": codes("system_id", sorted(set(grouped.get_column("system_id").to_list()))),
        "item": codes("item_id", sorted(set(grouped.get_column("item_id").to_list()))),
        "judge": codes("judge_id", judges),
        "y": grouped.get_column("y").to_numpy(),
        "generations": grouped.get_column("generations").to_numpy(),
        "rows": grouped.get_column("rows").to_numpy(),
    }
