"""The pairwise analysis: position bias, order reversals, judge health and agreement,
Bradley-Terry ratings with prompt-clustered intervals, family preference, the pairwise G-study.

Runs on every pairwise item set. Its parts are :mod:`jurymeter.stats.pairwise`;
this module reads the fit's records once as games (:func:`~jurymeter.stats.pairwise.games.games`),
reconciles the two presentation orders, runs each part, and turns what a part
cannot estimate on these data (no second family, no common baseline, a
comparison graph in pieces) into a null with its reason while the other parts
go on.

References
----------
.. [Anand2026] A. Anand, "Ask Which, Not How Good: Sizing Benchmarks Scored by an
   LLM", 2026 (``papers/ask-which-not-how-good.txt``), table 3.
.. [Awuni2026] D. A. Awuni et al., "Who Judges Matters: Measuring
   Family-Conditioned Preference in LLM-as-Judge Panels", 2026
   (``papers/who-judges-matters.txt``).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypedDict

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
from jurymeter.analyses.pairwise.headline import position_null_reason, position_text
from jurymeter.errors import JurymeterError, NotApplicableError

if TYPE_CHECKING:
    import numpy as np

    from jurymeter.render.html import SectionBuilder
    from jurymeter.stats.blocks import FitChunks, GenerationMode
    from jurymeter.stats.pairwise.agreement import JudgeAgreement
    from jurymeter.stats.pairwise.bradley_terry import BradleyTerry
    from jurymeter.stats.pairwise.family import FamilyPreference
    from jurymeter.stats.pairwise.gstudy import PairwiseGStudy
    from jurymeter.stats.pairwise.position import PositionBias

# The columns of the fit's records the analysis reads (``gold``: a gold verdict where the log has one).
RECORD_COLUMNS = ("order_known", "gold")
_READ = ("item_id", "system_a", "system_b", "judge_id", "generation", "replicate", "winner", "preference",
         "length_a", "length_b", "judge_logprob", *RECORD_COLUMNS)


@dataclass(frozen=True, slots=True)
class PairwiseOptions:
    """The pairwise analysis's own options (``[fit.pairwise]``; the ``pairwise`` command's flags).

    ``n_boot``: prompt-bootstrap resamples (ratings and position intervals);
    ``n_perm``: permutations of the family test (and its label placebo);
    ``resample_judges``: the ratings' bootstrap resamples judges too;
    ``anchor``: the system at 1000 on the Elo scale (default: the mean);
    ``baseline``: the pairwise G-study's baseline (default: the system in every pair).
    """

    n_boot: int = 1000
    n_perm: int = 1000
    resample_judges: bool = False
    anchor: str | None = None
    baseline: str | None = None


@dataclass(frozen=True, slots=True)
class PairwiseResult:
    """One fit's pairwise diagnostics: each part, or the reason it could not be estimated."""

    games: int
    outcomes: int
    systems: int
    items: int
    both_orders_share: float | None
    judges: pl.DataFrame = field(repr=False)  # one row per judge: position, health, agreement
    position: PositionBias | None = field(repr=False)
    agreement: JudgeAgreement | None = field(repr=False)
    bradley_terry: BradleyTerry | None = field(repr=False)
    family: FamilyPreference | None = field(repr=False)
    gstudy: PairwiseGStudy | None = field(repr=False)
    reasons: Mapping[str, str] = field(default_factory=dict)  # part -> why it is null


JUDGE_SCHEMA: dict[str, Any] = {
    "judge_id": pl.String, "games": pl.Int64, "pairs_both_orders": pl.Int64,
    "first_slot_win_rate": pl.Float64, "tie_rate": pl.Float64,
    "reversal_rate": pl.Float64, "reversal_low": pl.Float64, "reversal_high": pl.Float64,
    "exceeds_content_noise_bound": pl.Boolean, "q_position_following": pl.Float64,
    "q_low": pl.Float64, "q_high": pl.Float64,
    "slot_a_advantage": pl.Float64, "slot_a_low": pl.Float64, "slot_a_high": pl.Float64,
    "parse_failure_rate": pl.Float64, "failed_call_rate": pl.Float64, "failure_rate": pl.Float64,
    "replicate_agreement": pl.Float64, "replicate_kappa": pl.Float64, "gold_accuracy": pl.Float64,
}
# The JSON's per-judge keys (issue 13 names these; null where not estimable).
JUDGE_KEYS = tuple(k for k in JUDGE_SCHEMA if k != "judge_id")


