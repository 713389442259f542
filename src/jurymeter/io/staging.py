"""One source's batches validated and staged: accepted rows as invisible parts per partition, rejected ones to quarantine.

The block path of :mod:`jurymeter.io.ingest` (step 2 of its transaction): the
parts are invisible to readers until the source's commit marker is written.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

import numpy as np
import polars as pl

from jurymeter.io.adapters.reading import REJECT_MESSAGE, REJECT_REASON
from jurymeter.io.ingest_report import SourceReport
from jurymeter.io.schema import (
    QUARANTINE_SCHEMA,
    SCHEMAS,
    SOURCE_ID,
    SOURCE_LINE,
    Protocol,
    detect_protocol,
)
from jurymeter.io.source_files import RawBatch, SourceFile
from jurymeter.io.store import Store
from jurymeter.io.validate import ROW, ValidationOptions, apply_column_map, validate_batch


@dataclass(slots=True)
class Staged:
    """Parts written for one source before its commit."""

    sid: str
    parts: list[tuple[str | None, str]] = field(default_factory=list)  # (item_set, relpath)
    quarantine_parts: list[str] = field(default_factory=list)
    seq: int = 0
    # Per item set, the distinct values of the staged rows' key columns (``io.key_values``),
    # found by the duplicate pass and written at the commit.
    key_values: dict[str, pl.DataFrame] = field(default_factory=dict)

    def next_name(self) -> str:
        self.seq += 1
        return f"part-{self.sid}-{self.seq:05d}.parquet"


def quarantine_frame(
    source: SourceFile,
    sid: str,
    protocol: str | None,
    lines: np.ndarray,
    raws: list[str],
    reasons: list[str] | pl.Series,
    messages: list[str] | pl.Series,
    judges: pl.Series | None = None,
) -> pl.DataFrame:
    n = len(lines)
    return pl.DataFrame(
        {
            "source": [source.url] * n,
            "line": lines.astype(np.int64),
            "raw": raws,
            "reason": reasons,
            "message": messages,
            "protocol": [protocol] * n,
            SOURCE_ID: [sid] * n,
            "judge_id": judges if judges is not None else [None] * n,
        },
        schema=QUARANTINE_SCHEMA,
    )



def validate_stage(
    store: Store,
    source: SourceFile,
    staged: Staged,
    options: ValidationOptions,
    batches: Iterator[RawBatch],
    result: SourceReport,
    reasons: Counter[str],
) -> Protocol | None:
    """Validate and stage the batches of ``source``; its protocol."""
    sid = staged.sid
    protocol: Protocol | None = None
    decided = False
    last_line = 0
    for batch in batches:
        result.read += batch.n_read
        # Lines come in file order; one line may hold several judgments.
        # Counted vectorized: a Python loop here ran once a line on every canonical block.
        seen = np.unique(np.concatenate([batch.lines, np.asarray([m.line for m in batch.malformed], dtype=np.int64)]))
        if len(seen):
            result.lines += len(seen) - int(seen[0] == last_line)  # a line split across two batches counts once
            last_line = int(seen[-1])
        frame = apply_column_map(batch.frame, options.column_map) if source.adapter is None else batch.frame
        if not decided and frame.width:
            protocol, decided = detect_protocol(set(frame.columns)), True
        quarantined: list[pl.DataFrame] = []
        if batch.malformed:
            quarantined.append(
                quarantine_frame(
                    source,
                    sid,
                    protocol,
                    np.asarray([m.line for m in batch.malformed]),
                    [m.raw for m in batch.malformed],
                    [m.reason for m in batch.malformed],  # malformed_line, invalid_text or truncated
                    [m.message for m in batch.malformed],
                )
            )
        if frame.height and protocol is None:
            quarantined.append(_unknown_protocol(source, sid, frame, batch))
        elif frame.height and protocol is not None:
            quarantined += _stage_rows(store, source, staged, options, protocol, frame, batch)
        for q in quarantined:
            reasons.update(q["reason"].to_list())
            relpath = f"quarantine/{staged.next_name()}"
            store.write_parquet(relpath, q)
            staged.quarantine_parts.append(relpath)
    return protocol


def _unknown_protocol(source: SourceFile, sid: str, frame: pl.DataFrame, batch: RawBatch) -> pl.DataFrame:
    """Every record of a batch whose columns tell no protocol, as quarantine rows."""
    rows = np.arange(frame.height)
    return (
        quarantine_frame(
            source,
            sid,
            None,
            batch.lines,
            batch.raw(rows),
            ["unknown_protocol"] * frame.height,
            [
                "cannot tell the protocol from the columns "
                f"{sorted(frame.columns)}: expected 'score' (pointwise), "
                "'system_a'/'system_b' with 'winner' or 'preference' (pairwise), "
                "or a systems/judges metadata table (use --map to rename)"
            ]
            * frame.height,
        )
    )


def _stage_rows(
    store: Store,
    source: SourceFile,
    staged: Staged,
    options: ValidationOptions,
    protocol: Protocol,
    frame: pl.DataFrame,
    batch: RawBatch,
) -> list[pl.DataFrame]:
    """Stage a batch's accepted rows; its rejected ones (by the adapter, then by validation) as quarantine frames."""
    sid = staged.sid
    out: list[pl.DataFrame] = []
    if REJECT_REASON in frame.columns:  # judgments the adapter rejected (parse failures, failed calls)
        told_rows = np.flatnonzero(frame[REJECT_REASON].is_not_null().to_numpy())
        if len(told_rows):
            out.append(
                quarantine_frame(
                    source, sid, protocol, batch.lines[told_rows], batch.raw(told_rows),
                    frame[REJECT_REASON].gather(told_rows), frame[REJECT_MESSAGE].gather(told_rows),
                    frame["judge_id"].gather(told_rows) if "judge_id" in frame.columns else None,
                )
            )
        keep = np.flatnonzero(frame[REJECT_REASON].is_null().to_numpy())
        frame = frame.drop(REJECT_REASON, REJECT_MESSAGE)[keep]
        batch = RawBatch(frame=frame, lines=batch.lines[keep], malformed=[],
                         raw=_subset_raw(batch.raw, keep), marked=batch.marked)
    accepted, rejected = validate_batch(frame, protocol, options, marked=batch.marked)
    if rejected.height:
        rows = rejected[ROW].to_numpy()
        out.append(
            quarantine_frame(
                source,
                sid,
                protocol,
                batch.lines[rows],
                batch.raw(rows),
                rejected["reason"],
                rejected["message"],
            )
        )
    _write_accepted(store, staged, protocol, accepted, batch)
    return out


def _subset_raw(raw: Callable[[np.ndarray], list[str]], keep: np.ndarray) -> Callable[[np.ndarray], list[str]]:
    """The raw text of a batch's rows ``keep[rows]``: rows of its subset, numbered anew."""
    return lambda rows: raw(keep[rows])


def _write_accepted(
    store: Store, staged: Staged, protocol: Protocol, accepted: pl.DataFrame, batch: RawBatch
) -> None:
    if not accepted.height:
        return
    lines = pl.Series(SOURCE_LINE, batch.lines, dtype=pl.Int64).gather(accepted[ROW])
    accepted = accepted.drop(ROW).with_columns(
        pl.lit(staged.sid, dtype=pl.String).alias(SOURCE_ID), lines
    )
    if "item_set" in SCHEMAS[protocol].dtypes:
        groups = accepted.partition_by("item_set", as_dict=True, include_key=False)
        items: list[tuple[str | None, pl.DataFrame]] = [
            (str(key[0]), part) for key, part in groups.items()
        ]
    else:
        items = [(None, accepted)]
    for item_set, part in items:
        relpath = f"{store.name_partition(protocol, item_set)}/{staged.next_name()}"
        store.write_parquet(relpath, part)
        staged.parts.append((item_set, relpath))


