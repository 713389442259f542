"""Coverage of the Henderson I interval draws by simulation (issue 14, "Intervals"; ``docs/henderson.md``).

Each run simulates ``--sims`` data sets of ``s x i x j x r:sij`` (the components
``TRUTH`` of ``tests/test_unbalanced.py``, 2 replicates) at the given sizes, drops
cells by ``--pattern``, fits Henderson I and counts how often the nominal 95%
pivotal interval of sigma2_s and of the single-judge ceiling covers the truth,
with the record bootstrap (``--kind records``) or chi-square draws
(``--kind chisquare``), ``--draws`` draws each. Patterns:

- ``mix``: 25% of (system, item, judge) cells, then 15% of the records, at random;
- ``pairs30``: 30% of (system, item) pairs, then 10% of the cells;
- ``cells5``: 5% of the cells;
- ``complete``: nothing missing.

Usage: ``uv run python bench/henderson_coverage.py SYSTEMS ITEMS JUDGES --pattern mix --sims 300 --seed 5 --kind chisquare``.
Prints one line: the sizes, the pattern, the seed, the two coverages and the seconds.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np
import polars as pl

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from jurymeter.stats.bootstrap import intervals_from_draws
from jurymeter.stats.design import Design
from jurymeter.stats.dstudy import ceiling
from jurymeter.stats.henderson import RecordPattern, chisquare_draws
from test_unbalanced import (  # type: ignore[import-not-found]  # the tests' simulation, not a copy of it
    TRUTH,
    _drop_cells,
    _records,
)

CELL = ["system_id", "item_id", "judge_id"]


def incomplete(full: pl.DataFrame, pattern: str, rng: np.random.Generator) -> pl.DataFrame:
    """``full`` less the records of ``pattern`` (module docstring)."""
    if pattern == "complete":
        return full
    kept: pl.DataFrame
    if pattern == "cells5":
        kept = _drop_cells(full, CELL, 0.05, rng)
        return kept
    if pattern == "pairs30":
        kept = _drop_cells(_drop_cells(full, ["system_id", "item_id"], 0.30, rng), CELL, 0.10, rng)
        return kept
    if pattern == "mix":
        kept = _drop_cells(full, CELL, 0.25, rng)
        return kept.filter(pl.Series(rng.random(kept.height) >= 0.15))
    msg = f"--pattern must be complete, cells5, pairs30 or mix; got {pattern!r}"
    raise SystemExit(msg)


def coverage(sizes: dict[str, int], pattern: str, sims: int, seed: int, kind: str, draws: int) -> tuple[float, float]:
    """Shares of data sets whose 95% intervals cover sigma2_s and the ceiling."""
    design = Design.parse("s x i x j x r:sij")
    true_ceiling = float(ceiling(np.array([TRUTH[label] for label in design.labels]), design))
    rng = np.random.default_rng(seed)
    hits_s = hits_c = 0
    for k in range(sims):
        records = incomplete(_records(rng, sizes, TRUTH), pattern, rng)
        found = RecordPattern.of(records, design)
        fit = found.fit()
        sample = found.bootstrap(fit, draws, seed=k) if kind == "records" else chisquare_draws(fit, draws, seed=k)
        intervals = intervals_from_draws(fit, sample, native={f: fit.dstudy_sizes[f] for f in "ijr"})
        s, c = intervals.sigma2["s"], intervals.derived["ceiling"]
        hits_s += s.low <= TRUTH["s"] <= s.high
        hits_c += c.low <= true_ceiling <= c.high
    return hits_s / sims, hits_c / sims


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("systems", type=int)
    parser.add_argument("items", type=int)
    parser.add_argument("judges", type=int)
    parser.add_argument("--pattern", default="mix")
    parser.add_argument("--sims", type=int, default=300)
    parser.add_argument("--seed", type=int, default=5)
    parser.add_argument("--kind", choices=("records", "chisquare"), default="chisquare")
    parser.add_argument("--draws", type=int, default=400)
    opts = parser.parse_args()
    sizes = {"s": opts.systems, "i": opts.items, "j": opts.judges, "r": 2}
    t0 = time.perf_counter()
    cover_s, cover_c = coverage(sizes, opts.pattern, opts.sims, opts.seed, opts.kind, opts.draws)
    print(f"{opts.systems} x {opts.items} x {opts.judges} x 2, {opts.pattern}, seed {opts.seed}, {opts.kind}: "
          f"sigma2_s {100 * cover_s:.1f}%, ceiling {100 * cover_c:.1f}% ({opts.sims} data sets, "
          f"{time.perf_counter() - t0:.0f} s)")


if __name__ == "__main__":
    main()
