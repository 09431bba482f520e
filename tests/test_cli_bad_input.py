"""The command line under the inputs of an adversarial probe: numbers too long for Python's
int parser, directory trees deeper than the recursion limit, special files met in a walk,
undecodable keys on stdin, damaged WARC headers, populated demo directories, oversized
documents, and export/import round trips of every meta the library accepts."""

from __future__ import annotations

import gzip
import json
import os
import socket
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

import simdb
from simdb import codec
from tests.test_cli import json_lines, prose, run
from tests.test_cli_robustness import one_line, stored


def _process(
    *args: object, stdin: bytes | None = None, env: dict[str, str] | None = None, timeout: float = 120
) -> subprocess.CompletedProcess[bytes]:
    """``python -m simdb_cli.app ARGS`` as a real process, with bytes in and out."""
    environment = {**os.environ, "SIMDB_PATH": "", **(env or {})}
    return subprocess.run(
        [sys.executable, "-m", "simdb_cli.app", *map(str, args)],
        input=stdin,
        capture_output=True,
        env=environment,
        timeout=timeout,
        check=False,
    )


# -- integers longer than Python's int parser takes ----------------------------------------

HUGE = "9" * 5000


def test_a_5000_digit_integer_fails_its_jsonl_line_only(tmp_path: Path) -> None:
    source = tmp_path / "docs.jsonl"
    source.write_text(
        f'{{"id": "a", "text": "{prose(1)}"}}\n'
        f'{{"id": "b", "text": "x", "n": {HUGE}}}\n'
        f'{{"id": "c", "text": "{prose(2)}"}}\n'
    )
    result = run("add", "--jsonl", source, "--db", tmp_path / "db", "--workers", "1")
    assert result.exit_code == 2 and f"{source}:2" in result.stderr and "digits" in result.stderr, result.output
    one_line(result.stderr)
    assert set(stored(tmp_path / "db")) == {"a", "c"}


def test_a_5000_digit_integer_fails_its_tsv_line_only(tmp_path: Path) -> None:
    source = tmp_path / "fp.tsv"
    source.write_text(f'a\t0x1\nb\t0x2\t{{"n": {HUGE}}}\nc\t0x7f00\n')
    result = run("add", "--fingerprints", source, "--db", tmp_path / "db")
    assert result.exit_code == 2 and f"{source}:2" in result.stderr, result.output
    one_line(result.stderr)
    assert set(stored(tmp_path / "db")) == {"a", "c"}


def test_a_5000_digit_integer_fails_its_import_line_only(tmp_path: Path) -> None:
    source = tmp_path / "backup.jsonl"
    source.write_text(
        f'{{"key": "a", "fingerprint": "0x1"}}\n'
        f'{{"key": "b", "fingerprint": {HUGE}}}\n'
        f'{{"key": "c", "fingerprint": "0x7f00"}}\n'
    )
    result = run("import", source, "--db", tmp_path / "db")
    assert result.exit_code == 2 and f"{source}:2" in result.stderr, result.output
    one_line(result.stderr)
    assert set(stored(tmp_path / "db")) == {"a", "c"}


# -- directory walks -----------------------------------------------------------------------


def test_add_recursive_reads_a_tree_1000_levels_deep(tmp_path: Path) -> None:
    top = tmp_path / "deep"
    directory = top
    top.mkdir()
    for _ in range(1000):  # one level at a time: Path.mkdir(parents=True) recurses itself
        directory = directory / "d"
        directory.mkdir()
    (directory / "bottom.txt").write_text(prose(1))
    (top / "top.txt").write_text(prose(2))
    try:
        result = run("add", top, "-r", "--db", tmp_path / "db", "--workers", "1")
        assert result.exit_code == 0, result.output
        assert set(stored(tmp_path / "db")) == {str(top / "top.txt"), str(directory / "bottom.txt")}
    finally:  # bottom up: shutil.rmtree, as pytest cleans up, recurses once per level
        (directory / "bottom.txt").unlink()
        while directory != top:
            directory.rmdir()
            directory = directory.parent


def test_the_walk_keeps_its_order(tmp_path: Path) -> None:
    docs = tmp_path / "docs"
    for sub in ("b/y", "a/x", "a/z"):
        (docs / sub).mkdir(parents=True)
    for name in ("2.txt", "1.txt", "a/x/3.txt", "a/4.txt", "a/z/5.txt", "b/y/6.txt", "b/7.txt"):
        (docs / name).write_text(prose(len(name) + ord(name[0])) + name)
    result = run("add", docs, "-r", "--db", tmp_path / "db", "--workers", "1")
    assert result.exit_code == 0, result.output
    order = ["1.txt", "2.txt", "a/4.txt", "a/x/3.txt", "a/z/5.txt", "b/7.txt", "b/y/6.txt"]
    assert list(stored(tmp_path / "db")) == [str(docs / name) for name in order]


def test_a_walk_leaves_out_hidden_names_and_simdb_databases(tmp_path: Path) -> None:
    """`simdb add -r .` in a git checkout stored .git/HEAD, .git/config and compressed
    objects, and in a directory holding other simdb databases it stored their CURRENT files
    and failed on every data file (a probe found both).  Hidden names are left out unless
    --hidden, with a notice; a database directory is never read; a hidden file named on
    the command line is read as given."""
    tree = tmp_path / "tree"
    for name, seed in ((".git/HEAD", 1), (".git/objects/ab", 2), (".notes.txt", 3), ("a.txt", 4), ("sub/b.txt", 5)):
        (tree / name).parent.mkdir(parents=True, exist_ok=True)
        (tree / name).write_text(prose(seed))
    with simdb.open(tree / "sub" / "other-db") as other:
        other.add("x", 1)
    walked = run("add", "-r", tree, "--db", tmp_path / "db")
    assert walked.exit_code == 0, walked.output
    assert set(stored(tmp_path / "db")) == {str(tree / "a.txt"), str(tree / "sub" / "b.txt")}
    assert "2 hidden files and directories left out (--hidden" in walked.stderr  # .git, .notes.txt
    assert f"{tree / 'sub' / 'other-db'}: a simdb database" in walked.stderr
    everything = run("add", "-r", "--hidden", tree, "--db", tmp_path / "all")
    assert everything.exit_code == 0, everything.output
    expected = {".git/HEAD", ".git/objects/ab", ".notes.txt", "a.txt", "sub/b.txt"}
    assert set(stored(tmp_path / "all")) == {str(tree / name) for name in expected}
    named = run("add", tree / ".notes.txt", "--db", tmp_path / "named")
    assert named.exit_code == 0 and set(stored(tmp_path / "named")) == {str(tree / ".notes.txt")}
    # The notice counts only what --hidden would read: not .git without -r, nor an excluded name.
    flat = run("add", tree, "--exclude", ".notes.txt", "--db", tmp_path / "flat")
    assert flat.exit_code == 0 and "--hidden" not in flat.stderr
    # A directory holding a file named CURRENT that names no data file is no database.
    (tree / "sub" / "CURRENT").write_text("my own notes on the current state")
    assert run("add", "-r", tree, "--db", tmp_path / "again").exit_code == 0
    assert str(tree / "sub" / "CURRENT") in set(stored(tmp_path / "again"))
    # --prune follows the same rules: it removes only keys the walk would have read.
    with simdb.open(tmp_path / "named") as database:
        database.add_many([(str(tree / ".gone.txt"), 1), (str(tree / "gone.txt"), 2)])
    pruned = run("add", tree, "--prune", "--db", tmp_path / "named")
    assert pruned.exit_code == 0
    assert {str(tree / ".gone.txt"), str(tree / ".notes.txt")} <= set(stored(tmp_path / "named"))
    assert str(tree / "gone.txt") not in set(stored(tmp_path / "named"))


