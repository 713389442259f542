r"""The pairwise G-study: systems against a common baseline, a win indicator per judgment.

Model ([Anand2026]_ section 5.2, table 3 and its caption). Every candidate
system ``s`` is judged against one fixed baseline ``b`` on shared items ``i``
by judges ``j``, ``r`` replicates a cell, in both presentation orders. The
response is the win indicator of ``s`` against ``b``,

.. math::

    w_{sijr} = \begin{cases} 1 & s \text{ preferred} \\ 1/2 & \text{tie} \\
    0 & b \text{ preferred} \end{cases}

(a soft preference enters as its score), and it is decomposed exactly as a
pointwise score is, by expected mean squares on the largest balanced block
(``s x i x j x r:sij``; :mod:`jurymeter.stats.design`,
:mod:`jurymeter.stats.gstudy`, :mod:`jurymeter.stats.blocks`):

.. math::

    w_{sijr} = \mu + \nu_s + \nu_i + \nu_j + \nu_{si} + \nu_{sj} + \nu_{ij}
    + \nu_{sij} + \varepsilon_{sijr}.

The baseline is the same in every cell, so it is absorbed in :math:`\mu`;
:math:`\sigma^2_s` is the variance of the systems' win rates against it, in
win-rate units (table 3's caption: not comparable to a 0-5 scale, while the
ceiling and :math:`E\rho^2` are unitless and are).

Arms (table 3's rows)
    ``AB``: the games with ``s`` shown first; ``BA``: the baseline shown first;
    ``balanced``: per (system, item, judge, generation, replicate), the mean of
    the AB and BA win indicators where both exist, "the design a careful
    pairwise evaluation actually runs". Only games whose shown order is known
    (``order_known``) enter any arm.

Quantities per arm (table 3's columns; :mod:`jurymeter.stats.dstudy`)
    :math:`\sigma^2_s`, :math:`\sigma^2_{sj}` (raw EMS estimates, possibly
    negative, as the engine gives them); ``share`` = the share of
    :math:`\sigma^2_s` in the total with every component truncated at zero;
    ``ceiling`` = :math:`\sigma^2_s / (\sigma^2_s + \sigma^2_{sj})` (paper
    eq. 4); ``erho2`` = :math:`E\rho^2` at the block's item count, one judge
    and one run (the paper's single-judge, single-run convention of tables 1
    and 3); ``judges_needed`` = the fewest judges for which that
    :math:`E\rho^2` reaches the target. Ratios follow the engine's boundary
    rule (both variances truncated at zero; 0/0 is ``None`` with its reason).

With one judge in the block the judge facet is not identified: the design
``s x i x r:si`` is fitted instead, :math:`\sigma^2_{sj}` is confounded with
:math:`\sigma^2_s`, and :math:`\sigma^2_{sj}`, the ceiling and the judges
needed are ``None`` with that reason; ``erho2`` is then the single-judge
coefficient with that judge fixed (an upper bound for a random judge).

References
----------
.. [Anand2026] A. Anand, "Ask Which, Not How Good: Sizing Benchmarks Scored by an
   LLM", 2026 (``papers/ask-which-not-how-good.txt``; appendix: EMS on the
   complete crossed block, truncation at zero for shares only).
"""

from __future__ import annotations

import numbers
from dataclasses import dataclass, field
from typing import Literal

import numpy as np
import polars as pl

from jurymeter.errors import ConfigError, DesignError, NotApplicableError
from jurymeter.stats.blocks import BalancedBlock, balanced_block
from jurymeter.stats.design import Design
from jurymeter.stats.dstudy import MAX_JUDGES, PAPER_ROLES, ceiling, erho2, judges_needed
from jurymeter.stats.gstudy import GStudy, fit_gstudy
from jurymeter.stats.pairwise.games import require_games

