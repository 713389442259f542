r"""The pairwise G-study (paper ``ask-which-not-how-good``, table 3) against independent references.

- Brute force: for a balanced s x i x j x r array of win indicators the sums of
  squares are computed here from their definitions (marginal means, squared
  deviations) and the expected-mean-squares equations of the crossed random
  design ``s x i x j x r:sij`` are solved by hand (written out below, Brennan
  2001 table 3.2), likewise ``s x i x r:si`` for one judge; the ceiling,
  :math:`E\rho^2` and the judges needed are then the paper's formulas evaluated
  by hand, and compared with ``pairwise_gstudy`` run on games built from the array.
- Simulation with known truth: win probabilities with uniform effects of known
  variance on the probability scale (bounded so that no probability leaves
  [0, 1], so the components are exactly those variances), Bernoulli wins, a
  constant position bias; the mean estimates of sigma2_s and sigma2_sj over
  the data sets must match the truth within Monte Carlo error in every arm.
- Hand-built games for baseline detection, arm splitting and the balanced arm.
- The real Arena-Hard-Auto samples, each file ingested into a temporary store:
  the win indicators and the block's arrays against a count from the raw JSON
  lines (score labels mapped by the README's position rule, written out here).
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import polars as pl
import pytest

from jurymeter.errors import ConfigError, NotApplicableError
from jurymeter.io.ingest import ingest
from jurymeter.io.sources import discover_sources
from jurymeter.io.store import Store
from jurymeter.io.validate import ValidationOptions
from jurymeter.stats.pairwise.games import games as games_of
from jurymeter.stats.pairwise.gstudy import pairwise_gstudy, win_indicators
from samples import SAMPLES

# Components and ratios from the engine against the hand-solved EMS equations:
# both are a few float64 operations on the same data.
EXACT = 1e-10
# Monte Carlo bias bound, in standard errors of the mean over the simulated data sets.
MC_SE = 4.0
BASE = "base"


# ------------------------------------------------------------------ helpers
def games_from_arrays(ab: np.ndarray | None, ba: np.ndarray | None, *, judges: list[str] | None = None) -> pl.DataFrame:
    """A games frame: ``ab[s, i, j, r]`` the candidate's win shown first, ``ba`` shown second."""
    rows = []
    shape = (ab if ab is not None else ba).shape  # type: ignore[union-attr]
    names = judges or [f"j{k}" for k in range(shape[2])]
    for arr, first in ((ab, True), (ba, False)):
        if arr is None:
            continue
        for (s, i, j, r), w in np.ndenumerate(arr):
            score_a = float(w) if first else 1.0 - float(w)
            rows.append({
                "item_id": f"q{i:03d}", "system_a": f"m{s:02d}" if first else BASE,
                "system_b": BASE if first else f"m{s:02d}", "judge_id": names[j], "generation": 0,
                "replicate": r, "verdict": "A" if score_a > 0.5 else "B" if score_a < 0.5 else "tie",
                "score_a": score_a, "order_known": True,
            })
    return pl.DataFrame(rows)


