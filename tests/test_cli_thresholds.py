"""Similarity thresholds on the command line (issue #14): --threshold/-t on query, pairs,
clusters and add --if-new, pairs at any k, the similarity histogram, featureless documents,
--kind/--weights, and the demo's planted pairs.

Every expected answer is computed here by brute force from the texts, with the database's
own fingerprint settings: fingerprints and sketches from ``Fingerprinter``, similarity from
the one-pair reference ``test_minhash.ref_similarity`` (the joint estimate), candidates
within ``candidate_distance`` (the contract's radius), never hard-coded.
"""

from __future__ import annotations

import json
import math
import random
import re
import subprocess
import sys
import threading
from itertools import combinations
from pathlib import Path
from typing import Any

import pytest
from simdb_cli import demo as demo_generator
from simdb_cli.app import app
from test_minhash import ref_similarity
from typer.testing import CliRunner

import simdb
from simdb.fingerprint import Fingerprinter, hamming

runner = CliRunner()
REPOSITORY = Path(__file__).resolve().parent.parent


def run(*args: object, input: str | None = None) -> Any:
    return runner.invoke(app, [str(arg) for arg in args], input=input, catch_exceptions=False)


def json_lines(text: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in text.splitlines() if line.strip()]


def words(seed: int, count: int = 300) -> list[str]:
    rng = random.Random(seed)
    vocabulary = [f"{rng.choice('bdfgklmnprstvz')}{rng.choice('aeiou')}{rng.choice('lmnrst')}{i}" for i in range(5000)]
    return rng.choices(vocabulary, k=count)


def edited(base: list[str], changes: int, seed: int) -> str:
    """``base`` with ``changes`` words replaced by new ones: each kills up to 3 shingles."""
    rng = random.Random(seed)
    result = list(base)
    for position in rng.sample(range(len(result)), changes):
        result[position] = f"new{seed}x{position}"
    return " ".join(result)


def graded_documents() -> list[tuple[str, str]]:
    """(key, text) in insertion order: originals, and copies edited by 1 to 40 words, so
    similarities spread from about 0.4 to 1, plus unrelated texts."""
    documents = []
    for number in range(4):
        base = words(100 + number)
        documents.append((f"d{number}", " ".join(base)))
        for changes in (1, 3, 8, 15, 40):
            documents.append((f"d{number}-e{changes}", edited(base, changes, seed=number * 100 + changes)))
    documents += [(f"other{n}", " ".join(words(500 + n))) for n in range(3)]
    return documents


def write_jsonl(path: Path, documents: list[tuple[str, str]]) -> Path:
    path.write_text("".join(json.dumps({"id": key, "text": text}) + "\n" for key, text in documents))
    return path


@pytest.fixture
def graded(tmp_path: Path) -> tuple[str, list[tuple[str, str]]]:
    documents = graded_documents()
    db = str(tmp_path / "db")
    result = run("add", "--jsonl", write_jsonl(tmp_path / "docs.jsonl", documents), "--db", db, "--workers", "1")
    assert result.exit_code == 0, result.output
    return db, documents


def settings(db: str) -> Fingerprinter:
    with simdb.open(db, readonly=True) as database:
        assert database.fingerprinter is not None
        return database.fingerprinter


def oracle_pairs(
    db: str, documents: list[tuple[str, str]], threshold: float | None, k: int | None = None
) -> dict[tuple[str, str], tuple[float, int]]:
    """Every pair the contract defines, by brute force: within the radius (k, else the
    threshold's candidate distance) and, with a threshold, at least that similar."""
    fingerprinter = settings(db)
    fingerprints, sketches = fingerprinter.fingerprints_and_sketches([text for _, text in documents])
    if k is None:
        assert threshold is not None
        radius = simdb.candidate_distance(threshold, fingerprinter.kind, verified=True)
    else:
        radius = k
    found = {}
    for (i, (key_a, _)), (j, (key_b, _)) in combinations(enumerate(documents), 2):
        distance = hamming(fingerprints[i], fingerprints[j])
        similarity = ref_similarity(fingerprinter.kind, (fingerprints[i], sketches[i]), (fingerprints[j], sketches[j]))
        if distance <= radius and (threshold is None or similarity >= threshold):
            found[key_a, key_b] = (similarity, distance)
    return found


