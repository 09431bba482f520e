"""The query engines: candidates from a tables layer (one probe, a probe per query in key
order, or whole tables merged with a batch), then the similarity step and the stored records
of the matches.  They work over any tables layer with the interface of
:class:`simdb.btree_tables.BTreeTables` and :class:`simdb.tables.Tables` (:class:`TableIndex`)
and over :class:`simdb.records.Records`, so they are tested on their own
(tests/test_query_engines.py).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import AbstractContextManager
from typing import Any, NamedTuple, Protocol

import lmdb
import numpy as np

from simdb.allpairs import resolve_workers
from simdb.plan import TablePlan
from simdb.records import Records
from simdb.threshold import candidate_similarities, fingerprint_similarities

#: query_many reads whole tables instead of seeking once per query when the batch has at
#: least 1/MERGE_COST_RATIO as many queries as there are documents (measured crossover, see
#: bench/bench_core.py --crossover).
MERGE_COST_RATIO = 5
#: query_many gives each worker thread at least this many queries: below it, a thread and a
#: read transaction cost more than the queries they would take over.
MIN_QUERIES_PER_WORKER = 256
#: Fingerprint comparisons per numpy pass of :meth:`Queries.scan_many` (a pass holds about
#: 9 bytes per comparison).
SCAN_BLOCK = 1 << 22
#: Costs (ns, one core) that choose between probing and scanning past the index's k: a
#: probe's range scan, and each stored entry it meets; reading every stored fingerprint, and
#: comparing one with one query.  bench/bench_query_radius.py at 1M on 2-core Zen 3, 6-block
#: plan: 70 range scans of about 490 entries 25-49 ms, a scan 200-230 ms.
_RANGE_NS, _RANGE_ENTRY_NS, _READ_NS, _COMPARE_NS = 20_000.0, 850.0, 200.0, 1.5


def merges_whole_tables(queries: int, stored: int, seek_cost: float) -> bool:
    """Whether a batch of ``queries`` against ``stored`` documents is found by merging whole
    tables with it rather than by a seek per query (:data:`MERGE_COST_RATIO`, scaled by the
    table layer's ``seek_cost``: a query's seeks against its merge work, relative to one
    B-tree per table)."""
    return queries * MERGE_COST_RATIO * seek_cost >= stored


Reader = Callable[[], "AbstractContextManager[lmdb.Transaction[bytes]]"]


class Match(NamedTuple):
    """One query result: ``similarity`` is the sketch estimate when both sides have sketches,
    else the fingerprint's estimate from ``distance``."""

    key: str
    fingerprint: int
    distance: int
    meta: Any
    similarity: float


class TableIndex(Protocol):
    """What the engines need from a tables layer: ids of stored fingerprints within ``k``
    bits of queries (``k`` up to ``plan.k``), with their distances, and every stored
    fingerprint for radii beyond it."""

    plan: TablePlan

    def scan(self, txn: lmdb.Transaction[bytes]) -> tuple[np.ndarray, np.ndarray]: ...

    def probe(self, txn: lmdb.Transaction[bytes], fingerprint: int, k: int) -> dict[int, int]: ...

    def probe_many(self, txn: lmdb.Transaction[bytes], fingerprints: np.ndarray, k: int) -> list[dict[int, int]]: ...

    def merge_many(self, txn: lmdb.Transaction[bytes], fingerprints: np.ndarray, k: int) -> list[dict[int, int]]: ...

    @property
    def seek_cost(self) -> float: ...


