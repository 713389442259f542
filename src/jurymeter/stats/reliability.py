"""One item set's reliability report: block, G-study, D-study, intervals and checks.

This is the library entry point the CLI and (later) the nightly flow call. It
takes records as a polars frame (``Store.scan``) and returns plain data: a
frozen request in, a JSON-ready dict out, full float64 precision (rounding is
the CLI's job). Paper symbols are spelled the same everywhere: ``sigma2_sj``,
``erho2``, ``phi``, ``mdd95``, ``ceiling``.
"""

from __future__ import annotations

import numbers
from dataclasses import asdict, dataclass
from typing import Any, NoReturn

import numpy as np
import polars as pl

from jurymeter.errors import DesignError
from jurymeter.stats.blocks import BalancedBlock, BlockLayout, GenerationMode, balanced_block
from jurymeter.stats.bootstrap import DEFAULT_RESAMPLES, bootstrap_reliability
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
    PAPER_ROLES,
    budget_optimum,
    ceiling,
    delta_df,
    erho2,
    error_variances,
    items_needed,
    judges_needed,
    mdd95,
    nomogram,
    phi,
)
from jurymeter.stats.gstudy import GStudy, TermSums, fit_terms

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
    population (``None`` = all in the data).

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
    interval_method: str = "pivotal"

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
            if not isinstance(values, tuple) or any(_int_or_none(v) is None or _int_or_none(v) < low for v in values):
                _refuse(name, values, allowed)
            object.__setattr__(self, name, tuple(int(v) for v in values))


GENERATION_MODES = ("average", "facet")
INTERVAL_METHODS = ("pivotal", "percentile")


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


def _interval(i: Any) -> dict[str, float]:
    return i.to_json()


