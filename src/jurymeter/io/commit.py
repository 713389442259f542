"""The commit step of one staged source (steps 3 and 4 of an ingest): duplicates, counts, the marker last.

:func:`commit_staged` is the one place a source becomes visible, in a serial
and a mapped ingest alike (:mod:`jurymeter.io.ingest` calls it under the
store's write lock, in the sources' order), so every file a commit adds (the
cell statistics of :mod:`jurymeter.io.cell_stats`) is written here, before the
marker.
"""

from __future__ import annotations

import datetime as dt
from collections import Counter
from typing import Any, cast

import numpy as np

from jurymeter.errors import StrictModeError
from jurymeter.io.cell_stats import write_source_cells
from jurymeter.io.duplicates import resolve_duplicates
from jurymeter.io.ingest_report import SourceReport
from jurymeter.io.key_values import write_source_values
from jurymeter.io.records import read_batches
from jurymeter.io.schema import Protocol
from jurymeter.io.source_files import BOM, DOCUMENT_FORMATS, SourceFile
from jurymeter.io.staging import Staged, quarantine_frame
from jurymeter.io.store import Store
from jurymeter.io.text import escaped
from jurymeter.io.validate import ValidationOptions


def now() -> str:
    """The time of a commit (and of a run's start and end) as ISO 8601 UTC, to the second."""
    return dt.datetime.now(dt.UTC).isoformat(timespec="seconds")


def rows_for(block_bytes: int) -> int:
    """Parquet rows per batch for a byte budget (about 128 bytes a record in JSON)."""
    return max(1, block_bytes // 128)


def commit_staged(
    store: Store,
    source: SourceFile,
    result: SourceReport,
    staged: Staged,
    options: ValidationOptions,
    run_id: str,
    strict: bool,
    block_bytes: int,
) -> SourceReport:
    """Commit one staged source: duplicates against the committed rows, the counts, the marker last.

    The one place a source becomes visible (serial or mapped ingest alike),
    so a step every commit must take goes here, before the marker.
    """
    reasons = Counter(result.reasons)
    protocol = cast("Protocol | None", result.protocol)
    sid = staged.sid
    if protocol is not None and staged.parts:
        dropped, conflicts = resolve_duplicates(store, staged, protocol)
        result.duplicates_dropped = dropped
        if conflicts is not None and conflicts.height:
            raws = _fetch_raw(source, conflicts["line"].to_numpy(), block_bytes)
            q = quarantine_frame(
                source,
                sid,
                protocol,
                conflicts["line"].to_numpy(),
                [raws.get(int(line), "") for line in conflicts["line"]],
                ["conflicting_duplicate"] * conflicts.height,
                conflicts["message"],
            )
            reasons.update(q["reason"].to_list())
            relpath = f"quarantine/{staged.next_name()}"
            store.write_parquet(relpath, q)
            staged.quarantine_parts.append(relpath)
    result.reasons = dict(sorted(reasons.items()))
    result.quarantined = sum(reasons.values())
    result.accepted = result.read - result.quarantined - result.duplicates_dropped
    if strict and result.quarantined:
        msg = (
            f"--strict: {result.quarantined} record(s) of {source.url} rejected "
            f"({', '.join(f'{k}: {v}' for k, v in result.reasons.items())}); source not committed"
        )
        raise StrictModeError(msg)
    write_source_cells(store, sid, protocol, staged.parts)  # from the final parts; invisible until the marker
    if protocol is not None:
        write_source_values(store, sid, protocol, staged.key_values, {s for s, _ in staged.parts if s is not None})
    key = result.content_key
    store.write_json(f"ingested/{key}.json",
                     _marker(source, key, sid, protocol, run_id, options, result, staged))
    return result


def _marker(
    source: SourceFile,
    key: str,
    sid: str,
    protocol: Protocol | None,
    run_id: str,
    options: ValidationOptions,
    result: SourceReport,
    staged: Staged,
) -> dict[str, Any]:
    """The source's commit marker: what was read from it and where its parts are (step 4).

    ``content_key`` is the marker's name (``b3-<BLAKE3 hex>``) and ``algorithm``
    its hash; a marker without them (written before) is keyed by ``sha256``.
    """
    return {
        "content_key": key,
        "algorithm": "blake3",
        "source_id": sid,
        "source": source.url,
        "size": source.size,
        "format": source.format,
        "log_format": result.format,
        "protocol": protocol,
        "run_id": run_id,
        "committed": now(),
        "options": {
            "map": options.column_map,
            "item_set": options.item_set,
            "scale": list(options.scale) if options.scale else None,
        },
        "counts": {
            "lines": result.lines,
            "read": result.read,
            "accepted": result.accepted,
            "quarantined": result.quarantined,
            "duplicates_dropped": result.duplicates_dropped,
            "reasons": result.reasons,
        },
        "parts": [p for _, p in staged.parts],
        "quarantine_parts": staged.quarantine_parts,
    }


def _fetch_raw(source: SourceFile, lines: np.ndarray, block_bytes: int) -> dict[int, str]:
    """Raw text of the given lines, by reading the source again (conflicts only).

    A JSON Lines source's lines are split, not parsed, up to the last one
    wanted: the text each reader quotes (``records``: the line's bytes with
    invalid UTF-8 escaped, the byte-order mark left out), at the cost of a
    read instead of a second parse of the whole file on the commit step.
    """
    wanted = set(int(x) for x in lines)
    if source.adapter is not None or source.format == "jsonl":
        from jurymeter.io.adapters.reading import FileBytes

        if source.adapter is not None and source.format in DOCUMENT_FORMATS:
            return {}  # a document has no lines to show; the message names the key
        found: dict[int, str] = {}
        order = sorted(wanted)
        k = 0
        # The wanted lines are picked out of each block of split lines by index, not by a
        # Python step per line of the file (a source's few conflicts cost its split alone).
        for first, block in FileBytes(source).line_blocks():
            end = first + len(block)
            while k < len(order) and order[k] < end:
                n = order[k]
                k += 1
                if n < first:
                    continue  # not a line of the file (no such line number was read)
                data = block[n - first]
                if source.adapter is not None:
                    found[n] = data.decode("utf-8", "replace")
                else:
                    found[n] = escaped(data.removeprefix(BOM) if n == 1 else data)
            if k == len(order):
                break
        return found
    out: dict[int, str] = {}
    for batch in read_batches(
        source, block_bytes=block_bytes, parquet_rows=rows_for(block_bytes)
    ):
        hit = np.flatnonzero(np.isin(batch.lines, list(wanted)))
        if len(hit):
            for line, text in zip(batch.lines[hit], batch.raw(hit), strict=True):
                out[int(line)] = text
    return out
