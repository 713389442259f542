"""Fault injection: bad records derived from clean ones, and their fault book.

:data:`FAULT_KINDS` are cycled over; every fault line is made from a clean
record of the dump and listed (kind, file, 1-based line) in ``truth["faults"]``.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import orjson

from jurymeter.errors import SimulationError
from jurymeter.simulate.params import SimulatedDump

#: Fault kinds appended by :func:`write_dump`, in the order they are cycled.
FAULT_KINDS: tuple[str, ...] = (
    "malformed_line",
    "missing_field",
    "wrong_type",
    "non_finite_score",
    "score_out_of_scale",
    "unknown_winner",
    "preference_out_of_range",
    "same_system",
    "conflicting_duplicate",
)
_POINTWISE_ONLY = frozenset(
    {"wrong_type", "non_finite_score", "score_out_of_scale", "conflicting_duplicate"}
)
_PAIRWISE_ONLY = frozenset({"unknown_winner", "preference_out_of_range", "same_system"})


def _empty_faults() -> dict[str, Any]:
    return {
        "n_faults": 0,
        "seed": None,
        "counts": dict.fromkeys(FAULT_KINDS, 0),
        "lines": {"pointwise.jsonl": {}, "pairwise.jsonl": {}},
    }


def _dumps(record: dict[str, Any]) -> str:
    return orjson.dumps(record).decode()


def _fault_plan(n_faults: int) -> list[tuple[str, str]]:
    """(kind, file) for every fault: kinds cycle, shared kinds alternate files."""
    plan: list[tuple[str, str]] = []
    seen: dict[str, int] = dict.fromkeys(FAULT_KINDS, 0)
    for f in range(n_faults):
        kind = FAULT_KINDS[f % len(FAULT_KINDS)]
        if kind in _POINTWISE_ONLY:
            target = "pointwise.jsonl"
        elif kind in _PAIRWISE_ONLY:
            target = "pairwise.jsonl"
        else:
            target = "pointwise.jsonl" if seen[kind] % 2 == 0 else "pairwise.jsonl"
        seen[kind] += 1
        plan.append((kind, target))
    return plan


def _make_faults(
    dump: SimulatedDump, n_faults: int, seed: int
) -> tuple[dict[str, list[str]], dict[str, Any]]:
    """Fault lines to append per file, and their bookkeeping."""
    params = dump.truth["params"]
    n_rep = int(params["n_replicates"])
    high = float(params["scale"][1])
    low = float(params["scale"][0])
    out_of_scale = 99.0 if not low <= 99.0 <= high else high + 100.0
    rng = np.random.default_rng(seed)
    frames = {"pointwise.jsonl": dump.pointwise, "pairwise.jsonl": dump.pairwise}
    plan = _fault_plan(n_faults)
    hard_rows, n_dup = _fault_sources(dump, plan)
    dup_rows = iter(
        np.sort(rng.choice(dump.pointwise.height, n_dup, replace=False)).tolist() if n_dup else []
    )

    lines: dict[str, list[str]] = {"pointwise.jsonl": [], "pairwise.jsonl": []}
    where: dict[str, dict[str, list[int]]] = {"pointwise.jsonl": {}, "pairwise.jsonl": {}}
    counts = dict.fromkeys(FAULT_KINDS, 0)
    for ordinal, (kind, target) in enumerate(plan):
        frame = frames[target]
        clean = frame.height
        line_no = clean + len(lines[target]) + 1
        if kind == "conflicting_duplicate":
            row = int(next(dup_rows))
            rec = frame.row(row, named=True)
            rec["score"] = low if rec["score"] != low else high
            text = _dumps(rec)
            where[target].setdefault(kind, []).extend([row + 1, line_no])
        else:
            pool = hard_rows if kind == "unknown_winner" else None
            row = int(rng.choice(pool)) if pool is not None else int(rng.integers(frame.height))
            rec = frame.row(row, named=True)
            rec["replicate"] = n_rep + ordinal  # fresh key: one fault per line
            text = _fault_line(kind, rec, out_of_scale)
            where[target].setdefault(kind, []).append(line_no)
        lines[target].append(text)
        counts[kind] += 1
    for per_file in where.values():
        for kind in per_file:
            per_file[kind] = sorted(per_file[kind])
    book = {"n_faults": n_faults, "seed": seed, "counts": counts, "lines": where}
    return lines, book


def _fault_sources(dump: SimulatedDump, plan: list[tuple[str, str]]) -> tuple[np.ndarray, int]:
    """The pairwise rows with a winner and the duplicates needed, once the dump is checked to hold them."""
    frames = {"pointwise.jsonl": dump.pointwise, "pairwise.jsonl": dump.pairwise}
    for target in {t for _, t in plan}:
        if frames[target].height == 0:
            msg = f"write_dump: faults need clean records in {target}, which is empty"
            raise SimulationError(msg)
    hard_rows = (
        np.flatnonzero(dump.pairwise["winner"].is_not_null().to_numpy())
        if dump.pairwise.height
        else np.empty(0, dtype=np.int64)
    )
    if any(k == "unknown_winner" for k, _ in plan) and hard_rows.size == 0:
        msg = "write_dump: unknown_winner faults need pairwise records with a winner; none exist"
        raise SimulationError(msg)
    n_dup = sum(1 for k, _ in plan if k == "conflicting_duplicate")
    if n_dup > dump.pointwise.height:
        msg = (
            f"write_dump: {n_dup} conflicting_duplicate faults need as many pointwise "
            f"records; got {dump.pointwise.height}"
        )
        raise SimulationError(msg)
    return hard_rows, n_dup


def _fault_line(kind: str, rec: dict[str, Any], out_of_scale: float) -> str:
    """The line of one fault of ``kind`` (not ``conflicting_duplicate``) made from the clean record ``rec``."""
    if kind == "malformed_line":
        full = _dumps(rec)
        return full[: len(full) // 2]
    if kind == "missing_field":
        del rec["judge_id"]
    elif kind == "wrong_type":
        rec["score"] = "high"
    elif kind == "non_finite_score":
        rec["score"] = "__NON_FINITE__"
        return _dumps(rec).replace('"__NON_FINITE__"', "Infinity")
    elif kind == "score_out_of_scale":
        rec["score"] = out_of_scale
    elif kind == "unknown_winner":
        rec["winner"] = "C"
        rec["preference"] = None
    elif kind == "preference_out_of_range":
        rec["winner"] = None
        rec["preference"] = 1.7
    else:  # same_system
        rec["system_b"] = rec["system_a"]
    return _dumps(rec)
