"""Tests of jurymeter.stats.pairwise.family (family-conditioned preference, Awuni et al. 2026).

Independent references: support matrices worked out by hand; the paper's printed support
numbers (section 5) rebuilt as outcomes; a plain-Python brute force of the definitions (cell
means from dict loops, every permutation or relabelling enumerated with itertools); and
simulations with known truth, whose expected support the tests compute themselves from the
truth's parameters with the model's formulas (the ordered logit with ties, both orders,
the counterbalanced rule), with standard errors from the exact per-outcome variances.
"""

from __future__ import annotations

import itertools
import math
from collections import defaultdict

import numpy as np
import polars as pl
import pytest
from scipy import stats as sps

from jurymeter.errors import ConfigError, DesignError, NotApplicableError, SimulationError
from jurymeter.simulate import SimulationParams, simulate_dump
from jurymeter.stats.pairwise.family import family_preference
from jurymeter.stats.pairwise.games import games, reconcile

# Estimates of the simulations must sit within Z_TOL standard errors of the exact truth
# (two-sided false alarm about 6e-5 per check under normality; the draws are seeded).
Z_TOL = 4.0
# Hand-built numbers are sums of a few binary fractions: exact up to rounding.
EXACT = 1e-12
# Printed numbers carry three decimals: half a unit of the last place.
PRINTED = 0.0005
# Uniformity of the permutation p-values: reject only on a KS p-value below this.
KS_ALPHA = 0.001

COLUMNS = ["item_id", "system_x", "system_y", "judge_id", "generation", "replicate", "score_x"]


def _frame(rows: list[tuple[str, str, str, str, int, int, float]]) -> pl.DataFrame:
    return pl.DataFrame(rows, schema=COLUMNS, orient="row")


def _brute(
    rows: list[tuple[str, str, str, str, int, int, float]],
    jf: dict[str, str],
    sf: dict[str, str],
) -> dict[str, object]:
    """Support matrix, FPS, naive and corrected statistics by plain loops over the definitions."""
    total: dict[tuple[str, str], float] = defaultdict(float)
    count: dict[tuple[str, str], int] = defaultdict(int)
    for _item, x, y, j, _g, _r, s in rows:
        if j not in jf or x not in sf or y not in sf or sf[x] == sf[y]:
            continue
        h = jf[j]
        total[h, sf[x]] += s
        count[h, sf[x]] += 1
        total[h, sf[y]] += 1 - s
        count[h, sf[y]] += 1
    sup = {k: total[k] / count[k] for k in count}
    jfams = sorted({h for h, _ in sup})
    cfams = sorted({c for _, c in sup})
    diag = [f for f in jfams if (f, f) in sup]
    off = [sup[h, f] for f in diag for h in jfams if h != f and (h, f) in sup]
    fps = sum(sup[f, f] for f in diag) / len(diag) - sum(off) / len(off)
    naive, corrected = {}, {}
    for f in diag:
        row = [sup[f, g] for g in cfams if g != f and (f, g) in sup]
        col = [sup[h, f] for h in jfams if h != f and (h, f) in sup]
        naive[f] = sup[f, f] - sum(row) / len(row)
        corrected[f] = sup[f, f] - sum(col) / len(col)
    return {"support": sup, "fps": fps, "naive": naive, "corrected": corrected}


def _support_dict(fp_support: pl.DataFrame) -> dict[tuple[str, str], float]:
    return {
        (r["judge_family"], r["candidate_family"]): r["support"]
        for r in fp_support.iter_rows(named=True)
        if r["support"] is not None
    }


def _per_family(fp_frame: pl.DataFrame, column: str) -> dict[str, float]:
    return dict(zip(fp_frame["family"], fp_frame[column], strict=True))


# --------------------------------------------------------------------------
# hand-built support matrices
# --------------------------------------------------------------------------

# Three families A, B, C; judges jA, jB, jC; systems a, b, c; one item, every pair once.
HAND = [
    ("i1", "a", "b", "jA", 0, 0, 1.0),
    ("i1", "a", "c", "jA", 0, 0, 1.0),
    ("i1", "b", "c", "jA", 0, 0, 0.5),
    ("i1", "a", "b", "jB", 0, 0, 0.5),
    ("i1", "a", "c", "jB", 0, 0, 0.5),
    ("i1", "b", "c", "jB", 0, 0, 1.0),
    ("i1", "a", "b", "jC", 0, 0, 0.5),
    ("i1", "a", "c", "jC", 0, 0, 0.0),
    ("i1", "b", "c", "jC", 0, 0, 0.0),
]
HAND_JF = {"jA": "A", "jB": "B", "jC": "C"}
HAND_SF = {"a": "A", "b": "B", "c": "C", "a2": "A"}


