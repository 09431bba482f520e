"""The batching writer (``db.writer()``) and the cost of one ``db.add``: batches equal the
same operations applied one by one, flushes come when they should, errors and threads, and
SIGKILL of a real process loses nothing acknowledged and never part of a batch."""

from __future__ import annotations

import random
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import simdb
from simdb.btree_tables import table_entries
from simdb.database import META
from simdb.keys import sorted_table_keys
from simdb.records import FLUSH_MARK_PREFIX
from tests.conftest import run_python_or_fail_on_hang
from tests.proc_worker import writer_text
from tests.test_processes import WORKER, acknowledged

# -- one add -----------------------------------------------------------------------------


def test_a_single_add_starts_no_thread(db_path, monkeypatch: pytest.MonkeyPatch) -> None:
    """One add is one small transaction: sorting its table keys on a helper thread cost more
    than the sort (a thread per add, about 0.5 ms)."""
    started: list[str] = []
    original = threading.Thread.start

    def counting_start(self: threading.Thread) -> None:
        started.append(self.name)
        original(self)

    with simdb.open(db_path) as db:
        db.add("first", text="some words to store the settings")
        monkeypatch.setattr(threading.Thread, "start", counting_start)
        for n in range(20):
            db.add(f"fp-{n}", n * 7919)
            db.add(f"text-{n}", text=f"document number {n} with a few words")
        db.add("fp-3", 12345)  # a replacement
        assert started == []
        assert len(db) == 41 and db.check()


@given(
    fingerprints=st.lists(st.integers(0, 2**64 - 1), min_size=1, max_size=40),
    table_index=st.integers(0, 5),
)
def test_the_table_keys_of_a_few_documents_equal_the_vectorised_ones(fingerprints: list[int], table_index: int) -> None:
    """The int-operation path for a handful of documents writes exactly the keys, in the
    order, of the numpy path (ties of equal fingerprints ordered by id)."""
    table = simdb.TablePlan.create(5, 6).tables[table_index]
    fps = np.array(fingerprints + fingerprints[:3], dtype=np.uint64)  # with repeats
    ids = np.arange(100, 100 + len(fps), dtype=np.uint64)
    assert table_entries(table, fps, ids).tobytes() == sorted_table_keys(table.permute_array, fps, ids).tobytes()


# -- the oracle: the same operations one by one ----------------------------------------------

WORDS = ["alpha", "beta", "gamma", "delta", "epsilon", "zeta", "eta", "theta", "iota", "kappa", "lambda", "mu"]
KEYS_USED = [f"k{n}" for n in range(6)]

operation = st.one_of(
    st.tuples(st.just("text"), st.sampled_from(KEYS_USED), st.lists(st.sampled_from(WORDS), max_size=12)),
    st.tuples(st.just("fingerprint"), st.sampled_from(KEYS_USED), st.sampled_from([0, 1, 3, 2**63, 2**64 - 1, 7919])),
    st.tuples(st.just("remove"), st.sampled_from(KEYS_USED), st.none()),
    st.tuples(st.just("flush"), st.none(), st.none()),
)


def dump(db: simdb.Database) -> dict[bytes, list[tuple[bytes, bytes]]]:
    """Every entry of every sub-database, raw: the whole stored state."""
    storage = db._storage
    names = [META, *db._records.names_for(db._format, storage), *db._table_names]
    with storage.read() as txn:
        return {name: list(txn.cursor(db=storage.db(name))) for name in names}


def apply_one_by_one(db: simdb.Database, operations: list, if_new: bool) -> tuple[simdb.AddResult, int]:
    total, removed = simdb.AddResult(), 0
    for n, (kind, key, value) in enumerate(operations):
        if kind == "text":
            total.merge(db.add(key, text=" ".join(value), meta={"n": n}, if_new=if_new))
        elif kind == "fingerprint":
            total.merge(db.add(key, value, if_new=if_new))
        elif kind == "remove":
            removed += db.remove(key)
    return total, removed


