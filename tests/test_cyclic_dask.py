"""The subsampling check gives the same numbers on Dask workers as in one process."""

from __future__ import annotations

import numpy as np
import pytest
from distributed import Client, LocalCluster

from jurymeter.orchestration.cyclic_check import subsampling_check


@pytest.mark.slow
def test_dask_workers_reproduce_the_local_check() -> None:
    rng = np.random.default_rng(0)
    cubes = {
        f"sys-{k}": rng.normal(size=(20, 6, 3)) + rng.normal(size=(1, 1, 3)) for k in range(2)
    }
    local = subsampling_check(cubes, [3, 6], reps=500, seed=4)
    with (
        LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None) as cluster,
        Client(cluster) as client,
    ):
        remote = subsampling_check(cubes, [3, 6], reps=500, seed=4, client=client)
    assert remote.equals(local)
