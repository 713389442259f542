"""Serial-dependence diagnostics against brute force and against chains of known law.

References, independent of the code under test:

- brute force in plain Python from the definitions (``_brute``): a rating has a
  k-history when positions t-1..t-k of its batch are all present (dictionary
  look-ups, no run arithmetic); counts, conditional probabilities, plug-in
  entropies in bits with ``math.log2``; the lag-1 contrast as
  P(hi | hi) - P(hi | lo) on a binary scale and as the least-squares slope of
  ``statistics.linear_regression`` otherwise;
- the batch bootstrap redone in a plain loop: the documented weights
  (``numpy.random.default_rng(seed).multinomial(B, [1/B]*B, size=n_boot)``, the
  batches sorted by id), each drawn batch copied as often as drawn, every
  statistic recomputed by ``_brute`` and its percentiles taken by ``numpy.quantile``;
- hand-built sequences whose counts are written as literals;
- simulation of i.i.d. ratings (true contrast 0, every conditional entropy the
  marginal one) and of stationary Markov chains with a known transition matrix
  (the true slope and conditional entropies computed from the matrix and its
  stationary law): bias within Monte Carlo error, after the Miller-Madow
  first-order bias of the plug-in entropy, and ~95% coverage of the intervals.
"""

from __future__ import annotations

import math
import statistics
from collections import Counter
from dataclasses import dataclass

import numpy as np
import polars as pl
import pytest

from jurymeter.errors import ConfigError, DesignError
from jurymeter.stats.sequential.diagnostics import (
    ENTROPY_SCHEMA,
    TRANSITION_SCHEMA,
    SerialDiagnostics,
    serial_diagnostics,
    serial_diagnostics_by,
)

# Counts and plug-in formulas in floating point: agreement to rounding.
EXACT = 1e-12
# Coverage bounds of a nominal 95% interval over REPS replications: 3 binomial sd
# either side, widened below for the small-sample undercoverage of percentile intervals.
COVERAGE_LOW, COVERAGE_HIGH = 0.88, 0.99
REPS = 300
SIM_BATCHES, SIM_LENGTH, SIM_BOOT = 60, 12, 300


@dataclass(frozen=True)
class _Ref:
    entropies: list[float | None]
    trans: dict[tuple[float, float], int]
    prob: dict[tuple[float, float], float | None]
    contrast: float | None
    n_pairs: int
    n_k: list[int]


def _brute(rows: list[tuple[str, int, float]], cats: list[float], max_lag: int) -> _Ref:
    """Every statistic from the definitions, in plain loops."""
    batches: dict[str, dict[int, float]] = {}
    for batch, t, y in rows:
        batches.setdefault(batch, {})[t] = y
    hist_counts: list[Counter[tuple[tuple[float, ...], float]]] = [Counter() for _ in range(max_lag + 1)]
    for seq in batches.values():
        for t, y in seq.items():
            for k in range(max_lag + 1):
                if all((t - j) in seq for j in range(1, k + 1)):
                    h = tuple(seq[t - j] for j in range(1, k + 1))
                    hist_counts[k][(h, y)] += 1
    entropies: list[float | None] = []
    for k in range(max_lag + 1):
        cnt = hist_counts[k]
        n = sum(cnt.values())
        if n == 0:
            entropies.append(None)
            continue
        n_h: Counter[tuple[float, ...]] = Counter()
        for (h, _), c in cnt.items():
            n_h[h] += c
        entropies.append(-sum(c / n * math.log2(c / n_h[h]) for (h, _), c in cnt.items()))
    pairs = [(h[0], y) for (h, y), c in hist_counts[1].items() for _ in range(c)] if max_lag >= 1 else []
    trans = {(a, b): 0 for a in cats for b in cats}
    for a, b in pairs:
        trans[(a, b)] += 1
    prob: dict[tuple[float, float], float | None] = {}
    for a in cats:
        na = sum(trans[(a, b)] for b in cats)
        for b in cats:
            prob[(a, b)] = trans[(a, b)] / na if na else None
    contrast: float | None = None
    prev = [a for a, _ in pairs]
    if len(set(prev)) >= 2:
        if len(cats) == 2:
            lo, hi = cats
            p_hi = [b for a, b in pairs if a == hi]
            p_lo = [b for a, b in pairs if a == lo]
            contrast = p_hi.count(hi) / len(p_hi) - p_lo.count(hi) / len(p_lo)
        else:
            contrast = statistics.linear_regression(prev, [b for _, b in pairs]).slope
    return _Ref(entropies=entropies, trans=trans, prob=prob, contrast=contrast,
                n_pairs=len(pairs), n_k=[sum(c.values()) for c in hist_counts])


