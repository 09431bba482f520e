"""Misuse of the library API: each mistake raises a SimdbError naming what was wrong, and
leaves nothing half-made on disk or in the database."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tracemalloc

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import simdb
import simdb.config
from simdb.codec import MAX_DEPTH
from simdb.keys import parse_fingerprint
from simdb.plan import MAX_TABLES, TARGET_LEADING_BITS, TablePlan
from tests.conftest import as_items, brute_force_query

# -- opening ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "arguments",
    [
        {"fingerprinter": simdb.Fingerprinter(bits=128, kind="simhash", weights="tf")},
        {"fingerprinter": simdb.Fingerprinter(bits=32, kind="simhash", weights="tf")},
        {"fingerprinter": "english"},
        {"k": 64},
        {"k": -1},
        {"k": "3"},
        {"k": 3.0},
        {"k": 3, "blocks": 3},
        {"blocks": True},
        {"map_size": "big"},
        {"map_size": -5},
    ],
    ids=repr,
)
def test_a_refused_open_leaves_no_database_behind(db_path, arguments) -> None:
    with pytest.raises(simdb.InvalidInputError):
        simdb.open(db_path, **arguments)
    assert not db_path.exists()
    with simdb.open(db_path) as db:  # the path is still free for a good open
        assert (db.k, db.plan.blocks) == (5, 6) and db.fingerprinter is None  # the defaults


@pytest.mark.parametrize("path", [None, 5, b"bytes"])
def test_a_path_of_the_wrong_type_is_refused(path) -> None:
    with pytest.raises(simdb.InvalidInputError, match="path"):
        simdb.open(path)


def test_create_false_never_sets_up_a_database(db_path) -> None:
    db_path.mkdir()
    (db_path / "CURRENT").write_text("data-000001.mdb\n")  # a creation interrupted early
    with pytest.raises(simdb.NotADatabaseError, match="no simdb database yet.*create=True"):
        simdb.open(db_path, create=False)
    with simdb.open(db_path) as db:  # an ordinary open finishes the creation
        db.add("a", 1)
        assert db.check()


def test_the_same_path_twice_in_one_process_says_why(db_path) -> None:
    with simdb.open(db_path):
        with pytest.raises(simdb.StorageError, match="already open in this process.*share the Database"):
            simdb.open(db_path, readonly=True)


@pytest.mark.parametrize("damage", ["missing", "empty"])
def test_a_later_generation_that_is_missing_or_empty_is_damage_not_a_fresh_start(db_path, damage: str) -> None:
    with simdb.open(db_path) as db:
        db.add_many(as_items(range(50)))
        db.compact()
        generation = db._storage.path / db._storage.generation
    assert generation.name != "data-000001.mdb"
    if damage == "missing":
        generation.unlink()
    else:
        generation.write_bytes(b"")
    for readonly in (False, True):
        with pytest.raises(simdb.CorruptDatabaseError, match=damage):
            simdb.open(db_path, readonly=readonly)
    assert generation.exists() == (damage == "empty")  # nothing was made in its place


@pytest.mark.parametrize("k", [12, 20, 40, 63])
def test_large_k_gets_a_default_plan_with_no_false_negatives(tmp_path, k: int) -> None:
    plan = TablePlan.create(k)
    assert len(plan.tables) <= MAX_TABLES
    values = [(1 << 64) - 1, 0, *range(1, 200, 7), *(((1 << bits) - 1) << (64 - bits) for bits in range(1, 64, 5))]
    stored = dict(as_items(values))
    with simdb.open(tmp_path / "db", k=k) as db:
        db.add_many(stored.items())
        for query in (0, (1 << 64) - 1, 0x5555_5555_5555_5555):
            assert sorted((m.key, m.distance) for m in db.query(query)) == brute_force_query(stored, query, k)


def test_every_k_has_a_default_plan_within_the_table_limit() -> None:
    for k in range(64):
        plan = TablePlan.create(k)
        assert len(plan.tables) <= MAX_TABLES
        if k <= 11:  # up to here some plan reaches the target prefix within the limit
            assert min(table.leading_bits for table in plan.tables) >= TARGET_LEADING_BITS


def test_a_new_database_keeps_to_the_table_limit_and_older_larger_plans_still_open(tmp_path, monkeypatch) -> None:
    """Found by an adversarial probe: k=10 (3,003 tables of some 30 sub-databases each) took
    34 s to create an empty database and 51 s per query.  A new database now gets a plan
    of at most MAX_DATABASE_TABLES tables (or a clear error for blocks that need more); a
    database made earlier with more keeps its plan and works."""
    for k in (9, 10, 16):
        with simdb.open(tmp_path / f"k{k}", k=k) as db:
            assert db.stats()["tables"] <= simdb.config.MAX_DATABASE_TABLES
    with pytest.raises(simdb.InvalidInputError, match="tables"):
        simdb.open(tmp_path / "too-many", k=8, blocks=14)
    assert not (tmp_path / "too-many").exists()
    stored = dict(as_items(range(0, 1 << 20, 4099)))
    with monkeypatch.context() as patch:
        patch.setattr(simdb.config, "MAX_DATABASE_TABLES", MAX_TABLES)
        with simdb.open(tmp_path / "older", k=8) as db:  # 495 tables, as before the limit
            db.add_many(stored.items())
    with simdb.open(tmp_path / "older") as db:
        assert db.stats()["tables"] > simdb.config.MAX_DATABASE_TABLES
        assert sorted((m.key, m.distance) for m in db.query(12345)) == brute_force_query(stored, 12345, 8)


# -- metadata ----------------------------------------------------------------------------------


def nested(depth: int) -> list:
    value: list = []
    for _ in range(depth - 1):
        value = [value]
    return value


def cyclic() -> list:
    value: list = []
    value.append(value)
    return value


@pytest.mark.parametrize(
    ("meta", "message"),
    [
        ({(1, 2): "x"}, "dict key"),
        ({"a": [{frozenset(): 1}]}, "dict key"),
        (nested(MAX_DEPTH + 2), "nested"),
        (cyclic(), "nested"),
    ],
    ids=["tuple key", "frozenset key deep down", "too deep", "cycle"],
)
def test_metadata_that_could_not_be_read_back_is_refused_at_write(db_path, meta, message: str) -> None:
    with simdb.open(db_path) as db:
        db.add("kept", 5, {"fine": [1, 2]})
        with pytest.raises(simdb.InvalidInputError, match=f"meta of key 'bad'.*{message}"):
            db.add("bad", 3, meta)
        for rows in ([("bad", 3, meta), ("other", 4)], [("other", 4), ["bad", 3, meta]]):
            with pytest.raises(simdb.InvalidInputError, match="'bad'"):
                db.add_many(rows)
        assert [document.key for document in db.items()] == ["kept"]
        assert db.query(5)[0].meta == {"fine": [1, 2]}
        assert db.check()


def test_metadata_as_deep_as_allowed_reads_back(db_path) -> None:
    deepest = nested(MAX_DEPTH + 1)
    with simdb.open(db_path) as db:
        db.add("deep", 1, deepest)
        db.add_many([("deep-batch", 2, deepest)])
        assert db.get("deep").meta == deepest and db.get("deep-batch").meta == deepest
        scalar_keys = {"s": 1, 2: "int", 2.5: "float", b"b": "bytes", None: "none", True: "bool"}
        db.add("keys", 3, scalar_keys)
        assert db.get("keys").meta == scalar_keys


# -- collections of items ------------------------------------------------------------------------


def test_one_string_where_a_collection_belongs_is_refused(db_path) -> None:
    with simdb.open(db_path) as db:
        db.add_many([("doc-1", 1), ("d", 2), ("o", 3), ("c", 4), ("1", 5)])
        calls = [
            lambda: db.remove_many("doc-1"),
            lambda: db.query_many("abc"),
            lambda: db.query_many(texts="abc"),
            lambda: db.add_many("ab"),
            lambda: db.add_texts("ab"),
            lambda: simdb.simhash_many("ab"),
            lambda: simdb.simhash_many(b"ab", workers=2),
            lambda: simdb.Fingerprinter(kind="simhash", weights="tf").fit_idf("abc"),
        ]
        for call in calls:
            with pytest.raises(simdb.InvalidInputError, match="not a collection"):
                call()
        for call in (
            lambda: db.remove_many(5),
            lambda: db.query_many(5),
            lambda: db.add_many(5),
            lambda: db.add_texts(5),
            lambda: simdb.simhash_many(None),
        ):
            with pytest.raises(simdb.InvalidInputError, match="not an iterable"):
                call()
        assert len(db) == 5


def test_query_sketches_must_pair_with_the_fingerprints(db_path) -> None:
    with simdb.open(db_path) as db:
        db.add_texts([("a", "the cat sat on the mat today")])
        fingerprint, sketch = db.fingerprinter.fingerprint_and_sketch("the cat sat on the mat today")
        assert db.query_many([fingerprint], sketches=[sketch])[0][0].key == "a"
        refused = {
            "2 sketches were given for 1 fingerprints": lambda: db.query_many([fingerprint], sketches=[sketch, sketch]),
            "query 0 has sketch=b'ab'": lambda: db.query_many([fingerprint], sketches=[b"ab"]),
            "query 0 has sketch='x'": lambda: db.query_many([fingerprint], sketches=["x"]),
            "query 0 has the empty sketch of a featureless text": lambda: db.query_many([fingerprint], sketches=[b""]),
            "both sketches= and texts= were given": lambda: db.query_many(texts=["a"], sketches=[sketch]),
            "sketches=b'ab' is one bytes, not a collection": lambda: db.query_many([fingerprint], sketches=b"ab"),
        }
        for message, call in refused.items():
            with pytest.raises(simdb.InvalidInputError, match=re.escape(message)):
                call()


def test_membership_of_impossible_keys_is_false(db_path) -> None:
    with simdb.open(db_path) as db:
        db.add("a", 1)
        assert "a" in db
        assert "\ud800" not in db and "" not in db and 5 not in db and None not in db


def test_a_huge_key_in_a_batch_is_refused_before_it_is_copied(db_path) -> None:
    huge = "k" * (64 << 20)
    with simdb.open(db_path) as db:
        tracemalloc.start()
        try:
            with pytest.raises(simdb.InvalidKeyError, match="over the"):
                db.add_many([(huge, 1), ("small", 2)])
            peak = tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
        assert peak < 8 << 20
        assert len(db) == 0


@pytest.mark.parametrize("bits", [64.0, True, "64"])
def test_a_setting_of_the_wrong_type_is_refused(bits) -> None:
    with pytest.raises(simdb.InvalidInputError, match="bits"):
        simdb.Fingerprinter(bits=bits, kind="simhash", weights="tf")
    with pytest.raises(simdb.InvalidInputError, match="bits"):
        simdb.simhash("some text", bits=bits)


# -- settings stored by another process ------------------------------------------------------------

STORE_SETTINGS = """
import sys, simdb
with simdb.open(sys.argv[1], fingerprinter=simdb.Fingerprinter(ngram=2, kind="simhash", weights="tf")) as db:
    db.add("theirs", text="words written by the other process")
