"""A long-running mixed workload in one process (run as ``python tests/soak_worker.py PATH OPS``).

Keeps about LIVE documents alive under steady churn: each round adds a batch, removes the
oldest batch, and queries near-duplicates of live documents; every ``COMPACT_EVERY``
operations it compacts.  Prints ``RSS <ops> <bytes>`` lines, and the file size before
(``GROWN``) and after (``FILE``) each compaction.
"""

from __future__ import annotations

import os
import random
import sys

import psutil

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import simdb

BATCH = 1_000
LIVE = 20_000
COMPACT_EVERY = 200_000


def main(path: str, total_ops: int) -> None:
    rng = random.Random(7)
    process = psutil.Process()
    ops = 0
    round_ = 0
    with simdb.open(path, map_size=1 << 20) as db:
        while ops < total_ops:
            batch = [(f"r{round_}-{i}", rng.getrandbits(64), {"n": i}) for i in range(BATCH)]
            db.add_many(batch)
            ops += BATCH
            old = round_ - LIVE // BATCH
            if old >= 0:
                ops += db.remove_many(f"r{old}-{i}" for i in range(BATCH))
            queries = [fp ^ (1 << rng.randrange(64)) for _, fp, _ in batch]
            results = db.query_many(queries)
            assert all(any(m.key == key for m in found) for (key, _, _), found in zip(batch, results))
            ops += len(queries)
            round_ += 1
            if ops // COMPACT_EVERY != (ops - 3 * BATCH) // COMPACT_EVERY:
                print(f"GROWN {ops} {db.stats()['size_bytes']}", flush=True)
                db.compact()
                print(f"FILE {ops} {db.stats()['size_bytes']}", flush=True)
            if round_ % 20 == 0:
                print(f"RSS {ops} {process.memory_info().rss}", flush=True)
        assert db.check()
    print(f"DONE {ops}", flush=True)


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]))
