"""What an ingest did: one :class:`SourceReport` per source (its reconciliation), one :class:`IngestReport` per run."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any


@dataclass(slots=True)
class SourceReport:
    """Reconciliation of one source file."""

    source: str
    content_key: str  # its marker's name (io.store: "b3-<BLAKE3>", or the SHA-256 of a source committed before)
    status: str  # "ingested" | "already_ingested" | "unreadable" (nothing of it committed; ``note`` says why)
    protocol: str | None = None
    format: str = "canonical"  # or the log adapter that read it (io.adapters)
    lines: int = 0  # lines (or elements, samples) read; a line may hold several judgments
    read: int = 0  # judgments read: the unit of reconciliation
    accepted: int = 0
    quarantined: int = 0
    duplicates_dropped: int = 0
    reasons: dict[str, int] = field(default_factory=dict)
    note: str = ""
    notes: list[str] = field(default_factory=list)  # what the adapter says (a baseline it assumed)

    @property
    def balanced(self) -> bool:
        return self.read == self.accepted + self.quarantined + self.duplicates_dropped


@dataclass(slots=True)
class IngestReport:
    """What one ``jurymeter ingest`` run did."""

    run_id: str
    store: str
    started: str
    finished: str | None = None
    sources: list[SourceReport] = field(default_factory=list)
    removed_uncommitted: int = 0

    def totals(self) -> dict[str, int]:
        return {
            k: sum(getattr(s, k) for s in self.sources)
            for k in ("read", "accepted", "quarantined", "duplicates_dropped")
        }

    def unreadable(self) -> list[dict[str, str]]:
        """The sources that could not be read, each with its one-line reason (nothing of them is stored)."""
        return [{"source": s.source, "reason": s.note} for s in self.sources if s.status == UNREADABLE]

    def to_json(self) -> dict[str, Any]:
        return {
            "run_id": self.run_id,
            "store": self.store,
            "started": self.started,
            "finished": self.finished,
            "removed_uncommitted_files": self.removed_uncommitted,
            "totals": self.totals(),
            "sources_unreadable": self.unreadable(),
            "sources": [asdict(s) for s in self.sources],
        }


UNREADABLE = "unreadable"

