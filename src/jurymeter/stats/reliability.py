"""One item set's reliability report: block, G-study, D-study, intervals and checks.

This is the library entry point the CLI and (later) the nightly flow call. It
takes records as a polars frame (``Store.scan``) and returns plain data: a
frozen request in, a JSON-ready dict out, full float64 precision (rounding is
the CLI's job). Paper symbols are spelled the same everywhere: ``sigma2_sj``,
``erho2``, ``phi``, ``mdd95``, ``ceiling``.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any, Literal, NoReturn

import numpy as np
import polars as pl

from jurymeter.errors import DesignError
from jurymeter.stats.blocks import (
    FACET_KEYS as BLOCK_FACET_KEYS,
)
from jurymeter.stats.blocks import (
    BalancedBlock,
    BlockLayout,
    CellSums,
    GenerationMode,
    averaged_cells,
    balanced_block,
)
from jurymeter.stats.bootstrap import (
    DEFAULT_RESAMPLES,
    Interval,
    IntervalMethod,
    bootstrap_reliability,
    intervals_from_draws,
)
from jurymeter.stats.design import Design
from jurymeter.stats.diagnostics import (
    EnsembleRefits,
    item_diagnostics_from_means,
    mdd_false_positive_rate,
    naive_halfwidth_from_means,
    system_item_means,
    wrong_order_probability,
)
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
from jurymeter.stats.gstudy import GStudy, TermSums, fit_terms
from jurymeter.stats.henderson import (
    DEFAULT_COLUMNS,
    HENDERSON_INTERVALS,
    HendersonFit,
    HendersonIntervals,
    RecordPattern,
    chisquare_draws,
    interval_draws_kind,
)
from jurymeter.stats.intervals import percentile_bounds

NOMOGRAM_JUDGES = (1, 2, 3, 4, 5, 6, 8, 10, 15, 20)
NOMOGRAM_ITEMS = (5, 10, 20, 30, 50, 100, 200, 500, 1000)
# The MDD false-positive check refits whole simulated data sets; above this many
# observations per data set it is skipped (reported as null) to keep a nightly
# fit cheap.
FPR_MAX_OBSERVATIONS = 200_000


@dataclass(frozen=True, slots=True)
class GStudyRequest:
    """What to fit for one item set (validated at construction).

    ``judges`` and ``systems`` restrict the fit to a judge universe and a system
    population (``None`` = all in the data). ``henderson_intervals`` chooses the
    interval draws of a Henderson I fit: ``"records"`` (the record-pattern
    bootstrap), ``"chisquare"`` (fast) or ``"auto"`` (default: the record
    bootstrap up to a size, chi-square draws above it; :func:`~jurymeter.stats.henderson.interval_draws_kind`,
    ``docs/henderson.md``).

    Raises
    ------
    DesignError
        Any field of the wrong type or out of range; the message names the
        field, the value given and what is allowed. Integer and real fields
        accept numpy scalars and are stored as Python ``int`` / ``float``.
    """

    item_set: str
    judges: tuple[str, ...] | None = None
    systems: tuple[str, ...] | None = None
    generations: GenerationMode = "average"
    n_boot: int = DEFAULT_RESAMPLES
    seed: int = 0
    target: float = 0.8
    ensembles: tuple[int, ...] = (2, 3)
    partitions: int = 60
    splits: int = 200
    screen_threshold: float = 1.0
    budgets: tuple[int, ...] = (120, 360, 1080)
    fpr_simulations: int = 200
    interval_method: IntervalMethod = "pivotal"
    estimator: Estimator = "auto"
    henderson_intervals: HendersonIntervals = "auto"

    def __post_init__(self) -> None:
        if not isinstance(self.item_set, str) or not self.item_set:
            _refuse("item_set", self.item_set, "a non-empty string")
        for name in ("judges", "systems"):
            levels = getattr(self, name)
            if levels is not None and (
                not isinstance(levels, tuple) or not levels or not all(isinstance(v, str) for v in levels)
            ):
                _refuse(name, levels, "None (all in the data) or a non-empty tuple of str ids")
        if self.generations not in GENERATION_MODES:
            _refuse("generations", self.generations, f"one of {GENERATION_MODES}")
        if self.interval_method not in INTERVAL_METHODS:
            _refuse("interval_method", self.interval_method, f"one of {INTERVAL_METHODS}")
        if self.estimator not in ESTIMATORS:
            _refuse("estimator", self.estimator, f"one of {ESTIMATORS}")
        if self.henderson_intervals not in HENDERSON_INTERVALS:
            _refuse("henderson_intervals", self.henderson_intervals, f"one of {HENDERSON_INTERVALS}")
        for name, low in (("n_boot", 1), ("seed", 0), ("partitions", 1), ("splits", 1), ("fpr_simulations", 0)):
            object.__setattr__(self, name, _integer(name, getattr(self, name), low))
        target = _real(self.target)
        if target is None or not 0 < target < 1:
            _refuse("target", self.target, "a number strictly between 0 and 1")
        object.__setattr__(self, "target", target)
        threshold = _real(self.screen_threshold)
        if threshold is None or not np.isfinite(threshold):
            _refuse("screen_threshold", self.screen_threshold, "a finite number")
        object.__setattr__(self, "screen_threshold", threshold)
        for name, low, allowed in (
            ("ensembles", 2, "a tuple of ints >= 2 (judges per ensemble), possibly empty"),
            ("budgets", 1, "a tuple of ints >= 1 (judge calls per system), possibly empty"),
        ):
            values = getattr(self, name)
            if not isinstance(values, tuple) or any((k := _int_or_none(v)) is None or k < low for v in values):
                _refuse(name, values, allowed)
            object.__setattr__(self, name, tuple(int(v) for v in values))


Estimator = Literal["auto", "henderson", "balanced"]
ESTIMATORS: tuple[Estimator, ...] = ("auto", "henderson", "balanced")
GENERATION_MODES: tuple[GenerationMode, ...] = ("average", "facet")
INTERVAL_METHODS: tuple[IntervalMethod, ...] = ("pivotal", "percentile")


def generation_mode(value: str) -> GenerationMode:
    """``value`` as a generation mode, refused as :class:`GStudyRequest` refuses it."""
    if value not in GENERATION_MODES:
        _refuse("generations", value, f"one of {GENERATION_MODES}")
    return value


def estimator(value: str) -> Estimator:
    """``value`` as an estimator, refused as :class:`GStudyRequest` refuses it."""
    if value not in ESTIMATORS:
        _refuse("estimator", value, f"one of {ESTIMATORS}")
    return value


def henderson_intervals(value: str) -> HendersonIntervals:
    """``value`` as a Henderson interval choice, refused as :class:`GStudyRequest` refuses it."""
    if value not in HENDERSON_INTERVALS:
        _refuse("henderson_intervals", value, f"one of {HENDERSON_INTERVALS}")
    return value


def interval_method(value: str) -> IntervalMethod:
    """``value`` as an interval method, refused as :class:`GStudyRequest` refuses it."""
    if value not in INTERVAL_METHODS:
        _refuse("interval_method", value, f"one of {INTERVAL_METHODS}")
    return value


def _refuse(name: str, value: object, allowed: str) -> NoReturn:
    msg = f"GStudyRequest.{name} must be {allowed}; got {value!r}"
    raise DesignError(msg)


def _int_or_none(value: object) -> int | None:
    """``value`` as an int when it is an integer (numpy integers too, not bools), else ``None``."""
    if isinstance(value, numbers.Integral) and not isinstance(value, bool):
        return int(value)
    return None


def _integer(name: str, value: object, low: int) -> int:
    number = _int_or_none(value)
    if number is None or number < low:
        _refuse(name, value, f"an int >= {low}")
    return number


def _real(value: object) -> float | None:
    """``value`` as a float when it is a real number (numpy reals too, not bools), else ``None``."""
    if isinstance(value, numbers.Real) and not isinstance(value, bool):
        return float(value)
    return None


def restrict(records: pl.LazyFrame, request: GStudyRequest) -> pl.LazyFrame:
    """Keep the item set's records of the requested judges and systems."""
    out = records
    if request.judges is not None:
        out = out.filter(pl.col("judge_id").is_in(list(request.judges)))
    if request.systems is not None:
        out = out.filter(pl.col("system_id").is_in(list(request.systems)))
    return out