def hand_ems_sijr(x: np.ndarray) -> dict[str, float]:
    """Components of s x i x j x r:sij from sums of squares by definition, EMS solved by hand."""
    ns, ni, nj, nr = x.shape
    m = x.mean()
    ms_ = x.mean(axis=(1, 2, 3))
    mi = x.mean(axis=(0, 2, 3))
    mj = x.mean(axis=(0, 1, 3))
    msi = x.mean(axis=(2, 3))
    msj = x.mean(axis=(1, 3))
    mij = x.mean(axis=(0, 3))
    msij = x.mean(axis=3)
    ss = {
        "s": ni * nj * nr * ((ms_ - m) ** 2).sum(),
        "i": ns * nj * nr * ((mi - m) ** 2).sum(),
        "j": ns * ni * nr * ((mj - m) ** 2).sum(),
        "si": nj * nr * ((msi - ms_[:, None] - mi[None, :] + m) ** 2).sum(),
        "sj": ni * nr * ((msj - ms_[:, None] - mj[None, :] + m) ** 2).sum(),
        "ij": ns * nr * ((mij - mi[:, None] - mj[None, :] + m) ** 2).sum(),
        "sij": nr * ((msij - msi[:, :, None] - msj[:, None, :] - mij[None, :, :]
                      + ms_[:, None, None] + mi[None, :, None] + mj[None, None, :] - m) ** 2).sum(),
        "e": ((x - msij[..., None]) ** 2).sum(),
    }
    df = {"s": ns - 1, "i": ni - 1, "j": nj - 1, "si": (ns - 1) * (ni - 1), "sj": (ns - 1) * (nj - 1),
          "ij": (ni - 1) * (nj - 1), "sij": (ns - 1) * (ni - 1) * (nj - 1), "e": ns * ni * nj * (nr - 1)}
    ms = {k: ss[k] / df[k] for k in ss}
    # E[MS_e] = e; E[MS_sij] = e + nr sij; E[MS_si] = e + nr sij + nr nj si; ...
    # E[MS_s] = e + nr sij + nr nj si + nr ni sj + nr ni nj s (and likewise for i, j).
    e = ms["e"]
    sij = (ms["sij"] - ms["e"]) / nr
    si = (ms["si"] - ms["sij"]) / (nr * nj)
    sj = (ms["sj"] - ms["sij"]) / (nr * ni)
    ij = (ms["ij"] - ms["sij"]) / (nr * ns)
    s = (ms["s"] - ms["si"] - ms["sj"] + ms["sij"]) / (nr * ni * nj)
    i = (ms["i"] - ms["si"] - ms["ij"] + ms["sij"]) / (nr * ns * nj)
    j = (ms["j"] - ms["sj"] - ms["ij"] + ms["sij"]) / (nr * ns * ni)
    return {"s": s, "i": i, "j": j, "si": si, "sj": sj, "ij": ij, "sij": sij, "e": e}


def hand_ems_sir(x: np.ndarray) -> dict[str, float]:
    """Components of s x i x r:si (one judge) by hand."""
    ns, ni, nr = x.shape
    m, ms_, mi, msi = x.mean(), x.mean(axis=(1, 2)), x.mean(axis=(0, 2)), x.mean(axis=2)
    ms = {
        "s": ni * nr * ((ms_ - m) ** 2).sum() / (ns - 1),
        "i": ns * nr * ((mi - m) ** 2).sum() / (ni - 1),
        "si": nr * ((msi - ms_[:, None] - mi[None, :] + m) ** 2).sum() / ((ns - 1) * (ni - 1)),
        "e": ((x - msi[..., None]) ** 2).sum() / (ns * ni * (nr - 1)),
    }
    return {"s": (ms["s"] - ms["si"]) / (ni * nr), "i": (ms["i"] - ms["si"]) / (ns * nr),
            "si": (ms["si"] - ms["e"]) / nr, "e": ms["e"]}


def random_wins(rng: np.random.Generator, shape: tuple[int, ...]) -> np.ndarray:
    """Win indicators in {0, 1/2, 1} with a per-system and per-system-judge lean."""
    lean = rng.normal(0, 0.8, shape[0])[:, None, None, None] + rng.normal(0, 0.3, (shape[0], 1, shape[2], 1))
    p_win = 1 / (1 + np.exp(-lean)) * 0.9
    u = rng.random(shape)
    return np.where(u < p_win, 1.0, np.where(u < p_win + 0.1, 0.5, 0.0))


