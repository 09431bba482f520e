"""All near-duplicate pairs and clusters of a fingerprint collection (Manku's batch mode).

The search runs over the permutation tables of a :class:`~simdb.plan.TablePlan`.  Every pair
within ``k`` bits agrees on all leading blocks of at least one table, so it shares that
table's prefix.  For each table the rows are ordered by prefix (an LSD radix sort on
block-aligned 16-bit digits, or one ``np.sort`` of packed keys when the prefix is made of
many narrow blocks), and rows sharing a prefix are compared gap by gap, fully vectorised.

What keeps it fast and bounded:

* **Exact duplicates cost one row.**  The first table pass doubles as a duplicate check;
  when there are duplicates the input is collapsed (one stable argsort) and the search runs
  over distinct fingerprints, so 10,000 identical pages are one row, not 50 million
  comparisons.  Duplicates are expanded only when pairs are emitted: pairs inside a group at
  distance 0, and the cross product of two groups within ``k``.
* **Each pair is reported once without a set of seen pairs.**  A pair is emitted only by the
  first table (in plan order) whose leading blocks all agree between the two fingerprints,
  which is decided from their xor alone (see :func:`_claim_rules`).
* **Radix passes are shared.**  Tables whose prefixes end in the same block share the first
  LSD pass, so with 5 blocks and k=3 the 10 tables cost 14 linear-time passes.
* **Output is streamed in blocks.**  :func:`iter_pair_blocks` yields arrays of at most
  ``block_size`` pairs, so memory stays O(N + block) whatever the output size.  A long run of
  rows sharing a prefix is walked one gap at a time: O(run) memory per step, never O(run^2)
  (its time is still O(run^2), as in every prefix-table method).

* **Parallel without moving rows.**  :func:`plan_search_jobs` cuts the search into jobs:
  tables sharing their first radix pass form a group, and a group is cut into ranges of
  that pass's digit, which every table of the group has in its prefix, so rows that could
  pair are always in the same job.  A job searches its rows in sub-shares of about
  :data:`SHARE_ROWS` rows (ranges of the same digit), which keeps the sorts near the CPU
  caches; ``workers`` threads share the sub-shares (numpy releases the GIL in the sorts,
  gathers and ufuncs), and :mod:`simdb.distributed` runs the jobs as Dask tasks.

Clusters (connected components of the "within k bits" graph) come from a vectorised
union-find, :class:`ComponentLabeler`, which accepts pairs block by block;
:func:`cluster_labels` runs it over distinct fingerprints without expanding duplicates.
"""

from __future__ import annotations

import dataclasses
import functools
import itertools
import math
import os
import queue
import threading
from collections.abc import (
    Callable,
    Collection,
    Generator,
    Iterable,
    Iterator,
    Sequence,
)
from dataclasses import dataclass
from itertools import combinations
from typing import Any, cast

import numpy as np
import numpy.typing as npt

from simdb.arrays import compact
from simdb.errors import DistanceTooLargeError, InvalidInputError
from simdb.heap import retained_heap
from simdb.plan import BITS, Table, TablePlan
from simdb.validation import check_distance, check_int, check_workers, fingerprint_array

__all__ = [
    "DEFAULT_BLOCK_SIZE",
    "ComponentLabeler",
    "SearchJob",
    "as_fingerprint_array",
    "cluster_labels",
    "clusters_from_labels",
    "clusters_from_pairs",
    "connected_components",
    "find_all",
    "find_clusters",
    "iter_clusters",
    "iter_job_edge_blocks",
    "iter_job_pair_blocks",
    "iter_pair_blocks",
    "iter_table_pair_blocks",
    "plan_search_jobs",
    "resolve_workers",
]

UInt64Array = npt.NDArray[np.uint64]
Int64Array = npt.NDArray[np.int64]
UInt8Array = npt.NDArray[np.uint8]
PairBlock = tuple[Int64Array, Int64Array, UInt8Array]

#: Largest number of pairs in one block yielded by :func:`iter_pair_blocks` (about 17 MB).
DEFAULT_BLOCK_SIZE = 1 << 20

_FULL64 = (1 << BITS) - 1


# --------------------------------------------------------------------------------------
# Input validation
# --------------------------------------------------------------------------------------


#: The one fingerprint-array validator, kept under its historical name here.
as_fingerprint_array = fingerprint_array


def _check_distance(k: int | None, plan: TablePlan) -> int:
    """Return the search distance: ``plan.k`` when ``k`` is None, else ``k`` if 0 <= k <= plan.k."""
    if k is None:
        return plan.k
    k = check_distance(k)
    if k > plan.k:
        raise DistanceTooLargeError(
            f"k={k} exceeds the plan's largest distance {plan.k}",
            f"build a plan with TablePlan.create(k={k}) to search that far",
            value=k,
            largest=plan.k,
        )
    return k


# --------------------------------------------------------------------------------------
# Collapsing exact duplicates
# --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Collapsed:
    """Distinct fingerprints and how they map back to input positions.

    ``uniques`` is sorted ascending.  ``members`` lists input positions grouped by distinct
    value (in ``uniques`` order) and ascending inside each group; group ``g`` is
    ``members[starts[g]:starts[g] + counts[g]]``.  Without duplicates ``starts`` is
    ``arange(U)`` and ``counts`` is all ones.
    """

    uniques: UInt64Array
    members: Int64Array
    starts: Int64Array
    counts: Int64Array
    has_duplicates: bool

    @property
    def first_member(self) -> Int64Array:
        """Smallest input position holding each distinct value."""
        return self.members[self.starts] if self.has_duplicates else self.members


def _collapse(fingerprints: UInt64Array) -> _Collapsed:
    """Group equal fingerprints: one stable argsort, O(n log n) time, O(n) memory."""
    # Stable, so positions inside a group stay ascending: the first-added comes first.
    order = np.argsort(fingerprints, kind="stable")
    ordered = fingerprints[order]
    if ordered.size < 2:
        starts = np.arange(ordered.size, dtype=np.int64)
        return _Collapsed(ordered, order, starts, np.ones(ordered.size, dtype=np.int64), False)
    new_value = np.empty(ordered.size, dtype=bool)
    new_value[0] = True
    np.not_equal(ordered[1:], ordered[:-1], out=new_value[1:])
    if new_value.all():
        starts = np.arange(ordered.size, dtype=np.int64)
        return _Collapsed(ordered, order, starts, np.ones(ordered.size, dtype=np.int64), False)
    starts = np.flatnonzero(new_value)
    counts = np.diff(np.append(starts, ordered.size))
    return _Collapsed(ordered[starts], order, starts, counts, True)


# --------------------------------------------------------------------------------------
# Which table reports a pair
# --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class _ClaimRule:
    """When table ``table.index`` is the one that reports a pair with xor ``x``.

    The table reports it iff ``x & leading_mask == 0`` (all its leading blocks agree) and
    ``x & mask != 0`` for every mask in ``conflicts`` (no earlier table had all its leading
    blocks agree).  ``min_blocks_differing`` is a lower bound on how many blocks differ in any
    pair the table reports; when it exceeds the search distance the table can be skipped.
    """

    table: Table
    leading_mask: int
    conflicts: tuple[int, ...]
    min_blocks_differing: int


def _block_masks(plan: TablePlan) -> list[int]:
    """Mask of each block in original bit positions, most significant block first."""
    masks, top = [], plan.bits
    for width in plan.widths:
        top -= width
        masks.append(((1 << width) - 1) << top)
    return masks


