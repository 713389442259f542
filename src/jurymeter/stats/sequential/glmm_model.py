r"""The Markov GLMM of sequential judging, its data and design: results, records to batches, the design matrices.

The model, its identification (treatment contrasts, as ``lme4::glmer`` and
``ordinal::clmm``) and the three initial conditions (``model``, ``condition``,
``wooldridge`` [Wooldridge2005]_) are in :mod:`jurymeter.stats.sequential.glmm`
([LiDing2026]_ abstract and figure 3). Here: the frozen results
(:class:`SequentialGLMM`, :class:`GLMMBootstrap`, :class:`PredictiveCheck`),
one judge's ratings coded into batches and positions with their lags
(:func:`_prepare`), the separation check (a unit or position whose every
response is in one extreme category has an infinite estimate) and the design
(:class:`_Design`: the columns of :math:`\theta`, :math:`\pi`, :math:`\rho` and
the Wooldridge covariates, one row per response).

References
----------
.. [LiDing2026] T. Li and J. Ding, "Trustworthy Method Comparison with AI Judges:
   Estimation and Design under Order, Batch, and Aggregation Effects", 2026
   (``papers/trustworthy-comparison-ai-judges.txt``).
.. [Wooldridge2005] J. M. Wooldridge, "Simple solutions to the initial conditions
   problem in dynamic, nonlinear panel data models with unobserved heterogeneity",
   Journal of Applied Econometrics 20, 2005.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

import numpy as np
import polars as pl

from jurymeter.errors import DesignError, JurymeterError

Response = Literal["auto", "binary", "ordinal"]
Initial = Literal["model", "condition", "wooldridge"]


class GLMMConvergenceError(JurymeterError):
    """A Markov GLMM fit did not converge, or its maximum-likelihood estimate is not finite."""


@dataclass(frozen=True, slots=True)
class SequentialGLMM:
    r"""A fitted Markov GLMM (module docstring for the model and its constraints).

    Attributes
    ----------
    response : {"binary", "ordinal"}
        The model fitted.
    lags : int
        :math:`K`.
    units : tuple of str
        Unit labels, sorted; the order of ``theta``.
    theta : tuple of float
        :math:`\theta_i` per unit (ordinal: the first unit's is 0).
    positions : tuple of int
        The modelled positions (those of responses), sorted; the first is the reference.
    position_effects : tuple of float
        :math:`\pi_t` per modelled position (the first is 0); all 0 and one
        position when the fit had ``position_effects=False``.
    rho : tuple of float
        :math:`\rho_1, \dots, \rho_K`.
    initial : tuple of float
        :math:`\gamma_1, \dots, \gamma_K`, the coefficients of the batch's
        first ``K`` ratings (``initial_condition == "wooldridge"``); ``()`` otherwise.
    initial_condition : {"model", "condition", "wooldridge"}
        How the first ratings of a batch were handled (``fit_sequential_glmm``).
    categories : tuple of float
        The response categories (binary: ``(0.0, 1.0)``).
    cutpoints : tuple of float
        :math:`\alpha_1 < \dots < \alpha_{C-1}` (ordinal); ``()`` for binary.
    batch_sd : float
        :math:`\hat\sigma \ge 0` (0 when ``random_intercept`` is false).
    loglik : float
        The maximized (quadrature) log-likelihood, conditional on the initial ratings.
    n_batches, n_obs, n_conditioned : int
        Batches with at least one response; responses; ratings used only as lags.
    n_agq : int
        Quadrature nodes (1 when ``random_intercept`` is false: the integral is trivial).
    random_intercept, position_effects_fitted : bool
        The options of the fit.
    n_iter : int
        Optimizer iterations.
    gradient_norm : float
        Euclidean norm of the log-likelihood gradient at the estimate.
    message : str
        The optimizer's message.
    columns : tuple of str
        ``(batch, position, score)`` column names of the records.
    unit_columns : tuple of str
        The column(s) whose values make a unit (joined with ``"/"`` when several).
    table : polars.DataFrame
        :data:`COEFFICIENT_SCHEMA`: one row per coefficient (``term`` one of
        ``theta``, ``position``, ``rho``, ``initial``, ``cutpoint``,
        ``batch_sd``; ``name`` like ``theta[u03]``, ``position[4]``, ``rho_1``,
        ``initial_1``, ``cutpoint[2|3]``, ``batch_sd``; ``fixed`` marks a value set by the constraints).
    """

    response: Literal["binary", "ordinal"]
    lags: int
    units: tuple[str, ...]
    theta: tuple[float, ...]
    positions: tuple[int, ...]
    position_effects: tuple[float, ...]
    rho: tuple[float, ...]
    initial: tuple[float, ...]
    initial_condition: Initial
    categories: tuple[float, ...]
    cutpoints: tuple[float, ...]
    batch_sd: float
    loglik: float
    n_batches: int
    n_obs: int
    n_conditioned: int
    n_agq: int
    random_intercept: bool
    position_effects_fitted: bool
    n_iter: int
    gradient_norm: float
    message: str
    columns: tuple[str, str, str]
    unit_columns: tuple[str, ...]
    table: pl.DataFrame = field(repr=False)


@dataclass(frozen=True, slots=True)
class GLMMBootstrap:
    """Batch-bootstrap refits of a Markov GLMM.

    Attributes
    ----------
    draws : numpy.ndarray
        ``(n_ok, len(names))`` float64: the coefficients of each successful refit,
        in the row order of the fit's ``table``.
    names : tuple of str
        The coefficient names (``SequentialGLMM.table["name"]``).
    table : polars.DataFrame
        :data:`BOOTSTRAP_SCHEMA`: the full fit's estimate, the bootstrap standard
        error (sd of the draws) and the percentile interval at ``level``; null
        ``se``/``low``/``high`` for the values fixed by the constraints.
    n_boot : int
        Resamples drawn.
    n_failed : int
        Resamples whose refit failed (separation in the resample, a unit or
        position absent from it, no convergence); left out of ``draws``.
    failures : tuple of str
        The distinct reasons of the failures.
    level : float
        Interval level.
    seed : int
        The seed the resamples were derived from.
    """

    draws: np.ndarray
    names: tuple[str, ...]
    table: pl.DataFrame
    n_boot: int
    n_failed: int
    failures: tuple[str, ...]
    level: float
    seed: int


@dataclass(frozen=True, slots=True)
class PredictiveCheck:
    r"""The predictive check of [LiDing2026]_ figure 3.

    Attributes
    ----------
    table : polars.DataFrame
        :data:`CHECK_SCHEMA`: one row per transition term
        :math:`P(Y_t = a \mid Y_{t-1} = b)` (``statistic = "transition"``,
        ``previous`` = b, ``current`` = a, ``order`` 1) and per conditional
        entropy :math:`H(Y_t \mid Y_{t-1}, \dots, Y_{t-k})` in bits
        (``statistic = "entropy"``, ``order`` = k): the value observed on the
        held-out batches, the mean and the ``level`` prediction interval over
        the simulated sets, and whether the observed value is outside it.
    n_sim : int
        Simulated sets.
    level : float
        Interval level.
    n_batches : int
        Held-out batches.
    n_outside : int
        Terms outside their interval.
    """

    table: pl.DataFrame
    n_sim: int
    level: float
    n_batches: int
    n_outside: int


@dataclass(frozen=True, slots=True)
class _Data:
    """The responses of a fit as integer codes (compact and picklable: what a bootstrap task ships)."""

    response: Literal["binary", "ordinal"]
    lags: int
    units: tuple[str, ...]
    positions: tuple[int, ...]
    categories: tuple[float, ...]
    batch_ids: tuple[str, ...]
    unit_code: np.ndarray  # (n,) 0..U-1
    pos_code: np.ndarray  # (n,) 0..P-1 (all 0 without position effects)
    lag_values: np.ndarray  # (n, K)
    init_values: np.ndarray  # (n, K) the batch's first K ratings (Wooldridge), or (n, 0)
    cat: np.ndarray  # (n,) 0..C-1
    batch: np.ndarray  # (n,) 0..B-1, non-decreasing
    position_effects: bool
    n_conditioned: int


def _unit_expr(unit: tuple[str, ...]) -> pl.Expr:
    if len(unit) == 1:
        return pl.col(unit[0]).cast(pl.String)
    return pl.concat_str([pl.col(c).cast(pl.String) for c in unit], separator="/")


def _codes(values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    levels, inverse = np.unique(values, return_inverse=True)
    return levels, inverse.astype(np.int64)


def _prepare(
    records: pl.DataFrame,
    *,
    lags: int,
    unit: tuple[str, ...],
    response: Response,
    position_effects: bool,
    columns: tuple[str, str, str],
    initial: Initial = "model",
) -> _Data:
    """One judge's ratings as the fit's data: batches, units, positions, categories, lags (and the Wooldridge covariates)."""
    frame = _ratings(records, unit, columns)
    kind = _response_kind(frame["_y"].to_numpy(), response)
    resp, lag_names = _responses(frame, lags, initial)
    batch_ids, batch = _codes(resp["_b"].to_numpy().astype(str))
    if batch_ids.size < 2:
        msg = f"the batch intercept needs at least 2 batches with responses; got {batch_ids.size}"
        raise DesignError(msg)
    units, unit_code = _codes(resp["_u"].to_numpy().astype(str))
    y = resp["_y"].to_numpy()
    categories, cat = _codes(y)
    if categories.size < 2:
        msg = f"the responses must use at least 2 categories; all are {categories[0]:g}"
        raise DesignError(msg)
    if kind == "binary":
        categories, cat = np.array([0.0, 1.0]), y.astype(np.int64)
    t = resp["_t"].to_numpy()
    if position_effects:
        positions, pos_code = _codes(t)
    else:
        positions, pos_code = np.array([int(t.min())]), np.zeros(t.size, dtype=np.int64)
    lag_values = resp.select(lag_names).to_numpy().astype(np.float64)
    init_values = _initial_values(frame, resp, lags) if initial == "wooldridge" else np.zeros((resp.height, 0))
    flat = [k + 1 for k in range(lags) if np.ptp(lag_values[:, k]) == 0.0]
    if flat:
        msg = f"lag(s) {flat} take one value in every response: rho is not identified"
        raise DesignError(msg)
    return _Data(
        response=kind,
        lags=lags,
        units=tuple(str(u) for u in units),
        positions=tuple(int(p) for p in positions),
        categories=tuple(float(c) for c in categories),
        batch_ids=tuple(str(b) for b in batch_ids),
        unit_code=unit_code,
        pos_code=pos_code,
        lag_values=lag_values,
        init_values=init_values,
        cat=cat,
        batch=batch,
        position_effects=position_effects,
        n_conditioned=frame.height - resp.height,
    )


def _rating_columns(columns: tuple[str, str, str], unit: tuple[str, ...]) -> tuple[pl.Expr, ...]:
    """A frame's ratings as ``_b`` (batch, text), ``_t`` (position), ``_u`` (unit label), ``_y`` (score, float).

    ``columns`` are the batch, position and score columns (:attr:`SequentialGLMM.columns`):
    what the fit reads of its records and the predictive check of its held-out batches.
    """
    batch_col, pos_col, score_col = columns
    return (
        pl.col(batch_col).cast(pl.String).alias("_b"),
        pl.col(pos_col).cast(pl.Int64).alias("_t"),
        _unit_expr(unit).alias("_u"),
        pl.col(score_col).cast(pl.Float64).alias("_y"),
    )


def _ratings(records: pl.DataFrame, unit: tuple[str, ...], columns: tuple[str, str, str]) -> pl.DataFrame:
    """The finite ratings as ``_b`` (batch), ``_t`` (position), ``_u`` (unit), ``_y`` (score), checked: one per (batch, position)."""
    batch_col, pos_col, score_col = columns
    missing_batch = [c for c in (batch_col, pos_col) if c not in records.columns]
    if missing_batch:
        msg = (
            f"the Markov GLMM needs batch information: every rating's {batch_col!r} (its batch, call "
            f"or session) and {pos_col!r} (its 0-based position in the batch); the records lack {missing_batch}"
        )
        raise DesignError(msg)
    missing = [c for c in (*unit, score_col) if c not in records.columns]
    if missing:
        msg = f"records must have the unit column(s) {list(unit)} and {score_col!r}; missing {missing}"
        raise DesignError(msg)
    frame = records.select(*_rating_columns(columns, unit))
    nulls = frame.select(pl.col("_b", "_t", "_u").null_count()).row(0)
    if any(nulls):
        msg = (
            f"records must have no null {batch_col!r}, {pos_col!r} or unit {list(unit)}; "
            f"got {nulls[0]}, {nulls[1]} and {nulls[2]} nulls"
        )
        raise DesignError(msg)
    frame = frame.filter(pl.col("_y").is_not_null() & pl.col("_y").is_finite())
    if frame.height == 0:
        msg = "records have no rating with a finite score"
        raise DesignError(msg)
    if frame["_t"].min() < 0:  # type: ignore[operator]
        msg = f"{pos_col!r} must be >= 0 (0-based positions); got {frame['_t'].min()!r}"
        raise DesignError(msg)
    dup = frame.filter(pl.struct("_b", "_t").is_duplicated())
    if dup.height:
        first = dup.row(0, named=True)
        msg = (
            f"each ({batch_col}, {pos_col}) must hold one rating; {dup.height} rows share theirs "
            f"(e.g. batch {first['_b']!r} position {first['_t']}); fit one judge at a time"
        )
        raise DesignError(msg)
    return frame


def _response_kind(values: np.ndarray, response: Response) -> Literal["binary", "ordinal"]:
    """The model the scores take: binary for 0/1 under ``auto``; checked against an explicit choice."""
    is_binary = bool(np.isin(values, (0.0, 1.0)).all())
    kind: Literal["binary", "ordinal"]
    kind = ("binary" if is_binary else "ordinal") if response == "auto" else response
    if kind == "binary" and not is_binary:
        msg = f"a binary fit needs scores 0/1; got values {np.unique(values)[:10].tolist()}"
        raise DesignError(msg)
    if kind == "ordinal" and not np.all(values == np.round(values)):
        msg = "an ordinal fit needs integer scores (categories such as 1..5); got non-integer values"
        raise DesignError(msg)
    return kind


def _responses(frame: pl.DataFrame, lags: int, initial: Initial) -> tuple[pl.DataFrame, list[str]]:
    """The ratings with all ``lags`` predecessors (the responses), their lags as ``_lag1..``, sorted by batch and position."""
    lagged = frame
    for k in range(1, lags + 1):
        shifted = frame.select("_b", (pl.col("_t") + k).alias("_t"), pl.col("_y").alias(f"_lag{k}"))
        lagged = lagged.join(shifted, on=["_b", "_t"], how="left")
    lag_names = [f"_lag{k}" for k in range(1, lags + 1)]
    if initial == "model":
        # a lag before the batch's start does not exist: it contributes 0 (the positions < K
        # have their own effects, which absorb the constant); a missing rating inside the
        # batch (a gap) still makes the next ones conditioning ratings
        lagged = lagged.with_columns(
            pl.when(pl.col("_t") < k).then(pl.col(f"_lag{k}").fill_null(0.0)).otherwise(pl.col(f"_lag{k}")).alias(f"_lag{k}")
            for k in range(1, lags + 1)
        )
    resp = lagged.filter(pl.all_horizontal(pl.col(n).is_not_null() for n in lag_names)).sort("_b", "_t")
    if resp.height == 0:
        msg = f"no rating has {lags} predecessor(s) in its batch: batches are too short for {lags} lag(s)"
        raise DesignError(msg)
    return resp, lag_names


def _initial_values(frame: pl.DataFrame, resp: pl.DataFrame, lags: int) -> np.ndarray:
    """Each response's batch's first ``lags`` ratings: the Wooldridge covariates ([Wooldridge2005]_)."""
    heads = (
        frame.sort("_b", "_t")
        .group_by("_b", maintain_order=True)
        .agg(pl.col("_y").head(lags).alias("_init"))
        .filter(pl.col("_init").list.len() == lags)
        .select("_b", *(pl.col("_init").list.get(j).alias(f"_init{j + 1}") for j in range(lags)))
    )
    init_names = [f"_init{j + 1}" for j in range(lags)]
    init_values = resp.join(heads, on="_b", how="left").select(init_names).to_numpy().astype(np.float64)
    flat_init = [k + 1 for k in range(lags) if np.ptp(init_values[:, k]) == 0.0]
    if flat_init:
        msg = f"initial rating(s) {flat_init} take one value in every batch: their coefficients are not identified"
        raise DesignError(msg)
    return init_values


def _separation(data: _Data, weights: np.ndarray | None) -> str | None:
    """Why the MLE is not finite (a level absent, or all its responses at one extreme), or None."""
    w = np.ones(data.batch_ids.__len__()) if weights is None else weights
    wt = w[data.batch]
    last = len(data.categories) - 1
    factors = [("unit", data.units, data.unit_code)]
    if data.position_effects:
        factors.append(("position", tuple(str(p) for p in data.positions), data.pos_code))
    for name, levels, code in factors:
        n = np.bincount(code, weights=wt, minlength=len(levels))
        low = np.bincount(code, weights=wt * (data.cat == 0), minlength=len(levels))
        high = np.bincount(code, weights=wt * (data.cat == last), minlength=len(levels))
        for j, label in enumerate(levels):
            if n[j] == 0:
                return f"{name} {label!r} has no response"
            if low[j] == n[j] or high[j] == n[j]:
                side = "lowest" if low[j] == n[j] else "highest"
                return (
                    f"{name} {label!r} has every response in the {side} category "
                    f"({data.categories[0 if side == 'lowest' else last]:g}): perfect separation, "
                    "its coefficient would be infinite"
                )
    return None


@dataclass(frozen=True, slots=True)
class _Design:
    data: _Data
    x: np.ndarray  # (n, p) fixed-effect design
    e_up: np.ndarray  # (n, C-1) one-hot of the upper cutpoint of each response's category
    e_lo: np.ndarray  # (n, C-1) one-hot of the lower cutpoint
    up: np.ndarray  # (n,) index of the upper cutpoint (clipped where there is none)
    lo: np.ndarray
    has_up: np.ndarray  # (n,) bool
    has_lo: np.ndarray
    starts: np.ndarray  # (B,) first row of each batch (rows are sorted by batch)
    n_in_batch: np.ndarray  # (B,)
    n_beta: int
    n_alpha: int  # C - 1 cutpoints
    n_cut: int  # free cutpoint parameters (0 for binary: alpha_1 = 0)
    n_theta: int  # free unit columns
    n_pos: int  # free position columns


def _design(data: _Data) -> _Design:
    n = data.cat.size
    n_units = len(data.units)
    binary = data.response == "binary"
    n_theta = n_units if binary else n_units - 1
    n_pos = len(data.positions) - 1
    n_init = data.init_values.shape[1]
    p = n_theta + n_pos + data.lags + n_init
    x = np.zeros((n, p))
    rows = np.arange(n)
    if binary:
        x[rows, data.unit_code] = 1.0
    else:
        m = data.unit_code > 0
        x[rows[m], data.unit_code[m] - 1] = 1.0
    m = data.pos_code > 0
    x[rows[m], n_theta + data.pos_code[m] - 1] = 1.0
    x[:, n_theta + n_pos : n_theta + n_pos + data.lags] = data.lag_values
    x[:, n_theta + n_pos + data.lags :] = data.init_values
    n_alpha = len(data.categories) - 1
    has_up = data.cat < n_alpha
    has_lo = data.cat > 0
    up = np.minimum(data.cat, n_alpha - 1)
    lo = np.maximum(data.cat - 1, 0)
    e_up = np.zeros((n, n_alpha))
    e_up[rows[has_up], up[has_up]] = 1.0
    e_lo = np.zeros((n, n_alpha))
    e_lo[rows[has_lo], lo[has_lo]] = 1.0
    starts = np.flatnonzero(np.r_[True, data.batch[1:] != data.batch[:-1]])
    return _Design(
        data=data,
        x=x,
        e_up=e_up,
        e_lo=e_lo,
        up=up,
        lo=lo,
        has_up=has_up,
        has_lo=has_lo,
        starts=starts,
        n_in_batch=np.diff(np.r_[starts, n]),
        n_beta=p,
        n_alpha=n_alpha,
        n_cut=0 if binary else n_alpha,
        n_theta=n_theta,
        n_pos=n_pos,
    )


def _label(v: float) -> str:
    return f"{v:g}"
