"""The D-study part of a G-study report: its point quantities (paper table 1 and appendix) and their notes.

:class:`ReportNotes` holds the report's three note dicts (why a value is
null, which coefficient sits at a truncation boundary, which quantity is
extrapolated); :func:`dstudy_summary` fills the D-study keys of the report
from a fit (balanced or Henderson) by the rules of :mod:`jurymeter.stats.dstudy`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from jurymeter.stats.dstudy import (
    MAX_JUDGES,
    PAPER_ROLES,
    Facets,
    Size,
    beyond_observed,
    budget_optimum,
    ceiling,
    delta_df,
    delta_df_of,
    erho2,
    error_variances,
    fixed_judge_reason,
    items_needed,
    judges_needed,
    mdd95,
    nomogram,
    truncated_ratio,
)
from jurymeter.stats.gstudy import GStudy
from jurymeter.stats.henderson import HendersonFit

NOMOGRAM_JUDGES = (1, 2, 3, 4, 5, 6, 8, 10, 15, 20)
NOMOGRAM_ITEMS = (5, 10, 20, 30, 50, 100, 200, 500, 1000)


class ReportNotes:
    r"""The three note dicts of a report, keyed by the quantity's path in it (``"budget_optimum.120"``).

    ``null_reasons``
        Why a value is ``None``: it cannot be estimated (a ratio 0/0, an MDD
        whose :math:`\sigma^2_\delta \le 0`, a budget split the estimates cannot
        rank), it is never reached (``judges_needed``, ``items_needed``), or
        the check was skipped or does not apply.
    ``truncated``
        A coefficient at its boundary 0 or 1 because :math:`\sigma^2_s` or its
        error variance was estimated below zero and taken as zero (the rule of
        :mod:`jurymeter.stats.dstudy`, "Boundaries").
    ``extrapolated``
        A quantity at facet sizes beyond the fitted block's (more items, judges,
        runs or generations than observed; the block's judges are the
        universe's): the components are assumed to hold there. Unlimited sizes
        (the ceilings) are limits, not extrapolations, and are not listed.
    """

    def __init__(self, fit: GStudy, roles: Facets = PAPER_ROLES) -> None:
        self.fit, self.roles = fit, roles
        self.null_reasons: dict[str, str] = {}
        self.truncated: dict[str, str] = {}
        self.extrapolated: dict[str, str] = {}

    def judge_fixed(self, key: str, what: str) -> None:
        """Record that ``key`` is ``None`` because the block's one judge is fixed (:func:`fitted_design`)."""
        self.null_reasons[key] = fixed_judge_reason(what)

    def fixed_none(self, key: str, what: str) -> float | None:
        """``None``, with :meth:`judge_fixed`'s reason recorded (for an expression)."""
        self.judge_fixed(key, what)
        return None

    def as_dict(self) -> dict[str, dict[str, str]]:
        return {"null_reasons": self.null_reasons, "truncated": self.truncated, "extrapolated": self.extrapolated}

    # ------------------------------------------------------------ helpers
    def value(self, key: str, value: float | None, reason: str) -> float | None:
        """``value`` as a float, or ``None`` (NaN or ``None`` given) with ``reason`` recorded."""
        if value is None or np.isnan(value):
            self.null_reasons[key] = reason
            return None
        return float(value)

    def where(self, n: Mapping[str, Size]) -> str:
        return "at " + ", ".join(f"n_{f}={float(np.max(v)):g}" for f, v in n.items())

    def negative(self, n: Mapping[str, Size], *, absolute: bool = False) -> str:
        """The negative raw components that enter the error variance at sizes ``n``."""
        fit = self.fit
        eye = np.eye(len(fit.effects))
        _, delta_w, abs_w = error_variances(eye, fit.design, n, obj=self.roles.system)
        weights = abs_w if absolute else delta_w
        found = [
            f"sigma2_{label.replace(':', '_')} = {fit.sigma2[k]:.4g}"
            for k, label in enumerate(fit.effects)
            if weights[k] > 0 and fit.sigma2[k] < 0
        ]
        return "negative estimates: " + ", ".join(found) if found else "no negative component"

    def beyond(self, key: str, n: Mapping[str, Size]) -> None:
        found = beyond_observed(self.fit.design, n, self.fit.sizes, self.roles)
        if found:
            self.extrapolated[key] = "; ".join(found)

    def ratio(self, key: str, n: Mapping[str, Size], *, absolute: bool = False) -> float | None:
        r""":math:`E\rho^2` (or :math:`\Phi`) at sizes ``n`` by the boundary rule, its notes recorded."""
        fit = self.fit
        tau, delta, total = (float(v) for v in error_variances(fit.sigma2, fit.design, n, obj=self.roles.system))
        error, name = (total, "sigma2_Delta") if absolute else (delta, "sigma2_delta")
        value = float(truncated_ratio(tau, error))
        if np.isnan(value):
            self.null_reasons[key] = (
                f"sigma2_s = {tau:.4g} <= 0 and {name} = {error:.4g} <= 0 {self.where(n)} "
                f"({self.negative(n, absolute=absolute)}): no variance to form a ratio (0/0)"
            )
            return None
        if tau < 0:
            self.truncated[key] = f"sigma2_s = {tau:.4g} < 0, taken as 0: no system variance detected (value 0)"
        elif error < 0:
            self.truncated[key] = (
                f"{name} = {error:.4g} < 0 {self.where(n)} ({self.negative(n, absolute=absolute)}), "
                "taken as 0 (value 1)"
            )
        self.beyond(key, n)
        return value

    def mdd(self, key: str, n: Mapping[str, Size], *, df: float | None = None) -> float | None:
        r""":math:`\mathrm{MDD}_{95}` at sizes ``n`` (``None`` when :math:`\sigma^2_\delta \le 0`)."""
        fit = self.fit
        _, delta, _ = error_variances(fit.sigma2, fit.design, n, obj=self.roles.system)
        value = float(mdd95(fit.sigma2, fit.design, n, obj=self.roles.system, df=df))
        if np.isnan(value):
            if float(delta) <= 0:
                reason = (
                    f"sigma2_delta = {float(delta):.4g} <= 0 {self.where(n)} ({self.negative(n)}): no floor "
                    "can be estimated (an MDD of 0 would call every difference detectable)"
                )
            else:
                reason = f"no t quantile: the Satterthwaite degrees of freedom are {df!r}"
            self.null_reasons[key] = reason
            return None
        self.beyond(key, n)
        return value


