"""The one G-study report builder (``jurymeter.stats.gstudy_report``): both estimators publish the same report.

Independent reference: on complete data the balanced block and Henderson's
Method I fit the same records with the same (balanced) expected mean squares,
so the two reports built from their parts must have the same keys in the same
order (less the keys only Henderson's has, listed here by hand) and the same
components and D-study numbers; the draws differ (chi-square vs record
bootstrap), so the intervals are not compared.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import polars as pl
import pytest

from jurymeter.stats.estimator_choice import COMPLETE_NOTE, EstimatorChoice
from jurymeter.stats.gstudy_report import with_estimator
from jurymeter.stats.reliability import (
    GStudyRequest,
    assess_item_set,
    henderson_cells,
    henderson_report,
)

# Same T's, summed in another order: rounding only.
SAME_TOL = 1e-10
HENDERSON_ONLY = {"estimator", "estimator_note", "balanced_block", "balanced_block_drops", "system_means_kind",
                  "dstudy_sizes", "ems_coefficients"}
REQUEST = GStudyRequest(item_set="sim", n_boot=20, fpr_simulations=0, splits=4, partitions=4)


def _complete(seed: int) -> pl.DataFrame:
    """Complete s x i x j x r:sij records (5 systems, 10 items, 4 judges, 2 runs) of the random model."""
    rng = np.random.default_rng(seed)
    shape = (5, 10, 4, 2)
    x = 5.0 + sum(rng.normal(scale=0.6, size=[n if k in axes else 1 for k, n in enumerate(shape)])
                  for axes in ((0,), (1,), (2,), (0, 1), (0, 2), (1, 2), (0, 1, 2), (0, 1, 2, 3)))
    s, i, j, r = np.indices(shape).reshape(4, -1)
    return pl.DataFrame({
        "system_id": np.char.add("s", s.astype(str)), "item_id": np.char.add("i", i.astype(str)),
        "judge_id": np.char.add("j", j.astype(str)), "replicate": r, "generation": np.zeros(s.size, dtype=np.int64),
        "score": np.asarray(x).ravel(),
    })


def _numbers(report: dict[str, Any]) -> dict[str, float]:
    out = {f"components.{k}.{f}": c[f] for k, c in report["components"].items() for f in ("raw", "df", "ms")}
    for key in ("erho2", "phi", "mdd95", "mdd95_t", "mdd95_t_df", "erho2_30", "ceiling", "grand_mean"):
        out[key] = report[key]
    return out


def test_both_estimators_build_the_same_report_on_complete_data() -> None:
    records = _complete(3)
    balanced = assess_item_set(records, REQUEST)
    henderson = henderson_report(henderson_cells(records.lazy(), REQUEST), REQUEST)
    shared = [k for k in henderson if k not in HENDERSON_ONLY]
    assert list(balanced) == shared
    assert [k for k in balanced["intervals"]] == [k for k in henderson["intervals"] if k != "method_note"]
    ours, theirs = _numbers(balanced), _numbers(henderson)
    for key, value in ours.items():
        assert theirs[key] == pytest.approx(value, abs=SAME_TOL), key
    assert list(balanced["system_means"]) == list(henderson["system_means"])
    assert balanced["design"] == henderson["design"] == "s x i x j x r:sij"


def test_with_estimator_places_the_estimator_after_the_request() -> None:
    report = {"item_set": "x", "request": {}, "design": "s x i"}
    assert list(with_estimator(report, "balanced")) == ["item_set", "request", "estimator", "design"]
    noted = with_estimator(report, "balanced", "why")
    assert list(noted) == ["item_set", "request", "estimator", "estimator_note", "design"]
    assert noted["estimator_note"] == "why"


def test_auto_takes_the_balanced_block_on_complete_data_and_henderson_when_cells_are_missing() -> None:
    records = _complete(4)
    calls: list[object] = []

    def balanced(block: object) -> dict[str, Any]:
        calls.append(block)
        return assess_item_set(records, REQUEST)

    auto = GStudyRequest(item_set="sim", n_boot=20, fpr_simulations=0, splits=4, partitions=4)
    report = EstimatorChoice(auto, records.lazy(), layout=None, no_block=None, sums=None).report(balanced)
    assert report["estimator"] == "balanced"
    assert report["estimator_note"] == COMPLETE_NOTE
    assert len(calls) == 1
    holes = records.filter(~((pl.col("system_id") == "s0") & (pl.col("judge_id") == "j0")
                             & pl.col("item_id").is_in(["i1", "i2"])))
    report = EstimatorChoice(auto, holes.lazy(), layout=None, no_block=None, sums=None).report(balanced)
    assert report["estimator"] == "henderson"
    assert "balanced block would drop" in report["estimator_note"]
    assert len(calls) == 1  # Henderson's report: the balanced one was not asked for
