"""The permutation tables as a log-structured layer: a small B-tree of recent entries beside
levels of immutable, compressed, sorted blocks (issue #16).  Databases of format 3 on store
their tables this way (:func:`layer_for`).  It works inside a caller's LMDB transaction over a
narrow interface (:class:`simdb.storage.Handles`: ``db(name)`` and ``create(txn, name)``), so
the query engines can be tested on a bare environment.

Layout, per table ``NN`` of the plan:

- ``tN.NN.r``, the recent entries: today's 16-byte keys (permuted fingerprint, then the
  document id, both 8 bytes big-endian), empty values.  Kept small (``base`` entries), so
  inserting into it dirties pages of a tree that stays in cache.
- ``tN.NN.L1`` .. ``tN.NN.L<levels>``, the levels: key = the block's first permuted
  fingerprint, 8 bytes big-endian (so each level is still keyed by the permuted fingerprint);
  value = a block of up to ~1,900 bytes (it stays inside a leaf page): header
  ``>IBBI`` (count, offset width, id width, CRC-32 of key and block), then for table 0 the
  smallest id (``>Q``), then ``count`` offsets of the permuted fingerprints from the first,
  each ``offset width`` bytes big-endian (fixed width, so a probe bisects the bytes without
  decoding), then for table 0 ``count`` ids less the smallest, ``id width`` bytes each.
  Equal fingerprints never straddle two blocks, so first fingerprints are unique keys.
- Only table 0 stores document ids in its blocks (Manku et al. store fingerprints only):
  a fingerprint found in another table's block is turned into ids by an exact lookup in table
  0.  Matches are rare, so this costs little, and it saves the log2(N) bits an id takes in
  nine of ten tables.
- ``tables.state``: per table and level, the entry count and the round-robin merge cursor.

Every entry is in exactly one place (the recent tree or one block of one level) at every
commit; a merge step moves a key range of one level into the next inside the caller's
transaction, so a crash at any point leaves the last committed state, and a step's work is
bounded (``chunk`` source entries and the blocks of the next level that overlap them), never a
whole table.  Level ``i`` holds up to ``base * ratio**i`` entries (leveled merging; the last
level is unbounded), so an entry is rewritten about ``ratio`` times per level: O(log N)
sequential bytes per entry, written in key order, in append mode where the next level ends
before the new blocks.

Costs: a probe is one range scan of the recent tree and one seek plus one in-block bisect per
level per table; a delete searches the recent tree, then one block per level, which it
rewrites.
"""

from __future__ import annotations

import bisect
import struct
import zlib
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass

import lmdb
import numpy as np

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
from simdb.plan import BITS, Table, TablePlan, expand_ranges
from simdb.storage import BareHandles, Handles

STATE = b"tables.state"
SHAPE = b"shape"  # key in STATE: see Tables.shape
#: Largest block value: exactly one LMDB overflow page (4096 bytes less its 16-byte header).
#: A value that fits in a leaf page would share it with others, and rewrites in the middle
#: of a level split such pages half empty; an overflow page is allocated whole, and the leaf
#: keeps only a 24-byte node per block.
BLOCK_BYTES = 4080
#: At most this many entries in a block (blocks of near-identical values compress far).
BLOCK_ENTRIES = 1024
#: Table entries encoded at a time when compaction rewrites a table.
REWRITE_SLICE = 1 << 22
_HEADER = struct.Struct(">IBBI")  # count, offset width, id width, crc32
_ID_BASE = struct.Struct(">Q")
_COUNT = struct.Struct(">QQ")  # entries, merge cursor
_FIXED = [np.dtype(f"S{width}") for width in range(1, 9)]
_FIXED.insert(0, _FIXED[0])  # width 0 never reaches the search: every offset is 0


@dataclass
class _Part:
    """A cursor on one part of a table during probes, and the last block it read."""

    level: int
    cursor: lmdb.Cursor[bytes]
    first: int = 1 << BITS  # the last block read: its first value, value, and the next block's first
    value: bytes = b""
    end: int = 0


@dataclass(frozen=True)
class Policy:
    """Merge policy: the recent tree holds up to ``base`` entries per table, level i up to
    ``base * ratio**i``; a merge step moves up to ``chunk`` entries one level down."""

    base: int = 16_384
    ratio: int = 16
    levels: int = 6
    chunk: int = 65_536

    def capacity(self, level: int) -> int:
        return self.base * self.ratio**level if level < self.levels else 1 << 62


# -- blocks --------------------------------------------------------------------------------


def _width(values: np.ndarray) -> np.ndarray:
    """Bytes needed to write each uint64 value (0 for 0).  Eight vectorised comparisons."""
    widths = np.zeros(len(values), dtype=np.int64)
    for byte in range(8):
        widths += values >= np.uint64(1 << (8 * byte))
    return widths


