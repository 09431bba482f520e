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
from simdb.threshold import JOINT_GRID, joint_similarities

# -- the reference implementation ----------------------------------------------------------


def ref_feature_set(text: str, **settings: Any) -> set[int]:
    settings = {name: value for name, value in settings.items() if name not in ("bits", "weights", "kind")}
    return {ref_feature_hash(feature, 64) for feature in ref_features(text, **settings)}


def ref_probe_order(bins: int, i: int) -> list[int]:
    return sorted(range(bins), key=lambda j: (ref_fmix64((PROBE_SALT + i * bins + j) & MASK64), j))


def ref_bin_values(hashes: set[int], bins: int) -> list[int] | None:
    """fmix64(m ^ (i + 1) * MULTIPLIER) of each densified bin minimum m, or None (no features).
    A value's bin is the top of its range, ((value >> 32) * bins) >> 32: its top log2(bins)
    bits when bins is a power of two (the fingerprint), else scaled (the 192-bin sketch)."""
    if not hashes:
        return None
    minima: dict[int, int] = {}
    for value in hashes:
        column = ((value >> 32) * bins) >> 32
        minima[column] = min(minima.get(column, MASK64 + 1), value)
    values = []
    for i in range(bins):
        source = i if i in minima else next(j for j in ref_probe_order(bins, i) if j in minima)
        values.append(ref_fmix64(minima[source] ^ ((i + 1) * REF_MULTIPLIER & MASK64)))
    return values


def ref_minhash(text: str, bits: int = 64, **settings: Any) -> int:
    values = ref_bin_values(ref_feature_set(text, **settings), bits)
    return 0 if values is None else sum((value & 1) << i for i, value in enumerate(values))


def ref_similarity(kind: str, a: tuple[int, bytes | None], b: tuple[int, bytes | None]) -> float:
    """The similarity the database reports for two documents (fingerprint, sketch or None),
    counted one pair at a time on Python ints and bytes: a featureless one (sketch b"") is
    similar to nothing; both sketched: the joint estimate for minhash (via the public
    joint_similarities on the counted agreements), the sketch alone for SimHash; else the
    fingerprint estimate from the distance."""
    distance = (a[0] ^ b[0]).bit_count()
    if a[1] is not None and b[1] is not None:
        if not a[1] or not b[1]:
            return 0.0
        if kind == "minhash":
            agreeing = sum(x == y for x, y in zip(a[1], b[1]))
            return float(joint_similarities([64 - distance], [agreeing])[0])
        return sketch_similarity(a[1], b[1])
    if kind == "minhash":
        return max(0.0, 1.0 - 2.0 * distance / 64)
    return min(1.0, max(0.0, math.cos(math.pi * distance / 64)))


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
    ("... !!", {"features": "char", "normalization": 5}, 0, b""),
    (" \t\n ", {"features": "char"}, 0, b""),
]


@pytest.mark.parametrize(("text", "settings_", "fingerprint", "sketch"), PINNED)
def test_featureless_texts_have_fingerprint_zero_and_an_empty_sketch(
    text: str, settings_: dict[str, Any], fingerprint: int, sketch: bytes
) -> None:
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
@given(
    st.lists(st.one_of(ASCII_TEXT, UNICODE_TEXT), max_size=10),
    MINHASH_SETTINGS,
    st.sampled_from(["simhash", "minhash"]),
)
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


def ref_joint_estimate(agreeing_bits: int, agreeing_bytes: int) -> float:
    """The joint maximum-likelihood J by brute force over the same grid, in plain Python."""
    best, best_value = -math.inf, 0.0
    for step in range(JOINT_GRID + 1):
        j = step / JOINT_GRID
        bit, byte = (1 + j) / 2, j + (1 - j) / 256
        value = agreeing_bits * math.log(bit) + agreeing_bytes * math.log(byte)
        value += (64 - agreeing_bits) * math.log(max(1 - bit, 1e-300)) if agreeing_bits < 64 else 0.0
        value += (
            (SKETCH_BYTES - agreeing_bytes) * math.log(max(1 - byte, 1e-300)) if agreeing_bytes < SKETCH_BYTES else 0.0
        )
        if value > best:
            best, best_value = value, j
    return best_value


