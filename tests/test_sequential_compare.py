r"""Leaderboard selection and group comparison (``stats.sequential.compare``) against independent references.

- brute force: the naive means, top-k sets, contrasts and their batch-bootstrap
  stabilities and standard errors recomputed here with plain Python loops over the
  records, from the definitions and the resample weights the module documents
  (``numpy.random.default_rng(seed).multinomial(n_b, [1/n_b] * n_b, size=n_boot)``
  over the sorted batch ids);
- the model side from the bootstrap draws by name (``theta[<unit>]``), looped here;
- the Wald p-value against its formula written with ``math.erfc`` (not scipy);
- the table-3 outcome labels on hand-set estimates and draws (a fit and a bootstrap
  with chosen ``theta`` and ``draws``, so z and p are known in closed form);
- simulation with known truth: a clear best unit and a clear group difference are
  found, both ways round;
- refusals: unknown, repeated and overlapping unit ids, empty groups, bad options.
"""

from __future__ import annotations

import dataclasses
import math
import statistics

import numpy as np
import polars as pl
import pytest

from jurymeter.errors import ConfigError, DesignError
from jurymeter.stats.sequential import bootstrap_fits, fit_sequential_glmm, simulate_sequential
from jurymeter.stats.sequential.compare import compare_groups, naive_group_contrast, select_top
from jurymeter.stats.sequential.glmm import GLMMBootstrap, SequentialGLMM

EXACT = 1e-12  # the same arithmetic in another order: rounding only


def _records(theta: list[float], n_batches: int, seed: int, *, rho: float = 0.4) -> pl.DataFrame:
    rng = np.random.default_rng(seed)
    orders = np.array([rng.permutation(len(theta)) for _ in range(n_batches)])
    return simulate_sequential(theta, orders, rng=seed + 1, rho=[rho], batch_sd=0.4)


@pytest.fixture(scope="module")
def case() -> tuple[pl.DataFrame, SequentialGLMM, GLMMBootstrap]:
    records = _records([0.9, 0.2, 0.0, -0.2, -0.6, 0.4], 50, 3)
    # Drop a few ratings so batches and units have unequal counts (a ragged case for the loops).
    records = records.with_columns(
        pl.when((pl.col("batch_position") == 5) & (pl.col("batch_id").str.ends_with("7")))
        .then(None)
        .otherwise(pl.col("score"))
        .alias("score")
    )
    fit = fit_sequential_glmm(records, lags=1)
    boot = bootstrap_fits(records, fit, n_boot=40, seed=5)
    return records, fit, boot


# ---------------------------------------------------------------- brute force


def _loop_cells(records: pl.DataFrame) -> dict[str, dict[str, list[float]]]:
    """batch -> unit -> list of non-null scores, by a loop over rows."""
    out: dict[str, dict[str, list[float]]] = {}
    for row in records.iter_rows(named=True):
        if row["score"] is None:
            continue
        out.setdefault(row["batch_id"], {}).setdefault(row["item_id"], []).append(row["score"])
    return out


def _loop_weights(batches: list[str], n_boot: int, seed: int) -> list[dict[str, int]]:
    rng = np.random.default_rng(seed)
    n = len(batches)
    rows = rng.multinomial(n, [1.0 / n] * n, size=n_boot)
    return [{b: int(rows[r][j]) for j, b in enumerate(batches)} for r in range(n_boot)]


def _loop_means(
    cells: dict[str, dict[str, list[float]]], weight: dict[str, int]
) -> dict[str, float]:
    total: dict[str, float] = {}
    count: dict[str, float] = {}
    for b, per_unit in cells.items():
        for u, scores in per_unit.items():
            for s in scores:
                total[u] = total.get(u, 0.0) + weight[b] * s
                count[u] = count.get(u, 0.0) + weight[b]
    return {u: total[u] / count[u] for u in total if count[u] > 0}


def _loop_top(scores: dict[str, float], k: int) -> list[str]:
    return sorted(scores, key=lambda u: (-scores[u], u))[:k]


def test_select_top_naive_against_loops(
    case: tuple[pl.DataFrame, SequentialGLMM, GLMMBootstrap],
) -> None:
    records, fit, boot = case
    top = select_top(records, fit, boot, k=[3, 2], n_boot=60, seed=11)
    cells = _loop_cells(records)
    full = _loop_means(cells, dict.fromkeys(cells, 1))
    assert top.ks == (1, 2, 3)
    for u, v in zip(top.units, top.naive_scores, strict=True):
        assert abs(v - full[u]) < EXACT
    weights = _loop_weights(sorted(cells), 60, 11)
    for k, chosen, stab in zip(top.ks, top.naive_top, top.naive_stability, strict=True):
        assert list(chosen) == _loop_top(full, k)
        same = used = 0
        for w in weights:
            means = _loop_means(cells, w)
            if len(means) < len(full):
                continue
            used += 1
            same += set(_loop_top(means, k)) == set(chosen)
        assert used == top.n_naive
        assert stab is not None
        assert abs(stab - same / used) < EXACT