def hand_quantities(c: dict[str, float], ni: int, target: float) -> dict[str, float | int | None]:
    """Paper table 3's columns from raw components by their formulas.

    Shares truncate each component at zero; a ratio truncates its two variances
    (the raw error sum) at zero (paper appendix; the engine's documented rule).
    """
    total = sum(max(v, 0.0) for v in c.values())
    tau = max(c["s"], 0.0)

    def rho(nj: int) -> float:
        delta = c["si"] / ni + c["sj"] / nj + (c["sij"] + c["e"]) / (ni * nj)
        return tau / (tau + max(delta, 0.0))

    return {
        "share": tau / total,
        "ceiling": tau / (tau + max(c["sj"], 0.0)),
        "erho2": rho(1),
        "judges_needed": next((k for k in range(1, 1001) if rho(k) >= target), None),
    }


# ------------------------------------------------------------------ brute force
@pytest.mark.parametrize("seed", [1, 2])
def test_components_and_table_columns_equal_the_hand_solved_ems(seed: int) -> None:
    rng = np.random.default_rng(seed)
    shape = (6, 8, 3, 2)
    ab, ba = random_wins(rng, shape), random_wins(rng, shape)
    study = pairwise_gstudy(games_from_arrays(ab, ba), target=0.9)
    assert study.baseline == BASE
    counts: list[int | None] = []
    for arm, x in (("AB", ab), ("BA", ba), ("balanced", (ab + ba) / 2)):
        row = study.arm(arm)  # type: ignore[arg-type]
        hand = hand_ems_sijr(x)
        assert row.design == "s x i x j x r:sij"
        assert (row.systems, row.items, row.judges, row.replicates) == shape
        for label, value in hand.items():
            key = "sigma2_r_sij" if label == "e" else f"sigma2_{label}"
            assert row.components[key] == pytest.approx(value, abs=EXACT), (arm, label)
        assert row.sigma2_s == pytest.approx(hand["s"], abs=EXACT)
        assert row.sigma2_sj == pytest.approx(hand["sj"], abs=EXACT)
        want = hand_quantities(hand, shape[1], 0.9)
        assert row.share == pytest.approx(want["share"], abs=EXACT)
        assert row.ceiling == pytest.approx(want["ceiling"], abs=EXACT)
        assert row.erho2 == pytest.approx(want["erho2"], abs=EXACT)
        assert row.judges_needed == want["judges_needed"]
        counts.append(row.judges_needed)
    frame = study.frame
    assert frame["arm"].to_list() == ["AB", "BA", "balanced"]
    assert frame.columns == ["arm", "systems", "items", "judges", "replicates", "sigma2_s", "sigma2_sj",
                             "share", "ceiling", "erho2", "judges_needed", "reason"]
    assert frame["sigma2_s"].to_list() == [a.sigma2_s for a in study.arms]


def test_one_judge_fits_s_x_i_x_r_and_leaves_the_judge_terms_none_with_a_reason() -> None:
    rng = np.random.default_rng(5)
    ab = random_wins(rng, (5, 7, 1, 3))
    study = pairwise_gstudy(games_from_arrays(ab, None, judges=["only-judge"]))
    row = study.arm("AB")
    hand = hand_ems_sir(ab[:, :, 0, :])
    assert row.design == "s x i x r:si"
    assert row.sigma2_s == pytest.approx(hand["s"], abs=EXACT)
    assert row.components["sigma2_r_si"] == pytest.approx(hand["e"], abs=EXACT)
    assert row.sigma2_sj is None
    assert row.ceiling is None
    assert row.judges_needed is None
    for name in ("sigma2_sj", "ceiling", "judges_needed"):
        assert "one judge" in row.null_reasons[name]
    # E rho^2 with the one judge fixed: s / (s + si/n_i + e/n_i).
    want = max(hand["s"], 0) / (max(hand["s"], 0) + max(hand["si"] / 7 + hand["e"] / 7, 0))
    assert row.erho2 == pytest.approx(want, abs=EXACT)
    assert row.reason is not None
    assert "one judge" in row.reason
    # No BA games: the other two arms are None with a reason, never a crash.
    for arm in ("BA", "balanced"):
        empty = study.arm(arm)  # type: ignore[arg-type]
        assert empty.systems == 0
        assert empty.sigma2_s is None
        assert "no games" in (empty.reason or "")