def test_hand_built_three_families() -> None:
    extra = [
        ("i1", "a", "a2", "jA", 0, 0, 1.0),  # both candidates of family A: left out
        ("i1", "a", "z", "jB", 0, 0, 0.0),  # system z has no family
        ("i1", "a", "b", "jq", 0, 0, 0.0),  # judge jq has no family
    ]
    fp = family_preference(
        _frame(HAND + extra), judge_family=HAND_JF, system_family=HAND_SF, n_perm=19,
        n_placebo=10,
    )
    # S[h, f] worked out by hand (rows: judge family, columns: candidate family)
    expected = {
        ("A", "A"): 1.0, ("A", "B"): 0.25, ("A", "C"): 0.25,
        ("B", "A"): 0.5, ("B", "B"): 0.75, ("B", "C"): 0.25,
        ("C", "A"): 0.25, ("C", "B"): 0.25, ("C", "C"): 1.0,
    }  # fmt: skip
    got = _support_dict(fp.support)
    assert got.keys() == expected.keys()
    for key, value in expected.items():
        assert got[key] == pytest.approx(value, abs=EXACT)
    # each judge row sums to K/2 = 1.5 in a balanced design (paper section 4)
    for h in "ABC":
        assert sum(got[h, f] for f in "ABC") == pytest.approx(1.5, abs=EXACT)
    assert fp.mean_diagonal == pytest.approx(2.75 / 3, abs=EXACT)
    assert fp.mean_off_diagonal == pytest.approx(1.75 / 6, abs=EXACT)
    assert fp.fps == pytest.approx(2.75 / 3 - 1.75 / 6, abs=EXACT)
    naive, corrected = _per_family(fp.per_family, "naive"), _per_family(fp.per_family, "corrected")
    assert naive == pytest.approx({"A": 0.75, "B": 0.375, "C": 0.75}, abs=EXACT)
    assert corrected == pytest.approx({"A": 0.625, "B": 0.5, "C": 0.75}, abs=EXACT)
    assert fp.families == ("A", "B", "C")
    assert fp.n_outcomes == 9
    assert fp.n_same_family_outcomes == 1
    assert fp.n_outcomes_without_family == 2
    assert fp.n_systems_without_family == 1
    assert fp.n_judges_without_family == 1
    # three judges, three labels: 3! - 1 = 5 other assignments, all enumerated
    assert fp.placebo_enumerated
    assert fp.n_placebo == 5


def _paper_outcomes() -> tuple[list[tuple[str, str, str, str, int, int, float]], np.ndarray]:
    """Outcomes whose support matrix has the printed diagonal and other-judge means (section 5)."""
    diag = np.array([0.542, 0.620, 0.543, 0.497])  # Llama, Qwen, Gemma, Yi
    other = np.array([0.509, 0.544, 0.459, 0.421])
    # rounded printed values sum to 8.001, not the 8 = 4 rows x 2.00 of a balanced design:
    # take a third of 0.001 off Yi's other-judge mean, within its rounding
    other[3] -= 0.001 / 3
    k = 4
    cells = [(h, f) for h in range(k) for f in range(k) if h != f]
    # off-diagonal M[h, f] = other[f] + e[h, f]: columns keep their mean, rows sum to 2
    a = np.zeros((2 * k, len(cells)))
    b = np.zeros(2 * k)
    for n, (h, f) in enumerate(cells):
        a[f, n] = 1.0  # column f: sum of e = 0
        a[k + h, n] = 1.0  # row h: sum of e = 2 - diag[h] - sum_{f != h} other[f]
    for h in range(k):
        b[k + h] = 2.0 - diag[h] - (other.sum() - other[h])
    e = np.linalg.lstsq(a, b, rcond=None)[0]
    m = np.diag(diag)
    for n, (h, f) in enumerate(cells):
        m[h, f] = other[f] + e[n]
    # per judge family, pair supports p(f, g) (p(g, f) = 1 - p(f, g)) with row means m[h]
    pairs = list(itertools.combinations(range(k), 2))
    rows = []
    for h in range(k):
        t = np.zeros((k, len(pairs)))
        for n, (f, g) in enumerate(pairs):
            t[f, n], t[g, n] = 1.0 / 3, -1.0 / 3
        x = np.linalg.lstsq(t, m[h] - 0.5, rcond=None)[0]
        assert np.allclose(t @ x, m[h] - 0.5)
        for n, (f, g) in enumerate(pairs):
            rows.append(("p1", f"s{f}", f"s{g}", f"j{h}", 0, 0, float(0.5 + x[n])))
    return rows, m


