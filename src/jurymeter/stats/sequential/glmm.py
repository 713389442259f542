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

from collections.abc import Sequence

import numpy as np
import polars as pl

from jurymeter.errors import ConfigError
from jurymeter.stats.sequential.glmm_bootstrap import (
    QUASI_NEWTON_STEPS,
    Mapper,
    bootstrap_fits,
)
from jurymeter.stats.sequential.glmm_check import (
    predictive_check,
)
from jurymeter.stats.sequential.glmm_likelihood import (
    MODE_MAX_ITER,
    MODE_TOLERANCE,
)
from jurymeter.stats.sequential.glmm_model import (
    GLMMBootstrap,
    GLMMConvergenceError,
    Initial,
    PredictiveCheck,
    Response,
    SequentialGLMM,
    _Design,
    _design,
    _label,
    _prepare,
    _separation,
)
from jurymeter.stats.sequential.glmm_solve import (
    DECREMENT,
    DIVERGED,
    GTOL,
    MAX_ITER,
    SIGMA_FLOOR,
    START_SIGMA,
    STEP_TOL,
    _coefficients,
    _solve,
    _start,
)
from jurymeter.stats.sequential.schemas import BOOTSTRAP_SCHEMA, CHECK_SCHEMA, COEFFICIENT_SCHEMA

__all__ = [
    "BOOTSTRAP_SCHEMA",
    "CHECK_SCHEMA",
    "COEFFICIENT_SCHEMA",
    "DECREMENT",
    "DIVERGED",
    "GTOL",
    "MAX_ITER",
    "MODE_MAX_ITER",
    "MODE_TOLERANCE",
    "QUASI_NEWTON_STEPS",
    "SIGMA_FLOOR",
    "START_SIGMA",
    "STEP_TOL",
    "GLMMBootstrap",
    "GLMMConvergenceError",
    "Initial",
    "Mapper",
    "PredictiveCheck",
    "Response",
    "SequentialGLMM",
    "bootstrap_fits",
    "fit_sequential_glmm",
    "predictive_check",
]


# --------------------------------------------------------------------------
# the fit
# --------------------------------------------------------------------------


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
    # Long (151 lines) by its numpy docstring (every parameter, the formulas and their sources); the code below is 58 lines.
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
