"""The database API: :func:`open` and :class:`Database`, a thin facade over the layers.

- :mod:`simdb.config`: the settings (format version, k, blocks and plan, fingerprint
  settings) in the ``meta`` sub-database, merged once at open;
- :mod:`simdb.records`: the documents (``docs``), their sketches (``sketches``), the key
  index (``keys``) and the next document id;
- :mod:`simdb.tables`: the permutation tables, log-structured (format 3 on: a small B-tree
  of recent entries and levels of compressed sorted blocks per table), or one B-tree
  ``table.NN`` each in formats 1 and 2 (:mod:`simdb.btree_tables`);
- :mod:`simdb.queries`: the query engines over the tables and the records.

The facade checks arguments, holds the transactions (:class:`simdb.storage.Storage`),
batches writes and wires the layers.  Every change to a document touches ``docs``, ``keys``
and all tables in one write transaction, so no reader ever sees a document without its table
entries, or the reverse.
"""

from __future__ import annotations

import math
import os
import pathlib
import sys
import warnings
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass
from functools import partial
from itertools import islice
from typing import TYPE_CHECKING, Any, NamedTuple

import lmdb
import numpy as np

from simdb.allpairs import (
    ComponentLabeler,
    cluster_labels,
    iter_clusters,
    leader_labels,
    resolve_workers,
)
from simdb.arrays import distinct, search_sorted
from simdb.batch import Batch, Removals, checked_sketches
from simdb.checking import CheckReport, check_in_child
from simdb.config import (
    CONFIG_KEY,
    DEFAULT_BLOCKS,
    DEFAULT_K,
    FINGERPRINTER_KEY,
    FORMAT_VERSION,
    META,
    READABLE_FORMATS,
    Config,
    new_plan,
)
from simdb.errors import IfNewReachWarning, InvalidInputError, InvalidKeyError
from simdb.fingerprint import SKETCH_BYTES
from simdb.key_index import KEYS
from simdb.keys import (
    check_fingerprint,
    check_key,
    decode_id,
    describe,
    index_key,
    iterate,
)
from simdb.pairsearch import (
    SIMILARITY_BUCKETS,
    Snapshot,
    pair_blocks,
    pair_similarities,
    pairs_plan,
    search_seconds,
)
from simdb.plan import BITS, TablePlan, read_share_words
from simdb.queries import Match, Queries
from simdb.records import (
    DOCS,
    FEATURELESS,
    ID_LIMIT,
    NEXT_ID_KEY,
    SKETCHES,
    Document,
    Records,
)
from simdb.storage import MAX_MAP_SIZE, Storage, copy_sub_databases, reporting_commit
from simdb.tables import layer_for
from simdb.threshold import (
    DEFAULT_THRESHOLD,
    candidate_distance,
    check_threshold,
    if_new_blind_spot,
    kind_of,
)
from simdb.validation import check_bool, check_distance, check_int, of_type
from simdb.writes import AddResult, Skip, Writes

if TYPE_CHECKING:
    from simdb.fingerprint import Fingerprinter
    from simdb.writer import BatchWriter

#: Re-exported: the settings and sub-database names, where callers have found them so far.
__all__ = [
    "CONFIG_KEY",
    "DEFAULT_BLOCKS",
    "DEFAULT_K",
    "DOCS",
    "FINGERPRINTER_KEY",
    "FORMAT_VERSION",
    "ID_LIMIT",
    "KEYS",
    "META",
    "NEXT_ID_KEY",
    "READABLE_FORMATS",
    "SKETCHES",
    "AddResult",
    "CheckReport",
    "Cluster",
    "CompactResult",
    "Database",
    "Document",
    "Match",
    "Pair",
    "Skip",
    "open",
]

DEFAULT_BATCH_SIZE = 100_000
#: Database.writer's defaults (see simdb/writer.py): flushes as large as add_texts' batches,
#: as a commit into a large database rewrites about every leaf page its random keys touch.
DEFAULT_MAX_BATCH = 10_000
DEFAULT_MAX_DELAY = 1.0


class Pair(NamedTuple):
    """One near-duplicate pair from :meth:`Database.pairs`, ``key_a`` added first."""

    key_a: str
    key_b: str
    distance: int
    similarity: float


class Cluster(NamedTuple):
    """One group from :meth:`Database.clusters_with_spread`: its keys, the first-added first
    (its representative); the smallest similarity of the pairs found inside it, its weakest
    link; and the smallest similarity of the representative to another member (both None
    for a singleton).  A cluster of connected components can hold a member far from the
    representative, linked through others: ``to_representative`` below the threshold says
    that the cluster chained (in leaders mode it never does)."""

    keys: list[str]
    min_similarity: float | None
    to_representative: float | None


#: How :meth:`Database.clusters` groups the pair graph: connected components, or leaders.
CLUSTER_MODES = ("components", "leaders")


def check_cluster_mode(mode: object) -> str:
    """``mode`` if it is one of :data:`CLUSTER_MODES`, else InvalidInputError naming it."""
    if mode not in CLUSTER_MODES:
        raise InvalidInputError(
            f"mode={describe(mode)} is not one of {', '.join(CLUSTER_MODES)}",
            argument="mode",
            value=mode,
            expected=" or ".join(CLUSTER_MODES),
        )
    return str(mode)


@dataclass
class CompactResult:
    bytes_before: int
    bytes_after: int


def open(  # noqa: A001 - the public name is simdb.open, as in the spec
    path: str | os.PathLike[str],
    *,
    k: int | None = None,
    blocks: int | None = None,
    readonly: bool = False,
    fingerprinter: Fingerprinter | None = None,
    create: bool = True,
    map_size: int | None = None,
) -> Database:
    """Open the database at ``path``, creating it if missing (unless ``readonly`` or
    ``create=False``).

    ``k`` (default 5 at creation) is the largest distance answered with no false negatives;
    ``blocks`` is the block count m > k: 6 for the default k (6 tables of 10-11 leading bits,
    chosen for recall at the default threshold at under 500 bytes per document), else by
    default the smallest giving every table about log2(1M) leading bits or more.  Both are
    stored at creation; giving a different value later raises :class:`ConfigMismatchError`.
    ``fingerprinter`` fixes the text settings the same way.  ``map_size`` is the initial LMDB
    map size; the map grows by itself when needed.
    """
    return Database(
        path, k=k, blocks=blocks, readonly=readonly, fingerprinter=fingerprinter, create=create, map_size=map_size
    )


