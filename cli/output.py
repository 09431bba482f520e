"""Printing for the command line: the one writer of records (:func:`write_records`: table,
TSV, CSV or JSON lines), streamed tables, bar charts, sizes, and the progress bar of
``simdb add``.

Results go to stdout, diagnostics and progress to stderr.  ``sys.stdout`` and
``sys.stderr`` are looked up at each call, not at import, so test runners that swap them
see everything.
"""

from __future__ import annotations

import base64
import csv
import errno
import json
import os
import re
import sys
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager, suppress
from itertools import chain, islice
from typing import IO, Any, NamedTuple

from rich.cells import cell_len
from rich.console import Console
from rich.progress import (
    BarColumn,
    Progress,
    ProgressColumn,
    SpinnerColumn,
    Task,
    TaskProgressColumn,
    TextColumn,
    TimeRemainingColumn,
)
from rich.text import Text

from simdb import InvalidInputError
from simdb.keys import describe

#: Rows read ahead to size a streamed table's columns; later rows never change the widths.
WIDTH_SAMPLE_ROWS = 200
BAR_WIDTH = 40
_EIGHTHS = " ▏▎▍▌▋▊▉"


def _plain(value: Any) -> Any:
    """``value`` as JSON-ready data: bytes become ``{"base64": ...}``."""
    if isinstance(value, (bytes, bytearray, memoryview)):
        return {"base64": base64.b64encode(bytes(value)).decode("ascii")}
    if isinstance(value, dict):
        return {str(name): _plain(part) for name, part in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(part) for part in value]
    return value


def unplain(value: Any) -> Any:
    """The inverse of the bytes encoding of :func:`json_line`; text that is not base64
    raises ``binascii.Error`` (a ValueError)."""
    if isinstance(value, dict):
        if set(value) == {"base64"} and isinstance(value["base64"], str):
            return base64.b64decode(value["base64"], validate=True)
        return {name: unplain(part) for name, part in value.items()}
    if isinstance(value, list):
        return [unplain(part) for part in value]
    return value


#: The characters JSON leaves raw that still end a line for Python's ``str.splitlines`` (and
#: for JavaScript before ES2019): escaped, so that every JSON line is one line to any reader.
_UNICODE_LINE_BREAKS = str.maketrans({code: f"\\u{code:04x}" for code in (0x85, 0x2028, 0x2029)})


def json_line(value: Any) -> str:
    """One compact JSON line (UTF-8 kept as is but for the Unicode line breaks, bytes as
    base64).  A value holding NaN or an infinity, which JSON has no way to write, raises
    InvalidInputError: printing it as Python does (NaN, Infinity) would make the line invalid
    JSON."""
    try:
        line = json.dumps(_plain(value), ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    except ValueError:
        raise InvalidInputError(f"{describe(value)} holds NaN or an infinity, which JSON cannot carry") from None
    return line.translate(_UNICODE_LINE_BREAKS)


_muted = False  # stdout was closed under keep_going_if_stdout_closes(): drop the output
_keep_going = False


@contextmanager
def keep_going_if_stdout_closes() -> Iterator[None]:
    """Within this (a context manager, or a decorator), a closed stdout (``simdb add ... |
    head``) mutes the rest of the output instead of raising BrokenPipeError, for work whose
    point is not its output; outside it, the BrokenPipeError ends the command (quietly: see
    :func:`simdb_cli.app.guarded`)."""
    global _keep_going, _muted
    _keep_going, _muted = True, False
    try:
        yield
    finally:
        try:
            _write("flush")  # what is still buffered fails here if the reader is gone
        finally:
            _keep_going = False


def silence_stdout() -> None:
    """Point stdout at the null device, so nothing written later (nor Python's flush at
    exit) fails on a closed pipe."""
    _point_at_null_device(sys.stdout)


def _point_at_null_device(stream: IO[str] | None) -> None:
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, stream.fileno())  # type: ignore[union-attr]
    except (OSError, ValueError, AttributeError):
        pass  # no stream, or not a real file (a test runner's buffer): nothing to silence


