"""Answer quality of simdb's defaults against exact Jaccard similarity, beside MinHash LSH.

    python bench/quality.py CORPUS_PATH [--seeds N] [--limit N]
    python bench/quality.py CORPUS_PATH --simhash [--variants] [--seeds N]
    python bench/quality.py CORPUS_PATH --kinds

By default (issue #14's acceptance report) the corpus goes through the code path a user runs:
a database created with ``simdb.open`` in a temporary directory at default settings, the
documents added with ``add_texts``, and ``pairs(threshold=tau)`` taken as simdb's answer for
tau = 0.9 and 0.8.  Beside it, in the same run: datasketch ``MinHashLSH(num_perm=128,
threshold=tau)`` as users run it (every LSH query's candidates) and the same candidates kept
when their MinHash estimate is >= tau.  Then an error analysis of simdb's misses (beyond the
candidate radius, or joint estimate below tau) and false pairs (their exact J), and
what-ifs computed in the benchmark only, from a reproduction of the library's minwise
construction (checked equal to the library's fingerprints and sketches; the estimate is the
library's own :func:`simdb.threshold.candidate_similarities`): a wider candidate radius, the
sketch alone, and the previous defaults (a 128-byte sketch alone, or jointly with the 64
bits).  ``--seeds N`` repeats simdb's pipeline
(reproduced) and MinHashLSH under N choices of hash functions and prints mean (sd), since
one hash function's F1 is one draw.  For the plagiarism short-answer corpus (a directory with
``file_information.csv``) it adds how the labelled categories relate to what simdb reports.
``--simhash`` prints the 64-bit SimHash tables that chose the defaults before issue #14.

CORPUS_PATH may also be ``messy:N`` (or ``messy:N:SEED``): N generated mailing-list posts
from :mod:`messy_corpus`, with signatures, quoted replies, footers and attachments.
``--kinds`` prints only the comparison of fingerprint kinds and SimHash weights (best k of
each, measured): SimHash tf / binary / log, the one-bit minwise fingerprint
(``kind="minhash"``) raw and with its sketch check (sketch-only estimate >= tau), beside
MinHash LSH.

CORPUS_PATH is a directory of Reuters-21578 SGML files (``reut2-*.sgm``; each article's
title and body are one document), the MSR Paraphrase Corpus (``msr_paraphrase_data.txt``;
each sentence is one document) or, failing those, of ``*.txt`` files (one document each).
The corpus is read in place, never copied.

Ground truth: the exact Jaccard similarity J of the documents' word 3-shingle sets (tokens
from :func:`simdb.features.tokenize`).  Every pair that shares a shingle is a candidate,
which misses no pair with J > 0: each shingle's list of documents is expanded and the
shared shingles counted, which gives every candidate's exact J.  So every pair the
fingerprints predict that is not among those with J >= 0.7 has J < 0.7 and is a false
positive at both thresholds.  Documents with fewer than three tokens have no 3-shingle and
are left out.

With ``--simhash``, for SimHash (tf) and each Hamming distance k = 0..8 the script prints precision,
recall and F1 of "distance <= k" against "J >= 0.9" and "J >= 0.8", and in the same run the
figures of datasketch ``MinHashLSH`` (128 permutations, threshold = tau) both as raw LSH
candidates and with the MinHash estimate >= tau as a filter, and the number of permutation
tables the database's default plan needs for each k (its index size and write cost).
``--variants`` adds the best k of other settings.

One hash function is one draw: a pair's distance is a sum of coin flips, so the measured F1
of one fixed seed moves by about +-0.007 with the seed, more than most differences between
settings.  The script therefore also gives each F1 *expected over the choice of hash
function*: a SimHash bit differs between two documents with probability angle / pi, the angle
between their weighted feature vectors (Charikar 2002), so a pair is within k bits with a
binomial probability computed from its exact cosine (every pair with cosine >= 0.5 is found
by a sparse product; below that the chance of k <= 8 of 64 bits is at most 1.3e-4).  MinHash LSH
gets the same treatment: with b bands of r rows a pair of Jaccard J becomes a candidate with
probability 1 - (1 - J^r)^b.  Settings and k are chosen on the expected figures.
``--seeds N`` checks the model: it re-fingerprints the default features with N other hash
functions and prints the mean and spread of the measured F1.

Three what-ifs bound what other choices could reach: wider SimHash fingerprints (expected);
the default index with each candidate verified by its exact Jaccard (measured: precision 1,
the fingerprints' recall); and the same 64 bits spent as one-bit minwise hashes of the
3-shingle sets (b-bit minwise hashing with b = 1, expected), the usual 64-bit sketch for
Jaccard rather than angle.
"""

from __future__ import annotations

import argparse
import html
import math
import re
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from simdb.features import tokenize, word_shingles
from simdb.fingerprint import Fingerprinter, sketch_similarities
from simdb.plan import TablePlan

_ARTICLE = re.compile(r"<REUTERS[^>]*NEWID=\"(\d+)\"[^>]*>(.*?)</REUTERS>", re.DOTALL)
_TITLE = re.compile(r"<TITLE>(.*?)</TITLE>", re.DOTALL)
_BODY = re.compile(r"<BODY>(.*?)</BODY>", re.DOTALL)

THRESHOLDS = (0.9, 0.8)
CANDIDATE_THRESHOLD = 0.7
MAX_K = 8
PairKeys = npt.NDArray[np.int64]
COSINE_FLOOR = 0.5
# The exact pairs listed go down to J = 0.05, far below the ground truth's 0.7, for the
# one-bit minwise what-if: below 0.05 a pair's minwise bits differ with probability >= 0.475,
# so all the 2.2e8 pairs of 21,000 documents together expect fewer than one within k = 8 bits.
JACCARD_FLOOR = 0.05


def read_corpus(corpus: str | Path) -> list[str]:
    """The documents of a corpus directory: Reuters-21578 articles (title + body, SGML
    references and the Latin-1 encoding decoded), MSRP sentences or ``*.txt`` files.
    O(corpus size)."""
    if str(corpus).startswith("messy:"):
        sys.path.insert(0, str(Path(__file__).resolve().parent))
        from messy_corpus import messy_posts

        count, _, seed = str(corpus)[len("messy:") :].partition(":")
        return messy_posts(int(count), int(seed or 0))
    root = Path(corpus)
    sgml = sorted(root.glob("reut2-*.sgm"))
    if sgml:
        documents = []
        for path in sgml:
            raw = path.read_bytes().decode("latin-1")
            for match in _ARTICLE.finditer(raw):
                parts = [m.group(1) for m in (_TITLE.search(match.group(2)), _BODY.search(match.group(2))) if m]
                documents.append(html.unescape("\n".join(parts)).replace("\x03", ""))
        return documents
    sentences = root / "msr_paraphrase_data.txt"
    if sentences.is_file():
        # Tab-separated with a header row; the sentence is the second column.
        rows = sentences.read_text(encoding="utf-8-sig").splitlines()[1:]
        return [row.split("\t")[1] for row in rows if row.count("\t") >= 1]
    texts = sorted(root.glob("*.txt"))
    if not texts:
        raise SystemExit(f"{corpus}: no reut2-*.sgm, msr_paraphrase_data.txt or *.txt files")
    return [path.read_text(encoding="utf-8", errors="replace") for path in texts]


def shingle_sets(documents: Sequence[str]) -> list[frozenset[str]]:
    """The word 3-shingle set of each document."""
    sets = []
    for document in documents:
        tokens = tokenize(document)
        sets.append(frozenset(word_shingles(tokens, 3)) if len(tokens) >= 3 else frozenset())
    return sets