def _fit_part(name: str, reasons: dict[str, str], run: Callable[[], Any]) -> Any:
    """A part's result, or ``None`` with the reason it cannot be estimated on these data."""
    try:
        return run()
    except (NotApplicableError, JurymeterError) as exc:
        reasons[name] = str(exc)
        return None


def _families(frame: pl.DataFrame, key: str) -> dict[str, str]:
    if frame.height == 0 or "family" not in frame.columns:
        return {}
    return {k: f for k, f in frame.select(key, "family").iter_rows() if k is not None and f is not None}


class _PairwiseFitting:
    def __init__(self, scope: FitScope, options: PairwiseOptions) -> None:
        self.scope, self.options = scope, options

    def feeds(self) -> Mapping[GenerationMode, Callable[[np.ndarray], object]]:
        return {}

    def finish(self) -> PairwiseResult:
        from jurymeter.stats.pairwise.agreement import judge_agreement
        from jurymeter.stats.pairwise.bradley_terry import bradley_terry
        from jurymeter.stats.pairwise.family import family_preference
        from jurymeter.stats.pairwise.games import both_orders_share, games, reconcile
        from jurymeter.stats.pairwise.gstudy import pairwise_gstudy
        from jurymeter.stats.pairwise.position import position_bias

        scope, options = self.scope, self.options
        present = scope.records.collect_schema().names()
        played = games(scope.records.select([c for c in _READ if c in present]))
        if played.height == 0:
            msg = "no pairwise judgments in this scope"
            raise NotApplicableError(msg)
        outcomes = reconcile(played)
        seed = scope.settings.seed
        reasons: dict[str, str] = {}
        position = _fit_part("position", reasons, lambda: position_bias(played, n_boot=options.n_boot, seed=seed))
        agreement = _fit_part("agreement", reasons, lambda: judge_agreement(played))
        bt = _fit_part("bradley_terry", reasons, lambda: bradley_terry(
            outcomes, n_boot=options.n_boot, seed=seed, resample_judges=options.resample_judges,
            anchor=options.anchor, games=played))
        abilities = None if bt is None else dict(bt.table.select("system_id", "rating").iter_rows())
        family = _fit_part("family_preference", reasons, lambda: family_preference(
            outcomes, judge_family=_families(scope.judges, "judge_id"),
            system_family=_families(scope.systems, "system_id"), abilities=abilities,
            n_perm=options.n_perm, n_placebo=options.n_perm, seed=seed, games=played))
        gstudy = _fit_part("gstudy", reasons, lambda: pairwise_gstudy(
            played, baseline=options.baseline, target=scope.settings.target))
        systems = set(played["system_a"].unique().to_list()) | set(played["system_b"].unique().to_list())
        return PairwiseResult(
            games=played.height, outcomes=outcomes.height, systems=len(systems),
            items=played["item_id"].n_unique(), both_orders_share=both_orders_share(outcomes),
            judges=_judges(played, position, agreement, scope.judge_health), position=position,
            agreement=agreement, bradley_terry=bt, family=family, gstudy=gstudy, reasons=reasons,
        )


