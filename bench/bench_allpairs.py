"""Benchmark of the all-pairs search (issue 5): simdb.find_all against FAISS.

Cases (each timed in the same run, single thread):

* ``random``: N uniformly random fingerprints, k=3, 5 blocks.
* ``clustered``: N/10 random bases, each followed by 9 variants 0-3 bits away (k=3).
* ``scale``: 10M random fingerprints, run in a fresh subprocess to measure peak RSS.

Peers: seomoz simhash-py's C++ ``find_all`` cannot be built here (no Python 3.11 wheel, no
network), so its published figures on this machine kind are printed alongside (1.27 s random,
4.2 s clustered).  FAISS ``IndexBinaryMultiHash`` is measured: every fingerprint is added and
then range-searched against the index, with ``nhash=k+1`` hash tables of ``64 // (k+1)``
bits and ``nflip=0``, which by pigeonhole finds every pair within k bits exactly.

Usage::

    python bench/bench_allpairs.py            # 1M random + 1M clustered + 10M scale
    python bench/bench_allpairs.py --n 100000 --scale-n 0   # quick run
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import subprocess
import sys
import time
from collections.abc import Callable

import numpy as np

SIMHASH_PY_SECONDS = {"random": 1.27, "clustered": 4.2}


def random_fingerprints(n: int, seed: int = 0) -> np.ndarray:
    """N uniformly random 64-bit fingerprints."""
    return np.random.default_rng(seed).integers(0, 2**64, n, dtype=np.uint64, endpoint=False)


def clustered_fingerprints(n: int, seed: int = 0, variants: int = 9, max_flips: int = 3) -> np.ndarray:
    """N/(variants+1) random bases, each followed by ``variants`` copies with 0..max_flips
    distinct random bits flipped (flip count uniform)."""
    rng = np.random.default_rng(seed)
    bases = rng.integers(0, 2**64, n // (variants + 1), dtype=np.uint64, endpoint=False)
    out = np.repeat(bases, variants + 1)
    variant_rows = np.ones(out.size, dtype=bool)
    variant_rows[:: variants + 1] = False  # the base itself stays unchanged
    rows = np.flatnonzero(variant_rows)
    flips = rng.integers(0, max_flips + 1, rows.size)
    # Distinct bit positions per row: the first `flips` entries of a random permutation.
    positions = np.argsort(rng.random((rows.size, 64)), axis=1)[:, :max_flips].astype(np.uint64)
    for column in range(max_flips):
        chosen = flips > column
        out[rows[chosen]] ^= np.uint64(1) << positions[chosen, column]
    return out


def best_of(repeats: int, run: Callable[[], int]) -> tuple[float, int]:
    """Smallest wall time over ``repeats`` runs, and the pair count of the last run."""
    best, pairs = float("inf"), -1
    for _ in range(repeats):
        start = time.perf_counter()
        pairs = run()
        best = min(best, time.perf_counter() - start)
    return best, pairs


def simdb_pairs(fingerprints: np.ndarray, k: int, blocks: int) -> int:
    from simdb.allpairs import find_all

    pairs, _ = find_all(fingerprints, k=k, blocks=blocks)
    return len(pairs)


def faiss_pairs(fingerprints: np.ndarray, k: int) -> int:
    """All pairs within k bits with FAISS IndexBinaryMultiHash (nhash=k+1, nflip=0)."""
    import faiss

    faiss.omp_set_num_threads(1)
    nhash = k + 1
    index = faiss.IndexBinaryMultiHash(64, nhash, 64 // nhash)
    index.nflip = 0
    # FAISS reads binary codes byte by byte; any fixed byte order preserves Hamming distance.
    codes = np.ascontiguousarray(fingerprints).view(np.uint8).reshape(-1, 8)
    index.add(codes)
    # range_search keeps distances strictly below the radius.
    lims, _distances, labels = index.range_search(codes, k + 1)
    queries = np.repeat(np.arange(len(fingerprints)), np.diff(lims).astype(np.int64))
    return int(np.count_nonzero(queries < labels))


def scale_run(n: int, k: int, blocks: int) -> dict[str, float]:
    """Run find_all on n random fingerprints in this process; report time and peak RSS."""
    fingerprints = random_fingerprints(n, seed=1)
    seconds, pairs = best_of(1, lambda: simdb_pairs(fingerprints, k, blocks))
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # Linux reports KiB
    return {"n": n, "seconds": seconds, "pairs": pairs, "peak_rss_bytes": peak}


def scale_in_subprocess(n: int, k: int, blocks: int) -> dict[str, float]:
    """Measure :func:`scale_run` in a fresh interpreter so peak RSS is the search's own."""
    code = (
        "import json, sys; sys.path.insert(0, sys.argv[1]); import bench_allpairs as b; "
        f"print(json.dumps(b.scale_run({n}, {k}, {blocks})))"
    )
    here = os.path.dirname(os.path.abspath(__file__))
    result = subprocess.run([sys.executable, "-c", code, here], check=True, capture_output=True, text=True)
    return json.loads(result.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--n", type=int, default=1_000_000, help="fingerprints in the random and clustered cases")
    parser.add_argument("--scale-n", type=int, default=10_000_000, help="fingerprints in the scale case (0: skip)")
    parser.add_argument("--k", type=int, default=3)
    parser.add_argument("--blocks", type=int, default=5)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--no-faiss", action="store_true")
    args = parser.parse_args()

    print(
        f"machine: {os.cpu_count()} cores (shared), {platform.machine()}, "
        f"Python {platform.python_version()}, numpy {np.__version__}"
    )
    print(f"command: python bench/bench_allpairs.py {' '.join(sys.argv[1:])}".rstrip())
    rows = []
    for case, make in (("random", random_fingerprints), ("clustered", clustered_fingerprints)):
        fingerprints = make(args.n)
        ours, ours_pairs = best_of(args.repeats, lambda: simdb_pairs(fingerprints, args.k, args.blocks))
        rows.append((case, "simdb.find_all", ours, ours_pairs, None))
        if not args.no_faiss:
            theirs, theirs_pairs = best_of(args.repeats, lambda: faiss_pairs(fingerprints, args.k))
            rows.append(
                (
                    case,
                    f"faiss MultiHash nhash={args.k + 1} b={64 // (args.k + 1)}",
                    theirs,
                    theirs_pairs,
                    ours / theirs,
                )
            )
            if theirs_pairs != ours_pairs:
                print(f"WARNING: {case}: simdb found {ours_pairs} pairs, faiss {theirs_pairs}")
        if args.n == 1_000_000 and args.k == 3:
            peer = SIMHASH_PY_SECONDS[case]
            rows.append((case, "simhash-py find_all (published)", peer, -1, ours / peer))

    print()
    print(
        f"| case (N={args.n:,}, k={args.k}, blocks={args.blocks}) | implementation | seconds | pairs | simdb / peer |"
    )
    print("|---|---|---:|---:|---:|")
    for case, name, seconds, pairs, ratio in rows:
        pairs_text = f"{pairs:,}" if pairs >= 0 else "n/a"
        ratio_text = f"{ratio:.2f}x" if ratio is not None else ""
        print(f"| {case} | {name} | {seconds:.3f} | {pairs_text} | {ratio_text} |")

    if args.scale_n:
        result = scale_in_subprocess(args.scale_n, args.k, args.blocks)
        print()
        print("| scale case | seconds | pairs | peak RSS |")
        print("|---|---:|---:|---:|")
        print(
            f"| {int(result['n']):,} random, k={args.k}, blocks={args.blocks} | {result['seconds']:.2f} | "
            f"{int(result['pairs']):,} | {result['peak_rss_bytes'] / 2**30:.2f} GiB |"
        )


if __name__ == "__main__":
    main()
