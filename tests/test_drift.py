"""Judge drift between runs (``stats/drift.py``).

Independent references: nights of ``s x i x j`` scores simulated in numpy
with known judge offsets, each judge's offset and its standard error computed
here from the definition (judge mean minus grand mean; its variance below),
not by the library; the interval rule written as a plain loop; the Wilson
interval by its closed form; statsmodels' ``proportions_ztest`` for the
pooled two-proportion test.

Offset variance for a crossed ``s x i x j`` design with the judge effect
fixed (the estimand is judge j's own offset): the judge mean minus the grand
mean carries ``(sj)``, ``(ij)`` and residual terms, each averaged and centred
over the ``n_j`` judges, so

    Var(offset_j) = (1 - 1/n_j) (sigma2_sj / n_s + sigma2_ij / n_i + sigma2_e / (n_s n_i)).
"""

from __future__ import annotations

import math

import numpy as np
import polars as pl
import pytest
from statsmodels.stats.proportion import proportions_ztest

from jurymeter.stats.drift import (
    NO_ESTIMATE,
    NO_INTERVAL,
    NO_PREVIOUS,
    NOT_FOLLOWED,
    ZERO_WIDTH,
    failure_rate_changes,
    flag_changes,
    two_proportion_z,
    wilson_interval,
)

Z = 1.959964
N_S, N_I, N_J = 10, 20, 6
SIGMA2 = {"s": 0.5, "i": 0.4, "j": 0.3, "sj": 0.2, "ij": 0.15, "si": 0.3, "e": 0.8}
OFFSETS = np.array([0.6, -0.4, 0.1, -0.2, 0.3, -0.4])
SHIFT_NIGHT, SHIFT = 5, 1.2  # judge 0 moves by 1.2 points on night 5: about 8 SEs of the difference


def _night(rng: np.random.Generator, offsets: np.ndarray) -> np.ndarray:
    """One night's scores y[s, i, j] under the crossed random-effects model with fixed judge offsets."""
    sd = {k: math.sqrt(v) for k, v in SIGMA2.items()}
    s = rng.normal(0, sd["s"], (N_S, 1, 1))
    i = rng.normal(0, sd["i"], (1, N_I, 1))
    sj = rng.normal(0, sd["sj"], (N_S, 1, N_J))
    ij = rng.normal(0, sd["ij"], (1, N_I, N_J))
    si = rng.normal(0, sd["si"], (N_S, N_I, 1))
    e = rng.normal(0, sd["e"], (N_S, N_I, N_J))
    return 5.0 + s + i + offsets[None, None, :] + sj + ij + si + e


def _offset_se() -> float:
    """The documented standard error of a judge's offset (module docstring), from the known components."""
    return math.sqrt((1 - 1 / N_J) * (SIGMA2["sj"] / N_S + SIGMA2["ij"] / N_I + SIGMA2["e"] / (N_S * N_I)))


def _rows(scores: np.ndarray, night: int, item_set: str) -> list[dict[str, object]]:
    offsets = scores.mean(axis=(0, 1)) - scores.mean()
    se = _offset_se()
    return [
        {"run_id": f"night-{night:03d}", "started": f"2026-12-{night:03d}", "item_set": item_set, "universe": "all",
         "population": "all", "name": "judge offset", "subject": f"judge-{j}", "estimate": float(offsets[j]),
         "low": float(offsets[j] - Z * se), "high": float(offsets[j] + Z * se)}
        for j in range(N_J)
    ]


def test_a_judge_whose_offset_shifts_on_night_5_is_flagged_on_night_5_and_never_before() -> None:
    rng = np.random.default_rng(20261205)
    rows = []
    for night in range(1, 9):
        offsets = OFFSETS.copy()
        if night >= SHIFT_NIGHT:
            offsets[0] += SHIFT
        rows += _rows(_night(rng, offsets), night, "chat")
    flagged = flag_changes(pl.DataFrame(rows))
    judge0 = flagged.filter(pl.col("subject") == "judge-0").sort("started")
    flags = dict(zip(judge0["run_id"], judge0["flagged"], strict=True))
    assert flags["night-001"] is None  # nothing to compare with
    assert [flags[f"night-{n:03d}"] for n in range(2, SHIFT_NIGHT)] == [False] * (SHIFT_NIGHT - 2)
    assert flags[f"night-{SHIFT_NIGHT:03d}"] is True
    # The shift is about SHIFT / (sqrt(2) se) standard errors of the change: detection near certain.
    assert SHIFT / (math.sqrt(2) * _offset_se()) > 5


