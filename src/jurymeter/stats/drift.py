r"""Drift between published runs: which changes of a followed number are larger than its intervals allow.

Each published run gives, per followed number (a :class:`jurymeter.analyses.base.Tracked`
of an analysis) and per subject (a judge, or the fit itself), an estimate and
its 95% interval. A *series* is one number of one subject of one fit
(``item_set``, ``universe``, ``population``, ``name``, ``subject``) across runs.

The interval rule
-----------------
The standard error is read back from the 95% interval, assuming it is
symmetric and normal:

.. math:: \widehat{se}_t = (high_t - low_t) / (2 z_{0.975}),\qquad z_{0.975} = 1.959964

(for a skewed bootstrap interval this is its average half width: the
assumption is the price of reading published tables instead of refitting). A
change between a run and the previous run in which the series has an estimate
is judged by

.. math:: z_t = (x_t - x_{t-1}) / \sqrt{\widehat{se}_t^2 + \widehat{se}_{t-1}^2}

and flagged when :math:`|z_t| > z_{0.975}`: a two-sided 5% test of "no change"
for two independent estimates. Consecutive nights over a *growing* dump share
most of their records, so the two estimates are positively correlated, the
variance of their difference is smaller than the sum above, and the test is
conservative then (fewer false flags than 5%, less power); for independent
nights it holds its 5%. No interval on either side (or two zero-width ones):
no flag, ``flagged`` null and a ``reason``.

Failure rates
-------------
A judge's failure rate is the store's failed judgments out of its stored plus
failed ones (``summary.json``'s ``judges``), with a Wilson 95% interval
[Wilson1927]_ (``scipy.stats.binomtest(...).proportion_ci(method="wilson")``).
Between two runs it is compared by the pooled two-proportion z test
[Agresti2013]_ (section 3.1.3):

.. math:: z = (\hat p_2 - \hat p_1) / \sqrt{\bar p (1 - \bar p)(1/n_1 + 1/n_2)},\qquad
          \bar p = (x_1 + x_2) / (n_1 + n_2),

flagged when :math:`|z| > z_{0.975}`. The two samples must not overlap: when
the later run's counts contain the earlier run's (a store that only grew, as
committed sources are never rewritten), sample 1 is the judgments before the
earlier run and sample 2 the judgments added since (``basis = "new
judgments"``), so a judge that starts failing tonight is seen at tonight's
volume, not diluted by every earlier night; otherwise (a store rebuilt or
shrunk) the two runs' totals are compared as independent samples (``basis =
"totals"``).

References
----------
.. [Wilson1927] E. B. Wilson, "Probable inference, the law of succession, and
   statistical inference", JASA 22 (1927), 209-212.
.. [Agresti2013] A. Agresti, *Categorical Data Analysis*, 3rd ed., Wiley, 2013.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import polars as pl

from jurymeter.errors import ReportError

Z95 = 1.959964  # z_{0.975}: the 95% intervals' half width in standard errors, and the flag's threshold
FLAG_LEVEL = 0.05  # the chance a series that did not change is flagged (two-sided, |z| > Z95)
SERIES = ("item_set", "universe", "population", "name", "subject")
RUN_COLUMNS = ("run_id", "started")

NO_PREVIOUS = "first run of this series"
NO_ESTIMATE = "no estimate in this run"
NO_INTERVAL = "no interval in this run or the previous one"
ZERO_WIDTH = "zero-width intervals in both runs"
NOT_FOLLOWED = "not followed for drift"
NO_NEW = "no judgments added since the previous run"
NO_FAILURE_VARIANCE = "no failures (or no successes) in either sample"
NO_JUDGMENTS = "no judgments"

CHANGE_SCHEMA = {
    "se": pl.Float64,
    "previous_run_id": pl.String,
    "previous_estimate": pl.Float64,
    "change": pl.Float64,
    "z": pl.Float64,
    "flagged": pl.Boolean,
    "reason": pl.String,
}


def interval_se(low: pl.Expr, high: pl.Expr) -> pl.Expr:
    """The standard error a symmetric 95% interval implies: its half width / 1.959964 (null where unknown)."""
    return (high - low) / (2.0 * Z95)


def flag_changes(values: pl.DataFrame, *, series: Sequence[str] = SERIES) -> pl.DataFrame:
    """Flag, per series, a change between consecutive runs larger than the two intervals allow.

    Parameters
    ----------
    values : polars.DataFrame
        Long frame: ``run_id``, ``started`` (sortable: ISO time), the ``series``
        columns, ``estimate``, ``low``, ``high`` (null where the table has no
        interval); optionally ``drift`` (bool: rows whose series is not
        followed for drift get ``z`` but no flag).
    series : sequence of str
        The columns naming one series (default ``SERIES``).

    Returns
    -------
    polars.DataFrame
        ``values`` sorted by series then run, with ``CHANGE_SCHEMA``'s columns:
        ``se`` (from the interval), ``previous_run_id`` and
        ``previous_estimate`` (the last earlier run of the series with an
        estimate), ``change``, ``z``, ``flagged`` (null when not judged) and
        ``reason`` (why not judged; null when judged).

    Notes
    -----
    ``z = (x_t - x_prev) / sqrt(se_t^2 + se_prev^2)``, ``se`` = half width of
    the 95% interval / 1.959964; flagged when ``|z| > 1.959964`` (module
    docstring: symmetric-interval assumption; conservative over shared records).

    Examples
    --------
    >>> frame = pl.DataFrame({"run_id": ["a", "b"], "started": ["1", "2"], "item_set": ["x", "x"],
    ...     "universe": ["all", "all"], "population": ["all", "all"], "name": ["offset", "offset"],
    ...     "subject": ["j1", "j1"], "estimate": [0.0, 1.0], "low": [-0.1, 0.9], "high": [0.1, 1.1]})
    >>> flag_changes(frame)["flagged"].to_list()
    [None, True]
    """
    missing = [c for c in (*RUN_COLUMNS, *series, "estimate", "low", "high") if c not in values.columns]
    if missing:
        msg = f"values lacks column(s) {missing}; it has {values.columns}"
        raise ReportError(msg)
    keys = list(series)
    has = pl.col("estimate").is_not_null()
    frame = (
        values.sort([*keys, "started", "run_id"], nulls_last=True)
        .with_row_index("_row")
        .with_columns(se=interval_se(pl.col("low").cast(pl.Float64), pl.col("high").cast(pl.Float64)))
        # The last earlier row of the series with an estimate: its row number, carried forward.
        .with_columns(_prev=pl.when(has).then(pl.col("_row")).shift(1).forward_fill().over(keys))
    )
    prev = frame.select(
        pl.col("_row").alias("_prev"),
        pl.col("run_id").alias("previous_run_id"),
        pl.col("estimate").cast(pl.Float64).alias("previous_estimate"),
        pl.col("se").alias("_se_prev"),
    )
    frame = frame.join(prev, on="_prev", how="left", maintain_order="left")
    combined = (pl.col("se") ** 2 + pl.col("_se_prev") ** 2).sqrt()
    change = pl.col("estimate").cast(pl.Float64) - pl.col("previous_estimate")
    judged = has & pl.col("_prev").is_not_null() & combined.is_not_null() & (combined > 0)
    followed = pl.col("drift").fill_null(False) if "drift" in frame.columns else pl.lit(True)
    reason = (
        pl.when(~has).then(pl.lit(NO_ESTIMATE))
        .when(pl.col("_prev").is_null()).then(pl.lit(NO_PREVIOUS))
        .when(combined.is_null()).then(pl.lit(NO_INTERVAL))
        .when(combined <= 0).then(pl.lit(ZERO_WIDTH))
        .when(~followed).then(pl.lit(NOT_FOLLOWED))
        .otherwise(pl.lit(None, pl.String))
    )
    z = pl.when(judged).then(change / combined).otherwise(pl.lit(None, pl.Float64))
    return (
        frame.with_columns(
            change=pl.when(has & pl.col("_prev").is_not_null()).then(change).otherwise(None),
            z=z,
            reason=reason,
        )
        .with_columns(
            flagged=pl.when(pl.col("reason").is_null()).then(pl.col("z").abs() > Z95).otherwise(None),
        )
        .drop("_row", "_prev", "_se_prev")
    )


def wilson_interval(failed: int, total: int) -> tuple[float | None, float | None, float | None, str | None]:
    """The failure rate ``failed / total`` and its Wilson 95% interval; ``None`` and a reason when ``total`` is 0.

    Uses ``scipy.stats.binomtest(failed, total).proportion_ci(0.95, method="wilson")`` [Wilson1927]_.
    """
    if total <= 0:
        return None, None, None, NO_JUDGMENTS
    from scipy.stats import binomtest

    ci = binomtest(int(failed), int(total)).proportion_ci(confidence_level=0.95, method="wilson")
    return failed / total, float(ci.low), float(ci.high), None


def two_proportion_z(x1: int, n1: int, x2: int, n2: int) -> float | None:
    """The pooled two-proportion z statistic of ``x2/n2`` against ``x1/n1``; ``None`` when undefined.

    ``z = (p2 - p1) / sqrt(p (1 - p) (1/n1 + 1/n2))``, ``p = (x1 + x2)/(n1 + n2)``
    ([Agresti2013]_, section 3.1.3): undefined when a sample is empty or the
    pooled rate is 0 or 1.
    """
    if n1 <= 0 or n2 <= 0:
        return None
    pooled = (x1 + x2) / (n1 + n2)
    var = pooled * (1.0 - pooled) * (1.0 / n1 + 1.0 / n2)
    if var <= 0:
        return None
    return (x2 / n2 - x1 / n1) / math.sqrt(var)


FAILURE_SCHEMA = {
    "run_id": pl.String,
    "started": pl.String,
    "judge_id": pl.String,
    "failed": pl.Int64,
    "total": pl.Int64,
    "estimate": pl.Float64,
    "low": pl.Float64,
    "high": pl.Float64,
    "previous_run_id": pl.String,
    "basis": pl.String,
    "new_failed": pl.Int64,
    "new_total": pl.Int64,
    "z": pl.Float64,
    "flagged": pl.Boolean,
    "reason": pl.String,
}


def failure_rate_changes(counts: pl.DataFrame) -> pl.DataFrame:
    """Each judge's failure rate per run (Wilson 95% interval) and whether it changed since the previous run.

    Parameters
    ----------
    counts : polars.DataFrame
        ``run_id``, ``started``, ``judge_id``, ``failed`` and ``total`` (stored + failed) per run and judge.

    Returns
    -------
    polars.DataFrame
        ``FAILURE_SCHEMA``, sorted by judge then run: the rate and its interval;
        against the judge's previous run, the comparison's ``basis`` (``"new
        judgments"``: those added since, against those before; ``"totals"``:
        the two runs' counts as independent samples), the added counts, the
        pooled two-proportion ``z``, ``flagged`` (``|z| > 1.959964``; null when
        there is no previous run) and a ``reason`` where ``z`` is undefined.
    """
    rows: list[dict[str, object]] = []
    ordered = counts.sort("judge_id", "started", "run_id")
    previous: dict[str, tuple[str, int, int]] = {}
    for run_id, started, judge, failed, total in ordered.select(*RUN_COLUMNS, "judge_id", "failed", "total").iter_rows():
        failed, total = int(failed or 0), int(total or 0)
        estimate, low, high, reason = wilson_interval(failed, total)
        row: dict[str, object] = {
            "run_id": run_id, "started": started, "judge_id": judge, "failed": failed, "total": total,
            "estimate": estimate, "low": low, "high": high, "previous_run_id": None, "basis": None,
            "new_failed": None, "new_total": None, "z": None, "flagged": None, "reason": reason,
        }
        if judge in previous:
            prev_run, prev_failed, prev_total = previous[judge]
            row["previous_run_id"] = prev_run
            nested = total >= prev_total and failed >= prev_failed and total - failed >= prev_total - prev_failed
            if nested:
                x2, n2 = failed - prev_failed, total - prev_total
                row.update(basis="new judgments", new_failed=x2, new_total=n2)
            else:
                x2, n2 = failed, total
                row["basis"] = "totals"
            z = two_proportion_z(prev_failed, prev_total, x2, n2)
            row["z"] = z
            if z is None:
                row["flagged"] = False if n2 == 0 or prev_total > 0 else None
                row["reason"] = NO_NEW if n2 == 0 else (NO_FAILURE_VARIANCE if prev_total > 0 else NO_JUDGMENTS)
            else:
                row["flagged"] = bool(abs(z) > Z95)
        else:
            row["reason"] = reason or NO_PREVIOUS
        previous[judge] = (run_id, failed, total)
        rows.append(row)
    return pl.DataFrame(rows, schema=FAILURE_SCHEMA, orient="row") if rows else pl.DataFrame(schema=FAILURE_SCHEMA)


def excess_flags_p(flagged: int, tested: int, level: float = FLAG_LEVEL) -> float:
    r"""How surprising ``flagged`` flags among ``tested`` stable series are: :math:`P(X \ge k)`, :math:`X \sim B(n, \alpha)`.

    Each series of a judge (one per fit it scores) is flagged with probability
    :math:`\alpha` (0.05) when nothing changed, so over many fits some flags
    are chance. The alerts name a judge's number only when its flags are more
    than chance gives at the 5 % level (``p <= 0.05``): with one fit, its one
    flag (:math:`p = \alpha`); with 100 fits, 10 flags (:math:`p = 0.028`) but
    not 5 (:math:`p = 0.56`). The tests are treated as independent (fits of one
    judge share its records, which makes this conservative only when they do
    not; documented in ``docs/results.md``).

    Returns
    -------
    float
        The upper tail probability; 1.0 for ``flagged = 0``.
    """
    if tested < 1 or not 0 <= flagged <= tested:
        msg = f"need 0 <= flagged <= tested and tested >= 1, got {flagged} of {tested}"
        raise ReportError(msg)
    from scipy.stats import binom

    return 1.0 if flagged == 0 else float(binom.sf(flagged - 1, tested, level))
