"""Reading the inputs of ``simdb add`` and ``simdb import``: plain text files, directories,
lists of paths on stdin, JSONL, WARC/WET archives and TSV fingerprint files.

Every reader is a generator of ``(key, text_or_fingerprint, meta, where)`` tuples: the
first three are ready for :meth:`simdb.Database.add_texts` or
:meth:`simdb.Database.add_many`, and ``where`` names the file and line or record they came
from, for reporting an item the database refuses.  Readers never raise on a bad input: they
report it once through an :class:`Intake`, count it, and go on with the next one.  The
:class:`Intake` also tracks how many input bytes have been consumed, which the progress bar
turns into an ETA.
"""

from __future__ import annotations

import base64
import binascii
import codecs
import contextlib
import dataclasses
import errno
import fnmatch
import gzip
import io
import json
import math
import os
import re
import shlex
import stat
import sys
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import IO, TYPE_CHECKING, Any, AnyStr, NamedTuple

from simdb import InvalidInputError, InvalidKeyError, SimdbError, codec, parse_fingerprint
from simdb.errors import DASK_INSTALL_HINT, KeyProblem
from simdb.features import NORMALIZATION
from simdb.fingerprint import SKETCH_BYTES
from simdb.keys import check_key, describe
from simdb.markup import visible_text
from simdb.storage import Storage
from simdb.validation import check_fingerprint, is_int

from .errors import error_message
from .filekeys import canonical_key, key_base_path
from .output import counted, shown, unplain, unshown

if TYPE_CHECKING:  # importing simdb.fingerprint is deferred to an export header that needs it
    from simdb.fingerprint import Fingerprinter

TEXT = "text"
WARC = "warc"
JSONL = "jsonl"
HTML = "html"
FINGERPRINTS = "fingerprints"
#: The kinds of file that are one document each, keyed by the file (the others hold many).
ONE_DOCUMENT_KINDS = (TEXT, HTML)

#: File name endings read as WARC or WET archives (Common Crawl's ``.warc.wet.gz`` included).
WARC_SUFFIXES = (".warc", ".warc.gz", ".wet", ".wet.gz")
#: File name endings read as JSON lines (one document per line) when given or found as paths.
JSONL_SUFFIXES = (".jsonl", ".jsonl.gz", ".ndjson", ".ndjson.gz")
#: Files read as one HTML page each, reduced to their visible text (as a WARC's pages are).
HTML_SUFFIXES = (".html", ".htm", ".xhtml", ".html.gz", ".htm.gz", ".xhtml.gz")
#: How many bytes at the start of a file are searched for a NUL byte, the sign of a binary file.
BINARY_SNIFF_BYTES = 8192
#: Problems reported per input before the rest are only counted, so one broken JSONL file of
#: a million lines cannot flood the terminal.
MESSAGES_PER_INPUT = 5
# A JSON \u escape of a lone surrogate, which json.loads turns into an unencodable str.
_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F]")
#: The newest ``format_version`` of ``simdb export`` files this simdb writes and reads.
#: Version 2 added ``meta_msgpack`` (and TSV's ``msgpack:``) for meta that JSON cannot carry
#: exactly; version 3 added each document's ``sketch`` (TSV's fourth column), so that a copy
#: compares, pairs and skips as the original did; older files read as they always did.
EXPORT_FORMAT_VERSION = 3
#: How a TSV export's META column starts when it holds msgpack rather than JSON (no JSON
#: text starts with a letter m, so the two cannot be confused).
TSV_MSGPACK_PREFIX = "msgpack:"
#: How a TSV export's fourth column starts: the document's sketch in base64 follows (none
#: for a featureless text).
TSV_SKETCH_PREFIX = "sketch:"


class SketchedFingerprint(NamedTuple):
    """The value of an item read from an export that carried the document's sketch."""

    fingerprint: int
    sketch: bytes


class BareFingerprint(int):
    """The value of an item read from a file of keys and fingerprints alone (a Parquet
    shard), which says nothing of the document's meta or sketch: a stored document with the
    same fingerprint is kept as it is, not replaced by one without them."""


_NOT_REGULAR = "not a regular file (a FIFO, socket or device); not read"
#: The default largest document ``simdb add`` reads (``--max-doc-bytes``): a text file, a
#: JSONL or TSV line, or a WARC record's payload.  Larger ones are reported and skipped
#: without being read whole.
DEFAULT_MAX_DOC_BYTES = 64 * 2**20


def too_large(size: int | None, limit: int) -> str:
    """The report of a document over ``limit`` bytes (``size`` if known)."""
    what = f"{size:,} bytes" if size is not None else "more bytes"
    return f"{what}, over --max-doc-bytes ({limit:,}); not read"


#: Bytes read at a time while skipping an oversized line or looking for the next WARC record.
_SCAN_CHUNK = 1 << 16

#: ``(key, text or fingerprint, meta, where it came from)``.
Item = tuple[str, Any, Any, str]


#: The most characters of a name or key that a line on stderr shows (a 400 MB line named
#: as a path was echoed whole).
PRINTED_CHARS = 1_000


def shortened(text: str) -> str:
    """``text`` for a line of ``add``: quoted if it holds line breaks or other control
    characters (see :func:`.output.shown`; a name read from a NUL-separated list may hold
    them), and past :data:`PRINTED_CHARS` cut short with its length said (JSON events keep
    it whole, for programs to match)."""
    if len(text) > PRINTED_CHARS:
        text = f"{text[: PRINTED_CHARS // 2]}... ({len(text):,} characters)"
    return shown(text)


def printable(text: str) -> str:
    """``text`` safe to print: undecodable bytes of a file name (surrogate escapes) and lone
    surrogates become backslash escapes, so a message about them cannot itself fail."""
    try:
        text.encode("utf-8")
        return text
    except UnicodeEncodeError:
        try:
            return text.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")
        except UnicodeEncodeError:  # a lone surrogate that was never a byte
            return text.encode("utf-8", "backslashreplace").decode("utf-8")


@dataclass(frozen=True)
class Input:
    """One input to read: ``path`` ("-" is stdin), how to read it, its size if known, and
    its canonical key (see :mod:`.filekeys`) when it was found as a path."""

    path: str
    kind: str
    size: int | None
    key: str | None = None

    @property
    def name(self) -> str:
        """How messages name this input."""
        return "<stdin>" if self.path == "-" else self.path

    @property
    def document_key(self) -> str:
        """The key of the file as one document: its canonical key, else its path."""
        return self.key if self.key is not None else self.path


@dataclass
class Intake:
    """Counts and reports what the readers could not use.

    ``on_problem(where, cause)`` is called for every failed input (an unreadable or binary
    file, a bad JSONL line, ...); ``on_notice(where, message)`` for things that were still
    added (text decoded with replacement, a fallback key).  Messages past
    :data:`MESSAGES_PER_INPUT` per input are counted but not reported, except failures
    when ``every_problem`` (JSON events, which a program reads rather than a person).
    """

    on_problem: Callable[[str, str], None]
    on_notice: Callable[[str, str], None]
    every_problem: bool = False
    failed: int = 0
    decoded_with_replacement: int = 0
    bytes_done: int = 0
    _messages: dict[str, int] = field(default_factory=dict)
    _last_replaced: str | None = None  # the input :meth:`replaced` counted last

    def _quota(self, source: str) -> bool:
        count = self._messages.get(source, 0) + 1
        self._messages[source] = count
        if count == MESSAGES_PER_INPUT + 1:
            self.on_notice(source, "more problems in this input are counted but not shown")
        return count <= MESSAGES_PER_INPUT

    def fail(self, where: str, cause: str, source: str | None = None) -> None:
        """Count one input (file, line or record) that could not be added: as failed only,
        where it was counted as not valid in its encoding just before (its notice stays)."""
        self.failed += 1
        if where == self._last_replaced:
            self.decoded_with_replacement -= 1
            self._last_replaced = None
        if self.every_problem or self._quota(source or where):
            self.on_problem(printable(where), printable(cause))

    def replaced(self, where: str, cause: str, source: str | None = None) -> None:
        """Count one document (or key) whose bytes were not valid in its encoding."""
        self.decoded_with_replacement += 1
        self._last_replaced = where
        if self._quota(source or where):
            self.on_notice(printable(where), printable(cause))

    def notice(self, where: str, message: str, source: str | None = None) -> None:
        if self._quota(source or where):
            self.on_notice(printable(where), printable(message))


def is_warc_name(path: str) -> bool:
    return path.lower().endswith(WARC_SUFFIXES)


def kind_of_name(path: str) -> str:
    """How a file found as a path is read, by its name: WARC/WET, JSONL, HTML or text."""
    lowered = path.lower()
    if lowered.endswith(WARC_SUFFIXES):
        return WARC
    if lowered.endswith(HTML_SUFFIXES):
        return HTML
    return JSONL if lowered.endswith(JSONL_SUFFIXES) else TEXT


@dataclass(frozen=True)
class PathRules:
    """Which files of a directory are read, and how the files read are keyed: ``patterns``
    (a name must match one, when any are given), ``excludes`` (a file or subdirectory whose
    name matches one is left out), ``recursive``, the ``key_base`` keys are relative to
    (None: the working directory), and whether ``hidden`` files and subdirectories (names
    starting with ".": a .git directory, editor and system files) are read."""

    recursive: bool = False
    patterns: tuple[str, ...] = ()
    excludes: tuple[str, ...] = ()
    key_base: str | None = None
    hidden: bool = False

    def wanted(self, name: str) -> bool:
        """Whether a file named ``name`` found in a directory is read."""
        if self.hides(name) or any(fnmatch.fnmatch(name, pattern) for pattern in self.excludes):
            return False
        return not self.patterns or any(fnmatch.fnmatch(name, pattern) for pattern in self.patterns)

    def excluded(self, name: str) -> bool:
        """Whether the subdirectory named ``name`` is left out."""
        return self.hides(name) or any(fnmatch.fnmatch(name, pattern) for pattern in self.excludes)

    def hides(self, name: str) -> bool:
        """Whether ``name`` is hidden (it starts with ".") and hidden names are left out."""
        return name.startswith(".") and not self.hidden


