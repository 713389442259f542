"""Adapters for the judgment logs people already have (MT-Bench, Arena-Hard-Auto, AlpacaEval, inspect_ai).

:data:`ADAPTERS` is the one list of formats; :func:`adapter` names one,
:func:`detect` recognises a file from its first bytes. See :mod:`.base`.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # imported by the adapters' own modules; a configuration reads FORMATS only
    from jurymeter.io.adapters.base import Adapter

# "module:attribute", imported on first use.
ADAPTERS = (
    "jurymeter.io.adapters.mt_bench:MT_BENCH",
    "jurymeter.io.adapters.arena_hard:ARENA_HARD",
    "jurymeter.io.adapters.alpaca_eval:ALPACA_EVAL",
    "jurymeter.io.adapters.inspect_ai:INSPECT",
)
FORMATS = ("auto", "canonical", "mt-bench", "arena-hard", "alpaca-eval", "inspect")


def adapters() -> list[Adapter]:
    """Every adapter whose module is present, in :data:`ADAPTERS` order."""
    out = []
    for spec in ADAPTERS:
        module, _, attribute = spec.partition(":")
        try:
            loaded = importlib.import_module(module)
        except ModuleNotFoundError as exc:  # a format not built yet
            if exc.name != module:
                raise
            continue
        out.append(getattr(loaded, attribute))
    return out


def adapter(name: str) -> Adapter:
    """The adapter of format ``name``."""
    from jurymeter.errors import ConfigError

    for found in adapters():
        if found.name == name:
            return found
    msg = f"unknown format {name!r} (formats: {', '.join(FORMATS)})"
    raise ConfigError(msg)


def detect(head: bytes, path: str) -> Adapter | None:
    """The adapter whose format a file with these first bytes is in; ``None``: canonical records."""
    for found in adapters():
        if path.lower().endswith(found.suffixes) and found.detect(head, path):
            return found
    return None