def _claim_rules(plan: TablePlan, assume_lexicographic: bool | None = None) -> list[_ClaimRule]:
    """Build the rule that assigns every pair to exactly one table.

    A pair is claimed by the first table whose leading blocks all agree.  From table t's
    view that means: for each earlier table t', some block of t' that is not leading in t
    differs.  Those "conflict" block sets are reduced to the inclusion-minimal ones.  For the
    plan's lexicographic order of leading-block combinations the minimal sets are exactly
    the singletons {c} for non-leading blocks c before t's last leading block, which is
    computed directly in O(blocks) per table; any other table order falls back to the general
    O(tables^2) reduction.  ``assume_lexicographic`` forces a path (for tests).
    """
    masks = _block_masks(plan)
    leading_sets = [t.leading_blocks for t in plan.tables]
    if assume_lexicographic is None:
        width = plan.blocks - plan.k
        assume_lexicographic = leading_sets == list(combinations(range(plan.blocks), width))
    rules = []
    for position, table in enumerate(plan.tables):
        leading = set(table.leading_blocks)
        if assume_lexicographic:
            last = max(table.leading_blocks)
            minimal = [frozenset([c]) for c in range(last) if c not in leading]
        else:
            candidates = {frozenset(earlier) - leading for earlier in leading_sets[:position]}
            minimal = [s for s in candidates if not any(o < s for o in candidates)]
        # Greedy disjoint packing: each packed set needs its own differing block, so its
        # size is a sound lower bound on the blocks that differ.
        used: set[int] = set()
        packed = 0
        for conflict in sorted(minimal, key=len):
            if not conflict & used:
                used |= conflict
                packed += 1
        rules.append(
            _ClaimRule(
                table=table,
                leading_mask=_or_masks(masks, table.leading_blocks),
                conflicts=tuple(sorted(_or_masks(masks, c) for c in minimal)),
                min_blocks_differing=packed,
            )
        )
    return rules


@functools.lru_cache(maxsize=64)
def _cached_claim_rules(plan: TablePlan) -> tuple[_ClaimRule, ...]:
    """:func:`_claim_rules` memoised per plan: the distributed search asks once per partition."""
    return tuple(_claim_rules(plan))


def _or_masks(masks: Sequence[int], blocks: Iterable[int]) -> int:
    out = 0
    for block in blocks:
        out |= masks[block]
    return out


# --------------------------------------------------------------------------------------
# The search over distinct fingerprints
# --------------------------------------------------------------------------------------


#: A table prefix is radix-sorted (stable argsorts of 16-bit digits, which numpy does in
#: linear time) when it splits into at most this many block-aligned digits; otherwise the
#: rows are ordered by one comparison sort of packed keys.
_RADIX_DIGIT_BITS = 16
_MAX_RADIX_DIGITS = 3

Digit = tuple[int, int]  # (source shift, width) of a block-aligned slice of the fingerprint


def _radix_digits(table: Table) -> list[Digit] | None:
    """The table prefix as block-aligned digits of at most 16 bits, least significant first,
    or None when that takes more than ``_MAX_RADIX_DIGITS`` passes (many narrow blocks)."""
    prefix_low = BITS - table.leading_bits
    leading = sorted((target, source, width) for source, width, target in table.moves if target >= prefix_low)
    digits = []
    for _, source, width in leading:
        for low in range(0, width, _RADIX_DIGIT_BITS):
            digits.append((source + low, min(_RADIX_DIGIT_BITS, width - low)))
    return digits if len(digits) <= _MAX_RADIX_DIGITS else None


def _digit_column(values: UInt64Array, digit: Digit) -> npt.NDArray[np.uint16]:
    """The ``digit`` slice (at most 16 bits) of every value, as uint16.  O(N)."""
    source, width = digit
    shifted = values >> np.uint64(source)
    shifted &= np.uint64((1 << width) - 1)
    return shifted.astype(np.uint16)


@dataclass(frozen=True)
class _RowOrder:
    """Rows in table-prefix order, kept as ``base[step]`` without composing the two.

    Composing is a random gather over all N rows; the walk only needs the rows of the
    candidates, so they are looked up through both arrays on demand.
    """

    base: Int64Array | None
    step: Int64Array

    @property
    def size(self) -> int:
        return int(self.step.size)

    def __getitem__(self, positions: Int64Array) -> Int64Array:
        rows = self.step[positions]
        return rows if self.base is None else self.base[rows]

    def full(self) -> Int64Array:
        """All rows in order (one gather of N)."""
        return self.step if self.base is None else self.base[self.step]


class _RadixOrders:
    """Row orders by table prefix via LSD radix passes, sharing passes between tables.

    Tables are visited so that consecutive ones share their least significant digits (for
    k=3, 5 blocks: every table ending in the same block); the orders of those shared digits
    are kept on a stack, each with the digits so far packed into one sorted prefix column.
    A table then costs one pass for its last digit: a gather of that digit through the
    shared order, one stable argsort of N uint16 (linear-time radix sort in numpy), and one
    gather of the packed prefixes to compare neighbours.  Memory: each digit column once
    (2 bytes per row) plus, per stacked level, an order (8 bytes per row) and a prefix column
    (4 or 8 bytes per row); at most ``_MAX_RADIX_DIGITS - 1`` levels.
    """

    def __init__(self, values: UInt64Array, sorted_by: Digit | None = None) -> None:
        self.values = values
        #: A digit the rows are already in stable order of: its pass is free.
        self.sorted_by = sorted_by
        self.columns: dict[Digit, npt.NDArray[np.uint16]] = {}
        # (digit, rows sorted by the digits so far or None when in input order, their packed
        # prefix in that order, bits)
        self.stack: list[tuple[Digit, Int64Array | None, npt.NDArray[Any], int]] = []

    def column(self, digit: Digit) -> npt.NDArray[np.uint16]:
        """The digit of every row, as uint16 (cached)."""
        if digit not in self.columns:
            self.columns[digit] = _digit_column(self.values, digit)
        return self.columns[digit]

    def _pass(self, digit: Digit) -> tuple[Int64Array | None, Int64Array | None, npt.NDArray[Any], int]:
        """Sort by ``digit`` on top of the stack: (step, base, packed prefix in base order,
        bits); a None step or base is the identity."""
        column = self.column(digit)
        if not self.stack:
            step = None if digit == self.sorted_by else np.argsort(column, kind="stable")
            return step, None, column, digit[1]
        _, base, prefix, bits = self.stack[-1]
        in_base = column if base is None else column[base]
        total = bits + digit[1]
        dtype = np.uint32 if total <= 32 else np.uint64
        packed: npt.NDArray[np.unsignedinteger[Any]] = in_base.astype(dtype)
        packed <<= dtype(bits)
        packed |= prefix
        return np.argsort(in_base, kind="stable"), base, packed, total

    def order(self, digits: list[Digit]) -> tuple[_RowOrder, npt.NDArray[np.bool_]]:
        """Rows sorted by the digits (most significant last), and ``same[p]``: sorted rows
        p and p+1 agree on every digit."""
        # The last digit is never shared (no two tables have the same prefix), so it is
        # never composed or stacked.
        limit = len(digits) - 1
        shared = 0
        while shared < min(len(self.stack), limit) and self.stack[shared][0] == digits[shared]:
            shared += 1
        del self.stack[shared:]
        for digit in digits[shared:limit]:
            step, base, packed, bits = self._pass(digit)
            if step is None:
                self.stack.append((digit, base, packed, bits))
            else:
                self.stack.append((digit, step if base is None else base[step], packed[step], bits))
        step, base, packed, _ = self._pass(digits[-1])
        if step is None:  # rows already in this order: no gather of the packed prefixes
            return _RowOrder(base, np.arange(packed.size)), packed[1:] == packed[:-1]
        ordered = packed[step]
        return _RowOrder(base, step), ordered[1:] == ordered[:-1]


def _packed_order(
    values: UInt64Array, table: Table, index_bits: int, presorted: bool
) -> tuple[Int64Array, npt.NDArray[np.bool_]]:
    """Row order by table prefix via one ``np.sort`` of packed keys, and ``same[p]``: sorted
    rows p and p+1 share the (possibly coarsened) prefix.  O(N log N); O(N) extra memory.

    The key holds the table prefix in the top bits and the row number in the low
    ``index_bits`` bits, so a plain value sort (faster than argsort) carries the permutation.
    When both do not fit, the lowest prefix bits are dropped: groups get coarser (more
    candidates), never finer, so nothing is missed; the caller re-checks the leading blocks.
    """
    prefix_low = BITS - table.leading_bits
    keys = np.zeros(values.size, dtype=np.uint64)
    scratch = np.empty_like(values)
    for source, width, target in table.moves:
        if target < prefix_low:
            continue  # not a leading block: not part of the prefix
        block_mask = np.uint64(((1 << width) - 1) << target)
        if source > target:
            np.right_shift(values, np.uint64(source - target), out=scratch)
        elif source < target:
            np.left_shift(values, np.uint64(target - source), out=scratch)
        else:
            np.copyto(scratch, values)
        scratch &= block_mask
        keys |= scratch
    del scratch
    if prefix_low < index_bits:
        keys &= np.uint64(_FULL64 ^ ((1 << index_bits) - 1))
    keys |= np.arange(values.size, dtype=np.uint64)
    if not presorted:
        keys.sort()
    same = np.bitwise_xor(keys[1:], keys[:-1]) < np.uint64(1 << index_bits)
    keys &= np.uint64((1 << index_bits) - 1)
    return keys.view(np.int64), same


