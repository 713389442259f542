"""Validation of raw records into the canonical typed schema, vectorized with polars.

Each record either becomes a typed row of its protocol (``docs/schema.md``) or is
rejected with one reason code and a message naming the field and the value that
arrived. Checks run in a fixed order and the first failing check gives the
reason: missing field, wrong type, out of range, then the protocol's own rules.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, TypeVar

import polars as pl

from jurymeter.errors import ConfigError
from jurymeter.io.records import NOT_SCALAR
from jurymeter.io.schema import (
    INDEX_COLUMNS,
    SCHEMAS,
    WINNER_ALIASES,
    Protocol,
)

if TYPE_CHECKING:
    from polars._typing import PolarsDataType

ROW = "__row"
FrameT = TypeVar("FrameT", pl.DataFrame, pl.LazyFrame)
# Accepted timestamp spellings: ISO 8601 with "T" or a space, optional fraction,
# "Z" or a numeric offset, or none (read as UTC); or a bare date.
TIMESTAMP_FORMATS = (
    "%Y-%m-%dT%H:%M:%SZ",  # the common case first: 4x faster than the general form
    "%Y-%m-%dT%H:%M:%S%.f%#z",
    "%Y-%m-%dT%H:%M:%S%.f",
    "%Y-%m-%d %H:%M:%S%.f%#z",
    "%Y-%m-%d %H:%M:%S%.f",
    "%Y-%m-%d",
)
_SHOWN_CHARS = 60


@dataclass(frozen=True, slots=True)
class ValidationOptions:
    """How raw columns map onto the schema and which values are allowed.

    Parameters
    ----------
    column_map
        Canonical name -> source column name (``--map score=rating``).
    item_set
        Value for records that have no ``item_set`` (``--item-set``).
    scale
        Inclusive ``(low, high)`` range of a pointwise score (``--scale 1,10``).
    baseline
        The baseline system of Arena-Hard-Auto v0.1 logs, which do not name it
        (``--baseline``; read by that adapter only).
    """

    column_map: dict[str, str] = field(default_factory=dict)
    item_set: str | None = None
    scale: tuple[float, float] | None = None
    baseline: str | None = None

    def __post_init__(self) -> None:
        if self.scale is not None:
            low, high = self.scale
            if not (math.isfinite(low) and math.isfinite(high) and low < high):
                msg = f"--scale must be two finite numbers low,high with low < high; got {low},{high}"
                raise ConfigError(msg)
        targets = list(self.column_map.values())
        if len(set(targets)) != len(targets):
            msg = f"--map uses one source column twice: {self.column_map}"
            raise ConfigError(msg)


def apply_column_map(frame: FrameT, column_map: dict[str, str]) -> FrameT:
    """Rename source columns to canonical names.

    A source column that already carries the canonical name is kept as
    ``<name>__unmapped`` so that nothing the user sent is lost.
    """
    renames: dict[str, str] = {}
    columns = frame.collect_schema().names()
    for canonical, source_name in column_map.items():
        if source_name not in columns or source_name == canonical:
            continue
        if canonical in columns:
            renames[canonical] = f"{canonical}__unmapped"
        renames[source_name] = canonical
    return frame.rename(renames) if renames else frame


def _text(expr: pl.Expr, dtype: pl.DataType, marked: bool = False) -> pl.Expr:
    """A column's values as short text, for messages and for unknown columns.

    ``marked``: the values carry the slow JSON path's :data:`NOT_SCALAR` marks
    (one is taken off); other readers' text is natural and kept whole.
    """
    text: pl.Expr
    if isinstance(dtype, pl.Struct):
        text = pl.when(expr.is_not_null()).then(expr.struct.json_encode())
    elif isinstance(dtype, pl.List | pl.Array):
        encoded = pl.struct(expr.alias("v")).struct.json_encode().str.slice(5).str.strip_suffix("}")
        text = pl.when(expr.is_not_null()).then(encoded)
    elif dtype == pl.Null:
        text = pl.lit(None, dtype=pl.String)
    elif dtype == pl.String:
        text = expr.str.strip_prefix(NOT_SCALAR) if marked else expr
    else:
        text = expr.cast(pl.String)
    return text


def _is_scalar(dtype: pl.DataType) -> bool:
    return dtype.is_numeric() or dtype == pl.String or dtype == pl.Null


def parse_timestamps(text: pl.Series) -> pl.Series:
    """Text to UTC timestamps, trying :data:`TIMESTAMP_FORMATS` in turn.

    Each later format is tried only on the values still unparsed: an explicit
    format is ~30x faster than polars' per-value inference, and a failing one
    costs as much as inference, so it must not run on every row.
    """
    text = text.str.strip_chars()
    out = text.str.to_datetime(TIMESTAMP_FORMATS[0], time_unit="us", time_zone="UTC", strict=False, cache=False)
    for fmt in TIMESTAMP_FORMATS[1:]:
        todo = (out.is_null() & text.is_not_null()).arg_true()
        if not len(todo):
            break
        parsed = text.gather(todo).str.to_datetime(
            fmt, time_unit="us", time_zone="UTC", strict=False, cache=False
        )
        out = out.scatter(todo, parsed)
    return out


def _coerce(
    name: str,
    dtype: pl.DataType,
    target: PolarsDataType,
    *,
    marked: bool = True,
    timestamp_format: str | None = None,
) -> tuple[pl.Expr, pl.Expr]:
    """Typed value and a flag for values that cannot be read as ``target``.

    Text is accepted for every type when it parses (CSV has nothing else);
    booleans, lists and objects are never numbers or ids.
    """
    col = pl.col(name)
    present = col.is_not_null()
    if not _is_scalar(dtype) and not (target.is_temporal() and dtype.is_temporal()):
        return pl.lit(None, dtype=target), present
    if dtype == pl.String and marked:
        # One mark: a boolean, array or object as text; two: text that itself starts with the mark.
        doubled = col.str.starts_with(NOT_SCALAR + NOT_SCALAR)
        not_scalar = col.str.starts_with(NOT_SCALAR) & ~doubled
        natural = pl.when(doubled).then(col.str.slice(1)).otherwise(col)
        value, bad = _coerce_scalar(natural, dtype, target, present, timestamp_format)
        return pl.when(not_scalar).then(None).otherwise(value), bad | not_scalar.fill_null(False)
    return _coerce_scalar(col, dtype, target, present, timestamp_format)


def _coerce_scalar(
    col: pl.Expr,
    dtype: pl.DataType,
    target: PolarsDataType,
    present: pl.Expr,
    timestamp_format: str | None = None,
) -> tuple[pl.Expr, pl.Expr]:
    if target == pl.String:
        # Ids are kept exactly as written (no trimming: that would copy every
        # string); an empty id counts as missing (see the missing-field check).
        return (col if dtype == pl.String else col.cast(pl.String)), pl.lit(False)
    if target == pl.Float64:
        value = (
            col.str.strip_chars().cast(pl.Float64, strict=False)
            if dtype == pl.String
            else col.cast(pl.Float64)
        )
        return value, present & value.is_null()
    if target == pl.Int64 and dtype.is_integer():
        # Same verdicts as the float route below, without the round trip: an
        # integer is integral and finite; only its size can fail.
        fits = col.cast(pl.Int64, strict=False)
        bad = present & (fits.is_null() | (fits.abs() >= 2**53))
        return pl.when(bad).then(None).otherwise(fits), bad
    if target == pl.Int64:
        as_float = (
            col.str.strip_chars().cast(pl.Float64, strict=False)
            if dtype == pl.String
            else col.cast(pl.Float64)
        )
        integral = as_float.is_finite() & (as_float == as_float.round(0)) & (as_float.abs() < 2.0**53)
        value = pl.when(integral).then(as_float).otherwise(None).cast(pl.Int64)
        return value, present & value.is_null()
    if target.is_temporal():
        if dtype == pl.String and timestamp_format is not None:
            # One native format (the streaming path): a value it cannot read is
            # flagged, and the caller falls back to the path that tries them all.
            # cache=False: a dump's timestamps are nearly all distinct, and the
            # cache of unique values doubled the parse time.
            value = col.str.strip_chars().str.to_datetime(
                timestamp_format, time_unit="us", time_zone="UTC", strict=False, cache=False
            )
        elif dtype == pl.String:
            value = col.map_batches(parse_timestamps, return_dtype=target, is_elementwise=True)
        elif isinstance(dtype, pl.Datetime):
            value = (
                col.dt.convert_time_zone("UTC")
                if dtype.time_zone
                else col.dt.replace_time_zone("UTC")
            ).dt.cast_time_unit("us")
        else:
            return pl.lit(None, dtype=target), present
        return value, present & value.is_null()
    msg = f"no coercion to {target}"
    raise AssertionError(msg)


_EXPECTED: dict[PolarsDataType, str] = {
    pl.String: "a text or integer id",
    pl.Float64: "a number",
    pl.Int64: "an integer",
}


def _expected(target: PolarsDataType) -> str:
    if target.is_temporal():
        return "an ISO 8601 timestamp"
    return _EXPECTED.get(target, str(target))


def staging_exprs(
    in_frame: dict[str, pl.DataType],
    protocol: Protocol,
    options: ValidationOptions,
    *,
    marked: bool,
    timestamp_format: str | None = None,
) -> tuple[list[pl.Expr], list[str]]:
    """Typed canonical columns, unknown columns as text, ``__bad_*`` flags and ``__raw_*`` copies.

    Shared by the block path (eager, every :data:`TIMESTAMP_FORMATS` tried) and
    the streaming path (lazy, one ``timestamp_format``).
    """
    schema = SCHEMAS[protocol]
    unknown = [c for c in in_frame if c not in schema.dtypes and c != ROW]
    typed: list[pl.Expr] = []
    bad_flags: list[pl.Expr] = []
    for name, target in schema.dtypes.items():
        if name in in_frame:
            value, bad = _coerce(
                name, in_frame[name], target, marked=marked, timestamp_format=timestamp_format
            )
        else:
            value, bad = pl.lit(None, dtype=target), pl.lit(False)
        if name == "item_set" and options.item_set is not None:
            value = value.fill_null(pl.lit(options.item_set))
        if name in ("generation", "replicate"):
            value = value.fill_null(pl.lit(0, dtype=pl.Int64))
        typed.append(value.alias(name))
        bad_flags.append(bad.alias(f"__bad_{name}"))
    # Raw values ride along (zero-copy) so messages can quote them; messages are
    # built for rejected rows only, which keeps the accepted path cheap.
    exprs = [
        *typed,
        *[_text(pl.col(c), in_frame[c], marked).alias(c) for c in unknown],
        *bad_flags,
        *[pl.col(n).alias(f"__raw_{n}") for n in schema.dtypes if n in in_frame],
    ]
    return exprs, unknown


def check_code(checks: list[tuple[pl.Expr, str, _Message]]) -> pl.Expr:
    """Index of the first failing check per row (null when the row passes)."""
    code: pl.Expr = pl.lit(None, dtype=pl.UInt8)
    for k in reversed(range(len(checks))):
        # fill_null(False): a null comparison (value absent) is not a failure.
        code = pl.when(checks[k][0].fill_null(False)).then(pl.lit(k, dtype=pl.UInt8)).otherwise(code)
    return code


def validate_batch(
    frame: pl.DataFrame, protocol: Protocol, options: ValidationOptions, *, marked: bool = False
) -> tuple[pl.DataFrame, pl.DataFrame]:
    """Split raw records into typed accepted rows and rejected rows.

    Parameters
    ----------
    frame
        Raw records with canonical names already applied (:func:`apply_column_map`).
    protocol
        The source's protocol.
    options
        Allowed values.
    marked
        ``frame`` comes from the slow JSON path (:attr:`RawBatch.marked`): its
        text values carry :data:`NOT_SCALAR` marks. Without it, text is taken
        as written, whatever its first character.

    Returns
    -------
    accepted
        Canonical columns in schema order, then the unknown columns as text, then
        ``__row`` (the record's index in ``frame``).
    rejected
        ``__row``, ``reason``, ``message`` for every rejected record.
    """
    schema = SCHEMAS[protocol]
    in_frame = dict(frame.schema)
    # Only the slow JSON path marks non-scalars; skip the per-value test without marks.
    text_columns = [c for c in schema.dtypes if in_frame.get(c) == pl.String]
    marked = marked and bool(text_columns) and bool(
        frame.select(
            pl.any_horizontal(pl.col(c).str.starts_with(NOT_SCALAR).any() for c in text_columns)
        ).item()
    )
    exprs, unknown = staging_exprs(in_frame, protocol, options, marked=marked)
    staged = frame.with_row_index(ROW).select(pl.col(ROW), *exprs)
    checks = _checks(protocol, options)
    code = check_code(checks)
    staged = staged.with_columns(code.alias("__check"))
    if protocol == "pairwise":
        staged = staged.with_columns(_winner(pl.col("winner")).alias("winner"))

    accepted = staged.filter(pl.col("__check").is_null()).select(*schema.dtypes, *unknown, ROW)
    failed = staged.filter(pl.col("__check").is_not_null())
    if not failed.height:
        return accepted, pl.DataFrame(
            schema={ROW: pl.UInt32, "reason": pl.String, "message": pl.String}
        )
    texts = {
        n: _text(pl.col(f"__raw_{n}"), in_frame[n], marked).str.slice(0, _SHOWN_CHARS)
        if n in in_frame
        else pl.lit(None, dtype=pl.String)
        for n in schema.dtypes
    }
    reason: pl.Expr = pl.lit(None, dtype=pl.String)
    message: pl.Expr = pl.lit(None, dtype=pl.String)
    for k, (_, text_code, text) in enumerate(checks):
        hit = pl.col("__check") == k
        reason = pl.when(hit).then(pl.lit(text_code)).otherwise(reason)
        message = pl.when(hit).then(text(texts)).otherwise(message)
    rejected = failed.select(ROW, reason.alias("reason"), message.alias("message"))
    return accepted, rejected


def flag_rejected(
    records: pl.LazyFrame,
    protocol: Protocol,
    options: ValidationOptions,
    *,
    timestamp_format: str | None,
    text_fields: frozenset[str],
    keep: tuple[str, ...] = (),
    number_like_ids: bool = False,
) -> tuple[pl.LazyFrame, list[str]]:
    """Typed rows and a ``__rejected`` flag, lazily: the streaming path's validation.

    The rows are typed by the same expressions as :func:`validate_batch`, and
    ``__rejected`` is true wherever it would reject the row, and also where the
    one ``timestamp_format`` cannot read a timestamp or a ``text_fields`` column
    may hold a boolean, array or object turned into text (with
    ``number_like_ids``, also a number turned into text: a value that starts
    with a digit or ``-``). The flag is
    conservative on purpose: the caller falls back to the block path, which has
    the messages, on any flagged row.

    Returns
    -------
    rows
        Canonical columns in schema order, the unknown columns as text, ``__row``
        (from ``records``), the ``keep`` columns as they came, and ``__rejected``.
    unknown
        The unknown columns' names.
    """
    schema = SCHEMAS[protocol]
    in_frame = dict(records.collect_schema())
    for name in (ROW, *keep):
        in_frame.pop(name, None)
    exprs, unknown = staging_exprs(
        in_frame, protocol, options, marked=False, timestamp_format=timestamp_format
    )
    hides = [
        _hides(pl.col(f"__raw_{c}"), number_like_ids)
        for c in schema.dtypes
        if in_frame.get(c) == pl.String and c in text_fields
    ]
    conditions = [check.fill_null(False) for check, _, _ in _checks(protocol, options)]
    rejected = pl.any_horizontal(*conditions, *[h.fill_null(False) for h in hides])
    rows = records.select(pl.col(ROW), *keep, *exprs).with_columns(rejected.alias("__rejected"))
    if protocol == "pairwise":
        rows = rows.with_columns(_winner(pl.col("winner")).alias("winner"))
    return rows.select(*schema.dtypes, *unknown, ROW, *keep, "__rejected"), unknown


def _hides(raw: pl.Expr, number_like: bool) -> pl.Expr:
    """Whether a text id may be a boolean, array or object (or, with ``number_like``, a number) turned into text."""
    hidden = raw.str.starts_with("{") | raw.str.starts_with("[") | raw.is_in(["true", "false"])
    return hidden | raw.str.contains(r"^[-0-9]") if number_like else hidden


_Message = Callable[[dict[str, pl.Expr]], pl.Expr]


def _missing(name: str) -> _Message:
    return lambda _t: pl.lit(f"required field {name!r} is missing or empty")


def _wrong_type(name: str, target: PolarsDataType) -> _Message:
    return lambda t: pl.format(
        "field {}: expected {}, got {}", pl.lit(repr(name)), pl.lit(_expected(target)), t[name]
    )


def _negative(name: str) -> _Message:
    return lambda _t: pl.format(
        "field {}: expected an integer >= 0, got {}", pl.lit(repr(name)), pl.col(name)
    )


def _winner(raw: pl.Expr) -> pl.Expr:
    return raw.str.strip_chars().str.to_lowercase().replace_strict(
        WINNER_ALIASES, default=None, return_dtype=pl.String
    )


def _checks(
    protocol: Protocol, options: ValidationOptions
) -> list[tuple[pl.Expr, str, _Message]]:
    """(failing condition, reason code, message builder) in the order they apply."""
    # Over 80 lines: every rule in one ordered list, read top to bottom, since the first that fails is the reason.
    schema = SCHEMAS[protocol]
    checks: list[tuple[pl.Expr, str, _Message]] = []
    for name in schema.required:
        missing = pl.col(name).is_null()
        if schema.dtypes[name] == pl.String:  # only text can be empty
            missing = missing | (pl.col(name).str.len_bytes() == 0)
        checks.append(
            (
                missing & ~pl.col(f"__bad_{name}"),
                "missing_field",
                _missing(name),
            )
        )
    if protocol == "pairwise":
        checks.append(
            (
                pl.col("winner").is_null()
                & pl.col("preference").is_null()
                & ~pl.col("__bad_winner")
                & ~pl.col("__bad_preference"),
                "missing_field",
                lambda _t: pl.lit("a pairwise record needs 'winner' or 'preference'"),
            )
        )
    for name, target in schema.dtypes.items():
        checks.append(
            (
                pl.col(f"__bad_{name}"),
                "wrong_type",
                _wrong_type(name, target),
            )
        )
    for name in schema.dtypes:
        if name in INDEX_COLUMNS:
            checks.append(
                (
                    pl.col(name) < 0,
                    "out_of_range",
                    _negative(name),
                )
            )
    if protocol == "pointwise":
        checks.append(
            (
                ~pl.col("score").is_finite(),
                "non_finite_score",
                lambda _t: pl.format("field 'score': expected a finite number, got {}", pl.col("score")),
            )
        )
        if options.scale is not None:
            low, high = options.scale
            checks.append(
                (
                    (pl.col("score") < low) | (pl.col("score") > high),
                    "score_out_of_scale",
                    lambda _t: pl.format(
                        "field 'score': {} is outside the declared scale [{}, {}]",
                        pl.col("score"),
                        pl.lit(low),
                        pl.lit(high),
                    ),
                )
            )
    if protocol == "pairwise":
        checks += [
            (
                pl.col("system_a") == pl.col("system_b"),
                "same_system",
                lambda _t: pl.format("system_a and system_b are both {}", pl.col("system_a")),
            ),
            (
                pl.col("winner").is_not_null() & _winner(pl.col("winner")).is_null(),
                "unknown_winner",
                lambda t: pl.format("field 'winner': expected A, B or tie, got {}", t["winner"]),
            ),
            (
                ~pl.col("preference").is_between(0.0, 1.0) | pl.col("preference").is_nan(),
                "preference_out_of_range",
                lambda _t: pl.format("field 'preference': {} is not in [0, 1]", pl.col("preference")),
            ),
        ]
    return checks
