r"""Position bias of pairwise judges: slot-A advantage, first-slot share, AB/BA reversals.

Notation. A game shows system A first and system B second; the judge's verdict
is ``A``, ``B`` or ``tie`` and A earns :math:`y \in [0, 1]` (``score_a``, ties 1/2).
For a system :math:`s` let :math:`F_s` be the games where it was shown first and
:math:`S_s` those where it was shown second. Its *slot-A advantage*, in points, is

.. math::

    \Delta_s = 100 \left( \frac{1}{|F_s|} \sum_{g \in F_s} y_g
               - \frac{1}{|S_s|} \sum_{g \in S_s} (1 - y_g) \right),

its win rate shown first minus its win rate shown second ([Anand2026]_ table 3:
slot-A advantage 8.6 points, sd across systems 7.3, max 25.0). The overall
advantage is the mean of :math:`\Delta_s` over the systems seen in both slots,
with their sd and max beside it.

A pair seen in both presentation orders (same item, systems, judge, generation
and replicate) *reverses* when the winning system differs between the orders, a
tie counting as a verdict (tie against a win differs, tie against tie agrees).
Under independent symmetric content noise (each order flips the content winner
with probability :math:`e \le 1/2`, independently) the reversal rate is
:math:`2e(1-e) \le 1/2`, also for any mixture of rates over items, so a rate
above 1/2 is incompatible with it ([Awuni2026]_ section 8, appendix A). Under
pure position-following (the judge picks the first slot with probability
:math:`q`, whatever the content) a pair reverses with probability
:math:`r = q^2 + (1-q)^2`, hence

.. math::

    q = \tfrac12 + \operatorname{sign}(a - b) \, \tfrac12 \sqrt{2r - 1},

with :math:`a, b` the raw shares of verdicts picking slot A and slot B
([Awuni2026]_ appendix A: Gemma 78.8% gives :math:`q \approx 0.88`, Yi 53.4%
gives 0.63). Below :math:`r = 1/2` no :math:`q` fits.

Only games of known presentation order (``order_known``) enter these statistics,
except a judge's tie rate, which counts all its games.

Intervals are prompt-clustered percentile intervals: a resample draws items
with replacement and takes every game of a drawn item (all judges, systems,
generations and replicates) as many times as the item was drawn. Every
statistic here is a ratio of sums over games, so the per-item sums are formed
once and each resample is one multinomial weight vector over items: all
resamples are one matrix product. A resample in which a quantity is undefined
(no game of a system in one slot, say) is left out of that quantity's
percentiles.

References
----------
.. [Anand2026] A. Anand, "Ask Which, Not How Good: Sizing Benchmarks Scored by an
   LLM", 2026 (``papers/ask-which-not-how-good.txt``).
.. [Awuni2026] D. A. Awuni et al., "Who Judges Matters: Measuring
   Family-Conditioned Preference in LLM-as-Judge Panels", 2026
   (``papers/who-judges-matters.txt``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import polars as pl

from jurymeter.errors import ConfigError, DesignError
from jurymeter.stats.intervals import percentile_bounds
from jurymeter.stats.pairwise.games import _column_codes, combine_codes, key_codes, require_games

CONTENT_NOISE_BOUND = 0.5
"""The largest reversal rate independent symmetric content noise can produce ([Awuni2026]_ section 8)."""

_REQUIRED = ("item_id", "system_a", "system_b", "judge_id", "generation", "replicate",
             "verdict", "score_a", "order_known")
_GAME_KEY = ["item_id", "system_a", "system_b", "judge_id", "generation", "replicate"]
# Judge sums per item, in this order.
_J_FIRST, _J_SECOND, _J_KNOWN, _J_TIES, _J_ALL, _J_PAIRS, _J_REVERSED = range(7)
_J_COLUMNS = 7


@dataclass(frozen=True, slots=True)
class Estimate:
    """A point estimate with its percentile interval; ``None`` values say why in ``reason``."""

    value: float | None
    low: float | None
    high: float | None
    reason: str | None = None


@dataclass(frozen=True, slots=True)
class PositionBias:
    """Position statistics of a games frame (see :func:`position_bias`).

    ``slot_a_advantage`` (points) is the mean over systems of their win rate shown
    first minus shown second, ``slot_a_advantage_sd`` (ddof 1) and
    ``slot_a_advantage_max`` its sd and max across systems; ``first_slot_win_rate``
    and ``reversal_rate`` are pooled over judges, ``q_position_following`` is the
    pooled implied first-slot-following probability. ``per_judge`` and
    ``per_system`` are tidy frames (one row per judge / system).
    """

    slot_a_advantage: Estimate
    slot_a_advantage_sd: Estimate
    slot_a_advantage_max: Estimate
    first_slot_win_rate: Estimate
    reversal_rate: Estimate
    pairs_both_orders: int
    exceeds_content_noise_bound: bool | None
    q_position_following: float | None
    q_reason: str | None
    both_orders_share: float | None
    n_games: int
    n_order_known: int
    n_items: int
    n_boot: int
    level: float
    per_judge: pl.DataFrame
    per_system: pl.DataFrame


def position_following_q(
    reversal_rate: float, first_share: float, second_share: float
) -> tuple[float | None, str | None]:
    r"""The first-slot probability :math:`q` of a pure position-following judge.

    Parameters
    ----------
    reversal_rate
        Share :math:`r` of the pairs seen in both orders whose winner differs.
    first_share, second_share
        Raw shares :math:`a, b` of the judge's verdicts picking slot A and slot B;
        their sign picks the branch.

    Returns
    -------
    (q, reason)
        ``q`` and ``None``, or ``None`` and why: :math:`r < 1/2` (no
        position-following judge reverses that rarely), or :math:`a = b` with
        :math:`r > 1/2` (both branches fit equally).

    Notes
    -----
    :math:`r = q^2 + (1-q)^2` solved for :math:`q`:
    :math:`q = 1/2 + \operatorname{sign}(a-b)\sqrt{2r-1}/2` ([Awuni2026]_
    section 8 and appendix A).

    Examples
    --------
    >>> q, _ = position_following_q(0.788, 0.8, 0.2)
    >>> round(q, 2)
    0.88
    """
    for name, value in (("reversal_rate", reversal_rate), ("first_share", first_share),
                        ("second_share", second_share)):
        if not (0.0 <= value <= 1.0):
            msg = f"{name} must be in [0, 1]; got {value!r}"
            raise DesignError(msg)
    if reversal_rate < CONTENT_NOISE_BOUND:
        return None, (
            f"reversal rate {reversal_rate:.6g} is below 1/2: no pure position-following "
            "judge reverses that rarely, so q is not identified"
        )
    root = math.sqrt(2.0 * reversal_rate - 1.0) / 2.0
    if root == 0.0:
        return 0.5, None
    if first_share == second_share:
        return None, (
            "slot A and slot B are picked equally often: the branch q > 1/2 or q < 1/2 "
            "is not identified"
        )
    return 0.5 + math.copysign(root, first_share - second_share), None


def _codes(values: pl.Series, categories: list[str]) -> np.ndarray:
    codes: np.ndarray = values.cast(pl.Enum(categories)).to_physical().to_numpy().astype(np.int64)
    return codes


def _sums(rows: np.ndarray, cols: np.ndarray, weights: np.ndarray, n_rows: int, n_cols: int) -> np.ndarray:
    flat = np.bincount(rows * n_cols + cols, weights=weights, minlength=n_rows * n_cols)
    out: np.ndarray = flat.reshape(n_rows, n_cols)
    return out


def _ratio(num: np.ndarray, den: np.ndarray) -> np.ndarray:
    out = np.full(np.broadcast(num, den).shape, np.nan)
    np.divide(num, den, out=out, where=den > 0)
    return out


def _nanmean(x: np.ndarray, axis: int) -> np.ndarray:
    ok = ~np.isnan(x)
    n = ok.sum(axis=axis)
    return _ratio(np.where(ok, x, 0.0).sum(axis=axis), n.astype(np.float64))


def _nansd(x: np.ndarray, axis: int) -> np.ndarray:
    ok = ~np.isnan(x)
    n = ok.sum(axis=axis).astype(np.float64)
    mean = np.expand_dims(_nanmean(x, axis), axis)
    dev2 = np.where(ok, (x - mean) ** 2, 0.0).sum(axis=axis)
    out: np.ndarray = np.sqrt(_ratio(dev2, n - 1.0))
    return out


def _nanmax(x: np.ndarray, axis: int) -> np.ndarray:
    ok = ~np.isnan(x)
    # ``initial``: no system seen in a known order (every AlpacaEval file without
    # ``referenced_models``) is an empty axis, whose maximum is undefined (NaN below).
    top = np.where(ok, x, -np.inf).max(axis=axis, initial=-np.inf)
    out: np.ndarray = np.where(ok.any(axis=axis), top, np.nan)
    return out


def _intervals(stat: np.ndarray, level: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Point (row 0) and percentile bounds over the defined resamples (rows 1..) of each column."""
    point, draws = stat[0], stat[1:]
    low = np.full(point.shape, np.nan)
    high = np.full(point.shape, np.nan)
    some = ~np.isnan(point) & (~np.isnan(draws)).any(axis=0)
    if some.any():
        low[some], high[some] = percentile_bounds(draws[:, some], level, axis=0, keep_inf=True)
    return point, low, high


