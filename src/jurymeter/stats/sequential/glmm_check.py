r"""The Markov GLMM's predictive check ([LiDing2026]_ figure 3): held-out batches against batches simulated from the fit.

The fitted model simulates the held-out batches (their units in their orders,
:func:`jurymeter.stats.sequential.simulate.draw_sequences`) many times; the
observed transition frequencies and plug-in conditional entropies (bits, as in
:mod:`jurymeter.stats.sequential.diagnostics`) are set against the prediction
intervals of the simulated ones, and the check reports which fall outside.

References
----------
.. [LiDing2026] T. Li and J. Ding, "Trustworthy Method Comparison with AI Judges:
   Estimation and Design under Order, Batch, and Aggregation Effects", 2026
   (``papers/trustworthy-comparison-ai-judges.txt``).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import polars as pl

from jurymeter.errors import ConfigError, DesignError
from jurymeter.stats.intervals import percentile_bounds
from jurymeter.stats.sequential.glmm_model import (
    PredictiveCheck,
    SequentialGLMM,
    _codes,
    _label,
    _rating_columns,
)
from jurymeter.stats.sequential.schemas import CHECK_SCHEMA
from jurymeter.stats.sequential.simulate import draw_sequences


def _transitions(codes: np.ndarray, n_cat: int) -> np.ndarray:
    r"""(S, C, C) :math:`P(Y_t = a \mid Y_{t-1} = b)` at ``[s, b, a]`` from codes (S, B, L), -1 missing."""
    prev, cur = codes[..., :-1], codes[..., 1:]
    ok = (prev >= 0) & (cur >= 0)
    n_s = codes.shape[0]
    s = np.broadcast_to(np.arange(n_s)[:, None, None], prev.shape)
    idx = (s * n_cat + prev) * n_cat + cur
    counts = np.bincount(idx[ok], minlength=n_s * n_cat * n_cat).reshape(n_s, n_cat, n_cat).astype(np.float64)
    rows = counts.sum(axis=2, keepdims=True)
    with np.errstate(invalid="ignore", divide="ignore"):
        out: np.ndarray = np.where(rows > 0, counts / np.where(rows > 0, rows, 1.0), np.nan)
    return out


def _conditional_entropy(codes: np.ndarray, n_cat: int, k: int) -> np.ndarray:
    r"""(S,) plug-in :math:`H(Y_t \mid Y_{t-1}, \dots, Y_{t-k})` in bits over windows of k+1 present ratings."""
    n_s, _, length = codes.shape
    if length <= k:
        return np.full(n_s, np.nan)
    ok = np.ones(codes[..., k:].shape, dtype=bool)
    ctx = np.zeros(codes[..., k:].shape, dtype=np.int64)
    for j in range(1, k + 1):
        lagged = codes[..., k - j : length - j]
        ok &= lagged >= 0
        ctx = ctx * n_cat + np.maximum(lagged, 0)
    cur = codes[..., k:]
    ok &= cur >= 0
    n_ctx = n_cat**k
    s = np.broadcast_to(np.arange(n_s)[:, None, None], cur.shape)
    idx = (s * n_ctx + ctx) * n_cat + cur
    joint = np.bincount(idx[ok], minlength=n_s * n_ctx * n_cat).reshape(n_s, n_ctx, n_cat).astype(np.float64)
    total = joint.sum(axis=(1, 2))
    marg = joint.sum(axis=2, keepdims=True)
    with np.errstate(invalid="ignore", divide="ignore"):
        terms = np.where(joint > 0, joint * np.log2(np.where(joint > 0, marg / np.where(joint > 0, joint, 1.0), 1.0)), 0.0)
        out: np.ndarray = np.where(total > 0, terms.sum(axis=(1, 2)) / np.where(total > 0, total, 1.0), np.nan)
    return out


def predictive_check(
    fit: SequentialGLMM,
    held_out: pl.DataFrame,
    *,
    n_sim: int = 200,
    seed: int = 0,
    level: float = 0.95,
    max_order: int = 3,
) -> PredictiveCheck:
    r"""Simulate held-out batches from the fit and compare their serial statistics ([LiDing2026]_ figure 3).

    The held-out batches keep their own orders (units and positions); every
    simulated set draws fresh batch intercepts :math:`u_b \sim N(0, \hat\sigma^2)`
    and then, position by position, each rating that the fit would treat as a
    response (one with :math:`K` present predecessors) from the fitted model;
    the conditioning ratings (the first :math:`K` of a batch unless the fit's
    ``initial_condition`` is ``"model"``, and those after a gap) keep their
    observed values. On the observed and on each
    simulated set it computes every transition term
    :math:`P(Y_t = a \mid Y_{t-1} = b)` (consecutive present ratings of one
    batch) and the plug-in conditional entropies
    :math:`H(Y_t \mid Y_{t-1}, \dots, Y_{t-k})`, :math:`k = 1..` ``max_order``,
    in bits, over windows of :math:`k + 1` consecutive present ratings.

    Parameters
    ----------
    fit : SequentialGLMM
        The fitted model.
    held_out : polars.DataFrame
        Batches not used by the fit, with the fit's columns; every unit and
        every response position must be among the fit's.
    n_sim : int, default 200
        Simulated sets.
    seed : int, default 0
        Seed of the simulations.
    level : float, default 0.95
        Prediction-interval level (equal tails, of the simulated values).
    max_order : int, default 3
        Largest :math:`k` of the entropies.

    Returns
    -------
    PredictiveCheck

    Raises
    ------
    DesignError
        Missing columns, duplicate (batch, position) pairs, a unit or position
        the fit does not have, or a score outside the fit's categories.
    ConfigError
        ``n_sim``, ``level`` or ``max_order`` out of range.
    """
    if not isinstance(n_sim, int) or n_sim < 2:
        msg = f"n_sim must be an integer >= 2; got {n_sim!r}"
        raise ConfigError(msg)
    if not 0.0 < level < 1.0:
        msg = f"level must be in (0, 1); got {level!r}"
        raise ConfigError(msg)
    if not isinstance(max_order, int) or not 1 <= max_order <= 4:
        msg = f"max_order must be an integer from 1 to 4; got {max_order!r}"
        raise ConfigError(msg)
    y_obs, u_code, resp = _held_out_grid(fit, held_out)
    pos_eff = _position_grid(fit, resp)
    present = np.isfinite(y_obs)
    cats = np.asarray(fit.categories)
    if not np.isin(y_obs[present], cats).all() and fit.response == "binary":
        msg = "held_out scores must be 0/1 for a binary fit"
        raise DesignError(msg)
    levels = np.union1d(cats, y_obs[present])
    sims = _simulate_held_out(fit, y_obs, u_code, resp, pos_eff, n_sim, seed)
    return _check_table(y_obs, sims, levels, level, n_sim, max_order)


def _held_out_grid(fit: SequentialGLMM, held_out: pl.DataFrame) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The held-out ratings as (batch, position) grids: scores (NaN where absent), unit codes, and which are responses."""
    batch_col, pos_col, score_col = fit.columns
    missing = [c for c in (batch_col, pos_col, *fit.unit_columns, score_col) if c not in held_out.columns]
    if missing:
        msg = f"held_out must have the fit's columns; missing {missing}"
        raise DesignError(msg)
    frame = held_out.select(*_rating_columns(fit.columns, fit.unit_columns)).filter(pl.col("_y").is_not_null() & pl.col("_y").is_finite())
    if frame.height == 0 or frame.select(pl.struct("_b", "_t").is_duplicated().any()).item():
        msg = f"held_out must have ratings, one per ({batch_col}, {pos_col})"
        raise DesignError(msg)
    batch_ids, b_code = _codes(frame["_b"].to_numpy().astype(str))
    t = frame["_t"].to_numpy()
    if t.min() < 0:
        msg = f"{pos_col!r} must be >= 0"
        raise DesignError(msg)
    length = int(t.max()) + 1
    n_b = batch_ids.size
    y_obs = np.full((n_b, length), np.nan)
    y_obs[b_code, t] = frame["_y"].to_numpy()
    units = np.asarray(frame["_u"].to_numpy().astype(str))
    unit_index = {u: i for i, u in enumerate(fit.units)}
    u_code = np.full((n_b, length), -1, dtype=np.int64)
    u_code[b_code, t] = [unit_index.get(u, -1) for u in units]
    present = np.isfinite(y_obs)
    resp = present.copy()
    if fit.initial_condition != "model":
        resp[:, : fit.lags] = False  # conditioning ratings keep their observed values
    for k in range(1, fit.lags + 1):
        resp[:, k:] &= present[:, :-k]
    if (u_code[resp] < 0).any():
        unknown = sorted({u for u, i in zip(units, u_code[b_code, t], strict=True) if i < 0})
        msg = f"held_out has units the fit does not have: {unknown[:5]}"
        raise DesignError(msg)
    return y_obs, u_code, resp


