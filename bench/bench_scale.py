"""Scale benchmark of the table layer (issue #16): today's layout (one B-tree of 16-byte keys per
table, simdb/btree_tables.py, as Database writes it) against simdb/tables.py (recent tree + levels of
compressed blocks), side by side in one run on bare LMDB environments.  Only the tables are
measured (no document records or key index), so the figures isolate the layer.

    python bench/bench_scale.py --n 1000000            # both layouts
    python bench/bench_scale.py --n 10000000 --layout lsm
    python bench/bench_scale.py --n 100000000 --layout lsm --queries 20000   # long

Per layout: bulk load through batches of --batch (default 100,000) to N; then adds into it of
10,000-doc and 100-doc batches (each a committed, synced transaction, merges inline); table
bytes per entry (pages in use / entries); single probes per second (warm), probe_many of
--queries queries; the load average beside the timings.
"""

from __future__ import annotations

import argparse
import os
import shutil
import tempfile
import time
from collections.abc import Callable
from typing import Any

import lmdb
import numpy as np

from simdb.btree_tables import BTreeTables
from simdb.plan import TablePlan
from simdb.tables import BareHandles, Policy, Tables

MAP = 1 << 40


class BTreeLayout:
    """Today's layout: simdb.btree_tables, the tables layer Database writes and probes."""

    def __init__(self, env: lmdb.Environment, plan: TablePlan) -> None:
        self.env = env
        self.handles = BareHandles(env)
        self.tables = BTreeTables(plan, self.handles)
        with env.begin(write=True) as txn:
            self.tables.create(txn)

    def put(self, txn: lmdb.Transaction[bytes], ids: np.ndarray, fps: np.ndarray) -> None:
        self.tables.put_many(txn, ids, fps)

    def probe(self, txn: lmdb.Transaction[bytes], fingerprint: int, k: int) -> dict[int, int]:
        return self.tables.probe(txn, fingerprint, k)

    def probe_many(self, txn: lmdb.Transaction[bytes], queries: np.ndarray, k: int) -> list[dict[int, int]]:
        return self.tables.probe_many(txn, queries, k)

    def table_bytes(self, txn: lmdb.Transaction[bytes]) -> int:
        return sum(_pages(txn.stat(self.handles.db(name))) for name in self.tables.names)


class LsmLayout:
    def __init__(self, env: lmdb.Environment, plan: TablePlan, policy: Policy | None = None) -> None:
        self.env = env
        self.handles = BareHandles(env)
        self.tables = Tables(plan, self.handles, policy or Policy())
        with env.begin(write=True) as txn:
            self.tables.create(txn)

    def put(self, txn: lmdb.Transaction[bytes], ids: np.ndarray, fps: np.ndarray) -> None:
        self.tables.put_many(txn, ids, fps)
        # Inline merging, bounded per commit; enough to keep up with what was added.
        self.tables.merge(txn, budget=max(1 << 20, 64 * len(ids) * len(self.tables.plan.tables)))

    def probe(self, txn: lmdb.Transaction[bytes], fingerprint: int, k: int) -> dict[int, int]:
        return self.tables.probe(txn, fingerprint, k)

    def probe_many(self, txn: lmdb.Transaction[bytes], queries: np.ndarray, k: int) -> list[dict[int, int]]:
        return self.tables.probe_many(txn, queries, k)

    def table_bytes(self, txn: lmdb.Transaction[bytes]) -> int:
        return sum(_pages(txn.stat(self.handles.db(name))) for name in self.tables.names)


def _pages(stat: Any) -> int:
    return int((stat["branch_pages"] + stat["leaf_pages"] + stat["overflow_pages"]) * stat["psize"])


def _timed(work: Callable[[], Any]) -> float:
    start = time.perf_counter()
    work()
    return time.perf_counter() - start


