"""The nested split of system variance into model and configuration-within-model (paper appendix).

Systems that share a model (the systems table's ``model``) are rearranged
into (model, configuration) axes and fitted as ``(c:m) x i [x j] [x r]``
(:func:`nested_layout`); :class:`NestedSplitChunks` accumulates the fit over
item chunks of a block, as the G-study does.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import polars as pl

from jurymeter.stats.blocks import BalancedBlock, BlockLayout
from jurymeter.stats.design import Design
from jurymeter.stats.dstudy import PAPER_ROLES, erho2
from jurymeter.stats.fitted_design import design_text
from jurymeter.stats.gstudy import TermSums, fit_terms


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
            "design": design_text(design),
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



def _none_if_nan(value: float) -> float | None:
    return None if np.isnan(value) else value
