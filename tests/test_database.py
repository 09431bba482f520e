"""Database behaviour and errors: keys, replacement, duplicates, configuration, format,
check(), compaction, growth and threads."""

from __future__ import annotations

import random
import re
import subprocess
import sys
import threading

import msgpack
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

import simdb
from simdb.database import CONFIG_KEY, FINGERPRINTER_KEY, META
from simdb.fingerprint import SETTINGS_VERSION
from tests.conftest import as_items, brute_force_query, creating_format, flip_bits


def test_open_creates_and_reopens_with_stored_settings(db_path) -> None:
    with simdb.open(db_path, k=4) as db:
        db.add("a", 1)
        assert db.k == 4
    with simdb.open(db_path) as db:
        assert db.k == 4 and db.plan.blocks == simdb.default_blocks(4)
        assert db.get("a") == simdb.Document("a", 1, None)


def test_keys_of_any_unicode_and_length_stay_distinct(db_path) -> None:
    long_url = "https://example.com/" + "path/" * 400
    keys = ["é", "e\u0301", "日本語", "emoji 🚀", long_url, long_url + "x", long_url[:-1], "a\x00b", "a"]
    with simdb.open(db_path) as db:
        db.add_many((key, i) for i, key in enumerate(keys))
        assert len(db) == len(keys)
        for i, key in enumerate(keys):
            assert db.get(key) == simdb.Document(key, i, None)
            assert key in db
        assert list(db.keys()) == keys
        assert db.check()


def test_adding_an_existing_key_replaces_fingerprint_and_meta(db_path) -> None:
    with simdb.open(db_path) as db:
        db.add("doc", 0, meta={"v": 1})
        result = db.add("doc", 2**64 - 1, meta={"v": 2})
        assert (result.added, result.replaced) == (0, 1)
        assert db.get("doc") == simdb.Document("doc", 2**64 - 1, {"v": 2})
        assert db.query(0) == []  # the old table entries are gone
        assert [m.key for m in db.query(2**64 - 1)] == ["doc"]
        assert len(db) == 1 and db.check()


def test_a_key_given_twice_in_one_batch_keeps_the_last(db_path) -> None:
    with simdb.open(db_path) as db:
        result = db.add_many([("a", 1), ("b", 2), ("a", 3, {"last": True})])
        assert (result.added, result.replaced) == (2, 1)
        assert db.get("a") == simdb.Document("a", 3, {"last": True})
        assert db.check()


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.sampled_from("abcde"), st.integers(0, 7)), max_size=12), st.integers(1, 13))
def test_add_many_leaves_what_adding_one_by_one_leaves_whatever_the_batch_size(
    tmp_path_factory, items, batch_size
) -> None:
    root = tmp_path_factory.mktemp("batches")
    with simdb.open(root / "one-by-one") as single, simdb.open(root / "batched") as batched:
        added = replaced = 0
        for key, fingerprint in items:
            result = single.add(key, fingerprint)
            added, replaced = added + result.added, replaced + result.replaced
        result = batched.add_many(items, batch_size=batch_size)
        assert (result.added, result.replaced) == (added, replaced)
        assert list(batched.items()) == list(single.items())  # same values, same insertion order
        assert [m.key for m in batched.query(0, 3)] == [m.key for m in single.query(0, 3)]


def test_identical_fingerprints_all_survive_and_match(db_path) -> None:
    with simdb.open(db_path) as db:
        db.add_many((f"copy-{i}", 42) for i in range(50))
        matches = db.query(42)
        assert [m.key for m in matches] == [f"copy-{i}" for i in range(50)]  # ties in insertion order
        db.remove("copy-7")
        assert len(db.query(42)) == 49


