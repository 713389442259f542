"""Monte Carlo subsampling check of strategies A, B, C against appendix G (section 4.4)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, fields

import numpy as np
import polars as pl

from jurymeter.stats.cyclic.checks import _budgets, _positive_int, _scores
from jurymeter.stats.cyclic.sums import pool_variances

DEFAULT_REPS = 5_000
# Largest number of draws held in memory at once by the subsampling check.
_CHUNK_DRAWS = 1 << 16  # cache-sized chunks: 1.7x faster than 1 << 22 (bench/cyclic.py)



# --------------------------------------------------------------------------- Monte Carlo check
@dataclass(frozen=True, slots=True)
class SubsampleCheck:
    r"""Empirical against predicted variance of the three strategies at one budget (section 4.4).

    ``var_*`` are the variances of the benchmark score over ``reps`` subsamples,
    ``pred_*`` the appendix G predictions, ``se_*`` the Monte Carlo standard error
    of each ``var_*`` (standard deviation of the squared deviations over :math:`\sqrt{reps}`).
    """

    budget: int
    reps: int
    seed: int
    var_a: float
    var_b: float
    var_c: float
    pred_a: float
    pred_b: float
    pred_c: float
    se_a: float
    se_b: float
    se_c: float

    def to_json(self) -> dict[str, float | int]:
        return {f.name: getattr(self, f.name) for f in fields(self)}


def _var_and_se(draws: np.ndarray) -> tuple[float, float]:
    dev2 = (draws - draws.mean()) ** 2
    var = float(dev2.sum() / (len(draws) - 1))
    se = float(dev2.std(ddof=1) / np.sqrt(len(draws)))
    return var, se


def subsample_strategy_variance(
    x: np.ndarray, budget: int, *, reps: int = DEFAULT_REPS, seed: int = 0
) -> SubsampleCheck:
    r"""Monte Carlo subsampling of strategies A, B, C from observed generations (section 4.4).

    A pure function of ``(x, budget, reps, seed)``: the random stream is
    ``numpy.random.default_rng([seed, budget])``, so budgets can run on separate
    workers and give the same answer as a local loop.

    Parameters
    ----------
    x
        Scores ``x[scenario, generation, judge]``, all :math:`K_{tot}` judges on all
        :math:`m_{max}` generations.
    budget
        Per-scenario judge calls :math:`B`, a multiple of :math:`K_{tot}`.
    reps
        Subsampling repetitions (default 5,000, as in the paper's figure 1).
    seed
        Seed.

    Returns
    -------
    SubsampleCheck

    Notes
    -----
    Draws are i.i.d. with replacement within each scenario, as appendix G assumes:

    - A: :math:`B/K_{tot}` generations, each scored by every judge (mean of :math:`\bar X_{ig\cdot}`);
    - B: :math:`B` cells :math:`(g, \ell)` uniform over :math:`m_{max} \times K_{tot}`;
    - C: :math:`B/K_{tot}` generations per judge, each judge from its own column.

    The benchmark score is the mean over scenarios of these per-scenario means; the
    predictions are :math:`C_X / (nB)` (eq. 36-38).
    """
    x = _scores(x)
    k = x.shape[2]
    budget = int(_budgets([budget], k)[0])
    reps = _positive_int("reps", reps, minimum=2)
    seed = _positive_int("seed", seed, minimum=0)
    out = _strategy_draws(x, budget, reps, np.random.default_rng([seed, budget]))
    (va, sa), (vb, sb), (vc, sc) = (_var_and_se(row) for row in out)
    pa, pb, pc = (float(v) for v in pool_variances(x).predict(budget))
    return SubsampleCheck(
        budget=budget,
        reps=reps,
        seed=seed,
        var_a=va,
        var_b=vb,
        var_c=vc,
        pred_a=pa,
        pred_b=pb,
        pred_c=pc,
        se_a=sa,
        se_b=sb,
        se_c=sc,
    )


def _strategy_draws(x: np.ndarray, budget: int, reps: int, rng: np.random.Generator) -> np.ndarray:
    """``(3, reps)`` benchmark scores of strategies A, B, C, drawn in chunks of at most ``_CHUNK_DRAWS`` indices.

    Per chunk the draws are A's, B's, then C's indices (the order fixes the stream).
    """
    n, m_max, k = x.shape
    per = budget // k
    # Flat arrays and int32 offsets: 1-D np.take is several times faster than
    # broadcast fancy indexing over three or four axes.
    # float32 pools halve the memory traffic of the gathers; sums accumulate in float64.
    gen_means = x.mean(axis=2).ravel().astype(np.float32)
    cells = x.ravel().astype(np.float32)
    by_judge = np.ascontiguousarray(np.moveaxis(x, 2, 1)).ravel().astype(np.float32)
    rows = np.arange(n, dtype=np.int32)
    base_a = (rows * m_max)[None, :, None]
    base_b = (rows * m_max * k)[None, :, None]
    base_c = (rows[:, None] * (k * m_max) + np.arange(k, dtype=np.int32)[None, :] * m_max)[
        None, :, :, None
    ]
    chunk = max(1, _CHUNK_DRAWS // (n * budget))
    out = np.empty((3, reps))
    for start in range(0, reps, chunk):
        size = min(chunk, reps - start)
        idx_a = rng.integers(0, m_max, size=(size, n, per), dtype=np.int32) + base_a
        out[0, start : start + size] = np.take(gen_means, idx_a).mean(axis=(1, 2), dtype=np.float64)
        idx_b = rng.integers(0, m_max * k, size=(size, n, budget), dtype=np.int32) + base_b
        out[1, start : start + size] = np.take(cells, idx_b).mean(axis=(1, 2), dtype=np.float64)
        idx_c = rng.integers(0, m_max, size=(size, n, k, per), dtype=np.int32) + base_c
        out[2, start : start + size] = np.take(by_judge, idx_c).mean(
            axis=(1, 2, 3), dtype=np.float64
        )
    return out


def subsample_strategy_curve(
    x: np.ndarray, budgets: Sequence[int], *, reps: int = DEFAULT_REPS, seed: int = 0
) -> pl.DataFrame:
    """:func:`subsample_strategy_variance` at every budget, as a tidy table.

    Columns ``budget, strategy, empirical, predicted, se``; each budget's draws
    depend only on ``(seed, budget)``, not on the other budgets.
    """
    checks = [subsample_strategy_variance(x, b, reps=reps, seed=seed) for b in budgets]
    return pl.DataFrame(
        {
            "budget": [c.budget for c in checks for _ in "ABC"],
            "strategy": [s for _ in checks for s in "ABC"],
            "empirical": [getattr(c, f"var_{s}") for c in checks for s in "abc"],
            "predicted": [getattr(c, f"pred_{s}") for c in checks for s in "abc"],
            "se": [getattr(c, f"se_{s}") for c in checks for s in "abc"],
        }
    )
