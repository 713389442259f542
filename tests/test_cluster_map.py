"""A fit's bootstrap on the cluster: ``cluster_map`` from inside a worker gives the builtin map's results."""

from __future__ import annotations

import numpy as np
import polars as pl
from distributed import Client, LocalCluster

from jurymeter.orchestration.tasks import cluster_map
from jurymeter.stats.sequential.glmm import bootstrap_fits, fit_sequential_glmm
from jurymeter.stats.sequential.simulate import simulate_sequential


def _square(x: int) -> int:
    return x * x


def _bootstrap_in_a_worker(records: pl.DataFrame) -> np.ndarray:
    """What a fit running on a worker does: its refits through cluster_map, seeded per resample."""
    fit = fit_sequential_glmm(records, lags=1)
    return bootstrap_fits(records, fit, n_boot=12, seed=3, map=cluster_map, chunk_size=3).draws


def test_cluster_map_outside_a_worker_is_the_builtin_map() -> None:
    assert cluster_map(_square, range(5)) == [0, 1, 4, 9, 16]


def test_a_bootstrap_spread_over_the_workers_equals_the_one_run_here() -> None:
    rng = np.random.default_rng(0)
    orders = np.array([rng.permutation(8) for _ in range(40)])
    records = simulate_sequential(rng.normal(0, 1, 8), orders, rng=1, rho=[0.5], batch_sd=0.5)
    here = bootstrap_fits(records, fit_sequential_glmm(records, lags=1), n_boot=12, seed=3, chunk_size=3).draws
    with (
        LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None) as cluster,
        Client(cluster) as client,
    ):
        there = client.submit(_bootstrap_in_a_worker, records).result()
        assert client.submit(cluster_map, _square, [2, 3]).result() == [4, 9]  # tasks from a task, in order
    np.testing.assert_allclose(there, here, rtol=0, atol=1e-10)
