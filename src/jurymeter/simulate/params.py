"""The inputs and outputs of the simulator: parameters, their checks and the dump.

:class:`SimulationParams` (design and true parameters) and its validation,
:class:`SimulatedDump` (record frames, registries and truth) and the record
columns of both kinds; every other module of :mod:`jurymeter.simulate` builds
on these.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import polars as pl

from jurymeter.errors import SimulationError

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
        :math:`\delta`, mean logit shift in favour of the system shown first:
        with the default ties, +8.3 points of win rate over 1/2 shown first and
        -8.3 shown second, so a slot-A advantage (first minus second,
        ``docs/pairwise.md``) of about 16.7 points between equal systems, about
        twice the 8.6 of [Anand2026]_ Table 3.
    sigma_position : float, default 0.2
        SD of the judge-specific position bias :math:`\delta_j`.
    family_preference : float, default 0.3
        :math:`\varphi`, logit bonus for a system of the judge's family.
    family_lifts : mapping of str to float or None, default None
        Per-family lifts :math:`\varphi_f`: the logit bonus a judge of family
        ``f`` gives a system of its own family, in place of
        :math:`\varphi` for the families listed ([Awuni2026]_ Sec. 5 finds
        a different lift in every family).  Every key must be a judge family.
    position_following : float or mapping of str to float, default 0.0
        :math:`q_j`, the probability that judge ``j`` ignores content on a
        call and picks the system shown first ([Awuni2026]_ Sec. 8, the pure
        position-following model): verdict ``A`` on a hard record,
        ``preference`` 1 on a weighted one.  A number applies to every judge;
        a mapping keyed by ``judge_id`` sets some judges (the rest 0).
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
    family_lifts: Mapping[str, float] | None = None
    position_following: float | Mapping[str, float] = 0.0
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
    if p.family_lifts is not None and (
        not isinstance(p.family_lifts, Mapping)
        or not all(isinstance(k, str) and _is_real(v) for k, v in p.family_lifts.items())
    ):
        _fail("family_lifts", "None or a mapping of family name to a finite number", p.family_lifts)
    q = p.position_following
    if isinstance(q, Mapping):
        if not all(isinstance(k, str) and _is_real(v) and 0.0 <= v <= 1.0 for k, v in q.items()):
            _fail("position_following", "a mapping of judge_id to a number in [0, 1]", q)
    elif not _is_real(q) or not 0.0 <= q <= 1.0:
        _fail("position_following", "a number in [0, 1] or a mapping judge_id -> [0, 1]", q)


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
    if p.family_lifts is not None:
        values["family_lifts"] = {str(k): float(v) for k, v in sorted(p.family_lifts.items())}
    if isinstance(p.position_following, Mapping):
        values["position_following"] = {
            str(k): float(v) for k, v in sorted(p.position_following.items())
        }
    else:
        values["position_following"] = float(p.position_following)
    return SimulationParams(**values)
