"""Benchmark of the Dask path (issues 7, 17): simdb.distributed.find_all on a local cluster beside
simdb.allpairs.find_all on the same fingerprints.

The fingerprints (uniform random, or clustered: N/10 bases with 9 variants 0-3 bits away)
are written to Parquet files of ``--rows-per-file`` rows with int64 keys.  Then, for each
count W in ``--workers`` (the scaling curve), one run after the other so they never compete
for the cores:

* **single machine**: a fresh subprocess reads the Parquet files and runs
  ``simdb.allpairs.find_all(workers=W)`` (W threads); wall and CPU time of the search and
  peak RSS of that process.  With ``--clusters``, then ``cluster_labels(workers=W)``, timed
  on its own.
* **Dask**: a ``LocalCluster`` of W processes with one thread each, warmed by a find_all
  of 1,000 rows (``--cold``: not);
  ``find_all(glob).to_parquet(out)`` is timed end to end (read, search jobs, routing the
  pairs to their keys, write), then with ``--clusters`` ``clusters(glob).to_parquet()`` on
  its own.  Peak RSS of each worker process (``ru_maxrss`` read on the worker), task
  thread time by task kind (the total work, to compare with one process's CPU time), and
  shuffle bytes (zero: the plan moves no rows).
* **Dask, worker threads** (``--dask-threads``): the same on a ``LocalCluster`` of W
  single-thread workers inside the benchmark process (``processes=False``), so that the
  workers share the fingerprints instead of each receiving a copy.

Each search runs ``--repeats`` times (default 3) in the same process or cluster, and the
median run is reported beside every run's time.  Both sides get the same treatment: a
cluster that serves jobs all day has its workers' memory already mapped, as the second
and later runs do (the first run on a fresh worker also faults in about 1 GB of heap).

The 1-minute load average is sampled before each run and printed: on a shared machine a
high load makes the wall times, not the CPU times, unreliable.

Usage::

    python bench/bench_distributed.py --n 20000000 --workers 1,2
    python bench/bench_distributed.py --n 20000000 --kind clustered --clusters
    python bench/bench_distributed.py --n 100000000 --workers 1,2,4,8,16
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from typing import Any

import numpy as np
from machine import describe


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
        table = pa.table({"key": np.arange(start, stop, dtype=np.int64), "fingerprint": fingerprints[start:stop]})
        pq.write_table(table, os.path.join(directory, f"part-{number:04d}.parquet"))
    return sum(entry.stat().st_size for entry in os.scandir(directory))


SINGLE_MACHINE = """
import json, os, resource, sys, time
import pyarrow.dataset as ds
from simdb.allpairs import cluster_labels, find_all
from simdb.plan import TablePlan
table = ds.dataset(sys.argv[1], format="parquet").to_table(columns=["fingerprint"])
fingerprints = table.column("fingerprint").to_numpy()
k, blocks, workers, repeats = int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[6])
runs = []
for _ in range(repeats):
    start, cpu = time.perf_counter(), os.times()
    pairs, _ = find_all(fingerprints, k=k, blocks=blocks, workers=workers)
    seconds, used = time.perf_counter() - start, os.times()
    runs.append({"seconds": seconds, "cpu_seconds": used.user + used.system - cpu.user - cpu.system})
    count = len(pairs)
    del pairs
