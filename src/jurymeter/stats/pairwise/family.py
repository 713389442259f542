r"""Family-conditioned preference of a judge panel: the support matrix, FPS and the per-family lift.

A reconciled outcome (:func:`jurymeter.stats.pairwise.games.reconcile`) gives
its two candidates a *support*: ``score_x`` to ``system_x`` and
``1 - score_x`` to ``system_y``. With judge family :math:`h` and candidate
family :math:`f` ([Awuni2026]_ sections 4, 4.1 and 5),

.. math::

    S_{hf} = \operatorname{mean}\{\text{support of } c : f(c) = f,\ f(\text{judge}) = h\},

    \mathrm{FPS} = \operatorname{mean}_f S_{ff} - \operatorname{mean}_{h \ne f} S_{hf},

    \text{naive}_f = S_{ff} - \operatorname{mean}_{g \ne f} S_{fg} \quad\text{(row-wise)},

    \text{corrected}_f = S_{ff} - \operatorname{mean}_{h \ne f} S_{hf} \quad\text{(column-wise)}.

The row-wise contrast mixes the strength of family :math:`f`'s candidates with
the judge x candidate interaction (a strong family looks biased, a weak one
hides its lift; [Awuni2026]_ section 4.1 finds r = 0.95 with Bradley-Terry
ability); the column-wise one holds the candidate family fixed and compares
judges, so candidate quality cancels. Outcomes between two candidates of one
family carry no contrast between families and are left out (counted). In a
balanced design every row of :math:`S` sums to :math:`K/2` (2.00 with four
families, [Awuni2026]_ section 4).

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

from jurymeter.errors import ConfigError, DesignError, NotApplicableError
from jurymeter.stats.pairwise.games import key_codes

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
_NEEDED = ("item_id", "system_x", "system_y", "judge_id", "score_x")


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


@dataclass(frozen=True, slots=True)
class FamilyPreference:
    r"""Family-conditioned preference of a panel ([Awuni2026]_ sections 4-10).

    Attributes
    ----------
    support : polars.DataFrame
        ``judge_family, candidate_family, support, n`` (``n`` support
        observations; ``support`` null where ``n`` is 0), every judge family x
        candidate family.
    families : tuple of str
        The families on the diagonal: judge and candidate families at once.
    mean_diagonal, mean_off_diagonal, fps : float
        :math:`\operatorname{mean}_f S_{ff}`, the mean of :math:`S_{hf}` over
        judge families :math:`h \ne f` and diagonal families :math:`f`, and
        their difference.
    p_permutation : float
        One-sided (greater) prompt-level permutation p-value of ``fps``,
        :math:`(1 + \#\{T^* \ge T\}) / (n_{perm} + 1)`.
    fps_null_mean : float
        Mean FPS over the permutations.
    n_perm : int
        Permutations drawn.
    per_family : polars.DataFrame
        Per diagonal family: ``family, same_family_support`` (:math:`S_{ff}`),
        ``other_judges_support`` (mean :math:`S_{hf}`, :math:`h \ne f`),
        ``other_candidates_support`` (mean :math:`S_{fg}`, :math:`g \ne f`),
        ``naive, corrected`` and their one-sided permutation p-values and
        permutation-null means (``naive_p, corrected_p, naive_null_mean,
        corrected_null_mean``), and ``ability`` (the caller's, null when not
        given). Nulls where the contrast has no other cell.
    p_placebo : float or None
        One-sided family-label placebo p-value of ``fps``; ``None`` with
        ``placebo_reason`` when no other labelling exists or ``n_placebo`` is 0.
    n_placebo : int
        Relabellings used (all distinct ones but the observed when
        ``placebo_enumerated``).
    placebo_enumerated : bool
        Whether every distinct assignment of the judges' family labels was used.
    placebo_reason : str or None
    leave_one_out : polars.DataFrame
        ``left_out`` (``"judge_family"`` or ``"candidate_family"``), ``family``,
        ``fps`` (null where not estimable) and ``reason``.
    naive_ability_r, corrected_ability_r : float or None
        Pearson correlation across diagonal families of the naive (corrected)
        statistic with the family's mean ability ([Awuni2026]_ 4.1: 0.95 and
        -0.24); ``None`` with ``ability_reason``.
    ability_reason : str or None
    composition : polars.DataFrame
        ``reference, panel, n_compared, n_changed, share_changed``: the share of
        (item, pair) outcomes a panel decides differently from a reference
        (see Notes of :func:`family_preference`).
    logprob : LogprobAssociation or None
        ``None`` with ``logprob_reason`` when no game carries ``judge_logprob``.
    logprob_reason : str or None
    n_outcomes : int
        Outcomes used (both families known, candidates of different families).
    n_same_family_outcomes : int
        Outcomes left out because both candidates share a family.
    n_outcomes_without_family : int
        Outcomes left out because a system or the judge has no family.
    n_systems_without_family, n_judges_without_family : int
        Systems and judges of the outcomes without a family.
    """

    support: pl.DataFrame
    families: tuple[str, ...]
    mean_diagonal: float
    mean_off_diagonal: float
    fps: float
    p_permutation: float
    fps_null_mean: float
    n_perm: int
    per_family: pl.DataFrame
    p_placebo: float | None
    n_placebo: int
    placebo_enumerated: bool
    placebo_reason: str | None
    leave_one_out: pl.DataFrame
    naive_ability_r: float | None
    corrected_ability_r: float | None
    ability_reason: str | None
    composition: pl.DataFrame
    logprob: LogprobAssociation | None
    logprob_reason: str | None
    n_outcomes: int
    n_same_family_outcomes: int
    n_outcomes_without_family: int
    n_systems_without_family: int
    n_judges_without_family: int


# --------------------------------------------------------------------------
# the design: units (item, pair, judge) and their codes
# --------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Units:
    """One unit per (item, pair, judge): its support sum for x and its outcome count."""

    block: np.ndarray  # (U,) int, (item, pair) code, sorted
    judge: np.ndarray  # (U,) int, judge code
    jf: np.ndarray  # (U,) int, judge-family code
    fx: np.ndarray  # (U,) int, candidate-family code of x
    fy: np.ndarray  # (U,) int, candidate-family code of y
    sx: np.ndarray  # (U,) float, sum of score_x
    n: np.ndarray  # (U,) float, outcomes
    judge_families: tuple[str, ...]
    candidate_families: tuple[str, ...]
    judge_family_of: np.ndarray  # (n_judges,) int


def _units(tagged: pl.DataFrame) -> _Units:
    jfam = tuple(sorted(set(tagged["fam_j"].to_list())))
    cfam = tuple(sorted(set(tagged["fam_x"].to_list()) | set(tagged["fam_y"].to_list())))
    cache: dict[str, tuple[np.ndarray, int]] = {}
    block, _ = key_codes(tagged, ["item_id", "system_x", "system_y"], cache)
    unit, n_units = key_codes(tagged, ["item_id", "system_x", "system_y", "judge_id"], cache)
    judge_codes, n_judge_codes = cache["judge_id"]
    judge = _dense_codes(judge_codes, n_judge_codes)
    first = np.zeros(n_units, dtype=np.int64)
    first[unit[::-1]] = np.arange(tagged.height)[::-1]  # each unit's first row

    def fam(column: str, levels: tuple[str, ...]) -> np.ndarray:
        codes: np.ndarray = tagged[column].cast(pl.Enum(list(levels))).to_physical().cast(pl.Int64).to_numpy()
        return codes[first]

    jf = fam("fam_j", jfam)
    u_judge = judge[first]
    n_j = int(u_judge.max()) + 1 if n_units else 0
    judge_family_of = np.zeros(n_j, dtype=np.int64)
    judge_family_of[u_judge] = jf
    return _Units(
        block=block[first] + 1,
        judge=u_judge,
        jf=jf,
        fx=fam("fam_x", cfam),
        fy=fam("fam_y", cfam),
        sx=np.bincount(unit, tagged["score_x"].to_numpy(), n_units),
        n=np.bincount(unit, minlength=n_units).astype(np.float64),
        judge_families=jfam,
        candidate_families=cfam,
        judge_family_of=judge_family_of,
    )


def _dense_codes(codes: np.ndarray, bound: int) -> np.ndarray:
    seen = np.zeros(bound, dtype=bool)
    seen[codes] = True
    rank = np.zeros(bound, dtype=np.int64)
    levels = np.flatnonzero(seen)
    rank[levels] = np.arange(levels.size)
    out: np.ndarray = rank[codes]
    return out


def _cells(
    u: _Units, labels: np.ndarray, n_labels: int | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """Support sums and counts (m, L, C) of the units under m labellings ``labels`` (m, U).

    A unit labelled ``l`` adds its ``score_x`` sum to cell (l, family of x) and the
    rest of its outcomes' support to (l, family of y); both cells count its outcomes.
    """
    m = labels.shape[0]
    n_l = len(u.judge_families) if n_labels is None else n_labels
    n_c = len(u.candidate_families)
    size = m * n_l * n_c
    base = (np.arange(m)[:, None] * n_l + labels) * n_c
    ix, iy = (base + u.fx[None, :]).ravel(), (base + u.fy[None, :]).ravel()
    sx, sy, n = np.tile(u.sx, m), np.tile(u.n - u.sx, m), np.tile(u.n, m)
    s = np.bincount(ix, sx, size) + np.bincount(iy, sy, size)
    c = np.bincount(ix, n, size) + np.bincount(iy, n, size)
    return s.reshape(m, n_l, n_c), c.reshape(m, n_l, n_c)


@dataclass(frozen=True, slots=True)
class _Stats:
    mean_diagonal: np.ndarray  # (m,)
    mean_off_diagonal: np.ndarray  # (m,)
    fps: np.ndarray  # (m,)
    diagonal: np.ndarray  # (m, F)
    other_judges: np.ndarray  # (m, F)
    other_candidates: np.ndarray  # (m, F)
    naive: np.ndarray  # (m, F)
    corrected: np.ndarray  # (m, F)


def _stats(s: np.ndarray, c: np.ndarray, dj: np.ndarray, dc: np.ndarray) -> _Stats:
    """FPS, naive and corrected statistics of m support matrices; NaN where undefined."""
    with np.errstate(invalid="ignore", divide="ignore"):
        valid = c > 0
        sup = np.where(valid, s / np.where(valid, c, 1.0), 0.0)
        d = sup[:, dj, dc]
        dv = valid[:, dj, dc]
        col_sum = sup[:, :, dc].sum(axis=1) - d
        col_cnt = valid[:, :, dc].sum(axis=1) - dv
        row_sum = sup[:, dj, :].sum(axis=2) - d
        row_cnt = valid[:, dj, :].sum(axis=2) - dv
        diag = np.where(dv, d, np.nan)
        other_j = col_sum / col_cnt
        other_c = row_sum / row_cnt
        mean_d = diag.mean(axis=1)
        mean_o = col_sum.sum(axis=1) / col_cnt.sum(axis=1)
    return _Stats(
        mean_d, mean_o, mean_d - mean_o, diag, other_j, other_c, diag - other_c, diag - other_j
    )


def _diagonal(u: _Units, c_obs: np.ndarray) -> tuple[np.ndarray, np.ndarray, tuple[str, ...]]:
    shared = [
        f
        for f in u.judge_families
        if f in u.candidate_families
        and c_obs[u.judge_families.index(f), u.candidate_families.index(f)] > 0
    ]
    dj = np.asarray([u.judge_families.index(f) for f in shared], dtype=np.int64)
    dc = np.asarray([u.candidate_families.index(f) for f in shared], dtype=np.int64)
    return dj, dc, tuple(shared)


def _check_estimable(u: _Units, c_obs: np.ndarray, shared: tuple[str, ...], what: str) -> None:
    if len(u.judge_families) < 2 or len(u.candidate_families) < 2:
        msg = (
            f"family preference is not estimable {what}: it needs at least 2 judge families and "
            f"2 candidate families; got judge families {list(u.judge_families)!r} and candidate "
            f"families {list(u.candidate_families)!r}"
        )
        raise NotApplicableError(msg)
    if not shared:
        msg = (
            f"family preference is not estimable {what}: no family is both a judge family "
            f"{list(u.judge_families)!r} and a candidate family {list(u.candidate_families)!r} "
            "with judges of that family judging its candidates"
        )
        raise NotApplicableError(msg)
    _, dc, _ = _diagonal(u, c_obs)
    off = (c_obs[:, dc] > 0).sum() - len(dc)
    if off < 1:
        msg = (
            f"family preference is not estimable {what}: no judge of another family judged the "
            f"candidates of the diagonal families {list(shared)!r}"
        )
        raise NotApplicableError(msg)


def _observed(
    u: _Units, what: str
) -> tuple[_Stats, np.ndarray, np.ndarray, np.ndarray, np.ndarray, tuple[str, ...]]:
    s_obs, c_obs = _cells(u, u.jf[None, :])
    dj, dc, shared = _diagonal(u, c_obs[0])
    _check_estimable(u, c_obs[0], shared, what)
    return _stats(s_obs, c_obs, dj, dc), s_obs[0], c_obs[0], dj, dc, shared


# --------------------------------------------------------------------------
# tests: prompt-level permutation and family-label placebo
# --------------------------------------------------------------------------


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


# --------------------------------------------------------------------------
# composition sensitivity
# --------------------------------------------------------------------------


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


# --------------------------------------------------------------------------
# abilities and judge_logprob
# --------------------------------------------------------------------------


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


# --------------------------------------------------------------------------
# the analysis
# --------------------------------------------------------------------------


def _check_int(name: str, value: object, low: int) -> None:
    if not isinstance(value, int | np.integer) or isinstance(value, bool) or value < low:
        msg = f"{name} must be an int >= {low}; got {value!r}"
        raise ConfigError(msg)


def _check_mapping(name: str, value: object) -> None:
    if not isinstance(value, Mapping) or not all(isinstance(k, str) for k in value):
        msg = f"{name} must be a mapping of str ids to family names; got {type(value).__name__}"
        raise ConfigError(msg)


def _subset(u: _Units, keep: np.ndarray) -> _Units:
    """The units ``keep`` selects, their family codes renumbered over the families left."""
    jf, fx, fy = u.jf[keep], u.fx[keep], u.fy[keep]
    j_left = np.unique(jf)
    c_left = np.unique(np.concatenate([fx, fy]))
    j_new = np.full(len(u.judge_families), -1, dtype=np.int64)
    j_new[j_left] = np.arange(j_left.size)
    c_new = np.full(len(u.candidate_families), -1, dtype=np.int64)
    c_new[c_left] = np.arange(c_left.size)
    return _Units(
        block=u.block[keep], judge=u.judge[keep], jf=j_new[jf], fx=c_new[fx], fy=c_new[fy],
        sx=u.sx[keep], n=u.n[keep],
        judge_families=tuple(u.judge_families[k] for k in j_left),
        candidate_families=tuple(u.candidate_families[k] for k in c_left),
        judge_family_of=u.judge_family_of,  # not read by _observed
    )


def _loo_fps(u: _Units, column: str, family: str) -> tuple[float | None, str | None]:
    if column == "fam_j":
        keep = u.jf != u.judge_families.index(family)
    else:  # a candidate family: drop every outcome with a candidate of it
        code = u.candidate_families.index(family)
        keep = (u.fx != code) & (u.fy != code)
    if not keep.any():
        return None, f"no outcome is left without family {family!r}"
    try:
        st = _observed(_subset(u, keep), f"without family {family!r}")[0]
    except NotApplicableError as err:
        return None, str(err)
    return float(st.fps[0]), None


def family_preference(
    outcomes: pl.DataFrame,
    *,
    judge_family: Mapping[str, str],
    system_family: Mapping[str, str],
    abilities: Mapping[str, float] | None = None,
    n_perm: int = 1000,
    n_placebo: int = 1000,
    seed: int = 0,
    games: pl.DataFrame | None = None,
) -> FamilyPreference:
    r"""Support matrix, FPS, naive and corrected per-family lifts, their tests and sensitivities.

    Parameters
    ----------
    outcomes : polars.DataFrame
        Reconciled outcomes of :func:`~jurymeter.stats.pairwise.games.reconcile`
        (``item_id, system_x, system_y, judge_id, score_x`` are used).
    judge_family : mapping of str to str
        ``judge_id -> family``; judges absent (or mapped to an empty or null
        family) are left out and counted.
    system_family : mapping of str to str
        ``system_id -> family``; likewise.
    abilities : mapping of str to float or None, default None
        Bradley-Terry abilities keyed by ``system_id`` (averaged per family over
        the family's systems given) or by family; ``None`` leaves the ability
        correlations ``None``.
    n_perm : int, default 1000
        Prompt-level permutations (at least 1).
    n_placebo : int, default 1000
        Family-label relabellings (0 skips the placebo).
    seed : int, default 0
        Seed of ``numpy.random.default_rng`` for both tests.
    games : polars.DataFrame or None, default None
        Games of :func:`~jurymeter.stats.pairwise.games.games`, read only for
        ``judge_logprob``.

    Returns
    -------
    FamilyPreference

    Raises
    ------
    ConfigError
        An option is out of range, or ``abilities`` names neither systems nor families.
    DesignError
        ``outcomes`` lacks a needed column.
    NotApplicableError
        Fewer than two judge families or two candidate families remain, or no
        family is both a judge family and a candidate family.

    Notes
    -----
    Support matrix, FPS, naive and corrected statistics: module docstring
    ([Awuni2026]_ sections 4, 4.1, 5). Off-diagonal cells enter FPS only in the
    columns of the diagonal families (a candidate family without judges of its
    own has no diagonal to compare with); with a square design this is the
    paper's mean off-diagonal support.

    *Prompt-level permutation* ([Awuni2026]_ sections 4.2, 9): within every
    (item, pair) the judges' labels are permuted among the judges who judged it,
    all generations and replicates of a judge moving together; under no family
    preference the judges are exchangeable. *Placebo* ([Awuni2026]_ section 9):
    the family labels are reassigned to the judges at random, every distinct
    assignment but the observed one when there are at most ``n_placebo``. Both
    p-values are one-sided (larger than observed) with the +1 correction,
    :math:`(1 + \#\{T^* \ge T\}) / (n + 1)`.

    *Leave one out* ([Awuni2026]_ section 9): FPS without the judges of one
    family, and without every outcome involving a candidate of one family.

    *Composition* ([Awuni2026]_ section 10): for each (item, pair) a panel's
    outcome is ``x``, ``y`` or tie as its mean support of ``x`` is above, below
    or at 1/2, where a judge's support is its mean ``score_x`` over generations
    and replicates. Panels: ``full`` (every judge weighted equally),
    ``balanced`` (every judge family weighted equally, its judges equally
    within it), ``single:f`` (the judges of ``f``), ``without:f`` (balanced
    over the other families) and ``same_family_judge`` (for each (item, pair),
    each judge family that shares a candidate's family, alone; the paper's
    18.5%). Each is compared with the ``full`` and the ``balanced`` reference
    over the (item, pair)s both decide; ``share_changed`` is the share of them
    whose outcome differs.

    *judge_logprob*: one value per game; it is read as the judge-side
    likelihood of the response shown first, so its association with support
    is the Pearson correlation with ``score_a`` over the games that carry it,
    beside its mean where the judge shares ``system_a``'s family and where not
    ([Awuni2026]_ section 7). A likelihood advantage (A minus B) stored there
    reads the same way.

    Examples
    --------
    >>> rows = [("i1", "a", "b", "ja", 1.0), ("i1", "a", "b", "jb", 0.5)]
    >>> out = pl.DataFrame(rows, schema=["item_id", "system_x", "system_y", "judge_id",
    ...                                  "score_x"], orient="row")
    >>> fp = family_preference(out, judge_family={"ja": "A", "jb": "B"},
    ...                        system_family={"a": "A", "b": "B"}, n_perm=9, n_placebo=9)
    >>> fp.fps, fp.mean_diagonal, fp.mean_off_diagonal
    (0.5, 0.75, 0.25)
    """
    missing = [c for c in _NEEDED if c not in outcomes.columns]
    if missing:
        msg = (
            f"outcomes must have the columns {list(_NEEDED)!r} of reconcile(); missing {missing!r}"
        )
        raise DesignError(msg)
    _check_mapping("judge_family", judge_family)
    _check_mapping("system_family", system_family)
    _check_int("n_perm", n_perm, 1)
    _check_int("n_placebo", n_placebo, 0)
    _check_int("seed", seed, 0)
    if games is not None and not isinstance(games, pl.DataFrame):
        msg = f"games must be a polars DataFrame of games() or None; got {type(games).__name__}"
        raise ConfigError(msg)

    jmap = {k: v for k, v in judge_family.items() if v}
    smap = {k: v for k, v in system_family.items() if v}
    frame = outcomes.select(
        pl.col("item_id").cast(pl.String),
        pl.col("system_x").cast(pl.String),
        pl.col("system_y").cast(pl.String),
        pl.col("judge_id").cast(pl.String),
        pl.col("score_x").cast(pl.Float64),
    ).filter(pl.col("score_x").is_not_null())
    systems = set(frame["system_x"].to_list()) | set(frame["system_y"].to_list())
    judges = set(frame["judge_id"].to_list())
    tagged = frame.with_columns(
        pl.col("judge_id")
        .replace_strict(jmap, default=None, return_dtype=pl.String)
        .alias("fam_j"),
        pl.col("system_x")
        .replace_strict(smap, default=None, return_dtype=pl.String)
        .alias("fam_x"),
        pl.col("system_y")
        .replace_strict(smap, default=None, return_dtype=pl.String)
        .alias("fam_y"),
    )
    known = tagged.filter(pl.all_horizontal(pl.col("fam_j", "fam_x", "fam_y").is_not_null()))
    used = known.filter(pl.col("fam_x") != pl.col("fam_y"))
    u = _units(used) if used.height else None
    if u is None:
        msg = (
            "family preference is not estimable: no outcome has two candidates of different, "
            f"known families and a judge of a known family ({frame.height} outcome(s) given)"
        )
        raise NotApplicableError(msg)
    st, s_obs, c_obs, dj, dc, shared = _observed(u, "on these outcomes")
    rng = np.random.default_rng(seed)
    null = _permutation_null(u, dj, dc, n_perm, rng)
    fps = float(st.fps[0])
    p_placebo, n_used, enumerated, placebo_reason = _placebo(u, dj, dc, fps, n_placebo, rng)

    support = pl.DataFrame(
        {
            "judge_family": [h for h in u.judge_families for _ in u.candidate_families],
            "candidate_family": [f for _ in u.judge_families for f in u.candidate_families],
            "support": [
                float(s_obs[a, b] / c_obs[a, b]) if c_obs[a, b] > 0 else None
                for a in range(len(u.judge_families))
                for b in range(len(u.candidate_families))
            ],
            "n": c_obs.ravel().astype(np.int64),
        },
        schema={
            "judge_family": pl.String,
            "candidate_family": pl.String,
            "support": pl.Float64,
            "n": pl.Int64,
        },
    )

    fam_ability = _family_abilities(abilities, system_family) if abilities is not None else {}

    def col(values: np.ndarray) -> list[float | None]:
        return [float(v) if np.isfinite(v) else None for v in values]

    naive, corrected = st.naive[0], st.corrected[0]
    per_family = pl.DataFrame(
        {
            "family": list(shared),
            "ability": [fam_ability.get(f) for f in shared],
            "same_family_support": col(st.diagonal[0]),
            "other_judges_support": col(st.other_judges[0]),
            "other_candidates_support": col(st.other_candidates[0]),
            "naive": col(naive),
            "corrected": col(corrected),
            "naive_p": [
                _p_greater(null.naive[:, k], naive[k]) if np.isfinite(naive[k]) else None
                for k in range(len(shared))
            ],
            "corrected_p": [
                _p_greater(null.corrected[:, k], corrected[k])
                if np.isfinite(corrected[k])
                else None
                for k in range(len(shared))
            ],
            "naive_null_mean": col(np.nanmean(null.naive, axis=0)),
            "corrected_null_mean": col(np.nanmean(null.corrected, axis=0)),
        },
        schema_overrides={
            k: pl.Float64 for k in ("ability", "naive", "corrected", "naive_p", "corrected_p")
        },
    )

    naive_r = corrected_r = None
    ability_reason: str | None = None
    if abilities is None:
        ability_reason = "no abilities given"
    else:
        ok = [k for k, f in enumerate(shared) if f in fam_ability]
        a = np.asarray([fam_ability[shared[k]] for k in ok])
        nv, cv = naive[ok], corrected[ok]
        fin = np.isfinite(nv) & np.isfinite(cv)
        naive_r = _pearson(a[fin], nv[fin])
        corrected_r = _pearson(a[fin], cv[fin])
        if naive_r is None or corrected_r is None:
            ability_reason = (
                f"a correlation needs at least 3 diagonal families with an ability and a "
                f"statistic, not all equal; got {int(fin.sum())}"
            )

    loo_rows = []
    for kind, column, fams in (
        ("judge_family", "fam_j", u.judge_families),
        ("candidate_family", "fam_x", u.candidate_families),
    ):
        for f in fams:
            value, reason = _loo_fps(u, column, f)
            loo_rows.append({"left_out": kind, "family": f, "fps": value, "reason": reason})
    leave_one_out = pl.DataFrame(
        loo_rows,
        schema={"left_out": pl.String, "family": pl.String, "fps": pl.Float64, "reason": pl.String},
    )

    logprob: LogprobAssociation | None
    logprob_reason: str | None
    if games is None:
        logprob, logprob_reason = None, "no games given"
    else:
        logprob, logprob_reason = _logprob(games, jmap, smap)

    return FamilyPreference(
        support=support,
        families=shared,
        mean_diagonal=float(st.mean_diagonal[0]),
        mean_off_diagonal=float(st.mean_off_diagonal[0]),
        fps=fps,
        p_permutation=_p_greater(null.fps, fps),
        fps_null_mean=float(np.nanmean(null.fps)),
        n_perm=int(n_perm),
        per_family=per_family,
        p_placebo=p_placebo,
        n_placebo=n_used,
        placebo_enumerated=enumerated,
        placebo_reason=placebo_reason,
        leave_one_out=leave_one_out,
        naive_ability_r=naive_r,
        corrected_ability_r=corrected_r,
        ability_reason=ability_reason,
        composition=_composition(u),
        logprob=logprob,
        logprob_reason=logprob_reason,
        n_outcomes=int(used.height),
        n_same_family_outcomes=int(known.height - used.height),
        n_outcomes_without_family=int(tagged.height - known.height),
        n_systems_without_family=len([s for s in systems if s not in smap]),
        n_judges_without_family=len([j for j in judges if j not in jmap]),
    )
