"""Henderson I against lme4 REML on large incomplete data, within the estimators' sampling SE.

On incomplete data Henderson's Method I and REML are different estimators of the
same components, so they do not agree to the optimizer's precision as on balanced
data (``tests/test_vs_lme4.py``); both are consistent, and on a large item set they
must agree within the sampling error of either. The bar here: every component
within **one** sampling SE of lme4's.

- **lme4** (frozen, runs without R): ``tests/data/lme4_incomplete.json``, written by
  ``tests/r/make_lme4_incomplete.py`` (``lmer`` REML, bobyqa; R and lme4 versions
  recorded) from the records ``tests/incomplete_design.py`` simulates from each
  case's seed. The CSV is not committed; the records are regenerated here and their
  checksum (rows, sum, sum of squares, a facet-weighted sum per facet) must equal
  the frozen one, so lme4 saw these records.
- **SE** (independent of lme4 and of the data lme4 saw): the standard deviation of
  ``henderson1`` over ``SIMULATIONS`` new data sets on the same records (the same
  missing pattern), simulated by ``tests/incomplete_design.py`` from the *true*
  components. Henderson I's sampling SE is at least REML's (REML is asymptotically
  efficient), so one SE of it is a bar REML and Henderson I clear whenever they
  differ by less than the spread of either estimator. With 100 simulations the SE
  itself is known to about 7%.

Why one SE and not two: the two estimators are fitted to the same records, so their
difference has a spread well under either's (bench/RESULTS.md measured about 2e-3 on
a 285K-record set, against SEs of 2e-3 to 0.1); one SE keeps the residual's bar at
about 0.002 (0.3% of it), which a residual with the degrees of freedom of the full
crossing instead of the observed cells misses (``test_the_bar_rejects_...``).

Measured with the frozen fits (lme4 1.1.31, R 4.2.2): largest |difference| / SE 0.52
(``sij``, 5% of cells missing) and 0.37 (``si``, pairs missing); the wrong-df residual
sits 2.2 and 14 SE from lme4's.
"""

from __future__ import annotations

from functools import cache
from pathlib import Path

import numpy as np
import orjson
import pytest

from incomplete_design import (
    CASES,
    COMPONENTS,
    EFFECTS,
    FORMULA,
    LME4_GROUPS,
    SPEC,
    Case,
    checksum,
    records,
    rescored,
)
from jurymeter.stats.henderson import HendersonFit, henderson1

REFERENCE = Path(__file__).parent / "data" / "lme4_incomplete.json"
SIMULATIONS = 100
IDS = [c.name for c in CASES]


def _frozen(case: Case) -> dict:
    entry: dict = orjson.loads(REFERENCE.read_bytes())["cases"][case.name]
    return entry


@cache
def _fit(case: Case) -> HendersonFit:
    return henderson1(records(case), SPEC)


@cache
def _sampling_se(case: Case) -> np.ndarray:
    """SD of Henderson I over SIMULATIONS data sets on case's records, from the true components."""
    frame = records(case)
    fits = np.stack([henderson1(rescored(frame, case, draw), SPEC).sigma2 for draw in range(1, SIMULATIONS + 1)])
    se: np.ndarray = fits.std(axis=0, ddof=1)
    return se


def _lme4(case: Case) -> np.ndarray:
    components = _frozen(case)["components"]
    assert set(components) == set(LME4_GROUPS.values())
    return np.array([components[LME4_GROUPS[e]] for e in EFFECTS])


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_the_frozen_fit_describes_the_case_and_converged(case: Case) -> None:
    entry = _frozen(case)
    assert (entry["spec"], entry["formula"], entry["seed"]) == (SPEC, FORMULA, case.seed)
    assert entry["sizes"] == dict(zip("sijr", case.sizes, strict=True))
    assert (entry["pattern"], entry["missing"]) == (case.pattern, case.missing)
    assert entry["r_version"].startswith("R version")
    assert entry["lme4_version"]
    assert entry["singular"] is False
    assert entry["messages"] == []
    assert entry["rows"] >= 100_000


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_the_regenerated_records_are_those_lme4_fitted(case: Case) -> None:
    frozen, fresh = _frozen(case)["checksum"], checksum(records(case))
    assert fresh.keys() == frozen.keys()
    assert fresh["rows"] == frozen["rows"] == _frozen(case)["rows"]
    assert fresh == pytest.approx(frozen, rel=1e-12)


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_henderson_is_within_one_sampling_se_of_lme4_reml(case: Case) -> None:
    ours, theirs, se = _fit(case), _lme4(case), _sampling_se(case)
    assert ours.effects == EFFECTS
    assert ours.n_records == _frozen(case)["rows"]
    z = (ours.sigma2 - theirs) / se
    assert np.all(np.abs(z) <= 1.0), dict(zip(EFFECTS, z.round(2).tolist(), strict=True))


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_lme4_is_near_the_simulated_truth(case: Case) -> None:
    # The frozen fit is of data with the components the docstring says (4 SE: eight
    # components, two cases, no false alarm).
    z = (_lme4(case) - np.array(COMPONENTS)) / _sampling_se(case)
    assert np.all(np.abs(z) <= 4.0), dict(zip(EFFECTS, z.round(2).tolist(), strict=True))


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_the_bar_rejects_a_residual_with_the_full_crossings_df(case: Case) -> None:
    # Henderson's residual is SS_r:sij / (N - observed s x i x j cells); with the
    # balanced df N - n_s n_i n_j (every cell counted, observed or not) it leaves the bar.
    fit = _fit(case)
    n_s, n_i, n_j, _ = case.sizes
    assert fit.df[-1] == fit.n_records - fit.levels["sij"]
    wrong = fit.ss[-1] / (fit.n_records - n_s * n_i * n_j)
    assert abs(wrong - _lme4(case)[-1]) > _sampling_se(case)[-1]