def reported_pairs(stdout: str) -> dict[tuple[str, str], tuple[float, int]]:
    lines = json_lines(stdout)
    assert all(set(line) == {"key_a", "key_b", "similarity", "distance"} for line in lines)
    return {(line["key_a"], line["key_b"]): (line["similarity"], line["distance"]) for line in lines}


def assert_same_pairs(
    reported: dict[tuple[str, str], tuple[float, int]], expected: dict[tuple[str, str], tuple[float, int]]
) -> None:
    assert set(reported) == set(expected)
    for pair, (similarity, distance) in expected.items():
        assert reported[pair][1] == distance
        assert reported[pair][0] == pytest.approx(similarity, abs=1e-9)


def components(keys: list[str], edges: set[tuple[str, str]]) -> list[list[str]]:
    """Connected groups of more than one key, members and groups in insertion order."""
    parent = {key: key for key in keys}

    def root(key: str) -> str:
        while parent[key] != key:
            key = parent[key]
        return key

    for a, b in edges:
        parent[root(a)] = root(b)
    groups: dict[str, list[str]] = {}
    for key in keys:
        groups.setdefault(root(key), []).append(key)
    return [members for members in groups.values() if len(members) > 1]


# -- pairs -------------------------------------------------------------------------------------------


def test_pairs_default_threshold_json_lines_match_the_brute_force_sketch_oracle(
    graded: tuple[str, list[tuple[str, str]]],
) -> None:
    db, documents = graded
    result = run("pairs", "--db", db, "--json")
    assert result.exit_code == 0, result.output
    expected = oracle_pairs(db, documents, simdb.DEFAULT_THRESHOLD)
    assert expected  # the copies edited by a word or three are near-duplicates
    assert_same_pairs(reported_pairs(result.stdout), expected)


@pytest.mark.parametrize("threshold", [0.5, 0.75, 0.95])
def test_pairs_threshold_matches_the_oracle(graded: tuple[str, list[tuple[str, str]]], threshold: float) -> None:
    db, documents = graded
    result = run("pairs", "-t", threshold, "--db", db, "--json")
    expected = oracle_pairs(db, documents, threshold)
    assert result.exit_code == (0 if expected else 1), result.output
    assert_same_pairs(reported_pairs(result.stdout), expected)
    # -t with -k: the radius is k, which may pass the index's k (3 here).
    wide = run("pairs", "-t", threshold, "-k", 30, "--db", db, "--json")
    assert_same_pairs(reported_pairs(wide.stdout), oracle_pairs(db, documents, threshold, k=30))


def test_pairs_k_alone_runs_beyond_the_index_k_in_bits(graded: tuple[str, list[tuple[str, str]]]) -> None:
    db, documents = graded
    with simdb.open(db, readonly=True) as database:
        assert database.k < 20
    result = run("pairs", "-k", 20, "--db", db, "--json")
    assert result.exit_code == 0, result.output
    expected = oracle_pairs(db, documents, None, k=20)
    assert any(distance > 3 for _, distance in expected.values())
    assert_same_pairs(reported_pairs(result.stdout), expected)


def test_pairs_table_shows_similarity_with_three_decimals_then_distance(
    graded: tuple[str, list[tuple[str, str]]],
) -> None:
    db, documents = graded
    lines = run("pairs", "--db", db).stdout.splitlines()
    assert lines[0].split() == ["similarity", "distance", "key_a", "key_b"]
    expected = oracle_pairs(db, documents, simdb.DEFAULT_THRESHOLD)
    rows = {(cells[2], cells[3]): (cells[0], int(cells[1])) for cells in (line.split() for line in lines[1:])}
    assert rows == {pair: (f"{similarity:.3f}", distance) for pair, (similarity, distance) in expected.items()}


