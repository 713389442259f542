"""Drawing the effects of the generative model and the records in run order.

:func:`simulate_dump` draws every effect of the pointwise and pairwise models
(equations in :mod:`jurymeter.simulate`), lays the calls out in judge runs and
batches with the within-batch carry-over, and hands the drawn effects to
:mod:`jurymeter.simulate.truth`.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime

import numpy as np
import polars as pl

from jurymeter.errors import SimulationError
from jurymeter.simulate.params import (
    PAIRWISE_COLUMNS,
    POINTWISE_COLUMNS,
    SimulatedDump,
    SimulationParams,
    _normalised,
    _validate,
)
from jurymeter.simulate.registries import _registries, _width
from jurymeter.simulate.truth import _truth

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
    # appended after the original streams so that every earlier child keeps its seed
    "pair_position",
)


def _sigmoid(x: np.ndarray) -> np.ndarray:
    return 0.5 * (1.0 + np.tanh(0.5 * x))


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
    emitted: np.ndarray = np.clip(np.rint(z), p.scale[0], p.scale[1])
    return emitted


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


def _judge_lifts(p: SimulationParams, jud_fam: np.ndarray) -> np.ndarray:
    """Per-judge family lift: ``family_lifts[f(j)]`` where listed, else ``phi``."""
    families = jud_fam.tolist()
    return _per_judge(
        "family_lifts", p.family_lifts or {}, families, p.family_preference,
        names="judge families", absent="that no judge has",
        known=f"the judges' families are {sorted(set(families))!r}",
    )


def _judge_following(p: SimulationParams, judge_ids: np.ndarray) -> np.ndarray:
    """Per-judge position-following probability ``q_j``."""
    q = p.position_following
    if not isinstance(q, Mapping):
        return np.full(judge_ids.size, float(q))
    judges = judge_ids.tolist()
    return _per_judge(
        "position_following", q, judges, 0.0,
        names="judges", absent="that are not in the panel", known=f"the judges are {judges!r}",
    )


def _per_judge(
    field: str, given: Mapping[str, float], keys: list[str], default: float, *, names: str, absent: str, known: str
) -> np.ndarray:
    """``given[k]`` for each judge's key ``k`` (``default`` where unlisted); a listed key no judge has is refused."""
    unknown = sorted(set(given) - set(keys))
    if unknown:
        msg = f"SimulationParams.{field} names {names} {unknown!r} {absent}; {known}"
        raise SimulationError(msg)
    return np.asarray([given.get(k, default) for k in keys], np.float64)


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
    preference ([Awuni2026]_ Sec. 4-5): the bonus of judge ``j`` is
    :math:`\varphi_{f(j)}` (``family_lifts``, else ``family_preference``), and
    with probability :math:`q_j` (``position_following``) a call ignores
    :math:`\eta` and picks the system shown first (an independent stream, so
    the other draws do not move).  The docstring of
    :mod:`jurymeter.simulate` gives the equations.  Record counts are
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
    panel = _panel(p)
    effects = _pointwise_effects(p, rng, panel)
    pointwise = _pointwise_records(p, rng, panel, effects)
    pair = _pairwise_draws(p, rng, panel, effects)
    pairwise = _pairwise_records(p, rng, panel, effects["response_length"], pair)
    truth = _truth(
        p,
        systems=panel.systems,
        judges=panel.judges,
        item_ids=panel.item_ids,
        model_of=panel.model_of,
        effects={
            **{name: effects[name] for name in _TRUTH_EFFECTS},
            "theta": pair.theta,
            "u_si": pair.u_si,
            "delta_j": effects["delta_j"],
            "phi_j": pair.phi_j,
            "q_j": pair.q_j,
            "eta_oij": pair.eta_oij,
            "weighted_key": pair.weighted_key,
        },
        pairs=pair.pairs,
        counts={
            "pointwise": int(pointwise.height),
            "pairwise": int(pairwise.height),
            "pairwise_weighted": int(pair.n_weighted),
            "pairwise_hard": int(pairwise.height - pair.n_weighted),
        },
    )
    return SimulatedDump(
        pointwise=pointwise, pairwise=pairwise, systems=panel.systems, judges=panel.judges, truth=truth
    )


# The pointwise effects the truth reports, in its order.
_TRUTH_EFFECTS = (
    "nu_m", "nu_cm", "nu_s", "nu_i", "nu_j", "nu_si", "nu_sj", "nu_ij", "nu_sij", "nu_g", "nu_gj",
    "self_preference", "log_length_s", "log_length_i", "log_length_e", "response_length",
)


