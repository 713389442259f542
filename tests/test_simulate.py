"""Tests for jurymeter.simulate.

Independent reference: brute force from the model's definitions.  Expected
values are rebuilt with numpy from the JSON-serialised ``truth`` (not from the
simulator's internal arrays) and compared with simple sample statistics of the
emitted records.  Every tolerance is a number of standard errors derived from
the design; the constants below say why each multiple was chosen.
"""

from __future__ import annotations

import doctest
import importlib
import json
import math
import pkgutil
import re

import numpy as np
import orjson
import polars as pl
import pytest

import jurymeter.simulate as sim
from jurymeter.simulate import (
    FAULT_KINDS,
    PAIRWISE_COLUMNS,
    POINTWISE_COLUMNS,
    SimulatedDump,
    SimulationError,
    SimulationParams,
    simulate_dump,
    write_dump,
)

# Z multiple for every "estimate within its standard error" check.  The draws
# are seeded, so each check is deterministic; four standard errors keeps the
# tests robust to a change of seed or of stream layout (two-sided false-alarm
# rate about 6e-5 per check under normality) while staying an order of
# magnitude tighter than the effects being detected.
Z_TOL = 4.0

# Recovery of the judge main effect from raw judge means: besides the
# replicate residual, the judge mean carries the system x judge, item x judge,
# system x item x judge and generation x judge interactions averaged over the
# design, so its standard error is
#   sqrt((1 - 1/J) * (s2_sj/S + s2_ij/I + s2_sij/(S I) + s2_gj/(S I G) + s2_e/(S I G R))).
# JUDGE_OFFSET_Z standard errors of that quantity is the tolerance.
JUDGE_OFFSET_Z = Z_TOL

# Small design used for the structural tests (fast: a few thousand records).
SMALL = SimulationParams(
    seed=11,
    n_systems=5,
    n_items=8,
    n_judges=3,
    n_generations=2,
    n_replicates=2,
    batch_size=7,
    pairwise_pairs=6,
)

# Larger continuous draw with the exact linear model (no rounding, no carry-over,
# no self-preference, no length bias) for recovery of the judge offsets.
RECOVERY = SimulationParams(
    seed=2026,
    n_systems=40,
    n_items=200,
    n_judges=6,
    n_generations=2,
    n_replicates=2,
    round_scores=False,
    carry_over=0.0,
    self_preference=0.0,
    pairwise_pairs=0,
)

TIMESTAMP = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}Z$")
POINT_KEY = ("item_set", "item_id", "system_id", "judge_id", "generation", "replicate")
PAIR_KEY = (
    "item_set",
    "item_id",
    "system_a",
    "system_b",
    "judge_id",
    "generation",
    "replicate",
)


@pytest.fixture(scope="module")
def small() -> SimulatedDump:
    return simulate_dump(SMALL)


@pytest.fixture(scope="module")
def default_dump() -> SimulatedDump:
    return simulate_dump()


# --------------------------------------------------------------------------
# reference computations from truth (brute force, numpy only)
# --------------------------------------------------------------------------


def _codes(dump: SimulatedDump, frame: pl.DataFrame, column: str, registry: str) -> np.ndarray:
    ids = (dump.systems if registry == "system" else dump.judges)[f"{registry}_id"].to_list()
    lookup = {v: k for k, v in enumerate(ids)}
    return np.asarray([lookup[v] for v in frame[column].to_list()], dtype=np.int64)


def _item_codes(frame: pl.DataFrame) -> np.ndarray:
    return frame["item_id"].str.slice(5).cast(pl.Int64).to_numpy()


