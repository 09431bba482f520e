"""Ctrl-C (or SIGTERM) while worker processes run: the interruption belongs to this process alone."""

from __future__ import annotations

import os
import signal
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from simdb.storage import commit_in_progress


class Interruption(threading.Event):
    """Set once Ctrl-C (SIGINT) or SIGTERM came; :attr:`signal` says which."""

    signal: int = signal.SIGINT


#: The signal that last interrupted this process through :func:`interrupts_in_this_process_only`,
#: for the exit code of an interruption that surfaces outside the run that handled it.
last_signal: int | None = None


@contextmanager
def interrupts_in_this_process_only() -> Iterator[Interruption]:
    """Let Ctrl-C, and SIGTERM (``timeout``, ``kill``, a service manager stopping the run),
    raise KeyboardInterrupt in this process but not in the fingerprinting worker processes
    forked meanwhile.  The workers ignore SIGINT once their initialiser has run; until then
    they carry this inherited handler, which does nothing with SIGINT when it finds itself
    in another process, so no worker prints a traceback, and ends the worker with SIGTERM as
    the default action would.

    Yields an event that is set once either came: the KeyboardInterrupt can surface as
    another error (a process pool interrupted while starting fails to shut down), and the
    caller should still treat that as the interruption.  Off the main thread, signals
    cannot be handled, a SIGINT ignored from the start (a shell's background job, nohup)
    stays so, and so does a SIGTERM that whoever runs this handles or ignores; the event is
    then never set by it."""
    received = Interruption()
    if threading.current_thread() is not threading.main_thread():
        yield received
        return
    owner = os.getpid()

    def on_interrupt(signum: int, frame: Any) -> None:
        if os.getpid() == owner:
            global last_signal
            received.signal = last_signal = signum
            received.set()
            if commit_in_progress():
                # Between a batch's commit and its report: raised by the report instead
                # (Ingest._on_batch), so the count said afterwards is exactly what was stored.
                return
            raise KeyboardInterrupt
        if signum == signal.SIGTERM:  # a worker, told to end: it ends
            signal.signal(signal.SIGTERM, signal.SIG_DFL)
            os.kill(os.getpid(), signal.SIGTERM)

    def quiet_unraisable(unraisable: Any) -> None:
        # Where Python cannot propagate an exception (an at-fork hook, a finaliser) a
        # KeyboardInterrupt would be printed and dropped; it is dropped quietly here, and
        # the event makes the caller stop at its next check instead.
        if not (isinstance(unraisable.exc_type, type) and issubclass(unraisable.exc_type, KeyboardInterrupt)):
            previous_hook(unraisable)

    previous = {number: signal.getsignal(number) for number in (signal.SIGINT, signal.SIGTERM)}
    # SIGINT unless ignored; SIGTERM only where nobody handles it (its default kills).
    taken = [number for number, handler in previous.items() if handler not in (signal.SIG_IGN, None)]
    taken = [number for number in taken if number == signal.SIGINT or previous[number] == signal.SIG_DFL]
    for number in taken:
        signal.signal(number, on_interrupt)
    previous_hook, sys.unraisablehook = sys.unraisablehook, quiet_unraisable
    try:
        yield received
    finally:
        for number in taken:
            signal.signal(number, previous[number])
        sys.unraisablehook = previous_hook