def _interval(i: Interval) -> dict[str, float | None]:
    return i.to_json()


def _components(fit: GStudy, boot: Any) -> dict[str, dict[str, Any]]:
    """The report's ``components``: each effect's raw estimate, share, df, mean square and interval."""
    return {
        f"sigma2_{label.replace(':', '_')}": {
            "raw": float(fit.sigma2[k]),
            "share": float(fit.shares[k]),
            "df": float(fit.df[k]),
            "ms": float(fit.ms[k]),
            "interval": _interval(boot.sigma2[label]),
        }
        for k, label in enumerate(fit.effects)
    }


@dataclass(frozen=True, slots=True)
class FittedDesign:
    """The design a block is fitted with: the block's, less every facet with one level.

    ``squeeze`` holds the block array's axes that leave (each of length one),
    ``fixed`` the facets fixed for the study with their one level
    (``{"j": "gpt-4"}``), ``notes`` why, in words (the report's ``design_notes``).
    """

    design: Design
    squeeze: tuple[int, ...]
    fixed: dict[str, str]
    notes: tuple[str, ...]

    @property
    def judge_fixed(self) -> bool:
        return PAPER_ROLES.judge_fixed(self.design)


def fitted_design(layout: BlockLayout) -> FittedDesign:
    r"""The design read from a block: a facet with one level leaves it (issue 14, point 1).

    Rule (``docs/gstudy.md``, "Designs read from the data"): the systems are the
    object of measurement and the items the facet every D-study sizes, so a
    block needs at least two of each; a judge, generation or replicate facet
    with one level leaves the design, its letter removed from every nesting
    (``s x i x j x r:sij`` with one judge is ``s x i x r:si``;
    ``s x i x j x g:si x r:sijg`` is ``s x i x g:si x r:sig``). With one judge
    the judge is fixed: its interaction with the systems is part of
    :math:`\sigma^2_s` and every D-study quantity is for that judge.

    Raises
    ------
    DesignError
        Fewer than two systems or two items in the block; the message says
        which and what the user can do.
    """
    design = layout.design
    for facet, kept, dropped, name in (
        (PAPER_ROLES.system, layout.systems, layout.dropped_systems, "system"),
        (PAPER_ROLES.item, layout.items, layout.dropped_items, "item"),
    ):
        if facet in design.facets and len(kept) < 2:
            left = f" ({len(dropped)} dropped to balance the block)" if dropped else ""
            msg = (
                f"the balanced block has {len(kept)} {name}(s) {list(kept)}{left}; a G-study of systems needs "
                f"at least 2 {name}s judged by the same judges: add records of another {name} to the item set, "
                "or restrict the judges (a universe in the config, --universe) to those that judged several"
            )
            raise DesignError(msg)
    counts = {
        PAPER_ROLES.judge: len(layout.judges),
        PAPER_ROLES.generation: layout.n_generations,
        PAPER_ROLES.replicate: layout.n_replicates,
    }
    gone = [f for f in design.facets if counts.get(f, 2) < 2]
    fixed: dict[str, str] = {}
    notes: list[str] = []
    if PAPER_ROLES.judge in gone:
        judge = layout.judges[0]
        fixed[PAPER_ROLES.judge] = judge
        left = (
            f" ({len(layout.dropped_judges)} other judge(s) dropped to balance the block: "
            f"{', '.join(layout.dropped_judges)})" if layout.dropped_judges else ""
        )
        notes.append(
            f"one judge ({judge}) in the block{left}: the judge facet is fixed; E rho^2, MDD and items-needed "
            "are for that judge, and the ceiling, judges-needed, the budget split over judges and the "
            "ensembles are not estimable"
        )
    for facet in gone:
        if facet != PAPER_ROLES.judge:  # the block rule drops these itself; a layout that kept one says so
            notes.append(f"one level of facet {facet!r} in the block: the facet leaves the design")
    if not gone:
        return FittedDesign(design, (), {}, ())
    parts = []
    for f in design.facets:
        if f in gone:
            continue
        nest = "".join(g for g in design.facets if g in design.nests[f] and g not in gone)
        parts.append(f"{f}:{nest}" if nest else f)
    squeeze = tuple(design.facets.index(f) for f in gone)
    return FittedDesign(Design.parse(" x ".join(parts)), squeeze, fixed, tuple(notes))


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


def assess_item_set(
    records: pl.LazyFrame | pl.DataFrame,
    request: GStudyRequest,
    *,
    systems: pl.DataFrame | None = None,
) -> dict[str, Any]:
    """Fit the item set and return the whole report as JSON-ready data.

    ``systems`` is the systems metadata table (``system_id``, ``model``,
    ``config``); when it nests configurations in models, the report adds the
    nested split of system variance (:func:`nested_system_split`).
    """
    lazy = records.lazy() if isinstance(records, pl.DataFrame) else records
    block = balanced_block(restrict(lazy, request), generations=request.generations)
    return assess_block(block, request, systems=systems)


def _nested_order(
    layout: BlockLayout, systems: pl.DataFrame, design: Design | None = None
) -> tuple[list[int], int, Design, list[str], int] | None:
    """The rule of :func:`nested_layout`: the systems' order, the number of models, the design, the models and ``k``.

    ``design``: the block's fitted design (default: the layout's); without a
    judge facet (one judge) the nested design has none either.
    """
    if "model" not in systems.columns:
        return None
    position = {sid: k for k, sid in enumerate(layout.systems)}
    meta = (
        systems.filter(pl.col("system_id").is_in(list(layout.systems)) & pl.col("model").is_not_null())
        .unique("system_id", keep="first")
        .sort("model", "system_id")
    )
    by_model = meta.group_by("model", maintain_order=True).agg(pl.col("system_id"))
    groups = [(m, ids) for m, ids in by_model.iter_rows() if len(ids) >= 2]
    if len(groups) < 2:
        return None
    k = min(len(ids) for _, ids in groups)
    order = [position[sid] for _, ids in groups for sid in ids[:k]]
    facets = (design or layout.design).facets
    judge = "j" if "j" in facets else ""
    spec = "(c:m) x i" + (" x j" if judge else "") + (f" x r:mci{judge}" if "r" in facets else "")
    return order, len(groups), Design.parse(spec), [m for m, _ in groups], k


