"""Core database benchmark: bulk load, near-duplicate queries and size on disk, beside the
PyPI ``simhash`` package's in-memory ``SimhashIndex`` and FAISS ``IndexBinaryMultiHash``
(4 tables of 16 bits, one thread), all in the same run.

    python bench/bench_core.py [--n 1000000] [--queries 20000] [--skip-simhash]

Needs the bench extra: ``pip install -e ".[bench]"``.
"""

from __future__ import annotations

import argparse
import gc
import os
import platform
import shutil
import tempfile
import time
from collections.abc import Callable
from typing import Any

import numpy as np
import psutil

import simdb

K = 3


def near_duplicates(fingerprints: np.ndarray, count: int, rng: np.random.Generator) -> list[int]:
    """Queries 0-3 bits away from stored fingerprints."""
    picked = fingerprints[rng.integers(0, len(fingerprints), count)].copy()
    for i in range(count):
        for bit in rng.choice(64, size=int(rng.integers(0, K + 1)), replace=False):
            picked[i] ^= np.uint64(1) << np.uint64(bit)
    return picked.tolist()  # type: ignore[no-any-return]


def timed(work: Callable[[], Any]) -> tuple[float, Any]:
    start = time.perf_counter()
    result = work()
    return time.perf_counter() - start, result


def rss() -> int:
    gc.collect()
    return psutil.Process().memory_info().rss


def bench_simdb(
    fingerprints: list[int], queries: list[int], single: int, directory: str, batch_size: int
) -> dict[str, float]:
    path = os.path.join(directory, f"simdb-{batch_size}")
    items = [(f"doc-{i}", fp) for i, fp in enumerate(fingerprints)]
    figures: dict[str, float] = {}
    with simdb.open(path, k=K) as db:
        seconds, _ = timed(lambda: db.add_many(items, batch_size=batch_size))  # each batch commits durably
        figures["load_per_s"] = len(items) / seconds
        seconds, results = timed(lambda: db.query_many(queries))
        figures["query_many_per_s"] = len(queries) / seconds
        figures["matches_per_query"] = sum(map(len, results)) / len(queries)
        seconds, _ = timed(lambda: [db.query(q) for q in queries[:single]])
        figures["query_per_s"] = single / seconds
        figures["bytes_before_compact"] = db.stats()["size_bytes"]
        seconds, _ = timed(db.compact)
        figures["compact_s"] = seconds
        stats = db.stats()
        figures["bytes_per_fingerprint"] = stats["size_bytes"] / len(items)
        figures["bytes_per_table_entry"] = stats["bytes_per_table_entry"]
    shutil.rmtree(path)
    return figures


def bench_simhash_index(fingerprints: list[int], queries: list[int], single: int) -> dict[str, float]:
    import logging

    from simhash import Simhash, SimhashIndex

    logging.getLogger("simhash").setLevel(logging.ERROR)  # it warns on every large bucket
    before = rss()
    seconds, index = timed(
        lambda: SimhashIndex([(str(i), Simhash(fp)) for i, fp in enumerate(fingerprints)], f=64, k=K)
    )
    figures = {"load_per_s": len(fingerprints) / seconds, "bytes_per_fingerprint": (rss() - before) / len(fingerprints)}
    seconds, results = timed(lambda: [index.get_near_dups(Simhash(q)) for q in queries[:single]])
    figures["query_per_s"] = single / seconds
    figures["matches_per_query"] = sum(map(len, results)) / single
    return figures


def bench_faiss(fingerprints: list[int], queries: list[int]) -> dict[str, float]:
    import faiss

    faiss.omp_set_num_threads(1)
    codes = np.array(fingerprints, dtype=">u8").view(np.uint8).reshape(-1, 8)
    query_codes = np.array(queries, dtype=">u8").view(np.uint8).reshape(-1, 8)

    def build() -> Any:
        index = faiss.IndexBinaryMultiHash(64, 4, 16)
        index.add(codes)
        return index

    seconds, index = timed(build)
    # Its serialised size: RSS deltas are unreliable for a structure built in C++.
    figures = {
        "load_per_s": len(fingerprints) / seconds,
        "bytes_per_fingerprint": len(faiss.serialize_index_binary(index)) / len(fingerprints),
    }
    # range_search keeps distances strictly below the radius.
    seconds, (lims, _, _) = timed(lambda: index.range_search(query_codes, K + 1))
    figures["query_many_per_s"] = len(queries) / seconds
    figures["matches_per_query"] = float(lims[-1]) / len(queries)
    return figures


