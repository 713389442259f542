"""The canonical record schema of the judgment store (documented in ``docs/schema.md``).

Every protocol has *key* columns (one judgment is one key), *value* columns (what
the judge said) and optional columns. Re-delivery of the same key with the same
value is an exact duplicate; the same key with another value is a conflict.
Columns outside the schema are kept as strings under their own name.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal, get_args

import polars as pl

if TYPE_CHECKING:
    from polars._typing import PolarsDataType

Protocol = Literal["pointwise", "pairwise", "systems", "judges"]
PROTOCOLS: tuple[Protocol, ...] = ("pointwise", "pairwise", "systems", "judges")
JUDGMENT_PROTOCOLS: tuple[Protocol, ...] = ("pointwise", "pairwise")

# Lineage columns written by ingest: which committed source a row came from, and
# its 1-based line (JSONL/CSV) or row (Parquet) there.
SOURCE_ID = "_source_id"
SOURCE_LINE = "_source_line"

ID = pl.String
INDEX = pl.Int64
FLOAT = pl.Float64
TIMESTAMP = pl.Datetime("us", "UTC")


@dataclass(frozen=True, slots=True)
class ProtocolSchema:
    """Columns of one protocol, in storage order."""

    name: Protocol
    key: tuple[str, ...]
    value: tuple[str, ...]
    required: tuple[str, ...]
    optional: dict[str, PolarsDataType]
    dtypes: dict[str, PolarsDataType]

    @property
    def columns(self) -> tuple[str, ...]:
        return tuple(self.dtypes)


_OPTIONAL_JUDGMENT: dict[str, PolarsDataType] = {
    "batch_id": ID,
    "batch_position": INDEX,
    "judge_logprob": FLOAT,
    "timestamp": TIMESTAMP,
    "run_id": ID,
}

# Key columns that say which rating of a (system, item, judge, generation, replicate)
# cell a record is, beyond its replicate number: the run that made it, the batch it was
# rated in and its place there. Null for a log without them, so the keys of such logs
# are what they were; a log that rates one output in several batches (a sequential
# plan) or in several runs (two inspect evals of one model) stores each rating. The
# fits count such ratings as replicates of their cell (`docs/schema.md`, "Keys").
RATING_KEY: tuple[str, ...] = ("run_id", "batch_id", "batch_position")


def _judgment_schema(
    name: Protocol,
    ids: tuple[str, ...],
    values: dict[str, PolarsDataType],
    required: tuple[str, ...],
    extra: dict[str, PolarsDataType],
) -> ProtocolSchema:
    """A judgment protocol's columns in storage order.

    Its id columns (text), its value columns, ``generation`` and ``replicate``,
    then the optional judgment columns and the protocol's own ``extra``; the key
    is the ids, ``generation``, ``replicate`` and :data:`RATING_KEY`.
    """
    optional = {**_OPTIONAL_JUDGMENT, **extra}
    return ProtocolSchema(
        name=name,
        key=(*ids, "generation", "replicate", *RATING_KEY),
        value=tuple(values),
        required=required,
        optional=optional,
        dtypes={**dict.fromkeys(ids, ID), **values, "generation": INDEX, "replicate": INDEX, **optional},
    )


POINTWISE = _judgment_schema(
    "pointwise",
    ids=("item_set", "item_id", "system_id", "judge_id"),
    values={"score": FLOAT},
    required=("item_set", "item_id", "system_id", "judge_id", "score"),
    extra={"response_length": INDEX},
)

# ``winner`` is text: a system id, "tie", or an alias (WINNER_ALIASES).
PAIRWISE = _judgment_schema(
    "pairwise",
    ids=("item_set", "item_id", "system_a", "system_b", "judge_id"),
    values={"winner": ID, "preference": FLOAT},
    required=("item_set", "item_id", "system_a", "system_b", "judge_id"),
    extra={"length_a": INDEX, "length_b": INDEX},
)

SYSTEMS = ProtocolSchema(
    name="systems",
    key=("system_id",),
    value=("model", "config", "family"),
    required=("system_id",),
    optional={"model": ID, "config": ID, "family": ID},
    dtypes={"system_id": ID, "model": ID, "config": ID, "family": ID},
)

JUDGES = ProtocolSchema(
    name="judges",
    key=("judge_id",),
    value=("family", "vendor", "tier"),
    required=("judge_id",),
    optional={"family": ID, "vendor": ID, "tier": ID},
    dtypes={"judge_id": ID, "family": ID, "vendor": ID, "tier": ID},
)

SCHEMAS: dict[Protocol, ProtocolSchema] = {
    s.name: s for s in (POINTWISE, PAIRWISE, SYSTEMS, JUDGES)
}

# Non-negative integer columns.
INDEX_COLUMNS = frozenset(
    {"generation", "replicate", "batch_position", "response_length", "length_a", "length_b"}
)

# Text columns where a JSON boolean, array or object must be rejected, not read as
# text: every other column either fails its own type check or is kept as text.
ID_LIKE_COLUMNS = frozenset(
    {
        "item_set", "item_id", "system_id", "judge_id", "system_a", "system_b",
        "batch_id", "run_id", "model", "config", "family", "vendor", "tier",
    }
)

# Accepted spellings of `winner`, matched case-insensitively after trimming; the
# Arena-Hard/Chatbot-Arena spellings are included because users' logs carry them.
WINNER_ALIASES: dict[str, str] = {
    "a": "A",
    "model_a": "A",
    "b": "B",
    "model_b": "B",
    "tie": "tie",
    "draw": "tie",
    "tie (bothbad)": "tie",
}

Reason = Literal[
    "malformed_line",
    "invalid_text",  # invalid UTF-8 or an unpaired surrogate in a field: never replaced, never merged
    "truncated",  # the record a compressed stream, an archive or a JSON document ends inside of
    "missing_field",
    "wrong_type",
    "out_of_range",
    "non_finite_score",
    "score_out_of_scale",
    "unknown_winner",
    "preference_out_of_range",
    "same_system",
    "invalid_item_set",  # no longer given (long names get digested folders); older quarantines hold it
    "conflicting_duplicate",
    "unknown_protocol",
    # Given by the log adapters (io.adapters): the judge's health, not malformed input.
    "parse_failure",  # the judge replied, but no rating or verdict could be read from its reply
    "judge_call_failed",  # the call to the judge failed (an API error, `$ERROR$`, a winner `error`)
    "unscored",  # the grader gave no grade it was offered (inspect's NaN)
    "unsupported_record",  # a record of the log format the adapter does not read
]
REASONS: tuple[str, ...] = get_args(Reason)

QUARANTINE_SCHEMA: dict[str, PolarsDataType] = {
    "source": pl.String,
    "line": pl.Int64,
    "raw": pl.String,
    "reason": pl.String,
    "message": pl.String,
    "protocol": pl.String,
    SOURCE_ID: pl.String,
    # The judge of a judgment a log adapter rejected (a parse failure, a failed call, an
    # unscored grade): judge health counts these. Null for any other quarantined record,
    # and absent from quarantine parts written before it existed.
    "judge_id": pl.String,
}
# Reasons that say a judge failed, not that the input was malformed.
JUDGE_FAILURES = ("parse_failure", "judge_call_failed", "unscored")


def detect_protocol(columns: set[str]) -> Protocol | None:
    """Protocol of a source from its (mapped) column names.

    Pairwise wins over pointwise when both kinds of column are present, because
    ``system_a``/``system_b`` cannot belong to a pointwise record. Metadata tables
    are recognised by their id column without a judgment column.
    """
    if {"system_a", "system_b"} & columns or {"winner", "preference"} & columns:
        return "pairwise"
    if "score" in columns:
        return "pointwise"
    if "system_id" in columns and "judge_id" not in columns:
        return "systems"
    if "judge_id" in columns and "system_id" not in columns:
        return "judges"
    return None
