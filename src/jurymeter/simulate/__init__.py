r"""Simulated LLM-judge judgment dumps with exactly known truth.

The simulator writes the two record kinds the judgment store holds, pointwise
rubric scores and pairwise preferences, from one set of drawn effects, and
returns every drawn effect so that G-studies, judge-bias decompositions and
pairwise diagnostics can be checked against the truth that generated the data.

Pointwise model
---------------
A system ``s`` answers item ``i`` in generation ``g`` (generations are nested
in system x item); judge ``j`` scores that response in replicate ``r``
(replicates are nested in system x item x judge x generation).  In the
generalizability-theory notation of [Anand2026]_ extended with the generation
facet of [Zhu2026]_ (Sec. 3.1, Eq. 1):

.. math::

    X_{sijgr} = \mu + \nu_s + \nu_i + \nu_j + \nu_{si} + \nu_{sj} + \nu_{ij}
              + \nu_{sij} + \nu_{g:si} + \nu_{gj:si}
              + \pi\,[f(j) = f(s)] + b\,(\log L_{sig} - \log L_0)
              + \varepsilon_{r:sijg},

every :math:`\nu` independent normal with mean 0 and variance
:math:`\sigma^2_{\cdot}` (the ``sigma_*`` fields are the standard deviations),
:math:`\nu_s = \nu_{m(s)} + \nu_{c:m}` split between the model and the prompt
configuration nested in it (``config_share``), :math:`\pi` the self-preference
of a judge for systems of its own family and :math:`b` an optional verbosity
bias on the log response length :math:`L_{sig}`.

A judge scores in sessions; within a batch of ``batch_size`` consecutive calls
the emitted score carries over part of the previous one (the first-order
Markov dependence of [LiDing2026]_, abstract and Fig. 1):

.. math::

    Y_t = \operatorname{emit}\bigl(X_t + \lambda\,(Y_{t-1} - \mu)\bigr),

with no carry-over at a batch's first position; ``emit`` rounds to the nearest
integer (half to even) and clips to ``scale`` when ``round_scores`` is true,
and is the identity otherwise.  With ``round_scores=False`` and
``carry_over=0`` the data follow the linear model exactly.

Pairwise model
--------------
Judge ``j`` sees system ``a`` first (slot A) and ``b`` second (slot B); every
selected pair is judged in both orders.  The latent preference for A is

.. math::

    \eta = \theta_a - \theta_b + \delta_j
         + \varphi\,\bigl([f(j) = f(a)] - [f(j) = f(b)]\bigr)
         + u_{ai} - u_{bi},
    \qquad \theta_s = \kappa\,\nu_s,

with :math:`\delta_j \sim N(\delta, \sigma^2_\delta)` the judge's position bias
(slot-A advantage, [Anand2026]_ Table 3; [Awuni2026]_ Sec. 8),
:math:`\varphi` the family preference ([Awuni2026]_ Sec. 4-5) and
:math:`u_{si} \sim N(0, \sigma^2_u)` an optional system x item term.  A hard
verdict thresholds :math:`Y^* = \eta + \epsilon`, :math:`\epsilon` standard
logistic, at :math:`\pm\tau` (ordered logit; identical to the Rao-Kupper tie
model with tie parameter :math:`e^\tau`):

.. math::

    P(A) = \sigma(\eta - \tau), \quad P(B) = 1 - \sigma(\eta + \tau), \quad
    P(\text{tie}) = \sigma(\eta + \tau) - \sigma(\eta - \tau).

A weighted verdict reports ``preference`` drawn from
:math:`\mathrm{Beta}(k m, k (1 - m))` with
:math:`m = P(A) + P(\text{tie})/2 = (\sigma(\eta-\tau) + \sigma(\eta+\tau))/2`,
so hard and weighted records share the expected score of slot A.

References
----------
.. [Anand2026] A. Anand, "Ask Which, Not How Good: Sizing Benchmarks Scored by
   an LLM", 2026 (``papers/ask-which-not-how-good.txt`` and ``-appendix.txt``).
.. [Zhu2026] Z. Zhu et al., "CyclicJudge: Mitigating Judge Bias Efficiently in
   LLM-based Evaluation", 2026 (``papers/cyclicjudge.txt``).
.. [Awuni2026] D. A. Awuni et al., "Who Judges Matters: Measuring
   Family-Conditioned Preference in LLM-as-Judge Panels", 2026
   (``papers/who-judges-matters.txt``).
.. [LiDing2026] T. Li and J. Ding, "Trustworthy Method Comparison with AI
   Judges: Estimation and Design under Order, Batch, and Aggregation Effects",
   2026 (``papers/trustworthy-comparison-ai-judges.txt``).
.. [RaoKupper1967] P. V. Rao and L. L. Kupper, "Ties in paired-comparison
   experiments: a generalization of the Bradley-Terry model", JASA 62, 1967.
"""

from __future__ import annotations

import copy
import math
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np
import orjson
import polars as pl

from jurymeter.errors import SimulationError

__all__ = [
    "FAULT_KINDS",
    "PAIRWISE_COLUMNS",
    "POINTWISE_COLUMNS",
    "SimulatedDump",
    "SimulationError",
    "SimulationParams",
    "simulate_dump",
    "write_dump",
]

#: Fault kinds appended by :func:`write_dump`, in the order they are cycled.
FAULT_KINDS: tuple[str, ...] = (
    "malformed_line",
    "missing_field",
    "wrong_type",
    "non_finite_score",
    "score_out_of_scale",
    "unknown_winner",
    "preference_out_of_range",
    "same_system",
    "conflicting_duplicate",
)
_POINTWISE_ONLY = frozenset(
    {"wrong_type", "non_finite_score", "score_out_of_scale", "conflicting_duplicate"}
)
_PAIRWISE_ONLY = frozenset({"unknown_winner", "preference_out_of_range", "same_system"})