def tolerate_narrow_encodings() -> None:
    """Let stdout and stderr write any text in any locale: where their encoding cannot
    write every character (LC_ALL=C without Python's UTF-8 mode, a Latin-1 locale), a
    character it cannot write is written as a backslash escape, where the first such key
    or histogram bar ended the command with an UnicodeEncodeError."""
    for stream in (sys.stdout, sys.stderr):
        encoding = (getattr(stream, "encoding", None) or "").lower().replace("-", "").replace("_", "")
        if stream is not None and not encoding.startswith("utf") and hasattr(stream, "reconfigure"):
            with suppress(ValueError, OSError):  # a stream already closed
                stream.reconfigure(errors="backslashreplace")


def stdout() -> IO[str]:
    """``sys.stdout``; a stdout closed before the command started (``simdb ... >&-``: Python
    then has none) raises BrokenPipeError, so it counts as a closed pipe."""
    if sys.stdout is None:
        raise BrokenPipeError(errno.EBADF, "stdout is closed")
    return sys.stdout


def _write(method: str, *args: str) -> None:
    """Call ``method`` of :func:`stdout` with ``args``."""
    global _muted
    if _muted:
        return
    try:
        getattr(stdout(), method)(*args)
    except BrokenPipeError:
        if not _keep_going:
            raise
        _muted = True
        silence_stdout()
    except OSError as error:  # a full disk behind a redirect: say that it was stdout
        raise OSError(error.errno, error.strerror, "<stdout>") from None


def out(line: str = "") -> None:
    """Write one line of results to stdout."""
    _write("write", line + "\n")


def write_raw(text: str) -> None:
    """Write ``text`` to stdout as it is (no line break added)."""
    _write("write", text)


def flush() -> None:
    """Flush stdout, so a failing write (a full disk) is reported while the command still
    can, not ignored by Python at exit.  With no stdout (closed before the command
    started) nothing was written, so there is nothing to fail: ``export -o FILE >&-`` is
    fine."""
    if sys.stdout is not None:
        _write("flush")


def err(line: str) -> None:
    """Write one diagnostic line to stderr.  Where stderr cannot take it (a pipe whose
    reader is gone, ``2>&1 | head``; a descriptor closed, ``2>&-``; a full disk or a lost
    terminal behind it), the line is dropped and stderr is pointed at the null device, where
    later lines go: diagnostics must not end the work they describe, which an add that
    stopped at its first notice did (exit 0, nothing stored); the exit code still tells."""
    try:
        sys.stderr.write(line + "\n")
        sys.stderr.flush()
    except (OSError, ValueError, AttributeError):  # AttributeError: no stderr at all
        _point_at_null_device(sys.stderr)


def hex_fingerprint(value: int, bits: int = 64) -> str:
    return f"0x{value:0{bits // 4}x}"


def human_duration(seconds: float) -> str:
    """A duration in the largest unit that keeps it readable: "40 s", "3 minutes", "2.5 hours"."""
    if seconds < 90:
        return f"{seconds:.0f} s"
    if seconds < 90 * 60:
        return f"{seconds / 60:.0f} minutes"
    return f"{seconds / 3600:.1f} hours"


def human_bytes(size: float | None) -> str:
    if size is None:
        return "-"
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(size) < 1024 or unit == "TiB":
            return f"{size:.0f} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    raise AssertionError("unreachable")


