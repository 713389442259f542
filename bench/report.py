"""Report pages benchmark: 100 item sets x 2 universes, figures drawn by the fits (issue 16, performance).

Builds once, under ``bench/_work/report``: a few small simulated item sets
(``jurymeter.simulate`` defaults: 12 systems x 60 items x 5 judges, pairwise
too) ingested and fitted for real (``run_fits``, figures drawn with the fits
as the workers draw them, kept in the fit cache so reruns do not redraw) and
published once; then their tables, summary entries and figures are replicated
under ``--item-sets`` pointwise item sets (default 100) and ``--pairwise``
pairwise item sets (default 20) x 2 universes (``all``, ``three``): the
``item_set`` column renamed, the figures re-keyed with
``render.html.figure_file_name``. Times, median of ``--repeats`` (interleaved
rounds):

- pages: ``pipeline.publish.write_report(store, folder, tables, summary,
  figures, index)`` into a local store with the run history's index parts
  given (computed beforehand), split into ``render_report`` and the writes;
- history: the same ``write_report`` without ``index`` in a store holding 30
  published runs (``bench/history.py``'s generator), so it reads the history
  and draws its figures itself; "history adds" is its time minus the pages';
- baseline: what a user would do without the report, ``polars.write_csv`` of
  every table of every fit plus every PNG written to disk.

Goals: pages < 10 s, history adds < 5 s (2 cores).

    uv run python bench/report.py --append
"""

from __future__ import annotations

import argparse
import cProfile
import datetime as dt
import io
import os
import pstats
import shutil
import statistics
import sys
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(ROOT / "bench"))

from _common import append_results, busy_cpu_seconds, command_line, facts_block, machine_facts  # noqa: E402
from jurymeter.analyses.headlines import run_headlines  # noqa: E402
from jurymeter.io.store import Store  # noqa: E402
from jurymeter.pipeline.history import load_history  # noqa: E402
from jurymeter.pipeline.page import index_parts, render_report  # noqa: E402
from jurymeter.pipeline.publish import read_run, write_report  # noqa: E402
from jurymeter.render.html import FIT_COLUMNS, FitTables, figure_file_name, fit_token  # noqa: E402

WORKDIR = ROOT / "bench" / "_work" / "report"
SEEDS, UNIVERSES, N_BOOT = 3, ("all", "three"), 200
SEED_RUN = "20261001T020000Z-seed"
RUN_ID = "20261201T020000Z-bench"  # after bench/history.py's 30 runs (2026-11-01 .. 2026-11-30)
PAGES_GOAL_S, HISTORY_GOAL_S = 10.0, 5.0
MIB = 1024**2


SeedFigures = dict[tuple[tuple[str, ...], str], dict[str, bytes]]


def _seed(root: Path) -> tuple[dict[str, pl.DataFrame], dict[str, Any], SeedFigures]:
    """The seed run's tables, summary and figures, fitted once (:func:`_fit_seed`) and kept under ``root/kept``.

    Kept apart from the fit cache, whose keys change with the library's code.
    """
    import orjson

    kept = root / f"kept-v1-{SEEDS}x{N_BOOT}"
    if not (kept / "done.json").exists():
        tables, summary, figures = _fit_seed(root)
        shutil.rmtree(kept, ignore_errors=True)
        for table, frame in tables.items():
            (kept / "tables").mkdir(parents=True, exist_ok=True)
            frame.write_parquet(kept / "tables" / f"{table}.parquet")
        index = []
        for n, ((fit, protocol), pngs) in enumerate(figures.items()):
            index.append({"fit": list(fit), "protocol": protocol, "figures": sorted(pngs)})
            for name, png in pngs.items():
                (kept / "figures" / str(n)).mkdir(parents=True, exist_ok=True)
                (kept / "figures" / str(n) / name).write_bytes(png)
        (kept / "summary.json").write_bytes(orjson.dumps(summary))
        (kept / "figures.json").write_bytes(orjson.dumps(index))
        (kept / "done.json").write_text("{}")
    tables = {p.stem: pl.read_parquet(p) for p in sorted((kept / "tables").glob("*.parquet"))}
    figures = {
        (tuple(f["fit"]), f["protocol"]): {name: (kept / "figures" / str(n) / name).read_bytes() for name in f["figures"]}
        for n, f in enumerate(orjson.loads((kept / "figures.json").read_bytes()))
    }
    return tables, orjson.loads((kept / "summary.json").read_bytes()), figures


