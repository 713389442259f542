"""Sequential judging: order and batch effects when a judge rates several items in one call or session.

The Markov GLMM ([LiDing2026]_; :mod:`~jurymeter.stats.sequential.glmm`): a rating
depends on the rated unit, its position in the batch, the previous ``K``
ratings of the batch and a random batch intercept; fitted by maximum marginal
likelihood with adaptive Gauss-Hermite quadrature, with batch-bootstrap
intervals and the predictive check of the paper's figure 3 (its parts: the data
and design :mod:`~jurymeter.stats.sequential.glmm_model`, the likelihood
:mod:`~jurymeter.stats.sequential.glmm_likelihood`, the optimizer
:mod:`~jurymeter.stats.sequential.glmm_solve`, the bootstrap
:mod:`~jurymeter.stats.sequential.glmm_bootstrap`, the check
:mod:`~jurymeter.stats.sequential.glmm_check`). Its simulator is
:mod:`~jurymeter.stats.sequential.simulate`. The serial diagnostics are
:mod:`~jurymeter.stats.sequential.diagnostics`, the batch plans (Williams squares)
:mod:`~jurymeter.stats.sequential.plans`, the selection and group contrasts
:mod:`~jurymeter.stats.sequential.compare` (the contrasts in
:mod:`~jurymeter.stats.sequential.contrasts`), the published tables' columns
:mod:`~jurymeter.stats.sequential.schemas`. Every function takes polars frames
or numpy arrays and returns frozen dataclasses and tidy polars frames; none
reads a file. The names below are imported on first use, so importing a
submodule (the schemas, for the analysis's table declarations) stays light.

References
----------
.. [LiDing2026] T. Li and J. Ding, "Trustworthy Method Comparison with AI Judges:
   Estimation and Design under Order, Batch, and Aggregation Effects", 2026
   (``papers/trustworthy-comparison-ai-judges.txt``).
"""

from __future__ import annotations

import importlib
from typing import Any

_EXPORTS = {
    "BOOTSTRAP_SCHEMA": "schemas", "CHECK_SCHEMA": "schemas", "COEFFICIENT_SCHEMA": "schemas",
    "GLMMBootstrap": "glmm_model", "GLMMConvergenceError": "glmm_model", "PredictiveCheck": "glmm_model",
    "SequentialGLMM": "glmm_model", "bootstrap_fits": "glmm_bootstrap", "fit_sequential_glmm": "glmm",
    "predictive_check": "glmm_check", "simulate_sequential": "simulate",
    "serial_diagnostics": "diagnostics", "serial_diagnostics_by": "diagnostics",
    "batch_plan": "plans", "williams_square": "plans",
    "select_top": "compare", "compare_groups": "contrasts", "naive_group_contrast": "contrasts",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    if name in _EXPORTS:
        return getattr(importlib.import_module(f"jurymeter.stats.sequential.{_EXPORTS[name]}"), name)
    msg = f"module 'jurymeter.stats.sequential' has no attribute {name!r}"
    raise AttributeError(msg)


def __dir__() -> list[str]:
    return sorted(__all__)
