"""The runs' prefix filters (simdb/prefix_filters.py): checked against each run's prefixes read
back whole, against a process that changes the runs under a cached filter, and for damage."""

from __future__ import annotations

import subprocess
import sys
import threading
from pathlib import Path

import lmdb
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import simdb
import simdb.tables
from simdb.plan import BITS, TablePlan
from simdb.prefix_filters import _words_and_masks, filter_mask, filter_masks, filter_words
from simdb.storage import BareHandles
from simdb.tables import RUN_SLOTS, Policy, Tables

ROOT = Path(__file__).resolve().parent.parent
PLAN = TablePlan.create(3, 5)


def _layer(directory: Path, policy: Policy) -> tuple[lmdb.Environment, Tables]:
    env = lmdb.open(str(directory), max_dbs=512, map_size=1 << 30, sync=False)
    tables = Tables(PLAN, BareHandles(env), policy)
    with env.begin(write=True) as txn:
        tables.create(txn)
    return env, tables


@given(st.lists(st.integers(0, (1 << 64) - 1), min_size=1, max_size=50), st.integers(1, 8))
def test_one_value_s_mask_is_the_arrays(values: list[int], probes: int) -> None:
    masks = filter_masks(np.array(values, dtype=np.uint64), probes).tolist()
    assert [filter_mask(value, probes) for value in values] == masks
    assert all(0 < mask.bit_count() <= probes for mask in masks)


def test_filters_rule_out_only_runs_without_the_query_s_prefix(tmp_path: Path, monkeypatch) -> None:
    """Many runs of random fingerprints, some merged and some still merging (little merge
    work per add): for queries that share a prefix with stored entries and for random ones,
    a run is ruled out only when none of its entries has the query's prefix (read back
    whole), and most runs without it are ruled out."""
    monkeypatch.setattr(simdb.tables, "MERGE_WORK", 1)
    env, tables = _layer(tmp_path, Policy(base=512, ratio=4, chunk=700))
    rng = np.random.default_rng(3)
    sizes = [20_000, 300, 2000, 700, 100, 900, 5000, 5000, 5000, 5000, 300, 700, 100]
    stored = rng.integers(0, 1 << 64, sum(sizes), dtype=np.uint64, endpoint=False)
    start = 0
    for size in sizes:
        with env.begin(write=True) as txn:
            tables.put_many(txn, np.arange(start, start + size, dtype=np.uint64), stored[start : start + size])
        start += size
    near = stored[rng.integers(0, start, 300)] ^ rng.integers(0, 1 << 30, 300, dtype=np.uint64)
    queries = np.concatenate([near, rng.integers(0, 1 << 64, 300, dtype=np.uint64, endpoint=False)])
    kept_without_prefix = absent = 0
    with env.begin() as txn:
        assert tables.verify(txn) == []
        state = [tables._load(txn, table.index) for table in PLAN.tables]
        assert any(table_state.merges for table_state in state)  # targets not yet complete
        for table in PLAN.tables:
            shift = np.uint64(BITS - table.leading_bits)
            slots = [slot for slot in range(RUN_SLOTS) if state[table.index].levels[slot]]
            prefixes = {
                slot: set((np.concatenate([v for v, _ in tables._decoded_run(txn, table, slot)]) >> shift).tolist())
                for slot in slots
            }
            permuted = table.permute_array(queries)
            ruled = tables._prefix_filters.ruled_out(txn, [(table, query) for query in permuted.tolist()])
            for query, out in zip((permuted >> shift).tolist(), ruled):
                for slot in slots:
                    held = query in prefixes[slot]
                    assert not (held and out >> (slot + 1) & 1), (table.index, slot)
                    if not held and slot not in state[table.index].merges:
                        absent += 1
                        kept_without_prefix += not out >> (slot + 1) & 1
    assert absent > 10_000
    assert kept_without_prefix < 0.05 * absent, (kept_without_prefix, absent)


WRITER_SCRIPT = """
import sys, simdb
with simdb.open(sys.argv[1]) as db:
    db.add_many([(f"other-{i}", i * 0x9E3779B97F4A7C15 % (1 << 64)) for i in range(int(sys.argv[2]))],
                batch_size=int(sys.argv[3]))
"""


def test_queries_find_what_another_process_added_after_the_filters_were_cached(db_path: Path) -> None:
    """A process queries (caching every run's filter); another adds enough to make new
    runs, merge them and free and refill their slots; the first then finds every
    document the other added, at distance 0 and 3."""
    mix = 0x9E3779B97F4A7C15
    with simdb.open(db_path, k=3, blocks=5) as db:
        db.add_many([(f"mine-{i}", i * 7919) for i in range(40_000)], batch_size=20_000)
        assert all(db.query(i * 7919, k=0) for i in range(0, 40_000, 97))  # filters cached
        subprocess.run([sys.executable, "-c", WRITER_SCRIPT, str(db_path), "150000", "17000"], check=True, cwd=ROOT)
        for i in range(0, 150_000, 31):
            fingerprint = i * mix % (1 << 64)
            assert f"other-{i}" in {match.key for match in db.query(fingerprint, k=0)}
            assert f"other-{i}" in {match.key for match in db.query(fingerprint ^ 0b1011 << 20, k=3)}
        assert db.check()


