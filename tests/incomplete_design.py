"""Large incomplete ``s x i x j x r:sij`` item sets, simulated deterministically from a seed.

Shared by ``tests/r/make_lme4_incomplete.py`` (which fits lme4 to them and freezes
its components in ``tests/data/lme4_incomplete.json``) and
``tests/test_vs_lme4_incomplete.py`` (which regenerates them, checks the frozen
checksum and compares Henderson I with the frozen REML fit). Plain numpy and
polars: nothing from ``jurymeter`` or ``bench/``.

A case is a full crossing of ``sizes`` (systems, items, judges, replicates) with
normal effects of known variances ``COMPONENTS``, less a missing pattern:

- ``"cells"``: each (system, item, judge) cell missing with probability ``missing``
  (all its replicates go);
- ``"system_items"``: each (system, item) pair missing with a probability rising
  linearly over the systems from 0 to ``2 * missing`` (mean ``missing``), all its
  judges and replicates going: the systems see very unequal item sets.

The pattern comes from ``default_rng([seed, 0])`` and draw ``d`` of the scores on
it from ``default_rng([seed, 1, d])``; draw 0 is the data lme4 was fitted to,
other draws are new data sets on the same records (the test's sampling SE).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import polars as pl

SPEC = "s x i x j x r:sij"
# Henderson's effect labels, in the design's order, and lme4's group names for them.
EFFECTS = ("s", "i", "j", "si", "sj", "ij", "sij", "r:sij")
LME4_GROUPS = {"s": "s", "i": "i", "j": "j", "si": "s:i", "sj": "s:j", "ij": "i:j", "sij": "s:i:j",
               "r:sij": "Residual"}
FORMULA = "score ~ 1 + (1|s) + (1|i) + (1|j) + (1|s:i) + (1|s:j) + (1|i:j) + (1|s:i:j)"
# True variances, in EFFECTS order (those of bench/unbalanced.py).
COMPONENTS = (0.30, 0.50, 0.05, 0.40, 0.10, 0.15, 0.60, 0.80)
GRAND_MEAN = 5.5
FACET_COLUMNS = ("system_id", "item_id", "judge_id", "replicate")


@dataclass(frozen=True)
class Case:
    """One incomplete item set: ``sizes`` (s, i, j, r), a missing ``pattern`` and its share, a seed."""

    name: str
    sizes: tuple[int, int, int, int]
    pattern: str
    missing: float
    seed: int

    def describe(self) -> str:
        if self.pattern == "cells":
            return f"{self.missing:.0%} of (system, item, judge) cells missing at random"
        return (f"(system, item) pairs missing, share rising linearly from 0 to {2 * self.missing:.0%} "
                f"over the systems (mean {self.missing:.0%})")


CASES = (
    Case("cells_5pct", (20, 300, 5, 10), "cells", 0.05, 14),
    Case("system_items_30pct", (20, 300, 5, 10), "system_items", 0.30, 15),
)


def _keep(case: Case) -> np.ndarray:
    """Per record of the full crossing (C order over s, i, j, r): is it observed."""
    rng = np.random.default_rng([case.seed, 0])
    n_s, n_i, n_j, n_r = case.sizes
    if case.pattern == "cells":
        cells = rng.random((n_s, n_i, n_j)) >= case.missing
        return np.repeat(cells.ravel(), n_r)
    if case.pattern == "system_items":
        share = np.linspace(0.0, 2 * case.missing, n_s)[:, None]
        pairs = rng.random((n_s, n_i)) >= share
        return np.repeat(pairs.ravel(), n_j * n_r)
    msg = f"unknown missing pattern {case.pattern!r}"
    raise ValueError(msg)


def _scores(case: Case, draw: int) -> np.ndarray:
    """Scores of the full crossing (C order over s, i, j, r) from the true components."""
    rng = np.random.default_rng([case.seed, 1, draw])
    n_s, n_i, n_j, n_r = case.sizes
    shape = (n_s, n_i, n_j, n_r)
    sd = np.sqrt(COMPONENTS)
    y = np.full(shape, GRAND_MEAN)
    y += rng.normal(scale=sd[0], size=(n_s, 1, 1, 1))
    y += rng.normal(scale=sd[1], size=(1, n_i, 1, 1))
    y += rng.normal(scale=sd[2], size=(1, 1, n_j, 1))
    y += rng.normal(scale=sd[3], size=(n_s, n_i, 1, 1))
    y += rng.normal(scale=sd[4], size=(n_s, 1, n_j, 1))
    y += rng.normal(scale=sd[5], size=(1, n_i, n_j, 1))
    y += rng.normal(scale=sd[6], size=(n_s, n_i, n_j, 1))
    y += rng.normal(scale=sd[7], size=shape)
    return y.ravel()


def records(case: Case, draw: int = 0) -> pl.DataFrame:
    """The observed records of ``case`` (integer level codes per facet, ``score``); draw 0 is lme4's data."""
    keep = _keep(case)
    index = np.indices(case.sizes).reshape(4, -1)[:, keep]
    columns = {name: index[k].astype(np.int64) for k, name in enumerate(FACET_COLUMNS)}
    return pl.DataFrame({**columns, "score": _scores(case, draw)[keep]})


def rescored(frame: pl.DataFrame, case: Case, draw: int) -> pl.DataFrame:
    """``frame`` (``records(case)``) with the scores of another draw on the same records."""
    return frame.with_columns(score=pl.Series(_scores(case, draw)[_keep(case)]))


def checksum(frame: pl.DataFrame) -> dict[str, float]:
    """Row count, sum and sum of squares of the scores, and per facet the sum of (code + 1) x score.

    Enough to tell that a regenerated data set is the frozen one: the pattern
    (which records) and the scores (which values, on which levels).
    """
    y = frame.get_column("score").to_numpy()
    out: dict[str, float] = {"rows": float(frame.height), "sum": float(y.sum()), "sum_squares": float(y @ y)}
    for name in FACET_COLUMNS:
        out[f"sum_{name}_score"] = float((frame.get_column(name).to_numpy() + 1) @ y)
    return out
