r"""Percentile intervals of resampled statistics: the one place their bounds are taken.

A bootstrap (item, batch or parametric) gives draws of a statistic; its
percentile interval at level :math:`1 - \alpha` is the pair of empirical
quantiles :math:`(q_{\alpha/2}, q_{1 - \alpha/2})` of the draws (Efron and
Tibshirani 1993, sec. 13.3). Draws where the statistic is undefined (NaN, and
``inf`` unless it means "never") are left out, so a bound is NaN only where no
draw defined the statistic.
"""

from __future__ import annotations

import warnings
from typing import Literal

import numpy as np

QuantileMethod = Literal["linear", "inverted_cdf"]


def percentile_bounds(
    draws: np.ndarray,
    level: float = 0.95,
    *,
    axis: int | None = None,
    method: QuantileMethod = "linear",
    keep_inf: bool = False,
) -> tuple[np.ndarray, np.ndarray]:
    r"""Lower and upper percentile bounds of ``draws`` along ``axis``.

    Parameters
    ----------
    draws : numpy.ndarray
        Resampled values of one statistic (``axis=None``) or of several (one per
        column with ``axis=0``).
    level : float, default 0.95
        Coverage: the bounds are the :math:`(1 \pm \text{level}) / 2` quantiles.
    axis : int or None, default None
        The axis holding the resamples; ``None`` flattens.
    method : {"linear", "inverted_cdf"}, default "linear"
        numpy's quantile method: ``linear`` interpolates (numpy's default, R's
        type 7), ``inverted_cdf`` returns an observed draw (ranks and counts).
    keep_inf : bool, default False
        Keep ``inf`` draws (a count that is "never" reached); NaN draws are
        always left out.

    Returns
    -------
    (numpy.ndarray, numpy.ndarray)
        The bounds (0-d arrays when ``axis`` is None), NaN where no draw is defined.
    """
    values = np.asarray(draws, dtype=np.float64)
    undefined = np.isnan(values) if keep_inf else ~np.isfinite(values)
    if undefined.any():
        values = np.where(undefined, np.nan, values)
    tail = (1.0 - float(level)) / 2.0
    with warnings.catch_warnings():
        # A column no draw defines has NaN bounds: that is the answer, not a warning.
        warnings.simplefilter("ignore", RuntimeWarning)
        low, high = np.nanquantile(values, [tail, 1.0 - tail], axis=axis, method=method)
    return np.asarray(low), np.asarray(high)
