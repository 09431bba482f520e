"""The ingest engine of ``add`` and ``import``: documents fed to the database batch by
batch, with a progress bar, per-input reports, Ctrl-C handling and the summary line."""

from __future__ import annotations

import os
import shlex
import shutil
import tempfile
import threading
import time
import warnings
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager, suppress
from functools import partial
from itertools import groupby
from typing import Any, NamedTuple

import simdb
from simdb import AddResult, InvalidInputError
from simdb.plan import read_share_words
from simdb.storage import gone_process, host_tag
from simdb.threshold import if_new_blind_spot, kind_of

from . import output
from .errors import EXIT_USAGE, error_message, interrupted_exit_code
from .filekeys import prefix_of, stale_keys, under
from .output import err, json_line, out
from .signals import interrupts_in_this_process_only
from .sources import BareFingerprint, Input, Intake, Item, PathRules, SketchedFingerprint, shortened

#: Characters of text handed to the database and not yet committed, at most (plus one
#: document): a batch of large documents is cut short at this size, so memory follows it,
#: not --batch-size times the largest document.
BATCH_TEXT_CHARS = 256 * 2**20


def print_problem(where: str, cause: str) -> None:
    err(f"simdb: {shortened(where)}: {shortened(cause)}")


def print_notice(where: str, message: str) -> None:
    err(f"simdb: {shortened(where)}: {shortened(message)}")


def quiet_or(report: Callable[[str, str], None], quiet: bool) -> Callable[[str, str], None]:
    """``report``, or (with ``--quiet``) a report that says nothing."""
    return (lambda where, message: None) if quiet else report


def is_new_database(path: str) -> bool:
    """Whether ``path`` holds no database yet: missing, or an empty directory (a creation
    that was refused may leave one).  One stat and at most one listing."""
    return not os.path.exists(path) or (os.path.isdir(path) and not os.listdir(path))


#: How a dry run's scratch directory is named, before the process id that made it.
_DRY_RUN_PREFIX = "simdb-dry-run-"


def _dry_run_prefix() -> str:
    """The name of this host's dry-run copies, up to the process id: a temporary directory
    shared by containers or hosts holds others', whose process ids mean nothing here."""
    return f"{_DRY_RUN_PREFIX}{host_tag()}-"


def _vanished_root(path: str) -> str | None:
    """Why ``--prune`` must not judge the files under the PATH argument ``path`` gone: it is
    missing, or an empty directory (a share's mount point while the share is not mounted),
    or cannot be listed; else None.  An lstat and at most one directory entry read."""
    if not os.path.lexists(path):
        return "missing"
    if not os.path.isdir(path):
        return None
    try:
        with os.scandir(path) as entries:
            return "an empty directory" if next(entries, None) is None else None
    except OSError as exc:
        return f"cannot be listed ({exc.strerror})"


def _remove_stale_dry_runs() -> None:
    """Remove the scratch copies of this host's dry runs whose process is gone: one killed
    (SIGTERM, SIGKILL) never removed its own.  One listing of the temporary directory."""
    root = tempfile.gettempdir()
    prefix = _dry_run_prefix()
    with suppress(OSError):
        for name in os.listdir(root):
            if name.startswith(prefix) and gone_process(name[len(prefix) :].partition("-")[0]):
                shutil.rmtree(os.path.join(root, name), ignore_errors=True)


@contextmanager
def dry_run_target(path: str, dry_run: bool) -> Iterator[str]:
    """Where ``add`` writes: ``path``, or with ``dry_run`` a scratch copy of it (see
    :meth:`simdb.Database.copy_to`; nothing when there is no database yet) in a temporary
    directory, removed afterwards, so that the run reports exactly what it would do and
    ``path`` stays byte for byte as it was.  A dry run costs a copy of the database."""
    if not dry_run:
        yield path
        return
    _remove_stale_dry_runs()
    with tempfile.TemporaryDirectory(prefix=f"{_dry_run_prefix()}{os.getpid()}-") as scratch:
        target = os.path.join(scratch, "db")
        if not is_new_database(path):
            with simdb.open(path, readonly=True, create=False) as source:
                source.copy_to(target)
        try:
            yield target
        except simdb.SimdbError as error:
            # The copy stands for the user's database: an error names that (a setting that
            # differs from the stored one is worded from this field).
            if error.path is not None and os.path.abspath(error.path) == os.path.abspath(target):
                error.path = path
            raise


