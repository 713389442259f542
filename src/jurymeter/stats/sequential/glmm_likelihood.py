r"""The Markov GLMM's marginal likelihood by adaptive Gauss-Hermite quadrature, its exact gradient and Louis' Hessian.

With :math:`u_b = \sigma z`, :math:`z \sim N(0, 1)`, batch :math:`b` contributes
:math:`w_b \log \int \prod_{t} P(Y_{bt} \mid \eta_{bt} + \sigma z)\,\phi(z)\,dz`
(:mod:`jurymeter.stats.sequential.glmm`, "Likelihood"). The log integrand
:math:`g_b` is strictly concave; its mode :math:`\hat z_b` comes from a bracketed
Newton iteration vectorized over batches (:func:`_modes`),
:math:`\tau_b = (-g_b''(\hat z_b))^{-1/2}`, and

.. math::

    \int e^{g_b(z)} dz \approx \sqrt{2}\,\tau_b \sum_{q=1}^{Q} w_q e^{x_q^2}
    e^{g_b(\hat z_b + \sqrt{2}\tau_b x_q)}

(:math:`Q` = ``n_agq`` Gauss-Hermite nodes, lme4's ``nAGQ`` [Bates2015]_).
:func:`_state` gives the value and its exact gradient (the dependence of
:math:`\hat z_b` and :math:`\tau_b` on the parameters included, by implicit
differentiation of :math:`g_b'(\hat z_b) = 0`); :func:`_hessian` is Louis'
identity [Louis1982]_ with the nodes held fixed: the posterior mean of the
complete-data Hessian plus the posterior variance of the complete-data score.

References
----------
.. [Louis1982] T. A. Louis, "Finding the observed information matrix when using
   the EM algorithm", JRSS B 44, 1982.
.. [Bates2015] D. Bates et al., "Fitting linear mixed-effects models using lme4",
   Journal of Statistical Software 67, 2015 (``glmer``, ``nAGQ``).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from scipy.sparse import csr_matrix
from scipy.special import expit

from jurymeter.stats.sequential.glmm_model import (
    GLMMConvergenceError,
    _Design,
)

# Conditional modes: Newton steps until the largest is below this (z units, prior sd 1);
# Newton converges quadratically, so the mode is then exact to rounding.
MODE_TOLERANCE = 1e-10
MODE_MAX_ITER = 200


_SQRT2 = math.sqrt(2.0)
_LOG_SQRT_2PI = 0.5 * math.log(2.0 * math.pi)


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
    # Long (94 lines) as one pass of dense algebra: the value's intermediates (modes, tau, node weights, link derivatives) feed the gradient; split, it would hand some 20 arrays across.
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
