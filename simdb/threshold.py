"""Similarity thresholds: from a threshold to the Hamming radius that finds its candidates,
and from a fingerprint distance to the similarity it estimates.

A threshold is a similarity in (0, 1]: the Jaccard similarity of two texts' feature sets, as
estimated by their 128-byte sketches when both have one, else by their 64-bit fingerprints.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import numpy.typing as npt

from simdb.errors import InvalidInputError
from simdb.keys import describe
from simdb.plan import BITS

#: The similarity threshold used when none is given.
DEFAULT_THRESHOLD = 0.9
#: Share of the pairs at or above a threshold that the candidate radius must find.
CANDIDATE_RECALL = 0.97
KINDS = ("simhash", "minhash")


def check_threshold(threshold: object) -> float:
    """``threshold`` as a float in (0, 1], else InvalidInputError naming it.  O(1)."""
    if isinstance(threshold, bool) or not isinstance(threshold, (int, float, np.floating, np.integer)):
        raise InvalidInputError(f"threshold={describe(threshold)} is not a number in (0, 1]")
    value = float(threshold)
    if not 0.0 < value <= 1.0:  # NaN fails too
        raise InvalidInputError(f"threshold={describe(threshold)} is not in (0, 1]", "use a similarity such as 0.9")
    return value


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
    O(64)."""
    threshold = check_threshold(threshold)
    if kind not in KINDS:
        raise InvalidInputError(f"kind={describe(kind)} is not one of {', '.join(KINDS)}")
    flip = _bit_flip_probability(threshold, kind)
    if not verified:
        # A small epsilon keeps exact boundaries (t = 0.5 -> 16 bits) from rounding down.
        return min(BITS, math.floor(BITS * flip + 1e-9))
    cumulative = 0.0
    for distance in range(BITS + 1):
        cumulative += math.comb(BITS, distance) * flip**distance * (1.0 - flip) ** (BITS - distance)
        if cumulative >= CANDIDATE_RECALL:
            return distance
    return BITS


def fingerprint_similarities(distances: npt.ArrayLike, kind: str) -> npt.NDArray[np.float64]:
    """The similarity that fingerprint distances estimate: minhash max(0, 1 - 2d/64) (the
    Jaccard estimate of one-bit minwise hashing), simhash cos(pi d / 64) clipped to [0, 1]
    (a cosine estimate).  O(n), numpy."""
    d = np.asarray(distances, dtype=np.float64)
    if kind == "minhash":
        return np.clip(1.0 - 2.0 * d / BITS, 0.0, 1.0)
    return np.clip(np.cos(np.pi * d / BITS), 0.0, 1.0)


def fingerprint_similarity(distance: int, kind: str) -> float:
    """:func:`fingerprint_similarities` of one distance."""
    return float(fingerprint_similarities(np.array([distance]), kind)[0])


def kind_of(settings: Any) -> str:
    """The fingerprint kind of stored settings (a Fingerprinter or None): databases that only
    ever stored fingerprints are taken as SimHash, which :func:`simdb.simhash` makes."""
    return "simhash" if settings is None else str(settings.kind)