def test_pairs_histogram_counts_pairs_per_similarity_bucket_and_per_distance_with_k(
    graded: tuple[str, list[tuple[str, str]]],
) -> None:
    db, documents = graded
    threshold = 0.5
    result = run("pairs", "--histogram", "-t", threshold, "--db", db, "--json")
    assert result.exit_code == 0, result.output
    rows = json_lines(result.stdout)
    expected = oracle_pairs(db, documents, threshold)
    buckets = [step / 20 for step in range(10, 21)]  # 0.50, 0.55, ..., 1.00
    assert [row["similarity"] for row in rows] == pytest.approx(buckets)
    counts = [
        sum(1 for similarity, _ in expected.values() if min(20, math.floor(similarity * 20 + 1e-9)) == step)
        for step in range(10, 21)
    ]
    assert [row["pairs"] for row in rows] == counts
    chart = run("pairs", "--histogram", "-t", threshold, "--db", db).stdout.splitlines()
    assert (
        chart[0].split() == ["similarity", "pairs"] and chart[1].split()[0] == "0.50" and chart[-1].split()[0] == "1.00"
    )
    by_distance = json_lines(run("pairs", "--histogram", "-k", 12, "--db", db, "--json").stdout)
    within = oracle_pairs(db, documents, None, k=12)
    assert by_distance == [
        {"distance": d, "pairs": sum(1 for _, distance in within.values() if distance == d)} for d in range(13)
    ]


def test_featureless_documents_are_counted_and_pair_only_when_asked(tmp_path: Path) -> None:
    documents = [
        ("a", " ".join(words(1))),
        ("empty", ""),
        ("a-copy", " ".join(words(1)).upper()),
        ("blank", " \t\n "),
        ("b", " ".join(words(2))),
    ]
    db = str(tmp_path / "db")
    result = run("add", "--jsonl", write_jsonl(tmp_path / "d.jsonl", documents), "--db", db, "--workers", "1", "--json")
    assert result.exit_code == 0, result.output
    summary = json_lines(result.stdout)[-1]
    assert summary["added"] == 5 and summary["featureless"] == 2
    text = run("add", "--jsonl", tmp_path / "d.jsonl", "--db", str(tmp_path / "db2"), "--workers", "1")
    assert "2 featureless (nothing to fingerprint)" in text.stdout
    assert set(reported_pairs(run("pairs", "--db", db, "--json").stdout)) == {("a", "a-copy")}
    with_featureless = reported_pairs(run("pairs", "--include-featureless", "--db", db, "--json").stdout)
    assert ("empty", "blank") in with_featureless and ("a", "a-copy") in with_featureless
    clustered = [line["members"] for line in json_lines(run("clusters", "--db", db, "--json").stdout)]
    assert clustered == [["a", "a-copy"]]
    with_featureless_clusters = [
        line["members"] for line in json_lines(run("clusters", "--include-featureless", "--db", db, "--json").stdout)
    ]
    assert ["empty", "blank"] in with_featureless_clusters
    # --if-new: featureless documents are nobody's near-duplicates, so each is added.
    if_new = run(
        "add",
        "--jsonl",
        write_jsonl(tmp_path / "e.jsonl", [("empty2", ""), ("blank2", "  \n ")]),
        "--if-new",
        "--db",
        db,
        "--workers",
        "1",
        "--json",
    )
    assert if_new.exit_code == 0, if_new.output
    summary = json_lines(if_new.stdout)[-1]
    assert summary["added"] == 2 and summary["skipped"] == 0 and summary["featureless"] == 2


# -- clusters ----------------------------------------------------------------------------------------


@pytest.mark.parametrize("arguments", [[], ["-t", "0.6"], ["-k", "25"], ["-t", "0.7", "-k", "9"]])
def test_clusters_are_the_connected_groups_of_the_oracle_pairs(
    graded: tuple[str, list[tuple[str, str]]], arguments: list[str]
) -> None:
    db, documents = graded
    threshold = (
        float(arguments[arguments.index("-t") + 1])
        if "-t" in arguments
        else (None if "-k" in arguments else simdb.DEFAULT_THRESHOLD)
    )
    k = int(arguments[arguments.index("-k") + 1]) if "-k" in arguments else None
    expected = components([key for key, _ in documents], set(oracle_pairs(db, documents, threshold, k)))
    result = run("clusters", *arguments, "--db", db, "--json")
    assert result.exit_code == 0, result.output
    assert [line["members"] for line in json_lines(result.stdout)] == expected


