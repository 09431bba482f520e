"""Storage faults found by probing, each shown with real processes, real files and real
filesystems: generation identity under inode reuse, threads that starve writers, opens during
another process's map growth, compaction after another process's compaction, a real full
disk, hostile files inside the database directory, and leftovers of killed compactions."""

from __future__ import annotations

import errno
import mmap
import os
import random
import shlex
import shutil
import stat
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import lmdb
import pytest

import simdb
from simdb import codec
from simdb.database import CONFIG_KEY
from simdb.storage import LOCK_FILE_BYTES, MAX_MAP_SIZE, _identity, _open_environment
from tests.conftest import as_items, creating_format, run_python_or_fail_on_hang

ROOT = str(Path(__file__).parent.parent)


def python(script: str, *args: object, **kwargs: object) -> subprocess.Popen[str]:
    env = {**os.environ, "PYTHONPATH": ROOT}
    return subprocess.Popen(
        [sys.executable, "-c", script, *map(str, args)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        **kwargs,  # type: ignore[call-overload]
    )


def expect(process: subprocess.Popen[str], tag: str) -> list[str]:
    assert process.stdout is not None
    line = process.stdout.readline().split()
    assert line and line[0] == tag, f"{line} {process.stderr.read() if process.stderr else ''}"
    return line[1:]


# -- 1. a generation is known by its name, never by an inode number -------------------------

IDLE_WRITER = """
import os, sys, simdb
db = simdb.open(sys.argv[1])
db.add_many(("first-%d" % i, i) for i in range(10))
print("READY", os.stat(os.path.join(sys.argv[1], "CURRENT")).st_ino, flush=True)
sys.stdin.readline()
print("ADDED", db.add_many(("later-%d" % i, 1000 + i) for i in range(100)).added, flush=True)
db.close()
"""

IDLE_READER = """
import sys, time, simdb
db = simdb.open(sys.argv[1], readonly=True)
print("READY", len(db), flush=True)
sys.stdin.readline()
deadline = time.monotonic() + 10
while len(db) != 111 and time.monotonic() < deadline:
    time.sleep(0.01)
print("SEEN", len(db), flush=True)
"""


@pytest.fixture
def private_ext4(tmp_path: Path) -> Iterator[Path]:
    """A directory on an ext4 filesystem no other process uses (a loop-mounted image), so
    its inode numbers are handed out predictably; tmp_path if one cannot be mounted."""
    image, mount = tmp_path / "ext4.img", tmp_path / "ext4"
    mount.mkdir()
    with open(image, "wb") as handle:
        handle.truncate(32 << 20)
    made = subprocess.run(["mkfs.ext4", "-q", "-F", str(image)], capture_output=True, check=False)
    mounted = (
        not made.returncode
        and not subprocess.run(
            ["mount", "-o", "loop", str(image), str(mount)], capture_output=True, check=False
        ).returncode
    )
    if not mounted:
        yield tmp_path
        return
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=False)


def test_a_writer_and_a_reader_follow_compactions_that_reuse_the_inode_of_current(private_ext4: Path) -> None:
    """Compactions by another process free the inode of the CURRENT an idle writer and reader
    opened, and ext4 hands that number to a later CURRENT.  The writer's next batch must land
    in the live generation (it used to go into a deleted file: acknowledged, then lost), and
    the reader must see later commits (it used to stay on the deleted file for good)."""
    db_path = private_ext4 / "db"
    pool = {}
    for number in range(16):
        path = db_path.parent / f"pool-{number}"
        path.touch()
        pool[path.stat().st_ino] = path
    simdb.open(db_path).close()
    writer = python(IDLE_WRITER, db_path)
    original = int(expect(writer, "READY")[0])
    reader = python(IDLE_READER, db_path)
    assert expect(reader, "READY") == ["10"]
    with simdb.open(db_path) as db:
        reused = compact_until_current_reuses(db, db_path, original, pool)
    if not reused:
        writer.kill()
        reader.kill()
        pytest.skip(f"the filesystem under {db_path} did not reuse inode {original} for CURRENT")
    for process in (writer, reader):
        assert process.stdin is not None
        process.stdin.write("go\n")
        process.stdin.flush()
    assert expect(writer, "ADDED") == ["100"]
    assert writer.wait(timeout=60) == 0
    with simdb.open(db_path) as db:
        db.add("from-another-process", 1)  # the reader must see this commit to the live generation
        assert expect(reader, "SEEN") == ["111"]
        assert reader.wait(timeout=60) == 0
        assert len(db) == 111 and db.get("later-99") is not None and db.check()


def compact_until_current_reuses(
    db: simdb.Database, directory: Path, wanted: int, scratch: dict[int, Path], tries: int = 100
) -> bool:
    """Compact until the inode number ``wanted`` (freed by an earlier compaction) names
    CURRENT again.  ext4 gives a new file the lowest free inode of its group, and a
    compaction makes three files (data, lock, then CURRENT's staging file), so: take every
    free number up to ``wanted`` with scratch files, give back two of them below it (the
    ``scratch`` given holds some made before the database, so lower numbers) and ``wanted``
    itself, and the next compaction's third new file gets ``wanted``."""
    made = 0
    try:
        for _ in range(tries):
            db.compact()
            if os.stat(directory / "CURRENT").st_ino == wanted:
                return True
            if any(entry.inode() == wanted for entry in os.scandir(directory)):
                continue  # a data or lock file holds it now; the next compaction frees it
            for _ in range(2_000):
                path = directory / f"scratch-{made}"
                made += 1
                path.touch()
                scratch[path.stat().st_ino] = path
                if wanted in scratch:
                    break
            lower = sorted(number for number in scratch if number < wanted)[:2]
            for number in [*lower, wanted] if wanted in scratch else []:
                scratch.pop(number).unlink()
        return False
    finally:
        for path in scratch.values():
            path.unlink()


# -- 2. a querying thread does not starve writes or compaction ------------------------------


def test_a_thread_querying_in_a_loop_does_not_starve_writes_or_compaction(db_path: Path) -> None:
    stop = threading.Event()
    errors: list[BaseException] = []
    timings: dict[str, float] = {}
    with simdb.open(db_path) as db:
        db.add_many(as_items(range(2_000)))

        def query_forever() -> None:
            try:
                while not stop.is_set():
                    db.query(12345)
            except BaseException as exc:  # noqa: BLE001 - collected for the main thread
                errors.append(exc)

        def write_and_compact() -> None:
            started = time.monotonic()
            db.add("new", 12345)
            db.compact()
            timings["write and compact"] = time.monotonic() - started
            started, batches = time.monotonic(), 0
            while time.monotonic() - started < 2:
                db.add_many(as_items(range(batches * 10, batches * 10 + 10), prefix="batch"))
                batches += 1
            timings["batches in 2 s"] = batches

        queriers = [threading.Thread(target=query_forever, daemon=True) for _ in range(2)]
        for thread in queriers:
            thread.start()
        time.sleep(0.2)
        writer = threading.Thread(target=write_and_compact, daemon=True)
        writer.start()
        writer.join(timeout=30)
        stop.set()  # lets a starved writer finish, so the database closes cleanly
        writer.join(timeout=60)
        for thread in queriers:
            thread.join(timeout=30)
        assert timings.get("write and compact", 99) < 5, timings
        assert timings["batches in 2 s"] >= 20, timings  # a writer thread keeps a real rate beside the queries
        assert not errors, errors[0]
        assert db.get("new") is not None and db.check()


def test_a_thread_may_nest_reads_while_a_writer_waits(db_path: Path) -> None:
    """Writer preference must not deadlock a thread that already holds a read."""
    with simdb.open(db_path) as db:
        db.add_many(as_items(range(100)))
        storage = db._storage
        with storage.read():
            writer = threading.Thread(target=db.add_many, args=(as_items(range(50), prefix="w"),))
            writer.start()
            time.sleep(0.2)  # the writer now waits for this thread's read to end
            with storage.read():  # must not wait behind it
                assert len(db) in (100, 150)
        writer.join(timeout=30)
        assert not writer.is_alive() and len(db) == 150


