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
levels. With ``L`` the facet with most levels and ``X`` the next, the effects
of one level of ``L`` (:math:`u_L`, :math:`u_{LX}`, :math:`u_{LY}`) meet no
other level's, and no two ``LX`` effects meet (no cell has two levels of
``X``), so :math:`M = \Lambda Z^\top W Z \Lambda + I` is factored in three
levels (:class:`Factor`): the ``n_L n_X`` ``LX`` effects, whose block is
diagonal; then, per level of ``L``, a dense block of ``v = 1 + n_Y`` effects
(``L`` and ``LY``); then the border of the ``g = n_X + n_Y + n_X n_Y`` effects of
``X``, ``Y``, ``XY``, whose Schur complement is dense. The border's update is
one product of :math:`n_L v \times g` matrices, :math:`O(n_L v g^2)`, where
eliminating the ``m = 1 + n_X + n_Y`` local effects of a level together costs
:math:`O(n_L m g^2)` (``v/m = 6/26`` at 20 systems and 5 judges); everything
else is a sum over the cells' cube. No sparse matrix is formed.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
from scipy import special
from scipy.linalg import lapack

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
    Fisher weight, McCullagh and Nelder 1989, sec. 4.4).

    From one exponential, :math:`e = \exp(-|z|) \le 1` (:math:`z = \theta_1 - \eta`): :math:`F = 1/(1+e)` for
    :math:`z \ge 0` and :math:`e/(1+e)` below, :math:`F(1-F) = e/(1+e)^2`, :math:`\log F = \min(z, 0) - \log(1+e)`
    and :math:`\log(1-F) = \log F - z`: no difference of nearly equal numbers and no floor, so the logs are
    exact to rounding in the tails too (as ``log_expit``), at less than half the cost of scipy's ``expit`` and
    ``log_expit`` (this runs at every Newton and chord step)."""
    z = theta[0] - eta
    n0, n1 = counts[:, 0], counts[:, 1]
    n = n0 + n1
    e = np.exp(-np.abs(z))
    one_e = 1.0 + e
    inv = 1.0 / one_e
    loglik = float(n @ np.minimum(z, 0.0) - n @ np.log(one_e) - n1 @ z)  # n0 log F + n1 (log F - z)
    big_f = np.where(z >= 0.0, inv, e * inv)
    return loglik, n * big_f - n0, n * (e * inv * inv)


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
        e = np.exp(-np.abs(z))  # F and 1 - F from one exponential, as in _binary_logit
        inv = 1.0 / (1.0 + e)
        big_f, upper = np.where(z >= 0.0, inv, e * inv), np.where(z >= 0.0, e * inv, inv)
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


def axis_sums(cube: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """A cube's sums over its last axis, its middle one and its first: shapes (n_L, n_X), (n_L, n_Y), (n_X, n_Y).

    The first two as products with a vector of ones (BLAS): numpy's reductions over a short axis (5 judges) loop
    row by row and take three to five times as long, and these sums run at every Newton step."""
    n_l, n_x, n_y = cube.shape
    by_lx: np.ndarray = (cube.reshape(n_l * n_x, n_y) @ np.ones(n_y)).reshape(n_l, n_x)
    by_ly: np.ndarray = np.ones(n_x) @ cube
    return by_lx, by_ly, cube.sum(axis=0)


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
        # grouped by the axes each term varies on, so the cube is two broadcast additions (L, X) + (L, Y) + (X, Y)
        lx = (s_l * loc[:, :1] + s_x * bor[:n_x]) + s_lx * loc[:, 1:1 + n_x]
        ly = s_y * bor[n_x:n_x + n_y] + s_ly * loc[:, 1 + n_x:]
        cube = lx[:, :, None] + ly[:, None, :]
        cube += (s_xy * bor[n_x + n_y:]).reshape(1, n_x, n_y)
        flat: np.ndarray = cube.reshape(-1)
        return flat if self.complete else flat[self.layout.flat]

    def gradient(self, sigma: np.ndarray, g_cells: np.ndarray) -> Modes:
        r""":math:`\Lambda Z^\top g` on the modes' layout."""
        s_l, s_x, s_y, s_lx, s_ly, s_xy = sigma
        g_lx, g_ly, g_xy = axis_sums(self.to_cube(g_cells))
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
        """The cells' values of a dense cube (the inverse of :meth:`to_cube` on present cells); of each row of
        a stack of flattened cubes (shape (k, n_L n_X n_Y)) for a 2-D ``cube``."""
        if cube.ndim == 2:
            return cube if self.complete else cube[:, self.layout.flat]
        flat = cube.reshape(-1)
        return flat if self.complete else flat[self.layout.flat]


