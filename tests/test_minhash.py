"""Tests of the minwise fingerprint kind (``kind="minhash"``) and the verification sketch.

The oracle is a slow reference implementation written here from the definition in the
fingerprint module's docstring, on Python ints and dicts: the distinct feature hashes come
from test_fingerprint's reference, then bins, minima, densification by probe order, and the
bit or byte of each bin.  Statistical tests use fixed seeds, and bounds of several binomial
standard deviations, so they cannot fail by chance in any run (same seed, same result).
"""

from __future__ import annotations

import math
import random
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_fingerprint import (
    ASCII_TEXT,
    MASK64,
    REF_MULTIPLIER,
    UNICODE_TEXT,
    ref_feature_hash,
    ref_features,
    ref_fmix64,
)

import simdb
import simdb.features as features_module
from simdb.errors import InvalidInputError
from simdb.fingerprint import (
    PROBE_SALT,
    SKETCH_BYTES,
    SKETCH_SALT,
    Fingerprinter,
    simhash,
    sketch_similarities,
    sketch_similarity,
)

# -- the reference implementation ----------------------------------------------------------


def ref_feature_set(text: str, **settings: Any) -> set[int]:
    settings = {name: value for name, value in settings.items() if name not in ("bits", "weights", "kind")}
    return {ref_feature_hash(feature, 64) for feature in ref_features(text, **settings)}


def ref_probe_order(bins: int, i: int) -> list[int]:
    return sorted(range(bins), key=lambda j: (ref_fmix64((PROBE_SALT + i * bins + j) & MASK64), j))


def ref_bin_values(hashes: set[int], bins: int) -> list[int] | None:
    """fmix64(m ^ (i + 1) * MULTIPLIER) of each densified bin minimum m, or None (no features)."""
    if not hashes:
        return None
    shift = 64 - (bins.bit_length() - 1)
    minima: dict[int, int] = {}
    for value in hashes:
        minima[value >> shift] = min(minima.get(value >> shift, MASK64 + 1), value)
    values = []
    for i in range(bins):
        source = i if i in minima else next(j for j in ref_probe_order(bins, i) if j in minima)
        values.append(ref_fmix64(minima[source] ^ ((i + 1) * REF_MULTIPLIER & MASK64)))
    return values


def ref_minhash(text: str, bits: int = 64, **settings: Any) -> int:
    values = ref_bin_values(ref_feature_set(text, **settings), bits)
    return 0 if values is None else sum((value & 1) << i for i, value in enumerate(values))


def ref_sketch(text: str, **settings: Any) -> bytes:
    rehashed = {ref_fmix64(value ^ SKETCH_SALT) for value in ref_feature_set(text, **settings)}
    values = ref_bin_values(rehashed, SKETCH_BYTES)
    return b"" if values is None else bytes(value & 0xFF for value in values)


MINHASH_SETTINGS = st.fixed_dictionaries(
    {},
    optional={
        "features": st.sampled_from(["word", "word-shingle", "char"]),
        "bits": st.sampled_from([32, 64, 128]),
        "stopwords": st.sampled_from([None, "english"]),
    },
)

# -- pinned vectors (computed by the reference implementation above) ----------------------

PINNED = [
    ("", {}, 0, b""),
    ("... !!", {"features": "char"}, 0, b""),
]


@pytest.mark.parametrize(("text", "settings_", "fingerprint", "sketch"), PINNED)
def test_featureless_texts_have_fingerprint_zero_and_an_empty_sketch(text: str, settings_: dict[str, Any], fingerprint: int, sketch: bytes) -> None:
    assert Fingerprinter(kind="minhash", **settings_).fingerprint_and_sketch(text) == (fingerprint, sketch)
    assert Fingerprinter(**settings_).fingerprint_and_sketch(text) == (fingerprint, sketch)


def test_pinned_minhash_vector() -> None:
    text = "The quick brown fox jumps over the lazy dog."
    expected = 0xD5BED7C70EA82563
    assert ref_minhash(text) == expected  # the pin is the reference's value
    assert simhash(text, kind="minhash") == expected
    assert Fingerprinter(kind="minhash").fingerprint_and_sketch(text) == (expected, ref_sketch(text))


