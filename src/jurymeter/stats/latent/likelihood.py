r"""The Laplace approximation of the latent model's marginal likelihood, on the cells' cube.

Notation of :mod:`jurymeter.stats.latent.model`. Write the random effects as
:math:`u = \Lambda b`, :math:`b \sim N(0, I)`, :math:`\Lambda` diagonal with
each term's :math:`\sigma_t` (the parameterisation of lme4, Bates et al. 2015,
sec. 3), and :math:`\ell(\eta)` the cells' log-likelihood
:math:`\sum_c \sum_k n_{ck} \log p_k(\eta_c)`. The Laplace approximation of the
deviance (Bates et al. 2015, eq. 30-31; Christensen 2019, ``clmm`` Laplace) is

.. math::

    -2 \log L(\sigma, \theta) \approx -2 \ell(\hat\eta) + \lVert \hat b \rVert^2
    + \log\det(\Lambda Z^\top W Z \Lambda + I),

:math:`\hat b` the mode of :math:`\ell(\eta(b)) - \lVert b\rVert^2/2` (found by
Newton's method, which converges: ``F`` logistic or normal is log-concave, so
the objective is strictly concave) and :math:`W = \mathrm{diag}(-\partial^2
\ell_c / \partial\eta_c^2)` at the mode. For the logit link this equals the
Fisher weights of glmer's PIRLS; for other links it is the observed
information, as ``ordinal::clmm`` uses.

Structure. Every block of :math:`Z` is the indicator matrix of a factor's
levels. With ``L`` the facet with most levels, the effects of one level of
``L`` (:math:`u_L`, :math:`u_{LX}`, :math:`u_{LY}`) meet no other level's, so
:math:`M = \Lambda Z^\top W Z \Lambda + I` is block-arrowhead: a diagonal of
dense ``m x m`` blocks (``m = 1 + n_X + n_Y``), one per level of ``L``, and a
border of the ``g = n_X + n_Y + n_X n_Y`` effects of ``X``, ``Y``, ``XY``.
Its determinant and solves take the blocks' batched Cholesky-free solves and
the Schur complement of the border: :math:`O(n_L m^2 g + n_L m g^2 + g^3)`.
The blocks are sums of the weights over the cube's axes, so no sparse matrix
is formed.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
from scipy import linalg, special

from jurymeter.stats.latent.model import Layout, Link

# Newton's method on the modes stops when the Newton decrement r' M^{-1} r is below this. The penalised
# part of the deviance is then within about this of its value at the exact mode, but log det M is not
# stationary there: modes sqrt(decrement) off move it, and the analytic gradient (computed as at the exact
# mode) would disagree with the deviance by that much (at 1e-12, ~1e-7 of the deviance on 50K cells, enough
# to stall L-BFGS-B's line search). Newton converges quadratically, so 1e-16 costs about no extra step.
DECREMENT = 1e-16
# ... or when the decrement is below this and stopped falling (rounding: Newton's quadratic convergence
# would otherwise take it from here below DECREMENT in one step).
STALLED_DECREMENT = 1e-10
MAX_NEWTON = 50
# Chord steps (laplace_deviance with an old factor) go on while each shrinks the decrement by at least a
# factor CHORD_RATE (a chord step costs a fifth to a tenth of a factorization), down to CHORD_MARGIN *
# DECREMENT. Far below DECREMENT: the decrement with M factored at the modes reached (which differs from the
# old one's by the relative change of M) is then below DECREMENT too, and that factorization is the
# evaluation's last; and as log det M moves with the modes' error, sqrt(decrement), the modes must end about as
# near the exact ones as Newton's quadratic convergence leaves them (it jumps from above DECREMENT to far below;
# chord steps stopped just below it left deviances 4e-11 off, enough to fail the gradient test's differences).
CHORD_RATE = 0.1
CHORD_MARGIN = 1e-6
# Probabilities are floored here so a category's log never is -inf (only far outside any fit).
P_FLOOR = 1e-300


@dataclass(frozen=True)
class _Ends:
    """Per cell and category ``k``: ``p_k`` and, at its two ends, f, f' (and f'') padded with the 0s at infinity."""

    p: np.ndarray  # (C, K), floored at P_FLOOR
    f: np.ndarray  # (C, K+1): f(a_0 = -inf) = 0, f(theta_j - eta), f(a_K = inf) = 0
    fp: np.ndarray
    fpp: np.ndarray | None


