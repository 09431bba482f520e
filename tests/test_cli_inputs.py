"""The input side of the command line: canonical file keys (--key-base), repeated and
excluding patterns, JSONL given as a path, no database from a run that adds nothing,
unchanged and pruned documents, remove's report, encodings and byte-order marks, --quiet
and NUL-separated path lists.

Every input is generated in ``tmp_path``; ``--workers 1`` keeps runs in process.
"""

from __future__ import annotations

import gzip
import json
import os
import random
import subprocess
import sys
from pathlib import Path

import pytest
from simdb_cli.app import app
from typer.testing import CliRunner

import simdb
from simdb.fingerprint import Fingerprinter

runner = CliRunner()


def run(*args: object, input: str | bytes | None = None):
    return runner.invoke(app, [str(arg) for arg in args], input=input, catch_exceptions=False)


def json_lines(text: str) -> list[dict]:
    return [json.loads(line) for line in text.splitlines() if line.strip()]


def prose(seed: int, words: int = 200) -> str:
    rng = random.Random(seed)
    vocabulary = [f"{rng.choice('bdfgklmnprstvz')}{rng.choice('aeiou')}{rng.choice('lmnrst')}{i}" for i in range(3000)]
    return " ".join(rng.choices(vocabulary, k=words)) + "."


def stored(db: Path) -> dict[str, int]:
    with simdb.open(db, readonly=True) as database:
        return {document.key: document.fingerprint for document in database.items()}


def write_tree(root: Path, names: list[str]) -> dict[str, str]:
    """Files under ``root`` (relative names), each a distinct text; name -> text."""
    texts = {}
    for seed, name in enumerate(names, 1):
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        texts[name] = prose(seed)
        path.write_text(texts[name], encoding="utf-8")
    return texts


def add(*args: object, input: bytes | None = None):
    return run("add", *args, "--workers", "1", "--no-progress", input=input)


def summary(result) -> dict:
    [line] = [line for line in json_lines(result.stdout) if line.get("event") == "summary"]
    return line


# -- keys ------------------------------------------------------------------------------------------