def _num(x: float) -> float | None:
    return None if math.isnan(x) else float(x)


def _estimate(stat: np.ndarray, level: float, reason: str) -> Estimate:
    point, low, high = _intervals(stat.reshape(-1, 1), level)
    if math.isnan(point[0]):
        return Estimate(None, None, None, reason)
    return Estimate(float(point[0]), _num(low[0]), _num(high[0]))


def _validate(games: pl.DataFrame, n_boot: int, seed: int, level: float) -> None:
    require_games(games, _REQUIRED)
    if isinstance(n_boot, bool) or not isinstance(n_boot, int) or n_boot < 1:
        msg = f"n_boot must be an integer >= 1; got {n_boot!r}"
        raise ConfigError(msg)
    if isinstance(seed, bool) or not isinstance(seed, int):
        msg = f"seed must be an integer; got {seed!r}"
        raise ConfigError(msg)
    if not (isinstance(level, float | int) and 0.0 < float(level) < 1.0):
        msg = f"level must be a number in (0, 1); got {level!r}"
        raise ConfigError(msg)


def position_bias(
    games: pl.DataFrame, *, n_boot: int = 1000, seed: int = 0, level: float = 0.95
) -> PositionBias:
    r"""Slot-A advantage, first-slot share, tie and AB/BA reversal rates, with item-bootstrap intervals.

    Parameters
    ----------
    games
        A frame of :func:`jurymeter.stats.pairwise.games.games` (one item set).
    n_boot : int, default 1000
        Item resamples.
    seed : int, default 0
        Seed of the resampling.
    level : float, default 0.95
        Coverage of the percentile intervals.

    Returns
    -------
    PositionBias
        Overall estimates, and the tidy frames ``per_judge`` (``judge_id,
        n_games, n_order_known, first_slot_win_rate, second_slot_win_rate,
        tie_rate, pairs_both_orders, reversal_rate, exceeds_content_noise_bound,
        q_position_following, q_reason, slot_a_advantage``, the rates and the
        advantage with ``_low``/``_high`` bounds, ``reversal_rate_reason``,
        ``slot_a_advantage_reason``) and ``per_system`` (``system_id,
        games_first, games_second, win_rate_first, win_rate_second,
        slot_a_advantage`` with bounds and reason), pooled over judges.

    Raises
    ------
    DesignError
        A column is missing, a game pits a system against itself, or two games
        of known order share a key (item, shown systems, judge, generation,
        replicate): pass one item set at a time.
    ConfigError
        ``n_boot``, ``seed`` or ``level`` out of range.

    Notes
    -----
    :math:`\Delta_s` as in the module notes ([Anand2026]_ table 3); per judge the
    same within the judge's games; ``first_slot_win_rate`` = share of verdicts
    ``A`` among the judge's games of known order (ties in the denominator);
    ``tie_rate`` = share of ``tie`` among all its games; ``reversal_rate`` = share
    of its pairs seen in both orders whose winning system (or tie) differs;
    ``exceeds_content_noise_bound`` = ``reversal_rate > 1/2`` and
    ``q_position_following`` from :func:`position_following_q` ([Awuni2026]_
    section 8, appendix A). ``both_orders_share`` is that of
    :func:`~jurymeter.stats.pairwise.games.reconcile`'s outcomes.

    Examples
    --------
    >>> g = pl.DataFrame({"item_id": ["i", "i"], "system_a": ["x", "y"], "system_b": ["y", "x"],
    ...     "judge_id": ["j", "j"], "generation": [0, 0], "replicate": [0, 0],
    ...     "verdict": ["A", "A"], "score_a": [1.0, 1.0], "order_known": [True, True]})
    >>> pb = position_bias(g, n_boot=10)
    >>> pb.slot_a_advantage.value, pb.reversal_rate.value
    (100.0, 1.0)
    """
    _validate(games, n_boot, seed, level)
    level = float(level)
    g, known = _checked_games(games)
    items = g["item_id"].unique().sort().to_list()
    judges = g["judge_id"].unique().sort().to_list()
    systems = pl.concat([known["system_a"], known["system_b"]]).unique().sort().to_list()
    n_i, n_j, n_s = len(items), len(judges), len(systems)
    n_slot = n_j * n_s * 2
    slot_sum, slot_n, judge_sums, n_groups, n_two = _item_sums(g, known, items, judges, systems)

    # Row 0: every item once (the estimate); rows 1..: multinomial item counts.
    rng = np.random.default_rng(seed)
    weights = np.vstack([np.ones((1, n_i)),
                         rng.multinomial(n_i, np.full(n_i, 1.0 / n_i), size=n_boot).astype(np.float64)])
    total = weights @ np.hstack([slot_sum, slot_n, judge_sums])
    b = n_boot + 1
    s_sum = total[:, :n_slot].reshape(b, n_j, n_s, 2)
    s_n = total[:, n_slot:2 * n_slot].reshape(b, n_j, n_s, 2)
    j_sum = total[:, 2 * n_slot:].reshape(b, n_j, _J_COLUMNS)

    rate_js = _ratio(s_sum, s_n)
    adv_js = 100.0 * (rate_js[..., 0] - rate_js[..., 1])  # (b, judge, system)
    adv_judge = _nanmean(adv_js, axis=2)
    pooled_sum, pooled_n = s_sum.sum(axis=1), s_n.sum(axis=1)
    rate_s = _ratio(pooled_sum, pooled_n)
    adv_s = 100.0 * (rate_s[..., 0] - rate_s[..., 1])  # (b, system)

    first = _ratio(j_sum[..., _J_FIRST], j_sum[..., _J_KNOWN])
    second = _ratio(j_sum[..., _J_SECOND], j_sum[..., _J_KNOWN])
    ties = _ratio(j_sum[..., _J_TIES], j_sum[..., _J_ALL])
    reversal = _ratio(j_sum[..., _J_REVERSED], j_sum[..., _J_PAIRS])
    pooled_j = j_sum.sum(axis=1)

    per_judge = _per_judge_frame(judges, j_sum[0], level, first, second, ties, reversal, adv_judge)
    per_system = _per_system_frame(systems, pooled_n[0], rate_s[0], adv_s, level)

    n_pairs = int(pooled_j[0, _J_PAIRS].round())
    rev = _estimate(_ratio(pooled_j[:, _J_REVERSED], pooled_j[:, _J_PAIRS]), level,
                    "no pair was seen in both presentation orders")
    first_all = _estimate(_ratio(pooled_j[:, _J_FIRST], pooled_j[:, _J_KNOWN]), level,
                          "no game of known presentation order")
    q, q_reason = _q(rev.value, pooled_j[0])
    no_system = "no system was seen in both slots"
    return PositionBias(
        slot_a_advantage=_estimate(_nanmean(adv_s, axis=1), level, no_system),
        slot_a_advantage_sd=_estimate(_nansd(adv_s, axis=1), level,
                                      "fewer than 2 systems were seen in both slots"),
        slot_a_advantage_max=_estimate(_nanmax(adv_s, axis=1), level, no_system),
        first_slot_win_rate=first_all,
        reversal_rate=rev,
        pairs_both_orders=n_pairs,
        exceeds_content_noise_bound=None if rev.value is None else rev.value > CONTENT_NOISE_BOUND,
        q_position_following=q,
        q_reason=q_reason,
        # reconcile()'s outcomes: a group per known (item, pair, judge, generation, replicate), one per other game
        both_orders_share=n_two / (n_groups + g.height - known.height) if g.height else None,
        n_games=g.height,
        n_order_known=known.height,
        n_items=n_i,
        n_boot=n_boot,
        level=level,
        per_judge=per_judge,
        per_system=per_system,
    )