def _position_grid(fit: SequentialGLMM, resp: np.ndarray) -> np.ndarray:
    """The fitted position effect of every held-out position (0 without position effects); checked on the responses."""
    n_b, length = resp.shape
    pos_eff = np.full(length, np.nan)
    if fit.position_effects_fitted:
        for p, v in zip(fit.positions, fit.position_effects, strict=True):
            if p < length:
                pos_eff[p] = v
        pos_grid = np.broadcast_to(pos_eff[None, :], (n_b, length))
        if np.isnan(pos_grid[resp]).any():
            bad = sorted({int(p) for p in np.nonzero(resp & np.isnan(pos_grid))[1]})
            msg = f"held_out has response positions the fit does not have: {bad[:5]}"
            raise DesignError(msg)
    else:
        pos_eff[:] = 0.0
    return pos_eff


def _simulate_held_out(
    fit: SequentialGLMM,
    y_obs: np.ndarray,
    u_code: np.ndarray,
    resp: np.ndarray,
    pos_eff: np.ndarray,
    n_sim: int,
    seed: int,
) -> np.ndarray:
    """``n_sim`` simulated copies of the held-out batches: fresh batch intercepts, the responses drawn, the rest observed."""
    n_b = y_obs.shape[0]
    present = np.isfinite(y_obs)
    cats = np.asarray(fit.categories)
    theta = np.asarray(fit.theta)
    base = theta[np.maximum(u_code, 0)] + pos_eff[None, :]
    if fit.initial:
        # Wooldridge: the batch's first K present ratings (by position) shift all its responses
        first = np.argsort(~present, axis=1, kind="stable")[:, : fit.lags]
        init = np.nan_to_num(np.take_along_axis(y_obs, first, axis=1))
        base = base + (init @ np.asarray(fit.initial))[:, None]
    eta = np.where(resp, base, np.nan)
    rng = np.random.default_rng(seed)
    u = fit.batch_sd * rng.standard_normal((n_sim, n_b))
    eta_s = eta[None, :, :] + u[:, :, None]
    fixed = np.broadcast_to(np.where(resp, np.nan, y_obs)[None], eta_s.shape)
    return draw_sequences(
        eta_s,
        rho=np.asarray(fit.rho),
        cutpoints=np.asarray(fit.cutpoints) if fit.response == "ordinal" else None,
        rng=rng,
        fixed=fixed,
        simulate=np.broadcast_to(resp[None], eta_s.shape),
        levels=cats if fit.response == "ordinal" else None,
    )


