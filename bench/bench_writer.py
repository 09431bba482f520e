"""Single adds: ``db.add`` in a loop, the batching writer ``db.writer()``, and one
``add_texts``/``add_many`` call, side by side, into an empty database and into one prefilled
with random fingerprints (issue #16); then where one ``db.add`` spends its time; then one
flush of ``--interleaved`` operations, adds and removes alternating, into a database of
100,000 fingerprints: as the writer gathers its removes, in call order (a batch per run of one
kind, as before it gathered them), and its adds alone.

    python bench/bench_writer.py --prefill 200000 --docs 5000 --loop-docs 500 --interleaved 10000

Documents are generated texts of a few KB (``--words`` words each); every method adds its
own keys, texts fingerprinted inside the timing.  "fingerprint" rows add the same documents
as precomputed fingerprints, isolating the write path from fingerprinting.  Durable commits
(LMDB's default sync) throughout, on the filesystem of ``--dir``.
"""

from __future__ import annotations

import argparse
import os
import platform
import random
import shutil
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import lmdb

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import simdb
import simdb.storage
from simdb.database import DEFAULT_MAX_BATCH

VOCABULARY = [f"{stem}{n}" for stem in ("data", "word", "text", "page", "site") for n in range(2_000)]


def make_texts(count: int, words: int, seed: int) -> list[str]:
    rng = random.Random(seed)
    return [" ".join(rng.choices(VOCABULARY, k=words)) for _ in range(count)]


def per_second(count: int, run: Callable[[], object]) -> float:
    start = time.perf_counter()
    run()
    return count / (time.perf_counter() - start)


def measure(db: simdb.Database, texts: list[str], loop_docs: int, tag: str) -> dict[tuple[str, str], float]:
    """docs/s of each method on ``db``, from text and from fingerprints."""
    fingerprints = db.fingerprinter.fingerprints_and_sketches(texts)[0] if db.fingerprinter else []
    few = texts[:loop_docs]

    def add_loop() -> None:
        for n, text in enumerate(few):
            db.add(f"{tag}-loop-{n}", text=text)

    def add_loop_fp() -> None:
        for n, fingerprint in enumerate(fingerprints[:loop_docs]):
            db.add(f"{tag}-loopfp-{n}", fingerprint)

    def writer(max_batch: int = DEFAULT_MAX_BATCH) -> None:
        with db.writer(max_batch=max_batch) as batching:
            for n, text in enumerate(texts):
                batching.add(f"{tag}-writer{max_batch}-{n}", text=text)

    def writer_fp(max_batch: int = DEFAULT_MAX_BATCH) -> None:
        with db.writer(max_batch=max_batch) as batching:
            for n, fingerprint in enumerate(fingerprints):
                batching.add(f"{tag}-writerfp{max_batch}-{n}", fingerprint)

    return {
        ("text", "db.add loop"): per_second(len(few), add_loop),
        ("text", "db.writer() adds"): per_second(len(texts), writer),
        ("text", "db.writer(max_batch=1000) adds"): per_second(len(texts), lambda: writer(1_000)),
        ("text", "add_texts, one call"): per_second(
            len(texts), lambda: db.add_texts((f"{tag}-texts-{n}", text) for n, text in enumerate(texts))
        ),
        ("fingerprint", "db.add loop"): per_second(len(few), add_loop_fp),
        ("fingerprint", "db.writer() adds"): per_second(len(texts), writer_fp),
        ("fingerprint", "db.writer(max_batch=1000) adds"): per_second(len(texts), lambda: writer_fp(1_000)),
        ("fingerprint", "add_many, one call"): per_second(
            len(texts), lambda: db.add_many((f"{tag}-many-{n}", fp) for n, fp in enumerate(fingerprints))
        ),
    }


