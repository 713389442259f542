r"""Bradley-Terry ratings of pooled pairwise outcomes, with prompt-clustered intervals.

Model and notation. Systems :math:`s = 1..S` carry ratings :math:`\theta_s` on the
logit scale, identified by :math:`\sum_s \theta_s = 0`; an outcome of the pair
:math:`(a, b)` gives :math:`a` the score :math:`y \in [0, 1]` with

.. math::

    E[y] = \sigma(\theta_a - \theta_b), \qquad \sigma(x) = 1 / (1 + e^{-x}),

the Bradley-Terry model ([Awuni2026]_ section 4.2, "Bradley-Terry ability"). A
tie is half a win each way (``y = 1/2``) and a soft score (a preference
probability) counts fractionally; the fit maximizes the quasi log-likelihood
:math:`\sum y \log\sigma(\theta_a-\theta_b) + (1-y)\log\sigma(\theta_b-\theta_a)`,
which depends on the data only through the summed scores and counts of each
(system, system) cell, the sufficient statistics ``W[a, b]`` (what ``a`` earned
against ``b``) and :math:`n_{ab} = W[a, b] + W[b, a]`.

Uncertainty. Items (prompts) are the sampled unit: every game of one item shares
the item's content, so outcomes of one item are correlated and a bootstrap that
resamples battles one by one (the common arena leaderboards) is too narrow
([Anand2026]_ sections 3 and 5: the item facet dominates; [Awuni2026]_ table 2
reports prompt-clustered sandwich errors). The intervals here resample items
with all their games and judges (optionally judges too), refitting every
resample; the battle bootstrap is reported beside them, with the ratio of the
widths. The cluster-robust sandwich variance by item is the analytic check.

Elo scale: :math:`1000 + (400/\ln 10)(\theta_s - c)`, :math:`c` the mean rating
(0) or the anchor system's rating.

References
----------
.. [Anand2026] A. Anand, "Ask Which, Not How Good: Sizing Benchmarks Scored by an
   LLM", 2026 (``papers/ask-which-not-how-good.txt``).
.. [Awuni2026] D. A. Awuni et al., "Who Judges Matters: Measuring
   Family-Conditioned Preference in LLM-as-Judge Panels", 2026
   (``papers/who-judges-matters.txt``).
.. [Hunter2004] D. R. Hunter, "MM algorithms for generalized Bradley-Terry
   models", Annals of Statistics 32, 2004 (existence of the MLE: the win graph
   is strongly connected).
.. [Chiang2024] W.-L. Chiang et al., "Chatbot Arena: An Open Platform for
   Evaluating LLMs by Human Preference", 2024 (battle bootstrap; style control
   with a normalized length difference).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import polars as pl

from jurymeter.errors import ConfigError
from jurymeter.stats.intervals import percentile_bounds
from jurymeter.stats.pairwise.bt_length import (
    LENGTH_SCHEMA,
    LengthControl,
    _length_control,
)
from jurymeter.stats.pairwise.bt_model import (
    ELO_CENTRE,
    ELO_PER_LOGIT,
    ComparisonGraphError,
    ConvergenceError,
    _code,
    _Coded,
    _graph_problem,
    _newton,
    _ranks,
    _wins_matrix,
    bt_fit,
    bt_wins,
)
from jurymeter.stats.pairwise.bt_resample import (
    SOFT_BINS,
    _battle,
    _prompt_sums,
    _refit,
)
from jurymeter.stats.pairwise.bt_resample import (  # bench/bradley_terry.py and the tests call it from here
    _batched_newton as _batched_newton,
)

__all__ = [
    "BT_SCHEMA",
    "ELO_CENTRE",
    "ELO_PER_LOGIT",
    "LENGTH_SCHEMA",
    "NOTES",
    "SOFT_BINS",
    "BradleyTerry",
    "ComparisonGraphError",
    "ConvergenceError",
    "LengthControl",
    "bradley_terry",
    "bt_fit",
    "bt_wins",
]


BT_SCHEMA: dict[str, pl.DataType] = {
    "system_id": pl.String(),
    "rating": pl.Float64(),
    "rating_elo": pl.Float64(),
    "se_sandwich": pl.Float64(),
    "low": pl.Float64(),
    "high": pl.Float64(),
    "battle_low": pl.Float64(),
    "battle_high": pl.Float64(),
    "elo_low": pl.Float64(),
    "elo_high": pl.Float64(),
    "width_ratio": pl.Float64(),
    "rank": pl.Int64(),
    "rank_low": pl.Int64(),
    "rank_high": pl.Int64(),
    "tie_group": pl.Int64(),
}


# --------------------------------------------------------------------------
# results
# --------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class BradleyTerry:
    r"""Bradley-Terry ratings with prompt-bootstrap, battle-bootstrap and sandwich intervals.

    Attributes
    ----------
    table : polars.DataFrame
        One row per system, best first, columns :data:`BT_SCHEMA`: ``rating``
        (logit, sum to zero), ``rating_elo``, ``se_sandwich`` (logit),
        ``low``/``high`` (prompt-bootstrap percentile interval, logit, sum to
        zero), ``battle_low``/``battle_high`` (battle bootstrap, logit; with an
        anchor, re-anchored per resample: the anchor's rating plus the
        percentiles of the difference to it),
        ``elo_low``/``elo_high`` (prompt bootstrap on the Elo scale with the
        same centring as ``rating_elo``), ``width_ratio`` (prompt width / battle
        width, of differences to the anchor, else to the one system in every
        comparison, else of the ratings; null for that system), ``rank`` (1 = best), ``rank_low``/``rank_high`` (prompt
        bootstrap percentiles of the rank), ``tie_group`` (1 = top).
    width_ratio : float or None
        Median over systems of ``width_ratio``; ``None`` (and the battle
        columns null) when the battle bootstrap was not run.
    n_boot : int
        Resamples drawn for each bootstrap.
    prompt_degenerate, battle_degenerate : int
        Resamples without finite ratings (a system won or lost all its
        comparisons in the resample), left out of the intervals
        (``battle_degenerate`` ``None`` without the battle bootstrap).
    level : float
        Interval level.
    n_outcomes, n_items : int
        Outcome rows and items of the fit.
    resample_judges : bool
        Whether the prompt bootstrap also resampled judges.
    anchor : str or None
        The system at 1000 on the Elo scale (``None``: the mean is).
    length_control : LengthControl or None
        The style-controlled fit, where games with lengths were given.
    length_control_reason : str or None
        Why ``length_control`` is ``None``.
    notes : tuple of str
        The conventions of the fit, in words.
    """

    table: pl.DataFrame
    width_ratio: float | None
    n_boot: int
    prompt_degenerate: int
    battle_degenerate: int | None
    level: float
    n_outcomes: int
    n_items: int
    resample_judges: bool
    anchor: str | None
    length_control: LengthControl | None
    length_control_reason: str | None
    notes: tuple[str, ...]


NOTES: tuple[str, ...] = (
    "Outcomes of every judge are pooled; a tie is half a win each way and a soft score "
    "counts fractionally.",
    "Ratings are on the logit scale and sum to zero; Elo = 1000 + 400/ln(10) per logit "
    "from the mean (or from the anchor system).",
    "low/high: percentile interval of the prompt bootstrap (items resampled with all their "
    "games and judges; two-stage with judges when resample_judges).",
    "battle_low/battle_high: percentile interval of the battle bootstrap (outcome rows "
    "resampled independently, as the common leaderboards do); with an anchor, re-anchored "
    "on every resample as the prompt bootstrap's Elo bounds are (the anchor's own is a point).",
    "se_sandwich: cluster-robust sandwich by item, no small-sample correction.",
    "rank_low/rank_high: percentiles of each system's rank over the prompt-bootstrap "
    "resamples (rank 1 = best).",
    "tie_group: systems sorted by rating; adjacent systems are separated when at least "
    "level + (1 - level)/2 of the prompt-bootstrap resamples order them the same way; a "
    "tie group is a maximal run of adjacent systems with no separation between them "
    "(so two members of one group may differ clearly when others lie between them).",
    "Bootstrap resamples without finite ratings (a system earned nothing or everything, or "
    "the resampled comparisons are not connected) are left out of the intervals and "
    "counted in prompt_degenerate / battle_degenerate.",
)


# --------------------------------------------------------------------------
# bradley_terry
# --------------------------------------------------------------------------


def _sandwich(
    c: _Coded, theta: np.ndarray, info: np.ndarray
) -> np.ndarray:
    """Cluster-robust (by item) covariance of the sum-to-zero ratings."""
    s = len(c.systems)
    p = 1.0 / (1.0 + np.exp(-(theta[c.x] - theta[c.y])))
    r = c.score - p
    n_items = len(c.items)
    score = np.zeros((n_items, s))
    np.add.at(score, (c.item, c.x), r)
    np.add.at(score, (c.item, c.y), -r)
    meat = score.T @ score
    bread = np.linalg.inv(info + np.full((s, s), 1.0 / s))  # = pinv(info) on 1-perp, + 11'/S
    cov: np.ndarray = bread @ meat @ bread
    return cov


def _check_options(
    n_boot: object, seed: object, level: object, anchor: object, systems: tuple[str, ...]
) -> None:
    if not isinstance(n_boot, int) or isinstance(n_boot, bool) or n_boot < 2:
        msg = f"n_boot must be an int >= 2; got {n_boot!r}"
        raise ConfigError(msg)
    if not isinstance(seed, int) or isinstance(seed, bool) or seed < 0:
        msg = f"seed must be a non-negative int; got {seed!r}"
        raise ConfigError(msg)
    if not isinstance(level, float | int) or isinstance(level, bool) or not 0.0 < level < 1.0:
        msg = f"level must be a number in (0, 1); got {level!r}"
        raise ConfigError(msg)
    if anchor is not None and anchor not in systems:
        msg = f"anchor must be None or one of the systems {list(systems)}; got {anchor!r}"
        raise ConfigError(msg)


def bradley_terry(
    outcomes: pl.DataFrame,
    *,
    n_boot: int = 1000,
    seed: int = 0,
    level: float = 0.95,
    resample_judges: bool = False,
    anchor: str | None = None,
    games: pl.DataFrame | None = None,
    battle_bootstrap: bool = True,
) -> BradleyTerry:
    r"""Bradley-Terry ratings of pooled outcomes with honest (prompt-clustered) intervals.

    Parameters
    ----------
    outcomes : polars.DataFrame
        Outcomes of :func:`jurymeter.stats.pairwise.games.reconcile`, every
        judge pooled. A tie counts as half a win each way; a soft score counts
        fractionally.
    n_boot : int, default 1000
        Resamples of each bootstrap (prompt and battle).
    seed : int, default 0
        Seed of ``numpy.random.default_rng``.
    level : float, default 0.95
        Level of the percentile intervals.
    resample_judges : bool, default False
        Two-stage prompt bootstrap: judges resampled too (item weights times
        judge weights).
    anchor : str, optional
        System placed at 1000 on the Elo scale (default: the mean of systems).
    games : polars.DataFrame, optional
        A games frame (:func:`jurymeter.stats.pairwise.games.games`) with
        ``length_a``/``length_b``, for the length-controlled fit.
    battle_bootstrap : bool, default True
        Run the battle (outcome-row) bootstrap beside the prompt bootstrap;
        ``False`` leaves the battle columns and ``width_ratio`` null.

    Returns
    -------
    BradleyTerry

    Raises
    ------
    ConfigError
        An option outside its range, or an unknown anchor.
    DesignError
        Missing columns or invalid scores.
    ComparisonGraphError
        The full data do not identify finite ratings (names the systems).
    ConvergenceError
        A fit or refit did not converge.

    Notes
    -----
    *Prompt bootstrap.* Per-item (and per item x judge) sums of scores and
    counts on the observed pairs, ``X[i, (j), k]``, are built once; resample
    ``b`` draws multinomial item weights :math:`m_{bi}` (and judge weights
    :math:`g_{bj}`), and its sufficient statistics are
    :math:`W_{bk} = \sum_i m_{bi} X_{ik}` (or :math:`\sum_{ij} m_{bi} g_{bj}
    X_{ijk}`), one matrix product for all resamples; all resamples are refitted
    by a batched Newton warm-started at the full fit. Items are the clusters of
    [Anand2026]_ (sections 3, 5) and of [Awuni2026]_ table 2. The weights are
    the counts of :math:`n` uniform picks (items from the first child stream of
    ``default_rng(seed).spawn(3)``, judges from the second; the battle
    bootstrap draws from the third).

    *Battle bootstrap.* Resampling outcome rows with replacement is a
    multinomial draw on the (pair, score) cells with probabilities their
    shares ([Chiang2024]_). Hard scores (0, 1/2, 1) form exact cells; soft
    scores are pooled per pair into ``SOFT_BINS`` equal-width bins scored at
    the bin mean, so the resampled sums keep their mean and lose only the
    within-bin variance (at most :math:`1/(12 \cdot 10^2)` per soft outcome,
    against about 1/4 for a verdict).

    *Sandwich.* :math:`V = A^{-1} M A^{-1}` with :math:`A = I + \mathbf 1
    \mathbf 1^\top / S` (on :math:`\mathbf 1^\perp`, the inverse is the
    pseudo-inverse of the Fisher information :math:`I` of the sum-to-zero
    parametrization) and :math:`M = \sum_i u_i u_i^\top`, :math:`u_i` the
    score vector of item :math:`i`; no small-sample correction.

    *Ranks and tie groups.* ``rank_low``/``rank_high`` are the
    :math:`(1 \mp \text{level})/2` percentiles (inverted CDF) of each system's
    rank over the prompt resamples. Systems sorted by rating; adjacent systems
    are *separated* when the prompt bootstrap orders them the same way in at
    least :math:`\text{level} + (1-\text{level})/2` of the resamples (97.5 %,
    one-sided, at level 0.95); a tie group is a maximal run with no separation
    (this is not the leader-based rule of :func:`jurymeter.stats.ranking.tie_groups`).

    *Length control.* Where ``games`` carry lengths,
    :math:`\operatorname{logit} P(A \succ B) = \theta_A - \theta_B + \beta d`,
    :math:`d = (L_A - L_B)/(L_A + L_B)` (0 when both are 0), fitted by Newton on
    the games (ties half, soft scores fractional), with :math:`\beta`'s
    item-clustered sandwich SE ([Chiang2024]_ style control). ``changed`` names
    the systems whose rank moves against the same games fitted without the
    length term.

    Examples
    --------
    >>> frame = pl.DataFrame({"item_id": ["q1", "q2", "q3", "q4"],
    ...     "system_x": ["a", "a", "a", "b"], "system_y": ["b", "b", "b", "c"],
    ...     "judge_id": ["j"] * 4, "score_x": [1.0, 0.0, 1.0, 0.5]})
    >>> fit = bradley_terry(frame.vstack(frame.with_columns(
    ...     pl.col("item_id") + "'", score_x=1 - pl.col("score_x"))), n_boot=50)
    >>> fit.table.select("system_id", "rank").height, fit.n_boot
    (3, 50)
    """
    # Long (164 lines) by its numpy docstring (every parameter, the formulas and their sources); the code below is 58 lines.
    c = _code(outcomes)
    _check_options(n_boot, seed, level, anchor, c.systems)
    wins = _wins_matrix(c)
    problem = _graph_problem(wins, c.systems)
    if problem is not None:
        raise ComparisonGraphError(problem)
    theta, info = _newton(wins)
    cov = _sandwich(c, theta, info)
    se = np.sqrt(np.maximum(np.diag(cov), 0.0))

    rng = np.random.default_rng(seed)
    item_rng, judge_rng, battle_rng = rng.spawn(3)
    pair_of, pa, pb = _observed_pairs(c)
    bw, bn = _prompt_sums(c, pair_of, pa.size, n_boot, resample_judges, item_rng, judge_rng)
    prompt, prompt_bad = _refit(pa, pb, bw, bn, theta, c.systems)

    if not isinstance(battle_bootstrap, bool):
        msg = f"battle_bootstrap must be a bool; got {battle_bootstrap!r}"
        raise ConfigError(msg)
    battle: np.ndarray | None = None
    battle_bad = 0
    if battle_bootstrap:
        battle, battle_bad = _battle(c, pair_of, pa, pb, theta, n_boot, battle_rng)
    if prompt.shape[0] < 2 or (battle is not None and battle.shape[0] < 2):
        msg = (
            f"fewer than 2 of the {n_boot} bootstrap resamples have finite ratings "
            f"(prompt {prompt.shape[0]}, battle {battle.shape[0] if battle is not None else 'not run'}); "
            "the intervals cannot be estimated"
        )
        raise ComparisonGraphError(msg)

    reference = anchor if anchor is not None else _baseline(c)
    table, ratio, flat = _rating_table(c, theta, se, prompt, battle, level, anchor, reference)
    notes = NOTES if reference is None or not battle_bootstrap else (*NOTES, _reference_note(reference, anchor))
    if flat:
        notes = (*notes, _flat_battle_note(flat))
    defined = ratio[~np.isnan(ratio)]

    lc: LengthControl | None
    lc_reason: str | None
    if games is None:
        lc, lc_reason = None, "no games frame was given"
    else:
        lc, lc_reason = _length_control(games)
    return BradleyTerry(
        table=table,
        width_ratio=(float(np.median(defined)) if defined.size else math.nan) if battle_bootstrap else None,
        n_boot=n_boot,
        prompt_degenerate=prompt_bad,
        battle_degenerate=battle_bad if battle_bootstrap else None,
        level=float(level),
        n_outcomes=int(c.score.size),
        n_items=len(c.items),
        resample_judges=bool(resample_judges),
        anchor=anchor,
        length_control=lc,
        length_control_reason=lc_reason,
        notes=notes,
    )


def _observed_pairs(c: _Coded) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Each outcome's code among the observed ordered pairs, and the pairs' two systems."""
    s = len(c.systems)
    pair_code = c.x * s + c.y
    seen = np.zeros(s * s, dtype=bool)
    seen[pair_code] = True
    pairs = np.flatnonzero(seen)
    dense = np.zeros(s * s, dtype=np.int64)
    dense[pairs] = np.arange(pairs.size)
    return dense[pair_code], pairs // s, pairs % s


