"""Which committed sources can hold a duplicate of new records: per-source key values, read instead of keys.

The duplicate pass (:mod:`jurymeter.io.duplicates`) compares new records with
the committed records of their item set whose key (without the rating columns)
hashes alike. A committed source can hold such a record only if, on *every*
one of those key columns, it holds the new record's value. So each source
keeps, per item set, the distinct values of each key column (written at its
commit, beside its parts, from its staged rows)::

    keys/protocol=<p>/item_set=<enc>/part-<sid>-keys.parquet   columns: column, value (text; null kept), _source_id
    keys/protocol=<p>/item_set=<enc>/merged-keys.parquet       the same rows of many committed sources

and the pass reads only the sources whose values meet the new ones on every
column (:func:`candidate_sources`): a night of new systems, new items, a new
judge or a new generation touches no committed source at all, so its cost is
O(new records + stored distinct values), not O(stored records). A night that
only fills gaps between known systems, items and judges reads the sources it
overlaps, as before. The test is per source and per column, so it never drops
a source that holds a duplicate (it may keep one that does not).

A source's values are written just before its marker and carry its source id
as its parts do: they count only once the marker exists, and
``Store.remove_uncommitted`` removes them otherwise. A committed source
without them (a store written before, or a write that failed) is always a
candidate, and its values are written when the pass reads it
(:func:`backfill_sources`): the next ingest repairs what is missing.
"""

from __future__ import annotations

import contextlib
from typing import TYPE_CHECKING

import polars as pl

from jurymeter.errors import StoreError
from jurymeter.io.schema import SOURCE_ID, Protocol
from jurymeter.io.store import KEYS_ROOT, DataFile, Store

if TYPE_CHECKING:
    from polars._typing import PolarsDataType

# The values of the item set's sources merged into one file (``_source_id`` tells whose),
# rewritten once this many sources' own files have gathered beside it.
MERGED_VALUES = "merged-keys.parquet"
MERGE_EVERY = 32
VALUE_COLUMNS = pl.Schema({"column": pl.String(), "value": pl.String()})


def keys_dir(protocol: Protocol, item_set: str) -> str:
    """The folder of an item set's key values (its data partition's path under ``keys/``)."""
    return KEYS_ROOT + Store.partition_dir(protocol, item_set)[len("data") :]


def key_values_file(protocol: Protocol, item_set: str, sid: str) -> str:
    return f"{keys_dir(protocol, item_set)}/part-{sid}-keys.parquet"


def distinct_values(records: pl.LazyFrame, columns: list[str]) -> pl.DataFrame:
    """The distinct values of each of ``columns`` as rows (``column``, ``value`` as text, null kept)."""
    per_column = [
        records.select(pl.col(c).cast(pl.String).alias("value")).unique().select(pl.lit(c).alias("column"), "value")
        for c in columns
    ]
    frames = pl.collect_all(per_column)
    return pl.concat(frames).cast(VALUE_COLUMNS) if frames else pl.DataFrame(schema=VALUE_COLUMNS)


def candidate_sources(
    store: Store, protocol: Protocol, item_set: str, files: list[DataFile], new_values: pl.DataFrame,
    columns: list[str],
) -> tuple[set[str], set[str]]:
    """The committed sources of ``files`` that may hold a record equal to a new one on ``columns``.

    Returns (candidates, without values): a source whose values meet
    ``new_values`` on every column, and the sources with no values file (always
    candidates; see :func:`backfill_sources`). The values are read from the
    item set's merged file and the files of sources not in it yet; once
    :data:`MERGE_EVERY` such files have gathered they are added to the merged
    file, so a read costs one merged file and a bounded number of small ones
    (on S3: GETs), and its rewrite is amortised over that many commits.
    """
    sids = {f.source_id for f in files}
    schema: dict[str, PolarsDataType] = {**VALUE_COLUMNS, SOURCE_ID: pl.String()}
    folder = keys_dir(protocol, item_set)
    merged_path = store.path(f"{folder}/{MERGED_VALUES}")
    merged = None
    if store.fs.exists(merged_path):
        merged = store.scan_files([merged_path], list(schema), protocol, dtypes=schema).filter(
            pl.col(SOURCE_ID).is_in(sorted(sids)))
        covered = set(merged.select(pl.col(SOURCE_ID).unique()).collect()[SOURCE_ID].to_list())
    else:
        covered = set()
    held = {sid: path for path, sid in store.source_files(folder) if sid in sids and sid not in covered}
    missing = sids - covered - set(held)
    recent = store.scan_files(sorted(held.values()), list(schema), protocol, dtypes=schema) if held else None
    tables = [t for t in (merged, recent) if t is not None]
    if not tables:
        return missing, missing
    if len(held) >= MERGE_EVERY:
        with contextlib.suppress(StoreError):  # a read-only store: merged by a later ingest
            store.write_parquet_atomic(f"{folder}/{MERGED_VALUES}", pl.concat(tables).collect())
    met = (
        pl.concat(tables)
        .join(new_values.lazy(), on=["column", "value"], how="semi", nulls_equal=True)
        .group_by(SOURCE_ID)
        .agg(pl.col("column").n_unique().alias("columns"))
        .filter(pl.col("columns") == len(columns))
        .collect()
    )
    return set(met[SOURCE_ID].to_list()) | missing, missing


def backfill_sources(
    store: Store, protocol: Protocol, item_set: str, files: list[DataFile], sids: set[str], columns: list[str]
) -> None:
    """Write the key values of committed sources that have none, from their parts (a store older than them)."""
    for sid in sorted(sids):
        paths = [f.path for f in files if f.source_id == sid]
        values = distinct_values(store.scan_files(paths, columns, protocol), columns)
        with contextlib.suppress(StoreError):  # a read-only store: written by a later ingest
            store.write_parquet_atomic(key_values_file(protocol, item_set, sid), _with_source(values, sid))


def write_source_values(
    store: Store, sid: str, protocol: Protocol, values: dict[str, pl.DataFrame], item_sets: set[str]
) -> None:
    """Write one source's key values for each item set it keeps parts in (at its commit, before its marker)."""
    for item_set in sorted(item_sets):
        if item_set in values:
            store.write_parquet_atomic(key_values_file(protocol, item_set, sid), _with_source(values[item_set], sid))


def _with_source(values: pl.DataFrame, sid: str) -> pl.DataFrame:
    """The values as written: with the source's id, so one scan reads every source's at once."""
    return values.with_columns(pl.lit(sid, dtype=pl.String).alias(SOURCE_ID))