def stdin_text() -> IO[str]:
    """``sys.stdin``; a stdin closed before the command started (``simdb ... <&-``: Python
    then has none) is a usage error naming it, not an AttributeError."""
    if sys.stdin is None:
        raise InvalidInputError("stdin is closed, so '-' has nothing to read", "give a file, or redirect stdin")
    return sys.stdin


def stdin_bytes() -> IO[bytes]:
    """Stdin as bytes (a test's text stream, which has none beneath, encoded whole)."""
    stream = stdin_text()
    raw: IO[bytes] | None = getattr(stream, "buffer", None)
    return raw if raw is not None else io.BytesIO(stream.read().encode())


def listed_lines(data: AnyStr) -> list[AnyStr]:
    """The lines of a list of paths or keys: split at line feeds only, each line's one
    trailing carriage return dropped (a list written on Windows), so that a name holding a
    carriage return elsewhere stays one name (``splitlines`` cut it in two: a probe found
    the first half added, a different file).  O(len(data))."""
    feed, carriage_return = ("\n", "\r") if isinstance(data, str) else (b"\n", b"\r")
    return [line[:-1] if line.endswith(carriage_return) else line for line in data.split(feed)]


def read_path_list(source: str, intake: Intake, *, null: bool, stdin: IO[str] | None = None) -> list[str]:
    """The paths listed in ``source`` ("-": stdin), one per line, or NUL-separated with
    ``null`` (``find -print0``).  Read as bytes and decoded as the operating system decodes
    file names, so a name that is not valid UTF-8 still names its file.  An unreadable list
    is reported and counted.  O(list size)."""
    if source == "-":
        stream = stdin or stdin_text()
        raw = getattr(stream, "buffer", None)
        data = raw.read() if raw is not None else os.fsencode(stream.read())
        name = "<stdin>"
    else:
        name = source
        try:
            with open(source, "rb") as handle:
                data = handle.read()
        except OSError as exc:
            intake.fail(source, f"cannot read the list of paths: {exc.strerror or exc}")
            return []
    if null:
        return [os.fsdecode(part) for part in data.split(b"\0") if part]
    paths = []
    for line in listed_lines(data):
        if b"\0" in line:
            # find -print0 output: one "line" holding every path, NUL-separated.
            intake.fail(
                f"{name} path {describe(os.fsdecode(line))}", "holds a NUL byte; give -0/--null for find -print0"
            )
        elif line:
            paths.append(os.fsdecode(line))
    return paths


def _file_size(info: os.stat_result) -> int | None:
    return info.st_size if stat.S_ISREG(info.st_mode) else None


def expand_paths(
    paths: Iterable[str],
    intake: Intake,
    *,
    rules: PathRules | None = None,
    skip_directory: str | None = None,
    files_from: Iterable[str] = (),
    null: bool = False,
    stdin: IO[str] | None = None,
    named_pipes: bool = False,
) -> list[Input]:
    """The files to read for the PATH arguments of ``simdb add`` and ``simdb query``, in
    order, each with its canonical key (see :mod:`.filekeys`).

    A file is taken as given (a WARC/WET archive or JSONL file if its name says so, else
    text).  A directory contributes its regular files, sorted by name, as ``rules`` select
    them (recursion, --glob and --exclude patterns).  "-" among ``paths`` reads more paths
    from ``stdin``, and each of ``files_from`` is a list of paths ("-": stdin), one per line
    or NUL-separated with ``null``.  A missing path, or one that is not a regular file or
    directory (a FIFO would block the run), is reported and counted; with ``named_pipes``, a
    pipe or character device named in ``paths`` itself (``query -f <(cmd)``) is read, as cat
    and grep read one, while one met in a directory or a list still is not.  The directory
    ``skip_directory`` (the database's own, so ``simdb add . -r`` never reads the database
    as a document) is never entered, nor is a directory already read (a symbolic link loop
    would otherwise be followed without end).  Cost: one stat per path, one listing per
    directory.
    """
    # The key base made absolute once, so keying a file costs no getcwd.
    rules = dataclasses.replace(rules or PathRules(), key_base=key_base_path((rules or PathRules()).key_base))
    skipped = os.path.realpath(skip_directory) if skip_directory else None
    visited: set[tuple[int, int]] = set()
    found: list[Input] = []
    for path in paths:
        if path != "-":
            found.extend(_expand_one(path, intake, rules, skipped, visited, named_pipes))
            continue
        found.extend(_expand_listed("-", intake, rules, skipped, visited, null, stdin))
    for source in files_from:
        found.extend(_expand_listed(source, intake, rules, skipped, visited, null, stdin))
    return found


def _expand_listed(
    source: str,
    intake: Intake,
    rules: PathRules,
    skipped: str | None,
    visited: set[tuple[int, int]],
    null: bool,
    stdin: IO[str] | None,
) -> list[Input]:
    found = []
    hinted = False
    for line in read_path_list(source, intake, null=null, stdin=stdin):
        # A "-" inside the list is a file named "-", not stdin again.
        failed = intake.failed
        found.extend(_expand_one("./-" if line == "-" else line, intake, rules, skipped, visited))
        if source == "-" and not hinted and intake.failed > failed and " " in line and not os.path.lexists(line):
            # query - and hash - read text from stdin; here it is a list of paths.
            hinted = True
            intake.notice("<stdin>", "stdin lists file paths here, one a line (text on stdin: add --jsonl -, query -)")
    return found


def stdin_keys(intake: Intake, stdin: IO[str] | None = None, *, null: bool = False) -> list[str]:
    """The non-empty lines of stdin as keys, a line quoted as ``simdb keys`` quotes a key
    with control characters read as that key (:func:`.output.unshown`), or with ``null``
    its NUL-separated parts (as ``simdb keys -0`` writes them).  Read as bytes and decoded
    one by one, so that a key that is not UTF-8 (it can name no stored key) is reported with
    its number and the rest are still read, whatever error handler the locale gave stdin.
    O(input)."""
    stream = stdin or stdin_text()
    raw = getattr(stream, "buffer", None)
    if raw is None:  # a text stream without bytes beneath: already decoded
        text = stream.read()
        return [part if null else unshown(part) for part in (text.split("\0") if null else listed_lines(text)) if part]
    data = raw.read()
    keys = []
    for number, line in enumerate(data.split(b"\0") if null else listed_lines(data), 1):
        try:
            key = line.decode("utf-8")
        except UnicodeDecodeError as exc:
            cause = f"not valid UTF-8 (byte {exc.start}), so it is no stored key; not read"
            intake.fail(f"<stdin>:{number}", cause, "<stdin>")
            continue
        if key:
            keys.append(key if null else unshown(key))
    return keys


def _expand_one(
    path: str,
    intake: Intake,
    rules: PathRules,
    skipped: str | None,
    visited: set[tuple[int, int]],
    named_pipe: bool = False,
) -> list[Input]:
    try:
        info = os.stat(path)
    except OSError as exc:
        intake.fail(path, exc.strerror or str(exc))
        return []
    if stat.S_ISDIR(info.st_mode):
        return list(_walk(path, intake, rules, skipped, visited))
    readable_pipe = named_pipe and (stat.S_ISFIFO(info.st_mode) or stat.S_ISCHR(info.st_mode))
    if not stat.S_ISREG(info.st_mode) and not readable_pipe:
        intake.fail(path, _NOT_REGULAR)
        return []
    return [Input(path, kind_of_name(path), _file_size(info), canonical_key(path, rules.key_base))]


def _walk(
    top: str, intake: Intake, rules: PathRules, skipped: str | None, visited: set[tuple[int, int]]
) -> Iterator[Input]:
    """The files of directory ``top`` in sorted order, then (with ``recursive``) those of
    each subdirectory in turn, depth first.  Iterative, with its own stack, so a tree of any
    depth is walked; ``visited`` (device, inode) pairs keep a directory from being read twice.
    A FIFO, socket or device among the files is reported, not read.  Hidden names are left
    out unless ``rules.hidden``, with one notice counting them; a simdb database directory
    is never read (its files are no documents), with a notice.  Cost: one stat and one
    listing per directory, one stat per file."""
    pending = [top]  # directories still to read, the next one last
    hidden = 0  # hidden names that --hidden would have read
    shown = dataclasses.replace(rules, hidden=True)
    while pending:
        directory = pending.pop()
        if skipped is not None and os.path.realpath(directory) == skipped:
            continue
        if Storage.holds_database(directory):
            intake.notice(directory, "a simdb database, whose files are no documents; not read")
            continue
        try:
            info = os.stat(directory)
            entries = sorted(os.scandir(directory), key=lambda entry: entry.name)
        except OSError as exc:
            intake.fail(directory, f"cannot list directory: {exc.strerror}")
            continue
        if (info.st_dev, info.st_ino) in visited:
            intake.notice(
                directory, "a directory already read (named twice, or reached through a symbolic link); not read again"
            )
            continue
        visited.add((info.st_dev, info.st_ino))
        subdirectories = []
        for entry in entries:
            try:
                if entry.is_dir():
                    if not rules.excluded(entry.name):
                        subdirectories.append(entry.path)
                    elif rules.recursive and rules.hides(entry.name) and not shown.excluded(entry.name):
                        hidden += 1
                    continue
                if not rules.wanted(entry.name):
                    hidden += rules.hides(entry.name) and shown.wanted(entry.name)
                    continue
                if not entry.is_file():
                    if entry.is_symlink() and not os.path.exists(entry.path):
                        # It names nothing to read: not a failure, but not left unsaid.
                        intake.notice(entry.path, "a broken symbolic link; not read")
                        continue
                    intake.fail(entry.path, _NOT_REGULAR)
                    continue
                size = entry.stat().st_size
            except OSError as exc:
                intake.fail(entry.path, exc.strerror or str(exc))
                continue
            yield Input(entry.path, kind_of_name(entry.name), size, canonical_key(entry.path, rules.key_base))
        if rules.recursive:
            pending.extend(reversed(subdirectories))
        elif subdirectories:  # said, as hidden files are: a tree read one level deep by mistake
            intake.notice(
                directory,
                f"{counted(len(subdirectories), 'subdirectory', 'subdirectories')} not read (-r reads them)",
            )
    if hidden:
        intake.notice(
            top,
            f"{counted(hidden, 'hidden file or directory', 'hidden files and directories')} "
            "left out (--hidden reads them)",
        )


