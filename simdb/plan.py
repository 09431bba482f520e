"""The permutation-table plan of Manku, Jain and Das Sarma (WWW 2007).

The ``bits`` of a fingerprint are cut into ``blocks`` contiguous blocks.  For a largest
distance ``k`` there is one table for each choice of ``blocks - k`` *leading* blocks: its
permutation moves those blocks, in their original order, to the top of the word and the
remaining blocks after them.  Two fingerprints within ``k`` bits differ in at most ``k``
blocks, so they agree on every leading block of at least one table, which makes every match
a prefix match in some table.

Each permutation only moves whole blocks, so it is a handful of shifts and masks, cheap on
Python ints and vectorised on numpy ``uint64`` arrays.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cache, cached_property
from itertools import combinations
from typing import Any

import numpy as np
import numpy.typing as npt

from simdb.arrays import expand_ranges
from simdb.errors import InvalidInputError
from simdb.validation import check_distance, check_int

BITS = 64
#: The default plan makes every table's prefix at least this long, so that a random table
#: prefix is shared by about one stored fingerprint in a collection of a million.
TARGET_LEADING_BITS = math.ceil(math.log2(1_000_000))

UInt64Array = npt.NDArray[np.uint64]


#: A plan may have at most this many tables: each one is a full copy of the index.
MAX_TABLES = 10_000
#: A new database's plan may have at most this many: each table is some 30 LMDB
#: sub-databases, every one opened at every open.  With k=9 in 14 blocks (2,002 tables) an
#: empty database took 34 s to create and 51 s per query; databases made before this limit
#: keep their plans (up to MAX_TABLES).
MAX_DATABASE_TABLES = 256


def default_blocks(
    k: int, bits: int = BITS, target_leading_bits: int = TARGET_LEADING_BITS, max_tables: int = MAX_TABLES
) -> int:
    """Return the smallest block count m > k whose shortest table prefix has at least
    ``target_leading_bits`` bits, among those needing at most ``max_tables`` tables;
    when none reaches it (large k), the allowed m with the longest prefixes.  O(bits).

    This is the rule for a k you choose.  A database made at its default k (5) has 6 blocks
    instead, 6 tables where this rule gives 8 blocks and 56 (see :func:`simdb.open`)."""
    k = check_distance(k, maximum=bits - 1)  # a plain int: numpy's uint64 wrapped -(m - k) round
    allowed = [blocks for blocks in range(k + 1, bits + 1) if math.comb(blocks, k) <= max_tables]
    for blocks in allowed:
        if sum(block_widths(bits, blocks)[-(blocks - k) :]) >= target_leading_bits:
            return blocks
    # Prefixes (m - k of m equal blocks) grow with m, so the largest allowed m is best.
    return allowed[-1]


def block_widths(bits: int, blocks: int) -> list[int]:
    """Widths of the blocks from the most significant end: as equal as possible, wider first."""
    base, extra = divmod(bits, blocks)
    return [base + 1 if i < extra else base for i in range(blocks)]


@dataclass(frozen=True)
class Table:
    """One permutation table: which blocks lead, and the shifts that move each block."""

    index: int
    leading_blocks: tuple[int, ...]
    leading_bits: int
    # (source_shift, width, target_shift) for every block, in target order.
    moves: tuple[tuple[int, int, int], ...]

    @property
    def name(self) -> str:
        return f"table.{self.index:02d}"

    @cached_property
    def prefix_mask(self) -> int:
        """Mask selecting the leading bits of a permuted fingerprint."""
        return ((1 << self.leading_bits) - 1) << (BITS - self.leading_bits)

    @cached_property
    def prefix_span(self) -> int:
        """How many permuted values share one prefix: 2 ** (bits after the prefix)."""
        return 1 << (BITS - self.leading_bits)

    def prefix_flips(self, flips: int) -> tuple[int, ...]:
        """Masks of every set of at most ``flips`` bits of the prefix, 0 first: XORed into a
        permuted query, the prefixes a probe past the plan's k visits
        (:meth:`TablePlan.flips_for`).  sum C(leading_bits, i) masks, made once."""
        return _prefix_flips(self.leading_bits, flips)

    def permute(self, fingerprint: int) -> int:
        """Permute one fingerprint.  O(blocks) int operations."""
        out = 0
        for source, width, target in self.moves:
            out |= ((fingerprint >> source) & ((1 << width) - 1)) << target
        return out

    def unpermute(self, permuted: int) -> int:
        """Invert :meth:`permute`.  O(blocks) int operations."""
        out = 0
        for source, width, target in self.moves:
            out |= ((permuted >> target) & ((1 << width) - 1)) << source
        return out

    def permute_array(self, fingerprints: UInt64Array) -> UInt64Array:
        """Permute a ``uint64`` array.  O(n * blocks), vectorised."""
        return _move_blocks(fingerprints, [(s, w, t) for s, w, t in self.moves])

    def unpermute_array(self, permuted: UInt64Array) -> UInt64Array:
        """Invert :meth:`permute_array`.  O(n * blocks), vectorised."""
        return _move_blocks(permuted, [(t, w, s) for s, w, t in self.moves])

    def prefix_matches(
        self, stored: UInt64Array, permuted: UInt64Array, k: int
    ) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64], npt.NDArray[np.uint8]]:
        """Every (query, stored entry) pair that shares this table's prefix and lies within
        ``k`` bits, for a sorted array ``stored`` of this table's permuted values and the
        permuted queries: (query positions, positions in ``stored``, distances).  Two binary
        searches per query, then O(candidates) vectorised; the merge of Manku's batch queries."""
        lows = permuted & np.uint64(self.prefix_mask)
        starts = np.searchsorted(stored, lows, side="left")
        counts = np.searchsorted(stored, lows | np.uint64(self.prefix_span - 1), side="right") - starts
        owners = np.repeat(np.arange(len(permuted)), counts)
        candidates = expand_ranges(starts, counts)
        distances = np.bitwise_count(stored[candidates] ^ permuted[owners])
        near = distances <= k
        return owners[near], candidates[near], distances[near]


