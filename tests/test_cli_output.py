"""Machine-readable output (--format table|tsv|csv|json, --no-header), pairs --sort,
clusters' spread, and the get and keys commands: every output parsed back (CSV with the csv
module) and compared with the library's answer for the same database, awkward keys included."""

from __future__ import annotations

import csv
import io
import json
import random
import subprocess
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from simdb_cli import output
from simdb_cli.app import app
from typer.testing import CliRunner

import simdb

runner = CliRunner()

#: Keys that a naive CSV or TSV writer gets wrong: separators, quotes, line breaks, Unicode.
AWKWARD_KEYS = [
    "plain",
    "with,comma",
    'with "quotes"',
    "with\nnewline",
    "with\r\ncrlf",
    "lone\rreturn",  # a record end to a CSV reader, though not to Python's csv writer
    "ünïcödé ключ",
    " leading and trailing ",
    "semi;colon",
]
#: A key TSV cannot carry.
TAB_KEY = "with\ttab"


def run(*args: str, input: str | None = None, env: dict[str, str] | None = None) -> Any:
    return runner.invoke(app, [str(arg) for arg in args], input=input, env=env, catch_exceptions=False)


def stdout(result: Any) -> str:
    """The command's stdout as written (the runner's ``.stdout`` turns CR LF into LF)."""
    return str(result.stdout_bytes.decode("utf-8"))


def csv_rows(text: str) -> list[list[str]]:
    return list(csv.reader(io.StringIO(text, newline="")))


def tsv_rows(text: str) -> list[list[str]]:
    return [line.split("\t") for line in text.splitlines()]


def near(base: int, bits: list[int]) -> int:
    for bit in bits:
        base ^= 1 << bit
    return base


def fill(path: str, keys: list[str], seed: int = 7) -> None:
    """Groups of three keys whose fingerprints lie 0-3 bits apart (pairs and clusters at
    -k 4), each with a meta; groups far apart from each other."""
    rng = random.Random(seed)
    items = []
    for start in range(0, len(keys), 3):
        base = rng.getrandbits(64)
        for offset, key in enumerate(keys[start : start + 3]):
            fingerprint = near(base, rng.sample(range(64), offset))
            items.append((key, fingerprint, {"n": len(items), "key": key}))
    with simdb.open(path, k=4) as database:
        database.add_many(items)


@pytest.fixture
def awkward_db(tmp_path: Path) -> str:
    path = str(tmp_path / "awkward")
    # Groups of three: "lonely" is alone in the last.
    fill(path, [*AWKWARD_KEYS, "other-1", "other-2", "other-3", "lonely"])
    return path


@pytest.fixture
def tab_db(tmp_path: Path) -> str:
    path = str(tmp_path / "tab")
    fill(path, ["a", TAB_KEY, "b"])
    return path


def pair_order(pair: simdb.Pair) -> tuple[float, int, str, str]:
    return (-pair.similarity, pair.distance, pair.key_a, pair.key_b)


def library_pairs(path: str, k: int = 4, **options: Any) -> list[simdb.Pair]:
    with simdb.open(path, readonly=True) as database:
        return sorted(database.pairs(k, **options), key=pair_order)


# -- pairs -------------------------------------------------------------------------------------


def test_pairs_csv_matches_the_library_with_awkward_keys(awkward_db: str) -> None:
    result = run("pairs", "-k", "4", "--format", "csv", "--db", awkward_db)
    assert result.exit_code == 0, result.output
    header, *rows = csv_rows(stdout(result))
    assert header == ["similarity", "distance", "key_a", "key_b"]
    expected = library_pairs(awkward_db)
    assert len(expected) >= 6
    assert [(float(s), int(d), a, b) for s, d, a, b in rows] == [
        (pair.similarity, pair.distance, pair.key_a, pair.key_b) for pair in expected
    ]
    assert any("\n" in pair.key_a + pair.key_b for pair in expected)  # the quoting was exercised