def _elo(t: np.ndarray, centre_idx: int | None) -> np.ndarray:
    """Ratings on the Elo scale: 1000 + 400/ln(10) per logit from the mean, or from the anchor system."""
    if centre_idx is None:
        centre = t.mean(axis=-1, keepdims=True)
    else:
        centre = t[..., centre_idx : centre_idx + 1]
    out: np.ndarray = ELO_CENTRE + ELO_PER_LOGIT * (t - centre)
    return out


def _baseline(c: _Coded) -> str | None:
    """The one system in every comparison (Arena-Hard's baseline), or ``None``.

    With two systems both are in every comparison, and the difference to either is
    twice the mean-centred rating: the ratio of widths is the same without one.
    """
    everywhere = [k for k in range(len(c.systems)) if bool(np.all((c.x == k) | (c.y == k)))]
    return c.systems[everywhere[0]] if len(everywhere) == 1 else None


def _reference_note(reference: str, anchor: str | None) -> str:
    why = "the anchor" if anchor is not None else "the baseline, in every comparison"
    return (
        f"width_ratio: widths of each system's rating minus that of {reference} ({why}) in each resample, "
        f"so both bootstraps measure the same difference; null for {reference} itself (zero width in both)."
    )


def _reanchored(draws: np.ndarray, ref: int, shift: float = 0.0) -> np.ndarray:
    """Each resample's ratings minus its own rating of system ``ref`` (plus ``shift``)."""
    out: np.ndarray = draws - draws[:, ref : ref + 1] + shift
    return out


