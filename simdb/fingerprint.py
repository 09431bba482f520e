"""SimHash (Charikar 2002) and minwise fingerprints of text, fast, reproducible and configurable.

The fingerprint of a text is defined exactly, so that it is the same in every process, on
every platform and in every release that keeps :data:`SETTINGS_VERSION`:

1. The text is tokenised by :mod:`simdb.features` (NFKC, casefolding, punctuation and
   whitespace folding, one token per character for scripts written without spaces; from
   pipeline version 2, the ``normalization`` setting, invisible characters deleted and
   every script's digits made ASCII; from version 3, optional diacritics dropped and
   words broken by a hyphen at a line end joined), then
   stop words are dropped if a list is chosen (``stopwords="english"``; by default every
   word is kept).
2. **Token hash.**  Each token (for ``features="char"``: each character of the tokens
   joined by single spaces) is hashed with MurmurHash3 x64 128 (``mmh3``) of its UTF-8
   bytes with the fixed seed :data:`SEED`, giving two 64-bit lanes: lane 0 is the low half
   of ``mmh3.hash128``, lane 1 the high half.  Python's salted ``hash`` is never used.
3. **Feature hash.**  A feature is ``ngram`` consecutive tokens ``t1 .. tn`` (one token for
   ``features="word"``).  Per lane, its hash is ``fmix64(((t1 * P + t2) * P + ...) + tn)``
   with arithmetic mod 2**64, ``P`` = :data:`MULTIPLIER` and ``fmix64`` the MurmurHash3
   finaliser.  A text with fewer than ``ngram`` tokens (characters) but at least one has
   one feature made of all of them.  A ``bits=64`` fingerprint uses lane 0, ``bits=128``
   uses ``lane0 | lane1 << 64`` and ``bits=32`` uses ``lane0 >> 32``.
4. **Weights.**  ``weights="tf"`` counts every occurrence (weight 1 each);
   ``weights="binary"`` counts each distinct feature once; ``weights="log"`` weighs each
   distinct feature ``1 + floor(log2(tf))``, so no repeated line outvotes the text.  A
   fitted IDF table (:meth:`Fingerprinter.fit_idf`) multiplies each by the feature's
   integer IDF weight.
5. **Bits.**  Bit ``j`` of the fingerprint is 1 exactly when the weights of the features
   whose hash has bit ``j`` set make up *more than half* of the total weight; ties give 0.
6. **kind="minhash"** (one-bit one-permutation minwise hashing, Li & König 2010, densified
   as in Shrivastava 2017) takes the set of distinct lane-0 feature hashes instead (weights
   and IDF play no part).  With ``B = bits`` bins, bin ``i`` holds the smallest hash whose
   top ``log2(B)`` bits are ``i``.  An empty bin takes the minimum of the first non-empty
   bin in its probe order (bins ``j`` sorted by ``fmix64(PROBE_SALT + i * B + j)``).  Bit
   ``i`` is bit 0 of ``fmix64(m_i ^ (i + 1) * MULTIPLIER)``; it differs between two texts
   with probability about ``(1 - J) / 2``.
7. **Sketch** (:meth:`Fingerprinter.fingerprint_and_sketch`, either kind): the same
   construction with 192 bins over ``s = fmix64(h ^ SKETCH_SALT)`` of each distinct hash
   (bin ``((s >> 32) * 192) >> 32``, the top of the value's range), keeping the low byte
   of each bin's value: 192 bytes, b"" for a featureless text; :func:`sketch_similarity`
   estimates Jaccard from it alone, :func:`simdb.threshold.joint_similarities` from it and
   a minhash fingerprint together.

All SimHash weights are integers, and sums of integers below 2**53 are exact in float64, so the
vectorised numpy summation gives the same bits in any order on any BLAS.

Defined results for edge cases: the empty text, a text of only punctuation or whitespace
(no tokens) and a text whose tokens are all stop words have no features and fingerprint 0.
A text of one token has one feature, so its fingerprint is that feature's hash.  ``bytes``
are decoded as UTF-8, from pipeline version 7 each byte that is not becoming the surrogate
that stands for it (``surrogateescape``), a letter of its word for bytes 0xC0-0xFF and a
separator for 0x80-0xBF (version 8 reads those beside an ASCII letter, or alone, as
cp1252); before, every such byte is U+FFFD, a separator.  Other lone
surrogates are replaced by U+FFFD and so act as separators.  A text of any length is processed in chunks of
:data:`simdb.features.CHUNK_CHARS` characters with per-bit sums carried across chunks, so
with ``weights="tf"`` memory stays bounded whatever the length (tracemalloc peaks of about
4 MB for English and 30 MB for text made only of CJK characters, one token each per chunk);
``weights="binary"`` must remember every distinct feature and needs 8 bytes (16 at 128 bits)
per distinct feature.

Defaults (``kind="minhash"`` of word 3-shingles of every word, 64 bits, a 192-byte sketch;
for ``kind="simhash"`` binary weights) were chosen from ``bench/quality.py``; see
bench/RESULTS.md, "Answer quality".  Speed: about 19,000 2 KB English texts per second on one
core for a minwise fingerprint and its sketch, about 20,000 through :func:`simhash_many`.
"""

from __future__ import annotations

import errno
import math
import multiprocessing
import os
import signal
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import Future, ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from functools import lru_cache
from itertools import islice
from typing import Any

import mmh3
import numpy as np
import numpy.typing as npt

from simdb import features as _features_module
from simdb.arrays import distinct
from simdb.errors import FingerprinterError, InvalidInputError, WorkerDiedError, WorkerStartError
from simdb.features import (
    NORMALIZATION,
    NORMALIZATIONS,
    ascii_byte_tokens,
    ascii_prepared,
    decoded_tokens,
    iter_token_chunks,
    text_tokens,
)
from simdb.keys import iterate
from simdb.stopwords import STOPWORD_LISTS, stopword_list
from simdb.validation import check_fingerprint, check_int, check_workers

#: Version of the fingerprint definition above.  Bump it whenever a change to this module
#: could change any fingerprint, so stored settings from another version are refused.
SETTINGS_VERSION = 1
#: The mmh3 seed of every token hash.
SEED = 0x51D_B5EED & 0xFFFFFFFF
#: The odd multiplier of the polynomial that combines token hashes into a shingle hash.
MULTIPLIER = 0x9E3779B97F4A7C15
#: Fixed-point scale of IDF weights: a weight of ``w`` is stored as ``round(w * IDF_SCALE)``.
IDF_SCALE = 64

#: Fingerprint kinds: SimHash (cosine of weighted features) or one-bit one-permutation
#: minwise hashing (Jaccard of the feature sets).
KINDS = ("simhash", "minhash")
FEATURE_KINDS = ("word", "word-shingle", "char")
WEIGHT_KINDS = ("tf", "binary", "log")
#: Bytes of a verification sketch: one byte per bin of a 192-bin one-permutation minwise
#: sketch of the features (see :func:`sketch_similarity`).  192 rather than 128 so the
#: joint estimate (:func:`simdb.threshold.joint_similarities`) is sharp enough at 0.9
#: (issue #14); about 450 bytes per document after compact().
SKETCH_BYTES = 192
#: Xored into feature hashes before :func:`_fmix64` to give the sketch its own permutation.
SKETCH_SALT = 0x2545F4914F6CDD1D
#: Offset of the hashes that order the probes of densification (see _probe_order).
PROBE_SALT = 0x6A09E667F3BCC909
FINGERPRINT_BITS = (32, 64, 128)
MAX_NGRAM = {"word": 1, "word-shingle": 16, "char": 64}
DEFAULT_NGRAM = {"word": 1, "word-shingle": 3, "char": 5}
_DEFAULT_WORD_NGRAM = DEFAULT_NGRAM["word-shingle"]

_MASK64 = (1 << 64) - 1
_FMIX_SHIFT = np.uint64(33)
_FMIX_C1 = np.uint64(0xFF51AFD7ED558CCD)
_FMIX_C2 = np.uint64(0xC4CEB9FE1A85EC53)
_MULTIPLIER = np.uint64(MULTIPLIER)
_SKETCH_SALT = np.uint64(SKETCH_SALT)
_UINT64_MAX = np.uint64(_MASK64)
# Token-hash caches are cleared when they grow past this many entries; a cache only saves
# time, every result is the same with or without it.
_CACHE_LIMIT = 1 << 20
# Documents per task of the process pool: big enough that pickling and scheduling are a
# small fraction of the work, small enough to balance two workers on modest batches.
_POOL_CHUNK_DOCS = 256
# Index ranges per worker when forked workers share the caller's list (see _iter_in_pool).
_RANGES_PER_WORKER = 8
# Most documents fingerprinted together in one numpy batch (fewer when they are long).
_BATCH_DOCS = 1024
# Feature hashes of a text's chunks collected before they are merged (see _distinct_features).
_MERGE_ROWS = 1 << 20

UInt64Array = npt.NDArray[np.uint64]
FloatArray = npt.NDArray[np.float64]
Text = str | bytes
Feature = tuple[str | bytes | int, int | float]


def _token_bytes(token: str | bytes) -> bytes:
    """The bytes a token's hash is of: its UTF-8, a surrogate standing for an undecodable
    byte (version 7) written as its own three bytes, as :func:`simhash_features` writes
    one (no valid UTF-8 holds them).  mmh3 hashes a str as its UTF-8, so a token of valid
    text hashes alike as str and as bytes (and mmh3 crashes on a lone surrogate: none may
    reach it)."""
    return token if isinstance(token, bytes) else token.encode("utf-8", "surrogatepass")


class _Lane0Cache(dict[str | bytes, int]):
    """token → lane 0 of its mmh3 hash, as a signed 64-bit int (computed on first use)."""

    def __missing__(self, token: str | bytes) -> int:
        if len(self) >= _CACHE_LIMIT:
            self.clear()
        value = mmh3.hash64(_token_bytes(token), SEED)[0]
        self[token] = value
        return value


class _BothLanesCache(dict[str | bytes, tuple[int, int]]):
    """token → both lanes of its mmh3 hash, as signed 64-bit ints (for 128-bit fingerprints)."""

    def __missing__(self, token: str | bytes) -> tuple[int, int]:
        if len(self) >= _CACHE_LIMIT:
            self.clear()
        value = mmh3.hash64(_token_bytes(token), SEED)
        self[token] = value
        return value