#: A thread that, inside its own snapshot read, compacts, closes, or adds until the map must
#: grow: each of which waits for every read of the process to end.  In a process of its own,
#: so that a hang (the fault this looks for) fails the test by its timeout.
_INSIDE_ITS_OWN_READ = """
import sys, simdb
path = sys.argv[1]
db = simdb.open(path, map_size=1 << 16)
db.add_many((f"d{i}", i * 7919) for i in range(300))


def batch(start):
    return [(f"n{i}", i * 2654435761 % 2**64, {"pad": "x" * 50}) for i in range(start, start + 20)]


for action in ("compact", "close"):
    documents = db.items(snapshot=True)
    next(documents)
    try:
        getattr(db, action)()
        raise SystemExit(action + " did not raise")
    except simdb.ReadInProgressError as error:
        assert "inside a read" in str(error) and error.path is not None, error
    del documents  # the read ends: the same call now works
    assert len(db) == 300 and db.check()
    db.compact()
added = 0
try:
    for document in db.items(snapshot=True):
        db.add_many(batch(added))
        added += 20
    raise SystemExit("the map never had to grow")
except simdb.ReadInProgressError:
    pass
assert added > 0 and len(db) == 300 + added, (added, len(db))  # the refused batch: none of it
db.add_many(batch(added))
assert len(db) == 300 + added + 20 and db.check()
db.close()
print("ok")
"""


def test_a_thread_inside_its_own_read_is_refused_what_would_wait_for_that_read(db_path: Path) -> None:
    # Before: compact(), close(), and an add that had to grow the map, called inside a loop
    # over items(snapshot=True), waited for the loop's own read to end: forever.
    run = run_python_or_fail_on_hang(
        _INSIDE_ITS_OWN_READ, db_path, timeout=120, hung="a call inside the thread's own read waited for it"
    )
    assert run.returncode == 0 and run.stdout.strip() == "ok", run.stderr[-2000:] + run.stdout[-500:]


@pytest.mark.parametrize("loop", ["pairs", "items"])
@pytest.mark.parametrize("raised", [ValueError, KeyboardInterrupt])
def test_an_exception_inside_a_loop_over_a_read_leaves_the_with_block_as_itself(
    db_path: Path, loop: str, raised: type[BaseException]
) -> None:
    """An exception (Ctrl-C in `simdb pairs`, a bug in the caller's loop) raised while a
    pairs() or items(snapshot=True) generator was suspended left its read open, kept alive
    by the traceback, so the with block's close() raised ReadInProgressError in its place:
    the CLI exited 3 with a library hint instead of 130 (a probe found it).  The exception
    comes through, and the handle closes once it has been dealt with."""
    with simdb.open(db_path) as db:
        db.add_many([("a", 1), ("b", 3), ("c", 7)])

    def use() -> None:
        with simdb.open(db_path) as db:
            documents = db.pairs() if loop == "pairs" else db.items(snapshot=True)
            next(iter(documents))
            raise raised("the caller's own")

    with pytest.raises(raised, match="the caller's own"):
        use()
    with simdb.open(db_path) as again:  # the first handle is closed: no AlreadyOpenError
        assert len(again) == 3


def test_a_close_deferred_by_one_thread_never_makes_another_threads_read_wait(db_path: Path) -> None:
    """While the exception that left a with block is kept (its traceback holding the loop's
    read), another thread's read ended by calling the deferred close, which waited for that
    read: the other thread hung until the exception was freed (a review found it)."""
    with simdb.open(db_path) as db:
        db.add_many([("a", 1), ("b", 3)])
    db = simdb.open(db_path)
    kept: list[BaseException] = []

    def use() -> None:
        with db:
            documents = db.items(snapshot=True)
            next(iter(documents))
            raise ValueError("kept by the caller")

    try:
        use()
    except ValueError as error:
        kept.append(error)
    answers: list[object] = []
    reader = threading.Thread(target=lambda: answers.append(db.get("a")), daemon=True)
    reader.start()
    reader.join(timeout=10)
    assert not reader.is_alive() and answers == [simdb.Document("a", 1, None)]
    assert not db._storage.closed  # the kept traceback still holds the loop's read
    kept.clear()
    assert db._storage.closed


_BESIDE_ANOTHER_THREADS_WAIT = """
import subprocess, sys, threading, time, simdb
path = sys.argv[1]
db = simdb.open(path, map_size=1 << 16)
db.add_many((f"d{i}", i * 7919) for i in range(3_000))


def until_an_exclusive_waits():
    # The other thread's call has reached the wait for this thread's read.
    deadline = time.monotonic() + 60
    while "waiting" not in list(db._storage._lock._holds.values()):
        assert time.monotonic() < deadline, "the other thread never waited for the read"
        time.sleep(0.01)


# 1. Another thread's batch must grow the map: it waits for the loop's read, and the loop's
#    own small add, which fits the map, is stored meanwhile.
def bulk():
    db.add_many((f"g{i}", 10**6 + i) for i in range(100_000))


documents = db.items(snapshot=True)
next(documents)
grower = threading.Thread(target=bulk)
grower.start()
until_an_exclusive_waits()
db.add("inside", 12345)
assert grower.is_alive()  # it waits for the read still
for _ in documents:
    pass
grower.join()
assert db.get("inside").fingerprint == 12345 and len(db) == 3_000 + 100_000 + 1

# 2. Another process compacted: the other thread's add must follow it, which waits for the
#    loop's read; the loop's own add is refused (it would wait for itself), not left waiting.
documents = db.items(snapshot=True)
next(documents)
subprocess.run([sys.executable, "-c", f"import simdb; simdb.open({path!r}).compact()"], check=True)
follower = threading.Thread(target=db.add, args=("follower", 777))
follower.start()
until_an_exclusive_waits()
try:
    db.add("refused", 1)
    raise SystemExit("the add inside the read was not refused")
except simdb.ReadInProgressError:
    pass
del documents
follower.join()
assert db.get("follower").fingerprint == 777 and "refused" not in db and db.check()

# 3. The loop's query_many on several threads, while another thread's batch waits for the
#    loop's read to grow the map: the new threads' reads would wait behind that batch.
documents = db.items(snapshot=True)
next(documents)
grower = threading.Thread(target=lambda: db.add_many((f"h{i}", 2 * 10**6 + i) for i in range(400_000)))
grower.start()
until_an_exclusive_waits()
found = db.query_many([10**6 + i for i in range(600)], k=0, workers=2)
assert [[match.key for match in matches] for matches in found] == [[f"g{i}"] for i in range(600)]
del documents
grower.join()
db.close()

# 4. A writer shared with another thread whose flush waits for the loop's read (its batch
#    must grow the map): the loop's add to that writer is refused, not left waiting.
db = simdb.open(path + "-writer", map_size=1 << 16)
db.add_many((f"d{i}", i * 7919) for i in range(3_000))
writer = db.writer(max_batch=10**7, max_delay=10**9)
documents = db.items(snapshot=True)
next(documents)
for i in range(100_000):
    writer.add(f"w{i}", 3 * 10**6 + i)
flusher = threading.Thread(target=writer.flush)
flusher.start()
until_an_exclusive_waits()
try:
    writer.add("refused", 1)
    raise SystemExit("the add to the writer inside the read was not refused")
except simdb.ReadInProgressError:
    pass
del documents
flusher.join()
writer.close()
assert len(db) == 103_000 and "refused" not in db and db.check()
db.close()
print("ok")
"""


