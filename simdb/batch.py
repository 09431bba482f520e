"""A validated batch of writes in columns, and batches of removals: what
:class:`simdb.Database` and its :class:`simdb.BatchWriter` commit in one transaction."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from simdb import codec
from simdb.errors import InvalidInputError
from simdb.fingerprint import SKETCH_BYTES
from simdb.keys import (
    FINGERPRINT_LIMIT,
    MAX_KEY_BYTES,
    check_fingerprint,
    check_key,
    describe,
    index_key,
    index_key_order,
    index_keys,
)


@dataclass
class Batch:
    """A validated batch in columns: keys, key-index keys, fingerprints, encoded records."""

    keys: list[str]
    index_keys: list[bytes]
    fingerprints: list[int]
    records: list[bytes]
    #: Positions in index-key order and the index keys in that order, once computed.
    key_order: tuple[np.ndarray, np.ndarray] | None = None
    #: The sketch of each item added from text or given one (b"" for a featureless text;
    #: None for an item given without one); None when the batch came as fingerprints alone.
    sketches: list[bytes | None] | None = None
    #: After :meth:`once_per_key` folded repeats: each key's first (record, sketch) in the
    #: batch, which one-by-one adding compares with the stored version (None: the values held).
    first_versions: list[tuple[bytes, bytes | None]] | None = None
    #: An item whose key is stored with the same fingerprint leaves that document as it is
    #: (see ``keep_stored`` of :meth:`simdb.Database.add_many`).
    keep_stored: bool = False

    @classmethod
    def prepare(cls, items: Iterable[Sequence[Any]], first_position: int) -> Batch:
        """Validate and encode items; raises on the first bad one, naming its position."""
        rows = list(items)
        return cls._prepare_plain(rows) or cls._prepare_each(rows, first_position)

    @classmethod
    def _prepare_plain(cls, rows: list[Any]) -> Batch | None:
        """The common case checked column-wise in C-level passes: tuples of a str key and an
        int fingerprint (and meta, and a sketch as an import gives it).  None at the first
        doubt; :meth:`_prepare_each` then finds and names the culprit."""
        lengths = set(map(len, rows)) if rows and set(map(type, rows)) == {tuple} else {0}
        if not lengths <= {2, 3, 4}:
            return None
        keys = [row[0] for row in rows]
        fingerprints = [row[1] for row in rows]
        if set(map(type, keys)) != {str} or set(map(type, fingerprints)) != {int}:
            return None
        # A key longer than the limit in characters is too long in bytes: refuse it before
        # encoding, so a huge key is never copied.
        if (
            min(fingerprints) < 0
            or max(fingerprints) >= FINGERPRINT_LIMIT
            or not 0 < min(map(len, keys)) <= max(map(len, keys)) <= MAX_KEY_BYTES
        ):
            return None
        try:
            encoded = list(map(str.encode, keys))
        except UnicodeEncodeError:
            return None
        if max(map(len, encoded)) > MAX_KEY_BYTES:
            return None
        metas = None if lengths == {2} else [row[2] if len(row) >= 3 else None for row in rows]
        sketches = None
        if 4 in lengths:
            sketches = [row[3] if len(row) == 4 else None for row in rows]
            if not all(map(_well_formed, sketches, fingerprints)):
                return None
            if all(sketch is None for sketch in sketches):
                sketches = None
        records = codec.pack_documents(keys, fingerprints, metas)
        if records is None:
            return None
        return cls(keys, index_keys(encoded), fingerprints, records, sketches=sketches)

    @classmethod
    def _prepare_each(cls, rows: list[Any], first_position: int) -> Batch:
        """Item by item: lists, numpy integers, items with sketches and other accepted
        forms, and the precise error for a bad item."""
        batch = cls([], [], [], [])
        sketches: list[bytes | None] = []
        for position, item in enumerate(rows, first_position):
            if not isinstance(item, (tuple, list)) or not 2 <= len(item) <= 4:
                raise InvalidInputError(
                    f"item {position} ({describe(item)}) is not (key, fingerprint), (key, fingerprint, meta) "
                    "or (key, fingerprint, meta, sketch)"
                )
            key = item[0]
            fingerprint = check_fingerprint(item[1])
            batch.index_keys.append(index_key(check_key(key)))
            batch.keys.append(key)
            batch.fingerprints.append(fingerprint)
            batch.records.append(codec.pack_document(key, fingerprint, item[2] if len(item) >= 3 else None))
            sketches.append(_checked_sketch(item[3], fingerprint, f"item {position}") if len(item) == 4 else None)
        if any(sketch is not None for sketch in sketches):
            batch.sketches = sketches
        return batch

    def once_per_key(self) -> tuple[Batch, int, int]:
        """The batch with each key once, where it first occurs, holding its last occurrence's
        value (and its first, for counting); and how many repeats were folded in that
        replaced, and that repeated unchanged, the occurrence before them.  That is what
        adding the items one by one would leave and count, whatever the batch size.
        O(n log n) in numpy."""
        order, ordered = index_key_order(self.index_keys)  # equal keys adjacent, in batch order
        repeats = (ordered[:-1] == ordered[1:]).all(axis=1)  # sorted item i + 1 repeats item i
        if not repeats.any():
            self.key_order = (order, ordered)
            return self, 0, 0
        positions = order.tolist()
        unchanged = sum(
            self.version(positions[i]) == self.version(positions[i + 1]) for i in np.flatnonzero(repeats).tolist()
        )
        starts = np.flatnonzero(np.concatenate([[True], ~repeats]))
        ends = np.append(starts[1:], len(order)) - 1
        last_of = dict(zip(order[starts].tolist(), order[ends].tolist()))
        firsts = sorted(last_of)
        folded = Batch(
            [self.keys[i] for i in firsts],
            [self.index_keys[i] for i in firsts],
            [self.fingerprints[last_of[i]] for i in firsts],
            [self.records[last_of[i]] for i in firsts],
            sketches=None if self.sketches is None else [self.sketches[last_of[i]] for i in firsts],
            first_versions=[self.version(i) for i in firsts],
            keep_stored=self.keep_stored,
        )
        folds = len(self.keys) - len(firsts)
        return folded, folds - unchanged, unchanged

    def version(self, position: int) -> tuple[bytes, bytes | None]:
        """What is stored for the item at ``position``: its record and its sketch."""
        return self.records[position], None if self.sketches is None else self.sketches[position]

    def single(self, position: int) -> Batch:
        return self.take([position])

    def take(self, positions: Sequence[int]) -> Batch:
        """The batch of the items at ``positions``, in that order.  O(len(positions))."""
        return Batch(
            [self.keys[i] for i in positions],
            [self.index_keys[i] for i in positions],
            [self.fingerprints[i] for i in positions],
            [self.records[i] for i in positions],
            sketches=None if self.sketches is None else [self.sketches[i] for i in positions],
            keep_stored=self.keep_stored,
        )


def _well_formed(sketch: Any, fingerprint: int) -> bool:
    """Whether an item's sketch is None (none), :data:`SKETCH_BYTES` bytes, or b"" for a
    featureless text, whose fingerprint is 0."""
    return sketch is None or (
        isinstance(sketch, bytes) and (len(sketch) == SKETCH_BYTES or (not sketch and not fingerprint))
    )


def _checked_sketch(sketch: Any, fingerprint: int, owner: str) -> bytes | None:
    """The sketch of ``owner`` (an item or a query, named in errors) if :func:`_well_formed`,
    else InvalidInputError saying what is wrong."""
    if _well_formed(sketch, fingerprint):
        return sketch  # None or bytes: checked just above
    if not isinstance(sketch, bytes) or len(sketch) not in (0, SKETCH_BYTES):
        raise InvalidInputError(
            f"{owner} has sketch={describe(sketch)}, not {SKETCH_BYTES} bytes, b'' or None",
            "give the sketch that Fingerprinter.fingerprint_and_sketch made with the fingerprint",
        )
    raise InvalidInputError(
        f"{owner} has the empty sketch of a featureless text but fingerprint {fingerprint:#x}, not 0"
    )


def checked_sketches(sketches: list[Any], fingerprints: list[int]) -> list[bytes | None]:
    """``sketches`` checked as the sketches of queries, one per fingerprint (None for a query
    without one), else InvalidInputError naming the first bad one.  O(len(sketches))."""
    if len(sketches) != len(fingerprints):
        raise InvalidInputError(
            f"{len(sketches)} sketches were given for {len(fingerprints)} fingerprints", "give one per fingerprint"
        )
    return [_checked_sketch(sketch, fp, f"query {i}") for i, (sketch, fp) in enumerate(zip(sketches, fingerprints))]


#: A batch of removals: ``(key, index key)`` pairs, as :meth:`Database._delete` takes them.
Removals = list[tuple[str, bytes]]