def test_clusters_histogram_gives_a_row_per_threshold_up_to_one(graded: tuple[str, list[tuple[str, str]]]) -> None:
    db, documents = graded
    keys = [key for key, _ in documents]
    rows = json_lines(run("clusters", "--histogram", "-t", "0.8", "--db", db, "--json").stdout)
    levels = [0.8, 0.85, 0.9, 0.95, 1.0]
    assert [row["threshold"] for row in rows] == pytest.approx(levels)
    for row, level in zip(rows, levels):
        groups = components(keys, set(oracle_pairs(db, documents, level)))
        assert (row["clusters"], row["documents"]) == (len(groups), sum(map(len, groups)))
    by_k = json_lines(run("clusters", "--histogram", "-k", "5", "--db", db, "--json").stdout)
    assert [row["k"] for row in by_k] == list(range(6))
    for row in by_k:
        groups = components(keys, set(oracle_pairs(db, documents, None, k=row["k"])))
        assert (row["clusters"], row["documents"]) == (len(groups), sum(map(len, groups)))


# -- query ---------------------------------------------------------------------------------------------


def test_query_threshold_reports_the_oracle_matches_most_similar_first(
    graded: tuple[str, list[tuple[str, str]]],
) -> None:
    db, documents = graded
    fingerprinter = settings(db)
    with simdb.open(db, readonly=True) as database:
        index_k = database.k
    threshold = 0.8
    query_text = documents[0][1]
    radius = min(index_k, simdb.candidate_distance(threshold, fingerprinter.kind, verified=True))
    probe, probe_sketch = fingerprinter.fingerprint_and_sketch(query_text)
    fingerprints, sketches = fingerprinter.fingerprints_and_sketches([text for _, text in documents])
    expected = sorted(
        (
            (
                -ref_similarity(fingerprinter.kind, (probe, probe_sketch), (fingerprint, sketch)),
                hamming(probe, fingerprint),
                key,
            )
            for (key, _), fingerprint, sketch in zip(documents, fingerprints, sketches)
        ),
    )
    expected = [row for row in expected if -row[0] >= threshold and row[1] <= radius]
    result = run("query", query_text, "-t", threshold, "--db", db, "--json")
    assert result.exit_code == 0, result.output
    lines = json_lines(result.stdout)
    assert [line["key"] for line in lines] == [key for _, _, key in expected]
    assert [line["similarity"] for line in lines] == pytest.approx([-similarity for similarity, _, _ in expected])
    assert [line["distance"] for line in lines] == [distance for _, distance, _ in expected]
    table = run("query", query_text, "-t", threshold, "--db", db).stdout.splitlines()
    assert table[0].split() == ["similarity", "distance", "fingerprint", "key"]
    assert table[1].split()[0] == f"{-expected[0][0]:.3f}"
    nothing = run("query", "completely different words here for sure", "-t", "0.99", "--db", db)
    assert nothing.exit_code == 1 and "similarity >= 0.99" in nothing.stderr


# -- bad thresholds ------------------------------------------------------------------------------------


@pytest.mark.parametrize("value", ["0", "-0.5", "1.5", "nan", "inf"])
@pytest.mark.parametrize(
    "command", [["pairs"], ["clusters"], ["query", "some text"], ["add", "--if-new", "--jsonl", "-"]]
)
def test_a_threshold_outside_0_to_1_exits_2_with_one_line(
    graded: tuple[str, list[tuple[str, str]]], command: list[str], value: str
) -> None:
    db, _ = graded
    with simdb.open(db, readonly=True) as database:
        before = len(database)
    result = run(*command, "--threshold", value, "--db", db, input='{"id": "x", "text": "new words"}\n')
    assert result.exit_code == 2, result.output
    assert result.stderr.count("\n") == 1 and "--threshold" in result.stderr and "Traceback" not in result.output
    with simdb.open(db, readonly=True) as database:
        assert len(database) == before


def test_threshold_on_add_needs_if_new_and_parquet_refuses_it(
    graded: tuple[str, list[tuple[str, str]]], tmp_path: Path
) -> None:
    db, _ = graded
    result = run("add", "--jsonl", "-", "-t", "0.8", "--db", db, input='{"id": "x", "text": "new words"}\n')
    assert result.exit_code == 2 and "--threshold goes with --if-new" in result.stderr
    parquet = run("pairs", "--parquet", tmp_path / "x.parquet", "--out", tmp_path / "out", "-t", "0.8")
    assert parquet.exit_code == 2 and "do not go with --parquet" in parquet.stderr


# -- add --if-new --------------------------------------------------------------------------------------