def _frame(rows: list[tuple[str, int, float]]) -> pl.DataFrame:
    return pl.DataFrame(rows, schema={"batch_id": pl.String, "batch_position": pl.Int64,
                                      "score": pl.Float64}, orient="row")


def _random_rows(rng: np.random.Generator, n_batches: int, cats: list[float]) -> list[tuple[str, int, float]]:
    rows = []
    for b in range(n_batches):
        length = int(rng.integers(1, 12))
        keep = rng.random(length) > 0.15  # gaps
        y = rng.choice(cats, size=length)
        # some serial dependence: repeat the previous rating half the time
        for t in range(1, length):
            if rng.random() < 0.4:
                y[t] = y[t - 1]
        rows += [(f"b{b}", t, float(y[t])) for t in range(length) if keep[t]]
    order = rng.permutation(len(rows))
    return [rows[i] for i in order]


def _check_against_brute(d: SerialDiagnostics, ref: _Ref, cats: list[float]) -> None:
    assert d.n_pairs == ref.n_pairs
    ent = d.entropies.sort("lag")
    assert ent["n_positions"].to_list() == ref.n_k
    for got, want in zip(ent["entropy"].to_list(), ref.entropies, strict=True):
        if want is None:
            assert got is None
        else:
            assert got == pytest.approx(want, abs=EXACT)
    tr = d.transitions
    assert tr.height == len(cats) ** 2
    trans, prob = ref.trans, ref.prob
    for r in tr.iter_rows(named=True):
        key = (r["previous"], r["current"])
        assert r["count"] == trans[key]
        if prob[key] is None:
            assert r["probability"] is None
            assert r["reason"]
        else:
            assert r["probability"] == pytest.approx(prob[key], abs=EXACT)
    want_c = ref.contrast
    if want_c is None:
        assert d.serial_contrast.value is None
        assert d.serial_contrast.reason
    else:
        assert d.serial_contrast.value == pytest.approx(want_c, abs=EXACT)


@pytest.mark.parametrize("cats", [[0.0, 1.0], [1.0, 2.0, 3.0], [1.0, 2.0, 3.0, 4.0, 5.0], [0.0, 0.5, 3.0]])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_random_sequences_match_brute_force(cats: list[float], seed: int) -> None:
    rng = np.random.default_rng(100 + seed)
    rows = _random_rows(rng, int(rng.integers(3, 25)), cats)
    observed = sorted({y for _, _, y in rows})
    d = serial_diagnostics(_frame(rows), n_boot=5, categories=None)
    assert list(d.categories) == observed
    _check_against_brute(d, _brute(rows, observed, 3), observed)
    given = serial_diagnostics(_frame(rows), n_boot=5, categories=cats)
    _check_against_brute(given, _brute(rows, cats, 3), cats)


def test_hand_built_sequences() -> None:
    # batch a: 1 1 0 0; batch b: 0 0 1 1 (the module's doctest)
    rows = [("a", 0, 1.0), ("a", 1, 1.0), ("a", 2, 0.0), ("a", 3, 0.0),
            ("b", 0, 0.0), ("b", 1, 0.0), ("b", 2, 1.0), ("b", 3, 1.0)]
    d = serial_diagnostics(_frame(rows), n_boot=10)
    assert d.transitions.select("previous", "current", "count").rows() == [
        (0.0, 0.0, 2), (0.0, 1.0, 1), (1.0, 0.0, 1), (1.0, 1.0, 2)]
    assert d.serial_contrast.value == pytest.approx(2 / 3 - 1 / 3, abs=EXACT)
    # H(Y) = 1 bit; H(Y|Y-1): two histories of 3 with 2:1 splits -> H(1/3) bits
    h13 = -(1 / 3) * math.log2(1 / 3) - (2 / 3) * math.log2(2 / 3)
    assert d.entropies["entropy"].to_list()[:2] == pytest.approx([1.0, h13], abs=EXACT)
    # histories of length 2 determine the next rating here: 0 bits
    assert d.entropies["entropy"].to_list()[2:] == pytest.approx([0.0, 0.0], abs=EXACT)
    assert d.entropies["n_positions"].to_list() == [8, 6, 4, 2]