def test_false_flags_on_stable_judges_stay_at_the_nominal_five_percent() -> None:
    rng = np.random.default_rng(7)
    rows = []
    n_series = 700  # independent two-night histories (one item set each): 700 x 6 judged changes
    for k in range(n_series):
        for night in (1, 2):
            rows += _rows(_night(rng, OFFSETS), night, f"set-{k}")
    judged = flag_changes(pl.DataFrame(rows))["flagged"].drop_nulls()
    n = judged.len()
    rate = judged.mean()
    assert isinstance(rate, float)
    mc_se = math.sqrt(0.05 * 0.95 / n)
    print(f"false-flag rate {rate:.4f} over {n} stable changes (nominal 0.05, MC SE {mc_se:.4f})")
    assert n == n_series * N_J
    assert abs(rate - 0.05) < 3 * mc_se


def _brute_force(frame: pl.DataFrame) -> dict[tuple[str, str], tuple[float | None, bool | None, str | None]]:
    """The interval rule as a plain loop: per series, each run against the last earlier run with an estimate."""
    out: dict[tuple[str, str], tuple[float | None, bool | None, str | None]] = {}
    for series in sorted(set(frame["subject"].to_list())):
        rows = sorted((r for r in frame.iter_rows(named=True) if r["subject"] == series), key=lambda r: r["started"])
        last = None
        for r in rows:
            if r["estimate"] is None:
                out[(series, r["run_id"])] = (None, None, NO_ESTIMATE)
                continue
            se = None if r["low"] is None else (r["high"] - r["low"]) / (2 * Z)
            if last is None:
                out[(series, r["run_id"])] = (None, None, NO_PREVIOUS)
            else:
                se_prev = None if last["low"] is None else (last["high"] - last["low"]) / (2 * Z)
                if se is None or se_prev is None:
                    out[(series, r["run_id"])] = (None, None, NO_INTERVAL)
                elif se == 0 and se_prev == 0:
                    out[(series, r["run_id"])] = (None, None, ZERO_WIDTH)
                else:
                    z = (r["estimate"] - last["estimate"]) / math.sqrt(se**2 + se_prev**2)
                    if r["drift"]:
                        out[(series, r["run_id"])] = (z, abs(z) > Z, None)
                    else:
                        out[(series, r["run_id"])] = (z, None, NOT_FOLLOWED)
            last = r
    return out


def test_the_interval_rule_equals_a_plain_loop_on_shuffled_rows_with_gaps() -> None:
    rng = np.random.default_rng(3)
    rows = []
    for subject in [f"j{k}" for k in range(12)]:
        drift = bool(rng.random() < 0.8)
        for night in range(10):
            x = float(rng.normal(0, 1))
            half = float(rng.choice([0.0, 0.3, 0.8, 1.5]))
            gap = rng.random()
            rows.append({
                "run_id": f"r{night}", "started": f"2026-01-{night + 10}", "item_set": "a", "universe": "u",
                "population": "p", "name": "n", "subject": subject,
                "estimate": None if gap < 0.1 else x,
                "low": None if gap < 0.2 else x - half, "high": None if gap < 0.2 else x + half, "drift": drift,
            })
    order = rng.permutation(len(rows))
    frame = pl.DataFrame([rows[k] for k in order])
    got = flag_changes(frame)
    expected = _brute_force(frame)
    assert got.height == len(expected)
    for r in got.iter_rows(named=True):
        z, flagged, reason = expected[(r["subject"], r["run_id"])]
        assert r["reason"] == reason, (r["subject"], r["run_id"])
        assert r["flagged"] == flagged
        assert (r["z"] is None) == (z is None)
        if z is not None:
            assert r["z"] == pytest.approx(z, rel=1e-12)


def test_the_wilson_interval_is_its_closed_form() -> None:
    for failed, total in [(0, 10), (3, 10), (10, 10), (17, 1000), (500, 1000), (1, 17281)]:
        p = failed / total
        centre = (p + Z**2 / (2 * total)) / (1 + Z**2 / total)
        half = Z / (1 + Z**2 / total) * math.sqrt(p * (1 - p) / total + Z**2 / (4 * total**2))
        estimate, low, high, reason = wilson_interval(failed, total)
        assert reason is None
        assert estimate == pytest.approx(p)
        assert low == pytest.approx(max(centre - half, 0.0), abs=1e-6)
        assert high == pytest.approx(min(centre + half, 1.0), abs=1e-6)
    assert wilson_interval(0, 0) == (None, None, None, "no judgments")