def apply_through_a_writer(
    db: simdb.Database, operations: list, if_new: bool, max_batch: int
) -> tuple[simdb.AddResult, int]:
    with db.writer(max_batch=max_batch, max_delay=3600, if_new=if_new) as writer:
        for n, (kind, key, value) in enumerate(operations):
            if kind == "text":
                writer.add(key, text=" ".join(value), meta={"n": n})
            elif kind == "fingerprint":
                writer.add(key, value)
            elif kind == "remove":
                writer.remove(key)
            else:
                writer.flush()
    return writer.total, writer.removed


@given(operations=st.lists(operation, max_size=25), if_new=st.booleans(), max_batch=st.integers(1, 30))
def test_a_writer_stores_what_the_same_operations_one_by_one_store(
    operations: list, if_new: bool, max_batch: int
) -> None:
    with tempfile.TemporaryDirectory() as directory:
        with simdb.open(Path(directory) / "one-by-one") as oracle, simdb.open(Path(directory) / "writer") as db:
            expected_total, expected_removed = apply_one_by_one(oracle, operations, if_new)
            total, removed = apply_through_a_writer(db, operations, if_new, max_batch)
            assert dump(db) == dump(oracle)
            # (featureless counts documents stored per batch: a key repeated in one batch once)
            assert (total.added, total.replaced, removed) == (
                expected_total.added,
                expected_total.replaced,
                expected_removed,
            )
            assert total.skipped == expected_total.skipped
            assert db.check()


def test_interleaved_adds_and_removes_of_other_keys_cost_one_removal_pass(db_path, monkeypatch) -> None:
    # A removal rewrites a compressed block of every table: one pass per remove made a flush
    # of 10,000 alternating adds and removes take a minute, against 2 s for adds alone.
    passes = []
    original = simdb.writes.Writes.delete
    monkeypatch.setattr(simdb.writes.Writes, "delete", lambda *args: passes.append(args) or original(*args))
    with simdb.open(db_path) as db:
        db.add_many((f"old{n}", n * 7919) for n in range(200))
        with db.writer(max_batch=10_000, max_delay=3600) as writer:
            for n in range(200):
                writer.add(f"new{n}", n * 104729)
                writer.remove(f"old{n}")
            writer.add("old0", 5)  # added again after its removal: a second pass is not needed
            writer.remove("new0")  # removed after its add: a second removal pass is
        assert len(passes) == 2 and writer.removed == 201
        assert sorted(db) == sorted(["old0", *(f"new{n}" for n in range(1, 200))])
        assert db.check()


def test_if_new_counts_buffered_adds_against_later_ones(db_path) -> None:
    text = " ".join(f"word{n}" for n in range(200))
    with simdb.open(db_path) as db, db.writer(if_new=True) as writer:
        writer.add("a", text=text)
        writer.add("b", text=text + " and one more")  # buffered beside "a": still a duplicate of it
        writer.add("c", text="something else entirely, with its own words")
    assert [(skip.key, skip.duplicate_of) for skip in writer.total.skipped] == [("b", "a")]
    with simdb.open(db_path) as db:
        assert sorted(db) == ["a", "c"]


# -- when it flushes -----------------------------------------------------------------------


def test_a_full_buffer_flushes(db_path) -> None:
    with simdb.open(db_path) as db, db.writer(max_batch=3, max_delay=3600) as writer:
        writer.add("a", 1)
        writer.add("b", 2)
        assert (writer.pending, len(db)) == (2, 0)  # queries see buffered adds only after a flush
        writer.add("c", 3)
        assert (writer.pending, len(db)) == (0, 3)
        writer.remove("a")
        assert (writer.pending, len(db)) == (1, 3)
        assert writer.flush().added == 0
        assert (writer.pending, len(db)) == (0, 2)
        assert writer.flush() == simdb.AddResult()  # nothing buffered: nothing written
        writer.add("d", 4)
    assert writer.pending == 0
    with simdb.open(db_path) as db:
        assert sorted(db) == ["b", "c", "d"]  # the end of the block flushed