_LANE0 = _Lane0Cache()
_BOTH_LANES = _BothLanesCache()


def _token_hashes(tokens: Sequence[str | bytes], lanes: int) -> UInt64Array:
    """The mmh3 hashes of ``tokens`` (str, or bytes of ASCII tokens, whose UTF-8 is the same)
    as a (len(tokens), lanes) uint64 array.  O(n), one dict lookup per token."""
    if lanes == 1:
        signed = np.fromiter(map(_LANE0.__getitem__, tokens), dtype=np.int64, count=len(tokens))
        return signed.view(np.uint64).reshape(-1, 1)
    pairs = np.array(list(map(_BOTH_LANES.__getitem__, tokens)), dtype=np.int64).reshape(-1, 2)
    return pairs.view(np.uint64)


def _fmix64(values: UInt64Array) -> UInt64Array:
    """MurmurHash3's 64-bit finaliser, in place on a uint64 array; returns it.  O(n)."""
    values ^= values >> _FMIX_SHIFT
    values *= _FMIX_C1
    values ^= values >> _FMIX_SHIFT
    values *= _FMIX_C2
    values ^= values >> _FMIX_SHIFT
    return values


def _shingle_hashes(token_hashes: UInt64Array, ngram: int) -> UInt64Array:
    """Feature hashes of every window of ``ngram`` consecutive token hashes (rows), by
    Horner's rule with :data:`MULTIPLIER`, then :func:`_fmix64`.  O(rows * ngram), with
    ``ngram`` vectorised passes; ``ngram`` must not exceed the number of rows."""
    windows = token_hashes.shape[0] - ngram + 1
    combined = token_hashes[:windows].copy()
    for offset in range(1, ngram):
        combined *= _MULTIPLIER
        combined += token_hashes[offset : offset + windows]
    return _fmix64(combined)


def _bit_matrix(feature_hashes: UInt64Array, bits: int) -> npt.NDArray[np.uint8]:
    """A (rows, bits) 0/1 matrix: column ``j`` is bit ``j`` of each feature's hash.  O(rows * bits),
    vectorised by ``unpackbits`` over the little-endian bytes of the hashes."""
    if bits == 32:
        raw = (feature_hashes[:, 0] >> np.uint64(32)).astype("<u4").view(np.uint8)
    else:
        columns = feature_hashes if bits == 128 else feature_hashes[:, :1]
        raw = np.ascontiguousarray(columns, dtype="<u8").view(np.uint8)
    return np.unpackbits(raw, bitorder="little").reshape(-1, bits)


def _fingerprint_from_sums(sums: npt.NDArray[Any], total: float) -> int:
    """Bit j is set when ``2 * sums[j] > total`` (a strict majority of the weight).  O(bits)."""
    packed = np.packbits(2.0 * sums > total, bitorder="little")
    return int.from_bytes(packed.tobytes(), "little")


def _char_hashes(joined: str, lanes: int) -> UInt64Array:
    """Token hashes of every character of ``joined``: each distinct character is hashed
    once (a 128-entry table for ASCII), then gathered.  O(n log n) for non-ASCII text."""
    if not joined:
        return np.empty((0, lanes), dtype=np.uint64)
    if joined.isascii():
        return _ascii_char_table(lanes)[np.frombuffer(joined.encode("ascii"), dtype=np.uint8)]
    # Version 7's surrogates for undecodable bytes pass, each a character of its own.
    codes = np.frombuffer(joined.encode("utf-32-le", "surrogatepass"), dtype="<u4")
    characters, positions = np.unique(codes, return_inverse=True)
    return _token_hashes([chr(code) for code in characters.tolist()], lanes)[positions.reshape(-1)]


@lru_cache(maxsize=2)
def _ascii_char_table(lanes: int) -> UInt64Array:
    table = _token_hashes([chr(code) for code in range(128)], lanes)
    table.flags.writeable = False
    return table


def _distinct_per_document(
    features: UInt64Array, counts: npt.NDArray[np.int64], multiplicity: npt.NDArray[np.int64] | None = None
) -> tuple[UInt64Array, npt.NDArray[np.int64], npt.NDArray[np.int64]]:
    """Merge repeated features within each document.  Features are grouped by document in
    order (``counts`` rows each), each occurring ``multiplicity`` times (default once);
    returns the distinct features grouped the same way, sorted by hash inside each
    document, their counts per document and their summed multiplicities.  O(n log n)."""
    documents = np.repeat(np.arange(counts.size), counts)
    keys = tuple(features[:, lane] for lane in reversed(range(features.shape[1])))
    order = np.lexsort((*keys, documents))
    features, documents = features[order], documents[order]
    first = np.ones(documents.size, dtype=bool)
    first[1:] = (documents[1:] != documents[:-1]) | np.any(features[1:] != features[:-1], axis=1)
    starts = np.flatnonzero(first)
    if multiplicity is None:
        summed = np.diff(np.append(starts, documents.size)).astype(np.int64)
    else:
        summed = np.add.reduceat(multiplicity[order], starts) if starts.size else np.empty(0, dtype=np.int64)
    return features[first], np.bincount(documents[first], minlength=counts.size), summed


def _segment_bit_counts(
    matrix: npt.NDArray[np.uint8], starts: npt.NDArray[np.int64], counts: npt.NDArray[np.int64]
) -> npt.NDArray[np.int64]:
    """Per-segment column sums of a 0/1 (rows, bits) matrix whose segments (one per
    document) start at ``starts`` and have ``counts`` rows, all non-empty.

    Eight 0/1 bytes are summed at once as one uint64 (byte lanes cannot carry while a
    sub-segment has at most 255 rows), then the sub-segment byte counts are added up per
    document.  About 8× faster than summing the bytes as ints."""
    subsegments = (counts + 254) // 255
    first_sub = np.cumsum(subsegments) - subsegments
    sub_index = np.arange(int(subsegments.sum())) - np.repeat(first_sub, subsegments)
    sub_starts = np.repeat(starts, subsegments) + 255 * sub_index
    words = matrix.view(np.uint64)
    partial = np.add.reduceat(words, sub_starts, axis=0).view(np.uint8)
    return np.add.reduceat(partial, first_sub, axis=0, dtype=np.int64)


def _packed_rows_to_ints(packed: npt.NDArray[np.uint8], bits: int) -> list[int]:
    """Rows of little-endian packed bits as Python ints."""
    if bits == 32:
        return packed.view("<u4").reshape(-1).tolist()
    words = packed.view("<u8")
    if bits == 64:
        return words.reshape(-1).tolist()
    return [low | high << 64 for low, high in words.tolist()]


class _IdfTable:
    """A frozen IDF table: sorted 64-bit feature hashes (lane 0) and their integer weights.

    Features that are not in the table get ``default_weight``, the weight of a feature seen
    in one fitting document, so a table need not store the (many) features seen once.
    Lookup is a binary search: O(n log size) for n features.
    """

    __slots__ = ("default_weight", "documents", "hashes", "weights")

    def __init__(
        self, documents: int, default_weight: int, hashes: UInt64Array, weights: npt.NDArray[np.uint32]
    ) -> None:
        self.documents = documents
        self.default_weight = default_weight
        self.hashes = hashes
        self.weights = weights

    def lookup(self, lane0: UInt64Array) -> FloatArray:
        """Weights of the given feature hashes, as float64 (exact small integers)."""
        if self.hashes.size == 0:
            return np.full(lane0.shape[0], float(self.default_weight))
        positions = np.searchsorted(self.hashes, lane0)
        np.minimum(positions, self.hashes.size - 1, out=positions)
        found = self.hashes[positions] == lane0
        return np.where(found, self.weights[positions], self.default_weight).astype(np.float64)

    def key(self) -> tuple[int, int, bytes, bytes]:
        return (self.documents, self.default_weight, self.hashes.tobytes(), self.weights.tobytes())

    def to_dict(self) -> dict[str, Any]:
        return {
            "documents": self.documents,
            "scale": IDF_SCALE,
            "default_weight": self.default_weight,
            "hashes": self.hashes.astype("<u8").tobytes(),
            "weights": self.weights.astype("<u4").tobytes(),
        }

    @classmethod
    def from_dict(cls, data: Any) -> _IdfTable:
        """Validate a dict made by :meth:`to_dict`; raise InvalidInputError naming the field."""
        if not isinstance(data, dict):
            raise InvalidInputError(f"idf={type(data).__name__} is not a dict")
        expected = {"documents", "scale", "default_weight", "hashes", "weights"}
        if set(data) != expected:
            raise InvalidInputError(f"idf has fields {sorted(map(str, data))}, expected {sorted(expected)}")
        for name in ("documents", "scale", "default_weight"):
            check_int(f"idf.{name}", data[name], minimum=0)
        if data["scale"] != IDF_SCALE:
            raise InvalidInputError(f"idf.scale={data['scale']!r} is not {IDF_SCALE}")
        if data["default_weight"] < 1:
            raise InvalidInputError(f"idf.default_weight={data['default_weight']!r} is not positive")
        for name, width in (("hashes", 8), ("weights", 4)):
            if not isinstance(data[name], bytes) or len(data[name]) % width:
                raise InvalidInputError(f"idf.{name} is not bytes of {width}-byte values")
        hashes = np.frombuffer(data["hashes"], dtype="<u8").astype(np.uint64)
        weights = np.frombuffer(data["weights"], dtype="<u4").astype(np.uint32)
        if hashes.size != weights.size:
            raise InvalidInputError(f"idf.hashes has {hashes.size} entries but idf.weights has {weights.size}")
        if hashes.size > 1 and not bool(np.all(hashes[1:] > hashes[:-1])):
            raise InvalidInputError("idf.hashes is not strictly increasing")
        if weights.size and int(weights.min()) < 1:
            raise InvalidInputError("idf.weights has a weight below 1")
        return cls(data["documents"], data["default_weight"], hashes, weights)


def _idf_weight(documents: int, document_frequency: int) -> int:
    """The smoothed IDF ``1 + ln((1 + N) / (1 + df))`` in fixed point, at least 1."""
    return max(1, round(IDF_SCALE * (1.0 + math.log((1 + documents) / (1 + document_frequency)))))


