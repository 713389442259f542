"""Bradley-Terry ratings (stats/pairwise/bradley_terry.py) against independent references.

References: choix's ``ilsr_pairwise_dense`` (the MLE on a wins matrix), statsmodels'
GLM Binomial (one row per outcome; ratings, item-clustered sandwich, length control),
plain-Python loops over the rows (the wins matrix), the definition of the Elo scale,
and simulations of :mod:`jurymeter.simulate` with a known population estimand (the BT
fit to the expected win matrix, integrated over the prompt effects by Gauss-Hermite
quadrature) for the coverage of the two bootstraps.
"""

from __future__ import annotations

import math

import choix
import numpy as np
import polars as pl
import pytest
import statsmodels.api as sm

from jurymeter.simulate import SimulationParams, simulate_dump
from jurymeter.stats.pairwise.bradley_terry import (
    ComparisonGraphError,
    _batched_newton,
    bradley_terry,
    bt_fit,
    bt_wins,
)
from jurymeter.stats.pairwise.games import games, reconcile

# choix's ILSR is a fixed-point iteration: asked for an L1 step of 1e-14 it is exact to ~1e-12.
CHOIX_TOL = 1e-10
# statsmodels' IRLS run to a deviance change of 1e-14; both sides then sit at the MLE.
GLM_TOL = 1e-8
# Sandwich standard errors: both at the same MLE; relative.
SANDWICH_RTOL = 1e-8

CLEAN_BT = {
    "position_bias": 0.0,
    "sigma_position": 0.0,
    "family_preference": 0.0,
    "tie_threshold": 0.0,
}


def _outcomes(**kw: object) -> tuple[pl.DataFrame, pl.DataFrame, dict[str, object]]:
    params = SimulationParams(**{**CLEAN_BT, **kw})  # type: ignore[arg-type]
    dump = simulate_dump(params)
    g = games(dump.pairwise)
    return reconcile(g), g, dump.truth


def _choix(wins: np.ndarray) -> np.ndarray:
    theta = choix.ilsr_pairwise_dense(wins, alpha=0.0, tol=1e-14, max_iter=100_000)
    return np.asarray(theta - theta.mean())


def _design(outcomes: pl.DataFrame, systems: tuple[str, ...]) -> np.ndarray:
    code = {s: k for k, s in enumerate(systems)}
    x = np.zeros((outcomes.height, len(systems)))
    rows = np.arange(outcomes.height)
    x[rows, [code[s] for s in outcomes["system_x"]]] = 1.0
    x[rows, [code[s] for s in outcomes["system_y"]]] = -1.0
    return x


def _sum_to_zero(n: int) -> np.ndarray:
    """Map reference-coded parameters (system 0 at 0) to sum-to-zero ratings."""
    embed = np.vstack([np.zeros((1, n - 1)), np.eye(n - 1)])
    return (np.eye(n) - np.full((n, n), 1.0 / n)) @ embed


@pytest.fixture(scope="module")
def sim() -> tuple[pl.DataFrame, pl.DataFrame, dict[str, object]]:
    return _outcomes(
        seed=3, n_systems=7, n_items=60, n_judges=3, n_generations=1, n_replicates=1,
        pairwise_pairs=14, sigma_pair_si=0.8, tie_threshold=0.4,
    )


def test_wins_matrix_is_the_row_sum(sim: tuple[pl.DataFrame, pl.DataFrame, dict]) -> None:
    outcomes = sim[0]
    systems, wins = bt_wins(outcomes)
    index = {s: k for k, s in enumerate(systems)}
    brute = np.zeros_like(wins)
    for row in outcomes.iter_rows(named=True):
        x, y = index[row["system_x"]], index[row["system_y"]]
        brute[x, y] += row["score_x"]
        brute[y, x] += 1.0 - row["score_x"]
    assert systems == tuple(sorted(set(outcomes["system_x"]) | set(outcomes["system_y"])))
    np.testing.assert_allclose(wins, brute, rtol=0, atol=1e-9)