class FirstReady(Iterable[Item]):
    """An iterator of items that can read ahead to its first item (:meth:`ready`) before
    anything else is done, e.g. before a database is created for it; iterating gives that
    item and then the rest.  Reading ahead costs the reading of one item."""

    def __init__(self, items: Iterable[Item]) -> None:
        self._items = iter(items)
        self._first: list[Item] | None = None

    def ready(self) -> bool:
        """Whether there is at least one item (reads up to it, once)."""
        if self._first is None:
            self._first = [item for item in (next(self._items, None),) if item is not None]
        return bool(self._first)

    def __iter__(self) -> Iterator[Item]:
        self.ready()
        assert self._first is not None
        first, self._first = self._first, []
        yield from first
        yield from self._items


#: How the database is fed: ``add(items, on_batch)`` stores ``(key, value, meta)`` items.
Adder = Callable[..., AddResult]  # (rows, on_batch, batch_size=None): add_texts or add_many


class Counts(NamedTuple):
    """The totals of an ``add`` or ``import`` run, for its summary line."""

    added: int = 0
    replaced: int = 0
    skipped: int = 0
    featureless: int = 0
    unchanged: int = 0
    pruned: int = 0


#: What one list, dict or scalar of a meta counts toward BATCH_TEXT_CHARS: about the bytes of
#: memory Python holds for it, so metadata held uncommitted is bounded as texts are.
META_NODE_WEIGHT = 100


def meta_weight(meta: Any) -> int:
    """About the bytes of memory ``meta`` holds: META_NODE_WEIGHT per value, plus the length
    of its strings and bytes.  Iterative; O(size), with parse_json's container limit
    bounding the size of one JSON line's meta."""
    weight, pending = 0, [meta]
    while pending:
        part = pending.pop()
        weight += META_NODE_WEIGHT
        if isinstance(part, (str, bytes)):
            weight += len(part)
        elif isinstance(part, dict):
            pending.extend(part.keys())
            pending.extend(part.values())
        elif isinstance(part, (list, tuple)):
            pending.extend(part)
    return weight


