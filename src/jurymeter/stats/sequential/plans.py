r"""Batch plans for sequential judging: Williams-square and randomized orders.

A judge that rates :math:`V` items in one batch (call, session) rates them in
some order, and a rating leans on the one before it and on its position
([LiDing2026]_). A plan fixes the order of every batch. Under a *Williams
square* each item appears at each position equally often and each item
immediately follows every other item equally often over a full cycle of the
square's rows, so position effects and first-order carry-over are balanced
across items; [LiDing2026]_ (table 1, table S1) compares it with randomized
orders for top-1 selection and group comparison.

Construction ([Williams1949]_; [JonesKenward2014]_ section 4.2). For :math:`V`
items coded :math:`0..V-1` the first row is

.. math::

    0, 1, V-1, 2, V-2, 3, V-3, \dots

(position :math:`p` holds :math:`(p+1)/2` for odd :math:`p` and :math:`V - p/2`
for even :math:`p > 0`), and row :math:`i` adds :math:`i` modulo :math:`V` to every
entry of the first row. Every row and column is a permutation (a Latin square).
For even :math:`V` the successive differences of the first row,
:math:`1, -2, 3, -4, \dots`, are distinct and nonzero modulo :math:`V`, so in the
:math:`V` rows each ordered pair :math:`(a, b)` of distinct items is adjacent
(:math:`a` immediately followed by :math:`b`) exactly once. For odd :math:`V` no
single square does this; the square and its mirror (every row reversed) give
:math:`2V` rows in which each ordered pair is adjacent exactly twice.

The plan. Batch :math:`b = 0, 1, \dots` is rated by judge :math:`b \bmod K` (round
robin over the :math:`K` judges, in the order given), and a judge's
:math:`m`-th batch (:math:`m = \lfloor b/K \rfloor`) takes row
:math:`\pi(m \bmod R)` of the square, :math:`R = V` (even) or :math:`2V` (odd),
with :math:`\pi` a seeded permutation of the rows. So every judge walks through
the square's rows in the same seeded order, and when :math:`KR` divides the
number of batches every judge's batches are complete squares (balanced for
positions and adjacencies); otherwise a judge's last cycle is its first
:math:`n_j \bmod R` rows of :math:`\pi` and the balance holds only over its
complete cycles. The items are relabelled per seed (square code :math:`s`
becomes ``items[sigma[s]]``, :math:`\sigma` a seeded permutation), so the square
is not always the same one. To have each judge rate :math:`N` batches, plan
:math:`N K` batches.

The randomized design gives every batch an independent uniform permutation of
the items (the "randomize" of randomize-and-average, [LiDing2026]_), judges
round robin as above.

References
----------
.. [LiDing2026] T. Li and J. Ding, "Trustworthy Method Comparison with AI Judges:
   Estimation and Design under Order, Batch, and Aggregation Effects", 2026
   (``papers/trustworthy-comparison-ai-judges.txt``).
.. [Williams1949] E. J. Williams, "Experimental designs balanced for the
   estimation of residual effects of treatments", Australian Journal of
   Scientific Research, Series A 2(2), 149-168, 1949.
.. [JonesKenward2014] B. Jones and M. G. Kenward, *Design and Analysis of
   Cross-Over Trials*, 3rd ed., Chapman and Hall/CRC, 2014 (Williams designs).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal, get_args

import numpy as np
import polars as pl

from jurymeter.errors import ConfigError
from jurymeter.stats.ids import count, id_list
from jurymeter.stats.sequential.schemas import BATCH_PLAN_SCHEMA

Design = Literal["williams", "random"]
"""The order designs :func:`batch_plan` knows."""


def williams_square(n_items: int) -> np.ndarray:
    r"""The textbook Williams design for ``n_items`` treatments (items coded ``0..V-1``).

    Parameters
    ----------
    n_items
        :math:`V \ge 2`.

    Returns
    -------
    numpy.ndarray
        ``(R, V)`` int64 array, one order per row: :math:`R = V` rows for even
        :math:`V` (the square), :math:`R = 2V` for odd :math:`V` (the square, then
        its mirror: row :math:`V + i` is row :math:`i` reversed).

    Raises
    ------
    DesignError
        ``n_items < 2``.

    Notes
    -----
    First row :math:`0, 1, V-1, 2, V-2, \dots`; row :math:`i` is the first plus
    :math:`i` modulo :math:`V` ([Williams1949]_; [JonesKenward2014]_). Each ordered
    pair of distinct items is adjacent once (even :math:`V`) or twice (odd
    :math:`V`) over the rows, and each item is at each position once (even) or
    twice (odd).

    Examples
    --------
    >>> williams_square(4).tolist()
    [[0, 1, 3, 2], [1, 2, 0, 3], [2, 3, 1, 0], [3, 0, 2, 1]]
    >>> williams_square(3).shape
    (6, 3)
    """
    v = count("n_items", n_items, minimum=2)
    p = np.arange(v)
    first = np.where(p % 2 == 1, (p + 1) // 2, (v - p // 2) % v)
    square = (first[None, :] + p[:, None]) % v
    if v % 2 == 1:
        square = np.vstack([square, square[:, ::-1]])
    out: np.ndarray = square.astype(np.int64)
    return out


def batch_plan(
    items: Sequence[str],
    n_batches: int,
    judges: Sequence[str],
    *,
    design: Design = "williams",
    seed: int = 0,
    unit: str = "item_id",
    batch_prefix: str = "b",
) -> pl.DataFrame:
    r"""Orders of ``n_batches`` batches, each rating every item once, and the judge of each.

    Parameters
    ----------
    items
        The :math:`V \ge 2` rated units (item ids, or ids of rated outputs).
    n_batches
        Batches in all, :math:`\ge 1`; judges take them round robin.
    judges
        The judges, in round-robin order.
    design : {"williams", "random"}, default "williams"
        Williams-square orders (see the module notes) or an independent uniform
        permutation per batch.
    seed : int, default 0
        Seed of the item relabelling and the row order (``"williams"``) or of
        the permutations (``"random"``); the same seed gives the same table.
    unit : str, default "item_id"
        Name of the column of the rated units.
    batch_prefix : str, default "b"
        Batch ids are the prefix and the batch number, zero-padded to the width of
        the largest (``b0``..``b9``; ``b00``..``b11``), so they sort in batch order.

    Returns
    -------
    polars.DataFrame
        ``batch_id`` (String), ``batch_position`` (Int64, 0-based), ``unit`` (String),
        ``judge_id`` (String): :math:`V` rows per batch, batches in order, positions
        in order within a batch.

    Raises
    ------
    DesignError
        Fewer than 2 items, no judge, empty, non-string or repeated ids, or
        ``n_batches < 1``.
    ConfigError
        An unknown ``design``, a negative or non-integer ``seed``, or a ``unit``
        that clashes with the other columns.

    Notes
    -----
    Batch :math:`b` goes to judge :math:`b \bmod K`; under ``"williams"`` it takes
    row :math:`\pi(\lfloor b/K \rfloor \bmod R)` of :func:`williams_square`, the
    codes mapped to ``items[sigma[code]]``, with :math:`\sigma` then :math:`\pi`
    drawn by ``numpy.random.default_rng(seed).permutation``. Every complete cycle
    of :math:`R` batches of a judge is a full Williams design ([Williams1949]_).

    Examples
    --------
    >>> plan = batch_plan(["x", "y", "z", "w"], 8, ["j1", "j2"], seed=1)
    >>> plan.columns
    ['batch_id', 'batch_position', 'item_id', 'judge_id']
    >>> plan.group_by("judge_id").agg(pl.col("batch_id").n_unique()).sort("judge_id").rows()
    [('j1', 4), ('j2', 4)]
    """
    item_ids, judge_ids, n = _checked(items, n_batches, judges, design=design, seed=seed, unit=unit,
                                      batch_prefix=batch_prefix)
    v, k = len(item_ids), len(judge_ids)
    b = np.arange(n)
    orders = _orders(v, n, k, design=design, seed=int(seed))
    width = len(str(n - 1))
    batch_ids = [f"{batch_prefix}{i:0{width}d}" for i in range(n)]
    return pl.DataFrame(
        {
            "batch_id": np.repeat(np.asarray(batch_ids, dtype=object), v).tolist(),
            "batch_position": np.tile(np.arange(v, dtype=np.int64), n),
            unit: np.asarray(item_ids, dtype=object)[orders.reshape(-1)].tolist(),
            "judge_id": np.repeat(np.asarray(judge_ids, dtype=object)[b % k], v).tolist(),
        },
        schema={(unit if c == "item_id" else c): t for c, t in BATCH_PLAN_SCHEMA.items()},
    )


def _checked(
    items: Sequence[str],
    n_batches: int,
    judges: Sequence[str],
    *,
    design: str,
    seed: int,
    unit: str,
    batch_prefix: str,
) -> tuple[tuple[str, ...], tuple[str, ...], int]:
    """:func:`batch_plan`'s arguments checked in the order of its signature: the items, judges and batch count."""
    item_ids = id_list("items", items, minimum=2)
    judge_ids = id_list("judges", judges, minimum=1)
    n = count("n_batches", n_batches, minimum=1)
    if design not in get_args(Design):
        msg = f"design must be one of {list(get_args(Design))}, got {design!r}"
        raise ConfigError(msg)
    if isinstance(seed, bool) or not isinstance(seed, int | np.integer) or seed < 0:
        msg = f"seed must be an integer >= 0, got {seed!r}"
        raise ConfigError(msg)
    others = [c for c in BATCH_PLAN_SCHEMA if c != "item_id"]
    if not isinstance(unit, str) or not unit or unit in others:
        msg = f"unit must be a column name other than {others}, got {unit!r}"
        raise ConfigError(msg)
    if not isinstance(batch_prefix, str):
        msg = f"batch_prefix must be a string, got {batch_prefix!r}"
        raise ConfigError(msg)
    return item_ids, judge_ids, n