def test_a_thread_inside_a_read_never_waits_for_a_writer_that_waits_for_that_read(db_path: Path) -> None:
    # Before: the other thread held the write mutex while it waited for the read to end, and
    # the thread inside the read waited for the mutex to add: both, forever.
    run = run_python_or_fail_on_hang(
        _BESIDE_ANOTHER_THREADS_WAIT, db_path, timeout=180, hung="a read's thread and a writer waited for each other"
    )
    assert run.returncode == 0 and run.stdout.strip() == "ok", run.stderr[-2000:] + run.stdout[-500:]


# -- 3. opening during another process's map growth -----------------------------------------

GROWER = """
import sys, simdb
with simdb.open(sys.argv[1], map_size=1 << 16) as db:
    print("STARTED", flush=True)
    for round_ in range(40):
        db.add_many(("g%d-%d" % (round_, i), round_ * 100_000 + i, {"pad": "x" * 100}) for i in range(5_000))
print("DONE", flush=True)
"""


def test_writable_opens_succeed_while_another_process_grows_the_map(db_path: Path) -> None:
    simdb.open(db_path, map_size=1 << 16).close()
    grower = python(GROWER, db_path)
    expect(grower, "STARTED")
    opens = 0
    try:
        while grower.poll() is None:
            with simdb.open(db_path, map_size=65536 if opens % 2 else None) as db:
                db.add(f"opener-{opens}", opens)
            opens += 1
    finally:
        grower.kill()
    assert grower.wait() == 0, grower.stderr.read() if grower.stderr else ""
    assert opens > 10
    with simdb.open(db_path) as db:
        assert len(db) == 40 * 5_000 + opens and db.check()


# -- 4. compaction after another process's compaction ---------------------------------------

COMPACT = """
import sys, simdb
with simdb.open(sys.argv[1]) as db:
    db.compact()
"""


def test_compact_and_stats_after_another_process_compacted(db_path: Path) -> None:
    with simdb.open(db_path) as db:
        db.add_many(as_items(range(5_000)))
        for _ in range(2):
            other = python(COMPACT, db_path)
            assert other.wait(timeout=60) == 0, other.stderr.read() if other.stderr else ""
            result = db.compact()
            assert result.bytes_before > 0 and result.bytes_after > 0
            other = python(COMPACT, db_path)
            assert other.wait(timeout=60) == 0, other.stderr.read() if other.stderr else ""
            assert db.stats()["documents"] == 5_000  # stats follows the live generation too
        assert len(db) == 5_000 and db.check()
        assert [p.name for p in db_path.glob("data-*.mdb")] == [db._storage.generation]


# -- 5. a real full disk --------------------------------------------------------------------


@pytest.fixture
def small_fs(tmp_path: Path) -> Iterator[Path]:
    """A 4 MiB tmpfs with 64 inodes, unmounted afterwards."""
    mount = tmp_path / "mnt"
    mount.mkdir()
    options = "size=4m,nr_inodes=64"
    command = ["mount", "-t", "tmpfs", "-o", options, "tmpfs", str(mount)]
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    if done.returncode:
        pytest.skip(f"cannot mount a tmpfs: {done.stderr.strip()}")
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=False)


FILL_THEN_COMPACT = """
import os, sys, simdb
path, filler = sys.argv[1], sys.argv[2]
db = simdb.open(path, map_size=1 << 16)
db.add_many(("doc-%d" % i, i * 7919) for i in range(3_000))
fd = os.open(filler, os.O_WRONLY | os.O_CREAT)   # fill what is left of the filesystem
try:
    while True:
        os.write(fd, b"x" * 4096)
except OSError:
    os.close(fd)
try:
    db.add_many(("big-%d" % i, i, {"pad": "y" * 100}) for i in range(20_000))
    print("BATCH stored", flush=True)
except simdb.SimdbError as exc:
    print("BATCH", type(exc).__name__, flush=True)
try:
    db.compact()
    print("COMPACT done", flush=True)
except simdb.SimdbError as exc:
    print("COMPACT", type(exc).__name__, flush=True)
print("COUNT", len(db), flush=True)
"""


def test_a_full_filesystem_gives_disk_full_for_batches_and_compaction(small_fs: Path) -> None:
    path = small_fs / "db"
    run = subprocess.run(
        [sys.executable, "-c", FILL_THEN_COMPACT, str(path), str(small_fs / "filler")],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "PYTHONPATH": ROOT},
        check=False,
    )
    assert run.returncode == 0, (run.returncode, run.stdout, run.stderr)  # SIGBUS would be -7
    assert "BATCH DiskFullError" in run.stdout and "COMPACT DiskFullError" in run.stdout, run.stdout
    assert "COUNT 3000" in run.stdout
    assert sorted(p.name for p in path.iterdir()) == ["CURRENT", "data-000001.mdb", "data-000001.mdb-lock"]
    (small_fs / "filler").unlink()
    with simdb.open(path) as db:
        assert len(db) == 3_000 and db.check()
        db.compact()
        assert len(db) == 3_000


@pytest.mark.parametrize("inodes_left", [0, 1, 2])
def test_running_out_of_inodes_during_compaction_is_disk_full(small_fs: Path, inodes_left: int) -> None:
    """A compaction makes three files (lock, data, CURRENT's staging file); whichever of them
    finds no inode left, the error is DiskFullError and nothing of the attempt remains."""
    path = small_fs / "db"
    with simdb.open(path) as db:
        db.add_many(as_items(range(1_000)))
        made: list[Path] = []
        try:
            while True:
                made.append(small_fs / f"f{len(made)}")
                made[-1].touch()
        except OSError as exc:
            assert exc.errno == errno.ENOSPC
        for scratch in made[-1 - inodes_left : -1]:
            scratch.unlink()
        with pytest.raises(simdb.DiskFullError):
            db.compact()
        assert len(db) == 1_000 and db.check()
    assert sorted(p.name for p in path.iterdir()) == ["CURRENT", "data-000001.mdb", "data-000001.mdb-lock"]


def test_an_io_error_is_disk_full_only_when_the_filesystem_is_full(small_fs: Path, tmp_path: Path) -> None:
    """LMDB reports a write cut short by a full disk as EIO, not ENOSPC."""
    import lmdb

    from simdb.storage import translate

    error = lmdb.Error("mdb_txn_commit: Input/output error")
    error.code = errno.EIO  # py-lmdb sets it on the errors it raises
    fd = os.open(small_fs / "filler", os.O_WRONLY | os.O_CREAT)
    try:
        while True:
            os.write(fd, b"x" * 65536)
    except OSError:
        os.close(fd)
    assert isinstance(translate(error, "db", small_fs), simdb.DiskFullError)
    assert type(translate(error, "db", tmp_path)) is simdb.StorageError


def test_a_refused_permission_is_not_called_read_only() -> None:
    """Found by an adversarial probe: a database another user made (LMDB needs write access
    to its lock file even to read) was 'read-only' with the hint to run simdb add, which
    fails the same way.  py-lmdb raises ReadonlyError with code EACCES for it."""
    import lmdb
    from simdb_cli.errors import error_message

    from simdb.storage import _open_error, translate

    refused = lmdb.ReadonlyError("db/data-000001.mdb: Permission denied")
    refused.code = errno.EACCES
    error = _open_error(refused, Path("db/data-000001.mdb"), Path("db"))
    assert type(error) is simdb.PermissionDeniedError and error.path == "db/data-000001.mdb"
    line = error_message(error)
    assert "db/data-000001.mdb" in line and "access" in line and "simdb add" not in line
    # A write to a read-only environment: the same class and code from py-lmdb, but no open.
    written = lmdb.ReadonlyError("mdb_put: Permission denied")
    written.code = errno.EACCES
    assert type(translate(written, "db")) is simdb.ReadOnlyError


# -- 9. hostile files inside the database directory -----------------------------------------

OPEN_AND_REPORT = """
import sys, simdb
try:
    simdb.open(sys.argv[1], readonly=sys.argv[2] == "ro").close()
    print("OPENED")
except simdb.SimdbError as exc:
    print(type(exc).__name__, exc)
"""


