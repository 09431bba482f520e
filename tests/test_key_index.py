"""The log-structured key index of format 5 (simdb/key_index.py) against a dict oracle, with
8-byte hash collisions forced; its Bloom filters (never a false negative); a database whose
keys all collide in groups; and a writer whose cached filters another process made stale."""

from __future__ import annotations

import hashlib
import random
import subprocess
import sys
import tempfile
from pathlib import Path

import lmdb
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

import simdb
from simdb.key_index import RunKeyIndex
from simdb.keys import index_key_order
from simdb.storage import BareHandles
from simdb.tables import Policy, encode_filter, filter_holds, filter_probes
from tests.conftest import brute_force_query

ROOT = Path(__file__).resolve().parent.parent


@given(
    values=st.lists(st.integers(0, (1 << 64) - 1), min_size=1, max_size=3000),
    spread=st.sampled_from([64, 40, 12]),
)
@settings(max_examples=60, deadline=None)
def test_a_filter_passes_every_value_it_holds(values: list[int], spread: int) -> None:
    """Every value put in passes, whether the values are spread over the whole word or share
    their leading bits (one chunk of a sorted run)."""
    array = np.sort(np.array([value >> (64 - spread) for value in values], dtype=np.uint64))
    words = np.frombuffer(encode_filter(array), dtype="<u8").astype(np.uint64)
    assert filter_holds(words, filter_probes(array)).all()


def test_a_filter_passes_few_values_it_does_not_hold() -> None:
    rng = np.random.default_rng(3)
    for leading in (0, 30):  # random values, and values sharing 30 leading bits
        held = np.sort(rng.integers(0, 1 << 64, 50_000, dtype=np.uint64) >> np.uint64(leading))
        others = rng.integers(0, 1 << 64, 200_000, dtype=np.uint64) >> np.uint64(leading)
        others = others[~np.isin(others, held)]
        words = np.frombuffer(encode_filter(held), dtype="<u8").astype(np.uint64)
        assert filter_holds(words, filter_probes(others)).mean() < 0.04


@given(
    st.lists(st.lists(st.integers(0, (1 << 64) - 1), min_size=1, max_size=300), min_size=1, max_size=6),
    st.lists(st.integers(0, (1 << 64) - 1), max_size=200),
)
def test_filters_joined_answer_as_each_filter_alone(held: list[list[int]], probed: list[int]) -> None:
    """Several filters of different sizes joined into one array, each value checked against
    the filter it names by start and shift, answer exactly as each filter checked alone."""
    filters = [
        np.frombuffer(encode_filter(np.array(values, dtype=np.uint64)), dtype="<u8").astype(np.uint64)
        for values in held
    ]
    joined = np.concatenate(filters)
    starts = np.cumsum([0] + [len(words) for words in filters[:-1]])
    values = np.array([value for values in held for value in values] + probed, dtype=np.uint64)
    rng = np.random.default_rng(len(values))
    named = rng.integers(0, len(filters), len(values))
    shifts = np.array([64 - (len(words).bit_length() - 1) for words in filters], dtype=np.uint64)
    together = filter_holds(joined, filter_probes(values), starts[named], shifts[named])
    alone = [bool(filter_holds(filters[f], filter_probes(values[i : i + 1]))[0]) for i, f in enumerate(named)]
    assert together.tolist() == alone


def new_index(directory: str) -> tuple[lmdb.Environment, RunKeyIndex]:
    env = lmdb.open(directory, max_dbs=256, map_size=1 << 30, sync=False)
    index = RunKeyIndex(BareHandles(env), directory, Policy(base=8, ratio=2, chunk=12))
    with env.begin(write=True) as txn:
        index.create(txn)
    return env, index