# -- cross-checks against the reference ----------------------------------------------------


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.one_of(ASCII_TEXT, UNICODE_TEXT), MINHASH_SETTINGS)
def test_minhash_and_sketch_match_reference(text: str, settings_: dict[str, Any]) -> None:
    fingerprinter = Fingerprinter(kind="minhash", **settings_)
    assert fingerprinter.fingerprint_and_sketch(text) == (ref_minhash(text, **settings_), ref_sketch(text, **settings_))


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.one_of(ASCII_TEXT, UNICODE_TEXT), max_size=10), MINHASH_SETTINGS, st.sampled_from(["simhash", "minhash"]))
def test_single_batch_and_chunked_streaming_agree(texts: list[str], settings_: dict[str, Any], kind: str) -> None:
    fingerprinter = Fingerprinter(kind=kind, **settings_)
    singles = [fingerprinter.fingerprint_and_sketch(text) for text in texts]
    assert [sketch for _, sketch in singles] == [ref_sketch(text, **settings_) for text in texts]
    fingerprints, sketches = fingerprinter.fingerprints_and_sketches(texts)
    assert list(zip(fingerprints, sketches)) == singles
    assert fingerprinter.fingerprint_many(texts) == fingerprints
    assert list(fingerprinter.iter_fingerprints_and_sketches(iter(texts))) == singles
    # Every text through the chunked path: minima merge across chunks.  Runs of non-space
    # characters longer than a chunk are split (documented), so leave those out.
    chunk_chars = 12
    kept = [text for text in texts if all(len(run) < chunk_chars for run in text.split())]
    original = features_module.CHUNK_CHARS
    features_module.CHUNK_CHARS = chunk_chars
    try:
        assert [fingerprinter.fingerprint_and_sketch(text) for text in kept] == [singles[texts.index(t)] for t in kept]
    finally:
        features_module.CHUNK_CHARS = original


def test_workers_give_the_same_fingerprints_and_sketches() -> None:
    rng = random.Random(5)
    words = [f"w{i}" for i in range(300)]
    texts = [" ".join(rng.choices(words, k=rng.randint(0, 60))) for _ in range(700)]
    for kind in ("simhash", "minhash"):
        fingerprinter = Fingerprinter(kind=kind)
        alone = fingerprinter.fingerprints_and_sketches(texts)
        assert fingerprinter.fingerprints_and_sketches(texts, workers=2) == alone
        assert list(fingerprinter.iter_fingerprints_and_sketches(iter(texts), workers=2)) == list(zip(*alone))


# -- the estimators against exact Jaccard ---------------------------------------------------


def _set_pairs(rng: random.Random, jaccard: float, size: int, count: int) -> list[tuple[str, str]]:
    """``count`` pairs of texts of one-word features whose feature sets have exactly the
    given Jaccard similarity (``common / (common + 2 * each)`` distinct words)."""
    common = round(size * 2 * jaccard / (1 + jaccard))
    own = size - common
    pairs = []
    for pair in range(count):
        shared = [f"c{pair}x{i}x{rng.getrandbits(32)}" for i in range(common)]
        first = shared + [f"a{pair}x{i}x{rng.getrandbits(32)}" for i in range(own)]
        second = shared + [f"b{pair}x{i}x{rng.getrandbits(32)}" for i in range(own)]
        pairs.append((" ".join(first), " ".join(second)))
    return pairs


@pytest.mark.parametrize("jaccard", [0.2, 0.5, 0.8, 0.9, 0.95])
def test_bit_difference_rate_and_sketch_estimate_follow_jaccard(jaccard: float) -> None:
    rng = random.Random(int(jaccard * 100))
    fingerprinter = Fingerprinter(kind="minhash", features="word")
    pairs = _set_pairs(rng, jaccard, 200, 60)
    exact = [fingerprinter.jaccard(a, b) for a, b in pairs]
    assert max(abs(value - jaccard) for value in exact) < 0.01
    firsts = fingerprinter.fingerprints_and_sketches([a for a, _ in pairs])
    seconds = fingerprinter.fingerprints_and_sketches([b for _, b in pairs])
    differing = sum((x ^ y).bit_count() for x, y in zip(firsts[0], seconds[0]))
    trials = 64 * len(pairs)
    expected_rate = (1 - jaccard) / 2
    # Densified bins are not independent, so allow 6 binomial standard deviations.
    spread = 6 * math.sqrt(expected_rate * (1 - expected_rate) / trials) + 0.01
    assert abs(differing / trials - expected_rate) < spread
    estimates = sketch_similarities(firsts[1], seconds[1])
    spread = 6 * math.sqrt(jaccard * (1 - jaccard) / (SKETCH_BYTES * len(pairs))) + 0.01
    assert abs(float(estimates.mean()) - jaccard) < spread
    assert estimates[0] == sketch_similarity(firsts[1][0], seconds[1][0])