def stream_inputs(paths: Iterable[str], kind: str, intake: Intake) -> list[Input]:
    """Inputs named by ``--jsonl`` or ``--fingerprints`` (or ``simdb import``); "-" is stdin.
    A missing file is reported and counted."""
    inputs = []
    for path in paths:
        if path == "-":
            inputs.append(Input(path, kind, None))
            continue
        try:
            inputs.append(Input(path, kind, _file_size(os.stat(path))))
        except OSError as exc:
            intake.fail(path, exc.strerror or str(exc))
    return inputs


#: Byte-order marks and the codecs they announce; UTF-32's first, as UTF-32 LE's mark
#: starts with UTF-16 LE's.
_BOMS = (
    (codecs.BOM_UTF32_LE, "utf-32-le"),
    (codecs.BOM_UTF32_BE, "utf-32-be"),
    (codecs.BOM_UTF8, "utf-8"),
    (codecs.BOM_UTF16_LE, "utf-16-le"),
    (codecs.BOM_UTF16_BE, "utf-16-be"),
)


def checked_encoding(encoding: str) -> str:
    """The canonical name of ``encoding`` (``--encoding``), or InvalidInputError naming it
    when Python knows no such text encoding."""
    try:
        info = codecs.lookup(encoding)
    except (LookupError, UnicodeError):  # unknown, or a name that is not text (bytes from the shell)
        raise InvalidInputError(
            f"--encoding {describe(encoding)} is not a text encoding Python knows",
            "give one such as utf-8, latin-1, cp1252 or utf-16",
        ) from None
    if not getattr(info, "_is_text_encoding", True):
        raise InvalidInputError(f"--encoding {describe(encoding)} is not a text encoding", "give one such as latin-1")
    try:
        # Some text codecs decode no text at all (undefined; idna refuses a line break) or
        # raise whatever the error handler (punycode on a byte past ASCII): refused here,
        # before anything is read, rather than failing the run at its first file.
        _ENCODING_SAMPLE.decode(info.name, errors="replace")
    except (UnicodeError, ValueError) as error:
        reason = (str(error).splitlines() or [type(error).__name__])[0]
        raise InvalidInputError(
            f"--encoding {describe(encoding)} cannot decode text ({reason})",
            "give one such as utf-8, latin-1, cp1252 or utf-16",
        ) from None
    return info.name


#: Bytes that any usable --encoding decodes, with U+FFFD for what it cannot: words, digits,
#: a line break and bytes past ASCII.
_ENCODING_SAMPLE = b"Text 0123, and a line.\n\xe9\xff\xfe\x80"


def bom_encoding(data: bytes) -> tuple[str, int] | None:
    """``(codec, length of the mark)`` when ``data`` starts with a byte-order mark."""
    for mark, name in _BOMS:
        if data.startswith(mark):
            return name, len(mark)
    return None


def looks_binary(data: bytes, encoding: str | None = None) -> bool:
    """Whether ``data`` is no text: a NUL byte in its first BINARY_SNIFF_BYTES, unless a
    byte-order mark or ``encoding`` says it is UTF-16 or UTF-32 (whose text holds NULs)."""
    wide = bom_encoding(data)
    name = wide[0] if wide is not None else (codecs.lookup(encoding).name if encoding else "utf-8")
    return not name.startswith(("utf-16", "utf-32")) and b"\0" in data[:BINARY_SNIFF_BYTES]


#: What becomes of the undecodable bytes of a document's text (see :func:`decode`).
KEPT_IN_TEXT = "its undecodable bytes are kept"
#: ... of a JSONL document line's.
KEPT_IN_JSONL_TEXT = "the text keeps its undecodable bytes, other fields get U+FFFD for them, and a key with them fails"
#: ... of a line of fingerprints or of an export: no text to keep them in.
KEPT_NOWHERE = "a key with undecodable bytes fails, a meta gets U+FFFD for them"


def decode(
    data: bytes,
    where: str,
    intake: Intake,
    source: str | None = None,
    encoding: str | None = None,
    *,
    bom: bool = True,
    keep_undecodable: str | None = None,
) -> str:
    """The text of ``data``: in the encoding a leading byte-order mark names (UTF-8, UTF-16
    or UTF-32; the mark dropped), else in ``encoding``, else UTF-8.  Invalid bytes become
    U+FFFD, or with ``keep_undecodable`` (what becomes of them, for the notice) the
    surrogates that stand for them, which text pipeline versions 7 and 8 keep in the words
    they are in (version 8 reads those beside an ASCII letter as cp1252; older versions
    read them as U+FFFD), and which no key can hold; the document is reported and counted
    once.  With ``bom=False`` (a line after a file's
    first) a leading mark is text, not a mark: U+FEFF stays at the start of a key.
    O(len(data))."""
    found = bom_encoding(data) if bom else None
    if found is not None:
        encoding, data = found[0], data[found[1] :]
    name = encoding or "utf-8"
    try:
        try:
            return data.decode(name)
        except UnicodeDecodeError as exc:
            what = "UTF-8" if encoding is None else name
            if keep_undecodable:
                # Not replaced: a text in another encoding would lose every letter and keep
                # only its digits and punctuation, the same in any two such texts.  A codec
                # whose bad units are no bytes 0x80-0xFF (UTF-16's lone surrogates, an ASCII
                # byte too many) cannot keep them: those are replaced.
                with contextlib.suppress(UnicodeError):
                    text = data.decode(name, errors="surrogateescape")
                    cause = f"not valid {what} (byte {exc.start}); {keep_undecodable}"
                    intake.replaced(where, cause, source)
                    return text
            intake.replaced(where, f"not valid {what} (byte {exc.start}); decoded with replacement", source)
            return data.decode(name, errors="replace")
    except UnicodeError:  # a codec that raises whatever the error handler (see checked_encoding)
        intake.replaced(where, f"cannot be decoded as {name}; decoded as UTF-8 with replacement", source)
        return data.decode("utf-8", errors="replace")


def read_text_files(
    inputs: Iterable[Input], intake: Intake, max_bytes: int | None = None, encoding: str | None = None
) -> Iterator[Item]:
    """``(key, text, None, path)`` for every readable text file (gunzipped when its name
    ends in .gz), decoded as :func:`decode` does (``encoding`` for files without a
    byte-order mark); binary files (see
    :func:`looks_binary`), unreadable ones, ones over ``max_bytes`` and ones whose path
    cannot be a key (a name that is not valid UTF-8) are reported and counted.  Reads each
    file whole, but never more than ``max_bytes + 1`` bytes of it."""
    for item in inputs:
        if max_bytes is not None and item.size is not None and item.size > max_bytes:
            intake.bytes_done += item.size
            intake.fail(item.name, too_large(item.size, max_bytes))
            continue
        try:
            check_key(item.document_key)
        except InvalidInputError as exc:
            intake.bytes_done += item.size or 0
            unicode = isinstance(exc, InvalidKeyError) and exc.reason is KeyProblem.NOT_UNICODE
            intake.fail(
                item.name,
                "the file name is not valid UTF-8, so it cannot be a key; rename the file"
                if unicode
                else error_message(exc, hint=False),
            )
            continue
        try:
            # "-" is stdin's text (query --file -); a .gz file is read gunzipped, never past
            # max_bytes + 1 bytes of its text, however small the file.
            stream, raw = _open_binary(item)
            try:
                data = stream.read() if max_bytes is None else stream.read(max_bytes + 1)
            finally:
                if item.path != "-":  # stdin stays open, as everywhere
                    raw.close()
        except (OSError, EOFError) as exc:
            intake.bytes_done += item.size or 0
            intake.fail(item.name, f"cannot read: {getattr(exc, 'strerror', None) or exc}")
            continue
        intake.bytes_done += item.size if item.size is not None else len(data)
        if max_bytes is not None and len(data) > max_bytes:  # it grew since it was listed
            intake.fail(item.name, too_large(None, max_bytes))
            continue
        if looks_binary(data, encoding):
            intake.fail(item.name, "binary file (contains NUL bytes); not read")
            continue
        text = decode(data, item.name, intake, encoding=encoding, keep_undecodable=KEPT_IN_TEXT)
        yield item.document_key, text, None, item.path