def _judges(played: pl.DataFrame, position: PositionBias | None, agreement: JudgeAgreement | None,
            health: pl.DataFrame | None) -> pl.DataFrame:
    """One row per judge of the fit: position statistics, health, agreement (columns :data:`JUDGE_SCHEMA`)."""
    from jurymeter.stats.pairwise.agreement import judge_failure_rates

    frame = played.group_by("judge_id").agg(pl.len().cast(pl.Int64).alias("games"))
    if position is not None:
        frame = frame.join(position.per_judge.select(
            "judge_id", "pairs_both_orders", "first_slot_win_rate", "tie_rate", "reversal_rate",
            pl.col("reversal_rate_low").alias("reversal_low"), pl.col("reversal_rate_high").alias("reversal_high"),
            "exceeds_content_noise_bound", "q_position_following", "slot_a_advantage",
            pl.col("slot_a_advantage_low").alias("slot_a_low"), pl.col("slot_a_advantage_high").alias("slot_a_high"),
        ), on="judge_id", how="left")
        q_bounds = [_q_interval(r) for r in position.per_judge.iter_rows(named=True)]
        frame = frame.join(pl.DataFrame(
            {"judge_id": position.per_judge["judge_id"], "q_low": [b[0] for b in q_bounds],
             "q_high": [b[1] for b in q_bounds]}, schema={"judge_id": pl.String, "q_low": pl.Float64,
                                                          "q_high": pl.Float64}), on="judge_id", how="left")
    if health is not None and health.height:
        # Store-wide: a quarantined judgment does not say which item set it was for.
        stored = dict(health.select("judge_id", "stored").iter_rows())
        reasons: tuple[str, ...] = ("parse_failure", "judge_call_failed", "unscored")
        failures: dict[str, dict[str, int]] = {
            r["judge_id"]: {k: int(r[k] or 0) for k in reasons if k in r} for r in health.iter_rows(named=True)}
        judges = frame["judge_id"].to_list()
        rates = judge_failure_rates({j: int(stored.get(j, 0) or 0) for j in judges},
                                    {j: failures.get(j, {}) for j in judges})
        frame = frame.join(rates.select(
            "judge_id", "parse_failure_rate", pl.col("judge_call_failed_rate").alias("failed_call_rate"),
            (pl.col("failures") / (pl.col("judgments") + pl.col("failures"))).alias("failure_rate"),
        ), on="judge_id", how="left")
    if agreement is not None:
        frame = frame.join(agreement.per_judge.select(
            "judge_id", "replicate_agreement", "replicate_kappa", "gold_accuracy"), on="judge_id", how="left")
    missing = [pl.lit(None, dtype=t).alias(c) for c, t in JUDGE_SCHEMA.items() if c not in frame.columns]
    return frame.with_columns(missing).select(
        [pl.col(c).cast(t) for c, t in JUDGE_SCHEMA.items()]).sort("judge_id")


# Why a judge's number is null when its part gives no reason of its own.
_NULL_FALLBACK = {
    **dict.fromkeys(("parse_failure_rate", "failed_call_rate", "failure_rate"),
                    "no judge health in the store for this judge"),
    **dict.fromkeys(("reversal_low", "reversal_high", "q_low", "q_high", "slot_a_low", "slot_a_high"),
                    "no bootstrap resample gave a value: the interval is undefined"),
}


def _judge_reasons(result: PairwiseResult) -> dict[str, dict[str, str]]:
    """Per judge, the reason each of its null numbers has (from the parts' own reasons)."""
    out: dict[str, dict[str, str]] = {}
    for judge in result.judges["judge_id"].to_list():
        out[judge] = {}
        if result.position is None:
            out[judge].update(dict.fromkeys(
                ("pairs_both_orders", "first_slot_win_rate", "tie_rate", "reversal_rate", "reversal_low",
                 "reversal_high", "exceeds_content_noise_bound", "q_position_following", "q_low", "q_high",
                 "slot_a_advantage", "slot_a_low", "slot_a_high"), result.reasons.get("position", "")))
        if result.agreement is None:
            out[judge].update(dict.fromkeys(("replicate_agreement", "replicate_kappa", "gold_accuracy"),
                                            result.reasons.get("agreement", "")))
    if result.position is not None:
        for r in result.position.per_judge.iter_rows(named=True):
            reversal = r["reversal_rate_reason"]
            slot = r["slot_a_advantage_reason"]
            out.setdefault(r["judge_id"], {}).update({
                "first_slot_win_rate": "no game of this judge has a known presentation order"
                if not r["n_order_known"] else "",
                "reversal_rate": reversal, "reversal_low": reversal, "reversal_high": reversal,
                "exceeds_content_noise_bound": reversal,
                "q_position_following": r["q_reason"], "q_low": r["q_reason"], "q_high": r["q_reason"],
                "slot_a_advantage": slot, "slot_a_low": slot, "slot_a_high": slot,
            })
    if result.agreement is not None:
        for r in result.agreement.per_judge.iter_rows(named=True):
            out.setdefault(r["judge_id"], {}).update({
                "replicate_agreement": r["replicate_reason"], "replicate_kappa": r["replicate_kappa_reason"],
                "gold_accuracy": r["gold_reason"]})
    return {j: {k: v for k, v in reasons.items() if v} for j, reasons in out.items()}


