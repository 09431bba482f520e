"""``Database.copy_to``: a consistent copy that can be written without touching the original."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

import simdb


def test_copy_to_gives_an_equal_database_and_leaves_the_source_alone(tmp_path: Path) -> None:
    source = tmp_path / "source"
    with simdb.open(source, k=3) as db:
        db.add_texts([(f"doc-{i}", f"words {i} and more words {i * 7}", {"i": i}) for i in range(50)])
        db.remove("doc-3")
    before = {path.name: path.read_bytes() for path in source.iterdir() if not path.name.endswith("-lock")}
    with simdb.open(source, readonly=True) as db:
        db.copy_to(tmp_path / "copy")
        expected = [(doc.key, doc.fingerprint, doc.meta) for doc in db.items()]
        matches = db.query(text="words 7 and more words 49")
    with simdb.open(tmp_path / "copy") as copy:
        assert [(doc.key, doc.fingerprint, doc.meta) for doc in copy.items()] == expected
        assert copy.k == 3 and copy.query(text="words 7 and more words 49") == matches
        assert not copy.check().problems
        copy.add("written-to-the-copy", 1)
    after = {path.name: path.read_bytes() for path in source.iterdir() if not path.name.endswith("-lock")}
    assert after == before
    with pytest.raises(simdb.StorageError, match="copy"):
        with simdb.open(source, readonly=True) as db:
            db.copy_to(tmp_path / "copy")  # never over an existing directory


def test_a_handle_copies_the_live_database_after_another_process_compacted_it(tmp_path: Path) -> None:
    source = tmp_path / "source"
    with simdb.open(source) as db:
        db.add("before", 1)
    with simdb.open(source, readonly=True) as handle:
        assert len(handle) == 1  # the handle has its environment open on the first data file
        writer = f"import simdb\nwith simdb.open({str(source)!r}) as db:\n    db.compact()\n    db.add('after', 2)\n"
        subprocess.run([sys.executable, "-c", writer], check=True, timeout=120)
        handle.copy_to(tmp_path / "copy")
        with simdb.open(tmp_path / "copy", readonly=True) as copy:
            assert sorted(copy.keys()) == ["after", "before"]


def test_a_handle_refuses_to_copy_a_database_replaced_at_its_path(tmp_path: Path) -> None:
    source = tmp_path / "source"
    with simdb.open(source) as db:
        db.add("old", 1)
    with simdb.open(source, readonly=True) as handle:
        assert len(handle) == 1
        remake = (
            f"import shutil, simdb\nshutil.rmtree({str(source)!r})\n"
            f"with simdb.open({str(source)!r}, k=3) as db:\n    db.add('new', 2)\n"
        )
        subprocess.run([sys.executable, "-c", remake], check=True, timeout=120)
        with pytest.raises(simdb.DatabaseReplacedError):
            handle.copy_to(tmp_path / "copy")
        assert not (tmp_path / "copy").exists()


def test_a_copy_inside_the_database_directory_is_refused(tmp_path: Path) -> None:
    """A probe: copy_to(db/backup) nested a database among the files of its source."""
    with simdb.open(tmp_path / "db") as db:
        db.add("a", 1)
        with pytest.raises(simdb.InvalidInputError, match="is inside the database"):
            db.copy_to(tmp_path / "db" / "backup")
    assert not (tmp_path / "db" / "backup").exists()
