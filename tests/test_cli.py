"""The ``simdb`` command line, driven through typer's CliRunner (in process).

Process-level behaviour (the console script, Ctrl-C) is in tests/test_cli_process.py.
Every input is generated in ``tmp_path``; ``--workers 1`` keeps most runs in process.
"""

from __future__ import annotations

import codecs
import gzip
import io
import json
import os
import random
import re
from pathlib import Path

import pytest
import typer
from simdb_cli import output
from simdb_cli.app import DEFAULT_DB_PATH, app
from typer.testing import CliRunner

import simdb
from simdb.fingerprint import Fingerprinter
from tests.conftest import brute_force_query

runner = CliRunner()


def run(*args: str, input: str | None = None, env: dict[str, str] | None = None):
    """Invoke the app; exceptions escaping it are test failures, never exit codes."""
    result = runner.invoke(app, [str(arg) for arg in args], input=input, env=env, catch_exceptions=False)
    return result


def simhash(text: str, **settings: object) -> int:
    """The fingerprint a new database (and ``simdb hash``) gives ``text`` by default, or
    with ``settings``: the default kind is minhash, whatever the name says."""
    return Fingerprinter(**settings).fingerprint(text)  # type: ignore[arg-type]


def json_lines(text: str) -> list[dict]:
    return [json.loads(line) for line in text.splitlines() if line.strip()]


def prose(seed: int, words: int = 250) -> str:
    """A deterministic text of invented words, unrelated to other seeds' texts."""
    rng = random.Random(seed)
    vocabulary = [f"{rng.choice('bdfgklmnprstvz')}{rng.choice('aeiou')}{rng.choice('lmnrst')}{i}" for i in range(4000)]
    return " ".join(rng.choices(vocabulary, k=words)) + "."


@pytest.fixture
def corpus(tmp_path: Path) -> Path:
    """docs/ with two distinct texts, a copy of one that differs only in case (distance
    0), and a subdirectory holding another text and a non-.txt file."""
    docs = tmp_path / "docs"
    (docs / "sub").mkdir(parents=True)
    (docs / "alpha.txt").write_text(prose(1))
    (docs / "alpha-upper.txt").write_text(prose(1).upper())
    (docs / "beta.txt").write_text(prose(2))
    (docs / "sub" / "gamma.txt").write_text(prose(3))
    (docs / "sub" / "notes.md").write_text(prose(4))
    return docs


@pytest.fixture
def db(tmp_path: Path) -> str:
    return str(tmp_path / "db")


@pytest.fixture
def filled(corpus: Path, db: str) -> str:
    """A database holding the four .txt files of ``corpus``."""
    # k=3 named: these tests count tables and distances of a k=3 index (the default is k=5).
    result = run("add", corpus, "--recursive", "--glob", "*.txt", "--db", db, "--workers", "1", "-k", "3")
    assert result.exit_code == 0, result.output
    return db


def stored_keys(db: str) -> set[str]:
    with simdb.open(db, readonly=True) as database:
        return set(database.keys())


# -- help --------------------------------------------------------------------------------------


def test_every_command_and_option_has_help() -> None:
    group = typer.main.get_command(app)
    assert group.help
    assert set(group.commands) >= {
        "add",
        "query",
        "pairs",
        "clusters",
        "remove",
        "compact",
        "stats",
        "check",
        "hash",
        "export",
        "import",
        "demo",
    }
    for name, command in group.commands.items():
        assert command.help and command.help.strip(), f"command {name} has no help"
        for parameter in command.params:
            assert getattr(parameter, "help", None), f"{name} {parameter.name} has no help"
    for parameter in group.params:
        assert getattr(parameter, "help", None), f"simdb {parameter.name} has no help"


def test_help_runs_for_every_command() -> None:
    group = typer.main.get_command(app)
    for name in group.commands:
        result = run(name, "--help")
        assert result.exit_code == 0, name
        assert "Usage" in result.stdout


# -- add ---------------------------------------------------------------------------------------


def test_add_directory_adds_its_files_and_prints_a_summary(corpus: Path, db: str) -> None:
    result = run("add", corpus, "--db", db, "--workers", "1")
    assert result.exit_code == 0, result.output
    assert "added 3, replaced 0, skipped 0, failed 0" in result.stdout
    assert stored_keys(db) == {str(corpus / name) for name in ("alpha.txt", "alpha-upper.txt", "beta.txt")}


def test_add_recursive_with_glob_selects_matching_files_in_subdirectories(corpus: Path, db: str) -> None:
    run("add", corpus, "-r", "--glob", "*.txt", "--db", db, "--workers", "1")
    keys = stored_keys(db)
    assert str(corpus / "sub" / "gamma.txt") in keys
    assert str(corpus / "sub" / "notes.md") not in keys
    assert len(keys) == 4


def test_add_again_replaces_and_summary_counts_it(filled: str, corpus: Path) -> None:
    unchanged = run("add", corpus / "beta.txt", "--db", filled, "--workers", "1", "--json")
    summary = json_lines(unchanged.stdout)[-1]
    assert summary["event"] == "summary"
    assert (summary["added"], summary["replaced"], summary["unchanged"], summary["failed"]) == (0, 0, 1, 0)
    (corpus / "beta.txt").write_text("beta, edited since it was added", encoding="utf-8")
    result = run("add", corpus / "beta.txt", "--db", filled, "--workers", "1", "--json")
    summary = json_lines(result.stdout)[-1]
    assert (summary["added"], summary["replaced"], summary["unchanged"], summary["failed"]) == (0, 1, 0, 0)


def test_add_reads_paths_from_stdin(corpus: Path, db: str) -> None:
    listing = f"{corpus / 'alpha.txt'}\n{corpus / 'beta.txt'}\n"
    result = run("add", "-", "--db", db, "--workers", "1", input=listing)
    assert result.exit_code == 0, result.output
    assert stored_keys(db) == {str(corpus / "alpha.txt"), str(corpus / "beta.txt")}


def test_add_with_several_workers_gives_the_same_fingerprints(corpus: Path, tmp_path: Path) -> None:
    run("add", corpus, "--db", tmp_path / "one", "--workers", "1")
    run("add", corpus, "--db", tmp_path / "two", "--workers", "2")
    with simdb.open(tmp_path / "one") as one, simdb.open(tmp_path / "two") as two:
        assert list(one.items()) == list(two.items())
        assert one.get(str(corpus / "beta.txt")).fingerprint == simhash(prose(2))


