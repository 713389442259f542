"""The G-study's summary part: its JSON report, its entry in the run summary, its headline clause.

Also what the ``gstudy`` command and the page say a fit left out
(:func:`dropped_summary`, :func:`dropped_text`), from the same numbers.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypedDict

from jurymeter.analyses.base import NOT_ESTIMABLE, Headline, HeadlineContext, SummaryPart, Tracked
from jurymeter.analyses.gstudy.result import GStudyReport, GStudyResult, LeaderboardRow
from jurymeter.analyses.gstudy.result import finite as _finite


class ToldApart(TypedDict):
    """How many pairs of systems the MDD tells apart, and how many systems could rank first (``None``: no MDD)."""

    pairs: int | None
    pairs_apart: int | None
    top_candidates: int | None
    top_systems: str | None
    best_system: str | None


class DroppedSummary(TypedDict):
    """What a fit's balanced block left out: counts, and the dropped system ids (``None``: none)."""

    dropped_systems: int
    dropped_items: int
    dropped_judges: int
    dropped_system_ids: str | None


class IndexSummary(ToldApart):
    """The numbers of the index page's headline sentence (:func:`index_summary`)."""

    records: int | None
    groups: int | None
    lenient_judge: str | None
    lenient_offset: float | None
    harsh_judge: str | None
    harsh_offset: float | None
    judges_needed: int | None
    target: float | None


class NullReasons(TypedDict):
    """Why each Fits-table number of the G-study is null (``None`` for a number it has)."""

    erho2_reason: str | None
    ceiling_reason: str | None
    mdd95_reason: str | None


class UniverseSummary(TypedDict):
    """The declared universe's D-study in the run summary (``[fit.gstudy] fixed``, ``judge_pool``, ``item_pool``)."""

    universe_declared: str | None
    universe_erho2: float | None
    universe_mdd95: float | None


def universe_summary(report: Mapping[str, Any]) -> UniverseSummary:
    """The declared universe, its E rho^2 and MDD95 at the study's sizes (all ``None`` when none is declared)."""
    universe = report.get("universe_dstudy") or {}
    return {"universe_declared": universe.get("declared"), "universe_erho2": universe.get("erho2"),
            "universe_mdd95": universe.get("mdd95")}


class GStudyHeadline(DroppedSummary, IndexSummary, NullReasons, UniverseSummary):
    """The G-study's entry in the run summary: exactly the keys of :attr:`GStudySummary.headline`."""

    design: str
    systems: int
    items: int
    judges: int
    erho2: float | None
    ceiling: float | None
    mdd95: float | None
    design_note: str | None