def greedy_oracle(
    db: str, stored: list[tuple[str, str]], incoming: list[tuple[str, str]], threshold: float
) -> tuple[list[str], dict[str, set[str]]]:
    """Which incoming documents --if-new adds, and for each skipped one the keys it may be
    named a duplicate of, by brute force in order: a kept document (stored, or added
    earlier in the run) at similarity >= threshold among the candidates the index finds,
    within min(index k, candidate distance) bits."""
    fingerprinter = settings(db)
    with simdb.open(db, readonly=True) as database:
        index_k = database.k
    everything = stored + incoming
    fingerprints, sketches = fingerprinter.fingerprints_and_sketches([text for _, text in everything])
    radius = min(index_k, simdb.candidate_distance(threshold, fingerprinter.kind, verified=True))
    kept = list(range(len(stored)))
    added, skipped = [], {}
    for position in range(len(stored), len(everything)):
        near = {
            everything[other][0]
            for other in kept
            if hamming(fingerprints[position], fingerprints[other]) <= radius
            and ref_similarity(
                fingerprinter.kind, (fingerprints[position], sketches[position]), (fingerprints[other], sketches[other])
            )
            >= threshold
        }
        if near:
            skipped[everything[position][0]] = near
        else:
            kept.append(position)
            added.append(everything[position][0])
    return added, skipped


@pytest.mark.parametrize("threshold", [None, 0.85, 0.6])
def test_if_new_skips_exactly_what_the_oracle_skips(tmp_path: Path, threshold: float | None) -> None:
    documents = graded_documents()
    stored = [document for document in documents if "-e" not in document[0]]
    incoming = [document for document in documents if "-e" in document[0]]
    db = str(tmp_path / "db")
    assert run("add", "--jsonl", write_jsonl(tmp_path / "a.jsonl", stored), "--db", db, "--workers", "1").exit_code == 0
    given = ["-t", str(threshold)] if threshold is not None else []
    result = run(
        "add",
        "--jsonl",
        write_jsonl(tmp_path / "b.jsonl", incoming),
        "--if-new",
        *given,
        "--batch-size",
        "7",
        "--db",
        db,
        "--workers",
        "1",
        "--json",
    )
    assert result.exit_code == 0, result.output
    added, skipped = greedy_oracle(db, stored, incoming, threshold or simdb.DEFAULT_THRESHOLD)
    assert skipped and added
    events = json_lines(result.stdout)
    reported = {event["key"]: event for event in events if event.get("event") == "skipped"}
    assert set(reported) == set(skipped)
    fingerprinter = settings(db)
    texts = dict(documents)
    for key, event in reported.items():
        assert event["duplicate_of"] in skipped[key]
        fingerprint, sketch = fingerprinter.fingerprint_and_sketch(texts[key])
        other_fingerprint, other_sketch = fingerprinter.fingerprint_and_sketch(texts[event["duplicate_of"]])
        expected = ref_similarity(fingerprinter.kind, (fingerprint, sketch), (other_fingerprint, other_sketch))
        assert event["similarity"] == pytest.approx(expected, abs=1e-9)
        assert event["distance"] == hamming(fingerprint, other_fingerprint)
    assert events[-1]["added"] == len(added) and events[-1]["skipped"] == len(skipped)
    with simdb.open(db, readonly=True) as database:
        assert set(database.keys()) == {key for key, _ in stored} | set(added)
    first_skip = next(iter(skipped))
    human = run(
        "add",
        "--jsonl",
        write_jsonl(tmp_path / "c.jsonl", [(first_skip, texts[first_skip])]),
        "--if-new",
        *given,
        "--db",
        db,
        "--workers",
        "1",
    )
    assert re.search(
        rf"skipped {re.escape(first_skip)}: near-duplicate of \S+ \(similarity [01]\.\d{{3}}, distance \d+\)",
        human.stdout,
    )


