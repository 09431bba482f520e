"""The batching writer: single adds and removes, committed in batches.

``db.add`` commits one write transaction per document, so an indexer adding documents one
at a time pays a durable commit (LMDB's fsyncs) per document.  :class:`BatchWriter` buffers
the calls and commits them together, through the same batch path as
:meth:`~simdb.Database.add_texts` and :meth:`~simdb.Database.add_many` (one write
transaction per flush)::

    with db.writer() as writer:
        for key, text in documents:
            writer.add(key, text=text)
    # every add is durable here

Durability.  An add or remove is durable once the flush that commits it returns: an
explicit :meth:`BatchWriter.flush`, the end of a ``with`` block, :meth:`BatchWriter.close`,
or the automatic flush that a call makes when the buffer holds ``max_batch`` operations or
its oldest one is ``max_delay`` seconds old.  A crash (even SIGKILL) loses at most the
operations buffered since the last completed flush; a flush is one LMDB write transaction,
so it is stored whole or not at all, never half a batch.
"""

from __future__ import annotations

import atexit
import os
import threading
import time
import warnings
from collections.abc import Iterator
from contextlib import AbstractContextManager, suppress
from functools import partial
from itertools import groupby
from typing import TYPE_CHECKING, Any, NamedTuple

from simdb import codec
from simdb.database import DEFAULT_MAX_BATCH, DEFAULT_MAX_DELAY, AddResult
from simdb.errors import DatabaseClosedError, InvalidInputError, WriterBusyError, WriterClosedError
from simdb.fingerprint import _as_text
from simdb.keys import check_key, describe, index_key
from simdb.records import flush_mark_name
from simdb.threshold import check_threshold
from simdb.validation import check_bool

if TYPE_CHECKING:
    from simdb.batch import Batch, Removals
    from simdb.database import Database

_TEXT, _FINGERPRINT, _REMOVE = "text", "fingerprint", "remove"


class _Operation(NamedTuple):
    """One buffered call, validated: ``value`` is the text (str) or the fingerprint of an
    add, ``index_key`` the key-index key of a remove."""

    kind: str
    key: str
    value: Any = None
    meta: Any = None
    index_key: bytes = b""


class _Queue(NamedTuple):
    """The buffered operations, and the flush in doubt: ``(number, taken)`` from the moment a
    flush of the first ``taken`` operations, numbered ``number``, begins until it is known
    to have committed (then they leave the queue); None otherwise.  A flush cut off by an
    exception, an interrupt (KeyboardInterrupt) included, stays in doubt until the next
    call settles it from the writer's flush mark in the database.  Always replaced whole, by
    one assignment, so that no interrupt can leave the two out of step."""

    operations: list[_Operation]
    in_doubt: tuple[int, int] | None = None


