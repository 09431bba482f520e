"""Re-adding a document exactly as it is stored is counted as unchanged and writes nothing
of it (``AddResult.unchanged``); any difference (fingerprint, meta, sketch) replaces it."""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import lmdb
import pytest

import simdb


def raw_state(path: Path) -> dict[bytes, list[tuple[bytes, bytes]]]:
    """Every entry of every named sub-database, read straight from LMDB: the stored state."""
    current = (path / "CURRENT").read_text().split()[0]  # the live data file (see simdb/storage.py)
    env = lmdb.open(str(path / current), readonly=True, lock=False, max_dbs=4096, subdir=False)
    try:
        with env.begin() as txn:
            names = [name for name, _ in txn.cursor()]
            state = {}
            for name in names:
                db = env.open_db(name, txn=txn, create=False)
                state[name] = list(txn.cursor(db))
        return state
    finally:
        env.close()


def test_unchanged_fingerprints_are_counted_and_not_rewritten(tmp_path: Path) -> None:
    rng = random.Random(7)
    stored: dict[str, tuple[int, Any]] = {f"doc-{i}": (rng.getrandbits(64), {"n": i}) for i in range(300)}
    path = tmp_path / "db"
    with simdb.open(path, k=3) as db:
        db.add_many([(key, fp, meta) for key, (fp, meta) in stored.items()], batch_size=97)
    items = []
    expected = {"added": 0, "replaced": 0, "unchanged": 0}
    for key, (fp, meta) in list(stored.items()):
        change = rng.choice(["same", "same", "fingerprint", "meta"])
        if change == "fingerprint":
            fp ^= 1 << rng.randrange(64)
        elif change == "meta":
            meta = {"n": meta["n"], "edited": True}
        items.append((key, fp, meta))
        if (fp, meta) == stored[key]:
            expected["unchanged"] += 1
        else:
            expected["replaced"] += 1
        stored[key] = (fp, meta)
    for i in range(20):
        key = f"new-{i}"
        stored[key] = (rng.getrandbits(64), None)
        items.append((key, *stored[key]))
        expected["added"] += 1
    rng.shuffle(items)
    with simdb.open(path) as db:
        result = db.add_many(items, batch_size=61)
        assert {"added": result.added, "replaced": result.replaced, "unchanged": result.unchanged} == expected
        assert {doc.key: (doc.fingerprint, doc.meta) for doc in db.items()} == stored
        assert db.check()
    # A second run of the same items changes nothing at all.
    before = raw_state(path)
    with simdb.open(path) as db:
        again = db.add_many(items, batch_size=61)
    assert (again.added, again.replaced, again.unchanged) == (0, 0, len(items))
    after = raw_state(path)
    assert {name: entries for name, entries in after.items() if name != b"meta"} == {
        name: entries for name, entries in before.items() if name != b"meta"
    }


def test_a_text_is_unchanged_only_with_the_same_sketch(tmp_path: Path) -> None:
    path = tmp_path / "db"
    with simdb.open(path) as db:
        db.add_texts([("a", "the same words in the same order", {"m": 1}), ("b", "other words entirely here")])
        same = db.add_texts([("a", "the same words in the same order", {"m": 1})])
        assert (same.added, same.replaced, same.unchanged) == (0, 0, 1)
        # The same fingerprint stored as a fingerprint would drop the sketch: a change.
        fingerprint = db.get("b").fingerprint
        as_fingerprint = db.add("b", fingerprint)
        assert (as_fingerprint.replaced, as_fingerprint.unchanged) == (1, 0)
        again = db.add("b", fingerprint)
        assert (again.replaced, again.unchanged) == (0, 1)
        edited = db.add_texts([("a", "the same words in the same order", {"m": 2})])
        assert (edited.replaced, edited.unchanged) == (1, 0)
        assert db.get("a").meta == {"m": 2}
        assert db.check()


@pytest.mark.parametrize("seed", range(6))
def test_batches_count_as_adding_one_by_one_does(tmp_path: Path, seed: int) -> None:
    """Keys repeated within a batch, with values that change and change back: the counts
    (added, replaced, unchanged) and what is stored match adding the items one at a time."""
    rng = random.Random(seed)
    items = [(rng.choice("abcd"), rng.choice([1, 2]), rng.choice([None, {"m": 1}])) for _ in range(40)]
    with simdb.open(tmp_path / "single") as single:
        expected = [0, 0, 0]
        for item in items:
            result = single.add_many([item])
            expected = [expected[0] + result.added, expected[1] + result.replaced, expected[2] + result.unchanged]
        want = [(doc.key, doc.fingerprint, doc.meta) for doc in single.items()]
    for batch_size in (1, 3, 7, 40):
        with simdb.open(tmp_path / f"batched-{batch_size}") as batched:
            result = batched.add_many(items, batch_size=batch_size)
            assert [result.added, result.replaced, result.unchanged] == expected, batch_size
            assert [(doc.key, doc.fingerprint, doc.meta) for doc in batched.items()] == want
            assert not batched.check().problems