def test_select_top_model_against_draws(
    case: tuple[pl.DataFrame, SequentialGLMM, GLMMBootstrap],
) -> None:
    records, fit, boot = case
    top = select_top(records, fit, boot, k=2)
    theta = dict(zip(fit.units, fit.theta, strict=True))
    for k, chosen, stab in zip(top.ks, top.model_top, top.model_stability, strict=True):
        assert list(chosen) == _loop_top(theta, k)
        same = 0
        for row in boot.draws:
            draw = {u: float(row[boot.names.index(f"theta[{u}]")]) for u in fit.units}
            same += set(_loop_top(draw, k)) == set(chosen)
        assert stab is not None
        assert abs(stab - same / boot.draws.shape[0]) < EXACT
    assert top.n_model == boot.draws.shape[0]
    assert top.n_boot_naive == boot.n_boot  # the default
    frame = top.table
    assert frame.columns == ["method", "k", "units", "stability", "n_resamples"]
    assert frame.filter(pl.col("method") == "model", pl.col("k") == 2)["units"].to_list() == [
        list(top.model_top[1])
    ]


def test_select_top_ties_break_by_label() -> None:
    # Hand-built binary records: units a and b both average 2/3, c 1/3; a sorts first.
    rows = []
    scores = {"b0": (1, 1, 0), "b1": (1, 0, 1), "b2": (0, 1, 0)}
    for b, ys in scores.items():
        for t, (u, y) in enumerate(zip(("a", "b", "c"), ys, strict=True)):
            rows.append({"batch_id": b, "batch_position": t, "item_id": u, "score": float(y)})
    records = pl.DataFrame(rows)
    fit = _fake_fit(("a", "b", "c"), (0.0, 1.0, -1.0))
    boot = _fake_boot(fit, np.array([[0.0, 1.0, -1.0], [2.0, 1.0, -1.0]]))
    top = select_top(records, fit, boot, k=2, n_boot=5)
    assert top.naive_scores == pytest.approx((2 / 3, 2 / 3, 1 / 3), abs=EXACT)
    assert top.naive_top == (("a",), ("a", "b"))
    assert top.model_top == (("b",), ("b", "a"))
    assert top.model_stability == (0.5, 1.0)


def test_compare_groups_against_loops(
    case: tuple[pl.DataFrame, SequentialGLMM, GLMMBootstrap],
) -> None:
    records, fit, boot = case
    a, b = ["u00", "u05", "u02"], ["u04", "u03"]
    cmp = compare_groups(records, fit, boot, a, b, n_boot=80, seed=2, reference="A")
    cells = _loop_cells(records)

    def contrast(weight: dict[str, int]) -> float | None:
        sums = {"A": 0.0, "B": 0.0}
        counts = {"A": 0.0, "B": 0.0}
        for batch, per_unit in cells.items():
            for u, ys in per_unit.items():
                g = "A" if u in a else "B" if u in b else None
                if g is None:
                    continue
                sums[g] += weight[batch] * sum(ys)
                counts[g] += weight[batch] * len(ys)
        if counts["A"] == 0 or counts["B"] == 0:
            return None
        return sums["A"] / counts["A"] - sums["B"] / counts["B"]

    full = contrast(dict.fromkeys(cells, 1))
    assert full is not None
    assert abs(cmp.naive.estimate - full) < EXACT
    boots = [c for w in _loop_weights(sorted(cells), 80, 2) if (c := contrast(w)) is not None]
    se = statistics.stdev(boots)
    assert cmp.naive.se is not None
    assert abs(cmp.naive.se - se) < 1e-10
    assert cmp.naive.n_resamples == len(boots)
    alone = naive_group_contrast(records, a, b, n_boot=80, seed=2, reference="A")  # no fit needed
    assert abs(alone.estimate - full) < EXACT
    assert alone.se is not None
    assert abs(alone.se - se) < 1e-10
    z = full / se
    assert cmp.naive.z is not None
    assert abs(cmp.naive.z - z) < 1e-9
    assert cmp.naive.p_value is not None
    assert abs(cmp.naive.p_value - math.erfc(abs(z) / math.sqrt(2.0))) < 1e-12

    theta = dict(zip(fit.units, fit.theta, strict=True))
    model = sum(theta[u] for u in a) / len(a) - sum(theta[u] for u in b) / len(b)
    assert abs(cmp.model.estimate - model) < EXACT
    draws = [
        sum(row[boot.names.index(f"theta[{u}]")] for u in a) / len(a)
        - sum(row[boot.names.index(f"theta[{u}]")] for u in b) / len(b)
        for row in boot.draws
    ]
    assert cmp.model.se is not None
    assert abs(cmp.model.se - statistics.stdev(draws)) < 1e-10
    assert cmp.group_a == ("u00", "u02", "u05")
    assert cmp.group_b == ("u03", "u04")
    assert cmp.table["method"].to_list() == ["naive", "model"]
    assert cmp.table["p_value"].to_list() == [cmp.naive.p_value, cmp.model.p_value]