def test_pairs_tsv_matches_the_library_and_no_header_drops_the_header(tmp_path: Path) -> None:
    path = str(tmp_path / "plain")
    fill(path, ["a,1", 'b"2', "c 3", "d", "e", "f"])
    with_header = run("pairs", "-k", "4", "--format", "tsv", "--db", path)
    without = run("pairs", "-k", "4", "--format", "tsv", "--no-header", "--db", path)
    assert with_header.exit_code == without.exit_code == 0
    header, *rows = tsv_rows(with_header.stdout)
    assert header == ["similarity", "distance", "key_a", "key_b"]
    assert tsv_rows(without.stdout) == rows
    assert [(float(s), int(d), a, b) for s, d, a, b in rows] == [
        (pair.similarity, pair.distance, pair.key_a, pair.key_b) for pair in library_pairs(path)
    ]
    assert csv_rows(stdout(run("pairs", "-k", "4", "--format", "csv", "--no-header", "--db", path)))[0] != header


def test_tsv_leaves_out_a_key_with_a_tab_names_it_and_prints_the_rest(tab_db: str) -> None:
    result = run("pairs", "-k", "4", "--format", "tsv", "--db", tab_db)
    assert result.exit_code == 2
    assert repr(TAB_KEY) in result.stderr and "--format csv" in result.stderr
    assert "2 records left out" in result.stderr
    assert TAB_KEY not in result.stdout  # no line of TSV was broken by it
    header, *rows = tsv_rows(result.stdout)
    assert header == ["similarity", "distance", "key_a", "key_b"]
    expected = [pair for pair in library_pairs(tab_db) if TAB_KEY not in (pair.key_a, pair.key_b)]
    assert len(expected) == 1
    assert [(float(s), int(d), a, b) for s, d, a, b in rows] == [
        (pair.similarity, pair.distance, pair.key_a, pair.key_b) for pair in expected
    ]
    as_csv = run("pairs", "-k", "4", "--format", "csv", "--db", tab_db)
    assert as_csv.exit_code == 0
    assert {key for row in csv_rows(stdout(as_csv))[1:] for key in row[2:]} >= {TAB_KEY}


def test_json_and_format_json_agree_and_conflicts_are_usage_errors(awkward_db: str) -> None:
    as_json = run("pairs", "-k", "4", "--json", "--db", awkward_db)
    as_format = run("pairs", "-k", "4", "--format", "json", "--db", awkward_db)
    assert as_json.exit_code == as_format.exit_code == 0
    assert as_json.stdout == as_format.stdout
    records = [json.loads(line) for line in as_json.stdout.splitlines()]
    assert records == [
        {"key_a": p.key_a, "key_b": p.key_b, "similarity": p.similarity, "distance": p.distance}
        for p in library_pairs(awkward_db)
    ]
    conflict = run("pairs", "-k", "4", "--json", "--format", "csv", "--db", awkward_db)
    assert conflict.exit_code == 2 and "--json" in conflict.stderr
    unknown = run("pairs", "-k", "4", "--format", "xml", "--db", awkward_db)
    assert unknown.exit_code == 2 and "xml" in unknown.stderr


def test_pairs_sort_key_and_similarity_are_total_orders(awkward_db: str) -> None:
    by_key = csv_rows(stdout(run("pairs", "-k", "4", "--sort", "key", "--format", "csv", "--db", awkward_db)))[1:]
    with simdb.open(awkward_db, readonly=True) as database:
        found = list(database.pairs(4))
    assert [(a, b) for _, _, a, b in by_key] == sorted((pair.key_a, pair.key_b) for pair in found)
    unsorted = stdout(run("pairs", "-k", "4", "--sort", "none", "--format", "csv", "--db", awkward_db))
    assert sorted(csv_rows(unsorted)[1:]) == sorted(by_key)
    assert run("pairs", "--sort", "random", "--db", awkward_db).exit_code == 2


def test_pairs_output_is_the_same_on_every_run_and_with_one_worker(tmp_path: Path) -> None:
    """Enough fingerprints for the search to run on threads (in no particular order): the
    default order is still one order, that of the single-threaded library search sorted."""
    path = str(tmp_path / "many")
    rng = random.Random(3)
    roots = [rng.getrandbits(64) for _ in range(40_000)]
    items = [(f"doc-{i}", near(rng.choice(roots), rng.sample(range(64), rng.randint(0, 2)))) for i in range(60_000)]
    with simdb.open(path, k=3) as database:
        database.add_many(items)
        single = sorted(database.pairs(2, workers=1), key=pair_order)
    first = run("pairs", "-k", "2", "--format", "csv", "--db", path)
    second = run("pairs", "-k", "2", "--format", "csv", "--db", path)
    assert first.exit_code == 0
    assert first.stdout == second.stdout
    rows = csv_rows(stdout(first))[1:]
    assert len(rows) == len(single) > 1000
    assert [(float(s), int(d), a, b) for s, d, a, b in rows] == [
        (pair.similarity, pair.distance, pair.key_a, pair.key_b) for pair in single
    ]


