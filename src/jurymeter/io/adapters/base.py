"""The log-adapter seam: how a judgment log in a tool's own format becomes canonical records.

An adapter reads one source file (MT-Bench, Arena-Hard-Auto, AlpacaEval,
inspect_ai, ...) and yields :class:`Judgment` values: one per judgment, the
unit of reconciliation (an MT-Bench pair line or an Arena-Hard record holds two
judgments, one per presentation order). A judgment carries canonical columns
(``docs/schema.md``) and the source's own provenance columns (kept as text), or
a rejection: the reason code and message it is quarantined under (a parse
failure, a failed judge call, an unscored grade). Everything after the adapter
(validation, quarantine, duplicates, reconciliation, the atomic commit) is the
one ingest path every source takes: ``jurymeter.io.ingest``.

A fifth format is one module under ``io/adapters/`` with an :class:`Adapter`
subclass, and one line in :data:`jurymeter.io.adapters.ADAPTERS`.

An adapter may also read a source as columns (:meth:`Adapter.frames`, giving
:class:`AdaptedFrame` blocks): the vectorized path for a large line-based log,
which the ingest prefers when the adapter offers it for that source. It must
give exactly what its judgments would: the same rows, values, rejects and
messages (``tests/test_adapters_frames.py`` holds the MT-Bench one to that).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any, ClassVar, Literal

import numpy as np
import polars as pl

JudgmentProtocol = Literal["pointwise", "pairwise"]

# Reason codes an adapter may give a rejected judgment (also in io.schema.Reason).
PARSE_FAILURE = "parse_failure"  # the judge replied, but no verdict or rating could be read from it
JUDGE_CALL_FAILED = "judge_call_failed"  # the call to the judge failed (an API error, `$ERROR$`)
UNSCORED = "unscored"  # the grader gave no grade it was offered (inspect's NaN)
UNSUPPORTED_RECORD = "unsupported_record"  # a record of the format this adapter does not read
MALFORMED = "malformed_line"  # not a record of the format at all (a truncated line, a missing field)
TRUNCATED = "truncated"  # the element or member a document or archive ends inside of
INVALID_TEXT = "invalid_text"  # a field holds invalid UTF-8 or an unpaired surrogate
ADAPTER_REASONS = (PARSE_FAILURE, JUDGE_CALL_FAILED, UNSCORED, UNSUPPORTED_RECORD)


@dataclass(frozen=True, slots=True)
class AdapterOptions:
    """What a user may tell an adapter (``jurymeter ingest`` flags, the run's configuration).

    ``item_set``: overrides the item set the adapter names; ``baseline``: the
    Arena-Hard v0.1 baseline (not in its records); ``scale``: the declared
    score range (MT-Bench single defaults to 1-10).
    """

    item_set: str | None = None
    baseline: str | None = None
    scale: tuple[float, float] | None = None


@dataclass(frozen=True, slots=True)
class Judgment:
    """One judgment an adapter read, or why it cannot be stored.

    ``line`` is the 1-based line (JSON Lines), element (a JSON array) or sample
    (an inspect log) it came from; ``raw`` the text quarantine keeps for it.
    ``fields`` holds canonical columns (``item_set``, ``item_id``, ``judge_id``,
    ``system_id`` and ``score`` for pointwise, ``system_a``/``system_b``,
    ``winner``/``preference`` for pairwise, ``generation``, ``replicate``,
    ``timestamp``, ``response_length``/``length_a``/``length_b``) and
    provenance columns (any other name; stored as text). ``reject`` is
    ``(reason, message)`` for a judgment that goes to quarantine.
    """

    line: int
    protocol: JudgmentProtocol
    fields: dict[str, Any]
    raw: str
    reject: tuple[str, str] | None = None


@dataclass(frozen=True, slots=True)
class Unreadable:
    """A line or element that is not a record of the format at all: quarantined as ``reason``.

    ``reason`` is ``malformed_line``, or ``truncated`` for the element or
    member a document or archive ends inside of.
    """

    line: int
    raw: str
    message: str
    reason: str = "malformed_line"


def not_a_record(line: int, raw: bytes, message: str) -> Unreadable:
    r"""A line its adapter could not parse: ``invalid_text`` when its bytes are not text, else ``malformed_line``.

    orjson refuses invalid UTF-8 and unpaired surrogate escapes as it refuses
    broken JSON; the quarantine must tell the two apart (issue 22: text that is
    not text is a reason of its own, never replaced or merged), and its raw text
    keeps every undecodable byte as ``\xNN``, so two such lines stay distinct.
    """
    from jurymeter.io.text import escaped, has_unpaired_escape

    try:
        raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        return Unreadable(line, escaped(raw), f"the line is not valid text (invalid UTF-8 bytes at byte {exc.start})",
                          INVALID_TEXT)
    if has_unpaired_escape(raw):
        return Unreadable(line, escaped(raw), "the line is not valid text (an unpaired surrogate escape)", INVALID_TEXT)
    return Unreadable(line, escaped(raw), message)


@dataclass(frozen=True, slots=True)
class AdaptedFrame:
    """A block of judgments as columns: what :meth:`Adapter.frames` gives instead of :class:`Judgment` values.

    ``frame`` has one row per judgment, in file order: the canonical columns
    either as text (as :class:`Judgment` fields become) or already typed as the
    schema types them (``pl.String`` ids, ``pl.Float64`` scores, ``pl.Int64``
    indices and lengths, ``pl.Datetime("us", "UTC")`` timestamps), the
    provenance columns as text, and, where any judgment of the block is
    rejected, the reject columns of :mod:`jurymeter.io.adapters.reading`
    (null for an accepted judgment). ``lines[k]`` is the line of row ``k``;
    ``raw(rows)`` the text quarantine keeps for those rows; ``unreadable`` the
    block's lines that are no record of the format. A block holds what one
    batch of judgments would hold (``batch_judgments`` judgments and
    unreadable lines together, in file order), so the ingest sees the same
    batches either way.
    """

    frame: pl.DataFrame
    lines: np.ndarray
    raw: Callable[[np.ndarray], list[str]]
    unreadable: list[Unreadable]


@dataclass(slots=True)
class AdapterNotes:
    """What an adapter says about one source, for the ingest report (e.g. the baseline it assumed)."""

    format: str
    notes: list[str] = field(default_factory=list)


class SourceBytes(ABC):
    """A source file as an adapter reads it: line by line (bounded memory) or whole (a JSON document, a ZIP)."""

    path: str

    @abstractmethod
    def lines(self) -> Iterator[tuple[int, bytes]]:
        """``(line number from 1, line without its newline)`` for every line, blank ones included."""

    @abstractmethod
    def read(self) -> bytes:
        """The whole file (decompressed)."""

    def line_blocks(self) -> Iterator[tuple[int, list[bytes]]]:
        """The lines of :meth:`lines` in blocks: ``(number of the block's first line, its lines)``.

        A file reader overrides it to split whole blocks of bytes at once;
        this default groups :meth:`lines`.
        """
        block: list[bytes] = []
        first = 1
        for number, line in self.lines():
            if not block:
                first = number
            block.append(line)
            if len(block) == 4096:
                yield first, block
                block = []
        if block:
            yield first, block

    def local_file(self) -> str | None:
        """The path of the source as a plain local file (uncompressed), which other processes may open; else ``None``."""
        return None

    def check(self) -> None:
        """Raise if the reading was cancelled (a reader that can be cancelled overrides it)."""
        return None


class Adapter(ABC):
    """A judgment-log format: how to recognise it, and how to read it into judgments."""

    name: ClassVar[str]  # the ``--format`` value, e.g. "mt-bench"
    suffixes: ClassVar[tuple[str, ...]]  # file name endings it reads, e.g. (".jsonl",)

    @abstractmethod
    def detect(self, head: bytes, path: str) -> bool:
        """Whether a file whose first bytes are ``head`` (up to 64 KiB) is in this format."""

    @abstractmethod
    def judgments(
        self, source: SourceBytes, options: AdapterOptions, notes: AdapterNotes
    ) -> Iterator[Judgment | Unreadable]:
        """Every judgment of the source, in file order.

        A line-based format reads ``source.lines()`` (memory bounded by a line);
        a document format (a JSON array, a ZIP) reads ``source.read()``.
        ``source.path`` names the file (some formats carry names only in it). An
        adapter never raises on bad content: a record it cannot read is an
        :class:`Unreadable`, a judgment that cannot be stored carries a
        ``reject``; ``notes.notes`` gets what the report should say (a
        baseline it assumed, say).
        """

    def frames(
        self,
        source: SourceBytes,
        options: AdapterOptions,
        notes: AdapterNotes,
        *,
        batch_judgments: int,
    ) -> Iterator[AdaptedFrame] | None:
        """The source's judgments as blocks of columns, or ``None``: read :meth:`judgments` instead.

        Optional (the default is ``None``). An adapter that offers it for a
        source gives exactly what :meth:`judgments` would, in blocks of
        ``batch_judgments`` judgments and unreadable lines; memory stays bounded
        by a block, as for :meth:`judgments`.
        """
        return None