def test_the_two_proportion_z_is_statsmodels_pooled_test() -> None:
    for x1, n1, x2, n2 in [(5, 1000, 30, 400), (50, 900, 40, 1000), (0, 100, 3, 50), (7, 7, 3, 9)]:
        expected, _ = proportions_ztest([x2, x1], [n2, n1])
        assert two_proportion_z(x1, n1, x2, n2) == pytest.approx(expected, rel=1e-12)
    assert two_proportion_z(0, 100, 0, 50) is None
    assert two_proportion_z(5, 0, 1, 10) is None


def _growing_store(rng: np.random.Generator, rates: list[float], per_night: int) -> pl.DataFrame:
    failed = total = 0
    rows = []
    for night, rate in enumerate(rates):
        total += per_night
        failed += int(rng.binomial(per_night, rate))
        rows.append({"run_id": f"n{night:03d}", "started": f"{night:03d}", "judge_id": "j", "failed": failed, "total": total})
    return pl.DataFrame(rows)


def test_failure_rates_compare_the_new_judgments_and_keep_the_nominal_rate() -> None:
    rng = np.random.default_rng(11)
    flags = []
    for _ in range(400):  # independent two-night stores at a constant 2% failure rate
        frame = failure_rate_changes(_growing_store(rng, [0.02, 0.02], 2000))
        assert frame["basis"].to_list() == [None, "new judgments"]
        flags.append(frame["flagged"][1])
    rate = float(np.mean(flags))
    mc_se = math.sqrt(0.05 * 0.95 / len(flags))
    print(f"failure-rate false-flag rate {rate:.4f} over {len(flags)} (MC SE {mc_se:.4f})")
    assert abs(rate - 0.05) < 3 * mc_se
    # A judge that starts failing 10% of tonight's judgments is flagged tonight, though its
    # cumulative rate moves from 2% to 3.6% only.
    jump = failure_rate_changes(_growing_store(np.random.default_rng(1), [0.02] * 5 + [0.10], 2000))
    assert jump["flagged"].to_list() == [None, False, False, False, False, True]


def test_a_rebuilt_store_compares_the_totals_and_no_new_judgments_is_no_change() -> None:
    frame = pl.DataFrame({"run_id": ["a", "b", "c"], "started": ["1", "2", "3"], "judge_id": ["j"] * 3,
                          "failed": [50, 10, 10], "total": [1000, 900, 900]})
    out = failure_rate_changes(frame)
    assert out["basis"].to_list() == [None, "totals", "new judgments"]
    expected, _ = proportions_ztest([10, 50], [900, 1000])
    assert out["z"][1] == pytest.approx(expected)
    assert out["flagged"][2] is False
    assert out["reason"][2] == "no judgments added since the previous run"


def test_the_chance_of_that_many_flags_is_the_binomial_tail() -> None:
    """excess_flags_p against the tail summed from the binomial formula, and its alert threshold."""
    import math

    from jurymeter.stats.drift import FLAG_LEVEL, excess_flags_p

    for n in (1, 2, 5, 40, 100):
        for k in range(n + 1):
            tail = sum(math.comb(n, j) * FLAG_LEVEL**j * (1 - FLAG_LEVEL) ** (n - j) for j in range(k, n + 1))
            assert excess_flags_p(k, n) == pytest.approx(tail, rel=1e-9, abs=1e-15), (k, n)
    assert excess_flags_p(1, 1) == pytest.approx(0.05)  # one fit: its one flag is an alert (p <= 0.05)
    assert excess_flags_p(5, 100) > 0.5  # chance's share of 100 fits: no alert
    assert excess_flags_p(10, 100) < 0.05
    from jurymeter.errors import JurymeterError

    with pytest.raises(JurymeterError):
        excess_flags_p(3, 2)


def test_a_stable_judge_scoring_many_fits_is_alerted_at_most_at_the_nominal_rate() -> None:
    """Nights of 100 independent stable fits per judge: the per-judge alert fires on at most ~5% of nights."""
    from jurymeter.stats.drift import FLAG_LEVEL, excess_flags_p

    rng = np.random.default_rng(16)
    nights, fits = 2000, 100
    flags = rng.binomial(fits, FLAG_LEVEL, size=nights)  # each stable series flagged with probability 0.05
    alerted = np.mean([excess_flags_p(int(k), fits) <= FLAG_LEVEL for k in flags])
    se = math.sqrt(FLAG_LEVEL * (1 - FLAG_LEVEL) / nights)
    assert alerted <= FLAG_LEVEL + 3 * se
    # Against a judge that shifted in a fifth of its fits (always flagged there), the alert fires every night.
    shifted = rng.binomial(fits - 20, FLAG_LEVEL, size=200) + 20
    assert all(excess_flags_p(int(k), fits) <= FLAG_LEVEL for k in shifted)
