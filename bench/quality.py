"""Fingerprint quality against exact Jaccard similarity, beside MinHash LSH.

    python bench/quality.py CORPUS_PATH [--variants] [--limit N]

CORPUS_PATH is a directory of Reuters-21578 SGML files (``reut2-*.sgm``; each article's
title and body are one document) or, failing that, of ``*.txt`` files (one document each).
The corpus is read in place, never copied.

Ground truth: the exact Jaccard similarity J of the documents' word 3-shingle sets (tokens
from :func:`simdb.features.tokenize`).  Every pair with J >= 0.7 is found by an exact
prefix-filtering all-pairs join (tokens ordered rarest first; a pair with J >= t must share
one of the first ``|x| - ceil(t |x|) + 1`` tokens of each set), then verified exactly, so
every pair the fingerprints predict that is not among them has J < 0.7 and is a false
positive at both thresholds.  Documents with fewer than three tokens have no 3-shingle and
are left out.

For the default settings and each Hamming distance k = 0..8 the script prints precision,
recall and F1 of "distance <= k" against "J >= 0.9" and "J >= 0.8", and in the same run the
figures of datasketch ``MinHashLSH`` (128 permutations, threshold = tau) both as raw LSH
candidates and with the MinHash estimate >= tau as a filter, and the number of permutation
tables the database's default plan needs for each k (its index size and write cost).
``--variants`` adds the best k of other settings.
"""

from __future__ import annotations

import argparse
import html
import math
import re
import sys
import time
from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from simdb.features import tokenize, word_shingles
from simdb.fingerprint import Fingerprinter
from simdb.plan import TablePlan

_ARTICLE = re.compile(r"<REUTERS[^>]*NEWID=\"(\d+)\"[^>]*>(.*?)</REUTERS>", re.S)
_TITLE = re.compile(r"<TITLE>(.*?)</TITLE>", re.S)
_BODY = re.compile(r"<BODY>(.*?)</BODY>", re.S)

THRESHOLDS = (0.9, 0.8)
CANDIDATE_THRESHOLD = 0.7
MAX_K = 8
PairKeys = npt.NDArray[np.int64]


def read_corpus(corpus: str | Path) -> list[str]:
    """The documents of a corpus directory: Reuters-21578 articles (title + body, SGML
    references and the Latin-1 encoding decoded) or ``*.txt`` files.  O(corpus size)."""
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
    texts = sorted(root.glob("*.txt"))
    if not texts:
        raise SystemExit(f"{corpus}: no reut2-*.sgm or *.txt files")
    return [path.read_text(encoding="utf-8", errors="replace") for path in texts]


def shingle_sets(documents: Sequence[str]) -> list[frozenset[str]]:
    """The word 3-shingle set of each document."""
    sets = []
    for document in documents:
        tokens = tokenize(document)
        sets.append(frozenset(word_shingles(tokens, 3)) if len(tokens) >= 3 else frozenset())
    return sets


def exact_similar_pairs(sets: Sequence[frozenset[str]], threshold: float) -> dict[tuple[int, int], float]:
    """Every pair (i < j) with Jaccard >= threshold, with its Jaccard, by prefix filtering.

    Tokens are ranked rarest first.  Documents are processed by increasing size; each probes
    the index with its prefix of ``|x| - ceil(threshold |x|) + 1`` ranks, among documents no
    smaller than ``threshold |x|`` (the size filter), then indexes the same prefix.  Each
    candidate is verified exactly.  Misses no pair: a pair with J >= t shares at least
    ``t |x|`` ranks, so it shares one of the first ``|x| - ceil(t |x|) + 1`` of x's ranks and
    likewise of y's, and those prefixes must meet."""
    frequency: dict[str, int] = defaultdict(int)
    for shingles in sets:
        for shingle in shingles:
            frequency[shingle] += 1
    rank = {shingle: position for position, shingle in enumerate(sorted(frequency, key=lambda s: (frequency[s], s)))}
    ranked = [sorted(rank[s] for s in shingles) for shingles in sets]
    as_sets = [set(r) for r in ranked]
    order = sorted((i for i in range(len(sets)) if ranked[i]), key=lambda i: len(ranked[i]))
    index: dict[int, list[int]] = defaultdict(list)
    found: dict[tuple[int, int], float] = {}
    for x in order:
        size = len(ranked[x])
        prefix = ranked[x][: size - math.ceil(threshold * size - 1e-9) + 1]
        minimum = threshold * size - 1e-9
        candidates = {y for token in prefix for y in index[token] if len(ranked[y]) >= minimum}
        for y in candidates:
            overlap = len(as_sets[x] & as_sets[y])
            jaccard = overlap / (size + len(ranked[y]) - overlap)
            if jaccard >= threshold:
                found[(min(x, y), max(x, y))] = jaccard
        for token in prefix:
            index[token].append(x)
    return found


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


def minhash_lsh_pairs(sets: Sequence[frozenset[str]], threshold: float, minhashes: list[Any]) -> tuple[PairKeys, PairKeys]:
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


