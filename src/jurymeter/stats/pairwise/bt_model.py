r"""Bradley-Terry, the model: outcomes coded to sufficient statistics, the comparison graph and the Newton fit.

The model of :mod:`jurymeter.stats.pairwise.bradley_terry`: ratings
:math:`\theta_s` on the logit scale, :math:`\sum_s \theta_s = 0`,
:math:`E[y] = \sigma(\theta_a - \theta_b)` ([Awuni2026]_ section 4.2), fitted
by maximizing the quasi log-likelihood, which depends on the data only through
the win matrix ``W[a, b]`` (what ``a`` earned against ``b``) and
:math:`n_{ab} = W[a, b] + W[b, a]`. The MLE exists and is finite exactly when
the win graph is strongly connected ([Hunter2004]_); :func:`_graph_problem`
names the systems when it is not. Newton on the sum-to-zero ratings converges
quadratically from zero.

References
----------
.. [Awuni2026] D. A. Awuni et al., "Who Judges Matters: Measuring
   Family-Conditioned Preference in LLM-as-Judge Panels", 2026
   (``papers/who-judges-matters.txt``).
.. [Hunter2004] D. R. Hunter, "MM algorithms for generalized Bradley-Terry
   models", Annals of Statistics 32, 2004 (existence of the MLE: the win graph
   is strongly connected).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import polars as pl
from scipy.sparse import csr_matrix
from scipy.sparse.csgraph import connected_components

from jurymeter.errors import DesignError, JurymeterError

# Newton stops when the largest step is below this (logit units); Newton converges
# quadratically, so the iterate is then exact to rounding.
TOLERANCE = 1e-11
MAX_ITER = 200
# A step of a batched Newton is capped at this length (max norm), a trust region
# that keeps a far-off warm start from overshooting; it never binds near the optimum.
MAX_STEP = 2.0

_OUTCOME_COLUMNS = ("item_id", "system_x", "system_y", "judge_id", "score_x")


class ComparisonGraphError(DesignError):
    """The comparisons do not identify finite Bradley-Terry ratings."""


class ConvergenceError(JurymeterError):
    """A Bradley-Terry fit did not converge."""


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


ELO_PER_LOGIT = 400.0 / math.log(10.0)
ELO_CENTRE = 1000.0


def _ranks(theta: np.ndarray) -> np.ndarray:
    """Ranks (1 = best) along the last axis; equal ratings take the lower system code first."""
    order = np.argsort(-theta, axis=-1, kind="stable")
    ranks = np.empty_like(order)
    np.put_along_axis(ranks, order, np.arange(1, theta.shape[-1] + 1), axis=-1)
    return ranks