def _check_path(path: object) -> pathlib.Path:
    """``path`` as a Path, refused with InvalidInputError unless it is a str or path-like of
    valid UTF-8 (LMDB opens its files by UTF-8 path) without NUL (which no file name holds).
    O(len(path))."""
    if not isinstance(path, (str, os.PathLike)):
        raise InvalidInputError(f"path {describe(path)} is {of_type(path)}, not a str or path")
    text = os.fspath(path)
    try:
        text.encode()  # type: ignore[union-attr]
    except (UnicodeEncodeError, AttributeError):
        raise InvalidInputError(
            f"path {describe(text)} is not valid UTF-8, which LMDB needs to open its files",
            "give a database directory whose path is valid UTF-8",
        ) from None
    if "\0" in text:  # type: ignore[operator]
        raise InvalidInputError(f"path {describe(text)} holds a NUL character, which no file name can")
    return pathlib.Path(text)  # type: ignore[arg-type]


def _check_open_arguments(path: object, k: object, blocks: object, fingerprinter: object, map_size: object) -> None:
    """Refuse arguments of the wrong type or range before anything is opened.  O(1)."""
    _check_path(path)
    if k is not None:
        check_distance(k)
    for name, value in (("blocks", blocks), ("map_size", map_size)):
        if value is not None:
            check_int(name, value, minimum=1)
    if map_size is not None and map_size > MAX_MAP_SIZE:  # type: ignore[operator]  # an int: checked above
        raise InvalidInputError(
            f"map_size={map_size} is over the largest map simdb can address, {MAX_MAP_SIZE} (2**44)"
        )
    if fingerprinter is None:
        return
    from simdb.fingerprint import Fingerprinter

    if not isinstance(fingerprinter, Fingerprinter):
        raise InvalidInputError(
            f"fingerprinter={describe(fingerprinter)} is not a Fingerprinter", "make one with simdb.Fingerprinter(...)"
        )
    if fingerprinter.bits != BITS:
        raise InvalidInputError(
            f"fingerprinter {fingerprinter!r} makes {fingerprinter.bits}-bit fingerprints; "
            f"the index stores {BITS}-bit ones",
            f"use bits={BITS}",
        )


