r"""The Markov GLMM's optimizer: starting values, trust-exact with Louis' Hessian, and the stopping rules.

scipy's ``trust-exact`` on the parameters :math:`\psi` (the coefficients,
:math:`\sigma` itself, and for the ordinal model :math:`\alpha_1` and the logs
of the cutpoint increments) with the exact gradient and Louis' Hessian of
:mod:`jurymeter.stats.sequential.glmm_likelihood`. A fit stops when the
gradient's Euclidean norm is below ``gtol``, when a Newton step would raise the
log-likelihood by less than ``DECREMENT``, or when it would move no parameter
by more than ``STEP_TOL`` (a batch SD at its boundary 0); an estimate beyond
``DIVERGED`` logits means no finite maximum (:mod:`jurymeter.stats.sequential.glmm`,
"Likelihood").
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
from scipy.optimize import minimize

from jurymeter.stats.sequential.glmm_likelihood import (
    _cuts,
    _hessian,
    _nodes,
    _pack_cuts,
    _score_pattern,
    _stack,
    _State,
    _state,
    _unpack,
)
from jurymeter.stats.sequential.glmm_model import (
    GLMMConvergenceError,
    _Design,
)

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