class Ingest:
    """Feeds documents to the database batch by batch, keeping the committed totals, the
    progress bar and the per-skip reports up to date after every commit.

    The database refuses a whole batch for one item it cannot store (meta nested too deep,
    say).  The items not yet committed are kept, with where each came from, so such a
    batch is then stored in halves, recursively, down to the refused items, which are
    reported and counted as failed: O(log batch size) extra transactions per refused item,
    nothing extra while all goes well.

    Texts are held from when they are handed over until their batch commits (to retry a
    refused batch).  Once they add up to :data:`BATCH_TEXT_CHARS` characters (metadata
    counted by :func:`meta_weight`) the call to the database ends early, committing what it
    has, and a new call takes the rest: so the texts and metadata held at once never pass
    that plus one document, however large the documents."""

    def __init__(
        self,
        database: simdb.Database,
        intake: Intake,
        *,
        if_new: bool,
        workers: int,
        batch_size: int,
        json_output: bool,
        progress: Any,
        task: Any,
        stop: threading.Event,
        threshold: float | None = None,
        dry_run: bool = False,
    ) -> None:
        self.database = database
        self.intake = intake
        self.if_new = if_new
        # A dry run's lines say what a real run would do, as its summary does.
        self.skip_verb, self.prune_verb = ("would skip", "would prune") if dry_run else ("skipped", "pruned")
        # Handed to the database only with --if-new, where it means something.
        self._if_new_options: dict[str, Any] = {"if_new": True, "threshold": threshold} if if_new else {}
        self.workers = workers
        self.batch_size = batch_size
        self.json_output = json_output
        self.progress = progress
        self.task = task
        self.stop = stop
        self.finished = AddResult()  # totals of completed add calls
        self._running = AddResult()  # totals of the call in progress, as of its last commit
        self._skips_shown = 0
        self._uncommitted: deque[Item] = deque()  # items handed to the database, in order
        self.text_budget = BATCH_TEXT_CHARS  # read here, so that a test can lower it
        self._uncommitted_chars = 0  # characters of the texts in _uncommitted
        self._paused = False  # _watched stopped at text_budget, not at the end of its items
        self.pruned = 0  # documents removed by prune()

    def _watched(self, items: Iterator[Item]) -> Iterator[tuple[str, Any, Any]]:
        """``items`` as the database takes them, each kept in ``_uncommitted`` until its
        batch commits; stops with KeyboardInterrupt once Ctrl-C came, even if the signal's
        own KeyboardInterrupt was lost (see :func:`interrupts_in_this_process_only`)."""
        for item in items:
            if self.stop.is_set():
                raise KeyboardInterrupt
            self._uncommitted.append(item)
            if isinstance(item[1], str):
                self._uncommitted_chars += len(item[1])
            if item[2] is not None:
                self._uncommitted_chars += meta_weight(item[2])
            yield item[0], item[1], item[2]
            if self._uncommitted_chars >= self.text_budget:
                self._paused = True  # end this call: it commits what it holds
                return

    def texts(self, items: Iterable[Item]) -> None:
        """Fingerprint and store ``(key, text, meta, where)`` items (``workers`` processes)."""
        self._feed(items, self._add_texts)

    def _add_texts(
        self, rows: Iterable[tuple[str, Any, Any]], on_batch: Callable[[AddResult], None], batch_size: int | None = None
    ) -> AddResult:
        # With --if-new the database probes each batch once, in its write transaction.
        return self.database.add_texts(
            rows,
            workers=self.workers,
            batch_size=batch_size or self.batch_size,
            on_batch=on_batch,
            **self._if_new_options,
        )

    def prune(self, paths: Iterable[str], rules: PathRules) -> None:
        """Remove the stored documents under ``paths`` (see :func:`.filekeys.prefix_of`)
        whose files are gone (``add --prune``), naming each on stdout.  Under a
        directory, only keys that its walk would have read (``rules``: recursion, --glob,
        --exclude) are candidates, so that documents added otherwise (JSONL ids, keys of
        --fingerprints) are not taken for deleted files, unless their keys have the names of
        files that walk would read (a key with no slash, under the key base itself).  Keys
        do not record where a document came from.  Cost: one scan of the stored keys
        per path, one stat per candidate, one removal batch."""
        stale: dict[str, None] = {}
        for path in paths:
            exact, prefix = prefix_of(path, rules.key_base)
            # Keys starting with the exact key hold it and every key below it (prefix "": the
            # key base itself, every key).
            candidates = self.database.keys(prefix="" if prefix == "" else exact)
            # A PATH's own key always (a file argument, or one whose file is gone), and below
            # a directory the keys its walk would read.
            walked = [
                key for key in candidates if key == exact or (under(key, exact, prefix) and _walked(key, prefix, rules))
            ]
            vanished = _vanished_root(path)
            if vanished is not None and any(key != exact for key in walked):
                # A folder renamed, or a share not mounted (which leaves its mount point
                # empty): that its files are gone is not known (rsync, too, deletes nothing
                # after an error reading its source).
                db = shlex.quote(str(self.database.path))
                # A prefix "" (the key base itself) would list every key, JSONL ids included.
                below = prefix if prefix is not None else exact + "/"
                drop = f"simdb keys --db {db} --prefix {shlex.quote(below)} | simdb remove --db {db} -"
                err(
                    f"simdb: {shortened(path)}: {vanished} (renamed? a share not mounted?), so nothing stored under "
                    "it is pruned" + (f" (to drop those keys: {drop})" if below else "")
                )
                walked = [key for key in walked if key == exact]
            stale.update((key, None) for key in stale_keys(walked, rules.key_base))
        if not stale:
            return
        if self.stop.is_set():
            raise KeyboardInterrupt
        self.pruned += self.database.remove_many(stale)
        for key in stale:  # what went (or, in a dry run, would go), before the summary
            line = (
                json_line({"event": "pruned", "key": key})
                if self.json_output
                else f"{self.prune_verb} {shortened(key)}"
            )
            out(line)

    def fingerprints(self, items: Iterable[Item]) -> None:
        """Store ``(key, fingerprint, meta, where)`` items; a fingerprint read from an export
        with its sketch (:class:`SketchedFingerprint`) is stored with it, and one read
        without meta or sketch (:class:`BareFingerprint`) leaves a stored document with that
        fingerprint as it is.  Runs of each kind are stored in calls of their own."""
        for bare, run in groupby(items, key=lambda item: isinstance(item[1], BareFingerprint)):
            self._feed(run, partial(self._add_fingerprints, keep_stored=bare))

    def _add_fingerprints(
        self,
        rows: Iterable[tuple[str, Any, Any]],
        on_batch: Callable[[AddResult], None],
        batch_size: int | None = None,
        *,
        keep_stored: bool = False,
    ) -> AddResult:
        items = (
            (key, value.fingerprint, meta, value.sketch)
            if isinstance(value, SketchedFingerprint)
            else (key, int(value), meta)  # a plain int: add_many's fast path takes nothing else
            for key, value, meta in rows
        )
        return self.database.add_many(
            items,
            batch_size=batch_size or self.batch_size,
            on_batch=on_batch,
            keep_stored=keep_stored,
            **self._if_new_options,
        )

    def _feed(self, items: Iterable[Item], add: Adder) -> None:
        source = iter(items)
        while True:
            self._uncommitted, self._uncommitted_chars, self._paused = deque(), 0, False
            try:
                self._call(lambda on_batch: add(self._watched(source), on_batch))
                if not self._paused:
                    return
                continue  # the text budget ended that call; the next one goes on
            except InvalidInputError:
                if self.stop.is_set():
                    raise KeyboardInterrupt from None  # Ctrl-C came: stop, don't retry
                refused = list(self._uncommitted)
                if not refused:
                    raise  # not about an item: nothing to retry
            self._uncommitted = deque()  # the retries below must not pop their batches here
            # Retried as they came (texts as texts, so each keeps its sketch: a fingerprint alone
            # has none): refused texts are fingerprinted again, O(log batch size) times each at most.
            self._store_in_halves(refused, add)

    def _store_in_halves(self, items: list[Item], add: Callable[..., AddResult]) -> None:
        # One transaction for all of them, so a refusal means none of them was stored.
        try:
            self._call(lambda on_batch: add([item[:3] for item in items], on_batch, batch_size=len(items)))
        except InvalidInputError as error:
            if len(items) == 1:
                self.intake.fail(items[0][3], error_message(error))
                return
            middle = len(items) // 2
            self._store_in_halves(items[:middle], add)
            self._store_in_halves(items[middle:], add)

    def _call(self, run: Callable[[Callable[[AddResult], None]], AddResult]) -> None:
        self._running, self._skips_shown = AddResult(), 0
        try:
            result = run(self._on_batch)
        except InvalidInputError:
            self.finished.merge(self._running)  # the batches committed before the refused one
            self._running, self._skips_shown = AddResult(), 0
            raise
        self.finished.merge(result)
        self._running, self._skips_shown = AddResult(), 0

    def _on_batch(self, totals: AddResult) -> None:
        # The database takes its batches from the items in order, batch_size at a time.
        for _ in range(min(self.batch_size, len(self._uncommitted))):
            text = self._uncommitted.popleft()[1]
            if isinstance(text, str):
                self._uncommitted_chars -= len(text)
        for skip in totals.skipped[self._skips_shown :]:
            if self.json_output:
                event = {
                    "event": "skipped",
                    "key": skip.key,
                    "duplicate_of": skip.duplicate_of,
                    "similarity": skip.similarity,
                    "distance": skip.distance,
                }
                out(json_line(event))
            else:
                out(
                    f"{self.skip_verb} {output.shown(skip.key)}: "
                    f"near-duplicate of {output.shown(skip.duplicate_of)} "
                    f"(similarity {skip.similarity:.3f}, distance {skip.distance})"
                )
        self._skips_shown = len(totals.skipped)
        self._running = totals
        counts = self.counts()
        self.progress.update(self.task, completed=self.intake.bytes_done, documents=sum(counts[:3]) + counts.unchanged)
        if self.stop.is_set():  # an interrupt deferred while this batch committed (see interrupts_in_this_process_only)
            raise KeyboardInterrupt

    def counts(self) -> Counts:
        """What every committed batch added, replaced, skipped, left unchanged and found featureless."""
        done, running = self.finished, self._running
        return Counts(
            done.added + running.added,
            done.replaced + running.replaced,
            len(done.skipped) + len(running.skipped),
            done.featureless + running.featureless,
            done.unchanged + running.unchanged,
            self.pruned,
        )