def _ends(eta: np.ndarray, theta: np.ndarray, link: Link, third: bool) -> _Ends:
    r"""The categories' probabilities and the density's derivatives at the thresholds.

    :math:`p_k = F(\theta_k - \eta) - F(\theta_{k-1} - \eta)` with :math:`\theta_0 = -\infty`,
    :math:`\theta_K = \infty`; each difference is taken in the upper tail
    (:math:`F(-a)`, the links being symmetric) where both arguments are positive (no
    cancellation). Logistic: :math:`f = F(a)F(-a)`, :math:`f' = f(1-2F)`,
    :math:`f'' = f((1-2F)^2 - 2f)`; normal: :math:`f' = -af`, :math:`f'' = (a^2-1)f`. Only the
    ``K - 1`` finite thresholds are evaluated.
    """
    z = theta[None, :] - eta[:, None]
    if link == "logit":
        big_f, upper = special.expit(z), special.expit(-z)
        f = big_f * upper
        slope = upper - big_f  # 1 - 2F
        fp = f * slope
        fpp = f * (slope * slope - 2.0 * f) if third else None
    else:
        big_f, upper = special.ndtr(z), special.ndtr(-z)
        f = np.exp(-0.5 * z * z) * (1.0 / np.sqrt(2.0 * np.pi))
        fp = -z * f
        fpp = (z * z - 1.0) * f if third else None
    c = eta.shape[0]
    zero, one = np.zeros((c, 1)), np.ones((c, 1))
    big_f = np.concatenate([zero, big_f, one], axis=1)
    upper = np.concatenate([one, upper, zero], axis=1)
    lower_positive = np.concatenate([np.zeros((c, 1), dtype=bool), z > 0], axis=1)
    p = np.where(lower_positive, upper[:, :-1] - upper[:, 1:], big_f[:, 1:] - big_f[:, :-1])

    def pad(v: np.ndarray) -> np.ndarray:
        return np.concatenate([zero, v, zero], axis=1)

    return _Ends(np.maximum(p, P_FLOOR), pad(f), pad(fp), None if fpp is None else pad(fpp))


def cell_derivatives(
    eta: np.ndarray, theta: np.ndarray, counts: np.ndarray, link: Link
) -> tuple[float, np.ndarray, np.ndarray]:
    r"""The cells' log-likelihood, its first derivative and minus its second in :math:`\eta_c`.

    :math:`p_k = F(\theta_k - \eta) - F(\theta_{k-1} - \eta)` with
    :math:`\theta_0 = -\infty`, :math:`\theta_K = \infty`; each difference is
    taken in the upper tail where both arguments are positive (no cancellation).
    """
    if link == "logit" and counts.shape[1] == 2:
        return _binary_logit(eta, theta, counts)
    e = _ends(eta, theta, link, third=False)
    p = e.p
    d1 = -(e.f[:, 1:] - e.f[:, :-1]) / p  # d log p / d eta
    d2 = (e.fp[:, 1:] - e.fp[:, :-1]) / p - d1 * d1  # d2 log p / d eta2
    loglik = float(np.sum(counts * np.log(p), where=counts > 0))
    # A cumulative link with a log-concave F (logistic, normal) is log-concave in eta, so the weights are
    # >= 0; a negative one is rounding in a far tail (a probability at P_FLOOR), and would make the Laplace
    # matrix indefinite (seen on a 10-category MT-Bench-like scale with 2 ratings of 1): it is taken as 0.
    return loglik, np.sum(counts * d1, axis=1), np.maximum(-np.sum(counts * d2, axis=1), 0.0)


def _binary_logit(eta: np.ndarray, theta: np.ndarray, counts: np.ndarray) -> tuple[float, np.ndarray, np.ndarray]:
    r""":func:`cell_derivatives` for two categories and the logit: with :math:`F = \operatorname{expit}(\theta_1 -
    \eta) = p_0` and :math:`n = n_0 + n_1`, :math:`\ell = n_0\log F + n_1\log(1 - F)`,
    :math:`\partial\ell/\partial\eta = nF - n_0` and :math:`w = nF(1-F)` (the binomial logit's score and
    Fisher weight, McCullagh and Nelder 1989, sec. 4.4). Exact logs in the tails (``log_expit``), no floor."""
    z = theta[0] - eta
    n0, n1 = counts[:, 0], counts[:, 1]
    log_f = special.log_expit(z)
    loglik = float(n0 @ log_f + n1 @ (log_f - z))  # log(1 - F) = log F - z
    big_f = special.expit(z)
    n = n0 + n1
    return loglik, n * big_f - n0, n * (big_f * special.expit(-z))


@dataclass(frozen=True)
class HigherDerivatives:
    r"""What the deviance's gradient needs of the cells beyond :func:`cell_derivatives`.

    ``w_eta`` is :math:`\partial w_c / \partial \eta_c` (minus the third derivative of
    :math:`\ell_c`); per threshold :math:`\theta_j` (columns): ``l_theta``
    :math:`\partial \ell_c / \partial\theta_j`, ``g_theta``
    :math:`\partial^2 \ell_c / \partial\eta_c\partial\theta_j` and ``w_theta``
    :math:`\partial w_c / \partial\theta_j` at fixed :math:`\eta`. Where the weight was
    clamped to 0 (:func:`cell_derivatives`) its derivatives are 0.
    """

    w_eta: np.ndarray  # (C,)
    l_theta: np.ndarray  # (C, K-1)
    g_theta: np.ndarray  # (C, K-1)
    w_theta: np.ndarray  # (C, K-1)


