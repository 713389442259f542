"""How an adapter reads a file (``jurymeter.io.adapters.reading``): lines, text columns, frames.

Independent references: iterating the file object in binary mode (what
``FileBytes.lines`` did before it read blocks), ``orjson.dumps`` (what ``_text``
did for every number), and a frame built column by column with ``row.get``.
"""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import orjson
import polars as pl
import pytest

from jurymeter.io.adapters import reading
from jurymeter.io.adapters.reading import FileBytes, _frame, _text
from jurymeter.io.sources import discover_sources


def _iterated(path: Path) -> list[tuple[int, bytes]]:
    with open(path, "rb") as handle:
        return [(n, line.rstrip(b"\r\n")) for n, line in enumerate(handle, start=1)]


@pytest.mark.parametrize("read_bytes", [1, 2, 3, 7, 64, 1 << 20])
def test_lines_are_those_of_iterating_the_file(
    read_bytes: int, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(reading, "READ_BYTES", read_bytes)
    rng = random.Random(read_bytes)
    pieces = [b"a", b"bc", b"\n", b"\r", b" ", b"\r\n", b"\n\n", b"x" * 300, b"\xef\xbb\xbf", b"{}"]
    for k in range(40):
        data = b"".join(rng.choice(pieces) for _ in range(rng.choice([0, 1, 5, 60, 400])))
        path = tmp_path / f"f{k}.jsonl"
        path.write_bytes(data)
        [source] = discover_sources([str(path)], log_format="canonical")
        got = list(FileBytes(source).lines())
        assert got == _iterated(path), data
        blocks = list(FileBytes(source).line_blocks())
        assert [(first + i, line) for first, block in blocks for i, line in enumerate(block)] == got


def test_a_line_longer_than_many_blocks_is_one_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(reading, "READ_BYTES", 1000)
    path = tmp_path / "long.jsonl"
    path.write_bytes(b"first\n" + b"y" * 250_000 + b"\r\nlast")
    [source] = discover_sources([str(path)], log_format="canonical")
    assert list(FileBytes(source).lines()) == [(1, b"first"), (2, b"y" * 250_000), (3, b"last")]


@pytest.mark.parametrize(
    "value",
    [0, 1, -1, 81, 2**53 + 1, 2**63 - 1, -(2**63), 2**64 - 1, 1.5, 1e16, 1.5e-7, -0.0, 1717555343.7911947,
     [1, "a"], {"k": None}],
)
def test_text_of_a_value_is_what_orjson_writes(value: Any) -> None:
    assert _text(value) == orjson.dumps(value).decode()


@pytest.mark.parametrize(("value", "text"), [(None, None), ("x", "x"), (True, "true"), (False, "false"),
                                             (float("nan"), "nan"), (float("inf"), "inf")])
def test_text_of_strings_booleans_and_non_finite_numbers(value: Any, text: str | None) -> None:
    assert _text(value) == text


def test_text_of_an_integer_orjson_cannot_write_still_raises() -> None:
    with pytest.raises(orjson.JSONEncodeError):
        _text(2**64)


def test_frame_has_a_text_column_per_field_in_order_of_appearance() -> None:
    rows: list[dict[str, str | None]] = [{"a": "1", "b": None}, {}, {"c": "x", "a": "2"}, {"b": "y"}]
    names = ["a", "b", "c"]
    expected = pl.DataFrame({n: [r.get(n) for r in rows] for n in names}, schema=dict.fromkeys(names, pl.String))
    assert _frame(rows).equals(expected)
    assert _frame([]).shape == (0, 0)
