"""The ``simdb`` command: add, query, pairs, clusters, remove, compact, stats, check, hash,
export, import and demo.

A thin layer: each command parses its arguments, opens the database, calls the library and
prints.  Results go to stdout (``--json`` makes them JSON lines); progress and diagnostics
go to stderr.  Errors are turned into exit codes in one place, :func:`guarded`:

====  =================================================================================
0     success
1     nothing found: a query, pairs or clusters with no result, a remove that found none
      of its keys, or a check that found problems (like grep)
2     bad usage or bad input (including inputs that could not be read during ``add``)
3     a database error (missing, damaged, unwritable)
130   interrupted with Ctrl-C
====  =================================================================================
"""

from __future__ import annotations

import base64
import functools
import math
import os
import signal
import stat
import sys
import tempfile
import threading
import time
import traceback
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager, suppress
from itertools import chain
from pathlib import Path
from typing import IO, TYPE_CHECKING, Annotated, Any, NamedTuple, TypeVar

import typer
from typer.exceptions import TyperException

import simdb
from simdb import AddResult, DatabaseError, InvalidInputError, NotADatabaseError, SimdbError, codec
from simdb.database import DEFAULT_K

from . import _exit_quietly, output
from .output import err, hex_fingerprint, json_line, out
from .sources import (
    BINARY_SNIFF_BYTES,
    DEFAULT_MAX_DOC_BYTES,
    EXPORT_FORMAT_VERSION,
    FINGERPRINTS,
    JSONL,
    TSV_MSGPACK_PREFIX,
    ExportHeader,
    Input,
    Intake,
    Item,
    decode,
    expand_paths,
    export_meta,
    read_documents,
    read_export,
    read_fingerprint_tsv,
    read_jsonl,
    stdin_keys,
    stream_inputs,
)

if TYPE_CHECKING:  # importing simdb.fingerprint is deferred to the commands that need it
    from simdb.fingerprint import Fingerprinter

#: Where the database lives when neither --db nor $SIMDB_PATH says otherwise.
DEFAULT_DB_PATH = "simdb-data"
DEFAULT_BATCH_SIZE = 5_000
#: Characters of text handed to the database and not yet committed, at most (plus one
#: document): a batch of large documents is cut short at this size, so memory follows it,
#: not --batch-size times the largest document.
BATCH_TEXT_CHARS = 256 * 2**20
EXIT_NOTHING_FOUND = 1
EXIT_USAGE = 2
EXIT_DATABASE = 3
EXIT_INTERRUPTED = 130

app = typer.Typer(
    name="simdb",
    help="A persistent database of 64-bit SimHash fingerprints for near-duplicate detection.\n\n"
    "Exit codes: 0 success; 1 nothing found (query, pairs, clusters, remove) or check found problems; "
    "2 bad usage or input; 3 database error; 130 interrupted.",
    add_completion=False,
    pretty_exceptions_enable=False,
    context_settings={"help_option_names": ["-h", "--help"]},
)

# -- options shared by several commands ----------------------------------------------------

DbOption = Annotated[
    str,
    typer.Option(
        "--db",
        envvar="SIMDB_PATH",
        show_envvar=True,
        help=f"Database directory. Defaults to $SIMDB_PATH, then ./{DEFAULT_DB_PATH} in the working directory.",
    ),
]
JsonOption = Annotated[
    bool, typer.Option("--json", help="Print JSON lines on stdout (one object per line) instead of tables.")
]
DebugOption = Annotated[
    bool, typer.Option("--debug", help="On an error, show the full traceback as well as the one-line message.")
]
ProgressOption = Annotated[
    bool, typer.Option("--progress/--no-progress", help="Show a progress bar on stderr (only on a terminal).")
]
WorkersOption = Annotated[
    int | None,
    typer.Option(
        "--workers",
        min=1,
        help="Processes that compute fingerprints. Default: every available core.",
        show_default=False,
    ),
]
BatchOption = Annotated[
    int,
    typer.Option("--batch-size", min=1, help="Documents per write transaction; Ctrl-C keeps every committed batch."),
]
IfNewOption = Annotated[
    bool,
    typer.Option(
        "--if-new",
        help="Skip each document that is a near-duplicate of one already stored (or added earlier in this run), "
        "and report the key it duplicates; one batched probe per batch.",
    ),
]
CreateKOption = Annotated[
    int | None,
    typer.Option(
        "-k",
        min=0,
        help=f"The index's k (largest distance answered exactly), when the database is created. Default {DEFAULT_K}.",
        show_default=False,
    ),
]
BlocksOption = Annotated[
    int | None,
    typer.Option(
        "--blocks",
        min=1,
        help="Blocks of the permutation plan (more than k), when the database is created.",
        show_default=False,
    ),
]
#: Said of a fingerprint setting by ``add`` (a database keeps the settings it was created with), not by ``hash``.
FIXED = " Fixed at the first text added."
_FEATURES_HELP = "Fingerprint features: word-shingle (default), word or char."
_NGRAM_HELP = "Tokens per feature (default 3 for word-shingle, 5 for char)."
_STOPWORDS_HELP = "Drop this language's stop words before forming features (english); by default every word counts."
_KIND_HELP = (
    "Fingerprint kind: minhash (the default: one-bit minwise hashing of the feature set, with a similarity sketch) "
    "or simhash."
)
_WEIGHTS_HELP = (
    "SimHash feature weights: tf (every occurrence counts), binary (each distinct feature once, the default) "
    "or log (1 + log of the count); minhash always uses binary."
)
FeaturesOption = Annotated[str | None, typer.Option("--features", help=_FEATURES_HELP + FIXED, show_default=False)]
NgramOption = Annotated[int | None, typer.Option("--ngram", min=1, help=_NGRAM_HELP + FIXED, show_default=False)]
StopwordsOption = Annotated[str | None, typer.Option("--stopwords", help=_STOPWORDS_HELP + FIXED, show_default=False)]
KindOption = Annotated[str | None, typer.Option("--kind", help=_KIND_HELP + FIXED, show_default=False)]
WeightsOption = Annotated[str | None, typer.Option("--weights", help=_WEIGHTS_HELP + FIXED, show_default=False)]
HashFeaturesOption = Annotated[str | None, typer.Option("--features", help=_FEATURES_HELP, show_default=False)]
HashNgramOption = Annotated[int | None, typer.Option("--ngram", min=1, help=_NGRAM_HELP, show_default=False)]
HashStopwordsOption = Annotated[str | None, typer.Option("--stopwords", help=_STOPWORDS_HELP, show_default=False)]
HashKindOption = Annotated[str | None, typer.Option("--kind", help=_KIND_HELP, show_default=False)]
HashWeightsOption = Annotated[str | None, typer.Option("--weights", help=_WEIGHTS_HELP, show_default=False)]
QueryKOption = Annotated[
    int | None,
    typer.Option(
        "-k",
        min=0,
        help="Largest Hamming distance to report, at most the index's k (the default without --threshold).",
        show_default=False,
    ),
]
#: pairs and clusters run in memory, so any k is answered exactly.
AllPairsKOption = Annotated[
    int | None,
    typer.Option(
        "-k",
        min=0,
        max=64,
        help="Largest Hamming distance (0-64, any: pairs are found in memory, not limited by the index's k). "
        "Alone, pairs within k bits are reported whatever their similarity; "
        "with --threshold, it is the candidate radius.",
        show_default=False,
    ),
]
ThresholdOption = Annotated[
    float | None,
    typer.Option(
        "--threshold",
        "-t",
        help=f"Smallest similarity (0 < t <= 1) of a near-duplicate: the sketch estimate of the feature sets' Jaccard "
        f"similarity where stored, else the fingerprint's estimate. "
        f"Default {simdb.DEFAULT_THRESHOLD} unless -k is given.",
        show_default=False,
    ),
]
IncludeFeaturelessOption = Annotated[
    bool,
    typer.Option(
        "--include-featureless",
        help="Also pair documents with no features (empty, or no words): by default they are nobody's near-duplicates.",
    ),
]

