"""What one analysis made of one fit: the record :mod:`jurymeter.pipeline.fit` gives and
:mod:`jurymeter.pipeline.tables` reads.

Its own module, below both, so that neither imports the other.
"""

from __future__ import annotations

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