def test_paper_printed_support_numbers() -> None:
    rows, m = _paper_outcomes()
    fams = ["llama", "qwen", "gemma", "yi"]
    jf = {f"j{h}": fams[h] for h in range(4)}
    sf = {f"s{f}": fams[f] for f in range(4)}
    assert all(0.0 <= r[-1] <= 1.0 for r in rows)
    fp = family_preference(_frame(rows), judge_family=jf, system_family=sf, n_perm=9, n_placebo=5)
    got = _support_dict(fp.support)
    for h in range(4):
        for f in range(4):
            assert got[fams[h], fams[f]] == pytest.approx(m[h, f], abs=1e-9)
        # balanced design: each judge row sums to 2.00 (paper section 4)
        assert sum(got[fams[h], f] for f in fams) == pytest.approx(2.0, abs=1e-9)
    # mean diagonal 0.551 vs 0.483 off the diagonal, FPS 0.067 (section 5); the means of the
    # rounded per-family values and the rounded means each carry half a unit of rounding
    assert fp.mean_diagonal == pytest.approx(0.551, abs=2 * PRINTED)
    assert fp.mean_off_diagonal == pytest.approx(0.483, abs=2 * PRINTED)
    assert fp.fps == pytest.approx((0.542 + 0.620 + 0.543 + 0.497) / 4 - (1.933 - 0.001 / 3) / 4)
    assert fp.fps == pytest.approx(0.067, abs=2 * PRINTED)
    printed = {"llama": (0.542, 0.509), "qwen": (0.620, 0.544), "gemma": (0.543, 0.459),
               "yi": (0.497, 0.421)}  # fmt: skip
    same = _per_family(fp.per_family, "same_family_support")
    others = _per_family(fp.per_family, "other_judges_support")
    corrected = _per_family(fp.per_family, "corrected")
    for f, (own, rest) in printed.items():
        assert same[f] == pytest.approx(own, abs=PRINTED)
        assert others[f] == pytest.approx(rest, abs=PRINTED)
        assert corrected[f] == pytest.approx(own - rest, abs=2 * PRINTED)
        assert corrected[f] > 0  # "positive in all four families"
    # the corrected range 0.034-0.084 of the abstract, to the printed rounding
    assert min(corrected.values()) == pytest.approx(0.034, abs=0.0015)
    assert max(corrected.values()) == pytest.approx(0.084, abs=0.0015)


# --------------------------------------------------------------------------
# brute force on an unbalanced random design
# --------------------------------------------------------------------------


def _random_rows(seed: int) -> tuple[list[tuple[str, str, str, str, int, int, float]],
                                     dict[str, str], dict[str, str]]:  # fmt: skip
    rng = np.random.default_rng(seed)
    sf = {"s0": "A", "s1": "A", "s2": "B", "s3": "C", "s4": "C", "s5": "D"}
    jf = {"j0": "A", "j1": "A", "j2": "B", "j3": "C", "j4": "E"}  # E judges no candidate
    systems = sorted(sf)
    rows = []
    for item in range(12):
        for x, y in itertools.combinations(systems, 2):
            if rng.random() < 0.3:
                continue
            for j in jf:
                if rng.random() < 0.2:
                    continue
                for rep in range(int(rng.integers(1, 3))):
                    s = float(rng.choice([0.0, 0.5, 1.0, rng.random()]))
                    rows.append((f"i{item}", x, y, j, 0, rep, s))
    return rows, jf, sf


def test_matches_brute_force_unbalanced() -> None:
    rows, jf, sf = _random_rows(3)
    fp = family_preference(_frame(rows), judge_family=jf, system_family=sf, n_perm=9, n_placebo=9)
    ref = _brute(rows, jf, sf)
    got = _support_dict(fp.support)
    assert got.keys() == ref["support"].keys()  # type: ignore[attr-defined]
    for key, value in ref["support"].items():  # type: ignore[attr-defined]
        assert got[key] == pytest.approx(value, abs=EXACT)
    assert fp.fps == pytest.approx(ref["fps"], abs=EXACT)
    assert _per_family(fp.per_family, "naive") == pytest.approx(ref["naive"], abs=EXACT)
    assert _per_family(fp.per_family, "corrected") == pytest.approx(ref["corrected"], abs=EXACT)
    assert fp.families == ("A", "B", "C")
    # leave one judge family out / one candidate family out: brute force on the filtered rows
    loo = {(r["left_out"], r["family"]): r["fps"] for r in fp.leave_one_out.iter_rows(named=True)}
    for f in ("A", "B", "C", "E"):
        kept = [r for r in rows if jf[r[3]] != f]
        assert loo["judge_family", f] == pytest.approx(_brute(kept, jf, sf)["fps"], abs=EXACT)
    for f in ("A", "B", "C", "D"):
        kept = [r for r in rows if f not in (sf[r[1]], sf[r[2]])]
        assert loo["candidate_family", f] == pytest.approx(_brute(kept, jf, sf)["fps"], abs=EXACT)


