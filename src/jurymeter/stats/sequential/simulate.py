r"""Ratings drawn from the Markov GLMM of sequential judging ([LiDing2026]_).

A judge rates the units of batch :math:`b` in the order ``orders[b]``; the rating
at position :math:`t` of the batch, of unit :math:`i = \text{orders}[b, t]`, has the
linear predictor

.. math::

    \eta_{bt} = \theta_i + \pi_t + \sum_{k=1}^{K} \rho_k\, Y_{b,t-k} + u_b,
    \qquad u_b \sim N(0, \sigma^2),

with the lagged ratings entering as numbers on the rating scale (0/1 for binary,
1..C for ordinal) and a lag that reaches before the batch's first rating
contributing nothing (the first :math:`K` ratings have fewer predecessors).

- binary: :math:`P(Y_{bt} = 1) = \operatorname{logit}^{-1}(\eta_{bt})`;
- ordinal, categories :math:`1..C` with increasing cutpoints
  :math:`\alpha_1 < \dots < \alpha_{C-1}`:
  :math:`P(Y_{bt} \le c) = \operatorname{logit}^{-1}(\alpha_c - \eta_{bt})`
  (the sign of ``ordinal::clmm``: a larger :math:`\eta` means higher ratings).

This is the generative model :func:`jurymeter.stats.sequential.glmm.fit_sequential_glmm`
estimates; the fit conditions on each batch's first :math:`K` ratings, so the
convention for missing lags here does not enter the likelihood it maximizes.

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
from numpy.typing import ArrayLike
from scipy.special import expit

from jurymeter.errors import SimulationError

__all__ = ["simulate_sequential"]


def draw_sequences(
    eta: np.ndarray,
    *,
    rho: np.ndarray,
    cutpoints: np.ndarray | None,
    rng: np.random.Generator,
    fixed: np.ndarray | None = None,
    simulate: np.ndarray | None = None,
    levels: np.ndarray | None = None,
) -> np.ndarray:
    r"""Draw rating sequences position by position, vectorized over every leading axis.

    Parameters
    ----------
    eta : numpy.ndarray
        ``(..., L)`` linear predictor without the lag terms (unit quality,
        position effect and batch intercept); NaN where a batch has no rating.
    rho : numpy.ndarray
        ``(K,)`` lag coefficients.
    cutpoints : numpy.ndarray or None
        ``(C - 1,)`` increasing cutpoints (ordinal, ratings ``1..C``), or ``None``
        (binary, ratings 0/1).
    rng : numpy.random.Generator
        Source of the uniform draws (one ``eta.shape``-sized array per position).
    fixed : numpy.ndarray, optional
        ``(..., L)`` values kept where ``simulate`` is false (the conditioned
        initial ratings of a predictive check).
    simulate : numpy.ndarray, optional
        ``(..., L)`` bool: where to draw (default: wherever ``eta`` is finite).
    levels : numpy.ndarray, optional
        ``(C,)`` the values of the ordinal categories (default ``1..C``): the
        rating drawn in category ``c`` is ``levels[c - 1]``, and enters later
        lags as that number.

    Returns
    -------
    numpy.ndarray
        ``(..., L)`` float64 ratings, NaN where a batch has no rating. A lag
        that reaches before position 0 contributes 0; a lag that meets a NaN
        (a missing rating) is NaN and so is the rating (callers simulate only
        where every lag is present).
    """
    shape = eta.shape
    length = shape[-1]
    todo = np.isfinite(eta) if simulate is None else simulate
    y = np.full(shape, np.nan) if fixed is None else np.array(fixed, dtype=np.float64)
    k_lags = rho.shape[0]
    for t in range(length):
        u = rng.random(shape[:-1])
        mask = todo[..., t]
        if not mask.any():
            continue
        lin = eta[..., t].copy()
        for k in range(1, min(k_lags, t) + 1):
            lin = lin + rho[k - 1] * y[..., t - k]
        if cutpoints is None:
            draw = (u < expit(lin)).astype(np.float64)
        else:
            # Y = 1 + #{c : U > P(Y <= c)}: the inverse-CDF draw of the cumulative logit.
            cdf = expit(cutpoints[None, :] - lin.reshape(-1, 1)).reshape((*lin.shape, -1))
            index = (u[..., None] > cdf).sum(axis=-1)
            draw = 1.0 + index if levels is None else levels[index]
            draw = np.where(np.isfinite(lin), draw, np.nan)
        y[..., t] = np.where(mask, draw, y[..., t])
    return y


def simulate_sequential(
    theta: ArrayLike,
    orders: ArrayLike,
    *,
    rng: np.random.Generator | int,
    position_effects: ArrayLike | None = None,
    rho: Sequence[float] = (),
    batch_sd: float = 0.0,
    cutpoints: Sequence[float] | None = None,
    unit: str = "item_id",
    unit_ids: Sequence[str] | None = None,
    batch_ids: Sequence[str] | None = None,
) -> pl.DataFrame:
    r"""Ratings of batches drawn from the Markov GLMM (module docstring).

    Parameters
    ----------
    theta : array_like
        ``(U,)`` unit qualities on the logit scale.
    orders : array_like
        ``(B, L)`` integer unit indices: ``orders[b, t]`` is the unit rated at
        position ``t`` of batch ``b`` (a unit may appear several times).
    rng : numpy.random.Generator or int
        The random source, or a seed for :func:`numpy.random.default_rng`; the
        draws are the batch intercepts (``B`` normals) and then one uniform per
        batch and position, position by position, so a seed fixes the output.
    position_effects : array_like, optional
        ``(L,)`` effect of each batch position (default all 0).
    rho : sequence of float, default ()
        Lag coefficients :math:`\rho_1, \dots, \rho_K` (``K`` from 0 to 3).
    batch_sd : float, default 0.0
        :math:`\sigma`, the standard deviation of the batch intercept.
    cutpoints : sequence of float, optional
        Strictly increasing :math:`\alpha_1 < \dots < \alpha_{C-1}`: ordinal
        ratings ``1..C``. ``None`` (the default): binary ratings 0/1.
    unit : str, default "item_id"
        Name of the unit column of the result.
    unit_ids : sequence of str, optional
        Unit labels (default ``u00, u01, ...``, zero-padded so they sort in order).
    batch_ids : sequence of str, optional
        Batch labels (default ``b000, b001, ...``).

    Returns
    -------
    polars.DataFrame
        One row per rating, sorted by batch and position: ``batch_id`` (String),
        ``batch_position`` (Int64, 0-based), ``unit`` (String), ``score``
        (Float64: 0/1, or 1..C).

    Raises
    ------
    SimulationError
        Shapes that do not agree, a unit index out of range, more than 3 lags,
        a negative ``batch_sd`` or cutpoints that do not increase.

    Examples
    --------
    >>> frame = simulate_sequential([0.0, 1.0], [[0, 1], [1, 0]], rng=1, rho=[0.5])
    >>> frame.columns, frame.height
    (['batch_id', 'batch_position', 'item_id', 'score'], 4)
    """
    model = _checked_model(theta, orders, position_effects=position_effects, rho=rho, batch_sd=batch_sd,
                           cutpoints=cutpoints, unit_ids=unit_ids, batch_ids=batch_ids)
    th, od, pos, rho_a, cuts = model.theta, model.orders, model.position_effects, model.rho, model.cutpoints
    n_batch, length = od.shape
    generator = rng if isinstance(rng, np.random.Generator) else np.random.default_rng(rng)

    u = batch_sd * np.asarray(generator.standard_normal(n_batch), dtype=np.float64)
    eta = th[od] + pos[None, :] + u[:, None]
    y = draw_sequences(eta, rho=rho_a, cutpoints=cuts, rng=generator)
    unit_names = np.asarray(model.units, dtype=object)[od.ravel()]
    return pl.DataFrame(
        {
            "batch_id": np.repeat(np.asarray(model.batches, dtype=object), length).tolist(),
            "batch_position": np.tile(np.arange(length, dtype=np.int64), n_batch),
            unit: unit_names.tolist(),
            "score": y.ravel(),
        },
        schema={"batch_id": pl.String, "batch_position": pl.Int64, unit: pl.String, "score": pl.Float64},
    )


@dataclass(frozen=True, slots=True)
class _Model:
    """:func:`simulate_sequential`'s arguments as checked arrays and labels."""

    theta: np.ndarray
    orders: np.ndarray
    position_effects: np.ndarray
    rho: np.ndarray
    cutpoints: np.ndarray | None
    units: list[str]
    batches: list[str]


