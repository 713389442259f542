r"""Agreement of pairwise judges: with themselves across replicates, with each other, with gold.

Verdicts are three categories, ``A``, ``B`` and ``tie``, in the shown slots. For
two ratings of the same judgments with observed agreement :math:`p_o` and
category shares :math:`p_{1c}, p_{2c}` of the first and second rating,
Cohen's kappa [Cohen1960]_ is

.. math::

    \kappa = \frac{p_o - p_e}{1 - p_e}, \qquad p_e = \sum_{c} p_{1c} \, p_{2c},

undefined (``None``) when :math:`p_e = 1` (both ratings use one and the same
category throughout).

*Replicate agreement* of a judge: every pair of its replicates of one judgment
(same item, shown ``system_a`` and ``system_b``, and generation) is a pair of
ratings, the earlier replicate number first; :math:`p_o` is the share of those
pairs giving the same verdict and :math:`\kappa` is computed over them. A
judgment with :math:`n` replicates gives :math:`\binom{n}{2}` pairs.

*Inter-judge agreement*: two judges' verdicts matched on (item, ``system_a``,
``system_b``, generation, replicate), the judgments both made, in the same
shown order; the :math:`3 \times 3` table of their verdicts gives :math:`p_o`
and :math:`\kappa`. The audit protocol of [Awuni2026]_ (section 10) asks for
judge diagnostics beside the headline; these are the plain ones.

*Gold accuracy*: the share of a judge's games carrying a gold label whose
verdict equals it.

References
----------
.. [Cohen1960] J. Cohen, "A coefficient of agreement for nominal scales",
   Educational and Psychological Measurement 20, 1960.
.. [Awuni2026] D. A. Awuni et al., "Who Judges Matters: Measuring
   Family-Conditioned Preference in LLM-as-Judge Panels", 2026
   (``papers/who-judges-matters.txt``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np
import polars as pl
from scipy import sparse

from jurymeter.errors import DesignError
from jurymeter.stats.pairwise.games import key_codes, require_games

VERDICTS = ("A", "B", "tie")
PARSE_FAILURE = "parse_failure"  # the quarantine reason of jurymeter.io.adapters.base
JUDGE_CALL_FAILED = "judge_call_failed"
_REQUIRED = ("item_id", "system_a", "system_b", "judge_id", "generation", "replicate", "verdict")
_MATCH = ["item_id", "system_a", "system_b", "generation", "replicate"]
_KAPPA_UNDEFINED = "expected agreement is 1 (one category throughout): kappa is undefined"


@dataclass(frozen=True, slots=True)
class JudgeAgreement:
    """Judge agreement tables (see :func:`judge_agreement`).

    ``per_judge``: one row per judge; ``pairs``: one row per pair of judges
    (``judge_1 < judge_2``), ``n_shared`` 0 included.
    """

    per_judge: pl.DataFrame
    pairs: pl.DataFrame
    n_games: int
    gold_column: str


def kappa_from_table(table: np.ndarray) -> tuple[float | None, str | None]:
    r"""Cohen's kappa of a square contingency table (rows: rating 1, columns: rating 2).

    Returns ``(kappa, None)`` or ``(None, reason)`` when the table is empty or
    :math:`p_e = 1`.

    Notes
    -----
    :math:`\kappa = (p_o - p_e)/(1 - p_e)`, :math:`p_o = \operatorname{tr} T / n`,
    :math:`p_e = \sum_c (T_{c\cdot}/n)(T_{\cdot c}/n)` [Cohen1960]_.

    Examples
    --------
    >>> kappa_from_table(np.array([[2, 0], [0, 2]]))
    (1.0, None)
    """
    t = np.asarray(table, dtype=np.float64)
    n = t.sum()
    if n <= 0:
        return None, "no shared judgments"
    po = np.trace(t) / n
    pe = float((t.sum(axis=1) / n) @ (t.sum(axis=0) / n))
    return _kappa(float(po), pe)


def _kappa(po: float, pe: float) -> tuple[float | None, str | None]:
    if pe >= 1.0 - 1e-15:
        return None, _KAPPA_UNDEFINED
    return (po - pe) / (1.0 - pe), None


def _validate(games: pl.DataFrame, cache: dict[str, tuple[np.ndarray, int]]) -> None:
    require_games(games, _REQUIRED)
    bad = games.filter(~pl.col("verdict").is_in(list(VERDICTS)) | pl.col("verdict").is_null())
    if bad.height:
        msg = (f"verdict must be one of {list(VERDICTS)}; {bad.height} game(s) hold "
               f"{bad['verdict'].unique().to_list()[:5]}")
        raise DesignError(msg)
    key = ["judge_id", *_MATCH]
    codes, n_keys = key_codes(games, key, cache)
    counts = np.bincount(codes, minlength=n_keys)
    dup = int(counts[counts > 1].sum())
    if dup:
        msg = f"games holds {dup} games sharing a key {key}; pass the games of one item set, each judgment once"
        raise DesignError(msg)


def judge_agreement(games: pl.DataFrame, *, gold_column: str = "gold") -> JudgeAgreement:
    r"""Per judge: replicate agreement and kappa, kappa with every other judge, gold accuracy.

    Parameters
    ----------
    games
        A frame of :func:`jurymeter.stats.pairwise.games.games` (one item set).
    gold_column : str, default "gold"
        The column of gold verdicts (``A``, ``B``, ``tie``, or null where none).

    Returns
    -------
    JudgeAgreement
        ``per_judge`` columns: ``judge_id, n_games, replicate_pairs,
        replicate_agreement, replicate_kappa, replicate_reason,
        replicate_kappa_reason, n_gold, gold_accuracy, gold_reason``;
        ``pairs`` columns: ``judge_1, judge_2, n_shared, agreement, kappa,
        kappa_reason``. Values that cannot be estimated are null, with the
        reason beside them.

    Raises
    ------
    DesignError
        A column is missing, a verdict is not ``A``/``B``/``tie``, or two games
        of one judge share (item, shown systems, generation, replicate).

    Notes
    -----
    Definitions in the module notes; kappa as in :func:`kappa_from_table`
    [Cohen1960]_. A replicate pair is rated (earlier, later): a judgment with
    replicates ranked :math:`0..n-1` contributes its rank-:math:`k` verdict
    :math:`n-1-k` times to the first rating's shares and :math:`k` times to
    the second's.

    Examples
    --------
    >>> g = pl.DataFrame({"item_id": ["i", "i"], "system_a": ["x", "x"], "system_b": ["y", "y"],
    ...     "judge_id": ["j", "k"], "generation": [0, 0], "replicate": [0, 0],
    ...     "verdict": ["A", "B"]})
    >>> judge_agreement(g).pairs["agreement"].to_list()
    [0.0]
    """
    cache: dict[str, tuple[np.ndarray, int]] = {}  # codes of the key columns, computed once
    _validate(games, cache)
    cols = [*_REQUIRED] + ([gold_column] if gold_column in games.columns else [])
    g = games.select(cols).with_columns(pl.col("verdict").cast(pl.String))
    judges = g["judge_id"].unique().sort().to_list()
    per_judge = _replicates(g, judges, cache).join(_gold(g, judges, gold_column), on="judge_id", how="left")
    return JudgeAgreement(per_judge=per_judge, pairs=_pairs(g, judges, cache), n_games=g.height,
                          gold_column=gold_column)


def _replicates(g: pl.DataFrame, judges: list[str], cache: dict[str, tuple[np.ndarray, int]]) -> pl.DataFrame:
    group = ["judge_id", "item_id", "system_a", "system_b", "generation"]
    judge = g["judge_id"].cast(pl.Enum(judges)).to_physical().cast(pl.Int64).to_numpy()
    verdict = g["verdict"].cast(pl.Enum(list(VERDICTS))).to_physical().cast(pl.Int64).to_numpy()
    code, n_groups = key_codes(g, group, cache)
    # k: the replicate's rank within its judgment (replicates are distinct there), n: the judgment's size
    order = np.lexsort((g["replicate"].to_numpy(), code))
    size = np.bincount(code, minlength=n_groups)
    start = np.cumsum(size) - size
    k = np.empty(g.height, dtype=np.float64)
    k[order] = np.arange(g.height) - start[code[order]]
    n = size[code].astype(np.float64)
    n_j = len(judges)
    # same-verdict pairs: sum over (judgment, verdict) of C(count, 2)
    c = np.bincount(code * 3 + verdict, minlength=3 * n_groups).astype(np.float64)
    group_judge = np.zeros(n_groups, dtype=np.int64)
    group_judge[code] = judge
    same = np.bincount(np.repeat(group_judge, 3), weights=c * (c - 1) / 2, minlength=n_j)
    earlier, later = n - 1 - k, k
    n_games = np.bincount(judge, minlength=n_j)
    n_pairs = np.bincount(judge, weights=earlier, minlength=n_j)
    first = [np.bincount(judge, weights=earlier * (verdict == v), minlength=n_j) for v in range(3)]
    second = [np.bincount(judge, weights=later * (verdict == v), minlength=n_j) for v in range(3)]
    rows: dict[str, list[object]] = {k: [] for k in (
        "judge_id", "n_games", "replicate_pairs", "replicate_agreement", "replicate_kappa",
        "replicate_reason", "replicate_kappa_reason")}
    for j, name in enumerate(judges):
        pairs = float(n_pairs[j])
        n_rep = round(pairs)
        rows["judge_id"].append(name)
        rows["n_games"].append(int(n_games[j]))
        rows["replicate_pairs"].append(n_rep)
        if n_rep == 0:
            why = "no judgment of this judge has two replicates"
            rows["replicate_agreement"].append(None)
            rows["replicate_kappa"].append(None)
            rows["replicate_reason"].append(why)
            rows["replicate_kappa_reason"].append(why)
            continue
        po = float(same[j]) / pairs
        pe = sum((float(first[v][j]) / pairs) * (float(second[v][j]) / pairs) for v in range(3))
        kappa, why_k = _kappa(po, pe)
        rows["replicate_agreement"].append(po)
        rows["replicate_kappa"].append(kappa)
        rows["replicate_reason"].append(None)
        rows["replicate_kappa_reason"].append(why_k)
    return pl.DataFrame(rows, schema={
        "judge_id": pl.String(), "n_games": pl.Int64(), "replicate_pairs": pl.Int64(),
        "replicate_agreement": pl.Float64(), "replicate_kappa": pl.Float64(),
        "replicate_reason": pl.String(), "replicate_kappa_reason": pl.String(),
    })


def _gold(g: pl.DataFrame, judges: list[str], gold_column: str) -> pl.DataFrame:
    schema = {"judge_id": pl.String(), "n_gold": pl.Int64(), "gold_accuracy": pl.Float64(),
              "gold_reason": pl.String()}
    if gold_column not in g.columns:
        return pl.DataFrame({"judge_id": judges, "n_gold": [0] * len(judges),
                             "gold_accuracy": [None] * len(judges),
                             "gold_reason": [f"the games have no {gold_column!r} column"] * len(judges)},
                            schema=schema)
    gold = pl.col(gold_column).cast(pl.String)
    counts = g.filter(gold.is_not_null()).group_by("judge_id").agg(
        pl.len().cast(pl.Int64).alias("n_gold"),
        (pl.col("verdict") == gold).mean().alias("gold_accuracy"),
    )
    out = pl.DataFrame({"judge_id": judges}).join(counts, on="judge_id", how="left").with_columns(
        pl.col("n_gold").fill_null(0),
    )
    return out.with_columns(
        pl.when(pl.col("n_gold") == 0).then(pl.lit("no game of this judge carries a gold label"))
        .otherwise(None).cast(pl.String).alias("gold_reason")
    ).select([pl.col(k).cast(t) for k, t in schema.items()])


def _pairs(g: pl.DataFrame, judges: list[str], cache: dict[str, tuple[np.ndarray, int]]) -> pl.DataFrame:
    # Each judgment (item, shown systems, generation, replicate) one row, each (judge, verdict)
    # one column: the Gram matrix of the indicators holds every pair of judges' 3 x 3 table.
    keep = g.select(pl.all_horizontal(pl.col(_MATCH).is_not_null())).to_series()
    matched = g.filter(keep)
    whole = bool(keep.all())
    code, n_keys = key_codes(matched, _MATCH, cache if whole else None)
    judge = matched["judge_id"].cast(pl.Enum(judges)).to_physical().cast(pl.Int64).to_numpy()
    verdict = matched["verdict"].cast(pl.Enum(list(VERDICTS))).to_physical().cast(pl.Int64).to_numpy()
    n_cols = 3 * len(judges)
    ind = sparse.csr_matrix((np.ones(matched.height), (code, judge * 3 + verdict)), shape=(n_keys, n_cols))
    gram = (ind.T @ ind).toarray() if matched.height else np.zeros((n_cols, n_cols))
    tables = {(j1, j2): gram[3 * a:3 * a + 3, 3 * (a + 1 + b):3 * (a + 2 + b)]
              for a, j1 in enumerate(judges) for b, j2 in enumerate(judges[a + 1:])}
    rows: dict[str, list[object]] = {k: [] for k in (
        "judge_1", "judge_2", "n_shared", "agreement", "kappa", "kappa_reason")}
    for a, j1 in enumerate(judges):
        for j2 in judges[a + 1:]:
            t = tables.get((j1, j2), np.zeros((3, 3)))
            n = int(t.sum())
            kappa, why = kappa_from_table(t)
            rows["judge_1"].append(j1)
            rows["judge_2"].append(j2)
            rows["n_shared"].append(n)
            rows["agreement"].append(float(np.trace(t) / n) if n else None)
            rows["kappa"].append(kappa)
            rows["kappa_reason"].append(why)
    return pl.DataFrame(rows, schema={
        "judge_1": pl.String(), "judge_2": pl.String(), "n_shared": pl.Int64(),
        "agreement": pl.Float64(), "kappa": pl.Float64(), "kappa_reason": pl.String(),
    })


def judge_failure_rates(
    judgments_by_judge: Mapping[str, int], failures_by_judge: Mapping[str, Mapping[str, int]]
) -> pl.DataFrame:
    r"""Per judge, the share of its judge calls that failed to parse or failed outright.

    Parameters
    ----------
    judgments_by_judge
        Stored (accepted) judgments per judge.
    failures_by_judge
        Quarantined judgments per judge and reason (``parse_failure``,
        ``judge_call_failed``, any other reason).

    Returns
    -------
    polars.DataFrame
        ``judge_id, judgments, parse_failures, judge_call_failures, failures,
        parse_failure_rate, judge_call_failed_rate, reason`` (rates null, with
        the reason, for a judge with no judgment at all), sorted by judge.

    Notes
    -----
    rate = failures of the reason / (stored judgments + all failures of the judge).

    Examples
    --------
    >>> judge_failure_rates({"j": 8}, {"j": {"parse_failure": 1, "judge_call_failed": 1}})[
    ...     "parse_failure_rate"].to_list()
    [0.1]
    """
    for name, value in judgments_by_judge.items():
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            msg = f"judgments_by_judge[{name!r}] must be an integer >= 0; got {value!r}"
            raise DesignError(msg)
    for name, reasons in failures_by_judge.items():
        for reason, value in reasons.items():
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                msg = f"failures_by_judge[{name!r}][{reason!r}] must be an integer >= 0; got {value!r}"
                raise DesignError(msg)
    judges = sorted(set(judgments_by_judge) | set(failures_by_judge))
    rows: dict[str, list[object]] = {k: [] for k in (
        "judge_id", "judgments", "parse_failures", "judge_call_failures", "failures",
        "parse_failure_rate", "judge_call_failed_rate", "reason")}
    for j in judges:
        stored = judgments_by_judge.get(j, 0)
        reasons = failures_by_judge.get(j, {})
        parse, call, failed = reasons.get(PARSE_FAILURE, 0), reasons.get(JUDGE_CALL_FAILED, 0), sum(reasons.values())
        total = stored + failed
        rows["judge_id"].append(j)
        rows["judgments"].append(stored)
        rows["parse_failures"].append(parse)
        rows["judge_call_failures"].append(call)
        rows["failures"].append(failed)
        rows["parse_failure_rate"].append(parse / total if total else None)
        rows["judge_call_failed_rate"].append(call / total if total else None)
        rows["reason"].append(None if total else "no judgment of this judge, stored or failed")
    return pl.DataFrame(rows, schema={
        "judge_id": pl.String(), "judgments": pl.Int64(), "parse_failures": pl.Int64(),
        "judge_call_failures": pl.Int64(), "failures": pl.Int64(),
        "parse_failure_rate": pl.Float64(), "judge_call_failed_rate": pl.Float64(),
        "reason": pl.String(),
    })
