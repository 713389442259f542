"""Every-record G-study benchmark (issue 14, "Performance").

Two measurements:

1. **10M records, complete against 5% of cells missing.** The complete item set
   of ``bench/gstudy.py`` (100 systems x 2,000 items x 10 judges x 5
   replicates, ``s x i x j x r:sij``, one generation) and the same records less
   5% of the (system, item, judge) cells at random, each ingested into its own
   store under ``--workdir`` (reused while the records are the same). Timed,
   ``--repeats`` times interleaved: the whole ``jurymeter gstudy --json``
   process with default settings on each store (estimator ``auto``: the
   balanced report on the complete set, Henderson I on the incomplete one, its
   intervals as ``henderson_intervals = "auto"`` chooses), the analysis in
   memory (``GSTUDY.start(...).finish()``), and the core alone (the balanced
   ``balanced_block`` + ``fit_gstudy`` + its chi-square draws against
   ``henderson_cells`` + ``RecordPattern.of(...).fit()`` + ``chisquare_draws``,
   800 draws each). Goal: incomplete within 1.5x of complete.
2. **lme4 on a 300K-record incomplete design.** 20 systems x 300 items x 5
   judges x 10 replicates, 5% of cells missing, through
   ``bench/gstudy_lme4.R`` (REML, bobyqa) against ``henderson1`` on the same
   records; components side by side. Goal: ours at least 1000x faster.

``--record-runs N`` also times N runs with the record bootstrap asked for
(``henderson_intervals="records"``: 800 refits of 9.5M records, minutes);
without it, ten refits are timed and the 800 estimated.

Usage: ``uv run python bench/unbalanced.py [--repeats 3] [--record-runs 0] [--skip-lme4] [--append]``
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


def default_path(frame: pl.DataFrame, intervals: str = "auto") -> tuple[float, dict[str, Any]]:
    """Seconds of the analysis' path in memory (no store; ``intervals`` the ``henderson_intervals`` option)."""
    from jurymeter.analyses.base import FitScope, FitSettings
    from jurymeter.analyses.gstudy import GSTUDY, GStudyOptions

    scope = FitScope(item_set="bench", protocol="pointwise", records=frame.lazy(), systems=pl.DataFrame(),
                     judges=pl.DataFrame(), settings=FitSettings())
    t0 = time.perf_counter()
    report = GSTUDY.start(scope, None, GStudyOptions(henderson_intervals=intervals)).finish().report
    return time.perf_counter() - t0, dict(report)


def build_store(work: Path, frame: pl.DataFrame, tag: str) -> Path:
    """A store holding ``frame`` as item set ``bench`` (reused when its recipe file says the same records)."""
    import shutil

    from jurymeter.io.ingest import ingest
    from jurymeter.io.sources import discover_sources
    from jurymeter.io.store import Store
    from jurymeter.io.validate import ValidationOptions

    store_dir = work / f"store-{tag}"
    recipe = {"tag": tag, "records": frame.height, "score_sum": float(frame["score"].sum())}
    recipe_file = store_dir.with_suffix(".json")
    if store_dir.exists() and recipe_file.exists() and json.loads(recipe_file.read_text()) == recipe:
        return store_dir
    shutil.rmtree(store_dir, ignore_errors=True)
    work.mkdir(parents=True, exist_ok=True)
    source = work / f"source-{tag}.parquet"
    frame.with_columns(pl.lit("bench").alias("item_set")).write_parquet(source, compression="zstd")
    report = ingest(Store(str(store_dir)), discover_sources([str(source)]), ValidationOptions())
    source.unlink()
    if report.totals()["accepted"] != frame.height:
        msg = f"ingest did not accept every record: {report.totals()}"
        raise RuntimeError(msg)
    recipe_file.write_text(json.dumps(recipe))
    return store_dir


