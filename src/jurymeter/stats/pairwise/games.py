r"""Pairwise records as games, and the two presentation orders paired and reconciled.

A *game* is one stored pairwise judgment: system A was shown first, system B
second, and the judge said ``A``, ``B`` or ``tie`` (``verdict``), or gave a
probability that A is better (``preference``, AlpacaEval's weighted annotators,
the simulator's weighted records). ``score_a`` is what A earned: the preference
where one was given, else 1 for ``A``, 1/2 for ``tie``, 0 for ``B``, the ties-as-
half-a-win convention of the arena leaderboards and of Bradley-Terry fits with
ties [Rao1967]_ counted the simple way.

An *outcome* pairs the two presentation orders of one (item, unordered system
pair, judge, generation, replicate) and reconciles them by the counterbalanced
rule of the papers ([Anand2026]_ section 5.2, table 3; [Awuni2026]_ section 3):
the system that wins in both orders wins; any disagreement, a tie in either order
included, is a tie. A judgment seen in one order only, or whose shown order is
unknown (AlpacaEval without ``referenced_models``: ``order_known`` false), stands
as it is (``orders`` = 1): it enters the ratings but never the position analyses.

References
----------
.. [Anand2026] A. Anand, "Ask Which, Not How Good: Sizing Benchmarks Scored by an
   LLM", 2026 (``papers/ask-which-not-how-good.txt``).
.. [Awuni2026] D. A. Awuni et al., "Who Judges Matters: Measuring
   Family-Conditioned Preference in LLM-as-Judge Panels", 2026
   (``papers/who-judges-matters.txt``).
.. [Rao1967] P. V. Rao and L. L. Kupper, "Ties in paired-comparison experiments:
   a generalization of the Bradley-Terry model", JASA 62, 1967.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import polars as pl

from jurymeter.errors import DesignError

# The columns of a games frame, in order (optional inputs read as null when absent).
GAME_SCHEMA: dict[str, pl.DataType] = {
    "item_id": pl.String(),
    "system_a": pl.String(),
    "system_b": pl.String(),
    "judge_id": pl.String(),
    "generation": pl.Int64(),
    "replicate": pl.Int64(),
    "verdict": pl.String(),  # "A" | "B" | "tie"
    "score_a": pl.Float64(),  # in [0, 1]
    "order_known": pl.Boolean(),
    "length_a": pl.Int64(),
    "length_b": pl.Int64(),
    "judge_logprob": pl.Float64(),
    "gold": pl.String(),  # "A" | "B" | "tie" where the records carry a gold label
}
# One outcome per (item, unordered pair, judge, generation, replicate).
OUTCOME_KEY = ("item_id", "system_x", "system_y", "judge_id", "generation", "replicate")
OUTCOME_SCHEMA: dict[str, pl.DataType] = {
    "item_id": pl.String(),
    "system_x": pl.String(),  # system_x < system_y (code-point order)
    "system_y": pl.String(),
    "judge_id": pl.String(),
    "generation": pl.Int64(),
    "replicate": pl.Int64(),
    "verdict": pl.String(),  # "x" | "y" | "tie"
    "score_x": pl.Float64(),  # what x earned, in [0, 1]
    "orders": pl.Int64(),  # 2: seen in both presentation orders; 1: one (or unknown)
}
_OPTIONAL = ("order_known", "length_a", "length_b", "judge_logprob", "gold")
_TRUE_TEXT = ("true", "1", "yes")


def _optional(name: str, present: set[str]) -> pl.Expr:
    dtype = GAME_SCHEMA[name]
    if name not in present:
        return pl.lit(True if name == "order_known" else None, dtype=dtype).alias(name)
    column = pl.col(name)
    if name == "order_known":  # stored as text by the AlpacaEval adapter: only "false" says unknown
        text = column.cast(pl.String).str.to_lowercase()
        return (text.is_null() | text.is_in(list(_TRUE_TEXT))).alias(name)
    if name == "gold":
        return _verdict_text(column).alias(name)
    return column.cast(dtype, strict=False).alias(name)


def _verdict_text(column: pl.Expr) -> pl.Expr:
    text = column.cast(pl.String).str.strip_chars().str.to_lowercase()
    return (
        pl.when(text.is_in(["a", "model_a"])).then(pl.lit("A"))
        .when(text.is_in(["b", "model_b"])).then(pl.lit("B"))
        .when(text.is_in(["tie", "draw"])).then(pl.lit("tie"))
        .otherwise(None)
    )


def require_games(frame: object, required: tuple[str, ...]) -> pl.DataFrame:
    """``frame`` as a games frame holding ``required`` columns, else a :class:`DesignError` saying which lack."""
    if not isinstance(frame, pl.DataFrame):
        msg = f"games must be a polars DataFrame of games(); got {type(frame).__name__}"
        raise DesignError(msg)
    missing = [c for c in required if c not in frame.columns]
    if missing:
        msg = f"games lacks column(s) {missing}; a games frame of games() has {list(required)}"
        raise DesignError(msg)
    return frame


def games(records: pl.LazyFrame | pl.DataFrame) -> pl.DataFrame:
    """The games of stored pairwise records (columns :data:`GAME_SCHEMA`).

    Parameters
    ----------
    records
        Pairwise records in the store's schema (``docs/schema.md``):
        ``item_id, system_a, system_b, judge_id, generation, replicate, winner,
        preference``, and where present ``order_known``, ``length_a``,
        ``length_b``, ``judge_logprob`` and ``gold``.

    Returns
    -------
    polars.DataFrame
        ``verdict`` is the stored winner, or from a preference: ``A`` above 1/2,
        ``B`` below, ``tie`` at 1/2. ``score_a`` is the preference where given,
        else 1, 1/2 or 0 for ``A``, ``tie``, ``B``. A record with neither (which
        ingest never stores) is dropped. Rows are sorted on every column, so the
        games (and every sum over them) do not depend on the order records were read in.
    """
    lazy = records.lazy()
    present = set(lazy.collect_schema().names())
    preference = pl.col("preference").cast(pl.Float64)
    winner = pl.col("winner").cast(pl.String)
    out = lazy.select(
        pl.col("item_id").cast(pl.String),
        pl.col("system_a").cast(pl.String),
        pl.col("system_b").cast(pl.String),
        pl.col("judge_id").cast(pl.String),
        pl.col("generation").cast(pl.Int64).fill_null(0),
        pl.col("replicate").cast(pl.Int64).fill_null(0),
        pl.when(winner.is_not_null()).then(winner)
        .when(preference > 0.5).then(pl.lit("A"))
        .when(preference < 0.5).then(pl.lit("B"))
        .when(preference == 0.5).then(pl.lit("tie"))
        .otherwise(None).alias("verdict"),
        pl.when(preference.is_not_null()).then(preference)
        .when(winner == "A").then(pl.lit(1.0))
        .when(winner == "B").then(pl.lit(0.0))
        .when(winner == "tie").then(pl.lit(0.5))
        .otherwise(None).alias("score_a"),
        *(_optional(name, present) for name in _OPTIONAL),
    )
    # Sorted on every column: the store's part order (which a crash and rerun may change) must not reach
    # the float sums downstream (a preference's sum by item is not exact), so a rerun publishes bit for bit.
    return out.filter(pl.col("score_a").is_not_null()).collect().select(
        [pl.col(n).cast(t) for n, t in GAME_SCHEMA.items()]
    ).sort(list(GAME_SCHEMA), nulls_last=True, maintain_order=True)


def reconcile(games_frame: pl.DataFrame) -> pl.DataFrame:
    """One outcome per (item, unordered pair, judge, generation, replicate), orders reconciled.

    The counterbalanced rule ([Anand2026]_ table 3; [Awuni2026]_ section 3): with
    both presentation orders present, the system that won both wins (``score_x``
    1 or 0); any disagreement, a tie in either order included, is a tie (1/2).
    Where either order carries a soft preference the two scores are averaged.
    Games in one order only, or of unknown order, stand alone (``orders`` = 1).

    Parameters
    ----------
    games_frame
        A frame of :func:`games`.

    Returns
    -------
    polars.DataFrame
        Columns :data:`OUTCOME_SCHEMA`, sorted by :data:`OUTCOME_KEY`.
    """
    g = games_frame.lazy().with_columns((pl.col("system_a") < pl.col("system_b")).alias("_a_is_x"))
    oriented = g.select(
        "item_id",
        pl.when(pl.col("_a_is_x")).then(pl.col("system_a")).otherwise(pl.col("system_b")).alias("system_x"),
        pl.when(pl.col("_a_is_x")).then(pl.col("system_b")).otherwise(pl.col("system_a")).alias("system_y"),
        "judge_id", "generation", "replicate", "order_known",
        pl.when(pl.col("_a_is_x")).then(pl.col("score_a")).otherwise(1.0 - pl.col("score_a")).alias("score_x"),
        pl.when(pl.col("verdict") == "tie").then(pl.lit("tie"))
        .when((pl.col("verdict") == "A") == pl.col("_a_is_x")).then(pl.lit("x"))
        .otherwise(pl.lit("y")).alias("verdict"),
        # a soft score: anything but 0, 1/2 or 1, or a preference given beside no winner
        (~pl.col("score_a").is_in([0.0, 0.5, 1.0])).alias("_soft"),
    )
    # Games of unknown order never pair: each is its own group.
    oriented = oriented.with_columns(
        pl.when(pl.col("order_known")).then(pl.lit(-1, dtype=pl.Int64))
        .otherwise(pl.int_range(pl.len(), dtype=pl.Int64)).alias("_alone")
    )
    key = [*OUTCOME_KEY, "_alone"]
    grouped = oriented.group_by(key).agg(
        pl.len().cast(pl.Int64).alias("orders"),
        pl.col("verdict").first().alias("_v1"),
        pl.col("verdict").last().alias("_v2"),
        pl.col("score_x").mean().alias("_mean"),
        pl.col("_soft").any().alias("_soft"),
    )
    both = pl.col("orders") == 2
    agreed = pl.col("_v1") == pl.col("_v2")
    out = grouped.select(
        *OUTCOME_KEY,
        pl.when(~both | agreed).then(pl.col("_v1")).otherwise(pl.lit("tie")).alias("verdict"),
        pl.when(~both | pl.col("_soft")).then(pl.col("_mean"))
        .when(agreed & (pl.col("_v1") == "x")).then(pl.lit(1.0))
        .when(agreed & (pl.col("_v1") == "y")).then(pl.lit(0.0))
        .otherwise(pl.lit(0.5)).alias("score_x"),
        "orders",
    )
    return out.sort(list(OUTCOME_KEY)).collect().select(
        [pl.col(n).cast(t) for n, t in OUTCOME_SCHEMA.items()]
    )


def both_orders_share(outcomes: pl.DataFrame) -> float | None:
    """Share of outcomes seen in both presentation orders (``None`` when there are none)."""
    if outcomes.height == 0:
        return None
    return float((outcomes["orders"] == 2).mean())  # type: ignore[arg-type]


def _column_codes(values: pl.Series) -> tuple[np.ndarray, int]:
    """Codes 1.. of a column's values in sorted order, 0 for null; and the number of codes."""
    if values.dtype in (pl.String, pl.Categorical) or isinstance(values.dtype, pl.Enum):
        text = values.cast(pl.String)
        levels = text.drop_nulls().unique().sort()
        codes = text.cast(pl.Enum(levels.to_list())).to_physical().cast(pl.Int64).fill_null(-1)
        return codes.to_numpy() + 1, levels.len() + 1
    present = values.is_not_null().to_numpy()
    raw = values.fill_null(values.drop_nulls().min() if values.null_count() < values.len() else 0).to_numpy()
    if raw.dtype.kind in "iub" and raw.size:
        low = int(raw.min())
        inverse, n_levels = _dense(raw.astype(np.int64) - low, int(raw.max()) - low + 1)
    else:
        levels_np, inverse = np.unique(raw, return_inverse=True)
        n_levels = int(levels_np.size)
    out = np.where(present, inverse.ravel() + 1, 0).astype(np.int64)
    return out, n_levels + 1


