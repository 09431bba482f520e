"""Benchmark of the Dask path (issue 7): simdb.distributed.find_all on a local cluster beside
simdb.allpairs.find_all on the same fingerprints.

The fingerprints (uniform random, or clustered: N/10 bases with 9 variants 0-3 bits away)
are written to Parquet files of ``--rows-per-file`` rows with int64 keys.  Then, one after
the other so they never compete for the cores:

* **single machine**: a fresh subprocess reads the Parquet files and runs
  ``simdb.allpairs.find_all``; wall time of the search and peak RSS of that process.
* **Dask**: a ``LocalCluster`` of ``--workers`` processes with one thread each;
  ``find_all(glob).to_parquet(out)`` is timed end to end (read, shuffles, joins, write).
  Peak RSS of each worker process (``ru_maxrss`` read on the worker), shuffle volume from
  the scheduler's P2P metrics (bytes cut into shards, and bytes written to the shuffle
  disk), and task thread time by task kind, from which the per-partition rate of the
  table comparison is derived.

Usage::

    python bench/bench_distributed.py --n 20000000
    python bench/bench_distributed.py --n 1000000 --kind clustered
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from typing import Any

import numpy as np


def random_fingerprints(n: int, seed: int = 0) -> np.ndarray:
    """N uniformly random 64-bit fingerprints."""
    return np.random.default_rng(seed).integers(0, 2**64, n, dtype=np.uint64, endpoint=False)


def clustered_fingerprints(n: int, seed: int = 0, variants: int = 9, max_flips: int = 3) -> np.ndarray:
    """N/(variants+1) random bases, each with ``variants`` copies 0..max_flips bits away
    (a bit may be drawn twice, so a copy can be closer than its flip count)."""
    rng = np.random.default_rng(seed)
    bases = rng.integers(0, 2**64, n // (variants + 1), dtype=np.uint64, endpoint=False)
    out = np.repeat(bases, variants + 1)
    flips = rng.integers(0, max_flips + 1, out.size)
    flips[:: variants + 1] = 0  # each base stays as it is
    for round_ in range(max_flips):
        chosen = np.flatnonzero(flips > round_)
        out[chosen] ^= np.uint64(1) << rng.integers(0, 64, chosen.size).astype(np.uint64)
    return out


def write_parquet(fingerprints: np.ndarray, directory: str, rows_per_file: int) -> int:
    """Write (key int64, fingerprint uint64) files; return the total bytes on disk."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    os.makedirs(directory, exist_ok=True)
    for number, start in enumerate(range(0, fingerprints.size, rows_per_file)):
        stop = min(fingerprints.size, start + rows_per_file)
        table = pa.table(
            {"key": np.arange(start, stop, dtype=np.int64), "fingerprint": fingerprints[start:stop]}
        )
        pq.write_table(table, os.path.join(directory, f"part-{number:04d}.parquet"))
    return sum(entry.stat().st_size for entry in os.scandir(directory))


SINGLE_MACHINE = """
import json, resource, sys, time
import pyarrow.dataset as ds
from simdb.allpairs import find_all
table = ds.dataset(sys.argv[1], format="parquet").to_table(columns=["fingerprint"])
fingerprints = table.column("fingerprint").to_numpy()
start = time.perf_counter()
pairs, _ = find_all(fingerprints, k=int(sys.argv[2]), blocks=int(sys.argv[3]))
seconds = time.perf_counter() - start
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
print(json.dumps({"seconds": seconds, "pairs": len(pairs), "peak_rss": peak}))
"""


def run_single_machine(directory: str, k: int, blocks: int) -> dict[str, Any]:
    """simdb.allpairs.find_all in a fresh process (so its peak RSS is its own)."""
    done = subprocess.run(
        [sys.executable, "-c", SINGLE_MACHINE, directory, str(k), str(blocks)],
        capture_output=True,
        text=True,
        check=True,
    )
    return json.loads(done.stdout.strip().splitlines()[-1])