def process(store: Path) -> tuple[float, dict[str, Any]]:
    """Wall seconds of a fresh ``jurymeter gstudy --json`` process on ``store`` (defaults), and its report."""
    exe = str(Path(sys.executable).parent / "jurymeter")
    t0 = time.perf_counter()
    done = subprocess.run([exe, "gstudy", "--item-set", "bench", "--store", str(store), "--json"],
                          capture_output=True, text=True, check=True)
    seconds = time.perf_counter() - t0
    return seconds, dict(json.loads(done.stdout))


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
    parser.add_argument("--record-runs", type=int, default=0,
                        help="runs with the record bootstrap asked for (800 refits, minutes) on the incomplete set")
    parser.add_argument("--workdir", type=Path, default=HERE / "_work" / "unbalanced",
                        help="where the two 10M-record stores are built (and reused)")
    parser.add_argument("--lme4-timeout", type=float, default=3600.0)
    parser.add_argument("--append", action="store_true")
    opts = parser.parse_args()
    lines = [f"\n## Every-record G-study (issue 14, performance), {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}\n",
             f"Command: `uv run python bench/unbalanced.py {' '.join(sys.argv[1:])}`; load at start "
             f"{', '.join(f'{v:.2f}' for v in os.getloadavg())} on {os.cpu_count()} CPUs.\n"]
    if not opts.skip_10m:
        complete = records((100, opts.items, 10, 5), 0.0, opts.seed)
        incomplete = records((100, opts.items, 10, 5), 0.05, opts.seed)
        stores = {"complete": build_store(opts.workdir, complete, f"complete-{opts.items}-seed{opts.seed}"),
                  "incomplete": build_store(opts.workdir, incomplete, f"missing5-{opts.items}-seed{opts.seed}")}
        keys = ("complete", "incomplete", "process_b", "process_h", "core_b", "core_h", "records")
        rows: dict[str, list[float]] = {k: [] for k in keys}
        said: dict[str, str] = {}
        for run in range(opts.repeats):
            seconds, report = process(stores["complete"])
            assert report["estimator"] == "balanced", report["estimator"]
            rows["process_b"].append(seconds)
            seconds, report = process(stores["incomplete"])
            assert report["estimator"] == "henderson", report["estimator"]
            rows["process_h"].append(seconds)
            said["process"] = f"{report['intervals']['method']}; {report['intervals']['method_note']}"
            seconds, report = default_path(complete)
            assert report["estimator"] == "balanced", report["estimator"]
            rows["complete"].append(seconds)
            seconds, report = default_path(incomplete)
            assert report["estimator"] == "henderson", report["estimator"]
            rows["incomplete"].append(seconds)
            if run < opts.record_runs:
                seconds, report = default_path(incomplete, "records")
                rows["records"].append(seconds)
            rows["core_b"].append(core_balanced(complete))
            rows["core_h"].append(core_henderson(incomplete))
        med = {k: float(np.median(v)) if v else float("nan") for k, v in rows.items()}

        def row(label: str, b: str, h: str) -> str:
            runs = {k: ", ".join(f"{v:.2f}" for v in rows[k]) for k in (b, h)}
            return (f"| {label} | {med[b]:.2f} ({runs[b]}) | {med[h]:.2f} ({runs[h]}) | {med[h] / med[b]:.2f} |")

        lines += [
            f"**{complete.height / 1e6:.1f}M records** ({complete.height:,} complete; {incomplete.height:,} with 5% "
            f"of cells missing), medians of {opts.repeats} interleaved runs (all runs in s):\n",
            "| step | complete (balanced) | 5% missing (Henderson I) | ratio |",
            "|---|---:|---:|---:|",
            row("whole `jurymeter gstudy --json` process from the store, default settings", "process_b", "process_h"),
            row("the analysis in memory, `GSTUDY.start(scope, None, GStudyOptions()).finish()`", "complete",
                "incomplete"),
            row("core: cells + fit + 800 chi-square draws", "core_b", "core_h"),
            "",
            f"Goal (incomplete within 1.5x, default settings): whole process "
            f"**{'met' if med['process_h'] <= 1.5 * med['process_b'] else 'missed'}**, in memory "
            f"**{'met' if med['incomplete'] <= 1.5 * med['complete'] else 'missed'}**. The incomplete set's "
            f"intervals by default: {said['process']}.\n",
        ]
        if rows["records"]:
            lines.append(f"The record bootstrap asked for (`--henderson-intervals records`, in memory): "
                         f"{med['records']:.1f} s ({', '.join(f'{v:.1f}' for v in rows['records'])}).\n")
        else:
            from jurymeter.stats.henderson import RecordPattern
            from jurymeter.stats.reliability import GStudyRequest, henderson_cells

            pattern = RecordPattern.of(henderson_cells(incomplete.lazy(), GStudyRequest(item_set="bench")), SPEC)
            fit = pattern.fit()
            t0 = time.perf_counter()
            pattern.bootstrap(fit, 10)
            per_draw = (time.perf_counter() - t0) / 10
            lines.append(f"The record bootstrap if asked for (`--henderson-intervals records`; not run, "
                         f"`--record-runs 0`): {per_draw:.2f} s per refit (10 timed), about "
                         f"{800 * per_draw / 60:.1f} min for 800.\n")
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
