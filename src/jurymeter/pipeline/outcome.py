"""What one analysis made of one fit: the record :mod:`jurymeter.pipeline.fit` gives and
:mod:`jurymeter.pipeline.tables` reads.

Its own module, below both, so that neither imports the other.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

FITTED, SKIPPED = "fitted", "skipped"


@dataclass(frozen=True, slots=True)
class AnalysisOutcome:
    """What one analysis made of one fit: its typed result, or why it did not apply.

    ``result`` is the analysis's own typed record (``GStudyResult``,
    ``PairwiseResult``...), read through the analysis's parts; ``None`` when skipped.
    """

    name: str
    status: str  # "fitted" | "skipped"
    result: Any | None  # each analysis's own result type: the registry holds Analysis[Any, Any]
    reason: str | None = None
    seconds: float | None = None  # its own work: start, feeding the chunks, finish (not the shared scan)


def seconds_by_analysis(analyses: Mapping[str, Any] | None) -> list[tuple[str, float]]:
    """Each analysis's own seconds in a fit's summary entry (its ``analyses``), slowest first.

    What the fit's line on the page and in ``jurymeter run`` name: which
    analysis spends the night. Entries without seconds (summaries of older
    runs) are left out.
    """
    spent = [(name, float(part["seconds"])) for name, part in (analyses or {}).items()
             if isinstance(part, Mapping) and part.get("seconds") is not None]
    return sorted(spent, key=lambda kv: -kv[1])