def test_pairs_histogram_in_csv_matches_the_library(awkward_db: str) -> None:
    result = run("pairs", "--histogram", "-k", "4", "--format", "csv", "--db", awkward_db)
    header, *rows = csv_rows(stdout(result))
    assert header == ["distance", "pairs"]
    with simdb.open(awkward_db, readonly=True) as database:
        expected = database.pair_histogram(4, by="distance")
    assert {int(distance): int(count) for distance, count in rows} == expected


def test_histograms_honour_no_header_and_keep_one_column_order_in_every_format(awkward_db: str) -> None:
    # Found by a new-user probe: the charts printed their header under --no-header, and the
    # clusters chart's columns were threshold, documents, clusters in the table but
    # threshold, clusters, documents in TSV, CSV and JSON.
    for command in (["pairs", "--histogram", "-k", "4"], ["clusters", "--histogram", "-t", "0.5"]):
        chart = run(*command, "--db", awkward_db).stdout.splitlines()
        bare = run(*command, "--no-header", "--db", awkward_db).stdout.splitlines()
        assert bare == chart[1:] and len(bare) > 1
        table_columns = chart[0].split()
        tsv_columns = run(*command, "--format", "tsv", "--db", awkward_db).stdout.splitlines()[0].split("\t")
        json_columns = list(json.loads(run(*command, "--json", "--db", awkward_db).stdout.splitlines()[0]))
        assert table_columns == tsv_columns == json_columns, (table_columns, tsv_columns, json_columns)


# -- clusters ----------------------------------------------------------------------------------


def spread_oracle(path: str, k: int, singletons: bool = False) -> list[tuple[list[str], float | None, float | None]]:
    """Each cluster's members (from the library), the smallest similarity of the pairs of
    db.pairs() with both keys in it, and the smallest similarity of its first key to
    another, from every pair (k=64), computed here."""
    with simdb.open(path, readonly=True) as database:
        groups = list(database.clusters(k, singletons=singletons))
        found = list(database.pairs(k))
        every = {(pair.key_a, pair.key_b): pair.similarity for pair in database.pairs(64, include_featureless=True)}
    answer = []
    for keys in groups:
        members = set(keys)
        inside = [pair.similarity for pair in found if pair.key_a in members and pair.key_b in members]
        reach = [every.get((keys[0], key), every.get((key, keys[0]))) for key in keys[1:]]
        answer.append((keys, min(inside) if inside else None, min(reach) if reach else None))
    return answer


def test_clusters_show_their_weakest_link_in_every_format(awkward_db: str) -> None:
    expected = spread_oracle(awkward_db, 4, singletons=True)
    assert any(spread is not None and spread < 1 for _, spread, _ in expected)
    assert any(spread is None for _, spread, _ in expected)  # "lonely", a singleton
    as_json = run("clusters", "-k", "4", "--singletons", "--json", "--db", awkward_db)
    assert as_json.exit_code == 0
    records = [json.loads(line) for line in as_json.stdout.splitlines()]
    assert [(r["members"], r["min_similarity"], r["to_representative"]) for r in records] == expected
    as_csv = csv_rows(stdout(run("clusters", "-k", "4", "--singletons", "--format", "csv", "--db", awkward_db)))
    assert as_csv[0] == ["cluster", "size", "min_similarity", "to_representative", "key"]
    rebuilt: dict[int, list[str]] = {}
    spreads: dict[int, tuple[float | None, float | None]] = {}
    for number, size, spread, reach, key in as_csv[1:]:
        rebuilt.setdefault(int(number), []).append(key)
        spreads[int(number)] = (float(spread) if spread else None, float(reach) if reach else None)
        assert int(size) == len(expected[int(number) - 1][0])
    assert [(rebuilt[n], *spreads[n]) for n in sorted(rebuilt)] == expected
    table = run("clusters", "-k", "4", "--db", awkward_db).stdout
    for keys, spread, reach in expected:
        if spread is not None:
            assert f"weakest link {spread:.3f}" in table
        if reach is not None and len(keys) > 2:
            assert f"least similar to it {reach:.3f}" in table