def reporting_intake(json_output: bool, on_notice: Callable[[str, str], None]) -> Intake:
    """An Intake that reports each failed input as a JSON event on stdout, every one (a
    program reads them), or as a line on stderr, at most MESSAGES_PER_INPUT per input."""
    if json_output:
        return Intake(
            on_problem=lambda where, cause: out(json_line({"event": "failed", "input": where, "cause": cause})),
            on_notice=on_notice,
            every_problem=True,
        )
    return Intake(on_problem=print_problem, on_notice=on_notice)


def run_ingest(
    database: simdb.Database,
    intake: Intake,
    feed: Callable[[Ingest], None],
    *,
    total_bytes: int | None,
    if_new: bool,
    workers: int,
    batch_size: int,
    json_output: bool,
    show_progress: bool,
    threshold: float | None = None,
    dry_run: bool = False,
) -> int:
    """Run ``feed`` against the database with a progress bar, print the summary line, and
    return the exit code: 130 after Ctrl-C, 143 after SIGTERM (the committed batches stay and
    the message says how many documents they added), 2 if any input failed, else 0."""
    started = time.monotonic()
    interrupted = False
    with output.progress_bar(show_progress) as progress, interrupts_in_this_process_only() as ctrl_c:
        task = progress.add_task("adding", total=total_bytes, documents=0)
        ingest = Ingest(
            database,
            intake,
            if_new=if_new,
            threshold=threshold,
            workers=workers,
            batch_size=batch_size,
            json_output=json_output,
            progress=progress,
            task=task,
            stop=ctrl_c,
            dry_run=dry_run,
        )
        try:
            with warnings.catch_warnings():
                # Said once at the end, in the command line's terms (see if_new_reach).
                warnings.simplefilter("ignore", simdb.IfNewReachWarning)
                feed(ingest)
        except KeyboardInterrupt:
            interrupted = True
        except Exception:
            if not ctrl_c.is_set():
                _say_what_was_kept(ingest.counts())
                raise
            interrupted = True  # the interruption, surfacing as a follow-on error
        interrupted = interrupted or ctrl_c.is_set()
    # This run's committed batches, as the database reported each: not the change in the
    # number of documents, which other processes' writes meanwhile are part of.
    # Exact after an interrupt too: one deferred while a batch committed is raised only
    # once the batch was reported (see interrupts_in_this_process_only).
    counts = ingest.counts()
    if interrupted:
        if dry_run:
            err(f"simdb: interrupted by {ctrl_c.by}; nothing was stored (a dry run)")
        else:
            err(
                f"simdb: interrupted; {counts.added:,} documents were added before {ctrl_c.by} "
                "(every committed batch is kept; the batch in progress was not stored)"
            )
    print_summary(intake, json_output, counts, interrupted, time.monotonic() - started, dry_run=dry_run)
    reach = if_new_reach(database, threshold) if if_new else None
    if reach is not None:
        err(f"simdb: note: {reach}")
    if interrupted:
        return interrupted_exit_code()
    return EXIT_USAGE if intake.failed else 0


