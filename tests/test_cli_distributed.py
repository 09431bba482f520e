"""The Dask batch job from the command line: export --format parquet, then pairs --parquet."""

from __future__ import annotations

import json
import random

import numpy as np
import pytest

pytest.importorskip("dask.distributed")
pytest.importorskip("pyarrow")

import simdb
from tests.test_cli import json_lines, run


def test_export_parquet_then_pairs_on_dask_equals_the_database_pairs(tmp_path) -> None:
    rng = random.Random(5)
    bases = [rng.getrandbits(64) for _ in range(150)]
    items = [(f"k{i}", base ^ (1 << rng.randrange(64)) if i % 3 else base) for i, base in enumerate(bases * 3)]
    db_path = tmp_path / "db"
    with simdb.open(db_path) as db:
        db.add_many(items)
        expected = {(min(pair.key_a, pair.key_b), max(pair.key_a, pair.key_b), pair.distance) for pair in db.pairs(3)}
    exported = run("export", "--format", "parquet", "-o", tmp_path / "fp.parquet", "--db", db_path)
    assert exported.exit_code == 0, exported.stderr
    assert "exported 450 documents" in exported.stderr
    job = run("pairs", "--parquet", tmp_path / "*.parquet", "--out", tmp_path / "pairs", "--workers", "2", "--json")
    assert job.exit_code == 0, job.stderr
    summary = json_lines(job.stdout)[-1]
    assert summary["rows"] == 450 and summary["pairs"] == len(expected)

    import pandas as pd

    written = pd.read_parquet(tmp_path / "pairs")
    got = {(min(a, b), max(a, b), int(d)) for a, b, d in zip(written.key_a, written.key_b, written.distance)}
    assert got == expected


def test_parquet_options_need_each_other(tmp_path) -> None:
    assert run("pairs", "--parquet", tmp_path / "*.parquet").exit_code == 2
    assert run("pairs", "--out", tmp_path / "x", "--db", tmp_path / "db").exit_code == 2
    assert run("export", "--format", "parquet", "--db", tmp_path / "db").exit_code == 2


def test_parquet_shards_import_without_rehashing(tmp_path) -> None:
    """Shards of (key, fingerprint) rows, as export --format parquet and batch jobs write
    them, import into a database with the same documents (issue 17)."""
    import numpy as np
    import pandas as pd

    rng = random.Random(7)
    items = [(f"k{i}", rng.getrandbits(64)) for i in range(300)]
    source = tmp_path / "db"
    with simdb.open(source) as db:
        db.add_many(items)
    assert run("export", "--format", "parquet", "-o", tmp_path / "fp.parquet", "--db", source).exit_code == 0
    # A shard written by another engine: int64 fingerprints holding the same 64 bits.
    more = [(f"m{i}", rng.getrandbits(64) | 1 << 63) for i in range(50)]
    signed = np.array([fp for _, fp in more], dtype=np.uint64).view(np.int64)
    pd.DataFrame({"key": [key for key, _ in more], "fingerprint": signed}).to_parquet(tmp_path / "shard-1.parquet")
    result = run("import", tmp_path / "fp.parquet", tmp_path / "shard-1.parquet", "--db", tmp_path / "copy")
    assert result.exit_code == 0, result.stderr
    with simdb.open(tmp_path / "copy") as db:
        assert sorted((doc.key, doc.fingerprint) for doc in db.items()) == sorted(items + more)


