"""Henderson's Method I (`jurymeter.stats.henderson`) against references that share none of its code.

| contract | independent reference |
| --- | --- |
| components, SS and df on incomplete crossed, one-judge and nested designs | brute force from the textbook: explicit incidence matrices, T = y'Py, E[T] = tr(P Z_c Z_c'), the SS of every design written out by hand (Searle, Casella and McCulloch 1992, section 5.2) |
| equal to the balanced EMS solution on complete data | `gstudy.fit_gstudy` on the dense array (Cornfield-Tukey EMS) |
| unbiased with cells missing at random and with items missing per system | simulation with known components (numpy), mean of 200 fits within 3 Monte Carlo SE |
| same estimator as a published implementation | `generalizit` (PyPI), Henderson I on incomplete data, rounded to 4 decimals |
| errors | hand-built bad inputs |
"""

from __future__ import annotations

import contextlib
import io

import numpy as np
import polars as pl
import pytest

from jurymeter.errors import DesignError
from jurymeter.stats.design import Design
from jurymeter.stats.gstudy import fit_gstudy
from jurymeter.stats.henderson import HendersonFit, henderson1

# Brute force and the estimator do the same arithmetic in different orders on
# data of order 1-10 with N <= 600: agreement to 1e-8 leaves six orders of margin.
BRUTE_TOL = 1e-8
# Balanced data: both sides sum the same T's; 1e-12 relative to the components.
BALANCED_TOL = 1e-12
# generalizit rounds its T values, its coefficient table and its components to
# 4 decimals (its printed precision); half a unit of the 4th decimal from the last
# rounding plus what the rounded T's and coefficients carry through its solve
# (measured: at most 5.0e-5 on these cases).
GENERALIZIT_TOL = 1e-4
MC_SIMULATIONS = 200
MC_SE = 3.0

COLUMNS = {"s": "system_id", "i": "item_id", "j": "judge_id", "g": "generation", "r": "replicate"}

# Every design's effects (label -> facet letters) and sums of squares written out
# by hand as signed T terms ("0" is the grand-mean term T_mu).
HAND = {
    "s x i x j x r:sij": {
        "s": ("s", "+s -0"),
        "i": ("i", "+i -0"),
        "j": ("j", "+j -0"),
        "si": ("si", "+si -s -i +0"),
        "sj": ("sj", "+sj -s -j +0"),
        "ij": ("ij", "+ij -i -j +0"),
        "sij": ("sij", "+sij -si -sj -ij +s +i +j -0"),
        "r:sij": ("sijr", "+sijr -sij"),
    },
    "s x i x j": {
        "s": ("s", "+s -0"),
        "i": ("i", "+i -0"),
        "j": ("j", "+j -0"),
        "si": ("si", "+si -s -i +0"),
        "sj": ("sj", "+sj -s -j +0"),
        "ij": ("ij", "+ij -i -j +0"),
        "sij": ("sij", "+sij -si -sj -ij +s +i +j -0"),
    },
    "s x i x g:si x r:sig": {
        "s": ("s", "+s -0"),
        "i": ("i", "+i -0"),
        "si": ("si", "+si -s -i +0"),
        "g:si": ("sig", "+sig -si"),
        "r:sig": ("sigr", "+sigr -sig"),
    },
    "s x i x j x g:si x r:sijg": {
        "s": ("s", "+s -0"),
        "i": ("i", "+i -0"),
        "j": ("j", "+j -0"),
        "si": ("si", "+si -s -i +0"),
        "sj": ("sj", "+sj -s -j +0"),
        "ij": ("ij", "+ij -i -j +0"),
        "sij": ("sij", "+sij -si -sj -ij +s +i +j -0"),
        "g:si": ("sig", "+sig -si"),
        "jg:si": ("sijg", "+sijg -sig -sij +si"),
        "r:sijg": ("sijgr", "+sijgr -sijg"),
    },
    "(c:m) x i x j": {
        "m": ("m", "+m -0"),
        "i": ("i", "+i -0"),
        "j": ("j", "+j -0"),
        "c:m": ("mc", "+mc -m"),
        "mi": ("mi", "+mi -m -i +0"),
        "mj": ("mj", "+mj -m -j +0"),
        "ij": ("ij", "+ij -i -j +0"),
        "ci:m": ("mci", "+mci -mc -mi +m"),
        "cj:m": ("mcj", "+mcj -mc -mj +m"),
        "mij": ("mij", "+mij -mi -mj -ij +m +i +j -0"),
        "cij:m": ("mcij", "+mcij -mci -mcj -mij +mc +mi +mj -m"),
    },
}


