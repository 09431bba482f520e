"""How a file becomes a key, and which stored keys name files that are gone.

A file's key is its path made absolute and normalised (``os.path.abspath``: ``.`` and
``..`` resolved by name, symbolic links kept, so a key says where the user put the file;
but a ``..`` right after a symbolic link goes where the system goes, up from the link's
target, so the key names the file that is read),
then written relative to the *key base* (``--key-base``, by default the working directory)
when the file is inside it, else left absolute.  So ``reuters/05``, ``./reuters/05`` and
``$PWD/reuters/05`` add the same keys, and a cron job run from another directory with the
same ``--key-base`` does too.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Iterator

#: A JSONL line without an id is keyed ``FILE:LINE``: such a key names a file that exists
#: when its FILE part does.
_LINE_KEY = re.compile(r"(.+):[0-9]+")


def key_base_path(key_base: str | None) -> str:
    """The absolute, normalised key base (the working directory when None).  One getcwd."""
    return os.path.abspath(key_base if key_base is not None else os.curdir)


def canonical_key(path: str, key_base: str | None = None) -> str:
    """The key of the file at ``path``: relative to ``key_base`` (default: the working
    directory) when inside it, else absolute; resolves a symbolic link only where ``..``
    follows it.  O(len(path)), and a stat per ``..``."""
    absolute = _absolute(path)
    base = key_base_path(key_base)
    if absolute != base and _inside(absolute, base):
        return _as_utf8(os.path.relpath(absolute, base))
    return _as_utf8(absolute)


def _as_utf8(path: str) -> str:
    """The key of a path as the system names it: its bytes read as UTF-8, whatever the
    locale's encoding (in a Latin-1 locale, Python names the file "ü.txt" written in UTF-8
    "Ã¼.txt"; under LC_ALL=C without UTF-8 mode, with surrogates), so a file has one key in
    every locale.  A name whose bytes are not UTF-8 keeps the locale's reading (a Latin-1
    name in a Latin-1 locale), as keys were made before."""
    try:
        return os.fsencode(path).decode("utf-8")
    except UnicodeDecodeError:
        return path


def _paths_of(key: str) -> list[str]:
    """The paths a file key may name, as the system names them (see :func:`_as_utf8`): its
    UTF-8 bytes, and where the locale reads names otherwise, the key as the locale's."""
    as_utf8 = os.fsdecode(key.encode("utf-8", "surrogateescape"))
    if as_utf8 == key:
        return [key]
    try:
        os.fsencode(key)  # the locale cannot name every key ("東.txt" under LC_ALL=C)
    except UnicodeEncodeError:
        return [as_utf8]
    return [as_utf8, key]


def _absolute(path: str) -> str:
    """``os.path.abspath(path)``, except that a ``..`` after a symbolic link leaves the
    link's target, as the system does when it opens the path (``lnk/../a.txt`` with ``lnk ->
    other/d`` is ``other/a.txt``, not ``a.txt``)."""
    if ".." not in path.split(os.sep):
        return os.path.abspath(path)
    current = os.sep
    for part in os.path.join(os.getcwd(), path).split(os.sep):
        if part in ("", "."):
            continue
        if part == "..":
            # Only the link itself is followed (chains of links included), so the path above
            # it stays as given: a symbolic link in the key base is kept, as abspath keeps it.
            for _ in range(40):  # the system's own limit on links followed
                if not os.path.islink(current):
                    break
                current = link_target(current)
            current = os.path.dirname(current)
        else:
            current = os.path.join(current, part)
    return current


def link_target(link: str) -> str:
    """Where the symbolic link ``link`` points, normalised, with the directory the link is
    in kept as given (no other link resolved).  One readlink."""
    return os.path.normpath(os.path.join(os.path.dirname(link), os.readlink(link)))


def _inside(absolute: str, base: str) -> bool:
    """Whether ``absolute`` is ``base`` or below it (a whole-component test: ``docs2`` is not
    inside ``docs``)."""
    return absolute == base or absolute.startswith(base.rstrip(os.sep) + os.sep)


def key_paths(key: str, key_base: str | None = None) -> list[str]:
    """Where the file of a file key may be (:func:`_paths_of`): the key itself if absolute,
    else under the key base."""
    base = key_base_path(key_base)
    return [path if os.path.isabs(path) else os.path.join(base, path) for path in _paths_of(key)]


def prefix_of(path: str, key_base: str | None = None) -> tuple[str, str | None]:
    """``(exact key, key prefix)`` of what a PATH argument covers: a file is its own key
    (prefix None); a directory covers its key and every key below it (prefix ``KEY/``).
    The key base itself covers every relative key (prefix "")."""
    key = canonical_key(path, key_base)
    if os.path.lexists(path) and not os.path.isdir(path):
        return key, None
    if _absolute(path) == key_base_path(key_base):
        return key, ""
    return key, key.rstrip(os.sep) + os.sep


def _known_gone(path: str) -> bool:
    """Whether ``path`` is known not to exist: its lstat says no such file (ENOENT) or that
    a component is not a directory (ENOTDIR).  Any other failure (EACCES, EIO, ELOOP,
    ENAMETOOLONG, ...) says nothing of the file, so it counts as present.  One lstat."""
    try:
        os.lstat(path)
    except (FileNotFoundError, NotADirectoryError):
        return True
    except OSError:
        return False
    return False


def names_existing_file(key: str, key_base: str | None = None) -> bool:
    """Whether the file ``key`` names may still exist: False only when it is known to be
    gone (:func:`_known_gone`), so that a file that cannot be read now (a directory without
    permission, a failing disk) is never taken for a deleted one.  A ``FILE:LINE`` key of
    a JSONL line counts as existing while FILE does.  One lstat per path the key may name
    (:func:`key_paths`), and as many for FILE."""
    if not all(_known_gone(path) for path in key_paths(key, key_base)):
        return True
    line_key = _LINE_KEY.fullmatch(key)
    if line_key is None:
        return False
    return any(
        not _known_gone(line_file) and not os.path.isdir(line_file)
        for line_file in key_paths(line_key.group(1), key_base)
    )


def stale_keys(stored: Iterable[str], key_base: str | None = None) -> Iterator[str]:
    """The keys of ``stored`` that look like file keys (not URLs) whose files are gone."""
    for key in stored:
        if "://" in key:  # a WARC record's URI names no file
            continue
        if not names_existing_file(key, key_base):
            yield key


def under(key: str, exact: str, prefix: str | None) -> bool:
    """Whether ``key`` is covered by a PATH argument's ``(exact, prefix)``; see :func:`prefix_of`."""
    if key == exact:
        return True
    if prefix is None:
        return False
    return key.startswith(prefix) and (prefix != "" or not os.path.isabs(key))
