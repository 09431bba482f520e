"""Reliability with real processes and real files: long-running use, dead readers, disk full,
damaged files, read-only beside a writer, concurrent ``if_new`` writers, and hostile input."""

from __future__ import annotations

import contextlib
import os
import random
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import lmdb
import msgpack
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

import simdb
from simdb.storage import SUPERSEDED_BY
from tests.conftest import as_items, copies_with_a_zeroed_leaf, creating_format
from tests.proc_worker import GROUP_SIZE, group_items
from tests.test_processes import acknowledged, start

HERE = Path(__file__).parent
MiB = 1 << 20


def values(output: str, tag: str) -> list[tuple[int, int]]:
    return [
        (int(a), int(b))
        for tag_, a, b in (line.split() for line in output.splitlines() if line.startswith(tag + " "))
        if tag_ == tag
    ]


def test_a_million_operations_keep_memory_and_file_bounded(tmp_path) -> None:
    """Soak: 1M mixed adds, removes and queries in one process, 20,000 documents live, a
    compaction every 200,000 operations.  Stated bounds: after warm-up RSS (which includes the
    mapped file) moves within 48 MiB and does not trend up (the last cycle's peak is within
    8 MiB of the first's); between compactions the file stays under 8x its compacted size (most
    of the difference is LMDB's free pages), and that high-water mark does not grow from cycle
    to cycle."""
    run = subprocess.run(
        [sys.executable, str(HERE / "soak_worker.py"), str(tmp_path / "db"), "1000000"],
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert run.returncode == 0, run.stderr
    assert "DONE" in run.stdout
    rss = [(ops, size) for ops, size in values(run.stdout, "RSS") if ops >= 200_000]
    sizes = [size for _, size in rss]
    assert max(sizes) - min(sizes) < 48 * MiB, rss
    first_cycle = max(size for ops, size in rss if ops < 400_000)
    last_cycle = max(size for ops, size in rss if ops >= 800_000)
    assert last_cycle <= first_cycle + 8 * MiB, rss
    compacted = [size for _, size in values(run.stdout, "FILE")][1:]
    grown = [size for _, size in values(run.stdout, "GROWN")][1:]
    assert compacted and max(compacted) <= 1.2 * min(compacted)
    assert max(grown) <= 8 * max(compacted), (grown, compacted)
    assert max(grown) <= 1.2 * grown[0], grown


HOLD_A_SNAPSHOT = """
import sys, time, simdb
db = simdb.open(sys.argv[1], readonly=True)
with db._storage.read():
    print("HOLDING", flush=True)
    time.sleep(600)
"""


def churn(db: simdb.Database, rounds: int, rng: random.Random) -> None:
    for _ in range(rounds):
        db.add_many(as_items((rng.getrandbits(64) for _ in range(2_000)), prefix="churn"))


def test_slots_of_killed_readers_are_cleared(db_path, monkeypatch) -> None:
    """A reader killed inside a transaction pins every page freed after its snapshot; a
    long-running writer clears such slots itself, so churn keeps reusing pages."""
    monkeypatch.setattr(simdb.storage, "READER_CHECK_INTERVAL", 0.0)
    rng = random.Random(0)
    with simdb.open(db_path) as db:
        churn(db, 10, rng)  # reach the steady state of page reuse
        steady = db.stats()["size_bytes"]
        holders = [
            subprocess.Popen([sys.executable, "-c", HOLD_A_SNAPSHOT, str(db_path)], stdout=subprocess.PIPE, text=True)
            for _ in range(3)
        ]
        for holder in holders:
            assert holder.stdout is not None and holder.stdout.readline().strip() == "HOLDING"
            holder.send_signal(signal.SIGKILL)
            holder.wait()
        churn(db, 30, rng)
        assert db.stats()["size_bytes"] < 1.5 * steady
        assert db.check()


DISK_FULL_WRITER = """
import resource, signal, sys, simdb
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)   # make writes past the limit fail with EFBIG
db = simdb.open(sys.argv[1])
size = db.stats()["size_bytes"]
resource.setrlimit(resource.RLIMIT_FSIZE, (size + 256 * 1024, size + 256 * 1024))
try:
    db.add_many(("big-%d" % i, i * 7919, {"pad": "x" * 200}) for i in range(50_000))
except simdb.DiskFullError as exc:
    print("DISKFULL", exc, flush=True)
print("AFTER", len(db), flush=True)
db.add("small", 1)       # a write that fits still works
print("SMALL", len(db), flush=True)
"""


def test_disk_full_rejects_the_batch_whole(db_path) -> None:
    with simdb.open(db_path) as db:
        db.add_many(as_items(range(1_000)))
    run = subprocess.run(
        [sys.executable, "-c", DISK_FULL_WRITER, str(db_path)], capture_output=True, text=True, timeout=120
    )
    assert "DISKFULL" in run.stdout, run.stdout + run.stderr
    assert "AFTER 1000" in run.stdout
    with simdb.open(db_path) as db:
        assert db.check()
        assert not any(key.startswith("big-") for key in db)
        assert len(db) in (1_000, 1_001)  # the small write either fit under the limit or not
        db.add_many(as_items(range(100), prefix="later"))
        assert db.check()


def test_a_file_that_ends_before_its_free_last_pages_opens(db_path) -> None:
    # LMDB never writes a page that one transaction took and gave back, and that page can
    # be the file's last: the file then ends before its last page number, and is sound.
    # Made here as LMDB makes it: free pages exist (a value put, then deleted), then one
    # transaction puts a larger value (taking those pages and new ones at the end) and
    # deletes it again.
    with simdb.open(db_path, k=3) as db:
        db.add_many(as_items(range(2_000)))
        data_file = db._storage.path / db._storage.generation
    env = lmdb.open(str(data_file), subdir=False, max_dbs=4)
    scratch = env.open_db(b"scratch")
    with env.begin(write=True) as txn:
        txn.put(b"small", b"s" * (100 << 10), db=scratch)
    with env.begin(write=True) as txn:
        txn.delete(b"small", db=scratch)
    with env.begin(write=True) as txn:
        txn.put(b"large", b"l" * (1 << 20), db=scratch)
        txn.delete(b"large", db=scratch)
        txn.drop(scratch, delete=True)
    last_page_end = (env.info()["last_pgno"] + 1) * env.stat()["psize"]
    env.close()
    assert data_file.stat().st_size < last_page_end  # the situation this test is about
    with simdb.open(db_path) as db:
        assert len(db) == 2_000 and db.check()
        assert db.get("doc-1999").fingerprint == 1999
        db.add_many(as_items(range(100), prefix="later"))
    with simdb.open(db_path, readonly=True) as db:
        assert len(db) == 2_100


def test_a_truncated_data_file_is_refused(db_path) -> None:
    with simdb.open(db_path) as db:
        db.add_many(as_items(range(20_000)))
        data_file = db._storage.path / db._storage.generation
    with open(data_file, "r+b") as handle:
        handle.truncate(data_file.stat().st_size // 2)
    with pytest.raises(simdb.CorruptDatabaseError, match="truncated"):
        simdb.open(db_path)


@pytest.mark.parametrize("damage", ["zeros", "random"])
def test_an_overwritten_data_file_is_refused(db_path, damage: str) -> None:
    with simdb.open(db_path) as db:
        db.add_many(as_items(range(1_000)))
        data_file = db._storage.path / db._storage.generation
    size = data_file.stat().st_size
    data_file.write_bytes(bytes(size) if damage == "zeros" else random.Random(1).randbytes(size))
    with pytest.raises(simdb.CorruptDatabaseError):
        simdb.open(db_path)


def test_a_damaged_current_pointer_is_refused(db_path) -> None:
    simdb.open(db_path).close()
    (db_path / "CURRENT").write_text("../../etc/passwd\n")
    with pytest.raises(simdb.CorruptDatabaseError, match="not a data file"):
        simdb.open(db_path)


def test_a_path_below_a_file_is_refused_clearly(tmp_path) -> None:
    (tmp_path / "file").write_text("x")
    with pytest.raises(simdb.StorageError, match="cannot create a database at .*file/db"):
        simdb.open(tmp_path / "file" / "db")


def test_read_only_beside_a_writing_process(db_path) -> None:
    simdb.open(db_path, map_size=1 << 16).close()
    writer = start("writer", db_path, 0, 200, 0, 300)
    seen = []
    with simdb.open(db_path, readonly=True) as db:
        while writer.poll() is None:
            seen.append(len(db))
            db.query(12345)
            time.sleep(0.01)
        _out, err = writer.communicate()
        assert writer.returncode == 0, err
        assert len(db) == 200 * GROUP_SIZE  # it sees the writer's last commit, too
    assert seen == sorted(seen) and len(set(seen)) > 2


COMPACTING_WRITER = """
import sys, time, simdb
with simdb.open(sys.argv[1]) as db:
    for done in range(int(sys.argv[2])):
        db.compact()
        db.add("after-%d" % done, 0x9E3779B97F4A7C15 * (done + 1) % 2**64)
        print(done, flush=True)  # acknowledged: add() returned
        time.sleep(0.1)
"""


def test_a_reader_sees_writes_acknowledged_after_another_process_compacted(db_path) -> None:
    # A writer process compacts (a new generation), adds a document and only then tells
    # the reader, which has been querying all along: its next query must find it.  Readers
    # re-read CURRENT only every 20 ms, so a busy one learns of the compaction from the
    # old generation itself (it says what superseded it).
    rounds = 20
    with simdb.open(db_path, k=3) as db:
        db.add_many(as_items(range(1_000)))
    writer = subprocess.Popen(
        [sys.executable, "-c", COMPACTING_WRITER, str(db_path), str(rounds)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert writer.stdout is not None
    acks = writer.stdout.fileno()
    os.set_blocking(acks, False)
    missed, acknowledged, pending = [], 0, ""
    with simdb.open(db_path, readonly=True) as db:
        deadline = time.monotonic() + 120
        while acknowledged < rounds and time.monotonic() < deadline:
            db.query(12345, k=3)  # busy: its last look at CURRENT is under 20 ms old
            with contextlib.suppress(BlockingIOError):
                pending += os.read(acks, 4096).decode()
            while "\n" in pending:
                line, pending = pending.split("\n", 1)
                done = int(line)
                acknowledged += 1
                fingerprint = 0x9E3779B97F4A7C15 * (done + 1) % 2**64
                if f"after-{done}" not in {match.key for match in db.query(fingerprint, k=0)}:
                    missed.append(done)
    writer.wait(timeout=60)
    assert writer.returncode == 0, writer.stderr.read().decode() if writer.stderr else ""
    assert acknowledged == rounds and missed == []


def test_a_live_generation_holding_the_superseded_key_is_still_read(db_path) -> None:
    # A copy of a directory taken during a compaction can pair the old CURRENT with an old
    # generation that already names its successor: reads go on (no endless reopening).
    with simdb.open(db_path, k=3) as db:
        db.add_many(as_items(range(100)))
        data_file = db._storage.path / db._storage.generation
    env = lmdb.open(str(data_file), subdir=False, max_dbs=4)
    with env.begin(write=True) as txn:
        txn.put(SUPERSEDED_BY, b"data-000099.mdb")
    env.close()
    answers: list[object] = []

    def read_both_ways() -> None:
        for readonly in (True, False):
            with simdb.open(db_path, readonly=readonly) as db:
                answers.append(([match.key for match in db.query(42, k=0)], len(db)))

    reading = threading.Thread(target=read_both_ways, daemon=True)
    reading.start()
    reading.join(timeout=60)
    assert not reading.is_alive(), "reads kept reopening the generation"
    assert answers == [(["doc-42"], 100)] * 2


IF_NEW_WRITER = """
import random, sys, simdb
tag, path = sys.argv[1], sys.argv[2]
rng = random.Random(tag)
with simdb.open(path) as db:
    for group in range(150):
        base = random.Random(group).getrandbits(64)
        docs = [("%s-%d-%d" % (tag, group, i), base ^ (1 << rng.randrange(64))) for i in range(4)]
        db.add_many(docs, if_new=True, batch_size=2)
"""


def test_two_if_new_writers_store_one_document_per_group(db_path) -> None:
    simdb.open(db_path).close()
    writers = [
        subprocess.Popen([sys.executable, "-c", IF_NEW_WRITER, tag, str(db_path)], stderr=subprocess.PIPE, text=True)
        for tag in "AB"
    ]
    for writer in writers:
        assert writer.wait(timeout=120) == 0, writer.stderr.read() if writer.stderr else ""
    with simdb.open(db_path) as db:
        groups: dict[str, int] = {}
        for key in db:
            group = key.split("-")[1]
            groups[group] = groups.get(group, 0) + 1
        assert len(groups) == 150 and set(groups.values()) == {1}
        assert db.check()


def test_if_new_reports_the_key_it_duplicates(db_path) -> None:
    with simdb.open(db_path) as db:
        db.add("original", 0b1111)
        result = db.add_many(
            [("copy", 0b0111), ("fresh", 2**63 | 2**40 | 2**20), ("copy-of-fresh", 2**63 | 2**40)], if_new=True
        )
        assert result.added == 1
        assert [skip[:3] for skip in result.skipped] == [("copy", "original", 1), ("copy-of-fresh", "fresh", 1)]


def test_enormous_keys_are_refused_without_copying_them(db_path) -> None:
    huge = "k" * (1 << 30)
    with simdb.open(db_path) as db:
        with pytest.raises(simdb.InvalidKeyError, match="over the"):
            db.add(huge, 1)
        assert len(db) == 0


def test_an_isolated_check_survives_damage_that_crashes_lmdb(tmp_path: Path) -> None:
    """A zeroed page makes LMDB's own assertion abort the process that reads it, so an
    indexer calling check() died with its database; check(isolated=True) reads in a child
    and raises CorruptDatabaseError instead, naming the database, and this process goes on."""
    outcomes = []
    for damaged in copies_with_a_zeroed_leaf(tmp_path):
        with simdb.open(damaged, readonly=True) as database:
            try:
                outcomes.append("ok" if database.check(isolated=True) else "problems")
            except simdb.CorruptDatabaseError as error:
                assert error.path == str(damaged), error
                outcomes.append("crashed" if "crashed LMDB" in error.message else "damaged")
    assert outcomes.count("crashed") >= 1 and outcomes.count("crashed") + outcomes.count("damaged") >= 2, outcomes
    with simdb.open(tmp_path / "db", readonly=True) as database:
        assert database.check(isolated=True) == database.check() and database.check(isolated=True)


def test_an_isolated_check_keeps_the_error_classes_and_refuses_a_closed_handle(tmp_path: Path) -> None:
    """A review: check(isolated=True) ran on a closed handle (check() raises), and every
    error of the child but damage came back as a StorageError."""
    from simdb.checking import _same_error

    database = simdb.open(tmp_path / "db")
    database.add("a", 1)
    database.close()
    with pytest.raises(simdb.DatabaseClosedError):
        database.check(isolated=True)
    for error in (simdb.PermissionDeniedError, simdb.FormatVersionError, simdb.CorruptDatabaseError):
        same = _same_error(error.__name__, "it went wrong", "do this", "db")
        assert type(same) is error and (same.message, same.hint, same.path) == ("it went wrong", "do this", "db")
    for name in ("InvalidInputError", "NoSuchError", "__class__"):
        assert type(_same_error(name, "it went wrong", None, "db")) is simdb.StorageError


def test_a_tampered_record_is_reported_not_executed(db_path) -> None:
    """Records are msgpack, read with sizes bounded by the record; there is no pickle."""
    from simdb.database import DOCS

    with simdb.open(db_path) as db:
        db.add("a", 1)
        storage = db._storage
        # A msgpack array header claiming 2**32-1 elements in a 5-byte record.
        storage.write(lambda txn: txn.put((0).to_bytes(8, "big"), b"\xdd\xff\xff\xff\xff", db=storage.db(DOCS)))
        with pytest.raises(simdb.CorruptDatabaseError):
            db.get("a")
        assert not db.check()
    import re

    for module in [*(HERE.parent / "simdb").glob("*.py"), *(HERE.parent / "cli").glob("*.py")]:
        assert not re.search(r"^\s*(import|from)\s+(c?pickle|marshal|shelve)\b", module.read_text(), re.M), module


# -- damaged records: reported by check(), refused as CorruptDatabaseError, never another error --


def put_raw(db: simdb.Database, name: bytes, key: bytes, value: bytes | None) -> None:
    """Overwrite (or, with None, delete) one record of sub-database ``name`` behind the API."""
    storage = db._storage
    if value is None:
        storage.write(lambda txn: txn.delete(key, db=storage.db(name)))
    else:
        storage.write(lambda txn: txn.put(key, value, db=storage.db(name)))


def is_a_usable_next_id(raw: bytes | None, documents: int) -> bool:
    try:
        value = msgpack.unpackb(raw)
    except Exception:  # noqa: BLE001 - anything msgpack refuses is damage
        return False
    return type(value) is int and documents <= value < 2**63


damaged_next_ids = st.one_of(
    st.none(),  # the record is missing
    st.binary(max_size=12),  # raw bytes, mostly not msgpack at all
    st.one_of(
        st.integers(-(2**63), 1),
        st.integers(2**63, 2**64 - 1),
        st.floats(),
        st.booleans(),
        st.none(),
        st.text(max_size=5),
        st.binary(max_size=5),
        st.lists(st.integers(0, 5), max_size=2),
    ).map(msgpack.packb),
)


def test_a_damaged_next_id_is_reported_and_refuses_writes(db_path) -> None:
    """The next document id is read on every write: damage there (wrong type, negative,
    at or below a stored id, past the id space, not msgpack, missing) refuses the write
    with CorruptDatabaseError naming it, and check() reports it, rather than a TypeError or
    OverflowError, or ids handed out twice."""
    from simdb.database import META, NEXT_ID_KEY

    with simdb.open(db_path) as db:
        db.add_many([("a", 1), ("b", 2)])
        good = db._storage.write(lambda txn: txn.get(NEXT_ID_KEY, db=db._storage.db(META)))

        @settings(max_examples=80)
        @given(damaged_next_ids)
        def refused(raw: bytes | None) -> None:
            assume(not is_a_usable_next_id(raw, 2))
            put_raw(db, META, NEXT_ID_KEY, raw)
            try:
                far = 2**64 - 1  # no near-duplicate of a or b, so if_new stores it too
                writes = [lambda: db.add("c", far), lambda: db.add_many([("c", far), ("a", 9)])]
                writes.append(lambda: db.add("c", far, if_new=True))
                for write in writes:
                    with pytest.raises(simdb.CorruptDatabaseError, match="next document id stored in") as caught:
                        write()
                    assert caught.value.record == "next document id" and caught.value.path == str(db_path)
                report = db.check()
                assert not report and any("next document id" in problem for problem in report.problems), report
                assert [(d.key, d.fingerprint) for d in db.items()] == [("a", 1), ("b", 2)]
            finally:
                put_raw(db, META, NEXT_ID_KEY, good)

        refused()
        db.add("c", 3)
        assert db.check() and len(db) == 3


def test_check_reports_each_damaged_metadata_record(db_path) -> None:
    from simdb.database import CONFIG_KEY, FINGERPRINTER_KEY, META, NEXT_ID_KEY

    with simdb.open(db_path, fingerprinter=simdb.Fingerprinter(kind="simhash", weights="tf")) as db:
        db.add("a", 1)

        def read(key: bytes) -> dict:
            return msgpack.unpackb(db._storage.write(lambda txn: txn.get(key, db=db._storage.db(META))))

        put_raw(db, META, CONFIG_KEY, msgpack.packb({**read(CONFIG_KEY), "format_version": "1"}))
        put_raw(db, META, FINGERPRINTER_KEY, msgpack.packb({**read(FINGERPRINTER_KEY), "ngram": "two"}))
        put_raw(db, META, NEXT_ID_KEY, msgpack.packb(-1))
        problems = db.check().problems
        for record in ("configuration", "fingerprint settings", "next document id"):
            assert any(problem.startswith(f"the {record} stored in ") for problem in problems), (record, problems)


@pytest.mark.parametrize(("version", "tree"), [(2, "table.00"), (4, "t.00.r")])
def test_a_table_key_of_the_wrong_length_is_reported_naming_the_table(db_path, version, tree) -> None:
    with creating_format(version), simdb.open(db_path) as db:
        db.add_many([("a", 1), ("b", 2), ("c", 2**40)])
        table = tree.encode()
        put_raw(db, table, b"\x00" * 5, b"")
        reads = [lambda: list(db.pairs()), lambda: list(db.clusters()), db.fingerprint_arrays]
        reads.append(lambda: db.query_many([1] * 10))
        for read in reads:
            with pytest.raises(simdb.CorruptDatabaseError, match=f"{tree} stored in .* not 16 bytes") as caught:
                read()
            assert caught.value.record == tree
        assert any(tree in problem for problem in db.check().problems)
        # Two wrong lengths that add up to whole keys: check() still finds them.
        put_raw(db, table, b"\xff" * 27, b"")
        assert any(tree in problem for problem in db.check().problems)
        put_raw(db, table, b"\x00" * 5, None)
        put_raw(db, table, b"\xff" * 27, None)
        assert db.check()
        # An 8-byte key that a query matches holds no document id.
        put_raw(db, table, db.plan.tables[0].permute(2**40).to_bytes(8, "big"), b"")
        with pytest.raises(simdb.CorruptDatabaseError, match=f"{tree} stored in .* of 8 bytes"):
            db.query(2**40)


@pytest.mark.parametrize(
    ("record", "field"),
    [
        (["a", -1, None], "fingerprint"),
        (["a", 2**63 * -1, None], "fingerprint"),
        (["a", 1.0, None], "fingerprint"),
        (["a", True, None], "fingerprint"),
        (["a", "1", None], "fingerprint"),
        (["", 1, None], "key"),
        ([7, 1, None], "key"),
        (["a", 1], None),
        ({"a": 1}, None),
    ],
    ids=repr,
)
def test_a_stored_record_the_index_cannot_hold_is_damage(db_path, record, field: str | None) -> None:
    """Every reader of documents (get, items, query, pairs) goes through one validator: a
    record whose fingerprint is not an int in [0, 2**64), or whose key is not a non-empty str,
    raises CorruptDatabaseError naming the document and field, and check() reports it."""
    from simdb.database import DOCS

    with simdb.open(db_path) as db:
        db.add_many([("a", 1), ("b", 3)])
        put_raw(db, DOCS, (0).to_bytes(8, "big"), msgpack.packb(record))
        reads = [lambda: list(db.items()), lambda: db.query(1), lambda: db.query_many([1] * 5)]
        reads.append(lambda: list(db.pairs()))
        if field != "key":  # with the key itself damaged, get() finds the index disagreeing first
            reads.append(lambda: db.get("a"))
        for read in reads:
            with pytest.raises(simdb.CorruptDatabaseError, match="document 0") as caught:
                read()
            assert caught.value.field == field
        assert any(problem.startswith("document 0 ") for problem in db.check().problems)


def test_a_document_stored_under_a_damaged_id_is_reported_not_a_python_error(tmp_path) -> None:
    """One flipped bit in a node's key-size field (0x0008 to 0x0808) makes a document's
    8-byte id read as 2,056 bytes: its name, an int of about 5,000 digits, raised Python's
    ValueError from check() (a probe found it; ``simdb check`` said "unexpected
    ValueError").  check() now reports it, or raises CorruptDatabaseError where LMDB's own
    structure fails; never anything else."""
    pristine = tmp_path / "pristine"
    with simdb.open(pristine) as db:
        db.add_many([(f"doc{n}", n * 0x9E3779B97F4A7C15 % 2**64) for n in range(3000)])
        data_file = next(path for path in pristine.glob("data-*.mdb"))
    image = data_file.read_bytes()
    reported = 0
    for doc_id in range(100, 3000, 300):
        key = f"doc{doc_id}".encode()
        # An LMDB leaf node: data size (4 bytes), flags (2), key size (2, little-endian), key.
        at = image.find(b"\x08\x00" + doc_id.to_bytes(8, "big") + b"\x93" + bytes([0xA0 + len(key)]) + key)
        assert at > 0
        damaged_copy = tmp_path / f"damaged{doc_id}"
        shutil.copytree(pristine, damaged_copy)
        with open(damaged_copy / data_file.name, "r+b") as handle:
            handle.seek(at + 1)
            handle.write(b"\x08")
        with simdb.open(damaged_copy) as db:
            try:
                report = db.check()
            except simdb.CorruptDatabaseError:
                continue
            assert not report
            reported += any("not 8" in problem for problem in report.problems)
    assert reported


def test_sigkill_trials_leave_no_partial_batch_under_growth(tmp_path) -> None:
    """Extra crash trials while the map is growing: the writer starts with a tiny map."""
    for trial in range(3):
        path = tmp_path / f"db{trial}"
        simdb.open(path, map_size=1 << 16).close()
        process = start("writer", path, 0, 100_000, 0, 2_000, 1 << 16)
        time.sleep(0.5 + trial * 0.4)
        os.kill(process.pid, signal.SIGKILL)
        out, _ = process.communicate()
        done = acknowledged(out)
        with simdb.open(path) as db:
            assert db.check()
            assert len(db) in (len(done) * GROUP_SIZE, (len(done) + 1) * GROUP_SIZE)
            for group in done:
                assert db.get(group_items(group)[0][0]) is not None