def _fit_seed(root: Path) -> tuple[dict[str, pl.DataFrame], dict[str, Any], SeedFigures]:
    """Fit ``SEEDS`` simulated item sets for real and publish them once; their tables, summary and figures."""
    from jurymeter.io.ingest import ingest
    from jurymeter.io.sources import discover_sources
    from jurymeter.io.validate import ValidationOptions
    from jurymeter.pipeline.cache import run_fits
    from jurymeter.pipeline.config import load_config
    from jurymeter.pipeline.jobs import plan_fits
    from jurymeter.pipeline.publish import publish_run
    from jurymeter.simulate import SimulationParams, simulate_dump, write_dump

    store = Store(str(root / "store"))
    sources = []
    for s in range(SEEDS):
        paths = write_dump(simulate_dump(SimulationParams(seed=s, item_set=f"seed-{s}")), root / f"dump-{s}")
        sources += [str(p) for name, p in paths.items() if name != "truth"]
    ingested = ingest(store, discover_sources(sources), ValidationOptions(scale=(1.0, 10.0))).to_json()
    judges = sorted(store.scan("pointwise", "seed-0").select("judge_id").unique().collect()["judge_id"])
    config_path = root / "jm.toml"
    config_path.write_text(
        f'store = "{store.url}"\nscale = [1, 10]\n[universes]\nthree = {judges[:3]!r}\n'
        f"[fit]\nuniverses = ['all', 'three']\nn_boot = {N_BOOT}\n"
    )
    config = load_config(config_path, environ={})
    plan = plan_fits(store, config)
    outcomes = run_fits(store, plan.jobs, figures=True)  # reruns reuse the fit cache, figures included
    for o in outcomes:
        if o.error is not None:
            raise RuntimeError(o.trace or o.error)
    if not (root / "store" / "results" / SEED_RUN / "summary.json").exists():
        publish_run(store, SEED_RUN, config=config, started="2026-10-01T02:00:00+00:00", ingest_report=ingested,
                    outcomes=outcomes, timings={"fit": sum(o.seconds for o in outcomes)}, skipped=plan.skipped)
    tables, summary = read_run(store, f"results/{SEED_RUN}")
    figures = {(tuple(o.job.names[c] for c in FIT_COLUMNS), o.job.protocol): dict(o.figures or {}) for o in outcomes}
    return tables, summary, figures


def _replicate(
    tables: Mapping[str, pl.DataFrame], summary: Mapping[str, Any], figures: SeedFigures,
    pointwise: int, pairwise: int,
) -> tuple[dict[str, pl.DataFrame], dict[str, Any], dict[str, bytes]]:
    """The seed run's fits copied under ``set-000`` .. (``pointwise`` + ``pairwise`` item sets x universes)."""
    from jurymeter.pipeline.page import _table_protocols

    protocol_of = _table_protocols()
    entries = {(f["item_set"], f["universe"], f["population"], f["protocol"]): f for f in summary["fits"]}
    out_tables: dict[str, list[pl.DataFrame]] = {t: [] for t in tables}
    out_entries: list[dict[str, Any]] = []
    out_figures: dict[str, bytes] = {}
    jobs = [(k, "pointwise") for k in range(pointwise)] + [(k, "pairwise") for k in range(pairwise)]
    for k, protocol in jobs:
        src_set, target = f"seed-{k % SEEDS}", f"set-{k:03d}"
        for universe in UNIVERSES:
            src, dst = (src_set, universe, "all"), (target, universe, "all")
            entry = dict(entries[(*src, protocol)])
            entry.update(item_set=target, key=f"{entry['key']}-{target}", status="fitted")
            out_entries.append(entry)
            for table, frame in tables.items():
                if protocol_of.get(table) != protocol or not frame.height:
                    continue
                rows = frame.filter(*(pl.col(c) == v for c, v in zip(FIT_COLUMNS, src, strict=True)))
                out_tables[table].append(rows.with_columns(pl.lit(target).alias("item_set")))
            token = fit_token(src) + "__"
            for name, png in figures[(src, protocol)].items():
                if not name.startswith(token):
                    raise RuntimeError(f"figure {name} is not named after its fit {src}")
                new = figure_file_name(dst, name[len(token):-len(".png")])
                if new in out_figures:
                    raise RuntimeError(f"two fits draw the figure {new}")
                out_figures[new] = png
    combined = {t: pl.concat(parts) if parts else tables[t].clear() for t, parts in out_tables.items()}
    return combined, {**summary, "run_id": RUN_ID, "started": "2026-12-01T02:00:00+00:00",
                      "finished": None, "fits": out_entries}, out_figures


def _published_history(root: Path) -> Store:
    """A store holding bench/history.py's 30 published runs (written once)."""
    import history

    store = Store(str(root))
    marker = root.parent / f"history-v1-{history.RUNS}x{history.ITEM_SETS}.json"
    if not marker.exists():
        history._write(store, np.random.default_rng(0))
        marker.write_text("{}")
    return store


