"""Tests of the all-pairs search and the component helpers against brute force."""

from __future__ import annotations

import itertools
import math
import threading
from functools import cached_property

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from simdb import allpairs
from simdb.allpairs import (
    ComponentLabeler,
    _claim_rules,
    as_fingerprint_array,
    cluster_labels,
    clusters_from_labels,
    clusters_from_pairs,
    connected_components,
    find_all,
    find_clusters,
    iter_clusters,
    iter_job_edge_blocks,
    iter_job_pair_blocks,
    iter_pair_blocks,
    iter_table_pair_blocks,
    plan_search_jobs,
)
from simdb.errors import DistanceError, InvalidFingerprintError, InvalidInputError
from simdb.plan import TablePlan

FULL = 2**64 - 1
SETTINGS = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])


# ----------------------------------------------------------------------------- helpers


def brute_pairs(fingerprints: list[int], k: int) -> dict[tuple[int, int], int]:
    """Every pair i < j within k bits, by popcount of the xor of all pairs."""
    array = np.asarray(fingerprints, dtype=np.uint64)
    distance = np.bitwise_count(array[:, None] ^ array[None, :])
    left, right = np.nonzero(np.triu(distance <= k, 1))
    return {(int(a), int(b)): int(distance[a, b]) for a, b in zip(left, right)}


def collect(blocks) -> dict[tuple[int, int], int]:
    """Pairs from a block iterator, failing on a repeated pair or a bad block."""
    found: dict[tuple[int, int], int] = {}
    for left, right, distance in blocks:
        assert left.dtype == np.int64 and right.dtype == np.int64 and distance.dtype == np.uint8
        assert left.shape == right.shape == distance.shape
        assert np.all(left < right)
        for a, b, d in zip(left.tolist(), right.tolist(), distance.tolist()):
            assert (a, b) not in found, f"pair {(a, b)} reported twice"
            found[(a, b)] = d
    return found


def brute_components(n: int, edges: list[tuple[int, int]]) -> list[int]:
    """Smallest-member label per node, by repeated relaxation (obviously correct, slow)."""
    label = list(range(n))
    changed = True
    while changed:
        changed = False
        for a, b in edges:
            low = min(label[a], label[b])
            if label[a] != low or label[b] != low:
                label[a] = label[b] = low
                changed = True
    return label


def plans_for(k: int) -> list[int]:
    """Block counts for k: the default, the minimum, and a fine split that coarsens keys."""
    choices = {k + 1, TablePlan.create(k).blocks, min(64, k + 3)}
    if k <= 2:
        choices.add({0: 64, 1: 64, 2: 20}[k])  # leading prefix wider than 64 - index bits
    return sorted(b for b in choices if math.comb(b, k) <= 2000)


fingerprint = st.integers(min_value=0, max_value=FULL)


@st.composite
def clustered(draw, max_bases: int = 12, max_variants: int = 12, max_flips: int = 4) -> list[int]:
    """Random bases, each with variants 0..max_flips bits away, shuffled."""
    bases = draw(st.lists(fingerprint, min_size=1, max_size=max_bases))
    out = []
    for base in bases:
        out.append(base)
        for _ in range(draw(st.integers(0, max_variants))):
            bits = draw(st.lists(st.integers(0, 63), max_size=max_flips, unique=True))
            value = base
            for bit in bits:
                value ^= 1 << bit
            out.append(value)
    return draw(st.permutations(out))


@st.composite
def duplicate_heavy(draw) -> list[int]:
    """A few distinct values (some close to each other), each repeated many times."""
    base = draw(fingerprint)
    values = [base] + [base ^ (1 << b) for b in draw(st.lists(st.integers(0, 63), max_size=3))]
    values += draw(st.lists(fingerprint, max_size=3))
    return draw(st.lists(st.sampled_from(values), min_size=0, max_size=150))


@st.composite
def shared_prefix(draw) -> list[int]:
    """Many fingerprints agreeing on their top bits (one long run in several tables)."""
    top = draw(st.integers(0, 2**40 - 1)) << 24
    lows = draw(st.lists(st.integers(0, 2**24 - 1), min_size=2, max_size=120))
    return [top | low for low in lows]


