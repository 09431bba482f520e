"""The exception hierarchy: one root, :class:`SimdbError`, with one class per condition.

Every error carries what it is about as fields (``path``; ``argument`` and ``value`` of a
bad argument; ``setting``, ``given`` and ``stored`` of a mismatched setting; ...) and, where
there is one fixed next step, a machine-readable :class:`Remedy`.  ``str(error)`` is a
one-line message with a hint in Python-API terms, for library users; another interface (the
CLI, in ``cli/errors.py``) formats the same fields in its own terms and never parses the
text.  Exit codes of the CLI follow the families: :class:`InvalidInputError`,
:class:`ConfigMismatchError` and :class:`FingerprinterError` are usage errors (exit 2),
:class:`DatabaseError` is a problem with the database itself (exit 3).
"""

from __future__ import annotations

import enum
from typing import Any, ClassVar


class Remedy(enum.Enum):
    """The next step an error calls for, named in no interface's terms: the library's hint
    says it for Python, the CLI says it for the command line."""

    CREATE_DATABASE = "create the database"
    FINISH_CREATION = "finish the interrupted creation by opening the database writable"
    OMIT_SETTING = "omit this setting to use the stored one"
    RUN_CHECK = "run check"
    ADD_TEXT_FIRST = "store fingerprint settings by adding text once, or give fingerprints"
    OPEN_WRITABLE = "open the database writable"
    SHARE_DATABASE = "open the database once and share it"
    OPEN_READONLY = "open the database read-only, or copy it to a writable file system"


#: The Python-API wording of the remedies whose wording needs no field of the error.
PYTHON_HINTS = {
    Remedy.RUN_CHECK: "run check(); restore from a backup or an export",
    Remedy.OPEN_WRITABLE: "open it without readonly=True",
    Remedy.ADD_TEXT_FIRST: "add text once with a writable database, or pass fingerprints",
    Remedy.FINISH_CREATION: "was its creation interrupted? open it writable to finish it",
    Remedy.SHARE_DATABASE: "open it once and share the Database: it is thread-safe",
    Remedy.OPEN_READONLY: "open it with readonly=True to read it, or copy it to a writable file system to change it",
}


class SimdbError(Exception):
    """Root of every error simdb raises on purpose.  ``message`` is the one-line fault,
    ``hint`` what to do about it in Python terms (the class's fixed ``default_hint`` when
    none is given, else the remedy's :data:`PYTHON_HINTS` wording), ``remedy`` the next step
    as a :class:`Remedy` where one applies, ``path`` the file or database concerned, where
    known."""

    #: The hint of every error of this class, unless one is given.
    default_hint: ClassVar[str | None] = None
    #: The remedy of every error of this class, unless one is given.
    default_remedy: ClassVar[Remedy | None] = None

    def __init__(
        self, message: str, hint: str | None = None, *, remedy: Remedy | None = None, path: object = None
    ) -> None:
        remedy = remedy if remedy is not None else self.default_remedy
        if hint is None:
            hint = self.default_hint or (PYTHON_HINTS.get(remedy) if remedy is not None else None)
        super().__init__(f"{message} (hint: {hint})" if hint else message)
        # Set after Exception.__init__: ImportError's (DaskNotInstalledError) resets ``path``.
        self.message = message
        self.hint = hint
        self.remedy = remedy
        self.path = None if path is None else str(path)

    def __reduce__(self) -> tuple[Any, ...]:
        # Pickled as class, text and fields (an error raised in a worker process crosses
        # back this way): the default would call the class with the text alone.
        return _restore, (type(self), self.args, self.__dict__)


def _restore(cls: type[SimdbError], args: tuple[Any, ...], fields: dict[str, Any]) -> SimdbError:
    """An unpickled error: its text as ``args`` and its fields, without calling ``__init__``."""
    error = cls.__new__(cls)
    Exception.__init__(error, *args)
    error.__dict__.update(fields)
    return error


class InvalidInputError(SimdbError, ValueError):
    """An argument is malformed: a bad key, fingerprint, text, distance or setting.
    ``argument`` names it (``"k"``, ``"fingerprints[3]"``, ...) and ``value`` is what was
    given, where the error is about one argument; ``expected`` says what it should be
    (``"an int >= 1"``)."""

    def __init__(
        self,
        message: str,
        hint: str | None = None,
        *,
        argument: str | None = None,
        value: Any = None,
        expected: str | None = None,
        remedy: Remedy | None = None,
        path: object = None,
    ) -> None:
        super().__init__(message, hint, remedy=remedy, path=path)
        self.argument = argument
        self.value = value
        self.expected = expected