def _open_listed(item: Input) -> IO[bytes]:
    """The file of ``item`` opened to read (the caller closes it).  One that the listing
    found regular (its size is known) is opened without waiting and must be regular still:
    a FIFO put in its place since would block the open, and the whole command, for good."""
    if item.size is None:
        return open(item.path, "rb")
    descriptor = os.open(item.path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    try:
        if not stat.S_ISREG(os.fstat(descriptor).st_mode):
            raise OSError(errno.EINVAL, "it is no longer a regular file (replaced since it was listed)", item.path)
        os.set_blocking(descriptor, True)
        return os.fdopen(descriptor, "rb")
    except BaseException:
        os.close(descriptor)
        raise


def _open_binary(item: Input) -> tuple[IO[bytes], IO[bytes]]:
    """(stream to read, raw file whose position measures progress); gunzips ``.gz``."""
    # The file is closed by the caller.
    raw: IO[bytes] = stdin_bytes() if item.path == "-" else _open_listed(item)
    if item.path.lower().endswith(".gz"):
        # GzipFile is a binary file object, but typeshed derives it from BufferedIOBase, not IO[bytes].
        return gzip.GzipFile(fileobj=raw, mode="rb"), raw  # type: ignore[return-value]
    return raw, raw


def _position(raw: IO[bytes]) -> int:
    try:
        return raw.tell()
    except (OSError, ValueError):  # a pipe has no position
        return 0


def _nonblank_lines(item: Input, intake: Intake, max_bytes: int | None = None) -> Iterator[tuple[int, str, bytes]]:
    """``(number, "NAME:NUMBER", line)`` for the lines of :func:`_lines` that are not blank."""
    for number, line in _lines(item, intake, max_bytes):
        if line.strip():
            yield number, f"{item.name}:{number}", line


def _lines(item: Input, intake: Intake, max_bytes: int | None = None) -> Iterator[tuple[int, bytes]]:
    """Numbered lines of a (possibly gzipped) file, advancing ``intake.bytes_done`` as the
    raw file is consumed.  A line longer than ``max_bytes`` (its line break aside) is
    reported with its size and skipped, read ``_SCAN_CHUNK`` bytes at a time, never whole.
    An I/O or gzip error is reported and ends this input."""
    start = intake.bytes_done
    try:
        stream, raw = _open_binary(item)
    except OSError as exc:
        intake.fail(item.path, f"cannot read: {exc.strerror or exc}")
        return
    try:
        number = 0
        while True:
            line = stream.readline() if max_bytes is None else stream.readline(max_bytes + 1)
            if not line:
                break
            number += 1
            intake.bytes_done = start + _position(raw)
            if max_bytes is not None and len(line) > max_bytes and not line.endswith(b"\n"):
                size = len(line) + _skip_line(stream)
                intake.fail(f"{item.name}:{number}", f"a line of {too_large(size, max_bytes)}", item.name)
                continue
            yield number, line
    except (OSError, EOFError, gzip.BadGzipFile) as exc:
        intake.fail(item.path, f"cannot read: {getattr(exc, 'strerror', None) or exc}")
    finally:
        if item.path != "-":
            raw.close()
        intake.bytes_done = start + (item.size or 0)


def _skip_line(stream: IO[bytes]) -> int:
    """Read the rest of the current line, ``_SCAN_CHUNK`` bytes at a time; its length
    (the line break not counted)."""
    skipped = 0
    while True:
        part = stream.readline(_SCAN_CHUNK)
        if part.endswith(b"\n"):
            return skipped + len(part) - 1
        if not part:
            return skipped
        skipped += len(part)


def _valid_key(key: str, where: str, intake: Intake, source: str) -> str | None:
    """``key`` if simdb accepts it; else this one record fails, not the batch: an empty or
    oversized key, or one that is not valid Unicode (undecodable bytes, a lone surrogate
    escape), which is never repaired, since two such keys would become one and the second
    document would replace the first."""
    try:
        check_key(key)
    except InvalidInputError as exc:
        if isinstance(exc, InvalidKeyError) and exc.reason is KeyProblem.NOT_UNICODE:
            cause = (
                f"the key {printable(key)} is not valid Unicode (bytes not in the file's encoding, or a lone"
                " surrogate escape); fix the key"
            )
        else:
            cause = error_message(exc, hint=False)
        intake.fail(where, cause, source)
        return None
    return key


_SURROGATE = re.compile("[\ud800-\udfff]")


def _scrub(value: Any, depth: int = 0) -> Any:
    """``value`` with lone surrogates in its strings replaced by U+FFFD, so it can be stored.
    Nesting deeper than the codec stores (:data:`simdb.codec.MAX_DEPTH`) is left as it is,
    for the codec to refuse, rather than recursed into without end."""
    if isinstance(value, str):
        return _SURROGATE.sub("\ufffd", value)
    if depth > codec.MAX_DEPTH:
        return value
    if isinstance(value, list):
        return [_scrub(part, depth + 1) for part in value]
    if isinstance(value, dict):
        return _names_kept_apart(
            value, {_scrub(name, depth + 1): _scrub(part, depth + 1) for name, part in value.items()}
        )
    return value


class _NamesMerged(ValueError):
    """Two names of one JSON object that differ only in what is not valid Unicode became one
    when scrubbed: one value would be lost without a word."""

    MESSAGE = "two field names differ only in bytes that are not valid Unicode; the line is not read"


def _names_kept_apart(original: dict[Any, Any], scrubbed: dict[Any, Any]) -> dict[Any, Any]:
    """``scrubbed``, the scrubbed copy of ``original``, if it kept every name apart, else
    :class:`_NamesMerged`."""
    if len(scrubbed) != len(original):
        raise _NamesMerged(_NamesMerged.MESSAGE)
    return scrubbed


def _unstorable(value: Any) -> str | None:
    """Why the database would refuse ``value`` read from JSON (an int beyond the 64 bits
    msgpack stores, or nesting deeper than :data:`simdb.codec.MAX_DEPTH`), else None: said
    here, per record, where the database would refuse the whole batch, which is then cut in
    halves and fingerprinted again to find it.  Iterative.  O(size)."""
    pending = [(value, 0)]
    while pending:
        part, depth = pending.pop()
        if isinstance(part, int) and not isinstance(part, bool) and not -(1 << 63) <= part < (1 << 64):
            return "holds an integer too large to store (over 64 bits)"
        if isinstance(part, (list, dict)):
            if depth > codec.MAX_DEPTH:
                return f"is nested more than {codec.MAX_DEPTH} levels deep"
            pending.extend((item, depth + 1) for item in (part.values() if isinstance(part, dict) else part))
    return None


#: What :func:`_checked_meta` returns for a meta it reported (None is a valid meta).
_REFUSED = object()


class JSONInputError(ValueError):
    """A JSON text simdb will not take; the message says why, for a one-line report."""


def _refuse_constant(name: str) -> Any:
    raise JSONInputError(f"{name} is not a number JSON allows")


def _finite_float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise JSONInputError(f"{describe(text, 40)} is too large for a floating-point number")
    return value


#: Most lists and objects one JSON line may hold.  Parsing is O(length) but each container
#: costs Python objects ten to twenty times its two bytes ("[]"), so a short line of "[],"
#: repeated would take gigabytes; no metadata needs more.
MAX_JSON_CONTAINERS = 100_000
_JSON_STRING = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"')


def _too_complex(text: str) -> bool:
    """Whether ``text`` opens more than MAX_JSON_CONTAINERS lists and objects.  Two C-speed
    counts; only when they pass the limit are strings cut out (a text full of brackets is
    no container) with one regular-expression pass.  O(len(text))."""
    if text.count("[") + text.count("{") <= MAX_JSON_CONTAINERS:
        return False
    outside = _JSON_STRING.sub("", text)
    return outside.count("[") + outside.count("{") > MAX_JSON_CONTAINERS


def parse_json(text: str) -> Any:
    """``json.loads(text)``, refusing what standard JSON cannot carry back out: NaN,
    Infinity and numbers beyond the float range (Python's json accepts them, but
    ``--json`` output and exports must stay valid JSON).  Raises JSONInputError, also for
    malformed JSON, nesting too deep for the parser, integers too long for Python to
    convert and more than MAX_JSON_CONTAINERS lists and objects.  O(len(text))."""
    if _too_complex(text):
        raise JSONInputError(f"meta too complex: more than {MAX_JSON_CONTAINERS:,} lists and objects in one line")
    try:
        return json.loads(text, parse_constant=_refuse_constant, parse_float=_finite_float)
    except JSONInputError:
        raise
    except json.JSONDecodeError as exc:
        raise JSONInputError(f"invalid JSON ({exc.msg} at column {exc.colno})") from None
    except RecursionError:
        raise JSONInputError("invalid JSON (nested too deeply to parse)") from None
    except ValueError:
        # Python refuses to convert an integer of more than sys.get_int_max_str_digits()
        # digits (4,300), a guard against quadratic-time parsing; no 64-bit value is that long.
        limit = sys.get_int_max_str_digits()
        raise JSONInputError(f"an integer of more than {limit:,} digits, far too large to store") from None


def _field_names(record: dict[str, Any], shown: int = 8) -> str:
    """The names of ``record``'s fields for a message: the first ``shown``, quoted, "..."
    for more, "none" for an empty object."""
    names = ", ".join(repr(name) for name in list(record)[:shown])
    return (names + (", ..." if len(record) > shown else "")) or "none"


def _absent(field: str, record: dict[str, Any]) -> str:
    """How a JSONL line lacks ``field``: null, or not there."""
    return f"{field!r} is null" if field in record else f"no {field!r} field"


def _json_object(
    line: bytes, where: str, intake: Intake, source: str, kept: str, raw_fields: tuple[str, ...]
) -> dict[str, Any] | None:
    """The JSON object on ``line``, else None after reporting why.  Bytes that are not
    UTF-8, and lone surrogate escapes, stay in the ``raw_fields`` as surrogates (a text
    keeps them for its fingerprint; a key with them fails in :func:`_valid_key`), and the
    other fields get U+FFFD for them (:func:`_scrub`), so that they can be stored; ``kept``
    says so in the notice, one per line."""
    reported = intake.decoded_with_replacement
    text = decode(line, where, intake, source, keep_undecodable=kept)
    try:
        record = parse_json(text)
    except JSONInputError as exc:
        intake.fail(where, str(exc), source)
        return None
    if not isinstance(record, dict):
        intake.fail(where, f"a JSON {_json_type(record)}, not an object", source)
        return None
    if intake.decoded_with_replacement == reported and not _SURROGATE_ESCAPE.search(text):
        return record  # the common case: nothing to scrub
    try:
        return _scrubbed(record, where, intake, source, kept, reported, raw_fields)
    except _NamesMerged as exc:
        intake.fail(where, str(exc), source)
        return None


def _scrubbed(
    value: Any, where: str, intake: Intake, source: str, kept: str, reported: int, raw_fields: tuple[str, ...] = ()
) -> Any:
    """``value`` (a JSON object or a meta) with U+FFFD for its surrogates (:func:`_scrub`)
    but in the fields ``raw_fields`` of an object, counted once as lone surrogate escapes
    where :func:`decode` did not count the line already (``reported``: its count before),
    ``kept`` saying what becomes of them; :class:`_NamesMerged` where two names become one."""
    if raw_fields and isinstance(value, dict):
        scrubbed = _names_kept_apart(
            value, {_scrub(name): part if name in raw_fields else _scrub(part) for name, part in value.items()}
        )
    else:
        scrubbed = _scrub(value)
    escaped = scrubbed != value or any(_SURROGATE.search(str(value.get(name, ""))) for name in raw_fields)
    if escaped and intake.decoded_with_replacement == reported:
        intake.replaced(where, f"lone surrogate escapes (not valid Unicode); {kept}", source)
    return scrubbed


def read_jsonl(
    inputs: Iterable[Input], intake: Intake, *, id_field: str, text_field: str, max_bytes: int | None = None
) -> Iterator[Item]:
    """``(id, text, other fields or None)`` per JSON object line.  A line without the id
    field gets the key ``FILE:LINE`` (noticed once per file); a line without a string text
    field, that is not a JSON object or that is over ``max_bytes``, is reported and
    counted.  Streams; O(file size), memory O(max_bytes)."""
    for item in inputs:
        name = item.name
        warned_missing_id = False
        first = True
        for number, where, line in _nonblank_lines(item, intake, max_bytes):
            record = _json_object(line, where, intake, name, KEPT_IN_JSONL_TEXT, (id_field, text_field))
            if record is None:
                continue
            if first and record.get("simdb") == "export":
                # Every line would fail for want of text: say once what the file is.
                intake.fail(
                    name, f"is a simdb export, not documents; load it with `simdb import {shlex.quote(name)}`", name
                )
                break
            first = False
            text = record.get(text_field)
            if not isinstance(text, str):
                if text is None:
                    cause = _absent(text_field, record)
                    if text_field not in record and record:
                        # Most often the text is under another name: say which names there are.
                        cause += f" (its fields: {_field_names(record)}; --text-field names the text's)"
                else:
                    cause = f"{text_field!r} is a JSON {_json_type(text)}, not a string"
                intake.fail(where, cause, name)
                continue
            raw_key = record.get(id_field)
            if raw_key is None:
                # A file found as a path keys its lines by its canonical key, as it keys itself.
                key_name = item.key if item.key is not None else name
                if not warned_missing_id:
                    missing = _absent(id_field, record)
                    intake.notice(name, f"{missing} on line {number}; such lines get the key {key_name}:LINE", name)
                    warned_missing_id = True
                raw_key = f"{key_name}:{number}"
            elif not isinstance(raw_key, str) and not is_int(raw_key):
                intake.fail(where, f"{id_field!r} is a JSON {_json_type(raw_key)}, not a string or integer", name)
                continue
            key = _valid_key(str(raw_key), where, intake, name)
            if key is None:
                continue
            meta = {
                field_name: value for field_name, value in record.items() if field_name not in (id_field, text_field)
            } or None
            unstorable = None if meta is None else _unstorable(meta)
            if unstorable is not None:
                intake.fail(where, f"the meta (its other fields) {unstorable}", name)
                continue
            yield key, text, meta, where


def exact_in_json(value: Any) -> bool:
    """Whether ``json.loads(json.dumps(value))`` gives ``value`` back exactly, also as an
    import reads it: no bytes, tuples, non-string dict keys, NaN or infinities, and no dict
    of the form ``{"base64": "..."}``, which is how exports before format 2 wrote bytes and
    how import still reads such a dict.  Iterative; O(size)."""
    pending = [value]
    while pending:
        part = pending.pop()
        if part is None or isinstance(part, (str, bool, int)):
            continue
        if isinstance(part, float):
            if not math.isfinite(part):
                return False
        elif isinstance(part, list):
            pending.extend(part)
        elif isinstance(part, dict):
            if not all(isinstance(name, str) for name in part) or _looks_like_bytes(part):
                return False
            pending.extend(part.values())
        else:
            return False
    return True


def _looks_like_bytes(value: dict[Any, Any]) -> bool:
    return len(value) == 1 and isinstance(value.get("base64"), str)


def export_meta(meta: Any) -> tuple[str, Any]:
    """How an export writes ``meta``: ``("meta", meta)`` when JSON carries it exactly (see
    :func:`exact_in_json`), else ``("meta_msgpack", base64 of its msgpack encoding)``, which
    keeps bytes, non-string dict keys, NaN and infinities as they are.  O(size)."""
    if exact_in_json(meta):
        return "meta", meta
    return "meta_msgpack", base64.b64encode(codec.pack(meta, "meta")).decode("ascii")


def without_sketches(items: Iterable[Item], intake: Intake) -> Iterator[Item]:
    """``items`` with the sketches of export lines left out, said once per file: for a
    database with no fingerprint settings to compare them under (a TSV export carries none)."""
    told: set[str] = set()
    for key, value, meta, where in items:
        if isinstance(value, SketchedFingerprint):
            source = where.rpartition(":")[0]
            if source not in told:
                told.add(source)
                intake.notice(
                    source,
                    "its sketches were left out: the database has no fingerprint settings to compare them under "
                    "(this file has no settings header: a TSV export, or JSONL without its first line); import the "
                    "whole JSONL export, or make the database with them first",
                )
            value = value.fingerprint
        yield key, value, meta, where


def export_sketch(sketch: bytes) -> str:
    """How an export writes a stored sketch: base64 (the empty string for a featureless text)."""
    return base64.b64encode(sketch).decode("ascii")


def _read_sketch(encoded: Any, where: str, intake: Intake, source: str) -> bytes | None:
    """The sketch an export wrote, or None after reporting why it cannot be used."""
    if isinstance(encoded, str):
        with contextlib.suppress(ValueError):  # binascii.Error, and non-ASCII text
            sketch = base64.b64decode(encoded, validate=True)
            if len(sketch) in (0, SKETCH_BYTES):
                return sketch
    intake.fail(
        where,
        f"sketch {describe(encoded)} is not base64 of {SKETCH_BYTES} bytes (or of none, for a featureless text)",
        source,
    )
    return None


def _msgpack_meta(encoded: Any, where: str, intake: Intake, source: str) -> Any:
    """The meta an export wrote as base64 msgpack, or ``_REFUSED`` after reporting why not."""
    try:
        if not isinstance(encoded, str):
            raise InvalidInputError(f"meta_msgpack is a {type(encoded).__name__}, not a base64 string")
        return codec.unpack_input(base64.b64decode(encoded, validate=True), "meta_msgpack")
    except InvalidInputError as exc:
        intake.fail(where, error_message(exc, hint=False), source)
    except ValueError:  # binascii.Error, and non-ASCII text
        intake.fail(where, "meta_msgpack is not valid base64", source)
    return _REFUSED


#: JSON's names of the types json.loads makes (a message about a line speaks JSON, not Python).
_JSON_TYPES = {dict: "object", list: "array", str: "string", int: "number", float: "number", bool: "boolean"}


def _json_type(value: Any) -> str:
    """What JSON calls the type of a value json.loads made: "array", not "list"."""
    return "null" if value is None else _JSON_TYPES.get(type(value), type(value).__name__)


def read_fingerprint_tsv(
    inputs: Iterable[Input], intake: Intake, *, header: ExportHeader | None = None, max_bytes: int | None = None
) -> Iterator[Item]:
    """``(key, fingerprint, meta, "FILE:LINE")`` per ``KEY<TAB>FINGERPRINT[<TAB>META-JSON]``
    line, the fingerprint in hex (``0x...`` or 16 digits) or decimal.  Given ``header``,
    the lines are an export's: its settings line (JSONL's, alone on a line; exports before
    it had none) fills ``header`` as :func:`read_export` says, meta values ``{"base64":
    ...}`` (how exports write bytes) become bytes, and a fourth column ``sketch:BASE64``
    gives the document's sketch.  A byte-order mark is dropped at the start of a file only:
    on a later line U+FEFF is the first character of its key (a headerless export of such a
    key as the file's first line starts with a mark of its own).  Bad lines (and lines over
    ``max_bytes``) are reported and counted.  Streams; O(file size)."""
    decode_bytes = header is not None
    # The columns a line may have: an export's lines (decode_bytes) may carry a sketch.
    columns = "KEY<TAB>FINGERPRINT<TAB>META<TAB>sketch:BASE64" if decode_bytes else "KEY<TAB>FINGERPRINT<TAB>META-JSON"
    most_columns = columns.count("<TAB>") + 1
    for item in inputs:
        name = item.name
        first = True
        for number, where, line in _nonblank_lines(item, intake, max_bytes):
            if decode_bytes and not line.endswith(b"\n"):
                # export ends every line: a last one without its end was cut short (a copy
                # interrupted, a full disk), and its cut fingerprint or meta may still parse.
                intake.fail(where, "the last line has no line end: the export was cut short here; not read", name)
                continue
            if b"\t" not in line:  # a header has no tab, and a document line has one
                if number == 1 and line.startswith(codecs.BOM_UTF8):
                    line = line[len(codecs.BOM_UTF8) :]
                if header is None and _EXPORT_HEADER.search(line):
                    intake.fail(name, "an export with its settings line: import it with `simdb import`", name)
                    break
                read_as_header = header is not None and _header_line(line, where, intake, name, header, first)
                if read_as_header is _STOP_FILE:
                    break
                if read_as_header:
                    first = False
                    continue
            first = False
            reported = intake.decoded_with_replacement
            text = decode(line, where, intake, name, bom=number == 1, keep_undecodable=KEPT_NOWHERE).rstrip("\r\n")
            if not text.strip():  # whitespace beyond ASCII
                continue
            fields = text.split("\t")
            if len(fields) < 2:
                intake.fail(where, "expected KEY<TAB>FINGERPRINT", name)
                continue
            if len(fields) > most_columns:
                # A column too many would be dropped without a word: a tab inside a key or a meta?
                intake.fail(where, f"{len(fields)} tab-separated columns, more than {columns} has", name)
                continue
            try:
                fingerprint = parse_fingerprint(fields[1])
            except InvalidInputError as exc:
                intake.fail(where, error_message(exc, hint=False), name)
                continue
            meta = None
            if decode_bytes and len(fields) > 2 and fields[2].startswith(TSV_MSGPACK_PREFIX):
                meta = _msgpack_meta(fields[2][len(TSV_MSGPACK_PREFIX) :], where, intake, name)
                if meta is _REFUSED:
                    continue
            elif len(fields) > 2 and fields[2]:
                try:
                    meta = parse_json(fields[2])
                except JSONInputError as exc:
                    intake.fail(where, f"meta: {exc}", name)
                    continue
                if _SURROGATE.search(fields[2]) or _SURROGATE_ESCAPE.search(fields[2]):
                    try:
                        meta = _scrubbed(meta, where, intake, name, KEPT_NOWHERE, reported)
                    except _NamesMerged as exc:
                        intake.fail(where, f"meta: {exc}", name)
                        continue
                meta = _checked_meta(meta, where, intake, name, decode_bytes)
                if meta is _REFUSED:
                    continue
            value: int | SketchedFingerprint = fingerprint
            if decode_bytes and len(fields) > 3 and fields[3].startswith(TSV_SKETCH_PREFIX):
                sketch = _read_sketch(fields[3][len(TSV_SKETCH_PREFIX) :], where, intake, name)
                if sketch is None:
                    continue
                value = SketchedFingerprint(fingerprint, sketch)
            key = _valid_key(fields[0], where, intake, name)
            if key is not None:
                yield key, value, meta, where


def _checked_meta(meta: Any, where: str, intake: Intake, source: str, decode_bytes: bool) -> Any:
    """``meta`` ready to store (bytes decoded from base64 if ``decode_bytes``), or
    ``_REFUSED`` after reporting why it cannot be stored."""
    unstorable = _unstorable(meta)
    if unstorable is not None:
        intake.fail(where, f"meta {unstorable}", source)
        return _REFUSED
    if not decode_bytes:
        return meta
    try:
        return unplain(meta)
    except (binascii.Error, ValueError):
        intake.fail(where, 'meta holds {"base64": ...} that is not valid base64', source)
        return _REFUSED


def _charset(content_type: str) -> str:
    match = re.search(r"charset=[\"']?([\w.:-]+)", content_type, re.IGNORECASE)
    return match.group(1) if match else "utf-8"


#: The WARC record types that can hold a document.
_DOCUMENT_RECORDS = ("conversion", "response", "resource")
_CUT_SHORT = "is cut short (the archive is truncated or damaged)"


class _Oversized(Exception):
    """A WARC record's payload is over the largest document size."""


def _payload(record: Any, max_bytes: int | None) -> bytes:
    """The (decoded) payload of ``record``, reading at most ``max_bytes + 1`` bytes of it;
    raises _Oversized if there is more."""
    if max_bytes is None:
        data: bytes = record.content_stream().read()
        return data
    data = record.content_stream().read(max_bytes + 1)
    if len(data) > max_bytes:
        raise _Oversized
    return data


def _record_text(record: Any, where: str, intake: Intake, source: str, max_bytes: int | None = None) -> str | None:
    """The text of one WARC record: a WET ``conversion`` record as is; a ``response`` or
    ``resource`` record with a text or HTML payload (HTML reduced to its visible text);
    anything else (requests, metadata, images, errors) is not a document: None.  A payload
    over ``max_bytes`` raises _Oversized, having read ``max_bytes + 1`` bytes of it."""
    if record.rec_type == "conversion":
        return decode(_payload(record, max_bytes), where, intake, source, keep_undecodable=KEPT_IN_TEXT)
    if record.rec_type not in ("response", "resource"):
        return None
    headers = record.http_headers
    if headers is not None and not (headers.get_statuscode() or "").startswith("2"):
        return None
    content_type = (
        headers.get_header("Content-Type") if headers is not None else record.rec_headers.get_header("Content-Type")
    ) or ""
    mime = content_type.split(";")[0].strip().lower()
    if not (mime.startswith("text/") or mime == "application/xhtml+xml"):
        return None
    data = _payload(record, max_bytes)
    charset = _charset(content_type)
    try:
        text = data.decode(charset)
    except (LookupError, UnicodeDecodeError):
        text = decode(data, where, intake, source, keep_undecodable=KEPT_IN_TEXT)
    return visible_text(text) if "html" in mime else text


def _starts_like_warc(handle: IO[bytes]) -> bool:
    """Whether the open file ``handle`` (gunzipped if it is gzip) starts with a ``WARC/``
    version line, warcio itself reading almost anything as an old ARC file; ``handle`` is
    left at its start.  Raises OSError where it cannot seek."""
    magic = handle.read(2)
    handle.seek(0)
    try:
        start = gzip.GzipFile(fileobj=handle).read(16) if magic == b"\x1f\x8b" else handle.read(16)
    except (OSError, EOFError):
        start = b""
    handle.seek(0)
    return start.lstrip().startswith(b"WARC/")


def _quietly(records: Iterator[Any]) -> Iterator[Any]:
    """The records of a warcio iterator, with the warnings it writes straight to stderr
    about damaged records held back (they are counted in ``err_count`` and reported once)."""
    sink = io.StringIO()
    while True:
        with contextlib.redirect_stderr(sink):
            record = next(records, None)
        if record is None:
            return
        yield record


def _tolerate_missing_uris(records: Any) -> None:
    """Make warcio read a response record that has no WARC-Target-URI (it crashes with an
    AttributeError on one, ending the archive) as one without HTTP headers, so that the
    record can be reported and the rest of the archive read."""
    loader = getattr(records, "loader", None)
    parse = getattr(loader, "load_http_headers", None)
    if loader is not None and parse is not None:
        loader.load_http_headers = lambda rec_type, uri, stream, length: parse(rec_type, uri or "", stream, length)


_WRONG_LENGTH = (
    "is not followed by the record separator (a blank line twice, then the next WARC/ header or the end): "
    "its Content-Length is wrong; not read"
)


def _finish(records: Any, record: Any) -> str | None:
    """Read the rest of ``record`` (warcio would, before the next one) and say what is wrong
    with its length, or None: _CUT_SHORT if it ended before its Content-Length (warcio hands
    such a record over as if whole), _WRONG_LENGTH if the bytes after it are not the record
    separator (a Content-Length too short or too long).  Leaves warcio at the next record,
    holding back the warnings it writes to stderr (they are counted in ``err_count``).
    Reads ``_SCAN_CHUNK`` bytes at a time."""
    if records.member_info:  # already read to its end
        return None
    with contextlib.redirect_stderr(io.StringIO()):
        while record.raw_stream.read(_SCAN_CHUNK):
            pass
        if getattr(record.raw_stream, "limit", 0):
            records.read_to_end()
            return _CUT_SHORT
    return None if _read_separator(records) else _WRONG_LENGTH


def _read_separator(records: Any) -> bool:
    """After a record's block was read to its Content-Length: whether the bytes go on with
    two blank lines and then a WARC/ line or the end (of the file, or of the gzip member that
    holds the record).  Either way leaves warcio at the next record: after a wrong separator,
    at the next line that starts with WARC/ (see :func:`_skip_to_next_record`)."""
    reader = records.reader
    blank = 0
    line = reader.readline(_SCAN_CHUNK)
    while line in (b"\r\n", b"\n"):
        blank += 1
        line = reader.readline(_SCAN_CHUNK)
    if line and not line.startswith(b"WARC/"):
        _skip_to_next_record(records, at_line_start=line.endswith(b"\n"))
        return False
    records.next_line = line or None
    records.offset = records.fh.tell() - reader.rem_length() - len(line)
    records.member_info = (records.offset, 0)  # this record is read: warcio must not read on
    return blank >= 2


_CONTENT_LENGTH = re.compile(rb"[0-9]+")


def _undelimited(record: Any) -> str | None:
    """What is wrong with ``record``'s Content-Length if it is missing or no number (warcio
    takes it as 0, reads the record's body as the next record, and the archive breaks), else
    None."""
    length = record.rec_headers.get_header("Content-Length")
    if length is not None and _CONTENT_LENGTH.fullmatch(length.strip().encode("latin-1", "replace")):
        return None
    return "has no Content-Length" if length is None else f"has Content-Length {describe(length)}, which is no number"


def _skip_to_next_record(records: Any, at_line_start: bool = True) -> None:
    """After a record of unknown length: read on to the next line that starts a WARC record
    (or to the end of the gzip member, which ends a record in a .warc.gz), and make warcio
    go on from there.  Relies on warcio's ArchiveIterator internals (``reader``,
    ``next_line``, ``member_info``), as :func:`_tolerate_missing_uris` does.  Reads
    ``_SCAN_CHUNK`` bytes at a time, so memory stays bounded whatever the record's size."""
    reader = records.reader
    next_line = None
    while True:
        line = reader.readline(_SCAN_CHUNK)
        if not line:
            break
        if at_line_start and line.startswith(b"WARC/"):
            next_line = line
            break
        at_line_start = line.endswith(b"\n")
    records.next_line = next_line
    records.offset = records.fh.tell() - reader.rem_length() - len(next_line or b"")
    records.member_info = (records.offset, 0)  # this record is read: warcio must not read on


def read_warc(inputs: Iterable[Input], intake: Intake, max_bytes: int | None = None) -> Iterator[Item]:
    """``(WARC-Target-URI, text, None, where)`` per text record of WARC or WET archives
    (gzipped or not), read with warcio.  A damaged archive (a record cut short, bytes at
    the end that are no whole record, a record without a WARC-Type) is reported, as is a
    text record without a WARC-Target-URI to key it, or one whose payload is over
    ``max_bytes`` (read no further than that); the other records are kept.  Streams;
    O(archive size), memory O(max_bytes)."""
    from warcio.archiveiterator import ArchiveIterator
    from warcio.exceptions import ArchiveLoadFailed

    for item in inputs:
        start = intake.bytes_done
        raw = None
        try:
            raw = _open_listed(item)  # closed below
            is_warc = _starts_like_warc(raw)
        except OSError as exc:
            if raw is not None:
                raw.close()
            intake.fail(item.path, f"cannot read: {exc.strerror or exc}")
            continue
        if not is_warc:
            raw.close()
            intake.bytes_done = start + (item.size or 0)
            intake.fail(item.path, "not a WARC/WET archive (it does not start with a WARC/ header)")
            continue
        records = ArchiveIterator(raw)
        _tolerate_missing_uris(records)
        try:
            for number, record in enumerate(_quietly(records), 1):
                intake.bytes_done = start + _position(raw)
                record_start = records.offset
                uri = record.rec_headers.get_header("WARC-Target-URI")
                where = (
                    f"{item.path}: record "
                    f"{uri or record.rec_headers.get_header('WARC-Record-ID') or f'at byte {records.offset}'}"
                )
                problem = _undelimited(record)
                if problem is not None:
                    record_where = f"{item.path}: record {number} at byte {records.offset} ({uri or 'no URI'})"
                    intake.fail(record_where, f"{problem}; not read", item.path)
                    _skip_to_next_record(records)
                    continue
                if record.rec_type is None:
                    intake.fail(where, "has no WARC-Type header; the archive is damaged", item.path)
                    continue
                if not uri and record.rec_type in _DOCUMENT_RECORDS:
                    problem = _finish(records, record) or "has no WARC-Target-URI to key it"
                    intake.fail(where, f"{problem}; not read", item.path)
                    continue
                try:
                    text = _record_text(record, where, intake, item.path, max_bytes)
                except _Oversized:
                    assert max_bytes is not None
                    _finish(records, record)  # reads the rest, a chunk at a time
                    intake.fail(where, f"a payload of {too_large(record.length, max_bytes)}", item.path)
                    continue
                problem = _finish(records, record)
                if problem == _CUT_SHORT:
                    intake.fail(where, f"{_CUT_SHORT}; not read", item.path)
                    continue
                if problem is not None:
                    intake.fail(
                        f"{item.path}: record {number} at byte {record_start} ({uri or 'no URI'})", problem, item.path
                    )
                    continue
                if text is None:
                    continue
                key = _valid_key(uri, where, intake, item.path)
                if key is not None:
                    yield key, text, None, where
        except (ArchiveLoadFailed, OSError, EOFError, ValueError, AttributeError) as exc:
            # AttributeError: warcio trips over some malformed headers instead of refusing them.
            # warcio's advice runs over several lines and blank ones: one line of it.
            said = " ".join(str(exc).split()).removeprefix("ERROR: ") or type(exc).__name__
            intake.fail(item.path, f"not a readable WARC/WET archive ({said})")
        else:
            if records.err_count:
                intake.notice(item.path, f"{records.err_count} records have a wrong length; the archive may be damaged")
            if item.size is not None and records.offset < item.size:
                # warcio stops without a word at a record it cannot read whole.
                intake.fail(
                    item.path,
                    f"bytes {records.offset:,} to {item.size:,} are no whole record: "
                    "the archive is truncated or damaged",
                )
        finally:
            raw.close()
            intake.bytes_done = start + (item.size or 0)


@dataclass
class ExportHeader:
    """The settings line of the first JSONL export read: where it is (None if no header
    was read), and the k, blocks and fingerprint settings it gives.  ``stored`` is the
    fingerprint settings of the database being imported into, once it is open: every later
    header must give the same settings as it (or, without it, as the first header), since
    one database holds fingerprints of one kind only."""

    where: str | None = None
    k: int | None = None
    blocks: int | None = None
    fingerprinter: Fingerprinter | None = None
    stored: Fingerprinter | None = None
    #: Set once the database is open: a header read after it cannot give it settings.
    opened: bool = False


def read_export(
    inputs: Iterable[Input],
    intake: Intake,
    header: ExportHeader,
    file_format: str = "auto",
    max_bytes: int = DEFAULT_MAX_DOC_BYTES,
) -> Iterator[Item]:
    """``(key, fingerprint, meta, "FILE:LINE")`` from files written by ``simdb export``:
    JSONL (one ``{"key", "fingerprint", "meta" or "meta_msgpack"}`` object per line (see
    :func:`export_meta`), after an optional header
    line, the first of which fills ``header``) or TSV (as :func:`read_fingerprint_tsv`).
    With ``file_format="auto"`` a file is TSV if its name ends in ``.tsv`` (or
    ``.tsv.gz``), a Parquet shard of (key, fingerprint) rows if it ends in ``.parquet`` (see
    :func:`_read_parquet_shard`), else JSONL.  A file with a header this simdb cannot use (a newer format
    version, bad settings) is reported and not read.  A line longer than ``max_bytes`` is
    reported with its size and skipped, never read whole."""
    for item in inputs:
        chosen = export_format_of(item.path) if file_format == "auto" else file_format
        if chosen == "parquet":
            yield from _read_parquet_shard(item, intake, header)
        elif chosen == "tsv":
            yield from read_fingerprint_tsv([item], intake, header=header, max_bytes=max_bytes)
        else:
            yield from _read_export_jsonl(item, intake, header, max_bytes, named_by_format=file_format != "auto")


def export_format_of(path: str) -> str:
    """The export format a file's name says, for export and import alike: ``tsv`` for
    ``.tsv`` (or ``.tsv.gz``), ``parquet`` for ``.parquet``, else ``jsonl`` (stdout too)."""
    name = path.lower()
    if name.endswith((".tsv", ".tsv.gz")):
        return "tsv"
    return "parquet" if name.endswith(".parquet") else "jsonl"


#: The key of a Parquet export's metadata that holds its settings header (JSONL's line).
PARQUET_HEADER_KEY = b"simdb"
#: Rows per batch read from a Parquet shard (bounds memory whatever the shard's size).
PARQUET_BATCH_ROWS = 1 << 16


def _read_parquet_shard(item: Input, intake: Intake, header: ExportHeader) -> Iterator[Item]:
    """``(key, fingerprint, None, "FILE:ROW")`` from a Parquet file with a string ``key``
    column and a uint64 ``fingerprint`` column (int64 is read as the same 64 bits), as
    ``simdb export --format parquet`` and :mod:`simdb.distributed` jobs write: batch output
    imports without re-hashing.  The settings header an export keeps in the file's
    metadata (:data:`PARQUET_HEADER_KEY`) fills ``header`` as a JSONL export's line does.
    Needs pyarrow.  A file that cannot be used (no pyarrow, not Parquet, missing or
    mistyped columns, a header that cannot be used here) is reported once and not read; a
    row with a missing value or a key simdb refuses is reported alone.  Memory O(batch)."""
    name = item.name
    if item.path == "-":
        intake.fail(name, "Parquet cannot be read from stdin; name the file", name)
        return
    try:
        import pyarrow.parquet  # noqa: F401 -- only whether it is there; _parquet_rows reads with it
    except ImportError:
        intake.fail(name, f"reading Parquet needs pyarrow ({DASK_INSTALL_HINT})", name)
        return
    if item.size is None:  # a pipe: Parquet is read from its end, and a FIFO's open waits
        intake.fail(name, "a Parquet file must be a regular file (it is read from its end)", name)
        return
    try:
        source = _open_listed(item)
    except OSError as exc:
        intake.fail(name, f"cannot read: {exc.strerror or exc}", name)
        return
    with source:
        yield from _parquet_rows(source, item, intake, header)


def _parquet_rows(source: IO[bytes], item: Input, intake: Intake, header: ExportHeader) -> Iterator[Item]:
    """The rows of :func:`_read_parquet_shard` from the opened file ``source``."""
    import pyarrow as pa  # imported already: the caller checked it is installed
    import pyarrow.parquet as pq

    name = item.name
    try:
        shard = pq.ParquetFile(source)
        schema = shard.schema_arrow
    except (OSError, pa.ArrowException) as exc:
        intake.fail(name, f"not a readable Parquet file ({exc})", name)
        return
    types = {column: schema.field(column).type for column in ("key", "fingerprint") if column in schema.names}
    key_type = types.get("key")
    if key_type is not None and pa.types.is_dictionary(key_type):
        # pandas' categorical strings, which simdb.distributed reads too.
        key_type = key_type.value_type
    string_types = (pa.types.is_string, pa.types.is_large_string, getattr(pa.types, "is_string_view", None))
    if key_type is None or not any(is_type is not None and is_type(key_type) for is_type in string_types):
        intake.fail(name, "a Parquet shard needs a string 'key' column (plain or dictionary-encoded)", name)
        return
    if types.get("fingerprint") not in (pa.uint64(), pa.int64()):
        intake.fail(name, "a Parquet shard needs a uint64 (or int64) 'fingerprint' column", name)
        return
    settings_line = (schema.metadata or {}).get(PARQUET_HEADER_KEY)
    if settings_line is not None:
        read = _header_line(settings_line, name, intake, name, header, True)
        if read is False:  # the key is simdb's: what it holds can only be a header
            intake.fail(
                name,
                f"damaged export header in its {PARQUET_HEADER_KEY.decode()!r} metadata; the file was not read",
                name,
            )
        if read is not True:
            return
        intake.notice(
            name,
            "a Parquet export holds keys and fingerprints only: its new documents are stored without meta and "
            "sketches (similarities are then estimated from the fingerprints, more coarsely), and a stored one "
            "with the same fingerprint is kept as it is; a JSONL or TSV export keeps both",
            name,
        )
    row = 0
    try:
        for batch in shard.iter_batches(batch_size=PARQUET_BATCH_ROWS, columns=["key", "fingerprint"]):
            keys = batch.column(0).to_pylist()
            values = batch.column(1).cast(pa.uint64(), safe=False).to_pylist()  # int64: the same bits
            for key, fingerprint in zip(keys, values):
                row += 1
                where = f"{name}:{row}"
                if key is None or fingerprint is None:
                    intake.fail(where, "missing key or fingerprint", name)
                    continue
                checked = _valid_key(key, where, intake, name)
                if checked is not None:
                    yield checked, BareFingerprint(fingerprint), None, where
    except (OSError, pa.ArrowException) as exc:
        intake.fail(f"{name}:{row + 1}", f"unreadable Parquet data ({exc}); the rest of the file was not read", name)
    if item.size:
        intake.bytes_done += item.size


def _read_header(record: dict[str, Any], where: str, header: ExportHeader) -> str | None:
    """Check an export header line; fill ``header`` from it if it is the first.  Returns
    what is wrong with it, or None."""
    version = record.get("format_version", 1)
    if not is_int(version) or version < 1:
        return f"export format_version {describe(version)} is not a format version"
    if version > EXPORT_FORMAT_VERSION:
        return (
            f"export format_version {version} is newer than this simdb reads "
            f"(up to {EXPORT_FORMAT_VERSION}); import it with a newer simdb"
        )
    k, blocks, settings = record.get("k"), record.get("blocks"), record.get("fingerprinter")
    for field_name, value in (("k", k), ("blocks", blocks)):
        if value is not None and not is_int(value):
            return f"header {field_name}={describe(value)} is not an integer"
    fingerprinter = None
    if settings is not None:
        from simdb.fingerprint import Fingerprinter

        try:
            fingerprinter = Fingerprinter.from_dict(unplain(settings))
        except ValueError as exc:  # InvalidInputError, or bad base64 in an IDF table
            # The library's words (stopwords='french'): import has no options of these names.
            reason = exc.message if isinstance(exc, SimdbError) else exc
            return f"header fingerprinter settings cannot be used: {reason}"
    if fingerprinter is not None and header.opened and header.stored is None:
        # Documents before it were imported into a database without settings, which a
        # header now cannot give it: its sketches would be dropped and its fingerprints
        # judged as others are (found by a probe, which was told the file had no header).
        return (
            "its settings header comes after documents imported without fingerprint settings, into a database "
            "that has none; import this file first, or into a database of its own"
        )
    if header.where is None:
        header.where, header.k, header.blocks, header.fingerprinter = where, k, blocks, fingerprinter
    expected, named = (header.stored, "the database's") if header.stored is not None else (header.fingerprinter, None)
    if fingerprinter is not None and expected is not None and fingerprinter != expected:
        return other_settings(fingerprinter, expected, named or f"those of {header.where}")
    return None


def other_settings(given: Fingerprinter, expected: Fingerprinter, expected_name: str) -> str:
    """Why an export whose fingerprints ``given`` made cannot go where ``expected`` (named
    ``expected_name``) makes them: one database holds fingerprints of one kind."""
    return (
        f"its fingerprints were made with other settings ({settings_words(given.to_dict())}) than "
        f"{expected_name} ({settings_words(expected.to_dict())}); import it into a database of its own"
    )


def settings_words(settings: dict[str, Any] | None) -> str:
    """Fingerprint settings (``Fingerprinter.to_dict()``, or None) in words, for ``stats``,
    ``hash`` and an import's settings that do not match the database's."""
    if settings is None:
        return "none yet (set by the first text added)"
    parts = [
        f"{settings.get('kind', 'simhash')}",
        f"{settings.get('features')}",
        f"ngram {settings.get('ngram')}",
        f"{settings.get('bits')} bits",
    ]
    if settings.get("kind", "simhash") == "simhash":  # a minhash fingerprints the set: no weights
        parts.append(f"{settings.get('weights')} weights")
    if settings.get("stopwords"):
        parts.append(f"stopwords {settings['stopwords']}")
    if settings.get("idf"):
        parts.append("IDF table")
    normalization = settings.get("normalization", 1)
    if normalization != NORMALIZATION:  # said only of the settings of an older database
        parts.append(f"text normalization version {normalization}")
    return ", ".join(parts)


_EXPORT_HEADER = re.compile(rb'"simdb"\s*:\s*"export"')
#: What :func:`_header_line` returns for a header that stops its file (reported).
_STOP_FILE = None


def _header_line(line: bytes, where: str, intake: Intake, name: str, header: ExportHeader, first: bool) -> bool | None:
    """Read ``line`` of an export (JSONL or TSV) as its settings header if it is one.
    True: a header, read (the line holds no document); False: no header; ``_STOP_FILE``
    (None): a damaged header, or one whose settings cannot be used here, reported, and the
    rest of the file is not to be read.  A header may come later than the first line too,
    where exports were joined into one stream ((simdb export --db a; simdb export --db b) >
    both.jsonl): the documents after it are that export's, checked against the settings as
    a file's would be.  A regex search, and a JSON parse of a line it matches."""
    if not _EXPORT_HEADER.search(line):
        return False
    not_read = "the file was not read" if first else "the rest of the file was not read"
    # A damaged header must not let the documents in with default settings.
    try:
        record = parse_json(line.decode("utf-8"))
    except (JSONInputError, UnicodeDecodeError) as exc:
        intake.fail(where, f"damaged export header ({exc}); {not_read}", name)
        return _STOP_FILE
    if not isinstance(record, dict):
        intake.fail(where, f"damaged export header (not a JSON object); {not_read}", name)
        return _STOP_FILE
    if record.get("simdb") != "export":  # a document whose meta holds those words
        return False
    problem = _read_header(record, where, header)
    if problem is not None:
        intake.fail(where, f"{problem}; {not_read}", name)
        return _STOP_FILE
    return True


def _read_export_jsonl(
    item: Input, intake: Intake, header: ExportHeader, max_bytes: int, named_by_format: bool = False
) -> Iterator[Item]:
    """JSONL export lines (see :func:`read_export`); ``named_by_format``: --format jsonl
    was given, so a file that is not JSON is not said to lack a .tsv name."""
    name = item.name
    first = True
    after_header = False  # the line before was a settings header
    for number, where, line in _nonblank_lines(item, intake, max_bytes):
        if number == 1 and line.startswith(codecs.BOM_UTF8):  # an editor's mark, as TSV drops it
            line = line[len(codecs.BOM_UTF8) :]
        if first and not line.lstrip().startswith(b"{"):
            # Not JSON at all: read the rest as TSV lines would be guessing; say so once.
            why = (
                "not an export JSONL file (lines of {...})"
                if named_by_format
                else "neither an export JSONL file (lines of {...}) nor named .tsv or .parquet"
            )
            if line.startswith(b"\x1f\x8b"):
                why += "; it is gzip-compressed: name the file (FILE.jsonl.gz), or pipe it through gunzip"
            elif item.path == "-" and not named_by_format:
                why += "; stdin has no name to tell its format by: give --format tsv for a TSV export"
            intake.fail(name, why, name)
            return
        read_as_header = _header_line(line, where, intake, name, header, first)
        if read_as_header is _STOP_FILE:
            return
        if read_as_header:
            first = False
            after_header = True
            continue
        if after_header and b"\t" in line and not line.lstrip().startswith(b"{"):
            # A TSV export's header is this same JSON line: its documents are tab-separated.
            intake.fail(name, "is a TSV export read as JSONL: name it .tsv, or give --format tsv", name)
            return
        after_header = False
        record = _json_object(line, where, intake, name, KEPT_NOWHERE, ("key",))
        if record is None:
            continue
        key, fingerprint = record.get("key"), record.get("fingerprint")
        if first and "key" not in record and "fingerprint" not in record:
            # Every line would fail for want of a key: say once what the file is.
            add = f"simdb add --jsonl {shlex.quote(name)}"
            if "text" in record:
                intake.fail(name, f"holds documents with text, not an export; add them with `{add}`", name)
            else:
                intake.fail(
                    name,
                    f"is not a simdb export: its first object has no 'key' or 'fingerprint' (its fields: "
                    f"{_field_names(record)}); documents with text are added with `{add} --text-field NAME`",
                    name,
                )
            return
        first = False
        if not isinstance(key, str):
            intake.fail(where, "no string 'key' field", name)
            continue
        try:
            value = check_fingerprint(parse_fingerprint(fingerprint) if isinstance(fingerprint, str) else fingerprint)
        except InvalidInputError as exc:
            intake.fail(where, error_message(exc, hint=False), name)
            continue
        if "meta_msgpack" in record and "meta" in record:  # export writes one: which is right is unknown
            intake.fail(where, "holds both 'meta' and 'meta_msgpack'; an export line has one", name)
            continue
        if "meta_msgpack" in record:
            meta = _msgpack_meta(record["meta_msgpack"], where, intake, name)
        else:
            meta = _checked_meta(record.get("meta"), where, intake, name, decode_bytes=True)
        if meta is _REFUSED:
            continue
        item_value: int | SketchedFingerprint = value
        if record.get("sketch") is not None:  # null, as absent: no sketch
            sketch = _read_sketch(record["sketch"], where, intake, name)
            if sketch is None:
                continue
            item_value = SketchedFingerprint(value, sketch)
        checked = _valid_key(key, where, intake, name)
        if checked is not None:
            yield checked, item_value, meta, where


@dataclass(frozen=True)
class JsonlFields:
    """The JSONL fields holding a line's key and text (``--id-field``, ``--text-field``)."""

    id_field: str = "id"
    text_field: str = "text"


def read_documents(
    inputs: Iterable[Input],
    intake: Intake,
    max_bytes: int | None = None,
    *,
    encoding: str | None = None,
    fields: JsonlFields | None = None,
) -> Iterator[Item]:
    """Texts of the PATH inputs of ``simdb add`` and ``simdb query``, in order: each text
    file as one document (decoded with ``encoding`` when it has no byte-order mark), each
    HTML file (by its name: :data:`HTML_SUFFIXES`) as one document of its visible text, each
    WARC/WET archive as one document per text record, each JSONL file as one per line
    (``fields`` name the key and text); documents over ``max_bytes`` are reported and
    skipped."""
    fields = fields or JsonlFields()
    for item in inputs:
        if item.kind == WARC:
            yield from read_warc([item], intake, max_bytes)
        elif item.kind == JSONL:
            yield from read_jsonl(
                [item], intake, id_field=fields.id_field, text_field=fields.text_field, max_bytes=max_bytes
            )
        elif item.kind == HTML:
            for key, page, meta, where in read_text_files([item], intake, max_bytes, encoding):
                yield key, visible_text(page), meta, where
        else:
            yield from read_text_files([item], intake, max_bytes, encoding)
