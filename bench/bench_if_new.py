"""Speed of ``add_texts(if_new=True)`` against a plain ``add_texts``, on messy-corpus posts.

    python bench/bench_if_new.py --docs 20000

Both load the same posts into an empty database (one process, default batch size); the
texts are fingerprinted inside the timing in both cases, as ``simdb add`` does."""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from messy_corpus import messy_posts

import simdb


def timed_load(texts: list[str], if_new: bool) -> tuple[float, float, simdb.AddResult]:
    """(wall seconds, CPU seconds, result) of loading ``texts`` into a fresh database."""
    directory = Path(tempfile.mkdtemp(prefix="simdb-if-new-"))
    try:
        with simdb.open(directory / "db") as db:
            wall, cpu = time.perf_counter(), time.process_time()
            result = db.add_texts(((f"p{i}", text) for i, text in enumerate(texts)), if_new=if_new)
            return time.perf_counter() - wall, time.process_time() - cpu, result
    finally:
        shutil.rmtree(directory)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--docs", type=int, default=20_000)
    parser.add_argument("--repeats", type=int, default=2)
    args = parser.parse_args(argv)
    texts = messy_posts(args.docs)
    for if_new in (False, True):
        best = min((timed_load(texts, if_new) for _ in range(args.repeats)), key=lambda row: row[1])
        wall, cpu, result = best
        print(
            f"if_new={if_new!s:5}  wall {wall:6.2f} s  cpu {cpu:6.2f} s  "
            f"added {result.added:,}  skipped {len(result.skipped):,}  "
            f"featureless {result.featureless:,}",
            flush=True,
        )


if __name__ == "__main__":
    main()