class KeyProblem(enum.Enum):
    """Why a document key was refused (:attr:`InvalidKeyError.reason`)."""

    NOT_STR = "not a str"
    EMPTY = "empty"
    TOO_LONG = "too long"
    NOT_UNICODE = "not valid Unicode"  # lone surrogates, which UTF-8 cannot encode


class InvalidKeyError(InvalidInputError):
    """A document key is empty, too long, not a string or not valid Unicode: ``reason``
    says which (a :class:`KeyProblem`), ``value`` is the key."""

    def __init__(self, message: str, hint: str | None = None, *, reason: KeyProblem, value: Any = None) -> None:
        super().__init__(message, hint, argument="key", value=value)
        self.reason = reason


class InvalidFingerprintError(InvalidInputError):
    """A fingerprint is not an int in [0, 2**bits), or a hex/decimal string that is not one."""


class DistanceError(InvalidInputError):
    """A Hamming distance that is none (not an int in [0, 64]), or one a plan cannot search
    (:class:`DistanceTooLargeError`)."""


class DistanceTooLargeError(DistanceError):
    """A search over a :class:`~simdb.plan.TablePlan` (``simdb.allpairs``' plan functions)
    asked for a distance ``value`` above ``largest``, the plan's k.  A database's queries
    answer any distance (past the index's k, more slowly), so they never raise it."""

    def __init__(self, message: str, hint: str | None = None, *, value: int, largest: int) -> None:
        super().__init__(message, hint, argument="k", value=value, expected=f"a distance in [0, {largest}]")
        self.largest = largest


class ConfigMismatchError(SimdbError):
    """``open()`` was given settings that differ from those stored in the database:
    ``setting`` (``"k"``, ``"blocks"`` or ``"fingerprinter"``) was given as ``given`` but the
    database at ``path`` holds ``stored``."""

    default_remedy = Remedy.OMIT_SETTING

    def __init__(
        self, message: str, hint: str | None = None, *, setting: str, given: Any, stored: Any, path: object = None
    ) -> None:
        super().__init__(message, hint, path=path)
        self.setting = setting
        self.given = given
        self.stored = stored


class FingerprinterError(SimdbError):
    """Text was given where no fingerprint settings are known, or settings would be mixed."""


class NoFingerprinterError(FingerprinterError):
    """Text was given to a read-only database that has no fingerprint settings stored."""

    default_remedy = Remedy.ADD_TEXT_FIRST


class DatabaseError(SimdbError):
    """A problem with the database on disk or with the environment it lives in."""


class NotADatabaseError(DatabaseError):
    """The path exists but is not a simdb database."""


class DatabaseMissingError(NotADatabaseError):
    """No database is at ``path`` yet, and the open may not create one (``readonly=True``
    or ``create=False``)."""

    default_remedy = Remedy.CREATE_DATABASE


class UnfinishedDatabaseError(NotADatabaseError):
    """The creation of the database at ``path`` was interrupted before its first data file
    was made, and a read-only open cannot finish it."""

    default_remedy = Remedy.FINISH_CREATION


class FormatVersionError(DatabaseError):
    """The database was written by a newer simdb with a format this one cannot read."""

    default_hint = "upgrade simdb"


class CorruptDatabaseError(DatabaseError):
    """The database's files or records are damaged.  ``path`` is the database, where known;
    ``record`` names the damaged record (``"next id"``, ``"configuration"``,
    ``"table.03"``, ``"document 5"``, ...) and ``field`` the bad field in it, where known."""

    def __init__(
        self,
        message: str,
        hint: str | None = None,
        *,
        path: object = None,
        record: str | None = None,
        field: str | None = None,
        remedy: Remedy | None = None,
    ) -> None:
        super().__init__(message, hint, remedy=remedy, path=path)
        self.record = record
        self.field = field


#: The hint of damage that only a backup or an export can repair (configuration, settings).
RESTORE_HINT = "restore it from a backup or an export"


def damaged(
    path: object, record: str, fault: str, *, field: str | None = None, hint: str | None = None
) -> CorruptDatabaseError:
    """The error for a damaged record of the database at ``path`` (metadata, a table, the
    key index): one line naming the record, the database and what is wrong, with the same
    in its fields.  Without ``hint`` the remedy is to run check()."""
    remedy = Remedy.RUN_CHECK if hint is None else None
    message = f"the {record} stored in {path} {fault}"
    return CorruptDatabaseError(
        message, hint or PYTHON_HINTS[Remedy.RUN_CHECK], path=path, record=record, field=field, remedy=remedy
    )


