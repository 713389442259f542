"""Store summary: per protocol and item set, what the store holds and how crossed it is; the quarantine's counts."""

from __future__ import annotations

import polars as pl

from jurymeter.io.quarantine import reasons_by_source, scan_committed
from jurymeter.io.schema import JUDGE_FAILURES, JUDGMENT_PROTOCOLS, RATING_KEY, SCHEMAS, Protocol
from jurymeter.io.store import Store

INFO_COLUMNS = (
    "protocol",
    "item_set",
    "records",
    "systems",
    "items",
    "judges",
    "generations",
    "replicates",
    "cells_present",
    "cells_possible",
    "completeness",
)


def _summary_of(protocol: Protocol, item_set: str, frame: pl.LazyFrame) -> pl.LazyFrame:
    """One summary row.

    Completeness is the share of crossed cells present: for pointwise data the
    cells are (system, item, judge); for pairwise data (unordered system pair,
    item, judge) over the pairs that occur at all, since a pairwise design need
    not compare every pair.
    """
    if protocol == "pointwise":
        systems = pl.col("system_id").n_unique()
        unit = pl.col("system_id")
        units = systems
    else:
        systems = pl.concat_list("system_a", "system_b").explode().n_unique()
        unit = pl.concat_str(
            pl.min_horizontal("system_a", "system_b"),
            pl.max_horizontal("system_a", "system_b"),
            separator="\x1f",
        )
        units = unit.n_unique()
    cells = pl.struct(unit.alias("u"), "item_id", "judge_id").n_unique()
    items = pl.col("item_id").n_unique()
    judges = pl.col("judge_id").n_unique()
    possible = units.cast(pl.Int64) * items.cast(pl.Int64) * judges.cast(pl.Int64)
    return frame.select(
        pl.lit(protocol).alias("protocol"),
        pl.lit(item_set).alias("item_set"),
        pl.len().cast(pl.Int64).alias("records"),
        systems.cast(pl.Int64).alias("systems"),
        items.cast(pl.Int64).alias("items"),
        judges.cast(pl.Int64).alias("judges"),
        pl.col("generation").n_unique().cast(pl.Int64).alias("generations"),
        pl.col("replicate").n_unique().cast(pl.Int64).alias("replicates"),
        cells.cast(pl.Int64).alias("cells_present"),
        possible.alias("cells_possible"),
        (cells / possible).alias("completeness"),
    )


def _most_ratings(protocol: Protocol, frame: pl.LazyFrame) -> pl.LazyFrame:
    """The most ratings of one (system or systems, item, judge, generation): its replicates as the fits count them.

    Where runs or batches rate one output several times under one replicate
    number (``io.schema.RATING_KEY``), the distinct replicate numbers undercount
    them; the fits number such ratings as replicates (``pipeline.fit.rated_replicates``).
    """
    cell = [c for c in SCHEMAS[protocol].key if c not in ("item_set", "replicate", *RATING_KEY)]
    return frame.group_by(cell).agg(pl.struct("replicate", *RATING_KEY).n_unique().alias("n")).select(
        pl.col("n").max().cast(pl.Int64).alias("replicates"))


def store_info(store: Store) -> pl.DataFrame:
    """One row per (protocol, item set) with counts and crossing completeness.

    ``replicates`` is the number of distinct replicate numbers, or, in an item
    set whose records carry a run or batch, the most ratings of one output by
    one judge (:func:`_most_ratings`).
    """
    store.check()
    rows, rated, scans = [], [], []
    for protocol in JUDGMENT_PROTOCOLS:
        for item_set in store.item_sets(protocol):
            scan = store.scan(protocol, item_set)
            rows.append(_summary_of(protocol, item_set, scan))
            rated.append(scan.select(pl.any_horizontal(pl.col(c).is_not_null() for c in RATING_KEY).any()))
            scans.append((protocol, scan))
    if not rows:
        return pl.DataFrame(schema={c: pl.String if c in ("protocol", "item_set") else (pl.Float64 if c == "completeness" else pl.Int64) for c in INFO_COLUMNS})
    summary = pl.concat(pl.collect_all(rows))
    flags = [bool(f.item()) for f in pl.collect_all(rated)]
    if any(flags):
        counted = iter(pl.collect_all([_most_ratings(p, scan) for (p, scan), f in zip(scans, flags, strict=True) if f]))
        replicates = [int(next(counted).item()) if f else r
                      for f, r in zip(flags, summary["replicates"].to_list(), strict=True)]
        summary = summary.with_columns(pl.Series("replicates", replicates, dtype=pl.Int64))
    return summary


