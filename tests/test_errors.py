"""Errors carry fields and the layers talk through them: the library's ``str()`` speaks
Python, the command line formats the same error (its class, fields and remedy) in option
terms, and every public entry point refuses a bad k, fingerprint or count with the same
class.  Nothing here matches one layer's text in another."""

from __future__ import annotations

import gc
import os
import pickle
from collections.abc import Callable
from pathlib import Path
from typing import Any

import lmdb
import numpy as np
import pytest
from simdb_cli import sources
from simdb_cli.errors import CLI_HINTS, error_message

import simdb
from simdb import allpairs, codec
from simdb.errors import KeyProblem, Remedy
from simdb.keys import encode_id
from simdb.plan import TablePlan
from tests.test_cli import prose, run

#: Python-API wording that must never reach the command line's stderr.
PYTHON_WORDING = ("fingerprinter=", "create=True", "check()", "readonly=True")


def cli_error(*args: object) -> tuple[int, str]:
    """Exit code and stderr of a CLI run that fails, checked to be one line with no Python wording."""
    result = run(*map(str, args))
    stderr = result.stderr
    assert result.exit_code in (2, 3), result.output
    assert len(stderr.strip().splitlines()) == 1 and "Traceback" not in stderr, stderr
    for python in PYTHON_WORDING:
        assert python not in stderr, stderr
    return result.exit_code, stderr


def library_error(error_class: type[BaseException], call: Callable[[], Any]) -> BaseException:
    with pytest.raises(error_class) as caught:
        call()
    return caught.value


# -- each error family: fields, Python wording from the library, option wording from the CLI -----


def test_a_k_mismatch_names_the_option_on_the_command_line_and_the_argument_in_python(tmp_path: Path) -> None:
    db = tmp_path / "db"
    simdb.open(db, k=3).close()
    error = library_error(simdb.ConfigMismatchError, lambda: simdb.open(db, k=4))
    assert (error.setting, error.given, error.stored, error.remedy) == ("k", 4, 3, Remedy.OMIT_SETTING)
    assert error.path == str(db) and "k=4 was given" in str(error) and "omit k," in str(error)
    code, stderr = cli_error("add", "--db", db, "-k", 4, "--fingerprints", "/dev/null")
    assert code == 2 and "-k 4 was given" in stderr and "created with -k 3" in stderr and "omit -k," in stderr


def test_a_settings_mismatch_names_the_differing_options(tmp_path: Path) -> None:
    db, text = tmp_path / "db", tmp_path / "a.txt"
    text.write_text(prose(1))
    assert run("add", "--db", db, "--features", "char", text).exit_code == 0
    given = simdb.Fingerprinter(features="word")
    error = library_error(simdb.ConfigMismatchError, lambda: simdb.open(db, fingerprinter=given))
    assert error.setting == "fingerprinter" and error.given == given and error.stored.features == "char"
    assert "omit fingerprinter= to use the stored settings" in str(error)
    code, stderr = cli_error("add", "--db", db, "--features", "word", text)
    assert code == 2 and "--features word --ngram 1 was given" in stderr  # the word default is 1
    assert "uses --features char --ngram 5 (hint" in stderr  # only the settings that differ
    assert "omit --features, --ngram, --stopwords, --kind and --weights to use the stored settings" in stderr


def test_an_empty_directory_is_a_missing_database_to_create(tmp_path: Path) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    error = library_error(simdb.DatabaseMissingError, lambda: simdb.open(empty, readonly=True))
    assert error.remedy is Remedy.CREATE_DATABASE and error.path == str(empty)
    assert "opening it writable" in str(error)
    error = library_error(simdb.DatabaseMissingError, lambda: simdb.open(empty, create=False))
    assert "create=True" in str(error) or "opening it writable" in str(error)
    code, stderr = cli_error("query", "--db", empty, "--fingerprint", "0x0")
    # As a missing path is (a new user's pass: an empty directory was said not to exist).
    assert code == 3 and f"no database at {empty} (an empty directory)" in stderr and "simdb add" in stderr