def test_an_old_buffer_flushes_on_the_next_call(db_path) -> None:
    with simdb.open(db_path) as db, db.writer(max_batch=1_000, max_delay=0.3) as writer:
        writer.add("a", 1)
        time.sleep(0.1)
        writer.add("b", 2)
        assert len(db) == 0
        time.sleep(0.3)
        assert len(db) == 0  # no timer: only a call flushes
        writer.add("c", 3)  # the oldest is 0.4 s old
        assert (writer.pending, len(db)) == (0, 3)
    with simdb.open(db_path) as db, db.writer(max_delay=0) as writer:
        writer.add("d", 4)  # max_delay=0: every call commits, as db.add does
        assert (writer.pending, len(db)) == (0, 4)


# -- errors ----------------------------------------------------------------------------------


def test_adds_before_an_exception_in_the_block_are_flushed(db_path) -> None:
    with simdb.open(db_path) as db:
        with pytest.raises(KeyError), db.writer() as writer:
            writer.add("a", 1)
            writer.add("b", text="two words")
            raise KeyError("the caller's own error")
        assert sorted(db) == ["a", "b"]
        with pytest.raises(simdb.WriterClosedError):
            writer.add("c", 3)
        with pytest.raises(simdb.WriterClosedError):
            writer.flush()
        writer.close()  # idempotent


@pytest.mark.parametrize(
    ("call", "error"),
    [
        (lambda w: w.add("", 1), simdb.InvalidKeyError),
        (lambda w: w.add(5, 1), simdb.InvalidKeyError),
        (lambda w: w.add("a", -1), simdb.InvalidFingerprintError),
        (lambda w: w.add("a"), simdb.InvalidInputError),
        (lambda w: w.add("a", 1, text="both"), simdb.InvalidInputError),
        (lambda w: w.add("a", text=3), simdb.InvalidInputError),
        (lambda w: w.add("a", 1, {"bad": object()}), simdb.InvalidInputError),
        (lambda w: w.remove(""), simdb.InvalidKeyError),
    ],
)
def test_a_bad_call_raises_what_db_add_raises_and_buffers_nothing(db_path, call, error) -> None:
    with simdb.open(db_path) as db, db.writer() as writer:
        writer.add("good", 1)
        with pytest.raises(error):
            call(writer)
        assert writer.pending == 1
    with simdb.open(db_path) as db:
        assert list(db) == ["good"]


def test_meta_is_copied_when_added(db_path) -> None:
    meta = {"tags": ["x"]}
    with simdb.open(db_path) as db:
        with db.writer() as writer:
            writer.add("a", 1, meta)
            meta["tags"].append("changed later")
        assert db.get("a").meta == {"tags": ["x"]}


def test_a_writer_needs_a_writable_open_database(db_path) -> None:
    simdb.open(db_path).close()
    with simdb.open(db_path, readonly=True) as db, pytest.raises(simdb.ReadOnlyError):
        db.writer()
    db = simdb.open(db_path)
    db.close()
    with pytest.raises(simdb.DatabaseClosedError):
        db.writer()
    with simdb.open(db_path) as db, pytest.raises(simdb.InvalidInputError, match="max_batch"):
        db.writer(max_batch=0)

    # A probe: a writer that held nothing when its database was closed went on buffering
    # adds, each acknowledged, all lost at exit with a warning.
    db = simdb.open(db_path)
    writer = db.writer()
    db.close()
    with pytest.raises(simdb.DatabaseClosedError):
        writer.add("late", 1)
    assert writer.pending == 0


CLOSE_IN_A_SIGNAL_HANDLER = """
import os, signal, sys, simdb
db = simdb.open(sys.argv[1])
refused = []

def shut_down(signum, frame):
    try:
        db.close()
    except simdb.WriterBusyError as error:
        refused.append(error)

signal.signal(signal.SIGUSR1, shut_down)
real_commit_steps = simdb.Database._commit_steps

def commit_steps_signalled(self, *args, **kwargs):
    os.kill(os.getpid(), signal.SIGUSR1)  # handled here, while the flush holds the writer
    return real_commit_steps(self, *args, **kwargs)

simdb.Database._commit_steps = commit_steps_signalled
with db.writer(max_batch=3) as writer:
    for i in range(3):
        writer.add(f"doc-{i}", i + 1)
print(len(refused), len(db), repr(refused[0].path == db.path))
db.close()
"""