def test_ties_are_half_a_win_by_hand() -> None:
    frame = pl.DataFrame({
        "item_id": ["q1", "q2", "q3"], "system_x": ["a", "a", "a"],
        "system_y": ["b", "b", "b"], "judge_id": ["j", "j", "j"],
        "score_x": [1.0, 0.5, 0.0],
    })
    systems, wins = bt_wins(frame)
    assert systems == ("a", "b")
    assert wins.tolist() == [[0.0, 1.5], [1.5, 0.0]]
    # a earned 1 + 1/2 + 1 of 3 comparisons with b: theta_a - theta_b = log(2.5 / 0.5)
    frame2 = frame.with_columns(pl.Series("score_x", [1.0, 0.5, 1.0]))
    theta = bt_fit(bt_wins(frame2)[1])
    assert theta[0] - theta[1] == pytest.approx(math.log(2.5 / 0.5), abs=1e-12)


def test_fit_matches_choix(sim: tuple[pl.DataFrame, pl.DataFrame, dict]) -> None:
    _, wins = bt_wins(sim[0])
    theta = bt_fit(wins)
    assert abs(theta.sum()) < 1e-12
    np.testing.assert_allclose(theta, _choix(wins), rtol=0, atol=CHOIX_TOL)


def test_batched_refits_match_choix_on_each_resample() -> None:
    rng = np.random.default_rng(5)
    s, n_boot = 6, 12
    a, b = np.triu_indices(s, 1)
    counts = rng.integers(5, 40, size=(n_boot, a.size)).astype(np.float64)
    strength = rng.normal(size=s)
    p = 1.0 / (1.0 + np.exp(-(strength[a] - strength[b])))
    wins = rng.binomial(counts.astype(np.int64), p).astype(np.float64) + 0.5  # never 0 / all
    wins = np.minimum(wins, counts - 0.5)
    theta, ok = _batched_newton(a, b, wins, counts, np.zeros(s), s)
    assert ok.all()
    for k in range(n_boot):
        w = np.zeros((s, s))
        w[a, b] = wins[k]
        w[b, a] = counts[k] - wins[k]
        np.testing.assert_allclose(theta[k], _choix(w), rtol=0, atol=CHOIX_TOL)


def test_ratings_and_sandwich_match_statsmodels(
    sim: tuple[pl.DataFrame, pl.DataFrame, dict],
) -> None:
    outcomes = sim[0]
    fit = bradley_terry(outcomes, n_boot=50)
    systems = tuple(sorted(fit.table["system_id"]))
    x = _design(outcomes, systems)[:, 1:]  # reference-coded: system 0 at 0
    y = outcomes["score_x"].to_numpy()
    groups = outcomes["item_id"].rank("dense").cast(pl.Int64).to_numpy()
    glm = sm.GLM(y, x, family=sm.families.Binomial()).fit(
        tol=1e-14, maxiter=200, cov_type="cluster",
        cov_kwds={"groups": groups, "use_correction": False},
    )
    t = _sum_to_zero(len(systems))
    expected = t @ glm.params
    cov = t @ glm.cov_params() @ t.T
    ours = fit.table.sort("system_id")
    np.testing.assert_allclose(ours["rating"].to_numpy(), expected, rtol=0, atol=GLM_TOL)
    np.testing.assert_allclose(
        ours["se_sandwich"].to_numpy(), np.sqrt(np.diag(cov)), rtol=SANDWICH_RTOL
    )


def test_elo_scale_and_anchor(sim: tuple[pl.DataFrame, pl.DataFrame, dict]) -> None:
    outcomes = sim[0]
    plain = bradley_terry(outcomes, n_boot=20).table.sort("system_id")
    anchored = bradley_terry(outcomes, n_boot=20, anchor="sys-03").table.sort("system_id")
    r = plain["rating"].to_numpy()
    np.testing.assert_allclose(plain["rating_elo"], 1000 + 400 / math.log(10) * r, atol=1e-9)
    k = plain["system_id"].to_list().index("sys-03")
    np.testing.assert_allclose(
        anchored["rating_elo"], 1000 + 400 / math.log(10) * (r - r[k]), atol=1e-9
    )
    row = anchored.filter(pl.col("system_id") == "sys-03")
    assert row["elo_low"].item() == pytest.approx(1000.0)
    assert row["elo_high"].item() == pytest.approx(1000.0)


