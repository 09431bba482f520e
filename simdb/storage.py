"""The LMDB environment: layout on disk, transactions, map growth, compaction swaps, and the
translation of LMDB's errors into simdb's.

Layout.  A database is a directory holding ``CURRENT`` (the name of the live data file) and
that file, ``data-NNNNNN.mdb`` with its ``-lock`` file.  Compaction writes the next
generation beside it and renames ``CURRENT`` over; each generation has its own lock file, so
no process ever pairs a new data file with an old reader table.  Generation numbers only
grow, so a name is never reused within one database (inode numbers are: the filesystem hands
a freed one to the next new file, which is why a generation is never told apart by
``CURRENT``'s inode).  A database removed and made again at the same path starts at the first
name again, so a generation is the pair (name in ``CURRENT``, identity of the data file this
process holds open): an inode cannot be reused while a process holds its file open, so the
pair cannot repeat.  The path is made absolute at open, so a later ``os.chdir`` changes
nothing.  A creation makes the first data file before its lock file, and LMDB of earlier
releases made both at once, so a lock file without its first data file is damage, not an
interrupted creation.  ``CURRENT`` has a second line, ``initialised``, once the open that
created a database has made the first data file: from then on an empty first data file is
damage too.  Databases of earlier releases (one-line ``CURRENT``) are never rewritten into
that form, so those releases can still read them.  No file inside the directory may be a
symbolic link, a FIFO or a device (the directory itself may be a link); entries named like a
generation that are not regular files (a directory, say) are left alone by the sweep below.

Swaps.  Every write transaction compares the generation named in ``CURRENT`` (and the identity
of its data file: one stat) with the one this process opened, *after* taking LMDB's write
lock; compaction renames ``CURRENT`` while holding that lock, so a writer can never commit
into a superseded file.  Readers compare at
most every READ_RECHECK_SECONDS: until then they read a consistent, slightly older snapshot.
Writable opens and compactions remove, under that lock, what killed compactions left: other
generations, lock files without their data file, staging files of dead processes.

Growth.  A write that fills the map is retried after doubling it; a transaction that finds
the file grown by another process adopts the new size.  Both need no transaction active in
this process, which a shared/exclusive lock guarantees, so one object serves many threads.
The exclusive side is taken only when the map must really change (or a generation swap must
be followed): an ordinary write, with or without a reserve, takes only the shared side, so it
never waits for a long reader and never makes queries wait behind it.  Following another
process's compaction does take the exclusive side, so it waits for this process's running
reads to end, and new reads wait with it.
"""

from __future__ import annotations

import errno
import mmap
import os
import re
import secrets
import shutil
import socket
import stat
import subprocess
import sys
import threading
import time
import weakref
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol, TypeVar

import lmdb

from simdb.errors import (
    AlreadyOpenError,
    CorruptDatabaseError,
    DatabaseClosedError,
    DatabaseError,
    DatabaseMissingError,
    DatabaseReplacedError,
    DiskFullError,
    InheritedHandleError,
    InvalidInputError,
    NotADatabaseError,
    PermissionDeniedError,
    ReadInProgressError,
    ReadOnlyError,
    ReadOnlyFileSystemError,
    Remedy,
    SimdbError,
    StorageError,
    UnfinishedDatabaseError,
)

T = TypeVar("T")

CURRENT = "CURRENT"
FIRST_GENERATION = "data-000001.mdb"
_STAGING = ".CURRENT."  # prefix of the files CURRENT is written to before the atomic rename
_GENERATION = re.compile(r"data-(\d{6,})\.mdb")  # at least 6 digits: generation 1,000,000 has 7
MIN_MAP_SIZE = 1 << 26  # 64 MiB of address space; the file itself only grows as pages are written
MAX_MAP_SIZE = 1 << 44  # 16 TiB: well inside the 47-bit user address space that mmap must find
MAX_READERS = 512
# LMDB's lock file: a 192-byte header and a 64-byte slot per reader after the first.  LMDB
# makes it sparse and writes it through a memory map, so on a full filesystem touching a new
# page faults (SIGBUS); simdb allocates it whole before LMDB opens it.
LOCK_FILE_BYTES = 192 + 64 * (MAX_READERS - 1)
_INITIALISED = "initialised"  # CURRENT's second line once the first data file was made
DISK_FULL_MARGIN = 1 << 20  # an I/O error with less free than this is taken as a full disk
READ_RECHECK_SECONDS = 0.02  # how stale a reader may be after another process compacts
#: Key in a superseded generation's main database, put by the compaction that superseded it
#: in the transaction that swapped ``CURRENT``: a reader's snapshot holding it moves on.
SUPERSEDED_BY = b"\x00simdb superseded by"
READER_CHECK_INTERVAL = 5.0  # seconds between sweeps for slots of dead readers
_NO_SPACE = (errno.ENOSPC, errno.EFBIG, errno.EDQUOT)


def _nearly_full(directory: Path) -> bool:
    """Whether the filesystem holding ``directory`` has (almost) no space or inodes left:
    one statvfs call."""
    try:
        info = os.statvfs(directory)
    except OSError:
        return False
    return info.f_bavail * info.f_frsize < DISK_FULL_MARGIN or (info.f_files > 0 and info.f_favail == 0)


def _file_size_limit_reached(directory: Path) -> bool:
    """Whether this process has a file size limit (``ulimit -f``) that the largest file in
    ``directory`` has (almost) reached: a write past it is cut short, which LMDB reports as
    EIO too.  One getrlimit call and a stat per file, on the error path only."""
    try:
        import resource  # not on Windows
    except ImportError:
        return False
    limit = resource.getrlimit(resource.RLIMIT_FSIZE)[0]
    if limit == resource.RLIM_INFINITY:
        return False
    with suppress(OSError):
        return any(entry.stat().st_size + DISK_FULL_MARGIN >= limit for entry in directory.iterdir())
    return False


_BATCH_NOT_STORED = "free disk space; the batch was not stored"
_NOT_CREATED = "free disk space; the database was not created"
_NOT_COMPACTED = "free disk space; the database was not compacted and is unchanged"
_NOT_OPENED = "free disk space; nothing was written"


def _disk_full(where: object, reason: str, hint: str = _BATCH_NOT_STORED) -> DiskFullError:
    return DiskFullError(f"no space left writing {where}: {reason}", hint)


def translate(
    exc: lmdb.Error,
    where: object,
    directory: Path | None = None,
    full_hint: str = _BATCH_NOT_STORED,
    *,
    reading: bool = False,
) -> DatabaseError:
    """Map an LMDB error to the matching simdb error, naming ``where``, by its class and
    errno alone (``exc.code``, which py-lmdb sets for an operating-system failure); LMDB's
    text is only quoted.  LMDB reports a write cut short by a full disk as EIO, so an EIO
    with (almost) no space left in ``directory`` is a full disk too; that costs one statvfs
    call, on the error path only.  A second environment on a file this process already has
    open (which py-lmdb refuses with neither class nor code) is caught before LMDB is asked:
    see :func:`_open_environment`.  ``reading``: ``exc`` ended a read-only transaction, where
    MDB_BAD_TXN (the transaction failed inside LMDB, as it does on a damaged sub-database
    record, with no error of its own) can only mean damage."""
    text = str(exc)
    code = getattr(exc, "code", 0)
    if isinstance(exc, lmdb.ReadonlyError):
        return ReadOnlyError(f"{where} is read-only: {text}", path=where)
    if isinstance(exc, lmdb.MapFullError) or code in _NO_SPACE:
        return _disk_full(where, text, full_hint)
    if code == errno.EIO and directory is not None and _nearly_full(directory):
        return _disk_full(where, f"{text} (the filesystem is full)", full_hint)
    if code == errno.EIO and directory is not None and _file_size_limit_reached(directory):
        return _disk_full(where, f"{text} (the file size limit, ulimit -f, is reached: raise it)", full_hint)
    if isinstance(exc, _DAMAGE) or (reading and isinstance(exc, lmdb.BadTxnError)):
        return CorruptDatabaseError(f"{where} is damaged: {text}", "restore it from a backup or an export", path=where)
    return StorageError(f"LMDB failed on {where}: {text}", path=where)


#: LMDB's errors that mean the file is damaged (or not an LMDB file of this version).
_DAMAGE = (
    lmdb.CorruptedError,
    lmdb.InvalidError,
    lmdb.PageNotFoundError,
    lmdb.VersionMismatchError,
    lmdb.BadChecksumError,
)

