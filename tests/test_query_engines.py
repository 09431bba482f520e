"""The query engines (simdb/queries.py) on their own, over a bare LMDB environment: each
tables layer (today's B-trees, and the log-structured one) and the records layer, against a
brute-force Hamming scan, without going through Database.  And query_many's worker threads
through Database: the count reaches the engine, and results equal one thread's."""

from __future__ import annotations

import random
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import lmdb
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import simdb
import simdb.queries
import simdb.tables
from simdb import codec
from simdb.btree_tables import BTreeTables
from simdb.config import FORMAT_VERSION, META
from simdb.keys import index_key_order, index_keys
from simdb.plan import TablePlan
from simdb.queries import Queries
from simdb.records import Records
from simdb.storage import BareHandles
from simdb.tables import Policy, Tables

LAYERS = ["btree", "log-structured"]


@contextmanager
def engine(layer: str, plan: TablePlan, fingerprints: list[int]) -> Iterator[tuple[Queries, lmdb.Environment]]:
    """Queries over a fresh environment holding documents ``doc-i`` with ``fingerprints``."""
    with tempfile.TemporaryDirectory() as directory:
        env = lmdb.open(directory, max_dbs=4096, map_size=1 << 28)
        try:
            handles = BareHandles(env)
            tables: BTreeTables | Tables = (
                BTreeTables(plan, handles, directory)
                if layer == "btree"
                else Tables(plan, handles, Policy(base=8, ratio=4, chunk=16))
            )
            records = Records(handles, directory, sketched=True, format_version=FORMAT_VERSION)
            keys = [f"doc-{i}" for i in range(len(fingerprints))]
            with env.begin(write=True) as txn:
                handles.create(txn, META)
                records.create(txn)
                tables.create(txn)
                if fingerprints:
                    packed = codec.pack_documents(keys, fingerprints, None)
                    assert packed is not None
                    order = index_key_order(index_keys([key.encode() for key in keys]))
                    records.put_new(txn, 0, packed, None, order)
                    tables.put_many(
                        txn, np.arange(len(fingerprints), dtype=np.uint64), np.array(fingerprints, dtype=np.uint64)
                    )
                    records.set_next_id(txn, len(fingerprints))
            yield Queries(tables, records, lambda: env.begin(), lambda: False), env
        finally:
            env.close()


def brute_force(fingerprints: list[int], query: int, k: int) -> dict[int, int]:
    """The oracle: every stored id within ``k`` bits of ``query``, with its distance."""
    return {i: (fp ^ query).bit_count() for i, fp in enumerate(fingerprints) if (fp ^ query).bit_count() <= k}


