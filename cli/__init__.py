"""The ``simdb`` command line: a thin typer layer over the :mod:`simdb` library.

Everything that imports typer or rich lives in this package, so ``import simdb`` stays free
of them.  The entry point is :func:`simdb_cli.app.main`.
"""

# Only modules that interpreter start-up has loaded already, and the built-in _signal: the
# Python-level `signal` module takes long enough to import (it builds enums) that a Ctrl-C
# often lands inside it, before the handler below is in place.
import _signal  # type: ignore[import-not-found]  # no stub; the C half of signal
import os
import sys
from types import FrameType


def _exit_quietly(signum: int, frame: FrameType | None) -> None:
    os._exit(130)  # nothing is open yet: no cleanup to run


# Ctrl-C while the command's modules are still loading (typer, rich, numpy: most of a
# second) would print a KeyboardInterrupt traceback from deep inside an import.  Run as the
# `simdb` console script, end quietly with the usual exit code instead; simdb_cli.app.main() puts
# Python's own handler back once everything is loaded.  Importing simdb_cli anywhere else (tests,
# python -m) leaves the handler alone, as does a SIGINT that was set to be ignored.
if (
    os.path.splitext(os.path.basename(sys.argv[0] if sys.argv else ""))[0] == "simdb"
    and _signal.getsignal(_signal.SIGINT) is _signal.default_int_handler
):
    _signal.signal(_signal.SIGINT, _exit_quietly)

# Before anything imports numpy, which reads its CPU settings once (see cpu_dispatch).
from .cpu_dispatch import keep_sorts_off_avx512_on_zen4  # noqa: E402

keep_sorts_off_avx512_on_zen4()