Arm = Literal["AB", "BA", "balanced"]
ARMS: tuple[Arm, ...] = ("AB", "BA", "balanced")
# What pairwise_gstudy reads of a games frame (jurymeter.stats.pairwise.games.GAME_SCHEMA).
NEEDED_COLUMNS = ("item_id", "system_a", "system_b", "judge_id", "generation", "replicate", "score_a", "order_known")
_KEY = ("system_id", "item_id", "judge_id", "generation", "replicate")
# The columns of PairwiseGStudy.frame, in order.
FRAME_SCHEMA: dict[str, pl.DataType] = {
    "arm": pl.String(),
    "systems": pl.Int64(),
    "items": pl.Int64(),
    "judges": pl.Int64(),
    "replicates": pl.Int64(),
    "sigma2_s": pl.Float64(),
    "sigma2_sj": pl.Float64(),
    "share": pl.Float64(),
    "ceiling": pl.Float64(),
    "erho2": pl.Float64(),
    "judges_needed": pl.Int64(),
    "reason": pl.String(),
}


@dataclass(frozen=True, slots=True)
class PairwiseArm:
    """One arm of the pairwise G-study (a row of table 3).

    Attributes
    ----------
    arm
        ``"AB"`` (system shown first), ``"BA"`` (baseline shown first) or ``"balanced"``.
    design
        The design fitted (``"s x i x j x r:sij"``, ``"s x i x j"``, ``"s x i x r:si"``,
        ``"s x i"``), ``None`` when nothing could be fitted.
    systems, items, judges, replicates
        The block fitted, systems x items x judges (table 3's "design" column),
        and its replicates per cell; 0 when there is no block.
    games
        Games (arm ``balanced``: matched AB/BA cells) that entered the arm
        before the block rule.
    sigma2_s, sigma2_sj, share, ceiling, erho2, judges_needed
        The quantities of the module docstring; ``None`` where they cannot be
        estimated, with the reason in ``null_reasons``.
    components
        Every raw component of the fit by ``sigma2_<label>`` (empty without a fit).
    null_reasons
        Why a quantity is ``None``, by its name.
    notes
        The raw components estimated below zero (taken as zero in ``share`` and the
        ratios, left raw in ``components``), and what the block rule left out.
    block
        The balanced block of win indicators (axes system, item, judge[, replicate]),
        ``None`` when there is none.
    fit
        The engine's G-study, ``None`` when there is none.
    """

    arm: Arm
    design: str | None
    systems: int
    items: int
    judges: int
    replicates: int
    games: int
    sigma2_s: float | None
    sigma2_sj: float | None
    share: float | None
    ceiling: float | None
    erho2: float | None
    judges_needed: int | None
    components: dict[str, float] = field(default_factory=dict)
    null_reasons: dict[str, str] = field(default_factory=dict)
    notes: tuple[str, ...] = ()
    block: BalancedBlock | None = None
    fit: GStudy | None = None

    @property
    def reason(self) -> str | None:
        """The null reasons as ``"name, name: reason; ..."`` (names sharing a reason together), ``None`` if none."""
        if not self.null_reasons:
            return None
        by_reason: dict[str, list[str]] = {}
        for name, why in self.null_reasons.items():
            by_reason.setdefault(why, []).append(name)
        return "; ".join(f"{', '.join(names)}: {why}" for why, names in by_reason.items())

    @property
    def win_rates(self) -> dict[str, float]:
        """Each kept system's mean win indicator over the block (items, judges, replicates)."""
        if self.block is None:
            return {}
        x = self.block.x
        means = x.reshape(x.shape[0], -1).mean(axis=1)
        return dict(zip(self.block.systems, means.tolist(), strict=True))


@dataclass(frozen=True, slots=True)
class PairwiseGStudy:
    r"""The pairwise G-study of :func:`pairwise_gstudy`.

    Attributes
    ----------
    baseline
        The common baseline (given or detected).
    target
        The :math:`E\rho^2` target of ``judges_needed``.
    arms
        One :class:`PairwiseArm` per arm, in :data:`ARMS` order.
    games_skipped
        Games left out of every arm, by reason (not against the baseline;
        order unknown).
    frame
        The tidy table, one row per arm, columns :data:`FRAME_SCHEMA`.
    """

    baseline: str
    target: float
    arms: tuple[PairwiseArm, ...]
    games_skipped: dict[str, int]
    frame: pl.DataFrame

    def arm(self, name: Arm) -> PairwiseArm:
        """The arm called ``name``."""
        for found in self.arms:
            if found.arm == name:
                return found
        msg = f"arm must be one of {ARMS}; got {name!r}"
        raise ConfigError(msg)


def _check_target(target: object) -> float:
    if isinstance(target, numbers.Real) and not isinstance(target, bool) and 0 < float(target) < 1:
        return float(target)
    msg = f"target must be a number strictly between 0 and 1; got {target!r}"
    raise ConfigError(msg)


