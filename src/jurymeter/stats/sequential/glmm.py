r"""The Markov GLMM of sequential judging, fitted by maximum marginal likelihood.

Model ([LiDing2026]_, abstract and figure 3; the issue's point 2). A judge rates
the units (rated outputs) of batch :math:`b` one after another; the rating at
position :math:`t` of the batch, of unit :math:`i(b, t)`, has the linear predictor

.. math::

    \eta_{bt} = \theta_{i(b,t)} + \pi_t + \sum_{k=1}^{K} \rho_k\, Y_{b,t-k} + u_b,
    \qquad u_b \sim N(0, \sigma^2) \text{ independent},

with :math:`K \in \{1, 2, 3\}` lags, the lagged ratings entering as numbers on
the rating scale (0/1; or the ordinal score itself, so :math:`\rho_k` is per
scale point: centring them would move only the intercepts and cutpoints).

- **binary** (ratings 0/1): :math:`\operatorname{logit} P(Y_{bt} = 1) = \eta_{bt}`.
- **ordinal** (the observed categories :math:`c_1 < \dots < c_C`, e.g. 1..5):
  :math:`P(Y_{bt} \le c_j) = \operatorname{logit}^{-1}(\alpha_j - \eta_{bt})`,
  cutpoints :math:`\alpha_1 < \dots < \alpha_{C-1}`: the sign convention of
  ``ordinal::clmm``, so a larger :math:`\eta` means higher ratings. The binary
  model is the ordinal one with :math:`C = 2` and :math:`\alpha_1 = 0`.

Identification (treatment contrasts, as R's default, so the coefficients
compare with ``lme4::glmer`` and ``ordinal::clmm`` one for one):

- the position effect of the first *modelled* position (position :math:`K`,
  the first with :math:`K` predecessors, when every batch starts at 0) is 0;
- binary: every :math:`\theta_i` is free (it absorbs the intercept: glmer's
  ``(Intercept)`` is the first unit's :math:`\theta`, and its ``unit`` dummies
  are differences from it);
- ordinal: the first unit (in sorted order) has :math:`\theta = 0` and the
  cutpoints are free (clmm's thresholds).

Initial condition. The first :math:`K` ratings of a batch have fewer than
:math:`K` predecessors. Three choices (``initial``):

- ``"model"`` (the default): the process starts with the batch, so the
  first ratings are responses like the others, a lag that reaches before
  position 0 contributing 0; the position effects of positions :math:`< K`
  absorb that constant (the pattern of absent lags is a function of the
  position). This is the simulator's generative model, so the fit is
  consistent for it. Missing ratings inside a batch (a gap, a null score) make
  the next :math:`K` ratings conditioning ones (lags only, not responses).
- ``"condition"``: the first :math:`K` ratings are conditioned on (they
  enter as lags, never as responses) and the batch intercept is taken as
  independent of them: what ``glmer`` on lagged columns with the incomplete
  rows dropped fits. The initial ratings carry information about the batch
  intercept, so this biases :math:`\rho` up and :math:`\sigma` down in short
  batches (``docs/sequential.md``: :math:`\hat\rho_1` 0.99 for a true 0.6 at
  lag 3 in batches of 8; 0.92 for 0.8 at lag 1 in batches of 12); negligible
  in batches of 30.
- ``"wooldridge"``: as ``"condition"``, plus the batch's first :math:`K`
  ratings as batch-level covariates (coefficients :math:`\gamma_k`,
  ``initial_k``), so :math:`u_b \mid y_{b,0..K-1} \sim
  N(\sum_k \gamma_k y_{b,k-1}, \sigma^2)` ([Wooldridge2005]_); ``batch_sd``
  is then the conditional SD. It removes most of that bias.

Likelihood. With :math:`u_b = \sigma z`, :math:`z \sim N(0, 1)`,

.. math::

    \ell(\psi) = \sum_b w_b \log \int \prod_{t \in b} P(Y_{bt} \mid \eta_{bt} + \sigma z)\,
    \phi(z)\, dz,

(:math:`w_b = 1`; a batch bootstrap resample is the same sum with :math:`w_b`
the number of times batch :math:`b` was drawn). Each one-dimensional integral
is taken by adaptive Gauss-Hermite quadrature: the log integrand
:math:`g_b(z)` is strictly concave (both links are log-concave), its mode
:math:`\hat z_b` is found by a bracketed Newton iteration vectorized over
batches, :math:`\tau_b = (-g_b''(\hat z_b))^{-1/2}`, and

.. math::

    \int e^{g_b(z)} dz \approx \sqrt{2}\,\tau_b \sum_{q=1}^{Q} w_q e^{x_q^2}
    e^{g_b(\hat z_b + \sqrt{2}\tau_b x_q)},

with :math:`(x_q, w_q)` the Gauss-Hermite rule of :math:`Q` = ``n_agq`` nodes
(10 by default, lme4's ``nAGQ = 10``; :math:`Q = 1` is the Laplace
approximation). The gradient is the exact derivative of this approximation,
the dependence of :math:`\hat z_b` and :math:`\tau_b` on the parameters
included (implicit differentiation of :math:`g_b'(\hat z_b) = 0`). The
optimizer is scipy's ``trust-exact`` with that gradient and, as its Hessian,
Louis' identity applied to the quadrature with its nodes held fixed (the
posterior mean of the complete-data Hessian plus the posterior variance of the
complete-data score, both over the nodes): nearly the exact Hessian, so the
iteration converges in a handful of steps. The parameters are the
coefficients, :math:`\sigma` itself (the likelihood is even in :math:`\sigma`;
the fit reports :math:`|\sigma|`) and, for the ordinal model, :math:`\alpha_1`
and the logs of the cutpoint increments. A fit stops when the gradient's
Euclidean norm is below ``gtol``; one that does not raises
:class:`GLMMConvergenceError`, and so does data whose estimates would be
infinite (a unit or position whose every response is in the lowest or in the
highest category: perfect separation).

Uncertainty: :func:`bootstrap_fits` resamples whole batches with replacement
and refits from the full fit; :func:`predictive_check` simulates held-out
batches from the fit and reports which transition frequencies and conditional
entropies fall outside their prediction intervals ([LiDing2026]_ figure 3).

References
----------
.. [LiDing2026] T. Li and J. Ding, "Trustworthy Method Comparison with AI Judges:
   Estimation and Design under Order, Batch, and Aggregation Effects", 2026
   (``papers/trustworthy-comparison-ai-judges.txt``).
.. [Wooldridge2005] J. M. Wooldridge, "Simple solutions to the initial conditions
   problem in dynamic, nonlinear panel data models with unobserved heterogeneity",
   Journal of Applied Econometrics 20, 2005.
.. [Louis1982] T. A. Louis, "Finding the observed information matrix when using
   the EM algorithm", JRSS B 44, 1982.
.. [Bates2015] D. Bates et al., "Fitting linear mixed-effects models using lme4",
   Journal of Statistical Software 67, 2015 (``glmer``, ``nAGQ``).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np
import polars as pl
from scipy.optimize import minimize
from scipy.sparse import csr_matrix
from scipy.special import expit

from jurymeter.errors import ConfigError, DesignError, JurymeterError
from jurymeter.stats.sequential.schemas import BOOTSTRAP_SCHEMA, CHECK_SCHEMA, COEFFICIENT_SCHEMA
from jurymeter.stats.sequential.simulate import draw_sequences

__all__ = [
    "BOOTSTRAP_SCHEMA",
    "CHECK_SCHEMA",
    "COEFFICIENT_SCHEMA",
    "GLMMBootstrap",
    "GLMMConvergenceError",
    "PredictiveCheck",
    "SequentialGLMM",
    "bootstrap_fits",
    "fit_sequential_glmm",
    "predictive_check",
]

Response = Literal["auto", "binary", "ordinal"]
Initial = Literal["model", "condition", "wooldridge"]

# Conditional modes: Newton steps until the largest is below this (z units, prior sd 1);
# Newton converges quadratically, so the mode is then exact to rounding.
MODE_TOLERANCE = 1e-10
MODE_MAX_ITER = 200
# The optimizer stops when the gradient norm of the log-likelihood is below this.
GTOL = 1e-6
MAX_ITER = 200
# ... or when a Newton step would raise the log-likelihood by less than this (see _solve) ...
DECREMENT = 1e-10
# ... or move no parameter by more than this: checked at every iteration, so a fit whose batch
# SD sits at its boundary 0 (a flat likelihood in sigma, where trust-exact crawls and the
# gradient norm never reaches gtol) stops there instead of running out of iterations, while a
# flat direction elsewhere is still resolved to this accuracy.
STEP_TOL = 1e-6
# An estimate this large (logits) means the likelihood has no finite maximum in that direction.
DIVERGED = 30.0
START_SIGMA = 0.5
# The smallest batch SD a warm start takes (_psi_from).
SIGMA_FLOOR = 0.1
_SQRT2 = math.sqrt(2.0)
_LOG_SQRT_2PI = 0.5 * math.log(2.0 * math.pi)


class GLMMConvergenceError(JurymeterError):
    """A Markov GLMM fit did not converge, or its maximum-likelihood estimate is not finite."""


# --------------------------------------------------------------------------
# results
# --------------------------------------------------------------------------


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


# --------------------------------------------------------------------------
# records -> arrays
# --------------------------------------------------------------------------


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
    frame = records.select(
        pl.col(batch_col).cast(pl.String).alias("_b"),
        pl.col(pos_col).cast(pl.Int64).alias("_t"),
        _unit_expr(unit).alias("_u"),
        pl.col(score_col).cast(pl.Float64).alias("_y"),
    )
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
    values = frame["_y"].to_numpy()
    is_binary = bool(np.isin(values, (0.0, 1.0)).all())
    kind: Literal["binary", "ordinal"]
    kind = ("binary" if is_binary else "ordinal") if response == "auto" else response
    if kind == "binary" and not is_binary:
        msg = f"a binary fit needs scores 0/1; got values {np.unique(values)[:10].tolist()}"
        raise DesignError(msg)
    if kind == "ordinal" and not np.all(values == np.round(values)):
        msg = "an ordinal fit needs integer scores (categories such as 1..5); got non-integer values"
        raise DesignError(msg)

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
    if initial == "wooldridge":
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
    else:
        init_values = np.zeros((resp.height, 0))
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


# --------------------------------------------------------------------------
# the likelihood
# --------------------------------------------------------------------------


def _logistic(x: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """F, F' and F'' of the logistic distribution (0 derivatives at +-inf)."""
    big_f = expit(x)
    f = big_f * expit(-x)
    return big_f, f, f * (1.0 - 2.0 * big_f)