F = TypeVar("F", bound=Callable[..., Any])


# -- errors, in one place --------------------------------------------------------------------


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


# -- helpers -------------------------------------------------------------------------------------


def available_cores() -> int:
    """CPU cores this process may run on."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


def open_existing(path: str, *, readonly: bool = True) -> simdb.Database:
    """Open a database that must already exist, with a message that says how to make one."""
    if not os.path.exists(path):
        raise NotADatabaseError(
            f"no database at {path}", "add documents with `simdb add`, or point --db / $SIMDB_PATH at one"
        )
    return simdb.open(path, readonly=readonly, create=False)


def make_fingerprinter(
    features: str | None,
    ngram: int | None,
    stopwords: str | None,
    bits: int = 64,
    *,
    kind: str | None = None,
    weights: str | None = None,
    always: bool = False,
) -> Fingerprinter | None:
    """Fingerprint settings from the command line; None (use the database's) if none given.
    Settings not given take the library's defaults (which depend on ``kind``)."""
    given = {"ngram": ngram, "stopwords": stopwords, "kind": kind, "weights": weights}
    if features is None and bits == 64 and not always and all(value is None for value in given.values()):
        return None
    from simdb.fingerprint import Fingerprinter

    chosen: dict[str, Any] = {name: value for name, value in given.items() if value is not None}
    return Fingerprinter(features=features or "word-shingle", bits=bits, **chosen)


def checked_threshold(threshold: float | None) -> float | None:
    """``threshold`` if the library takes it as a similarity (0 < t <= 1), else a usage
    error naming --threshold, before any database is opened or created."""
    from simdb.threshold import check_threshold

    if threshold is not None:
        try:
            check_threshold(threshold)
        except InvalidInputError:
            raise usage_error(
                f"--threshold {threshold} is not a similarity: "
                f"give a number above 0 and at most 1, such as {simdb.DEFAULT_THRESHOLD}"
            ) from None
    return threshold


def read_argument_text(text: str) -> str:
    """``text``, or stdin's text when it is "-" (read as :func:`read_text_file` does)."""
    return read_text_file("-") if text == "-" else text


def read_text_file(path: str) -> str:
    """A whole text file for ``query --file`` and ``hash --file`` ("-" is stdin); invalid
    UTF-8 is replaced with a notice, a binary or unreadable file is a usage error, whether
    it is named or piped in."""
    name = "<stdin>" if path == "-" else path
    try:
        if path == "-":
            raw = getattr(sys.stdin, "buffer", None)
            data = raw.read() if raw is not None else sys.stdin.read().encode()
        else:
            data = Path(path).read_bytes()
    except OSError as error:
        raise simdb.InvalidInputError(f"cannot read {name}: {error.strerror or error}") from None
    if b"\0" in data[:BINARY_SNIFF_BYTES]:
        raise simdb.InvalidInputError(f"{name} is a binary file (contains NUL bytes), not text")
    return decode(data, name, Intake(on_problem=_print_problem, on_notice=_print_notice))


def _print_problem(where: str, cause: str) -> None:
    err(f"simdb: {where}: {cause}")


def _print_notice(where: str, message: str) -> None:
    err(f"simdb: {where}: {message}")


@contextmanager
def interrupts_in_this_process_only() -> Iterator[threading.Event]:
    """Let Ctrl-C raise KeyboardInterrupt in this process but not in the fingerprinting
    worker processes forked meanwhile.  The workers ignore SIGINT once their initialiser
    has run; until then they carry this inherited handler, which does nothing when it finds
    itself in another process, so no worker prints a traceback.

    Yields an event that is set once Ctrl-C came: the KeyboardInterrupt can surface as
    another error (a process pool interrupted while starting fails to shut down), and the
    caller should still treat that as the interruption.  Off the main thread, signals
    cannot be handled, and the event is never set."""
    received = threading.Event()
    if threading.current_thread() is not threading.main_thread():
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


#: How the database is fed: ``add(items, on_batch)`` stores ``(key, value, meta)`` items.
Adder = Callable[[Iterable[tuple[str, Any, Any]], Callable[[AddResult], None]], AddResult]


class Counts(NamedTuple):
    """The totals of an ``add`` or ``import`` run, for its summary line."""

    added: int = 0
    replaced: int = 0
    skipped: int = 0
    featureless: int = 0


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
    ) -> None:
        self.database = database
        self.intake = intake
        self.if_new = if_new
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
        self._feed(items, self._add_texts, texts=True)

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

    def fingerprints(self, items: Iterable[Item]) -> None:
        """Store ``(key, fingerprint, meta, where)`` items."""
        self._feed(items, self._add_fingerprints, texts=False)

    def _add_fingerprints(
        self, rows: Iterable[tuple[str, Any, Any]], on_batch: Callable[[AddResult], None], batch_size: int | None = None
    ) -> AddResult:
        return self.database.add_many(
            rows, batch_size=batch_size or self.batch_size, on_batch=on_batch, **self._if_new_options
        )

    def _feed(self, items: Iterable[Item], add: Adder, *, texts: bool) -> None:
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
            # Texts are retried as texts, so each keeps its sketch (a fingerprint alone has none):
            # the refused items are fingerprinted again, O(log batch size) times each at most.
            self._store_in_halves(refused, self._add_texts if texts else self._add_fingerprints)

    def _store_in_halves(self, items: list[Item], add: Callable[..., AddResult]) -> None:
        # One transaction for all of them, so a refusal means none of them was stored.
        try:
            self._call(lambda on_batch: add([item[:3] for item in items], on_batch, batch_size=len(items)))
        except InvalidInputError as error:
            if len(items) == 1:
                self.intake.fail(items[0][3], cli_message(error))
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
                    f"skipped {skip.key}: near-duplicate of {skip.duplicate_of} "
                    f"(similarity {skip.similarity:.3f}, distance {skip.distance})"
                )
        self._skips_shown = len(totals.skipped)
        self._running = totals
        counts = self.counts()
        self.progress.update(
            self.task, completed=self.intake.bytes_done, documents=counts.added + counts.replaced + counts.skipped
        )

    def counts(self) -> Counts:
        """What every committed batch added, replaced, skipped and found featureless."""
        done, running = self.finished, self._running
        return Counts(
            done.added + running.added,
            done.replaced + running.replaced,
            len(done.skipped) + len(running.skipped),
            done.featureless + running.featureless,
        )