class _Partial:
    """What the kernel (:meth:`Fingerprinter._reduce`) knows about a batch of documents:
    per-bit weight sums and total weights (SimHash), per-bin minimum feature hashes and which
    bins hold a feature (minwise fingerprint and sketch).  Partials of the chunks of one long
    text merge exactly: sums add, minima take the minimum, filled bins take the union."""

    __slots__ = ("filled", "minima", "sums", "totals")

    def __init__(
        self,
        sums: FloatArray | None,
        totals: FloatArray | None,
        minima: UInt64Array | None,
        filled: npt.NDArray[np.bool_] | None,
    ) -> None:
        self.sums = sums
        self.totals = totals
        self.minima = minima
        self.filled = filled

    def merge(self, other: _Partial) -> _Partial:
        """Combine with the partial of a later chunk of the same document(s).  O(bins)."""
        if self.sums is not None and other.sums is not None and self.totals is not None and other.totals is not None:
            self.sums += other.sums
            self.totals += other.totals
        if (
            self.minima is not None
            and other.minima is not None
            and self.filled is not None
            and other.filled is not None
        ):
            np.minimum(self.minima, other.minima, out=self.minima)
            self.filled |= other.filled
        return self


def _bin_minima(
    hashes: UInt64Array, counts: npt.NDArray[np.int64], bins: int, sketch: bool
) -> tuple[UInt64Array, npt.NDArray[np.bool_]]:
    """One-permutation minwise hashing of a batch: for each document (``counts`` rows each, in
    order) the minimum feature hash of each of ``bins`` bins (bin = top bits of the hash),
    then, if ``sketch``, of each of :data:`SKETCH_BYTES` bins of the re-hashed features
    (:func:`_sketch_hashes`).  Returns (docs, width) minima (empty bins hold 2**64 - 1) and
    the (docs, width) mask of bins that hold a feature.  O(rows): one scatter-minimum."""
    docs = counts.size
    width = bins + (SKETCH_BYTES if sketch else 0)
    row_offsets = np.repeat(np.arange(docs, dtype=np.int64) * width, counts)
    parts_index: list[npt.NDArray[np.int64]] = []
    parts_value: list[UInt64Array] = []
    if bins:
        shift = np.uint64(64 - bins.bit_length() + 1)
        parts_index.append(row_offsets + (hashes >> shift).astype(np.int64))
        parts_value.append(hashes)
    if sketch:
        rehashed = _sketch_hashes(hashes)
        # Bin = the top of the value's range, scaled to SKETCH_BYTES (not a power of two).
        column = ((rehashed >> np.uint64(32)) * np.uint64(SKETCH_BYTES)) >> np.uint64(32)
        parts_index.append(row_offsets + bins + column.astype(np.int64))
        parts_value.append(rehashed)
    index = np.concatenate(parts_index) if len(parts_index) > 1 else parts_index[0]
    values = np.concatenate(parts_value) if len(parts_value) > 1 else parts_value[0]
    minima = np.full(docs * width, _UINT64_MAX, dtype=np.uint64)
    np.minimum.at(minima, index, values)
    filled = np.zeros(docs * width, dtype=bool)
    filled[index] = True
    return minima.reshape(docs, width), filled.reshape(docs, width)


def _sketch_hashes(hashes: UInt64Array) -> UInt64Array:
    """The feature hashes under a second permutation, ``fmix64(h ^ SKETCH_SALT)``, so the
    sketch's bins are independent of the minwise fingerprint's.  O(n)."""
    return _fmix64(hashes ^ _SKETCH_SALT)


@lru_cache(maxsize=8)
def _probe_order(bins: int) -> npt.NDArray[np.intp]:
    """(bins, bins): row ``i`` lists every bin in the order an empty bin ``i`` probes them:
    ``j`` sorted by ``fmix64(PROBE_SALT + i * bins + j)``.  Fixed per bin, so two texts fill
    the same empty bin from the same place (optimal densification, Shrivastava 2017)."""
    keys = _fmix64(np.uint64(PROBE_SALT) + np.arange(bins * bins, dtype=np.uint64)).reshape(bins, bins)
    order = np.argsort(keys, axis=1, kind="stable")
    order.flags.writeable = False
    return order


def _densify(minima: UInt64Array, filled: npt.NDArray[np.bool_]) -> UInt64Array:
    """Fill each empty bin with the minimum of the first filled bin in its probe order
    (:func:`_probe_order`); rows with no filled bin are left as they are.  Returns a new
    array.  Typical documents have few empty bins, so the loop ends after a few passes;
    O(bins) passes at worst (a one-feature text)."""
    result = minima.copy()
    bins = minima.shape[1]
    order = _probe_order(bins)
    rows, columns = np.nonzero(~filled & filled.any(axis=1, keepdims=True))
    step = 0
    while rows.size:
        probe = order[columns, step]
        found = filled[rows, probe]
        result[rows[found], columns[found]] = minima[rows[found], probe[found]]
        rows, columns = rows[~found], columns[~found]
        step += 1
    return result


def _bin_values(minima: UInt64Array) -> UInt64Array:
    """``fmix64(m ^ (i + 1) * MULTIPLIER)`` of the minimum ``m`` of each bin ``i``: a value
    that is equal for equal minima and uniform otherwise, even where densification copied one
    bin's minimum into another.  O(bins)."""
    salts = np.arange(1, minima.shape[1] + 1, dtype=np.uint64) * _MULTIPLIER
    return _fmix64(minima ^ salts)


def _log_weights(multiplicity: npt.NDArray[np.int64]) -> FloatArray:
    """``1 + floor(log2(tf))`` (tf's bit length) of each count: exact integers, so a feature
    repeated 2,000 times weighs 11, not 2,000.  O(n)."""
    return np.frexp(multiplicity.astype(np.float64))[1].astype(np.float64)


def _check_choice(name: str, value: Any, choices: Sequence[Any]) -> None:
    # By type as well as value: 64.0 == 64 and True == 1, but neither is a setting.
    if isinstance(value, bool) or not any(isinstance(value, type(choice)) and value == choice for choice in choices):
        raise InvalidInputError(
            f"{name}={value!r} is not a valid setting",
            f"use one of {list(choices)}",
            argument=name,
            value=value,
            expected="one of " + ", ".join(map(str, choices)),
        )


def _as_text(text: Any, normalization: int = NORMALIZATION) -> str:
    """``text`` as the pipeline of version ``normalization`` reads it.  ``bytes`` are
    UTF-8: from version 7 each byte that is not becomes the surrogate that stands for it
    (``surrogateescape``), which the pipeline keeps (see :mod:`simdb.features`); earlier
    versions replace it, and read a text the CLI decoded so (its surrogates) as the
    replacement decoding of the same bytes, exactly as they always did.  O(len(text)) for bytes and, before version 7,
    for non-ASCII text."""
    if isinstance(text, str):
        return text if normalization >= 7 else _features_module.as_replacement_decoded(text)
    if isinstance(text, (bytes, bytearray, memoryview)):
        return bytes(text).decode("utf-8", errors="surrogateescape" if normalization >= 7 else "replace")
    raise InvalidInputError(f"text={type(text).__name__} is not str or bytes")