#: The environment this process has open on each data file, by the file's (st_dev, st_ino),
#: with the process that opened it (a forked child inherits the table).  LMDB allows one
#: per file per process; weak references, so that an environment dropped without close()
#: frees its file too.
_open_environments: dict[tuple[int, int], tuple[weakref.ref[lmdb.Environment], int]] = {}
#: The Storage this process has open on each database directory, by the directory's
#: (st_dev, st_ino), whatever path or link names it.  One per directory: two handles would
#: hold two generations once another process compacted, and the older one, following the
#: swap, would open the newer one's files a second time.
_open_directories: dict[tuple[int, int], weakref.ref[Storage]] = {}
#: Taken for both tables, and around every open and close of a lock file by this process
#: outside LMDB (see :func:`_open_environment`).
_open_environments_lock = threading.Lock()


def _is_open(env: lmdb.Environment | None) -> bool:
    """Whether ``env`` is a live, unclosed environment: one cheap LMDB call."""
    if env is None:
        return False
    try:
        env.flags()
    except lmdb.Error:  # closed
        return False
    return True


def _open_environment(
    data_file: Path, identity: tuple[int, int] | None, database: Path, **options: object
) -> lmdb.Environment:
    """``lmdb.open(data_file, **options)``, its lock file allocated first
    (:func:`_allocate_lock_file`), refused with AlreadyOpenError naming ``database`` if this
    process already has an environment open on the file whose identity is ``identity``
    (LMDB would refuse it too, but with neither class nor code); the new one is recorded.
    The refusal comes before the lock file is touched: closing any descriptor of a file
    drops every POSIX lock this process holds on it, LMDB's included, and a third process
    would then take the database for unused and reset its lock file under this one's
    writes (found by a probe: lost commits and a damaged key index).  Costs a dictionary
    scan of this process's open files."""
    with _open_environments_lock:
        for held, (reference, _) in list(_open_environments.items()):
            if not _is_open(reference()):
                del _open_environments[held]
        if identity is not None and identity in _open_environments:
            if _open_environments[identity][1] != os.getpid():
                raise _inherited_error(database)
            raise AlreadyOpenError(f"the database at {database} is already open in this process", path=database)
        _allocate_lock_file(data_file.with_name(data_file.name + "-lock"))
        env = lmdb.open(str(data_file), **options)  # type: ignore[arg-type]
        if identity is not None:
            _open_environments[identity] = (weakref.ref(env), os.getpid())
        return env


def _open_error(exc: lmdb.Error, data_file: Path, directory: Path) -> DatabaseError:
    """The error for LMDB refusing to open ``data_file``: EACCES there is the system refusing
    this user the file (py-lmdb raises it as ReadonlyError, as it does a write to a read-only
    environment), EROFS a writable open on a read-only file system, else :func:`translate`'s."""
    if getattr(exc, "code", 0) == errno.EACCES:
        return PermissionDeniedError(f"no permission to open {data_file}", path=data_file)
    if getattr(exc, "code", 0) == errno.EROFS:
        return ReadOnlyFileSystemError(
            f"{directory} is on a read-only file system", remedy=Remedy.OPEN_READONLY, path=directory
        )
    return translate(exc, data_file, directory, _NOT_OPENED)


def _inherited_error(database: Path) -> InheritedHandleError:
    return InheritedHandleError(f"the database at {database} was open when this process was forked", path=database)


def _os_error(exc: OSError, what: str, hint: str = _BATCH_NOT_STORED) -> DatabaseError:
    """Map an operating-system failure while ``what`` to DiskFullError (no space or no
    inodes: both ENOSPC), with ``hint``, or StorageError."""
    if exc.errno in _NO_SPACE:
        return _disk_full(what, exc.strerror or str(exc), hint)
    return StorageError(f"failed {what}: {exc.strerror or exc}")