class BatchWriter:
    """Buffers single :meth:`add` and :meth:`remove` calls and commits them in batches.  Make
    one with :meth:`simdb.Database.writer`; use it as a context manager, or call
    :meth:`close`.

    **When it commits.**  A call that leaves ``max_batch`` operations in the buffer, or finds
    the oldest buffered one at least ``max_delay`` seconds old, flushes before it returns;
    so do :meth:`flush`, :meth:`close` and the end of the ``with`` block.  There is no timer
    thread: ``max_delay`` is checked on each call, so a writer that receives no calls keeps
    its buffer until the next call, :meth:`flush` or :meth:`close`.

    **Durability.**  An operation is durable once the flush that commits it returns.  A
    writer never closed is closed (so flushed) when its database is closed and when the
    process exits (also by an uncaught exception or Ctrl-C; not when it is killed); until
    then a writer that holds operations stays alive even if the program dropped it.  If that
    flush fails, ``db.close()`` raises, and at exit a RuntimeWarning names the operations
    lost.  To drop buffered operations on purpose, call :meth:`discard`.  A crash (SIGKILL,
    power loss) loses at most the operations buffered since the last completed flush.  Each
    flush is one write transaction over documents, key index and tables: readers and a
    reopened database see all of it or none of it, never half a batch.

    **Same result as one by one.**  The stored state after a flush (documents, ids,
    sketches, tables) is the one that ``db.add`` and ``db.remove`` called one by one in
    call order would leave; the flush gathers the removes into as few passes as that
    allows (see :meth:`_runs`).  So are the counts of ``total`` but ``featureless``, which
    counts the documents a flush stored (a key added twice in it, once).  With ``if_new``, an add is skipped
    when it is similar to a stored document or to an earlier add of this writer, buffered
    or stored (as within one :meth:`~simdb.Database.add_texts` batch); ``threshold`` as
    there.

    **Reading your own writes.**  Queries, ``get`` and ``len`` see buffered operations only
    after they are flushed.

    **Validation.**  :meth:`add` and :meth:`remove` check their arguments at once and raise
    the error ``db.add`` would (a bad key, fingerprint, text or meta), so a bad item never
    enters the buffer and cannot fail a later flush.  ``meta`` is copied as it will be
    stored, so changing the object afterwards changes nothing; texts are fingerprinted at
    the flush, all of a batch together.

    **Errors.**  If a flush fails (a full disk, say), the error is raised by the call that
    flushed, nothing of that batch is stored, and the operations stay buffered: fix the
    cause and call :meth:`flush` again, or drop them with :meth:`discard`.  A flush cut off
    by an interrupt (KeyboardInterrupt, or an exception a signal handler raises) may have
    committed or not; the writer's next call finds out from a mark that every flush's
    transaction stores, and keeps exactly the operations that were not stored, so none is
    lost and none applied twice (``total`` then lacks that flush's counts).  The mark, a few
    bytes in the database, is deleted by :meth:`close`, one small commit more; that of a
    writer whose process died unclosed (SIGKILL) goes when a later writer is made on the
    same host.  When the
    ``with`` block raises, the operations added before the exception are still flushed, as
    ``db.add`` would have stored them, and the exception propagates (if that flush fails
    too, its error is raised, chained to the block's).

    **Threads.**  A writer may be shared by threads: a lock serialises the calls, and a
    flush holds it while it commits, so other threads' calls wait for it.  It belongs to
    the process that made it (like the :class:`~simdb.Database`).

    Attributes: ``total`` sums the :class:`~simdb.AddResult` of every flush (its
    ``skipped`` list grows with every skip); ``removed`` counts the documents removed.
    """

    def __init__(
        self,
        database: Database,
        *,
        max_batch: int = DEFAULT_MAX_BATCH,
        max_delay: float = DEFAULT_MAX_DELAY,
        if_new: bool = False,
        threshold: float | None = None,
    ) -> None:
        if isinstance(max_batch, bool) or not isinstance(max_batch, int) or max_batch < 1:
            raise InvalidInputError(f"max_batch={describe(max_batch)} is not an int >= 1")
        if isinstance(max_delay, bool) or not isinstance(max_delay, (int, float)) or not max_delay >= 0:
            raise InvalidInputError(f"max_delay={describe(max_delay)} is not a number of seconds >= 0")
        check_bool("if_new", if_new)
        self._database = database
        self._max_batch = max_batch
        self._max_delay = float(max_delay)
        self._if_new = if_new
        self._threshold = None if threshold is None else check_threshold(threshold)
        # Reentrant only to know its owner (see _locked): never taken twice.
        self._lock = threading.RLock()
        # The writer's lock, which a flush holds while it waits for the database: a thread
        # inside a read of the database, which that flush may wait for, gets
        # ReadInProgressError rather than waiting (Storage.holding); any other takes the lock
        # itself.  Bound once: every add takes it.
        self._holding = partial(database._storage.holding, self._lock, "wait for a writer of")
        self._queue = _Queue([])
        self._oldest = 0.0  # time.monotonic() of the first buffered operation
        self._mark = flush_mark_name(os.urandom(8))
        self._flushes = 0  # the number of the last flush begun: numbers are never reused
        self._closed = False
        self.total = AddResult()
        self.removed = 0

    # -- calls ---------------------------------------------------------------------------

    def add(self, key: str, fingerprint: int | None = None, meta: Any = None, *, text: str | None = None) -> None:
        """Buffer the add of one document, as ``db.add(key, fingerprint, meta, text=...)``
        would store it; flushes first when the buffer is full or old (see the class).
        Cost: the checks and a copy of ``meta``, O(size); a flush when one is due."""
        self._buffer_operation(self._validated_add(key, fingerprint, meta, text))

    def remove(self, key: str) -> None:
        """Buffer the removal of the document under ``key`` (nothing happens at the flush if
        there is none then), as ``db.remove(key)``; flushes as :meth:`add` does."""
        self._buffer_operation(_Operation(_REMOVE, key, index_key=index_key(check_key(key))))

    def flush(self) -> AddResult:
        """Commit every buffered operation in one write transaction and return what its
        adds did.  Durable when it returns.  Nothing buffered: nothing is written.  Cost:
        fingerprinting the buffered texts, one commit (its fsyncs)."""
        with self._locked():
            self._check_open()
            try:
                return self._flush()
            finally:
                self._track()

    def close(self) -> None:
        """Flush and close the writer; later calls raise :class:`~simdb.WriterClosedError`.
        Idempotent.  If the flush fails the writer stays open (see the class)."""
        with self._locked():
            if self._closed:
                return
            self._flush()
            if self._flushes:
                # Once the database is closed the mark stays, read by no one: harmless.
                with suppress(DatabaseClosedError):
                    self._database._drop_flush_mark(self._mark)
            self._closed = True
            self._track()

    def discard(self) -> int:
        """Drop the buffered operations without storing them; returns how many there were.
        Works after the database was closed, so that a writer whose flush that close made
        fail can still be emptied and closed (a flush an interrupt left in doubt then counts
        whole, as whether it committed can no longer be read)."""
        with self._locked():
            with suppress(DatabaseClosedError):
                self._settle()
            dropped = len(self._queue.operations)
            self._queue = _Queue([])
            self._track()
            return dropped

    @property
    def pending(self) -> int:
        """How many operations are buffered, not yet committed."""
        with self._locked():
            self._settle()
            self._track()
            return len(self._queue.operations)

    def __enter__(self) -> BatchWriter:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def _warn_lost(self, reason: str) -> None:
        warnings.warn(
            f"a simdb BatchWriter of {self._database.path} lost {len(self._queue.operations)} operations"
            f" never flushed: {reason}",
            RuntimeWarning,
            stacklevel=2,
        )

    def __repr__(self) -> str:
        if not hasattr(self, "_closed"):  # its __init__ refused its arguments
            return "<simdb.BatchWriter (not made)>"
        state = "closed" if self._closed else f"{len(self._queue.operations)} pending"
        return f"<simdb.BatchWriter {self._database.path!r} {state}>"

    # -- inside --------------------------------------------------------------------------

    def _validated_add(self, key: str, fingerprint: object, meta: Any, text: str | None) -> _Operation:
        """The add checked as ``db.add`` checks it (the same errors), before any lock."""
        check_key(key)
        if meta is not None:
            # Copied as it will be stored (and refused now if it cannot be), so a caller that
            # reuses or changes the object after add() changes nothing buffered.
            meta = codec.unpack(codec.pack(meta, codec.meta_of(key)), "meta")
        if text is None:
            return _Operation(_FINGERPRINT, key, self._database._resolve(fingerprint, None), meta)
        if fingerprint is not None:
            self._database._resolve(fingerprint, text)  # raises db.add's "both were given" error
        return _Operation(_TEXT, key, _as_text(text), meta)

    def _buffer_operation(self, operation: _Operation) -> None:
        with self._locked():
            self._check_open()
            now = time.monotonic()
            operations = self._queue.operations
            if not operations:
                self._oldest = now
            operations.append(operation)
            if len(operations) == 1:
                self._track()
            if len(operations) >= self._max_batch or now - self._oldest >= self._max_delay:
                try:
                    self._flush()
                finally:
                    self._track()

    def _track(self) -> None:
        """Keep this writer in :data:`_holding` while it is open and holds operations, else
        take it out.  O(1), under a lock that only this and :func:`close_writers` take."""
        with _holding_lock:
            if self._queue.operations and not self._closed:
                _holding.add(self)
            else:
                _holding.discard(self)

    def _locked(self) -> AbstractContextManager[object]:
        """The writer's lock, for one call.  Refused with WriterBusyError where this thread
        holds it already: a signal handler calling the writer, or closing its database,
        while an add flushed would wait for itself (found by a probe: ``db.close()`` in a
        SIGTERM handler hung the process).  One C call more than the lock."""
        if self._lock._is_owned():  # type: ignore[attr-defined]  # the C RLock's, as threading.Condition uses
            raise WriterBusyError(
                f"a call of the writer of {self._database.path} was made inside another call of it, in the same thread",
                path=self._database.path,
            )
        return self._holding()

    def _check_open(self) -> None:
        if self._closed:
            raise WriterClosedError(f"the writer of {self._database.path} is closed", "make a new one with db.writer()")
        # Else an add after db.close() was buffered, acknowledged, and lost at exit.  Raises
        # as the database would: DatabaseClosedError, InheritedHandleError in a forked child.
        self._database._storage._current()

    def _flush(self) -> AddResult:
        """Commit the buffer (the lock held); its operations leave it once the commit
        returned, or once :meth:`_settle` finds that the commit happened."""
        self._settle()
        operations = self._queue.operations
        if not operations:
            return AddResult()
        steps = list(self._steps(operations))  # fingerprinting: before the flush is in doubt
        self._flushes += 1
        number, taken = self._flushes, len(operations)
        self._queue = _Queue(operations, (number, taken))
        result, removed = self._database._commit_steps(steps, self._if_new, self._threshold, (self._mark, number))
        self._queue = _Queue(operations[taken:])
        self.total.merge(result)
        self.removed += removed
        return result

    def _settle(self) -> None:
        """Settle a flush left in doubt (see :class:`_Queue`): its operations leave the
        buffer if the writer's flush mark shows it committed, else they stay.  One read."""
        operations, in_doubt = self._queue
        if in_doubt is not None:
            number, taken = in_doubt
            committed = self._database._flush_mark(self._mark) >= number
            self._queue = _Queue(operations[taken:] if committed else operations)

    def _steps(self, operations: list[_Operation]) -> Iterator[Batch | Removals]:
        """``operations`` as the batches :meth:`Database._commit_steps` applies: each run of
        :meth:`_runs` is one batch, made by the batch path of add_texts, add_many or
        remove_many."""
        database = self._database
        for run in self._runs(operations):
            rows = [(operation.key, operation.value, operation.meta) for operation in run]
            step: Batch | Removals
            if run[0].kind == _TEXT:
                step = next(database._text_batches(rows, None, len(rows)))
            elif run[0].kind == _FINGERPRINT:
                step = next(database._batches(iter(rows), len(rows)))
            else:
                step = [(operation.key, operation.index_key) for operation in run]
            yield step

    def _runs(self, operations: list[_Operation]) -> Iterator[list[_Operation]]:
        """``operations`` in runs of one kind, to apply one run after another with the result
        of applying them in call order.  Each run costs a batch's fixed work (a removal
        rewrites a compressed block of every table), so interleaved adds and removes are not
        cut into a run each: a remove moves before the adds that came after its key's last
        add, which changes nothing stored, as adds and removes of other keys commute and the
        adds keep their order (so new keys get the same ids).  A run more is needed only
        where a key is added, removed and added again.  With ``if_new`` an add depends on
        what is stored when it comes (a removed near-duplicate no longer skips it), so the
        call order stays.  O(n)."""
        if self._if_new:
            yield from _by_kind(operations)
            return
        # removal_groups[g] runs before add_groups[g]; there is at most one more removal group.
        removal_groups: list[list[_Operation]] = [[]]
        add_groups: list[list[_Operation]] = [[]]
        last_add_group: dict[str, int] = {}
        last_removal_group: dict[str, int] = {}
        for operation in operations:
            if operation.kind == _REMOVE:
                group = last_add_group.get(operation.key, -1) + 1
                if group == len(removal_groups):
                    removal_groups.append([])
                removal_groups[group].append(operation)
                last_removal_group[operation.key] = group
            else:
                if last_removal_group.get(operation.key, -1) == len(add_groups):
                    add_groups.append([])  # its key was removed after an add of this group
                add_groups[-1].append(operation)
                last_add_group[operation.key] = len(add_groups) - 1
        if len(removal_groups) > len(add_groups):
            add_groups.append([])
        for removals, adds in zip(removal_groups, add_groups, strict=True):
            if removals:
                yield removals
            yield from _by_kind(adds)  # adds from text and of fingerprints are batches of their own