def dstudy_summary(
    fit: GStudy,
    *,
    target: float = 0.8,
    budgets: tuple[int, ...] = (120, 360, 1080),
    notes: ReportNotes | None = None,
    native: Mapping[str, float] | None = None,
) -> dict[str, Any]:
    """Point D-study quantities of paper table 1 and appendix, from a fit.

    ``native``: the study's own D-study sizes (default: the fit's ``sizes``,
    a balanced block's); a Henderson fit of incomplete data passes its
    ``dstudy_sizes`` (harmonic means, ``docs/henderson.md``).

    Coefficients follow the boundary rule of :mod:`jurymeter.stats.dstudy`
    (in [0, 1]); a value that cannot be estimated is ``None`` with its reason
    in ``null_reasons``, a coefficient at a truncation boundary is listed in
    ``truncated``, and a quantity beyond the block's facet sizes in
    ``extrapolated`` (:class:`ReportNotes`). The budget splits have at most the
    block's judges (the universe's judges that survived the block rule):
    a panel cannot have more distinct judges than its universe. ``notes``
    (default: new ones) receives the notes; the summary holds its dicts.
    """
    design, sigma2, roles = fit.design, fit.sigma2, PAPER_ROLES
    notes = notes if notes is not None else ReportNotes(fit, roles)
    native = dict(native) if native is not None else roles.observed(design, fit.sizes)
    at30 = roles.sizes(design, 30, 1, 1)
    unlimited = roles.sizes(design, np.inf, 1, 1)
    fixed = roles.judge_fixed(design)
    n_judges = int(fit.sizes.get(roles.judge, 1))
    tau, delta, absolute = error_variances(sigma2, design, native)
    if isinstance(fit, HendersonFit):
        t_df = delta_df_of(fit.coefficients, fit.ms, fit.df, design, native)
    else:
        t_df = delta_df(fit.ms, fit.df, design, fit.sizes, native)
    summary: dict[str, Any] = {
        "mdd95_t": notes.mdd("mdd95_t", native, df=t_df),
        "mdd95_t_df": notes.value("mdd95_t_df", t_df, "the mean squares give no Satterthwaite degrees of freedom"),
        "sizes": dict(fit.sizes),
        "sigma2_delta": float(delta),
        "sigma2_Delta": float(absolute),
        "erho2": notes.ratio("erho2", native),
        "phi": notes.ratio("phi", native, absolute=True),
        "erho2_30": notes.ratio("erho2_30", at30),
        "ceiling": _ceiling(notes, "ceiling", 1),
        "ceiling_by_judges": {str(k): _ceiling(notes, f"ceiling_by_judges.{k}", k) for k in (1, 2, 3, 5, 10)},
        "mdd95": notes.mdd("mdd95", native),
        "mdd95_30": notes.mdd("mdd95_30", at30),
        "mdd95_unlimited_items": (
            notes.fixed_none("mdd95_unlimited_items", UNLIMITED_ITEMS_FIXED) if fixed
            else notes.mdd("mdd95_unlimited_items", unlimited)
        ),
        "judges_needed": _judges_needed(notes, target),
        "items_needed": _items_needed(notes, target),
        "target": target,
        "budget_optimum": {str(c): _budget(notes, c, n_judges) for c in budgets},
        "nomogram": _nomogram(notes),
        "tau": float(tau),
    }
    summary.update(notes.as_dict())
    return summary


