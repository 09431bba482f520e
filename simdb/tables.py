"""The permutation tables as a log-structured layer: a small B-tree of recent entries beside
sorted runs of immutable, compressed blocks, merged by size tiers (issue #16).  Databases of
format 4 on store their tables this way (:func:`layer_for`).  It works inside a caller's LMDB
transaction over a narrow interface (:class:`simdb.storage.Handles`: ``db(name)`` and
``create(txn, name)``), so the query engines can be tested on a bare environment.

Layout, per table ``NN`` of the plan:

- ``t.NN.r``, the recent entries: 16-byte keys (permuted fingerprint, then the document id,
  both 8 bytes big-endian), empty values.  Kept small (``base`` entries), so inserting into
  it dirties pages of a tree that stays in cache.
- ``t.NN.s00`` .. ``t.NN.s31``, run slots: each run is a sub-database keyed by its blocks'
  first permuted fingerprints, 8 bytes big-endian (so each run is still keyed by the
  permuted fingerprint); value = a block of at most one overflow page, laid out as
  :mod:`simdb.blocks` says (fixed-width offsets from the block's first value, then, for table
  0, the ids).
  Equal fingerprints never straddle two blocks, so first fingerprints are unique keys.
- Only table 0 stores document ids in its blocks (Manku et al. store fingerprints only):
  a fingerprint found in another table's block is turned into ids by an exact lookup in table
  0.  Matches are rare, so this costs little, and it saves the log2(N) bits an id takes in
  nine of ten tables.
- ``tables.state``: per table, the recent tree's count, each slot's level and count, and the
  merges in progress (sources, target, cursor); ``shape``, the slots in use, for probes.
- In a filtered layer (the key index, ``k.00.*`` with ``keys.state``), ``prefix.NN.f00`` ..
  ``prefix.NN.f31``: per run slot, its Bloom filter in chunks, keyed by the chunk's first
  value (8 bytes big-endian) and a random 8-byte nonce; a chunk answers for the values
  from its first up to the next chunk's first.
- Otherwise (format 6 tables), ``prefix.NN.p``: each sparse run's filter of its prefixes,
  as :mod:`simdb.prefix_filters` lays it out.

Merging is size-tiered: a run holds about ``base * ratio**(level-1)`` entries, and ``ratio``
runs of one level merge into one run of the next, so an entry is written once per level,
about log_ratio(N / base) times (leveled merging rewrites it about ``ratio`` times per
level).  A merge advances by steps inside the write transactions of the adds, each moving the
sources' entries below a key bound into the target (appended in key order), so every entry
is in exactly one place at every commit, a crash leaves the last committed state, and a
step's work is bounded (about ``chunk`` entries), never a whole table.

Costs: a probe is one range scan of the recent tree and one seek plus one in-block bisect per
run per table (about (ratio - 1) runs per level) whose prefix filter passes (the dense runs,
those holding the prefix, and about 2% of the others); a delete searches the recent tree,
then the runs, rewriting one block per run it touches.
"""

from __future__ import annotations

import os
import struct
import threading
import zlib
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass

import lmdb
import numpy as np

from simdb.arrays import distinct, expand_ranges
from simdb.blocks import HEADER, ID_BASE, block_header, decode_blocks, encode_block, encode_blocks, search_blocks
from simdb.btree_tables import (
    BTreeTables,
    pages_in_use,
    prefix_bound,
    read_entries,
    scan_entries,
    table_entries,
    table_keys_as_pairs,
)
from simdb.errors import CorruptDatabaseError, Remedy
from simdb.keys import table_entry_pairs
from simdb.plan import BITS, Table, TablePlan
from simdb.prefix_filters import PrefixFilters, filter_masks
from simdb.storage import BareHandles, Handles

STATE = b"tables.state"
SHAPE = b"shape"  # key in STATE: see Tables.shape
#: Table entries encoded at a time when a large run is written (compaction, a huge batch).
REWRITE_SLICE = 1 << 22
#: Blocks decoded at a time when a whole run is read (about 2M entries).
DECODE_SLICE = 4096
#: Run slots (sub-databases) per table.  Runs in use stay near (ratio - 1) per level, a few
#: levels; a burst that fills the slots finishes merges early (see Tables._free_slot).
RUN_SLOTS = 32
#: Merge work allowed per table entry added: entry moves.  An entry moves once per level
#: (about log_ratio(N / base) times), so merging keeps pace with a wide margin.
MERGE_WORK = 16
#: A batch search reads a part whole and merges it with the sorted queries when it holds
#: fewer than this many entries per query: searching a part costs about 0.5-1 us a query
#: (numpy, :meth:`Tables._search_run`), decoding and merging about 60 ns an entry (measured
#: at 10M and 100M: 8 and 16 gave the same rate, 32 two thirds of it at 100M).
PART_MERGE_RATIO = 8
#: A filtered layer (the key index) keeps a Bloom filter per run, in chunks of at most about
#: this many entries when a run is written whole (a merge step writes one chunk of the
#: entries it moved, up to the policy's chunk), so that a batch of lookups seeks only in the
#: runs that may hold each key.
FILTER_CHUNK = 65_536
#: Filter bits per entry and bits set per entry, in one 64-bit word per entry (a blocked
#: Bloom filter: one word read per lookup): about 1-2% false positives.
FILTER_BITS_PER_ENTRY = 10
FILTER_PROBES = 6
#: Batches of fewer lookups seek in every run: reading the filters' chunk list costs more.
FILTER_MIN_QUERIES = 64
#: Batches of fewer queries are answered by :meth:`Tables.probe`, one query at a time: its
#: filters and bisects cost tens of microseconds a query, where the batch search's numpy
#: set-up costs milliseconds a batch.  Measured on 200k entries: one key lookup 38 us against
#: 1.3 ms; 16 queries at k=3 70 us a query against 660 us; the two about even at 64 keys
#: and 128 fingerprints, the batch ahead beyond.
PROBE_EACH_BELOW = 64
#: A batch search lists a run's block keys once (about 0.2 us a key) when it has at least
#: 1/LIST_KEYS_RATIO as many queries as the run has blocks, and seeks once per query (about
#: 2 us) otherwise.
LIST_KEYS_RATIO = 10
#: Queries whose blocks a batch search reads and searches at a time: bounds the copy of the
#: blocks (at most a few per query, 4 KB each).
SEARCH_SLICE = 8192
_FILTER_WORD_MIX = np.uint64(0x9E3779B97F4A7C15)  # odd: a product's top bits depend on every bit
_SLOTS = struct.Struct(">Q" + "BQ" * RUN_SLOTS)  # recent entries, then per slot: level (0: free), entries
_MERGE = struct.Struct(">BIQ")  # target slot, source slot mask, cursor
_SHAPE = struct.Struct(">Q")  # per table: bit 0 the recent tree, bit slot + 1 a run in use


@dataclass(frozen=True)
class Policy:
    """Merge policy: a batch of at least ``run_at`` entries (``base``, if that is smaller)
    becomes a run of its own, and a smaller one goes into the recent tree, which holds up to
    ``base`` entries per table before it becomes a run at level 1; ``ratio`` whole runs of
    one level merge into one run of the next; a merge step moves about ``chunk`` entries.

    By default ``run_at`` is a quarter of ``base``, so a level holds runs at most 4 times
    smaller than its nominal size, and there is at most one level more.  Below it, the
    recent tree costs more: an entry is put into each table's B-tree, then read back and
    written again at the flush.  Measured bulk loads of 2M documents: batches of 10,000 at
    134k docs/s through the recent tree and 273k docs/s as runs; batches of 16,384 (runs
    already) 314k docs/s."""

    base: int = 16_384
    ratio: int = 4
    chunk: int = 65_536
    run_at: int = 4_096

    @property
    def smallest_run(self) -> int:
        """The fewest entries a batch needs to become a run of its own."""
        return min(self.run_at, self.base)

    def level_for(self, entries: int) -> int:
        """The level of a new run of ``entries``: level i holds runs of about
        base x ratio^(i-1) entries."""
        level, size = 1, self.base
        while entries >= size * self.ratio:
            level, size = level + 1, size * self.ratio
        return level


def _surplus(values: np.ndarray, other: np.ndarray) -> np.ndarray:
    """The sorted ``values`` not matched one for one in ``other``: a multiset difference.
    O(n log n)."""
    unique, counts = np.unique(values, return_counts=True)
    other_unique, other_counts = np.unique(other, return_counts=True)
    at = np.minimum(np.searchsorted(other_unique, unique), max(len(other_unique) - 1, 0))
    matched = np.zeros(len(unique), dtype=np.int64)
    if len(other_unique):
        matched = np.where(other_unique[at] == unique, other_counts[at], 0)
    return np.repeat(unique, np.maximum(counts - matched, 0))


def _shown(values: np.ndarray, what: str) -> str:
    """The first five ``values`` as ``what`` (ids in decimal, fingerprints in hex)."""
    shown = [f"{what} {int(value)}" if what == "id" else f"{what} {int(value):#018x}" for value in values[:5]]
    return ", ".join(shown) + (", ..." if len(values) > 5 else "")


#: (hashes, masks) of values, as :func:`filter_probes` computes them.
_Probes = tuple[np.ndarray, np.ndarray]


def filter_probes(values: np.ndarray) -> _Probes:
    """For each value, a multiplicative hash, whose top w bits are its word in a filter of
    2**w words (so values sharing their leading bits, one chunk of a sorted run, still
    spread over every word), and the mask of the bits it sets there.  O(n) numpy."""
    values = np.asarray(values, dtype=np.uint64)
    return values * _FILTER_WORD_MIX, filter_masks(values, FILTER_PROBES)