POINTWISE_COLUMNS: tuple[str, ...] = (
    "item_set",
    "item_id",
    "system_id",
    "judge_id",
    "score",
    "generation",
    "replicate",
    "batch_id",
    "batch_position",
    "response_length",
    "timestamp",
    "run_id",
)
PAIRWISE_COLUMNS: tuple[str, ...] = (
    "item_set",
    "item_id",
    "system_a",
    "system_b",
    "judge_id",
    "winner",
    "preference",
    "generation",
    "replicate",
    "length_a",
    "length_b",
    "batch_id",
    "batch_position",
)

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

# Session clock: replicate r of judge j starts at _T0 + r days + j * 30 min.
_T0 = int(datetime(2026, 3, 2, 8, 0, 0, tzinfo=UTC).timestamp())
_RUN_STAGGER_S = 1800
_REPLICATE_STAGGER_S = 86400
_BATCH_PAUSE_S = 20

# Independent child streams of default_rng(seed), one per component, so that
# e.g. changing the pairwise design never changes the pointwise draws.
_STREAMS: tuple[str, ...] = (
    "system",
    "item",
    "judge",
    "si",
    "sj",
    "ij",
    "sij",
    "g",
    "gj",
    "e",
    "length",
    "point_order",
    "point_clock",
    "pairs",
    "pair_si",
    "pair_order",
    "pair_outcome",
    "pair_weighted",
)

_SIGMA_FIELDS: tuple[str, ...] = (
    "sigma_s",
    "sigma_i",
    "sigma_j",
    "sigma_si",
    "sigma_sj",
    "sigma_ij",
    "sigma_sij",
    "sigma_g",
    "sigma_gj",
    "sigma_e",
    "sigma_log_length_s",
    "sigma_log_length_i",
    "sigma_log_length_e",
    "sigma_pair_si",
    "sigma_position",
)


@dataclass(frozen=True, slots=True, kw_only=True)
class SimulationParams:
    r"""Design and true parameters of a simulated judgment dump.

    All standard deviations are on the score scale (pointwise) or the logit
    scale (pairwise).  The defaults give 14,400 pointwise and 72,000 pairwise
    records on a 1-10 scale with magnitudes in the range reported by
    [Zhu2026]_ Table 2 and [Anand2026]_.

    Parameters
    ----------
    seed : int, default 0
        Seed of ``numpy.random.default_rng``; the same parameters always give
        the same frames and byte-identical files.
    n_systems : int, default 12
        Number of systems (model x prompt configuration), at least 2.
    n_items : int, default 60
        Number of items in ``item_set``.
    n_judges : int, default 5
        Number of judges in the panel (``K_tot`` of [Zhu2026]_).
    n_generations : int, default 2
        Independent generations per system and item (``m`` of [Zhu2026]_).
    n_replicates : int, default 2
        Times each judge re-scores every response (replicate facet ``r`` of
        [Anand2026]_); one replicate is one judge run.
    configs_per_model : int, default 3
        Consecutive systems share a model, so configurations are nested in
        models (``c:m``, [Anand2026]_ appendix).
    item_set : str, default "sim-chat"
        Item-set name written on pointwise and pairwise records.
    scale : tuple of float, default (1.0, 10.0)
        Lower and upper end of the rubric scale.
    round_scores : bool, default True
        Round to the nearest integer (half to even) and clip to ``scale``;
        ``False`` keeps continuous, unclipped scores (the exact linear model).
    grand_mean : float, default 6.5
        :math:`\mu`, the expected score over the system, item and judge
        populations.
    sigma_s : float, default 0.6
        SD of the system effect :math:`\nu_s` (:math:`\sigma^2_s`).
    config_share : float, default 0.3
        Share of :math:`\sigma^2_s` carried by configuration within model:
        :math:`\sigma^2_{c:m} = q\sigma^2_s`, :math:`\sigma^2_m = (1-q)\sigma^2_s`.
    sigma_i : float, default 0.9
        SD of the item effect :math:`\nu_i` (scenario :math:`\alpha_i` of
        [Zhu2026]_ when one system is looked at).
    sigma_j : float, default 0.6
        SD of the judge effect :math:`\nu_j`; its panel-centred values are
        the judge offsets :math:`\gamma_\ell` of [Zhu2026]_ Eq. 1.
    sigma_si : float, default 0.6
        SD of the system x item interaction.
    sigma_sj : float, default 0.3
        SD of the system x judge interaction; with ``sigma_s`` it fixes the
        single-judge ceiling :math:`\sigma^2_s/(\sigma^2_s+\sigma^2_{sj})`.
    sigma_ij : float, default 0.4
        SD of the item x judge interaction.
    sigma_sij : float, default 0.4
        SD of the system x item x judge interaction.
    sigma_g : float, default 0.4
        SD of the generation effect nested in system x item, :math:`\nu_{g:si}`
        (:math:`\beta_{ij}` of [Zhu2026]_).
    sigma_gj : float, default 0.2
        SD of the generation x judge interaction :math:`\nu_{gj:si}`.
    sigma_e : float, default 0.5
        SD of the replicate residual :math:`\varepsilon_{r:sijg}`.
    self_preference : float, default 0.25
        :math:`\pi`, points added when the judge's family equals the system's.
    carry_over : float, default 0.1
        :math:`\lambda`, share of the previous score's deviation from
        :math:`\mu` carried into the next call of the same batch;
        ``|carry_over| < 1``.
    batch_size : int, default 10
        Calls per batch; a judge run is cut into batches of consecutive calls.
    length_median : float, default 320.0
        :math:`L_0`, median response length in tokens.
    sigma_log_length_s : float, default 0.35
        SD of the system verbosity effect on log length.
    sigma_log_length_i : float, default 0.5
        SD of the item effect on log length.
    sigma_log_length_e : float, default 0.2
        SD of the per-response (system x item x generation) log-length noise.
    length_bias : float, default 0.0
        :math:`b`, points per unit of natural-log length above :math:`L_0`
        (pointwise only).  Nonzero values add variance outside the listed
        components.
    pairwise_pairs : int or None, default 30
        Number of unordered system pairs judged, each in both orders; ``None``
        judges all pairs.  A random spanning path is taken first, so any value
        of at least ``n_systems - 1`` gives a connected comparison graph.
    theta_per_point : float, default 1.0
        :math:`\kappa`, logits of pairwise quality per point of system effect:
        :math:`\theta_s = \kappa\nu_s`.
    sigma_pair_si : float, default 0.0
        SD of the pairwise system x item term :math:`u_{si}`.  Nonzero values
        make the marginal Bradley-Terry model an attenuated approximation.
    position_bias : float, default 0.35
        :math:`\delta`, mean logit shift in favour of the system shown first
        (about +8.6 points of win rate, [Anand2026]_ Table 3).
    sigma_position : float, default 0.2
        SD of the judge-specific position bias :math:`\delta_j`.
    family_preference : float, default 0.3
        :math:`\varphi`, logit bonus for a system of the judge's family.
    tie_threshold : float, default 0.4
        :math:`\tau >= 0` of the ordered-logit tie model; 0 means no ties.
    weighted_fraction : float, default 0.1
        Share of pairwise records (rounded to a count) that carry
        ``preference`` instead of ``winner``.
    preference_concentration : float, default 8.0
        :math:`k` of the Beta distribution of ``preference``.
    """

    seed: int = 0
    n_systems: int = 12
    n_items: int = 60
    n_judges: int = 5
    n_generations: int = 2
    n_replicates: int = 2
    configs_per_model: int = 3
    item_set: str = "sim-chat"
    scale: tuple[float, float] = (1.0, 10.0)
    round_scores: bool = True
    grand_mean: float = 6.5
    sigma_s: float = 0.6
    config_share: float = 0.3
    sigma_i: float = 0.9
    sigma_j: float = 0.6
    sigma_si: float = 0.6
    sigma_sj: float = 0.3
    sigma_ij: float = 0.4
    sigma_sij: float = 0.4
    sigma_g: float = 0.4
    sigma_gj: float = 0.2
    sigma_e: float = 0.5
    self_preference: float = 0.25
    carry_over: float = 0.1
    batch_size: int = 10
    length_median: float = 320.0
    sigma_log_length_s: float = 0.35
    sigma_log_length_i: float = 0.5
    sigma_log_length_e: float = 0.2
    length_bias: float = 0.0
    pairwise_pairs: int | None = 30
    theta_per_point: float = 1.0
    sigma_pair_si: float = 0.0
    position_bias: float = 0.35
    sigma_position: float = 0.2
    family_preference: float = 0.3
    tie_threshold: float = 0.4
    weighted_fraction: float = 0.1
    preference_concentration: float = 8.0