any_input = st.one_of(
    st.lists(fingerprint, max_size=120),
    clustered(),
    duplicate_heavy(),
    shared_prefix(),
)


def check_all_distances(fingerprints: list[int], k: int, blocks: int, block_size: int) -> None:
    plan = TablePlan.create(k, blocks)
    array = np.asarray(fingerprints, dtype=np.uint64)
    for k_search in range(k + 1):
        expected = brute_pairs(fingerprints, k_search)
        found = collect(iter_pair_blocks(array, plan, k_search, block_size=block_size))
        assert found == expected, f"k={k} blocks={blocks} k'={k_search}"


# ----------------------------------------------------------------------------- search


@SETTINGS
@given(data=any_input, k=st.integers(0, 4), block_size=st.sampled_from([1, 3, 64, 1 << 20]), choice=st.integers(0, 3))
def test_pairs_match_brute_force_for_every_distance(data, k, block_size, choice):
    blocks = plans_for(k)[choice % len(plans_for(k))]
    check_all_distances(data, k, blocks, block_size)


@pytest.mark.parametrize("k", [1, 2, 3, 4])
def test_every_block_count_on_clustered_data(k):
    rng = np.random.default_rng(k)
    bases = rng.integers(0, 2**64, 40, dtype=np.uint64)
    data = np.repeat(bases, 6)
    for row in range(data.size):
        for bit in rng.choice(64, rng.integers(0, k + 2), replace=False):
            data[row] ^= np.uint64(1) << np.uint64(bit)
    values = data.tolist()
    for blocks in range(k + 1, 15):
        if math.comb(blocks, k) <= 1000:
            check_all_distances(values, k, blocks, block_size=97)


def test_find_all_shapes_and_types():
    pairs, distances = find_all([5, 5, 4, 2**64 - 1], k=1)
    assert pairs.dtype == np.int64 and pairs.shape == (3, 2)
    assert distances.dtype == np.uint8 and distances.shape == (3,)
    found = {tuple(p): int(d) for p, d in zip(pairs.tolist(), distances.tolist())}
    assert found == {(0, 1): 0, (0, 2): 1, (1, 2): 1}


def test_find_all_matches_brute_force_exactly():
    values = [5, 5, 4, FULL, FULL ^ 7, 0]
    pairs, distances = find_all(values, k=3, blocks=4)
    found = {tuple(p): int(d) for p, d in zip(pairs.tolist(), distances.tolist())}
    assert found == brute_pairs(values, 3)
    assert len(found) == len(pairs)


def test_empty_and_single_inputs():
    for values in ([], [7], np.zeros(0, dtype=np.uint64)):
        pairs, distances = find_all(values)
        assert pairs.shape == (0, 2) and distances.shape == (0,)


def test_identical_fingerprints_are_one_group_and_all_pairs_emitted():
    n = 1500
    values = np.full(n, 0xDEADBEEF, dtype=np.uint64)
    values[::7] ^= np.uint64(1 << 40)  # a second group, one bit away
    pairs, distances = find_all(values, k=3)
    assert len(pairs) == n * (n - 1) // 2
    assert np.unique(pairs[:, 0] * n + pairs[:, 1]).size == len(pairs)
    other = values[pairs[:, 0]] != values[pairs[:, 1]]
    assert np.all(distances[other] == 1) and np.all(distances[~other] == 0)


def test_blocks_never_exceed_block_size():
    values = np.full(300, 42, dtype=np.uint64)
    values[150:] ^= np.uint64(3)
    sizes = [len(left) for left, _, _ in iter_pair_blocks(values, TablePlan.create(3), block_size=1000)]
    assert max(sizes) <= 1000
    assert sum(sizes) == 300 * 299 // 2


def test_long_shared_prefix_run_is_exact():
    rng = np.random.default_rng(7)
    # 3000 rows share their top 40 bits: one run in every table led by the top blocks.
    values = (np.uint64(0xABCDE12345) << np.uint64(24)) | rng.integers(0, 2**24, 3000, dtype=np.uint64)
    found = collect(iter_pair_blocks(values, TablePlan.create(3, 5), block_size=500))
    assert found == brute_pairs(values.tolist(), 3)