def problem_printer(json_output: bool) -> Callable[[str, str], None]:
    """How a failed input is reported: a JSON line on stdout, or a line on stderr."""
    if json_output:
        return lambda where, cause: out(json_line({"event": "failed", "input": where, "cause": cause}))
    return _print_problem


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
) -> int:
    """Run ``feed`` against the database with a progress bar, print the summary line, and
    return the exit code: 130 after Ctrl-C (the committed batches stay and the message says
    how many documents they added), 2 if any input failed, else 0."""
    started = time.monotonic()
    documents_before = len(database)
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
        )
        try:
            feed(ingest)
        except KeyboardInterrupt:
            interrupted = True
        except Exception:
            if not ctrl_c.is_set():
                raise
            interrupted = True  # the interruption, surfacing as a follow-on error
        interrupted = interrupted or ctrl_c.is_set()
    counts = ingest.counts()
    if interrupted:
        # Counted from the database itself, so a batch that committed just as Ctrl-C came
        # is counted too.
        counts = counts._replace(added=len(database) - documents_before)
        err(
            f"simdb: interrupted; {counts.added:,} documents were added before Ctrl-C "
            "(every committed batch is kept; the batch in progress was not stored)"
        )
    print_summary(intake, json_output, counts, interrupted, time.monotonic() - started)
    if interrupted:
        return EXIT_INTERRUPTED
    return EXIT_USAGE if intake.failed else 0


def print_summary(
    intake: Intake, json_output: bool, counts: Counts | None = None, interrupted: bool = False, seconds: float = 0.0
) -> None:
    """The last line of ``add`` and ``import``: what was added, replaced, skipped and failed,
    and how many documents had no features (empty, or no words: stored, but nobody's
    near-duplicate)."""
    counts = counts or Counts()
    added, replaced, skipped = counts.added, counts.replaced, counts.skipped
    summary = {
        "added": added,
        "replaced": replaced,
        "skipped": skipped,
        "featureless": counts.featureless,
        "failed": intake.failed,
        "decoded_with_replacement": intake.decoded_with_replacement,
        "interrupted": interrupted,
        "seconds": round(seconds, 3),
    }
    if json_output:
        out(json_line({"event": "summary", **summary}))
    else:
        line = f"added {added:,}, replaced {replaced:,}, skipped {skipped:,}, failed {intake.failed:,}"
        if counts.featureless:
            line += f"; {counts.featureless:,} featureless (no words)"
        if intake.decoded_with_replacement:
            line += f"; {intake.decoded_with_replacement:,} decoded with replacement"
        out(f"{line} ({seconds:.1f} s)")


def _total(inputs: Iterable[Input]) -> int | None:
    sizes = [item.size for item in inputs]
    # any() has ruled out None, but mypy cannot narrow the list's items through it.
    return None if any(size is None for size in sizes) else sum(sizes)  # type: ignore[arg-type]


# -- commands ------------------------------------------------------------------------------------


@app.command()
@guarded
@output.keep_going_if_stdout_closes()  # storing the documents is the point, not the output
def add(
    paths: Annotated[
        list[str] | None,
        typer.Argument(
            help="Text files or directories to add; '-' reads more paths from stdin, one per line. "
            "WARC/WET archives (.warc, .wet, .warc.wet.gz, ...) add one document per text record, keyed by WARC-Target-URI.",
            show_default=False,
        ),
    ] = None,
    recursive: Annotated[
        bool, typer.Option("--recursive", "-r", help="Also add the files in subdirectories of the directories given.")
    ] = False,
    glob: Annotated[
        str | None,
        typer.Option(
            "--glob",
            help="In directories, add only files whose name matches this pattern, e.g. '*.txt'.",
            show_default=False,
        ),
    ] = None,
    jsonl: Annotated[
        list[str] | None,
        typer.Option(
            "--jsonl",
            help="A JSON-lines file ('-' for stdin, .gz allowed) with one document per line; repeatable.",
            show_default=False,
        ),
    ] = None,
    id_field: Annotated[
        str, typer.Option("--id-field", help="JSONL field holding the key (lines without it get the key FILE:LINE).")
    ] = "id",
    text_field: Annotated[
        str, typer.Option("--text-field", help="JSONL field holding the text; other fields are stored as meta.")
    ] = "text",
    fingerprints: Annotated[
        list[str] | None,
        typer.Option(
            "--fingerprints",
            help="A TSV file of KEY<TAB>FINGERPRINT (hex or decimal), optionally <TAB>META-JSON; repeatable.",
            show_default=False,
        ),
    ] = None,
    if_new: IfNewOption = False,
    threshold: Annotated[
        float | None,
        typer.Option(
            "--threshold",
            "-t",
            help=f"With --if-new: the smallest similarity (0 < t <= 1) at which a document counts as a near-duplicate. "
            f"Default {simdb.DEFAULT_THRESHOLD} (where sketches are stored; else within the index's k bits).",
            show_default=False,
        ),
    ] = None,
    workers: WorkersOption = None,
    batch_size: BatchOption = DEFAULT_BATCH_SIZE,
    max_doc_bytes: Annotated[
        int,
        typer.Option(
            "--max-doc-bytes",
            min=1,
            help="Largest document read: a text file, a JSONL or TSV line, or a WARC record's payload "
            "(after decompression). Larger ones are reported with their size and skipped, "
            "without being read whole.",
        ),
    ] = DEFAULT_MAX_DOC_BYTES,
    k: CreateKOption = None,
    blocks: BlocksOption = None,
    features: FeaturesOption = None,
    ngram: NgramOption = None,
    stopwords: StopwordsOption = None,
    kind: KindOption = None,
    weights: WeightsOption = None,
    progress: ProgressOption = True,
    db: DbOption = DEFAULT_DB_PATH,
    json_output: JsonOption = False,
    debug: DebugOption = False,
) -> None:
    """Add documents: files, directories, JSONL, WARC/WET archives or precomputed fingerprints.

    A document's key is its file path (as given or found), its JSONL id, or its
    WARC-Target-URI; adding an existing key replaces it.  Inputs are read in this order:
    --fingerprints files, PATH arguments, --jsonl files.  An unreadable or binary file is
    reported once and counted as failed (exit code 2 at the end); text that is not valid
    UTF-8 is decoded with replacement and counted, and so is a document over
    --max-doc-bytes.  Ctrl-C stops cleanly: every committed batch stays.  Ends with a
    summary line: added, replaced, skipped, failed, and how many documents had no words
    (featureless: stored, but never anyone's near-duplicate).
    """
    if not (paths or jsonl or fingerprints):
        raise usage_error(
            "nothing to add: give files or directories, --jsonl FILE or --fingerprints FILE (see simdb add --help)"
        )
    if checked_threshold(threshold) is not None and not if_new:
        raise usage_error("--threshold goes with --if-new (add stores every document otherwise)")
    intake = Intake(on_problem=problem_printer(json_output), on_notice=_print_notice)
    fingerprint_inputs = stream_inputs(fingerprints or [], FINGERPRINTS, intake)
    path_inputs = expand_paths(paths or [], intake, recursive=recursive, pattern=glob, skip_directory=db)
    jsonl_inputs = stream_inputs(jsonl or [], JSONL, intake)
    inputs = fingerprint_inputs + path_inputs + jsonl_inputs
    if not inputs:  # nothing to read: don't create a database for a typo
        if not intake.failed:  # else the missing inputs were reported
            matching = f" matching --glob {glob!r}" if glob else ""
            deeper = "" if recursive else " (-r also reads subdirectories)"
            err(f"simdb: nothing to add: no files{matching} in {', '.join(paths or [])}{deeper}")
        print_summary(intake, json_output)
        raise typer.Exit(EXIT_USAGE)
    fingerprinter = make_fingerprinter(features, ngram, stopwords, kind=kind, weights=weights)

    def feed(ingest: Ingest) -> None:
        if fingerprint_inputs:
            ingest.fingerprints(read_fingerprint_tsv(fingerprint_inputs, intake, max_bytes=max_doc_bytes))
        if path_inputs or jsonl_inputs:
            documents = read_documents(path_inputs, intake, max_doc_bytes)
            lines = read_jsonl(jsonl_inputs, intake, id_field=id_field, text_field=text_field, max_bytes=max_doc_bytes)
            ingest.texts(chain(documents, lines))

    with simdb.open(db, k=k, blocks=blocks, fingerprinter=fingerprinter) as database:
        code = run_ingest(
            database,
            intake,
            feed,
            total_bytes=_total(inputs),
            if_new=if_new,
            threshold=threshold,
            workers=workers or available_cores(),
            batch_size=batch_size,
            json_output=json_output,
            show_progress=progress,
        )
    if code:
        raise typer.Exit(code)