def test_disconnected_and_perfect_records_name_the_systems() -> None:
    frame = pl.DataFrame({
        "item_id": ["q1", "q2", "q3", "q4"], "system_x": ["a", "a", "c", "c"],
        "system_y": ["b", "b", "d", "d"], "judge_id": ["j"] * 4,
        "score_x": [1.0, 0.0, 1.0, 0.0],
    })
    with pytest.raises(ComparisonGraphError, match=r"not connected.*\['a', 'b'\].*\['c', 'd'\]"):
        bradley_terry(frame, n_boot=10)
    unbeaten = pl.DataFrame({
        "item_id": ["q1", "q2", "q3", "q4"], "system_x": ["a", "a", "b", "b"],
        "system_y": ["b", "c", "c", "c"], "judge_id": ["j"] * 4,
        "score_x": [1.0, 1.0, 1.0, 0.0],
    })
    with pytest.raises(ComparisonGraphError, match=r"\['a'\] never lost"):
        bradley_terry(unbeaten, n_boot=10)
    with pytest.raises(ComparisonGraphError, match=r"\['a'\] never lost"):
        bt_fit(bt_wins(unbeaten)[1], systems=("a", "b", "c"))


def test_tie_groups_split_only_where_resamples_agree() -> None:
    # a >> b >> c, and d identical to c: groups [a], [b], [c, d]; 200 items, one outcome a pair.
    strengths = {"a": 2.0, "b": 0.0, "c": -2.0, "d": -2.0}
    rng = np.random.default_rng(1)
    rows = []
    names = sorted(strengths)
    for i in range(200):
        for u in range(4):
            for v in range(u + 1, 4):
                x, y = names[u], names[v]
                p = 1 / (1 + math.exp(-(strengths[x] - strengths[y])))
                rows.append((f"q{i}", x, y, "j", float(rng.random() < p)))
    frame = pl.DataFrame(rows, schema=["item_id", "system_x", "system_y", "judge_id",
                                       "score_x"], orient="row")
    table = bradley_terry(frame, n_boot=300).table
    groups = dict(zip(table["system_id"], table["tie_group"], strict=True))
    assert groups["a"] == 1
    assert groups["b"] == 2
    assert groups["c"] == groups["d"] == 3
    assert table.filter(pl.col("system_id") == "a")["rank_high"].item() == 1


def test_bootstrap_sd_matches_sandwich_and_width_ratio_near_one_without_prompt_effects() -> None:
    # No prompt effect, one judge, one generation: outcomes independent, so the prompt and
    # battle bootstraps estimate the same spread and the sandwich agrees with both.
    outcomes, _, _ = _outcomes(
        seed=11, n_systems=6, n_items=300, n_judges=1, n_generations=1, n_replicates=1,
        pairwise_pairs=None, sigma_pair_si=0.0,
    )
    fit = bradley_terry(outcomes, n_boot=1000)
    t = fit.table
    z = 2 * 1.959963984540054
    boot_se = (t["high"] - t["low"]).to_numpy() / z
    np.testing.assert_allclose(boot_se, t["se_sandwich"].to_numpy(), rtol=0.15)
    assert 0.85 < fit.width_ratio < 1.15


def test_resample_judges_widens_when_judges_differ() -> None:
    # Judge-specific position bias differs between judges but is balanced by both orders; a
    # judge x system effect is what judge resampling sees: family preference with families.
    outcomes, _, _ = _outcomes(
        seed=2, n_systems=6, n_items=80, n_judges=4, n_generations=1, n_replicates=1,
        pairwise_pairs=None, sigma_pair_si=0.3, family_preference=1.5,
    )
    one = bradley_terry(outcomes, n_boot=400)
    two = bradley_terry(outcomes, n_boot=400, resample_judges=True)
    width1 = (one.table["high"] - one.table["low"]).median()
    width2 = (two.table["high"] - two.table["low"]).median()
    assert width2 > width1  # type: ignore[operator]
    np.testing.assert_allclose(
        one.table.sort("system_id")["rating"], two.table.sort("system_id")["rating"]
    )


