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
from scipy.sparse import csr_matrix
from scipy.sparse.csgraph import connected_components

from jurymeter.errors import ConfigError, DesignError, JurymeterError
from jurymeter.stats.pairwise.games import key_codes

ELO_PER_LOGIT = 400.0 / math.log(10.0)
ELO_CENTRE = 1000.0
# Newton stops when the largest step is below this (logit units); Newton converges
# quadratically, so the iterate is then exact to rounding.
TOLERANCE = 1e-11
MAX_ITER = 200
# Chord steps (one shared information matrix) before Newton takes over the batched refits.
_CHORD_ITER = 40
# A step of a batched Newton is capped at this length (max norm), a trust region
# that keeps a far-off warm start from overshooting; it never binds near the optimum.
MAX_STEP = 2.0
# The battle bootstrap resamples (pair, score) cells; soft scores (neither 0, 1/2 nor 1) are
# pooled per pair into this many equal-width bins, each scored at its members' mean.
SOFT_BINS = 10

_OUTCOME_COLUMNS = ("item_id", "system_x", "system_y", "judge_id", "score_x")
_GAME_COLUMNS = ("item_id", "system_a", "system_b", "score_a", "length_a", "length_b")

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
LENGTH_SCHEMA: dict[str, pl.DataType] = {
    "system_id": pl.String(),
    "rating": pl.Float64(),
    "rating_elo": pl.Float64(),
    "rank": pl.Int64(),
    "rating_uncontrolled": pl.Float64(),
    "rank_uncontrolled": pl.Int64(),
    "rank_change": pl.Int64(),
}


class ComparisonGraphError(DesignError):
    """The comparisons do not identify finite Bradley-Terry ratings."""


class ConvergenceError(JurymeterError):
    """A Bradley-Terry fit did not converge."""


# --------------------------------------------------------------------------
# results
# --------------------------------------------------------------------------


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


