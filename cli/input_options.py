"""Command-line options for naming and reading input files, shared by ``add``, ``query``
and ``remove``: which files a directory contributes, how a file becomes a key, how its
bytes become text, and how lists of paths are read."""

from __future__ import annotations

import os
from typing import Annotated

import typer

from simdb import InvalidInputError

from .sources import PathRules, checked_encoding

#: What ``--help`` says a key is (add), and what the query column and remove --paths use.
KEY_HELP = (
    "A file's key is its path made absolute and normalised ('.' and '..' resolved, symbolic links kept), "
    "written relative to --key-base (default: the working directory) when inside it, else absolute: "
    "'docs/a.txt', './docs/a.txt' and '$PWD/docs/a.txt' are one key. "
    "A JSONL line's key is its --id-field; a WARC/WET record's is its WARC-Target-URI."
)

RecursiveOption = Annotated[
    bool, typer.Option("--recursive", "-r", help="Also read the files in subdirectories of the directories given.")
]
HiddenOption = Annotated[
    bool,
    typer.Option(
        "--hidden",
        help="In directories, also read hidden files and subdirectories (names starting with '.', such as .git), "
        "which are left out by default.",
    ),
]
GlobOption = Annotated[
    list[str] | None,
    typer.Option(
        "--glob",
        help="In directories, read only files whose name matches this pattern, e.g. '*.txt'; "
        "repeatable (a file matching any is read).",
        show_default=False,
    ),
]
ExcludeOption = Annotated[
    list[str] | None,
    typer.Option(
        "--exclude",
        help="In directories, leave out files and subdirectories whose name matches this pattern, e.g. '*.log'; "
        "repeatable.",
        show_default=False,
    ),
]
KeyBaseOption = Annotated[
    str | None,
    typer.Option(
        "--key-base",
        help="The directory file keys are relative to (default: the working directory); give the same one "
        "whatever directory the command runs from.",
        show_default=False,
    ),
]
EncodingOption = Annotated[
    str | None,
    typer.Option(
        "--encoding",
        help="Encoding of text files without a byte-order mark, e.g. latin-1 or cp1252 (default utf-8). "
        "A UTF-8, UTF-16 or UTF-32 byte-order mark always wins. JSONL is always UTF-8.",
        show_default=False,
    ),
]
QuietOption = Annotated[
    bool,
    typer.Option(
        "--quiet", "-q", help="No per-file notices and no progress bar; errors and the summary are still shown."
    ),
]
NullOption = Annotated[
    bool,
    typer.Option(
        "--null", "-0", help="Lists of paths ('-' or --files-from) are NUL-separated, as find -print0 writes them."
    ),
]
KeysNullOption = Annotated[
    bool,
    typer.Option("--null", "-0", help="Keys on stdin ('-') are NUL-separated, as simdb keys -0 writes them."),
]
FilesFromOption = Annotated[
    list[str] | None,
    typer.Option(
        "--files-from",
        help="Read the paths to use from this file ('-' for stdin), one per line (NUL-separated with -0); repeatable.",
        show_default=False,
    ),
]


def path_rules(
    recursive: bool, globs: list[str] | None, excludes: list[str] | None, key_base: str | None, hidden: bool = False
) -> PathRules:
    """The :class:`PathRules` of the options; a --key-base that is no directory is a usage error."""
    if key_base is not None and not os.path.isdir(key_base):
        raise InvalidInputError(f"--key-base {key_base}: no such directory", "give the directory keys are relative to")
    return PathRules(recursive, tuple(globs or ()), tuple(excludes or ()), key_base, hidden)


def encoding_of(encoding: str | None) -> str | None:
    """``--encoding`` checked (see :func:`checked_encoding`), or None when not given."""
    return None if encoding is None else checked_encoding(encoding)