def _q_interval(row: Mapping[str, Any]) -> tuple[float | None, float | None]:
    """The interval of the position-following q: the reversal rate's interval through the q formula.

    ``q = 1/2 + sign(a - b) sqrt(2r - 1)/2`` is monotone in the reversal rate r
    on the branch the point estimate takes, so the ends of r's percentile
    interval map to the ends of q's (a percentile interval respects monotone
    transformations); an end of r below 1/2 maps to q = 1/2, where the model
    meets chance. Null where q itself is.
    """
    from jurymeter.stats.pairwise.position import position_following_q

    q, low, high = row.get("q_position_following"), row.get("reversal_rate_low"), row.get("reversal_rate_high")
    first, second = row.get("first_slot_win_rate"), row.get("second_slot_win_rate")
    if q is None or low is None or high is None or first is None or second is None:
        return None, None
    ends = [position_following_q(max(float(r), 0.5), float(first), float(second))[0] for r in (low, high)]
    finite = [e for e in ends if e is not None]
    if len(finite) < 2:
        return None, None
    return min(finite), max(finite)


def _finite(value: Any) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def _rows(frame: pl.DataFrame, schema: Mapping[str, Any], rename: Mapping[str, str] | None = None) -> list[dict[str, Any]]:
    """The frame's rows in a table's schema (columns absent from the frame are null)."""
    rename = dict(rename or {})
    out = []
    for row in frame.iter_rows(named=True):
        out.append({c: _finite(row.get(rename.get(c, c))) for c in schema})
    return out


BT_TABLE = {
    "system_id": pl.String, "rating": pl.Float64, "rating_elo": pl.Float64, "se_sandwich": pl.Float64,
    "low": pl.Float64, "high": pl.Float64, "low_elo": pl.Float64, "high_elo": pl.Float64,
    "battle_low": pl.Float64, "battle_high": pl.Float64, "battle_low_elo": pl.Float64,
    "battle_high_elo": pl.Float64, "width_ratio": pl.Float64, "rank": pl.Int64, "rank_low": pl.Int64,
    "rank_high": pl.Int64, "tie_group": pl.Int64, "rating_lc": pl.Float64, "rating_lc_elo": pl.Float64,
}
POSITION_SYSTEM_TABLE = {
    "system_id": pl.String, "games_first": pl.Int64, "games_second": pl.Int64, "win_rate_first": pl.Float64,
    "win_rate_second": pl.Float64, "slot_a_advantage": pl.Float64, "slot_a_low": pl.Float64,
    "slot_a_high": pl.Float64,
}
AGREEMENT_TABLE = {"judge_1": pl.String, "judge_2": pl.String, "n_shared": pl.Int64, "agreement": pl.Float64,
                   "kappa": pl.Float64}
SUPPORT_TABLE = {"judge_family": pl.String, "candidate_family": pl.String, "support": pl.Float64, "n": pl.Int64}
LIFT_TABLE = {"family": pl.String, "ability": pl.Float64, "same_family_support": pl.Float64,
              "other_judges_support": pl.Float64, "other_candidates_support": pl.Float64, "naive": pl.Float64,
              "corrected": pl.Float64, "naive_p": pl.Float64, "corrected_p": pl.Float64}
COMPOSITION_TABLE = {"reference": pl.String, "panel": pl.String, "n_compared": pl.Int64, "n_changed": pl.Int64,
                     "share_changed": pl.Float64}
GSTUDY_TABLE = {"arm": pl.String, "systems": pl.Int64, "items": pl.Int64, "judges": pl.Int64,
                "replicates": pl.Int64, "sigma2_s": pl.Float64, "sigma2_sj": pl.Float64, "share": pl.Float64,
                "ceiling": pl.Float64, "erho2": pl.Float64, "judges_needed": pl.Int64, "reason": pl.String}