@dataclass(frozen=True, slots=True)
class _Panel:
    """The registries and ids every part of one simulation shares."""

    systems: pl.DataFrame
    judges: pl.DataFrame
    model_of: np.ndarray
    system_ids: np.ndarray
    judge_ids: np.ndarray
    item_ids: np.ndarray
    judge_families: np.ndarray
    same_family: np.ndarray  # (s, j): 1.0 where the system and the judge share a family


def _panel(p: SimulationParams) -> _Panel:
    systems, judges, model_of = _registries(p)
    iw = _width(p.n_items, 4)
    sys_fam = np.asarray(systems["family"].to_list())
    jud_fam = np.asarray(judges["family"].to_list())
    return _Panel(
        systems=systems,
        judges=judges,
        model_of=model_of,
        system_ids=np.asarray(systems["system_id"].to_list()),
        judge_ids=np.asarray(judges["judge_id"].to_list()),
        item_ids=np.asarray([f"item-{k:0{iw}d}" for k in range(p.n_items)]),
        judge_families=jud_fam,
        same_family=(sys_fam[:, None] == jud_fam[None, :]).astype(np.float64),
    )


def _pointwise_effects(
    p: SimulationParams, rng: dict[str, np.random.Generator], panel: _Panel
) -> dict[str, np.ndarray]:
    """Every random effect of the pointwise model, the judges' position biases and the lengths.

    Each stream draws in the order it always has (a reordering would change the
    dump for the same seed).
    """
    n_s, n_i, n_j, n_g, n_r = p.n_systems, p.n_items, p.n_judges, p.n_generations, p.n_replicates
    n_m = int(panel.model_of.max()) + 1
    sd_m = p.sigma_s * math.sqrt(1.0 - p.config_share)
    sd_cm = p.sigma_s * math.sqrt(p.config_share)
    nu_m = rng["system"].standard_normal(n_m) * sd_m
    nu_cm = rng["system"].standard_normal(n_s) * sd_cm
    len_s = rng["length"].standard_normal(n_s) * p.sigma_log_length_s
    len_i = rng["length"].standard_normal(n_i) * p.sigma_log_length_i
    len_e = rng["length"].standard_normal((n_s, n_i, n_g)) * p.sigma_log_length_e
    log_l0 = math.log(p.length_median)
    lengths = np.maximum(
        1, np.rint(np.exp(log_l0 + len_s[:, None, None] + len_i[None, :, None] + len_e))
    ).astype(np.int64)  # (s, i, g)
    return {
        "nu_m": nu_m,
        "nu_cm": nu_cm,
        "nu_s": nu_m[panel.model_of] + nu_cm,
        "nu_i": rng["item"].standard_normal(n_i) * p.sigma_i,
        "nu_j": rng["judge"].standard_normal(n_j) * p.sigma_j,
        "delta_j": p.position_bias + rng["judge"].standard_normal(n_j) * p.sigma_position,
        "nu_si": rng["si"].standard_normal((n_s, n_i)) * p.sigma_si,
        "nu_sj": rng["sj"].standard_normal((n_s, n_j)) * p.sigma_sj,
        "nu_ij": rng["ij"].standard_normal((n_i, n_j)) * p.sigma_ij,
        "nu_sij": rng["sij"].standard_normal((n_s, n_i, n_j)) * p.sigma_sij,
        "nu_g": rng["g"].standard_normal((n_s, n_i, n_g)) * p.sigma_g,
        "nu_gj": rng["gj"].standard_normal((n_s, n_i, n_g, n_j)) * p.sigma_gj,
        "eps": rng["e"].standard_normal((n_s, n_i, n_g, n_j, n_r)) * p.sigma_e,
        "self_preference": p.self_preference * panel.same_family,  # (s, j)
        "log_length_s": len_s,
        "log_length_i": len_i,
        "log_length_e": len_e,
        "response_length": lengths,
        "length_term": p.length_bias * (np.log(lengths) - log_l0),
    }


def _runs(p: SimulationParams) -> tuple[np.ndarray, np.ndarray]:
    """Replicate and judge of every run (replicate-major: the judges' runs of replicate 0 first)."""
    run = np.arange(p.n_judges * p.n_replicates)
    return run // p.n_judges, run % p.n_judges