def cell_higher_derivatives(eta: np.ndarray, theta: np.ndarray, counts: np.ndarray, link: Link) -> HigherDerivatives:
    r"""Third derivatives of the cells' log-likelihood in :math:`\eta` and the thresholds.

    Category ``k`` has :math:`\log p_k = \log N(\alpha, \beta)`, :math:`N = F(\beta) - F(\alpha)`,
    :math:`\alpha = \theta_{k-1} - \eta`, :math:`\beta = \theta_k - \eta`. With
    :math:`D = \partial_\alpha + \partial_\beta` (so :math:`\partial_\eta = -D`) and
    :math:`\kappa_\cdot = N_\cdot / N`, where :math:`N_D = f(\beta) - f(\alpha)`,
    :math:`N_{DD} = f'(\beta) - f'(\alpha)`, :math:`N_{DDD} = f''(\beta) - f''(\alpha)`,
    :math:`N_\beta = f(\beta)`, :math:`N_{D\beta} = f'(\beta)`, :math:`N_{DD\beta} = f''(\beta)`
    (the mixed partials of ``N`` are 0), the derivatives of a logarithm (the
    moments-to-cumulants formulas, McCullagh 1987, sec. 2.3) are
    :math:`L_{DD} = \kappa_{DD} - \kappa_D^2`,
    :math:`L_{DDD} = \kappa_{DDD} - 3\kappa_{DD}\kappa_D + 2\kappa_D^3`,
    :math:`L_{D\beta} = \kappa_{D\beta} - \kappa_D\kappa_\beta`,
    :math:`L_{DD\beta} = \kappa_{DD\beta} - \kappa_{DD}\kappa_\beta - 2\kappa_{D\beta}\kappa_D
    + 2\kappa_D^2\kappa_\beta`, and the same in :math:`\alpha` with :math:`N_\alpha = -f(\alpha)`, ...
    Then :math:`\partial w/\partial\eta = L_{DDD}`, :math:`\partial\ell/\partial\theta = L_\beta`,
    :math:`\partial^2\ell/\partial\eta\partial\theta = -L_{D\beta}` and
    :math:`\partial w/\partial\theta = -L_{DD\beta}`, summed over the categories with their
    counts; :math:`\theta_j` is the upper end of category ``j`` and the lower end of ``j + 1``.
    """
    if link == "logit" and counts.shape[1] == 2:
        # F = expit(theta_1 - eta), w = n F (1 - F): dw/deta = -(1 - 2F) w, dl/dtheta = n0 - n F,
        # d2l/deta dtheta = w, dw/dtheta = (1 - 2F) w (the derivatives of _binary_logit's formulas)
        z = theta[0] - eta
        big_f, upper = special.expit(z), special.expit(-z)
        n0 = counts[:, 0]
        n = n0 + counts[:, 1]
        w = n * (big_f * upper)
        w_theta = (upper - big_f) * w
        return HigherDerivatives(-w_theta, (n0 - n * big_f)[:, None], w[:, None], w_theta[:, None])
    e = _ends(eta, theta, link, third=True)
    p, f, fp = e.p, e.f, e.fp
    fpp = e.fpp if e.fpp is not None else fp
    lo, hi = slice(None, -1), slice(1, None)
    k1 = (f[:, hi] - f[:, lo]) / p
    k2 = (fp[:, hi] - fp[:, lo]) / p
    k3 = (fpp[:, hi] - fpp[:, lo]) / p
    l_dd = k2 - k1 * k1
    l_ddd = k3 - 3.0 * k2 * k1 + 2.0 * k1**3
    clamped = -np.sum(counts * l_dd, axis=1) < 0.0  # cell_derivatives' weight taken as 0

    def ends(sign: float, at: slice) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        kb, kdb, kddb = sign * f[:, at] / p, sign * fp[:, at] / p, sign * fpp[:, at] / p
        return kb, kdb - k1 * kb, kddb - k2 * kb - 2.0 * kdb * k1 + 2.0 * k1 * k1 * kb

    ub, udb, uddb = ends(1.0, hi)  # in theta_k, the upper end of category k
    lb, ldb, lddb = ends(-1.0, lo)  # in theta_{k-1}, its lower end
    n_up, n_lo = counts[:, :-1], counts[:, 1:]
    l_theta = n_up * ub[:, :-1] + n_lo * lb[:, 1:]
    g_theta = -(n_up * udb[:, :-1] + n_lo * ldb[:, 1:])
    w_theta = -(n_up * uddb[:, :-1] + n_lo * lddb[:, 1:])
    w_eta = np.sum(counts * l_ddd, axis=1)
    w_eta[clamped] = 0.0
    w_theta[clamped] = 0.0
    return HigherDerivatives(w_eta, l_theta, g_theta, w_theta)


@dataclass
class Modes:
    """The modes :math:`b` on the cube: per level of ``L`` the local vector, and the border."""

    local: np.ndarray  # (n_L, m): [b_L, b_LX (n_X), b_LY (n_Y)]
    border: np.ndarray  # (g,): [b_X, b_Y, b_XY (n_X * n_Y, x-major)]

    @classmethod
    def zeros(cls, dims: tuple[int, int, int]) -> Modes:
        n_l, n_x, n_y = dims
        return cls(np.zeros((n_l, 1 + n_x + n_y)), np.zeros(n_x + n_y + n_x * n_y))

    def copy(self) -> Modes:
        return Modes(self.local.copy(), self.border.copy())

    def rescaled(self, ratio: np.ndarray, dims: tuple[int, int, int]) -> Modes:
        """The modes with each slot's ``b`` times ``ratio`` (six slots): the same ``u`` at new SDs."""
        _, n_x, n_y = dims
        local = self.local.copy()
        border = self.border.copy()
        local[:, 0] *= ratio[0]
        border[:n_x] *= ratio[1]
        border[n_x:n_x + n_y] *= ratio[2]
        local[:, 1:1 + n_x] *= ratio[3]
        local[:, 1 + n_x:] *= ratio[4]
        border[n_x + n_y:] *= ratio[5]
        return Modes(local, border)