def _bt_frame(bt: BradleyTerry) -> pl.DataFrame:
    """The ratings with their Elo-scale intervals (and the length-controlled rating, where fitted)."""
    from jurymeter.stats.pairwise.bradley_terry import ELO_PER_LOGIT

    table = bt.table
    # Elo = centre + ELO_PER_LOGIT * logit; the centre is read off the table's own two columns.
    centre = pl.col("rating_elo") - ELO_PER_LOGIT * pl.col("rating")
    table = table.with_columns(
        pl.col("elo_low").alias("low_elo"), pl.col("elo_high").alias("high_elo"),
        (centre + ELO_PER_LOGIT * pl.col("battle_low")).alias("battle_low_elo"),
        (centre + ELO_PER_LOGIT * pl.col("battle_high")).alias("battle_high_elo"),
    )
    lc = bt.length_control
    if lc is not None:
        table = table.join(lc.ratings.select("system_id", pl.col("rating").alias("rating_lc"),
                                             pl.col("rating_elo").alias("rating_lc_elo")), on="system_id", how="left")
    return table


class PairwiseFit(FitPart[PairwiseResult, PairwiseOptions]):
    """The pairwise fit: the records read once as games, each part fitted or null with its reason."""

    protocols = ("pairwise",)
    record_columns = RECORD_COLUMNS
    reads_judge_health = True
    compute_modules = ("jurymeter.stats.pairwise.position", "jurymeter.stats.pairwise.bradley_terry",
                       "jurymeter.stats.pairwise.family", "jurymeter.stats.pairwise.gstudy")

    def start(self, scope: FitScope, chunked: FitChunks | None, options: PairwiseOptions) -> _PairwiseFitting:
        return _PairwiseFitting(scope, options)


class PairwiseTables(TablesPart[PairwiseResult]):
    """The pairwise tables: per judge, per system, per judge pair, the ratings, the family preference, the G-study."""

    tables = (
        Table("pairwise_judges", JUDGE_SCHEMA, "per judge: position bias, reversals, ties, failures, agreement"),
        Table("pairwise_position_systems", POSITION_SYSTEM_TABLE, "slot-A advantage per system"),
        Table("judge_agreement", AGREEMENT_TABLE, "Cohen's kappa between every two judges on shared judgments"),
        Table("bt_ratings", BT_TABLE, "Bradley-Terry ratings, prompt/battle intervals, ranks, tie groups"),
        Table("family_support", SUPPORT_TABLE, "mean support by judge family x candidate family"),
        Table("family_lifts", LIFT_TABLE, "naive and corrected same-family lift per family"),
        Table("family_composition", COMPOSITION_TABLE, "share of pairwise outcomes a panel change flips"),
        Table("pairwise_gstudy", GSTUDY_TABLE, "G-study of the win indicator per presentation-order arm"),
    )

    def tabulate(self, result: PairwiseResult) -> dict[str, list[dict[str, Any]]]:
        tables: dict[str, list[dict[str, Any]]] = {"pairwise_judges": _rows(result.judges, JUDGE_SCHEMA)}
        if result.position is not None:
            tables["pairwise_position_systems"] = _rows(result.position.per_system, POSITION_SYSTEM_TABLE, {
                "slot_a_low": "slot_a_advantage_low", "slot_a_high": "slot_a_advantage_high"})
        if result.agreement is not None:
            tables["judge_agreement"] = _rows(result.agreement.pairs, AGREEMENT_TABLE)
        if result.bradley_terry is not None:
            tables["bt_ratings"] = _rows(_bt_frame(result.bradley_terry), BT_TABLE)
        if result.family is not None:
            tables["family_support"] = _rows(result.family.support, SUPPORT_TABLE)
            tables["family_lifts"] = _rows(result.family.per_family, LIFT_TABLE)
            tables["family_composition"] = _rows(result.family.composition, COMPOSITION_TABLE)
        if result.gstudy is not None:
            tables["pairwise_gstudy"] = _rows(result.gstudy.frame, GSTUDY_TABLE)
        return tables


