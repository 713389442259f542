"""Plan, run, then measure the plan: stored plans with their predictions, and the run that checks them.

``jurymeter plan`` stores a plan under ``plans/<plan_id>/`` in the store:
``plan.json`` (what was planned, from which fit, and the predictions with
their intervals; ``docs/results.md``, "Plans") and ``assignments.parquet``
(who judges what). The planned judgments are ingested into the plan's own
item set (``item_set`` of ``plan.json``), so the nightly run fits them like any
other item set; this module then sets each plan's predictions beside that
fit's realised numbers (the ``dstudy`` table) for the run's summary
(``summary.json`` ``plans``), its page and its alerts. A realised value
outside its prediction's interval is an alert: the judges or the items changed
since the plan was drawn, or the run did not follow it.
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Mapping, Sequence
from dataclasses import asdict
from typing import TYPE_CHECKING, Any

import polars as pl

from jurymeter.errors import ConfigError, StoreError

if TYPE_CHECKING:
    from jurymeter.io.store import Store
    from jurymeter.stats.plan_prediction import Predicted

PLANS = "plans"
_PLAN_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$")
# The quantities compared, with their names on the page and in alerts (the dstudy table's keys).
COMPARED = {"mdd95": "MDD95", "erho2": "E\u03c1\u00b2"}
# A round-robin or cost-weighted plan's strategy variances (stats/cyclic/strategy_prediction): predicted, never
# compared, since one run of the plan gives one score per system and no spread of it.
STRATEGY_NAMES = {
    "var_all_judges": "variance with all judges (A)",
    "var_random_judge": "variance with a random judge (B)",
    "var_round_robin": "variance with the round robin (C)",
    "var_cost_weighted": "variance of this cost-weighted plan",
}
NAMES = {**COMPARED, **STRATEGY_NAMES}
_UNMEASURED = ("not measured by a run: a strategy's variance is the spread of a system's score over repeated runs "
               "of the plan, and one run gives one score per system (CyclicJudge's subsampling check measures it on "
               "a crossed run with several generations: jurymeter cyclic)")


def default_plan_id(now: dt.datetime | None = None) -> str:
    """``plan-YYYYMMDD-HHMMSS`` in UTC."""
    return f"plan-{(now or dt.datetime.now(dt.UTC)):%Y%m%d-%H%M%S}"


def check_plan_id(plan_id: str) -> str:
    """``plan_id`` if it can name a folder on every store; else :class:`ConfigError` naming ``--plan-id``."""
    if not _PLAN_ID.match(plan_id):
        msg = (f"--plan-id {plan_id!r}: use letters, digits, '.', '_' and '-' (at most 100, "
               "starting with a letter or digit)")
        raise ConfigError(msg)
    return plan_id


def free_plan_id(store: Store, plan_id: str | None) -> str:
    """``plan_id`` if no stored plan has it (else :class:`ConfigError`); without one, :func:`default_plan_id`
    made unique with ``-2``, ``-3``, ... (two plans drawn in one second)."""
    if plan_id is not None:
        check_plan_id(plan_id)
        if _stored(store, plan_id):
            msg = f"--plan-id {plan_id!r}: a plan of that id is already stored in {store.url}; choose another"
            raise ConfigError(msg)
        return plan_id
    base = default_plan_id()
    found, n = base, 1
    while _stored(store, found):
        n += 1
        found = f"{base}-{n}"
    return found


def _stored(store: Store, plan_id: str) -> bool:
    return bool(store.fs.exists(store.path(PLANS, plan_id, "plan.json")))


def plan_record(
    plan_id: str,
    *,
    source: Mapping[str, str],
    item_set: str,
    kind: str,
    counts: Mapping[str, int],
    generations: int,
    predictions: Mapping[str, Predicted | None],
    null_reasons: Mapping[str, str],
    created: str | None = None,
    batches: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """The ``plan.json`` of a plan (``docs/results.md``, "Plans"); ``batches``: its batch orders, if any."""
    return {
        "plan_id": plan_id,
        "created": created or dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "source": dict(source),
        "item_set": item_set,
        "kind": kind,
        "counts": dict(counts),
        "generations": generations,
        "predictions": {k: (asdict(p) if p is not None else None) for k, p in predictions.items()},
        "null_reasons": dict(null_reasons),
        "batches": None if batches is None else dict(batches),
    }


def store_plan(store: Store, record: Mapping[str, Any], assignments: pl.DataFrame) -> str:
    """Write ``plans/<plan_id>/``: the assignments first, ``plan.json`` last (a plan counts once it is there).

    Raises
    ------
    ConfigError
        A plan of that id is already stored (``--plan-id`` names another).
    """
    plan_id = free_plan_id(store, str(record["plan_id"]))
    folder = f"{PLANS}/{plan_id}"
    store.write_parquet(f"{folder}/assignments.parquet", assignments)
    store.write_json(f"{folder}/plan.json", dict(record))
    return store.path(folder)


def load_plans(store: Store) -> tuple[list[dict[str, Any]], list[str]]:
    """Every stored plan (by id), and a line for each folder whose ``plan.json`` cannot be read."""
    plans, unreadable = [], []
    for plan_id in store.folders(PLANS):
        try:
            record = store.read_json(f"{PLANS}/{plan_id}/plan.json")
        except FileNotFoundError:
            continue  # being written, or cut before its plan.json: not a plan yet
        except (StoreError, ValueError) as exc:
            unreadable.append(f"plan {plan_id}: plans/{plan_id}/plan.json cannot be read ({exc}); it is left out")
            continue
        wrong = _not_a_plan(record)
        if wrong is not None:
            unreadable.append(f"plan {plan_id}: plans/{plan_id}/plan.json is not a plan record ({wrong}); "
                              "it is left out")
            continue
        plans.append(record)
    return plans, unreadable


def _number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _not_a_plan(record: Any) -> str | None:
    """What makes a read ``plan.json`` unusable (``None``: it is a plan record): a hand-edited file never crashes a run."""
    if not isinstance(record, dict):
        return "not a JSON object"
    for key in ("plan_id", "item_set"):
        if not isinstance(record.get(key), str):
            return f"{key!r} is not a string"
    counts = record.get("counts")
    if not isinstance(counts, dict) or not all(isinstance(v, int) and not isinstance(v, bool) for v in counts.values()):
        return "'counts' is not an object of whole numbers"
    predictions = record.get("predictions")
    if not isinstance(predictions, dict):
        return "'predictions' is not an object"
    for key, p in predictions.items():
        if p is None:
            continue
        if not isinstance(p, dict) or not all(p.get(k) is None or _number(p.get(k)) for k in ("point", "low", "high")):
            return f"prediction {key!r} is not an object of numbers"
    if record.get("null_reasons") is not None and not isinstance(record.get("null_reasons"), dict):
        return "'null_reasons' is not an object"
    return None


def _realised(tables: Mapping[str, pl.DataFrame], item_set: str) -> dict[str, dict[str, Any]]:
    """The ``dstudy`` rows of the plan's item set (every judge, every system), by quantity."""
    frame = tables.get("dstudy")
    if frame is None or frame.height == 0:
        return {}
    rows = frame.filter(
        (pl.col("item_set") == item_set) & (pl.col("universe") == "all") & (pl.col("population") == "all")
    )
    return {str(r["quantity"]): r for r in rows.iter_rows(named=True)}