# ---------------------------------------------------------------- data
def simulate_records(
    spec: str,
    sizes: dict[str, int],
    sigma2: dict[str, float],
    rng: np.random.Generator,
    *,
    mean: float = 3.0,
) -> pl.DataFrame:
    """Complete records of the random model: one normal draw per level of every effect.

    A nested facet's axis holds its levels within each nest, so an effect's draw
    varies over the axes of its letters only (plain numpy, no jurymeter code).
    """
    letters = list(sizes)
    shape = [sizes[f] for f in letters]
    x = np.full(shape, mean)
    for label, (effect, _) in HAND[spec].items():
        draw_shape = [sizes[f] if f in effect else 1 for f in letters]
        x = x + rng.normal(scale=np.sqrt(sigma2[label]), size=draw_shape)
    index = np.indices(shape).reshape(len(letters), -1)
    frame = {COLUMNS.get(f, f): (np.char.add(f, index[a].astype(str)) if f in "sijmc" else index[a])
             for a, f in enumerate(letters)}
    return pl.DataFrame({**frame, "score": x.ravel()})


def drop_cells(frame: pl.DataFrame, keys: list[str], p: float, rng: np.random.Generator) -> pl.DataFrame:
    """Drop whole cells of ``keys`` completely at random with probability ``p``."""
    cells = frame.select(keys).unique(maintain_order=True)
    kept = cells.filter(pl.Series(rng.random(cells.height) >= p))
    return frame.join(kept, on=keys, how="semi")


def drop_records(frame: pl.DataFrame, p: float, rng: np.random.Generator) -> pl.DataFrame:
    """Drop single records at random (unequal replicates or generations)."""
    return frame.filter(pl.Series(rng.random(frame.height) >= p))


def items_missing_per_system(frame: pl.DataFrame, share: float, rng: np.random.Generator) -> pl.DataFrame:
    """Each system loses a random ``share`` of its items (all judges, generations, replicates)."""
    return drop_cells(frame, ["system_id", "item_id"], share, rng)


# ---------------------------------------------------------------- brute force
def _incidence(frame: pl.DataFrame, letters: str, columns: dict[str, str]) -> np.ndarray:
    n = frame.height
    if not letters:
        return np.ones((n, 1))
    keys = [tuple(row) for row in frame.select([columns[f] for f in letters]).iter_rows()]
    levels = {k: a for a, k in enumerate(dict.fromkeys(keys))}
    z = np.zeros((n, len(levels)))
    for row, k in enumerate(keys):
        z[row, levels[k]] = 1.0
    return z


def brute_force(frame: pl.DataFrame, spec: str, columns: dict[str, str]) -> dict[str, tuple[float, float, float]]:
    """Henderson I from the definitions: label -> (sigma2, SS, df), by dense matrix algebra."""
    y = frame["score"].to_numpy()
    n = len(y)
    table = HAND[spec]
    labels = list(table)
    residual = max((v[0] for v in table.values()), key=len)
    z_comp = {lab: (np.eye(n) if effect == residual else _incidence(frame, effect, columns))
              for lab, (effect, _) in table.items()}
    gram = {lab: z @ z.T for lab, z in z_comp.items()}
    t_value: dict[str, float] = {}
    t_coef: dict[str, np.ndarray] = {}
    for _, (_, formula) in table.items():
        for term in formula.split():
            letters = term[1:]
            if letters in t_value:
                continue
            z = _incidence(frame, "" if letters == "0" else letters, columns)
            projection = z @ np.linalg.inv(z.T @ z) @ z.T
            t_value[letters] = float(y @ projection @ y)
            t_coef[letters] = np.array([np.trace(projection @ gram[lab]) for lab in labels])
    ss = np.zeros(len(labels))
    coef = np.zeros((len(labels), len(labels)))
    for row, lab in enumerate(labels):
        for term in table[lab][1].split():
            sign = 1.0 if term[0] == "+" else -1.0
            ss[row] += sign * t_value[term[1:]]
            coef[row] += sign * t_coef[term[1:]]
    sigma2 = np.linalg.solve(coef, ss)
    df = coef[:, labels.index(next(lab for lab, v in table.items() if v[0] == residual))]
    return {lab: (float(sigma2[k]), float(ss[k]), float(df[k])) for k, lab in enumerate(labels)}


def _truth(spec: str) -> dict[str, float]:
    return {lab: 0.3 + 0.15 * k for k, lab in enumerate(HAND[spec])}


