"""Argument checks and result helpers shared by the CyclicJudge modules."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from jurymeter.errors import DesignError


def _positive_int(name: str, value: object, *, minimum: int = 1) -> int:
    if isinstance(value, bool) or not isinstance(value, int | np.integer) or value < minimum:
        msg = f"{name} must be an integer >= {minimum}, got {value!r}"
        raise DesignError(msg)
    return int(value)


def _scores(x: object) -> np.ndarray:
    """A finite ``(n, m, K)`` float array with at least two levels on every axis."""
    arr = np.asarray(x, dtype=np.float64)
    if arr.ndim != 3:
        msg = f"x must be a 3-d array x[scenario, generation, judge], got {arr.ndim} axis/axes"
        raise DesignError(msg)
    if not np.all(np.isfinite(arr)):
        msg = "x must be complete and finite: every scenario x generation x judge cell scored"
        raise DesignError(msg)
    for axis, name in enumerate(("scenarios", "generations", "judges")):
        if arr.shape[axis] < 2:
            msg = (
                f"x has {arr.shape[axis]} {name} (shape {arr.shape}); the decomposition needs >= 2"
            )
            raise DesignError(msg)
    return arr


def _ids(name: str, ids: Sequence[str] | None, size: int, prefix: str) -> tuple[str, ...]:
    if ids is None:
        return tuple(f"{prefix}{k}" for k in range(size))
    out = tuple(str(v) for v in ids)
    if len(out) != size:
        msg = f"{name} has {len(out)} id(s); the data have {size}"
        raise DesignError(msg)
    if len(set(out)) != len(out):
        msg = f"{name} repeats an id: {out}"
        raise DesignError(msg)
    return out


def _budgets(budgets: Sequence[int], k_total: int) -> np.ndarray:
    values = [_positive_int("budget", b) for b in budgets]
    if not values:
        msg = "budgets must name at least one per-scenario budget"
        raise DesignError(msg)
    bad = [b for b in values if b % k_total]
    if bad:
        msg = (
            f"budgets {bad} are not multiples of the panel size K_tot={k_total}; strategies A "
            "(B/K_tot generations) and C (B/K_tot calls per judge) need one"
        )
        raise DesignError(msg)
    return np.asarray(values, dtype=np.int64)


def _readonly(arr: np.ndarray) -> np.ndarray:
    """A result array nobody can write to (results are never mutated after return)."""
    arr.setflags(write=False)
    return arr


def _ratio(num: float, den: float) -> float:
    return float(num / den) if den > 0 else float("nan")