class Fingerprinter:
    """Reusable, immutable, serialisable fingerprint settings: text → SimHash fingerprint.

    Parameters (every one is validated; a bad value raises :class:`InvalidInputError` naming
    the setting):

    * ``features`` — ``"word-shingle"`` (word n-grams, the default), ``"word"`` (single words)
      or ``"char"`` (character n-grams of the normalised text).
    * ``ngram`` — tokens per feature: default 3 for word shingles, 5 for characters, 1 for
      ``"word"`` (word shingles with ``ngram=1`` *are* ``"word"`` and are stored as such).
    * ``bits`` — 64 (the database's width), 32 or 128.
    * ``weights`` — ``"binary"`` (each distinct feature counts once, the default), ``"tf"``
      (every occurrence counts; streams in bounded memory) or ``"log"``.  SimHash only:
      ``kind="minhash"`` takes the set of features and refuses any other weighting.
    * ``stopwords`` — ``None`` (the default: every word counts) or a language of
      :data:`simdb.stopwords.STOPWORD_LISTS`, whose stop words are dropped before features
      are formed (negations stay from pipeline version 4 on: "not" was one before it).
    * ``split_unspaced`` — give each character of Chinese, Japanese, Thai, ... its own token
      (word features only; character features never need it, so it is stored as ``True``).
    * ``normalization`` — the version of :mod:`simdb.features`' text pipeline: 6 (the
      default) is 5 with HTML character references decoded (``&rsquo;``, ``&#39;``), a
      text without words fingerprinted by its symbols (emoji, punctuation) and Korean read
      by syllable, as Chinese is by character; 5 is 4 with
      look-alike letters folded (a Cyrillic "а" in a Latin word, small
      capitals, "ł" as "l", the Arabic letters informal and Persian writing interchange),
      grave and acute accents typed for an apostrophe deleted, URL tracking parameters
      deleted and line-end hyphens joined across a page break; 4 is 3 with the English
      stop-word list keeping negations; 3 also drops
      diacritics that a reader can leave out ("café" is "cafe") and joins words broken by
      a hyphen at a line end; 2 deletes invisible characters, makes every script's digits
      ASCII and reads "İ" as "i"; 1 is the pipeline of settings stored before versions.  A
      database keeps the version it was made with.  ASCII texts tokenise alike in all but
      for the line-end hyphens of versions 3 on, the grave accents and URL tracking
      parameters of version 5 on, and the character references and wordless texts of
      version 6 on, version 7's URL forms, and version 8's hyphens, signs and "$".
      Version 7 keeps undecodable bytes as letters, folds the Indic nukta, the Devanagari
      candrabindu and capitals drawn like Latin ones, and reads URLs in a canonical form.
      Version 8 reads undecodable bytes beside ASCII letters as cp1252, joins every
      hyphenated word, takes symbols and signed numbers as tokens and sets superscript
      digits and fractions apart.  Left out, it is
      the current version, and opening a database with these settings takes the
      database's version (see :meth:`agrees_with`).

    Two Fingerprinters are ``==`` (and hash alike) exactly when their settings and IDF tables
    are equal, which is when they give the same fingerprints.  :meth:`to_dict` and
    :meth:`from_dict` round-trip them through plain data.
    """

    __slots__ = (
        "_bits",
        "_features",
        "_hash",
        "_idf",
        "_kind",
        "_ngram",
        "_normalization",
        "_normalization_given",
        "_split_unspaced",
        "_stopword_bytes",
        "_stopword_set",
        "_stopwords",
        "_weights",
    )
    # Declared for the type checker: __init__ sets the slots with object.__setattr__,
    # because __setattr__ is blocked to keep instances immutable.
    _features: str
    _ngram: int
    _bits: int
    _weights: str
    _stopwords: str | None
    _split_unspaced: bool
    _kind: str
    _normalization: int
    _normalization_given: bool
    _idf: _IdfTable | None
    _stopword_set: frozenset[str]
    _stopword_bytes: frozenset[bytes]
    _hash: int

    def __init__(
        self,
        features: str = "word-shingle",
        ngram: int | None = None,
        bits: int = 64,
        weights: str = "binary",
        stopwords: str | None = None,
        split_unspaced: bool = True,
        kind: str = "minhash",
        normalization: int | None = None,
        *,
        _idf: _IdfTable | None = None,
    ) -> None:
        _check_choice("kind", kind, KINDS)
        if normalization is not None:
            _check_choice("normalization", normalization, NORMALIZATIONS)
        _check_choice("features", features, FEATURE_KINDS)
        if ngram is None:
            ngram = DEFAULT_NGRAM[features]
        ngram = check_int(
            "ngram",
            ngram,
            minimum=1,
            maximum=MAX_NGRAM[features],
            hint=f"{MAX_NGRAM[features]} is the largest for features={features!r}",
        )
        if features == "word-shingle" and ngram == 1:
            features = "word"
        _check_choice("bits", bits, FINGERPRINT_BITS)
        _check_choice("weights", weights, WEIGHT_KINDS)
        if not isinstance(split_unspaced, bool):
            raise InvalidInputError(f"split_unspaced={split_unspaced!r} is not a bool")
        if features == "char":
            split_unspaced = True
        if kind == "minhash":
            if _idf is not None:
                raise InvalidInputError(
                    "an IDF table has no effect on kind='minhash'", "fit IDF for kind='simhash' only"
                )
            # A minwise fingerprint is of the feature set, so a weighting asked for would be
            # silently ignored: refuse it rather than fingerprint differently than asked.
            if weights != "binary":
                raise InvalidInputError(
                    f"weights={weights!r} has no effect on kind='minhash', which fingerprints the set of features",
                    "leave weights out, or give kind='simhash' for weighted features",
                    argument="weights",
                    value=weights,
                    expected="binary, as kind minhash fingerprints the set of features (tf and log need kind simhash)",
                )
        version = NORMALIZATION if normalization is None else normalization
        stopword_set = frozenset() if stopwords is None else stopword_list(stopwords, version)
        setter = object.__setattr__
        setter(self, "_features", features)
        setter(self, "_ngram", ngram)
        setter(self, "_bits", bits)
        setter(self, "_weights", weights)
        setter(self, "_stopwords", stopwords)
        setter(self, "_split_unspaced", split_unspaced)
        setter(self, "_kind", kind)
        setter(self, "_normalization", version)
        setter(self, "_normalization_given", normalization is not None)
        setter(self, "_idf", _idf)
        setter(self, "_stopword_set", stopword_set)
        setter(self, "_stopword_bytes", frozenset(word.encode() for word in stopword_set if word.isascii()))
        if _idf is None:
            idf_digest = None
        else:
            documents, default_weight, hashes, idf_weights = _idf.key()
            idf_digest = mmh3.hash64(f"{documents}:{default_weight}:".encode() + hashes + idf_weights, SEED)
        setter(self, "_hash", hash((self.settings_key(), idf_digest)))

    # -- settings -----------------------------------------------------------------------

    @property
    def kind(self) -> str:
        """``"simhash"`` or ``"minhash"``."""
        return self._kind

    @property
    def features(self) -> str:
        return self._features

    @property
    def ngram(self) -> int:
        return self._ngram

    @property
    def bits(self) -> int:
        return self._bits

    @property
    def weights(self) -> str:
        return self._weights

    @property
    def stopwords(self) -> str | None:
        return self._stopwords

    @property
    def split_unspaced(self) -> bool:
        return self._split_unspaced

    @property
    def normalization(self) -> int:
        """The version of the text pipeline (see :data:`simdb.features.NORMALIZATION`)."""
        return self._normalization

    def agrees_with(self, stored: Fingerprinter) -> bool:
        """Whether these settings, given to open a database, agree with the ``stored`` ones:
        equal, or equal but for a ``normalization`` left out here, which is then the
        database's (one made before version 2 keeps version 1).  O(1), or a copy of the
        settings when only the version differs."""
        if self == stored:
            return True
        if self._normalization_given or self._normalization == stored._normalization:
            return False
        return Fingerprinter.from_dict({**self.to_dict(), "normalization": stored._normalization}) == stored

    @property
    def idf_size(self) -> int | None:
        """Entries of the frozen IDF table, or None when no table was fitted."""
        return None if self._idf is None else int(self._idf.hashes.size)

    def settings_key(self) -> tuple[str, int, int, str, str | None, bool, str, int]:
        """The settings other than the IDF table, as a tuple in the constructor's order."""
        return (
            self._features,
            self._ngram,
            self._bits,
            self._weights,
            self._stopwords,
            self._split_unspaced,
            self._kind,
            self._normalization,
        )

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError("Fingerprinter is immutable")

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Fingerprinter):
            return NotImplemented
        if self.settings_key() != other.settings_key():
            return False
        if self._idf is None or other._idf is None:
            return self._idf is other._idf
        return self._idf.key() == other._idf.key()

    def __hash__(self) -> int:
        return self._hash

    def __repr__(self) -> str:
        idf = "" if self._idf is None else f", idf=<{self._idf.hashes.size} features of {self._idf.documents} texts>"
        return (
            f"Fingerprinter(kind={self._kind!r}, features={self._features!r}, ngram={self._ngram}, bits={self._bits}, "
            f"weights={self._weights!r}, stopwords={self._stopwords!r}, split_unspaced={self._split_unspaced}, "
            f"normalization={self._normalization}{idf})"
        )

    def __reduce__(self) -> tuple[Callable[[dict[str, Any]], Fingerprinter], tuple[dict[str, Any]]]:
        return (Fingerprinter.from_dict, (self.to_dict(),))

    def to_dict(self) -> dict[str, Any]:
        """The settings as plain data (str, int, bool, None, bytes, dict), including
        :data:`SETTINGS_VERSION` and the IDF table.  O(size of the IDF table)."""
        return {
            "version": SETTINGS_VERSION,
            "kind": self._kind,
            "features": self._features,
            "ngram": self._ngram,
            "bits": self._bits,
            "weights": self._weights,
            "stopwords": self._stopwords,
            "split_unspaced": self._split_unspaced,
            "normalization": self._normalization,
            "idf": None if self._idf is None else self._idf.to_dict(),
        }

    @classmethod
    def from_dict(cls, data: Any) -> Fingerprinter:
        """Rebuild a Fingerprinter from :meth:`to_dict` output, validating every field.

        Every field must be present (a missing field is not silently defaulted, because
        defaults may change between releases), except ``kind``: settings stored before kinds
        existed lack it and are SimHash settings.  Raises :class:`InvalidInputError` naming the
        bad field.  O(size of the IDF table)."""
        if not isinstance(data, dict):
            raise InvalidInputError(f"fingerprinter settings={type(data).__name__} is not a dict")
        version = data.get("version")
        check_int("version", version, minimum=1)
        if version != SETTINGS_VERSION:
            raise InvalidInputError(
                f"version={version} of the fingerprinter settings is not supported",
                f"this simdb reads version {SETTINGS_VERSION}; upgrade simdb",
            )
        expected = {
            "version",
            "kind",
            "features",
            "ngram",
            "bits",
            "weights",
            "stopwords",
            "split_unspaced",
            "normalization",
            "idf",
        }
        unknown = sorted(str(key) for key in data if key not in expected)
        if unknown:
            raise InvalidInputError(f"unknown fingerprinter setting {unknown[0]!r}")
        # Settings stored before there were kinds are SimHash settings, and those stored
        # before pipeline versions are of version 1: with them, the same fingerprints.
        data = {"kind": "simhash", "normalization": 1, **data}
        missing = sorted(expected - set(data))
        if missing:
            raise InvalidInputError(f"fingerprinter setting {missing[0]!r} is missing")
        if data["ngram"] is None:
            raise InvalidInputError("ngram=None is not a valid stored setting")
        idf = None if data["idf"] is None else _IdfTable.from_dict(data["idf"])
        made = cls(
            features=data["features"],
            ngram=data["ngram"],
            bits=data["bits"],
            weights=data["weights"],
            stopwords=data["stopwords"],
            split_unspaced=data["split_unspaced"],
            kind=data["kind"],
            normalization=data["normalization"],
            _idf=idf,
        )
        if made.settings_key() != tuple(data[name] for name in _SETTING_NAMES):
            raise InvalidInputError(
                "fingerprinter settings are not in canonical form", "store Fingerprinter.to_dict() output"
            )
        return made

    # -- features -----------------------------------------------------------------------

    def _word_tokens(self, piece: str) -> Sequence[str | bytes]:
        """The word tokens of one piece of text whose character references are decoded: an
        ASCII piece through the fast path (features.ascii_byte_tokens: the same tokens as
        features.decoded_tokens, as bytes), any other through the general path.
        O(len(piece))."""
        if piece.isascii():
            return ascii_byte_tokens(ascii_prepared(piece, self._normalization).encode("ascii"), self._normalization)
        return decoded_tokens(piece, self._split_unspaced and self._features != "char", self._normalization)

    def _token_chunks(self, text: str, chunk_chars: int) -> Iterator[Sequence[str | bytes]]:
        """The tokens of ``text`` chunk by chunk, by features.iter_token_chunks (which decides
        when a wordless text's symbols are its tokens), words found by :meth:`_word_tokens`."""
        return iter_token_chunks(
            text, chunk_chars=chunk_chars, normalization=self._normalization, word_tokens=self._word_tokens
        )

    def _hashes_of_tokens(self, tokens: Sequence[str | bytes]) -> UInt64Array:
        """The (rows, lanes) hashes of one chunk's tokens: one row per token after stop
        words are dropped, or for ``features="char"`` one row per character of the tokens
        joined by single spaces.  O(len(tokens))."""
        if self._stopword_set and tokens:
            stop: frozenset[Any] = self._stopword_bytes if isinstance(tokens[0], bytes) else self._stopword_set
            tokens = [token for token in tokens if token not in stop]
        if self._features == "char":
            joined = " ".join(token if isinstance(token, str) else token.decode("ascii") for token in tokens)
            return _char_hashes(joined, self._lanes())
        return _token_hashes(tokens, self._lanes())

    def _feature_batches(self, text: str) -> Iterator[UInt64Array]:
        """Yield (rows, lanes) uint64 arrays of feature hashes, one row per occurrence, chunk
        by chunk.  Memory is bounded by the chunk size whatever the text's length."""
        lanes = self._lanes()
        ngram = self._ngram
        char_mode = self._features == "char"
        # Only the last ngram - 1 tokens (characters) are carried into the next chunk.
        carry: UInt64Array = np.empty((0, lanes), dtype=np.uint64)
        seen_text = False
        emitted = False
        for tokens in self._token_chunks(text, _features_module.CHUNK_CHARS):
            hashes = self._hashes_of_tokens(tokens)
            if not hashes.shape[0]:
                continue
            if char_mode and seen_text:
                # The joined text of all chunks has one space between chunks.
                hashes = np.concatenate((_char_hashes(" ", lanes), hashes))
            seen_text = True
            if carry.shape[0]:
                hashes = np.concatenate((carry, hashes))
            if hashes.shape[0] >= ngram:
                emitted = True
                yield _shingle_hashes(hashes, ngram)
            if ngram > 1:
                carry = hashes[max(0, hashes.shape[0] - ngram + 1) :]
        if not emitted and carry.shape[0]:
            # Fewer tokens than ngram, but some: one feature made of all of them.
            yield _shingle_hashes(carry, carry.shape[0])

    def _lanes(self) -> int:
        """Hash lanes per token: two only for 128-bit SimHash; minwise hashing uses lane 0."""
        return 2 if self._bits == 128 and self._kind == "simhash" else 1

    def _batch_features(self, texts: Sequence[str]) -> tuple[UInt64Array, npt.NDArray[np.int64]]:
        """The feature hashes of texts that each fit in one chunk, one row per occurrence,
        grouped by text, and the number of rows of each text.  The Python work is tokenising
        and one dict lookup per token; shingling is a fixed number of numpy passes over the
        whole batch.  O(total length)."""
        # Each text whole (it fits in one chunk), its tokens as features.tokenize finds them.
        arrays = [self._hashes_of_tokens(text_tokens(text, self._word_tokens, self._normalization)) for text in texts]
        ngram = self._ngram
        if len(arrays) == 1:
            # One text (the single-text API): skip the batch bookkeeping below.
            rows = arrays[0].shape[0]
            if not rows:
                return arrays[0], np.zeros(1, dtype=np.int64)
            features = _shingle_hashes(arrays[0], min(ngram, rows))
            return features, np.array([features.shape[0]], dtype=np.int64)
        documents = len(arrays)
        lengths = np.fromiter((array.shape[0] for array in arrays), dtype=np.int64, count=documents)
        if not lengths.any():
            return np.empty((0, self._lanes()), dtype=np.uint64), np.zeros(documents, dtype=np.int64)
        tokens = np.concatenate(arrays)
        window_counts = np.maximum(lengths - ngram + 1, 0)
        windows_total = int(window_counts.sum())
        window_starts = np.cumsum(window_counts) - window_counts
        if windows_total:
            # Shingle across the whole batch, then keep the windows inside one document.
            windows = _shingle_hashes(tokens, ngram)
            token_starts = np.cumsum(lengths) - lengths
            keep = np.arange(windows_total) + np.repeat(token_starts - window_starts, window_counts)
            features = windows[keep]
        else:
            features = np.empty((0, tokens.shape[1]), dtype=np.uint64)
        counts = window_counts
        short = np.flatnonzero((lengths > 0) & (lengths < ngram))
        if short.size:
            # A document with fewer tokens than ngram has one feature of all its tokens.
            extra = np.concatenate([_shingle_hashes(arrays[d], arrays[d].shape[0]) for d in short.tolist()])
            features = np.insert(features, window_starts[short], extra, axis=0)
            counts = counts.copy()
            counts[short] = 1
        return features, counts

    def _weighs_distinct(self) -> bool:
        """Whether SimHash weights depend on a feature's count in the whole text (binary,
        log), so repeated features must be merged before the kernel sees them."""
        return self._kind == "simhash" and self._weights != "tf"

    def _feature_weights(self, features: UInt64Array, multiplicity: npt.NDArray[np.int64] | None) -> FloatArray | None:
        """Integer SimHash weights of feature rows (distinct ones with their ``multiplicity``
        for binary and log weights), or None when every row weighs 1.  O(n log size of IDF)."""
        weights = None if self._weights != "log" or multiplicity is None else _log_weights(multiplicity)
        if self._idf is not None:
            idf = self._idf.lookup(features[:, 0])
            weights = idf if weights is None else weights * idf
        return weights

    def _reduce(
        self, features: UInt64Array, counts: npt.NDArray[np.int64], weights: FloatArray | None, sketch: bool
    ) -> _Partial:
        """The kernel: everything a fingerprint and a sketch need from a batch of feature
        rows (``counts`` per document, in order; ``weights`` per row or None for 1 each),
        in one pass.  Single texts, batches and the chunks of long texts all come here.
        O(rows · bits / 8) for SimHash, O(rows) for minwise hashing and the sketch."""
        documents = counts.size
        sums = totals = minima = filled = None
        if self._kind == "simhash":
            sums = np.zeros((documents, self._bits), dtype=np.float64)
            totals = np.zeros(documents, dtype=np.float64)
            present = np.flatnonzero(counts)
            if present.size:
                matrix = _bit_matrix(features, self._bits)
                starts = (np.cumsum(counts) - counts)[present]
                if weights is not None:
                    sums[present] = np.add.reduceat(matrix * weights[:, None], starts, axis=0)
                    totals[present] = np.add.reduceat(weights, starts)
                elif documents == 1 and features.shape[0] <= 255:
                    # Byte lanes of uint64 sums cannot carry with at most 255 rows (see
                    # _segment_bit_counts); the lanes keep their positions in any byte order.
                    sums[0] = matrix.view(np.uint64).sum(axis=0, dtype=np.uint64).view(np.uint8)
                    totals[0] = features.shape[0]
                else:
                    sums[present] = _segment_bit_counts(matrix, starts, counts[present])
                    totals[present] = counts[present]
        bins = self._bits if self._kind == "minhash" else 0
        if bins or sketch:
            minima, filled = _bin_minima(features[:, 0], counts, bins, sketch)
        return _Partial(sums, totals, minima, filled)

    def _reduce_documents(self, texts: Sequence[str], sketch: bool) -> _Partial:
        """:meth:`_reduce` of whole texts that each fit in one chunk."""
        features, counts = self._batch_features(texts)
        multiplicity = None
        if self._weighs_distinct():
            features, counts, multiplicity = _distinct_per_document(features, counts)
        return self._reduce(features, counts, self._feature_weights(features, multiplicity), sketch)

    def _reduce_long(self, text: str, sketch: bool) -> _Partial:
        """:meth:`_reduce` of one text of any length, chunk by chunk.  Sums and minima merge
        across chunks, so memory is bounded by the chunk size; binary and log weights must
        first count every distinct feature (8 bytes each, 16 at 128 bits, plus a count)."""
        one = np.ones(1, dtype=np.int64)
        partial: _Partial | None = None
        counter = _DistinctCounter()
        for batch in self._feature_batches(text):
            if self._weighs_distinct():
                counter.add(batch)
                continue
            counts = np.array([batch.shape[0]], dtype=np.int64)
            reduced = self._reduce(batch, counts, self._feature_weights(batch, None), sketch)
            partial = reduced if partial is None else partial.merge(reduced)
        features, multiplicity = counter.result(self._lanes())
        # Reduce in slices so the bit matrix stays small for huge texts.
        for start in range(0, features.shape[0], 1 << 16):
            rows = features[start : start + (1 << 16)]
            weights = self._feature_weights(rows, multiplicity[start : start + (1 << 16)])
            reduced = self._reduce(rows, one * rows.shape[0], weights, sketch)
            partial = reduced if partial is None else partial.merge(reduced)
        if partial is None:
            return self._reduce(
                np.empty((0, self._lanes()), dtype=np.uint64), np.zeros(1, dtype=np.int64), None, sketch
            )
        return partial

    def _finish(self, partial: _Partial, sketch: bool) -> tuple[list[int], list[bytes]]:
        """Fingerprints (and sketches, else an empty list) of the documents of a partial.
        Featureless documents get fingerprint 0 and sketch b"".  O(documents · bins)."""
        fingerprints: list[int]
        sketches: list[bytes] = []
        if partial.sums is not None and partial.totals is not None:
            packed = np.packbits(2.0 * partial.sums > partial.totals[:, None], axis=1, bitorder="little")
            fingerprints = _packed_rows_to_ints(packed, self._bits)
        if partial.minima is None or partial.filled is None:
            return fingerprints, sketches
        featureless = np.logical_not(np.any(partial.filled, axis=1))
        if self._kind == "minhash":
            # The fingerprint's bins come first, then the sketch's; each part is densified
            # on its own.
            values = _bin_values(_densify(partial.minima[:, : self._bits], partial.filled[:, : self._bits]))
            bits = (values & np.uint64(1)).astype(np.uint8)
            bits[featureless] = 0
            fingerprints = _packed_rows_to_ints(np.packbits(bits, axis=1, bitorder="little"), self._bits)
        if sketch:
            first = partial.minima.shape[1] - SKETCH_BYTES
            values = _bin_values(_densify(partial.minima[:, first:], partial.filled[:, first:]))
            sketch_bytes = (values & np.uint64(0xFF)).astype(np.uint8)
            empty: list[bool] = featureless.tolist()
            sketches = [b"" if none else row.tobytes() for row, none in zip(sketch_bytes, empty)]
        return fingerprints, sketches

    def _compute(self, texts: Iterable[Text], sketch: bool) -> tuple[list[int], list[bytes]]:
        """Fingerprints and sketches (an empty list unless asked) of ``texts``, here."""
        fingerprints: list[int] = []
        sketches: list[bytes] = []
        for more_fingerprints, more_sketches in self._iter_blocks(texts, sketch):
            fingerprints.extend(more_fingerprints)
            sketches.extend(more_sketches)
        return fingerprints, sketches

    def _iter_blocks(self, texts: Iterable[Text], sketch: bool) -> Iterator[tuple[list[int], list[bytes]]]:
        """Fingerprints and sketches of ``texts`` in this process, in order, a block at a
        time: short texts in batches of about one chunk of text, long texts one by one."""
        batch: list[str] = []
        batch_chars = 0
        limit = _features_module.CHUNK_CHARS
        for raw in texts:
            text = _as_text(raw, self._normalization)
            if len(text) > limit:
                if batch:
                    yield self._finish(self._reduce_documents(batch, sketch), sketch)
                batch, batch_chars = [], 0
                yield self._finish(self._reduce_long(text, sketch), sketch)
                continue
            batch.append(text)
            batch_chars += len(text)
            if batch_chars >= limit or len(batch) >= _BATCH_DOCS:
                yield self._finish(self._reduce_documents(batch, sketch), sketch)
                batch, batch_chars = [], 0
        if batch:
            yield self._finish(self._reduce_documents(batch, sketch), sketch)

    def fingerprint(self, text: Text) -> int:
        """The ``bits``-wide fingerprint of ``text`` (see the module docstring for the exact
        definition and the edge cases).  O(len(text)); a text longer than one chunk is
        streamed, with memory bounded by the chunk size (except for SimHash with binary or
        log weights, which counts the distinct features)."""
        return self._compute((text,), sketch=False)[0][0]

    def fingerprint_and_sketch(self, text: Text) -> tuple[int, bytes]:
        """The fingerprint of ``text`` and its verification sketch, from one pass over its
        features: :data:`SKETCH_BYTES` bytes (b"" when the text has no features, so callers
        can tell featureless texts apart) whose :func:`sketch_similarity` estimates the
        Jaccard similarity of two texts' feature sets.  O(len(text))."""
        fingerprints, sketches = self._compute((text,), sketch=True)
        return fingerprints[0], sketches[0]

    def weighted_features(self, text: Text) -> list[tuple[int, int]]:
        """The distinct feature hashes of ``text`` (``bits`` wide) with their total integer
        SimHash weights, sorted by hash: for ``kind="simhash"``,
        ``simhash_features(fp.weighted_features(t), bits=fp.bits) == fp.fingerprint(t)``.
        For inspection; O(n log n) time and O(n) memory."""
        batches = list(self._feature_batches(_as_text(text, self._normalization)))
        if not batches:
            return []
        rows = np.concatenate(batches)
        features, _, multiplicity = _distinct_per_document(rows, np.array([rows.shape[0]]))
        weights = self._feature_weights(features, multiplicity)
        if weights is None:
            weights = np.ones(features.shape[0]) if self._weighs_distinct() else multiplicity.astype(np.float64)
        elif self._weights == "tf":
            weights = weights * multiplicity
        keys = [_row_to_int(row, self._bits) for row in features.tolist()]
        return sorted(zip(keys, weights.astype(np.int64).tolist()))

    def fingerprint_many(self, texts: Iterable[Text], workers: int | None = None) -> list[int]:
        """Fingerprints of ``texts``, in order.

        ``workers=None`` or 1 works in this process.  ``workers > 1`` uses a pool of that many
        processes (forked where the platform allows).  Forked workers read a list or tuple in
        place and are sent index ranges only; any other iterable is shipped in chunks of 256
        texts, with a bounded number of chunks in flight so it is never materialised at once.
        O(total text length); a pool costs about 15 ms to start and stop."""
        return list(self.iter_fingerprints(texts, workers))

    def iter_fingerprints(self, texts: Iterable[Text], workers: int | None = None) -> Iterator[int]:
        """:meth:`fingerprint_many` as a stream: fingerprints come out in order while the
        texts are still being read, so a caller can store them as they come with one pool
        for the whole input.  Memory: the texts in flight only."""
        return (fingerprint for fingerprint, _ in self._iter_pairs(texts, workers, sketch=False))

    def fingerprints_and_sketches(
        self, texts: Iterable[Text], workers: int | None = None
    ) -> tuple[list[int], list[bytes]]:
        """Fingerprints and sketches of ``texts`` (see :meth:`fingerprint_and_sketch`), in
        order, as two lists; ``workers`` as for :meth:`fingerprint_many`.  O(total length)."""
        fingerprints: list[int] = []
        sketches: list[bytes] = []
        for fingerprint, sketch in self._iter_pairs(texts, workers, sketch=True):
            fingerprints.append(fingerprint)
            sketches.append(sketch)
        return fingerprints, sketches

    def iter_fingerprints_and_sketches(
        self, texts: Iterable[Text], workers: int | None = None
    ) -> Iterator[tuple[int, bytes]]:
        """:meth:`fingerprints_and_sketches` as a stream of (fingerprint, sketch) pairs, in
        order while the texts are still being read.  Memory: the texts in flight only."""
        return self._iter_pairs(texts, workers, sketch=True)

    def _iter_pairs(self, texts: Iterable[Text], workers: int | None, sketch: bool) -> Iterator[tuple[int, bytes]]:
        """(fingerprint, sketch or b"") pairs of ``texts``, here or in a pool of ``workers``;
        the arguments are checked now, before the first pair is asked for."""
        if workers is not None:
            workers = check_workers(workers, hint="pass None to work in this process")
        iterate(texts, "texts")  # refuses one text passed alone, before any work starts
        if workers is None or workers == 1:
            return _pairs(self._iter_blocks(texts, sketch))
        return _pairs(_iter_in_pool(self, texts, workers, sketch))

    def jaccard(self, a: Text, b: Text) -> float:
        """The exact Jaccard similarity of the distinct feature sets of ``a`` and ``b`` under
        these settings (weights and any IDF table play no part): the similarity a fingerprint
        distance estimates, for verifying candidates where a 64-bit estimate is too coarse.
        Features are compared by their 64-bit hash.  Two texts without features give 1.0 (they
        share fingerprint 0); one without gives 0.0.  O(n log n); memory O(distinct features)."""
        first = self._distinct_features(_as_text(a, self._normalization))
        second = self._distinct_features(_as_text(b, self._normalization))
        if not first.size and not second.size:
            return 1.0
        common = np.intersect1d(first, second, assume_unique=True).size
        return common / (first.size + second.size - common)

    def _distinct_features(self, text: str) -> UInt64Array:
        """The sorted distinct lane-0 feature hashes of ``text``.  O(n log n); memory
        O(distinct features) plus up to :data:`_MERGE_ROWS` hashes and one chunk's, whatever
        the text's length."""
        merged = np.empty(0, dtype=np.uint64)
        pending: list[UInt64Array] = []
        pending_rows = 0
        for batch in self._feature_batches(text):
            pending.append(batch[:, 0])
            pending_rows += batch.shape[0]
            # Merging only once the chunks outweigh what is merged keeps the total work
            # O(n log n); merging every chunk would re-sort the whole set each time.
            if pending_rows > max(merged.size, _MERGE_ROWS):
                merged = distinct(np.concatenate([merged, *pending]))
                pending, pending_rows = [], 0
        return distinct(np.concatenate([merged, *pending])) if pending else merged

    def fit_idf(self, texts: Iterable[Text], min_df: int = 2) -> Fingerprinter:
        """A new Fingerprinter with these settings and an IDF table fitted on ``texts``.

        The weight of a feature is ``1 + ln((1 + N) / (1 + df))`` (N texts, df of them
        containing it), stored in fixed point as an int.  Features in fewer than ``min_df``
        texts are left out of the table and weigh as if seen once, which keeps the table to
        the features that repeat.  The table is frozen: fingerprints never drift as a
        collection grows.  O(total features · log); memory O(distinct features)."""
        min_df = check_int("min_df", min_df, minimum=1)
        base = Fingerprinter(*self.settings_key())
        documents = 0
        pending: list[UInt64Array] = []
        pending_rows = 0
        known = np.empty(0, dtype=np.uint64)
        known_counts = np.empty(0, dtype=np.int64)
        for text in iterate(texts, "texts"):
            documents += 1
            features = base._distinct_features(_as_text(text, self._normalization))
            if features.size:
                pending.append(features)
                pending_rows += features.size
            if pending_rows > 1 << 22:
                known, known_counts = _merge_counts(known, known_counts, pending)
                pending, pending_rows = [], 0
        known, known_counts = _merge_counts(known, known_counts, pending)
        keep = known_counts >= max(min_df, 2)
        weights = np.array([_idf_weight(documents, df) for df in known_counts[keep].tolist()], dtype=np.uint32)
        table = _IdfTable(documents, _idf_weight(documents, 1), known[keep], weights)
        return Fingerprinter(*self.settings_key(), _idf=table)


