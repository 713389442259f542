"""The pairwise headline's position-bias clause, shared by the summary, the headline sentence and the page."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


def order_unknown_text(games: int | None, unknown: int | None) -> str | None:
    """``order unknown for N of M judgments``; ``None`` when every judgment's order is known."""
    if not games or not unknown:
        return None
    return f"order unknown for {int(unknown):,} of {int(games):,} judgments"


def position_null_reason(value: float | None, games: int | None, unknown: int | None,
                         reason: str | None) -> str | None:
    """Why the headline's position bias is not estimable (``slot_a_advantage_reason``); ``None`` when it is.

    Not estimable (issue 24, point 4) when there is no pooled value (the
    order-unknown count, or the statistics' own reason), and when the
    presentation order is unknown for more than half of the judgments (a
    choice: a number from the few judgments of known order is not the item
    set's position bias; it stays in the summary entry and the fit's JSON).
    """
    order = order_unknown_text(games, unknown)
    if value is None:
        return order or reason
    if order is not None and games and unknown and 2 * int(unknown) > int(games):
        return order
    return None


def position_text(part: Mapping[str, Any]) -> str | None:
    """The headline's position-bias clause: the pooled slot-A advantage with its range over judges, or why none.

    ``None`` when the entry says nothing of position.
    """
    value, games, unknown = part.get("slot_a_advantage"), part.get("position_judgments"), part.get("position_order_unknown")
    why = part.get("slot_a_advantage_reason")
    if why:  # the few known-order judgments' number stays in the JSON, not beside "not estimable"
        return f"position bias not estimable: {why}"
    if value is None:
        return None
    low, high = part.get("slot_a_judge_low"), part.get("slot_a_judge_high")
    inside = ["slot A's win rate over slot B's"]
    if low is not None and high is not None and low != high:
        inside.insert(0, f"judges {low:+.1f} to {high:+.1f}")
    order = order_unknown_text(games, unknown)
    if order is not None:
        inside.append(order)
    return f"position bias {value:.1f} points ({'; '.join(inside)})"
