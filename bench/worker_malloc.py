"""One fit in the client against the same fit in a Dask worker, with and without WORKER_MALLOC.

Dask's nanny sets ``MALLOC_TRIM_THRESHOLD_=65536`` in its workers, which turns
off glibc's adaptive mmap threshold; ``src/jurymeter/orchestration/runtime.py`` overrides it
(``WORKER_MALLOC``). This measures what that is worth on one fit of a
40 x 300 x 6 x 3 x 2 panel (the generator of ``bench/nightly.py``), and appends
the times to ``RESULTS.md``. Command: ``.venv/bin/python bench/worker_malloc.py``.
"""

from __future__ import annotations

import os
import shutil
import sys
import time
from pathlib import Path

BENCH = Path(__file__).resolve().parent
sys.path[:0] = [str(BENCH), str(BENCH.parent)]

from _common import append_results, command_line, facts_block, machine_facts  # noqa: E402


def timed_fit(job: object) -> float:
    from jurymeter.pipeline.fit import fit_and_tabulate

    started = time.perf_counter()
    result = fit_and_tabulate(job)  # type: ignore[arg-type]
    assert result.error is None, result.trace
    return time.perf_counter() - started


def main() -> None:
    from distributed import Client, LocalCluster

    from jurymeter.io.ingest import ingest
    from jurymeter.io.sources import discover_sources
    from jurymeter.io.store import Store
    from jurymeter.io.validate import ValidationOptions
    from jurymeter.orchestration.runtime import WORKER_MALLOC, run_cluster
    from jurymeter.pipeline.config import load_config
    from jurymeter.pipeline.jobs import plan_fits
    from nightly import write_panel

    work = BENCH / "_work" / "worker-malloc"
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    write_panel(work / "panel.jsonl", 300)
    store = Store(str(work / "store"))
    ingest(store, discover_sources([str(work / "panel.jsonl")]), ValidationOptions())
    (work / "jm.toml").write_text(f'store = "{store.url}"\n[fit]\nn_boot = 800\n')
    job = plan_fits(store, load_config(work / "jm.toml", environ={})).jobs[0]
    rows = [("client process", [timed_fit(job) for _ in range(2)])]
    with (
        LocalCluster(n_workers=1, threads_per_worker=1, dashboard_address=":0") as cluster,
        Client(cluster) as client,
    ):
        times = [client.submit(timed_fit, job, pure=False).result() for _ in range(2)]
        env = client.run(lambda: os.environ.get("MALLOC_TRIM_THRESHOLD_"))
    rows.append((f"Dask worker, Dask's default (MALLOC_TRIM_THRESHOLD_={next(iter(env.values()))})", times))
    with run_cluster(None, 1, 1) as address, Client(address) as client:
        times = [client.submit(timed_fit, job, pure=False).result() for _ in range(2)]
    rows.append((f"Dask worker, WORKER_MALLOC {WORKER_MALLOC}", times))
    table = "| where the fit runs | two runs (s) |\n|---|---|\n" + "".join(
        f"| {label} | {a:.2f}, {b:.2f} |\n" for label, (a, b) in rows
    )
    stamp = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    text = (
        f"## Worker malloc settings, one fit ({stamp})\n\nCommand: `{command_line('worker_malloc.py')}`\n\n"
        + facts_block(machine_facts())
        + f"- fit: `{job.name}`, 40 systems x 300 items x 6 judges x 3 generations x 2 replicates, n_boot 800\n\n"
        + table
    )
    print(text)
    append_results(text)
    shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
