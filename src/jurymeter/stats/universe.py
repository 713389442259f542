r"""The universe of generalization a user declares: fixed facets and finite pools, and its D-study.

The G-study's own D-study is the paper's: every facet but the systems random,
its levels drawn from an unlimited universe. A leaderboard is often about less:
*these* three judges (a fixed panel), *this* benchmark's items, or judges drawn
from a known pool of twelve. Brennan (2001, sec. 4.3-4.5; Cronbach et al. 1972,
ch. 4) gives the D-study of such a universe from the same random-effects
components: :func:`jurymeter.stats.dstudy.error_variances` with ``fixed`` and
``universe``. This module turns the declaration (``[fit.gstudy] fixed``,
``judge_pool``, ``item_pool``) into the design's facets and computes the
report's ``universe`` block: :math:`\tau`, :math:`\sigma^2_\delta`,
:math:`\sigma^2_\Delta`, :math:`E\rho^2`, :math:`\Phi` and the MDD95 at the
study's own sizes, with intervals from the fit's own component draws.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from jurymeter.errors import DesignError
from jurymeter.stats.bootstrap import percentile_interval
from jurymeter.stats.design import Design
from jurymeter.stats.dstudy import (
    PAPER_ROLES,
    Facets,
    error_variances,
    mdd_of_delta,
    truncated_ratio,
)
from jurymeter.stats.gstudy import GStudy

# The facets a user may declare, by the name the configuration uses.
FACET_ROLES = ("judges", "items")


@dataclass(frozen=True, slots=True)
class Universe:
    """A declared universe of generalization: facets fixed, facets sampled from a finite pool.

    ``fixed``: roles (``"judges"``, ``"items"``) whose levels in the study are all
    of the universe's. ``pools``: a role's number of levels in the universe when
    it is finite and larger than the study's (a pool of 12 judges of which the
    study used 3). A role neither fixed nor pooled is random (unlimited).

    Raises
    ------
    DesignError
        An unknown role, a role named twice, or a pool below 1.
    """

    fixed: tuple[str, ...] = ()
    pools: Mapping[str, int] = field(default_factory=dict)

    def __post_init__(self) -> None:
        for role in (*self.fixed, *self.pools):
            if role not in FACET_ROLES:
                msg = f"a universe facet must be one of {FACET_ROLES}; got {role!r}"
                raise DesignError(msg)
        if len(set(self.fixed)) != len(self.fixed):
            msg = f"fixed facets named twice: {list(self.fixed)}"
            raise DesignError(msg)
        both = sorted(set(self.fixed) & set(self.pools))
        if both:
            msg = f"{both} declared both fixed and with a finite pool: a fixed facet's pool is the study's own levels"
            raise DesignError(msg)
        for role, size in self.pools.items():
            if isinstance(size, bool) or not isinstance(size, int) or size < 1:
                msg = f"the pool of {role} must be an integer of at least 1; got {size!r}"
                raise DesignError(msg)

    @property
    def random(self) -> bool:
        """Every facet random: the paper's universe, whose D-study the report already holds."""
        return not self.fixed and not self.pools

    def describe(self) -> str:
        """The declaration in words: "judges fixed; items from a pool of 500"."""
        parts = [f"{role} fixed" for role in self.fixed]
        parts += [f"{role} from a pool of {size}" for role, size in self.pools.items()]
        return "; ".join(parts) if parts else "every facet random"


def _no_error_reason(design: Design, delta: float, declared: frozenset[str], roles: Facets) -> str:
    """Why the declared universe has no MDD: every facet of the system effects fixed, or negative estimates."""
    facets = set(design.facets) - {roles.system}
    if delta == 0 and facets <= declared:
        return (f"sigma2_delta = 0 in this universe: every facet of the design ({', '.join(sorted(facets))}) is "
                "fixed, so no relative error is left and no floor can be stated; with one rating per cell the "
                "judge's run-to-run noise is confounded with the last interaction and counted as universe score, "
                "so score each cell more than once (runs) to measure it")
    return f"sigma2_delta = {delta:.4g} <= 0 in this universe (negative estimates): no floor can be estimated"


def _letter(role: str, roles: Facets) -> str:
    return roles.judge if role == "judges" else roles.item


