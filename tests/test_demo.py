"""The README's main job: simulate a dump into a landing folder and run the nightly flow on it.

Checked against the simulator's own fault book (the quarantine holds exactly the
injected faults) and the published run folder (summary, tables, report). Runs
the real command in a subprocess with nothing configured but a temporary
PREFECT_HOME (and fewer bootstrap draws), so the embedded default (temporary
Prefect server, LocalCluster) is what is tested.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import orjson
import polars as pl
import pytest

from jurymeter.io.store import Store

pytestmark = pytest.mark.slow


def test_demo_runs_the_flow_and_quarantines_exactly_the_injected_faults(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PREFECT_")}
    env["PREFECT_HOME"] = str(tmp_path / "prefect-home")
    # Fewer bootstrap draws than the demo's file asks (800), through the environment, which the
    # documented precedence puts over the file: the draws were most of the demo's time (one demo
    # 190 CPU-s at 800, 87 at 40) and no assertion here depends on their number; 12 as in
    # tests/test_nightly.py (FEW_DRAWS).
    env["JURYMETER_N_BOOT"] = "12"
    result = subprocess.run(
        [sys.executable, "-m", "jurymeter.cli", "demo", "--workdir", str(tmp_path / "demo")],
        capture_output=True, text=True, timeout=600, env=env, cwd=tmp_path,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "Traceback" not in result.stderr
    work = tmp_path / "demo"
    truth = orjson.loads((work / "landing" / "truth.json").read_bytes())
    store = Store(str(work / "store"))
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
    n = truth["params"]
    pointwise = store.scan("pointwise").collect()
    design = n["n_systems"] * n["n_items"] * n["n_judges"] * n["n_generations"] * n["n_replicates"]
    n_conflicts = truth["faults"]["counts"].get("conflicting_duplicate", 0)
    assert pointwise.height == design - n_conflicts
    # The published run: every fit fitted, a report on disk where the output says.
    latest = store.read_json("results/latest.json")
    summary = orjson.loads(Path(latest["path"], "summary.json").read_bytes())
    # Two judge universes, each on the pointwise and the pairwise item set.
    assert [(f["protocol"], f["status"]) for f in summary["fits"]] == (
        [("pointwise", "fitted")] * 2 + [("pairwise", "fitted")] * 2)
    page = Path(latest["path"]) / "report" / "index.html"
    assert f"report: {page}" in result.stdout
    assert page.stat().st_size > 5_000  # the index: alerts, headlines, run facts
    fit_pages = sorted((page.parent / "fits").glob("*.html"))
    assert len(fit_pages) == len(summary["fits"])
    assert all(p.stat().st_size > 100_000 for p in fit_pages)  # each with its figures inlined
    assert not (Path.home() / ".prefect" / "jurymeter-demo").exists()
    assert (tmp_path / "prefect-home").exists()  # Prefect's state went where it was told
    # A rerun of the flow reuses every unchanged fit and prints the same numbers: checked on a smaller
    # run, tests/test_nightly.py::test_flow_on_a_local_cluster_* (its second run).
    def headline_rows(stdout: str) -> list[list[str]]:
        rows = [line.split("\u2502")[1:-1] for line in stdout.splitlines() if line.startswith("\u2502")]
        return [[cell.strip() for cell in row] for row in rows]

    first = headline_rows(result.stdout)
    assert len(first) == 4  # two tables: the pointwise fits, then the pairwise fits
    assert [row[3] for row in first] == ["fitted"] * 4
    assert all(cell not in ("-", "n/a") for row in first for cell in row[4:])

    # Progress (issue 24, point 8): a line as each fit is sent and as it comes back, and the
    # lines' own clock (seconds since the run began) never more than 10 s apart.
    labels = [f"{f['protocol']} {f['item_set']} / {f['universe']} / {f['population']}" for f in summary["fits"]]
    lines = [line for line in result.stdout.splitlines() if line.startswith("[")]
    for label in labels:
        assert sum(line.startswith("[") and "] fit started (" in line and line.endswith(label) for line in lines) == 1
        assert sum("] fit fitted in " in line and line.endswith(label) for line in lines) == 1
    clock = [float(line[1:line.index(" s]")]) for line in lines]
    assert clock == sorted(clock)
    assert max(b - a for a, b in zip([0.0, *clock], clock, strict=False)) <= 10.0
    last_fit = max(i for i, line in enumerate(result.stdout.splitlines()) if "] fit fitted in " in line)
    assert result.stdout.splitlines().index(next(line for line in result.stdout.splitlines() if line.startswith("report: "))) > last_fit