@dataclass(frozen=True)
class LaplaceValue:
    """The Laplace deviance at one parameter value and what it was made of."""

    deviance: float
    loglik: float  # the conditional log-likelihood at the mode
    penalty: float  # ||b||^2
    logdet: float  # log det(Lambda Z'WZ Lambda + I)
    modes: Modes
    newton_steps: int
    # At the mode: the factored M and the cells' first derivative and weights (for laplace_gradient).
    factor: Factor | None = field(default=None, repr=False, compare=False)
    g: np.ndarray | None = field(default=None, repr=False, compare=False)
    w: np.ndarray | None = field(default=None, repr=False, compare=False)


class Cube:
    """The layout's cells with the operations the Laplace approximation needs (module docstring)."""

    def __init__(self, layout: Layout, link: Link) -> None:
        self.layout = layout
        self.link = link
        self.dims = layout.dims
        self.size = int(np.prod(self.dims))
        self.complete = layout.flat.size == self.size
        self.counts = layout.counts

    # --------------------------------------------------------------- cube <-> cells
    def to_cube(self, values: np.ndarray) -> np.ndarray:
        if self.complete:
            return values.reshape(self.dims)
        return np.bincount(self.layout.flat, weights=values, minlength=self.size).reshape(self.dims)

    def eta(self, sigma: np.ndarray, b: Modes) -> np.ndarray:
        r""":math:`\eta` of every cell (``sigma``: the six slots' SDs, solver order)."""
        _, n_x, n_y = self.dims
        s_l, s_x, s_y, s_lx, s_ly, s_xy = sigma
        loc, bor = b.local, b.border
        cube = (
            (s_l * loc[:, 0])[:, None, None]
            + (s_x * bor[:n_x])[None, :, None]
            + (s_y * bor[n_x:n_x + n_y])[None, None, :]
            + (s_lx * loc[:, 1:1 + n_x])[:, :, None]
            + (s_ly * loc[:, 1 + n_x:])[:, None, :]
            + (s_xy * bor[n_x + n_y:]).reshape(n_x, n_y)[None, :, :]
        )
        flat: np.ndarray = cube.reshape(-1)
        return flat if self.complete else flat[self.layout.flat]

    def gradient(self, sigma: np.ndarray, g_cells: np.ndarray) -> Modes:
        r""":math:`\Lambda Z^\top g` on the modes' layout."""
        s_l, s_x, s_y, s_lx, s_ly, s_xy = sigma
        g = self.to_cube(g_cells)
        g_lx, g_ly = g.sum(axis=2), g.sum(axis=1)
        g_xy = g.sum(axis=0)
        local = np.concatenate([(s_l * g_lx.sum(axis=1))[:, None], s_lx * g_lx, s_ly * g_ly], axis=1)
        border = np.concatenate([s_x * g_xy.sum(axis=1), s_y * g_xy.sum(axis=0), s_xy * g_xy.reshape(-1)])
        return Modes(local, border)

    def slot_sums(self, x: Modes, y: Modes) -> np.ndarray:
        """Per slot (solver order), the sum of ``x * y`` over that slot's effects."""
        _, n_x, n_y = self.dims
        loc, bor = x.local * y.local, x.border * y.border
        return np.array([loc[:, 0].sum(), bor[:n_x].sum(), bor[n_x:n_x + n_y].sum(), loc[:, 1:1 + n_x].sum(),
                         loc[:, 1 + n_x:].sum(), bor[n_x + n_y:].sum()])

    def cells_of(self, cube: np.ndarray) -> np.ndarray:
        """The cells' values of a dense cube (the inverse of :meth:`to_cube` on present cells)."""
        flat = cube.reshape(-1)
        return flat if self.complete else flat[self.layout.flat]

    def blocks(self, sigma: np.ndarray, w_cells: np.ndarray) -> tuple[np.ndarray, Border, np.ndarray]:
        """The diagonal blocks ``A`` (n_L, m, m), the border ``B`` (n_L, m, g, as a :class:`Border`) and
        ``G`` (g, g) of ``M``."""
        n_l, n_x, n_y = self.dims
        s_l, s_x, s_y, s_lx, s_ly, s_xy = sigma
        h = self.to_cube(w_cells)
        h_lx, h_ly = h.sum(axis=2), h.sum(axis=1)
        h_l = h_lx.sum(axis=1)
        m = 1 + n_x + n_y
        ix = np.arange(n_x)
        iy = np.arange(n_y)
        lx = 1 + ix
        ly = 1 + n_x + iy
        a = np.zeros((n_l, m, m))
        a[:, 0, 0] = s_l * s_l * h_l
        a[:, 0, lx] = s_l * s_lx * h_lx
        a[:, 0, ly] = s_l * s_ly * h_ly
        a[:, lx, lx] = s_lx * s_lx * h_lx
        a[:, ly, ly] = s_ly * s_ly * h_ly
        a[:, 1:1 + n_x, 1 + n_x:] = s_lx * s_ly * h
        a[:, lx, 0] = a[:, 0, lx]
        a[:, ly, 0] = a[:, 0, ly]
        a[:, 1 + n_x:, 1:1 + n_x] = np.swapaxes(a[:, 1:1 + n_x, 1 + n_x:], 1, 2)
        a[:, np.arange(m), np.arange(m)] += 1.0
        g = n_x + n_y + n_x * n_y
        cx = ix
        cy = n_x + iy
        b = Border(sigma, h)
        h_xy = h.sum(axis=0)
        big = np.zeros((g, g))
        big[cx, cx] = s_x * s_x * h_xy.sum(axis=1)
        big[cy, cy] = s_y * s_y * h_xy.sum(axis=0)
        big[:n_x, n_x:n_x + n_y] = s_x * s_y * h_xy
        gx = np.zeros((n_x, n_x, n_y))
        gx[ix, ix, :] = s_x * s_xy * h_xy
        big[:n_x, n_x + n_y:] = gx.reshape(n_x, -1)
        gy = np.zeros((n_y, n_x, n_y))
        gy[iy, :, iy] = s_y * s_xy * h_xy.T
        big[n_x:n_x + n_y, n_x + n_y:] = gy.reshape(n_y, -1)
        dxy = n_x + n_y + np.arange(n_x * n_y)
        big[dxy, dxy] = s_xy * s_xy * h_xy.reshape(-1)
        upper = np.triu(big, 1)
        big = np.diag(np.diag(big)) + upper + upper.T + np.eye(g)
        return a, b, big


