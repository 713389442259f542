"""The landing ingest of a run: every dump in the landing location, through the one ingest path."""

from __future__ import annotations

import time
from typing import Any

from jurymeter.io.ingest import StageMap
from jurymeter.io.store import Store
from jurymeter.pipeline.config import RunConfig


def landing_sources(config: RunConfig) -> list[Any]:
    """The dump files in the landing location; none when it is unset, missing or empty."""
    from jurymeter.errors import SourceError
    from jurymeter.io.source_files import filesystem_for
    from jurymeter.io.sources import discover_sources

    if not config.landing:
        return []
    options = config.storage_options if config.landing.startswith("s3://") else None
    fs, path = filesystem_for(config.landing, options)
    if not fs.exists(path):
        return []
    try:
        return discover_sources([config.landing], storage_options=options, log_format=config.log_format)
    except SourceError:  # a landing folder with no dump in it: nothing landed tonight
        if fs.isdir(path):
            return []
        raise


def ingest_landing(config: RunConfig, stage_map: StageMap | None = None) -> dict[str, Any] | None:
    """Ingest every dump in the landing location (already ingested files are no-ops).

    ``stage_map``: the sources' stage steps run on a cluster's workers
    (:func:`jurymeter.io.ingest.ingest`; the same store as without), taken
    when more than one dump landed (one gains nothing from a cluster).
    Returns the ingest's report as JSON-ready data with its own duration in
    ``seconds``, or ``None`` when nothing landed.
    """
    from jurymeter.io.ingest import ingest
    from jurymeter.io.validate import ValidationOptions

    started = time.perf_counter()
    store = Store(config.store, config.storage_options)
    sources = landing_sources(config)
    if not sources:
        return None
    options = ValidationOptions(column_map=config.column_map, scale=config.scale, baseline=config.baseline)
    report = ingest(store, sources, options, stage_map=stage_map if len(sources) > 1 else None).to_json()
    report["seconds"] = round(time.perf_counter() - started, 3)  # its own duration, wherever it ran
    return report