def open_and_report(db_path: Path, readonly: str) -> subprocess.CompletedProcess[str]:
    """Open the database in a fresh process (``readonly`` "ro" or "rw"), which prints OPENED
    or the error's class and message; a hang fails the test after 30 s."""
    return subprocess.run(
        [sys.executable, "-c", OPEN_AND_REPORT, str(db_path), readonly],
        capture_output=True,
        text=True,
        timeout=30,
        env={**os.environ, "PYTHONPATH": ROOT},
        check=False,
    )


@pytest.mark.parametrize("readonly", ["ro", "rw"])
def test_a_fifo_in_place_of_current_is_refused_without_hanging(db_path: Path, readonly: str) -> None:
    simdb.open(db_path).close()
    (db_path / "CURRENT").unlink()
    os.mkfifo(db_path / "CURRENT")
    run = open_and_report(db_path, readonly)
    assert run.stdout.startswith("CorruptDatabaseError") and "CURRENT" in run.stdout, run.stdout + run.stderr


@pytest.mark.parametrize("victim", ["CURRENT", "data-000001.mdb", "data-000001.mdb-lock"])
@pytest.mark.parametrize("readonly", [True, False])
def test_symbolic_links_inside_the_database_are_refused(tmp_path: Path, victim: str, readonly: bool) -> None:
    path = tmp_path / "db"
    with simdb.open(path) as db:
        db.add("a", 1)
    outside = tmp_path / "outside"
    (path / victim).rename(outside)
    original = outside.read_bytes()
    (path / victim).symlink_to(outside)
    with pytest.raises(simdb.CorruptDatabaseError, match=f"{victim}.*symbolic link"):
        simdb.open(path, readonly=readonly)
    assert outside.read_bytes() == original  # nothing outside was written through the link


def test_the_directory_itself_may_be_a_symbolic_link(tmp_path: Path) -> None:
    with simdb.open(tmp_path / "real") as db:
        db.add("a", 1)
    (tmp_path / "link").symlink_to(tmp_path / "real")
    with simdb.open(tmp_path / "link", readonly=True) as db:
        assert db.get("a") is not None


# -- 11. a missing first data file ----------------------------------------------------------


@pytest.mark.parametrize("damage", ["missing", "empty"])
def test_a_lost_first_data_file_is_damage_not_a_fresh_start(db_path: Path, damage: str) -> None:
    with simdb.open(db_path) as db:
        db.add_many(as_items(range(50)))
        data_file = db._storage.path / db._storage.generation
    assert data_file.name == "data-000001.mdb"
    if damage == "missing":
        data_file.unlink()
    else:
        data_file.write_bytes(b"")
    for readonly in (False, True):
        with pytest.raises(simdb.CorruptDatabaseError, match=damage):
            simdb.open(db_path, readonly=readonly)
    assert data_file.exists() == (damage == "empty")  # nothing was made in its place


# -- 12. map_size bounds --------------------------------------------------------------------


@pytest.mark.parametrize("map_size", [2**70, 2**62, MAX_MAP_SIZE + 1])
def test_a_map_size_beyond_the_address_space_is_refused_before_anything_is_made(db_path: Path, map_size: int) -> None:
    with pytest.raises(simdb.InvalidInputError, match="map_size"):
        simdb.open(db_path, map_size=map_size)
    assert not db_path.exists()


# -- leftovers of killed compactions --------------------------------------------------------


def test_leftovers_of_killed_compactions_are_removed_by_the_next_writable_open(db_path: Path) -> None:
    with simdb.open(db_path) as db:
        db.add_many(as_items(range(1_000)))
        db.compact()
        db.compact()
        live = db._storage.generation
    assert live == "data-000003.mdb"
    # What a compaction killed at various moments leaves: an older generation whose removal
    # never ran, a newer one that was never swapped in, stray lock files, a staging file.
    leftovers = ["data-000001.mdb", "data-000001.mdb-lock", "data-000002.mdb-lock"]
    leftovers += ["data-000004.mdb", "data-000004.mdb-lock"]
    for name in leftovers:
        (db_path / name).write_bytes(b"x" * 4096)
    script = "print(__import__('os').getpid())"
    gone = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=False)
    dead = gone.stdout.strip()
    (db_path / f".CURRENT.{dead}.1").write_text("data-000004.mdb\n")
    # Names no process id is in: kept, and no sweep fails on them (int("\u00b2") raised).
    foreign = [".CURRENT.\u00b2.1", ".CURRENT.99999999999999999999.1"]
    for name in foreign:
        (db_path / name).write_text("not simdb's\n")
    with simdb.open(db_path, readonly=True) as db:
        assert len(db) == 1_000
    assert all((db_path / name).exists() for name in leftovers)  # a reader removes nothing
    with simdb.open(db_path) as db:
        assert len(db) == 1_000 and db.check()
    assert sorted(p.name for p in db_path.iterdir()) == sorted(["CURRENT", live, live + "-lock", *foreign])


def test_lock_files_are_allocated_so_a_full_disk_cannot_fault_them(db_path: Path) -> None:
    with simdb.open(db_path) as db:
        lock = db_path / (db._storage.generation + "-lock")
        assert lock.stat().st_size >= LOCK_FILE_BYTES
        assert lock.stat().st_blocks * 512 >= LOCK_FILE_BYTES


# -- issue #13 re-probe: generations, paths, locks, odd entries -----------------------------

READ_ON_REQUEST = """
import sys, time, simdb
db = simdb.open(sys.argv[1], readonly=True)
print("LEN", len(db), db.get("fresh") is not None, flush=True)
sys.stdin.readline()
time.sleep(0.05)  # past READ_RECHECK_SECONDS
print("LEN", len(db), db.get("fresh") is not None, flush=True)
"""
RECREATE = "import sys, simdb\ndb = simdb.open(sys.argv[1])\ndb.add('fresh', 1)\ndb.close()"


def test_an_open_writer_and_reader_follow_a_database_removed_and_made_again_at_their_path(db_path: Path) -> None:
    """CURRENT names data-000001.mdb again after ``rm -rf`` and a new database: the name alone
    cannot tell the generations apart, the identity of the held data file does."""
    writer = simdb.open(db_path)
    writer.add_many(as_items(range(10), prefix="a"))
    reader = python(READ_ON_REQUEST, db_path)
    assert expect(reader, "LEN") == ["10", "False"]
    shutil.rmtree(db_path)
    made = subprocess.run(
        [sys.executable, "-c", RECREATE, str(db_path)],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": ROOT},
        check=False,
    )
    assert made.returncode == 0, made.stderr
    result = writer.add_many(as_items(range(1000, 1100), prefix="b"))
    writer.close()
    assert reader.stdin is not None
    reader.stdin.write("go\n")
    reader.stdin.flush()
    assert expect(reader, "LEN") == ["101", "True"]  # the reader moved to the new database
    reader.communicate(timeout=30)
    with simdb.open(db_path, readonly=True) as db:
        assert result.added == 100 and len(db) == 101  # every acknowledged document is stored
        assert db.get("fresh") is not None and db.get("b-99") is not None


RECREATE_WITH = """
import sys, simdb
if sys.argv[2] == "no fingerprinter":  # fingerprints only: no fingerprint settings stored
    with simdb.open(sys.argv[1], k=3) as db:
        db.add("fresh", 12345)
    sys.exit()
settings = {"k": 5} if sys.argv[2] == "k" else {"k": 3, "fingerprinter": simdb.Fingerprinter(kind="simhash")}
with simdb.open(sys.argv[1], **settings) as db:
    db.add_texts([("fresh", "the new database holds this text and nothing else at all")])
"""