def test_binary_and_invalid_utf8_files_are_reported_once_counted_and_the_run_goes_on(tmp_path: Path, db: str) -> None:
    docs = tmp_path / "mixed"
    docs.mkdir()
    (docs / "good.txt").write_text(prose(5))
    (docs / "image.bin").write_bytes(b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR" + bytes(range(256)))
    (docs / "latin1.txt").write_bytes(prose(6).encode() + b" caf\xe9 na\xefve")
    result = run("add", docs, "--db", db, "--workers", "1")
    assert result.exit_code == 2
    assert result.stderr.count("image.bin") == 1 and "binary" in result.stderr
    assert result.stderr.count("latin1.txt") == 1 and "UTF-8" in result.stderr
    assert "added 2, replaced 0, skipped 0, failed 1; 1 not valid in their encoding" in result.stdout
    assert "Traceback" not in result.output
    with simdb.open(db, readonly=True) as database:
        assert str(docs / "latin1.txt") in database
        assert str(docs / "image.bin") not in database
        # Invalid bytes are read as the library reads bytes: from text pipeline version 8 a
        # byte beside an ASCII letter is cp1252 ("caf\xe9" is "café"), not a U+FFFD separator.
        raw = prose(6).encode() + b" caf\xe9 na\xefve"
        sketches = {document.key: sketch for document, sketch in database.sketched_items()}
        stored = sketches[str(docs / "latin1.txt")]
        assert stored == database.fingerprinter.fingerprint_and_sketch(raw)[1]
        assert stored == database.fingerprinter.fingerprint_and_sketch(prose(6) + " café naïve")[1]
        assert stored != database.fingerprinter.fingerprint_and_sketch(raw.decode("utf-8", errors="replace"))[1]


def test_missing_input_is_reported_and_counted(corpus: Path, db: str) -> None:
    result = run("add", corpus / "alpha.txt", corpus / "nope.txt", "--db", db, "--workers", "1", "--json")
    assert result.exit_code == 2
    events = json_lines(result.stdout)
    assert {"event": "failed", "input": str(corpus / "nope.txt"), "cause": "No such file or directory"} in events
    assert events[-1]["added"] == 1 and events[-1]["failed"] == 1


@pytest.mark.skipif(hasattr(os, "geteuid") and os.geteuid() == 0, reason="root can read any file")
def test_unreadable_file_is_reported(corpus: Path, db: str) -> None:
    locked = corpus / "locked.txt"
    locked.write_text("secret")
    locked.chmod(0)
    result = run("add", locked, corpus / "beta.txt", "--db", db, "--workers", "1")
    assert result.exit_code == 2
    assert "locked.txt" in result.stderr and "cannot read" in result.stderr


def test_add_jsonl_uses_id_and_text_fields_and_keeps_other_fields_as_meta(tmp_path: Path, db: str) -> None:
    lines = [
        json.dumps({"url": "https://a.example/1", "body": prose(7), "lang": "xx"}),
        "",
        "{not json",
        json.dumps({"url": "https://a.example/2"}),
        json.dumps({"url": "https://a.example/3", "body": prose(8)}),
        json.dumps({"body": prose(9)}),
        json.dumps({"url": "https://a.example/\ud800", "body": prose(10)}),
    ]
    source = tmp_path / "docs.jsonl.gz"
    source.write_bytes(gzip.compress("\n".join(lines).encode("utf-8")))
    result = run(
        "add", "--jsonl", source, "--id-field", "url", "--text-field", "body", "--db", db, "--workers", "1", "--json"
    )
    assert result.exit_code == 2
    events = json_lines(result.stdout)
    failed = {event["input"]: event["cause"] for event in events if event["event"] == "failed"}
    assert set(failed) == {f"{source}:3", f"{source}:4", f"{source}:7"}
    assert "invalid JSON" in failed[f"{source}:3"] and "'body'" in failed[f"{source}:4"]
    assert "not valid Unicode" in failed[f"{source}:7"]  # a lone surrogate escape: never repaired
    # Line 7 is counted as failed alone: no stored document was not valid in its encoding.
    assert events[-1]["added"] == 3 and events[-1]["decoded_with_replacement"] == 0
    with simdb.open(db, readonly=True) as database:
        assert database.get("https://a.example/1").meta == {"lang": "xx"}
        assert database.get("https://a.example/3").meta is None
        assert f"{source}:6" in database  # no id field: FILE:LINE
        assert len(database) == 3
        assert database.get("https://a.example/1").fingerprint == simhash(prose(7))


def test_keys_that_are_not_valid_unicode_fail_their_records_and_never_merge(tmp_path: Path, db: str) -> None:
    """A probe: ids in Latin-1, or with lone surrogate escapes, were repaired with U+FFFD,
    so two different ids became one key and the second document replaced the first, exit 0."""
    latin1 = tmp_path / "latin1.jsonl"
    latin1.write_bytes(
        b'{"id": "report-\xe9t\xe9", "text": "first document about cats and dogs"}\n'
        b'{"id": "report-\xe8t\xe8", "text": "second unrelated piece on ships"}\n'
        b'{"id": "kept", "text": "caf\xe9 au lait and more words", "lang": "fr\xe9", "n": "\\ud800"}\n'
    )
    escapes = tmp_path / "escapes.jsonl"
    escapes.write_text('{"id": "a\\ud800", "text": "one text"}\n{"id": "a\\udc00", "text": "other text"}\n')
    fingerprints = tmp_path / "fingerprints.tsv"
    fingerprints.write_bytes(b'k\xff\t0x1\nk\xfe\t0x2\nz\t0x3\t{"a": "\xff"}\n')
    jsonl = run("add", "--jsonl", latin1, "--jsonl", escapes, "--db", db, "--json")
    tsv = run("add", "--fingerprints", fingerprints, "--db", tmp_path / "tsv", "--json")
    for result in (jsonl, tsv):
        assert result.exit_code == 2, result.output
    failed = {
        event["input"] for event in json_lines(jsonl.stdout) + json_lines(tsv.stdout) if event["event"] == "failed"
    }
    assert failed == {
        f"{latin1}:1",
        f"{latin1}:2",
        f"{escapes}:1",
        f"{escapes}:2",
        f"{fingerprints}:1",
        f"{fingerprints}:2",
    }
    # A failed record is counted as failed, not also among the documents not valid in their
    # encoding, which were stored (here "kept" and "z" alone; the counts said 5 and 3).
    summaries = [json_lines(result.stdout)[-1] for result in (jsonl, tsv)]
    assert [(summary["failed"], summary["decoded_with_replacement"]) for summary in summaries] == [(4, 1), (2, 1)]
    with simdb.open(db, readonly=True) as database:
        assert list(database.keys()) == ["kept"]
        assert database.get("kept").meta == {"lang": "fr\ufffd", "n": "\ufffd"}  # stored, so repaired
        # The text keeps its undecodable byte, as a file's does: cp1252 beside a letter.
        assert database.get("kept").fingerprint == database.fingerprint("café au lait and more words")
    with simdb.open(tmp_path / "tsv", readonly=True) as database:
        assert list(database.keys()) == ["z"] and database.get("z").meta == {"a": "\ufffd"}
    # A probe: field names that differ only in such bytes became one name, a value lost.
    names = tmp_path / "names.jsonl"
    names.write_bytes(
        b'{"id": "k", "text": "a b c", "m\\ud800": 1, "m\\udbff": 2}\n'
        b'{"id": "j", "text": "a b c", "x": {"caf\xe9": 1, "caf\xe8": 2}}\n'
        b'{"id": "ok", "text": "z y x"}\n'
    )
    merged = run("add", "--jsonl", names, "--db", tmp_path / "names", "--json")
    assert merged.exit_code == 2
    assert {event["input"] for event in json_lines(merged.stdout) if event["event"] == "failed"} == {
        f"{names}:1",
        f"{names}:2",
    }
    # A review: a line with a bad byte and a meta nested past what is stored ended the whole
    # add with a RecursionError; it fails alone.
    deep = tmp_path / "deep.jsonl"
    nested = "[" * 700 + "]" * 700
    deep.write_bytes(
        b'{"id": "x", "text": "caf\xe9 au lait", "m": ' + nested.encode() + b'}\n{"id": "y", "text": "ok"}\n'
    )
    result = run("add", "--jsonl", deep, "--db", tmp_path / "deep")
    assert result.exit_code == 2 and "Recursion" not in result.stderr, result.stderr
    with simdb.open(tmp_path / "deep", readonly=True) as database:
        assert list(database.keys()) == ["y"]


def test_add_jsonl_from_stdin(db: str) -> None:
    text = json.dumps({"id": 7, "text": prose(11)}) + "\n"
    result = run("add", "--jsonl", "-", "--db", db, "--workers", "1", input=text)
    assert result.exit_code == 0, result.output
    assert stored_keys(db) == {"7"}


def test_add_fingerprints_tsv_reports_bad_lines_with_their_number(tmp_path: Path, db: str) -> None:
    source = tmp_path / "fps.tsv"
    source.write_text('a\t0x00000000000000ff\nb\t255\t{"n": 1}\nc\tnot-hex\nd\n e \t0xffffffffffffffff\n')
    result = run("add", "--fingerprints", source, "--db", db)
    assert result.exit_code == 2
    assert f"{source}:3" in result.stderr and "neither hex nor decimal" in result.stderr
    assert f"{source}:4" in result.stderr
    assert "added 3, replaced 0, skipped 0, failed 2" in result.stdout
    with simdb.open(db, readonly=True) as database:
        assert database.get("a").fingerprint == 255 and database.get("b").meta == {"n": 1}
        assert database.get(" e ").fingerprint == (1 << 64) - 1


def test_if_new_skips_near_duplicates_and_names_the_key_they_duplicate(corpus: Path, db: str) -> None:
    result = run(
        "add",
        corpus / "alpha.txt",
        corpus / "beta.txt",
        corpus / "alpha-upper.txt",
        "--if-new",
        "--db",
        db,
        "--workers",
        "1",
        "--json",
    )
    assert result.exit_code == 0, result.output
    events = json_lines(result.stdout)
    assert {
        "event": "skipped",
        "key": str(corpus / "alpha-upper.txt"),
        "duplicate_of": str(corpus / "alpha.txt"),
        "similarity": 1.0,
        "distance": 0,
    } in events
    assert events[-1]["skipped"] == 1 and events[-1]["added"] == 2
    assert str(corpus / "alpha-upper.txt") not in stored_keys(db)
    human = run("add", corpus / "alpha-upper.txt", "--if-new", "--db", db, "--workers", "1")
    assert (
        f"skipped {corpus / 'alpha-upper.txt'}: near-duplicate of {corpus / 'alpha.txt'} (similarity 1.000, distance 0)"
        in human.stdout
    )


def _warc_record(writer, uri: str, kind: str, payload: bytes, content_type: str | None = None):
    from warcio.statusandheaders import StatusAndHeaders

    http_headers = None
    if kind == "response":
        http_headers = StatusAndHeaders("200 OK", [("Content-Type", content_type or "text/html")], protocol="HTTP/1.1")
    headers = {"WARC-Identified-Content-Language": "xx"} if kind == "conversion" else None
    return writer.create_warc_record(
        uri,
        kind,
        payload=io.BytesIO(payload),
        http_headers=http_headers,
        warc_content_type="text/plain" if kind == "conversion" else "",
        warc_headers_dict=headers,
    )


def test_add_wet_and_warc_archives_keys_are_target_uris(tmp_path: Path, db: str) -> None:
    from warcio.warcwriter import WARCWriter

    wet = tmp_path / "crawl.warc.wet.gz"
    with open(wet, "wb") as handle:
        writer = WARCWriter(handle, gzip=True)
        writer.write_record(_warc_record(writer, "https://x.example/a", "conversion", prose(12).encode()))
        writer.write_record(_warc_record(writer, "https://x.example/b", "conversion", prose(13).encode()))
    warc = tmp_path / "crawl.warc"
    html = f"<html><head><title>t</title><script>var x = 1;</script></head><body><p>{prose(14)}</p></body></html>"
    with open(warc, "wb") as handle:
        writer = WARCWriter(handle, gzip=False)
        writer.write_record(_warc_record(writer, "https://y.example/page", "response", html.encode()))
        writer.write_record(_warc_record(writer, "https://y.example/logo.png", "response", b"\x89PNG\0", "image/png"))
    result = run("add", wet, warc, "--db", db, "--workers", "1")
    assert result.exit_code == 0, result.output
    assert "added 3" in result.stdout
    with simdb.open(db, readonly=True) as database:
        assert set(database.keys()) == {"https://x.example/a", "https://x.example/b", "https://y.example/page"}
        assert database.get("https://x.example/b").fingerprint == simhash(prose(13))
        # The page's visible text only: no script, no title.
        assert database.get("https://y.example/page").fingerprint == simhash(prose(14))


def test_html_files_are_added_as_their_visible_text(tmp_path: Path, db: str) -> None:
    """Found by an answers probe: `simdb add DIR` read a saved .html page raw, so its tags,
    CSS and JavaScript were words and a re-fetch with another script or style was no longer
    a near-duplicate.  An .html file is now read as a WARC's pages are: its visible text,
    character references decoded, inline tags joining what they split."""
    words = prose(15).split()
    marked = " ".join(f"<b>{word[:1]}</b>{word[1:]}" if number % 5 == 0 else word for number, word in enumerate(words))
    marked = marked.replace(" and ", " &amp; ")
    page = (
        "<!DOCTYPE html><html><head><title>Site</title><style>p { color: red }</style></head><body>"
        f"<nav><a href='/'>Home</a></nav><p>{marked}</p><script>var tracker = {{id: 1}};</script></body></html>"
    )
    refetched = page.replace("color: red", "margin: 0").replace("id: 1", "id: 2, session: 'x'")
    (tmp_path / "page.html").write_text(page)
    with gzip.open(tmp_path / "again.htm.gz", "wt") as zipped:
        zipped.write(refetched)
    visible = "Home " + " ".join(words).replace(" and ", " & ")
    result = run("add", tmp_path / "page.html", tmp_path / "again.htm.gz", "--db", db, "--workers", "1")
    assert result.exit_code == 0, result.output
    with simdb.open(db, readonly=True) as database:
        expected = database.fingerprint(visible)
        assert {document.fingerprint for document in database.items()} == {expected}
    assert run("hash", "-f", tmp_path / "page.html").stdout.split()[0] == f"0x{expected:016x}"


def test_an_html_page_without_its_head_end_and_one_showing_references(tmp_path: Path) -> None:
    """A review: a page that leaves out </head> (HTML allows it) was read as blank, its body
    hidden with the head; a probe: a page showing "&lt;p&gt;" (written &amp;lt;p&amp;gt;)
    was decoded twice, into the text of a page showing "<p>"."""
    (tmp_path / "headless.html").write_text(f"<html><head><title>T</title><body><p>{prose(16)}</p>")
    (tmp_path / "shows-reference.html").write_text("<p>write &amp;lt;p&amp;gt; to show a tag in a page</p>")
    (tmp_path / "shows-tag.html").write_text("<p>write &lt;p&gt; to show a tag in a page</p>")
    hashed = run(
        "hash",
        "-f",
        tmp_path / "headless.html",
        "-f",
        tmp_path / "shows-reference.html",
        "-f",
        tmp_path / "shows-tag.html",
    )
    fingerprints = [line.split()[0] for line in hashed.stdout.splitlines()]
    assert fingerprints[0] == run("hash", prose(16)).stdout.split()[0]
    assert fingerprints[1] == run("hash", "write &amp;lt;p&amp;gt; to show a tag in a page").stdout.split()[0]
    assert fingerprints[1] != fingerprints[2] == run("hash", "write <p> to show a tag in a page").stdout.split()[0]


def test_damaged_archive_is_reported_and_the_run_goes_on(tmp_path: Path, corpus: Path, db: str) -> None:
    broken = tmp_path / "broken.warc.gz"
    broken.write_bytes(b"this is not a WARC file at all\n" * 3)
    result = run("add", broken, corpus / "beta.txt", "--db", db, "--workers", "1")
    assert result.exit_code == 2
    assert "broken.warc.gz" in result.stderr and "WARC" in result.stderr
    assert "added 1" in result.stdout


def test_add_with_nothing_to_add_is_a_usage_error(db: str) -> None:
    result = run("add", "--db", db)
    assert result.exit_code == 2
    assert "nothing to add" in result.stderr


def test_add_with_conflicting_k_is_a_usage_error_naming_both_values(filled: str, corpus: Path) -> None:
    result = run("add", corpus / "beta.txt", "-k", "2", "--db", filled, "--workers", "1")
    assert result.exit_code == 2
    assert "-k 2 was given" in result.stderr and "created with -k 3" in result.stderr  # option terms
    assert "Traceback" not in result.output


def test_add_creates_with_k_and_fingerprint_settings(corpus: Path, db: str) -> None:
    run("add", corpus / "beta.txt", "-k", "2", "--features", "char", "--ngram", "4", "--db", db, "--workers", "1")
    info = json.loads(run("stats", "--db", db, "--json").stdout)
    assert info["k"] == 2 and info["fingerprinter"]["features"] == "char" and info["fingerprinter"]["ngram"] == 4
    assert info["fingerprinter"]["stopwords"] is None
    assert run("add", corpus / "beta.txt", "--features", "nonsense", "--db", db).exit_code == 2


def test_add_with_stopwords_stores_them_and_refuses_other_settings_later(corpus: Path, db: str) -> None:
    assert run("add", corpus / "beta.txt", "--stopwords", "english", "--db", db, "--workers", "1").exit_code == 0
    assert json.loads(run("stats", "--db", db, "--json").stdout)["fingerprinter"]["stopwords"] == "english"
    beta_text = (corpus / "beta.txt").read_text()
    [match] = json_lines(run("query", "--file", corpus / "beta.txt", "--db", db, "--json").stdout)
    assert match["distance"] == 0 and match["fingerprint"] == f"0x{simhash(beta_text, stopwords='english'):016x}"
    refused = run("add", corpus / "alpha.txt", "--features", "word-shingle", "--db", db, "--workers", "1")
    assert refused.exit_code == 2 and "english" in refused.stderr
    assert run("add", corpus / "alpha.txt", "--stopwords", "klingon", "--db", db).exit_code == 2
    # "none", which the error offers, is a choice too: every word counts, which this
    # database's settings refuse (a new-user probe found it refused as no such list).
    refused_none = run("add", corpus / "alpha.txt", "--stopwords", "none", "--db", db, "--workers", "1")
    assert refused_none.exit_code == 2 and "english" in refused_none.stderr, refused_none.stderr
    every_word = run("hash", "--stopwords", "none", beta_text)
    assert every_word.exit_code == 0 and every_word.stdout == run("hash", beta_text).stdout


def test_a_database_of_text_pipeline_version_1_takes_its_own_settings_given_again(corpus: Path, db: str) -> None:
    # A database made before version 2 stores version 1; the options that made it, given
    # again, must not be refused for a version they never named.
    simdb.open(db, fingerprinter=simdb.Fingerprinter(features="char", ngram=4, normalization=1)).close()
    again = run("add", corpus / "beta.txt", "--features", "char", "--ngram", "4", "--db", db, "--workers", "1")
    assert again.exit_code == 0, again.stderr
    stats = json.loads(run("stats", "--db", db, "--json").stdout)
    assert stats["fingerprinter"]["normalization"] == 1
    assert "text normalization version 1" in run("stats", "--db", db).stdout
    refused = run("add", corpus / "beta.txt", "--features", "word-shingle", "--db", db, "--workers", "1")
    assert refused.exit_code == 2 and "char" in refused.stderr


# -- query -------------------------------------------------------------------------------------


def test_query_text_file_and_fingerprint_find_nearest_first(filled: str, corpus: Path) -> None:
    by_text = run("query", prose(1), "--db", filled, "--json")
    assert by_text.exit_code == 0
    matches = json_lines(by_text.stdout)
    assert {match["key"] for match in matches} == {str(corpus / "alpha.txt"), str(corpus / "alpha-upper.txt")}
    assert all(match["distance"] == 0 and match["similarity"] == 1.0 for match in matches)
    assert matches[0]["fingerprint"] == f"0x{simhash(prose(1)):016x}"
    by_file = run("query", "--file", corpus / "beta.txt", "--db", filled)
    assert by_file.exit_code == 0
    # One file's matches print as a text query's do; with two files, each match names its
    # query (the file's key, as add keys it), as grep names files only when given several.
    assert by_file.stdout.splitlines()[0].split() == ["similarity", "distance", "fingerprint", "key"]
    assert str(corpus / "beta.txt") in by_file.stdout
    by_files = run("query", "--file", corpus / "beta.txt", "--file", corpus / "alpha.txt", "--db", filled)
    assert by_files.stdout.splitlines()[0].split() == ["query", "similarity", "distance", "fingerprint", "key"]
    rows = [line.split() for line in by_files.stdout.splitlines()[1:]]
    assert {row[0] for row in rows} == {str(corpus / "beta.txt"), str(corpus / "alpha.txt")}
    # A directory names its queries even when it holds one file today (found by a probe: the
    # column came and went with the directory's contents, shifting a script's columns).
    single = corpus / "single"
    single.mkdir()
    (single / "beta.txt").write_text((corpus / "beta.txt").read_text())
    by_directory = run("query", "--file", single, "--db", filled)
    assert by_directory.stdout.splitlines()[0].split() == ["query", "similarity", "distance", "fingerprint", "key"]
    near = simhash(prose(2)) ^ 0b101  # two bits away
    by_fingerprint = json_lines(run("query", "--fingerprint", hex(near), "--db", filled, "--json").stdout)
    # A fingerprint query has no sketch: the similarity is minhash's estimate from the distance.
    assert [(m["key"], m["distance"], m["similarity"]) for m in by_fingerprint] == [
        (str(corpus / "beta.txt"), 2, 1 - 2 * 2 / 64)
    ]


def test_query_k_and_limit(filled: str, corpus: Path) -> None:
    near = simhash(prose(2)) ^ 0b101
    assert run("query", "--fingerprint", str(near), "-k", "1", "--db", filled).exit_code == 1
    assert len(json_lines(run("query", prose(1), "--limit", "1", "--db", filled, "--json").stdout)) == 1


def test_query_from_stdin(filled: str, corpus: Path) -> None:
    result = run("query", "-", "--db", filled, "--json", input=prose(2))
    assert [match["key"] for match in json_lines(result.stdout)] == [str(corpus / "beta.txt")]


def test_query_k_past_the_index_s_k_is_exact(tmp_path: Path) -> None:
    """A docs probe: query -k 7 on a k=5 index was refused as 'cannot answer exactly', while
    a threshold calling for 7 bits was answered exactly; now both are (a Hamming scan checks)."""
    rng = random.Random(11)
    base = rng.getrandbits(64)
    stored = {f"doc{i}": base ^ sum(1 << bit for bit in rng.sample(range(64), rng.randint(0, 10))) for i in range(200)}
    (tmp_path / "fp.tsv").write_text("".join(f"{key}\t0x{fp:016x}\n" for key, fp in stored.items()))
    assert run("add", "--fingerprints", tmp_path / "fp.tsv", "-k", "2", "--db", tmp_path / "db").exit_code == 0
    for k in (2, 7, 10):
        found = json_lines(
            run("query", "--fingerprint", f"0x{base:016x}", "-k", k, "--json", "--db", tmp_path / "db").stdout
        )
        assert sorted(match["key"] for match in found) == sorted(
            key for key, _ in brute_force_query(stored, base, k)
        ), k


def test_query_that_finds_nothing_exits_1(filled: str) -> None:
    result = run("query", prose(99), "--db", filled)
    assert result.exit_code == 1
    assert result.stdout == ""
    assert "no document within 3 bits" in result.stderr


def test_a_query_text_without_features_says_so(filled: str) -> None:
    # Found by a new-user probe: "" and "..." said "no document within 3 bits", as if the
    # search had looked and found nothing near.  (From text pipeline version 6 "..." has
    # features: its symbols.)
    for text in ("", " \t ", "-"):
        result = run("query", text, "--db", filled, input=" \n" if text == "-" else None)
        assert result.exit_code == 1 and "the query text has nothing to fingerprint" in result.stderr, result.stderr
    assert "nothing to fingerprint" not in run("query", prose(99), "--db", filled).stderr


def test_a_query_file_without_features_says_so(filled: str, tmp_path: Path) -> None:
    # Found by a new-user probe: query -f empty.txt said "no document within 3 bits" where
    # the same text given as an argument said it has nothing to fingerprint.
    (tmp_path / "empty.txt").write_text(" \n")
    (tmp_path / "other.txt").write_text(prose(99))
    alone = run("query", "-f", tmp_path / "empty.txt", "--db", filled)
    assert alone.exit_code == 1 and "empty.txt: nothing to fingerprint" in alone.stderr, alone.stderr
    assert "no document within" not in alone.stderr
    both = run("query", "-f", tmp_path / "empty.txt", "-f", tmp_path / "other.txt", "--db", filled)
    assert both.exit_code == 1 and "empty.txt: nothing to fingerprint" in both.stderr
    assert "other.txt: nothing" not in both.stderr and "no document within 3 bits" in both.stderr


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        ([], "exactly one"),
        (["text", "--fingerprint", "0x1"], "exactly one"),
        (["--fingerprint", "0xZZ"], "neither hex nor decimal"),
        (["--fingerprint", "0x1", "-k", "65"], "-k"),
        (["--file", "/no/such/file"], "/no/such/file: No such file"),
    ],
)
def test_query_bad_usage_exits_2_with_one_line(filled: str, arguments: list[str], message: str) -> None:
    result = run("query", *arguments, "--db", filled)
    assert result.exit_code == 2
    assert message in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1
    assert "Traceback" not in result.output


