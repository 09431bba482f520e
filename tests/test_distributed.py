"""simdb.distributed on a real multi-process Dask cluster, checked against the single-machine
search in simdb.allpairs (itself checked against brute force in test_allpairs.py)."""

from __future__ import annotations

import itertools
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

pytest.importorskip("dask.distributed")
pytest.importorskip("pyarrow")

import dask
import dask.dataframe as dd
from dask.core import get_dependencies
from dask.distributed import Client, LocalCluster, get_task_stream

import simdb
from simdb import distributed
from simdb.allpairs import find_all, find_clusters
from simdb.errors import InvalidFingerprintError, InvalidInputError, SimdbError


@pytest.fixture(scope="module")
def client() -> Iterator[Client]:
    """Two worker processes, one thread each: every shuffle really crosses processes."""
    with (
        LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=":0") as cluster,
        Client(cluster) as connected,
    ):
        yield connected


# -- inputs ----------------------------------------------------------------------------


def _flip(values: np.ndarray, rng: np.random.Generator, max_flips: int) -> np.ndarray:
    """Each value with 0..max_flips random bits flipped (a bit may be picked twice)."""
    out = values.copy()
    flips = rng.integers(0, max_flips + 1, values.size)
    for round_ in range(max_flips):
        chosen = flips > round_
        out[chosen] ^= np.uint64(1) << rng.integers(0, 64, int(chosen.sum())).astype(np.uint64)
    return out


def random_input(n: int = 3000, seed: int = 1) -> np.ndarray:
    """Uniform fingerprints (almost no pairs) plus a few hundred planted near pairs."""
    rng = np.random.default_rng(seed)
    base = rng.integers(0, 2**64, n, dtype=np.uint64)
    planted = _flip(base[:300], rng, 4)
    return np.concatenate([base, planted])