class GStudySummary(SummaryPart[GStudyResult]):
    """The G-study's report (the statistics' own, as built), headline numbers and sentence."""

    headline = (
        Headline("design", "design", "text"),
        Headline("systems", "systems", "count"),
        Headline("items", "items", "count"),
        Headline("judges", "judges", "count"),
        Headline("erho2", "E\u03c1\u00b2", doc="0-1: the share of the variance of system means that is real system difference, at the observed judges and items"),
        Headline("ceiling", "single-judge ceiling", doc="0-1: the E\u03c1\u00b2 one judge reaches with unlimited items (below E\u03c1\u00b2 when several judges are averaged: a judge's disagreement with the others does not shrink with items)"),
        Headline("mdd95", "MDD95 (points)", doc="the smallest difference of two system means the design detects at 95 %, in score points"),
        Headline("design_note", "design note", "text"),
        # What the fit left out (issue 14, point 5): from the report's block section.
        Headline("dropped_systems", "systems dropped", "count"),
        Headline("dropped_items", "items dropped", "count"),
        Headline("dropped_judges", "judges dropped", "count"),
        Headline("dropped_system_ids", "systems not on the leaderboard", "text"),
        # The index page's headline sentence (issue 16, point 1).
        Headline("records", "observations", "count", table=False),
        Headline("groups", "tie groups", "count", table=False),
        Headline("lenient_judge", "most lenient judge", "text", table=False),
        Headline("lenient_offset", "lenient offset (points)", table=False),
        Headline("harsh_judge", "harshest judge", "text", table=False),
        Headline("harsh_offset", "harsh offset (points)", table=False),
        Headline("judges_needed", "judges for the target at 30 items", "count", table=False),
        Headline("target", "E\u03c1\u00b2 target", table=False),
        Headline("pairs", "pairs of systems", "count", table=False),
        Headline("pairs_apart", "pairs told apart", "count", table=False),
        Headline("top_candidates", "systems that could rank first", "count", table=False),
        # Their names (issue 24, point 1): the systems whose rank range includes 1, best mean first.
        Headline("top_systems", "systems that could rank first", "text", table=False),
        Headline("best_system", "highest mean", "text", table=False),
        # A "<key>_reason" says why the "<key>" column is not estimable (the Fits tables say it).
        Headline("erho2_reason", "why no E\u03c1\u00b2", "text", table=False),
        Headline("ceiling_reason", "why no single-judge ceiling", "text", table=False),
        Headline("mdd95_reason", "why no MDD95", "text", table=False),
        Headline("universe_declared", "declared universe", "text", table=False),
        Headline("universe_erho2", "E\u03c1\u00b2 in the declared universe", table=False),
        Headline("universe_mdd95", "MDD95 in the declared universe (points)", table=False),
    )
    # What the run history follows across published runs (pipeline.history, issue 16 point 4).
    tracked = (
        Tracked("records", "records", headline="records"),
        Tracked("E\u03c1\u00b2", "coefficient (0\u20131)", table="dstudy", low="low", high="high",
                select=("quantity", "erho2")),
        Tracked("single-judge ceiling", "coefficient (0\u20131)", table="dstudy", low="low", high="high",
                select=("quantity", "ceiling")),
        Tracked("MDD95", "points", table="dstudy", low="low", high="high", select=("quantity", "mdd95")),
        Tracked("judge offset", "points", table="judge_effects", estimate="offset", low="low", high="high",
                subject="judge_id", drift=True),
    )

    def report(self, result: GStudyResult) -> dict[str, Any]:
        return dict(result.report)

    def summarize(self, result: GStudyResult) -> GStudyHeadline:
        return {
            "design": result.design, "systems": result.systems, "items": result.items,
            "judges": result.judges, "erho2": result.erho2, "ceiling": result.ceiling,
            "mdd95": result.mdd95, "design_note": result.design_note, **dropped_summary(result.report),
            **index_summary(result.report), **_null_reasons(result), **universe_summary(result.report),
        }

    def sentence(self, part: Mapping[str, Any], context: HeadlineContext) -> str | None:
        """Which systems can be told apart, the MDD, what one judge and more judges reach, the judges' offsets."""
        clauses = []
        systems = part.get("systems")
        clause = told_apart_text(part)
        if clause is not None:
            clauses.append(clause)
        elif systems is not None:
            clauses.append(f"{systems} system{'' if systems == 1 else 's'}")
        if part.get("mdd95") is not None:
            clauses.append(f"MDD {part['mdd95']:.2f} {context.points()}")
        if part.get("erho2") is not None:
            judges = part.get("judges")
            clauses.append(f"E\u03c1\u00b2 {part['erho2']:.2f} with {judges} judge{'' if judges == 1 else 's'} "
                           f"and {part.get('items')} items")
        reach = []
        if part.get("ceiling") is not None:
            reach.append(f"one judge's ceiling {part['ceiling']:.2f}")
        if part.get("judges_needed") is not None and part.get("target") is not None:
            reach.append(f"{part['judges_needed']} judges reach E\u03c1\u00b2 {part['target']:g} at 30 items")
        if reach:
            clauses.append(", ".join(reach))
        if part.get("universe_declared") and part.get("universe_mdd95") is not None:
            clauses.append(f"with {part['universe_declared']}: MDD {part['universe_mdd95']:.2f} {context.points()}")
        if part.get("lenient_offset") is not None and part.get("harsh_offset") is not None:
            clauses.append(f"most lenient judge {part.get('lenient_judge')} {part['lenient_offset']:+.2f}, "
                           f"harshest {part.get('harsh_judge')} {part['harsh_offset']:+.2f} points")
        return "; ".join(clauses) or None


def _null_reasons(result: GStudyResult) -> NullReasons:
    """The report's reason for each Fits-table number that is null (``None`` for a number it has)."""
    reasons = result.report.get("null_reasons") or {}

    def why(key: str, value: float | None) -> str | None:
        return None if value is not None else str(reasons.get(key) or NOT_ESTIMABLE)

    return {"erho2_reason": why("erho2", result.erho2), "ceiling_reason": why("ceiling", result.ceiling),
            "mdd95_reason": why("mdd95", result.mdd95)}


# More systems than this that could rank first: the first ones named, then a count.
NAMED_TOP = 5


def told_apart_text(part: Mapping[str, Any]) -> str | None:
    """Which systems could rank first, by name, and how many pairs the MDD tells apart (issue 24, point 1).

    From a G-study summary entry (``top_systems``, ``best_system``, ``pairs``,
    ``pairs_apart``, ``systems``); ``None`` without an MDD. The wording follows
    the rank ranges (``docs/results.md``, "Rank ranges"): the systems that
    could rank first are those within the MDD of the best mean, so no two of
    them are told apart, and every other system is at least the MDD below the
    best one. ``None`` when the entry has no names (an older summary).
    """
    systems, pairs, apart = part.get("systems"), part.get("pairs"), part.get("pairs_apart")
    top, best, count = part.get("top_systems"), part.get("best_system"), part.get("top_candidates")
    if systems is None or count is None or None in (pairs, apart, top, best):
        return None
    systems, count = int(systems), int(count)
    if systems == 1:
        return f"1 system ({best})"
    pairs_said = f"{apart} of {pairs} pairs can be told apart"
    rest = systems - count
    if count == 1:
        return f"{systems} systems: {best} ranks first, at least the MDD above each of the other {rest}; {pairs_said}"
    shown = str(top)
    if count > NAMED_TOP:  # the first ones by mean, then a count (a name holding ", " only shortens the list)
        shown = ", ".join(str(top).split(", ")[:NAMED_TOP]) + f" and {count - NAMED_TOP} more"
    if rest == 0:
        return f"{systems} systems: none can be told apart from the best ({best}): any could rank first; {pairs_said}"
    both = "both" if count == 2 else f"all {count}"
    return (f"{systems} systems: {shown} could rank first and cannot be told apart ({both} within the MDD of "
            f"{best}); the other {rest} are at least the MDD below {best}; {pairs_said}")