class ReversedPlan(TablePlan):
    """A plan whose tables come in reverse order, to exercise the general claim rule."""

    @cached_property
    def tables(self):  # type: ignore[override]
        return list(reversed(TablePlan.tables.func(self)))


@SETTINGS
@given(data=st.one_of(clustered(), duplicate_heavy()), k=st.integers(1, 3))
def test_any_table_order_reports_each_pair_once(data, k):
    plan = ReversedPlan(k=k, blocks=k + 3)
    for k_search in range(k + 1):
        found = collect(iter_pair_blocks(np.asarray(data, dtype=np.uint64), plan, k_search))
        assert found == brute_pairs(data, k_search)


@pytest.mark.parametrize("k,blocks", [(1, 2), (2, 5), (3, 5), (3, 7), (4, 6), (2, 20)])
def test_closed_form_claim_rule_equals_general_rule(k, blocks):
    plan = TablePlan.create(k, blocks)
    fast = _claim_rules(plan, assume_lexicographic=True)
    general = _claim_rules(plan, assume_lexicographic=False)
    assert [(r.leading_mask, r.conflicts, r.min_blocks_differing) for r in fast] == [
        (r.leading_mask, r.conflicts, r.min_blocks_differing) for r in general
    ]


# ----------------------------------------------------------------------------- validation


@pytest.mark.parametrize(
    "bad",
    [
        [1, -1],
        [2**64],
        [1.5],
        [True, 3],
        ["12"],
        "123",
        np.array([3, -2], dtype=np.int64),
        np.array([1.0, 2.0]),
        np.zeros((2, 2), dtype=np.uint64),
        [None],
        [2**64, -1],
        [np.int64(-1)],
        [np.uint64(1), -1],
    ],
)
def test_invalid_fingerprints_are_refused(bad):
    with pytest.raises(InvalidFingerprintError):
        find_all(bad)


def test_error_names_the_position():
    with pytest.raises(InvalidFingerprintError, match=r"\[2\]"):
        as_fingerprint_array(np.array([0, 5, -9], dtype=np.int32))


def test_accepted_inputs():
    assert as_fingerprint_array([0, FULL]).tolist() == [0, FULL]
    assert as_fingerprint_array(np.array([1, 2], dtype=np.int16)).dtype == np.uint64
    assert as_fingerprint_array((np.uint64(3), 4)).tolist() == [3, 4]
    assert as_fingerprint_array([np.uint64(FULL), np.int64(5)]).tolist() == [FULL, 5]
    assert as_fingerprint_array(iter([7, 8])).tolist() == [7, 8]
    array = np.arange(4, dtype=np.uint64)
    assert as_fingerprint_array(array) is array


def test_invalid_distances_and_plans():
    plan = TablePlan.create(2)
    with pytest.raises(DistanceError):
        iter_pair_blocks(np.zeros(3, dtype=np.uint64), plan, 3)
    with pytest.raises(InvalidInputError):
        iter_pair_blocks(np.zeros(3, dtype=np.uint64), plan, -1)
    with pytest.raises(InvalidInputError):
        iter_pair_blocks(np.zeros(3, dtype=np.uint64), "plan")  # type: ignore[arg-type]
    with pytest.raises(InvalidInputError):
        iter_pair_blocks(np.zeros(3, dtype=np.uint64), plan, block_size=0)
    with pytest.raises(InvalidInputError):
        find_all([1, 2], k=3, blocks=3)
    with pytest.raises(InvalidInputError):
        find_all([1, 2], k=-1)


# ----------------------------------------------------------------------------- components


edge_lists = st.integers(1, 60).flatmap(
    lambda n: st.tuples(st.just(n), st.lists(st.tuples(st.integers(0, n - 1), st.integers(0, n - 1)), max_size=120))
)


@SETTINGS
@given(graph=edge_lists, block=st.integers(1, 50))
def test_components_match_brute_force_streamed_in_blocks(graph, block):
    n, edges = graph
    labeler = ComponentLabeler(n)
    for start in range(0, len(edges), block):
        chunk = edges[start : start + block]
        labeler.add([a for a, _ in chunk], [b for _, b in chunk])
    assert labeler.labels().tolist() == brute_components(n, edges)
    left = np.array([a for a, _ in edges], dtype=np.int64)
    right = np.array([b for _, b in edges], dtype=np.int64)
    assert connected_components(n, left, right).tolist() == brute_components(n, edges)