def _checked_model(
    theta: ArrayLike,
    orders: ArrayLike,
    *,
    position_effects: ArrayLike | None,
    rho: Sequence[float],
    batch_sd: float,
    cutpoints: Sequence[float] | None,
    unit_ids: Sequence[str] | None,
    batch_ids: Sequence[str] | None,
) -> _Model:
    """The arguments checked in the order of the signature, each failure one ``SimulationError`` line."""
    th = np.asarray(theta, dtype=np.float64)
    od = np.asarray(orders)
    if th.ndim != 1 or th.size == 0 or not np.all(np.isfinite(th)):
        msg = f"theta must be a non-empty 1-d array of finite numbers; got shape {th.shape}"
        raise SimulationError(msg)
    if od.ndim != 2 or od.size == 0 or not np.issubdtype(od.dtype, np.integer):
        msg = f"orders must be a non-empty 2-d integer array (batches x positions); got {od.dtype} shape {od.shape}"
        raise SimulationError(msg)
    if od.min() < 0 or od.max() >= th.size:
        msg = f"orders must hold unit indices in 0..{th.size - 1}; got {od.min()}..{od.max()}"
        raise SimulationError(msg)
    n_batch, length = od.shape
    pos = np.zeros(length) if position_effects is None else np.asarray(position_effects, dtype=np.float64)
    if pos.shape != (length,) or not np.all(np.isfinite(pos)):
        msg = f"position_effects must have one finite value per position ({length}); got shape {pos.shape}"
        raise SimulationError(msg)
    rho_a = np.asarray(list(rho), dtype=np.float64).reshape(-1)
    if rho_a.size > 3 or not np.all(np.isfinite(rho_a)):
        msg = f"rho must hold at most 3 finite lag coefficients; got {list(rho)}"
        raise SimulationError(msg)
    if not (np.isfinite(batch_sd) and batch_sd >= 0.0):
        msg = f"batch_sd must be a finite number >= 0; got {batch_sd!r}"
        raise SimulationError(msg)
    cuts: np.ndarray | None = None
    if cutpoints is not None:
        cuts = np.asarray(list(cutpoints), dtype=np.float64)
        if cuts.ndim != 1 or cuts.size == 0 or not np.all(np.diff(cuts) > 0) or not np.all(np.isfinite(cuts)):
            msg = f"cutpoints must be a non-empty strictly increasing sequence; got {list(cutpoints)}"
            raise SimulationError(msg)
    units = [f"u{i:0{max(2, len(str(th.size - 1)))}d}" for i in range(th.size)] if unit_ids is None else list(unit_ids)
    batches = [f"b{b:0{max(3, len(str(n_batch - 1)))}d}" for b in range(n_batch)] if batch_ids is None else list(batch_ids)
    if len(units) != th.size or len(batches) != n_batch:
        msg = f"unit_ids must have {th.size} labels and batch_ids {n_batch}; got {len(units)} and {len(batches)}"
        raise SimulationError(msg)
    return _Model(theta=th, orders=od, position_effects=pos, rho=rho_a, cutpoints=cuts, units=units,
                  batches=batches)
