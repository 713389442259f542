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
    n_s, n_i, n_j, n_g = p.n_systems, p.n_items, p.n_judges, p.n_generations
    n_m = int(model_of.max()) + 1
    sys_ids = systems["system_id"].to_list()
    jud_ids = judges["judge_id"].to_list()

    population = {
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

    # CyclicJudge view, one system at a time ([Zhu2026] Eq. 1): alpha_i =
    # nu_i + nu_si, beta = nu_g:si, gamma_l(s) = panel-centred judge bias,
    # epsilon = nu_ij + nu_sij + nu_gj:si + e.
    bias = e["nu_j"][None, :] + e["nu_sj"] + sp  # (s, j)
    gamma_s = bias - bias.mean(axis=1, keepdims=True)
    mu_theta = p.grand_mean + e["nu_s"] + bias.mean(axis=1)
    gamma = e["nu_j"] - e["nu_j"].mean()
    cyclic = {
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

    params = {f: _plain(getattr(p, f)) for f in p.__dataclass_fields__}
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
                "same_family_systems": [
                    r["system_id"] for r in sys_rows if r["family"] == row["family"]
                ],
            }
        )
    item_rows = [
        {
            "item_id": str(item_ids[i]),
            "nu_i": float(e["nu_i"][i]),
            "log_length_effect": float(e["log_length_i"][i]),
        }
        for i in range(n_i)
    ]
    return {
        "schema_version": 1,
        "generator": "jurymeter.simulate",
        "params": params,
        "design": {
            "n_systems": n_s,
            "n_models": n_m,
            "n_items": n_i,
            "n_judges": n_j,
            "n_generations": n_g,
            "n_replicates": p.n_replicates,
            "n_pairs": int(pairs.shape[0]),
            "pointwise_design": "s x i x j x (g:si), replicates r:sijg; c:m nested in s",
            "records": counts,
        },
        "grand_mean": p.grand_mean,
        "variance_components": {
            "population": population,
            "realized": realized,
            "self_preference_realized": self_pref_parts,
            "single_generation_population": pooled,
            "single_generation_realized": pooled_realized,
        },
        "cyclicjudge": cyclic,
        "systems": sys_rows,
        "judges": jud_rows,
        "items": item_rows,
        "pairwise": {
            "model": "ordered logit (Rao-Kupper ties), eta = theta_a - theta_b + delta_j "
            "+ phi*([f(j)=f(a)] - [f(j)=f(b)]) + u_ai - u_bi",
            "pairs": [[sys_ids[a], sys_ids[b]] for a, b in pairs.tolist()],
            "theta": dict(zip(sys_ids, e["theta"].tolist(), strict=True)),
            "position_bias_mean": p.position_bias,
            "position_bias": dict(zip(jud_ids, e["delta_j"].tolist(), strict=True)),
            "family_preference": p.family_preference,
            "tie_threshold": p.tie_threshold,
            "preference_concentration": p.preference_concentration,
            "u_si": e["u_si"].tolist(),
        },
        "effects": {
            "axes": {
                "nu_si": ["system", "item"],
                "nu_sj": ["system", "judge"],
                "nu_ij": ["item", "judge"],
                "nu_sij": ["system", "item", "judge"],
                "nu_g": ["system", "item", "generation"],
                "nu_gj": ["system", "item", "generation", "judge"],
                "self_preference": ["system", "judge"],
                "log_length_e": ["system", "item", "generation"],
                "response_length": ["system", "item", "generation"],
            },
            "nu_si": e["nu_si"].tolist(),
            "nu_sj": e["nu_sj"].tolist(),
            "nu_ij": e["nu_ij"].tolist(),
            "nu_sij": e["nu_sij"].tolist(),
            "nu_g": e["nu_g"].tolist(),
            "nu_gj": e["nu_gj"].tolist(),
            "self_preference": e["self_preference"].tolist(),
            "log_length_e": e["log_length_e"].tolist(),
            "response_length": e["response_length"].tolist(),
        },
        "faults": _empty_faults(),
    }