def test_a_gap_breaks_the_chain() -> None:
    # positions 0 1 _ 3 4: pairs (0->1) and (3->4) only; no 2-history anywhere
    rows = [("a", 0, 1.0), ("a", 1, 0.0), ("a", 3, 0.0), ("a", 4, 1.0)]
    d = serial_diagnostics(_frame(rows), n_boot=10)
    assert d.n_chain_breaks == 1
    assert d.n_pairs == 2
    assert d.transitions.select("previous", "current", "count").rows() == [
        (0.0, 0.0, 0), (0.0, 1.0, 1), (1.0, 0.0, 1), (1.0, 1.0, 0)]
    assert d.serial_contrast.value == pytest.approx(0.0 - 1.0, abs=EXACT)
    ent = d.entropies
    assert ent["entropy"].to_list()[:2] == pytest.approx([1.0, 0.0], abs=EXACT)
    assert ent["entropy"].to_list()[2:] == [None, None]
    assert all("2 consecutive" in r or "3 consecutive" in r for r in ent["reason"].to_list()[2:])


def test_nulls_with_reasons() -> None:
    # every batch holds one rating: nothing chains
    single = _frame([("a", 0, 1.0), ("b", 3, 0.0), ("c", 1, 1.0)])
    d = serial_diagnostics(single, n_boot=10)
    assert d.n_pairs == 0
    assert d.serial_contrast.value is None
    assert "consecutive" in (d.serial_contrast.reason or "")
    assert d.entropies["entropy"].to_list()[0] is not None
    assert d.entropies["entropy"].to_list()[1:] == [None, None, None]
    assert d.transitions["probability"].null_count() == 4
    # every previous rating is the same: the slope is not identified
    const = _frame([("a", 0, 1.0), ("a", 1, 0.0), ("b", 0, 1.0), ("b", 1, 1.0)])
    d = serial_diagnostics(const, n_boot=10)
    assert d.n_pairs == 2
    assert d.serial_contrast.value is None
    assert "same category" in (d.serial_contrast.reason or "")
    # a given category never observed: its rows have a null probability and a reason
    d = serial_diagnostics(_frame([("a", 0, 1.0), ("a", 1, 2.0), ("a", 2, 1.0)]),
                           categories=[1, 2, 3], n_boot=10)
    row = d.transitions.filter(pl.col("previous") == 3.0)
    assert row["count"].to_list() == [0, 0, 0]
    assert row["probability"].null_count() == 3
    assert row["reason"].null_count() == 0


def test_rows_without_a_batch_or_score_are_left_out_and_break_the_chain() -> None:
    frame = pl.DataFrame({
        "batch_id": ["a", "a", "a", "a", None],
        "batch_position": [0, 1, 2, 3, 0],
        "score": [1.0, None, 1.0, 1.0, 0.0],
    })
    d = serial_diagnostics(frame, n_boot=10)
    assert d.n_without_batch == 2
    assert d.n_ratings == 3
    assert d.n_pairs == 1  # only 2 -> 3
    assert d.n_chain_breaks == 1


def test_frames_have_the_documented_schemas() -> None:
    d = serial_diagnostics(_frame([("a", 0, 1.0), ("a", 1, 0.0)]), n_boot=5)
    assert dict(d.entropies.schema) == ENTROPY_SCHEMA
    assert dict(d.transitions.schema) == TRANSITION_SCHEMA


def test_errors_name_the_fields() -> None:
    frame = _frame([("a", 0, 1.0), ("a", 1, 0.0)])
    with pytest.raises(DesignError, match=r"batch_id.*batch_position"):
        serial_diagnostics(frame.drop("batch_position"))
    with pytest.raises(DesignError, match="batch_id"):
        serial_diagnostics(frame.with_columns(batch_id=pl.lit(None, dtype=pl.String)))
    with pytest.raises(DesignError, match="sharing"):
        serial_diagnostics(pl.concat([frame, frame]))
    with pytest.raises(DesignError, match="not among the categories"):
        serial_diagnostics(frame, categories=[0.0, 2.0])
    for bad in ({"n_boot": 0}, {"max_lag": 0}, {"level": 1.0}, {"seed": -1},
                {"categories": [2.0, 1.0]}, {"categories": "01"}):
        with pytest.raises(ConfigError):
            serial_diagnostics(frame, **bad)
    with pytest.raises(DesignError, match="grouping"):
        serial_diagnostics_by(frame, by=["judge_id"])


