"""The one Satterthwaite (``jurymeter.stats.satterthwaite``) against its definition worked by hand, and its NaN rule.

Independent references: Satterthwaite (1946) eq. 1,
nu = (sum a_k MS_k)^2 / sum (a_k MS_k)^2 / df_k, evaluated on small literals in
plain Python; for a balanced ``s x i x j`` the error variance's combination
written out from the expected mean squares (Brennan 2001, table 3.3).
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from jurymeter.stats.design import Design
from jurymeter.stats.dstudy import delta_df, delta_df_of
from jurymeter.stats.satterthwaite import component_combination_df, satterthwaite_df

EXACT = 1e-12


def test_the_formula_on_literals() -> None:
    # V = 2*3 - 1*1.5 + 0.5*4 = 6.5; D = 36/10 + 2.25/20 + 4/5 = 4.5125
    nu = satterthwaite_df(np.array([2.0, -1.0, 0.5]), np.array([3.0, 1.5, 4.0]), np.array([10.0, 20.0, 5.0]))
    assert nu == pytest.approx(6.5**2 / (36 / 10 + 2.25 / 20 + 4 / 5), rel=EXACT)


def test_one_mean_square_has_its_own_df() -> None:
    assert satterthwaite_df(np.array([0.25]), np.array([7.0]), np.array([13.0])) == pytest.approx(13.0, rel=EXACT)


def test_a_zero_term_is_left_out_whatever_its_df() -> None:
    # Zero weight (or a zero mean square) with df 0: no variance added, the result is that of the rest.
    with_zero = satterthwaite_df(np.array([1.0, 0.0, 1.0]), np.array([2.0, 5.0, 0.0]), np.array([4.0, 0.0, 0.0]))
    assert with_zero == pytest.approx(4.0, rel=EXACT)


@pytest.mark.parametrize(("a", "ms", "df"), [
    ([0.0, 0.0], [1.0, 2.0], [3.0, 4.0]),  # no term: V is an exact 0
    ([1.0, 1.0], [2.0, 3.0], [5.0, 0.0]),  # a non-zero term without degrees of freedom
    ([1.0, 1.0], [2.0, 3.0], [5.0, -1.0]),
    ([1.0, 1.0], [2.0, math.nan], [5.0, 4.0]),  # an undefined mean square
])
def test_undefined_cases_are_nan(a: list[float], ms: list[float], df: list[float]) -> None:
    assert math.isnan(satterthwaite_df(np.array(a), np.array(ms), np.array(df)))


def test_a_negative_combination_keeps_the_formula() -> None:
    # V = 1 - 3 = -2 (an error variance estimated below zero): nu = 4 / (1/2 + 9/6), as the D-study reports it.
    nu = satterthwaite_df(np.array([1.0, -1.0]), np.array([1.0, 3.0]), np.array([2.0, 6.0]))
    assert nu == pytest.approx(4 / (1 / 2 + 9 / 6), rel=EXACT)


def test_sigma2_delta_of_s_x_i_x_j_written_out() -> None:
    """s x i x j, n_i items and n_j judges: sigma2_delta = sigma2_si/n_i + sigma2_sj/n_j + sigma2_sij/(n_i n_j) is
    (MS_si + MS_sj - MS_sij) / (n_i n_j) at the observed sizes (EMS: MS_si = sij + n_j si, MS_sj = sij + n_i sj)."""
    design = Design.parse("s x i x j")
    sizes = {"s": 5, "i": 8, "j": 3}
    n_s, n_i, n_j = sizes["s"], sizes["i"], sizes["j"]
    df = {"s": n_s - 1, "i": n_i - 1, "j": n_j - 1, "si": (n_s - 1) * (n_i - 1), "sj": (n_s - 1) * (n_j - 1),
          "ij": (n_i - 1) * (n_j - 1), "sij": (n_s - 1) * (n_i - 1) * (n_j - 1)}
    ms = {"s": 9.0, "i": 4.0, "j": 6.0, "si": 2.5, "sj": 1.75, "ij": 1.2, "sij": 0.9}
    labels = [design.label(e) for e in design.effects]
    combo = ms["si"] + ms["sj"] - ms["sij"]
    by_hand = combo**2 / (ms["si"] ** 2 / df["si"] + ms["sj"] ** 2 / df["sj"] + ms["sij"] ** 2 / df["sij"])
    ms_v = np.array([ms[k] for k in labels])
    df_v = np.array([float(df[k]) for k in labels])
    n = {"i": float(n_i), "j": float(n_j)}
    assert delta_df(ms_v, df_v, design, sizes, n) == pytest.approx(by_hand, rel=1e-12)
    # The same with the matrix given (the Henderson path passes its own C; balanced data: C = EMS).
    assert delta_df_of(design.ems_matrix(sizes), ms_v, df_v, design, n) == pytest.approx(by_hand, rel=1e-12)
    # and the general entry point, with the error variance's weights written out
    weights = np.array([{"si": 1 / n_i, "sj": 1 / n_j, "sij": 1 / (n_i * n_j)}.get(k, 0.0) for k in labels])
    assert component_combination_df(weights, design.ems_matrix(sizes), ms_v, df_v) == pytest.approx(by_hand, rel=1e-12)