def test_check_reports_a_cleared_filter_and_one_left_on_a_free_slot(db_path: Path) -> None:
    """A run's filter with its words zeroed, and a filter page in a slot no run holds."""
    rng = np.random.default_rng(4)
    with simdb.open(db_path, k=3, blocks=5) as db:
        db.add_many([(f"d{i}", fp) for i, fp in enumerate(rng.integers(0, 1 << 63, 50_000).tolist())])
        assert db.check()
        tables = db._tables
        filters = tables._prefix_filters
        table = tables.plan.tables[2]
        with db._storage.read() as txn:
            slot = next(slot for slot in range(RUN_SLOTS) if filters.load(txn, table, slot) is not None)
        name = filters.names[2]

        def clear(txn: lmdb.Transaction[bytes]) -> None:
            cursor = txn.cursor(db._storage.db(name))
            assert cursor.set_range(bytes((slot,)))
            while cursor.key()[:1] == bytes((slot,)) and cursor.key()[1:] != b"\xff" * 4:
                cursor.put(cursor.key(), bytes(len(cursor.value())))
                cursor.next()

        db._storage.write(clear)
        problems = db.check().problems
        assert any(f"t.02.s{slot:02d}" in p and "missing from the run's prefix filter" in p for p in problems)

        with db._storage.read() as txn:
            free = next(s for s in range(RUN_SLOTS) if not tables._load(txn, table.index).levels[s])
        db._storage.write(lambda txn: txn.put(bytes((free,)) + bytes(4), bytes(8), db=db._storage.db(name)))
        problems = db.check().problems
        assert any(f"t.02.s{free:02d}" in p and "free but keeps a prefix filter" in p for p in problems)


def test_a_single_query_probes_the_runs_its_filters_pass(db_path: Path, monkeypatch) -> None:
    """With several runs a table, a query for a stored fingerprint seeks in about one run a
    table (the one holding it), not in every run."""
    rng = np.random.default_rng(5)
    fingerprints = rng.integers(0, 1 << 64, 120_000, dtype=np.uint64, endpoint=False).tolist()
    with simdb.open(db_path, k=3, blocks=5) as db:
        for start in range(0, 120_000, 20_000):
            db.add_many([(f"d{i}", fingerprints[i]) for i in range(start, start + 20_000)], batch_size=20_000)
        with db._storage.read() as txn:
            runs = sum(len(db._tables.runs(txn, table.index)) - 1 for table in db.plan.tables)
        assert runs >= 3 * len(db.plan.tables)
        probed: list[int] = []  # runs probed, per table probe
        original = Tables._probe_table

        def counted(self, txn, parts, *args):  # type: ignore[no-untyped-def]
            probed.append((parts >> 1).bit_count())
            return original(self, txn, parts, *args)

        monkeypatch.setattr(Tables, "_probe_table", counted)
        for i in range(0, 120_000, 400):
            assert f"d{i}" in {match.key for match in db.query(fingerprints[i], k=3)}
        # The run holding the fingerprint in each table; without filters every run would be
        # probed.  Table 0's blocks gave the fingerprint's ids, so no table is probed twice.
        assert len(probed) == 300 * len(db.plan.tables)
        per_query = sum(probed) / 300
        assert per_query <= len(db.plan.tables) + 0.1 * runs, (per_query, runs)


def test_a_reader_never_uses_the_filter_of_a_run_whose_slot_was_freed_and_taken_again(tmp_path: Path) -> None:
    """Two layers over one environment, each with its own filter cache, as two processes:
    one writes, the other probes after every commit.  With 13-bit prefixes, runs of 8,192
    entries are dense (no filter), so merges complete into unfiltered targets, freeing
    slots that later merges take as targets while the reader still holds the old filters;
    the reader finds every stored fingerprint after every commit all the same."""
    plan = TablePlan.create(4, 5)
    assert max(table.leading_bits for table in plan.tables) == 13
    env = lmdb.open(str(tmp_path), max_dbs=512, map_size=1 << 30, sync=False)
    writer, reader = (Tables(plan, BareHandles(env), Policy(base=2048, ratio=4, chunk=3000)) for _ in range(2))
    with env.begin(write=True) as txn:
        writer.create(txn)
        reader.create(txn)
    rng = np.random.default_rng(6)
    stored = rng.integers(0, 1 << 64, 60_000, dtype=np.uint64, endpoint=False)
    dense_targets = 0
    # Batches under the base go to the recent trees: most commits make no new run (whose
    # filter would change the generation anyway) and only step the merges.
    for start in range(0, len(stored), 300):
        with env.begin(write=True) as txn:
            writer.put_many(txn, np.arange(start, start + 300, dtype=np.uint64), stored[start : start + 300])
        with env.begin() as txn:
            for table in plan.tables:
                for target in writer._load(txn, table.index).merges:
                    header = writer._prefix_filters._header(txn, table, target)
                    dense_targets += header is not None and header[0] == 0
            for doc_id in rng.integers(0, start + 300, 40).tolist():
                assert doc_id in reader.probe(txn, int(stored[doc_id]), 0), (start, doc_id)
    assert dense_targets