def _table_passes(
    values: UInt64Array,
    plan: TablePlan,
    k: int,
    values_sorted: bool,
    tables: Collection[int] | None = None,
    sorted_by: Digit | None = None,
) -> Generator[tuple[_ClaimRule, _RowOrder, npt.NDArray[np.bool_], bool], None, None]:
    """For each table that can report a pair within ``k`` bits (only those in ``tables``
    when given), yield ``(rule, order, same, check_leading)``: rows sorted by table prefix,
    ``same[p]`` when sorted rows p and p+1 share a prefix, and whether the prefix was
    coarsened (so the leading blocks must be re-checked).  ``sorted_by``: a digit the
    values are already in stable order of, whose radix pass is then skipped.  Memory O(N)
    per table."""
    n = values.size
    index_bits = max(1, (n - 1).bit_length())
    rules = [
        rule
        for rule in _cached_claim_rules(plan)
        if rule.min_blocks_differing <= k and (tables is None or rule.table.index in tables)
    ]
    digits = {rule.table.index: _radix_digits(rule.table) for rule in rules}
    # Radix tables first, grouped by shared low digits; the claim rule does not depend on
    # the order in which tables are visited.
    rules.sort(key=lambda rule: (digits[rule.table.index] is None, digits[rule.table.index] or []))
    radix = _RadixOrders(values, sorted_by)
    # Both branches bind ``order``, so a pass's O(N) order is dropped once the next replaces it.
    order: _RowOrder | Int64Array
    for rule in rules:
        table_digits = digits[rule.table.index]
        if table_digits is not None:
            order, same = radix.order(table_digits)
            yield rule, order, same, False
        else:
            presorted = values_sorted and rule.table.leading_blocks == tuple(range(len(rule.table.leading_blocks)))
            order, same = _packed_order(values, rule.table, index_bits, presorted)
            yield rule, _RowOrder(None, order), same, BITS - rule.table.leading_bits < index_bits


def _has_duplicates(values: UInt64Array, order: _RowOrder, same: npt.NDArray[np.bool_], budget: int) -> bool:
    """Whether any two rows hold the same fingerprint, judged from one table pass: equal
    fingerprints share every prefix, so they are among the rows that ``same`` links.  Gives
    up and answers True (the safe answer: the caller then collapses) after ``budget``
    comparisons, so a long run costs no more than O(budget)."""
    active = np.flatnonzero(same)
    gap = 1
    while active.size:
        budget -= active.size
        if budget < 0:
            return True
        if np.any(values[order[active]] == values[order[active + gap]]):
            return True
        active = active[active + gap < same.size]
        active = active[same[active + gap]]
        gap += 1
    return False


def _walk_passes(
    values: UInt64Array,
    passes: Iterable[tuple[_ClaimRule, _RowOrder, npt.NDArray[np.bool_], bool]],
    k: int,
    block_size: int,
) -> Iterator[tuple[Int64Array, Int64Array, UInt8Array]]:
    """Yield (row_a, row_b, distance) for the pairs of distinct rows within ``k`` bits that
    each table pass claims.  O(candidates) time, O(block_size) memory per step."""
    if k == 0:
        return  # distinct fingerprints are at least 1 bit apart
    for rule, order, same, check_leading in passes:
        active = np.flatnonzero(same)
        # With many candidates (clustered data) one gather of the fingerprints in table
        # order makes every later read sequential; with few, gathering per candidate is
        # cheaper than touching all N rows.
        ordered = values[order.full()] if active.size * 8 > order.size else None
        gap = 1
        # Walk gap by gap: at gap g, `active` holds the p whose rows p..p+g share a prefix,
        # so a run of length r costs r-1 steps of at most r rows each.
        while active.size:
            for lo in range(0, active.size, block_size):
                chunk = active[lo : lo + block_size]
                if ordered is not None:
                    xor = ordered[chunk] ^ ordered[chunk + gap]
                else:
                    xor = values[order[chunk]] ^ values[order[chunk + gap]]
                distance = np.bitwise_count(xor)
                keep = distance <= k
                if check_leading:
                    keep &= (xor & np.uint64(rule.leading_mask)) == 0
                for conflict in rule.conflicts:
                    keep &= (xor & np.uint64(conflict)) != 0
                if keep.any():
                    kept = chunk[keep]
                    yield order[kept], order[kept + gap], distance[keep]
            active = active[active + gap < same.size]
            active = active[same[active + gap]]
            gap += 1


def _search_rows(
    array: UInt64Array,
    plan: TablePlan,
    k: int,
    block_size: int,
    tables: Collection[int] | None = None,
    sorted_by: Digit | None = None,
) -> tuple[_Collapsed | None, Iterator[tuple[Int64Array, Int64Array, UInt8Array]]]:
    """Search ``array`` (at least 2 rows), collapsing duplicates only if there are any.

    Returns ``(collapsed, blocks)``.  When the input is duplicate-free, ``collapsed`` is None
    and rows in ``blocks`` are input positions: the first table pass doubles as the duplicate
    check, so distinct input pays no extra sort.  Otherwise rows index
    ``collapsed.uniques``.  ``tables`` restricts the search to those tables (all by default);
    when none of them can report a pair within ``k``, nothing is searched.  ``sorted_by``:
    a digit the rows are already in stable order of (see :func:`_table_passes`).
    """
    passes = _table_passes(array, plan, k, values_sorted=False, tables=tables, sorted_by=sorted_by)
    # Over all tables the first always qualifies (it claims pairs differing in 0 blocks).
    first = next(passes, None)
    if first is None:
        return None, iter(())
    if not _has_duplicates(array, first[1], first[2], budget=4 * array.size + 1024):
        return None, _walk_passes(array, itertools.chain([first], passes), k, block_size)
    del first
    passes.close()
    collapsed = _collapse(array)
    uniques = collapsed.uniques
    passes = _table_passes(uniques, plan, k, values_sorted=True, tables=tables)
    return collapsed, _walk_passes(uniques, passes, k, block_size)


# --------------------------------------------------------------------------------------
# Expanding duplicate groups
# --------------------------------------------------------------------------------------