def _baseline(out: Path, tables: Mapping[str, pl.DataFrame], figures: Mapping[str, bytes]) -> int:
    """Every table of every fit to CSV with polars, every PNG to disk; the bytes written."""
    written = 0
    for table, frame in tables.items():
        if not frame.height:
            continue
        # CSV holds no lists: join them, as a user would (only ``units`` of sequential_selection).
        lists = [c for c, d in frame.schema.items() if isinstance(d, pl.List)]
        frame = frame.with_columns(pl.col(c).cast(pl.List(pl.String)).list.join(";") for c in lists)
        for key, rows in frame.partition_by(list(FIT_COLUMNS), as_dict=True).items():
            path = out / "csv" / f"{fit_token(tuple(str(v) for v in key))}__{table}.csv"
            path.parent.mkdir(parents=True, exist_ok=True)
            rows.write_csv(path)
            written += path.stat().st_size
    (out / "png").mkdir(parents=True, exist_ok=True)
    for name, png in figures.items():
        (out / "png" / name).write_bytes(png)
        written += len(png)
    return written


class Clock:
    """Wall and CPU time (every thread of this process) of one step."""

    def __init__(self) -> None:
        self.wall: list[float] = []
        self.cpu: list[float] = []

    def time(self, step: Callable[[], Any]) -> Any:
        w, c = time.perf_counter(), time.process_time()
        result = step()
        self.wall.append(time.perf_counter() - w)
        self.cpu.append(time.process_time() - c)
        return result

    def row(self, what: str, *, bold: bool = False) -> str:
        w, c = statistics.median(self.wall), statistics.median(self.cpu)
        cells = f"{w:.2f} | {c:.2f} | {min(self.wall):.2f}-{max(self.wall):.2f}"
        return f"| **{what}** | **{cells.replace(' | ', '** | **')}** |\n" if bold else f"| {what} | {cells} |\n"


def _fresh(path: Path) -> Path:
    shutil.rmtree(path, ignore_errors=True)
    return path