@app.command()
@guarded
def query(
    text: Annotated[
        str | None, typer.Argument(help="The text to look for; '-' reads it from stdin.", show_default=False)
    ] = None,
    file: Annotated[
        str | None,
        typer.Option("--file", "-f", help="Look for the text of this file ('-' for stdin).", show_default=False),
    ] = None,
    fingerprint: Annotated[
        str | None,
        typer.Option(
            "--fingerprint", help="Look for this fingerprint (hex, e.g. 0x1f..., or decimal).", show_default=False
        ),
    ] = None,
    k: QueryKOption = None,
    threshold: Annotated[
        float | None,
        typer.Option(
            "--threshold",
            "-t",
            help="Report only documents at least this similar (0 < t <= 1); candidates come from the index, within "
            "the smaller of its k and the distance the threshold calls for. Without it, every document within k bits.",
            show_default=False,
        ),
    ] = None,
    limit: Annotated[
        int | None,
        typer.Option("--limit", min=0, help="Show at most this many matches (the nearest).", show_default=False),
    ] = None,
    db: DbOption = DEFAULT_DB_PATH,
    json_output: JsonOption = False,
    debug: DebugOption = False,
) -> None:
    """Find the stored documents near a text, a file or a fingerprint, using the index.

    Prints similarity, distance, fingerprint and key, nearest first.  The similarity is the
    sketch estimate of the two texts' Jaccard similarity where both have sketches, else the
    fingerprints' estimate from their distance.  Exits 1 when nothing matches, like grep.
    """
    given = [value for value in (text, file, fingerprint) if value is not None]
    if len(given) != 1:
        raise usage_error("give exactly one of TEXT, --file FILE or --fingerprint HEX")
    checked_threshold(threshold)
    with open_existing(db) as database:
        if fingerprint is not None:
            matches = database.query(simdb.parse_fingerprint(fingerprint), k, limit=limit, threshold=threshold)
        else:
            query_text = read_text_file(file) if file is not None else read_argument_text(text or "")
            matches = database.query(k=k, text=query_text, limit=limit, threshold=threshold)
        distance_limit = database.k if k is None else k
    if json_output:
        for match in matches:
            fields = {
                "key": match.key,
                "fingerprint": hex_fingerprint(match.fingerprint),
                "similarity": match.similarity,
                "distance": match.distance,
            }
            try:
                line = json_line({**fields, "meta": match.meta})
            except TypeError:
                # A stored meta JSON cannot carry (a msgpack Timestamp written before such
                # meta was refused): printed as an export does, base64 msgpack.
                encoded = base64.b64encode(codec.pack_stored(match.meta)).decode("ascii")
                line = json_line({**fields, "meta_msgpack": encoded})
            out(line)
    elif matches:
        rows = (
            [f"{match.similarity:.3f}", match.distance, hex_fingerprint(match.fingerprint), match.key]
            for match in matches
        )
        output.table(["similarity", "distance", "fingerprint", "key"], rows, right_aligned=(0, 1))
    if not matches:
        err(f"simdb: no document {nearness(threshold, k if threshold is not None else distance_limit)}")
        raise typer.Exit(EXIT_NOTHING_FOUND)


def nearness(threshold: float | None, k: int | None) -> str:
    """How near a match had to be, for "nothing found" messages."""
    return (
        f"within {k} bits"
        if threshold is None
        else f"with similarity >= {threshold:g}" + (f" within {k} bits" if k is not None else "")
    )


