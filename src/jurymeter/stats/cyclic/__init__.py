r"""CyclicJudge: scenario, generation, judge and residual variance of one system's scores.

Model ([Zhu2026] section 3.1, eq. 1). For one system (the paper's model
:math:`\theta`), scenario :math:`i = 1..n`, generation :math:`j = 1..m` nested in
the scenario and judge :math:`\ell = 1..K` crossed with both,

.. math::

    X_{ij\ell} = \mu_\theta + \alpha_i + \beta_{ij} + \gamma_\ell + \varepsilon_{ij\ell},

with :math:`\alpha_i \sim (0, \sigma^2_\alpha)` (scenario),
:math:`\beta_{ij} \sim (0, \sigma^2_\beta)` (generation),
:math:`\varepsilon_{ij\ell} \sim (0, \sigma^2_\varepsilon)` (residual, all
interactions pooled; appendix I) and fixed judge offsets :math:`\gamma_\ell`
centred over the panel of :math:`K_{tot}` judges, with dispersion
:math:`\sigma^2_\gamma = K_{tot}^{-1} \sum_\ell \gamma_\ell^2`.

Data are a dense array ``x[scenario, generation, judge]``: the ``(g:i) x j``
design of :mod:`jurymeter.stats.design` (facets ``('i', 'g', 'j')``). The mean squares
come from :func:`jurymeter.stats.gstudy.mean_squares`; the paper's residual pools the
engine's ``ij`` and ``gj:i`` effects (eq. 20), and the components are solved by
the engine's EMS matrix with that pooled mean square, which reproduces eq. 23-25
exactly.

Public names use the issue's spelling: ``sigma2_scenario`` (:math:`\sigma^2_\alpha`),
``sigma2_generation`` (:math:`\sigma^2_\beta`), ``sigma2_judge``
(:math:`\sigma^2_\gamma`), ``sigma2_residual`` (:math:`\sigma^2_\varepsilon`).
The panel observed in the data is the whole pool, :math:`K = K_{tot}`.

Modules
-------
:mod:`~jurymeter.stats.cyclic.components` (the components and Proposition 1),
:mod:`~jurymeter.stats.cyclic.sums` (:class:`CyclicSums`, appendix G pools),
:mod:`~jurymeter.stats.cyclic.decomposition` (:func:`fit_cyclic`: eq. 20-25, offsets,
F-test), :mod:`~jurymeter.stats.cyclic.strategies` (strategies A, B, C and scenario
coverage), :mod:`~jurymeter.stats.cyclic.subsampling` (the Monte Carlo check),
:mod:`~jurymeter.stats.cyclic.offsets` (judge x system offsets),
:mod:`~jurymeter.stats.cyclic.cube` (long frame to dense scores) and
:mod:`~jurymeter.stats.cyclic.checks` (argument checks); import the public names
(``__all__``) from :mod:`jurymeter.stats.cyclic` itself. :mod:`~jurymeter.stats.cyclic.fit`
(one item set's report from the store's records, each system on its own complete block) and
:mod:`~jurymeter.stats.cyclic.planner` (judge assignments; the cost-weighted plan's integer
allocation of calls in :mod:`~jurymeter.stats.cyclic.allocation`) and
:mod:`~jurymeter.stats.cyclic.strategy_prediction` (a plan's strategy variances with intervals)
build on them.

References
----------
.. [Zhu2026] Z. Zhu et al., "CyclicJudge: Mitigating Judge Bias Efficiently in
   LLM-based Evaluation", 2026 (``papers/cyclicjudge.txt``).
"""

from jurymeter.stats.cyclic.components import (
    COMPONENTS,
    VarianceComponents,
    VarianceContributions,
    variance_contributions,
)
from jurymeter.stats.cyclic.cube import ScoreCube, score_cube
from jurymeter.stats.cyclic.decomposition import (
    CyclicDecomposition,
    fit_cyclic,
    fit_cyclic_sums,
    sigma2_judge_from_offsets,
)
from jurymeter.stats.cyclic.offsets import (
    JudgeSystemOffsets,
    judge_system_offsets,
    offsets_from_judge_means,
)
from jurymeter.stats.cyclic.strategies import (
    CoverageSplit,
    StrategyComparison,
    Winner,
    scenario_coverage,
    strategy_variances,
)
from jurymeter.stats.cyclic.subsampling import (
    DEFAULT_REPS,
    SubsampleCheck,
    subsample_strategy_curve,
    subsample_strategy_variance,
)
from jurymeter.stats.cyclic.sums import CYCLIC_DESIGN, CyclicSums, PoolVariances, pool_variances

__all__ = [
    "COMPONENTS",
    "CYCLIC_DESIGN",
    "DEFAULT_REPS",
    "CoverageSplit",
    "CyclicDecomposition",
    "CyclicSums",
    "JudgeSystemOffsets",
    "PoolVariances",
    "ScoreCube",
    "StrategyComparison",
    "SubsampleCheck",
    "VarianceComponents",
    "VarianceContributions",
    "Winner",
    "fit_cyclic",
    "fit_cyclic_sums",
    "judge_system_offsets",
    "offsets_from_judge_means",
    "pool_variances",
    "scenario_coverage",
    "score_cube",
    "sigma2_judge_from_offsets",
    "strategy_variances",
    "subsample_strategy_curve",
    "subsample_strategy_variance",
    "variance_contributions",
]
