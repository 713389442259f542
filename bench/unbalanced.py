"""Every-record G-study benchmark (issue 14, "Performance").

Two measurements, one process each, in memory (no store):

1. **10M records, complete against 5% of cells missing.** The complete item set
   of ``bench/gstudy.py`` (100 systems x 2,000 items x 10 judges x 5
   replicates, ``s x i x j x r:sij``, components ``bench/gstudy.py::COMPONENTS``,
   one generation) and the same records less 5% of the (system, item, judge)
   cells at random. Each goes through the default path of the analysis,
   ``GSTUDY.start(FitScope(...), None, GStudyOptions()).finish()`` (estimator
   ``auto``: the balanced report on the complete set, Henderson I on the
   incomplete one), ``--repeats`` times interleaved; and, the core alone, the
   balanced ``balanced_block`` + ``fit_gstudy`` + its chi-square draws against
   ``henderson_cells`` + ``RecordPattern.of(...).fit()`` + ``chisquare_draws``
   (800 draws each). Goal: incomplete within 1.5x of complete.
2. **lme4 on a 300K-record incomplete design.** 20 systems x 300 items x 5
   judges x 10 replicates, 5% of cells missing, through
   ``bench/gstudy_lme4.R`` (REML, bobyqa) against ``henderson1`` on the same
   records; components side by side. Goal: ours at least 1000x faster.

The incomplete set's default path refits Henderson I on 800 simulated data sets
(the record bootstrap, the default interval method), so it runs ``--record-runs``
times (default 1); the same path with chi-square interval draws
(``henderson_intervals="chisquare"``, set by wrapping ``henderson_report``:
the analysis has no option for it) runs every repeat.

Usage: ``uv run python bench/unbalanced.py [--repeats 3] [--record-runs 1] [--skip-lme4] [--append]``
(``--append`` adds the results to ``bench/RESULTS.md``).
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl

HERE = Path(__file__).resolve().parent
COMPONENTS = (0.30, 0.50, 0.05, 0.40, 0.10, 0.15, 0.60, 0.80)  # s i j si sj ij sij r:sij
SPEC = "s x i x j x r:sij"


def records(sizes: tuple[int, int, int, int], missing: float, seed: int) -> pl.DataFrame:
    """Normal records of ``s x i x j x r:sij`` less a share ``missing`` of (s, i, j) cells."""
    rng = np.random.default_rng(seed)
    n_s, n_i, n_j, n_r = sizes
    n = n_s * n_i * n_j * n_r
    s, i, j, r = np.unravel_index(np.arange(n, dtype=np.int64), sizes)
    cell = (s * n_i + i) * n_j + j
    y = np.full(n, 5.5)
    for value, key, levels in (
        (COMPONENTS[0], s, n_s), (COMPONENTS[1], i, n_i), (COMPONENTS[2], j, n_j),
        (COMPONENTS[3], s * n_i + i, n_s * n_i), (COMPONENTS[4], s * n_j + j, n_s * n_j),
        (COMPONENTS[5], i * n_j + j, n_i * n_j), (COMPONENTS[6], cell, n_s * n_i * n_j),
    ):
        y += rng.normal(scale=np.sqrt(value), size=levels)[key]
    y += rng.normal(scale=np.sqrt(COMPONENTS[7]), size=n)
    keep = (rng.random(n_s * n_i * n_j) >= missing)[cell]

    def text(prefix: str, count: int, code: np.ndarray) -> pl.Series:
        width = len(str(count - 1))
        return pl.Series([f"{prefix}-{k:0{width}d}" for k in range(count)]).gather(pl.Series(code.astype(np.uint32)))

    frame = pl.DataFrame({
        "system_id": text("sys", n_s, s), "item_id": text("item", n_i, i), "judge_id": text("judge", n_j, j),
        "generation": np.zeros(n, dtype=np.int64), "replicate": r, "score": y,
    })
    return frame.filter(pl.Series(keep)) if missing > 0 else frame


def default_path(frame: pl.DataFrame, intervals: str | None = None) -> tuple[float, str]:
    """Seconds of the analysis' default path; ``intervals`` overrides the Henderson interval method only."""
    import dataclasses
    from unittest import mock

    import jurymeter.stats.reliability as reliability
    from jurymeter.analyses.base import FitScope, FitSettings
    from jurymeter.analyses.gstudy import GSTUDY, GStudyOptions

    original = reliability.henderson_report

    def report_with(cells: Any, request: Any, **kwargs: Any) -> Any:
        return original(cells, dataclasses.replace(request, henderson_intervals=intervals), **kwargs)

    scope = FitScope(item_set="bench", protocol="pointwise", records=frame.lazy(), systems=pl.DataFrame(),
                     judges=pl.DataFrame(), settings=FitSettings())
    with mock.patch.object(reliability, "henderson_report", report_with) if intervals else mock.MagicMock():
        t0 = time.perf_counter()
        report = GSTUDY.start(scope, None, GStudyOptions()).finish().report
        seconds = time.perf_counter() - t0
    if intervals:
        assert str(report["intervals"]["method"]).endswith("(chi-square)"), report["intervals"]["method"]
    return seconds, str(report["estimator"])