@app.command()
@guarded
def pairs(
    k: AllPairsKOption = None,
    threshold: ThresholdOption = None,
    include_featureless: IncludeFeaturelessOption = False,
    histogram: Annotated[
        bool,
        typer.Option(
            "--histogram",
            help="Instead of the pairs, print a bar chart of how many pairs there are per similarity (0.05 steps, "
            "from the threshold up), or per distance 0..k with -k alone.",
        ),
    ] = False,
    parquet: Annotated[
        str | None,
        typer.Option(
            "--parquet",
            help="Run the batch job on Dask over these (key, fingerprint) Parquet files (a path or glob, e.g. from export --format parquet) instead of a database; needs --out.",
        ),
    ] = None,
    scheduler: Annotated[
        str | None,
        typer.Option(
            "--scheduler",
            help="With --parquet: a Dask scheduler ADDRESS, or 'local' (the default) to start a local multi-process cluster for the job.",
        ),
    ] = None,
    workers: Annotated[
        int | None,
        typer.Option(
            "--workers", min=1, help="With --parquet and a local cluster: worker processes (default: one per core)."
        ),
    ] = None,
    out_dir: Annotated[
        str | None,
        typer.Option(
            "--out", help="With --parquet: the directory to write the pairs to, as Parquet (key_a, key_b, distance)."
        ),
    ] = None,
    db: DbOption = DEFAULT_DB_PATH,
    json_output: JsonOption = False,
    debug: DebugOption = False,
) -> None:
    """Print every near-duplicate pair: two keys, their similarity and their distance.

    By default a pair is two documents with similarity >= the threshold (-t, default
    0.9); -k alone reports every pair within k bits instead.  Runs in memory at any k,
    not limited by the index.  Documents without features never pair unless
    --include-featureless.  Each unordered pair is printed once, the first-added key
    first; pairs stream out as they are found, not sorted.  Exits 1 when there are none.
    With --parquet, runs the exact bit-distance search as a batch job on Dask and writes
    the pairs to --out.
    """
    checked_threshold(threshold)
    if parquet is not None:
        if histogram or threshold is not None or include_featureless:
            raise usage_error(
                "--histogram, --threshold and --include-featureless do not go with --parquet: "
                "the batch job writes the pairs within -k bits to --out"
            )
        run_distributed_pairs(parquet, out_dir, k, scheduler, workers, json_output)
        return
    if out_dir is not None or scheduler is not None or workers is not None:
        raise usage_error("--out, --scheduler and --workers go with --parquet")
    limit = effective_threshold(threshold, k)
    with open_existing(db) as database:
        if histogram:
            total = print_pair_histogram(database, k, limit, include_featureless, json_output)
        else:
            found = database.pairs(k, threshold=threshold, include_featureless=include_featureless)
            first = next(found, None)
            total = 0 if first is None else 1
            rest = chain([first], found) if first is not None else iter(())
            if json_output:
                for pair in rest:
                    out(
                        json_line(
                            {
                                "key_a": pair.key_a,
                                "key_b": pair.key_b,
                                "similarity": pair.similarity,
                                "distance": pair.distance,
                            }
                        )
                    )
            elif first is not None:
                rows = ([f"{pair.similarity:.3f}", pair.distance, pair.key_a, pair.key_b] for pair in rest)
                total = output.table(["similarity", "distance", "key_a", "key_b"], rows, right_aligned=(0, 1))
    if not total:
        err(f"simdb: no pairs {nearness(limit, k)}")
        raise typer.Exit(EXIT_NOTHING_FOUND)


def effective_threshold(threshold: float | None, k: int | None) -> float | None:
    """The similarity that pairs and clusters require: the one given, the default when
    neither it nor k is given, and none (bit distance alone) for -k alone."""
    if threshold is None and k is None:
        return float(simdb.DEFAULT_THRESHOLD)
    return threshold


def similarity_buckets(threshold: float) -> list[float]:
    """The similarity histogram's buckets (0.05 wide, named by their lower end, as
    :meth:`simdb.Database.pair_histogram` names them), from the one holding ``threshold`` up to 1.0."""
    lowest = math.floor(threshold * 20 + 1e-9)  # the epsilon keeps 0.95 in its own bucket
    return [round(step / 20, 2) for step in range(lowest, 21)]


def print_pair_histogram(
    database: simdb.Database, k: int | None, threshold: float | None, include_featureless: bool, json_output: bool
) -> int:
    """Print how many pairs there are per similarity bucket (with a threshold) or per
    distance 0..k (bit mode, -k alone), as a chart or JSON lines; return the number of
    pairs.  Cost as pairs, memory O(buckets)."""
    if threshold is None:
        per_distance = database.pair_histogram(k, by="distance", include_featureless=include_featureless)
        counts = [per_distance[distance] for distance in sorted(per_distance)]
        if json_output:
            for distance, count in enumerate(counts):
                out(json_line({"distance": distance, "pairs": count}))
        else:
            output.histogram("pairs", counts)
        return sum(counts)
    per_bucket = database.pair_histogram(
        k, threshold=threshold, by="similarity", include_featureless=include_featureless
    )
    buckets = similarity_buckets(threshold)
    counts = [per_bucket.get(bucket, 0) for bucket in buckets]
    if json_output:
        for bucket, count in zip(buckets, counts):
            out(json_line({"similarity": bucket, "pairs": count}))
    else:
        output.histogram("pairs", counts, first_column="similarity", labels=[f"{bucket:.2f}" for bucket in buckets])
    return sum(per_bucket.values())


def run_distributed_pairs(
    parquet: str, out_dir: str | None, k: int | None, scheduler: str | None, workers: int | None, json_output: bool
) -> None:
    """The --parquet form of pairs: the Dask batch job, reporting a summary line."""
    if out_dir is None:
        raise usage_error("--parquet needs --out DIR for the pairs it writes")
    import logging

    from simdb.distributed import run_pairs_job

    logging.getLogger("distributed").setLevel(logging.ERROR)  # its shuffle notices are not ours to show
    try:
        summary = run_pairs_job(parquet, out_dir, k=k, scheduler=scheduler, workers=workers)
    except FileNotFoundError as error:
        if error.filename is not None:  # a named path, such as --out's: the usual message names it
            raise
        raise InvalidInputError(f"--parquet {parquet}: no such file, or nothing matches the pattern") from None
    except Exception as error:
        if type(error).__module__.partition(".")[0] != "pyarrow":
            raise
        # pyarrow's errors (ArrowInvalid: "Parquet magic bytes not found", ...) mean the input.
        reason = (str(error).splitlines() or [type(error).__name__])[0]
        raise InvalidInputError(f"--parquet {parquet}: cannot read it as Parquet ({reason})") from None
    if json_output:
        out(json_line({"event": "summary", **summary}))
    else:
        err(
            f"{summary['pairs']:,} pairs within {summary['k']} bits among {summary['rows']:,} fingerprints, "
            f"written to {summary['out_dir']} ({summary['workers']} workers, {summary['seconds']:.1f} s)"
        )
    if not summary["pairs"]:
        raise typer.Exit(EXIT_NOTHING_FOUND)


@app.command()
@guarded
def clusters(
    k: AllPairsKOption = None,
    threshold: ThresholdOption = None,
    include_featureless: IncludeFeaturelessOption = False,
    histogram: Annotated[
        bool,
        typer.Option(
            "--histogram",
            help="Instead of the clusters, print how many clusters and clustered documents each threshold gives, from "
            "--threshold up to 1.0 in 0.05 steps (or each k=d for d in 0..k with -k alone), as a bar chart.",
        ),
    ] = False,
    singletons: Annotated[
        bool, typer.Option("--singletons", help="Also print documents with no near-duplicate, as clusters of one.")
    ] = False,
    db: DbOption = DEFAULT_DB_PATH,
    json_output: JsonOption = False,
    debug: DebugOption = False,
) -> None:
    """Print groups of near-duplicates: documents connected by chains of pairs.

    Pairs are as simdb pairs finds them: similarity >= the threshold (-t, default 0.9),
    or within k bits with -k alone; in memory, at any k.  Each cluster shows its
    representative (the first-added member) and its other members; clusters come in order
    of their representatives.  Exits 1 when there are none.
    """
    checked_threshold(threshold)
    limit = effective_threshold(threshold, k)
    with open_existing(db) as database:

        def found(at_k: int | None, at_threshold: float | None) -> Iterator[list[str]]:
            return database.clusters(
                at_k, threshold=at_threshold, singletons=singletons, include_featureless=include_featureless
            )

        if histogram:
            if limit is None:  # -k alone: one row per distance
                assert k is not None
                levels: list[tuple[int | None, float | None]] = [(distance, None) for distance in range(k + 1)]
                names: list[Any] = list(range(k + 1))
                first_column = "k"
            else:  # one row per threshold, strictest last
                thresholds = [limit] + [bucket for bucket in similarity_buckets(limit) if bucket > limit]
                levels = [(k, level) for level in thresholds]
                names = [round(level, 4) for level in thresholds]
                first_column = "threshold"
            groups, documents = [], []
            for level in levels:  # one in-memory clustering each, counted as it streams
                sizes = [len(members) for members in found(*level)]
                groups.append(len(sizes))
                documents.append(sum(sizes))
            total = groups[0] if limit is not None else groups[-1]
            if json_output:
                for name, group_count, document_count in zip(names, groups, documents):
                    out(json_line({first_column: name, "clusters": group_count, "documents": document_count}))
            else:
                labels = [f"{name:.2f}" if limit is not None else str(name) for name in names]
                output.histogram(
                    "documents", documents, [("clusters", groups)], first_column=first_column, labels=labels
                )
        else:
            total = 0
            for number, members in enumerate(found(k, threshold), 1):
                total = number
                if json_output:
                    out(
                        json_line(
                            {"cluster": number, "representative": members[0], "size": len(members), "members": members}
                        )
                    )
                else:
                    out(f"cluster {number}: {len(members)} documents, representative {members[0]}")
                    for member in members[1:]:
                        out(f"    {member}")
    if not total:
        err(f"simdb: no clusters {nearness(limit, k)}")
        raise typer.Exit(EXIT_NOTHING_FOUND)