def test_leave_one_out_not_estimable_has_reason() -> None:
    fp = family_preference(_frame(HAND), judge_family=HAND_JF, system_family=HAND_SF, n_perm=9)
    # only judges A, B, C and candidates A, B, C: dropping one leaves a 2 x 2 design, estimable
    assert fp.leave_one_out["fps"].null_count() == 0
    two = [r for r in HAND if r[3] != "jC" and "c" not in (r[1], r[2])]
    fp2 = family_preference(_frame(two), judge_family=HAND_JF, system_family=HAND_SF, n_perm=9)
    row = fp2.leave_one_out.filter(pl.col("left_out") == "judge_family").row(0, named=True)
    assert row["fps"] is None
    assert "not estimable" in row["reason"]


# --------------------------------------------------------------------------
# permutation and placebo against full enumeration
# --------------------------------------------------------------------------


def test_permutation_p_matches_full_enumeration() -> None:
    # three (item, pair) blocks with three judges each: (3!)^3 = 216 permutations
    rng = np.random.default_rng(7)
    jf = {"ja": "A", "jb": "B", "jc": "C"}
    sf = {"a": "A", "b": "B", "c": "C"}
    blocks = [("i1", "a", "b"), ("i1", "a", "c"), ("i2", "b", "c")]
    rows = []
    scores = {}
    for blk in blocks:
        for j in jf:
            reps = [float(rng.choice([0.0, 0.5, 1.0])) for _ in range(2)]
            scores[blk, j] = reps
            rows += [(blk[0], blk[1], blk[2], j, 0, r, s) for r, s in enumerate(reps)]
    observed = _brute(rows, jf, sf)["fps"]
    judges = list(jf)
    null = []
    for perms in itertools.product(itertools.permutations(judges), repeat=len(blocks)):
        permuted = []
        for blk, perm in zip(blocks, perms, strict=True):
            for j, new in zip(judges, perm, strict=True):
                permuted += [(blk[0], blk[1], blk[2], new, 0, r, s)
                             for r, s in enumerate(scores[blk, j])]  # fmt: skip
        null.append(_brute(permuted, jf, sf)["fps"])
    exact = float(np.mean(np.asarray(null) >= observed - 1e-12))
    n_perm = 4000
    fp = family_preference(_frame(rows), judge_family=jf, system_family=sf, n_perm=n_perm)
    assert fp.fps == pytest.approx(observed, abs=EXACT)
    se = math.sqrt(exact * (1 - exact) / n_perm)
    expected = (1 + exact * n_perm) / (n_perm + 1)
    assert abs(fp.p_permutation - expected) < Z_TOL * se + 1e-9
    assert fp.fps_null_mean == pytest.approx(float(np.mean(null)), abs=Z_TOL * float(np.std(null)) / math.sqrt(n_perm))


def test_permutation_p_matches_enumeration_large_and_unequal_blocks() -> None:
    # a block of 7 judges (permuted by sorting, beyond the table of permutations) and a block
    # whose judges carry unequal numbers of replicates (the counts move with the labels):
    # 7! * 3! = 30,240 permutations, enumerated
    rng = np.random.default_rng(19)
    jf = {"j1": "A", "j2": "A", "j3": "B", "j4": "B", "j5": "C", "j6": "C", "j7": "A"}
    sf = {"a": "A", "b": "B", "c": "C"}
    plan = {("i1", "a", "b"): {j: 1 for j in jf}, ("i1", "a", "c"): {"j1": 1, "j3": 3, "j5": 1},
            ("i2", "b", "c"): {"j2": 2, "j4": 1}}
    rows = []
    scores = {}
    for blk, reps in plan.items():
        for j, n in reps.items():
            scores[blk, j] = [float(rng.choice([0.0, 0.5, 1.0])) for _ in range(n)]
            rows += [(blk[0], blk[1], blk[2], j, 0, r, s) for r, s in enumerate(scores[blk, j])]
    observed = _brute(rows, jf, sf)["fps"]
    null = []
    for perms in itertools.product(*(itertools.permutations(list(reps)) for reps in plan.values())):
        permuted = []
        for (blk, reps), perm in zip(plan.items(), perms, strict=True):
            for j, new in zip(list(reps), perm, strict=True):
                permuted += [(blk[0], blk[1], blk[2], new, 0, r, s)
                             for r, s in enumerate(scores[blk, j])]  # fmt: skip
        null.append(_brute(permuted, jf, sf)["fps"])
    exact = float(np.mean(np.asarray(null) >= observed - 1e-12))
    assert 0.0 < exact < 1.0  # the test has something to find
    n_perm = 4000
    fp = family_preference(_frame(rows), judge_family=jf, system_family=sf, n_perm=n_perm, n_placebo=0)
    assert fp.fps == pytest.approx(observed, abs=EXACT)
    se = math.sqrt(exact * (1 - exact) / n_perm)
    expected = (1 + exact * n_perm) / (n_perm + 1)
    assert abs(fp.p_permutation - expected) < Z_TOL * se + 1e-9
    assert fp.fps_null_mean == pytest.approx(float(np.mean(null)), abs=Z_TOL * float(np.std(null)) / math.sqrt(n_perm))


