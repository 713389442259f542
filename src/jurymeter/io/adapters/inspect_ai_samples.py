"""An inspect_ai log's header and samples mapped to canonical judgments (the format: :mod:`jurymeter.io.adapters.inspect_ai`).

What both containers (``.eval``, ``.json``) share once their documents are
parsed: the header's scorers and their judges (:func:`read_header`), and each
sample's judgments (:func:`sample_judgments`).
"""


import json
import math
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from jurymeter.io.adapters.base import (
    PARSE_FAILURE,
    UNSCORED,
    UNSUPPORTED_RECORD,
    AdapterNotes,
    AdapterOptions,
    Judgment,
    Unreadable,
)

_COUNTER = re.compile(r"\d+\Z")
_MODEL_GRADED = frozenset({"model_graded_qa", "model_graded_fact"})
# inspect's value_to_float (inspect_ai/scorer/_metric.py): CORRECT, PARTIAL, INCORRECT, NOANSWER.
_LETTERS = {"C": 1.0, "P": 0.5, "I": 0.0, "N": 0.0}
_WORDS = {"yes": 1.0, "true": 1.0, "no": 0.0, "false": 0.0}

RAW_CAP = 65536  # characters of a failed document kept as its raw text


@dataclass(slots=True)
class Scorer:
    """What the header says about one scorer (keyed by its score name)."""

    name: str
    base: str
    judge: str | None = None
    role: str | None = None
    declared: bool = False  # its parameters name a grader model or role
    panel: tuple[str, ...] = ()


@dataclass(slots=True)
class LogHeader:
    """The header of one log: what every judgment of it shares."""

    item_set: Any
    system: Any
    created: Any
    eval_id: Any
    run_id: Any
    item_prefix: str = ""  # the eval's task and dataset, before each sample id (the item's identity)
    scorers: dict[str, Scorer] = field(default_factory=dict)
    unsupported: set[str] = field(default_factory=set)  # scorers already noted as not model-graded



# -- the header -------------------------------------------------------------------------------


def _base(name: str) -> str:
    """A scorer's unqualified name, as inspect names its scores (``pkg/scorer`` -> ``scorer``)."""
    return name.rsplit("/", 1)[-1]


def read_header(header: dict[str, Any], options: AdapterOptions, notes: AdapterNotes) -> LogHeader:
    """What the header (``eval``, ``results``) says every judgment shares, and each scorer's grader."""
    ev: dict[str, Any] = header["eval"]
    log = LogHeader(
        item_set=options.item_set if options.item_set is not None else ev.get("task"),
        system=ev.get("model"),
        created=ev.get("created"),
        eval_id=ev.get("eval_id"),
        run_id=ev.get("run_id"),
        item_prefix=_item_prefix(ev, options),
    )
    roles = ev.get("model_roles")
    if not isinstance(roles, dict):
        roles = {}
    params: dict[str, tuple[str, dict[str, Any]]] = {}  # score name -> (scorer name, parameters)
    used: list[str] = []
    for scorer in ev.get("scorers") or []:
        if not isinstance(scorer, dict) or not isinstance(scorer.get("name"), str):
            continue
        # inspect's unique_scorer_name: the second scorer of a name gets "1", the third "2", ...
        base = unique = _base(scorer["name"])
        count = 1
        while unique in used:
            unique, count = f"{base}{count}", count + 1
        used.append(unique)
        opts = scorer.get("options")
        params[unique] = (base, dict(opts) if isinstance(opts, dict) else {})
    results = header.get("results")
    for score in (results.get("scores") or []) if isinstance(results, dict) else []:
        if not isinstance(score, dict):
            continue
        name = score.get("scorer") or score.get("name")
        if isinstance(name, str) and isinstance(score.get("params"), dict):
            base, opts = params.get(name, (_COUNTER.sub("", name), {}))
            params[name] = (base, {**opts, **score["params"]})
    for name, (base, opts) in params.items():
        log.scorers[name] = _scorer(name, base, opts, roles)
    if not isinstance(log.system, str):
        notes.notes.append(f"inspect: eval.model is {log.system!r}: no system id")
    described = ", ".join(
        f"{s.name} -> {s.judge or '(unbound: the grader of the sample events, else the evaluated model)'}"
        + (f" (role {s.role})" if s.role else "")
        for s in log.scorers.values()
    )
    notes.notes.append(
        f"inspect: task {ev.get('task')!r}, evaluated model {log.system!r}, eval {log.eval_id!r}; "
        f"scorers: {described or 'none in the header'}; epoch n -> generation n-1"
    )
    if header.get("status") not in (None, "success"):
        notes.notes.append(f"inspect: the log's status is {header.get('status')!r}")
    if header.get("invalidated") is True:
        notes.notes.append("inspect: the log is marked invalidated")
    return log