def _run_records(
    p: SimulationParams, rng: np.random.Generator, n_units: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Every run's records in run order: unit, item, generation, judge and replicate codes, then batch and position.

    Each run (:func:`_runs`) rates the ``n_units * n_items * n_generations`` cells in
    the order :func:`_run_order` shuffles from ``rng``; cell ``c`` is unit
    ``c // (n_items n_generations)``, item ``(c // n_generations) % n_items`` and
    generation ``c % n_generations``. The five codes are ``(runs, cells)`` arrays;
    batch index and position are per call (``(cells,)``).
    """
    n_i, n_g = p.n_items, p.n_generations
    r_run, j_run = _runs(p)
    perm, batch_idx, batch_pos = _run_order(rng, r_run.size, n_units * n_i * n_g, p.batch_size)
    return (
        perm // (n_i * n_g),
        (perm // n_g) % n_i,
        perm % n_g,
        np.broadcast_to(j_run[:, None], perm.shape),
        np.broadcast_to(r_run[:, None], perm.shape),
        batch_idx,
        batch_pos,
    )


def _pointwise_records(
    p: SimulationParams, rng: dict[str, np.random.Generator], panel: _Panel, e: dict[str, np.ndarray]
) -> pl.DataFrame:
    """The pointwise records in run order, with the carry-over, batches and the session clock."""
    r_run, j_run = _runs(p)
    n_cells = p.n_systems * p.n_items * p.n_generations
    s_rec, i_rec, g_rec, j_rec, r_rec, batch_idx, batch_pos = _run_records(p, rng["point_order"], p.n_systems)
    latent = (
        p.grand_mean
        + e["nu_s"][s_rec]
        + e["nu_i"][i_rec]
        + e["nu_j"][j_rec]
        + e["nu_si"][s_rec, i_rec]
        + e["nu_sj"][s_rec, j_rec]
        + e["nu_ij"][i_rec, j_rec]
        + e["nu_sij"][s_rec, i_rec, j_rec]
        + e["nu_g"][s_rec, i_rec, g_rec]
        + e["nu_gj"][s_rec, i_rec, g_rec, j_rec]
        + e["self_preference"][s_rec, j_rec]
        + e["length_term"][s_rec, i_rec, g_rec]
        + e["eps"][s_rec, i_rec, g_rec, j_rec, r_rec]
    )
    score = _carry_over(latent, p)

    gaps = rng["point_clock"].integers(2, 9, size=s_rec.shape)
    gaps = gaps + np.where((batch_pos == 0) & (batch_idx > 0), _BATCH_PAUSE_S, 0)[None, :]
    start = _T0 + r_run * _REPLICATE_STAGGER_S + j_run * _RUN_STAGGER_S
    seconds = start[:, None] + np.cumsum(gaps, axis=1)

    n_batches = -(-n_cells // p.batch_size)
    bw = _width(n_batches, 4)
    return (
        pl.DataFrame(
            {
                "item_set": pl.Series([p.item_set], dtype=pl.String).gather(
                    np.zeros(s_rec.size, dtype=np.int64)
                ),
                "item_id": panel.item_ids[i_rec.ravel()],
                "system_id": panel.system_ids[s_rec.ravel()],
                "judge_id": panel.judge_ids[j_rec.ravel()],
                "score": score.ravel().astype(np.float64),
                "generation": g_rec.ravel().astype(np.int64),
                "replicate": r_rec.ravel().astype(np.int64),
                "_batch": np.broadcast_to(batch_idx, s_rec.shape).ravel().astype(np.int64),
                "batch_position": np.broadcast_to(batch_pos, s_rec.shape).ravel().astype(np.int64),
                "response_length": e["response_length"][s_rec, i_rec, g_rec].ravel(),
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


@dataclass(frozen=True, slots=True)
class _PairwiseDraws:
    """The pairwise model's draws, in key order ``(o, i, g, j, r)`` (``o``: a pair in one order)."""

    pairs: np.ndarray  # (k, 2) unordered pairs
    sys_a: np.ndarray  # (2k,) the system shown first, both orders of every pair
    sys_b: np.ndarray
    theta: np.ndarray
    u_si: np.ndarray
    phi_j: np.ndarray
    q_j: np.ndarray
    eta_oij: np.ndarray  # (o, i, j) latent preference
    code: np.ndarray  # 0 = A, 1 = B, 2 = tie
    preference: np.ndarray
    weighted_key: np.ndarray
    n_weighted: int


def _pairwise_draws(
    p: SimulationParams, rng: dict[str, np.random.Generator], panel: _Panel, e: dict[str, np.ndarray]
) -> _PairwiseDraws:
    """Every pairwise outcome: Bradley-Terry with ties, position bias, family lifts, position following."""
    n_i, n_g, n_r = p.n_items, p.n_generations, p.n_replicates
    theta = p.theta_per_point * e["nu_s"]
    u_si = rng["pair_si"].standard_normal((p.n_systems, n_i)) * p.sigma_pair_si
    pairs = _select_pairs(rng["pairs"], p)
    sys_a = np.column_stack([pairs[:, 0], pairs[:, 1]]).ravel()  # both orders
    sys_b = np.column_stack([pairs[:, 1], pairs[:, 0]]).ravel()
    n_o = 2 * pairs.shape[0]
    phi_j = _judge_lifts(p, panel.judge_families)
    q_j = _judge_following(p, panel.judge_ids)
    same_family = panel.same_family
    # phi * (...) when no lift is listed: the default draws stay bit for bit unchanged
    family_term = (
        p.family_preference * (same_family[sys_a] - same_family[sys_b])[:, None, :]
        if p.family_lifts is None
        else phi_j[None, None, :] * (same_family[sys_a] - same_family[sys_b])[:, None, :]
    )
    eta_oij = (
        (theta[sys_a] - theta[sys_b])[:, None, None]
        + e["delta_j"][None, None, :]
        + family_term
        + (u_si[sys_a] - u_si[sys_b])[:, :, None]
    )  # (o, i, j)
    eta = np.broadcast_to(eta_oij[:, :, None, :, None], (n_o, n_i, n_g, p.n_judges, n_r))
    tau = p.tie_threshold
    noise = rng["pair_outcome"].logistic(size=eta.shape)
    ystar = eta + noise
    code = np.where(ystar > tau, 0, np.where(ystar < -tau, 1, 2))  # A, B, tie
    m_a = 0.5 * (_sigmoid(eta - tau) + _sigmoid(eta + tau))
    kappa = p.preference_concentration
    pref = rng["pair_outcome"].beta(kappa * m_a, kappa * (1.0 - m_a))
    if np.any(q_j > 0.0):  # pure position-following calls pick slot A whatever the content
        follow = rng["pair_position"].random(eta.shape) < q_j[None, None, None, :, None]
        code = np.where(follow, 0, code)
        pref = np.where(follow, 1.0, pref)
    n_pairwise = eta.size
    n_weighted = math.floor(p.weighted_fraction * n_pairwise + 0.5)
    weighted_key = np.zeros(n_pairwise, dtype=bool)
    if n_weighted:
        weighted_key[rng["pair_weighted"].choice(n_pairwise, n_weighted, replace=False)] = True
    return _PairwiseDraws(
        pairs=pairs, sys_a=sys_a, sys_b=sys_b, theta=theta, u_si=u_si, phi_j=phi_j, q_j=q_j,
        eta_oij=eta_oij, code=code, preference=pref, weighted_key=weighted_key.reshape(eta.shape),
        n_weighted=n_weighted,
    )


def _pairwise_records(
    p: SimulationParams,
    rng: dict[str, np.random.Generator],
    panel: _Panel,
    lengths: np.ndarray,
    d: _PairwiseDraws,
) -> pl.DataFrame:
    """The pairwise records in run order: hard verdicts, or a preference where the record is weighted."""
    n_pair_cells = d.sys_a.size * p.n_items * p.n_generations
    o_rec, pi_rec, pg_rec, pj_rec, pr_rec, pbatch, ppos = _run_records(p, rng["pair_order"], d.sys_a.size)
    key = (o_rec, pi_rec, pg_rec, pj_rec, pr_rec)
    is_weighted = d.weighted_key[key].ravel()
    winner_txt = np.asarray(["A", "B", "tie"])[d.code[key].ravel()]
    a_rec, b_rec = d.sys_a[o_rec], d.sys_b[o_rec]
    n_pbatches = -(-n_pair_cells // p.batch_size) if n_pair_cells else 1
    pbw = _width(n_pbatches, 4)
    return (
        pl.DataFrame(
            {
                "item_set": pl.Series([p.item_set], dtype=pl.String).gather(
                    np.zeros(o_rec.size, dtype=np.int64)
                ),
                "item_id": pl.Series(panel.item_ids[pi_rec.ravel()], dtype=pl.String),
                "system_a": pl.Series(panel.system_ids[a_rec.ravel()], dtype=pl.String),
                "system_b": pl.Series(panel.system_ids[b_rec.ravel()], dtype=pl.String),
                "judge_id": pl.Series(panel.judge_ids[pj_rec.ravel()], dtype=pl.String),
                "_winner": pl.Series(winner_txt, dtype=pl.String),
                "_preference": pl.Series(d.preference[key].ravel(), dtype=pl.Float64),
                "_weighted": pl.Series(is_weighted, dtype=pl.Boolean),
                "generation": pl.Series(pg_rec.ravel(), dtype=pl.Int64),
                "replicate": pl.Series(pr_rec.ravel(), dtype=pl.Int64),
                "length_a": pl.Series(lengths[a_rec, pi_rec, pg_rec].ravel(), dtype=pl.Int64),
                "length_b": pl.Series(lengths[b_rec, pi_rec, pg_rec].ravel(), dtype=pl.Int64),
                "_batch": pl.Series(np.broadcast_to(pbatch, o_rec.shape).ravel(), dtype=pl.Int64),
                "batch_position": pl.Series(
                    np.broadcast_to(ppos, o_rec.shape).ravel(), dtype=pl.Int64
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