def nested_layout(block: BalancedBlock, systems: pl.DataFrame) -> tuple[np.ndarray, Design, list[str], int] | None:
    """Rearrange a block's systems into (model, configuration-within-model) axes.

    Rule: models with a single configuration are dropped (nothing to nest); ``k``
    is the smallest number of configurations among the rest; each model keeps its
    first ``k`` systems by id. Returns the array with axes (m, c, i, j[, r]), its
    design ``(c:m) x i x j [x r:mcij]``, the models kept and ``k``; ``None`` when
    fewer than two models remain.
    """
    found = _nested_order(block.layout, systems)
    if found is None:
        return None
    order, n_models, design, models, k = found
    picked = block.x[order]
    return picked.reshape(n_models, k, *picked.shape[1:]), design, models, k


def nested_system_split(block: BalancedBlock, systems: pl.DataFrame) -> dict[str, Any] | None:
    """System variance split into model and configuration-within-model (paper appendix).

    Also the ceiling with the model as the object of measurement: one
    configuration, one judge, unlimited items and runs.
    """
    chunks = NestedSplitChunks.of(block.layout, systems)
    return None if chunks is None else chunks.add(block.x).result()


class NestedSplitChunks:
    """:func:`nested_system_split` accumulated over item chunks of the block."""

    def __init__(self, order: list[int], n_models: int, design: Design, models: list[str], k: int) -> None:
        self.order, self.n_models, self.design, self.models, self.k = order, n_models, design, models, k
        self.terms = TermSums(design, PAPER_ROLES.item)

    @classmethod
    def of(
        cls, layout: BlockLayout, systems: pl.DataFrame, design: Design | None = None
    ) -> NestedSplitChunks | None:
        found = _nested_order(layout, systems, design)
        return None if found is None else cls(*found)

    def add(self, x: np.ndarray) -> NestedSplitChunks:
        picked = x[self.order]
        self.terms.add(picked.reshape(self.n_models, self.k, *picked.shape[1:]))
        return self

    def result(self) -> dict[str, Any]:
        design = self.design
        fit = fit_terms(self.terms)
        m, cm = fit.component("m"), fit.component("c:m")
        sizes = {"c": 1.0, "i": np.inf, "j": 1.0}
        if "r" in design.facets:
            sizes["r"] = np.inf
        total = max(m, 0.0) + max(cm, 0.0)
        return {
            "design": _design_text(design),
            "models": self.models,
            "configs_per_model": self.k,
            "sigma2_m": m,
            "sigma2_c_m": cm,
            "config_share_of_system_variance": max(cm, 0.0) / total if total > 0 else None,
            "ceiling_model_as_object": _none_if_nan(float(erho2(fit.sigma2, design, sizes, obj="m"))),
            "components": {
                f"sigma2_{label.replace(':', '_')}": float(v) for label, v in zip(fit.effects, fit.sigma2, strict=True)
            },
        }


def assess_block(
    block: BalancedBlock, request: GStudyRequest, *, systems: pl.DataFrame | None = None
) -> dict[str, Any]:
    """The report for an already extracted balanced block (what :func:`assess_item_set` returns).

    :class:`GStudyChunks` over the block as one chunk.
    """
    return GStudyChunks(block.layout, request, systems=systems).add(block.x).report()


class GStudyChunks:
    """What the G-study report reads from a block, accumulated item chunk by item chunk.

    The report is a function of: the block's :class:`TermSums` (the G-study,
    from which the D-study, the parametric bootstrap and the rank checks follow),
    the (system, item) means and those of the first judge's first run (item
    diagnostics, naive bootstrap), the ensembles' refits and the nested split,
    each a sum over items or a per-item column. So a block too large to hold can
    be fitted from its chunks (:class:`jurymeter.stats.blocks.FitChunks`), in memory
    of the order of systems x items.
    """

    def __init__(self, layout: BlockLayout, request: GStudyRequest, *, systems: pl.DataFrame | None = None) -> None:
        self.layout, self.request = layout, request
        self.fitted = fitted_design(layout)  # a facet with one level leaves the design
        design = self.fitted.design
        self.terms = TermSums(design, PAPER_ROLES.item)
        self.item_means: list[np.ndarray] = []
        self.one_judge_means: list[np.ndarray] = []
        # Per judge, the sum of its scores over the block and how many (judge offsets).
        self.judge_sums: np.ndarray | None = None
        self.judge_count = 0
        n_judges = len(layout.judges)
        self.ensembles = {
            k: EnsembleRefits(design, n_judges, k=k, partitions=request.partitions, seed=request.seed + k)
            for k in request.ensembles
            if n_judges // k >= 2
        }
        self.nested = (
            NestedSplitChunks.of(layout, systems, design)
            if systems is not None and "g" not in design.facets
            else None
        )

    def add(self, x: np.ndarray) -> GStudyChunks:
        """Add the block's scores of some items (all of them, in item order, in chunks).

        ``x`` has the block's axes (:attr:`BlockLayout.design`); the axes of
        facets with one level are dropped here (:func:`fitted_design`).
        """
        design = self.fitted.design
        if self.fitted.squeeze:
            x = np.squeeze(x, axis=self.fitted.squeeze)
        self.terms.add(x)
        self.item_means.append(system_item_means(x, design))
        if PAPER_ROLES.judge in design.facets:
            axis = design.facets.index(PAPER_ROLES.judge)
            sums = x.sum(axis=tuple(k for k in range(x.ndim) if k != axis))
            self.judge_sums = sums if self.judge_sums is None else self.judge_sums + sums
            self.judge_count += x.size // x.shape[axis]
        # What a careful author does today: one judge, one run, items resampled;
        # the generations of an item (a facet block's g:si) are all kept and
        # averaged, as the block with generations averaged does (_report's MDD
        # for the comparison counts them).
        first = tuple(
            slice(0, 1) if f in (PAPER_ROLES.judge, PAPER_ROLES.replicate) else slice(None) for f in design.facets
        )
        self.one_judge_means.append(system_item_means(x[first], design))
        for refits in self.ensembles.values():
            refits.add(x)
        if self.nested is not None:
            self.nested.add(x)
        return self

    def report(self) -> dict[str, Any]:
        """The report (what :func:`assess_item_set` returns)."""
        report = _report(self)
        if self.nested is None:
            report["nested"] = None
            report["null_reasons"]["nested"] = (
                "no nested split: it needs the systems table's models (two or more with two or more "
                "configurations each) and generations averaged"
            )
        else:
            report["nested"] = self.nested.result()
            for key, value in report["nested"].items():
                if value is None:
                    report["null_reasons"][f"nested.{key}"] = (
                        "sigma2_m and sigma2_c_m are both <= 0" if key == "config_share_of_system_variance"
                        else "sigma2_m <= 0 and its error variance <= 0 (0/0)"
                    )
        return report


