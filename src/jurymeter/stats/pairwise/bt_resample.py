r"""Bradley-Terry, the resamples: batched refits of the prompt and battle bootstraps.

Every resample of :func:`jurymeter.stats.pairwise.bradley_terry.bradley_terry`
is a set of sufficient statistics on the observed pairs (resampled sums of
scores and counts); all of them are refitted at once, warm-started at the full
fit: chord steps (one shared information matrix) first, then a batched Newton
whose steps are capped at ``MAX_STEP`` (max norm). The prompt bootstrap's
weights are multinomial counts of items (and judges; [Anand2026]_ sections 3
and 5); the battle bootstrap draws the (pair, score) cells multinomially with
probabilities their shares ([Chiang2024]_), soft scores pooled per pair into
``SOFT_BINS`` equal-width bins. A resample without finite ratings (its
comparison graph not strongly connected) is left out and counted.

References
----------
.. [Anand2026] A. Anand, "Ask Which, Not How Good: Sizing Benchmarks Scored by an
   LLM", 2026 (``papers/ask-which-not-how-good.txt``).
.. [Chiang2024] W.-L. Chiang et al., "Chatbot Arena: An Open Platform for
   Evaluating LLMs by Human Preference", 2024 (battle bootstrap).
"""

from __future__ import annotations

import numpy as np

from jurymeter.stats.pairwise.bt_model import (
    MAX_ITER,
    MAX_STEP,
    TOLERANCE,
    ConvergenceError,
    _Coded,
    _graph_problem,
)

# Chord steps (one shared information matrix) before Newton takes over the batched refits.
_CHORD_ITER = 40
# The battle bootstrap resamples (pair, score) cells; soft scores (neither 0, 1/2 nor 1) are
# pooled per pair into this many equal-width bins, each scored at its members' mean.
SOFT_BINS = 10


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


def _uniform_multinomial(rng: np.random.Generator, n: int, size: int) -> np.ndarray:
    """``size`` draws of Multinomial(n, (1/n, ..., 1/n)): counts of n uniform picks."""
    picks = rng.integers(0, n, size=(size, n)) + (np.arange(size) * n)[:, None]
    counts: np.ndarray = np.bincount(picks.ravel(), minlength=size * n).reshape(size, n)
    return counts


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


def _prompt_sums(
    c: _Coded,
    pair_of: np.ndarray,
    k: int,
    n_boot: int,
    resample_judges: bool,
    item_rng: np.random.Generator,
    judge_rng: np.random.Generator,
) -> tuple[np.ndarray, np.ndarray]:
    r"""The prompt bootstrap's resampled sums of scores and counts on the ``k`` observed pairs.

    Per-item (and per item x judge) sums ``X[i, (j), k]`` are built once; resample
    ``b`` draws multinomial item weights :math:`m_{bi}` (and judge weights
    :math:`g_{bj}`) and its sums are :math:`W_{bk} = \sum_i m_{bi} X_{ik}` (or
    :math:`\sum_{ij} m_{bi} g_{bj} X_{ijk}`): one matrix product for all resamples.
    """
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
    return bw, bn
