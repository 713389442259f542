"""Run history benchmark: 30 published runs x 100 item sets x 2 universes (issue 16, point 4).

Writes synthetic run folders once under ``bench/_work/history`` (the tables
the tracked numbers live in, with every published column, plus an untracked
table of the same size as a real leaderboard), then times
``pipeline.history.load_history`` + ``render.history.history_html`` +
``since_last_run_html`` (goal < 5 s on 2 cores), and, in the same run, the
baseline a user would write: one raw polars scan of every run's tables (all
columns) and every ``summary.json``.

    uv run python bench/history.py --append
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import statistics
import sys
import time
from pathlib import Path

import numpy as np
import orjson
import polars as pl

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(ROOT / "bench"))

from _common import append_results, command_line, facts_block, machine_facts  # noqa: E402
from jurymeter.io.store import Store  # noqa: E402
from jurymeter.pipeline.history import load_history  # noqa: E402
from jurymeter.render.history import history_alerts, history_html, since_last_run_html  # noqa: E402

WORKDIR = ROOT / "bench" / "_work" / "history"
RUNS, ITEM_SETS, UNIVERSES, JUDGES, SYSTEMS = 30, 100, ("all", "three"), 5, 12
QUANTITIES = ("erho2", "phi", "mdd95", "erho2_30", "mdd95_30", "mdd95_unlimited_items", "ceiling",
              "ceiling_3_judges", "items_needed", "judges_needed", "mdd95_in_sd_of_system_means")
GOAL_S = 5.0


def _write(store: Store, rng: np.random.Generator) -> None:
    fits = [(f"set-{k:03d}", u, "all") for k in range(ITEM_SETS) for u in UNIVERSES]
    judges = [f"judge-{j}" for j in range(JUDGES)]
    start = dt.datetime(2026, 11, 1, 2, tzinfo=dt.UTC)
    for run in range(RUNS):
        started = (start + dt.timedelta(days=run)).isoformat(timespec="seconds")
        run_id = f"{(start + dt.timedelta(days=run)).strftime('%Y%m%dT%H%M%SZ')}-{run:08x}"
        folder = f"results/{run_id}"

        def fit_cols(n: int) -> dict[str, list[str]]:
            return {c: [f[k] for f in fits for _ in range(n)] for k, c in enumerate(("item_set", "universe", "population"))}

        x = rng.normal(0.8, 0.05, len(fits) * len(QUANTITIES))
        store.write_parquet(f"{folder}/dstudy.parquet", pl.DataFrame({
            **fit_cols(len(QUANTITIES)), "quantity": list(QUANTITIES) * len(fits), "estimate": x,
            "low": x - 0.1, "high": x + 0.1, "reason": [None] * len(x)}))
        off = rng.normal(0, 0.05, len(fits) * JUDGES) + np.tile(np.linspace(-0.6, 0.6, JUDGES), len(fits))
        store.write_parquet(f"{folder}/judge_effects.parquet", pl.DataFrame({
            **fit_cols(JUDGES), "judge_id": judges * len(fits), "offset": off, "se": np.full(len(off), 0.05),
            "low": off - 0.098, "high": off + 0.098}))
        n = len(fits) * JUDGES
        pairwise = {c: rng.random(n) for c in ("first_slot_win_rate", "tie_rate", "reversal_rate", "reversal_low",
                                                "reversal_high", "q_position_following", "q_low", "q_high",
                                                "parse_failure_rate", "failed_call_rate", "failure_rate",
                                                "replicate_agreement", "replicate_kappa", "gold_accuracy")}
        bias = rng.normal(10, 1.4 / 1.96, n)
        store.write_parquet(f"{folder}/pairwise_judges.parquet", pl.DataFrame({
            **fit_cols(JUDGES), "judge_id": judges * len(fits), "games": np.full(n, 14400),
            "slot_a_advantage": bias, "slot_a_low": bias - 1.4, "slot_a_high": bias + 1.4, **pairwise}))
        rho = rng.normal(0.1, 0.05 / 1.96, n)
        store.write_parquet(f"{folder}/sequential_judges.parquet", pl.DataFrame({
            **fit_cols(JUDGES), "judge_id": judges * len(fits), "ratings": np.full(n, 2880),
            "rho_1": rho, "rho_1_low": rho - 0.05, "rho_1_high": rho + 0.05,
            "reasons": ["groups: no groups given ([fit.sequential] groups)"] * n}))
        # An untracked table of a real run's size: the history never opens it, the baseline does.
        store.write_parquet(f"{folder}/leaderboard.parquet", pl.DataFrame({
            **fit_cols(SYSTEMS), "system_id": [f"sys-{s:02d}" for s in range(SYSTEMS)] * len(fits),
            "mean": rng.normal(6, 1, len(fits) * SYSTEMS), "rank": list(range(1, SYSTEMS + 1)) * len(fits)}))
        entries = [
            {"item_set": f[0], "universe": f[1], "population": f[2], "protocol": protocol, "key": f"{f[0]}{f[1]}{protocol}",
             "status": "fitted", "error": None, "seconds": 1.0,
             "analyses": ({"gstudy": {"status": "fitted", "records": 10000 + 500 * run, "erho2": 0.9, "mdd95": 0.4}}
                          if protocol == "pointwise" else {"pairwise": {"status": "fitted", "slot_a_advantage": 10.0}})}
            for f in fits for protocol in ("pointwise", "pairwise")
        ]
        health = [{"judge_id": j, "stored": 17000 * (run + 1), "failed": int(rng.binomial(1000, 0.01)) * (run + 1),
                   "failed_share": 0.0, "parse_failure": 0, "judge_call_failed": 0, "unscored": 0} for j in judges]
        store.write_bytes(f"{folder}/summary.json", orjson.dumps({
            "run_id": run_id, "started": started, "finished": started, "status": "complete", "fits": entries,
            "judges": health, "ingest": {"sources": [{"path": f"dump-{k}.jsonl", "lines": 1000} for k in range(50)]}}))


def _baseline(root: Path) -> float:
    clock = time.perf_counter()
    for table in ("dstudy", "judge_effects", "pairwise_judges", "sequential_judges", "leaderboard"):
        pl.scan_parquet(str(root / "results" / "*" / f"{table}.parquet"), include_file_paths="path").collect()
    for path in sorted((root / "results").glob("*/summary.json")):
        json.loads(path.read_bytes())
    return time.perf_counter() - clock


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--append", action="store_true", help="append the results to bench/RESULTS.md")
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    facts = machine_facts()
    root = WORKDIR / "store"
    store = Store(str(root))
    marker = WORKDIR / f"written-v2-{RUNS}x{ITEM_SETS}x{len(UNIVERSES)}x{JUDGES}.json"
    clock = time.perf_counter()
    if not marker.exists():
        _write(store, np.random.default_rng(0))
        marker.write_text("{}")
    write_s = time.perf_counter() - clock
    loads, renders, totals, baselines = [], [], [], []
    figures: dict[str, bytes] = {}
    for _ in range(args.repeats):
        baselines.append(_baseline(root))
        clock = time.perf_counter()
        history = load_history(store, limit=RUNS)
        loaded = time.perf_counter()
        figures = {}
        page = history_html(history, figures) + since_last_run_html(history)
        alerts = history_alerts(history)
        done = time.perf_counter()
        loads.append(loaded - clock)
        renders.append(done - loaded)
        totals.append(done - clock)
    total = statistics.median(totals)
    verdict = "met" if total < GOAL_S else "not met"
    text = (
        f"## Run history over published runs ({dt.datetime.now(dt.UTC):%Y-%m-%d %H:%M} UTC)\n\n"
        f"Command: `{command_line('history.py')}`; {RUNS} runs x {ITEM_SETS} item sets x {len(UNIVERSES)} universes "
        f"x {JUDGES} judges (pointwise and pairwise fits: {history.fits.height // RUNS} per run), written once under "
        f"`bench/_work/history` ({write_s:.1f} s this time); median of {args.repeats}.\n\n"
        f"{facts_block(facts)}\n"
        "| step | wall (s) |\n|---|---:|\n"
        f"| `load_history` (tracked columns of 4 tables x {RUNS} runs, {RUNS} summaries, drift flags) | {statistics.median(loads):.2f} |\n"
        f"| `history_html` + `since_last_run_html` + `history_alerts` ({len(figures)} figures) | {statistics.median(renders):.2f} |\n"
        f"| **total** | **{total:.2f}** |\n"
        f"| baseline: raw `pl.scan_parquet` of every run's 5 tables, all columns, + every summary.json | {statistics.median(baselines):.2f} |\n\n"
        f"- total {total:.2f} s — goal < {GOAL_S:.0f} s: **{verdict}**; {history.values.height:,} tracked values, "
        f"{history.values['flagged'].fill_null(False).sum()} flagged ({len(alerts)} alerts on the newest run), "
        f"page {len(page) / 1e6:.1f} MB\n"
        "- the baseline only reads (no selection of the tracked rows, no flags, no page); the history reads the "
        "tracked columns only and never opens the untracked table\n"
    )
    print(text)
    if args.append:
        append_results(text)


if __name__ == "__main__":
    main()