@dataclass(frozen=True)
class SimulatedDump:
    """A simulated dump: record frames, registries and the generating truth.

    Attributes
    ----------
    pointwise : polars.DataFrame
        One row per pointwise call, columns :data:`POINTWISE_COLUMNS`, in run
        order (replicate, judge, batch, position).
    pairwise : polars.DataFrame
        One row per pairwise call, columns :data:`PAIRWISE_COLUMNS`, in run
        order; ``winner`` is null on weighted rows, ``preference`` on hard ones.
    systems : polars.DataFrame
        ``system_id, model, config, family``.
    judges : polars.DataFrame
        ``judge_id, family, vendor, tier``.
    truth : dict
        JSON-serialisable parameters, design, every drawn effect and the
        population and realised variance components (see ``docs/simulation.md``).
    """

    pointwise: pl.DataFrame
    pairwise: pl.DataFrame
    systems: pl.DataFrame
    judges: pl.DataFrame
    truth: dict[str, Any] = field(repr=False)


# --------------------------------------------------------------------------
# validation
# --------------------------------------------------------------------------


def _is_int(value: object) -> bool:
    return isinstance(value, int | np.integer) and not isinstance(value, bool)


def _is_real(value: object) -> bool:
    return (
        isinstance(value, int | float | np.integer | np.floating)
        and not isinstance(value, bool)
        and math.isfinite(float(value))
    )


def _fail(name: str, allowed: str, value: object) -> None:
    msg = f"SimulationParams.{name} must be {allowed}; got {value!r}"
    raise SimulationError(msg)


