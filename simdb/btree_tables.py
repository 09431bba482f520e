"""The permutation tables as :mod:`simdb.database` stores them today: one LMDB B-tree per
table of the plan, named ``table.NN``; key = permuted fingerprint and document id, 16 bytes
big-endian, value empty.  Putting the id in the key (instead of LMDB duplicate values) keeps
every entry a plain, unique, fixed-size key: identical fingerprints under different keys stay
separate entries, deletion names one exact key, and a prefix scan is one contiguous key range.

:class:`BTreeTables` has the interface of the log-structured :class:`simdb.tables.Tables`
(``put_many``, ``delete_many``, ``probe``, ``probe_many``, ``merge_many``, ``scan``,
``verify``), over the same narrow storage interface (:class:`simdb.storage.Handles`), so the
two are interchangeable under the query engines (:mod:`simdb.queries`).  Probes return
``{document id: distance}`` dicts.  Every method works inside the caller's transaction.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor

import lmdb
import numpy as np

from simdb.errors import CorruptDatabaseError, damaged
from simdb.keys import (
    TABLE_KEY_BYTES,
    decode_table_keys,
    describe,
    sorted_table_keys,
    table_entry_pairs,
    table_key,
)
from simdb.plan import BITS, Table, TablePlan
from simdb.storage import Handles, copy_sub_databases

#: put_many sorts the tables' keys on a helper thread, beside the caller's other writes, from
#: this many documents on; below it the thread costs more than it saves (bench/bench_writer.py).
SORT_ON_THREAD_FROM = 2_000
#: Up to this many documents a table's keys are made with int operations: numpy's fixed cost
#: (about 25 us a table) is more than the work for a handful of documents.
FEW_DOCUMENTS = 16
#: Sorts after every 16-byte table key: the bound for the last prefix of a table.
PAST_END = b"\xff" * 17


def table_entries(table: Table, fingerprints: np.ndarray, ids: np.ndarray) -> np.ndarray:
    """:func:`sorted_table_keys` for ``table``: the ascending ``V16`` entry keys of the
    documents ``ids`` (ascending) with ``fingerprints``.  A batch of a few documents (one
    add) is permuted and sorted with int operations, the same order: (permuted, id)."""
    if len(ids) > FEW_DOCUMENTS:
        return sorted_table_keys(table.permute_array, fingerprints, ids)
    keys = sorted(map(table_key, map(table.permute, fingerprints.tolist()), ids.tolist()))
    return np.frombuffer(b"".join(keys), dtype="V16")


def table_keys_as_pairs(permuted: np.ndarray, ids: np.ndarray) -> np.ndarray:
    """(permuted, id) as a structured array, for set operations in :meth:`BTreeTables.verify`."""
    pairs = np.empty(len(ids), dtype=[("fp", np.uint64), ("id", np.uint64)])
    pairs["fp"] = permuted
    pairs["id"] = ids
    return pairs


def put_sorted(
    txn: lmdb.Transaction[bytes],
    db: lmdb._Database,
    pairs: Iterable[tuple[bytes, bytes]],
    first_key: bytes,
    count: int,
) -> None:
    """Put ``count`` (key, value) pairs with ascending unique keys, starting at
    ``first_key``, in LMDB's append mode when they all follow the last stored key (always
    so for a bulk load into an empty sub-database)."""
    if not count:
        return
    cursor = txn.cursor(db)
    append = not cursor.last() or cursor.key() < first_key
    _consumed, added = cursor.putmulti(pairs, append=append, overwrite=not append)
    if added != count:
        raise CorruptDatabaseError(f"only {added} of {count} entries could be written; the batch was not stored")


def scan_entries(
    cursor: lmdb.Cursor[bytes],
    low: bytes,
    bound: bytes,
    query: int,
    k: int,
    found: dict[int, int],
    path: object,
    name: bytes,
) -> bool:
    """Add to ``found`` the ids of the 16-byte entries (permuted fingerprint, id) in
    [low, bound) of the B-tree under ``cursor`` within ``k`` bits of ``query`` (all permuted
    alike: permutations preserve Hamming distance).  Returns False when the tree holds
    nothing at or after ``low``.  A matching entry of another length raises
    CorruptDatabaseError naming ``name`` of the database at ``path``.  Cost: one seek plus
    one step per candidate.  The one range scan of both layouts (a whole table here, the
    recent entries in :class:`simdb.tables.Tables`)."""
    if not cursor.set_range(low):
        return False
    entry = cursor.key()
    while entry < bound:
        distance = (int.from_bytes(entry[:8], "big") ^ query).bit_count()
        if distance <= k:
            if len(entry) != TABLE_KEY_BYTES:
                fault = f"holds a key {describe(entry)} of {len(entry)} bytes, not {TABLE_KEY_BYTES}"
                raise damaged(path, name.decode(), fault)
            found[int.from_bytes(entry[8:], "big")] = distance
        if not cursor.next():
            break
        entry = cursor.key()
    return True


def prefix_bound(high: int) -> bytes:
    """The exclusive upper key of a prefix range ending at ``high`` (a permuted value, or
    2**64 past the last prefix, which no 8-byte key reaches)."""
    return high.to_bytes(8, "big") if high >> BITS == 0 else PAST_END


def read_entries(
    txn: lmdb.Transaction[bytes], db: lmdb._Database, path: object, name: bytes, *, every_key: bool = False
) -> tuple[np.ndarray, np.ndarray]:
    """(permuted, id) uint64 arrays of every 16-byte entry of the B-tree ``db`` (named
    ``name``), in key order, read in one scan.  Keys of the wrong length raise
    CorruptDatabaseError naming the tree: all those that change the total length, which is
    one comparison, or with ``every_key`` (for verify) any, at one more C-level pass.  O(n)."""
    keys: Iterable[bytes] = txn.cursor(db).iternext(values=False)
    if every_key:
        keys = list(keys)
        if keys and set(map(len, keys)) != {TABLE_KEY_BYTES}:
            raise damaged(path, name.decode(), f"holds keys that are not {TABLE_KEY_BYTES} bytes long")
    joined = b"".join(keys)
    if len(joined) != TABLE_KEY_BYTES * txn.stat(db)["entries"]:
        raise damaged(path, name.decode(), f"holds keys that are not {TABLE_KEY_BYTES} bytes long")
    return decode_table_keys(joined)


def pages_in_use(txn: lmdb.Transaction[bytes], db: lmdb._Database) -> int:
    """The pages (branch, leaf and overflow) of the sub-database ``db``.  O(1)."""
    stat = txn.stat(db)
    return int(stat["branch_pages"]) + int(stat["leaf_pages"]) + int(stat["overflow_pages"])


class BTreeTables:
    """The permutation tables of ``plan``, one B-tree each, over the sub-databases that
    ``handles`` names; ``path`` names the database in errors.  Keeps no state between calls
    except handles."""

    #: A query's seeks against its share of merging whole tables (see
    #: :func:`simdb.queries.merges_whole_tables`): the unit.
    seek_cost = 1.0

    def __init__(self, plan: TablePlan, handles: Handles, path: object = None) -> None:
        self.plan = plan
        self.handles = handles
        self.path = path
        self._names = [table.name.encode() for table in plan.tables]

    @property
    def names(self) -> list[bytes]:
        """Every sub-database the layer uses, in table order."""
        return list(self._names)

    def create(self, txn: lmdb.Transaction[bytes]) -> None:
        """Create the sub-databases (idempotent)."""
        for name in self._names:
            self.handles.create(txn, name)

    # -- writing -------------------------------------------------------------------------

    def put_many(
        self,
        txn: lmdb.Transaction[bytes],
        ids: np.ndarray,
        fingerprints: np.ndarray,
        *,
        alongside: Callable[[], None] | None = None,
    ) -> None:
        """Add the entries of new documents ``ids`` (ascending uint64, not stored yet) with
        ``fingerprints``.  ``alongside`` (the caller's other writes of the batch) runs first;
        from :data:`SORT_ON_THREAD_FROM` documents on, the tables' keys are permuted and
        sorted on a helper thread meanwhile (numpy releases the GIL).  Each table is written
        in append mode when the batch follows its last key.  Cost: O(n log n) numpy plus n
        B-tree puts per table."""
        ids = np.asarray(ids, dtype=np.uint64)
        fingerprints = np.asarray(fingerprints, dtype=np.uint64)
        if len(ids) < SORT_ON_THREAD_FROM:
            # A small batch (one add): starting a helper thread and handing each table over
            # to it cost more than the sorts themselves (about 0.5 ms a batch).
            if alongside is not None:
                alongside()
            if len(ids):
                self._put_entries(txn, (table_entries(table, fingerprints, ids) for table in self.plan.tables))
            return
        with ThreadPoolExecutor(max_workers=1) as sorter:
            pending = [sorter.submit(table_entries, table, fingerprints, ids) for table in self.plan.tables]
            if alongside is not None:
                alongside()
            self._put_entries(txn, (future.result() for future in pending))

    def _put_entries(self, txn: lmdb.Transaction[bytes], entries_per_table: Iterable[np.ndarray]) -> None:
        """Write each table's sorted entry keys (``V16`` arrays, in table order)."""
        for name, entries in zip(self._names, entries_per_table):
            put_sorted(txn, self.handles.db(name), table_entry_pairs(entries), entries[0].tobytes(), len(entries))

    def delete_many(self, txn: lmdb.Transaction[bytes], ids: Iterable[int], fingerprints: Iterable[int]) -> int:
        """Remove the entries of (id, fingerprint) pairs; returns how many table entries were
        removed (tables x pairs when all were stored).  O(tables) deletes per pair."""
        removed = 0
        handles = [self.handles.db(name) for name in self._names]
        for doc_id, fingerprint in zip(ids, fingerprints):
            for table, db in zip(self.plan.tables, handles):
                removed += txn.delete(table_key(table.permute(fingerprint), doc_id), db=db)
        return removed

    # -- reading -------------------------------------------------------------------------

    def read_table(
        self, txn: lmdb.Transaction[bytes], table: Table, *, every_key: bool = False
    ) -> tuple[np.ndarray, np.ndarray]:
        """(permuted, id) uint64 arrays of every entry of ``table``, in key order
        (:func:`read_entries`).  O(n)."""
        name = self._names[table.index]
        return read_entries(txn, self.handles.db(name), self.path, name, every_key=every_key)

    def scan(self, txn: lmdb.Transaction[bytes]) -> tuple[np.ndarray, np.ndarray]:
        """All (ids, fingerprints) as uint64 arrays in id (insertion) order, read from the
        first table in one scan (no per-document decoding).  O(n log n)."""
        table = self.plan.tables[0]
        permuted, ids = self.read_table(txn, table)
        order = np.argsort(ids, kind="stable")
        return ids[order], table.unpermute_array(permuted[order])

    def probe(self, txn: lmdb.Transaction[bytes], fingerprint: int, k: int) -> dict[int, int]:
        """Ids of stored fingerprints within ``k`` bits of one query, with their distances:
        one range scan per table over the query's leading bits (past the plan's k, one per
        prefix :meth:`~simdb.plan.TablePlan.flips_for` bits or fewer from it)."""
        found: dict[int, int] = {}
        flips = self.plan.flips_for(k)
        for table, name in zip(self.plan.tables, self._names):
            query = table.permute(fingerprint)
            cursor = txn.cursor(self.handles.db(name))
            for mask in table.prefix_flips(flips):
                low = (query ^ mask) & table.prefix_mask
                bound = low + table.prefix_span
                scan_entries(cursor, low.to_bytes(8, "big"), prefix_bound(bound), query, k, found, self.path, name)
        return found

    def probe_many(self, txn: lmdb.Transaction[bytes], fingerprints: np.ndarray, k: int) -> list[dict[int, int]]:
        """:meth:`probe` for many queries: bounds are computed vectorised per table and the
        queries visit each table in key order, so successive seeks touch nearby pages."""
        queries = np.asarray(fingerprints, dtype=np.uint64)
        found: list[dict[int, int]] = [{} for _ in range(len(queries))]
        for table, name in zip(self.plan.tables, self._names):
            permuted = table.permute_array(queries)
            lows = permuted & np.uint64(table.prefix_mask)
            order = np.argsort(lows, kind="stable")
            lows = lows[order]
            bounds = lows + np.uint64(table.prefix_span)  # wraps to 0 past the last prefix
            bound_bytes = bounds.astype(">u8").view("V8").tolist()
            for position in np.flatnonzero(bounds == 0).tolist():
                bound_bytes[position] = PAST_END
            cursor = txn.cursor(self.handles.db(name))
            for index, low, bound, query in zip(
                order.tolist(), lows.astype(">u8").view("V8").tolist(), bound_bytes, permuted[order].tolist()
            ):
                if not scan_entries(cursor, low, bound, query, k, found[index], self.path, name):
                    break  # no entries at or after this low, nor after the larger ones to come
        return found

    def merge_many(self, txn: lmdb.Transaction[bytes], fingerprints: np.ndarray, k: int) -> list[dict[int, int]]:
        """The batch form of :meth:`probe_many` (Manku's batch queries): each table is read
        once in key order and merged with the sorted queries in numpy, instead of one seek
        per query.  Cost: O(n + q log q) per table for n stored and q queries."""
        queries = np.asarray(fingerprints, dtype=np.uint64)
        query_ids: list[np.ndarray] = []
        doc_ids: list[np.ndarray] = []
        distances: list[np.ndarray] = []
        for table in self.plan.tables:
            stored, ids = self.read_table(txn, table)
            owners, positions, distance = table.prefix_matches(stored, table.permute_array(queries), k)
            query_ids.append(owners)
            doc_ids.append(ids[positions])
            distances.append(distance)
        found: list[dict[int, int]] = [{} for _ in range(len(queries))]
        for owner, doc_id, distance in zip(
            np.concatenate(query_ids).tolist(), np.concatenate(doc_ids).tolist(), np.concatenate(distances).tolist()
        ):
            found[owner][doc_id] = distance  # a match found by several tables is kept once
        return found

    # -- maintenance ---------------------------------------------------------------------

    def verify(self, txn: lmdb.Transaction[bytes], expected: tuple[np.ndarray, np.ndarray] | None = None) -> list[str]:
        """Problems found: a table holding keys of the wrong length, or (given ``expected``
        ids and fingerprints) entries missing from or unexpected in a table.  Never raises
        for damage.  One read of every table; O(n log n), vectorised per table."""
        return self.verify_counted(txn, expected)[0]

    def verify_counted(
        self, txn: lmdb.Transaction[bytes], expected: tuple[np.ndarray, np.ndarray] | None = None
    ) -> tuple[list[str], int]:
        """:meth:`verify`, and how many entries the readable tables hold."""
        problems: list[str] = []
        entries = 0
        for table, name in zip(self.plan.tables, self._names):
            try:
                permuted, entry_ids = self.read_table(txn, table, every_key=True)
            except CorruptDatabaseError as exc:
                problems.append(exc.message)
                continue
            entries += len(entry_ids)
            if expected is None:
                continue
            ids, fingerprints = (np.asarray(column, dtype=np.uint64) for column in expected)
            wanted = np.sort(table_keys_as_pairs(table.permute_array(fingerprints), ids))
            actual = np.sort(table_keys_as_pairs(permuted, entry_ids))
            for label, wrong in (
                ("missing from", np.setdiff1d(wanted, actual)),
                ("unexpected in", np.setdiff1d(actual, wanted)),
            ):
                if len(wrong):
                    shown = ", ".join(f"id {int(pair['id'])}" for pair in wrong[:5])
                    more = ", ..." if len(wrong) > 5 else ""
                    problems.append(f"{len(wrong)} entries {label} {name.decode()} ({shown}{more})")
        return problems, entries

    def rewrite(self, source: lmdb.Transaction[bytes], target: lmdb.Environment) -> None:
        """Copy the tables as read in ``source`` into the empty environment ``target`` with
        full pages (for compaction).  O(entries)."""
        copy_sub_databases(source, self.handles, target, self._names)

    def page_counts(self, txn: lmdb.Transaction[bytes]) -> list[int]:
        """LMDB pages (branch, leaf and overflow) per table, for stats.  O(tables)."""
        return [pages_in_use(txn, self.handles.db(name)) for name in self._names]

    def filter_pages(self, txn: lmdb.Transaction[bytes]) -> int:
        """Pages of filters, for stats: B-tree tables keep none."""
        return 0
