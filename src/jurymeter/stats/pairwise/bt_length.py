r"""Bradley-Terry with length control: the style-controlled fit on games that carry response lengths ([Chiang2024]_).

:math:`\operatorname{logit} P(A \succ B) = \theta_A - \theta_B + \beta d`,
:math:`d = (L_A - L_B)/(L_A + L_B)` (0 when both are 0), fitted by Newton on the
games (ties half, soft scores fractional), with :math:`\beta`'s item-clustered
sandwich SE; ``changed`` names the systems whose rank moves against the same
games fitted without the length term.

References
----------
.. [Chiang2024] W.-L. Chiang et al., "Chatbot Arena: An Open Platform for
   Evaluating LLMs by Human Preference", 2024 (style control with a normalized
   length difference).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import polars as pl

from jurymeter.stats.pairwise.bt_model import (
    ELO_CENTRE,
    ELO_PER_LOGIT,
    MAX_ITER,
    MAX_STEP,
    TOLERANCE,
    ComparisonGraphError,
    ConvergenceError,
    _check_columns,
    _graph_problem,
    _ranks,
)
from jurymeter.stats.pairwise.games import key_codes

_GAME_COLUMNS = ("item_id", "system_a", "system_b", "score_a", "length_a", "length_b")


LENGTH_SCHEMA: dict[str, pl.DataType] = {
    "system_id": pl.String(),
    "rating": pl.Float64(),
    "rating_elo": pl.Float64(),
    "rank": pl.Int64(),
    "rating_uncontrolled": pl.Float64(),
    "rank_uncontrolled": pl.Int64(),
    "rank_change": pl.Int64(),
}


@dataclass(frozen=True, slots=True)
class LengthControl:
    r"""Length-controlled Bradley-Terry fit (style control).

    Attributes
    ----------
    beta : float
        Logit per unit of :math:`d = (L_A - L_B)/(L_A + L_B)`.
    beta_se : float
        Its item-clustered sandwich standard error (no small-sample correction).
    ratings : polars.DataFrame
        Columns :data:`LENGTH_SCHEMA`, best first: the controlled ratings (sum to
        zero; ``rating_elo`` centred at the mean, never at the anchor) and ranks, and those of the same games fitted without the length
        term; ``rank_change`` = uncontrolled rank - controlled rank.
    changed : tuple of str
        Systems whose rank differs between the two fits.
    n_games : int
        Games with both lengths, the rows of the fit.
    """

    beta: float
    beta_se: float
    ratings: pl.DataFrame
    changed: tuple[str, ...]
    n_games: int


def _games_fit(
    a: np.ndarray, b: np.ndarray, d: np.ndarray | None, y: np.ndarray, s: int
) -> tuple[np.ndarray, float, np.ndarray]:
    """Newton on per-game rows; returns theta (sum zero), beta and the (S+1) information."""
    p_dim = s + (0 if d is None else 1)
    theta = np.zeros(s)
    beta = 0.0
    ridge = np.zeros((p_dim, p_dim))
    ridge[:s, :s] = 1.0 / s
    for _ in range(MAX_ITER):
        eta = theta[a] - theta[b] + (0.0 if d is None else beta * d)
        p = 1.0 / (1.0 + np.exp(-eta))
        r = y - p
        v = p * (1.0 - p)
        grad = np.bincount(a, weights=r, minlength=s) - np.bincount(b, weights=r, minlength=s)
        lap = np.bincount(a * s + b, weights=v, minlength=s * s).reshape(s, s)
        lap = lap + lap.T
        info = np.zeros((p_dim, p_dim))
        info[:s, :s] = np.diag(lap.sum(axis=1)) - lap
        if d is not None:
            cross = np.bincount(a, weights=v * d, minlength=s) - np.bincount(
                b, weights=v * d, minlength=s
            )
            info[:s, s] = info[s, :s] = cross
            info[s, s] = float((v * d * d).sum())
            grad = np.append(grad, float((r * d).sum()))
        step = np.linalg.solve(info + ridge, grad)
        size = float(np.abs(step).max())
        scale = min(1.0, MAX_STEP / max(size, 1e-300))
        theta = theta + scale * step[:s]
        if d is not None:
            beta += scale * float(step[s])
        if size < TOLERANCE:
            return theta - theta.mean(), beta, info
    msg = f"length-controlled Bradley-Terry did not converge in {MAX_ITER} Newton iterations"
    raise ConvergenceError(msg)


def _length_control(games: pl.DataFrame) -> tuple[LengthControl | None, str | None]:
    _check_columns(games, _GAME_COLUMNS, "games")
    g = games.select(_GAME_COLUMNS).filter(
        pl.col("length_a").is_not_null() & pl.col("length_b").is_not_null()
        & pl.col("score_a").is_not_null()
    )
    if g.height == 0:
        return None, "no game carries both length_a and length_b"
    names = sorted(set(g["system_a"].unique()) | set(g["system_b"].unique()))
    s = len(names)
    a = g["system_a"].cast(pl.String).cast(pl.Enum(names)).to_physical().cast(pl.Int64).to_numpy()
    b = g["system_b"].cast(pl.String).cast(pl.Enum(names)).to_physical().cast(pl.Int64).to_numpy()
    y = g["score_a"].cast(pl.Float64).to_numpy()
    la = g["length_a"].cast(pl.Float64).to_numpy()
    lb = g["length_b"].cast(pl.Float64).to_numpy()
    total = la + lb
    d = np.where(total > 0, (la - lb) / np.where(total > 0, total, 1.0), 0.0)
    wins = (np.bincount(a * s + b, y, s * s) + np.bincount(b * s + a, 1.0 - y, s * s)).reshape(s, s)
    problem = _graph_problem(wins, tuple(names))
    if problem is not None:
        raise ComparisonGraphError("length control: " + problem)
    theta, beta, info = _games_fit(a, b, d, y, s)
    plain, _, _ = _games_fit(a, b, None, y, s)
    # item-clustered sandwich of (theta, beta)
    item, _ = key_codes(g, ["item_id"])
    n_items = int(item.max()) + 1
    r = y - 1.0 / (1.0 + np.exp(-(theta[a] - theta[b] + beta * d)))
    u = np.zeros((n_items, s + 1))
    np.add.at(u, (item, a), r)
    np.add.at(u, (item, b), -r)
    u[:, s] = np.bincount(item, weights=r * d, minlength=n_items)
    ridge = np.zeros((s + 1, s + 1))
    ridge[:s, :s] = 1.0 / s
    bread = np.linalg.inv(info + ridge)
    cov = bread @ (u.T @ u) @ bread
    rank, rank_plain = _ranks(theta), _ranks(plain)
    elo = ELO_CENTRE + ELO_PER_LOGIT * theta
    ratings = pl.DataFrame(
        {
            "system_id": names,
            "rating": theta,
            "rating_elo": elo,
            "rank": rank.astype(np.int64),
            "rating_uncontrolled": plain,
            "rank_uncontrolled": rank_plain.astype(np.int64),
            "rank_change": (rank_plain - rank).astype(np.int64),
        },
        schema=LENGTH_SCHEMA,
    ).sort("rank")
    changed = tuple(n for n, r0, r1 in zip(names, rank_plain, rank, strict=True) if r0 != r1)
    return (
        LengthControl(
            beta=float(beta),
            beta_se=float(math.sqrt(max(cov[s, s], 0.0))),
            ratings=ratings,
            changed=changed,
            n_games=int(g.height),
        ),
        None,
    )