def _validate(p: SimulationParams) -> None:
    if not isinstance(p, SimulationParams):
        msg = f"params must be a SimulationParams; got {type(p).__name__}"
        raise SimulationError(msg)
    if not _is_int(p.seed) or p.seed < 0:
        _fail("seed", "a non-negative int", p.seed)
    minimum = {
        "n_systems": 2,
        "n_items": 1,
        "n_judges": 1,
        "n_generations": 1,
        "n_replicates": 1,
        "configs_per_model": 1,
        "batch_size": 1,
    }
    for name, low in minimum.items():
        value = getattr(p, name)
        if not _is_int(value) or value < low:
            _fail(name, f"an int >= {low}", value)
    if not isinstance(p.item_set, str) or not p.item_set:
        _fail("item_set", "a non-empty str", p.item_set)
    if not isinstance(p.round_scores, bool):
        _fail("round_scores", "a bool", p.round_scores)
    if (
        not isinstance(p.scale, tuple)
        or len(p.scale) != 2
        or not all(_is_real(v) for v in p.scale)
        or not p.scale[0] < p.scale[1]
    ):
        _fail("scale", "a tuple (low, high) of finite numbers with low < high", p.scale)
    if p.round_scores and not all(float(v).is_integer() for v in p.scale):
        _fail("scale", "integer-valued when round_scores is True", p.scale)
    for name in _SIGMA_FIELDS:
        value = getattr(p, name)
        if not _is_real(value) or value < 0:
            _fail(name, "a finite number >= 0", value)
    for name in (
        "grand_mean",
        "self_preference",
        "length_bias",
        "theta_per_point",
        "position_bias",
        "family_preference",
    ):
        if not _is_real(getattr(p, name)):
            _fail(name, "a finite number", getattr(p, name))
    if not _is_real(p.config_share) or not 0.0 <= p.config_share <= 1.0:
        _fail("config_share", "a number in [0, 1]", p.config_share)
    if not _is_real(p.carry_over) or not abs(p.carry_over) < 1.0:
        _fail("carry_over", "a number with |carry_over| < 1", p.carry_over)
    if not _is_real(p.length_median) or p.length_median <= 0:
        _fail("length_median", "a finite number > 0", p.length_median)
    n_all = p.n_systems * (p.n_systems - 1) // 2
    if p.pairwise_pairs is not None and (
        not _is_int(p.pairwise_pairs) or not 0 <= p.pairwise_pairs <= n_all
    ):
        _fail("pairwise_pairs", f"None or an int in [0, {n_all}]", p.pairwise_pairs)
    if not _is_real(p.tie_threshold) or p.tie_threshold < 0:
        _fail("tie_threshold", "a finite number >= 0", p.tie_threshold)
    if not _is_real(p.weighted_fraction) or not 0.0 <= p.weighted_fraction <= 1.0:
        _fail("weighted_fraction", "a number in [0, 1]", p.weighted_fraction)
    if not _is_real(p.preference_concentration) or p.preference_concentration <= 0:
        _fail("preference_concentration", "a finite number > 0", p.preference_concentration)


# --------------------------------------------------------------------------
# registries
# --------------------------------------------------------------------------


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


# --------------------------------------------------------------------------
# helpers
# --------------------------------------------------------------------------


def _sigmoid(x: np.ndarray) -> np.ndarray:
    return 0.5 * (1.0 + np.tanh(0.5 * x))


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


def _plain(value: Any) -> Any:
    """Python scalars / lists for JSON (numpy scalars and tuples converted)."""
    if isinstance(value, tuple | list):
        return [_plain(v) for v in value]
    if isinstance(value, np.integer):
        return int(value)
    if isinstance(value, np.floating):
        return float(value)
    return value


def _normalised(p: SimulationParams) -> SimulationParams:
    """The same parameters with numpy scalars replaced by Python ones."""
    values = {f: _plain(getattr(p, f)) for f in p.__dataclass_fields__}
    values["scale"] = tuple(values["scale"])
    return SimulationParams(**values)


def _sample_var(x: np.ndarray) -> float | None:
    return float(np.var(x, ddof=1)) if x.size > 1 else None