def dstudy_summary(fit: GStudy, *, target: float = 0.8, budgets: tuple[int, ...] = (120, 360, 1080)) -> dict[str, Any]:
    """Point D-study quantities of paper table 1 and appendix, from a fit."""
    design, sigma2, roles = fit.design, fit.sigma2, PAPER_ROLES
    native = roles.observed(design, fit.sizes)
    at30 = roles.sizes(design, 30, 1, 1)
    unlimited = roles.sizes(design, np.inf, 1, 1)
    tau, delta, absolute = error_variances(sigma2, design, native)
    t_df = delta_df(fit.ms, fit.df, design, fit.sizes, native)
    return {
        "mdd95_t": float(mdd95(sigma2, design, native, df=t_df)),
        "mdd95_t_df": t_df,
        "sizes": dict(fit.sizes),
        "sigma2_delta": float(delta),
        "sigma2_Delta": float(absolute),
        "erho2": float(erho2(sigma2, design, native)),
        "phi": float(phi(sigma2, design, native)),
        "erho2_30": float(erho2(sigma2, design, at30)),
        "ceiling": float(ceiling(sigma2, design)),
        "ceiling_by_judges": {str(k): float(ceiling(sigma2, design, judges=k)) for k in (1, 2, 3, 5, 10)},
        "mdd95": float(mdd95(sigma2, design, native)),
        "mdd95_30": float(mdd95(sigma2, design, at30)),
        "mdd95_unlimited_items": float(mdd95(sigma2, design, unlimited)),
        "judges_needed": judges_needed(sigma2, design, target=target, items=30, replicates=3),
        "items_needed": items_needed(sigma2, design, target=target, judges=1, replicates=1),
        "target": target,
        "budget_optimum": {
            str(c): dict(zip(("n_i", "n_j", "n_r", "mdd95"), budget_optimum(sigma2, design, c), strict=True))
            for c in budgets
        },
        "nomogram": {
            "judges": list(NOMOGRAM_JUDGES),
            "items": list(NOMOGRAM_ITEMS),
            "erho2": nomogram(sigma2, design, judges=NOMOGRAM_JUDGES, items=NOMOGRAM_ITEMS).tolist(),
        },
        "tau": float(tau),
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


def _nested_order(layout: BlockLayout, systems: pl.DataFrame) -> tuple[list[int], int, Design, list[str], int] | None:
    """The rule of :func:`nested_layout`: the systems' order, the number of models, the design, the models and ``k``."""
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
    spec = "(c:m) x i x j" + (" x r:mcij" if "r" in layout.design.facets else "")
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
    def of(cls, layout: BlockLayout, systems: pl.DataFrame) -> NestedSplitChunks | None:
        found = _nested_order(layout, systems)
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
            "ceiling_model_as_object": float(erho2(fit.sigma2, design, sizes, obj="m")),
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
        design = layout.design
        self.terms = TermSums(design, PAPER_ROLES.item)
        self.item_means: list[np.ndarray] = []
        self.one_judge_means: list[np.ndarray] = []
        n_judges = len(layout.judges)
        self.ensembles = {
            k: EnsembleRefits(design, n_judges, k=k, partitions=request.partitions, seed=request.seed + k)
            for k in request.ensembles
            if n_judges // k >= 2
        }
        self.nested = (
            NestedSplitChunks.of(layout, systems)
            if systems is not None and len(design.facets) in (3, 4) and "g" not in design.facets
            else None
        )

    def add(self, x: np.ndarray) -> GStudyChunks:
        """Add the block's scores of some items (all of them, in item order, in chunks)."""
        design = self.layout.design
        self.terms.add(x)
        self.item_means.append(system_item_means(x, design))
        # What a careful author does today: one judge, one run, items resampled.
        one_judge = x[:, :, :1, ...]
        if one_judge.ndim > 3:
            one_judge = one_judge[..., :1]
        self.one_judge_means.append(system_item_means(one_judge, design))
        for refits in self.ensembles.values():
            refits.add(x)
        if self.nested is not None:
            self.nested.add(x)
        return self

    def report(self) -> dict[str, Any]:
        """The report (what :func:`assess_item_set` returns)."""
        report = _report(self)
        report["nested"] = self.nested.result() if self.nested is not None else None
        return report


def _report(chunks: GStudyChunks) -> dict[str, Any]:
    block, request = chunks.layout, chunks.request
    fit = fit_terms(chunks.terms)
    roles = PAPER_ROLES
    item_means = np.concatenate(chunks.item_means, axis=1)
    system_means = item_means.mean(axis=1)
    sd_means = float(np.std(system_means, ddof=1)) if len(system_means) > 1 else float("nan")
    boot = bootstrap_reliability(
        fit,
        n_boot=request.n_boot,
        seed=request.seed,
        target=request.target,
        sd_of_system_means=sd_means,
        method=request.interval_method,  # type: ignore[arg-type]
    )
    summary = dstudy_summary(fit, target=request.target, budgets=request.budgets)
    naive = naive_halfwidth_from_means(
        np.concatenate(chunks.one_judge_means, axis=1), n_boot=request.n_boot, seed=request.seed
    )
    single_native = float(
        mdd95(fit.sigma2, block.design, roles.sizes(block.design, fit.sizes[roles.item], 1, 1))
    )
    items = (
        item_diagnostics_from_means(item_means, splits=request.splits, seed=request.seed)
        if len(block.systems) >= 4
        else None
    )
    ensembles = {}
    for k, refits in chunks.ensembles.items():
        check = refits.check(fit)
        ensembles[str(k)] = {"median": check.median, "low": check.low, "high": check.high, "partitions": len(check.ratios)}
    screened = [block.items[k] for k in items.screened(request.screen_threshold)] if items else []
    return {
        "item_set": request.item_set,
        "request": {k: (list(v) if isinstance(v, tuple) else v) for k, v in asdict(request).items()},
        "design": _design_text(block.design),
        "block": block.summary(),
        "grand_mean": fit.grand_mean,
        "components": {
            f"sigma2_{label.replace(':', '_')}": {
                "raw": float(fit.sigma2[k]),
                "share": float(fit.shares[k]),
                "df": float(fit.df[k]),
                "ms": float(fit.ms[k]),
                "interval": _interval(boot.sigma2[label]),
            }
            for k, label in enumerate(fit.effects)
        },
        **summary,
        "mdd95_in_sd_of_system_means": summary["mdd95"] / sd_means if sd_means > 0 else None,
        "sd_of_system_means": sd_means,
        "system_means": dict(zip(block.systems, system_means.tolist(), strict=True)),
        "intervals": {
            **{name: _interval(i) for name, i in boot.derived.items()},
            "n_boot": boot.n_boot,
            "level": 0.95,
            "method": boot.method,
        },
        "p_ceiling_at_least_0_8": boot.p_ceiling_at_least_080,
        "naive_item_bootstrap": {
            "halfwidth": naive,
            "mdd95_single_judge": single_native,
            "mdd95_over_halfwidth": single_native / naive if naive > 0 else None,
        },
        "rank_reliability": {
            "wrong_order_top10_1_judge": wrong_order_probability(fit, judges=1, seed=request.seed),
            "wrong_order_top10_3_judges": wrong_order_probability(fit, judges=3, seed=request.seed),
            "mdd_false_positive_rate": mdd_false_positive_rate(
                fit, simulations=request.fpr_simulations, seed=request.seed
            )
            if block.observations_used <= FPR_MAX_OBSERVATIONS and request.fpr_simulations > 0
            else None,
        },
        "ensembles": ensembles,
        "items": None
        if items is None
        else {
            "discrimination": dict(zip(block.items, items.discrimination.tolist(), strict=True)),
            "split_half_rho_median": float(np.median(items.split_half_rho)),
            "split_half_rho_low": float(np.percentile(items.split_half_rho, 2.5)),
            "split_half_rho_high": float(np.percentile(items.split_half_rho, 97.5)),
            "screen_threshold": request.screen_threshold,
            "screened_items": screened,
        },
    }



def _design_text(design: Design) -> str:
    parts = []
    for f in design.facets:
        nest = "".join(g for g in design.facets if g in design.nests[f])
        parts.append(f"{f}:{nest}" if nest else f)
    return " x ".join(parts)
