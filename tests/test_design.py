"""The EMS engine against definitions: brute-force projections and simulated truth."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from jurymeter.errors import DesignError
from jurymeter.stats.design import Design
from jurymeter.stats.gstudy import TermSums, fit_gstudy, fit_terms, mean_squares, simulate_design

# Relative tolerance between two exact computations of one quantity (rounding only).
EXACT = 1e-9

DESIGNS = {
    "s x i x j x r:sij": {"s": 4, "i": 5, "j": 3, "r": 2},
    "s x i x j": {"s": 3, "i": 4, "j": 5},
    "(g:i) x j": {"i": 6, "g": 3, "j": 4},
    "(c:m) x i x j": {"m": 3, "c": 2, "i": 4, "j": 3},
    "s x (i:t) x j": {"s": 3, "t": 2, "i": 3, "j": 2},
}


def test_parse_and_labels() -> None:
    d = Design.parse("s x i x j x r:sij")
    assert d.facets == ("s", "i", "j", "r")
    assert d.labels == ("s", "i", "j", "si", "sj", "ij", "sij", "r:sij")
    g = Design.parse("(g:i) x j")
    assert g.labels == ("i", "j", "g:i", "ij", "gj:i")
    c = Design.parse("(c:m) x i x j")
    assert set(c.labels) == {"m", "i", "j", "c:m", "mi", "mj", "ij", "ci:m", "cj:m", "mij", "cij:m"}


@pytest.mark.parametrize("bad", ["", "S x i", "s x s", "a:a", "s x (i:", "sx i"])
def test_bad_specs_raise_design_error(bad: str) -> None:
    with pytest.raises(DesignError):
        Design.parse(bad)


def _indicator(design: Design, effect: frozenset[str], shape: tuple[int, ...]) -> np.ndarray:
    """Observation-by-cell indicator of an effect's level combinations."""
    axes = [k for k, f in enumerate(design.facets) if f in effect]
    index = np.indices(shape).reshape(len(shape), -1)
    if not axes:
        return np.ones((index.shape[1], 1))
    cells = np.ravel_multi_index(index[axes], [shape[a] for a in axes])
    out = np.zeros((index.shape[1], int(np.prod([shape[a] for a in axes]))))
    out[np.arange(index.shape[1]), cells] = 1.0
    return out


def _projected_norm2(basis: np.ndarray, y: np.ndarray) -> tuple[float, int]:
    coef, *_ = np.linalg.lstsq(basis, y, rcond=None)
    fitted = basis @ coef
    return float(fitted @ fitted), int(np.linalg.matrix_rank(basis))


def brute_force_ss(x: np.ndarray, design: Design) -> tuple[np.ndarray, np.ndarray]:
    """SS and df from the definition: the part of the S-cell space orthogonal to all sub-effects."""
    y = x.ravel()
    ss, df = [], []
    for effect in design.effects:
        lower = [t for t in (frozenset(), *design.effects) if t < effect]
        full, rank_full = _projected_norm2(_indicator(design, effect, x.shape), y)
        sub = np.hstack([_indicator(design, t, x.shape) for t in lower])
        part, rank_sub = _projected_norm2(sub, y)
        ss.append(full - part)
        df.append(rank_full - rank_sub)
    return np.asarray(ss), np.asarray(df, dtype=float)


@pytest.mark.parametrize("spec", DESIGNS)
def test_mean_squares_equal_the_brute_force_definition(spec: str) -> None:
    design = Design.parse(spec)
    sizes = DESIGNS[spec]
    x = np.random.default_rng(7).normal(size=[sizes[f] for f in design.facets]) * 3 + 5
    df, ss, _ = mean_squares(x, design)
    ss_ref, df_ref = brute_force_ss(x, design)
    np.testing.assert_allclose(ss, ss_ref, rtol=EXACT, atol=1e-9)
    np.testing.assert_array_equal(df, df_ref)
    # The effects partition the total sum of squares about the grand mean.
    assert ss.sum() == pytest.approx(((x - x.mean()) ** 2).sum(), rel=EXACT)