def test_thousands_of_copies_of_one_fingerprint_are_stored_found_and_removed(db_path) -> None:
    """One value repeated far beyond a block's 1,024 entries (empty texts, boilerplate pages
    all fingerprint alike) stays one block of every copy: a batch written as a run, runs
    merged, single and batch queries, removals, check and compaction all handle it."""
    near = 42 ^ 0b101
    with simdb.open(db_path, k=3) as db:
        db.add_many((f"copy-{i}", 42) for i in range(5000))  # one batch: a run of one value
        for round_ in range(4):
            db.add_many((f"near-{round_}-{i}", near) for i in range(6000))  # merged with it
        expected_near = {f"near-{round_}-{i}" for round_ in range(4) for i in range(6000)}
        assert {m.key for m in db.query(42, 0)} == {f"copy-{i}" for i in range(5000)}
        assert {m.key for m in db.query(near, 0)} == expected_near
        copies = {f"copy-{i}" for i in range(5000)}
        answers = db.query_many([42, near, 42 ^ (1 << 60)] * 3, k=2)  # near is 2 bits from 42
        assert all({m.key for m in answer} == copies | expected_near for answer in answers[0::3] + answers[1::3])
        assert all({m.key for m in answer} == copies for answer in answers[2::3])
        db.remove_many(f"copy-{i}" for i in range(0, 5000, 2))
        assert len(db.query(42, 0)) == 2500
        assert db.check().problems == []
        db.compact()
        assert len(db.query(42, 0)) == 2500 and len(db.query_many([near], k=0)[0]) == 24000


def test_distance_exactly_k_matches_and_k_plus_one_does_not(db_path) -> None:
    rng = random.Random(5)
    with simdb.open(db_path, k=3) as db:
        base = rng.getrandbits(64)
        db.add("base", base)
        for distance in range(8):
            probe = flip_bits(base, distance, rng)
            assert bool(db.query(probe)) == (distance <= 3)
            for k in range(4):
                assert bool(db.query(probe, k=k)) == (distance <= k)


def test_query_above_the_index_k_is_answered_exactly(db_path) -> None:
    """A new-user probe: query(k=7) was refused as 'cannot answer exactly' while a threshold
    calling for 7 bits was answered exactly past the index's k.  Now both are, checked
    against a Hamming scan; only a distance that is none (negative, past 64) is refused."""
    rng = random.Random(5)
    stored = {f"doc{i}": flip_bits(0xF0F0_1234_5678_9ABC, rng.randint(0, 12), rng) for i in range(300)}
    with simdb.open(db_path, k=2) as db:
        db.add_many(stored.items())
        for k in (3, 7, 12, 64):
            found = sorted((m.key, m.distance) for m in db.query(0xF0F0_1234_5678_9ABC, k=k))
            assert found == sorted(brute_force_query(stored, 0xF0F0_1234_5678_9ABC, k)), k
            assert [[m.key for m in ms] for ms in db.query_many([0xF0F0_1234_5678_9ABC], k=k)] == [
                [m.key for m in db.query(0xF0F0_1234_5678_9ABC, k=k)]
            ]
        for bad in (-1, 65):
            with pytest.raises(simdb.DistanceError):
                db.query_many([0], k=bad)


def test_query_limit_keeps_the_nearest(db_path) -> None:
    with simdb.open(db_path) as db:
        db.add_many([("far", 0b111), ("near", 0b1), ("exact", 0)])
        assert [m.key for m in db.query(0, limit=2)] == ["exact", "near"]


def test_text_query_orders_by_similarity_without_a_threshold_too(db_path) -> None:
    """Without a threshold, matches came nearest in bits first: among variants a bit or two
    apart that is noise, and `limit=1` missed the most similar document in about half the
    queries (a probe found it).  Most similar first, then nearest, with or without one."""
    rng = random.Random(4)
    vocabulary = [f"w{n}" for n in range(3000)]
    base = [rng.choice(vocabulary) for _ in range(300)]

    def variant(edits: int) -> str:
        words = list(base)
        for _ in range(edits):
            words[rng.randrange(len(words))] = rng.choice(vocabulary)
        return " ".join(words)

    with simdb.open(db_path) as db:
        db.add_texts([(f"v{n}", variant(rng.randint(1, 6))) for n in range(40)])
        for _ in range(10):
            probe = variant(4)
            found = db.query(text=probe)
            assert len(found) > 1
            assert found == sorted(found, key=lambda match: (-match.similarity, match.distance))
            assert db.query(text=probe, limit=1) == found[:1]