def test_clusters_with_spread_matches_the_pairs_in_threshold_mode(tmp_path: Path) -> None:
    path = str(tmp_path / "texts")
    rng = random.Random(5)
    words = [f"w{i}" for i in range(3000)]
    texts = []
    for group in range(6):
        base = rng.choices(words, k=120)
        for copy in range(3):
            text = list(base)
            for _ in range(copy * 4):
                text[rng.randrange(len(text))] = rng.choice(words)
            texts.append((f"g{group}-c{copy}", " ".join(text)))
    with simdb.open(path) as database:
        database.add_texts(texts)
        spread = list(database.clusters_with_spread(threshold=0.6))
        found = list(database.pairs(threshold=0.6))
        every = {(pair.key_a, pair.key_b): pair.similarity for pair in database.pairs(64)}
        assert [cluster.keys for cluster in spread] == list(database.clusters(threshold=0.6))
    assert spread
    for cluster in spread:
        inside = [p.similarity for p in found if p.key_a in cluster.keys and p.key_b in cluster.keys]
        assert cluster.min_similarity == min(inside)
        assert cluster.to_representative == min(every[(cluster.keys[0], key)] for key in cluster.keys[1:])


def test_a_chained_cluster_says_how_far_it_reaches_from_its_representative(tmp_path: Path) -> None:
    """A revision chain (each text a few words from the one before) is one cluster, though
    its ends are far apart; the weakest link (0.9 and up) looked like a guarantee that the
    members were near-duplicates of the representative (a probe found it)."""
    rng = random.Random(11)
    words = [f"w{i}" for i in range(5000)]
    text = rng.choices(words, k=300)
    revisions = []
    for number in range(12):
        for _ in range(3):
            text[rng.randrange(len(text))] = rng.choice(words)
        revisions.append((f"rev-{number:02d}", " ".join(text)))
    with simdb.open(tmp_path / "db") as database:
        database.add_texts(revisions)
        (chain,) = database.clusters_with_spread(threshold=0.9)
        first_to_last = simdb.jaccard(revisions[0][1], revisions[-1][1])
    assert chain.keys == [key for key, _ in revisions] and chain.min_similarity >= 0.9
    assert chain.to_representative < 0.8 and abs(chain.to_representative - first_to_last) < 0.15
    shown = run("clusters", "--db", tmp_path / "db").stdout
    assert f"least similar to it {chain.to_representative:.3f}" in shown


# -- query, stats --------------------------------------------------------------------------------


def test_query_csv_matches_the_library(awkward_db: str) -> None:
    with simdb.open(awkward_db, readonly=True) as database:
        target = database.get("with,comma")
        assert target is not None
        matches = database.query(target.fingerprint, 4)
    result = run("query", "--fingerprint", hex(target.fingerprint), "-k", "4", "--format", "csv", "--db", awkward_db)
    assert result.exit_code == 0, result.output
    header, *rows = csv_rows(stdout(result))
    assert header == ["similarity", "distance", "fingerprint", "key"]
    assert [(float(s), int(d), int(f, 16), key) for s, d, f, key in rows] == [
        (m.similarity, m.distance, m.fingerprint, m.key) for m in matches
    ]


def test_stats_as_tsv_names_what_json_names(awkward_db: str) -> None:
    info = json.loads(run("stats", "--json", "--db", awkward_db).stdout)
    header, *rows = tsv_rows(run("stats", "--format", "tsv", "--db", awkward_db).stdout)
    assert header == ["statistic", "value"]
    assert [name for name, _ in rows] == list(info)
    assert dict(rows)["documents"] == str(info["documents"])


# -- get and keys ----------------------------------------------------------------------------------