class KeyIndexModel(RuleBasedStateMachine):
    """Random puts, deletes, merges and lookups of 16-byte index keys whose first 8 bytes (the
    stored hash) come from a small pool, so that hashes collide; compared with a dict."""

    def __init__(self) -> None:
        super().__init__()
        self.env, self.index = new_index(tempfile.mkdtemp(prefix="simdb-keys-"))
        self.stored: dict[bytes, int] = {}
        self.next_id = 0
        self.hashes = [random.Random(5).getrandbits(64).to_bytes(8, "big")]

    def teardown(self) -> None:
        self.env.close()

    def _key(self, rng: random.Random) -> bytes:
        return rng.choice(self.hashes) + rng.getrandbits(64).to_bytes(8, "big")

    def expected(self, key: bytes) -> list[int]:
        return sorted(doc_id for stored, doc_id in self.stored.items() if stored[:8] == key[:8])

    @rule(count=st.integers(1, 40), seed=st.integers(0, 1 << 30), fresh=st.integers(0, 3))
    def put(self, count: int, seed: int, fresh: int) -> None:
        rng = random.Random(seed)
        self.hashes.extend(rng.getrandbits(64).to_bytes(8, "big") for _ in range(fresh))
        keys = list({self._key(rng) for _ in range(count)} - set(self.stored))  # a stored key is never new
        if not keys:
            return
        with self.env.begin(write=True) as txn:
            self.index.put_new(txn, self.next_id, index_key_order(keys))
        self.stored.update(zip(keys, range(self.next_id, self.next_id + len(keys))))
        self.next_id += len(keys)

    @precondition(lambda self: self.stored)
    @rule(seed=st.integers(0, 1 << 30), share=st.floats(0.05, 1.0))
    def delete(self, seed: int, share: float) -> None:
        keys = random.Random(seed).sample(sorted(self.stored), max(1, int(len(self.stored) * share)))
        with self.env.begin(write=True) as txn:
            self.index.delete(txn, keys, [self.stored[key] for key in keys])
        for key in keys:
            del self.stored[key]

    @rule(budget=st.integers(1, 400))
    def merge(self, budget: int) -> None:
        with self.env.begin(write=True) as txn:
            self.index.runs.merge(txn, budget)

    @rule(seed=st.integers(0, 1 << 30), count=st.sampled_from([1, 5, 70, 200]))
    def lookup(self, seed: int, count: int) -> None:
        """Batches of 64 or more lookups go through the filters, smaller ones seek."""
        rng = random.Random(seed)
        stored = sorted(self.stored)
        keys = [rng.choice(stored) if stored and rng.random() < 0.5 else self._key(rng) for _ in range(count)]
        with self.env.begin() as txn:
            expected = {position: self.expected(key) for position, key in enumerate(keys)}
            assert self.index.candidates(txn, keys) == {position: ids for position, ids in expected.items() if ids}

    @invariant()
    def consistent(self) -> None:
        with self.env.begin() as txn:
            assert self.index.verify(txn, list(self.stored), list(self.stored.values())) == []
            assert self.index.count(txn) == len(self.stored)


