"""Judge offsets for every judge and system, and the self-preference pairs (appendix A, figure 2)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import polars as pl

from jurymeter.errors import DesignError
from jurymeter.stats.cyclic.checks import _ids, _readonly


# --------------------------------------------------------------------------- appendix A
@dataclass(frozen=True, slots=True)
class JudgeSystemOffsets:
    r"""Judge biases for every judge and system (appendix A, figure 2).

    Attributes
    ----------
    systems, judges
        Ids, in the order of the rows and columns of ``offsets``.
    offsets
        ``offsets[s, l]`` :math:`= \bar X_{\cdot\cdot\ell}(s) - \bar X_{\cdots}(s)`, system ``s``'s
        panel-relative judge offsets (each row sums to zero).
    system_means
        :math:`\hat\mu_\theta` per system, the panel mean (table 3's mean score).
    self_preference
        One row per (system, judge) pair of the same identity or family:
        ``system_id, judge_id, family, offset`` (the self-bias), ``other_offset``
        (mean offset of that judge on systems of other families), ``excess``
        (``offset - other_offset``) and ``row_max`` (the judge's largest offset over systems).
    """

    systems: tuple[str, ...]
    judges: tuple[str, ...]
    offsets: np.ndarray
    system_means: np.ndarray
    self_preference: pl.DataFrame

    def to_frame(self) -> pl.DataFrame:
        """Tidy table ``system_id, judge_id, offset``."""
        s, k = self.offsets.shape
        return pl.DataFrame(
            {
                "system_id": np.repeat(np.asarray(self.systems, dtype=object), k).tolist(),
                "judge_id": list(self.judges) * s,
                "offset": self.offsets.ravel(),
            }
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "systems": list(self.systems),
            "judges": list(self.judges),
            "judge_offsets": {
                sys: {j: float(v) for j, v in zip(self.judges, row, strict=True)}
                for sys, row in zip(self.systems, self.offsets, strict=True)
            },
            "system_means": {
                s: float(v) for s, v in zip(self.systems, self.system_means, strict=True)
            },
            "self_preference": self.self_preference.to_dicts(),
        }


def judge_system_offsets(
    x: np.ndarray,
    *,
    systems: Sequence[str],
    judges: Sequence[str],
    judge_family: Mapping[str, str] | None = None,
    system_family: Mapping[str, str] | None = None,
) -> JudgeSystemOffsets:
    r"""Panel-relative judge offsets per system and the self-preference pairs (appendix A).

    Parameters
    ----------
    x
        Scores ``x[system, scenario, generation, judge]`` (any sizes >= 1 on the middle axes).
    systems, judges
        Ids of the first and last axis.
    judge_family, system_family
        Optional maps from id to model identity or family; an id missing from its map
        is its own family. A judge "scores its own system" when the two families match.

    Returns
    -------
    JudgeSystemOffsets

    Notes
    -----
    [Zhu2026] appendix A: :math:`\hat\gamma_\ell = \bar X_{\cdot\cdot\ell} - \bar X_{\cdots}`
    computed per system.

    >>> x = np.array([[[[3.0, 1.0]]], [[[2.0, 2.0]]]])
    >>> judge_system_offsets(x, systems=["a", "b"], judges=["a", "b"]).offsets.tolist()
    [[1.0, -1.0], [0.0, 0.0]]
    """
    arr = np.asarray(x, dtype=np.float64)
    if arr.ndim != 4:
        msg = f"x must be 4-d x[system, scenario, generation, judge], got {arr.ndim} axis/axes"
        raise DesignError(msg)
    if arr.size == 0 or not np.all(np.isfinite(arr)):
        msg = "x must be non-empty, complete and finite"
        raise DesignError(msg)
    return offsets_from_judge_means(
        arr.mean(axis=(1, 2)), systems=systems, judges=judges, judge_family=judge_family, system_family=system_family
    )


def offsets_from_judge_means(
    judge_means: np.ndarray,
    *,
    systems: Sequence[str],
    judges: Sequence[str],
    judge_family: Mapping[str, str] | None = None,
    system_family: Mapping[str, str] | None = None,
) -> JudgeSystemOffsets:
    """:func:`judge_system_offsets` from each system's mean score per judge, ``judge_means[system, judge]``.

    Balanced data: a system's mean is the mean of its judges' means.
    """
    sys_ids = _ids("systems", systems, judge_means.shape[0], "s")
    judge_ids = _ids("judges", judges, judge_means.shape[1], "j")
    means = judge_means.mean(axis=1)
    offsets = judge_means - means[:, None]
    jf = np.asarray([(judge_family or {}).get(j, j) for j in judge_ids], dtype=object)
    sf = np.asarray([(system_family or {}).get(s, s) for s in sys_ids], dtype=object)
    same = sf[:, None] == jf[None, :]
    other = np.where(~same, offsets, np.nan)
    with np.errstate(invalid="ignore"):
        counts = (~same).sum(axis=0)
        other_mean = np.where(counts > 0, np.nansum(other, axis=0) / np.maximum(counts, 1), np.nan)
    row_max = offsets >= offsets.max(axis=0, keepdims=True)
    si, ji = np.nonzero(same)
    table = pl.DataFrame(
        {
            "system_id": [sys_ids[s] for s in si],
            "judge_id": [judge_ids[j] for j in ji],
            "family": [str(jf[j]) for j in ji],
            "offset": offsets[si, ji],
            "other_offset": other_mean[ji],
            "excess": offsets[si, ji] - other_mean[ji],
            "row_max": row_max[si, ji],
        },
        schema={
            "system_id": pl.Utf8,
            "judge_id": pl.Utf8,
            "family": pl.Utf8,
            "offset": pl.Float64,
            "other_offset": pl.Float64,
            "excess": pl.Float64,
            "row_max": pl.Boolean,
        },
    )
    return JudgeSystemOffsets(
        systems=sys_ids,
        judges=judge_ids,
        offsets=_readonly(offsets),
        system_means=_readonly(means),
        self_preference=table,
    )