def _checked_games(games: pl.DataFrame) -> tuple[pl.DataFrame, pl.DataFrame]:
    """The games with their columns typed, and those of known order; a game of a system against itself
    or two known-order games sharing a key are a :class:`DesignError`."""
    g = games.select(
        pl.col("item_id").cast(pl.String), pl.col("system_a").cast(pl.String),
        pl.col("system_b").cast(pl.String), pl.col("judge_id").cast(pl.String),
        pl.col("generation").cast(pl.Int64), pl.col("replicate").cast(pl.Int64),
        pl.col("verdict").cast(pl.String), pl.col("score_a").cast(pl.Float64),
        pl.col("order_known").cast(pl.Boolean).fill_null(True),
    )
    self_games = g.filter(pl.col("system_a") == pl.col("system_b")).height
    if self_games:
        msg = f"games holds {self_games} game(s) of a system against itself; each game needs two systems"
        raise DesignError(msg)
    known = g.filter(pl.col("order_known"))
    key, n_keys = key_codes(known, _GAME_KEY)
    counts = np.bincount(key, minlength=n_keys)
    dup = int(counts[counts > 1].sum())
    if dup:
        msg = (f"games holds {dup} games of known order sharing a key {_GAME_KEY}; "
               "pass the games of one item set, each judgment once")
        raise DesignError(msg)
    return g, known


