"""The Dask batch job from the command line: export --format parquet, then pairs --parquet."""

from __future__ import annotations

import random

import pytest

pytest.importorskip("dask.distributed")
pytest.importorskip("pyarrow")

import simdb  # noqa: E402
from tests.test_cli import json_lines, run  # noqa: E402


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