def test_special_files_met_in_a_walk_are_reported(tmp_path: Path) -> None:
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "a.txt").write_text(prose(1))
    os.mkfifo(docs / "pipe.txt")
    listener = socket.socket(socket.AF_UNIX)
    listener.bind(str(docs / "sock.txt"))
    try:
        result = _process("add", docs, "--db", tmp_path / "db", "--workers", "1", timeout=60)
    finally:
        listener.close()
    stderr = result.stderr.decode()
    assert result.returncode == 2, stderr
    for name in ("pipe.txt", "sock.txt"):
        assert str(docs / name) in stderr and "not a regular file" in stderr
    assert set(stored(tmp_path / "db")) == {str(docs / "a.txt")}
    summary = json_lines(_process("add", docs, "--glob", "a*", "--db", tmp_path / "db2", "--json").stdout.decode())[-1]
    assert summary["failed"] == 0  # a special file the glob leaves out is not reported


# -- remove: keys on stdin -----------------------------------------------------------------


@pytest.mark.parametrize("errors", ["strict", "surrogateescape"])
def test_remove_reads_undecodable_keys_on_stdin_line_by_line(tmp_path: Path, errors: str) -> None:
    """Whatever error handler stdin has (strict used to end the run with exit 3, the
    surrogate escapes of a C.UTF-8 locale made the database refuse every key)."""
    db = tmp_path / "db"
    with simdb.open(db) as database:
        database.add_many([("good", 1), ("other", 2), ("kept", 3)])
    strict = {"LC_ALL": "C.UTF-8", "PYTHONIOENCODING": f"utf-8:{errors}", "PYTHONUTF8": "0"}
    result = _process("remove", "-", "--db", db, stdin=b"good\n\xff\xfebad\nother\n", env=strict)
    stderr = result.stderr.decode()
    assert result.returncode == 2 and "<stdin>:2" in stderr and "UTF-8" in stderr, stderr
    one_line(stderr)
    assert "removed 2 documents" in result.stdout.decode()
    as_json = _process("remove", "-", "--db", db, "--json", stdin=b"\xff\n", env=strict)
    assert as_json.returncode == 2 and json_lines(as_json.stdout.decode())[-1] == {
        "removed": 0,
        "not_found": 0,
        "not_found_keys": [],
        "failed": 1,
    }
    assert set(stored(db)) == {"kept"}
    clean = _process("remove", "-", "--db", db, "--json", stdin=b"kept\r\nnothing\n", env=strict)
    assert clean.returncode == 0 and json_lines(clean.stdout.decode()) == [
        {"removed": 1, "not_found": 1, "not_found_keys": ["nothing"]}
    ]


# -- demo --dir ----------------------------------------------------------------------------


def test_demo_refuses_a_populated_directory_it_did_not_write(tmp_path: Path) -> None:
    target = tmp_path / "mine"
    target.mkdir()
    (target / "thesis.tex").write_text("my own work")
    refused = run("demo", "--dir", target, "--documents", "20", "--workers", "1")
    assert refused.exit_code == 2 and str(target) in refused.stderr, refused.output
    one_line(refused.stderr)
    assert sorted(os.listdir(target)) == ["thesis.tex"]
    empty = tmp_path / "empty"
    empty.mkdir()
    assert run("demo", "--dir", empty, "--documents", "20", "--workers", "1").exit_code == 0
    again = run("demo", "--dir", empty, "--documents", "20", "--workers", "1")  # its own output: rerun
    assert again.exit_code == 0, again.output
    a_file = tmp_path / "notes.txt"
    a_file.write_text("mine")
    not_a_directory = run("demo", "--dir", a_file, "--documents", "20", "--workers", "1")
    assert not_a_directory.exit_code == 2 and f"{a_file} is a file, not a directory" in not_a_directory.stderr
    assert a_file.read_text() == "mine"  # "File exists" was the raw OSError (a probe found it)


# -- WARC records whose Content-Length is no number ----------------------------------------


def _warc_record(uri: str, text: str, length: bytes | None = None) -> bytes:
    """One hand-written WARC response record; ``length`` replaces its Content-Length."""
    http = b"HTTP/1.0 200 OK\r\nContent-Type: text/plain\r\n\r\n" + text.encode()
    headers = (
        b"WARC/1.0\r\nWARC-Type: response\r\nWARC-Target-URI: " + uri.encode() + b"\r\n"
        b"Content-Type: application/http; msgtype=response\r\nContent-Length: "
        + (length or str(len(http)).encode())
        + b"\r\n\r\n"
    )
    return headers + http + b"\r\n\r\n"


@pytest.mark.parametrize("compressed", [False, True])
def test_a_warc_record_with_a_content_length_that_is_no_number_is_reported(tmp_path: Path, compressed: bool) -> None:
    records = [
        _warc_record("http://one/", prose(1, 80)),
        _warc_record("http://two/", prose(2, 80), b"abc"),
        _warc_record("http://three/", prose(3, 80)),
    ]
    archive = tmp_path / ("bad.warc.gz" if compressed else "bad.warc")
    archive.write_bytes(b"".join(gzip.compress(record) for record in records) if compressed else b"".join(records))
    result = _process("add", archive, "--db", tmp_path / "db", "--workers", "1")
    stderr = result.stderr.decode()
    assert result.returncode == 2, stderr
    assert (
        f"{archive}: record 2 at byte {len(gzip.compress(records[0])) if compressed else len(records[0])}" in stderr
        and "Content-Length 'abc'" in stderr
    ), stderr
    assert "WARNING" not in stderr and "Offset" not in stderr
    one_line(stderr)
    assert set(stored(tmp_path / "db")) == {"http://one/", "http://three/"}