@pytest.mark.parametrize(
    ("item", "error"),
    [
        (("k", -1), simdb.InvalidFingerprintError),
        (("k", 2**64), simdb.InvalidFingerprintError),
        (("k", "0xff"), simdb.InvalidFingerprintError),
        (("k", 1.0), simdb.InvalidFingerprintError),
        (("k", True), simdb.InvalidFingerprintError),
        (("", 1), simdb.InvalidKeyError),
        ((b"bytes", 1), simdb.InvalidKeyError),
        (("\ud800", 1), simdb.InvalidKeyError),
        (("k", 1, {"x": object()}), simdb.InvalidInputError),
        (("k",), simdb.InvalidInputError),
        ("k", simdb.InvalidInputError),
    ],
)
def test_bad_items_reject_the_whole_batch(db_path, item, error) -> None:
    with simdb.open(db_path) as db:
        with pytest.raises(error):
            db.add_many([("good-1", 1), item, ("good-2", 2)])
        assert len(db) == 0 and db.check()


def test_fingerprints_accept_numpy_integers_and_parse_hex() -> None:
    import numpy as np

    assert simdb.parse_fingerprint("0xFF") == 255
    assert simdb.parse_fingerprint("00000000000000ff") == 255
    assert simdb.parse_fingerprint("255") == 255
    with pytest.raises(simdb.InvalidFingerprintError, match="zz"):
        simdb.parse_fingerprint("zz")
    with pytest.raises(simdb.InvalidFingerprintError):
        simdb.parse_fingerprint("0x1" + "0" * 16)
    from simdb.keys import check_fingerprint

    assert check_fingerprint(np.uint64(2**64 - 1)) == 2**64 - 1


def test_conflicting_settings_name_both_values(db_path) -> None:
    simdb.open(db_path, k=3).close()
    with pytest.raises(simdb.ConfigMismatchError, match=r"k=5 was given.*created with k=3"):
        simdb.open(db_path, k=5)
    with pytest.raises(simdb.ConfigMismatchError, match=r"blocks=7 was given.*blocks=5"):
        simdb.open(db_path, blocks=7)


def rewrite_stored(db_path, key: bytes, change) -> None:
    """Replace the metadata record ``key`` of the database at ``db_path`` with
    ``change(decoded record)``, behind the API, as damage or a newer simdb would."""
    with simdb.open(db_path) as db:
        storage = db._storage
        value = change(msgpack.unpackb(storage.write(lambda txn: txn.get(key, db=storage.db(META)))))
        storage.write(lambda txn: txn.put(key, msgpack.packb(value), db=storage.db(META)))


def test_newer_format_version_is_refused(db_path) -> None:
    simdb.open(db_path).close()
    rewrite_stored(db_path, CONFIG_KEY, lambda config: {**config, "format_version": simdb.FORMAT_VERSION + 1})
    with pytest.raises(simdb.FormatVersionError, match=f"format version {simdb.FORMAT_VERSION + 1}.*upgrade simdb"):
        simdb.open(db_path)


def test_a_retired_development_format_is_refused_with_the_way_to_convert_it(db_path) -> None:
    """Format 3 (leveled tables of 0.2.0 development builds) is named and refused, with
    export and import as the hint, and the database is left as it was."""
    simdb.open(db_path).close()
    rewrite_stored(db_path, CONFIG_KEY, lambda config: {**config, "format_version": 3})
    before = sorted((path.name, path.read_bytes()) for path in db_path.iterdir() if path.suffix == ".mdb")
    with pytest.raises(simdb.FormatVersionError, match="format version 3.*development build") as refused:
        simdb.open(db_path)
    assert "simdb export" in refused.value.hint and "simdb import" in refused.value.hint
    assert sorted((path.name, path.read_bytes()) for path in db_path.iterdir() if path.suffix == ".mdb") == before