def _check_games(games: object) -> pl.DataFrame:
    return require_games(games, NEEDED_COLUMNS)


def systems_in_every_game(games: pl.DataFrame) -> list[str]:
    """The systems shown (as A or B) in every game, sorted; empty for no games.

    The common baseline is the only one when there is exactly one (with a single
    pair of systems both are in every game, and the baseline must be named).

    Examples
    --------
    >>> g = pl.DataFrame({"system_a": ["x", "base", "y"], "system_b": ["base", "x", "base"]})
    >>> systems_in_every_game(g)
    ['base']
    """
    if games.height == 0:
        return []
    first = {games["system_a"][0], games["system_b"][0]}
    return sorted(
        str(s) for s in first
        if s is not None and bool(((games["system_a"] == s) | (games["system_b"] == s)).all())
    )


def win_indicators(games: pl.DataFrame, baseline: str) -> dict[Arm, pl.DataFrame]:
    r"""Per arm, the candidate's win indicator against ``baseline`` per cell.

    Returns
    -------
    dict
        Arm -> frame with ``system_id, item_id, judge_id, generation, replicate,
        score, n``: ``score`` is the mean win indicator of the cell's games
        (:math:`w` = ``score_a`` when the candidate is shown first, ``1 - score_a``
        when the baseline is), ``n`` its games. ``balanced`` holds the cells
        with both orders, ``score = (w_AB + w_BA) / 2`` and ``n`` = 1.
        Only games of known order, between the baseline and another system.
    """
    a_base = pl.col("system_a") == baseline
    b_base = pl.col("system_b") == baseline
    against = games.lazy().filter((a_base ^ b_base) & pl.col("order_known"))
    wins = against.select(
        pl.when(b_base).then(pl.col("system_a")).otherwise(pl.col("system_b")).alias("system_id"),
        pl.col("item_id"), pl.col("judge_id"), pl.col("generation"), pl.col("replicate"),
        pl.when(b_base).then(pl.lit("AB")).otherwise(pl.lit("BA")).alias("arm"),
        pl.when(b_base).then(pl.col("score_a")).otherwise(1.0 - pl.col("score_a")).alias("score"),
    )
    cells = wins.group_by([*_KEY, "arm"]).agg(pl.col("score").mean(), pl.len().cast(pl.Int64).alias("n"))
    cells_frame = cells.collect().sort([*_KEY, "arm"])
    out: dict[Arm, pl.DataFrame] = {}
    for arm in ("AB", "BA"):
        out[arm] = cells_frame.filter(pl.col("arm") == arm).drop("arm")
    both = out["AB"].join(out["BA"], on=list(_KEY), how="inner", suffix="_ba")
    out["balanced"] = both.select(
        *_KEY, ((pl.col("score") + pl.col("score_ba")) / 2.0).alias("score"), pl.lit(1, dtype=pl.Int64).alias("n")
    )
    return out


def _none_arm(arm: Arm, games: int, reason: dict[str, str], block: BalancedBlock | None = None) -> PairwiseArm:
    sizes = (len(block.systems), len(block.items), len(block.judges), block.n_replicates) if block else (0, 0, 0, 0)
    return PairwiseArm(
        arm=arm, design=None, systems=sizes[0], items=sizes[1], judges=sizes[2], replicates=sizes[3],
        games=games, sigma2_s=None, sigma2_sj=None, share=None, ceiling=None, erho2=None,
        judges_needed=None, null_reasons=reason, notes=tuple(_dropped(block)) if block else (), block=block,
    )


_QUANTITIES = ("sigma2_s", "sigma2_sj", "share", "ceiling", "erho2", "judges_needed")


