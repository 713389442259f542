r"""The latent fit's D-study: E rho^2 and the MDD95 on the latent scale and on the score scale.

Latent scale. The fitted components and the link's residual variance
(:mod:`jurymeter.stats.latent.model`) are the components of the G-study design
``s x i x j x r:sij`` (or ``s x i x r:si`` with one judge): the model has no
``s:i:j`` term, so :math:`\sigma^2_{sij} = 0` and each judgment's latent
residual :math:`\sigma^2_{r:sij}` is :math:`\pi^2/3` (logit) or 1 (probit)
(Nakagawa and Schielzeth 2010, sec. 3; Brennan 2001, sec. 4.1 for the
D-study). :math:`E\rho^2` and :math:`\mathrm{MDD}_{95} = 1.96\sqrt{2\sigma^2_\delta}`
are :mod:`jurymeter.stats.dstudy`'s formulas on these components, at the study's
own sizes (its items, judges and mean judgments per cell) or given ones.

Score scale. A system's expected score over the universe of items and judges is
:math:`m(u_s) = E_{\eta'}[\sum_k v_k p_k(u_s + \eta')]`, :math:`\eta'` the sum of
the other random effects, :math:`N(0, \tau^2)` with :math:`\tau^2` the sum of the
non-system components. A difference of two systems' latent effects
:math:`\Delta` is, to first order, a difference of
:math:`\bar d\,\Delta` score points, with the marginal slope

.. math::

    \bar d = m'(0) = E_{\eta'}\Big[\sum_{k=1}^{K-1} (v_{k+1} - v_k)\, f(\theta_k - \eta')\Big]

(the delta method at the grand mean, averaged over the other effects by
Gauss-Hermite quadrature; for the probit,
:math:`E[\phi(\theta - \eta')] = \phi(\theta/\sqrt{1+\tau^2})/\sqrt{1+\tau^2}`).
So the score-scale MDD95 is :math:`\bar d\,\mathrm{MDD}_{95}^{latent}` (binary:
probability points; ordinal: expected-score points) and the score-scale
components are :math:`\bar d^2 \sigma^2_t`. To first order the factor cancels
from :math:`E\rho^2`, which is reported on the latent scale only. The
approximation is good while the systems' latent spread is small against the
slope's curvature (:math:`\sigma_s \lesssim 1`).

Intervals: draws of the parameters from the Wald normal on (log SD,
thresholds) (:mod:`jurymeter.stats.latent.solve`), each turned into
:math:`E\rho^2`, the MDD and the slope; percentile bounds
(:func:`jurymeter.stats.intervals.percentile_bounds`).
"""

from __future__ import annotations

from typing import Any

import numpy as np
from scipy import special

from jurymeter.errors import DesignError
from jurymeter.stats.design import Design
from jurymeter.stats.dstudy import error_variances, mdd95, truncated_ratio
from jurymeter.stats.intervals import percentile_bounds
from jurymeter.stats.latent.model import Link
from jurymeter.stats.latent.solve import LatentFit

GH_NODES = 64
N_DRAWS = 2000


def latent_design(fit: LatentFit) -> Design:
    """``s x i x j x r:sij``, or ``s x i x r:si`` when the fit has one judge (module docstring)."""
    return Design.parse("s x i x j x r:sij" if fit.levels.get("j", 1) >= 2 else "s x i x r:si")


def latent_components(fit: LatentFit, sigma2: dict[str, float] | None = None) -> np.ndarray:
    """The design's components in :attr:`Design.effects` order: fitted terms, 0 for ``sij``, the residual."""
    design = latent_design(fit)
    values = fit.sigma2 if sigma2 is None else sigma2
    out = []
    for label in design.labels:
        if label.startswith("r:"):
            out.append(fit.residual)
        else:
            out.append(values.get(label, 0.0))
    return np.array(out)


def score_slope(
    thresholds: np.ndarray, other_variance: float | np.ndarray, link: Link, values: np.ndarray
) -> np.ndarray:
    r"""The marginal slope :math:`\bar d` of the expected score in a system's latent effect (module docstring).

    ``thresholds`` is ``(..., K-1)`` and ``other_variance`` broadcasts against its leading axes.
    """
    x, w = np.polynomial.hermite_e.hermegauss(GH_NODES)
    w = w / w.sum()
    theta = np.asarray(thresholds, dtype=np.float64)
    sd = np.sqrt(np.maximum(np.asarray(other_variance, dtype=np.float64), 0.0))
    a = theta[..., :, None] - sd[..., None, None] * x
    dens = special.expit(a) * special.expit(-a) if link == "logit" else np.exp(-0.5 * a * a) / np.sqrt(2 * np.pi)
    steps = np.diff(np.asarray(values, dtype=np.float64))
    return np.asarray(np.einsum("...kn,k,n->...", dens, steps, w))