def hamming_pairs(fingerprints: Sequence[int], max_k: int) -> tuple[PairKeys, npt.NDArray[np.int64]]:
    """All pairs (as keys i * n + j, i < j) at Hamming distance <= max_k, and the distances.
    Brute force in numpy blocks: O(n^2) popcounts, a few seconds for 20,000 documents."""
    values = np.array(fingerprints, dtype=np.uint64)
    n = values.size
    keys: list[PairKeys] = []
    distances: list[npt.NDArray[np.int64]] = []
    block = 512
    for start in range(0, n, block):
        rows = values[start : start + block]
        d = _popcount(rows[:, None] ^ values[None, :])
        i, j = np.nonzero(d <= max_k)
        i = i + start
        upper = i < j
        keys.append(i[upper] * n + j[upper])
        distances.append(d[i[upper] - start, j[upper]])
    return np.concatenate(keys), np.concatenate(distances)


def _popcount(values: npt.NDArray[np.uint64]) -> npt.NDArray[np.int64]:
    """Bits set in each uint64 (numpy >= 2 has it built in; older numpy unpacks bytes)."""
    if hasattr(np, "bitwise_count"):
        return np.bitwise_count(values).astype(np.int64)
    as_bytes = np.ascontiguousarray(values).view(np.uint8).reshape(*values.shape, 8)
    return np.unpackbits(as_bytes, axis=-1).sum(axis=-1, dtype=np.int64)


def scores(predicted: PairKeys, truth: PairKeys) -> tuple[float, float, float]:
    """Precision, recall and F1 of a predicted pair set against a true one."""
    true_positives = int(np.isin(predicted, truth, assume_unique=True).sum())
    precision = true_positives / predicted.size if predicted.size else 1.0
    recall = true_positives / truth.size if truth.size else 1.0
    f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
    return precision, recall, f1


def minhash_lsh_pairs(
    sets: Sequence[frozenset[str]], threshold: float, minhashes: list[Any]
) -> tuple[PairKeys, PairKeys]:
    """(raw LSH candidate pairs, candidates whose MinHash estimate >= threshold)."""
    from datasketch import MinHashLSH

    n = len(sets)
    lsh = MinHashLSH(threshold=threshold, num_perm=128)
    with lsh.insertion_session() as session:
        for i, minhash in enumerate(minhashes):
            if minhash is not None:
                session.insert(i, minhash)
    raw: set[int] = set()
    filtered: set[int] = set()
    for i, minhash in enumerate(minhashes):
        if minhash is None:
            continue
        for j in lsh.query(minhash):
            if j > i:
                raw.add(i * n + j)
                if minhash.jaccard(minhashes[j]) >= threshold:
                    filtered.add(i * n + j)
    return np.array(sorted(raw), dtype=np.int64), np.array(sorted(filtered), dtype=np.int64)


def build_minhashes(sets: Sequence[frozenset[str]], seed: int = 1) -> list[Any]:
    """datasketch MinHash(128 permutations, ``seed``; 1 is datasketch's default) of each set."""
    from datasketch import MinHash

    present = [i for i, s in enumerate(sets) if s]
    built = MinHash.bulk([[s.encode() for s in sets[i]] for i in present], num_perm=128, seed=seed)
    minhashes: list[Any] = [None] * len(sets)
    for i, minhash in zip(present, built):
        minhashes[i] = minhash
    return minhashes


def feature_matrix(fingerprinter: Fingerprinter, documents: Sequence[str]) -> tuple[Any, npt.NDArray[np.uint64]]:
    """The documents' weighted feature vectors as a scipy CSR matrix (one row per document,
    one column per distinct feature hash), and the column hashes.  O(total features)."""
    from scipy import sparse

    columns: dict[int, int] = {}
    rows: list[int] = []
    cells: list[int] = []
    weights: list[float] = []
    for row, document in enumerate(documents):
        for feature, weight in fingerprinter.weighted_features(document):
            rows.append(row)
            cells.append(columns.setdefault(feature, len(columns)))
            weights.append(weight)
    shape = (len(documents), len(columns))
    matrix = sparse.csr_matrix((np.array(weights, dtype=np.float64), (rows, cells)), shape=shape)
    return matrix, np.fromiter(columns, dtype=np.uint64, count=len(columns))


def cosine_pairs(matrix: Any, floor: float = COSINE_FLOOR) -> tuple[PairKeys, npt.NDArray[np.float64]]:
    """Every pair (key i * n + j, i < j) whose feature vectors have cosine >= floor, with the
    cosine.  A sparse product in blocks of rows; seconds for 20,000 short documents."""
    from scipy import sparse

    n = matrix.shape[0]
    norms = np.sqrt(np.asarray(matrix.multiply(matrix).sum(axis=1)).ravel())
    unit = (sparse.diags(1.0 / np.where(norms > 0, norms, 1.0)) @ matrix).tocsr()
    transposed = unit.T.tocsc()
    keys: list[PairKeys] = []
    cosines: list[npt.NDArray[np.float64]] = []
    block = 2000
    for start in range(0, n, block):
        product = (unit[start : start + block] @ transposed).tocoo()
        i = product.row.astype(np.int64) + start
        keep = (i < product.col) & (product.data >= floor)
        keys.append(i[keep] * n + product.col[keep])
        cosines.append(np.minimum(product.data[keep], 1.0))
    return np.concatenate(keys), np.concatenate(cosines)


def jaccard_pairs(
    sets: Sequence[frozenset[str]], floor: float, block_expansions: int = 5_000_000
) -> tuple[PairKeys, npt.NDArray[np.float64]]:
    """Every pair (key i * n + j, i < j) sharing a member with Jaccard >= floor, with the
    Jaccard.  Each document's members are expanded into their posting lists and the pairs
    counted, in blocks of rows of about ``block_expansions`` expansions (a row with more is a
    block of its own).  O(sum over members of their posting length squared), numpy only;
    seconds for 20,000 news stories, whatever the floor."""
    n = len(sets)
    columns: dict[str, int] = {}
    member_columns = np.array(
        [columns.setdefault(m, len(columns)) for members in sets for m in members], dtype=np.int64
    )
    sizes = np.array([len(members) for members in sets], dtype=np.int64)
    member_rows = np.repeat(np.arange(n, dtype=np.int64), sizes)
    posting_lengths = np.bincount(member_columns, minlength=len(columns))
    posting_starts = np.concatenate([[0], np.cumsum(posting_lengths)])
    posting_rows = member_rows[np.argsort(member_columns, kind="stable")]
    row_starts = np.concatenate([[0], np.cumsum(sizes)])
    row_expansions = np.cumsum(np.bincount(member_rows, weights=posting_lengths[member_columns], minlength=n))
    keys: list[PairKeys] = [np.empty(0, dtype=np.int64)]
    jaccards: list[npt.NDArray[np.float64]] = [np.empty(0)]
    first = 0
    while first < n:
        before = row_expansions[first - 1] if first else 0.0
        last = max(first + 1, int(np.searchsorted(row_expansions, before + block_expansions, side="right")))
        cells = member_columns[row_starts[first] : row_starts[last]]
        lengths = posting_lengths[cells]
        ends = np.cumsum(lengths)
        positions = np.repeat(posting_starts[cells] - (ends - lengths), lengths) + np.arange(
            int(ends[-1]) if ends.size else 0
        )
        left = np.repeat(member_rows[row_starts[first] : row_starts[last]], lengths)
        right = posting_rows[positions]
        upper = left < right
        pair_keys, overlaps = np.unique(left[upper] * n + right[upper], return_counts=True)
        i, j = pair_keys // n, pair_keys % n
        jaccard = overlaps / (sizes[i] + sizes[j] - overlaps)
        keep = jaccard >= floor
        keys.append(pair_keys[keep])
        jaccards.append(jaccard[keep])
        first = last
    return np.concatenate(keys), np.concatenate(jaccards)