def _sizes(summary: Mapping[str, Any], item_set: str) -> dict[str, int] | None:
    """Systems, items and judges of the run's G-study of ``item_set`` (every judge, every system)."""
    for fit in summary.get("fits") or []:
        if (fit.get("item_set"), fit.get("universe"), fit.get("population")) == (item_set, "all", "all"):
            g = (fit.get("analyses") or {}).get("gstudy") or {}
            if all(isinstance(g.get(k), int) for k in ("systems", "items", "judges")):
                return {k: int(g[k]) for k in ("systems", "items", "judges")}
    return None


def plan_checks(
    plans: Sequence[Mapping[str, Any]], tables: Mapping[str, pl.DataFrame], summary: Mapping[str, Any]
) -> list[dict[str, Any]]:
    """One row per plan and predicted quantity whose item set this run fitted: predicted against realised.

    ``inside`` is ``None`` (with ``reason``) where either side is missing, or
    where the run's sizes are not the plan's (the prediction is for the plan's).
    """
    rows = []
    for plan in sorted(plans, key=lambda p: str(p.get("plan_id"))):
        item_set = str(plan.get("item_set"))
        realised = _realised(tables, item_set)
        if not realised:
            continue  # the planned judgments have not landed (or this run did not fit them)
        sizes = _sizes(summary, item_set)
        planned = {k: int(v) for k, v in (plan.get("counts") or {}).items()}
        followed = sizes is not None and all(sizes.get(k) == n for k, n in planned.items())
        for key in COMPARED:
            predicted = (plan.get("predictions") or {}).get(key)
            got = realised.get(key) or {}
            row: dict[str, Any] = {
                "plan_id": plan.get("plan_id"), "item_set": item_set, "quantity": key,
                "predicted": None, "predicted_low": None, "predicted_high": None,
                "realised": got.get("estimate"), "realised_low": got.get("low"), "realised_high": got.get("high"),
                "planned_sizes": planned, "realised_sizes": sizes, "followed": followed, "inside": None,
                "reason": None,
            }
            if predicted is not None:
                row.update(predicted=predicted.get("point"), predicted_low=predicted.get("low"),
                           predicted_high=predicted.get("high"))
            if predicted is None or predicted.get("low") is None:
                row["reason"] = "not predicted: " + str((plan.get("null_reasons") or {}).get(key) or "no interval")
            elif row["realised"] is None:
                row["reason"] = "not estimable on the run: " + str(got.get("reason") or "no estimate")
            elif not followed:
                row["reason"] = (f"the run's sizes {sizes} are not the plan's {planned}: the prediction is for the "
                                 "plan's sizes")
            else:
                row["inside"] = bool(predicted["low"] <= row["realised"] <= predicted["high"])
            rows.append(row)
        for key in STRATEGY_NAMES:
            predicted = (plan.get("predictions") or {}).get(key)
            if key not in (plan.get("predictions") or {}):
                continue  # a plan that does not predict it (crossed, or stored before it was predicted)
            row = {
                "plan_id": plan.get("plan_id"), "item_set": item_set, "quantity": key,
                "predicted": None, "predicted_low": None, "predicted_high": None,
                "realised": None, "realised_low": None, "realised_high": None,
                "planned_sizes": planned, "realised_sizes": sizes, "followed": followed, "inside": None,
                "reason": _UNMEASURED if predicted is not None else
                "not predicted: " + str((plan.get("null_reasons") or {}).get(key) or "no interval"),
            }
            if predicted is not None:
                row.update(predicted=predicted.get("point"), predicted_low=predicted.get("low"),
                           predicted_high=predicted.get("high"))
            rows.append(row)
    return rows