def near(rng: random.Random, fingerprints: list[int], count: int, spread: int) -> list[int]:
    """Queries up to ``spread`` bits from stored fingerprints, and a few random ones."""
    queries = [rng.getrandbits(64) for _ in range(count // 5 + 1)]
    for _ in range(count):
        query = rng.choice(fingerprints) if fingerprints else rng.getrandbits(64)
        for bit in rng.sample(range(64), rng.randint(0, spread)):
            query ^= 1 << bit
        queries.append(query)
    return queries


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    layer=st.sampled_from(LAYERS),
    plan_k=st.integers(1, 4),
    seed=st.integers(0, 2**32 - 1),
    n=st.integers(0, 120),
    data=st.data(),
)
def test_candidate_engines_equal_brute_force(layer: str, plan_k: int, seed: int, n: int, data: st.DataObject) -> None:
    """probe, probe_many, merge_many and find_many find exactly the fingerprints within k
    bits, for every k up to the plan's, duplicates and extreme values included."""
    rng = random.Random(seed)
    plan = TablePlan.create(plan_k)
    bases = [rng.getrandbits(64) for _ in range(max(1, n // 8))] + [0, 2**64 - 1]
    fingerprints = []
    for _ in range(n):  # clustered, so that many queries have several matches
        fingerprint = rng.choice(bases)
        for bit in rng.sample(range(64), rng.randint(0, plan_k + 1)):
            fingerprint ^= 1 << bit
        fingerprints.append(fingerprint)
    k = data.draw(st.integers(0, plan_k + 3), label="k")  # past the plan's k: a scan of every fingerprint
    queries = [*near(rng, fingerprints, 30, plan_k + 2), 0, 2**64 - 1]
    query_array = np.array(queries, dtype=np.uint64)
    expected = [brute_force(fingerprints, query, k) for query in queries]
    with engine(layer, plan, fingerprints) as (queries_engine, env), env.begin() as txn:
        tables = queries_engine.tables
        # Past the plan's k, a probe visits the prefixes a few bits from the query's too.
        assert [tables.probe(txn, query, k) for query in queries] == expected
        if k <= plan_k:
            assert tables.probe_many(txn, query_array, k) == expected
            with pytest.MonkeyPatch.context() as patch:  # the batch search even for a few queries
                patch.setattr(simdb.tables, "PROBE_EACH_BELOW", 0)
                assert tables.probe_many(txn, query_array, k) == expected
            assert tables.merge_many(txn, query_array, k) == expected
        assert queries_engine.find_many(txn, query_array, k) == expected
        for cost, high in (("_COMPARE_NS", 1e12), ("_RANGE_NS", 1e12)):  # probes, then a scan, past the plan's k
            with pytest.MonkeyPatch.context() as patch:
                patch.setattr(simdb.queries, cost, high)
                assert queries_engine.find_many(txn, query_array, k) == expected
        assert queries_engine.scan_many(txn, query_array, k) == expected
        with pytest.MonkeyPatch.context() as patch:  # a few comparisons a pass
            patch.setattr(simdb.queries, "SCAN_BLOCK", 7)
            assert queries_engine.scan_many(txn, query_array, k) == expected


@pytest.mark.parametrize("layer", LAYERS)
@pytest.mark.parametrize("workers", [1, 3])
@pytest.mark.parametrize("ratio", [0, 10**9], ids=["seek-per-query", "merge-whole-tables"])
def test_matches_are_the_brute_force_ones_nearest_first(layer: str, workers: int, ratio: int, monkeypatch) -> None:
    """query and query_many return the stored documents within k bits, nearest first and
    ties in id order, with their keys and fingerprints; query_many cuts a seek-per-query
    batch into chunks on several threads and keeps the query order."""
    monkeypatch.setattr(simdb.queries, "MIN_QUERIES_PER_WORKER", 7)
    monkeypatch.setattr(simdb.queries, "MERGE_COST_RATIO", ratio)
    chunks: list[tuple[int, int]] = []
    original = Queries._chunk

    def spy(self: Queries, *args: object) -> object:
        chunks.append(args[-2:])  # type: ignore[arg-type]
        return original(self, *args)  # type: ignore[arg-type]

    monkeypatch.setattr(Queries, "_chunk", spy)
    rng = random.Random(5)
    plan = TablePlan.create(3)
    bases = [rng.getrandbits(64) for _ in range(20)]
    fingerprints = [base ^ (1 << rng.randrange(64)) * rng.randint(0, 1) for base in bases for _ in range(5)]
    queries = near(rng, fingerprints, 60, 4)
    with engine(layer, plan, fingerprints) as (queries_engine, _env):
        for k in range(4):
            expected = [
                sorted(brute_force(fingerprints, query, k).items(), key=lambda row: (row[1], row[0]))
                for query in queries
            ]
            single = [queries_engine.query(query, k, None, None, None, "minhash") for query in queries]
            many = queries_engine.query_many(
                np.array(queries, dtype=np.uint64), k, None, None, None, "minhash", workers
            )
            assert many == single
            # A merge reads whole tables, so it is one pass; seeks are cut into chunks.
            assert len(chunks) == (3 if workers == 3 and not ratio else 1)
            chunks.clear()
            for found, want in zip(single, expected):
                assert [(m.key, m.distance) for m in found] == [(f"doc-{i}", d) for i, d in want]
                assert [m.fingerprint for m in found] == [fingerprints[i] for i, _ in want]


@pytest.mark.parametrize("layer", LAYERS)
def test_limit_and_threshold_select_from_the_candidates(layer: str) -> None:
    """A threshold keeps the candidates at that fingerprint similarity or more, most
    similar first; a limit keeps the first ones."""
    rng = random.Random(9)
    base = rng.getrandbits(64)
    fingerprints = [base ^ ((1 << bits) - 1) for bits in range(6)]  # 0..5 bits from base
    with engine(layer, TablePlan.create(5, 6), fingerprints) as (queries_engine, _env):
        every = queries_engine.query(base, 5, None, None, None, "minhash")
        assert [m.distance for m in every] == [0, 1, 2, 3, 4, 5]
        assert queries_engine.query(base, 5, 2, None, None, "minhash") == every[:2]
        cut = every[2].similarity
        kept = queries_engine.query(base, 5, None, None, cut, "minhash")
        assert kept == [m for m in every if m.similarity >= cut]


def test_query_many_passes_workers_to_the_engine(tmp_path: Path, monkeypatch) -> None:
    """The workers argument reaches the engine, and one thread is the default."""
    seen: list[int | None] = []
    original = Queries.query_many

    def spy(self: Queries, *args: object) -> object:
        seen.append(args[-1])  # type: ignore[arg-type]
        return original(self, *args)  # type: ignore[arg-type]

    monkeypatch.setattr(Queries, "query_many", spy)
    with simdb.open(tmp_path / "db") as db:
        db.add_many([("a", 1), ("b", 3)])
        assert [[m.key for m in found] for found in db.query_many([1], k=1, workers=3)] == [["a", "b"]]
        db.query_many([1])
    assert seen == [3, 1]


def test_query_many_with_workers_equals_one_thread(tmp_path: Path, monkeypatch) -> None:
    """Results on several threads equal one thread's, in order, through both engines."""
    rng = random.Random(3)
    fingerprints = [rng.getrandbits(64) for _ in range(3_000)]
    queries = near(rng, fingerprints, 2_000, 3)
    with simdb.open(tmp_path / "db", k=3) as db:
        db.add_many((f"doc-{i}", fp) for i, fp in enumerate(fingerprints))
        for ratio in (0, 10**9):  # a seek per query, or whole tables merged
            monkeypatch.setattr(simdb.queries, "MERGE_COST_RATIO", ratio)
            one = db.query_many(queries, workers=1)
            assert db.query_many(queries, workers=2) == one
            assert db.query_many(queries, workers=5) == one
            assert sum(map(len, one)) >= 2_000


@pytest.mark.parametrize("workers", [0, -1, 1.5, "2"])
def test_query_many_refuses_bad_workers(tmp_path: Path, workers: object) -> None:
    with simdb.open(tmp_path / "db") as db, pytest.raises(simdb.InvalidInputError, match="workers"):
        db.query_many([1], workers=workers)  # type: ignore[arg-type]
