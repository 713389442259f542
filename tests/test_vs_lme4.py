"""Variance components against R's lme4 (REML) on balanced data with positive components.

For balanced data whose ANOVA components are all positive, REML and the EMS
solution coincide, so they must agree to the optimizer's precision. The live
test runs Rscript (``.ci/run`` installs r-base-core and r-cran-lme4); it is
skipped, with the reason, only where R or lme4 is missing.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import numpy as np
import orjson
import polars as pl
import pytest

from jurymeter.stats.design import Design
from jurymeter.stats.gstudy import fit_gstudy, simulate_design

pytestmark = pytest.mark.against_r

SCRIPT = Path(__file__).parent / "r" / "lme4_components.R"
# The issue's bar: components equal lme4's REML fit to 1e-4 relative.
RELATIVE = 1e-4


def _lme4_available() -> bool:
    if shutil.which("Rscript") is None:
        return False
    probe = subprocess.run(["Rscript", "-e", "library(lme4)"], capture_output=True)
    return probe.returncode == 0


# In CI (CI=true) a missing R is a failure, not a skip: .ci/run installs it.
needs_r = pytest.mark.skipif(
    not _lme4_available() and not os.environ.get("CI"),
    reason="Rscript with lme4 not installed (apt-get install r-base-core r-cran-lme4)",
)


def _long_frame(x: np.ndarray, design: Design) -> pl.DataFrame:
    """One row per observation; nested facets get labels unique within their nest."""
    index = np.indices(x.shape).reshape(x.ndim, -1)
    columns = {f: [f"{f}{v}" for v in index[k]] for k, f in enumerate(design.facets)}
    columns["score"] = [repr(float(v)) for v in x.ravel()]
    return pl.DataFrame(columns)


def _simulate(design: Design, sizes: dict[str, int], seed: int) -> np.ndarray:
    variances = [0.3 + 0.2 * (k % 3) for k in range(len(design.effects))]
    return simulate_design(design, sizes, np.array(variances), np.random.default_rng(seed), grand_mean=5.0)


CASES = [
    ("s x i x j x r:sij", {"s": 6, "i": 8, "j": 4, "r": 2}, 1),
    ("(c:m) x i x j", {"m": 4, "c": 3, "i": 6, "j": 3}, 2),
    ("(g:i) x j", {"i": 10, "g": 4, "j": 4}, 3),
]


@needs_r
@pytest.mark.parametrize(("spec", "sizes", "seed"), CASES, ids=[c[0] for c in CASES])
def test_components_equal_lme4_reml(tmp_path: Path, spec: str, sizes: dict[str, int], seed: int) -> None:
    design = Design.parse(spec)
    # Main effects with few levels often estimate negative; take the first seed
    # whose fit is interior, where REML and EMS coincide.
    for attempt in range(seed, seed + 200):
        x = _simulate(design, sizes, attempt)
        ours = fit_gstudy(x, design)
        if np.all(ours.sigma2 > 0):
            break
    assert np.all(ours.sigma2 > 0), "the comparison needs a fit with every component positive"
    data = tmp_path / "data.csv"
    _long_frame(x, design).write_csv(data)
    out = tmp_path / "vc.json"
    subprocess.run(["Rscript", str(SCRIPT), str(data), design.lme4_formula(), str(out)], check=True, timeout=300)
    theirs = orjson.loads(out.read_bytes())
    for effect, value in zip(design.effects, ours.sigma2, strict=True):
        group = "Residual" if effect == design.effects[-1] else ":".join(f for f in design.facets if f in effect)
        assert value == pytest.approx(theirs[group], rel=RELATIVE), (design.label(effect), value, theirs[group])