def _worker_peak_rss() -> int:
    """Peak RSS of the calling (worker) process, in bytes."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def run_dask(directory: str, out: str, k: int, blocks: int, workers: int, partitions: int | None) -> dict[str, Any]:
    """simdb.distributed.find_all on a fresh LocalCluster, written to Parquet."""
    from dask.distributed import Client, LocalCluster

    from simdb.distributed import find_all

    with LocalCluster(
        n_workers=workers, threads_per_worker=1, processes=True, dashboard_address=":0"
    ) as cluster, Client(cluster) as client:
        start = time.perf_counter()
        pairs = find_all(os.path.join(directory, "*.parquet"), k=k, blocks=blocks, npartitions=partitions)
        pairs.to_parquet(out, write_index=False)
        seconds = time.perf_counter() - start
        peaks = sorted(client.run(_worker_peak_rss).values())
        metrics = dict(cluster.scheduler.cumulative_worker_metrics)
    import pyarrow.dataset as ds

    thread_seconds: dict[str, float] = defaultdict(float)
    for key, value in metrics.items():
        # ("execute", task prefix, activity, unit): task time on worker threads, by kind.
        if len(key) == 4 and key[0] == "execute" and key[3] == "seconds" and key[2] in ("thread-cpu", "thread-noncpu"):
            thread_seconds[key[1]] += value
    return {
        "seconds": seconds,
        "pairs": int(ds.dataset(out, format="parquet").count_rows()),
        "worker_peak_rss": peaks,
        "shuffle_shard_bytes": int(metrics.get(("p2p", "foreground", "shards", "bytes"), 0)),
        "shuffle_disk_bytes": int(metrics.get(("p2p", "background-disk", "disk-write", "bytes"), 0)),
        "shuffle_comm_bytes": int(metrics.get(("p2p", "background-comms", "process", "bytes"), 0)),
        "thread_seconds": dict(sorted(thread_seconds.items(), key=lambda item: -item[1])),
    }


def gib(value: float) -> str:
    return f"{value / 2**30:.2f} GiB"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--n", type=int, default=20_000_000)
    parser.add_argument("--kind", choices=("random", "clustered"), default="random")
    parser.add_argument("--k", type=int, default=3)
    parser.add_argument("--blocks", type=int, default=5)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--rows-per-file", type=int, default=1_000_000)
    parser.add_argument("--partitions", type=int, default=None, help="shuffle partitions (default: one per file)")
    parser.add_argument("--skip-single", action="store_true", help="do not run the single-machine search")
    parser.add_argument("--workdir", default=None, help="where to put the Parquet files (default: a temp dir)")
    args = parser.parse_args()

    from simdb.plan import TablePlan

    plan = TablePlan.create(args.k, args.blocks)
    workdir = tempfile.mkdtemp(prefix="simdb-bench-dask-", dir=args.workdir)
    try:
        make = random_fingerprints if args.kind == "random" else clustered_fingerprints
        fingerprints = make(args.n)
        input_dir = os.path.join(workdir, "input")
        input_bytes = write_parquet(fingerprints, input_dir, args.rows_per_file)
        distinct = int(np.unique(fingerprints).size)
        del fingerprints

        single = None if args.skip_single else run_single_machine(input_dir, args.k, args.blocks)
        dask_run = run_dask(input_dir, os.path.join(workdir, "pairs"), args.k, args.blocks, args.workers, args.partitions)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)

    tables = len(plan.tables)
    files = -(-args.n // args.rows_per_file)
    partitions = args.partitions or files
    table_seconds = dask_run["thread_seconds"].get("table_pairs", 0.0)
    print(
        f"machine: {os.cpu_count()} cores, Python {platform.python_version()}; "
        f"{args.n:,} {args.kind} fingerprints ({distinct:,} distinct), k={args.k}, {args.blocks} blocks, {tables} tables; "
        f"{files} Parquet files ({gib(input_bytes)}); Dask: {args.workers} worker processes x 1 thread, "
        f"{partitions} partitions per shuffle"
    )
    print()
    print("| run | wall time | pairs | peak memory | shuffle volume |")
    print("|---|---|---|---|---|")
    if single is not None:
        print(f"| simdb.allpairs.find_all (1 process) | {single['seconds']:.1f} s | {single['pairs']:,} | {gib(single['peak_rss'])} | - |")
    peaks = " / ".join(gib(p) for p in dask_run["worker_peak_rss"])
    print(
        f"| simdb.distributed.find_all (Dask) | {dask_run['seconds']:.1f} s | {dask_run['pairs']:,} | "
        f"{peaks} per worker | {gib(dask_run['shuffle_shard_bytes'])} sharded, {gib(dask_run['shuffle_disk_bytes'])} to disk |"
    )
    print()
    print("Dask task thread time by kind (both workers, seconds):")
    for name, value in list(dask_run["thread_seconds"].items())[:12]:
        print(f"    {name:<28} {value:8.1f}")
    if table_seconds:
        rate = distinct * tables / table_seconds
        print(
            f"table comparison (table_pairs): {table_seconds:.1f} thread-s for {tables} x {distinct:,} rows "
            f"= {rate / 1e6:.2f} M rows per second per thread"
        )
    total_thread = sum(dask_run["thread_seconds"].values())
    print(
        f"all tasks: {total_thread:.1f} thread-s = {distinct * tables / total_thread / 1e6:.2f} M table-rows per "
        f"thread-second; shuffle bytes per table-row: {dask_run['shuffle_shard_bytes'] / (distinct * (tables + 1)):.1f}"
    )
    print(json.dumps({"single": single, "dask": dask_run}, default=str))


if __name__ == "__main__":
    main()