def _item_sums(
    g: pl.DataFrame, known: pl.DataFrame, items: list[str], judges: list[str], systems: list[str]
) -> tuple[np.ndarray, np.ndarray, np.ndarray, int, int]:
    """Per item: the slot sums and counts, the judge sums, and the pair groups (all and seen in both orders).

    Every statistic of :func:`position_bias` is a ratio of sums over items of these
    columns, so the item bootstrap is one matrix product of multinomial weights with them.
    """
    n_i, n_j, n_s = len(items), len(judges), len(systems)
    # Per-item slot sums: column ((judge * S + system) * 2 + slot), slot 0 first, 1 second.
    ki, kj = _codes(known["item_id"], items), _codes(known["judge_id"], judges)
    ka, kb = _codes(known["system_a"], systems), _codes(known["system_b"], systems)
    y = known["score_a"].to_numpy().astype(np.float64)
    n_slot = n_j * n_s * 2
    rows = np.concatenate([ki, ki])
    cols = np.concatenate([(kj * n_s + ka) * 2, (kj * n_s + kb) * 2 + 1])
    slot_sum = _sums(rows, cols, np.concatenate([y, 1.0 - y]), n_i, n_slot)
    slot_n = _sums(rows, cols, np.ones(2 * len(y)), n_i, n_slot)

    # Per-item judge sums.
    verdict = known["verdict"].to_numpy()
    gi, gj = _codes(g["item_id"], items), _codes(g["judge_id"], judges)
    pi, pj, rev_pairs, n_groups, n_two = _pairs(known, ki, kj, ka, kb, n_i, n_j, n_s)
    judge_rows = np.concatenate([ki, ki, ki, gi, gi, pi, pi])
    judge_cols = np.concatenate([
        kj * _J_COLUMNS + _J_FIRST, kj * _J_COLUMNS + _J_SECOND, kj * _J_COLUMNS + _J_KNOWN,
        gj * _J_COLUMNS + _J_TIES, gj * _J_COLUMNS + _J_ALL,
        pj * _J_COLUMNS + _J_PAIRS, pj * _J_COLUMNS + _J_REVERSED,
    ])
    judge_w = np.concatenate([
        (verdict == "A").astype(np.float64), (verdict == "B").astype(np.float64), np.ones(len(ki)),
        (g["verdict"].to_numpy() == "tie").astype(np.float64), np.ones(len(gi)),
        np.ones(len(pi)), rev_pairs.astype(np.float64),
    ])
    judge_sums = _sums(judge_rows, judge_cols, judge_w, n_i, n_j * _J_COLUMNS)
    return slot_sum, slot_n, judge_sums, n_groups, n_two