def dropped_summary(report: Mapping[str, Any]) -> DroppedSummary:
    """What a fit's block left out, from its report's ``block`` section (``summary.json``'s G-study entry).

    Counts of the systems, items and judges dropped to balance the block and
    the dropped system ids (the leaderboard rows that are missing; ``None``
    when none).
    """
    block = report.get("block") or {}
    ids = [str(s) for s in block.get("dropped_systems") or []]
    return {
        "dropped_systems": len(ids),
        "dropped_items": len(block.get("dropped_items") or []),
        "dropped_judges": len(block.get("dropped_judges") or []),
        "dropped_system_ids": ", ".join(ids) or None,
    }


def index_summary(report: GStudyReport) -> IndexSummary:
    """The headline numbers of the index page's sentence (issue 16, point 1), from a fit's report.

    ``records``: the observations the fit used (the block's, or every record's
    cells with Henderson: with generations averaged one is the mean of a cell's
    generations); ``groups``: the leaderboard's tie groups (``None`` when the MDD
    is not estimable); the most lenient and the harshest judge with their
    offsets in points (``None`` with fewer than two judges:
    ``null_reasons["judge_offsets"]`` says why).
    """
    block = report.get("block") or {}
    used = block.get("observations_used")
    board = report.get("leaderboard") or []
    groups = {row.get("tie_group") for row in board}
    offsets = [row for row in report.get("judge_offsets") or [] if row.get("offset") is not None]
    lenient = max(offsets, key=lambda r: (r["offset"], r["judge_id"]), default=None)
    harsh = min(offsets, key=lambda r: (r["offset"], r["judge_id"]), default=None)
    return {
        "records": None if used is None else int(used),
        "groups": None if not board or None in groups else len(groups),
        "lenient_judge": None if lenient is None else str(lenient["judge_id"]),
        "lenient_offset": None if lenient is None else _finite(lenient["offset"]),
        "harsh_judge": None if harsh is None else str(harsh["judge_id"]),
        "harsh_offset": None if harsh is None else _finite(harsh["offset"]),
        "judges_needed": report.get("judges_needed"),
        "target": _finite(report.get("target")),
        **_told_apart(board),
    }


def _told_apart(board: list[LeaderboardRow]) -> ToldApart:
    """Pairs of systems whose means differ by at least the MDD, and the systems that could rank first.

    From the leaderboard's rows (``mean``, ``mdd95``, ``rank_low``); ``None``
    without an MDD. A pair is told apart by the rule of the rank ranges: one
    mean at least ``mdd95`` above the other (``docs/results.md``, "Rank ranges").
    """
    mdd = board[0].get("mdd95") if board else None
    if mdd is None:
        return {"pairs": None, "pairs_apart": None, "top_candidates": None, "top_systems": None, "best_system": None}
    means = [float(row["mean"]) for row in board]
    apart = sum(1 for a in range(len(means)) for b in range(a + 1, len(means)) if abs(means[a] - means[b]) >= mdd)
    return {
        "pairs": len(means) * (len(means) - 1) // 2,
        "pairs_apart": apart,
        "top_candidates": sum(1 for row in board if row.get("rank_low") == 1),
        "top_systems": ", ".join(str(row["system_id"]) for row in sorted(board, key=lambda r: r["rank"])
                                 if row.get("rank_low") == 1),
        "best_system": str(min(board, key=lambda r: r["rank"])["system_id"]),
    }


def dropped_text(part: Mapping[str, Any], block: Mapping[str, Any] | None = None) -> str | None:
    """One line saying what a fit's G-study left out, from its summary entry; ``None`` when nothing was.

    With the report's ``block`` section, the line also says how many
    observations the block uses of how many records.
    """
    dropped = [(part.get(f"dropped_{kind}") or 0, kind) for kind in ("systems", "items", "judges")]
    if not any(n for n, _ in dropped):
        return None
    said = ", ".join(f"{n} {kind if n != 1 else kind[:-1]}" for n, kind in dropped)
    ids = part.get("dropped_system_ids")
    line = f"the balanced block left out {said}" + (f" (systems {ids})" if ids else "")
    used, records = (block or {}).get("observations_used"), (block or {}).get("records_in")
    if used is not None and records is not None:
        line += f"; it uses {used:,} observations of {records:,} records"
    return line