def _fit_arm(arm: Arm, cells: pl.DataFrame, target: float) -> PairwiseArm:
    """Block, fit and D-study quantities of one arm (module docstring)."""
    games = int(cells["n"].sum()) if cells.height else 0
    if cells.height == 0:
        why = f"no games in arm {arm!r} (known order, candidate against the baseline)"
        return _none_arm(arm, games, dict.fromkeys(_QUANTITIES, why))
    records = cells.select(*_KEY, "score")
    try:
        block = balanced_block(records)
    except DesignError as exc:
        return _none_arm(arm, games, dict.fromkeys(_QUANTITIES, str(exc)))
    n_s, n_i, n_j, n_r = len(block.systems), len(block.items), len(block.judges), block.n_replicates
    if n_s < 2 or n_i < 2:
        why = (
            f"the largest balanced block has {n_s} system(s) x {n_i} item(s) x {n_j} judge(s): "
            "the G-study needs at least 2 systems and 2 items"
        )
        return _none_arm(arm, games, dict.fromkeys(_QUANTITIES, why), block)
    reasons: dict[str, str] = {}
    x = block.x
    if n_j == 1:
        spec = "s x i" + (" x r:si" if n_r > 1 else "")
        x = x[:, :, 0]
        one_judge = (
            f"one judge in the block ({block.judges[0]}): the judge facet is not identified, "
            f"sigma2_sj is confounded with sigma2_s (design {spec})"
        )
        for name in ("sigma2_sj", "ceiling", "judges_needed"):
            reasons[name] = one_judge
    else:
        spec = "s x i x j" + (" x r:sij" if n_r > 1 else "")
    design = Design.parse(spec)
    fit = fit_gstudy(x, design)
    sigma2 = fit.sigma2
    sigma2_s = fit.component("s")
    sigma2_sj = fit.component("sj") if n_j > 1 else None
    share = float(fit.shares[fit.effects.index("s")])
    if not fit.sigma2_truncated.sum() > 0:
        reasons["share"] = "every component is estimated <= 0: no variance to share"
    notes = [
        f"sigma2_{label.replace(':', '_')} = {float(value):.4g} < 0 (raw), taken as 0 in share and ratios"
        for label, value in zip(fit.effects, sigma2, strict=True)
        if value < 0
    ]
    notes.extend(_dropped(block))
    ceiling_value: float | None = None
    needed: int | None = None
    if n_j > 1:
        ceiling_value = _ratio(float(ceiling(sigma2, design)), "ceiling", reasons,
                               f"sigma2_s = {sigma2_s:.4g} and sigma2_sj = {sigma2_sj:.4g} are both <= 0 (0/0)")
        needed = judges_needed(sigma2, design, target=target, items=n_i, replicates=1)
        if needed is None:
            reasons["judges_needed"] = (
                f"sigma2_s = {sigma2_s:.4g} <= 0: no number of judges reaches any target" if sigma2_s <= 0 else
                f"never: E rho^2 at {n_i} items and one run stays below {target} with up to "
                f"{MAX_JUDGES} judges"
            )
    native = PAPER_ROLES.sizes(design, n_i, 1, 1)
    erho2_value = _ratio(float(erho2(sigma2, design, native)), "erho2", reasons,
                         f"sigma2_s and sigma2_delta at {n_i} items, one judge, one run are both <= 0 (0/0)")
    return PairwiseArm(
        arm=arm, design=spec, systems=n_s, items=n_i, judges=n_j, replicates=n_r, games=games,
        sigma2_s=sigma2_s, sigma2_sj=sigma2_sj, share=share if "share" not in reasons else None,
        ceiling=ceiling_value, erho2=erho2_value, judges_needed=needed,
        components=fit.components(), null_reasons=reasons, notes=tuple(notes), block=block, fit=fit,
    )


def _dropped(block: BalancedBlock) -> list[str]:
    out = [
        f"block rule dropped {len(ids)} {what}: {', '.join(ids)}"
        for what, ids in (("system(s)", block.dropped_systems), ("item(s)", block.dropped_items),
                          ("judge(s)", block.dropped_judges))
        if ids
    ]
    return out + list(block.notes)


def _ratio(value: float, name: str, reasons: dict[str, str], why: str) -> float | None:
    if np.isnan(value):
        reasons[name] = why
        return None
    return value


