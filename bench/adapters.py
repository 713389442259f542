"""Adapter benchmark: MT-Bench single judgments through the adapter against plain JSON Lines ingest.

One run:

1. writes ``--records`` realistic MT-Bench single-answer lines to
   ``<workdir>/gpt-4_single.jsonl`` as FastChat's ``llm_judge`` does
   (``json.dumps`` of a dict in FastChat's key order ``question_id, model,
   judge, user_prompt, judgment, score, turn, tstamp``, ASCII-escaped, one line
   each): 80 questions x 2 turns, the four single prompts (``single-v1``,
   ``single-math-v1`` for questions 101-130, and their ``-multi-turn``
   variants for turn 2) with the exact template markers the adapter cuts the
   answer length out of; ``user_prompt`` about 1.5-3 KB, ``judgment`` about
   0.5-1 KB ending ``Rating: [[x]]``; integer scores 1-10 with about 2% ``-1``
   (a tenth of them the ``$ERROR$`` of a failed judge call); lines of one run
   (a judge and a model) in completion order; and about 0.5% re-runs of
   earlier keys appended at the end with a later ``tstamp``;
2. writes the same judgments already in canonical form to
   ``<workdir>/canonical.jsonl``: what a user would otherwise write with a
   converter and what the adapter gives, i.e. the canonical columns
   (``item_set, item_id, system_id, judge_id, score, generation, replicate,
   timestamp, response_length``) and the provenance columns (``question_id,
   turn, judge_prompt, tstamp``), with no prompt or judgment text, and only
   the judgments that hold a score (a converter has nothing to write for a
   ``-1``; with it the canonical file would not be clean and the streaming fast
   path would step aside);
3. times, each in a fresh subprocess, interleaved, ``--repeats`` times:
   (a) ``jurymeter.io.ingest.ingest`` of the canonical file into a fresh store
   (``discover_sources(log_format="auto")`` finds canonical records; the
   streaming fast path applies) and (b) the same of the MT-Bench file
   (``--format auto`` recognises MT-Bench); wall time inside the child around
   ``ingest()``, the child's CPU time, peak RSS (``os.wait4`` ``ru_maxrss``
   and psutil polling, as ``bench/ingest.py``);
   and, for reference, the floor: the file's SHA-256 alone and one orjson parse
   of its lines alone (what no ingest of it avoids); (b) again with the
   source's hash replaced by a hash of its name and size (the adapter's
   reading, validation and staging without the hash); and (c) issue 25's
   polars-only baseline: ``scan_ndjson`` of the MT-Bench file with a schema of
   the needed fields, FastChat's ``[[rating]]`` extracted from the judgment
   text (scanned, not kept), ``sink_parquet``;
4. checks that (b) reconciles (read = accepted + quarantined + duplicates, the
   -1 scores quarantined by reason) and that both stores hold the same rows
   (every canonical column and the provenance columns), then reports the median
   ratio (b)/(a) (goal <= 1.5x) and both peak RSS (goal: (b) under the plain
   ingest's bound, 3 GB), and (b) / (c) with and without the hash (goal <=
   1.5x), and appends the section to ``bench/RESULTS.md``.

``--profile`` instead runs (b) once under cProfile (main thread and ingest's
background threads) and lists the hotspots per function.

Run from the project root with the project's virtualenv::

    .venv/bin/python bench/adapters.py --records 1000000
    .venv/bin/python bench/adapters.py --records 1000000 --profile
    .venv/bin/python bench/adapters.py --records 100000 --repeats 1 --no-append   # quick check
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import shutil
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from _common import (
    append_results,
    busy_cpu_seconds,
    command_line,
    facts_block,
    fmt_bytes,
    fmt_rss,
    machine_facts,
    measure_child,
    src_digest,
)

BENCH_DIR = Path(__file__).resolve().parent
ROOT = BENCH_DIR.parent
DEFAULT_WORKDIR = BENCH_DIR / "_work" / "adapters"
GOAL_RATIO = 1.5
GOAL_RSS_BYTES = 3_000_000_000  # plain ingest's bound (bench/ingest.py), decimal GB

JUDGES = ("gpt-4", "gpt-4-turbo", "gpt-4o-2024-08-06", "claude-3-5-sonnet-20240620", "llama-3-70b-instruct")
FAMILIES = ("vicuna", "llama-2", "mistral", "zephyr", "qwen2", "gemma", "phi-3", "olmo", "tulu", "granite")
QUESTIONS = range(81, 161)
REFERENCE = range(101, 131)  # math, reasoning, coding: the prompts with a reference answer
FAILED_SHARE = 0.02  # score -1
API_ERROR_SHARE = 0.1  # of the -1: the judge call failed ("$ERROR$")
RERUN_SHARE = 0.005
API_ERROR_OUTPUT = "$ERROR$"

_INSTRUCTION = (
    "[Instruction]\nPlease act as an impartial judge and evaluate the quality of the response "
    "provided by an AI assistant to the user question displayed below. Your evaluation should "
    "consider factors such as the helpfulness, relevance, accuracy, depth, creativity, and level "
    "of detail of the response. Begin your evaluation by providing a short explanation. Be as "
    "objective as possible. After providing your explanation, you must rate the response on a "
    'scale of 1 to 10 by strictly following this format: "[[rating]]", for example: "Rating: [[5]]".\n\n'
)
_MATH_INSTRUCTION = (
    "[Instruction]\nPlease act as an impartial judge and evaluate the quality of the response "
    "provided by an AI assistant to the user question displayed below. Your evaluation should "
    "consider correctness and helpfulness. You will be given a reference answer and the "
    "assistant's answer. Begin your evaluation by comparing the assistant's answer with the "
    "reference answer. Identify and correct any mistakes. Be as objective as possible. After "
    "providing your explanation, you must rate the response on a scale of 1 to 10 by strictly "
    'following this format: "[[rating]]", for example: "Rating: [[5]]".\n\n'
)


# ---------------------------------------------------------------- data


class _Text:
    """English-like text (words, punctuation, markdown, a few non-ASCII characters) to cut answers from."""

    def __init__(self, rng: Any, size: int = 4_000_000) -> None:
        import numpy as np

        letters = np.array(list("etaoinshrdlucmfwypvbgkjqxz"))
        weights = np.array([12, 9, 8, 8, 7, 7, 6, 6, 6, 4, 4, 3, 3, 2, 2, 2, 2, 2, 1, 1, 2, 1, 1, 1, 1, 1], float)
        weights /= weights.sum()
        words = ["".join(rng.choice(letters, size=int(n), p=weights)) for n in rng.integers(1, 11, 6000)]
        words += ["caf\u00e9", "na\u00efve", "\u03c0", "\u2014", "\u2713", "\u00b0C", "\U0001f600", '"quoted"', "it's"]
        seps = [" "] * 40 + [", ", ". ", ".\n\n", "\n- ", "\n1. ", ": ", "; ", "\n\n### ", "\n```python\n", "\n```\n"]
        picks = rng.integers(0, len(words), size // 5)
        gaps = rng.integers(0, len(seps), size // 5)
        self.text = "".join(words[w] + seps[g] for w, g in zip(picks.tolist(), gaps.tolist(), strict=True))

    def cut(self, rng: Any, low: int, high: int) -> str:
        n = int(rng.integers(low, high))
        start = int(rng.integers(0, len(self.text) - n))
        return self.text[start : start + n].strip() or "ok"


def _prompt(qid: int, turn: int, q: tuple[str, str], ref: tuple[str, str] | None, a1: str, a2: str) -> str:
    """``user_prompt`` of FastChat's single prompts (``fastchat/llm_judge/data/judge_prompts.jsonl``)."""
    if turn == 1 and ref is None:  # single-v1
        return (
            f"{_INSTRUCTION}[Question]\n{q[0]}\n\n[The Start of Assistant's Answer]\n{a1}\n"
            "[The End of Assistant's Answer]"
        )
    if turn == 1:  # single-math-v1
        return (
            f"{_MATH_INSTRUCTION}[Question]\n{q[0]}\n\n[The Start of Reference Answer]\n{ref[0]}\n"
            "[The End of Reference Answer]\n\n[The Start of Assistant's Answer]\n"
            f"{a1}\n[The End of Assistant's Answer]"
        )
    conversation = (
        "<|The Start of Assistant A's Conversation with User|>\n\n"
        f"### User:\n{q[0]}\n\n### Assistant A:\n{a1}\n\n### User:\n{q[1]}\n\n### Assistant A:\n{a2}\n\n"
        "<|The End of Assistant A's Conversation with User|>"
    )
    if ref is None:  # single-v1-multi-turn
        return conversation
    return (  # single-math-v1-multi-turn
        f"<|The Start of Reference Answer|>\n\n### User:\n{q[0]}\n\n### Reference answer:\n{ref[0]}\n\n"
        f"### User:\n{q[1]}\n\n### Reference answer:\n{ref[1]}\n\n<|The End of Reference Answer|>\n\n\n"
        + conversation
    )