def test_query_binary_file_is_a_usage_error(filled: str, tmp_path: Path) -> None:
    binary = tmp_path / "x.bin"
    binary.write_bytes(b"\0\1\2")
    result = run("query", "--file", binary, "--db", filled)
    assert result.exit_code == 2 and "binary" in result.stderr


# -- missing or broken databases -----------------------------------------------------------------


@pytest.mark.parametrize(
    "command",
    [["query", "text"], ["pairs"], ["clusters"], ["stats"], ["check"], ["export"], ["compact"], ["remove", "k"]],
)
def test_missing_database_exits_3_with_a_hint(tmp_path: Path, command: list[str]) -> None:
    missing = tmp_path / "nowhere"
    result = run(*command, "--db", missing)
    assert result.exit_code == 3
    assert f"no database at {missing}" in result.stderr and "simdb add" in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1
    assert not missing.exists()  # reading never creates a database
    # A new user's pass: an empty directory was said not to exist, with another hint.
    missing.mkdir()
    empty = run(*command, "--db", missing)
    assert empty.exit_code == 3 and empty.stderr.startswith(f"simdb: no database at {missing} (an empty directory)")
    assert "simdb add" in empty.stderr and len(empty.stderr.strip().splitlines()) == 1


def test_a_file_that_is_not_a_database_exits_3(tmp_path: Path) -> None:
    impostor = tmp_path / "file.txt"
    impostor.write_text("hello")
    result = run("stats", "--db", impostor)
    assert result.exit_code == 3
    assert str(impostor) in result.stderr