def _expected_bt(theta: np.ndarray, sigma: float) -> np.ndarray:
    """BT fit (choix) to E_u[sigmoid(theta_a - theta_b + u_a - u_b)], u_a - u_b ~ N(0, 2 s^2)."""
    nodes, weights = np.polynomial.hermite_e.hermegauss(120)
    weights = weights / math.sqrt(2 * math.pi)
    diff = theta[:, None] - theta[None, :]
    z = diff[:, :, None] + math.sqrt(2) * sigma * nodes[None, None, :]
    p = (weights / (1 + np.exp(-z))).sum(axis=2)
    np.fill_diagonal(p, 0.0)
    return _choix(p)


def test_prompt_bootstrap_covers_the_population_estimand_battle_bootstrap_does_not() -> None:
    sigma, n_sims = 1.0, 200
    hits_prompt = hits_battle = total = 0
    ratios = []
    for rep in range(n_sims):
        outcomes, _, truth = _outcomes(
            seed=100 + rep, n_systems=5, n_items=40, n_judges=4, n_generations=1,
            n_replicates=1, pairwise_pairs=None, sigma_pair_si=sigma,
        )
        theta_true = truth["pairwise"]["theta"]  # type: ignore[index]
        fit = bradley_terry(outcomes, n_boot=300, seed=rep)
        t = fit.table.sort("system_id")
        ids = t["system_id"].to_list()
        target = _expected_bt(np.array([theta_true[s] for s in ids]), sigma)
        low, high = t["low"].to_numpy(), t["high"].to_numpy()
        b_low, b_high = t["battle_low"].to_numpy(), t["battle_high"].to_numpy()
        hits_prompt += int(((low <= target) & (target <= high)).sum())
        hits_battle += int(((b_low <= target) & (target <= b_high)).sum())
        total += len(ids)
        ratios.append(fit.width_ratio)
    cover_prompt, cover_battle = hits_prompt / total, hits_battle / total
    print(f"coverage prompt {cover_prompt:.3f} battle {cover_battle:.3f} "
          f"width ratio median {np.median(ratios):.3f}")
    # 1,000 intervals (200 simulations x 5 correlated systems): binomial SE ~0.007 at 0.95,
    # about twice that with the sum-to-zero correlation; percentile intervals with 40 clusters
    # run a little short.
    assert 0.90 <= cover_prompt <= 0.99
    assert cover_battle < cover_prompt - 0.08
    assert np.median(ratios) > 1.3


def test_length_control_matches_statsmodels() -> None:
    rng = np.random.default_rng(4)
    names = ["m0", "m1", "m2", "m3", "m4"]
    strength = np.array([0.6, 0.2, 0.0, -0.3, -0.5])
    verbosity = np.array([0.0, 1.0, -0.5, 0.5, 0.0])  # m1 long-winded
    beta_true = 1.2
    rows = []
    for i in range(150):
        for a in range(5):
            for b in range(5):
                if a == b:
                    continue
                la = int(300 * math.exp(verbosity[a] + 0.3 * rng.normal()))
                lb = int(300 * math.exp(verbosity[b] + 0.3 * rng.normal()))
                d = (la - lb) / (la + lb)
                p = 1 / (1 + math.exp(-(strength[a] - strength[b] + beta_true * d)))
                u = rng.random()
                score = 1.0 if u < p - 0.1 else (0.5 if u < p + 0.1 else 0.0)
                rows.append((f"q{i}", names[a], names[b], score, la, lb))
    g = pl.DataFrame(rows, schema=["item_id", "system_a", "system_b", "score_a", "length_a",
                                   "length_b"], orient="row")
    outcomes = g.select(
        "item_id", pl.col("system_a").alias("system_x"), pl.col("system_b").alias("system_y"),
        pl.lit("j").alias("judge_id"), pl.col("score_a").alias("score_x"),
    )
    lc = bradley_terry(outcomes, n_boot=20, games=g).length_control
    assert lc is not None
    code = {s: k for k, s in enumerate(names)}
    x = np.zeros((g.height, 5))
    rows_i = np.arange(g.height)
    x[rows_i, [code[s] for s in g["system_a"]]] = 1.0
    x[rows_i, [code[s] for s in g["system_b"]]] = -1.0
    la, lb = g["length_a"].to_numpy(), g["length_b"].to_numpy()
    d = (la - lb) / (la + lb)
    design = np.column_stack([x[:, 1:], d])
    groups = g["item_id"].rank("dense").cast(pl.Int64).to_numpy()
    glm = sm.GLM(g["score_a"].to_numpy(), design, family=sm.families.Binomial()).fit(
        tol=1e-14, maxiter=200, cov_type="cluster",
        cov_kwds={"groups": groups, "use_correction": False},
    )
    assert lc.beta == pytest.approx(glm.params[-1], abs=GLM_TOL)
    assert lc.beta_se == pytest.approx(glm.bse[-1], rel=SANDWICH_RTOL)
    ratings = lc.ratings.sort("system_id")
    np.testing.assert_allclose(ratings["rating"], _sum_to_zero(5) @ glm.params[:-1], atol=GLM_TOL)
    plain = sm.GLM(g["score_a"].to_numpy(), x[:, 1:], family=sm.families.Binomial()).fit(
        tol=1e-14, maxiter=200
    )
    np.testing.assert_allclose(
        ratings["rating_uncontrolled"], _sum_to_zero(5) @ plain.params, atol=GLM_TOL
    )
    rank_lc = np.argsort(np.argsort(-(_sum_to_zero(5) @ glm.params[:-1])))
    rank_plain = np.argsort(np.argsort(-(_sum_to_zero(5) @ plain.params)))
    changed = tuple(n for n, r0, r1 in zip(names, rank_plain, rank_lc, strict=True) if r0 != r1)
    assert lc.changed == changed
    assert "m1" in changed  # verbosity inflated the long-winded system
    # simulated beta recovered within 3 SE
    assert abs(lc.beta - beta_true) < 3 * lc.beta_se


