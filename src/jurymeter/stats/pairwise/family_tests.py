r"""Family-conditioned preference, the detection: permutation and label-placebo tests, composition sensitivity and the ``judge_logprob`` association ([Awuni2026]_ sections 4.2, 5 and 6).

The prompt-level permutation permutes the judges' family labels among the judges
of every (item, pair), a judge's generations and replicates moving together
([Awuni2026]_ sections 4.2, 9), and recomputes FPS and the naive and corrected
lifts from the units of :mod:`jurymeter.stats.pairwise.family_support`; the
label placebo reassigns the family labels to the judges (every distinct
assignment but the observed one when there are few; section 9). Both p-values
are one-sided with the +1 correction, :math:`(1 + \#\{T^* \ge T\}) / (n + 1)`,
:math:`T^*` counted as large as :math:`T` within ``TIE_TOL``. Composition
sensitivity (section 10) decides every (item, pair) by panels of different
family make-up; the ``judge_logprob`` association (section 7) is a Pearson
correlation with the support of the response shown first.

References
----------
.. [Awuni2026] D. A. Awuni et al., "Who Judges Matters: Measuring
   Family-Conditioned Preference in LLM-as-Judge Panels", 2026
   (``papers/who-judges-matters.txt``).
"""

from __future__ import annotations

import itertools
import math
from collections import Counter
from collections.abc import Iterator, Mapping
from dataclasses import dataclass

import numpy as np
import polars as pl

from jurymeter.errors import ConfigError
from jurymeter.stats.pairwise.family_support import (
    _cells,
    _Stats,
    _stats,
    _Units,
)

# A statistic of a permuted or relabelled panel counts as "at least as large" as the observed
# one within this absolute tolerance, so that draws reproducing the observed assignment tie
# with it despite a different summation order (supports are means of values in [0, 1]).
TIE_TOL = 1e-12
# A panel's mean support of x within this distance of 1/2 is a tie (a mean of halves and
# wholes over unequal family weights can land a rounding error away from 1/2).
OUTCOME_TOL = 1e-12
# Permutations are drawn in chunks of at most this many (permutation x unit) gathers.
_GATHER = 2_000_000
# Blocks of at most this many units draw their permutation by number from a table of all k!.
_TABLE_K = 6


@dataclass(frozen=True, slots=True)
class LogprobAssociation:
    r"""Association of ``judge_logprob`` with the support of the candidate it is read for.

    Attributes
    ----------
    n_games : int
        Games with a ``judge_logprob`` and with both families known.
    r : float or None
        Pearson correlation of ``judge_logprob`` with ``score_a`` (the support
        of ``system_a``); ``None`` with ``reason`` when either is constant or
        fewer than 3 games carry it.
    mean_same_family, mean_cross_family : float or None
        Mean ``judge_logprob`` where the judge's family is (is not) the family
        of ``system_a`` ([Awuni2026]_ section 7: -0.69 vs -1.38).
    reason : str or None
        Why ``r`` is ``None``.
    """

    n_games: int
    r: float | None
    mean_same_family: float | None
    mean_cross_family: float | None
    reason: str | None


def _p_greater(null: np.ndarray, observed: float) -> float:
    return float((1 + np.sum(null >= observed - TIE_TOL)) / (null.size + 1))


