"""Single `Database.query()` throughput of two or more source trees of simdb on one database,
side by side (issue #16): each tree answers the same queries in its own fresh process, the
trees taking turns, so a change to the query path is measured as a ratio on one machine.

    git worktree add /tmp/simdb-before <commit>
    python bench/bench_query_ab.py --db /tmp/db100m --n 100000000 --trees /tmp/simdb-before .

The database (random fingerprints, k=3, 5 blocks, batches of 100,000 through ``add_many``) is
built by the first tree when ``--db`` does not exist yet, and kept.  Queries are stored
fingerprints with one bit flipped; each process times three phases of ``--queries`` queries
each: its first queries (filter pages and table pages read as they are needed), then two
more, and prints q/s for each.

``--workload lookups`` times, instead, the calls that ask about a few documents at a time:
``get`` of stored keys, ``in`` of keys never stored, and ``query_many`` of 16 queries a call
(rates per key or query, ``--queries`` of each).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time

import numpy as np

BATCH = 100_000

_WORKER = """
import json, sys, time
import numpy as np
sys.path.insert(0, sys.argv[1])
import simdb
assert simdb.__file__.startswith(sys.argv[1]), simdb.__file__
queries = np.load(sys.argv[3])
per_phase = len(queries) // 3
rates = []


def rate(calls, count):
    start = time.perf_counter()
    calls()
    return count / (time.perf_counter() - start)


with simdb.open(sys.argv[2]) as db:
    if sys.argv[4] == "query":
        for phase in range(3):
            chunk = queries[phase * per_phase : (phase + 1) * per_phase].tolist()
            rates.append(rate(lambda: [db.query(query) for query in chunk], len(chunk)))
    else:  # lookups: stored keys are d0 .. d(n-1), as build() names them
        rng = np.random.default_rng(int(queries[0] & np.uint64(0xFFFF)))
        stored = [f"d{i}" for i in rng.integers(0, len(db), per_phase).tolist()]
        absent = [f"absent-{i}" for i in range(per_phase)]
        batches = [queries[at : at + 16] for at in range(0, per_phase, 16)]
        rates.append(rate(lambda: [db.get(key) for key in stored], len(stored)))
        rates.append(rate(lambda: [key in db for key in absent], len(absent)))
        rates.append(rate(lambda: [db.query_many(batch) for batch in batches], per_phase))
print(json.dumps(rates))
"""


def build(tree: str, path: str, fingerprints: np.ndarray) -> None:
    """Add ``fingerprints`` to a new database at ``path`` with the code of ``tree``."""
    script = (
        "import sys\nimport numpy as np\nsys.path.insert(0, sys.argv[1])\nimport simdb\n"
        "values = np.load(sys.argv[3])\n"
        "with simdb.open(sys.argv[2], k=3, blocks=5) as db:\n"
        f"    for at in range(0, len(values), {BATCH}):\n"
        f"        chunk = values[at : at + {BATCH}].tolist()\n"
        f"        db.add_many([(f'd{{at + i}}', v) for i, v in enumerate(chunk)], batch_size={BATCH})\n"
    )
    saved = path + ".npy"
    np.save(saved, fingerprints)
    subprocess.run([sys.executable, "-c", script, tree, path, saved], check=True)


def stored_fingerprints(tree: str, path: str, n: int, rng: np.random.Generator) -> np.ndarray:
    """The fingerprints of the database at ``path``, which is built first with the code of
    ``tree`` from ``n`` random fingerprints when it does not exist yet."""
    if not os.path.exists(path):
        start = time.perf_counter()
        build(tree, path, rng.integers(0, 1 << 64, n, dtype=np.uint64, endpoint=False))
        print(f"# built {n:,} in {time.perf_counter() - start:.0f} s with {tree}")
    return np.load(path + ".npy", mmap_mode="r")


def near_queries(stored: np.ndarray, count: int, rng: np.random.Generator) -> np.ndarray:
    """``count`` stored fingerprints, picked at random, each with one bit flipped."""
    picked = rng.integers(0, len(stored), count)
    flips = np.uint64(1) << rng.integers(0, 64, len(picked)).astype(np.uint64)
    return stored[picked] ^ flips


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--db", required=True, help="database path; built when missing")
    parser.add_argument("--n", type=int, default=10_000_000, help="fingerprints, when building")
    parser.add_argument("--trees", nargs="+", required=True, help="source trees (each holds simdb/)")
    parser.add_argument("--queries", type=int, default=10_000, help="queries per phase")
    parser.add_argument("--rounds", type=int, default=2, help="turns per tree")
    parser.add_argument("--workload", choices=("query", "lookups"), default="query", help="what to time")
    args = parser.parse_args()
    trees = [os.path.abspath(tree) for tree in args.trees]
    rng = np.random.default_rng(11)
    stored = stored_fingerprints(trees[0], args.db, args.n, rng)
    if args.workload == "query":
        print(f"# {len(stored):,} random fingerprints, k=3; {os.cpu_count()} cores; q/s per phase of {args.queries:,}")
        print("| tree | round | first | second | third |")
    else:
        print(f"# {len(stored):,} random fingerprints, k=3; {os.cpu_count()} cores; {args.queries:,} of each, per s")
        print("| tree | round | get (stored keys) | `in` (absent keys) | query_many of 16, q/s |")
    print("|---|---|---|---|---|")
    for round_number in range(args.rounds):
        queries_path = args.db + ".queries.npy"
        np.save(queries_path, near_queries(stored, 3 * args.queries, rng))
        for tree in trees:
            output = subprocess.run(
                [sys.executable, "-c", _WORKER, tree, args.db, queries_path, args.workload],
                check=True,
                capture_output=True,
                text=True,
            ).stdout
            rates = json.loads(output)
            print(f"| {tree} | {round_number + 1} | " + " | ".join(f"{rate:,.0f}" for rate in rates) + " |", flush=True)


if __name__ == "__main__":
    main()