# -- export and import keep every meta exactly ---------------------------------------------

_INT = st.integers(-(2**63), 2**64 - 1)
_TEXT = st.text(st.characters(blacklist_categories=("Cs",)), max_size=8)
_LOOKS_LIKE_A_TAG = st.fixed_dictionaries({"base64": st.sampled_from(["aGk=", "", "not base64!"]) | _TEXT})
_SCALARS = st.none() | st.booleans() | _INT | st.floats() | _TEXT | st.binary(max_size=8) | _LOOKS_LIKE_A_TAG
_KEYS = _TEXT | _INT | st.none() | st.booleans() | st.floats() | st.binary(max_size=8)
_META = st.recursive(
    _SCALARS,
    lambda children: st.lists(children, max_size=4) | st.dictionaries(_KEYS, children, max_size=4),
    max_leaves=12,
)


def _exactly(values: list[object]) -> list[bytes]:
    """The values as msgpack bytes: equal only if every type, bit (NaN's too) and order is."""
    return [codec.pack(value, "meta") for value in values]


def _round_trip(directory: Path, metas: list[object], file_format: str) -> list[object]:
    """``metas`` stored, exported in ``file_format``, imported into a new database, read back."""
    with simdb.open(directory / "a") as database:
        database.add_many((f"key-{number}", number, meta) for number, meta in enumerate(metas))
    exported = directory / f"out.{file_format}"
    written = run("export", "--format", file_format, "-o", exported, "--db", directory / "a")
    assert written.exit_code == 0, written.output
    imported = run("import", exported, "--db", directory / "b")
    assert imported.exit_code == 0, imported.output
    with simdb.open(directory / "b", readonly=True) as database:
        return [document.meta for document in database.items()]


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(metas=st.lists(_META, min_size=1, max_size=4), file_format=st.sampled_from(["jsonl", "tsv"]))
def test_every_meta_the_library_accepts_survives_export_and_import(metas: list[object], file_format: str) -> None:
    with tempfile.TemporaryDirectory() as directory:
        try:
            back = _round_trip(Path(directory), metas, file_format)
        except simdb.InvalidInputError:
            assume(False)  # a meta the library refuses: not this property's concern
        assert _exactly(back) == _exactly(metas)


@pytest.mark.parametrize("file_format", ["jsonl", "tsv"])
def test_the_probes_metas_survive_export_and_import(tmp_path: Path, file_format: str) -> None:
    metas = [
        {"base64": "aGk="},
        {1: "one"},
        {None: 0},
        float("nan"),
        {"x": [float("inf"), -float("inf")]},
        b"hi",
        {"base64": b"hi"},
    ]
    assert _exactly(_round_trip(tmp_path, metas, file_format)) == _exactly(metas)


def test_exports_written_before_format_2_import_as_before(tmp_path: Path) -> None:
    """Format 1 wrote bytes as {"base64": ...} and dict keys as strings; such files (with a
    header, without one, and TSV) still import as they always did."""
    lines = [
        {"key": "a", "fingerprint": "0x1", "meta": {"base64": "aGk="}},
        {"key": "b", "fingerprint": "0x2", "meta": {"1": "one", "n": [{"base64": "AA=="}]}},
    ]
    header = {"simdb": "export", "format_version": 1, "k": 3, "blocks": 5, "fingerprinter": None}
    expected = {"a": b"hi", "b": {"1": "one", "n": [b"\0"]}}
    for name, rows in (("with-header.jsonl", [header, *lines]), ("no-header.jsonl", lines)):
        (tmp_path / name).write_text("".join(json.dumps(row) + "\n" for row in rows))
    (tmp_path / "old.tsv").write_text(
        "".join(f"{row['key']}\t{row['fingerprint']}\t{json.dumps(row['meta'])}\n" for row in lines)
    )
    for name in ("with-header.jsonl", "no-header.jsonl", "old.tsv"):
        result = run("import", tmp_path / name, "--db", tmp_path / f"db-{name}")
        assert result.exit_code == 0, result.output
        assert {key: document.meta for key, document in stored(tmp_path / f"db-{name}").items()} == expected


def test_a_damaged_msgpack_meta_fails_its_line_only(tmp_path: Path) -> None:
    source = tmp_path / "backup.jsonl"
    rows = [
        {"key": "a", "fingerprint": "0x1", "meta_msgpack": "gaFhAQ=="},
        {"key": "b", "fingerprint": "0x2", "meta_msgpack": "!!"},
        {"key": "c", "fingerprint": "0x3", "meta_msgpack": "kQ=="},
    ]
    source.write_text("".join(json.dumps(row) + "\n" for row in rows))
    result = run("import", source, "--db", tmp_path / "db")
    assert result.exit_code == 2 and f"{source}:2" in result.stderr and f"{source}:3" in result.stderr, result.output
    one_line(result.stderr)
    assert {key: document.meta for key, document in stored(tmp_path / "db").items()} == {"a": {"a": 1}}


# -- oversized documents and memory ------------------------------------------------------

BIG = 300 * 2**20  # bytes of the oversized document, far above the RSS the test allows
LIMIT = 2**20  # --max-doc-bytes in these tests