def _profile(step: Callable[[], Any], top: int = 25) -> str:
    profiler = cProfile.Profile()
    profiler.enable()
    step()
    profiler.disable()
    text = io.StringIO()
    pstats.Stats(profiler, stream=text).sort_stats("cumulative").print_stats(top)
    text.write("\n--- by own time ---\n")
    pstats.Stats(profiler, stream=text).sort_stats("tottime").print_stats(15)
    return text.getvalue()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--append", action="store_true", help="append the results to bench/RESULTS.md")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--item-sets", type=int, default=100)
    parser.add_argument("--pairwise", type=int, default=20)
    parser.add_argument("--profile", action="store_true", help="print cProfile of render_report and of the history")
    args = parser.parse_args()
    facts = machine_facts()
    WORKDIR.mkdir(parents=True, exist_ok=True)

    clock = time.perf_counter()
    seed_tables, seed_summary, seed_figures = _seed(WORKDIR / "seed")
    seed_s = time.perf_counter() - clock
    tables, summary, figures = _replicate(seed_tables, seed_summary, seed_figures, args.item_sets, args.pairwise)
    hist_store = _published_history(WORKDIR / "history")
    # The index parts and headlines publish_run computes before write_report, from the 30 runs + this one.
    history = load_history(hist_store, current=(tables, summary))
    index = index_parts(history)
    summary["headlines"] = run_headlines(summary, index.alerts)
    folder = f"results/{RUN_ID}"
    pages_store = Store(str(WORKDIR / "pages"))
    hist_report = WORKDIR / "history" / "results" / RUN_ID

    n_seed_png = sum(len(f) for f in seed_figures.values())
    # render_report splits each table by fit once (render.html.FitTables): the same rows as a filter per fit.
    split = FitTables(tables)
    for table, frame in tables.items():
        for f in summary["fits"] if frame.height else []:
            fit = (f["item_set"], f["universe"], f["population"])
            rows = split.fit_rows(table, fit)
            want = frame.filter(*(pl.col(c) == v for c, v in zip(FIT_COLUMNS, fit, strict=True)))
            if rows is None or not rows.equals(want):
                raise RuntimeError(f"FitTables rows of {table} for {fit} differ from the filter's")
    if args.profile:
        print(_profile(lambda: render_report(tables, summary, figures, index)))
        print(_profile(lambda: index_parts(load_history(hist_store, current=(tables, summary)))))

    pages, render, writes, with_history, baseline = Clock(), Clock(), Clock(), Clock(), Clock()
    busy0, load0, own0 = busy_cpu_seconds(), os.getloadavg()[0], time.process_time()
    rendered = render_report(tables, summary, figures, index)
    baseline_bytes = 0
    for _ in range(args.repeats):
        out = _fresh(WORKDIR / "baseline")
        baseline_bytes = baseline.time(lambda out=out: _baseline(out, tables, figures))
        _fresh(WORKDIR / "pages" / folder)
        pages.time(lambda: write_report(pages_store, folder, tables, summary, figures, index))
        _fresh(WORKDIR / "pages" / folder)
        rendered = render.time(lambda: render_report(tables, summary, figures, index))
        writes.time(lambda r=rendered: [pages_store.write_bytes(f"{folder}/report/{n}", d) for n, d in r.files().items()])
        _fresh(hist_report)
        with_history.time(lambda: write_report(hist_store, folder, tables, summary, figures))
    other_cpu = max(0.0, busy_cpu_seconds() - busy0 - (time.process_time() - own0))
    files = rendered.files()
    html_pages = {"index.html": rendered.html, **rendered.pages}
    drawn_now = sorted(set(rendered.figures) - set(figures) - set(index.figures))
    sizes = {p: len(h.encode()) for p, h in html_pages.items()}
    largest = max(sizes, key=lambda p: sizes[p])
    on_disk = sum(f.stat().st_size for f in (WORKDIR / "pages" / folder / "report").rglob("*") if f.is_file())
    same = (hist_report / "report" / "index.html").read_bytes() == rendered.html.encode()
    pages_s, hist_s = statistics.median(pages.wall), statistics.median(with_history.wall)
    adds = hist_s - pages_s
    n_fits = len(summary["fits"])
    text = (
        f"## Report pages: {args.item_sets} + {args.pairwise} pairwise item sets x {len(UNIVERSES)} universes "
        f"({dt.datetime.now(dt.UTC):%Y-%m-%d %H:%M} UTC)\n\n"
        f"Command: `{command_line('report.py')}`; {SEEDS} simulated item sets (12 systems x 60 items x 5 judges, "
        f"pairwise too; `n_boot` {N_BOOT}) fitted for real once with their figures (`run_fits`; "
        f"kept under `bench/_work/report`; {seed_s:.1f} s this time, {n_seed_png} PNGs), replicated as {n_fits} fits "
        f"({args.item_sets} pointwise + {args.pairwise} pairwise item sets x {len(UNIVERSES)} universes), "
        f"{len(figures)} PNGs ({sum(map(len, figures.values())) / MIB:.1f} MiB) drawn by the fits; "
        f"median of {args.repeats} interleaved rounds, into a local store.\n\n"
        f"{facts_block(facts)}"
        f"- machine load: load average {load0:.2f} before; other processes used {other_cpu:.1f} CPU-s "
        f"during the {args.repeats} rounds\n\n"
        "| step | wall (s) | CPU (s) | wall range (s) |\n|---|---:|---:|---|\n"
        + pages.row("pages: `write_report(..., index)` (history parts given)", bold=True)
        + render.row("  of which `render_report`")
        + writes.row("  of which writing every file (`Store.write_bytes`)")
        + with_history.row(f"`write_report` without `index`: reads the history ({history.runs.height} runs) "
                           "and draws its figures", bold=True)
        + baseline.row("baseline: `polars.write_csv` per fit and table + every PNG to disk")
        + "\n"
        f"- output: {len(html_pages)} pages ({len(rendered.pages)} fit pages + index), {len(rendered.downloads)} CSV, "
        f"{len(rendered.figures)} PNG ({len(index.figures)} of them the history's); {len(files)} files, "
        f"{sum(map(len, files.values())) / MIB:.1f} MiB ({on_disk / MIB:.1f} MiB on disk); pages "
        f"{sum(sizes.values()) / MIB:.1f} MiB, the largest `{largest}` {sizes[largest] / MIB:.2f} MiB "
        f"(index {sizes['index.html'] / MIB:.2f} MiB); figures drawn while rendering: {len(drawn_now)}; "
        f"baseline wrote {baseline_bytes / MIB:.1f} MiB\n"
        f"- pages {pages_s:.2f} s — goal < {PAGES_GOAL_S:.0f} s: **{'met' if pages_s < PAGES_GOAL_S else 'missed'}**; "
        f"history adds {adds:.2f} s — goal < {HISTORY_GOAL_S:.0f} s: **{'met' if adds < HISTORY_GOAL_S else 'missed'}** "
        f"(the two index pages are {'identical' if same else 'NOT identical'})\n"
        "- the history's 30 runs are `bench/history.py`'s generator (100 pointwise and 100 pairwise item sets a run, "
        "more pairwise series than this run has: conservative for the history)\n"
    )
    print(text)
    if args.append:
        append_results(text)


if __name__ == "__main__":
    main()