class _DistinctCounter:
    """The distinct feature rows of a stream of batches with how often each occurred, for
    binary and log weights of long texts.  Batches are merged once they outweigh what is
    merged, so the work is O(n log n) overall; memory O(distinct features)."""

    __slots__ = ("merged", "merged_counts", "pending", "pending_rows")

    def __init__(self) -> None:
        self.merged: UInt64Array | None = None
        self.merged_counts = np.empty(0, dtype=np.int64)
        self.pending: list[UInt64Array] = []
        self.pending_rows = 0

    def add(self, rows: UInt64Array) -> None:
        self.pending.append(rows)
        self.pending_rows += rows.shape[0]
        if self.pending_rows > max(self.merged_counts.size, _MERGE_ROWS):
            self._merge()

    def _merge(self) -> None:
        parts = self.pending if self.merged is None else [self.merged, *self.pending]
        multiplicity = np.concatenate([self.merged_counts, np.ones(self.pending_rows, dtype=np.int64)])
        rows = np.concatenate(parts)
        self.merged, _, self.merged_counts = _distinct_per_document(rows, np.array([rows.shape[0]]), multiplicity)
        self.pending, self.pending_rows = [], 0

    def result(self, lanes: int) -> tuple[UInt64Array, npt.NDArray[np.int64]]:
        """The distinct rows, sorted, and their counts."""
        if self.pending:
            self._merge()
        if self.merged is None:
            return np.empty((0, lanes), dtype=np.uint64), np.empty(0, dtype=np.int64)
        return self.merged, self.merged_counts