def test_placebo_enumerates_distinct_assignments() -> None:
    # four judges in two families of two: 4!/(2! 2!) = 6 labellings, 5 besides the observed
    rng = np.random.default_rng(11)
    jf = {"j1": "A", "j2": "A", "j3": "B", "j4": "B"}
    sf = {"a": "A", "b": "B", "b2": "B"}
    rows = [
        (f"i{i}", x, y, j, 0, 0, float(rng.random()))
        for i in range(5)
        for x, y in (("a", "b"), ("a", "b2"))
        for j in jf
    ]
    observed = _brute(rows, jf, sf)["fps"]
    labels = tuple(jf.values())
    others = sorted(set(itertools.permutations(labels)) - {labels})
    null = [_brute(rows, dict(zip(jf, lab, strict=True)), sf)["fps"] for lab in others]
    fp = family_preference(_frame(rows), judge_family=jf, system_family=sf, n_perm=9, n_placebo=10)
    assert fp.placebo_enumerated
    assert fp.n_placebo == len(others) == 5
    expected = (1 + sum(v >= observed - 1e-12 for v in null)) / (len(others) + 1)
    assert fp.p_placebo == pytest.approx(expected, abs=EXACT)
    # fewer draws than distinct labellings: random relabellings, n_placebo of them
    fp3 = family_preference(_frame(rows), judge_family=jf, system_family=sf, n_perm=9, n_placebo=3)
    assert not fp3.placebo_enumerated
    assert fp3.n_placebo == 3
    fp0 = family_preference(_frame(rows), judge_family=jf, system_family=sf, n_perm=9, n_placebo=0)
    assert fp0.p_placebo is None
    assert fp0.placebo_reason


# --------------------------------------------------------------------------
# composition, abilities, judge_logprob, errors
# --------------------------------------------------------------------------


def test_composition_sensitivity_by_hand() -> None:
    jf = {"ja": "A", "jb": "B", "jb2": "B"}
    sf = {"a": "A", "b": "B"}
    rows = [
        # i1: ja 1, jb 0, jb2 0 -> full 1/3 (y), balanced (1 + 0)/2 = 1/2 (tie)
        ("i1", "a", "b", "ja", 0, 0, 1.0), ("i1", "a", "b", "jb", 0, 0, 0.0),
        ("i1", "a", "b", "jb2", 0, 0, 0.0),
        # i2: ja 1, jb 1, jb2 0 -> full 2/3 (x), balanced (1 + 1/2)/2 (x)
        ("i2", "a", "b", "ja", 0, 0, 1.0), ("i2", "a", "b", "jb", 0, 0, 1.0),
        ("i2", "a", "b", "jb2", 0, 0, 0.0),
        # i3: ja 0 (two replicates 0, 0), jb 0.5, jb2 1 -> full 0.5 (tie), balanced 0.375 (y)
        ("i3", "a", "b", "ja", 0, 0, 0.0), ("i3", "a", "b", "ja", 0, 1, 0.0),
        ("i3", "a", "b", "jb", 0, 0, 0.5), ("i3", "a", "b", "jb2", 0, 0, 1.0),
    ]  # fmt: skip
    fp = family_preference(_frame(rows), judge_family=jf, system_family=sf, n_perm=9)
    comp = {(r["reference"], r["panel"]): r for r in fp.composition.iter_rows(named=True)}
    # outcomes: full (y, x, tie), balanced (tie, x, y), single:A (x, x, y), single:B (y, tie, x)
    assert comp["full", "balanced"]["n_changed"] == 2
    assert comp["full", "balanced"]["share_changed"] == pytest.approx(2 / 3)
    assert comp["balanced", "single:A"]["n_changed"] == 1
    assert comp["balanced", "single:B"]["n_changed"] == 3
    assert comp["full", "single:A"]["n_changed"] == 2
    # without A = B alone, without B = A alone
    assert comp["balanced", "without:A"]["n_changed"] == 3
    assert comp["balanced", "without:B"]["n_changed"] == 1
    # same-family judges: both A and B share a candidate's family in every pair: 6 comparisons
    assert comp["balanced", "same_family_judge"]["n_compared"] == 6
    assert comp["balanced", "same_family_judge"]["n_changed"] == 4