def _orders(v: int, n: int, k: int, *, design: str, seed: int) -> np.ndarray:
    """``(n, v)`` item codes of every batch: Williams rows (relabelled, rows permuted) or uniform permutations.

    The draws of :func:`batch_plan`'s notes: ``sigma`` then ``pi`` from
    ``default_rng(seed)`` (``"williams"``), or one permutation per batch.
    """
    rng = np.random.default_rng(seed)
    if design == "williams":
        sigma = rng.permutation(v)
        square = sigma[williams_square(v)]
        rows = rng.permutation(square.shape[0])
        orders: np.ndarray = square[rows[(np.arange(n) // k) % square.shape[0]]]
        return orders
    permuted: np.ndarray = rng.permuted(np.tile(np.arange(v), (n, 1)), axis=1)
    return permuted


def batched_plan(plan: pl.DataFrame, batch_size: int, *, design: Design = "williams", seed: int = 0) -> pl.DataFrame:
    r"""A crossed judge plan with batch orders: each judge rates a system's items in batches of about ``batch_size``.

    ``plan`` has one row per call (``system_id, item_id, generation, judge_id``:
    :func:`jurymeter.stats.cyclic.planner.plan_crossed`), every judge on the same items
    for every system and generation. The items are split (after a seeded shuffle) into
    :math:`g = \lceil V / \text{batch\_size} \rceil` groups as even as possible (each of
    at least 2 items: fewer groups when the last would hold one). A batch is one
    judge's calls on one group for one (system, generation); a judge's batches of one
    group are ordered by :func:`batch_plan` (Williams rows by default), so over every
    complete cycle of the square's rows each item is at each position equally often
    and follows every other item equally often ([LiDing2026]_ table 1: the order
    design that balances position and carry-over). The :math:`b`-th batch of a
    judge's group is the :math:`b`-th (system, generation) in id order.

    Returns
    -------
    polars.DataFrame
        ``plan``'s rows and columns with ``batch_id`` (String: ``<judge>/<group>/<batch>``)
        and ``batch_position`` (Int64, 0-based), in batch and position order.

    Raises
    ------
    DesignError
        A judge without the same items for every system and generation (not a crossed
        plan), fewer than 2 items, or ``batch_size < 2``.
    """
    from jurymeter.errors import DesignError

    size = count("batch_size", batch_size, minimum=2)
    items = sorted(plan["item_id"].unique().to_list())
    if len(items) < 2:
        msg = f"batch orders need at least 2 items per batch; the plan has {len(items)}"
        raise DesignError(msg)
    per_cell = plan.group_by("judge_id", "system_id", "generation").agg(pl.col("item_id").n_unique().alias("n"))
    if per_cell["n"].min() != len(items) or plan.height != per_cell.height * len(items):
        msg = ("batch orders need a crossed plan (every judge on the same items, once, for every system and "
               "generation): use --crossed")
        raise DesignError(msg)
    groups = -(-len(items) // size)
    while groups > 1 and len(items) // groups < 2:
        groups -= 1
    shuffled = [items[k] for k in np.random.default_rng(seed).permutation(len(items))]
    bounds = np.linspace(0, len(items), groups + 1).round().astype(int)
    frames = []
    for judge in sorted(plan["judge_id"].unique().to_list()):
        cells = (plan.filter(pl.col("judge_id") == judge).select("system_id", "generation").unique()
                 .sort("system_id", "generation"))
        for g in range(groups):
            group = shuffled[bounds[g]:bounds[g + 1]]
            orders = batch_plan(group, cells.height, [judge], design=design, seed=seed, batch_prefix=f"{judge}/{g}/")
            index = orders["batch_id"].rank("dense").cast(pl.Int64) - 1  # batch ids sort in batch order
            frames.append(orders.with_columns(
                system_id=pl.Series(cells["system_id"].to_list()).gather(index),
                generation=pl.Series(cells["generation"].to_list()).gather(index),
            ))
    batches = pl.concat(frames)
    return (plan.join(batches, on=["system_id", "item_id", "generation", "judge_id"], how="inner")
            .sort("batch_id", "batch_position"))
