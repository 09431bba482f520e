"""Per-run Bloom filters of table prefixes (format 6 on), so that a single query seeks only in
the runs that may hold its prefix (issue #16).

A query looks in each table for the entries sharing its leading bits.  A run of n entries in a
table of L-bit prefixes holds a given prefix with probability about n / 2**L, yet without a
filter a query seeks and bisects in every run of every table: about 11 runs a table at 100M
documents, a few microseconds each.  With a filter it seeks in the dense runs (n >= 2**L,
which get none) and in the sparse runs whose filter passes (those holding the prefix, and
about 2% of the others).

Layout: one sub-database per table, ``t.NN.p``, holding for each run slot its filter's words
in pages of :data:`PAGE_WORDS` little-endian 64-bit words, keyed by the slot (one byte) and
the page number (4 bytes big-endian), and a header keyed by the slot and ``0xFFFFFFFF``: the
word count (0: the run has no filter), whether the filter is complete, and a random nonce.
The tables' state sub-database holds, under :data:`GENERATIONS`, 8 random bytes per table,
changed whenever a complete filter appears or goes, so that a reader checks its cached
filters with one get per query.

A prefix's word is ``top * words >> top_bits`` (``top``: the prefix's leading bits, at most
32): monotone in the key, so a merge step, which appends entries in key order, sets bits in
a run of pages of which only the first can hold earlier bits, and the word count need not be
a power of two.  The bits set in the word depend on the whole prefix (:func:`filter_masks`).
A run written whole gets its filter at once; a merge's target gets its header at its first
step, sized for every entry the merge will move, and is searched unfiltered until the merge
completes it.  Removals leave bits set, which can only cost a seek.
"""

from __future__ import annotations

import math
import os
import struct
from array import array
from collections.abc import Sequence
from dataclasses import dataclass

import lmdb
import numpy as np

from simdb.errors import CorruptDatabaseError, Remedy
from simdb.plan import BITS, Table, TablePlan
from simdb.storage import Handles

#: Filter bits per entry.  A word then holds about 6.4 prefixes with PROBES bits each: about
#: 2% of absent prefixes pass.
BITS_PER_ENTRY = 10
#: Bits a prefix sets in its word: 3 cost 19 ns an entry to build in numpy, 6 cost 25 ns
#: (measured on 4M sorted values), for about 2% against 1.5% false positives.
PROBES = 3
#: Words in a page: 4,064 bytes, one LMDB overflow page.
PAGE_WORDS = 508
#: Key in the tables' state sub-database: 8 random bytes per table (see the module docstring).
GENERATIONS = b"filters"
_HEADER_PAGE = 0xFFFFFFFF
_KEY = struct.Struct(">BI")  # run slot, page number
_HEADER = struct.Struct(">Q?8s")  # words, complete, nonce
_BIT_MIX_INT = 0xC2B2AE3D27D4EB4F  # odd: a product's top bits depend on every bit
_BIT_MIX = np.uint64(_BIT_MIX_INT)
_WORD = (1 << 64) - 1
_TOP_BITS = 32


def filter_masks(values: np.ndarray, probes: int) -> np.ndarray:
    """The bits each value sets in its word of a blocked Bloom filter: ``probes`` 6-bit fields
    of the value times an odd constant, each naming one of the word's 64 bits.  The one
    kernel for every filter of the package.  O(n) numpy."""
    mixed = np.asarray(values, dtype=np.uint64) * _BIT_MIX
    masks = np.uint64(1) << (mixed >> np.uint64(58))
    for probe in range(1, probes):
        masks |= np.uint64(1) << ((mixed >> np.uint64(58 - 6 * probe)) & np.uint64(63))
    return masks


def filter_mask(value: int, probes: int) -> int:
    """:func:`filter_masks` of one value, in Python integers: a single query's few prefixes
    cost about 0.5 us each this way, against about 8 us for a numpy call."""
    mixed = value * _BIT_MIX_INT & _WORD
    mask = 1 << (mixed >> 58)
    for probe in range(1, probes):
        mask |= 1 << (mixed >> (58 - 6 * probe) & 63)
    return mask