class PairwiseHeadline(TypedDict):
    """The pairwise entry in the run summary: exactly the keys of :attr:`PairwiseSummary.headline`."""

    slot_a_advantage: float | None
    max_reversal_rate: float | None
    interval_ratio: float | None
    fps: float | None
    slot_a_judge_low: float | None
    slot_a_judge_high: float | None
    min_reversal_rate: float | None
    position_judgments: int | None
    position_order_unknown: int | None
    slot_a_advantage_reason: str | None
    interval_ratio_reason: str | None
    max_reversal_rate_reason: str | None
    fps_reason: str | None


class PairwiseSummary(SummaryPart[PairwiseResult]):
    """The pairwise report (each part, null numbers with their reasons), headline numbers and sentence."""

    headline = (
        Headline("slot_a_advantage", "slot-A advantage (points)", doc="win rate shown first minus shown second, in percentage points"),
        Headline("max_reversal_rate", "largest AB/BA reversal rate", doc="0-1: the largest share of a judge's pairs, seen in both orders, whose winner flips with the order"),
        Headline("interval_ratio", "prompt/battle interval width", doc="prompt-bootstrap over battle-bootstrap Bradley-Terry interval width (above 1: the usual intervals are too narrow)"),
        Headline("fps", "family preference score", doc="mean support for a same-family candidate minus other families' (0-1 scale)"),
        # The sentence's spreads over judges and reasons for missing numbers (issue 24, points 4 and 5).
        Headline("slot_a_judge_low", "lowest judge slot-A advantage (points)", table=False),
        Headline("slot_a_judge_high", "highest judge slot-A advantage (points)", table=False),
        Headline("min_reversal_rate", "smallest AB/BA reversal rate", table=False),
        Headline("position_judgments", "judgments", "count", table=False),
        Headline("position_order_unknown", "judgments of unknown order", "count", table=False),
        # A "<key>_reason" says why the "<key>" headline is not estimable (the Fits tables show it in the cell).
        Headline("slot_a_advantage_reason", "why no slot-A advantage", "text", table=False),
        Headline("interval_ratio_reason", "why no Bradley-Terry ratings", "text", table=False),
        Headline("max_reversal_rate_reason", "why no reversal rate", "text", table=False),
        Headline("fps_reason", "why no family preference score", "text", table=False),
    )

    # What the run history follows across published runs (pipeline.history, issue 16 point 4).
    tracked = (
        Tracked("position bias", "points", table="pairwise_judges", estimate="slot_a_advantage",
                low="slot_a_low", high="slot_a_high", subject="judge_id", drift=True),
        Tracked("pairwise failure rate", "share", table="pairwise_judges", estimate="failure_rate",
                subject="judge_id", drift=True),
    )

    def report(self, result: PairwiseResult) -> dict[str, Any]:
        why = _judge_reasons(result)
        judges = {}
        for r in result.judges.iter_rows(named=True):
            row: dict[str, Any] = {k: _finite(r[k]) for k in JUDGE_KEYS}
            reasons = why.get(r["judge_id"], {})
            # Every null number of the judge's row with its reason (issue 22: null with its reason).
            row["null_reasons"] = {k: reasons.get(k) or _NULL_FALLBACK.get(k, NOT_ESTIMABLE)
                                   for k in JUDGE_KEYS if row[k] is None}
            judges[r["judge_id"]] = row
        out: dict[str, Any] = {
            "games": result.games, "outcomes": result.outcomes, "systems": result.systems,
            "items": result.items, "both_orders_share": result.both_orders_share, "judges": judges,
            "reasons": dict(result.reasons),
        }
        out["position"] = _position_report(result.position) if result.position is not None else {
            "reason": result.reasons.get("position")}
        if result.agreement is not None:
            out["agreement"] = [
                {**row, "reason": None if row["kappa"] is not None else (
                    pair["kappa_reason"] or "the two judges share no judgment")}
                for row, pair in zip(_rows(result.agreement.pairs, AGREEMENT_TABLE),
                                     result.agreement.pairs.iter_rows(named=True), strict=True)]
        else:
            out["agreement"] = {"reason": result.reasons.get("agreement")}
        bt = result.bradley_terry
        if bt is not None:
            frame = _bt_frame(bt)
            out["bradley_terry"] = {
                "systems": {r["system_id"]: {k: v for k, v in r.items() if k != "system_id"}
                            for r in _rows(frame, BT_TABLE)},
                "interval_ratio": _finite(bt.width_ratio), "n_boot": bt.n_boot, "anchor": bt.anchor,
                "resample_judges": bt.resample_judges, "degenerate_resamples": {
                    "prompt": bt.prompt_degenerate, "battle": bt.battle_degenerate},
                "length_control": None if bt.length_control is None else {
                    "beta": bt.length_control.beta, "beta_se": bt.length_control.beta_se,
                    "rank_changed": list(bt.length_control.changed)},
                "length_control_reason": bt.length_control_reason, "notes": list(bt.notes),
            }
        else:
            out["bradley_terry"] = {"reason": result.reasons.get("bradley_terry")}
        out["family_preference"] = (_family_report(result.family) if result.family is not None
                                    else {"reason": result.reasons.get("family_preference")})
        g = result.gstudy
        out["gstudy"] = ({"baseline": g.baseline, "arms": _rows(g.frame, GSTUDY_TABLE)} if g is not None
                         else {"reason": result.reasons.get("gstudy")})
        return out

    def summarize(self, result: PairwiseResult) -> PairwiseHeadline:
        position = result.position
        reversal = result.judges["reversal_rate"].drop_nulls()
        advantage = result.judges["slot_a_advantage"].drop_nulls().drop_nans()
        slot_a = None if position is None else _finite(position.slot_a_advantage.value)
        return {
            "slot_a_advantage": slot_a,
            "max_reversal_rate": _finite(float(reversal.max())) if reversal.len() else None,  # type: ignore[arg-type]
            "interval_ratio": None if result.bradley_terry is None else _finite(result.bradley_terry.width_ratio),
            "fps": None if result.family is None else _finite(result.family.fps),
            "slot_a_judge_low": _finite(float(advantage.min())) if advantage.len() else None,  # type: ignore[arg-type]
            "slot_a_judge_high": _finite(float(advantage.max())) if advantage.len() else None,  # type: ignore[arg-type]
            "min_reversal_rate": _finite(float(reversal.min())) if reversal.len() else None,  # type: ignore[arg-type]
            "position_judgments": None if position is None else position.n_games,
            "position_order_unknown": None if position is None else position.n_games - position.n_order_known,
            "slot_a_advantage_reason": position_null_reason(
                slot_a, None if position is None else position.n_games,
                None if position is None else position.n_games - position.n_order_known,
                result.reasons.get("position") if position is None else position.slot_a_advantage.reason),
            "interval_ratio_reason": result.reasons.get("bradley_terry") if result.bradley_terry is None else None,
            "max_reversal_rate_reason": None if reversal.len() else (
                result.reasons.get("position") if position is None else position.reversal_rate.reason
                or "no judge saw a pair in both presentation orders"),
            "fps_reason": (result.reasons.get("family_preference") or NOT_ESTIMABLE)
            if result.family is None or _finite(result.family.fps) is None else None,
        }

    def sentence(self, part: Mapping[str, Any], context: HeadlineContext) -> str | None:
        """Position bias and order reversals with their range over judges, interval widths, family preference."""
        clauses = []
        position = position_text(part)
        if position is not None:
            clauses.append(position)
        if part.get("max_reversal_rate") is not None:
            clause = f"up to {100 * part['max_reversal_rate']:.0f}% of verdicts flip when the order flips"
            low = part.get("min_reversal_rate")
            if low is not None and low != part["max_reversal_rate"]:
                clause += f" (judges {100 * low:.0f}% to {100 * part['max_reversal_rate']:.0f}%)"
            clauses.append(clause)
        elif part.get("max_reversal_rate_reason"):
            clauses.append(f"order reversals not estimable: {part['max_reversal_rate_reason']}")
        if part.get("interval_ratio") is not None:
            clauses.append(f"prompt-clustered rating intervals {part['interval_ratio']:.2f}x the battle ones")
        elif part.get("interval_ratio_reason"):
            clauses.append(f"no Bradley-Terry ratings: {str(part['interval_ratio_reason']).split(';', 1)[0]}")
        if part.get("fps") is not None:
            clauses.append(f"same-family preference {part['fps']:+.3f}")
        return "; ".join(clauses) or None