result = {**sorted(runs, key=lambda run: run["seconds"])[len(runs) // 2], "runs": runs, "pairs": count}
if sys.argv[5] == "1":
    start = time.perf_counter()
    labels = cluster_labels(fingerprints, TablePlan.create(k, blocks), workers=workers)
    result["cluster_seconds"] = time.perf_counter() - start
with open("/proc/self/status") as status:  # VmHWM: ru_maxrss would include the parent's
    result["peak_rss"] = next(int(line.split()[1]) * 1024 for line in status if line.startswith("VmHWM:"))
print(json.dumps(result))
"""


def run_single_machine(
    directory: str, k: int, blocks: int, workers: int, clusters: bool, repeats: int
) -> dict[str, Any]:
    """simdb.allpairs.find_all ``repeats`` times (then cluster_labels once) on ``workers``
    threads, in a fresh process (so its peak RSS is its own); the median run's times, and
    every run's under "runs"."""
    arguments = [directory, str(k), str(blocks), str(workers), "1" if clusters else "0", str(repeats)]
    done = subprocess.run(
        [sys.executable, "-c", SINGLE_MACHINE, *arguments],
        capture_output=True,
        text=True,
        check=True,
    )
    return json.loads(done.stdout.strip().splitlines()[-1])


def peak_rss() -> int:
    """Peak RSS of the calling process, in bytes: VmHWM, which starts afresh at exec (Linux
    carries ``ru_maxrss`` over from the parent, which here holds the whole input)."""
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def _worker_cpu_seconds() -> float:
    """CPU time of the calling (worker) process so far."""
    times = os.times()
    return times.user + times.system


def run_dask(
    directory: str,
    out: str,
    k: int,
    blocks: int,
    workers: int,
    partitions: int | None,
    clusters: bool,
    malloc_trim: bool = False,
    processes: bool = True,
    warm_up: bool = True,
    repeats: int = 1,
) -> dict[str, Any]:
    """simdb.distributed.find_all ``repeats`` times (then clusters once) on a fresh
    LocalCluster, written to Parquet: W worker processes of one thread, or
    (``processes=False``) W single-thread workers inside this process, beside the scheduler
    (no copies between workers, no serialisation).  Times are the median run's, every run's
    under "runs"; thread and CPU seconds by task kind are per run (totals / ``repeats``).

    With ``warm_up``, a find_all of 1,000 rows runs on the cluster first, untimed, as on a
    cluster that has served a job before: the workers' first imports (pandas, pyarrow,
    simdb) and connections are then not in the timing, as the one-process run's imports
    and read are not in its.  Its few tasks stay in the task metrics (well under 0.1 s)."""
    import dask
    from dask.distributed import Client, LocalCluster

    from simdb.distributed import clusters as dask_clusters
    from simdb.distributed import find_all

    source = os.path.join(directory, "*.parquet")
    # Dask starts workers with MALLOC_TRIM_THRESHOLD_=65536, which also turns off glibc's
    # growing mmap threshold: every numpy temporary over 128 KiB is then a fresh mmap and
    # page faults.  The one-process search measured 13.0 CPU-s with it against 10.5 without
    # (20M random), so unless --dask-malloc-trim, workers start without it (a None there
    # unsets it; docs/library.md says so for users).
    trim = {} if malloc_trim else {"distributed.nanny.pre-spawn-environ.MALLOC_TRIM_THRESHOLD_": None}
    with (
        dask.config.set(trim),
        LocalCluster(n_workers=workers, threads_per_worker=1, processes=processes, dashboard_address=":0") as cluster,
        Client(cluster) as client,
    ):
        if warm_up:
            small = os.path.join(os.path.dirname(out), f"warm-up-{os.path.basename(out)}")
            write_parquet(random_fingerprints(1000), small, 1000)
            find_all(os.path.join(small, "*.parquet"), k=k, blocks=blocks).to_parquet(small + "-pairs")
        metrics_before = dict(cluster.scheduler.cumulative_worker_metrics)
        runs = []
        for _ in range(repeats):
            cpu_before = client.run(_worker_cpu_seconds)
            start = time.perf_counter()
            pairs = find_all(source, k=k, blocks=blocks, npartitions=partitions)
            pairs.to_parquet(out, write_index=False)
            seconds = time.perf_counter() - start
            cpu_after = client.run(_worker_cpu_seconds)
            worker_cpu = sorted(cpu_after[address] - cpu_before[address] for address in cpu_after)
            runs.append({"seconds": seconds, "worker_cpu_seconds": worker_cpu})
        time.sleep(2)  # workers report their metrics with their heartbeats
        metrics = {
            key: (value - metrics_before.get(key, 0)) / repeats
            for key, value in cluster.scheduler.cumulative_worker_metrics.items()
        }
        cluster_seconds = None
        if clusters:
            start = time.perf_counter()
            dask_clusters(source, k=k, blocks=blocks).to_parquet(out + "-clusters", write_index=False)
            cluster_seconds = time.perf_counter() - start
        peaks = sorted(client.run(peak_rss).values())
    import pyarrow.dataset as ds

    thread_seconds: dict[str, float] = defaultdict(float)
    cpu_seconds = 0.0
    for key, value in metrics.items():
        # ("execute", task prefix, activity, unit): task time on worker threads, by kind;
        # thread-noncpu includes time the thread waited for a core on a loaded machine.
        if len(key) == 4 and key[0] == "execute" and key[3] == "seconds" and key[2] in ("thread-cpu", "thread-noncpu"):
            thread_seconds[key[1]] += value
            if key[2] == "thread-cpu":
                cpu_seconds += value
    return {
        **sorted(runs, key=lambda run: run["seconds"])[len(runs) // 2],
        "runs": runs,
        "cluster_seconds": cluster_seconds,
        "pairs": int(ds.dataset(out, format="parquet").count_rows()),
        "worker_peak_rss": peaks,
        "shuffle_shard_bytes": int(metrics.get(("p2p", "foreground", "shards", "bytes"), 0)),
        "cpu_seconds": cpu_seconds,
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
    parser.add_argument("--workers", default="1,2", help="comma-separated worker counts for the curve (default 1,2)")
    parser.add_argument("--rows-per-file", type=int, default=1_000_000)
    parser.add_argument("--partitions", type=int, default=None, help="ignored by the current plan (no shuffle)")
    parser.add_argument("--clusters", action="store_true", help="also time the clustering stage on its own")
    parser.add_argument("--skip-single", action="store_true", help="do not run the single-machine search")
    parser.add_argument(
        "--dask-malloc-trim",
        action="store_true",
        help="keep Dask's MALLOC_TRIM_THRESHOLD_=65536 in the workers (default: unset, see run_dask)",
    )
    parser.add_argument(
        "--dask-threads",
        action="store_true",
        help="also run each count on a LocalCluster of W single-thread workers in this process (processes=False)",
    )
    parser.add_argument("--workdir", default=None, help="where to put the Parquet files (default: a temp dir)")
    parser.add_argument(
        "--cold", action="store_true", help="time each Dask run on a fresh cluster, with no warm-up job first"
    )
    parser.add_argument(
        "--repeats",
        type=int,
        default=3,
        help="runs of each search, in the same process or cluster; the median is reported (default 3)",
    )
    args = parser.parse_args()

    from simdb.plan import TablePlan

    plan = TablePlan.create(args.k, args.blocks)
    counts = [int(value) for value in args.workers.split(",")]
    if args.workdir:
        os.makedirs(args.workdir, exist_ok=True)
    workdir = tempfile.mkdtemp(prefix="simdb-bench-dask-", dir=args.workdir)
    single: dict[int, dict[str, Any]] = {}
    dask_runs: dict[int, dict[str, Any]] = {}
    threaded_runs: dict[int, dict[str, Any]] = {}
    loads = []
    try:
        make = random_fingerprints if args.kind == "random" else clustered_fingerprints
        fingerprints = make(args.n)
        input_dir = os.path.join(workdir, "input")
        input_bytes = write_parquet(fingerprints, input_dir, args.rows_per_file)
        distinct = int(np.unique(fingerprints).size)
        del fingerprints
        # One after the other, so that no two runs compete for the cores; the one-process
        # runs first, before this process starts any Dask machinery (after a LocalCluster
        # closed, the 2-thread search measured 0.76-0.80x of one thread here, against
        # 0.46-0.48x in a fresh process beside an idle parent).
        for workers in counts:
            if not args.skip_single:
                loads.append(os.getloadavg()[0])
                single[workers] = run_single_machine(
                    input_dir, args.k, args.blocks, workers, args.clusters, args.repeats
                )

        def dask_run(workers: int, name: str, **options: Any) -> dict[str, Any]:
            loads.append(os.getloadavg()[0])
            out = os.path.join(workdir, f"{name}-{workers}")
            return run_dask(
                input_dir,
                out,
                args.k,
                args.blocks,
                workers,
                args.partitions,
                args.clusters,
                warm_up=not args.cold,
                repeats=args.repeats,
                **options,
            )

        for workers in counts:
            dask_runs[workers] = dask_run(workers, "pairs", malloc_trim=args.dask_malloc_trim)
        if args.dask_threads:  # last: worker threads live in this process, and stay until it ends
            for workers in counts:
                threaded_runs[workers] = dask_run(workers, "pairs-threads", processes=False)
        loads.append(os.getloadavg()[0])
    finally:
        shutil.rmtree(workdir, ignore_errors=True)

    tables = len(plan.tables)
    files = -(-args.n // args.rows_per_file)
    print(
        f"machine: {describe()}; "
        f"{args.n:,} {args.kind} fingerprints ({distinct:,} distinct), "
        f"k={args.k}, {args.blocks} blocks, {tables} tables; "
        f"{files} Parquet files ({gib(input_bytes)}); Dask: worker processes x 1 thread, "
        f"{'fresh cluster (--cold)' if args.cold else 'after a 1,000-row warm-up job'}, "
        f"median of {args.repeats} runs in the same process or cluster, "
        f"MALLOC_TRIM_THRESHOLD_ {'65536 (Dask default)' if args.dask_malloc_trim else 'unset'}; "
        f"1-minute load average during the runs: {min(loads):.1f}-{max(loads):.1f}"
    )
    print()
    base = single.get(1, {}).get("seconds")
    print("| run | workers | wall time | vs 1 process | CPU / thread time | pairs | clustering stage | peak memory |")
    print("|---|---|---|---|---|---|---|---|")
    for workers in counts:
        if workers in single:
            run = single[workers]
            ratio = f"{run['seconds'] / base:.2f}x" if base else "-"
            clustering = f"{run['cluster_seconds']:.1f} s" if "cluster_seconds" in run else "-"
            print(
                f"| simdb.allpairs.find_all | {workers} thread(s) | {run['seconds']:.1f} s | {ratio} | "
                f"{run['cpu_seconds']:.1f} s CPU | {run['pairs']:,} | {clustering} | {gib(run['peak_rss'])} |"
            )
        run = dask_runs[workers]
        ratio = f"{run['seconds'] / base:.2f}x" if base else "-"
        busy = sum(run["thread_seconds"].values())
        busy_text = f"{run['cpu_seconds']:.1f} s task CPU ({busy:.1f} s thread)"
        clustering = f"{run['cluster_seconds']:.1f} s" if run["cluster_seconds"] is not None else "-"
        peaks = " / ".join(gib(p) for p in run["worker_peak_rss"])
        print(
            f"| simdb.distributed.find_all (Dask) | {workers} worker(s) | {run['seconds']:.1f} s | {ratio} | "
            f"{busy_text} | {run['pairs']:,} | {clustering} | {peaks} per worker |"
        )
        if workers in threaded_runs:
            run = threaded_runs[workers]
            ratio = f"{run['seconds'] / base:.2f}x" if base else "-"
            clustering = f"{run['cluster_seconds']:.1f} s" if run["cluster_seconds"] is not None else "-"
            print(
                f"| simdb.distributed.find_all (Dask, worker threads) | {workers} worker(s) | {run['seconds']:.1f} s "
                f"| {ratio} | {run['cpu_seconds']:.1f} s task CPU | {run['pairs']:,} | {clustering} "
                f"| {gib(run['worker_peak_rss'][0])} in all |"
            )
    print()

    def all_runs(run: dict[str, Any]) -> str:
        return " / ".join(f"{each['seconds']:.1f}" for each in run["runs"])

    for workers in counts:
        if workers in single:
            print(f"one process, {workers} thread(s): every run {all_runs(single[workers])} s")
        print(f"Dask, {workers} worker process(es): every run {all_runs(dask_runs[workers])} s")
        if workers in threaded_runs:
            print(f"Dask, {workers} worker thread(s): every run {all_runs(threaded_runs[workers])} s")
    for workers in counts:
        run = dask_runs[workers]
        top = ", ".join(f"{name} {value:.1f}" for name, value in list(run["thread_seconds"].items())[:6])
        busiest = max(run["worker_cpu_seconds"])
        base_cpu = single.get(1, {}).get("cpu_seconds")
        ratio = f" = {busiest / base_cpu:.2f}x the 1-thread search's CPU time" if base_cpu else ""
        print(
            f"Dask {workers} worker(s): CPU seconds per worker process during the median find_all "
            f"{' / '.join(f'{value:.1f}' for value in run['worker_cpu_seconds'])} (busiest{ratio}); "
            f"thread seconds by task kind: {top}; shuffle bytes: {run['shuffle_shard_bytes']:,}"
        )
    print(json.dumps({"single": single, "dask": dask_runs, "threads": threaded_runs, "load": loads}, default=str))


if __name__ == "__main__":
    main()