def _merge_counts(
    known: UInt64Array, counts: npt.NDArray[np.int64], pending: list[UInt64Array]
) -> tuple[UInt64Array, npt.NDArray[np.int64]]:
    """Add the occurrences in ``pending`` to the sorted (hash, count) table."""
    if not pending:
        return known, counts
    hashes = np.concatenate([known, *pending])
    weights = np.concatenate([counts, np.ones(hashes.size - known.size, dtype=np.int64)])
    merged, inverse = np.unique(hashes, return_inverse=True)
    return merged, np.bincount(inverse.reshape(-1), weights=weights, minlength=merged.size).astype(np.int64)


def _row_to_int(row: Sequence[int], bits: int) -> int:
    if bits == 32:
        return row[0] >> 32
    if bits == 64:
        return row[0]
    return row[0] | row[1] << 64


# -- the process pool ---------------------------------------------------------------------

_WORKER_FINGERPRINTER: Fingerprinter | None = None
# The caller's list or tuple of texts, inherited by a forked worker (see _iter_in_pool).
_WORKER_TEXTS: Sequence[Text] = ()
# Whether the workers of this pool compute sketches too.
_WORKER_SKETCH = False
# What a worker sends back: fingerprints (packed bytes, or ints for 128 bits) and sketches.
_WorkerResult = tuple[bytes | list[int], list[bytes]]


