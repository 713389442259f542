"""A long frame of scores arranged densely as ``x[system, item, generation, judge]``."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import polars as pl

from jurymeter.errors import DesignError


# --------------------------------------------------------------------------- long frames
@dataclass(frozen=True, slots=True)
class ScoreCube:
    """Dense scores ``x[system, item, generation, judge]`` and the ids of each axis.

    Generation labels are per (system, item): axis 2 holds the generations of each
    item in sorted order of their labels.
    """

    x: np.ndarray
    systems: tuple[str, ...]
    items: tuple[str, ...]
    judges: tuple[str, ...]

    def system(self, system_id: str) -> np.ndarray:
        """``x[scenario, generation, judge]`` of one system, ready for :func:`fit_cyclic`."""
        x: np.ndarray = self.x[self.systems.index(system_id)]
        return x


def score_cube(frame: pl.DataFrame, *, score: str = "score") -> ScoreCube:
    """Arrange a long frame ``system_id, item_id, generation, judge_id, <score>`` densely.

    Raises
    ------
    DesignError
        A column is missing, a cell is duplicated, or the cells are not fully crossed
        (every system x item x generation x judge, the same generation count per item).
    """
    keys = ["system_id", "item_id", "generation", "judge_id"]
    missing = [c for c in [*keys, score] if c not in frame.columns]
    if missing:
        msg = f"frame lacks column(s) {missing}; it has {frame.columns}"
        raise DesignError(msg)
    if frame.height == 0:
        msg = "frame has no rows"
        raise DesignError(msg)
    coded = frame.select(
        (pl.col("system_id").cast(pl.Utf8).rank("dense") - 1).alias("s"),
        (pl.col("item_id").cast(pl.Utf8).rank("dense") - 1).alias("i"),
        (pl.col("generation").rank("dense").over("system_id", "item_id") - 1).alias("g"),
        (pl.col("judge_id").cast(pl.Utf8).rank("dense") - 1).alias("j"),
        pl.col(score).cast(pl.Float64).alias("y"),
    )
    shape = tuple(int(top) + 1 for top in coded.select(pl.col(*"sigj").max()).row(0))
    flat = np.ravel_multi_index(tuple(coded[c].to_numpy() for c in "sigj"), shape)
    if len(np.unique(flat)) != frame.height:
        msg = "frame has more than one score for a (system_id, item_id, generation, judge_id) cell"
        raise DesignError(msg)
    expected = int(np.prod(shape))
    if frame.height != expected:
        msg = (
            f"frame is not fully crossed: {frame.height} cells of {expected} "
            f"(systems x items x generations x judges = {' x '.join(map(str, shape))})"
        )
        raise DesignError(msg)
    x = np.empty(expected)
    x[flat] = coded["y"].to_numpy()

    def labels(col: str) -> tuple[str, ...]:
        return tuple(frame.get_column(col).cast(pl.Utf8).unique().sort().to_list())

    return ScoreCube(
        x=x.reshape(shape),
        systems=labels("system_id"),
        items=labels("item_id"),
        judges=labels("judge_id"),
    )
