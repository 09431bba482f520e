"""Real processes: readers beside a writer, compaction beside a writer, and SIGKILL at
random moments.  Nothing acknowledged may be lost and no group may be seen partly."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

import simdb
from tests.proc_worker import GROUP_SIZE, group_fingerprint, group_items

WORKER = str(Path(__file__).with_name("proc_worker.py"))


def start(role: str, *args: object) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, WORKER, role, *map(str, args)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )


def acknowledged(output: str) -> list[int]:
    return [int(line.split()[1]) for line in output.splitlines() if line.startswith("ACK ")]


def assert_groups_whole(db: simdb.Database, present: set[int], absent: set[int]) -> None:
    for group in present | absent:
        keys = {m.key for m in db.query(group_fingerprint(group), k=0) if m.key.startswith(f"{group}-")}
        expected = {f"{group}-{i}" for i in range(GROUP_SIZE)} if group in present else set()
        assert keys == expected, f"group {group}"


def test_readers_beside_a_writer_that_grows_the_map(db_path) -> None:
    simdb.open(db_path, map_size=1 << 16).close()
    writer = start("writer", db_path, 0, 300, 7, 400)
    readers = [start("reader", db_path, 300, 6) for _ in range(3)]
    # The fourth reader opens only after the writer has grown the map past its first size.
    while simdb.open(db_path, readonly=True).stats()["map_size"] <= 1 << 16:
        time.sleep(0.05)
    readers.append(start("reader", db_path, 300, 4))
    out, err = writer.communicate(timeout=120)
    assert writer.returncode == 0, err
    for process in readers:
        r_out, r_err = process.communicate(timeout=60)
        assert process.returncode == 0, r_out + r_err
        assert int(r_out.split()[-1]) > 0
    removed = {int(line.split()[1]) for line in out.splitlines() if line.startswith("REMOVED")}
    with simdb.open(db_path) as db:
        assert db.check()
        assert_groups_whole(db, set(acknowledged(out)) - removed, removed)


def test_compaction_beside_a_writer_loses_nothing(db_path) -> None:
    simdb.open(db_path).close()
    writer = start("writer", db_path, 0, 400, 0, 100)
    compactor = start("compactor", db_path, 15)
    reader = start("reader", db_path, 400, 5)
    out, err = writer.communicate(timeout=120)
    assert writer.returncode == 0, err
    c_out, c_err = compactor.communicate(timeout=120)
    assert compactor.returncode == 0, c_err
    assert len(acknowledged(c_out)) == 15
    r_out, r_err = reader.communicate(timeout=60)
    assert reader.returncode == 0, r_out + r_err
    with simdb.open(db_path) as db:
        assert db.check()
        assert_groups_whole(db, set(acknowledged(out)), set())
        assert len(db) == 400 * GROUP_SIZE
        generations = sorted(path.name for path in db._storage.path.glob("data-*.mdb"))
        assert len(generations) == 1, generations  # old generations are gone


def kill_at_random(
    process: subprocess.Popen[str], rng: random.Random, low: float, high: float, after_acks: int = 0
) -> str:
    """SIGKILL ``process`` between ``low`` and ``high`` seconds after it acknowledged
    ``after_acks`` batches (after its start when 0), and return all it printed."""
    printed = []
    if after_acks:
        assert process.stdout is not None
        for line in process.stdout:  # a slow machine starts and writes slowly: wait for the work
            printed.append(line)
            if line.startswith("ACK ") and int(line.split()[1]) + 1 >= after_acks:
                break
    time.sleep(rng.uniform(low, high))
    process.send_signal(signal.SIGKILL)
    out, _ = process.communicate(timeout=60)
    return "".join(printed) + out


TRIALS = int(os.environ.get("SIMDB_CRASH_TRIALS", "30"))


@pytest.mark.parametrize("trial", range(8))
def test_sigkill_during_table_merges_loses_no_acknowledged_batch(tmp_path, trial: int) -> None:
    """Kill a writer whose every few commits run merge steps of the log-structured tables
    (shrunk merge policy; removals too): the database opens, check() is clean (blocks,
    checksums, counts, every table against the documents), acknowledged groups are whole,
    removed ones gone, the batch in flight whole or absent, and it stays writable."""
    rng = random.Random(1000 + trial)
    path = tmp_path / "db"
    process = start("merging_writer", path, 0, 100_000, 5)
    out = kill_at_random(process, rng, 0.0, 2.0, after_acks=51)
    done = set(acknowledged(out))
    removed = {int(line.split()[1]) for line in out.splitlines() if line.startswith("REMOVED ")}
    assert len(done) > 50, out[-500:]  # enough commits for merges below the first level
    with simdb.open(path) as db:
        report = db.check()
        assert report, report.problems
        with db._storage.read() as txn:
            assert max(level for level, _ in db._tables.runs(txn, 0)) >= 3  # merged runs were merged again
        in_flight = max(done) + 1
        # After the ACK of a group that is a multiple of 5, its removal of the group 5 before
        # may have been in flight: whole or gone.
        victim = max(done) - 5 if max(done) % 5 == 0 else None
        assert_groups_whole(db, done - removed - {victim}, removed)
        keys = [m for m in db.query(group_fingerprint(in_flight), k=0) if m.key.startswith(f"{in_flight}-")]
        assert len(keys) in (0, GROUP_SIZE)
        db.add_many(group_items(99_999))
        assert db.check()


@pytest.mark.parametrize("trial", range(TRIALS))
def test_sigkill_during_writes_removes_and_compaction(tmp_path, trial: int) -> None:
    """Kill a writer, a remover or a compactor at a random moment: the database opens, check()
    is clean, acknowledged batches are all there and no batch is partly there."""
    rng = random.Random(trial)
    path = tmp_path / "db"
    with simdb.open(path, map_size=1 << 16) as db:
        for group in range(40):
            db.add_many(group_items(group, 50))
    role = ("writer", "remover", "compactor")[trial % 3]
    if role == "writer":
        process = start("writer", path, 100, 10_000, 0, 200)
    elif role == "remover":
        process = start("remover", path, 0, 40)
    else:
        process = start("compactor", path, 1000)
    out = kill_at_random(process, rng, 0.3, 1.5)
    done = set(acknowledged(out))
    with simdb.open(path) as db:
        report = db.check()
        assert report, report.problems
        if role == "writer":
            present = set(range(40)) | done
            candidates = set(range(100, 100 + max(done, default=100) + 2))
            assert_groups_whole(db, present, set())
            for group in candidates - done:  # the batch in flight: whole or absent
                keys = [m for m in db.query(group_fingerprint(group), k=0) if m.key.startswith(f"{group}-")]
                assert len(keys) in (0, GROUP_SIZE)
        elif role == "remover":
            assert_groups_whole(db, set(range(40)) - done - {max(done, default=-1) + 1}, done)
            in_flight = max(done, default=-1) + 1
            keys = [m for m in db.query(group_fingerprint(in_flight), k=0) if m.key.startswith(f"{in_flight}-")]
            assert len(keys) in (0, GROUP_SIZE)
        else:
            assert_groups_whole(db, set(range(40)), set())
        db.add_many(group_items(99_999))  # and it stays writable
        assert db.check()
        # The writable open removed whatever the kill left: other generations, stray lock files.
        live = db._storage.generation
        assert sorted(p.name for p in path.iterdir()) == ["CURRENT", live, live + "-lock"]


CREATE_AND_ADD = """
import sys, time, simdb
time.sleep(max(0.0, float(sys.argv[3]) - time.time()))  # all start together
with simdb.open(sys.argv[1]) as db:
    db.add_many((f"{sys.argv[2]}-{i}", i) for i in range(500))