def test_ability_correlations() -> None:
    rows, jf, sf = _random_rows(5)
    abilities = {"s0": 1.0, "s1": 0.0, "s2": -0.4, "s3": 0.3, "s4": 0.9, "s5": -1.0}
    fp = family_preference(_frame(rows), judge_family=jf, system_family=sf, abilities=abilities,
                           n_perm=9)  # fmt: skip
    ref = _brute(rows, jf, sf)
    fam_ability = {"A": 0.5, "B": -0.4, "C": 0.6}
    fams = ["A", "B", "C"]
    a = [fam_ability[f] for f in fams]
    r_naive = np.corrcoef(a, [ref["naive"][f] for f in fams])[0, 1]  # type: ignore[index]
    r_corr = np.corrcoef(a, [ref["corrected"][f] for f in fams])[0, 1]  # type: ignore[index]
    assert fp.naive_ability_r == pytest.approx(r_naive, abs=1e-9)
    assert fp.corrected_ability_r == pytest.approx(r_corr, abs=1e-9)
    assert _per_family(fp.per_family, "ability") == pytest.approx(fam_ability)
    by_family = family_preference(_frame(rows), judge_family=jf, system_family=sf,
                                  abilities=fam_ability, n_perm=9)  # fmt: skip
    assert by_family.naive_ability_r == pytest.approx(r_naive, abs=1e-9)
    none = family_preference(_frame(rows), judge_family=jf, system_family=sf, n_perm=9)
    assert none.naive_ability_r is None
    assert none.ability_reason == "no abilities given"
    with pytest.raises(ConfigError, match="abilities"):
        family_preference(_frame(rows), judge_family=jf, system_family=sf,
                          abilities={"nobody": 1.0}, n_perm=9)  # fmt: skip


def test_judge_logprob_association() -> None:
    rng = np.random.default_rng(2)
    jf = {"ja": "A", "jb": "B"}
    sf = {"a": "A", "b": "B"}
    n = 200
    sys_a = rng.choice(["a", "b"], n)
    judge = rng.choice(["ja", "jb"], n)
    lp = rng.normal(-1.0, 0.5, n)
    score_a = (lp + rng.normal(0, 0.5, n) > -1.0).astype(float)
    g = pl.DataFrame(
        {
            "item_id": [f"i{k}" for k in range(n)],
            "system_a": sys_a,
            "system_b": np.where(sys_a == "a", "b", "a"),
            "judge_id": judge,
            "generation": 0,
            "replicate": 0,
            "verdict": np.where(score_a == 1.0, "A", "B"),
            "score_a": score_a,
            "order_known": True,
            "judge_logprob": lp,
        }
    )
    fp = family_preference(reconcile(g), judge_family=jf,
                           system_family=sf, n_perm=9, games=g)  # fmt: skip
    assert fp.logprob is not None
    assert fp.logprob.n_games == n
    assert fp.logprob.r == pytest.approx(np.corrcoef(lp, score_a)[0, 1], abs=1e-12)
    same = np.asarray([jf[j] == sf[s] for j, s in zip(judge, sys_a, strict=True)])
    assert fp.logprob.mean_same_family == pytest.approx(lp[same].mean(), abs=1e-12)
    assert fp.logprob.mean_cross_family == pytest.approx(lp[~same].mean(), abs=1e-12)
    without = family_preference(reconcile(g), judge_family=jf,
                                system_family=sf, n_perm=9,
                                games=g.with_columns(judge_logprob=None))  # fmt: skip
    assert without.logprob is None
    assert without.logprob_reason
    assert family_preference(_frame(HAND), judge_family=HAND_JF, system_family=HAND_SF,
                             n_perm=9).logprob_reason == "no games given"  # fmt: skip


def test_errors() -> None:
    one = [r for r in HAND if r[3] == "jA"]
    with pytest.raises(NotApplicableError, match="2 judge families"):
        family_preference(_frame(one), judge_family=HAND_JF, system_family=HAND_SF)
    with pytest.raises(NotApplicableError, match="no outcome"):
        family_preference(_frame(HAND), judge_family={}, system_family=HAND_SF)
    with pytest.raises(DesignError, match="score_x"):
        family_preference(_frame(HAND).drop("score_x"), judge_family=HAND_JF,
                          system_family=HAND_SF)  # fmt: skip
    with pytest.raises(ConfigError, match="n_perm"):
        family_preference(_frame(HAND), judge_family=HAND_JF, system_family=HAND_SF, n_perm=0)


# --------------------------------------------------------------------------
# simulation with known truth
# --------------------------------------------------------------------------


def _sig(x: np.ndarray) -> np.ndarray:
    return 1.0 / (1.0 + np.exp(-x))


def _sim(**kw: object) -> tuple[object, pl.DataFrame, dict[str, str], dict[str, str]]:
    base: dict[str, object] = {
        "n_systems": 4, "configs_per_model": 1, "n_judges": 4, "pairwise_pairs": None,
        "n_generations": 1, "n_replicates": 1, "weighted_fraction": 0.0,
    }  # fmt: skip
    dump = simulate_dump(SimulationParams(**{**base, **kw}))  # type: ignore[arg-type]
    jf = dict(zip(dump.judges["judge_id"], dump.judges["family"], strict=True))
    sf = dict(zip(dump.systems["system_id"], dump.systems["family"], strict=True))
    return dump, reconcile(games(dump.pairwise)), jf, sf