def test_an_interrupted_creation_says_how_to_finish_it(tmp_path: Path) -> None:
    db = tmp_path / "db"
    db.mkdir()
    (db / "CURRENT").write_text("data-000001.mdb\n")  # the first step of a creation, nothing after
    error = library_error(simdb.UnfinishedDatabaseError, lambda: simdb.open(db, readonly=True))
    assert error.remedy is Remedy.FINISH_CREATION and "open it writable to finish it" in str(error)
    code, stderr = cli_error("query", "--db", db, "--fingerprint", "0x0")
    assert code == 3 and "simdb add or simdb import finishes it" in stderr


def _damage_first_document(db: Path) -> None:
    """Overwrite document 0's record with bytes that are not msgpack, through LMDB itself."""
    env = lmdb.open(str(db / "data-000001.mdb"), subdir=False, max_dbs=64)
    with env.begin(write=True) as txn:
        txn.put(encode_id(0), b"\xc1", db=env.open_db(b"docs", txn=txn, create=False))
    env.close()


def test_damage_says_run_check_in_each_interface(tmp_path: Path) -> None:
    db = tmp_path / "db"
    with simdb.open(db, k=3) as database:
        database.add("a", 0x1234)
    _damage_first_document(db)
    with simdb.open(db, readonly=True) as database:
        error = library_error(simdb.CorruptDatabaseError, lambda: database.query(0x1234))
    assert error.remedy is Remedy.RUN_CHECK and "run check()" in str(error)
    code, stderr = cli_error("query", "--db", db, "--fingerprint", "0x1234")
    assert code == 3 and "run simdb check" in stderr


def test_text_without_stored_settings_says_add_text_or_give_a_fingerprint(tmp_path: Path) -> None:
    db = tmp_path / "db"
    with simdb.open(db, k=3) as database:
        database.add("a", 0x1234)
    with simdb.open(db, readonly=True) as database:
        error = library_error(simdb.NoFingerprinterError, lambda: database.query(text="hello world"))
    assert isinstance(error, simdb.FingerprinterError) and error.remedy is Remedy.ADD_TEXT_FIRST
    assert "pass fingerprints" in str(error)
    code, stderr = cli_error("query", "--db", db, "hello world")
    assert code == 2 and "add text with simdb add first, or query with --fingerprint" in stderr


def test_a_distance_above_a_plan_names_both(tmp_path: Path) -> None:
    from simdb.allpairs import plan_search_jobs
    from simdb.plan import TablePlan

    error = library_error(simdb.DistanceTooLargeError, lambda: plan_search_jobs(TablePlan.create(3), 9))
    assert (error.argument, error.value, error.largest) == ("k", 9, 3)
    db = tmp_path / "db"
    with simdb.open(db, k=3) as database:
        database.add("a", 0x1234)
    code, stderr = cli_error("query", "--db", db, "--fingerprint", "0x1234", "-k", 65)
    assert code == 2 and "-k" in stderr and "64" in stderr


@pytest.mark.parametrize("remedy", [remedy for remedy in Remedy if remedy is not Remedy.OMIT_SETTING])
def test_every_remedy_has_command_line_wording_free_of_python(remedy: Remedy) -> None:
    error = simdb.DatabaseError("something happened", remedy=remedy)
    line = error_message(error)
    assert line == f"something happened (hint: {CLI_HINTS[remedy]})"
    assert not any(python in line for python in PYTHON_WORDING)


def test_the_read_only_hint_is_python_in_the_library_and_not_on_the_command_line(tmp_path: Path) -> None:
    db = tmp_path / "db"
    simdb.open(db).close()
    with simdb.open(db, readonly=True) as database:
        error = library_error(simdb.ReadOnlyError, lambda: database.add("a", 1))
    assert "readonly=True" in str(error) and error.remedy is Remedy.OPEN_WRITABLE and error.path == str(db)
    assert "readonly=True" not in error_message(error)


# -- the same path twice in one process: found by the registry, not by LMDB's message ------------


