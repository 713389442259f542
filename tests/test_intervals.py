"""The one percentile-interval helper against the definition (R's type 7 and type 1 quantiles by hand)."""

from __future__ import annotations

import math

import numpy as np

from jurymeter.stats.intervals import percentile_bounds


def _type7(sorted_values: list[float], p: float) -> float:
    """Hyndman and Fan (1996) definition 7: linear between order statistics at h = (n - 1) p."""
    h = (len(sorted_values) - 1) * p
    lo = math.floor(h)
    hi = min(lo + 1, len(sorted_values) - 1)
    return sorted_values[lo] + (h - lo) * (sorted_values[hi] - sorted_values[lo])


def _type1(sorted_values: list[float], p: float) -> float:
    """Definition 1 (inverted empirical CDF): the smallest draw whose ECDF reaches p."""
    n = len(sorted_values)
    return sorted_values[max(math.ceil(n * p) - 1, 0)]


def test_bounds_are_the_type7_quantiles_of_the_defined_draws_per_column() -> None:
    rng = np.random.default_rng(7)
    draws = rng.normal(size=(301, 3))
    draws[::5, 1] = np.nan
    draws[::9, 1] = np.inf  # undefined too: left out unless keep_inf
    draws[:, 2] = np.nan  # no draw defined: NaN bounds, no warning
    low, high = percentile_bounds(draws, 0.9, axis=0)
    for col in range(2):
        kept = sorted(v for v in draws[:, col] if math.isfinite(v))
        assert math.isclose(low[col], _type7(kept, 0.05), rel_tol=1e-13)
        assert math.isclose(high[col], _type7(kept, 0.95), rel_tol=1e-13)
    assert np.isnan(low[2])
    assert np.isnan(high[2])


def test_inverted_cdf_returns_a_draw_and_keep_inf_keeps_never() -> None:
    draws = np.array([3.0, 1.0, np.inf, 2.0, np.inf, np.nan, 5.0, 4.0])
    low, high = percentile_bounds(draws, 0.5, method="inverted_cdf", keep_inf=True)
    kept = sorted(v for v in draws if not math.isnan(v))
    assert (float(low), float(high)) == (_type1(kept, 0.25), _type1(kept, 0.75))
    assert float(high) == math.inf