def _border_block(sigma: np.ndarray, h: np.ndarray) -> np.ndarray:
    """``G`` (g, g), the block of ``M`` among the border effects ``X, Y, XY`` (weights cube ``h``)."""
    _, n_x, n_y = h.shape
    _, s_x, s_y, _, _, s_xy = sigma
    ix, iy = np.arange(n_x), np.arange(n_y)
    g = n_x + n_y + n_x * n_y
    cx, cy = ix, n_x + iy
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
    return np.diag(np.diag(big)) + upper + upper.T + np.eye(g)


class Factor:
    r"""``M`` factored in three levels: log-determinant, solves and a selected inverse (module docstring,
    "Structure").

    Level 1 is the ``LX`` effects, whose block of ``M`` is diagonal (:math:`D`); each meets only its level's
    ``V_l = (L, LY)`` (:math:`E`) and the border columns of its ``x``, ``X = x``, all of ``Y`` and
    ``XY = (x, .)`` (:math:`F`, kept compact as those ``1 + 2 n_Y`` columns). Eliminating it leaves
    :math:`P'_l = P_l - E_l^\top D_l^{-1} E_l` (``v x v``, ``v = 1 + n_Y``), :math:`Q'_l = Q_l - E_l^\top D_l^{-1}
    F_l` (``v x g``) and :math:`G' = G - F^\top D^{-1} F`, a block-arrowhead matrix whose border Schur complement
    is :math:`S = G' - \sum_l Q_l'^\top P_l'^{-1} Q'_l`; :math:`\log\det M = \sum \log D + \sum_l \log\det P'_l
    + \log\det S` (block Gaussian elimination, Golub and Van Loan 2013, sec. 3.2 and 4.2). Every pivot block
    is a Schur complement of :math:`M \succeq I`, so is :math:`\succeq I` itself: the inverses of the small
    blocks are well conditioned.
    """

    def __init__(self, sigma: np.ndarray, h: np.ndarray) -> None:
        s_l, s_x, s_y, s_lx, s_ly, s_xy = sigma
        n_l, n_x, n_y = h.shape
        v, g = 1 + n_y, n_x + n_y + n_x * n_y
        self.sigma, self.h, self.dims = sigma, h, (n_l, n_x, n_y)
        h_lx, h_ly, _ = axis_sums(h)
        self.h_lx = h_lx
        # level 1: D, E (n_L, n_X, v) and F's columns X = x, Y, XY = (x, .) (n_L, n_X, 1 + 2 n_Y)
        self.d = d = 1.0 + (s_lx * s_lx) * h_lx
        e = np.empty((n_l, n_x, v))
        e[:, :, 0] = (s_lx * s_l) * h_lx
        e[:, :, 1:] = (s_lx * s_ly) * h
        f = np.empty((n_l, n_x, 1 + 2 * n_y))
        f[:, :, 0] = (s_lx * s_x) * h_lx
        f[:, :, 1:1 + n_y] = (s_lx * s_y) * h
        f[:, :, 1 + n_y:] = (s_lx * s_xy) * h
        # each x's border columns in G's order: X = x, Y = 0..n_Y-1, XY = (x, 0..n_Y-1)
        iy = np.arange(n_y)
        cols = np.concatenate([np.arange(n_x)[:, None], np.broadcast_to(n_x + iy, (n_x, n_y)),
                               n_x + n_y + np.arange(n_x)[:, None] * n_y + iy[None, :]], axis=1)
        et_d = np.swapaxes(e / d[:, :, None], 1, 2)  # E^T D^-1, (n_L, v, n_X)
        # level 2: P' and Q'
        p = np.zeros((n_l, v, v))
        p[:, 0, 0] = (s_l * s_l) * h_lx.sum(axis=1)
        p[:, 0, 1:] = (s_l * s_ly) * h_ly
        p[:, 1:, 0] = p[:, 0, 1:]
        p[:, 1 + iy, 1 + iy] = (s_ly * s_ly) * h_ly
        p[:, np.arange(v), np.arange(v)] += 1.0
        p -= np.matmul(et_d, e)
        q = np.empty((n_l, v, g))
        q[:, 0, :n_x] = (s_l * s_x) * h_lx
        q[:, 0, n_x:n_x + n_y] = (s_l * s_y) * h_ly
        q[:, 0, n_x + n_y:] = (s_l * s_xy) * h.reshape(n_l, -1)
        q[:, 1:, :n_x] = (s_ly * s_x) * np.swapaxes(h, 1, 2)
        q[:, 1:, n_x:] = 0.0
        q[:, 1 + iy, n_x + iy] = (s_ly * s_y) * h_ly
        q_xy = q[:, 1:, n_x + n_y:].reshape(n_l, n_y, n_x, n_y)  # a view: LY = y meets XY = (., y) only
        q_xy[:, iy, :, iy] = (s_ly * s_xy) * np.moveaxis(h, 2, 0)
        q[:, :, :n_x] -= et_d * f[:, None, :, 0]
        q[:, :, n_x:n_x + n_y] -= np.matmul(et_d, f[:, :, 1:1 + n_y])
        # (XY = (x, y) meets LX = (l, x) only): E^T D^-1 repeated over y, so the product's inner loop is n_X n_Y long
        q[:, :, n_x + n_y:] -= np.repeat(et_d, n_y, axis=2) * ((s_lx * s_xy) * h.reshape(n_l, 1, n_x * n_y))
        # G' = G - F^T D^-1 F: per x a (1 + 2 n_Y)^2 block on its columns, summed over L (the Y columns are
        # every x's, so the blocks overlap there: added by bincount)
        fd = f / d[:, :, None]
        blocks = np.matmul(np.transpose(fd, (1, 2, 0)), np.swapaxes(f, 0, 1))  # (n_X, 1 + 2 n_Y, 1 + 2 n_Y)
        at = (cols[:, :, None] * g + cols[:, None, :]).reshape(-1)
        big = _border_block(sigma, h) - np.bincount(at, weights=blocks.reshape(-1), minlength=g * g).reshape(g, g)
        chol = np.linalg.cholesky(p)  # raises LinAlgError when a block is not positive definite
        # P'^{-1}: the blocks are v x v (6 at 5 judges) and >= I, so their inverse is cheap and well conditioned
        self.p_inv = np.linalg.inv(p)
        self.c = np.matmul(self.p_inv, q)  # C = P'^{-1} Q'
        schur = big - q.reshape(n_l * v, g).T @ self.c.reshape(n_l * v, g)
        schur = 0.5 * (schur + schur.T)
        # LAPACK's potrf/potrs called directly: scipy's cho_factor/cho_solve wrappers cost more than the
        # 125 x 125 factor and solve themselves, and the solve runs at every Newton and chord step
        self.s_chol, info = lapack.dpotrf(schur, lower=1, clean=1)
        if info != 0:
            msg = f"the Laplace matrix's Schur complement is not positive definite (potrf info {info})"
            raise np.linalg.LinAlgError(msg)
        self.logdet = float(np.sum(np.log(d)) + 2.0 * np.sum(np.log(np.diagonal(chol, axis1=1, axis2=2)))
                            + 2.0 * np.sum(np.log(np.diag(self.s_chol))))

    def _s_solve(self, b: np.ndarray) -> np.ndarray:
        """:math:`S^{-1} b` from the Cholesky factor of the Schur complement (``b``: (g,) or (g, k))."""
        x, info = lapack.dpotrs(self.s_chol, b, lower=1)
        if info != 0:
            msg = f"potrs failed (info {info})"
            raise ValueError(msg)
        out: np.ndarray = x
        return out

    def solve(self, r: Modes) -> Modes:
        r""":math:`M^{-1} r` by the three levels' forward and back substitution: :math:`y = D^{-1} r_{LX}`,
        :math:`r'_V = r_V - E^\top y`, :math:`r'_G = r_G - F^\top y`; :math:`x_G = S^{-1}(r'_G - C^\top r'_V)`,
        :math:`x_V = P'^{-1} r'_V - C x_G`; :math:`x_{LX} = D^{-1}(r_{LX} - E x_V - F x_G)`. The products with
        ``E`` and ``F`` are contractions of the weights' cube (their entries are the SDs' products times ``h``
        or its sums over ``Y``), so a solve reads the cube four times and ``C`` (n_L v x g) twice."""
        s_l, s_x, s_y, s_lx, s_ly, s_xy = self.sigma
        n_l, n_x, n_y = self.dims
        v, g = 1 + n_y, self.c.shape[2]
        h, h_lx = self.h, self.h_lx
        r_lx = r.local[:, 1:1 + n_x]
        y = (s_lx * r_lx) / self.d  # s_LX D^{-1} r_LX: the SD common to E's and F's entries
        hyc = h * y[:, :, None]
        hy, hly = hyc.sum(axis=0), np.ones(n_x) @ hyc  # sums over L and over X
        r_v = np.empty((n_l, v))
        r_v[:, 0] = r.local[:, 0] - s_l * np.einsum("lx,lx->l", h_lx, y)
        r_v[:, 1:] = r.local[:, 1 + n_x:] - s_ly * hly
        r_g = np.concatenate([r.border[:n_x] - s_x * np.einsum("lx,lx->x", h_lx, y),
                              r.border[n_x:n_x + n_y] - s_y * hy.sum(axis=0),
                              r.border[n_x + n_y:] - s_xy * hy.reshape(-1)])
        c = self.c.reshape(n_l * v, g)
        x_g = self._s_solve(r_g - r_v.reshape(-1) @ c)
        x_v = np.einsum("lij,lj->li", self.p_inv, r_v) - (c @ x_g).reshape(n_l, v)
        # E x_V + F x_G at (l, x): s_LX (h_LX (s_L x_L + s_X x_X) + sum_y h (s_LY x_LY + s_Y x_Y + s_XY x_XY))
        ex = (h_lx * (s_l * x_v[:, :1] + s_x * x_g[:n_x])
              + np.matmul(h, (s_ly * x_v[:, 1:] + s_y * x_g[n_x:n_x + n_y])[:, :, None])[:, :, 0]
              + np.einsum("lxy,xy->lx", h, (s_xy * x_g[n_x + n_y:]).reshape(n_x, n_y)))
        x_lx = (r_lx - s_lx * ex) / self.d
        return Modes(np.concatenate([x_v[:, :1], x_lx, x_v[:, 1:]], axis=1), x_g)

    def cell_inverse(self, sigma: np.ndarray, dims: tuple[int, int, int]) -> np.ndarray:
        r"""Per cell of the cube and slot ``t``, :math:`u_{tc} = [M^{-1} v_c]_{(t, c)}`, shape (6, n_L, n_X, n_Y).

        :math:`v_c = \Lambda Z^\top e_c` (each slot's SD at the cell's level of that slot), so
        :math:`u_{tc} = \sum_s \sigma_s (M^{-1})_{(t,c),(s,c)}` needs the entries of :math:`M^{-1}` among the
        six effects of each cell only (a selected inverse, Takahashi et al. 1973; Erisman and Tinney 1975).
        Among ``V`` and the border they are those of :math:`N = M'^{-1}`, the inverse of the level-2 matrix:
        :math:`N_{GG} = S^{-1}`, :math:`N_{VG} = -CS^{-1} = -T`, :math:`N_{V_lV_l} = P_l'^{-1} + T_l C_l^\top`.
        With :math:`k_{lx}` the row of ``LX = (l, x)`` in :math:`(E, F)` and :math:`z_{lx} = N k_{lx}` (needed on
        its own level and columns only), :math:`M^{-1}_{LX,j} = -z_{lx,j}/D_{lx}` and
        :math:`M^{-1}_{LX,LX} = 1/D_{lx} + k_{lx}^\top z_{lx}/D_{lx}^2` (the inverse by the Schur complement of
        the diagonal ``D``, Golub and Van Loan 2013, sec. 3.2).
        """
        n_l, n_x, n_y = dims
        s_l, s_x, s_y, s_lx, s_ly, s_xy = sigma
        v, g = 1 + n_y, self.c.shape[2]
        s_inv = self._s_solve(np.eye(g))
        t = (self.c.reshape(n_l * v, g) @ s_inv).reshape(n_l, v, g)  # C S^-1 = -N_VG
        n_vv = self.p_inv + np.matmul(t, np.swapaxes(self.c, 1, 2))
        h, h_lx, d = self.h, self.h_lx, self.d
        # N among each cell's effects other than LX, each entry on the axes it varies on (a full cube only
        # where it must be: the sums below then broadcast at most two small arrays onto one cube)
        ix = np.arange(n_x)
        t_x, t_y = t[:, :, :n_x], t[:, :, n_x:n_x + n_y]
        t_xy = t[:, :, n_x + n_y:].reshape(n_l, v, n_x, n_y)
        n_ll = n_vv[:, 0, :1]  # (l, 1)
        n_l_ly = n_vv[:, 0, 1:]  # (l, y)
        n_ly_ly = np.diagonal(n_vv[:, 1:, 1:], axis1=1, axis2=2)  # (l, y)
        n_l_x, n_l_y, n_l_xy = -t_x[:, 0], -t_y[:, 0], -t_xy[:, 0]  # (l, x), (l, y), (l, x, y)
        n_ly_x = -np.swapaxes(t_x[:, 1:], 1, 2)  # (l, x, y)
        n_ly_y = -np.diagonal(t_y[:, 1:], axis1=1, axis2=2)  # (l, y)
        n_ly_xy = -np.diagonal(t_xy[:, 1:], axis1=1, axis2=3)  # (l, x, y)
        s_diag = np.diag(s_inv)
        n_x_x, n_y_y = s_diag[:n_x], s_diag[n_x:n_x + n_y]  # (x), (y)
        n_xy_xy = s_diag[n_x + n_y:].reshape(n_x, n_y)  # (x, y), and the three below
        s_y_y = s_inv[n_x:n_x + n_y, n_x:n_x + n_y]
        s_xy_y = s_inv[n_x + n_y:, n_x:n_x + n_y].reshape(n_x, n_y, n_y)  # [x, y, y']: (XY = (x, y), Y = y')
        s_xy_xy = s_inv[n_x + n_y:, n_x + n_y:].reshape(n_x, n_y, n_x, n_y)[ix, :, ix]  # [x, y, y'] within x
        n_x_y = s_inv[:n_x, n_x:n_x + n_y]
        n_x_xy = s_inv[:n_x, n_x + n_y:].reshape(n_x, n_x, n_y)[ix, ix]
        n_y_xy = np.diagonal(s_xy_y, axis1=1, axis2=2)
        # [N v'_c] at the cell's own effects (v'_c: v_c without its LX entry), slots L, X, Y, LY, XY
        w_l = (s_l * n_ll + s_x * n_l_x)[:, :, None] + (s_y * n_l_y + s_ly * n_l_ly)[:, None, :] + s_xy * n_l_xy
        w_x = (s_l * n_l_x + s_x * n_x_x)[:, :, None] + (s_y * n_x_y + s_xy * n_x_xy) + s_ly * n_ly_x
        w_y = (s_l * n_l_y + s_y * n_y_y + s_ly * n_ly_y)[:, None, :] + (s_x * n_x_y + s_xy * n_y_xy)
        w_ly = (s_l * n_l_ly + s_y * n_ly_y + s_ly * n_ly_ly)[:, None, :] + s_x * n_ly_x + s_xy * n_ly_xy
        w_xy = (s_x * n_x_xy + s_y * n_y_xy + s_xy * n_xy_xy) + s_l * n_l_xy + s_ly * n_ly_xy
        # z_lx = N k_lx with k_lx = s_LX sum_y h_lxy v'_(l,x,y) (LX = (l, x) meets its cells' other effects):
        # at L and X, shared by the cells of (l, x), it is the h-weighted sum of the w above; at a cell's Y, LY
        # and XY, which differ between the cells of (l, x), it takes N between that effect and each effect of
        # every sibling cell (l, x, y')
        def over_y(a: np.ndarray) -> np.ndarray:  # sum_y h_lxy a_lxy
            out: np.ndarray = np.einsum("lxy,lxy->lx", h, a)
            return out

        z_l, z_x = s_lx * over_y(w_l), s_lx * over_y(w_x)
        hx = h.transpose(1, 0, 2)  # (x, l, y), for products with (x, y, y') arrays
        ly_ly = s_ly * n_vv[:, 1:, 1:] - s_y * np.swapaxes(t_y[:, 1:], 1, 2)  # [l, y, y']: LY_y' with LY_y, Y_y
        z_ly = s_lx * (h_lx[:, :, None] * (s_l * n_l_ly[:, None, :] + s_x * n_ly_x) + np.matmul(h, ly_ly)
                       - s_xy * np.einsum("lxy,lzxy->lxz", h, t_xy[:, 1:]))
        y_y = s_y * s_y_y[None] + s_xy * s_xy_y  # [x, y, y']: Y_y' with Y_y and XY_(x,y)
        z_y = s_lx * (h_lx[:, :, None] * (s_l * n_l_y[:, None, :] + s_x * n_x_y) - s_ly * np.matmul(h, t_y[:, 1:])
                      + np.matmul(hx, y_y).transpose(1, 0, 2))
        xy_xy = s_y * np.swapaxes(s_xy_y, 1, 2) + s_xy * s_xy_xy  # [x, y, y']: XY_(x,y') with Y_y and XY_(x,y)
        z_xy = s_lx * (h_lx[:, :, None] * (s_l * n_l_xy + s_x * n_x_xy) - s_ly * np.einsum("lxy,lyxz->lxz", h, t_xy[:, 1:])
                       + np.matmul(hx, xy_xy).transpose(1, 0, 2))
        kz = s_lx * (h_lx * (s_l * z_l + s_x * z_x) + over_y(s_y * z_y + s_ly * z_ly + s_xy * z_xy))
        ratio = (s_lx / d)[:, :, None]
        u = np.empty((6, n_l, n_x, n_y))
        u[0] = w_l - ratio * z_l[:, :, None]
        u[1] = w_x - ratio * z_x[:, :, None]
        u[2] = w_y - ratio * z_y
        u[4] = w_ly - ratio * z_ly
        u[5] = w_xy - ratio * z_xy
        u[3] = (((s_lx * (1.0 + kz / d) - s_l * z_l - s_x * z_x) / d)[:, :, None]
                - (s_y * z_y + s_ly * z_ly + s_xy * z_xy) / d[:, :, None])
        return u


