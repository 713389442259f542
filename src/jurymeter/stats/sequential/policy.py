"""The sequential GLMM's data policy: which score categories it pools, which batches its predictive check holds out.

Both are statistical choices made before a fit (``[LiDing2026]_`` fits the
GLMM to the judge's ratings; these rules keep it estimable on a judge's real
logs), so they live with the statistics; the sequential analysis
(:mod:`jurymeter.analyses.sequential`) only calls them.

References
----------
.. [LiDing2026] T. Li and J. Ding, "Trustworthy Method Comparison with AI Judges:
   Estimation and Design under Order, Batch, and Aggregation Effects", 2026
   (``papers/trustworthy-comparison-ai-judges.txt``), section 5 (the predictive check).
"""

from __future__ import annotations

import polars as pl

# An ordinal category with fewer ratings than this is pooled into its neighbour before the
# GLMM is fitted: a batch resample would often lack it, and a cutpoint of an empty category
# has no finite estimate (the refit crawls, or fails).
MIN_CATEGORY_RATINGS = 10
# The predictive check refits on the other batches and simulates these held-out ones:
# a share of the judge's batches, at least this many of them.
HOLDOUT_SHARE = 0.2
MIN_HOLDOUT_BATCHES = 5


def holdout_batches(records: pl.DataFrame, seed: int) -> tuple[pl.DataFrame, pl.DataFrame] | str:
    """The judge's batches split for the predictive check (fit on one part, check on the other), or why not.

    Parameters
    ----------
    records : polars.DataFrame
        One judge's ratings, with ``batch_id``.
    seed : int
        Seed of the draw of the held-out batches (``numpy.random.default_rng``).

    Returns
    -------
    (polars.DataFrame, polars.DataFrame) or str
        The records to fit and the held-out ones (:data:`HOLDOUT_SHARE` of the
        batches, at least :data:`MIN_HOLDOUT_BATCHES`), or why the judge has
        too few batches to split.
    """
    import numpy as np  # here: the analysis imports this module for its constant, before any fit

    batches = records.get_column("batch_id").unique().sort()
    n_out = max(MIN_HOLDOUT_BATCHES, round(HOLDOUT_SHARE * batches.len()))
    if batches.len() < 2 * n_out:
        return (f"the predictive check holds out {n_out} batches and fits the rest: it needs at least "
                f"{2 * n_out} batches, the judge has {batches.len()}")
    rng = np.random.default_rng(seed)
    held = set(batches.gather(rng.choice(batches.len(), size=n_out, replace=False)).to_list())
    out = pl.col("batch_id").is_in(sorted(held))
    return records.filter(~out), records.filter(out)


def pool_rare_categories(records: pl.DataFrame, minimum: int = MIN_CATEGORY_RATINGS) -> tuple[pl.DataFrame, str | None]:
    """The records with every score category of fewer than ``minimum`` ratings merged into a neighbour, and what was merged.

    Repeatedly, the rarest category (ties: the lowest) joins the adjacent category with more
    ratings (ties: the one below) and takes its score, until every category has ``minimum``
    ratings or two are left; a binary scale is left alone. The note names each merge
    (``"2 -> 3"``), or is ``None`` when nothing was merged.

    Parameters
    ----------
    records : polars.DataFrame
        Ratings with a numeric ``score``.
    minimum : int, default :data:`MIN_CATEGORY_RATINGS`
        The fewest ratings a category keeps unpooled.

    Returns
    -------
    (polars.DataFrame, str or None)
        The records with pooled scores (the same frame when nothing is pooled) and the note.
    """
    counts = records.group_by("score").len().sort("score")
    groups = [[float(v)] for v in counts["score"].to_list()]  # the scores of each category, after merges
    reps = [g[0] for g in groups]  # the score a category's ratings take
    sizes = counts["len"].to_list()
    merged: list[str] = []
    while len(groups) > 2:
        k = min(range(len(groups)), key=lambda g: (sizes[g], g))
        if sizes[k] >= minimum:
            break
        into = 1 if k == 0 else k - 1 if k == len(groups) - 1 or sizes[k - 1] >= sizes[k + 1] else k + 1
        merged.append(f"{'/'.join(f'{v:g}' for v in groups[k])} -> {reps[into]:g}")
        groups[into] = sorted(groups[into] + groups[k])
        sizes[into] += sizes[k]
        del groups[k], sizes[k], reps[k]
    if not merged:
        return records, None
    mapping = {v: rep for group, rep in zip(groups, reps, strict=True) for v in group}
    pooled = records.with_columns(pl.col("score").cast(pl.Float64).replace_strict(mapping, return_dtype=pl.Float64))
    note = (f"score categories with fewer than {minimum} ratings pooled into a neighbour before the GLMM: "
            + ", ".join(merged))
    return pooled, note