def one_add_costs(directory: Path, texts: list[str], count: int) -> list[tuple[str, float]]:
    """Milliseconds per call: the fsync alone, a bare LMDB commit, and db.add with LMDB's
    sync and without it (the work beside the commit)."""
    rows: list[tuple[str, float]] = []
    probe = directory / "fsync-probe"
    fd = os.open(probe, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        start = time.perf_counter()
        for _ in range(count):
            os.pwrite(fd, b"x" * 4096, 0)
            os.fdatasync(fd)
        rows.append(("pwrite 4 KiB + fdatasync", (time.perf_counter() - start) / count * 1e3))
    finally:
        os.close(fd)
    bare = lmdb.open(str(directory / "bare"), map_size=1 << 30, max_dbs=12)
    tables = [bare.open_db(f"t{n}".encode()) for n in range(9)]  # as many as one add writes
    rng = random.Random(1)
    start = time.perf_counter()
    for n in range(count):
        with bare.begin(write=True) as txn:
            for table in tables:
                txn.put(rng.getrandbits(64).to_bytes(8, "big") + n.to_bytes(8, "big"), b"", db=table)
    rows.append(("bare LMDB commit, 9 sub-databases", (time.perf_counter() - start) / count * 1e3))
    bare.close()
    original = lmdb.open
    for synced in (True, False):
        if not synced:  # measurement only: the same environment without LMDB's fsyncs
            simdb.storage.lmdb.open = lambda *a, **k: original(*a, **{**k, "sync": False})  # type: ignore[assignment]
        try:
            db = simdb.open(directory / f"one-add-{synced}")
        finally:
            simdb.storage.lmdb.open = original
        with db:
            db.add("first", text=texts[0])
            for what, call in (
                ("fingerprint", lambda n: db.add(f"fp-{n}", rng.getrandbits(64))),
                ("text", lambda n: db.add(f"text-{n}", text=texts[n % len(texts)])),
            ):
                start = time.perf_counter()
                for n in range(count):
                    call(n)
                label = "db.add(key, fp)" if what == "fingerprint" else "db.add(key, text=...)"
                rows.append(
                    (
                        f"{label}, {'durable' if synced else 'sync off (work only)'}",
                        (time.perf_counter() - start) / count * 1e3,
                    )
                )
    return rows


def interleaved(directory: Path, operations: int) -> list[tuple[str, float]]:
    """Seconds of one writer flush of ``operations`` alternating fingerprint adds and removes
    of stored keys, into a fresh copy of a 100,000-document database each time: gathered
    (the writer's schedule), in call order (``_runs`` replaced by runs of one kind in call
    order), and the adds alone."""
    from simdb.writer import BatchWriter, _by_kind

    rows = []
    for label in ("adds and removes, removes gathered", "adds and removes, in call order", "its adds alone"):
        rng = random.Random(7)
        with simdb.open(directory / f"interleaved-{len(rows)}") as db:
            db.add_many((f"old-{n}", rng.getrandbits(64)) for n in range(100_000))
            gathered = BatchWriter._runs
            if label.endswith("call order"):
                BatchWriter._runs = lambda self, operations: _by_kind(operations)  # type: ignore[method-assign]
            try:
                writer = db.writer(max_batch=operations + 1, max_delay=1e9)
                for n in range(operations):
                    if n % 2 == 0:
                        writer.add(f"new-{n}", rng.getrandbits(64))
                    elif not label.endswith("alone"):
                        writer.remove(f"old-{rng.randrange(100_000)}")
                started = time.perf_counter()
                writer.close()
                rows.append((label, time.perf_counter() - started))
            finally:
                BatchWriter._runs = gathered  # type: ignore[method-assign]
    return rows


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--prefill", type=int, default=200_000, help="random fingerprints in the full database")
    parser.add_argument("--docs", type=int, default=20_000, help="documents per batched method")
    parser.add_argument("--loop-docs", type=int, default=500, help="documents for the db.add loop")
    parser.add_argument("--words", type=int, default=500, help="words per document (about 7 bytes each)")
    parser.add_argument("--dir", type=Path, default=None, help="where the databases go (default: a temporary dir)")
    parser.add_argument("--interleaved", type=int, default=10_000, help="operations of the interleaved flush (0: none)")
    args = parser.parse_args(argv)
    directory = Path(tempfile.mkdtemp(prefix="simdb-writer-", dir=args.dir))
    try:
        texts = make_texts(args.docs, args.words, seed=1)
        size = sum(map(len, texts)) // len(texts)
        results = {}
        for label, prefill in (("empty", 0), (f"{args.prefill:,} docs", args.prefill)):
            with simdb.open(directory / f"db-{prefill}") as db:
                db.fingerprint("store the default settings")
                rng = random.Random(prefill)
                for start in range(0, prefill, 100_000):
                    db.add_many((f"pre-{n}", rng.getrandbits(64)) for n in range(start, min(prefill, start + 100_000)))
                results[label] = measure(db, texts, args.loop_docs, "m")
        costs = one_add_costs(directory, texts, args.loop_docs)
        flushes = interleaved(directory, args.interleaved) if args.interleaved else []
    finally:
        shutil.rmtree(directory, ignore_errors=True)
    print(f"`python bench/bench_writer.py {' '.join(argv if argv is not None else sys.argv[1:])}`".replace(" `", "`"))
    print(
        f"machine: {platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}, "
        f"load average {os.getloadavg()[0]:.1f}; documents of {size:,} bytes ({args.words} words)\n"
    )
    labels = list(results)
    full = labels[-1]
    print(
        "| input | method | "
        + " | ".join(f"docs/s into {label}" for label in labels)
        + f" | x db.add loop ({full}) | / one call ({full}) |"
    )
    print("|---|---|" + "---|" * len(labels) + "---|---|")
    for kind, method in results[labels[0]]:
        rates = [results[label][(kind, method)] for label in labels]
        loop = results[full][(kind, "db.add loop")]
        one_call = next(rate for (k, m), rate in results[full].items() if k == kind and m.endswith("one call"))
        cells = " | ".join(f"{rate:,.0f}" for rate in rates)
        print(f"| {kind} | {method} | {cells} | {rates[-1] / loop:.1f} | {rates[-1] / one_call:.2f} |")
    print("\n| one call | ms |\n|---|---|")
    for what, milliseconds in costs:
        print(f"| {what} | {milliseconds:.3f} |")
    if flushes:
        print(f"\n| one flush of {args.interleaved:,} operations into 100,000 documents | s |\n|---|---|")
        for what, seconds in flushes:
            print(f"| {what} | {seconds:.2f} |")


if __name__ == "__main__":
    main()