def if_new_reach(database: simdb.Database, threshold: float | None) -> str | None:
    """What ``--if-new`` could not see (:func:`simdb.threshold.if_new_blind_spot`), in the
    command line's terms, or None.  The library's own IfNewReachWarning says the same in
    its terms; the command line ignores that one.  O(1)."""
    if threshold is None and database.fingerprinter is None:
        return None  # duplicates are "within k bits" then
    threshold = simdb.DEFAULT_THRESHOLD if threshold is None else threshold
    blind = if_new_blind_spot(database.k, threshold, kind_of(database.fingerprinter))
    if blind is None:
        return None
    return (
        f"--if-new compared each document only with stored ones within the index's {database.k} bits, "
        f"where {1 - blind.unseen:.0%} of pairs at similarity {threshold:g} lie, so near-duplicates may have been "
        f"stored (`simdb clusters --mode leaders -t {threshold:g}` groups them, at any threshold; a database "
        f"made with -k {blind.needed_k} would check them all as it adds, reading "
        f"{read_share_words(blind.read_share)} for each one)"
    )


def _say_what_was_kept(counts: Counts) -> None:
    """Before a run stopped by an error (a full disk, say) is reported: how many documents
    its committed batches added, which stay."""
    if counts.added > 0:
        err(
            f"simdb: stopped by the error below; {counts.added:,} documents were added before it "
            "(every committed batch is kept; the batch in progress was not stored)"
        )