def _iso(tstamp: float) -> str:
    """The adapter's ``timestamp``: ``datetime.fromtimestamp`` in UTC, microseconds, ``Z``."""
    return dt.datetime.fromtimestamp(tstamp, dt.UTC).isoformat(timespec="microseconds").removesuffix("+00:00") + "Z"


def write_logs(mt_path: Path, canonical_path: Path, n: int, seed: int = 0) -> dict[str, int]:
    """Write ``n`` MT-Bench single lines and the canonical records of the same judgments."""
    import numpy as np
    import orjson

    rng = np.random.default_rng(seed)
    text = _Text(rng)
    questions = {qid: (text.cut(rng, 80, 400), text.cut(rng, 60, 250)) for qid in QUESTIONS}
    references = {qid: (text.cut(rng, 150, 500), text.cut(rng, 100, 400)) for qid in REFERENCE}
    items = [(qid, turn) for qid in QUESTIONS for turn in (1, 2)]
    n_reruns = int(n * RERUN_SHARE)
    n_first = n - n_reruns
    runs_needed = -(-n_first // len(items))
    n_models = -(-runs_needed // len(JUDGES))
    models = [f"{FAMILIES[m % len(FAMILIES)]}-{7 + m % 64}b-v{m // 64}.{m % 7}_sft" for m in range(n_models)]
    # Per judgment kept for the canonical file and the re-runs (the prompt only for the judgments re-run):
    # (key, tstamp, score, length, qid, turn, judge, prompt name, model, user_prompt or None)
    done: list[tuple[Any, ...]] = []
    rerun = set(rng.choice(n_first, size=n_reruns, replace=False).tolist())
    clock = 1.70e9

    def judgment(score: int) -> str:
        if score == -1:
            return API_ERROR_OUTPUT if rng.random() < API_ERROR_SHARE else text.cut(rng, 500, 1000)
        return text.cut(rng, 480, 980) + f"\n\nRating: [[{score}]]"

    def score_of() -> int:
        return -1 if rng.random() < FAILED_SHARE else int(rng.integers(1, 11))

    counts = {"lines": 0, "failed": 0, "api_errors": 0, "reruns": n_reruns}
    tmp_mt, tmp_canonical = mt_path.with_suffix(".partial"), canonical_path.with_suffix(".partial")
    with open(tmp_mt, "w", encoding="ascii") as out:

        def emit(qid: int, model: str, judge: str, prompt_name: str, user_prompt: str, score: int,
                 turn: int, tstamp: float, length: int) -> None:
            reply = judgment(score)
            counts["failed"] += score == -1
            counts["api_errors"] += reply == API_ERROR_OUTPUT
            line = {"question_id": qid, "model": model, "judge": [judge, prompt_name], "user_prompt": user_prompt,
                    "judgment": reply, "score": score, "turn": turn, "tstamp": tstamp}
            out.write(json.dumps(line) + "\n")  # FastChat: fout.write(json.dumps(result) + "\n")
            kept = user_prompt if len(done) in rerun else None
            done.append(((f"{qid}-t{turn}", model, judge), tstamp, score, length, qid, turn, judge, prompt_name,
                         model, kept))
            counts["lines"] += 1

        written = 0
        for run in range(runs_needed):
            judge, model = JUDGES[run % len(JUDGES)], models[run // len(JUDGES)]
            clock += float(rng.uniform(60, 3600))
            for k in rng.permutation(len(items)).tolist():
                if written == n_first:
                    break
                qid, turn = items[k]
                ref = references.get(qid)
                a1 = text.cut(rng, 700, 2100) if turn == 1 else text.cut(rng, 300, 900)
                a2 = text.cut(rng, 300, 900)
                user_prompt = _prompt(qid, turn, questions[qid], ref, a1, a2)
                name = ("single-math-v1" if ref else "single-v1") + ("-multi-turn" if turn == 2 else "")
                clock += float(rng.uniform(0.05, 3.0))
                emit(qid, model, judge, name, user_prompt, score_of(), turn, clock, len(a1) if turn == 1 else len(a2))
                written += 1
        # Re-runs appended at the end (lesnikow's files): earlier keys, a later tstamp, often another score.
        for k in rng.permutation(sorted(rerun)).tolist():
            key, _, _, length, qid, turn, judge, name, model, user_prompt = done[k]
            clock += float(rng.uniform(0.05, 3.0))
            emit(qid, model, judge, name, user_prompt, score_of(), turn, clock, length)
    # Replicates: rank of (tstamp, score) among the distinct values of a key (the adapter's rule).
    values: dict[tuple[str, str, str], set[tuple[float, int]]] = {}
    for row in done:
        values.setdefault(row[0], set()).add((row[1], row[2]))
    ranks = {key: {v: r for r, v in enumerate(sorted(vs))} for key, vs in values.items() if len(vs) > 1}
    with open(tmp_canonical, "wb") as out_c:
        for key, tstamp, score, length, qid, turn, judge, name, model, _ in done:
            if score == -1:
                continue
            record = {"item_set": "mt-bench", "item_id": key[0], "system_id": model, "judge_id": judge,
                      "score": float(score), "generation": 0,
                      "replicate": ranks[key][(tstamp, score)] if key in ranks else 0,
                      "timestamp": _iso(tstamp), "response_length": length, "question_id": qid, "turn": turn,
                      "judge_prompt": name, "tstamp": tstamp}
            out_c.write(orjson.dumps(record) + b"\n")
    os.replace(tmp_mt, mt_path)
    os.replace(tmp_canonical, canonical_path)
    counts["models"] = n_models
    counts["repeated_keys"] = len(ranks)
    counts["canonical"] = counts["lines"] - counts["failed"]
    return counts


# ---------------------------------------------------------------- children


def floor_main(src: str) -> None:
    """What no ingest of the file avoids, each alone: its content key (BLAKE3), its SHA-256 (the key before),
    one orjson parse; wall and CPU time (every thread of this process) of each."""
    import blake3
    import orjson

    from jurymeter.io.adapters.reading import FileBytes
    from jurymeter.io.source_files import content_key, content_sha256
    from jurymeter.io.sources import discover_sources

    [source] = discover_sources([src], log_format="canonical")
    out: dict[str, Any] = {}

    def timed(name: str, work: Callable[[], object]) -> None:
        t0, c0 = time.perf_counter(), time.process_time()
        work()
        out[f"{name}_seconds"], out[f"{name}_cpu_seconds"] = time.perf_counter() - t0, time.process_time() - c0

    def mapped() -> None:  # BLAKE3 of the memory-mapped file (faster nowhere here; the whole file resident)
        digest = blake3.blake3(max_threads=blake3.blake3.AUTO)
        digest.update_mmap(source.path)

    def parse() -> None:
        loads, n = orjson.loads, 0
        for _, block in FileBytes(source).line_blocks():
            for line in block:
                loads(line)
            n += len(block)
        out["lines"] = n

    t0, c0 = time.perf_counter(), time.process_time()
    timed("sha256", lambda: content_sha256(source))
    timed("hash", lambda: content_key(source))  # the content key: BLAKE3 fed 8 MiB blocks, every core
    timed("blake3_mmap", mapped)
    timed("parse", parse)
    out.update(seconds=time.perf_counter() - t0, cpu_seconds=time.process_time() - c0, src_digest=src_digest())
    print(json.dumps(out), flush=True)


POLARS_SCHEMA_FIELDS = ("question_id", "model", "judge", "judgment", "score", "turn", "tstamp")
RATING_PATTERN = r"\[\[(\d+\.?\d*)\]\]"  # FastChat's one_score_pattern (run_judge_single)


def polars_main(src: str, out_dir: str) -> None:
    """The polars-only baseline (issue 25 point 5): ``scan_ndjson`` of the needed fields, the rating, Parquet.

    The schema names only the fields a pointwise record needs (the prompt is
    skipped by the reader); the judgment text is scanned for FastChat's
    ``[[rating]]`` and not kept. No validation, replicates, quarantine or
    transaction: the floor a polars pipeline doing the same parse would have.
    """
    import polars as pl

    schema: dict[str, Any] = {"question_id": pl.Int64, "model": pl.String, "judge": pl.List(pl.String), "judgment": pl.String,
              "score": pl.Int64, "turn": pl.Int64, "tstamp": pl.Float64}
    os.makedirs(out_dir, exist_ok=True)
    out = os.path.join(out_dir, "judgments.parquet")
    t0, c0 = time.perf_counter(), time.process_time()
    (
        pl.scan_ndjson(src, schema=schema)
        .select(
            pl.format("{}-t{}", "question_id", "turn").alias("item_id"),
            pl.col("model").alias("system_id"),
            pl.col("judge").list.get(0).alias("judge_id"),
            pl.col("judge").list.get(1).alias("judge_prompt"),
            pl.col("score").cast(pl.Float64),
            pl.col("judgment").str.extract(RATING_PATTERN, 1).cast(pl.Float64).alias("rating"),
            pl.from_epoch((pl.col("tstamp") * 1e6).round().cast(pl.Int64), "us").alias("timestamp"),
            "question_id", "turn", "tstamp",
        )
        .sink_parquet(out)
    )
    seconds = time.perf_counter() - t0
    rows = pl.scan_parquet(out).select(pl.len()).collect().item()
    rated = pl.scan_parquet(out).select(pl.col("rating").is_not_null().sum()).collect().item()
    print(json.dumps({"seconds": seconds, "cpu_seconds": time.process_time() - c0, "rows": rows, "rated": rated,
                      "src_digest": src_digest()}), flush=True)


def _children_cpu() -> float:
    """CPU-seconds of this process's children that have ended (an ingest's parse workers)."""
    import resource

    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def child_main(argv: list[str]) -> None:
    """Ingest one source into a fresh store; print one JSON line with what happened."""
    if argv[0] == "floor":
        floor_main(argv[1])
        return
    if argv[0] == "polars":
        polars_main(argv[1], argv[2])
        return
    if argv[0] == "nohash":  # the ingest with the source's hash replaced by one of its name and size
        import hashlib

        import jurymeter.io.ingest as ingest_module

        def name_hash(source: Any) -> str:
            return hashlib.sha256(f"{source.url}:{source.size}".encode()).hexdigest()

        setattr(ingest_module, "content_key", name_hash)  # noqa: B010 (a benchmark's patch, not an API)
        argv = argv[1:]
    from jurymeter.io.ingest import ingest
    from jurymeter.io.sources import discover_sources
    from jurymeter.io.store import Store
    from jurymeter.io.validate import ValidationOptions

    src, store_dir, *rest = argv
    prof_out = rest[0] if rest else None
    sources = discover_sources([src], log_format="auto")
    store = Store(store_dir)
    if prof_out is not None:
        from ingest import _start_profiling

        main_prof, thread_profs = _start_profiling()
    t0, c0, k0 = time.perf_counter(), time.process_time(), _children_cpu()
    report = ingest(store, sources, ValidationOptions())
    seconds = time.perf_counter() - t0
    cpu = time.process_time() - c0 + _children_cpu() - k0  # with the ingest's worker processes, once joined
    if prof_out is not None:
        from ingest import _save_profiles

        _save_profiles(main_prof, thread_profs, prof_out)
    [source] = report.sources
    import jurymeter

    out = {
        "jurymeter": jurymeter.__file__,
        "seconds": seconds,
        "cpu_seconds": cpu,
        "src_digest": src_digest(),
        "format": source.format,
        "status": source.status,
        "lines": source.lines,
        "read": source.read,
        "accepted": source.accepted,
        "quarantined": source.quarantined,
        "duplicates_dropped": source.duplicates_dropped,
        "reasons": source.reasons,
        "balanced": source.balanced,
        "notes": source.notes,
    }
    print(json.dumps(out), flush=True)


def export_baseline(rev: str, work: Path) -> Path:
    """``src/`` of git revision ``rev`` (``git archive``): the folder to put first on ``PYTHONPATH``."""
    target = work / f"baseline-{rev}"
    if not (target / "src" / "jurymeter").exists():
        target.mkdir(parents=True, exist_ok=True)
        archive = subprocess.run(["git", "archive", rev, "src"], cwd=ROOT, capture_output=True, check=True)
        subprocess.run(["tar", "-x", "-C", str(target)], input=archive.stdout, check=True)
    return target / "src"


def run_child(args: list[str], log_dir: Path, name: str, pythonpath: Path | None = None) -> dict[str, Any]:
    """Run ``python bench/adapters.py --child ARGS`` in a fresh process and measure it (``_common.measure_child``).

    ``pythonpath``: a library's ``src/`` put first on ``PYTHONPATH`` (a baseline revision).
    """
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    if pythonpath is not None:
        env["PYTHONPATH"] = str(pythonpath)
    return measure_child([sys.executable, str(Path(__file__).resolve()), "--child", *args], log_dir, name, env=env)


def wait_for_quiet(max_seconds: float, threshold: float = 0.2, window: float = 2.0) -> float:
    """Wait until the machine's other work uses under ``threshold`` cores over ``window`` s; the seconds waited.

    The load of a shared machine can be invisible to this process (another
    container), so it is measured, not looked up.
    """
    t0 = time.monotonic()
    while True:
        b0 = busy_cpu_seconds()
        time.sleep(window)
        busy = (busy_cpu_seconds() - b0) / window
        waited = time.monotonic() - t0
        if busy < threshold or waited >= max_seconds:
            return waited
        print(f"  the machine is busy ({busy:.1f} cores); waiting ({waited:.0f} s so far)", flush=True)


# ---------------------------------------------------------------- checks


def compare_stores(plain: Path, adapted: Path) -> str | None:
    """Why the two stores' rows differ (``None``: the same rows, canonical and provenance columns)."""
    import polars as pl

    key = ["item_set", "item_id", "system_id", "judge_id", "generation", "replicate"]
    columns = [*key, "score", "timestamp", "response_length", "question_id", "turn", "judge_prompt"]

    def rows(path: Path) -> pl.DataFrame:
        from jurymeter.io.store import Store

        store = Store(str(path))
        frame = pl.concat(
            [store.read_parquet(f.path).with_columns(item_set=pl.lit(f.item_set)) for f in store.data_files("pointwise")],
            how="diagonal_relaxed",
        )
        return frame.select(*columns, pl.col("tstamp").cast(pl.Float64)).sort(key)

    a, b = rows(plain), rows(adapted)
    if a.height != b.height:
        return f"{a.height:,} rows in the plain store, {b.height:,} in the adapter's"
    for name in a.columns:
        if not a[name].equals(b[name]):
            diff = (a[name] != b[name]).fill_null(True).arg_true()
            first = int(diff[0]) if len(diff) else 0
            return f"column {name!r} differs ({len(diff)} rows; first: {a[name][first]!r} vs {b[name][first]!r})"
    return None


# ---------------------------------------------------------------- main


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "--child":
        child_main(sys.argv[2:])
        return
    if len(sys.argv) > 1 and sys.argv[1] == "--generate":
        mt, canonical, n, seed = sys.argv[2:]
        t0 = time.perf_counter()
        counts = write_logs(Path(mt), Path(canonical), int(n), int(seed))
        print(json.dumps({**counts, "gen_seconds": time.perf_counter() - t0}), flush=True)
        return
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--records", type=int, default=1_000_000, help="MT-Bench single lines to generate")
    parser.add_argument("--repeats", type=int, default=3, help="runs of each timed ingest (medians reported)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--workdir", type=Path, default=DEFAULT_WORKDIR, help="scratch folder")
    parser.add_argument("--keep", action="store_true", help="keep the generated files (reused by a later run)")
    parser.add_argument("--profile", action="store_true", help="only profile (b) under cProfile")
    parser.add_argument("--top", type=int, default=25, help="profile rows to show")
    parser.add_argument("--no-append", action="store_true", help="do not append to RESULTS.md")
    parser.add_argument(
        "--baseline-rev", default=None,
        help="also time (b) with src/ of this git revision (first on PYTHONPATH), interleaved: before/after",
    )
    parser.add_argument(
        "--wait-max", type=float, default=600.0,
        help="before each timed run, wait up to this many seconds for the machine to be quiet",
    )
    opts = parser.parse_args()

    n = opts.records
    work = opts.workdir.resolve() / f"n{n}-seed{opts.seed}"
    logs = work / "logs"
    mt_path, canonical_path = work / "gpt-4_single.jsonl", work / "canonical.jsonl"
    counts_path = work / "counts.json"
    started = dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M UTC")
    facts = machine_facts()
    if counts_path.exists() and mt_path.exists() and canonical_path.exists():
        counts = json.loads(counts_path.read_text())
        print(f"reusing {mt_path} and {canonical_path}", flush=True)
    else:
        shutil.rmtree(work, ignore_errors=True)
        work.mkdir(parents=True)
        print(f"writing {n:,} MT-Bench single lines and their canonical records ...", flush=True)
        # In a subprocess: the generator's memory must not stay in this process, whose RSS at
        # the fork a child's ru_maxrss would inherit.
        made = subprocess.run(
            [sys.executable, str(Path(__file__).resolve()), "--generate", str(mt_path), str(canonical_path),
             str(n), str(opts.seed)],
            check=True, capture_output=True, text=True,
        )
        counts = json.loads(made.stdout.splitlines()[-1])
        counts_path.write_text(json.dumps(counts))
    logs.mkdir(parents=True, exist_ok=True)
    sizes = {"mt": mt_path.stat().st_size, "canonical": canonical_path.stat().st_size}
    print(
        f"  MT-Bench {fmt_bytes(sizes['mt'])}, canonical {fmt_bytes(sizes['canonical'])} "
        f"({counts['gen_seconds']:.0f} s); {counts}",
        flush=True,
    )
    try:
        if opts.profile:
            profile(opts, n, work, logs, mt_path, sizes, started, facts)
        else:
            bench(opts, n, work, logs, mt_path, canonical_path, sizes, counts, started, facts)
    finally:
        for store in work.glob("store-*"):
            shutil.rmtree(store, ignore_errors=True)
        if not opts.keep:
            shutil.rmtree(work, ignore_errors=True)


def _median(runs: list[dict[str, Any]], name: str) -> float:
    return float(statistics.median(r[name] for r in runs))


def bench(
    opts: argparse.Namespace,
    n: int,
    work: Path,
    logs: Path,
    mt_path: Path,
    canonical_path: Path,
    sizes: dict[str, int],
    counts: dict[str, Any],
    started: str,
    facts: dict[str, str],
) -> None:
    runs: dict[str, list[dict[str, Any]]] = {
        "plain": [], "adapter": [], "floor": [], "baseline": [], "nohash": [], "polars": []
    }
    failures: list[str] = []
    waited = 0.0
    baseline = export_baseline(opts.baseline_rev, work) if opts.baseline_rev else None
    steps: list[tuple[str, Path, Path | None]] = [("plain", canonical_path, None), ("adapter", mt_path, None)]
    if baseline is not None:
        steps.append(("baseline", mt_path, baseline))
    for k in range(opts.repeats):
        for what, src, pythonpath in steps:
            store = work / f"store-{what}"
            shutil.rmtree(store, ignore_errors=True)
            waited += wait_for_quiet(opts.wait_max)
            print(f"run {k + 1}/{opts.repeats}: {what} ingest ...", flush=True)
            r = run_child([str(src), str(store)], logs, f"{what}-{k}", pythonpath)
            if pythonpath is not None and not Path(r["jurymeter"]).is_relative_to(pythonpath):
                failures.append(f"the baseline run imported {r['jurymeter']}, not {pythonpath}")
            runs[what].append(r)
            print(
                f"  {r['seconds']:.2f} s (CPU {r['cpu_seconds']:.2f} s, wall incl. start-up "
                f"{r['wall_seconds']:.2f} s), peak RSS {fmt_rss(r['peak_rss'])}, other CPU "
                f"{r['other_cpu_seconds']:.1f} s; read {r['read']:,} accepted {r['accepted']:,} "
                f"quarantined {r['quarantined']:,} dropped {r['duplicates_dropped']:,} {r['reasons']}",
                flush=True,
            )
        for what, args in (
            ("nohash", ["nohash", str(mt_path), str(work / "store-nohash")]),
            ("polars", ["polars", str(mt_path), str(work / "store-polars")]),
        ):
            shutil.rmtree(work / f"store-{what}", ignore_errors=True)
            waited += wait_for_quiet(opts.wait_max)
            print(f"run {k + 1}/{opts.repeats}: {what} ...", flush=True)
            r = run_child(args, logs, f"{what}-{k}")
            runs[what].append(r)
            print(f"  {r['seconds']:.2f} s (CPU {r['cpu_seconds']:.2f} s), peak RSS {fmt_rss(r['peak_rss'])}, "
                  f"other CPU {r['other_cpu_seconds']:.1f} s", flush=True)
        waited += wait_for_quiet(opts.wait_max)
        print(f"run {k + 1}/{opts.repeats}: the floor (hash and parse of the MT-Bench file alone) ...", flush=True)
        r = run_child(["floor", str(mt_path)], logs, f"floor-{k}")
        runs["floor"].append(r)
        print(f"  BLAKE3 {r['hash_seconds']:.2f} s (CPU {r['hash_cpu_seconds']:.2f} s), SHA-256 "
              f"{r['sha256_seconds']:.2f} s (CPU {r['sha256_cpu_seconds']:.2f} s), parse {r['parse_seconds']:.2f} s, "
              f"other CPU {r['other_cpu_seconds']:.1f} s", flush=True)
    plain, adapted = runs["plain"][-1], runs["adapter"][-1]
    expected_q = counts["failed"]
    if not (plain["read"] == plain["accepted"] == counts["canonical"] and plain["quarantined"] == 0):
        failures.append(f"plain ingest: read {plain['read']}, accepted {plain['accepted']}, expected {counts['canonical']}")
    if not (
        adapted["format"] == "mt-bench"
        and adapted["read"] == adapted["lines"] == counts["lines"]
        and adapted["balanced"]
        and adapted["quarantined"] == expected_q
        and adapted["accepted"] == counts["canonical"]
        and adapted["reasons"].get("judge_call_failed", 0) == counts["api_errors"]
    ):
        failures.append(f"adapter ingest reconciliation: {adapted}")
    print("comparing the two stores ...", flush=True)
    differs = compare_stores(work / "store-plain", work / "store-adapter")
    if differs is not None:
        failures.append(f"stores differ: {differs}")

    t_plain, t_adapter = _median(runs["plain"], "seconds"), _median(runs["adapter"], "seconds")
    c_plain, c_adapter = _median(runs["plain"], "cpu_seconds"), _median(runs["adapter"], "cpu_seconds")
    ratio, cpu_ratio = t_adapter / t_plain, c_adapter / c_plain
    rss_plain = max(r["peak_rss"] for r in runs["plain"])
    rss_adapter = max(r["peak_rss"] for r in runs["adapter"])
    table = [
        "| step | median (s) | runs (s) | CPU (s) | wall incl. start-up (s) | peak RSS | peak anon RSS "
        "| other procs' CPU (s) | notes |",
        "|---|---:|---|---:|---:|---:|---:|---:|---|",
    ]
    rows = [
        ("(a) `ingest` of the canonical JSON Lines (streaming fast path)", "plain", sizes["canonical"]),
        ("(b) `ingest` of the MT-Bench file, `--format auto`", "adapter", sizes["mt"]),
    ]
    if baseline is not None:
        rows.append((f"(b) with the library of `{opts.baseline_rev}` (before)", "baseline", sizes["mt"]))
    for label, what, src_size in rows:
        rs = runs[what]
        last = rs[-1]
        each = ", ".join(f"{r['seconds']:.2f}" for r in rs)
        note = (
            f"{fmt_bytes(src_size)}; lines {last['lines']:,}, read {last['read']:,} = accepted "
            f"{last['accepted']:,} + quarantined {last['quarantined']:,} + dropped {last['duplicates_dropped']:,}"
        )
        if last["reasons"]:
            note += " (" + ", ".join(f"{k} {v:,}" for k, v in last["reasons"].items()) + ")"
        if any(r["src_digest"] != facts["src_digest"] for r in rs):
            note += f"; ran on changed library code {last['src_digest']}"
        table.append(
            f"| {label} | {_median(rs, 'seconds'):.2f} | {each} "
            f"| {_median(rs, 'cpu_seconds'):.2f} | {_median(rs, 'wall_seconds'):.2f} "
            f"| {fmt_rss(max(r['peak_rss'] for r in rs))} | {fmt_rss(max(r['anon_rss'] for r in rs))} "
            f"| {_median(rs, 'other_cpu_seconds'):.1f} | {note} |"
        )
    floor = runs["floor"]
    t_hash, t_parse = _median(floor, "hash_seconds"), _median(floor, "parse_seconds")
    for label, key, note in (
        ("floor: `content_key` (BLAKE3 fed 8 MiB blocks, `max_threads=AUTO`) of the MT-Bench file alone "
         "(every ingest keys its source first)", "hash", "every core"),
        ("BLAKE3 of it memory-mapped (`update_mmap`; the peak RSS is this row's)", "blake3_mmap", "every core"),
        ("`content_sha256` of it (the key before; now only for a file of an old marker's size)", "sha256",
         "one core (hashlib releases the GIL)"),
        ("floor: `orjson.loads` of every line alone (`FileBytes.line_blocks`)", "parse",
         "one core (orjson holds the GIL)"),
    ):
        each = ", ".join(f"{r[key + '_seconds']:.2f}" for r in floor)
        cpu = f"{_median(floor, key + '_cpu_seconds'):.2f}" if all(key + "_cpu_seconds" in r for r in floor) else ""
        table.append(
            f"| {label} | {_median(floor, key + '_seconds'):.2f} | {each} | {cpu} | | "
            f"{fmt_rss(max(r['peak_rss'] for r in floor))} "
            f"| | {_median(floor, 'other_cpu_seconds'):.1f} | {note}; one child for the four rows |"
        )
    for label, what, note in (
        ("(b) without the hash: the same ingest, `content_key` replaced by a hash of the name and size",
         "nohash", "the adapter's reading, validation and staging (and the commit)"),
        ("(c) polars only: `scan_ndjson` of the needed fields, `str.extract` of `[[rating]]`, `sink_parquet`",
         "polars", "issue 25's baseline; no validation, replicates, quarantine, lengths or transaction"),
    ):
        rs = runs[what]
        each = ", ".join(f"{r['seconds']:.2f}" for r in rs)
        extra = f"; {rs[-1]['rows']:,} rows, {rs[-1]['rated']:,} with a rating" if what == "polars" else ""
        table.append(
            f"| {label} | {_median(rs, 'seconds'):.2f} | {each} | {_median(rs, 'cpu_seconds'):.2f} "
            f"| {_median(rs, 'wall_seconds'):.2f} | {fmt_rss(max(r['peak_rss'] for r in rs))} "
            f"| {fmt_rss(max(r['anon_rss'] for r in rs))} | {_median(rs, 'other_cpu_seconds'):.1f} | {note}{extra} |"
        )
    t_polars, c_polars = _median(runs["polars"], "seconds"), _median(runs["polars"], "cpu_seconds")
    t_nohash, c_nohash = _median(runs["nohash"], "seconds"), _median(runs["nohash"], "cpu_seconds")
    summary = [
        f"- (b) / (c), issue 25's goal <= {GOAL_RATIO}x: whole ingest **{t_adapter / t_polars:.2f}x** wall "
        f"({c_adapter / c_polars:.2f}x CPU); without the hash **{t_nohash / t_polars:.2f}x** wall "
        f"({c_nohash / c_polars:.2f}x CPU); the hash alone {_median(runs['floor'], 'hash_seconds'):.2f} s"
    ]
    if baseline is not None:
        t_before = _median(runs["baseline"], "seconds")
        summary.append(
            f"- (b) against the same step with `{opts.baseline_rev}`'s library, interleaved: {t_before:.2f} s -> "
            f"{t_adapter:.2f} s (**{t_before / t_adapter:.2f}x faster**), CPU {_median(runs['baseline'], 'cpu_seconds'):.2f} s "
            f"-> {c_adapter:.2f} s, peak RSS {fmt_rss(max(r['peak_rss'] for r in runs['baseline']))} -> "
            f"{fmt_rss(rss_adapter)}; (b) / (a) was {t_before / t_plain:.2f}x"
        )
    summary += [
        f"- (b) / (a): **{ratio:.2f}x** wall time (medians), {cpu_ratio:.2f}x CPU time "
        f"— goal <= {GOAL_RATIO}x: **{'met' if ratio <= GOAL_RATIO else 'NOT met'}**",
        f"- peak RSS: (a) {fmt_rss(rss_plain)}, (b) **{fmt_rss(rss_adapter)}** — goal: the plain ingest's "
        f"bound, under 3 GB (3e9 bytes): **{'met' if rss_adapter < GOAL_RSS_BYTES else 'NOT met'}**",
        f"- the goal is (b) <= {GOAL_RATIO} x {t_plain:.2f} s = {GOAL_RATIO * t_plain:.2f} s; hashing the MT-Bench file "
        f"alone (BLAKE3) takes {t_hash:.2f} s ({t_hash / t_plain:.2f}x (a)) and one orjson parse of its lines {t_parse:.2f} s: "
        f"on {facts['nproc']} cores no ingest that hashes it and parses it with orjson is under "
        f"{max(t_hash, (t_hash + t_parse) / int(facts['nproc'])):.2f} s "
        f"({max(t_hash, (t_hash + t_parse) / int(facts['nproc'])) / t_plain:.2f}x (a)); (b) is "
        f"{t_adapter / max(t_hash, (t_hash + t_parse) / int(facts['nproc'])):.2f}x that bound\n"
        f"- checks (reconciliation; both stores hold the same rows in every canonical and provenance column): "
        f"{'all passed' if not failures else 'FAILED: ' + '; '.join(failures)}",
    ]
    section = (
        f"## Adapter: {n:,} MT-Bench single judgments against plain JSON Lines ({started})\n\n"
        f"Command: `{command_line('adapters.py')}`\n\n"
        f"{facts_block(facts)}"
        f"- input (b): {counts['lines']:,} FastChat single lines, {fmt_bytes(sizes['mt'])} "
        f"({sizes['mt'] / counts['lines']:,.0f} bytes a line): {len(JUDGES)} judges, {counts['models']:,} models, "
        f"80 questions x 2 turns; {counts['failed']:,} scores -1 ({counts['api_errors']:,} of them `$ERROR$`); "
        f"{counts['reruns']:,} re-runs appended ({counts['repeated_keys']:,} keys with replicates)\n"
        f"- input (a): the same judgments in canonical form, as a converter would write them: the canonical "
        f"columns and the provenance columns (question_id, turn, judge_prompt, tstamp), no prompt or judgment "
        f"text, and only the {counts['canonical']:,} judgments with a score; {fmt_bytes(sizes['canonical'])}\n"
        f"- each step {opts.repeats} times, interleaved, each in a fresh subprocess into a fresh store; time "
        "measured inside the child around `ingest()` (imports excluded), CPU = all its threads and the worker "
        "processes it ran; warm page cache; "
        "`ValidationOptions()`; before each run the script waited until the machine's other work used under "
        f"0.2 cores (over 2 s; {waited:.0f} s waited in all)\n"
        "- goals (issue 12): (b) within 1.5x of (a), with the same peak-memory bound as plain ingest (3 GB)\n\n"
        + "\n".join(table)
        + "\n\n"
        + "\n".join(summary)
        + "\n"
    )
    print()
    print(section)
    if not opts.no_append:
        append_results(section)
        print("appended to bench/RESULTS.md")
    if failures:
        raise SystemExit("check failed: " + "; ".join(failures))


def profile(
    opts: argparse.Namespace,
    n: int,
    work: Path,
    logs: Path,
    mt_path: Path,
    sizes: dict[str, int],
    started: str,
    facts: dict[str, str],
) -> None:
    """(b) once under cProfile: the hotspots of the adapter path."""
    from ingest import _profile_tables

    store = work / "store-profile"
    shutil.rmtree(store, ignore_errors=True)
    prof = work / "adapter.prof"
    wait_for_quiet(opts.wait_max)
    print("profiling (b) ...", flush=True)
    r = run_child([str(mt_path), str(store), str(prof)], logs, "profile")
    print(f"  {r['seconds']:.1f} s under cProfile, peak RSS {fmt_rss(r['peak_rss'])}", flush=True)
    section = (
        f"## Profile: {n:,} MT-Bench single judgments through the adapter, under cProfile ({started})\n\n"
        f"Command: `{command_line('adapters.py')}`\n\n"
        f"{facts_block(facts)}"
        f"- input {fmt_bytes(sizes['mt'])}; `ingest()` with `--format auto`; library code {r['src_digest']}\n"
        f"- {r['seconds']:.1f} s under cProfile ({r['cpu_seconds']:.1f} CPU-s), peak RSS {fmt_rss(r['peak_rss'])}; "
        f"other processes used {r['other_cpu_seconds']:.0f} CPU-s meanwhile\n"
        "- cProfile in the main thread and in each thread ingest starts (the adapter runs in the prefetch "
        "thread); times are inflated by the profiler; polars' native threads are charged to the Python call "
        "that waits for them\n\n" + _profile_tables(prof, r["seconds"], opts.top)
    )
    print()
    print(section)
    if not opts.no_append:
        append_results(section)
        print("appended to bench/RESULTS.md")


if __name__ == "__main__":
    main()