@pytest.mark.parametrize("seed", range(5))
def test_a_block_with_as_many_endpoints_as_nodes_keeps_the_joins_before_it(seed):
    """Small blocks first (solved on a compact numbering of their roots), then one block
    with an endpoint per node or more (solved over every node): the nodes joined by the
    first blocks stay joined."""
    n = 1000
    rng = np.random.default_rng(seed)
    small = rng.integers(0, n, (300, 2))
    large = rng.integers(0, n, (600, 2))
    labeler = ComponentLabeler(n)
    for start in range(0, len(small), 10):
        labeler.add(small[start : start + 10, 0], small[start : start + 10, 1])
    labeler.add(large[:, 0], large[:, 1])
    edges = [tuple(edge) for edge in np.concatenate([small, large]).tolist()]
    assert labeler.labels().tolist() == brute_components(n, edges)


@pytest.mark.parametrize("block", [1, 7, 10_000])
def test_long_path_in_adversarial_order(block):
    n = 3000
    rng = np.random.default_rng(block)
    nodes = rng.permutation(n)
    left, right = nodes[:-1], nodes[1:]
    order = rng.permutation(n - 1)
    labeler = ComponentLabeler(n)
    for start in range(0, n - 1, block * 50):
        piece = order[start : start + block * 50]
        labeler.add(left[piece], right[piece])
    assert np.all(labeler.labels() == 0)


def test_clusters_are_ordered_by_first_member():
    left, right = np.array([5, 2, 7, 3]), np.array([1, 6, 5, 6])
    assert clusters_from_pairs(9, np.stack([left, right], axis=1)) == [[1, 5, 7], [2, 3, 6]]
    assert clusters_from_pairs(9, [(left, right, None)], include_singletons=True) == [
        [0],
        [1, 5, 7],
        [2, 3, 6],
        [4],
        [8],
    ]
    labels = connected_components(9, left, right)
    assert [c.tolist() for c in iter_clusters(labels)] == clusters_from_labels(labels)


def test_invalid_edges_are_refused():
    with pytest.raises(InvalidInputError):
        connected_components(3, [0], [3])
    with pytest.raises(InvalidInputError):
        connected_components(3, [0, 1], [2])
    with pytest.raises(InvalidInputError):
        ComponentLabeler(-1)


@SETTINGS
@given(data=st.one_of(clustered(max_flips=3), duplicate_heavy()), k=st.integers(0, 3))
def test_cluster_labels_equal_components_of_all_pairs(data, k):
    array = np.asarray(data, dtype=np.uint64)
    plan = TablePlan.create(3)
    pairs = brute_pairs(data, k)
    edges = list(pairs)
    expected = brute_components(len(data), edges)
    assert cluster_labels(array, plan, k).tolist() == expected
    assert find_clusters(data, k=k) == clusters_from_pairs(len(data), np.array(edges, dtype=np.int64).reshape(-1, 2))


def test_identical_group_clusters_without_expanding_pairs():
    values = np.full(200_000, 11, dtype=np.uint64)  # 2e10 pairs if expanded
    values[-1] = 12
    labels = cluster_labels(values, TablePlan.create(3))
    assert np.all(labels[:-1] == 0) and labels[-1] == 0


def test_coarsened_keys_still_report_each_pair_once():
    # k=2 with 20 blocks leads with ~57 bits, so with 1,000 rows the low prefix bits are
    # dropped from the sort key.  Pairs differing in one high bit and one bit of block 18
    # (bits 3..5) then share a coarse prefix in a table whose leading blocks they do not
    # all agree on; only the full leading-block check keeps that table from reporting them.
    rng = np.random.default_rng(3)
    bases = rng.integers(0, 2**64, 500, dtype=np.uint64)
    high = np.uint64(1) << rng.integers(8, 64, 500).astype(np.uint64)
    low = np.uint64(1) << rng.integers(3, 6, 500).astype(np.uint64)
    values = np.concatenate([bases, bases ^ high ^ low])
    found = collect(iter_pair_blocks(values, TablePlan.create(2, 20)))
    assert found == brute_pairs(values.tolist(), 2)