def test_one_file_under_three_spellings_is_one_document(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    write_tree(tmp_path / "reuters" / "05", ["1.txt", "2.txt", "3.txt"])
    monkeypatch.chdir(tmp_path)
    db = tmp_path / "db"
    first = add("reuters/05", "--db", db, "--json")
    assert summary(first)["added"] == 3
    for spelling in ("./reuters/05", str(tmp_path / "reuters" / "05"), "reuters/../reuters/05/"):
        again = add(spelling, "--db", db, "--json")
        assert (summary(again)["added"], summary(again)["unchanged"]) == (0, 3), spelling
    assert set(stored(db)) == {f"reuters/05/{n}.txt" for n in (1, 2, 3)}
    # get and remove --paths make the same key of any spelling; without it a key is as given.
    shown = run("get", "--paths", str(tmp_path / "reuters/05/2.txt"), "./reuters/05/3.txt", "--json", "--db", db)
    assert [json.loads(line)["key"] for line in shown.stdout.splitlines()] == ["reuters/05/2.txt", "reuters/05/3.txt"]
    assert run("get", "./reuters/05/3.txt", "--db", db).exit_code == 1
    removed = run("remove", "--paths", str(tmp_path / "reuters/05/2.txt"), "./reuters/05/3.txt", "--db", db)
    assert removed.exit_code == 0 and "removed 2 documents" in removed.stdout
    assert set(stored(db)) == {"reuters/05/1.txt"}


def test_a_dotdot_after_a_symbolic_link_keys_the_file_that_is_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Found by an adversarial probe: lnk/../a.txt (lnk -> other/d) read other/a.txt, as the
    # system resolves it, but was keyed a.txt and replaced that document with other content.
    write_tree(tmp_path, ["a.txt", "other/a.txt", "other/d/x.txt"])
    (tmp_path / "lnk").symlink_to(Path("other") / "d")
    monkeypatch.chdir(tmp_path)
    db = tmp_path / "db"
    assert add("a.txt", "--db", db).exit_code == 0
    through = add("lnk/../a.txt", "lnk/x.txt", "--db", db, "--json")
    assert summary(through)["added"] == 2 and summary(through)["replaced"] == 0
    documents = stored(db)
    assert set(documents) == {"a.txt", "other/a.txt", "lnk/x.txt"}  # a link without ".." is kept
    # Pruning through lnk/.. covers other/, what the walk reads, not the whole key base.
    original = (tmp_path / "a.txt").read_text()
    (tmp_path / "a.txt").unlink()
    pruned = add("lnk/..", "--prune", "--db", db, "--json")
    assert not [line for line in json_lines(pruned.stdout) if line.get("event") == "pruned"]
    # A symbolic link above the one that ".." follows stays as given: through a linked key
    # base, the key is relative to it (a review found the whole path resolved: an absolute key).
    base = tmp_path / "base"
    base.symlink_to(tmp_path)
    again = add(base / "lnk" / ".." / "a.txt", "--db", db, "--key-base", base, "--json")
    assert again.exit_code == 0 and summary(again)["unchanged"] == 1, again.output
    (tmp_path / "a.txt").write_text(original)
    with simdb.open(tmp_path / "oracle") as oracle:
        oracle.add_texts([(name, (tmp_path / name).read_text()) for name in ("a.txt", "other/a.txt")])
        assert {name: oracle.get(name).fingerprint for name in ("a.txt", "other/a.txt")} == {
            name: documents[name] for name in ("a.txt", "other/a.txt")
        }


def test_key_base_makes_the_same_keys_from_another_directory(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    write_tree(tmp_path / "data" / "docs", ["a.txt", "b.txt"])
    (tmp_path / "elsewhere").mkdir()
    db = tmp_path / "db"
    monkeypatch.chdir(tmp_path / "data")
    add("docs", "--db", db)
    monkeypatch.chdir(tmp_path / "elsewhere")  # as a cron job would run
    result = add(tmp_path / "data" / "docs", "--key-base", tmp_path / "data", "--db", db, "--json")
    assert (summary(result)["added"], summary(result)["unchanged"]) == (0, 2)
    assert set(stored(db)) == {"docs/a.txt", "docs/b.txt"}
    # Without it, files outside the working directory get absolute keys.
    outside = add(tmp_path / "data" / "docs" / "a.txt", "--db", db, "--json")
    assert summary(outside)["added"] == 1 and str(tmp_path / "data" / "docs" / "a.txt") in stored(db)
    assert add("x", "--key-base", tmp_path / "missing", "--db", db).exit_code == 2


def test_add_help_says_what_a_key_is() -> None:
    result = run("add", "--help")
    assert "--key-base" in result.stdout and "WARC-Target-URI" in result.stdout and "relative" in result.stdout


# -- which files -----------------------------------------------------------------------------------


def test_repeated_glob_and_exclude_each_take_effect(tmp_path: Path) -> None:
    root = tmp_path / "docs"
    write_tree(root, ["a.txt", "b.md", "c.rst", "skip-me.txt", "sub/d.txt", "build/e.txt"])
    db = tmp_path / "db"
    result = add(
        root, "-r", "--glob", "*.txt", "--glob", "*.md", "--exclude", "skip-*", "--exclude", "build", "--db", db
    )
    assert result.exit_code == 0, result.output
    expected = {"a.txt", "b.md", "sub/d.txt"}
    assert set(stored(db)) == {str(root / name) for name in expected}


def test_jsonl_files_given_as_paths_are_read_line_by_line(tmp_path: Path) -> None:
    records = [{"id": f"page-{i}", "text": prose(i), "url": f"http://example.com/{i}"} for i in range(5)]
    plain = tmp_path / "pages.jsonl"
    plain.write_text("".join(json.dumps(record) + "\n" for record in records))
    packed = tmp_path / "more.jsonl.gz"
    with gzip.open(packed, "wt") as handle:
        handle.write(json.dumps({"id": "packed", "text": prose(99)}) + "\n")
    db = tmp_path / "db"
    result = add(plain, packed, "--db", db)
    assert result.exit_code == 0, result.output
    assert set(stored(db)) == {f"page-{i}" for i in range(5)} | {"packed"}
    with simdb.open(db, readonly=True) as database:
        assert database.get("page-3").meta == {"url": "http://example.com/3"}


def test_paths_from_a_nul_separated_list(tmp_path: Path) -> None:
    write_tree(tmp_path, ["with\nnewline.txt", "plain.txt"])
    listing = tmp_path / "list"
    listing.write_bytes(b"\0".join(os.fsencode(tmp_path / name) for name in ("with\nnewline.txt", "plain.txt")) + b"\0")
    db = tmp_path / "db"
    assert add("--files-from", listing, "-0", "--db", db).exit_code == 0
    assert set(stored(db)) == {str(tmp_path / "with\nnewline.txt"), str(tmp_path / "plain.txt")}
    db2 = tmp_path / "db2"
    assert add("-", "--null", "--db", db2, input=listing.read_bytes()).exit_code == 0
    assert set(stored(db2)) == set(stored(db))
    refused = add("-", "--db", tmp_path / "db3", input=listing.read_bytes())
    assert refused.exit_code == 2 and "-0/--null" in refused.stderr
    # A newline-separated list given to -0 is one name with line breaks: reported on one
    # line, the breaks escaped (found by a probe: the message spanned three lines).
    lines = add("-", "--null", "--db", tmp_path / "db4", input=f"{tmp_path / 'plain.txt'}\nnone.txt\n".encode())
    assert lines.exit_code == 2 and lines.stderr.count("\n") == 1 and "\\nnone.txt\\n" in lines.stderr


# -- a run that adds nothing creates nothing -------------------------------------------------------


def test_a_failed_first_run_leaves_no_database_and_the_retry_may_change_settings(tmp_path: Path) -> None:
    binary = tmp_path / "image.bin"
    binary.write_bytes(b"\x89PNG\0\0\0binary")
    db = tmp_path / "db"
    failed = add(binary, "-k", "3", "--features", "char", "--db", db)
    assert failed.exit_code == 2 and "binary" in failed.stderr
    assert not db.exists()
    empty = tmp_path / "empty.jsonl"
    empty.write_text("")
    assert add(empty, "--db", db).exit_code == 0 and not db.exists()
    good = tmp_path / "good.txt"
    good.write_text(prose(1))
    retry = add(good, "-k", "5", "--db", db)
    assert retry.exit_code == 0, retry.output
    with simdb.open(db, readonly=True) as database:
        assert database.k == 5 and len(database) == 1


# -- unchanged and pruned --------------------------------------------------------------------------


def test_prune_removes_keys_whose_files_are_gone_under_the_paths_only(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    write_tree(tmp_path, ["docs/a.txt", "docs/b.txt", "docs/sub/c.txt", "docs2/a.txt"])
    db = tmp_path / "db"
    assert add("docs", "docs2", "-r", "--db", db).exit_code == 0
    with simdb.open(db) as database:
        database.add("http://example.com/docs/page", 1)  # a URL key: never a file
    for name in ("docs/a.txt", "docs/sub/c.txt", "docs2/a.txt"):
        (tmp_path / name).unlink()
    (tmp_path / "docs" / "new.txt").write_text(prose(50))
    result = add("./docs", "-r", "--prune", "--db", db, "--json")
    assert result.exit_code == 0, result.output
    counts = summary(result)
    assert (counts["added"], counts["unchanged"], counts["pruned"]) == (1, 1, 2)
    pruned = {line["key"] for line in json_lines(result.stdout) if line.get("event") == "pruned"}
    assert pruned == {"docs/a.txt", "docs/sub/c.txt"}
    # docs2/a.txt is gone too, but docs2 was not given: docs is no prefix of it.
    assert set(stored(db)) == {"docs/b.txt", "docs/new.txt", "docs2/a.txt", "http://example.com/docs/page"}
    text = add("docs", "--prune", "--db", db)
    assert "; 1 unchanged" not in text.stdout and "2 unchanged" in text.stdout


def test_prune_removes_only_keys_that_the_walk_would_have_read(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Found by an adversarial probe: ``add . -r --glob '*.txt' --prune`` removed documents
    that never were files (JSONL ids, keys of --fingerprints), none of which a walk for
    *.txt files could have read."""
    monkeypatch.chdir(tmp_path)
    write_tree(tmp_path, ["docs/a.txt", "docs/b.txt", "docs/sub/c.txt", "docs/skip/d.txt", "notes.md"])
    (tmp_path / "pages.jsonl").write_text(json.dumps({"id": "doc-1", "text": prose(60)}) + "\n")
    (tmp_path / "hashes.tsv").write_text("precomputed-1\t0x0123456789abcdef\n")
    db = tmp_path / "db"
    assert add(".", "-r", "--glob", "*.txt", "--glob", "*.md", "--db", db).exit_code == 0
    assert add("--jsonl", "pages.jsonl", "--fingerprints", "hashes.tsv", "--db", db).exit_code == 0
    for name in ("docs/a.txt", "docs/sub/c.txt", "docs/skip/d.txt", "notes.md"):
        (tmp_path / name).unlink()
    result = add(".", "-r", "--glob", "*.txt", "--exclude", "skip", "--prune", "--db", db, "--json")
    assert result.exit_code == 0, result.output
    pruned = {line["key"] for line in json_lines(result.stdout) if line.get("event") == "pruned"}
    # Gone and in the walk's scope: pruned.  notes.md (not *.txt), docs/skip/d.txt (an
    # excluded directory), doc-1 and precomputed-1 (never files) are outside it.
    assert pruned == {"docs/a.txt", "docs/sub/c.txt"}
    assert set(stored(db)) == {"docs/b.txt", "docs/skip/d.txt", "notes.md", "doc-1", "precomputed-1"}
    flat = add("docs", "--prune", "--db", db, "--json")  # not recursive: docs/skip/ is out of scope
    assert {line["key"] for line in json_lines(flat.stdout) if line.get("event") == "pruned"} == set()


def test_prune_keeps_keys_whose_files_cannot_be_reached_now(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Found by an adversarial probe: a directory that could not be read (EACCES) had its
    files pruned as gone, though they were there.  Only a file known to be missing (ENOENT,
    ENOTDIR) is pruned; a symbolic-link loop in its path (ELOOP, which root meets as anyone
    does) or a refused lstat leaves the key."""
    monkeypatch.chdir(tmp_path)
    write_tree(tmp_path, ["docs/a.txt", "docs/sub/c.txt", "docs/gone.txt", "docs/locked/d.txt"])
    db = tmp_path / "db"
    assert add("docs", "-r", "--db", db).exit_code == 0
    (tmp_path / "docs" / "gone.txt").unlink()
    (tmp_path / "docs" / "sub" / "c.txt").unlink()
    (tmp_path / "docs" / "sub").rmdir()
    (tmp_path / "docs" / "sub").symlink_to("sub")  # docs/sub/c.txt: ELOOP
    real_lstat = os.lstat

    def refusing_lstat(path: object, *args: object, **kwargs: object) -> os.stat_result:
        if "locked" in os.fspath(path):  # type: ignore[arg-type]
            raise PermissionError(13, "Permission denied", os.fspath(path))  # type: ignore[arg-type]
        return real_lstat(path, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(os, "lstat", refusing_lstat)
    result = add("docs", "-r", "--prune", "--db", db, "--json")
    pruned = {line["key"] for line in json_lines(result.stdout) if line.get("event") == "pruned"}
    assert pruned == {"docs/gone.txt"}, result.output
    assert set(stored(db)) == {"docs/a.txt", "docs/sub/c.txt", "docs/locked/d.txt"}


def test_prune_removes_the_key_of_a_file_argument_that_is_gone(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # Found by an adversarial probe: a PATH that no longer exists covered only keys below
    # it, so its own key, the one the help promises, stayed.
    monkeypatch.chdir(tmp_path)
    write_tree(tmp_path, ["docs/a.txt", "docs/a.txt.bak", "docs/b.txt"])
    db = tmp_path / "db"
    assert add("docs", "--db", db).exit_code == 0
    (tmp_path / "docs" / "a.txt").unlink()
    (tmp_path / "docs" / "a.txt.bak").unlink()
    result = add("docs/a.txt", "--prune", "--db", db, "--json")
    assert result.exit_code == 2  # the missing file is reported as a failed input
    pruned = {line["key"] for line in json_lines(result.stdout) if line.get("event") == "pruned"}
    assert pruned == {"docs/a.txt"}  # not docs/a.txt.bak, which only starts with its name
    assert set(stored(db)) == {"docs/a.txt.bak", "docs/b.txt"}


def test_prune_keeps_everything_under_a_directory_argument_that_is_missing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Found by an adversarial probe: ``add -r docs --prune`` with docs renamed (or a share
    unmounted) reported docs missing and, in the same run, pruned every key under it."""
    monkeypatch.chdir(tmp_path)
    write_tree(tmp_path, ["docs/a.txt", "docs/sub/b.txt", "c.txt"])
    db = tmp_path / "db"
    assert add("docs", "c.txt", "-r", "--db", db).exit_code == 0
    (tmp_path / "docs").rename(tmp_path / "docs.elsewhere")
    (tmp_path / "c.txt").unlink()
    result = add("docs", "c.txt", "-r", "--prune", "--db", db, "--json")
    assert result.exit_code == 2
    pruned = {line["key"] for line in json_lines(result.stdout) if line.get("event") == "pruned"}
    assert pruned == {"c.txt"}  # a file argument that is gone still goes
    assert set(stored(db)) == {"docs/a.txt", "docs/sub/b.txt"}
    assert "docs: missing (renamed? a share not mounted?), so nothing stored under it is pruned" in result.stderr
    assert f"simdb keys --db {db} --prefix docs/ | simdb remove --db {db} -" in result.stderr
    (tmp_path / "docs").mkdir()  # the mount point of a share not mounted
    empty = add("docs", "-r", "--prune", "--db", db)
    assert "docs: an empty directory" in empty.stderr and set(stored(db)) == {"docs/a.txt", "docs/sub/b.txt"}
    write_tree(tmp_path, ["docs/a.txt"])  # one file back: the rest is gone, and goes
    assert add("docs", "-r", "--prune", "--db", db).exit_code == 0
    assert set(stored(db)) == {"docs/a.txt"}


# -- remove's report -------------------------------------------------------------------------------


def test_remove_gets_plurals_right_and_names_the_keys_not_found(tmp_path: Path) -> None:
    db = tmp_path / "db"
    with simdb.open(db) as database:
        database.add_many([(f"k{i}", i) for i in range(3)])
    one = run("remove", "k0", "--db", db)
    assert one.stdout.strip() == "removed 1 document"
    missing = [f"gone-{i}" for i in range(12)]
    many = run("remove", "k1", *missing, "--db", db)
    assert many.stdout.strip() == (
        "removed 1 document; 12 keys were not stored: " + ", ".join(repr(key) for key in missing[:10]) + " and 2 more"
    )
    as_json = json_lines(run("remove", "k2", "gone", "--db", db, "--json").stdout)
    assert as_json == [{"removed": 1, "not_found": 1, "not_found_keys": ["gone"]}]


def test_remove_counts_keys_that_cannot_be_stored_as_not_stored_and_removes_the_rest(tmp_path: Path) -> None:
    """Found by an adversarial probe: an empty or over-long key among the keys made remove
    refuse the whole list (exit 2, nothing removed), though such a key is merely not stored."""
    db = tmp_path / "db"
    with simdb.open(db) as database:
        database.add_many([(f"k{i}", i) for i in range(3)])
    huge = "x" * (simdb.keys.MAX_KEY_BYTES + 1)
    result = run("remove", "", "k0", "-", "--db", db, "--json", input=f"k1\n{huge}\nk2\n")
    assert result.exit_code == 0, result.output
    report = json_lines(result.stdout)[0]
    assert (report["removed"], report["not_found"]) == (3, 2)
    assert report["not_found_keys"][0] == "" and report["not_found_keys"][1].startswith("x")
    assert stored(db) == {}
    missing = run("get", huge, "--db", db)
    assert missing.exit_code == 1 and len(missing.stderr) < 200  # the key is shortened, not echoed whole


# -- decoding --------------------------------------------------------------------------------------


def test_encoding_decodes_files_without_a_notice_per_file(tmp_path: Path) -> None:
    text = "Grüße aus Köln, señor: " + prose(3)
    latin = tmp_path / "latin.txt"
    latin.write_bytes(text.encode("latin-1"))
    db = tmp_path / "db"
    decoded = add(latin, "--encoding", "latin-1", "--db", db)
    assert decoded.exit_code == 0 and "not valid" not in decoded.stderr
    assert stored(db)[str(latin)] == Fingerprinter().fingerprint(text)
    unknown = add(latin, "--encoding", "no-such-codec", "--db", tmp_path / "db2")
    assert unknown.exit_code == 2 and "no-such-codec" in unknown.stderr and not (tmp_path / "db2").exists()
    # hash and a query of stdin's text decode as add does (a new-user probe found hash
    # without --encoding, so a Latin-1 file hashed otherwise than add stored it)
    hashed = run("hash", "--file", latin, "--encoding", "latin-1")
    assert hashed.exit_code == 0 and hashed.stdout.split()[0] == f"0x{Fingerprinter().fingerprint(text):016x}"
    found = run("query", "-", "--encoding", "latin-1", "--json", "--db", db, input=text.encode("latin-1"))
    assert found.exit_code == 0 and json.loads(found.stdout.splitlines()[0])["similarity"] == 1.0, found.stderr


def test_files_in_another_encoding_pair_when_they_are_copies_and_only_then(tmp_path: Path) -> None:
    """An answers probe: two unrelated Russian articles saved in cp1251, added without
    --encoding, paired at 1.000 (exit 0): decoded with replacement, only their shared date
    was left.  Their undecodable bytes are now letters (text pipeline version 7)."""
    news = "Президент встретился с делегацией 12.05.2024 и обсудил вопросы торговли и экономики страны"
    weather = "Завтра 12.05.2024 ожидается дождь и сильный ветер в столице и области страны"
    for name, text in (("news.txt", news), ("weather.txt", weather), ("news-copy.txt", news + " (копия)")):
        (tmp_path / name).write_bytes(text.encode("cp1251"))
    db = tmp_path / "db"
    added = add(tmp_path / "news.txt", tmp_path / "weather.txt", tmp_path / "news-copy.txt", "--db", db)
    assert added.exit_code == 0 and added.stderr.count("not valid UTF-8") == 3, added.stderr
    pairs = run("pairs", "-t", "0.8", "--json", "--db", db)
    found = {frozenset((Path(pair["key_a"]).name, Path(pair["key_b"]).name)) for pair in json_lines(pairs.stdout)}
    assert found == {frozenset(("news.txt", "news-copy.txt"))}, pairs.stdout


@pytest.mark.parametrize("encoding", ["undefined", "punycode", "idna"])
def test_an_encoding_that_cannot_decode_text_is_refused_before_anything_is_read(tmp_path: Path, encoding: str) -> None:
    """Found by an adversarial probe: these text codecs raise whatever the error handler,
    and the run ended in 'unexpected UnicodeError' (exit 3) with a line break in it."""
    text = tmp_path / "a.txt"
    text.write_text("abc-def " + prose(4) + "\n")
    refused = add(text, "--encoding", encoding, "--db", tmp_path / "new")
    assert not (tmp_path / "new").exists()
    assert add(text, "--db", tmp_path / "db").exit_code == 0
    queried = run("query", "--file", text, "--encoding", encoding, "--db", tmp_path / "db")
    for result in (refused, queried):
        assert result.exit_code == 2, result.output
        assert encoding in result.stderr and result.stderr.count("\n") == 1


def test_quiet_hides_notices_but_not_failures(tmp_path: Path) -> None:
    latin = tmp_path / "latin.txt"
    latin.write_bytes(("café " + prose(4)).encode("latin-1"))
    (tmp_path / "missing-dir").mkdir()
    loud = add(latin, "--db", tmp_path / "db")
    assert "not valid UTF-8" in loud.stderr
    quiet = add(latin, tmp_path / "nothing-here.txt", "-q", "--db", tmp_path / "db")
    assert "not valid UTF-8" not in quiet.stderr and "nothing-here.txt" in quiet.stderr
    assert quiet.exit_code == 2


@pytest.mark.parametrize("codec", ["utf-8-sig", "utf-16", "utf-16-le", "utf-16-be", "utf-32"])
def test_a_byte_order_mark_names_the_encoding(tmp_path: Path, codec: str) -> None:
    text = "Ünïcödé text: " + prose(5)
    data = text.encode(codec)
    if codec in ("utf-16-le", "utf-16-be"):  # these codecs write no mark of their own
        data = "\ufeff".encode(codec) + data
    path = tmp_path / "marked.txt"
    path.write_bytes(data)
    db = tmp_path / "db"
    result = add(path, "--db", db)
    assert result.exit_code == 0 and "binary" not in result.stderr, result.output
    assert stored(db)[str(path)] == Fingerprinter().fingerprint(text)


# -- query over many files -------------------------------------------------------------------------


@pytest.fixture
def stored_corpus(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, dict[str, str]]:
    """A database of six texts in corpus/ (keys relative to tmp_path, the working directory)."""
    monkeypatch.chdir(tmp_path)
    texts = write_tree(tmp_path / "corpus", [f"doc{i}.txt" for i in range(6)])
    assert add("corpus", "--db", tmp_path / "db").exit_code == 0
    return tmp_path / "db", {f"corpus/{name}": text for name, text in texts.items()}


def expected_matches(db: Path, queries: dict[str, str], exclude_self: bool = False) -> set[tuple[str, str, int]]:
    """(query, key, distance) of every match, from the library, one query at a time."""
    with simdb.open(db, readonly=True) as database:
        return {
            (name, match.key, match.distance)
            for name, text in queries.items()
            for match in database.query(text=text)
            if not (exclude_self and match.key == name)
        }


def test_query_checks_directories_files_and_lists_in_one_run(
    tmp_path: Path, stored_corpus: tuple[Path, dict[str, str]]
) -> None:
    db, texts = stored_corpus
    probes = tmp_path / "probes"
    probes.mkdir()
    near = {
        "probes/near0.txt": texts["corpus/doc0.txt"].replace(".", " extra."),
        "probes/near3.txt": texts["corpus/doc3.txt"],
        "probes/skip.md": texts["corpus/doc4.txt"],
        "probes/unrelated.txt": prose(1000),
    }
    for name, text in near.items():
        (tmp_path / name).write_text(text)
    listing = tmp_path / "list"
    listing.write_bytes(b"corpus/doc1.txt\0")
    result = run(
        "query", "--file", "probes", "--glob", "*.txt", "--file", "corpus/doc5.txt",
        "--files-from", listing, "-0", "--db", db, "--json",
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    got = {(line["query"], line["key"], line["distance"]) for line in json_lines(result.stdout)}
    queries = {name: text for name, text in near.items() if name.endswith(".txt")}
    queries |= {"corpus/doc5.txt": texts["corpus/doc5.txt"], "corpus/doc1.txt": texts["corpus/doc1.txt"]}
    assert got == expected_matches(db, queries)
    assert {"corpus/doc5.txt", "corpus/doc1.txt", "probes/near3.txt"} <= {query for query, _, _ in got}
    # A file matching itself is reported unless --exclude-self; the table names the query first.
    alone = run("query", "--file", "corpus", "--exclude-self", "--db", db)
    assert alone.exit_code == 1 and "no document" in alone.stderr
    table = run("query", "--file", "corpus/doc2.txt", "--file", "probes/near3.txt", "--db", db).stdout.splitlines()
    assert table[0].split() == ["query", "similarity", "distance", "fingerprint", "key"]
    assert [row.split()[0] for row in table[1:]] == ["corpus/doc2.txt", "probes/near3.txt"]
    assert len(stored(db)) == 6  # nothing was added


def test_query_over_files_reports_an_unreadable_one_and_goes_on(
    tmp_path: Path, stored_corpus: tuple[Path, dict[str, str]]
) -> None:
    db, _ = stored_corpus
    (tmp_path / "blob.bin").write_bytes(b"\0\1\2")
    result = run("query", "--file", "blob.bin", "--file", "missing.txt", "--file", "corpus/doc2.txt", "--db", db)
    assert result.exit_code == 2
    assert "blob.bin" in result.stderr and "missing.txt" in result.stderr
    assert "corpus/doc2.txt" in result.stdout


def test_query_options_for_files_need_files(stored_corpus: tuple[Path, dict[str, str]]) -> None:
    db, _ = stored_corpus
    result = run("query", "some text", "--glob", "*.txt", "--db", db)
    assert result.exit_code == 2 and "--file" in result.stderr
    fields = run("query", "some text", "--text-field", "body", "--db", db)
    assert fields.exit_code == 2 and "--file" in fields.stderr


def test_query_reads_jsonl_files_with_the_fields_add_reads(tmp_path: Path) -> None:
    """Found by a probe: the help says query reads files as add does, but a JSONL file whose
    fields add needed --id-field/--text-field for could not be queried (no such options)."""
    pages = tmp_path / "pages.jsonl"
    pages.write_text("".join(json.dumps({"url": f"u{n}", "body": prose(70 + n)}) + "\n" for n in range(3)))
    db = tmp_path / "db"
    assert add("--jsonl", pages, "--id-field", "url", "--text-field", "body", "--db", db).exit_code == 0
    result = run("query", "--file", pages, "--id-field", "url", "--text-field", "body", "--db", db, "--json")
    assert result.exit_code == 0, result.output
    assert {(line["query"], line["key"]) for line in json_lines(result.stdout)} == {
        (f"u{n}", f"u{n}") for n in range(3)
    }


# -- add --dry-run ---------------------------------------------------------------------------------


def database_files(db: Path) -> dict[str, bytes]:
    """The database's files but its lock files (which readers write their slots into)."""
    return {path.name: path.read_bytes() for path in db.iterdir() if not path.name.endswith("-lock")}


def test_dry_run_reports_what_a_real_run_would_do_and_stores_nothing(tmp_path: Path) -> None:
    import shutil

    stored_dir = tmp_path / "stored"
    write_tree(stored_dir, ["a.txt", "b.txt"])
    db = tmp_path / "db"
    assert add(stored_dir, "--db", db).exit_code == 0
    incoming = tmp_path / "incoming"
    incoming.mkdir()
    (incoming / "1-copy-of-a.txt").write_text((stored_dir / "a.txt").read_text())
    (incoming / "2-new.txt").write_text(prose(77))
    (incoming / "3-copy-of-new.txt").write_text(prose(77))  # a duplicate of one added earlier in the run
    (incoming / "4-other.txt").write_text(prose(78))
    before = database_files(db)
    twin = tmp_path / "twin"
    shutil.copytree(db, twin)

    def events(result) -> list[dict]:
        lines = json_lines(result.stdout)
        for line in lines:
            line.pop("seconds", None)
            line.pop("dry_run", None)
        return lines

    dry = add(incoming, "--if-new", "--dry-run", "--db", db, "--json")
    assert dry.exit_code == 0, dry.output
    assert summary(dry)["dry_run"] is True
    assert database_files(db) == before
    real = add(incoming, "--if-new", "--db", twin, "--json")
    assert events(dry) == events(real)
    assert [line["key"] for line in events(real) if line.get("event") == "skipped"] == [
        str(incoming / "1-copy-of-a.txt"),
        str(incoming / "3-copy-of-new.txt"),
    ]
    assert "dry run: nothing was stored" in add(incoming, "--dry-run", "--db", db).stdout
    fresh = tmp_path / "fresh"
    assert add(incoming, "--if-new", "--dry-run", "--db", fresh).exit_code == 0 and not fresh.exists()


def test_a_dry_run_names_the_users_database_and_what_it_would_prune(tmp_path: Path, monkeypatch) -> None:
    """Found by an adversarial probe: a dry run's errors named its scratch copy in a
    temporary directory, and --prune --dry-run said how many keys would go but not which
    (the help promises it shows them)."""
    monkeypatch.chdir(tmp_path)
    write_tree(tmp_path, ["docs/a.txt", "docs/b.txt"])
    db = tmp_path / "db"
    assert add("docs", "--db", db).exit_code == 0
    mismatch = add("docs", "--dry-run", "-k", "4", "--db", db)
    assert mismatch.exit_code == 2 and f"the database at {db} " in mismatch.stderr, mismatch.stderr
    assert "dry-run" not in mismatch.stderr
    (tmp_path / "docs" / "a.txt").unlink()
    dry = add("docs", "--prune", "--dry-run", "--db", db)
    # In the conditional, as its summary: a real run's lines say "pruned", "skipped".
    lines = dry.stdout.splitlines()
    assert "would prune docs/a.txt" in lines
    assert lines[-1].startswith("would add 0, replace 0, skip 0; failed 0; 1 unchanged"), lines
    assert "; would prune 1 whose files are gone" in lines[-1]
    assert set(stored(db)) == {"docs/a.txt", "docs/b.txt"}
    (tmp_path / "docs" / "c.txt").write_text((tmp_path / "docs" / "b.txt").read_text())
    skips = add("docs", "--if-new", "--dry-run", "--db", db).stdout.splitlines()
    assert skips[0].startswith("would skip docs/c.txt: near-duplicate of docs/b.txt"), skips


def test_an_import_that_adds_nothing_creates_no_database(tmp_path: Path) -> None:
    empty = tmp_path / "empty.jsonl"
    empty.write_text("")
    db = tmp_path / "db"
    result = run("import", empty, "--db", db, "--no-progress")
    assert result.exit_code == 0 and not db.exists(), result.output
    assert "no database was created" in result.stderr


# -- stdin is read by one input at most ----------------------------------------------------


@pytest.mark.parametrize(
    ("command", "readers"),
    [
        (["add", "-", "--files-from", "-"], "PATHS and --files-from"),
        (["add", "--jsonl", "-", "--fingerprints", "-"], "--jsonl and --fingerprints"),
        (["add", "-", "-"], "PATHS and PATHS"),
        (["query", "--file", "-", "--files-from", "-"], "--file and --files-from"),
        (["import", "-", "-"], "FILES and FILES"),
    ],
)
def test_stdin_given_to_two_inputs_is_refused_before_anything_is_read(
    tmp_path: Path, command: list[str], readers: str
) -> None:
    (tmp_path / "doc.txt").write_text(prose(1), encoding="utf-8")
    db = tmp_path / "db"
    if command[0] == "query":
        assert add(tmp_path / "doc.txt", "--db", db).exit_code == 0
    listing = f"{tmp_path / 'doc.txt'}\n"
    result = run(*command, "--db", db, input=listing)
    assert result.exit_code == 2, result.output
    assert result.stderr.strip() == f"simdb: stdin can be read once, but '-' was given to {readers}"
    assert (command[0] == "query") == db.exists()  # add created nothing


def test_an_empty_db_path_is_refused_rather_than_the_working_directory_used(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "doc.txt").write_text(prose(1), encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    for command in (["add", "--db", "", "doc.txt"], ["--db", "", "add", "doc.txt"], ["stats", "--db", ""]):
        result = run(*command)
        assert result.exit_code == 2 and "--db is empty" in result.stderr, command
        assert "env var" not in result.stderr and result.stderr.count("\n") == 1, result.stderr
    assert sorted(path.name for path in tmp_path.iterdir()) == ["doc.txt"]


def test_query_limit_below_one_is_a_usage_error(tmp_path: Path) -> None:
    (tmp_path / "doc.txt").write_text(prose(1), encoding="utf-8")
    db = tmp_path / "db"
    assert add(tmp_path / "doc.txt", "--db", db).exit_code == 0
    assert run("query", prose(1), "--db", db, "--limit", "1").exit_code == 0
    refused = run("query", prose(1), "--db", db, "--limit", "0")
    assert refused.exit_code == 2 and "--limit" in refused.stderr


def test_a_weighting_with_minhash_is_refused_not_ignored(tmp_path: Path) -> None:
    refused = run("hash", "--weights", "tf", prose(1))
    assert refused.exit_code == 2 and "--weights tf is not valid" in refused.stderr and refused.stdout == ""
    assert run("hash", "--kind", "simhash", "--weights", "tf", prose(1)).exit_code == 0


def test_remove_of_a_path_without_paths_says_how_that_file_is_keyed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`simdb remove ./notes/a.txt` removed nothing and only said the key was not stored,
    though the file is stored under notes/a.txt (a probe found it): it says so now."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "notes").mkdir()
    (tmp_path / "notes" / "a.txt").write_text("some words for a note kept here")
    assert run("add", "notes/a.txt", "--db", "db").exit_code == 0
    # A new user's pass: get said only that no document had the key.
    shown = run("get", "./notes/a.txt", "--db", "db")
    assert shown.exit_code == 1 and shown.stderr.splitlines() == [
        "simdb: no document with key './notes/a.txt'",
        "simdb: ./notes/a.txt is a file stored under the key notes/a.txt: --paths makes keys of paths as add does",
    ]
    missed = run("remove", "./notes/a.txt", "--db", "db")
    assert missed.exit_code == 1 and "stored under the key notes/a.txt" in missed.stderr and "--paths" in missed.stderr
    assert len(missed.stderr.splitlines()) == 1
    assert run("remove", "--paths", "./notes/a.txt", "--db", "db").exit_code == 0
    plain = run("remove", "./notes/a.txt", "--db", "db")  # nothing stored under it now: no hint
    assert plain.exit_code == 1 and plain.stderr == ""


def test_gzipped_text_files_are_read_gunzipped(tmp_path: Path) -> None:
    """A .txt.gz file was "binary (contains NUL bytes)", though JSONL and WARC files were
    gunzipped (a probe found it).  It is read as its text, keyed by its name; a file named
    .gz that is not gzip is reported, and the decompressed text is held to --max-doc-bytes."""
    import gzip

    text = prose(4)
    (tmp_path / "a.txt.gz").write_bytes(gzip.compress(text.encode()))
    (tmp_path / "b.txt").write_text(text)
    (tmp_path / "c.txt.gz").write_text("not gzip at all")
    (tmp_path / "bomb.txt.gz").write_bytes(gzip.compress(b"word " * 1_000_000))
    result = run("add", tmp_path, "--max-doc-bytes", "100000", "--db", tmp_path / "db")
    assert result.exit_code == 2
    assert "c.txt.gz: cannot read" in result.stderr and "bomb.txt.gz" in result.stderr
    pairs = json_lines(run("pairs", "--json", "--db", tmp_path / "db").stdout)
    assert [(pair["key_a"], pair["key_b"], pair["similarity"]) for pair in pairs] == [
        (str(tmp_path / "a.txt.gz"), str(tmp_path / "b.txt"), 1.0)
    ]


def test_a_null_jsonl_field_is_called_null_not_missing(tmp_path: Path) -> None:
    # Found by a new-user probe: '"id": null' was reported as "no 'id' field".
    pages = tmp_path / "pages.jsonl"
    pages.write_text('{"id": null, "text": "a few words here"}\n{"id": "b", "text": null}\n{"id": "c"}\n')
    result = add("--jsonl", pages, "--db", tmp_path / "db")
    assert "'id' is null on line 1" in result.stderr
    assert "'text' is null" in result.stderr and "no 'text' field" in result.stderr, result.stderr


def test_a_directory_read_without_r_says_how_many_subdirectories_it_left(tmp_path: Path) -> None:
    """A docs probe: `add DIR` with files and subdirectories read the files and said nothing
    of the subdirectories (only a directory of subdirectories alone was told about -r)."""
    tree = tmp_path / "tree"
    for name in ("one", "two"):
        (tree / name).mkdir(parents=True)
        (tree / name / "inner.txt").write_text(prose(3))
    (tree / "top.txt").write_text(prose(4))
    flat = run("add", tree, "--db", tmp_path / "db")
    assert flat.exit_code == 0 and f"{tree}: 2 subdirectories not read (-r reads them)" in flat.stderr
    assert "subdirector" not in run("add", tree, "-r", "--db", tmp_path / "db2").stderr
    assert "subdirector" not in run("add", tree, "-q", "--db", tmp_path / "db3").stderr


def test_add_dash_says_once_that_stdin_lists_paths_when_it_holds_text(tmp_path: Path) -> None:
    # Found by a new-user probe: `fold doc.txt | simdb add -` reported each line as a missing
    # file, with no word that "-" lists paths here (it reads text in query and hash).
    lines = "some words of text\nmore words of text\nand more\n"
    result = add("-", "--db", tmp_path / "db", input=lines.encode())
    assert result.exit_code == 2 and result.stderr.count("stdin lists file paths") == 1, result.stderr
    (tmp_path / "a b.txt").write_text(prose(1))
    listed = add("-", "--db", tmp_path / "db", input=f"{tmp_path / 'a b.txt'}\n".encode())
    assert listed.exit_code == 0 and "stdin lists" not in listed.stderr, listed.stderr


def test_stdin_text_and_utf16_files_keep_what_add_keeps(tmp_path: Path) -> None:
    """A v7 probe: query - read undecodable bytes as U+FFFD where add kept them (a file added
    was not found by its own text on stdin), and a UTF-16 file with one stray byte was read
    as UTF-8 garbage, since such a byte cannot be kept: it is replaced, in UTF-16."""
    russian = "Президент встретился с делегацией и обсудил вопросы торговли и экономики страны"
    (tmp_path / "ru.txt").write_bytes(russian.encode("cp1251"))
    english = "the committee met on tuesday to discuss the budget for the coming year " * 3
    (tmp_path / "en16.txt").write_bytes(english.encode("utf-16") + b"\x00")  # one byte too many
    db = tmp_path / "db"
    assert add(tmp_path / "ru.txt", tmp_path / "en16.txt", "--db", db).exit_code == 0
    found = run("query", "-", "-t", "0.99", "--json", "--db", db, input=russian.encode("cp1251"))
    assert found.exit_code == 0 and json.loads(found.stdout.splitlines()[0])["key"].endswith("ru.txt"), found.output
    by_text = run("query", english, "-t", "0.9", "--json", "--db", db)
    assert by_text.exit_code == 0 and json.loads(by_text.stdout.splitlines()[0])["key"].endswith("en16.txt")


FIFO_SWAPPED_IN = """
import os, sys
from simdb_cli.sources import Input, Intake, expand_paths, read_text_files
problems = []
intake = Intake(on_problem=lambda where, cause: problems.append(cause), on_notice=lambda where, cause: None)
inputs = expand_paths([sys.argv[1]], intake)
os.replace(sys.argv[2], inputs[0].path)  # a FIFO in the listed file's place, as a race would put it
read = list(read_text_files(inputs, intake))
print(len(read), intake.failed, problems)
"""


def test_a_fifo_put_in_a_listed_files_place_is_reported_not_waited_for(tmp_path: Path) -> None:
    # A faults probe: `mv fifo docs/02999.txt` after add listed the folder hung the add for
    # good, in the open() of the FIFO, with 2,200 of 3,000 documents committed.
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "a.txt").write_text("some words to read")
    (docs / "b.txt").write_text("more words to read")
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    run = subprocess.run(
        [sys.executable, "-c", FIFO_SWAPPED_IN, str(docs), str(fifo)], capture_output=True, text=True, timeout=60
    )
    assert run.returncode == 0, run.stderr
    assert run.stdout.strip() == "1 1 ['cannot read: it is no longer a regular file (replaced since it was listed)']"


def test_a_listed_path_holding_a_carriage_return_is_one_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A probe: `find ... | simdb add -` cut a name holding a carriage return in two, so
    `d/report<CR>v2.txt` failed and `d/report`, another file, was added in its place.  Lines
    end at line feeds; a list written on Windows (CRLF) still reads as its paths, and
    `remove -` reads keys the same way."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "d").mkdir()
    (tmp_path / "d" / "report\rv2.txt").write_text(prose(1))
    (tmp_path / "d" / "report").write_text(prose(2))
    (tmp_path / "d" / "plain.txt").write_text(prose(3))
    result = add("-", "--db", "db", input=b"d/report\rv2.txt\nd/plain.txt\r\n")
    assert result.exit_code == 0, result.output
    assert set(stored(tmp_path / "db")) == {"d/report\rv2.txt", "d/plain.txt"}
    removed = run("remove", "-", "--db", "db", input=b"d/plain.txt\r\n")
    assert removed.exit_code == 0 and set(stored(tmp_path / "db")) == {"d/report\rv2.txt"}
