"""The columns of the sequential analysis's tables, in one light module (polars only).

Each statistics module of :mod:`jurymeter.stats.sequential` builds its frames
with these schemas, and the analysis (:mod:`jurymeter.analyses.sequential`)
declares its published tables with them without importing the statistics
(planning imports every analysis and stays light).
"""

from __future__ import annotations

import polars as pl

# diagnostics
ENTROPY_SCHEMA: dict[str, pl.DataType] = {
    "lag": pl.Int64(),
    "n_positions": pl.Int64(),
    "n_histories": pl.Int64(),
    "entropy": pl.Float64(),
    "entropy_low": pl.Float64(),
    "entropy_high": pl.Float64(),
    "reason": pl.String(),
}

# diagnostics
TRANSITION_SCHEMA: dict[str, pl.DataType] = {
    "previous": pl.Float64(),
    "current": pl.Float64(),
    "count": pl.Int64(),
    "n_previous": pl.Int64(),
    "probability": pl.Float64(),
    "probability_low": pl.Float64(),
    "probability_high": pl.Float64(),
    "reason": pl.String(),
}

# diagnostics
SERIAL_CONTRAST_SCHEMA: dict[str, pl.DataType] = {
    "n_pairs": pl.Int64(),
    "serial_contrast": pl.Float64(),
    "serial_contrast_low": pl.Float64(),
    "serial_contrast_high": pl.Float64(),
    "reason": pl.String(),
}

# glmm
COEFFICIENT_SCHEMA: dict[str, pl.DataType] = {
    "name": pl.String(),
    "term": pl.String(),
    "level": pl.String(),
    "estimate": pl.Float64(),
    "fixed": pl.Boolean(),
}

# glmm
BOOTSTRAP_SCHEMA: dict[str, pl.DataType] = {
    "name": pl.String(),
    "term": pl.String(),
    "level": pl.String(),
    "estimate": pl.Float64(),
    "se": pl.Float64(),
    "low": pl.Float64(),
    "high": pl.Float64(),
}

# glmm
CHECK_SCHEMA: dict[str, pl.DataType] = {
    "statistic": pl.String(),
    "name": pl.String(),
    "order": pl.Int64(),
    "previous": pl.String(),
    "current": pl.String(),
    "observed": pl.Float64(),
    "sim_mean": pl.Float64(),
    "low": pl.Float64(),
    "high": pl.Float64(),
    "outside": pl.Boolean(),
}

# compare
SELECTION_SCHEMA: dict[str, pl.DataType] = {
    "method": pl.String(),
    "k": pl.Int64(),
    "units": pl.List(pl.String()),
    "stability": pl.Float64(),
    "n_resamples": pl.Int64(),
}
"""Columns of :attr:`TopSelection.table`: one row per method and k."""

# compare
GROUP_CONTRAST_SCHEMA: dict[str, pl.DataType] = {
    "method": pl.String(),
    "estimate": pl.Float64(),
    "se": pl.Float64(),
    "z": pl.Float64(),
    "p_value": pl.Float64(),
    "outcome": pl.String(),
    "n_resamples": pl.Int64(),
    "reason": pl.String(),
}
"""Columns of :attr:`GroupComparison.table`: one row per method (naive, model)."""

# plans
BATCH_PLAN_SCHEMA: dict[str, pl.DataType] = {
    "batch_id": pl.String(),
    "batch_position": pl.Int64(),
    "item_id": pl.String(),
    "judge_id": pl.String(),
}
"""The columns of :func:`batch_plan`'s table (``item_id`` renamed when ``unit`` says so)."""