def _num(value: Any) -> str:
    return "n/a" if value is None else f"{float(value):.3g}"


def plan_line(row: Mapping[str, Any]) -> str:
    """``planned MDD95 0.40 [0.36, 0.45], realised 0.43 [0.39, 0.48]``: one row of :func:`plan_checks` in words."""
    name = NAMES.get(str(row["quantity"]), str(row["quantity"]))
    realised = f"realised {_num(row['realised'])}"
    if row.get("realised_low") is not None:
        realised += f" [{_num(row['realised_low'])}, {_num(row['realised_high'])}]"
    return (f"planned {name} {_num(row['predicted'])} [{_num(row['predicted_low'])}, "
            f"{_num(row['predicted_high'])}], {realised}")


def plan_alerts(rows: Sequence[Mapping[str, Any]]) -> list[str]:
    """A plan whose realised value falls outside its prediction's interval, or whose run did not follow it."""
    out = []
    for row in rows:
        where = f"plan {row['plan_id']} on {row['item_set']}"
        if row["inside"] is False:
            out.append(f"{where}: {plan_line(row)}, outside the prediction's 95% interval: the judges or items "
                       "changed since the plan was drawn; refit and plan again before trusting its sizes")
    strayed = {(r["plan_id"], r["item_set"]): r for r in rows if not r["followed"]}  # one line a plan
    for (plan_id, item_set), row in sorted(strayed.items()):
        out.append(f"plan {plan_id} on {item_set}: the run judged {row['realised_sizes']} where the plan asked for "
                   f"{row['planned_sizes']}: finish the planned judgments (or plan again) to measure the plan")
    return out