def _log_prob(a: np.ndarray, b: np.ndarray, up: np.ndarray, lo: np.ndarray) -> np.ndarray:
    """log(F(a) - F(b)) stably; ``a = +inf`` where not ``up``, ``b = -inf`` where not ``lo``."""
    a_s = np.where(up, a, 0.0)
    b_s = np.where(lo, b, 0.0)
    out = np.where(up, -np.logaddexp(0.0, -a_s), -np.logaddexp(0.0, b_s))
    both = up & lo
    if both.any():
        diff = np.where(both, b_s - a_s, -1.0)
        val = a_s + np.log(-np.expm1(diff)) - np.logaddexp(0.0, a_s) - np.logaddexp(0.0, b_s)
        out = np.where(both, val, out)
    return out


def _cuts(d: _Design, delta: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Cutpoints alpha (C-1,) and their Jacobian d alpha / d delta (C-1, n_cut)."""
    if d.n_cut == 0:
        return np.zeros(d.n_alpha), np.zeros((d.n_alpha, 0))
    inc = np.exp(delta[1:])
    alpha = delta[0] + np.r_[0.0, np.cumsum(inc)]
    jac = np.zeros((d.n_alpha, d.n_cut))
    jac[:, 0] = 1.0
    for j in range(1, d.n_cut):
        jac[j:, j] = inc[j - 1]
    return alpha, jac


def _stack(*parts: np.ndarray | Sequence[float]) -> np.ndarray:
    return np.concatenate([np.asarray(q, dtype=np.float64).reshape(-1) for q in parts])


def _pack_cuts(alpha: np.ndarray) -> np.ndarray:
    return _stack(alpha[:1], np.log(np.diff(alpha)))


def _sum_b(d: _Design, v: np.ndarray) -> np.ndarray:
    out: np.ndarray = np.add.reduceat(v, d.starts, axis=0)
    return out


def _modes(
    d: _Design, eta: np.ndarray, sigma: float, a_up: np.ndarray, a_lo: np.ndarray, z0: np.ndarray | None = None
) -> np.ndarray:
    """Conditional modes of z per batch: bracketed Newton on the strictly concave g_b (from z0, or 0)."""
    n_b = d.starts.size
    if sigma == 0.0:
        return np.zeros(n_b)
    # g'(z) = sigma * sum(l') - z with |l'| < 1, so the root lies within sigma * n_b of 0.
    hi = abs(sigma) * d.n_in_batch + 1.0
    lo = -hi
    z = np.zeros(n_b) if z0 is None else np.clip(z0, lo, hi)
    dx_old = hi - lo
    for _ in range(MODE_MAX_ITER):
        e = eta + sigma * z[d.data.batch]
        fa_big = expit(a_up - e)
        fb_big = expit(a_lo - e)
        g1 = sigma * _sum_b(d, fa_big + fb_big - 1.0) - z
        # F(1 - F): the density to absolute rounding, all Newton needs (the root is set by g1)
        g2 = -(sigma**2) * _sum_b(d, fa_big * (1.0 - fa_big) + fb_big * (1.0 - fb_big)) - 1.0
        lo = np.where(g1 > 0.0, z, lo)
        hi = np.where(g1 < 0.0, z, hi)
        newton = -g1 / g2
        if float(np.abs(newton).max()) < MODE_TOLERANCE:
            return z + newton
        # rtsafe: bisect where Newton leaves the bracket or does not halve the step (only where
        # the step is not already negligible: rounding must not send a converged batch away)
        new = z + newton
        slow = np.abs(2.0 * g1) > np.abs(dx_old * g2)
        bisect = ((new <= lo) | (new >= hi) | slow) & (np.abs(newton) >= MODE_TOLERANCE)
        new = np.where(bisect, 0.5 * (lo + hi), new)
        dx_old = np.abs(new - z)
        z = new
    msg = f"the conditional modes of the batch intercepts did not converge in {MODE_MAX_ITER} Newton steps"
    raise GLMMConvergenceError(msg)


@dataclass(frozen=True, slots=True)
class _State:
    value: float
    grad: np.ndarray  # in psi
    grad_alpha: np.ndarray
    sigma: float
    w: np.ndarray
    pi: np.ndarray  # (B, Q) posterior weights of the nodes
    zq: np.ndarray  # (B, Q) nodes
    a: np.ndarray  # (n, Q) upper edge alpha - eta'
    b: np.ndarray
    log_d: np.ndarray  # (n, Q)
    jac: np.ndarray
    delta: np.ndarray
    logl: np.ndarray  # (B,) per-batch log-likelihood
    zhat: np.ndarray  # (B,) conditional modes


def _unpack(d: _Design, psi: np.ndarray, random_intercept: bool) -> tuple[np.ndarray, np.ndarray, float]:
    beta = psi[: d.n_beta]
    delta = psi[d.n_beta : d.n_beta + d.n_cut]
    sigma = float(psi[d.n_beta + d.n_cut]) if random_intercept else 0.0
    return beta, delta, sigma


def _state(
    d: _Design,
    psi: np.ndarray,
    w: np.ndarray,
    nodes: tuple[np.ndarray, np.ndarray],
    random_intercept: bool,
    z0: np.ndarray | None = None,
) -> _State:
    """The quadrature log-likelihood at psi and its exact gradient (z0: a start for the modes)."""
    xq, log_omega = nodes
    batch = d.data.batch
    beta, delta, sigma = _unpack(d, psi, random_intercept)
    alpha, jac = _cuts(d, delta)
    eta = d.x @ beta
    a_up = np.where(d.has_up, alpha[d.up], np.inf)
    a_lo = np.where(d.has_lo, alpha[d.lo], -np.inf)
    zhat = _modes(d, eta, sigma, a_up, a_lo, z0)

    # derivatives of log P in eta at the modes: l' = F(A) + F(B) - 1, l'' = -(f(A) + f(B)), l''' = f'(A) + f'(B)
    em = eta + sigma * zhat[batch]
    ma_big, ma1, ma2 = _logistic(a_up - em)
    mb_big, mb1, mb2 = _logistic(a_lo - em)
    m_l1 = ma_big + mb_big - 1.0
    m_l2 = -(ma1 + mb1)
    m_l3 = ma2 + mb2
    s2 = _sum_b(d, m_l2)
    s3 = _sum_b(d, m_l3)
    tau = 1.0 / np.sqrt(1.0 - sigma**2 * s2)
    zq = zhat[:, None] + _SQRT2 * tau[:, None] * xq[None, :]
    eq = eta[:, None] + sigma * zq[batch]
    a = a_up[:, None] - eq
    b = a_lo[:, None] - eq
    up, lo = d.has_up[:, None], d.has_lo[:, None]
    log_d = _log_prob(a, b, up, lo)
    g = _sum_b(d, log_d) - 0.5 * zq**2 - _LOG_SQRT_2PI
    lw = log_omega[None, :] + g
    top = lw.max(axis=1)
    e = np.exp(lw - top[:, None])
    total = e.sum(axis=1)
    pi = e / total[:, None]
    logl = top + np.log(total) + np.log(_SQRT2 * tau)
    value = float(w @ logl)

    fa_big, fa, _ = _logistic(a)
    fb_big, fb, _ = _logistic(b)
    l1 = fa_big + fb_big - 1.0
    dens = np.exp(log_d)
    a0 = fa / dens
    b0 = -fb / dens
    pit = pi[batch]
    wt = w[batch]
    big_l1 = _sum_b(d, l1)
    gp = sigma * big_l1 - zq  # g'(z_q)
    a_b = (pi * gp).sum(axis=1)
    c_b = (pi * gp * (_SQRT2 * xq)[None, :]).sum(axis=1) + 1.0 / tau
    g3 = sigma**3 * s3
    tau2, tau3 = tau**2, tau**3

    # coefficients: d zhat = tau^2 dg', d tau = tau^3/2 (dg'' + g''' d zhat)
    u_t = (pit * l1).sum(axis=1)
    v_t = (a_b * tau2 * sigma)[batch] * m_l2 + (0.5 * c_b * tau3)[batch] * (
        sigma**2 * m_l3 + (g3 * tau2 * sigma)[batch] * m_l2
    )
    grad_beta = d.x.T @ (wt * (u_t + v_t))
    # cutpoints (alpha coordinates)
    t1 = d.e_up.T @ (wt * (pit * a0).sum(axis=1)) + d.e_lo.T @ (wt * (pit * b0).sum(axis=1))
    p1 = _sum_b(d, ma1[:, None] * d.e_up + mb1[:, None] * d.e_lo)
    p2 = _sum_b(d, -ma2[:, None] * d.e_up - mb2[:, None] * d.e_lo)
    dz_a = (tau2 * sigma)[:, None] * p1
    dtau_a = (0.5 * tau3)[:, None] * (sigma**2 * p2 + g3[:, None] * dz_a)
    grad_alpha = t1 + (w[:, None] * (a_b[:, None] * dz_a + c_b[:, None] * dtau_a)).sum(axis=0)
    parts = [grad_beta, jac.T @ grad_alpha]
    if random_intercept:
        t1s = (pi * zq * big_l1).sum(axis=1)
        dgs = _sum_b(d, m_l1) + sigma * zhat * s2
        dz_s = tau2 * dgs
        dtau_s = 0.5 * tau3 * (2.0 * sigma * s2 + sigma**2 * zhat * s3 + g3 * dz_s)
        parts.append(np.array([float(w @ (t1s + a_b * dz_s + c_b * dtau_s))]))
    return _State(
        value=value,
        grad=np.concatenate(parts),
        grad_alpha=grad_alpha,
        sigma=sigma,
        w=w,
        pi=pi,
        zq=zq,
        a=a,
        b=b,
        log_d=log_d,
        jac=jac,
        delta=delta,
        logl=logl,
        zhat=zhat,
    )


def _hessian(d: _Design, st: _State, random_intercept: bool, pattern: _Pattern | None = None) -> np.ndarray:
    """Louis' Hessian of the quadrature with its nodes held fixed, in psi coordinates."""
    batch = d.data.batch
    x, e_up, e_lo = d.x, d.e_up, d.e_lo
    pit = st.pi[batch]
    zt = st.zq[batch]
    wt = st.w[batch]
    fa_big, fa, fa2 = _logistic(st.a)
    fb_big, fb, fb2 = _logistic(st.b)
    l1 = fa_big + fb_big - 1.0
    l2 = -(fa + fb)
    dens = np.exp(st.log_d)
    a0 = fa / dens
    b0 = -fb / dens
    l_aa = fa2 / dens - a0**2
    l_ab = -a0 * b0
    l_bb = -fb2 / dens - b0**2
    p, na = d.n_beta, d.n_alpha
    size = p + na + 1
    h = np.zeros((size, size))

    def avg(v: np.ndarray) -> np.ndarray:
        out: np.ndarray = wt * (pit * v).sum(axis=1)
        return out

    h_l2 = avg(l2)
    h[:p, :p] = x.T @ (h_l2[:, None] * x)
    m_ba = avg(fa)[:, None] * e_up + avg(fb)[:, None] * e_lo
    h[:p, p : p + na] = x.T @ m_ba
    h_aa = avg(l_aa)[:, None] * e_up
    h_bb = avg(l_bb)[:, None] * e_lo
    h_ab = avg(l_ab)[:, None]
    h[p : p + na, p : p + na] = e_up.T @ h_aa + e_lo.T @ h_bb + e_up.T @ (h_ab * e_lo) + e_lo.T @ (h_ab * e_up)
    h[:p, -1] = x.T @ avg(zt * l2)
    h[p : p + na, -1] = e_up.T @ avg(zt * fa) + e_lo.T @ avg(zt * fb)
    h[-1, -1] = float(avg(zt**2 * l2).sum())
    h[p : p + na, :p] = h[:p, p : p + na].T
    h[-1, :-1] = h[:-1, -1]
    # the posterior variance of the complete-data score: row (b, q) of a sparse matrix holds,
    # at the columns of batch b's responses, the centred per-response coefficients times
    # sqrt(w_b pi_bq); its products with [X | E_up | E_lo] are the centred scores.
    scale = np.sqrt(st.w[:, None] * st.pi)[batch]

    def centred(v: np.ndarray) -> np.ndarray:
        mean = (pit * v).sum(axis=1, keepdims=True)
        out: np.ndarray = (v - mean) * scale
        return out

    if pattern is None:
        pattern = _score_pattern(d, st.pi.shape[1])

    def rows(v: np.ndarray) -> csr_matrix:
        return csr_matrix((centred(v).ravel()[pattern.perm], pattern.indices, pattern.indptr), shape=pattern.shape)

    s_sigma = zt * l1
    sig = np.bincount(pattern.row_of, weights=centred(s_sigma).ravel(), minlength=pattern.shape[0])
    flat = np.hstack([rows(l1) @ x, rows(a0) @ e_up + rows(b0) @ e_lo, sig[:, None]])
    h = h + flat.T @ flat
    # to psi: beta as is, alpha -> delta, sigma (if estimated)
    n_psi = p + d.n_cut + (1 if random_intercept else 0)
    tr = np.zeros((size, n_psi))
    tr[:p, :p] = np.eye(p)
    tr[p : p + na, p : p + d.n_cut] = st.jac
    if random_intercept:
        tr[-1, -1] = 1.0
    out: np.ndarray = tr.T @ h @ tr
    if d.n_cut > 1:
        inc = np.exp(st.delta[1:])
        tail = np.cumsum(st.grad_alpha[::-1])[::-1]  # sum over m >= j of dl/d alpha_m
        idx = p + np.arange(1, d.n_cut)
        out[idx, idx] += tail[1:] * inc
    return out


@dataclass(frozen=True, slots=True)
class _Pattern:
    """The sparsity of the (batch, node) x response matrix of the score variance."""

    perm: np.ndarray  # position in the (n, Q) row-major array of each stored entry
    indices: np.ndarray  # response (column) of each stored entry
    indptr: np.ndarray
    row_of: np.ndarray  # (n * Q,) row (b * Q + q) of each (t, q)
    shape: tuple[int, int]


def _score_pattern(d: _Design, n_q: int) -> _Pattern:
    n = d.data.cat.size
    batch = d.data.batch
    t = np.arange(n)
    row = (batch[:, None] * n_q + np.arange(n_q)[None, :]).ravel()  # (t, q) row-major
    order = np.argsort(row, kind="stable")  # rows ascending, responses ascending within a row
    counts = np.bincount(row, minlength=d.starts.size * n_q)
    return _Pattern(
        perm=order,
        indices=np.repeat(t, n_q)[order],
        indptr=np.r_[0, np.cumsum(counts)],
        row_of=row,
        shape=(d.starts.size * n_q, n),
    )


def _nodes(n_agq: int) -> tuple[np.ndarray, np.ndarray]:
    x, w = np.polynomial.hermite.hermgauss(n_agq)
    return x, np.log(w) + x**2


def _start(d: _Design, random_intercept: bool) -> np.ndarray:
    data = d.data
    beta = np.zeros(d.n_beta)
    if data.response == "binary":
        n = np.bincount(data.unit_code, minlength=len(data.units))
        k = np.bincount(data.unit_code, weights=data.cat.astype(np.float64), minlength=len(data.units))
        beta[: d.n_theta] = np.log((k + 0.5) / (n - k + 0.5))
        cut = np.zeros(0)
    else:
        share = np.cumsum(np.bincount(data.cat, minlength=d.n_alpha + 1))[:-1] / data.cat.size
        cut = _pack_cuts(np.log(share / (1.0 - share)))
    return _stack(beta, cut, [START_SIGMA] if random_intercept else [])


@dataclass(frozen=True, slots=True)
class _Solution:
    psi: np.ndarray
    loglik: float
    n_iter: int
    gradient_norm: float
    message: str


def _solve(
    d: _Design,
    *,
    start: np.ndarray,
    weights: np.ndarray,
    n_agq: int,
    random_intercept: bool,
    max_iter: int,
    gtol: float,
) -> _Solution:
    nodes = _nodes(n_agq if random_intercept else 1)
    pattern = _score_pattern(d, nodes[0].size)
    cache: dict[bytes, _State] = {}
    last: list[np.ndarray] = []  # the latest modes: a warm start for the next point's

    def state(psi: np.ndarray) -> _State:
        key = psi.tobytes()
        if key not in cache:
            cache.clear()
            st = _state(d, psi, weights, nodes, random_intercept, last[0] if last else None)
            cache[key] = st
            last[:] = [st.zhat]
        return cache[key]

    def fun(psi: np.ndarray) -> tuple[float, np.ndarray]:
        st = state(psi)
        if not np.isfinite(st.value) or not np.all(np.isfinite(st.grad)):
            return math.inf, np.zeros_like(psi)
        return -st.value, -st.grad

    hessians: dict[bytes, np.ndarray] = {}  # the objective's Hessian at the latest point (the callback's is reused)
    stopped: list[bool] = []  # the callback ended the iteration (_newton_done)

    def hess(psi: np.ndarray) -> np.ndarray:
        key = psi.tobytes()
        if key not in hessians:
            hessians.clear()
            hessians[key] = -_hessian(d, state(psi), random_intercept, pattern)
        return hessians[key]

    def stop(intermediate_result: Any) -> None:
        """End the iteration once a Newton step at the new point would gain < DECREMENT or move < STEP_TOL."""
        psi = np.asarray(intermediate_result.x, dtype=np.float64)
        st = state(psi)
        if np.all(np.isfinite(st.grad)) and np.isfinite(st.value) and _newton_done(hess(psi), st.grad):
            stopped.append(True)
            raise StopIteration

    try:
        res = minimize(
            fun, start, jac=True, hess=hess, method="trust-exact", callback=stop,
            options={"gtol": gtol, "maxiter": max_iter},
        )
    except (ValueError, np.linalg.LinAlgError) as exc:  # a Hessian that overflowed far from the optimum
        msg = f"the Markov GLMM fit did not converge: the optimizer met a non-finite curvature ({exc})"
        raise GLMMConvergenceError(msg) from exc
    psi = np.asarray(res.x, dtype=np.float64)
    final = state(psi)
    norm = float(np.linalg.norm(final.grad))
    converged = bool(res.success) and norm <= gtol
    decrement = 0.0 if converged else _decrement(-_hessian(d, final, random_intercept, pattern), final.grad)
    # Near the optimum of a large data set the predicted gains fall below the rounding of the
    # log-likelihood and trust-exact stops short of gtol; it has converged when Newton's step
    # would still gain almost nothing.
    converged = converged or bool(stopped) or decrement <= DECREMENT
    if not converged or not np.isfinite(final.value):
        msg = (
            f"the Markov GLMM fit did not converge in {max_iter} iteration(s) "
            f"(gradient norm {norm:.3g}, tolerance {gtol:g}; Newton decrement {decrement:.3g}): {res.message}"
        )
        raise GLMMConvergenceError(msg)
    big = float(np.abs(psi[: d.n_beta]).max(initial=0.0))
    if big > DIVERGED:
        msg = (
            f"the Markov GLMM estimates diverge (a coefficient of {big:.3g} logits): the data "
            "separate some unit, position or lag (quasi-complete separation)"
        )
        raise GLMMConvergenceError(msg)
    return _Solution(psi=psi, loglik=final.value, n_iter=int(res.nit), gradient_norm=norm, message=str(res.message))


def _decrement(info: np.ndarray, grad: np.ndarray) -> float:
    """Half the Newton decrement g' H^-1 g (the log-likelihood a Newton step would still gain); inf if H is not definite."""
    try:
        chol = np.linalg.cholesky(info)
    except np.linalg.LinAlgError:
        return math.inf
    half = np.linalg.solve(chol, grad)
    return 0.5 * float(half @ half)


def _newton_done(info: np.ndarray, grad: np.ndarray) -> bool:
    """A Newton step in the metric ``info`` would gain less than DECREMENT or move no parameter by STEP_TOL."""
    try:
        chol = np.linalg.cholesky(info)
    except np.linalg.LinAlgError:
        return False
    half = np.linalg.solve(chol, grad)
    step = np.linalg.solve(chol.T, half)
    return 0.5 * float(half @ half) <= DECREMENT or float(np.abs(step).max(initial=0.0)) <= STEP_TOL


def _coefficients(d: _Design, psi: np.ndarray, random_intercept: bool) -> np.ndarray:
    """The public coefficient vector (the fit table's row order) from psi."""
    beta, delta, sigma = _unpack(d, psi, random_intercept)
    theta = beta[: d.n_theta] if d.data.response == "binary" else np.r_[0.0, beta[: d.n_theta]]
    pos = np.r_[0.0, beta[d.n_theta : d.n_theta + d.n_pos]]
    rho_init = beta[d.n_theta + d.n_pos :]
    cuts = _cuts(d, delta)[0] if d.n_cut else np.zeros(0)
    return _stack(theta, pos, rho_init, cuts, [abs(sigma)])


def _psi_from(d: _Design, coef: np.ndarray, random_intercept: bool) -> np.ndarray:
    n_u, n_p = len(d.data.units), len(d.data.positions)
    k = d.data.lags + d.data.init_values.shape[1]
    theta = coef[:n_u] if d.data.response == "binary" else coef[1:n_u]
    pos = coef[n_u + 1 : n_u + n_p]
    rho = coef[n_u + n_p : n_u + n_p + k]
    cuts = _pack_cuts(coef[n_u + n_p + k : -1]) if d.n_cut else np.zeros(0)
    # Not from 0 or near it: the likelihood is even in sigma, so its gradient vanishes at 0 and a
    # refit started there crawls off the saddle (a resample's optimum may have sigma > 0).
    sigma = [max(float(coef[-1]), SIGMA_FLOOR)] if random_intercept else []
    return _stack(theta, pos, rho, cuts, sigma)


def _label(v: float) -> str:
    return f"{v:g}"


def _table(d: _Design, coef: np.ndarray) -> pl.DataFrame:
    data = d.data
    names: list[str] = []
    terms: list[str] = []
    levels: list[str | None] = []
    fixed: list[bool] = []
    for j, u in enumerate(data.units):
        names.append(f"theta[{u}]")
        terms.append("theta")
        levels.append(u)
        fixed.append(data.response == "ordinal" and j == 0)
    for j, t in enumerate(data.positions):
        names.append(f"position[{t}]")
        terms.append("position")
        levels.append(str(t))
        fixed.append(j == 0)
    for k in range(1, data.lags + 1):
        names.append(f"rho_{k}")
        terms.append("rho")
        levels.append(str(k))
        fixed.append(False)
    for k in range(1, data.init_values.shape[1] + 1):
        names.append(f"initial_{k}")
        terms.append("initial")
        levels.append(str(k))
        fixed.append(False)
    if d.n_cut:
        for j in range(d.n_alpha):
            lab = f"{_label(data.categories[j])}|{_label(data.categories[j + 1])}"
            names.append(f"cutpoint[{lab}]")
            terms.append("cutpoint")
            levels.append(lab)
            fixed.append(False)
    names.append("batch_sd")
    terms.append("batch_sd")
    levels.append(None)
    fixed.append(False)
    return pl.DataFrame(
        {"name": names, "term": terms, "level": levels, "estimate": coef, "fixed": fixed},
        schema=COEFFICIENT_SCHEMA,
    )


def _check_options(lags: int, n_agq: int, max_iter: int, gtol: float, response: str) -> None:
    if not isinstance(lags, int) or isinstance(lags, bool) or not 1 <= lags <= 3:
        msg = f"lags must be an integer from 1 to 3; got {lags!r}"
        raise ConfigError(msg)
    if not isinstance(n_agq, int) or isinstance(n_agq, bool) or not 1 <= n_agq <= 100:
        msg = f"n_agq must be an integer from 1 to 100 (quadrature nodes); got {n_agq!r}"
        raise ConfigError(msg)
    if not isinstance(max_iter, int) or max_iter < 1:
        msg = f"max_iter must be a positive integer; got {max_iter!r}"
        raise ConfigError(msg)
    if not (isinstance(gtol, float | int) and gtol > 0):
        msg = f"gtol must be a positive number; got {gtol!r}"
        raise ConfigError(msg)
    if response not in ("auto", "binary", "ordinal"):
        msg = f"response must be one of 'auto', 'binary', 'ordinal'; got {response!r}"
        raise ConfigError(msg)


def _units(unit: str | Sequence[str]) -> tuple[str, ...]:
    out = (unit,) if isinstance(unit, str) else tuple(unit)
    if not out or not all(isinstance(c, str) for c in out):
        msg = f"unit must be a column name or a non-empty sequence of them; got {unit!r}"
        raise ConfigError(msg)
    return out


def fit_sequential_glmm(
    records: pl.DataFrame,
    *,
    lags: int = 1,
    unit: str | Sequence[str] = "item_id",
    response: Response = "auto",
    position_effects: bool = True,
    random_intercept: bool = True,
    initial: Initial = "model",
    n_agq: int = 10,
    max_iter: int = MAX_ITER,
    gtol: float = GTOL,
    batch: str = "batch_id",
    position: str = "batch_position",
    score: str = "score",
) -> SequentialGLMM:
    r"""Fit the Markov GLMM of sequential judging by maximum marginal likelihood.

    Parameters
    ----------
    records : polars.DataFrame
        One row per rating of one judge: ``batch`` (the batch, call or session),
        ``position`` (0-based position in it), the unit column(s) and ``score``.
        Rows with a null score are dropped (and make the next ``lags`` ratings
        of their batch conditioning ones).
    lags : int, default 1
        :math:`K`, from 1 to 3.
    unit : str or sequence of str, default "item_id"
        The column(s) that name the rated unit (``("system_id", "item_id")``
        for one rated output of several systems; values joined with ``"/"``).
    response : {"auto", "binary", "ordinal"}, default "auto"
        ``"auto"``: binary when every score is 0 or 1, else ordinal (integers).
    position_effects : bool, default True
        Whether to fit a position effect per modelled position.
    random_intercept : bool, default True
        ``False`` fits the same likelihood without the batch intercept
        (:math:`\sigma = 0`: plain logistic or cumulative-logit regression).
    initial : {"model", "condition", "wooldridge"}, default "model"
        The initial condition. ``"model"``: every rating is a response; a lag
        that reaches before the batch's first position contributes 0 (the
        process starts with the batch: the first ratings have no predecessor,
        none is unobserved), absorbed by the position effects of positions
        ``< lags``. ``"condition"``: the first ``lags`` ratings of a
        batch are conditioned on (lags only) and the batch intercept is
        independent of them. ``"wooldridge"``: as ``"condition"``, and enter the batch's first
        ``lags`` ratings as batch-level covariates of every response
        (coefficients ``initial_k``), so the intercept is
        :math:`u_b \mid y_{b,0..K-1} \sim N(\sum_k \gamma_k y_{b,k-1}, \sigma^2)`
        ([Wooldridge2005]_); ``batch_sd`` is then the conditional SD. Use it for
        short batches, where the plain conditioning biases :math:`\rho` up and
        :math:`\sigma` down (``docs/sequential.md`` has the measured sizes;
        ``"model"`` is the consistent choice when batches start at position 0).
    n_agq : int, default 10
        Adaptive Gauss-Hermite nodes per batch (1: Laplace).
    max_iter : int, default 200
        Optimizer iterations before the fit is declared not converged.
    gtol : float, default 1e-6
        Convergence tolerance on the Euclidean norm of the log-likelihood gradient.
    batch, position, score : str
        Column names.

    Returns
    -------
    SequentialGLMM
        The estimates, the log-likelihood and the convergence information.

    Raises
    ------
    DesignError
        Batch information missing (naming ``batch_id`` and ``batch_position``),
        duplicate (batch, position) pairs, scores that fit neither model, too
        few batches or responses, a lag that never varies.
    GLMMConvergenceError
        The optimizer stopped without converging, or the data separate a unit or
        position (its estimate would be infinite).
    ConfigError
        An option out of range.

    Notes
    -----
    The module docstring states the model, its identifying constraints, the
    initial condition and the quadrature ([LiDing2026]_; ``docs/sequential.md``).

    Examples
    --------
    >>> from jurymeter.stats.sequential.simulate import simulate_sequential
    >>> rng = np.random.default_rng(0)
    >>> orders = np.array([rng.permutation(6) for _ in range(60)])
    >>> records = simulate_sequential(np.linspace(-1, 1, 6), orders, rng=1, rho=[0.8], batch_sd=0.5)
    >>> fit = fit_sequential_glmm(records, lags=1)
    >>> fit.response, fit.n_batches, len(fit.theta), len(fit.rho)
    ('binary', 60, 6, 1)
    """
    _check_options(lags, n_agq, max_iter, gtol, response)
    if initial not in ("model", "condition", "wooldridge"):
        msg = f"initial must be 'model', 'condition' or 'wooldridge'; got {initial!r}"
        raise ConfigError(msg)
    cols = _units(unit)
    data = _prepare(
        records,
        lags=lags,
        unit=cols,
        response=response,
        position_effects=bool(position_effects),
        columns=(batch, position, score),
        initial=initial,
    )
    problem = _separation(data, None)
    if problem is not None:
        msg = f"the Markov GLMM has no finite maximum-likelihood estimate: {problem}"
        raise GLMMConvergenceError(msg)
    d = _design(data)
    sol = _solve(
        d,
        start=_start(d, random_intercept),
        weights=np.ones(d.starts.size),
        n_agq=n_agq,
        random_intercept=random_intercept,
        max_iter=max_iter,
        gtol=gtol,
    )
    coef = _coefficients(d, sol.psi, random_intercept)
    n_u, n_p, k = len(data.units), len(data.positions), lags
    n_i = data.init_values.shape[1]
    return SequentialGLMM(
        response=data.response,
        lags=lags,
        units=data.units,
        theta=tuple(float(v) for v in coef[:n_u]),
        positions=data.positions,
        position_effects=tuple(float(v) for v in coef[n_u : n_u + n_p]),
        rho=tuple(float(v) for v in coef[n_u + n_p : n_u + n_p + k]),
        categories=data.categories,
        initial=tuple(float(v) for v in coef[n_u + n_p + k : n_u + n_p + k + n_i]),
        initial_condition=initial,
        cutpoints=tuple(float(v) for v in coef[n_u + n_p + k + n_i : -1]),
        batch_sd=float(coef[-1]),
        loglik=sol.loglik,
        n_batches=d.starts.size,
        n_obs=int(data.cat.size),
        n_conditioned=data.n_conditioned,
        n_agq=n_agq if random_intercept else 1,
        random_intercept=bool(random_intercept),
        position_effects_fitted=bool(position_effects),
        n_iter=sol.n_iter,
        gradient_norm=sol.gradient_norm,
        message=sol.message,
        columns=(batch, position, score),
        unit_columns=cols,
        table=_table(d, coef),
    )


# --------------------------------------------------------------------------
# batch bootstrap
# --------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _BootTask:
    data: _Data
    coef: np.ndarray
    seeds: tuple[np.random.SeedSequence, ...]
    n_agq: int
    random_intercept: bool
    max_iter: int
    gtol: float


# A resample's refit first takes Newton steps with the full data's information matrix held
# fixed (no Hessian per step: one gradient evaluation each); when these have not met the
# stopping rule within this many steps, the full optimizer finishes from where they got.
FIXED_METRIC_STEPS = 20


def _fixed_metric_refit(
    d: _Design, start: np.ndarray, weights: np.ndarray, info: np.ndarray, n_agq: int, random_intercept: bool,
) -> tuple[np.ndarray, bool]:
    r"""A resample's maximum by Newton steps in the full data's metric, and whether they converged.

    When they did not (within :data:`FIXED_METRIC_STEPS`), the point they reached
    is returned for the full optimizer to finish from (a start much nearer the
    resample's maximum than the full fit's; the original start when a step failed).

    :math:`\psi_{k+1} = \psi_k + t_k I_0^{-1} g_k(\psi_k)`, :math:`I_0` the full fit's
    information (minus the Hessian of its log-likelihood) and :math:`g_k` the
    resample's exact gradient, :math:`t_k` halved until the log-likelihood does not
    fall. A resample's information is :math:`I_0` up to :math:`O(n^{-1/2})`, so the
    iteration contracts by about that factor per step; it stops by the rule of
    :func:`_solve` in this metric (:func:`_newton_done`).
    """
    nodes = _nodes(n_agq if random_intercept else 1)
    # The metric must be positive-definite: where the start sits near the saddle of sigma at 0
    # (a full fit with sigma ~ 0 starts refits at SIGMA_FLOOR), the curvatures' absolute values.
    values, vectors = np.linalg.eigh(0.5 * (info + info.T))
    floor = 1e-8 * float(np.abs(values).max(initial=1.0))
    chol = np.linalg.cholesky((vectors * np.maximum(np.abs(values), floor)) @ vectors.T)
    psi = start.copy()
    st = _state(d, psi, weights, nodes, random_intercept)
    for _ in range(FIXED_METRIC_STEPS):
        if not (np.isfinite(st.value) and np.all(np.isfinite(st.grad))):
            return start, False
        half = np.linalg.solve(chol, st.grad)
        step = np.linalg.solve(chol.T, half)
        if 0.5 * float(half @ half) <= DECREMENT or float(np.abs(step).max(initial=0.0)) <= STEP_TOL:
            return psi, True
        t = 1.0
        for _ in range(20):
            trial = _state(d, psi + t * step, weights, nodes, random_intercept, st.zhat)
            if np.isfinite(trial.value) and trial.value >= st.value - 1e-12:
                break
            t /= 2
        else:
            return start, False
        psi, st = psi + t * step, trial
    return psi, False


def _bootstrap_chunk(task: _BootTask) -> list[np.ndarray | str]:
    """Refit the resamples of one chunk (a plain module-level function: any mapper can ship it)."""
    d = _design(task.data)
    n_b = d.starts.size
    start = _psi_from(d, task.coef, task.random_intercept)
    nodes = _nodes(task.n_agq if task.random_intercept else 1)
    pattern = _score_pattern(d, nodes[0].size)
    full = _state(d, start, np.ones(n_b), nodes, task.random_intercept)
    info = -_hessian(d, full, task.random_intercept, pattern)
    out: list[np.ndarray | str] = []
    for ss in task.seeds:
        rng = np.random.default_rng(ss)
        weights = np.bincount(rng.integers(0, n_b, n_b), minlength=n_b).astype(np.float64)
        problem = _separation(task.data, weights)
        if problem is not None:
            out.append(problem)
            continue
        nearer, converged = _fixed_metric_refit(d, start, weights, info, task.n_agq, task.random_intercept)
        if converged:
            out.append(_coefficients(d, nearer, task.random_intercept))
            continue
        try:
            sol = _solve(
                d,
                start=nearer,
                weights=weights,
                n_agq=task.n_agq,
                random_intercept=task.random_intercept,
                max_iter=task.max_iter,
                gtol=task.gtol,
            )
        except GLMMConvergenceError as exc:
            out.append(str(exc))
            continue
        out.append(_coefficients(d, sol.psi, task.random_intercept))
    return out


Mapper = Callable[[Callable[[_BootTask], list[np.ndarray | str]], Iterable[_BootTask]], Iterable[Any]]


def bootstrap_fits(
    records: pl.DataFrame,
    fit: SequentialGLMM,
    *,
    n_boot: int = 200,
    seed: int = 0,
    map: Mapper = map,
    level: float = 0.95,
    chunk_size: int = 25,
) -> GLMMBootstrap:
    r"""Batch-bootstrap refits of a Markov GLMM: standard errors and percentile intervals.

    Each resample draws the fit's batches with replacement (as many as it has)
    and refits with the fit's options, warm-started from the full fit; a batch
    drawn :math:`m` times counts :math:`m` times in the likelihood (the same as
    :math:`m` copies of it).

    Parameters
    ----------
    records : polars.DataFrame
        The records ``fit`` was fitted to.
    fit : SequentialGLMM
        The full fit (its options are reused).
    n_boot : int, default 200
        Resamples.
    seed : int, default 0
        Resample ``r`` draws from ``numpy.random.SeedSequence(seed).spawn(n_boot)[r]``,
        so the draws do not depend on the mapper or the chunking.
    map : callable, default builtins.map
        ``map(function, tasks)`` returning the results in order: the builtin,
        ``concurrent.futures.Executor.map``, or for Dask
        ``lambda f, xs: client.gather(client.map(f, list(xs)))``. The function is
        module-level and its tasks are picklable (integer-coded responses, not frames).
    level : float, default 0.95
        Percentile-interval level.
    chunk_size : int, default 25
        Resamples per task.

    Returns
    -------
    GLMMBootstrap

    Raises
    ------
    DesignError
        ``records`` do not give the fit's units, positions and categories.
    GLMMConvergenceError
        Fewer than 2 refits succeeded.
    ConfigError
        ``n_boot``, ``level`` or ``chunk_size`` out of range.
    """
    if not isinstance(n_boot, int) or n_boot < 2:
        msg = f"n_boot must be an integer >= 2; got {n_boot!r}"
        raise ConfigError(msg)
    if not 0.0 < level < 1.0:
        msg = f"level must be in (0, 1); got {level!r}"
        raise ConfigError(msg)
    if not isinstance(chunk_size, int) or chunk_size < 1:
        msg = f"chunk_size must be a positive integer; got {chunk_size!r}"
        raise ConfigError(msg)
    data = _prepare(
        records,
        lags=fit.lags,
        unit=fit.unit_columns,
        response=fit.response,
        position_effects=fit.position_effects_fitted,
        columns=fit.columns,
        initial=fit.initial_condition,
    )
    if (data.units, data.positions, data.categories) != (fit.units, fit.positions, fit.categories):
        msg = "records must be the ones the fit was fitted to: their units, positions or categories differ"
        raise DesignError(msg)
    coef = fit.table["estimate"].to_numpy()
    seeds = np.random.SeedSequence(seed).spawn(n_boot)
    tasks = [
        _BootTask(
            data=data,
            coef=coef,
            seeds=tuple(seeds[i : i + chunk_size]),
            n_agq=fit.n_agq,
            random_intercept=fit.random_intercept,
            max_iter=MAX_ITER,
            gtol=GTOL,
        )
        for i in range(0, n_boot, chunk_size)
    ]
    results = [r for chunk in map(_bootstrap_chunk, tasks) for r in chunk]
    draws = [r for r in results if not isinstance(r, str)]
    reasons = sorted({r for r in results if isinstance(r, str)})
    if len(draws) < 2:
        msg = f"fewer than 2 of the {n_boot} bootstrap refits succeeded; reasons: {reasons[:3]}"
        raise GLMMConvergenceError(msg)
    mat = np.vstack(draws)
    fixed = fit.table["fixed"].to_numpy()
    se = np.where(fixed, np.nan, mat.std(axis=0, ddof=1))
    low, high = np.quantile(mat, [(1.0 - level) / 2.0, (1.0 + level) / 2.0], axis=0)
    table = fit.table.select("name", "term", "level", "estimate").with_columns(
        pl.Series("se", se).fill_nan(None),
        pl.Series("low", np.where(fixed, np.nan, low)).fill_nan(None),
        pl.Series("high", np.where(fixed, np.nan, high)).fill_nan(None),
    )
    return GLMMBootstrap(
        draws=mat,
        names=tuple(fit.table["name"].to_list()),
        table=table.select(list(BOOTSTRAP_SCHEMA)).cast(BOOTSTRAP_SCHEMA),  # type: ignore[arg-type]
        n_boot=n_boot,
        n_failed=len(results) - len(draws),
        failures=tuple(reasons),
        level=float(level),
        seed=int(seed),
    )


# --------------------------------------------------------------------------
# serial statistics (private: the public ones live in diagnostics)
# --------------------------------------------------------------------------


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


# --------------------------------------------------------------------------
# predictive check
# --------------------------------------------------------------------------


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
    batch_col, pos_col, score_col = fit.columns
    missing = [c for c in (batch_col, pos_col, *fit.unit_columns, score_col) if c not in held_out.columns]
    if missing:
        msg = f"held_out must have the fit's columns; missing {missing}"
        raise DesignError(msg)
    frame = held_out.select(
        pl.col(batch_col).cast(pl.String).alias("_b"),
        pl.col(pos_col).cast(pl.Int64).alias("_t"),
        _unit_expr(fit.unit_columns).alias("_u"),
        pl.col(score_col).cast(pl.Float64).alias("_y"),
    ).filter(pl.col("_y").is_not_null() & pl.col("_y").is_finite())
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
    theta = np.asarray(fit.theta)
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
    cats = np.asarray(fit.categories)
    if not np.isin(y_obs[present], cats).all() and fit.response == "binary":
        msg = "held_out scores must be 0/1 for a binary fit"
        raise DesignError(msg)
    levels = np.union1d(cats, y_obs[present])

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
    sims = draw_sequences(
        eta_s,
        rho=np.asarray(fit.rho),
        cutpoints=np.asarray(fit.cutpoints) if fit.response == "ordinal" else None,
        rng=rng,
        fixed=fixed,
        simulate=np.broadcast_to(resp[None], eta_s.shape),
        levels=cats if fit.response == "ordinal" else None,
    )

    def code(v: np.ndarray) -> np.ndarray:
        idx = np.searchsorted(levels, np.nan_to_num(v, nan=levels[0]))
        return np.where(np.isfinite(v), idx, -1).astype(np.int64)

    obs_codes = code(y_obs)[None]
    sim_codes = code(sims)
    n_cat = levels.size
    lo_q, hi_q = (1.0 - level) / 2.0, (1.0 + level) / 2.0
    rows: list[dict[str, Any]] = []

    def add(stat: str, name: str, order: int, prev: str | None, cur: str | None, obs: float, sim: np.ndarray) -> None:
        finite = sim[np.isfinite(sim)]
        if finite.size == 0:
            mean = low = high = math.nan
        else:
            mean = float(finite.mean())
            low, high = (float(v) for v in np.quantile(finite, [lo_q, hi_q]))
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
