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

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np
import polars as pl

from jurymeter.errors import ConfigError, DesignError, NotApplicableError
from jurymeter.stats.pairwise.family_support import (
    _loo_fps,
    _observed,
    _Stats,
    _Units,
    _units,
)
from jurymeter.stats.pairwise.family_tests import (
    OUTCOME_TOL,
    TIE_TOL,
    LogprobAssociation,
    _composition,
    _family_abilities,
    _logprob,
    _p_greater,
    _pearson,
    _permutation_null,
    _placebo,
)

__all__ = [
    "OUTCOME_TOL",
    "TIE_TOL",
    "FamilyPreference",
    "LogprobAssociation",
    "family_preference",
]

_NEEDED = ("item_id", "system_x", "system_y", "judge_id", "score_x")


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
    # Long (156 lines) by its numpy docstring (every parameter, the formulas and their sources); the code below is 56 lines.
    _check_options(outcomes, judge_family, system_family, n_perm, n_placebo, seed, games)
    jmap = {k: v for k, v in judge_family.items() if v}
    smap = {k: v for k, v in system_family.items() if v}
    frame, tagged = _tagged(outcomes, jmap, smap)
    systems = set(frame["system_x"].to_list()) | set(frame["system_y"].to_list())
    judges = set(frame["judge_id"].to_list())
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
    fam_ability = _family_abilities(abilities, system_family) if abilities is not None else {}
    naive_r, corrected_r, ability_reason = _ability_correlations(abilities, fam_ability, shared, st)
    logprob: LogprobAssociation | None
    logprob_reason: str | None
    if games is None:
        logprob, logprob_reason = None, "no games given"
    else:
        logprob, logprob_reason = _logprob(games, jmap, smap)

    return FamilyPreference(
        support=_support_table(u, s_obs, c_obs),
        families=shared,
        mean_diagonal=float(st.mean_diagonal[0]),
        mean_off_diagonal=float(st.mean_off_diagonal[0]),
        fps=fps,
        p_permutation=_p_greater(null.fps, fps),
        fps_null_mean=float(np.nanmean(null.fps)),
        n_perm=int(n_perm),
        per_family=_per_family_table(shared, fam_ability, st, null),
        p_placebo=p_placebo,
        n_placebo=n_used,
        placebo_enumerated=enumerated,
        placebo_reason=placebo_reason,
        leave_one_out=_leave_one_out_table(u),
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


def _check_options(
    outcomes: pl.DataFrame,
    judge_family: Mapping[str, str],
    system_family: Mapping[str, str],
    n_perm: int,
    n_placebo: int,
    seed: int,
    games: pl.DataFrame | None,
) -> None:
    """The arguments of :func:`family_preference` checked: ``outcomes``' columns, the two maps, the counts."""
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


def _tagged(
    outcomes: pl.DataFrame, jmap: Mapping[str, str], smap: Mapping[str, str]
) -> tuple[pl.DataFrame, pl.DataFrame]:
    """The outcomes with a score (ids as strings), and the same with the families of the judge and both candidates."""
    frame = outcomes.select(
        pl.col("item_id").cast(pl.String),
        pl.col("system_x").cast(pl.String),
        pl.col("system_y").cast(pl.String),
        pl.col("judge_id").cast(pl.String),
        pl.col("score_x").cast(pl.Float64),
    ).filter(pl.col("score_x").is_not_null())
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
    return frame, tagged


def _support_table(u: _Units, s_obs: np.ndarray, c_obs: np.ndarray) -> pl.DataFrame:
    """The support matrix :math:`S_{hf}` as a long table, one row per (judge family, candidate family)."""
    return pl.DataFrame(
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


def _finite_or_none(values: np.ndarray) -> list[float | None]:
    return [float(v) if np.isfinite(v) else None for v in values]


def _per_family_table(
    shared: tuple[str, ...], fam_ability: Mapping[str, float], st: _Stats, null: _Stats
) -> pl.DataFrame:
    """One row per diagonal family: its supports, naive and corrected lifts with their permutation p-values."""
    col = _finite_or_none
    naive, corrected = st.naive[0], st.corrected[0]
    return pl.DataFrame(
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


def _ability_correlations(
    abilities: Mapping[str, float] | None,
    fam_ability: Mapping[str, float],
    shared: tuple[str, ...],
    st: _Stats,
) -> tuple[float | None, float | None, str | None]:
    """Pearson r of the naive and of the corrected lift with the families' abilities ([Awuni2026]_ section 4.1), or the reason there is none."""
    if abilities is None:
        return None, None, "no abilities given"
    ability_reason: str | None = None
    naive, corrected = st.naive[0], st.corrected[0]
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
    return naive_r, corrected_r, ability_reason


def _leave_one_out_table(u: _Units) -> pl.DataFrame:
    """FPS without the judges of one family, and without every outcome with a candidate of one family ([Awuni2026]_ section 9)."""
    loo_rows = []
    for kind, column, fams in (
        ("judge_family", "fam_j", u.judge_families),
        ("candidate_family", "fam_x", u.candidate_families),
    ):
        for f in fams:
            value, reason = _loo_fps(u, column, f)
            loo_rows.append({"left_out": kind, "family": f, "fps": value, "reason": reason})
    return pl.DataFrame(
        loo_rows,
        schema={"left_out": pl.String, "family": pl.String, "fps": pl.Float64, "reason": pl.String},
    )