def test_length_control_none_without_lengths(
    sim: tuple[pl.DataFrame, pl.DataFrame, dict],
) -> None:
    outcomes, g, _ = sim
    no_len = g.with_columns(pl.lit(None, dtype=pl.Int64).alias("length_a"))
    fit = bradley_terry(outcomes, n_boot=20, games=no_len)
    assert fit.length_control is None
    assert fit.length_control_reason is not None
    assert "length" in fit.length_control_reason
    assert bradley_terry(outcomes, n_boot=20).length_control_reason == "no games frame was given"


@pytest.mark.parametrize("resample_judges", [False, True])
def test_prompt_bootstrap_equals_a_loop_over_resamples(
    sim: tuple[pl.DataFrame, pl.DataFrame, dict], resample_judges: bool
) -> None:
    # The documented weights (counts of n uniform picks of items, and of judges, from the
    # first two child streams of default_rng(seed)) applied row by row in a Python loop, each
    # resample refitted by choix: the percentile intervals must agree.
    outcomes = sim[0]
    n_boot, seed = 60, 7
    fit = bradley_terry(outcomes, n_boot=n_boot, seed=seed, resample_judges=resample_judges)
    items = sorted(set(outcomes["item_id"]))
    judges = sorted(set(outcomes["judge_id"]))
    systems = sorted(set(outcomes["system_x"]) | set(outcomes["system_y"]))
    item_rng, judge_rng, _ = np.random.default_rng(seed).spawn(3)
    item_picks = item_rng.integers(0, len(items), size=(n_boot, len(items)))
    judge_picks = judge_rng.integers(0, len(judges), size=(n_boot, len(judges)))
    rows = list(outcomes.select("item_id", "judge_id", "system_x", "system_y", "score_x")
                .iter_rows())
    index = {s: k for k, s in enumerate(systems)}
    fits = []
    for b in range(n_boot):
        wi = {it: 0 for it in items}
        for k in item_picks[b]:
            wi[items[k]] += 1
        wj = {j: 1 for j in judges}
        if resample_judges:
            wj = {j: 0 for j in judges}
            for k in judge_picks[b]:
                wj[judges[k]] += 1
        wins = np.zeros((len(systems), len(systems)))
        for item, judge, x, y, score in rows:
            weight = wi[item] * wj[judge]
            wins[index[x], index[y]] += weight * score
            wins[index[y], index[x]] += weight * (1 - score)
        fits.append(_choix(wins))
    low, high = np.quantile(np.array(fits), [0.025, 0.975], axis=0)
    table = fit.table.sort("system_id")
    assert fit.prompt_degenerate == 0
    np.testing.assert_allclose(table["low"], low, rtol=0, atol=CHOIX_TOL)
    np.testing.assert_allclose(table["high"], high, rtol=0, atol=CHOIX_TOL)