def test_triangle_decoding_is_exact_for_huge_groups():
    from simdb.allpairs import _triangle

    rows = []
    for j in [2, 3, 67_108_865, 94_906_267, 123_456_789, 3_000_000_000]:
        start = j * (j - 1) // 2
        rows += [(start, 0, j), (start + j - 1, j - 1, j), (start - 1, j - 2, j - 1)]
    offsets = np.array([r[0] for r in rows], dtype=np.int64)
    i, j = _triangle(offsets)
    assert list(zip(i.tolist(), j.tolist())) == [(r[1], r[2]) for r in rows]


def test_numpy_integer_arguments_are_accepted():
    pairs, distances = find_all(np.array([1, 3], dtype=np.uint64), k=np.int64(1), blocks=np.int32(4))
    assert pairs.tolist() == [[0, 1]] and distances.tolist() == [1]
    assert find_clusters([1, 3, 100], k=np.int64(1)) == [[0, 1]]


@SETTINGS
@given(data=st.one_of(st.lists(fingerprint, max_size=80), clustered()), k=st.integers(1, 4), choice=st.integers(0, 3))
def test_tables_searched_separately_report_each_pair_once(data, k, choice):
    distinct = list(dict.fromkeys(data))  # the per-table entry point expects distinct values
    blocks = plans_for(k)[choice % len(plans_for(k))]
    plan = TablePlan.create(k, blocks)
    array = np.asarray(distinct, dtype=np.uint64)
    for k_search in range(k + 1):
        found: dict[tuple[int, int], int] = {}
        for table in range(len(plan.tables)):
            for row_a, row_b, distance in iter_table_pair_blocks(array, plan, table, k_search, block_size=5):
                assert row_a.size <= 5
                for a, b, d in zip(row_a.tolist(), row_b.tolist(), distance.tolist()):
                    pair = (min(a, b), max(a, b))
                    assert pair not in found, f"pair {pair} claimed twice"
                    found[pair] = d
        assert found == brute_pairs(distinct, k_search)


def test_table_number_is_validated():
    plan = TablePlan.create(3, 5)
    for bad in (-1, 10, True, 1.0):
        with pytest.raises(InvalidInputError):
            iter_table_pair_blocks(np.arange(3, dtype=np.uint64), plan, bad)


# ----------------------------------------------------------------------------- parallel jobs


@SETTINGS
@given(data=any_input, k=st.integers(0, 4), choice=st.integers(0, 3), workers=st.sampled_from([2, 3, 7, 64]))
def test_search_jobs_together_report_each_pair_once(data, k, choice, workers):
    """The jobs of a parallel plan (tables split into groups, groups into shares of rows)
    report exactly the brute-force pairs, each once, and their edges give the components."""
    blocks = plans_for(k)[choice % len(plans_for(k))]
    plan = TablePlan.create(k, blocks)
    array = np.asarray(data, dtype=np.uint64)
    jobs = plan_search_jobs(plan, k, workers)
    assert len(jobs) >= min(workers, 2) or len(plan.tables) == 1
    saved = allpairs.SHARE_ROWS
    allpairs.SHARE_ROWS = 1 + len(data) // 5  # jobs search their rows in several sub-shares
    try:
        check_jobs(data, k, plan, array, jobs)
        bundled = [job for bundle in allpairs.bundle_jobs(plan_search_jobs(plan, k, 1), workers) for job in bundle]
        check_jobs(data, k, plan, array, bundled)
    finally:
        allpairs.SHARE_ROWS = saved


def few_values(n: int, seed: int) -> np.ndarray:
    """``n`` fingerprints over a pool of 8, half with one bit flipped: every digit takes few
    values, each held by many rows."""
    rng = np.random.default_rng(seed)
    values = rng.choice(rng.integers(0, 2**64, 8, dtype=np.uint64), n)
    values[::2] ^= np.uint64(1) << rng.integers(0, 64, values[::2].size).astype(np.uint64)
    return values