def _report(chunks: GStudyChunks) -> dict[str, Any]:
    block, request = chunks.layout, chunks.request
    fit = fit_terms(chunks.terms)
    roles = PAPER_ROLES
    design = chunks.fitted.design
    fixed = roles.judge_fixed(design)
    item_means = np.concatenate(chunks.item_means, axis=1)
    system_means = item_means.mean(axis=1)
    sd_means = float(np.std(system_means, ddof=1)) if len(system_means) > 1 else float("nan")
    boot = bootstrap_reliability(
        fit,
        n_boot=request.n_boot,
        seed=request.seed,
        target=request.target,
        sd_of_system_means=sd_means,
        method=request.interval_method,
    )
    notes = ReportNotes(fit, roles)  # the summary's and the checks' below, in one set of dicts
    summary = dstudy_summary(fit, target=request.target, budgets=request.budgets, notes=notes)
    # The naive bootstrap resamples the first judge's first run with the
    # generations of each item averaged (GStudyChunks.add): its MDD counts the
    # same generations (all observed with generations as a facet; the block's
    # cells average them otherwise).
    generations = fit.sizes[roles.generation] if roles.generation in design.facets else 1
    halfwidth = notes.value(
        "naive_item_bootstrap.halfwidth",
        naive_halfwidth_from_means(
            np.concatenate(chunks.one_judge_means, axis=1), n_boot=request.n_boot, seed=request.seed
        ),
        f"needs at least 2 resamples; n_boot = {request.n_boot}",
    )
    single_native = notes.mdd(
        "naive_item_bootstrap.mdd95_single_judge",
        roles.sizes(design, fit.sizes[roles.item], 1, 1, generations=generations),
    )
    over: float | None
    if single_native is not None and halfwidth is not None and halfwidth > 0:
        over = single_native / halfwidth
    else:
        over = notes.value(
            "naive_item_bootstrap.mdd95_over_halfwidth", None,
            "the single-judge MDD or the half-width is undefined or zero",
        )
    n_systems = len(block.systems)
    items = (
        item_diagnostics_from_means(item_means, splits=request.splits, seed=request.seed)
        if n_systems >= 4
        else None
    )
    if items is None:
        notes.null_reasons["items"] = f"split-half item diagnostics need at least 4 systems; the block has {n_systems}"
    ensembles = {}
    for k in request.ensembles:
        refits = chunks.ensembles.get(k)
        if refits is None and fixed:
            notes.judge_fixed(f"ensembles.{k}", f"the ensembles of {k} judges")
            continue
        if refits is None:
            notes.null_reasons[f"ensembles.{k}"] = (
                f"not run: ensembles of {k} judges need at least {2 * k} judges; the block has {len(block.judges)}"
            )
            continue
        check = refits.check(fit)
        reason = f"sigma2_sj = {fit.component('sj'):.4g} <= 0: no prediction sigma2_sj / {k} to compare with"
        ensembles[str(k)] = {
            "median": notes.value(f"ensembles.{k}.median", check.median, reason),
            "low": notes.value(f"ensembles.{k}.low", check.low, reason),
            "high": notes.value(f"ensembles.{k}.high", check.high, reason),
            "partitions": len(check.ratios),
        }
    screened = [block.items[k] for k in items.screened(request.screen_threshold)] if items else []
    mdd_sd, intervals, p_ceiling = _intervals_and_scale(notes, summary, boot, sd_means, fixed=fixed)
    wrong: dict[str, float | None] = {}
    for judges, key in ((1, "wrong_order_top10_1_judge"), (3, "wrong_order_top10_3_judges")):
        if fixed and judges > 1:
            wrong[key] = notes.fixed_none(f"rank_reliability.{key}", f"the rank reliability at {judges} judges")
            continue
        n = roles.sizes(design, fit.sizes[roles.item], judges, 1)
        _, delta, _ = error_variances(fit.sigma2, design, n)
        wrong[key] = notes.value(
            f"rank_reliability.{key}",
            wrong_order_probability(fit, judges=judges, seed=request.seed),
            f"sigma2_delta = {float(delta):.4g} <= 0 {notes.where(n)} ({notes.negative(n)})",
        )
    if block.observations_used > FPR_MAX_OBSERVATIONS or request.fpr_simulations == 0:
        fpr = notes.value(
            "rank_reliability.mdd_false_positive_rate", None,
            f"skipped: fpr_simulations = 0 or more than {FPR_MAX_OBSERVATIONS} observations "
            f"({block.observations_used})",
        )
    else:
        fpr = notes.value(
            "rank_reliability.mdd_false_positive_rate",
            mdd_false_positive_rate(fit, simulations=request.fpr_simulations, seed=request.seed),
            "no refitted data set has a defined MDD",
        )
    return {
        "item_set": request.item_set,
        "request": {k: (list(v) if isinstance(v, tuple) else v) for k, v in asdict(request).items()},
        "design": _design_text(design),
        "block_design": _design_text(block.design),
        "design_notes": list(chunks.fitted.notes),
        "fixed_facets": dict(chunks.fitted.fixed),
        "block": block.summary(),
        "grand_mean": fit.grand_mean,
        "components": _components(fit, boot),
        **summary,
        "mdd95_in_sd_of_system_means": mdd_sd,
        "sd_of_system_means": sd_means,
        "system_means": dict(zip(block.systems, system_means.tolist(), strict=True)),
        "intervals": {
            **intervals,
            "n_boot": boot.n_boot,
            "level": 0.95,
            "method": boot.method,
        },
        "p_ceiling_at_least_0_8": p_ceiling,
        "naive_item_bootstrap": {
            "halfwidth": halfwidth,
            "mdd95_single_judge": single_native,
            "mdd95_over_halfwidth": over,
            "generations": generations,
        },
        "rank_reliability": {**wrong, "mdd_false_positive_rate": fpr},
        "ensembles": ensembles,
        "items": None if items is None else _item_report(items, block.items, request, screened, notes),
        "judge_offsets": _balanced_judge_offsets(chunks, fit, notes),
    }


JUDGE_OFFSETS_NOTE = (
    "offset: the judge's mean minus the grand mean of the fitted data, in points (with every record, "
    "adjusted for the (system, item) cells it scored); se and the 95 % interval are given the judges "
    "(docs/results.md, judge_effects)"
)


def _one_judge_offsets(notes: ReportNotes, judge: str | None) -> list[dict[str, Any]]:
    notes.null_reasons["judge_offsets"] = (
        f"one judge ({judge}) in the fit: an offset is a judge against the rest of its panel, and there is no "
        "other judge" if judge else "no judge facet in the fitted design: no offsets"
    )
    return []