def crossover(n: int, directory: str) -> None:
    """Time query_many's two strategies (a seek per query per table, or one pass over each
    table merged with the sorted batch) at several batch sizes, to place MERGE_COST_RATIO."""
    rng = np.random.default_rng(11)
    stored = rng.integers(0, 2**64, n, dtype=np.uint64)
    with simdb.open(os.path.join(directory, "crossover"), k=K) as db:
        db.add_many(((f"doc-{i}", fp) for i, fp in enumerate(stored.tolist())), batch_size=n)
        print(f"# query_many strategies on {n:,} stored fingerprints (queries/s)")
        print("| batch / collection | queries | seek per query | merge whole tables |")
        print("|---|---|---|---|")
        for fraction in (0.001, 0.01, 0.03, 0.1, 0.2, 0.5):
            queries = np.array(near_duplicates(stored, max(1, int(n * fraction)), rng), dtype=np.uint64)
            with db._storage.read() as txn:
                seek, _ = timed(lambda: db._tables.probe_many(txn, queries, K))
                merge, _ = timed(lambda: db._tables.merge_many(txn, queries, K))
            print(f"| {fraction:g} | {len(queries):,} | {len(queries) / seek:,.0f} | {len(queries) / merge:,.0f} |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--n", type=int, default=1_000_000, help="stored fingerprints")
    parser.add_argument("--queries", type=int, default=20_000, help="queries for query_many and FAISS")
    parser.add_argument("--single", type=int, default=5_000, help="queries through query() one at a time")
    parser.add_argument("--skip-simhash", action="store_true", help="leave out the slow pure-Python peer")
    parser.add_argument("--dir", default=None, help="where to put the database (default: a temp dir)")
    parser.add_argument("--crossover", action="store_true", help="only compare query_many's two strategies")
    args = parser.parse_args()
    if args.crossover:
        directory = tempfile.mkdtemp(prefix="simdb-bench-", dir=args.dir)
        try:
            crossover(args.n, directory)
        finally:
            shutil.rmtree(directory, ignore_errors=True)
        return

    rng = np.random.default_rng(2007)
    stored = rng.integers(0, 2**64, args.n, dtype=np.uint64)
    queries = near_duplicates(stored, args.queries, rng)
    fingerprints = stored.tolist()
    directory = tempfile.mkdtemp(prefix="simdb-bench-", dir=args.dir)
    try:
        rows = {
            "simdb (one batch)": bench_simdb(fingerprints, queries, args.single, directory, len(fingerprints)),
            f"simdb (batches of {simdb.database.DEFAULT_BATCH_SIZE:,})": bench_simdb(
                fingerprints, queries, args.single, directory, simdb.database.DEFAULT_BATCH_SIZE
            ),
        }
    finally:
        shutil.rmtree(directory, ignore_errors=True)
    rows["faiss IndexBinaryMultiHash"] = bench_faiss(fingerprints, queries)
    if not args.skip_simhash:
        rows["simhash SimhashIndex"] = bench_simhash_index(fingerprints, queries, args.single)

    print(f"# {args.n:,} random 64-bit fingerprints, k={K}, default plan (5 blocks, 10 tables)")
    print(
        f"# machine: {os.cpu_count()} cores, {psutil.virtual_memory().total / 2**30:.0f} GiB, "
        f"{platform.platform()}, Python {platform.python_version()}"
    )
    columns = [
        ("load_per_s", "load/s", "{:,.0f}"),
        ("query_per_s", "query()/s", "{:,.0f}"),
        ("query_many_per_s", "query_many/s", "{:,.0f}"),
        ("matches_per_query", "matches/q", "{:.2f}"),
        ("bytes_per_fingerprint", "bytes/fp", "{:.1f}"),
        ("bytes_per_table_entry", "bytes/entry", "{:.1f}"),
    ]
    print("| system | " + " | ".join(title for _, title, _ in columns) + " |")
    print("|---" * (len(columns) + 1) + "|")
    for name, figures in rows.items():
        cells = [fmt.format(figures[key]) if key in figures else "–" for key, _, fmt in columns]
        print(f"| {name} | " + " | ".join(cells) + " |")
    ours = rows["simdb (one batch)"]
    print()
    print("Ratios, simdb (one batch) ÷ peer in this run (above 1: simdb is faster):")
    comparisons = [
        ("load/s", "load_per_s", "faiss IndexBinaryMultiHash", "load_per_s"),
        ("query_many/s vs batched range_search", "query_many_per_s", "faiss IndexBinaryMultiHash", "query_many_per_s"),
        ("load/s", "load_per_s", "simhash SimhashIndex", "load_per_s"),
        ("query()/s vs get_near_dups", "query_per_s", "simhash SimhashIndex", "query_per_s"),
        ("query_many/s vs get_near_dups", "query_many_per_s", "simhash SimhashIndex", "query_per_s"),
    ]
    for title, mine, peer, theirs in comparisons:
        if peer in rows:
            print(f"- {title}, {peer}: {ours[mine] / rows[peer][theirs]:.2f}×")
    print(f"- compaction of the one-batch database took {ours['compact_s']:.1f} s")


if __name__ == "__main__":
    main()