class PairwiseSection(SectionPart):
    """The pairwise section of a fit's page (:mod:`jurymeter.analyses.pairwise.section`, imported when drawn)."""

    figure_modules = (*PairwiseFit.compute_modules, "jurymeter.analyses.pairwise.section")

    def section(self, page: SectionBuilder) -> None:
        from jurymeter.analyses.pairwise.section import pairwise_section

        pairwise_section(page)


class PairwiseAnalysis(PairwiseFit, PairwiseTables, PairwiseSummary, PairwiseSection,
                       Analysis[PairwiseResult, PairwiseOptions]):
    """Pairwise judging ([Anand2026]_ table 3; [Awuni2026]_ sections 4-10)."""

    name = "pairwise"
    title = "Pairwise judging"
    order = 30
    options_type = PairwiseOptions

    # Its command, as data (imported by the CLI only): jurymeter.analyses.pairwise.command.
    command = "jurymeter.analyses.pairwise.command:COMMAND"


def _estimate(e: Any) -> dict[str, Any]:
    return {"value": _finite(e.value), "low": _finite(e.low), "high": _finite(e.high), "reason": e.reason}


def _position_report(p: PositionBias) -> dict[str, Any]:
    return {
        "slot_a_advantage": _estimate(p.slot_a_advantage), "slot_a_advantage_sd": _estimate(p.slot_a_advantage_sd),
        "slot_a_advantage_max": _estimate(p.slot_a_advantage_max),
        "first_slot_win_rate": _estimate(p.first_slot_win_rate), "reversal_rate": _estimate(p.reversal_rate),
        "pairs_both_orders": p.pairs_both_orders, "exceeds_content_noise_bound": p.exceeds_content_noise_bound,
        "q_position_following": _finite(p.q_position_following), "q_reason": p.q_reason,
        "games_order_known": p.n_order_known, "n_boot": p.n_boot,
        "systems": _rows(p.per_system, POSITION_SYSTEM_TABLE, {
            "slot_a_low": "slot_a_advantage_low", "slot_a_high": "slot_a_advantage_high"}),
    }