class Queries:
    """The query engines over ``tables`` and ``records``; ``read`` opens a read transaction
    (:meth:`simdb.storage.Storage.read`), for :meth:`query_many` on several threads, and
    ``reading`` tells whether the calling thread is inside one already."""

    def __init__(self, tables: TableIndex, records: Records, read: Reader, reading: Callable[[], bool]) -> None:
        self.tables = tables
        self.records = records
        self.read = read
        self.reading = reading

    def find_many(self, txn: lmdb.Transaction[bytes], queries: np.ndarray, k: int) -> list[dict[int, int]]:
        """Candidates of many queries within ``k`` bits: whole tables merged when the batch is
        large against the stored count (:data:`MERGE_COST_RATIO`), else one seek per query
        and table; past the index's k, :meth:`_beyond_index_k`."""
        if k > self.tables.plan.k:
            return self._beyond_index_k(txn, queries, k)
        if merges_whole_tables(len(queries), self.records.count(txn), self.tables.seek_cost):
            return self.tables.merge_many(txn, queries, k)
        return self.tables.probe_many(txn, queries, k)

    def _beyond_index_k(self, txn: lmdb.Transaction[bytes], queries: np.ndarray, k: int) -> list[dict[int, int]]:
        """Candidates within ``k`` bits, past the index's k, the cheaper exact way by the
        costs above: a probe per query that visits the prefixes a few bits from its own
        (:meth:`simdb.plan.TablePlan.probes_for` range scans: cheap where prefixes are long),
        or one :meth:`scan_many` of every stored fingerprint."""
        plan = self.tables.plan
        stored = self.records.count(txn)
        shortest = min(table.leading_bits for table in plan.tables)
        probe_ns = plan.probes_for(k) * (_RANGE_NS + (stored >> shortest) * _RANGE_ENTRY_NS)
        scan_ns = stored * (_READ_NS + len(queries) * _COMPARE_NS)
        if len(queries) * probe_ns < scan_ns:
            return [self.tables.probe(txn, query, k) for query in queries.tolist()]
        return self.scan_many(txn, queries, k)

    def scan_many(self, txn: lmdb.Transaction[bytes], queries: np.ndarray, k: int) -> list[dict[int, int]]:
        """Candidates of many queries within ``k`` bits by comparing each with every stored
        fingerprint (for a radius past the index's k, where probes would cost more).  Cost:
        one read of every stored fingerprint (:meth:`TableIndex.scan`, O(n log n), about 40
        bytes per document at its peak), then O(n) per query, a pass of at least one query
        and about :data:`SCAN_BLOCK` comparisons at a time (9 bytes per comparison)."""
        ids, fingerprints = self.tables.scan(txn)
        found: list[dict[int, int]] = []
        rows = max(1, SCAN_BLOCK // max(1, len(fingerprints)))
        for start in range(0, len(queries), rows):
            distances = np.bitwise_count(queries[start : start + rows, None] ^ fingerprints[None, :])
            for row in distances:
                near = np.flatnonzero(row <= k)
                found.append(dict(zip(ids[near].tolist(), row[near].tolist())))
        return found

    def similarities_to(
        self, txn: lmdb.Transaction[bytes], sketch: bytes | None, ids: list[int], distances: np.ndarray, kind: str
    ) -> np.ndarray:
        """Similarity of one query (its ``sketch``, None if it has none) to stored documents:
        :func:`candidate_similarities` where both sides have a sketch (0 when either is
        featureless, and for a featureless query throughout), else the fingerprint estimate
        from ``distances``.  One get per document."""
        similarities = fingerprint_similarities(distances, kind)
        if sketch == b"":
            return np.zeros(len(ids))  # a featureless text is similar to nothing
        if sketch is None or not self.records.sketched:
            return similarities
        query = np.frombuffer(sketch, dtype=np.uint8)
        positions: list[int] = []
        agreeing: list[int] = []
        for position, doc_id in enumerate(ids):
            stored = self.records.stored_sketch(txn, doc_id)
            if stored is None:
                continue
            if not stored:
                similarities[position] = 0.0  # a featureless document is similar to nothing
                continue
            positions.append(position)
            agreeing.append(int(np.count_nonzero(query == np.frombuffer(stored, dtype=np.uint8))))
        if positions:
            chosen = np.array(positions, dtype=np.int64)
            similarities[chosen] = candidate_similarities(np.asarray(distances)[chosen], agreeing, kind)
        return similarities

    def matches(
        self,
        txn: lmdb.Transaction[bytes],
        found: dict[int, int],
        limit: int | None,
        sketch: bytes | None,
        threshold: float | None,
        kind: str,
    ) -> list[Match]:
        """The matches of one query from its candidates ``found`` (id -> distance), those at
        similarity >= ``threshold`` where one is given: most similar first, then nearest, then
        in id order.  Without sketches the similarity follows the distance, so this is
        nearest first; with them, a sketch tells apart candidates a bit or two apart that the
        distance ranks the wrong way (``limit=1`` missed the most similar document in 21-29 of
        50 queries when ordered by distance).  A featureless text (``sketch`` b"") matches
        nothing: it is nobody's near-duplicate, as in pairs().  One read per match kept."""
        if sketch == b"":
            return []
        ids = list(found)
        distances = np.array([found[doc_id] for doc_id in ids], dtype=np.int64)
        similarities = self.similarities_to(txn, sketch, ids, distances, kind).tolist()
        rows = [row for row in zip(ids, distances.tolist(), similarities) if threshold is None or row[2] >= threshold]
        rows.sort(key=lambda row: (-row[2], row[1], row[0]))
        if limit is not None:
            rows = rows[:limit]
        matches = []
        for doc_id, distance, similarity in rows:
            key, fingerprint, meta = self.records.found(txn, doc_id)
            matches.append(Match(key, fingerprint, distance, meta, similarity))
        return matches

    def query(
        self, fingerprint: int, k: int, limit: int | None, sketch: bytes | None, threshold: float | None, kind: str
    ) -> list[Match]:
        """The matches of one query within ``k`` bits, in one read transaction: one range
        scan per table plus one read per match (past the index's k, :meth:`_beyond_index_k`)."""
        if sketch == b"":
            return []  # no search: matches() keeps no candidate of a featureless text
        with self.read() as txn:
            if k > self.tables.plan.k:
                found = self._beyond_index_k(txn, np.array([fingerprint], dtype=np.uint64), k)[0]
            else:
                found = self.tables.probe(txn, fingerprint, k)
            return self.matches(txn, found, limit, sketch, threshold, kind)

    def query_many(
        self,
        queries: np.ndarray,
        k: int,
        limit: int | None,
        sketches: Sequence[bytes | None] | None,
        threshold: float | None,
        kind: str,
        workers: int | None = None,
    ) -> list[list[Match]]:
        """:meth:`query` for many queries (uint64 array; ``sketches`` one per query, or
        None), one result list per query, in order.  A batch that merges whole tables
        (:meth:`find_many`) is one pass on this thread; otherwise the queries are cut into
        contiguous chunks, one per worker thread (``workers``, default every core; each at
        least :data:`MIN_QUERIES_PER_WORKER` queries), each chunk found in its own read
        transaction: the same results as one thread, though with a writer beside, chunks
        may see different commits.  A thread inside a read searches on its own: new threads'
        reads would wait behind a compaction or map growth that waits for its read."""
        workers = min(resolve_workers(workers), max(1, len(queries) // MIN_QUERIES_PER_WORKER))
        if workers > 1 and (self.reading() or k > self.tables.plan.k):
            # A thread inside a read searches on its own; past the index's k the batch is
            # searched whole, so that a scan reads every fingerprint once, not once per chunk.
            workers = 1
        if workers > 1:
            with self.read() as txn:
                stored = self.records.count(txn)
            if merges_whole_tables(len(queries), stored, self.tables.seek_cost):
                # Whole tables merged: each chunk would read every table again, and the merge
                # is numpy work already (measured 0.7x on two threads), so one pass it is.
                workers = 1
        if workers == 1:
            return self._chunk(queries, k, limit, sketches, threshold, kind, 0, len(queries))
        size = math.ceil(len(queries) / workers)
        with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="simdb-query") as pool:
            chunks = [
                pool.submit(self._chunk, queries, k, limit, sketches, threshold, kind, start, start + size)
                for start in range(0, len(queries), size)
            ]
            return [matches for chunk in chunks for matches in chunk.result()]

    def _chunk(
        self,
        queries: np.ndarray,
        k: int,
        limit: int | None,
        sketches: Sequence[bytes | None] | None,
        threshold: float | None,
        kind: str,
        start: int,
        stop: int,
    ) -> list[list[Match]]:
        """The results of ``queries[start:stop]`` in one read transaction."""
        with self.read() as txn:
            found = self.find_many(txn, queries[start:stop], k)
            return [
                self.matches(txn, one, limit, None if sketches is None else sketches[start + i], threshold, kind)
                for i, one in enumerate(found)
            ]