@dataclass(frozen=True, slots=True)
class BradleyTerry:
    r"""Bradley-Terry ratings with prompt-bootstrap, battle-bootstrap and sandwich intervals.

    Attributes
    ----------
    table : polars.DataFrame
        One row per system, best first, columns :data:`BT_SCHEMA`: ``rating``
        (logit, sum to zero), ``rating_elo``, ``se_sandwich`` (logit),
        ``low``/``high`` (prompt-bootstrap percentile interval, logit, sum to
        zero), ``battle_low``/``battle_high`` (battle bootstrap, logit),
        ``elo_low``/``elo_high`` (prompt bootstrap on the Elo scale with the
        same centring as ``rating_elo``), ``width_ratio`` (prompt width / battle
        width), ``rank`` (1 = best), ``rank_low``/``rank_high`` (prompt
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
    "resampled independently, as the common leaderboards do).",
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
# sufficient statistics and the fit
# --------------------------------------------------------------------------


def _check_columns(frame: pl.DataFrame, columns: tuple[str, ...], name: str) -> None:
    missing = [c for c in columns if c not in frame.columns]
    if missing:
        msg = f"{name} must have columns {list(columns)}; missing {missing}"
        raise DesignError(msg)


@dataclass(frozen=True, slots=True)
class _Coded:
    systems: tuple[str, ...]
    items: tuple[str, ...]
    judges: tuple[str, ...]
    x: np.ndarray  # system code of x, per outcome
    y: np.ndarray
    item: np.ndarray
    judge: np.ndarray
    score: np.ndarray


def _code(outcomes: pl.DataFrame) -> _Coded:
    _check_columns(outcomes, _OUTCOME_COLUMNS, "outcomes")
    frame = outcomes.select(_OUTCOME_COLUMNS)
    if frame.height == 0:
        msg = "outcomes must have at least one row; got an empty frame"
        raise DesignError(msg)
    if frame.null_count().sum_horizontal().item() > 0:
        msg = f"outcomes must have no nulls in {list(_OUTCOME_COLUMNS)}"
        raise DesignError(msg)
    score = frame["score_x"].cast(pl.Float64).to_numpy()
    if not np.all((score >= 0.0) & (score <= 1.0)):
        msg = "outcomes.score_x must lie in [0, 1]"
        raise DesignError(msg)
    systems = sorted(set(frame["system_x"].unique()) | set(frame["system_y"].unique()))
    items = frame["item_id"].cast(pl.String).unique().sort().to_list()
    judges = frame["judge_id"].cast(pl.String).unique().sort().to_list()

    def codes(name: str, levels: list[str]) -> np.ndarray:
        # an Enum's physical codes are the positions in the sorted levels
        enum = pl.Enum(levels)
        out: np.ndarray = frame[name].cast(pl.String).cast(enum).to_physical().to_numpy()
        return out.astype(np.int64)

    x, y = codes("system_x", systems), codes("system_y", systems)
    if (x == y).any():
        msg = "outcomes must compare two different systems; some rows have system_x == system_y"
        raise DesignError(msg)
    return _Coded(
        systems=tuple(systems),
        items=tuple(items),
        judges=tuple(judges),
        x=x,
        y=y,
        item=codes("item_id", items),
        judge=codes("judge_id", judges),
        score=score,
    )


def _wins_matrix(c: _Coded) -> np.ndarray:
    s = len(c.systems)
    w = np.bincount(c.x * s + c.y, weights=c.score, minlength=s * s)
    w += np.bincount(c.y * s + c.x, weights=1.0 - c.score, minlength=s * s)
    return w.reshape(s, s)


def bt_wins(outcomes: pl.DataFrame) -> tuple[tuple[str, ...], np.ndarray]:
    r"""Systems and the wins matrix of pooled outcomes.

    Parameters
    ----------
    outcomes : polars.DataFrame
        A frame of :func:`jurymeter.stats.pairwise.games.reconcile` (at least
        ``item_id, system_x, system_y, judge_id, score_x``).

    Returns
    -------
    systems : tuple of str
        Sorted system ids, the order of the matrix.
    wins : numpy.ndarray
        ``(S, S)`` float64; ``wins[i, j]`` is what ``i`` earned against ``j``:
        the sum of its scores (a win 1, a tie 1/2, a soft score its value), so
        ``wins[i, j] + wins[j, i]`` is the number of outcomes of the pair.

    Raises
    ------
    DesignError
        Missing columns, nulls, an empty frame or a score outside [0, 1].

    Examples
    --------
    >>> frame = pl.DataFrame({"item_id": ["q1", "q2"], "system_x": ["a", "a"],
    ...                       "system_y": ["b", "b"], "judge_id": ["j", "j"],
    ...                       "score_x": [1.0, 0.5]})
    >>> systems, wins = bt_wins(frame)
    >>> systems, wins.tolist()
    (('a', 'b'), [[0.0, 1.5], [0.5, 0.0]])
    """
    c = _code(outcomes)
    return c.systems, _wins_matrix(c)


def _graph_problem(wins: np.ndarray, systems: tuple[str, ...]) -> str | None:
    """Why the wins matrix has no finite MLE, or None ([Hunter2004]_: strong connectivity)."""
    s = wins.shape[0]
    if s < 2:
        return f"at least 2 systems are needed; got {s}"
    n = wins + wins.T
    k_weak, weak = connected_components(csr_matrix((n > 0).astype(np.int8)), directed=False)
    if k_weak > 1:
        groups = [[systems[i] for i in np.flatnonzero(weak == g)] for g in range(k_weak)]
        return f"the comparison graph is not connected; its components are {groups}"
    k_strong, strong = connected_components(
        csr_matrix((wins > 0).astype(np.int8)), directed=True, connection="strong"
    )
    if k_strong == 1:
        return None
    # A component never beaten from outside won everything against the rest; one that never
    # beat anyone outside lost everything.
    comp_beats = np.zeros((k_strong, k_strong), dtype=bool)
    ii, jj = np.nonzero(wins > 0)
    comp_beats[strong[ii], strong[jj]] = True
    np.fill_diagonal(comp_beats, False)
    parts = []
    for g in range(k_strong):
        members = [systems[i] for i in np.flatnonzero(strong == g)]
        if not comp_beats[:, g].any():
            parts.append(f"{members} never lost a comparison against the other systems")
        elif not comp_beats[g, :].any():
            parts.append(f"{members} never won a comparison against the other systems")
    return "ratings are not finite: " + "; ".join(parts)


def _newton(
    wins: np.ndarray, start: np.ndarray | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """Sum-to-zero MLE and the Fisher information (S x S Laplacian) at it."""
    s = wins.shape[0]
    n = wins + wins.T
    theta = np.zeros(s) if start is None else start - start.mean()
    ones = np.full((s, s), 1.0 / s)

    def loglik(t: np.ndarray) -> float:
        diff = t[:, None] - t[None, :]
        return float(-(wins * np.logaddexp(0.0, -diff)).sum())

    current = loglik(theta)
    for _ in range(MAX_ITER):
        p = 1.0 / (1.0 + np.exp(-(theta[:, None] - theta[None, :])))
        grad = (wins - n * p).sum(axis=1)
        v = n * p * (1.0 - p)
        info = np.diag(v.sum(axis=1)) - v
        step = np.linalg.solve(info + ones, grad)
        size = float(np.abs(step).max())
        # backtracking on the (concave) log-likelihood; a full step is taken near the optimum
        t = 1.0
        while True:
            candidate = theta + t * step
            value = loglik(candidate)
            if value >= current - 1e-12 * abs(current) or t < 1e-8:
                break
            t *= 0.5
        theta, current = candidate, value
        if size < TOLERANCE:
            p = 1.0 / (1.0 + np.exp(-(theta[:, None] - theta[None, :])))
            v = n * p * (1.0 - p)
            return theta - theta.mean(), np.diag(v.sum(axis=1)) - v
    msg = f"Bradley-Terry Newton did not converge in {MAX_ITER} iterations (last step {size:.3g})"
    raise ConvergenceError(msg)


def bt_fit(wins: np.ndarray, *, systems: tuple[str, ...] | None = None) -> np.ndarray:
    r"""Bradley-Terry maximum-likelihood ratings of a wins matrix.

    Parameters
    ----------
    wins : numpy.ndarray
        ``(S, S)``, ``wins[i, j]`` what ``i`` earned against ``j`` (non-negative;
        fractional values allowed); the diagonal is ignored.
    systems : tuple of str, optional
        Names used in error messages (default ``"0".."S-1"``).

    Returns
    -------
    numpy.ndarray
        Ratings :math:`\theta` on the logit scale, summing to zero.

    Raises
    ------
    ComparisonGraphError
        The comparison graph is not connected, or a set of systems won (or lost)
        every comparison against the others, so some rating is infinite; the
        message names the systems.
    ConvergenceError
        Newton did not reach the tolerance in ``MAX_ITER`` iterations.

    Notes
    -----
    Newton's method on the log-likelihood
    :math:`\ell(\theta) = \sum_{a \ne b} W_{ab}\log\sigma(\theta_a - \theta_b)`
    ([Awuni2026]_ section 4.2), with gradient
    :math:`g_a = \sum_b W_{ab} - n_{ab}\,\sigma(\theta_a-\theta_b)` and Fisher
    information the Laplacian :math:`I = \operatorname{diag}(V\mathbf 1) - V`,
    :math:`V_{ab} = n_{ab} p_{ab}(1-p_{ab})`. The step solves
    :math:`(I + \mathbf 1\mathbf 1^\top/S)\,\delta = g`; since :math:`g \perp
    \mathbf 1`, :math:`\delta` keeps :math:`\sum\theta = 0`. Steps are halved
    while they lower the likelihood; stopping when the largest step is below
    ``TOLERANCE``. The MLE exists iff the directed win graph is strongly
    connected ([Hunter2004]_).

    Examples
    --------
    >>> bt_fit(np.array([[0.0, 3.0], [1.0, 0.0]])).round(6).tolist()
    [0.549306, -0.549306]
    """
    w = np.array(wins, dtype=np.float64)
    if w.ndim != 2 or w.shape[0] != w.shape[1]:
        msg = f"wins must be a square matrix; got shape {w.shape}"
        raise DesignError(msg)
    if not np.all(np.isfinite(w)) or (w < 0).any():
        msg = "wins must be finite and non-negative"
        raise DesignError(msg)
    np.fill_diagonal(w, 0.0)
    names = systems if systems is not None else tuple(str(k) for k in range(w.shape[0]))
    problem = _graph_problem(w, names)
    if problem is not None:
        raise ComparisonGraphError(problem)
    theta, _ = _newton(w)
    return theta


# --------------------------------------------------------------------------
# batched refits
# --------------------------------------------------------------------------


class _SystemSums:
    """Sums over pairs per system, ``out[:, s] = sum_{k: a_k = s} x_k`` (and for ``b``).

    Segment sums on pre-sorted columns (``np.add.reduceat``); they replace the products
    with the (K, S) incidence matrix, which threaded BLAS runs slowly at this size.
    """

    def __init__(self, codes: np.ndarray, n_systems: int) -> None:
        self.order = np.argsort(codes, kind="stable")
        self.present, self.starts = np.unique(codes[self.order], return_index=True)
        self.n_systems = n_systems

    def __call__(self, values: np.ndarray) -> np.ndarray:
        out = np.zeros((values.shape[0], self.n_systems))
        out[:, self.present] = np.add.reduceat(values[:, self.order], self.starts, axis=1)
        return out


def _batched_newton(
    pair_a: np.ndarray,
    pair_b: np.ndarray,
    wins: np.ndarray,
    counts: np.ndarray,
    start: np.ndarray,
    n_systems: int,
) -> tuple[np.ndarray, np.ndarray]:
    """Refit B resamples at once: wins/counts (B, K) on distinct pairs (a_k, b_k).

    Returns ratings (B, S) and a bool (B,) of resamples that converged; a resample in which
    some system earned nothing or everything, or whose information is singular (not
    connected), is not refitted and reported as not converged.
    """
    n_boot = wins.shape[0]
    s = n_systems
    sum_a, sum_b = _SystemSums(pair_a, s), _SystemSums(pair_b, s)
    off_ab, off_ba = pair_a * s + pair_b, pair_b * s + pair_a  # distinct pairs: no repeats
    diagonal = np.arange(s) * (s + 1)
    ridge = np.full((s, s), 1.0 / s)
    theta = np.broadcast_to(start - start.mean(), (n_boot, s)).copy()
    # A system that earned nothing (or everything) has no finite rating: not refitted.
    earned = sum_a(wins) + sum_b(counts - wins)
    played = sum_a(counts) + sum_b(counts)
    failed = ((earned <= 0) | (earned >= played)).any(axis=1)
    active = ~failed
    _chord(pair_a, pair_b, wins, counts, theta, active, s)
    for _ in range(MAX_ITER):
        idx = np.flatnonzero(active)
        if idx.size == 0:
            break
        t = theta[idx]
        p = 1.0 / (1.0 + np.exp(t[:, pair_b] - t[:, pair_a]))
        n = counts[idx]
        resid = wins[idx] - n * p
        grad = sum_a(resid) - sum_b(resid)
        v = n * p * (1.0 - p)
        flat = np.zeros((idx.size, s * s))
        flat[:, off_ab] = -v
        flat[:, off_ba] = -v
        flat[:, diagonal] = sum_a(v) + sum_b(v)
        info = flat.reshape(idx.size, s, s) + ridge
        try:
            step = np.linalg.solve(info, grad[:, :, None])[:, :, 0]
        except np.linalg.LinAlgError:  # a disconnected resample: solve one by one
            step = np.zeros_like(grad)
            for q in range(idx.size):
                try:
                    step[q] = np.linalg.solve(info[q], grad[q])
                except np.linalg.LinAlgError:
                    failed[idx[q]] = True
                    active[idx[q]] = False
        size = np.abs(step).max(axis=1)
        scale = np.minimum(1.0, MAX_STEP / np.maximum(size, 1e-300))
        alive = active[idx]
        theta[idx[alive]] = (t + step * scale[:, None])[alive]
        done = (size < TOLERANCE) & alive
        active[idx[done]] = False
    return theta - theta.mean(axis=1, keepdims=True), ~active & ~failed


def _chord(
    pair_a: np.ndarray,
    pair_b: np.ndarray,
    wins: np.ndarray,
    counts: np.ndarray,
    theta: np.ndarray,
    active: np.ndarray,
    s: int,
) -> None:
    """Chord steps with one information matrix for all resamples, in place; Newton finishes the rest.

    The resamples' information matrices differ little from that of the mean counts at the
    start, so its inverse contracts every resample's error by a small factor per step at the
    cost of a matrix product (no per-resample solve). A resample converged here (largest step
    below ``TOLERANCE``) is marked inactive; one whose step grows is put back at the start.
    """
    idx = np.flatnonzero(active)
    if idx.size == 0:
        return
    sum_a, sum_b = _SystemSums(pair_a, s), _SystemSums(pair_b, s)  # not BLAS: its threads are slow here
    start = theta[idx[0]].copy()
    p0 = 1.0 / (1.0 + np.exp(start[pair_b] - start[pair_a]))
    v0 = counts[idx].mean(axis=0) * p0 * (1.0 - p0)
    info0 = np.zeros((s, s))
    np.add.at(info0, (pair_a, pair_b), -v0)
    np.add.at(info0, (pair_b, pair_a), -v0)
    info0[np.arange(s), np.arange(s)] = -info0.sum(axis=1)
    try:
        inverse = np.linalg.inv(info0 + np.full((s, s), 1.0 / s))
    except np.linalg.LinAlgError:
        return
    last = np.full(theta.shape[0], np.inf)
    for _ in range(_CHORD_ITER):
        if idx.size == 0:
            return
        t = theta[idx]
        p = 1.0 / (1.0 + np.exp(t[:, pair_b] - t[:, pair_a]))
        resid = wins[idx] - counts[idx] * p
        step = (sum_a(resid) - sum_b(resid)) @ inverse
        size = np.abs(step).max(axis=1)
        grew = ~(size < last[idx])  # not contracting (or not finite): back to the start, for Newton
        theta[idx[grew]] = start
        keep = ~grew
        scale = np.minimum(1.0, MAX_STEP / np.maximum(size, 1e-300))
        theta[idx[keep]] = (t + step * scale[:, None])[keep]
        done = keep & (size < TOLERANCE)
        active[idx[done]] = False
        last[idx] = size
        idx = idx[keep & ~done]


def _refit(
    pair_a: np.ndarray,
    pair_b: np.ndarray,
    wins: np.ndarray,
    counts: np.ndarray,
    start: np.ndarray,
    systems: tuple[str, ...],
) -> tuple[np.ndarray, int]:
    """Batched refits; drops resamples without finite ratings, raises on other failures."""
    theta, ok = _batched_newton(pair_a, pair_b, wins, counts, start, len(systems))
    bad = np.flatnonzero(~ok | ~np.all(np.isfinite(theta), axis=1))
    s = len(systems)
    degenerate = np.zeros(wins.shape[0], dtype=bool)
    for b in bad:
        w = np.zeros((s, s))
        np.add.at(w, (pair_a, pair_b), wins[b])
        np.add.at(w, (pair_b, pair_a), counts[b] - wins[b])
        if _graph_problem(w, systems) is not None:
            degenerate[b] = True
            continue
        msg = (
            f"Bradley-Terry refit of bootstrap resample {int(b)} did not converge in "
            f"{MAX_ITER} Newton iterations"
        )
        raise ConvergenceError(msg)
    return theta[~degenerate], int(degenerate.sum())


# --------------------------------------------------------------------------
# bradley_terry
# --------------------------------------------------------------------------


def _uniform_multinomial(rng: np.random.Generator, n: int, size: int) -> np.ndarray:
    """``size`` draws of Multinomial(n, (1/n, ..., 1/n)): counts of n uniform picks."""
    picks = rng.integers(0, n, size=(size, n)) + (np.arange(size) * n)[:, None]
    counts: np.ndarray = np.bincount(picks.ravel(), minlength=size * n).reshape(size, n)
    return counts


def _ranks(theta: np.ndarray) -> np.ndarray:
    """Ranks (1 = best) along the last axis; equal ratings take the lower system code first."""
    order = np.argsort(-theta, axis=-1, kind="stable")
    ranks = np.empty_like(order)
    np.put_along_axis(ranks, order, np.arange(1, theta.shape[-1] + 1), axis=-1)
    return ranks


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


def _battle(
    c: _Coded, pair_of: np.ndarray, pa: np.ndarray, pb: np.ndarray, theta: np.ndarray, n_boot: int,
    battle_rng: np.random.Generator,
) -> tuple[np.ndarray, int]:
    """Battle bootstrap: multinomial on (pair, score) cells; soft scores binned (see Notes)."""
    hard = np.isin(c.score, (0.0, 0.5, 1.0))
    level_code = np.where(
        c.score == 0.0, 0, np.where(c.score == 0.5, 1, np.where(c.score == 1.0, 2, 0))
    )
    soft_bin = 3 + np.minimum((c.score * SOFT_BINS).astype(np.int64), SOFT_BINS - 1)
    cell_code = pair_of * (3 + SOFT_BINS) + np.where(hard, level_code, soft_bin)
    cells, cell_of, cell_n = np.unique(cell_code, return_inverse=True, return_counts=True)
    cell_score = np.bincount(cell_of, weights=c.score) / cell_n  # the cell's mean score
    starts = np.flatnonzero(np.r_[True, np.diff(cells // (3 + SOFT_BINS)) != 0])
    draws = battle_rng.multinomial(c.score.size, cell_n / c.score.size, size=n_boot)
    battle_w = np.add.reduceat(draws * cell_score, starts, axis=1)
    battle_n = np.add.reduceat(draws, starts, axis=1).astype(np.float64)
    battle, battle_bad = _refit(pa, pb, battle_w, battle_n, theta, c.systems)
    return battle, battle_bad


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
    c = _code(outcomes)
    _check_options(n_boot, seed, level, anchor, c.systems)
    s = len(c.systems)
    wins = _wins_matrix(c)
    problem = _graph_problem(wins, c.systems)
    if problem is not None:
        raise ComparisonGraphError(problem)
    theta, info = _newton(wins)
    cov = _sandwich(c, theta, info)
    se = np.sqrt(np.maximum(np.diag(cov), 0.0))

    rng = np.random.default_rng(seed)
    item_rng, judge_rng, battle_rng = rng.spawn(3)
    # pairs observed, and the per-item (x judge) sums on them
    pair_code = c.x * s + c.y
    seen = np.zeros(s * s, dtype=bool)
    seen[pair_code] = True
    pairs = np.flatnonzero(seen)
    dense = np.zeros(s * s, dtype=np.int64)
    dense[pairs] = np.arange(pairs.size)
    pair_of = dense[pair_code]
    pa, pb = pairs // s, pairs % s
    k = pairs.size
    n_items, n_judges = len(c.items), len(c.judges)
    if resample_judges:
        cell = (c.item * n_judges + c.judge) * k + pair_of
        size = n_items * n_judges * k
        xw = np.bincount(cell, weights=c.score, minlength=size).reshape(n_items, n_judges * k)
        xn = np.bincount(cell, minlength=size).astype(np.float64).reshape(n_items, n_judges * k)
        m = _uniform_multinomial(item_rng, n_items, n_boot)
        g = _uniform_multinomial(judge_rng, n_judges, n_boot)
        mf, gf = m.astype(np.float64), g.astype(np.float64)
        bw = np.einsum("bjk,bj->bk", (mf @ xw).reshape(n_boot, n_judges, k), gf)
        bn = np.einsum("bjk,bj->bk", (mf @ xn).reshape(n_boot, n_judges, k), gf)
    else:
        cell = c.item * k + pair_of
        xw = np.bincount(cell, weights=c.score, minlength=n_items * k).reshape(n_items, k)
        xn = np.bincount(cell, minlength=n_items * k).astype(np.float64).reshape(n_items, k)
        m = _uniform_multinomial(item_rng, n_items, n_boot)
        mf = m.astype(np.float64)
        bw, bn = mf @ xw, mf @ xn
    prompt, prompt_bad = _refit(pa, pb, bw, bn, theta, c.systems)

    if not isinstance(battle_bootstrap, bool):
        msg = f"battle_bootstrap must be a bool; got {battle_bootstrap!r}"
        raise ConfigError(msg)
    if battle_bootstrap:
        battle, battle_bad = _battle(c, pair_of, pa, pb, theta, n_boot, battle_rng)
    if prompt.shape[0] < 2 or (battle_bootstrap and battle.shape[0] < 2):
        msg = (
            f"fewer than 2 of the {n_boot} bootstrap resamples have finite ratings "
            f"(prompt {prompt.shape[0]}, battle {battle.shape[0] if battle_bootstrap else 'not run'}); "
            "the intervals cannot be estimated"
        )
        raise ComparisonGraphError(msg)

    lo_q, hi_q = (1.0 - level) / 2.0, (1.0 + level) / 2.0
    low, high = np.quantile(prompt, [lo_q, hi_q], axis=0)
    if battle_bootstrap:
        b_low, b_high = np.quantile(battle, [lo_q, hi_q], axis=0)
        ratio = (high - low) / (b_high - b_low)
    else:
        b_low = b_high = ratio = np.full(s, np.nan)
    centre_idx = None if anchor is None else c.systems.index(anchor)

    def elo(t: np.ndarray) -> np.ndarray:
        if centre_idx is None:
            centre = t.mean(axis=-1, keepdims=True)
        else:
            centre = t[..., centre_idx : centre_idx + 1]
        out: np.ndarray = ELO_CENTRE + ELO_PER_LOGIT * (t - centre)
        return out

    e_low, e_high = np.quantile(elo(prompt), [lo_q, hi_q], axis=0)
    rank = _ranks(theta)
    boot_ranks = _ranks(prompt)
    r_low = np.quantile(boot_ranks, lo_q, axis=0, method="inverted_cdf")
    r_high = np.quantile(boot_ranks, hi_q, axis=0, method="inverted_cdf")
    order = np.argsort(rank)
    ahead = prompt[:, order[:-1]] > prompt[:, order[1:]]  # (B, S-1), sorted neighbours
    separated = ahead.mean(axis=0) >= level + (1.0 - level) / 2.0
    group_sorted = np.concatenate([[1], 1 + np.cumsum(separated)])
    group = np.empty(s, dtype=np.int64)
    group[order] = group_sorted

    table = pl.DataFrame(
        {
            "system_id": list(c.systems),
            "rating": theta,
            "rating_elo": elo(theta),
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
            "tie_group": group,
        },
        schema=BT_SCHEMA,
    ).sort("rank")
    if not battle_bootstrap:
        table = table.with_columns(pl.lit(None, dtype=pl.Float64).alias(n) for n in ("battle_low", "battle_high", "width_ratio"))

    lc: LengthControl | None
    lc_reason: str | None
    if games is None:
        lc, lc_reason = None, "no games frame was given"
    else:
        lc, lc_reason = _length_control(games)
    return BradleyTerry(
        table=table,
        width_ratio=float(np.median(ratio)) if battle_bootstrap else None,
        n_boot=n_boot,
        prompt_degenerate=prompt_bad,
        battle_degenerate=battle_bad if battle_bootstrap else None,
        level=float(level),
        n_outcomes=int(c.score.size),
        n_items=n_items,
        resample_judges=bool(resample_judges),
        anchor=anchor,
        length_control=lc,
        length_control_reason=lc_reason,
        notes=NOTES,
    )


# --------------------------------------------------------------------------
# length control
# --------------------------------------------------------------------------


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