# ------------------------------------------------------------------ simulation with known truth
TRUTH = {"s": 0.006, "i": 0.0015, "j": 0.0003, "si": 0.0015, "sj": 0.0015, "ij": 0.0003, "sij": 0.0003}
POSITION_BIAS = 0.05


def _uniform(rng: np.random.Generator, variance: float, shape: tuple[int, ...]) -> np.ndarray:
    half = math.sqrt(3 * variance)  # U(-a, a) has variance a^2 / 3
    return rng.uniform(-half, half, shape)


def test_estimates_are_unbiased_for_known_components_on_the_probability_scale() -> None:
    ns, ni, nj, nr, runs = 12, 24, 4, 2, 120  # table 3's design
    bound = sum(math.sqrt(3 * v) for v in TRUTH.values()) + POSITION_BIAS
    assert bound < 0.5  # every probability stays in (0, 1): no clipping, the truth is exact
    rng = np.random.default_rng(2026)
    estimates: dict[str, list[tuple[float, float]]] = {"AB": [], "BA": [], "balanced": []}
    for _ in range(runs):
        p = 0.5 + (
            _uniform(rng, TRUTH["s"], (ns, 1, 1)) + _uniform(rng, TRUTH["i"], (1, ni, 1))
            + _uniform(rng, TRUTH["j"], (1, 1, nj)) + _uniform(rng, TRUTH["si"], (ns, ni, 1))
            + _uniform(rng, TRUTH["sj"], (ns, 1, nj)) + _uniform(rng, TRUTH["ij"], (1, ni, nj))
            + _uniform(rng, TRUTH["sij"], (ns, ni, nj))
        )
        ab = (rng.random((ns, ni, nj, nr)) < (p + POSITION_BIAS)[..., None]).astype(float)
        ba = (rng.random((ns, ni, nj, nr)) < (p - POSITION_BIAS)[..., None]).astype(float)
        study = pairwise_gstudy(games_from_arrays(ab, ba))
        for row in study.arms:
            assert row.sigma2_s is not None
            assert row.sigma2_sj is not None
            estimates[row.arm].append((row.sigma2_s, row.sigma2_sj))
    for arm, values in estimates.items():
        got = np.array(values)
        mean, se = got.mean(axis=0), got.std(axis=0, ddof=1) / math.sqrt(runs)
        for k, name in enumerate(("s", "sj")):
            print(f"{arm} sigma2_{name}: mean {mean[k]:.6f} truth {TRUTH[name]} se {se[k]:.6f}")
            assert abs(mean[k] - TRUTH[name]) < MC_SE * se[k], (arm, name, mean[k], se[k])


# ------------------------------------------------------------------ hand-built cases
def _game(item: str, a: str, b: str, score_a: float, *, judge: str = "j0", rep: int = 0,
          known: bool = True) -> dict[str, object]:
    return {"item_id": item, "system_a": a, "system_b": b, "judge_id": judge, "generation": 0, "replicate": rep,
            "verdict": "A" if score_a > 0.5 else "B" if score_a < 0.5 else "tie", "score_a": score_a,
            "order_known": known}


