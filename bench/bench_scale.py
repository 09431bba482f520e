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
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from typing import Any

import lmdb
import numpy as np
from machine import describe

from simdb.btree_tables import BTreeTables
from simdb.plan import TablePlan
from simdb.storage import BareHandles
from simdb.tables import Policy, TableLayer, Tables

MAP = 1 << 40


def bench_dir() -> str | None:
    """$BENCH_DIR, made if missing (the databases go there), else None: the system's
    temporary directory."""
    directory = os.environ.get("BENCH_DIR")
    if directory:
        os.makedirs(directory, exist_ok=True)
    return directory or None


def _timed(work: Callable[[], Any]) -> float:
    start = time.perf_counter()
    work()
    return time.perf_counter() - start


def run(layout: str, n: int, batch: int, queries: int, rounds: int, k: int, policy: Policy) -> dict[str, Any]:
    plan = TablePlan.create(k)
    directory = tempfile.mkdtemp(prefix=f"bench-scale-{layout}-", dir=bench_dir())
    # Both layers have one interface; Tables.put_many merges inline, within its merge budget.
    env = lmdb.open(directory, max_dbs=4096, map_size=MAP, readahead=False)  # room for any layer's sub-databases
    handles = BareHandles(env)
    store: TableLayer = BTreeTables(plan, handles) if layout == "btree" else Tables(plan, handles, policy)
    with env.begin(write=True) as txn:
        store.create(txn)
    rng = np.random.default_rng(7)
    fingerprints = rng.integers(0, 1 << 64, n + rounds * 10_100 * 3, dtype=np.uint64, endpoint=False)
    next_id = 0

    def add(count: int) -> int:
        nonlocal next_id
        ids = np.arange(next_id, next_id + count, dtype=np.uint64)
        with env.begin(write=True) as txn:
            store.put_many(txn, ids, fingerprints[next_id : next_id + count])
        next_id += count
        return count

    row: dict[str, Any] = {"layout": layout if layout == "btree" else f"lsm {policy.base}x{policy.ratio}", "n": n}
    load = _timed(lambda: [add(min(batch, n - at)) for at in range(0, n, batch)])
    row["bulk docs/s"] = n / load
    row["add 10k docs/s"] = rounds * 10_000 / _timed(lambda: [add(10_000) for _ in range(rounds)])
    row["add 100 docs/s"] = rounds * 10 * 100 / _timed(lambda: [add(100) for _ in range(rounds * 10)])
    with env.begin() as txn:
        table_bytes = sum(store.page_counts(txn)) * env.stat()["psize"]
        row["bytes/entry"] = table_bytes / (next_id * len(plan.tables))
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


def faiss_query_many_rate(stored: np.ndarray, queries: np.ndarray, k: int) -> float | None:
    """FAISS IndexBinaryMultiHash (nhash=k+1, exact like simdb) in memory, one thread:
    range_search of ``queries`` per second; None without faiss."""
    try:
        import faiss
    except ImportError:
        return None
    faiss.omp_set_num_threads(1)
    index = faiss.IndexBinaryMultiHash(64, k + 1, 64 // (k + 1))
    index.nflip = 0
    index.add(np.ascontiguousarray(stored).view(np.uint8).reshape(-1, 8))
    codes = np.ascontiguousarray(queries).view(np.uint8).reshape(-1, 8)
    return len(queries) / _timed(lambda: index.range_search(codes, k + 1))  # keeps distance < radius


class _AnonymousPeak:
    """Samples this process's RssAnon (Linux) on a thread while in use; ``gib`` the peak."""

    def __init__(self) -> None:
        self.gib = 0.0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)

    def _sample(self) -> None:
        while not self._stop.wait(0.05):
            with open("/proc/self/status") as status:
                for line in status:
                    if line.startswith("RssAnon:"):
                        self.gib = max(self.gib, int(line.split()[1]) / (1 << 20))

    def __enter__(self) -> _AnonymousPeak:
        self._thread.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._stop.set()
        self._thread.join()


def fresh_pairs_peak(path: str, k: int) -> float:
    """The most anonymous memory, in GiB, of a new process that opens the database at
    ``path`` and runs pairs(k) through, as ``simdb pairs`` does: unlike the benchmark
    process, it holds no fingerprints of its own and no caches from adds and queries."""
    script = (
        "import sys, simdb, bench_scale\n"
        "with bench_scale._AnonymousPeak() as peak, simdb.open(sys.argv[1]) as db:\n"
        "    sum(1 for _ in db.pairs(k=int(sys.argv[2])))\n"
        "print(peak.gib)"
    )
    here = os.path.dirname(os.path.abspath(__file__))  # -c puts the working directory on sys.path
    completed = subprocess.run(
        [sys.executable, "-c", script, path, str(k)], check=True, capture_output=True, text=True, cwd=here
    )
    return float(completed.stdout)


