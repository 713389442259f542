"""Shared helpers of the ingest tests: small dumps and the reconciliation check."""

from __future__ import annotations

from pathlib import Path

import orjson
import polars as pl

from jurymeter.io.ingest import ingest
from jurymeter.io.ingest_report import IngestReport
from jurymeter.io.schema import SOURCE_ID
from jurymeter.io.sources import discover_sources
from jurymeter.io.store import Store
from jurymeter.io.validate import ValidationOptions


def pointwise_records(
    n: int, *, item_set: str = "chat", seed: int = 0, systems: int = 4, judges: int = 3
) -> list[dict]:
    """``n`` valid pointwise records with unique keys and integer scores 1..10."""
    out = []
    for k in range(n):
        out.append(
            {
                "item_set": item_set,
                "item_id": f"item-{k // (systems * judges):05d}",
                "system_id": f"sys-{k % systems}",
                "judge_id": f"judge-{(k // systems) % judges}",
                "score": float(1 + (k * 7 + seed) % 10),
                "generation": 0,
                "replicate": 0,
            }
        )
    return out


def write_jsonl(path: Path, records: list[dict | str]) -> Path:
    lines = [r if isinstance(r, str) else orjson.dumps(r).decode() for r in records]
    path.write_text("\n".join(lines) + "\n")
    return path


def run_ingest(
    store: Store | str | Path, *paths: Path | str, **options
) -> IngestReport:
    target = store if isinstance(store, Store) else Store(str(store))
    block_bytes = options.pop("block_bytes", 64 * 1024 * 1024)
    strict = options.pop("strict", False)
    report = ingest(
        target,
        discover_sources([str(p) for p in paths]),
        ValidationOptions(**options),
        block_bytes=block_bytes,
        strict=strict,
    )
    assert_reconciled(target, report)
    return report


def assert_reconciled(store: Store, report: IngestReport) -> None:
    """The report balances, and the store holds exactly what the report says.

    The second half is independent of the report's own arithmetic: rows are
    counted in the committed files, by source id.
    """
    for source in report.sources:
        assert source.read == source.accepted + source.quarantined + source.duplicates_dropped, (
            source
        )
        if source.status != "ingested":
            continue
        sid = store.source_id(source.content_key)
        stored = sum(
            store.read_parquet(f.path).height for f in store.data_files() if f.source_id == sid
        )
        quarantined = sum(
            store.read_parquet(p).filter(pl.col(SOURCE_ID) == sid).height
            for p in store.quarantine_files()
        )
        assert stored == source.accepted, (source.source, stored, source.accepted)
        assert quarantined == source.quarantined, (source.source, quarantined, source.quarantined)


def store_snapshot(store: Store) -> dict[str, pl.DataFrame]:
    """Everything a reader can see, in a canonical order, for comparing stores."""
    out = {}
    for protocol in ("pointwise", "pairwise", "systems", "judges"):
        frame = store.scan(protocol).collect()  # type: ignore[arg-type]
        out[protocol] = frame.sort(frame.columns, nulls_last=True)
    files = store.quarantine_files()
    q = pl.concat([store.read_parquet(p) for p in files]) if files else pl.DataFrame()
    out["quarantine"] = q.sort(["source", "line", "reason"]) if files else q
    return out


def assert_same_store(a: Store, b: Store) -> None:
    left, right = store_snapshot(a), store_snapshot(b)
    for name in left:
        assert left[name].equals(right[name]), name
