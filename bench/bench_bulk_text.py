"""Bulk loading text with sketches against the same load by another simdb checkout
(issue #14: "bulk loading with sketches reaches at least 70% of today's rate").

    python bench/bench_bulk_text.py --baseline /path/to/older/checkout [--docs 20000] [--rounds 3]

Each round loads the same generated mailing-list posts (bench/messy_corpus.py) into a fresh
database at each checkout's *default* settings, with ``add_texts(..., workers=1)``, in a fresh
subprocess per load (``PYTHONPATH`` set to the checkout), alternating the two checkouts so
that machine noise falls on both alike.  Reported: the median docs/s of each, their ratio,
and bytes per document after ``compact()``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent

# Run inside the child: load the posts file, time add_texts alone, compact, report.
LOAD = """
import json, sys, tempfile, time
import simdb
posts = json.load(open(sys.argv[1]))
with tempfile.TemporaryDirectory() as directory:
    db = simdb.open(directory + "/db")
    start = time.perf_counter()
    db.add_texts(((f"post-{i}", text) for i, text in enumerate(posts)), workers=1)
    seconds = time.perf_counter() - start
    db.compact()
    print(json.dumps({"seconds": seconds, "docs": len(db), "bytes": db.stats()["size_bytes"]}))
    db.close()
"""


def load(checkout: Path, posts_file: str) -> dict[str, float]:
    """One load in a fresh process importing simdb from ``checkout``."""
    env = {**os.environ, "PYTHONPATH": str(checkout)}
    # cwd too: "-c" puts the working directory ahead of PYTHONPATH on sys.path.
    run = subprocess.run(
        [sys.executable, "-c", LOAD, posts_file], env=env, cwd=checkout, capture_output=True, text=True, check=True
    )
    return json.loads(run.stdout.strip().splitlines()[-1])  # type: ignore[no-any-return]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--baseline", type=Path, required=True, help="checkout of the simdb to compare against")
    parser.add_argument("--docs", type=int, default=20_000)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    sys.path.insert(0, str(HERE))
    from messy_corpus import messy_posts

    checkouts = {"this checkout": HERE.parent, "baseline": args.baseline.resolve()}
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as handle:
        json.dump(list(messy_posts(args.docs, seed=3)), handle)
        posts_file = handle.name
    try:
        runs: dict[str, list[dict[str, float]]] = {name: [] for name in checkouts}
        for _ in range(args.rounds):
            for name, checkout in checkouts.items():
                runs[name].append(load(checkout, posts_file))
    finally:
        os.unlink(posts_file)
    load_average = os.getloadavg()[0]
    print(
        f"machine: {os.cpu_count()} cores, Python {platform.python_version()}, load average {load_average:.1f}; "
        f"{args.docs:,} messy posts, default settings, add_texts(workers=1), median of {args.rounds}\n"
    )
    print("| checkout | docs/s | bytes/doc after compact() |")
    print("|---|---|---|")
    rates = {}
    for name, results in runs.items():
        rates[name] = statistics.median(result["docs"] / result["seconds"] for result in results)
        per_doc = statistics.median(result["bytes"] / result["docs"] for result in results)
        print(f"| {name} | {rates[name]:,.0f} | {per_doc:,.0f} |")
    print(f"\nratio (this checkout / baseline): {rates['this checkout'] / rates['baseline']:.2f}")


if __name__ == "__main__":
    main()