def _dot(a: Modes, b: Modes) -> float:
    return float(np.sum(a.local * b.local) + np.sum(a.border * b.border))


def _chord_solve(factor: Factor, r: Modes, sigma: np.ndarray, dims: tuple[int, int, int]) -> Modes:
    r"""A chord step's solve with ``factor``'s ``M`` of other SDs, rescaled to ``sigma``: :math:`R^{-1} M_{\text{old}}^{-1}
    R^{-1} r`, ``R`` each slot's ratio :math:`\sigma_t / \sigma_{t,\text{old}}` (1 where either is 0).

    :math:`M = I + \Lambda H \Lambda` (:math:`H = Z^\top W Z`), so at :math:`\Lambda = R\Lambda_{\text{old}}` and
    the old weights :math:`M = R M_{\text{old}} R + I - R^2`: the rescaled matrix leaves out only
    :math:`I - R^2`, where :math:`M_{\text{old}}` itself leaves out :math:`(R^2 - 1)\Lambda H\Lambda`, larger by the
    weights' sums (hundreds here). On the 50K-cell benchmark this cut the evaluations' chord steps by a sixth,
    most where the SDs moved least (the chord rate there fell from about 1e-2 to 1e-5).
    """
    if np.array_equal(factor.sigma, sigma):
        return factor.solve(r)
    both = (sigma > 0) & (factor.sigma > 0)
    inv_ratio = np.where(both, factor.sigma / np.where(both, sigma, 1.0), 1.0)
    return factor.solve(r.rescaled(inv_ratio, dims)).rescaled(inv_ratio, dims)


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
    instead of a factorization; an ``M`` of other SDs is first rescaled to these (:func:`_chord_solve`). ``M`` is factored afresh at the current modes when the old one's decrement
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
            delta = _chord_solve(factor, r, sigma, cube.dims)
            decrement = _dot(r, delta)
        if factor is None or (not fresh and (decrement < CHORD_MARGIN * DECREMENT or decrement > CHORD_RATE * previous)):
            factor, fresh = Factor(sigma, cube.to_cube(w)), True
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
    u = cube.cells_of(factor.cell_inverse(sigma, cube.dims).reshape(6, -1))  # (6, C)
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