#: How often a pool worker looks whether the process that started it is still there.
_PARENT_CHECK_SECONDS = 0.5


def _init_worker(fingerprinter: Fingerprinter, texts: Sequence[Text], sketch: bool, parent: int) -> None:
    """Set up a pool worker: ignore SIGINT, remember the settings and the shared texts, and
    end when the process ``parent`` is gone.  Under fork the arguments are inherited, not
    pickled, so this costs nothing per text."""
    global _WORKER_FINGERPRINTER, _WORKER_TEXTS, _WORKER_SKETCH
    # Ctrl-C reaches the whole process group; the parent decides what it means, and the
    # workers end with the pool instead of each printing a KeyboardInterrupt.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    _WORKER_FINGERPRINTER = fingerprinter
    _WORKER_TEXTS = texts
    _WORKER_SKETCH = sketch
    threading.Thread(target=_end_with_parent, args=(parent,), daemon=True, name="simdb-parent-watch").start()


def _end_with_parent(parent: int) -> None:
    # A parent killed by SIGTERM or SIGKILL shuts no pool down, and a worker waiting for
    # work never learns it (forked siblings keep the pipes open): without this, workers
    # lived on for good, holding the parent's stdout, so `simdb add ... | tee` never ended.
    while os.getppid() == parent:
        time.sleep(_PARENT_CHECK_SECONDS)
    os._exit(1)


def _fingerprint_chunk(texts: Sequence[Text]) -> _WorkerResult:
    """Fingerprints (and sketches, if the pool asks for them) of texts sent to this worker,
    in the form :func:`_unpack` reads: the bytes of a uint64 array for up to 64 bits (one
    object to pickle instead of one int per text), a list of ints for 128 bits."""
    fingerprinter = _WORKER_FINGERPRINTER
    if fingerprinter is None:  # pragma: no cover - the initializer always runs first
        raise FingerprinterError("worker process has no fingerprinter settings")
    fingerprints, sketches = fingerprinter._compute(texts, _WORKER_SKETCH)
    if fingerprinter.bits <= 64:
        return np.array(fingerprints, dtype=np.uint64).tobytes(), sketches
    return fingerprints, sketches


def _fingerprint_range(start: int, stop: int) -> _WorkerResult:
    """:func:`_fingerprint_chunk` of ``texts[start:stop]`` of the texts this forked worker
    inherited.  The slice touches the reference counts of those texts only, so copy-on-write
    copies the pages of this range, not of the whole input."""
    return _fingerprint_chunk(_WORKER_TEXTS[start:stop])


def _unpack(result: _WorkerResult) -> tuple[list[int], list[bytes]]:
    """The fingerprints and sketches of a worker's result.  O(n), in C for up to 64 bits."""
    fingerprints, sketches = result
    if isinstance(fingerprints, bytes):
        return np.frombuffer(fingerprints, dtype=np.uint64).tolist(), sketches
    return fingerprints, sketches


def _pairs(blocks: Iterable[tuple[list[int], list[bytes]]]) -> Iterator[tuple[int, bytes]]:
    """(fingerprint, sketch) pairs of blocks of results; b"" where no sketch was made."""
    for fingerprints, sketches in blocks:
        if sketches:
            yield from zip(fingerprints, sketches)
        else:
            for fingerprint in fingerprints:
                yield fingerprint, b""


def _check_texts(texts: Iterable[Any]) -> None:
    """Raise InvalidInputError here, in the calling process, for the first item that is not
    str or bytes-like (a worker's exception would arrive later and less clearly).  One
    isinstance check per item; nothing is decoded."""
    for text in texts:
        if not isinstance(text, (str, bytes, bytearray, memoryview)):
            _as_text(text)  # raises InvalidInputError


def _iter_in_pool(
    fingerprinter: Fingerprinter, texts: Iterable[Text], workers: int, sketch: bool
) -> Iterator[tuple[list[int], list[bytes]]]:
    """Blocks of fingerprints (and sketches if ``sketch``) of ``texts`` from a pool of
    ``workers`` processes, in order.

    A list or tuple under fork is not sent at all: the workers inherit it copy-on-write and
    are sent (start, stop) ranges, all at once.  Shipping texts costs about 10 µs of CPU per
    2 KB text (pickling here, unpickling in a worker), a sixth of fingerprinting it; reading
    them in place costs the page faults of copying the pages whose reference counts a
    worker touches (about the texts' size in all, freed with the pool).  Anything else (an
    iterator, or no fork) is read lazily and shipped in chunks of 256 texts, at most 4
    chunks per worker in flight, so memory holds the texts in flight only."""
    # fork starts a worker in milliseconds and shares memory; elsewhere use the default.
    fork = "fork" in multiprocessing.get_all_start_methods() and os.name == "posix"
    shared: Sequence[Text] = texts if fork and isinstance(texts, (list, tuple)) else ()
    if shared:
        _check_texts(shared)
    context = multiprocessing.get_context("fork" if fork else None)
    # The shared texts reach the workers as an initializer argument, which fork hands over
    # without pickling, rather than through a global of this process, which another
    # thread's call could replace before the fork.
    pool = ProcessPoolExecutor(
        workers, mp_context=context, initializer=_init_worker, initargs=(fingerprinter, shared, sketch, os.getpid())
    )
    try:
        with pool:
            yield from _pool_blocks(pool, texts, shared, workers)
    except BrokenProcessPool:
        # A worker died (killed for memory, say), seen at a result or at the next submit.
        raise WorkerDiedError("a fingerprinting worker process ended abruptly; its texts were not read") from None


def _submit(
    pool: ProcessPoolExecutor, function: Callable[..., _WorkerResult], *arguments: Any
) -> Future[_WorkerResult]:
    """``pool.submit(function, *arguments)``, which starts the workers on its first call.  A
    start that fails (no file descriptors or processes left) ends the workers started
    before it, which would wait for work for good (the manager thread that stops them never
    started, and Python's exit waited for them), and is a WorkerStartError."""
    try:
        return pool.submit(function, *arguments)
    except OSError as error:
        for process in list((getattr(pool, "_processes", None) or {}).values()):
            if process.is_alive():
                process.terminate()
                process.join(timeout=5)
        if error.errno in (errno.EMFILE, errno.ENFILE, errno.EAGAIN, errno.ENOMEM):
            raise WorkerStartError(
                f"cannot start a fingerprinting worker process: {error.strerror or error}; its texts were not read"
            ) from None
        raise