def metadata_counts(store: Store) -> dict[str, int]:
    """Rows in the systems and judges metadata tables."""
    return {
        p: store.scan(p).select(pl.len()).collect().item()
        for p in ("systems", "judges")
    }


def quarantine_counts(store: Store) -> pl.DataFrame:
    """Quarantined records per reason (``reason``, ``records``), from the ``reason`` column alone."""
    lazy = scan_committed(store, columns=["reason"])
    return lazy.group_by("reason").agg(pl.len().alias("records")).sort("reason").collect(engine="streaming")


def quarantine_summary(store: Store) -> pl.DataFrame:
    """Per reason: the records quarantined and the sources they came from.

    Columns ``reason``, ``records`` (Int64), ``sources`` (the source URLs, sorted)
    and ``source_records`` (their records, in the same order), sorted by reason.
    """
    by_source = reasons_by_source(store)
    return by_source.group_by("reason").agg(
        pl.col("records").sum().cast(pl.Int64),
        pl.col("source").alias("sources"),
        pl.col("records").alias("source_records"),
    ).sort("reason")


def judge_health(store: Store, protocol: Protocol | None = None) -> pl.DataFrame:
    """Per judge: judgments stored, judgments that failed (by reason), and the failed share.

    ``protocol``: count only that protocol's judgments and failures (a judge
    that grades pointwise and pairwise may fail at one and not the other).

    A failure is a judgment a log adapter rejected because the judge did not
    give a usable verdict (``io.schema.JUDGE_FAILURES``: a parse failure, a
    failed call, an unscored grade), so a broken judge is visible instead of
    silently thinner. ``failed_share = failed / (stored + failed)``.
    """
    scope = protocol
    stored = [
        store.scan(protocol).select("judge_id").group_by("judge_id").agg(pl.len().alias("stored"))
        for protocol in (JUDGMENT_PROTOCOLS if scope is None else (scope,))
    ]
    # Streaming: the judge_id column of every stored record is never held whole (every night reads it).
    counts = pl.concat(pl.collect_all(stored, engine="streaming")).group_by("judge_id").agg(
        pl.col("stored").sum().cast(pl.Int64))
    # Three columns of the committed parts, lazily: a part written before judge_id
    # existed reads it as null, and its failures drop with the null judges below.
    failed = scan_committed(store, columns=["judge_id", "reason", "protocol"]).filter(
        pl.col("reason").is_in(JUDGE_FAILURES)
    )
    if scope is not None:
        failed = failed.filter(pl.col("protocol") == scope)
    schema = {"judge_id": pl.String, "stored": pl.Int64, "failed": pl.Int64, "failed_share": pl.Float64,
              **{r: pl.Int64 for r in JUDGE_FAILURES}}
    failures = failed.drop_nulls("judge_id").group_by("judge_id").agg(
        pl.len().cast(pl.Int64).alias("failed"),
        *(((pl.col("reason") == r).sum().cast(pl.Int64)).alias(r) for r in JUDGE_FAILURES),
    ).collect(engine="streaming")
    joined = counts.join(failures, on="judge_id", how="full", coalesce=True).with_columns(
        pl.col("stored").fill_null(0), pl.col("failed").fill_null(0), *(pl.col(r).fill_null(0) for r in JUDGE_FAILURES)
    )
    if not joined.height:
        return pl.DataFrame(schema=schema)
    return joined.with_columns(
        (pl.col("failed") / (pl.col("stored") + pl.col("failed"))).alias("failed_share")
    ).select(list(schema)).sort("judge_id")
