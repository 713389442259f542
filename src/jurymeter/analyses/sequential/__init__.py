"""The sequential-judging analysis: serial dependence, the Markov GLMM, its predictive check, selection and groups.

Runs on every pointwise item set whose records say where each rating sat in its
batch (``batch_id``, ``batch_position``): a judge that rates several outputs in
one call or session leans on the rating before ([LiDing2026]_). Per judge it
reads that judge's rated batches and runs the parts of
:mod:`jurymeter.stats.sequential`: the transition table, conditional entropies
and lag-1 serial contrast (:mod:`~jurymeter.stats.sequential.diagnostics`), the
Markov GLMM with batch-bootstrap intervals and a held-out predictive check
(:mod:`~jurymeter.stats.sequential.glmm`), and the top-k selection and the
group contrast by the naive average and by the model
(:mod:`~jurymeter.stats.sequential.compare`). A part that cannot be estimated
for a judge (a continuous score scale, too few batches, perfect separation) is
null with its reason while the other parts and judges go on. An item set without
batch positions is not applicable (the summary says why).

References
----------
.. [LiDing2026] T. Li and J. Ding, "Trustworthy Method Comparison with AI Judges:
   Estimation and Design under Order, Batch, and Aggregation Effects", 2026
   (``papers/trustworthy-comparison-ai-judges.txt``).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal, TypedDict

import polars as pl

from jurymeter.analyses.base import (
    NOT_ESTIMABLE,
    Analysis,
    FitPart,
    FitScope,
    Headline,
    HeadlineContext,
    SectionPart,
    SummaryPart,
    Table,
    TablesPart,
    Tracked,
)
from jurymeter.errors import ConfigError, JurymeterError, NotApplicableError
from jurymeter.stats.sequential import schemas
from jurymeter.stats.sequential.policy import MIN_CATEGORY_RATINGS, holdout_batches
from jurymeter.stats.sequential.policy import pool_rare_categories as pool_categories

if TYPE_CHECKING:
    import numpy as np

    from jurymeter.render.html import SectionBuilder
    from jurymeter.stats.blocks import FitChunks, GenerationMode
    from jurymeter.stats.sequential.compare import GroupComparison, TopSelection
    from jurymeter.stats.sequential.diagnostics import SerialDiagnostics
    from jurymeter.stats.sequential.glmm import GLMMBootstrap, PredictiveCheck, SequentialGLMM

# What a rated unit is: the system (one leaderboard row), the item, or one rated output of a system.
UNITS: Mapping[str, tuple[str, ...]] = {
    "system": ("system_id",), "item": ("item_id",), "output": ("system_id", "item_id"),
}
_READ = ("judge_id", "system_id", "item_id", "batch_id", "batch_position", "score")
# Resamples (and predictive-check sets) by default: the fit's [fit] n_boot, at most this many.
MAX_RESAMPLES = 200


@dataclass(frozen=True, slots=True)
class SequentialOptions:
    """The analysis's own options (``[fit.sequential]``; the ``sequential`` command's flags).

    ``lags``: the Markov order K of the GLMM (1-3); ``n_boot``: batch-bootstrap
    resamples (diagnostics, GLMM, selection, groups; 0, the default: the fit's
    ``[fit] n_boot``, at most :data:`MAX_RESAMPLES`); ``n_sim``: simulated sets of
    the predictive check (0: as ``n_boot``); ``unit``: what a rated unit is (``system``, ``item`` or
    ``output``: a system's answer to an item); ``top_k``: the selection's k;
    ``group_a`` / ``group_b``: two groups of units to compare (comma-separated
    ids; both empty: no comparison); ``reference``: which group a reference
    answer says is better (``A``, ``B`` or empty), for the comparison's outcome.
    """

    lags: int = 1
    n_boot: int = 0  # 0: the fit's [fit] n_boot, at most MAX_RESAMPLES (each resample is a GLMM refit)
    n_sim: int = 0  # 0: as n_boot
    unit: str = "system"
    top_k: int = 3
    group_a: str = ""
    group_b: str = ""
    reference: str = ""

    def __post_init__(self) -> None:
        where = "[fit.sequential]"
        if not isinstance(self.lags, int) or not 1 <= self.lags <= 3:
            msg = f"{where} lags (--lags) must be 1, 2 or 3; got {self.lags!r}"
            raise ConfigError(msg)
        for name, low in (("n_boot", 0), ("n_sim", 0), ("top_k", 1)):
            value = getattr(self, name)
            if not isinstance(value, int) or value < low:
                msg = f"{where} {name} must be an integer >= {low}; got {value!r}"
                raise ConfigError(msg)
        if self.unit not in UNITS:
            msg = f"{where} unit (--unit) must be one of {tuple(UNITS)}; got {self.unit!r}"
            raise ConfigError(msg)
        if bool(self.groups()[0]) != bool(self.groups()[1]):
            msg = f"{where} group_a and group_b (--group-a, --group-b) go together: give both or neither"
            raise ConfigError(msg)
        if self.reference.upper() not in ("", "A", "B"):
            msg = f"{where} reference (--reference) must be 'A', 'B' or empty; got {self.reference!r}"
            raise ConfigError(msg)

    def groups(self) -> tuple[tuple[str, ...], tuple[str, ...]]:
        """The two groups' unit ids (empty tuples: no comparison)."""
        return tuple(_ids(self.group_a)), tuple(_ids(self.group_b))


def _reference(text: str) -> Literal["A", "B"] | None:
    upper = text.strip().upper()
    return "A" if upper == "A" else "B" if upper == "B" else None


def _ids(text: str) -> list[str]:
    return [v.strip() for v in text.split(",") if v.strip()]


@dataclass(frozen=True, slots=True)
class JudgeSequence:
    """One judge's sequential analysis: each part, or ``None`` with its reason in ``reasons``."""

    judge_id: str
    ratings: int
    batches: int
    diagnostics: SerialDiagnostics | None = field(repr=False)
    glmm: SequentialGLMM | None = field(repr=False)
    bootstrap: GLMMBootstrap | None = field(repr=False)
    check: PredictiveCheck | None = field(repr=False)
    selection: TopSelection | None = field(repr=False)
    groups: GroupComparison | None = field(repr=False)
    reasons: Mapping[str, str] = field(default_factory=dict)
    pooled: str | None = None  # the score categories pooled before the GLMM (pool_rare_categories)


@dataclass(frozen=True, slots=True)
class SequentialResult:
    """One fit's sequential-judging analysis, per judge (judges in sorted order)."""

    unit: str
    lags: int
    judges: tuple[JudgeSequence, ...]
    ratings_without_batch: int


def _part(name: str, reasons: dict[str, str], run: Callable[[], Any]) -> Any:
    """A part's result, or ``None`` with the reason it cannot be estimated on these data."""
    try:
        return run()
    except JurymeterError as exc:
        reasons[name] = str(exc)
        return None


def _holdout(records: pl.DataFrame, seed: int) -> tuple[pl.DataFrame, pl.DataFrame] | str:
    """The judge's batches split for the predictive check (fit on one part, check on the other), or why not."""
    return holdout_batches(records, seed)


def pool_rare_categories(records: pl.DataFrame, minimum: int = MIN_CATEGORY_RATINGS) -> tuple[pl.DataFrame, str | None]:
    """The records with rare score categories pooled (:func:`jurymeter.stats.sequential.policy.pool_rare_categories`)."""
    return pool_categories(records, minimum)


class _SequentialFitting:
    def __init__(self, scope: FitScope, options: SequentialOptions) -> None:
        self.scope, self.options = scope, options

    def feeds(self) -> Mapping[GenerationMode, Callable[[np.ndarray], object]]:
        return {}

    def finish(self) -> SequentialResult:
        scope, options = self.scope, self.options
        names = scope.records.collect_schema().names()
        missing = [c for c in ("batch_id", "batch_position") if c not in names]
        if missing:
            msg = f"the records have no {' or '.join(missing)}: the order of ratings in a batch is unknown"
            raise NotApplicableError(msg)
        records = scope.records.select([c for c in _READ if c in names]).filter(pl.col("score").is_not_null()).collect()
        batched = records.filter(pl.col("batch_id").is_not_null() & pl.col("batch_position").is_not_null())
        if batched.height == 0:
            msg = "no rating has a batch_id and batch_position: the order of ratings in a batch is unknown"
            raise NotApplicableError(msg)
        longest = batched.group_by("judge_id", "batch_id").len()["len"].max()
        if not isinstance(longest, int) or longest < 2:
            msg = "every batch holds one rating: there is no sequence to analyse"
            raise NotApplicableError(msg)
        judges = tuple(
            self._judge(str(judge), batched.filter(pl.col("judge_id") == judge))
            for judge in batched.get_column("judge_id").unique().sort().to_list()
        )
        return SequentialResult(unit=options.unit, lags=options.lags, judges=judges,
                                ratings_without_batch=records.height - batched.height)

    def _judge(self, judge: str, records: pl.DataFrame) -> JudgeSequence:
        from jurymeter.stats.sequential.compare import compare_groups, select_top
        from jurymeter.stats.sequential.diagnostics import serial_diagnostics
        from jurymeter.stats.sequential.glmm import (
            bootstrap_fits,
            fit_sequential_glmm,
            predictive_check,
        )

        options, seed = self.options, self.scope.settings.seed
        n_boot = options.n_boot or min(self.scope.settings.n_boot, MAX_RESAMPLES)
        n_sim = options.n_sim or n_boot
        unit = UNITS[options.unit]
        reasons: dict[str, str] = {}
        diagnostics = _part("diagnostics", reasons, lambda: serial_diagnostics(
            records, max_lag=3, n_boot=n_boot, seed=seed))
        modelled, pooled = pool_rare_categories(records)
        glmm = _part("glmm", reasons, lambda: fit_sequential_glmm(modelled, lags=options.lags, unit=unit))
        bootstrap = check = selection = groups = None
        if glmm is None:
            for part in ("bootstrap", "check", "selection", "groups"):
                reasons[part] = f"no GLMM fit: {reasons['glmm']}"
        else:
            bootstrap = _part("bootstrap", reasons, lambda: bootstrap_fits(
                modelled, glmm, n_boot=n_boot, seed=seed, map=self.scope.mapper))
            split = _holdout(modelled, seed)
            if isinstance(split, str):
                reasons["check"] = split
            else:
                train, held = split
                check = _part("check", reasons, lambda: predictive_check(
                    fit_sequential_glmm(train, lags=options.lags, unit=unit), held, n_sim=n_sim,
                    seed=seed))
            if bootstrap is None:
                reasons["selection"] = reasons["groups"] = f"no bootstrap: {reasons['bootstrap']}"
            else:
                selection = _part("selection", reasons, lambda: select_top(
                    modelled, glmm, bootstrap, unit=unit, k=options.top_k, seed=seed))
                group_a, group_b = options.groups()
                if group_a:
                    groups = _part("groups", reasons, lambda: compare_groups(
                        modelled, glmm, bootstrap, group_a, group_b, unit=unit,
                        reference=_reference(options.reference), seed=seed))
                else:
                    reasons["groups"] = "no groups given ([fit.sequential] group_a and group_b, or --group-a and --group-b)"
        return JudgeSequence(
            judge_id=judge, ratings=records.height, batches=records.get_column("batch_id").n_unique(),
            diagnostics=diagnostics, glmm=glmm, bootstrap=bootstrap, check=check, selection=selection,
            groups=groups, reasons=reasons, pooled=pooled,
        )


def _finite(value: Any) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def _rows(judge: str, frame: pl.DataFrame | None) -> list[dict[str, Any]]:
    if frame is None:
        return []
    return [{"judge_id": judge, **{k: _finite(v) for k, v in row.items()}} for row in frame.iter_rows(named=True)]


def _with_judge(schema: Mapping[str, Any]) -> dict[str, Any]:
    return {"judge_id": pl.String, **schema}


JUDGE_SCHEMA: dict[str, Any] = {
    "judge_id": pl.String, "ratings": pl.Int64, "batches": pl.Int64, "response": pl.String, "lags": pl.Int64,
    "serial_contrast": pl.Float64, "serial_contrast_low": pl.Float64, "serial_contrast_high": pl.Float64,
    "rho_1": pl.Float64, "rho_1_low": pl.Float64, "rho_1_high": pl.Float64,
    "batch_sd": pl.Float64, "batch_sd_low": pl.Float64, "batch_sd_high": pl.Float64,
    "check_outside": pl.Int64, "check_terms": pl.Int64, "top_naive": pl.String, "top_model": pl.String,
    "pooled": pl.String, "reasons": pl.String,
}


def _coefficient(boot: GLMMBootstrap | None, name: str) -> tuple[Any, Any, Any]:
    if boot is None:
        return None, None, None
    row = boot.table.filter(pl.col("name") == name)
    if row.height == 0:
        return None, None, None
    estimate, low, high = (_finite(row[c][0]) for c in ("estimate", "low", "high"))
    return estimate, low, high


# The part of the analysis each number of a judge's row comes from (its reason when null);
# ``None``: a label, null when there is nothing to say (``pooled``: no category pooled).
_ROW_PARTS: dict[str, str | None] = {
    "response": "glmm", "lags": "glmm",
    **dict.fromkeys(("serial_contrast", "serial_contrast_low", "serial_contrast_high"), "diagnostics"),
    **dict.fromkeys(("rho_1", "rho_1_low", "rho_1_high", "batch_sd", "batch_sd_low", "batch_sd_high"), "bootstrap"),
    "check_outside": "check", "check_terms": "check", "top_naive": "selection", "top_model": "selection",
    "pooled": None,
}


def _judge_row(j: JudgeSequence) -> dict[str, Any]:
    contrast = j.diagnostics.serial_contrast if j.diagnostics is not None else None
    rho = _coefficient(j.bootstrap, "rho_1")
    sd = _coefficient(j.bootstrap, "batch_sd")
    if j.glmm is not None and rho[0] is None:
        rho = (j.glmm.rho[0], None, None)
    if j.glmm is not None and sd[0] is None:
        sd = (j.glmm.batch_sd, None, None)
    top_naive = top_model = None
    if j.selection is not None:
        top_naive, top_model = j.selection.naive_top[0][0], j.selection.model_top[0][0]
    return {
        "judge_id": j.judge_id, "ratings": j.ratings, "batches": j.batches,
        "response": None if j.glmm is None else j.glmm.response, "lags": None if j.glmm is None else j.glmm.lags,
        "serial_contrast": None if contrast is None else _finite(contrast.value),
        "serial_contrast_low": None if contrast is None else _finite(contrast.low),
        "serial_contrast_high": None if contrast is None else _finite(contrast.high),
        "rho_1": rho[0], "rho_1_low": rho[1], "rho_1_high": rho[2],
        "batch_sd": sd[0], "batch_sd_low": sd[1], "batch_sd_high": sd[2],
        "check_outside": None if j.check is None else j.check.n_outside,
        "check_terms": None if j.check is None else j.check.table.height,
        "top_naive": top_naive, "top_model": top_model, "pooled": j.pooled,
        # one line per part (a reason may itself hold "; ")
        "reasons": "\n".join(f"{k}: {v}" for k, v in j.reasons.items()) or None,
    }


class SequentialFit(FitPart[SequentialResult, SequentialOptions]):
    """The sequential fit: per judge, the serial diagnostics, the Markov GLMM, its check, selection and groups."""

    protocols = ("pointwise",)
    compute_modules = ("jurymeter.stats.sequential.glmm", "jurymeter.stats.sequential.diagnostics",
                       "jurymeter.stats.sequential.compare")

    def start(self, scope: FitScope, chunked: FitChunks | None, options: SequentialOptions) -> _SequentialFitting:
        return _SequentialFitting(scope, options)


class SequentialTables(TablesPart[SequentialResult]):
    """The sequential tables: per judge, its transitions, entropies, coefficients, check, selection and groups."""

    tables = (
        Table("sequential_judges", JUDGE_SCHEMA, "per judge: serial contrast, lag-1 and batch SD of the GLMM, "
              "predictive check, top unit by the naive average and by the model"),
        Table("sequential_transitions", _with_judge(schemas.TRANSITION_SCHEMA),
              "rating at t given the rating at t-1 in the same batch, per judge"),
        Table("sequential_entropies", _with_judge(schemas.ENTROPY_SCHEMA),
              "H(Y_t | Y_t-1..t-k), k = 0..3, in bits, per judge"),
        Table("sequential_coefficients", _with_judge(schemas.BOOTSTRAP_SCHEMA),
              "Markov GLMM coefficients with batch-bootstrap SE and intervals"),
        Table("sequential_check", _with_judge(schemas.CHECK_SCHEMA),
              "predictive check on held-out batches (transition terms, entropies)"),
        Table("sequential_selection", _with_judge(schemas.SELECTION_SCHEMA),
              "top-k units by the naive average and by the model, with stability"),
        Table("sequential_groups", _with_judge(schemas.GROUP_CONTRAST_SCHEMA),
              "group contrast by the naive average and by the model"),
    )

    def tabulate(self, result: SequentialResult) -> dict[str, list[dict[str, Any]]]:
        tables: dict[str, list[dict[str, Any]]] = {"sequential_judges": [_judge_row(j) for j in result.judges]}
        for name in ("sequential_transitions", "sequential_entropies", "sequential_coefficients",
                     "sequential_check", "sequential_selection", "sequential_groups"):
            tables[name] = []
        for j in result.judges:
            d = j.diagnostics
            tables["sequential_transitions"] += _rows(j.judge_id, None if d is None else d.transitions)
            tables["sequential_entropies"] += _rows(j.judge_id, None if d is None else d.entropies)
            tables["sequential_coefficients"] += _rows(j.judge_id, None if j.bootstrap is None else j.bootstrap.table)
            tables["sequential_check"] += _rows(j.judge_id, None if j.check is None else j.check.table)
            tables["sequential_selection"] += _rows(j.judge_id, None if j.selection is None else j.selection.table)
            tables["sequential_groups"] += _rows(j.judge_id, None if j.groups is None else j.groups.table)
        return tables


class SequentialHeadline(TypedDict):
    """The sequential entry in the run summary: exactly the keys of :attr:`SequentialSummary.headline`."""

    max_rho_1: float | None
    top_disagree: int | None


class SequentialSummary(SummaryPart[SequentialResult]):
    """The sequential report (per judge, null numbers with their reasons), headline numbers and sentence."""

    headline = (
        Headline("max_rho_1", "lag-1 (logit)", doc="the GLMM's largest lag-1 coefficient: how much the previous rating in a batch moves this one, in logit per rating point"),
        Headline("top_disagree", "tops differ", "count", doc="judges whose top system differs between the raw average and the GLMM"),
    )

    # What the run history follows across published runs (pipeline.history, issue 16 point 4).
    tracked = (
        Tracked("lag-1 state dependence", "logits", table="sequential_judges", estimate="rho_1",
                low="rho_1_low", high="rho_1_high", subject="judge_id", drift=True),
    )

    def report(self, result: SequentialResult) -> dict[str, Any]:
        judges: dict[str, Any] = {}
        for j in result.judges:
            entry: dict[str, Any] = _judge_row(j)
            entry["reasons"] = dict(j.reasons)
            # Each null number of the row with the reason of the part it comes from (issue 22).
            entry["null_reasons"] = {
                key: j.reasons.get(part) or NOT_ESTIMABLE
                for key, part in _ROW_PARTS.items() if entry.get(key) is None and part is not None}
            if j.glmm is not None:
                entry["glmm"] = {
                    "response": j.glmm.response, "lags": j.glmm.lags, "loglik": j.glmm.loglik,
                    "n_batches": j.glmm.n_batches, "n_obs": j.glmm.n_obs, "n_conditioned": j.glmm.n_conditioned,
                    "n_agq": j.glmm.n_agq, "n_iter": j.glmm.n_iter, "gradient_norm": j.glmm.gradient_norm,
                }
            if j.bootstrap is not None:
                fixed = set() if j.glmm is None else set(
                    j.glmm.table.filter(pl.col("fixed"))["name"].to_list())
                # A null SE or bound with its reason (issue 22): a value the constraints fix (the
                # reference unit's theta, the first position) has none; else no refit defined it.
                entry["coefficients"] = [
                    {**row, "reason": None if row["se"] is not None and row["low"] is not None else (
                        "fixed by the model's constraints (a reference level): no sampling variation"
                        if row["name"] in fixed else "no bootstrap refit gave it a value")}
                    for row in _rows(j.judge_id, j.bootstrap.table)]
                entry["bootstrap"] = {"n_boot": j.bootstrap.n_boot, "n_failed": j.bootstrap.n_failed,
                                      "failures": list(j.bootstrap.failures)}
            if j.check is not None:
                entry["check"] = {"n_sim": j.check.n_sim, "n_batches": j.check.n_batches,
                                  "n_outside": j.check.n_outside, "terms": _rows(j.judge_id, j.check.table)}
            if j.selection is not None:
                entry["selection"] = _rows(j.judge_id, j.selection.table)
            if j.groups is not None:
                entry["groups"] = _rows(j.judge_id, j.groups.table)
            judges[j.judge_id] = entry
        return {"unit": result.unit, "lags": result.lags, "ratings_without_batch": result.ratings_without_batch,
                "judges": judges}

    def summarize(self, result: SequentialResult) -> SequentialHeadline:
        """The GLMM's lag-1 coefficient of largest size over the judges; judges whose average and model tops differ."""
        rows = [_judge_row(j) for j in result.judges]
        rho = [r["rho_1"] for r in rows if r["rho_1"] is not None]
        compared = [r for r in rows if r["top_naive"] is not None and r["top_model"] is not None]
        return {
            "max_rho_1": max(rho, key=abs) if rho else None,
            "top_disagree": sum(r["top_naive"] != r["top_model"] for r in compared) if compared else None,
        }

    def sentence(self, part: Mapping[str, Any], context: HeadlineContext) -> str | None:
        """Carry-over from the previous rating in a batch, and whether it changes a judge's top system."""
        if part.get("max_rho_1") is None:
            return None
        clause = f"carry-over from the previous rating up to {part['max_rho_1']:+.2f} logit"
        differ = part.get("top_disagree")
        if differ is not None:
            clause += (", the same top system by the average and by the model for every judge" if differ == 0
                       else f", a different top system by the average and by the model for {differ} judge(s)")
        return clause


class SequentialSection(SectionPart):
    """The sequential section of a fit's page (:mod:`jurymeter.analyses.sequential.section`, imported when drawn)."""

    figure_modules = (*SequentialFit.compute_modules, "jurymeter.analyses.sequential.section")

    def section(self, page: SectionBuilder) -> None:
        from jurymeter.analyses.sequential.section import sequential_section

        sequential_section(page)


class SequentialAnalysis(SequentialFit, SequentialTables, SequentialSummary, SequentialSection,
                         Analysis[SequentialResult, SequentialOptions]):
    """Order and batch effects of sequential judging ([LiDing2026]_)."""

    name = "sequential"
    title = "Sequential judging: order and batch effects"
    order = 40
    options_type = SequentialOptions

    # Its command, as data (imported by the CLI only): jurymeter.analyses.sequential.command.
    command = "jurymeter.analyses.sequential.command:COMMAND"


SEQUENTIAL = SequentialAnalysis()