@app.command()
@guarded
def remove(
    keys: Annotated[
        list[str],
        typer.Argument(
            help="Keys of the documents to remove; '-' reads keys from stdin, one per line.", show_default=False
        ),
    ],
    db: DbOption = DEFAULT_DB_PATH,
    json_output: JsonOption = False,
    debug: DebugOption = False,
) -> None:
    """Remove documents by key.

    Keys that are not stored are counted, not errors; exits 1 if none of them was found.
    A line of stdin that is not UTF-8 is reported with its number and skipped (exit 2).
    """
    intake = Intake(on_problem=problem_printer(json_output), on_notice=_print_notice)
    wanted: list[str] = []
    for key in keys:
        wanted.extend(stdin_keys(intake) if key == "-" else [key])
    with open_existing(db, readonly=False) as database:
        removed = database.remove_many(wanted)
    not_found = len(set(wanted)) - removed
    if json_output:
        failures = {"failed": intake.failed} if intake.failed else {}
        out(json_line({"removed": removed, "not_found": not_found, **failures}))
    else:
        failed = f"; {intake.failed:,} lines of stdin were not UTF-8" if intake.failed else ""
        out(f"removed {removed:,} documents" + (f"; {not_found:,} keys were not stored" if not_found else "") + failed)
    if intake.failed:
        raise typer.Exit(EXIT_USAGE)
    if wanted and not removed:
        raise typer.Exit(EXIT_NOTHING_FOUND)


@app.command()
@guarded
def compact(db: DbOption = DEFAULT_DB_PATH, json_output: JsonOption = False, debug: DebugOption = False) -> None:
    """Shrink the database file and report its size before and after.

    Rewrites the database without the space left by removed and replaced documents; safe
    while other processes use it.
    """
    with open_existing(db, readonly=False) as database:
        result = database.compact()
    if json_output:
        out(json_line({"bytes_before": result.bytes_before, "bytes_after": result.bytes_after}))
    else:
        saved = result.bytes_before - result.bytes_after
        share = f" ({saved / result.bytes_before:.0%} smaller)" if result.bytes_before and saved > 0 else ""
        out(
            f"compacted {db}: {output.human_bytes(result.bytes_before)} -> {output.human_bytes(result.bytes_after)}{share}"
        )


def _settings_summary(settings: dict[str, Any] | None) -> str:
    if settings is None:
        return "none yet (set by the first text added)"
    parts = [
        f"{settings.get('kind', 'simhash')}",
        f"{settings.get('features')}",
        f"ngram {settings.get('ngram')}",
        f"{settings.get('bits')} bits",
        f"{settings.get('weights')} weights",
    ]
    if settings.get("stopwords"):
        parts.append(f"stopwords {settings['stopwords']}")
    if settings.get("idf"):
        parts.append("IDF table")
    return ", ".join(parts)


@app.command()
@guarded
def stats(db: DbOption = DEFAULT_DB_PATH, json_output: JsonOption = False, debug: DebugOption = False) -> None:
    """Show documents, tables, leading bits, expected candidates per probe, size and settings."""
    with open_existing(db) as database:
        info = database.stats()
    if json_output:
        out(json_line(info))
        return
    per_document = info.get("bytes_per_document")
    rows = [
        ("path", info["path"]),
        ("documents", f"{info['documents']:,}"),
        ("k", info["k"]),
        ("blocks", f"{info['blocks']} (widths {', '.join(map(str, info['block_widths']))})"),
        ("tables", info["tables"]),
        ("leading bits", ", ".join(map(str, info["leading_bits"]))),
        ("expected candidates per probe", f"{info['expected_candidates_per_probe']:.3g}"),
        (
            "size on disk",
            output.human_bytes(info["size_bytes"])
            + (f" ({per_document:,.0f} bytes per document)" if per_document else ""),
        ),
        ("fingerprint settings", _settings_summary(info.get("fingerprinter"))),
        (
            "sketches",
            f"{info.get('sketch_count', 0):,} stored"
            if info.get("sketches")
            else "none (similarity from the fingerprints)",
        ),
        ("format version", info["format_version"]),
    ]
    output.table(["statistic", "value"], rows)


@app.command()
@guarded
def check(db: DbOption = DEFAULT_DB_PATH, json_output: JsonOption = False, debug: DebugOption = False) -> None:
    """Verify the database's consistency; exits 1 and lists the problems if anything is wrong.

    Checks that every document is in every table exactly once, that nothing else is there,
    and that keys and documents agree.
    """
    with open_existing(db) as database:
        report = database.check()
    if json_output:
        out(
            json_line(
                {
                    "ok": bool(report),
                    "documents": report.documents,
                    "table_entries": report.table_entries,
                    "problems": report.problems,
                }
            )
        )
    elif report:
        out(f"ok: {report.documents:,} documents, {report.table_entries:,} table entries, no problems")
    else:
        for problem in report.problems:
            out(f"problem: {problem}")
        out(
            f"{len(report.problems)} problems in {report.documents:,} documents and {report.table_entries:,} table entries"
        )
    if not report:
        raise typer.Exit(EXIT_NOTHING_FOUND)