class Database:
    """A persistent index of documents by their 64-bit fingerprints (minwise hashes or
    SimHash).  Safe to share between threads; many processes may read while one writes.  Use
    as a context manager, or call :meth:`close`."""

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        k: int | None = None,
        blocks: int | None = None,
        readonly: bool = False,
        fingerprinter: Fingerprinter | None = None,
        create: bool = True,
        map_size: int | None = None,
    ) -> None:
        _check_open_arguments(path, k, blocks, fingerprinter, map_size)
        if create and not readonly and not Storage.exists(path):
            # A new database's plan is checked before its directory is made, so that a
            # refused open leaves nothing behind for a later open to pick up.
            new_plan(k, blocks)
        storage = self._storage = Storage.open(path, readonly=readonly, create=create, names=[META], map_size=map_size)

        def layer_names(plan: TablePlan, format_version: int) -> list[bytes]:
            return [*Records.names_for(format_version, storage), *layer_for(format_version, plan, storage).names]

        def create_layers(txn: lmdb.Transaction[bytes], plan: TablePlan, format_version: int) -> None:
            Records(storage, self.path, sketched=True, format_version=format_version).create(txn)
            layer_for(format_version, plan, storage).create(txn)

        try:
            self._config = Config.open(storage, k, blocks, fingerprinter, create, layer_names, create_layers)
        except BaseException:
            storage.close()
            raise
        self._tables = layer_for(self._format, self.plan, storage, self.path)
        self._records = Records(storage, self.path, sketched=self._sketched, format_version=self._format)
        self._queries = Queries(self._tables, self._records, storage.read, storage.reading_in_this_thread)
        self._blind_spots_warned: set[float] = set()  # thresholds an if_new add warned of
        self._writes = Writes(self._config, self._records, self._tables, self._queries)

    # -- configuration -------------------------------------------------------------------

    @property
    def plan(self) -> TablePlan:
        """The block plan: k, the blocks and the permutation tables."""
        return self._config.plan

    @property
    def _fingerprinter(self) -> Fingerprinter | None:
        return self._config.current_fingerprinter()

    @property
    def _format(self) -> int:
        return self._config.format

    @property
    def _table_names(self) -> list[bytes]:
        return self._tables.names

    @property
    def path(self) -> str:
        return str(self._storage.path)

    @property
    def k(self) -> int:
        return self.plan.k

    @property
    def readonly(self) -> bool:
        return self._storage.readonly

    @property
    def fingerprinter(self) -> Fingerprinter | None:
        """The stored text settings, or None if only fingerprints were ever given."""
        return self._fingerprinter

    def fingerprint(self, text: str) -> int:
        """Fingerprint ``text`` with the database's own settings (storing the defaults the
        first time, if none were given)."""
        return self._text_fingerprinter().fingerprint(text)

    def _text_fingerprinter(self) -> Fingerprinter:
        return self._config.text_fingerprinter()

    def _resolve(self, fingerprint: object, text: str | None) -> int:
        if text is not None:
            if fingerprint is not None:
                raise InvalidInputError("both a fingerprint and text= were given", "give one of them")
            return self.fingerprint(text)
        if fingerprint is None:
            raise InvalidInputError("no fingerprint was given", "pass a fingerprint or text=")
        return check_fingerprint(fingerprint)

    def _check_k(self, k: int | None) -> int:
        """``k`` checked as a distance (0-64), or the index's k when None.  A k past the index's
        is answered exactly too, only slower (see :meth:`query`)."""
        return self.plan.k if k is None else check_distance(k, maximum=BITS)

    # -- lifecycle -----------------------------------------------------------------------

    def close(self) -> None:
        """Close the batching writers of this handle that hold operations (flushing them),
        then the environment.  If a writer's flush fails, its error is raised and the database
        stays open: fix the cause and close again, or ``discard()`` that writer.  Idempotent."""
        self._close_writers()
        self._storage.close()

    def __enter__(self) -> Database:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, *exc_info: object) -> None:
        # With an exception in flight, a read this thread is inside (a generator such as
        # pairs() left suspended, its frame kept by the traceback) must not replace that
        # exception by ReadInProgressError: the handle closes as the read ends, when the
        # exception has been dealt with and its traceback freed.
        self._close_writers()
        self._storage.close(when_reads_end=exc_type is not None)

    def _close_writers(self) -> None:
        """Close this handle's batching writers that hold operations, unless it is closed
        (their flushes failed then, and they keep their buffers for ``discard()``)."""
        if not self._storage.closed:
            from simdb.writer import close_writers

            close_writers(self)

    def __repr__(self) -> str:
        state = "closed" if self._storage.closed else f"k={self.plan.k}, blocks={self.plan.blocks}"
        return f"<simdb.Database {self.path!r} {state}>"

    # -- writing -------------------------------------------------------------------------

    def add(
        self,
        key: str,
        fingerprint: int | None = None,
        meta: Any = None,
        *,
        text: str | None = None,
        if_new: bool = False,
        threshold: float | None = None,
    ) -> AddResult:
        """Store one document, replacing any document under the same key.  From ``text`` its
        sketch is stored too.  With ``if_new=True`` the document is skipped if a stored one
        is similar (see :meth:`add_many`)."""
        if text is not None:
            if fingerprint is not None:
                raise InvalidInputError("both a fingerprint and text= were given", "give one of them")
            fingerprint, sketch = self._text_fingerprinter().fingerprint_and_sketch(text)
            item: tuple[Any, ...] = (key, fingerprint, meta, sketch)
        else:
            item = (key, self._resolve(fingerprint, None), meta)
        return self._add_batches(self._batches(iter([item]), 1), if_new, threshold, None, stacklevel=4)

    def writer(
        self,
        *,
        max_batch: int = DEFAULT_MAX_BATCH,
        max_delay: float = DEFAULT_MAX_DELAY,
        if_new: bool = False,
        threshold: float | None = None,
    ) -> BatchWriter:
        """A :class:`~simdb.BatchWriter` that buffers single ``add`` and ``remove`` calls and
        commits them ``max_batch`` at a time (or once the oldest is ``max_delay`` seconds old,
        checked on each call), in one write transaction each, and on ``flush()`` and at the
        end of its ``with`` block: ``with db.writer() as w: w.add(key, text=...)``.  An add is
        durable once the flush that commits it returns; a crash loses at most the operations
        since the last flush, never part of one.  See :class:`~simdb.BatchWriter`."""
        from simdb.writer import BatchWriter

        self._storage.check_writable()
        writer = BatchWriter(self, max_batch=max_batch, max_delay=max_delay, if_new=if_new, threshold=threshold)
        if if_new:  # before the write below: under -W error the warning raises, and nothing is written
            self._warn_if_new_is_blind(threshold, stacklevel=3)  # checked by BatchWriter
        self._drop_marks_of_gone_writers()
        return writer

    def add_many(
        self,
        items: Iterable[Sequence[Any]],
        *,
        batch_size: int = DEFAULT_BATCH_SIZE,
        if_new: bool = False,
        threshold: float | None = None,
        on_batch: Callable[[AddResult], None] | None = None,
        keep_stored: bool = False,
    ) -> AddResult:
        """Store ``(key, fingerprint)`` or ``(key, fingerprint, meta)`` items, or
        ``(key, fingerprint, meta, sketch)`` ones: a document as :meth:`sketched_items` reads
        it back (the sketch of a text under the database's fingerprint settings, b"" for a
        featureless text, or None), so that a copy compares and pairs as the original did.
        Each batch of ``batch_size`` items is validated whole and then written in one
        transaction; a bad item rejects its batch before anything of it is written.
        ``on_batch`` is called with the running totals after each commit.  Cost: O(b log b)
        per batch of b plus LMDB puts; a batch into empty tables (a bulk load) is written in
        append mode.

        ``if_new=True`` skips each item that duplicates a stored document (or a kept item
        earlier in the same batch): similarity >= ``threshold`` (default
        :data:`DEFAULT_THRESHOLD` once the database has text settings), or, for a database of
        fingerprints only and no threshold, within the index k bits.  One batched probe and
        one write per batch.

        ``keep_stored=True``: an item whose key is stored with the same fingerprint leaves
        that document as it is, its meta and sketch included, and counts as unchanged; for
        fingerprints that come without the meta and sketch the stored copy has (a Parquet
        shard's), which would otherwise replace them with none."""
        _check_batch_size(batch_size)
        check_bool("keep_stored", keep_stored)
        return self._add_batches(
            self._batches(iterate(items, "items"), batch_size, keep_stored), if_new, threshold, on_batch, stacklevel=4
        )

    @staticmethod
    def _batches(iterator: Iterator[Any], batch_size: int, keep_stored: bool = False) -> Iterator[Batch]:
        """Validated batches of ``batch_size`` items."""
        position = 0
        while True:
            batch = Batch.prepare(islice(iterator, batch_size), position)
            if not batch.keys:
                return
            batch.keep_stored = keep_stored
            position += len(batch.keys)
            yield batch

    def _add_batches(
        self,
        batches: Iterator[Batch],
        if_new: bool,
        threshold: float | None,
        on_batch: Callable[[AddResult], None] | None,
        *,
        stacklevel: int,
    ) -> AddResult:
        """Commit ``batches`` (see :meth:`add_many`); ``stacklevel`` places an if_new warning
        at the line that called the public method (see :meth:`_warn_if_new_is_blind`)."""
        if threshold is not None:
            threshold = check_threshold(threshold)
        if on_batch is not None and not callable(on_batch):  # before the first batch commits
            raise InvalidInputError(f"on_batch={describe(on_batch)} is not callable", "pass a function of an AddResult")
        if if_new:
            self._warn_if_new_is_blind(threshold, stacklevel)
        total = AddResult()
        for batch in batches:
            if batch.sketches is not None and self._fingerprinter is None:
                # A sketch is compared with those of texts, which these settings will make.
                raise InvalidInputError(
                    f"items with sketches were given, but {self.path} has no fingerprint settings",
                    "open it with the fingerprinter= that made the sketches",
                )
            # One section: an interrupt that a handler defers until it (see commit_in_progress)
            # comes after on_batch has heard of the commit, not between the two.
            with reporting_commit():
                total.merge(self._commit(batch, if_new, threshold))
                if on_batch is not None:
                    on_batch(total)
        return total

    def add_texts(
        self,
        items: Iterable[Sequence[Any]],
        *,
        workers: int | None = None,
        batch_size: int = 10_000,
        if_new: bool = False,
        threshold: float | None = None,
        on_batch: Callable[[AddResult], None] | None = None,
    ) -> AddResult:
        """Fingerprint ``(key, text)`` or ``(key, text, meta)`` items with the database's
        settings and store them with their sketches (one pass over each text for both) as
        :meth:`add_many` does, ``batch_size`` per transaction; ``if_new`` and ``threshold``
        as there.  With ``workers`` > 1 one process pool serves the whole input, and
        fingerprints are stored as they come: memory holds the texts in flight and one batch."""
        _check_batch_size(batch_size)
        if threshold is not None:
            check_threshold(threshold)
        return self._add_batches(
            self._text_batches(items, workers, batch_size), if_new, threshold, on_batch, stacklevel=4
        )

    def _text_batches(self, items: Iterable[Sequence[Any]], workers: int | None, batch_size: int) -> Iterator[Batch]:
        """Validated batches of ``batch_size`` ``(key, text[, meta])`` items, fingerprinted
        with their sketches (in a pool of ``workers`` processes when > 1).  The fingerprint
        settings and ``workers`` are settled now, the texts are read as batches are asked for."""
        fingerprinter = self._text_fingerprinter()
        waiting: deque[tuple[Any, Any]] = deque()  # (key, meta) of texts sent, in order

        item_iterator = iterate(items, "items")
        # A bad item, or the items' own iterator failing, ends the texts here and is raised
        # by the batch it falls in: a pool reads ahead of the batches being stored, and raised
        # as it was read it came out before the valid batches ahead of it were committed
        # (none of 2,100 were, where one worker committed them all).
        failure: list[Exception] = []

        def texts() -> Iterator[Any]:
            try:
                for position, item in enumerate(item_iterator):
                    if (
                        not isinstance(item, (tuple, list))
                        or len(item) not in (2, 3)
                        or not isinstance(item[1], (str, bytes, bytearray, memoryview))
                    ):
                        raise InvalidInputError(
                            f"item {position} ({describe(item)}) is not (key, text) or (key, text, meta)"
                        )
                    waiting.append((item[0], item[2] if len(item) == 3 else None))
                    yield item[1]
            except Exception as error:  # noqa: BLE001 - raised again, by the batch it falls in
                failure.append(error)

        pairs = fingerprinter.iter_fingerprints_and_sketches(texts(), workers)

        def batches() -> Iterator[Batch]:
            position = 0
            while True:
                rows: list[tuple[Any, int, Any]] = []
                sketches: list[bytes | None] = []
                for fingerprint, sketch in islice(pairs, batch_size):
                    key, meta = waiting.popleft()  # fingerprints come back in the order sent
                    rows.append((key, fingerprint, meta))
                    sketches.append(sketch)
                if failure and len(rows) < batch_size:  # the texts ended early: this batch holds the failure
                    raise failure[0]
                if not rows:
                    return
                batch = Batch.prepare(rows, position)
                batch.sketches = sketches
                position += len(rows)
                yield batch

        return batches()

    def _warn_if_new_is_blind(self, threshold: float | None, stacklevel: int) -> None:
        """Warn (:class:`~simdb.IfNewReachWarning`, once per handle and threshold) when most
        pairs at the ``if_new`` threshold lie beyond the index's k, where it cannot see
        them.  A database of fingerprints only with no threshold means "within k": none."""
        if threshold is None and self._fingerprinter is None:
            return
        threshold = DEFAULT_THRESHOLD if threshold is None else threshold
        if threshold in self._blind_spots_warned:
            return
        self._blind_spots_warned.add(threshold)
        blind = if_new_blind_spot(self.k, threshold, kind_of(self._fingerprinter))
        if blind is not None:
            warnings.warn(
                f"if_new compares each document only with the stored ones within the index's {self.k} bits, where "
                f"{1 - blind.unseen:.0%} of the pairs at similarity {threshold:g} lie, so near-duplicates will be "
                f"stored (clusters(threshold={threshold:g}, mode='leaders') groups them, at any threshold; a database "
                f"made with k={blind.needed_k} would check them all as it adds, reading "
                f"{read_share_words(blind.read_share)} for each one)",
                IfNewReachWarning,
                stacklevel=stacklevel,
            )

    def _commit(self, batch: Batch, if_new: bool, threshold: float | None) -> AddResult:
        return self._commit_steps([batch], if_new, threshold)[0]

    def _commit_steps(
        self,
        steps: Sequence[Batch | Removals],
        if_new: bool,
        threshold: float | None,
        flush_mark: tuple[bytes, int] | None = None,
    ) -> tuple[AddResult, int]:
        """Apply batches of adds and of removals (``(key, index key)`` lists), in order, in one
        write transaction: all of them are stored or none.  Each step sees the ones before it,
        so the result is that of applying them one after another (the batching writer's
        flush).  The same transaction stores ``flush_mark`` (name, flush number) if given, so
        the writer can tell afterwards whether it committed.  Returns what the adds did and how
        many documents were removed."""
        # Room for every table entry (a 16-byte key and its node) and the records, with slack
        # for half-full pages; growing up front avoids redoing a whole batch.
        reserve = sum(
            sum(map(len, step.records)) * 2
            + len(step.keys) * (len(self.plan.tables) + 2) * 64
            + (len(step.keys) * 2 * SKETCH_BYTES if step.sketches is not None else 0)
            for step in steps
            if isinstance(step, Batch)
        )
        # Folded before the transaction: write() may run the work again, which must not redo it.
        work = [step.once_per_key() if isinstance(step, Batch) and not if_new else step for step in steps]

        def apply(txn: lmdb.Transaction[bytes]) -> tuple[AddResult, int]:
            if flush_mark is not None:
                self._records.put_flush_mark(txn, *flush_mark)
            return self._writes.apply(txn, work, threshold)

        return self._storage.write(apply, reserve)

    def _flush_mark(self, name: bytes) -> int:
        """The number of the last flush the batching writer ``name`` committed (0: none)."""
        with self._storage.read() as txn:
            return self._records.flush_mark(txn, name)

    def _drop_marks_of_gone_writers(self) -> None:
        """Delete the flush marks that writers of processes now gone left (a few bytes each,
        which would otherwise pile up with every writer SIGKILLed): one read, and one small
        commit when there are some."""
        with self._storage.read() as txn:
            gone = self._records.marks_of_gone_writers(txn)
        if gone:

            def drop(txn: lmdb.Transaction[bytes]) -> None:
                for name in gone:
                    self._records.drop_flush_mark(txn, name)

            self._storage.write(drop)

    def _drop_flush_mark(self, name: bytes) -> None:
        """Delete a closing batching writer's flush mark: one small commit."""
        self._storage.write(partial(self._records.drop_flush_mark, name=name))

    @property
    def _sketched(self) -> bool:
        """Whether this database stores sketches (format 2 and later)."""
        return self._format >= 2

    def remove(self, key: str) -> bool:
        """Remove the document under ``key``; returns whether there was one."""
        return self.remove_many([key]) == 1

    def remove_many(
        self,
        keys: Iterable[str],
        *,
        batch_size: int = DEFAULT_BATCH_SIZE,
        on_batch: Callable[[int], None] | None = None,
    ) -> int:
        """Remove the documents under ``keys`` (absent keys are ignored), one transaction per
        batch; returns how many were removed.  ``on_batch`` is called with the running count
        after each commit, inside the section :func:`simdb.storage.commit_in_progress` marks,
        as add_many's is.  Cost: O(tables) deletes per key."""
        _check_batch_size(batch_size)
        if on_batch is not None and not callable(on_batch):
            raise InvalidInputError(f"on_batch={describe(on_batch)} is not callable", "pass a function of an int")
        removed = 0
        remaining = iterate(keys, "keys")
        while batch := [(key, index_key(check_key(key))) for key in islice(remaining, batch_size)]:
            with reporting_commit():
                removed += self._storage.write(partial(self._writes.delete, batch=batch))
                if on_batch is not None:
                    on_batch(removed)
        return removed

    def _query_radius(self, k: int | None, threshold: float | None, verified: bool) -> tuple[int, float | None]:
        """The probe radius and checked threshold of a query: ``k`` if given, else with a
        threshold :func:`candidate_distance` (``verified`` when the query has a sketch to check
        with), else the index k.  Past the index k, :class:`~simdb.queries.Queries` probes
        nearby prefixes or scans."""
        if threshold is None:
            return self._check_k(k), None
        threshold = check_threshold(threshold)
        if k is not None:
            return self._check_k(k), threshold
        return candidate_distance(threshold, kind_of(self._fingerprinter), verified=verified), threshold

    def query(
        self,
        fingerprint: int | None = None,
        k: int | None = None,
        *,
        text: str | None = None,
        limit: int | None = None,
        threshold: float | None = None,
    ) -> list[Match]:
        """Every stored document within ``k`` bits (default: the index's k; a larger k is
        answered exactly too, as a threshold's radius is), each with its similarity, most
        similar first (then nearest, then in insertion order).  With
        ``threshold``, the candidates within :func:`candidate_distance` bits whose similarity
        is >= threshold, as :meth:`pairs` finds them.  A ``text`` query is compared by
        sketch with stored documents that have one; otherwise similarity is the
        fingerprint's estimate; a text without features (blank, or only stop words) matches
        nothing, as it pairs with nothing.  Cost: one range scan per table plus one read per match; a
        radius past the index's k (``k=7``, or a text query on minhash at 0.9 with the
        default k=5) probes every table at each prefix a few bits from the query's, or reads
        every stored fingerprint (O(n)), whichever costs less."""
        sketch: bytes | None = None
        if text is not None:
            if fingerprint is not None:
                raise InvalidInputError("both a fingerprint and text= were given", "give one of them")
            query, sketch = self._text_fingerprinter().fingerprint_and_sketch(text)
        else:
            query = self._resolve(fingerprint, None)
        radius, threshold = self._query_radius(k, threshold, verified=bool(sketch) and self._sketched)
        limit = self._check_limit(limit)
        return self._queries.query(query, radius, limit, sketch, threshold, kind_of(self._fingerprinter))

    def query_many(
        self,
        fingerprints: Iterable[int] | None = None,
        k: int | None = None,
        *,
        texts: Iterable[str] | None = None,
        sketches: Iterable[bytes | None] | None = None,
        limit: int | None = None,
        threshold: float | None = None,
        workers: int | None = 1,
    ) -> list[list[Match]]:
        """:meth:`query` for many fingerprints (or ``texts``), one result list per query, in
        order, with the permutations computed vectorised.  ``sketches``, one per fingerprint
        as :meth:`Fingerprinter.fingerprints_and_sketches` made them with the database's
        :attr:`fingerprinter`, makes fingerprints computed ahead (in a pool, or to keep the
        sketches) answer exactly as ``texts=`` would.  With ``workers`` > 1 (None: every
        core) the queries are split into contiguous chunks searched on that many threads (a
        few hundred queries at least per thread), each chunk in one read transaction:
        results are those of one thread, though with a writer beside, chunks may see
        different commits.  The default is one thread because the probes hold Python's
        global lock between LMDB calls: on 2 cores, two threads ran at 0.43x the queries per
        second of one (200k stored, 20k queries, k=5)."""
        resolve_workers(workers)
        query_sketches: list[bytes | None] | None = None
        if texts is not None:
            if fingerprints is not None or sketches is not None:
                given = "fingerprints" if fingerprints is not None else "sketches="
                raise InvalidInputError(f"both {given} and texts= were given", "give one of them")
            queries, text_sketches = self._text_fingerprinter().fingerprints_and_sketches(list(iterate(texts, "texts")))
            query_sketches = list(text_sketches)
        elif fingerprints is None:
            raise InvalidInputError("no fingerprints were given", "pass fingerprints or texts=")
        else:
            queries = [check_fingerprint(fp) for fp in iterate(fingerprints, "fingerprints")]
            if sketches is not None:
                query_sketches = checked_sketches(list(iterate(sketches, "sketches")), queries)
        # The wider radius a sketch allows: a query without one only filters its extra candidates out.
        verified = (
            query_sketches is not None and any(sketch is not None for sketch in query_sketches) and self._sketched
        )
        radius, threshold = self._query_radius(k, threshold, verified=verified)
        limit = self._check_limit(limit)
        if not queries:
            return []
        query_array = np.array(queries, dtype=np.uint64)
        kind = kind_of(self._fingerprinter)
        return self._queries.query_many(query_array, radius, limit, query_sketches, threshold, kind, workers)

    @staticmethod
    def _check_limit(limit: int | None) -> int | None:
        return None if limit is None else check_int("limit", limit, minimum=0)

    def get(self, key: str) -> Document | None:
        """The document stored under ``key``, or None."""
        key_index = index_key(check_key(key))
        with self._storage.read() as txn:
            found = self._records.lookup(txn, key, key_index)
        return None if found is None else found[1]

    def __contains__(self, key: object) -> bool:
        if not isinstance(key, str):
            return False
        try:
            return self.get(key) is not None
        except InvalidKeyError:  # empty, too long or not valid Unicode: no such key is stored
            return False

    def __len__(self) -> int:
        with self._storage.read() as txn:
            return self._records.count(txn)

    def items(self, *, chunk: int = 10_000, snapshot: bool = False) -> Iterator[Document]:
        """Every document, in insertion order.  Reads ``chunk`` documents per transaction,
        so a slow consumer never pins old pages (documents changed meanwhile may be seen in
        their new state, or not at all if removed).  With ``snapshot``, one transaction for
        all: the documents as of one moment, every batch whole or not at all, as a backup
        needs; until the last is read, pages that writers free are not reused, so the file
        may grow, and this process's compactions and map growth wait for it (called by the
        looping thread itself, they raise ReadInProgressError instead)."""
        for documents, _ in self._chunks(chunk, snapshot, sketches=False):
            yield from documents

    def sketched_items(self, *, chunk: int = 10_000, snapshot: bool = False) -> Iterator[tuple[Document, bytes | None]]:
        """:meth:`items`, each with its stored sketch: 192 bytes for a document added as text,
        b"" for a featureless text, None for one added as a fingerprint (and throughout a
        database of format 1, which keeps no sketches).  :meth:`add_many` takes them back,
        as ``simdb export`` and ``import`` do.  One more get per document."""
        for documents, sketches in self._chunks(chunk, snapshot, sketches=True):
            yield from zip(documents, sketches)

    def _chunks(
        self, chunk: int, snapshot: bool, sketches: bool
    ) -> Iterator[tuple[list[Document], list[bytes | None]]]:
        """The documents in chunks of ``chunk``, each read in one transaction (of one for all
        with ``snapshot``), with their stored sketches if ``sketches`` (else no list).  The
        callers go through a chunk's lists, so a document costs them one step."""
        chunk = check_int("chunk", chunk, minimum=1)  # 0 or less never ended a chunk: a hang
        if snapshot:
            with self._storage.read() as txn:
                yield from self._chunks_after(lambda: nullcontext(txn), chunk, sketches)
        else:
            yield from self._chunks_after(self._storage.read, chunk, sketches)

    def _chunks_after(
        self, reading: Callable[[], AbstractContextManager[lmdb.Transaction[bytes]]], chunk: int, sketches: bool
    ) -> Iterator[tuple[list[Document], list[bytes | None]]]:
        after = b""
        while True:
            with reading() as txn:
                rows = self._records.chunk_after(txn, after, chunk)
                stored = [self._records.stored_sketch(txn, decode_id(raw_id)) for raw_id, _ in rows] if sketches else []
            if rows:
                after = rows[-1][0]
            yield [Document(*record) for _, record in rows], stored
            if len(rows) < chunk:
                return

    def keys(self, prefix: str | None = None) -> Iterator[str]:
        """Every key, or every key that starts with ``prefix``, in insertion order.  Keys are
        indexed by their digest, not in key order, so a prefix costs a scan of every
        document: O(n), read as :meth:`items` reads."""
        if prefix is not None and not isinstance(prefix, str):
            raise InvalidInputError(f"prefix must be a str, not {type(prefix).__name__}")
        return (document.key for document in self.items() if prefix is None or document.key.startswith(prefix))

    def __iter__(self) -> Iterator[str]:
        return self.keys()

    def fingerprint_arrays(self) -> tuple[np.ndarray, np.ndarray]:
        """All (ids, fingerprints) as uint64 arrays in insertion order, read from the first
        table in one scan (no per-document decoding).  O(n log n)."""
        with self._storage.read() as txn:
            return self._tables.scan(txn)

    # -- maintenance ---------------------------------------------------------------------

    def stats(self) -> dict[str, Any]:
        """Counts, plan, sizes and settings.  O(tables)."""
        storage = self._storage
        with storage.read() as txn:
            documents = self._records.count(txn)
            page_size = int(txn.stat(storage.db(META))["psize"])
            table_pages = self._tables.page_counts(txn)
            filter_pages = self._tables.filter_pages(txn)
            info = storage.env.info()
            sketch_count = self._records.sketch_count(txn)
        leading = [table.leading_bits for table in self.plan.tables]
        size = storage.size_on_disk()
        return {
            "path": self.path,
            "format_version": self._format,
            "documents": documents,
            "bits": self.plan.bits,
            "k": self.plan.k,
            "blocks": self.plan.blocks,
            "block_widths": self.plan.widths,
            "tables": len(self.plan.tables),
            "leading_bits": leading,
            # A random fingerprint shares a table's leading bits with N / 2**bits others.
            "expected_candidates_per_probe": sum(documents / 2**bits for bits in leading) / len(leading),
            "size_bytes": size,
            "bytes_per_document": size / documents if documents else None,
            "bytes_per_table_entry": (sum(table_pages) * page_size / (documents * len(leading))) if documents else None,
            # The runs' prefix filters (format 6), beside the entries they answer for.
            "filter_bytes_per_table_entry": (filter_pages * page_size / (documents * len(leading)))
            if documents
            else None,
            "map_size": int(info["map_size"]),
            "generation": storage.generation,
            "fingerprinter": self._fingerprinter.to_dict() if self._fingerprinter is not None else None,
            "kind": "simhash" if self._fingerprinter is None else self._fingerprinter.kind,
            "similarity": kind_of(self._fingerprinter),
            "sketches": self._sketched,
            "sketch_count": sketch_count,
        }

    def check(self, *, isolated: bool = False) -> CheckReport:
        """Verify the stored metadata (configuration, fingerprint settings, next id), that
        every document record is valid and in every table exactly once, that nothing else is
        in the tables, and that the key index and documents agree.  Damage to simdb's
        records is reported in the result; damage to LMDB's own page structure that LMDB
        reports raises CorruptDatabaseError (``simdb export`` may still save the documents).
        LMDB does not check its pages, though, and some damage (a zeroed page) makes it
        abort the process that reads it: ``isolated=True`` runs the check in a child process
        (:func:`simdb.checking.check_in_child`, about half a second more) and raises
        CorruptDatabaseError for such a crash, as a long-running process should.  Sketches
        and meta carry no checksum: a changed byte there that still decodes is not found.
        One read transaction; O(n log n) with n documents, vectorised per table."""
        if isolated:
            self._storage.check_open()  # a closed handle raises, as a check in this process does
            return check_in_child(self.path)
        with self._storage.read() as txn:
            problems = self._config.problems(txn)
            record_problems, ids, fingerprints = self._records.verify(txn)
            problems.extend(record_problems)
            table_problems, entries = self._tables.verify_counted(txn, (ids, fingerprints))
            problems.extend(table_problems)
        return CheckReport(documents=len(ids), table_entries=entries, problems=problems)

    def copy_to(self, path: str | os.PathLike[str]) -> None:
        """Write a consistent copy of this database (one read snapshot, compacted) to the
        new directory ``path``, e.g. to try writes on it (``simdb add --dry-run``); this
        database is left as it is, and may be read-only.  The copy is of the database as it
        is now, as every read sees it: after any compaction another process made since this
        handle opened, and of a database made again at this path with the same settings (with
        other settings, DatabaseReplacedError).  O(size)."""
        self._storage.copy_to(_check_path(path))

    def compact(self) -> CompactResult:
        """Rewrite the database into a fresh file, every sub-database in key order with full
        pages (from format 4 on, each table whole as one run of full blocks; from format 5
        the key index too), and swap it in atomically.  Writers in other processes wait, then
        continue in the new file; readers move over at their next transaction.  O(size)."""

        def rewrite(source: lmdb.Transaction[bytes], target: lmdb.Environment) -> None:
            copy_sub_databases(source, self._storage, target, [META])
            self._records.rewrite(source, target)
            self._tables.rewrite(source, target)

        before = self._storage.swap_in_rewrite(rewrite)
        return CompactResult(before, self._storage.size_on_disk())

    # -- all pairs -----------------------------------------------------------------------

    def _pair_settings(self, k: int | None, threshold: float | None, verified: bool) -> tuple[int, float | None]:
        """The search radius and threshold of pairs(), clusters() and pair_histogram(): a
        threshold (default :data:`DEFAULT_THRESHOLD` when ``k`` is not given either) sets the
        radius by :func:`candidate_distance` (``verified`` when some document has a sketch)
        unless ``k`` is given; ``k`` alone is bit mode."""
        if threshold is not None:
            threshold = check_threshold(threshold)
        elif k is None:
            threshold = DEFAULT_THRESHOLD
        if k is not None:
            return check_distance(k, maximum=BITS), threshold
        assert threshold is not None
        return candidate_distance(threshold, kind_of(self._fingerprinter), verified=verified), threshold

    def _snapshot(self) -> Snapshot:
        """Ids and fingerprints of every document in insertion order (from the first table),
        and their sketches as an (n, 192) uint8 matrix with a state per row (no sketch,
        featureless, sketch), read in one transaction.  O(n log n)."""
        with self._storage.read() as txn:
            ids, fingerprints = self._tables.scan(txn)
            rows, state = self._records.sketch_rows(txn, ids)
        return Snapshot(ids, fingerprints, rows, state)

    def pair_search_seconds(self, k: int | None = None, *, threshold: float | None = None) -> float:
        """What the in-memory search of :meth:`pairs`, :meth:`clusters` and
        :meth:`pair_histogram` with these arguments should take on one core, by the cost
        model that picks its plan, for random fingerprints and before any candidate's sketch
        is compared: a floor on their time, to warn before a loose threshold runs for
        minutes.  O(1): the radius is the one :meth:`pairs` takes where sketches are stored
        (it reads whether any document has one; a count of them says so here)."""
        with self._storage.read() as txn:
            documents = self._records.count(txn)
            verified = self._records.sketch_count(txn) > 0
        radius, _ = self._pair_settings(k, threshold, verified)
        return search_seconds(radius, documents)

    def pairs(
        self,
        k: int | None = None,
        *,
        threshold: float | None = None,
        include_featureless: bool = False,
        workers: int | None = None,
    ) -> Iterator[Pair]:
        """Every near-duplicate :class:`Pair` ``(key_a, key_b, distance, similarity)``, each
        unordered pair once (``key_a`` added first).

        With ``threshold`` (the default, :data:`DEFAULT_THRESHOLD`, when ``k`` is not given
        either): the pairs at similarity >= threshold among the candidates within
        :func:`candidate_distance` bits (or ``k`` if given).  With ``k`` alone: every pair
        within ``k`` bits, identical fingerprints included.  Any k from 0 to 64 works: the
        search runs in memory, not on the index.  Similarity is the sketch estimate where both
        documents have sketches, else the fingerprint's estimate.  Documents from featureless
        texts never pair unless ``include_featureless``.

        Reads the fingerprints and sketches once, then streams blocks of pairs with memory
        O(n + block); the search runs on ``workers`` threads (default every core).  The pairs
        are those of the documents as read at the start; a document removed before its key is
        read is left out."""
        resolve_workers(workers)
        snapshot = self._snapshot()
        k, threshold = self._pair_settings(k, threshold, snapshot.verifiable)
        names = _KeyNames(self, snapshot.ids)
        kind = kind_of(self._fingerprinter)
        for left, right, distances, similarities in pair_blocks(
            snapshot, k, threshold, include_featureless, workers, kind
        ):
            # Positions follow insertion order and left < right, so key_a was added first.
            rows = zip(names.fetch(left), names.fetch(right), distances.tolist(), similarities.tolist())
            for key_a, key_b, distance, similarity in rows:
                if key_a is not None and key_b is not None:
                    yield Pair(key_a, key_b, distance, similarity)

    def clusters(
        self,
        k: int | None = None,
        *,
        threshold: float | None = None,
        singletons: bool = False,
        include_featureless: bool = False,
        workers: int | None = None,
        mode: str = "components",
    ) -> Iterator[list[str]]:
        """Groups of the pair graph of :meth:`pairs` (same ``k`` and ``threshold`` rules),
        each a list of keys with the first-added key first, in order of their first-added
        key.  ``mode="components"`` (the default): connected groups, so a chain of pairs
        joins documents that are no pair themselves.  ``mode="leaders"``: in the order they
        were added, a document no earlier leader took leads a group of every document it
        pairs with that none took yet, so every member pairs with the first key (a
        representative to keep when deduplicating); it holds the pairs in memory, 16 bytes
        each.  Singletons are left out unless asked for.  In bit mode (``k`` alone)
        components of identical fingerprints are grouped without expanding their pairs.
        The search runs on ``workers`` threads (default every core)."""
        for cluster in self._clusters(k, threshold, singletons, include_featureless, workers, mode, spread=False):
            yield cluster.keys

    def clusters_with_spread(
        self,
        k: int | None = None,
        *,
        threshold: float | None = None,
        singletons: bool = False,
        include_featureless: bool = False,
        workers: int | None = None,
        mode: str = "components",
    ) -> Iterator[Cluster]:
        """The clusters of :meth:`clusters` (same arguments, same order) as :class:`Cluster`
        ``(keys, min_similarity, to_representative)``: the smallest similarity among the
        pairs of :meth:`pairs` inside the cluster, its weakest link, and the smallest
        similarity of its first key to another member (None for a singleton).  Cost as
        :meth:`clusters` in threshold mode plus one sketch comparison per member; in bit mode
        it expands the pairs of identical fingerprints too, to know their similarities."""
        return self._clusters(k, threshold, singletons, include_featureless, workers, mode, spread=True)

    def _clusters(
        self,
        k: int | None,
        threshold: float | None,
        singletons: bool,
        include_featureless: bool,
        workers: int | None,
        mode: str,
        *,
        spread: bool,
    ) -> Iterator[Cluster]:
        """The kernel of :meth:`clusters` and :meth:`clusters_with_spread`; ``min_similarity``
        is None unless ``spread``.  The weakest link is kept per document (the smallest
        similarity of its pairs), O(n) memory: a cluster's is the smallest of its members'
        (in leaders mode, of the pairs inside it)."""
        check_cluster_mode(mode)
        resolve_workers(workers)
        snapshot = self._snapshot()
        k, threshold = self._pair_settings(k, threshold, snapshot.verifiable)
        names = _KeyNames(self, snapshot.ids)
        featureless = bool((snapshot.state == FEATURELESS).any())
        plan = pairs_plan(k, len(snapshot.ids))
        weakest = np.full(len(snapshot.ids), np.inf) if spread else None
        if mode == "leaders":
            blocks = list(
                pair_blocks(snapshot, k, threshold, include_featureless, workers, kind_of(self._fingerprinter))
            )
            left = np.concatenate([np.zeros(0, dtype=np.int64), *(block[0] for block in blocks)])
            right = np.concatenate([np.zeros(0, dtype=np.int64), *(block[1] for block in blocks)])
            similarity = np.concatenate([np.zeros(0), *(block[3] for block in blocks)])
            labels = leader_labels(len(snapshot.ids), left, right)
            if weakest is not None:
                inside = labels[left] == labels[right]  # a member's pairs with other clusters are no link
                np.minimum.at(weakest, left[inside], similarity[inside])
                np.minimum.at(weakest, right[inside], similarity[inside])
        elif not spread and threshold is None and plan is not None and (include_featureless or not featureless):
            labels = cluster_labels(snapshot.fingerprints, plan, k, workers=workers)
        else:
            labeler = ComponentLabeler(len(snapshot.ids))
            for left, right, _, similarity in pair_blocks(
                snapshot, k, threshold, include_featureless, workers, kind_of(self._fingerprinter)
            ):
                labeler.add(left, right)
                if weakest is not None:
                    np.minimum.at(weakest, left, similarity)
                    np.minimum.at(weakest, right, similarity)
            labels = labeler.labels()
        kind = kind_of(self._fingerprinter)
        for members in iter_clusters(labels, singletons):
            fetched = names.fetch(members)
            present = members[[key is not None for key in fetched]]  # a key removed since: no member
            keys = [key for key in fetched if key is not None]
            if len(keys) > 1 or (singletons and keys):
                if weakest is None or len(keys) == 1:
                    yield Cluster(keys, None, None)
                    continue
                lowest = float(weakest[present].min())
                representative, others = present[:1], present[1:]
                distance = np.bitwise_count(snapshot.fingerprints[others] ^ snapshot.fingerprints[representative])
                to_representative = pair_similarities(
                    snapshot, np.repeat(representative, len(others)), others, distance.astype(np.int64), kind
                )
                yield Cluster(keys, lowest if math.isfinite(lowest) else None, float(to_representative.min()))

    def pair_histogram(
        self,
        k: int | None = None,
        *,
        threshold: float | None = None,
        by: str = "distance",
        include_featureless: bool = False,
        workers: int | None = None,
    ) -> dict[Any, int]:
        """Counts of the pairs of :meth:`pairs` (same rules) per distance (``by="distance"``:
        keys 0..radius) or per similarity bucket (``by="similarity"``: keys 0.0, 0.05, ...,
        1.0, each bucket holding the similarities from its key up to the next).  Every
        bucket is present, empty ones with 0.  Cost as :meth:`pairs`, without reading keys."""
        if by not in ("distance", "similarity"):
            raise InvalidInputError(f"by={describe(by)} is not 'distance' or 'similarity'")
        resolve_workers(workers)
        snapshot = self._snapshot()
        k, threshold = self._pair_settings(k, threshold, snapshot.verifiable)
        buckets = k + 1 if by == "distance" else SIMILARITY_BUCKETS + 1
        counts = np.zeros(buckets, dtype=np.int64)
        for _, _, distances, similarities in pair_blocks(
            snapshot, k, threshold, include_featureless, workers, kind_of(self._fingerprinter)
        ):
            if by == "distance":
                slots = distances.astype(np.int64)
            else:  # the epsilon keeps 0.95 in its own bucket despite float rounding
                slots = np.floor(similarities * SIMILARITY_BUCKETS + 1e-9).astype(np.int64)
            counts += np.bincount(slots, minlength=buckets)
        if by == "distance":
            return dict(enumerate(counts.tolist()))
        return {round(slot / SIMILARITY_BUCKETS, 2): count for slot, count in enumerate(counts.tolist())}