def test_a_second_open_is_refused_by_file_identity_and_allowed_once_the_first_is_gone(tmp_path: Path) -> None:
    db = tmp_path / "db"
    first = simdb.open(db)
    alias = tmp_path / "alias"
    alias.symlink_to(db)  # another name for the same directory: the same data file
    error = library_error(simdb.AlreadyOpenError, lambda: simdb.open(alias, readonly=True))
    assert error.remedy is Remedy.SHARE_DATABASE and error.path == str(alias)
    first.close()
    simdb.open(alias, readonly=True).close()  # closed: free again
    dropped = simdb.open(db)
    del dropped  # never closed, only collected: its environment is gone, so is the claim
    gc.collect()
    simdb.open(db).close()


def test_compaction_keeps_the_claim_on_the_new_generation(tmp_path: Path) -> None:
    db = tmp_path / "db"
    with simdb.open(db) as database:
        database.add_many([(f"d{i}", i) for i in range(20)])
        database.compact()
        library_error(simdb.AlreadyOpenError, lambda: simdb.open(db, readonly=True))
    simdb.open(db, readonly=True).close()


# -- keys: why one was refused is a field ---------------------------------------------------------


@pytest.mark.parametrize(
    ("key", "reason"),
    [("", KeyProblem.EMPTY), (5, KeyProblem.NOT_STR), ("a\ud800", KeyProblem.NOT_UNICODE)],
)
def test_a_refused_key_says_why_in_a_field(tmp_path: Path, key: object, reason: KeyProblem) -> None:
    with simdb.open(tmp_path / "db") as database:
        error = library_error(simdb.InvalidKeyError, lambda: database.add(key, 1))  # type: ignore[arg-type]
    assert error.reason is reason and error.argument == "key" and error.value == key


def test_a_key_with_a_lone_surrogate_fails_worded_by_its_reason_field(tmp_path: Path) -> None:
    # Never repaired (two such keys would become one); told apart from other bad keys by the
    # error's reason field, not by its message.
    messages: list[tuple[str, str]] = []
    intake = sources.Intake(on_problem=lambda *args: messages.append(args), on_notice=lambda *args: None)
    assert sources._valid_key("a\ud800", "line 1", intake, "src") is None
    assert intake.failed == 1 and "is not valid Unicode" in messages[-1][1]
    assert sources._valid_key("", "line 2", intake, "src") is None
    assert intake.failed == 2 and "empty" in messages[-1][1]


def test_a_file_name_that_is_not_utf8_is_refused_by_its_reason_field(tmp_path: Path) -> None:
    docs = tmp_path / "docs"
    docs.mkdir()
    with open(os.path.join(os.fsencode(docs), b"bad\xff.txt"), "wb") as handle:
        handle.write(prose(2).encode())
    result = run("add", docs, "--db", tmp_path / "db", "--workers", "1")
    assert result.exit_code == 2 and "the file name is not valid UTF-8, so it cannot be a key" in result.stderr


# -- one validator per kind of value: every entry point refuses alike --------------------------

FPS = [0, 1, 3, 0xFFFF]


@pytest.fixture(scope="module")
def small_db(tmp_path_factory: pytest.TempPathFactory) -> simdb.Database:
    database = simdb.open(tmp_path_factory.mktemp("v") / "db", k=3)
    database.add_many([("a", 1), ("b", 3)])
    yield database
    database.close()


def k_entry_points(db: simdb.Database, tmp: Path) -> dict[str, Callable[[Any], Any]]:
    plan = TablePlan.create(3)
    return {
        "open": lambda k: simdb.open(tmp / "new", k=k),
        "TablePlan.create": lambda k: TablePlan.create(k),
        "query": lambda k: db.query(1, k=k),
        "query_many": lambda k: db.query_many([1], k=k),
        "pairs": lambda k: list(db.pairs(k=k)),
        "clusters": lambda k: list(db.clusters(k=k)),
        "pair_histogram": lambda k: db.pair_histogram(k=k),
        "find_all": lambda k: simdb.find_all(FPS, k=k),
        "find_clusters": lambda k: simdb.find_clusters(FPS, k=k),
        "iter_pair_blocks": lambda k: list(allpairs.iter_pair_blocks(FPS, plan, k)),
    }


