r"""Simulated LLM-judge judgment dumps with exactly known truth.

The simulator writes the two record kinds the judgment store holds, pointwise
rubric scores and pairwise preferences, from one set of drawn effects, and
returns every drawn effect so that G-studies, judge-bias decompositions and
pairwise diagnostics can be checked against the truth that generated the data.

Pointwise model
---------------
A system ``s`` answers item ``i`` in generation ``g`` (generations are nested
in system x item); judge ``j`` scores that response in replicate ``r``
(replicates are nested in system x item x judge x generation).  In the
generalizability-theory notation of [Anand2026]_ extended with the generation
facet of [Zhu2026]_ (Sec. 3.1, Eq. 1):

.. math::

    X_{sijgr} = \mu + \nu_s + \nu_i + \nu_j + \nu_{si} + \nu_{sj} + \nu_{ij}
              + \nu_{sij} + \nu_{g:si} + \nu_{gj:si}
              + \pi\,[f(j) = f(s)] + b\,(\log L_{sig} - \log L_0)
              + \varepsilon_{r:sijg},

every :math:`\nu` independent normal with mean 0 and variance
:math:`\sigma^2_{\cdot}` (the ``sigma_*`` fields are the standard deviations),
:math:`\nu_s = \nu_{m(s)} + \nu_{c:m}` split between the model and the prompt
configuration nested in it (``config_share``), :math:`\pi` the self-preference
of a judge for systems of its own family and :math:`b` an optional verbosity
bias on the log response length :math:`L_{sig}`.

A judge scores in sessions; within a batch of ``batch_size`` consecutive calls
the emitted score carries over part of the previous one (the first-order
Markov dependence of [LiDing2026]_, abstract and Fig. 1):

.. math::

    Y_t = \operatorname{emit}\bigl(X_t + \lambda\,(Y_{t-1} - \mu)\bigr),

with no carry-over at a batch's first position; ``emit`` rounds to the nearest
integer (half to even) and clips to ``scale`` when ``round_scores`` is true,
and is the identity otherwise.  With ``round_scores=False`` and
``carry_over=0`` the data follow the linear model exactly.

Pairwise model
--------------
Judge ``j`` sees system ``a`` first (slot A) and ``b`` second (slot B); every
selected pair is judged in both orders.  The latent preference for A is

.. math::

    \eta = \theta_a - \theta_b + \delta_j
         + \varphi_{f(j)}\,\bigl([f(j) = f(a)] - [f(j) = f(b)]\bigr)
         + u_{ai} - u_{bi},
    \qquad \theta_s = \kappa\,\nu_s,

with :math:`\delta_j \sim N(\delta, \sigma^2_\delta)` the judge's position bias
(slot-A advantage, [Anand2026]_ Table 3; [Awuni2026]_ Sec. 8),
:math:`\varphi_f` the family preference of a judge of family :math:`f`
(``family_lifts``, else the common :math:`\varphi`; [Awuni2026]_ Sec. 4-5) and
:math:`u_{si} \sim N(0, \sigma^2_u)` an optional system x item term.  With
probability :math:`q_j` (``position_following``, [Awuni2026]_ Sec. 8) a call
ignores :math:`\eta` and picks slot A.  A hard
verdict thresholds :math:`Y^* = \eta + \epsilon`, :math:`\epsilon` standard
logistic, at :math:`\pm\tau` (ordered logit; identical to the Rao-Kupper tie
model with tie parameter :math:`e^\tau`):

.. math::

    P(A) = \sigma(\eta - \tau), \quad P(B) = 1 - \sigma(\eta + \tau), \quad
    P(\text{tie}) = \sigma(\eta + \tau) - \sigma(\eta - \tau).

A weighted verdict reports ``preference`` drawn from
:math:`\mathrm{Beta}(k m, k (1 - m))` with
:math:`m = P(A) + P(\text{tie})/2 = (\sigma(\eta-\tau) + \sigma(\eta+\tau))/2`,
so hard and weighted records share the expected score of slot A.

Modules
-------
:mod:`~jurymeter.simulate.params` (:class:`SimulationParams`, its checks,
:class:`SimulatedDump`), :mod:`~jurymeter.simulate.registries` (systems and
judges), :mod:`~jurymeter.simulate.model` (:func:`simulate_dump`: the draws and
the records), :mod:`~jurymeter.simulate.truth` (the truth),
:mod:`~jurymeter.simulate.faults` (fault injection) and
:mod:`~jurymeter.simulate.dump` (:func:`write_dump`, the only I/O); import the
public names (``__all__``) from :mod:`jurymeter.simulate` itself.

References
----------
.. [Anand2026] A. Anand, "Ask Which, Not How Good: Sizing Benchmarks Scored by
   an LLM", 2026 (``papers/ask-which-not-how-good.txt`` and ``-appendix.txt``).
.. [Zhu2026] Z. Zhu et al., "CyclicJudge: Mitigating Judge Bias Efficiently in
   LLM-based Evaluation", 2026 (``papers/cyclicjudge.txt``).
.. [Awuni2026] D. A. Awuni et al., "Who Judges Matters: Measuring
   Family-Conditioned Preference in LLM-as-Judge Panels", 2026
   (``papers/who-judges-matters.txt``).
.. [LiDing2026] T. Li and J. Ding, "Trustworthy Method Comparison with AI
   Judges: Estimation and Design under Order, Batch, and Aggregation Effects",
   2026 (``papers/trustworthy-comparison-ai-judges.txt``).
.. [RaoKupper1967] P. V. Rao and L. L. Kupper, "Ties in paired-comparison
   experiments: a generalization of the Bradley-Terry model", JASA 62, 1967.
"""

from jurymeter.errors import SimulationError
from jurymeter.simulate.dump import write_dump
from jurymeter.simulate.faults import FAULT_KINDS
from jurymeter.simulate.model import simulate_dump
from jurymeter.simulate.params import (
    PAIRWISE_COLUMNS,
    POINTWISE_COLUMNS,
    SimulatedDump,
    SimulationParams,
)

__all__ = [
    "FAULT_KINDS",
    "PAIRWISE_COLUMNS",
    "POINTWISE_COLUMNS",
    "SimulatedDump",
    "SimulationError",
    "SimulationParams",
    "simulate_dump",
    "write_dump",
]