@SETTINGS
@given(
    seed=st.integers(0, 2**32 - 1),
    n=st.integers(0, 3000),
    workers=st.sampled_from([1, 2, 5]),
    share_rows=st.integers(1, 700),
    pick_slice=st.integers(1, 1000),
    blocks=st.sampled_from([4, 5, 8]),
)
def test_sub_shares_hold_a_jobs_rows_once_in_stable_order_of_its_digit(
    seed, n, workers, share_rows, pick_slice, blocks
):
    """The order the search relies on to skip the job digit's radix pass: within a
    sub-share, rows by digit and, for equal digits, by position; sub-shares in digit order,
    never splitting a digit value; together, every row of the job's digit range once, also
    when the rows are picked in many slices."""
    values = few_values(n, seed)
    saved = allpairs.SHARE_ROWS, allpairs._PICK_SLICE
    allpairs.SHARE_ROWS, allpairs._PICK_SLICE = share_rows, pick_slice
    try:
        for job in plan_search_jobs(TablePlan.create(3, blocks), 3, workers):
            shares = allpairs._job_shares(values, job)
            source, width = job.digit
            digit = (values >> np.uint64(source)) & np.uint64((1 << width) - 1)
            expected = np.flatnonzero((digit >= job.low) & (digit < job.high))
            rows = np.concatenate([np.empty(0, np.int64), *shares])
            assert np.array_equal(np.sort(rows), expected)
            ordered = digit[rows]
            assert np.all(ordered[1:] >= ordered[:-1])
            ties = ordered[1:] == ordered[:-1]
            assert np.all(rows[1:][ties] > rows[:-1][ties])
    finally:
        allpairs.SHARE_ROWS, allpairs._PICK_SLICE = saved


@pytest.mark.parametrize("k", [1, 2, 3, 4])
def test_jobs_over_few_distinct_digits_report_every_pair(k):
    """Many rows per digit value and per prefix, searched in sub-shares of a few hundred
    rows: the pairs of all jobs are the brute-force pairs."""
    values = few_values(2500, seed=k)
    saved = allpairs.SHARE_ROWS
    allpairs.SHARE_ROWS = 300
    try:
        for blocks in plans_for(k):
            plan = TablePlan.create(k, blocks)
            found: dict[tuple[int, int], int] = {}
            for job in plan_search_jobs(plan, k, 3):
                for pair, distance in collect(iter_job_pair_blocks(values, plan, job)).items():
                    assert pair not in found
                    found[pair] = distance
            assert found == brute_pairs(values.tolist(), k)
    finally:
        allpairs.SHARE_ROWS = saved


@SETTINGS
@given(
    jobs=st.lists(st.tuples(st.floats(0.01, 100.0), st.integers(1, 300)), min_size=1, max_size=40),
    count=st.integers(1, 24),
)
def test_bundles_cut_jobs_by_digit_into_even_shares(jobs, count):
    """Every digit value of every job in exactly one bundle, no empty bundle, at most
    ``count - 1`` cuts, and each bundle within one digit value's cost of an even split."""
    originals = [
        allpairs.SearchJob((index,), digit=(0, 9), low=7, high=7 + span, cost=cost)
        for index, (cost, span) in enumerate(jobs)
    ]
    bundles = allpairs.bundle_jobs(originals, count)
    assert 1 <= len(bundles) <= count and all(bundles)
    pieces = [job for bundle in bundles for job in bundle]
    assert len(pieces) <= len(originals) + count - 1
    for original in originals:
        ranges = sorted((job.low, job.high) for job in pieces if job.tables == original.tables)
        assert ranges[0][0] == original.low and ranges[-1][1] == original.high
        assert all(high == low for (_, high), (low, _) in itertools.pairwise(ranges))
        assert all(low < high for low, high in ranges)
        costs = [job.cost for job in pieces if job.tables == original.tables]
        assert sum(costs) == pytest.approx(original.cost)
    even = sum(job.cost for job in originals) / count
    value_cost = max(job.cost / (job.high - job.low) for job in originals)
    assert max(sum(job.cost for job in bundle) for bundle in bundles) <= even + value_cost + 1e-6


