"""The key index: from a document's key to its id, in one of two layouts.

- Formats 1, 2 and 4 (:class:`BTreeKeyIndex`): ``keys``, one B-tree from the 16-byte digest
  of a key (:func:`simdb.keys.index_key`) to the document id.  A digest is random, so once
  the tree is much larger than a batch, each new key dirties a page of its own: at 100M
  documents, about 4 KB written per key added.
- Format 5 on (:class:`RunKeyIndex`): the log-structured layer of the permutation tables
  (:class:`simdb.tables.Tables`) with one identity table, keyed by the first 8 bytes of the
  digest, with a Bloom filter per run.  New keys are appended in runs and merged by size
  tiers, and a batch of lookups seeks only in the runs whose filter passes the key.  Eight
  bytes can collide, so an entry names candidates: the caller compares the full key stored in
  the document (as it always did).

Both work inside the caller's transaction.
"""

from __future__ import annotations

from collections.abc import Sequence

import lmdb
import numpy as np

from simdb.btree_tables import put_sorted
from simdb.errors import damaged
from simdb.keys import decode_id, describe
from simdb.plan import TablePlan
from simdb.storage import Handles, copy_sub_databases
from simdb.tables import Policy, Tables

KEYS = b"keys"
KEY_RUNS_PREFIX = "k"
KEY_RUNS_STATE = b"keys.state"
#: The first format whose key index is :class:`RunKeyIndex`.
FIRST_RUN_KEY_INDEX_FORMAT = 5


def key_hashes(index_keys: Sequence[bytes]) -> np.ndarray:
    """The first 8 bytes of each 16-byte index key, as uint64.  O(n)."""
    return np.frombuffer(b"".join(index_keys), dtype=">u8").reshape(-1, 2)[:, 0].astype(np.uint64)


class BTreeKeyIndex:
    """The key index of formats 1, 2 and 4: one B-tree, index key -> document id.  A digest
    names one key, so an entry whose document has another key is damage."""

    unique = True

    def __init__(self, handles: Handles, path: object = None) -> None:
        self.handles = handles
        self.path = path

    names = (KEYS,)

    def create(self, txn: lmdb.Transaction[bytes]) -> None:
        self.handles.create(txn, KEYS)

    def count(self, txn: lmdb.Transaction[bytes]) -> int:
        """How many keys the index holds.  O(1)."""
        return int(txn.stat(self.handles.db(KEYS))["entries"])

    def candidates(self, txn: lmdb.Transaction[bytes], index_keys: Sequence[bytes]) -> dict[int, list[int]]:
        """The id stored under each index key the index holds, by position in
        ``index_keys``.  One C-level multi-get, in key order so that it walks the tree's
        pages in order."""
        found = dict(txn.cursor(self.handles.db(KEYS)).getmulti(sorted(set(index_keys))))
        for raw_id in found.values():
            if len(raw_id) != 8:
                raise damaged(
                    self.path, "key index", f"holds a document id {describe(raw_id)} that is not 8 bytes long"
                )
        return {position: [decode_id(found[key])] for position, key in enumerate(index_keys) if key in found}

    def put_new(self, txn: lmdb.Transaction[bytes], next_id: int, key_order: tuple[np.ndarray, np.ndarray]) -> None:
        """Entries for new documents, ids from ``next_id`` on; ``key_order`` is
        :func:`simdb.keys.index_key_order` of their index keys.  In key order."""
        order, ordered = key_order
        # The i-th new document gets id next_id + i; list its keys and ids in key order.
        sorted_ids = (order.astype(np.uint64) + np.uint64(next_id)).astype(">u8").view("V8").tolist()
        sorted_keys = np.ascontiguousarray(ordered).view("V16").ravel().tolist()
        put_sorted(txn, self.handles.db(KEYS), zip(sorted_keys, sorted_ids), sorted_keys[0], len(sorted_keys))

    def delete(self, txn: lmdb.Transaction[bytes], index_keys: Sequence[bytes], ids: Sequence[int]) -> None:
        """Remove the entries of removed documents.  One delete each."""
        db = self.handles.db(KEYS)
        for key in index_keys:
            txn.delete(key, db=db)

    def verify(self, txn: lmdb.Transaction[bytes], index_keys: Sequence[bytes], ids: Sequence[int]) -> list[str]:
        """Problems: entries that name no document with that key, and documents (``ids``
        with ``index_keys``) missing from the index.  One scan."""
        problems = []
        wanted = dict(zip(index_keys, ids))
        for key_index, raw_id in txn.cursor(self.handles.db(KEYS)):
            if wanted.pop(key_index, None) != decode_id(raw_id):
                problems.append(
                    f"key index entry {describe(key_index)} -> {decode_id(raw_id)} has no matching document"
                )
        for key_index, doc_id in wanted.items():
            problems.append(f"document {doc_id} ({describe(key_index)}) is missing from the key index")
        return problems

    def rewrite(self, source: lmdb.Transaction[bytes], target: lmdb.Environment) -> None:
        """Copy the index into the empty environment ``target`` with full pages."""
        copy_sub_databases(source, self.handles, target, [KEYS])