def _expected_pointwise(dump: SimulatedDump) -> np.ndarray:
    """Mean structure of every pointwise record (all terms but the residual)."""
    t = dump.truth
    pw = dump.pointwise
    s = _codes(dump, pw, "system_id", "system")
    j = _codes(dump, pw, "judge_id", "judge")
    i = _item_codes(pw)
    g = pw["generation"].to_numpy()
    nu_s = np.asarray([row["nu_s"] for row in t["systems"]])
    nu_i = np.asarray([row["nu_i"] for row in t["items"]])
    nu_j = np.asarray([row["nu_j"] for row in t["judges"]])
    e = {k: np.asarray(v) for k, v in t["effects"].items() if k != "axes"}
    p = t["params"]
    return (
        t["grand_mean"]
        + nu_s[s]
        + nu_i[i]
        + nu_j[j]
        + e["nu_si"][s, i]
        + e["nu_sj"][s, j]
        + e["nu_ij"][i, j]
        + e["nu_sij"][s, i, j]
        + e["nu_g"][s, i, g]
        + e["nu_gj"][s, i, g, j]
        + e["self_preference"][s, j]
        + p["length_bias"]
        * (np.log(pw["response_length"].to_numpy()) - math.log(p["length_median"]))
    )


def _previous_in_batch(frame: pl.DataFrame) -> tuple[np.ndarray, np.ndarray]:
    """(current, previous) scores for every call that has a predecessor in its batch."""
    # Rows are written in run order; check that before relying on it.
    with_prev = frame.with_columns(
        pl.col("score").shift(1).over("batch_id").alias("prev"),
        pl.col("batch_position").shift(1).over("batch_id").alias("prev_pos"),
    ).filter(pl.col("prev").is_not_null())
    assert (with_prev["batch_position"] - with_prev["prev_pos"]).eq(1).all()
    return with_prev["score"].to_numpy(), with_prev["prev"].to_numpy()


def _ols_slope(y: np.ndarray, x: np.ndarray) -> tuple[float, float]:
    """OLS slope of y on x with intercept, and its classical standard error."""
    xc = x - x.mean()
    slope = float(np.dot(xc, y - y.mean()) / np.dot(xc, xc))
    resid = (y - y.mean()) - slope * xc
    se = math.sqrt(float(np.dot(resid, resid)) / (len(y) - 2) / float(np.dot(xc, xc)))
    return slope, se


def _sigmoid(x: np.ndarray) -> np.ndarray:
    return 1.0 / (1.0 + np.exp(-x))


def _pairwise_eta(dump: SimulatedDump, frame: pl.DataFrame) -> np.ndarray:
    t = dump.truth
    a = _codes(dump, frame, "system_a", "system")
    b = _codes(dump, frame, "system_b", "system")
    j = _codes(dump, frame, "judge_id", "judge")
    i = _item_codes(frame)
    theta = np.asarray([t["pairwise"]["theta"][sid] for sid in dump.systems["system_id"]])
    delta = np.asarray([t["pairwise"]["position_bias"][jid] for jid in dump.judges["judge_id"]])
    same = (
        dump.systems["family"].to_numpy()[:, None] == dump.judges["family"].to_numpy()[None, :]
    ).astype(float)
    u = np.asarray(t["pairwise"]["u_si"])
    phi = t["pairwise"]["family_preference"]
    return theta[a] - theta[b] + delta[j] + phi * (same[a, j] - same[b, j]) + u[a, i] - u[b, i]


# --------------------------------------------------------------------------
# structure
# --------------------------------------------------------------------------


