"""Tie groups against the rule of docs/results.md (issue 16: components, not greedy), written out as a plain loop."""

from __future__ import annotations

import itertools
import math
import random

import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from jurymeter.errors import DesignError
from jurymeter.stats.ranking import tie_groups

IDS = st.text(alphabet=st.characters(blacklist_categories=("Cs",)), min_size=0, max_size=6)
# Few distinct values, so equal means (ties broken by id) are common.
MEANS = st.one_of(
    st.sampled_from([0.0, -0.0, 1.0, 1.5, 2.0, 2.25, 7.0]),
    st.floats(min_value=-1e6, max_value=1e6, allow_nan=False, allow_infinity=False),
)
MDDS = st.one_of(
    st.just(0.0),
    st.just(math.inf),
    st.floats(min_value=0.0, max_value=1e3, allow_nan=False, allow_infinity=False),
)


def brute_force(means: dict[str, float], mdd: float) -> list[tuple[str, float, int, int]]:
    """The rule, literally: best first (ties by id); a new group where the step from the previous is >= mdd."""
    ordered = sorted(means.items(), key=lambda kv: (-kv[1], kv[0]))
    out, group, previous = [], 0, None
    for rank, (system, mean) in enumerate(ordered, start=1):
        if previous is None or not previous - mean < mdd:
            group += 1
        previous = mean
        out.append((system, mean, rank, group))
    return out


@settings(max_examples=150, deadline=None)
@given(means=st.dictionaries(IDS, MEANS, max_size=25), mdd=MDDS)
def test_tie_groups_equal_the_rule_written_as_a_loop(means: dict[str, float], mdd: float) -> None:
    table = tie_groups(means, mdd)
    assert table.columns == ["system_id", "mean", "rank", "rank_low", "rank_high", "tie_group", "mdd95"]
    assert table.dtypes == [pl.String, pl.Float64, pl.Int64, pl.Int64, pl.Int64, pl.Int64, pl.Float64]
    got = list(table.select("system_id", "mean", "rank", "tie_group").iter_rows())
    assert got == brute_force(means, mdd)
    assert table["rank"].to_list() == list(range(1, len(means) + 1))
    assert (table["mdd95"] == mdd).all()


@settings(max_examples=100, deadline=None)
@given(means=st.dictionaries(IDS, MEANS, min_size=1, max_size=25), mdd=MDDS)
def test_groups_are_chains_closer_than_the_mdd_and_apart_from_each_other(means: dict[str, float], mdd: float) -> None:
    table = tie_groups(means, mdd)
    rows = list(table.select("mean", "tie_group").iter_rows())
    for (m1, g1), (m2, g2) in itertools.pairwise(rows):
        assert (m1 - m2 < mdd) == (g1 == g2)
    # Any two systems of different groups are at least the MDD apart.
    for m1, g1 in rows:
        for m2, g2 in rows:
            if g1 < g2:
                assert m1 - m2 >= mdd
    # Groups are contiguous runs in rank order and never go back.
    groups = table["tie_group"].to_list()
    assert groups == sorted(groups)


@settings(max_examples=50, deadline=None)
@given(means=st.dictionaries(IDS, MEANS, max_size=25), mdd=MDDS, seed=st.integers(0, 2**32 - 1))
def test_result_does_not_depend_on_input_order(means: dict[str, float], mdd: float, seed: int) -> None:
    items = list(means.items())
    random.Random(seed).shuffle(items)
    assert tie_groups(dict(items), mdd).equals(tie_groups(means, mdd))


def test_equal_means_are_ordered_by_system_id() -> None:
    table = tie_groups({"b": 1.0, "c": 2.0, "a": 1.0, "d": 1.0}, 0.0)
    assert table["system_id"].to_list() == ["c", "a", "b", "d"]
    # With a zero MDD even equal means are separate groups: nothing is detectable as "equal".
    assert table["tie_group"].to_list() == [1, 2, 3, 4]


def test_boundary_difference_equal_to_the_mdd_opens_a_new_group() -> None:
    table = tie_groups({"a": 3.0, "b": 2.5, "c": 2.0}, 0.5)
    # b is exactly 0.5 below a: not "less than", so b leads group 2; c is 0.5 below b.
    assert table["tie_group"].to_list() == [1, 2, 3]
    table = tie_groups({"a": 3.0, "b": 2.6, "c": 2.2}, 0.5)
    # Membership is a chain of steps below the MDD (components), not a distance to the group's first
    # system (the greedy rule before issue 16 gave [1, 1, 2]).
    assert table["tie_group"].to_list() == [1, 1, 1]


def test_infinite_mdd_is_one_group_and_nan_is_refused() -> None:
    table = tie_groups({"a": 1.0, "b": -100.0, "c": 50.0}, math.inf)
    assert table["tie_group"].to_list() == [1, 1, 1]
    assert table["system_id"].to_list() == ["c", "a", "b"]
    with pytest.raises(DesignError, match="mdd"):
        tie_groups({"a": 1.0}, math.nan)
    with pytest.raises(DesignError, match="mdd"):
        tie_groups({"a": 1.0}, -0.1)
    with pytest.raises(DesignError, match="finite"):
        tie_groups({"a": 1.0, "b": math.nan}, 0.5)


def test_no_systems_give_an_empty_table_with_the_schema() -> None:
    table = tie_groups({}, 0.5)
    assert table.height == 0
    assert table.schema == pl.Schema(
        {"system_id": pl.String, "mean": pl.Float64, "rank": pl.Int64, "rank_low": pl.Int64, "rank_high": pl.Int64,
         "tie_group": pl.Int64, "mdd95": pl.Float64}
    )


@pytest.mark.parametrize(
    ("means", "mdd", "match"),
    [
        ({"a": 1.0}, math.nan, r"mdd must be a number >= 0 \(inf allowed\); got nan"),
        ({"a": 1.0}, -0.1, r"got -0.1"),
        ({"a": 1.0}, None, r"mdd must be a number .*; got None"),
        ({"a": 1.0}, "wide", r"got 'wide'"),
        ({"a": 1.0, "b": math.nan}, 0.5, r"every mean must be a finite number; got 'b': nan"),
        ({"a": "high"}, 0.5, r"every mean must be a finite number; got 'a': 'high'"),
        ({"a": None}, 0.5, r"got 'a': None"),
    ],
)
def test_bad_input_is_a_design_error_naming_the_value(means: dict, mdd: object, match: str) -> None:
    from jurymeter.errors import DesignError, JurymeterError

    with pytest.raises(DesignError, match=match) as caught:
        tie_groups(means, mdd)  # type: ignore[arg-type]
    assert isinstance(caught.value, JurymeterError)