# ---------------------------------------------------------------- hand-set model side


def _fake_fit(units: tuple[str, ...], theta: tuple[float, ...]) -> SequentialGLMM:
    """A fit with chosen units and theta (the other fields from a real fit; compare reads only these)."""
    base = fit_sequential_glmm(_records([0.5, 0.0, -0.5], 30, 1), lags=1)
    table = pl.DataFrame(
        {
            "name": [f"theta[{u}]" for u in units],
            "term": ["theta"] * len(units),
            "level": list(units),
            "estimate": list(theta),
            "fixed": [False] * len(units),
        }
    )
    return dataclasses.replace(base, units=units, theta=theta, table=table)


def _fake_boot(fit: SequentialGLMM, draws: np.ndarray) -> GLMMBootstrap:
    return GLMMBootstrap(
        draws=draws,
        names=tuple(f"theta[{u}]" for u in fit.units),
        table=pl.DataFrame(),
        n_boot=draws.shape[0],
        n_failed=0,
        failures=(),
        level=0.95,
        seed=0,
    )


def _hand_records(units: tuple[str, ...]) -> pl.DataFrame:
    rng = np.random.default_rng(0)
    rows = [
        {"batch_id": f"b{b}", "batch_position": t, "item_id": u, "score": float(rng.integers(0, 2))}
        for b in range(8)
        for t, u in enumerate(units)
    ]
    return pl.DataFrame(rows)


@pytest.mark.parametrize(
    ("gap", "reference", "outcome"),
    [
        (1.0, "A", "correct"),  # z = 1 / 0.4 = 2.5: p = 0.0124
        (1.0, "B", "wrong"),
        (-1.0, "B", "correct"),
        (-1.0, "A", "wrong"),
        (0.6, "A", "inconclusive"),  # z = 1.5: p = 0.134
        (-0.6, "B", "inconclusive"),
        (1.0, None, None),
    ],
)
def test_outcome_labels(gap: float, reference: str | None, outcome: str | None) -> None:
    units = ("p", "q", "r", "s")
    fit = _fake_fit(units, (gap, gap, 0.0, 0.0))
    # Two draws whose A-minus-B contrast is gap -/+ d: sd(ddof=1) = d * sqrt(2) = 0.4 for d = 0.4 / sqrt(2).
    offsets = np.array([-0.4, 0.4]) / math.sqrt(2.0)
    draws = np.array([[gap + o, gap + o, 0.0, 0.0] for o in offsets])
    cmp = compare_groups(
        _hand_records(units),
        fit,
        _fake_boot(fit, draws),
        ["p", "q"],
        ["r", "s"],
        reference=reference,  # type: ignore[arg-type]
        n_boot=20,
    )
    assert cmp.model.estimate == pytest.approx(gap, abs=EXACT)
    assert cmp.model.se == pytest.approx(0.4, abs=EXACT)
    z = gap / 0.4
    assert cmp.model.z == pytest.approx(z, abs=1e-12)
    assert cmp.model.p_value == pytest.approx(math.erfc(abs(z) / math.sqrt(2.0)), abs=1e-15)
    assert cmp.model.outcome == outcome


def test_alpha_moves_the_outcome() -> None:
    units = ("p", "q")
    fit = _fake_fit(units, (0.6, 0.0))
    draws = np.array([[0.6 - 0.4 / math.sqrt(2.0), 0.0], [0.6 + 0.4 / math.sqrt(2.0), 0.0]])
    boot = _fake_boot(fit, draws)
    records = _hand_records(units)
    assert (
        compare_groups(records, fit, boot, ["p"], ["q"], reference="A").model.outcome
        == "inconclusive"
    )
    loose = compare_groups(records, fit, boot, ["p"], ["q"], reference="A", alpha=0.2)
    assert loose.model.outcome == "correct"  # p = 0.134 < 0.2


def test_no_variation_gives_none_with_reason() -> None:
    units = ("p", "q")
    fit = _fake_fit(units, (0.6, 0.0))
    boot = _fake_boot(fit, np.array([[0.6, 0.0], [0.6, 0.0], [0.6, 0.0]]))
    cmp = compare_groups(_hand_records(units), fit, boot, ["p"], ["q"], reference="A")
    assert cmp.model.se is None
    assert cmp.model.p_value is None
    assert cmp.model.outcome is None
    assert cmp.model.reason is not None
    assert "do not vary" in cmp.model.reason