"""


def test_processes_creating_one_database_at_once_share_it(tmp_path) -> None:
    path = tmp_path / "db"
    start_at = str(time.time() + 1.5)
    creators = [
        subprocess.Popen(
            [sys.executable, "-c", CREATE_AND_ADD, str(path), tag, start_at], stderr=subprocess.PIPE, text=True
        )
        for tag in "ABCDEF"
    ]
    for creator in creators:
        assert creator.wait(timeout=60) == 0, creator.stderr.read() if creator.stderr else ""
    with simdb.open(path) as db:
        assert len(db) == 3_000 and db.check()
        assert len({db.get(f"{tag}-7").fingerprint for tag in "ABCDEF"}) == 1


HOLD_THE_WRITE_LOCK = """
import sys, time, simdb
db = simdb.open(sys.argv[1])
def hold(txn):
    print("WRITING", flush=True)
    time.sleep(30)
db._storage.write(hold)
"""


def test_read_only_opening_and_reading_never_wait_for_another_writer(db_path) -> None:
    import threading

    with simdb.open(db_path) as db:
        db.add("a", 1)
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLD_THE_WRITE_LOCK, str(db_path)], stdout=subprocess.PIPE, text=True
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "WRITING"
        answers: list[object] = []

        def open_and_query() -> None:
            with simdb.open(db_path, readonly=True) as db:
                answers.append([m.key for m in db.query(1)])

        worker = threading.Thread(target=open_and_query, daemon=True)
        worker.start()
        worker.join(timeout=15)  # far below the 30 s the other process holds the lock
        assert answers == [["a"]]
    finally:
        holder.kill()
        holder.wait()
