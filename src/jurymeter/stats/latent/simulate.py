"""Cell counts drawn from the latent model with known components (tests' and bench's data)."""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
from scipy import special

from jurymeter.stats.latent.model import LatentCells, Link


def simulate_latent(
    sizes: Mapping[str, int],
    sigma2: Mapping[str, float],
    thresholds: np.ndarray,
    *,
    link: Link = "logit",
    replicates: int = 1,
    rng: np.random.Generator,
) -> LatentCells:
    r"""Draw every (system, item, judge) cell's ``replicates`` judgments from the model.

    :math:`\eta = \sum_t u_t`, :math:`u_t \sim N(0, \sigma^2_t)` for each term in
    ``sigma2`` (``"s"``, ``"si"``, ...); each judgment's category is the number of
    thresholds below :math:`\eta + \varepsilon`, :math:`\varepsilon \sim F`
    (:mod:`jurymeter.stats.latent.model`); the counts are multinomial with the
    cell's category probabilities.
    """
    n = {f: int(sizes.get(f, 1)) for f in "sij"}
    s, i, j = (a.ravel() for a in np.meshgrid(np.arange(n["s"]), np.arange(n["i"]), np.arange(n["j"]), indexing="ij"))
    codes = {"s": s, "i": i, "j": j}
    eta = np.zeros(s.size)
    for term, var in sigma2.items():
        shape = tuple(n[f] for f in term)
        u = rng.normal(0.0, np.sqrt(var), size=shape)
        eta += u[tuple(codes[f] for f in term)]
    theta = np.asarray(thresholds, dtype=np.float64)
    cdf = special.expit if link == "logit" else special.ndtr
    cum = np.concatenate([np.zeros((s.size, 1)), cdf(theta[None, :] - eta[:, None]), np.ones((s.size, 1))], axis=1)
    p = np.clip(np.diff(cum, axis=1), 0.0, None)
    p /= p.sum(axis=1, keepdims=True)
    counts = rng.multinomial(replicates, p)
    return LatentCells(s, i, j, counts)
