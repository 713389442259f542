"""A small nightly run published by the library (ingest, plan, fit, publish) without Prefect or Dask."""

from __future__ import annotations

from pathlib import Path
from typing import Any


def publish_small_run(
    root: Path, run_id: str, *, seed: int = 3, n_boot: int = 12, store_name: str = "store",
    started: str = "2026-01-01T02:15:00+00:00", **params: Any,
) -> Path:
    """Simulate a dump (6 systems x 24 items x 4 judges, pairwise too), ingest it into ``root/<store_name>``,
    fit every item set under two universes and publish ``results/<run_id>``; the store's root.

    ``n_boot`` is small: the sequential GLMM's bootstrap is most of a fit's time (the fixture 14.5
    CPU-s at 60 draws), and the pages' tests read the numbers off the run, whatever their count.
    """
    from jurymeter.io.ingest import ingest
    from jurymeter.io.sources import discover_sources
    from jurymeter.io.store import Store
    from jurymeter.io.validate import ValidationOptions
    from jurymeter.pipeline.cache import run_fits
    from jurymeter.pipeline.config import load_config
    from jurymeter.pipeline.jobs import plan_fits
    from jurymeter.pipeline.publish import publish_run
    from jurymeter.simulate import SimulationParams, simulate_dump, write_dump

    sizes = {"n_systems": 6, "n_items": 24, "n_judges": 4, "pairwise_pairs": 6, **params}
    paths = write_dump(simulate_dump(SimulationParams(seed=seed, **sizes)), root / f"dump-{run_id}")
    store = Store(str(root / store_name))
    sources = discover_sources([str(p) for name, p in paths.items() if name != "truth"])
    ingested = ingest(store, sources, ValidationOptions(scale=(1.0, 10.0))).to_json()
    config_path = root / "jm.toml"
    config_path.write_text(
        f'store = "{store.url}"\nscale = [1, 10]\n[universes]\nthree = ["judge-a", "judge-b", "judge-c"]\n'
        f"[fit]\nuniverses = ['all', 'three']\nn_boot = {n_boot}\n"
    )
    config = load_config(config_path, environ={})
    plan = plan_fits(store, config)
    outcomes = run_fits(store, plan.jobs, figures=True)
    for outcome in outcomes:
        assert outcome.error is None, outcome.trace
    publish_run(
        store, run_id, config=config, started=started, ingest_report=ingested,
        outcomes=outcomes, timings={"fit": sum(o.seconds for o in outcomes)}, skipped=plan.skipped,
    )
    return Path(store.root)