def _balanced_judge_offsets(chunks: GStudyChunks, fit: GStudy, notes: ReportNotes) -> list[dict[str, Any]]:
    """Each judge's offset on the balanced block (:func:`jurymeter.stats.judge_effects.balanced_offsets`)."""
    from jurymeter.stats.judge_effects import balanced_offsets

    design = chunks.fitted.design
    if chunks.judge_sums is None or PAPER_ROLES.judge not in design.facets:
        return _one_judge_offsets(notes, chunks.fitted.fixed.get(PAPER_ROLES.judge))
    return balanced_offsets(
        chunks.layout.judges, chunks.judge_sums / chunks.judge_count, design, fit.sizes,
        dict(zip(design.effects, fit.sigma2.tolist(), strict=True)), mean_squares=(fit.ms, fit.df),
    )


def _item_report(
    items: Any, item_ids: tuple[str, ...] | list[str], request: GStudyRequest, screened: list[str], notes: ReportNotes
) -> dict[str, Any]:
    rho = items.split_half_rho[np.isfinite(items.split_half_rho)]
    reason = "every split has constant discriminations in a half: no rank correlation"

    median = float(np.median(rho)) if rho.size else None
    low, high = (float(b) for b in percentile_bounds(rho, 0.95)) if rho.size else (None, None)
    return {
        "discrimination": dict(zip(item_ids, items.discrimination.tolist(), strict=True)),
        "split_half_rho_median": notes.value("items.split_half_rho_median", median, reason),
        "split_half_rho_low": notes.value("items.split_half_rho_low", low, reason),
        "split_half_rho_high": notes.value("items.split_half_rho_high", high, reason),
        "screen_threshold": request.screen_threshold,
        "screened_items": screened,
    }


def _none_if_nan(value: float) -> float | None:
    return None if np.isnan(value) else value


def _design_text(design: Design) -> str:
    parts = []
    for f in design.facets:
        nest = "".join(g for g in design.facets if g in design.nests[f])
        parts.append(f"{f}:{nest}" if nest else f)
    return " x ".join(parts)


# ---------------------------------------------------------------- every record (Henderson I)

# What the Henderson path reads of a fit's records: the cells it fits are the
# (system, item, judge, replicate) means over generations (``generations="average"``,
# as the balanced block's cells) or the (system, item, judge, generation, replicate)
# records (``"facet"``).
AVERAGE_CELL_KEYS = ("system_id", "item_id", "judge_id", "replicate")
FACET_CELL_KEYS = ("system_id", "item_id", "judge_id", "generation", "replicate")


def henderson_cells(records: pl.LazyFrame | pl.DataFrame, request: GStudyRequest) -> pl.DataFrame:
    """The cells Henderson I fits: every record of the request's judges and systems with a score.

    With generations averaged, one row per (system, item, judge, replicate)
    with the mean score over its generations (the balanced block's cell); with
    generations as a facet, one row per (system, item, judge, generation,
    replicate). ``__n`` counts the records of each row. Rows are sorted by
    their keys (so the sums are the same to the last bit from run to run):
    each key is coded by its sorted distinct values and the cells are the
    non-empty entries of one ``bincount`` over the keys' crossing, in order;
    a crossing much larger than the records falls back to a polars group-by
    and sort.
    """
    from jurymeter.stats.henderson import DENSE_CODES_PER_RECORD, column_codes

    lazy = records.lazy() if isinstance(records, pl.DataFrame) else records
    keys = list(AVERAGE_CELL_KEYS if request.generations == "average" else FACET_CELL_KEYS)
    frame = (
        restrict(lazy, request)
        .filter(pl.col("score").is_not_null())
        .select(*keys, pl.col("score").cast(pl.Float64))
        .with_columns(pl.col(c).cast(pl.String) for c in ("system_id", "item_id", "judge_id"))
        .collect()
    )
    n = frame.height
    coded = [column_codes(frame.get_column(c)) for c in keys]
    shape = tuple(len(uniques) for _, uniques in coded)
    size = 1
    for length in shape:
        size *= length
    if n == 0 or size > DENSE_CODES_PER_RECORD * n + 1024:
        return (
            frame.group_by(keys)
            .agg(pl.col("score").mean(), pl.len().alias("__n"))
            .sort(keys)  # a group-by's order varies: sorted cells give the same sums to the last bit
        )
    key = np.zeros(n, dtype=np.int64)
    for (codes, _), length in zip(coded, shape, strict=True):
        key *= length
        key += codes
    counts = np.bincount(key, minlength=size)
    sums = np.bincount(key, weights=frame.get_column("score").to_numpy(), minlength=size)
    present = np.flatnonzero(counts)
    index = np.unravel_index(present, shape)
    columns = {  # string keys as an Enum of their sorted values: the codes are reused by RecordPattern.of
        c: (uniques.cast(pl.Enum(uniques.to_list())) if uniques.dtype == pl.String else uniques).gather(
            pl.Series(position.astype(np.uint32))
        )
        for c, (_, uniques), position in zip(keys, coded, index, strict=True)
    }
    n_cell = counts[present]
    return pl.DataFrame(
        {**columns, "score": sums[present] / n_cell, "__n": pl.Series(n_cell, dtype=pl.UInt32)}
    )