def test_columns_types_and_values(small: SimulatedDump) -> None:
    pw, pr = small.pointwise, small.pairwise
    assert tuple(pw.columns) == POINTWISE_COLUMNS
    assert tuple(pr.columns) == PAIRWISE_COLUMNS
    assert pw.schema["score"] == pl.Float64
    for col in ("generation", "replicate", "batch_position", "response_length"):
        assert pw.schema[col] == pl.Int64
    for col in ("generation", "replicate", "length_a", "length_b", "batch_position"):
        assert pr.schema[col] == pl.Int64
    assert pr.schema["winner"] == pl.String
    assert pr.schema["preference"] == pl.Float64

    assert pw["item_set"].unique().to_list() == ["sim-chat"]
    assert pr["item_set"].unique().to_list() == ["sim-chat"]
    assert pw["item_id"].str.contains(r"^item-\d{4}$").all()
    assert pw["system_id"].str.contains(r"^sys-\d{2}$").all()
    assert pw["judge_id"].str.contains(r"^judge-[a-z]+$").all()
    assert all(TIMESTAMP.match(ts) for ts in pw["timestamp"].to_list())

    scores = pw["score"].to_numpy()
    assert np.all(scores == np.rint(scores))
    assert scores.min() >= SMALL.scale[0]
    assert scores.max() <= SMALL.scale[1]
    assert pw["response_length"].min() >= 1
    assert pw["generation"].is_between(0, SMALL.n_generations - 1).all()
    assert pw["replicate"].is_between(0, SMALL.n_replicates - 1).all()

    # winner XOR preference; preference is a probability
    assert (pr["winner"].is_null() ^ pr["preference"].is_null()).all()
    assert set(pr["winner"].drop_nulls().unique().to_list()) <= {"A", "B", "tie"}
    assert pr["preference"].drop_nulls().is_between(0.0, 1.0).all()
    assert (pr["system_a"] != pr["system_b"]).all()
    expected_weighted = math.floor(SMALL.weighted_fraction * pr.height + 0.5)
    assert pr["preference"].is_not_null().sum() == expected_weighted


def test_batches_are_consecutive_runs(small: SimulatedDump) -> None:
    for frame in (small.pointwise, small.pairwise):
        per_batch = frame.group_by("batch_id").agg(
            pl.col("batch_position"), pl.col("judge_id").n_unique().alias("judges")
        )
        assert per_batch["judges"].eq(1).all()
        for positions in per_batch["batch_position"].to_list():
            assert positions == list(range(len(positions)))
            assert len(positions) <= SMALL.batch_size
    # one run per judge and replicate, in chronological order within a run
    pw = small.pointwise
    assert pw["run_id"].n_unique() == SMALL.n_judges * SMALL.n_replicates
    ordered = pw.group_by("run_id", maintain_order=True).agg(pl.col("timestamp"))
    for stamps in ordered["timestamp"].to_list():
        assert stamps == sorted(stamps)


def test_keys_unique(default_dump: SimulatedDump) -> None:
    assert default_dump.pointwise.select(POINT_KEY).is_duplicated().sum() == 0
    assert default_dump.pairwise.select(PAIR_KEY).is_duplicated().sum() == 0


@pytest.mark.parametrize(
    ("n_s", "n_i", "n_j", "n_g", "n_r", "pairs"),
    [(12, 60, 5, 2, 2, 30), (4, 3, 2, 1, 1, None), (6, 5, 3, 3, 2, 0), (3, 7, 1, 1, 3, 2)],
)
def test_record_counts_match_design(
    n_s: int, n_i: int, n_j: int, n_g: int, n_r: int, pairs: int | None
) -> None:
    params = SimulationParams(
        n_systems=n_s,
        n_items=n_i,
        n_judges=n_j,
        n_generations=n_g,
        n_replicates=n_r,
        pairwise_pairs=pairs,
    )
    dump = simulate_dump(params)
    k = n_s * (n_s - 1) // 2 if pairs is None else pairs
    assert dump.pointwise.height == n_s * n_i * n_j * n_g * n_r
    assert dump.pairwise.height == 2 * k * n_i * n_j * n_g * n_r
    assert dump.systems.height == n_s
    assert dump.judges.height == n_j
    assert dump.truth["design"]["records"]["pointwise"] == dump.pointwise.height
    assert dump.truth["design"]["records"]["pairwise"] == dump.pairwise.height
    # full crossing: every (system, item, judge, generation, replicate) once
    assert dump.pointwise.select(POINT_KEY).n_unique() == dump.pointwise.height
    # every judged pair appears in both presentation orders, equally often
    ordered = dump.pairwise.group_by("system_a", "system_b").len()
    assert ordered.height == 2 * k
    flipped = ordered.rename({"system_a": "system_b", "system_b": "system_a"})
    joined = ordered.join(flipped, on=["system_a", "system_b"], suffix="_rev")
    assert joined.height == 2 * k
    assert (joined["len"] == joined["len_rev"]).all()