def _quantiles(values: list[float], level: float) -> tuple[float, float]:
    a = (1 - level) / 2
    lo, hi = np.quantile(np.asarray(values), [a, 1 - a])
    return float(lo), float(hi)


@pytest.mark.parametrize(("cats", "seed"), [([0.0, 1.0], 3), ([1.0, 2.0, 4.0], 4)])
def test_bootstrap_matches_a_plain_loop(cats: list[float], seed: int) -> None:
    rng = np.random.default_rng(seed)
    rows = _random_rows(rng, 14, cats)
    n_boot, level, boot_seed = 150, 0.9, 11
    d = serial_diagnostics(_frame(rows), n_boot=n_boot, seed=boot_seed, level=level, categories=cats)
    ids = sorted({b for b, _, _ in rows})
    weights = np.random.default_rng(boot_seed).multinomial(len(ids), [1 / len(ids)] * len(ids), size=n_boot)
    by_batch: dict[str, list[tuple[str, int, float]]] = {b: [] for b in ids}
    for row in rows:
        by_batch[row[0]].append(row)
    contrasts: list[float] = []
    ents: list[list[float]] = [[] for _ in range(4)]
    probs: dict[tuple[float, float], list[float]] = {}
    for w in weights:
        sample = [(f"{b}#{copy}", t, y) for b, n in zip(ids, w, strict=True)
                  for copy in range(int(n)) for _, t, y in by_batch[b]]
        ref = _brute(sample, cats, 3)
        if ref.contrast is not None:
            contrasts.append(ref.contrast)
        for k, e in enumerate(ref.entropies):
            if e is not None:
                ents[k].append(e)
        for key, p in ref.prob.items():
            if p is not None:
                probs.setdefault(key, []).append(p)
    lo, hi = _quantiles(contrasts, level)
    assert d.serial_contrast.low == pytest.approx(lo, abs=EXACT)
    assert d.serial_contrast.high == pytest.approx(hi, abs=EXACT)
    for r in d.entropies.iter_rows(named=True):
        lo, hi = _quantiles(ents[r["lag"]], level)
        assert (r["entropy_low"], r["entropy_high"]) == pytest.approx((lo, hi), abs=EXACT)
    for r in d.transitions.iter_rows(named=True):
        if r["probability"] is None:
            continue
        lo, hi = _quantiles(probs[(r["previous"], r["current"])], level)
        assert (r["probability_low"], r["probability_high"]) == pytest.approx((lo, hi), abs=EXACT)


def test_by_group_matches_brute_force_per_group() -> None:
    rng = np.random.default_rng(7)
    frames = []
    refs = {}
    for judge in ("j2", "j1"):
        rows = _random_rows(rng, 10, [0.0, 1.0])
        frames.append(_frame(rows).with_columns(judge_id=pl.lit(judge)))
        refs[judge] = _brute(rows, [0.0, 1.0], 3)
    out = serial_diagnostics_by(pl.concat(frames), by=["judge_id"], n_boot=20, categories=[0, 1])
    assert list(out.groups) == [("j1",), ("j2",)]
    assert out.contrasts["judge_id"].to_list() == ["j1", "j2"]
    for judge in ("j1", "j2"):
        _check_against_brute(out.groups[(judge,)], refs[judge], [0.0, 1.0])
        got = out.contrasts.filter(pl.col("judge_id") == judge)["serial_contrast"].item()
        assert got == pytest.approx(refs[judge].contrast, abs=EXACT)
    assert out.entropies.columns == ["judge_id", *ENTROPY_SCHEMA]
    assert out.transitions.height == 2 * 4


# ---------------------------------------------------------------- simulation with known truth


def _h(p: np.ndarray) -> float:
    p = p[p > 0]
    return float(-(p * np.log2(p)).sum())


def _markov(rng: np.random.Generator, trans: np.ndarray, values: np.ndarray) -> pl.DataFrame:
    """SIM_BATCHES stationary chains of SIM_LENGTH ratings."""
    pi = _stationary(trans)
    c = len(values)
    y = np.empty((SIM_BATCHES, SIM_LENGTH), dtype=np.int64)
    y[:, 0] = rng.choice(c, size=SIM_BATCHES, p=pi)
    cum = np.cumsum(trans, axis=1)
    for t in range(1, SIM_LENGTH):
        u = rng.random(SIM_BATCHES)
        y[:, t] = (u[:, None] > cum[y[:, t - 1]]).sum(axis=1)
    return pl.DataFrame({
        "batch_id": np.repeat([f"b{i:03d}" for i in range(SIM_BATCHES)], SIM_LENGTH),
        "batch_position": np.tile(np.arange(SIM_LENGTH), SIM_BATCHES),
        "score": values[y.reshape(-1)],
    })