def _by_kind(operations: list[_Operation]) -> Iterator[list[_Operation]]:
    """The runs of consecutive ``operations`` of one kind."""
    for _, run in groupby(operations, key=lambda operation: operation.kind):
        yield list(run)


#: The open writers that hold operations, kept alive here (a program may drop one unclosed)
#: until :func:`close_writers` flushes them: when their database is closed, or at exit.  A
#: flush by the garbage collector instead could run inside any lock of the thread it
#: interrupts (a dropped writer's __del__ waited for the database lock its own thread held).
_holding: set[BatchWriter] = set()
# Reentrant: a signal handler that closes a database while this thread is in _track must
# reach the writer's own refusal (WriterBusyError), not wait here for itself.
_holding_lock = threading.RLock()


def _forget_in_child() -> None:
    # A forked child's copies of the writers hold its parent's operations, not its own, and
    # a parent thread may have held the lock at the fork.
    global _holding_lock
    _holding_lock = threading.RLock()
    _holding.clear()


os.register_at_fork(after_in_child=_forget_in_child)


@atexit.register
def close_writers(database: Database | None = None) -> None:
    """Close (so flush) this process's writers that hold operations: those of ``database``
    (from :meth:`Database.close`; the first flush that fails raises, and that writer and any
    after it stay open), or at exit (None) every one, a failure warned of.  O(writers
    holding operations) plus their flushes."""
    with _holding_lock:
        writers = [writer for writer in _holding if database is None or writer._database is database]
    for writer in writers:
        if database is not None:
            writer.close()
            continue
        try:
            writer.close()
        except Exception as error:  # noqa: BLE001 -- one writer's failure must not stop the rest
            writer._warn_lost(f"its flush at the exit of the process failed: {error}")
