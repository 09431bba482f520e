"""Similarity thresholds: from a threshold to the Hamming radius that finds its candidates,
and from a fingerprint distance to the similarity it estimates.

A threshold is a similarity in (0, 1]: the Jaccard similarity of two texts' feature sets, as
estimated by :func:`candidate_similarities`: when both have a 192-byte sketch, the joint
maximum-likelihood estimate from the sketch and the 64-bit minhash fingerprint together
(:func:`joint_similarities`; the sketch alone for SimHash), else by the fingerprints alone.
SimHash of weighted features (tf, log or IDF weights) is the exception, :data:`WEIGHTED`:
its bits estimate the cosine of the weighted vectors, which bounds no Jaccard of the sets
(a text and its copy with one line repeated 40 times have the same set and a low weighted
cosine), so its similarity is that cosine, estimated from the fingerprint alone.
"""

from __future__ import annotations

import math
from functools import cache, lru_cache
from typing import Any, NamedTuple

import numpy as np
import numpy.typing as npt

from simdb.errors import InvalidInputError
from simdb.fingerprint import SKETCH_BYTES, sketch_estimates
from simdb.keys import describe
from simdb.plan import BITS, MAX_DATABASE_TABLES, TablePlan
from simdb.validation import check_threshold

__all__ = ["check_threshold"]  # re-exported: it lived here

#: The similarity threshold used when none is given.
DEFAULT_THRESHOLD = 0.9
#: Share of the pairs at or above a threshold that the candidate radius must find.
CANDIDATE_RECALL = 0.97
#: The similarity of SimHash fingerprints of weighted features (see the module docstring).
WEIGHTED = "weighted-simhash"
KINDS = ("simhash", "minhash", WEIGHTED)


def _bit_flip_probability(threshold: float, kind: str) -> float:
    """The chance that one fingerprint bit differs between two texts at similarity
    ``threshold``: (1 - J) / 2 for one-bit minwise hashing; arccos(cos) / pi for SimHash,
    taking the threshold as a cosine (a set's cosine is never below its Jaccard)."""
    if kind == "minhash":
        return (1.0 - threshold) / 2.0
    return math.acos(min(1.0, threshold)) / math.pi


def candidate_distance(threshold: float, kind: str, *, verified: bool) -> int:
    """The Hamming radius whose candidates, after the similarity check, find at least 97% of
    the pairs at similarity >= ``threshold``.

    ``verified=True`` (candidates are checked with sketches): the 97% quantile of the
    distance of a pair exactly at the threshold, Binomial(64, p) with p the per-bit flip
    chance ((1 - t) / 2 for minhash, arccos(t) / pi for simhash).  ``verified=False`` (the
    fingerprint's own estimate decides): the largest distance whose estimate is still >= t,
    floor(64 (1 - t) / 2) for minhash and floor(64 arccos(t) / pi) for simhash.  At most 64.
    The verified radius stays right under the joint estimate (:func:`joint_similarities`):
    it keeps >= 97% of the pairs at J >= t, and more than 99% of the pairs the joint
    estimate puts at >= t lie within it (the fingerprint bits in the estimate penalise a large
    distance; tests/test_database_threshold.py checks both by simulation).  O(64)."""
    threshold = check_threshold(threshold)
    if kind not in KINDS:
        raise InvalidInputError(f"kind={describe(kind)} is not one of {', '.join(KINDS)}")
    if not verified or kind == WEIGHTED:  # weighted: no sketch checks the candidates
        # A small epsilon keeps exact boundaries (t = 0.5 -> 16 bits) from rounding down.
        return min(BITS, math.floor(BITS * _bit_flip_probability(threshold, kind) + 1e-9))
    cumulative = 0.0
    for distance, share in enumerate(_distance_shares(threshold, kind)):
        cumulative += share
        if cumulative >= CANDIDATE_RECALL:
            return distance
    return BITS


#: The share of the pairs at a threshold beyond the index's k from which an ``if_new`` add
#: says what it cannot see (:func:`if_new_blind_spot`).
IF_NEW_UNSEEN_NOTE = 0.25