@app.command("hash")
@guarded
def hash_command(
    text: Annotated[
        str | None, typer.Argument(help="The text to fingerprint; '-' reads it from stdin.", show_default=False)
    ] = None,
    file: Annotated[
        list[str] | None,
        typer.Option(
            "--file", "-f", help="Fingerprint this file's text instead ('-' for stdin); repeatable.", show_default=False
        ),
    ] = None,
    bits: Annotated[int, typer.Option("--bits", help="Fingerprint width: 32, 64 or 128.")] = 64,
    binary: Annotated[
        bool, typer.Option("--binary", help="Print the fingerprint as a string of 0s and 1s instead of hex.")
    ] = False,
    features: HashFeaturesOption = None,
    ngram: HashNgramOption = None,
    stopwords: HashStopwordsOption = None,
    kind: HashKindOption = None,
    weights: HashWeightsOption = None,
    json_output: JsonOption = False,
    debug: DebugOption = False,
) -> None:
    """Print the fingerprint of a text or of files, without a database.

    Uses the default settings (minhash) unless --kind, --weights, --features, --ngram or
    --stopwords say otherwise, and says on stderr which settings it used (--json puts them
    in each line); a database created with other settings fingerprints differently (see
    simdb stats).
    """
    if (text is None) == (not file):
        raise usage_error("give either TEXT or --file FILE")
    fingerprinter = make_fingerprinter(features, ngram, stopwords, bits, kind=kind, weights=weights, always=True)
    assert fingerprinter is not None
    settings = fingerprinter.to_dict()
    named = [(path, read_text_file(path)) for path in file] if file else [(None, read_argument_text(text or ""))]
    if not json_output:
        err(f"simdb hash: {_settings_summary(settings)}")
    for name, content in named:
        value = fingerprinter.fingerprint(content)
        shown = format(value, f"0{bits}b") if binary else hex_fingerprint(value, bits)
        if json_output:
            described = {
                "kind": fingerprinter.kind,
                "weights": fingerprinter.weights,
                "features": fingerprinter.features,
                "ngram": fingerprinter.ngram,
            }
            out(
                json_line(
                    {"fingerprint": shown, "bits": bits, **described, **({"file": name} if name is not None else {})}
                )
            )
        else:
            out(shown if name is None else f"{shown}  {name}")


EXPORT_FORMATS = ("jsonl", "tsv", "parquet")


@app.command()
@guarded
def export(
    file_format: Annotated[
        str,
        typer.Option(
            "--format",
            help="jsonl (a settings header line, then one object per document), tsv (KEY, FINGERPRINT, META-JSON), or parquet (key, fingerprint: the input of pairs --parquet; needs the dask extra).",
        ),
    ] = "jsonl",
    output_path: Annotated[str, typer.Option("--output", "-o", help="Write here instead of stdout.")] = "-",
    db: DbOption = DEFAULT_DB_PATH,
    debug: DebugOption = False,
) -> None:
    """Write every document's key, fingerprint and meta, in insertion order, for simdb import.

    JSONL keeps the fingerprint settings too, so an imported copy fingerprints text the same
    way; rebuild with another block plan by importing with -k/--blocks.
    """
    if file_format == "parquet":
        if output_path == "-":
            raise usage_error("--format parquet needs --output FILE.parquet")
        from simdb.distributed import export_parquet

        with open_existing(db) as database:
            written = export_parquet(database, output_path)
        err(f"exported {written:,} documents (key, fingerprint) to {output_path}")
        return
    if file_format not in EXPORT_FORMATS:
        raise usage_error(f"--format {file_format!r} is not one of {', '.join(EXPORT_FORMATS)}")
    try:
        with open_existing(db) as database, output_file(output_path) as stream:
            if file_format == "jsonl":
                settings = database.fingerprinter.to_dict() if database.fingerprinter is not None else None
                stream.write(
                    json_line(
                        {
                            "simdb": "export",
                            "format_version": EXPORT_FORMAT_VERSION,
                            "k": database.k,
                            "blocks": database.plan.blocks,
                            "fingerprinter": settings,
                        }
                    )
                    + "\n"
                )
                for document in database.items():
                    field, meta = export_meta(document.meta)
                    fingerprint = hex_fingerprint(document.fingerprint)
                    stream.write(json_line({"key": document.key, "fingerprint": fingerprint, field: meta}) + "\n")
            else:
                for document in database.items():
                    if any(mark in document.key for mark in "\t\n\r"):
                        raise simdb.InvalidInputError(
                            f"key {document.key!r} holds a tab or line break, which TSV cannot carry",
                            "export with --format jsonl",
                        )
                    field, meta = export_meta(document.meta)
                    column = json_line(meta) if field == "meta" else TSV_MSGPACK_PREFIX + meta
                    column = "" if document.meta is None else column
                    stream.write(f"{document.key}\t{hex_fingerprint(document.fingerprint)}\t{column}\n")
    except BrokenPipeError:
        raise
    except OSError as error:  # writing, closing or renaming the output
        name = "<stdout>" if output_path == "-" else output_path
        raise simdb.InvalidInputError(f"cannot write {name}: {error.strerror or error}") from None


@contextmanager
def output_file(path: str) -> Iterator[IO[str]]:
    """A text stream for ``path`` ("-" is stdout).  A regular file is written under a
    temporary name beside it and renamed over ``path`` only when the block ends without an
    error, so a failed export never truncates an earlier one; the temporary is removed on
    failure.  Costs one rename; a device or FIFO is written directly."""
    if path == "-":
        yield sys.stdout
        output.flush()  # inside the command's error handling, naming stdout
        return
    target = Path(path)
    try:
        existing = target.stat()
    except FileNotFoundError:
        existing = None
    except OSError as error:
        raise simdb.InvalidInputError(f"cannot write {path}: {error.strerror or error}") from None
    if existing is not None and not stat.S_ISREG(existing.st_mode):
        with open(path, "w", encoding="utf-8", newline="\n") as stream:
            yield stream
        return
    try:
        handle, temporary = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".partial")
    except OSError as error:
        raise simdb.InvalidInputError(f"cannot write {path}: {error.strerror or error}") from None
    try:
        # mkstemp makes the file private; give it the mode the file has, or would get.
        os.chmod(temporary, stat.S_IMODE(existing.st_mode) if existing is not None else 0o666 & ~_umask())
        with open(handle, "w", encoding="utf-8", newline="\n") as stream:
            yield stream
        os.replace(temporary, path)
    except BaseException:
        with suppress(OSError):
            os.unlink(temporary)
        raise


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