# With a fixed judge and unlimited items no error is left (sigma2_delta = 0): the floor the
# judge's own interaction with the systems sets is what is missing.
UNLIMITED_ITEMS_FIXED = "the MDD with unlimited items (its floor is sigma2_sj)"


def _ceiling(notes: ReportNotes, key: str, judges: int) -> float | None:
    """The ceiling at ``judges`` judges (paper eq. 4), or ``None`` with a fixed judge."""
    design, roles = notes.fit.design, notes.roles
    if roles.judge_fixed(design):
        what = "the single-judge ceiling" if judges == 1 else f"the ceiling at {judges} judges"
        return notes.fixed_none(key, what)
    return notes.ratio(key, roles.sizes(design, np.inf, judges, np.inf))


def _judges_needed(notes: ReportNotes, target: float) -> int | None:
    fit, roles = notes.fit, notes.roles
    design = fit.design
    if roles.judge_fixed(design):
        notes.judge_fixed("judges_needed", "the number of judges needed")
        return None
    k = judges_needed(fit.sigma2, design, target=target, items=30, replicates=3, roles=roles)
    if k is None:
        if fit.component(roles.system) <= 0:
            reason = f"sigma2_s = {fit.component(roles.system):.4g} <= 0: no number of judges reaches any target"
        else:
            limit = erho2(fit.sigma2, design, roles.sizes(design, 30, np.inf, 3), obj=roles.system)
            reason = (
                f"never: E rho^2 at 30 items and 3 runs stays below {target} up to {MAX_JUDGES} judges "
                f"(its limit with unlimited judges is {float(limit):.4g})"
            )
        notes.null_reasons["judges_needed"] = reason
        return None
    notes.beyond("judges_needed", roles.sizes(design, 30, k, 3))
    return k


