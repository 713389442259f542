"""The duplicate pass reads only the committed sources whose key values meet the new ones (``io/key_values.py``).

| contract | independent reference |
| --- | --- |
| after every night of a random sequence (new systems, new items, gap fills between known levels, exact re-deliveries in other bytes, conflicting duplicates, quarantined records), the store holds exactly the first value delivered for each key, and each night's dropped and conflicting counts are those of the duplicate rule | a Python dict replaying the rule record by record (first value kept; same value dropped; another value quarantined) |
| the store, the quarantine (reasons and messages) and every count equal those of the pass that reads every committed source | the same nights ingested with the pruning switched off |
| a night of new systems or new items reads no committed part; a gap fill reads the sources it overlaps | the paths the pass scans |
| a store without key values (older, or deleted) still finds every duplicate and gets them written; a source that never committed leaves none behind | the file listing |
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import polars as pl
import pytest

from ingest_util import run_ingest, write_jsonl
from jurymeter.io import duplicates, key_values
from jurymeter.io.schema import SOURCE_ID
from jurymeter.io.store import KEYS_ROOT, STAGING, Store

Key = tuple[str, str, str, int]


def _record(key: Key, score: float) -> dict[str, Any]:
    system, item, judge, generation = key
    return {"item_set": "night", "system_id": system, "item_id": item, "judge_id": judge,
            "generation": generation, "replicate": 0, "score": score}


def _nights(seed: int) -> list[list[dict[str, Any] | str]]:
    """Eight nights: each adds new systems, new items or fills gaps, and re-delivers or contradicts stored keys."""
    rng = np.random.default_rng(seed)
    delivered: dict[Key, float] = {}
    nights: list[list[dict[str, Any] | str]] = []
    systems, items = [f"s{k}" for k in range(3)], [f"item-{k:02d}" for k in range(6)]
    judges = ["j0", "j1"]
    for night in range(8):
        kind = ["systems", "items", "gaps"][night % 3] if night else "first"
        if kind == "systems":
            systems_now = [f"s{len(systems) + k}" for k in range(2)]
            systems += systems_now
            keys = [(s, i, j, 0) for s in systems_now for i in items for j in judges]
        elif kind == "items":
            items_now = [f"item-{len(items) + k:02d}" for k in range(3)]
            items += items_now
            keys = [(s, i, j, 0) for s in systems for i in items_now for j in judges]
        else:  # the first night, then gaps: known levels, combinations not yet delivered
            keys = [(s, i, j, g) for s in systems for i in items for j in judges for g in (0, 1)]
        fresh = [k for k in keys if k not in delivered]
        picked = [fresh[k] for k in rng.choice(len(fresh), size=max(1, int(0.6 * len(fresh))), replace=False)]
        out: list[dict[str, Any] | str] = [_record(k, float(np.round(rng.normal(5, 2), 3))) for k in picked]
        old = sorted(delivered)
        if old:
            for k in rng.choice(len(old), size=min(len(old), 15), replace=False):
                out.append(_record(old[k], delivered[old[k]]))  # an exact re-delivery
            for k in rng.choice(len(old), size=min(len(old), 4), replace=False):
                out.append(_record(old[k], delivered[old[k]] + 0.5))  # a conflicting duplicate
        out.append(_record(picked[0], float(out[0]["score"])))  # a repeat inside the file: dropped  # type: ignore[index]
        out.append({**_record(("s0", "item-00", "j0", 0), 1.0), "score": "bad"})  # quarantined
        out.append("{cut")  # quarantined
        for r in out:
            if isinstance(r, dict) and isinstance(r["score"], float):
                delivered.setdefault((r["system_id"], r["item_id"], r["judge_id"], r["generation"]), r["score"])
        nights.append([out[k] for k in rng.permutation(len(out))])
    return nights


def _replay(nights: list[list[dict[str, Any] | str]]) -> tuple[dict[Key, float], list[tuple[int, int]]]:
    """The duplicate rule record by record: the kept value of each key; each night's (dropped, conflicting)."""
    stored: dict[Key, float] = {}
    counts = []
    for records in nights:
        dropped = conflicting = 0
        night: dict[Key, list[float]] = {}
        for r in records:
            if isinstance(r, dict) and isinstance(r["score"], float):
                night.setdefault((r["system_id"], r["item_id"], r["judge_id"], r["generation"]), []).append(r["score"])
        for key, values in night.items():
            if key in stored:
                same = sum(v == stored[key] for v in values)
                dropped, conflicting = dropped + same, conflicting + len(values) - same
            elif len(set(values)) == 1:
                stored[key] = values[0]
                dropped += len(values) - 1
            else:
                conflicting += len(values)
        counts.append((dropped, conflicting))
    return stored, counts