def _incomplete_cases() -> list[tuple[str, str, pl.DataFrame, dict[str, str]]]:
    rng = np.random.default_rng(20240614)
    cases = []
    spec = "s x i x j x r:sij"
    full = simulate_records(spec, {"s": 4, "i": 7, "j": 3, "r": 3}, _truth(spec), rng)
    cases.append(("crossed, random cells and replicates missing", spec,
                  drop_records(drop_cells(full, ["system_id", "item_id", "judge_id"], 0.25, rng), 0.3, rng),
                  COLUMNS))
    spec = "s x i x j"
    full = simulate_records(spec, {"s": 5, "i": 9, "j": 3}, _truth(spec), rng)
    cases.append(("crossed, whole items missing for some systems", spec,
                  items_missing_per_system(drop_cells(full, ["system_id", "item_id", "judge_id"], 0.1, rng), 0.3, rng),
                  COLUMNS))
    spec = "s x i x g:si x r:sig"
    full = simulate_records(spec, {"s": 4, "i": 8, "g": 3, "r": 2}, _truth(spec), rng)
    cases.append(("one judge, unequal generations and replicates", spec,
                  drop_records(drop_cells(full, ["system_id", "item_id", "generation"], 0.3, rng), 0.25, rng),
                  COLUMNS))
    spec = "s x i x j x g:si x r:sijg"
    full = simulate_records(spec, {"s": 3, "i": 5, "j": 2, "g": 2, "r": 2}, _truth(spec), rng)
    cases.append(("generations and replicates as facets, cells missing", spec,
                  drop_records(items_missing_per_system(full, 0.2, rng), 0.2, rng), COLUMNS))
    spec = "(c:m) x i x j"
    full = simulate_records(spec, {"m": 3, "c": 3, "i": 6, "j": 3}, _truth(spec), rng)
    nested = {"m": "m", "c": "c", "i": "item_id", "j": "judge_id"}
    cases.append(("nested configurations, unequal per model, cells missing", spec,
                  drop_records(drop_cells(full, ["m", "c"], 0.2, rng), 0.2, rng), nested))
    return [(name, spec, frame, {f: cols[f] for f in Design.parse(spec).facets}) for name, spec, frame, cols in cases]


CASES = _incomplete_cases()


@pytest.mark.parametrize(("name", "spec", "frame", "columns"), CASES, ids=[c[0] for c in CASES])
def test_incomplete_designs_equal_the_brute_force_definition(
    name: str, spec: str, frame: pl.DataFrame, columns: dict[str, str]
) -> None:
    full_size = np.prod([frame[c].n_unique() for c in columns.values()])
    assert frame.height < full_size, f"{name}: the case must be incomplete"
    fit = henderson1(frame, spec, facets=columns)
    expected = brute_force(frame, spec, columns)
    assert set(fit.effects) == set(expected)
    for label, (sigma2, ss, df) in expected.items():
        scale = max(1.0, abs(ss))
        assert fit.component(label) == pytest.approx(sigma2, abs=BRUTE_TOL), (name, label)
        assert fit.ss[fit.effects.index(label)] == pytest.approx(ss, abs=BRUTE_TOL * scale), (name, label)
        assert fit.df[fit.effects.index(label)] == pytest.approx(df, abs=BRUTE_TOL), (name, label)
    assert fit.n_records == frame.height
    assert fit.grand_mean == pytest.approx(float(frame["score"].mean()), abs=1e-12)