"""


def test_settings_stored_by_another_process_are_adopted_by_an_open_handle(db_path) -> None:
    with simdb.open(db_path) as db:
        assert db.fingerprinter is None
        run = subprocess.run(
            [sys.executable, "-c", STORE_SETTINGS, str(db_path)], capture_output=True, text=True, timeout=60
        )
        assert run.returncode == 0, run.stderr
        db.add("ours", text="words written by this process")
        assert db.fingerprinter == simdb.Fingerprinter(ngram=2, kind="simhash", weights="tf")
        assert db.get("ours").fingerprint == simdb.simhash("words written by this process", ngram=2, weights="tf")
        assert db.query(text="words written by the other process")[0].key == "theirs"


def test_a_read_only_handle_adopts_settings_stored_after_it_opened(db_path) -> None:
    simdb.open(db_path).close()
    with simdb.open(db_path, readonly=True) as reader:
        run = subprocess.run(
            [sys.executable, "-c", STORE_SETTINGS, str(db_path)], capture_output=True, text=True, timeout=60
        )
        assert run.returncode == 0, run.stderr
        assert reader.query(text="words written by the other process")[0].key == "theirs"


OTHER_SETTINGS = """
import sys, simdb
with simdb.open(sys.argv[1], fingerprinter=simdb.Fingerprinter(features="char", kind="simhash", weights="tf")) as db:
    db.add("theirs", text="words written by the other process")