@pytest.mark.parametrize("version", ["1", 0, -1, 1.0, True, None, [1]], ids=repr)
def test_an_invalid_format_version_is_damage_not_a_newer_format(db_path, version) -> None:
    simdb.open(db_path).close()
    rewrite_stored(db_path, CONFIG_KEY, lambda config: {**config, "format_version": version})
    for readonly in (False, True):
        message = rf"configuration stored in .*invalid format_version {re.escape(repr(version))}"
        with pytest.raises(simdb.CorruptDatabaseError, match=message) as caught:
            simdb.open(db_path, readonly=readonly)
        assert caught.value.field == "format_version" and caught.value.path == str(db_path)


def test_paths_that_are_not_databases(tmp_path) -> None:
    (tmp_path / "file").write_text("hello")
    with pytest.raises(simdb.NotADatabaseError, match="is a file"):
        simdb.open(tmp_path / "file")
    (tmp_path / "other").mkdir()
    (tmp_path / "other" / "notes.txt").write_text("x")
    with pytest.raises(simdb.NotADatabaseError, match="no CURRENT"):
        simdb.open(tmp_path / "other")
    with pytest.raises(simdb.NotADatabaseError, match="does not exist"):
        simdb.open(tmp_path / "missing", readonly=True)
    assert not (tmp_path / "missing").exists()


def test_a_foreign_lmdb_file_is_not_a_database(tmp_path) -> None:
    import lmdb

    path = tmp_path / "foreign"
    path.mkdir()
    (path / "CURRENT").write_text("data-000001.mdb\n")
    env = lmdb.open(str(path / "data-000001.mdb"), subdir=False, max_dbs=2)
    with env.begin(write=True) as txn:
        txn.put(b"hello", b"world")
    env.close()
    with pytest.raises(simdb.NotADatabaseError, match="did not write"):
        simdb.open(path)


def test_readonly_refuses_writes(db_path) -> None:
    simdb.open(db_path).close()
    with simdb.open(db_path, readonly=True) as db:
        with pytest.raises(simdb.ReadOnlyError):
            db.add("a", 1)
        with pytest.raises(simdb.ReadOnlyError):
            db.remove("a")
        assert db.query(1) == []


def test_closed_database_raises(db_path) -> None:
    db = simdb.open(db_path)
    db.close()
    db.close()  # idempotent
    with pytest.raises(simdb.DatabaseClosedError):
        db.query(1)


@pytest.mark.parametrize(
    ("version", "tree", "missing", "unexpected"),
    [
        # Format 2: one B-tree per table, named by id.
        (2, b"table.03", "1 entries missing from table.03 (id 1)", "1 entries unexpected in table.03 (id 999)"),
        # Format 4: table 3's recent entries; tables other than 0 are checked by fingerprint.
        (
            4,
            b"t.03.r",
            "1 entries missing from table 3 (fingerprint 0x0004000000000000)",
            "1 entries unexpected in table 3 (fingerprint 0x0000000000000000)",
        ),
    ],
)
def test_check_reports_a_corrupted_table(db_path, version, tree, missing, unexpected) -> None:
    with creating_format(version), simdb.open(db_path) as db:
        db.add_many(as_items(range(0, 2**60, 2**50)))
        assert db.check()
        storage = db._storage
        table = storage.db(tree)
        victim = db.plan.tables[3].permute(2**50).to_bytes(8, "big") + (1).to_bytes(8, "big")

        def corrupt(txn) -> None:
            assert txn.delete(victim, db=table)
            txn.put(b"\x00" * 8 + (999).to_bytes(8, "big"), b"", db=table)

        storage.write(corrupt)
        report = db.check()
        assert not report
        text = "\n".join(report.problems)
        assert missing in text, text
        assert unexpected in text, text


