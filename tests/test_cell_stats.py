"""Mergeable cell statistics (``io/cell_stats.py``) and the fits that read them (``pipeline/fit_cells.py``).

| contract | independent reference |
| --- | --- |
| after every night of a random sequence (new records, exact re-deliveries, conflicting duplicates, quarantined records, a re-ingested file), the merged cell table holds every committed record's cell: records, count, sum, sum of squares, zero elsewhere | a polars group-by of every committed record (``Store.scan``) |
| the G-study (balanced and Henderson) and CyclicJudge reports from the cells equal those of the full record scan to 1e-10, every number: generations averaged and as a facet, a judge universe, a system population | the same fit with the cell path switched off (the records scanned, ``stats.blocks.fit_chunks``) |
| a store without cell files builds them on first need; an uncommitted source's cell file is removed by ``remove_uncommitted``; an item set with several ratings of one cell falls back to the records | the file listing; the fit's own record path |
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np
import orjson
import polars as pl
import pytest

from ingest_util import run_ingest, write_jsonl
from jurymeter.analyses.base import FitSettings
from jurymeter.analyses.cyclic import CyclicOptions
from jurymeter.analyses.gstudy import GStudyOptions
from jurymeter.io import cell_stats
from jurymeter.io.cell_stats import CELL_KEYS, item_set_cells
from jurymeter.io.store import Store
from jurymeter.pipeline import fit_cells
from jurymeter.pipeline.fit import fit_and_tabulate
from jurymeter.pipeline.jobs import FitJob

SYSTEMS, ITEMS, JUDGES, GENERATIONS, REPLICATES = 4, 12, 3, 2, 2
# Systems that differ (sigma2_s > 0): with none, most fits' D-study searched up to 1,000 judges per bootstrap
# draw for a target never reached (57% of a 2.5 CPU-s fit); the paths compared are the same either way.
SYSTEM_EFFECTS = (-3.0, -1.0, 1.0, 3.0)


def _record(s: int, i: int, j: int, g: int, r: int, score: float) -> dict[str, Any]:
    return {"item_set": "night", "system_id": f"s{s}", "item_id": f"item-{i:03d}", "judge_id": f"j{j}",
            "generation": g, "replicate": r, "score": score}


def _night(rng: np.random.Generator, stored: dict[tuple[int, ...], float], night: int) -> list[dict | str]:
    """One night's log: new cells, exact re-deliveries, conflicting duplicates, records the ingest quarantines."""
    keys = [(s, i, j, g, r) for s in range(SYSTEMS) for i in range(ITEMS) for j in range(JUDGES)
            for g in range(GENERATIONS) for r in range(REPLICATES)]
    fresh = [k for k in keys if k not in stored]
    picked = [fresh[k] for k in rng.choice(len(fresh), size=min(len(fresh), int(rng.integers(60, 260))), replace=False)]
    out: list[dict | str] = []
    for key in picked:
        score = float(np.round(rng.normal(5.0, 2.0) + SYSTEM_EFFECTS[key[0]], 3))
        out.append(_record(*key, score))
        stored[key] = score
    old = [k for k in stored if k not in picked]
    for k in rng.choice(len(old), size=min(len(old), 20), replace=False) if night and old else []:
        out.append(_record(*old[k], stored[old[k]]))  # an exact re-delivery: dropped
    for k in rng.choice(len(old), size=min(len(old), 5), replace=False) if night and old else []:
        out.append(_record(*old[k], stored[old[k]] + 1.5))  # a conflicting duplicate: quarantined
    out.append({**_record(0, 0, 0, 0, 0, 1.0), "score": None})  # unscored: quarantined
    out.append("{not json")  # malformed: quarantined
    order = rng.permutation(len(out))
    return [out[k] for k in order]


def _job(store: Store, judges: tuple[str, ...] | None = None, generations: str = "average",
         systems: tuple[str, ...] | None = None) -> FitJob:
    settings = FitSettings(judges=judges, systems=systems, n_boot=40, seed=3, generations=generations)
    return FitJob(store=store.url, storage_options=(), item_set="night", universe="all", population="all",
                  settings=settings, analyses=(("gstudy", GStudyOptions()), ("cyclic", CyclicOptions())), inputs=())


