"""The in-memory all-pairs search behind :meth:`simdb.Database.pairs`, ``clusters`` and
``pair_histogram``: a snapshot of every document's fingerprint and sketch, the cheapest plan
for a radius, and blocks of pairs with their similarities."""

from __future__ import annotations

import math
from collections.abc import Iterator
from typing import NamedTuple

import numpy as np

from simdb.allpairs import iter_pair_blocks
from simdb.fingerprint import SKETCH_BYTES, sketch_agreements
from simdb.plan import BITS, TablePlan, block_widths
from simdb.records import FEATURELESS, SKETCHED
from simdb.threshold import candidate_similarities, fingerprint_similarities

#: pair_histogram(by="similarity") buckets are 1/20 = 0.05 wide.
SIMILARITY_BUCKETS = 20


class Snapshot(NamedTuple):
    """Every document's id, fingerprint, sketch row and sketch state, by insertion order."""

    ids: np.ndarray
    fingerprints: np.ndarray
    rows: np.ndarray
    state: np.ndarray

    @property
    def verifiable(self) -> bool:
        """Whether any pair can be checked by sketches: some document has one."""
        return bool((self.state == SKETCHED).any())


#: Measured costs (ns, one core) of the in-memory pair search, for choosing its plan: one row
#: through one table's passes, one candidate pair of a table, one pair compared directly.
_ROW_NS, _CANDIDATE_NS, _BRUTE_PAIR_NS = 17.0, 11.0, 9.0
#: Plans with more tables are left out: per-table overheads grow beyond the model there.
_PAIR_PLAN_TABLES = 1000
#: Fingerprint comparisons per block of the every-pair search.
_BRUTE_BLOCK = 1 << 22


def pairs_plan(k: int, n: int) -> TablePlan | None:
    """The cheapest block plan for finding every pair within ``k`` bits among ``n``
    fingerprints in memory, by a cost model measured on this code (a table costs a pass over
    the rows plus the pairs sharing its shortest prefix), or None when comparing every pair
    directly is cheaper (large k, or few fingerprints).  O(64)."""
    return _cheapest_search(k, n)[1]


def search_seconds(k: int, n: int) -> float:
    """What the cost model of :func:`pairs_plan` expects the search for every pair within
    ``k`` bits among ``n`` fingerprints to take on one core, before any similarity is
    checked (random fingerprints: near-duplicates add their pairs).  O(64)."""
    return _cheapest_search(k, n)[0] / 1e9


def _cheapest_search(k: int, n: int) -> tuple[float, TablePlan | None]:
    """(nanoseconds, plan) of the cheapest search: a block plan, or None for comparing every pair."""
    best: tuple[float, TablePlan | None] = (n * (n - 1) / 2 * _BRUTE_PAIR_NS, None)
    if k >= BITS:
        return best
    for blocks in range(k + 1, BITS + 1):
        tables = math.comb(blocks, k)
        if tables > _PAIR_PLAN_TABLES:
            continue
        leading = sum(block_widths(BITS, blocks)[-(blocks - k) :])  # the shortest prefix
        cost = tables * (n * _ROW_NS + n * (n - 1) / 2 / 2.0**leading * _CANDIDATE_NS)
        if cost < best[0]:
            best = (cost, TablePlan.create(k, blocks))
    return best


