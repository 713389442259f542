"""``jurymeter store info``: a store's item sets, metadata, quarantine by reason and judge health."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.table import Table

from jurymeter.cli.common import (
    ConfigOpt,
    StorageOpt,
    StoreOpt,
    open_store,
    run_command,
    store_args,
)
from jurymeter.render.text import out, print_json, safe_text

if TYPE_CHECKING:
    import polars as pl



def _source_names(urls: list[str]) -> dict[str, str]:
    """A short name per source URL: its file name, or the whole URL where two share a file name."""
    base = {u: u.rstrip("/").rsplit("/", 1)[-1] or u for u in dict.fromkeys(urls)}
    taken: dict[str, int] = {}
    for name in base.values():
        taken[name] = taken.get(name, 0) + 1
    return {u: name if taken[name] == 1 else u for u, name in base.items()}



def store_info_cmd(
    store: StoreOpt = None,
    storage_option: StorageOpt = None,
    config: ConfigOpt = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON")] = False,
) -> None:
    """Records, systems, items, judges and crossing completeness per item set."""
    run_command(_store_info, store, storage_option, config, as_json)


def _store_info(store: str | None, storage_option: list[str] | None, config: Path | None, as_json: bool) -> None:
    from jurymeter.io.info import judge_health, metadata_counts, quarantine_summary, store_info

    target = open_store(store, storage_option, config)
    summary = store_info(target)
    quarantine = quarantine_summary(target)
    meta = metadata_counts(target)
    health = judge_health(target)
    if as_json:
        payload = {
            "store": target.url,
            "item_sets": summary.to_dicts(),
            "metadata": meta,
            "quarantine": {r["reason"]: r["records"] for r in quarantine.to_dicts()},
            "quarantine_sources": {
                r["reason"]: dict(zip(r["sources"], r["source_records"], strict=True)) for r in quarantine.to_dicts()
            },
            "judges": health.to_dicts(),
        }
        print_json(payload)
        return
    print_store_info(target.url, summary, quarantine, meta, store_args(store, config))
    print_judge_health(health)


def print_judge_health(health: Any) -> None:
    """Per judge, the share of its judgments that failed (parse failures, failed calls, unscored grades)."""
    if not health.height:
        return
    table = Table(title="judge health (failed = parse failures + failed calls + unscored grades)",
                  title_justify="left")
    for col in ("judge", "stored", "failed", "failed share", "parse_failure", "judge_call_failed", "unscored"):
        table.add_column(col, justify="left" if col == "judge" else "right")
    for row in health.iter_rows(named=True):
        table.add_row(safe_text(row["judge_id"]), f"{row['stored']:,}", f"{row['failed']:,}",
                      f"{100 * row['failed_share']:.1f}%", f"{row['parse_failure']:,}",
                      f"{row['judge_call_failed']:,}", f"{row['unscored']:,}")
    out.print(table)


# Sources named per reason in `store info`'s quarantine table; the rest are counted.
SOURCES_PER_REASON = 3


def print_store_info(url: str, summary: pl.DataFrame, quarantine: pl.DataFrame, meta: dict[str, int],
                     store_args: str = "") -> None:
    """The store's item sets, its metadata counts and its quarantine by reason (``io.info.quarantine_summary``)."""
    table = Table(title=f"store {safe_text(url)}", title_justify="left")
    for col in summary.columns:
        table.add_column(col, justify="left" if col in ("protocol", "item_set") else "right")
    for row in summary.iter_rows(named=True):
        table.add_row(*[
            f"{v:.3f}" if k == "completeness" else (f"{v:,}" if isinstance(v, int) else safe_text(v))
            for k, v in row.items()
        ])
    out.print(table)
    out.print(f"metadata: {meta['systems']} systems, {meta['judges']} judges")
    if not quarantine.height:
        out.print("quarantine: empty")
        return
    names = _source_names([u for urls in quarantine["sources"].to_list() for u in urls])
    q = Table(title=f"quarantine: {quarantine['records'].sum():,} records", title_justify="left")
    for col in ("reason", "records", "sources"):
        q.add_column(col, justify="right" if col == "records" else "left")
    for row in quarantine.iter_rows(named=True):
        ranked = sorted(zip(row["sources"], row["source_records"], strict=True), key=lambda kv: (-kv[1], kv[0]))
        named = ", ".join(f"{safe_text(names[u])} ({n:,})" for u, n in ranked[:SOURCES_PER_REASON])
        rest = len(ranked) - SOURCES_PER_REASON
        q.add_row(safe_text(row["reason"]), f"{row['records']:,}", named + (f" and {rest:,} more" if rest > 0 else ""))
    out.print(q)
    out.print(f"the records: jurymeter quarantine{safe_text(store_args)} --reason R (--source F, --csv)",
              markup=False, soft_wrap=True)
