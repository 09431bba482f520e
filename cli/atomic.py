"""Output files that are replaced whole or not at all."""

from __future__ import annotations

import gzip
import io
import os
import re
import stat
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import IO

import simdb
from simdb.storage import partial_beside, replace_durably

from . import output
from .errors import NO_SPACE
from .filekeys import link_target


def write_failed(path: str, error: OSError) -> simdb.SimdbError:
    """The error of an output that could not be written: DiskFullError (exit code 3, as for
    a database write) when the disk or a quota ran out, else InvalidInputError naming
    ``path`` (exit code 2: the output the user named)."""
    reason = error.strerror or str(error)
    if error.errno in NO_SPACE:
        return simdb.DiskFullError(f"cannot write {path}: {reason}", "free space there or write elsewhere")
    return simdb.InvalidInputError(f"cannot write {path}: {reason}")


@contextmanager
def output_file(path: str) -> Iterator[IO[str]]:
    """A text stream for ``path`` ("-" is stdout), gzipped when ``path`` ends in ``.gz`` (as
    import reads it).  A regular file is written under a temporary name beside it and
    renamed over ``path`` only when the block ends without an error, so a failed export
    never truncates an earlier one, and synced before the rename, so a power loss leaves one
    or the other whole; the temporary is removed on failure.  Costs one rename, two fsyncs;
    a device or FIFO is written directly.  A symbolic link (``/dev/stdout`` included) is
    followed: what it names is replaced, never the link."""
    if path == "-":
        yield output.stdout()
        output.flush()  # inside the command's error handling, naming stdout
        return
    target = Path(path)
    try:
        existing = target.stat()
    except FileNotFoundError:
        existing = None
    except OSError as error:
        raise write_failed(path, error) from None
    descriptor = _descriptor_named(path)
    if descriptor is not None:
        # One of this process's descriptors (/dev/stdout redirected to a file): written
        # through a copy of it, as the shell's own writes go, so ``>> log`` gains the export
        # and ``{ echo head; simdb export -o /dev/stdout; echo foot; } > f`` keeps all three.
        with _text_stream(os.dup(descriptor), path) as stream:
            yield stream
        return
    if existing is not None and not stat.S_ISREG(existing.st_mode):
        with _text_stream(path, path) as stream:
            yield stream
        return
    # The temporary goes beside the file the link names, and is renamed over that file.
    target = Path(os.path.realpath(path))
    try:
        handle, temporary = partial_beside(target)
    except OSError as error:
        raise write_failed(path, error) from None
    try:
        with _text_stream(handle, path) as stream:
            yield stream
        replace_durably(temporary, target)
    except BaseException:
        with suppress(OSError):
            os.unlink(temporary)
        raise


_DESCRIPTOR_PATH = re.compile(r"/(?:dev|proc/self|proc/[0-9]+)/fd/([0-9]+)")
_STANDARD_STREAMS = {"/dev/stdin": 0, "/dev/stdout": 1, "/dev/stderr": 2}


def _descriptor_named(path: str) -> int | None:
    """The descriptor of this process that ``path`` names (``/dev/stdout``, ``/dev/fd/N``,
    ``/proc/self/fd/N``), itself or through links, else None.  A readlink or two."""
    current = os.path.abspath(path)
    for _ in range(8):
        if current in _STANDARD_STREAMS:
            return _STANDARD_STREAMS[current]
        named = _DESCRIPTOR_PATH.fullmatch(current)
        if named is not None and (
            not current.startswith("/proc/") or current.split("/")[2] in ("self", str(os.getpid()))
        ):
            return int(named.group(1))
        if not os.path.islink(current):
            return None
        current = link_target(current)
    return None


@contextmanager
def _text_stream(file: int | str, path: str) -> Iterator[IO[str]]:
    """UTF-8 text with ``\\n`` line ends into ``file`` (a descriptor or a path), through gzip
    when ``path`` (the name the output gets) ends in ``.gz``, at level 6 (gzip's default)."""
    if not path.lower().endswith(".gz"):
        with open(file, "w", encoding="utf-8", newline="\n") as stream:
            yield stream
        return
    with (
        open(file, "wb") as raw,
        # The name inside the gzip header is the output's, not the temporary's.
        gzip.GzipFile(filename=Path(path).name, mode="wb", compresslevel=6, fileobj=raw) as packed,
        io.TextIOWrapper(packed, encoding="utf-8", newline="\n") as stream,
    ):
        yield stream