@settings(max_examples=30, deadline=None)
@given(st.sets(st.integers(0, 400), min_size=1, max_size=150), st.sets(st.integers(0, 400), min_size=1, max_size=150))
def test_sketch_estimate_is_within_binomial_bounds_of_exact_jaccard(first: set[int], second: set[int]) -> None:
    fingerprinter = Fingerprinter(kind="minhash", features="word")
    a, b = (" ".join(f"t{value}" for value in sorted(values)) for values in (first, second))
    exact = len(first & second) / len(first | second)
    estimate = sketch_similarity(fingerprinter.fingerprint_and_sketch(a)[1], fingerprinter.fingerprint_and_sketch(b)[1])
    # One pair: 128 bins, plus densification's correlation; 7 sd and a floor keep chance failures
    # below 1e-9 per example, and hypothesis is derandomised in the test profile.
    spread = 7 * math.sqrt(max(exact * (1 - exact), 0.02) / SKETCH_BYTES) + 0.05
    assert abs(estimate - exact) < spread
    if first == second:
        assert estimate == 1.0


# -- repetition and settings ------------------------------------------------------------------


def test_one_repeated_feature_does_not_decide_the_fingerprint() -> None:
    body_a = "we moved the meeting to thursday because the room was booked by another team"
    body_b = "lunch is at noon and everyone should bring a dish to share with the others today"
    signature = "\n-- \n" + "v~" * 200
    minhash = Fingerprinter(kind="minhash")
    tf = Fingerprinter(kind="simhash", weights="tf")
    binary = Fingerprinter(kind="simhash", weights="binary")
    a, b = body_a + signature, body_b + signature
    assert tf.jaccard(a, b) < 0.1
    assert (tf.fingerprint(a) ^ tf.fingerprint(b)).bit_count() <= 3  # tf: the signature decides
    assert (minhash.fingerprint(a) ^ minhash.fingerprint(b)).bit_count() > 16
    assert (binary.fingerprint(a) ^ binary.fingerprint(b)).bit_count() > 16


def test_settings_round_trip_and_old_settings_load_as_simhash() -> None:
    fingerprinter = Fingerprinter(kind="minhash", features="char", bits=128)
    data = fingerprinter.to_dict()
    assert data["kind"] == "minhash" and data["weights"] == "binary"
    assert Fingerprinter.from_dict(data) == fingerprinter
    old = {key: value for key, value in Fingerprinter(kind="simhash", weights="tf").to_dict().items() if key != "kind"}
    loaded = Fingerprinter.from_dict(old)
    assert loaded.kind == "simhash" and loaded == Fingerprinter(kind="simhash", weights="tf")
    assert loaded.fingerprint("The quick brown fox jumps over the lazy dog.") == 0x141BF45A31B8E11B
    assert Fingerprinter(kind="minhash", weights="tf") == Fingerprinter(kind="minhash")
    with pytest.raises(InvalidInputError, match="canonical"):
        Fingerprinter.from_dict({**data, "weights": "tf"})
    with pytest.raises(InvalidInputError, match="kind"):
        Fingerprinter(kind="cosine")
    with pytest.raises(InvalidInputError, match="kind"):
        Fingerprinter.from_dict({**data, "kind": "cosine"})
    with pytest.raises(InvalidInputError, match="minhash"):
        Fingerprinter(kind="minhash").fit_idf(["a b c", "a b d"])


def test_sketch_similarity_rejects_bad_input_and_pairs_nothing_featureless() -> None:
    sketch = Fingerprinter().fingerprint_and_sketch("a b c d e f")[1]
    assert sketch_similarity(sketch, sketch) == 1.0
    assert sketch_similarity(sketch, b"") == 0.0 and sketch_similarity(b"", b"") == 0.0
    with pytest.raises(InvalidInputError, match="a="):
        sketch_similarity(b"abc", sketch)
    with pytest.raises(InvalidInputError, match="b has"):
        sketch_similarities([sketch], [sketch, sketch])
    with pytest.raises(InvalidInputError, match="one sketch"):
        sketch_similarities(sketch, sketch)
    with pytest.raises(InvalidInputError, match="uint8"):
        sketch_similarities(np.zeros((2, 128)), np.zeros((2, 128)))
    matrix = np.frombuffer(sketch * 2, dtype=np.uint8).reshape(2, SKETCH_BYTES)
    assert sketch_similarities(matrix, [sketch, b""]).tolist() == [1.0, 0.0]
    assert simdb.sketch_similarity is sketch_similarity
