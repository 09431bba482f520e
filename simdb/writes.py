"""The write paths under :class:`simdb.Database`: a batch stored (new keys, replaced and
unchanged ones), stored only where new (``if_new``: near-duplicates of stored documents or of
earlier items skipped), and removals, each inside the caller's write transaction, over the
records, tables and query layers."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import TYPE_CHECKING, NamedTuple

import lmdb
import numpy as np

from simdb import codec
from simdb.batch import Batch, Removals
from simdb.config import Config
from simdb.fingerprint import sketch_agreements
from simdb.keys import encode_id, index_key_order
from simdb.pairsearch import all_pair_arrays, sketch_matrix
from simdb.plan import TablePlan
from simdb.queries import Queries
from simdb.records import Records
from simdb.tables import TableLayer
from simdb.threshold import (
    DEFAULT_THRESHOLD,
    candidate_distance,
    candidate_similarities,
    fingerprint_similarities,
    kind_of,
)

if TYPE_CHECKING:
    from simdb.fingerprint import Fingerprinter


class Skip(NamedTuple):
    """A document that ``if_new=True`` left out, and the stored key it duplicates."""

    key: str
    duplicate_of: str
    distance: int
    similarity: float


@dataclass
class AddResult:
    """What an add did: counts of new and replaced keys, the skipped near-duplicates, and how
    many of the stored documents came from texts with no features (``featureless``).
    ``unchanged`` counts documents whose key was already stored with the same fingerprint,
    meta and sketch: nothing stored would change, so they were not rewritten (nor counted
    as replaced)."""

    added: int = 0
    replaced: int = 0
    skipped: list[Skip] = field(default_factory=list)
    featureless: int = 0
    unchanged: int = 0

    def merge(self, other: AddResult) -> None:
        self.added += other.added
        self.replaced += other.replaced
        self.skipped.extend(other.skipped)
        self.featureless += other.featureless
        self.unchanged += other.unchanged


class _Rule(NamedTuple):
    """When ``if_new`` takes a candidate within ``radius`` bits for a duplicate: similarity
    >= ``threshold``, or, with no threshold, any candidate (within k bits)."""

    radius: int
    threshold: float | None

    def keeps(self, distance: int, similarity: float) -> bool:
        return distance <= self.radius if self.threshold is None else similarity >= self.threshold


#: One step of a commit: a batch folded once per key (with its counts of repeats), a batch
#: to store where new, or removals.
Step = tuple[Batch, int, int] | Batch | Removals


class Writes:
    """The write paths over ``records``, ``tables`` and ``queries`` of a database with the
    settings ``config``.  Every method works inside the caller's write transaction."""

    def __init__(self, config: Config, records: Records, tables: TableLayer, queries: Queries) -> None:
        self._config = config
        self._records = records
        self._tables = tables
        self._queries = queries

    @property
    def plan(self) -> TablePlan:
        return self._config.plan

    @property
    def _fingerprinter(self) -> Fingerprinter | None:
        return self._config.current_fingerprinter()

    @property
    def _sketched(self) -> bool:
        return self._records.sketched

    def apply(
        self, txn: lmdb.Transaction[bytes], steps: Sequence[Step], threshold: float | None
    ) -> tuple[AddResult, int]:
        """Apply the steps in order; returns what the adds did and how many documents were
        removed."""
        result, removed = AddResult(), 0
        for step in steps:
            if isinstance(step, tuple):
                unique, repeats, unchanged_repeats = step
                stored = self.store(txn, unique)
                stored.replaced += repeats  # a repeated key replaced its earlier value in this batch
                stored.unchanged += unchanged_repeats  # or repeated it as it was
                result.merge(stored)
            elif isinstance(step, Batch):
                result.merge(self.store_if_new(txn, step, threshold))
            else:
                removed += self.delete(txn, step)
        return result, removed

    def store(self, txn: lmdb.Transaction[bytes], batch: Batch) -> AddResult:
        """Write a batch with unique keys: new keys get fresh ids, existing keys keep theirs
        and lose their old table entries (and their old sketch).  An existing key whose
        stored record (key, fingerprint, meta) and sketch are byte-for-byte the new ones is
        left alone and counted as unchanged: re-adding an unchanged folder writes nothing
        but its new and changed documents.  Cost: one record (and sketch) read per existing key."""
        records = self._records
        next_id = records.read_next_id(txn)
        result = AddResult()
        if batch.sketches is not None:
            result.featureless = batch.sketches.count(b"")
        new_positions: list[int] = []
        changed_ids: list[int] = []
        changed_fps: list[int] = []
        old_fps: list[int] = []  # the replaced fingerprints of changed_ids
        if records.key_count(txn):
            stored = records.stored(txn, batch.keys, batch.index_keys)
            for position, (found, fingerprint, record) in enumerate(zip(stored, batch.fingerprints, batch.records)):
                if found is None:
                    new_positions.append(position)
                    continue
                doc_id, old = found
                sketch = None if batch.sketches is None else batch.sketches[position]
                # Counted as its first version in the batch would be, added on its own.
                first = batch.first_versions[position] if batch.first_versions is not None else None
                folded = first is not None and first != (record, sketch)  # another version came first
                # keep_stored keeps the stored document only where no other version of its key
                # came before in the batch: added one by one, that version would have replaced it.
                kept = batch.keep_stored and not folded and old.fingerprint == fingerprint
                same = kept or records.unchanged(txn, doc_id, record, sketch)
                if first is None or not folded:
                    counted_same = same
                else:
                    counted_same = (
                        batch.keep_stored and old.fingerprint == codec.unpack_document(first[0], encode_id(doc_id))[1]
                    ) or records.unchanged(txn, doc_id, *first)
                if counted_same:
                    result.unchanged += 1
                else:
                    result.replaced += 1
                if same:
                    continue
                records.replace(txn, doc_id, record, sketch)
                if old.fingerprint != fingerprint:
                    changed_ids.append(doc_id)
                    changed_fps.append(fingerprint)
                    old_fps.append(old.fingerprint)
        else:  # nothing stored yet: every key is new, no lookups needed
            new_positions = list(range(len(batch.keys)))
        if changed_ids:  # one call for the batch: the log-structured tables rewrite a block once
            self._tables.delete_many(txn, changed_ids, old_fps)
        ids = np.concatenate(
            [np.arange(next_id, next_id + len(new_positions), dtype=np.uint64), np.array(changed_ids, dtype=np.uint64)]
        )
        fingerprints = np.array([batch.fingerprints[i] for i in new_positions] + changed_fps, dtype=np.uint64)
        if changed_ids:  # replaced ids are older than the new ones: restore id order
            order = np.argsort(ids, kind="stable")
            ids, fingerprints = ids[order], fingerprints[order]
        if len(ids):
            # The tables' keys are sorted (on a helper thread for a large batch) while the
            # records and the key index are written.
            put_documents = partial(self._put_new_documents, txn, batch, new_positions, next_id)
            self._tables.put_many(txn, ids, fingerprints, alongside=put_documents)
        records.set_next_id(txn, next_id + len(new_positions))
        result.added = len(new_positions)
        return result

    def _put_new_documents(
        self, txn: lmdb.Transaction[bytes], batch: Batch, new_positions: list[int], next_id: int
    ) -> None:
        """Records, sketches and key index entries for the new documents, ids from
        ``next_id`` on."""
        if not new_positions:
            return
        all_new = len(new_positions) == len(batch.keys)
        records = batch.records if all_new else [batch.records[i] for i in new_positions]
        sketches = batch.sketches
        if sketches is not None and not all_new:
            sketches = [sketches[i] for i in new_positions]
        if all_new and batch.key_order is not None:
            key_order = batch.key_order
        else:
            key_order = index_key_order([batch.index_keys[i] for i in new_positions])
        self._records.put_new(txn, next_id, records, sketches, key_order)

    def store_if_new(self, txn: lmdb.Transaction[bytes], batch: Batch, threshold: float | None) -> AddResult:
        """Store each item unless it duplicates a stored document or a kept item earlier in
        this batch, then write the kept ones with one :meth:`store`.  The stored documents
        are probed once for the whole batch (:meth:`Queries.find_many`), the batch's own pairs come
        from an in-memory all-pairs search, and the checks and inserts share the one
        transaction, so two writers cannot both store near-duplicates of each other.
        Cost: one batched probe, O(b log b) in numpy, one Python step per candidate."""
        rule = self._duplicate_rule(threshold, verified=False)
        # An item with a sketch (b"" included) checks its candidates with it, as it would
        # alone, so it may take them from the wider radius that sketches allow.
        if batch.sketches is not None and self._sketched:
            sketched_radius = self._duplicate_rule(threshold, verified=True).radius
            radii = np.array([rule.radius if sketch is None else sketched_radius for sketch in batch.sketches])
        else:
            radii = np.full(len(batch.keys), rule.radius)
        kind = kind_of(self._fingerprinter)
        queries = np.array(batch.fingerprints, dtype=np.uint64)
        found = self._queries.find_many(txn, queries, int(radii.max()))
        stored_matches: list[list[tuple[float, int, int]]] = []  # (-similarity, distance, id), best first
        own_ids: list[int | None] = []
        owners = self._records.stored(txn, batch.keys, batch.index_keys)
        for position, (owner, candidates, radius) in enumerate(zip(owners, found, radii.tolist())):
            own = None if owner is None else owner[0]
            own_ids.append(own)
            if own is not None:
                candidates.pop(own, None)  # a key never duplicates its own earlier version
            ids = [doc_id for doc_id, distance in candidates.items() if distance <= radius]
            distances = np.array([candidates[doc_id] for doc_id in ids], dtype=np.int64)
            query_sketch = None if batch.sketches is None else batch.sketches[position]
            similarities = (
                self._queries.similarities_to(txn, query_sketch, ids, distances, kind) if ids else np.zeros(0)
            )
            rows = zip(ids, distances.tolist(), similarities.tolist())
            stored_matches.append(
                sorted(
                    (-similarity, distance, doc_id)
                    for doc_id, distance, similarity in rows
                    if rule.keeps(distance, similarity)
                )
            )
        earlier = self._batch_duplicates(batch, rule, radii, kind)
        result = AddResult()
        kept: list[int] = []
        live: dict[bytes, int] = {}  # index key -> position of its latest kept version in this batch
        first_kept: dict[bytes, int] = {}  # index key -> position where this batch first kept it
        replaced_ids: set[int] = set()  # stored documents that a kept item replaced
        for position, key in enumerate(batch.keys):
            if self._stored_as_it_is(txn, batch, position, live.get(batch.index_keys[position]), own_ids[position]):
                # Adding it writes nothing: it is unchanged, whatever other document it
                # resembles (both stay stored either way).
                kept.append(position)
                continue
            # As if added one by one: a stored document or kept item replaced earlier in this
            # batch counts in its new version only, and the duplicate named is the most
            # similar, then the nearest, then the oldest, the items kept earlier being stored
            # documents too, each with its key's id (a replacement keeps it) or else a new one
            # in the order they were kept.
            stored = next((row for row in stored_matches[position] if row[2] not in replaced_ids), None)
            # (-similarity, distance, id order, batch position or None for a stored document)
            best: tuple[float, int, tuple[int, int], int | None] | None = (
                None if stored is None else (stored[0], stored[1], (0, stored[2]), None)
            )
            for other, distance, similarity in earlier.get(position, ()):
                other_key = batch.index_keys[other]
                if live.get(other_key) == other:
                    own = own_ids[other]
                    candidate = (
                        -similarity,
                        distance,
                        (0, own) if own is not None else (1, first_kept[other_key]),
                        other,
                    )
                    if best is None or candidate[:3] < best[:3]:
                        best = candidate
            if best is not None:
                negative, distance, (_, doc_id), kept_earlier = best
                duplicate_of = (
                    self._records.indexed(txn, doc_id)[0] if kept_earlier is None else batch.keys[kept_earlier]
                )
                result.skipped.append(Skip(key, duplicate_of, distance, -negative))
                continue
            kept.append(position)
            live[batch.index_keys[position]] = position
            first_kept.setdefault(batch.index_keys[position], position)
            own_id = own_ids[position]
            if own_id is not None:
                replaced_ids.add(own_id)
        if kept:
            unique, repeats, unchanged_repeats = batch.take(kept).once_per_key()
            stored_result = self.store(txn, unique)
            stored_result.replaced += repeats
            stored_result.unchanged += unchanged_repeats
            result.merge(stored_result)
        return result

    def _stored_as_it_is(
        self, txn: lmdb.Transaction[bytes], batch: Batch, position: int, kept_earlier: int | None, own_id: int | None
    ) -> bool:
        """Whether item ``position`` is its key's current version already: the one kept
        earlier in this batch (``kept_earlier``) or else the stored one (``own_id``).
        O(1) LMDB reads."""
        version = batch.version(position)
        if kept_earlier is not None:
            return version == batch.version(kept_earlier)
        if own_id is None:
            return False
        if batch.keep_stored and self._records.indexed(txn, own_id)[1] == batch.fingerprints[position]:
            return True
        return self._records.unchanged(txn, own_id, *version)

    def _duplicate_rule(self, threshold: float | None, verified: bool) -> _Rule:
        """How ``if_new`` decides a duplicate: by similarity when a threshold is given or the
        database has text settings (then :data:`DEFAULT_THRESHOLD`), else within k bits.
        ``verified``: the batch has sketches to check candidates with."""
        if threshold is None and self._fingerprinter is None:
            return _Rule(self.plan.k, None)
        threshold = DEFAULT_THRESHOLD if threshold is None else threshold
        radius = candidate_distance(threshold, kind_of(self._fingerprinter), verified=verified)
        return _Rule(min(self.plan.k, radius), threshold)

    def _batch_duplicates(
        self, batch: Batch, rule: _Rule, radii: np.ndarray, kind: str
    ) -> dict[int, list[tuple[int, int, float]]]:
        """For each item, the earlier items of the same batch (other keys) it duplicates under
        ``rule`` within its own radius (``radii``): position -> [(earlier position,
        distance, similarity)].  An in-memory all-pairs search over the batch's
        fingerprints.  O(b log b + pairs)."""
        if len(batch.keys) < 2:
            return {}
        left, right, distances = all_pair_arrays(np.array(batch.fingerprints, dtype=np.uint64), int(radii.max()))
        same_key = np.array([batch.keys[a] == batch.keys[b] for a, b in zip(left.tolist(), right.tolist())], dtype=bool)
        keep = (~same_key if len(same_key) else np.zeros(0, dtype=bool)) & (distances <= radii[right])
        left, right, distances = left[keep], right[keep], distances[keep]
        if batch.sketches is None:
            similarities = fingerprint_similarities(distances, kind)
        else:  # a featureless item (b"") is similar to nothing
            rows, present = sketch_matrix([sketch or b"" for sketch in batch.sketches])
            similarities = candidate_similarities(distances, sketch_agreements(rows[left], rows[right]), kind)
            similarities[~(present[left] & present[right])] = 0.0
            # As Queries.similarities_to compares the later item with the earlier one: where
            # either has no sketch, the fingerprint's estimate, unless the later is featureless.
            unsketched = np.array([sketch is None for sketch in batch.sketches])
            estimated = (unsketched[left] | unsketched[right]) & (present[right] | unsketched[right])
            similarities[estimated] = fingerprint_similarities(distances[estimated], kind)
        duplicates: dict[int, list[tuple[int, int, float]]] = {}
        for a, b, distance, similarity in zip(left.tolist(), right.tolist(), distances.tolist(), similarities.tolist()):
            if rule.keeps(distance, similarity):
                duplicates.setdefault(b, []).append((a, distance, similarity))
        return duplicates

    def delete(self, txn: lmdb.Transaction[bytes], batch: Removals) -> int:
        """Remove the documents of ``batch`` (absent keys are ignored); returns how many.
        O(tables) deletes per key."""
        ids: list[int] = []
        fingerprints: list[int] = []
        key_indexes: list[bytes] = []
        removed: set[int] = set()
        keys = [key for key, _ in batch]
        for (_, key_index), found in zip(batch, self._records.stored(txn, keys, [key_index for _, key_index in batch])):
            if found is None or found[0] in removed:  # absent, or named twice
                continue
            doc_id, document = found
            removed.add(doc_id)
            ids.append(doc_id)
            fingerprints.append(document.fingerprint)
            key_indexes.append(key_index)
        # One call each for the batch: the log-structured layers rewrite each block once.
        self._records.delete_many(txn, ids, key_indexes)
        self._tables.delete_many(txn, ids, fingerprints)
        return len(ids)

    # -- reading -------------------------------------------------------------------------