def mixed_workload(db: Any, fingerprints: np.ndarray, first_new: int, seconds: float, k: int) -> list[dict[str, Any]]:
    """A steady mix for ``seconds``, in cycles of 100 adds of new documents and 10 removals
    of stored ones (through one db.writer(), so they commit in its batches) and 20 single
    queries; per minute, the operations of each kind per second.  The removed keys are
    drawn from those stored before the run."""
    rng = np.random.default_rng(11)
    rows: list[dict[str, Any]] = []
    next_new = first_new
    started = time.perf_counter()
    with db.writer() as writer:
        while time.perf_counter() - started < seconds:
            minute_start = time.perf_counter()
            cycles = 0
            while time.perf_counter() - minute_start < min(60.0, seconds - (minute_start - started)):
                for index in range(next_new, next_new + 100):
                    writer.add(f"d{index}", int(fingerprints[index]))
                next_new += 100
                for index in rng.integers(0, first_new, 10).tolist():
                    writer.remove(f"d{index}")
                for query in fingerprints[rng.integers(0, first_new, 20)].tolist():
                    db.query(query, k=k)
                cycles += 1
            spent = time.perf_counter() - minute_start
            rows.append(
                {
                    "minute": len(rows) + 1,
                    "adds/s": cycles * 100 / spent,
                    "removes/s": cycles * 10 / spent,
                    "queries/s": cycles * 20 / spent,
                    "load avg": os.getloadavg()[0],
                }
            )
            print(f"minute {len(rows)}: {rows[-1]}", file=sys.stderr, flush=True)
    return rows


def _map_in(db: Any) -> None:
    """Return every value of the tables' sub-databases once, without copying them."""
    storage = db._storage
    with storage.env.begin(buffers=True) as txn:
        for name in db._tables.names:
            for _ in txn.cursor(storage.db(name)).iternext(keys=False):
                pass


def run_database(
    n: int,
    batch: int,
    queries: int,
    rounds: int,
    k: int,
    mixed: float = 0.0,
    faiss_max: int = 30_000_000,
    version: int | None = None,
) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """The issue #16 targets through the public API: a Database of n random fingerprints
    under keys ``d<i>``, k=3 in 5 blocks, created in format ``version`` (default: the
    current one; an older one as the code that still writes it makes it); then, for
    ``mixed`` seconds, the mixed workload."""
    import simdb
    import simdb.config

    version = version or simdb.FORMAT_VERSION
    if version not in simdb.config.READABLE_FORMATS:
        raise SystemExit(f"--formats: simdb does not write format {version}")
    simdb.config.FORMAT_VERSION = version  # what open() creates, as tests/conftest.py's creating_format

    directory = tempfile.mkdtemp(prefix="bench-scale-db-", dir=bench_dir())
    rng = np.random.default_rng(7)
    extra = rounds * 10_000 + rounds * 10 * 100 + 20_000 + int(mixed * 20_000)
    fingerprints = rng.integers(0, 1 << 64, n + extra, dtype=np.uint64, endpoint=False)
    next_id = 0

    def items(count: int) -> list[tuple[str, int]]:
        nonlocal next_id
        chunk = list(
            zip((f"d{i}" for i in range(next_id, next_id + count)), fingerprints[next_id : next_id + count].tolist())
        )
        next_id += count
        return chunk

    row: dict[str, Any] = {"layout": f"Database (format {version})", "n": n}
    with simdb.open(os.path.join(directory, "db"), k=k, blocks=k + 2) as db:
        load = 0.0
        for at in range(0, n, batch):
            chunk = items(min(batch, n - at))
            load += _timed(lambda chunk=chunk: db.add_many(chunk, batch_size=batch))
        row["bulk docs/s"] = n / load
        ten_k = [items(10_000) for _ in range(rounds)]
        row["add 10k docs/s"] = rounds * 10_000 / _timed(lambda: [db.add_many(chunk) for chunk in ten_k])
        hundred = [items(100) for _ in range(rounds * 10)]
        row["add 100 docs/s"] = rounds * 10 * 100 / _timed(lambda: [db.add_many(chunk) for chunk in hundred])
        singles = items(20_000)

        def write_singly() -> None:
            with db.writer() as writer:
                for key, fingerprint in singles:
                    writer.add(key, fingerprint)

        row["writer adds/s"] = len(singles) / _timed(write_singly)
        stats = db.stats()
        row["bytes/entry"] = stats["bytes_per_table_entry"]
        row["filter bytes/entry"] = stats["filter_bytes_per_table_entry"]
        row["file bytes/doc"] = stats["bytes_per_document"]

        def near_stored() -> np.ndarray:
            """Stored fingerprints with k random bits flipped (a bit may flip twice)."""
            flips = rng.integers(0, 64, (queries, k), dtype=np.uint64)
            chosen = fingerprints[rng.integers(0, next_id, queries)]
            for column in range(k):
                chosen = chosen ^ (np.uint64(1) << flips[:, column])
            return chosen

        chosen = near_stored()
        query_list = chosen.tolist()
        mapped_list = near_stored().tolist()
        db.query_many(query_list[:1000], k=k)  # warm
        row["query q/s"] = queries / _timed(lambda: [db.query(q, k=k) for q in query_list])
        # A long-running process has its tables' pages mapped in: read every block once
        # (LMDB maps a block's page when it returns it), then time fresh queries.
        row["map in s"] = _timed(lambda: _map_in(db))
        row["query q/s, mapped in"] = queries / _timed(lambda: [db.query(q, k=k) for q in mapped_list])
        row["query_many q/s"] = queries / _timed(lambda: db.query_many(query_list, k=k))
        row["matches/q"] = sum(len(db.query(q, k=k)) for q in query_list[:1000]) / 1000
        # FAISS's multi-hash index takes about 60 bytes per code: beyond faiss_max it would
        # not fit beside the database in this machine's memory.
        faiss_rate = faiss_query_many_rate(fingerprints[:next_id], chosen, k) if next_id <= faiss_max else None
        row["faiss query_many q/s"] = faiss_rate if faiss_rate is not None else "-"
        # All pairs within k (random fingerprints: a handful), and the most anonymous memory
        # held meanwhile, sampled every 50 ms: by this process, which also holds the
        # benchmark's fingerprints and what its adds and queries cached, and by a new one.
        # Anonymous memory leaves out the pages of the mapped database.
        with _AnonymousPeak() as peak:
            row["pairs() s"] = _timed(lambda: sum(1 for _ in db.pairs(k=k)))
        row["pairs() anon peak GiB"] = peak.gib
        row["pairs() anon peak GiB, new process"] = fresh_pairs_peak(os.path.join(directory, "db"), k)
        row["load avg"] = os.getloadavg()[0]
        minutes = mixed_workload(db, fingerprints, next_id, mixed, k) if mixed else []
    shutil.rmtree(directory)
    return row, minutes


