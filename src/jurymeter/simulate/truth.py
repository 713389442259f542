"""The truth of a simulated dump: parameters, design, drawn effects, variance components.

JSON-serialisable (plain Python types only), with the population and realised
variance components of the G-theory model and their CyclicJudge mapping
([Zhu2026] Eq. 1, one system at a time); ``docs/simulation.md`` lists the keys.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import polars as pl

from jurymeter.simulate.faults import _empty_faults
from jurymeter.simulate.params import SimulationParams, _plain


def _centred_var(x: np.ndarray, axes: tuple[int, ...], df: int) -> float | None:
    """Sum of squares of ``x`` centred along ``axes``, divided by ``df``.

    Centring sequentially along every axis of a balanced array leaves its
    highest-order interaction contrast, whose sum of squares over its degrees
    of freedom is the ANOVA-style realised variance of the drawn effects.
    """
    if df <= 0:
        return None
    c = x.astype(np.float64, copy=True)
    for ax in axes:
        c = c - c.mean(axis=ax, keepdims=True)
    return float(np.sum(c * c) / df)


def _sample_var(x: np.ndarray) -> float | None:
    return float(np.var(x, ddof=1)) if x.size > 1 else None


def _sigmoid(x: np.ndarray) -> np.ndarray:
    return 0.5 * (1.0 + np.tanh(0.5 * x))


def _family_support(
    p: SimulationParams,
    *,
    eta_oij: np.ndarray,
    q_j: np.ndarray,
    weighted_key: np.ndarray,
    pairs: np.ndarray,
    sys_fam: list[str],
    jud_fam: list[str],
) -> dict[str, Any]:
    r"""Exact expected support matrix of the reconciled outcomes ([Awuni2026] Sec. 4-5).

    For pair ``(a, b)`` judged by ``j`` on item ``i`` in both orders, with
    :math:`s = \sigma(\eta - \tau)`, :math:`t = \sigma(\eta + \tau)` and
    :math:`q_j` the position-following share, slot A wins with probability
    :math:`q_j + (1-q_j)s`, slot B with :math:`(1-q_j)(1-t)`.  The
    counterbalanced outcome (``stats.pairwise.games.reconcile``) gives ``a``
    :math:`1/2 + (P(a \text{ wins both}) - P(b \text{ wins both}))/2` when both
    records are hard, and the mean of the two records' expected scores when
    either is weighted.  A cell (judge family ``h``, candidate family ``f``) is
    the mean over the cross-family outcomes of judges of ``h`` of the expected
    support of the candidate of ``f``.  Exact when no record is weighted or no
    judge follows position (a followed weighted record reads as hard).
    """
    weighted = bool(weighted_key.any())
    if weighted and bool(np.any(q_j > 0.0)):
        return {
            "available": False,
            "reason": "weighted records with position-following judges: a followed weighted "
            "record (preference 1) reconciles as a hard one, so no closed form is given",
        }
    tau = p.tie_threshold
    e1, e2 = eta_oij[0::2], eta_oij[1::2]  # (k, i, j): a shown first, b shown first
    q = q_j[None, None, :]
    s1, t1, s2, t2 = _sigmoid(e1 - tau), _sigmoid(e1 + tau), _sigmoid(e2 - tau), _sigmoid(e2 + tau)
    a_first_wins = q + (1.0 - q) * s1
    b_second_wins = (1.0 - q) * (1.0 - t1)
    b_first_wins = q + (1.0 - q) * s2
    a_second_wins = (1.0 - q) * (1.0 - t2)
    hard = 0.5 + 0.5 * (a_first_wins * a_second_wins - b_second_wins * b_first_wins)
    m1 = q + (1.0 - q) * 0.5 * (s1 + t1)
    m2 = q + (1.0 - q) * 0.5 * (s2 + t2)
    soft = 0.5 * (m1 + 1.0 - m2)
    both_hard = ~(weighted_key[0::2] | weighted_key[1::2])  # (k, i, g, j, r)
    e_a = np.where(both_hard, hard[:, :, None, :, None], soft[:, :, None, :, None])
    per_kj = e_a.sum(axis=(1, 2, 4))  # (k, j)
    n_per = e_a.shape[1] * e_a.shape[2] * e_a.shape[4]
    jf = sorted(set(jud_fam))
    fam_a = [sys_fam[a] for a in pairs[:, 0].tolist()]
    fam_b = [sys_fam[b] for b in pairs[:, 1].tolist()]
    cross = [k for k in range(pairs.shape[0]) if fam_a[k] != fam_b[k]]
    cf = sorted({fam_a[k] for k in cross} | {fam_b[k] for k in cross})
    total = np.zeros((len(jf), len(cf)))
    count = np.zeros((len(jf), len(cf)))
    for k in cross:
        ca, cb = cf.index(fam_a[k]), cf.index(fam_b[k])
        for j, fam in enumerate(jud_fam):
            h = jf.index(fam)
            total[h, ca] += per_kj[k, j]
            total[h, cb] += n_per - per_kj[k, j]
            count[h, ca] += n_per
            count[h, cb] += n_per
    rows = [
        {
            "judge_family": jf[h],
            "candidate_family": cf[c],
            "support": float(total[h, c] / count[h, c]) if count[h, c] else None,
            "n": int(count[h, c]),
        }
        for h in range(len(jf))
        for c in range(len(cf))
    ]
    return {"available": True, "reason": None, "cells": rows}


def _truth(
    p: SimulationParams,
    *,
    systems: pl.DataFrame,
    judges: pl.DataFrame,
    item_ids: np.ndarray,
    model_of: np.ndarray,
    effects: dict[str, np.ndarray],
    pairs: np.ndarray,
    counts: dict[str, int],
) -> dict[str, Any]:
    """Assemble the JSON-serialisable truth (plain Python types only)."""
    e = effects
    n_m = int(model_of.max()) + 1
    population = _population(p)
    gamma = e["nu_j"] - e["nu_j"].mean()
    sys_rows, jud_rows = _registry_rows(systems, judges, model_of, e, gamma)
    item_rows = [
        {
            "item_id": str(item_ids[i]),
            "nu_i": float(e["nu_i"][i]),
            "log_length_effect": float(e["log_length_i"][i]),
        }
        for i in range(p.n_items)
    ]
    return {
        "schema_version": 1,
        "generator": "jurymeter.simulate",
        "params": {f: _plain(getattr(p, f)) for f in p.__dataclass_fields__},
        "design": {
            "n_systems": p.n_systems,
            "n_models": n_m,
            "n_items": p.n_items,
            "n_judges": p.n_judges,
            "n_generations": p.n_generations,
            "n_replicates": p.n_replicates,
            "n_pairs": int(pairs.shape[0]),
            "pointwise_design": "s x i x j x (g:si), replicates r:sijg; c:m nested in s",
            "records": counts,
        },
        "grand_mean": p.grand_mean,
        "variance_components": _variance_components(p, e, model_of, population),
        "cyclicjudge": _cyclic_truth(p, e, population, systems["system_id"].to_list(),
                                     judges["judge_id"].to_list(), gamma),
        "systems": sys_rows,
        "judges": jud_rows,
        "items": item_rows,
        "pairwise": _pairwise_truth(p, e, systems, judges, pairs),
        "effects": _effects_truth(e),
        "faults": _empty_faults(),
    }


def _population(p: SimulationParams) -> dict[str, float]:
    """The population variance components of the G-theory model (the parameters squared)."""
    return {
        "sigma2_s": p.sigma_s**2,
        "sigma2_m": p.sigma_s**2 * (1.0 - p.config_share),
        "sigma2_cm": p.sigma_s**2 * p.config_share,
        "sigma2_i": p.sigma_i**2,
        "sigma2_j": p.sigma_j**2,
        "sigma2_si": p.sigma_si**2,
        "sigma2_sj": p.sigma_sj**2,
        "sigma2_ij": p.sigma_ij**2,
        "sigma2_sij": p.sigma_sij**2,
        "sigma2_g": p.sigma_g**2,
        "sigma2_gj": p.sigma_gj**2,
        "sigma2_e": p.sigma_e**2,
    }


def _variance_components(
    p: SimulationParams, e: dict[str, np.ndarray], model_of: np.ndarray, population: dict[str, float]
) -> dict[str, Any]:
    """Population and realised components, the self-preference's parts, the single-generation pools."""
    n_s, n_i, n_j, n_g = p.n_systems, p.n_items, p.n_judges, p.n_generations
    n_m = int(model_of.max()) + 1
    nu_cm_within = (
        e["nu_cm"]
        - np.bincount(model_of, e["nu_cm"], n_m)[model_of]
        / np.bincount(model_of, minlength=n_m)[model_of]
    )
    realized = {
        "sigma2_s": _sample_var(e["nu_s"]),
        "sigma2_m": _sample_var(e["nu_m"]),
        "sigma2_cm": (float(np.sum(nu_cm_within**2) / (n_s - n_m)) if n_s > n_m else None),
        "sigma2_i": _sample_var(e["nu_i"]),
        "sigma2_j": _sample_var(e["nu_j"]),
        "sigma2_si": _centred_var(e["nu_si"], (0, 1), (n_s - 1) * (n_i - 1)),
        "sigma2_sj": _centred_var(e["nu_sj"], (0, 1), (n_s - 1) * (n_j - 1)),
        "sigma2_ij": _centred_var(e["nu_ij"], (0, 1), (n_i - 1) * (n_j - 1)),
        "sigma2_sij": _centred_var(e["nu_sij"], (0, 1, 2), (n_s - 1) * (n_i - 1) * (n_j - 1)),
        "sigma2_g": _centred_var(e["nu_g"], (2,), n_s * n_i * (n_g - 1)),
        "sigma2_gj": _centred_var(e["nu_gj"], (2, 3), n_s * n_i * (n_g - 1) * (n_j - 1)),
    }
    # An s x i x j G-study with replicates r:sij ([Anand2026]) cannot separate
    # generations from replicates when n_generations == 1: nu_g:si is then
    # confounded with nu_si and nu_gj:si with nu_sij.
    pooled = {
        "sigma2_si": population["sigma2_si"] + population["sigma2_g"],
        "sigma2_sij": population["sigma2_sij"] + population["sigma2_gj"],
    }
    pooled_realized = {
        "sigma2_si": _centred_var(e["nu_si"] + e["nu_g"][:, :, 0], (0, 1), (n_s - 1) * (n_i - 1))
        if n_g == 1
        else None,
        "sigma2_sij": _centred_var(
            e["nu_sij"] + e["nu_gj"][:, :, 0, :], (0, 1, 2), (n_s - 1) * (n_i - 1) * (n_j - 1)
        )
        if n_g == 1
        else None,
    }
    sp = e["self_preference"]
    self_pref_parts = {
        "sigma2_s": _sample_var(sp.mean(axis=1)),
        "sigma2_j": _sample_var(sp.mean(axis=0)),
        "sigma2_sj": _centred_var(sp, (0, 1), (n_s - 1) * (n_j - 1)),
    }
    return {
        "population": population,
        "realized": realized,
        "self_preference_realized": self_pref_parts,
        "single_generation_population": pooled,
        "single_generation_realized": pooled_realized,
    }