CLOSE_WHILE_TRACKED = """
import os, signal, sys, simdb
import simdb.writer as writer_module
db = simdb.open(sys.argv[1])

class SignallingSet(set):  # the signal comes while _track holds the lock of the writers' set
    def add(self, item):
        super().add(item)
        os.kill(os.getpid(), signal.SIGUSR1)

refused = []

def shut_down(signum, frame):
    try:
        db.close()
    except simdb.WriterBusyError:
        refused.append(signum)

writer_module._holding = SignallingSet()
signal.signal(signal.SIGUSR1, shut_down)
writer = db.writer(max_batch=10)
writer.add("a", 1)
writer.close()
print(len(refused), len(db))
"""


def test_closing_the_database_in_a_signal_handler_while_a_writer_is_tracked_is_refused(db_path) -> None:
    """A review: the lock of the set of writers holding operations, taken by a writer's
    first add, was a plain lock: a handler closing the database right then waited for it."""
    run = run_python_or_fail_on_hang(
        CLOSE_WHILE_TRACKED, db_path, timeout=60, hung="db.close() in a signal handler hung the process"
    )
    assert run.returncode == 0, run.stderr
    assert run.stdout.split() == ["1", "1"]


def test_closing_the_database_in_a_signal_handler_during_a_flush_is_refused_not_a_hang(db_path) -> None:
    """A probe: a SIGTERM handler calling ``db.close()`` while an add flushed waited for the
    writer's lock, held by the very call it interrupted: the process hung for good.  The
    close is refused with WriterBusyError; the add goes on and stores its batch."""
    run = run_python_or_fail_on_hang(
        CLOSE_IN_A_SIGNAL_HANDLER, db_path, timeout=60, hung="db.close() in a signal handler hung the process"
    )
    assert run.returncode == 0, run.stderr
    assert run.stdout.split() == ["1", "3", "True"]


DISK_FULL_WRITER = """
import resource, signal, sys, simdb
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)   # writes past the limit fail with EFBIG
db = simdb.open(sys.argv[1])
size = db.stats()["size_bytes"]
resource.setrlimit(resource.RLIMIT_FSIZE, (size + 256 * 1024, size + 256 * 1024))
writer = db.writer(max_batch=100_000)
for i in range(20_000):
    writer.add(f"big-{i}", i * 7919, {"pad": "x" * 200})
try:
    writer.flush()
except simdb.DiskFullError:
    print("DISKFULL", writer.pending, len(db), flush=True)
try:
    writer.close()                       # the flush is tried again, and fails again
except simdb.DiskFullError:
    print("STILL", writer.pending, flush=True)
print("DISCARDED", writer.discard(), flush=True)
writer.add("small", 1)
writer.close()
print("AFTER", len(db), flush=True)
"""


def test_a_failed_flush_stores_nothing_and_keeps_the_buffer(db_path) -> None:
    with simdb.open(db_path) as db:
        db.add_many((f"old-{i}", i) for i in range(100))
    run = subprocess.run(
        [sys.executable, "-c", DISK_FULL_WRITER, str(db_path)], capture_output=True, text=True, timeout=120
    )
    assert run.stdout.split("\n")[:4] == ["DISKFULL 20000 100", "STILL 20000", "DISCARDED 20000", "AFTER 101"], (
        run.stdout + run.stderr
    )
    with simdb.open(db_path) as db:
        assert db.check() and len(db) == 101 and "small" in db


# -- threads -------------------------------------------------------------------------------


def test_one_writer_serves_many_threads(db_path) -> None:
    errors: list[BaseException] = []
    with simdb.open(db_path) as db:
        with db.writer(max_batch=37) as writer:

            def add_some(thread: int) -> None:
                try:
                    for n in range(150):
                        writer.add(f"t{thread}-{n}", thread * 1_000 + n, {"n": n})
                        if n % 40 == 0:
                            writer.remove(f"t{thread}-{n}")
                except BaseException as exc:  # noqa: BLE001 - reported below
                    errors.append(exc)

            threads = [threading.Thread(target=add_some, args=(t,)) for t in range(4)]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join()
        assert errors == []
        assert writer.total.added == 600 and writer.removed == 4 * 4
        assert len(db) == 600 - 16 and db.check()
        assert db.get("t2-7") == simdb.Document("t2-7", 2_007, {"n": 7})


