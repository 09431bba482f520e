"""The shared numpy kernels against numpy's own (slower or plainer) answers."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from simdb import arrays
from simdb.arrays import compact, distinct, expand_ranges, search_sorted, sort_with_positions

SETTINGS = settings(max_examples=200, deadline=None)

uint64_values = st.lists(st.integers(0, 2**64 - 1), max_size=60).map(lambda v: np.array(v, dtype=np.uint64))
# Small non-negative int64 take compact's packed sort; negative or wide ones its argsort.
int64_values = st.one_of(
    st.lists(st.integers(0, 40), max_size=60),
    st.lists(st.integers(-(2**63), 2**63 - 1), max_size=60),
    st.lists(st.integers(2**58, 2**63 - 1), max_size=60),
).map(lambda v: np.array(v, dtype=np.int64))


@SETTINGS
@given(values=st.one_of(uint64_values, int64_values))
def test_distinct_is_numpys_unique(values):
    result = distinct(values)
    assert result.dtype == values.dtype
    assert np.array_equal(result, np.unique(values))


@SETTINGS
@given(values=st.one_of(uint64_values, int64_values))
def test_compact_numbers_the_distinct_values(values):
    numbered, local = compact(values)
    expected, inverse = np.unique(values, return_inverse=True)
    assert np.array_equal(numbered, expected)
    assert np.array_equal(local, inverse.reshape(-1))
    assert local.dtype == np.int64


@SETTINGS
@given(seed=st.integers(0, 2**32 - 1), size=st.integers(0, 3000), keys=st.sampled_from([0, 5, 4095, 4096, 20_000]))
def test_search_sorted_is_numpys_searchsorted_for_keys_in_any_order(seed, size, keys):
    rng = np.random.default_rng(seed)
    ascending = np.sort(rng.integers(0, 1000, size, dtype=np.uint64))
    queries = rng.integers(0, 1001, keys, dtype=np.uint64)
    assert np.array_equal(search_sorted(ascending, queries), np.searchsorted(ascending, queries))


@SETTINGS
@given(ranges=st.lists(st.tuples(st.integers(-50, 50), st.integers(0, 6)), max_size=20))
def test_expand_ranges_lists_every_position_of_every_range(ranges):
    starts = np.array([start for start, _ in ranges], dtype=np.int64)
    counts = np.array([count for _, count in ranges], dtype=np.int64)
    expected = [position for start, count in ranges for position in range(start, start + count)]
    assert expand_ranges(starts, counts).tolist() == expected


@SETTINGS
@given(
    keys=st.one_of(
        st.lists(st.integers(0, 70), max_size=60).map(lambda v: np.array(v, dtype=np.uint16)),
        int64_values,
    ),
    spread=st.integers(0, 40),
    given_positions=st.booleans(),
    slice_size=st.sampled_from([1, 7, arrays._SLICE]),
)
def test_sort_with_positions_is_a_stable_argsort(keys, spread, given_positions, slice_size):
    """Positions in stable key order (ties by position), and the keys in that order; None
    exactly when a key is negative or its bits and a position's do not fit in 64.  Default
    positions are made in slices of any size."""
    positions = np.arange(keys.size, dtype=np.int64) << spread if given_positions else None
    saved = arrays._SLICE
    arrays._SLICE = slice_size
    try:
        result = sort_with_positions(keys, positions)
    finally:
        arrays._SLICE = saved
    top = int(positions.max()) if given_positions and keys.size else max(keys.size - 1, 0)
    fits = not keys.size or (int(keys.min()) >= 0 and int(keys.max()).bit_length() + max(1, top.bit_length()) <= 64)
    assert (result is not None) == fits
    if result is None:
        return
    order = np.argsort(keys, kind="stable")
    expected = order if positions is None else positions[order]
    assert np.array_equal(result[0], expected)
    assert np.array_equal(result[1], keys[order].astype(np.int64))