def test_a_parquet_export_carries_the_settings_into_a_new_database(tmp_path) -> None:
    """A Parquet export imported into a new database stored no settings, so the copy took
    SimHash similarities for a minhash database's fingerprints and could not query text."""
    from tests.test_cli import prose

    for kind in ("minhash", "simhash"):
        for number in range(3):
            (tmp_path / f"{kind}{number}.txt").write_text(prose(number))
        assert (
            run(
                "add", *(tmp_path / f"{kind}{n}.txt" for n in range(3)), "--kind", kind, "--db", tmp_path / kind
            ).exit_code
            == 0
        )
    exported = tmp_path / "minhash.parquet"
    assert run("export", "-o", exported, "--db", tmp_path / "minhash").exit_code == 0
    imported = run("import", exported, "--db", tmp_path / "copy")
    assert imported.exit_code == 0
    # What the Parquet export leaves out is said, once: no meta, no sketches.
    assert imported.stderr.count("keys and fingerprints only") == 1 and "sketches" in imported.stderr
    with (
        simdb.open(tmp_path / "minhash", readonly=True) as original,
        simdb.open(tmp_path / "copy", readonly=True) as copy,
    ):
        assert (copy.fingerprinter, copy.k, copy.plan) == (original.fingerprinter, original.k, original.plan)
        assert [(d.key, d.fingerprint) for d in copy.items()] == [(d.key, d.fingerprint) for d in original.items()]
    refused = run("import", exported, "--db", tmp_path / "simhash")
    assert refused.exit_code == 2 and "other settings" in refused.stderr, refused.stderr
    with simdb.open(tmp_path / "simhash", readonly=True) as unchanged:
        assert len(unchanged) == 3


def test_a_parquet_export_whose_settings_metadata_is_damaged_is_not_read(tmp_path) -> None:
    # A faults probe: a Parquet file whose "simdb" metadata was plain text imported with
    # exit 0, its documents under default settings, where a damaged JSONL header stops the file.
    import pyarrow.parquet as pq

    from tests.test_cli import prose

    (tmp_path / "a.txt").write_text(prose(1))
    assert run("add", tmp_path / "a.txt", "--kind", "simhash", "--db", tmp_path / "db").exit_code == 0
    exported = tmp_path / "db.parquet"
    assert run("export", "-o", exported, "--db", tmp_path / "db").exit_code == 0
    table = pq.read_table(exported)
    damaged = tmp_path / "damaged.parquet"
    pq.write_table(table.replace_schema_metadata({b"simdb": b"not json{"}), damaged)
    result = run("import", damaged, "--db", tmp_path / "copy")
    assert result.exit_code == 2 and "damaged export header" in result.stderr, result.stderr
    if (tmp_path / "copy").exists():
        with simdb.open(tmp_path / "copy", readonly=True) as copy:
            assert len(copy) == 0


def test_import_format_parquet_reads_a_shard_of_any_name(tmp_path) -> None:
    """--format parquet was refused although auto-detection reads .parquet files, so a
    shard named otherwise could not be imported at all."""
    import pandas as pd

    items = [(f"k{i}", random.Random(i).getrandbits(64)) for i in range(40)]
    pd.DataFrame({"key": [key for key, _ in items], "fingerprint": [fp for _, fp in items]}).to_parquet(
        tmp_path / "shard.bin"
    )
    result = run("import", "--format", "parquet", tmp_path / "shard.bin", "--db", tmp_path / "db")
    assert result.exit_code == 0, result.stderr
    with simdb.open(tmp_path / "db") as db:
        assert sorted((doc.key, doc.fingerprint) for doc in db.items()) == sorted(items)
    assert run("import", "--format", "feather", tmp_path / "shard.bin", "--db", tmp_path / "db").exit_code == 2


def test_a_shard_with_dictionary_encoded_keys_imports(tmp_path) -> None:
    """Found by a faults probe: a shard whose key column is dictionary-encoded (a pandas
    categorical), which simdb.distributed reads, was refused by import as lacking a string
    key column."""
    import numpy as np
    import pandas as pd

    items = [(f"k{i % 7}-{i}", random.Random(i).getrandbits(64)) for i in range(60)]
    keys = pd.Categorical([key for key, _ in items])
    fingerprints = np.array([fp for _, fp in items], dtype=np.uint64)
    pd.DataFrame({"key": keys, "fingerprint": fingerprints}).to_parquet(tmp_path / "shard.parquet")
    result = run("import", tmp_path / "shard.parquet", "--db", tmp_path / "db")
    assert result.exit_code == 0, result.stderr
    with simdb.open(tmp_path / "db") as db:
        assert sorted((doc.key, doc.fingerprint) for doc in db.items()) == sorted(items)


