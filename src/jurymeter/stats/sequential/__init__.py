"""Sequential judging: order and batch effects when a judge rates several items in one call or session.

The Markov GLMM ([LiDing2026]_; :mod:`~jurymeter.stats.sequential.glmm`): a rating
depends on the rated unit, its position in the batch, the previous ``K``
ratings of the batch and a random batch intercept; fitted by maximum marginal
likelihood with adaptive Gauss-Hermite quadrature, with batch-bootstrap
intervals and the predictive check of the paper's figure 3. Its simulator is
:mod:`~jurymeter.stats.sequential.simulate`. Every function takes polars frames
or numpy arrays and returns frozen dataclasses and tidy polars frames; none
reads a file.

References
----------
.. [LiDing2026] T. Li and J. Ding, "Trustworthy Method Comparison with AI Judges:
   Estimation and Design under Order, Batch, and Aggregation Effects", 2026
   (``papers/trustworthy-comparison-ai-judges.txt``).
"""

from jurymeter.stats.sequential.glmm import (
    BOOTSTRAP_SCHEMA,
    CHECK_SCHEMA,
    COEFFICIENT_SCHEMA,
    GLMMBootstrap,
    GLMMConvergenceError,
    PredictiveCheck,
    SequentialGLMM,
    bootstrap_fits,
    fit_sequential_glmm,
    predictive_check,
)
from jurymeter.stats.sequential.simulate import simulate_sequential

__all__ = [
    "BOOTSTRAP_SCHEMA",
    "CHECK_SCHEMA",
    "COEFFICIENT_SCHEMA",
    "GLMMBootstrap",
    "GLMMConvergenceError",
    "PredictiveCheck",
    "SequentialGLMM",
    "bootstrap_fits",
    "fit_sequential_glmm",
    "predictive_check",
    "simulate_sequential",
]