@pytest.mark.parametrize(
    ("option", "match"),
    [
        ({"n_boot": 1}, "n_boot must be an int >= 2; got 1"),
        ({"level": 1.5}, r"level must be a number in \(0, 1\); got 1.5"),
        ({"anchor": "nobody"}, "anchor must be None or one of the systems"),
        ({"seed": -1}, "seed must be a non-negative int"),
    ],
)
def test_options_are_checked(
    sim: tuple[pl.DataFrame, pl.DataFrame, dict], option: dict, match: str
) -> None:
    from jurymeter.errors import ConfigError

    with pytest.raises(ConfigError, match=match):
        bradley_terry(sim[0], **option)


def test_missing_columns_and_bad_scores_are_design_errors() -> None:
    from jurymeter.errors import DesignError

    frame = pl.DataFrame({"item_id": ["q"], "system_x": ["a"], "system_y": ["b"],
                          "judge_id": ["j"], "score_x": [1.5]})
    with pytest.raises(DesignError, match=r"score_x must lie in \[0, 1\]"):
        bt_wins(frame)
    with pytest.raises(DesignError, match=r"missing \['judge_id'\]"):
        bt_wins(frame.drop("judge_id"))


def test_a_flat_battle_interval_leaves_width_ratio_undefined_with_a_note_naming_the_systems() -> None:
    """Soft scores of one pair all in one score cell: the battle bootstrap never moves the ratings.

    The ratio of widths is then 0/0 (it was inf with a divide warning on real data): NaN for those systems,
    a note naming them, and no warning.
    """
    import warnings

    rng = np.random.default_rng(0)
    n = 30
    records = pl.DataFrame({
        "item_id": [f"i{k}" for k in range(n)], "judge_id": ["j"] * n, "system_a": ["a"] * n,
        "system_b": ["b"] * n, "generation": [0] * n, "replicate": [0] * n, "winner": [None] * n,
        "preference": rng.uniform(0.61, 0.64, n),
    }, schema_overrides={"winner": pl.String})
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        bt = bradley_terry(reconcile(games(records)), n_boot=50, seed=0)
    rows = bt.table.sort("system_id")
    assert rows["battle_low"].to_list() == rows["battle_high"].to_list()  # the flat battle interval itself
    assert all(v is None or math.isnan(v) for v in rows["width_ratio"].to_list())
    assert math.isnan(bt.width_ratio)
    [note] = [n for n in bt.notes if n.startswith("width_ratio is null")]
    assert "a, b" in note


ELO = 400 / math.log(10)


def _baseline_outcomes(seed: int = 5, n_items: int = 60) -> pl.DataFrame:
    """Arena-Hard's design: four candidates, each judged against one baseline on every item, an item effect."""
    rng = np.random.default_rng(seed)
    strength = {"base": 0.0, "c1": 0.8, "c2": 0.4, "c3": -0.3, "c4": 0.1}
    rows = []
    for i in range(n_items):
        hard = rng.normal(0.0, 1.0, 5)  # the prompt effect: shared by both orders of a pair
        for k, cand in enumerate(("c1", "c2", "c3", "c4")):
            p = 1 / (1 + math.exp(-(strength[cand] + hard[k])))
            for _ in range(2):
                rows.append((f"q{i:03d}", cand, "base", "j", float(rng.random() < p)))
    return pl.DataFrame(rows, schema=["item_id", "system_x", "system_y", "judge_id", "score_x"], orient="row")