def build_minhashes(sets: Sequence[frozenset[str]]) -> list[Any]:
    from datasketch import MinHash

    present = [i for i, s in enumerate(sets) if s]
    built = MinHash.bulk([[s.encode() for s in sets[i]] for i in present], num_perm=128)
    minhashes: list[Any] = [None] * len(sets)
    for i, minhash in zip(present, built):
        minhashes[i] = minhash
    return minhashes


VARIANTS: list[tuple[str, dict[str, Any], bool]] = [
    ("word-shingle n=3, tf, english stop words (default)", {}, False),
    ("word-shingle n=3, tf, no stop words", {"stopwords": None}, False),
    ("word-shingle n=3, binary, english stop words", {"weights": "binary"}, False),
    ("word-shingle n=3, binary, no stop words", {"weights": "binary", "stopwords": None}, False),
    ("word-shingle n=2, tf, english stop words", {"ngram": 2}, False),
    ("word-shingle n=4, tf, english stop words", {"ngram": 4}, False),
    ("word-shingle n=5, tf, english stop words", {"ngram": 5}, False),
    ("word-shingle n=4, tf, no stop words", {"ngram": 4, "stopwords": None}, False),
    ("word-shingle n=5, tf, no stop words", {"ngram": 5, "stopwords": None}, False),
    ("word-shingle n=3, tf, english stop words, IDF fitted on the corpus", {}, True),
    ("word, tf, no stop words", {"features": "word", "stopwords": None}, False),
    ("word, tf, english stop words, IDF fitted on the corpus", {"features": "word"}, True),
    ("char n=5, tf", {"features": "char", "stopwords": None}, False),
    ("char n=8, tf", {"features": "char", "ngram": 8, "stopwords": None}, False),
]


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("corpus")
    parser.add_argument("--variants", action="store_true", help="also report other settings (best k)")
    parser.add_argument("--limit", type=int, default=None, help="use only the first N documents")
    args = parser.parse_args(argv)

    started = time.perf_counter()
    documents = read_corpus(args.corpus)[: args.limit]
    all_sets = shingle_sets(documents)
    kept = [i for i, s in enumerate(all_sets) if s]
    documents = [documents[i] for i in kept]
    sets = [all_sets[i] for i in kept]
    n = len(documents)
    similar = exact_similar_pairs(sets, CANDIDATE_THRESHOLD)
    truth = {
        tau: np.array(sorted(i * n + j for (i, j), jaccard in similar.items() if jaccard >= tau - 1e-12), dtype=np.int64)
        for tau in THRESHOLDS
    }
    print(f"corpus: {args.corpus}: {n} documents with a word 3-shingle ({len(all_sets) - n} without)")
    print(f"exact pairs: J>=0.7: {len(similar)}, J>=0.8: {truth[0.8].size}, J>=0.9: {truth[0.9].size}"
          f" ({time.perf_counter() - started:.1f} s)")

    def evaluate(fingerprinter: Fingerprinter) -> dict[int, dict[float, tuple[float, float, float]]]:
        fingerprints = fingerprinter.fingerprint_many(documents)
        keys, distances = hamming_pairs(fingerprints, MAX_K)
        table: dict[int, dict[float, tuple[float, float, float]]] = {}
        for k in range(MAX_K + 1):
            predicted = np.unique(keys[distances <= k])
            table[k] = {tau: scores(predicted, truth[tau]) for tau in THRESHOLDS}
        return table

    default = Fingerprinter()
    default_table = evaluate(default)
    minhashes = build_minhashes(sets)
    lsh = {tau: minhash_lsh_pairs(sets, tau, minhashes) for tau in THRESHOLDS}

    print()
    print(f"Default settings: {default!r}")
    print()
    print("| method | J>=0.9 P | R | F1 | J>=0.8 P | R | F1 | index tables |")
    print("|---|---|---|---|---|---|---|---|")
    for k, row in default_table.items():
        cells = " | ".join(f"{p:.3f} | {r:.3f} | {f:.3f}" for p, r, f in (row[tau] for tau in THRESHOLDS))
        print(f"| SimHash k={k} | {cells} | {len(TablePlan.create(k).tables)} |")
    for label, which in (("MinHashLSH 128 perms, threshold=tau", 0), ("MinHashLSH + estimate >= tau", 1)):
        cells = " | ".join(f"{p:.3f} | {r:.3f} | {f:.3f}" for p, r, f in (scores(lsh[tau][which], truth[tau]) for tau in THRESHOLDS))
        print(f"| {label} | {cells} | |")

    if args.variants:
        print()
        print("| settings | best k (J>=0.9) | F1 | best k (J>=0.8) | F1 |")
        print("|---|---|---|---|---|")
        for label, settings, with_idf in VARIANTS:
            fingerprinter = Fingerprinter(**settings)
            if with_idf:
                fingerprinter = fingerprinter.fit_idf(documents)
            table = default_table if not settings and not with_idf else evaluate(fingerprinter)
            cells = []
            for tau in THRESHOLDS:
                best = max(range(MAX_K + 1), key=lambda k: table[k][tau][2])
                cells.append(f"{best} | {table[best][tau][2]:.3f}")
            print(f"| {label} | {' | '.join(cells)} |")
    print()
    print(f"total time {time.perf_counter() - started:.1f} s")
    sys.stdout.flush()


if __name__ == "__main__":
    main()