def _word_shift(words: int) -> int:
    """The shift from a hash to its word in a filter of ``words`` words (a power of two)."""
    return 64 - (words.bit_length() - 1)


def encode_filter(values: np.ndarray) -> bytes:
    """A blocked Bloom filter of ``values``: 2**w little-endian 64-bit words, about
    :data:`FILTER_BITS_PER_ENTRY` bits per value.  O(n) numpy."""
    word_bits = max(1, int(np.ceil(np.log2(max(len(values) * FILTER_BITS_PER_ENTRY / 64, 2)))))
    filter_words = np.zeros(1 << word_bits, dtype=np.uint64)
    hashes, masks = filter_probes(values)
    np.bitwise_or.at(filter_words, hashes >> np.uint64(_word_shift(len(filter_words))), masks)
    return filter_words.astype("<u8").tobytes()


def filter_holds(
    words: np.ndarray,
    probes: _Probes,
    starts: np.ndarray | int = 0,
    shifts: np.ndarray | int | None = None,
) -> np.ndarray:
    """Whether each probed value (:func:`filter_probes`) may be in its filter (False:
    certainly not): by default the one filter ``words``, else, per value, the filter at word
    ``starts`` of ``words`` whose word count :func:`_word_shift` gives ``shifts``.  O(n)
    numpy, whatever the number of filters."""
    hashes, masks = probes
    shift = np.uint64(_word_shift(len(words))) if shifts is None else np.asarray(shifts, dtype=np.uint64)
    at = starts + (hashes >> shift).astype(np.int64)
    return (words[at] & masks) == masks


# -- the layer -------------------------------------------------------------------------------


class _ChunkWords:
    """Room for a run's filter chunk words, shared by the :class:`_RunFilter` values built
    on it, each of which holds a prefix.  Chunks are appended in place only by the holder
    of the prefix that ends where the words written so far end (claimed under the lock),
    so no words that another holder (another thread) reads are ever written; anyone else
    copies into fresh room.  Room doubles, so appending costs O(words appended),
    amortised: a merge target gains a chunk at every step, and copying its whole filter
    each time cost 12-296 ms a step for a 128 MB filter (measured)."""

    def __init__(self, capacity: int) -> None:
        self.words = np.empty(capacity, dtype=np.uint64)
        self.used = 0
        self.lock = threading.Lock()


@dataclass(frozen=True)
class _RunFilter:
    """One run's filter chunks as a process last read them: how many, the last key, and per
    chunk (in key order) its key, first value, and where its words are."""

    count: int
    last: bytes
    keys: list[bytes]
    firsts: np.ndarray
    joined: np.ndarray  # every chunk's words, in key order: a prefix of ``room``
    starts: np.ndarray  # int64: each chunk's first word in ``joined``
    shifts: np.ndarray  # uint64: each chunk's :func:`_word_shift`
    room: _ChunkWords

    @staticmethod
    def build(
        count: int, last: bytes, keys: list[bytes], chunks: list[np.ndarray], held: _RunFilter | None = None
    ) -> _RunFilter:
        """The filters of ``chunks`` under ``keys`` (which sort after ``held``'s) appended to
        those of ``held``, if any: ``count`` chunks in all, ``last`` the last key.
        O(words appended), amortised, plus O(chunks)."""
        sizes = [len(words) for words in chunks]
        before = 0 if held is None else len(held.joined)
        total = before + sum(sizes)
        room = None if held is None else held.room
        if room is not None:
            with room.lock:
                if room.used == before and total <= len(room.words):
                    room.used = total  # claimed: only this holder writes past ``before``
                else:
                    room = None
        if room is None:
            room = _ChunkWords(max(2 * total, 16))
            if held is not None:
                room.words[:before] = held.joined
            room.used = total
        starts = np.zeros(len(sizes), dtype=np.int64)
        np.cumsum(sizes[:-1], out=starts[1:])
        starts += before
        for start, words in zip(starts.tolist(), chunks):
            room.words[start : start + len(words)] = words
        firsts = np.frombuffer(b"".join(key[:8] for key in keys), dtype=">u8").astype(np.uint64)
        shifts = np.array([_word_shift(size) for size in sizes], dtype=np.uint64)
        if held is not None:
            keys = held.keys + keys
            firsts = np.concatenate([held.firsts, firsts])
            starts = np.concatenate([held.starts, starts])
            shifts = np.concatenate([held.shifts, shifts])
        return _RunFilter(count, last, keys, firsts, room.words[:total], starts, shifts, room)


@dataclass
class _Merge:
    """A merge in progress: the source runs' entries below ``cursor`` are in the target run
    already, those at or above it are still in the sources."""

    sources: list[int]
    cursor: int = 0


@dataclass
class _TableState:
    """One table's bookkeeping, stored under its own key in ``tables.state``: the recent
    tree's entry count, each run slot's level (0: free) and entry count, and the merges in
    progress by target slot."""

    recent: int
    levels: list[int]
    entries: list[int]
    merges: dict[int, _Merge]
    loaded_shape: int = -1  # shape() as last loaded or saved: _save writes the shape only on a change

    @classmethod
    def empty(cls) -> _TableState:
        return cls(0, [0] * RUN_SLOTS, [0] * RUN_SLOTS, {})

    @classmethod
    def decode(cls, raw: bytes, where: str) -> _TableState:
        if len(raw) < _SLOTS.size or (len(raw) - _SLOTS.size) % _MERGE.size:
            raise CorruptDatabaseError(f"the state of {where} is damaged", remedy=Remedy.RUN_CHECK)
        fields = _SLOTS.unpack_from(raw)
        state = cls(fields[0], list(fields[1::2]), list(fields[2::2]), {})
        for offset in range(_SLOTS.size, len(raw), _MERGE.size):
            target, mask, cursor = _MERGE.unpack_from(raw, offset)
            sources = [slot for slot in range(RUN_SLOTS) if mask >> slot & 1]
            if target >= RUN_SLOTS or not sources or target in sources:
                raise CorruptDatabaseError(f"the state of {where} is damaged", remedy=Remedy.RUN_CHECK)
            state.merges[target] = _Merge(sources, cursor)
        return state

    def encode(self) -> bytes:
        fields = [self.recent]
        for level, entries in zip(self.levels, self.entries):
            fields += [level, entries]
        merges = b"".join(
            _MERGE.pack(target, sum(1 << slot for slot in merge.sources), merge.cursor)
            for target, merge in sorted(self.merges.items())
        )
        return _SLOTS.pack(*fields) + merges

    def shape(self) -> int:
        """Bit 0: the recent tree holds entries; bit slot + 1: that run slot is in use."""
        mask = int(self.recent > 0)
        for slot, level in enumerate(self.levels):
            if level:
                mask |= 2 << slot
        return mask

    def free_slots(self) -> list[int]:
        return [slot for slot, level in enumerate(self.levels) if not level]

    def waiting(self, level: int) -> list[int]:
        """Whole runs at ``level`` that no merge reads or writes."""
        busy = set(self.merges)
        for merge in self.merges.values():
            busy.update(merge.sources)
        return [slot for slot, at in enumerate(self.levels) if at == level and slot not in busy]


#: Matches as parallel arrays: (query positions, ids or fingerprints, distances).
_Found = tuple[np.ndarray, np.ndarray, np.ndarray]
_NO_MATCHES: _Found = (np.empty(0, dtype=np.int64), np.empty(0, dtype=np.uint64), np.empty(0, dtype=np.int64))
_NO_ENTRIES = (*_NO_MATCHES[:2], np.empty(0, dtype=np.uint64), _NO_MATCHES[2])


def _not_in_table_0(fingerprint: int) -> CorruptDatabaseError:
    return CorruptDatabaseError(
        f"fingerprint {fingerprint:#018x} is in a table but not in table 0", remedy=Remedy.RUN_CHECK
    )


