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

    @property
    def by(self) -> str:
        """What interrupted, in a message's words: "SIGTERM" or "Ctrl-C"."""
        return "SIGTERM" if self.signal == signal.SIGTERM else "Ctrl-C"


def _end_this_worker() -> None:
    """In a worker process forked from the command, on SIGTERM: end by it, as by default."""
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    os.kill(os.getpid(), signal.SIGTERM)


#: The signal that first interrupted this process (SIGINT or SIGTERM), for the exit code of an
#: interruption that surfaces outside the run that handled it: the one that began the stop
#: names it, whatever comes while the command winds down.
last_signal: int | None = None


def forget_interruption() -> None:
    """Start a new run: a process can hold several (tests, an app calling commands in-process)."""
    global last_signal
    last_signal = None


def _note(signum: int) -> int:
    """Record ``signum`` as this process's interruption unless one came before; return the
    one recorded."""
    global last_signal
    if last_signal is None:
        last_signal = signum
    return last_signal


#: The SIGTERM handler :func:`interrupt_on_either` installed, which a run may take over as
#: if SIGTERM had its default action.
_terminating_handler: Any = None


def interrupt_on_either() -> None:
    """Make SIGTERM (``timeout``, ``kill``, ``docker stop``, a service manager) stop any
    command as Ctrl-C does, through KeyboardInterrupt: an export removes its partial file, a
    write ends between transactions, and the exit code is 143.  Ctrl-C still raises
    KeyboardInterrupt, and now notes itself too, so the first of the two names the exit
    code.  A process forked later (a fingerprinting worker) that receives SIGTERM ends by it,
    as by default.  Either signal is left alone where whoever started this process ignores
    or handles it.  Call once, on the main thread, from the console script."""
    owner = os.getpid()

    def on_signal(signum: int, frame: Any) -> None:
        if os.getpid() != owner and signum == signal.SIGTERM:
            _end_this_worker()
            return
        if os.getpid() == owner:
            _note(signum)
        raise KeyboardInterrupt

    if signal.getsignal(signal.SIGINT) is signal.default_int_handler:
        signal.signal(signal.SIGINT, on_signal)
    if signal.getsignal(signal.SIGTERM) == signal.SIG_DFL:
        global _terminating_handler
        _terminating_handler = on_signal
        signal.signal(signal.SIGTERM, on_signal)


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
    forget_interruption()
    if threading.current_thread() is not threading.main_thread():
        yield received
        return
    owner = os.getpid()

    def on_interrupt(signum: int, frame: Any) -> None:
        if os.getpid() == owner:
            received.signal = _note(signum)
            received.set()
            if commit_in_progress():
                # Between a batch's commit and its report: raised by the report instead
                # (Ingest._on_batch), so the count said afterwards is exactly what was stored.
                return
            raise KeyboardInterrupt
        if signum == signal.SIGTERM:  # a worker, told to end: it ends
            _end_this_worker()

    def quiet_unraisable(unraisable: Any) -> None:
        # Where Python cannot propagate an exception (an at-fork hook, a finaliser) a
        # KeyboardInterrupt would be printed and dropped; it is dropped quietly here, and
        # the event makes the caller stop at its next check instead.
        if not (isinstance(unraisable.exc_type, type) and issubclass(unraisable.exc_type, KeyboardInterrupt)):
            previous_hook(unraisable)

    previous = {number: signal.getsignal(number) for number in (signal.SIGINT, signal.SIGTERM)}
    # SIGINT unless ignored; SIGTERM only where nobody else handles it (its default kills).
    taken = [number for number, handler in previous.items() if handler not in (signal.SIG_IGN, None)]
    ours = (signal.SIG_DFL, _terminating_handler)
    taken = [number for number in taken if number == signal.SIGINT or previous[number] in ours]
    for number in taken:
        signal.signal(number, on_interrupt)
    previous_hook, sys.unraisablehook = sys.unraisablehook, quiet_unraisable
    try:
        yield received
    finally:
        for number in taken:
            signal.signal(number, previous[number])
        sys.unraisablehook = previous_hook
