"""Finding source files: files, folders, globs, local or on S3, each checked first, its log format detected.

A source is a JSON Lines (plain, ``.gz``, ``.zst``), CSV (plain, ``.gz``) or
Parquet file, or a log adapter's ``.json`` / ``.eval``, on the local disk or on
S3. A file that cannot be read is found all the same, marked why
(:attr:`SourceFile.unreadable`) in bounded time. Reading the records:
:mod:`jurymeter.io.records` (JSON Lines), :mod:`jurymeter.io.tabular` (CSV,
Parquet) and :mod:`jurymeter.io.adapters.reading` (a log adapter's judgments).
"""

from __future__ import annotations

import dataclasses
import glob as globmod
import os
import stat
from typing import Any

from jurymeter.errors import SourceError
from jurymeter.io.source_files import (
    DOCUMENT_FORMATS,
    SourceFile,
    filesystem_for,
    format_of,
    head,
    short_message,
)


def discover_sources(
    specs: list[str], *, storage_options: dict[str, Any] | None = None, log_format: str = "auto"
) -> list[SourceFile]:
    """Expand files, folders and globs into an ordered, de-duplicated list of sources.

    ``log_format``: ``"auto"`` recognises each file's format from its content
    (:func:`jurymeter.io.adapters.detect`: MT-Bench, Arena-Hard-Auto,
    AlpacaEval, inspect_ai, else canonical records); ``"canonical"`` reads
    every file as canonical records; an adapter's name reads every file with it.

    A file that cannot be read (a dangling symbolic link, a FIFO, socket or
    device, no permission, a name that is not UTF-8, content detection cannot
    decode) is returned with :attr:`SourceFile.unreadable` set to the reason,
    in bounded time (a FIFO is never opened): the ingest reports it and goes on
    with the others.

    Raises
    ------
    SourceError
        When a spec matches nothing, names a single file of unsupported format,
        or a file cannot be read by the format asked for.
    """
    found = _discover(specs, storage_options)
    if log_format == "canonical":
        refused = [s for s in found.values() if s.format in DOCUMENT_FORMATS and s.unreadable is None]
        if refused:
            msg = (f"{refused[0].url}: a .{refused[0].format} file is read only by a log adapter "
                   "(--format auto, alpaca-eval or inspect), not as canonical records")
            raise SourceError(msg)
        return list(found.values())
    from jurymeter.io.adapters import adapter, detect

    out = []
    for source in found.values():
        if source.unreadable is not None:
            out.append(source)
            continue
        if log_format == "auto":
            try:
                chosen = detect(head(source), source.url)
            except _DETECT_FAILURES as exc:  # a file its decoder refuses: this file only
                out.append(dataclasses.replace(source, unreadable=f"cannot read: {short_message(exc)}"))
                continue
            if chosen is None and source.format in DOCUMENT_FORMATS:
                if len(found) == 1:
                    msg = (f"{source.url}: not a log format jurymeter reads (a .{source.format} file must be "
                           "an AlpacaEval annotations.json or an inspect_ai log)")
                    raise SourceError(msg)
                continue  # a folder may hold other .json files (configs, PROVENANCE.json)
        else:
            chosen = adapter(log_format)
            if not source.url.lower().endswith(chosen.suffixes):
                msg = f"{source.url}: the {chosen.name} format reads {', '.join(chosen.suffixes)} files"
                raise SourceError(msg)
        out.append(dataclasses.replace(source, adapter=chosen.name if chosen is not None else None))
    if not out:
        msg = f"source not found: {', '.join(specs)} holds no judgment log jurymeter reads"
        raise SourceError(msg)
    return out


def _detect_failures() -> tuple[type[BaseException], ...]:
    """What reading a file's head may raise for a file its decoder refuses (cut, not gzip, not zstd)."""
    kinds: list[type[BaseException]] = [OSError, EOFError, ValueError, SourceError]
    try:
        import zstandard
    except ImportError:  # pragma: no cover - fsspec's zstd codec needs it, so it is there when used
        pass
    else:
        kinds.append(zstandard.ZstdError)
    return tuple(kinds)


_DETECT_FAILURES = _detect_failures()