def _triangle(offsets: Int64Array) -> tuple[Int64Array, Int64Array]:
    """Map offsets o in [0, c(c-1)/2) to pairs (i, j), i < j, with o = j(j-1)/2 + i."""
    j = np.floor((1.0 + np.sqrt(1.0 + 8.0 * offsets.astype(np.float64))) / 2.0).astype(np.int64)
    # Float rounding can be off by one either way for huge offsets: correct it exactly.
    j -= (j * (j - 1) // 2) > offsets
    j += ((j + 1) * j // 2) <= offsets
    return offsets - j * (j - 1) // 2, j


def _within_group_blocks(collapsed: _Collapsed, block_size: int) -> Iterator[PairBlock]:
    """Yield every pair inside each duplicate group, at distance 0.  O(output) time,
    O(groups + block_size) memory."""
    groups = np.flatnonzero(collapsed.counts > 1)
    if not groups.size:
        return
    counts = collapsed.counts[groups]
    per_group = counts * (counts - 1) // 2
    ends = np.cumsum(per_group)
    total = int(ends[-1])
    for lo in range(0, total, block_size):
        offsets = np.arange(lo, min(total, lo + block_size), dtype=np.int64)
        which = np.searchsorted(ends, offsets, side="right")
        i, j = _triangle(offsets - (ends[which] - per_group[which]))
        base = collapsed.starts[groups[which]]
        # Members are ascending inside a group, so i < j gives left < right.
        left = collapsed.members[base + i]
        right = collapsed.members[base + j]
        yield left, right, np.zeros(left.size, dtype=np.uint8)


def _expand_blocks(
    collapsed: _Collapsed, row_a: Int64Array, row_b: Int64Array, distance: UInt8Array, block_size: int
) -> Iterator[PairBlock]:
    """Turn pairs of distinct rows into pairs of input positions (left < right): the cross
    product of the two duplicate groups.  O(output) time, O(input + block_size) memory."""
    if not collapsed.has_duplicates:
        left = collapsed.members[row_a]
        right = collapsed.members[row_b]
        yield np.minimum(left, right), np.maximum(left, right), distance
        return
    count_a = collapsed.counts[row_a]
    count_b = collapsed.counts[row_b]
    # Most pairs join two singletons: map those directly, expand only the rest.
    single = (count_a == 1) & (count_b == 1)
    if single.any():
        left = collapsed.members[collapsed.starts[row_a[single]]]
        right = collapsed.members[collapsed.starts[row_b[single]]]
        yield np.minimum(left, right), np.maximum(left, right), distance[single]
        if single.all():
            return
        multiple = ~single
        row_a, row_b, distance = row_a[multiple], row_b[multiple], distance[multiple]
        count_a, count_b = count_a[multiple], count_b[multiple]
    per_pair = count_a * count_b
    ends = np.cumsum(per_pair)
    total = int(ends[-1])
    for lo in range(0, total, block_size):
        offsets = np.arange(lo, min(total, lo + block_size), dtype=np.int64)
        which = np.searchsorted(ends, offsets, side="right")
        local = offsets - (ends[which] - per_pair[which])
        i, j = np.divmod(local, count_b[which])
        left = collapsed.members[collapsed.starts[row_a[which]] + i]
        right = collapsed.members[collapsed.starts[row_b[which]] + j]
        yield np.minimum(left, right), np.maximum(left, right), distance[which]


# --------------------------------------------------------------------------------------
# Splitting the search into independent jobs (threads here, Dask tasks in simdb.distributed)
# --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class SearchJob:
    """One independent share of an all-pairs search: the pairs that ``tables`` claim among
    the rows whose ``digit`` (a slice ``(shift, width)`` of the fingerprint, at most 16 bits,
    inside a leading block of every one of those tables) lies in ``[low, high)``; every row
    when ``digit`` is None.

    Rows sharing a table prefix agree on that slice, so they fall in the same share: the
    jobs of :func:`plan_search_jobs` together report every pair exactly once, with no
    exchange of rows between them.  ``cost`` is a relative estimate used to balance them.
    """

    tables: tuple[int, ...]
    digit: Digit | None = None
    low: int = 0
    high: int = 0
    cost: float = 1.0


def resolve_workers(workers: Any, name: str = "workers") -> int:
    """``workers`` as a positive int: None means every core (``os.cpu_count()``); at most
    :data:`~simdb.validation.MAX_WORKERS_PER_CORE` per core."""
    if workers is None:
        return max(1, os.cpu_count() or 1)
    return check_workers(workers, name, hint="pass None for one per core")


def plan_search_jobs(
    plan: TablePlan, k: int | None = None, workers: int = 1, *, rows: int | None = None, max_job_rows: int | None = None
) -> list[SearchJob]:
    """Split the search of ``plan`` within ``k`` bits into jobs for ``workers`` parallel
    workers, largest first.  O(tables).

    Tables whose radix sort starts with the same digit share that pass, so they form one
    group (for k=3, 5 blocks: groups of 1, 2, 3 and 4 tables), and each group is a job over
    a range of that digit's values, every value for a whole group.  When ``workers`` > 1,
    groups are cut into ranges, about ``2 * workers`` jobs in all, so that a greedy
    assignment keeps every worker busy; each such job costs one extra O(N) pass to pick its
    rows.  Given the input's ``rows`` and ``max_job_rows``, groups are also cut so that a
    job holds about ``max_job_rows`` rows at most (for uniform fingerprints).  Inside a job
    the rows are searched in sub-shares of about :data:`SHARE_ROWS` (see
    :func:`iter_job_pair_blocks`).  A job's ``cost`` is :func:`_group_cost`'s share, which
    counts the candidates of each table when ``rows`` is given.
    """
    distance_limit = _check_distance(k, plan)
    rules = [rule for rule in _cached_claim_rules(plan) if rule.min_blocks_differing <= distance_limit]
    min_shares = 1 if rows is None or max_job_rows is None else -(-rows // max(1, max_job_rows))
    groups: dict[Any, list[int]] = {}
    filters: dict[Any, Digit] = {}
    for rule in rules:
        digits = _radix_digits(rule.table)
        if digits is not None:
            key: Any = digits[0]
            filters[key] = digits[0]
        else:
            key = ("packed", rule.table.index)
            # The block moved to the top of the word is a leading block.
            _, source, width = max((target, source, width) for source, width, target in rule.table.moves)
            top = min(width, _RADIX_DIGIT_BITS)
            filters[key] = (source + width - top, top)
        groups.setdefault(key, []).append(rule.table.index)
    costs = {key: _group_cost(plan, tables, rows) for key, tables in groups.items()}
    unit = sum(costs.values()) / (2 * workers) if workers > 1 else math.inf
    jobs = []
    for key, tables in groups.items():
        digit = filters[key]
        values = 1 << digit[1]
        shares = min(values, max(1, min_shares, round(costs[key] / unit)))  # at least one job: 0 rows too
        edges = [values * share // shares for share in range(shares + 1)]
        for low, high in itertools.pairwise(edges):
            jobs.append(SearchJob(tuple(tables), digit, low, high, costs[key] / shares))
    return sorted(jobs, key=lambda job: -job.cost)


def _group_cost(plan: TablePlan, tables: Sequence[int], rows: int | None) -> float:
    """The relative cost of searching ``tables`` together over ``rows`` uniform fingerprints
    (0 when unknown): 4 for the pass they share (picking, sorting and gathering the job's
    rows), and per table 1 plus its expected candidates per row, ``rows / 2**leading_bits``.
    Fitted to one-thread runs of the four groups of k=3, 5 blocks on 2 cores, whose tables of
    25 leading bits cost more than those of 26, the more so as rows grow (per group: 20M
    random 1.11, 0.81, 0.66 and 0.52 s; 100M 10.9-13.2, 6.0-6.3, 4.8-5.0 and 3.6-3.8 s):
    within about 5% of each group's time at both sizes.  Not on clustered input, where the
    candidates come from near duplicates and the four groups cost about alike (3.3-3.6 s
    each at 20M)."""
    expected = 0 if rows is None else rows
    return 4.0 + sum(1.0 + expected / (1 << plan.tables[table].leading_bits) for table in tables)


def _cut_job(job: SearchJob, cost: float, at_least_one_value: bool) -> tuple[SearchJob | None, SearchJob | None]:
    """``(head, rest)``: the lowest digit values of ``job``, as many as cost nearest to
    ``cost`` (costs spread evenly over the digit's values, as for uniform fingerprints), and
    the others.
    ``(job, None)`` when the whole job fits or it has no digit to cut; ``(None, job)`` when
    not one value fits, unless ``at_least_one_value``."""
    if job.cost <= cost or job.digit is None:
        return job, None
    span = job.high - job.low
    cut = job.low + round(span * cost / job.cost)
    if at_least_one_value:
        cut = max(cut, job.low + 1)
    if cut <= job.low:
        return None, job
    if cut >= job.high:
        return job, None
    share = (cut - job.low) / span
    return (
        dataclasses.replace(job, high=cut, cost=job.cost * share),
        dataclasses.replace(job, low=cut, cost=job.cost * (1 - share)),
    )


def bundle_jobs(jobs: Sequence[SearchJob], count: int) -> list[list[SearchJob]]:
    """The jobs dealt into at most ``count`` bundles of equal cost, for a scheduler that does
    not place tasks by size (one bundle per worker).  McNaughton's wrap-around rule: the jobs,
    largest first, fill one bundle after the other up to ``total / count``, and the job that
    overflows a bundle is cut there by its digit, the rest going on to the next.  At most
    ``count - 1`` jobs are cut, each cut costs its two parts a pass over every row, and the
    bundles differ by at most one digit value's cost (a job without a digit is not cut, and
    may overflow its bundle).  The bundles are as even as the costs are right: with those
    of :func:`plan_search_jobs`, one thread took 12.4 and 13.1 s for two bundles of 100M
    random fingerprints, where a greedy deal of whole jobs gave 14.0 and 10.4 s; on 20M
    clustered ones, 5.9 and 7.8 s against 7.1 and 7.4 s.  O(jobs + count)."""
    target = sum(job.cost for job in jobs) / max(1, count)
    bundles: list[list[SearchJob]] = []
    bundle: list[SearchJob] = []
    dealt = 0.0
    for job in sorted(jobs, key=lambda job: -job.cost):
        rest: SearchJob | None = job
        while rest is not None:
            if len(bundles) == count - 1:  # the last bundle takes what is left
                bundle.append(rest)
                break
            # This bundle ends at its share of the running total, so that rounding a cut to
            # a digit value never accumulates from bundle to bundle.
            bundle_end = target * (len(bundles) + 1)
            head, rest = _cut_job(rest, bundle_end - dealt, at_least_one_value=not bundle)
            if head is not None:
                bundle.append(head)
                dealt += head.cost
            if rest is not None or dealt >= bundle_end:
                bundles.append(bundle)
                bundle = []
    if bundle:
        bundles.append(bundle)
    return bundles


#: Rows searched at once inside a job.  Searching a large input in sub-shares of about this
#: many rows (by ranges of the job's digit) keeps the sorts' and gathers' working set (a few
#: arrays of 8 bytes per row: 512 KiB each) inside a core's L2 cache, and small enough for
#: the allocator to reuse freed blocks rather than map and fault in fresh pages.  Measured
#: on 20M random fingerprints on 2 cores, one thread: 3.4-4.0 s for the whole search,
#: against 6.5-7.4 s with sub-shares of 1M rows (615k page faults and 2.2 s of system time,
#: against 10k and 0.9 s); 256k rows took 4.3 s, 32k 4.0-4.3 s.  20M clustered (65.6M
#: pairs): 15 s against 21 s; 1M random: 0.10 s against 0.16 s.
SHARE_ROWS = 1 << 16


#: Rows whose digits a job picks at once: the temporaries stay at 8 MiB whatever the input.
_PICK_SLICE = 1 << 20


def _packed_job_rows(
    values: UInt64Array, job: SearchJob, digit: Digit, position_bits: int, picked: UInt64Array
) -> UInt64Array:
    """``digit << position_bits | position`` for each of the job's rows (those whose digit is
    in ``[job.low, job.high)``), in input order, written from the start of ``picked`` (one
    word per input row).  Built slice by slice, so that no array of every row's digit, mask
    or position is ever made.  For a job over part of the digit's range ``picked`` is
    written only as far as the job's rows reach: pages never written are never mapped in,
    so it costs 8 bytes per job row, not per input row, and nothing is copied (joining
    per-slice pieces instead cost a second array of the job's rows: 1.4 s for a job of 87M
    rows of 100M).  O(N)."""
    source, width = digit
    n = values.size
    whole = job.low == 0 and job.high >= 1 << width
    digits = np.empty(min(n, _PICK_SLICE), dtype=np.uint64)
    packed = picked[:n]
    filled = 0
    for start in range(0, n, _PICK_SLICE):
        chunk = values[start : start + _PICK_SLICE]
        chunk_digits = digits[: chunk.size]
        np.right_shift(chunk, np.uint64(source), out=chunk_digits)
        chunk_digits &= np.uint64((1 << width) - 1)
        if whole:
            kept_digits = chunk_digits
            positions = np.arange(start, start + chunk.size, dtype=np.uint64)
        else:
            kept = np.flatnonzero((chunk_digits >= job.low) & (chunk_digits < job.high))
            kept_digits = chunk_digits[kept]
            positions = (kept + start).view(np.uint64)
        piece = packed[filled : filled + kept_digits.size]
        np.left_shift(kept_digits, np.uint64(position_bits), out=piece)
        piece |= positions
        filled += piece.size
    return packed[:filled]


def _job_shares(values: UInt64Array, job: SearchJob, picked: UInt64Array | None = None) -> list[Int64Array | None]:
    """The sub-shares of one job: for each, the positions in ``values`` of its rows in
    stable order of the job's digit (so that the search skips that radix pass, see
    :func:`_share_search`), or None for all rows when the job has no digit.  Rows sharing a
    prefix share the job's digit, and sub-shares are ranges of its values, so they never
    split a run.  The sub-shares are views of ``picked`` (an array of one word per row in
    ``values``, made when None), which must outlive them.  Cost: O(N) to pick the job's
    rows, one in-place sort of their packed (digit, position) words; memory 8 bytes per job
    row, and nothing per input row."""
    if job.digit is None:
        return [None]
    position_bits = max(1, (values.size - 1).bit_length())
    assert job.digit[1] + position_bits <= 64  # a 16-bit digit beside up to 2**48 positions
    if picked is None:
        picked = np.empty(values.size, dtype=np.uint64)
    packed = _packed_job_rows(values, job, job.digit, position_bits, picked)
    packed.sort()
    splits = max(1, min(job.high - job.low, -(-packed.size // SHARE_ROWS)))
    inner_edges = [job.low + (job.high - job.low) * part // splits for part in range(1, splits)]
    # A digit's words start at digit << position_bits: one bisect per inner edge, in place.
    starts = np.searchsorted(packed, np.array(inner_edges, dtype=np.uint64) << np.uint64(position_bits))
    bounds = [0, *starts.tolist(), packed.size]
    packed &= np.uint64((1 << position_bits) - 1)
    order = packed.view(np.int64)
    return [order[start:stop] for start, stop in itertools.pairwise(bounds) if stop > start]


def _placed(rows: Int64Array | None, positions: Int64Array) -> Int64Array:
    return positions if rows is None else rows[positions]


def _placed_pair(rows: Int64Array | None, row_a: Int64Array, row_b: Int64Array) -> tuple[Int64Array, Int64Array]:
    """Both rows as positions, smaller first."""
    left, right = _placed(rows, row_a), _placed(rows, row_b)
    return np.minimum(left, right), np.maximum(left, right)


def _share_search(
    values: UInt64Array, plan: TablePlan, k: int, job: SearchJob, rows: Int64Array | None, block_size: int
) -> tuple[_Collapsed | None, Iterator[tuple[Int64Array, Int64Array, UInt8Array]]]:
    """Search one sub-share's rows, which :func:`_job_shares` gives in order of the job's
    digit: the radix pass of that digit, shared by the job's tables, costs nothing."""
    chosen = values if rows is None else values[rows]
    if chosen.size < 2:
        return None, iter(())
    return _search_rows(chosen, plan, k, block_size, tables=job.tables, sorted_by=job.digit)


def _share_pair_blocks(
    values: UInt64Array, plan: TablePlan, k: int, job: SearchJob, rows: Int64Array | None, block_size: int
) -> Iterator[PairBlock]:
    """The pairs the job's tables claim among one sub-share's rows, as positions."""
    collapsed, blocks = _share_search(values, plan, k, job, rows, block_size)
    if collapsed is None:
        for row_a, row_b, distance in blocks:
            yield *_placed_pair(rows, row_a, row_b), distance
        return
    if 0 in job.tables:  # equal fingerprints agree on every block: table 0 reports them
        for left, right, distance in _within_group_blocks(collapsed, block_size):
            yield *_placed_pair(rows, left, right), distance
    for row_a, row_b, distance in blocks:
        for left, right, expanded in _expand_blocks(collapsed, row_a, row_b, distance, block_size):
            yield *_placed_pair(rows, left, right), expanded


def _share_edge_blocks(
    values: UInt64Array, plan: TablePlan, k: int, job: SearchJob, rows: Int64Array | None, block_size: int
) -> Iterator[tuple[Int64Array, Int64Array]]:
    """Edges among one sub-share's rows with the components of its pairs (see
    :func:`iter_job_edge_blocks`)."""
    collapsed, blocks = _share_search(values, plan, k, job, rows, block_size)
    if collapsed is None:
        for row_a, row_b, _ in blocks:
            yield _placed(rows, row_a), _placed(rows, row_b)
        return
    first = collapsed.first_member
    if 0 in job.tables:
        # Link every member of a duplicate group to its first member (a star, not a clique).
        repeated = collapsed.counts > 1
        groups = np.repeat(np.arange(collapsed.counts.size), collapsed.counts)
        in_repeated = repeated[groups]
        yield _placed(rows, collapsed.members[in_repeated]), _placed(rows, first[groups[in_repeated]])
    for row_a, row_b, _ in blocks:
        yield _placed(rows, first[row_a]), _placed(rows, first[row_b])


#: What a sub-share yields: pair blocks or edge blocks.
ShareWork = Callable[[UInt64Array, TablePlan, int, SearchJob, "Int64Array | None", int], Iterator[Any]]


def _job_pair_blocks(
    values: UInt64Array, plan: TablePlan, k: int, job: SearchJob, block_size: int
) -> Iterator[PairBlock]:
    """The generator behind :func:`iter_job_pair_blocks` (arguments already validated)."""
    for rows in _job_shares(values, job):
        yield from _share_pair_blocks(values, plan, k, job, rows, block_size)


def _job_edge_blocks(
    values: UInt64Array, plan: TablePlan, k: int, job: SearchJob, block_size: int
) -> Iterator[tuple[Int64Array, Int64Array]]:
    """The generator behind :func:`iter_job_edge_blocks`."""
    for rows in _job_shares(values, job):
        yield from _share_edge_blocks(values, plan, k, job, rows, block_size)


def _check_job(plan: TablePlan, job: Any) -> SearchJob:
    if not isinstance(job, SearchJob):
        raise InvalidInputError(f"job must be a SearchJob, not {type(job).__name__}", "use plan_search_jobs()")
    if any(not 0 <= table < len(plan.tables) for table in job.tables):
        raise InvalidInputError(f"job tables {job.tables} are not table numbers of the plan")
    return job


def iter_job_pair_blocks(
    fingerprints: UInt64Array,
    plan: TablePlan,
    job: SearchJob,
    k: int | None = None,
    *,
    block_size: int = DEFAULT_BLOCK_SIZE,
) -> Iterator[PairBlock]:
    """The pairs one job of :func:`plan_search_jobs` reports, as blocks ``(left, right,
    distance)`` of positions into ``fingerprints`` (left < right), duplicates expanded as
    :func:`iter_pair_blocks` does.  Over all jobs of one plan: each pair exactly once.

    Cost: one O(N) pass to pick the job's rows, then the search of its tables over them
    (plus one argsort of them when they hold duplicates).  Memory O(N + block_size).
    """
    array = as_fingerprint_array(fingerprints)
    distance_limit = _check_distance(k, plan)
    return _job_pair_blocks(array, plan, distance_limit, _check_job(plan, job), block_size)


def iter_job_edge_blocks(
    fingerprints: UInt64Array,
    plan: TablePlan,
    job: SearchJob,
    k: int | None = None,
    *,
    block_size: int = DEFAULT_BLOCK_SIZE,
) -> Iterator[tuple[Int64Array, Int64Array]]:
    """Edges ``(a, b)`` (positions into ``fingerprints``) whose connected components over all
    jobs are those of the "within k bits" graph, without expanding duplicates: a pair of
    distinct values links their first positions, and the job holding table 0 links each
    member of a duplicate group to the group's first position.  Cost as
    :func:`iter_job_pair_blocks` without the expansion."""
    array = as_fingerprint_array(fingerprints)
    distance_limit = _check_distance(k, plan)
    return _job_edge_blocks(array, plan, distance_limit, _check_job(plan, job), block_size)


_Item = Any
_DONE = object()


@dataclass(frozen=True)
class _Failure:
    error: BaseException


@dataclass
class _Ticket:
    """A cut job's sub-shares not yet searched, and the array they are views of."""

    unsearched: int
    picked: UInt64Array


def _run_jobs(
    values: UInt64Array,
    plan: TablePlan,
    k: int,
    jobs: Sequence[SearchJob],
    work: ShareWork,
    block_size: int,
    workers: int,
) -> Iterator[_Item]:
    """Yield everything ``work`` yields for every sub-share of every job, on ``workers``
    threads.  A thread that finds no sub-share waiting cuts the next job (largest first)
    into its sub-shares, which any thread then takes: the threads stay balanced at the
    grain of a sub-share, and a job's rows are picked once.  numpy's sorts, gathers and
    ufuncs release the GIL, so the threads search in parallel.  Results pass through a
    bounded queue, so memory stays O(workers * block) beyond the jobs being searched; an
    exception in a thread is raised here, and closing the iterator stops the threads.  In a
    process with fixed malloc thresholds (a Dask worker), freed memory stays in the heap
    until the search ends (:func:`simdb.heap.retained_heap`).  The arrays that pick a job's
    rows (one word per input row) pass from a finished job to the next: a fresh one's pages
    are faulted in again, which cost 0.3-0.4 s of system time in a one-thread search of 20M
    random fingerprints (3.4 s in all)."""
    with retained_heap():
        pending_jobs = sorted(jobs, key=lambda job: -job.cost)
        # np.empty maps pages only where a job writes them.
        if workers <= 1:
            picked = np.empty(values.size, dtype=np.uint64)
            for job in pending_jobs:
                for rows in _job_shares(values, job, picked):
                    yield from work(values, plan, k, job, rows, block_size)
            return
        shares: list[tuple[SearchJob, Int64Array | None, _Ticket]] = []
        free_picked: list[UInt64Array] = []
        lock = threading.Lock()
        results: queue.Queue[_Item] = queue.Queue(maxsize=4 * workers)
        stop = threading.Event()

        def put(item: _Item) -> bool:
            while not stop.is_set():
                try:
                    results.put(item, timeout=0.05)
                    return True
                except queue.Full:
                    continue
            return False

        def next_share() -> tuple[SearchJob, Int64Array | None, _Ticket] | None:
            while True:
                with lock:
                    if shares:
                        return shares.pop()
                    if not pending_jobs:
                        return None
                    job = pending_jobs.pop(0)
                    picked = free_picked.pop() if free_picked else np.empty(values.size, dtype=np.uint64)
                cut = _job_shares(values, job, picked)
                ticket = _Ticket(len(cut), picked)
                with lock:
                    shares.extend((job, rows, ticket) for rows in reversed(cut))
                    if not cut:
                        free_picked.append(picked)

        def run() -> None:
            try:
                while not stop.is_set():
                    share = next_share()
                    if share is None:
                        break
                    job, rows, ticket = share
                    for item in work(values, plan, k, job, rows, block_size):
                        if not put(item):
                            return
                    with lock:
                        ticket.unsearched -= 1
                        if not ticket.unsearched:
                            free_picked.append(ticket.picked)
            except Exception as error:  # noqa: BLE001 -- handed to the consumer, which re-raises it
                put(_Failure(error))
            finally:
                put(_DONE)

        threads = [threading.Thread(target=run, daemon=True) for _ in range(workers)]
        for thread in threads:
            thread.start()
        try:
            finished = 0
            while finished < len(threads):
                item = results.get()
                if item is _DONE:
                    finished += 1
                elif isinstance(item, _Failure):
                    raise item.error
                else:
                    yield item
        finally:
            stop.set()
            for thread in threads:
                thread.join()


# --------------------------------------------------------------------------------------
# Public search API
# --------------------------------------------------------------------------------------


def iter_pair_blocks(
    fingerprints: UInt64Array,
    plan: TablePlan,
    k: int | None = None,
    *,
    block_size: int = DEFAULT_BLOCK_SIZE,
    workers: int | None = None,
) -> Iterator[PairBlock]:
    """Stream every pair of positions whose fingerprints are within ``k`` bits.

    Yields blocks ``(left, right, distance)``: int64, int64 and uint8 arrays of equal length
    (at most ``block_size``), with ``left < right`` positions into ``fingerprints``.  Every
    unordered pair appears exactly once over all blocks, in no particular order; identical
    fingerprints are included at distance 0.  ``k`` defaults to ``plan.k`` and may be any
    smaller distance (the same tables serve it; tables that cannot report a pair within
    ``k`` are skipped).  Arguments are validated at the call, not at the first ``next()``.

    Cost: per table, a few linear radix passes (or one sort) over the N rows plus
    O(candidates + output), where candidates are the rows sharing a table prefix.  With
    duplicates present, one stable argsort of N first, and the tables run over the distinct
    values only.  Memory: O(N + block_size); the output is never held whole.

    ``workers`` threads share the search (default: every core; see :func:`plan_search_jobs`);
    with more than one, each runs its jobs' tables over its share of the rows, and
    duplicates are collapsed per job.  Memory then O(workers * N / jobs + workers * block).
    """
    array = as_fingerprint_array(fingerprints)
    if not isinstance(plan, TablePlan):
        raise InvalidInputError(f"plan must be a TablePlan, not {type(plan).__name__}", "use TablePlan.create(k)")
    distance_limit = _check_distance(k, plan)
    block_size = check_int("block_size", block_size, minimum=1)
    threads = _threads_for(array.size, workers)
    if threads == 0:
        return _pair_blocks(array, plan, distance_limit, int(block_size))
    # One job per table group: threads balance over sub-shares, so no job needs cutting.
    jobs = plan_search_jobs(plan, distance_limit, 1)
    return _run_jobs(array, plan, distance_limit, jobs, _share_pair_blocks, int(block_size), threads)


#: Below this many rows threads cost more than they save (thread start, per-job passes).
_PARALLEL_MIN_ROWS = 50_000


def _threads_for(rows: int, workers: Any) -> int:
    """Threads to run the jobs of a search of ``rows`` rows on, or 0 for the one-pass search
    over all rows (small inputs: one thread, and no more rows than one sub-share)."""
    threads = resolve_workers(workers)
    if rows < _PARALLEL_MIN_ROWS or (threads == 1 and rows <= SHARE_ROWS):
        return 0
    return threads


def iter_table_pair_blocks(
    fingerprints: UInt64Array,
    plan: TablePlan,
    table: int,
    k: int | None = None,
    *,
    block_size: int = DEFAULT_BLOCK_SIZE,
) -> Iterator[PairBlock]:
    """Stream the pairs of rows that table number ``table`` of ``plan`` claims: rows sharing
    that table's prefix, within ``k`` bits, for which it is the first table (in plan order)
    whose leading blocks all agree.  Run over every table, this yields each pair of distinct
    fingerprints exactly once, which is what lets a distributed search group rows by one
    table's prefix per shuffle and never deduplicate pairs.

    ``fingerprints`` should be distinct (collapse duplicates first): equal values are not
    collapsed here, so a pair of them is reported (at distance 0, by table 0 only) when k > 0
    and not at all when k = 0.  Rows may hold any mix of prefixes.  Yields ``(row_a, row_b, distance)``
    blocks of at most ``block_size``: positions into ``fingerprints`` in no particular
    order inside a pair, and the uint8 distance.

    Cost: one radix sort (or one sort) of the N rows plus O(candidates + output); memory
    O(N + block_size).
    """
    array = as_fingerprint_array(fingerprints)
    if not isinstance(plan, TablePlan):
        raise InvalidInputError(f"plan must be a TablePlan, not {type(plan).__name__}", "use TablePlan.create(k)")
    distance_limit = _check_distance(k, plan)
    table = check_int("table", table, minimum=0, maximum=len(plan.tables) - 1)
    block_size = check_int("block_size", block_size, minimum=1)
    if array.size < 2:
        return iter(())
    passes = _table_passes(array, plan, distance_limit, values_sorted=False, tables=(int(table),))
    return _walk_passes(array, passes, distance_limit, int(block_size))


def _pair_blocks(array: UInt64Array, plan: TablePlan, k: int, block_size: int) -> Iterator[PairBlock]:
    """The generator behind :func:`iter_pair_blocks` (arguments already validated)."""
    if array.size < 2:
        return
    collapsed, blocks = _search_rows(array, plan, k, block_size)
    if collapsed is None:
        for row_a, row_b, distance in blocks:
            yield np.minimum(row_a, row_b), np.maximum(row_a, row_b), distance
        return
    yield from _within_group_blocks(collapsed, block_size)
    for row_a, row_b, distance in blocks:
        yield from _expand_blocks(collapsed, row_a, row_b, distance, block_size)


def find_all(
    fingerprints: Sequence[int] | npt.NDArray[Any],
    k: int = 3,
    blocks: int | None = None,
    *,
    workers: int | None = None,
) -> tuple[Int64Array, UInt8Array]:
    """Every pair of positions in ``fingerprints`` whose fingerprints are within ``k`` bits.

    Returns ``(pairs, distances)``: ``pairs`` is an int64 array of shape (n, 2) with
    ``pairs[:, 0] < pairs[:, 1]``, each unordered pair once, no self-pairs, identical
    fingerprints included; ``distances`` is the uint8 Hamming distance of each pair.  Pairs
    come in no particular order.  ``blocks`` is the plan's block count (default: see
    :func:`simdb.plan.default_blocks`).  ``workers``: threads to use (default every core).

    Cost: see :func:`iter_pair_blocks`; the result is O(output) memory on top.
    """
    array = as_fingerprint_array(fingerprints)
    plan = TablePlan.create(k, blocks)
    lefts, rights, distances = [], [], []
    for left, right, distance in iter_pair_blocks(array, plan, k, workers=workers):
        lefts.append(left)
        rights.append(right)
        distances.append(distance)
    if not lefts:
        return np.zeros((0, 2), dtype=np.int64), np.zeros(0, dtype=np.uint8)
    pairs = np.empty((sum(a.size for a in lefts), 2), dtype=np.int64)
    pairs[:, 0] = np.concatenate(lefts)
    pairs[:, 1] = np.concatenate(rights)
    return pairs, np.concatenate(distances)


# --------------------------------------------------------------------------------------
# Connected components
# --------------------------------------------------------------------------------------


class ComponentLabeler:
    """Union-find over ``n`` nodes, fed edges a block at a time, fully vectorised.

    Each node's parent is never larger than the node, so every component's root is its
    smallest index, which :meth:`labels` returns per node.  With positions in insertion order,
    that is the first-added member.

    Cost: :meth:`add` is O(E log E) for a block of E edges (O(n) from n / 2 edges that join
    distinct components) plus a root chase whose depth is small in practice (endpoints are
    path-compressed); :meth:`labels` is O(n log depth).
    Memory: one int64 per node plus O(E).
    """

    def __init__(self, n: int) -> None:
        n = check_int("n", n, minimum=0)
        self.n = int(n)
        self._parent = np.arange(self.n, dtype=np.int64)

    def _find(self, nodes: Int64Array) -> Int64Array:
        """Roots of ``nodes``; compresses their paths.  O(len(nodes) * depth)."""
        roots = self._parent[nodes]
        while True:
            above = self._parent[roots]
            if np.array_equal(above, roots):
                break
            roots = above
        self._parent[nodes] = roots
        return roots

    def add(self, left: npt.ArrayLike, right: npt.ArrayLike) -> None:
        """Join ``left[i]`` and ``right[i]`` for every i.  Both are int arrays in [0, n)."""
        left = np.asarray(left, dtype=np.int64).ravel()
        right = np.asarray(right, dtype=np.int64).ravel()
        if left.shape != right.shape:
            raise InvalidInputError(f"left and right differ in length ({left.size} vs {right.size})")
        if not left.size:
            return
        low = min(int(left.min()), int(right.min()))
        high = max(int(left.max()), int(right.max()))
        if low < 0 or high >= self.n:
            raise InvalidInputError(f"edge endpoint {low if low < 0 else high} is outside [0, {self.n})")
        root_left = self._find(left)
        root_right = self._find(right)
        differ = root_left != root_right
        if not differ.any():
            return
        root_left, root_right = root_left[differ], root_right[differ]
        if 2 * root_left.size >= self.n:
            # A block with about as many endpoints as there are nodes: hook and jump over
            # every node, with no renumbering (whose sort would cost more than it saves:
            # merging two forests of 8M and 13M nodes, 2.5-3.5 s against 4.4-4.9 s).  Nodes
            # outside the block keep their own label, which is not below their parent.
            np.minimum(self._parent, _hook_and_jump(self.n, root_left, root_right), out=self._parent)
            return
        # Solve the block on a compact numbering of the roots it touches (O(E), not O(n)).
        nodes, local = compact(np.concatenate([root_left, root_right]))
        local_left, local_right = local[: root_left.size], local[root_left.size :]
        label = _hook_and_jump(nodes.size, local_left, local_right)
        # `nodes` is ascending, so the smallest local label is the smallest root.
        self._parent[nodes] = nodes[label]

    def labels(self) -> Int64Array:
        """Component label of every node: the smallest node index in its component."""
        parent = self._parent
        while True:
            above = parent[parent]
            if np.array_equal(above, parent):
                break
            parent = above
        self._parent = parent
        return parent.copy()


def _hook_and_jump(m: int, left: Int64Array, right: Int64Array) -> Int64Array:
    """Connected components of a graph on ``m`` nodes; label = smallest node in the component.

    Rounds of: hook each root onto the smallest root it shares an edge with, then pointer-jump
    until every node points at its root.  Edges already inside one component are dropped.
    """
    label = np.arange(m, dtype=np.int64)
    while left.size:
        a, b = label[left], label[right]
        differ = a != b
        if not differ.any():
            break
        left, right, a, b = left[differ], right[differ], a[differ], b[differ]
        np.minimum.at(label, np.maximum(a, b), np.minimum(a, b))
        while True:
            above = label[label]
            if np.array_equal(above, label):
                break
            label = above
    return label


def connected_components(n: int, left: npt.ArrayLike, right: npt.ArrayLike) -> Int64Array:
    """Label nodes 0..n-1 by connected component of the edges (left[i], right[i]).

    Returns an int64 array: each node's label is the smallest node index in its component.
    O(n + E log E) time, O(n + E) memory.
    """
    labeler = ComponentLabeler(n)
    labeler.add(left, right)
    return labeler.labels()


def leader_labels(n: int, left: npt.ArrayLike, right: npt.ArrayLike) -> Int64Array:
    """Leader clustering of ``n`` nodes over the edges ``left[i] -- right[i]``: in index
    order, a node that no earlier leader took leads a cluster of every neighbour not taken
    yet, so each member is joined by an edge to its leader, the cluster's smallest index
    (with indices in insertion order, the first-added member), which :func:`iter_clusters`
    groups by.  Unlike components, a chain a-b-c whose ends are no pair never puts c with a.
    O(E log E) and one Python step per node that has a later neighbour.  Memory O(n + E)."""
    labels = np.arange(n, dtype=np.int64)
    lower = np.minimum(left, right).astype(np.int64)
    higher = np.maximum(left, right).astype(np.int64)
    if not lower.size:
        return labels
    order = np.argsort(lower, kind="stable")
    lower, higher = lower[order], higher[order]
    leaders, starts = np.unique(lower, return_index=True)
    ends = np.append(starts[1:], lower.size)
    taken = np.zeros(n, dtype=bool)
    for node, start, end in zip(leaders.tolist(), starts.tolist(), ends.tolist()):
        if taken[node]:  # a member of an earlier leader's cluster leads none
            continue
        neighbours = higher[start:end]
        free = neighbours[~taken[neighbours]]
        labels[free] = node
        taken[free] = True
    return labels


def iter_clusters(labels: npt.ArrayLike, include_singletons: bool = False) -> Iterator[Int64Array]:
    """Yield each component of ``labels`` as an ascending int64 array of node indices.

    Components come in order of their smallest index (which each one yields first).
    Singletons are skipped unless asked for.  O(n log n) for one stable argsort.
    """
    labels = np.asarray(labels, dtype=np.int64)
    order = np.argsort(labels, kind="stable")
    ordered = labels[order]
    if not ordered.size:
        return
    starts = np.flatnonzero(np.concatenate([[True], ordered[1:] != ordered[:-1]]))
    ends = np.append(starts[1:], ordered.size)
    if not include_singletons:
        big = ends - starts > 1
        starts, ends = starts[big], ends[big]
    # Stable sort on labels that are the smallest member keeps both orders ascending.
    for start, end in zip(starts.tolist(), ends.tolist()):
        yield order[start:end]


def clusters_from_labels(labels: npt.ArrayLike, include_singletons: bool = False) -> list[list[int]]:
    """The components of ``labels`` as lists of indices, smallest index first, ordered by it."""
    return [cluster.tolist() for cluster in iter_clusters(labels, include_singletons)]


def clusters_from_pairs(
    n: int,
    pairs: npt.ArrayLike | Iterable[tuple[npt.ArrayLike, ...]],
    include_singletons: bool = False,
) -> list[list[int]]:
    """Connected components of the graph on nodes 0..n-1 given by ``pairs``.

    ``pairs`` is either an (E, 2) int array (as returned by :func:`find_all`) or an iterable of
    blocks ``(left, right, ...)`` (as yielded by :func:`iter_pair_blocks`), consumed one block
    at a time.  Each cluster is an ascending list of indices; clusters are ordered by their
    smallest index.  O(n + E log E) time; O(n + block) memory for a block iterable.
    """
    labeler = ComponentLabeler(n)
    if isinstance(pairs, np.ndarray):
        if pairs.size:
            if pairs.ndim != 2 or pairs.shape[1] != 2:
                raise InvalidInputError(f"pairs must have shape (E, 2), got {pairs.shape}")
            labeler.add(pairs[:, 0], pairs[:, 1])
    else:
        # Per the docstring, anything but an ndarray is an iterable of blocks; mypy cannot
        # iterate the union because ArrayLike includes scalars.
        for block in cast("Iterable[tuple[npt.ArrayLike, ...]]", pairs):
            labeler.add(block[0], block[1])
    return clusters_from_labels(labeler.labels(), include_singletons)


def cluster_labels(
    fingerprints: UInt64Array, plan: TablePlan, k: int | None = None, *, workers: int | None = None
) -> Int64Array:
    """Component label of every position of the "within k bits" graph: the smallest position
    in its component.

    Works on distinct fingerprints, so duplicate groups are never expanded into pairs (10,000
    identical fingerprints cost one node).  Cost as :func:`iter_pair_blocks` without the
    output expansion; O(N) memory.  ``workers`` threads search (default every core); the
    union-find runs on the calling thread as their edges arrive.
    """
    array = as_fingerprint_array(fingerprints)
    if not isinstance(plan, TablePlan):
        raise InvalidInputError(f"plan must be a TablePlan, not {type(plan).__name__}", "use TablePlan.create(k)")
    distance_limit = _check_distance(k, plan)
    threads = _threads_for(array.size, workers)
    if array.size < 2:
        return np.arange(array.size, dtype=np.int64)
    if threads:
        jobs = plan_search_jobs(plan, distance_limit, 1)
        labeler = ComponentLabeler(array.size)
        for left, right in _run_jobs(
            array, plan, distance_limit, jobs, _share_edge_blocks, DEFAULT_BLOCK_SIZE, threads
        ):
            labeler.add(left, right)
        return labeler.labels()  # positions are input positions: each label is the smallest
    collapsed, blocks = _search_rows(array, plan, distance_limit, DEFAULT_BLOCK_SIZE)
    labeler = ComponentLabeler(array.size if collapsed is None else collapsed.uniques.size)
    for row_a, row_b, _ in blocks:
        labeler.add(row_a, row_b)
    row_label = labeler.labels()
    if collapsed is None:
        return row_label  # rows are input positions already
    # Rows are in fingerprint order, not input order: relabel each component by the
    # smallest input position among its rows.
    first = collapsed.first_member
    smallest = np.full(row_label.size, array.size, dtype=np.int64)
    np.minimum.at(smallest, row_label, first)
    row_of_position = np.empty(array.size, dtype=np.int64)
    row_of_position[collapsed.members] = np.repeat(np.arange(row_label.size), collapsed.counts)
    return smallest[row_label[row_of_position]]


def find_clusters(
    fingerprints: Sequence[int] | npt.NDArray[Any],
    k: int = 3,
    blocks: int | None = None,
    include_singletons: bool = False,
    *,
    workers: int | None = None,
) -> list[list[int]]:
    """Clusters of positions whose fingerprints are linked by chains of pairs within ``k``
    bits: ascending lists, ordered by smallest position.  See :func:`cluster_labels`
    (``workers`` as there)."""
    array = as_fingerprint_array(fingerprints)
    plan = TablePlan.create(k, blocks)
    return clusters_from_labels(cluster_labels(array, plan, workers=workers), include_singletons)