def _pack(values: np.ndarray, widths: np.ndarray) -> bytes:
    """Each value big-endian in its own width of bytes, concatenated.  O(n), vectorised."""
    full = np.ascontiguousarray(values.astype(">u8")).view(np.uint8).reshape(-1, 8)
    keep = np.arange(8)[None, :] >= (8 - widths)[:, None]
    return full[keep].tobytes()


def _unpack(buffer: bytes, widths: np.ndarray) -> np.ndarray:
    """Inverse of :func:`_pack`.  O(n), vectorised."""
    full = np.zeros((len(widths), 8), dtype=np.uint8)
    keep = np.arange(8)[None, :] >= (8 - widths)[:, None]
    full[keep] = np.frombuffer(buffer, dtype=np.uint8)
    return full.view(">u8").ravel().astype(np.uint64)


def encode_blocks(values: np.ndarray, ids: np.ndarray | None) -> list[tuple[bytes, bytes]]:
    """Sorted permuted fingerprints (and, for table 0, their ids, ascending within equal
    values) as (key, block) pairs in key order.  Equal values never straddle blocks.  O(n)
    numpy plus one Python step per block (a few hundred entries)."""
    n = len(values)
    if not n:
        return []
    id_bytes = 0
    if ids is not None:
        id_bytes = int(_width(np.array([int(ids.max() - ids.min())], dtype=np.uint64))[0])
    header = _HEADER.size + (_ID_BASE.size if ids is not None else 0)
    size = BLOCK_ENTRIES
    if n > 1:  # offsets in a block of ``size`` span about size gaps: pick the size that fits
        gap = max(float(values[-1] - values[0]) / (n - 1), 1.0)
        for _ in range(3):
            fp_bytes_est = min(8, int(np.ceil(np.log2(gap * size * 1.1) / 8)))
            size = max(8, min(BLOCK_ENTRIES, (BLOCK_BYTES - header) // max(fp_bytes_est + id_bytes, 1)))
    change = np.flatnonzero(values[1:] != values[:-1]) + 1  # positions where a new value starts
    if len(change):
        wanted = np.arange(size, n, size)
        at = np.searchsorted(change, wanted)
        starts = np.unique(np.concatenate([[0], change[at[at < len(change)]]]))
    else:
        starts = np.array([0])
    # A block whose offsets came out wider than estimated is split where values change.
    for _ in range(8):
        counts = np.diff(np.append(starts, n))
        lasts = np.append(starts[1:], n) - 1
        spans = values[lasts] - values[starts]
        sizes = header + counts * (_width(spans) + id_bytes)
        over = np.flatnonzero((sizes > BLOCK_BYTES) & (counts > 1))
        if not len(over):
            break
        middles = change[np.minimum(np.searchsorted(change, starts[over] + counts[over] // 2), len(change) - 1)]
        splits = middles[(middles > starts[over]) & (middles <= lasts[over])]
        if not len(splits):
            break
        starts = np.unique(np.concatenate([starts, splits]))
    counts = np.diff(np.append(starts, n))
    owner = np.repeat(np.arange(len(starts)), counts)
    firsts = values[starts]
    offsets = values - firsts[owner]
    lasts = np.append(starts[1:], n) - 1
    fp_widths = _width(offsets[lasts])
    fp_bytes = _pack(offsets, fp_widths[owner])
    fp_ends = np.cumsum(counts * fp_widths).tolist()
    if ids is not None:
        id_base = np.minimum.reduceat(ids, starts)
        id_offsets = ids - id_base[owner]
        id_widths = _width(np.maximum.reduceat(id_offsets, starts))
        id_buffer = _pack(id_offsets, id_widths[owner])
        id_ends = np.cumsum(counts * id_widths).tolist()
        id_base_list = id_base.tolist()
        id_width_list = id_widths.tolist()
    keys = firsts.astype(">u8").view("V8").tolist()
    out = []
    fp_start = id_start = 0
    for block, (key, count, fp_width, fp_end) in enumerate(zip(keys, counts.tolist(), fp_widths.tolist(), fp_ends)):
        if ids is not None:
            id_end = id_ends[block]
            body = _ID_BASE.pack(id_base_list[block]) + fp_bytes[fp_start:fp_end] + id_buffer[id_start:id_end]
            id_width = id_width_list[block]
            id_start = id_end
        else:
            body = fp_bytes[fp_start:fp_end]
            id_width = 0
        fp_start = fp_end
        crc = zlib.crc32(body, zlib.crc32(key + bytes((count & 0xFF, fp_width, id_width))))
        out.append((key, _HEADER.pack(count, fp_width, id_width, crc) + body))
    return out


def decode_blocks(pairs: list[tuple[bytes, bytes]], with_ids: bool, where: str) -> tuple[np.ndarray, np.ndarray | None]:
    """(values, ids) of blocks in key order.  Raises CorruptDatabaseError naming ``where`` for
    a block whose lengths do not add up (the CRC is checked by :meth:`Tables.verify`).
    O(n) numpy plus one Python step per block."""
    if not pairs:
        return np.empty(0, dtype=np.uint64), (np.empty(0, dtype=np.uint64) if with_ids else None)
    counts, fp_widths, id_widths, firsts, id_bases = [], [], [], [], []
    fp_parts, id_parts = [], []
    extra = _ID_BASE.size if with_ids else 0
    for key, value in pairs:
        count, fp_width, id_width, _ = _header(key, value, with_ids, where)
        start = _HEADER.size + extra
        middle = start + count * fp_width
        counts.append(count)
        fp_widths.append(fp_width)
        id_widths.append(id_width)
        firsts.append(int.from_bytes(key, "big"))
        fp_parts.append(value[start:middle])
        if with_ids:
            id_bases.append(_ID_BASE.unpack_from(value, _HEADER.size)[0])
            id_parts.append(value[middle:])
    count_array = np.array(counts, dtype=np.int64)
    owner = np.repeat(np.arange(len(counts)), count_array)
    values = _unpack(b"".join(fp_parts), np.array(fp_widths, dtype=np.int64)[owner])
    values += np.array(firsts, dtype=np.uint64)[owner]
    if not with_ids:
        return values, None
    ids = _unpack(b"".join(id_parts), np.array(id_widths, dtype=np.int64)[owner])
    ids += np.array(id_bases, dtype=np.uint64)[owner]
    return values, ids


def _header(key: bytes, value: bytes, with_ids: bool, where: str) -> tuple[int, int, int, int]:
    """A block's header, checked against the block's length.  O(1)."""
    if len(key) != 8 or len(value) < _HEADER.size:
        raise CorruptDatabaseError(f"{where} holds a block {key.hex()} with a damaged header", remedy=Remedy.RUN_CHECK)
    count, fp_width, id_width, crc = _HEADER.unpack_from(value)
    expected = _HEADER.size + (_ID_BASE.size if with_ids else 0) + count * (fp_width + id_width)
    if count == 0 or fp_width > 8 or id_width > 8 or len(value) != expected or (id_width and not with_ids):
        raise CorruptDatabaseError(f"{where} holds a damaged block at key {key.hex()}", remedy=Remedy.RUN_CHECK)
    return count, fp_width, id_width, crc


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


# -- the layer -------------------------------------------------------------------------------


class Tables:
    """The permutation tables of ``plan`` over the sub-databases that ``handles`` names.
    Every method takes the caller's transaction; the layer keeps no state between calls
    except handles."""

    def __init__(self, plan: TablePlan, handles: Handles, policy: Policy = Policy(), *, path: object = None) -> None:
        self.plan = plan
        self.handles = handles
        self.policy = policy
        self.path = path
        if not 1 <= policy.levels <= 7:
            raise ValueError("a policy has 1 to 7 levels")  # the shape mask has a bit per level
        self._recent = [f"t.{t.index:02d}.r".encode() for t in plan.tables]
        self._levels = [
            [f"t.{t.index:02d}.L{level}".encode() for level in range(1, policy.levels + 1)] for t in plan.tables
        ]

    @property
    def names(self) -> list[bytes]:
        """Every sub-database the layer uses (for the environment's max_dbs and handles)."""
        return [STATE, *self._recent, *(name for levels in self._levels for name in levels)]

    def create(self, txn: lmdb.Transaction[bytes]) -> None:
        """Create the sub-databases (idempotent)."""
        for name in self.names:
            self.handles.create(txn, name)
        txn.put(SHAPE, bytes(len(self.plan.tables)), db=self.handles.db(STATE), overwrite=False)

    # -- state ---------------------------------------------------------------------------

    def _state_key(self, table: int, level: int) -> bytes:
        return bytes((table >> 8, table & 0xFF, level))

    def _state(self, txn: lmdb.Transaction[bytes], table: int, level: int) -> tuple[int, int]:
        raw = txn.get(self._state_key(table, level), db=self.handles.db(STATE))
        if raw is None:
            return 0, 0
        if len(raw) != _COUNT.size:
            raise CorruptDatabaseError(f"the state of table {table} level {level} is damaged", remedy=Remedy.RUN_CHECK)
        entries, cursor = _COUNT.unpack(raw)
        return int(entries), int(cursor)

    def _set_state(self, txn: lmdb.Transaction[bytes], table: int, level: int, entries: int, cursor: int) -> None:
        txn.put(self._state_key(table, level), _COUNT.pack(entries, cursor), db=self.handles.db(STATE))
        shape = bytearray(self.shape(txn))
        bit = 1 << level
        now = shape[table] | bit if entries else shape[table] & ~bit
        if now != shape[table]:
            shape[table] = now
            txn.put(SHAPE, bytes(shape), db=self.handles.db(STATE))

    def shape(self, txn: lmdb.Transaction[bytes]) -> bytes:
        """Per table, a bitmask of its non-empty parts (bit 0 the recent tree, bit i level
        i), so that probes skip empty levels.  One get."""
        raw = txn.get(SHAPE, db=self.handles.db(STATE))
        if raw is None or len(raw) != len(self.plan.tables):
            return bytes([0xFF] * len(self.plan.tables))  # unknown: probe everything
        return raw

    def _add_count(self, txn: lmdb.Transaction[bytes], table: int, level: int, delta: int) -> None:
        entries, cursor = self._state(txn, table, level)
        self._set_state(txn, table, level, entries + delta, cursor)

    def counts(self, txn: lmdb.Transaction[bytes], table: int = 0) -> list[int]:
        """Entries in the recent tree and in each level of one table.  O(levels)."""
        return [self._state(txn, table, level)[0] for level in range(self.policy.levels + 1)]

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
        least ``base`` goes straight into the first level whose capacity holds it (one
        merge, in key order); a smaller one into the recent trees.  Then merge steps run in
        the same transaction while a level is over capacity, up to a budget proportional to
        the batch (:meth:`merge_budget`), so the levels keep pace with the adds and a crash
        never leaves a merge half done.  Cost: O(n log n) numpy plus n B-tree puts per
        table for a small batch, plus the merge steps (amortised O(ratio x levels) entry
        rewrites per entry, in key order)."""
        if alongside is not None:
            alongside()
        ids = np.asarray(ids, dtype=np.uint64)
        fingerprints = np.asarray(fingerprints, dtype=np.uint64)
        if not len(ids):
            return
        for table in self.plan.tables:
            if len(ids) >= self.policy.base:
                permuted = table.permute_array(fingerprints)
                order = np.lexsort((ids, permuted))
                level = next(i for i in range(1, self.policy.levels + 1) if self.policy.capacity(i) >= len(ids))
                self._merge_into(txn, table, level, permuted[order], ids[order])
            else:  # the recent tree holds entries as a B-tree table does
                entries = table_entries(table, fingerprints, ids)
                cursor = txn.cursor(self.handles.db(self._recent[table.index]))
                cursor.putmulti(table_entry_pairs(entries), overwrite=False)
                self._add_count(txn, table.index, 0, len(entries))
        self.merge(txn, self.merge_budget(len(ids)))

    def merge_budget(self, added: int) -> int:
        """Entry rewrites that merging may spend after ``added`` documents: 64 per table
        entry added, at least one step's worth.  Leveled merging rewrites an entry about
        ratio/2 times per level, so this keeps the levels within capacity over any run of
        adds, while one small add never pays for more than about one step."""
        return max(self.policy.chunk * (self.policy.ratio + 1), 64 * added * len(self.plan.tables))

    def delete_many(self, txn: lmdb.Transaction[bytes], ids: Iterable[int], fingerprints: Iterable[int]) -> int:
        """Remove the entries of (id, fingerprint) pairs; returns how many table entries were
        removed (tables x pairs when all were stored).  Per table: one delete in the recent
        tree per pair, then, for the pairs not there, each level in turn with the pairs
        grouped by block, so a block is decoded and rewritten once however many of its
        entries go.  State is updated once per part."""
        pairs = [(int(doc_id), int(fingerprint)) for doc_id, fingerprint in zip(ids, fingerprints)]
        removed = 0
        shape = self.shape(txn)
        for table in self.plan.tables:
            recent = self.handles.db(self._recent[table.index])
            left: list[tuple[int, int]] = []  # (permuted, id) not in the recent tree
            for doc_id, fingerprint in pairs:
                permuted = table.permute(fingerprint)
                if not txn.delete(permuted.to_bytes(8, "big") + doc_id.to_bytes(8, "big"), db=recent):
                    left.append((permuted, doc_id))
            if len(pairs) > len(left):
                self._add_count(txn, table.index, 0, len(left) - len(pairs))
                removed += len(pairs) - len(left)
            left.sort()
            for level in range(1, self.policy.levels + 1):
                if not left:
                    break
                if not shape[table.index] >> level & 1:
                    continue
                still = self._delete_from_level(txn, table, level, left)
                if len(still) < len(left):
                    self._add_count(txn, table.index, level, len(still) - len(left))
                    removed += len(left) - len(still)
                left = still
        return removed

    def _delete_from_level(
        self, txn: lmdb.Transaction[bytes], table: Table, level: int, targets: list[tuple[int, int]]
    ) -> list[tuple[int, int]]:
        """Remove the sorted (permuted, id) ``targets`` from one level (for tables without
        ids, any one entry of the value per target); returns those it does not hold.  Each
        touched block is decoded, thinned and rewritten once.  O(blocks touched) numpy steps."""
        name = self._levels[table.index][level - 1]
        db = self.handles.db(name)
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
            values, block_ids = decode_blocks([(key, value)], with_ids, name.decode())
            keep = np.ones(len(values), dtype=bool)
            positions = values.tolist()
            for permuted, doc_id in group:
                first = bisect.bisect_left(positions, permuted)
                hit = None
                for position in range(first, len(positions)):
                    if positions[position] != permuted:
                        break
                    if keep[position] and (block_ids is None or int(block_ids[position]) == doc_id):
                        hit = position
                        break
                if hit is None:
                    missing.append((permuted, doc_id))
                else:
                    keep[hit] = False
            if keep.all():
                continue
            txn.delete(key, db=db)
            if keep.any():
                blocks = encode_blocks(values[keep], block_ids[keep] if block_ids is not None else None)
                for new_key, block in blocks:
                    txn.put(new_key, block, db=db)
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

    # -- merging -------------------------------------------------------------------------

    def merge(self, txn: lmdb.Transaction[bytes], budget: int = 1 << 21) -> bool:
        """Merge steps, shallowest overfull level first, until no level is over its
        capacity or about ``budget`` entries were rewritten; returns whether work remains.
        Each step is bounded: ``chunk`` entries of a level and the overlapping blocks of the
        next."""
        spent = 0
        while spent < budget:
            step = self._overfull(txn)
            if step is None:
                return False
            spent += self._step(txn, *step)
        return self._overfull(txn) is not None

    def _overfull(self, txn: lmdb.Transaction[bytes]) -> tuple[Table, int] | None:
        for level in range(self.policy.levels):
            for table in self.plan.tables:
                if self._state(txn, table.index, level)[0] > self.policy.capacity(level):
                    return table, level
        return None

    def _step(self, txn: lmdb.Transaction[bytes], table: Table, level: int) -> int:
        """Move up to ``chunk`` entries of ``level`` of ``table``, from its cursor on (wrapping
        to the start), into the next level.  Returns the entries rewritten."""
        entries, cursor_value = self._state(txn, table.index, level)
        start = cursor_value.to_bytes(8, "big")
        ids: np.ndarray | None
        if level == 0:
            values, ids, next_cursor = self._take_recent(txn, table, start)
        else:
            values, ids, next_cursor = self._take_blocks(txn, table, level, start)
        if not len(values):  # nothing at or after the cursor: wrap around
            self._set_state(txn, table.index, level, entries, 0)
            return 1
        self._set_state(txn, table.index, level, entries - len(values), next_cursor)
        return len(values) + self._merge_into(txn, table, level + 1, values, ids)

    def _take_recent(
        self, txn: lmdb.Transaction[bytes], table: Table, start: bytes
    ) -> tuple[np.ndarray, np.ndarray, int]:
        """Remove up to ``chunk`` entries of the recent tree from ``start`` on, ending at a
        change of value; their (values, ids) and the next cursor."""
        db = self.handles.db(self._recent[table.index])
        cursor = txn.cursor(db)
        keys: list[bytes] = []
        if cursor.set_range(start):
            for key in cursor.iternext(values=False):
                if len(keys) >= self.policy.chunk and key[:8] != keys[-1][:8]:
                    break
                keys.append(key)
        if not keys:
            return np.empty(0, np.uint64), np.empty(0, np.uint64), 0
        pairs = np.frombuffer(b"".join(keys), dtype=">u8").reshape(-1, 2)
        if len(b"".join(keys)) != 16 * len(keys):
            raise CorruptDatabaseError(
                f"{self._recent[table.index].decode()} holds a key that is not 16 bytes", remedy=Remedy.RUN_CHECK
            )
        # The taken keys are one contiguous range: delete it with one cursor walk.
        cursor.set_key(keys[0])
        for _ in range(len(keys)):
            cursor.delete()
        last = int(pairs[-1, 0])
        return pairs[:, 0].astype(np.uint64), pairs[:, 1].astype(np.uint64), (last + 1) % (1 << BITS)

    def _take_blocks(
        self, txn: lmdb.Transaction[bytes], table: Table, level: int, start: bytes
    ) -> tuple[np.ndarray, np.ndarray | None, int]:
        """Remove whole blocks of ``level`` from the first at or after ``start`` until
        ``chunk`` entries are taken; their (values, ids) and the next cursor."""
        name = self._levels[table.index][level - 1]
        cursor = txn.cursor(self.handles.db(name))
        pairs: list[tuple[bytes, bytes]] = []
        taken = 0
        if cursor.set_range(start):
            while taken < self.policy.chunk:
                key, value = cursor.item()
                pairs.append((key, value))
                taken += _HEADER.unpack_from(value)[0] if len(value) >= _HEADER.size else 0
                if not cursor.delete() or cursor.key() == b"":
                    break
        values, ids = decode_blocks(pairs, table.index == 0, name.decode())
        if not len(values):
            return values, ids, 0
        return values, ids, (int(values[-1]) + 1) % (1 << BITS)

    def _merge_into(
        self, txn: lmdb.Transaction[bytes], table: Table, level: int, values: np.ndarray, ids: np.ndarray | None
    ) -> int:
        """Merge sorted (values, ids) into ``level``: the blocks overlapping their range are
        read, merged with them in key order and rewritten.  Returns entries written."""
        name = self._levels[table.index][level - 1]
        db = self.handles.db(name)
        with_ids = table.index == 0
        cursor = txn.cursor(db)
        low, high = int(values[0]).to_bytes(8, "big"), int(values[-1]).to_bytes(8, "big")
        old: list[tuple[bytes, bytes]] = []
        first = self._block_at(cursor, low)
        found = cursor.first() if first is None else True
        while found and cursor.key() <= high:
            old.append((cursor.key(), cursor.value()))
            cursor.delete()
            found = cursor.key() != b""
        all_values, all_ids = values, ids if with_ids else None
        if old:
            old_values, old_ids = decode_blocks(old, with_ids, name.decode())
            # Both sides are sorted: place the new entries among the old in one pass (equal
            # values keep the old first; order among equal values carries no meaning).
            at = np.searchsorted(old_values, values, side="right") + np.arange(len(values))
            is_new = np.zeros(len(old_values) + len(values), dtype=bool)
            is_new[at] = True
            all_values = np.empty(len(is_new), dtype=np.uint64)
            all_values[at], all_values[~is_new] = values, old_values
            if with_ids and ids is not None and old_ids is not None:
                all_ids = np.empty(len(is_new), dtype=np.uint64)
                all_ids[at], all_ids[~is_new] = ids, old_ids
        blocks = encode_blocks(all_values, all_ids)
        append = not cursor.last() or cursor.key() < blocks[0][0]
        cursor.putmulti(blocks, append=append)
        self._add_count(txn, table.index, level, len(values))
        return len(all_values)

    # -- reading -------------------------------------------------------------------------

    def probe(self, txn: lmdb.Transaction[bytes], fingerprint: int, k: int) -> dict[int, int]:
        """Ids of stored fingerprints within ``k`` bits of ``fingerprint``, with distances:
        per table one range scan of the recent tree and one seek and bisect per level."""
        found: dict[int, int] = {}
        resolve: dict[int, int] = {}  # original fingerprints found in id-less blocks
        shape = self.shape(txn)
        for table in self.plan.tables:
            query = table.permute(fingerprint)
            low = query & table.prefix_mask
            parts = self._parts(txn, table, shape[table.index])
            self._probe_table(parts, table, query, low, low + table.prefix_span, k, found, resolve)
        self._resolve(txn, [resolve], [found], shape)
        return found

    def probe_many(self, txn: lmdb.Transaction[bytes], fingerprints: np.ndarray, k: int) -> list[dict[int, int]]:
        """:meth:`probe` for many queries, each table visited in key order of the queries:
        one cursor per level, and a query whose prefix lies inside the block the previous
        query read reuses it without a seek."""
        queries = np.asarray(fingerprints, dtype=np.uint64)
        found: list[dict[int, int]] = [{} for _ in range(len(queries))]
        resolve: list[dict[int, int]] = [{} for _ in range(len(queries))]
        shape = self.shape(txn)
        for table in self.plan.tables:
            permuted = table.permute_array(queries)
            order = np.argsort(permuted, kind="stable")
            parts = self._parts(txn, table, shape[table.index])
            for index, query in zip(order.tolist(), permuted[order].tolist()):
                low = query & table.prefix_mask
                self._probe_table(parts, table, query, low, low + table.prefix_span, k, found[index], resolve[index])
        self._resolve(txn, resolve, found, shape)
        return found

    def _parts(self, txn: lmdb.Transaction[bytes], table: Table, shape: int) -> list[_Part]:
        """A cursor on each non-empty part of one table (level 0: the recent tree)."""
        names = [self._recent[table.index], *self._levels[table.index]]
        return [
            _Part(level, txn.cursor(self.handles.db(name))) for level, name in enumerate(names) if shape >> level & 1
        ]

    def _probe_table(
        self,
        parts: list[_Part],
        table: Table,
        query: int,
        low: int,
        high: int,
        k: int,
        found: dict[int, int],
        resolve: dict[int, int],
    ) -> None:
        """Entries of one table in [low, high) within ``k`` bits of ``query`` (permuted): ids
        into ``found``; fingerprints from id-less blocks into ``resolve``."""
        with_ids = table.index == 0
        for part in parts:
            cursor = part.cursor
            if not part.level:
                name = self._recent[table.index]
                scan_entries(cursor, low.to_bytes(8, "big"), prefix_bound(high), query, k, found, self.path, name)
                continue
            if part.first <= low and high <= part.end:  # inside the block read last time
                self._scan_block(part.first, part.value, query, low, high, k, with_ids, table, found, resolve)
                continue
            if self._block_at(cursor, low.to_bytes(8, "big")) is None and not cursor.first():
                continue
            # Only the values of blocks that start below ``high`` are fetched: a block's
            # value is a whole overflow page.
            key = cursor.key()
            while key:
                first = int.from_bytes(key, "big")
                if first >= high:
                    break
                value = cursor.value()
                self._scan_block(first, value, query, low, high, k, with_ids, table, found, resolve)
                key = cursor.key() if cursor.next() else b""
                part.first, part.value, part.end = first, value, int.from_bytes(key, "big") if key else 1 << BITS

    @staticmethod
    def _scan_block(
        first: int,
        value: bytes,
        query: int,
        low: int,
        high: int,
        k: int,
        with_ids: bool,
        table: Table,
        found: dict[int, int],
        resolve: dict[int, int],
    ) -> None:
        """Entries of one block in [low, high) within ``k`` bits: a bisect over the
        fixed-width offsets, then one step per candidate.  Pure Python, no decoding."""
        count, width, id_width, _ = _HEADER.unpack_from(value)
        start = _HEADER.size + (_ID_BASE.size if with_ids else 0)
        target = low - first
        lo = 0
        if target > 0:
            if width < 8 and target >> (8 * width):
                return
            # Fixed-width big-endian offsets sort as byte strings: one C-level bisect.
            lo = int(
                np.frombuffer(value, dtype=_FIXED[width], count=count, offset=start).searchsorted(
                    target.to_bytes(width, "big")
                )
            )
        ids_at = start + count * width
        for position in range(lo, count):
            stored = first + int.from_bytes(value[start + position * width : start + (position + 1) * width], "big")
            if stored >= high:
                break
            distance = (stored ^ query).bit_count()
            if distance <= k:
                if with_ids:
                    base = _ID_BASE.unpack_from(value, _HEADER.size)[0]
                    at = ids_at + position * id_width
                    found[base + int.from_bytes(value[at : at + id_width], "big")] = distance
                else:
                    resolve[table.unpermute(stored)] = distance

    def _resolve(
        self, txn: lmdb.Transaction[bytes], resolve: list[dict[int, int]], found: list[dict[int, int]], shape: bytes
    ) -> None:
        """Ids of fingerprints found in id-less blocks: an exact probe of table 0 each."""
        table = self.plan.tables[0]
        parts: list[_Part] | None = None
        for one_resolve, one_found in zip(resolve, found):
            for fingerprint, distance in one_resolve.items():
                if parts is None:
                    parts = self._parts(txn, table, shape[0])
                exact: dict[int, int] = {}
                permuted = table.permute(fingerprint)
                self._probe_table(parts, table, permuted, permuted, permuted + 1, 0, exact, {})
                if not exact:
                    raise CorruptDatabaseError(
                        f"fingerprint {fingerprint:#018x} is in a table but not in table 0", remedy=Remedy.RUN_CHECK
                    )
                for doc_id in exact:
                    one_found[doc_id] = distance

    def read_table(
        self, txn: lmdb.Transaction[bytes], table: Table, *, every_key: bool = False
    ) -> tuple[np.ndarray, np.ndarray | None]:
        """(permuted, ids) of every entry of one table in key order (ids only for table 0,
        else None), read in one pass; the recent entries as
        :func:`simdb.btree_tables.read_entries` reads them (``every_key`` there).
        O(n log n)."""
        recent = self._recent[table.index]
        recent_values, recent_ids = read_entries(txn, self.handles.db(recent), self.path, recent, every_key=every_key)
        parts_v = [recent_values]
        parts_i = [recent_ids]
        with_ids = table.index == 0
        for name in self._levels[table.index]:
            values, ids = decode_blocks(list(txn.cursor(self.handles.db(name))), with_ids, name.decode())
            parts_v.append(values)
            if ids is not None:
                parts_i.append(ids)
        values = np.concatenate(parts_v)
        if not with_ids:
            return np.sort(values), None
        ids = np.concatenate(parts_i)
        order = np.lexsort((ids, values))
        return values[order], ids[order]

    def scan(self, txn: lmdb.Transaction[bytes]) -> tuple[np.ndarray, np.ndarray]:
        """All (ids, fingerprints) in id order, from table 0 (for all-pairs).  O(n log n)."""
        table = self.plan.tables[0]
        permuted, ids = self.read_table(txn, table)
        assert ids is not None
        order = np.argsort(ids, kind="stable")
        return ids[order], table.unpermute_array(permuted[order])

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
                first = np.searchsorted(stored0, exact, side="left")
                many = np.searchsorted(stored0, exact, side="right") - first
                owners, distance = np.repeat(owners, many), np.repeat(distance, many)
                positions = expand_ranges(first, many)
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
        their compacted form (for compaction): each table whole in one level, the first
        whose capacity holds it, in key order and append mode, with full blocks and no
        recent entries; a transaction per table.  O(n log n) per table, one table in memory
        at a time."""
        layer = Tables(self.plan, BareHandles(target), self.policy, path=self.path)
        with target.begin(write=True) as txn:
            layer.create(txn)
        for table in self.plan.tables:
            values, ids = self.read_table(source, table)
            if not len(values):
                continue
            level = next(i for i in range(1, self.policy.levels + 1) if self.policy.capacity(i) >= len(values))
            with target.begin(write=True) as txn:
                # In slices, to bound the encoder's temporaries; a slice that starts inside
                # a run of equal values merges with the block before it.
                for start in range(0, len(values), REWRITE_SLICE):
                    end = start + REWRITE_SLICE
                    layer._merge_into(txn, table, level, values[start:end], None if ids is None else ids[start:end])

    # -- verification --------------------------------------------------------------------

    def verify_counted(
        self, txn: lmdb.Transaction[bytes], expected: tuple[np.ndarray, np.ndarray] | None = None
    ) -> tuple[list[str], int]:
        """:meth:`verify`, and how many entries the tables' states record.  O(n log n)."""
        entries = sum(sum(self.counts(txn, table.index)) for table in self.plan.tables)
        return self.verify(txn, expected), entries

    def page_counts(self, txn: lmdb.Transaction[bytes]) -> list[int]:
        """LMDB pages (branch, leaf and overflow) per table, over its recent tree and
        levels, for stats.  O(tables x levels)."""
        return [
            sum(
                pages_in_use(txn, self.handles.db(name))
                for name in (self._recent[table.index], *self._levels[table.index])
            )
            for table in self.plan.tables
        ]

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
                    problems.append("table 0 holds an (id, fingerprint) entry twice")
                if expected is not None:
                    wanted = table_keys_as_pairs(expected_fps, expected_ids)
                    for label, wrong in (
                        ("missing from", np.setdiff1d(wanted, pairs)),
                        ("unexpected in", np.setdiff1d(pairs, wanted)),
                    ):
                        if len(wrong):
                            problems.append(f"{len(wrong)} entries {label} table 0 ({_shown(wrong['id'], 'id')})")
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
        with_ids = table.index == 0
        recent = self.handles.db(self._recent[table.index])
        if txn.stat(recent)["entries"] != self._state(txn, table.index, 0)[0]:
            yield f"table {table.index}: the recent tree's count disagrees with its state"
        for level, name in enumerate(self._levels[table.index], 1):
            previous_last = -1
            entries = 0
            for key, value in txn.cursor(self.handles.db(name)):
                try:
                    count, width, id_width, crc = _header(key, value, with_ids, name.decode())
                except CorruptDatabaseError as exc:
                    yield exc.message
                    continue
                body = value[_HEADER.size :]
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
                previous_last = int(values[-1])
                entries += count
            recorded = self._state(txn, table.index, level)[0]
            if entries != recorded:
                yield f"{name.decode()}: holds {entries} entries, its state says {recorded}"


#: The first database format whose tables are :class:`Tables`; formats 1 and 2 keep one
#: B-tree per table (:class:`simdb.btree_tables.BTreeTables`) and are still read and written.
FIRST_LOG_STRUCTURED_FORMAT = 3

TableLayer = BTreeTables | Tables


def layer_for(format_version: int, plan: TablePlan, handles: Handles, path: object = None) -> TableLayer:
    """The tables layer of a database in ``format_version``.  O(tables)."""
    if format_version >= FIRST_LOG_STRUCTURED_FORMAT:
        return Tables(plan, handles, path=path)
    return BTreeTables(plan, handles, path)