@SETTINGS
@given(costs=st.lists(st.floats(0.01, 100.0), min_size=1, max_size=40), count=st.integers(1, 12))
def test_bundles_keep_jobs_without_a_digit_whole(costs, count):
    """A job over every row (no digit) is never cut: each in exactly one bundle, no empty
    bundle, and the heaviest within one job's cost of an even split."""
    jobs = [allpairs.SearchJob((index,), cost=cost) for index, cost in enumerate(costs)]
    bundles = allpairs.bundle_jobs(jobs, count)
    assert len(bundles) <= count and all(bundles)
    assert sorted(job.tables for bundle in bundles for job in bundle) == [job.tables for job in jobs]
    totals = [sum(job.cost for job in bundle) for bundle in bundles]
    assert max(totals) <= sum(costs) / count + max(costs) + 1e-9


def test_job_costs_count_the_candidates_of_short_prefixes():
    """On 100M rows the group of four 25-bit tables costs more than its table count says
    against the three 26-bit ones (1.7-2.2 times as much, measured); without a row count,
    groups cost by their tables alone."""
    plan = TablePlan.create(3, 5)
    jobs = plan_search_jobs(plan, 3, 1, rows=100_000_000)
    by_tables = {len(job.tables): job.cost for job in jobs}
    assert by_tables[4] / by_tables[3] > 1.5
    assert [job.cost for job in plan_search_jobs(plan, 3, 1)] == [8.0, 7.0, 6.0, 5.0]


def check_jobs(data, k, plan, array, jobs):
    found: dict[tuple[int, int], int] = {}
    edges: list[tuple[int, int]] = []
    for job in jobs:
        for pair, distance in collect(iter_job_pair_blocks(array, plan, job, block_size=7)).items():
            assert pair not in found, f"pair {pair} reported by two jobs"
            found[pair] = distance
        for left, right in iter_job_edge_blocks(array, plan, job, block_size=7):
            edges += zip(left.tolist(), right.tolist())
    assert found == brute_pairs(data, k)
    left = [a for a, _ in edges]
    right = [b for _, b in edges]
    assert connected_components(len(data), left, right).tolist() == brute_components(len(data), list(found))