@pytest.mark.parametrize("setting", ["k", "fingerprinter", "no fingerprinter"])
def test_a_handle_refuses_a_database_made_again_with_other_settings(db_path: Path, setting: str) -> None:
    """Another process removes the database and makes it again with another k (the tables
    are other permutations) or other fingerprint settings.  Followed blindly, this handle's
    next batch was stored in the new database by the old plan or settings: check() found
    64 problems, or a text no longer found itself (a probe found it).  Every use now raises
    DatabaseReplacedError and leaves the new database as its maker left it."""
    texts = [(f"old-{n}", f"document number {n} of the old database, in words enough to shingle") for n in range(5)]
    handle = simdb.open(db_path, k=3)
    handle.add_texts(texts)
    shutil.rmtree(db_path)
    made = subprocess.run(
        [sys.executable, "-c", RECREATE_WITH, str(db_path), setting],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": ROOT},
        check=False,
    )
    assert made.returncode == 0, made.stderr
    for attempt in (
        lambda: handle.add_many(as_items(range(50), prefix="late")),
        lambda: handle.add_texts(texts),
        lambda: handle.remove("fresh"),
    ):
        with pytest.raises(simdb.DatabaseReplacedError) as refused:
            attempt()
        assert refused.value.setting == setting.removeprefix("no ") and refused.value.path == str(db_path)
    # Every read too, not only the one that looks at CURRENT again: the reads between those
    # served the removed file (a review found 81 of 96).
    deadline = time.monotonic() + 0.1
    while time.monotonic() < deadline:
        with pytest.raises(simdb.DatabaseReplacedError):
            handle.get("old-0")
    handle.close()
    with simdb.open(db_path, readonly=True) as db:
        assert sorted(db.keys()) == ["fresh"] and db.check()
        if setting != "no fingerprinter":
            found = db.query(text="the new database holds this text and nothing else at all")
            assert [m.key for m in found] == ["fresh"]
        assert db.fingerprinter is None or db.fingerprinter.kind == (
            "simhash" if setting == "fingerprinter" else "minhash"
        )


READ_SETTINGS_LATER = """
import sys, time, simdb
db = simdb.open(sys.argv[1])
print("OPEN", db.fingerprinter is None, flush=True)
sys.stdin.readline()
time.sleep(0.05)  # past READ_RECHECK_SECONDS
pairs = sorted((p.key_a, p.key_b, round(p.similarity, 6)) for p in db.pairs())
query = [(m.key, round(m.similarity, 6)) for m in db.query(db.get("c0").fingerprint, threshold=0.8)]
print("ANSWERS", repr((db.fingerprinter.to_dict(), pairs, query)).replace(" ", ""), flush=True)
"""


def test_a_handle_opened_before_text_settings_were_stored_takes_them(db_path: Path) -> None:
    """A handle opened while no fingerprint settings were stored kept none for good after
    another process stored some: it took similarities from the bits alone and ignored the
    sketches, so pairs() and thresholds differed from every other handle's (a probe found 6
    pairs where a fresh handle found 3).  It now reads them again."""
    simdb.open(db_path).close()
    early = python(READ_SETTINGS_LATER, db_path)
    assert expect(early, "OPEN") == ["True"]
    words = [f"w{n}" for n in range(400)]
    rng = random.Random(5)
    base = [rng.choice(words) for _ in range(150)]
    texts = []
    for copy in range(6):
        edited = list(base)
        for _ in range(copy * 2):
            edited[rng.randrange(len(edited))] = rng.choice(words)
        texts.append((f"c{copy}", " ".join(edited)))
    with simdb.open(db_path) as db:
        db.add_texts(texts)
        expected = (
            db.fingerprinter.to_dict(),
            sorted((p.key_a, p.key_b, round(p.similarity, 6)) for p in db.pairs()),
            [(m.key, round(m.similarity, 6)) for m in db.query(db.get("c0").fingerprint, threshold=0.8)],
        )
    assert early.stdin is not None
    early.stdin.write("go\n")
    early.stdin.flush()
    assert expect(early, "ANSWERS") == [repr(expected).replace(" ", "")]
    early.communicate(timeout=30)


def test_a_relative_path_keeps_naming_the_same_database_after_chdir(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "x").mkdir()
    (tmp_path / "y").mkdir()
    with simdb.open(tmp_path / "y" / "db") as other:  # another database at the same relative path
        other.add("y-doc", 1)
        other.compact()
    monkeypatch.chdir(tmp_path / "x")
    with simdb.open("db") as db:
        db.add("x-doc", 2)
        monkeypatch.chdir(tmp_path / "y")
        db.add("after-chdir", 3)
        assert len(db) == 2 and Path(db.path).is_absolute()
    with simdb.open(tmp_path / "x" / "db", readonly=True) as db:
        assert sorted(db.keys()) == ["after-chdir", "x-doc"]
    with simdb.open(tmp_path / "y" / "db", readonly=True) as db:
        assert sorted(db.keys()) == ["y-doc"]


def test_a_write_with_a_reserve_does_not_stall_queries_behind_a_long_reader(db_path: Path) -> None:
    """A long read (check(), fingerprint_arrays) beside a write: the write takes only the
    shared lock unless the map must grow, so queries in a third thread are not held back."""
    with simdb.open(db_path) as db:
        db.add_many(as_items(range(2_000)))
        stop = threading.Event()
        worst = [0.0]
        queries = [0]
        reading = threading.Event()

        def long_read() -> None:
            with db._storage.read():  # stands for a check() of a large database
                reading.set()
                time.sleep(4)

        def query() -> None:
            while not stop.is_set():
                started = time.monotonic()
                db.query(12345)
                worst[0] = max(worst[0], time.monotonic() - started)
                queries[0] += 1

        reader = threading.Thread(target=long_read, daemon=True)
        querier = threading.Thread(target=query, daemon=True)
        reader.start()
        reading.wait(10)
        querier.start()
        time.sleep(0.3)
        started = time.monotonic()
        db.add_many(as_items(range(5_000, 5_500), prefix="new"))  # a batch with a reserve
        add_took = time.monotonic() - started
        reader.join(30)
        stop.set()
        querier.join(30)
        assert add_took < 2 and worst[0] < 2, (add_took, worst[0], queries[0])
        assert db.get("new-499") is not None


def test_generations_past_999999_keep_working(db_path: Path) -> None:
    with simdb.open(db_path) as db:
        db.add_many(as_items(range(100)))
    for suffix in ("", "-lock"):
        os.rename(db_path / f"data-000001.mdb{suffix}", db_path / f"data-999999.mdb{suffix}")
    (db_path / "CURRENT").write_text("data-999999.mdb\ninitialised\n")
    with simdb.open(db_path) as db:
        assert len(db) == 100
        db.compact()
        assert db._storage.generation == "data-1000000.mdb"
        db.compact()
        assert db._storage.generation == "data-1000001.mdb"
    with simdb.open(db_path) as db:
        assert len(db) == 100 and db.check()
    assert sorted(p.name for p in db_path.iterdir()) == ["CURRENT", "data-1000001.mdb", "data-1000001.mdb-lock"]


def old_release_database(db_path: Path) -> None:
    """A database as the previous release left it: a one-line CURRENT, format 2 tables."""
    with creating_format(2), simdb.open(db_path) as db:
        db.add_many(as_items(range(50)))
    (db_path / "CURRENT").write_text("data-000001.mdb\n")


def test_a_lost_data_file_of_an_old_release_database_is_damage(db_path: Path) -> None:
    old_release_database(db_path)
    (db_path / "data-000001.mdb").unlink()
    for readonly in (False, True):
        with pytest.raises(simdb.CorruptDatabaseError, match="missing"):
            simdb.open(db_path, readonly=readonly)
    assert not (db_path / "data-000001.mdb").exists()  # no empty database was made in its place
    assert (db_path / "CURRENT").read_text() == "data-000001.mdb\n"


