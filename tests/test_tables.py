"""The log-structured tables layer (simdb/tables.py) against a brute-force Hamming oracle, its
crash safety under SIGKILL during merges, and verify() finding damaged blocks."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import lmdb
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

import simdb.tables
from simdb.blocks import decode_blocks, encode_block, encode_blocks
from simdb.errors import CorruptDatabaseError
from simdb.plan import TablePlan
from simdb.storage import BareHandles
from simdb.tables import Policy, Tables
from tests.tables_worker import model, open_layer

ROOT = Path(__file__).resolve().parent.parent
PLAN = TablePlan.create(3)
# Batches of 4-7 become runs below the recent tree's size, as batches of 4,096-16,383 do by
# default; smaller ones go into the recent tree.
TINY = Policy(base=8, ratio=2, chunk=12, run_at=4)


def brute(stored: dict[int, int], query: int, k: int) -> dict[int, int]:
    return {doc_id: (fp ^ query).bit_count() for doc_id, fp in stored.items() if (fp ^ query).bit_count() <= k}


def new_layer(directory: str, policy: Policy = TINY) -> tuple[lmdb.Environment, Tables]:
    env = lmdb.open(directory, max_dbs=512, map_size=1 << 30, sync=False)
    tables = Tables(PLAN, BareHandles(env), policy)
    with env.begin(write=True) as txn:
        tables.create(txn)
    return env, tables


@pytest.fixture(autouse=True)
def batch_search_for_small_batches(monkeypatch: pytest.MonkeyPatch) -> None:
    """The tests here reach the batch search with batches of a few queries, which it
    otherwise leaves to a probe each (simdb.tables.PROBE_EACH_BELOW)."""
    monkeypatch.setattr(simdb.tables, "PROBE_EACH_BELOW", 0)


fingerprint_pool = st.lists(st.integers(0, (1 << 64) - 1), min_size=1, max_size=6)


class TablesModel(RuleBasedStateMachine):
    """Random puts, deletes, merges and probes, compared with a dict after every step."""

    def __init__(self) -> None:
        super().__init__()
        self.directory = tempfile.mkdtemp(prefix="simdb-tables-")
        self.env, self.tables = new_layer(self.directory)
        self.stored: dict[int, int] = {}
        self.next_id = 0
        self.roots = [random.Random(1).getrandbits(64)]

    def teardown(self) -> None:
        self.env.close()

    def _near(self, rng: random.Random) -> int:
        """A fingerprint 0-4 bits from a root, so probes meet matches at every distance."""
        value = rng.choice(self.roots)
        for bit in rng.sample(range(64), rng.randint(0, 4)):
            value ^= 1 << bit
        return value

    @rule(count=st.integers(1, 40), seed=st.integers(0, 1 << 30), fresh=fingerprint_pool)
    def put(self, count: int, seed: int, fresh: list[int]) -> None:
        rng = random.Random(seed)
        self.roots.extend(fresh)
        fingerprints = [self._near(rng) for _ in range(count)]
        ids = list(range(self.next_id, self.next_id + count))
        self.next_id += count
        with self.env.begin(write=True) as txn:
            self.tables.put_many(txn, np.array(ids, dtype=np.uint64), np.array(fingerprints, dtype=np.uint64))
        self.stored.update(zip(ids, fingerprints))

    @precondition(lambda self: self.stored)
    @rule(seed=st.integers(0, 1 << 30), share=st.floats(0.05, 1.0))
    def delete(self, seed: int, share: float) -> None:
        ids = random.Random(seed).sample(sorted(self.stored), max(1, int(len(self.stored) * share)))
        with self.env.begin(write=True) as txn:
            removed = self.tables.delete_many(txn, ids, [self.stored[i] for i in ids])
        assert removed == len(ids) * len(PLAN.tables)
        for doc_id in ids:
            del self.stored[doc_id]

    @rule(budget=st.integers(1, 400))
    def merge(self, budget: int) -> None:
        with self.env.begin(write=True) as txn:
            self.tables.merge(txn, budget)

    @rule(seed=st.integers(0, 1 << 30), k=st.integers(0, 3))
    def probe(self, seed: int, k: int) -> None:
        rng = random.Random(seed)
        queries = [self._near(rng) for _ in range(8)]
        with self.env.begin() as txn:
            for query in queries:
                assert self.tables.probe(txn, query, k) == brute(self.stored, query, k)
            merged = self.tables.merge_many(txn, np.array(queries, dtype=np.uint64), k)
            assert merged == [brute(self.stored, query, k) for query in queries]
            # Batches read small parts whole and search the others block by block, finding
            # blocks by a seek per query or by listing a run's keys, a slice of queries at
            # a time: each way alone gives the same answers.
            for merge_ratio, list_ratio, search_slice in [(32, 10, 8192), (0, 0, 3), (0, 1 << 30, 8192)]:
                with pytest.MonkeyPatch.context() as patch:
                    patch.setattr(simdb.tables, "PART_MERGE_RATIO", merge_ratio)
                    patch.setattr(simdb.tables, "LIST_KEYS_RATIO", list_ratio)
                    patch.setattr(simdb.tables, "SEARCH_SLICE", search_slice)
                    patch.setattr(simdb.tables, "PROBE_EACH_BELOW", 0)  # a stateful case: no fixture
                    assert self.tables.probe_many(txn, np.array(queries, dtype=np.uint64), k) == merged

    @invariant()
    def consistent(self) -> None:
        with self.env.begin() as txn:
            ids, fingerprints = self.tables.scan(txn)
            expected = (
                np.array(list(self.stored), dtype=np.uint64),
                np.array(list(self.stored.values()), dtype=np.uint64),
            )
            assert self.tables.verify(txn, expected) == []
        assert dict(zip(ids.tolist(), fingerprints.tolist())) == self.stored


TablesModel.TestCase.settings = settings(
    max_examples=40, stateful_step_count=30, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
test_tables_model = TablesModel.TestCase


def test_blocks_round_trip_with_repeats_and_extremes() -> None:
    rng = np.random.default_rng(5)
    values = np.sort(
        np.concatenate(
            [
                rng.integers(0, 1 << 64, 5000, dtype=np.uint64, endpoint=False),
                np.full(3000, 7, dtype=np.uint64),
                np.array([0, (1 << 64) - 1], dtype=np.uint64),
            ]
        )
    )
    ids = rng.permutation(len(values)).astype(np.uint64)
    for with_ids in (True, False):
        blocks = encode_blocks(values, ids if with_ids else None)
        firsts = [key for key, _ in blocks]
        assert firsts == sorted(set(firsts))  # equal values never straddle blocks
        got_values, got_ids = decode_blocks(blocks, with_ids, "test")
        assert np.array_equal(got_values, values)
        if with_ids:
            assert got_ids is not None and np.array_equal(got_ids, ids)


@settings(max_examples=200, deadline=None)
@given(
    values=st.lists(st.integers(0, (1 << 64) - 1), min_size=1, max_size=300),
    spread=st.sampled_from([64, 40, 9, 0]),
    with_ids=st.booleans(),
    seed=st.integers(0, 1 << 30),
)
def test_what_is_left_of_a_block_is_encoded_as_the_general_encoder_would(
    values: list[int], spread: int, with_ids: bool, seed: int
) -> None:
    """encode_block (a block's rest after removals or a merge step) lays a block out byte for
    byte as encode_blocks does whenever that makes one block, and decodes to its input."""
    array = np.sort(np.array([value >> (64 - spread) if spread else 5 for value in values], dtype=np.uint64))
    ids = np.random.default_rng(seed).permutation(1 << 20)[: len(array)].astype(np.uint64) if with_ids else None
    blocks = encode_blocks(array, ids)
    block = encode_block(array, ids)
    if len(blocks) == 1:
        assert blocks[0] == block
    got_values, got_ids = decode_blocks([block], with_ids, "test")
    assert np.array_equal(got_values, array)
    assert got_ids is None if ids is None else np.array_equal(got_ids, ids)


def test_entries_take_under_eight_bytes_on_average(tmp_path: Path) -> None:
    """Table pages per entry at 650k random fingerprints (ten tables): 100k batches, then
    small ones through the recent trees, merging inline.  Runs under ~150k entries need
    8-byte offsets (about 8.1 bytes an entry); larger ones fewer.  The prefix filters beside
    them take 10 bits an entry, and a page's rounding."""
    env, tables = new_layer(str(tmp_path), Policy(base=4096, ratio=4))
    rng = np.random.default_rng(1)
    fingerprints = rng.integers(0, 1 << 64, 650_000, dtype=np.uint64, endpoint=False)
    batches = [(start, 100_000) for start in range(0, 600_000, 100_000)]
    for start, size in batches + [(600_000 + i * 1000, 1000) for i in range(50)]:
        with env.begin(write=True) as txn:
            tables.put_many(txn, np.arange(start, start + size, dtype=np.uint64), fingerprints[start : start + size])
    with env.begin() as txn:
        used = {
            name: (s["branch_pages"] + s["leaf_pages"] + s["overflow_pages"]) * s["psize"]
            for name, s in ((name, txn.stat(tables.handles.db(name))) for name in tables.names)
        }
        assert tables.verify(txn) == []
        assert max(level for level, _ in tables.runs(txn, 0)) >= 3  # runs were merged
    filters = sum(used[name] for name in tables.filter_names)
    assert filters > 0
    assert (sum(used.values()) - filters) / (650_000 * len(PLAN.tables)) <= 8.0
    assert filters / (650_000 * len(PLAN.tables)) <= 1.5


def _damage(env: lmdb.Environment, tables: Tables, change: str) -> None:
    with env.begin(write=True) as txn:
        runs = [tables.handles.db(name) for name in tables._runs[0]]
        db = next(db for db in runs if txn.stat(db)["entries"])
        cursor = txn.cursor(db)
        assert cursor.first()
        key, value = cursor.item()
        if change == "flip":
            damaged = bytearray(value)
            damaged[-1] ^= 0x10
            txn.put(key, bytes(damaged), db=db)
        elif change == "truncate":
            txn.put(key, value[:-3], db=db)
        else:  # a block dropped: the counts and the other tables disagree
            txn.delete(key, db=db)


@pytest.mark.parametrize(
    ("change", "reported"), [("flip", "checksum"), ("truncate", "damaged block"), ("drop", "state says")]
)
def test_verify_reports_a_damaged_block(tmp_path: Path, change: str, reported: str) -> None:
    env, tables = new_layer(str(tmp_path), Policy(base=64, ratio=4))
    rng = np.random.default_rng(2)
    with env.begin(write=True) as txn:
        tables.put_many(
            txn, np.arange(3000, dtype=np.uint64), rng.integers(0, 1 << 64, 3000, dtype=np.uint64, endpoint=False)
        )
    with env.begin() as txn:
        assert tables.verify(txn) == []
    _damage(env, tables, change)
    with env.begin() as txn:
        problems = tables.verify(txn)
    assert any(reported in problem for problem in problems), problems


@pytest.mark.slow
def test_sigkill_during_merges_leaves_the_last_committed_state(tmp_path: Path) -> None:
    """A real process applies puts, deletes and inline merges (nearly every transaction
    merges, with a tiny policy) and is SIGKILLed at random moments; each time, verify() is
    clean (prefix filters included), single probes find stored entries, and the contents
    equal the model after exactly the last step it reported, or the one after it
    (committed, not yet reported)."""
    rng = random.Random(11)
    env_path = str(tmp_path / "db")
    os.makedirs(env_path)
    environment = dict(os.environ, PYTHONPATH=str(ROOT))
    for trial in range(6):
        worker = subprocess.Popen(
            [sys.executable, "-m", "tests.tables_worker", env_path],
            cwd=ROOT,
            env=environment,
            stdout=subprocess.PIPE,
            text=True,
        )
        time.sleep(rng.uniform(1.0, 2.5))
        worker.send_signal(signal.SIGKILL)
        output, _ = worker.communicate()
        reported = [int(line) for line in output.split()]
        assert reported, f"trial {trial}: the worker committed nothing"
        env, tables = open_layer(env_path)
        try:
            with env.begin() as txn:
                assert tables.verify(txn) == [], f"trial {trial}"
                ids, fingerprints = tables.scan(txn)
                # Single probes go through the runs' prefix filters as the kill left them.
                for doc_id, fingerprint in rng.sample(list(zip(ids.tolist(), fingerprints.tolist())), 50):
                    assert doc_id in tables.probe(txn, fingerprint, 0), f"trial {trial}"
            stored = dict(zip(ids.tolist(), fingerprints.tolist()))
            assert stored in (model(reported[-1] + 1), model(reported[-1] + 2)), f"trial {trial}"
        finally:
            env.close()


def test_runs_that_fill_every_slot_are_merged_before_a_new_one(tmp_path: Path) -> None:
    """With merging never due (a ratio no level reaches), 40 batches of whole runs would need
    40 slots: the 32nd-or-later new run first finishes a forced merge, and every entry stays
    findable."""
    from simdb.tables import RUN_SLOTS

    env, tables = new_layer(str(tmp_path), Policy(base=8, ratio=1000, chunk=16))
    rng = np.random.default_rng(4)
    fingerprints = rng.integers(0, 1 << 64, 40 * 20, dtype=np.uint64, endpoint=False)
    for batch in range(40):
        ids = np.arange(batch * 20, batch * 20 + 20, dtype=np.uint64)
        with env.begin(write=True) as txn:
            tables.put_many(txn, ids, fingerprints[ids.astype(np.int64)])
            assert len(tables.runs(txn, 0)) - 1 < RUN_SLOTS
    with env.begin() as txn:
        assert tables.verify(txn) == []
        assert len(tables.runs(txn, 0)) - 1 < 40  # runs were merged
        stored = dict(enumerate(fingerprints.tolist()))
        for query in fingerprints[::37].tolist():
            assert tables.probe(txn, query, 3) == brute(stored, query, 3)


def test_runs_read_a_few_blocks_at_a_time_give_every_entry(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """scan(), read_table() and probe_many's merged parts read runs a slice of blocks at a
    time: with slices of 1 and 3 blocks they still give every entry, in order."""
    import simdb.tables

    env, tables = new_layer(str(tmp_path), Policy(base=64, ratio=4))
    rng = np.random.default_rng(6)
    fingerprints = rng.integers(0, 1 << 64, 5000, dtype=np.uint64, endpoint=False)
    fingerprints[100:300] = fingerprints[7]  # a long run of one value
    for start in range(0, 5000, 700):
        ids = np.arange(start, min(start + 700, 5000), dtype=np.uint64)
        with env.begin(write=True) as txn:
            tables.put_many(txn, ids, fingerprints[ids.astype(np.int64)])
    stored = dict(enumerate(fingerprints.tolist()))
    for blocks in (1, 3):
        monkeypatch.setattr(simdb.tables, "DECODE_SLICE", blocks)
        with env.begin() as txn:
            ids, found = tables.scan(txn)
            assert ids.tolist() == list(range(5000)) and found.tolist() == fingerprints.tolist()
            permuted, _ = tables.read_table(txn, PLAN.tables[4])
            assert permuted.tolist() == sorted(PLAN.tables[4].permute_array(fingerprints).tolist())
            queries = fingerprints[::250]
            assert tables.probe_many(txn, queries, 3) == [brute(stored, q, 3) for q in queries.tolist()]


@pytest.mark.parametrize(("list_ratio", "search_slice"), [(0, 2), (1 << 30, 8192), (1 << 30, 5)])
def test_batch_search_follows_ranges_across_many_blocks(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, list_ratio: int, search_slice: int
) -> None:
    """probe_many searches every block a query's prefix range reaches: 4,000 fingerprints
    that differ only in their last 12 bits share their prefix in the tables whose leading
    blocks miss those bits, so a range covers several blocks of a run (besides a repeated
    value filling blocks of its own).  Blocks found by a seek per query (list_ratio 0) or
    by listing the run's keys, in slices of a few queries."""
    monkeypatch.setattr(simdb.tables, "PART_MERGE_RATIO", 0)
    monkeypatch.setattr(simdb.tables, "LIST_KEYS_RATIO", list_ratio)
    monkeypatch.setattr(simdb.tables, "SEARCH_SLICE", search_slice)
    env, tables = new_layer(str(tmp_path), Policy(base=256, ratio=4))
    rng = np.random.default_rng(11)
    root = np.uint64(0x5DEECE66D1234567) & ~np.uint64(0xFFF)
    fingerprints = np.concatenate(
        [
            root | rng.integers(0, 1 << 12, 4000, dtype=np.uint64),
            np.full(2500, root | np.uint64(0x7), dtype=np.uint64),
            rng.integers(0, 1 << 64, 2000, dtype=np.uint64, endpoint=False),
        ]
    )
    for start in range(0, len(fingerprints), 1000):
        ids = np.arange(start, min(start + 1000, len(fingerprints)), dtype=np.uint64)
        with env.begin(write=True) as txn:
            tables.put_many(txn, ids, fingerprints[ids.astype(np.int64)])
    stored = dict(enumerate(fingerprints.tolist()))
    queries = np.concatenate([fingerprints[::397] ^ np.uint64(1 << 40), fingerprints[:3] ^ np.uint64(0b1011 << 12)])
    with env.begin() as txn:
        assert max(entries for _, entries in tables.runs(txn, 0)) > 2 * 1024  # runs of several blocks
        assert tables.probe_many(txn, queries, 3) == [brute(stored, q, 3) for q in queries.tolist()]


@pytest.mark.parametrize("change", ["truncate", "short", "count"])
def test_every_read_path_reports_a_damaged_block_as_damage(tmp_path: Path, change: str) -> None:
    """A block whose header does not add up to its length raises CorruptDatabaseError from
    a single probe, a batch probe and a removal alike, never a struct or index error or a
    wrong answer."""
    env, tables = new_layer(str(tmp_path), Policy(base=64, ratio=4))
    fingerprints = np.random.default_rng(2).integers(0, 1 << 64, 3000, dtype=np.uint64, endpoint=False)
    with env.begin(write=True) as txn:
        tables.put_many(txn, np.arange(3000, dtype=np.uint64), fingerprints)
        db = next(db for db in (tables.handles.db(name) for name in tables._runs[0]) if txn.stat(db)["entries"])
        cursor = txn.cursor(db)
        assert cursor.first()
        key, value = cursor.item()
        first = int.from_bytes(key, "big")
        damaged = {"truncate": value[:-3], "short": value[:5], "count": bytes([0, 0, 9, 0]) + value[4:]}[change]
        txn.put(key, damaged, db=db)
    victim = int(PLAN.tables[0].unpermute(first))  # the block's first entry: every path reads the block
    with env.begin() as txn:
        with pytest.raises(CorruptDatabaseError, match="t.00.s"):
            tables.probe(txn, victim, 0)
        with pytest.raises(CorruptDatabaseError, match="t.00.s"):
            tables.probe_many(txn, np.array([victim] * 3, dtype=np.uint64), 0)
    with env.begin(write=True) as txn, pytest.raises(CorruptDatabaseError, match="t.00.s"):
        tables.delete_many(txn, [int(np.flatnonzero(fingerprints == np.uint64(victim))[0])], [victim])
