"""The result of a consistency check, and a check run in a child process.

LMDB does not check its own pages: a damaged one can end the process that reads it (an
assertion in ``mdb_cursor_next`` aborts, a page number past the file's end is a SIGBUS).  A
long-running indexer that checks its database, and ``simdb check``, must survive that and
say it, so :func:`check_in_child` reads in a child process and turns such a crash into a
:class:`~simdb.errors.CorruptDatabaseError`.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from dataclasses import dataclass

from simdb import errors
from simdb.errors import RESTORE_HINT, CorruptDatabaseError, DatabaseError, StorageError


@dataclass
class CheckReport:
    """The result of :meth:`Database.check`; true when the database is consistent."""

    documents: int
    table_entries: int
    problems: list[str]

    def __bool__(self) -> bool:
        return not self.problems


#: What the child process runs: the check, its report or its simdb error written as one JSON
#: object on stdout (JSON, not pickle: nothing the child prints is executed here).
_CHECK_IN_A_CHILD = """
import dataclasses, json, sys
import simdb
try:
    with simdb.open(sys.argv[1], readonly=True, create=False) as database:
        outcome = {"report": dataclasses.asdict(database.check())}
except simdb.SimdbError as error:
    outcome = {"error": type(error).__name__, "message": error.message, "hint": error.hint}
print(json.dumps(outcome))
"""

#: The signals that reading a damaged LMDB file ends a process with: an assertion's abort,
#: a page past the file's end, a pointer into nowhere.
_READING_CRASHES = (signal.SIGABRT, signal.SIGBUS, signal.SIGSEGV)


def check_in_child(path: str) -> CheckReport:
    """``Database.check()`` of the database at ``path``, run in a child process that opens it
    read-only (so it sees the last committed state, as any reader does).  A database error
    of the check comes back as its own class, with its message and hint (any other as a
    StorageError); a child that a damaged page crashed raises CorruptDatabaseError
    with what LMDB printed, one killed from outside (the OOM killer) StorageError, one
    interrupted KeyboardInterrupt.  Costs a Python start (about half a second) besides the
    check."""
    # The child imports the simdb this process runs (a source tree as well as an install),
    # and with -P not a simdb.py of the working directory.
    package_root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    search_path = os.pathsep.join(filter(None, (package_root, os.environ.get("PYTHONPATH"))))
    child = subprocess.run(
        [sys.executable, "-P", "-c", _CHECK_IN_A_CHILD, path],
        capture_output=True,
        check=False,
        env={**os.environ, "PYTHONPATH": search_path},
    )
    said = child.stderr.decode(errors="replace").strip().splitlines()
    if child.returncode == -signal.SIGINT:
        raise KeyboardInterrupt
    if child.returncode < 0 and -child.returncode not in _READING_CRASHES:
        raise StorageError(f"check was killed by signal {signal.Signals(-child.returncode).name}", path=path)
    if child.returncode < 0:
        crash = f" ({said[-1]})" if said else ""
        raise CorruptDatabaseError(
            f"the database at {path} is damaged: reading its pages crashed LMDB{crash}, so check cannot list "
            "the problems",
            RESTORE_HINT,
            path=path,
        )
    if child.returncode != 0 or not child.stdout:
        raise StorageError(f"check failed in its own process: {said[-1] if said else child.returncode}", path=path)
    outcome = json.loads(child.stdout)
    if "error" in outcome:
        raise _same_error(outcome["error"], outcome["message"], outcome["hint"], path)
    return CheckReport(**outcome["report"])


def _same_error(name: str, message: str, hint: str | None, path: str) -> DatabaseError:
    """The child's error as the class it was (PermissionDeniedError, FormatVersionError,
    ...), where it is a database error made of a message, a hint and a path; else a
    StorageError with the same words."""
    kind = getattr(errors, name, None)
    if isinstance(kind, type) and issubclass(kind, DatabaseError):
        try:
            return kind(message, hint, path=path)
        except TypeError:  # a class that needs fields of its own
            pass
    return StorageError(message, hint, path=path)
