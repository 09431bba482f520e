"""Errors, in one place: every command runs under :func:`guarded`, which turns any
exception into one line on stderr and the command's exit code, and :func:`error_message`
is the one formatter of a library error for the command line."""

from __future__ import annotations

import errno
import functools
import os
import signal
import traceback
from collections.abc import Callable
from typing import Any, TypeVar

import typer
from typer.exceptions import TyperException

from simdb import DatabaseError, SimdbError
from simdb.errors import ConfigMismatchError, InvalidInputError, Remedy, WorkerDiedError, WorkerStartError

from . import output, signals
from .output import err

EXIT_NOTHING_FOUND = 1
EXIT_USAGE = 2
EXIT_DATABASE = 3
EXIT_INTERRUPTED = 130
EXIT_TERMINATED = 143  # 128 + SIGTERM, as a shell reports a process SIGTERM ended

F = TypeVar("F", bound=Callable[..., Any])


#: Errors of a write that ran out of room: the system's condition, not the named path's.
NO_SPACE = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EFBIG})


def exit_code_for(error: BaseException) -> int:
    """The exit code of an error: 3 for the database or the system (a worker killed, a full
    disk), 2 for anything the user gave (a path that cannot be opened)."""
    if isinstance(error, (DatabaseError, WorkerDiedError, WorkerStartError)):
        return EXIT_DATABASE
    if isinstance(error, SimdbError):  # InvalidInputError, ConfigMismatchError, FingerprinterError
        return EXIT_USAGE
    if isinstance(error, OSError):
        return EXIT_DATABASE if error.errno in NO_SPACE else EXIT_USAGE
    return EXIT_DATABASE


#: The library's remedies (:class:`simdb.errors.Remedy`) in command-line terms (but
#: OMIT_SETTING, worded per setting by :func:`_mismatch_line`).
CLI_HINTS: dict[Remedy, str] = {
    Remedy.CREATE_DATABASE: "create it with simdb add or simdb import",
    Remedy.FINISH_CREATION: "was its creation interrupted? simdb add or simdb import finishes it",
    Remedy.RUN_CHECK: "run simdb check; restore from a backup or an export",
    Remedy.ADD_TEXT_FIRST: "add text with simdb add first, or query with --fingerprint",
    Remedy.OPEN_WRITABLE: "run a command that writes, such as simdb add",
    Remedy.SHARE_DATABASE: "use the database from one command at a time",
    Remedy.OPEN_READONLY: "commands that only read it work (query, pairs, clusters, get, keys, stats, export, "
    "check); copy it to a writable file system to change it",
}

#: The stored settings of a database (a ConfigMismatchError's ``setting``) by their options.
CLI_OPTIONS = {"k": "-k", "blocks": "--blocks"}

#: The fingerprint settings the command line sets, by option, in the order --help lists them.
FINGERPRINTER_OPTIONS = ("features", "ngram", "stopwords", "kind", "weights")

#: The library arguments that are command-line options of the same name, for errors about one.
SETTING_OPTIONS = {name: f"--{name}" for name in (*FINGERPRINTER_OPTIONS, "bits", "blocks", "mode")} | {"k": "-k"}
_OMIT_FINGERPRINTER = "omit " + ", ".join(f"--{name}" for name in FINGERPRINTER_OPTIONS[:-1])
_OMIT_FINGERPRINTER += f" and --{FINGERPRINTER_OPTIONS[-1]} to use the stored settings"


def _settings_of(fingerprinter: object) -> dict[str, Any]:
    """The settings of a Fingerprinter as a dict (empty for anything else)."""
    to_dict = getattr(fingerprinter, "to_dict", None)
    return to_dict() if callable(to_dict) else {}


def _settings(fingerprinter: object, names: tuple[str, ...]) -> str:
    """``--features char --ngram 5`` for the named settings of ``fingerprinter``."""
    settings = _settings_of(fingerprinter)
    return " ".join(f"--{name} {'none' if settings.get(name) is None else settings[name]}" for name in names)


def _mismatch_line(error: ConfigMismatchError) -> tuple[str, str]:
    """Message and hint of a setting given on the command line that the database does not
    hold, in option terms."""
    where = f"the database at {error.path}" if error.path else "the database"
    if error.setting != "fingerprinter":
        option = CLI_OPTIONS.get(error.setting, f"--{error.setting}")
        return (
            f"{option} {error.given} was given, but {where} was created with {option} {error.stored}",
            f"omit {option}, or export and import into a new database to change it",
        )
    given, stored = _settings_of(error.given), _settings_of(error.stored)
    differing = tuple(name for name in FINGERPRINTER_OPTIONS if given.get(name) != stored.get(name))
    if not differing:  # settings without an option (bits, an IDF table) differ: name them all
        differing = FINGERPRINTER_OPTIONS
    return (
        f"{_settings(error.given, differing)} was given, but {where} uses {_settings(error.stored, differing)}",
        _OMIT_FINGERPRINTER,
    )