def _pool_blocks(
    pool: ProcessPoolExecutor, texts: Iterable[Text], shared: Sequence[Text], workers: int
) -> Iterator[tuple[list[int], list[bytes]]]:
    """The blocks of :func:`_iter_in_pool` from its ``pool``, in order."""
    if shared:
        # Several ranges per worker, so a worker slowed by other load takes fewer of
        # them instead of stalling the end; never so small that batching suffers.
        step = max(_POOL_CHUNK_DOCS, -(-len(shared) // (_RANGES_PER_WORKER * workers)))
        futures = [
            _submit(pool, _fingerprint_range, start, min(start + step, len(shared)))
            for start in range(0, len(shared), step)
        ]
        try:
            for future in futures:
                yield _unpack(future.result())
        finally:
            # A caller that stops early (Ctrl-C, an abandoned iterator) waits for the
            # ranges being worked on, not for the whole input.
            pool.shutdown(cancel_futures=True)
        return
    iterator = iter(texts)
    in_flight: deque[Future[_WorkerResult]] = deque()
    while True:
        while len(in_flight) < 4 * workers:
            chunk = list(islice(iterator, _POOL_CHUNK_DOCS))
            if not chunk:
                break
            _check_texts(chunk)
            if any(isinstance(text, memoryview) for text in chunk):  # memoryviews cannot be pickled
                chunk = [bytes(text) if isinstance(text, memoryview) else text for text in chunk]
            in_flight.append(_submit(pool, _fingerprint_chunk, chunk))
        if not in_flight:
            return
        yield _unpack(in_flight.popleft().result())


# -- module-level functions ---------------------------------------------------------------

_SETTING_NAMES = ("features", "ngram", "bits", "weights", "stopwords", "split_unspaced", "kind", "normalization")


@lru_cache(maxsize=64)
def _cached_fingerprinter(settings: tuple[tuple[str, type, Any], ...]) -> Fingerprinter:
    return Fingerprinter(**{name: value for name, _, value in settings})


def _fingerprinter_for(settings: dict[str, Any]) -> Fingerprinter:
    """The Fingerprinter of :func:`simhash` and :func:`simhash_many`: SimHash unless ``kind``
    is given (the Fingerprinter default is minhash)."""
    settings = {"kind": "simhash", **settings}
    for name in settings:
        if name not in _SETTING_NAMES:
            raise InvalidInputError(f"unknown fingerprint setting {name!r}", f"use {list(_SETTING_NAMES)}")
    try:
        # The type is part of the key: True == 1 and 2.0 == 2 must not hit a valid entry.
        return _cached_fingerprinter(tuple(sorted((name, type(value), value) for name, value in settings.items())))
    except TypeError:  # an unhashable value: build it uncached, so it is validated
        return Fingerprinter(**settings)


def simhash(text: Text, **settings: Any) -> int:
    """The SimHash fingerprint of ``text`` with the given :class:`Fingerprinter` settings
    (``features``, ``ngram``, ``bits`` = 32, 64 or 128, ``weights``, ``stopwords``,
    ``split_unspaced``, ``normalization``; ``kind`` is ``"simhash"`` unless given, while a
    Fingerprinter's default is minhash): ``simhash(t, **s) == Fingerprinter(kind="simhash",
    **s).fingerprint(t)``.  O(len(text))."""
    return _fingerprinter_for(settings).fingerprint(text)


def simhash_many(texts: Iterable[Text], workers: int | None = None, **settings: Any) -> list[int]:
    """Fingerprints of ``texts`` in order, like :func:`simhash` on each; ``workers > 1`` uses a
    process pool (see :meth:`Fingerprinter.fingerprint_many`)."""
    return _fingerprinter_for(settings).fingerprint_many(texts, workers=workers)


def simhash_features(features: Iterable[Feature], bits: int = 64) -> int:
    """The SimHash of precomputed weighted features: ``(feature, weight)`` pairs where a
    feature is a ``str``/``bytes`` (hashed like a one-word feature, so a list of words with
    weight 1 gives ``simhash(text, features="word")``) or an ``int`` hash in ``[0, 2**bits)``
    used as is.  Weights are finite ints or floats, possibly negative; integer weights give
    exact, order-independent results.  Bit j is set when the weights of the features with
    bit j set exceed half the total; no features (or total weight 0 with no positive
    majority) give 0.  O(n) with vectorised bit sums."""
    _check_choice("bits", bits, FINGERPRINT_BITS)
    lanes = 2 if bits == 128 else 1
    rows: list[Sequence[int]] = []
    weights: list[float] = []
    for position, pair in enumerate(features):
        try:
            feature, weight = pair
        except (TypeError, ValueError):
            raise InvalidInputError(f"features[{position}]={pair!r} is not a (feature, weight) pair") from None
        if isinstance(weight, bool) or not isinstance(weight, (int, float)) or not math.isfinite(weight):
            raise InvalidInputError(f"features[{position}] has weight={weight!r}, not a finite number")
        if isinstance(feature, bool):
            raise InvalidInputError(f"features[{position}]={feature!r} is not a str, bytes or int feature")
        if isinstance(feature, int):
            rows.append(_int_to_row(check_fingerprint(feature, f"features[{position}]", bits), bits))
        elif isinstance(feature, (str, bytes)):
            if isinstance(feature, str):
                feature = feature.encode("utf-8", errors="surrogatepass")
            lane0, lane1 = mmh3.hash64(feature, SEED, signed=False)
            rows.append(_fmix64(np.array([lane0, lane1][:lanes], dtype=np.uint64)).tolist())
        else:
            raise InvalidInputError(f"features[{position}]={feature!r} is not a str, bytes or int feature")
        weights.append(float(weight))
    if not rows:
        return 0
    matrix = _bit_matrix(np.array(rows, dtype=np.uint64).reshape(-1, lanes), bits)
    weight_array = np.array(weights, dtype=np.float64)
    return _fingerprint_from_sums(weight_array @ matrix, float(weight_array.sum()))


def _int_to_row(value: int, bits: int) -> list[int]:
    """A feature hash as the lane(s) that :func:`_bit_matrix` reads."""
    if bits == 32:
        return [value << 32]
    if bits == 64:
        return [value]
    return [value & _MASK64, value >> 64]


def jaccard(a: Text, b: Text, **settings: Any) -> float:
    """The exact Jaccard similarity of the feature sets of two texts with the given
    :class:`Fingerprinter` settings (see :meth:`Fingerprinter.jaccard`).  O(n log n)."""
    return _fingerprinter_for(settings).jaccard(a, b)


def hamming(a: int, b: int) -> int:
    """The Hamming distance between two fingerprints (non-negative ints).  O(1) for 64 bits."""
    return (check_fingerprint(a, "a", bits=None) ^ check_fingerprint(b, "b", bits=None)).bit_count()


def similarity(a: int, b: int, bits: int = 64) -> float:
    """``1 - hamming(a, b) / bits``: 1.0 for equal fingerprints, 0.0 for complements.  Both
    must fit in ``bits`` bits (a positive int)."""
    bits = check_int("bits", bits, minimum=1)
    distance = (check_fingerprint(a, "a", bits) ^ check_fingerprint(b, "b", bits)).bit_count()
    return 1.0 - distance / bits


# A byte of two sketches whose bins hold different minima still agrees with probability
# 1/256; the estimate removes those chance agreements.
_BYTE_COLLISION = 1.0 / 256


def _sketch_rows(sketches: Any, name: str) -> tuple[npt.NDArray[np.uint8], npt.NDArray[np.bool_]]:
    """Sketches as an (n, SKETCH_BYTES) uint8 matrix and the mask of the non-empty ones,
    from such a matrix or a sequence of bytes (b"" for a featureless text).  O(n)."""
    if isinstance(sketches, np.ndarray):
        if sketches.dtype != np.uint8 or sketches.ndim != 2 or sketches.shape[1] != SKETCH_BYTES:
            raise InvalidInputError(
                f"{name} is a {sketches.dtype} array of shape {sketches.shape}, not (n, {SKETCH_BYTES}) uint8"
            )
        return sketches, np.ones(sketches.shape[0], dtype=bool)
    if isinstance(sketches, (str, bytes, bytearray, memoryview)):
        raise InvalidInputError(f"{name} is one sketch, not a sequence of them", "use sketch_similarity for one pair")
    rows = list(iterate(sketches, name))
    for position, sketch in enumerate(rows):
        if not isinstance(sketch, (bytes, bytearray, memoryview)) or len(sketch) not in (0, SKETCH_BYTES):
            raise InvalidInputError(f"{name}[{position}] is not a sketch of {SKETCH_BYTES} bytes or b''")
    present = np.fromiter((len(sketch) > 0 for sketch in rows), dtype=bool, count=len(rows))
    joined = b"".join(bytes(sketch) if len(sketch) else bytes(SKETCH_BYTES) for sketch in rows)
    return np.frombuffer(joined, dtype=np.uint8).reshape(-1, SKETCH_BYTES), present


def sketch_estimates(agreeing: npt.ArrayLike) -> FloatArray:
    """The sketch-only Jaccard estimate from counts of agreeing sketch bytes (of
    :data:`SKETCH_BYTES`): the share of agreeing bytes corrected for the 1/256 chance that
    bytes of different minima agree, clipped to [0, 1].  O(n), numpy."""
    share = np.asarray(agreeing, dtype=np.float64) / SKETCH_BYTES
    return np.clip((share - _BYTE_COLLISION) / (1.0 - _BYTE_COLLISION), 0.0, 1.0)


def sketch_agreements(a: Any, b: Any) -> npt.NDArray[np.int64]:
    """How many of the :data:`SKETCH_BYTES` bytes of ``a[i]`` and ``b[i]`` agree, for many
    pairs at once (arguments as :func:`sketch_similarities`; a featureless text's row counts
    as zeros, so callers mask those).  O(n · SKETCH_BYTES), numpy."""
    first, _ = _sketch_rows(a, "a")
    second, _ = _sketch_rows(b, "b")
    if first.shape[0] != second.shape[0]:
        raise InvalidInputError(f"a has {first.shape[0]} sketches but b has {second.shape[0]}")
    return np.count_nonzero(first == second, axis=1).astype(np.int64)


def sketch_similarities(a: Any, b: Any) -> FloatArray:
    """:func:`sketch_similarity` of many pairs at once: ``a[i]`` against ``b[i]``, each an
    (n, :data:`SKETCH_BYTES`) uint8 array or a sequence of sketches (bytes, b"" for a
    featureless text).  Returns a float64 array of n estimates.  O(n · SKETCH_BYTES), numpy."""
    first, first_present = _sketch_rows(a, "a")
    second, second_present = _sketch_rows(b, "b")
    estimates = sketch_estimates(sketch_agreements(first, second))
    estimates[~(first_present & second_present)] = 0.0
    return estimates


def sketch_similarity(a: bytes, b: bytes) -> float:
    """An estimate of the Jaccard similarity of the feature sets of two texts from their
    sketches alone (:meth:`Fingerprinter.fingerprint_and_sketch`, same settings): the share
    of agreeing bytes, corrected for the 1/256 chance that bytes of different minima agree,
    clipped to [0, 1].  Its standard deviation is about ``sqrt(J (1 - J) / 192)`` (0.022 at
    J = 0.9).  The database's answers use the sharper joint estimate of the sketch and a
    minhash fingerprint together (:func:`simdb.threshold.joint_similarities`) when the kind
    is minhash.  A featureless text's sketch (b"") is similar to nothing: 0.0.  O(192)."""
    for name, sketch in (("a", a), ("b", b)):
        if not isinstance(sketch, (bytes, bytearray, memoryview)) or len(sketch) not in (0, SKETCH_BYTES):
            raise InvalidInputError(f"{name}={sketch!r:.40} is not a sketch of {SKETCH_BYTES} bytes or b''")
    if not len(a) or not len(b):
        return 0.0
    return float(sketch_estimates(sum(x == y for x, y in zip(bytes(a), bytes(b))))[()])


__all__ = [
    "DEFAULT_NGRAM",
    "FEATURE_KINDS",
    "FINGERPRINT_BITS",
    "KINDS",
    "SEED",
    "SETTINGS_VERSION",
    "SKETCH_BYTES",
    "STOPWORD_LISTS",
    "WEIGHT_KINDS",
    "Fingerprinter",
    "hamming",
    "jaccard",
    "simhash",
    "simhash_features",
    "simhash_many",
    "similarity",
    "sketch_agreements",
    "sketch_estimates",
    "sketch_similarities",
    "sketch_similarity",
]