class BlindSpot(NamedTuple):
    """What an ``if_new`` add cannot see (:func:`if_new_blind_spot`): the ``unseen`` share of
    the pairs at its threshold, the index ``k`` that would see them all, and the table
    entries such an index reads per probe, per stored document (:attr:`TablePlan.read_share`)."""

    unseen: float
    needed_k: int
    read_share: float


def if_new_blind_spot(k: int, threshold: float, kind: str) -> BlindSpot | None:
    """What an ``if_new`` add at ``threshold`` cannot see on an index of ``k`` bits (it
    compares only the stored documents within k bits, as a scan per batch would cost far
    more than the add), where that is at least :data:`IF_NEW_UNSEEN_NOTE` of the pairs at
    the threshold; else None (0.9 on minhash at k=5: 10%).  O(64) and a plan's tables."""
    unseen = 1.0 - share_within(k, threshold, kind)
    if unseen < IF_NEW_UNSEEN_NOTE:
        return None
    needed = candidate_distance(threshold, kind, verified=True)
    return BlindSpot(unseen, needed, TablePlan.create(needed, max_tables=MAX_DATABASE_TABLES).read_share)


def share_within(distance: int, threshold: float, kind: str) -> float:
    """The share of the pairs exactly at similarity ``threshold`` whose ``kind``
    fingerprints differ in at most ``distance`` bits: Binomial(64, p) at ``distance``, p as
    in :func:`candidate_distance`.  Pairs more similar lie within it more often.  O(64)."""
    return math.fsum(_distance_shares(threshold, kind)[: max(0, distance) + 1])


@lru_cache(maxsize=256)
def _distance_shares(threshold: float, kind: str) -> tuple[float, ...]:
    """The share of the pairs at similarity ``threshold`` at each distance 0..64: the
    Binomial(64, p) probabilities, p the chance that one bit differs.  O(64) the first time
    for a threshold (30 us), then a cache lookup: every text query and pairs() call asks."""
    flip = _bit_flip_probability(threshold, kind)
    return tuple(math.comb(BITS, bits) * flip**bits * (1.0 - flip) ** (BITS - bits) for bits in range(BITS + 1))


def fingerprint_similarities(distances: npt.ArrayLike, kind: str) -> npt.NDArray[np.float64]:
    """The similarity that fingerprint distances (integers 0-64) estimate: minhash
    max(0, 1 - 2d/64) (the Jaccard estimate of one-bit minwise hashing), simhash
    cos(pi d / 64) clipped to [0, 1] (a cosine estimate).  O(n): one lookup per distance in
    a table of the 65 values (a query's few candidates cost one numpy call, not five)."""
    return _similarity_table(kind)[np.asarray(distances, dtype=np.intp)]


@cache
def _similarity_table(kind: str) -> npt.NDArray[np.float64]:
    d = np.arange(BITS + 1, dtype=np.float64)
    table = np.clip(1.0 - 2.0 * d / BITS if kind == "minhash" else np.cos(np.pi * d / BITS), 0.0, 1.0)
    table.setflags(write=False)  # shared by every caller; lookups return copies
    return table


def fingerprint_similarity(distance: int, kind: str) -> float:
    """:func:`fingerprint_similarities` of one distance."""
    return float(fingerprint_similarities(np.array([distance]), kind)[0])


#: Steps of the grid of Jaccard values the joint estimate maximises its likelihood over.
JOINT_GRID = 10_000