def error_message(error: SimdbError, *, hint: bool = True) -> str:
    """The one line the command line shows for a library error, made from its class and
    fields (never from its Python-API text): a mismatched setting and a distance are named
    by their options, a remedy is said in command-line terms, and the hint (unless
    ``hint=False``) follows in parentheses.  O(1)."""
    advice: str | None
    if isinstance(error, ConfigMismatchError):  # its remedy, OMIT_SETTING, is worded per setting
        message, advice = _mismatch_line(error)
    elif isinstance(error, InvalidInputError) and error.argument in SETTING_OPTIONS and error.expected:
        # A setting given as an option: named by the option, its value as it was typed.
        value = str(error.value).translate(output.CONTROL_ESCAPES) or "''"
        message = f"{SETTING_OPTIONS[error.argument]} {value} is not valid: give {error.expected}"
        advice = None
    else:
        message = error.message
        advice = CLI_HINTS[error.remedy] if error.remedy is not None else error.hint
    return f"{message} (hint: {advice})" if hint and advice else message


def debug_asked(setting: str | None) -> bool:
    """Whether ``$SIMDB_DEBUG`` asks for tracebacks: any value but empty, 0, false, no or
    off (``SIMDB_DEBUG=0`` turned them on)."""
    return (setting or "").strip().lower() not in ("", "0", "false", "no", "off")


def interrupted_exit_code() -> int:
    """EXIT_TERMINATED where SIGTERM began this process's interruption, else EXIT_INTERRUPTED."""
    return EXIT_TERMINATED if signals.last_signal == signal.SIGTERM else EXIT_INTERRUPTED


def guarded(command: F) -> F:
    """Run ``command`` so that any error ends it with one line on stderr and its exit code,
    never a traceback (unless ``--debug`` or ``$SIMDB_DEBUG`` asks for one)."""

    @functools.wraps(command)
    def run(*args: Any, **kwargs: Any) -> Any:
        debug = bool(kwargs.get("debug")) or debug_asked(os.environ.get("SIMDB_DEBUG"))
        signals.forget_interruption()
        try:
            try:
                result = command(*args, **kwargs)
            except typer.Exit:
                output.flush()
                raise
            # A full disk behind `> file` is reported here, not lost in Python's flush at exit.
            output.flush()
            return result
        except (typer.Exit, typer.Abort, TyperException):  # typer's own exits and usage errors
            raise
        except KeyboardInterrupt:
            err("simdb: interrupted")
            raise typer.Exit(interrupted_exit_code()) from None
        except BrokenPipeError as error:
            if error.errno == errno.EBADF:
                # Closed before the command started (``simdb export >&-``): the results never
                # had a reader, and a script must not take silence for success.
                err("simdb: stdout is closed, so the results could not be written (redirect it to a file)")
                raise typer.Exit(EXIT_USAGE) from None
            # The reader went away (``simdb pairs | head``): stop quietly, and keep Python
            # from complaining about the unflushable stdout at exit.
            output.silence_stdout()
            raise typer.Exit(0) from None
        except SimdbError as error:
            if debug:
                traceback.print_exc()
            err(f"simdb: {error_message(error)}")
            raise typer.Exit(exit_code_for(error)) from None
        except OSError as error:  # a path the user named, or a full disk behind stdout (the library wraps its own)
            if debug:
                traceback.print_exc()
            where = f"{error.filename}: " if error.filename else ""
            err(f"simdb: {where}{error.strerror or error}")
            raise typer.Exit(exit_code_for(error)) from None
        except MemoryError:
            if debug:
                traceback.print_exc()
            err("simdb: out of memory (hint: give smaller inputs, --batch-size or --max-doc-bytes)")
            raise typer.Exit(EXIT_DATABASE) from None
        except Exception as error:  # noqa: BLE001 - the one place that turns bugs into a message
            if debug:
                traceback.print_exc()
            err(f"simdb: unexpected {type(error).__name__}: {error} (run with --debug to see where)")
            raise typer.Exit(exit_code_for(error)) from None

    # functools.wraps keeps command's signature for typer; mypy only sees run's (*args, **kwargs).
    return run  # type: ignore[return-value]


def usage_error(message: str) -> typer.Exit:
    """Report a usage problem found after parsing; raise the result."""
    err(f"simdb: {message}")
    return typer.Exit(EXIT_USAGE)
