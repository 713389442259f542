"""Who the simulated systems and judges are: ids, models, configurations, families."""

from __future__ import annotations

import numpy as np
import polars as pl

from jurymeter.simulate.params import SimulationParams

# Families, model catalogue and judge panel.  Families end in "-like": they
# imitate provenance, they do not claim to be the vendors' models.
_FAMILIES: tuple[str, ...] = (
    "openai-like",
    "anthropic-like",
    "google-like",
    "meta-like",
    "qwen-like",
    "mistral-like",
)
_VENDORS: dict[str, str] = {
    "openai-like": "openai",
    "anthropic-like": "anthropic",
    "google-like": "google",
    "meta-like": "meta",
    "qwen-like": "alibaba",
    "mistral-like": "mistral",
}
_MODELS: tuple[tuple[str, str], ...] = (
    ("gpt-sim-large", "openai-like"),
    ("claude-sim-pro", "anthropic-like"),
    ("gemini-sim-flash", "google-like"),
    ("llama-sim-70b", "meta-like"),
    ("qwen-sim-72b", "qwen-like"),
    ("mistral-sim-large", "mistral-like"),
    ("gpt-sim-mini", "openai-like"),
    ("claude-sim-lite", "anthropic-like"),
)
_CONFIGS: tuple[str, ...] = ("default", "cot", "concise", "persona", "few-shot", "strict")
_TIERS: tuple[str, ...] = ("frontier", "frontier", "mid", "open-weight", "small")


def _letters(k: int) -> str:
    """0 -> 'a', 25 -> 'z', 26 -> 'aa' (bijective base 26)."""
    out = ""
    k += 1
    while k:
        k, rem = divmod(k - 1, 26)
        out = chr(ord("a") + rem) + out
    return out


def _width(n: int, minimum: int) -> int:
    return max(minimum, len(str(max(n - 1, 0))))


def _registries(p: SimulationParams) -> tuple[pl.DataFrame, pl.DataFrame, np.ndarray]:
    """Systems and judges frames, and the model index of every system."""
    sw = _width(p.n_systems, 2)
    system_ids = [f"sys-{k:0{sw}d}" for k in range(p.n_systems)]
    model_of = np.arange(p.n_systems) // p.configs_per_model
    models, families, configs = [], [], []
    for k in range(p.n_systems):
        m = int(model_of[k])
        if m < len(_MODELS):
            name, family = _MODELS[m]
        else:
            family = _FAMILIES[m % len(_FAMILIES)]
            name = f"{family.removesuffix('-like')}-sim-{m:02d}"
        c = k % p.configs_per_model
        config = _CONFIGS[c] if c < len(_CONFIGS) else f"config-{c:02d}"
        models.append(name)
        families.append(family)
        configs.append(config)
    systems = pl.DataFrame(
        {"system_id": system_ids, "model": models, "config": configs, "family": families},
        schema={
            "system_id": pl.String,
            "model": pl.String,
            "config": pl.String,
            "family": pl.String,
        },
    )
    judge_ids = [f"judge-{_letters(k)}" for k in range(p.n_judges)]
    j_fam = [_FAMILIES[k % len(_FAMILIES)] for k in range(p.n_judges)]
    judges = pl.DataFrame(
        {
            "judge_id": judge_ids,
            "family": j_fam,
            "vendor": [_VENDORS[f] for f in j_fam],
            "tier": [_TIERS[k % len(_TIERS)] for k in range(p.n_judges)],
        },
        schema={"judge_id": pl.String, "family": pl.String, "vendor": pl.String, "tier": pl.String},
    )
    return systems, judges, model_of