def test_get_prints_key_fingerprint_and_meta(awkward_db: str) -> None:
    wanted = ["with\nnewline", "with,comma"]
    with simdb.open(awkward_db, readonly=True) as database:
        documents = [database.get(key) for key in wanted]
    result = run("get", *wanted, "--format", "csv", "--db", awkward_db)
    assert result.exit_code == 0, result.output
    header, *rows = csv_rows(stdout(result))
    assert header == ["key", "fingerprint", "meta"]
    assert [(key, int(fingerprint, 16), json.loads(meta)) for key, fingerprint, meta in rows] == [
        (d.key, d.fingerprint, d.meta) for d in documents if d is not None
    ]
    as_json = [json.loads(line) for line in run("get", *wanted, "--json", "--db", awkward_db).stdout.splitlines()]
    assert as_json == [
        {"key": d.key, "fingerprint": f"0x{d.fingerprint:016x}", "meta": d.meta} for d in documents if d is not None
    ]
    table = run("get", "plain", "--db", awkward_db).stdout.splitlines()
    assert table[0].split() == ["key", "fingerprint", "meta"] and table[1].startswith("plain  0x")


def test_get_exits_1_naming_a_key_that_is_not_stored(awkward_db: str) -> None:
    result = run("get", "plain", "missing-key", "--db", awkward_db)
    assert result.exit_code == 1
    assert "missing-key" in result.stderr
    assert "plain" in result.stdout  # the stored one is still shown
    from_stdin = run("get", "-", "--json", "--db", awkward_db, input="plain\nother-1\n")
    assert [json.loads(line)["key"] for line in from_stdin.stdout.splitlines()] == ["plain", "other-1"]


def test_keys_lists_every_key_in_every_form(awkward_db: str) -> None:
    with simdb.open(awkward_db, readonly=True) as database:
        every = list(database.keys())
        prefixed = list(database.keys(prefix="with"))
    nul = run("keys", "-0", "--db", awkward_db)
    assert nul.exit_code == 0
    assert stdout(nul).split("\0")[:-1] == every and stdout(nul).endswith("\0")
    assert stdout(run("keys", "--null", "--prefix", "with", "--db", awkward_db)).split("\0")[:-1] == prefixed
    assert [json.loads(line)["key"] for line in run("keys", "--json", "--db", awkward_db).stdout.splitlines()] == every
    header, *rows = csv_rows(stdout(run("keys", "--format", "csv", "--db", awkward_db)))
    assert header == ["key"] and [row[0] for row in rows] == every
    simple = str(Path(awkward_db).parent / "simple")
    fill(simple, ["a", "b/c", "d"])
    assert run("keys", "--db", simple).stdout.splitlines() == ["a", "b/c", "d"]  # bare: no header line
    none = run("keys", "--prefix", "zzz", "--db", simple)
    assert none.exit_code == 1 and "zzz" in none.stderr
    assert run("keys", "-0", "--format", "csv", "--db", simple).exit_code == 2


def test_no_two_keys_look_alike_in_a_table_and_keys_into_remove_removes_only_what_it_names(tmp_path: Path) -> None:
    """Found by a new-user probe: a key with a line break and one with a backslash and an
    "n" both printed as new\\nline, so `keys | grep new | remove -` removed the second for
    the first.  A key that needs escapes is printed quoted as a shell's $'...', which bash,
    remove - and get - read back as the key."""
    db = str(tmp_path / "db")
    newline, backslash, tab, plain = "new\nline", "new\\nline", "tab\tkey", "it's"
    # A review found two more: a key that is itself quoted, and a C1 control (bash reads
    # "\x85" as a byte, "\u0085" as the character).
    quoted_itself, c1 = "$'new\\nline'", "next\x85line"
    fill(db, [newline, backslash, tab, plain, quoted_itself, c1])
    listed = run("keys", "--db", db).stdout.splitlines()
    assert len(set(listed)) == 6
    assert backslash in listed and plain in listed  # keys without control characters are printed bare
    quoted = [line for line in listed if line.startswith("$'")]
    assert len(quoted) == 4
    for line in quoted:  # bash's own reading of each quoted line is the key
        read_back = subprocess.run(["bash", "-c", f"printf %s {line}"], capture_output=True, text=True, check=True)
        assert read_back.stdout in (newline, tab, quoted_itself, c1)
    pairs_table = run("pairs", "-k", "4", "--db", db).stdout
    assert "$'new\\nline'" in pairs_table and "$'tab\\tkey'" in pairs_table
    removed = run("remove", "-", "--db", db, input="\n".join(line for line in listed if "new" in line) + "\n")
    assert removed.exit_code == 0
    with simdb.open(db, readonly=True) as database:
        # remove reads a quoted line as the key it stands for: the three "new" keys went
        assert sorted(database.keys()) == sorted([tab, plain, c1])