def test_debug_shows_the_traceback(tmp_path: Path) -> None:
    quiet = run("stats", "--db", tmp_path / "nowhere")
    loud = run("stats", "--db", tmp_path / "nowhere", "--debug")
    assert "Traceback" not in quiet.stderr
    assert "Traceback" in loud.stderr and loud.exit_code == 3


def test_unexpected_errors_become_one_line_and_exit_3(filled: str, monkeypatch: pytest.MonkeyPatch) -> None:
    def broken(self):
        raise RuntimeError("boom")

    monkeypatch.setattr(simdb.Database, "stats", broken)
    result = run("stats", "--db", filled)
    assert result.exit_code == 3
    assert "unexpected RuntimeError: boom" in result.stderr and "Traceback" not in result.stderr


def test_db_defaults_to_simdb_path_then_the_working_directory(
    corpus: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("SIMDB_PATH", raising=False)
    run("add", corpus / "beta.txt", "--workers", "1")
    assert (tmp_path / DEFAULT_DB_PATH).is_dir()
    run("add", corpus / "alpha.txt", "--workers", "1", env={"SIMDB_PATH": str(tmp_path / "from-env")})
    # The key is relative to the working directory (the default --key-base), as the file is inside it.
    assert stored_keys(str(tmp_path / "from-env")) == {str((corpus / "alpha.txt").relative_to(tmp_path))}
    assert stored_keys(str(tmp_path / DEFAULT_DB_PATH)) == {str((corpus / "beta.txt").relative_to(tmp_path))}


# -- pairs and clusters ----------------------------------------------------------------------------


def test_pairs_lists_each_pair_once_first_added_first(filled: str, corpus: Path) -> None:
    result = run("pairs", "--db", filled, "--json")
    assert result.exit_code == 0
    # alpha-upper.txt sorts before alpha.txt, so it was added first.
    assert json_lines(result.stdout) == [
        {"key_a": str(corpus / "alpha-upper.txt"), "key_b": str(corpus / "alpha.txt"), "similarity": 1.0, "distance": 0}
    ]
    table = run("pairs", "--db", filled).stdout.splitlines()
    assert table[0].split() == ["similarity", "distance", "key_a", "key_b"]
    assert table[1].split() == ["1.000", "0", str(corpus / "alpha-upper.txt"), str(corpus / "alpha.txt")]


def _fingerprint_db(tmp_path: Path, distances: list[int]) -> str:
    """A database of pairs (base, base ^ d bits) for each distance d, far apart otherwise."""
    rng = random.Random(5)
    lines = []
    for number, distance in enumerate(distances):
        base = rng.getrandbits(64)
        lines.append(f"p{number}a\t{base}")
        lines.append(f"p{number}b\t{base ^ ((1 << distance) - 1)}")
    source = tmp_path / "pairs.tsv"
    source.write_text("\n".join(lines) + "\n")
    db = str(tmp_path / "fpdb")
    assert run("add", "--fingerprints", source, "--db", db, "-k", "3").exit_code == 0
    return db


def test_pairs_histogram_counts_pairs_per_distance(tmp_path: Path) -> None:
    db = _fingerprint_db(tmp_path, [0, 1, 1, 3, 3, 3, 5])
    result = run("pairs", "--histogram", "-k", "3", "--db", db, "--json")
    assert json_lines(result.stdout) == [{"distance": d, "pairs": n} for d, n in enumerate([1, 2, 0, 3])]
    chart = run("pairs", "--histogram", "-k", "3", "--db", db).stdout.splitlines()
    assert chart[0].split() == ["distance", "pairs"]
    bars = [line.count("█") for line in chart[1:]]
    assert bars[3] == output.BAR_WIDTH and bars[2] == 0 and 0 < bars[0] < bars[1] < bars[3]
    assert all(line == line.rstrip() for line in chart)  # the header and a zero row had trailing spaces
    assert json_lines(run("pairs", "-k", "1", "--histogram", "--db", db, "--json").stdout)[-1] == {
        "distance": 1,
        "pairs": 2,
    }


def test_pairs_with_none_exits_1(tmp_path: Path) -> None:
    db = _fingerprint_db(tmp_path, [9])
    result = run("pairs", "-k", "8", "--db", db)
    assert result.exit_code == 1 and result.stdout == "" and "no pairs" in result.stderr


def test_clusters_show_representative_first(tmp_path: Path) -> None:
    source = tmp_path / "c.tsv"
    source.write_text("first\t0x0\nsecond\t0x1\nthird\t0x3\nfar\t0xffff0000ffff0000\nalone\t0x00ff00ff00ff00ff\n")
    db = str(tmp_path / "cdb")
    run("add", "--fingerprints", source, "--db", db)
    result = run("clusters", "-k", "3", "--db", db, "--json")
    assert result.exit_code == 0, result.output
    with simdb.open(db, readonly=True) as stored:  # the weakest link: first-third, 2 bits apart
        weakest = min(pair.similarity for pair in stored.pairs(3))
    assert json_lines(result.stdout) == [
        {
            "cluster": 1,
            "representative": "first",
            "size": 3,
            "min_similarity": weakest,
            "to_representative": weakest,  # first-third is the weakest link too
            "members": ["first", "second", "third"],
        }
    ]
    human = run("clusters", "-k", "3", "--db", db).stdout.splitlines()
    assert human == [
        f"cluster 1: 3 documents, representative first, weakest link {weakest:.3f}, least similar to it {weakest:.3f}",
        "    second",
        "    third",
    ]
    with_singletons = json_lines(run("clusters", "-k", "3", "--singletons", "--db", db, "--json").stdout)
    assert [cluster["members"] for cluster in with_singletons] == [["first", "second", "third"], ["far"], ["alone"]]
    histogram = json_lines(run("clusters", "--histogram", "-k", "3", "--db", db, "--json").stdout)
    assert histogram == [
        {"k": 0, "clusters": 0, "documents": 0},
        {"k": 1, "clusters": 1, "documents": 3},
        {"k": 2, "clusters": 1, "documents": 3},
        {"k": 3, "clusters": 1, "documents": 3},
    ]
    assert run("clusters", "-k", "0", "--db", db).exit_code == 1


# -- remove, compact, stats, check ---------------------------------------------------------------


def test_remove_keys_and_keys_from_stdin(filled: str, corpus: Path) -> None:
    result = run("remove", corpus / "beta.txt", "no-such-key", "--db", filled, "--json")
    assert result.exit_code == 0
    assert json_lines(result.stdout) == [{"removed": 1, "not_found": 1, "not_found_keys": ["no-such-key"]}]
    keys = f"{corpus / 'alpha.txt'}\n{corpus / 'alpha-upper.txt'}\n"
    assert "removed 2 documents" in run("remove", "-", "--db", filled, input=keys).stdout
    assert stored_keys(filled) == {str(corpus / "sub" / "gamma.txt")}
    nothing = run("remove", "no-such-key", "--db", filled)
    assert nothing.exit_code == 1 and "removed 0 documents; 1 key was not stored: 'no-such-key'" in nothing.stdout


def test_remove_dry_run_says_what_it_would_remove_and_removes_nothing(filled: str) -> None:
    """A docs probe: add had --dry-run, remove (the command that deletes) had none."""
    before = stored_keys(filled)
    present = sorted(before)[:2]
    tried = run("remove", *present, "no-such-key", "--dry-run", "--db", filled)
    assert tried.exit_code == 0, tried.stderr
    assert tried.stdout.startswith("would remove 2 documents; 1 key was not stored: 'no-such-key'"), tried.stdout
    assert json_lines(run("remove", *present, "--dry-run", "--json", "--db", filled).stdout) == [
        {"removed": 2, "not_found": 0, "not_found_keys": [], "dry_run": True}
    ]
    assert stored_keys(filled) == before
    assert run("remove", "no-such-key", "--dry-run", "--db", filled).exit_code == 1
    assert run("remove", *present, "--db", filled).stdout.startswith("removed 2 documents")
    assert stored_keys(filled) == before - set(present)


def test_keys_0_feeds_get_and_remove_0(tmp_path: Path) -> None:
    """`simdb keys -0 | simdb remove -` kept each NUL in its key, and remove had no -0, so a
    key holding a line break could not be removed through stdin (a probe found it)."""
    db = str(tmp_path / "db")
    with simdb.open(db) as database:
        database.add_many([("two\nlines", 1), ("plain", 2), ("kept", 3 << 40)])
    listed = run("keys", "-0", "--db", db).stdout
    wanted = "".join(key + "\0" for key in listed.split("\0") if key and key != "kept")
    shown = json_lines(run("get", "-0", "-", "--json", "--db", db, input=wanted).stdout)
    assert sorted(record["key"] for record in shown) == ["plain", "two\nlines"]
    removed = run("remove", "-0", "-", "--db", db, input=wanted)
    assert removed.exit_code == 0 and "removed 2 documents" in removed.stdout
    assert stored_keys(db) == {"kept"}


def test_keys_0_leaves_out_a_key_holding_nul_so_remove_0_removes_only_what_it_lists(tmp_path: Path) -> None:
    # Found by a faults probe: "report\0draft" printed by keys -0 read back as two keys, and
    # `keys -0 --prefix report | remove -0 -` removed "draft", never listed, and kept it.
    db = str(tmp_path / "db")
    with simdb.open(db) as database:
        database.add_many([("report", 1), ("draft", 2), ("report\0draft", 3)])
    listed = run("keys", "-0", "--prefix", "report", "--db", db)
    assert listed.exit_code == 2 and "NUL" in listed.stderr and "report\\x00draft" in listed.stderr, listed.stderr
    assert listed.stdout == "report\0"
    assert run("remove", "-0", "-", "--db", db, input=listed.stdout).exit_code == 0
    assert stored_keys(db) == {"draft", "report\0draft"}


def test_compact_reports_bytes_before_and_after(filled: str, corpus: Path) -> None:
    run("remove", corpus / "beta.txt", corpus / "alpha.txt", "--db", filled)
    result = run("compact", "--db", filled, "--json")
    assert result.exit_code == 0
    sizes = json_lines(result.stdout)[0]
    assert sizes["bytes_before"] > 0 and sizes["bytes_after"] > 0
    assert "compacted" in run("compact", "--db", filled).stdout
    assert run("check", "--db", filled).exit_code == 0


def test_stats_shows_documents_tables_and_settings(filled: str) -> None:
    info = json.loads(run("stats", "--db", filled, "--json").stdout)
    assert info["documents"] == 4 and info["k"] == 3 and info["tables"] == len(info["leading_bits"])
    assert info["fingerprinter"]["features"] == "word-shingle"
    human = run("stats", "--db", filled).stdout
    for label in (
        "documents",
        "tables",
        "leading bits",
        "expected candidates per probe",
        "size on disk",
        "fingerprint settings",
        "similarity",
    ):
        assert label in human
    # A minhash fingerprints the set of features: its weights setting means nothing (a
    # new-user probe found "binary weights" shown for it).
    kind = info["fingerprinter"]["kind"]
    [settings_line] = [line for line in human.splitlines() if line.startswith("fingerprint settings")]
    assert ("weights" in settings_line) == (kind == "simhash"), settings_line


def test_check_ok_and_problems(filled: str, monkeypatch: pytest.MonkeyPatch) -> None:
    good = run("check", "--db", filled)
    assert good.exit_code == 0 and "ok: 4 documents, 40 table entries" in good.stdout

    # The check runs in a child process (see test_cli_process.py): its report is replaced here.
    def reported(self: simdb.Database, *, isolated: bool = False) -> simdb.CheckReport:
        assert isolated  # simdb check reads in a child process, where LMDB may crash
        return simdb.CheckReport(4, 39, ["1 entries missing from table.03 (id 2)"])

    monkeypatch.setattr(simdb.Database, "check", reported)
    bad = run("check", "--db", filled, "--json")
    assert bad.exit_code == 1
    assert json_lines(bad.stdout) == [
        {"ok": False, "documents": 4, "table_entries": 39, "problems": ["1 entries missing from table.03 (id 2)"]}
    ]
    assert "problem: 1 entries missing" in run("check", "--db", filled).stdout


# -- hash --------------------------------------------------------------------------------------


def test_hash_prints_hex_bits_and_json(tmp_path: Path) -> None:
    text = prose(20)
    assert run("hash", text).stdout.strip() == f"0x{simhash(text):016x}"
    assert run("hash", text, "--bits", "32", "--binary").stdout.strip() == format(simhash(text, bits=32), "032b")
    wide = run("hash", text, "--bits", "128").stdout.strip()
    assert wide == f"0x{simhash(text, bits=128):032x}"
    source = tmp_path / "t.txt"
    source.write_text(text)
    assert run("hash", "--file", source).stdout.strip() == f"0x{simhash(text):016x}  {source}"
    [line] = json_lines(run("hash", "-", "--json", "--features", "char", input=text).stdout)
    char_settings = Fingerprinter(features="char")
    expected = {
        "fingerprint": f"0x{simhash(text, features='char'):016x}",
        "bits": 64,
        "kind": char_settings.kind,
        "weights": char_settings.weights,
    }
    assert line == {
        **expected,
        "features": "char",
        "ngram": char_settings.ngram,
        "stopwords": char_settings.stopwords,
        "normalization": char_settings.normalization,
    }
    sentence = "The cat sat on the mat, and the dog was not amused by it."
    assert simhash(sentence, stopwords="english") != simhash(sentence)
    assert (
        run("hash", sentence, "--stopwords", "english").stdout.strip()
        == f"0x{simhash(sentence, stopwords='english'):016x}"
    )


def test_hash_of_files_prints_what_add_stores(tmp_path: Path) -> None:
    """Found by a docs probe: hash --file read a .gz file as binary, a JSONL file as one
    text and refused a directory, where add reads them as one text gunzipped, one document
    per line and its files; hash now reads them as add does, so each fingerprint it prints
    is the one add stores (checked by get), labelled by its file or its document's key."""
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "a.txt").write_text(prose(1))
    with gzip.open(docs / "b.txt.gz", "wt") as zipped:
        zipped.write(prose(2))
    jsonl = tmp_path / "pages.jsonl"
    jsonl.write_text(
        json.dumps({"id": "p1", "text": prose(3)}) + "\n" + json.dumps({"id": "p2", "text": prose(4)}) + "\n"
    )
    hashed = run("hash", "-f", docs, "-f", jsonl)
    assert hashed.exit_code == 0, hashed.stderr
    printed = {line.split()[1]: line.split()[0] for line in hashed.stdout.splitlines()}
    assert set(printed) == {str(docs / "a.txt"), str(docs / "b.txt.gz"), "p1", "p2"}
    db = tmp_path / "db"
    assert run("add", docs, jsonl, "--db", db, "--key-base", "/").exit_code == 0
    with simdb.open(db, readonly=True) as database:
        stored = {document.key: f"0x{document.fingerprint:016x}" for document in database.items()}
    for name in ("a.txt", "b.txt.gz"):
        printed[str(docs / name).lstrip("/")] = printed.pop(str(docs / name))
    assert stored == printed