def _read_current_file(directory: Path) -> tuple[str, bool]:
    """The generation the ``CURRENT`` file of ``directory`` names, and whether its first data
    file was made.  One open and read; refuses a link, a FIFO or anything else that is not a
    regular file (opening a FIFO would block) without blocking, and content that is not a
    simdb generation's name."""
    current = directory / CURRENT
    try:
        fd = os.open(current, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            _refuse_link(current)
        raise StorageError(f"cannot read {current}: {exc.strerror}") from None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise CorruptDatabaseError(f"{current} is not a regular file", "restore it from a backup")
        raw = os.read(fd, 64)
    except OSError as exc:
        raise StorageError(f"cannot read {current}: {exc.strerror}") from None
    finally:
        os.close(fd)
    name, *flags = raw.decode("ascii", "replace").split() or [""]
    if not _GENERATION.fullmatch(name):
        raise CorruptDatabaseError(f"{current} names {name!r}, not a data file", "restore it from a backup")
    if flags not in ([], [_INITIALISED]):
        raise CorruptDatabaseError(
            f"{current} has unexpected content after the name {name!r}: {' '.join(flags)[:40]!r}",
            f"restore it from a backup, or write the two lines '{name}' and '{_INITIALISED}' into it",
        )
    return name, bool(flags)


def _refuse_link(path: Path) -> None:
    """Refuse a symbolic link inside the database directory: LMDB would follow it and write
    (its lock file, even for a reader) wherever it points.  One lstat."""
    if path.is_symlink():
        raise CorruptDatabaseError(
            f"{path} is a symbolic link; simdb does not follow links inside a database directory",
            "replace it with the file it points to",
        )


def _dangles(path: Path) -> bool:
    """Whether ``path`` is a symbolic link to nothing (or in a loop).  An lstat and a stat."""
    return path.is_symlink() and not path.exists()


def _refuse_special(path: Path) -> bool:
    """Refuse ``path`` if it exists and is not a regular file: a link (see _refuse_link), or a
    FIFO, device, socket or directory, which LMDB would block on or fail with a misleading
    error.  Returns whether it exists.  One lstat; never opens it."""
    try:
        mode = os.lstat(path).st_mode
    except FileNotFoundError:
        return False
    except OSError as exc:
        raise StorageError(f"cannot examine {path}: {exc.strerror}") from None
    if stat.S_ISLNK(mode):
        _refuse_link(path)
    if not stat.S_ISREG(mode):
        raise CorruptDatabaseError(f"{path} is not a regular file", "remove it, or restore the database from a backup")
    return True


def _identity(path: Path) -> tuple[int, int] | None:
    """(st_dev, st_ino) of ``path``, or None if it is gone: one stat."""
    try:
        info = os.stat(path)
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise StorageError(f"cannot examine {path}: {exc.strerror}") from None
    return info.st_dev, info.st_ino


#: The mode new files are created with, less the umask: a database made under umask 002 is
#: group-writable, as every file its owner makes there.
_FILE_MODE = 0o666


def _copy_access(model: Path, copy: Path) -> None:
    """Give ``copy`` the permission bits and, where this user may (a member of that group),
    the group of ``model``: a compaction's new generation must stay open to whoever could
    use the old one (a reader writes the lock file).  Made with the compacting user's umask
    and group, a database shared by a group locked the others out.  Raises OSError."""
    info = model.stat()
    os.chmod(copy, stat.S_IMODE(info.st_mode))
    if copy.stat().st_gid != info.st_gid:
        with suppress(PermissionError):
            os.chown(copy, -1, info.st_gid)


def _create_data_file(data_file: Path) -> None:
    """Create an empty first data file if none exists, before its lock file (see module doc).
    One open; LMDB fills it."""
    try:
        os.close(os.open(data_file, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, _FILE_MODE))
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            _refuse_link(data_file)
        raise _os_error(exc, f"creating {data_file}", _NOT_CREATED) from None


def _allocate_lock_file(lock_file: Path) -> None:
    """Create ``lock_file`` if missing and allocate all of its LOCK_FILE_BYTES, so LMDB's
    writes through its memory map cannot fault on a full disk.  Costs an open and a
    fallocate (a no-op once allocated).  A filesystem that cannot allocate ahead, or one we
    may not write, is left for LMDB to report."""
    try:
        fd = os.open(lock_file, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, _FILE_MODE)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            _refuse_link(lock_file)
        if exc.errno in _NO_SPACE:
            raise _os_error(exc, f"creating {lock_file}", _NOT_OPENED) from None
        return
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise CorruptDatabaseError(f"{lock_file} is not a regular file", "remove it; simdb makes a new one")
        os.posix_fallocate(fd, 0, max(LOCK_FILE_BYTES, os.fstat(fd).st_size))
    except OSError as exc:
        if exc.errno in _NO_SPACE:
            raise _os_error(exc, f"allocating {lock_file}", _NOT_OPENED) from None
    finally:
        os.close(fd)


#: Per thread: how deep it is in :func:`reporting_commit` sections.
_commit_sections = threading.local()


@contextmanager
def reporting_commit() -> Iterator[None]:
    """Mark this thread, for the block, as committing a batch and reporting the result to
    its caller (``on_batch``): see :func:`commit_in_progress`.  O(1)."""
    _commit_sections.depth = getattr(_commit_sections, "depth", 0) + 1
    try:
        yield
    finally:
        _commit_sections.depth -= 1


def commit_in_progress() -> bool:
    """Whether this thread is committing a batch or reporting it (``add_many``'s and
    ``add_texts``' ``on_batch``).  For a signal handler: an exception it raises there leaves
    its caller unable to tell whether the batch was stored; it can note the signal instead
    and act once ``on_batch`` has been called.  O(1)."""
    return getattr(_commit_sections, "depth", 0) > 0


def host_tag() -> str:
    """Where this process's id means something, as the names of files and marks that a
    process leaves for itself carry it beside that id (see :func:`gone_process`): the host's
    name, dots and hyphens (which separate those names' fields) made underscores and anything
    but ASCII escaped, and on Linux the inode of its process-id namespace, since containers
    that share a host name need not share process ids.  One stat."""
    name = socket.gethostname().replace(".", "_").replace("-", "_")
    with suppress(OSError):  # not Linux, or no /proc: the host name alone
        name += f"_{os.stat('/proc/self/ns/pid').st_ino}"
    return name.encode("ascii", "backslashreplace").decode("ascii")


def gone_process(pid: str) -> bool:
    """Whether ``pid``, a process id read from a file name that a process of this host wrote
    for itself, names another process that no longer runs, so that what it left can go.
    Anyone may name a file so: a process id is a few ASCII digits, and anything else (or
    this process, or one of another user) is not judged gone.  One ``kill(pid, 0)``."""
    if not (pid.isascii() and pid.isdigit() and len(pid) <= 9) or int(pid) == os.getpid():
        return False
    try:
        os.kill(int(pid), 0)
    except ProcessLookupError:
        return True
    except OSError:  # another user's process: alive
        return False
    return False


#: How often a thread waiting on a _SharedLock looks again without being woken: an interrupt
#: (KeyboardInterrupt, or whatever a signal handler raises) can land between a release and
#: its wake-up, and the waiter must not sleep on after that.
_LOCK_RECHECK_SECONDS = 0.05
_WAITING, _HOLDING = "waiting", "holding"  # an exclusive hold's states


class _SharedLock:
    """Many holders of ``shared`` or one of ``exclusive``; used so that map resizes and
    generation swaps never happen under a live transaction of this process.

    Writer-preferring: while an ``exclusive`` waits, no thread takes a *new* ``shared``, so a
    thread querying in a loop cannot starve writes and compactions.  A thread that already
    holds ``shared`` may take it again (nested reads) without waiting, or it would wait for
    an exclusive that waits for it.

    Safe against interrupts, which a signal handler (Ctrl-C) raises between any two
    bytecodes of the main thread, ``finally`` blocks included.  Every hold is one entry
    under a token of its own, made in one step under the mutex and given back by
    :attr:`drop`, the dict's own ``pop``: one C call, which no interrupt can split, in a
    ``finally`` that the acquiring call is inside.  So an interrupt never leaves a hold
    behind, and a wake-up it skips costs a waiter at most :data:`_LOCK_RECHECK_SECONDS`.
    The mutex is a plain lock entered by ``with``, whose C ``__enter__`` returns inside the
    protected block (``threading.Condition``'s Python ``__enter__`` can be interrupted after
    it acquired, which left the lock held for good)."""

    def __init__(self) -> None:
        self._mutex = threading.Lock()
        self._changed = threading.Condition(self._mutex)
        # token -> thread ident of a shared hold, or _WAITING / _HOLDING of an exclusive one.
        self._holds: dict[object, int | str] = {}
        #: ``drop(token, None)`` gives back the hold of ``token``, if it has one.
        self.drop = self._holds.pop

    def acquire_shared(self, token: object) -> None:
        """Hold ``shared`` under ``token``, a fresh object that the caller gives back with
        ``drop(token, None)`` and then :meth:`wake`, in a ``finally`` around this call."""
        thread = threading.get_ident()
        with self._mutex:
            while True:
                holds = list(self._holds.values())  # one C call: drop() needs no mutex
                if _HOLDING not in holds and (_WAITING not in holds or thread in holds):
                    break
                self._changed.wait(_LOCK_RECHECK_SECONDS)
            self._holds[token] = thread

    def wake(self) -> None:
        """Wake the waiting threads (after a drop)."""
        with self._mutex:
            self._changed.notify_all()

    @contextmanager
    def shared(self) -> Iterator[None]:
        token = object()
        try:
            self.acquire_shared(token)
            yield
        finally:
            self.drop(token, None)
            self.wake()

    def exclusive_waiting(self) -> bool:
        """Whether a thread waits for (or holds) the exclusive lock.  One C call and a scan."""
        holds = list(self._holds.values())
        return _WAITING in holds or _HOLDING in holds

    def held_by_this_thread(self) -> bool:
        """Whether this thread holds ``shared``: then an ``exclusive`` it took would wait for
        itself.  Only this thread makes or gives back its holds, so the answer stays true
        until it does.  One C call and a scan of the holds."""
        return threading.get_ident() in list(self._holds.values())

    @contextmanager
    def exclusive(self) -> Iterator[None]:
        token = object()
        try:
            with self._mutex:
                self._holds[token] = _WAITING
                while any(hold is _HOLDING or isinstance(hold, int) for hold in list(self._holds.values())):
                    self._changed.wait(_LOCK_RECHECK_SECONDS)
                self._holds[token] = _HOLDING
            yield
        finally:
            self.drop(token, None)
            self.wake()


def _fsync_directory(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


#: The suffix of the file a whole-or-nothing output is written to before its rename.
_PARTIAL = ".partial"


def partial_beside(target: Path) -> tuple[int, Path]:
    """A new file beside ``target`` to write it in before :func:`replace_durably` renames it
    over ``target``: its descriptor and path, ``.NAME.HOST.PID.RANDOM.partial``, with the
    mode ``target`` has (or would get, by the umask).
    Such files that a process of this host left and that is gone (SIGKILLed, or the
    machine's OOM killer) are removed first: the writer's cleanup never ran, and the file may
    be as large as the output.  A process on another host sharing the directory is never
    judged.  One directory scan.  Raises OSError."""
    prefix = f".{target.name}.{host_tag()}."
    directory = target.parent
    for entry in os.scandir(directory):
        left = entry.name.startswith(prefix) and entry.name.endswith(_PARTIAL)
        if left and entry.is_file(follow_symlinks=False) and gone_process(entry.name[len(prefix) :].split(".")[0]):
            Path(entry.path).unlink(missing_ok=True)
    try:
        mode: int | None = stat.S_IMODE(target.stat().st_mode)
    except FileNotFoundError:
        mode = None  # a new file's: 0666 less the umask, which the kernel applies at the open
    while True:
        # Not mkstemp: its file is private, and reading the umask to widen it would set it
        # for a moment, for every thread of the process (other threads' files included).
        path = directory / f"{prefix}{os.getpid()}.{secrets.token_hex(5)}{_PARTIAL}"
        try:
            # Private until fchmod gives it the mode of the file it replaces: that file's
            # readers only, never a wider set for a moment.
            descriptor = os.open(
                path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o666 if mode is None else 0o600
            )
            break
        except FileExistsError:
            continue
    if mode is not None:
        try:
            os.fchmod(descriptor, mode)  # the mode the file it replaces has, whatever the umask
        except OSError:
            os.close(descriptor)
            path.unlink(missing_ok=True)
            raise
    return descriptor, path


def replace_durably(written: str | os.PathLike[str], target: str | os.PathLike[str]) -> None:
    """Rename the finished file ``written`` over ``target`` so that a power loss leaves the
    old file or the whole new one: its data is synced before the rename, and the directory
    after it (else the rename may reach the disk before the data, and a backup replaced by an
    export be lost with the export).  Costs two fsyncs.  Raises OSError."""
    with open(written, "rb") as handle:
        os.fsync(handle.fileno())
    os.replace(written, target)
    _fsync_directory(Path(target).parent)


def _point_current_at(directory: Path, name: str, *, initialised: bool = True, create: bool = False) -> None:
    """Make ``CURRENT`` name the data file ``name``, durably and atomically: written to a
    staging file of this process and thread, then renamed over.  With ``create``, only if no
    ``CURRENT`` exists yet (a hard link, which fails if it does): of creators racing to make
    a database the first wins, and none overwrites what the winner has written since.
    Costs two fsyncs.  Raises OSError."""
    staging = directory / f"{_STAGING}{os.getpid()}.{threading.get_ident()}"
    try:
        with open(staging, "w") as handle:
            handle.write(name + "\n" + (_INITIALISED + "\n" if initialised else ""))
            handle.flush()
            os.fsync(handle.fileno())
        if create:
            try:
                os.link(staging, directory / CURRENT)
            except FileExistsError:
                return
            except OSError as exc:
                if exc.errno not in (errno.EPERM, errno.ENOTSUP, errno.EOPNOTSUPP):
                    raise
                os.replace(staging, directory / CURRENT)  # a filesystem without hard links
        else:
            with suppress(FileNotFoundError):
                _copy_access(directory / CURRENT, staging)  # as the data files keep theirs
            os.replace(staging, directory / CURRENT)
    finally:
        staging.unlink(missing_ok=True)
    _fsync_directory(directory)


def _cut_short_creation(name: str, initialised: bool, size: int) -> bool:
    """Whether a first data file that LMDB finds invalid is one whose creation was cut short
    (a full disk while LMDB wrote its meta pages), so that it held nothing: CURRENT was never
    marked initialised, and the file is no longer than LMDB's two meta pages.  (A database
    of the first release has an unmarked CURRENT too, but any it made holds more pages.)"""
    return name == FIRST_GENERATION and not initialised and 0 < size <= 2 * mmap.PAGESIZE


def _remove_generation(directory: Path, name: str) -> None:
    """Delete a generation's data and lock files, if present and not directories (which
    are not simdb's: see _sweep_leftovers)."""
    for path in (directory / name, directory / (name + "-lock")):
        with suppress(IsADirectoryError):
            path.unlink(missing_ok=True)


def _used_bytes(env: lmdb.Environment) -> int:
    """Bytes of the data file up to its last page number (some of the last pages may be
    free and never written: see _check_file_length)."""
    return int((env.info()["last_pgno"] + 1) * env.stat()["psize"])


#: Run in a new process by :func:`_free_pages_at_most`: prints how many of a data file's pages
#: can be free (all but the two meta pages and the pages of the main database and of every
#: sub-database named in it; the free list's own pages count as free).  A page in use that is
#: missing from the file kills that process (SIGBUS), not the caller.
_FREE_PAGES_PROBE = """
import sys, lmdb
def opened(max_dbs):
    return lmdb.open(sys.argv[1], subdir=False, readonly=True, max_dbs=max_dbs, max_readers=int(sys.argv[2]))
def pages(stat):
    return stat["branch_pages"] + stat["leaf_pages"] + stat["overflow_pages"]
env = opened(0)
with env.begin() as txn:
    names = list(txn.cursor().iternext(values=False))
env.close()
env = opened(len(names) + 1)
in_use = pages(env.stat())
for name in names:
    try:
        handle = env.open_db(name, create=False)
    except lmdb.Error:
        continue  # a record of the main database that is not a sub-database
    with env.begin() as txn:
        in_use += pages(txn.stat(handle))
print(env.info()["last_pgno"] + 1 - 2 - in_use)
"""


def _free_pages_at_most(data_file: Path) -> int | None:
    """How many pages of ``data_file`` can be free (:data:`_FREE_PAGES_PROBE`), or None when
    the probe could not tell: it died reading a page in use past the file's end, or there
    is no interpreter to run it in.  Costs a Python start, about 0.1 s."""
    if not sys.executable:
        return None
    arguments = [str(data_file), str(MAX_READERS)]
    try:
        probe = subprocess.run(
            [sys.executable, "-c", _FREE_PAGES_PROBE, *arguments], capture_output=True, text=True, timeout=300
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    if probe.returncode != 0 or not probe.stdout.strip().lstrip("-").isdigit():
        return None
    return int(probe.stdout)


def _check_file_length(env: lmdb.Environment, data_file: Path) -> None:
    """Refuse a data file that lost pages in use, before anything reads one: reading a page
    past the file's end faults (SIGBUS).  A sound file may end before its last page number,
    when the pages past its end are free: LMDB never writes a page that a transaction took
    and gave back (one that put and deleted a large value, say), and it can be the last one.
    So a short file is refused only when more pages are missing than can be free, which a
    new process counts (:func:`_free_pages_at_most`).  A file of full length costs a stat."""
    actual = data_file.stat().st_size
    missing = env.info()["last_pgno"] + 1 - actual // env.stat()["psize"]  # pages not wholly in the file
    if missing <= 0:
        return
    free = _free_pages_at_most(data_file)
    if free is None or missing > free:
        env.close()
        raise CorruptDatabaseError(
            f"{data_file} is truncated: {actual} bytes, but its pages in use reach past them "
            f"({missing} pages missing, " + ("unreadable" if free is None else f"at most {max(free, 0)} free") + ")",
            "restore it from a backup or an export",
        )


#: A check of a generation's settings before a Storage follows it (Storage.follow_check).
FollowCheck = Callable[["lmdb.Transaction[bytes]", dict[bytes, "lmdb._Database"]], None]


@dataclass(frozen=True)
class _Live:
    """The generation a Storage has open.  Replaced whole, in one assignment, so that no
    thread and no interrupt ever finds an environment beside another generation's name or
    handles."""

    env: lmdb.Environment
    name: str
    identity: tuple[int, int] | None  # (st_dev, st_ino) of its data file
    handles: dict[bytes, lmdb._Database]


#: Every Storage of this process, so that a forked child can disown them (see _inherit).
_storages: weakref.WeakSet[Storage] = weakref.WeakSet()
#: The environments a forked child inherited: kept, so that they are never closed there.
_inherited_environments: list[lmdb.Environment] = []


def _after_fork_in_child() -> None:
    # LMDB forbids using an environment after fork(): the child holds none of its file
    # locks, so a third process could take the database for unused and reset its lock file
    # under the child's writes.  Nor may the child close it: mdb_env_close there clears
    # the reader slots of the parent's running transactions (measured with py-lmdb 3.0).
    # And while it stays open, py-lmdb refuses to open the same file again here.  So the
    # child gets InheritedHandleError on every use and every open of such a database.
    global _open_environments_lock
    _open_environments_lock = threading.Lock()  # a parent thread may have held it at the fork
    for storage in list(_storages):
        storage._inherit()


os.register_at_fork(after_in_child=_after_fork_in_child)


class Storage:
    """One simdb directory's LMDB environment.  Use :meth:`open`."""

    def __init__(self, path: Path, readonly: bool, names: list[bytes], map_size: int) -> None:
        self.path = path
        self._names = names
        self.readonly = readonly
        self.max_dbs = len(names) + 1
        self._initial_map_size = map_size
        # The largest map a write of this handle has outgrown, doubled: kept for the next
        # generation it follows, or a write that fills the map while a compaction swaps in a
        # smaller file would be redone in a map too small for it again, and again.
        self._needed_map_size = 0
        self._lock = _SharedLock()
        self._write_mutex = threading.Lock()
        self._next_read_check = 0.0
        self._last_reader_check = time.monotonic()
        self._inherited = False  # set in a child process forked after the open
        self._close_pending: int | None = None  # the thread whose reads' end closes (see close())
        #: Called with a read transaction of a generation this handle is about to follow
        #: (another process's compaction, or a database made again at this path) and that
        #: generation's sub-database handles; raising keeps this handle where it is.  Held
        #: weakly: its owner holds this storage, and a cycle would keep a dropped handle's
        #: environment open until the garbage collector ran (opening the path again then
        #: raised AlreadyOpenError).
        self.follow_check: weakref.WeakMethod[FollowCheck] | None = None
        #: What follow_check raised: every later use raises it too, since the generation
        #: this handle still holds is no longer the database at its path.
        self._refusal: DatabaseReplacedError | None = None
        self._live: _Live | None = None
        # Its claim on the directory (see _open_directories) holds from the open until the
        # handle is closed for good; not while a reopen has _live unset for a moment.
        self._directory: tuple[int, int] | None = None
        self._released = False
        try:
            self._claim_directory()
            self._live = self._open_generation()
        except BaseException:
            self._release_claim()
            raise
        _storages.add(self)

    def _claim_directory(self) -> None:
        """Record this storage as the one this process has open on its directory, or raise
        AlreadyOpenError if another one holds it (see :data:`_open_directories`).  One stat
        and a dictionary scan."""
        directory = _identity(self.path)
        if directory is None:
            raise DatabaseMissingError(f"{self.path} does not exist", path=self.path)
        with _open_environments_lock:
            for held, reference in list(_open_directories.items()):
                holder = reference()
                if holder is None or holder._released:
                    del _open_directories[held]
            if directory in _open_directories:
                raise AlreadyOpenError(f"the database at {self.path} is already open in this process", path=self.path)
            _open_directories[directory] = weakref.ref(self)
            self._directory = directory

    def _release_claim(self) -> None:
        """Give up this storage's claim on its directory, once it is closed for good (closed,
        inherited by a forked child, or failed to open or reopen).  O(1)."""
        with _open_environments_lock:
            self._released = True
            directory = self._directory
            claim = None if directory is None else _open_directories.get(directory)
            if directory is not None and claim is not None and claim() is self:
                del _open_directories[directory]

    # -- opening -------------------------------------------------------------------------

    @staticmethod
    def exists(path: str | os.PathLike[str]) -> bool:
        """Whether a database directory is at ``path`` (its ``CURRENT`` file is).  O(1)."""
        return os.path.lexists(Path(path) / CURRENT)

    @staticmethod
    def holds_database(path: str | os.PathLike[str]) -> bool:
        """Whether ``path`` is a simdb database directory: a ``CURRENT`` file that names a
        data file there, not only a file of that name (LevelDB and RocksDB keep one too).
        For walks over a user's files, which skip databases; one stat and a small read."""
        try:
            name, _ = _read_current_file(Path(path))
        except SimdbError:  # none, or not one that names a simdb generation
            return False
        return (Path(path) / name).is_file()

    @classmethod
    def open(
        cls, path: str | os.PathLike[str], *, readonly: bool, create: bool, names: list[bytes], map_size: int | None
    ) -> Storage:
        """Open (or create) the database directory at ``path``, made absolute (not resolved:
        the directory itself may be a symbolic link) so that a later chdir changes nothing."""
        directory = Path(path).absolute()
        # A link on the way that names nothing would fail later as "File exists".
        on_the_way = () if directory.exists() else (directory, *directory.parents)
        dangling = next((part for part in on_the_way if _dangles(part)), None)
        if dangling is not None:
            raise StorageError(
                f"{dangling} is a symbolic link to {os.readlink(dangling)}, which does not exist (or loops)",
                "create the directory it names, or give another path",
                path=directory,
            )
        if directory.exists() and not directory.is_dir():
            raise NotADatabaseError(f"{directory} is a file, not a simdb database directory", "give a directory path")
        if not cls.exists(directory):
            # Another process creating this database at the same moment leaves only its
            # staging file here; that does not make the directory foreign.
            foreign = directory.exists() and any(not entry.name.startswith(_STAGING) for entry in directory.iterdir())
            if not cls.exists(directory):  # else that other process finished between our looks
                if foreign:
                    raise NotADatabaseError(
                        f"{directory} is not a simdb database (it has no {CURRENT} file)",
                        "point at a simdb database or at an empty or missing directory",
                    )
                if readonly or not create:
                    what = "is an empty directory" if directory.exists() else "does not exist"
                    raise DatabaseMissingError(
                        f"{directory} {what}: no database there yet",
                        "create it first by opening it writable",
                        path=directory,
                    )
                cls._create_directory(directory)
        return cls(directory, readonly, names, map_size or MIN_MAP_SIZE)

    @staticmethod
    def _create_directory(directory: Path) -> None:
        try:
            directory.mkdir(parents=True, exist_ok=True)
            # Not yet "initialised": until a writable open has made the first data file, a
            # missing one means this creation was interrupted, not that data was lost.
            _point_current_at(directory, FIRST_GENERATION, initialised=False, create=True)
        except OSError as exc:
            if exc.errno in _NO_SPACE:
                raise _os_error(exc, f"creating a database at {directory}", _NOT_CREATED) from None
            if exc.errno == errno.EROFS:
                raise ReadOnlyFileSystemError(
                    f"cannot create a database at {directory}: a read-only file system",
                    "choose a path on a writable file system",
                    path=directory,
                ) from None
            raise StorageError(
                f"cannot create a database at {directory}: {exc.strerror}", "check the path and its permissions"
            ) from None

    def _open_generation(self, map_size: int | None = None) -> _Live:
        """Open the generation ``CURRENT`` names, with a map of ``map_size`` bytes (default:
        twice the file, at least the initial size and any a write outgrew); retries if a
        compaction swaps it meanwhile.  Changes nothing of this object: the caller puts the
        result in place."""
        for _ in range(100):
            name, initialised = _read_current_file(self.path)
            data_file = self.path / name
            lock_file = self.path / (name + "-lock")
            lock_exists = _refuse_special(lock_file)  # looked at first: it is made after the data file
            exists = _refuse_special(data_file)
            try:
                size = data_file.stat().st_size if exists else 0
            except FileNotFoundError:
                continue  # another process's compaction removed it since the lstat: read CURRENT again
            creating = not size
            if creating:
                if _read_current_file(self.path)[0] != name:
                    continue  # swapped and removed between our two reads: read CURRENT again
                state = "empty" if exists else "missing"
                if name != FIRST_GENERATION or initialised or (not exists and lock_exists):
                    # A compaction makes its file whole before CURRENT names it, a first data
                    # file once made is never removed, and its lock file is made after it:
                    # this is damage, and starting an empty database over it would hide the loss.
                    raise CorruptDatabaseError(
                        f"{data_file} is {state}", "restore the database from a backup or an export"
                    )
                if self.readonly:
                    raise UnfinishedDatabaseError(f"{data_file} is {state}", path=self.path)
                _create_data_file(data_file)
            held = _identity(data_file)
            try:
                env = _open_environment(
                    data_file,
                    held,
                    self.path,
                    subdir=False,
                    readonly=self.readonly,
                    create=not self.readonly,
                    max_dbs=self.max_dbs,
                    map_size=map_size or max(self._initial_map_size, self._needed_map_size, 2 * size),
                    max_readers=MAX_READERS,
                    meminit=False,
                    lock=True,
                )
            except lmdb.Error as exc:
                if getattr(exc, "code", 0) == errno.ENOENT:
                    continue
                if isinstance(exc, lmdb.InvalidError) and _cut_short_creation(name, initialised, size):
                    if self.readonly:
                        raise UnfinishedDatabaseError(f"{data_file} was never completed", path=self.path) from None
                    # A full disk while LMDB wrote its first pages: nothing was ever stored in
                    # it (no page past the two meta pages), so the creation starts over.
                    _remove_generation(self.path, name)
                    continue
                raise _open_error(exc, data_file, self.path) from None
            try:
                if _read_current_file(self.path)[0] != name:
                    # A compaction swapped generations while we opened this one, and removed
                    # it: a writable open then made a new empty file under the old name.  Drop
                    # it.  (Only when the name moved on: creators racing to make a new database
                    # each open the same first file, and that file is in use.)
                    env.close()
                    if not self.readonly:
                        _remove_generation(self.path, name)
                    continue
                if held is None or _identity(data_file) != held:
                    env.close()  # replaced while LMDB opened it: which file it holds is unknown
                    continue
                _check_file_length(env, data_file)
                env.reader_check()  # clear reader slots left by killed processes
                handles = self._open_handles(env, name, mark_initialised=creating)
            except FileNotFoundError:
                # Removed by another process's compaction while we opened it (its length
                # checked by name): that generation is gone, so read CURRENT again.
                env.close()
                continue
            except BaseException:
                # Closed at once, so that an error or an interrupt here leaves no environment
                # registered on the file while its traceback lives (every call on the handle
                # then failed with AlreadyOpenError; found by a probe).
                env.close()
                raise
            if handles is not None:
                return _Live(env, name, held, handles)
            env.close()  # superseded while we opened it, as above (only a writable open says so)
            _remove_generation(self.path, name)
        raise StorageError(f"{self.path} keeps changing generation; cannot open it")

    def _current(self) -> _Live:
        live = self._live
        if self._refusal is not None:
            raise self._refusal
        if live is None:
            if self._inherited:
                raise _inherited_error(self.path)
            raise DatabaseClosedError(f"the database at {self.path} is closed")
        return live

    @property
    def env(self) -> lmdb.Environment:
        return self._current().env

    @property
    def generation(self) -> str:
        """The name of the data file open here."""
        return self._current().name

    def _open_handles(
        self, env: lmdb.Environment, name: str, *, mark_initialised: bool = False
    ) -> dict[bytes, lmdb._Database] | None:
        """Open the named sub-databases of ``env`` (generation ``name``); None if a
        compaction swapped generations first.  A writable open does it in a write
        transaction, so it waits for another process's writer to commit; holding that lock
        it removes leftovers and, with ``mark_initialised`` (this open made the first data
        file), marks ``CURRENT`` initialised (see module doc).  A read-only open never
        waits.  A map grown by another process is adopted first."""
        # Handles are opened here, outside any caller's transaction: a handle opened inside a
        # read transaction dies when it ends, and one opened lazily inside write() would
        # deadlock on LMDB's (non-recursive) write lock.
        for _ in range(100):
            txn = None
            try:
                # py-lmdb keeps handles opened in a read-only transaction only when it makes
                # that transaction itself (txn=None).
                txn = None if self.readonly else env.begin(write=True)
                handles: dict[bytes, lmdb._Database] = {}
                for db_name in self._names:
                    try:
                        handles[db_name] = env.open_db(db_name, txn=txn, create=False)
                    except lmdb.NotFoundError:
                        continue  # not created yet; create() makes it
            except lmdb.MapResizedError:
                if txn is not None:
                    txn.abort()
                env.set_mapsize(0)  # no transaction of this environment is open now
                continue
            except lmdb.Error as exc:
                env.close()
                raise translate(exc, self.path, self.path) from None
            if txn is None:
                return handles
            try:
                current, initialised = _read_current_file(self.path)
                if current != name:
                    return None
                if mark_initialised and not initialised and name == FIRST_GENERATION:
                    _point_current_at(self.path, name)
                self._sweep_leftovers(name)
                txn.commit()  # keeps the handles opened in it
            except lmdb.Error as exc:
                env.close()
                raise translate(exc, self.path, self.path) from None
            except OSError as exc:
                env.close()
                raise _os_error(exc, f"updating {self.path / CURRENT}") from None
            except BaseException:
                env.close()
                raise
            finally:
                txn.abort()  # a no-op after commit
            return handles
        env.close()
        raise StorageError(f"the map of {self.path} keeps growing; cannot open it")

    def _sweep_leftovers(self, live: str) -> None:
        """Remove what killed compactions left beside the live generation: every other
        generation and lock file, and staging files of processes that are gone.  Must be
        called holding the live generation's write lock, which every compaction holds while
        it writes the next generation, so nothing removed here is being written.  Readers of
        an older generation keep reading it: removing a name does not close their files.
        Only regular files are removed: anything else named like a generation (a directory,
        say) is not simdb's and is left alone, never entered.  One directory scan."""
        for entry in os.scandir(self.path):
            if not entry.is_file(follow_symlinks=False):
                continue
            generation = entry.name.removesuffix("-lock")
            if _GENERATION.fullmatch(generation):
                if generation != live:
                    Path(entry.path).unlink(missing_ok=True)
            elif entry.name.startswith(_STAGING) and gone_process(entry.name[len(_STAGING) :].split(".")[0]):
                Path(entry.path).unlink(missing_ok=True)

    def db(self, name: bytes) -> lmdb._Database:
        """The handle of a named sub-database."""
        handle = self._current().handles.get(name)
        if handle is None:
            raise NotADatabaseError(f"{self.path} has no {name.decode()} sub-database", "is it a simdb database?")
        return handle

    def create(self, txn: lmdb.Transaction[bytes], name: bytes) -> None:
        """Create a named sub-database inside a write transaction."""
        live = self._current()
        live.handles[name] = live.env.open_db(name, txn=txn, create=True)

    def holding(self, lock: threading.Lock | threading.RLock, action: str) -> AbstractContextManager[object]:
        """Hold ``lock``, a caller's lock that its holder keeps across writes (a
        BatchWriter's), for ``action``.  A thread inside a read of this database waits for it
        only while no other thread waits to take the database alone: the holder may be that
        thread, waiting for this read, so ReadInProgressError instead of a wait without end
        (looked at every :data:`_LOCK_RECHECK_SECONDS`).  Other threads, which nobody waits
        for, take the lock itself (a C ``__enter__``: the cheapest, and no interrupt can
        leave it held)."""
        if not self._lock.held_by_this_thread():
            return lock
        return self._holding_inside_read(lock, action)

    @contextmanager
    def _holding_inside_read(self, lock: threading.Lock | threading.RLock, action: str) -> Iterator[None]:
        # An interrupt between a successful acquire and the assignment would leave the lock
        # held: a window of one instruction, on this path only.
        acquired = False
        try:
            while not acquired:
                acquired = lock.acquire(timeout=_LOCK_RECHECK_SECONDS)
                if not acquired and self._lock.exclusive_waiting():
                    raise ReadInProgressError(
                        f"cannot {action} {self.path} while this thread is inside a read of it", path=self.path
                    )
            yield
        finally:
            if acquired:
                lock.release()

    def reading_in_this_thread(self) -> bool:
        """Whether this thread is inside a read (see :meth:`_SharedLock.held_by_this_thread`)."""
        return self._lock.held_by_this_thread()

    def _refuse_inside_read(self, action: str) -> None:
        """ReadInProgressError if this thread has a read open, which ``action`` (such as
        "close") would wait for forever.  O(reads running)."""
        if self.reading_in_this_thread():
            raise ReadInProgressError(
                f"cannot {action} {self.path} while this thread is inside a read of it", path=self.path
            )

    def _exclusive(self, action: str) -> AbstractContextManager[None]:
        """The lock held alone, for ``action``, once this process's other reads have ended
        (see :meth:`_refuse_inside_read`)."""
        self._refuse_inside_read(action)
        return self._lock.exclusive()

    def close(self, *, when_reads_end: bool = False) -> None:
        """Close the environment, once this process's running reads have ended.  In a
        process forked after the open, only forget it: closing there could clear the reader
        slots of the parent's running transactions.  ``when_reads_end``: where this thread is
        inside a read (a generator that an exception left suspended), close as that read
        ends instead of raising ReadInProgressError."""
        if self._inherited:
            return
        if when_reads_end and self._lock.held_by_this_thread():
            self._close_pending = threading.get_ident()
            return
        with self._exclusive("close"):
            live, self._live = self._live, None  # first: an interrupt then leaves it closed
            if live is not None:
                live.env.close()
            self._release_claim()

    @property
    def closed(self) -> bool:
        return self._live is None

    def _inherit(self) -> None:
        """In a child process forked after the open: LMDB forbids using the environment
        here, so every later use raises InheritedHandleError.  The environment is kept, never
        closed (see :meth:`close`); the locks, which a parent thread may have held at the
        fork, are made anew so that nothing here waits on them."""
        if self._live is not None:
            _inherited_environments.append(self._live.env)
        self._live = None
        self._inherited = True
        self._released = True  # the child's to open again, if it may (see _open_environment)
        self._lock = _SharedLock()
        self._write_mutex = threading.Lock()

    # -- transactions --------------------------------------------------------------------

    def _superseded(self) -> bool:
        """Whether ``CURRENT`` names a generation other than the one open here, or the same
        name now belongs to another file (the database was removed and made again at this
        path): one open and read of ``CURRENT`` and one stat."""
        live = self._current()
        return _read_current_file(self.path)[0] != live.name or _identity(self.path / live.name) != live.identity

    def _reader_should_move(self) -> bool:
        # A reader of a superseded generation still sees a consistent snapshot, only an
        # older one; checking at most every READ_RECHECK_SECONDS saves reading CURRENT per
        # query and bounds how stale it can be.  Writers check on every transaction.
        now = time.monotonic()
        if now < self._next_read_check:
            return False
        self._next_read_check = now + READ_RECHECK_SECONDS
        return self._superseded()

    def _holds(self, env: lmdb.Environment) -> bool:
        """Whether ``env`` is the environment open here."""
        live = self._live
        return live is not None and live.env is env

    def _reopen(self, stale_env: lmdb.Environment, same_file: bool = False) -> None:
        """Replace the open generation, if it is still ``stale_env`` (another thread may have
        replaced it already), by the one ``CURRENT`` names, once this process's running reads
        have ended.  The new one is opened beside the old one, which is closed only after it
        is in place, so a failure or an interrupt leaves this handle on the old generation,
        working, except that a :attr:`follow_check` refusing a replaced database makes every
        later use raise that refusal.  ``same_file`` (new sub-database handles in the same
        file, which LMDB lets a process open only once) closes first, so a failure there
        leaves it closed."""
        with self._exclusive("reopen"):
            if not self._holds(stale_env):
                return
            if same_file:
                self._live = None
                stale_env.close()
                try:
                    self._live = self._open_generation()
                finally:
                    if self._live is None:  # closed for good
                        self._release_claim()
            else:
                followed = self._open_generation()
                try:
                    check = None if self.follow_check is None else self.follow_check()
                    if check is not None:
                        with followed.env.begin(buffers=False) as txn:
                            check(txn, followed.handles)
                except DatabaseReplacedError as refusal:
                    # For good: the database at the path is another one.  Other errors (a
                    # creation still under way there) leave the next use to try again.
                    followed.env.close()
                    self._refusal = refusal
                    raise
                except BaseException:
                    followed.env.close()
                    raise
                self._live = followed
                stale_env.close()

    @staticmethod
    def _room_needed(env: lmdb.Environment, reserve: int) -> int:
        """The map size ``reserve`` more bytes need, or 0 if the map is big enough: two LMDB
        info calls.  Copy-on-write needs room for the new pages before the old ones are freed."""
        map_size: int = env.info()["map_size"]
        needed = _used_bytes(env) + 2 * reserve
        return max(needed, 2 * map_size) if needed > map_size else 0

    def _ensure_room(self, reserve: int) -> None:
        # Decided under the shared lock: the exclusive one waits for every running read of
        # this process (a check() can take minutes) and holds back new ones meanwhile, so it
        # is taken only when the map must really grow.
        with self._lock.shared():
            env = self.env
            if not self._room_needed(env, reserve):
                return
        with self._exclusive("grow the map of"):
            if self._holds(env):  # else reopened meanwhile; write() grows it if it must
                new_size = self._room_needed(env, reserve)  # again: another thread may have grown it
                if new_size:
                    self._set_map_size(env, new_size)

    def _set_map_size(self, env: lmdb.Environment, size: int) -> None:
        """``env.set_mapsize(size)``, under the exclusive lock.  LMDB unmaps the old map before
        it maps the new one, so a mapping the system refuses (an address-space limit, as
        ``ulimit -v`` or a batch scheduler sets) leaves ``env`` unusable: the same generation
        is then opened again in its place, so the handle goes on working, and StorageError
        says what was refused.  The caller's read or write had not begun: nothing of it is
        done."""
        mapped = env.info()["map_size"]
        try:
            env.set_mapsize(size)
        except lmdb.Error as error:
            self._live = None
            with suppress(lmdb.Error):
                env.close()
            outcome = "nothing of this call was done"
            try:
                self._live = self._open_generation(map_size=mapped)  # the map it had, which fitted
            except SimdbError:
                outcome += ", and this handle is closed: open the database again"
            finally:
                if self._live is None:  # closed for good
                    self._release_claim()
            wanted = f"{size:,} bytes" if size else "the larger map another process made"
            raise StorageError(
                f"cannot map {wanted} for the database at {self.path} ({error}); {outcome}",
                "raise the process's address-space limit (ulimit -v) or free memory, then try again",
                path=self.path,
            ) from None

    def reopen_with(self, names: list[bytes]) -> None:
        """Reopen the environment with handles for these named sub-databases."""
        self._names = names
        self.max_dbs = len(names) + 1
        self._reopen(self.env, same_file=True)

    def _adopt_map_size(self, stale_env: lmdb.Environment, grow: bool) -> None:
        with self._exclusive("resize the map of"):
            if not self._holds(stale_env):
                return
            if grow:
                self._set_map_size(stale_env, 2 * stale_env.info()["map_size"])
            else:
                self._set_map_size(stale_env, 0)  # adopt the size another process grew the map to

    def _begin(self, env: lmdb.Environment, write: bool) -> lmdb.Transaction[bytes] | None:
        """Begin a transaction; None when another process has grown the map beyond ours,
        which must be adopted (with no transaction of this process open) first."""
        try:
            return env.begin(write=write, buffers=False)
        except lmdb.MapResizedError:
            return None
        except lmdb.Error as exc:
            raise translate(exc, self.path, self.path) from None

    @contextmanager
    def read(self) -> Iterator[lmdb.Transaction[bytes]]:
        """A read-only snapshot transaction: one LMDB begin and one get, which follows a
        compaction that another process made (:data:`SUPERSEDED_BY`) before any write to the
        new generation was acknowledged; and a read of ``CURRENT`` at most every
        READ_RECHECK_SECONDS, for a compaction killed between its swap and its commit."""
        while True:
            # _SharedLock.shared() inline: one more generator context here would add one
            # more window in which an interrupt leaves the hold until its traceback is freed.
            token = object()
            try:
                self._lock.acquire_shared(token)
                env = self.env
                action = "reopen" if self._reader_should_move() else None
                txn = None
                if action is None:
                    txn = self._begin(env, write=False)
                    if txn is None:
                        action = "adopt"
                    elif txn.get(SUPERSEDED_BY) is not None and self._superseded():
                        # (Checked against CURRENT too: a copy of a directory taken during
                        # a compaction may hold the key in the live generation.)
                        txn.abort()
                        txn, action = None, "reopen"
                if txn is not None:  # the same test as action is None, in a form mypy narrows
                    try:
                        yield txn
                    except lmdb.Error as exc:
                        raise translate(exc, self.path, self.path, reading=True) from None
                    finally:
                        txn.abort()
                    return
            finally:
                self._lock.drop(token, None)  # first: one C call (see _SharedLock)
                self._lock.wake()
                # Only the thread that deferred the close closes, once its own reads have
                # ended: another thread's read ending would wait here for that thread's.
                if self._close_pending == threading.get_ident() and not self._lock.held_by_this_thread():
                    self._close_pending = None
                    self.close()
            if action == "adopt":
                self._adopt_map_size(env, grow=False)
            else:
                self._reopen(env)

    def check_open(self) -> None:
        """Raise DatabaseClosedError if this handle is closed (InheritedHandleError in a
        child forked after the open), as any use of it would.  O(1)."""
        self._current()

    def check_writable(self) -> None:
        """Raise ReadOnlyError if this handle was opened read-only, DatabaseClosedError if
        it is closed.  O(1)."""
        if self.readonly:
            raise ReadOnlyError(f"{self.path} was opened read-only", path=self.path)
        self.check_open()

    def write(self, work: Callable[[lmdb.Transaction[bytes]], T], reserve: int = 0) -> T:
        """Run ``work`` in one write transaction and commit it; retried whole if the map
        fills or the generation changes, so ``work`` must not mutate state outside ``txn``.
        An exception from ``work`` aborts the transaction: nothing of it is stored.
        ``reserve`` estimates the bytes the work adds, so the map can grow before it starts
        rather than after a failed attempt."""
        self.check_writable()
        if reserve:
            self._ensure_room(reserve)
        while True:
            action = None
            # The shared lock (so that no other thread closes env meanwhile) before the write
            # mutex, and the exclusive lock (a map grown or adopted, a generation followed)
            # taken holding neither: a thread inside a read that writes holds the shared lock
            # and then wants the mutex, so a writer holding the mutex while it waited for the
            # shared or the exclusive lock would wait for that thread, and it for the writer.
            with self._lock.shared(), self._write_mutex:
                env = self.env
                if time.monotonic() - self._last_reader_check > READER_CHECK_INTERVAL:
                    # A reader killed mid-transaction pins old pages until its slot is
                    # cleared; a long-running writer must clear them itself or the file
                    # grows without end.
                    env.reader_check()
                    self._last_reader_check = time.monotonic()
                txn = self._begin(env, write=True)
                if txn is None:
                    action = "adopt"
                else:
                    try:
                        if self._superseded():  # checked under LMDB's write lock; see module doc
                            action = "reopen"
                        else:
                            result = work(txn)
                            txn.commit()
                            return result
                    except lmdb.MapFullError:
                        action = "grow"
                        self._needed_map_size = max(self._needed_map_size, 2 * env.info()["map_size"])
                    except lmdb.MapResizedError:
                        action = "adopt"
                    except lmdb.Error as exc:
                        raise translate(exc, self.path, self.path) from None
                    finally:
                        txn.abort()  # a no-op after commit; otherwise nothing of it is stored
            if action == "reopen":
                self._reopen(env)
            else:
                self._adopt_map_size(env, grow=action == "grow")

    # -- compaction ----------------------------------------------------------------------

    def swap_in_rewrite(self, rewrite: Callable[[lmdb.Transaction[bytes], lmdb.Environment], None]) -> int:
        """Write the next generation with ``rewrite(source_txn, target_env)`` while holding
        the write lock, make it durable, and point ``CURRENT`` at it atomically.  Follows a
        compaction made meanwhile by another process first.  Returns the size in bytes of
        the data file it compacted.  Raises DiskFullError, with nothing left behind, if the
        disk or its inodes run out."""
        compacted: list[tuple[str, int, lmdb.Environment]] = []
        self._refuse_inside_read("compact")  # before the work: the reopen after it would raise

        def build(txn: lmdb.Transaction[bytes]) -> None:
            source = self.generation  # the live one: write() checked under the write lock
            self._sweep_leftovers(source)  # what a killed compaction left, the target included
            # _read_current_file admitted this generation only if it matches _GENERATION.
            number = int(_GENERATION.fullmatch(source).group(1)) + 1  # type: ignore[union-attr]
            while any(os.path.lexists(self.path / f"data-{number:06d}.mdb{suffix}") for suffix in ("", "-lock")):
                number += 1  # the sweep left it, so it is not simdb's (a directory, say): skip the number
            name = f"data-{number:06d}.mdb"  # 6 digits or more
            target_file = self.path / name
            try:
                before = (self.path / source).stat().st_size
                with _open_environments_lock:  # see _open_environment
                    _allocate_lock_file(self.path / (name + "-lock"))
                target = lmdb.open(
                    str(target_file),
                    subdir=False,
                    max_dbs=self.max_dbs,
                    map_size=max(MIN_MAP_SIZE, 2 * _used_bytes(self.env)),
                    max_readers=MAX_READERS,
                    meminit=False,
                    sync=False,
                )
                made = _identity(target_file)
                try:
                    for suffix in ("", "-lock"):
                        _copy_access(self.path / (source + suffix), self.path / (name + suffix))
                except OSError:
                    target.close()
                    raise
            except lmdb.Error as exc:
                _remove_generation(self.path, name)
                raise translate(exc, target_file, self.path, _NOT_COMPACTED) from None
            except OSError as exc:
                _remove_generation(self.path, name)
                raise _os_error(exc, f"starting {target_file}", _NOT_COMPACTED) from None
            except BaseException:
                _remove_generation(self.path, name)
                raise
            try:
                try:
                    rewrite(txn, target)
                    target.sync(True)
                except lmdb.MapFullError:
                    # Must not reach write(), which would grow the *source* map and retry.
                    raise StorageError(f"the compacted copy outgrew its map at {target_file}") from None
                except lmdb.Error as exc:
                    # Nor may a full disk, which would be retried; and it is the target's.
                    raise translate(exc, target_file, self.path, _NOT_COMPACTED) from None
            except BaseException:
                target.close()
                _remove_generation(self.path, name)
                raise
            target.close()
            if self._superseded():
                # The directory was replaced while the copy was written (removed and restored
                # from a backup, say): the copy is of the database that was, and must not be
                # named by the CURRENT of the one that is.  Only a file this call made goes.
                if _identity(target_file) == made:
                    _remove_generation(self.path, name)
                raise StorageError(
                    f"{self.path} was replaced while it was being compacted; the database now there was left as it is",
                    "compact it again",
                )
            try:
                # One line: ``initialised`` is about the first generation only, and an earlier
                # release reads a one-line CURRENT (a format-1 database stays readable by it).
                _point_current_at(self.path, name, initialised=False)
            except OSError as exc:
                if _read_current_file(self.path)[0] != name:  # else the swap happened; only its fsync failed
                    _remove_generation(self.path, name)
                raise _os_error(exc, f"pointing {self.path / CURRENT} at {name}", _NOT_COMPACTED) from None
            # Committed before the write lock is released, so before any writer can commit to
            # the new generation: a reader's snapshot begun after such a commit holds the key.
            txn.put(SUPERSEDED_BY, name.encode())
            compacted[:] = [(source, before, self.env)]

        self.write(build)
        source, before, replaced = compacted[0]
        # The environment this compaction replaced, not whatever is open now: another thread
        # of this process may have followed the swap already, and reopening its environment
        # would open the new file a second time (AlreadyOpenError, found by a probe).
        self._reopen(replaced)
        # Other processes keep their open handles; the names go so nothing new opens them.
        _remove_generation(self.path, source)
        return before

    def copy_to(self, target: Path) -> None:
        """Write a consistent copy of the live data (one read snapshot, compacted) as a new
        database directory ``target``, which must not exist yet; this database is not
        changed.  O(size).  Raises StorageError (or DiskFullError) naming ``target``, which
        is removed again when the copy fails, and InvalidInputError for a ``target`` inside
        this database's directory."""
        if os.path.realpath(target).startswith(os.path.join(os.path.realpath(self.path), "")):
            raise InvalidInputError(
                f"{target} is inside the database {self.path}, whose own files it would sit among",
                "copy to a directory outside it",
            )
        try:
            target.mkdir()
        except OSError as exc:
            raise _os_error(
                exc, f"making the copy's directory {target}", "give a path that does not exist yet"
            ) from None
        data_file = target / FIRST_GENERATION
        try:
            # Inside a read: it follows a compaction made by another process, and refuses a
            # database replaced at this path, as every read does; the copy of the file this
            # handle first opened would lack every write since.
            with self.read():
                try:
                    self.env.copy(str(data_file), compact=True)
                except lmdb.Error as exc:  # translated here, naming the copy, not the source
                    raise translate(exc, data_file, target, "free some space; nothing was copied") from None
            _point_current_at(target, FIRST_GENERATION, initialised=True, create=True)
        except BaseException as exc:
            # A directory this call made, holding nothing but the unfinished copy.
            shutil.rmtree(target, ignore_errors=True)
            if isinstance(exc, OSError):
                raise _os_error(exc, f"copying to {target}", "free some space; nothing was copied") from None
            raise

    def size_on_disk(self) -> int:
        """Bytes of the live data file, following a compaction made by another process
        first.  A stat, and a read of ``CURRENT`` when the file has gone."""
        for _ in range(100):
            # Under the shared lock: a compaction by another thread of this process removes
            # the old file only after it has moved this object to the new one.
            with self._lock.shared():
                live = self._current()
                try:
                    return (self.path / live.name).stat().st_size
                except FileNotFoundError:
                    if not self._superseded():
                        hint = "restore the database from a backup or an export"
                        raise CorruptDatabaseError(f"{self.path / live.name} is missing", hint) from None
            self._reopen(live.env)
        raise StorageError(f"{self.path} keeps changing generation")


class Handles(Protocol):
    """What the layer needs from storage: the handle of a named sub-database, and creating
    one inside a write transaction (``Storage`` has both)."""

    def db(self, name: bytes) -> lmdb._Database: ...

    def create(self, txn: lmdb.Transaction[bytes], name: bytes) -> None: ...


class BareHandles:
    """:class:`Handles` over a bare LMDB environment (tests and benchmarks)."""

    def __init__(self, env: lmdb.Environment) -> None:
        self.env = env
        self._handles: dict[bytes, lmdb._Database] = {}

    def db(self, name: bytes) -> lmdb._Database:
        return self._handles[name]

    def create(self, txn: lmdb.Transaction[bytes], name: bytes) -> None:
        self._handles[name] = self.env.open_db(name, txn=txn, create=True)


def copy_sub_databases(
    source: lmdb.Transaction[bytes], handles: Handles, target: lmdb.Environment, names: list[bytes]
) -> None:
    """Copy the sub-databases ``names`` (read in ``source`` through ``handles``) into the
    empty environment ``target``, each in key order in append mode and its own transaction,
    so the copy has full pages.  O(size)."""
    for name in names:
        with target.begin(write=True) as txn:
            cursor = txn.cursor(target.open_db(name, txn=txn))
            cursor.putmulti(source.cursor(handles.db(name)).iternext(), append=True)
