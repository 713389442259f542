"""One item set's reliability report: block, G-study, D-study, intervals and checks.

This is the library entry point the CLI and (later) the nightly flow call. It
takes records as a polars frame (``Store.scan``) and returns plain data: a
frozen request in, a JSON-ready dict out, full float64 precision (rounding is
the CLI's job). Paper symbols are spelled the same everywhere: ``sigma2_sj``,
``erho2``, ``phi``, ``mdd95``, ``ceiling``.

The two estimators' computations live here (the balanced block's
:class:`GStudyChunks`, Henderson's :func:`henderson_report` on every record);
the report they publish is built once, by
:func:`jurymeter.stats.gstudy_report.gstudy_report`. The parts: the fitted
design (:mod:`~jurymeter.stats.fitted_design`), the D-study and its notes
(:mod:`~jurymeter.stats.dstudy_report`), the nested split
(:mod:`~jurymeter.stats.nested_split`), Henderson's cells
(:mod:`~jurymeter.stats.henderson_cells`); which estimator a fit takes is
:mod:`~jurymeter.stats.estimator_choice`.
"""

from __future__ import annotations

import numbers
from dataclasses import dataclass
from typing import Any, Literal, NoReturn, TypeVar

import numpy as np
import polars as pl

from jurymeter.errors import DesignError
from jurymeter.stats.block_rule import GENERATION_MODES
from jurymeter.stats.block_rule import (
    generation_mode as generation_mode,  # its home before; callers import it here
)
from jurymeter.stats.blocks import BalancedBlock, BlockLayout, GenerationMode, balanced_block
from jurymeter.stats.bootstrap import (
    DEFAULT_RESAMPLES,
    IntervalMethod,
    intervals_from_draws,
    resample_components,
)
from jurymeter.stats.diagnostics import (
    EnsembleRefits,
    item_diagnostics_from_means,
    mdd_false_positive_rate,
    naive_halfwidth_from_means,
    system_item_means,
)
from jurymeter.stats.dstudy import PAPER_ROLES
from jurymeter.stats.dstudy_report import ReportNotes, dstudy_summary
from jurymeter.stats.fitted_design import fitted_design, henderson_design
from jurymeter.stats.gstudy import GStudy, TermSums, fit_terms
from jurymeter.stats.gstudy_report import (
    HendersonParts,
    ReportParts,
    balanced_judge_offsets,
    gstudy_report,
    henderson_judge_offsets,
    intervals_and_scale,
    item_report,
    rank_reliability,
    request_json,
    single_judge_mdd,
)
from jurymeter.stats.henderson import (
    DENSE_CODES_PER_RECORD,
    HENDERSON_INTERVALS,
    HendersonFit,
    HendersonIntervals,
    chisquare_draws,
    column_codes,
    interval_draws_kind,
)
from jurymeter.stats.henderson_cells import (
    AVERAGE_CELL_KEYS,
    FACET_CELL_KEYS,
    Cells,
    FrameCells,
    block_dropped,
)
from jurymeter.stats.nested_split import NestedSplitChunks
from jurymeter.stats.universe import Universe, universe_report

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
    # The declared universe of generalization (``[fit.gstudy] fixed``, ``judge_pool``, ``item_pool``):
    # the report's ``universe`` block; 0 = an unlimited pool.
    fixed: tuple[str, ...] = ()
    judge_pool: int = 0
    item_pool: int = 0

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
        for name in ("judge_pool", "item_pool"):
            object.__setattr__(self, name, _integer(name, getattr(self, name), 0))
        if not isinstance(self.fixed, tuple) or not all(isinstance(v, str) for v in self.fixed):
            _refuse("fixed", self.fixed, "a tuple of facet names")
        try:
            self.universe()
        except DesignError as error:
            _refuse("fixed", self.fixed, f"a valid universe ({error})")

    def universe(self) -> Universe:
        """The declared universe of generalization (:class:`jurymeter.stats.universe.Universe`)."""
        pools = {role: size for role, size in (("judges", self.judge_pool), ("items", self.item_pool)) if size}
        return Universe(fixed=self.fixed, pools=pools)