@pytest.mark.parametrize(("name", "spec", "frame", "columns"), CASES, ids=[c[0] for c in CASES])
def test_sparse_fallback_equals_the_brute_force_definition(
    name: str, spec: str, frame: pl.DataFrame, columns: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A crossing too large for count tables (forced here) takes the group-code path: the same brute force."""
    import jurymeter.stats.henderson as henderson
    import jurymeter.stats.henderson_sums as henderson_sums

    monkeypatch.setattr(henderson_sums, "DENSE_CODES_PER_RECORD", -10**6)
    pattern = henderson.RecordPattern.of(frame, spec, facets=columns)
    assert pattern.tensor is None
    fit = pattern.fit()
    for label, (sigma2, _, df) in brute_force(frame, spec, columns).items():
        assert fit.component(label) == pytest.approx(sigma2, abs=BRUTE_TOL), (name, label)
        assert fit.df[fit.effects.index(label)] == pytest.approx(df, abs=BRUTE_TOL), (name, label)


def test_chisquare_draws_on_complete_data_are_the_balanced_paths() -> None:
    """On balanced data Henderson's C and df are the EMS ones: the draws of `resample_components`, same seed."""
    from jurymeter.stats.bootstrap import resample_components
    from jurymeter.stats.henderson import chisquare_draws

    spec, sizes = BALANCED[0]
    frame = simulate_records(spec, sizes, _truth(spec), np.random.default_rng(5))
    design = Design.parse(spec)
    x = np.empty([sizes[f] for f in design.facets])
    codes = [np.array([int(v[1:]) if isinstance(v, str) else int(v) for v in frame[COLUMNS.get(f, f)].to_list()])
             for f in design.facets]
    x[tuple(codes)] = frame["score"].to_numpy()
    balanced = fit_gstudy(x, design)
    fit = henderson1(frame, spec, facets={f: COLUMNS.get(f, f) for f in sizes})
    for method in ("pivotal", "percentile"):
        ours = chisquare_draws(fit, 50, seed=4, method=method)  # type: ignore[arg-type]
        theirs = resample_components(balanced, 50, seed=4, method=method)  # type: ignore[arg-type]
        np.testing.assert_allclose(ours, theirs, rtol=0, atol=1e-9 * float(np.max(np.abs(theirs))))
    with pytest.raises(DesignError, match="method"):
        chisquare_draws(fit, 5, method="bca")  # type: ignore[arg-type]


def test_lazy_frames_and_row_order_give_the_same_fit() -> None:
    _, spec, frame, columns = CASES[0]
    fit = henderson1(frame, spec, facets=columns)
    shuffled = frame.sample(fraction=1.0, shuffle=True, seed=3)
    lazy = henderson1(shuffled.lazy(), Design.parse(spec), facets=columns)
    np.testing.assert_allclose(lazy.sigma2, fit.sigma2, rtol=0, atol=BRUTE_TOL)


# ---------------------------------------------------------------- balanced data
BALANCED = [
    ("s x i x j x r:sij", {"s": 4, "i": 6, "j": 3, "r": 2}),
    ("s x i x j", {"s": 5, "i": 8, "j": 3}),
    ("s x i x g:si x r:sig", {"s": 3, "i": 6, "g": 3, "r": 2}),
    ("s x i x j x g:si x r:sijg", {"s": 3, "i": 4, "j": 2, "g": 2, "r": 2}),
    ("(c:m) x i x j", {"m": 3, "c": 2, "i": 5, "j": 3}),
]


@pytest.mark.parametrize(("spec", "sizes"), BALANCED, ids=[b[0] for b in BALANCED])
def test_complete_data_equal_the_balanced_ems_solution(spec: str, sizes: dict[str, int]) -> None:
    rng = np.random.default_rng(7)
    frame = simulate_records(spec, sizes, _truth(spec), rng)
    letters = list(sizes)
    columns = {f: COLUMNS.get(f, f) for f in letters}
    # The dense array in the design's axis order, filled from the records by their indices.
    design = Design.parse(spec)
    x = np.empty([sizes[f] for f in design.facets])
    codes = [np.array([int(v[1:]) if isinstance(v, str) else int(v) for v in frame[columns[f]].to_list()])
             for f in design.facets]
    x[tuple(codes)] = frame["score"].to_numpy()
    balanced = fit_gstudy(x, design)
    fit = henderson1(frame, spec, facets=columns)
    assert isinstance(fit, HendersonFit)
    assert fit.effects == balanced.effects
    scale = float(np.max(np.abs(balanced.sigma2)))
    np.testing.assert_allclose(fit.sigma2, balanced.sigma2, rtol=0, atol=BALANCED_TOL * scale)
    np.testing.assert_allclose(fit.ms, balanced.ms, rtol=BALANCED_TOL, atol=0)
    np.testing.assert_array_equal(fit.df, balanced.df)
    ems = design.ems_matrix(sizes)
    np.testing.assert_allclose(fit.coefficients, ems, rtol=0, atol=BALANCED_TOL * float(ems.max()))
    assert fit.sizes == balanced.sizes
    assert fit.dstudy_sizes == {f: float(sizes[f]) for f in design.facets if f not in ("s", "m")} | (
        {"m": float(sizes["m"])} if "m" in sizes else {}
    )
    assert fit.grand_mean == pytest.approx(balanced.grand_mean, abs=1e-12)


# ---------------------------------------------------------------- unbiased
def _simulate_fits(missing: str) -> tuple[np.ndarray, np.ndarray]:
    spec = "s x i x j x r:sij"
    truth = {"s": 0.5, "i": 1.0, "j": 0.3, "si": 0.4, "sj": 0.2, "ij": 0.3, "sij": 0.5, "r:sij": 1.0}
    rng = np.random.default_rng(11 if missing == "cells" else 12)
    estimates = []
    labels = list(HAND[spec])
    for _ in range(MC_SIMULATIONS):
        frame = simulate_records(spec, {"s": 6, "i": 16, "j": 3, "r": 2}, truth, rng)
        if missing == "cells":
            frame = drop_records(drop_cells(frame, ["system_id", "item_id", "judge_id"], 0.25, rng), 0.15, rng)
        else:
            frame = items_missing_per_system(frame, 0.35, rng)
        fit = henderson1(frame, spec)
        estimates.append([fit.component(lab) for lab in labels])
    return np.asarray(estimates), np.array([truth[lab] for lab in labels])


@pytest.mark.parametrize("missing", ["cells", "items per system"])
def test_unbiased_under_simulation(missing: str) -> None:
    estimates, truth = _simulate_fits(missing)
    mean = estimates.mean(axis=0)
    se = estimates.std(axis=0, ddof=1) / np.sqrt(len(estimates))
    assert np.all(np.abs(mean - truth) <= MC_SE * se), (missing, mean, truth, se)


# ---------------------------------------------------------------- generalizit
def _generalizit(frame: pl.DataFrame, spec: str, columns: dict[str, str]) -> dict[str, float]:
    generalizit = pytest.importorskip("generalizit")
    data = frame.select([pl.col(columns[f]).cast(pl.String).alias(f) for f in columns] + [
        (pl.col("score") - pl.col("score").mean()).alias("score")
    ]).to_pandas()
    tuples = {lab: tuple(effect) for lab, (effect, _) in HAND[spec].items()}
    tuples["mean"] = ()
    with contextlib.redirect_stdout(io.StringIO()):
        gt = generalizit.GeneralizIT(data, spec, "score", variance_tuple_dictionary=tuples)
        gt.calculate_anova()
    table = gt.design.anova_table
    return {lab: float(table.loc[lab, "Variance"]) for lab in HAND[spec]}


@pytest.mark.parametrize(("name", "spec", "frame", "columns"), CASES, ids=[c[0] for c in CASES])
def test_incomplete_designs_equal_generalizit(
    name: str, spec: str, frame: pl.DataFrame, columns: dict[str, str]
) -> None:
    theirs = _generalizit(frame, spec, columns)
    fit = henderson1(frame, spec, facets=columns)
    for label, value in theirs.items():
        assert fit.component(label) == pytest.approx(value, abs=GENERALIZIT_TOL), (name, label)


def test_generalizit_design_string_on_incomplete_crossed_data() -> None:
    """generalizit's own parser reads 's x i x j' (crossed, at most three facets): the same components."""
    generalizit = pytest.importorskip("generalizit")
    _, spec, frame, _ = CASES[1]
    data = frame.select(
        pl.col("system_id").alias("s"), pl.col("item_id").alias("i"), pl.col("judge_id").alias("j"),
        (pl.col("score") - pl.col("score").mean()).alias("score"),
    ).to_pandas()
    with contextlib.redirect_stdout(io.StringIO()):
        gt = generalizit.GeneralizIT(data, "s x i x j", "score")
        gt.calculate_anova()
    theirs = gt.design.anova_table["Variance"]
    fit = henderson1(frame, spec)
    names = {"s": "s", "i": "i", "j": "j", "si": "s x i", "sj": "s x j", "ij": "i x j", "sij": "s x i x j"}
    for label, name in names.items():
        assert fit.component(label) == pytest.approx(float(theirs[name]), abs=GENERALIZIT_TOL), label


# ---------------------------------------------------------------- sizes and errors
def test_dstudy_sizes_are_harmonic_means_of_observed_counts() -> None:
    # Hand-built: system a sees items x, y (judge p on both, q on x only); b and c see x, y, z with both judges.
    rows = [("a", "x", "p"), ("a", "x", "q"), ("a", "y", "p")] + [
        (s, i, j) for s in "bc" for i in "xyz" for j in "pq"
    ]
    frame = pl.DataFrame(rows, schema=["system_id", "item_id", "judge_id"], orient="row").with_columns(
        score=pl.Series(np.sin(np.arange(15.0)) * 2)
    )
    fit = henderson1(frame, "s x i x j")
    assert fit.sizes == {"s": 3, "i": 3, "j": 2}
    assert fit.dstudy_sizes["i"] == pytest.approx(3 / (1 / 2 + 1 / 3 + 1 / 3))
    assert fit.dstudy_sizes["j"] == 2.0
    assert fit.levels == {"s": 3, "i": 3, "j": 2, "si": 8, "sj": 6, "ij": 6, "sij": 15}
    assert fit.df.tolist() == [2.0, 2.0, 1.0, 3.0, 2.0, 2.0, 2.0]


def test_nested_sizes_count_levels_within_each_nest() -> None:
    rng = np.random.default_rng(5)
    spec = "s x i x g:si x r:sig"
    frame = simulate_records(spec, {"s": 2, "i": 3, "g": 3, "r": 2}, _truth(spec), rng)
    # (s0, i0) keeps one generation, (s1, i2) two; every other pair keeps three.
    frame = frame.filter(
        ~((pl.col("system_id") == "s0") & (pl.col("item_id") == "i0") & (pl.col("generation") > 0))
        & ~((pl.col("system_id") == "s1") & (pl.col("item_id") == "i2") & (pl.col("generation") == 2))
    )
    fit = henderson1(frame, spec)
    assert fit.sizes["g"] == 3
    assert fit.dstudy_sizes["g"] == pytest.approx(6 / (1 / 1 + 1 / 2 + 4 / 3))
    assert fit.dstudy_sizes["r"] == pytest.approx(2.0)


def test_errors_name_the_problem() -> None:
    _, spec, frame, _ = CASES[0]
    with pytest.raises(DesignError, match="replicate facet"):
        henderson1(frame, "s x i x j")
    with pytest.raises(DesignError, match=r"columns \['rater'\] are missing"):
        henderson1(frame, spec, facets={"j": "rater"})
    with pytest.raises(DesignError, match=r"letters \['q'\] have no column"):
        henderson1(frame, "s x q")
    with pytest.raises(DesignError, match="finite"):
        henderson1(frame.with_columns(pl.lit(float("nan")).alias("score")), spec)
    with pytest.raises(DesignError, match="no non-null"):
        henderson1(frame.with_columns(pl.lit(None, dtype=pl.Float64).alias("score")), spec)
    with pytest.raises(DesignError, match="null values"):
        henderson1(frame.with_columns(pl.lit(None, dtype=pl.String).alias("judge_id")), spec)
    one_judge = frame.filter(pl.col("judge_id") == "j0")
    with pytest.raises(DesignError, match="no degrees of freedom"):
        henderson1(one_judge, spec)
    # Each system sees its own items only: si is not separable from i.
    disjoint = pl.DataFrame({
        "system_id": [s for s in "ab" for _ in range(6)],
        "item_id": [f"{s}{k}" for s in "ab" for k in range(3) for _ in range(2)],
        "judge_id": ["p", "q"] * 6,
        "score": np.arange(12.0) ** 1.5,
    })
    with pytest.raises(DesignError, match=r"degrees of freedom|identify"):
        henderson1(disjoint, "s x i x j")
    # Each system scored by its own judge (the MT-Bench single samples' shape): the message says what
    # a user can do, not "drop that facet from the design", which no option does.
    own_judge = pl.DataFrame({
        "system_id": [s for s in "abc" for _ in range(8)],
        "item_id": [f"i{k}" for _ in "abc" for k in range(4) for _ in range(2)],
        "judge_id": [f"judge-{s}" for s in "abc" for _ in range(8)],
        "replicate": [r for _ in "abc" for _ in range(4) for r in range(2)],
        "score": np.sin(np.arange(24.0)) + 3,
    })
    with pytest.raises(DesignError, match=r"no two judges scored the same system.*judge universe of one judge"):
        henderson1(own_judge, "s x i x j x r:sij")


def test_null_scores_are_left_out() -> None:
    _, spec, frame, _ = CASES[0]
    with_nulls = pl.concat([frame, frame.head(5).with_columns(pl.lit(None, dtype=pl.Float64).alias("score"))])
    np.testing.assert_allclose(henderson1(with_nulls, spec).sigma2, henderson1(frame, spec).sigma2, atol=BRUTE_TOL, rtol=0)


def test_every_effect_of_every_design_is_in_the_hand_tables() -> None:
    # Guard for the brute force: the hand-written tables cover each design's effects.
    for spec, table in HAND.items():
        assert set(Design.parse(spec).labels) == set(table), spec
