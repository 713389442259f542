"""Plans benchmark (issue 26, performance): plans for 100 item sets, and the run's realised-versus-planned part.

Goals: the plan for 100 item sets under 10 s; the realised-versus-planned
section adds under 1 s to the pages. One G-study report of a simulated
crossed item set (6 systems x 24 items x 3 judges, 800 resamples: the
default) stands in for each item set's cached report (``cache.cached_report``
reads it back from the fit cache: one JSON read, measured here as that read).
Timed, each over the 100 item sets, in one process (CPU and wall):

1. reading the 100 reports back from JSON files (the fit cache's read);
2. ``analyses.gstudy.plan.plan_predictions`` (the prediction: 800 draws each);
3. ``plans.store_plan`` into a local store (assignments + ``plan.json``);
4. at the run: ``plans.load_plans`` + ``plans.plan_checks`` against a
   ``dstudy`` table of the 100 item sets, and the index page's section
   (``page._plans_section``), against the same page without plans.

    .venv/bin/python bench/plans.py --append
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import orjson
import polars as pl

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(ROOT / "bench"))

from _common import append_results, command_line, facts_block, machine_facts  # noqa: E402

ITEM_SETS = 100


def _report(workdir: Path) -> dict[str, Any]:
    """One G-study report of a simulated crossed item set (fitted once, as the nightly run would)."""
    from typer.testing import CliRunner

    from jurymeter.cli import app
    from jurymeter.io.ingest import ingest
    from jurymeter.io.sources import discover_sources
    from jurymeter.io.store import Store
    from jurymeter.io.validate import ValidationOptions
    from jurymeter.simulate import SimulationParams, simulate_dump, write_dump

    dump = simulate_dump(SimulationParams(seed=1, n_systems=6, n_items=24, n_judges=3, n_generations=1,
                                          n_replicates=1, carry_over=0.0, self_preference=0.0, pairwise_pairs=None))
    paths = write_dump(dump, workdir / "dump")
    store = Store(str(workdir / "fit-store"))
    ingest(store, discover_sources([str(paths["pointwise"])]), ValidationOptions())
    got = CliRunner().invoke(app, ["gstudy", "--store", store.url, "--item-set", "sim-chat", "--json"])
    assert got.exit_code == 0, got.output
    report: dict[str, Any] = orjson.loads(got.stdout)
    return report


def _clock() -> tuple[float, float]:
    return time.perf_counter(), time.process_time()


def _since(start: tuple[float, float]) -> tuple[float, float]:
    wall, cpu = _clock()
    return wall - start[0], cpu - start[1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--append", action="store_true", help="append the results to bench/RESULTS.md")
    args = parser.parse_args()
    from jurymeter.analyses.gstudy.plan import plan_predictions
    from jurymeter.io.store import Store
    from jurymeter.pipeline.page import _plans_section
    from jurymeter.pipeline.plans import load_plans, plan_checks, plan_record, store_plan
    from jurymeter.stats.cyclic.planner import plan_crossed

    workdir = Path(tempfile.mkdtemp(prefix="jurymeter-bench-plans-"))
    try:
        report = _report(workdir)
        names = [f"set-{k:03d}" for k in range(ITEM_SETS)]
        cache = workdir / "cache"
        cache.mkdir()
        for name in names:
            (cache / f"{name}.json").write_bytes(orjson.dumps({"analyses": {"gstudy": {**report, "item_set": name}}}))
        counts = {"systems": 6, "items": 48, "judges": 3}
        table = plan_crossed([f"q{i}" for i in range(48)], [f"s{i}" for i in range(6)], ["a", "b", "c"])
        rows: list[tuple[str, float, float]] = []

        start = _clock()
        reports = {n: orjson.loads((cache / f"{n}.json").read_bytes())["analyses"]["gstudy"] for n in names}
        rows.append(("read 100 cached G-study reports (the fit cache's JSON)", *_since(start)))

        start = _clock()
        predicted = {n: plan_predictions(reports[n], counts, crossed=True, seed=k) for k, n in enumerate(names)}
        rows.append(("`plan_predictions` x 100 (800 draws each)", *_since(start)))
        assert all(p["mdd95"] is not None for p, _ in predicted.values())

        store = Store(str(workdir / "store"))
        start = _clock()
        for n in names:
            p, why = predicted[n]
            record = plan_record(f"plan-{n}", source={"item_set": n, "universe": "all", "population": "all"},
                                 item_set=f"{n}-next", kind="crossed", counts=counts, generations=1,
                                 predictions=p, null_reasons=why)
            store_plan(store, record, table)
        rows.append(("`store_plan` x 100 (assignments.parquet + plan.json)", *_since(start)))
        plan_total = sum(r[1] for r in rows)
        plan_cpu = sum(r[2] for r in rows)

        dstudy = pl.DataFrame([
            {"item_set": f"{n}-next", "universe": "all", "population": "all", "quantity": q, "estimate": 0.5,
             "low": 0.4, "high": 0.6, "reason": None}
            for n in names for q in ("mdd95", "erho2", "ceiling")
        ])
        summary = {"fits": [{"item_set": f"{n}-next", "universe": "all", "population": "all",
                             "analyses": {"gstudy": {"systems": 6, "items": 48, "judges": 3}}} for n in names]}
        start = _clock()
        plans, unreadable = load_plans(store)
        checked = plan_checks(plans, {"dstudy": dstudy}, summary)
        section = _plans_section({"plans": checked})
        run_wall, run_cpu = _since(start)
        assert len(checked) == 2 * ITEM_SETS
        assert not unreadable
        rows.append(("the run: `load_plans` + `plan_checks` + the page section (200 rows)", run_wall, run_cpu))
    finally:
        shutil.rmtree(workdir, ignore_errors=True)

    lines = [
        f"## Plans for {ITEM_SETS} item sets, and the run's realised-versus-planned part (issue 26)",
        "",
        f"Command: `{command_line('plans.py')}`",
        "",
        facts_block(machine_facts()),
        "- one process, CPU = `time.process_time`; each item set: a crossed plan of 6 systems x 48 items x 3 judges "
        "(864 assignments), predicted from a G-study report of 6 x 24 x 3 simulated judgments with 800 resamples",
        "",
        "| step | wall (s) | CPU (s) |",
        "|---|---:|---:|",
        *[f"| {name} | {wall:.3f} | {cpu:.3f} |" for name, wall, cpu in rows],
        "",
        f"- the plan for {ITEM_SETS} item sets (read + predict + store): **{plan_total:.2f} s** wall, "
        f"{plan_cpu:.2f} CPU-s — goal < 10 s: **{'met' if plan_total < 10 else 'NOT met'}**",
        f"- the realised-versus-planned section: **{rows[-1][1]:.3f} s** wall ({len(section):,} bytes of HTML) — "
        f"goal < 1 s: **{'met' if rows[-1][1] < 1 else 'NOT met'}**",
        "- not in these numbers: `plan_fits` over the store (it finds each item set's cache key) and the CLI's "
        "start-up, which `jurymeter plan` pays once per item set: the command plans one item set a call, so 100 item "
        "sets planned from the shell also pay 100 start-ups (about 2-3 s each here), which `plan` with several "
        "`--item-set` pays once (`bench/plans_cli.py`)",
        "",
    ]
    text = "\n".join(lines)
    print(text)
    if args.append:
        append_results(text)


if __name__ == "__main__":
    main()