def _ingest_nights(root: Path, nights: list[list[dict[str, Any] | str]]) -> tuple[Store, list[tuple[int, int]]]:
    root.mkdir()
    store = Store(str(root / "store"))
    counts = []
    for n, records in enumerate(nights):
        report = run_ingest(store, write_jsonl(root / f"night-{n}.jsonl", records))
        source = report.sources[0]
        counts.append((source.duplicates_dropped, source.reasons.get("conflicting_duplicate", 0)))
    return store, counts


def _stored(store: Store) -> dict[Key, float]:
    frame = store.scan("pointwise", "night").select("system_id", "item_id", "judge_id", "generation", "score").collect()
    return {(s, i, j, g): v for s, i, j, g, v in frame.iter_rows()}


def _quarantine(store: Store, root: Path) -> list[tuple[Any, ...]]:
    """Every quarantined record (file name, line, reason, message), the folder of the nights left out."""
    frame = pl.concat([store.read_parquet(p) for p in store.quarantine_files()])
    rows = frame.select("source", "line", "reason", "message").iter_rows()
    return sorted((Path(s).name, n, r, m.replace(str(root), "")) for s, n, r, m in rows)


def _colliding_hash(columns: list[str]) -> pl.Expr:
    """A hash that collides on purpose: 256 values for a few hundred keys, so a new row often shares its hash
    with one stored row of another key (judged by the join of pairs) or with several (collected), and the
    exact comparison, not the hash, must tell them apart."""
    return pl.struct(columns).hash() % 256


@pytest.mark.parametrize(("seed", "per_pass", "merge_every", "collide"), [
    (0, duplicates.CANDIDATES_PER_PASS, 32, False), (1, duplicates.CANDIDATES_PER_PASS, 2, False), (2, 7, 3, False),
    (3, duplicates.CANDIDATES_PER_PASS, 32, True), (4, 1, 3, True)])
def test_random_nights_keep_the_first_value_of_every_key_as_the_full_pass_does(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, seed: int, per_pass: int, merge_every: int, collide: bool
) -> None:
    """``per_pass`` 7 or 1: the candidates in many hash buckets, spilled to the staging area and read one by
    one (and the one-new-one-stored pairs judged in as many joins); ``merge_every`` 2 or 3: the values read
    from the merged file and the sources' files not in it yet; ``collide``: a hash of few values
    (:func:`_colliding_hash`)."""
    monkeypatch.setattr(duplicates, "CANDIDATES_PER_PASS", per_pass)
    if collide:
        monkeypatch.setattr(duplicates, "key_hash", _colliding_hash)
    monkeypatch.setattr(key_values, "MERGE_EVERY", merge_every)
    nights = _nights(seed)
    truth, truth_counts = _replay(nights)
    pruned, pruned_counts = _ingest_nights(tmp_path / "pruned", nights)
    merged = tmp_path / "pruned" / "store" / key_values.keys_dir("pointwise", "night") / key_values.MERGED_VALUES
    assert merged.exists() == (merge_every < 8)  # eight nights: merged once its files reach merge_every
    assert not list((tmp_path / "pruned" / "store").glob(f"{STAGING}/*")), "the spilled buckets are removed"
    assert _stored(pruned) == truth
    assert pruned_counts == truth_counts
    assert any(c[0] for c in truth_counts[1:]), "no night re-delivers"
    assert any(c[1] for c in truth_counts[1:]), "no night contradicts"

    def every_source(store: Store, protocol: Any, item_set: str, files: Any, values: Any, columns: Any) -> Any:
        return {f.source_id for f in files}, set()

    monkeypatch.setattr(duplicates, "candidate_sources", every_source)
    full, full_counts = _ingest_nights(tmp_path / "full", nights)
    assert full_counts == pruned_counts
    assert _stored(full) == _stored(pruned)
    assert _quarantine(full, tmp_path / "full") == _quarantine(pruned, tmp_path / "pruned")


