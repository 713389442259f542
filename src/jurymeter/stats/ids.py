"""Checks of the id lists and counts that planners take (the CyclicJudge planner, the batch plans)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from jurymeter.errors import DesignError


def id_list(name: str, ids: Sequence[str], *, minimum: int = 1, allow_empty: bool = False) -> tuple[str, ...]:
    """``ids`` as a tuple of distinct strings, at least ``minimum`` of them (``""`` refused unless ``allow_empty``).

    Raises
    ------
    DesignError
        A string instead of a sequence, not a sequence, too few ids, a non-string
        (or empty) id, or a repeated id; the message names ``name`` and the values.
    """
    if isinstance(ids, str):
        msg = f"{name} must be a sequence of ids, got the string {ids!r}"
        raise DesignError(msg)
    try:
        out = tuple(ids)
    except TypeError:
        msg = f"{name} must be a sequence of ids, got {type(ids).__name__}"
        raise DesignError(msg) from None
    if len(out) < minimum:
        msg = (f"{name} must name at least one id" if minimum == 1
               else f"{name} must name at least {minimum} id(s), got {len(out)}")
        raise DesignError(msg)
    bad = [v for v in out if not isinstance(v, str) or (not v and not allow_empty)]
    if bad:
        msg = f"{name} must be {'strings' if allow_empty else 'non-empty strings'}, got {bad[:3]!r}"
        raise DesignError(msg)
    if len(set(out)) != len(out):
        dupes = sorted({v for v in out if out.count(v) > 1})
        msg = f"{name} repeats id(s) {dupes}"
        raise DesignError(msg)
    return out


def count(name: str, value: object, *, minimum: int) -> int:
    """``value`` as an ``int`` of at least ``minimum`` (booleans refused), else :class:`DesignError`."""
    if isinstance(value, bool) or not isinstance(value, int | np.integer) or value < minimum:
        msg = f"{name} must be an integer >= {minimum}, got {value!r}"
        raise DesignError(msg)
    return int(value)