def _brute_prompt_draws(outcomes: pl.DataFrame, n_boot: int, seed: int) -> tuple[list[str], np.ndarray]:
    """The prompt bootstrap by brute force: the documented item picks, a weighted wins matrix per resample, choix."""
    systems = sorted(set(outcomes["system_x"]) | set(outcomes["system_y"]))
    items = sorted(set(outcomes["item_id"]))
    code, item_code = {s: k for k, s in enumerate(systems)}, {s: k for k, s in enumerate(items)}
    item_rng = np.random.default_rng(seed).spawn(3)[0]
    picks = item_rng.integers(0, len(items), size=(n_boot, len(items)))
    draws = []
    for b in range(n_boot):
        weight = np.bincount(picks[b], minlength=len(items))
        wins = np.zeros((len(systems), len(systems)))
        for item, x, y, score in outcomes.select("item_id", "system_x", "system_y", "score_x").iter_rows():
            w = weight[item_code[item]]
            wins[code[x], code[y]] += w * score
            wins[code[y], code[x]] += w * (1 - score)
        draws.append(_choix(wins))
    return systems, np.array(draws)


def test_anchor_reanchors_the_battle_bootstrap_and_the_ratio_is_on_differences_to_it() -> None:
    outcomes = _baseline_outcomes()
    n_boot, seed = 200, 3
    fit = bradley_terry(outcomes, n_boot=n_boot, seed=seed, anchor="c2")
    t = fit.table.sort("system_id")
    ids = t["system_id"].to_list()
    k = ids.index("c2")
    rating = t["rating"].to_numpy()
    # The report's Elo battle bound: the rating's centre plus 400/ln 10 per logit.
    centre = t["rating_elo"].to_numpy() - ELO * rating
    b_low_elo = centre + ELO * t["battle_low"].to_numpy()
    b_high_elo = centre + ELO * t["battle_high"].to_numpy()
    assert b_low_elo[k] == pytest.approx(1000.0, abs=1e-9)
    assert b_high_elo[k] == pytest.approx(1000.0, abs=1e-9)
    assert t["elo_low"][k] == pytest.approx(1000.0)
    assert t["elo_high"][k] == pytest.approx(1000.0)
    assert t["width_ratio"][k] is None or math.isnan(t["width_ratio"][k])
    # Independent prompt draws (choix refits of the same item picks), re-anchored on c2.
    systems, draws = _brute_prompt_draws(outcomes, n_boot, seed)
    assert systems == ids
    low, high = np.percentile(draws, [2.5, 97.5], axis=0)
    np.testing.assert_allclose(t["low"].to_numpy(), low, atol=1e-7)  # the same resamples
    np.testing.assert_allclose(t["high"].to_numpy(), high, atol=1e-7)
    d_low, d_high = np.percentile(draws - draws[:, [k]], [2.5, 97.5], axis=0)
    others = [j for j in range(len(ids)) if j != k]
    np.testing.assert_allclose(t["elo_high"].to_numpy()[others] - t["elo_low"].to_numpy()[others],
                               ELO * (d_high - d_low)[others], rtol=1e-7)
    # Both bootstraps anchored alike: the ratio is the one of the two anchored widths.
    battle_width = (t["battle_high"] - t["battle_low"]).to_numpy()
    ratio = (d_high - d_low)[others] / battle_width[others]  # the anchor's own width is 0: left out
    np.testing.assert_allclose(t["width_ratio"].to_numpy()[others], ratio, rtol=1e-7)
    assert fit.width_ratio == pytest.approx(float(np.median(ratio)))
    assert any("minus that of c2 (the anchor)" in n for n in fit.notes)


def test_without_an_anchor_the_ratio_is_on_differences_to_the_baseline_in_every_comparison() -> None:
    outcomes = _baseline_outcomes(seed=8)
    plain = bradley_terry(outcomes, n_boot=200, seed=4)
    anchored = bradley_terry(outcomes, n_boot=200, seed=4, anchor="base")
    # The baseline is the reference of the ratio either way; the same resamples give the same ratios.
    np.testing.assert_allclose(plain.table.sort("system_id")["width_ratio"].to_numpy(),
                               anchored.table.sort("system_id")["width_ratio"].to_numpy(), rtol=1e-12)
    assert plain.width_ratio == pytest.approx(anchored.width_ratio, rel=1e-12)
    assert any("minus that of base (the baseline" in n for n in plain.notes)
    # Without an anchor the battle bounds are the mean-centred ones, as before.
    assert (plain.table["battle_low"] < plain.table["battle_high"]).all()
    base = plain.table.filter(pl.col("system_id") == "base")
    assert base["width_ratio"].item() is None or math.isnan(base["width_ratio"].item())