@pytest.mark.parametrize("bad", [True, -1, 1.5, "2", 65, 10**30])
@pytest.mark.parametrize(
    "entry",
    ["open", "TablePlan.create", "query", "query_many", "pairs", "clusters", "pair_histogram", "find_all",
     "find_clusters", "iter_pair_blocks"],
)  # fmt: skip
def test_every_entry_point_taking_k_refuses_a_bad_one_with_distance_error(
    small_db: simdb.Database, tmp_path: Path, entry: str, bad: object
) -> None:
    call = k_entry_points(small_db, tmp_path)[entry]
    error = library_error(simdb.DistanceError, lambda: call(bad))
    assert "k" in error.message and error.argument == "k"
    if not isinstance(bad, int) or isinstance(bad, bool):
        assert error.value is bad  # the value given, as given
    assert not (tmp_path / "new").exists()  # a refused open leaves nothing behind


@pytest.mark.parametrize("entry", ["open", "TablePlan.create", "query", "pairs", "find_all", "iter_pair_blocks"])
def test_every_entry_point_taking_k_takes_a_numpy_integer(small_db: simdb.Database, tmp_path: Path, entry: str) -> None:
    result = k_entry_points(small_db, tmp_path)[entry](np.int64(2))
    if isinstance(result, simdb.Database):
        assert result.k == 2
        result.close()


def fingerprint_entry_points(db: simdb.Database) -> dict[str, Callable[[Any], Any]]:
    return {
        "add": lambda fp: db.add("new", fp),
        "add_many": lambda fp: db.add_many([("new", fp)]),
        "query": lambda fp: db.query(fp),
        "query_many": lambda fp: db.query_many([fp]),
        "similarity": lambda fp: simdb.similarity(fp, 0),
        "hamming": lambda fp: simdb.hamming(0, fp),
        "find_all": lambda fp: simdb.find_all([0, fp]),
        "find_clusters": lambda fp: simdb.find_clusters([fp, 0]),
        "simhash_features": lambda fp: simdb.simhash_features([(fp, 1.0)]),
    }


@pytest.mark.parametrize("bad", [True, -1, 1.5, "12", 1 << 64])
@pytest.mark.parametrize(
    "entry",
    [
        "add",
        "add_many",
        "query",
        "query_many",
        "similarity",
        "hamming",
        "find_all",
        "find_clusters",
        "simhash_features",
    ],
)
def test_every_entry_point_taking_a_fingerprint_refuses_a_bad_one_alike(
    small_db: simdb.Database, entry: str, bad: object
) -> None:
    if bad == 1 << 64 and entry == "hamming":
        assert simdb.hamming(0, bad) == 1  # any width has a Hamming distance: not a bad value here
        return
    if entry == "simhash_features" and isinstance(bad, str):
        return  # a feature may be text
    if entry == "simhash_features" and isinstance(bad, (bool, float)):
        expected: type[Exception] = simdb.InvalidInputError  # not a feature at all
    else:
        expected = simdb.InvalidFingerprintError
    error = library_error(expected, lambda: fingerprint_entry_points(small_db)[entry](bad))
    assert type(error) is expected
    assert small_db.get("new") is None