def _run_order(
    rng: np.random.Generator, n_runs: int, n_cells: int, batch_size: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Shuffled cell order per run, and batch index / position per call."""
    perm = np.argsort(rng.random((n_runs, n_cells)), axis=1, kind="stable")
    pos = np.arange(n_cells)
    return perm, pos // batch_size, pos % batch_size


def _emit(z: np.ndarray, p: SimulationParams) -> np.ndarray:
    if not p.round_scores:
        return z
    return np.clip(np.rint(z), p.scale[0], p.scale[1])


def _carry_over(x: np.ndarray, p: SimulationParams) -> np.ndarray:
    """Apply the within-batch Markov carry-over to run-ordered latent scores.

    ``x`` has shape (runs, calls).  The loop runs over the positions of a
    batch, all batches of all runs at once.
    """
    if p.carry_over == 0.0:
        return _emit(x, p)
    y = np.empty_like(x)
    b = p.batch_size
    y[:, 0::b] = _emit(x[:, 0::b], p)
    for t in range(1, b):
        cur = x[:, t::b]
        n = cur.shape[1]
        prev = y[:, t - 1 :: b][:, :n]
        y[:, t::b] = _emit(cur + p.carry_over * (prev - p.grand_mean), p)
    return y


def _batch_ids(
    prefix: str, judge_id: pl.Expr, replicate: pl.Expr, batch: pl.Expr, width: int
) -> pl.Expr:
    return pl.concat_str(
        [
            pl.lit(prefix),
            judge_id,
            pl.lit("-r"),
            replicate.cast(pl.String),
            pl.lit("-b"),
            batch.cast(pl.String).str.zfill(width),
        ]
    )


def _select_pairs(rng: np.random.Generator, p: SimulationParams) -> np.ndarray:
    """Unordered pairs (a < b) as an (k, 2) array, lexicographically sorted."""
    n = p.n_systems
    a_all, b_all = np.triu_indices(n, 1)
    if p.pairwise_pairs is None:
        return np.column_stack([a_all, b_all]).astype(np.int64)
    perm = rng.permutation(n)
    lo = np.minimum(perm[:-1], perm[1:])
    hi = np.maximum(perm[:-1], perm[1:])
    path = lo * n + hi
    rest = np.setdiff1d(a_all * n + b_all, path)
    codes = np.concatenate([path, rng.permutation(rest)])[: p.pairwise_pairs]
    codes = np.sort(codes)
    return np.column_stack([codes // n, codes % n]).astype(np.int64)


# --------------------------------------------------------------------------
# simulation
# --------------------------------------------------------------------------


def simulate_dump(params: SimulationParams = SimulationParams()) -> SimulatedDump:
    r"""Simulate pointwise and pairwise judgments with known truth.

    Parameters
    ----------
    params : SimulationParams, default SimulationParams()
        Design and true parameters; validated before anything is drawn.

    Returns
    -------
    SimulatedDump
        Record frames, system and judge registries, and ``truth``.

    Raises
    ------
    SimulationError
        If a parameter is outside its documented range.

    Notes
    -----
    Pointwise: Eq. 1 of [Zhu2026]_ per system, written as the crossed
    s x i x j G-theory model of [Anand2026]_ with generations nested in
    system x item and replicates as the residual facet, plus self-preference,
    optional length bias and the first-order carry-over of [LiDing2026]_.
    Pairwise: Bradley-Terry with ties as an ordered logit ([RaoKupper1967]_),
    position bias ([Anand2026]_ Table 3, [Awuni2026]_ Sec. 8) and family
    preference ([Awuni2026]_ Sec. 4-5).  The module docstring gives the
    equations.  Record counts are
    ``n_systems * n_items * n_judges * n_generations * n_replicates`` and
    ``2 * pairs * n_items * n_judges * n_generations * n_replicates``.

    Examples
    --------
    >>> dump = simulate_dump(SimulationParams(n_systems=3, n_items=4, n_judges=2,
    ...                                       pairwise_pairs=1))
    >>> dump.pointwise.height, dump.pairwise.height
    (96, 64)
    >>> dump.pointwise.select("item_id", "system_id", "judge_id").row(0)[1].startswith("sys-")
    True
    """
    _validate(params)
    p = _normalised(params)
    root = np.random.default_rng(p.seed)
    rng = dict(zip(_STREAMS, root.spawn(len(_STREAMS)), strict=True))

    n_s, n_i, n_j, n_g, n_r = p.n_systems, p.n_items, p.n_judges, p.n_generations, p.n_replicates
    systems, judges, model_of = _registries(p)
    n_m = int(model_of.max()) + 1
    system_ids = np.asarray(systems["system_id"].to_list())
    judge_ids = np.asarray(judges["judge_id"].to_list())
    iw = _width(n_i, 4)
    item_ids = np.asarray([f"item-{k:0{iw}d}" for k in range(n_i)])
    sys_fam = np.asarray(systems["family"].to_list())
    jud_fam = np.asarray(judges["family"].to_list())
    same_family = (sys_fam[:, None] == jud_fam[None, :]).astype(np.float64)  # (s, j)

    # ---- pointwise effects ------------------------------------------------
    sd_m = p.sigma_s * math.sqrt(1.0 - p.config_share)
    sd_cm = p.sigma_s * math.sqrt(p.config_share)
    nu_m = rng["system"].standard_normal(n_m) * sd_m
    nu_cm = rng["system"].standard_normal(n_s) * sd_cm
    nu_s = nu_m[model_of] + nu_cm
    nu_i = rng["item"].standard_normal(n_i) * p.sigma_i
    nu_j = rng["judge"].standard_normal(n_j) * p.sigma_j
    delta_j = p.position_bias + rng["judge"].standard_normal(n_j) * p.sigma_position
    nu_si = rng["si"].standard_normal((n_s, n_i)) * p.sigma_si
    nu_sj = rng["sj"].standard_normal((n_s, n_j)) * p.sigma_sj
    nu_ij = rng["ij"].standard_normal((n_i, n_j)) * p.sigma_ij
    nu_sij = rng["sij"].standard_normal((n_s, n_i, n_j)) * p.sigma_sij
    nu_g = rng["g"].standard_normal((n_s, n_i, n_g)) * p.sigma_g
    nu_gj = rng["gj"].standard_normal((n_s, n_i, n_g, n_j)) * p.sigma_gj
    eps = rng["e"].standard_normal((n_s, n_i, n_g, n_j, n_r)) * p.sigma_e
    self_pref = p.self_preference * same_family  # (s, j)

    len_s = rng["length"].standard_normal(n_s) * p.sigma_log_length_s
    len_i = rng["length"].standard_normal(n_i) * p.sigma_log_length_i
    len_e = rng["length"].standard_normal((n_s, n_i, n_g)) * p.sigma_log_length_e
    log_l0 = math.log(p.length_median)
    lengths = np.maximum(
        1, np.rint(np.exp(log_l0 + len_s[:, None, None] + len_i[None, :, None] + len_e))
    ).astype(np.int64)  # (s, i, g)
    length_term = p.length_bias * (np.log(lengths) - log_l0)

    # ---- pointwise records in run order -----------------------------------
    n_runs = n_j * n_r
    n_cells = n_s * n_i * n_g
    perm, batch_idx, batch_pos = _run_order(rng["point_order"], n_runs, n_cells, p.batch_size)
    run = np.arange(n_runs)
    r_run, j_run = run // n_j, run % n_j  # replicate-major runs
    s_rec = perm // (n_i * n_g)
    i_rec = (perm // n_g) % n_i
    g_rec = perm % n_g
    j_rec = np.broadcast_to(j_run[:, None], perm.shape)
    r_rec = np.broadcast_to(r_run[:, None], perm.shape)
    latent = (
        p.grand_mean
        + nu_s[s_rec]
        + nu_i[i_rec]
        + nu_j[j_rec]
        + nu_si[s_rec, i_rec]
        + nu_sj[s_rec, j_rec]
        + nu_ij[i_rec, j_rec]
        + nu_sij[s_rec, i_rec, j_rec]
        + nu_g[s_rec, i_rec, g_rec]
        + nu_gj[s_rec, i_rec, g_rec, j_rec]
        + self_pref[s_rec, j_rec]
        + length_term[s_rec, i_rec, g_rec]
        + eps[s_rec, i_rec, g_rec, j_rec, r_rec]
    )
    score = _carry_over(latent, p)

    gaps = rng["point_clock"].integers(2, 9, size=perm.shape)
    gaps = gaps + np.where((batch_pos == 0) & (batch_idx > 0), _BATCH_PAUSE_S, 0)[None, :]
    start = _T0 + r_run * _REPLICATE_STAGGER_S + j_run * _RUN_STAGGER_S
    seconds = start[:, None] + np.cumsum(gaps, axis=1)

    n_batches = -(-n_cells // p.batch_size)
    bw = _width(n_batches, 4)
    pointwise = (
        pl.DataFrame(
            {
                "item_set": pl.Series([p.item_set], dtype=pl.String).gather(
                    np.zeros(perm.size, dtype=np.int64)
                ),
                "item_id": item_ids[i_rec.ravel()],
                "system_id": system_ids[s_rec.ravel()],
                "judge_id": judge_ids[j_rec.ravel()],
                "score": score.ravel().astype(np.float64),
                "generation": g_rec.ravel().astype(np.int64),
                "replicate": r_rec.ravel().astype(np.int64),
                "_batch": np.broadcast_to(batch_idx, perm.shape).ravel().astype(np.int64),
                "batch_position": np.broadcast_to(batch_pos, perm.shape).ravel().astype(np.int64),
                "response_length": lengths[s_rec, i_rec, g_rec].ravel(),
                "_seconds": seconds.ravel().astype(np.int64),
            }
        )
        .with_columns(
            _batch_ids(
                "point-", pl.col("judge_id"), pl.col("replicate"), pl.col("_batch"), bw
            ).alias("batch_id"),
            (pl.col("_seconds") * 1_000_000)
            .cast(pl.Datetime("us", "UTC"))
            .dt.strftime("%Y-%m-%dT%H:%M:%SZ")
            .alias("timestamp"),
            pl.concat_str(
                [
                    pl.lit(f"sim{p.seed}-"),
                    pl.col("judge_id"),
                    pl.lit("-r"),
                    pl.col("replicate").cast(pl.String),
                ]
            ).alias("run_id"),
        )
        .select(POINTWISE_COLUMNS)
    )

    # ---- pairwise ------------------------------------------------------------
    theta = p.theta_per_point * nu_s
    u_si = rng["pair_si"].standard_normal((n_s, n_i)) * p.sigma_pair_si
    pairs = _select_pairs(rng["pairs"], p)
    k = pairs.shape[0]
    sys_a = np.column_stack([pairs[:, 0], pairs[:, 1]]).ravel()  # both orders
    sys_b = np.column_stack([pairs[:, 1], pairs[:, 0]]).ravel()
    n_o = 2 * k
    # latent preference in key order (o, i, g, j, r)
    eta_oij = (
        (theta[sys_a] - theta[sys_b])[:, None, None]
        + delta_j[None, None, :]
        + p.family_preference * (same_family[sys_a] - same_family[sys_b])[:, None, :]
        + (u_si[sys_a] - u_si[sys_b])[:, :, None]
    )  # (o, i, j)
    eta = np.broadcast_to(eta_oij[:, :, None, :, None], (n_o, n_i, n_g, n_j, n_r))
    tau = p.tie_threshold
    noise = rng["pair_outcome"].logistic(size=eta.shape)
    ystar = eta + noise
    code = np.where(ystar > tau, 0, np.where(ystar < -tau, 1, 2))  # A, B, tie
    m_a = 0.5 * (_sigmoid(eta - tau) + _sigmoid(eta + tau))
    kappa = p.preference_concentration
    pref = rng["pair_outcome"].beta(kappa * m_a, kappa * (1.0 - m_a))
    n_pair_cells = n_o * n_i * n_g
    n_pairwise = n_pair_cells * n_runs
    n_weighted = math.floor(p.weighted_fraction * n_pairwise + 0.5)
    weighted_key = np.zeros(n_pairwise, dtype=bool)
    if n_weighted:
        weighted_key[rng["pair_weighted"].choice(n_pairwise, n_weighted, replace=False)] = True
    weighted_key = weighted_key.reshape(eta.shape)

    pperm, pbatch, ppos = _run_order(rng["pair_order"], n_runs, n_pair_cells, p.batch_size)
    o_rec = pperm // (n_i * n_g)
    pi_rec = (pperm // n_g) % n_i
    pg_rec = pperm % n_g
    pj_rec = np.broadcast_to(j_run[:, None], pperm.shape)
    pr_rec = np.broadcast_to(r_run[:, None], pperm.shape)
    key = (o_rec, pi_rec, pg_rec, pj_rec, pr_rec)
    is_weighted = weighted_key[key].ravel()
    winner_txt = np.asarray(["A", "B", "tie"])[code[key].ravel()]
    a_rec, b_rec = sys_a[o_rec], sys_b[o_rec]
    n_pbatches = -(-n_pair_cells // p.batch_size) if n_pair_cells else 1
    pbw = _width(n_pbatches, 4)
    pairwise = (
        pl.DataFrame(
            {
                "item_set": pl.Series([p.item_set], dtype=pl.String).gather(
                    np.zeros(pperm.size, dtype=np.int64)
                ),
                "item_id": pl.Series(item_ids[pi_rec.ravel()], dtype=pl.String),
                "system_a": pl.Series(system_ids[a_rec.ravel()], dtype=pl.String),
                "system_b": pl.Series(system_ids[b_rec.ravel()], dtype=pl.String),
                "judge_id": pl.Series(judge_ids[pj_rec.ravel()], dtype=pl.String),
                "_winner": pl.Series(winner_txt, dtype=pl.String),
                "_preference": pl.Series(pref[key].ravel(), dtype=pl.Float64),
                "_weighted": pl.Series(is_weighted, dtype=pl.Boolean),
                "generation": pl.Series(pg_rec.ravel(), dtype=pl.Int64),
                "replicate": pl.Series(pr_rec.ravel(), dtype=pl.Int64),
                "length_a": pl.Series(lengths[a_rec, pi_rec, pg_rec].ravel(), dtype=pl.Int64),
                "length_b": pl.Series(lengths[b_rec, pi_rec, pg_rec].ravel(), dtype=pl.Int64),
                "_batch": pl.Series(np.broadcast_to(pbatch, pperm.shape).ravel(), dtype=pl.Int64),
                "batch_position": pl.Series(
                    np.broadcast_to(ppos, pperm.shape).ravel(), dtype=pl.Int64
                ),
            }
        )
        .with_columns(
            pl.when(pl.col("_weighted")).then(None).otherwise(pl.col("_winner")).alias("winner"),
            pl.when(pl.col("_weighted"))
            .then(pl.col("_preference"))
            .otherwise(None)
            .alias("preference"),
            _batch_ids(
                "pair-", pl.col("judge_id"), pl.col("replicate"), pl.col("_batch"), pbw
            ).alias("batch_id"),
        )
        .select(PAIRWISE_COLUMNS)
    )

    truth = _truth(
        p,
        systems=systems,
        judges=judges,
        item_ids=item_ids,
        model_of=model_of,
        effects={
            "nu_m": nu_m,
            "nu_cm": nu_cm,
            "nu_s": nu_s,
            "nu_i": nu_i,
            "nu_j": nu_j,
            "nu_si": nu_si,
            "nu_sj": nu_sj,
            "nu_ij": nu_ij,
            "nu_sij": nu_sij,
            "nu_g": nu_g,
            "nu_gj": nu_gj,
            "self_preference": self_pref,
            "log_length_s": len_s,
            "log_length_i": len_i,
            "log_length_e": len_e,
            "response_length": lengths,
            "theta": theta,
            "u_si": u_si,
            "delta_j": delta_j,
        },
        pairs=pairs,
        counts={
            "pointwise": int(pointwise.height),
            "pairwise": int(pairwise.height),
            "pairwise_weighted": int(n_weighted),
            "pairwise_hard": int(pairwise.height - n_weighted),
        },
    )
    return SimulatedDump(
        pointwise=pointwise, pairwise=pairwise, systems=systems, judges=judges, truth=truth
    )


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


# --------------------------------------------------------------------------
# writing and fault injection
# --------------------------------------------------------------------------


def _empty_faults() -> dict[str, Any]:
    return {
        "n_faults": 0,
        "seed": None,
        "counts": dict.fromkeys(FAULT_KINDS, 0),
        "lines": {"pointwise.jsonl": {}, "pairwise.jsonl": {}},
    }


def _ndjson(frame: pl.DataFrame) -> bytes:
    if frame.height == 0:
        return b""
    return frame.write_ndjson().encode()


def _dumps(record: dict[str, Any]) -> str:
    return orjson.dumps(record).decode()


def _fault_plan(n_faults: int) -> list[tuple[str, str]]:
    """(kind, file) for every fault: kinds cycle, shared kinds alternate files."""
    plan: list[tuple[str, str]] = []
    seen: dict[str, int] = dict.fromkeys(FAULT_KINDS, 0)
    for f in range(n_faults):
        kind = FAULT_KINDS[f % len(FAULT_KINDS)]
        if kind in _POINTWISE_ONLY:
            target = "pointwise.jsonl"
        elif kind in _PAIRWISE_ONLY:
            target = "pairwise.jsonl"
        else:
            target = "pointwise.jsonl" if seen[kind] % 2 == 0 else "pairwise.jsonl"
        seen[kind] += 1
        plan.append((kind, target))
    return plan


def _make_faults(
    dump: SimulatedDump, n_faults: int, seed: int
) -> tuple[dict[str, list[str]], dict[str, Any]]:
    """Fault lines to append per file, and their bookkeeping."""
    params = dump.truth["params"]
    n_rep = int(params["n_replicates"])
    high = float(params["scale"][1])
    low = float(params["scale"][0])
    out_of_scale = 99.0 if not low <= 99.0 <= high else high + 100.0
    rng = np.random.default_rng(seed)
    frames = {"pointwise.jsonl": dump.pointwise, "pairwise.jsonl": dump.pairwise}
    plan = _fault_plan(n_faults)
    for target in {t for _, t in plan}:
        if frames[target].height == 0:
            msg = f"write_dump: faults need clean records in {target}, which is empty"
            raise SimulationError(msg)
    hard_rows = (
        np.flatnonzero(dump.pairwise["winner"].is_not_null().to_numpy())
        if dump.pairwise.height
        else np.empty(0, dtype=np.int64)
    )
    if any(k == "unknown_winner" for k, _ in plan) and hard_rows.size == 0:
        msg = "write_dump: unknown_winner faults need pairwise records with a winner; none exist"
        raise SimulationError(msg)
    n_dup = sum(1 for k, _ in plan if k == "conflicting_duplicate")
    if n_dup > dump.pointwise.height:
        msg = (
            f"write_dump: {n_dup} conflicting_duplicate faults need as many pointwise "
            f"records; got {dump.pointwise.height}"
        )
        raise SimulationError(msg)
    dup_rows = iter(
        np.sort(rng.choice(dump.pointwise.height, n_dup, replace=False)).tolist() if n_dup else []
    )

    lines: dict[str, list[str]] = {"pointwise.jsonl": [], "pairwise.jsonl": []}
    where: dict[str, dict[str, list[int]]] = {"pointwise.jsonl": {}, "pairwise.jsonl": {}}
    counts = dict.fromkeys(FAULT_KINDS, 0)
    for ordinal, (kind, target) in enumerate(plan):
        frame = frames[target]
        clean = frame.height
        line_no = clean + len(lines[target]) + 1
        if kind == "conflicting_duplicate":
            row = int(next(dup_rows))
            rec = frame.row(row, named=True)
            rec["score"] = low if rec["score"] != low else high
            text = _dumps(rec)
            where[target].setdefault(kind, []).extend([row + 1, line_no])
        else:
            pool = hard_rows if kind == "unknown_winner" else None
            row = int(rng.choice(pool)) if pool is not None else int(rng.integers(frame.height))
            rec = frame.row(row, named=True)
            rec["replicate"] = n_rep + ordinal  # fresh key: one fault per line
            if kind == "malformed_line":
                full = _dumps(rec)
                text = full[: len(full) // 2]
            elif kind == "missing_field":
                del rec["judge_id"]
                text = _dumps(rec)
            elif kind == "wrong_type":
                rec["score"] = "high"
                text = _dumps(rec)
            elif kind == "non_finite_score":
                rec["score"] = "__NON_FINITE__"
                text = _dumps(rec).replace('"__NON_FINITE__"', "Infinity")
            elif kind == "score_out_of_scale":
                rec["score"] = out_of_scale
                text = _dumps(rec)
            elif kind == "unknown_winner":
                rec["winner"] = "C"
                rec["preference"] = None
                text = _dumps(rec)
            elif kind == "preference_out_of_range":
                rec["winner"] = None
                rec["preference"] = 1.7
                text = _dumps(rec)
            else:  # same_system
                rec["system_b"] = rec["system_a"]
                text = _dumps(rec)
            where[target].setdefault(kind, []).append(line_no)
        lines[target].append(text)
        counts[kind] += 1
    for per_file in where.values():
        for kind in per_file:
            per_file[kind] = sorted(per_file[kind])
    book = {"n_faults": n_faults, "seed": seed, "counts": counts, "lines": where}
    return lines, book


def write_dump(
    dump: SimulatedDump, out_dir: str | Path, *, faults: int = 0, seed: int = 0
) -> dict[str, Path]:
    """Write a simulated dump as JSON Lines plus ``truth.json``.

    Parameters
    ----------
    dump : SimulatedDump
        Output of :func:`simulate_dump`; it is not modified.
    out_dir : str or Path
        Directory to write into (created if missing); existing files of the
        same names are overwritten.
    faults : int, default 0
        Number of bad records appended after the clean ones, cycling over
        :data:`FAULT_KINDS`.  Pointwise-only kinds go to ``pointwise.jsonl``,
        pairwise-only kinds to ``pairwise.jsonl``, and ``malformed_line`` /
        ``missing_field`` alternate between the two, pointwise first.
    seed : int, default 0
        Seed choosing which clean records the faults are derived from.

    Returns
    -------
    dict of str to Path
        Keys ``pointwise``, ``pairwise``, ``systems``, ``judges``, ``truth``.

    Raises
    ------
    SimulationError
        If ``faults`` or ``seed`` is not a non-negative int, or a fault kind
        needs records that the dump does not have.

    Notes
    -----
    ``truth.json`` is ``dump.truth`` with ``faults`` filled in:
    ``counts[kind]`` is the number of faulty lines appended of that kind and
    ``lines[file][kind]`` their 1-based line numbers; for
    ``conflicting_duplicate`` the list also holds the clean original each copy
    conflicts with, since both lines then form the conflict.  Every other
    fault gets a fresh ``replicate`` (``n_replicates + ordinal``) so it is one
    kind only.  The same dump, ``faults`` and ``seed`` give byte-identical files.
    """
    if not _is_int(faults) or faults < 0:
        msg = f"write_dump: faults must be a non-negative int; got {faults!r}"
        raise SimulationError(msg)
    if not _is_int(seed) or seed < 0:
        msg = f"write_dump: seed must be a non-negative int; got {seed!r}"
        raise SimulationError(msg)
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    truth = copy.deepcopy(dump.truth)
    extra: dict[str, list[str]] = {"pointwise.jsonl": [], "pairwise.jsonl": []}
    if faults:
        extra, truth["faults"] = _make_faults(dump, int(faults), int(seed))
    paths = {
        "pointwise": out / "pointwise.jsonl",
        "pairwise": out / "pairwise.jsonl",
        "systems": out / "systems.jsonl",
        "judges": out / "judges.jsonl",
        "truth": out / "truth.json",
    }
    for name, frame in (("pointwise", dump.pointwise), ("pairwise", dump.pairwise)):
        tail = "".join(line + "\n" for line in extra[f"{name}.jsonl"]).encode()
        paths[name].write_bytes(_ndjson(frame) + tail)
    paths["systems"].write_bytes(_ndjson(dump.systems))
    paths["judges"].write_bytes(_ndjson(dump.judges))
    paths["truth"].write_bytes(orjson.dumps(truth, option=orjson.OPT_INDENT_2) + b"\n")
    return paths
