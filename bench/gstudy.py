"""G-study benchmark: fitting from the store against raw polars, the bootstrap, and lme4.

One run makes three measurements:

1. **G-study of a 10-million-record item set from the store.** A store with one
   pointwise item set of ``S x I x J x R`` records (default 100 systems x 2,000
   items x 10 judges x 5 replicates = 10,000,000, one generation) is built by
   simulating scores from positive variance components, writing them to one
   Parquet source file and loading it with ``jurymeter.io.ingest.ingest``. The
   store is kept under ``<workdir>/`` and reused by later runs with the same
   sizes and seed (``--rebuild`` forces a new one). Then, each in a fresh
   subprocess and interleaved, ``--repeats`` times:

   (a) the raw baseline ``pl.scan_parquet(<the item set's part files>)
       .group_by(["system_id", "item_id", "judge_id", "replicate"])
       .agg(pl.col("score").mean()).collect()``;
   (b) jurymeter: ``balanced_block(Store(url).scan("pointwise", item_set))``
       (block extraction, timed from opening the store) and
       ``fit_gstudy(block.x, block.design)`` (fit).

   The medians and the ratio (b)/(a) are reported (goal: within 1.5x). When the
   ratio misses the goal (or with ``--profile``), (b) runs once more under
   cProfile (hotspots by function, and the polars/numpy calls jurymeter waits
   on) and once under a line tracer (wall time per source line of
   ``jurymeter.stats.blocks`` and ``jurymeter.stats.gstudy``).
1b. **The whole ``jurymeter gstudy`` process on the same item set.** Each a
   fresh process timed from outside (the subprocess's wall time: interpreter
   start, imports, the work, exit), interleaved, ``--repeats`` times: (a') a
   ``python -c`` process that imports polars and runs (a)'s query on the part
   files; (b') ``<venv>/bin/jurymeter gstudy --item-set bench-gstudy --store
   <store>`` with default settings (800 resamples, ensembles, item screen: the
   nightly fit path, ``jurymeter.pipeline.fit.run_fit``), stdout to a file.
   The medians and the ratio (b')/(a') are reported (goal: at most 1.0x). One
   more run of the command in-process (``--stages``, under ``python -X
   importtime``) times its stages (imports, scans, the report's parts,
   printing) with wall clocks around their functions.
2. **800 bootstrap resamples plus 2 x 60 ensemble refits** for a 42 x 42 x 9 x 3
   ``s x i x j x r:sij`` array simulated with numpy from positive components:
   ``bootstrap_reliability(fit, n_boot=800)`` +
   ``ensemble_partitions(x, design, k=2, partitions=60)`` + the same with ``k=3``
   (goal: under 2 s on 2 cores), and, for information, the whole
   ``assess_block(block, GStudyRequest(item_set="x"))``.
3. **The same 42 x 42 x 9 x 3 data through lme4**: ``Rscript
   tests/r/lme4_components.R`` with the formula of
   ``tests/test_vs_lme4.py::_formula`` (REML, bobyqa, ``maxfun = 1e6``), its
   process wall time; ``bench/gstudy_lme4.R`` (same fit) for ``system.time`` of
   the ``lmer`` call alone; our single ``fit_gstudy`` timed over many repeats;
   and the largest relative difference of any component over every R fit (both
   scripts; lme4's answer can change between runs on the same data in the
   fourth significant digit, so its own spread is shown too). The seed is the first
   from ``--seed`` whose EMS components are all positive (where REML and EMS
   coincide).

Before anything heavy the script waits (polling every 30 s, up to
``--wait-max`` seconds) until no other ``bench/ingest.py`` process runs, and it
reports the load average it measured under and, per step, the CPU-seconds
other processes used meanwhile. Times are measured inside the child process
around the operation only (imports excluded). The store's files were written
before the timings start and are read from the page cache (warm).

Run from the project root with the project's virtualenv::

    .venv/bin/python bench/gstudy.py
    .venv/bin/python bench/gstudy.py --systems 10 --items 200 --no-append   # quick check
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import shlex
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from _common import machine_facts as base_machine_facts

BENCH_DIR = Path(__file__).resolve().parent
ROOT = BENCH_DIR.parent
RESULTS = BENCH_DIR / "RESULTS.md"
DEFAULT_WORKDIR = BENCH_DIR / "_work" / "gstudy"
LME4_SCRIPT = ROOT / "tests" / "r" / "lme4_components.R"
LME4_TIMED = BENCH_DIR / "gstudy_lme4.R"
GIB = 1024**3

ITEM_SET = "bench-gstudy"
SPEC = "s x i x j x r:sij"
KEYS = ["system_id", "item_id", "judge_id", "replicate"]
# Variance components used to simulate scores, in Design.parse(SPEC).effects
# order: s, i, j, si, sj, ij, sij, r:sij.
COMPONENTS = (0.30, 0.60, 0.15, 0.40, 0.05, 0.20, 0.30, 0.50)
GOAL_RATIO = 1.5
GOAL_SMALL_SECONDS = 2.0
GOAL_PROCESS_RATIO = 1.0
# Stages of the whole `jurymeter gstudy` process timed by the "stages" child:
# (module, attribute, label, nested in the stage of this label or None). A stage
# whose function no longer exists is left out of the table.
STAGES = (
    ("jurymeter.pipeline.fit", "run_fit", "`run_fit`: the fit (scans, sums, report)", None),
    ("jurymeter.stats.blocks", "_cell_levels", "levels scan: each key column's levels, the record count", "run_fit"),
    ("jurymeter.stats.blocks", "_presence", "presence scan (item chunks)", "run_fit"),
    ("jurymeter.stats.blocks", "_average_plan", "block rules on the presence", "run_fit"),
    ("jurymeter.stats.blocks", "_sum_cells", "cell sums scans (item chunks)", "run_fit"),
    ("jurymeter.stats.blocks", "_average_x", "chunk arrays from the cell sums", "run_fit"),
    ("jurymeter.stats.reliability", "GStudyChunks.add", "`GStudyChunks.add`: T terms, means, ensemble sums per chunk", "run_fit"),
    ("jurymeter.stats.diagnostics", "EnsembleRefits.add", "of which ensemble refits' sums (k = 2, 3)", "GStudyChunks.add"),
    ("jurymeter.stats.reliability", "_balanced_report", "the report from the sums (`_balanced_report`)", "run_fit"),
    ("jurymeter.stats.reliability", "bootstrap_reliability", "of which parametric bootstrap (800)", "_balanced_report"),
    ("jurymeter.stats.reliability", "item_diagnostics_from_means", "of which item diagnostics (200 splits)", "_balanced_report"),
    ("jurymeter.stats.reliability", "naive_halfwidth_from_means", "of which naive item bootstrap (800)", "_balanced_report"),
    ("jurymeter.stats.diagnostics", "EnsembleRefits.check", "of which ensemble refits (2 x 60)", "_balanced_report"),
    ("jurymeter.stats.gstudy_report", "wrong_order_probability", "of which rank reliability (2 x 4,000 draws)", "_balanced_report"),
    ("jurymeter.stats.reliability", "mdd_false_positive_rate", "of which MDD false-positive simulations", "_balanced_report"),
    ("jurymeter.stats.reliability", "dstudy_summary", "of which D-study point quantities", "_balanced_report"),
    ("jurymeter.stats.curves", "curves", "curves of figures 1, 2 (`curves`)", "run_fit"),
    ("jurymeter.stats.curves", "leaderboard", "leaderboard and tie groups", "run_fit"),
    ("jurymeter.analyses.gstudy.command", "print_gstudy", "printing the tables", None),
)
OTHER_BENCH = "bench/ingest"


# ---------------------------------------------------------------- simulation


def simulate(sizes: tuple[int, ...], seed: int, mean: float = 5.5) -> Any:
    """Dense ``s x i x j x r:sij`` array: grand mean plus one normal draw per effect level."""
    import numpy as np

    from jurymeter.stats.design import Design

    design = Design.parse(SPEC)
    rng = np.random.default_rng(seed)
    x = np.full(sizes, mean)
    for sigma2, effect in zip(COMPONENTS, design.effects, strict=True):
        shape = [n if f in effect else 1 for f, n in zip(design.facets, sizes, strict=True)]
        x = x + rng.normal(scale=np.sqrt(sigma2), size=shape)
    return x


def _names(prefix: str, n: int) -> list[str]:
    width = len(str(n - 1))
    return [f"{prefix}-{k:0{width}d}" for k in range(n)]


def write_source(path: Path, sizes: tuple[int, int, int, int], seed: int) -> int:
    """One Parquet file of pointwise records: integer scores 1..10 from the simulated array.

    Rows come in (judge, system, replicate, item) order, as a judge's runs over
    the item set would arrive.
    """
    import numpy as np
    import polars as pl

    n_s, n_i, n_j, _ = sizes
    x = np.clip(np.rint(simulate(sizes, seed)), 1, 10)
    order = (2, 0, 3, 1)  # judge, system, replicate, item
    shape = tuple(sizes[a] for a in order)
    n = int(np.prod(shape))
    codes = np.unravel_index(np.arange(n, dtype=np.int64), shape)
    j, s, r, i = codes
    score = np.transpose(x, order).reshape(-1)

    def text(prefix: str, count: int, code: np.ndarray) -> pl.Series:
        return pl.Series(_names(prefix, count)).gather(pl.Series(code.astype(np.uint32)))

    frame = pl.DataFrame(
        {
            "item_set": pl.repeat(ITEM_SET, n, eager=True),
            "item_id": text("item", n_i, i),
            "system_id": text("sys", n_s, s),
            "judge_id": text("judge", n_j, j),
            "generation": pl.zeros(n, dtype=pl.Int64, eager=True),
            "replicate": pl.Series(r.astype(np.int64)),
            "score": pl.Series(score),
        }
    )
    frame.write_parquet(path, compression="zstd")
    return n


def build_store(
    work: Path, sizes: tuple[int, int, int, int], seed: int, rebuild: bool
) -> dict[str, Any]:
    """Create (or reuse) the store with the one item set; returns what was done."""
    from jurymeter.io.ingest import ingest
    from jurymeter.io.sources import discover_sources
    from jurymeter.io.store import Store
    from jurymeter.io.validate import ValidationOptions

    tag = "x".join(str(v) for v in sizes) + f"-seed{seed}"
    store_dir = work / f"store-{tag}"
    expected = 1
    for v in sizes:
        expected *= v
    recipe = {
        "sizes": list(sizes),
        "seed": seed,
        "components": list(COMPONENTS),
        "item_set": ITEM_SET,
    }
    recipe_file = store_dir.with_suffix(".json")
    if not rebuild and store_dir.exists() and recipe_file.exists():
        try:
            built = json.loads(recipe_file.read_text())
            store = Store(str(store_dir))
            counts = [m["counts"]["accepted"] for m in store.markers()]
            if (
                built.get("recipe") == recipe
                and sum(counts) == expected
                and store.data_files("pointwise", ITEM_SET)
            ):
                return {**built, "reused": True, "store": str(store_dir)}
        except Exception as exc:  # a damaged scratch store is rebuilt
            print(f"  cannot reuse {store_dir} ({exc}); rebuilding", flush=True)
    shutil.rmtree(store_dir, ignore_errors=True)
    work.mkdir(parents=True, exist_ok=True)
    source = work / f"source-{tag}.parquet"
    print(f"writing {expected:,} records to {source} ...", flush=True)
    t0 = time.perf_counter()
    n = write_source(source, sizes, seed)
    gen = time.perf_counter() - t0
    print(f"  {source.stat().st_size / 1024**2:.0f} MiB in {gen:.1f} s; ingesting ...", flush=True)
    t0 = time.perf_counter()
    report = ingest(
        Store(str(store_dir)), discover_sources([str(source)]), ValidationOptions(scale=(1.0, 10.0))
    )
    ingest_seconds = time.perf_counter() - t0
    totals = report.totals()
    if totals["accepted"] != n or totals["read"] != n:
        msg = f"ingest did not accept every record: {totals}"
        raise RuntimeError(msg)
    source_size = source.stat().st_size
    source.unlink()
    built = {
        "recipe": recipe,
        "records": n,
        "generate_seconds": gen,
        "source_bytes": source_size,
        "ingest_seconds": ingest_seconds,
        "built": dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M UTC"),
    }
    recipe_file.write_text(json.dumps(built, indent=2))
    print(f"  ingested in {ingest_seconds:.1f} s", flush=True)
    return {**built, "reused": False, "store": str(store_dir)}


def positive_seed(sizes: tuple[int, ...], seed: int) -> tuple[int, Any]:
    """First seed from ``seed`` whose EMS components are all positive, and its array."""
    import numpy as np

    from jurymeter.stats.design import Design
    from jurymeter.stats.gstudy import fit_gstudy

    design = Design.parse(SPEC)
    for attempt in range(seed, seed + 200):
        x = simulate(sizes, attempt)
        if np.all(fit_gstudy(x, design).sigma2 > 0):
            return attempt, x
    msg = "no seed with all EMS components positive in 200 tries"
    raise RuntimeError(msg)


# ---------------------------------------------------------------- lme4 helpers
# Copies of tests/test_vs_lme4.py::_formula and ::_long_frame, so that a
# concurrent edit of the tests cannot break the benchmark.


def write_long_csv(x: Any, design: Any, path: Path) -> None:
    import numpy as np
    import polars as pl

    index = np.indices(x.shape).reshape(x.ndim, -1)
    columns = {f: [f"{f}{v}" for v in index[k]] for k, f in enumerate(design.facets)}
    columns["score"] = [repr(float(v)) for v in x.ravel()]
    pl.DataFrame(columns).write_csv(path)


def lme4_group(design: Any, effect: Any) -> str:
    return (
        "Residual"
        if effect == design.effects[-1]
        else ":".join(f for f in design.facets if f in effect)
    )


# ---------------------------------------------------------------- line timing


class LineTimer:
    """Wall time per source line of the functions defined in some modules.

    A ``sys.settrace`` tracer that follows only frames of those modules' code
    (nested functions included; comprehensions and called helpers count toward
    the line that calls them). A line's time runs from its line event to the
    next event of the same frame, so a statement that waits on polars or numpy
    gets that wait. Tracing costs little here: the traced functions run few
    Python lines and spend their time in native code.
    """

    def __init__(self, modules: list[Any]) -> None:
        self.files = {m.__file__ for m in modules}
        self.times: dict[tuple[str, str, int], float] = {}
        self.hits: dict[tuple[str, str, int], int] = {}
        self.texts: dict[tuple[str, str, int], str] = {}
        self.current: dict[int, tuple[tuple[str, str, int], float]] = {}

    def _local(self, frame: Any, event: str, _arg: Any) -> Any:
        now = time.perf_counter()
        previous = self.current.pop(id(frame), None)
        if previous is not None:
            key, since = previous
            self.times[key] = self.times.get(key, 0.0) + (now - since)
        if event == "line":
            code = frame.f_code
            key = (code.co_filename, code.co_name, frame.f_lineno)
            if key not in self.texts:
                import linecache

                self.texts[key] = linecache.getline(code.co_filename, frame.f_lineno).strip()
            self.hits[key] = self.hits.get(key, 0) + 1
            self.current[id(frame)] = (key, time.perf_counter())
        return self._local

    def _global(self, frame: Any, event: str, _arg: Any) -> Any:
        if event == "call" and frame.f_code.co_filename in self.files:
            return self._local
        return None

    def start(self) -> None:
        sys.settrace(self._global)

    def stop(self) -> None:
        sys.settrace(None)

    def table(self) -> list[dict[str, Any]]:
        return [
            {
                "where": f"{Path(f).stem}.{func}:{line}",
                "seconds": t,
                "hits": self.hits.get((f, func, line), 0),
                "text": self.texts.get((f, func, line), ""),
            }
            for (f, func, line), t in sorted(self.times.items(), key=lambda kv: -kv[1])
        ]


def lines_table(rows: list[dict[str, Any]], total: float, top: int) -> str:
    out = ["| line | time (s) | % | runs | source line |"]
    out.append("|---|---:|---:|---:|---|")
    for r in rows[:top]:
        text = r["text"].replace("|", "\\|")
        if len(text) > 90:
            text = text[:87] + "..."
        out.append(
            f"| `{r['where']}` | {r['seconds']:.2f} | {100 * r['seconds'] / total:.0f}% | "
            f"{r['hits']} | `{text}` |"
        )
    return "\n".join(out) + "\n"


# ---------------------------------------------------------------- children


def _emit(obj: dict[str, Any]) -> None:
    print(json.dumps(obj), flush=True)


def child_main(mode: str, params: dict[str, Any]) -> None:
    """One measured step; prints one JSON line. Imports happen before the clock starts."""
    import numpy as np
    import polars as pl

    from jurymeter.io.store import Store
    from jurymeter.stats.blocks import balanced_block
    from jurymeter.stats.bootstrap import bootstrap_reliability
    from jurymeter.stats.design import Design
    from jurymeter.stats.diagnostics import ensemble_partitions
    from jurymeter.stats.gstudy import fit_gstudy
    from jurymeter.stats.reliability import GStudyRequest, assess_block

    if mode == "baseline":
        files = [f.path for f in Store(params["store"]).data_files("pointwise", params["item_set"])]
        c0, t0 = time.process_time(), time.perf_counter()
        out = pl.scan_parquet(files).group_by(KEYS).agg(pl.col("score").mean()).collect()
        seconds, cpu = time.perf_counter() - t0, time.process_time() - c0
        _emit({"seconds": seconds, "cpu": cpu, "groups": out.height, "files": len(files)})
    elif mode in ("jurymeter", "profile", "lines"):
        prof = tracer = None
        if mode == "profile":
            import cProfile

            prof = cProfile.Profile()
            prof.enable()
        elif mode == "lines":
            import jurymeter.stats.blocks
            import jurymeter.stats.gstudy

            tracer = LineTimer([jurymeter.stats.blocks, jurymeter.stats.gstudy])
            tracer.start()
        c0, t0 = time.process_time(), time.perf_counter()
        block = balanced_block(Store(params["store"]).scan("pointwise", params["item_set"]))
        c1, t1 = time.process_time(), time.perf_counter()
        fit = fit_gstudy(block.x, block.design)
        c2, t2 = time.process_time(), time.perf_counter()
        if prof is not None:
            prof.disable()
            prof.dump_stats(params["out"])
        if tracer is not None:
            tracer.stop()
            Path(params["out"]).write_text(json.dumps(tracer.table()))
        _emit(
            {
                "block_seconds": t1 - t0,
                "fit_seconds": t2 - t1,
                "seconds": t2 - t0,
                "block_cpu": c1 - c0,
                "fit_cpu": c2 - c1,
                "cpu": c2 - c0,
                "shape": list(block.x.shape),
                "design": " x ".join(block.design.labels),
                "records_in": block.records_in,
                "sigma2": dict(zip(fit.effects, fit.sigma2.tolist(), strict=True)),
            }
        )
    elif mode == "small":
        x = np.load(params["npy"])
        design = Design.parse(SPEC)
        runs = []
        for _ in range(params["repeats"]):
            t0 = time.perf_counter()
            fit = fit_gstudy(x, design)
            boot = bootstrap_reliability(fit, n_boot=params["n_boot"])
            t1 = time.perf_counter()
            e2 = ensemble_partitions(x, design, k=2, partitions=params["partitions"])
            t2 = time.perf_counter()
            e3 = ensemble_partitions(x, design, k=3, partitions=params["partitions"])
            t3 = time.perf_counter()
            runs.append({"boot": t1 - t0, "k2": t2 - t1, "k3": t3 - t2, "total": t3 - t0})
        # The whole report for the same data, through a block as the store path builds it.
        levels = {f: _names(f, n) for f, n in zip(design.facets, x.shape, strict=True)}
        index = np.indices(x.shape).reshape(x.ndim, -1)
        long = pl.DataFrame(
            {
                "system_id": pl.Series(levels["s"]).gather(index[0]),
                "item_id": pl.Series(levels["i"]).gather(index[1]),
                "judge_id": pl.Series(levels["j"]).gather(index[2]),
                "generation": pl.zeros(x.size, dtype=pl.Int64, eager=True),
                "replicate": pl.Series(index[3].astype(np.int64)),
                "score": pl.Series(x.ravel()),
            }
        )
        block = balanced_block(long)
        if block.x.shape != x.shape or not np.array_equal(block.x, x):
            msg = "the block of the simulated records differs from the simulated array"
            raise AssertionError(msg)
        assess = []
        for _ in range(params["repeats"]):
            t0 = time.perf_counter()
            report = assess_block(block, GStudyRequest(item_set="x"))
            assess.append(time.perf_counter() - t0)
        import cProfile

        prof = cProfile.Profile()
        prof.enable()
        assess_block(block, GStudyRequest(item_set="x"))
        prof.disable()
        prof.dump_stats(params["prof"])
        _emit(
            {
                "runs": runs,
                "assess": assess,
                "n_boot": boot.n_boot,
                "ensemble_median": {"2": e2.median, "3": e3.median},
                "report_keys": len(report),
            }
        )
    elif mode == "fitloop":
        x = np.load(params["npy"])
        design = Design.parse(SPEC)
        fit = fit_gstudy(x, design)  # warm-up
        number, elapsed = 1, 0.0
        while True:  # calibrate: one batch of calls takes at least 0.2 s
            t0 = time.perf_counter()
            for _ in range(number):
                fit_gstudy(x, design)
            elapsed = time.perf_counter() - t0
            if elapsed >= 0.2:
                break
            number *= 2
        per_call = []
        for _ in range(params["batches"]):
            t0 = time.perf_counter()
            for _ in range(number):
                fit_gstudy(x, design)
            per_call.append((time.perf_counter() - t0) / number)
        _emit(
            {
                "per_call": per_call,
                "number": number,
                "sigma2": dict(zip(fit.effects, fit.sigma2.tolist(), strict=True)),
            }
        )
    else:
        msg = f"unknown child mode {mode!r}"
        raise SystemExit(msg)


def stages_main(params: dict[str, Any]) -> None:
    """The whole ``jurymeter gstudy`` command in this process, with wall clocks around its stages.

    Run under ``python -X importtime`` by the parent, which reads the import
    times from stderr. Prints one JSON line (stdout of the command goes to a file).
    """
    t_start = time.perf_counter()
    import functools
    import importlib

    times: dict[str, float] = {}
    calls: dict[str, int] = {}

    def wrap(owner: Any, attr: str, key: str) -> None:
        inner = getattr(owner, attr)

        @functools.wraps(inner)
        def timed(*args: Any, **kwargs: Any) -> Any:
            t = time.perf_counter()
            try:
                return inner(*args, **kwargs)
            finally:
                times[key] = times.get(key, 0.0) + time.perf_counter() - t
                calls[key] = calls.get(key, 0) + 1

        setattr(owner, attr, timed)

    t0 = time.perf_counter()
    cli_app = importlib.import_module("jurymeter.cli.app")
    import_cli = time.perf_counter() - t0
    found = []
    for module_name, attr, _label, _parent in STAGES:
        try:
            owner: Any = importlib.import_module(module_name)
        except ImportError:
            continue
        *path, name = attr.split(".")
        for part in path:
            owner = getattr(owner, part, None)
        if owner is None or not hasattr(owner, name):
            continue
        wrap(owner, name, attr)
        found.append(attr)
    import_stages = time.perf_counter() - t0 - import_cli
    sys.argv = ["jurymeter", "gstudy", "--item-set", params["item_set"], "--store", params["store"]]
    t0 = time.perf_counter()
    with open(params["out"], "w") as handle:
        saved, sys.stdout = sys.stdout, handle
        try:
            cli_app.main()
        except SystemExit as exc:
            if exc.code not in (0, None):
                raise
        finally:
            sys.stdout = saved
    command = time.perf_counter() - t0
    _emit(
        {
            "since_start": time.perf_counter() - t_start,
            "import_cli": import_cli,
            "import_stages": import_stages,
            "command": command,
            "times": times,
            "calls": calls,
            "found": found,
        }
    )


# Packages whose import time the stages table reports (and whether they were imported at all).
IMPORT_WATCH = (
    "numpy", "polars", "pyarrow", "typer", "rich", "orjson", "scipy", "scipy.stats", "scipy.special",
    "matplotlib", "prefect", "distributed", "dask", "pandas",
)


def import_times(stderr_text: str) -> dict[str, float]:
    """Import time (s) of each package of :data:`IMPORT_WATCH` from ``python -X importtime`` output.

    A package's time is the cumulative time of its modules' imports that were
    not made by another of its modules (so a package imported piecemeal, as
    ``scipy``'s lazy submodules are, is counted whole); a module's cumulative
    time includes the modules it imported for the first time.
    """
    rows: list[tuple[int, str, float]] = []
    for line in stderr_text.splitlines():
        if not line.startswith("import time:") or line.count("|") != 2:
            continue
        _, cumulative, name = line[len("import time:") :].split("|")
        try:
            seconds = int(cumulative) / 1e6
        except ValueError:
            continue  # the header line
        rows.append(((len(name) - len(name.lstrip(" ")) - 1) // 2, name.strip(), seconds))
    # importtime prints a module after the modules it imported: a row's parent is
    # the next row with a smaller depth.
    parents: list[str | None] = [None] * len(rows)
    waiting: list[int] = []
    for k, (depth, name, _) in enumerate(rows):
        while waiting and rows[waiting[-1]][0] > depth:
            parents[waiting.pop()] = name
        waiting.append(k)

    def within(name: str | None, package: str) -> bool:
        return name is not None and (name == package or name.startswith(package + "."))

    found: dict[str, float] = {}
    for package in IMPORT_WATCH:
        total = sum(
            sec for (_, name, sec), parent in zip(rows, parents, strict=True)
            if within(name, package) and not within(parent, package)
        )
        if any(within(name, package) for _, name, _ in rows):
            found[package] = total
    return found


RAW_PROCESS = """\
import polars as pl
files = {files!r}
out = pl.scan_parquet(files).group_by({keys!r}).agg(pl.col("score").mean()).collect()
print(out.height)
"""


# ---------------------------------------------------------------- measuring


def _busy_cpu_seconds() -> float:
    import psutil

    t = psutil.cpu_times()
    return sum(getattr(t, k, 0.0) for k in ("user", "nice", "system", "irq", "softirq", "steal"))


def run_measured(cmd: list[str], log_dir: Path, name: str) -> dict[str, Any]:
    """Run ``cmd``; wall time, child CPU, peak RSS and the CPU others used meanwhile."""
    out_path, err_path = log_dir / f"{name}.out", log_dir / f"{name}.err"
    busy0, load0 = _busy_cpu_seconds(), os.getloadavg()
    t0 = time.perf_counter()
    with open(out_path, "wb") as so, open(err_path, "wb") as se:
        proc = subprocess.Popen(cmd, stdout=so, stderr=se, cwd=ROOT)
        _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - t0
    busy = _busy_cpu_seconds() - busy0
    code = os.waitstatus_to_exitcode(status)
    if code != 0:
        sys.stderr.write(err_path.read_text()[-4000:])
        msg = f"{name} failed with exit status {code}: {shlex.join(cmd)}"
        raise RuntimeError(msg)
    child_cpu = usage.ru_utime + usage.ru_stime
    lines = [ln for ln in out_path.read_text().splitlines() if ln.startswith("{")]
    result: dict[str, Any] = json.loads(lines[-1]) if lines else {}
    result.update(
        wall_seconds=wall,
        stdout_path=str(out_path),
        process_cpu=child_cpu,
        peak_rss=usage.ru_maxrss * 1024,
        other_cpu_seconds=max(0.0, busy - child_cpu),
        load_before=load0[0],
    )
    return result


def run_child(mode: str, params: dict[str, Any], log_dir: Path, name: str) -> dict[str, Any]:
    cmd = [sys.executable, str(Path(__file__).resolve()), "--child", mode, json.dumps(params)]
    return run_measured(cmd, log_dir, name)


def other_benchmarks() -> list[str]:
    """Command lines of other running ``bench/ingest.py`` processes."""
    import psutil

    found = []
    for proc in psutil.process_iter(["pid", "cmdline"]):
        cmdline = " ".join(proc.info.get("cmdline") or [])
        if OTHER_BENCH in cmdline and proc.info["pid"] != os.getpid():
            found.append(f"{proc.info['pid']}: {cmdline[:120]}")
    return found


def wait_for_quiet(max_seconds: float, poll: float = 30.0) -> dict[str, Any]:
    """Wait until no ``bench/ingest`` process runs (or ``max_seconds`` passed)."""
    t0 = time.monotonic()
    while True:
        running = other_benchmarks()
        waited = time.monotonic() - t0
        if not running or waited >= max_seconds:
            return {"waited": waited, "still_running": running}
        print(
            f"  waiting for {len(running)} {OTHER_BENCH} process(es) ({waited:.0f} s so far): {running[0]}",
            flush=True,
        )
        time.sleep(min(poll, max(1.0, max_seconds - waited)))


# ---------------------------------------------------------------- reporting


def machine_facts() -> dict[str, str]:
    """The shared facts plus scipy, R and lme4 versions."""
    import scipy

    facts = base_machine_facts()
    r_version = lme4_version = "?"
    try:
        probe = subprocess.run(
            [
                "Rscript",
                "-e",
                'cat(R.version$major, R.version$minor, as.character(packageVersion("lme4")))',
            ],
            capture_output=True,
            text=True,
            timeout=60,
        )
        parts = probe.stdout.split()
        if len(parts) == 3:
            r_version, lme4_version = f"{parts[0]}.{parts[1]}", parts[2]
    except (OSError, subprocess.SubprocessError):
        pass
    return {**facts, "scipy": scipy.__version__, "r": r_version, "lme4": lme4_version}



def command_line() -> str:
    return shlex.join([".venv/bin/python", "bench/gstudy.py", *sys.argv[1:]])


def fmt_load(load: tuple[float, float, float]) -> str:
    return " / ".join(f"{v:.2f}" for v in load)


def median(values: list[float]) -> float:
    return float(statistics.median(values))


def runs_text(values: list[float], digits: int = 2) -> str:
    return ", ".join(f"{v:.{digits}f}" for v in values)


def profile_table(path: Path, top: int, *, full: bool = True) -> str:
    """Hotspots of a cProfile dump: jurymeter functions by cumulative time, all by own time."""
    import pstats

    stats = pstats.Stats(str(path))
    total = max(getattr(stats, "total_tt", 0.0), 1e-9)
    rows = []
    for (filename, line, func), (_cc, nc, tt, ct, _callers) in stats.stats.items():  # type: ignore[attr-defined]
        rows.append((filename, line, func, nc, tt, ct))

    def name(filename: str, line: int, func: str) -> str:
        if "jurymeter" in filename and filename.endswith(".py"):
            return f"{Path(filename).stem}.{func}:{line}"
        if filename == "~":
            return func
        parts = Path(filename).parts
        short = "/".join(parts[-2:]) if len(parts) > 1 else filename
        return f"{short}:{func}:{line}"

    ours = sorted((r for r in rows if "/jurymeter/" in r[0]), key=lambda r: -r[5])[:top]
    out = [
        "| function (src/jurymeter) | cumulative (s) | % | own (s) | calls |",
        "|---|---:|---:|---:|---:|",
    ]
    for filename, line, func, nc, tt, ct in ours:
        out.append(
            f"| `{name(filename, line, func)}` | {ct:.2f} | {100 * ct / total:.0f}% | {tt:.2f} | {nc} |"
        )
    if not full:
        return "\n".join(out) + "\n"
    # Which library calls (polars, numpy) jurymeter's functions wait on: the
    # caller -> callee edges out of src/jurymeter, by time spent under them.
    edges = []
    for filename, line, func, _nc, _tt, _ct in rows:
        if "/jurymeter/" in filename:
            continue
        callers = stats.stats[(filename, line, func)][4]  # type: ignore[attr-defined]
        for (cfile, cline, cfunc), (_ecc, enc, _ett, ect) in callers.items():
            if "/jurymeter/" in cfile:
                edges.append((ect, enc, name(cfile, cline, cfunc), name(filename, line, func)))
    out += [
        "",
        "| call from src/jurymeter | into | time (s) | % | calls |",
        "|---|---|---:|---:|---:|",
    ]
    for ect, enc, caller, callee in sorted(edges, reverse=True)[:top]:
        out.append(f"| `{caller}` | `{callee}` | {ect:.2f} | {100 * ect / total:.0f}% | {enc} |")
    out += [
        "",
        "| function (all code, by own time) | own (s) | % | cumulative (s) | calls |",
        "|---|---:|---:|---:|---:|",
    ]
    for filename, line, func, nc, tt, ct in sorted(rows, key=lambda r: -r[4])[:top]:
        out.append(
            f"| `{name(filename, line, func)}` | {tt:.2f} | {100 * tt / total:.0f}% | {ct:.2f} | {nc} |"
        )
    return "\n".join(out) + "\n"


# ---------------------------------------------------------------- main


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "--child":
        child_main(sys.argv[2], json.loads(sys.argv[3]))
        return
    if len(sys.argv) > 1 and sys.argv[1] == "--stages":
        stages_main(json.loads(sys.argv[2]))
        return
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--systems", type=int, default=100)
    parser.add_argument("--items", type=int, default=2000)
    parser.add_argument("--judges", type=int, default=10)
    parser.add_argument("--replicates", type=int, default=5)
    parser.add_argument("--seed", type=int, default=0, help="seed of the simulated data")
    parser.add_argument(
        "--repeats", type=int, default=3, help="runs of each timed step (median reported)"
    )
    parser.add_argument(
        "--small", default="42,42,9,3", help="sizes s,i,j,r of measurements 2 and 3"
    )
    parser.add_argument("--n-boot", type=int, default=800)
    parser.add_argument("--partitions", type=int, default=60)
    parser.add_argument(
        "--fit-batches", type=int, default=15, help="timed batches of fit_gstudy calls"
    )
    parser.add_argument("--r-repeats", type=int, default=1, help="runs of each R script")
    parser.add_argument("--skip-lme4", action="store_true", help="skip measurement 3's R fits")
    parser.add_argument(
        "--profile", action="store_true", help="profile (b) even when the goal is met"
    )
    parser.add_argument("--top", type=int, default=20, help="profile rows to show")
    parser.add_argument(
        "--workdir",
        type=Path,
        default=DEFAULT_WORKDIR,
        help="scratch folder (store kept for reuse)",
    )
    parser.add_argument(
        "--rebuild", action="store_true", help="build the store even if a matching one exists"
    )
    parser.add_argument(
        "--wait-max", type=float, default=900.0, help="seconds to wait for other benchmarks"
    )
    parser.add_argument("--no-append", action="store_true", help="do not append to RESULTS.md")
    opts = parser.parse_args()

    import numpy as np

    from jurymeter.stats.design import Design

    sizes = (opts.systems, opts.items, opts.judges, opts.replicates)
    small = tuple(int(v) for v in opts.small.split(","))
    work = opts.workdir.resolve()
    stamp = dt.datetime.now(dt.UTC).strftime("%Y%m%dT%H%M%S")
    logs = work / f"logs-{stamp}"
    logs.mkdir(parents=True, exist_ok=True)
    started = dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M UTC")
    facts = machine_facts()

    print("checking for other benchmarks ...", flush=True)
    waited = [wait_for_quiet(opts.wait_max)]
    built = build_store(work, sizes, opts.seed, opts.rebuild)  # type: ignore[arg-type]
    print(("reusing" if built["reused"] else "built") + f" store {built['store']}", flush=True)
    waited.append(wait_for_quiet(max(0.0, opts.wait_max - waited[0]["waited"])))
    load_start = os.getloadavg()
    print(f"load average at the start of the timings: {fmt_load(load_start)}", flush=True)

    # ---- 1. 10M records: raw baseline vs jurymeter, interleaved.
    params = {"store": built["store"], "item_set": ITEM_SET}
    base_runs, ours_runs = [], []
    for k in range(opts.repeats):
        print(f"[1] run {k + 1}/{opts.repeats}: baseline ...", flush=True)
        base_runs.append(run_child("baseline", params, logs, f"baseline-{k}"))
        print(f"    {base_runs[-1]['seconds']:.2f} s; jurymeter ...", flush=True)
        ours_runs.append(run_child("jurymeter", params, logs, f"jurymeter-{k}"))
        r = ours_runs[-1]
        print(f"    block {r['block_seconds']:.2f} s + fit {r['fit_seconds']:.2f} s", flush=True)
    n_records = built["records"]
    groups = base_runs[0]["groups"]
    shape = ours_runs[0]["shape"]
    if groups != n_records or int(np.prod(shape)) != groups:
        print(f"warning: baseline groups {groups:,}, block shape {shape}", flush=True)
    base_med = median([r["seconds"] for r in base_runs])
    block_med = median([r["block_seconds"] for r in ours_runs])
    fit_med = median([r["fit_seconds"] for r in ours_runs])
    ours_med = median([r["seconds"] for r in ours_runs])
    ratio = ours_med / base_med
    profile_text = ""
    if opts.profile or ratio > GOAL_RATIO:
        print("[1] profiling jurymeter (cProfile) ...", flush=True)
        prof_path = logs / "jurymeter.prof"
        prof = run_child("profile", {**params, "out": str(prof_path)}, logs, "profile")
        profile_text = (
            f"\ncProfile of (b), one run ({prof['seconds']:.2f} s under the profiler: block "
            f"{prof['block_seconds']:.2f} s, fit {prof['fit_seconds']:.2f} s). polars runs in native "
            "threads; their time is charged to the Python call that waits (`collect`, `with_columns`, ...).\n\n"
            + profile_table(prof_path, opts.top)
        )
        print("[1] timing jurymeter line by line ...", flush=True)
        lines_path = logs / "jurymeter-lines.json"
        traced = run_child("lines", {**params, "out": str(lines_path)}, logs, "lines")
        profile_text += (
            f"\nWall time per source line of `jurymeter.stats.blocks` and `jurymeter.stats.gstudy`, one more run "
            f"under a line tracer ({traced['seconds']:.2f} s: block {traced['block_seconds']:.2f} s, "
            f"fit {traced['fit_seconds']:.2f} s). A multi-line statement is charged to the line "
            "executing when it waits; a line that calls a traced function includes it (so the "
            "percentages overlap):\n\n"
            + lines_table(json.loads(lines_path.read_text()), traced["seconds"], opts.top)
        )

    # ---- 1b. whole processes, timed from outside: raw polars vs `jurymeter gstudy`, interleaved.
    from jurymeter.io.store import Store

    part_files = [f.path for f in Store(built["store"]).data_files("pointwise", ITEM_SET)]
    raw_code = RAW_PROCESS.format(files=part_files, keys=KEYS)
    jurymeter_exe = str(Path(sys.executable).parent / "jurymeter")
    gstudy_cmd = [jurymeter_exe, "gstudy", "--item-set", ITEM_SET, "--store", built["store"]]
    raw_procs, cli_procs = [], []
    for k in range(opts.repeats):
        print(f"[1b] run {k + 1}/{opts.repeats}: raw polars process ...", flush=True)
        raw_procs.append(run_measured([sys.executable, "-c", raw_code], logs, f"process-raw-{k}"))
        print(f"    {raw_procs[-1]['wall_seconds']:.2f} s; jurymeter gstudy process ...", flush=True)
        cli_procs.append(run_measured(gstudy_cmd, logs, f"process-gstudy-{k}"))
        print(f"    {cli_procs[-1]['wall_seconds']:.2f} s", flush=True)
    raw_groups = int(Path(raw_procs[0]["stdout_path"]).read_text().split()[-1])
    printed = [Path(r["stdout_path"]).read_text() for r in cli_procs]
    if any(text != printed[0] for text in printed):
        print("warning: the jurymeter gstudy runs printed different outputs", flush=True)
    raw_proc_med = median([r["wall_seconds"] for r in raw_procs])
    cli_proc_med = median([r["wall_seconds"] for r in cli_procs])
    process_ratio = cli_proc_med / raw_proc_med
    print("[1b] jurymeter gstudy with its stages timed (-X importtime) ...", flush=True)
    stage_out = logs / "process-stages-stdout.txt"
    staged = run_measured(
        [sys.executable, "-X", "importtime", str(Path(__file__).resolve()), "--stages",
         json.dumps({"store": built["store"], "item_set": ITEM_SET, "out": str(stage_out)})],
        logs, "process-stages",
    )
    if stage_out.read_text() != printed[0]:
        print("warning: the staged run printed a different output", flush=True)
    imports = import_times((logs / "process-stages.err").read_text())

    # ---- 2. bootstrap + ensembles on 42 x 42 x 9 x 3.
    design = Design.parse(SPEC)
    seed_small, x_small = positive_seed(small, opts.seed)
    npy = work / f"small-{'x'.join(map(str, small))}-seed{seed_small}.npy"
    np.save(npy, x_small)
    print(f"[2] bootstrap + ensembles on {small} (seed {seed_small}) ...", flush=True)
    small_res = run_child(
        "small",
        {
            "npy": str(npy),
            "n_boot": opts.n_boot,
            "partitions": opts.partitions,
            "repeats": opts.repeats,
            "prof": str(logs / "assess.prof"),
        },
        logs,
        "small",
    )
    totals = [r["total"] for r in small_res["runs"]]
    small_med = median(totals)

    # ---- 3. lme4 on the same data.
    print("[3] fit_gstudy repeated ...", flush=True)
    loop = run_child("fitloop", {"npy": str(npy), "batches": opts.fit_batches}, logs, "fitloop")
    ours_fit = median(loop["per_call"])
    lme4_rows: list[dict[str, Any]] = []
    timed_rows: list[dict[str, Any]] = []
    formula = design.lme4_formula()
    csv = work / f"small-{'x'.join(map(str, small))}-seed{seed_small}.csv"
    if not opts.skip_lme4:
        write_long_csv(x_small, design, csv)
        for k in range(opts.r_repeats):
            print(f"[3] Rscript tests/r/lme4_components.R run {k + 1} ...", flush=True)
            out = logs / f"lme4-{k}.json"
            res = run_measured(
                ["Rscript", str(LME4_SCRIPT), str(csv), formula, str(out)], logs, f"lme4-{k}"
            )
            res["components"] = json.loads(out.read_text())
            lme4_rows.append(res)
            print(f"    {res['wall_seconds']:.1f} s", flush=True)
            print(f"[3] Rscript bench/gstudy_lme4.R run {k + 1} ...", flush=True)
            out = logs / f"lme4-timed-{k}.json"
            res = run_measured(
                ["Rscript", str(LME4_TIMED), str(csv), formula, str(out)], logs, f"lme4-timed-{k}"
            )
            res.update(json.loads(out.read_text()))
            timed_rows.append(res)
            print(
                f"    lmer {res['lmer']['elapsed']:.1f} s of {res['wall_seconds']:.1f} s",
                flush=True,
            )
    load_end = os.getloadavg()
    still = other_benchmarks()

    # ---- report
    lines: list[str] = []
    title = f"## G-study: {n_records:,} records from the store, bootstrap and ensembles, lme4 ({started})"
    lines += [title, "", f"Command: `{command_line()}`", ""]
    lines.append(
        f"- machine: {facts['nproc']} CPUs ({facts['cpu']}), {facts['ram']} RAM, {facts['os']}"
    )
    lines.append(
        f"- software: Python {facts['python']}, polars {facts['polars']}, pyarrow {facts['pyarrow']}, "
        f"numpy {facts['numpy']}, scipy {facts['scipy']}, R {facts['r']}, lme4 {facts['lme4']}, "
        f"jurymeter {facts['jurymeter']} (sha256 of src/jurymeter/*.py at start: {facts['src_digest']}; "
        "the library is edited concurrently)"
    )
    wait_note = (
        f"waited {sum(w['waited'] for w in waited):.0f} s for other `{OTHER_BENCH}` processes"
    )
    if waited[-1]["still_running"]:
        wait_note += f" and gave up with {len(waited[-1]['still_running'])} still running"
    if still:
        wait_note += f"; {len(still)} running again at the end"
    lines.append(
        f"- load average (1/5/15 min): {fmt_load(load_start)} at the start of the timings, "
        f"{fmt_load(load_end)} at the end; {wait_note}"
    )
    store_note = (
        f"reused (built {built['built']})"
        if built["reused"]
        else f"built now: generated in {built['generate_seconds']:.1f} s"
    )
    lines.append(
        f"- store: one pointwise item set, {sizes[0]} systems x {sizes[1]} items x {sizes[2]} judges x "
        f"{sizes[3]} replicates = {n_records:,} records, integer scores 1..10 simulated from components "
        f"{dict(zip(design.labels, COMPONENTS, strict=True))} (seed {opts.seed}); {store_note}; "
        f"ingested from one {built['source_bytes'] / 1024**2:.0f} MiB Parquet file in {built['ingest_seconds']:.1f} s; "
        f"{base_runs[0]['files']} part files; warm page cache"
    )
    lines.append(
        "- each row: median of the runs, each in a fresh subprocess, timed inside it around the operation "
        "(imports excluded); CPU = process CPU time of those runs (median); other CPU-s = CPU-seconds the rest "
        "of the machine used during the run's subprocess (median)"
    )
    lines += ["", "**1. G-study of the item set from the store vs a raw polars group-by**", ""]
    lines += [
        "| step | median (s) | runs (s) | CPU (s) | other CPU-s | peak RSS | notes |",
        "|---|---:|---:|---:|---:|---:|---|",
    ]

    def row(
        label: str, runs: list[dict[str, Any]], key: str, cpu_key: str | None, note: str
    ) -> str:
        values = [r[key] for r in runs]
        cpu = f"{median([r[cpu_key] for r in runs]):.2f}" if cpu_key else ""
        other = median([r["other_cpu_seconds"] for r in runs])
        rss = max(r["peak_rss"] for r in runs) / 1e9
        return f"| {label} | {median(values):.2f} | {runs_text(values)} | {cpu} | {other:.1f} | {rss:.2f} GB | {note} |"

    lines.append(
        row(
            "(a) `pl.scan_parquet(parts).group_by([system_id, item_id, judge_id, replicate]).agg(pl.col('score').mean()).collect()`",
            base_runs,
            "seconds",
            "cpu",
            f"{groups:,} groups",
        )
    )
    lines.append(
        row(
            "(b) `balanced_block(Store(url).scan('pointwise', item_set))`",
            ours_runs,
            "block_seconds",
            "block_cpu",
            f"block {' x '.join(map(str, shape))}, {ours_runs[0]['records_in']:,} records in",
        )
    )
    lines.append(
        row(
            "(b) `fit_gstudy(block.x, block.design)`",
            ours_runs,
            "fit_seconds",
            "fit_cpu",
            "8 effects",
        )
    )
    lines.append(
        row(
            "**(b) jurymeter total**",
            ours_runs,
            "seconds",
            "cpu",
            "same subprocess as the two rows above",
        )
    )
    lines += [
        "",
        f"- jurymeter / raw baseline: **{ratio:.2f}x** (block extraction alone {block_med / base_med:.2f}x, "
        f"fit {fit_med:.2f} s) — goal <= {GOAL_RATIO}x: **{'met' if ratio <= GOAL_RATIO else 'missed'}**",
    ]
    fitted = ours_runs[0]["sigma2"]
    lines.append(
        "- fitted components (integer-rounded scores, so not the simulated ones): "
        + ", ".join(f"{k} {v:.3f}" for k, v in fitted.items())
    )
    lines.append(profile_text)
    lines += [
        "**1b. The whole `jurymeter gstudy` process (default settings) vs a raw polars process over the same Parquet**",
        "",
        "Each a fresh process, timed from outside (wall time of the subprocess: interpreter start, imports, "
        "the work and exit), interleaved, "
        f"{opts.repeats} runs each. (a') `python -c` that imports polars and runs (a)'s query on the item set's "
        f"{len(part_files)} part files; (b') `.venv/bin/jurymeter gstudy --item-set {ITEM_SET} --store <store>` "
        f"with default settings (n_boot 800, ensembles k = 2, 3 with 60 partitions each, 200 item splits, "
        f"the item screen; the nightly fit path, `run_fit`), its stdout to a file.",
        "",
        "| process | median (s) | runs (s) | CPU (s) | other CPU-s | peak RSS | notes |",
        "|---|---:|---:|---:|---:|---:|---|",
    ]

    def process_row(label: str, runs: list[dict[str, Any]], note: str) -> str:
        walls = [r["wall_seconds"] for r in runs]
        cpu = median([r["process_cpu"] for r in runs])
        other = median([r["other_cpu_seconds"] for r in runs])
        rss = max(r["peak_rss"] for r in runs) / 1e9
        return f"| {label} | {median(walls):.2f} | {runs_text(walls)} | {cpu:.2f} | {other:.1f} | {rss:.2f} GB | {note} |"

    lines.append(process_row("(a') `python -c` raw polars scan + group-by", raw_procs, f"{raw_groups:,} groups"))
    lines.append(
        process_row(
            "(b') `jurymeter gstudy --item-set bench-gstudy --store <store>`",
            cli_procs,
            f"{len(printed[0].splitlines())} lines printed"
            + ("" if all(t == printed[0] for t in printed) else " (runs differ!)"),
        )
    )
    lines += [
        "",
        f"- whole process, jurymeter / raw: **{process_ratio:.2f}x** ({cli_proc_med:.2f} s / {raw_proc_med:.2f} s) "
        f"— goal <= {GOAL_PROCESS_RATIO:g}x: **{'met' if process_ratio <= GOAL_PROCESS_RATIO else 'missed'}**",
        "",
        f"Where (b')'s time goes: one more run of the same command in-process (`bench/gstudy.py --stages`, "
        f"under `python -X importtime`), wall {staged['wall_seconds']:.2f} s "
        f"(CPU {staged['process_cpu']:.2f} s, others {staged['other_cpu_seconds']:.1f} CPU-s); "
        "wall clocks around each function (nested rows are part of the row they name):",
        "",
        "| stage | time (s) | calls |",
        "|---|---:|---:|",
    ]
    st = staged
    lines.append(f"| interpreter start and the script's own imports (wall − time since the child began) | "
                 f"{st['wall_seconds'] - st['since_start']:.2f} | |")
    lines.append(f"| import `jurymeter.cli.app` (typer, rich, polars, the registry) | {st['import_cli']:.2f} | 1 |")
    lines.append(f"| import the fit's modules (scipy.stats with `jurymeter.stats.dstudy`, ...) | {st['import_stages']:.2f} | 1 |")
    lines.append(f"| the command (`main()`), of which: | {st['command']:.2f} | 1 |")
    labels = {attr: (label, parent) for _m, attr, label, parent in STAGES}
    for attr in st["found"]:
        if attr not in st["times"]:
            continue
        label, parent = labels[attr]
        depth = 0 if parent is None else (1 if labels.get(parent, (None, None))[1] is None else 2)
        lines.append(f"| {'· ' * depth}{label} | {st['times'][attr]:.3f} | {st['calls'][attr]} |")
    lines += [
        "",
        "- imports of that run (`-X importtime`: cumulative time of each package's first import, "
        "its dependencies first imported there included; s): "
        + ", ".join(f"{name} {sec:.2f}" for name, sec in imports.items() if name in IMPORT_WATCH)
        + "; not imported: "
        + (", ".join(name for name in IMPORT_WATCH if name not in imports) or "none"),
        "",
    ]
    lines += [
        f"**2. Bootstrap ({opts.n_boot} resamples) and ensemble refits (2 x {opts.partitions}) on "
        f"{' x '.join(map(str, small))} (`{SPEC}`, seed {seed_small})**",
        "",
        "| step | median (s) | runs (s) |",
        "|---|---:|---:|",
    ]
    for key, label in (
        ("boot", f"`fit_gstudy` + `bootstrap_reliability(fit, n_boot={opts.n_boot})`"),
        ("k2", f"`ensemble_partitions(x, design, k=2, partitions={opts.partitions})`"),
        ("k3", f"`ensemble_partitions(x, design, k=3, partitions={opts.partitions})`"),
        ("total", "**total**"),
    ):
        values = [r[key] for r in small_res["runs"]]
        lines.append(f"| {label} | {median(values):.3f} | {runs_text(values, 3)} |")
    lines.append(
        f"| `assess_block(block, GStudyRequest(item_set='x'))` (informational, whole report) | "
        f"{median(small_res['assess']):.3f} | {runs_text(small_res['assess'], 3)} |"
    )
    lines += [
        "",
        f"- total: **{small_med:.3f} s** (first run {totals[0]:.3f} s) — goal < {GOAL_SMALL_SECONDS:g} s: "
        f"**{'met' if small_med < GOAL_SMALL_SECONDS else 'missed'}**; one subprocess, "
        f"{small_res['other_cpu_seconds']:.1f} CPU-s used by others meanwhile",
        "",
        "Where `assess_block` spends its time (one more call under cProfile, src/jurymeter only):",
        "",
        profile_table(logs / "assess.prof", 12, full=False),
        f"**3. The same {' x '.join(map(str, small))} data through lme4 (REML, bobyqa, maxfun 1e6)**",
        "",
        f"Formula (as `tests/test_vs_lme4.py::_formula`): `{formula}`; {int(np.prod(small)):,} rows.",
        "",
    ]
    ours_sigma = loop["sigma2"]
    if lme4_rows:
        walls = [r["wall_seconds"] for r in lme4_rows]
        lmer_el = [r["lmer"]["elapsed"] for r in timed_rows]
        lmer_cpu = [r["lmer"]["user"] + r["lmer"]["system"] for r in timed_rows]
        reads = [r["read"]["elapsed"] for r in timed_rows]
        lib = [r["library"]["elapsed"] for r in timed_rows]
        lines += [
            "| step | median (s) | runs (s) | notes |",
            "|---|---:|---:|---|",
            f"| `Rscript tests/r/lme4_components.R` (whole process) | {median(walls):.2f} | {runs_text(walls)} | "
            f"process CPU {median([r['process_cpu'] for r in lme4_rows]):.1f} s, peak RSS "
            f"{max(r['peak_rss'] for r in lme4_rows) / 1e9:.2f} GB, others {median([r['other_cpu_seconds'] for r in lme4_rows]):.1f} CPU-s |",
            f"| `lmer(...)` alone (`bench/gstudy_lme4.R`, `system.time`) | {median(lmer_el):.2f} | {runs_text(lmer_el)} | "
            f"CPU {median(lmer_cpu):.1f} s (system {median([r['lmer']['system'] for r in timed_rows]):.1f} s); "
            f"{timed_rows[0]['feval']} deviance evaluations; "
            f"library(lme4) {median(lib):.2f} s, read.csv {median(reads):.2f} s |",
            f"| our `fit_gstudy(x, design)` | {ours_fit:.5f} | min {min(loop['per_call']):.5f}, max "
            f"{max(loop['per_call']):.5f} | per call, median of {len(loop['per_call'])} batches of {loop['number']} calls |",
            "",
            f"- speed-up of `fit_gstudy` over the `lmer` call: **{median(lmer_el) / ours_fit:,.0f}x**; over the "
            f"whole R process: {median(walls) / ours_fit:,.0f}x",
        ]
        # Every R fit (both scripts) is compared: lme4's answer can differ between
        # runs on the same data in the last digits the comparison looks at.
        fits = [("lme4_components.R", k, r["components"]) for k, r in enumerate(lme4_rows)]
        fits += [("gstudy_lme4.R", k, r["components"]) for k, r in enumerate(timed_rows)]
        per_fit = []
        for script, k, theirs in fits:
            diffs = []
            for effect, label in zip(design.effects, design.labels, strict=True):
                value = ours_sigma[label]
                other = theirs[lme4_group(design, effect)]
                diffs.append((abs(other - value) / abs(value), label, value, other))
            per_fit.append((max(diffs), script, k, diffs))
        (worst, script, k, diffs) = max(per_fit, key=lambda item: item[0])
        lines.append(
            f"- largest relative difference of a component, |lme4 - EMS| / EMS, over {len(fits)} lme4 "
            f"fits: **{worst[0]:.2e}** (sigma2_{worst[1]}: EMS {worst[2]:.6g}, lme4 {worst[3]:.6g}, "
            f"`{script}` run {k + 1}); per fit: "
            + ", ".join(f"{m[0]:.2e} (sigma2_{m[1]})" for m, *_ in per_fit)
        )
        if len(fits) > 1:
            spread = 0.0
            for effect in design.effects:
                values = [f[2][lme4_group(design, effect)] for f in fits]
                spread = max(spread, (max(values) - min(values)) / abs(statistics.mean(values)))
            lines.append(
                f"- lme4's own run-to-run spread on the same data (max - min over the fits, relative): "
                f"{spread:.2e}"
            )
        lines.append(
            "- components (EMS / lme4, that fit): "
            + ", ".join(f"{lab} {v:.5g} / {o:.5g}" for _, lab, v, o in diffs)
        )
    else:
        lines.append(f"- lme4 skipped (`--skip-lme4`); our `fit_gstudy`: {ours_fit:.5f} s per call")
    text = "\n".join(lines).rstrip() + "\n"
    print()
    print(text)
    if not opts.no_append:
        header = (
            ""
            if RESULTS.exists()
            else "# Benchmark results\n\nAppended by `bench/*.py`; newest last.\n"
        )
        # One write(2) on an O_APPEND descriptor: other benchmarks append to the file too.
        fd = os.open(RESULTS, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            data = (header + "\n" + text).encode()
            written = os.write(fd, data)
            if written != len(data):
                msg = f"short write to {RESULTS}: {written} of {len(data)} bytes"
                raise OSError(msg)
        finally:
            os.close(fd)
        print(f"appended to {RESULTS}")
    print(f"logs: {logs}")


if __name__ == "__main__":
    main()