KeyIndexModel.TestCase.settings = settings(
    max_examples=30, stateful_step_count=30, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
test_key_index_model = KeyIndexModel.TestCase


def test_check_finds_a_key_missing_from_a_run_filter(tmp_path: Path) -> None:
    """Even in a process that has the filters cached from lookups: check reads them as stored."""
    env, index = new_index(str(tmp_path))
    keys = [random.Random(1).getrandbits(128).to_bytes(16, "big") for _ in range(100)]
    with env.begin(write=True) as txn:
        index.put_new(txn, 0, index_key_order(keys))
    with env.begin() as txn:
        assert len(index.candidates(txn, keys)) == len(keys)  # 100 lookups: through the filters
    with env.begin(write=True) as txn:
        filters = [name for name in index.names if b".f" in name]
        emptied = 0
        for name in filters:
            db = index.handles.db(name)
            for key, value in list(txn.cursor(db)):
                txn.put(key, bytes(len(value)), db=db)
                emptied += 1
        assert emptied
    with env.begin() as txn:
        problems = index.verify(txn, keys, list(range(len(keys))))
    assert any("missing from the run's filter" in problem for problem in problems), problems


def test_a_hash_repeated_across_filter_chunks_hides_no_other_key(tmp_path: Path, monkeypatch) -> None:
    """Chunks start where values change: a hash stored more times than a chunk holds never
    leaves two chunks with the same first value (of which only one would be consulted)."""
    import simdb.tables

    monkeypatch.setattr(simdb.tables, "FILTER_CHUNK", 2)
    env, index = new_index(str(tmp_path))
    rng = random.Random(4)
    keys = [(1000).to_bytes(8, "big") + rng.getrandbits(64).to_bytes(8, "big") for _ in range(5)]
    keys += [value.to_bytes(8, "big") + rng.getrandbits(64).to_bytes(8, "big") for value in (2000, 3000, 4000)]
    with env.begin(write=True) as txn:
        index.put_new(txn, 0, index_key_order(keys))
    lookups = keys * 10  # 80: through the filters
    with env.begin() as txn:
        found = index.candidates(txn, lookups)
        assert index.verify(txn, keys, list(range(len(keys)))) == []
    repeated = list(range(5))
    assert [found[position] for position in range(len(lookups))] == [
        repeated if key[:8] == keys[0][:8] else [keys.index(key)] for key in lookups
    ]


def test_lookups_through_runs_of_many_filter_chunks_find_every_key(tmp_path: Path, monkeypatch) -> None:
    """Runs whose filters come in many chunks of different sizes (a run written whole, cut
    every 500 keys, and merge steps): a batch of lookups checks each key against its own
    chunk, so every stored key is found, and check() finds every entry in its filter."""
    import simdb.tables

    monkeypatch.setattr(simdb.tables, "FILTER_CHUNK", 500)
    env = lmdb.open(str(tmp_path), max_dbs=256, map_size=1 << 30, sync=False)
    index = RunKeyIndex(BareHandles(env), str(tmp_path), Policy(base=64, ratio=2, chunk=700))
    rng = random.Random(8)
    keys = [rng.getrandbits(128).to_bytes(16, "big") for _ in range(9_000)]
    with env.begin(write=True) as txn:
        index.create(txn)
        for start in range(0, len(keys), 3_000):  # three runs of six chunks, then merges
            index.put_new(txn, start, index_key_order(keys[start : start + 3_000]))
    with env.begin() as txn:
        assert index.count(txn) == len(keys)
        chunks = sum(txn.stat(index.handles.db(name))["entries"] for name in index.names if b".f" in name)
        assert chunks >= 12
        found = index.candidates(txn, keys)
        absent = index.candidates(txn, [rng.getrandbits(128).to_bytes(16, "big") for _ in range(2_000)])
        assert index.verify(txn, keys, list(range(len(keys)))) == []
    assert found == {position: [position] for position in range(len(keys))}
    assert absent == {}


def test_filter_chunks_appended_by_two_holders_never_overwrite_each_other() -> None:
    """Two threads holding the same cached run filter each append the chunks their
    snapshots see: the first appends in place, the second must copy, so neither's words
    change under the other (and the first holder's words stay as they were)."""
    from simdb.tables import _RunFilter

    def chunk(seed: int, size: int) -> np.ndarray:
        return np.random.default_rng(seed).integers(0, 1 << 64, size, dtype=np.uint64)

    def key(first: int) -> bytes:
        return first.to_bytes(8, "big") + bytes(8)

    base = _RunFilter.build(1, key(10), [key(10)], [chunk(1, 4)])
    first = _RunFilter.build(2, key(20), [key(20)], [chunk(2, 2)], base)
    second = _RunFilter.build(2, key(30), [key(30)], [chunk(3, 2)], base)
    third = _RunFilter.build(3, key(40), [key(40)], [chunk(4, 12)], first)  # beyond the room of 16 words
    assert base.joined.tolist() == chunk(1, 4).tolist()
    assert first.joined.tolist() == chunk(1, 4).tolist() + chunk(2, 2).tolist()
    assert second.joined.tolist() == chunk(1, 4).tolist() + chunk(3, 2).tolist()
    assert third.joined.tolist() == chunk(1, 4).tolist() + chunk(2, 2).tolist() + chunk(4, 12).tolist()
    assert third.starts.tolist() == [0, 4, 6] and third.firsts.tolist() == [10, 20, 40]


def colliding_index_key(encoded_key: bytes) -> bytes:
    """An index key whose first 8 bytes (the stored hash) take one of 16 values: many keys
    share each, as crafted or unlucky keys would."""
    digest = hashlib.blake2b(encoded_key, digest_size=16).digest()
    return bytes(7) + bytes((digest[0] & 15,)) + digest[8:]


@pytest.fixture
def colliding_keys(monkeypatch: pytest.MonkeyPatch) -> None:
    import simdb.batch
    import simdb.database
    import simdb.records
    import simdb.writer

    for module in (simdb.batch, simdb.database, simdb.records, simdb.writer):
        monkeypatch.setattr(module, "index_key", colliding_index_key, raising=False)
    monkeypatch.setattr(simdb.batch, "index_keys", lambda keys: [colliding_index_key(key) for key in keys])


def test_keys_whose_hashes_collide_are_told_apart_by_the_stored_key(db_path, colliding_keys) -> None:
    """Adds, replacements, unchanged re-adds, if_new, removals (one by one, in batches,
    through a writer) and compaction, with every key sharing its hash with about 1/16 of the
    others: the database agrees with a dict and with a Hamming scan throughout."""
    rng = random.Random(8)
    stored: dict[str, int] = {}
    with simdb.open(db_path, k=3, blocks=5) as db:
        for round_number in range(6):
            batch = {f"key-{rng.randrange(3000)}": rng.getrandbits(64) for _ in range(600)}
            result = db.add_many(batch.items(), batch_size=rng.choice([50, 1000]))
            assert result.added == len(set(batch) - set(stored))
            stored.update(batch)
            gone = rng.sample(sorted(stored), 100)
            assert db.remove_many(gone + gone[:10]) == 100
            for key in gone:
                del stored[key]
            with db.writer() as writer:
                for _ in range(50):
                    key = f"key-{rng.randrange(3000)}"
                    stored[key] = rng.getrandbits(64)
                    writer.add(key, stored[key])
            if round_number == 3:
                db.compact()
            assert len(db) == len(stored)
            assert db.check()
        same = db.add_many(list(stored.items())[:200])
        assert (same.added, same.replaced, same.unchanged) == (0, 0, 200)
        for key in [*rng.sample(sorted(stored), 50), "never-added"]:
            found = db.get(key)
            assert (found.fingerprint if found else None) == stored.get(key)
        assert sorted(db.keys()) == sorted(stored)
        for query in rng.sample(list(stored.values()), 20):
            got = sorted((match.key, match.distance) for match in db.query(query, k=3))
            assert got == brute_force_query(stored, query, 3)


WRITER_SCRIPT = """
import sys, simdb
with simdb.open(sys.argv[1]) as db:
    db.add_many([(f"other-{i}", i * 7919) for i in range(int(sys.argv[2]))], batch_size=int(sys.argv[3]))
"""


def test_filters_cached_by_one_process_stay_right_after_another_rewrites_the_runs(db_path) -> None:
    """A process looks keys up (caching the runs' filters); another process adds enough to
    merge runs, free their slots and fill them again; the first then finds every key the
    other added (each replaced, none added twice)."""
    with simdb.open(db_path, k=3, blocks=5) as db:
        db.add_many([(f"mine-{i}", i) for i in range(40_000)], batch_size=20_000)
        assert db.add_many([(f"mine-{i}", i) for i in range(1_000)]).unchanged == 1_000  # filters cached
        subprocess.run([sys.executable, "-c", WRITER_SCRIPT, str(db_path), "150000", "17000"], check=True, cwd=ROOT)
        again = db.add_many([(f"other-{i}", i * 7919 + 1) for i in range(0, 150_000, 7)])
        assert again.added == 0 and again.replaced == len(range(0, 150_000, 7))
        assert len(db) == 190_000 and db.check()
