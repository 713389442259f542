"""A single-answer MT-Bench file as column blocks: one parse (in ranges, by worker processes, for a large file).

:meth:`jurymeter.io.adapters.mt_bench.MtBenchAdapter.frames`: exactly what the
judgments give (``_singles`` of :mod:`jurymeter.io.adapters.mt_bench`), in the same
batches, with the lines read once (see :func:`single_frames`).
"""

from __future__ import annotations

import itertools
import os
import tempfile
from collections.abc import Callable, Iterator
from typing import Any, Final

import numpy as np
import orjson
import polars as pl

from jurymeter.io.adapters.base import (
    AdaptedFrame,
    AdapterNotes,
    AdapterOptions,
    SourceBytes,
    Unreadable,
    not_a_record,
)
from jurymeter.io.adapters.mt_bench_lines import (
    DEFAULT_SCALE,
    ITEM_SET,
    note_file,
    other_kind,
    read_single,
    single_length,
    single_reject,
)
from jurymeter.io.source_files import BOM, LineSplitter

# ---------------------------------------------------------------- single-answer files as columns

# A judgment's replicate key and value, as the Judgment path's pass one has them: the 64-bit hash
# of (item_id, model, judge model), tstamp, score, and the exact rest of an integer score that a
# float does not hold (Python compares int and float exactly: (t, 2**53 + 1) > (t, 2.0**53)).
_H: Final = "__h"
_T: Final = "__t"
_S: Final = "__s"
_R: Final = "__r"
_VALUE: Final = [_H, _T, _S, _R]
_LINE: Final = "__line"
_RAW: Final = "__raw"
_EXACT: Final = 2**53  # integers up to this size are exact as floats
_PROVENANCE: Final = ("question_id", "turn", "judge_prompt", "tstamp")
_REJECT_REASON: Final = "_reject_reason"  # io.adapters.reading.REJECT_REASON
_REJECT_MESSAGE: Final = "_reject_message"  # io.adapters.reading.REJECT_MESSAGE


def single_frames(
    source: SourceBytes, options: AdapterOptions, notes: AdapterNotes, batch_judgments: int
) -> Iterator[AdaptedFrame]:
    """A single-answer file as column blocks: exactly what :func:`_singles` gives, in the same batches.

    One parse of the file instead of two: the lines are read once (orjson, as
    :func:`_singles` does, with the same checks, rejects and messages), each
    batch's columns go to a temporary Arrow file, and every judgment's key hash
    stays in memory (8 bytes a line). When the file is read, the values of the
    keys on more than one line are read back from those files and ranked
    (:data:`_VALUE` sorted as Python sorts ``(tstamp, score)``), and the
    batches are read back with their replicates. Memory holds one batch and the
    hashes, never the file; the temporary files hold the batches' columns
    without the prompt or judgment text (about 350 bytes a judgment) and are
    removed batch by batch.

    A plain local file of at least :data:`PARALLEL_BYTES` on a machine with
    more than one core is parsed in ranges of lines, by this thread and by
    worker processes (orjson holds the GIL), see :func:`_parallel_pieces`; the
    pieces are then cut into the same batches.
    """
    item_set = options.item_set or ITEM_SET
    low, high = options.scale or DEFAULT_SCALE
    with tempfile.TemporaryDirectory(prefix="jurymeter-mt-bench-") as spill:
        workers = _parallel_workers(source)
        if workers:
            pieces = _parallel_pieces(source, workers, low, high, spill, batch_judgments)
        else:
            pieces = [(0, _scan(source.line_blocks(), 1, low, high, batch_judgments, spill, "", source.check))]
        hashes = [h for _, scanned in pieces for _, _, h in scanned if h is not None]
        ranks = _ranks(hashes, [path for _, scanned in pieces for path, _, _ in scanned if path is not None])
        hashes.clear()
        note_file(notes, "single", options, ranks[_H].n_unique() if ranks.height else 0)
        if not workers:  # the batches as they were spilled
            for path, bad, _ in pieces[0][1]:
                unread = [Unreadable(*row) for row in _read_back(bad).iter_rows()] if bad is not None else []
                if path is None:
                    yield AdaptedFrame(pl.DataFrame(), np.zeros(0, dtype=np.int64), lambda rows: [], unread)
                else:
                    yield _adapted(source, _read_back(path), ranks, item_set, unread)
            return
        for frame, unread in _recut(pieces, batch_judgments):
            if not frame.height:
                yield AdaptedFrame(pl.DataFrame(), np.zeros(0, dtype=np.int64), lambda rows: [], unread)
            else:
                yield _adapted(source, frame, ranks, item_set, unread)