def _pairs(
    known: pl.DataFrame, ki: np.ndarray, kj: np.ndarray, ka: np.ndarray, kb: np.ndarray,
    n_i: int, n_j: int, n_s: int,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, int, int]:
    """Item and judge codes, and ``reversed``, of the (item, unordered pair, judge, generation,
    replicate)s seen in both orders; the number of such groups of known order, and of those seen twice."""
    x, y = np.minimum(ka, kb), np.maximum(ka, kb)
    group, n_groups = combine_codes([
        (ki, n_i), (x, n_s), (y, n_s), (kj, n_j),
        _column_codes(known["generation"]), _column_codes(known["replicate"]),
    ])
    verdict = known["verdict"].to_numpy()
    won = np.where(verdict == "A", ka, np.where(verdict == "B", kb, -1))  # -1: a tie
    size = np.bincount(group, minlength=n_groups)
    order = np.argsort(group, kind="stable")
    start = np.cumsum(size) - size
    # keys are unique among known games, so a group of two holds both orders
    two = np.flatnonzero(size == 2)
    first, second = order[start[two]], order[start[two] + 1]
    return ki[first], kj[first], won[first] != won[second], int(n_groups), int(two.size)


def _q(reversal: float | None, sums: np.ndarray) -> tuple[float | None, str | None]:
    if reversal is None:
        return None, "no pair was seen in both presentation orders"
    a, b = sums[_J_FIRST] / sums[_J_KNOWN], sums[_J_SECOND] / sums[_J_KNOWN]
    return position_following_q(reversal, float(a), float(b))