def _item_prefix(ev: dict[str, Any], options: AdapterOptions) -> str:
    """What goes before a sample id in its item id: the task (when it is not the item set) and the dataset.

    A sample id is unique only within its eval's dataset, and the item set is
    the task unless ``options.item_set`` replaces it; the prefix keeps two
    tasks (or datasets) in one item set apart, and is the same for every log
    of one task and dataset, so the items of two models' logs are shared.
    """
    parts = []
    task = ev.get("task")
    if options.item_set is not None and isinstance(task, str) and task:
        parts.append(task)
    dataset = ev.get("dataset")
    name = dataset.get("name") if isinstance(dataset, dict) else None
    if isinstance(name, str) and name:
        parts.append(name)
    return "".join(f"{p}/" for p in parts)


def _scorer(name: str, base: str, opts: dict[str, Any], roles: dict[str, Any]) -> Scorer:
    """A scorer's grader from its parameters: ``model`` (one, or a panel), else ``model_role`` via ``model_roles``."""
    out = Scorer(name=name, base=base)
    model, role = opts.get("model"), opts.get("model_role")
    if isinstance(model, list) and len(model) == 1:
        model = model[0]
    if isinstance(model, list) and model:
        out.declared, out.panel = True, tuple(str(m) for m in model)
    elif isinstance(model, str) and model:
        out.declared, out.judge = True, model
    elif isinstance(role, str) and role:
        out.declared, out.role = True, role
        bound = roles.get(role)
        if isinstance(bound, dict):
            bound = bound.get("model")
        if isinstance(bound, str) and bound:
            out.judge = bound
    return out


# -- one sample ---------------------------------------------------------------------------------


def _span_models(sample: dict[str, Any]) -> dict[str, list[tuple[str, str | None]]]:
    """Per scorer span name, the (model, role) of the model calls inside it (inspect's ``events``)."""
    events = sample.get("events")
    if not isinstance(events, list):
        return {}
    spans: dict[str, tuple[str | None, str | None]] = {}  # span id -> (scorer name or None, parent id)
    found: dict[str, list[tuple[str, str | None]]] = {}
    for event in events:
        if not isinstance(event, dict):
            continue
        kind = event.get("event")
        if kind == "span_begin" and isinstance(event.get("id"), str):
            scorer = event.get("name") if event.get("type") == "scorer" else None
            parent = event.get("parent_id")
            spans[event["id"]] = (scorer if isinstance(scorer, str) else None, parent if isinstance(parent, str) else None)
        elif kind == "model" and isinstance(event.get("model"), str):
            span = event.get("span_id")
            for _ in range(64):  # nested spans, bounded
                if not isinstance(span, str) or span not in spans:
                    break
                scorer, span = spans[span]
                if scorer is not None:
                    role = event.get("role")
                    found.setdefault(scorer, []).append((event["model"], role if isinstance(role, str) else None))
                    break
    return found


