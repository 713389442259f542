r"""Peak memory of a G-study fit from a local store and from an S3 store, as the record count grows.

For each size of ``--sizes`` (default 2,000,000 and 6,000,000 records) the script

1. writes one Parquet source of a fully crossed pointwise item set:
   ``--systems`` (20) x items x ``--judges`` (10) x ``--replicates`` (2), the
   items being size / (systems x judges x replicates); integer scores 1..10
   from a linear model (system, item, judge, system x item effects and noise);
2. ingests it with ``jurymeter.io.ingest.ingest`` into a fresh local store and
   into a fresh S3 store on moto's standalone server (``infra/scripts/s3-server.sh``
   on a free port, one bucket; the server holds the objects in memory);
3. fits the item set from each store in a fresh process, measured by GNU time::

       /usr/bin/time -v uv run --no-sync jurymeter gstudy --item-set bench-s3 --boot 100 --json \
           --store <local folder | s3://bench/store-N> [--storage-option endpoint_url=http://127.0.0.1:PORT]

   with the S3 credentials in ``AWS_ACCESS_KEY_ID``/``AWS_SECRET_ACCESS_KEY``/
   ``AWS_DEFAULT_REGION`` (moto accepts any), and reports its "Maximum resident
   set size" (the largest process of the tree: the Python fit, not ``uv``) and
   wall time; the two backends' JSON reports must be equal;
4. with ``--baseline-rev REV``, fits the same stores once more with the
   library's ``src/`` as of git revision ``REV`` (exported with ``git archive``
   to the work folder and put first on ``PYTHONPATH``), for a before/after on the
   same machine and data.

The table has one row per size and code version; the per-record slope of each
backend, (peak at the largest size - peak at the smallest) / (records added),
says whether a backend's memory follows the records. A store scan that
materialises every part costs about 240 bytes a record more on S3 than on disk;
a lazy one costs the same on both. Each fit also holds its dense block
(``gstudy`` in the CLI), so even a lazy scan is not flat in the records while
the cells grow with them.

Run from the project root::

    .venv/bin/python bench/s3_memory.py
    .venv/bin/python bench/s3_memory.py --baseline-rev 4504630
    .venv/bin/python bench/s3_memory.py --sizes 200000,400000 --no-append   # quick check
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from _common import append_results, command_line, facts_block, fmt_rss, machine_facts

BENCH_DIR = Path(__file__).resolve().parent
ROOT = BENCH_DIR.parent
DEFAULT_WORKDIR = BENCH_DIR / "_work" / "s3_memory"
ITEM_SET = "bench-s3"
BUCKET = "bench"
CREDENTIALS = {
    "AWS_ACCESS_KEY_ID": "testing",
    "AWS_SECRET_ACCESS_KEY": "testing",
    "AWS_DEFAULT_REGION": "us-east-1",
}


# ---------------------------------------------------------------- data


def write_source(path: Path, records: int, systems: int, judges: int, replicates: int, seed: int,
                 generations: int = 1) -> int:
    """One Parquet file of a crossed item set; returns its number of records (whole items).

    With ``generations`` > 1 each (system, item, judge, replicate) cell holds that
    many generations (averaged by the G-study): records grow, cells do not.
    """
    import numpy as np
    import polars as pl

    per_item = systems * judges * replicates * generations
    items = records // per_item
    rng = np.random.default_rng(seed)
    s_eff = rng.normal(0, 0.6, systems)
    i_eff = rng.normal(0, 0.8, items)
    j_eff = rng.normal(0, 0.4, judges)
    si_eff = rng.normal(0, 0.5, (systems, items))
    n = items * per_item
    k = np.arange(n, dtype=np.int64)
    item = k // per_item
    system = (k // (judges * replicates * generations)) % systems
    judge = (k // (replicates * generations)) % judges
    score = 5.5 + s_eff[system] + i_eff[item] + j_eff[judge] + si_eff[system, item]
    score = np.clip(np.rint(score + rng.normal(0, 0.8, n)), 1, 10)
    frame = pl.DataFrame(
        {
            "item_set": pl.Series([ITEM_SET], dtype=pl.String).gather(np.zeros(n, dtype=np.int64)),
            "item_id": pl.Series([f"item-{x:05d}" for x in range(items)]).gather(item),
            "system_id": pl.Series([f"sys-{x:02d}" for x in range(systems)]).gather(system),
            "judge_id": pl.Series([f"judge-{x:02d}" for x in range(judges)]).gather(judge),
            "replicate": (k // generations) % replicates,
            "generation": k % generations,
            "score": score,
        }
    )
    frame.write_parquet(path, compression="zstd")
    return n


def ingest_into(url: str, source: Path, options: dict[str, str]) -> dict[str, Any]:
    from jurymeter.io.ingest import ingest
    from jurymeter.io.sources import discover_sources
    from jurymeter.io.store import Store
    from jurymeter.io.validate import ValidationOptions

    start = time.perf_counter()
    store = Store(url, options)
    report = ingest(store, discover_sources([str(source)]), ValidationOptions(scale=(1.0, 10.0)))
    (result,) = report.sources
    if result.accepted != result.read or result.quarantined or result.duplicates_dropped:
        msg = f"ingest of {source} into {url} did not accept every record: {result}"
        raise SystemExit(msg)
    return {"seconds": time.perf_counter() - start, "parts": len(store.data_files("pointwise", ITEM_SET))}


# ---------------------------------------------------------------- moto


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def start_moto(port: int) -> tuple[subprocess.Popen, str]:
    env = {**os.environ, **CREDENTIALS}
    proc = subprocess.Popen(
        ["bash", str(ROOT / "infra" / "scripts" / "s3-server.sh"), str(port)],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        env=env,
    )
    assert proc.stdout is not None
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        line = proc.stdout.readline()
        if line.startswith("AWS_ENDPOINT_URL="):
            endpoint = line.strip().split("=", 1)[1]
            import s3fs

            s3fs.S3FileSystem(key="testing", secret="testing", client_kwargs={"endpoint_url": endpoint}).mkdir(BUCKET)
            return proc, endpoint
        if proc.poll() is not None:
            break
    proc.terminate()
    msg = "moto's server did not start (infra/scripts/s3-server.sh)"
    raise SystemExit(msg)


# ---------------------------------------------------------------- measuring


def gnu_time() -> str:
    path = "/usr/bin/time"
    try:
        version = subprocess.run([path, "--version"], capture_output=True, text=True)
    except OSError:
        version = None
    if version is None or "GNU" not in version.stdout + version.stderr:
        msg = "GNU time is needed at /usr/bin/time (Debian: apt-get install time)"
        raise SystemExit(msg)
    return path


def fit_command(url: str, endpoint: str | None, boot: int) -> list[str]:
    command = ["uv", "run", "--no-sync", "jurymeter", "gstudy", "--item-set", ITEM_SET,
               "--boot", str(boot), "--json", "--store", url]
    if endpoint:
        command += ["--storage-option", f"endpoint_url={endpoint}"]
    return command


def measure_fit(time_bin: str, command: list[str], pythonpath: Path | None) -> dict[str, Any]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    env.update(CREDENTIALS)
    env.pop("PYTHONPATH", None)
    if pythonpath is not None:
        env["PYTHONPATH"] = str(pythonpath)
    done = subprocess.run([time_bin, "-v", *command], capture_output=True, text=True, env=env, cwd=ROOT)
    if done.returncode != 0:
        msg = f"fit failed ({done.returncode}): {' '.join(command)}\n{done.stderr[-2000:]}"
        raise SystemExit(msg)
    peak_kb = int(re.search(r"Maximum resident set size \(kbytes\): (\d+)", done.stderr).group(1))
    wall = re.search(r"Elapsed \(wall clock\) time \(h:mm:ss or m:ss\): ([\d:.]+)", done.stderr).group(1)
    seconds = 0.0
    for part in wall.split(":"):
        seconds = seconds * 60 + float(part)
    return {"peak": peak_kb * 1024, "seconds": seconds, "report": json.loads(done.stdout)}


def export_baseline(rev: str, workdir: Path) -> Path:
    """``src/`` of ``rev``, exported (no worktree); the folder to put on PYTHONPATH."""
    target = workdir / f"baseline-{rev}"
    if not (target / "src" / "jurymeter").exists():
        target.mkdir(parents=True, exist_ok=True)
        archive = subprocess.run(["git", "archive", rev, "src"], cwd=ROOT, capture_output=True, check=True)
        subprocess.run(["tar", "-x", "-C", str(target)], input=archive.stdout, check=True)
    found = subprocess.run(
        ["uv", "run", "--no-sync", "python", "-c", "import jurymeter; print(jurymeter.__file__)"],
        capture_output=True, text=True, check=True, cwd=ROOT, env={**os.environ, "PYTHONPATH": str(target / "src")},
    ).stdout.strip()
    if not Path(found).is_relative_to(target):
        msg = f"PYTHONPATH does not take precedence over the installed jurymeter ({found})"
        raise SystemExit(msg)
    return target / "src"


def current_version() -> str:
    """The checked-out revision, marked when ``src/`` has uncommitted changes."""
    rev = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True)
    dirty = subprocess.run(["git", "status", "--porcelain", "src"], cwd=ROOT, capture_output=True, text=True)
    label = f"`{rev.stdout.strip() or '?'}`"
    return label + (" + uncommitted src/" if dirty.stdout.strip() else "") + " (after)"


def _comparable(report: dict[str, Any]) -> dict[str, Any]:
    """A report without what names the store."""
    return {k: v for k, v in report.items() if k not in ("store", "timings")}


# ---------------------------------------------------------------- main


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", default="2000000,6000000", help="record counts, comma-separated")
    parser.add_argument("--systems", type=int, default=20)
    parser.add_argument("--judges", type=int, default=10)
    parser.add_argument("--replicates", type=int, default=2)
    parser.add_argument(
        "--generations", default=None,
        help="generations per cell, comma-separated (e.g. 1,5,15): items fixed by --items, so the records "
             "grow and the fit's cells do not (instead of --sizes)",
    )
    parser.add_argument("--items", type=int, default=1000, help="items, with --generations")
    parser.add_argument("--boot", type=int, default=100)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--repeats", type=int, default=1, help="fits per store and code version (max peak kept)")
    parser.add_argument("--baseline-rev", default=None, help="also fit with src/ of this git revision")
    parser.add_argument("--workdir", type=Path, default=DEFAULT_WORKDIR)
    parser.add_argument("--keep", action="store_true")
    parser.add_argument("--no-append", action="store_true")
    args = parser.parse_args()

    per_cell = args.systems * args.judges * args.replicates
    if args.generations:
        plan = [(args.items * per_cell * int(g), int(g)) for g in args.generations.split(",")]
    else:
        plan = [(int(x), 1) for x in args.sizes.split(",")]
    os.environ.update(CREDENTIALS)  # this process ingests into the S3 store too
    time_bin = gnu_time()
    facts = machine_facts()
    started = dt.datetime.now(dt.UTC)
    shutil.rmtree(args.workdir, ignore_errors=True)
    args.workdir.mkdir(parents=True)
    baseline = export_baseline(args.baseline_rev, args.workdir) if args.baseline_rev else None
    versions: list[tuple[str, Path | None]] = [(current_version(), None)]
    if baseline is not None:
        versions.insert(0, (f"`{args.baseline_rev}` (before)", baseline))

    moto, endpoint = start_moto(free_port())
    rows: list[dict[str, Any]] = []
    try:
        for size, generations in plan:
            source = args.workdir / f"source-{size}.parquet"
            n = write_source(source, size, args.systems, args.judges, args.replicates, args.seed, generations)
            local_url = str(args.workdir / f"local-{size}")
            s3_url = f"s3://{BUCKET}/store-{size}"
            local_ingest = ingest_into(local_url, source, {})
            s3_ingest = ingest_into(s3_url, source, {"endpoint_url": endpoint})
            print(f"{n:,} records: ingested (local {local_ingest['seconds']:.1f} s, S3 {s3_ingest['seconds']:.1f} s,"
                  f" {s3_ingest['parts']} parts)", flush=True)
            for label, path in versions:
                fits: dict[str, dict[str, Any]] = {}
                for backend, url, ep in (("local", local_url, None), ("S3", s3_url, endpoint)):
                    runs = [measure_fit(time_bin, fit_command(url, ep, args.boot), path) for _ in range(args.repeats)]
                    fits[backend] = max(runs, key=lambda r: r["peak"])
                    # The first fit after the ingest merges the source's cell file (O(new cells)); the
                    # ones after read the merged table only: what a night's fit costs once its cells are in.
                    fits[backend]["next_peak"] = max((r["peak"] for r in runs[1:]), default=None)
                    print(f"  {label:>22} {backend:>5}: peak {fmt_rss(fits[backend]['peak'])}, "
                          f"{fits[backend]['seconds']:.1f} s", flush=True)
                same = _comparable(fits["local"]["report"]) == _comparable(fits["S3"]["report"])
                block = fits["local"]["report"].get("block", {})
                rows.append({"records": n, "items": n // (per_cell * generations), "generations": generations,
                             "version": label, "local": fits["local"], "s3": fits["S3"], "same": same,
                             "block": block, "parts": s3_ingest["parts"]})
    finally:
        moto.terminate()
        moto.wait(timeout=30)
        if not args.keep:
            shutil.rmtree(args.workdir, ignore_errors=True)

    text = render(rows, args, facts, started, time_bin, endpoint)
    print(text)
    if not args.no_append:
        append_results(text)


def render(rows: list[dict[str, Any]], args: argparse.Namespace, facts: dict[str, str], started: dt.datetime,
           time_bin: str, endpoint: str) -> str:
    sizes = sorted({r["records"] for r in rows})
    title = ", ".join(f"{s:,}" for s in sizes)
    lines = [
        f"## S3 against local: peak RSS of `jurymeter gstudy`, {title} records ({started:%Y-%m-%d %H:%M} UTC)",
        "",
        f"Command: `{command_line('s3_memory.py')}`",
        "",
        facts_block(facts).rstrip("\n"),
        f"- data: one pointwise item set `{ITEM_SET}`, {args.systems} systems x items x {args.judges} judges x "
        f"{args.replicates} replicates, fully crossed, integer scores 1..10; one Parquet source per size, ingested"
        " with `jurymeter.io.ingest.ingest` into a fresh local store and a fresh S3 store on moto's server"
        " (`infra/scripts/s3-server.sh`, objects in its memory)",
        f"- each fit: `{time_bin} -v uv run --no-sync jurymeter gstudy --item-set {ITEM_SET} --boot {args.boot}"
        " --json --store <folder | s3://bench/store-N> [--storage-option endpoint_url=http://127.0.0.1:PORT]`,"
        " AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY / AWS_DEFAULT_REGION in the environment; peak = GNU time's"
        f" maximum resident set size (the fit's Python process); {args.repeats} fit(s) per cell, largest peak kept;"
        " a baseline version runs the same command with the revision's `src/` first on PYTHONPATH",
        "",
        "| code | records | items | generations | S3 parts | local peak RSS | S3 peak RSS | S3 - local | local fit (s) | S3 fit (s) |"
        " reports equal | local peak, fits after the first | S3 peak, fits after the first |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|---:|---:|",
    ]
    for r in rows:
        later = [fmt_rss(r[b]["next_peak"]) if r[b].get("next_peak") else "" for b in ("local", "s3")]
        lines.append(
            f"| {r['version']} | {r['records']:,} | {r['items']:,} | {r['generations']} | {r['parts']} | {fmt_rss(r['local']['peak'])} | "
            f"{fmt_rss(r['s3']['peak'])} | {(r['s3']['peak'] - r['local']['peak']) / 1e6:+.0f} MB | "
            f"{r['local']['seconds']:.1f} | {r['s3']['seconds']:.1f} | {'yes' if r['same'] else '**no**'} | {later[0]} | {later[1]} |"
        )
    lines.append("")
    if len(sizes) > 1:
        lo, hi = sizes[0], sizes[-1]
        for version in dict.fromkeys(r["version"] for r in rows):
            by = {r["records"]: r for r in rows if r["version"] == version}
            slopes = []
            for backend, key in (("local", "local"), ("S3", "s3")):
                slope = (by[hi][key]["peak"] - by[lo][key]["peak"]) / (hi - lo)
                slopes.append(f"{backend} {slope:.0f}")
            per_s3 = [(by[s]["s3"]["peak"] - by[s]["local"]["peak"]) / s for s in (lo, hi)]
            lines.append(
                f"- {version}: peak RSS per added record, {lo:,} -> {hi:,}: {', '.join(slopes)} bytes; "
                f"S3 minus local per record: {per_s3[0]:.0f} / {per_s3[1]:.0f} bytes"
            )
    lines.append("")
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