def filter_words(table: Table, entries: int) -> int:
    """Words of the filter of a run of ``entries`` in ``table``: 0 (no filter) for a dense run,
    one holding at least as many entries as the table has prefixes, whose filter would pass
    most queries anyway."""
    if entries <= 0 or entries >= 1 << table.leading_bits:
        return 0
    # Below 2**32 words: a prefix's top bits (at most 32) times the count then fits the
    # uint64 product the numpy side computes, and both sides agree on every word.
    return min(max(1, math.ceil(entries * BITS_PER_ENTRY / 64)), (1 << _TOP_BITS) - 1)


def _top_shift(table: Table) -> tuple[int, int]:
    """(shift from a permuted value to its prefix's top bits, how many top bits)."""
    top_bits = min(table.leading_bits, _TOP_BITS)
    return BITS - top_bits, top_bits


def _words_and_masks(table: Table, permuted: np.ndarray, words: int) -> tuple[np.ndarray, np.ndarray]:
    """Each permuted value's word in a filter of ``words`` words, and the bits it sets."""
    shift, top_bits = _top_shift(table)
    at = ((permuted >> np.uint64(shift)) * np.uint64(words)) >> np.uint64(top_bits)
    return at, filter_masks(permuted >> np.uint64(BITS - table.leading_bits), PROBES)


#: A complete filter's pages a reader has read so far, by page number.
_Pages = dict[int, "array[int]"]


@dataclass(frozen=True)
class _HeldFilter:
    """One complete filter as a reader holds it: its nonce, its slot, its word count, and
    the pages read so far (a complete filter never changes, so pages read under its nonce
    stay right)."""

    nonce: bytes
    slot: int
    size: int
    pages: _Pages


@dataclass(frozen=True)
class _TableFilters:
    generation: bytes
    by_slot: dict[int, _HeldFilter]
    # (shape bit, slot, word count, pages) of each filter: what a query reads, without
    # attribute lookups.
    lookups: list[tuple[int, int, int, _Pages]]