def _width_ratio(prompt_width: np.ndarray, battle_width: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Prompt width over battle width; NaN where the battle interval has zero width (``flat``), not inf."""
    flat = battle_width == 0.0
    ratio = np.full(prompt_width.shape, np.nan)
    np.divide(prompt_width, battle_width, out=ratio, where=~flat)
    return ratio, flat


def _flat_battle_note(systems: list[str]) -> str:
    return (
        f"width_ratio is null for {', '.join(systems)}: the battle bootstrap never moved "
        "their rating (zero-width battle interval, as when the outcomes of a pair all fall "
        "in one score cell), so the ratio of widths is undefined; the median width_ratio "
        "is over the other systems."
    )


def _tie_groups(prompt: np.ndarray, rank: np.ndarray, level: float) -> np.ndarray:
    """Tie groups (1 = top): maximal runs of rating-sorted systems no neighbour pair of which is separated (Notes)."""
    order = np.argsort(rank)
    ahead = prompt[:, order[:-1]] > prompt[:, order[1:]]  # (B, S-1), sorted neighbours
    separated = ahead.mean(axis=0) >= level + (1.0 - level) / 2.0
    group_sorted = np.concatenate([[1], 1 + np.cumsum(separated)])
    group = np.empty(rank.size, dtype=np.int64)
    group[order] = group_sorted
    return group


def _rating_table(
    c: _Coded,
    theta: np.ndarray,
    se: np.ndarray,
    prompt: np.ndarray,
    battle: np.ndarray | None,
    level: float,
    anchor: str | None,
    reference: str | None = None,
) -> tuple[pl.DataFrame, np.ndarray, list[str]]:
    """The table of :data:`BT_SCHEMA`, the width ratios, and the systems whose battle interval is flat.

    With an anchor the battle bounds are re-anchored on every resample, as the prompt
    bootstrap's Elo bounds are: the anchor's rating (logit, the table's centring) plus the
    percentiles of each resample's difference to the anchor. The width ratios are taken
    on differences to ``reference`` (the anchor or the baseline) where there is one.
    """
    s = len(c.systems)
    centre_idx = None if anchor is None else c.systems.index(anchor)
    # The refits are finite (``_refit`` drops the others), so no draw is left out here.
    low, high = percentile_bounds(prompt, level, axis=0)
    if battle is not None:
        anchored = battle if centre_idx is None else _reanchored(battle, centre_idx, float(theta[centre_idx]))
        b_low, b_high = percentile_bounds(anchored, level, axis=0)
        ref = None if reference is None else c.systems.index(reference)
        if ref is None:
            ratio, flat = _width_ratio(high - low, b_high - b_low)
        else:
            p_low, p_high = percentile_bounds(_reanchored(prompt, ref), level, axis=0)
            d_low, d_high = percentile_bounds(_reanchored(battle, ref), level, axis=0)
            ratio, flat = _width_ratio(p_high - p_low, d_high - d_low)
            flat[ref] = False  # zero width by construction, said in the reference note
    else:
        b_low = b_high = ratio = np.full(s, np.nan)
        flat = np.zeros(s, dtype=bool)
    e_low, e_high = percentile_bounds(_elo(prompt, centre_idx), level, axis=0)
    rank = _ranks(theta)
    r_low, r_high = percentile_bounds(_ranks(prompt), level, axis=0, method="inverted_cdf")
    table = pl.DataFrame(
        {
            "system_id": list(c.systems),
            "rating": theta,
            "rating_elo": _elo(theta, centre_idx),
            "se_sandwich": se,
            "low": low,
            "high": high,
            "battle_low": b_low,
            "battle_high": b_high,
            "elo_low": e_low,
            "elo_high": e_high,
            "width_ratio": ratio,
            "rank": rank.astype(np.int64),
            "rank_low": r_low.astype(np.int64),
            "rank_high": r_high.astype(np.int64),
            "tie_group": _tie_groups(prompt, rank, level),
        },
        schema=BT_SCHEMA,
    ).sort("rank")
    if battle is None:
        table = table.with_columns(pl.lit(None, dtype=pl.Float64).alias(n) for n in ("battle_low", "battle_high", "width_ratio"))
    return table, ratio, [c.systems[k] for k in np.flatnonzero(flat)]