def clustered_input(n: int = 3000, seed: int = 2) -> np.ndarray:
    """n fingerprints around n/10 bases, 0-4 bits away: dense groups sharing prefixes."""
    rng = np.random.default_rng(seed)
    bases = rng.integers(0, 2**64, n // 10, dtype=np.uint64)
    return _flip(rng.choice(bases, n), rng, 4)


def duplicate_heavy_input(n: int = 3000, seed: int = 3) -> np.ndarray:
    """Few distinct values, most repeated many times, one group of 400 identical."""
    rng = np.random.default_rng(seed)
    values = _flip(rng.integers(0, 2**64, 20, dtype=np.uint64).repeat(5), rng, 3)
    return np.concatenate([rng.choice(values, n - 400), np.full(400, values[0], dtype=np.uint64)])


INPUTS = {"random": random_input, "clustered": clustered_input, "duplicates": duplicate_heavy_input}


def as_frame(fingerprints: np.ndarray, npartitions: int = 4) -> dd.DataFrame:
    keys = np.arange(fingerprints.size, dtype=np.int64)
    return dd.from_pandas(pd.DataFrame({"key": keys, "fingerprint": fingerprints}), npartitions=npartitions)


def local_pairs(fingerprints: np.ndarray, k: int, blocks: int | None) -> list[tuple[int, int, int]]:
    pairs, distances = find_all(fingerprints, k=k, blocks=blocks)
    return sorted(zip(pairs[:, 0].tolist(), pairs[:, 1].tolist(), distances.tolist()))


def rows(frame: pd.DataFrame, columns: tuple[str, str, str]) -> list[tuple[object, object, int]]:
    return sorted(zip(*(frame[c].tolist() for c in columns)))


# -- find_all --------------------------------------------------------------------------


@pytest.mark.parametrize("kind", sorted(INPUTS))
@pytest.mark.parametrize(("k", "blocks"), [(3, None), (3, 5), (2, 4), (1, None)])
def test_find_all_equals_single_machine(client: Client, kind: str, k: int, blocks: int | None) -> None:
    fingerprints = INPUTS[kind]()
    got = distributed.find_all(as_frame(fingerprints), k=k, blocks=blocks).compute()
    expected = local_pairs(fingerprints, k, blocks)
    assert len(expected) > 100  # the inputs do exercise the search
    assert rows(got, distributed.PAIR_COLUMNS) == expected  # same pairs, each once, key_a < key_b
    assert got["distance"].dtype == np.uint8


@pytest.mark.parametrize("kind", sorted(INPUTS))
def test_find_all_cut_into_many_jobs_equals_single_machine(client: Client, kind: str) -> None:
    """workers=7 cuts table groups into shares of rows: still every pair exactly once."""
    fingerprints = INPUTS[kind]()
    got = distributed.find_all(as_frame(fingerprints), k=3, workers=7).compute()
    assert rows(got, distributed.PAIR_COLUMNS) == local_pairs(fingerprints, 3, None)


def test_more_workers_than_pay_for_their_pass_are_planned_as_the_cap() -> None:
    """Each search task reads every fingerprint, so workers past MAX_SEARCH_TASKS are not
    planned for: workers=10,000 on a few hundred rows built a graph of 30,000 tasks in
    minutes.  The graph is the cap's, and the pairs are still exact."""
    fingerprints = clustered_input(300)
    frame = as_frame(fingerprints)
    capped = distributed.find_all(frame, k=3, workers=distributed.MAX_SEARCH_TASKS)
    huge = distributed.find_all(frame, k=3, workers=distributed.MAX_SEARCH_TASKS + 100)
    assert len(huge.__dask_graph__()) == len(capped.__dask_graph__())
    with dask.config.set(scheduler="sync"):
        assert rows(huge.compute(), distributed.PAIR_COLUMNS) == local_pairs(fingerprints, 3, None)


def test_find_all_and_clusters_shuffle_no_rows() -> None:
    """The plan reads every fingerprint in each job instead of shuffling rows per table:
    no shuffle or merge task in the graph (issue 17)."""
    frame = as_frame(clustered_input(500))
    for result in (distributed.find_all(frame, workers=4), distributed.clusters(frame, workers=4)):
        names = {str(key[0] if isinstance(key, tuple) else key) for key in dict(result.__dask_graph__())}
        assert not [name for name in names if "shuffle" in name or "p2p" in name or "hash-join" in name]


def test_k0_reports_only_identical_fingerprints(client: Client) -> None:
    fingerprints = duplicate_heavy_input()
    got = distributed.find_all(as_frame(fingerprints), k=0).compute()
    assert rows(got, distributed.PAIR_COLUMNS) == local_pairs(fingerprints, 0, None)


def test_parquet_path_with_string_keys_and_int64_bits(client: Client, tmp_path) -> None:
    fingerprints = clustered_input(2000, seed=7)
    fingerprints[:50] |= np.uint64(1 << 63)  # top bit set: negative when read as int64
    keys = [f"doc-{i:05d}" for i in range(fingerprints.size)]
    half = fingerprints.size // 2
    pd.DataFrame({"key": keys[:half], "fingerprint": fingerprints[:half]}).to_parquet(tmp_path / "a.parquet")
    # The second file stores the same bits as int64, as engines without uint64 write them.
    signed = fingerprints[half:].view(np.int64)
    pd.DataFrame({"key": keys[half:], "fingerprint": signed}).to_parquet(tmp_path / "b.parquet")
    expected = [(keys[a], keys[b], d) for a, b, d in local_pairs(fingerprints, 3, None)]
    for source in (str(tmp_path / "*.parquet"), tmp_path):  # a glob, and a directory path
        got = distributed.find_all(source, k=3).compute()
        assert rows(got, distributed.PAIR_COLUMNS) == sorted(expected)
    labelled = distributed.clusters(tmp_path, k=3).compute()  # keys read with the fingerprints
    groups = sorted(sorted(members) for members in labelled.groupby("cluster")["key"].agg(list))
    assert groups == sorted(sorted(keys[i] for i in cluster) for cluster in find_clusters(fingerprints, k=3))


def write_files(fingerprints: np.ndarray, directory, sizes: list[int]) -> None:
    """The fingerprints in Parquet files of the given row counts (a 0 writes an empty file),
    int keys = positions, small row groups so a file holds several."""
    assert sum(sizes) == fingerprints.size
    start = 0
    for number, size in enumerate(sizes):
        frame = pd.DataFrame({"key": np.arange(start, start + size), "fingerprint": fingerprints[start : start + size]})
        # Zero-padded names: sorted order is input order.
        frame.to_parquet(directory / f"part-{number:03d}.parquet", index=False, row_group_size=97)
        start += size


def test_many_partitions_are_routed_through_groups(client: Client, tmp_path) -> None:
    """More input partitions than one routing group (ROUTE_GROUP), from a Dask DataFrame and
    from Parquet files of uneven sizes (one empty, several row groups each)."""
    fingerprints = clustered_input(3000, seed=13)
    expected = local_pairs(fingerprints, 3, None)
    assert distributed.ROUTE_GROUP < 19
    result = distributed.find_all(as_frame(fingerprints, npartitions=19), k=3, workers=2)
    # One output partition per routing group, several input partitions each.
    assert result.npartitions == -(-19 // distributed._route_group_size(19, 2)) < 19
    got = result.compute()
    assert rows(got, distributed.PAIR_COLUMNS) == expected
    sizes = [400, 0, 7, 1000, 93, 300, 200, 100, 250, 150, 1, 299, 200]
    write_files(fingerprints, tmp_path, sizes)
    got = distributed.find_all(str(tmp_path / "*.parquet"), k=3).compute()
    assert rows(got, distributed.PAIR_COLUMNS) == expected
    labelled = distributed.clusters(str(tmp_path / "*.parquet"), k=3).compute()
    groups = sorted(sorted(members) for members in labelled.groupby("cluster")["key"].agg(list))
    assert groups == sorted(find_clusters(fingerprints, k=3))


def test_search_tasks_of_parquet_input_read_the_files_themselves(client: Client, tmp_path) -> None:
    """Each worker's search task reads every file's fingerprints, depending on no other task,
    so the scheduler has no data to keep the search tasks together: they run on distinct
    workers."""
    fingerprints = random_input(6000, seed=14)
    write_files(fingerprints, tmp_path, [1575] * 4)
    result = distributed.find_all(str(tmp_path / "*.parquet"), k=3, workers=2)
    graph = dict(result.__dask_graph__())
    search = [key for key in graph if "_job_pairs" in str(key[0] if isinstance(key, tuple) else key)]
    assert len(search) == 2
    assert all(not get_dependencies(graph, key) for key in search)
    with get_task_stream(client) as stream:
        got = result.compute()
    assert rows(got, distributed.PAIR_COLUMNS) == local_pairs(fingerprints, 3, None)
    workers = {task["worker"] for task in stream.data if "_job_pairs" in str(task["key"])}
    assert len(workers) == 2


@pytest.mark.parametrize("parts", [1, 2, 7, distributed._COMPARED_PARTS, distributed._COMPARED_PARTS + 1, 150])
@settings(max_examples=25, deadline=None)
@given(pairs=st.integers(0, 400), seed=st.integers(0, 2**32 - 1))
def test_pairs_are_routed_to_the_partition_holding_their_row(parts, pairs, seed) -> None:
    """Each bucket holds, in input order, the pairs whose row lies in its partition, the row
    made local to it; with empty partitions, and on both sides of the number of partitions
    up to which rows are numbered by comparisons rather than a bisection."""
    rng = np.random.default_rng(seed)
    sizes = rng.integers(0, 6, parts) * rng.integers(0, 2, parts)  # about half empty
    offsets = distributed._partition_offsets(*sizes.tolist())
    total = int(offsets[-1])
    row = rng.integers(0, max(total, 1), pairs if total else 0)
    other = rng.integers(0, 2**40, row.size)
    distance = rng.integers(0, 4, row.size).astype(np.uint8)
    keys = pd.Series([f"k{value}" for value in other.tolist()], dtype=object)
    buckets = distributed._route(row, other, distance, offsets, keys)
    assert len(buckets) == parts
    for part, (local, others, distances, picked_keys) in enumerate(buckets):
        chosen = np.flatnonzero((row >= offsets[part]) & (row < offsets[part + 1]))
        assert np.array_equal(local, row[chosen] - offsets[part])
        assert np.array_equal(others, other[chosen]) and np.array_equal(distances, distance[chosen])
        assert picked_keys.tolist() == [f"k{value}" for value in other[chosen].tolist()]


def test_keys_are_read_only_from_the_files_holding_a_pair(tmp_path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Random input with one planted pair: the routing tasks read the key column of the two
    files holding its rows and no other, even where a routing group holds several files."""
    fingerprints = np.random.default_rng(15).integers(0, 2**64, 2000, dtype=np.uint64, endpoint=False)
    fingerprints[250] = fingerprints[1800] ^ np.uint64(0b101)
    write_files(fingerprints, tmp_path, [200] * 10)
    read: list[str] = []
    real_read_keys = distributed._read_keys

    def counting_read_keys(path: str, key_dtype: object) -> pd.Series:
        read.append(path)
        return real_read_keys(path, key_dtype)

    monkeypatch.setattr(distributed, "_read_keys", counting_read_keys)
    result = distributed.find_all(str(tmp_path / "*.parquet"), k=3, workers=2)
    assert distributed._route_group_size(10, 2) > 1  # the pair's group holds other files
    got = result.compute(scheduler="synchronous")
    assert rows(got, distributed.PAIR_COLUMNS) == [(250, 1800, 2)]
    assert sorted(Path(path).name for path in read) == ["part-001.parquet", "part-009.parquet"]


def test_series_input_uses_the_index_as_key(client: Client) -> None:
    fingerprints = random_input(1000, seed=4)
    index = pd.Index([f"k{i}" for i in range(fingerprints.size)])
    series = dd.from_pandas(pd.Series(fingerprints, index=index), npartitions=3)
    got = distributed.find_all(series, k=3).compute()
    expected = sorted((*tuple(sorted((index[a], index[b]))), d) for a, b, d in local_pairs(fingerprints, 3, None))
    assert rows(got, distributed.PAIR_COLUMNS) == expected


def test_more_partitions_than_rows_and_empty_result(client: Client) -> None:
    fingerprints = np.array([0, 2**64 - 1, 0x00FF_00FF_00FF_00FF], dtype=np.uint64)  # 32+ bits apart
    got = distributed.find_all(as_frame(fingerprints, npartitions=3), k=3, npartitions=8).compute()
    assert got.empty and list(got.columns) == list(distributed.PAIR_COLUMNS)


# -- query_many ------------------------------------------------------------------------


def brute_force_query(queries: np.ndarray, corpus: np.ndarray, k: int) -> list[tuple[int, int, int]]:
    distances = np.bitwise_count(queries[:, None] ^ corpus[None, :])
    query_rows, corpus_rows = np.nonzero(distances <= k)
    return sorted(zip(query_rows.tolist(), corpus_rows.tolist(), distances[query_rows, corpus_rows].tolist()))


@pytest.mark.parametrize("k", [3, 1])
def test_query_many_equals_brute_force(client: Client, k: int) -> None:
    rng = np.random.default_rng(5)
    corpus = np.concatenate([clustered_input(2000, seed=5), duplicate_heavy_input(500, seed=6)])
    # Queries: near corpus items, exact corpus items (distance 0), repeats, and random misses.
    queries = np.concatenate(
        [_flip(rng.choice(corpus, 150), rng, 4), corpus[:20], corpus[:20], rng.integers(0, 2**64, 30, dtype=np.uint64)]
    )
    series = dd.from_pandas(pd.Series(queries), npartitions=2)
    got = distributed.query_many(series, as_frame(corpus, npartitions=3), k=k).compute()
    expected = brute_force_query(queries, corpus, k)
    assert len(expected) > 200
    assert rows(got, distributed.QUERY_COLUMNS) == expected


# -- clusters --------------------------------------------------------------------------


@pytest.mark.parametrize("kind", sorted(INPUTS))
def test_clusters_equal_single_machine(client: Client, kind: str) -> None:
    fingerprints = INPUTS[kind]()
    got = distributed.clusters(as_frame(fingerprints), k=3).compute()
    groups = sorted(sorted(members) for members in got.groupby("cluster")["key"].agg(list))
    assert groups == sorted(find_clusters(fingerprints, k=3))
    with_singletons = distributed.clusters(
        as_frame(fingerprints), k=3, include_singletons=True, workers=6, fan_in=2
    ).compute()  # many jobs: forests merged over several levels
    groups = sorted(sorted(members) for members in with_singletons.groupby("cluster")["key"].agg(list))
    assert groups == sorted(find_clusters(fingerprints, k=3, include_singletons=True))


# -- CLI helpers -----------------------------------------------------------------------


def test_export_then_pairs_job_matches_database_pairs(client: Client, tmp_path) -> None:
    fingerprints = clustered_input(1500, seed=8)
    with simdb.open(str(tmp_path / "db"), k=3) as db:
        db.add_many((f"doc-{i}", int(fp)) for i, fp in enumerate(fingerprints))
        exported = distributed.export_parquet(db, tmp_path / "fingerprints.parquet")
        expected = sorted((*tuple(sorted((a, b))), d) for a, b, d, _ in db.pairs(k=3))
    assert exported == fingerprints.size
    summary = distributed.run_pairs_job(
        str(tmp_path / "*.parquet"), tmp_path / "pairs", k=3, scheduler=client.scheduler.address
    )
    assert summary["rows"] == fingerprints.size
    assert summary["pairs"] == len(expected)
    assert summary["tables"] == 10 and summary["workers"] == 2
    got = pd.read_parquet(tmp_path / "pairs")
    assert rows(got, distributed.PAIR_COLUMNS) == expected
    with pytest.raises(InvalidInputError, match="already holds"):
        distributed.run_pairs_job(str(tmp_path / "*.parquet"), tmp_path / "pairs", scheduler=client.scheduler.address)


def test_an_export_cut_short_leaves_the_earlier_file_whole(tmp_path, monkeypatch) -> None:
    """Found by an adversarial probe: Ctrl-C during ``export --format parquet`` replaced an
    earlier export by a valid Parquet file of fewer rows."""
    target = tmp_path / "fingerprints.parquet"
    with simdb.open(str(tmp_path / "db"), k=3) as db:
        db.add_many((f"doc-{i}", i) for i in range(50))
        assert distributed.export_parquet(db, target) == 50
        db.add_many((f"more-{i}", i) for i in range(50))
        monkeypatch.setattr(distributed, "EXPORT_CHUNK", 10)
        chunks = distributed._document_chunks

        def interrupted(database: simdb.Database, size: int) -> Iterator[tuple[list[str], list[int]]]:
            for number, chunk in enumerate(chunks(database, size)):
                if number == 3:
                    raise KeyboardInterrupt
                yield chunk

        monkeypatch.setattr(distributed, "_document_chunks", interrupted)
        with pytest.raises(KeyboardInterrupt):
            distributed.export_parquet(db, target)
    assert pd.read_parquet(target)["key"].tolist() == [f"doc-{i}" for i in range(50)]
    assert [path.name for path in tmp_path.iterdir() if path.name.endswith(".partial")] == []


def test_a_parquet_export_follows_a_link_and_refuses_a_fifo(tmp_path) -> None:
    """Found by a faults probe: the Parquet export renamed its file over a symbolic link, a
    FIFO or a device (as root, /dev/full), where the text exports write through them."""
    real = tmp_path / "real.parquet"
    real.write_text("an earlier export")
    link = tmp_path / "link.parquet"
    link.symlink_to(real)
    fifo = tmp_path / "fifo.parquet"
    os.mkfifo(fifo)
    with simdb.open(str(tmp_path / "db"), k=3) as db:
        db.add_many((f"doc-{i}", i) for i in range(20))
        assert distributed.export_parquet(db, link) == 20
        with pytest.raises(InvalidInputError, match="not a regular file"):
            distributed.export_parquet(db, fifo)
    assert link.is_symlink() and pd.read_parquet(link)["key"].tolist() == [f"doc-{i}" for i in range(20)]
    assert fifo.is_fifo()


def test_pairs_job_takes_dictionary_encoded_keys_and_never_pairs_a_key_with_itself(client: Client, tmp_path) -> None:
    """Found by an adversarial probe: dictionary-encoded Parquet keys failed with
    "unexpected TypeError: Unordered Categoricals ...", and a key on rows of two files was
    paired with itself."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    shards = {"s1": (["a1", "a2", "dup"], [1, 3, 7]), "s2": (["b1", "dup"], [2, 7])}
    for encoded in (False, True):
        directory = tmp_path / ("dictionary" if encoded else "plain")
        directory.mkdir()
        for name, (keys, values) in shards.items():
            key_column = pa.array(keys).dictionary_encode() if encoded else pa.array(keys)
            table = pa.table({"key": key_column, "fingerprint": pa.array(values, pa.uint64())})
            pq.write_table(table, directory / f"{name}.parquet")
        distributed.run_pairs_job(
            str(directory / "*.parquet"), directory / "pairs", k=3, scheduler=client.scheduler.address
        )
    plain, encoded_pairs = (
        rows(pd.read_parquet(tmp_path / name / "pairs"), distributed.PAIR_COLUMNS) for name in ("plain", "dictionary")
    )
    assert plain == encoded_pairs
    assert all(key_a < key_b for key_a, key_b, _ in plain)  # so never a key with itself
    # Every pair of distinct keys within 3 bits, by brute force over the rows.
    rows_in = [(key, value) for keys, values in shards.values() for key, value in zip(keys, values)]
    expected = sorted(
        (min(a, b), max(a, b), (x ^ y).bit_count())
        for (a, x), (b, y) in itertools.combinations(rows_in, 2)
        if a != b and (x ^ y).bit_count() <= 3
    )
    assert plain == expected


def test_pairs_job_without_scheduler_starts_its_own_cluster(tmp_path) -> None:
    fingerprints = random_input(500, seed=9)
    pd.DataFrame({"key": np.arange(fingerprints.size), "fingerprint": fingerprints}).to_parquet(tmp_path / "in.parquet")
    summary = distributed.run_pairs_job(tmp_path / "in.parquet", tmp_path / "out", workers=1)
    assert summary["scheduler"] == "local" and summary["workers"] == 1
    got = pd.read_parquet(tmp_path / "out")
    assert rows(got, distributed.PAIR_COLUMNS) == local_pairs(fingerprints, 3, None)


def test_clusters_job_writes_parquet_equal_to_find_clusters(client: Client, tmp_path) -> None:
    fingerprints = duplicate_heavy_input(800, seed=12)
    pd.DataFrame({"key": np.arange(fingerprints.size), "fingerprint": fingerprints}).to_parquet(tmp_path / "in.parquet")
    summary = distributed.run_clusters_job(
        tmp_path / "in.parquet", tmp_path / "clusters", k=3, scheduler=client.scheduler.address
    )
    expected = sorted(find_clusters(fingerprints, k=3))
    got = pd.read_parquet(tmp_path / "clusters")
    assert sorted(sorted(members) for members in got.groupby("cluster")["key"].agg(list)) == expected
    assert summary["clusters"] == len(expected) and summary["clustered_keys"] == sum(map(len, expected))


# -- errors and the optional import ----------------------------------------------------


def test_bad_inputs_are_refused_before_running(client: Client) -> None:
    frame = dd.from_pandas(pd.DataFrame({"key": [1, 2], "fp": np.array([1, 2], np.uint64)}), npartitions=1)
    with pytest.raises(InvalidInputError, match="fingerprint"):
        distributed.find_all(frame)
    floats = dd.from_pandas(pd.DataFrame({"key": [1, 2], "fingerprint": [1.0, 2.0]}), npartitions=1)
    with pytest.raises(InvalidFingerprintError, match="float64"):
        distributed.find_all(floats)
    with pytest.raises(InvalidInputError):
        distributed.find_all([1, 2, 3])
    with pytest.raises(InvalidInputError):
        distributed.find_all(as_frame(np.arange(3, dtype=np.uint64)), k=3, blocks=2)


def test_a_null_key_with_a_near_duplicate_is_refused_naming_its_row(tmp_path: Path) -> None:
    # Found by an adversarial probe: pandas' "boolean value of NA is ambiguous" came through.
    frame = pd.DataFrame({"key": ["a", None, "c"], "fingerprint": np.array([1, 1, 3], np.uint64)})
    frame.to_parquet(tmp_path / "nullkey.parquet")
    for source, where in (
        (dd.from_pandas(frame, npartitions=1), "input partition 0"),
        (str(tmp_path / "nullkey.parquet"), "nullkey.parquet"),
    ):
        with pytest.raises(InvalidInputError, match=f"{where}: row 1 has no key"):
            distributed.find_all(source, k=3).compute(scheduler="synchronous")
    apart = frame.assign(
        fingerprint=np.array([1, 0xFFFF_0000_0000_0000, 3], np.uint64)
    )  # the keyless row pairs with none
    found = distributed.find_all(dd.from_pandas(apart, npartitions=1), k=3).compute(scheduler="synchronous")
    assert found[["key_a", "key_b"]].values.tolist() == [["a", "c"]]


def test_parquet_that_cannot_be_read_is_refused_naming_it(tmp_path: Path) -> None:
    # Found by an adversarial probe: pyarrow's ArrowInvalid and a KeyError came through.
    (tmp_path / "junk.parquet").write_text("not parquet")
    pd.DataFrame({"key": ["a", "b"], "fp": np.array([1, 2], np.uint64)}).to_parquet(tmp_path / "nofp.parquet")
    for name in ("junk.parquet", "nofp.parquet"):
        with pytest.raises(InvalidInputError, match=name):
            distributed.find_all(str(tmp_path / name))
    # A new-user probe: a missing file was pyarrow's FileNotFoundError, not a SimdbError.
    for missing in ("nope.parquet", "nope-*.parquet"):
        with pytest.raises(InvalidInputError, match="nope") as raised:
            distributed.find_all(str(tmp_path / missing))
        assert raised.value.argument == "fingerprints" and raised.value.value == str(tmp_path / missing)


def test_missing_dask_gives_the_install_hint(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "dask.dataframe", None)  # makes the import fail
    with pytest.raises(SimdbError, match=re.escape(simdb.errors.DASK_INSTALL_HINT)):
        distributed.find_all("anything.parquet")


def test_without_pandas_the_module_imports_and_use_gives_the_install_hint() -> None:
    """Issue 15: pandas (and Dask) made unimportable in a fresh interpreter."""
    code = (
        "import sys; sys.modules['pandas'] = None; sys.modules['dask'] = None\n"
        "import simdb.distributed as d\n"
        "from simdb.errors import DaskNotInstalledError\n"
        "assert d.DaskNotInstalledError is DaskNotInstalledError\n"
        "try:\n"
        "    d.find_all('x.parquet')\n"
        "except DaskNotInstalledError as error:\n"
        "    print(error.hint)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], check=False, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == simdb.errors.DASK_INSTALL_HINT


def test_importing_simdb_does_not_import_dask() -> None:
    code = "import sys, simdb, simdb.allpairs, simdb.distributed; print(any(m.startswith('dask') for m in sys.modules))"
    assert (
        subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip()
        == "False"
    )
