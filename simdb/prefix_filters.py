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
filters with one get per query.  A reader keeps the complete filters it uses in one
zero-filled mapping whose pages take memory only once written, reads a page the first time
a query needs it, and checks all of a query's (table, filter) pairs with a few numpy calls.

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
import mmap
import os
import struct
import threading
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
#: Sequences of queried tables whose lookup arrays a reader keeps (see PrefixFilters._lookups).
HELD_LOOKUPS = 32
#: Key in the tables' state sub-database: 8 random bytes per table (see the module docstring).
GENERATIONS = b"filters"
_HEADER_PAGE = 0xFFFFFFFF
_KEY = struct.Struct(">BI")  # run slot, page number
_HEADER = struct.Struct(">Q?8s")  # words, complete, nonce
_BIT_MIX_INT = 0xC2B2AE3D27D4EB4F  # odd: a product's top bits depend on every bit
_BIT_MIX = np.uint64(_BIT_MIX_INT)
_WORD = (1 << 64) - 1
_ONE = np.uint64(1)
_TOP_BITS = 32
#: Values per slice of :func:`filter_masks`: over 65,536 values at once its temporaries
#: leave the core's cache, and it took 9.5-12 ns a value with 3 probes, against 2.8-2.9 ns in
#: slices of 16,384 (this 2-core machine).
_MASK_SLICE = 16_384


def filter_masks(values: np.ndarray, probes: int) -> np.ndarray:
    """The bits each value sets in its word of a blocked Bloom filter: ``probes`` 6-bit fields
    of the value times an odd constant, each naming one of the word's 64 bits.  The one
    kernel for every filter of the package.  O(n) numpy, in slices of :data:`_MASK_SLICE`
    values with in-place operations, so that its temporaries stay in the core's cache."""
    values = np.asarray(values, dtype=np.uint64)
    masks = np.empty_like(values)
    mixed = np.empty(min(len(values), _MASK_SLICE), dtype=np.uint64)
    bit = np.empty_like(mixed)
    for start in range(0, len(values), _MASK_SLICE):
        part = values[start : start + _MASK_SLICE]
        out, product, field = masks[start : start + len(part)], mixed[: len(part)], bit[: len(part)]
        np.multiply(part, _BIT_MIX, out=product)
        np.right_shift(product, np.uint64(58), out=out)
        np.left_shift(_ONE, out, out=out)
        for probe in range(1, probes):
            np.right_shift(product, np.uint64(58 - 6 * probe), out=field)
            np.bitwise_and(field, np.uint64(63), out=field)
            np.left_shift(_ONE, field, out=field)
            np.bitwise_or(out, field, out=out)
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


@dataclass(frozen=True)
class _Filter:
    """One complete filter, as a reader finds it: its slot, its word count and its nonce (a
    complete filter never changes, so words read under its nonce stay right)."""

    slot: int
    size: int
    nonce: bytes


class _Arena:
    """The complete filters a reader uses, each in its own page-aligned region of one
    zero-filled array, with a flag per page read so far.  Only the pages that queries read
    take memory (:func:`_zero_words`).  A region is given out once, so a thread
    still holding an older generation's regions reads the filters it held."""

    def __init__(self, pages: int) -> None:
        self.words = _zero_words(pages * PAGE_WORDS)
        self.loaded = np.zeros(pages, dtype=bool)
        self.given = 0

    def region(self, words: int) -> int:
        """The first word of a fresh region of ``words`` words (the caller checked room)."""
        first = self.given
        self.given += _page_count(words)
        return first * PAGE_WORDS

    @property
    def free(self) -> int:
        """Pages not given out yet."""
        return len(self.loaded) - self.given


def _zero_words(count: int) -> np.ndarray:
    """``count`` zero words in a private anonymous mapping, which the kernel backs page by page
    as they are written.  Transparent huge pages are refused where the platform allows it:
    numpy asks for them on arrays from 4 MiB, and one word written would then take 2 MiB
    (filter pages are read at random, so soon every huge page would be)."""
    if not hasattr(mmap, "MAP_PRIVATE"):  # Windows has no mmap flags: numpy's zeros there
        return np.zeros(count, dtype=np.uint64)
    mapping = mmap.mmap(-1, 8 * max(count, 1), flags=mmap.MAP_PRIVATE)
    if hasattr(mmap, "MADV_NOHUGEPAGE"):
        mapping.madvise(mmap.MADV_NOHUGEPAGE)
    return np.frombuffer(mapping, dtype=np.uint64, count=count)