def _items_needed(notes: ReportNotes, target: float) -> int | None:
    fit, roles = notes.fit, notes.roles
    design = fit.design
    k = items_needed(fit.sigma2, design, target=target, judges=1, replicates=1, roles=roles)
    if k is None:
        if fit.component(roles.system) <= 0:
            reason = f"sigma2_s = {fit.component(roles.system):.4g} <= 0: no number of items reaches any target"
        else:
            top = ceiling(fit.sigma2, design, roles)
            reason = f"never: the target {target} is at or above the single-judge ceiling {float(top):.4g}"
        notes.null_reasons["items_needed"] = reason
        return None
    notes.beyond("items_needed", roles.sizes(design, k, 1, 1))
    return k


def _budget(notes: ReportNotes, budget: int, max_judges: int) -> dict[str, Any]:
    fit, roles = notes.fit, notes.roles
    design = fit.design
    n_i, n_j, n_r, mdd = budget_optimum(fit.sigma2, design, budget, roles=roles, max_judges=max_judges)
    key = f"budget_optimum.{budget}"
    n = roles.sizes(design, n_i, n_j, n_r)
    n_judges: int | None = n_j
    if roles.judge_fixed(design):  # the split over items and runs for that judge
        notes.judge_fixed(f"{key}.n_j", "the split of the budget over judges")
        n_judges = None
    if np.isnan(mdd):
        _, delta, _ = error_variances(fit.sigma2, design, n, obj=roles.system)
        notes.null_reasons[key] = (
            f"sigma2_delta = {float(delta):.4g} <= 0 at the split minimizing it ({n_i} items x {n_j} judges x "
            f"{n_r} runs; {notes.negative(n)}): the estimates cannot rank the splits"
        )
        return {"n_i": None, "n_j": None, "n_r": None, "mdd95": None, "max_judges": max_judges}
    notes.beyond(key, n)
    return {"n_i": n_i, "n_j": n_judges, "n_r": n_r, "mdd95": mdd, "max_judges": max_judges}


def _nomogram(notes: ReportNotes) -> dict[str, Any]:
    fit, roles = notes.fit, notes.roles
    design = fit.design
    if roles.judge_fixed(design):  # a judges x items grid with one fixed judge: nothing to draw
        notes.judge_fixed("nomogram", "E rho^2 at other judge counts")
        return {"judges": [], "items": list(NOMOGRAM_ITEMS), "erho2": []}
    grid = nomogram(fit.sigma2, design, judges=NOMOGRAM_JUDGES, items=NOMOGRAM_ITEMS, roles=roles)
    tau = fit.component(roles.system)
    deltas = np.array([
        [float(error_variances(fit.sigma2, design, roles.sizes(design, ni, nj, 1), obj=roles.system)[1])
         for ni in NOMOGRAM_ITEMS]
        for nj in NOMOGRAM_JUDGES
    ])
    undefined = int(np.isnan(grid).sum())
    if undefined:
        notes.null_reasons["nomogram"] = (
            f"{undefined} cells have sigma2_s = {tau:.4g} <= 0 and sigma2_delta <= 0 (0/0)"
        )
    if tau < 0:
        notes.truncated["nomogram"] = f"sigma2_s = {tau:.4g} < 0, taken as 0: every defined cell is 0"
    elif (deltas < 0).any():
        notes.truncated["nomogram"] = (
            f"{int((deltas < 0).sum())} cells have sigma2_delta < 0, taken as 0 (value 1)"
        )
    beyond = []
    for name, facet, counts in (("judges", roles.judge, NOMOGRAM_JUDGES), ("items", roles.item, NOMOGRAM_ITEMS)):
        over = [str(k) for k in counts if k > fit.sizes[facet]]
        if over:
            beyond.append(f"{name} > {fit.sizes[facet]} observed ({', '.join(over)})")
    if beyond:
        notes.extrapolated["nomogram"] = "; ".join(beyond)
    return {
        "judges": list(NOMOGRAM_JUDGES),
        "items": list(NOMOGRAM_ITEMS),
        "erho2": [[None if np.isnan(v) else float(v) for v in row] for row in grid],
    }