def test_default_size_is_a_realistic_demo(default_dump: SimulatedDump) -> None:
    total = default_dump.pointwise.height + default_dump.pairwise.height
    assert 50_000 <= total <= 150_000
    ties = default_dump.pairwise["winner"].eq("tie").sum()
    assert 0 < ties < default_dump.pairwise.height / 2


def test_selected_pairs_connect_all_systems() -> None:
    params = SimulationParams(n_systems=9, n_items=2, n_judges=1, pairwise_pairs=8)
    pairs = simulate_dump(params).truth["pairwise"]["pairs"]
    assert len(pairs) == 8
    parent = {f"sys-{k:02d}": f"sys-{k:02d}" for k in range(9)}

    def root(x: str) -> str:
        while parent[x] != x:
            x = parent[x]
        return x

    for a, b in pairs:
        parent[root(a)] = root(b)
    assert len({root(x) for x in parent}) == 1


def test_registries_nest_configs_and_share_families(default_dump: SimulatedDump) -> None:
    systems, judges = default_dump.systems, default_dump.judges
    assert systems.columns == ["system_id", "model", "config", "family"]
    assert judges.columns == ["judge_id", "family", "vendor", "tier"]
    per_model = systems.group_by("model").agg(
        pl.col("config").n_unique(), pl.col("family").n_unique().alias("families")
    )
    assert (per_model["config"] >= 2).all()  # c:m nested design is possible
    assert per_model["families"].eq(1).all()
    assert systems["family"].n_unique() >= 2
    shared = set(systems["family"]) & set(judges["family"])
    assert shared  # self / family preference has something to act on
    assert judges["judge_id"].to_list() == [f"judge-{c}" for c in "abcde"]


# --------------------------------------------------------------------------
# determinism and truth
# --------------------------------------------------------------------------


def test_same_seed_same_frames_and_bytes(tmp_path, small: SimulatedDump) -> None:
    again = simulate_dump(SMALL)
    for name in ("pointwise", "pairwise", "systems", "judges"):
        assert getattr(small, name).equals(getattr(again, name))
    assert orjson.dumps(small.truth) == orjson.dumps(again.truth)
    first = write_dump(small, tmp_path / "one", faults=12, seed=3)
    second = write_dump(again, tmp_path / "two", faults=12, seed=3)
    assert set(first) == {"pointwise", "pairwise", "systems", "judges", "truth"}
    for name, path in first.items():
        assert path.read_bytes() == second[name].read_bytes(), name
    other = simulate_dump(SimulationParams(**{**_fields(SMALL), "seed": 12}))
    assert not other.pointwise["score"].equals(small.pointwise["score"])


def _fields(params: SimulationParams) -> dict:
    return {name: getattr(params, name) for name in SimulationParams.__dataclass_fields__}


def test_pointwise_draws_do_not_depend_on_pairwise_design() -> None:
    base = simulate_dump(SMALL)
    changed = simulate_dump(
        SimulationParams(**{**_fields(SMALL), "pairwise_pairs": 2, "position_bias": 1.0})
    )
    assert base.pointwise.equals(changed.pointwise)


def test_truth_is_json_and_complete(small: SimulatedDump) -> None:
    truth = orjson.loads(orjson.dumps(small.truth))
    assert json.loads(json.dumps(truth)) == truth
    assert truth["params"]["scale"] == list(SMALL.scale)
    assert truth["params"]["seed"] == SMALL.seed
    pop = truth["variance_components"]["population"]
    assert pop["sigma2_sj"] == pytest.approx(SMALL.sigma_sj**2)
    assert pop["sigma2_m"] + pop["sigma2_cm"] == pytest.approx(pop["sigma2_s"])
    assert len(truth["systems"]) == SMALL.n_systems
    assert len(truth["items"]) == SMALL.n_items
    assert len(truth["judges"]) == SMALL.n_judges
    gamma = np.asarray([row["gamma"] for row in truth["judges"]])
    nu_j = np.asarray([row["nu_j"] for row in truth["judges"]])
    np.testing.assert_allclose(gamma, nu_j - nu_j.mean())
    theta = np.asarray([row["theta"] for row in truth["systems"]])
    nu_s = np.asarray([row["nu_s"] for row in truth["systems"]])
    np.testing.assert_allclose(theta, SMALL.theta_per_point * nu_s)
    assert np.asarray(truth["effects"]["nu_gj"]).shape == (
        SMALL.n_systems,
        SMALL.n_items,
        SMALL.n_generations,
        SMALL.n_judges,
    )
    assert truth["faults"]["n_faults"] == 0