# Spilled pieces of a scan: (judgments' Arrow file, unreadable lines' Arrow file, the judgments' key hashes).
_Piece = tuple[str | None, str | None, np.ndarray | None]

PARALLEL_BYTES = 256 * 1024 * 1024  # a smaller file is parsed by one thread
RANGE_BYTES = 32 * 1024 * 1024  # the ranges of lines the parallel parse hands out
MAX_WORKERS = 3  # worker processes at most (beside the reading thread)
_READ_BYTES: Final = 8 * 1024 * 1024  # io.adapters.reading.READ_BYTES


def _scan(
    blocks: Iterator[tuple[int, list[bytes]]],
    bom_line: int,
    low: float,
    high: float,
    batch_judgments: int,
    spill: str,
    prefix: str,
    check: Callable[[], None] | None = None,
) -> list[_Piece]:
    """Parse lines as :func:`_singles` does and spill them every ``batch_judgments`` judgments and unreadable lines.

    ``blocks`` as ``SourceBytes.line_blocks`` gives them (line numbers as
    counted from the first line of ``blocks``); a byte-order mark is taken off
    line ``bom_line`` only (0: none). ``check`` runs before each block.
    """
    # Over 80 lines: one loop over every line of the file with its columns as local lists; split, it pays calls per line.
    loads, dumps, decode_error = orjson.loads, orjson.dumps, orjson.JSONDecodeError
    lines: list[int] = []
    items: list[str] = []
    qids: list[str] = []
    turns: list[str] = []
    models: list[str] = []
    judges: list[str] = []
    prompts: list[str] = []
    scores: list[float] = []
    stamps: list[float] = []
    stamp_texts: list[str] = []
    lengths: list[int | None] = []
    rejects: dict[int, tuple[str, str]] = {}
    raws: dict[int, str] = {}
    rests: dict[int, int] = {}
    unreadable: list[Unreadable] = []
    written: list[_Piece] = []  # each batch's judgments, unreadable lines and key hashes

    def flush() -> None:
        path = bad = hashes = None
        name = f"{prefix}{len(written):06d}"
        if lines:
            frame = _block_frame(
                lines, items, qids, turns, models, judges, prompts, scores, stamps,
                stamp_texts, lengths, rejects, raws, rests,
            )
            hashes = frame[_H].to_numpy()
            path = os.path.join(spill, f"{name}.arrow")
            frame.write_ipc(path)
        if unreadable:
            bad = os.path.join(spill, f"{name}-unreadable.arrow")
            pl.DataFrame(
                [(u.line, u.raw, u.message, u.reason) for u in unreadable],
                schema={"line": pl.Int64, "raw": pl.String, "message": pl.String, "reason": pl.String},
                orient="row",
            ).write_ipc(bad)
        written.append((path, bad, hashes))
        for column in (lines, items, qids, turns, models, judges, prompts, scores, stamps, stamp_texts, lengths):
            column.clear()
        for sparse in (rejects, raws, rests):
            sparse.clear()
        unreadable.clear()

    for first, block in blocks:
        if check is not None:
            check()
        number = first - 1
        for raw in block:  # the loop of _singles, writing columns
            number += 1
            if len(lines) + len(unreadable) >= batch_judgments:
                flush()
            if number == bom_line and raw.startswith(BOM):
                raw = raw[len(BOM) :]
            if not raw or raw.isspace():
                continue
            try:
                obj = loads(raw)
            except decode_error as exc:
                unreadable.append(not_a_record(number, raw, f"not a JSON object: {exc}"))
                continue
            if type(obj) is not dict:
                message = f"not a JSON object: a JSON {type(obj).__name__}"
                unreadable.append(Unreadable(number, raw.decode("utf-8", "replace"), message))
                continue
            if "model_1" in obj or "model_2" in obj or "model" not in obj:
                unreadable.append(Unreadable(number, raw.decode("utf-8", "replace"), other_kind(obj, "single")))
                continue
            single = read_single(obj)
            if isinstance(single, str):
                unreadable.append(Unreadable(number, raw.decode("utf-8", "replace"), single))
                continue
            item_id, qid, turn, judge_id, prompt, tstamp, model, score = single
            row = len(lines)
            reject = single_reject(obj, score, low, high)
            if reject is not None:
                rejects[row] = reject
                raws[row] = raw.decode("utf-8", "replace")
            elif not model or not judge_id:  # validation will reject it: keep its text at hand
                raws[row] = raw.decode("utf-8", "replace")
            if type(score) is int and not -_EXACT <= score <= _EXACT:
                rests[row] = score - int(float(score))
            written_stamp = obj["tstamp"]
            lines.append(number)
            items.append(item_id)
            qids.append(qid if type(qid) is str else str(qid))
            turns.append(str(turn))
            models.append(model)
            judges.append(judge_id)
            prompts.append(prompt)
            scores.append(float(score))
            stamps.append(tstamp)
            stamp_texts.append(dumps(written_stamp).decode() if type(written_stamp) is float else str(written_stamp))
            lengths.append(single_length(obj.get("user_prompt")))
    if lines or unreadable:
        flush()
    return written


