"""Database.pairs() and Database.clusters() on a 1M-document database: the time to read the
fingerprints (one scan of the first table), and the time beyond it.

    python bench/bench_db_pairs.py [--n 1000000] [--kind random|clustered]
"""

from __future__ import annotations

import argparse
import os
import platform
import shutil
import tempfile
import time

import numpy as np

import simdb
from simdb.allpairs import iter_pair_blocks


def clustered(n: int, rng: np.random.Generator) -> np.ndarray:
    """n / 10 random bases, each followed by 9 variants 0-3 bits away."""
    bases = rng.integers(0, 2**64, n // 10, dtype=np.uint64)
    out = np.repeat(bases, 10)
    for position in range(len(out)):
        if position % 10:
            for bit in rng.choice(64, size=int(rng.integers(0, 4)), replace=False):
                out[position] ^= np.uint64(1) << np.uint64(bit)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--n", type=int, default=1_000_000)
    parser.add_argument("--kind", choices=["random", "clustered"], default="random")
    args = parser.parse_args()
    rng = np.random.default_rng(5)
    fingerprints = rng.integers(0, 2**64, args.n, dtype=np.uint64) if args.kind == "random" else clustered(args.n, rng)
    directory = tempfile.mkdtemp(prefix="simdb-bench-")
    try:
        with simdb.open(os.path.join(directory, "db")) as db:
            db.add_many(((f"doc-{i}", fp) for i, fp in enumerate(fingerprints.tolist())), batch_size=args.n)
            start = time.perf_counter()
            _, stored = db.fingerprint_arrays()
            read = time.perf_counter() - start
            start = time.perf_counter()
            raw_pairs = sum(len(block[0]) for block in iter_pair_blocks(stored, db.plan))
            search = time.perf_counter() - start
            start = time.perf_counter()
            pairs = sum(1 for _ in db.pairs())
            total_pairs = time.perf_counter() - start
            start = time.perf_counter()
            clusters = sum(1 for _ in db.clusters())
            total_clusters = time.perf_counter() - start
    finally:
        shutil.rmtree(directory, ignore_errors=True)
    print(
        f"# {args.n:,} {args.kind} fingerprints in a database, k=3, default plan; "
        f"{os.cpu_count()} cores, Python {platform.python_version()}"
    )
    print("| step | seconds |")
    print("|---|---|")
    print(f"| read the fingerprints (`fingerprint_arrays`) | {read:.2f} |")
    print(f"| the all-pairs search alone, on those arrays ({raw_pairs:,} pairs) | {search:.2f} |")
    print(f"| `db.pairs()` in full, keys included ({pairs:,} pairs) | {total_pairs:.2f} |")
    print(f"| `db.pairs()` beyond reading the fingerprints | {total_pairs - read:.2f} |")
    print(f"| `db.clusters()` in full ({clusters:,} clusters) | {total_clusters:.2f} |")


if __name__ == "__main__":
    main()