def test_the_baseline_is_the_one_system_in_every_game_and_is_refused_otherwise() -> None:
    g = pl.DataFrame([_game("q1", "x", "ref", 1.0), _game("q1", "ref", "y", 0.0), _game("q2", "z", "ref", 0.5)])
    assert pairwise_gstudy(g).baseline == "ref"
    no_common = pl.DataFrame([_game("q1", "x", "ref", 1.0), _game("q1", "y", "z", 0.0)])
    with pytest.raises(NotApplicableError, match=r"common baseline.*none is.*baseline="):
        pairwise_gstudy(no_common)
    one_pair = pl.DataFrame([_game("q1", "x", "ref", 1.0), _game("q1", "ref", "x", 0.0)])
    with pytest.raises(NotApplicableError, match=r"2 are \(ref, x\).*baseline="):
        pairwise_gstudy(one_pair)
    given = pairwise_gstudy(no_common, baseline="ref")
    assert given.baseline == "ref"
    assert given.games_skipped["not_against_baseline"] == 1
    with pytest.raises(ConfigError, match=r"baseline must be a system of the games.*'nobody'"):
        pairwise_gstudy(g, baseline="nobody")
    with pytest.raises(ConfigError, match=r"target must be .* between 0 and 1; got 1\.5"):
        pairwise_gstudy(g, target=1.5)


def test_arms_split_by_who_is_shown_first_and_balanced_is_the_mean_where_both_exist() -> None:
    g = pl.DataFrame([
        _game("q1", "x", "ref", 1.0),  # AB: x first, wins -> 1
        _game("q1", "ref", "x", 0.5),  # BA: tie -> 1/2
        _game("q2", "x", "ref", 0.0),  # AB: loses -> 0
        _game("q2", "ref", "x", 0.25),  # BA: soft preference for ref 0.25 -> x earns 0.75
        _game("q3", "x", "ref", 1.0),  # AB only: not in balanced
        _game("q1", "y", "ref", 0.0),  # AB of y
        _game("q4", "ref", "y", 0.0),  # BA of y, order unknown: left out
        _game("q1", "x", "y", 1.0),  # not against the baseline: left out
    ]).with_columns(
        pl.when(pl.col("item_id") == "q4").then(pl.lit(False)).otherwise(pl.col("order_known")).alias("order_known")
    )
    cells = win_indicators(g, "ref")

    def as_dict(frame: pl.DataFrame) -> dict[tuple[str, str], float]:
        return {(s, i): w for s, i, w in frame.select("system_id", "item_id", "score").iter_rows()}

    assert as_dict(cells["AB"]) == {("x", "q1"): 1.0, ("x", "q2"): 0.0, ("x", "q3"): 1.0, ("y", "q1"): 0.0}
    assert as_dict(cells["BA"]) == {("x", "q1"): 0.5, ("x", "q2"): 0.75}
    assert as_dict(cells["balanced"]) == {("x", "q1"): 0.75, ("x", "q2"): 0.375}
    study = pairwise_gstudy(g, baseline="ref")
    assert study.games_skipped == {"not_against_baseline": 1, "order_unknown": 1}
    # BA has one system: nothing to fit, every quantity None with the reason.
    ba = study.arm("BA")
    assert ba.sigma2_s is None
    assert "at least 2 systems" in (ba.reason or "")
    assert ba.block is not None
    assert ba.block.x.ravel().tolist() == [0.5, 0.75]


# ------------------------------------------------------------------ the real Arena-Hard samples
ARENA = SAMPLES / "arena_hard"
# The README's position rule: game 0 shows the baseline as A, game 1 the model as A;
# labels are A/B-relative. The model's win per label, by game.
MODEL_WINS = (
    {"A>>B": 0.0, "A>B": 0.0, "A=B": 0.5, "B>A": 1.0, "B>>A": 1.0},  # game 0: model is B (arm BA)
    {"A>>B": 1.0, "A>B": 1.0, "A=B": 0.5, "B>A": 0.0, "B>>A": 0.0},  # game 1: model is A (arm AB)
)
ARENA_FILES = sorted(p.name for p in ARENA.glob("*.jsonl")) if ARENA.is_dir() else []