def _parallel_workers(source: SourceBytes) -> int:
    """Worker processes to parse ``source`` beside this thread (0: parse it here alone)."""
    import multiprocessing

    path = source.local_file()
    if path is None or multiprocessing.current_process().daemon:  # a daemonic process has no children
        return 0
    try:
        if os.path.getsize(path) < PARALLEL_BYTES:
            return 0
    except OSError:
        return 0
    return max(0, min(len(os.sched_getaffinity(0)) - 1, MAX_WORKERS))


def _ranges(path: str, size: int) -> list[tuple[int, int]]:
    """Byte ranges of about :data:`RANGE_BYTES` that cover the file, each ending after a newline (or at its end)."""
    bounds = [0]
    with open(path, "rb") as handle:
        while bounds[-1] + RANGE_BYTES < size:
            handle.seek(bounds[-1] + RANGE_BYTES - 1)
            while True:
                chunk = handle.read(64 * 1024)
                if not chunk:
                    break
                newline = chunk.find(b"\n")
                if newline >= 0:
                    break
            if not chunk:
                break
            end = handle.tell() - len(chunk) + newline + 1
            if end >= size:
                break
            bounds.append(end)
    bounds.append(size)
    return list(itertools.pairwise(bounds))


def _range_blocks(path: str, start: int, end: int) -> Iterator[tuple[int, list[bytes]]]:
    """The lines of ``path``'s bytes ``start`` to ``end`` as ``FileBytes.line_blocks`` splits them, numbered from 1."""
    splitter = LineSplitter()
    with open(path, "rb") as handle:
        handle.seek(start)
        yield from splitter.split(_range_reads(handle, end - start))
    rest = splitter.unfinished()
    if rest:
        yield splitter.next_line, [rest.rstrip(b"\r\n")]


def _range_reads(handle: Any, left: int) -> Iterator[bytes]:
    """The next ``left`` bytes of ``handle`` in blocks of at most :data:`_READ_BYTES`."""
    while left > 0:
        block = handle.read(min(_READ_BYTES, left))
        if not block:
            return
        left -= len(block)
        yield block


def _scan_range(
    path: str, start: int, end: int, low: float, high: float, batch_judgments: int, spill: str, unit: int
) -> tuple[int, list[_Piece]]:
    """One range of lines parsed and spilled (in any process): its count of lines and its pieces."""
    count = 0

    def counted() -> Iterator[tuple[int, list[bytes]]]:
        nonlocal count
        for first, block in _range_blocks(path, start, end):
            count = first - 1 + len(block)
            yield first, block

    pieces = _scan(counted(), 1 if start == 0 else 0, low, high, batch_judgments, spill, f"r{unit:05d}-")
    return count, pieces


def _parallel_pieces(
    source: SourceBytes, workers: int, low: float, high: float, spill: str, batch_judgments: int
) -> list[tuple[int, list[_Piece]]]:
    """Every range's pieces with the number of lines before the range, in file order.

    This thread parses a range whenever the worker processes have two queued
    each (the processes start in about a second); ``source.check`` runs between
    ranges (a cancelled read stops there, once the ranges being parsed are done).
    """
    import multiprocessing
    from concurrent.futures import Future, ProcessPoolExecutor

    path = source.local_file()
    assert path is not None
    ranges = _ranges(path, os.path.getsize(path))
    done: dict[int, tuple[int, list[_Piece]]] = {}
    queued: dict[int, Future[tuple[int, list[_Piece]]]] = {}
    pool = ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("spawn"))
    try:
        unit = 0
        while unit < len(ranges) or queued:
            source.check()
            for k in [k for k, future in queued.items() if future.done()]:
                done[k] = queued.pop(k).result()
            while unit < len(ranges) and len(queued) < 2 * workers:  # a range ready for each when it is done
                start, end = ranges[unit]
                queued[unit] = pool.submit(_scan_range, path, start, end, low, high, batch_judgments, spill, unit)
                unit += 1
            if unit < len(ranges):
                start, end = ranges[unit]
                done[unit] = _scan_range(path, start, end, low, high, batch_judgments, spill, unit)
                unit += 1
            elif queued:
                k = min(queued)
                done[k] = queued.pop(k).result()
    finally:
        pool.shutdown(wait=True, cancel_futures=True)
    out: list[tuple[int, list[_Piece]]] = []
    before = 0
    for k in range(len(ranges)):
        count, pieces = done[k]
        out.append((before, pieces))
        before += count
    return out