class RunKeyIndex:
    """The key index of format 5 on: sorted runs of (8-byte key hash, id) with a Bloom filter
    each, beside a small B-tree of recent entries (:class:`simdb.tables.Tables`).  Eight
    bytes can collide, so an entry names a candidate, confirmed by the document's key."""

    unique = False

    def __init__(self, handles: Handles, path: object = None, policy: Policy | None = None) -> None:
        self.handles = handles
        self.runs = Tables(
            TablePlan.create(0, 1),
            handles,
            policy or Policy(),
            path=path,
            prefix=KEY_RUNS_PREFIX,
            state=KEY_RUNS_STATE,
            filtered=True,
            prefix_filters=False,
            label="key index",
        )

    @property
    def names(self) -> tuple[bytes, ...]:
        return tuple(self.runs.names)

    def create(self, txn: lmdb.Transaction[bytes]) -> None:
        self.runs.create(txn)

    def count(self, txn: lmdb.Transaction[bytes]) -> int:
        """How many entries the index holds.  One get."""
        return sum(entries for _, entries in self.runs.runs(txn))

    def candidates(self, txn: lmdb.Transaction[bytes], index_keys: Sequence[bytes]) -> dict[int, list[int]]:
        """The ids stored under each index key's hash (usually one), by position in
        ``index_keys``, for the keys that have any.  A batch of lookups seeks in a run only
        where the run's filter passes the hash (:meth:`simdb.tables.Tables.matches`)."""
        if not index_keys:
            return {}
        return {position: sorted(ids) for position, ids in self.runs.matches(txn, key_hashes(index_keys), 0).items()}

    def put_new(self, txn: lmdb.Transaction[bytes], next_id: int, key_order: tuple[np.ndarray, np.ndarray]) -> None:
        """Entries for new documents, ids from ``next_id`` on (``key_order`` as for
        :meth:`BTreeKeyIndex.put_new`): a new run, or the recent tree, then merge steps."""
        order, ordered = key_order
        hashes = np.empty(len(order), dtype=np.uint64)
        hashes[order] = ordered[:, 0]
        self.runs.put_many(txn, np.arange(next_id, next_id + len(order), dtype=np.uint64), hashes)

    def delete(self, txn: lmdb.Transaction[bytes], index_keys: Sequence[bytes], ids: Sequence[int]) -> None:
        """Remove the entries of removed documents: each run's touched blocks rewritten once."""
        if ids:
            self.runs.delete_many(txn, ids, key_hashes(index_keys).tolist())

    def verify(self, txn: lmdb.Transaction[bytes], index_keys: Sequence[bytes], ids: Sequence[int]) -> list[str]:
        """Problems: damaged runs or filters, and entries that differ from the documents'
        (``ids`` with ``index_keys``).  One read of the index; O(n log n)."""
        expected = (np.array(ids, dtype=np.uint64), key_hashes(index_keys) if index_keys else np.empty(0, np.uint64))
        return self.runs.verify(txn, expected)

    def rewrite(self, source: lmdb.Transaction[bytes], target: lmdb.Environment) -> None:
        """Write the index into the empty environment ``target`` as one run."""
        self.runs.rewrite(source, target)


KeyIndex = BTreeKeyIndex | RunKeyIndex


def key_index_for(format_version: int, handles: Handles, path: object = None) -> KeyIndex:
    """The key index of a database in ``format_version``."""
    if format_version >= FIRST_RUN_KEY_INDEX_FORMAT:
        return RunKeyIndex(handles, path)
    return BTreeKeyIndex(handles, path)