def _check_table(
    y_obs: np.ndarray, sims: np.ndarray, levels: np.ndarray, level: float, n_sim: int, max_order: int
) -> PredictiveCheck:
    """Observed transition frequencies and conditional entropies against the simulated ones' percentile intervals."""
    n_b = y_obs.shape[0]

    def code(v: np.ndarray) -> np.ndarray:
        idx = np.searchsorted(levels, np.nan_to_num(v, nan=levels[0]))
        return np.where(np.isfinite(v), idx, -1).astype(np.int64)

    obs_codes = code(y_obs)[None]
    sim_codes = code(sims)
    n_cat = levels.size
    rows: list[dict[str, Any]] = []

    def add(stat: str, name: str, order: int, prev: str | None, cur: str | None, obs: float, sim: np.ndarray) -> None:
        finite = sim[np.isfinite(sim)]
        mean = float(finite.mean()) if finite.size else math.nan
        bounds = percentile_bounds(sim, level)  # the simulations that define the statistic; NaN if none does
        low, high = float(bounds[0]), float(bounds[1])
        outside = None if not (np.isfinite(obs) and np.isfinite(low)) else bool(obs < low or obs > high)
        rows.append(
            {"statistic": stat, "name": name, "order": order, "previous": prev, "current": cur,
             "observed": obs, "sim_mean": mean, "low": low, "high": high, "outside": outside}
        )

    t_obs = _transitions(obs_codes, n_cat)[0]
    t_sim = _transitions(sim_codes, n_cat)
    for bi in range(n_cat):
        for ai in range(n_cat):
            a_l, b_l = _label(float(levels[ai])), _label(float(levels[bi]))
            add("transition", f"P(Y_t={a_l} | Y_t-1={b_l})", 1, b_l, a_l, float(t_obs[bi, ai]), t_sim[:, bi, ai])
    for k in range(1, max_order + 1):
        h_obs = float(_conditional_entropy(obs_codes, n_cat, k)[0])
        ctx = "Y_t-1" if k == 1 else f"Y_t-1..Y_t-{k}"
        add("entropy", f"H(Y_t | {ctx})", k, None, None, h_obs, _conditional_entropy(sim_codes, n_cat, k))
    table = pl.DataFrame(rows, schema=CHECK_SCHEMA).with_columns(
        pl.col("observed", "sim_mean", "low", "high").fill_nan(None)
    )
    return PredictiveCheck(
        table=table,
        n_sim=n_sim,
        level=float(level),
        n_batches=int(n_b),
        n_outside=int(table["outside"].fill_null(False).sum()),
    )