def _sizes(fit: LatentFit, design: Design, n_items: float | None, n_judges: float | None,
           n_replicates: float | None) -> dict[str, float]:
    n = {"i": float(fit.levels["i"] if n_items is None else n_items),
         "r": float(fit.replicates if n_replicates is None else n_replicates)}
    if "j" in design.facets:
        n["j"] = float(fit.levels["j"] if n_judges is None else n_judges)
    for f, v in n.items():
        if not v >= 1:
            msg = f"the D-study size of facet {f!r} must be >= 1; got {v!r}"
            raise DesignError(msg)
    return n


def latent_dstudy(
    fit: LatentFit,
    *,
    n_items: float | None = None,
    n_judges: float | None = None,
    n_replicates: float | None = None,
    level: float = 0.95,
    seed: int = 0,
) -> dict[str, Any]:
    r"""E rho^2 and MDD95 of a latent fit on the latent and the score scale, with intervals.

    Parameters
    ----------
    fit : LatentFit
        From :func:`jurymeter.stats.latent.fit_latent`.
    n_items, n_judges, n_replicates : float, optional
        D-study sizes; default the study's own (items, judges, mean judgments per cell).
    level : float, default 0.95
        Coverage of the intervals.
    seed : int, default 0
        Seed of the Wald draws.

    Returns
    -------
    dict
        ``design``, ``sizes``, ``sigma2`` (latent, with ``r:sij`` the link's
        variance), ``erho2``, ``mdd95`` (latent), ``slope`` (:math:`\bar d`),
        ``mdd95_score``, ``sigma2_score``, and ``*_ci`` pairs; the module
        docstring says how the score scale is reached.
    """
    design = latent_design(fit)
    n = _sizes(fit, design, n_items, n_judges, n_replicates)
    comps = latent_components(fit)
    tau, delta, _ = error_variances(comps, design, n)
    erho2 = float(truncated_ratio(tau, delta))
    mdd = float(mdd95(comps, design, n))
    other = sum(v for t, v in fit.sigma2.items() if t != "s")
    slope = float(score_slope(fit.thresholds, other, fit.link, fit.values))
    out: dict[str, Any] = {
        "design": " x ".join(f"{f}:{''.join(sorted(design.nests[f], key='sijr'.index))}" if design.nests[f] else f
                             for f in design.facets),
        "link": fit.link,
        "sizes": n,
        "sigma2": dict(zip(design.labels, comps.tolist(), strict=True)),
        "boundary": list(fit.boundary),
        "erho2": erho2,
        "mdd95": mdd,
        "slope": slope,
        "mdd95_score": slope * mdd,
        "sigma2_score": {t: slope * slope * v for t, v in fit.sigma2.items()},
    }
    cov = fit.covariance
    if not np.all(np.isfinite(cov)):
        for key in ("erho2_ci", "mdd95_ci", "mdd95_score_ci"):
            out[key] = (float("nan"), float("nan"))
        return out
    rng = np.random.default_rng(seed)
    p_sd = len(fit.interior)
    centre = np.concatenate([
        np.log(np.sqrt([fit.sigma2[t] for t in fit.interior])),
        [fit.thresholds[0]], np.log(np.diff(fit.thresholds)),
    ])
    draws = rng.multivariate_normal(centre, cov, size=N_DRAWS, method="eigh")
    labels = design.labels
    batch = np.tile(comps, (N_DRAWS, 1))
    other_draws = np.zeros(N_DRAWS)
    with np.errstate(over="ignore"):  # a far draw overflows to inf: an undefined draw, left out of the bounds
        for q, t in enumerate(fit.interior):
            batch[:, labels.index(t)] = np.exp(2 * draws[:, q])
            if t != "s":
                other_draws += batch[:, labels.index(t)]
        theta = np.concatenate(
            [draws[:, p_sd:p_sd + 1], draws[:, p_sd:p_sd + 1] + np.cumsum(np.exp(draws[:, p_sd + 1:]), axis=1)],
            axis=1,
        )
    t_, d_, _ = error_variances(batch, design, n)
    e_draws = truncated_ratio(t_, d_)
    m_draws = mdd95(batch, design, n)
    s_draws = score_slope(theta, other_draws, fit.link, fit.values)
    for key, d in (("erho2_ci", e_draws), ("mdd95_ci", m_draws), ("mdd95_score_ci", m_draws * s_draws)):
        lo, hi = percentile_bounds(d, level)
        out[key] = (float(lo), float(hi))
    return out