@pytest.mark.parametrize("spec", [*DESIGNS, "s x i x j x g:si x r:sijg"])
def test_term_sums_over_chunks_of_any_unnested_facet_equal_the_brute_force_definition(spec: str) -> None:
    design = Design.parse(spec)
    sizes = DESIGNS.get(spec, {"s": 3, "i": 5, "j": 2, "g": 2, "r": 2})
    x = np.random.default_rng(3).normal(size=[sizes[f] for f in design.facets]) * 3 + 5
    ss_ref, df_ref = brute_force_ss(x, design)
    whole = fit_gstudy(x, design)
    for facet in (f for f in design.facets if not design.nests[f]):
        axis = design.facets.index(facet)
        n = x.shape[axis]
        for cuts in ([n], [1] * n, [n - 1, 1], [2, n - 2] if n > 2 else [n]):
            terms = TermSums(design, facet)
            start = 0
            for size in cuts:  # chunks of uneven sizes along the facet's axis
                terms.add(np.take(x, range(start, start + size), axis=axis))
                start += size
            df, ss, _ = terms.mean_squares()
            np.testing.assert_allclose(ss, ss_ref, rtol=EXACT, atol=1e-9)
            np.testing.assert_array_equal(df, df_ref)
            fit = fit_terms(terms)
            assert fit.sizes == whole.sizes
            assert fit.grand_mean == pytest.approx(x.mean(), rel=1e-14)
            np.testing.assert_allclose(fit.sigma2, whole.sigma2, rtol=1e-9, atol=1e-12)
    with pytest.raises(DesignError, match="differ from the first chunk"):
        TermSums(design, design.facets[0]).add(x).add(x[..., :1])


def _simulate(design: Design, sizes: dict[str, int], sigma2: dict[str, float], rng) -> np.ndarray:
    return simulate_design(design, sizes, sigma2, rng, grand_mean=3.0)


@pytest.mark.parametrize("spec", ["s x i x j x r:sij", "(g:i) x j", "(c:m) x i x j"])
def test_components_are_unbiased_under_simulation(spec: str) -> None:
    design = Design.parse(spec)
    sizes = {k: v + 2 for k, v in DESIGNS[spec].items()}
    rng = np.random.default_rng(11)
    truth = {label: 0.2 + 0.15 * k for k, label in enumerate(design.labels)}
    draws = np.array([fit_gstudy(_simulate(design, sizes, truth, rng), design).sigma2 for _ in range(400)])
    mean, se = draws.mean(axis=0), draws.std(axis=0, ddof=1) / np.sqrt(len(draws))
    target = np.array([truth[label] for label in design.labels])
    assert np.all(np.abs(mean - target) < 3 * se + 1e-12), (mean, target, se)


def test_one_level_facet_is_refused() -> None:
    design = Design.parse("s x i x j x r:sij")
    with pytest.raises(DesignError, match="no degrees of freedom"):
        fit_gstudy(np.ones((3, 3, 3, 1)) + np.random.default_rng(0).normal(size=(3, 3, 3, 1)), design)


def test_ems_matrix_is_the_textbook_one_for_the_crossed_design() -> None:
    # Brennan (2001) table 3.3 for p x i x r: E[MS_p] = s2_pir + n_r s2_pr + n_i s2_pi + n_i n_r s2_p.
    design = Design.parse("p x i x r")
    n = {"p": 5, "i": 4, "r": 3}
    c = design.ems_matrix(n)
    row = dict(zip(design.labels, c[design.labels.index("p")], strict=True))
    assert row == {"p": 12, "i": 0, "r": 0, "pi": 3, "pr": 4, "ir": 0, "pir": 1}
    assert list(itertools.chain(*(c[k, :k] for k in range(len(c))))) == [0] * (len(c) * (len(c) - 1) // 2)