@app.command("import")
@guarded
@output.keep_going_if_stdout_closes()  # storing the documents is the point, not the output
def import_command(
    files: Annotated[
        list[str],
        typer.Argument(help="Files written by simdb export ('-' for stdin, .gz allowed).", show_default=False),
    ],
    file_format: Annotated[
        str, typer.Option("--format", help="auto (tsv if the name ends in .tsv, else jsonl), jsonl or tsv.")
    ] = "auto",
    k: CreateKOption = None,
    blocks: BlocksOption = None,
    if_new: IfNewOption = False,
    batch_size: BatchOption = DEFAULT_BATCH_SIZE,
    progress: ProgressOption = True,
    db: DbOption = DEFAULT_DB_PATH,
    json_output: JsonOption = False,
    debug: DebugOption = False,
) -> None:
    """Add the documents of export files, with their fingerprints and meta.

    A new database takes k, blocks and fingerprint settings from a JSONL export's header
    unless -k/--blocks are given; that is how to rebuild with another block plan.
    """
    if file_format not in ("auto", "jsonl", "tsv"):
        raise usage_error(f"--format {file_format!r} is not one of auto, jsonl, tsv")
    intake = Intake(on_problem=problem_printer(json_output), on_notice=_print_notice)
    inputs = stream_inputs(files, "export", intake)
    header = ExportHeader()
    items = read_export(inputs, intake, header, file_format)
    # Read up to the first document, so a JSONL header is known, and checked, before the
    # database opens.
    first = next(items, None)
    if first is None and intake.failed:  # nothing usable: don't create a database for it
        print_summary(intake, json_output)
        raise typer.Exit(EXIT_USAGE)
    # An empty directory is no database yet either (a creation that was refused may leave one).
    is_new = not os.path.exists(db) or (os.path.isdir(db) and not os.listdir(db))
    from_header = is_new and k is None and blocks is None and header.where is not None
    if from_header:
        k, blocks = header.k, header.blocks
    documents = chain([first], items) if first is not None else iter(())
    try:
        database = simdb.open(db, k=k, blocks=blocks, fingerprinter=header.fingerprinter)
    except InvalidInputError as error:
        if not from_header:
            raise
        raise InvalidInputError(f"{header.where}: the export header's settings: {error.message}", error.hint) from None
    with database:
        code = run_ingest(
            database,
            intake,
            lambda ingest: ingest.fingerprints(documents),
            total_bytes=_total(inputs),
            if_new=if_new,
            workers=1,
            batch_size=batch_size,
            json_output=json_output,
            show_progress=progress,
        )
    if code:
        raise typer.Exit(code)


@app.command()
@guarded
def demo(
    directory: Annotated[
        str, typer.Option("--dir", help="Where to write the generated documents (DIR/docs) and the database (DIR/db).")
    ] = "simdb-demo",
    documents: Annotated[
        int,
        typer.Option(
            "--documents",
            min=10,
            help="How many documents to generate, of which about one in eight are planted near-duplicates.",
        ),
    ] = 300,
    workers: WorkersOption = None,
    progress: ProgressOption = True,
    debug: DebugOption = False,
) -> None:
    """Run the whole job end to end on a generated collection with planted near-duplicates.

    Writes a few hundred text files to DIR/docs, adds them to the database DIR/db, runs a
    query and prints the pairs found, in a few seconds.
    """
    from . import demo as generator

    docs_dir = Path(directory) / "docs"
    db_path = str(Path(directory) / "db")
    made = generator.previous_output(Path(directory))  # refuses a directory holding other things
    collection = generator.generate(documents, copies=max(1, documents * 2 // 15))
    keys = {name: str(docs_dir / name) for name in collection.documents}
    # Recorded before anything is written, so that a run interrupted halfway leaves a record
    # of everything it may have written, for the next run to replace.
    generator.record_output(Path(directory), generator.Output(made.files | set(keys), made.keys | set(keys.values())))
    paths = generator.write(collection, docs_dir)
    out(f"1. Wrote {len(paths)} documents to {docs_dir}/, with {len(collection.planted)} planted near-duplicate copies")
    out(
        "   (files named like article-007-replaced.txt: one word replaced, one inserted, or case and punctuation changed).\n"
    )

    out(f"2. simdb add {docs_dir} --db {db_path}")
    # A rerun with another --documents leaves no stale generated files behind.
    for stale in made.files - set(keys):
        (docs_dir / stale).unlink(missing_ok=True)
    intake = Intake(on_problem=_print_problem, on_notice=_print_notice)
    inputs = expand_paths([str(path) for path in paths], intake, recursive=False, pattern=None)
    with simdb.open(db_path) as database:
        # A rerun with another --documents leaves no stale documents behind.
        database.remove_many(sorted(made.keys - set(keys.values())))
        code = run_ingest(
            database,
            intake,
            lambda ingest: ingest.texts(read_documents(inputs, intake)),
            total_bytes=_total(inputs),
            if_new=False,
            workers=workers or available_cores(),
            batch_size=DEFAULT_BATCH_SIZE,
            json_output=False,
            show_progress=progress,
        )
        if code:
            raise typer.Exit(code)
        found = sorted(database.pairs(), key=lambda pair: (-pair.similarity, pair.distance, pair.key_a, pair.key_b))
        planted = {frozenset((keys[a], keys[b])) for a, b in collection.planted}
        # Query with the least similar planted copy that is still found, so the answer shows
        # a similarity below 1; any copy if none was found.
        copies = {keys[copy] for _, copy in collection.planted}
        found_planted = [
            (pair.similarity, pair.key_a if pair.key_a in copies else pair.key_b)
            for pair in found
            if frozenset((pair.key_a, pair.key_b)) in planted
        ]
        example = min(found_planted)[1] if found_planted else keys[collection.planted[0][1]]
        out(f"\n3. simdb query --threshold {simdb.DEFAULT_THRESHOLD} --file {example} --db {db_path}")
        matches = database.query(text=Path(example).read_text(encoding="utf-8"), threshold=simdb.DEFAULT_THRESHOLD)
        output.table(
            ["similarity", "distance", "key"],
            ([f"{m.similarity:.3f}", m.distance, m.key] for m in matches),
            right_aligned=(0, 1),
        )

        out(f"\n4. simdb pairs --db {db_path}")
        output.table(
            ["similarity", "distance", "key_a", "key_b"],
            ([f"{p.similarity:.3f}", p.distance, p.key_a, p.key_b] for p in found),
            right_aligned=(0, 1),
        )
        hits = sum(1 for pair in found if frozenset((pair.key_a, pair.key_b)) in planted)
        out(
            f"\nFound {hits} of the {len(planted)} planted pairs with similarity >= {simdb.DEFAULT_THRESHOLD}, "
            f"and {len(found) - hits} other pairs."
            + (
                " The planted copies not found changed more of their word sequences than the threshold allows."
                if hits < len(planted)
                else ""
            )
        )
    generator.record_output(Path(directory), generator.Output(set(keys), set(keys.values())))
    out(f"\nTry next:  export SIMDB_PATH={db_path}   then   simdb stats;  simdb clusters;  simdb pairs --histogram")


@app.callback(invoke_without_command=True)
def root(
    context: typer.Context,
    version: Annotated[bool, typer.Option("--version", help="Print simdb's version and exit.", is_eager=True)] = False,
) -> None:
    """simdb: find near-duplicate documents with SimHash fingerprints stored on disk."""
    if version:
        out(f"simdb {simdb.__version__}")
        raise typer.Exit(0)
    if context.invoked_subcommand is None:
        out(context.get_help())
        raise typer.Exit(0)


def main() -> None:
    """The ``simdb`` console script."""
    if signal.getsignal(signal.SIGINT) is _exit_quietly:
        # Undo cli/__init__.py's start-up handler: from here Ctrl-C is a KeyboardInterrupt
        # that each command turns into its own clean stop.
        signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        app(prog_name="simdb")
    except KeyboardInterrupt:  # before a command's own handling began (parsing arguments)
        err("simdb: interrupted")
        sys.exit(EXIT_INTERRUPTED)


if __name__ == "__main__":
    main()