def test_an_interrupted_creation_is_still_finished_by_a_writable_open(db_path: Path) -> None:
    db_path.mkdir()
    (db_path / "CURRENT").write_text("data-000001.mdb\n")  # killed before making any data file
    with simdb.open(db_path) as db:
        db.add("a", 1)
    assert (db_path / "CURRENT").read_text() == "data-000001.mdb\ninitialised\n"


GROWING_WRITE_BESIDE_COMPACTIONS = """
import random, sys, threading, time, simdb
db = simdb.open(sys.argv[1], map_size=65536)
rng = random.Random(1)
for batch in range(10):
    db.add_many([(f"k{rng.randrange(20000)}", rng.getrandbits(64), {"i": batch}) for _ in range(1000)])
stop = threading.Event()
def compact():
    while not stop.is_set():
        db.compact()
        time.sleep(0.1)
threading.Thread(target=compact, daemon=True).start()
db.add_many([(f"k{rng.randrange(20000)}", rng.getrandbits(64), {"pad": "x" * 100}) for _ in range(100000)])
stop.set()
print("committed", len(db))
"""


def test_a_write_that_outgrows_the_map_commits_while_the_same_process_compacts(db_path: Path) -> None:
    """Found by a faults probe: a write filled the map and grew it, a compaction swapped in
    its smaller generation first, and following it reset the map to twice the compacted
    file: the whole write was redone in a map too small again, forever (111 grows in 30 s,
    never committed).  The size a write outgrew is kept for the next generation."""
    done = subprocess.run(
        [sys.executable, "-c", GROWING_WRITE_BESIDE_COMPACTIONS, str(db_path)],
        capture_output=True,
        text=True,
        timeout=90,  # it commits in a few seconds; before, never
        check=False,
    )
    assert done.returncode == 0 and done.stdout.startswith("committed"), done.stderr
    with simdb.open(db_path, readonly=True) as db:
        assert db.check()


@pytest.mark.parametrize("written", [4096, 8192])
def test_a_creation_cut_short_by_a_full_disk_is_started_over(db_path: Path, written: int) -> None:
    """Found by a faults probe: a full disk while LMDB wrote the first data file's meta pages
    left 4096 bytes, and every later open said "damaged: MDB_INVALID ... restore it from a
    backup" for good, of a database that never held anything (CURRENT never marked)."""
    db_path.mkdir()
    (db_path / "CURRENT").write_text("data-000001.mdb\n")
    (db_path / "data-000001.mdb").write_bytes(b"\0" * written)  # what the cut-short write left
    with pytest.raises(simdb.UnfinishedDatabaseError):
        simdb.open(db_path, readonly=True)
    with simdb.open(db_path) as db:
        db.add("a", 1)
    assert (db_path / "CURRENT").read_text() == "data-000001.mdb\ninitialised\n"
    with simdb.open(db_path, readonly=True) as db:
        assert db.get("a") is not None
    # A first data file of more pages is a database (the first release marked none): damage
    # there is reported, never started over.
    (db_path / "CURRENT").write_text("data-000001.mdb\n")
    (db_path / "data-000001.mdb").write_bytes(b"\0" * (3 * mmap.PAGESIZE))
    with pytest.raises(simdb.CorruptDatabaseError):
        simdb.open(db_path)
    assert (db_path / "data-000001.mdb").stat().st_size == 3 * mmap.PAGESIZE


def test_writable_use_keeps_an_old_release_database_readable_by_that_release(db_path: Path) -> None:
    old_release_database(db_path)
    with simdb.open(db_path) as db:  # stored as format 1, as tests/test_database_threshold.py does
        env = db._storage.env
        with env.begin(write=True) as txn:
            meta = env.open_db(b"meta", txn=txn)
            config = codec.unpack(txn.get(CONFIG_KEY, db=meta), "config")
            txn.put(CONFIG_KEY, codec.pack({**config, "format_version": 1}, "config"), db=meta)
    assert (db_path / "CURRENT").read_text() == "data-000001.mdb\n"
    with simdb.open(db_path) as db:
        db.add("new", 99)
    assert (db_path / "CURRENT").read_text() == "data-000001.mdb\n"  # the old release reads one line
    with simdb.open(db_path) as db:
        db.compact()
        assert db.stats()["format_version"] == 1
    assert (db_path / "CURRENT").read_text() == "data-000002.mdb\n"


@pytest.mark.parametrize("victim", ["data-000001.mdb", "data-000001.mdb-lock"])
@pytest.mark.parametrize("kind", ["fifo", "directory"])
@pytest.mark.parametrize("readonly", ["ro", "rw"])
def test_a_special_file_in_place_of_a_data_or_lock_file_is_refused_without_hanging(
    db_path: Path, victim: str, kind: str, readonly: str
) -> None:
    db_path.mkdir()
    (db_path / "CURRENT").write_text("data-000001.mdb\n")  # not initialised: the writable open would make it
    if victim.endswith("-lock"):
        with simdb.open(db_path) as db:
            db.add("a", 1)
        (db_path / victim).unlink()
    if kind == "fifo":
        os.mkfifo(db_path / victim)
    else:
        (db_path / victim).mkdir()
    run = open_and_report(db_path, readonly)
    assert run.stdout.startswith("CorruptDatabaseError") and f"{victim} is not a regular file" in run.stdout, (
        run.stdout + run.stderr
    )


@pytest.mark.parametrize("name", ["data-000099.mdb", "data-000000.mdb-lock", "data-000002.mdb-lock"])
def test_a_directory_named_like_a_generation_does_not_block_opens_or_compaction(db_path: Path, name: str) -> None:
    with simdb.open(db_path) as db:
        db.add_many(as_items(range(100)))
    (db_path / name).mkdir()
    (db_path / name / "inside").write_text("not simdb's")
    with simdb.open(db_path) as db:
        db.compact()
        db.add("after", 5)
        db.compact()
        assert len(db) == 101 and db.check()
    assert (db_path / name / "inside").read_text() == "not simdb's"  # left alone, never entered
    with simdb.open(db_path, readonly=True) as db:
        assert len(db) == 101


def test_a_stray_line_in_current_is_named_as_such(db_path: Path) -> None:
    old_release_database(db_path)
    with open(db_path / "CURRENT", "a") as handle:
        handle.write("x\n")
    with pytest.raises(simdb.CorruptDatabaseError, match="unexpected content after the name 'data-000001.mdb': 'x'"):
        simdb.open(db_path)


def test_a_read_transaction_failed_inside_lmdb_is_damage() -> None:
    """LMDB fails a read transaction without an error of its own when a sub-database's
    record is damaged; every later call then says MDB_BAD_TXN.  ``simdb check`` showed that
    as "LMDB failed ... Transaction must abort" with no hint (a probe found it); in a read it
    is damage.  In a write it stays a StorageError: there it can follow a retried map-full."""
    from simdb.storage import translate

    failed = lmdb.BadTxnError("mdb_cursor_get", "MDB_BAD_TXN: Transaction must abort")
    assert type(translate(failed, "/db", reading=True)) is simdb.CorruptDatabaseError
    assert type(translate(failed, "/db")) is simdb.StorageError


def test_settings_stored_elsewhere_that_disagree_with_those_requested_refuse_every_call(db_path: Path) -> None:
    """A read-only handle asked for SimHash before any settings were stored; another process
    then stores minhash.  Its calls raised ConfigMismatchError once every 20 ms and answered
    by the bits in between (a review found 10 refusals in 83 calls); now every one raises."""
    with simdb.open(db_path) as db:
        db.add("raw", 1)
    handle = simdb.open(db_path, readonly=True, fingerprinter=simdb.Fingerprinter(kind="simhash"))
    stored = subprocess.run(
        [
            sys.executable,
            "-c",
            "import sys, simdb\nwith simdb.open(sys.argv[1]) as db: db.add('t', text='a b c d')",
            db_path,
        ],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": ROOT},
        check=False,
    )
    assert stored.returncode == 0, stored.stderr
    deadline = time.monotonic() + 0.1
    while time.monotonic() < deadline:
        with pytest.raises(simdb.ConfigMismatchError):
            handle.query(1, threshold=0.9)
    handle.close()