def test_if_new_starts_no_thread_per_document(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """One batched probe per batch: threads started stay a small constant per batch, not
    one per document (the cause of --if-new being 50 times slower than a plain add)."""
    documents = [(f"doc{n}", " ".join(words(1000 + n, 60))) for n in range(400)]
    source = write_jsonl(tmp_path / "d.jsonl", documents)
    started = []
    original = threading.Thread.start

    def counting_start(self: threading.Thread) -> None:
        started.append(self.name)
        original(self)

    monkeypatch.setattr(threading.Thread, "start", counting_start)
    result = run(
        "add",
        "--jsonl",
        source,
        "--if-new",
        "--batch-size",
        "100",
        "--db",
        tmp_path / "db",
        "--workers",
        "1",
        "--no-progress",
    )
    assert result.exit_code == 0, result.output
    assert "added 400" in result.stdout
    assert len(started) <= 4 * 4, started  # 4 batches


def make_posts(directory: Path, count: int) -> Path:
    """``count`` small text files of mailing-list posts, with planted reposts."""
    sys.path.insert(0, str(REPOSITORY / "bench"))
    try:
        from messy_corpus import messy_posts  # type: ignore[import-not-found]
    finally:
        sys.path.remove(str(REPOSITORY / "bench"))
    directory.mkdir()
    for number, post in enumerate(messy_posts(count, seed=3)):
        (directory / f"post-{number:05d}.txt").write_text(post, encoding="utf-8")
    return directory


def timed_add(posts: Path, db: Path, *extra: str) -> dict[str, Any]:
    """The summary of ``simdb add POSTS`` run as a real process (its ``seconds``: the time
    spent adding, without the interpreter's start-up)."""
    environment = {"PYTHONPATH": str(REPOSITORY), "PATH": "/usr/bin:/bin"}
    completed = subprocess.run(
        [sys.executable, "-m", "simdb_cli.app", "add", str(posts), "--db", str(db), "--json", "--no-progress", *extra],
        capture_output=True,
        text=True,
        timeout=300,
        env=environment,
        check=False,
    )
    assert completed.returncode == 0, completed.stderr
    summary: dict[str, Any] = json_lines(completed.stdout)[-1]
    return summary


def test_if_new_in_a_real_process_runs_at_least_half_as_fast_as_a_plain_add(tmp_path: Path) -> None:
    posts = make_posts(tmp_path / "posts", 4000)
    plain_times, if_new_times = [], []
    for attempt in range(2):  # the best of two each, alternated: the machine is shared
        plain = timed_add(posts, tmp_path / f"plain{attempt}")
        if_new = timed_add(posts, tmp_path / f"if-new{attempt}", "--if-new")
        plain_times.append(plain["seconds"])
        if_new_times.append(if_new["seconds"])
    assert plain["added"] == 4000 and plain["skipped"] == 0
    assert if_new["skipped"] > 0 and if_new["added"] + if_new["skipped"] == 4000
    with simdb.open(str(tmp_path / "if-new1"), readonly=True) as database:
        assert len(database) == if_new["added"]
    # Half the speed at least, with 0.2 s of slack for a 0.5 s run on a loaded machine.
    assert min(if_new_times) <= 2 * min(plain_times) + 0.2, (plain_times, if_new_times)


# -- --kind, --weights and hash --------------------------------------------------------------------------


@pytest.mark.parametrize(("kind", "weights"), [("simhash", "log"), ("simhash", "tf"), ("minhash", None)])
def test_add_kind_and_weights_are_stored_and_used(tmp_path: Path, kind: str, weights: str | None) -> None:
    documents = graded_documents()[:6]
    db = str(tmp_path / "db")
    given = ["--kind", kind] + (["--weights", weights] if weights else [])
    assert (
        run(
            "add", "--jsonl", write_jsonl(tmp_path / "d.jsonl", documents), *given, "--db", db, "--workers", "1"
        ).exit_code
        == 0
    )
    chosen: dict[str, Any] = {"weights": weights} if weights else {}
    expected = Fingerprinter(kind=kind, **chosen)
    assert settings(db) == expected
    with simdb.open(db, readonly=True) as database:
        assert {document.key: document.fingerprint for document in database.items()} == {
            key: expected.fingerprint(text) for key, text in documents
        }
    hashed = json_lines(run("hash", documents[0][1], *given, "--json").stdout)[0]
    assert hashed["fingerprint"] == f"0x{expected.fingerprint(documents[0][1]):016x}"
    assert hashed["kind"] == kind and hashed["weights"] == expected.weights
    assert kind in run("stats", "--db", db).stdout


def flat_help(command: str) -> str:
    """``simdb COMMAND --help`` as one line of words, without rich's box drawing and wrapping."""
    return " ".join(re.sub("[│╭╮╰╯─]", " ", run(command, "--help").stdout).split())


def test_hash_says_what_it_did_and_its_help_promises_no_database(tmp_path: Path) -> None:
    text = " ".join(words(7))
    result = run("hash", text)
    assert result.stdout.strip() == f"0x{Fingerprinter().fingerprint(text):016x}"
    assert Fingerprinter().kind in result.stderr and "word-shingle" in result.stderr
    simhash_result = run("hash", text, "--kind", "simhash", "--weights", "tf")
    assert simhash_result.stdout.strip() == f"0x{simdb.simhash(text):016x}" and "simhash" in simhash_result.stderr
    help_text = flat_help("hash")
    assert "Fixed when add creates the database" not in help_text and "--kind" in help_text and "--weights" in help_text
    assert "Fixed when add creates the database" in flat_help("add")
    bad = run("hash", text, "--kind", "superhash")
    assert bad.exit_code == 2 and "superhash" in bad.stderr and "Traceback" not in bad.output


# -- demo --------------------------------------------------------------------------------------------------


def test_demo_finds_every_planted_pair_and_no_other(tmp_path: Path) -> None:
    result = run("demo", "--dir", tmp_path / "demo", "--workers", "1", "--no-progress")
    assert result.exit_code == 0, result.output
    assert "Found 40 of the 40 planted pairs" in result.stdout and ", and 0 other pairs." in result.stdout
    collection = demo_generator.generate(300, copies=40)
    docs = tmp_path / "demo" / "docs"
    planted = {frozenset((str(docs / a), str(docs / b))) for a, b in collection.planted}
    found = {
        frozenset(pair) for pair in reported_pairs(run("pairs", "--db", tmp_path / "demo" / "db", "--json").stdout)
    }
    assert found == planted


def test_pairs_json_streams_into_head_and_ends_quietly(graded: tuple[str, list[tuple[str, str]]]) -> None:
    """``simdb pairs | head -1`` ends quietly after the first line."""
    db, _ = graded
    environment = {"PYTHONPATH": str(REPOSITORY), "PATH": "/usr/bin:/bin"}
    completed = subprocess.run(
        f"{sys.executable} -m simdb_cli.app pairs -t 0.3 --json --db {db} | head -1",
        shell=True,
        capture_output=True,
        text=True,
        env=environment,
        timeout=120,
        check=False,
    )
    assert completed.returncode == 0 and completed.stderr == ""
    assert set(json.loads(completed.stdout)) == {"key_a", "key_b", "similarity", "distance"}


def test_texts_of_a_refused_batch_are_retried_as_texts_and_keep_their_sketches(tmp_path: Path) -> None:
    """A batch refused for one item is stored in halves; the texts are retried as texts, so
    every stored document keeps its sketch (a retried fingerprint alone would have none,
    and its pairs would fall back to the fingerprint's estimate)."""
    rows: list[dict[str, Any]] = [
        {"id": f"doc-{number}", "text": " ".join(words(700 + number, 80))} for number in range(12)
    ]
    rows[5]["deep"] = json.loads("[" * 150 + "]" * 150)  # meta the database refuses
    rows.append({"id": "doc-0-copy", "text": rows[0]["text"].upper()})
    source = tmp_path / "docs.jsonl"
    source.write_text("".join(json.dumps(row) + "\n" for row in rows))
    db = str(tmp_path / "db")
    result = run("add", "--jsonl", source, "--db", db, "--workers", "1")
    assert result.exit_code == 2 and f"{source}:6" in result.stderr, result.output
    info = json_lines(run("stats", "--db", db, "--json").stdout)[0]
    assert info["documents"] == 12 and info["sketch_count"] == 12
    documents = [(row["id"], row["text"]) for row in rows if row["id"] != "doc-5"]
    assert_same_pairs(
        reported_pairs(run("pairs", "-t", "0.3", "--db", db, "--json").stdout), oracle_pairs(db, documents, 0.3)
    )


def test_if_new_says_when_its_threshold_reaches_past_the_index(tmp_path: Path) -> None:
    """--if-new compares a document only with stored ones within the index's k bits: at
    0.7 on a k=5 minhash index that is 7% of the pairs at 0.7, so it says so, naming what
    lists the rest and the -k that would compare them; at the default 0.9 (90% within k)
    it says nothing (an answers probe found the silent gap at 0.7 and 0.8)."""
    (tmp_path / "a.txt").write_text("the committee met on tuesday to review the budget for the coming year")
    db = tmp_path / "db"
    quiet = run("add", tmp_path / "a.txt", "--if-new", "--db", db)
    assert quiet.exit_code == 0 and "note" not in quiet.stderr
    loose = run("add", tmp_path / "a.txt", "--if-new", "-t", "0.7", "--db", db)
    assert loose.exit_code == 0 and "simdb clusters --mode leaders -t 0.7" in loose.stderr and "-k 15" in loose.stderr
    assert "7% of pairs at similarity 0.7" in loose.stderr
    # The library warns of the same (IfNewReachWarning); the command says it once, its way.
    (tmp_path / "b.txt").write_text("the committee met on monday to review the budget for the coming year")
    command = [sys.executable, "-m", "simdb_cli.app", "add", str(tmp_path / "b.txt"), "--if-new", "-t", "0.7"]
    process = subprocess.run([*command, "--db", str(db)], capture_output=True, text=True, timeout=120)
    assert process.returncode == 0 and "Warning" not in process.stderr
    assert process.stderr.count("\n") == 1 and process.stderr.startswith("simdb: note: --if-new"), process.stderr
    # A new user's pass: the cost of the -k it names was said three ways ("100 stored
    # documents per 100" here, "400 entries per 100 documents" where such a database is made).
    # One way now: table entries read per probe, per 100 stored documents.
    loosest = run("add", tmp_path / "a.txt", "--if-new", "-t", "0.5", "--db", db)
    needed = int(loosest.stderr.split("made with -k ")[1].split()[0])
    made = run("add", tmp_path / "a.txt", "-k", needed, "--db", tmp_path / "wide")
    cost = made.stderr.split("each query reads ")[1].split(";")[0]
    assert cost.endswith("table entries per 100 stored documents") and f"reading {cost} for each one" in loosest.stderr


def test_a_loose_threshold_on_many_documents_says_the_search_is_long(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`pairs -t 0.5` on 200,000 documents ran for ten minutes without a word (a probe
    found it).  Where the cost model's estimate passes LONG_SEARCH_SECONDS (lowered here,
    so that a small database reaches it), pairs and clusters say so first."""
    from simdb_cli import app as cli_app

    rng = random.Random(3)
    with simdb.open(tmp_path / "db") as database:
        database.add_many((f"d{number}", rng.getrandbits(64)) for number in range(3000))
        loose, strict = database.pair_search_seconds(threshold=0.5), database.pair_search_seconds(threshold=0.9)
    assert loose > 2 * strict
    monkeypatch.setattr(cli_app, "LONG_SEARCH_SECONDS", (loose + strict) / 2)
    for command in ("pairs", "clusters"):
        warned = run(command, "-t", "0.5", "--db", tmp_path / "db")
        assert "-t 0.5 on 3,000 documents means a long search" in warned.stderr, warned.stderr
        quiet = run(command, "-t", "0.9", "--db", tmp_path / "db")
        assert "long search" not in quiet.stderr
    by_k = run("pairs", "-k", "20", "-t", "0.99", "--db", tmp_path / "db")  # -k sets the radius: name it
    assert "-k 20 on 3,000 documents means a long search" in by_k.stderr and "a lower -k" in by_k.stderr


def test_a_new_database_with_a_costly_k_says_what_each_query_reads(tmp_path: Path) -> None:
    """`add -k 40` built a 41-table index of 1-bit prefixes without a word: every query
    then reads each table's half (a probe found it).  A -k whose probes read a tenth or more
    of the documents per query is noted when the database is made; the default is not."""
    (tmp_path / "a.txt").write_text("one two three four five six seven eight")
    costly = run("add", tmp_path / "a.txt", "-k", "40", "--db", tmp_path / "k40")
    assert costly.exit_code == 0 and "-k 40 makes 41 tables with prefixes as short as 1 bit:" in costly.stderr
    for k in ("5", "9"):
        plain = run("add", tmp_path / "a.txt", "-k", k, "--db", tmp_path / f"k{k}")
        assert plain.exit_code == 0 and "tables with prefixes" not in plain.stderr
    again = run("add", tmp_path / "a.txt", "-k", "40", "--db", tmp_path / "k40")  # not made now: no note
    assert "tables with prefixes" not in again.stderr