def within_k_probability(cosines: npt.NDArray[np.float64], k: int, bits: int = 64) -> npt.NDArray[np.float64]:
    """P(Hamming distance <= k) of each pair over the choice of hash function: the binomial
    CDF at k with ``bits`` trials of probability angle / pi."""
    return binomial_within_k(np.arccos(np.clip(cosines, -1.0, 1.0)) / math.pi, k, bits)


def one_bit_minwise_probability(jaccards: npt.NDArray[np.float64], k: int, bits: int = 64) -> npt.NDArray[np.float64]:
    """P(Hamming distance <= k) of ``bits`` one-bit minwise hashes (b-bit minwise hashing with
    b = 1, Li & Koenig 2010): a bit differs only when the two minima differ (1 - J) and then
    their lowest bits do with probability 1/2, so each bit differs with probability (1 - J) / 2."""
    return binomial_within_k((1.0 - jaccards) / 2, k, bits)


def binomial_within_k(p: npt.NDArray[np.float64], k: int, bits: int) -> npt.NDArray[np.float64]:
    """P(at most k of ``bits`` independent bits differ), each with probability p."""
    return sum((math.comb(bits, d) * p**d * (1 - p) ** (bits - d) for d in range(k + 1)), np.zeros_like(p))


def expected_scores(
    pair_keys: PairKeys, probability: npt.NDArray[np.float64], truth: PairKeys
) -> tuple[float, float, float]:
    """Precision, recall and F1 from expected true and false positive counts, each pair
    predicted with its own probability (pairs not listed have probability ~0)."""
    is_true = np.isin(pair_keys, truth)
    true_positives = float(probability[is_true].sum())
    predicted = float(probability.sum())
    precision = true_positives / predicted if predicted else 1.0
    recall = true_positives / truth.size if truth.size else 1.0
    f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
    return precision, recall, f1


def lsh_candidate_probability(jaccards: npt.NDArray[np.float64], threshold: float) -> npt.NDArray[np.float64]:
    """P(a pair becomes a MinHashLSH candidate) over the permutations, for datasketch's band
    layout at this threshold with 128 permutations: 1 - (1 - J^r)^b."""
    from datasketch import MinHashLSH

    lsh = MinHashLSH(threshold=threshold, num_perm=128)
    return 1.0 - (1.0 - jaccards**lsh.r) ** lsh.b


def _mix(hashes: npt.NDArray[np.uint64], seed: int) -> npt.NDArray[np.uint64]:
    """Another 64-bit hash function of feature hashes: the splitmix64 finaliser of hash ^ seed."""
    with np.errstate(over="ignore"):
        z = hashes ^ np.uint64(seed * 0x9E3779B97F4A7C15 & (2**64 - 1))
        z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        return z ^ (z >> np.uint64(31))


def reseeded_fingerprints(matrix: Any, feature_hashes: npt.NDArray[np.uint64], seed: int) -> list[int]:
    """The 64-bit SimHash of each row of ``matrix`` with the feature hashes remixed by
    ``seed``: bit j is set when the weight of features with bit j set exceeds half the total,
    as in the library.  O(nonzeros * 64)."""
    bits = np.unpackbits(_mix(feature_hashes, seed).view(np.uint8).reshape(-1, 8), axis=1, bitorder="little")
    signs = bits.astype(np.float32) * 2 - 1
    above_half = (matrix.astype(np.float32) @ signs) > 0
    return np.packbits(above_half, axis=1, bitorder="little").view(np.uint64).ravel().tolist()


# Every variant spells out its stop words, so the list does not move when the defaults do;
# the report marks whichever equals Fingerprinter() as the default.
VARIANTS: list[tuple[str, dict[str, Any], bool]] = [
    ("word-shingle n=3, tf, no stop words", {"stopwords": None}, False),
    ("word-shingle n=3, tf, english stop words", {"stopwords": "english"}, False),
    ("word-shingle n=3, binary, no stop words", {"weights": "binary", "stopwords": None}, False),
    ("word-shingle n=3, binary, english stop words", {"weights": "binary", "stopwords": "english"}, False),
    ("word-shingle n=2, tf, no stop words", {"ngram": 2, "stopwords": None}, False),
    ("word-shingle n=2, tf, english stop words", {"ngram": 2, "stopwords": "english"}, False),
    ("word-shingle n=4, tf, no stop words", {"ngram": 4, "stopwords": None}, False),
    ("word-shingle n=4, tf, english stop words", {"ngram": 4, "stopwords": "english"}, False),
    ("word-shingle n=5, tf, no stop words", {"ngram": 5, "stopwords": None}, False),
    ("word-shingle n=5, tf, english stop words", {"ngram": 5, "stopwords": "english"}, False),
    ("word-shingle n=3, tf, no stop words, IDF fitted on the corpus", {"stopwords": None}, True),
    ("word-shingle n=3, tf, english stop words, IDF fitted on the corpus", {"stopwords": "english"}, True),
    ("word, tf, no stop words", {"features": "word", "stopwords": None}, False),
    ("word, tf, english stop words, IDF fitted on the corpus", {"features": "word", "stopwords": "english"}, True),
    ("char n=5, tf", {"features": "char", "stopwords": None}, False),
    ("char n=8, tf", {"features": "char", "ngram": 8, "stopwords": None}, False),
]


Scores = tuple[float, float, float]
Table = dict[int, dict[float, Scores]]


def measured_table(
    pairs: tuple[PairKeys, npt.NDArray[np.int64]], truth: dict[float, PairKeys], verified: bool = False
) -> Table:
    """P/R/F1 of "distance <= k" for k = 0..MAX_K against each threshold's true pairs, from
    the (pair keys, distances) of :func:`hamming_pairs` at MAX_K.  With
    ``verified``, the pairs within k bits are kept only when their exact Jaccard reaches the
    threshold, as a caller checking each candidate with :func:`simdb.jaccard` would: precision
    is then 1 and recall is that of the fingerprints."""
    keys, distances = pairs
    table: Table = {}
    for k in range(MAX_K + 1):
        within = np.unique(keys[distances <= k])
        table[k] = {
            tau: scores(np.intersect1d(within, truth[tau]) if verified else within, truth[tau]) for tau in THRESHOLDS
        }
    return table


def expected_table(
    pairs: tuple[PairKeys, npt.NDArray[np.float64]], truth: dict[float, PairKeys], bits: int = 64, max_k: int = MAX_K
) -> Table:
    """The same table expected over the choice of hash function (see the module docstring),
    from the (pair keys, cosines) of :func:`cosine_pairs`, for ``bits``-wide fingerprints."""
    pair_keys, cosines = pairs
    table: Table = {}
    for k in range(max_k + 1):
        probability = within_k_probability(cosines, k, bits)
        table[k] = {tau: expected_scores(pair_keys, probability, truth[tau]) for tau in THRESHOLDS}
    return table


def best_k(table: Table, tau: float) -> int:
    return max(table, key=lambda k: table[k][tau][2])