def _family_report(f: FamilyPreference) -> dict[str, Any]:
    logprob = f.logprob
    return {
        "families": list(f.families), "mean_diagonal": _finite(f.mean_diagonal),
        "mean_off_diagonal": _finite(f.mean_off_diagonal), "fps": _finite(f.fps),
        "p_permutation": _finite(f.p_permutation), "fps_null_mean": _finite(f.fps_null_mean), "n_perm": f.n_perm,
        "p_placebo": _finite(f.p_placebo), "n_placebo": f.n_placebo, "placebo_enumerated": f.placebo_enumerated,
        "placebo_reason": f.placebo_reason,
        "support": _rows(f.support, SUPPORT_TABLE), "per_family": _rows(f.per_family, LIFT_TABLE),
        "leave_one_out": _rows(f.leave_one_out, {"left_out": None, "family": None, "fps": None, "reason": None}),
        "naive_ability_r": _finite(f.naive_ability_r), "corrected_ability_r": _finite(f.corrected_ability_r),
        "ability_reason": f.ability_reason, "composition": _rows(f.composition, COMPOSITION_TABLE),
        "logprob": None if logprob is None else {
            "n_games": logprob.n_games, "r": _finite(logprob.r), "mean_same_family": _finite(logprob.mean_same_family),
            "mean_cross_family": _finite(logprob.mean_cross_family), "reason": logprob.reason},
        "logprob_reason": f.logprob_reason,
        "outcomes": f.n_outcomes, "same_family_outcomes_left_out": f.n_same_family_outcomes,
        "outcomes_without_family": f.n_outcomes_without_family,
        "systems_without_family": f.n_systems_without_family, "judges_without_family": f.n_judges_without_family,
    }


PAIRWISE = PairwiseAnalysis()