@pytest.mark.parametrize("version", [4, 5])
def test_check_reports_a_key_index_mismatch(db_path, version) -> None:
    """An index entry naming no document, in the B-tree key index (format 4) and in the
    log-structured one (format 5), and a document whose entry is gone."""
    from simdb.keys import index_key, index_key_order

    with creating_format(version), simdb.open(db_path) as db:
        db.add_many([("a", 1), ("b", 2)])
        key_index = db._records.key_index
        assert db.check()
        db._storage.write(lambda txn: key_index.put_new(txn, 7, index_key_order([b"\x01" * 16])))
        problems = db.check().problems
        assert any("key index" in p and "7" in p for p in problems), problems
        db._storage.write(lambda txn: key_index.delete(txn, [index_key(b"a")], [0]))
        problems = db.check().problems
        assert any("key index" in p and ("document 0" in p or "id 0" in p) for p in problems), problems


@pytest.mark.parametrize("stored_id", [b"\x00\x00\x00", b"\x01" + bytes(8)])
def test_a_key_index_id_of_the_wrong_length_is_damage(db_path, stored_id) -> None:
    """Format 4's B-tree key index: an entry whose id is not 8 bytes is reported as damage
    by every lookup, never read as some other document's id."""
    from simdb.key_index import KEYS
    from simdb.keys import index_key

    with creating_format(4), simdb.open(db_path) as db:
        db.add_many([("a", 1), ("b", 2)])
        storage = db._storage
        storage.write(lambda txn: txn.put(index_key(b"b"), stored_id, db=storage.db(KEYS)))
        for attempt in (lambda: db.get("b"), lambda: db.add("b", 3), lambda: db.remove("b")):
            with pytest.raises(simdb.CorruptDatabaseError, match="not 8 bytes long"):
                attempt()
        assert db.get("a") is not None


def test_compaction_shrinks_the_file_after_half_is_removed(db_path) -> None:
    rng = random.Random(1)
    with simdb.open(db_path) as db:
        items = as_items(rng.getrandbits(64) for _ in range(20_000))
        db.add_many(items, batch_size=2_000)
        full = db.compact().bytes_after
        db.remove_many(key for key, _ in items[::2])
        result = db.compact()
        assert result.bytes_after < 0.6 * full
        assert db.check() and len(db) == 10_000
        assert db.stats()["bytes_per_table_entry"] < 30


def test_map_grows_instead_of_failing(db_path) -> None:
    rng = random.Random(2)
    with simdb.open(db_path, map_size=1 << 16) as db:
        stored = dict(as_items(rng.getrandbits(64) for _ in range(1_500)))
        for key, fp in stored.items():  # one small transaction at a time, no reservations
            db.add(key, fp)
        assert db.stats()["map_size"] > 1 << 16
        assert len(db) == 1_500 and db.check()


def test_one_database_serves_many_query_threads(db_path) -> None:
    rng = random.Random(3)
    fps = [rng.getrandbits(64) for _ in range(2_000)]
    stored = dict(as_items(fps))
    errors: list[BaseException] = []
    with simdb.open(db_path, map_size=1 << 16) as db:
        db.add_many(stored.items())

        def reader(seed: int) -> None:
            local = random.Random(seed)
            try:
                for _ in range(200):
                    probe = flip_bits(local.choice(fps), local.randint(0, 3), local)
                    got = sorted((m.key, m.distance) for m in db.query(probe))
                    assert got == brute_force_query(stored, probe, 3)
            except BaseException as exc:  # noqa: BLE001 - collected for the main thread
                errors.append(exc)

        threads = [threading.Thread(target=reader, args=(seed,)) for seed in range(6)]
        for thread in threads:
            thread.start()
        # Meanwhile this thread grows the map and compacts, which must not disturb readers.
        db.add_many(as_items((rng.getrandbits(64) for _ in range(3_000)), prefix="extra"))
        db.compact()
        for thread in threads:
            thread.join()
    assert not errors, errors[0]


