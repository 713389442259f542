"""jurymeter: how far to trust a leaderboard scored by LLM judges.

The public API, importable from here (loaded on first use, so ``import
jurymeter`` stays cheap for the flow's process and the Dask workers):

- the store and ingest: :class:`Store`, :func:`ingest`, :class:`ValidationOptions`;
- one fit through the nightly run's own path: :class:`RunConfig` / :func:`load_config`,
  :func:`plan_fits`, :func:`run_fits`, :func:`fit_and_tabulate`, :func:`publish_run`;
- the analysis seam: :class:`Analysis`, :func:`register`, :func:`registered`;
- the statistics directly: :class:`GStudyRequest`, :func:`assess_item_set`,
  :func:`cyclic_report`, :func:`henderson1`; pairwise judging: :func:`games`,
  :func:`reconcile`, :func:`position_bias`, :func:`judge_agreement`,
  :func:`bradley_terry`, :func:`family_preference`, :func:`pairwise_gstudy`;
- simulated dumps with known truth: :class:`SimulationParams`, :func:`simulate_dump`,
  :func:`write_dump`;
- :class:`JurymeterError`, the base of every error raised on purpose.
"""

from __future__ import annotations

import importlib
from typing import Any

__version__ = "0.1.0"

_EXPORTS = {
    "Store": "jurymeter.io.store",
    "ingest": "jurymeter.io.ingest",
    "ValidationOptions": "jurymeter.io.validate",
    "RunConfig": "jurymeter.pipeline.config",
    "load_config": "jurymeter.pipeline.config",
    "plan_fits": "jurymeter.pipeline.jobs",
    "run_fits": "jurymeter.pipeline.cache",
    "fit_and_tabulate": "jurymeter.pipeline.fit",
    "publish_run": "jurymeter.pipeline.publish",
    "Analysis": "jurymeter.analyses.base",
    "register": "jurymeter.analyses",
    "registered": "jurymeter.analyses",
    "GStudyRequest": "jurymeter.stats.reliability",
    "assess_item_set": "jurymeter.stats.reliability",
    "cyclic_report": "jurymeter.stats.cyclic.fit",
    "henderson1": "jurymeter.stats.henderson",
    "games": "jurymeter.stats.pairwise.games",
    "reconcile": "jurymeter.stats.pairwise.games",
    "position_bias": "jurymeter.stats.pairwise.position",
    "judge_agreement": "jurymeter.stats.pairwise.agreement",
    "bradley_terry": "jurymeter.stats.pairwise.bradley_terry",
    "family_preference": "jurymeter.stats.pairwise.family",
    "pairwise_gstudy": "jurymeter.stats.pairwise.gstudy",
    "SimulationParams": "jurymeter.simulate",
    "simulate_dump": "jurymeter.simulate",
    "write_dump": "jurymeter.simulate",
    "JurymeterError": "jurymeter.errors",
}

__all__ = ["__version__", *_EXPORTS]


def __getattr__(name: str) -> Any:
    if name in _EXPORTS:
        return getattr(importlib.import_module(_EXPORTS[name]), name)
    msg = f"module 'jurymeter' has no attribute {name!r}"
    raise AttributeError(msg)


def __dir__() -> list[str]:
    return sorted(__all__)
