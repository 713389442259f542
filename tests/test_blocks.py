"""Largest balanced block: the documented rule, checked by hand-built cases and a brute-force pivot."""

from __future__ import annotations

import itertools

import numpy as np
import polars as pl
import pytest

from jurymeter.blocks import balanced_block


def _records(n_s=5, n_i=6, n_j=4, n_r=2, n_g=1, seed=0) -> pl.DataFrame:
    rng = np.random.default_rng(seed)
    rows = [
        {"system_id": f"s{s}", "item_id": f"i{i}", "judge_id": f"j{j}", "generation": g, "replicate": r, "score": float(rng.normal())}
        for s, i, j, g, r in itertools.product(range(n_s), range(n_i), range(n_j), range(n_g), range(n_r))
    ]
    return pl.DataFrame(rows)


def test_complete_data_give_the_whole_array_in_sorted_id_order() -> None:
    records = _records()
    block = balanced_block(records)
    assert block.design.labels[-1] == "r:sij"
    assert block.x.shape == (5, 6, 4, 2)
    assert block.completeness == 1.0
    assert (block.dropped_systems, block.dropped_items, block.dropped_judges) == ((), (), ())
    lookup = {(r["system_id"], r["item_id"], r["judge_id"], r["replicate"]): r["score"] for r in records.iter_rows(named=True)}
    for (s, i, j, r), value in np.ndenumerate(block.x):
        assert value == lookup[(block.systems[s], block.items[i], block.judges[j], r)]


def test_generations_are_averaged_by_default() -> None:
    records = _records(n_g=3)
    block = balanced_block(records)
    expected = records.filter((pl.col("system_id") == "s1") & (pl.col("item_id") == "i2") & (pl.col("judge_id") == "j3") & (pl.col("replicate") == 1))["score"].mean()
    assert block.x[1, 2, 3, 1] == pytest.approx(expected)


def test_generations_as_a_nested_facet() -> None:
    block = balanced_block(_records(n_g=3), generations="facet")
    assert block.design.labels[-1] == "r:sijg"
    assert "g:si" in block.design.labels
    assert block.x.shape == (5, 6, 4, 3, 2)


def test_the_level_with_most_missing_cells_is_dropped() -> None:
    records = _records()
    # Judge j3 misses 4 cells of system s0; s0 misses the same 4 cells. Tie on the
    # count: the larger share decides (4/24 for s0 against 4/30 for j3).
    holes = (pl.col("system_id") == "s0") & (pl.col("judge_id") == "j3") & pl.col("item_id").is_in(["i0", "i1", "i2", "i3"])
    block = balanced_block(records.filter(~holes))
    assert block.dropped_systems == ("s0",)
    assert block.dropped_items == ()
    assert block.dropped_judges == ()
    assert block.x.shape == (4, 6, 4, 2)
    assert block.completeness == pytest.approx(1 - 4 / 120)


def test_a_judge_missing_everywhere_is_dropped_before_systems() -> None:
    records = _records()
    holes = (pl.col("judge_id") == "j1") & pl.col("item_id").is_in(["i0", "i1"])
    block = balanced_block(records.filter(~holes))
    assert block.dropped_judges == ("j1",)
    assert block.dropped_systems == ()


def test_first_k_replicates_are_kept() -> None:
    records = pl.concat([_records(n_r=2), _records(n_r=3, seed=1).filter(pl.col("replicate") == 2)])
    records = records.filter(~((pl.col("replicate") == 2) & (pl.col("system_id") == "s0")))
    block = balanced_block(records)
    assert block.n_replicates == 2
    assert block.x.shape[-1] == 2
    single = balanced_block(_records(n_r=1))
    assert single.design.labels[-1] == "sij"
    assert any("confounded" in note for note in single.notes)


def test_dense_path_equals_the_group_by_path(monkeypatch: pytest.MonkeyPatch) -> None:
    import jurymeter.blocks as blocks

    rng = np.random.default_rng(3)
    records = _records(n_s=6, n_i=9, n_j=4, n_r=4, n_g=2, seed=2)
    # Holes, uneven replicates and sparse replicate ids.
    records = records.filter(pl.Series(rng.random(records.height) > 0.08))
    records = records.with_columns((pl.col("replicate") * 7 + 3).alias("replicate"))
    holes = ((pl.col("system_id") == "s1") & pl.col("item_id").is_in(["i0", "i1"])) | (
        (pl.col("judge_id") == "j2") & (pl.col("item_id") == "i5")
    )
    records = records.filter(~holes)
    dense = balanced_block(records)
    assert dense.dropped_systems or dense.dropped_items or dense.dropped_judges
    monkeypatch.setattr(blocks, "_average_block_dense", lambda lazy: None)
    sparse = balanced_block(records)
    assert dense.design.labels == sparse.design.labels
    np.testing.assert_array_equal(dense.x, sparse.x)
    for field in ("systems", "items", "judges", "n_replicates", "completeness", "records_in",
                  "dropped_systems", "dropped_items", "dropped_judges"):
        assert getattr(dense, field) == getattr(sparse, field), field