@settings(max_examples=300, deadline=None)
@given(st.text())
def test_a_shown_text_is_one_line_and_reads_back_as_itself(text: str) -> None:
    line = output.shown(text)
    assert len(line.splitlines()) <= 1 and output.unshown(line) == text
    assert line == text or line.startswith("$'")


def test_tsv_and_csv_print_their_header_over_no_records_in_every_command(tmp_path: Path) -> None:
    """With nothing found, clusters and query --file printed their TSV or CSV header while
    pairs and a text query printed nothing (a probe found it): a header is the file's
    schema, so every command prints it, and exits 1 as before."""
    db = tmp_path / "db"
    (tmp_path / "q.txt").write_text("a query with words found in no stored text at all")
    with simdb.open(db) as database:
        database.add_texts([("one", "alpha beta gamma delta epsilon"), ("two", "zeta eta theta iota kappa lambda")])
    commands = {
        "pairs": (["pairs"], "similarity,distance,key_a,key_b"),
        "clusters": (["clusters"], "cluster,size,min_similarity,to_representative,key"),
        "query": (["query", "omicron pi rho sigma tau", "-t", "0.9"], "similarity,distance,fingerprint,key"),
        "query --file": (["query", "--file", tmp_path / "q.txt", "-t", "0.9"], "similarity,distance,fingerprint,key"),
        "keys": (["keys", "--prefix", "none-such"], "key"),
    }
    for name, (arguments, header) in commands.items():
        for separator, file_format in ((",", "csv"), ("\t", "tsv")):
            result = run(*arguments, "--format", file_format, "--db", db)
            assert result.exit_code == 1, (name, result.output)
            assert result.stdout.replace(separator, ",").startswith(header) and len(result.stdout.splitlines()) == 1, (
                name,
                result.stdout,
            )


def test_clusters_mode_leaders_never_chains_and_a_bad_mode_prints_nothing(tmp_path: Path) -> None:
    """A chain a-b-c at -k 2 (a and c 4 bits apart) is one component, holding c, which is no
    near-duplicate of its representative a; --mode leaders gives a its near-duplicate b
    and leaves c alone."""
    db = str(tmp_path / "chain")
    with simdb.open(db, k=4) as database:
        database.add_many([("a", 0), ("b", 0b11), ("c", 0b1111), ("far", 2**63 - 1)])
    components = [json.loads(line) for line in run("clusters", "-k", "2", "--json", "--db", db).stdout.splitlines()]
    assert [cluster["members"] for cluster in components] == [["a", "b", "c"]]
    leaders = [
        json.loads(line)
        for line in run("clusters", "-k", "2", "--mode", "leaders", "--json", "--db", db).stdout.splitlines()
    ]
    assert [cluster["members"] for cluster in leaders] == [["a", "b"]]
    with_singletons = run("clusters", "-k", "2", "--mode", "leaders", "--singletons", "--format", "csv", "--db", db)
    assert [row[-1] for row in csv_rows(stdout(with_singletons))[1:]] == ["a", "b", "c", "far"]
    refused = run("clusters", "--mode", "star", "--format", "tsv", "--db", db)
    assert refused.exit_code == 2 and refused.stdout == "" and "--mode star" in refused.stderr


def test_table_columns_line_up_in_terminal_cells_for_wide_characters(tmp_path: Path) -> None:
    """A new-user probe: CJK keys misaligned table columns, their width counted in
    characters where a terminal gives each two cells."""
    from rich.cells import cell_len

    db = tmp_path / "db"
    with simdb.open(db) as database:
        database.add_many([("東京の記事", 1), ("ab", 2), ("e\u0301t\u0301e\u0301", 3)])
    result = run("get", "東京の記事", "ab", "e\u0301t\u0301e\u0301", "--db", db)
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    starts = {cell_len(line[: line.index("0x")]) for line in lines[1:]}
    assert len(starts) == 1 and cell_len(lines[0][: lines[0].index("fingerprint")]) in starts
