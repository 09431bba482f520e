"""The quality benchmark's ground truth and expected scores, against brute force.

The report's claims rest on two pieces of bench/quality.py: the exact Jaccard pairs must
miss no pair at or above the floor (ties included), and the expected-score arithmetic must
agree with counting.
Neither needs a corpus or the benchmark extras.
"""

from __future__ import annotations

import importlib.util
import itertools
import math
import sys
from pathlib import Path
from typing import Any

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from simdb.fingerprint import SKETCH_BYTES

_PATH = Path(__file__).resolve().parent.parent / "bench" / "quality.py"
_SPEC = importlib.util.spec_from_file_location("bench_quality", _PATH)
assert _SPEC is not None and _SPEC.loader is not None
quality = importlib.util.module_from_spec(_SPEC)
sys.modules["bench_quality"] = quality
_SPEC.loader.exec_module(quality)

# Small universes make high overlaps (and exact ties at the threshold) common.
shingle_sets = st.lists(st.frozensets(st.sampled_from([f"s{i}" for i in range(12)]), max_size=10), max_size=14)


def test_within_k_probability_is_the_binomial_tail_of_angle_over_pi() -> None:
    cosines = np.array([1.0, 0.0, math.cos(math.pi / 8)])
    # Identical vectors never differ; orthogonal ones differ in each bit with probability 1/2.
    assert np.allclose(quality.within_k_probability(cosines[:2], 0), [1.0, 0.5**64])
    assert np.allclose(quality.within_k_probability(cosines[:2], 64), [1.0, 1.0])
    # An angle of pi/8 flips each of 4 bits with probability 1/8: P(<= 1 flip) counted out.
    flips = [bits for bits in itertools.product([0, 1], repeat=4) if sum(bits) <= 1]
    by_count = sum((1 / 8) ** sum(b) * (7 / 8) ** (4 - sum(b)) for b in flips)
    assert math.isclose(float(quality.within_k_probability(cosines[2:], 1, bits=4)[0]), by_count)


def test_expected_scores_match_counting_when_probabilities_are_certain() -> None:
    truth = np.array([1, 2, 3, 4], dtype=np.int64)
    pair_keys = np.array([1, 2, 9, 3], dtype=np.int64)
    probability = np.array([1.0, 1.0, 1.0, 0.0])
    predicted = pair_keys[probability == 1.0]
    assert np.allclose(
        quality.expected_scores(pair_keys, probability, truth), quality.scores(np.sort(predicted), truth)
    )


def test_corpus_reader_takes_msrp_sentences_from_the_second_column(tmp_path: Path) -> None:
    rows = [
        "\ufeffSentence ID\tString\tAuthor",
        "1\tFirst sentence, with a comma.\tA",
        "2\tSecond one\tB\textra",
        "",
        "3\tThird.\tC",
    ]
    (tmp_path / "msr_paraphrase_data.txt").write_text("\n".join(rows) + "\n", encoding="utf-8")
    (tmp_path / "ignored.txt").write_text("not a document of this corpus")
    assert quality.read_corpus(tmp_path) == ["First sentence, with a comma.", "Second one", "Third."]