def _close(cells: Any, scan: Any, path: str = "") -> list[str]:
    """Where two published reports differ (numbers beyond 1e-10, anything else at all)."""
    if isinstance(cells, dict) and isinstance(scan, dict):
        if set(cells) != set(scan):
            return [f"{path}: keys {sorted(set(cells) ^ set(scan))}"]
        return [d for k in cells if k != "seconds" for d in _close(cells[k], scan[k], f"{path}.{k}")]
    if isinstance(cells, list | tuple) and isinstance(scan, list | tuple):
        if len(cells) != len(scan):
            return [f"{path}: lengths {len(cells)} != {len(scan)}"]
        return [d for k, (a, b) in enumerate(zip(cells, scan, strict=True)) for d in _close(a, b, f"{path}[{k}]")]
    if isinstance(cells, float) and isinstance(scan, float | int):
        same = (math.isnan(cells) and math.isnan(scan)) or math.isclose(cells, scan, rel_tol=1e-10, abs_tol=1e-10)
        return [] if same else [f"{path}: {cells!r} != {scan!r}"]
    return [] if cells == scan else [f"{path}: {cells!r} != {scan!r}"]


def _fit_both(store: Store, monkeypatch: pytest.MonkeyPatch, judges: tuple[str, ...] | None,
             generations: str = "average", systems: tuple[str, ...] | None = None) -> tuple[dict, dict]:
    taken: list[bool] = []
    real = fit_cells.cell_chunks

    def spy(job: FitJob, modes: Any) -> Any:
        found = real(job, modes)
        taken.append(found is not None)
        return found

    monkeypatch.setattr(fit_cells, "cell_chunks", spy)
    by_cells = fit_and_tabulate(_job(store, judges, generations, systems))
    monkeypatch.setattr(fit_cells, "cell_chunks", lambda job, modes: None)
    by_scan = fit_and_tabulate(_job(store, judges, generations, systems))
    monkeypatch.setattr(fit_cells, "cell_chunks", real)
    assert taken == [True], "the fit did not read the cell statistics"
    assert (by_cells.error, by_scan.error) == (None, None)
    assert by_cells.report is not None
    assert by_scan.report is not None
    return by_cells.report, by_scan.report


def _brute_force_cells(store: Store) -> pl.DataFrame:
    score = pl.col("score").cast(pl.Float64)
    return (store.scan("pointwise", "night").group_by(CELL_KEYS)
            .agg(pl.len().alias("records"), score.count().alias("count"), score.sum().alias("sum"),
                 (score * score).sum().alias("sumsq")).collect())


def _check_merged(store: Store) -> None:
    assert item_set_cells(store, "pointwise", "night") is not None  # merged up to date
    dense = cell_stats._read_merged(store, cell_stats.cells_dir("pointwise", "night"), squares=True)
    assert dense is not None
    assert dense.sumsq is not None
    truth = _brute_force_cells(store)
    assert dense.records == truth["records"].sum()
    assert dense.null_scores == 0
    index = tuple(truth[c].replace_strict(v, list(range(len(v))), return_dtype=pl.Int64).to_numpy()
                  for c, v in zip(CELL_KEYS, dense.levels, strict=True))
    for column, array in (("count", dense.counts), ("sum", dense.sums), ("sumsq", dense.sumsq)):
        expected = np.zeros(array.shape)
        expected[index] = truth[column].to_numpy()
        np.testing.assert_allclose(array, expected, rtol=1e-12, atol=1e-12, err_msg=column)
    for axis, column in enumerate(CELL_KEYS):
        assert dense.levels[axis] == sorted(truth[column].unique().to_list())


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_nights_of_cells_equal_the_full_record_scan(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, seed: int) -> None:
    rng = np.random.default_rng(seed)
    if seed == 2:  # each source's cell file merged in many small batches
        monkeypatch.setattr(cell_stats, "CELL_BATCH", 17)
    store = Store(str(tmp_path / "store"))
    stored: dict[tuple[int, ...], float] = {}
    paths: list[Path] = []
    estimators = set()
    for night in range(4):
        paths.append(write_jsonl(tmp_path / f"night-{night}.jsonl", _night(rng, stored, night)))
        todo = [paths[-1], paths[int(rng.integers(len(paths)))]]  # and a file ingested before: already ingested
        report = run_ingest(store, *todo)
        assert report.sources[0].status == "ingested"
        assert report.sources[0].quarantined >= 2
        _check_merged(store)
        for judges, generations, systems in ((None, "average", None), (("j0", "j2"), "average", None),
                                             (None, "facet", None), (None, "average", ("s0", "s1", "s3"))):
            by_cells, by_scan = _fit_both(store, monkeypatch, judges, generations, systems)
            assert _close(by_cells, by_scan) == []
            gstudy = by_scan["analyses"]["gstudy"]
            assert generations == "facet" or "skipped" not in gstudy, gstudy  # facet: may have no common generation
            estimators.add(gstudy.get("estimator"))
    assert "henderson" in estimators