def sketch_checked_table(
    pairs: tuple[PairKeys, npt.NDArray[np.int64]], sketches: list[bytes], truth: dict[float, PairKeys]
) -> Table:
    """P/R/F1 of "distance <= k and sketch estimate >= tau" (the candidates of a k-bit
    index, each checked with :func:`simdb.sketch_similarity`), measured."""
    keys, distances = pairs
    n = len(sketches)
    estimates = sketch_similarities(
        [sketches[i] for i in (keys // n).tolist()], [sketches[j] for j in (keys % n).tolist()]
    )
    table: Table = {}
    for k in range(MAX_K + 1):
        table[k] = {
            tau: scores(np.unique(keys[(distances <= k) & (estimates >= tau)]), truth[tau]) for tau in THRESHOLDS
        }
    return table


KIND_METHODS: list[tuple[str, dict[str, Any], bool]] = [
    ("SimHash weights=tf", {"weights": "tf"}, False),
    ("SimHash weights=log", {"weights": "log"}, False),
    ("SimHash weights=binary", {"weights": "binary"}, False),
    ("SimHash weights=binary + sketch >= tau", {"weights": "binary"}, True),
    ("minhash (one-bit minwise)", {"kind": "minhash"}, False),
    ("minhash + sketch >= tau", {"kind": "minhash"}, True),
]


def print_kinds(
    documents: Sequence[str], truth: dict[float, PairKeys], lsh: dict[float, tuple[PairKeys, PairKeys]]
) -> None:
    """The --kinds table: best k (by measured F1) of each kind and weighting, and MinHash LSH."""
    print()
    print("Kinds and weights (word 3-shingles, 64 bits): best k by measured F1, P, R, F1; and F1 at k=3")
    print()
    print("| method | J>=0.9 best k | P | R | F1 | F1 k=3 | J>=0.8 best k | P | R | F1 | F1 k=3 |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    computed: dict[str, tuple[tuple[PairKeys, npt.NDArray[np.int64]], list[bytes]]] = {}
    for label, settings, checked in KIND_METHODS:
        fingerprinter = Fingerprinter(**settings)
        key = repr(fingerprinter)
        if key not in computed:
            fingerprints, sketches = fingerprinter.fingerprints_and_sketches(documents)
            computed[key] = (hamming_pairs(fingerprints, MAX_K), sketches)
        pairs, sketches = computed[key]
        table = sketch_checked_table(pairs, sketches, truth) if checked else measured_table(pairs, truth)
        cells = []
        for tau in THRESHOLDS:
            k = best_k(table, tau)
            p, r, f = table[k][tau]
            cells.append(f"{k} | {p:.3f} | {r:.3f} | {f:.3f} | {table[3][tau][2]:.3f}")
        print(f"| {label} | {' | '.join(cells)} |")
    for label, which in (("MinHashLSH 128 perms, threshold=tau", 0), ("MinHashLSH + estimate >= tau", 1)):
        row = " | ".join(
            f"- | {p:.3f} | {r:.3f} | {f:.3f} | -"
            for p, r, f in (scores(lsh[tau][which], truth[tau]) for tau in THRESHOLDS)
        )
        print(f"| {label} | {row} |")


# ---- simdb's answer as users get it (issue #14's acceptance benchmark) ----

#: Thresholds of the plagiarism-label table: the defaults' two and lower ones, to see where
#: the labelled categories start to be reported.
LABEL_THRESHOLDS = (0.9, 0.8, 0.5, 0.3, 0.2)
#: Sketch sizes of the what-ifs (bins = bytes per document): the library's (SKETCH_BYTES,
#: 192) and the previous default, 128.
SKETCH_BINS = (128, 192)
#: Extra candidate radii of the radius what-if, added to candidate_distance(tau).
EXTRA_RADII = (0, 2, 4)


def database_pairs(
    documents: Sequence[str], thresholds: Sequence[float]
) -> tuple[dict[float, PairKeys], dict[str, Any]]:
    """simdb's answer through the user's code path: a database created by ``simdb.open`` in
    a temporary directory at default settings, the documents added with ``add_texts`` (keys
    ``d0``, ``d1``, ...) and the pairs of ``pairs(threshold=tau)`` for each tau, as pair keys
    i * n + j (i < j).  Also the settings, the index k, the times, and the file's bytes per
    document after ``compact()``.  O(corpus) plus the pair search."""
    import tempfile

    import simdb

    n = len(documents)
    answers: dict[float, PairKeys] = {}
    info: dict[str, Any] = {}
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "quality.simdb"
        with simdb.open(path) as db:
            started = time.perf_counter()
            db.add_texts((f"d{i}", text) for i, text in enumerate(documents))
            info["add_s"] = time.perf_counter() - started
            for tau in thresholds:
                started = time.perf_counter()
                found = np.array(
                    [(int(p.key_a[1:]), int(p.key_b[1:])) for p in db.pairs(threshold=tau)], dtype=np.int64
                )
                found = found.reshape(-1, 2)
                answers[tau] = np.unique(found.min(axis=1) * n + found.max(axis=1))
                info[f"pairs_s_{tau}"] = time.perf_counter() - started
            info["fingerprinter"] = repr(db.fingerprinter)
            info["k"] = db.k
            info["tables"] = len(db.plan.tables)
            db.compact()
            info["bytes_per_doc"] = sum(f.stat().st_size for f in path.rglob("*") if f.is_file()) / max(n, 1)
    return answers, info


def lookup(keys: PairKeys, sorted_keys: PairKeys, values: npt.NDArray[Any], missing: Any) -> npt.NDArray[Any]:
    """``values`` of ``keys`` in the sorted ``sorted_keys``, ``missing`` where absent.  O(m log n)."""
    at = np.minimum(np.searchsorted(sorted_keys, keys), max(sorted_keys.size - 1, 0))
    found = sorted_keys[at] == keys if sorted_keys.size else np.zeros(keys.size, dtype=bool)
    result = np.full(keys.size, missing, dtype=np.asarray(values).dtype if sorted_keys.size else np.float64)
    result[found] = values[at[found]]
    return result


def pair_distances(keys: PairKeys, n: int, fingerprints: npt.NDArray[np.uint64]) -> npt.NDArray[np.int64]:
    """Hamming distances of the pairs ``keys`` (i * n + j).  O(pairs)."""
    return _popcount(fingerprints[keys // n] ^ fingerprints[keys % n])


def feature_hash_lists(documents: Sequence[str], fingerprinter: Fingerprinter) -> list[npt.NDArray[np.uint64]]:
    """The distinct feature hashes of each document, the set its minwise sketches are taken
    of.  O(total features); about a minute for 21,000 news stories on a busy core."""
    return [np.array([h for h, _ in fingerprinter.weighted_features(text)], dtype=np.uint64) for text in documents]


def minwise_values(
    hash_lists: Sequence[npt.NDArray[np.uint64]], bins: int, salt: int | None, seed: int = 0
) -> npt.NDArray[np.uint64]:
    """The library's one-permutation minwise construction with any number of bins: each
    document's hashes (remixed by ``seed`` when non-zero, a stand-in for another hash
    function; then ``fmix64(h ^ salt)`` when a salt is given, as the sketch does), bin = the
    top of the value's range (the top bits when ``bins`` is a power of two, as in the
    library), minimum per bin, optimal densification, ``_bin_values``.  Returns the (docs,
    bins) mixed values: bit 0 of the 64-bin values is the fingerprint, byte 0 of the 192-bin
    ones with SKETCH_SALT the sketch.  Rows of featureless documents are meaningless (the
    callers zero them).  O(total features)."""
    from simdb.fingerprint import _bin_values, _densify, _fmix64

    counts = np.array([h.size for h in hash_lists], dtype=np.int64)
    flat = np.concatenate(hash_lists) if hash_lists else np.empty(0, dtype=np.uint64)
    if seed:
        flat = _mix(flat, seed)
    if salt is not None:
        flat = _fmix64(flat ^ np.uint64(salt))
    column = (((flat >> np.uint64(32)) * np.uint64(bins)) >> np.uint64(32)).astype(np.int64)
    index = np.repeat(np.arange(counts.size, dtype=np.int64) * bins, counts) + column
    minima = np.full(counts.size * bins, np.iinfo(np.uint64).max, dtype=np.uint64)
    np.minimum.at(minima, index, flat)
    filled = np.zeros(counts.size * bins, dtype=bool)
    filled[index] = True
    return _bin_values(_densify(minima.reshape(-1, bins), filled.reshape(-1, bins)))


def minwise_fingerprints(hash_lists: Sequence[npt.NDArray[np.uint64]], seed: int = 0) -> npt.NDArray[np.uint64]:
    """The library's 64-bit minhash fingerprints (seed 0; checked in main) or those of
    another hash function (``seed``).  O(total features)."""
    bits = (minwise_values(hash_lists, 64, None, seed) & np.uint64(1)).astype(np.uint8)
    bits[[h.size == 0 for h in hash_lists]] = 0
    return np.packbits(bits, axis=1, bitorder="little").view("<u8").ravel().astype(np.uint64)


def minwise_sketches(hash_lists: Sequence[npt.NDArray[np.uint64]], bins: int, seed: int = 0) -> npt.NDArray[np.uint8]:
    """What-if sketches of ``bins`` bytes (the library's sketches at 192 bins and seed 0);
    featureless rows zero.  O(total features)."""
    from simdb.fingerprint import SKETCH_SALT

    rows = (minwise_values(hash_lists, bins, SKETCH_SALT, seed) & np.uint64(0xFF)).astype(np.uint8)
    rows[[h.size == 0 for h in hash_lists]] = 0
    return rows


def binned_sketches(documents: Sequence[str], fingerprinter: Fingerprinter, bins: int) -> npt.NDArray[np.uint8]:
    """:func:`minwise_sketches` of ``documents`` (``bins`` bytes each)."""
    return minwise_sketches(feature_hash_lists(documents, fingerprinter), bins)


def byte_estimates(rows: npt.NDArray[np.uint8], keys: PairKeys, n: int) -> npt.NDArray[np.float64]:
    """Jaccard estimates of the pairs ``keys`` from what-if sketches of any width, corrected
    for chance byte agreement as :func:`simdb.sketch_similarities` does.  O(pairs * bins)."""
    agreeing = np.count_nonzero(rows[keys // n] == rows[keys % n], axis=1) / rows.shape[1]
    return np.clip((agreeing - 1 / 256) / (1 - 1 / 256), 0.0, 1.0)


def ml_estimates(
    distances: npt.NDArray[np.int64], agreeing: npt.NDArray[np.int64], bins: int
) -> npt.NDArray[np.float64]:
    """The maximum-likelihood Jaccard of each pair from both of its sketches at once: the 64
    one-bit minwise bits (each differs with probability (1 - J) / 2) and the ``bins`` sketch
    bytes (each agrees with probability J + (1 - J) / 256).  At the library's sketch size
    this is the library's own estimator (:func:`simdb.threshold.joint_similarities`); other
    sizes (what-ifs) use the same model on a grid of 0.001: O(65 * bins * 1001) for the
    table, then a lookup per pair."""
    from simdb.fingerprint import SKETCH_BYTES
    from simdb.threshold import joint_similarities

    if bins == SKETCH_BYTES:
        return joint_similarities(64 - np.asarray(distances, dtype=np.int64), agreeing)
    grid = np.linspace(0.0, 1.0, 1001)
    flip = np.clip((1 - grid) / 2, 1e-12, 1.0)
    agree = grid + (1 - grid) / 256
    d = np.arange(65)[:, None, None]
    a = np.arange(bins + 1)[None, :, None]
    with np.errstate(divide="ignore", invalid="ignore"):
        loglik = (
            d * np.log(flip)
            + (64 - d) * np.log(1 - flip)
            + a * np.log(agree)
            + (bins - a) * np.log(np.clip(1 - agree, 1e-300, 1.0))
        )
    table = grid[np.nanargmax(np.nan_to_num(loglik, nan=-np.inf), axis=2)]
    return table[distances, agreeing]


SEEDED_METHODS = (
    "simdb defaults (joint ML of 64 bits + 192-byte sketch >= tau)",
    "192-byte sketch alone >= tau",
    "previous defaults (128-byte sketch alone >= tau)",
    "ML(64 bits + 128 bytes) >= tau",
    "MinHashLSH (LSH candidates)",
    "MinHashLSH + estimate >= tau",
)


def _seeded_label(bins: int, joint: bool) -> str:
    """The SEEDED_METHODS row of a sketch size and estimate."""
    if bins == 192:
        return SEEDED_METHODS[0] if joint else SEEDED_METHODS[1]
    return SEEDED_METHODS[3] if joint else SEEDED_METHODS[2]


def seeded_scores(
    hash_lists: Sequence[npt.NDArray[np.uint64]],
    sets: Sequence[frozenset[str]],
    truth: dict[float, PairKeys],
    radii: dict[float, int],
    seed: int,
) -> dict[str, dict[float, Scores]]:
    """P/R/F1 of each of SEEDED_METHODS under one choice of hash functions: ``seed`` remixes
    simdb's feature hashes (0 = the library's own, reproduced) and datasketch gets seed + 1
    (1 = its default).  Candidates within candidate_distance(tau) bits, as pairs() does.
    Cost: the minwise sketches, an all-pairs popcount and two MinHashLSH runs."""
    n = len(hash_lists)
    keys, distances = hamming_pairs(minwise_fingerprints(hash_lists, seed), max(radii.values()))
    within = {tau: distances <= radii[tau] for tau in THRESHOLDS}
    result: dict[str, dict[float, Scores]] = {}
    for bins in SKETCH_BINS:
        rows = minwise_sketches(hash_lists, bins, seed)
        agreeing = np.count_nonzero(rows[keys // n] == rows[keys % n], axis=1)
        alone = np.clip((agreeing / bins - 1 / 256) / (1 - 1 / 256), 0.0, 1.0)
        combined = ml_estimates(distances, agreeing, bins)
        result[_seeded_label(bins, False)] = {
            tau: scores(np.unique(keys[within[tau] & (alone >= tau)]), truth[tau]) for tau in THRESHOLDS
        }
        result[_seeded_label(bins, True)] = {
            tau: scores(np.unique(keys[within[tau] & (combined >= tau)]), truth[tau]) for tau in THRESHOLDS
        }
    minhashes = build_minhashes(sets, seed + 1)
    lsh = {tau: minhash_lsh_pairs(sets, tau, minhashes) for tau in THRESHOLDS}
    result[SEEDED_METHODS[-2]] = {tau: scores(lsh[tau][0], truth[tau]) for tau in THRESHOLDS}
    result[SEEDED_METHODS[-1]] = {tau: scores(lsh[tau][1], truth[tau]) for tau in THRESHOLDS}
    return result


def print_seeded(runs: list[dict[str, dict[float, Scores]]]) -> None:
    """Mean (sd) of P, R and F1 of each method over the runs of :func:`seeded_scores`, and
    the targets on the mean F1."""
    print()
    print(f"Over {len(runs)} choices of hash functions (seed 0 = simdb's own and datasketch's default): mean (sd)")
    print()
    print("| method | J>=0.9 P | R | F1 | J>=0.8 P | R | F1 |")
    print("|---|---|---|---|---|---|---|")
    means: dict[str, dict[float, Scores]] = {}
    for method in SEEDED_METHODS:
        cells = []
        means[method] = {}
        for tau in THRESHOLDS:
            values = np.array([run[method][tau] for run in runs])
            mean, sd = values.mean(axis=0), values.std(axis=0)
            means[method][tau] = (float(mean[0]), float(mean[1]), float(mean[2]))
            cells.append(f"{mean[0]:.3f} | {mean[1]:.3f} | {mean[2]:.3f} ({sd[2]:.3f})")
        print(f"| {method} | {' | '.join(cells)} |")
    print()
    lsh = means[SEEDED_METHODS[-2]]
    for method in SEEDED_METHODS[:-2]:
        print(f"Targets on mean F1, {method}: {targets_line(means[method], lsh)}")


def print_scores_table(title: str, rows: list[tuple[str, dict[float, Scores]]]) -> None:
    print()
    print(title)
    print()
    print("| method | J>=0.9 P | R | F1 | J>=0.8 P | R | F1 |")
    print("|---|---|---|---|---|---|---|")
    for label, by_tau in rows:
        print(
            f"| {label} | "
            + " | ".join(f"{p:.3f} | {r:.3f} | {f:.3f}" for p, r, f in (by_tau[tau] for tau in THRESHOLDS))
            + " |"
        )


def targets_line(simdb_scores: dict[float, Scores], lsh_scores: dict[float, Scores]) -> str:
    """The issue's targets at each tau: simdb F1 >= LSH F1 + 0.02, or >= 0.985 where LSH is
    already above 0.97."""
    cells = []
    for tau in THRESHOLDS:
        ours, theirs = simdb_scores[tau][2], lsh_scores[tau][2]
        needed = 0.985 if theirs > 0.97 else theirs + 0.02
        cells.append(f"tau={tau}: simdb {ours:.3f} vs needed {needed:.3f} -> {'met' if ours >= needed else 'MISSED'}")
    return "; ".join(cells)


def plagiarism_labels(root: Path) -> dict[str, tuple[str, str]] | None:
    """file name -> (task, category) from the plagiarism corpus's file_information.csv, or None
    when the corpus has none."""
    info = root / "file_information.csv"
    if not info.is_file():
        return None
    rows = info.read_text(encoding="utf-8-sig").splitlines()[1:]
    return {
        name: (task, category) for name, task, category in (row.split(",")[:3] for row in rows if row.count(",") >= 2)
    }


def print_plagiarism(
    root: Path, kept: list[int], sets: Sequence[frozenset[str]], answers: dict[float, PairKeys]
) -> None:
    """How the labelled categories (cut / light / heavy / non, each answer against its task's
    source text) relate to exact Jaccard, containment and the pairs simdb reports at each of
    LABEL_THRESHOLDS; and simdb's pairs scored against the labels (plagiarised = not "non")."""
    labels = plagiarism_labels(root)
    if labels is None:
        return
    names = [path.name for path in sorted(root.glob("*.txt"))]
    position = {names[original]: i for i, original in enumerate(kept)}
    n = len(kept)
    rows: list[tuple[str, float, float, PairKeys]] = []
    for name, (task, category) in labels.items():
        source = f"orig_task{task}.txt"
        if category == "orig" or name not in position or source not in position:
            continue
        a, b = sorted((position[name], position[source]))
        shared = len(sets[a] & sets[b])
        jaccard = shared / len(sets[a] | sets[b])
        containment = shared / len(sets[position[name]])
        rows.append((category, jaccard, containment, np.array([a * n + b], dtype=np.int64)))
    print()
    print(
        "Plagiarism labels: each answer against its task's source text (exact J and containment"
        " |A & S| / |A| of the word 3-shingle sets; share of the pairs simdb reports at each threshold)"
    )
    print()
    print(
        "| category | answers | mean J | min J | max J | mean containment | "
        + " | ".join(f"reported tau={t}" for t in LABEL_THRESHOLDS)
        + " |"
    )
    print("|---|---|---|---|---|---|" + "---|" * len(LABEL_THRESHOLDS))
    for category in ("cut", "light", "heavy", "non"):
        chosen = [r for r in rows if r[0] == category]
        if not chosen:
            continue
        j = np.array([r[1] for r in chosen])
        c = np.array([r[2] for r in chosen])
        keys = np.concatenate([r[3] for r in chosen])
        reported = [f"{np.isin(keys, answers[t]).sum()}/{keys.size}" for t in LABEL_THRESHOLDS]
        print(
            f"| {category} | {len(chosen)} | {j.mean():.3f} | {j.min():.3f} | {j.max():.3f} | "
            f"{c.mean():.3f} | {' | '.join(reported)} |"
        )
    print()
    print(
        "simdb's pairs against the labels (positive = cut, light or heavy; answer-source pairs only),"
        " and exact J >= tau as the same rule without sketch noise"
    )
    print()
    print("| tau | simdb P | R | F1 | exact J>=tau P | R | F1 |")
    print("|---|---|---|---|---|---|---|")
    positive = np.array([r[0] != "non" for r in rows])
    keys = np.concatenate([r[3] for r in rows])
    jaccards = np.array([r[1] for r in rows])
    for tau in LABEL_THRESHOLDS:
        cells = []
        for predicted in (np.isin(keys, answers[tau]), jaccards >= tau):
            tp = int((predicted & positive).sum())
            p = tp / predicted.sum() if predicted.sum() else 1.0
            r = tp / positive.sum()
            cells.append(f"{p:.3f} | {r:.3f} | {2 * p * r / (p + r) if p + r else 0.0:.3f}")
        print(f"| {tau} | {' | '.join(cells)} |")


def database_report(
    corpus: str,
    documents: Sequence[str],
    sets: Sequence[frozenset[str]],
    kept: list[int],
    pair_keys: PairKeys,
    pair_jaccards: npt.NDArray[np.float64],
    truth: dict[float, PairKeys],
    seeds: int = 0,
) -> None:
    """The acceptance report: simdb's pairs() at default settings against MinHashLSH and
    MinHashLSH + estimate check, the error analysis of simdb's misses and false pairs, and the
    what-ifs (candidate radius, sketch size, maximum-likelihood estimate from both sketches)."""
    import simdb
    from simdb.fingerprint import SKETCH_BYTES
    from simdb.threshold import candidate_distance, candidate_similarities

    n = len(documents)
    root = Path(corpus)
    plagiarism = not corpus.startswith("messy:") and plagiarism_labels(root) is not None
    thresholds = LABEL_THRESHOLDS if plagiarism else THRESHOLDS
    answers, info = database_pairs(documents, thresholds)
    print(
        f"simdb: {info['fingerprinter']}, index k={info['k']} ({info['tables']} tables), DEFAULT_THRESHOLD"
        f" {simdb.DEFAULT_THRESHOLD}; add_texts {info['add_s']:.1f} s;"
        f" pairs(threshold=0.9) {info['pairs_s_0.9']:.1f} s,"
        f" 0.8 {info['pairs_s_0.8']:.1f} s; {info['bytes_per_doc']:.0f} bytes/doc after compact()"
    )
    started = time.perf_counter()
    minhashes = build_minhashes(sets)
    lsh = {tau: minhash_lsh_pairs(sets, tau, minhashes) for tau in THRESHOLDS}
    print(f"datasketch MinHash(128) + MinHashLSH at both tau: {time.perf_counter() - started:.1f} s")
    simdb_scores = {tau: scores(answers[tau], truth[tau]) for tau in THRESHOLDS}
    lsh_scores = {tau: scores(lsh[tau][0], truth[tau]) for tau in THRESHOLDS}
    checked_scores = {tau: scores(lsh[tau][1], truth[tau]) for tau in THRESHOLDS}
    print_scores_table(
        "simdb pairs(threshold=tau) at default settings, beside datasketch MinHashLSH(num_perm=128, threshold=tau)",
        [
            ("simdb defaults", simdb_scores),
            ("MinHashLSH (LSH candidates)", lsh_scores),
            ("MinHashLSH + estimate >= tau", checked_scores),
        ],
    )
    print()
    print(
        "Targets (F1 >= MinHashLSH + 0.02, or >= 0.985 where MinHashLSH > 0.97): "
        + targets_line(simdb_scores, lsh_scores)
    )
    print("Against MinHashLSH + estimate check: " + targets_line(simdb_scores, checked_scores))

    # Reproduce the database's answer from the same Fingerprinter, to take it apart.
    fingerprinter = Fingerprinter()
    raw_fingerprints, sketches = fingerprinter.fingerprints_and_sketches(documents)
    fingerprints = np.array(raw_fingerprints, dtype=np.uint64)
    radii = {tau: candidate_distance(tau, fingerprinter.kind, verified=True) for tau in THRESHOLDS}
    reach = max(radii.values()) + max(EXTRA_RADII)
    near_keys, near_distances = hamming_pairs(raw_fingerprints, reach)
    order = np.argsort(pair_keys)
    sorted_keys, sorted_jaccards = pair_keys[order], pair_jaccards[order]
    hash_lists = feature_hash_lists(documents, fingerprinter)
    sketch_rows = {bins: minwise_sketches(hash_lists, bins) for bins in SKETCH_BINS}
    same_fingerprints = bool(np.array_equal(minwise_fingerprints(hash_lists), fingerprints))
    library_rows = np.frombuffer(b"".join(s if s else bytes(SKETCH_BYTES) for s in sketches), dtype=np.uint8)
    library_rows = library_rows.reshape(-1, SKETCH_BYTES)
    same = bool(np.array_equal(sketch_rows[SKETCH_BYTES], library_rows))
    agreeing = np.count_nonzero(library_rows[near_keys // n] == library_rows[near_keys % n], axis=1)
    estimates = candidate_similarities(near_distances, agreeing, fingerprinter.kind)

    print()
    print(
        "Error analysis of simdb's answer (reproduced from Fingerprinter(): candidates within"
        f" candidate_distance(tau) bits, kept when the library's joint estimate of the 64 bits and the"
        f" {SKETCH_BYTES}-byte sketch >= tau; what-if sketch code equals the library's sketches: {same},"
        f" fingerprints: {same_fingerprints})"
    )
    print()
    print(
        "| tau | radius | reproduced = db | true pairs | found | FN | FN: distance > radius | FN: estimate < tau |"
        " FP | FP with J in [tau-0.05, tau) | FP with J < tau-0.05 |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for tau in THRESHOLDS:
        radius = radii[tau]
        reproduced = np.unique(near_keys[(near_distances <= radius) & (estimates >= tau)])
        true = truth[tau]
        missed = np.setdiff1d(true, answers[tau])
        far = pair_distances(missed, n, fingerprints) > radius
        false = np.setdiff1d(answers[tau], true)
        false_j = lookup(false, sorted_keys, sorted_jaccards, 0.0)
        close = int((false_j >= tau - 0.05).sum())
        print(
            f"| {tau} | {radius} | {np.array_equal(reproduced, answers[tau])} | {true.size} | {answers[tau].size} |"
            f" {missed.size} | {int(far.sum())} | {int((~far).sum())} | {false.size} | {close} | {false.size - close} |"
        )

    rows: list[tuple[str, dict[float, Scores]]] = []
    for extra in EXTRA_RADII:
        label = (
            f"radius candidate_distance{f' + {extra}' if extra else ''}, "
            f"joint ML(64 bits + {SKETCH_BYTES} bytes) >= tau"
        )
        rows.append(
            (
                label + (" (= defaults)" if not extra else ""),
                {
                    tau: scores(
                        np.unique(near_keys[(near_distances <= radii[tau] + extra) & (estimates >= tau)]), truth[tau]
                    )
                    for tau in THRESHOLDS
                },
            )
        )
    for bins in SKETCH_BINS:
        alone = byte_estimates(sketch_rows[bins], near_keys, n)
        rows.append(
            (
                f"radius candidate_distance, {bins}-byte sketch alone >= tau"
                + (" (previous defaults)" if bins == 128 else ""),
                {
                    tau: scores(np.unique(near_keys[(near_distances <= radii[tau]) & (alone >= tau)]), truth[tau])
                    for tau in THRESHOLDS
                },
            )
        )
    for bins in SKETCH_BINS:
        if bins == SKETCH_BYTES:
            continue  # the defaults, above
        agreeing_bins = np.count_nonzero(sketch_rows[bins][near_keys // n] == sketch_rows[bins][near_keys % n], axis=1)
        combined = ml_estimates(near_distances, agreeing_bins, bins)
        rows.append(
            (
                f"radius candidate_distance, ML(64 bits + {bins} bytes) >= tau",
                {
                    tau: scores(np.unique(near_keys[(near_distances <= radii[tau]) & (combined >= tau)]), truth[tau])
                    for tau in THRESHOLDS
                },
            )
        )
    rows.append(
        (
            f"radius candidate_distance + {max(EXTRA_RADII)}, exact J >= tau (recall bound of the candidates)",
            {
                tau: scores(
                    np.intersect1d(np.unique(near_keys[near_distances <= radii[tau] + max(EXTRA_RADII)]), truth[tau]),
                    truth[tau],
                )
                for tau in THRESHOLDS
            },
        )
    )
    print_scores_table(
        "What-ifs, in the benchmark only (candidate radius; the previous 128-byte sketch; the sketch alone)", rows
    )
    if seeds:
        print_seeded([seeded_scores(hash_lists, sets, truth, radii, seed) for seed in range(seeds)])
    if plagiarism:
        print_plagiarism(root, kept, sets, answers)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("corpus")
    parser.add_argument("--variants", action="store_true", help="also report other settings (best k)")
    parser.add_argument("--seeds", type=int, default=0, help="check the expected figures with N other hash functions")
    parser.add_argument("--limit", type=int, default=None, help="use only the first N documents")
    parser.add_argument("--kinds", action="store_true", help="only compare fingerprint kinds and weights")
    parser.add_argument(
        "--simhash", action="store_true", help="the 64-bit SimHash tables (the defaults before issue #14)"
    )
    args = parser.parse_args(argv)

    started = time.perf_counter()
    documents = read_corpus(args.corpus)[: args.limit]
    all_sets = shingle_sets(documents)
    kept = [i for i, s in enumerate(all_sets) if s]
    documents = [documents[i] for i in kept]
    sets = [all_sets[i] for i in kept]
    n = len(documents)
    pair_keys, pair_jaccards = jaccard_pairs(sets, JACCARD_FLOOR)
    similar = pair_jaccards >= CANDIDATE_THRESHOLD
    similar_keys, similar_jaccards = pair_keys[similar], pair_jaccards[similar]
    truth = {tau: np.sort(similar_keys[similar_jaccards >= tau - 1e-12]) for tau in THRESHOLDS}
    print(f"corpus: {args.corpus}: {n} documents with a word 3-shingle ({len(all_sets) - n} without)")
    print(
        f"exact pairs: J>=0.7: {similar_keys.size}, J>=0.8: {truth[0.8].size}, J>=0.9: {truth[0.9].size}"
        f" ({time.perf_counter() - started:.1f} s)"
    )

    if args.kinds:
        minhashes = build_minhashes(sets)
        print_kinds(documents, truth, {tau: minhash_lsh_pairs(sets, tau, minhashes) for tau in THRESHOLDS})
        print()
        print(f"total time {time.perf_counter() - started:.1f} s")
        return

    if not args.simhash:
        database_report(args.corpus, documents, sets, kept, pair_keys, pair_jaccards, truth, args.seeds)
        print()
        print(f"total time {time.perf_counter() - started:.1f} s")
        return

    default = Fingerprinter(kind="simhash", weights="tf")
    default_hamming = hamming_pairs(default.fingerprint_many(documents), MAX_K)
    default_measured = measured_table(default_hamming, truth)
    default_matrix, default_hashes = feature_matrix(default, documents)
    default_pairs = cosine_pairs(default_matrix)
    default_expected = expected_table(default_pairs, truth)
    minhashes = build_minhashes(sets)
    lsh = {tau: minhash_lsh_pairs(sets, tau, minhashes) for tau in THRESHOLDS}
    lsh_expected = {
        tau: expected_scores(similar_keys, lsh_candidate_probability(similar_jaccards, tau), truth[tau])
        for tau in THRESHOLDS
    }

    print()
    print(f"Default settings: {default!r}")
    print(
        "P, R, F1: measured with simdb's hash function; E[F1]: expected over hash functions (permutations for MinHash)"
    )
    print()
    print("| method | J>=0.9 P | R | F1 | E[F1] | J>=0.8 P | R | F1 | E[F1] | index tables |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for k in range(MAX_K + 1):
        row = " | ".join(
            f"{p:.3f} | {r:.3f} | {f:.3f} | {default_expected[k][tau][2]:.3f}"
            for tau, (p, r, f) in ((tau, default_measured[k][tau]) for tau in THRESHOLDS)
        )
        print(f"| SimHash k={k} | {row} | {len(TablePlan.create(k).tables)} |")
    for label, which in (("MinHashLSH 128 perms, threshold=tau", 0), ("MinHashLSH + estimate >= tau", 1)):
        row = " | ".join(
            f"{p:.3f} | {r:.3f} | {f:.3f} | " + (f"{lsh_expected[tau][2]:.3f}" if which == 0 else "")
            for tau, (p, r, f) in ((tau, scores(lsh[tau][which], truth[tau])) for tau in THRESHOLDS)
        )
        print(f"| {label} | {row} | |")

    print()
    print("What-if, default features: best k and expected F1 if fingerprints were wider")
    print()
    print("| bits | J>=0.9 best k | E[F1] | J>=0.8 best k | E[F1] |")
    print("|---|---|---|---|---|")
    for bits in (64, 128, 256):
        wide = expected_table(default_pairs, truth, bits, max_k=bits // 4)
        print(
            f"| {bits} | "
            + " | ".join(f"{best_k(wide, tau)} | {wide[best_k(wide, tau)][tau][2]:.3f}" for tau in THRESHOLDS)
            + " |"
        )

    print()
    print("What-if, the default index with every candidate verified (exact J >= tau): measured")
    print()
    print("| k | index tables | J>=0.9 P | R | F1 | J>=0.8 P | R | F1 |")
    print("|---|---|---|---|---|---|---|---|")
    verified = measured_table(default_hamming, truth, verified=True)
    for k in range(MAX_K + 1):
        row = " | ".join(f"{p:.3f} | {r:.3f} | {f:.3f}" for p, r, f in (verified[k][tau] for tau in THRESHOLDS))
        print(f"| {k} | {len(TablePlan.create(k).tables)} | {row} |")

    print()
    print("What-if, the same 64 bits as 64 one-bit minwise hashes of the 3-shingle sets (expected)")
    print()
    print("| 64-bit sketch | J>=0.9 best k | E[F1] | J>=0.8 best k | E[F1] |")
    print("|---|---|---|---|---|")
    minwise: Table = {
        k: {
            tau: expected_scores(pair_keys, one_bit_minwise_probability(pair_jaccards, k), truth[tau])
            for tau in THRESHOLDS
        }
        for k in range(MAX_K + 1)
    }
    for label, table in (("SimHash, default features", default_expected), ("one-bit minwise hashes", minwise)):
        print(
            f"| {label} | "
            + " | ".join(f"{best_k(table, tau)} | {table[best_k(table, tau)][tau][2]:.3f}" for tau in THRESHOLDS)
            + " |"
        )

    if args.seeds:
        print()
        print(f"Check: default features under {args.seeds} other hash functions, measured F1 mean (sd)")
        print()
        print("| k | J>=0.9 F1 | E[F1] | J>=0.8 F1 | E[F1] |")
        print("|---|---|---|---|---|")
        runs = [
            measured_table(hamming_pairs(reseeded_fingerprints(default_matrix, default_hashes, seed), MAX_K), truth)
            for seed in range(1, args.seeds + 1)
        ]
        for k in range(MAX_K + 1):
            cells = []
            for tau in THRESHOLDS:
                f1s = np.array([run[k][tau][2] for run in runs])
                cells.append(f"{f1s.mean():.3f} ({f1s.std():.3f}) | {default_expected[k][tau][2]:.3f}")
            print(f"| {k} | {' | '.join(cells)} |")

    if args.variants:
        print()
        print("Best k of each setting by expected F1, with that k's expected and measured F1")
        print()
        print("| settings | J>=0.9 best k | E[F1] | F1 | k=3 E[P] | E[F1] | J>=0.8 best k | E[F1] | F1 |")
        print("|---|---|---|---|---|---|---|---|---|")
        for label, settings, with_idf in VARIANTS:
            fingerprinter = Fingerprinter(**settings)
            if with_idf:
                fingerprinter = fingerprinter.fit_idf(documents)
            if fingerprinter == default:
                measured, expected = default_measured, default_expected
            else:
                measured = measured_table(hamming_pairs(fingerprinter.fingerprint_many(documents), MAX_K), truth)
                expected = expected_table(cosine_pairs(feature_matrix(fingerprinter, documents)[0]), truth)
            cells = []
            for tau in THRESHOLDS:
                k = best_k(expected, tau)
                cells.append(f"{k} | {expected[k][tau][2]:.3f} | {measured[k][tau][2]:.3f}")
                if tau == 0.9:
                    cells.append(f"{expected[3][tau][0]:.3f} | {expected[3][tau][2]:.3f}")
            marked = f"{label} (default)" if fingerprinter == default else label
            print(f"| {marked} | {' | '.join(cells)} |")
    print()
    print(f"total time {time.perf_counter() - started:.1f} s")
    sys.stdout.flush()


if __name__ == "__main__":
    main()