def test_hash_of_many_files_goes_on_past_one_it_cannot_read(tmp_path: Path) -> None:
    """One binary file among many stopped hash before it printed anything (a probe found
    it); add and query go on past such a file, and so does hash now, exiting 2."""
    first, binary, last = tmp_path / "a.txt", tmp_path / "b.dat", tmp_path / "c.txt"
    first.write_text(prose(1))
    binary.write_bytes(b"x\0y")
    last.write_text(prose(2))
    result = run("hash", "-f", first, "-f", binary, "-f", last)
    assert result.exit_code == 2 and f"{binary}: binary file" in result.stderr
    assert result.stdout.splitlines() == [f"0x{simhash(prose(1)):016x}  {first}", f"0x{simhash(prose(2)):016x}  {last}"]


@pytest.mark.parametrize(
    "arguments",
    [
        [],
        ["text", "--file", "x"],
        ["text", "--bits", "48"],
        ["text", "--ngram", "99"],
        ["-f", "-", "-f", "-"],  # stdin twice: the second read found nothing (found by a probe)
    ],
)
def test_hash_bad_usage_exits_2(arguments: list[str]) -> None:
    result = run("hash", *arguments, input="some text on stdin")
    assert result.exit_code == 2
    assert "Traceback" not in result.output and "0x" not in result.stdout


# -- export and import ---------------------------------------------------------------------------


@pytest.mark.parametrize("file_format", ["jsonl", "tsv"])
def test_export_import_round_trip_into_another_block_plan(tmp_path: Path, file_format: str) -> None:
    source = tmp_path / "in.jsonl"
    source.write_text("".join(json.dumps({"id": f"d{n}", "text": prose(30 + n), "n": n}) + "\n" for n in range(5)))
    db = str(tmp_path / "a")
    run("add", "--jsonl", source, "--db", db, "--workers", "1")
    exported = tmp_path / f"out.{file_format}"
    result = run("export", "--format", file_format, "-o", exported, "--db", db)
    assert result.exit_code == 0, result.output
    copy = str(tmp_path / "b")
    imported = run("import", exported, "-k", "4", "--db", copy)
    assert imported.exit_code == 0, imported.output
    assert "added 5" in imported.stdout
    with simdb.open(db, readonly=True) as original, simdb.open(copy, readonly=True) as rebuilt:
        assert list(rebuilt.items()) == list(original.items())
        assert rebuilt.k == 4
        assert rebuilt.fingerprinter == original.fingerprinter  # the settings travel with the export


