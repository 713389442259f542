"""The pairwise headline's position-bias clause, shared by the headline sentence and the page section."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


def position_text(part: Mapping[str, Any]) -> str | None:
    """The headline's position-bias clause: the pooled slot-A advantage with its range over judges, or why none.

    Not estimable (issue 24, point 4) when there is no pooled value, and when
    the presentation order is unknown for more than half of the judgments (a
    choice: a number from the few judgments of known order is not the item
    set's position bias; it is still said, in parentheses). ``None`` when the
    entry says nothing of position (an older summary).
    """
    value, games, unknown = part.get("slot_a_advantage"), part.get("position_judgments"), part.get("position_order_unknown")
    order = None
    if games and unknown:
        games, unknown = int(games), int(unknown)
        order = f"order unknown for {unknown:,} of {games:,} judgments"
    if value is None:
        why = order or part.get("position_reason")
        return f"position bias not estimable: {why}" if why else None
    if order is not None and games and unknown and 2 * unknown > games:
        return f"position bias not estimable: {order} (the {games - unknown:,} of known order give {value:.1f} points)"
    low, high = part.get("slot_a_judge_low"), part.get("slot_a_judge_high")
    inside = ["slot A's win rate over slot B's"]
    if low is not None and high is not None and low != high:
        inside.insert(0, f"judges {low:+.1f} to {high:+.1f}")
    if order is not None:
        inside.append(order)
    return f"position bias {value:.1f} points ({'; '.join(inside)})"