REFUSED_MAP = """
import random, resource, sys, simdb
db = simdb.open(sys.argv[1], k=3)
db.add("first", 1)
size = next(int(line.split()[1]) * 1024 for line in open("/proc/self/status") if line.startswith("VmSize"))
soft, hard = resource.getrlimit(resource.RLIMIT_AS)
resource.setrlimit(resource.RLIMIT_AS, (size + 300 * 2**20, hard))
rng = random.Random(1)
stored = 1
try:
    for batch in range(1000):
        db.add_many([("k%d-%d" % (batch, i), rng.getrandbits(64)) for i in range(20000)])
        stored += 20000
except simdb.StorageError as error:
    print("REFUSED", type(error).__name__, "ulimit" in str(error), flush=True)
resource.setrlimit(resource.RLIMIT_AS, (soft, hard))
print("AFTER", len(db) == stored, db.get("first") is not None, [m.key for m in db.query(1)] == ["first"], flush=True)
db.add_many([("later-%d" % i, rng.getrandbits(64)) for i in range(20000)])
print("LATER", len(db) == stored + 20000, bool(db.check()), flush=True)
db.close()
"""


def test_a_map_growth_the_system_refuses_is_a_storage_error_and_the_handle_keeps_working(db_path: Path) -> None:
    """Found by a faults probe: under an address-space limit (ulimit -v, a batch scheduler)
    the mmap of a larger map failed inside LMDB, which had already unmapped the old one: a
    raw lmdb.MemoryError, and every later call on the handle failed, the limit lifted or
    not.  Now a StorageError says what was refused, nothing of the batch is stored, and
    the handle (the same generation opened again) takes later reads and writes."""
    finished = run_python_or_fail_on_hang(REFUSED_MAP, db_path, timeout=300, hung="the refused map growth hung")
    lines = {line.split()[0]: line.split()[1:] for line in finished.stdout.splitlines()}
    assert lines.get("REFUSED") == ["StorageError", "True"], finished.stdout + finished.stderr
    assert lines.get("AFTER") == ["True", "True", "True"], finished.stdout + finished.stderr
    assert lines.get("LATER") == ["True", "True"], finished.stdout + finished.stderr


# -- a database on a read-only file system ---------------------------------------------------

ON_READ_ONLY_MOUNT = """
import subprocess, sys, simdb
mounted, missing = sys.argv[1], sys.argv[2]
db = simdb.Database(mounted, readonly=True)
print("READ", len(db), ",".join(sorted(m.key for m in db.query(7))), bool(db.check()), flush=True)
db.close()
for path in (mounted, missing):
    try:
        simdb.Database(path)
    except simdb.SimdbError as error:
        print("REFUSED", type(error).__name__, error.path == path, flush=True)
for arguments in (["query", "--fingerprint", "0x7"], ["add", "--fingerprints", "-"]):
    cli = subprocess.run([sys.executable, "-m", "simdb_cli.app", *arguments, "--db", mounted],
                         input="k\\t9\\n", capture_output=True, text=True)
    print("CLI", cli.returncode, len(cli.stderr.splitlines()), "read-only file system" in cli.stderr, flush=True)
"""


def test_a_database_on_a_read_only_file_system_reads_and_refuses_writes_in_one_line(tmp_path: Path) -> None:
    """A database on a read-only mount (a container image, a shared dataset): LMDB opens it
    read-only without its lock file, and a writable open or a new database there is a
    ReadOnlyFileSystemError naming the path (it was a StorageError quoting LMDB)."""
    if shutil.which("unshare") is None or subprocess.run(["unshare", "-rm", "true"], capture_output=True).returncode:
        pytest.skip("no user and mount namespaces here to make a read-only mount in")
    source, mount_point = tmp_path / "source", tmp_path / "mounted"
    mount_point.mkdir()
    with simdb.Database(source / "db") as db:
        db.add_many([("seven", 7), ("nine", 9)])
    mounted = mount_point / "db"
    mount = f"mount --bind -o ro {shlex.quote(str(source))} {shlex.quote(str(mount_point))}"
    script = f'{mount} && exec "$0" -c "$1" "$2" "$3"'
    finished = subprocess.run(
        ["unshare", "-rm", "sh", "-c", script, sys.executable, ON_READ_ONLY_MOUNT, mounted, mount_point / "new"],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "PYTHONPATH": ROOT, "SIMDB_PATH": ""},
    )
    lines = [line.split() for line in finished.stdout.splitlines()] + [[]] * 5
    assert lines[0] == ["READ", "2", "nine,seven", "True"], finished.stdout + finished.stderr
    assert lines[1:3] == [["REFUSED", "ReadOnlyFileSystemError", "True"]] * 2, finished.stdout + finished.stderr
    assert lines[3:5] == [["CLI", "0", "0", "False"], ["CLI", "3", "1", "True"]], finished.stdout + finished.stderr