Estimator = Literal["auto", "henderson", "balanced"]
ESTIMATORS: tuple[Estimator, ...] = ("auto", "henderson", "balanced")
INTERVAL_METHODS: tuple[IntervalMethod, ...] = ("pivotal", "percentile")
_Choice = TypeVar("_Choice", bound=str)


def estimator(value: str) -> Estimator:
    """``value`` as an estimator, refused as :class:`GStudyRequest` refuses it."""
    return _choice("estimator", value, ESTIMATORS)


def henderson_intervals(value: str) -> HendersonIntervals:
    """``value`` as a Henderson interval choice, refused as :class:`GStudyRequest` refuses it."""
    return _choice("henderson_intervals", value, HENDERSON_INTERVALS)


def interval_method(value: str) -> IntervalMethod:
    """``value`` as an interval method, refused as :class:`GStudyRequest` refuses it."""
    return _choice("interval_method", value, INTERVAL_METHODS)


def _choice(name: str, value: str, allowed: tuple[_Choice, ...]) -> _Choice:
    """``value`` as one of ``allowed`` (the field ``name``'s literals), else :func:`_refuse`."""
    for choice in allowed:
        if value == choice:
            return choice
    _refuse(name, value, f"one of {allowed}")


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
        """The report (what :func:`assess_item_set` returns), built by :func:`~jurymeter.stats.gstudy_report.gstudy_report`."""
        return _balanced_report(self)

    def nested_split(self, notes: ReportNotes) -> dict[str, Any] | None:
        """The nested split of system variance, or ``None``; its nulls' reasons go to ``notes``."""
        if self.nested is None:
            notes.null_reasons["nested"] = (
                "no nested split: it needs the systems table's models (two or more with two or more "
                "configurations each) and generations averaged"
            )
            return None
        nested = self.nested.result()
        for key, value in nested.items():
            if value is None:
                notes.null_reasons[f"nested.{key}"] = (
                    "sigma2_m and sigma2_c_m are both <= 0" if key == "config_share_of_system_variance"
                    else "sigma2_m <= 0 and its error variance <= 0 (0/0)"
                )
        return nested


def _balanced_report(chunks: GStudyChunks) -> dict[str, Any]:
    """The balanced block's parts of the report, computed from the chunks' sums, and the report."""
    layout, request = chunks.layout, chunks.request
    fit = fit_terms(chunks.terms)
    design = chunks.fitted.design
    fixed = PAPER_ROLES.judge_fixed(design)
    item_means = np.concatenate(chunks.item_means, axis=1)
    system_means = item_means.mean(axis=1)
    sd_means = float(np.std(system_means, ddof=1)) if len(system_means) > 1 else float("nan")
    # bootstrap_reliability's draws, kept: the declared universe's intervals are of the same draws
    draws = resample_components(fit, request.n_boot, request.seed, method=request.interval_method)
    boot = intervals_from_draws(
        fit, draws, target=request.target, sd_of_system_means=sd_means, method=request.interval_method,
    )
    notes = ReportNotes(fit, PAPER_ROLES)  # the summary's and the checks' below, in one set of dicts
    universe = _universe(fit, draws, PAPER_ROLES.observed(design, fit.sizes), request, notes)
    summary = dstudy_summary(fit, target=request.target, budgets=request.budgets, notes=notes)
    naive = _naive_bootstrap(chunks, fit, notes)
    items = (
        item_diagnostics_from_means(item_means, splits=request.splits, seed=request.seed)
        if len(layout.systems) >= 4
        else None
    )
    if items is None:
        notes.null_reasons["items"] = (
            f"split-half item diagnostics need at least 4 systems; the block has {len(layout.systems)}"
        )
    ensembles = _ensembles(chunks, fit, notes, fixed=fixed)
    screened = [layout.items[k] for k in items.screened(request.screen_threshold)] if items else []
    scale = intervals_and_scale(notes, summary, boot, sd_means, fixed=fixed)
    wrong = rank_reliability(notes, fit, fit.sizes[PAPER_ROLES.item], request.seed, fixed=fixed)
    fpr = _false_positive_rate(chunks, fit, notes)
    judge_means = chunks.judge_sums / chunks.judge_count if chunks.judge_sums is not None else None
    offsets = balanced_judge_offsets(layout.judges, judge_means, chunks.fitted, fit, notes)
    return gstudy_report(ReportParts(
        item_set=request.item_set, request=request_json(request), fitted=chunks.fitted,
        block_design=layout.design, block=layout.summary(), fit=fit, boot=boot, summary=summary, scale=scale,
        sd_means=sd_means, system_means=dict(zip(layout.systems, system_means.tolist(), strict=True)),
        method=boot.method, naive=naive, rank_reliability={**wrong, "mdd_false_positive_rate": fpr},
        ensembles=ensembles,
        items=None if items is None else item_report(items, layout.items, request.screen_threshold, screened, notes),
        nested=chunks.nested_split(notes), judge_offsets=offsets, universe=universe,
    ))


