"""The LMDB environment: layout on disk, transactions, map growth, compaction swaps, and the
translation of LMDB's errors into simdb's.

Layout.  A database is a directory holding ``CURRENT`` (the name of the live data file) and
that file, ``data-NNNNNN.mdb`` with its ``-lock`` file.  Compaction writes the next
generation beside it and renames ``CURRENT`` over; each generation has its own lock file, so
no process ever pairs a new data file with an old reader table.

Swaps.  Every write transaction compares ``CURRENT``'s inode with the one this process
opened, *after* taking LMDB's write lock; compaction renames ``CURRENT`` while holding that
lock, so a writer can never commit into a superseded file.  Readers compare at most every
READ_RECHECK_SECONDS: until then they read a consistent, slightly older snapshot.

Growth.  A write that fills the map is retried after doubling it; a transaction that finds
the file grown by another process adopts the new size.  Both need no transaction active in
this process, which a shared/exclusive lock guarantees, so one object serves many threads.
"""

from __future__ import annotations

import errno
import os
import re
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TypeVar

import lmdb

from simdb.errors import (
    CorruptDatabaseError,
    DatabaseClosedError,
    DatabaseError,
    DiskFullError,
    NotADatabaseError,
    ReadOnlyError,
    StorageError,
)

T = TypeVar("T")

CURRENT = "CURRENT"
FIRST_GENERATION = "data-000001.mdb"
_STAGING = ".CURRENT."  # prefix of the files CURRENT is written to before the atomic rename
_GENERATION = re.compile(r"data-(\d{6})\.mdb")
MIN_MAP_SIZE = 1 << 26  # 64 MiB of address space; the file itself only grows as pages are written
MAX_READERS = 512
READ_RECHECK_SECONDS = 0.02  # how stale a reader may be after another process compacts
READER_CHECK_INTERVAL = 5.0  # seconds between sweeps for slots of dead readers
_NO_SPACE = (errno.ENOSPC, errno.EFBIG, errno.EDQUOT)


def translate(exc: lmdb.Error, where: object) -> DatabaseError:
    """Map an LMDB error to the matching simdb error, naming ``where``."""
    text = str(exc)
    if isinstance(exc, lmdb.ReadonlyError):
        return ReadOnlyError(f"{where} is read-only: {text}", "open it without readonly=True")
    if any(os.strerror(code) in text for code in _NO_SPACE) or "MDB_MAP_FULL" in text:
        return DiskFullError(f"no space left writing {where}: {text}", "free disk space; the batch was not stored")
    if isinstance(exc, (lmdb.CorruptedError, lmdb.InvalidError, lmdb.PageNotFoundError, lmdb.VersionMismatchError)):
        return CorruptDatabaseError(f"{where} is damaged: {text}", "restore it from a backup or an export")
    if "already open" in text:  # LMDB allows one environment per file per process
        return StorageError(f"{where} is already open in this process", "open it once and share the Database: it is thread-safe")
    return StorageError(f"LMDB failed on {where}: {text}")


class _SharedLock:
    """Many holders of ``shared`` or one of ``exclusive``; used so that map resizes and
    generation swaps never happen under a live transaction of this process."""

    def __init__(self) -> None:
        self._condition = threading.Condition(threading.Lock())
        self._shared = 0
        self._exclusive = False

    def acquire_shared(self) -> None:
        with self._condition:
            while self._exclusive:
                self._condition.wait()
            self._shared += 1

    def release_shared(self) -> None:
        with self._condition:
            self._shared -= 1
            if not self._shared:
                self._condition.notify_all()

    @contextmanager
    def shared(self) -> Iterator[None]:
        self.acquire_shared()
        try:
            yield
        finally:
            self.release_shared()

    @contextmanager
    def exclusive(self) -> Iterator[None]:
        with self._condition:
            while self._exclusive or self._shared:
                self._condition.wait()
            self._exclusive = True
        try:
            yield
        finally:
            with self._condition:
                self._exclusive = False
                self._condition.notify_all()