@lru_cache(maxsize=1)
def _joint_table() -> npt.NDArray[np.float64]:
    """(65, SKETCH_BYTES + 1): the maximum-likelihood Jaccard for each (agreeing fingerprint
    bits, agreeing sketch bytes), over the grid J = i / JOINT_GRID.  Computed once: about
    0.3 s and 16 MB while it is built, 100 KB kept."""
    grid = np.arange(JOINT_GRID + 1, dtype=np.float64) / JOINT_GRID
    tiny = 1e-300  # log(0) at J = 1 (no bit may differ) or J = 0; 0 * log(tiny) stays 0
    bit_agrees = (1.0 + grid) / 2.0
    byte_agrees = grid + (1.0 - grid) / 256.0
    log_bit = np.log(bit_agrees), np.log(np.maximum(1.0 - bit_agrees, tiny))
    log_byte = np.log(byte_agrees), np.log(np.maximum(1.0 - byte_agrees, tiny))
    agreeing_bytes = np.arange(SKETCH_BYTES + 1, dtype=np.float64)[:, None]
    byte_part = agreeing_bytes * log_byte[0] + (SKETCH_BYTES - agreeing_bytes) * log_byte[1]
    table = np.empty((BITS + 1, SKETCH_BYTES + 1), dtype=np.float64)
    for bits in range(BITS + 1):
        likelihood = byte_part + (bits * log_bit[0] + (BITS - bits) * log_bit[1])
        table[bits] = grid[np.argmax(likelihood, axis=1)]
    return table


def joint_similarities(agreeing_bits: npt.ArrayLike, agreeing_bytes: npt.ArrayLike) -> npt.NDArray[np.float64]:
    """The joint maximum-likelihood Jaccard estimate of pairs of texts from their 64-bit
    minhash fingerprints and :data:`SKETCH_BYTES`-byte sketches together, given how many
    fingerprint bits (0..64) and sketch bytes (0..SKETCH_BYTES) agree.  Model: each bit
    agrees with probability (1 + J) / 2 and each byte with J + (1 - J) / 256, all
    independent; the estimate maximises the joint binomial likelihood over J in [0, 1] on a
    grid of 1 / :data:`JOINT_GRID` (the log-likelihood is concave in J, so the grid's best
    point is within a step of the true maximum).  Its standard deviation at J = 0.9 is about
    0.020, against 0.022 for the sketch alone.  Vectorised: one table lookup per pair after
    a one-off table (:func:`_joint_table`).  O(n), numpy."""
    bits = np.asarray(agreeing_bits, dtype=np.int64)
    byte_counts = np.asarray(agreeing_bytes, dtype=np.int64)
    if bits.size and (int(bits.min()) < 0 or int(bits.max()) > BITS):
        raise InvalidInputError(f"agreeing_bits must be in 0..{BITS}")
    if byte_counts.size and (int(byte_counts.min()) < 0 or int(byte_counts.max()) > SKETCH_BYTES):
        raise InvalidInputError(f"agreeing_bytes must be in 0..{SKETCH_BYTES}")
    return _joint_table()[bits, byte_counts]


def candidate_similarities(
    distances: npt.ArrayLike, agreeing_bytes: npt.ArrayLike, kind: str
) -> npt.NDArray[np.float64]:
    """The similarity of candidate pairs that both have a sketch, from their fingerprint
    ``distances`` and how many of their sketch bytes agree: :func:`joint_similarities` for
    minhash fingerprints, the sketch-only :func:`simdb.fingerprint.sketch_estimates` for
    SimHash (its bits estimate a cosine, not J), and for :data:`WEIGHTED` SimHash the
    fingerprint's cosine estimate, as without sketches.  The one estimate the database uses
    for pairs, queries and if_new.  O(n), numpy."""
    if kind == "minhash":
        return joint_similarities(BITS - np.asarray(distances, dtype=np.int64), agreeing_bytes)
    if kind == WEIGHTED:
        return fingerprint_similarities(distances, kind)
    return sketch_estimates(agreeing_bytes)


def kind_of(settings: Any) -> str:
    """The similarity that a database's thresholds and results measure, by its stored
    settings (a Fingerprinter or None): ``"minhash"``, ``"simhash"`` or, for SimHash of
    tf, log or IDF weights, :data:`WEIGHTED`.  Databases that only ever stored fingerprints
    are taken as SimHash, which :func:`simdb.simhash` makes."""
    if settings is None:
        return "simhash"
    if settings.kind == "simhash" and (settings.weights != "binary" or settings.idf_size is not None):
        return WEIGHTED
    return str(settings.kind)
