r"""Whether text is text: lone surrogates (an undecodable byte, an unpaired escape) found and escaped.

Reading loses nothing (``docs/schema.md``): a field that is not valid text
makes its record an ``invalid_text`` record whose raw text is kept escaped
(``\xNN`` for a byte, ``\uDNNN`` for an unpaired escape), never replaced. Used
by every reader (:mod:`jurymeter.io.records`, :mod:`jurymeter.io.tabular`) and
by the log adapters.
"""

from __future__ import annotations

import json
import re
from typing import Any


def escaped(data: bytes) -> str:
    r"""Bytes as text, any invalid UTF-8 byte written as ``\xNN`` (what quarantine keeps)."""
    return data.decode("utf-8", "backslashreplace")


def escape_text(text: str) -> str:
    r"""A str holding lone surrogates as valid text: ``\xNN`` for a byte it was decoded from, else ``\uDNNN``."""
    try:
        return text.encode("utf-8").decode("utf-8")
    except UnicodeEncodeError:
        return "".join(
            c if not 0xD800 <= ord(c) <= 0xDFFF
            else (f"\\x{ord(c) - 0xDC00:02x}" if 0xDC80 <= ord(c) <= 0xDCFF else f"\\u{ord(c):04x}")
            for c in text
        )


def is_text(value: str) -> bool:
    """Whether ``value`` is valid text (no lone surrogate: neither an undecodable byte nor an unpaired escape)."""
    if value.isascii():
        return True
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _json_is_text(value: Any) -> bool:
    """Whether every string of a parsed JSON value (keys included) is valid text."""
    if isinstance(value, str):
        return is_text(value)
    if isinstance(value, dict):
        return all(is_text(k) and _json_is_text(v) for k, v in value.items())
    if isinstance(value, list):
        return all(_json_is_text(v) for v in value)
    return True


def invalid_text_message(name: str, value: Any, *, bytes_invalid: bool) -> str:
    """``field 'x' is not valid text (...): <the value, escaped>`` for an ``invalid_text`` record."""
    why = "invalid UTF-8 bytes" if bytes_invalid else "an unpaired surrogate escape"
    shown = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    # Quoted by hand: repr would double the backslash of each \\xNN.
    return f"field '{escape_text(name)}' is not valid text ({why}): \"{escape_text(shown)[:60]}\""


def invalid_fields(record: dict[str, Any]) -> list[str]:
    """The fields (top-level keys) of a parsed record whose name or value holds a lone surrogate."""
    return [k for k, v in record.items() if not (is_text(k) and _json_is_text(v))]


# A \u escape of a surrogate code point: polars reads an unpaired high surrogate
# as NUL and fails on every other unpaired form (tests/test_hostile_ingest.py
# holds it to that). A false alarm (an escaped backslash before "ud800") only
# costs the slow path.
_SURROGATE_ESCAPE = re.compile(rb"\\u[dD][89a-fA-F]")
_UNPAIRED = re.compile(
    rb"\\u[dD][89abAB][0-9a-fA-F]{2}(?!\\u[dD][c-fC-F][0-9a-fA-F]{2})"
    rb"|(?<!\\u[dD][89abAB][0-9a-fA-F]{2})\\u[dD][c-fC-F][0-9a-fA-F]{2}"
)
# What a text id column's value starts with when polars may have changed it: an


def has_unpaired_escape(block: bytes) -> bool:
    """Whether ``block`` may hold an unpaired surrogate escape (conservative: never misses one)."""
    if block.find(b"\\") < 0:  # memchr: no escape at all, the common case
        return False
    found = _SURROGATE_ESCAPE.search(block)
    return found is not None and _UNPAIRED.search(block, found.start()) is not None



def has_surrogate_escape(data: bytes) -> bool:
    r"""Whether ``data`` holds a ``\u`` escape of a surrogate code point (paired or not)."""
    return _SURROGATE_ESCAPE.search(data) is not None