def test_continuous_scores_follow_the_linear_model_exactly() -> None:
    params = SimulationParams(**{**_fields(RECOVERY), "n_systems": 12, "n_items": 60})
    dump = simulate_dump(params)
    resid = dump.pointwise["score"].to_numpy() - _expected_pointwise(dump)
    n = resid.size
    se_mean = params.sigma_e / math.sqrt(n)
    se_var = params.sigma_e**2 * math.sqrt(2.0 / (n - 1))
    assert abs(resid.mean()) < Z_TOL * se_mean
    assert abs(resid.var(ddof=1) - params.sigma_e**2) < Z_TOL * se_var


def test_judge_offsets_recovered_by_judge_means() -> None:
    p = RECOVERY
    dump = simulate_dump(p)
    pw = dump.pointwise
    grand = pw["score"].mean()
    means = pw.group_by("judge_id").agg(pl.col("score").mean()).sort("judge_id")
    estimate = means["score"].to_numpy() - grand
    gamma = np.asarray([row["gamma"] for row in dump.truth["judges"]])

    s, i, j, g, r = p.n_systems, p.n_items, p.n_judges, p.n_generations, p.n_replicates
    se = math.sqrt(
        (1 - 1 / j)
        * (
            p.sigma_sj**2 / s
            + p.sigma_ij**2 / i
            + p.sigma_sij**2 / (s * i)
            + p.sigma_gj**2 / (s * i * g)
            + p.sigma_e**2 / (s * i * g * r)
        )
    )
    np.testing.assert_allclose(estimate, gamma, atol=JUDGE_OFFSET_Z * se)
    # the offsets are large relative to that tolerance, so the check has teeth
    assert np.abs(gamma).max() > 2 * JUDGE_OFFSET_Z * se

    # With the drawn interactions taken from truth, only the residual remains.
    expected = _expected_pointwise(dump)
    codes = _codes(dump, pw, "judge_id", "judge")
    exact = np.bincount(codes, expected, j) / np.bincount(codes, minlength=j) - expected.mean()
    se_exact = p.sigma_e * math.sqrt((1 - 1 / j) / (s * i * g * r))
    np.testing.assert_allclose(estimate, exact, atol=Z_TOL * se_exact)


# --------------------------------------------------------------------------
# pairwise
# --------------------------------------------------------------------------


def _first_shown_share(dump: SimulatedDump) -> tuple[float, float, float]:
    """Observed share of slot-A wins among decisive verdicts, its model
    expectation from truth, and the binomial standard error."""
    hard = dump.pairwise.filter(pl.col("winner").is_in(["A", "B"]))
    share = float(hard["winner"].eq("A").mean())
    tau = dump.truth["pairwise"]["tie_threshold"]
    eta = _pairwise_eta(dump, dump.pairwise.filter(pl.col("winner").is_not_null()))
    p_a = _sigmoid(eta - tau)
    p_b = 1.0 - _sigmoid(eta + tau)
    expected = float(p_a.sum() / (p_a + p_b).sum())
    se = math.sqrt(share * (1 - share) / hard.height)
    return share, expected, se


def test_position_bias_favours_first_shown() -> None:
    base = {"seed": 5, "sigma_position": 0.0, "weighted_fraction": 0.0}
    biased = simulate_dump(SimulationParams(**base, position_bias=0.35))
    share, expected, se = _first_shown_share(biased)
    assert share > 0.5 + Z_TOL * se
    assert abs(share - expected) < Z_TOL * se

    neutral = simulate_dump(SimulationParams(**base, position_bias=0.0))
    share0, expected0, se0 = _first_shown_share(neutral)
    assert expected0 == pytest.approx(0.5)  # both orders cancel quality and family terms
    assert abs(share0 - 0.5) < Z_TOL * se0


