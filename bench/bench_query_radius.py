"""Single queries past the index's k: the index's own radius beside a larger one answered by
probes of nearby prefixes and by a scan of every stored fingerprint, side by side.

A database of ``--n`` random fingerprints (default index k, or ``--k``) is built once; then
for each radius in ``--radii``, ``--queries`` queries 2 bits from stored fingerprints run
through ``Queries._beyond_index_k``'s two ways (forced with its cost constants) and through
the plain index probe where the radius allows, taking turns for ``--rounds`` rounds.  Every
way must find the same candidates.

    python bench/bench_query_radius.py --n 1000000 --radii 5,7,11
"""

from __future__ import annotations

import argparse
import os
import sys
import time

import numpy as np
from machine import describe

import simdb
import simdb.queries


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=1_000_000)
    parser.add_argument("--k", type=int, default=None, help="the index's k (default: simdb's)")
    parser.add_argument("--radii", default="5,7,11")
    parser.add_argument("--queries", type=int, default=20)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--db", default="/tmp/simdb-bench-radius", help="where the database is built (reused)")
    args = parser.parse_args()
    rng = np.random.default_rng(5)
    stored = rng.integers(0, 2**64, args.n, dtype=np.uint64, endpoint=False)
    if not os.path.exists(args.db):
        with simdb.open(args.db, k=args.k) as db:
            for start in range(0, args.n, 100_000):
                db.add_many((f"d{i}", int(stored[i])) for i in range(start, min(args.n, start + 100_000)))
    queries = [int(value) ^ 0b101 << 20 for value in stored[: args.queries]]
    print(f"# {describe()}; {args.n:,} random fingerprints; {args.queries} queries 2 bits from stored ones")
    with simdb.open(args.db, readonly=True) as db:
        plan = db.plan
        print(f"# plan: k={plan.k}, {plan.blocks} blocks, {len(plan.tables)} tables")
        print("| radius | way | range scans | ms per query (each round) |")
        print("|---|---|---|---|")
        engine = db._queries
        ways = {
            "probes": {"_COMPARE_NS": 1e12},
            "scan": {"_RANGE_NS": 1e12},
        }
        for radius in [int(r) for r in args.radii.split(",")]:
            times: dict[str, list[float]] = {}
            answers: dict[str, list[dict[int, int]]] = {}
            chosen = ways if radius > plan.k else {"index probe": {}}  # within the index's k, no choice
            for _ in range(args.rounds):
                for way, costs in chosen.items():
                    saved = {name: getattr(simdb.queries, name) for name in costs}
                    for name, value in costs.items():
                        setattr(simdb.queries, name, value)
                    try:
                        with db._storage.read() as txn:
                            started = time.perf_counter()
                            found = [
                                engine.find_many(txn, np.array([query], dtype=np.uint64), radius)[0]
                                for query in queries
                            ]
                            times.setdefault(way, []).append((time.perf_counter() - started) / len(queries))
                    finally:
                        for name, value in saved.items():
                            setattr(simdb.queries, name, value)
                    answers[way] = found
            if len({repr(found) for found in answers.values()}) != 1:
                sys.exit(f"radius {radius}: the ways disagree")
            for way, measured in times.items():
                scans = "-" if way == "scan" else plan.probes_for(radius)
                shown = " / ".join(f"{seconds * 1000:.1f}" for seconds in measured)
                print(f"| {radius} | {way} | {scans} | {shown} |")


if __name__ == "__main__":
    main()