def _recut(
    pieces: list[tuple[int, list[_Piece]]], batch_judgments: int
) -> Iterator[tuple[pl.DataFrame, list[Unreadable]]]:
    """The spilled ranges read back in file order and cut into batches of ``batch_judgments`` lines as one scan cuts.

    A batch holds the next ``batch_judgments`` judgments and unreadable lines
    in line order; its reject columns are there when one of its judgments is
    rejected (as :func:`_block_frame` writes them).
    """
    frames: list[pl.DataFrame] = []
    unread: list[Unreadable] = []
    held = 0

    def cut(last: bool) -> Iterator[tuple[pl.DataFrame, list[Unreadable]]]:
        nonlocal frames, unread, held
        while held >= batch_judgments or (last and held):
            frame = pl.concat(frames, how="diagonal") if len(frames) > 1 else frames[0] if frames else pl.DataFrame()
            at_f = frame[_LINE].to_numpy() if frame.height else np.zeros(0, dtype=np.int64)
            at_u = np.asarray([u.line for u in unread], dtype=np.int64)
            take = min(held, batch_judgments)
            end = np.sort(np.concatenate([at_f, at_u]))[take - 1]
            kf, ku = int(np.searchsorted(at_f, end, "right")), int(np.searchsorted(at_u, end, "right"))
            batch = frame.slice(0, kf)
            if _REJECT_REASON in batch.columns and batch[_REJECT_REASON].null_count() == batch.height:
                batch = batch.drop(_REJECT_REASON, _REJECT_MESSAGE)
            yield batch, unread[:ku]
            frames = [frame.slice(kf)] if kf < frame.height else []
            unread = unread[ku:]
            held -= kf + ku

    for before, scanned in pieces:
        for path, bad, _ in scanned:
            if path is not None:
                frame = _read_back(path)
                frames.append(frame.with_columns(pl.col(_LINE) + before) if before else frame)
                held += frame.height
            if bad is not None:
                back = _read_back(bad)
                unread.extend(Unreadable(line + before, raw, message, reason)
                              for line, raw, message, reason in back.iter_rows())
                held += back.height
            yield from cut(last=False)
    yield from cut(last=True)


def _read_back(path: str) -> pl.DataFrame:
    """A spilled frame, read whole (not mapped) and its file removed."""
    with open(path, "rb") as handle:
        frame = pl.read_ipc(handle.read())
    os.remove(path)
    return frame


def _block_frame(
    lines: list[int],
    items: list[str],
    qids: list[str],
    turns: list[str],
    models: list[str],
    judges: list[str],
    prompts: list[str],
    scores: list[float],
    stamps: list[float],
    stamp_texts: list[str],
    lengths: list[int | None],
    rejects: dict[int, tuple[str, str]],
    raws: dict[int, str],
    rests: dict[int, int],
) -> pl.DataFrame:
    """One batch's judgments: typed canonical columns, provenance text, rejects, raw text, key and value."""
    n = len(lines)
    t = np.asarray(stamps, dtype=np.float64)
    # iso_time(tstamp), as microseconds: datetime.fromtimestamp's rounding (half to even).
    secs = np.trunc(t)
    micros = np.round((t - secs) * 1e6)
    below, above = micros < 0, micros >= 1_000_000
    secs = np.where(below, secs - 1, np.where(above, secs + 1, secs))
    micros = np.where(below, micros + 1_000_000, np.where(above, micros - 1_000_000, micros))
    timestamp = secs.astype(np.int64) * 1_000_000 + micros.astype(np.int64)
    rest = np.zeros(n, dtype=np.int64)
    for row, value in rests.items():
        rest[row] = value
    columns: dict[str, Any] = {
        "item_id": pl.Series(items, dtype=pl.String),
        "system_id": pl.Series(models, dtype=pl.String),
        "judge_id": pl.Series(judges, dtype=pl.String),
        "score": pl.Series(scores, dtype=pl.Float64),
        "timestamp": pl.Series(timestamp).cast(pl.Datetime("us", "UTC")),
        "response_length": pl.Series(lengths, dtype=pl.Int64),
        "question_id": pl.Series(qids, dtype=pl.String),
        "turn": pl.Series(turns, dtype=pl.String),
        "judge_prompt": pl.Series(prompts, dtype=pl.String),
        "tstamp": pl.Series(stamp_texts, dtype=pl.String),
    }
    if rejects:
        reasons: list[str | None] = [None] * n
        messages: list[str | None] = [None] * n
        for row, (reason, message) in rejects.items():
            reasons[row], messages[row] = reason, message
        columns[_REJECT_REASON] = pl.Series(reasons, dtype=pl.String)
        columns[_REJECT_MESSAGE] = pl.Series(messages, dtype=pl.String)
    texts: list[str | None] = [None] * n
    for row, text in raws.items():
        texts[row] = text
    columns[_LINE] = pl.Series(lines, dtype=pl.Int64)
    columns[_RAW] = pl.Series(texts, dtype=pl.String)
    # +0.0: -0.0 and 0.0 are one value, as in Python.
    columns[_T] = pl.Series(t + 0.0)
    columns[_S] = pl.Series(np.asarray(scores, dtype=np.float64) + 0.0)
    columns[_R] = pl.Series(rest)
    frame = pl.DataFrame(columns)
    return frame.with_columns(pl.struct("item_id", "system_id", "judge_id").hash(seed=0).alias(_H))