class Border:
    r"""The border ``B`` of ``M`` (:meth:`Cube.blocks`) kept as the weights' cube, not as a dense array.

    Row ``L`` of a block meets every border effect of its level; row ``LX`` (level ``x``) meets ``X = x``,
    all of ``Y`` and ``XY = (x, .)``; row ``LY`` (``y``) all of ``X``, ``Y = y`` and ``XY = (., y)``, each with
    the SDs' product times the weights summed over the rest (:meth:`Cube.blocks`). Products with ``B``
    are sums over those few rows: :math:`O(n_L m g)` and gemms of :math:`n_L n_X n_Y g` for the Schur
    complement, against :math:`O(n_L m g^2)` for the dense ``B``.
    """

    def __init__(self, sigma: np.ndarray, h: np.ndarray) -> None:
        self.sigma = sigma
        self.h = h  # (n_L, n_X, n_Y) weights
        self.h_lx, self.h_ly = h.sum(axis=2), h.sum(axis=1)
        self.n_l, self.n_x, self.n_y = h.shape
        self.g = self.n_x + self.n_y + self.n_x * self.n_y

    def right(self, v: np.ndarray) -> np.ndarray:
        """``v @ B`` per level for ``v`` of shape (n_L, r, m): shape (n_L, r, g)."""
        s_l, s_x, s_y, s_lx, s_ly, s_xy = self.sigma
        n_x = self.n_x
        v0, v_lx, v_ly = v[:, :, 0], v[:, :, 1:1 + n_x], v[:, :, 1 + n_x:]
        h = self.h
        n_l, r, n_y = v.shape[0], v.shape[1], self.n_y
        # written in place into one (n_L, r, g) array (the XY part is its largest: n_L r n_X n_Y)
        out = np.empty((n_l, r, self.g))
        out_x, out_y = out[:, :, :n_x], out[:, :, n_x:n_x + n_y]
        out_xy = out[:, :, n_x + n_y:].reshape(n_l, r, n_x, n_y)  # a view: the last axis is contiguous
        lead = (s_l * v0)[:, :, None]
        np.multiply(v_lx, s_lx, out=out_x)
        out_x += lead
        out_x *= (s_x * self.h_lx)[:, None, :]
        out_x += np.matmul(v_ly, (s_x * s_ly) * np.swapaxes(h, 1, 2))
        np.multiply(v_ly, s_ly, out=out_y)
        out_y += lead
        out_y *= (s_y * self.h_ly)[:, None, :]
        out_y += np.matmul(v_lx, (s_y * s_lx) * h)
        np.add((s_lx * v_lx + lead)[:, :, :, None], (s_ly * v_ly)[:, :, None, :], out=out_xy)
        out_xy *= (s_xy * h)[:, None, :, :]
        return out

    def times(self, x: np.ndarray) -> np.ndarray:
        r""":math:`B_l x` per level for ``x`` of shape (g,): shape (n_L, m), from the weights' cube (the rows of
        the class docstring: row ``L`` meets every border effect, ``LX = x`` meets ``X = x``, all of ``Y`` and
        ``XY = (x, .)``, ``LY = y`` all of ``X``, ``Y = y`` and ``XY = (., y)``)."""
        s_l, s_x, s_y, s_lx, s_ly, s_xy = self.sigma
        n_x, n_y = self.n_x, self.n_y
        x_x, x_y = s_x * x[:n_x], s_y * x[n_x:n_x + n_y]
        hxy = self.h * (s_xy * x[n_x + n_y:].reshape(n_x, n_y))[None]  # (n_L, n_X, n_Y)
        row_lx = s_lx * (self.h_lx * x_x + self.h @ x_y + hxy.sum(axis=2))
        row_ly = s_ly * (x_x @ self.h + self.h_ly * x_y + hxy.sum(axis=1))
        row_l = s_l * (self.h_lx @ x_x + self.h_ly @ x_y + hxy.sum(axis=(1, 2)))
        return np.concatenate([row_l[:, None], row_lx, row_ly], axis=1)

    def transpose_times(self, v: np.ndarray) -> np.ndarray:
        r""":math:`\sum_l B_l^\top v_l` for ``v`` of shape (n_L, m, k): shape (g, k)."""
        s_l, s_x, s_y, s_lx, s_ly, s_xy = self.sigma
        n_l, n_x, n_y = self.n_l, self.n_x, self.n_y
        k = v.shape[2]
        v0, v_lx, v_ly = v[:, 0, :], v[:, 1:1 + n_x, :], v[:, 1 + n_x:, :]
        h = self.h
        rows_x = (s_l * self.h_lx.T @ v0 + s_lx * np.einsum("lx,lxk->xk", self.h_lx, v_lx)
                  + s_ly * np.swapaxes(h, 0, 1).reshape(n_x, n_l * n_y) @ v_ly.reshape(n_l * n_y, k))
        rows_y = (s_l * self.h_ly.T @ v0 + s_ly * np.einsum("ly,lyk->yk", self.h_ly, v_ly)
                  + s_lx * np.moveaxis(h, 2, 0).reshape(n_y, n_l * n_x) @ v_lx.reshape(n_l * n_x, k))
        rows_xy = (s_l * h.reshape(n_l, n_x * n_y).T @ v0
                   + s_lx * np.matmul(np.transpose(h, (1, 2, 0)), np.swapaxes(v_lx, 0, 1)).reshape(n_x * n_y, k)
                   + s_ly * np.swapaxes(np.matmul(np.transpose(h, (2, 1, 0)), np.swapaxes(v_ly, 0, 1)), 0, 1)
                   .reshape(n_x * n_y, k))
        return np.concatenate([s_x * rows_x, s_y * rows_y, s_xy * rows_xy], axis=0)


