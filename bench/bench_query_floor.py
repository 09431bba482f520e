"""How much of a single `Database.query()` is LMDB's own work (issue #16): the run seeks
that the query path makes for each query are recorded, then replayed bare through py-lmdb
(one read transaction per query, per seek a cursor, ``set_range``, ``prev`` and the block's
value), beside ``query()`` on the same queries, in one process, taking turns.

    python bench/bench_query_floor.py --db /tmp/db100m --n 100000000

The bare replay is a ceiling for any query path over this layout in Python: it does no
filter check, no bisect inside a block, no Hamming check and no record read.  The database
is built as ``bench_query_ab.py`` builds it (random fingerprints, k=3, 5 blocks, batches of
100,000 through ``add_many``) when ``--db`` does not exist yet.  Queries are stored
fingerprints with one bit flipped.
"""

from __future__ import annotations

import argparse
import os
import time
from typing import Any

import numpy as np
from bench_query_ab import near_queries, stored_fingerprints

import simdb
from simdb.tables import Tables

Seek = tuple[Any, bytes]  # (sub-database handle, key)


def recorded_seeks(db: simdb.Database, queries: list[int]) -> list[list[Seek]]:
    """The (sub-database, key) of every seek ``db.query`` makes for each query: one per
    part of a table that the prefix filters leave (the recent tree or a run), exact
    table-0 probes included."""
    seeks: list[list[Seek]] = []
    probe_table = Tables._probe_table

    def recording(self: Tables, txn: Any, parts: int, table: Any, *rest: Any) -> None:
        low = rest[1]
        remaining = parts
        while remaining:
            part = (remaining & -remaining).bit_length() - 1
            remaining &= remaining - 1
            name = self._recent[table.index] if not part else self._runs[table.index][part - 1]
            seeks[-1].append((self.handles.db(name), low.to_bytes(8, "big")))
        probe_table(self, txn, parts, table, *rest)

    Tables._probe_table = recording  # type: ignore[method-assign]
    try:
        for query in queries:
            seeks.append([])
            db.query(query)
    finally:
        Tables._probe_table = probe_table  # type: ignore[method-assign]
    return seeks


def replay(env: Any, seeks: list[list[Seek]]) -> float:
    """Seconds per query to make the recorded seeks bare, one read transaction per query."""
    start = time.perf_counter()
    for query_seeks in seeks:
        with env.begin() as txn:
            for handle, key in query_seeks:
                cursor = txn.cursor(handle)
                if cursor.set_range(key):
                    cursor.prev()
                cursor.value()
    return (time.perf_counter() - start) / len(seeks)


def queried(db: simdb.Database, queries: list[int]) -> float:
    """Seconds per query of ``db.query``."""
    start = time.perf_counter()
    for query in queries:
        db.query(query)
    return (time.perf_counter() - start) / len(queries)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--db", required=True, help="database path; built when missing")
    parser.add_argument("--n", type=int, default=10_000_000, help="fingerprints, when building")
    parser.add_argument("--queries", type=int, default=20_000, help="queries timed")
    parser.add_argument("--warm", type=int, default=10_000, help="queries run first, untimed")
    parser.add_argument("--rounds", type=int, default=3, help="turns of each")
    args = parser.parse_args()
    rng = np.random.default_rng(13)
    here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    stored = stored_fingerprints(here, args.db, args.n, rng)
    queries = near_queries(stored, args.warm + args.queries, rng).tolist()
    with simdb.open(args.db) as db:
        queried(db, queries[: args.warm])
        timed = queries[args.warm :]
        seeks = recorded_seeks(db, timed)
        env = db._storage.env
        print(
            f"# {len(stored):,} random fingerprints, k=3; {os.cpu_count()} cores; {len(timed):,} queries "
            f"after {args.warm:,}; {np.mean([len(s) for s in seeks]):.1f} seeks per query"
        )
        print("| round | bare seeks | ceiling | query() | q/s | bare share |")
        print("|---|---|---|---|---|---|")
        for round_number in range(args.rounds):
            bare, full = replay(env, seeks), queried(db, timed)
            print(
                f"| {round_number + 1} | {bare * 1e6:.1f} us | {1 / bare:,.0f} q/s | {full * 1e6:.1f} us "
                f"| {1 / full:,.0f} | {bare / full:.0%} |",
                flush=True,
            )


if __name__ == "__main__":
    main()