"""


@pytest.mark.parametrize(("writer", "agrees"), [(STORE_SETTINGS, True), (OTHER_SETTINGS, False)])
def test_a_read_only_handle_given_settings_before_any_are_stored_checks_them_at_first_text(
    db_path, writer: str, agrees: bool
) -> None:
    with simdb.open(db_path) as db:
        db.add("fingerprint-only", 7)
    with simdb.open(
        db_path, readonly=True, fingerprinter=simdb.Fingerprinter(ngram=2, kind="simhash", weights="tf")
    ) as reader:
        assert [m.key for m in reader.query(7)] == ["fingerprint-only"]  # fingerprints need no settings
        with pytest.raises(simdb.FingerprinterError, match="read-only"):
            reader.query(text="anything")
        run = subprocess.run([sys.executable, "-c", writer, str(db_path)], capture_output=True, text=True, timeout=60)
        assert run.returncode == 0, run.stderr
        if agrees:
            assert reader.query(text="words written by the other process")[0].key == "theirs"
        else:
            with pytest.raises(simdb.ConfigMismatchError, match="char"):
                reader.query(text="words written by the other process")


# -- fingerprints written as text ----------------------------------------------------------------

fingerprints = st.integers(0, (1 << 64) - 1)


@settings(max_examples=300)
@given(fingerprints)
def test_parse_fingerprint_reads_every_written_form(value: int) -> None:
    assert parse_fingerprint(f"{value:016x}") == value  # hex even when every digit is 0-9
    assert parse_fingerprint(f"{value:016X}") == value
    assert parse_fingerprint(hex(value)) == value
    if len(str(value)) != 16:  # decimal, unless it looks like 16 hex digits
        assert parse_fingerprint(str(value)) == value
        assert parse_fingerprint(f"  {value:_}\n") == value


@settings(max_examples=100)
@given(fingerprints, st.integers(1, 8))
def test_leading_zeros_past_the_widths_keep_the_value(value: int, zeros: int) -> None:
    """A probe: 0x00000000000000001 was "17 digits, too large for 64 bits"."""
    assert parse_fingerprint("0x" + "0" * zeros + f"{value:x}") == value
    assert parse_fingerprint("0" * (zeros + 20) + str(value)) == value


def test_sixteen_decimal_digits_are_hex() -> None:
    assert parse_fingerprint("0000000000000010") == 16
    assert parse_fingerprint("9709299817409146") == 0x9709299817409146


@pytest.mark.parametrize(
    "text", ["1e5", "ff", "１２３", "", "0x", "0x" + "f" * 17, "f" * 17, "-1", "18446744073709551616", "1.0"]
)
def test_parse_fingerprint_refuses_what_is_neither(text: str) -> None:
    with pytest.raises(simdb.InvalidFingerprintError):
        parse_fingerprint(text)


@pytest.mark.parametrize("value", [5, None, b"ff"])
def test_parse_fingerprint_refuses_non_strings(value) -> None:
    with pytest.raises(simdb.InvalidFingerprintError, match="not a str"):
        parse_fingerprint(value)


# -- bytes-like texts ------------------------------------------------------------------------------


@pytest.mark.parametrize("workers", [1, 2])
def test_bytes_like_texts_are_taken_everywhere_text_is(tmp_path, workers: int) -> None:
    raw = "Grüße aus Köln, und eine zweite Zeile".encode()
    expected = simdb.simhash(raw.decode())
    like = [raw, bytearray(raw), memoryview(raw)]
    assert simdb.simhash_many(iter(like * 200), workers=workers) == [expected] * 600
    expected = simdb.Fingerprinter().fingerprint(raw.decode())  # the database's default settings
    with simdb.open(tmp_path / "db") as db:
        db.add_texts(((f"k{i}", text) for i, text in enumerate(like)), workers=workers)
        assert [document.fingerprint for document in db.items()] == [expected] * 3


def test_workers_beyond_four_per_core_are_taken_down_to_that() -> None:
    # Found by an adversarial probe: --workers 1000 started 972 processes on 2 cores, and
    # --workers 100000 forked until it was killed.
    from simdb.allpairs import resolve_workers

    cap = 4 * (os.cpu_count() or 1)
    assert resolve_workers(10**9) == cap and resolve_workers(1) == 1 and resolve_workers(None) == os.cpu_count()
    texts = [f"text number {n} " * 20 for n in range(50)]
    fingerprinter = simdb.Fingerprinter()
    assert fingerprinter.fingerprint_many(texts, workers=10**6) == fingerprinter.fingerprint_many(texts)


def test_a_path_that_is_not_utf8_is_refused_before_anything_is_made(tmp_path) -> None:
    # Found by an adversarial probe: --db with a non-UTF-8 name ended as "unexpected
    # UnicodeEncodeError" and left a half-made directory behind.
    path = tmp_path / "db\udcff"  # how Python spells the byte 0xff of a file name
    with pytest.raises(simdb.InvalidInputError, match="not valid UTF-8"):
        simdb.open(path)
    assert list(tmp_path.iterdir()) == []


def test_a_path_with_a_nul_is_refused_by_open_and_copy_to(tmp_path) -> None:
    # Found by an adversarial probe: ValueError("embedded null byte"), and TypeError from
    # copy_to(None).
    with pytest.raises(simdb.InvalidInputError, match="NUL"):
        simdb.open(tmp_path / "db\0x")
    with simdb.open(tmp_path / "db") as db:
        db.add("a", 1)
        for path in (tmp_path / "copy\0", None, b"copy"):
            with pytest.raises(simdb.InvalidInputError):
                db.copy_to(path)  # type: ignore[arg-type]
    assert sorted(path.name for path in tmp_path.iterdir()) == ["db"]


@pytest.mark.parametrize("chunk", [0, -1, False, 1.5, None])
def test_a_chunk_that_is_no_positive_int_is_refused_not_looped_on(db_path, chunk) -> None:
    # Found by an adversarial probe: items(chunk=0) never returned.
    with simdb.open(db_path) as db:
        db.add("a", 1)
        for read in (db.items, db.sketched_items):
            with pytest.raises(simdb.InvalidInputError, match="chunk"):
                next(read(chunk=chunk))


def test_an_on_batch_that_cannot_be_called_is_refused_before_any_batch_commits(db_path) -> None:
    # Found by an adversarial probe: the first batch committed, then TypeError.
    with simdb.open(db_path) as db:
        with pytest.raises(simdb.InvalidInputError, match="on_batch"):
            db.add_many([(f"k{i}", i) for i in range(10)], batch_size=3, on_batch=5)  # type: ignore[arg-type]
        assert len(db) == 0
        for call in (db.add_many, db.remove_many):
            items = [("k", 1)] if call is db.add_many else ["k"]
            with pytest.raises(simdb.InvalidInputError, match="batch_size"):
                call(items, batch_size=2**64)  # type: ignore[operator]


def test_default_blocks_takes_numpy_integers_and_refuses_what_is_no_distance() -> None:
    # Found by an adversarial probe: numpy's uint64 wrapped -(m - k) round (40 blocks, not 5).
    import numpy as np

    assert simdb.default_blocks(np.uint64(3)) == simdb.default_blocks(3) == simdb.default_blocks(np.int64(3))
    for bad in (-1, 2**64, None, "5", 1.5):
        with pytest.raises(simdb.DistanceError):
            simdb.default_blocks(bad)  # type: ignore[arg-type]


def test_meta_that_cannot_be_stored_is_named_alone(db_path) -> None:
    # Found by an adversarial probe: the message quoted the whole record, ['m', 12345, {1, 2}],
    # and through a writer with fingerprint 0, which the caller never gave.
    with simdb.open(db_path) as db:
        with pytest.raises(simdb.InvalidInputError) as direct:
            db.add("m", 12345, meta={1, 2})
        with db.writer() as writer, pytest.raises(simdb.InvalidInputError) as buffered:
            writer.add("m", 5, meta={1, 2})
    for raised in (direct, buffered):
        assert raised.value.message.startswith("meta of key 'm' {1, 2} cannot be stored"), raised.value.message


def test_type_errors_name_the_type_without_a_wrong_article(tmp_path) -> None:
    """ "key 5 is a int" (a probe found it), and numpy's names would give "an uint64"."""
    with simdb.open(tmp_path / "db") as db:
        with pytest.raises(simdb.InvalidKeyError, match="key 5 is of type int, not a str"):
            db.add(5, 1)  # type: ignore[arg-type]
        with pytest.raises(simdb.InvalidKeyError, match="is of type uint64, not a str"):
            db.add(np.uint64(5), 1)  # type: ignore[arg-type]
