"""Item-set folder names: safe, injective (also case-insensitively), reversible."""

from __future__ import annotations

import hashlib
import re
from urllib.parse import unquote

import pytest
from hypothesis import given
from hypothesis import strategies as st

from jurymeter.io.naming import (
    MAX_ENCODED_LENGTH,
    decode_item_set,
    encode_item_set,
    is_digested,
    item_set_folder,
)

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


# ---------------------------------------------------------------- folder names of any length

DIGESTED = re.compile(r"^(?:[a-z0-9_-]|%[0-9A-F]{2})*~[0-9a-f]{64}$")
long_names = st.text(min_size=1, max_size=400).map(lambda s: s * (1 + 800 // (len(s.encode()) + 1)))
any_names = st.one_of(names, long_names)


@given(any_names)
def test_folder_name_is_one_safe_segment_within_the_limit(name: str) -> None:
    folder = item_set_folder(name)
    assert len(folder.encode()) <= MAX_ENCODED_LENGTH
    assert SAFE_SEGMENT.match(folder) or DIGESTED.match(folder)
    assert "/" not in folder
    assert "." not in folder


@given(any_names)
def test_a_name_that_fits_is_its_own_folder_name_and_a_long_one_is_digested(name: str) -> None:
    encoded = encode_item_set(name)
    folder = item_set_folder(name)
    if len(encoded) <= MAX_ENCODED_LENGTH:
        assert folder == encoded  # stores written before long names stay readable
        assert not is_digested(folder)
        assert decode_item_set(folder) == name
    else:
        assert is_digested(folder)
        prefix, digest = folder.split("~")
        assert encoded.startswith(prefix)
        assert len(prefix) > MAX_ENCODED_LENGTH - 64 - 1 - 12  # at most one 4-byte character short
        assert digest == hashlib.sha256(name.encode()).hexdigest()
        with pytest.raises(ValueError, match="digested"):
            decode_item_set(folder)


@given(any_names, any_names)
def test_folder_names_never_collide_even_case_insensitively(a: str, b: str) -> None:
    if a != b:
        assert item_set_folder(a).lower() != item_set_folder(b).lower()


def test_long_names_equal_up_to_their_end_get_different_folders() -> None:
    a, b = "t" * 299 + "A", "t" * 299 + "B"
    assert item_set_folder(a) != item_set_folder(b)
    assert item_set_folder(a).split("~")[0] == item_set_folder(b).split("~")[0]
    assert not is_digested(item_set_folder("~" * 80))  # "~" is escaped (%7E) in a plain folder name
    assert len(item_set_folder("É" * 40)) == MAX_ENCODED_LENGTH  # the longest plain folder name
    assert is_digested(item_set_folder("É" * 41))