def _truth_outcomes(dump: object, jf: dict[str, str], sf: dict[str, str]) -> list[dict[str, float]]:
    """Exact mean and variance of each (pair, judge) outcome's score_x, from the truth's parameters."""
    t = dump.truth  # type: ignore[attr-defined]
    pw = t["pairwise"]
    tau = pw["tie_threshold"]
    out = []
    for x, y in itertools.combinations(sorted(sf), 2):
        for j in sorted(jf):
            d, phi, q = pw["position_bias"][j], pw["family_lift_by_judge"][j], pw["position_following"][j]
            fam = float(jf[j] == sf[x]) - float(jf[j] == sf[y])
            res = []
            for eta in (pw["theta"][x] - pw["theta"][y] + d + phi * fam,  # x shown first
                        pw["theta"][y] - pw["theta"][x] + d - phi * fam):  # y shown first
                p_first = q + (1 - q) * _sig(np.asarray(eta - tau))
                p_second = (1 - q) * (1 - _sig(np.asarray(eta + tau)))
                res.append((float(p_first), float(p_second)))
            (x1, y1), (y2, x2) = res  # order 1: x first; order 2: y first
            p_x, p_y = x1 * x2, y1 * y2
            mean = p_x + 0.5 * (1 - p_x - p_y)
            var = p_x + 0.25 * (1 - p_x - p_y) - mean**2
            out.append({"x": x, "y": y, "j": j, "mean": mean, "var": var})
    return out


def _linear_truth(
    outcomes: list[dict[str, float]], n_items: int, jf: dict[str, str], sf: dict[str, str],
    coef: dict[tuple[str, str], float],
) -> tuple[float, float]:  # fmt: skip
    """Expectation and SE of sum_cells coef * S[h, f] under the exact outcome distributions."""
    count: dict[tuple[str, str], int] = defaultdict(int)
    for o in outcomes:
        if sf[o["x"]] != sf[o["y"]]:
            count[jf[o["j"]], sf[o["x"]]] += n_items
            count[jf[o["j"]], sf[o["y"]]] += n_items
    var = 0.0
    cells: dict[tuple[str, str], float] = defaultdict(float)
    for o in outcomes:
        h, fx, fy = jf[o["j"]], sf[o["x"]], sf[o["y"]]
        if fx == fy:
            continue
        cells[h, fx] += n_items * o["mean"]
        cells[h, fy] += n_items * (1 - o["mean"])
        w = coef.get((h, fx), 0.0) / count[h, fx] - coef.get((h, fy), 0.0) / count[h, fy]
        var += n_items * w * w * o["var"]
    mean = sum(c * cells[k] / count[k] for k, c in coef.items())
    return mean, math.sqrt(var)


def _corrected_coef(f: str, fams: list[str]) -> dict[tuple[str, str], float]:
    others = [h for h in fams if h != f]
    return {(f, f): 1.0, **{(h, f): -1.0 / len(others) for h in others}}


def _naive_coef(f: str, fams: list[str]) -> dict[tuple[str, str], float]:
    others = [g for g in fams if g != f]
    return {(f, f): 1.0, **{(f, g): -1.0 / len(others) for g in others}}


def test_simulation_corrected_unbiased_naive_confounded() -> None:
    # no family preference, equal position bias: every judge is the same instrument, the
    # true lift is 0 in every family; families differ in ability (sigma_s = 1)
    n_items = 300
    dump, out, jf, sf = _sim(seed=21, n_items=n_items, sigma_s=1.0, family_preference=0.0,
                             sigma_position=0.0)  # fmt: skip
    theta = dump.truth["pairwise"]["theta"]  # type: ignore[attr-defined]
    fp = family_preference(out, judge_family=jf, system_family=sf, abilities=theta, n_perm=200,
                           n_placebo=0)  # fmt: skip
    fams = list(fp.families)
    assert len(fams) == 4
    truth = _truth_outcomes(dump, jf, sf)
    naive, corrected = _per_family(fp.per_family, "naive"), _per_family(fp.per_family, "corrected")
    naive_far = 0
    for f in fams:
        c_mean, c_se = _linear_truth(truth, n_items, jf, sf, _corrected_coef(f, fams))
        n_mean, n_se = _linear_truth(truth, n_items, jf, sf, _naive_coef(f, fams))
        assert c_mean == pytest.approx(0.0, abs=1e-12)  # identical judges: no lift
        assert abs(corrected[f] - c_mean) < Z_TOL * c_se
        assert abs(naive[f] - n_mean) < Z_TOL * n_se  # naive estimates its own target...
        naive_far += abs(n_mean) > 2 * Z_TOL * n_se  # ...which is not the lift
    assert naive_far >= 1  # at least the strongest or weakest family, for any draw of abilities
    assert fp.naive_ability_r is not None
    assert fp.naive_ability_r > 0.9  # paper section 4.1: r = 0.95


