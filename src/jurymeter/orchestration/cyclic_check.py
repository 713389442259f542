"""The CyclicJudge Monte Carlo subsampling check, spread over Dask workers.

Thin orchestration: each (system, budget) pair is one call of the pure library
function :func:`jurymeter.stats.cyclic.subsample_strategy_variance`, whose random
stream depends only on ``(seed, budget)``, so a Dask run returns exactly what a
local loop returns.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import polars as pl

from jurymeter.stats.cyclic import DEFAULT_REPS, subsample_strategy_variance


def subsampling_check(
    cubes: Mapping[str, np.ndarray],
    budgets: Sequence[int],
    *,
    reps: int = DEFAULT_REPS,
    seed: int = 0,
    client: Any | None = None,
) -> pl.DataFrame:
    """Empirical against predicted strategy variances for every system and budget.

    Parameters
    ----------
    cubes
        ``x[scenario, generation, judge]`` per system id.
    budgets
        Per-scenario budgets (multiples of the panel size).
    reps, seed
        Repetitions per budget and the seed (paper figure 1: 5,000).
    client
        A ``dask.distributed.Client``; ``None`` runs in this process.

    Returns
    -------
    polars.DataFrame
        ``system_id, budget, strategy, empirical, predicted, se``.
    """
    jobs = [(sid, int(b)) for sid in cubes for b in budgets]
    if client is None:
        checks = [subsample_strategy_variance(cubes[sid], b, reps=reps, seed=seed) for sid, b in jobs]
    else:
        scattered = {sid: client.scatter(cube, broadcast=True) for sid, cube in cubes.items()}
        futures = [
            client.submit(subsample_strategy_variance, scattered[sid], b, reps=reps, seed=seed, pure=False)
            for sid, b in jobs
        ]
        checks = client.gather(futures)
    return pl.DataFrame(
        {
            "system_id": [sid for sid, _ in jobs for _ in "ABC"],
            "budget": [c.budget for c in checks for _ in "ABC"],
            "strategy": [s for _ in checks for s in "ABC"],
            "empirical": [getattr(c, f"var_{s}") for c in checks for s in "abc"],
            "predicted": [getattr(c, f"pred_{s}") for c in checks for s in "abc"],
            "se": [getattr(c, f"se_{s}") for c in checks for s in "abc"],
        }
    )