def _equal_positions(stored: np.ndarray, values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Every entry of the sorted ``stored`` equal to one of ``values``: (positions in
    ``values``, positions in ``stored``).  Two binary searches per value."""
    first = np.searchsorted(stored, values, side="left")
    counts = np.searchsorted(stored, values, side="right") - first
    return np.repeat(np.arange(len(values)), counts), expand_ranges(first, counts)


def _joined(parts: list[_Found]) -> _Found:
    """Matches from several sources as one."""
    if not parts:
        return _NO_MATCHES
    owners, values, distances = (np.concatenate(column) for column in zip(*parts))
    return owners, values, distances


class Tables:
    """The permutation tables of ``plan`` over the sub-databases that ``handles`` names.
    Every method takes the caller's transaction; the layer keeps no state between calls
    except handles and, in a filtered layer, the filter chunks it has read (immutable under
    their keys, see :meth:`_put_filter`)."""

    #: A query's search against its share of merging whole tables, relative to one B-tree
    #: per table (:func:`simdb.queries.merges_whole_tables`): merging whole tables pays from
    #: about 1/10 as many queries as documents.  Measured with the block search of
    #: :meth:`_search_run`: at 1M documents merging was faster at 1/10 (96k against 75k
    #: q/s), at 10M searching still was at 3/10 (33.7k against 27.7k q/s).
    seek_cost = 2.0

    def __init__(
        self,
        plan: TablePlan,
        handles: Handles,
        policy: Policy = Policy(),
        *,
        path: object = None,
        prefix: str = "t",
        state: bytes = STATE,
        filtered: bool = False,
        prefix_filters: bool = True,
        label: str = "table",
    ) -> None:
        """``prefix`` names the sub-databases (``prefix.NN.r``, ``prefix.NN.sSS``) and
        ``state`` the one holding the bookkeeping, so that two layers share an environment;
        ``filtered`` keeps a Bloom filter per run (``prefix.NN.fSS``), for a plan of exact
        lookups (every table's prefix is the whole fingerprint); ``prefix_filters`` keeps a
        filter of each sparse run's prefixes for single probes (:mod:`simdb.prefix_filters`,
        ``prefix.NN.p``; not in a filtered layer); ``label`` names a table in problems
        ("table 3")."""
        self.plan = plan
        self.handles = handles
        self.policy = policy
        self.path = path
        self.label = label
        self._prefix = prefix
        if policy.ratio < 2 or policy.base < 1 or policy.chunk < 1 or policy.run_at < 1:
            raise ValueError("a policy merges at least 2 runs, with a positive base, chunk and run_at")
        if filtered and any(table.prefix_span != 1 for table in plan.tables):
            raise ValueError("a filtered layer answers exact lookups: every prefix must be the whole fingerprint")
        if filtered and prefix_filters:
            raise ValueError("a filtered layer keeps its own filters: prefix_filters must be off")
        self._state = state
        self._recent = [f"{prefix}.{t.index:02d}.r".encode() for t in plan.tables]
        self._runs = [
            [f"{prefix}.{t.index:02d}.s{slot:02d}".encode() for slot in range(RUN_SLOTS)] for t in plan.tables
        ]
        self._run_labels = [[name.decode() for name in runs] for runs in self._runs]  # for problems
        self._filters = (
            [[f"{prefix}.{t.index:02d}.f{slot:02d}".encode() for slot in range(RUN_SLOTS)] for t in plan.tables]
            if filtered
            else None
        )
        # Filter chunks read so far, per filter sub-database (see _run_filter).
        self._filter_cache: dict[bytes, _RunFilter] = {}
        self._prefix_filters = PrefixFilters(plan, handles, prefix, state, RUN_SLOTS) if prefix_filters else None

    @property
    def names(self) -> list[bytes]:
        """Every sub-database the layer uses (for the environment's max_dbs and handles)."""
        return [self._state, *self._recent, *(name for runs in self._runs for name in runs), *self.filter_names]

    @property
    def filter_names(self) -> list[bytes]:
        """The sub-databases of the runs' filters (chunked or prefix filters)."""
        filters = [name for slots in self._filters for name in slots] if self._filters is not None else []
        return filters + (self._prefix_filters.names if self._prefix_filters is not None else [])

    def create(self, txn: lmdb.Transaction[bytes]) -> None:
        """Create the sub-databases (idempotent)."""
        for name in self.names:
            self.handles.create(txn, name)
        txn.put(SHAPE, bytes(_SHAPE.size * len(self.plan.tables)), db=self.handles.db(self._state), overwrite=False)

    def _named(self, table: Table) -> str:
        return f"{self.label} {table.index}" if len(self.plan.tables) > 1 or self.label == "table" else self.label

    # -- state ---------------------------------------------------------------------------

    @staticmethod
    def _state_key(table: int) -> bytes:
        return bytes((table >> 8, table & 0xFF))

    def _load(self, txn: lmdb.Transaction[bytes], table: int) -> _TableState:
        raw = txn.get(self._state_key(table), db=self.handles.db(self._state))
        state = _TableState.empty() if raw is None else _TableState.decode(raw, self._named(self.plan.tables[table]))
        state.loaded_shape = state.shape()
        return state

    def _save(self, txn: lmdb.Transaction[bytes], table: int, state: _TableState) -> None:
        """Store one table's state and, when they changed, its bits of the shape.  One or
        two puts."""
        state_db = self.handles.db(self._state)
        txn.put(self._state_key(table), state.encode(), db=state_db)
        now = state.shape()
        if now == state.loaded_shape:
            return
        state.loaded_shape = now
        shape = bytearray(txn.get(SHAPE, db=state_db) or b"")
        if len(shape) != _SHAPE.size * len(self.plan.tables):
            shape = bytearray(_SHAPE.size * len(self.plan.tables))
        _SHAPE.pack_into(shape, _SHAPE.size * table, now)
        txn.put(SHAPE, bytes(shape), db=state_db)

    def shape(self, txn: lmdb.Transaction[bytes]) -> list[int]:
        """Per table, a bitmask of its non-empty parts (bit 0 the recent tree, bit slot + 1
        a run), so that probes skip empty slots.  One get."""
        raw = txn.get(SHAPE, db=self.handles.db(self._state))
        if raw is None or len(raw) != _SHAPE.size * len(self.plan.tables):
            return [(2 << RUN_SLOTS) - 1] * len(self.plan.tables)  # unknown: probe everything
        return [value for (value,) in _SHAPE.iter_unpack(raw)]

    def runs(self, txn: lmdb.Transaction[bytes], table: int = 0) -> list[tuple[int, int]]:
        """(level, entries) of each run of one table, the recent tree as level 0 first.  One get."""
        state = self._load(txn, table)
        return [(0, state.recent)] + [(level, n) for level, n in zip(state.levels, state.entries) if level]

    # -- writing -------------------------------------------------------------------------

    def put_many(
        self,
        txn: lmdb.Transaction[bytes],
        ids: np.ndarray,
        fingerprints: np.ndarray,
        *,
        alongside: Callable[[], None] | None = None,
    ) -> None:
        """Add entries for new (id, fingerprint) pairs; ids must not be stored already.
        ``alongside`` (the caller's other writes of the batch) runs first.  A batch of at
        least :attr:`Policy.smallest_run` becomes a new run of each table, written once in
        key order; a smaller one goes into the recent trees, which become a run when they
        pass ``base``.  Then merge steps run in the same transaction, up to ``MERGE_WORK``
        entry moves per entry added (:meth:`merge`), so merging keeps pace with the adds and
        a crash never leaves a merge half done.  Cost: O(n log n) numpy plus n B-tree puts
        per table for a small batch, plus the merge steps (amortised: an entry is rewritten
        once per level, about log_ratio(N / base) times)."""
        if alongside is not None:
            alongside()
        ids = np.asarray(ids, dtype=np.uint64)
        fingerprints = np.asarray(fingerprints, dtype=np.uint64)
        if not len(ids):
            return
        for table in self.plan.tables:
            state = self._load(txn, table.index)
            if len(ids) >= self.policy.smallest_run:
                permuted = table.permute_array(fingerprints)
                if table.index == 0:
                    order = np.argsort(permuted, kind="stable")
                    permuted, run_ids = permuted[order], ids[order]
                else:  # no ids: a plain sort, faster than an argsort and a gather
                    permuted, run_ids = np.sort(permuted), None
                self._new_run(txn, table, state, self.policy.level_for(len(ids)), permuted, run_ids)
            else:  # the recent tree holds entries as a B-tree table does
                entries = table_entries(table, fingerprints, ids)
                cursor = txn.cursor(self.handles.db(self._recent[table.index]))
                cursor.putmulti(table_entry_pairs(entries), overwrite=False)
                state.recent += len(entries)
                if state.recent > self.policy.base:
                    self._flush_recent(txn, table, state)
            self._merge_table(txn, table, state, MERGE_WORK * len(ids))
            self._save(txn, table.index, state)

    def _new_run(
        self,
        txn: lmdb.Transaction[bytes],
        table: Table,
        state: _TableState,
        level: int,
        values: np.ndarray,
        ids: np.ndarray | None,
    ) -> None:
        """Write sorted (values, ids) as a new run at ``level``, in slices that end where
        values change (equal values never straddle blocks), in append mode."""
        slot = self._free_slot(txn, table, state, spare=1)
        db = self.handles.db(self._runs[table.index][slot])
        start = 0
        while start < len(values):
            end = min(start + REWRITE_SLICE, len(values))
            if end < len(values):
                cut = int(np.searchsorted(values, values[end], side="left"))
                end = cut if cut > start else int(np.searchsorted(values, values[end], side="right"))
            blocks = encode_blocks(values[start:end], None if ids is None else ids[start:end])
            txn.cursor(db).putmulti(blocks, append=True)
            start = end
        if self._filters is not None and len(values):
            # Chunks start where values change, as blocks do: two chunks with the same
            # first value would leave a lookup to whichever sorts last.
            starts = distinct(np.searchsorted(values, values[::FILTER_CHUNK], side="left")).tolist()
            for start, end in zip(starts, [*starts[1:], len(values)]):
                self._put_filter(txn, table, slot, values[start:end])
        if self._prefix_filters is not None:
            self._prefix_filters.write_run(txn, table, slot, values)
        state.levels[slot], state.entries[slot] = level, len(values)

    def _put_filter(self, txn: lmdb.Transaction[bytes], table: Table, slot: int, values: np.ndarray) -> None:
        """In a filtered layer, a filter chunk for the sorted ``values`` just written to a run:
        it answers for keys from ``values[0]`` up to the next chunk's first.  Its key is that
        first value and a random nonce, so a chunk is never rewritten under a key a cache
        holds (not even by a transaction that aborted and was tried again).  One put."""
        if self._filters is None or not len(values):
            return
        key = int(values[0]).to_bytes(8, "big") + os.urandom(8)
        txn.put(key, encode_filter(values), db=self.handles.db(self._filters[table.index][slot]))

    def _free(self, txn: lmdb.Transaction[bytes], table: Table, state: _TableState, slot: int) -> None:
        """Mark an emptied run slot free, with its filter dropped."""
        state.levels[slot] = 0
        if self._filters is not None:
            txn.drop(self.handles.db(self._filters[table.index][slot]), delete=False)
        if self._prefix_filters is not None:
            self._prefix_filters.drop(txn, table, slot)

    def _flush_recent(self, txn: lmdb.Transaction[bytes], table: Table, state: _TableState) -> None:
        """Move the whole recent tree into a new run at level 1."""
        name = self._recent[table.index]
        db = self.handles.db(name)
        keys = b"".join(txn.cursor(db).iternext(values=False))
        if len(keys) != 16 * state.recent:
            raise CorruptDatabaseError(
                f"{name.decode()} holds {len(keys)} key bytes, not 16 per recorded entry", remedy=Remedy.RUN_CHECK
            )
        pairs = np.frombuffer(keys, dtype=">u8").reshape(-1, 2).astype(np.uint64)
        txn.drop(db, delete=False)
        state.recent = 0
        self._new_run(txn, table, state, 1, pairs[:, 0], pairs[:, 1] if table.index == 0 else None)

    def _free_slot(self, txn: lmdb.Transaction[bytes], table: Table, state: _TableState, spare: int) -> int:
        """A free run slot, leaving ``spare`` others free (new runs keep one for a merge's
        target).  When too few are free, the lowest merge in progress is finished, or one
        is started on the lowest level with two whole runs (else on the two lowest runs):
        each frees at least one slot.
        Rare: merging keeps pace with the adds, so this runs only after bursts."""
        while True:
            free = state.free_slots()
            if len(free) > spare:
                return free[0]
            if not state.merges:
                # Whole runs by level: the lowest level with two, else the two lowest runs.
                by_level = [state.waiting(level) for level in sorted(set(state.levels) - {0})]
                sources = next((slots for slots in by_level if len(slots) >= 2), None)
                self._start_merge(state, sources or [slot for slots in by_level for slot in slots][:2], free[0])
            target = min(state.merges, key=lambda slot: state.levels[slot])
            while target in state.merges:
                self._step(txn, table, state, target)

    def merge(self, txn: lmdb.Transaction[bytes], budget: int = 1 << 21) -> bool:
        """Merge steps on every table, up to about ``budget`` entry moves per table;
        returns whether work remains."""
        remains = False
        for table in self.plan.tables:
            state = self._load(txn, table.index)
            remains |= self._merge_table(txn, table, state, budget)
            self._save(txn, table.index, state)
        return remains

    def _merge_table(self, txn: lmdb.Transaction[bytes], table: Table, state: _TableState, budget: int) -> bool:
        """Start a merge on every level with ``ratio`` whole runs waiting (while slots are
        free), then step the merges, lowest level first, until about ``budget`` entries
        moved (at least one step); returns whether work remains."""
        spent = 0
        while True:
            self._start_merges(state)
            if not state.merges:
                return False
            if spent >= budget:
                return True
            spent += self._step(txn, table, state, min(state.merges, key=lambda slot: state.levels[slot]))

    def _start_merges(self, state: _TableState) -> None:
        runs = Counter(level for level in state.levels if level)
        for level in sorted(level for level, count in runs.items() if count >= self.policy.ratio):
            waiting = state.waiting(level)
            free = state.free_slots()
            if len(waiting) >= self.policy.ratio and free:
                self._start_merge(state, waiting, free[0])

    @staticmethod
    def _start_merge(state: _TableState, sources: list[int], target: int) -> None:
        state.levels[target] = max(state.levels[slot] for slot in sources) + 1
        state.entries[target] = 0
        state.merges[target] = _Merge(sources)

    def _step(self, txn: lmdb.Transaction[bytes], table: Table, state: _TableState, target: int) -> int:
        """Move the sources' entries in [cursor, bound) into the target run, appended in key
        order; ``bound`` is the smallest first key after about chunk / sources entries of
        any source, so a step reads at most that many entries of each (plus one block).
        The sources' blocks below ``bound`` are deleted, and the part of a block at or past
        it is written back.  Finishes the merge (freeing the sources) when they are empty.
        Returns the entries moved (at least 1)."""
        merge = state.merges[target]
        with_ids = table.index == 0
        filter_words = 0
        if self._prefix_filters is not None:
            # Sized for every entry the merge moves: the target's and the sources' together.
            merging = state.entries[target] + sum(state.entries[slot] for slot in merge.sources)
            filter_words = self._prefix_filters.start(txn, table, target, merging)
        share = max(self.policy.chunk // len(merge.sources), 1)
        start = merge.cursor.to_bytes(8, "big")
        read: list[list[tuple[bytes, bytes]]] = []
        bound = 1 << BITS
        for slot in merge.sources:
            cursor = txn.cursor(self.handles.db(self._runs[table.index][slot]))
            blocks: list[tuple[bytes, bytes]] = []
            taken = 0
            found = cursor.set_range(start)
            while found:
                key, value = cursor.item()
                blocks.append((key, value))
                taken += HEADER.unpack_from(value)[0] if len(value) >= HEADER.size else 0
                found = cursor.next()
                if found and taken >= share:
                    bound = min(bound, int.from_bytes(cursor.key(), "big"))
                    break
            read.append(blocks)
        moved_values: list[np.ndarray] = []
        moved_ids: list[np.ndarray] = []
        for slot, blocks in zip(merge.sources, read):
            name = self._runs[table.index][slot]
            db = self.handles.db(name)
            taken_blocks = [(key, value) for key, value in blocks if int.from_bytes(key, "big") < bound]
            if not taken_blocks:
                continue
            values, ids = decode_blocks(taken_blocks, with_ids, name.decode())
            for key, _ in taken_blocks:
                txn.delete(key, db=db)
            below = len(values)
            if bound < 1 << BITS:
                below = int(np.searchsorted(values, np.uint64(bound - 1), side="right"))
            if below < len(values):  # the last block reaches past the bound: its rest stays
                txn.put(*encode_block(values[below:], None if ids is None else ids[below:]), db=db)
            moved_values.append(values[:below])
            if ids is not None:
                moved_ids.append(ids[:below])
            state.entries[slot] -= below
        moved = sum(len(values) for values in moved_values)
        if moved:
            # Sorted runs, concatenated: a stable sort (timsort) finds and merges them.
            values = np.concatenate(moved_values)
            ids_out = None
            if with_ids:
                order = np.argsort(values, kind="stable")
                values, ids_out = values[order], np.concatenate(moved_ids)[order]
            else:
                values = np.sort(values, kind="stable")
            blocks = encode_blocks(values, ids_out)
            txn.cursor(self.handles.db(self._runs[table.index][target])).putmulti(blocks, append=True)
            self._put_filter(txn, table, target, values)
            if self._prefix_filters is not None:
                self._prefix_filters.add(txn, table, target, values, filter_words)
            state.entries[target] += moved
        if bound == 1 << BITS:  # every source is empty now
            for slot in merge.sources:
                if state.entries[slot]:
                    raise CorruptDatabaseError(
                        f"{self._runs[table.index][slot].decode()} holds entries below a merge's cursor",
                        remedy=Remedy.RUN_CHECK,
                    )
                self._free(txn, table, state, slot)
            del state.merges[target]
            if self._prefix_filters is not None:
                self._prefix_filters.complete(txn, table, target)
        else:
            merge.cursor = bound
        return max(moved, 1)

    def delete_many(self, txn: lmdb.Transaction[bytes], ids: Iterable[int], fingerprints: Iterable[int]) -> int:
        """Remove the entries of (id, fingerprint) pairs; returns how many table entries were
        removed (tables x pairs when all were stored).  Per table: one delete in the recent
        tree per pair, then, for the pairs not there, each run in turn with the pairs
        grouped by block, so a block is decoded and rewritten once however many of its
        entries go.  State is saved once per table."""
        pairs = [(int(doc_id), int(fingerprint)) for doc_id, fingerprint in zip(ids, fingerprints)]
        if not pairs:
            return 0
        removed = 0
        for table in self.plan.tables:
            state = self._load(txn, table.index)
            recent = self.handles.db(self._recent[table.index])
            left: list[tuple[int, int]] = []  # (permuted, id) not in the recent tree
            for doc_id, fingerprint in pairs:
                permuted = table.permute(fingerprint)
                if not txn.delete(permuted.to_bytes(8, "big") + doc_id.to_bytes(8, "big"), db=recent):
                    left.append((permuted, doc_id))
            state.recent -= len(pairs) - len(left)
            left.sort()
            # Largest runs first: an old entry is most likely there.
            for slot in sorted(range(RUN_SLOTS), key=lambda slot: -state.entries[slot]):
                if not left:
                    break
                if state.levels[slot]:
                    still = self._delete_from_run(txn, table, slot, left)
                    state.entries[slot] -= len(left) - len(still)
                    left = still
            removed += len(pairs) - len(left)
            self._save(txn, table.index, state)
        return removed

    def _delete_from_run(
        self, txn: lmdb.Transaction[bytes], table: Table, slot: int, targets: list[tuple[int, int]]
    ) -> list[tuple[int, int]]:
        """Remove the sorted (permuted, id) ``targets`` from one run (for tables without
        ids, any one entry of the value per target); returns those it does not hold.  Per
        block the targets fall in, one bisect per distinct value tells whether it holds any;
        a block that does is decoded, thinned and rewritten once.  One Python step per target
        and per distinct value, never per stored copy of a value."""
        label = self._run_labels[table.index][slot]
        db = self.handles.db(self._runs[table.index][slot])
        cursor = txn.cursor(db)
        with_ids = table.index == 0
        missing: list[tuple[int, int]] = []
        at = 0
        while at < len(targets):
            key = self._block_at(cursor, targets[at][0].to_bytes(8, "big"))
            if key is None:
                missing.append(targets[at])
                at += 1
                continue
            value = cursor.value()
            end = int.from_bytes(cursor.key(), "big") if cursor.next() else 1 << BITS  # the next block's first
            group_end = at
            while group_end < len(targets) and targets[group_end][0] < end:
                group_end += 1
            group = targets[at:group_end]
            at = group_end
            # Most blocks a removal looks in do not hold it (it is in another run): the
            # probe's bisect over the fixed-width offsets tells, without decoding.
            block_first = int.from_bytes(key, "big")
            held = {p for p, _ in group}
            if not any(self._block_holds(block_first, value, permuted, with_ids, label) for permuted in held):
                missing.extend(group)
                continue
            values, block_ids = decode_blocks([(key, value)], with_ids, label)
            keep = np.ones(len(values), dtype=bool)
            if block_ids is not None:
                wanted = np.array([permuted for permuted, _ in group], dtype=np.uint64)
                # kind="sort": numpy 2.0 overflows building its lookup table from uint64 bounds.
                named = np.flatnonzero(np.isin(values, wanted, kind="sort"))
                entries = zip(values[named].tolist(), block_ids[named].tolist())
                position_of = dict(zip(entries, named.tolist()))
                for target in group:
                    hit = position_of.pop(target, None)
                    if hit is None:
                        missing.append(target)
                    else:
                        keep[hit] = False
            else:
                # Any entries of the value will do: the first copies, as many as targets
                # name it (a value may be stored thousands of times: no step per copy).
                by_value: dict[int, list[tuple[int, int]]] = {}
                for target in group:
                    by_value.setdefault(target[0], []).append(target)
                # Two searches for the block's whole group, not two per value.
                named = np.fromiter(by_value, dtype=np.uint64, count=len(by_value))
                starts = np.searchsorted(values, named, side="left").tolist()
                ends = np.searchsorted(values, named, side="right").tolist()
                for of_value, start, end in zip(by_value.values(), starts, ends):
                    taken = min(len(of_value), end - start)
                    keep[start : start + taken] = False
                    missing.extend(of_value[taken:])
            if keep.all():
                continue
            txn.delete(key, db=db)
            if keep.any():
                txn.put(*encode_block(values[keep], block_ids[keep] if block_ids is not None else None), db=db)
        return missing

    @staticmethod
    def _block_at(cursor: lmdb.Cursor[bytes], key: bytes) -> bytes | None:
        """Position ``cursor`` on the block that would hold ``key`` (the last block whose
        first value is at or below it); its key, or None when every block starts above it."""
        if cursor.set_range(key):
            if cursor.key() == key:
                return key
            if not cursor.prev():
                return None
            return cursor.key()
        return cursor.key() if cursor.last() else None

    # -- reading -------------------------------------------------------------------------

    def probe(self, txn: lmdb.Transaction[bytes], fingerprint: int, k: int) -> dict[int, int]:
        """Ids of stored fingerprints within ``k`` bits of ``fingerprint``, with distances:
        per table one range scan of the recent tree and one seek and bisect per run, except
        the runs whose prefix filter rules the query out.  Past the plan's k, each table is
        scanned at every prefix :meth:`~simdb.plan.TablePlan.flips_for` bits or fewer from
        the query's, each entry checked against the query itself: still exact, at
        :meth:`~simdb.plan.TablePlan.probes_for` scans."""
        found: dict[int, int] = {}
        resolve: dict[int, int] = {}  # original fingerprints found in id-less blocks
        # Fingerprints found in table 0's blocks: every id of theirs is in ``found`` already
        # (table 0 holds every entry, and the probe covered their prefix), so they need no
        # exact probe.  With 5 blocks, a match 1 bit away shares table 0's prefix in 6 of 10
        # cases.
        settled: dict[int, int] = {}
        shape = self.shape(txn)
        flips = self.plan.flips_for(k)
        queries = [(table, table.permute(fingerprint)) for table in self.plan.tables]
        # (table, prefix probed): the query's own, and past the plan's k the flipped ones.
        probed = [(table, query ^ mask) for table, query in queries for mask in table.prefix_flips(flips)]
        originals = [query for table, query in queries for _ in table.prefix_flips(flips)]
        for (table, probed_value), query, parts in zip(probed, originals, self._probed_parts(txn, shape, probed)):
            low = probed_value & table.prefix_mask
            fingerprints = resolve if table.index else settled
            self._probe_table(txn, parts, table, query, low, low + table.prefix_span, k, found, fingerprints)
        for fingerprint in settled.keys() & resolve.keys():
            del resolve[fingerprint]
        if resolve:
            # An exact probe of table 0 per fingerprint: a few are found, and one query's
            # numpy overhead (resolve) would cost more than they do.
            table = self.plan.tables[0]
            exact_queries = [(table, table.permute(fingerprint)) for fingerprint in resolve]
            for (_, permuted), distance, parts in zip(
                exact_queries, resolve.values(), self._probed_parts(txn, shape, exact_queries)
            ):
                exact: dict[int, int] = {}
                self._probe_table(txn, parts, table, permuted, permuted, permuted + 1, 0, exact, {})
                if not exact:
                    raise _not_in_table_0(table.unpermute(permuted))
                found.update(dict.fromkeys(exact, distance))
        return found

    def probe_many(self, txn: lmdb.Transaction[bytes], fingerprints: np.ndarray, k: int) -> list[dict[int, int]]:
        """:meth:`probe` for many queries: :meth:`matches`, one dict per query."""
        found = self.matches(txn, fingerprints, k)
        return [found.get(index, {}) for index in range(len(fingerprints))]

    def matches(self, txn: lmdb.Transaction[bytes], fingerprints: np.ndarray, k: int) -> dict[int, dict[int, int]]:
        """The ids within ``k`` bits of each query, with distances, for the queries that
        have any: query position -> {id: distance}.  Per table, the parts holding fewer than
        :data:`PART_MERGE_RATIO` entries per query are read whole and merged with the sorted
        queries (numpy: :meth:`simdb.plan.Table.prefix_matches`, as merge_many does for
        whole tables); the others are searched block by block (:meth:`_search_run`).  A
        filtered layer searches a run only for the queries its filter passes.  Fingerprints
        found in blocks without ids are then looked up in table 0 all at once
        (:meth:`_resolve`).  O(merged entries + q x sought parts x log), vectorised;
        below :data:`PROBE_EACH_BELOW` queries, a :meth:`probe` each."""
        queries = np.asarray(fingerprints, dtype=np.uint64)
        if len(queries) < PROBE_EACH_BELOW:
            probed = ((position, self.probe(txn, query, k)) for position, query in enumerate(queries.tolist()))
            return {position: hits for position, hits in probed if hits}
        shape = self.shape(txn)
        found: list[_Found] = []
        unresolved: list[_Found] = []
        for table in self.plan.tables:
            with_ids, without_ids = self._table_matches(txn, table, shape[table.index], table.permute_array(queries), k)
            found.append(with_ids)
            unresolved.append(without_ids)
        found.append(self._resolve(txn, shape[0], _joined(unresolved)))
        hits: dict[int, dict[int, int]] = {}
        owners, ids, distances = _joined(found)
        for owner, doc_id, distance in zip(owners.tolist(), ids.tolist(), distances.tolist()):
            hits.setdefault(owner, {})[doc_id] = distance
        return hits

    def _table_matches(
        self,
        txn: lmdb.Transaction[bytes],
        table: Table,
        shape: int,
        permuted: np.ndarray,
        k: int,
        *,
        exact: bool = False,
    ) -> tuple[_Found, _Found]:
        """The entries of one table (its non-empty parts: ``shape``) within ``k`` bits of the
        permuted queries and sharing their prefix (equal to them, when ``exact``), as (query
        positions, ids, distances) where the id is at hand (table 0; a recent tree scanned
        per query), and as (query positions, fingerprints, distances) where it is not.  See
        :meth:`matches`."""
        state = self._load(txn, table.index)
        sizes = [state.recent, *state.entries]
        parts = [part for part in range(RUN_SLOTS + 1) if shape >> part & 1]
        # With filters, a run is searched only for the queries its filter passes.
        filtered = self._filters is not None and len(permuted) >= FILTER_MIN_QUERIES
        merged = [part for part in parts if sizes[part] < PART_MERGE_RATIO * len(permuted) and not (filtered and part)]
        with_ids: list[_Found] = []
        without_ids: list[_Found] = []
        if merged:
            owners, values, ids, distances = self._merge_parts(txn, table, merged, permuted, k, exact)
            if ids is not None:
                with_ids.append((owners, ids, distances))
            else:
                without_ids.append((owners, table.unpermute_array(values), distances))
        order = np.argsort(permuted, kind="stable")
        ordered = permuted[order]
        lows = ordered if exact else ordered & np.uint64(table.prefix_mask)
        tops = ordered if exact else lows | np.uint64(table.prefix_span - 1)
        probes: _Probes | None = None
        for part in parts:
            if part in merged:
                continue
            if not part:
                with_ids.append(self._scan_recent(txn, table, order, ordered, lows, tops, k))
                continue
            chosen = np.arange(len(order))
            if filtered:
                if probes is None:
                    probes = filter_probes(ordered)  # once for every run of the table
                chosen = np.flatnonzero(self._filter_passes(txn, table, part - 1, ordered, probes))
            positions, stored, ids, distances = self._search_run(
                txn, table, part - 1, ordered[chosen], lows[chosen], tops[chosen], k
            )
            owners = order[chosen[positions]]
            if table.index == 0:
                with_ids.append((owners, ids, distances))
            else:
                without_ids.append((owners, table.unpermute_array(stored), distances))
        return _joined(with_ids), _joined(without_ids)

    def _scan_recent(
        self,
        txn: lmdb.Transaction[bytes],
        table: Table,
        order: np.ndarray,
        ordered: np.ndarray,
        lows: np.ndarray,
        tops: np.ndarray,
        k: int,
    ) -> _Found:
        """(query positions, ids, distances) of the entries of one table's recent tree within
        ``k`` bits of the permuted queries ``ordered`` (at positions ``order``) and in their
        ranges [low, top]: one range scan each (:func:`simdb.btree_tables.scan_entries`), for
        batches too small to read the tree whole."""
        name = self._recent[table.index]
        cursor = txn.cursor(self.handles.db(name))
        owners: list[int] = []
        hits: dict[int, int] = {}
        ids: list[int] = []
        distances: list[int] = []
        for position, query, low, top in zip(order.tolist(), ordered.tolist(), lows.tolist(), tops.tolist()):
            hits.clear()
            scan_entries(cursor, low.to_bytes(8, "big"), prefix_bound(top + 1), query, k, hits, self.path, name)
            owners.extend([position] * len(hits))
            ids.extend(hits)
            distances.extend(hits.values())
        return np.array(owners, dtype=np.int64), np.array(ids, dtype=np.uint64), np.array(distances, dtype=np.int64)

    def _search_run(
        self,
        txn: lmdb.Transaction[bytes],
        table: Table,
        slot: int,
        queries: np.ndarray,
        lows: np.ndarray,
        tops: np.ndarray,
        k: int,
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """The entries of one run within ``k`` bits of the permuted ``queries`` (sorted) and
        in their ranges [low, top]: (query positions, stored values, ids (0 outside table
        0), distances), by :func:`simdb.blocks.search_blocks`.  The blocks to search are
        found by a seek per query when the queries are few against the run's blocks
        (:data:`LIST_KEYS_RATIO`), else by listing the run's block keys once and searching
        them (numpy); either way a slice of :data:`SEARCH_SLICE` queries at a time, each
        block a slice needs read once.  O(q x log + blocks read)."""
        label = self._run_labels[table.index][slot]
        db = self.handles.db(self._runs[table.index][slot])
        cursor = txn.cursor(db)
        blocks_in_run = int(txn.stat(db)["entries"])
        if len(queries) * LIST_KEYS_RATIO < blocks_in_run:
            keys = self._seek_keys(cursor, lows, tops)
        else:
            keys = list(cursor.iternext(values=False)) if cursor.first() else []
        joined = b"".join(keys)
        if len(joined) != 8 * len(keys):
            raise CorruptDatabaseError(f"{label} holds a block key of the wrong length", remedy=Remedy.RUN_CHECK)
        firsts = np.frombuffer(joined, dtype=">u8").astype(np.uint64)
        # Each query's blocks: from the last one starting at or below its low end (or the
        # first) up to the last one starting at or below its top.
        start = np.maximum(np.searchsorted(firsts, lows, side="right") - 1, 0)
        spans = np.maximum(np.searchsorted(firsts, tops, side="right") - start, 0)
        results: list[tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]] = []
        for at in range(0, len(queries), SEARCH_SLICE):
            stop = min(at + SEARCH_SLICE, len(queries))
            pair_query = np.repeat(np.arange(at, stop), spans[at:stop])
            needed, pair_block = np.unique(expand_ranges(start[at:stop], spans[at:stop]), return_inverse=True)
            blocks = [txn.get(keys[block], b"", db=db) for block in needed.tolist()]
            owner, stored, ids, distances = search_blocks(
                blocks,
                firsts[needed],
                np.full(len(needed), table.index == 0),
                pair_block,
                queries[pair_query],
                lows[pair_query],
                tops[pair_query],
                k,
                label,
            )
            results.append((pair_query[owner], stored, ids, distances))
        if not results:
            return _NO_ENTRIES
        positions, stored, ids, distances = (np.concatenate(column) for column in zip(*results))
        return positions, stored, ids, distances

    def _seek_keys(self, cursor: lmdb.Cursor[bytes], lows: np.ndarray, tops: np.ndarray) -> list[bytes]:
        """The keys, in order, of the blocks of one run that may hold entries in the sorted
        ranges [low, top]: a seek per range, then a step per further block starting at or
        below its top."""
        keys: set[bytes] = set()
        for low, top in zip(lows.tolist(), tops.tolist()):
            key = self._block_at(cursor, low.to_bytes(8, "big"))
            if key is None:
                key = cursor.key() if cursor.first() else b""
            while key and int.from_bytes(key, "big") <= top:
                keys.add(key)
                key = cursor.key() if cursor.next() else b""
        return sorted(keys)

    def _filter_passes(
        self,
        txn: lmdb.Transaction[bytes],
        table: Table,
        slot: int,
        values: np.ndarray,
        probes: _Probes | None = None,
        *,
        cached: bool = True,
    ) -> np.ndarray:
        """Whether each of ``values`` may be in one run, by the run's filter chunks (False:
        it is not); ``probes``: theirs (:func:`filter_probes`), when the caller checks them
        against several runs.  O(n log chunks) numpy after :meth:`_run_filter`, a dozen calls
        whatever the number of chunks (a dozen per chunk cost about 7 ms a batch of
        10,000 lookups at 20M documents, profiled, and chunks grow in number with the index)."""
        assert self._filters is not None
        name = self._filters[table.index][slot]
        run_filter = self._run_filter(txn, name, cached)
        if not len(run_filter.firsts):
            return np.zeros(len(values), dtype=bool)
        # A chunk answers for values from its first up to the next chunk's first; a value
        # below the first chunk's first is not in the run.
        chunk = np.searchsorted(run_filter.firsts, values, side="right") - 1
        inside = chunk >= 0
        chunk = np.maximum(chunk, 0)
        holds = filter_holds(
            run_filter.joined,
            filter_probes(values) if probes is None else probes,
            run_filter.starts[chunk],
            run_filter.shifts[chunk],
        )
        return inside & holds

    def _run_filter(self, txn: lmdb.Transaction[bytes], name: bytes, cached: bool) -> _RunFilter:
        """The filter chunks of one run.  Chunks are only ever appended (in key order, each
        under a key ending in a random nonce) or dropped with their run, so the count and
        the last key tell whether the cached list is still the stored one: two LMDB calls.
        Otherwise (or when not ``cached``: what is stored, for verify) the keys are listed;
        when the cached keys begin them, only the chunks after those are read and appended,
        else every chunk is read."""
        db = self.handles.db(name)
        cursor = txn.cursor(db)
        count, last = int(txn.stat(db)["entries"]), cursor.key() if cursor.last() else b""
        held = self._filter_cache.get(name) if cached else None
        if held is not None and (held.count, held.last) == (count, last):
            return held
        keys = list(cursor.iternext(values=False)) if cursor.first() else []
        if held is not None and keys[: len(held.keys)] != held.keys:
            held = None  # another run took the slot, or cached chunks were never committed
        fresh = keys if held is None else keys[len(held.keys) :]
        chunks = [self._filter_chunk(txn, db, name, key) for key in fresh]
        run_filter = _RunFilter.build(count, last, fresh, chunks, held)
        if cached:
            self._filter_cache[name] = run_filter
        return run_filter

    @staticmethod
    def _filter_chunk(txn: lmdb.Transaction[bytes], db: lmdb._Database, name: bytes, key: bytes) -> np.ndarray:
        """One stored filter chunk's words, checked for shape: a 16-byte key and at least two
        words, a power of two.  (Damage that clears bits shows in :meth:`verify`, which
        checks every entry against its run's filter; set bits only cost a seek.)"""
        raw = txn.get(key, db=db) if len(key) == 16 else None
        if raw is None or len(raw) % 8 or len(raw) < 16 or (len(raw) // 8) & (len(raw) // 8 - 1):
            raise CorruptDatabaseError(f"{name.decode()} holds a damaged filter chunk", remedy=Remedy.RUN_CHECK)
        return np.frombuffer(raw, dtype="<u8").astype(np.uint64)

    def _merge_parts(
        self, txn: lmdb.Transaction[bytes], table: Table, parts: list[int], permuted: np.ndarray, k: int, exact: bool
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray | None, np.ndarray]:
        """Matches of the permuted queries among the entries of some parts of one table,
        read whole and merged with the queries (sharing their prefix, or equal to them when
        ``exact``): (query positions, stored values, ids (table 0 only, else None),
        distances)."""
        values, ids = self._read_parts(txn, table, parts)
        if exact:
            owners, positions = _equal_positions(values, permuted)
            return owners, values[positions], None if ids is None else ids[positions], np.zeros(len(owners), np.int64)
        owners, positions, distances = table.prefix_matches(values, permuted, k)
        return owners, values[positions], None if ids is None else ids[positions], distances.astype(np.int64)

    def _probed_parts(
        self, txn: lmdb.Transaction[bytes], shape: list[int], queries: list[tuple[Table, int]]
    ) -> list[int]:
        """For each (table, permuted query), the parts of the table to probe (bit 0: the
        recent tree, bit slot + 1: a run): those in ``shape`` that its prefix filters (if
        any) do not rule out."""
        if self._prefix_filters is None:
            return [shape[table.index] for table, _ in queries]
        ruled_out = self._prefix_filters.ruled_out(txn, queries)
        return [shape[table.index] & ~ruled for (table, _), ruled in zip(queries, ruled_out)]

    def _probe_table(
        self,
        txn: lmdb.Transaction[bytes],
        parts: int,
        table: Table,
        query: int,
        low: int,
        high: int,
        k: int,
        found: dict[int, int],
        fingerprints: dict[int, int],
    ) -> None:
        """Entries of some ``parts`` of one table (as in :meth:`_probed_parts`) in [low,
        high) within ``k`` bits of ``query`` (permuted): ids into ``found`` where they are at
        hand (the recent tree; table 0's blocks), and the original fingerprint of each entry
        found in a block into ``fingerprints``.  A cursor and a seek per part."""
        with_ids = table.index == 0
        while parts:
            part = (parts & -parts).bit_length() - 1
            parts &= parts - 1
            if not part:
                name = self._recent[table.index]
                cursor = txn.cursor(self.handles.db(name))
                scan_entries(cursor, low.to_bytes(8, "big"), prefix_bound(high), query, k, found, self.path, name)
                continue
            cursor = txn.cursor(self.handles.db(self._runs[table.index][part - 1]))
            if self._block_at(cursor, low.to_bytes(8, "big")) is None and not cursor.first():
                continue
            where = self._run_labels[table.index][part - 1]
            # Only the values of blocks that start below ``high`` are fetched: a block's
            # value is a whole overflow page.
            key = cursor.key()
            while key:
                first = int.from_bytes(key, "big")
                if first >= high:
                    break
                # The next block is read only when the range may go on past this one's end.
                if not self._scan_block(
                    first, cursor.value(), query, low, high, k, with_ids, table, found, fingerprints, where
                ):
                    break
                key = cursor.key() if cursor.next() else b""

    @staticmethod
    def _block_position(
        first: int, value: bytes, low: int, with_ids: bool, where: str
    ) -> tuple[int, int, int, int, int]:
        """(position of the first entry at or above ``low``, count, offset width, id width,
        where the offsets start) in one block: a bisect over the fixed-width offsets, no
        decoding (position = count when every entry is below ``low``).  A header that does
        not add up raises CorruptDatabaseError naming ``where``."""
        count, width, id_width, _ = block_header(first.to_bytes(8, "big"), value, with_ids, where)
        start = HEADER.size + (ID_BASE.size if with_ids else 0)
        target = low - first
        if target <= 0:
            return 0, count, width, id_width, start
        if width < 8 and target >> (8 * width):
            return count, count, width, id_width, start
        # Fixed-width big-endian offsets sort as byte strings.  A bisect in Python over slices
        # (about 10 steps): measured 1.0 us a block against 1.6 us for numpy's frombuffer and
        # searchsorted, whose call overhead a single block does not repay.
        wanted = target.to_bytes(width, "big")
        lowest, highest = 0, count
        while lowest < highest:
            middle = (lowest + highest) >> 1
            at = start + middle * width
            if value[at : at + width] < wanted:
                lowest = middle + 1
            else:
                highest = middle
        return lowest, count, width, id_width, start

    @classmethod
    def _block_holds(cls, first: int, value: bytes, permuted: int, with_ids: bool, where: str) -> bool:
        """Whether one block holds the value ``permuted``.  One bisect."""
        position, count, width, _, start = cls._block_position(first, value, permuted, with_ids, where)
        at = start + position * width
        return position < count and first + int.from_bytes(value[at : at + width], "big") == permuted

    @classmethod
    def _scan_block(
        cls,
        first: int,
        value: bytes,
        query: int,
        low: int,
        high: int,
        k: int,
        with_ids: bool,
        table: Table,
        found: dict[int, int],
        fingerprints: dict[int, int],
        where: str,
    ) -> bool:
        """Entries of one block in [low, high) within ``k`` bits, as :meth:`_probe_table`
        reports them: a bisect over the fixed-width offsets, then one step per candidate.
        Pure Python, no decoding.  Whether the range may go on in the next block (no entry
        at or above ``high`` here)."""
        lowest, count, width, id_width, start = cls._block_position(first, value, low, with_ids, where)
        ids_at = start + count * width
        for position in range(lowest, count):
            stored = first + int.from_bytes(value[start + position * width : start + (position + 1) * width], "big")
            if stored >= high:
                return False
            distance = (stored ^ query).bit_count()
            if distance <= k:
                if with_ids:
                    base = ID_BASE.unpack_from(value, HEADER.size)[0]
                    at = ids_at + position * id_width
                    found[base + int.from_bytes(value[at : at + id_width], "big")] = distance
                fingerprints[table.unpermute(stored)] = distance
        return True

    def _resolve(self, txn: lmdb.Transaction[bytes], shape: int, unresolved: _Found) -> _Found:
        """(query positions, ids, distances) of ``unresolved`` (query positions, fingerprints
        found in blocks without ids, distances): each distinct fingerprint looked up exactly in
        table 0 (a range of one value), where every id of a fingerprint is stored."""
        owners, fingerprints, distances = unresolved
        if not len(owners):
            return _NO_MATCHES
        # Once per (query, fingerprint): a value stored many times is found once per copy
        # in each table, and each would be given every id of the value.
        order = np.lexsort((fingerprints, owners))
        owners, fingerprints, distances = owners[order], fingerprints[order], distances[order]
        first = np.ones(len(owners), dtype=bool)
        first[1:] = (owners[1:] != owners[:-1]) | (fingerprints[1:] != fingerprints[:-1])
        owners, fingerprints, distances = owners[first], fingerprints[first], distances[first]
        table = self.plan.tables[0]
        distinct, which = np.unique(fingerprints, return_inverse=True)
        exact, ids, _ = self._table_matches(txn, table, shape, table.permute_array(distinct), 0, exact=True)[0]
        held = np.bincount(exact, minlength=len(distinct))
        if not held.all():
            raise _not_in_table_0(int(distinct[np.flatnonzero(held == 0)[0]]))
        # Each unresolved entry gets every id of its fingerprint.
        by_fingerprint = np.argsort(exact, kind="stable")
        entries, rows = _equal_positions(exact[by_fingerprint], which)
        return owners[entries], ids[by_fingerprint[rows]], distances[entries]

    def read_table(
        self, txn: lmdb.Transaction[bytes], table: Table, *, every_key: bool = False
    ) -> tuple[np.ndarray, np.ndarray | None]:
        """(permuted, ids) of every entry of one table in key order (ids only for table 0,
        else None), read in one pass; the recent entries as
        :func:`simdb.btree_tables.read_entries` reads them (``every_key`` there).
        O(n log n)."""
        return self._read_parts(txn, table, range(RUN_SLOTS + 1), every_key=every_key)

    def _read_parts(
        self, txn: lmdb.Transaction[bytes], table: Table, parts: Iterable[int], *, every_key: bool = False
    ) -> tuple[np.ndarray, np.ndarray | None]:
        """:meth:`read_table` over some parts of one table (0: the recent tree, slot + 1: a
        run).  O(n log n)."""
        values, ids = self._gather_parts(txn, table, parts, every_key=every_key)
        if ids is None:
            return np.sort(values), None
        order = np.lexsort((ids, values))
        return values[order], ids[order]

    def _gather_parts(
        self, txn: lmdb.Transaction[bytes], table: Table, parts: Iterable[int], *, every_key: bool = False
    ) -> tuple[np.ndarray, np.ndarray | None]:
        """(values, ids) of some parts of one table (ids for table 0 only), unsorted: the
        recent entries as :func:`simdb.btree_tables.read_entries` reads them (``every_key``
        there), each run :data:`DECODE_SLICE` blocks at a time.  O(n)."""
        chunks_v, chunks_i = [np.empty(0, np.uint64)], [np.empty(0, np.uint64)]
        for part in parts:
            if not part:
                recent = self._recent[table.index]
                values, recent_ids = read_entries(txn, self.handles.db(recent), self.path, recent, every_key=every_key)
                chunks_v.append(values)
                chunks_i.append(recent_ids)
                continue
            for values, ids in self._decoded_run(txn, table, part - 1):
                chunks_v.append(values)
                if ids is not None:
                    chunks_i.append(ids)
        values = np.concatenate(chunks_v)
        del chunks_v
        return values, np.concatenate(chunks_i) if table.index == 0 else None

    def scan(self, txn: lmdb.Transaction[bytes]) -> tuple[np.ndarray, np.ndarray]:
        """All (ids, fingerprints) in id order, from table 0 (for all-pairs): its parts
        gathered a slice of blocks at a time, then one argsort by id (no sort by value).
        O(n log n); at the peak about 40 bytes per entry."""
        table = self.plan.tables[0]
        permuted, ids = self._gather_parts(txn, table, range(RUN_SLOTS + 1))
        assert ids is not None
        order = np.argsort(ids, kind="stable")
        ids = ids[order]
        return ids, table.unpermute_array(permuted[order])

    def _decoded_run(
        self, txn: lmdb.Transaction[bytes], table: Table, slot: int
    ) -> Iterator[tuple[np.ndarray, np.ndarray | None]]:
        """The (values, ids) of one run, in key order, :data:`DECODE_SLICE` blocks at a time,
        so that decoding a large run never holds more than a slice's temporaries."""
        name = self._runs[table.index][slot]
        blocks: list[tuple[bytes, bytes]] = []
        for block in txn.cursor(self.handles.db(name)):
            blocks.append(block)
            if len(blocks) == DECODE_SLICE:
                yield decode_blocks(blocks, table.index == 0, name.decode())
                blocks = []
        if blocks:
            yield decode_blocks(blocks, table.index == 0, name.decode())

    def merge_many(self, txn: lmdb.Transaction[bytes], fingerprints: np.ndarray, k: int) -> list[dict[int, int]]:
        """:meth:`probe_many` as a merge of each whole table with the sorted queries (for
        batches comparable to the stored count).  O(n + q log q) per table."""
        queries = np.asarray(fingerprints, dtype=np.uint64)
        table0 = self.plan.tables[0]
        stored0, ids0 = self.read_table(txn, table0)
        assert ids0 is not None
        owners_all, ids_all, distances_all = [], [], []
        for table in self.plan.tables:
            stored = stored0 if table.index == 0 else self.read_table(txn, table)[0]
            owners, positions, distance = table.prefix_matches(stored, table.permute_array(queries), k)
            if table.index:  # fingerprints only: every id of each fingerprint, from table 0
                exact = table0.permute_array(table.unpermute_array(stored[positions]))
                matched, positions = _equal_positions(stored0, exact)
                owners, distance = owners[matched], distance[matched]
            owners_all.append(owners)
            ids_all.append(ids0[positions])
            distances_all.append(distance)
        found: list[dict[int, int]] = [{} for _ in range(len(queries))]
        for owner, doc_id, distance in zip(
            np.concatenate(owners_all).tolist(),
            np.concatenate(ids_all).tolist(),
            np.concatenate(distances_all).tolist(),
        ):
            found[owner][doc_id] = distance
        return found

    def rewrite(self, source: lmdb.Transaction[bytes], target: lmdb.Environment) -> None:
        """Write the tables as read in ``source`` into the empty environment ``target`` in
        their compacted form (for compaction): each table whole as one run, in key order
        and append mode, with full blocks and no recent entries; a transaction per table.
        O(n log n) per table, one table in memory at a time."""
        layer = Tables(
            self.plan,
            BareHandles(target),
            self.policy,
            path=self.path,
            prefix=self._prefix,
            state=self._state,
            filtered=self._filters is not None,
            prefix_filters=self._prefix_filters is not None,
            label=self.label,
        )
        with target.begin(write=True) as txn:
            layer.create(txn)
        for table in self.plan.tables:
            values, ids = self.read_table(source, table)
            if not len(values):
                continue
            with target.begin(write=True) as txn:
                state = _TableState.empty()
                layer._new_run(txn, table, state, self.policy.level_for(len(values)), values, ids)
                layer._save(txn, table.index, state)

    # -- verification --------------------------------------------------------------------

    def verify_counted(
        self, txn: lmdb.Transaction[bytes], expected: tuple[np.ndarray, np.ndarray] | None = None
    ) -> tuple[list[str], int]:
        """:meth:`verify`, and how many entries the tables' states record.  O(n log n)."""
        entries = sum(n for table in self.plan.tables for _, n in self.runs(txn, table.index))
        return self.verify(txn, expected), entries

    def page_counts(self, txn: lmdb.Transaction[bytes]) -> list[int]:
        """LMDB pages (branch, leaf and overflow) per table, over its recent tree and
        levels, for stats.  O(tables x levels)."""
        return [
            sum(
                pages_in_use(txn, self.handles.db(name))
                for name in (self._recent[table.index], *self._runs[table.index])
            )
            for table in self.plan.tables
        ]

    def filter_pages(self, txn: lmdb.Transaction[bytes]) -> int:
        """LMDB pages of the runs' filters, for stats.  O(filter sub-databases)."""
        return sum(pages_in_use(txn, self.handles.db(name)) for name in self.filter_names)

    def verify(self, txn: lmdb.Transaction[bytes], expected: tuple[np.ndarray, np.ndarray] | None = None) -> list[str]:
        """Problems found: damaged or misordered blocks (header, length, CRC, order within
        and across blocks), counts that disagree with the state, table 0 holding an (id,
        fingerprint) twice or (given ``expected`` ids and fingerprints) entries missing from
        or unexpected in it, and any other table whose fingerprints (with multiplicity)
        differ from the expected ones (without ``expected``: from table 0's).  Never raises
        for damage.  One read of every table; O(n log n)."""
        problems: list[str] = []
        reference: np.ndarray | None = None
        if expected is not None:
            expected_ids, expected_fps = (np.asarray(column, dtype=np.uint64) for column in expected)
            reference = np.sort(expected_fps)
        for table in self.plan.tables:
            problems.extend(self._verify_structure(txn, table))
            try:
                permuted, ids = self.read_table(txn, table, every_key=True)
            except CorruptDatabaseError as exc:
                problems.append(exc.message)
                continue
            fingerprints = table.unpermute_array(permuted)
            if table.index == 0:
                assert ids is not None
                pairs = table_keys_as_pairs(fingerprints, ids)
                if len(np.unique(pairs)) != len(pairs):
                    problems.append(f"{self._named(table)} holds an (id, fingerprint) entry twice")
                if expected is not None:
                    wanted = table_keys_as_pairs(expected_fps, expected_ids)
                    for label, wrong in (
                        ("missing from", np.setdiff1d(wanted, pairs)),
                        ("unexpected in", np.setdiff1d(pairs, wanted)),
                    ):
                        if len(wrong):
                            problems.append(
                                f"{len(wrong)} entries {label} {self._named(table)} ({_shown(wrong['id'], 'id')})"
                            )
                if reference is None:
                    reference = np.sort(fingerprints)
                continue
            if reference is None:
                continue
            have = np.sort(fingerprints)
            for label, wrong in (
                ("missing from", _surplus(reference, have)),
                ("unexpected in", _surplus(have, reference)),
            ):
                if len(wrong):
                    problems.append(
                        f"{len(wrong)} entries {label} table {table.index} ({_shown(wrong, 'fingerprint')})"
                    )
        return problems

    def _verify_structure(self, txn: lmdb.Transaction[bytes], table: Table) -> Iterator[str]:
        """Problems of one table's blocks and state: damaged, misordered or overlapping
        blocks, counts that disagree with the state, entries on the wrong side of a merge's
        cursor, entries in a slot the state calls free, damaged filters, entries a run's
        filter rules out, and filters kept by a free slot."""
        with_ids = table.index == 0
        try:
            state = self._load(txn, table.index)
        except CorruptDatabaseError as exc:
            yield exc.message
            return
        recent = self.handles.db(self._recent[table.index])
        if txn.stat(recent)["entries"] != state.recent:
            yield f"{self._named(table)}: the recent tree's count disagrees with its state"
        cursors = {target: merge.cursor for target, merge in state.merges.items()}
        cursors.update((slot, merge.cursor) for merge in state.merges.values() for slot in merge.sources)
        for slot, name in enumerate(self._runs[table.index]):
            previous_last = -1
            entries = 0
            stored: list[np.ndarray] = []  # a filtered run's values, for its filter
            prefix_filter: np.ndarray | None = None  # its prefix filter's words, checked block by block
            missed_prefixes = 0
            if self._prefix_filters is not None:
                try:
                    prefix_filter = self._prefix_filters.load(txn, table, slot)
                except CorruptDatabaseError as exc:
                    yield exc.message
            for key, value in txn.cursor(self.handles.db(name)):
                try:
                    count, width, id_width, crc = block_header(key, value, with_ids, name.decode())
                except CorruptDatabaseError as exc:
                    yield exc.message
                    continue
                body = value[HEADER.size :]
                if zlib.crc32(body, zlib.crc32(key + bytes((count & 0xFF, width, id_width)))) != crc:
                    yield f"{name.decode()}: the block at {key.hex()} fails its checksum"
                    continue
                values, _ = decode_blocks([(key, value)], with_ids, name.decode())
                if values[0] != int.from_bytes(key, "big") or (
                    len(values) > 1 and bool((values[1:] < values[:-1]).any())
                ):
                    yield f"{name.decode()}: the block at {key.hex()} is out of order"
                if int(values[0]) <= previous_last:
                    yield f"{name.decode()}: the block at {key.hex()} overlaps the one before"
                in_target = slot in state.merges
                if slot in cursors and (
                    int(values[-1]) >= cursors[slot] if in_target else int(values[0]) < cursors[slot]
                ):
                    yield f"{name.decode()}: the block at {key.hex()} is on the wrong side of its merge's cursor"
                previous_last = int(values[-1])
                entries += count
                if self._filters is not None:
                    stored.append(values)
                if prefix_filter is not None and self._prefix_filters is not None:
                    missed_prefixes += int((~self._prefix_filters.holds(table, prefix_filter, values)).sum())
            if stored:
                run_values = np.concatenate(stored)
                try:
                    missed = int((~self._filter_passes(txn, table, slot, run_values, cached=False)).sum())
                except CorruptDatabaseError as exc:
                    yield exc.message
                else:
                    if missed:
                        yield f"{name.decode()}: {missed} entries are missing from the run's filter"
            if missed_prefixes:
                yield f"{name.decode()}: {missed_prefixes} entries are missing from the run's prefix filter"
            if entries and not state.levels[slot]:
                yield f"{name.decode()}: holds {entries} entries in a slot its state calls free"
            elif not state.levels[slot] and self._prefix_filters and self._prefix_filters.kept(txn, table, slot):
                yield f"{name.decode()}: its slot is free but keeps a prefix filter"
            elif self._filters is not None and not state.levels[slot]:
                chunks = txn.stat(self.handles.db(self._filters[table.index][slot]))["entries"]
                if chunks:
                    yield f"{name.decode()}: its slot is free but holds {chunks} filter chunks"
            elif entries != state.entries[slot]:
                yield f"{name.decode()}: holds {entries} entries, its state says {state.entries[slot]}"


#: The first database format whose tables are :class:`Tables`; formats 1 and 2 keep one
#: B-tree per table (:class:`simdb.btree_tables.BTreeTables`) and are still read and written.
FIRST_LOG_STRUCTURED_FORMAT = 4
#: The first format whose runs keep prefix filters (:mod:`simdb.prefix_filters`); format 4
#: and 5 databases are read and written without them.
FIRST_PREFIX_FILTER_FORMAT = 6

TableLayer = BTreeTables | Tables


def layer_for(format_version: int, plan: TablePlan, handles: Handles, path: object = None) -> TableLayer:
    """The tables layer of a database in ``format_version``.  O(tables)."""
    if format_version >= FIRST_LOG_STRUCTURED_FORMAT:
        return Tables(plan, handles, path=path, prefix_filters=format_version >= FIRST_PREFIX_FILTER_FORMAT)
    return BTreeTables(plan, handles, path)
