"""The README's main job: simulate, ingest, summarise; checked against the simulator's own fault book."""

from __future__ import annotations

from pathlib import Path

import orjson
import polars as pl
from typer.testing import CliRunner

from jurymeter.cli import app
from jurymeter.store import Store


def test_demo_quarantines_exactly_the_injected_faults(tmp_path: Path) -> None:
    result = CliRunner().invoke(app, ["demo", "--workdir", str(tmp_path)])
    assert result.exit_code == 0, result.output
    assert "holds for every source" in result.output
    truth = orjson.loads((tmp_path / "dump" / "truth.json").read_bytes())
    store = Store(str(tmp_path / "store"))
    q = pl.concat([store.read_parquet(p) for p in store.quarantine_files()])
    got: dict[str, dict[str, list[int]]] = {}
    for row in q.iter_rows(named=True):
        name = Path(row["source"]).name
        got.setdefault(name, {}).setdefault(row["reason"], []).append(row["line"])
    expected = {
        name: {reason: sorted(lines) for reason, lines in kinds.items()}
        for name, kinds in truth["faults"]["lines"].items()
    }
    assert {n: {r: sorted(v) for r, v in k.items()} for n, k in got.items()} == expected
    # Everything else landed: the clean design counts of the simulator.
    n = truth["params"]
    pointwise = store.scan("pointwise").collect()
    design = n["n_systems"] * n["n_items"] * n["n_judges"] * n["n_generations"] * n["n_replicates"]
    n_conflicts = truth["faults"]["counts"].get("conflicting_duplicate", 0)
    assert pointwise.height == design - n_conflicts
    # Running the main job again changes nothing.
    again = CliRunner().invoke(app, ["demo", "--workdir", str(tmp_path)])
    assert again.exit_code == 0
    assert "already in the store" in again.output
    assert store.scan("pointwise").collect().height == pointwise.height