# ---------------------------------------------------------------- known truth


def test_known_truth_best_unit_and_group() -> None:
    theta = [2.0, 0.0, -0.2, 0.1, -0.1, 0.0]
    records = _records(theta, 60, 8)
    fit = fit_sequential_glmm(records, lags=1)
    boot = bootstrap_fits(records, fit, n_boot=40, seed=1)
    top = select_top(records, fit, boot)
    assert top.naive_top[0] == ("u00",)
    assert top.model_top[0] == ("u00",)
    assert top.naive_stability[0] is not None
    assert top.naive_stability[0] > 0.9
    assert top.model_stability[0] is not None
    assert top.model_stability[0] > 0.9
    right = compare_groups(records, fit, boot, ["u00", "u01"], ["u02", "u03"], reference="A")
    assert (right.naive.outcome, right.model.outcome) == ("correct", "correct")
    wrong = compare_groups(records, fit, boot, ["u00", "u01"], ["u02", "u03"], reference="B")
    assert (wrong.naive.outcome, wrong.model.outcome) == ("wrong", "wrong")


def test_two_unit_columns() -> None:
    base = _records([0.8, 0.0, -0.4, 0.3], 30, 4)
    records = base.with_columns(
        pl.col("item_id").str.slice(0, 2).alias("system_id"),
        pl.col("item_id").str.slice(2).alias("item"),
    ).drop("item_id")
    fit = fit_sequential_glmm(records, lags=1, unit=("system_id", "item"))
    boot = bootstrap_fits(records, fit, n_boot=10)
    assert fit.units == ("u0/0", "u0/1", "u0/2", "u0/3")
    top = select_top(records, fit, boot, unit=("system_id", "item"))
    assert top.naive_top[0][0] in fit.units
    cmp = compare_groups(records, fit, boot, ["u0/0"], ["u0/2"], unit=("system_id", "item"))
    assert cmp.naive.estimate > 0


# ---------------------------------------------------------------- refusals


def test_refusals(case: tuple[pl.DataFrame, SequentialGLMM, GLMMBootstrap]) -> None:
    records, fit, boot = case
    with pytest.raises(
        DesignError, match=r"group_a names unit\(s\) the fit does not know: \['nope', 'zz'\]"
    ):
        compare_groups(records, fit, boot, ["u00", "nope", "zz"], ["u01"])
    with pytest.raises(DesignError, match=r"group_b names .*\['x9'\]"):
        compare_groups(records, fit, boot, ["u00"], ["x9"])
    with pytest.raises(DesignError, match=r"share unit\(s\) \['u01', 'u02'\]"):
        compare_groups(records, fit, boot, ["u00", "u01", "u02"], ["u02", "u01"])
    with pytest.raises(DesignError, match=r"group_a repeats unit\(s\) \['u00'\]"):
        compare_groups(records, fit, boot, ["u00", "u00"], ["u01"])
    with pytest.raises(DesignError, match="non-empty"):
        compare_groups(records, fit, boot, [], ["u01"])
    with pytest.raises(DesignError, match="non-empty"):
        compare_groups(records, fit, boot, "u00", ["u01"])
    with pytest.raises(ConfigError, match="reference"):
        compare_groups(records, fit, boot, ["u00"], ["u01"], reference="C")  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="alpha"):
        compare_groups(records, fit, boot, ["u00"], ["u01"], alpha=1.5)
    with pytest.raises(DesignError, match=r"share unit\(s\) \['u01'\]"):
        naive_group_contrast(records, ["u01"], ["u01"])
    with pytest.raises(DesignError, match=r"does not know: \['q'\]"):
        naive_group_contrast(records, ["q"], ["u01"])
    with pytest.raises(ConfigError, match="unit"):
        select_top(records, fit, boot, unit="system_id")
    with pytest.raises(ConfigError, match="k must be"):
        select_top(records, fit, boot, k=7)
    with pytest.raises(ConfigError, match="n_boot"):
        select_top(records, fit, boot, n_boot=1)
    with pytest.raises(DesignError, match="units not in the fit"):
        select_top(records.filter(pl.col("item_id") != "u03"), fit, boot)
    with pytest.raises(DesignError, match="lack the column"):
        select_top(records.drop("batch_id"), fit, boot)
    other = fit_sequential_glmm(_records([0.5, 0.0, -0.5], 30, 1), lags=1)
    with pytest.raises(DesignError, match="theta"):
        select_top(records, fit, bootstrap_fits(_records([0.5, 0.0, -0.5], 30, 1), other, n_boot=5))
