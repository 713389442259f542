"""Safe, reversible folder names for item sets.

Any ``item_set`` string becomes one path segment that

- contains only ``[a-z0-9_-]`` and ``%XX`` escapes, so no ``/``, ``..``, drive
  letter or control character can reach the file system;
- is injective even on case-insensitive file systems (laptops on macOS and
  Windows), because upper-case letters are escaped too;
- round-trips with :func:`decode_item_set`, and with any Hive reader that
  percent-decodes partition values (pyarrow's ``segment_encoding="uri"``).
"""

from __future__ import annotations

from urllib.parse import unquote

_SAFE = frozenset(b"abcdefghijklmnopqrstuvwxyz0123456789_-")

# Most file systems cap one path segment at 255 bytes; "item_set=" takes 9.
MAX_ENCODED_LENGTH = 240


def encode_item_set(name: str) -> str:
    """Percent-encode every UTF-8 byte outside ``[a-z0-9_-]``.

    >>> encode_item_set("MT-Bench/../x")
    '%4DT-%42ench%2F%2E%2E%2Fx'
    """
    return "".join(chr(b) if b in _SAFE else f"%{b:02X}" for b in name.encode("utf-8"))


def decode_item_set(segment: str) -> str:
    """Inverse of :func:`encode_item_set`."""
    return unquote(segment, encoding="utf-8", errors="strict")