def _ranks(hashes: list[np.ndarray], paths: list[str]) -> pl.DataFrame:
    """Replicate of every value of a key with more than one value: its rank in the key's sorted values.

    The hashes of keys on more than one line are found by sorting all the
    hashes (numpy, 8 bytes a judgment); only those keys' values are read back
    from the batches' files.
    """
    everything = np.sort(np.concatenate(hashes)) if hashes else np.zeros(0, dtype=np.uint64)
    again = np.unique(everything[1:][everything[1:] == everything[:-1]])
    del everything
    schema = {_H: pl.UInt64, _T: pl.Float64, _S: pl.Float64, _R: pl.Int64}
    if not len(again):
        return pl.DataFrame(schema={**schema, "replicate": pl.Int64})
    wanted = pl.DataFrame({_H: pl.Series(again, dtype=pl.UInt64)})
    values = pl.concat(
        [pl.read_ipc(path, columns=_VALUE).join(wanted, on=_H, how="semi") for path in paths]
    ).unique()
    repeated = values.filter(pl.len().over(_H) > 1).sort(_VALUE)
    return repeated.with_columns(pl.int_range(pl.len(), dtype=pl.Int64).over(_H).alias("replicate"))


def _adapted(
    source: SourceBytes, frame: pl.DataFrame, ranks: pl.DataFrame, item_set: str, bad: list[Unreadable]
) -> AdaptedFrame:
    """A batch read back: the columns :func:`_singles`'s judgments become, in their order, typed."""
    if ranks.height:
        frame = frame.join(ranks, on=_VALUE, how="left", maintain_order="left")
        replicate = pl.col("replicate").fill_null(0)
    else:
        replicate = pl.lit(0, dtype=pl.Int64)
    rejected = [_REJECT_REASON, _REJECT_MESSAGE] if _REJECT_REASON in frame.columns else []
    out = frame.select(
        pl.lit(item_set, dtype=pl.String).alias("item_set"),
        "item_id",
        "system_id",
        "judge_id",
        "score",
        pl.lit(0, dtype=pl.Int64).alias("generation"),
        replicate.alias("replicate"),
        "timestamp",
        "response_length",
        *_PROVENANCE,
        *rejected,
    )
    lines = frame[_LINE].to_numpy()
    texts = frame[_RAW]

    def raw(rows: np.ndarray) -> list[str]:
        kept: list[str | None] = texts.gather(rows).to_list()
        wanted = {int(lines[k]) for k, text in zip(rows, kept, strict=True) if text is None}
        found = _reread(source, wanted) if wanted else {}
        return [found[int(lines[k])] if text is None else text for k, text in zip(rows, kept, strict=True)]

    return AdaptedFrame(out, lines, raw, bad)


def _reread(source: SourceBytes, wanted: set[int]) -> dict[int, str]:
    """The text of some lines, read again (only a judgment validation rejects that the adapter did not)."""
    found: dict[int, str] = {}
    for number, raw in source.lines():
        if number in wanted:
            if number == 1 and raw.startswith(BOM):
                raw = raw[len(BOM) :]
            found[number] = raw.decode("utf-8", "replace")
            if len(found) == len(wanted):
                break
    return found