def _cyclic_truth(
    p: SimulationParams,
    e: dict[str, np.ndarray],
    population: dict[str, float],
    sys_ids: list[str],
    jud_ids: list[str],
    gamma: np.ndarray,
) -> dict[str, Any]:
    """The CyclicJudge view, one system at a time ([Zhu2026] Eq. 1).

    alpha_i = nu_i + nu_si, beta = nu_g:si, gamma_l(s) = panel-centred judge
    bias, epsilon = nu_ij + nu_sij + nu_gj:si + e.
    """
    bias = e["nu_j"][None, :] + e["nu_sj"] + e["self_preference"]  # (s, j)
    gamma_s = bias - bias.mean(axis=1, keepdims=True)
    mu_theta = p.grand_mean + e["nu_s"] + bias.mean(axis=1)
    return {
        "mapping": (
            "per system s: alpha_i = nu_i + nu_si; beta_ig = nu_g:si; "
            "gamma_l = (nu_j + nu_sj + self_preference) centred over the panel; "
            "epsilon = nu_ij + nu_sij + nu_gj:si + e"
        ),
        "sigma2_alpha": population["sigma2_i"] + population["sigma2_si"],
        "sigma2_beta": population["sigma2_g"],
        "sigma2_epsilon": population["sigma2_ij"]
        + population["sigma2_sij"]
        + population["sigma2_gj"]
        + population["sigma2_e"],
        "mu_panel": float(p.grand_mean + e["nu_j"].mean()),
        "gamma": dict(zip(jud_ids, gamma.tolist(), strict=True)),
        "sigma2_gamma": float(np.mean(gamma**2)),
        "per_system": {
            sid: {
                "mu_theta": float(mu_theta[s]),
                "gamma": dict(zip(jud_ids, gamma_s[s].tolist(), strict=True)),
                "sigma2_gamma": float(np.mean(gamma_s[s] ** 2)),
            }
            for s, sid in enumerate(sys_ids)
        },
    }