def _family_stats(dump: SimulatedDump) -> tuple[float, float]:
    """Share of wins of the same-family system, and the candidate-family-fixed
    lift of Awuni et al. (same-family judges' support minus other judges')."""
    hard = dump.pairwise.filter(pl.col("winner").is_not_null())
    fam_s = dict(zip(dump.systems["system_id"], dump.systems["family"], strict=True))
    fam_j = dict(zip(dump.judges["judge_id"], dump.judges["family"], strict=True))
    tagged = hard.with_columns(
        pl.col("system_a").replace_strict(fam_s).alias("fam_a"),
        pl.col("system_b").replace_strict(fam_s).alias("fam_b"),
        pl.col("judge_id").replace_strict(fam_j).alias("fam_j"),
    )
    one_side = tagged.filter(
        (pl.col("fam_a") == pl.col("fam_j")) != (pl.col("fam_b") == pl.col("fam_j"))
    )
    own_won = one_side.select(
        pl.when(pl.col("fam_a") == pl.col("fam_j"))
        .then(pl.col("winner") == "A")
        .otherwise(pl.col("winner") == "B")
        .mean()
    ).item()
    # support of each candidate: win 1, tie 0.5, loss 0, from either slot
    support = pl.concat(
        [
            tagged.select(
                pl.col("system_a").alias("cand"),
                (pl.col("fam_a") == pl.col("fam_j")).alias("same"),
                pl.col("winner").replace_strict({"A": 1.0, "B": 0.0, "tie": 0.5}).alias("y"),
            ),
            tagged.select(
                pl.col("system_b").alias("cand"),
                (pl.col("fam_b") == pl.col("fam_j")).alias("same"),
                pl.col("winner").replace_strict({"A": 0.0, "B": 1.0, "tie": 0.5}).alias("y"),
            ),
        ]
    )
    by = (
        support.group_by("cand", "same")
        .agg(pl.col("y").mean())
        .pivot(on="same", index="cand", values="y")
    )
    by = by.drop_nulls()
    lift = float((by["true"] - by["false"]).mean())
    return float(own_won), lift


def test_family_preference_sign() -> None:
    base = {"seed": 9, "position_bias": 0.35, "sigma_position": 0.2, "weighted_fraction": 0.0}
    stats = {
        phi: _family_stats(simulate_dump(SimulationParams(**base, family_preference=phi)))
        for phi in (-0.8, 0.0, 0.8)
    }
    # same seed -> same latent noise, so raising phi can only move verdicts
    # towards the judge's own family
    assert stats[-0.8][0] < stats[0.0][0] < stats[0.8][0]
    assert stats[0.8][1] > 0.0
    assert stats[-0.8][1] < 0.0
    assert abs(stats[0.8][1]) > abs(stats[0.0][1])


def test_weighted_preference_mean_matches_expected_score() -> None:
    dump = simulate_dump(SimulationParams(seed=4, weighted_fraction=0.5))
    weighted = dump.pairwise.filter(pl.col("preference").is_not_null())
    tau = dump.truth["pairwise"]["tie_threshold"]
    eta = _pairwise_eta(dump, weighted)
    m = 0.5 * (_sigmoid(eta - tau) + _sigmoid(eta + tau))
    pref = weighted["preference"].to_numpy()
    k = dump.truth["pairwise"]["preference_concentration"]
    se = math.sqrt(float(np.mean(m * (1 - m) / (k + 1))) / pref.size)  # Beta variance
    assert abs(pref.mean() - m.mean()) < Z_TOL * se


# --------------------------------------------------------------------------
# carry-over
# --------------------------------------------------------------------------