def test_unusable_parquet_shards_are_reported_by_name(tmp_path) -> None:
    import pandas as pd

    (tmp_path / "junk.parquet").write_text("not parquet")
    pd.DataFrame({"key": [1, 2], "fingerprint": [1, 2]}).to_parquet(tmp_path / "intkeys.parquet")
    pd.DataFrame({"key": ["a", None], "fingerprint": [1, 2]}).to_parquet(tmp_path / "nullkey.parquet")
    result = run(
        "import",
        tmp_path / "junk.parquet",
        tmp_path / "intkeys.parquet",
        tmp_path / "nullkey.parquet",
        "--db",
        tmp_path / "db",
    )
    assert result.exit_code == 2
    assert "junk.parquet" in result.stderr and "not a readable Parquet file" in result.stderr
    assert "intkeys.parquet" in result.stderr and "string 'key' column" in result.stderr
    assert f"{tmp_path / 'nullkey.parquet'}:2" in result.stderr
    with simdb.open(tmp_path / "db") as db:
        assert [doc.key for doc in db.items()] == ["a"]


def test_a_parquet_input_that_is_a_fifo_is_refused_not_waited_for(tmp_path) -> None:
    # A review: pyarrow opening a FIFO with no writer waited for good.
    import os
    import subprocess
    import sys

    fifo = tmp_path / "shard.parquet"
    os.mkfifo(fifo)
    command = [sys.executable, "-m", "simdb_cli.app", "import", str(fifo), "--db", str(tmp_path / "db")]
    finished = subprocess.run(command, capture_output=True, text=True, timeout=60, env={**os.environ, "SIMDB_PATH": ""})
    assert finished.returncode == 2 and "must be a regular file" in finished.stderr, finished.stderr


def test_a_parquet_import_keeps_the_meta_and_sketch_of_documents_stored_with_its_fingerprints(tmp_path) -> None:
    """A probe: importing a Parquet export (keys and fingerprints only) back into the database
    it came from replaced every document by its bare fingerprint: metas and sketches gone,
    similarities changed, exit 0.  A stored document with the row's fingerprint is kept as
    it is now; a row with another fingerprint still replaces it."""
    texts = {
        "a": "the quick brown fox jumps over the lazy dog on a sunny day in early spring",
        "b": "the quick brown fox jumps over the lazy dog on a rainy day in early spring",
        "c": "an unrelated note about shipping schedules and harbour fees for the next month",
    }
    source = tmp_path / "texts.jsonl"
    source.write_text(
        "".join(json.dumps({"id": key, "text": text, "n": i}) + "\n" for i, (key, text) in enumerate(texts.items()))
    )
    db = tmp_path / "db"
    assert run("add", "--jsonl", source, "--db", db).exit_code == 0
    with simdb.open(db, readonly=True) as database:
        before = list(database.sketched_items())
        pairs_before = list(database.pairs(threshold=0.5))
    assert run("export", "--format", "parquet", "-o", tmp_path / "snap.parquet", "--db", db).exit_code == 0
    again = run("import", tmp_path / "snap.parquet", "--db", db)
    assert again.exit_code == 0 and "3 unchanged" in again.stdout, again.output
    with simdb.open(db, readonly=True) as database:
        assert list(database.sketched_items()) == before and list(database.pairs(threshold=0.5)) == pairs_before
    # A shard whose row for "c" carries another fingerprint replaces that document alone.
    import pandas as pd

    fingerprints = {document.key: document.fingerprint for document, _ in before}
    changed = fingerprints["c"] ^ 0b1011
    pd.DataFrame(
        {"key": ["a", "c"], "fingerprint": np.array([fingerprints["a"], changed], dtype=np.uint64)}
    ).to_parquet(tmp_path / "shard.parquet")
    mixed = run("import", tmp_path / "shard.parquet", "--db", db)
    assert mixed.exit_code == 0 and "replaced 1" in mixed.stdout and "1 unchanged" in mixed.stdout, mixed.output
    with simdb.open(db, readonly=True) as database:
        after = {document.key: (document, sketch) for document, sketch in database.sketched_items()}
    assert after["a"] == before[0] and after["b"] == before[1]
    assert after["c"][0].fingerprint == changed and after["c"][0].meta is None and after["c"][1] is None