def test_threads_probing_through_one_layer_s_filters_beside_a_writer_find_every_entry(tmp_path: Path) -> None:
    """Reader threads share one layer (so one filter arena) while a writer's merges change
    the generations again and again, making the arena fill up and be replaced; each thread
    finds every entry committed before its transaction began.  The thread switch interval
    is set short so that threads interleave inside ruled_out."""
    plan = TablePlan.create(4, 5)
    env = lmdb.open(str(tmp_path), max_dbs=512, map_size=1 << 30, sync=False, max_readers=64)
    writer, reader = (Tables(plan, BareHandles(env), Policy(base=2048, ratio=4, chunk=3000)) for _ in range(2))
    with env.begin(write=True) as txn:
        writer.create(txn)
        reader.create(txn)
    stored = np.random.default_rng(8).integers(0, 1 << 64, 40_000, dtype=np.uint64, endpoint=False)
    committed = [0]
    arenas: set[int] = set()
    misses: list[tuple[int, int]] = []
    done = threading.Event()

    def probe_committed(seed: int) -> None:
        rng = np.random.default_rng(seed)
        while not done.is_set():
            count = committed[0]
            with env.begin() as txn:
                for doc_id in rng.integers(0, max(count, 1), 20).tolist():
                    if count and doc_id not in reader.probe(txn, int(stored[doc_id]), 1):
                        misses.append((count, doc_id))
            held = reader._prefix_filters._held
            if held is not None:
                arenas.add(id(held.arena))

    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    threads = [threading.Thread(target=probe_committed, args=(seed,)) for seed in range(3)]
    try:
        for thread in threads:
            thread.start()
        for start in range(0, len(stored), 500):
            with env.begin(write=True) as txn:
                writer.put_many(txn, np.arange(start, start + 500, dtype=np.uint64), stored[start : start + 500])
            committed[0] = start + 500
    finally:
        done.set()
        for thread in threads:
            thread.join()
        sys.setswitchinterval(interval)
    assert not misses
    assert len(arenas) > 2  # the arena was replaced while threads read through it


def _anonymous_kib() -> int:
    with open("/proc/self/status") as status:
        return next(int(line.split()[1]) for line in status if line.startswith("RssAnon:"))


@pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="needs Linux's /proc")
def test_a_reader_s_filters_take_memory_only_for_the_pages_its_queries_read(tmp_path: Path) -> None:
    """A few queries read a few hundred 4 KB filter pages of about 12 MB of filters: the
    reader's anonymous memory grows by about what they read, not by the filters' size (where
    transparent huge pages are on, one word written to numpy's own zeros would take 2 MB)."""
    env, tables = _layer(tmp_path, Policy(base=4096, ratio=4, chunk=1 << 16))
    stored = np.random.default_rng(9).integers(0, 1 << 64, 1_000_000, dtype=np.uint64, endpoint=False)
    with env.begin(write=True) as txn:
        tables.put_many(txn, np.arange(len(stored), dtype=np.uint64), stored)
    with env.begin() as txn:
        assert tables.filter_pages(txn) * 4096 > 10 << 20
        before = _anonymous_kib()
        for doc_id in range(0, 10_000, 1_000):
            assert doc_id in tables.probe(txn, int(stored[doc_id]), 3)
        grown = _anonymous_kib() - before
    env.close()
    assert grown < 4 << 10, f"{grown} KiB for about 100 filter pages"


@given(st.integers(0, (1 << 64) - 1), st.integers(1, 1 << 40))
def test_numpy_and_python_agree_on_a_prefix_s_word_for_any_run_size(permuted: int, entries: int) -> None:
    """The writer's word (numpy, uint64) and the reader's (Python integers) for a run of any
    size in a plan of 64-bit prefixes, where a run is sparse up to 2**64 entries."""
    table = TablePlan.create(0, 1).tables[0]
    words = filter_words(table, entries)
    assert 0 < words < 1 << 32
    numpy_word = int(_words_and_masks(table, np.array([permuted], dtype=np.uint64), words)[0][0])
    assert numpy_word == (permuted >> 32) * words >> 32 < words