def test_export_to_stdout_and_import_from_stdin(filled: str, tmp_path: Path) -> None:
    exported = run("export", "--db", filled).stdout
    lines = json_lines(exported)
    assert lines[0]["simdb"] == "export" and len(lines) == 5
    copy = str(tmp_path / "copy")
    assert run("import", "-", "--db", copy, input=exported).exit_code == 0
    assert stored_keys(copy) == stored_keys(filled)


def test_import_reports_bad_lines(tmp_path: Path) -> None:
    source = tmp_path / "bad.jsonl"
    source.write_text(
        '{"key": "a", "fingerprint": "0x1"}\n{"key": "b", "fingerprint": "0xZZ"}\n{"fingerprint": "0x2"}\n'
    )
    result = run("import", source, "--db", tmp_path / "db")
    assert result.exit_code == 2
    assert f"{source}:2" in result.stderr and f"{source}:3" in result.stderr
    assert "added 1" in result.stdout


def test_base64_fields_with_bytes_beyond_ascii_fail_their_line(tmp_path: Path) -> None:
    """A review: a non-ASCII sketch or msgpack meta column ended the whole import with an
    unexpected ValueError (base64 refuses such text with ValueError, not binascii.Error)."""
    export = tmp_path / "export.tsv"
    with simdb.open(tmp_path / "db") as database:
        database.add("fine", 1)
    assert run("export", "-o", export, "--db", tmp_path / "db").exit_code == 0
    header = export.read_text().splitlines()[0]
    export.write_text(f"{header}\na\t0x1\t\tsketch:ab\u00e9cd\nb\t0x2\tmsgpack:\u00e9\nc\t0x3\n", encoding="utf-8")
    result = run("import", export, "--db", tmp_path / "copy", "--no-progress")
    assert result.exit_code == 2 and "unexpected" not in result.stderr, result.stderr
    with simdb.open(tmp_path / "copy", readonly=True) as copy:
        assert list(copy.keys()) == ["c"]


def test_an_export_cut_short_inside_its_last_line_is_reported_not_imported(tmp_path: Path) -> None:
    """Found by a faults probe: a TSV export cut inside its last line (an interrupted copy,
    a full disk) imported that line with a cut fingerprint or meta, exit 0; every cut point
    of the last line is now reported, and what came before it is stored as exported."""
    db = tmp_path / "db"
    with simdb.open(db, k=3) as database:
        database.add_many([("docA", 0xD8D8BC04E42DBE7E, {"n": 1}), ("docB", 0x0123456789ABCDEF, 123456)])
    assert run("export", "-o", tmp_path / "whole.tsv", "--db", db).exit_code == 0
    data = (tmp_path / "whole.tsv").read_bytes()
    last_start = data.rindex(b"\n", 0, len(data) - 1) + 1
    for cut in range(last_start + 1, len(data)):
        (tmp_path / "cut.tsv").write_bytes(data[:cut])
        copy = tmp_path / f"copy-{cut}"
        result = run("import", tmp_path / "cut.tsv", "--db", copy)
        assert result.exit_code == 2 and "cut short" in result.stderr, (cut, result.stdout, result.stderr)
        with simdb.open(copy, readonly=True) as database:
            assert [(d.key, d.fingerprint, d.meta) for d in database.items()] == [
                ("docA", 0xD8D8BC04E42DBE7E, {"n": 1})
            ]


@pytest.mark.parametrize("file_format", ["jsonl", "tsv"])
def test_exports_joined_into_one_stream_are_each_checked_against_the_settings(tmp_path: Path, file_format: str) -> None:
    """Found by a faults probe: (export a; export b) > both.jsonl imported b's simhash
    documents under a's minhash settings, after one 'no key' line for b's header.  A later
    header is read as the header of what follows it: the same settings go on, others stop
    the file there."""
    for name, kind in (("minhash", "minhash"), ("simhash", "simhash"), ("minhash2", "minhash")):
        (tmp_path / f"{name}.txt").write_text(prose(len(name)))
        assert run("add", tmp_path / f"{name}.txt", "--kind", kind, "--db", tmp_path / name).exit_code == 0
    exports = {
        name: run("export", "--format", file_format, "--db", tmp_path / name).stdout
        for name in ("minhash", "simhash", "minhash2")
    }
    joined = run(
        "import",
        "--format",
        file_format,
        "-",
        "--db",
        tmp_path / "joined",
        input=exports["minhash"] + exports["simhash"],
    )
    assert joined.exit_code == 2 and "other settings" in joined.stderr and "rest of the file" in joined.stderr
    assert len(stored_keys(str(tmp_path / "joined"))) == 1
    alike = run(
        "import",
        "--format",
        file_format,
        "-",
        "--db",
        tmp_path / "alike",
        input=exports["minhash"] + exports["minhash2"],
    )
    assert alike.exit_code == 0, alike.stderr
    assert len(stored_keys(str(tmp_path / "alike"))) == 2