def iter_pairs_any_k(
    fingerprints: np.ndarray, k: int, workers: int | None = None
) -> Iterator[tuple[np.ndarray, np.ndarray, np.ndarray]]:
    """Blocks ``(left, right, distance)`` of every pair of positions (left < right) within
    ``k`` bits, for any k in 0..64: the permutation-table search
    (:func:`simdb.allpairs.iter_pair_blocks`) of the plan :func:`pairs_plan` picks for this k
    and n, on ``workers`` threads (default every core), else every pair compared in blocks of
    :data:`_BRUTE_BLOCK` (O(n^2 / 2), numpy)."""
    n = len(fingerprints)
    if n < 2:
        return
    plan = pairs_plan(k, n)
    if plan is not None:
        yield from iter_pair_blocks(fingerprints, plan, k, workers=workers)
        return
    rows_per_block = max(1, _BRUTE_BLOCK // n)
    for start in range(0, n - 1, rows_per_block):
        stop = min(n - 1, start + rows_per_block)
        distances = np.bitwise_count(fingerprints[start:stop, None] ^ fingerprints[None, :])
        later = np.arange(n)[None, :] > np.arange(start, stop)[:, None]
        left, right = np.nonzero(later & (distances <= k))
        yield left.astype(np.int64) + start, right.astype(np.int64), distances[left, right].astype(np.uint8)


def all_pair_arrays(fingerprints: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """:func:`iter_pairs_any_k` gathered into three arrays."""
    blocks = list(iter_pairs_any_k(fingerprints, k))
    if not blocks:
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.uint8)
    return tuple(np.concatenate(parts) for parts in zip(*blocks))  # type: ignore[return-value]


def sketch_matrix(sketches: list[bytes]) -> tuple[np.ndarray, np.ndarray]:
    """Sketches (b"" for featureless) as an (n, 192) uint8 matrix and the mask of the
    non-empty ones.  O(n)."""
    present = np.fromiter(map(len, sketches), dtype=np.int64, count=len(sketches)) > 0
    rows = np.zeros((len(sketches), SKETCH_BYTES), dtype=np.uint8)
    if present.any():
        rows[present] = np.frombuffer(b"".join(s for s in sketches if s), dtype=np.uint8).reshape(-1, SKETCH_BYTES)
    return rows, present


def pair_similarities(
    snapshot: Snapshot, left: np.ndarray, right: np.ndarray, distance: np.ndarray, kind: str
) -> np.ndarray:
    """The similarity of each pair of positions ``(left[i], right[i])``, ``distance[i]``
    bits apart: the joint sketch estimate where both have sketches, else the fingerprints'
    estimate; two featureless documents have 1, one has 0.  O(192) per sketched pair."""
    state = snapshot.state
    left_state, right_state = state[left], state[right]
    similarity = fingerprint_similarities(distance, kind)
    both = (left_state == SKETCHED) & (right_state == SKETCHED)
    if both.any():
        agreeing = sketch_agreements(snapshot.rows[left[both]], snapshot.rows[right[both]])
        similarity[both] = candidate_similarities(distance[both], agreeing, kind)
    featureless = (left_state == FEATURELESS) | (right_state == FEATURELESS)
    if featureless.any():
        similarity[featureless] = np.where(left_state[featureless] == right_state[featureless], 1.0, 0.0)
    return similarity


def pair_blocks(
    snapshot: Snapshot, k: int, threshold: float | None, include_featureless: bool, workers: int | None, kind: str
) -> Iterator[tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]]:
    """Blocks ``(left, right, distance, similarity)`` of every pair of positions within
    ``k`` bits (any k, 0..64), with similarity >= ``threshold`` when one is given; pairs
    with a featureless document are left out unless ``include_featureless`` (two
    featureless documents then have similarity 1, one has 0).  Similarities are
    vectorised over each block.  Cost: the in-memory all-pairs search at radius k plus
    O(192) per candidate."""
    state = snapshot.state
    # Looked at once, not per block: most collections hold no featureless document, and
    # pair_similarities gathers each pair's states anyway.
    dropping = not include_featureless and bool((state == FEATURELESS).any())
    for left, right, distance in iter_pairs_any_k(snapshot.fingerprints, k, workers):
        if dropping:
            keep = (state[left] != FEATURELESS) & (state[right] != FEATURELESS)
            left, right, distance = left[keep], right[keep], distance[keep]
        similarity = pair_similarities(snapshot, left, right, distance, kind)
        if threshold is not None:
            keep = similarity >= threshold
            left, right, distance, similarity = left[keep], right[keep], distance[keep], similarity[keep]
        if len(left):
            yield left, right, distance, similarity