def _check_batch_size(batch_size: object) -> None:
    check_int("batch_size", batch_size, minimum=1, maximum=sys.maxsize)  # islice's own limit


class _KeyNames:
    """Keys of documents by their position in :meth:`Database.fingerprint_arrays`: looked
    up on demand in one transaction per request, or read in one scan of the documents once a
    large share of them is wanted.  A document removed since the fingerprints were read has
    no key (None), and its pairs are left out."""

    SCAN_SHARE = 16  # scan every document once more than 1/16 of them are wanted at once

    def __init__(self, database: Database, ids: np.ndarray) -> None:
        self._database = database
        self._ids = ids
        self._names = np.full(len(ids), None, dtype=object)
        self._known = np.zeros(len(ids), dtype=bool)

    def fetch(self, positions: np.ndarray) -> list[str | None]:
        """The keys at ``positions`` (an int array), None for removed documents."""
        missing = distinct(positions[~self._known[positions]])
        if len(missing) * self.SCAN_SHARE > len(self._ids):
            self._scan_all()
        elif len(missing):
            self._look_up(missing)
        return self._names[positions].tolist()

    def _look_up(self, positions: np.ndarray) -> None:
        database = self._database
        with database._storage.read() as txn:
            for position, doc_id in zip(positions.tolist(), self._ids[positions].tolist()):
                self._names[position] = database._records.key_of(txn, doc_id)
        self._known[positions] = True

    def _scan_all(self) -> None:
        database = self._database
        with database._storage.read() as txn:
            found, keys = database._records.all_keys(txn)
        at = np.minimum(search_sorted(found, self._ids), max(len(found) - 1, 0))
        present = (found[at] == self._ids) if len(found) else np.zeros(len(self._ids), dtype=bool)
        key_array = np.array([*keys, None], dtype=object)
        # numpy's stubs leave None out of ArrayLike; np.where takes it as an object scalar.
        self._names = np.where(present, key_array[at], None)  # type: ignore[call-overload]
        self._known[:] = True
