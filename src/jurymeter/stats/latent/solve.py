r"""Fitting the latent model: the Laplace deviance minimised over the SDs and thresholds.

The parameters are the fitted terms' SDs :math:`\sigma_t \ge 0` (lme4's
:math:`\theta`, bounded at 0 so a component can sit on its boundary, Bates et
al. 2015, sec. 3.1) and the thresholds as :math:`\theta_1` and the logs of
their increments (so they stay ordered). L-BFGS-B minimises the deviance of
:mod:`jurymeter.stats.latent.likelihood` with its analytic gradient
(:func:`~jurymeter.stats.latent.likelihood.laplace_gradient`: the partial
derivatives at the fixed modes plus the derivative of :math:`\log\det M`,
whose dependence on the modes enters through one adjoint solve, the Laplace
gradient of Kristensen et al. 2016, TMB, sec. 2.1; it needs the cells' third
derivatives and the entries of :math:`M^{-1}` among each cell's six effects),
each evaluation starting Newton's method from the last modes with the last factored Laplace matrix (chord
steps, :func:`~jurymeter.stats.latent.likelihood.laplace_deviance`).
glmer's ``nAGQ = 1`` and clmm's Laplace fit maximise the same approximation
over the same parameters, so at the optimum the answers agree to the
optimisers' tolerance.

Intervals: Wald on :math:`\log\sigma_t` from the Hessian by central differences of
the analytic gradient in (:math:`\log\sigma`, threshold parameters), covariance
:math:`2 H^{-1}` (the deviance is :math:`-2\log L`); a component at its
boundary 0 has no log-scale interval and is reported with lower bound 0 and
an upper bound NaN.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from scipy import optimize, special

from jurymeter.errors import DesignError
from jurymeter.stats.latent.likelihood import (
    Cube,
    Factor,
    LaplaceValue,
    Modes,
    laplace_deviance,
    laplace_gradient,
)
from jurymeter.stats.latent.model import (
    TERMS,
    LatentCells,
    Layout,
    Link,
    check_link,
    design_terms,
    link_variance,
)

# Central-difference step of the analytic gradient for the Wald Hessian (parameters log sigma and the
# threshold parameters, O(1)): truncation error about step^2, rounding about 1e-9 / step.
HESS_STEP = 1e-4
# L-BFGS-B stops when the projected gradient of the deviance is below this, or when an iteration lowers the
# deviance by less than FTOL_ABS (its relative ftol is set to FTOL_ABS / |deviance at the start|). The
# deviance of 50K cells is about 5e4 and its rounding about 1e-10, so a relative 1e-15 (5e-11) was below
# its noise: L-BFGS-B then spent half its evaluations on line searches in the noise. A change of 1e-9 is
# a parameter change of about sqrt(2e-9 / curvature): 1e-5 in log sigma.
PGTOL = 1e-5
FTOL_ABS = 1e-9
MAX_ITER = 500
START_SD = 0.5
MAX_SD = 20.0
# An SD this near MAX_SD at the optimum ran to the cap (fit_latent reports the fit as not identified).
CAP_SD = MAX_SD * (1 - 1e-6)
# An SD below this at the optimum is on its boundary (sigma2 < 1e-8; L-BFGS-B stops at or next to 0).
BOUNDARY_SD = 1e-4
Z95 = float(special.ndtri(0.975))


class LatentConvergenceError(DesignError):
    """The latent fit did not converge (the optimizer's message is in the text)."""


@dataclass(frozen=True)
class LatentFit:
    r"""A fitted latent-scale G-study (:func:`fit_latent`).

    ``sigma2`` maps each of the six terms of :data:`~jurymeter.stats.latent.model.TERMS`
    that the design fits to its latent variance component; ``residual`` is the
    link's variance (:math:`\pi^2/3` or 1). ``boundary`` lists the fitted terms at 0.
    ``ci_sigma2`` holds each fitted term's 95 % Wald interval (log-SD scale).
    ``thresholds`` are the :math:`\theta_k` (binary: ``-intercept``).
    """

    link: Link
    sigma2: dict[str, float]
    residual: float
    thresholds: np.ndarray
    deviance: float
    loglik: float
    boundary: tuple[str, ...]
    ci_sigma2: dict[str, tuple[float, float]]
    covariance: np.ndarray  # of (log sd of interior terms, threshold parameters)
    interior: tuple[str, ...]
    levels: dict[str, int]
    n_records: int
    n_cells: int
    replicates: float  # mean records per present cell
    values: np.ndarray
    iterations: int
    evaluations: int


class _Problem:
    def __init__(self, cube: Cube, fitted: tuple[str, ...], slots: tuple[str, ...], k: int) -> None:
        self.cube = cube
        self.fitted = fitted
        self.slot_of = [slots.index(t) for t in fitted]
        self.k = k
        self.modes: Modes | None = None
        self.modes_sigma = np.zeros(6)
        self.factor: Factor | None = None
        self.evaluations = 0
        self.gradients = 0
        # The last evaluation, by its parameters' bytes: fit_latent asks again for L-BFGS-B's result, which is
        # the last point it evaluated (its gradient for the convergence test, its deviance for the fit)
        self._last_key: bytes | None = None
        self._last_value: LaplaceValue | None = None
        self._last_grad: np.ndarray | None = None

    def sigma6(self, sd: np.ndarray) -> np.ndarray:
        out = np.zeros(6)
        out[self.slot_of] = sd
        return out

    @staticmethod
    def thresholds(tp: np.ndarray) -> np.ndarray:
        return np.concatenate([tp[:1], tp[0] + np.cumsum(np.exp(tp[1:]))])

    def _value(self, sd: np.ndarray, tp: np.ndarray) -> LaplaceValue:
        key = sd.tobytes() + tp.tobytes()
        if key == self._last_key and self._last_value is not None:
            return self._last_value
        self.evaluations += 1
        sigma = self.sigma6(sd)
        start = self.modes
        if start is not None:  # keep u = sigma b of the last modes (a warm start one Newton step nearer)
            both = (sigma > 0) & (self.modes_sigma > 0)
            ratio = np.where(both, self.modes_sigma / np.where(both, sigma, 1.0), 0.0)
            start = start.rescaled(ratio, self.cube.dims)
        value = laplace_deviance(self.cube, sigma, self.thresholds(tp), start, self.factor)
        self.modes, self.modes_sigma, self.factor = value.modes, sigma, value.factor
        self._last_key, self._last_value, self._last_grad = key, value, None
        return value

    def deviance(self, sd: np.ndarray, tp: np.ndarray) -> float:
        return self._value(sd, tp).deviance

    def deviance_and_gradient(self, sd: np.ndarray, tp: np.ndarray) -> tuple[float, np.ndarray]:
        """The deviance and its analytic gradient in ``(sd, tp)`` (:func:`laplace_gradient`, the chain rule
        through :meth:`thresholds`)."""
        value = self._value(sd, tp)
        if self._last_grad is not None:  # _value found the point last evaluated, with its gradient
            return value.deviance, self._last_grad.copy()
        self.gradients += 1
        grad_sigma, grad_theta = laplace_gradient(self.cube, self.sigma6(sd), self.thresholds(tp), value)
        # theta_1 = tp_1, theta_k = tp_1 + sum_{j < k} exp(tp_j): d theta_k / d tp_j = exp(tp_j) for j < k
        tail = np.cumsum(grad_theta[::-1])[::-1]  # sum_{k >= j} dD/dtheta_k
        grad_tp = np.concatenate([tail[:1], np.exp(tp[1:]) * tail[1:]])
        grad = np.concatenate([grad_sigma[self.slot_of], grad_tp])
        self._last_grad = grad
        return value.deviance, grad.copy()


def _start_thresholds(counts: np.ndarray, link: Link) -> np.ndarray:
    total = counts.sum(axis=0) + 0.5
    cum = np.cumsum(total)[:-1] / total.sum()
    theta = special.logit(cum) if link == "logit" else special.ndtri(cum)
    theta = np.maximum.accumulate(theta + 1e-3 * np.arange(theta.size))
    return np.concatenate([theta[:1], np.log(np.maximum(np.diff(theta), 1e-3))])


def _jacobian(grad: Callable[[np.ndarray], np.ndarray], x: np.ndarray, step: float) -> np.ndarray:
    """Central differences of the gradient ``grad`` at ``x`` (``2 p`` gradients), symmetrised: the Hessian."""
    p = x.size
    h = np.empty((p, p))
    for a in range(p):
        e = np.zeros(p)
        e[a] = step
        h[:, a] = (grad(x + e) - grad(x - e)) / (2 * step)
    return (h + h.T) / 2


def fit_latent(cells: LatentCells, *, link: str = "logit", intervals: bool = True) -> LatentFit:
    r"""Fit the latent-scale G-study of binary or ordinal cell counts by the Laplace approximation.

    Parameters
    ----------
    cells : LatentCells
        Counts per (system, item, judge) cell; ``K = 2`` categories is the binary case.
    link : {"logit", "probit"}, default "logit"
        ``F`` of :math:`P(Y \le k) = F(\theta_k - \eta)`.
    intervals : bool, default True
        Compute the Wald intervals (the Hessian by central differences of the analytic gradient: ``2 p``
        more evaluations of the deviance and its gradient).

    Returns
    -------
    LatentFit
        Components on the latent scale; the residual is the link's variance,
        :math:`\pi^2/3` for the logit and 1 for the probit (Nakagawa and
        Schielzeth 2010, sec. 3), so the components are on the scale of
        :math:`Y^* = \eta + \varepsilon`.

    Raises
    ------
    DesignError
        Fewer than two systems or items, no judgment, or an unknown link.
    LatentConvergenceError
        The optimizer stopped without converging.

    Notes
    -----
    Equals ``lme4::glmer(y ~ 1 + (1|s) + (1|i) + (1|j) + (1|s:i) + (1|s:j) + (1|i:j),
    family = binomial, nAGQ = 1)`` (logit, ``K = 2``) and ``ordinal::clmm`` with the
    same random terms (Laplace) at the optimum: both maximise this Laplace
    approximation (Bates et al. 2015, eq. 30; Christensen 2019).
    """
    the_link = check_link(link)
    layout: Layout = design_terms(cells)
    cube = Cube(layout, the_link)
    k = cells.n_categories
    problem = _Problem(cube, layout.fitted, layout.slots, k)
    p_sd = len(layout.fitted)
    x0 = np.concatenate([np.full(p_sd, START_SD), _start_thresholds(layout.counts, the_link)])

    def fun_and_jac(x: np.ndarray) -> tuple[float, np.ndarray]:
        return problem.deviance_and_gradient(x[:p_sd], x[p_sd:])

    bounds = [(0.0, MAX_SD)] * p_sd + [(None, None)] * (k - 1)
    first = fun_and_jac(x0)
    cache = {x0.tobytes(): first}  # L-BFGS-B asks for x0 first: evaluated once, for ftol's scale and for it
    ftol = FTOL_ABS / max(abs(first[0]), 1.0)

    def objective(x: np.ndarray) -> tuple[float, np.ndarray]:
        known = cache.pop(x.tobytes(), None)
        return known if known is not None else fun_and_jac(x)

    result = optimize.minimize(
        objective, x0, jac=True, method="L-BFGS-B", bounds=bounds,
        options={"maxiter": MAX_ITER, "gtol": PGTOL, "ftol": ftol},
    )
    _, grad = fun_and_jac(result.x)
    at_bound = result.x[:p_sd] <= BOUNDARY_SD
    free = np.concatenate([~at_bound, np.ones(k - 1, dtype=bool)])
    if not (result.success or np.max(np.abs(grad[free])) < 1e-3):
        msg = f"the latent fit did not converge: {result.message}"
        raise LatentConvergenceError(msg)
    # An SD at the optimizer's cap is not an estimate: the deviance kept falling along it, which happens when the
    # design does not separate that term from others (seen on the real MT-Bench single logs of three repositories
    # together, each system scored by its own judge: sigma2_j and sigma2_ij ran to 400).
    at_cap = [f"sigma2_{t}" for t, sd_t in zip(layout.fitted, result.x[:p_sd], strict=True) if sd_t >= CAP_SD]
    if at_cap:
        them = "it" if len(at_cap) == 1 else "them"
        msg = (f"the latent fit does not identify {', '.join(at_cap)}: the fit ran to the optimizer's bound (variance "
               f"{MAX_SD**2:g}), so the design does not separate {them} from the other terms (for example, each system "
               "scored by its own judge): fit one judge at a time (a judge universe of one judge) or add records "
               "where judges share systems and items")
        raise LatentConvergenceError(msg)
    x = result.x.copy()
    x[:p_sd][at_bound] = 0.0
    sd = x[:p_sd]
    final = problem._value(sd, x[p_sd:])
    interior = tuple(t for t, b in zip(layout.fitted, at_bound, strict=True) if not b)
    ci: dict[str, tuple[float, float]] = {t: (0.0, float("nan")) for t in layout.fitted}
    cov = np.full((len(interior) + k - 1,) * 2, np.nan)
    if intervals:
        keep = ~at_bound
        y0 = np.concatenate([np.log(sd[keep]), x[p_sd:]])

        def grad_log(y: np.ndarray) -> np.ndarray:
            s = np.zeros(p_sd)
            s[keep] = np.exp(y[: len(interior)])
            _, grad = problem.deviance_and_gradient(s, y[len(interior):])
            # d/d log sigma = sigma d/d sigma
            return np.concatenate([s[keep] * grad[:p_sd][keep], grad[p_sd:]])

        hess = _jacobian(grad_log, y0, HESS_STEP)
        # The Wald covariance exists only at a proper minimum: a Hessian that is not positive definite (a flat
        # or boundary direction, seen on a real MT-Bench log of 2 systems and 11 items) gives no intervals,
        # not draws from an indefinite "covariance".
        if np.all(np.isfinite(hess)) and np.all(np.linalg.eigvalsh((hess + hess.T) / 2) > 0):
            cov = 2.0 * np.linalg.inv(hess)
        else:
            cov = np.full_like(hess, np.nan)
        se = np.sqrt(np.where(np.diag(cov) > 0, np.diag(cov), np.nan))
        with np.errstate(over="ignore"):  # a bound beyond float range is inf: no bound (the report says why)
            for n, t in enumerate(interior):
                lo, hi = y0[n] - Z95 * se[n], y0[n] + Z95 * se[n]
                ci[t] = (float(np.exp(2 * lo)), float(np.exp(2 * hi)))
    counts = layout.counts
    return LatentFit(
        link=the_link,
        sigma2={t: float(s * s) for t, s in zip(layout.fitted, sd, strict=True)},
        residual=link_variance(the_link),
        thresholds=problem.thresholds(x[p_sd:]),
        deviance=final.deviance,
        loglik=-0.5 * final.deviance,
        boundary=tuple(t for t, b in zip(layout.fitted, at_bound, strict=True) if b),
        ci_sigma2=ci,
        covariance=cov,
        interior=interior,
        levels=dict(layout.levels),
        n_records=int(counts.sum()),
        n_cells=int(counts.shape[0]),
        replicates=float(counts.sum() / counts.shape[0]),
        values=np.asarray(cells.values, dtype=np.float64),
        iterations=int(result.nit),
        evaluations=problem.evaluations,
    )


__all__ = ["TERMS", "LatentConvergenceError", "LatentFit", "fit_latent"]