class ReadOnlyError(DatabaseError):
    """A write was attempted on a database opened with ``readonly=True``."""

    default_remedy = Remedy.OPEN_WRITABLE


class PermissionDeniedError(DatabaseError):
    """The system refused this process access to a database file (EACCES), typically one
    another user made: LMDB writes its lock file even to read, so a reader needs write
    access to the database directory's files."""

    default_hint = (
        "give this user read and write access to the database directory and its files "
        "(LMDB writes its lock file even to read), or use the database as the user who made it"
    )


class DatabaseReplacedError(DatabaseError):
    """The database at ``path`` was removed and made again with other settings while this
    handle had it open: ``setting`` (``"k"``, ``"blocks"``, ``"format"`` or
    ``"fingerprinter"``) is ``held`` here but ``stored`` there.  The handle stays on the
    removed file and refuses to go on, rather than write or read the new database by the
    old settings."""

    default_hint = "close this Database and open the path again, which takes the new database's settings"

    def __init__(self, message: str, hint: str | None = None, *, setting: str, held: Any, stored: Any, path: object):
        super().__init__(message, hint, path=path)
        self.setting = setting
        self.held = held
        self.stored = stored


class DatabaseClosedError(DatabaseError):
    """The database was used after ``close()``."""


class InheritedHandleError(DatabaseClosedError):
    """A database that was open when this process was forked was used or opened here.
    LMDB forbids both: the child holds none of the parent's file locks, so its writes could
    be lost, and closing the parent's environment here would expose the parent's reads."""

    default_hint = (
        "open the database only after forking (multiprocessing's 'spawn' start method does), "
        "or close it before the fork"
    )


class WriterClosedError(DatabaseClosedError):
    """A batching writer (:meth:`Database.writer`) was used after ``close()`` or its ``with``
    block."""


class ReadInProgressError(DatabaseError):
    """This thread asked for something that must wait until every read of the database in
    this process has ended (closing it, compacting it, resizing its map, following another
    process's compaction), while a read of its own is still open, as the loop over
    ``items(snapshot=True)`` is: waiting would be waiting for itself, for good."""

    default_hint = "finish the read first (end or break out of the loop), or take items() without snapshot=True"


class WriterBusyError(DatabaseError):
    """This thread called a batching writer, or closed its database, from inside a call of
    that same writer: a signal handler that ran while an add flushed.  Waiting would be
    waiting for itself, for good."""

    default_hint = (
        "in a signal handler, only set a flag (or raise KeyboardInterrupt), and close the writer once its call returns"
    )


class DiskFullError(DatabaseError):
    """The disk (or a file-size limit) ran out during a write; the batch was not stored."""


class StorageError(DatabaseError):
    """Any other failure reported by LMDB or the operating system."""


class ReadOnlyFileSystemError(StorageError):
    """A database on a read-only file system (EROFS: a read-only mount, a container image)
    was opened writable (remedy: OPEN_READONLY), or one was to be created there.  Read-only
    opens work there."""


class AlreadyOpenError(StorageError):
    """The database at ``path`` is already open in this process: LMDB allows one
    environment per file per process."""

    default_remedy = Remedy.SHARE_DATABASE


class WorkerDiedError(SimdbError):
    """A worker process of a fingerprinting pool ended abruptly (the system's out-of-memory
    killer, a signal from outside).  Nothing of the texts in flight was stored; the batches
    committed before are kept."""

    default_hint = "was it killed for memory? run with fewer workers, or smaller batches"


class WorkerStartError(SimdbError):
    """A worker process of a fingerprinting pool could not be started: the system's limit of
    open files or of processes was reached, or memory ran out.  Nothing of those texts was
    stored; the batches committed before are kept."""

    default_hint = "raise the limit (ulimit -n for open files, ulimit -u for processes), or use fewer workers"


#: How to install the dask extra; quoted, as shells such as zsh expand brackets.
DASK_INSTALL_HINT = "pip install '.[dask]' in simdb's checkout (its dask extra; 'simdb' on PyPI is another project)"


class DaskNotInstalledError(SimdbError, ImportError):
    """An optional extra (Dask, pandas or pyarrow: simdb's ``dask`` extra) is not installed."""


class SimdbWarning(UserWarning):
    """The root of simdb's warnings: a call that works, but not as its caller may think."""


class IfNewReachWarning(SimdbWarning):
    """An ``if_new`` add at a threshold whose pairs lie mostly beyond the index's k: the
    documents it compares with are only those within k bits, so many near-duplicates at
    that threshold are stored.  ``clusters(threshold=..., mode="leaders")`` groups them
    afterwards; a database made with a larger ``k`` sees them as it adds, at a cost the
    warning states."""