def run(layout: str, n: int, batch: int, queries: int, rounds: int, k: int, policy: Policy) -> dict[str, Any]:
    plan = TablePlan.create(k)
    directory = tempfile.mkdtemp(prefix=f"bench-scale-{layout}-", dir=os.environ.get("BENCH_DIR"))
    env = lmdb.open(directory, max_dbs=256, map_size=MAP, readahead=False)
    store = BTreeLayout(env, plan) if layout == "btree" else LsmLayout(env, plan, policy)
    rng = np.random.default_rng(7)
    fingerprints = rng.integers(0, 1 << 64, n + rounds * 10_100 * 3, dtype=np.uint64, endpoint=False)
    next_id = 0

    def add(count: int) -> int:
        nonlocal next_id
        ids = np.arange(next_id, next_id + count, dtype=np.uint64)
        with env.begin(write=True) as txn:
            store.put(txn, ids, fingerprints[next_id : next_id + count])
        next_id += count
        return count

    row: dict[str, Any] = {"layout": layout if layout == "btree" else f"lsm {policy.base}x{policy.ratio}", "n": n}
    load = _timed(lambda: [add(min(batch, n - at)) for at in range(0, n, batch)])
    row["bulk docs/s"] = n / load
    row["add 10k docs/s"] = rounds * 10_000 / _timed(lambda: [add(10_000) for _ in range(rounds)])
    row["add 100 docs/s"] = rounds * 10 * 100 / _timed(lambda: [add(100) for _ in range(rounds * 10)])
    with env.begin() as txn:
        row["bytes/entry"] = store.table_bytes(txn) / (next_id * len(plan.tables))
    row["file bytes/doc"] = os.path.getsize(os.path.join(directory, "data.mdb")) / next_id
    flips = rng.integers(0, 64, (queries, k), dtype=np.uint64)
    chosen = fingerprints[rng.integers(0, next_id, queries)]
    for column in range(k):
        chosen = chosen ^ (np.uint64(1) << flips[:, column])
    with env.begin() as txn:
        store.probe_many(txn, chosen[:1000], k)  # warm
        matches = sum(len(store.probe(txn, q, k)) for q in chosen[:1000].tolist())
        row["probe q/s"] = queries / _timed(lambda: [store.probe(txn, q, k) for q in chosen.tolist()])
        row["probe_many q/s"] = queries / _timed(lambda: store.probe_many(txn, chosen, k))
    row["matches/q"] = matches / 1000
    row["load avg"] = os.getloadavg()[0]
    env.close()
    shutil.rmtree(directory)
    return row


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--n", type=int, default=1_000_000)
    parser.add_argument("--layout", choices=["btree", "lsm", "both"], default="both")
    parser.add_argument("--batch", type=int, default=100_000)
    parser.add_argument("--queries", type=int, default=20_000)
    parser.add_argument("--rounds", type=int, default=20, help="10,000-doc batches (and 10x as many 100-doc ones)")
    parser.add_argument("-k", type=int, default=3)
    parser.add_argument(
        "--base", type=int, nargs="+", default=[Policy.base], help="recent entries per table (one run each)"
    )
    parser.add_argument("--ratio", type=int, default=Policy.ratio, help="level size ratio")
    args = parser.parse_args()
    runs = ([("btree", Policy())] if args.layout != "lsm" else []) + (
        [("lsm", Policy(base=base, ratio=args.ratio)) for base in args.base] if args.layout != "btree" else []
    )
    columns = [
        "layout",
        "n",
        "bulk docs/s",
        "add 10k docs/s",
        "add 100 docs/s",
        "bytes/entry",
        "file bytes/doc",
        "probe q/s",
        "probe_many q/s",
        "matches/q",
        "load avg",
    ]
    print(f"# {args.n:,} random fingerprints, k={args.k}, batches of {args.batch:,}; {os.cpu_count()} cores")
    print("| " + " | ".join(columns) + " |")
    print("|" + "---|" * len(columns))
    for layout, policy in runs:
        row = run(layout, args.n, args.batch, args.queries, args.rounds, args.k, policy)
        print(
            "| "
            + " | ".join(
                f"{row[c]:,.1f}"
                if isinstance(row[c], float)
                else f"{row[c]:,}"
                if isinstance(row[c], int)
                else str(row[c])
                for c in columns
            )
            + " |",
            flush=True,
        )


if __name__ == "__main__":
    main()