#: Control characters (C0, DEL, C1) as visible escapes, for text meant for a terminal: a key
#: read from a JSONL id or a WARC URI may hold ESC sequences that would clear the screen or
#: recolour it, and a line break or tab would break a table's rows and columns.  The bidi
#: controls go too: an RLO (U+202E) in one key reverses what the terminal shows after it,
#: other columns included, and the Unicode line and paragraph separators end lines for
#: readers that follow Unicode.
_BIDI_CONTROLS = (0x061C, 0x200E, 0x200F, *range(0x202A, 0x202F), *range(0x2066, 0x206A))
CONTROL_ESCAPES = str.maketrans(
    {
        **{code: f"\\x{code:02x}" for code in (*range(0x20), *range(0x7F, 0xA0))},
        **{code: f"\\u{code:04x}" for code in (*_BIDI_CONTROLS, 0x2028, 0x2029)},
        ord("\n"): "\\n",
        ord("\r"): "\\r",
        ord("\t"): "\\t",
    }
)


_NEEDS_QUOTING = re.compile("^\\$'|[" + "".join(f"\\U{code:08x}" for code in CONTROL_ESCAPES) + "]")
# Inside $'...', as CONTROL_ESCAPES but for the C1 controls: bash reads "\x85" as the byte
# 0x85, and "\u0085" as the character.
_SHELL_ESCAPES = {**CONTROL_ESCAPES, **{code: f"\\u{code:04x}" for code in range(0x80, 0xA0)}}


def shown(text: str) -> str:
    """``text`` as a table, a list of keys or a line of ``add`` shows it: as it is, unless it
    holds a character :data:`CONTROL_ESCAPES` escapes or starts as a quoted one does; then
    quoted as a shell's ``$'...'``, its backslashes and single quotes escaped too, so that
    no two texts look alike (a key with a line break and one with a backslash and an "n"
    were both ``a\\nb``, and ``keys | remove -`` removed the second for the first) and bash
    reads it back as the text."""
    if _NEEDS_QUOTING.search(text) is None:
        return text
    return "$'" + text.replace("\\", "\\\\").replace("'", "\\'").translate(_SHELL_ESCAPES) + "'"


_SHELL_ESCAPE = re.compile(r"\\(?:([\\'nrt])|x([0-9a-f]{2})|u([0-9a-f]{4}))")
_SHELL_CHARACTERS = {"\\": "\\", "'": "'", "n": "\n", "r": "\r", "t": "\t"}


def unshown(line: str) -> str:
    """The text of a line :func:`shown` printed (the inverse: ``unshown(shown(t)) == t``),
    so that ``simdb keys | simdb remove -`` names every key, quoted ones included; a line
    not in ``$'...'`` is the text itself (:func:`shown` quotes every text that starts so)."""
    if not (line.startswith("$'") and line.endswith("'") and len(line) >= 3):
        return line

    def character(escape: re.Match[str]) -> str:
        plain, byte, code = escape.groups()
        return _SHELL_CHARACTERS[plain] if plain else chr(int(byte or code, 16))

    return _SHELL_ESCAPE.sub(character, line[2:-1])


def _cells(text: str) -> int:
    """The width of ``text`` in terminal cells: a CJK character takes two, a combining mark
    none.  Its length for ASCII, the common case, 30 times cheaper than rich's count."""
    return len(text) if text.isascii() else cell_len(text)


def table(
    header: Sequence[str], rows: Iterable[Sequence[Any]], right_aligned: Sequence[int] = (), *, show_header: bool = True
) -> int:
    """Print ``rows`` under ``header`` (unless not ``show_header``, or there are no rows) as aligned columns,
    streaming: widths come from the first :data:`WIDTH_SAMPLE_ROWS` rows, so a million rows
    never sit in memory.  The last column is never padded; a cell with control characters
    is quoted (:func:`shown`).  Returns the number of rows."""
    iterator: Iterator[Sequence[Any]] = iter(rows)
    sample = [[shown(str(cell)) for cell in row] for row in islice(iterator, WIDTH_SAMPLE_ROWS)]
    widths = [max([_cells(name)] + [_cells(row[column]) for row in sample]) for column, name in enumerate(header)]
    last = len(header) - 1

    def render(cells: Sequence[str]) -> str:
        parts = []
        for column, cell in enumerate(cells):
            if column == last:
                parts.append(cell)
                continue
            padding = " " * (widths[column] - _cells(cell))
            parts.append(padding + cell if column in right_aligned else cell + padding)
        line = "  ".join(parts)
        # An empty last cell (a histogram's bar of a zero count) leaves only padding behind.
        return line if cells[last] else line.rstrip(" ")

    if show_header and sample:  # a table of nothing is no table: the caller says what was not found
        out(render(list(header)))
    count = 0
    for row in chain(sample, ([shown(str(cell)) for cell in row] for row in iterator)):
        out(render(row))
        count += 1
    return count