def _columns(name: str, stat: np.ndarray, level: float) -> dict[str, list[float | None]]:
    point, low, high = _intervals(stat, level)
    return {
        name: [_num(v) for v in point],
        f"{name}_low": [_num(v) for v in low],
        f"{name}_high": [_num(v) for v in high],
    }


def _per_judge_frame(
    judges: list[str], sums: np.ndarray, level: float, first: np.ndarray, second: np.ndarray,
    ties: np.ndarray, reversal: np.ndarray, adv: np.ndarray,
) -> pl.DataFrame:
    rev = _columns("reversal_rate", reversal, level)
    q_values: list[float | None] = []
    q_reasons: list[str | None] = []
    for k in range(len(judges)):
        q, why = _q(rev["reversal_rate"][k], sums[k])
        q_values.append(q)
        q_reasons.append(why)
    adv_cols = _columns("slot_a_advantage", adv, level)
    data: dict[str, object] = {
        "judge_id": judges,
        "n_games": sums[:, _J_ALL].round().astype(np.int64),
        "n_order_known": sums[:, _J_KNOWN].round().astype(np.int64),
        **_columns("first_slot_win_rate", first, level),
        "second_slot_win_rate": [_num(v) for v in second[0]],
        **_columns("tie_rate", ties, level),
        "pairs_both_orders": sums[:, _J_PAIRS].round().astype(np.int64),
        **rev,
        "reversal_rate_reason": [None if v is not None else "no pair was seen in both presentation orders"
                                 for v in rev["reversal_rate"]],
        "exceeds_content_noise_bound": [None if v is None else v > CONTENT_NOISE_BOUND
                                        for v in rev["reversal_rate"]],
        "q_position_following": q_values,
        "q_reason": q_reasons,
        **adv_cols,
        "slot_a_advantage_reason": [None if v is not None else "no system was seen in both slots by this judge"
                                    for v in adv_cols["slot_a_advantage"]],
    }
    return pl.DataFrame(data, schema_overrides=_float_schema(data))


def _per_system_frame(
    systems: list[str], n: np.ndarray, rate: np.ndarray, adv: np.ndarray, level: float
) -> pl.DataFrame:
    adv_cols = _columns("slot_a_advantage", adv, level)
    data: dict[str, object] = {
        "system_id": systems,
        "games_first": n[:, 0].round().astype(np.int64),
        "games_second": n[:, 1].round().astype(np.int64),
        "win_rate_first": [_num(v) for v in rate[:, 0]],
        "win_rate_second": [_num(v) for v in rate[:, 1]],
        **adv_cols,
        "slot_a_advantage_reason": [None if v is not None else "not seen in both slots"
                                    for v in adv_cols["slot_a_advantage"]],
    }
    return pl.DataFrame(data, schema_overrides=_float_schema(data))


def _float_schema(data: dict[str, object]) -> dict[str, pl.DataType]:
    """Float64 for every list column of numbers (all-None lists included), String for reasons."""
    out: dict[str, pl.DataType] = {}
    for name, values in data.items():
        if not isinstance(values, list) or name in ("judge_id", "system_id"):
            continue
        if name.endswith("_reason"):
            out[name] = pl.String()
        elif name == "exceeds_content_noise_bound":
            out[name] = pl.Boolean()
        else:
            out[name] = pl.Float64()
    return out
