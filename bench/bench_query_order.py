"""Is a query's first match the most similar document?  simdb against datasketch.

    python bench/bench_query_order.py [--families 50] [--variants 10] [--seeds 0,1]

Each family is a 300-word text of invented words and ``--variants`` copies of it with 0 to
8 words replaced; each query is the family's text with 4 other words replaced.  The best
answer is the stored document of highest exact Jaccard similarity of word 3-shingles
(``simdb.jaccard``).  For each seed the table counts the queries with no answer, those
whose first answer is not a best one, and the Jaccard given up on average when it is not:

- simdb ``query(text=q, limit=1)`` (the index's radius, no threshold), and with
  ``threshold=0.8``;
- datasketch: MinHashLSH (threshold 0.5, 128 permutations) for candidates, ranked by their
  MinHash(128) estimate, the usual way to rank with it.

Families are far apart (unrelated invented words), so a query's candidates are its own
family's variants, a bit or two apart, where the order is decided.
"""

from __future__ import annotations

import argparse
import random
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from machine import describe
from quality import build_minhashes, shingle_sets

import simdb


def corpus(seed: int, families: int, variants: int) -> tuple[list[tuple[str, str]], list[str]]:
    """(key, text) of every stored variant, and one query text per family."""
    rng = random.Random(seed)
    vocabulary = [f"w{number}" for number in range(20_000)]

    def edited(words: list[str], edits: int) -> str:
        copy = list(words)
        for position in rng.sample(range(len(copy)), edits):
            copy[position] = rng.choice(vocabulary)
        return " ".join(copy)

    stored, queries = [], []
    for family in range(families):
        base = [rng.choice(vocabulary) for _ in range(300)]
        stored += [(f"f{family}-v{variant}", edited(base, rng.randint(0, 8))) for variant in range(variants)]
        queries.append(edited(base, 4))
    return stored, queries


def misses(first: list[str | None], queries: list[str], texts: dict[str, str]) -> tuple[int, int, float]:
    """How many queries got no answer, how many got a first answer that is not a best one,
    and the mean exact Jaccard that those gave up."""
    unanswered, wrong, lost = 0, 0, []
    for family, (query, key) in enumerate(zip(queries, first)):
        if key is None:
            unanswered += 1
            continue
        members = [name for name in texts if name.startswith(f"f{family}-")]
        best = max(simdb.jaccard(query, texts[name]) for name in members)
        got = simdb.jaccard(query, texts[key])
        if got < best:
            wrong += 1
            lost.append(best - got)
    return unanswered, wrong, sum(lost) / len(lost) if lost else 0.0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--families", type=int, default=50)
    parser.add_argument("--variants", type=int, default=10)
    parser.add_argument("--seeds", default="0,1")
    options = parser.parse_args()
    from datasketch import MinHashLSH

    print(f"# {describe()}; {options.families} families of {options.variants} variants of 300 words")
    print("| seed | engine | no answer | first answer not a best one | mean Jaccard lost when not |")
    print("|---|---|---|---|---|")
    for seed in (int(part) for part in options.seeds.split(",")):
        stored, queries = corpus(seed, options.families, options.variants)
        texts = dict(stored)
        with tempfile.TemporaryDirectory() as scratch, simdb.open(Path(scratch) / "db") as database:
            database.add_texts(stored)
            runs = {
                "simdb query(limit=1)": [database.query(text=query, limit=1) for query in queries],
                "simdb query(threshold=0.8, limit=1)": [
                    database.query(text=query, threshold=0.8, limit=1) for query in queries
                ],
            }
            firsts = {name: [found[0].key if found else None for found in runs[name]] for name in runs}
        keys = [key for key, _ in stored]
        minhashes = build_minhashes(shingle_sets([text for _, text in stored] + queries), seed=seed + 1)
        index = MinHashLSH(threshold=0.5, num_perm=128)
        for key, minhash in zip(keys, minhashes):
            index.insert(key, minhash)
        by_key = dict(zip(keys, minhashes))
        ranked = []
        for query_minhash in minhashes[len(keys) :]:
            candidates = index.query(query_minhash)
            ranked.append(max(candidates, key=lambda key: (query_minhash.jaccard(by_key[key]), key), default=None))
        firsts["datasketch MinHashLSH(0.5) + MinHash(128) ranking"] = ranked
        for name, first in firsts.items():
            unanswered, wrong, lost = misses(first, queries, texts)
            print(f"| {seed} | {name} | {unanswered} | {wrong} of {options.families - unanswered} | {lost:.3f} |")


if __name__ == "__main__":
    main()