class Factor:
    """``M`` factored by its blocks: log-determinant and solves (module docstring, "Structure")."""

    def __init__(self, a: np.ndarray, b: Border, big: np.ndarray) -> None:
        chol = np.linalg.cholesky(a)  # raises LinAlgError when a block is not positive definite
        logdet_a = 2.0 * np.sum(np.log(np.diagonal(chol, axis1=1, axis2=2)))
        self.a_inv = np.linalg.inv(a)
        self.border = b
        self.c = b.right(self.a_inv)  # A^{-1} B
        schur = big - b.transpose_times(self.c)
        schur = 0.5 * (schur + schur.T)
        self.s_factor = linalg.cho_factor(schur, lower=True)
        self.logdet = float(logdet_a + 2.0 * np.sum(np.log(np.diag(self.s_factor[0]))))

    def solve(self, r: Modes) -> Modes:
        r""":math:`M^{-1} r`: :math:`x_G = S^{-1}(r_G - B^\top A^{-1} r_A)`, :math:`x_A = A^{-1}(r_A - B x_G)`,
        the products with ``B`` from the weights' cube (:class:`Border`): the dense ``C = A^{-1}B`` (13 MB at 50K
        cells) is not read, so a solve costs about two batched products with the blocks' inverses."""
        ar = np.matmul(self.a_inv, r.local[:, :, None])[:, :, 0]
        x_g = linalg.cho_solve(self.s_factor, r.border - self.border.transpose_times(ar[:, :, None])[:, 0],
                               check_finite=False)
        x_a = np.matmul(self.a_inv, (r.local - self.border.times(x_g))[:, :, None])[:, :, 0]
        return Modes(x_a, x_g)


    def cell_inverse(self, sigma: np.ndarray, dims: tuple[int, int, int]) -> np.ndarray:
        r"""Per cell of the cube and slot ``t``, :math:`u_{tc} = [M^{-1} v_c]_{(t, c)}`, shape (6, n_L, n_X, n_Y).

        :math:`v_c = \Lambda Z^\top e_c` (each slot's SD at the cell's level of that
        slot), so :math:`u_{tc} = \sum_s \sigma_s (M^{-1})_{(t,c),(s,c)}` needs the
        entries of :math:`M^{-1}` among the six effects of each cell only: from
        the block-arrowhead inverse (with :math:`C = A^{-1}B`, :math:`S` the Schur
        complement), :math:`M^{-1}_{GG} = S^{-1}`, :math:`M^{-1}_{AG} = -CS^{-1}` and the
        diagonal blocks :math:`A_l^{-1} + C_l S^{-1} C_l^\top` (a selected inverse,
        Takahashi et al. 1973; Erisman and Tinney 1975).
        """
        n_l, n_x, n_y = dims
        m, g = self.c.shape[1], self.c.shape[2]
        s_inv = linalg.cho_solve(self.s_factor, np.eye(g), check_finite=False)
        t = (self.c.reshape(n_l * m, g) @ s_inv).reshape(n_l, m, g)  # C S^-1 = -M^-1_AG
        q = self.a_inv + np.matmul(t, np.swapaxes(self.c, 1, 2))
        ix, iy = np.arange(n_x), np.arange(n_y)
        lx, ly = 1 + ix, 1 + n_x + iy
        bx, by = ix, n_x + iy
        bxy = n_x + n_y + ix[:, None] * n_y + iy[None, :]  # (n_x, n_y)
        shape = (n_l, n_x, n_y)
        p = np.empty((6, 6, *shape))

        def put(i: int, j: int, value: np.ndarray) -> None:
            p[i, j] = value
            p[j, i] = p[i, j]

        # slots: 0 L (local 0), 1 X (border x), 2 Y (border n_x + y), 3 LX (local 1 + x), 4 LY, 5 XY
        put(0, 0, q[:, 0, 0][:, None, None])
        put(0, 3, q[:, 0, lx][:, :, None])
        put(0, 4, q[:, 0, ly][:, None, :])
        put(3, 3, q[:, lx, lx][:, :, None])
        put(4, 4, q[:, ly, ly][:, None, :])
        put(3, 4, q[:, 1:1 + n_x, 1 + n_x:])
        put(0, 1, -t[:, 0, bx][:, :, None])
        put(0, 2, -t[:, 0, by][:, None, :])
        put(0, 5, -t[:, 0, n_x + n_y:].reshape(shape))
        put(3, 1, -t[:, lx, bx][:, :, None])
        put(3, 2, -t[:, 1:1 + n_x, n_x:n_x + n_y])
        put(3, 5, -t[:, lx[:, None], bxy])
        put(4, 1, -np.swapaxes(t[:, 1 + n_x:, :n_x], 1, 2))
        put(4, 2, -t[:, ly, by][:, None, :])
        put(4, 5, -t[:, ly[None, :], bxy])
        put(1, 1, s_inv[bx, bx][None, :, None])
        put(2, 2, s_inv[by, by][None, None, :])
        put(5, 5, np.diagonal(s_inv)[n_x + n_y:].reshape(1, n_x, n_y))
        put(1, 2, s_inv[:n_x, n_x:n_x + n_y][None])
        put(1, 5, s_inv[bx[:, None], bxy][None])
        put(2, 5, s_inv[by[None, :], bxy][None])
        u: np.ndarray = np.einsum("tsl...,s->tl...", p, sigma)
        return u