def print_summary(
    intake: Intake,
    json_output: bool,
    counts: Counts | None = None,
    interrupted: bool = False,
    seconds: float = 0.0,
    *,
    dry_run: bool = False,
) -> None:
    """The last line of ``add`` and ``import``: what was added, replaced, skipped and failed,
    how many were unchanged (stored already exactly so: not rewritten), and how many
    documents had no features (nothing to fingerprint: stored, but nobody's near-duplicate)."""
    counts = counts or Counts()
    added, replaced, skipped = counts.added, counts.replaced, counts.skipped
    summary = {
        "added": added,
        "replaced": replaced,
        "unchanged": counts.unchanged,
        "pruned": counts.pruned,
        "skipped": skipped,
        "featureless": counts.featureless,
        "failed": intake.failed,
        "decoded_with_replacement": intake.decoded_with_replacement,
        "interrupted": interrupted,
        "seconds": round(seconds, 3),
    }
    if dry_run:
        summary["dry_run"] = True
    if json_output:
        out(json_line({"event": "summary", **summary}))
    else:
        if dry_run:
            line = f"would add {added:,}, replace {replaced:,}, skip {skipped:,}; failed {intake.failed:,}"
        else:
            line = f"added {added:,}, replaced {replaced:,}, skipped {skipped:,}, failed {intake.failed:,}"
        if counts.unchanged:
            line += f"; {counts.unchanged:,} unchanged (already stored as they are)"
        if counts.pruned:
            line += f"; {'would prune' if dry_run else 'pruned'} {counts.pruned:,} whose files are gone"
        if counts.featureless:
            line += f"; {counts.featureless:,} featureless (nothing to fingerprint)"
        if intake.decoded_with_replacement:
            line += f"; {intake.decoded_with_replacement:,} not valid in their encoding"
        out(f"{line} ({seconds:.1f} s)" + ("; dry run: nothing was stored" if dry_run else ""))


def total_bytes(inputs: Iterable[Input]) -> int | None:
    sizes = [item.size for item in inputs]
    # any() has ruled out None, but mypy cannot narrow the list's items through it.
    return None if any(size is None for size in sizes) else sum(sizes)  # type: ignore[arg-type]


def _walked(key: str, prefix: str | None, rules: PathRules) -> bool:
    """Whether the walk of a directory whose keys start with ``prefix`` would have read the
    file keyed ``key`` (None: a file argument, always): below it at most one level unless
    recursive, through no excluded or hidden directory, with a name that --glob, --exclude
    and --hidden let in (see :class:`PathRules`)."""
    if prefix is None:
        return True
    *directories, name = key[len(prefix) :].split(os.sep)
    if directories and not rules.recursive:
        return False
    return not any(rules.excluded(directory) for directory in directories) and rules.wanted(name)
