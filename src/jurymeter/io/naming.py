"""Safe, reversible folder names for item sets.

Any ``item_set`` string becomes one path segment (:func:`item_set_folder`) that

- contains only ``[a-z0-9_-]``, ``%XX`` escapes and, for long names, one ``~``,
  so no ``/``, ``..``, drive letter or control character can reach the file
  system;
- is at most :data:`MAX_ENCODED_LENGTH` bytes, whatever the name's length;
- is injective even on case-insensitive file systems (laptops on macOS and
  Windows), because upper-case letters are escaped too.

A name whose percent-encoding (:func:`encode_item_set`) fits in
:data:`MAX_ENCODED_LENGTH` bytes is its own folder name: it round-trips with
:func:`decode_item_set`, and with any Hive reader that percent-decodes partition
values (pyarrow's ``segment_encoding="uri"``). A longer name gets a *digested*
folder name: a readable prefix of its encoding, ``~``, and the SHA-256 of the
whole name (64 hex digits). ``~`` never occurs in an encoding (it is escaped as
``%7E``), so a digested folder name never equals a plain one, and two long
names share a folder only if their SHA-256 digests are equal. The full name of
a digested folder cannot be computed back from it: the store keeps it in the
folder (:mod:`jurymeter.io.store`, ``_item_set.json``).
"""

from __future__ import annotations

import hashlib
from urllib.parse import unquote

_SAFE = frozenset(b"abcdefghijklmnopqrstuvwxyz0123456789_-")

# Most file systems cap one path segment at 255 bytes; "item_set=" takes 9.
MAX_ENCODED_LENGTH = 240
DIGEST_MARK = "~"
_DIGEST_HEX = 64
# The readable prefix of a digested folder name: the rest of the budget.
PREFIX_LENGTH = MAX_ENCODED_LENGTH - len(DIGEST_MARK) - _DIGEST_HEX


def _encode_char(char: str) -> str:
    return "".join(chr(b) if b in _SAFE else f"%{b:02X}" for b in char.encode("utf-8"))


def encode_item_set(name: str) -> str:
    """Percent-encode every UTF-8 byte outside ``[a-z0-9_-]``.

    >>> encode_item_set("MT-Bench/../x")
    '%4DT-%42ench%2F%2E%2E%2Fx'
    """
    return "".join(chr(b) if b in _SAFE else f"%{b:02X}" for b in name.encode("utf-8"))


def decode_item_set(segment: str) -> str:
    """Inverse of :func:`encode_item_set` (a digested folder name is refused: see :func:`is_digested`)."""
    if is_digested(segment):
        msg = f"folder name {segment[:40]}... is digested: the item set's name is kept in its folder"
        raise ValueError(msg)
    return unquote(segment, encoding="utf-8", errors="strict")


def is_digested(segment: str) -> bool:
    """Whether ``segment`` is the digested folder name of a long item-set name."""
    return DIGEST_MARK in segment


def name_digest(name: str) -> str:
    """SHA-256 of the name's UTF-8 bytes, in hex: the suffix of its digested folder name."""
    return hashlib.sha256(name.encode("utf-8")).hexdigest()


def item_set_folder(name: str) -> str:
    """The folder name (after ``item_set=``) of an item set, at most :data:`MAX_ENCODED_LENGTH` bytes.

    Names whose encoding fits keep it (the folder names of every store written
    before long names were accepted); longer names get ``<prefix>~<sha256>``,
    the prefix being the encoding of the name's first characters, cut between
    characters so that no escape or UTF-8 sequence is split.

    >>> item_set_folder("mt-bench")
    'mt-bench'
    >>> len(item_set_folder("x" * 1000))
    240
    """
    encoded = encode_item_set(name)
    if len(encoded) <= MAX_ENCODED_LENGTH:
        return encoded
    prefix: list[str] = []
    used = 0
    for char in name:
        piece = _encode_char(char)
        if used + len(piece) > PREFIX_LENGTH:
            break
        prefix.append(piece)
        used += len(piece)
    return "".join(prefix) + DIGEST_MARK + name_digest(name)