@pytest.mark.parametrize("lam", [0.0, 0.3])
def test_carry_over_slope(lam: float) -> None:
    params = SimulationParams(
        seed=7,
        round_scores=False,
        carry_over=lam,
        pairwise_pairs=0,
        self_preference=0.0,
    )
    dump = simulate_dump(params)
    pw = dump.pointwise.with_columns(
        pl.Series("resid", dump.pointwise["score"].to_numpy() - _expected_pointwise(dump))
    )
    # exact: the residual is e_t + lambda * (Y_{t-1} - mu), with e_t independent
    # of the past, so its slope on the previous score is lambda
    resid_prev = pw.with_columns(
        pl.col("resid").alias("cur"), pl.col("score").shift(1).over("batch_id").alias("prev")
    ).filter(pl.col("prev").is_not_null())
    slope, se = _ols_slope(resid_prev["cur"].to_numpy(), resid_prev["prev"].to_numpy())
    assert abs(slope - lam) < Z_TOL * se

    # plain regression of score on previous score within batch (judge-centred)
    centred = dump.pointwise.with_columns(
        (pl.col("score") - pl.col("score").mean().over("judge_id")).alias("score")
    )
    cur, prev = _previous_in_batch(centred)
    raw_slope, raw_se = _ols_slope(cur, prev)
    if lam > 0:
        assert raw_slope > Z_TOL * raw_se
    else:
        # consecutive calls share a system or item only by chance (1/S, 1/I)
        assert abs(raw_slope) < 0.05


def test_rounded_carry_over_stays_on_scale() -> None:
    dump = simulate_dump(SimulationParams(seed=3, carry_over=0.6, pairwise_pairs=0))
    scores = dump.pointwise["score"].to_numpy()
    assert np.all(scores == np.rint(scores))
    assert scores.min() >= 1.0
    assert scores.max() <= 10.0


# --------------------------------------------------------------------------
# faults
# --------------------------------------------------------------------------


def _is_fault(kind: str, line: str, scale: tuple[float, float]) -> bool:
    if kind == "malformed_line":
        try:
            json.loads(line)
        except json.JSONDecodeError:
            return True
        return False
    rec = json.loads(line)  # Python's json accepts the Infinity literal
    if kind == "missing_field":
        return "judge_id" not in rec
    if kind == "wrong_type":
        return isinstance(rec["score"], str)
    if kind == "non_finite_score":
        return isinstance(rec["score"], float) and math.isinf(rec["score"])
    if kind == "score_out_of_scale":
        return isinstance(rec["score"], float) and not scale[0] <= rec["score"] <= scale[1]
    if kind == "unknown_winner":
        return rec["winner"] not in {"A", "B", "tie"}
    if kind == "preference_out_of_range":
        return not 0.0 <= rec["preference"] <= 1.0
    if kind == "same_system":
        return rec["system_a"] == rec["system_b"]
    raise AssertionError(kind)


def _is_clean(line: str, columns: tuple[str, ...], pairwise: bool) -> bool:
    rec = orjson.loads(line)  # strict: rejects Infinity and truncation
    if tuple(rec) != columns or rec["judge_id"] is None:
        return False
    if pairwise:
        return rec["system_a"] != rec["system_b"] and (
            (rec["winner"] in {"A", "B", "tie"} and rec["preference"] is None)
            or (rec["winner"] is None and 0.0 <= rec["preference"] <= 1.0)
        )
    return isinstance(rec["score"], float) and 1.0 <= rec["score"] <= 10.0