def _dot(a: Modes, b: Modes) -> float:
    return float(np.sum(a.local * b.local) + np.sum(a.border * b.border))


def laplace_deviance(
    cube: Cube, sigma: np.ndarray, theta: np.ndarray, start: Modes | None = None, stale: Factor | None = None
) -> LaplaceValue:
    r"""The Laplace deviance at ``sigma`` (six slots, solver order) and ``theta`` (module docstring).

    Newton's method on the modes from ``start`` (zeros by default), each step
    halved until the penalised log-likelihood rises, until the decrement is
    below :data:`DECREMENT` (or below :data:`STALLED_DECREMENT` and no longer falling).

    A step may reuse a factored ``M`` of other modes (``stale``, the last evaluation's, for the first; then the
    one of the step before): a chord step, Newton's step with ``M`` held fixed (Ortega and Rheinboldt 1970,
    sec. 7.1; linear convergence at the rate of :math:`\lVert I - M_{\text{old}}^{-1} M \rVert`), costs a solve
    instead of a factorization. ``M`` is factored afresh at the current modes when the old one's decrement
    fell by less than :data:`CHORD_RATE` in the last step, when its step does not raise the penalised
    log-likelihood, and when it is below :data:`CHORD_MARGIN` times :data:`DECREMENT`; the stopping rule is checked only with an
    ``M`` factored at the modes returned, so the modes, the decrement and the log-determinant are those of
    Newton's method. From the last evaluation's mode, the first chord step is the implicit-function
    prediction :math:`-M^{-1}\,\partial_\phi \nabla_b f\,\Delta\phi` of the new mode, and near the optimum an
    evaluation costs one factorization.

    Raises
    ------
    FloatingPointError
        Newton's method did not converge in :data:`MAX_NEWTON` steps.
    """
    b = Modes.zeros(cube.dims) if start is None else start.copy()
    loglik, g, w = cell_derivatives(cube.eta(sigma, b), theta, cube.counts, cube.link)
    value = loglik - 0.5 * _dot(b, b)
    factor, fresh = stale, False
    previous = np.inf  # the last step's decrement
    last = np.inf  # the last step's decrement if it was Newton's (the stall rule compares Newton's steps only)
    for step in range(MAX_NEWTON):
        grad = cube.gradient(sigma, g)
        r = Modes(grad.local - b.local, grad.border - b.border)
        if factor is not None:
            delta = factor.solve(r)
            decrement = _dot(r, delta)
        if factor is None or (not fresh and (decrement < CHORD_MARGIN * DECREMENT or decrement > CHORD_RATE * previous)):
            factor, fresh = Factor(*cube.blocks(sigma, w)), True
            delta = factor.solve(r)
            decrement = _dot(r, delta)
        if fresh and (decrement < DECREMENT or (decrement < STALLED_DECREMENT and decrement > 0.1 * last)):
            penalty = _dot(b, b)
            return LaplaceValue(-2.0 * loglik + penalty + factor.logdet, loglik, penalty, factor.logdet, b, step,
                                factor, g, w)
        t = 1.0
        while True:
            trial = Modes(b.local + t * delta.local, b.border + t * delta.border)
            t_loglik, t_g, t_w = cell_derivatives(cube.eta(sigma, trial), theta, cube.counts, cube.link)
            t_value = t_loglik - 0.5 * _dot(trial, trial)
            if t_value >= value - 1e-12 * abs(value) or t < 1e-8:
                break
            if not fresh:  # a chord step that does not rise: Newton's step from here instead
                break
            t *= 0.5
        if t_value < value - 1e-12 * abs(value) and not fresh:
            factor = None
            continue
        last = decrement if fresh else np.inf
        b, loglik, g, w, value, previous, fresh = trial, t_loglik, t_g, t_w, t_value, decrement, False
    msg = f"Newton's method on the random-effect modes did not converge in {MAX_NEWTON} steps"
    raise FloatingPointError(msg)