def _move_blocks(values: UInt64Array, moves: Sequence[tuple[int, int, int]]) -> UInt64Array:
    values = np.asarray(values, dtype=np.uint64)
    out = np.zeros_like(values)
    for source, width, target in moves:
        if source == target:
            out |= values & np.uint64(((1 << width) - 1) << source)
            continue
        block = values >> np.uint64(source) if source else values.copy()
        block &= np.uint64((1 << width) - 1)
        if target:
            block <<= np.uint64(target)
        out |= block
    return out


@dataclass(frozen=True)
class TablePlan:
    """The block plan for a given ``k``: block widths and one :class:`Table` per choice of
    leading blocks.  Build it with :meth:`create`."""

    k: int
    blocks: int
    bits: int = BITS

    @classmethod
    def create(cls, k: int, blocks: int | None = None, bits: int = BITS, max_tables: int = MAX_TABLES) -> TablePlan:
        """Validate ``k`` and ``blocks`` and build the plan of at most ``max_tables`` tables;
        ``blocks=None`` picks :func:`default_blocks`."""
        if bits != BITS:
            raise InvalidInputError(
                f"bits={bits!r} is not supported by the index", "the index stores 64-bit fingerprints"
            )
        k = check_distance(k, maximum=bits - 1)
        if blocks is None:
            blocks = default_blocks(k, bits, max_tables=max_tables)
        blocks = check_int("blocks", blocks, minimum=k + 1, maximum=bits, hint=f"k={k} needs more than {k} blocks")
        if math.comb(blocks, k) > max_tables:
            most = max((count for count in range(k + 1, blocks) if math.comb(count, k) <= max_tables), default=k + 1)
            raise InvalidInputError(
                f"blocks={blocks}, k={k} needs {math.comb(blocks, k)} tables, more than {max_tables}",
                "choose fewer blocks or a smaller k",
                argument="blocks",
                value=blocks,
                expected=f"at most {most} when k is {k}, for at most {max_tables} tables",
            )
        return cls(k=k, blocks=blocks, bits=bits)

    @cached_property
    def widths(self) -> list[int]:
        return block_widths(self.bits, self.blocks)

    def flips_for(self, k: int) -> int:
        """Bits of a table's prefix that a probe must flip to find every fingerprint within
        ``k`` bits: 0 up to the plan's k; past it, k(m - plan k)/m rounded down for m blocks.
        Of the m blocks, the m - plan k that differ least from the query's hold at most that
        share of the k differing bits, and some table leads with exactly those blocks."""
        return 0 if k <= self.k else k * (self.blocks - self.k) // self.blocks

    @property
    def read_share(self) -> float:
        """The share of the stored documents that one probe reads as candidates, over all
        its tables, for uniformly random fingerprints: the sum of 2**-leading_bits.  A few
        per million at the default k; past k=10, several per hundred.  O(tables)."""
        return math.fsum(2.0**-table.leading_bits for table in self.tables)

    def probes_for(self, k: int) -> int:
        """Range scans a probe within ``k`` bits makes: one per table, times the prefixes
        :meth:`flips_for` visits past the plan's k.  O(tables)."""
        flips = self.flips_for(k)
        return sum(sum(math.comb(table.leading_bits, i) for i in range(flips + 1)) for table in self.tables)

    @cached_property
    def tables(self) -> list[Table]:
        widths = self.widths
        # Shift of each block's least significant bit in the original fingerprint.
        shifts = [self.bits - sum(widths[: i + 1]) for i in range(self.blocks)]
        tables = []
        for index, leading in enumerate(combinations(range(self.blocks), self.blocks - self.k)):
            order = list(leading) + [b for b in range(self.blocks) if b not in leading]
            moves = []
            top = self.bits
            for block in order:
                top -= widths[block]
                moves.append((shifts[block], widths[block], top))
            tables.append(
                Table(
                    index=index,
                    leading_blocks=tuple(leading),
                    leading_bits=sum(widths[b] for b in leading),
                    moves=tuple(moves),
                )
            )
        return tables

    def describe(self) -> dict[str, Any]:
        """The plan as plain data, as stored in the database metadata."""
        return {
            "bits": self.bits,
            "k": self.k,
            "blocks": self.blocks,
            "widths": self.widths,
            "tables": [list(t.leading_blocks) for t in self.tables],
        }


@cache
def _prefix_flips(leading_bits: int, flips: int) -> tuple[int, ...]:
    """:meth:`Table.prefix_flips` for a prefix of ``leading_bits`` bits."""
    positions = range(BITS - leading_bits, BITS)
    return tuple(
        sum(1 << position for position in chosen)
        for count in range(flips + 1)
        for chosen in combinations(positions, count)
    )


def read_share_words(share: float) -> str:
    """What a probe of an index whose :attr:`TablePlan.read_share` is ``share`` reads, in
    words: "about 400 table entries per 100 stored documents"."""
    return f"about {share * 100:.3g} table entries per 100 stored documents"
