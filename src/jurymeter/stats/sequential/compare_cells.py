r"""Per-unit cells of one judge's batched ratings and the batch-bootstrap draws that selection and the group contrasts share.

The naive side of :mod:`jurymeter.stats.sequential.compare` ([LiDing2026]_ section 4)
works on the sum :math:`S_b` and count :math:`C_b` of each unit's ratings in each
batch :math:`b`; a resample's mean is :math:`\sum_b W_{rb} S_b / \sum_b W_{rb} C_b` with
the multinomial weights ``W = rng.multinomial(n_b, [1 / n_b] * n_b, size=n_boot)``
(``rng = numpy.random.default_rng(seed)``, batches in sorted order). The model
side's draws of :math:`\theta` are those of
:func:`~jurymeter.stats.sequential.glmm.bootstrap_fits`.

References
----------
.. [LiDing2026] T. Li and J. Ding, "Trustworthy Method Comparison with AI Judges:
   Estimation and Design under Order, Batch, and Aggregation Effects", 2026
   (``papers/trustworthy-comparison-ai-judges.txt``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import polars as pl

from jurymeter.errors import ConfigError, DesignError
from jurymeter.stats.sequential.glmm import GLMMBootstrap, SequentialGLMM


@dataclass(frozen=True, slots=True)
class _Cells:
    """Per-batch sums and counts of the ratings of each unit."""

    units: tuple[str, ...]
    batches: tuple[str, ...]
    sums: np.ndarray  # (n_batches, n_units)
    counts: np.ndarray  # (n_batches, n_units)


def _unit_columns(unit: str | Sequence[str], fit: SequentialGLMM) -> tuple[str, ...]:
    cols = (unit,) if isinstance(unit, str) else tuple(unit)
    if not cols or not all(isinstance(c, str) for c in cols):
        msg = f"unit must be a column name or a non-empty sequence of them; got {unit!r}"
        raise ConfigError(msg)
    if cols != fit.unit_columns:
        msg = f"unit {list(cols)} differs from the fit's unit columns {list(fit.unit_columns)}"
        raise ConfigError(msg)
    return cols


def _cells(
    records: pl.DataFrame,
    units: tuple[str, ...] | None,
    cols: tuple[str, ...],
    batch_col: str,
    score_col: str,
) -> _Cells:
    """Sum and count of the non-null scores per (batch, unit), dense over ``units`` (default: those found)."""
    missing = [c for c in (batch_col, score_col, *cols) if c not in records.columns]
    if missing:
        msg = f"records lack the column(s) {missing}; needed: {[batch_col, score_col, *cols]}"
        raise DesignError(msg)
    label = (
        pl.col(cols[0]).cast(pl.String)
        if len(cols) == 1
        else pl.concat_str([pl.col(c).cast(pl.String) for c in cols], separator="/")
    )
    frame = records.select(
        pl.col(batch_col).cast(pl.String).alias("_b"),
        label.alias("_u"),
        pl.col(score_col).cast(pl.Float64).alias("_y"),
    ).filter(pl.col("_y").is_not_null() & pl.col("_y").is_not_nan() & pl.col("_b").is_not_null())
    found = set(frame["_u"].unique().to_list())
    if units is None:
        units = tuple(sorted(found))
        if not units:
            msg = "records hold no rating with a non-null score"
            raise DesignError(msg)
    if found != set(units):
        extra = sorted(str(u) for u in found - set(units))
        absent = sorted(set(units) - found)
        msg = f"records must be the ones the fit was fitted to: units not in the fit {extra[:5]}, fit units without a rating {absent[:5]}"
        raise DesignError(msg)
    batches = tuple(sorted(frame["_b"].unique().to_list()))
    b_code = (
        frame["_b"]
        .replace_strict(dict(zip(batches, range(len(batches)), strict=True)), return_dtype=pl.Int64)
        .to_numpy()
    )
    u_index = {u: i for i, u in enumerate(units)}
    u_code = frame["_u"].replace_strict(u_index, return_dtype=pl.Int64).to_numpy()
    n_b, n_u = len(batches), len(units)
    flat = b_code * n_u + u_code
    y = frame["_y"].to_numpy()
    sums = np.bincount(flat, weights=y, minlength=n_b * n_u).reshape(n_b, n_u)
    counts = np.bincount(flat, minlength=n_b * n_u).reshape(n_b, n_u).astype(np.float64)
    return _Cells(units=units, batches=batches, sums=sums, counts=counts)


def _weights(n_batches: int, n_boot: int, seed: int) -> np.ndarray:
    """The naive resample weights (module docstring): ``(n_boot, n_batches)`` multinomial counts."""
    rng = np.random.default_rng(seed)
    out: np.ndarray = rng.multinomial(
        n_batches, np.full(n_batches, 1.0 / n_batches), size=n_boot
    ).astype(np.float64)
    return out


def _check_boot(n_boot: int | None, seed: int, boot: GLMMBootstrap) -> int:
    n = boot.n_boot if n_boot is None else n_boot
    _check_resamples(n, seed, given=n_boot)
    return n


def _check_resamples(n_boot: object, seed: object, *, given: object) -> None:
    """``n_boot`` an integer >= 2 and ``seed`` one >= 0 (not bools); the message shows ``given``, the caller's ``n_boot``."""
    if isinstance(n_boot, bool) or not isinstance(n_boot, int) or n_boot < 2:
        msg = f"n_boot must be an integer >= 2; got {given!r}"
        raise ConfigError(msg)
    if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
        msg = f"seed must be an integer >= 0; got {seed!r}"
        raise ConfigError(msg)


def _theta_draws(fit: SequentialGLMM, boot: GLMMBootstrap) -> np.ndarray:
    """``(n_ok, n_units)`` bootstrap draws of theta, in the order of ``fit.units``."""
    index = {name: j for j, name in enumerate(boot.names)}
    wanted = [f"theta[{u}]" for u in fit.units]
    absent = [w for w in wanted if w not in index]
    if absent or boot.draws.shape[1] != len(boot.names):
        msg = f"boot does not hold draws of the fit's theta (missing {absent[:3]}): pass bootstrap_fits(records, fit)"
        raise DesignError(msg)
    out: np.ndarray = boot.draws[:, [index[w] for w in wanted]]
    return out


def _fit_cells(
    records: pl.DataFrame,
    fit: SequentialGLMM,
    boot: GLMMBootstrap,
    unit: str | Sequence[str],
    n_boot: int | None,
    seed: int,
) -> tuple[_Cells, int, np.ndarray, np.ndarray]:
    r"""What selection and the group contrasts start from: the checked unit columns and resample count.

    Returns the cells of ``fit.units`` (batch and score columns of the fit), the
    naive resample count (``boot``'s when ``n_boot`` is ``None``), the fit's
    :math:`\theta` and its bootstrap draws (:func:`_theta_draws`).
    """
    cols = _unit_columns(unit, fit)
    n_b = _check_boot(n_boot, seed, boot)
    cells = _cells(records, fit.units, cols, fit.columns[0], fit.columns[2])
    theta = np.asarray(fit.theta, dtype=np.float64)
    return cells, n_b, theta, _theta_draws(fit, boot)