def _fsync_directory(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _point_current_at(directory: Path, name: str) -> None:
    """Make ``CURRENT`` name the data file ``name``, durably and atomically: written to a
    staging file of this process and thread, then renamed over."""
    staging = directory / f"{_STAGING}{os.getpid()}.{threading.get_ident()}"
    with open(staging, "w") as handle:
        handle.write(name + "\n")
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(staging, directory / CURRENT)
    _fsync_directory(directory)


def _remove_generation(directory: Path, name: str) -> None:
    """Delete a generation's data and lock files, if present."""
    for path in (directory / name, directory / (name + "-lock")):
        path.unlink(missing_ok=True)


def _used_bytes(env: lmdb.Environment) -> int:
    """Bytes of the data file that hold pages: everything up to the last page in use."""
    return int((env.info()["last_pgno"] + 1) * env.stat()["psize"])


class Storage:
    """One simdb directory's LMDB environment.  Use :meth:`open`."""

    def __init__(self, path: Path, readonly: bool, names: list[bytes], map_size: int) -> None:
        self.path = path
        self._names = names
        self.readonly = readonly
        self.max_dbs = len(names) + 1
        self._initial_map_size = map_size
        self._lock = _SharedLock()
        self._write_mutex = threading.Lock()
        self._env: lmdb.Environment | None = None
        self._current_inode = 0
        self._current_file = str(path / CURRENT)
        self._next_read_check = 0.0
        self._last_reader_check = time.monotonic()
        self.generation = ""
        self._db_handles: dict[bytes, lmdb._Database] = {}
        self._open_generation()

    # -- opening -------------------------------------------------------------------------

    @staticmethod
    def exists(path: str | os.PathLike[str]) -> bool:
        """Whether a database directory is at ``path`` (its ``CURRENT`` file is).  O(1)."""
        return (Path(path) / CURRENT).exists()

    @classmethod
    def open(cls, path: str | os.PathLike[str], *, readonly: bool, create: bool, names: list[bytes], map_size: int | None) -> Storage:
        """Open (or create) the database directory at ``path``."""
        directory = Path(path)
        if directory.exists() and not directory.is_dir():
            raise NotADatabaseError(f"{directory} is a file, not a simdb database directory", "give a directory path")
        current = directory / CURRENT
        if not current.exists():
            # Another process creating this database at the same moment leaves only its
            # staging file here; that does not make the directory foreign.
            foreign = directory.exists() and any(not entry.name.startswith(_STAGING) for entry in directory.iterdir())
            if not current.exists():  # else that other process finished between our looks
                if foreign:
                    raise NotADatabaseError(
                        f"{directory} is not a simdb database (it has no {CURRENT} file)",
                        "point at a simdb database or at an empty or missing directory",
                    )
                if readonly or not create:
                    raise NotADatabaseError(f"{directory} does not exist", "create it first by opening it writable")
                cls._create_directory(directory)
        return cls(directory, readonly, names, map_size or MIN_MAP_SIZE)

    @staticmethod
    def _create_directory(directory: Path) -> None:
        try:
            directory.mkdir(parents=True, exist_ok=True)
            _point_current_at(directory, FIRST_GENERATION)  # racing creators write the same
        except OSError as exc:
            raise StorageError(f"cannot create a database at {directory}: {exc.strerror}", "check the path and its permissions") from None

    def _read_current(self) -> tuple[str, int]:
        current = self.path / CURRENT
        try:
            with open(current, "rb") as handle:
                inode = os.fstat(handle.fileno()).st_ino
                name = handle.read(64).decode("ascii", "replace").strip()
        except OSError as exc:
            raise StorageError(f"cannot read {current}: {exc.strerror}") from None
        if not _GENERATION.fullmatch(name):
            raise CorruptDatabaseError(f"{current} names {name!r}, not a data file", "restore it from a backup")
        return name, inode

    def _open_generation(self) -> None:
        """Open the generation ``CURRENT`` names; retries if a compaction swaps it meanwhile."""
        for _ in range(100):
            name, inode = self._read_current()
            data_file = self.path / name
            size = data_file.stat().st_size if data_file.exists() else 0
            if not size:
                if self._read_current()[0] != name:
                    continue  # swapped and removed between our two reads: read CURRENT again
                state = "empty" if data_file.exists() else "missing"
                if name != FIRST_GENERATION:
                    # A compaction makes its file whole before CURRENT names it: this is damage,
                    # and starting an empty database over it would hide the loss.
                    raise CorruptDatabaseError(f"{data_file} is {state}", "restore the database from a backup or an export")
                if self.readonly:
                    raise NotADatabaseError(f"{data_file} is {state}", "was its creation interrupted? open it writable to finish it")
            try:
                env = lmdb.open(
                    str(data_file),
                    subdir=False,
                    readonly=self.readonly,
                    create=not self.readonly,
                    max_dbs=self.max_dbs,
                    map_size=max(self._initial_map_size, 2 * size),
                    max_readers=MAX_READERS,
                    meminit=False,
                    lock=True,
                )
            except lmdb.Error as exc:
                if "No such file" in str(exc):
                    continue
                raise translate(exc, data_file) from None
            now_name, now_inode = self._read_current()
            if now_name != name:
                # A compaction swapped generations while we opened this one, and removed it:
                # a writable open then made a new empty file under the old name.  Drop it.
                # (Only when the name moved on: creators racing to make a new database each
                # rewrite CURRENT with the same name, and that file is in use.)
                env.close()
                if not self.readonly:
                    _remove_generation(self.path, name)
                continue
            inode = now_inode
            self._check_file_length(env, data_file)
            env.reader_check()  # clear reader slots left by killed processes
            self._env, self._current_inode, self.generation = env, inode, name
            self._open_handles()
            return
        raise StorageError(f"{self.path} keeps changing generation; cannot open it")

    @staticmethod
    def _check_file_length(env: lmdb.Environment, data_file: Path) -> None:
        # A truncated file would fault (SIGBUS) on the first read past its end; catch it here.
        needed = _used_bytes(env)
        actual = data_file.stat().st_size
        if actual < needed:
            env.close()
            raise CorruptDatabaseError(
                f"{data_file} is truncated: {actual} bytes, but its pages reach {needed}",
                "restore it from a backup or an export",
            )

    @property
    def env(self) -> lmdb.Environment:
        if self._env is None:
            raise DatabaseClosedError(f"the database at {self.path} is closed")
        return self._env

    def _open_handles(self) -> None:
        # Handles are opened here, outside any caller's transaction: a handle opened inside a
        # read transaction dies when it ends, and one opened lazily inside write() would
        # deadlock on LMDB's (non-recursive) write lock.  py-lmdb opens them in a write
        # transaction when the environment is writable, so a writable open waits for another
        # process's writer to commit; a read-only open never waits.
        self._db_handles = {}
        for name in self._names:
            try:
                self._db_handles[name] = self.env.open_db(name, create=False)
            except lmdb.NotFoundError:
                continue  # not created yet; create() makes it
            except lmdb.Error as exc:
                raise translate(exc, self.path) from None

    def db(self, name: bytes) -> lmdb._Database:
        """The handle of a named sub-database."""
        handle = self._db_handles.get(name)
        if handle is None:
            raise NotADatabaseError(f"{self.path} has no {name.decode()} sub-database", "is it a simdb database?")
        return handle

    def create(self, txn: lmdb.Transaction[bytes], name: bytes) -> None:
        """Create a named sub-database inside a write transaction."""
        self._db_handles[name] = self.env.open_db(name, txn=txn, create=True)

    def close(self) -> None:
        with self._lock.exclusive():
            if self._env is not None:
                self._env.close()
                self._env = None

    @property
    def closed(self) -> bool:
        return self._env is None

    # -- transactions --------------------------------------------------------------------

    def _superseded(self) -> bool:
        try:
            return os.stat(self._current_file).st_ino != self._current_inode
        except FileNotFoundError:
            return False

    def _reader_should_move(self) -> bool:
        # A reader of a superseded generation still sees a consistent snapshot, only an
        # older one; checking at most every READ_RECHECK_SECONDS saves a stat() per query
        # and bounds how stale it can be.  Writers check on every transaction.
        now = time.monotonic()
        if now < self._next_read_check:
            return False
        self._next_read_check = now + READ_RECHECK_SECONDS
        return self._superseded()

    def _reopen(self, stale_env: lmdb.Environment) -> None:
        with self._lock.exclusive():
            if self._env is stale_env:  # another thread may have reopened already
                stale_env.close()
                self._env = None
                self._open_generation()

    def _ensure_room(self, reserve: int) -> None:
        with self._lock.exclusive():
            env = self.env
            info = env.info()
            # Copy-on-write needs room for the new pages before the old ones are freed.
            needed = _used_bytes(env) + 2 * reserve
            if needed > info["map_size"]:
                env.set_mapsize(max(needed, 2 * info["map_size"]))

    def reopen_with(self, names: list[bytes]) -> None:
        """Reopen the environment with handles for these named sub-databases."""
        self._names = names
        self.max_dbs = len(names) + 1
        self._reopen(self.env)

    def _adopt_map_size(self, stale_env: lmdb.Environment, grow: bool) -> None:
        with self._lock.exclusive():
            if self._env is not stale_env:
                return
            if grow:
                stale_env.set_mapsize(2 * stale_env.info()["map_size"])
            else:
                stale_env.set_mapsize(0)  # adopt the size another process grew the map to

    def _begin(self, env: lmdb.Environment, write: bool) -> lmdb.Transaction[bytes] | None:
        """Begin a transaction; None when another process has grown the map beyond ours,
        which must be adopted (with no transaction of this process open) first."""
        try:
            return env.begin(write=write, buffers=False)
        except lmdb.MapResizedError:
            return None
        except lmdb.Error as exc:
            raise translate(exc, self.path) from None

    @contextmanager
    def read(self) -> Iterator[lmdb.Transaction[bytes]]:
        """A read-only snapshot transaction: one LMDB begin, and a stat() at most every
        READ_RECHECK_SECONDS to follow a compaction made by another process."""
        while True:
            self._lock.acquire_shared()
            try:
                env = self.env
                action = "reopen" if self._reader_should_move() else None
                txn = None
                if action is None:
                    txn = self._begin(env, write=False)
                    if txn is None:
                        action = "adopt"
                if txn is not None:  # the same test as action is None, in a form mypy narrows
                    try:
                        yield txn
                    except lmdb.Error as exc:
                        raise translate(exc, self.path) from None
                    finally:
                        txn.abort()
                    return
            finally:
                self._lock.release_shared()
            if action == "adopt":
                self._adopt_map_size(env, grow=False)
            else:
                self._reopen(env)

    def write(self, work: Callable[[lmdb.Transaction[bytes]], T], reserve: int = 0) -> T:
        """Run ``work`` in one write transaction and commit it; retried whole if the map
        fills or the generation changes, so ``work`` must not mutate state outside ``txn``.
        An exception from ``work`` aborts the transaction: nothing of it is stored.
        ``reserve`` estimates the bytes the work adds, so the map can grow before it starts
        rather than after a failed attempt."""
        if self.readonly:
            raise ReadOnlyError(f"{self.path} was opened read-only", "open it without readonly=True")
        with self._write_mutex:
            if reserve:
                self._ensure_room(reserve)
            if time.monotonic() - self._last_reader_check > READER_CHECK_INTERVAL:
                # A reader killed mid-transaction pins old pages until its slot is cleared;
                # a long-running writer must clear them itself or the file grows without end.
                self.env.reader_check()
                self._last_reader_check = time.monotonic()
            while True:
                action = None
                with self._lock.shared():
                    env = self.env
                    txn = self._begin(env, write=True)
                    if txn is None:
                        action = "adopt"
                    elif self._superseded():  # checked under LMDB's write lock; see module doc
                        txn.abort()
                        action = "reopen"
                    else:
                        try:
                            result = work(txn)
                            txn.commit()
                            return result
                        except lmdb.MapFullError:
                            action = "grow"
                        except lmdb.MapResizedError:
                            action = "adopt"
                        except lmdb.Error as exc:
                            raise translate(exc, self.path) from None
                        finally:
                            txn.abort()  # a no-op after commit; otherwise nothing of it is stored
                if action == "reopen":
                    self._reopen(env)
                else:
                    self._adopt_map_size(env, grow=action == "grow")

    # -- compaction ----------------------------------------------------------------------

    def swap_in_rewrite(self, rewrite: Callable[[lmdb.Transaction[bytes], lmdb.Environment], None]) -> None:
        """Write the next generation with ``rewrite(source_txn, target_env)`` while holding
        the write lock, make it durable, and point ``CURRENT`` at it atomically."""

        def build(txn: lmdb.Transaction[bytes]) -> None:
            # _read_current admitted this generation only if it matches _GENERATION.
            number = int(_GENERATION.fullmatch(self.generation).group(1)) + 1  # type: ignore[union-attr]
            name = f"data-{number:06d}.mdb"
            target_file = self.path / name
            _remove_generation(self.path, name)  # a compaction killed before its swap
            try:
                target = lmdb.open(
                    str(target_file), subdir=False, max_dbs=self.max_dbs, map_size=max(MIN_MAP_SIZE, 2 * _used_bytes(self.env)),
                    max_readers=MAX_READERS, meminit=False, sync=False,
                )
            except lmdb.Error as exc:
                raise translate(exc, target_file) from None
            try:
                try:
                    rewrite(txn, target)
                except lmdb.MapFullError:
                    # Must not reach write(), which would grow the *source* map and retry.
                    raise StorageError(f"the compacted copy outgrew its map at {target_file}") from None
                target.sync(True)
            except BaseException:
                target.close()
                _remove_generation(self.path, name)
                raise
            target.close()
            _point_current_at(self.path, name)

        old_generation = self.generation
        self.write(build)
        self._reopen(self.env)
        # Other processes keep their open handles; the names go so nothing new opens them.
        _remove_generation(self.path, old_generation)

    def size_on_disk(self) -> int:
        """Bytes of the live data file."""
        return (self.path / self.generation).stat().st_size
