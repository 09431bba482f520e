"""Choosing the default index k: query-vs-pairs recall at a threshold, and bytes per document.

For each index k, the corpus is added from text (default settings: minhash with sketches),
``pairs(threshold=t)`` is taken as the truth (it searches in memory at the candidate radius,
not limited by the index), and every document is queried with ``query_many(texts=...,
threshold=t, k=min(index k, candidate_distance))``: the index's own radius, as ``add
--if-new`` checks (a query without ``k`` goes past it and finds every pair).  Recall is the
share of the pairs that some query finds.  Bytes per document are measured after ``compact()``.

    python bench/threshold_recall.py messy:20000 /work/shared/corpora/reuters21578 --ks 3 4 5
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from messy_corpus import messy_posts
from quality import read_corpus

import simdb


def load(corpus: str, limit: int | None) -> list[str]:
    """Texts of ``messy:N`` (bench/messy_corpus.py, seed 0) or a corpus bench/quality.py reads."""
    if corpus.startswith("messy:"):
        return messy_posts(int(corpus.split(":", 1)[1]))
    texts = read_corpus(corpus)
    return texts[:limit] if limit else texts


def measure(texts: list[str], k: int, blocks: int | None, threshold: float) -> dict[str, float]:
    """Recall of queries against pairs() at ``threshold`` and bytes/doc, for index ``k``."""
    directory = Path(tempfile.mkdtemp(prefix="simdb-threshold-"))
    try:
        with simdb.open(directory / "db", k=k, blocks=blocks) as db:
            db.add_texts((f"d{i}", text) for i, text in enumerate(texts))
            truth = {frozenset(pair[:2]) for pair in db.pairs(threshold=threshold)}
            found: set[frozenset[str]] = set()
            radius = min(db.k, simdb.candidate_distance(threshold, "minhash", verified=True))
            for i, matches in enumerate(db.query_many(texts=texts, threshold=threshold, k=radius)):
                found.update(frozenset((f"d{i}", match.key)) for match in matches if match.key != f"d{i}")
            db.compact()
            size = db.stats()["size_bytes"]
        recall = len(truth & found) / len(truth) if truth else 1.0
        return {
            "pairs": len(truth),
            "recall": recall,
            "bytes_per_doc": size / len(texts),
            "tables": len(db.plan.tables),
        }
    finally:
        shutil.rmtree(directory)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("corpora", nargs="+")
    parser.add_argument("--ks", nargs="+", default=["3", "4", "5"], help="index k, or k:blocks")
    parser.add_argument("--threshold", type=float, default=simdb.DEFAULT_THRESHOLD)
    parser.add_argument("--limit", type=int, default=None)
    args = parser.parse_args(argv)
    print("| corpus | docs | index k | blocks | tables | pairs >= t | query recall | bytes/doc after compact |")
    print("|---|---|---|---|---|---|---|---|")
    for corpus in args.corpora:
        texts = load(corpus, args.limit)
        for spec in args.ks:
            k, _, blocks_text = spec.partition(":")
            blocks = int(blocks_text) if blocks_text else simdb.default_blocks(int(k))
            started = time.perf_counter()
            row = measure(texts, int(k), blocks, args.threshold)
            name = Path(corpus).name if not corpus.startswith("messy:") else corpus
            print(
                f"| {name} | {len(texts):,} | {k} | {blocks} | {row['tables']} | "
                f"{row['pairs']:,} | {row['recall']:.3f} | "
                f"{row['bytes_per_doc']:.0f} |  ({time.perf_counter() - started:.0f} s)",
                flush=True,
            )


if __name__ == "__main__":
    main()