def _scanned_committed(monkeypatch: pytest.MonkeyPatch, store: Store, path: Path) -> set[str]:
    """The committed parts the duplicate pass scans while ``path`` is ingested."""
    committed = {f.path for f in store.data_files()}
    seen: set[str] = set()
    real = Store.scan_files

    def spy(self: Store, paths: list[str], *args: Any, **kwargs: Any) -> Any:
        seen.update(paths)
        return real(self, paths, *args, **kwargs)

    monkeypatch.setattr(Store, "scan_files", spy)
    run_ingest(store, path)
    monkeypatch.setattr(Store, "scan_files", real)
    return seen & committed


def test_a_night_of_new_systems_or_items_reads_no_committed_part(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    store = Store(str(tmp_path / "store"))
    first = [_record((f"s{s}", f"item-{i}", "j0", 0), float(s + i)) for s in range(3) for i in range(4) if s or i]
    second = [_record((f"s{s}", f"item-{i}", "j1", 0), float(s * i)) for s in range(3) for i in range(4)]
    first_sid = Store.source_id(run_ingest(store, write_jsonl(tmp_path / "first.jsonl", first)).sources[0].content_key)
    run_ingest(store, write_jsonl(tmp_path / "second.jsonl", second))
    new_systems = [_record((f"t{s}", f"item-{i}", "j0", 0), 1.0) for s in range(2) for i in range(4)]
    assert _scanned_committed(monkeypatch, store, write_jsonl(tmp_path / "systems.jsonl", new_systems)) == set()
    new_items = [_record((f"s{s}", f"item-new-{i}", "j1", 0), 2.0) for s in range(3) for i in range(2)]
    assert _scanned_committed(monkeypatch, store, write_jsonl(tmp_path / "items.jsonl", new_items)) == set()
    # A gap between known levels (s0 on item-0 by judge j0) meets the first source only (the second has no j0).
    gap = [_record(("s0", "item-0", "j0", 0), 3.0)]
    read = _scanned_committed(monkeypatch, store, write_jsonl(tmp_path / "gap.jsonl", gap))
    assert read == {f.path for f in store.data_files() if f.source_id == first_sid}


def test_a_store_without_key_values_still_finds_every_duplicate_and_gets_them(tmp_path: Path) -> None:
    store = Store(str(tmp_path / "store"))
    records = [_record((f"s{s}", f"item-{i}", "j0", 0), float(s + i)) for s in range(3) for i in range(5)]
    run_ingest(store, write_jsonl(tmp_path / "a.jsonl", records))
    keys = tmp_path / "store" / KEYS_ROOT
    assert len(list(keys.rglob("part-*-keys.parquet"))) == 1
    for f in keys.rglob("*.parquet"):
        f.unlink()  # as a store written before them
    # The same records in other bytes (reordered, one changed value): all found.
    again = [*records[::-1][:-1], {**records[0], "score": 99.0}]
    report = run_ingest(store, write_jsonl(tmp_path / "b.jsonl", again))
    assert report.sources[0].duplicates_dropped == len(records) - 1
    assert report.sources[0].reasons == {"conflicting_duplicate": 1}
    assert len(list(keys.rglob("part-*-keys.parquet"))) == 1  # the first source's, written back; b kept none


def test_the_values_written_match_the_committed_parts(tmp_path: Path) -> None:
    store = Store(str(tmp_path / "store"))
    nights = _nights(5)[:4]
    for n, records in enumerate(nights):
        run_ingest(store, write_jsonl(tmp_path / f"n{n}.jsonl", records))
    columns = ["item_id", "system_id", "judge_id", "generation", "replicate"]
    for sid in {f.source_id for f in store.data_files("pointwise", "night")}:
        parts = [f.path for f in store.data_files("pointwise", "night") if f.source_id == sid]
        frame = pl.concat([store.read_parquet(p) for p in parts])
        held = store.read_parquet(store.path(key_values.key_values_file("pointwise", "night", sid)))
        for column in columns:
            kept = set(frame[column].cast(pl.String).to_list())
            written = set(held.filter(pl.col("column") == column)["value"].to_list())
            assert kept <= written  # every stored value (the staged rows' values may be more: never fewer)


def test_a_source_that_never_committed_leaves_no_key_values(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    store = Store(str(tmp_path / "store"))
    records = [_record((f"s{s}", f"item-{i}", "j0", 0), float(s + i)) for s in range(2) for i in range(3)]
    real = Store.write_json

    def crash_on_marker(self: Store, relpath: str, obj: Any) -> None:
        if relpath.startswith("ingested/"):
            raise KeyboardInterrupt  # killed between the key values and the marker
        real(self, relpath, obj)

    monkeypatch.setattr(Store, "write_json", crash_on_marker)
    with pytest.raises(KeyboardInterrupt):
        run_ingest(store, write_jsonl(tmp_path / "a.jsonl", records))
    monkeypatch.setattr(Store, "write_json", real)
    assert list((tmp_path / "store" / KEYS_ROOT).rglob("part-*.parquet"))  # written before the marker
    with store.lock():
        store.remove_uncommitted()
    assert not list((tmp_path / "store" / KEYS_ROOT).rglob("part-*.parquet"))
    report = run_ingest(store, write_jsonl(tmp_path / "a.jsonl", records))
    assert report.sources[0].accepted == len(records)


def test_a_re_delivery_is_judged_by_its_typed_value_with_signed_zeros_apart(tmp_path: Path) -> None:
    """Equal values drop, other values conflict; ``-0.0`` is another value than ``0.0``, as its text is."""
    store = Store(str(tmp_path / "store"))
    stored = [_record(("s0", "item-0", "j0", 0), 0.0), _record(("s0", "item-1", "j0", 0), -0.0),
              _record(("s0", "item-2", "j0", 0), 2.5), _record(("s0", "item-3", "j0", 0), 7.0)]
    run_ingest(store, write_jsonl(tmp_path / "a.jsonl", stored))
    again = [_record(("s0", "item-0", "j0", 0), -0.0), _record(("s0", "item-1", "j0", 0), -0.0),
             _record(("s0", "item-2", "j0", 0), 2.5), _record(("s0", "item-3", "j0", 0), 7.5)]
    source = run_ingest(store, write_jsonl(tmp_path / "b.jsonl", again)).sources[0]
    assert (source.duplicates_dropped, source.reasons) == (2, {"conflicting_duplicate": 2})
    lines = sorted(q[1] for q in _quarantine(store, tmp_path) if q[2] == "conflicting_duplicate")
    assert lines == [1, 4]


def test_a_re_delivery_into_cells_rated_twice_keeps_the_rule(tmp_path: Path) -> None:
    """Two ratings of one cell (two runs) share the key's hash: the pass pairs by the whole key instead."""
    store = Store(str(tmp_path / "store"))
    runs = [{**_record(("s0", f"item-{i}", "j0", 0), float(i + r)), "run_id": f"run-{r}"} for i in range(4) for r in (0, 1)]
    run_ingest(store, write_jsonl(tmp_path / "a.jsonl", runs))
    again = [*runs[:-1], {**runs[-1], "score": 99.0}, {**_record(("s0", "item-9", "j0", 0), 1.0), "run_id": "run-0"}]
    source = run_ingest(store, write_jsonl(tmp_path / "b.jsonl", again)).sources[0]
    assert (source.duplicates_dropped, source.reasons, source.accepted) == (7, {"conflicting_duplicate": 1}, 1)
    message = next(q[3] for q in _quarantine(store, tmp_path) if q[2] == "conflicting_duplicate")
    assert "a.jsonl line 8" in message


def test_the_merged_values_and_the_files_beside_them_read_as_the_files_alone(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """After a merge, a night of new systems still reads no part; a gap fill still finds its source and duplicate."""
    monkeypatch.setattr(key_values, "MERGE_EVERY", 2)
    store = Store(str(tmp_path / "store"))
    for night in range(4):
        records = [_record((f"n{night}-s{s}", f"item-{i}", "j0", 0), float(s + i)) for s in range(2) for i in range(3)]
        run_ingest(store, write_jsonl(tmp_path / f"n{night}.jsonl", records))
    merged = pl.read_parquet(tmp_path / "store" / key_values.keys_dir("pointwise", "night") / key_values.MERGED_VALUES)
    assert merged[SOURCE_ID].n_unique() >= 2
    fresh = [_record(("t0", "item-0", "j0", 0), 1.0)]
    assert _scanned_committed(monkeypatch, store, write_jsonl(tmp_path / "fresh.jsonl", fresh)) == set()
    again = [_record(("n0-s1", "item-2", "j0", 0), 3.0), _record(("n3-s0", "item-1", "j0", 0), 1.0)]
    source = run_ingest(store, write_jsonl(tmp_path / "again.jsonl", again)).sources[0]
    assert source.duplicates_dropped == 2