def test_an_open_while_another_process_compacts_and_removes_the_file_reads_on(
    db_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Found by a faults probe (once in about 3,700 read-only opens beside a compaction
    loop): the sweep of another process's compaction removed the data file between this
    open's lstat and its stat, and a raw FileNotFoundError escaped (the CLI called it a
    missing file, exit 2).  The open now reads CURRENT again and opens the new generation.
    The window is made certain here: the other process compacts inside it."""
    import simdb.storage

    with simdb.open(db_path, k=3) as database:
        database.add_many(as_items(range(1, 200)))
    real = simdb.storage._refuse_special
    compacted = []

    def compacting_after_the_lstat(path: Path) -> bool:
        exists = real(path)
        if path.name.endswith(".mdb") and not compacted:
            finished = subprocess.run(
                [sys.executable, "-c", "import simdb, sys; simdb.open(sys.argv[1]).compact()", str(db_path)],
                env={**os.environ, "PYTHONPATH": ROOT},
                capture_output=True,
                text=True,
                timeout=120,
            )
            assert finished.returncode == 0, finished.stderr
            compacted.append(path)
            assert not path.exists()  # the compaction's sweep removed the generation just looked at
        return exists

    monkeypatch.setattr(simdb.storage, "_refuse_special", compacting_after_the_lstat)
    for readonly in (True, False):
        compacted.clear()
        with simdb.open(db_path, readonly=readonly) as database:
            assert compacted and len(database) == 199 and database._storage.generation != compacted[0].name


def test_a_path_that_is_a_dangling_or_looping_link_is_named_as_one(tmp_path: Path) -> None:
    """Found by a faults probe: --db naming a dangling symbolic link (or a loop of links)
    said 'cannot create a database at ...: File exists'."""
    (tmp_path / "dangling").symlink_to(tmp_path / "nowhere")
    (tmp_path / "loop-a").symlink_to(tmp_path / "loop-b")
    (tmp_path / "loop-b").symlink_to(tmp_path / "loop-a")
    for name in ("dangling", "loop-a", "dangling/sub/db"):
        with pytest.raises(simdb.StorageError, match="is a symbolic link to .* which does not exist"):
            simdb.open(tmp_path / name)
    assert not (tmp_path / "nowhere").exists()


def test_a_compaction_keeps_the_files_open_to_whoever_could_use_them(tmp_path: Path) -> None:
    # A faults probe: a database its owner made group-writable (chmod 660) came out of a
    # compaction with the compacting user's 0644, and the group's readers and writers were
    # refused ("no permission to open data-000002.mdb"), running processes too.
    previous = os.umask(0o002)
    try:
        with simdb.open(tmp_path / "db") as db:
            db.add_many((f"k{n}", n * 7919) for n in range(100))
    finally:
        os.umask(previous)
    files = lambda: sorted(p for p in (tmp_path / "db").iterdir() if p.name.startswith("data-"))  # noqa: E731
    assert {stat.S_IMODE(p.stat().st_mode) for p in files()} == {0o664}  # the umask's, not a fixed 0644
    for path in [*files(), tmp_path / "db" / "CURRENT"]:
        path.chmod(0o660)
    previous = os.umask(0o077)  # the compacting user's own umask does not decide
    try:
        with simdb.open(tmp_path / "db") as db:
            db.remove_many(f"k{n}" for n in range(50))
            db.compact()
            assert len(db) == 50
    finally:
        os.umask(previous)
    assert stat.S_IMODE((tmp_path / "db" / "CURRENT").stat().st_mode) == 0o660
    compacted = files()
    assert [p.name for p in compacted] == ["data-000002.mdb", "data-000002.mdb-lock"]
    assert {stat.S_IMODE(p.stat().st_mode) for p in compacted} == {0o660}


def test_a_partial_file_takes_its_mode_without_setting_the_umask(tmp_path, monkeypatch) -> None:
    """partial_beside read the umask by setting it (to 0, then back): for that moment every
    other thread of the process created its files world-writable."""
    from simdb.storage import partial_beside

    def no_umask(mask: int) -> int:
        raise AssertionError("os.umask called")

    current = os.umask(0o027)
    try:
        monkeypatch.setattr(os, "umask", no_umask)
        descriptor, path = partial_beside(tmp_path / "new.jsonl")
        os.close(descriptor)
        assert path.parent == tmp_path and path.stat().st_mode & 0o777 == 0o640
        existing = tmp_path / "old.jsonl"
        existing.write_text("x")
        existing.chmod(0o604)
        created_modes = []
        real_fchmod = os.fchmod

        def recording_fchmod(descriptor: int, mode: int) -> None:
            created_modes.append(os.fstat(descriptor).st_mode & 0o777)
            real_fchmod(descriptor, mode)

        monkeypatch.setattr(os, "fchmod", recording_fchmod)
        descriptor, path = partial_beside(existing)
        os.close(descriptor)
        assert path.stat().st_mode & 0o777 == 0o604
        assert created_modes == [0o600]  # private until given the mode: never wider (a review)
    finally:
        monkeypatch.undo()
        os.umask(current)


def test_a_database_restored_while_it_is_compacted_is_left_as_restored(tmp_path, monkeypatch) -> None:
    """A probe: `compact` racing `rm -rf db; cp -r backup db` named its new generation, a
    file of the removed directory, in the restored CURRENT: every command then failed
    with "data-000003.mdb is missing"."""
    import shutil

    import simdb.database

    path, backup = tmp_path / "db", tmp_path / "backup"
    with simdb.open(path) as db:
        db.add_many((f"k{i}", i * 7919) for i in range(500))
    shutil.copytree(path, backup)
    real_copy = simdb.database.copy_sub_databases

    def restore_then_copy(*args, **kwargs) -> None:
        # The compaction is writing its new generation: the directory is restored under it.
        shutil.rmtree(path)
        shutil.copytree(backup, path)
        real_copy(*args, **kwargs)

    with simdb.open(path) as db:
        db.add("added after the backup", 1)
        monkeypatch.setattr(simdb.database, "copy_sub_databases", restore_then_copy)
        with pytest.raises(simdb.StorageError, match="replaced while it was being compacted"):
            db.compact()
        monkeypatch.undo()
    with simdb.open(path, readonly=True) as restored_db:
        assert len(restored_db) == 500 and "added after the backup" not in restored_db
        assert not restored_db.check().problems
    assert sorted(entry.name for entry in path.iterdir()) == sorted(entry.name for entry in backup.iterdir())


# -- a refused second open in the same process ----------------------------------------------------


def _lock_file_taken_by_another_process(lock_file: Path) -> bool:
    """Whether LMDB's lock on ``lock_file`` (byte 0, the lock every open environment holds
    shared) keeps another process from taking it exclusively, as a third opener would to
    decide it is alone and reset the file."""
    code = (
        "import fcntl, os, sys\n"
        "fd = os.open(sys.argv[1], os.O_RDWR)\n"
        "try:\n    fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB, 1, 0, 0)\n"
        "except OSError:\n    sys.exit(1)\n"
    )
    return subprocess.run([sys.executable, "-c", code, str(lock_file)], timeout=60).returncode == 1


@pytest.mark.parametrize("readonly", [False, True])
def test_a_refused_second_open_keeps_this_processs_lock_on_the_database(tmp_path: Path, readonly: bool) -> None:
    """A probe: a second open of a path this process had open was refused only after it
    opened and closed the database's lock file, and closing any descriptor of a file drops
    every POSIX lock the process holds on it, LMDB's included.  The next process then took
    the database for unused and reset the lock file under this one's writes: commits lost,
    a damaged key index, an LMDB assertion (4 of 13 runs).  The lock must survive."""
    db = tmp_path / "db"
    with simdb.open(db) as database:
        database.add("a", 1)
        lock_file = db / (database._storage.generation + "-lock")
        assert _lock_file_taken_by_another_process(lock_file)
        with pytest.raises(simdb.AlreadyOpenError):
            simdb.open(db, readonly=readonly)
        assert _lock_file_taken_by_another_process(lock_file)
        # Beneath the claim on the directory, which refuses that open first: the environment's
        # own refusal, for another path to the same file, must not touch the lock file either.
        data_file = db / database._storage.generation
        with pytest.raises(simdb.AlreadyOpenError):
            _open_environment(data_file, _identity(data_file), db, subdir=False, readonly=readonly, lock=True)
        assert _lock_file_taken_by_another_process(lock_file)
        database.add("b", 2)
    with simdb.open(db, readonly=True) as database:
        assert sorted(database.keys()) == ["a", "b"]


def test_a_second_handle_is_refused_after_another_process_compacted(tmp_path: Path) -> None:
    """A probe: once another process had compacted, a second open of the path in this
    process succeeded (it opened the new generation), and the first handle, following the
    swap, opened the new generation's lock file beside it: its calls raised AlreadyOpenError
    and the second handle's lock was dropped.  One handle per directory per process."""
    db = tmp_path / "db"
    with simdb.open(db) as first:
        first.add_many([(f"d{i}", i * 7919) for i in range(100)])
        compacting = python("import simdb, sys\nwith simdb.open(sys.argv[1]) as d: d.compact()\n", db)
        _, errors = compacting.communicate(timeout=120)
        assert compacting.returncode == 0, errors
        with pytest.raises(simdb.AlreadyOpenError):
            simdb.open(db)
        first.add("after", 5)  # follows the compaction, alone
        assert len(first) == 101 and first.check()
    with simdb.open(db) as again:
        assert "after" in again


def test_a_handle_keeps_its_claim_on_the_directory_while_it_reopens(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A review: the claim counted as given up whenever the handle had no environment, as
    while it reopens its file for new sub-database handles (every open of a database does):
    a second open in that moment succeeded, and the first then failed, or went on
    unclaimed.  The claim holds until the handle is closed for good."""
    from simdb import storage

    db = tmp_path / "db"
    simdb.open(db).close()
    real = storage.Storage._open_generation
    calls: list[object] = []
    second: list[str] = []

    def open_beside(self: storage.Storage, *args: object, **kwargs: object) -> object:
        calls.append(self)
        if calls.count(self) == 2 and not second:  # this handle reopening: another open comes now
            try:
                simdb.open(db, readonly=True).close()
                second.append("opened")
            except simdb.AlreadyOpenError:
                second.append("refused")
        return real(self, *args, **kwargs)

    monkeypatch.setattr(storage.Storage, "_open_generation", open_beside)
    with simdb.open(db) as first:
        first.add("a", 1)
    assert second == ["refused"]
    monkeypatch.setattr(storage.Storage, "_open_generation", real)
    simdb.open(db).close()  # closed for good: the claim is free