def test_a_full_grid_takes_the_balanced_block_from_the_cells(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    rng = np.random.default_rng(7)
    store = Store(str(tmp_path / "store"))
    records = [_record(s, i, j, g, r, float(rng.integers(1, 11))) for s in range(SYSTEMS) for i in range(ITEMS)
               for j in range(JUDGES) for g in range(GENERATIONS) for r in range(REPLICATES)]
    half = len(records) // 2
    run_ingest(store, write_jsonl(tmp_path / "a.jsonl", records[:half]))
    run_ingest(store, write_jsonl(tmp_path / "b.jsonl", records[half:]))
    _check_merged(store)
    by_cells, by_scan = _fit_both(store, monkeypatch, None)
    assert by_cells["analyses"]["gstudy"]["estimator"] == "balanced"
    assert _close(by_cells, by_scan) == []


def test_cell_files_are_built_on_first_need_and_orphans_removed(tmp_path: Path) -> None:
    store = Store(str(tmp_path / "store"))
    run_ingest(store, write_jsonl(tmp_path / "a.jsonl", [_record(s, i, 0, 0, 0, 1.0 + s + i)
                                                          for s in range(3) for i in range(4)]))
    folder = Path(store.path(cell_stats.cells_dir("pointwise", "night")))
    (sid,) = store.committed()
    assert [p.name for p in folder.iterdir()] == [f"part-{sid}-cells.parquet"]  # written at commit
    (folder / f"part-{sid}-cells.parquet").unlink()  # as a store written before cell files
    assert item_set_cells(store, "pointwise", "night") is not None
    assert (folder / f"part-{sid}-cells.parquet").exists()
    assert (folder / cell_stats.MERGED_FILE).exists()
    _check_merged(store)
    orphan = folder / f"part-{'f' * 16}-cells.parquet"
    orphan.write_bytes((folder / f"part-{sid}-cells.parquet").read_bytes())
    with store.lock():
        removed = store.remove_uncommitted()
    assert str(orphan) in removed
    assert not orphan.exists()
    assert (folder / f"part-{sid}-cells.parquet").exists()


def test_several_ratings_of_a_cell_fall_back_to_the_records(tmp_path: Path) -> None:
    store = Store(str(tmp_path / "store"))
    rows = [{**_record(s, i, j, 0, 0, float(1 + (s + i + j) % 7)), "batch_id": "b1"}
            for s in range(3) for i in range(5) for j in range(2)]
    again = [{**row, "batch_id": batch, "score": row["score"] + k} for row in rows[:6]
             for k, batch in enumerate(("b2", "b3"), start=1)]  # two more ratings of a cell in one source
    run_ingest(store, write_jsonl(tmp_path / "a.jsonl", rows))
    run_ingest(store, write_jsonl(tmp_path / "b.jsonl", again))
    _check_merged(store)  # its cell file from the group-by: three records in each of those cells
    dense = item_set_cells(store, "pointwise", "night")
    assert dense is not None
    assert dense.most_records == 3
    assert fit_cells.cell_chunks(_job(store), ("average",)) is None
    result = fit_and_tabulate(_job(store))
    assert result.error is None


def test_cells_too_sparse_for_dense_arrays_are_said_once_and_the_records_scanned(tmp_path: Path) -> None:
    store = Store(str(tmp_path / "store"))
    n = 1100  # a diagonal: 1100 x 1100 cells of one record each, above 4 a record plus a million
    run_ingest(store, write_jsonl(tmp_path / "a.jsonl", [
        {**_record(0, k, 0, 0, 0, float(k % 9)), "system_id": f"s{k}"} for k in range(n)]))
    assert item_set_cells(store, "pointwise", "night") is None
    folder = Path(store.path(cell_stats.cells_dir("pointwise", "night")))
    meta = orjson.loads((folder / cell_stats.MERGED_FILE).read_bytes())
    assert meta == {"format": 1, "dense": False, "sources": sorted(store.committed())}
    assert fit_cells.cell_chunks(_job(store), ("average",)) is None


def test_sources_merged_one_at_a_time_equal_their_cells_summed_by_hand() -> None:
    """merge_cells over sources read as needed (callables yielding batches, read twice, never two held at once)
    equals a dictionary sum of every source's rows, cells shared between sources included, onto a base."""
    rng = np.random.default_rng(11)
    dtypes = cell_stats.CELL_DTYPES

    def source(n: int) -> pl.DataFrame:
        keys = {"system_id": [f"s{v}" for v in rng.integers(0, 4, n)], "item_id": [f"i{v}" for v in rng.integers(0, 6, n)],
                "judge_id": [f"j{v}" for v in rng.integers(0, 3, n)], "generation": rng.integers(0, 2, n).tolist(),
                "replicate": np.zeros(n, dtype=int).tolist()}
        records = rng.integers(1, 3, n)
        count = np.minimum(records, rng.integers(0, 3, n))
        sums = rng.normal(5, 2, n) * count
        frame = pl.DataFrame({**keys, "records": records, "count": count, "sum": sums, "sumsq": sums * sums / np.maximum(count, 1)})
        return frame.group_by(list(CELL_KEYS)).agg(pl.col("records", "count", "sum", "sumsq").sum()).cast(dtypes)  # type: ignore[arg-type]

    first, later = [source(40) for _ in range(2)], [source(30) for _ in range(3)]
    base = cell_stats.merge_cells(None, first, ("a", "b"))
    assert base is not None
    reads: list[int] = []

    def reader(k: int) -> Any:
        def read() -> list[pl.DataFrame]:  # a source's cells in two batches
            reads.append(k)
            return [later[k].head(10), later[k].slice(10)]
        return read

    merged = cell_stats.merge_cells(base, [reader(k) for k in range(3)], ("a", "b", "c", "d", "e"))
    assert merged is not None
    assert reads == [0, 1, 2, 0, 1, 2]  # a pass for the levels, a pass for the cells
    by_hand: dict[tuple[Any, ...], np.ndarray] = {}
    for frame in [*first, *later]:
        for row in frame.iter_rows(named=True):
            key = tuple(row[c] for c in CELL_KEYS)
            by_hand[key] = by_hand.get(key, np.zeros(4)) + np.array([row["records"], row["count"], row["sum"], row["sumsq"]])
    assert merged.records == int(sum(v[0] for v in by_hand.values()))
    assert merged.null_scores == int(sum(v[0] - v[1] for v in by_hand.values()))
    for key, (_, count, total, squares) in by_hand.items():
        at = tuple(levels.index(v) for levels, v in zip(merged.levels, key, strict=True))
        assert merged.counts[at] == count
        assert merged.sums[at] == pytest.approx(total, rel=1e-12)
        assert merged.sumsq is not None
        assert merged.sumsq[at] == pytest.approx(squares, rel=1e-12)
    assert int(merged.counts.sum()) == int(sum(v[1] for v in by_hand.values()))  # nothing outside the cells given
    # The most records of a cell the new sources touch: the base's count there plus what they add.
    touched = {tuple(r[c] for c in CELL_KEYS) for f in later for r in f.iter_rows(named=True)}
    base_counts: dict[tuple[Any, ...], float] = {}
    for frame in first:
        for row in frame.iter_rows(named=True):
            key = tuple(row[c] for c in CELL_KEYS)
            base_counts[key] = base_counts.get(key, 0) + row["count"]
    added: dict[tuple[Any, ...], float] = {}
    for frame in later:
        for row in frame.iter_rows(named=True):
            key = tuple(row[c] for c in CELL_KEYS)
            added[key] = added.get(key, 0) + row["records"]
    expected = max(base.most_records, *(base_counts.get(k, 0) + added[k] for k in touched))
    assert merged.most_records == expected
