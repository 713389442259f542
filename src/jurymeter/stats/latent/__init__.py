r"""Latent-scale G-study of binary (0/1) and ordinal (1-10) scores (issue 26, point 3).

Crossed random intercepts of systems, items, judges and their two-way
interactions on a logit or probit scale, fitted to cell counts by the Laplace
approximation (:mod:`~jurymeter.stats.latent.model` the data and design,
:mod:`~jurymeter.stats.latent.likelihood` the Laplace deviance on the cells'
cube, :mod:`~jurymeter.stats.latent.solve` the fit and its Wald intervals,
:mod:`~jurymeter.stats.latent.report` E rho^2 and the MDD on the latent and the
score scale, :mod:`~jurymeter.stats.latent.simulate` data of known truth).
``docs/latent.md`` describes the model, the estimator and its checks.

References
----------
Bates, Maechler, Bolker and Walker (2015), "Fitting linear mixed-effects models
using lme4", J. Stat. Softw. 67(1). Christensen (2019), "A tutorial on fitting
cumulative link mixed models with clmm2 from the ordinal package". Nakagawa and
Schielzeth (2010), "Repeatability for Gaussian and non-Gaussian data", Biol.
Rev. 85. Brennan (2001), Generalizability Theory, Springer.
"""

from __future__ import annotations

from jurymeter.stats.latent.model import LatentCells, link_variance
from jurymeter.stats.latent.report import latent_dstudy
from jurymeter.stats.latent.simulate import simulate_latent
from jurymeter.stats.latent.solve import LatentConvergenceError, LatentFit, fit_latent

__all__ = [
    "LatentCells", "LatentConvergenceError", "LatentFit", "fit_latent", "latent_dstudy", "link_variance",
    "simulate_latent",
]