def _stationary(trans: np.ndarray) -> np.ndarray:
    w, v = np.linalg.eig(trans.T)
    pi = np.real(v[:, np.argmin(np.abs(w - 1))])
    out: np.ndarray = pi / pi.sum()
    return out


def _truth(trans: np.ndarray, values: np.ndarray) -> tuple[float, float, float]:
    """True lag-1 slope, H(Y_t) and H(Y_t | Y_{t-1}) (bits) of the stationary chain."""
    pi = _stationary(trans)
    mu = float(pi @ values)
    d = values - mu
    cov = float(np.einsum("a,ab,a,b->", pi, trans, d, d))
    var = float(pi @ (d * d))
    h_cond = float(sum(pi[a] * _h(trans[a]) for a in range(len(values))))
    return cov / var, _h(pi), h_cond


def _miller_madow(n_cells_minus_histories: int, n: int) -> float:
    """First-order downward bias of the plug-in entropy, in bits."""
    return n_cells_minus_histories / (2 * n * math.log(2))


@pytest.mark.parametrize(
    ("name", "trans", "values", "lags", "seed"),
    [
        ("iid binary", np.array([[0.65, 0.35], [0.65, 0.35]]), np.array([0.0, 1.0]), 3, 21),
        ("markov binary", np.array([[0.7, 0.3], [0.4, 0.6]]), np.array([0.0, 1.0]), 3, 22),
        ("markov ordinal", np.array([[0.6, 0.3, 0.1], [0.2, 0.5, 0.3], [0.1, 0.3, 0.6]]),
         np.array([1.0, 2.0, 4.0]), 1, 23),
    ],
)
def test_bias_and_coverage_on_chains_of_known_law(
    name: str, trans: np.ndarray, values: np.ndarray, lags: int, seed: int
) -> None:
    rng = np.random.default_rng(seed)
    slope, h0, h1 = _truth(trans, values)
    c = len(values)
    est, covered = [], 0
    ent_est: list[list[float]] = [[] for _ in range(lags + 1)]
    for rep in range(REPS):
        d = serial_diagnostics(_markov(rng, trans, values), n_boot=SIM_BOOT, seed=rep, max_lag=lags)
        s = d.serial_contrast
        assert s.value is not None
        assert s.low is not None
        assert s.high is not None
        est.append(s.value)
        covered += s.low <= slope <= s.high
        for r in d.entropies.iter_rows(named=True):
            k = r["lag"]
            # compare after the plug-in's first-order bias, (C - 1) per history observed
            ent_est[k].append(r["entropy"] + _miller_madow(r["n_histories"] * (c - 1), r["n_positions"]))
    est_a = np.asarray(est)
    mc_se = est_a.std(ddof=1) / math.sqrt(REPS)
    # the ratio estimator's O(1/n) bias is far below 4 Monte Carlo standard errors here
    assert abs(est_a.mean() - slope) < 4 * mc_se, (name, est_a.mean(), slope, mc_se)
    assert COVERAGE_LOW <= covered / REPS <= COVERAGE_HIGH, (name, covered / REPS)
    # H(Y_t) pools dependent ratings: the first-order bias grows by up to (1 + lam) / (1 - lam),
    # lam the chain's second eigenvalue (exact for two states), allowed beyond 4 standard errors
    lam = float(np.sort(np.abs(np.linalg.eigvals(trans)))[-2])
    mm0 = _miller_madow(c - 1, SIM_BATCHES * SIM_LENGTH)
    for k in range(lags + 1):
        e = np.asarray(ent_est[k])
        truth = h0 if k == 0 else h1  # a first-order chain: every k >= 1 gives H(Y_t | Y_{t-1})
        se = e.std(ddof=1) / math.sqrt(REPS)
        allowance = mm0 * ((1 + lam) / (1 - lam) - 1) if k == 0 else 0.0
        assert abs(e.mean() - truth) < 4 * se + allowance, (name, k, e.mean(), truth, se)
    print(name, "slope", slope, "mean", est_a.mean(), "mc_se", mc_se, "coverage", covered / REPS,
          "entropies", [float(np.mean(x)) for x in ent_est], "truth", h0, h1)