# -- crashes -------------------------------------------------------------------------------

BATCH = 40
CRASH_TRIALS = 6


@pytest.mark.parametrize("trial", range(CRASH_TRIALS))
def test_sigkill_loses_no_acknowledged_add_and_no_batch_partly(tmp_path, trial: int) -> None:
    """A process adds from text through a writer, acknowledging each flush; it is killed at
    a random moment: every acknowledged key is stored with its fingerprint and meta, the
    stored keys are whole batches (the one in flight whole or absent), check() is clean."""
    rng = random.Random(trial)
    path = tmp_path / "db"
    process = subprocess.Popen(
        [sys.executable, WORKER, "batch_writer", str(path), str(BATCH), "1000000"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert process.stdout is not None
    first = process.stdout.readline()  # running: the first batch is durable
    assert first.startswith("ACK "), first + (process.stderr.read() if process.stderr else "")
    time.sleep(rng.uniform(0.0, 1.5))
    process.send_signal(signal.SIGKILL)
    rest, _ = process.communicate(timeout=60)
    done = max(acknowledged(first + rest))
    with simdb.open(path) as db:
        report = db.check()
        assert report, report.problems
        stored = len(db)
        assert stored % BATCH == 0 and done <= stored <= done + BATCH, (done, stored)
        assert sorted(db, key=lambda key: int(key[1:])) == [f"w{n}" for n in range(stored)]
        for n in rng.sample(range(stored), min(stored, 30)):
            assert db.get(f"w{n}") == simdb.Document(f"w{n}", db.fingerprint(writer_text(n)), {"n": n})
        db.add("after", text="it stays writable")
        assert db.check()


UNCLOSED_WRITER = """
import os, sys, warnings, simdb
warnings.simplefilter("error")           # a warning of lost operations fails the run
how = sys.argv[2]
db = simdb.open(sys.argv[1])
writer = db.writer(max_batch=1_000, max_delay=3600)
writer.add("flushed", 1)
writer.flush()
writer.add("a", 2)
writer.remove("flushed")
if how == "dropped":
    del writer                           # kept alive while it holds operations, flushed at exit
    print("LEN", len(db))
elif how == "database closed":
    db.close()
    print("CLOSED", writer.pending)
elif how == "forked child":
    if os.fork() == 0:
        sys.exit(0)                      # the child's copy of the buffer is the parent's to flush
    os.wait()
    print("DISCARDED", writer.discard())
    writer.close()
# "exit": the process ends with the writer and the database open
"""


@pytest.mark.parametrize(
    ("how", "printed", "stored"),
    [
        ("exit", "", ["a"]),
        ("dropped", "LEN 1", ["a"]),
        ("database closed", "CLOSED 0", ["a"]),
        ("forked child", "DISCARDED 2", ["flushed"]),
    ],
)
def test_a_writer_never_closed_is_flushed(db_path, how: str, printed: str, stored: list[str]) -> None:
    # Adds acknowledged to a script that never called close() were lost, with a
    # ResourceWarning that Python does not show.
    run = subprocess.run(
        [sys.executable, "-c", UNCLOSED_WRITER, str(db_path), how], capture_output=True, text=True, timeout=120
    )
    assert (run.returncode, run.stdout.strip(), run.stderr) == (0, printed, "")
    with simdb.open(db_path) as db:
        assert sorted(db) == stored and db.check()
        assert not any(key.startswith(FLUSH_MARK_PREFIX) for key, _ in dump(db)[META]), "a flush mark stayed"


def test_a_failed_flush_at_database_close_keeps_the_database_open(db_path, monkeypatch) -> None:
    db = simdb.open(db_path)
    writer = db.writer(max_batch=1_000, max_delay=3600)
    writer.add("a", 2)
    refusal = simdb.DiskFullError("no room", path=db_path)
    with monkeypatch.context() as patched:
        patched.setattr(simdb.Database, "_commit_steps", lambda *args: (_ for _ in ()).throw(refusal))
        with pytest.raises(simdb.DiskFullError):
            db.close()
    assert len(db) == 0 and writer.pending == 1  # still open, the add still buffered
    assert writer.discard() == 1
    db.close()
    writer.close()  # nothing to flush: it closes with its database closed too
    with pytest.raises(simdb.WriterClosedError):
        writer.add("c", 4)
    with simdb.open(db_path) as db:
        assert len(db) == 0 and db.check()


DROPPED_IN_CYCLES = """
import gc, sys, simdb
gc.set_threshold(30)                      # collections inside the database's locks, often
db = simdb.open(sys.argv[1])
for n in range(300):
    writer = db.writer(max_batch=1_000, max_delay=3600)
    writer.add(f"dropped-{n}", n)
    writer.itself = writer                # a cycle: only the garbage collector frees it
    del writer
    db.add(f"added-{n}", n)
db.close()
print(len(simdb.open(sys.argv[1])))
"""


def test_writers_dropped_in_reference_cycles_neither_deadlock_nor_lose_operations(db_path) -> None:
    # A review: a dropped writer flushed by its __del__ ran inside whatever lock the
    # collecting thread held (the database's own: a deadlock), and a flush refused there lost
    # the operations of 2,967 of 3,000 writers.
    finished = run_python_or_fail_on_hang(
        DROPPED_IN_CYCLES, db_path, timeout=120, hung="a dropped writer's flush waited for its own thread"
    )
    assert (finished.returncode, finished.stdout.strip(), finished.stderr) == (0, "600", "")


def test_the_flush_marks_of_writers_killed_are_dropped_by_the_next_writer(tmp_path) -> None:
    """A probe: every writer whose process died by SIGKILL (or SIGTERM, which runs no exit
    handlers) left its flush mark in the database for good, 50 after 25 rounds."""
    path = tmp_path / "db"
    with simdb.open(path) as db:
        db.add("seed", 1)
    script = (
        "import os, signal, simdb\n"
        f"db = simdb.open({str(path)!r})\n"
        "writer = db.writer()\n"
        "writer.add('killed', 2)\n"
        "writer.flush()\n"
        "os.kill(os.getpid(), signal.SIGKILL)\n"
    )
    for _ in range(3):
        subprocess.run([sys.executable, "-c", script], timeout=120, check=False)

    def marks(db: simdb.Database) -> list[bytes]:
        with db._storage.read() as txn:
            return [key for key, _ in txn.cursor(db._storage.db(b"meta")) if key.startswith(b"writer.")]

    with simdb.open(path) as db:
        assert len(marks(db)) == 1  # each killed process's writer dropped the marks before it
        live = db.writer()
        live.add("alive", 3)
        live.flush()
        assert len(marks(db)) == 1  # the live writer's own mark stays
        assert db.get("killed").fingerprint == 2
        live.close()
        assert marks(db) == []


def test_flush_marks_of_other_pid_namespaces_are_never_judged(tmp_path) -> None:
    """A probe: a writer in another pid namespace with the same host name (a container on
    the host network) had its live mark dropped, its process id meaning nothing here."""
    from simdb.storage import host_tag

    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()
    host = host_tag()
    ours = FLUSH_MARK_PREFIX + f"{host}.{gone.pid}.".encode() + b"a" * 8
    theirs = FLUSH_MARK_PREFIX + f"{host.rpartition('_')[0]}_1.{gone.pid}.".encode() + b"b" * 8
    with simdb.open(tmp_path / "db") as db:
        with db._storage.env.begin(write=True) as txn:
            for name in (ours, theirs):
                txn.put(name, b"\x01", db=db._storage.db(META))
        db.writer().close()
        with db._storage.read() as txn:
            left = [key for key, _ in txn.cursor(db._storage.db(META)) if key.startswith(FLUSH_MARK_PREFIX)]
    assert left == [theirs]