def test_fault_bookkeeping(tmp_path, small: SimulatedDump) -> None:
    n_faults = 2 * len(FAULT_KINDS) + 3
    paths = write_dump(small, tmp_path, faults=n_faults, seed=1)
    book = orjson.loads(paths["truth"].read_bytes())["faults"]
    assert book["n_faults"] == n_faults
    assert sum(book["counts"].values()) == n_faults
    assert set(book["counts"]) == set(FAULT_KINDS)
    assert small.truth["faults"]["n_faults"] == 0  # the dump itself is untouched

    clean = {"pointwise.jsonl": small.pointwise.height, "pairwise.jsonl": small.pairwise.height}
    total_lines = 0
    for fname, n_clean in clean.items():
        lines = (tmp_path / fname).read_text().splitlines()
        total_lines += len(lines)
        listed = book["lines"][fname]
        faulty: set[int] = set()
        for kind, numbers in listed.items():
            assert numbers == sorted(numbers)
            faulty.update(numbers)
            if kind == "conflicting_duplicate":
                assert fname == "pointwise.jsonl"
                assert len(numbers) == 2 * book["counts"][kind]
                recs = [orjson.loads(lines[n - 1]) for n in numbers]
                by_key: dict[tuple, list[float]] = {}
                for rec in recs:
                    by_key.setdefault(tuple(rec[k] for k in POINT_KEY), []).append(rec["score"])
                assert len(by_key) == book["counts"][kind]
                assert all(len(v) == 2 and v[0] != v[1] for v in by_key.values())
                assert sum(n <= n_clean for n in numbers) == book["counts"][kind]
            else:
                assert all(n > n_clean for n in numbers)
                for n in numbers:
                    assert _is_fault(kind, lines[n - 1], SMALL.scale), (fname, kind, n)
        # appended lines are exactly the listed ones
        assert {n for n in faulty if n > n_clean} == set(range(n_clean + 1, len(lines) + 1))
        pairwise = fname == "pairwise.jsonl"
        columns = PAIRWISE_COLUMNS if pairwise else POINTWISE_COLUMNS
        for n, line in enumerate(lines[:n_clean], start=1):
            if n not in faulty:
                assert _is_clean(line, columns, pairwise), (fname, n)
    assert total_lines == sum(clean.values()) + n_faults

    # per-kind counts agree with the line lists; shared kinds reach both files
    for kind in FAULT_KINDS:
        n_lines = sum(len(book["lines"][f].get(kind, [])) for f in clean)
        factor = 2 if kind == "conflicting_duplicate" else 1
        assert n_lines == factor * book["counts"][kind]
    for kind in ("malformed_line", "missing_field"):
        assert kind in book["lines"]["pointwise.jsonl"]
        assert kind in book["lines"]["pairwise.jsonl"]


def test_faults_need_the_records_they_corrupt(tmp_path) -> None:
    dump = simulate_dump(SimulationParams(**{**_fields(SMALL), "pairwise_pairs": 0}))
    # the first five kinds all land in pointwise.jsonl
    write_dump(dump, tmp_path / "ok", faults=5)
    with pytest.raises(SimulationError, match=r"pairwise\.jsonl"):
        write_dump(dump, tmp_path / "bad", faults=6)
    with pytest.raises(SimulationError, match="faults"):
        write_dump(dump, tmp_path / "neg", faults=-1)


# --------------------------------------------------------------------------
# validation and docs
# --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("n_systems", 1),
        ("n_items", 0),
        ("seed", -1),
        ("scale", (10.0, 1.0)),
        ("scale", (0.5, 5.0)),
        ("sigma_sj", -0.1),
        ("sigma_e", float("nan")),
        ("carry_over", 1.0),
        ("pairwise_pairs", 1000),
        ("weighted_fraction", 1.5),
        ("tie_threshold", -0.2),
        ("config_share", 2.0),
        ("batch_size", 0),
        ("round_scores", 1),
    ],
)
def test_invalid_params_name_the_field(name: str, value: object) -> None:
    with pytest.raises(SimulationError, match=rf"SimulationParams\.{name}"):
        simulate_dump(SimulationParams(**{name: value}))


def test_params_are_frozen_and_keyword_only() -> None:
    params = SimulationParams()
    with pytest.raises(AttributeError):
        params.seed = 3  # type: ignore[misc]
    with pytest.raises(TypeError):
        SimulationParams(1)  # type: ignore[misc]


def test_docstring_examples() -> None:
    # The package and each of its modules (doctest skips names a module only imports).
    modules = [sim] + [
        importlib.import_module(info.name)
        for info in pkgutil.iter_modules(sim.__path__, prefix=f"{sim.__name__}.")
    ]
    results = [doctest.testmod(module, verbose=False) for module in modules]
    assert sum(r.attempted for r in results) > 0
    assert sum(r.failed for r in results) == 0