def print_row(row: dict[str, Any], columns: list[str]) -> None:
    print(
        "| "
        + " | ".join(
            f"{row[c]:,.1f}" if isinstance(row[c], float) else f"{row[c]:,}" if isinstance(row[c], int) else str(row[c])
            for c in columns
        )
        + " |",
        flush=True,
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--n", type=int, default=1_000_000)
    parser.add_argument(
        "--layout",
        choices=["btree", "lsm", "both", "database"],
        default="both",
        help="table layers alone on bare LMDB, or the targets through Database",
    )
    parser.add_argument("--batch", type=int, default=100_000)
    parser.add_argument("--queries", type=int, default=20_000)
    parser.add_argument("--rounds", type=int, default=20, help="10,000-doc batches (and 10x as many 100-doc ones)")
    parser.add_argument("-k", type=int, default=3)
    parser.add_argument(
        "--faiss-max", type=int, default=30_000_000, help="with --layout database: no FAISS run beyond N documents"
    )
    parser.add_argument(
        "--mixed", type=float, default=0.0, help="with --layout database: then a mixed workload for SECONDS"
    )
    parser.add_argument(
        "--formats",
        type=int,
        nargs="+",
        default=None,
        help="with --layout database: the database formats to create, one run each (default: the current one)",
    )
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
    print(f"# {args.n:,} random fingerprints, k={args.k}, batches of {args.batch:,}; {describe()}")
    if args.layout == "database":
        db_columns = [*columns[:5], "writer adds/s", *columns[5:6], "filter bytes/entry", *columns[6:7]]
        db_columns += ["query q/s", "map in s", "query q/s, mapped in", "query_many q/s"]
        db_columns += ["faiss query_many q/s", "matches/q", "pairs() s", "pairs() anon peak GiB"]
        db_columns += ["pairs() anon peak GiB, new process", "load avg"]
        print("| " + " | ".join(db_columns) + " |")
        print("|" + "---|" * len(db_columns))
        for version in args.formats or [None]:  # None: the current format (run_database's default)
            row, minutes = run_database(
                args.n, args.batch, args.queries, args.rounds, args.k, args.mixed, args.faiss_max, version
            )
            print_row(row, db_columns)
        if minutes:
            print(f"\nMixed workload after the above, {args.mixed:g} s: cycles of 100 adds and 10 removals")
            print("through db.writer(), and 20 single queries.\n")
            print("| " + " | ".join(minutes[0]) + " |")
            print("|" + "---|" * len(minutes[0]))
            for minute in minutes:
                print_row(minute, list(minute))
        return
    print("| " + " | ".join(columns) + " |")
    print("|" + "---|" * len(columns))
    for layout, policy in runs:
        print_row(run(layout, args.n, args.batch, args.queries, args.rounds, args.k, policy), columns)


if __name__ == "__main__":
    main()