def _value(value: Any) -> tuple[float | None, Any, str | None]:
    """``(score, grade, why not)`` of a score value, by inspect's ``value_to_float`` (no fallback to 0)."""
    if isinstance(value, bool):
        return float(value), None, None
    if isinstance(value, int | float):
        return float(value), None, None
    if isinstance(value, str):
        if value in _LETTERS:
            return _LETTERS[value], value, None
        if value.lower() in _WORDS:
            return _WORDS[value.lower()], value, None
        try:
            number = float(value)
        except ValueError:
            number = math.nan
        if math.isfinite(number):
            return number, value, None
        return None, value, f"value {value!r} is not a grade inspect maps to a number (C, P, I, N, yes/no, true/false, a number)"
    if isinstance(value, list | dict):
        return None, None, f"value {json.dumps(value)[:200]} is a multi-valued score (a {type(value).__name__}), not one grade"
    return None, None, f"value {value!r} is not a grade"


def sample_judgments(
    log: LogHeader, line: int, sample: Any, text: str, notes: AdapterNotes
) -> Iterator[Judgment | Unreadable]:
    """One judgment per score of a sample-epoch, then an ``unscored`` one per header scorer it lacks."""
    if not isinstance(sample, dict):
        yield Unreadable(line, text[:RAW_CAP], f"sample {line} is not a JSON object")
        return
    sample_id, epoch = sample.get("id"), sample.get("epoch")
    if isinstance(sample_id, bool) or not isinstance(sample_id, str | int) or sample_id == "":
        yield Unreadable(line, text[:RAW_CAP], f"sample {line} has no id (id = {sample_id!r})")
        return
    if isinstance(epoch, bool) or not isinstance(epoch, int) or epoch < 1:
        yield Unreadable(line, text[:RAW_CAP], f"sample {sample_id!r} has no epoch >= 1 (epoch = {epoch!r})")
        return
    output = sample.get("output")
    completion = output.get("completion") if isinstance(output, dict) else None
    completed = sample.get("completed_at")
    base: dict[str, Any] = {
        "item_set": log.item_set,
        "item_id": log.item_prefix + str(sample_id),
        "system_id": log.system,
        "generation": epoch - 1,
        "replicate": 0,
        "timestamp": completed if isinstance(completed, str) and completed else log.created,
        "response_length": len(completion) if isinstance(completion, str) else None,
        "run_id": log.run_id,
        "eval_id": log.eval_id,
        "sample_id": str(sample_id),
        "epoch": epoch,
        "sample_uuid": sample.get("uuid"),
    }
    scores = sample.get("scores")
    if not isinstance(scores, dict):
        scores = {}
    missing = [name for name in log.scorers if name not in scores]
    if not scores and not missing:
        yield Unreadable(line, text[:RAW_CAP], f"sample {sample_id!r} epoch {epoch} has no scores and the header names no scorer")
        return
    events: list[dict[str, list[tuple[str, str | None]]]] = []  # the sample's model calls by scorer, read once if needed
    for name, entry in scores.items():
        yield _scored(log, line, sample, sample_id, epoch, base, name, entry, events, notes)
    for name in missing:
        yield _unscored(log, sample, sample_id, epoch, base, name, line)


