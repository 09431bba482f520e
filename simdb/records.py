"""The documents and the key index: the records layer under :class:`simdb.Database`.

Sub-databases:

- ``docs``: document id (8 bytes big-endian) -> msgpack ``[key, fingerprint, meta]``;
- ``sketches`` (format 2): document id -> the 192-byte verification sketch of a document added
  from text (b"" when the text had no features); documents added as fingerprints have none;
- the key index (:mod:`simdb.key_index`): from the 16-byte digest of the UTF-8 key (see
  :mod:`simdb.keys`) to the document id;
- in ``meta``, ``next_id``: the next document id to hand out.

Every method works inside the caller's transaction over :class:`simdb.storage.Handles`.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any, NamedTuple

import lmdb
import numpy as np

from simdb import codec
from simdb.btree_tables import put_sorted
from simdb.config import META
from simdb.errors import CorruptDatabaseError, InvalidKeyError, Remedy, damaged
from simdb.fingerprint import SKETCH_BYTES
from simdb.key_index import key_index_for
from simdb.keys import check_key, decode_id, describe, encode_id, encode_id_range, index_key
from simdb.storage import Handles, copy_sub_databases, gone_process, host_tag

DOCS = b"docs"
SKETCHES = b"sketches"
NEXT_ID_KEY = b"next_id"
#: META keys of batching writers' flush marks begin so (see :func:`flush_mark_name`), holding
#: the number of the writer's last committed flush (see :class:`simdb.writer.BatchWriter`);
#: marks of releases before the host and process id were in the name are this and 12 bytes.
FLUSH_MARK_PREFIX = b"writer."


def _host_marks() -> bytes:
    """The start of the flush-mark names of this host and pid namespace: :data:`FLUSH_MARK_PREFIX`
    and :func:`~simdb.storage.host_tag`."""
    return FLUSH_MARK_PREFIX + host_tag().encode("ascii") + b"."


def flush_mark_name(unique: bytes) -> bytes:
    """The META key of a batching writer's flush mark: where this process's id means
    something (:func:`~simdb.storage.host_tag`) and that id, then ``unique``, so that the
    marks a gone process left can be told (:meth:`Records.marks_of_gone_writers`)."""
    return _host_marks() + str(os.getpid()).encode() + b"." + unique


#: Document ids are 8 bytes big-endian; the stored next id stays below 2**63, beyond any real
#: count of documents, so a valid one leaves room for any batch and anything higher is damage.
ID_LIMIT = 1 << 63
#: Sketch state of a document in :meth:`Records.sketch_rows`.
NO_SKETCH, FEATURELESS, SKETCHED = 0, 1, 2


class Document(NamedTuple):
    """One stored document."""

    key: str
    fingerprint: int
    meta: Any


class Records:
    """Documents, sketches, the key index and the next id of the database at ``path``
    (named in errors), in ``format_version`` (sketches from format 2 on, unless ``sketched``
    is False: a format 1 database; the key index by :func:`simdb.key_index.key_index_for`)."""

    def __init__(self, handles: Handles, path: str, sketched: bool, format_version: int) -> None:
        self.handles = handles
        self.path = path
        self.sketched = sketched
        self.key_index = key_index_for(format_version, handles, path)

    @staticmethod
    def names_for(format_version: int, handles: Handles) -> list[bytes]:
        """The sub-databases of the records in ``format_version``."""
        return [DOCS, SKETCHES, *key_index_for(format_version, handles).names]

    def create(self, txn: lmdb.Transaction[bytes]) -> None:
        """Create the sub-databases and store the first next id, 0 (a new database)."""
        for name in (DOCS, SKETCHES):
            self.handles.create(txn, name)
        self.key_index.create(txn)
        txn.put(NEXT_ID_KEY, codec.pack(0, "next id"), db=self.handles.db(META))

    def count(self, txn: lmdb.Transaction[bytes]) -> int:
        """How many documents are stored.  O(1)."""
        return int(txn.stat(self.handles.db(DOCS))["entries"])

    def key_count(self, txn: lmdb.Transaction[bytes]) -> int:
        """How many keys the key index holds.  O(1)."""
        return self.key_index.count(txn)

    def sketch_count(self, txn: lmdb.Transaction[bytes]) -> int:
        """How many sketches are stored (0 in a format without them).  O(1)."""
        return int(txn.stat(self.handles.db(SKETCHES))["entries"]) if self.sketched else 0

    # -- the next id ---------------------------------------------------------------------

    def read_next_id(self, txn: lmdb.Transaction[bytes]) -> int:
        """The stored next document id, checked: an int in [0, 2**63) above every stored id
        (a lower one would hand out ids in use).  Damage raises CorruptDatabaseError naming
        it.  Cost: one get and one cursor seek."""
        next_id = codec.unpack(txn.get(NEXT_ID_KEY, db=self.handles.db(META)), "next document id", self.path)
        if type(next_id) is not int or not 0 <= next_id < ID_LIMIT:
            raise damaged(self.path, "next document id", f"is {describe(next_id)}, not an int in [0, 2**63)")
        cursor = txn.cursor(self.handles.db(DOCS))
        if cursor.last() and decode_id(cursor.key()) >= next_id:
            last = decode_id(cursor.key())
            raise damaged(self.path, "next document id", f"is {next_id}, not above the last document id {last}")
        return next_id

    def set_next_id(self, txn: lmdb.Transaction[bytes], next_id: int) -> None:
        txn.put(NEXT_ID_KEY, codec.pack(next_id, "next id"), db=self.handles.db(META))

    # -- batching writers' flush marks ---------------------------------------------------

    def flush_mark(self, txn: lmdb.Transaction[bytes], name: bytes) -> int:
        """The number of the last flush committed by the batching writer ``name`` (a
        :data:`FLUSH_MARK_PREFIX` key), 0 if none.  One get."""
        raw = txn.get(name, db=self.handles.db(META))
        return 0 if raw is None else int(codec.unpack(raw, "flush mark", self.path))

    def put_flush_mark(self, txn: lmdb.Transaction[bytes], name: bytes, number: int) -> None:
        txn.put(name, codec.pack(number, "flush mark"), db=self.handles.db(META))

    def drop_flush_mark(self, txn: lmdb.Transaction[bytes], name: bytes) -> None:
        txn.delete(name, db=self.handles.db(META))

    def marks_of_gone_writers(self, txn: lmdb.Transaction[bytes]) -> list[bytes]:
        """The flush marks (see :func:`flush_mark_name`) of the batching writers of this host
        and pid namespace whose process no longer runs: a writer SIGKILLed, or one whose process ended by a
        signal that runs no exit handlers, never deleted its own.  Marks of older versions
        (no host or process in their name) and other hosts' are never judged.  One cursor
        pass over the marks."""
        prefix = _host_marks()
        gone = []
        with txn.cursor(db=self.handles.db(META)) as cursor:
            if cursor.set_range(prefix):
                for name in cursor.iternext(values=False):
                    if not name.startswith(prefix):
                        break
                    if gone_process(name[len(prefix) :].partition(b".")[0].decode("ascii", "replace")):
                        gone.append(name)
        return gone

    # -- lookups -------------------------------------------------------------------------

    def lookup(self, txn: lmdb.Transaction[bytes], key: str, key_index: bytes) -> tuple[int, Document] | None:
        """The id and document stored under ``key``, if any (:meth:`stored` of one key)."""
        return self.stored(txn, [key], [key_index])[0]

    def stored(
        self, txn: lmdb.Transaction[bytes], keys: Sequence[str], key_indexes: Sequence[bytes]
    ) -> list[tuple[int, Document] | None]:
        """The id and document stored under each key, if any: one batch of key index
        lookups, then one document read per candidate, whose key is compared with the
        key.  A candidate with another key is a hash collision in a format 5 index, and
        damage in the older one (a digest names one key), reported, never trusted."""
        found: list[tuple[int, Document] | None] = [None] * len(keys)
        for position, candidates in self.key_index.candidates(txn, key_indexes).items():
            key = keys[position]
            for doc_id in candidates:
                document = Document(*self.indexed(txn, doc_id))
                if document.key == key:
                    found[position] = (doc_id, document)
                    break
                if self.key_index.unique:
                    raise CorruptDatabaseError(
                        f"the key index entry for {describe(key)} points at {describe(document.key)}",
                        remedy=Remedy.RUN_CHECK,
                    )
        return found

    def indexed(self, txn: lmdb.Transaction[bytes], doc_id: int) -> tuple[str, int, Any]:
        """The record of a document id that the key index holds; a missing one is damage."""
        raw_id = encode_id(doc_id)
        raw = txn.get(raw_id, db=self.handles.db(DOCS))
        if raw is None:
            raise CorruptDatabaseError(f"document id {doc_id} is indexed but missing", remedy=Remedy.RUN_CHECK)
        return codec.unpack_document(raw, raw_id)

    def found(self, txn: lmdb.Transaction[bytes], doc_id: int) -> tuple[str, int, Any]:
        """The record of a document id that a table holds; a missing one is damage."""
        raw_id = encode_id(doc_id)
        raw = txn.get(raw_id, db=self.handles.db(DOCS))
        if raw is None:
            raise CorruptDatabaseError(f"document id {doc_id} is in a table but missing", remedy=Remedy.RUN_CHECK)
        return codec.unpack_document(raw, raw_id)

    def key_of(self, txn: lmdb.Transaction[bytes], doc_id: int) -> str | None:
        """The key of a document id, None when there is none (removed since).  One get."""
        raw_id = encode_id(doc_id)
        raw = txn.get(raw_id, db=self.handles.db(DOCS))
        return None if raw is None else codec.unpack_document(raw, raw_id)[0]

    def stored_sketch(self, txn: lmdb.Transaction[bytes], doc_id: int) -> bytes | None:
        """The stored sketch of one document (b"" if featureless), None if it has none."""
        if not self.sketched:
            return None
        sketch = txn.get(encode_id(doc_id), db=self.handles.db(SKETCHES))
        if sketch is not None and len(sketch) not in (0, SKETCH_BYTES):
            raise damaged(self.path, "sketches", f"hold a sketch of {len(sketch)} bytes for document {doc_id}")
        return sketch

    def unchanged(self, txn: lmdb.Transaction[bytes], doc_id: int, record: bytes, sketch: bytes | None) -> bool:
        """Whether document ``doc_id`` is stored as ``record`` with ``sketch`` (None: a
        fingerprint, which keeps no sketch), so that storing them again would change nothing.
        A database without sketches (format 1) compares the record alone.  O(1) LMDB reads."""
        raw_id = encode_id(doc_id)
        if txn.get(raw_id, db=self.handles.db(DOCS)) != record:
            return False
        if not self.sketched:
            return True
        return txn.get(raw_id, db=self.handles.db(SKETCHES)) == sketch

    # -- writing -------------------------------------------------------------------------

    def replace(self, txn: lmdb.Transaction[bytes], doc_id: int, record: bytes, sketch: bytes | None) -> None:
        """Store a new version of document ``doc_id``: its record and its sketch (or drop
        the old sketch when the new version came as a fingerprint).  O(1) LMDB operations."""
        txn.put(encode_id(doc_id), record, db=self.handles.db(DOCS))
        self._replace_sketch(txn, doc_id, sketch)

    def _replace_sketch(self, txn: lmdb.Transaction[bytes], doc_id: int, sketch: bytes | None) -> None:
        if not self.sketched:
            return
        if sketch is None:
            txn.delete(encode_id(doc_id), db=self.handles.db(SKETCHES))
        else:
            txn.put(encode_id(doc_id), sketch, db=self.handles.db(SKETCHES))

    def put_new(
        self,
        txn: lmdb.Transaction[bytes],
        next_id: int,
        records: Sequence[bytes],
        sketches: Sequence[bytes | None] | None,
        key_order: tuple[np.ndarray, np.ndarray],
    ) -> None:
        """Records, sketches and key index entries for new documents, ids from ``next_id``
        on (a None sketch: none is stored); ``key_order`` is
        :func:`simdb.keys.index_key_order` of their index keys.  Every sub-database is written
        in key order (append mode into an empty one)."""
        if not records:
            return
        new_ids = encode_id_range(next_id, len(records))
        put_sorted(txn, self.handles.db(DOCS), zip(new_ids, records), new_ids[0], len(new_ids))
        if sketches is not None and self.sketched:
            pairs = [(raw_id, sketch) for raw_id, sketch in zip(new_ids, sketches) if sketch is not None]
            if pairs:
                put_sorted(txn, self.handles.db(SKETCHES), pairs, pairs[0][0], len(pairs))
        self.key_index.put_new(txn, next_id, key_order)

    def delete_many(self, txn: lmdb.Transaction[bytes], ids: Sequence[int], key_indexes: Sequence[bytes]) -> None:
        """Remove documents' records, sketches and key index entries.  O(1) LMDB deletes
        each, and one key index removal for the batch."""
        for doc_id in ids:
            txn.delete(encode_id(doc_id), db=self.handles.db(DOCS))
            self._replace_sketch(txn, doc_id, None)
        self.key_index.delete(txn, key_indexes, ids)

    def rewrite(self, source: lmdb.Transaction[bytes], target: lmdb.Environment) -> None:
        """Copy the records into the empty environment ``target`` in key order (for
        compaction), the key index in its compacted form."""
        copy_sub_databases(source, self.handles, target, [DOCS, *([SKETCHES] if self.sketched else [])])
        self.key_index.rewrite(source, target)

    # -- bulk reads ----------------------------------------------------------------------

    def chunk_after(self, txn: lmdb.Transaction[bytes], after: bytes, chunk: int) -> list[tuple[bytes, Any]]:
        """Up to ``chunk`` (raw id, record) rows in id order after the raw id ``after``
        (b"": from the start).  One seek plus one step per row."""
        cursor = txn.cursor(self.handles.db(DOCS))
        if not cursor.set_range(after):
            return []
        if cursor.key() == after and not cursor.next():
            return []
        rows = []
        for raw_id, raw in cursor:
            rows.append((raw_id, codec.unpack_document(raw, raw_id)))
            if len(rows) >= chunk:
                break
        return rows

    def all_keys(self, txn: lmdb.Transaction[bytes]) -> tuple[np.ndarray, list[str]]:
        """Every document's id (uint64, ascending) and key, in one scan.  O(n)."""
        ids: list[int] = []
        keys: list[str] = []
        for raw_id, raw in txn.cursor(self.handles.db(DOCS)):
            ids.append(decode_id(raw_id))
            keys.append(codec.unpack_document(raw, raw_id)[0])
        return np.array(ids, dtype=np.uint64), keys

    def sketch_rows(self, txn: lmdb.Transaction[bytes], ids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The sketches of documents ``ids`` (ascending) as an (n, 192) uint8 matrix, and a
        state per row (:data:`NO_SKETCH`, :data:`FEATURELESS`, :data:`SKETCHED`); a sketch
        without a document is left out.  One scan of the sketches.  O(n log n)."""
        rows = np.zeros((len(ids), SKETCH_BYTES), dtype=np.uint8)
        state = np.full(len(ids), NO_SKETCH, dtype=np.int8)
        if not self.sketched:
            return rows, state
        raw_ids, values = [], []
        for raw_id, value in txn.cursor(self.handles.db(SKETCHES)):
            if len(raw_id) != 8 or len(value) not in (0, SKETCH_BYTES):
                raise damaged(self.path, "sketches", f"hold an entry {describe(raw_id)} of {len(value)} bytes")
            raw_ids.append(raw_id)
            values.append(value)
        if raw_ids and len(ids):
            sketch_ids = np.frombuffer(b"".join(raw_ids), dtype=">u8").astype(np.uint64)
            at = np.minimum(np.searchsorted(ids, sketch_ids), len(ids) - 1)
            known = ids[at] == sketch_ids  # a sketch without a document is left out
            full = np.fromiter(map(len, values), dtype=np.int64, count=len(values)) == SKETCH_BYTES
            state[at[known]] = FEATURELESS
            state[at[known & full]] = SKETCHED
            matrix = np.frombuffer(b"".join(v for v in values if v), dtype=np.uint8).reshape(-1, SKETCH_BYTES)
            rows[at[known & full]] = matrix[known[full]]
        return rows, state

    def verify(self, txn: lmdb.Transaction[bytes]) -> tuple[list[str], np.ndarray, np.ndarray]:
        """Problems of the records (each valid, below the next id), the sketches (each of a
        document, of a valid length) and the key index (agreeing with the documents both
        ways), and the (ids, fingerprints) of the valid documents for checking the tables.
        Never raises for damage.  One scan of each sub-database."""
        problems: list[str] = []
        ids: list[int] = []
        fingerprints: list[int] = []
        id_by_index_key: dict[bytes, int] = {}
        try:
            next_id: int | None = self.read_next_id(txn)
        except CorruptDatabaseError as exc:
            problems.append(exc.message)
            next_id = None
        for raw_id, raw in txn.cursor(self.handles.db(DOCS)):
            try:
                key, fingerprint, _ = codec.unpack_document(raw, raw_id)  # first: checks raw_id's length
                doc_id = decode_id(raw_id)
                id_by_index_key[index_key(check_key(key))] = doc_id
            except CorruptDatabaseError as exc:
                problems.append(exc.message)
                continue
            except InvalidKeyError as exc:  # a str key that is not valid Unicode, or too long in bytes
                problems.append(f"{codec.document_name(raw_id)}: {exc.message}")
                continue
            if next_id is not None and doc_id >= next_id:
                problems.append(f"document {doc_id} is at or above the next id {next_id}")
            ids.append(doc_id)
            fingerprints.append(fingerprint)
        if self.sketched:
            known = set(ids)
            for raw_id, sketch in txn.cursor(self.handles.db(SKETCHES)):
                if len(raw_id) != 8 or decode_id(raw_id) not in known:
                    problems.append(f"sketch entry {describe(raw_id)} has no matching document")
                elif len(sketch) not in (0, SKETCH_BYTES):
                    problems.append(
                        f"the sketch of document {decode_id(raw_id)} is {len(sketch)} bytes, not {SKETCH_BYTES} or 0"
                    )
        problems.extend(self.key_index.verify(txn, list(id_by_index_key), list(id_by_index_key.values())))
        return problems, np.array(ids, dtype=np.uint64), np.array(fingerprints, dtype=np.uint64)