def _page_count(words: int) -> int:
    """Pages that ``words`` words take."""
    return -(-words // PAGE_WORDS)


@dataclass(frozen=True)
class _Lookups:
    """Every (query, complete filter of the query's table) pair for one sequence of queried
    tables, as arrays: what :meth:`PrefixFilters.ruled_out` computes with."""

    owners: np.ndarray  # query position
    tables: np.ndarray  # table index
    slots: np.ndarray
    bases: np.ndarray  # uint64: the filter's first word in the arena
    sizes: np.ndarray  # uint64: its word count
    top_bits: np.ndarray  # uint64: its table's top bits (see _top_shift)
    shape_bits: np.ndarray  # float64, exact below 2**53: the run's bit in its table's shape


@dataclass(frozen=True)
class _Held:
    """What a reader holds as of one value of the stored generations: the arena, each
    table's complete filters with their regions, and the lookups built so far."""

    generations: bytes
    arena: _Arena
    tables: list[list[tuple[_Filter, int]]]  # per table: (filter, first word in the arena)
    lookups: dict[tuple[int, ...], _Lookups]
    regions: dict[tuple[int, _Filter], int]  # each filter's first word, by (table index, filter)


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
        # Per table: its generation last read and its complete filters as of it.
        self._found: dict[int, tuple[bytes, list[_Filter]]] = {}
        # As of the generations last seen (see ruled_out): replaced whole, in one assignment,
        # so an interrupt can never leave regions of one arena beside another arena.
        self._held: _Held | None = None
        self._holding = threading.Lock()  # regions are given out by one thread at a time
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
        """A stored page's ``length`` words, a view of ``raw`` (damage when it holds another
        number)."""
        if len(raw) != 8 * length:
            raise self._damaged(table, slot)
        return np.frombuffer(raw, dtype="<u8")

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

    def _complete_filters(self, txn: lmdb.Transaction[bytes], table: Table, generation: bytes) -> list[_Filter]:
        """The complete filters of one table as of ``txn``: kept while its generation is
        unchanged, else a header get per slot."""
        found = self._found.get(table.index)
        if found is not None and found[0] == generation:
            return found[1]
        filters: list[_Filter] = []
        for slot in range(self.slots):
            header = self._header(txn, table, slot)
            if header is not None and header[0] and header[1]:
                filters.append(_Filter(slot, header[0], header[2]))
        self._found[table.index] = (generation, filters)
        return filters

    def _hold(self, txn: lmdb.Transaction[bytes], generations: bytes) -> _Held:
        """What a reader holds as of ``generations`` (read in ``txn``): the tables whose
        generation changed are read again (:meth:`_complete_filters`), and their new filters
        get regions in the arena.  A filter whose nonce is unchanged keeps its region and the
        words read into it.  When the arena lacks room, a new one twice the size of the
        filters held is made, and every filter's words are read again as queries need them."""
        with self._holding:
            held = self._held
            if held is not None and held.generations == generations:
                return held
            per_table = [
                self._complete_filters(txn, table, generations[8 * table.index : 8 * table.index + 8])
                for table in self.plan.tables
            ]
            wanted = [(index, found) for index, filters in enumerate(per_table) for found in filters]
            arena, kept = (None, {}) if held is None else (held.arena, held.regions)
            fresh = [key for key in wanted if key not in kept]
            if arena is None or arena.free < sum(_page_count(found.size) for _, found in fresh):
                arena = _Arena(2 * sum(_page_count(found.size) for _, found in wanted) + 64)
                kept, fresh = {}, wanted
            # A new dict: the held one stays as it was until the assignment below.
            regions = {key: kept[key] for key in wanted if key in kept}
            for key in fresh:
                regions[key] = arena.region(key[1].size)
            tables = [[(found, regions[index, found]) for found in filters] for index, filters in enumerate(per_table)]
            held = _Held(generations, arena, tables, {}, regions)
            self._held = held
            return held

    def _lookups(self, held: _Held, tables: tuple[int, ...]) -> _Lookups:
        """The lookups of queries of ``tables`` (in order), as of ``held``: kept for up to
        :data:`HELD_LOOKUPS` sequences no longer than the plan (a query's tables, and table 0
        repeated for the few fingerprints a query turns into ids), so what is kept stays
        small whatever the queries match."""
        lookups = held.lookups.get(tables)
        if lookups is not None:
            return lookups
        rows = [(at, table, found, base) for at, table in enumerate(tables) for found, base in held.tables[table]]
        lookups = _Lookups(
            np.array([row[0] for row in rows], dtype=np.int64),
            np.array([row[1] for row in rows], dtype=np.int64),
            np.array([row[2].slot for row in rows], dtype=np.int64),
            np.array([row[3] for row in rows], dtype=np.uint64),
            np.array([row[2].size for row in rows], dtype=np.uint64),
            np.array([self._geometry[row[1]][2] for row in rows], dtype=np.uint64),
            np.array([2 << row[2].slot for row in rows], dtype=np.float64),
        )
        if len(tables) <= len(self.plan.tables) and len(held.lookups) < HELD_LOOKUPS:
            held.lookups[tables] = lookups
        return lookups

    def _read_pages(
        self, txn: lmdb.Transaction[bytes], arena: _Arena, lookups: _Lookups, rows: np.ndarray, at: np.ndarray
    ) -> None:
        """Read into the arena each filter page holding the word ``at`` of one of ``rows``
        of ``lookups`` (zeros where none was written: no entry of that page's prefixes),
        then flag it read.  One get per page."""
        arena_pages, first = np.unique(at[rows] // np.uint64(PAGE_WORDS), return_index=True)
        picked = rows[first]
        pages = arena_pages - lookups.bases[picked] // np.uint64(PAGE_WORDS)  # bases are page-aligned
        lengths = np.minimum(lookups.sizes[picked] - pages * np.uint64(PAGE_WORDS), PAGE_WORDS)
        tables, slots = lookups.tables[picked].tolist(), lookups.slots[picked].tolist()
        rows_read = zip(arena_pages.tolist(), tables, slots, pages.tolist(), lengths.tolist())
        for arena_page, table, slot, page, length in rows_read:
            raw = txn.get(_KEY.pack(slot, page), db=self.handles.db(self.names[table]))
            if raw is not None:
                start = arena_page * PAGE_WORDS
                arena.words[start : start + length] = self._page_words(raw, length, self.plan.tables[table], slot)
            # Flagged after its words are in, so another thread never reads a flagged page
            # before them.
            arena.loaded[arena_page] = True

    def ruled_out(self, txn: lmdb.Transaction[bytes], queries: Sequence[tuple[Table, int]]) -> list[int]:
        """For each (table, permuted query), a mask of the table's run slots (bit slot + 1,
        as in a table's shape) whose complete filter says they hold no entry with the
        query's prefix.  One get, a few Python operations per query, then about fifteen numpy
        calls over every (query, filter) pair, reading each filter page the first time a
        query needs it (so a process holds only the pages its queries touched); when the
        stored generations changed since the last call, :meth:`_hold` first."""
        generations = txn.get(GENERATIONS, db=self.handles.db(self._state))
        if generations is None or len(generations) != 8 * len(self.plan.tables):
            return [0] * len(queries)
        held = self._held
        if held is None or held.generations != generations:
            # Read in this transaction, whose generations are the held ones from now on, so
            # the pages read below are those of the held nonces.
            held = self._hold(txn, generations)
        lookups = self._lookups(held, tuple(table.index for table, _ in queries))
        if not len(lookups.owners):
            return [0] * len(queries)
        tops: list[int] = []
        masks: list[int] = []
        for table, query in queries:
            prefix_shift, top_shift, _ = self._geometry[table.index]
            tops.append(query >> top_shift)
            masks.append(filter_mask(query >> prefix_shift, PROBES))
        owners, arena = lookups.owners, held.arena
        at = lookups.bases + (np.array(tops, dtype=np.uint64)[owners] * lookups.sizes >> lookups.top_bits)
        unread = ~arena.loaded[at // np.uint64(PAGE_WORDS)]
        if unread.any():
            self._read_pages(txn, arena, lookups, np.flatnonzero(unread), at)
        wanted = np.array(masks, dtype=np.uint64)[owners]
        passes = (arena.words[at] & wanted) == wanted
        ruled = np.bincount(owners, weights=np.where(passes, 0.0, lookups.shape_bits), minlength=len(queries))
        return ruled.astype(np.int64).tolist()