def parallel_input(n: int = 60_000, seed: int = 11) -> np.ndarray:
    """Above the threads' size threshold: clustered values, a duplicate group, random rest."""
    rng = np.random.default_rng(seed)
    bases = rng.integers(0, 2**64, n // 20, dtype=np.uint64)
    values = rng.choice(bases, n)
    flips = rng.integers(0, 64, n).astype(np.uint64)
    values[::2] ^= np.uint64(1) << flips[::2]
    values[:500] = values[0]
    return values


@pytest.mark.parametrize("share_rows", [allpairs.SHARE_ROWS, 4096])
def test_threads_give_the_same_pairs_and_clusters_as_one_thread(monkeypatch, share_rows):
    monkeypatch.setattr(allpairs, "SHARE_ROWS", share_rows)  # 4096: threads balance over many sub-shares
    values = parallel_input()
    pairs_one, distances_one = find_all(values, k=3, workers=1)
    pairs_two, distances_two = find_all(values, k=3, workers=2)
    one = sorted(zip(pairs_one[:, 0].tolist(), pairs_one[:, 1].tolist(), distances_one.tolist()))
    two = sorted(zip(pairs_two[:, 0].tolist(), pairs_two[:, 1].tolist(), distances_two.tolist()))
    assert len(one) > 100_000 and one == two
    plan = TablePlan.create(3)
    labels = cluster_labels(values, plan, workers=1)
    assert np.array_equal(cluster_labels(values, plan, workers=3), labels)
    assert find_clusters(values, k=2, workers=4) == find_clusters(values, k=2, workers=1)


@pytest.mark.parametrize("workers", [1, 2])
def test_jobs_pick_their_rows_into_arrays_passed_on_from_finished_jobs(monkeypatch, workers):
    """A fresh array for each job's rows is faulted in again (0.3-0.4 s of system time at 20M
    rows): one thread passes one array from job to job; threads hold at most two per
    thread (one being cut, one searched), whatever the number of jobs.  The pairs are those
    of one job at a time, so no array is passed on while a sub-share still reads it."""
    monkeypatch.setattr(allpairs, "SHARE_ROWS", 4096)  # many sub-shares per job
    values = parallel_input(40_000)
    plan = TablePlan.create(3)
    jobs = plan_search_jobs(plan, 3, 8)
    assert len(jobs) > 2 * 2 * workers
    given: list[np.ndarray] = []  # kept alive, so that distinct arrays have distinct ids
    real_job_shares = allpairs._job_shares

    def recording_job_shares(values, job, picked=None):
        given.append(picked)
        return real_job_shares(values, job, picked)

    monkeypatch.setattr(allpairs, "_job_shares", recording_job_shares)
    found: dict[tuple[int, int], int] = {}
    work = allpairs._share_pair_blocks
    for left, right, distance in allpairs._run_jobs(values, plan, 3, jobs, work, 97, workers):
        found.update(zip(zip(left.tolist(), right.tolist()), distance.tolist()))
    assert len(given) == len(jobs) and all(picked is not None for picked in given)
    assert len({id(picked) for picked in given}) <= (1 if workers == 1 else 2 * workers)
    expected: dict[tuple[int, int], int] = {}
    for job in jobs:
        expected.update(collect(iter_job_pair_blocks(values, plan, job, block_size=97)))
    assert found == expected


def test_closing_a_threaded_stream_early_stops_its_threads():
    before = threading.active_count()
    blocks = iter_pair_blocks(parallel_input(), TablePlan.create(3), block_size=100, workers=2)
    next(blocks)
    assert threading.active_count() > before
    blocks.close()
    assert threading.active_count() == before


def test_an_error_in_a_thread_is_raised_to_the_caller(monkeypatch):
    from simdb import allpairs

    def failing(*args, **kwargs):
        raise MemoryError("no room for the sort")

    monkeypatch.setattr(allpairs, "_share_pair_blocks", failing)
    with pytest.raises(MemoryError, match="no room"):
        find_all(parallel_input(), workers=2)


@pytest.mark.parametrize("bad", [0, -1, True, 1.5, "2"])
def test_invalid_worker_counts_are_refused(bad):
    with pytest.raises(InvalidInputError, match="workers"):
        find_all([1, 2, 3], workers=bad)


def test_jobs_are_cut_to_bound_the_rows_each_one_searches():
    plan = TablePlan.create(3, 5)
    values = parallel_input(20_000)
    jobs = plan_search_jobs(plan, 3, 1, rows=values.size, max_job_rows=values.size // 6)
    assert len(jobs) >= 4 * 6 and all(job.digit is not None for job in jobs)
    found: dict[tuple[int, int], int] = {}
    reported = 0
    for job in jobs:
        pairs_of_job = collect(iter_job_pair_blocks(values, plan, job))
        reported += len(pairs_of_job)
        found.update(pairs_of_job)
    assert reported == len(found)  # no pair reported by two jobs
    pairs, distances = find_all(values, k=3, workers=1)
    assert found == dict(zip(map(tuple, pairs.tolist()), distances.tolist()))


@pytest.mark.parametrize("workers", [1, 2, 8])
def test_an_empty_input_is_planned_into_jobs_that_cover_every_digit(workers: int) -> None:
    """Found by an adversarial probe: `simdb pairs --parquet` of a 0-row export failed with
    "unexpected ZeroDivisionError": with rows=0 a small group got no job at all."""
    plan = TablePlan.create(3)
    jobs = plan_search_jobs(plan, 3, workers, rows=0, max_job_rows=1 << 20)
    by_group: dict[tuple[int, ...], list[tuple[int, int]]] = {}
    for job in jobs:
        by_group.setdefault(job.tables, []).append((job.low, job.high))
    covered = sorted(table for tables in by_group for table in tables)
    assert covered == list(range(len(plan.tables)))  # every table searched, once
    for tables, ranges in by_group.items():
        digit = next(job.digit for job in jobs if job.tables == tables)
        assert digit is not None
        ranges.sort()
        assert ranges[0][0] == 0 and ranges[-1][1] == 1 << digit[1]
        assert all(high == low for (_, high), (low, _) in itertools.pairwise(ranges))