def _write_big_gzip(path: Path, head: bytes, tail: bytes, members: tuple[bytes, bytes] = (b"", b"")) -> None:
    """A gzip file: ``members[0]``, then one member of ``head`` + BIG bytes + ``tail``, then
    ``members[1]`` (already compressed); written a MiB at a time."""
    chunk = b"ab " * (2**20 // 3)
    with open(path, "wb") as raw:
        raw.write(members[0])
        with gzip.GzipFile(fileobj=raw, mode="wb", compresslevel=1) as stream:
            stream.write(head)
            for _ in range(BIG // len(chunk)):
                stream.write(chunk)
            stream.write(tail)
        raw.write(members[1])


def _peak_rss_mib(*args: object) -> tuple[subprocess.CompletedProcess[bytes], float]:
    """Run ``python -m simdb_cli.app ARGS`` under a parent of its own, which reports the peak RSS
    of its children (the command and any workers it started), in MiB."""
    wrapper = (
        "import resource, subprocess, sys\n"
        "done = subprocess.run(sys.argv[1:], capture_output=True)\n"
        "sys.stderr.buffer.write(done.stderr); sys.stdout.buffer.write(done.stdout)\n"
        "peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss\n"
        "sys.stderr.write(f'\\nPEAK {peak}\\n'); sys.exit(done.returncode)\n"
    )
    result = _process_raw([sys.executable, "-c", wrapper, sys.executable, "-m", "simdb_cli.app", *map(str, args)])
    stderr = result.stderr.decode()
    peak = int(stderr.rsplit("PEAK ", 1)[1]) / 1024
    result.stderr = stderr.rsplit("\nPEAK ", 1)[0].encode()
    return result, peak


def _process_raw(command: list[str]) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(command, capture_output=True, env={**os.environ, "SIMDB_PATH": ""}, timeout=300, check=False)


def test_oversized_documents_are_skipped_without_reading_them_whole(tmp_path: Path) -> None:
    """A 300 MB JSONL line and WARC record (gzipped to little) and a 300 MB text file, with
    --max-doc-bytes 1 MiB: each is reported with its size and skipped, the documents around
    them are stored, and the process never holds anything like the document."""
    jsonl = tmp_path / "big.jsonl.gz"
    good = [json.dumps({"id": f"line-{number}", "text": prose(number)}).encode() + b"\n" for number in (1, 3)]
    _write_big_gzip(jsonl, b'{"id": "big", "text": "', b'"}\n', (gzip.compress(good[0]), gzip.compress(good[1])))
    archive = tmp_path / "big.warc.gz"
    http = b"HTTP/1.0 200 OK\r\nContent-Type: text/plain\r\n\r\n"
    head = (
        b"WARC/1.0\r\nWARC-Type: response\r\nWARC-Target-URI: http://big/\r\n"
        b"Content-Type: application/http; msgtype=response\r\nContent-Length: "
        + str(len(http) + BIG // 3 * 3).encode()
        + b"\r\n\r\n"
        + http
    )
    _write_big_gzip(
        archive,
        head,
        b"\r\n\r\n",
        (gzip.compress(_warc_record("http://one/", prose(4))), gzip.compress(_warc_record("http://three/", prose(5)))),
    )
    text = tmp_path / "big.txt"
    with open(text, "wb") as handle:
        handle.truncate(BIG)  # sparse: costs no disk
    small = tmp_path / "small.txt"
    small.write_text(prose(6))
    result, peak = _peak_rss_mib(
        "add",
        archive,
        text,
        small,
        "--jsonl",
        jsonl,
        "--max-doc-bytes",
        LIMIT,
        "--db",
        tmp_path / "db",
        "--workers",
        "1",
    )
    stderr = result.stderr.decode()
    assert result.returncode == 2, stderr
    assert (
        f"{jsonl}:2: a line of" in stderr
        and f"{archive}: record http://big/" in stderr
        and f"{text}: {BIG:,} bytes" in stderr
    ), stderr
    assert stderr.count("over --max-doc-bytes (1,048,576)") == 3
    assert set(stored(tmp_path / "db")) == {"line-1", "line-3", "http://one/", "http://three/", str(small)}
    assert peak < 200, f"peak RSS {peak:.0f} MiB while skipping {BIG / 2**20:.0f} MB documents"


def test_a_batch_of_large_texts_is_committed_in_parts(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The texts handed to the database and not yet committed stay under BATCH_TEXT_CHARS
    plus one document: the call ends early and the next takes the rest, even when an
    item of a batch is refused and the batch is stored in halves."""
    import simdb_cli.ingest

    monkeypatch.setattr(simdb_cli.ingest, "BATCH_TEXT_CHARS", 5_000)
    calls: list[int] = []
    add_texts = simdb.Database.add_texts

    def counting(self: simdb.Database, items: object, **kwargs: object) -> object:
        def counted(rows: object) -> object:
            for row in rows:  # type: ignore[attr-defined]
                calls[-1] += len(row[1])
                yield row

        calls.append(0)
        return add_texts(self, counted(items), **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(simdb.Database, "add_texts", counting)
    source = tmp_path / "docs.jsonl"
    rows = [{"id": f"doc-{number}", "text": prose(number, 200)} for number in range(20)]
    rows[7]["deep"] = json.loads("[" * 150 + "]" * 150)  # meta the database refuses
    source.write_text("".join(json.dumps(row) + "\n" for row in rows))
    result = run("add", "--jsonl", source, "--db", tmp_path / "db", "--workers", "1")
    assert result.exit_code == 2 and f"{source}:8" in result.stderr, result.output
    assert set(stored(tmp_path / "db")) == {f"doc-{number}" for number in range(20)} - {"doc-7"}
    longest = max(len(row["text"]) for row in rows)
    assert len(calls) > 3 and max(calls) <= 5_000 + longest, calls


# -- issue #13 re-probe: meta blow-up, damaged headers, extension types, WARC lengths --------


def test_meta_of_millions_of_containers_is_refused_before_parsing(tmp_path: Path) -> None:
    """A short line of ``[],`` repeated parses into millions of lists (a 9 MB line took over
    400 MiB): refused from a cheap count, with its file and line, the other lines stored."""
    source = tmp_path / "meta.jsonl.gz"
    containers = 3_000_000
    bomb = b'{"id": "bomb", "text": "a b c", "m": [' + b"[]," * containers + b"[]]}\n"
    good = [json.dumps({"id": f"line-{n}", "text": prose(n), "tags": ["[", "{" * 10]}).encode() + b"\n" for n in (1, 3)]
    source.write_bytes(gzip.compress(good[0] + bomb + good[1]))
    result, peak = _peak_rss_mib("add", "--jsonl", source, "--db", tmp_path / "db", "--workers", "1")
    stderr = result.stderr.decode()
    assert result.returncode == 2 and f"{source}:2: meta too complex" in stderr, stderr
    assert set(stored(tmp_path / "db")) == {"line-1", "line-3"}
    assert peak < 200, f"peak RSS {peak:.0f} MiB for a {len(bomb) / 2**20:.0f} MB line"


def test_brackets_inside_strings_are_not_containers(tmp_path: Path) -> None:
    source = tmp_path / "docs.jsonl"
    source.write_text(json.dumps({"id": "code", "text": "[{" * 120_000, "note": "]" * 10}) + "\n")
    result = run("add", "--jsonl", source, "--db", tmp_path / "db", "--workers", "1")
    assert result.exit_code == 0, result.output
    assert set(stored(tmp_path / "db")) == {"code"}


def test_uncommitted_metadata_counts_toward_the_early_commit(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Documents of short text and large meta: the call to the database ends early on the
    meta held, not only on the text."""
    import simdb_cli.ingest

    monkeypatch.setattr(simdb_cli.ingest, "BATCH_TEXT_CHARS", 50_000)
    calls: list[int] = []
    add_texts = simdb.Database.add_texts

    def counting(self: simdb.Database, items: object, **kwargs: object) -> object:
        def counted(rows: object) -> object:
            for row in rows:  # type: ignore[attr-defined]
                calls[-1] += 1
                yield row

        calls.append(0)
        return add_texts(self, counted(items), **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(simdb.Database, "add_texts", counting)
    source = tmp_path / "docs.jsonl"
    source.write_text(
        "".join(json.dumps({"id": f"d{n}", "text": "a b", "m": list(range(1_000))}) + "\n" for n in range(10))
    )
    result = run("add", "--jsonl", source, "--db", tmp_path / "db", "--workers", "1")
    assert result.exit_code == 0, result.output
    assert len(stored(tmp_path / "db")) == 10
    assert len(calls) >= 5 and max(calls) <= 2, calls


@pytest.mark.parametrize(
    "header",
    [
        '{"simdb": "export", "format_version": 2, "k": 5,, "blocks": 6}',
        '{"simdb": "export", "format_version": 2, "k": ' + HUGE + "}",
    ],
    ids=["invalid-json", "5000-digit-k"],
)
def test_a_damaged_export_header_refuses_the_whole_file(tmp_path: Path, header: str) -> None:
    source = tmp_path / "backup.jsonl"
    source.write_text(header + "\n" + json.dumps({"key": "a", "fingerprint": "0x1"}) + "\n")
    result = run("import", source, "--db", tmp_path / "db")
    assert result.exit_code == 2 and f"{source}:1: damaged export header" in result.stderr, result.output
    assert "the file was not read" in result.stderr
    one_line(result.stderr)
    assert not (tmp_path / "db").exists()  # nothing imported with default settings


def test_a_msgpack_timestamp_is_refused_at_import_and_at_add(tmp_path: Path) -> None:
    import base64

    import msgpack

    source = tmp_path / "backup.jsonl"
    rows = [
        {"key": "a", "fingerprint": "0x1", "meta_msgpack": "1v8AAAAB"},
        {"key": "b", "fingerprint": "0x2", "meta": 1},
    ]
    source.write_text("".join(json.dumps(row) + "\n" for row in rows))
    result = run("import", source, "--db", tmp_path / "db")
    assert result.exit_code == 2 and f"{source}:1" in result.stderr and "Timestamp" in result.stderr, result.output
    assert set(stored(tmp_path / "db")) == {"b"}
    with simdb.open(tmp_path / "db") as database:
        for meta in (msgpack.Timestamp(1), {"t": [msgpack.ExtType(5, b"x")]}):
            with pytest.raises(simdb.InvalidInputError, match="extension type"):
                database.add("c", 3, meta)
            with pytest.raises(simdb.InvalidInputError, match="extension type"):
                database.add_many([("c", 3, meta)])
        assert database.get("c") is None
    deep = base64.b64encode(b"\x91" * 5000 + b"\xc0").decode()
    source.write_text(json.dumps({"key": "d", "fingerprint": "0x4", "meta_msgpack": deep}) + "\n")
    result = run("import", source, "--db", tmp_path / "db")
    assert result.exit_code == 2 and "not valid msgpack: nested too deeply" in result.stderr, result.output


def test_query_json_prints_a_stored_meta_json_cannot_carry_as_msgpack(tmp_path: Path) -> None:
    """A database written before extension types were refused may hold a Timestamp."""
    import base64

    import lmdb
    import msgpack

    with simdb.open(tmp_path / "db") as database:
        database.add("a", 1, {"t": 1})
        env = database._storage.env
        with env.begin(write=True) as txn:
            docs = env.open_db(b"docs", txn=txn)
            raw_id, _ = next(iter(txn.cursor(docs)))
            txn.put(raw_id, msgpack.packb(["a", 1, {"t": msgpack.Timestamp(1)}], use_bin_type=True), db=docs)
    assert isinstance(env, lmdb.Environment)
    result = run("query", "--fingerprint", "0x1", "--json", "--db", tmp_path / "db")
    assert result.exit_code == 0, result.output
    line = json.loads(result.stdout)
    assert line["key"] == "a" and "meta" not in line
    assert msgpack.unpackb(base64.b64decode(line["meta_msgpack"])) == {"t": msgpack.Timestamp(1)}


@pytest.mark.parametrize(("length", "lost"), [(b"5", set()), (b"30", {"http://three/"})], ids=["too-short", "too-long"])
@pytest.mark.parametrize("compressed", [False, True])
def test_a_warc_record_with_a_wrong_numeric_content_length_is_reported_not_stored(
    tmp_path: Path, length: bytes, lost: set[str], compressed: bool
) -> None:
    text = "hello world twelve"
    body = b"HTTP/1.0 200 OK\r\nContent-Type: text/plain\r\n\r\n" + text.encode()
    bad = _warc_record("http://two/", text, str(len(body) + int(length) - 18).encode())
    records = [_warc_record("http://one/", prose(1, 80)), bad, _warc_record("http://three/", prose(3, 80))]
    records.append(_warc_record("http://four/", prose(4, 80)))
    archive = tmp_path / ("bad.warc.gz" if compressed else "bad.warc")
    archive.write_bytes(b"".join(gzip.compress(record) for record in records) if compressed else b"".join(records))
    result = _process("add", archive, "--db", tmp_path / "db", "--workers", "1")
    stderr = result.stderr.decode()
    offset = len(gzip.compress(records[0])) if compressed else len(records[0])
    if compressed and length == b"30":  # the gzip member ends first: the record is cut short
        assert result.returncode == 2 and f"{archive}: record http://two/: is cut short" in stderr, stderr
    else:
        assert result.returncode == 2 and f"{archive}: record 2 at byte {offset} (http://two/)" in stderr, stderr
        assert "Content-Length is wrong" in stderr
    kept = set(stored(tmp_path / "db"))
    assert "http://two/" not in kept  # no damaged text stored
    expected = {"http://one/", "http://three/", "http://four/"} - (lost if not compressed else set())
    assert kept == expected, (kept, stderr)


def test_float_and_fingerprint_errors_are_short_and_say_what_is_wrong(tmp_path: Path) -> None:
    source = tmp_path / "docs.jsonl"
    # The second line is fine, so the database is created (a run that adds nothing creates none).
    source.write_text(f'{{"id": "a", "text": "x", "v": 1{"0" * 5000}.5}}\n{{"id": "b", "text": "y"}}\n')
    result = run("add", "--jsonl", source, "--db", tmp_path / "db", "--workers", "1")
    assert result.exit_code == 2 and "too large for a floating-point number" in result.stderr, result.output
    assert len(result.stderr) < 400
    result = run("query", "--fingerprint", "1" * 30, "--db", tmp_path / "db")
    assert result.exit_code == 2 and "too large for 64 bits" in result.stderr, result.output


def test_import_refuses_exports_made_with_other_fingerprint_settings_in_any_position(tmp_path: Path) -> None:
    """Found by an adversarial probe: only the first export's settings were compared with
    the database, so a later file (or one after a TSV file) put simhash fingerprints into
    a minhash database, where queries of their own text then found nothing."""
    (tmp_path / "a.txt").write_text(prose(1))
    (tmp_path / "b.txt").write_text(prose(2))
    for name, kind in (("mh", "minhash"), ("sh", "simhash")):
        text = tmp_path / ("a.txt" if kind == "minhash" else "b.txt")
        assert run("add", text, "--db", tmp_path / name, "--kind", kind, "--workers", "1").exit_code == 0
        assert run("export", "--db", tmp_path / name, "-o", tmp_path / f"{name}.jsonl").exit_code == 0
    (tmp_path / "plain.tsv").write_text("x\t0x1\n")
    for files, database in (
        (["mh.jsonl", "sh.jsonl"], "new"),  # a new database takes the first header's settings
        (["plain.tsv", "sh.jsonl"], "mh"),  # an existing minhash database, no header first
        (["sh.jsonl"], "mh"),  # the first header against an existing database: no options named
    ):
        result = run("import", *(tmp_path / name for name in files), "--db", tmp_path / database)
        assert result.exit_code == 2 and f"{tmp_path / 'sh.jsonl'}:1" in result.stderr, result.output
        assert "other settings" in result.stderr and "--kind" not in result.stderr
        one_line(result.stderr)
        imported = simdb.open(tmp_path / database, readonly=True)
        assert imported.fingerprinter is not None and imported.fingerprinter.kind == "minhash"
        # Every stored text document is found by its own text: nothing of sh.jsonl got in.
        for key in list(imported.keys()):
            if key.endswith(".txt"):
                assert key in {match.key for match in imported.query(text=(tmp_path / key).read_text())}
        assert not any(key.endswith("b.txt") for key in list(imported.keys()))
        imported.close()


def test_a_closed_stdout_is_a_usage_error_for_results_and_muted_for_add(tmp_path: Path) -> None:
    """Found by an adversarial probe: with stdout closed (``simdb add ... >&-``) Python has
    no sys.stdout, and every command failed with "unexpected AttributeError", exit 3, though
    add had stored every document.  Then (a later probe) export, keys and the rest exited 0
    having written nothing: silence a backup script took for success."""
    docs = tmp_path / "docs"
    docs.mkdir()
    for number in range(20):
        (docs / f"{number}.txt").write_text(prose(number))
    db = tmp_path / "db"
    commands = (
        ["add", docs, "--workers", "1"],
        ["keys"],
        ["export"],
        ["stats"],
        ["query", "--fingerprint", "0x1"],
        ["export", "-o", tmp_path / "e.jsonl"],  # these write their work elsewhere, or only
        ["compact"],  # a summary: a review found them failing, having done it
        ["remove", "--paths", docs / "0.txt"],
    )
    for command in commands:
        result = subprocess.run(
            [sys.executable, "-m", "simdb_cli.app", *map(str, command), "--db", str(db)],
            capture_output=False,
            stderr=subprocess.PIPE,
            preexec_fn=lambda: os.close(1),  # the child's stdout, closed before it starts
            timeout=120,
            check=False,
        )
        assert b"unexpected" not in result.stderr, (command, result.stderr)
        if command[0] in ("add", "compact", "remove") or "-o" in command:  # the work is the point
            assert result.returncode == 0, result.stderr
        elif command[0] == "query":  # nothing found, so nothing to write: as with a stdout
            assert result.returncode == 1, result.stderr
        else:
            assert result.returncode == 2 and b"simdb: stdout is closed" in result.stderr, result.stderr
    assert len(stored(db)) == 19 and (tmp_path / "e.jsonl").read_text().count("\n") == 21


def test_a_closed_stdin_is_a_usage_error_naming_it(tmp_path: Path) -> None:
    # Found by an adversarial probe: "-" with stdin closed (``simdb remove - <&-``) failed
    # with "unexpected AttributeError", exit 3.
    db = tmp_path / "db"
    with simdb.open(db) as database:
        database.add("a", 1)
    for command in (["remove", "-"], ["get", "-"], ["add", "--jsonl", "-"], ["add", "--fingerprints", "-"]):
        result = subprocess.run(
            [sys.executable, "-m", "simdb_cli.app", *command, "--db", str(db)],
            capture_output=True,
            preexec_fn=lambda: os.close(0),  # the child's stdin, closed before it starts
            timeout=120,
            check=False,
        )
        assert result.returncode == 2, (command, result.stderr)
        assert b"stdin is closed" in result.stderr and b"unexpected" not in result.stderr, (command, result.stderr)
    assert set(stored(db)) == {"a"}


def test_names_that_are_not_utf8_are_usage_errors(tmp_path: Path) -> None:
    (tmp_path / "a.txt").write_text(prose(1))
    for arguments in (
        [b"add", b"a.txt", b"--db", b"db\xff"],
        [b"add", b"a.txt", b"--db", b"db", b"--encoding", b"\xff"],
        [b"demo", b"--dir", b"d\xff"],
    ):
        result = subprocess.run(
            [sys.executable.encode(), b"-m", b"simdb_cli.app", *arguments],
            capture_output=True,
            cwd=tmp_path,
            timeout=120,
            check=False,
        )
        assert result.returncode == 2 and b"unexpected" not in result.stderr, (arguments, result.stderr)
        assert b"\\udcff" in result.stderr, result.stderr  # the input is named
    assert sorted(path.name for path in tmp_path.iterdir()) == ["a.txt"]  # nothing was made


def test_an_export_given_to_add_and_documents_given_to_import_are_named_once(tmp_path: Path) -> None:
    """`simdb add backup.jsonl` (an export) failed every line for want of text, and `simdb
    import docs.jsonl` (documents) every line for want of a key, with no word of the other
    command (a probe found it).  Each now fails the file once, naming the command that reads it."""
    documents = tmp_path / "my docs.jsonl"
    documents.write_text("".join(json.dumps({"id": f"d{n}", "text": prose(n)}) + "\n" for n in range(12)))
    assert run("add", "--jsonl", documents, "--db", tmp_path / "db").exit_code == 0
    backup = tmp_path / "backup.jsonl"
    assert run("export", "-o", backup, "--db", tmp_path / "db").exit_code == 0
    # A new user's pass: --fingerprints first said the new database would take the default
    # settings, then refused the file and made none.
    as_fingerprints = run("add", "--fingerprints", backup, "--db", tmp_path / "other")
    assert as_fingerprints.exit_code == 2 and "default settings" not in as_fingerprints.stderr
    assert "no database was created" in as_fingerprints.stderr
    for command in (["add", backup], ["add", "--jsonl", backup]):
        refused = run(*command, "--db", tmp_path / "other")
        assert refused.exit_code == 2 and f"simdb import {backup}" in refused.stderr
        assert refused.stderr.count(str(backup)) == 2 and not (tmp_path / "other").exists()
        one_line(refused.stderr.splitlines()[0])
    wrong = run("import", documents, "--db", tmp_path / "other")
    assert wrong.exit_code == 2 and f"simdb add --jsonl '{documents}'" in wrong.stderr
    assert "no string 'key'" not in wrong.stderr and not (tmp_path / "other").exists()
    # A new user's pass: documents whose text is under another name failed every line of
    # import for want of a key, and every line of add for want of 'text', naming neither fix.
    records = tmp_path / "records.jsonl"
    records.write_text("".join(json.dumps({"id": f"r{n}", "body": prose(n)}) + "\n" for n in range(5)))
    imported = run("import", records, "--db", tmp_path / "other")
    assert imported.exit_code == 2 and imported.stderr.count("\n") == 2, imported.stderr
    assert "its fields: 'id', 'body'" in imported.stderr and "--text-field NAME" in imported.stderr
    added = run("add", "--jsonl", records, "--db", tmp_path / "other")
    assert added.exit_code == 2
    assert f"{records}:1: no 'text' field (its fields: 'id', 'body'; --text-field names the text's)" in added.stderr
    hashed = run("hash", "--file", records, "--text-field", "body", "--json")
    assert hashed.exit_code == 0 and [line["key"] for line in json_lines(hashed.stdout)] == [f"r{n}" for n in range(5)]


@pytest.mark.parametrize(
    ("command", "option"),
    [
        (["add", "doc.txt", "--stopwords", "french"], "--stopwords french"),
        (["add", "doc.txt", "--features", "bogus"], "--features bogus"),
        (["add", "doc.txt", "--weights", "tf"], "--weights tf"),
        (["add", "doc.txt", "--kind", "nope"], "--kind nope"),
        (["add", "doc.txt", "--blocks", "64"], "--blocks 64"),
        (["hash", "some text", "--bits", "16"], "--bits 16"),
    ],
)
def test_a_bad_setting_is_named_by_its_option_not_in_python_terms(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, command: list[str], option: str
) -> None:
    """The library words these as Python (``stopwords='french'``, ``use None or one of
    ['english']``, ``give kind='simhash'``); the command line names the option and the
    values it takes (a probe found the Python wording)."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "doc.txt").write_text(prose(1))
    refused = run(*command, *(["--db", tmp_path / "db"] if command[0] != "hash" else []))
    assert refused.exit_code == 2 and refused.stderr.startswith(f"simdb: {option} is not valid: give ")
    assert "=" not in refused.stderr and "[" not in refused.stderr and "None" not in refused.stderr
    one_line(refused.stderr)
    assert not (tmp_path / "db").exists()


def test_a_fingerprint_line_with_a_column_too_many_is_reported_not_cut(tmp_path: Path) -> None:
    """A fourth column on `add --fingerprints` (a tab inside the meta, say) was dropped
    without a word (a probe found it); the line is reported and the others are added."""
    source = tmp_path / "fingerprints.tsv"
    source.write_text('k9\t0x3\t{"a":1}\textra\nk8\t0x4\t{"b":2}\n')
    result = run("add", "--fingerprints", source, "--db", tmp_path / "db")
    assert result.exit_code == 2 and f"{source}:1: 4 tab-separated columns" in result.stderr
    [(key, document)] = stored(tmp_path / "db").items()
    assert key == "k8" and (document.fingerprint, document.meta) == (4, {"b": 2})


def test_bad_settings_in_an_export_header_are_named_as_stored_not_as_options(tmp_path: Path) -> None:
    """import has no --stopwords: an export header whose stop-word list is unknown was
    reported as "--stopwords french is not valid" (a review found it)."""
    (tmp_path / "a.txt").write_text(prose(1))
    assert run("add", tmp_path / "a.txt", "--db", tmp_path / "db").exit_code == 0
    export = run("export", "--db", tmp_path / "db").stdout
    damaged = tmp_path / "bad.jsonl"
    damaged.write_text(export.replace('"stopwords":null', '"stopwords":"french"', 1))
    refused = run("import", damaged, "--db", tmp_path / "copy")
    assert (
        refused.exit_code == 2 and "header fingerprinter settings cannot be used: stopwords='french'" in refused.stderr
    )
    assert "--stopwords" not in refused.stderr


@pytest.mark.parametrize(
    ("arguments", "named"),
    [
        (["pairs", "-t", "abc"], "'--threshold'"),
        (["add", "-k", "many", "x.txt"], "'-k'"),
        # Named whichever typer words the range: older ones say "99 is not in the range", newer
        # ones leave it out ("Input should be less than or equal to 64"), and simdb adds it.
        (["query", "-k", "99", "text"], "99"),
        (["query", "--limit=-5", "text"], "-5"),
        (["pairs", "-k77"], "77"),
        (["pairs", "--bogus"], "--bogus"),
        (["pairs", "--bo\x1b[2Jgus"], "--bo\\x1b[2Jgus"),  # escaped, as in every message
        (["frob"], "'frob'"),
    ],
)
def test_click_usage_errors_are_one_line_naming_the_input(arguments: list[str], named: str) -> None:
    """A value of the wrong type or an unknown option or command got click's four lines
    (usage, a "Try" line, a blank, the error), where every other simdb error is one line
    (a probe found it)."""
    result = run(*arguments)
    assert result.exit_code == 2 and result.stdout == ""
    one_line(result.stderr)
    assert len(result.stderr.splitlines()) == 1 and named in result.stderr and "-h lists the" in result.stderr


def test_a_broken_symbolic_link_in_a_walk_is_noted_not_failed(tmp_path: Path) -> None:
    """A dangling link was skipped without a word, while a link loop was reported (a probe
    found the two uneven): it is noted on stderr, and the run still succeeds."""
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "a.txt").write_text(prose(1))
    (docs / "gone.txt").symlink_to(tmp_path / "nowhere.txt")
    result = run("add", docs, "--db", tmp_path / "db")
    assert result.exit_code == 0 and f"{docs / 'gone.txt'}: a broken symbolic link; not read" in result.stderr
    assert set(stored(tmp_path / "db")) == {str(docs / "a.txt")}


@pytest.mark.parametrize("command", ["add", "import"])
def test_a_bad_plan_is_named_before_any_input_is_read(tmp_path: Path, command: str) -> None:
    """Found by a docs probe: add -k 70 with a missing input reported only the input, and
    with a good one named k as the library does ('k=70'); the plan of a new database is
    now checked first, in the options' words."""
    bad_plans = ((["-k", "70"], "-k 70 is not valid"), (["-k", "5", "--blocks", "3"], "--blocks 3 is not valid"))
    for options, said in bad_plans:
        result = run(command, tmp_path / "missing.txt", *options, "--db", tmp_path / "db")
        assert result.exit_code == 2 and said in result.stderr and "missing.txt" not in result.stderr, result.stderr
        assert not (tmp_path / "db").exists()


def test_jsonl_lines_of_the_wrong_type_are_named_in_json_terms(tmp_path: Path) -> None:
    """Found by a docs probe: a line that was an array said 'a JSON list', a string 'a JSON
    str' (Python's names); a message about JSON uses JSON's."""
    source = tmp_path / "bad.jsonl"
    source.write_text('[1, 2]\n"text"\n{"id": "a", "text": 5}\n{"id": [1], "text": "x"}\n{"id": "b", "text": null}\n')
    stderr = run("add", "--jsonl", source, "--db", tmp_path / "db").stderr
    for said in ("a JSON array, not an object", "a JSON string, not an object", "'text' is a JSON number"):
        assert said in stderr, stderr
    assert "'id' is a JSON array" in stderr and "list" not in stderr and " str," not in stderr


def test_a_meta_nested_too_deep_fails_its_line_as_it_is_read(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A probe: a JSONL line whose meta nests past what the database stores was found only
    when the database refused its batch, which was then cut in halves and fingerprinted
    again down to the line: about a second per such line (50 in 20,000 lines: 54 s, not 3)."""
    from simdb_cli.ingest import Ingest

    def no_retries(self: Any, items: Any, add: Any) -> None:
        raise AssertionError("a batch was refused and retried in halves")

    monkeypatch.setattr(Ingest, "_store_in_halves", no_retries)
    deep: Any = 1
    for _ in range(150):
        deep = [deep]
    lines = [
        json.dumps({"id": f"d{i}", "text": prose(i, 30), **({"m": deep} if i % 10 == 5 else {})}) for i in range(40)
    ]
    source = tmp_path / "deep.jsonl"
    source.write_text("\n".join(lines) + "\n")
    result = run("add", "--jsonl", source, "--db", tmp_path / "db", "--workers", "1", "--json")
    assert result.exit_code == 2, result.output
    failed = [event for event in json_lines(result.stdout) if event["event"] == "failed"]
    assert [event["input"] for event in failed] == [f"{source}:{i + 1}" for i in range(5, 40, 10)]
    assert all("nested more than 100 levels deep" in event["cause"] for event in failed)
    with simdb.open(tmp_path / "db", readonly=True) as database:
        assert len(database) == 36


def test_an_export_header_after_documents_without_settings_refuses_its_file(tmp_path: Path) -> None:
    """A probe: `import legacy.tsv full.jsonl` made the database from the TSV's bare
    fingerprints, without settings, then dropped full.jsonl's sketches saying that file had
    no settings header (it had), and took its fingerprints as settings-less ones: a copy of a
    stored text was no longer found.  The header's file is refused, naming the order that
    works; the other order keeps the settings and the sketches."""
    documents = tmp_path / "docs.jsonl"
    documents.write_text("".join(json.dumps({"id": f"d{n}", "text": prose(n)}) + "\n" for n in range(3)))
    made = run("add", "--jsonl", documents, "--features", "char", "--ngram", "5", "--db", tmp_path / "src")
    assert made.exit_code == 0
    full = tmp_path / "full.jsonl"
    assert run("export", "-o", full, "--db", tmp_path / "src").exit_code == 0
    legacy = tmp_path / "legacy.tsv"
    legacy.write_text("legacy-1\t0x0123456789abcdef\n")
    mixed = run("import", legacy, full, "--db", tmp_path / "mixed")
    assert mixed.exit_code == 2 and f"{full}:1: its settings header comes after documents" in mixed.stderr
    assert "import this file first" in mixed.stderr and "no settings header" not in mixed.stderr
    assert set(stored(tmp_path / "mixed")) == {"legacy-1"}
    ordered = run("import", full, legacy, "--db", tmp_path / "ordered")
    assert ordered.exit_code == 0, ordered.output
    with simdb.open(tmp_path / "ordered", readonly=True) as database:
        assert database.fingerprinter is not None and database.fingerprinter.features == "char"
        assert sum(sketch is not None for _, sketch in database.sketched_items()) == 3


def test_an_export_import_cannot_read_says_what_it_is(tmp_path: Path) -> None:
    """A probe: `export --format tsv | import -` failed on every line, and a gzipped export
    piped into `import -` was "neither an export JSONL file nor named .tsv", neither naming
    the fix; an export line with both 'meta' and 'meta_msgpack' kept one silently."""
    db = tmp_path / "db"
    with simdb.open(db) as database:
        database.add_many([(f"k{i}", i + 1, {"n": i}) for i in range(5)])
    tsv = run("export", "--format", "tsv", "--db", db).stdout
    piped = run("import", "-", "--db", tmp_path / "a", input=tsv)
    assert piped.exit_code == 2 and piped.stderr.splitlines()[0] == (
        "simdb: <stdin>: is a TSV export read as JSONL: name it .tsv, or give --format tsv"
    )
    assert run("import", "-", "--format", "tsv", "--db", tmp_path / "a", input=tsv).exit_code == 0
    assert len(stored(tmp_path / "a")) == 5
    packed = tmp_path / "export.jsonl.gz"
    assert run("export", "-o", packed, "--db", db).exit_code == 0
    gzipped = run("import", "-", "--db", tmp_path / "b", input=packed.read_bytes())
    assert gzipped.exit_code == 2 and "it is gzip-compressed: name the file" in gzipped.stderr
    lines = run("export", "--db", db).stdout.splitlines()
    both = json.loads(lines[1])
    both["meta_msgpack"] = "gQA="
    twice = tmp_path / "twice.jsonl"
    twice.write_text("\n".join([lines[0], json.dumps(both), *lines[2:]]) + "\n")
    result = run("import", twice, "--db", tmp_path / "c")
    assert result.exit_code == 2 and f"{twice}:2: holds both 'meta' and 'meta_msgpack'" in result.stderr
    assert set(stored(tmp_path / "c")) == {f"k{i}" for i in range(1, 5)}
