"""Ctrl-C while worker processes run: the interruption belongs to this process alone."""

from __future__ import annotations

import os
import signal
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any


@contextmanager
def interrupts_in_this_process_only() -> Iterator[threading.Event]:
    """Let Ctrl-C raise KeyboardInterrupt in this process but not in the fingerprinting
    worker processes forked meanwhile.  The workers ignore SIGINT once their initialiser
    has run; until then they carry this inherited handler, which does nothing when it finds
    itself in another process, so no worker prints a traceback.

    Yields an event that is set once Ctrl-C came: the KeyboardInterrupt can surface as
    another error (a process pool interrupted while starting fails to shut down), and the
    caller should still treat that as the interruption.  Off the main thread, signals
    cannot be handled, and where SIGINT is ignored it stays so; the event is then never set."""
    received = threading.Event()
    if threading.current_thread() is not threading.main_thread() or signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
        # A SIGINT ignored from the start was ignored by whoever started us (a shell's
        # background job, nohup): it stays ignored, as for any other command.
        yield received
        return
    owner = os.getpid()

    def on_interrupt(signum: int, frame: Any) -> None:
        if os.getpid() == owner:
            received.set()
            raise KeyboardInterrupt

    def quiet_unraisable(unraisable: Any) -> None:
        # Where Python cannot propagate an exception (an at-fork hook, a finaliser) a
        # KeyboardInterrupt would be printed and dropped; it is dropped quietly here, and
        # the event makes the caller stop at its next check instead.
        if not (isinstance(unraisable.exc_type, type) and issubclass(unraisable.exc_type, KeyboardInterrupt)):
            previous_hook(unraisable)

    previous = signal.signal(signal.SIGINT, on_interrupt)
    previous_hook, sys.unraisablehook = sys.unraisablehook, quiet_unraisable
    try:
        yield received
    finally:
        signal.signal(signal.SIGINT, previous)
        sys.unraisablehook = previous_hook
