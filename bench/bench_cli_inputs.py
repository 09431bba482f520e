"""Command-line input paths, side by side across source trees: ``simdb query -f DIR`` over
files that match nothing, and ``simdb add --jsonl`` of lines some of whose metas nest past
what the database stores.

    python bench/bench_cli_inputs.py --trees /path/to/old/checkout . --rounds 2

Each tree runs as ``python -m simdb_cli`` with ``PYTHONPATH`` set to it (a checkout whose
``simdb_cli`` links to its ``cli/``), taking turns, on inputs generated once into a
scratch directory.  Prints a Markdown table of wall seconds.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def make_inputs(scratch: Path, files: int, lines: int, deep_every: int) -> None:
    """``docs/``: ``files`` texts of 400 invented words, unrelated to each other and to the
    one stored document; ``deep.jsonl``: ``lines`` documents, every ``deep_every``-th with a
    meta nested 150 levels deep."""
    rng = random.Random(1)
    words = ["".join(rng.choice("abcdefghij") for _ in range(6)) for _ in range(5000)]
    (scratch / "docs").mkdir()
    for number in range(files):
        (scratch / "docs" / f"{number}.txt").write_text(" ".join(rng.choice(words) for _ in range(400)))
    (scratch / "seed").mkdir()
    (scratch / "seed" / "a.txt").write_text("some unrelated seed document about weather and rain")
    deep: object = 1
    for _ in range(150):
        deep = [deep]
    with open(scratch / "deep.jsonl", "w") as stream:
        for number in range(lines):
            record = {"id": f"d{number}", "text": f"document number {number} with some words {number * 7} and more"}
            if number % deep_every == deep_every // 2:
                record["m"] = deep
            stream.write(json.dumps(record) + "\n")


def timed(tree: str, arguments: list[str], scratch: Path) -> float:
    environment = {**os.environ, "PYTHONPATH": str(Path(tree).resolve()), "SIMDB_PATH": ""}
    started = time.perf_counter()
    subprocess.run(
        [sys.executable, "-m", "simdb_cli", *arguments],
        cwd=scratch,
        env=environment,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        check=False,
    )
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trees", nargs="+", default=["."], help="source trees to compare")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--files", type=int, default=3000)
    parser.add_argument("--lines", type=int, default=5000)
    parser.add_argument("--deep-every", type=int, default=100)
    options = parser.parse_args()
    scratch = Path(tempfile.mkdtemp(prefix="bench-cli-inputs-"))
    try:
        make_inputs(scratch, options.files, options.lines, options.deep_every)
        timed(options.trees[0], ["add", "seed", "--db", "queried"], scratch)
        print(
            f"# {options.files:,} files matching nothing; {options.lines:,} JSONL lines, 1 in {options.deep_every} "
            f"with a meta nested 150 deep; {os.cpu_count()} cores; wall seconds"
        )
        print("| tree | round | query -f DIR | add --jsonl (--workers 1) |")
        print("|---|---|---|---|")
        for round_number in range(1, options.rounds + 1):
            for tree in options.trees:
                query = timed(tree, ["query", "--db", "queried", "-f", "docs"], scratch)
                shutil.rmtree(scratch / "added", ignore_errors=True)
                add = timed(tree, ["add", "--jsonl", "deep.jsonl", "--db", "added", "--workers", "1"], scratch)
                print(f"| {tree} | {round_number} | {query:.2f} | {add:.2f} |")
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    main()