class CellTable:
    """Henderson's cells as a table of the keys' full crossing: what a one-scan fit already holds.

    Made by :func:`cells_from_sums`. ``present`` marks the cells holding at
    least one record, ``means`` their mean scores and ``counts`` their records;
    axes follow ``keys`` (:data:`AVERAGE_CELL_KEYS` or :data:`FACET_CELL_KEYS`)
    and their sorted ``levels``. It answers what the report asks of the cells
    (:class:`FrameCells` answers the same of a frame) without a row per cell.
    """

    def __init__(self, keys: tuple[str, ...], levels: list[list[Any]], sums: np.ndarray, counts: np.ndarray) -> None:
        self.keys, self.levels, self.counts = keys, levels, counts
        self.present = counts > 0
        self.means = np.divide(sums, counts, out=np.zeros(counts.shape), where=self.present)
        self.height = int(np.count_nonzero(self.present))

    def _over(self, keys: Sequence[str]) -> np.ndarray:
        """Present cells per combination of ``keys`` (summed over the other axes)."""
        others = tuple(k for k, c in enumerate(self.keys) if c not in keys)
        counted: np.ndarray = self.present.sum(axis=others, dtype=np.int64) if others else self.present.astype(np.int64)
        return counted

    def distinct(self, column: str) -> int:
        """Levels of ``column`` with a record."""
        return int(np.count_nonzero(self._over([column])))

    def first_level(self, column: str) -> str:
        """The first level of ``column`` with a record."""
        return str(self.levels[self.keys.index(column)][int(np.flatnonzero(self._over([column]))[0])])

    def max_rows(self, keys: Sequence[str]) -> int:
        """The most cells of any combination of ``keys``."""
        return int(self._over(keys).max())

    def combinations(self, keys: Sequence[str]) -> int:
        """Combinations of ``keys`` with a record."""
        return int(np.count_nonzero(self._over(keys)))

    def max_distinct(self, column: str, by: Sequence[str]) -> int:
        """The most levels of ``column`` with a record within one combination of ``by``."""
        within = self._over([*by, column]) > 0
        axis = [c for c in self.keys if c in (*by, column)].index(column)
        return int(within.sum(axis=axis).max())

    def records_in(self) -> int:
        return int(self.counts.sum())

    def system_means(self) -> tuple[list[str], np.ndarray]:
        """Each system's mean over its cells (raw), by sorted system id."""
        others = tuple(range(1, len(self.keys)))
        n = self.present.sum(axis=others)
        total = self.means.sum(axis=others)
        seen = n > 0
        ids = [str(v) for v, ok in zip(self.levels[0], seen, strict=True) if ok]
        return ids, total[seen] / n[seen]

    def pattern(self, design: Design) -> RecordPattern:
        """Henderson's record pattern of the present cells for ``design`` (its facets among the keys)."""
        columns = {f: DEFAULT_COLUMNS[f] for f in design.facets}
        axes = [self.keys.index(columns[f]) for f in design.facets]
        others = tuple(k for k in range(len(self.keys)) if k not in axes)
        present = self.present.sum(axis=others) if others else self.present.astype(np.int64)
        if int(present.max()) > 1:
            repeated = int((present - (present > 0)).sum())
            msg = (
                f"records: {repeated} record(s) repeat a level of every facet {design.label(design.effects[-1])!r} "
                f"({[columns[f] for f in design.facets]}); the residual needs one record per level: add a "
                "replicate facet (e.g. 'r:sij') or average the repeats first"
            )
            raise DesignError(msg)
        values = self.means.sum(axis=others) if others else self.means
        order = sorted(range(len(axes)), key=lambda k: axes[k])  # the kept axes in key order
        position = [order.index(k) for k in range(len(axes))]  # design facet k is kept axis position[k]
        return RecordPattern.of_table(design, np.transpose(present > 0, position), np.transpose(values, position))


class FrameCells:
    """:class:`CellTable`'s answers for cells as rows (:func:`henderson_cells`)."""

    def __init__(self, frame: pl.DataFrame) -> None:
        self.frame = frame
        self.height = frame.height

    def distinct(self, column: str) -> int:
        return int(self.frame.get_column(column).n_unique())

    def first_level(self, column: str) -> str:
        return str(self.frame.get_column(column)[0])

    def max_rows(self, keys: Sequence[str]) -> int:
        return int(_rows_per_key(self.frame, list(keys)).max())

    def combinations(self, keys: Sequence[str]) -> int:
        return int(np.count_nonzero(_rows_per_key(self.frame, list(keys))))

    def max_distinct(self, column: str, by: Sequence[str]) -> int:
        most = self.frame.group_by(*by).agg(pl.col(column).n_unique().alias("n"))["n"].max()
        return int(most) if isinstance(most, int) else 0

    def records_in(self) -> int:
        return int(self.frame.get_column("__n").sum())

    def system_means(self) -> tuple[list[str], np.ndarray]:
        by_system = self.frame.group_by("system_id").agg(pl.col("score").mean()).sort("system_id")
        return [str(v) for v in by_system.get_column("system_id").to_list()], by_system.get_column("score").to_numpy()

    def pattern(self, design: Design) -> RecordPattern:
        return RecordPattern.of(self.frame, design)


Cells = CellTable | FrameCells


def cells_from_sums(sums: CellSums, generations: GenerationMode) -> CellTable | None:
    """Henderson's cells from a fit's one-scan cell sums (no scan of the records); ``None`` if they cannot.

    ``sums`` are :meth:`FitChunks.cell_sums <jurymeter.stats.blocks.FitChunks.cell_sums>`
    of the fit's records (already those of its judges and systems, with no null
    score: :func:`jurymeter.stats.blocks.fit_chunks` reads no sums otherwise):
    the cells :func:`henderson_cells` reads from the records, as a table.
    Generations averaged from facet-keyed sums are summed over that axis;
    generations as a facet from averaged sums cannot be had (``None``).
    """
    if generations == "average":
        sums = averaged_cells(sums)
    elif sums.keys != BLOCK_FACET_KEYS:
        return None
    keys = AVERAGE_CELL_KEYS if generations == "average" else FACET_CELL_KEYS
    if tuple(sums.keys) != keys:
        return None
    return CellTable(keys, sums.levels, sums.sums, sums.counts)


def block_dropped(layout: BlockLayout, cells: pl.DataFrame | Cells) -> list[str]:
    """What the balanced block leaves out of ``cells`` (:func:`henderson_cells`), in words; empty when nothing."""
    found = [
        f"{len(ids)} {name}(s) ({', '.join(ids[:5])}{', ...' if len(ids) > 5 else ''})"
        for name, ids in (("system", layout.dropped_systems), ("judge", layout.dropped_judges),
                          ("item", layout.dropped_items))
        if ids
    ]
    left = cells.height - layout.observations_used
    if left > 0:
        found.append(f"{left} of {cells.height} observations")
    return found


def _rows_per_key(cells: pl.DataFrame, keys: list[str]) -> np.ndarray:
    """Rows of ``cells`` per combination of ``keys`` (zeros for absent combinations when counted densely)."""
    from jurymeter.stats.henderson import DENSE_CODES_PER_RECORD, column_codes

    n = cells.height
    coded = [column_codes(cells.get_column(c)) for c in keys]
    size = 1
    for _, uniques in coded:
        size *= len(uniques)
    if n == 0 or size > DENSE_CODES_PER_RECORD * n + 1024:
        return cells.group_by(keys).len().get_column("len").to_numpy()
    key = np.zeros(n, dtype=np.int64)
    for codes, uniques in coded:
        key *= len(uniques)
        key += codes
    counts: np.ndarray = np.bincount(key, minlength=size)
    return counts