def _scored(
    log: LogHeader,
    line: int,
    sample: dict[str, Any],
    sample_id: Any,
    epoch: int,
    base: dict[str, Any],
    name: str,
    entry: Any,
    events: list[dict[str, list[tuple[str, str | None]]]],
    notes: AdapterNotes,
) -> Judgment | Unreadable:
    """The judgment of one score of a sample-epoch (or why it is rejected)."""
    raw = json.dumps(
        {"id": sample_id, "epoch": epoch, "uuid": sample.get("uuid"), "scorer": name, "score": entry},
        ensure_ascii=False, separators=(",", ":"),
    )
    where = f"sample {sample_id!r} epoch {epoch}, scorer {name!r}"
    if not isinstance(entry, dict):
        return Unreadable(line, raw, f"{where}: the score is not an object")
    scorer = log.scorers.get(name) or Scorer(name=name, base=_COUNTER.sub("", name))
    judge, role = scorer.judge, scorer.role
    if judge is None and not scorer.panel:
        if not events:
            events.append(_span_models(sample))
        spans = events[0]
        called = {model for model, _ in spans.get(name, [])}
        if len(called) == 1:
            judge = called.pop()
            role = role or next((r for _, r in spans[name] if r), None)
        elif scorer.declared or spans.get(name) or scorer.base in _MODEL_GRADED or _graded(entry):
            judge = log.system  # no grader bound: inspect grades with the evaluated model
    fields = _score_fields(base, judge, name, role, log.system)
    if scorer.panel:
        return Judgment(line, "pointwise", fields, raw, (
            UNSUPPORTED_RECORD,
            f"{where}: graded by a panel of models {list(scorer.panel)} (majority vote), not one judge",
        ))
    if judge is None:
        if name not in log.unsupported:
            log.unsupported.add(name)
            notes.notes.append(f"inspect: scorer {name!r} is not model-graded: its scores are quarantined as {UNSUPPORTED_RECORD}")
        return Judgment(line, "pointwise", fields, raw, (
            UNSUPPORTED_RECORD,
            f"{where}: scorer {name!r} is not model-graded (no grader model or role, no model call in its span)",
        ))
    if "value" not in entry:
        return Judgment(line, "pointwise", fields, raw, (PARSE_FAILURE, f"{where}: the score has no value"))
    value = entry["value"]
    if isinstance(value, float) and math.isnan(value):
        explanation = entry.get("explanation")
        return Judgment(line, "pointwise", fields, raw, (
            UNSCORED,
            f"{where}: value NaN (unscored), reason {entry.get('reason')!r}"
            + (f": {explanation[:300]}" if isinstance(explanation, str) and explanation else ""),
        ))
    score, grade, why = _value(value)
    fields["grade"] = grade
    if why is not None:
        reason = UNSUPPORTED_RECORD if isinstance(value, list | dict) else PARSE_FAILURE
        return Judgment(line, "pointwise", fields, raw, (reason, f"{where}: {why}"))
    fields["score"] = score
    return Judgment(line, "pointwise", fields, raw)


def _unscored(
    log: LogHeader, sample: dict[str, Any], sample_id: Any, epoch: int, base: dict[str, Any], name: str, line: int
) -> Judgment:
    """The ``unscored`` judgment of a header scorer the sample-epoch has no score from."""
    scorer = log.scorers[name]
    error = sample.get("error")
    message = error.get("message") if isinstance(error, dict) else error
    judge = scorer.judge
    if judge is None and not scorer.panel and (scorer.declared or scorer.base in _MODEL_GRADED):
        judge = log.system
    fields = _score_fields(base, judge, name, scorer.role, log.system)
    raw = json.dumps(
        {"id": sample_id, "epoch": epoch, "uuid": sample.get("uuid"), "scorer": name, "score": None, "error": error},
        ensure_ascii=False, separators=(",", ":"), default=str,
    )
    return Judgment(line, "pointwise", fields, raw, (
        UNSCORED,
        f"sample {sample_id!r} epoch {epoch} has no score from scorer {name!r}"
        + (f" (sample error: {str(message)[:300]})" if message else ""),
    ))


def _graded(entry: dict[str, Any]) -> bool:
    """Whether a score carries a model grader's transcript (``metadata.grading`` of ``model_graded_qa``)."""
    metadata = entry.get("metadata")
    return isinstance(metadata, dict) and "grading" in metadata


def _score_fields(
    base: dict[str, Any], judge: str | None, scorer: str, role: str | None, system: str | None
) -> dict[str, Any]:
    """One score's fields before its value is read: the sample's fields, the grader, and ``self_graded``."""
    return {
        **base,
        "judge_id": judge,
        "score": None,
        "scorer": scorer,
        "grade": None,
        "self_graded": judge is not None and judge == system,
        "judge_role": role,
    }