def test_stats_describe_the_plan(db_path) -> None:
    with simdb.open(db_path, k=3) as db:
        db.add_many(as_items(range(1000)))
        stats = db.stats()
        assert stats["documents"] == 1000 and stats["tables"] == 10 and stats["k"] == 3
        assert sorted(set(stats["leading_bits"])) == [25, 26]
        assert stats["expected_candidates_per_probe"] == pytest.approx(1000 * (4 / 2**25 + 6 / 2**26) / 10)


@pytest.mark.parametrize("ratio", [0, 10**9], ids=["seek-per-query", "merge-whole-tables"])
def test_query_many_paths_equal_brute_force(db_path, monkeypatch, ratio: int) -> None:
    monkeypatch.setattr(simdb.queries, "MERGE_COST_RATIO", ratio)
    rng = random.Random(11)
    from tests.conftest import clustered

    fps = clustered(1_500, rng, spread=4, bases=30) + [rng.getrandbits(64) for _ in range(500)] + [2**64 - 1, 0]
    stored = dict(as_items(fps))
    with simdb.open(db_path) as db:
        db.add_many(stored.items())
        probes = [flip_bits(rng.choice(fps), rng.randint(0, 5), rng) for _ in range(300)] + [2**64 - 1, 0, 1]
        for k in range(4):
            for probe, found in zip(probes, db.query_many(probes, k=k)):
                assert sorted((m.key, m.distance) for m in found) == brute_force_query(stored, probe, k)
                assert [m.distance for m in found] == sorted(m.distance for m in found)


@pytest.mark.parametrize(
    ("damage", "field"),
    [
        ({"k": "three"}, "k"),
        ({"k": True}, "k"),
        ({"blocks": None}, "blocks"),
        ({"bits": "64"}, "bits"),
        ({"widths": [64]}, "widths"),
    ],
    ids=repr,
)
def test_a_damaged_configuration_is_reported_as_damage(db_path, damage: dict, field: str | None) -> None:
    simdb.open(db_path).close()
    rewrite_stored(db_path, CONFIG_KEY, lambda config: {**config, **damage})
    for arguments in ({}, {"k": 3}):  # given settings are compared only with a sound stored plan
        with pytest.raises(simdb.CorruptDatabaseError, match="configuration|block plan") as caught:
            simdb.open(db_path, **arguments)
        assert caught.value.field == field


@pytest.mark.parametrize(
    "damage",
    [
        {"ngram": "two"},
        {"features": "bogus"},
        {"bits": 65},
        {"version": 0},
        {"split_unspaced": "yes"},
        {"extra": 1},
        {"idf": [1]},
    ],
    ids=repr,
)
def test_damaged_stored_fingerprint_settings_are_a_database_error(db_path, damage: dict) -> None:
    """Settings read from the database are damage (a DatabaseError, exit 3) naming the
    database and the field; the same bad setting given as an argument is bad input."""
    simdb.open(db_path, fingerprinter=simdb.Fingerprinter(kind="simhash", weights="tf")).close()
    rewrite_stored(db_path, FINGERPRINTER_KEY, lambda settings: {**settings, **damage})
    [(name, value)] = damage.items()
    message = f"fingerprint settings stored in {re.escape(str(db_path))} are invalid: .*{name}"
    with pytest.raises(simdb.CorruptDatabaseError, match=message):
        simdb.open(db_path)
    command = [sys.executable, "-m", "simdb_cli.app", "stats", "--db", str(db_path)]
    run = subprocess.run(command, capture_output=True, text=True, timeout=60, check=False)
    assert run.returncode == 3, run.stderr  # a database problem, not bad input
    assert "fingerprint settings stored in" in run.stderr and "Traceback" not in run.stderr, run.stderr
    if name in ("ngram", "features", "bits", "split_unspaced"):
        with pytest.raises(simdb.InvalidInputError, match=name):
            simdb.Fingerprinter(**{name: value})