def henderson_design(cells: pl.DataFrame | Cells, generations: GenerationMode) -> FittedDesign:
    """The design read from the cells Henderson I fits (the rule of :func:`fitted_design`, on every record).

    Systems and items are always facets (at least two of each, else
    :class:`DesignError`); the judge is a facet when there are two or more
    judges (else it is fixed, as with one judge in a block); with generations
    as a facet, ``g:si`` when some (system, item) has two or more generations;
    the replicate ``r`` (nested in every other facet) when some cell has two or more.
    """
    cells = FrameCells(cells) if isinstance(cells, pl.DataFrame) else cells
    counts = {c: cells.distinct(c) for c in ("system_id", "item_id", "judge_id")}
    for column, name in (("system_id", "system"), ("item_id", "item")):
        if counts[column] < 2:
            msg = (
                f"the records have {counts[column]} {name}(s); a G-study of systems needs at least 2 {name}s: "
                f"add records of another {name} to the item set"
            )
            raise DesignError(msg)
    facets = ["s", "i"]
    notes: list[str] = []
    fixed: dict[str, str] = {}
    if counts["judge_id"] >= 2:
        facets.append("j")
    else:
        judge = cells.first_level("judge_id")
        fixed["j"] = judge
        notes.append(
            f"one judge ({judge}) in the records: the judge facet is fixed; E rho^2, MDD and items-needed "
            "are for that judge, and the ceiling, judges-needed, the budget split over judges and the "
            "ensembles are not estimable"
        )
    inner = ["system_id", "item_id", "judge_id"]
    if generations == "facet":
        most = cells.max_distinct("generation", ["system_id", "item_id"])
        if most >= 2:
            facets.append("g")
            inner.append("generation")
        else:
            notes.append("one generation per system and item: the generation facet leaves the design")
    replicates = cells.max_rows(inner)
    if replicates >= 2:
        facets.append("r")
    else:
        notes.append("one replicate per cell: the replicate facet is confounded with the residual")
    nests = {"g": "si", "r": "".join(f for f in facets if f != "r")}
    spec = " x ".join(f"{f}:{nests[f]}" if f in nests else f for f in facets)
    return FittedDesign(Design.parse(spec), (), fixed, tuple(n for n in notes if "judge" in n))


def henderson_report(
    cells: pl.DataFrame | Cells,
    request: GStudyRequest,
    *,
    layout: BlockLayout | None = None,
    balanced: str | None = None,
) -> dict[str, Any]:
    """The G-study report fitted by Henderson's Method I on every cell (``docs/gstudy.md``, "Estimators").

    ``cells`` are :func:`henderson_cells`; ``layout`` the balanced block the
    records would give (reported as ``balanced_block``, what it drops), or
    ``None`` with ``balanced`` saying why there is none. The report has the
    keys of the balanced report: the components, the D-study at the harmonic-mean
    sizes (:attr:`HendersonFit.dstudy_sizes`), intervals from the parametric
    bootstrap on the observed pattern (:meth:`RecordPattern.bootstrap`) or
    from :func:`~jurymeter.stats.henderson.chisquare_draws` (no refit), as
    :func:`~jurymeter.stats.henderson.interval_draws_kind` chooses from
    ``request.henderson_intervals`` (``intervals.method_note`` says why), the
    leaderboard's system means (each system's mean over all its cells, raw:
    not adjusted for which items or judges it has); those that need a dense
    block (item diagnostics, the naive item bootstrap, ensembles, the nested
    split, the MDD false-positive check) are ``None`` with their reason.
    """
    cells = FrameCells(cells) if isinstance(cells, pl.DataFrame) else cells
    fitted = henderson_design(cells, request.generations)
    design = fitted.design
    roles = PAPER_ROLES
    fixed = roles.judge_fixed(design)
    pattern = cells.pattern(design)
    fit = pattern.fit()
    native = {f: fit.dstudy_sizes[f] for f in design.facets if f != roles.system}
    system_ids, system_means = cells.system_means()
    sd_means = float(np.std(system_means, ddof=1)) if len(system_means) > 1 else float("nan")
    kind, kind_note = interval_draws_kind(request.henderson_intervals, fit.n_records, request.n_boot)
    if kind == "records":
        draws = pattern.bootstrap(fit, request.n_boot, request.seed, method=request.interval_method)
    else:
        draws = chisquare_draws(fit, request.n_boot, request.seed, method=request.interval_method)
    boot = intervals_from_draws(
        fit, draws, native=native, roles=roles, target=request.target, sd_of_system_means=sd_means,
        method=request.interval_method,
    )
    notes = ReportNotes(fit, roles)
    summary = dstudy_summary(fit, target=request.target, budgets=request.budgets, notes=notes, native=native)
    summary["dstudy_sizes"] = dict(native)
    dense = "it needs a complete system x item table (a balanced block); the Henderson fit uses every record"
    generations = native.get(roles.generation or "g", 1.0)
    single_native = notes.mdd(
        "naive_item_bootstrap.mdd95_single_judge",
        roles.sizes(design, native[roles.item], 1, 1, generations=generations),
    )
    notes.null_reasons["naive_item_bootstrap.halfwidth"] = f"not run: {dense}"
    notes.null_reasons["naive_item_bootstrap.mdd95_over_halfwidth"] = "no naive half-width (not run)"
    notes.null_reasons["items"] = f"no item diagnostics: {dense}"
    for k in request.ensembles:
        if fixed:
            notes.judge_fixed(f"ensembles.{k}", f"the ensembles of {k} judges")
        else:
            notes.null_reasons[f"ensembles.{k}"] = f"not run: {dense}"
    notes.null_reasons["rank_reliability.mdd_false_positive_rate"] = (
        "not run: it refits simulated balanced data sets; the Henderson fit is of incomplete data"
    )
    notes.null_reasons["nested"] = f"no nested split: {dense}"
    mdd_sd, intervals, p_ceiling = _intervals_and_scale(notes, summary, boot, sd_means, fixed=fixed)
    items_native = max(1, round(native[roles.item]))
    wrong: dict[str, float | None] = {}
    for judges, key in ((1, "wrong_order_top10_1_judge"), (3, "wrong_order_top10_3_judges")):
        if fixed and judges > 1:
            wrong[key] = notes.fixed_none(f"rank_reliability.{key}", f"the rank reliability at {judges} judges")
            continue
        n = roles.sizes(design, items_native, judges, 1)
        _, delta, _ = error_variances(fit.sigma2, design, n)
        wrong[key] = notes.value(
            f"rank_reliability.{key}",
            wrong_order_probability(fit, judges=judges, items=items_native, seed=request.seed),
            f"sigma2_delta = {float(delta):.4g} <= 0 {notes.where(n)} ({notes.negative(n)})",
        )
    present = cells.combinations(["system_id", "item_id", "judge_id"])
    n_s, n_i, n_j = (cells.distinct(c) for c in ("system_id", "item_id", "judge_id"))
    dropped = block_dropped(layout, cells) if layout is not None else []
    if layout is None:
        notes.null_reasons["balanced_block"] = balanced or "no balanced block"
    return {
        "item_set": request.item_set,
        "request": {k: (list(v) if isinstance(v, tuple) else v) for k, v in asdict(request).items()},
        "estimator": "henderson",
        "estimator_note": (
            "Henderson's Method I on every record"
            + (f"; the balanced block would drop {'; '.join(dropped)}" if dropped else "")
            + (f"; no balanced block: {balanced}" if layout is None and balanced else "")
        ),
        "design": _design_text(design),
        "block_design": None if layout is None else _design_text(layout.design),
        "design_notes": list(fitted.notes),
        "fixed_facets": dict(fitted.fixed),
        "block": {
            "systems": n_s, "items": n_i, "judges": n_j,
            "replicates": int(fit.sizes.get(roles.replicate or "r", 1)),
            "generations": int(fit.sizes.get(roles.generation or "g", 1)),
            "completeness": present / (n_s * n_i * n_j),
            "records_in": cells.records_in(),
            "observations_used": fit.n_records,
            "dropped_systems": [], "dropped_items": [], "dropped_judges": [],
            "notes": [],
        },
        "balanced_block": None if layout is None else layout.summary(),
        "balanced_block_drops": dropped,
        "grand_mean": fit.grand_mean,
        "components": _components(fit, boot),
        **summary,
        "mdd95_in_sd_of_system_means": mdd_sd,
        "sd_of_system_means": sd_means,
        "system_means": dict(zip(system_ids, system_means.tolist(), strict=True)),
        "system_means_kind": "raw: each system's mean over all its cells (not adjusted for which items or judges)",
        "intervals": {**intervals, "n_boot": boot.n_boot, "level": 0.95, "method": f"{boot.method} ({'records' if kind == 'records' else 'chi-square'})",
                      "method_note": kind_note},
        "p_ceiling_at_least_0_8": p_ceiling,
        "naive_item_bootstrap": {
            "halfwidth": None, "mdd95_single_judge": single_native, "mdd95_over_halfwidth": None,
            "generations": generations,
        },
        "rank_reliability": {**wrong, "mdd_false_positive_rate": None},
        "ensembles": {},
        "items": None,
        "nested": None,
        "judge_offsets": _henderson_judge_offsets(cells, fitted, fit, notes),
    }