def _hand_count(path: Path) -> tuple[str, dict[str, dict[tuple[str, str, str], float]]]:
    """Baseline and per arm (model, item, judge) -> the model's win, from the raw lines."""
    arms: dict[str, dict[tuple[str, str, str], float]] = {"AB": {}, "BA": {}}
    baseline = "gpt-4-0314"  # v0.1 names none: the upstream default (README)
    for line in path.read_text().splitlines():
        if not line.strip():
            continue
        record = json.loads(line)
        baseline = record.get("baseline", baseline)
        key = (record["model"], record.get("question_id", record.get("uid")), record["judge"])
        for game, (arm, wins) in enumerate(zip(("BA", "AB"), MODEL_WINS, strict=True)):
            label = record["games"][game]["score"]
            if label is not None:
                arms[arm][key] = wins[label]
    both = set(arms["AB"]) & set(arms["BA"])
    arms["balanced"] = {k: (arms["AB"][k] + arms["BA"][k]) / 2 for k in both}
    return baseline, arms


def _store_games(tmp_path: Path, *paths: Path) -> dict[str, pl.DataFrame]:
    store = Store(str(tmp_path / "store"))
    ingest(store, discover_sources([str(p) for p in paths]), ValidationOptions())
    return {s: games_of(store.scan("pairwise", s)) for s in store.item_sets("pairwise")}


@pytest.mark.skipif(not ARENA_FILES, reason=f"no Arena-Hard samples at {ARENA}")
@pytest.mark.parametrize("name", ARENA_FILES)
def test_arena_hard_win_indicators_equal_a_count_of_the_raw_lines(name: str, tmp_path: Path) -> None:
    path = ARENA / name
    baseline, hand = _hand_count(path)
    [g] = _store_games(tmp_path, path).values()
    cells = win_indicators(g, baseline)
    study = pairwise_gstudy(g, baseline=baseline)  # one pair of systems: the baseline must be named
    for arm in ("AB", "BA", "balanced"):
        got = {(s, i, j): w for s, i, j, w in cells[arm].select("system_id", "item_id", "judge_id", "score").iter_rows()}
        assert got == hand[arm], arm
        row = study.arm(arm)  # type: ignore[arg-type]
        # One system, one judge: nothing is estimable, each None says why; the block is the raw count.
        assert row.sigma2_s is None
        assert row.sigma2_sj is None
        assert row.ceiling is None
        assert row.reason is not None
        assert "sigma2_sj" in row.reason
        if hand[arm]:
            assert row.block is not None
            assert row.block.x.shape == (1, len(hand[arm]), 1)
            by_item = {i: w for (_, i, _), w in hand[arm].items()}
            assert row.block.x[0, :, 0].tolist() == [by_item[i] for i in row.block.items]
            assert row.win_rates == {row.block.systems[0]: pytest.approx(float(np.mean(list(by_item.values()))))}
        else:
            assert row.block is None
            assert "no games" in row.reason


@pytest.mark.skipif(not ARENA_FILES, reason=f"no Arena-Hard samples at {ARENA}")
def test_arena_hard_folder_detects_the_v01_baseline_and_goes_through(tmp_path: Path) -> None:
    by_set = _store_games(tmp_path, ARENA)
    v01 = by_set["arena-hard-v0.1"]
    study = pairwise_gstudy(v01)  # gpt-4-0314 is in every v0.1 game, nothing else is
    assert study.baseline == "gpt-4-0314"
    hand: dict[str, dict[tuple[str, str, str], float]] = {"AB": {}, "BA": {}, "balanced": {}}
    for path in ARENA.glob("v0.1__*.jsonl"):
        for arm, cells in _hand_count(path)[1].items():
            hand[arm].update(cells)
    cells = win_indicators(v01, "gpt-4-0314")
    for arm in ("AB", "BA", "balanced"):
        got = {(s, i, j): w for s, i, j, w in cells[arm].select("system_id", "item_id", "judge_id", "score").iter_rows()}
        assert got == hand[arm], arm
    for row in study.arms:
        assert row.sigma2_s is None
        assert row.sigma2_sj is None
        assert row.ceiling is None
        assert row.erho2 is None
        assert row.reason
    assert study.frame.height == 3
    assert study.frame["reason"].null_count() == 0
