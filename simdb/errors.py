"""The exception hierarchy: one root, :class:`SimdbError`, with specific subclasses.

Every message names the offending input or path and, where one helps, ends with a hint
for what to do next.  The CLI maps the two families below to exit codes in one place:
:class:`InvalidInputError` and :class:`ConfigMismatchError` are usage errors (exit 2),
:class:`DatabaseError` is a problem with the database itself (exit 3).
"""

from __future__ import annotations


class SimdbError(Exception):
    """Root of every error simdb raises on purpose."""

    def __init__(self, message: str, hint: str | None = None) -> None:
        self.message = message
        self.hint = hint
        super().__init__(f"{message} (hint: {hint})" if hint else message)


class InvalidInputError(SimdbError, ValueError):
    """An argument is malformed: a bad key, fingerprint, text, distance or setting."""


class InvalidKeyError(InvalidInputError):
    """A document key is empty, too long, not a string or not valid Unicode."""


class InvalidFingerprintError(InvalidInputError):
    """A fingerprint is not an int in [0, 2**bits), or a hex/decimal string that is not one."""


class DistanceError(InvalidInputError):
    """A query asked for a Hamming distance the index cannot answer exactly."""


class ConfigMismatchError(SimdbError):
    """``open()`` was given settings that differ from those stored in the database."""


class FingerprinterError(SimdbError):
    """Text was given where no fingerprint settings are known, or settings would be mixed."""


class DatabaseError(SimdbError):
    """A problem with the database on disk or with the environment it lives in."""


class NotADatabaseError(DatabaseError):
    """The path exists but is not a simdb database."""


class FormatVersionError(DatabaseError):
    """The database was written by a newer simdb with a format this one cannot read."""


class CorruptDatabaseError(DatabaseError):
    """The database's files or records are damaged.  ``path`` is the database, where known;
    ``record`` names the damaged record (``"next id"``, ``"configuration"``,
    ``"table.03"``, ``"document 5"``, ...) and ``field`` the bad field in it, where known."""

    def __init__(
        self,
        message: str,
        hint: str | None = None,
        *,
        path: str | None = None,
        record: str | None = None,
        field: str | None = None,
    ) -> None:
        super().__init__(message, hint)
        self.path = path
        self.record = record
        self.field = field


class ReadOnlyError(DatabaseError):
    """A write was attempted on a database opened with ``readonly=True``."""


class DatabaseClosedError(DatabaseError):
    """The database was used after ``close()``."""


class WriterClosedError(DatabaseClosedError):
    """A batching writer (:meth:`Database.writer`) was used after ``close()`` or its ``with``
    block."""


class DiskFullError(DatabaseError):
    """The disk (or a file-size limit) ran out during a write; the batch was not stored."""


class StorageError(DatabaseError):
    """Any other failure reported by LMDB or the operating system."""


#: How to install the dask extra; quoted, as shells such as zsh expand brackets.
DASK_INSTALL_HINT = "pip install 'simdb[dask]'"


class DaskNotInstalledError(SimdbError, ImportError):
    """An optional extra (Dask, pandas or pyarrow: ``pip install 'simdb[dask]'``) is not installed."""