def _universe(
    fit: GStudy, draws: np.ndarray, native: dict[str, float], request: GStudyRequest, notes: ReportNotes
) -> dict[str, Any] | None:
    """The report's ``universe`` block (:func:`jurymeter.stats.universe.universe_report`), its null reasons in ``notes``."""
    levels = {f: int(n) for f, n in fit.sizes.items()}
    block, reason = universe_report(fit, draws, native, request.universe(), levels)
    if block is None:
        notes.null_reasons["universe_dstudy"] = str(reason)
        return None
    for key, why in block.pop("null_reasons").items():
        notes.null_reasons[f"universe_dstudy.{key}"] = why
    return block


def _naive_bootstrap(chunks: GStudyChunks, fit: GStudy, notes: ReportNotes) -> dict[str, Any]:
    """The naive item bootstrap of the first judge's first run, against the single-judge MDD."""
    request, design, roles = chunks.request, chunks.fitted.design, PAPER_ROLES
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
    single = single_judge_mdd(notes, design, fit.sizes[roles.item], generations)
    over: float | None
    if single is not None and halfwidth is not None and halfwidth > 0:
        over = single / halfwidth
    else:
        over = notes.value(
            "naive_item_bootstrap.mdd95_over_halfwidth", None,
            "the single-judge MDD or the half-width is undefined or zero",
        )
    return {"halfwidth": halfwidth, "mdd95_single_judge": single, "mdd95_over_halfwidth": over,
            "generations": generations}