def pairwise_gstudy(games: pl.DataFrame, *, baseline: str | None = None, target: float = 0.8) -> PairwiseGStudy:
    r"""Variance components of win indicators against a common baseline, per presentation order.

    Parameters
    ----------
    games
        A games frame (:func:`jurymeter.stats.pairwise.games.games`).
    baseline : str or None, default None
        The system every candidate is judged against. ``None``: the one system
        present in every game.
    target : float, default 0.8
        The :math:`E\rho^2` that ``judges_needed`` asks for, in (0, 1).

    Returns
    -------
    PairwiseGStudy
        One :class:`PairwiseArm` per arm (``AB``, ``BA``, ``balanced``) and the tidy frame.

    Raises
    ------
    NotApplicableError
        ``baseline`` is ``None`` and no single system is in every game.
    ConfigError
        ``baseline`` is in no game, or ``target`` is not in (0, 1).
    DesignError
        ``games`` is not a games frame.

    Notes
    -----
    Per arm, the win indicator :math:`w` (1, 1/2, 0; a soft preference as its
    score) of the candidate against the baseline is averaged per (system, item,
    judge, generation, replicate) cell; the largest balanced block is taken by
    the rule of :mod:`jurymeter.stats.blocks` (generations averaged) and fitted
    by expected mean squares, ``s x i x j x r:sij`` (``s x i x r:si`` with one
    judge). Then ([Anand2026]_ table 3, eq. 4; :mod:`jurymeter.stats.dstudy`)

    .. math::

        \text{ceiling} = \frac{\sigma^2_s}{\sigma^2_s + \sigma^2_{sj}}, \qquad
        E\rho^2(n_i) = \frac{\sigma^2_s}{\sigma^2_s + \sigma^2_{si}/n_i
        + \sigma^2_{sj} + \sigma^2_{sij}/n_i + \sigma^2_e/n_i},

    :math:`E\rho^2` at the block's :math:`n_i`, one judge, one run, and
    ``judges_needed`` the fewest :math:`n_j` with
    :math:`\sigma^2_s / (\sigma^2_s + \sigma^2_{si}/n_i + \sigma^2_{sj}/n_j
    + (\sigma^2_{sij} + \sigma^2_e)/(n_i n_j)) \ge` ``target``.

    Examples
    --------
    >>> g = pl.DataFrame({
    ...     "item_id": ["q1", "q1", "q2", "q2"], "system_a": ["m", "base", "m", "base"],
    ...     "system_b": ["base", "m", "base", "m"], "judge_id": ["j"] * 4,
    ...     "generation": [0] * 4, "replicate": [0] * 4, "score_a": [1.0, 0.0, 0.5, 1.0],
    ...     "order_known": [True] * 4})
    >>> study = pairwise_gstudy(g, baseline="base")
    >>> study.baseline, study.arm("balanced").block.x.ravel().tolist()
    ('base', [1.0, 0.25])
    """
    frame = _check_games(games)
    target = _check_target(target)
    if baseline is None:
        everywhere = systems_in_every_game(frame)
        if len(everywhere) != 1:
            found = f"{len(everywhere)} are ({', '.join(everywhere)})" if everywhere else "none is"
            msg = (
                "the pairwise G-study needs a common baseline, one system in every game; "
                f"{found}: set the option baseline= to the system every candidate was judged against"
            )
            raise NotApplicableError(msg)
        baseline = everywhere[0]
    elif not isinstance(baseline, str) or not bool(
        ((frame["system_a"] == baseline) | (frame["system_b"] == baseline)).any()
    ):
        shown = sorted(set(frame["system_a"].to_list()) | set(frame["system_b"].to_list()))
        msg = f"baseline must be a system of the games ({shown[:10]}{'...' if len(shown) > 10 else ''}); got {baseline!r}"
        raise ConfigError(msg)
    involved = (pl.col("system_a") == baseline) ^ (pl.col("system_b") == baseline)
    skipped = {
        "not_against_baseline": int(frame.select((~involved).sum()).item()),
        "order_unknown": int(frame.select((involved & ~pl.col("order_known")).sum()).item()),
    }
    cells = win_indicators(frame, baseline)
    arms = tuple(_fit_arm(arm, cells[arm], target) for arm in ARMS)
    table = pl.DataFrame(
        [
            {
                "arm": a.arm, "systems": a.systems, "items": a.items, "judges": a.judges,
                "replicates": a.replicates, "sigma2_s": a.sigma2_s, "sigma2_sj": a.sigma2_sj,
                "share": a.share, "ceiling": a.ceiling, "erho2": a.erho2,
                "judges_needed": a.judges_needed, "reason": a.reason,
            }
            for a in arms
        ],
        schema=FRAME_SCHEMA,
    )
    return PairwiseGStudy(baseline=baseline, target=target, arms=arms, games_skipped=skipped, frame=table)