def core_balanced(frame: pl.DataFrame) -> float:
    from jurymeter.stats.blocks import balanced_block
    from jurymeter.stats.bootstrap import resample_components
    from jurymeter.stats.gstudy import fit_gstudy

    t0 = time.perf_counter()
    block = balanced_block(frame.lazy())
    fit = fit_gstudy(block.x, block.design)
    resample_components(fit, 800)
    return time.perf_counter() - t0


def core_henderson(frame: pl.DataFrame) -> float:
    from jurymeter.stats.henderson import RecordPattern, chisquare_draws
    from jurymeter.stats.reliability import GStudyRequest, henderson_cells

    t0 = time.perf_counter()
    cells = henderson_cells(frame.lazy(), GStudyRequest(item_set="bench"))
    fit = RecordPattern.of(cells, SPEC).fit()
    chisquare_draws(fit, 800)
    return time.perf_counter() - t0


def lme4(sizes: tuple[int, int, int, int], seed: int, timeout: float) -> dict[str, Any]:
    from jurymeter.stats.henderson import henderson1

    frame = records(sizes, 0.05, seed)
    t0 = time.perf_counter()
    ours = henderson1(frame, SPEC)
    ours_seconds = time.perf_counter() - t0
    runs = [time.perf_counter()]
    for _ in range(4):
        henderson1(frame, SPEC)
        runs.append(time.perf_counter())
    ours_best = min(min(b - a for a, b in itertools.pairwise(runs)), ours_seconds)
    out: dict[str, Any] = {"records": frame.height, "ours_seconds": ours_best,
                           "ours": dict(zip(ours.effects, ours.sigma2.tolist(), strict=True))}
    with tempfile.TemporaryDirectory() as tmp:
        csv = Path(tmp) / "data.csv"
        frame.select(s="system_id", i="item_id", j="judge_id", score="score").write_csv(csv)
        formula = "score ~ 1 + (1|s) + (1|i) + (1|j) + (1|s:i) + (1|s:j) + (1|i:j) + (1|s:i:j)"
        result = Path(tmp) / "out.json"
        t0 = time.perf_counter()
        try:
            subprocess.run(["Rscript", str(HERE / "gstudy_lme4.R"), str(csv), formula, str(result)],
                           check=True, timeout=timeout, capture_output=True)
        except subprocess.TimeoutExpired:
            out["lme4"] = f"timed out after {timeout:.0f} s"
            return out
        out["lme4_wall"] = time.perf_counter() - t0
        out["lme4"] = json.loads(result.read_text())
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--skip-lme4", action="store_true")
    parser.add_argument("--skip-10m", action="store_true")
    parser.add_argument("--items", type=int, default=2000, help="items of the large set (2000: 10M records)")
    parser.add_argument("--record-runs", type=int, default=1,
                        help="runs of the default path (800 record-bootstrap refits) on the incomplete set")
    parser.add_argument("--lme4-timeout", type=float, default=3600.0)
    parser.add_argument("--append", action="store_true")
    opts = parser.parse_args()
    lines = [f"\n## Every-record G-study (issue 14, performance), {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}\n",
             f"Command: `uv run python bench/unbalanced.py {' '.join(sys.argv[1:])}`; load at start "
             f"{', '.join(f'{v:.2f}' for v in os.getloadavg())} on {os.cpu_count()} CPUs.\n"]
    if not opts.skip_10m:
        complete = records((100, opts.items, 10, 5), 0.0, opts.seed)
        incomplete = records((100, opts.items, 10, 5), 0.05, opts.seed)
        rows: dict[str, list[float]] = {k: [] for k in ("complete", "incomplete", "chisquare", "core_b", "core_h")}
        for run in range(opts.repeats):
            seconds, estimator = default_path(complete)
            assert estimator == "balanced", estimator
            rows["complete"].append(seconds)
            if run < opts.record_runs:
                seconds, estimator = default_path(incomplete)
                assert estimator == "henderson", estimator
                rows["incomplete"].append(seconds)
            seconds, estimator = default_path(incomplete, "chisquare")
            assert estimator == "henderson", estimator
            rows["chisquare"].append(seconds)
            rows["core_b"].append(core_balanced(complete))
            rows["core_h"].append(core_henderson(incomplete))
        med = {k: float(np.median(v)) if v else float("nan") for k, v in rows.items()}
        lines += [
            f"**{complete.height / 1e6:.1f}M records** ({complete.height:,} complete; {incomplete.height:,} with 5% of cells missing), "
            f"medians of {opts.repeats} interleaved runs (all runs in s):\n",
            "| step | complete (balanced) | 5% missing (Henderson I) | ratio |",
            "|---|---:|---:|---:|",
            f"| default path, `GSTUDY.start(...).finish()` | {med['complete']:.2f} ({', '.join(f'{v:.2f}' for v in rows['complete'])}) "
            f"| {med['incomplete']:.2f} ({', '.join(f'{v:.2f}' for v in rows['incomplete'])}) "
            f"| {med['incomplete'] / med['complete']:.2f} |",
            f"| the same, Henderson intervals by chi-square draws | (as above) "
            f"| {med['chisquare']:.2f} ({', '.join(f'{v:.2f}' for v in rows['chisquare'])}) "
            f"| {med['chisquare'] / med['complete']:.2f} |",
            f"| core: cells + fit + 800 chi-square draws | {med['core_b']:.2f} ({', '.join(f'{v:.2f}' for v in rows['core_b'])}) "
            f"| {med['core_h']:.2f} ({', '.join(f'{v:.2f}' for v in rows['core_h'])}) "
            f"| {med['core_h'] / med['core_b']:.2f} |",
            "",
            f"Goal (incomplete within 1.5x): default path **{'met' if med['incomplete'] <= 1.5 * med['complete'] else 'missed'}**, "
            f"with chi-square intervals **{'met' if med['chisquare'] <= 1.5 * med['complete'] else 'missed'}**, "
            f"core **{'met' if med['core_h'] <= 1.5 * med['core_b'] else 'missed'}**.\n",
        ]
        if not rows["incomplete"]:
            from jurymeter.stats.henderson import RecordPattern
            from jurymeter.stats.reliability import GStudyRequest, henderson_cells

            pattern = RecordPattern.of(henderson_cells(incomplete.lazy(), GStudyRequest(item_set="bench")), SPEC)
            fit = pattern.fit()
            t0 = time.perf_counter()
            pattern.bootstrap(fit, 20)
            per_draw = (time.perf_counter() - t0) / 20
            lines.append(f"Default path not run on the incomplete set (`--record-runs 0`): its 800 record-bootstrap "
                         f"refits take {per_draw:.2f} s each (20 timed), about {800 * per_draw / 60:.1f} min "
                         "on top of the chi-square row.\n")
        del complete, incomplete
    if not opts.skip_lme4:
        found = lme4((20, 300, 5, 10), opts.seed, opts.lme4_timeout)
        lines.append(f"**lme4 on {found['records']:,} records** (20 x 300 x 5 x 10, 5% of cells missing): "
                     f"`henderson1` {found['ours_seconds']:.4f} s (best of 5).\n")
        if isinstance(found["lme4"], str):
            lines.append(f"lme4: {found['lme4']}.\n")
        else:
            fit_s = found["lme4"]["lmer"]["elapsed"]
            lines += [f"lme4 `lmer` {fit_s:.1f} s (process {found['lme4_wall']:.1f} s): "
                      f"ratio **{fit_s / found['ours_seconds']:.0f}x** (goal >= 1000x).\n",
                      "| component | Henderson I | lme4 REML | difference |", "|---|---:|---:|---:|"]
            names = {"s": "s", "i": "i", "j": "j", "si": "s:i", "sj": "s:j", "ij": "i:j", "sij": "s:i:j",
                     "r:sij": "Residual"}
            for label, value in found["ours"].items():
                theirs = float(found["lme4"]["components"][names[label]])
                lines.append(f"| {label} | {value:.6f} | {theirs:.6f} | {value - theirs:+.2e} |")
            lines.append("")
    text = "\n".join(lines)
    print(text)
    if opts.append:
        with (HERE / "RESULTS.md").open("a") as handle:
            handle.write(text + "\n")


if __name__ == "__main__":
    main()
