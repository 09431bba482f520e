"""Shared test helpers: brute-force references and fingerprint generators."""

from __future__ import annotations

import random
import shutil
import struct
import subprocess
import sys
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from hypothesis import settings

import simdb.config

settings.register_profile("ci", deadline=None, max_examples=60, derandomize=True)
settings.register_profile("dev", deadline=None, max_examples=60)
settings.load_profile("ci")

BITS = 64


def hamming(a: int, b: int) -> int:
    return (a ^ b).bit_count()


def brute_force_query(stored: dict[str, int], query: int, k: int) -> list[tuple[str, int]]:
    """Every (key, distance) within k bits, by scanning everything."""
    return sorted((key, hamming(fp, query)) for key, fp in stored.items() if hamming(fp, query) <= k)


def flip_bits(fingerprint: int, count: int, rng: random.Random) -> int:
    for bit in rng.sample(range(BITS), count):
        fingerprint ^= 1 << bit
    return fingerprint


def clustered(count: int, rng: random.Random, spread: int = 4, bases: int = 5) -> list[int]:
    """Fingerprints near a few bases (0..spread bits away), with exact repeats."""
    roots = [rng.getrandbits(BITS) for _ in range(bases)]
    return [flip_bits(rng.choice(roots), rng.randint(0, spread), rng) for _ in range(count)]


def as_items(fingerprints: Iterable[int], prefix: str = "doc") -> list[tuple[str, int]]:
    return [(f"{prefix}-{i}", fp) for i, fp in enumerate(fingerprints)]


@pytest.fixture
def db_path(tmp_path):
    return tmp_path / "db"


@contextmanager
def creating_format(version: int) -> Iterator[None]:
    """Databases created inside are created in the older format ``version``, by the code
    that still reads and writes it (for formats 1 and 2, the one-B-tree-per-table layer that
    the releases before format 3 wrote), as a database from such a release would be."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(simdb.config, "FORMAT_VERSION", version)
        yield


def run_python_or_fail_on_hang(
    script: str, *args: object, timeout: float, hung: str
) -> subprocess.CompletedProcess[str]:
    """Run ``script`` in a Python process of its own, from the project's root, and return
    it finished; fail the test with ``hung`` if it runs past ``timeout`` seconds.  For
    tests whose fault is a hang: it fails them by the timeout instead of stopping the run."""
    try:
        return subprocess.run(
            [sys.executable, "-c", script, *map(str, args)],
            capture_output=True,
            text=True,
            timeout=timeout,
            cwd=Path(__file__).parent.parent,
        )
    except subprocess.TimeoutExpired:
        pytest.fail(hung)


def copies_with_a_zeroed_leaf(tmp_path: Path, documents: int = 5000) -> Iterator[Path]:
    """Copies of one compacted database (every page live), each with one of its table or
    record leaf pages zeroed: damage LMDB does not detect, and which can make its assertion
    in mdb_cursor_next abort the reading process.  Every third leaf of the first half."""
    db = tmp_path / "db"
    rng = random.Random(0)
    with simdb.open(db, k=3) as database:
        database.add_many([(f"doc{i}", rng.getrandbits(64), {"i": i}) for i in range(documents)])
        database.compact()
    name = (db / "CURRENT").read_text().split()[0]
    pages = (db / name).read_bytes()
    page_size = 4096
    # A page whose header (page number, pad, flags) names itself with the leaf flag (0x02).
    leaves = [
        number
        for number in range(2, len(pages) // page_size)
        if struct.unpack_from("<QHH", pages, number * page_size)[0] == number
        and struct.unpack_from("<QHH", pages, number * page_size)[2] & 0x02
    ]
    for number in leaves[: len(leaves) // 2 : 3]:
        damaged = tmp_path / f"damaged-{number}"
        shutil.copytree(db, damaged)
        with open(damaged / name, "r+b") as data_file:
            data_file.seek(number * page_size)
            data_file.write(bytes(page_size))
        yield damaged