#: The output formats of the commands that print records (``--format``).
FORMATS = ("table", "tsv", "csv", "json")
#: What TSV cannot carry in a cell: its separators.
_TSV_BREAKS = ("\t", "\n", "\r")


class Column(NamedTuple):
    """A column of :func:`write_records`: its header and the record field it shows (or
    ``value``, which computes it from the whole record), how the table format shows a value
    (``str`` by default; TSV and CSV write every value in full, see :func:`machine_cell`),
    and whether the table right-aligns it."""

    name: str
    shown: Callable[[Any], str] = str
    right: bool = False
    value: Callable[[Mapping[str, Any]], Any] | None = None

    def of(self, record: Mapping[str, Any]) -> Any:
        """This column's value in ``record``."""
        return self.value(record) if self.value is not None else record[self.name]


def machine_cell(value: Any) -> str:
    """``value`` as a TSV or CSV cell, exactly: floats in full (the shortest text that reads
    back as the same float), None as an empty cell, booleans as true/false, lists and dicts
    as JSON."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (dict, list, tuple)):
        return json_line(value)
    return str(value)


def tsv_cell(column: str, value: Any) -> str:
    """``value`` as a TSV cell; a value holding a tab or a line break (which TSV has no way to
    write: it has no quoting) raises InvalidInputError naming it and the formats that can."""
    cell = machine_cell(value)
    if any(mark in cell for mark in _TSV_BREAKS):
        raise InvalidInputError(
            f"{column} {cell!r} holds a tab or line break, which TSV cannot carry", "use --format csv or --format json"
        )
    return cell


class _Stdout:
    """A file-like object for :mod:`csv` that writes through :func:`write_raw`."""

    def write(self, text: str) -> int:
        write_raw(text)
        return len(text)


def write_records(
    records: Iterable[Mapping[str, Any]], columns: Sequence[Column], file_format: str, *, header: bool = True
) -> int:
    """Print ``records`` on stdout in ``file_format`` (one of :data:`FORMATS`), streaming;
    return how many there were.  Every command that prints records goes through here.

    - table: aligned columns (see :func:`table`), values shown by each column's ``shown``.
    - tsv: tab-separated ``columns``, values in full; a record with a tab or line break in a
      value is left out (see :func:`tsv_cell`) rather than escaped, so every TSV line is one
      record, and once the others are printed an InvalidInputError names it.
    - csv: RFC 4180 via :mod:`csv` (values with commas, quotes or line breaks are quoted).
    - json: one JSON object per record, with every field of the record (also those no
      column shows, such as a document's meta).

    ``header`` (default on) prints the column names first, for table, tsv and csv.
    Memory: O(1) per record, plus the table format's width sample."""
    names = [column.name for column in columns]
    count = 0
    if file_format == "json":
        for record in records:
            out(json_line(record))
            count += 1
        return count
    if file_format == "table":
        rows = ([column.shown(column.of(record)) for column in columns] for record in records)
        right = [index for index, column in enumerate(columns) if column.right]
        return table(names, rows, right_aligned=right, show_header=header)
    if file_format == "csv":
        writer = csv.writer(_Stdout(), lineterminator="\n")
        # csv quotes a field holding a character of the line terminator; a lone carriage
        # return ends a record for readers too (RFC 4180), so its rows are quoted whole.
        quoting_all = csv.writer(_Stdout(), lineterminator="\n", quoting=csv.QUOTE_ALL)
        if header:
            writer.writerow(names)
        for record in records:
            row = [machine_cell(column.of(record)) for column in columns]
            (quoting_all if any("\r" in str(cell) for cell in row) else writer).writerow(row)
            count += 1
        return count
    if file_format != "tsv":
        raise InvalidInputError(f"output format {file_format!r} is not one of {', '.join(FORMATS)}")
    if header:
        out("\t".join(names))
    first_refusal: InvalidInputError | None = None
    refused = 0
    for record in records:
        try:
            line = "\t".join(tsv_cell(column.name, column.of(record)) for column in columns)
        except InvalidInputError as refusal:
            # One key TSV cannot carry should not cost the reader every other record: the
            # rest are printed, and the run ends with an error that says what was left out.
            first_refusal = first_refusal or refusal
            refused += 1
            continue
        out(line)
        count += 1
    if first_refusal is not None:
        first = ": " if refused == 1 else ", the first because "
        raise InvalidInputError(
            f"{counted(refused, 'record')} left out of the TSV output{first}{first_refusal.message}",
            first_refusal.hint,
        )
    return count


def bar(value: float, largest: float, width: int = BAR_WIDTH) -> str:
    """A horizontal bar of ``value`` against ``largest``, in eighths of a character; any
    non-zero value shows at least a sliver."""
    if largest <= 0 or value <= 0:
        return ""
    eighths = max(1, round(value / largest * width * 8))
    return "█" * (eighths // 8) + (_EIGHTHS[eighths % 8] if eighths % 8 else "")


def histogram(
    label: str,
    counts: Sequence[int],
    columns: Sequence[tuple[str, Sequence[Any]]] = (),
    first_column: str = "distance",
    labels: Sequence[str] | None = None,
    *,
    show_header: bool = True,
) -> None:
    """A bar chart with one row per count: its row label (``labels``, else the distance
    0..len(counts)-1, headed ``first_column``), the count named ``label``, any extra
    ``columns``, and a bar scaled to the largest count."""
    largest = max(counts, default=0)
    header = [first_column, label, *(name for name, _ in columns), ""]
    names = labels if labels is not None else range(len(counts))
    rows = [
        [name, f"{count:,}", *(f"{values[row]:,}" for _, values in columns), bar(count, largest)]
        for row, (name, count) in enumerate(zip(names, counts))
    ]
    table(header, rows, right_aligned=range(len(header) - 1), show_header=show_header)


class _DocumentRate(ProgressColumn):
    """Documents stored so far and documents per second since the start."""

    def render(self, task: Task) -> Text:
        documents = task.fields.get("documents", 0)
        elapsed = task.elapsed or 0.0
        rate = documents / elapsed if elapsed > 0 else 0.0
        return Text(f"{documents:,} docs  {rate:,.0f} docs/s", style="progress.data.speed")


def progress_bar(enabled: bool) -> Progress:
    """The ``simdb add`` progress bar on stderr: share of input bytes read, documents
    stored, documents per second and ETA.  Drawn only on a terminal and when ``enabled``."""
    console = Console(stderr=True)
    return Progress(
        SpinnerColumn(),
        TextColumn("[progress.description]{task.description}"),
        BarColumn(),
        TaskProgressColumn(),
        _DocumentRate(),
        TimeRemainingColumn(),
        console=console,
        disable=not (enabled and console.is_terminal),
        transient=False,
    )


def counted(count: int, singular: str, plural: str | None = None) -> str:
    """``count`` and the noun that goes with it: "1 document", "2 documents", "1,000 keys"."""
    return f"{count:,} {singular if count == 1 else plural or singular + 's'}"


def named_some(names: list[str], total: int) -> str:
    """Up to ``len(names)`` names of ``total`` things, quoted, then "and N more"."""
    from simdb.keys import describe

    shown = ", ".join(describe(name) for name in names)
    return shown + (f" and {total - len(names):,} more" if total > len(names) else "")
