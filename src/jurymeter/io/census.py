"""What a JSON Lines file's bytes say, independently of any parser: the streaming path's proof (:mod:`jurymeter.io.streaming`)."""

from __future__ import annotations

import threading
from dataclasses import dataclass

import numpy as np

from jurymeter.io.source_files import SourceFile
from jurymeter.io.text import has_unpaired_escape


@dataclass(frozen=True, slots=True)
class TextCensus:
    """What a JSON Lines file's bytes say, independently of any parser."""

    lines: int  # physical lines (a last line without a newline counts)
    key_marks: int  # occurrences of '":', the end of every object key
    null_marks: int  # occurrences of '":null' and '": null', a key whose value is null
    string_marks: int = 0  # occurrences of '":"' and '": "', a key whose value is a string
    escapes: bool = False  # whether it may hold an unpaired surrogate escape (has_unpaired_escape)

    @property
    def values(self) -> int:
        """Non-null values the text holds, if no string value contains a mark."""
        return self.key_marks - self.null_marks


_LOOKAHEAD = 6  # bytes after a colon that ': null' needs
_ESCAPE_OVERLAP = 12  # bytes of the previous chunk an escape pair may start in


def _marks(data: np.ndarray, start: int, stop: int) -> tuple[int, int, int]:
    """Key marks, null marks and string marks whose colon is at ``start <= index < stop``.

    Needs ``start >= 1`` and ``stop <= len(data) - _LOOKAHEAD`` (the bytes on
    both sides of each colon). Gathers only at colons, then only at the few
    followed by ``n``, a quote or a space, so it stays near memory speed.
    """
    colons = np.flatnonzero(data[start:stop] == 58) + start
    colons = colons[data[colons - 1] == 34]
    first = data[colons + 1]
    tight = colons[first == 110]  # '":n...'
    spaced = colons[first == 32]  # '": ...'
    strings = np.count_nonzero(first == 34) + np.count_nonzero(data[spaced + 2] == 34)
    nulls = np.count_nonzero(
        (data[tight + 2] == 117) & (data[tight + 3] == 108) & (data[tight + 4] == 108)
    )
    spaced = spaced[data[spaced + 2] == 110]
    nulls += np.count_nonzero(
        (data[spaced + 3] == 117) & (data[spaced + 4] == 108) & (data[spaced + 5] == 108)
    )
    return len(colons), int(nulls), int(strings)


def text_census(
    source: SourceFile, chunk: int = 8 * 1024 * 1024, cancel: threading.Event | None = None
) -> TextCensus | None:
    """Count lines, key, null and string marks of an uncompressed text file (numpy: no GIL held).

    The streaming path proves it lost nothing by comparing these with what the
    parser produced: one row per line, one non-null value per key mark that
    is not followed by ``null``, one text value per mark followed by a quote
    (so no number was turned into text), and no unpaired surrogate escape
    (which polars reads as NUL). Colons near a chunk's end wait for the next
    chunk, which starts with the bytes they need on both sides. Returns
    ``None`` when ``cancel`` is set before the end (checked between chunks).
    """
    lines = marks = nulls = strings = 0
    escapes = False
    carry = b"\n"  # one byte of context before the first colon
    tail = b""  # the previous chunk's last bytes, for an escape cut by the chunk's edge
    last = 10
    with source.fs.open(source.path, "rb") as handle:
        while block := handle.read(chunk):
            if cancel is not None and cancel.is_set():
                return None
            data = np.frombuffer(carry + block, dtype=np.uint8)
            lines += int(np.count_nonzero(data[len(carry) :] == 10))
            stop = max(1, len(data) - _LOOKAHEAD)
            found = _marks(data, 1, stop)
            marks, nulls, strings = marks + found[0], nulls + found[1], strings + found[2]
            if not escapes and (block.find(b"\\") >= 0 or tail.find(b"\\") >= 0):  # memchr; rare: copy
                escapes = has_unpaired_escape(tail + block)
            tail = block[-_ESCAPE_OVERLAP:]
            carry = (carry + block)[stop - 1 :]
            last = block[-1]
    padded = np.frombuffer(carry + bytes(_LOOKAHEAD), dtype=np.uint8)
    found = _marks(padded, 1, len(carry))
    marks, nulls, strings = marks + found[0], nulls + found[1], strings + found[2]
    return TextCensus(
        lines=lines + (0 if last == 10 else 1), key_marks=marks, null_marks=nulls,
        string_marks=strings, escapes=escapes,
    )

