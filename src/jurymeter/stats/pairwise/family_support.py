r"""Family-conditioned preference, the estimation: the support matrix, FPS and the per-family lifts ([Awuni2026]_ sections 4-4.1).

The formulas (:math:`S_{hf}`, FPS, the row-wise naive and the column-wise
corrected lift) are in :mod:`jurymeter.stats.pairwise.family`. Here the
reconciled outcomes are coded once into *units* (one outcome per item, pair and
judge: its judge's family and the support it gives each candidate family), so
that the observed statistics, every permuted or relabelled panel of
:mod:`jurymeter.stats.pairwise.family_tests` and every leave-one-out refit are
sums over the same integer codes (``numpy.bincount``).

References
----------
.. [Awuni2026] D. A. Awuni et al., "Who Judges Matters: Measuring
   Family-Conditioned Preference in LLM-as-Judge Panels", 2026
   (``papers/who-judges-matters.txt``).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import polars as pl

from jurymeter.errors import NotApplicableError
from jurymeter.stats.pairwise.games import key_codes


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