def laplace_gradient(cube: Cube, sigma: np.ndarray, theta: np.ndarray, value: LaplaceValue) -> tuple[np.ndarray, np.ndarray]:
    r"""The gradient of the Laplace deviance in the six SDs and the thresholds, at ``value``'s mode.

    With :math:`f(b) = -2\ell(Z\Lambda b) + \lVert b\rVert^2`, :math:`\hat b` its minimum and
    :math:`M = I + \sum_c w_c v_c v_c^\top` (:math:`v_c = \Lambda Z^\top e_c`), the deviance is
    :math:`D = f(\hat b) + \log\det M(\hat b)`. As :math:`\partial f/\partial b = 0` at the mode,
    :math:`\hat b` moves only :math:`\log\det M`, through :math:`w(\eta)`, with
    :math:`d\hat b/d\phi = -M^{-1}\,\partial(\tfrac12 \nabla_b f)/\partial\phi` (the implicit function;
    ``M`` is that Hessian). So (the Laplace gradient of Kristensen et al. 2016, TMB, sec. 2.1;
    Bates et al. 2015 profile the same quantity):

    .. math::

        \frac{dD}{d\phi} = \frac{\partial f}{\partial\phi}\Big|_b
        + \operatorname{tr}\Big(M^{-1}\frac{\partial M}{\partial\phi}\Big|_b\Big)
        + a^\top \frac{d\hat b}{d\phi},\qquad
        a = \Lambda Z^\top (q \odot w_\eta),\ q_c = v_c^\top M^{-1} v_c,

    one solve :math:`z = M^{-1} a` for all parameters. For an SD :math:`\sigma_t`, with
    :math:`\beta_{tc}` the mode of the cell's level of slot ``t`` (:math:`\partial\eta_c/\partial\sigma_t`)
    and :math:`u_{tc} = [M^{-1}v_c]_{(t,c)}` (:meth:`Factor.cell_inverse`):
    :math:`-2\sum_c g_c\beta_{tc} + 2\sum_c w_c u_{tc} + \sum_c q_c w_{\eta,c}\beta_{tc}
    + z_t^\top (Z^\top g)_t - \sum_c (Z\Lambda z)_c w_c \beta_{tc}`; for a threshold
    :math:`\theta_j`: :math:`-2\sum_c \partial_{\theta_j}\ell_c + \sum_c q_c\,\partial_{\theta_j} w_c
    + \sum_c (Z\Lambda z)_c\,\partial_{\theta_j} g_c` (cell derivatives of
    :func:`cell_higher_derivatives`). The cost is about one more factorization of ``M``.

    Returns
    -------
    (numpy.ndarray, numpy.ndarray)
        ``dD/dsigma`` (six slots, solver order) and ``dD/dtheta``.
    """
    if value.factor is None or value.g is None or value.w is None:
        msg = "laplace_gradient needs a LaplaceValue from laplace_deviance"
        raise ValueError(msg)
    b, factor, g, w = value.modes, value.factor, value.g, value.w
    higher = cell_higher_derivatives(cube.eta(sigma, b), theta, cube.counts, cube.link)
    u = np.stack([cube.cells_of(c) for c in factor.cell_inverse(sigma, cube.dims)])  # (6, C)
    q = sigma @ u
    qw = q * higher.w_eta
    z = factor.solve(cube.gradient(sigma, qw))
    eta_z = cube.eta(sigma, z)
    ones = np.ones(6)
    zg = cube.gradient(ones, g)
    grad_sigma = (
        -2.0 * cube.slot_sums(b, zg)
        + 2.0 * (u @ w)
        + cube.slot_sums(b, cube.gradient(ones, qw))
        + cube.slot_sums(z, zg)
        - cube.slot_sums(b, cube.gradient(ones, eta_z * w))
    )
    grad_theta = -2.0 * higher.l_theta.sum(axis=0) + q @ higher.w_theta + eta_z @ higher.g_theta
    return grad_sigma, grad_theta