@pytest.mark.parametrize(
    ("bits", "bytes_"), [(64, 192), (0, 0), (32, 1), (60, 173), (58, 150), (64, 170), (50, 190), (61, 175)]
)
def test_joint_estimate_is_the_maximum_likelihood_on_the_grid(bits: int, bytes_: int) -> None:
    assert joint_similarities([bits], [bytes_])[0] == pytest.approx(
        ref_joint_estimate(bits, bytes_), abs=1.5 / JOINT_GRID
    )


def test_joint_estimate_is_monotone_and_checks_its_input() -> None:
    bits = np.repeat(np.arange(65), SKETCH_BYTES + 1)
    bytes_ = np.tile(np.arange(SKETCH_BYTES + 1), 65)
    table = joint_similarities(bits, bytes_).reshape(65, SKETCH_BYTES + 1)
    assert table[64, SKETCH_BYTES] == 1.0 and table.min() >= 0.0
    assert np.all(np.diff(table, axis=0) >= 0) and np.all(np.diff(table, axis=1) >= 0)
    with pytest.raises(InvalidInputError, match="agreeing_bits"):
        joint_similarities([65], [0])
    with pytest.raises(InvalidInputError, match="agreeing_bytes"):
        joint_similarities([0], [SKETCH_BYTES + 1])


@pytest.mark.parametrize("jaccard", [0.5, 0.8, 0.9, 0.95])
def test_joint_estimate_follows_exact_jaccard_and_beats_the_sketch_alone(jaccard: float) -> None:
    rng = random.Random(1000 + int(jaccard * 100))
    fingerprinter = Fingerprinter(kind="minhash", features="word")
    pairs = _set_pairs(rng, jaccard, 300, 150)
    exact = np.array([fingerprinter.jaccard(a, b) for a, b in pairs])
    firsts = fingerprinter.fingerprints_and_sketches([a for a, _ in pairs])
    seconds = fingerprinter.fingerprints_and_sketches([b for _, b in pairs])
    agreeing_bits = [64 - (x ^ y).bit_count() for x, y in zip(firsts[0], seconds[0])]
    agreeing_bytes = [sum(p == q for p, q in zip(x, y)) for x, y in zip(firsts[1], seconds[1])]
    joint = joint_similarities(agreeing_bits, agreeing_bytes)
    alone = sketch_similarities(firsts[1], seconds[1])
    # Fisher information of the joint model: 64 bits plus SKETCH_BYTES bytes.
    agree = jaccard + (1 - jaccard) / 256
    information = 64 * 0.25 / ((1 + jaccard) / 2 * (1 - jaccard) / 2) + SKETCH_BYTES * (255 / 256) ** 2 / (
        agree * (1 - agree)
    )
    sd = 1 / math.sqrt(information)
    # The mean error lies within 6 standard errors (plus a floor for the grid and the small
    # bias of densified bins); fixed seeds, so the test cannot fail by chance.
    assert abs(float((joint - exact).mean())) < 6 * sd / math.sqrt(len(pairs)) + 0.004
    # The spread is about the model's (a chi-square bound on 150 pairs), and not above the
    # sketch alone's by more than noise.
    spread = float(np.sqrt(((joint - exact) ** 2).mean()))
    assert spread < 1.5 * sd + 0.003
    assert spread <= float(np.sqrt(((alone - exact) ** 2).mean())) * 1.1 + 0.002


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
    with pytest.raises(InvalidInputError, match="weights='tf' has no effect"):
        Fingerprinter(kind="minhash", weights="tf")
    with pytest.raises(InvalidInputError, match="weights='tf' has no effect"):
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