def _permutation_null(
    u: _Units, dj: np.ndarray, dc: np.ndarray, n_perm: int, rng: np.random.Generator
) -> _Stats:
    """Statistics of ``n_perm`` within-(item, pair) permutations of the judges' labels.

    Permuting the labels among a block's units is the same, in distribution, as
    keeping each unit's label in its slot and handing the slots a uniformly
    permuted block of support sums. Blocks are grouped by their size and slot
    labels; a group's permuted support sums are summed over its blocks per
    (family of x, family of y) before they reach the cells, so a permutation
    costs one gather per unit and no per-unit scatter. Counts move only where a
    block's units carry unequal outcome counts.
    """
    # Long (88 lines) only by its docstring: the code below is 78 lines, one chunked draw-and-sum loop.
    n_l, n_c = len(u.judge_families), len(u.candidate_families)
    starts = np.flatnonzero(np.r_[True, u.block[1:] != u.block[:-1]])
    sizes = np.diff(np.r_[starts, u.block.size])
    pair_fam = u.fx[starts] * n_c + u.fy[starts]
    k_max = int(sizes.max())
    padded = np.full((starts.size, k_max), -1, dtype=np.int64)
    slot = np.arange(u.block.size) - np.repeat(starts, sizes)
    padded[np.repeat(np.arange(starts.size), sizes), slot] = u.jf
    _, group = np.unique(np.column_stack([sizes, pair_fam, padded]), axis=0, return_inverse=True)
    group = group.ravel()
    s_base = np.zeros((n_l, n_c))
    c_base = np.zeros((n_l, n_c))
    plans = []
    for g in range(int(group.max()) + 1):
        blocks = np.flatnonzero(group == g)
        k = int(sizes[blocks[0]])
        rows = starts[blocks][:, None] + np.arange(k)[None, :]
        labels = u.jf[rows[0]]
        fx, fy = int(u.fx[rows[0, 0]]), int(u.fy[rows[0, 0]])
        sx, n = u.sx[rows], u.n[rows]
        n_varies = bool((n != n[:, :1]).any())
        if k == 1 or (np.all(labels == labels[0])):
            # no permutation changes which label a support sum reaches
            np.add.at(s_base, (labels, fx), sx.sum(axis=0))
            np.add.at(s_base, (labels, fy), (n - sx).sum(axis=0))
            np.add.at(c_base, (labels, fx), n.sum(axis=0))
            np.add.at(c_base, (labels, fy), n.sum(axis=0))
            continue
        if not n_varies:
            # every slot receives the block's common count whatever the permutation
            np.add.at(c_base, (labels, fx), n.sum(axis=0))
            np.add.at(c_base, (labels, fy), n.sum(axis=0))
        plans.append((k, labels, fx, fy, sx, n, n_varies))
    null_s = np.broadcast_to(s_base, (n_perm, n_l, n_c)).copy()
    null_c = np.broadcast_to(c_base, (n_perm, n_l, n_c)).copy()
    for k, labels, fx, fy, sx, n, n_varies in plans:
        n_blocks = sx.shape[0]
        onehot = (labels[:, None] == np.arange(n_l)[None, :]).astype(np.float64)
        total_n = n.sum(axis=0) @ onehot  # (n_l,): counts per label when n does not vary
        step = max(1, _GATHER // (n_blocks * k))
        if k <= _TABLE_K:
            # The permutations of the slots, by number: permutation i hands slot q the
            # support of unit table[i, q], so unit p's support reaches label labels[inv[i, p]].
            table = np.asarray(list(itertools.permutations(range(k))), dtype=np.int64)
            inv = np.argsort(table, axis=1)
            reach = (labels[inv][:, :, None] == np.arange(n_l)[None, None, :]).astype(np.float64)
            reach = reach.reshape(-1, n_l)  # (k! * k, n_l)
            n_tab = table.shape[0]
        for lo in range(0, n_perm, step):
            m = min(step, n_perm - lo)
            got_n = total_n[None, :]
            if k <= _TABLE_K:
                # per permutation and table row, the summed supports of the blocks drawing it
                key = (rng.integers(0, n_tab, size=(m, n_blocks))
                       + (np.arange(m) * n_tab)[:, None]).ravel()
                size = m * n_tab
                per_row = np.stack([np.bincount(key, np.broadcast_to(sx[:, p], (m, n_blocks)).ravel(), size)
                                    for p in range(k)], axis=1)  # (m * k!, k)
                got_sx = per_row.reshape(m, n_tab * k) @ reach
                if n_varies:
                    per_row = np.stack([np.bincount(key, np.broadcast_to(n[:, p], (m, n_blocks)).ravel(), size)
                                        for p in range(k)], axis=1)
                    got_n = per_row.reshape(m, n_tab * k) @ reach
            else:
                sigma = np.argsort(rng.random((m, n_blocks, k)), axis=2)
                where = sigma + (np.arange(n_blocks) * k)[None, :, None]
                got_sx = sx.ravel()[where].sum(axis=1) @ onehot  # (m, n_l): support for x per label
                if n_varies:
                    got_n = n.ravel()[where].sum(axis=1) @ onehot
            null_s[lo:lo + m, :, fx] += got_sx
            null_s[lo:lo + m, :, fy] += got_n - got_sx
            if n_varies:
                null_c[lo:lo + m, :, fx] += got_n
                null_c[lo:lo + m, :, fy] += got_n
    return _stats(null_s, null_c, dj, dc)


def _multiset_permutations(labels: list[int]) -> Iterator[tuple[int, ...]]:
    counts = Counter(labels)
    keys = sorted(counts)
    current: list[int] = []

    def rec() -> Iterator[tuple[int, ...]]:
        if len(current) == len(labels):
            yield tuple(current)
            return
        for k in keys:
            if counts[k]:
                counts[k] -= 1
                current.append(k)
                yield from rec()
                current.pop()
                counts[k] += 1

    return rec()


def _placebo(
    u: _Units,
    dj: np.ndarray,
    dc: np.ndarray,
    observed: float,
    n_placebo: int,
    rng: np.random.Generator,
) -> tuple[float | None, int, bool, str | None]:
    labels = u.judge_family_of.tolist()
    n_distinct = math.factorial(len(labels))
    for k in Counter(labels).values():
        n_distinct //= math.factorial(k)
    if n_distinct <= 1:
        return None, 0, True, "every judge family has the same judges under any relabelling"
    if n_placebo == 0:
        return None, 0, False, "n_placebo is 0"
    enumerated = n_distinct - 1 <= n_placebo
    if enumerated:
        obs = tuple(labels)
        assign = np.asarray([a for a in _multiset_permutations(labels) if a != obs], dtype=np.int64)
    else:
        assign = rng.permuted(np.tile(np.asarray(labels, dtype=np.int64), (n_placebo, 1)), axis=1)
    # per-judge sums, then each relabelling adds its judges into their new families
    n_j, n_judges = len(u.judge_families), len(labels)
    s_j, c_j = _cells(u, u.judge[None, :], n_judges)
    onehot = (assign[:, :, None] == np.arange(n_j)[None, None, :]).astype(np.float64)
    s = np.einsum("mkj,kc->mjc", onehot, s_j[0])
    c = np.einsum("mkj,kc->mjc", onehot, c_j[0])
    null = _stats(s, c, dj, dc).fps
    return _p_greater(null, observed), int(assign.shape[0]), enumerated, None


def _sign(value: np.ndarray) -> np.ndarray:
    d = value - 0.5
    out: np.ndarray = np.where(d > OUTCOME_TOL, 1, np.where(d < -OUTCOME_TOL, -1, 0))
    return out


def _composition(u: _Units) -> pl.DataFrame:
    n_l = len(u.judge_families)
    blk = u.block - 1
    n_b = int(blk.max()) + 1 if blk.size else 0
    m = u.sx / u.n  # a judge's mean support of x in its (item, pair)
    full = _sign(np.bincount(blk, m, n_b) / np.bincount(blk, minlength=n_b))
    cell = blk * n_l + u.jf
    count = np.bincount(cell, minlength=n_b * n_l).reshape(n_b, n_l)
    present = count > 0
    fam_mean = np.bincount(cell, m, n_b * n_l).reshape(n_b, n_l) / np.where(present, count, 1)
    fam_mean = np.where(present, fam_mean, 0.0)

    def over(mask: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Blocks with a family in ``mask``, and the decision of their families' mean there."""
        use = present & mask
        k = use.sum(axis=1)
        has = np.flatnonzero(k > 0)
        return has, _sign((fam_mean * use).sum(axis=1)[has] / k[has])

    all_blocks, balanced = over(np.ones((1, n_l), dtype=bool))
    balanced_full = np.zeros(n_b, dtype=np.int64)
    balanced_full[all_blocks] = balanced
    panels: list[tuple[str, np.ndarray, np.ndarray]] = [
        ("full", np.arange(n_b), full),
        ("balanced", all_blocks, balanced),
    ]
    for f, name in enumerate(u.judge_families):
        single = np.flatnonzero(present[:, f])
        panels.append((f"single:{name}", single, _sign(fam_mean[single, f])))
        others = np.ones((1, n_l), dtype=bool)
        others[0, f] = False
        panels.append((f"without:{name}", *over(others)))
    # each judge family sharing a candidate's family, alone
    first = np.zeros(n_b, dtype=np.int64)
    first[blk[::-1]] = np.arange(blk.size)[::-1]
    cand = np.asarray(u.candidate_families, dtype=object)
    bx, by = cand[u.fx[first]], cand[u.fy[first]]
    jnames = np.asarray(u.judge_families, dtype=object)
    same = present & ((jnames[None, :] == bx[:, None]) | (jnames[None, :] == by[:, None]))
    sb, sf = np.nonzero(same)
    panels.append(("same_family_judge", sb, _sign(fam_mean[sb, sf])))
    rows = []
    for ref_name, ref in (("full", full), ("balanced", balanced_full)):
        for name, where, out in panels:
            if name == ref_name:
                continue
            n = int(where.size)
            changed = int((out != ref[where]).sum())
            rows.append(
                {
                    "reference": ref_name,
                    "panel": name,
                    "n_compared": n,
                    "n_changed": changed,
                    "share_changed": changed / n if n else None,
                }
            )
    return pl.DataFrame(
        rows,
        schema={
            "reference": pl.String,
            "panel": pl.String,
            "n_compared": pl.Int64,
            "n_changed": pl.Int64,
            "share_changed": pl.Float64,
        },
    )


def _family_abilities(
    abilities: Mapping[str, float], system_family: Mapping[str, str]
) -> dict[str, float]:
    keys = set(abilities)
    if keys <= set(system_family):
        per: dict[str, list[float]] = {}
        for sid, value in abilities.items():
            fam = system_family[sid]
            if fam:
                per.setdefault(fam, []).append(float(value))
        return {f: float(np.mean(v)) for f, v in per.items()}
    if keys <= set(system_family.values()):
        return {f: float(v) for f, v in abilities.items()}
    unknown = sorted(keys - set(system_family) - set(system_family.values()))[:5]
    msg = (
        "abilities must be keyed by system_id (every key in system_family) or by family (every "
        f"key a family of system_family); got unknown keys {unknown!r}"
    )
    raise ConfigError(msg)


def _pearson(x: np.ndarray, y: np.ndarray) -> float | None:
    if x.size < 3 or np.ptp(x) == 0 or np.ptp(y) == 0:
        return None
    return float(np.corrcoef(x, y)[0, 1])


def _logprob(
    games: pl.DataFrame, judge_family: Mapping[str, str], system_family: Mapping[str, str]
) -> tuple[LogprobAssociation | None, str | None]:
    for col in ("system_a", "judge_id", "score_a", "judge_logprob"):
        if col not in games.columns:
            return None, f"games has no {col!r} column"
    g = games.filter(pl.col("judge_logprob").is_not_null() & pl.col("judge_logprob").is_finite())
    g = g.with_columns(
        pl.col("judge_id")
        .replace_strict(dict(judge_family), default=None, return_dtype=pl.String)
        .alias("fj"),
        pl.col("system_a")
        .replace_strict(dict(system_family), default=None, return_dtype=pl.String)
        .alias("fa"),
    ).filter(pl.col("fj").is_not_null() & pl.col("fa").is_not_null())
    if g.height == 0:
        return None, "no game with a family-tagged judge and system_a carries judge_logprob"
    lp = g["judge_logprob"].to_numpy().astype(np.float64)
    sa = g["score_a"].to_numpy().astype(np.float64)
    same = (g["fj"] == g["fa"]).to_numpy()
    r = _pearson(lp, sa)
    reason = None if r is not None else "fewer than 3 games, or judge_logprob or score_a constant"
    return (
        LogprobAssociation(
            n_games=int(g.height),
            r=r,
            mean_same_family=float(lp[same].mean()) if same.any() else None,
            mean_cross_family=float(lp[~same].mean()) if (~same).any() else None,
            reason=reason,
        ),
        None,
    )
