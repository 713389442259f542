"""Item-set folder names: safe, injective (also case-insensitively), reversible."""

from __future__ import annotations

import re
from urllib.parse import unquote

from hypothesis import given
from hypothesis import strategies as st

from jurymeter.io.naming import decode_item_set, encode_item_set

SAFE_SEGMENT = re.compile(r"^(?:[a-z0-9_-]|%[0-9A-F]{2})*$")
names = st.text(min_size=1, max_size=60)


@given(names)
def test_round_trip(name: str) -> None:
    assert decode_item_set(encode_item_set(name)) == name


@given(names)
def test_segment_is_one_safe_path_component(name: str) -> None:
    segment = encode_item_set(name)
    assert SAFE_SEGMENT.match(segment)
    assert "/" not in segment
    assert "\\" not in segment
    assert segment not in {".", ".."}
    assert "." not in segment


@given(names, names)
def test_no_collision_even_on_case_insensitive_file_systems(a: str, b: str) -> None:
    if a != b:
        assert encode_item_set(a).lower() != encode_item_set(b).lower()


@given(names)
def test_hive_readers_that_percent_decode_get_the_name_back(name: str) -> None:
    # pyarrow's hive partitioning with segment_encoding="uri" applies unquote.
    assert unquote(encode_item_set(name)) == name


def test_examples() -> None:
    assert encode_item_set("mt-bench_v2") == "mt-bench_v2"
    assert encode_item_set("../x") == "%2E%2E%2Fx"
    assert encode_item_set("A") != encode_item_set("a")