def universe_report(
    fit: GStudy, draws: np.ndarray, native: Mapping[str, float], universe: Universe,
    levels: Mapping[str, int], *, roles: Facets = PAPER_ROLES, level: float = 0.95,
) -> tuple[dict[str, Any] | None, str | None]:
    r"""The D-study of a declared universe at the study's own sizes, with its intervals.

    Parameters
    ----------
    fit : GStudy
        The random-effects G-study (its components are the universe's, whatever is fixed).
    draws : ndarray
        ``(n_boot, effects)`` component draws of the fit's intervals.
    native : mapping
        The study's D-study sizes (a balanced block's counts, or Henderson's harmonic means).
    universe : Universe
        The declaration.
    levels : mapping
        The number of distinct levels of each facet in the fit (a pool cannot be smaller).

    Returns
    -------
    report, reason
        The ``universe`` block (``None`` when the declaration changes nothing) and,
        when it is ``None``, why.

    Notes
    -----
    Brennan (2001, sec. 4.3-4.5), through :func:`jurymeter.stats.dstudy.error_variances`:
    :math:`\tau = \sigma^2_s + \sum_T \sigma^2_T/\prod N_f`, each error part
    :math:`\sigma^2_T (1/\prod n_f - 1/\prod N_f)`; :math:`E\rho^2 = \tau_+/(\tau_+ + \delta_+)`,
    :math:`\Phi = \tau_+/(\tau_+ + \Delta_+)`, :math:`\mathrm{MDD}_{95} = 1.96\sqrt{2\sigma^2_\delta}`
    (null when :math:`\sigma^2_\delta \le 0`: with every facet of the system effects fixed
    there is no relative error, and no smallest detectable difference to state).
    """
    if universe.random:
        return None, ("no facet is declared fixed or drawn from a finite pool ([fit.gstudy] fixed, judge_pool, "
                      "item_pool): the universe is the random one of the D-study above")
    design = fit.design
    absent = [role for role in (*universe.fixed, *universe.pools) if _letter(role, roles) not in design.facets]
    if len(absent) == len(universe.fixed) + len(universe.pools):
        return None, (f"the declared {', '.join(absent)} {'is' if len(absent) == 1 else 'are'} not a facet of the "
                      f"fitted design {design.facets} (one level: already fixed in the study), so the universe "
                      "is the one of the D-study above")
    fixed = frozenset(_letter(r, roles) for r in universe.fixed if r not in absent)
    pools: dict[str, float] = {}
    for role, size in universe.pools.items():
        if role in absent:
            continue
        letter = _letter(role, roles)
        seen = int(levels.get(letter, 1))
        if size < seen:
            return None, f"the pool of {size} {role} is smaller than the {seen} {role} the fit has"
        pools[letter] = float(max(size, native[letter]))  # Henderson's harmonic-mean size never exceeds the pool
    try:
        point = error_variances(fit.sigma2, design, native, obj=roles.system, fixed=fixed, universe=pools)
        tau_d, delta_d, abs_d = error_variances(draws, design, native, obj=roles.system, fixed=fixed, universe=pools)
    except DesignError as error:
        return None, str(error)
    tau, delta, absolute = (float(v) for v in point)

    quantities = {
        "erho2": (truncated_ratio(tau, delta), truncated_ratio(tau_d, delta_d)),
        "phi": (truncated_ratio(tau, absolute), truncated_ratio(tau_d, abs_d)),
        "mdd95": (mdd_of_delta(delta), mdd_of_delta(delta_d)),
    }
    values: dict[str, float | None] = {}
    intervals: dict[str, dict[str, float | None]] = {}
    null_reasons: dict[str, str] = {}
    for name, (value, sample) in quantities.items():
        v = float(value)
        values[name] = v if np.isfinite(v) else None
        if values[name] is None:
            null_reasons[name] = (
                _no_error_reason(design, delta, fixed | set(pools), roles) if name == "mdd95"
                else f"tau = {tau:.4g} and its error variance are <= 0: no ratio (0/0)"
            )
        intervals[name] = percentile_interval(v, sample, level, share=True).to_json()
    return {
        "declared": universe.describe(),
        "fixed": sorted(universe.fixed),
        "pools": dict(universe.pools),
        "not_in_design": absent,
        "sizes": {f: float(native[f]) for f in design.facets if f != roles.system},
        "tau": tau,
        "sigma2_delta": delta,
        "sigma2_Delta": absolute,
        **values,
        "intervals": intervals,
        "null_reasons": null_reasons,
    }, None