@pytest.mark.parametrize(
    ("damage", "said"),
    [({"bits": 32}, "are for 32-bit fingerprints, but its index holds 64-bit ones"), (None, "have no kind")],
    ids=["bits", "kind"],
)
def test_stored_settings_that_contradict_the_database_are_damage(db_path, damage: dict | None, said: str) -> None:
    """A probe: a settings record saying 32 bits (valid settings alone, not for a 64-bit
    index), or without its kind (read as SimHash, though every database since format 2
    stores it), opened and passed check, and queries for stored texts found nothing."""
    with simdb.open(db_path, fingerprinter=simdb.Fingerprinter()) as db:
        db.add("a", text="notes from the tuesday meeting about the bridge repair budget")
    if damage is None:
        rewrite_stored(db_path, FINGERPRINTER_KEY, lambda settings: {k: v for k, v in settings.items() if k != "kind"})
    else:
        rewrite_stored(db_path, FINGERPRINTER_KEY, lambda settings: {**settings, **damage})
    with pytest.raises(simdb.CorruptDatabaseError, match=re.escape(said)):
        simdb.open(db_path, readonly=True)


def test_fingerprint_settings_of_a_newer_simdb_ask_for_an_upgrade(db_path) -> None:
    simdb.open(db_path, fingerprinter=simdb.Fingerprinter(kind="simhash", weights="tf")).close()
    rewrite_stored(db_path, FINGERPRINTER_KEY, lambda settings: {**settings, "version": SETTINGS_VERSION + 1})
    with pytest.raises(simdb.FormatVersionError, match="upgrade simdb"):
        simdb.open(db_path)


def test_keys_with_a_prefix_are_the_stored_keys_that_start_with_it(tmp_path) -> None:
    keys = ["docs/a.txt", "docs/b/c.txt", "docsx/d.txt", "other/e.txt", "d"]
    with simdb.open(tmp_path / "db") as db:
        db.add_many((key, number) for number, key in enumerate(keys))
        for prefix in ["", "docs/", "docs", "d", "other/e.txt", "zzz"]:
            assert list(db.keys(prefix)) == [key for key in keys if key.startswith(prefix)]
        assert list(db.keys()) == keys
        with pytest.raises(simdb.InvalidInputError):
            db.keys(b"docs")  # type: ignore[arg-type]


@pytest.mark.parametrize("version", [2, 4, 5, 6])
def test_each_table_format_answers_like_a_brute_force_scan_through_adds_removals_and_compaction(
    db_path, version
) -> None:
    """A database of format 2 (one B-tree per table, as releases before format 3 wrote it)
    is still read and written as format 2; every format answers every query as a Hamming
    scan does, with entries in the recent trees and in merged runs (format 4 on), with and
    without prefix filters (format 6 keeps them)."""
    rng = random.Random(version)
    roots = [rng.getrandbits(64) for _ in range(300)]
    stored = {f"doc-{i}": flip_bits(rng.choice(roots), rng.randint(0, 4), rng) for i in range(40_000)}
    with creating_format(version), simdb.open(db_path, k=3, blocks=5) as db:
        db.add_many(stored.items(), batch_size=7_000)
    with simdb.open(db_path) as db:
        removed = [f"doc-{i}" for i in range(0, 40_000, 3)]
        db.remove_many(removed)
        for key in removed:
            del stored[key]
        for _ in range(200):  # single adds, some replacing stored keys
            key = f"doc-{rng.randrange(60_000)}"
            stored[key] = flip_bits(rng.choice(roots), rng.randint(0, 4), rng)
            db.add(key, stored[key])
        for stage in ("before", "after"):
            if stage == "after":
                db.compact()
            assert db.stats()["format_version"] == version
            assert db.check(), stage
            for query in [flip_bits(rng.choice(roots), rng.randint(0, 3), rng) for _ in range(40)]:
                got = sorted((match.key, match.distance) for match in db.query(query, k=3))
                assert got == brute_force_query(stored, query, 3), (stage, query)