_KINDS = (
    (stat.S_ISFIFO, "a FIFO (named pipe)"),
    (stat.S_ISSOCK, "a socket"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
)


def _local_problem(path: str) -> tuple[str | None, int, bool]:
    """Why a local path cannot be read as a source (``None`` if it can), its size, and whether it is a folder.

    Only ``stat`` calls and, for a regular file, an open and close: never a
    read, and never an open of a FIFO (which would wait for a writer).
    """
    try:
        st = os.stat(path)
    except FileNotFoundError:
        target = os.readlink(path) if os.path.islink(path) else None
        if target is not None:
            return f"dangling symbolic link (its target {_escaped(target)} does not exist)", 0, False
        return "the file disappeared while the folder was listed", 0, False
    except OSError as exc:  # ELOOP (a symbolic link loop), EACCES on a folder on the way...
        return f"cannot read: {exc.strerror or short_message(exc)}", 0, False
    if stat.S_ISDIR(st.st_mode):
        return None, 0, True
    if not stat.S_ISREG(st.st_mode):
        kind = next((name for test, name in _KINDS if test(st.st_mode)), "not a regular file")
        return f"not a regular file: {kind}", 0, False
    try:
        os.close(os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC))
    except OSError as exc:  # EACCES: no permission
        return f"cannot read: {exc.strerror or short_message(exc)}", int(st.st_size), False
    return None, int(st.st_size), False


def _escaped(name: str) -> str:
    r"""A file name as printable text: bytes that are not UTF-8 as ``\xNN`` (never a surrogate)."""
    return os.fsencode(name).decode("utf-8", "backslashreplace") if _not_utf8(name) else name


def _not_utf8(name: str) -> bool:
    try:
        name.encode("utf-8")
    except UnicodeEncodeError:  # os.fsdecode's surrogate escapes of bytes that are not UTF-8
        return True
    return False


def _discover(specs: list[str], storage_options: dict[str, Any] | None) -> dict[str, SourceFile]:
    """Every supported file the specs name, by URL, in order; those that cannot be read marked why."""
    found: dict[str, SourceFile] = {}
    for spec in specs:
        if spec.startswith("s3://"):
            try:
                fs, path = filesystem_for(spec, storage_options)
                candidates, explicit = _candidates(fs, path, spec)
            except SourceError:
                raise
            except Exception as exc:  # s3fs/botocore raise many types for one cause
                msg = f"cannot read {spec}: {short_message(exc)}"
                raise SourceError(msg) from exc
        else:
            fs, path = filesystem_for(spec, storage_options)
            candidates, explicit = _candidates(fs, path, spec)
        scheme = "s3://" if spec.startswith("s3://") else ""
        matched = 0
        for candidate in candidates:
            kind = format_of(candidate)
            if kind is None:
                if explicit:
                    msg = (
                        f"unsupported source format: {_escaped(spec)} (expected .jsonl, .ndjson, "
                        ".jsonl.gz, .jsonl.zst, .csv, .csv.gz, .parquet, or a log adapter's "
                        ".json / .eval)"
                    )
                    raise SourceError(msg)
                continue
            problem: str | None
            if scheme:
                try:
                    if fs.isdir(candidate):
                        continue
                    problem, size = None, int(fs.size(candidate))
                except Exception as exc:  # s3fs/botocore raise many types for one cause
                    problem, size = f"cannot read: {short_message(exc)}", 0
            else:
                problem, size, is_dir = _local_problem(candidate)
                if is_dir:
                    continue
            if _not_utf8(candidate):
                # Its name could be neither stored (the markers are JSON) nor printed as it is.
                problem = "file name is not UTF-8 (rename it)"
            url = scheme + _escaped(candidate)
            if url not in found:
                found[url] = SourceFile(
                    url=url,
                    path=candidate,
                    fs=fs,
                    format=kind[0],
                    compression=kind[1],
                    size=size,
                    unreadable=problem,
                )
            matched += 1
        if matched == 0:
            msg = f"source not found: {_escaped(spec)} matches no .jsonl/.csv/.parquet/.json/.eval file"
            raise SourceError(msg)
    return found


def _candidates(fs: Any, path: str, spec: str) -> tuple[list[str], bool]:
    """Paths a spec names, and whether it named one file explicitly."""
    if globmod.has_magic(path):
        return sorted(fs.glob(path)), False
    if fs.isdir(path):
        return sorted(fs.find(path)), False
    if fs.exists(path):
        return [path], True
    if not spec.startswith("s3://") and os.path.lexists(path):
        return [path], True  # a dangling symbolic link: discovery says so, it is not "not found"
    msg = f"source not found: {_escaped(spec)}"
    raise SourceError(msg)