def test_simulation_recovers_family_lifts() -> None:
    n_items = 300
    fams = ["anthropic-like", "google-like", "meta-like", "openai-like"]
    lifts = {"openai-like": 1.0, "anthropic-like": 0.5, "google-like": 0.0, "meta-like": 0.25}
    dump, out, jf, sf = _sim(seed=5, n_items=n_items, sigma_s=0.6, family_lifts=lifts,
                             sigma_position=0.2)  # fmt: skip
    t = dump.truth["pairwise"]  # type: ignore[attr-defined]
    assert t["family_lifts"] == lifts
    truth = _truth_outcomes(dump, jf, sf)
    # the truth's exact support matrix agrees with the test's own computation
    for cell in t["family_support"]["cells"]:
        coef = {(cell["judge_family"], cell["candidate_family"]): 1.0}
        assert cell["support"] == pytest.approx(_linear_truth(truth, n_items, jf, sf, coef)[0],
                                                abs=1e-12)  # fmt: skip
    fp = family_preference(out, judge_family=jf, system_family=sf, n_perm=200, n_placebo=0)
    corrected = _per_family(fp.per_family, "corrected")
    expected = {}
    for f in fams:
        mean, se = _linear_truth(truth, n_items, jf, sf, _corrected_coef(f, fams))
        expected[f] = mean
        assert abs(corrected[f] - mean) < Z_TOL * se
    # larger logit lifts give larger support lifts (the exact truth, then the estimates' order
    # for the clearly separated families)
    assert expected["openai-like"] > expected["anthropic-like"] > expected["google-like"]
    assert corrected["openai-like"] > corrected["google-like"]
    cps = _per_family(fp.per_family, "corrected_p")
    assert cps["openai-like"] < 0.01


def test_simulation_position_following() -> None:
    dump, out, jf, sf = _sim(seed=8, n_items=100, position_following={"judge-a": 1.0,
                             "judge-b": 0.5})  # fmt: skip
    t = dump.truth["pairwise"]  # type: ignore[attr-defined]
    assert t["position_following"] == {"judge-a": 1.0, "judge-b": 0.5, "judge-c": 0.0,
                                       "judge-d": 0.0}  # fmt: skip
    pw = dump.pairwise  # type: ignore[attr-defined]
    assert (pw.filter(pl.col("judge_id") == "judge-a")["winner"] == "A").all()
    # a pure position follower's counterbalanced outcomes are all ties (paper section 8)
    assert (out.filter(pl.col("judge_id") == "judge-a")["score_x"] == 0.5).all()
    # judge-b: P(A) = q + (1 - q) sigma(eta - tau)
    hard = pw.filter(pl.col("judge_id") == "judge-b")
    tau, d = t["tie_threshold"], t["position_bias"]["judge-b"]
    phi = t["family_lift_by_judge"]["judge-b"]
    fam = (hard["system_a"].replace_strict(sf) == jf["judge-b"]).cast(float).to_numpy() - (
        hard["system_b"].replace_strict(sf) == jf["judge-b"]
    ).cast(float).to_numpy()
    eta = (hard["system_a"].replace_strict(t["theta"]).to_numpy()
           - hard["system_b"].replace_strict(t["theta"]).to_numpy() + d + phi * fam)  # fmt: skip
    p_a = 0.5 + 0.5 * _sig(eta - tau)
    share = float((hard["winner"] == "A").mean())
    se = math.sqrt(float(np.sum(p_a * (1 - p_a)))) / hard.height
    assert abs(share - float(p_a.mean())) < Z_TOL * se


def test_permutation_p_values_uniform_under_null() -> None:
    # no family preference and identical judges: judges are exchangeable within (item, pair)
    p_values = []
    for seed in range(150):
        _, out, jf, sf = _sim(seed=seed, n_items=25, family_preference=0.0, sigma_position=0.0,
                              sigma_s=0.5, tie_threshold=0.2)  # fmt: skip
        fp = family_preference(out, judge_family=jf, system_family=sf, n_perm=99, n_placebo=0,
                               seed=seed)  # fmt: skip
        p_values.append(fp.p_permutation)
    ks = sps.kstest(p_values, "uniform")
    assert ks.pvalue > KS_ALPHA, ks
    # and a lift is detected on the same design
    _, out, jf, sf = _sim(seed=1, n_items=25, family_preference=1.5, sigma_position=0.0)
    fp = family_preference(out, judge_family=jf, system_family=sf, n_perm=99, n_placebo=0)
    assert fp.p_permutation <= 0.05


def test_simulator_rejects_unknown_names() -> None:
    with pytest.raises(SimulationError, match="family_lifts"):
        simulate_dump(SimulationParams(n_judges=2, family_lifts={"nobody-like": 1.0}))
    with pytest.raises(SimulationError, match="position_following"):
        simulate_dump(SimulationParams(n_judges=2, position_following={"judge-z": 0.5}))
    with pytest.raises(SimulationError, match="position_following"):
        simulate_dump(SimulationParams(position_following=1.5))