@settings(max_examples=300, deadline=None)
@given(
    shingle_sets,
    st.sampled_from([0.0, 0.05, 0.3, 0.5, 0.6, 0.7, 0.75, 0.8, 0.9, 1.0]),
    st.sampled_from([1, 7, 5_000_000]),
)
def test_jaccard_pairs_lists_every_pair_at_or_above_the_floor(
    sets: list[frozenset[str]], floor: float, block: int
) -> None:
    # Small blocks split the rows many ways; no pair may be lost or counted twice across them.
    keys, jaccards = quality.jaccard_pairs(sets, floor, block_expansions=block)
    n = len(sets)
    found = {(int(key) // n, int(key) % n): float(j) for key, j in zip(keys, jaccards)}
    expected = {}
    for i, j in itertools.combinations(range(n), 2):
        # Pairs sharing nothing are never expanded; they only matter when the floor is 0.
        if sets[i] & sets[j]:
            jaccard = len(sets[i] & sets[j]) / len(sets[i] | sets[j])
            if jaccard >= floor:
                expected[(i, j)] = jaccard
    assert found.keys() == expected.keys()
    for pair, jaccard in expected.items():
        assert math.isclose(found[pair], jaccard)


def test_one_bit_minwise_model_matches_simulated_hashes() -> None:
    # Two sets with J = 10 / 30: the minimum of a random order over their union falls in the
    # intersection with probability J; otherwise the two minima's lowest bits are independent.
    rng = np.random.default_rng(7)
    a, b = set(range(20)), set(range(10, 30))
    union = sorted(a | b)
    trials = 20_000
    ranks = rng.random((trials, len(union)))
    low_bits = rng.integers(0, 2, size=(trials, len(union)))
    in_a = np.array([x in a for x in union])
    in_b = np.array([x in b for x in union])
    bit_a = low_bits[np.arange(trials), np.where(in_a, ranks, 2.0).argmin(axis=1)]
    bit_b = low_bits[np.arange(trials), np.where(in_b, ranks, 2.0).argmin(axis=1)]
    differ = float((bit_a != bit_b).mean())
    jaccard = len(a & b) / len(a | b)
    one_bit = quality.one_bit_minwise_probability(np.array([jaccard]), 0, bits=1)[0]
    assert abs(differ - (1 - one_bit)) < 0.015


def test_verified_table_keeps_only_true_pairs_and_the_recall() -> None:
    truth = {tau: np.array([1, 2, 3], dtype=np.int64) for tau in quality.THRESHOLDS}
    pairs = (np.array([1, 2, 7, 9], dtype=np.int64), np.array([0, 1, 1, 2], dtype=np.int64))
    raw = quality.measured_table(pairs, truth)
    verified = quality.measured_table(pairs, truth, verified=True)
    for tau in quality.THRESHOLDS:
        assert raw[1][tau][0] < 1.0 and verified[1][tau][0] == 1.0
        assert [verified[k][tau][1] for k in verified] == [raw[k][tau][1] for k in raw]


def _near_duplicate_texts(count: int, seed: int) -> list[str]:
    """Texts of 60 random words, each third one a copy of the previous with one or more
    words changed, so pairs fall on both sides of 0.9 and 0.8."""
    rng = np.random.default_rng(seed)
    vocabulary = [f"w{i}" for i in range(400)]
    texts: list[str] = []
    for i in range(count):
        if i % 3 == 2:
            words = texts[-1].split()
            for position in rng.choice(len(words), size=int(rng.integers(0, 4)), replace=False):
                words[position] = str(rng.choice(vocabulary))
            texts.append(" ".join(words))
        else:
            texts.append(" ".join(rng.choice(vocabulary, size=60)))
    return texts


def test_database_pairs_is_the_users_answer_and_the_reproduction_matches(tmp_path: Path) -> None:
    import simdb

    texts = _near_duplicate_texts(60, 3)
    answers, info = quality.database_pairs(texts, quality.THRESHOLDS)
    n = len(texts)
    with simdb.open(tmp_path / "db") as db:
        db.add_texts((f"k{i}", text) for i, text in enumerate(texts))
        for tau in quality.THRESHOLDS:
            expected = sorted(int(p.key_a[1:]) * n + int(p.key_b[1:]) for p in db.pairs(threshold=tau))
            assert answers[tau].tolist() == expected
    assert answers[0.8].size >= answers[0.9].size > 0
    assert info["k"] == 5 and info["bytes_per_doc"] > 0
    # The benchmark's reproduction (radius and joint estimate of bits and sketch) gives the same pairs.
    fingerprinter = simdb.Fingerprinter()
    fingerprints, _ = fingerprinter.fingerprints_and_sketches(texts)
    keys, distances = quality.hamming_pairs(fingerprints, 16)
    rows = quality.binned_sketches(texts, fingerprinter, SKETCH_BYTES)
    agreeing = np.count_nonzero(rows[keys // n] == rows[keys % n], axis=1)
    estimates = quality.ml_estimates(distances, agreeing, SKETCH_BYTES)
    for tau in quality.THRESHOLDS:
        radius = simdb.candidate_distance(tau, "minhash", verified=True)
        assert np.unique(keys[(distances <= radius) & (estimates >= tau)]).tolist() == answers[tau].tolist()


def test_minwise_what_ifs_at_seed_0_are_the_librarys_fingerprints_and_sketches() -> None:
    import simdb

    texts = [*_near_duplicate_texts(12, 5), "two words", ""]
    fingerprinter = simdb.Fingerprinter()
    fingerprints, sketches = fingerprinter.fingerprints_and_sketches(texts)
    rows = quality.binned_sketches(texts, fingerprinter, SKETCH_BYTES)
    assert [row.tobytes() if sketch else b"" for row, sketch in zip(rows, sketches)] == sketches
    hash_lists = quality.feature_hash_lists(texts, fingerprinter)
    assert quality.minwise_fingerprints(hash_lists).tolist() == fingerprints
    # Another seed is another hash function: other bits, same construction.
    assert quality.minwise_fingerprints(hash_lists, seed=1).tolist() != fingerprints
    assert not rows[-1].any()
    wide = quality.binned_sketches(texts, fingerprinter, 256)
    assert wide.shape == (len(texts), 256)


def test_ml_estimates_use_both_sketches() -> None:
    from simdb.threshold import joint_similarities

    # At the library's sketch size the benchmark's estimate is the library's.
    distances, agreeing = np.array([0, 3, 6, 20]), np.array([192, 180, 170, 90])
    library = joint_similarities(64 - distances, agreeing)
    assert quality.ml_estimates(distances, agreeing, SKETCH_BYTES).tolist() == library.tolist()
    bins = 128
    # Everything agrees: J = 1.  Half the bits differ and bytes agree by chance only: J ~ 0.
    assert quality.ml_estimates(np.array([0]), np.array([bins]), bins)[0] == 1.0
    assert quality.ml_estimates(np.array([32]), np.array([0]), bins)[0] < 0.01
    # The estimate rises with agreeing bytes and falls with differing bits.
    by_bytes = quality.ml_estimates(np.full(5, 4), np.array([100, 110, 115, 120, 125]), bins)
    by_bits = quality.ml_estimates(np.array([0, 2, 4, 8, 16]), np.full(5, 115), bins)
    assert np.all(np.diff(by_bytes) > 0) and np.all(np.diff(by_bits) < 0)
    # Alone, 115 of 128 agreeing bytes estimate (115/128 - 1/256) / (1 - 1/256) ~ 0.898; the
    # 64 bits at distance 4 (estimate 1 - 8/64 = 0.875) pull the joint estimate between them.
    assert 0.875 < by_bits[2] < 0.899


def test_lookup_finds_present_keys_and_fills_missing() -> None:
    sorted_keys = np.array([2, 5, 9], dtype=np.int64)
    values = np.array([0.2, 0.5, 0.9])
    assert quality.lookup(np.array([9, 1, 5, 10]), sorted_keys, values, -1.0).tolist() == [0.9, -1.0, 0.5, -1.0]


def test_plagiarism_labels_table_counts_each_answer_against_its_source(tmp_path: Path, capsys: Any) -> None:
    source = " ".join(f"s{i}" for i in range(80))
    answers = {
        "orig_taska.txt": source,
        "g0pA_taska.txt": source,  # cut: all of it
        "g0pB_taska.txt": " ".join(f"s{i}" for i in range(30)),  # cut: an excerpt (containment 1, J < 0.4)
        "g0pC_taska.txt": " ".join(f"x{i}" for i in range(40)),  # non
    }
    for name, text in answers.items():
        (tmp_path / name).write_text(text)
    (tmp_path / "file_information.csv").write_text(
        "File,Task,Category\ng0pA_taska.txt,a,cut\ng0pB_taska.txt,a,cut\ng0pC_taska.txt,a,non\norig_taska.txt,a,orig\n"
    )
    documents = quality.read_corpus(tmp_path)
    sets = quality.shingle_sets(documents)
    n = len(documents)
    names = sorted(answers)
    pair = sorted((names.index("g0pA_taska.txt"), names.index("orig_taska.txt")))
    reported = {tau: np.array([pair[0] * n + pair[1]], dtype=np.int64) for tau in quality.LABEL_THRESHOLDS}
    quality.print_plagiarism(tmp_path, list(range(n)), sets, reported)
    out = capsys.readouterr().out
    # Two cut answers, J 1 and 28/78 (30 words: 28 of the source's 78 shingles), containment 1;
    # one of them reported.
    assert "| cut | 2 | 0.679 | 0.359 | 1.000 | 1.000 | 1/2 | 1/2 | 1/2 | 1/2 | 1/2 |" in out
    assert "| non | 1 | 0.000 |" in out