def _dense(values: np.ndarray, bound: int) -> tuple[np.ndarray, int]:
    """Dense codes, in sorted order, of integers in ``[0, bound)``."""
    if bound <= 8 * values.size + 1024:
        seen = np.zeros(bound, dtype=bool)
        seen[values] = True
        levels = np.flatnonzero(seen)
        rank = np.zeros(bound, dtype=np.int64)
        rank[levels] = np.arange(levels.size)
        return rank[values], int(levels.size)
    levels, inverse = np.unique(values, return_inverse=True)
    return inverse.ravel().astype(np.int64), int(levels.size)


def combine_codes(parts: Sequence[tuple[np.ndarray, int]]) -> tuple[np.ndarray, int]:
    """Dense codes, in sorted tuple order, of rows given by columns of codes ``(codes, n_codes)``."""
    acc: np.ndarray | None = None
    bound = 1
    for codes, card in parts:
        if acc is None:
            acc, bound = codes.astype(np.int64), card
            continue
        if bound * card >= 2**62:
            acc, bound = _dense(acc, bound)
        acc = acc * card + codes
        bound *= card
    if acc is None or acc.size == 0:
        return np.zeros(0 if acc is None else acc.size, dtype=np.int64), 0
    return _dense(acc, bound)


def key_codes(
    frame: pl.DataFrame, columns: Sequence[str], cache: dict[str, tuple[np.ndarray, int]] | None = None
) -> tuple[np.ndarray, int]:
    """Dense codes ``0..n-1`` of the rows' tuples of ``columns``, numbered in sorted tuple order.

    Nulls sort first and equal each other; strings sort by code point, as polars sorts them.
    Returns the codes and ``n``, the number of distinct tuples. ``cache`` keeps each
    column's codes for later calls on the same frame.
    """
    parts = []
    for name in columns:
        if cache is not None and name in cache:
            parts.append(cache[name])
        else:
            parts.append(_column_codes(frame[name]))
            if cache is not None:
                cache[name] = parts[-1]
    if not parts:
        return np.zeros(frame.height, dtype=np.int64), 1 if frame.height else 0
    return combine_codes(parts)