def _judge_cells(cells: Cells) -> tuple[list[str], dict[str, np.ndarray]]:
    """The (system, item, judge) cells of Henderson's cells: codes, mean score, generations and rows averaged."""
    if isinstance(cells, CellTable):
        keys = cells.keys
        inner = tuple(range(3, len(keys)))
        count = cells.present.sum(axis=inner) if inner else cells.present.astype(np.int64)
        total = (cells.means * cells.present).sum(axis=inner) if inner else cells.means
        if "generation" in keys:
            g = keys.index("generation")
            seen = cells.present.any(axis=tuple(k for k in inner if k != g))
            gens = seen.sum(axis=-1)
        else:
            gens = (count > 0).astype(np.int64)
        s_code, i_code, j_code = np.nonzero(count)
        judges = [str(v) for v in cells.levels[2]]
        return judges, {
            "system": s_code, "item": i_code, "judge": j_code,
            "y": total[s_code, i_code, j_code] / count[s_code, i_code, j_code],
            "generations": gens[s_code, i_code, j_code], "rows": count[s_code, i_code, j_code],
        }
    frame = cells.frame
    has_g = "generation" in frame.columns
    grouped = (
        frame.group_by("system_id", "item_id", "judge_id")
        .agg(
            pl.col("score").mean().alias("y"), pl.len().alias("rows"),
            (pl.col("generation").n_unique() if has_g else pl.lit(1)).alias("generations"),
        )
        .with_columns(pl.col(c).cast(pl.String) for c in ("system_id", "item_id", "judge_id"))
        .sort("system_id", "item_id", "judge_id")
    )
    judges = sorted(str(v) for v in grouped.get_column("judge_id").unique().to_list())

    def codes(column: str, levels: list[str]) -> np.ndarray:
        out: np.ndarray = grouped.get_column(column).cast(pl.Enum(levels)).to_physical().to_numpy().astype(np.int64)
        return out

    return judges, {
        "system": codes("system_id", sorted(set(grouped.get_column("system_id").to_list()))),
        "item": codes("item_id", sorted(set(grouped.get_column("item_id").to_list()))),
        "judge": codes("judge_id", judges),
        "y": grouped.get_column("y").to_numpy(),
        "generations": grouped.get_column("generations").to_numpy(),
        "rows": grouped.get_column("rows").to_numpy(),
    }


def _henderson_judge_offsets(
    cells: Cells, fitted: FittedDesign, fit: GStudy, notes: ReportNotes
) -> list[dict[str, Any]]:
    """Each judge's within-cell offset on every record (:func:`jurymeter.stats.judge_effects.incomplete_offsets`)."""
    from jurymeter.stats.judge_effects import incomplete_offsets

    design = fitted.design
    if PAPER_ROLES.judge not in design.facets:
        return _one_judge_offsets(notes, fitted.fixed.get(PAPER_ROLES.judge))
    judges, arrays = _judge_cells(cells)
    rows, reason = incomplete_offsets(
        judges, arrays["system"], arrays["item"], arrays["judge"], arrays["y"], design,
        dict(zip(design.effects, fit.sigma2.tolist(), strict=True)),
        generations=arrays["generations"], rows=arrays["rows"],
    )
    if reason is not None:
        notes.null_reasons["judge_offsets"] = reason
    return rows


def _intervals_and_scale(
    notes: ReportNotes, summary: Mapping[str, Any], boot: Any, sd_means: float, *, fixed: bool
) -> tuple[float | None, dict[str, dict[str, float | None]], float | None]:
    """The MDD in SDs of the system means, the bootstrap intervals and P(ceiling >= 0.8), with their nulls.

    Shared by the balanced and the Henderson report; with the judge fixed
    (one judge) the judge-dependent intervals are null with that reason.
    """
    mdd_sd = None
    if summary["mdd95"] is None:
        notes.null_reasons["mdd95_in_sd_of_system_means"] = "mdd95 is undefined"
    elif not sd_means > 0:
        notes.null_reasons["mdd95_in_sd_of_system_means"] = f"the system means do not vary (SD {sd_means!r})"
    else:
        mdd_sd = summary["mdd95"] / sd_means
    intervals = {name: _interval(i) for name, i in boot.derived.items()}
    judge_quantities = {
        "ceiling": "the single-judge ceiling", "ceiling_3_judges": "the ceiling at 3 judges",
        "judges_needed": "the number of judges needed", "mdd95_unlimited_items": UNLIMITED_ITEMS_FIXED,
    }
    for name, interval in intervals.items():
        if fixed and name in judge_quantities:
            intervals[name] = {key: None for key in interval}
            notes.judge_fixed(f"intervals.{name}", f"an interval of {judge_quantities[name]}")
        elif interval["low"] is None:
            notes.null_reasons[f"intervals.{name}"] = "no bootstrap draw defines it"
        elif any(v is None or (isinstance(v, float) and not math.isfinite(v)) for v in interval.values()):
            # A size never reached (judges or items needed: infinite) is null with its reason, as
            # the point estimate's own entry is (never an impossible value; issue 22).
            intervals[name] = {k: None if isinstance(v, float) and not math.isfinite(v) else v
                               for k, v in interval.items()}
            notes.null_reasons[f"intervals.{name}"] = (
                notes.null_reasons.get(name)
                or "some bootstrap draws never reach the target: the bound is unbounded")
    if fixed:
        p_ceiling = notes.fixed_none("p_ceiling_at_least_0_8", "the chance that the ceiling reaches 0.8")
    else:
        p_ceiling = notes.value(
            "p_ceiling_at_least_0_8", boot.p_ceiling_at_least_080, "no bootstrap draw defines the ceiling"
        )
    return mdd_sd, intervals, p_ceiling