def count_entry_points(db: simdb.Database, tmp: Path) -> dict[str, tuple[Callable[[Any], Any], Any]]:
    """Entry points taking a count, each with a value too large for it (None: no upper bound)."""
    plan = TablePlan.create(3)
    fingerprinter = simdb.Fingerprinter()
    return {
        "open blocks": (lambda n: simdb.open(tmp / "new", k=3, blocks=n), 65),
        "open map_size": (lambda n: simdb.open(tmp / "new", map_size=n), 1 << 50),
        "TablePlan blocks": (lambda n: TablePlan.create(3, n), 65),
        "add_many batch_size": (lambda n: db.add_many([("a", 1)], batch_size=n), None),
        "remove_many batch_size": (lambda n: db.remove_many(["zz"], batch_size=n), None),
        "query limit": (lambda n: db.query(1, limit=n), None),
        "Fingerprinter ngram": (lambda n: simdb.Fingerprinter(ngram=n), 1000),
        "fingerprint_many workers": (lambda n: fingerprinter.fingerprint_many(["a b"], workers=n), None),
        "find_all workers": (lambda n: simdb.find_all(FPS, workers=n), None),
        "pairs workers": (lambda n: list(db.pairs(workers=n)), None),
        "iter_pair_blocks block_size": (lambda n: list(allpairs.iter_pair_blocks(FPS, plan, block_size=n)), None),
        "similarity bits": (lambda n: simdb.similarity(0, 0, bits=n), None),
    }


@pytest.mark.parametrize("bad", [True, -1, 1.5, "3", "too large"])
@pytest.mark.parametrize(
    "entry",
    ["open blocks", "open map_size", "TablePlan blocks", "add_many batch_size", "remove_many batch_size",
     "query limit", "Fingerprinter ngram", "fingerprint_many workers", "find_all workers", "pairs workers",
     "iter_pair_blocks block_size", "similarity bits"],
)  # fmt: skip
def test_every_entry_point_taking_a_count_refuses_a_bad_one_with_invalid_input_error(
    small_db: simdb.Database, tmp_path: Path, entry: str, bad: object
) -> None:
    call, too_large = count_entry_points(small_db, tmp_path)[entry]
    if bad == "too large":
        if too_large is None:
            pytest.skip("no upper bound")
        bad = too_large
    error = library_error(simdb.InvalidInputError, lambda: call(bad))
    assert type(error) is simdb.InvalidInputError
    name = entry.split()[-1]
    assert name in error.message and repr(bad)[:20] in error.message  # names the argument and the value
    assert not (tmp_path / "new").exists()


def test_a_stored_document_is_checked_by_the_codec_not_as_an_argument() -> None:
    # Damage is a database problem (exit 3), never the InvalidFingerprintError of an argument.
    with pytest.raises(simdb.CorruptDatabaseError) as caught:
        codec.unpack_document(codec.pack_document("a", 1, None)[:-1] + b"\xc1", encode_id(0))
    assert caught.value.remedy is Remedy.RUN_CHECK


@pytest.mark.parametrize(
    "error",
    [
        simdb.InvalidKeyError("key '' is empty", reason=KeyProblem.EMPTY, value=""),
        simdb.ConfigMismatchError("k=4 was given", "omit k", setting="k", given=4, stored=3, path="/db"),
        simdb.DistanceTooLargeError("k=9 is above", value=9, largest=3),
        simdb.CorruptDatabaseError("damaged", path="/db", record="document 5", field="key", remedy=Remedy.RUN_CHECK),
        simdb.AlreadyOpenError("open twice", path="/db"),
        simdb.DatabaseReplacedError("made again", setting="k", held=3, stored=5, path="/db"),
        simdb.errors.DaskNotInstalledError("no dask", "pip install simdb[dask]"),
    ],
)
def test_an_error_survives_pickling_with_its_fields(error: simdb.SimdbError) -> None:
    # An error raised in a worker process comes back pickled.
    copy = pickle.loads(pickle.dumps(error))
    assert type(copy) is type(error) and str(copy) == str(error) and copy.__dict__ == error.__dict__


def test_a_killed_worker_is_a_system_error_in_one_line() -> None:
    """A fingerprinting worker killed from outside is neither bad input (2) nor silence:
    exit 3, as running out of memory is, with a line that says what happened."""
    from simdb_cli.errors import EXIT_DATABASE, exit_code_for

    error = simdb.WorkerDiedError("a fingerprinting worker process ended abruptly; its texts were not read")
    assert exit_code_for(error) == EXIT_DATABASE
    line = error_message(error)
    assert "ended abruptly" in line and "fewer workers" in line and "\n" not in line