def _ensembles(chunks: GStudyChunks, fit: GStudy, notes: ReportNotes, *, fixed: bool) -> dict[str, Any]:
    """Each ensemble size's refits against the prediction sigma2_sj / k, with their nulls."""
    ensembles = {}
    for k in chunks.request.ensembles:
        refits = chunks.ensembles.get(k)
        if refits is None and fixed:
            notes.judge_fixed(f"ensembles.{k}", f"the ensembles of {k} judges")
            continue
        if refits is None:
            notes.null_reasons[f"ensembles.{k}"] = (
                f"not run: ensembles of {k} judges need at least {2 * k} judges; "
                f"the block has {len(chunks.layout.judges)}"
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
    return ensembles


def _false_positive_rate(chunks: GStudyChunks, fit: GStudy, notes: ReportNotes) -> float | None:
    """The MDD's false-positive rate over refitted null data sets, or ``None`` when skipped."""
    request, used = chunks.request, chunks.layout.observations_used
    if used > FPR_MAX_OBSERVATIONS or request.fpr_simulations == 0:
        return notes.value(
            "rank_reliability.mdd_false_positive_rate", None,
            f"skipped: fpr_simulations = 0 or more than {FPR_MAX_OBSERVATIONS} observations ({used})",
        )
    return notes.value(
        "rank_reliability.mdd_false_positive_rate",
        mdd_false_positive_rate(fit, simulations=request.fpr_simulations, seed=request.seed),
        "no refitted data set has a defined MDD",
    )


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
    design, roles = fitted.design, PAPER_ROLES
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
    universe = _universe(fit, draws, native, request, notes)
    summary = dstudy_summary(fit, target=request.target, budgets=request.budgets, notes=notes, native=native)
    summary["dstudy_sizes"] = dict(native)
    generations = native.get(roles.generation or "g", 1.0)
    single = single_judge_mdd(notes, design, native[roles.item], generations)
    _henderson_nulls(notes, request, fixed=fixed)
    scale = intervals_and_scale(notes, summary, boot, sd_means, fixed=fixed)
    items_native = max(1, round(native[roles.item]))
    wrong = rank_reliability(notes, fit, items_native, request.seed, fixed=fixed, sample_items=items_native)
    dropped = block_dropped(layout, cells) if layout is not None else []
    if layout is None:
        notes.null_reasons["balanced_block"] = balanced or "no balanced block"
    note = (
        "Henderson's Method I on every record"
        + (f"; the balanced block would drop {'; '.join(dropped)}" if dropped else "")
        + (f"; no balanced block: {balanced}" if layout is None and balanced else "")
    )
    return gstudy_report(ReportParts(
        item_set=request.item_set, request=request_json(request), fitted=fitted,
        block_design=None if layout is None else layout.design, block=_henderson_block(cells, fit),
        fit=fit, boot=boot, summary=summary, scale=scale, sd_means=sd_means,
        system_means=dict(zip(system_ids, system_means.tolist(), strict=True)),
        method=f"{boot.method} ({'records' if kind == 'records' else 'chi-square'})",
        naive={"halfwidth": None, "mdd95_single_judge": single, "mdd95_over_halfwidth": None,
               "generations": generations},
        rank_reliability={**wrong, "mdd_false_positive_rate": None}, ensembles={}, items=None, nested=None,
        judge_offsets=henderson_judge_offsets(cells, fitted, fit, notes), universe=universe,
        henderson=HendersonParts(
            estimator_note=note, balanced_block=None if layout is None else layout.summary(),
            balanced_block_drops=dropped,
            system_means_kind="raw: each system's mean over all its cells (not adjusted for which items or judges)",
            method_note=kind_note, ems_coefficients=np.asarray(fit.coefficients, dtype=float).tolist(),
        ),
    ))


def _henderson_nulls(notes: ReportNotes, request: GStudyRequest, *, fixed: bool) -> None:
    """Why the parts that need a dense block are null in a Henderson report."""
    dense = "it needs a complete system x item table (a balanced block); the Henderson fit uses every record"
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


def _henderson_block(cells: Cells, fit: HendersonFit) -> dict[str, Any]:
    """The report's ``block`` of a Henderson fit: every cell's counts (nothing dropped)."""
    roles = PAPER_ROLES
    present = cells.combinations(["system_id", "item_id", "judge_id"])
    n_s, n_i, n_j = (cells.distinct(c) for c in ("system_id", "item_id", "judge_id"))
    return {
        "systems": n_s, "items": n_i, "judges": n_j,
        "replicates": int(fit.sizes.get(roles.replicate or "r", 1)),
        "generations": int(fit.sizes.get(roles.generation or "g", 1)),
        "completeness": present / (n_s * n_i * n_j),
        "records_in": cells.records_in(),
        "observations_used": fit.n_records,
        "dropped_systems": [], "dropped_items": [], "dropped_judges": [],
        "notes": [],
    }