def test_export_to_a_file_is_synced_before_it_replaces_the_old_one(
    filled: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Found by a faults probe: export -o renamed its file over the previous backup with no
    fsync, so a power loss could keep the rename and lose the data, the old backup with it.
    Now the file is synced, renamed, and its directory synced, in that order."""
    events: list[tuple[str, str]] = []
    real_fsync, real_replace = os.fsync, os.replace

    def fsync(descriptor: int) -> None:
        events.append(("fsync", os.readlink(f"/proc/self/fd/{descriptor}")))
        real_fsync(descriptor)

    def replace(source: object, target: object) -> None:
        events.append(("replace", str(target)))
        real_replace(source, target)  # type: ignore[arg-type]

    monkeypatch.setattr(os, "fsync", fsync)
    monkeypatch.setattr(os, "replace", replace)
    backup = tmp_path / "backup.jsonl"
    backup.write_text("the previous backup\n")
    assert run("export", "-o", backup, "--db", filled).exit_code == 0
    kinds = [kind for kind, _ in events]
    assert kinds == ["fsync", "replace", "fsync"], events
    assert events[0][1].endswith(".partial") and events[1][1] == str(backup) and events[2][1] == str(tmp_path)
    assert json_lines(backup.read_text())[0]["simdb"] == "export"


def test_a_jsonl_export_saved_with_a_byte_order_mark_imports(filled: str, tmp_path: Path) -> None:
    """Found by a faults probe: an export an editor saved with a UTF-8 byte-order mark was
    refused as no export JSONL file (a TSV export's mark was already dropped)."""
    exported = run("export", "--db", filled).stdout
    (tmp_path / "marked.jsonl").write_bytes(codecs.BOM_UTF8 + exported.encode())
    result = run("import", tmp_path / "marked.jsonl", "--db", tmp_path / "copy")
    assert result.exit_code == 0, result.stderr
    assert stored_keys(str(tmp_path / "copy")) == stored_keys(filled)


def test_a_tsv_export_given_to_add_fingerprints_is_sent_to_import(filled: str, tmp_path: Path) -> None:
    exported = tmp_path / "backup.tsv"
    assert run("export", "-o", exported, "--db", filled).exit_code == 0
    result = run("add", "--fingerprints", exported, "--db", tmp_path / "copy")
    assert result.exit_code == 2 and "simdb import" in result.stderr, result.stderr
    assert not (tmp_path / "copy").exists()


def test_export_parquet_needs_an_output_file_and_unknown_formats_are_refused(filled: str) -> None:
    result = run("export", "--format", "parquet", "--db", filled)
    assert result.exit_code == 2 and "--output" in result.stderr
    assert run("export", "--format", "xml", "--db", filled).exit_code == 2
    # json, the other commands' --format for JSON lines, is taken for jsonl (a new-user probe).
    assert run("export", "--format", "json", "--db", filled).stdout == run("export", "--db", filled).stdout


@pytest.mark.parametrize("name", ["backup.tsv", "backup.TSV.gz", "backup.jsonl", "backup.txt"])
def test_export_writes_the_format_its_output_name_says_and_imports_back(filled: str, tmp_path: Path, name: str) -> None:
    """Found by an adversarial probe: ``export -o backup.tsv`` wrote JSONL, which import
    (reading a file by its name) then refused line by line."""
    exported = tmp_path / name
    assert run("export", "-o", exported, "--db", filled).exit_code == 0
    with gzip.open(exported, "rt") if name.lower().endswith(".gz") else open(exported) as stream:
        header, first_document = stream.readline(), stream.readline()
    assert json.loads(header)["simdb"] == "export"  # both formats open with the settings line
    assert first_document.startswith("{") != (".tsv" in name.lower())
    copy = str(tmp_path / "copy")
    imported = run("import", exported, "--db", copy, "--no-progress")
    assert imported.exit_code == 0 and "failed 0" in imported.stdout, imported.output
    with simdb.open(filled, readonly=True) as original, simdb.open(copy, readonly=True) as rebuilt:
        assert list(rebuilt.items()) == list(original.items())


@pytest.mark.parametrize("name", ["empty.tsv", "empty.jsonl"])
def test_the_export_of_an_empty_database_imports_back_with_its_settings(tmp_path: Path, name: str) -> None:
    """A probe: the header-only export of an empty database imported as "nothing to import",
    so its k, blocks and text settings were lost; an empty file still creates nothing."""
    settings = simdb.Fingerprinter(features="char", ngram=5)
    with simdb.open(tmp_path / "empty", k=3, fingerprinter=settings):
        pass
    exported = tmp_path / name
    assert run("export", "-o", exported, "--db", tmp_path / "empty").exit_code == 0
    imported = run("import", exported, "--db", tmp_path / "copy", "--no-progress")
    assert imported.exit_code == 0, imported.output
    with simdb.open(tmp_path / "copy", readonly=True) as copy:
        assert len(copy) == 0 and (copy.k, copy.plan.blocks) == (3, 5) and copy.fingerprinter == settings
    (tmp_path / "blank.jsonl").write_text("")
    blank = run("import", tmp_path / "blank.jsonl", "--db", tmp_path / "none", "--no-progress")
    assert blank.exit_code == 0 and "no database was created" in blank.stderr
    assert not (tmp_path / "none").exists()


@pytest.mark.parametrize(("file_format", "name"), [("jsonl", "x.tsv"), ("tsv", "x.jsonl"), ("jsonl", "x.parquet")])
def test_export_refuses_a_format_its_output_name_contradicts(
    filled: str, tmp_path: Path, file_format: str, name: str
) -> None:
    result = run("export", "--format", file_format, "-o", tmp_path / name, "--db", filled)
    assert result.exit_code == 2 and "named as" in result.stderr
    assert not (tmp_path / name).exists()


def test_import_if_new_takes_a_threshold(tmp_path: Path) -> None:
    """import --if-new had no -t, so an import deduplicated only at the default 0.9."""
    words = prose(300, words=300).split()
    edited = list(words)
    for position in (50, 150, 250):
        edited[position] = "changed"
    source, copy = str(tmp_path / "source"), str(tmp_path / "copy")
    with simdb.open(source) as database:
        database.add_texts([("edited", " ".join(edited))])
    exported = tmp_path / "e.jsonl"
    assert run("export", "-o", exported, "--db", source).exit_code == 0
    with simdb.open(copy) as database:
        database.add_texts([("original", " ".join(words))])
        [match] = [m for m in database.query(text=" ".join(edited), threshold=0.5) if m.key == "original"]
    assert 0.9 <= match.similarity < 0.99
    skipped = run("import", exported, "--if-new", "--db", copy, "--no-progress")
    assert skipped.exit_code == 0 and "skipped 1" in skipped.stdout, skipped.output
    kept = run("import", exported, "--if-new", "-t", "0.99", "--db", copy, "--no-progress")
    assert kept.exit_code == 0 and "added 1" in kept.stdout, kept.output
    assert run("import", exported, "-t", "0.99", "--db", copy).exit_code == 2  # -t goes with --if-new


def test_export_tsv_refuses_keys_it_cannot_carry(tmp_path: Path) -> None:
    db = str(tmp_path / "db")
    with simdb.open(db) as database:
        database.add("tab\there", 1)
    result = run("export", "--format", "tsv", "--db", db)
    assert result.exit_code == 2 and "jsonl" in result.stderr


def test_export_through_a_symbolic_link_replaces_what_it_names_and_keeps_the_link(filled: str, tmp_path: Path) -> None:
    # Before: the temporary was renamed over the link itself (as root, over /dev/stdout).
    target, link = tmp_path / "backup.jsonl", tmp_path / "latest.jsonl"
    target.write_text("an older backup\n")
    link.symlink_to(target.name)
    assert run("export", "-o", link, "--db", filled).exit_code == 0
    assert link.is_symlink() and os.readlink(link) == target.name
    expected = run("export", "--db", filled).stdout
    assert target.read_text() == expected and expected.count("\n") == 5


def test_export_into_the_database_directory_is_refused(filled: str) -> None:
    # Before: -o onto the data file or CURRENT replaced it, and the database was gone.
    before = {path.name: path.read_bytes() for path in Path(filled).iterdir() if not path.name.endswith("-lock")}
    for name in ("CURRENT", "data-000001.mdb", "new.jsonl"):
        refused = run("export", "-o", Path(filled) / name, "--db", filled)
        assert refused.exit_code == 2 and "inside the database" in refused.stderr
    after = {path.name: path.read_bytes() for path in Path(filled).iterdir() if not path.name.endswith("-lock")}
    assert after == before and run("check", "--db", filled).exit_code == 0


@pytest.mark.parametrize("name", ["out.jsonl.gz", "out.tsv.gz", "OUT.JSONL.GZ"])
def test_export_to_a_gz_file_writes_gzip_that_imports_back(tmp_path: Path, name: str) -> None:
    source = tmp_path / "in.jsonl"
    source.write_text("".join(json.dumps({"id": f"d{n}", "text": prose(60 + n), "n": n}) + "\n" for n in range(6)))
    db = str(tmp_path / "a")
    assert run("add", "--jsonl", source, "--db", db, "--workers", "1").exit_code == 0
    exported = tmp_path / name
    exported.write_text("an earlier export, replaced whole\n")
    result = run("export", "--format", "tsv" if ".tsv" in name else "jsonl", "-o", exported, "--db", db)
    assert result.exit_code == 0, result.output
    assert sorted(path.name for path in tmp_path.iterdir()) == sorted(["a", "in.jsonl", name])  # no temporary left
    with gzip.open(exported, "rt", encoding="utf-8") as stream:  # gzip, and whole (its trailer checked)
        lines = stream.read().splitlines()
    with simdb.open(db, readonly=True) as original:
        documents = list(original.items())
    assert len(lines) == len(documents) + 1  # the settings line, then one line a document
    copy = str(tmp_path / "b")
    imported = run("import", exported, "--db", copy, "--no-progress")
    assert imported.exit_code == 0, imported.output
    with simdb.open(copy, readonly=True) as rebuilt:
        assert list(rebuilt.items()) == documents


@pytest.mark.parametrize("name", ["e.tsv", "e.tsv.gz"])
@pytest.mark.parametrize("first", ["\ufeffreport", "report"])
def test_tsv_export_and_import_keep_keys_that_start_with_u_feff(tmp_path: Path, name: str, first: str) -> None:
    db = str(tmp_path / "src")
    keys = [first, *(key for key in ("report", "\ufeffreport", "\ufeff\ufeffreport", "\ufeff") if key != first)]
    with simdb.open(db) as database:
        database.add_many([(key, 0x1111 * (n + 1), {"n": n}) for n, key in enumerate(keys)])
        documents = list(database.items())
    exported = tmp_path / name
    assert run("export", "--format", "tsv", "-o", exported, "--db", db).exit_code == 0
    copy = str(tmp_path / "dst")
    imported = run("import", exported, "--db", copy, "--no-progress")
    assert imported.exit_code == 0, imported.output
    with simdb.open(copy, readonly=True) as rebuilt:
        assert list(rebuilt.items()) == documents


def test_add_fingerprints_drops_a_byte_order_mark_on_the_first_line_only(tmp_path: Path, db: str) -> None:
    rows = [("\ufeffa", 1), ("b", 2), ("\ufeffb", 3), ("\ufeff\ufeffc", 4)]
    source = tmp_path / "fps.tsv"
    source.write_bytes(b"".join(f"{key}\t{fingerprint:#x}\n".encode() for key, fingerprint in rows))
    assert source.read_bytes().startswith(codecs.BOM_UTF8)
    result = run("add", "--fingerprints", source, "--db", db)
    assert result.exit_code == 0, result.output
    # The first line's mark is the file's byte-order mark; every later U+FEFF is part of its key.
    expected = {(key[1:] if number == 0 else key): fingerprint for number, (key, fingerprint) in enumerate(rows)}
    with simdb.open(db, readonly=True) as database:
        assert {document.key: document.fingerprint for document in database.items()} == expected


@pytest.mark.parametrize("file_format", ["jsonl", "tsv"])
def test_featureless_documents_stay_featureless_through_export_and_import(tmp_path: Path, file_format: str) -> None:
    # Before export format 3, an export carried no sketches: the copy's featureless documents
    # paired with each other at 1.0, and every similarity became the fingerprint's estimate.
    texts = [("empty", ""), ("marks", "!!! ... ?"), ("blank", "   \n ")]
    texts += [(f"t{n}", prose(80 + n)) for n in range(4)] + [("t0-copy", prose(80)), ("t1-copy", prose(81).upper())]
    source = tmp_path / "in.jsonl"
    source.write_text("".join(json.dumps({"id": key, "text": text}) + "\n" for key, text in texts))
    db = str(tmp_path / "src")
    assert run("add", "--jsonl", source, "--db", db, "--workers", "1").exit_code == 0
    exported = tmp_path / f"e.{file_format}"
    assert run("export", "--format", file_format, "-o", exported, "--db", db).exit_code == 0
    copy, fresh = str(tmp_path / "copy"), str(tmp_path / "fresh")
    with simdb.open(db, readonly=True) as original:
        settings, k = original.fingerprinter, original.k
    if file_format == "tsv":
        # A TSV export before its settings line carried none: its sketches count only where
        # the database has settings.
        headerless = tmp_path / "headerless.tsv"
        headerless.write_bytes(b"".join(exported.read_bytes().splitlines(keepends=True)[1:]))
        bare = run("import", headerless, "--db", str(tmp_path / "bare"), "--no-progress")
        assert bare.exit_code == 0 and "sketches were left out" in bare.stderr, bare.stderr
    assert run("import", exported, "--db", copy, "--no-progress").exit_code == 0
    # --if-new into a new database keeps what adding the texts with --if-new keeps.
    assert run("import", exported, "--db", fresh, "--if-new", "--no-progress").exit_code == 0
    with simdb.open(tmp_path / "oracle", k=k, fingerprinter=settings) as oracle:
        oracle.add_texts(texts, if_new=True)
        kept = set(oracle.keys())
    assert {"empty", "marks", "blank"} <= kept
    with simdb.open(db, readonly=True) as original, simdb.open(copy, readonly=True) as rebuilt:
        assert (rebuilt.fingerprinter, rebuilt.k) == (settings, k)
        assert list(rebuilt.sketched_items()) == list(original.sketched_items())
        assert sorted(rebuilt.pairs()) == sorted(original.pairs())
        assert sorted(map(sorted, rebuilt.clusters())) == sorted(map(sorted, original.clusters()))
    assert stored_keys(fresh) == kept


def test_import_skips_an_export_line_over_max_doc_bytes_without_reading_it_whole(tmp_path: Path) -> None:
    # Found by an adversarial probe: import read a line of any length whole (a 500 MB line
    # peaked at 2 GB, or ended as "unexpected MemoryError" naming nothing).
    export = tmp_path / "e.jsonl"
    big = output.json_line({"key": "big", "fingerprint": "0x1", "meta": "x" * 5_000})
    export.write_text(f'{{"simdb": "export", "format_version": 3}}\n{big}\n{{"key": "ok", "fingerprint": "0x2"}}\n')
    db = str(tmp_path / "db")
    result = run("import", export, "--db", db, "--no-progress", "--max-doc-bytes", "1000")
    assert result.exit_code == 2 and f"{export}:2: a line of" in result.stderr, result.stderr
    assert stored_keys(db) == {"ok"}


@pytest.mark.parametrize(
    ("line", "problem"),
    [
        ('{"key": "a", "fingerprint": "0x1", "sketch": "not base64!"}', "sketch 'not base64!' is not base64"),
        ('{"key": "a", "fingerprint": "0x1", "sketch": "AAAA"}', "is not base64 of 192 bytes"),
        ('{"key": "a", "fingerprint": "0x1", "sketch": ""}', "empty sketch of a featureless text but fingerprint 0x1"),
    ],
)
def test_import_names_the_line_of_a_bad_sketch(tmp_path: Path, line: str, problem: str) -> None:
    export = tmp_path / "e.jsonl"
    header = {"simdb": "export", "format_version": 3, "fingerprinter": simdb.Fingerprinter().to_dict()}
    export.write_text(output.json_line(header) + "\n" + '{"key": "ok", "fingerprint": "0x2"}\n' + line + "\n")
    db = str(tmp_path / "db")
    result = run("import", export, "--db", db, "--no-progress")
    assert result.exit_code == 2 and f"{export}:3" in result.stderr and problem in result.stderr, result.stderr
    assert "Traceback" not in result.stderr
    assert stored_keys(db) == {"ok"}


# -- demo --------------------------------------------------------------------------------------


def test_demo_finds_planted_pairs(tmp_path: Path) -> None:
    result = run("demo", "--dir", tmp_path / "demo", "--documents", "90", "--workers", "1")
    assert result.exit_code == 0, result.output
    assert "added 90" in result.stdout
    summary = re.search(r"Found (\d+) of the (\d+) planted pairs", result.stdout)
    assert summary is not None
    hits, planted = int(summary.group(1)), int(summary.group(2))
    assert planted == 12 and hits >= planted // 2
    assert (tmp_path / "demo" / "db").is_dir() and len(list((tmp_path / "demo" / "docs").iterdir())) == 90
    # A rerun with fewer documents leaves no stale ones.
    run("demo", "--dir", tmp_path / "demo", "--documents", "30", "--workers", "1")
    assert len(stored_keys(str(tmp_path / "demo" / "db"))) == 30


def test_bar_scales_to_the_largest_value() -> None:
    assert output.bar(0, 10) == "" and output.bar(10, 10) == "█" * output.BAR_WIDTH
    assert output.bar(1, 1000) != ""  # a non-zero count is always visible
    assert output.unplain(json.loads(output.json_line({"b": b"\x00\xff"}))) == {"b": b"\x00\xff"}


def test_text_query_on_a_database_without_text_settings_is_a_usage_error(tmp_path: Path) -> None:
    db = str(tmp_path / "bare")
    with simdb.open(db) as bare:  # the library stores no settings with bare fingerprints
        bare.add_many([("a", 1), ("b", 3)])
    result = run("query", "some text", "--db", db)
    assert result.exit_code == 2
    assert "fingerprint settings" in result.stderr and "Traceback" not in result.stderr


def test_a_new_database_of_fingerprints_takes_the_default_settings(tmp_path: Path) -> None:
    """Fingerprints from `simdb hash` (minhash) added to a new database were judged as
    SimHash (a 2-bit pair at 0.995) until the first text made it minhash (the same pair at
    0.938): each threshold meant other pairs before and after (a probe found it).  A new
    database takes the default settings, and says so; --kind chooses others."""
    texts = [prose(1), prose(1).replace(" ", "  ", 1) + " extra", prose(2)]
    lines = []
    for number, text in enumerate(texts):
        (tmp_path / f"t{number}.txt").write_text(text)
        hashed = run("hash", "--file", tmp_path / f"t{number}.txt")
        lines.append(f"t{number}\t{hashed.stdout.split()[0]}")
    (tmp_path / "fp.tsv").write_text("\n".join(lines) + "\n")
    added = run("add", "--fingerprints", tmp_path / "fp.tsv", "--db", tmp_path / "db")
    assert added.exit_code == 0 and "default settings" in added.stderr
    before = json_lines(run("pairs", "-k", "20", "--json", "--db", tmp_path / "db").stdout)
    assert run("add", tmp_path / "t2.txt", "--db", tmp_path / "db").exit_code == 0
    after = json_lines(run("pairs", "-k", "20", "--json", "--db", tmp_path / "db").stdout)
    assert before and [pair["similarity"] for pair in before] == [pair["similarity"] for pair in after[: len(before)]]
    minhash = 1 - 2 * before[0]["distance"] / 64
    assert before[0]["similarity"] == pytest.approx(minhash)
    chosen = run("add", "--kind", "simhash", "--fingerprints", tmp_path / "fp.tsv", "--db", tmp_path / "sim")
    assert chosen.exit_code == 0 and "default settings" not in chosen.stderr


def test_add_of_only_missing_paths_creates_no_database(tmp_path: Path, db: str) -> None:
    result = run("add", tmp_path / "typo.txt", "--db", db)
    assert result.exit_code == 2 and "typo.txt" in result.stderr
    assert "failed 1" in result.stdout
    assert not Path(db).exists()


def test_adding_a_tree_that_holds_the_database_skips_the_database(
    corpus: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(corpus)
    monkeypatch.delenv("SIMDB_PATH", raising=False)
    first = run("add", ".", "-r", "--workers", "1")
    again = run("add", ".", "-r", "--workers", "1")  # now ./simdb-data exists inside the tree
    assert first.exit_code == 0 and again.exit_code == 0, again.output
    assert "replaced 0, skipped 0, failed 0; 5 unchanged" in again.stdout


def test_operating_system_errors_name_the_path(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("")
    result = run("demo", "--dir", blocker / "below", "--documents", "10")
    assert result.exit_code == 2
    assert str(blocker) in result.stderr and "Traceback" not in result.stderr


def test_progress_shows_documents_per_second_and_time_left() -> None:
    from rich.progress import TimeRemainingColumn

    bar = output.progress_bar(True)
    bar.add_task("adding", total=1000, completed=500, documents=2500)
    task = bar.tasks[0]
    assert task.start_time is not None
    task.start_time -= 2.0  # as if two seconds had passed
    rate = next(column for column in bar.columns if isinstance(column, output._DocumentRate))
    assert re.fullmatch(r"2,500 docs  1,2\d\d docs/s", rate.render(task).plain)
    assert any(isinstance(column, TimeRemainingColumn) for column in bar.columns)
    assert bar.disable  # stderr is no terminal under pytest: no bar is drawn


def test_counts_of_one_are_singular_and_simdb_debug_0_means_off(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "one.txt").write_text("a few words of text")
    db = tmp_path / "db"
    assert run("add", tmp_path / "one.txt", "--db", db).exit_code == 0
    checked = run("check", "--db", db)
    assert checked.exit_code == 0 and checked.stdout.startswith("ok: 1 document, ")
    monkeypatch.setattr(simdb.Database, "check", lambda self, isolated=False: simdb.CheckReport(1, 5, ["one problem"]))
    assert "1 problem in 1 document and 5 table entries" in run("check", "--db", db).stdout
    for setting, traceback in (("0", False), ("false", False), ("", False), ("1", True), ("yes", True)):
        monkeypatch.setenv("SIMDB_DEBUG", setting)
        missing = run("stats", "--db", tmp_path / "nothing-here")
        assert missing.exit_code == 3 and ("Traceback" in missing.stderr) == traceback, setting


def test_pairs_and_clusters_take_workers_for_their_search(filled: str) -> None:
    """--workers went only with --parquet, so a user on a shared machine could not keep
    pairs or clusters off every core (a probe found it); it sets the search's threads, and
    the answers are those of every core."""
    for command in (["pairs", "-k", "3"], ["pairs", "-k", "3", "--histogram"], ["clusters", "-k", "3"]):
        everywhere = run(*command, "--db", filled, "--json")
        one = run(*command, "--db", filled, "--json", "--workers", "1")
        assert one.exit_code == everywhere.exit_code == 0 and one.stdout == everywhere.stdout != ""
    refused = run("pairs", "--db", filled, "--workers", "0")
    assert refused.exit_code == 2


def test_a_file_option_without_a_file_names_only_the_options_given(filled: str) -> None:
    """query --fingerprint X --exclude-self listed nine options as going with --file (a probe
    found it); the message names the ones given."""
    alone = run("query", "--fingerprint", "0x1", "--exclude-self", "--db", filled)
    assert alone.exit_code == 2 and alone.stderr == "simdb: --exclude-self goes with --file or --files-from\n"
    two = run("query", "some words", "-r", "--glob", "*.txt", "--db", filled)
    assert two.exit_code == 2 and two.stderr == "simdb: -r and --glob go with --file or --files-from\n"


def test_a_text_argument_that_names_a_file_gets_a_note_pointing_to_file(tmp_path: Path, db: str) -> None:
    """A new-user probe: `simdb query docs/a.txt` looked for the words "docs/a.txt" and said
    no document was near; `simdb hash docs/a.txt` hashed the path."""
    document = tmp_path / "a.txt"
    document.write_text(prose(3))
    assert run("add", document, "--db", db).exit_code == 0
    for command in (["query", str(document), "--db", db], ["hash", str(document)]):
        result = run(*command)
        assert f"--file {document}" in result.stderr and "is the name of a file" in result.stderr, result.stderr
    assert run("query", "--file", str(document), "--db", db).exit_code == 0
    plain = run("hash", "words that name nothing")
    assert "note" not in plain.stderr


def test_query_and_hash_of_directories_with_no_files_are_usage_errors(tmp_path: Path, db: str) -> None:
    """A new-user probe: `query --file emptydir` said "no document within 5 bits" (exit 1),
    and `hash -f dir` of a directory holding only subdirectories printed nothing, exit 0,
    suggesting -r and --hidden, which hash did not have."""
    (tmp_path / "empty").mkdir()
    (tmp_path / "tree" / "sub").mkdir(parents=True)
    (tmp_path / "tree" / "sub" / "a.txt").write_text(prose(4))
    assert run("add", tmp_path / "tree", "-r", "--db", db).exit_code == 0
    empty = run("query", "--file", tmp_path / "empty", "--db", db)
    assert empty.exit_code == 2 and "nothing to query: no files in" in empty.stderr
    shallow = run("hash", "-f", tmp_path / "tree")
    assert shallow.exit_code == 2 and "nothing to hash" in shallow.stderr and shallow.stdout == ""
    deep = run("hash", "-f", tmp_path / "tree", "-r")
    assert deep.exit_code == 0 and deep.stdout.split()[0] == f"{simhash(prose(4)):#018x}"
    assert run("query", "--file", tmp_path / "tree", "-r", "--db", db).exit_code == 0