def _registry_rows(
    systems: pl.DataFrame,
    judges: pl.DataFrame,
    model_of: np.ndarray,
    e: dict[str, np.ndarray],
    gamma: np.ndarray,
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The registries' rows with each system's and each judge's drawn effects."""
    sys_rows = systems.to_dicts()
    for s, row in enumerate(sys_rows):
        row.update(
            {
                "model_index": int(model_of[s]),
                "nu_s": float(e["nu_s"][s]),
                "nu_m": float(e["nu_m"][model_of[s]]),
                "nu_cm": float(e["nu_cm"][s]),
                "theta": float(e["theta"][s]),
                "log_length_effect": float(e["log_length_s"][s]),
            }
        )
    jud_rows = judges.to_dicts()
    for j, row in enumerate(jud_rows):
        row.update(
            {
                "nu_j": float(e["nu_j"][j]),
                "gamma": float(gamma[j]),
                "position_bias": float(e["delta_j"][j]),
                "family_lift": float(e["phi_j"][j]),
                "position_following": float(e["q_j"][j]),
                "same_family_systems": [
                    r["system_id"] for r in sys_rows if r["family"] == row["family"]
                ],
            }
        )
    return sys_rows, jud_rows


def _pairwise_truth(
    p: SimulationParams,
    e: dict[str, np.ndarray],
    systems: pl.DataFrame,
    judges: pl.DataFrame,
    pairs: np.ndarray,
) -> dict[str, Any]:
    """The pairwise model's parameters, its drawn effects and the exact family support matrix."""
    sys_ids = systems["system_id"].to_list()
    jud_ids = judges["judge_id"].to_list()
    return {
        "model": "ordered logit (Rao-Kupper ties), eta = theta_a - theta_b + delta_j "
        "+ phi_f(j)*([f(j)=f(a)] - [f(j)=f(b)]) + u_ai - u_bi; with probability q_j "
        "the judge picks slot A whatever eta",
        "pairs": [[sys_ids[a], sys_ids[b]] for a, b in pairs.tolist()],
        "theta": dict(zip(sys_ids, e["theta"].tolist(), strict=True)),
        "position_bias_mean": p.position_bias,
        "position_bias": dict(zip(jud_ids, e["delta_j"].tolist(), strict=True)),
        "family_preference": p.family_preference,
        "family_lifts": {
            f: float(e["phi_j"][j]) for j, f in enumerate(judges["family"].to_list())
        },
        "family_lift_by_judge": dict(zip(jud_ids, e["phi_j"].tolist(), strict=True)),
        "position_following": dict(zip(jud_ids, e["q_j"].tolist(), strict=True)),
        "family_support": _family_support(
            p,
            eta_oij=e["eta_oij"],
            q_j=e["q_j"],
            weighted_key=e["weighted_key"],
            pairs=pairs,
            sys_fam=systems["family"].to_list(),
            jud_fam=judges["family"].to_list(),
        ),
        "tie_threshold": p.tie_threshold,
        "preference_concentration": p.preference_concentration,
        "u_si": e["u_si"].tolist(),
    }


# The drawn effects the truth lists in full, with their axes.
_EFFECT_AXES: dict[str, list[str]] = {
    "nu_si": ["system", "item"],
    "nu_sj": ["system", "judge"],
    "nu_ij": ["item", "judge"],
    "nu_sij": ["system", "item", "judge"],
    "nu_g": ["system", "item", "generation"],
    "nu_gj": ["system", "item", "generation", "judge"],
    "self_preference": ["system", "judge"],
    "log_length_e": ["system", "item", "generation"],
    "response_length": ["system", "item", "generation"],
}


def _effects_truth(e: dict[str, np.ndarray]) -> dict[str, Any]:
    return {"axes": {k: list(v) for k, v in _EFFECT_AXES.items()}, **{k: e[k].tolist() for k in _EFFECT_AXES}}
