"""The registered analyses: everything the pipeline, the report and the CLI run for a fit.

The registry is the one list of analyses (:func:`registered`, in report order).
Adding an analysis is one module (an :class:`~jurymeter.analyses.base.Analysis`
subclass: its identity and one implementation of each part of the seam), one
line in :data:`BUILTIN` and its docs; nothing in the pipeline names it. Tests and plug-ins may :func:`register` more at run time.
"""

from __future__ import annotations

import importlib
from collections.abc import Collection, Iterator
from contextlib import contextmanager
from typing import Any

from jurymeter.analyses.base import Analysis

# Built-in analyses as "module:attribute", imported on first use (their modules
# import nothing heavy at the top, so planning in the flow's process stays light).
BUILTIN = (
    "jurymeter.analyses.gstudy:GSTUDY",
    "jurymeter.analyses.cyclic:CYCLIC",
    "jurymeter.analyses.pairwise:PAIRWISE",
    "jurymeter.analyses.sequential:SEQUENTIAL",
    "jurymeter.analyses.latent:LATENT",
)

_registry: dict[str, Analysis[Any, Any]] = {}
_loaded = False


def _load_builtin() -> None:
    global _loaded
    if _loaded:
        return
    _loaded = True
    for spec in BUILTIN:
        module, _, attribute = spec.partition(":")
        register(getattr(importlib.import_module(module), attribute))


def register(analysis: Analysis[Any, Any]) -> Analysis[Any, Any]:
    """Add an analysis to the registry (its name and table names must be new)."""
    from jurymeter.errors import ConfigError

    if not analysis.name.replace("_", "").isalnum():
        msg = f"analysis name {analysis.name!r} must hold only letters, digits and '_'"
        raise ConfigError(msg)
    if analysis.name in _registry and _registry[analysis.name] is not analysis:
        msg = f"an analysis named {analysis.name!r} is already registered"
        raise ConfigError(msg)
    taken = {t.name: a.name for a in _registry.values() if a is not analysis for t in a.tables}
    for table in analysis.tables:
        if table.name in taken:
            msg = f"table {table.name!r} of {analysis.name} is already published by {taken[table.name]}"
            raise ConfigError(msg)
    _registry[analysis.name] = analysis
    return analysis


def unregister(name: str) -> None:
    _registry.pop(name, None)


@contextmanager
def registered_temporarily(analysis: Analysis[Any, Any]) -> Iterator[Analysis[Any, Any]]:
    """Register ``analysis`` for the duration of a ``with`` block (tests, plug-in trials)."""
    _load_builtin()
    register(analysis)
    try:
        yield analysis
    finally:
        unregister(analysis.name)


def registered() -> tuple[Analysis[Any, Any], ...]:
    """Every registered analysis, in report order (``order``, then registration)."""
    _load_builtin()
    return tuple(sorted(_registry.values(), key=lambda a: a.order))


def unasked(configured: Collection[str]) -> tuple[Analysis[Any, Any], ...]:
    """The analyses a night runs when ``[fit] analyses`` is empty: every one that runs by default
    (:attr:`~jurymeter.analyses.base.FitPart.by_default`), and every one whose ``[fit.<name>]`` table is in
    ``configured``."""
    return tuple(a for a in registered() if a.by_default or a.name in configured)


def analysis(name: str) -> Analysis[Any, Any]:
    """The registered analysis called ``name``."""
    from jurymeter.errors import ConfigError

    _load_builtin()
    if name not in _registry:
        msg = f"no analysis {name!r} (registered: {', '.join(a.name for a in registered())})"
        raise ConfigError(msg)
    return _registry[name]


__all__ = ["Analysis", "analysis", "register", "registered", "registered_temporarily", "unasked", "unregister"]