def test_items_as_a_snapshot_see_each_batch_whole(db_path) -> None:
    """Found by an adversarial probe: ``simdb export`` read 10,000 documents per read
    transaction, so a batch committed during an export could appear in it in part (the
    first document old, the last new).  ``items(snapshot=True)``, which export uses, reads
    every document as of one moment."""
    db = simdb.open(db_path, k=3)
    db.add_many((f"doc-{i}", i) for i in range(100))
    for snapshot in (False, True):
        documents = db.items(chunk=10, snapshot=snapshot)
        first = next(documents)
        db.add_many([("doc-0", 1000), ("doc-99", 1099)])  # one batch, during the read
        last = list(documents)[-1]
        assert (first.key, first.fingerprint, last.key) == ("doc-0", 0, "doc-99")
        # A snapshot sees the batch in neither; chunked reads see its second half only.
        assert last.fingerprint == (99 if snapshot else 1099)
        db.add_many([("doc-0", 0), ("doc-99", 99)])
    db.close()


@settings(max_examples=60, deadline=None)
@example(stored=[("a", 1, "m")], bare=[("a", 2), ("a", 1)], batch_size=2)  # a review: the kept version won
@given(
    st.lists(st.tuples(st.sampled_from("abcd"), st.sampled_from([1, 2, 3]), st.sampled_from([None, "m"])), max_size=3),
    st.lists(st.tuples(st.sampled_from("abcd"), st.sampled_from([1, 2, 3])), max_size=8),
    st.integers(1, 4),
)
def test_keep_stored_leaves_documents_stored_with_the_same_fingerprint_as_they_are(
    stored: list[tuple[str, int, str | None]], bare: list[tuple[str, int]], batch_size: int
) -> None:
    """``add_many(keep_stored=True)``, as a Parquet import calls it: an item whose key is
    stored with its fingerprint keeps that document (meta and sketch), counted unchanged;
    any other is stored as add_many stores it.  Checked against applying the rule one item
    at a time to a dictionary, and its counts too."""
    import tempfile

    with tempfile.TemporaryDirectory() as directory, simdb.open(directory, fingerprinter=simdb.Fingerprinter()) as db:
        expected: dict[str, tuple[int, str | None, bool]] = {}  # key -> fingerprint, meta, has a sketch
        for key, fingerprint, meta in stored:
            db.add(key, fingerprint, meta)
            expected[key] = (fingerprint, meta, False)
        added = replaced = unchanged = 0
        for key, fingerprint in bare:
            if key not in expected:
                added += 1
            elif expected[key][0] == fingerprint:
                unchanged += 1
                continue
            else:
                replaced += 1
            expected[key] = (fingerprint, None, False)
        result = db.add_many(bare, batch_size=batch_size, keep_stored=True)
        assert (result.added, result.replaced, result.unchanged) == (added, replaced, unchanged)
        assert {
            document.key: (document.fingerprint, document.meta, sketch is not None)
            for document, sketch in db.sketched_items()
        } == expected


def test_keep_stored_keeps_a_sketch_and_is_refused_when_not_a_bool(db_path) -> None:
    with simdb.open(db_path, fingerprinter=simdb.Fingerprinter()) as db:
        db.add("a", text="the sketch of this text is kept with its document", meta={"n": 1})
        kept = db.get("a")
        assert db.add_many([("a", kept.fingerprint)], keep_stored=True).unchanged == 1
        assert db.add_many([("a", kept.fingerprint)], keep_stored=True, if_new=True).unchanged == 1
        document, sketch = next(db.sketched_items())
        assert document == kept and sketch is not None and len(sketch) > 0
        assert db.add_many([("a", kept.fingerprint)]).replaced == 1  # without it: replaced, bare
        assert next(db.sketched_items())[1] is None and db.get("a").meta is None
        with pytest.raises(simdb.InvalidInputError, match="keep_stored"):
            db.add_many([("b", 1)], keep_stored=1)  # type: ignore[arg-type]