class PrefixFilters:
    """The prefix filters of a plan's tables of ``slots`` run slots each, over sub-databases
    ``{prefix}.NN.p`` and the generations key of the tables' state sub-database ``state``.
    Every method takes the caller's transaction; the object keeps only the headers and the
    pages of complete filters that its queries have read, checked against the stored
    generations on each use."""

    def __init__(self, plan: TablePlan, handles: Handles, prefix: str, state: bytes, slots: int) -> None:
        self.plan = plan
        self.slots = slots
        self.handles = handles
        self.names = [f"{prefix}.{table.index:02d}.p".encode() for table in plan.tables]
        self._state = state
        self._cache: dict[int, _TableFilters] = {}
        # The generations last seen and each table's lookups as of them (see ruled_out).
        self._held: tuple[bytes, list[list[tuple[int, int, int, _Pages]]]] | None = None
        # Per table: shifts from a permuted value to its prefix and to the prefix's top bits.
        self._geometry = [(BITS - table.leading_bits, *_top_shift(table)) for table in plan.tables]

    # -- writing -------------------------------------------------------------------------

    def write_run(self, txn: lmdb.Transaction[bytes], table: Table, slot: int, values: np.ndarray) -> None:
        """The complete filter of a run just written whole from the sorted ``values`` (none
        for a dense run).  O(n) numpy plus a put per page."""
        words = filter_words(table, len(values))
        if words:
            self._put_header(txn, table, slot, words, complete=False)
            self.add(txn, table, slot, values, words)
            self.complete(txn, table, slot)

    def start(self, txn: lmdb.Transaction[bytes], table: Table, slot: int, entries: int) -> int:
        """The word count of a merge target's filter: read from its header, or, at the
        merge's first step, chosen for the ``entries`` it will hold and written there (so
        removals during the merge never change it).  One get."""
        header = self._header(txn, table, slot)
        if header is not None:
            return header[0]
        words = filter_words(table, entries)
        self._put_header(txn, table, slot, words, complete=False)
        return words

    def add(self, txn: lmdb.Transaction[bytes], table: Table, slot: int, values: np.ndarray, words: int) -> None:
        """Set the bits of the sorted permuted ``values`` in one run's filter of ``words``
        words.  The values' words are consecutive pages' worth; each page is read, ORed and
        written back.  O(n) numpy plus a get and a put per page touched."""
        if not words or not len(values):
            return
        at, masks = _words_and_masks(table, values, words)
        # Sorted values have non-decreasing words: OR each word's masks together.
        starts = np.flatnonzero(np.concatenate(([True], at[1:] != at[:-1])))
        used, bits = at[starts], np.bitwise_or.reduceat(masks, starts)
        first_page, last_page = int(used[0]) // PAGE_WORDS, int(used[-1]) // PAGE_WORDS
        base = first_page * PAGE_WORDS
        span = np.zeros(min((last_page + 1) * PAGE_WORDS, words) - base, dtype=np.uint64)
        span[used.astype(np.int64) - base] = bits
        db = self.handles.db(self.names[table.index])
        for page in range(first_page, last_page + 1):
            start = page * PAGE_WORDS - base
            piece = span[start : start + PAGE_WORDS]
            key = _KEY.pack(slot, page)
            stored = txn.get(key, db=db)
            if stored is not None:
                piece |= self._page_words(stored, len(piece), table, slot)
            if piece.any():
                txn.put(key, piece.astype("<u8").tobytes(), db=db)

    def complete(self, txn: lmdb.Transaction[bytes], table: Table, slot: int) -> None:
        """Mark a run's filter complete under a fresh nonce, so readers start using it."""
        header = self._header(txn, table, slot)
        if header is not None and header[0]:
            self._put_header(txn, table, slot, header[0], complete=True)
            self._new_generation(txn, table)

    def drop(self, txn: lmdb.Transaction[bytes], table: Table, slot: int) -> None:
        """Remove a run's filter (its slot is freed).  A delete per page."""
        db = self.handles.db(self.names[table.index])
        header = self._header(txn, table, slot)
        cursor = txn.cursor(db)
        found = cursor.set_range(bytes((slot,)))
        while found and cursor.key()[:1] == bytes((slot,)):
            found = cursor.delete()
        if header is not None and header[1]:
            self._new_generation(txn, table)

    def _put_header(self, txn: lmdb.Transaction[bytes], table: Table, slot: int, words: int, complete: bool) -> None:
        value = _HEADER.pack(words, complete, os.urandom(8))
        txn.put(_KEY.pack(slot, _HEADER_PAGE), value, db=self.handles.db(self.names[table.index]))

    def _new_generation(self, txn: lmdb.Transaction[bytes], table: Table) -> None:
        state_db = self.handles.db(self._state)
        generations = bytearray(txn.get(GENERATIONS, db=state_db) or b"")
        if len(generations) != 8 * len(self.plan.tables):
            generations = bytearray(8 * len(self.plan.tables))
        generations[8 * table.index : 8 * table.index + 8] = os.urandom(8)
        txn.put(GENERATIONS, bytes(generations), db=state_db)

    # -- reading -------------------------------------------------------------------------

    def _header(self, txn: lmdb.Transaction[bytes], table: Table, slot: int) -> tuple[int, bool, bytes] | None:
        """(words, complete, nonce) of a run's filter, or None when it has none."""
        raw = txn.get(_KEY.pack(slot, _HEADER_PAGE), db=self.handles.db(self.names[table.index]))
        if raw is None:
            return None
        if len(raw) != _HEADER.size:
            raise self._damaged(table, slot)
        words, complete, nonce = _HEADER.unpack(raw)
        return words, complete, nonce

    def kept(self, txn: lmdb.Transaction[bytes], table: Table, slot: int) -> bool:
        """Whether a run slot keeps anything of a filter (a header or a page).  One seek."""
        cursor = txn.cursor(self.handles.db(self.names[table.index]))
        return cursor.set_range(bytes((slot,))) and cursor.key()[:1] == bytes((slot,))

    def _damaged(self, table: Table, slot: int) -> CorruptDatabaseError:
        name = self.names[table.index].decode()
        return CorruptDatabaseError(f"{name} holds a damaged filter of run slot {slot}", remedy=Remedy.RUN_CHECK)

    def _page_words(self, raw: bytes, length: int, table: Table, slot: int) -> np.ndarray:
        """A stored page's ``length`` words (damage when it holds another number)."""
        if len(raw) != 8 * length:
            raise self._damaged(table, slot)
        return np.frombuffer(raw, dtype="<u8").astype(np.uint64)

    def load(self, txn: lmdb.Transaction[bytes], table: Table, slot: int) -> np.ndarray | None:
        """The words of a run's filter as stored, complete or not (for verify), or None when
        it has none.  Pages never written (no entry of theirs) read as zeros.  A step per
        page."""
        header = self._header(txn, table, slot)
        if header is None or not header[0]:
            return None
        words = header[0]
        stored_words = np.zeros(words, dtype=np.uint64)
        cursor = txn.cursor(self.handles.db(self.names[table.index]))
        found = cursor.set_range(_KEY.pack(slot, 0))
        while found:
            key_slot, page = _KEY.unpack(cursor.key()) if len(cursor.key()) == _KEY.size else (-1, 0)
            if key_slot != slot or page == _HEADER_PAGE:
                break
            start = page * PAGE_WORDS
            if start >= words:
                raise self._damaged(table, slot)
            length = min(PAGE_WORDS, words - start)
            stored_words[start : start + length] = self._page_words(cursor.value(), length, table, slot)
            found = cursor.next()
        return stored_words

    def holds(self, table: Table, words: np.ndarray, values: np.ndarray) -> np.ndarray:
        """Whether a filter's ``words`` pass each permuted value (False: the run holds no
        entry with its prefix).  O(n) numpy."""
        at, masks = _words_and_masks(table, np.asarray(values, dtype=np.uint64), len(words))
        return (words[at.astype(np.int64)] & masks) == masks

    def _complete_filters(
        self, txn: lmdb.Transaction[bytes], table: Table, generation: bytes
    ) -> list[tuple[int, int, int, _Pages]]:
        """(shape bit, slot, word count, pages read so far) of each complete filter of one
        table as of ``txn``: cached while its generation is unchanged, else a header get per
        slot (a filter whose nonce is unchanged keeps its pages)."""
        held = self._cache.get(table.index)
        if held is not None and held.generation == generation:
            return held.lookups
        by_slot: dict[int, _HeldFilter] = {}
        for slot in range(self.slots):
            header = self._header(txn, table, slot)
            if header is None or not header[0] or not header[1]:
                continue
            words, _, nonce = header
            cached = held.by_slot.get(slot) if held is not None else None
            if cached is None or cached.nonce != nonce:
                cached = _HeldFilter(nonce, slot, words, {})
            by_slot[slot] = cached
        lookups = [(2 << run.slot, run.slot, run.size, run.pages) for run in by_slot.values()]
        self._cache[table.index] = _TableFilters(generation, by_slot, lookups)
        return lookups

    def _page(self, txn: lmdb.Transaction[bytes], table: Table, slot: int, page: int, words: int) -> array[int]:
        """One page of a complete filter of ``words`` words, as stored (zeros where none
        was written: no entry of that page's prefixes).  One get."""
        length = min(PAGE_WORDS, words - page * PAGE_WORDS)
        raw = txn.get(_KEY.pack(slot, page), db=self.handles.db(self.names[table.index]))
        if raw is None:
            return array("Q", bytes(8 * length))
        return array("Q", self._page_words(raw, length, table, slot).tobytes())  # native order

    def ruled_out(self, txn: lmdb.Transaction[bytes], queries: Sequence[tuple[Table, int]]) -> list[int]:
        """For each (table, permuted query), a mask of the table's run slots (bit slot + 1,
        as in a table's shape) whose complete filter says they hold no entry with the
        query's prefix.  One get, then a word lookup per filter (Python), reading each page
        the first time a query needs it (so a process holds only the pages its queries
        touched, and its first query reads a page per filter, not every filter); the tables
        whose generation changed since the last call are read first
        (:meth:`_complete_filters`)."""
        generations = txn.get(GENERATIONS, db=self.handles.db(self._state))
        if generations is None or len(generations) != 8 * len(self.plan.tables):
            return [0] * len(queries)
        held = self._held
        if held is None or held[0] != generations:
            held = (
                generations,
                [
                    self._complete_filters(txn, table, generations[8 * table.index : 8 * table.index + 8])
                    for table in self.plan.tables
                ],
            )
            self._held = held  # one assignment: threads see both parts or neither
        out: list[int] = []
        for table, query in queries:
            prefix_shift, top_shift, top_bits = self._geometry[table.index]
            mask = filter_mask(query >> prefix_shift, PROBES)
            top = query >> top_shift
            ruled = 0
            for shape_bit, slot, size, pages in held[1][table.index]:
                page, at = divmod(top * size >> top_bits, PAGE_WORDS)
                page_words = pages.get(page)
                if page_words is None:
                    # Read in this transaction, whose generation is the held one: the
                    # slot's filter is the complete one of the held nonce.
                    page_words = pages[page] = self._page(txn, table, slot, page, size)
                if page_words[at] & mask != mask:
                    ruled |= shape_bit
            out.append(ruled)
        return out
