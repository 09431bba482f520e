"""Errors, in one place: every command runs under :func:`guarded`, which turns any
exception into one line on stderr and the command's exit code."""

from __future__ import annotations

import functools
import os
import traceback
from collections.abc import Callable
from typing import Any, TypeVar

import typer
from typer.exceptions import TyperException

from simdb import DatabaseError, SimdbError

from . import output
from .output import err

EXIT_NOTHING_FOUND = 1
EXIT_USAGE = 2
EXIT_DATABASE = 3
EXIT_INTERRUPTED = 130

F = TypeVar("F", bound=Callable[..., Any])


def exit_code_for(error: BaseException) -> int:
    """The exit code of an error: 3 for the database, 2 for anything the user gave."""
    if isinstance(error, DatabaseError):
        return EXIT_DATABASE
    if isinstance(error, SimdbError):  # InvalidInputError, ConfigMismatchError, FingerprinterError
        return EXIT_USAGE
    return EXIT_DATABASE


#: The library's hints speak its Python API; these say the same for the command line.
CLI_WORDING = (
    (
        "omit fingerprinter= to use the stored settings",
        "omit --features, --ngram, --stopwords, --kind and --weights to use the stored settings",
    ),
    ("omit k,", "omit -k,"),
    ("omit blocks,", "omit --blocks,"),
    ("create it by opening it writable", "create it with simdb add or simdb import"),
    ("create it first by opening it writable", "create it with simdb add or simdb import"),
    ("create it with create=True", "create it with simdb add or simdb import"),
    ("open it writable to finish it", "simdb add or simdb import finishes it"),
    (
        "add text once with a writable database, or pass fingerprints",
        "add text with simdb add first, or query with --fingerprint",
    ),
    ("run check()", "run simdb check"),
)


def cli_message(error: SimdbError) -> str:
    """The one-line message of a library error, its hints put in command-line terms."""
    message = str(error)
    for python, command_line in CLI_WORDING:
        message = message.replace(python, command_line)
    return message


def guarded(command: F) -> F:
    """Run ``command`` so that any error ends it with one line on stderr and its exit code,
    never a traceback (unless ``--debug`` or ``$SIMDB_DEBUG`` asks for one)."""

    @functools.wraps(command)
    def run(*args: Any, **kwargs: Any) -> Any:
        debug = bool(kwargs.get("debug")) or bool(os.environ.get("SIMDB_DEBUG"))
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
            raise typer.Exit(EXIT_INTERRUPTED) from None
        except BrokenPipeError:
            # The reader went away (``simdb pairs | head``): stop quietly, and keep Python
            # from complaining about the unflushable stdout at exit.
            output.silence_stdout()
            raise typer.Exit(0) from None
        except SimdbError as error:
            if debug:
                traceback.print_exc()
            err(f"simdb: {cli_message(error)}")
            raise typer.Exit(exit_code_for(error)) from None
        except OSError as error:  # a path the user named (the library wraps its own)
            if debug:
                traceback.print_exc()
            where = f"{error.filename}: " if error.filename else ""
            err(f"simdb: {where}{error.strerror or error}")
            raise typer.Exit(EXIT_USAGE) from None
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
