"""Batch near-duplicate search on Dask: the all-pairs search of :mod:`simdb.allpairs`, spread
over a cluster (Manku's MapReduce batch mode).  Needs the optional extra: ``pip install
'.[dask]'`` in simdb's checkout.  Importing :mod:`simdb` never imports Dask; this module imports it on first use.

Input is a table of ``(key, fingerprint)`` rows: a Dask DataFrame with those two columns, a
Dask Series of fingerprints (its index is the key), or a path or glob of Parquet files with
those two columns (as written by :func:`export_parquet`).  Fingerprints are uint64; an int64
column holding the same 64 bits (what many engines write for unsigned values) is accepted
and reinterpreted bit for bit, so ``-1`` means ``0xFFFF_FFFF_FFFF_FFFF``.

How :func:`find_all` runs (no shuffle of the rows), for a plan of T tables (10 for k=3 and
5 blocks), N rows in P input partitions and W worker threads:

1. **Every worker reads every fingerprint** (8 bytes per row: 160 MB at 20M, 8 GB at 1B).
   For Parquet input each worker's search task reads every file's fingerprint column
   itself, so no worker waits on another and the scheduler has no data to keep the search
   tasks beside; an input partition is one file.  For a Dask DataFrame one task per
   partition takes its fingerprint column, and each search task gathers them all,
   fetching the partitions it lacks before it starts.
2. **Each job owns a share of the search.**  :func:`simdb.allpairs.plan_search_jobs` cuts
   the tables into groups that share a radix pass (cut further by a digit every table of
   the group has in its prefix only where a job would exceed :data:`MAX_JOB_ROWS` rows).
   :func:`simdb.allpairs.bundle_jobs` deals them into one task per worker of equal
   estimated cost, since Dask does not place tasks by size: jobs fill one bundle after the
   other, and the job that overflows a bundle is cut there into two shares of rows by that
   digit, so at most one cut per worker.
   A job picks its rows (one O(N) pass), sorts only those and reports the pairs its
   tables claim, duplicates collapsed and expanded as on one machine.  Rows sharing a
   prefix are always in the same share, and the claim rule reports each pair in one table,
   so the jobs' outputs are disjoint and complete: no row moves between them.  A worker's
   threads share its task's jobs (as :func:`simdb.allpairs.find_all`'s threads do) and its
   one copy of the fingerprints.
3. **Positions to keys.**  A job's pairs are positions in the concatenated array; they are
   routed to the group of input partitions holding the left row, which adds its key, then
   to the group holding the right row, which adds that key (a group is a few partitions,
   so that there are not P**2 routing pieces for P partitions).  Only pairs move, never
   rows; for Parquet input a file's keys are read only where some pair needs them.

Total work is one process's search plus one O(N) pass per job and the copy of the
fingerprints to each worker, so W workers are close to W times faster where they do not
share memory bandwidth
(measurements: bench/RESULTS.md, section "Distributed").  :func:`clusters` runs the same jobs,
reduces each task's edges to a spanning forest with a union-find on the worker, and merges
the forests in a tree on the workers: the pair lists never meet on one machine, only the
labels of fingerprints that are in some cluster (16 bytes each) do, on one worker.
:func:`query_many` still uses the earlier plan: one shuffle of the distinct fingerprints
per table (see its docstring).
"""

from __future__ import annotations

import logging
import operator
import os
import time
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple

import numpy as np

from simdb.allpairs import (
    DEFAULT_BLOCK_SIZE,
    ComponentLabeler,
    SearchJob,
    _run_jobs,
    _share_edge_blocks,
    _share_pair_blocks,
    bundle_jobs,
    iter_table_pair_blocks,
    plan_search_jobs,
    resolve_workers,
)
from simdb.arrays import compact, distinct, search_sorted
from simdb.errors import (
    DASK_INSTALL_HINT,
    DaskNotInstalledError,
    InvalidFingerprintError,
    InvalidInputError,
)
from simdb.plan import BITS, TablePlan
from simdb.storage import partial_beside, replace_durably
from simdb.validation import check_fingerprint_dtype, check_int

if TYPE_CHECKING:  # only for annotations: importing this module must not need Dask or pandas
    import dask.dataframe as dd
    import pandas as pd

    from simdb.database import Database

__all__ = [
    "DaskNotInstalledError",
    "clusters",
    "export_parquet",
    "find_all",
    "query_many",
    "run_clusters_job",
    "run_pairs_job",
]

KEY = "key"
FINGERPRINT = "fingerprint"
PAIR_COLUMNS = ("key_a", "key_b", "distance")
QUERY_COLUMNS = ("query_key", "corpus_key", "distance")

#: Rows per Parquet row group written by :func:`export_parquet` (about 30 MB of int keys).
EXPORT_CHUNK = 1 << 20


def _pandas() -> Any:
    """Import pandas or raise :class:`DaskNotInstalledError` with the fix."""
    try:
        import pandas
    except ImportError as error:
        raise DaskNotInstalledError(
            f"simdb.distributed needs pandas and Dask, which are not installed ({error})",
            DASK_INSTALL_HINT,
        ) from error
    return pandas


def _dask() -> Any:
    """Import ``dask.dataframe`` or raise :class:`DaskNotInstalledError` with the fix."""
    _pandas()
    try:
        import dask.dataframe as dask_dataframe
    except ImportError as error:
        raise DaskNotInstalledError(
            f"simdb.distributed needs Dask, which is not installed ({error})",
            DASK_INSTALL_HINT,
        ) from error
    return dask_dataframe


# --------------------------------------------------------------------------------------
# Input
# --------------------------------------------------------------------------------------


def _fingerprint_column(values: pd.Series) -> np.ndarray:
    """The column as uint64 (int64 reinterpreted bit for bit).  O(n), no copy for numpy dtypes."""
    dtype = values.dtype
    if isinstance(dtype, np.dtype):
        return values.to_numpy().view(np.uint64)  # 64-bit ints: checked by check_fingerprint_dtype
    # Nullable or Arrow-backed 64-bit ints: refuse nulls, then the same reinterpretation.
    if values.hasnans:
        raise InvalidFingerprintError("the fingerprint column has missing values")
    signed = "uint" not in str(dtype).lower()
    return values.to_numpy(dtype=np.int64 if signed else np.uint64).view(np.uint64)


def _plain_keys(keys: pd.Series) -> pd.Series:
    """``keys`` with a fresh index, in the dtype keys are handled in: categorical keys
    (dictionary-encoded Parquet) as their categories' dtype, since pairs order their keys
    and unordered categories refuse to."""
    keys = keys.reset_index(drop=True)
    return keys.astype(keys.dtype.categories.dtype) if isinstance(keys.dtype, _pandas().CategoricalDtype) else keys


def _rows_meta(keys: pd.Series) -> pd.DataFrame:
    """The empty (key, fingerprint uint64) frame that describes partitions of these keys."""
    return _pandas().DataFrame({KEY: _plain_keys(keys), FINGERPRINT: np.zeros(0, dtype=np.uint64)})


def _normalise_rows(part: pd.DataFrame) -> pd.DataFrame:
    """One input partition as (key, fingerprint uint64) with a fresh index."""
    return _pandas().DataFrame({KEY: _plain_keys(part[KEY]), FINGERPRINT: _fingerprint_column(part[FINGERPRINT])})


def _read_rows(path: str, key_dtype: Any) -> pd.DataFrame:
    """One Parquet file as (key, fingerprint uint64), keys in the dtype Dask reads them as."""
    return _pandas().DataFrame({KEY: _read_keys(path, key_dtype), FINGERPRINT: _read_fingerprints(path)})


def _read_fingerprints(path: str, rows: int | None = None) -> np.ndarray:
    """The fingerprint column of one Parquet file (of ``rows`` rows, its footer's count, when
    given) as uint64, int64 reinterpreted bit for bit.  Reads that column only, on this
    thread (the search beside it is the parallel part)."""
    import pyarrow.parquet as pq

    column = pq.read_table(path, columns=[FINGERPRINT], use_threads=False).column(0)
    if column.null_count:
        raise InvalidFingerprintError(f"the fingerprint column of {path} has missing values")
    if rows is not None and len(column) != rows:
        raise InvalidInputError(f"{path} changed while it was read: {len(column)} rows, its footer said {rows}")
    values = column.to_numpy()
    check_fingerprint_dtype(values.dtype, f"the fingerprint column of {path}")  # files may differ
    return values.view(np.uint64)


def _read_keys(path: str, key_dtype: Any) -> pd.Series:
    """The key column of one Parquet file, in the dtype Dask reads it as."""
    import pyarrow.parquet as pq

    keys = pq.read_table(path, columns=[KEY], use_threads=False).column(0).to_pandas()
    return keys if keys.dtype == key_dtype else keys.astype(key_dtype)


def _parquet_file_rows(files: list[str]) -> list[int]:
    """Each Parquet file's row count, from its footer."""
    import pyarrow.parquet as pq

    return [int(pq.ParquetFile(path).metadata.num_rows) for path in files]


def _as_rows(data: Any, name: str = "fingerprints") -> dd.DataFrame:
    """``data`` as a Dask DataFrame of (key, fingerprint uint64).  Lazy: nothing is read."""
    dask_dataframe = _dask()
    if isinstance(data, (str, os.PathLike)):
        # One partition per file, in _parquet_files' order, so that positions in the
        # files' concatenated fingerprints (which each search task reads itself) fall in
        # known partitions.  Dask's own reader may split or join files.
        try:
            files = _parquet_files(data)
            schema = dask_dataframe.read_parquet(files, columns=[KEY, FINGERPRINT])._meta
        except InvalidInputError:
            raise
        except (KeyError, ValueError, OSError) as error:  # pyarrow's ArrowInvalid is a ValueError
            reason = (str(error).splitlines() or [type(error).__name__])[0]
            raise InvalidInputError(
                f"{name} {os.fspath(data)!r}: cannot read '{KEY}' and '{FINGERPRINT}' columns from it "
                f"as Parquet ({reason})",
                "give Parquet files such as simdb export --format parquet writes",
            ) from None
        check_fingerprint_dtype(schema[FINGERPRINT].dtype)
        meta = _rows_meta(schema[KEY])
        return dask_dataframe.from_map(_read_rows, files, key_dtype=meta[KEY].dtype, meta=meta, enforce_metadata=False)
    elif isinstance(data, dask_dataframe.Series):
        frame = data.to_frame(name=FINGERPRINT).reset_index()
        frame = frame.rename(columns={frame.columns[0]: KEY})
    elif isinstance(data, dask_dataframe.DataFrame):
        missing = {KEY, FINGERPRINT} - set(data.columns)
        if missing:
            raise InvalidInputError(
                f"{name} lacks the column(s) {sorted(missing)}; it needs '{KEY}' and '{FINGERPRINT}'",
                "rename the columns, or pass a Series of fingerprints indexed by key",
            )
        frame = data[[KEY, FINGERPRINT]]
    else:
        raise InvalidInputError(
            f"{name} must be a Dask DataFrame or Series, or a Parquet path or glob, not {type(data).__name__}"
        )
    check_fingerprint_dtype(frame[FINGERPRINT].dtype)
    return frame.map_partitions(_normalise_rows, meta=_rows_meta(frame._meta[KEY]))


def _plan(k: Any, blocks: Any) -> TablePlan:
    """The plan for ``k`` and ``blocks`` (numpy ints accepted), validated."""
    return TablePlan.create(k, blocks)


# --------------------------------------------------------------------------------------
# Per-partition work (runs on the workers; plain pandas and numpy)
# --------------------------------------------------------------------------------------


def _prefix_dtype(table_bits: int) -> type[np.unsignedinteger[Any]]:
    return np.uint32 if table_bits <= 32 else np.uint64


def _with_prefix(part: pd.DataFrame, plan: TablePlan, table: int) -> pd.DataFrame:
    """Add the table's prefix (its leading bits, as ``Table.permute_array`` would put them on
    top) as the shuffle key.  Only the leading blocks are moved, not the whole permutation,
    because this runs on every row once per table.  O(n * leading blocks)."""
    spec = plan.tables[table]
    fingerprints = part[FINGERPRINT].to_numpy()
    prefix = np.zeros(fingerprints.size, dtype=np.uint64)
    prefix_low = BITS - spec.leading_bits
    for source, width, target in spec.moves:
        if target >= prefix_low:  # a leading block: its place inside the prefix
            block = (fingerprints >> np.uint64(source)) & np.uint64((1 << width) - 1)
            prefix |= block << np.uint64(target - prefix_low)
    return part.assign(prefix=prefix.astype(_prefix_dtype(spec.leading_bits)))


def _claimed_blocks(
    fingerprints: np.ndarray, plan: TablePlan, table: int, k: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """All pairs the table claims among distinct ``fingerprints``, as three arrays."""
    rows_a, rows_b, distances = [], [], []
    for row_a, row_b, distance in iter_table_pair_blocks(fingerprints, plan, table, k):
        rows_a.append(row_a)
        rows_b.append(row_b)
        distances.append(distance)
    if not rows_a:
        empty = np.zeros(0, dtype=np.int64)
        return empty, empty, np.zeros(0, dtype=np.uint8)
    return np.concatenate(rows_a), np.concatenate(rows_b), np.concatenate(distances)


def _fp_pairs_meta() -> pd.DataFrame:
    return _pandas().DataFrame(
        {"fp_a": np.zeros(0, np.uint64), "fp_b": np.zeros(0, np.uint64), "distance": np.zeros(0, np.uint8)}
    )


def _cross_table_pairs(part: pd.DataFrame, plan: TablePlan, table: int, k: int) -> pd.DataFrame:
    """Like :func:`_table_pairs` for a partition of distinct fingerprints flagged
    ``in_query`` / ``in_corpus``: the (query fingerprint, corpus fingerprint) pairs.  Runs
    whose prefix holds no query are dropped before comparing, so corpus-only groups cost one
    ``isin``.  Table 0 also reports fingerprints present on both sides, at distance 0
    (equal fingerprints agree on every block, so table 0 is the first agreeing one)."""
    pd = _pandas()
    prefix = part["prefix"].to_numpy()
    in_query = part["in_query"].to_numpy()
    in_corpus = part["in_corpus"].to_numpy()
    useful = np.isin(prefix, distinct(prefix[in_query])) & np.isin(prefix, distinct(prefix[in_corpus]))
    fingerprints = part[FINGERPRINT].to_numpy()[useful]
    in_query, in_corpus = in_query[useful], in_corpus[useful]
    row_a, row_b, distance = _claimed_blocks(fingerprints, plan, table, k)
    a_to_b = in_query[row_a] & in_corpus[row_b]
    b_to_a = in_query[row_b] & in_corpus[row_a]
    query_rows = [row_a[a_to_b], row_b[b_to_a]]
    corpus_rows = [row_b[a_to_b], row_a[b_to_a]]
    distances = [distance[a_to_b], distance[b_to_a]]
    if table == 0:
        both = np.flatnonzero(in_query & in_corpus)
        query_rows.append(both)
        corpus_rows.append(both)
        distances.append(np.zeros(both.size, dtype=np.uint8))
    return pd.DataFrame(
        {
            "fp_a": fingerprints[np.concatenate(query_rows)],
            "fp_b": fingerprints[np.concatenate(corpus_rows)],
            "distance": np.concatenate(distances),
        }
    )


def _orient(part: pd.DataFrame) -> pd.DataFrame:
    """Swap each pair so that key_a < key_b (an order users can rely on), and drop pairs of
    a key with itself (a key given on two rows of the input)."""
    same = (part["key_a"] == part["key_b"]).to_numpy(dtype=bool)
    if same.any():
        part = part[~same]
    key_a, key_b = part["key_a"], part["key_b"]
    swap = (key_a > key_b).to_numpy(dtype=bool)
    if not swap.any():
        return part
    return part.assign(key_a=key_a.where(~swap, key_b), key_b=key_b.where(~swap, key_a))


def _flag_sides(part: pd.DataFrame) -> pd.DataFrame:
    """Distinct fingerprints of a partition of tagged rows shuffled by fingerprint, with
    whether each occurs among the queries and among the corpus.  O(n log n)."""
    pd = _pandas()
    values, inverse = np.unique(part[FINGERPRINT].to_numpy(), return_inverse=True)
    is_query = part["is_query"].to_numpy()
    in_query = np.zeros(values.size, dtype=bool)
    in_corpus = np.zeros(values.size, dtype=bool)
    in_query[inverse[is_query]] = True
    in_corpus[inverse[~is_query]] = True
    return pd.DataFrame({FINGERPRINT: values, "in_query": in_query, "in_corpus": in_corpus})


# --------------------------------------------------------------------------------------
# Graph building
# --------------------------------------------------------------------------------------


def _partitions(rows: dd.DataFrame, npartitions: int | None) -> int:
    if npartitions is None:
        return max(1, rows.npartitions)
    return check_int("npartitions", npartitions, minimum=1)


def _per_table_pairs(
    distinct: dd.DataFrame,
    plan: TablePlan,
    k: int,
    npartitions: int,
    pairs_in_partition: Callable[[pd.DataFrame, TablePlan, int, int], pd.DataFrame],
) -> dd.DataFrame:
    """Shuffle ``distinct`` by each table's prefix and collect the pairs each table claims.
    T shuffles of the distinct rows; the union needs no deduplication (claim rule)."""
    dask_dataframe = _dask()
    per_table = []
    for table in range(len(plan.tables)):
        meta = _with_prefix(distinct._meta, plan, table)
        keyed = distinct.map_partitions(_with_prefix, plan, table, meta=meta)
        shuffled = keyed.shuffle(on="prefix", npartitions=npartitions, ignore_index=True)
        per_table.append(shuffled.map_partitions(pairs_in_partition, plan, table, k, meta=_fp_pairs_meta()))
    return dask_dataframe.concat(per_table, ignore_index=True) if len(per_table) > 1 else per_table[0]


def _keyed(rows: dd.DataFrame, side: str) -> dd.DataFrame:
    return rows.rename(columns={KEY: f"key_{side}", FINGERPRINT: f"fp_{side}"})


def _expand(fp_pairs: dd.DataFrame, rows_a: dd.DataFrame, rows_b: dd.DataFrame, npartitions: int) -> dd.DataFrame:
    """Join fingerprint pairs to the keys holding each fingerprint (two hash joins); a
    fingerprint held by several keys expands to all of them."""
    joined = fp_pairs.merge(_keyed(rows_a, "a"), on="fp_a", how="inner", npartitions=npartitions)
    joined = joined.merge(_keyed(rows_b, "b"), on="fp_b", how="inner", npartitions=npartitions)
    return joined[["key_a", "key_b", "distance"]]


#: Search tasks a job is cut into at most, whatever the workers.  Every task reads and
#: picks from every fingerprint, a pass that cost 0.16 s of the 9.4 s a one-thread search of
#: 20M random fingerprints took, so T tasks take about (9.4 / T + 0.16) s each: past 512
#: tasks, any number of further workers could save at most a tenth of that, each at the
#: cost of a full pass.  Dask's graph also grows as tasks x routing groups: 10,000 tasks
#: over 600 rows took 181 s to build and 167 s to run, against 0.2 s and 0.1 s for 64.
MAX_SEARCH_TASKS = 512


def _worker_shape(workers: int | None) -> tuple[int, int]:
    """(search tasks, threads each) to plan for: ``workers`` single-thread tasks, else one
    task per worker of the Dask client in use with that worker's threads (the fewest any
    has), else one task on every local core (Dask's local scheduler runs in this process);
    never more than :data:`MAX_SEARCH_TASKS` tasks."""
    if workers is not None:
        # A cluster's workers, which may be other machines': not capped by this one's cores.
        return min(check_int("workers", workers, minimum=1), MAX_SEARCH_TASKS), 1
    try:
        from distributed import get_client

        threads = list(get_client().nthreads().values())
        return min(max(1, len(threads)), MAX_SEARCH_TASKS), max(1, min(threads, default=1))
    except (ImportError, ValueError):  # no distributed scheduler: Dask's local threads
        return 1, resolve_workers(None)


def _fingerprints_of(part: pd.DataFrame) -> np.ndarray:
    return np.ascontiguousarray(part[FINGERPRINT].to_numpy(np.uint64))


def _partition_offsets(*sizes: int) -> np.ndarray:
    """The start offset of each input partition in the concatenated fingerprints, then the total."""
    offsets = np.zeros(len(sizes) + 1, dtype=np.int64)
    np.cumsum(sizes, out=offsets[1:])
    return offsets


def _all_fingerprints(*sources: np.ndarray | str) -> tuple[np.ndarray, np.ndarray]:
    """(every fingerprint in input order, :func:`_partition_offsets`): ``sources`` are each
    input partition's fingerprints, or the Parquet file they are read from.  One array is
    filled in place, so a file's column is freed before the next is read."""
    files = [source for source in sources if isinstance(source, str)]
    footer_rows = iter(_parquet_file_rows(files))
    sizes = [next(footer_rows) if isinstance(source, str) else source.size for source in sources]
    offsets = _partition_offsets(*sizes)
    values = np.empty(int(offsets[-1]), dtype=np.uint64)
    for source, size, start in zip(sources, sizes, offsets.tolist()):
        values[start : start + size] = _read_fingerprints(source, size) if isinstance(source, str) else source
    return values, offsets


#: Pairs on their way to the input partition holding one of their rows: (that row, local
#: to the partition; the other row, as a global position; distance; the key found so far,
#: or None).
Bucket = tuple[np.ndarray, np.ndarray, np.ndarray, Any]


#: Partitions up to which :func:`_route` numbers a pair's partition by one comparison per
#: partition edge rather than a bisection: for the 54M pairs of one search task on 20M
#: clustered fingerprints (7 groups), numpy's searchsorted took 1.5-1.7 s, the comparisons
#: 0.2 s; on random positions, 32 partitions: 2.4 s against 0.8 s; 128: 2.7 s against 3.4 s.
_COMPARED_PARTS = 64


def _route(
    row: np.ndarray, other: np.ndarray, distance: np.ndarray, offsets: np.ndarray, keys: Any = None
) -> list[Bucket]:
    """Split pairs by the input partition holding ``row`` (a global position): one bucket
    per partition, ``row`` made local to it.  O(E log P) to number the partitions (O(E P)
    for at most :data:`_COMPARED_PARTS`), then one linear radix argsort."""
    parts = offsets.size - 1
    if parts == 1:
        return [(row, other, distance, keys)]
    # A narrow dtype lets numpy's stable argsort be a linear radix sort.
    part_of_row: np.ndarray
    if parts <= _COMPARED_PARTS:
        part_of_row = np.zeros(row.size, dtype=np.uint16)
        for start in offsets[1:-1].tolist():
            part_of_row += row >= start
    else:
        part_of_row = (np.searchsorted(offsets, row, side="right") - 1).astype(
            np.uint16 if parts <= 1 << 16 else np.int64
        )
    order = np.argsort(part_of_row, kind="stable")
    bounds = np.searchsorted(part_of_row[order], np.arange(parts + 1))
    buckets = []
    for part in range(parts):
        chosen = order[bounds[part] : bounds[part + 1]]
        picked_keys = None if keys is None else keys.take(chosen).reset_index(drop=True)
        buckets.append((row[chosen] - offsets[part], other[chosen], distance[chosen], picked_keys))
    return buckets


#: Input partitions whose keys one routing task adds, at most.  Pairs are routed twice, by
#: left row to a group of partitions and then by right row to a group, so the second stage
#: takes one piece from each group for each group: G**2 small tasks for G groups (one per
#: partition pair made the scheduler's overhead the tail of a 20M run: 0.4 s; one per
#: (group, partition) pair, 140 pieces for 20 files, 0.2-0.35 s; 49 pieces, 0.13-0.17 s),
#: while a routing task holds the pairs of at most ROUTE_GROUP partitions.
ROUTE_GROUP = 8


def _route_group_size(partitions: int, tasks: int) -> int:
    """Partitions per routing task: at most :data:`ROUTE_GROUP`, and few enough
    that there are about four such tasks per search task (each adds the keys of its
    pairs, the heavy part for inputs with many pairs)."""
    groups = min(partitions, max(-(-partitions // ROUTE_GROUP), 4 * tasks))
    return max(1, -(-partitions // max(1, groups)))


def _job_pairs(
    plan: TablePlan, k: int, jobs: list[SearchJob], threads: int, group: int, *parts: np.ndarray | str
) -> list[Bucket]:
    """Run a bundle of search jobs over every fingerprint (``parts``: each input
    partition's, or the Parquet file holding them) on ``threads`` threads, as
    :func:`simdb.allpairs.find_all` runs its jobs; their pairs, routed by the left row's
    group of ``group`` partitions (:func:`_route_group_size`)."""
    values, offsets = _all_fingerprints(*parts)
    offsets = _group_offsets(offsets, group)
    lefts, rights, distances = [], [], []
    for left, right, distance in _run_jobs(values, plan, k, jobs, _share_pair_blocks, DEFAULT_BLOCK_SIZE, threads):
        lefts.append(left)
        rights.append(right)
        distances.append(distance)
    if not lefts:
        empty = np.zeros(0, dtype=np.int64)
        return _route(empty, empty, np.zeros(0, dtype=np.uint8), offsets)
    return _route(np.concatenate(lefts), np.concatenate(rights), np.concatenate(distances), offsets)


def _merge_buckets(buckets: tuple[Bucket, ...]) -> Bucket:
    """One bucket from several (pairs from every job, or every partition)."""
    keys = [bucket[3] for bucket in buckets if bucket[3] is not None]
    return (
        np.concatenate([bucket[0] for bucket in buckets]),
        np.concatenate([bucket[1] for bucket in buckets]),
        np.concatenate([bucket[2] for bucket in buckets]),
        _pandas().concat(keys, ignore_index=True) if keys else None,
    )


def _key_column(part: pd.DataFrame | str, key_dtype: Any) -> pd.Series:
    """An input partition's keys: its key column, or its Parquet file's (read now)."""
    return _read_keys(part, key_dtype) if isinstance(part, str) else part[KEY].reset_index(drop=True)


def _group_offsets(offsets: np.ndarray, group: int) -> np.ndarray:
    """Where each group of ``group`` consecutive partitions starts, from the partitions'
    :func:`_partition_offsets` (the last entry: the total)."""
    return np.concatenate([offsets[:-1:group], offsets[-1:]])


def _add_keys(
    parts: list[pd.DataFrame | str], first: int, offsets: np.ndarray, key_dtype: Any, bucket: Bucket
) -> tuple[Bucket, pd.Series | None]:
    """``bucket``'s pairs, whose rows are local to the group of partitions ``parts``
    (numbers ``first`` on), ordered by the partition holding the row, and the keys of those
    rows (None when there are no pairs).  Only the files holding some pair's row are read
    (random input at 100M: 17 pairs, 17 files of 100 at most)."""
    rows, other, distance, carried = bucket
    by_part = _route(rows, other, distance, offsets[first : first + len(parts) + 1] - offsets[first], carried)
    pieces = [(part, piece) for part, piece in enumerate(by_part) if piece[0].size]
    if not pieces:
        return bucket, None
    keys = [_key_column(parts[part], key_dtype).take(piece[0]).reset_index(drop=True) for part, piece in pieces]
    for (part, piece), found in zip(pieces, keys):
        missing = np.flatnonzero(found.isna().to_numpy())
        if missing.size:  # a pair needs both keys: a null one cannot be ordered or written
            where = parts[part] if isinstance(parts[part], str) else f"input partition {first + part}"
            raise InvalidInputError(
                f"{where}: row {int(piece[0][missing[0]])} has no key (null), and it has a near-duplicate",
                "give every row a key",
            )
    return _merge_buckets(tuple(piece for _, piece in pieces)), _pandas().concat(keys, ignore_index=True)


def _left_keys(
    parts: list[pd.DataFrame | str], first: int, offsets: np.ndarray, group: int, key_dtype: Any, *buckets: Bucket
) -> list[Bucket]:
    """Pairs whose left row is in this group of partitions: add its key, then route them
    by the right row to its group of ``group`` partitions."""
    (_, other, distance, _), keys = _add_keys(parts, first, offsets, key_dtype, _merge_buckets(buckets))
    return _route(other, np.zeros(other.size, dtype=np.int64), distance, _group_offsets(offsets, group), keys)


def _right_keys(
    parts: list[pd.DataFrame | str], first: int, offsets: np.ndarray, meta: pd.DataFrame, *buckets: Bucket
) -> pd.DataFrame:
    """Pairs whose right row is in this group of partitions: add its key; orient key_a <
    key_b."""
    (_, _, distance, key_a), key_b = _add_keys(parts, first, offsets, meta["key_b"].dtype, _merge_buckets(buckets))
    if key_b is None:
        return meta
    return _orient(_pandas().DataFrame({"key_a": key_a, "key_b": key_b, "distance": distance}))


#: Rows one job searches at most when the input's size is known (Parquet input).  A job's
#: working memory peaks at about 9 bytes per row it searches: at most about 0.9 GB per job,
#: on top of the 8 bytes per input row that every worker holds.  Each cut costs a
#: pass over every row: at 100M rows, picking and sorting the rows of 8 jobs of 50M took
#: 5.6-5.9 s on one thread, of 4 jobs of 100M 3.5 s.
MAX_JOB_ROWS = 100_000_000


class _Inputs(NamedTuple):
    """What the search and routing tasks of :func:`find_all` and :func:`clusters` take."""

    parts: list[Any]  # each input partition: a delayed DataFrame, or its Parquet file
    fingerprints: list[Any]  # what the search tasks read each partition's fingerprints from
    offsets: Any  # :func:`_partition_offsets` of the partitions (delayed for a DataFrame)
    bundles: list[list[SearchJob]]  # the jobs, one bundle per search task
    threads: int  # threads each search task runs its bundle on


def _exchange(data: Any, rows: dd.DataFrame, plan: TablePlan, k: int, workers: int | None) -> _Inputs:
    """The inputs of the search and routing tasks.  For Parquet input the row counts come
    from the footers, so that no job searches more than :data:`MAX_JOB_ROWS` rows."""
    from dask import delayed

    total = None
    parts: list[Any]
    if isinstance(data, (str, os.PathLike)):
        # Each search task reads every file's fingerprint column itself.  A task that
        # depended on the partitions' fingerprints went to the worker holding most of them:
        # measured on 2 workers, both search tasks then ran one after the other on one
        # worker.  Keys are read by the routing tasks, from the files their pairs need.
        parts = _parquet_files(data)
        sources = parts
        offsets: Any = _partition_offsets(*_parquet_file_rows(parts))
        total = int(offsets[-1])
    else:
        parts = rows.to_delayed()
        # Each search task gathers the partitions' fingerprints itself: a worker then
        # fetches what it lacks before it starts, rather than from a worker already busy
        # searching (whose event loop then answers late).
        sources = [delayed(_fingerprints_of, pure=True)(p) for p in parts]
        offsets = delayed(_partition_offsets, pure=True)(*[delayed(len, pure=True)(p) for p in parts])
    # Dask does not place tasks by size, so the search goes in one bundle per worker of
    # equal cost, cutting at most one job per worker, and a worker's threads share its
    # bundle (and its one copy of the fingerprints) by sub-shares.  Each job costs a pass
    # over every row: measured on 20M random fingerprints, 12 jobs took 10.7 CPU-s, 4 jobs 9.4 s.
    tasks, threads = _worker_shape(workers)
    jobs = plan_search_jobs(plan, k, 1, rows=total, max_job_rows=MAX_JOB_ROWS)
    return _Inputs(parts, sources, offsets, bundle_jobs(jobs, tasks), threads)


# --------------------------------------------------------------------------------------
# Public API
# --------------------------------------------------------------------------------------


def find_all(
    fingerprints: Any,
    k: int = 3,
    blocks: int | None = None,
    *,
    npartitions: int | None = None,
    workers: int | None = None,
) -> dd.DataFrame:
    """Every pair of keys whose fingerprints are within ``k`` bits, as a lazy Dask DataFrame
    with columns ``key_a``, ``key_b`` (``key_a < key_b``), ``distance`` (uint8), one
    partition per routing group of up to :data:`ROUTE_GROUP` input partitions.

    ``fingerprints`` is a Dask DataFrame with columns ``key`` and ``fingerprint``, a Dask
    Series of fingerprints indexed by key, or a path or glob of Parquet files with those two
    columns.  The pairs are exactly those :func:`simdb.allpairs.find_all` finds on the same
    fingerprints (mapped to keys), each unordered pair once, identical fingerprints
    included at distance 0.  ``blocks`` picks the plan as there.  ``workers``: how many
    parallel workers to cut the search for (default: the threads of the Dask client in use,
    else the local cores; at most :data:`MAX_SEARCH_TASKS`, past which each one more
    costs more than it saves).  ``npartitions`` is accepted for compatibility and unused: no
    rows are shuffled.

    Cost: the one-process search, its table groups dealt into one task per worker of equal
    cost (at most one group cut per worker), each of which reads every fingerprint once (8
    bytes per row: from the files for Parquet input, else copied once to each worker), and
    each job makes one O(N) pass to pick its rows; the pairs move twice (to the group of
    partitions holding their left row, then to the group holding their right row) to get
    their keys, G**2 small routing tasks for G groups (:func:`_route_group_size`).  See
    the module docstring.
    Nothing runs until the result is computed or written.
    """
    dask_dataframe = _dask()  # first: raises DaskNotInstalledError without the extra
    pd = _pandas()
    from dask import delayed

    plan = _plan(k, blocks)
    rows = _as_rows(fingerprints)
    _partitions(rows, npartitions)  # validated, kept for compatibility
    inputs = _exchange(fingerprints, rows, plan, plan.k, workers)
    parts = inputs.parts
    group = _route_group_size(len(parts), len(inputs.bundles))
    job_out = [
        delayed(_job_pairs, pure=True)(plan, plan.k, bundle, inputs.threads, group, *inputs.fingerprints)
        for bundle in inputs.bundles
    ]
    # Stage 1: to the group of partitions holding the left row (which adds its key), stage
    # 2: to the group holding the right row (which adds its key).
    meta = pd.DataFrame({"key_a": rows._meta[KEY], "key_b": rows._meta[KEY], "distance": np.zeros(0, dtype=np.uint8)})
    starts = range(0, len(parts), group)
    left_out = [
        delayed(_left_keys, pure=True)(
            parts[start : start + group],
            start,
            inputs.offsets,
            group,
            meta["key_a"].dtype,
            *[delayed(operator.getitem, pure=True)(out, number) for out in job_out],
        )
        for number, start in enumerate(starts)
    ]
    right_out = [
        delayed(_right_keys, pure=True)(
            parts[start : start + group],
            start,
            inputs.offsets,
            meta,
            *[delayed(operator.getitem, pure=True)(out, number) for out in left_out],
        )
        for number, start in enumerate(starts)
    ]
    return dask_dataframe.from_delayed(right_out, meta=meta, verify_meta=False)


def query_many(
    queries: Any, corpus: Any, k: int = 3, blocks: int | None = None, *, npartitions: int | None = None
) -> dd.DataFrame:
    """Every (query, corpus document) pair within ``k`` bits, as a lazy Dask DataFrame with
    columns ``query_key``, ``corpus_key``, ``distance`` (uint8).

    ``queries`` and ``corpus`` are each in any form :func:`find_all` accepts (a Series of
    query fingerprints is keyed by its index).  A query equal to a corpus fingerprint is
    reported at distance 0; pairs inside the corpus or inside the batch are not reported.

    Cost: one shuffle of queries + corpus by fingerprint (duplicates collapse, and each
    distinct fingerprint learns which side holds it), T shuffles of the distinct
    fingerprints, then two hash joins back to the keys.  In each table partition only
    prefix groups holding both a query and a corpus fingerprint are compared, so a small
    batch costs the corpus' sorts and shuffles but almost none of its candidate pairs.
    """
    pd = _pandas()
    dask_dataframe = _dask()
    plan = _plan(k, blocks)
    query_rows = _as_rows(queries, "queries")
    corpus_rows = _as_rows(corpus, "corpus")
    parts = _partitions(corpus_rows, npartitions)
    tagged = dask_dataframe.concat(
        [
            query_rows[[FINGERPRINT]].assign(is_query=True),
            corpus_rows[[FINGERPRINT]].assign(is_query=False),
        ],
        ignore_index=True,
    )
    by_fingerprint = tagged.shuffle(on=FINGERPRINT, npartitions=parts, ignore_index=True)
    flag_meta = pd.DataFrame(
        {FINGERPRINT: np.zeros(0, np.uint64), "in_query": np.zeros(0, bool), "in_corpus": np.zeros(0, bool)}
    )
    distinct = by_fingerprint.map_partitions(_flag_sides, meta=flag_meta)
    fp_pairs = _per_table_pairs(distinct, plan, plan.k, parts, _cross_table_pairs)
    pairs = _expand(fp_pairs, query_rows, corpus_rows, parts)
    return pairs.rename(columns=dict(zip(PAIR_COLUMNS, QUERY_COLUMNS)))


def clusters(
    fingerprints: Any,
    k: int = 3,
    blocks: int | None = None,
    *,
    include_singletons: bool = False,
    npartitions: int | None = None,
    workers: int | None = None,
    fan_in: int = 8,
) -> dd.DataFrame:
    """Connected components of the "within ``k`` bits" graph, as a lazy Dask DataFrame with
    columns ``key`` and ``cluster`` (uint64: the smallest fingerprint in the component, the
    same for every key of one cluster).  Keys in no pair and with a unique fingerprint are
    left out unless ``include_singletons``.  The same components as
    :func:`simdb.allpairs.find_clusters`.

    How: the search jobs of :func:`find_all` run without expanding duplicates (a group of
    10,000 identical pages is one node), and each job reduces its edges to a spanning forest
    over the fingerprints it links (union-find, on the worker).  Forests are merged
    ``fan_in`` at a time in a tree on the workers, so no pair list is ever gathered: the
    largest object is the final forest, 16 bytes per fingerprint that is in some cluster,
    held by one worker (about 1.5 billion such fingerprints in 24 GiB), never the driver.
    Each input partition then looks its fingerprints up in it.  ``workers`` as in
    :func:`find_all`; ``npartitions`` is accepted for compatibility and unused.
    """
    _dask()  # first: raises DaskNotInstalledError without the extra
    pd = _pandas()
    from dask import delayed

    plan = _plan(k, blocks)
    rows = _as_rows(fingerprints)
    _partitions(rows, npartitions)
    fan_in = check_int("fan_in", fan_in, minimum=2)
    inputs = _exchange(fingerprints, rows, plan, plan.k, workers)
    forests = [
        delayed(_job_forest, pure=True)(plan, plan.k, bundle, inputs.threads, *inputs.fingerprints)
        for bundle in inputs.bundles
    ]
    while len(forests) > 1:
        forests = [
            delayed(_merge_forests, pure=True)(*forests[start : start + fan_in])
            for start in range(0, len(forests), fan_in)
        ]
    meta = pd.DataFrame({KEY: rows._meta[KEY], "cluster": np.zeros(0, np.uint64)})
    return rows.map_partitions(_tag_clusters, forests[0], include_singletons, meta=meta)


#: (fingerprints ascending, the position among them of the smallest fingerprint of each one's
#: component)
Forest = tuple[np.ndarray, np.ndarray]


def _forest(node_a: np.ndarray, node_b: np.ndarray) -> Forest:
    """Components of the edges between fingerprint values, as a :data:`Forest`.  O(E log E):
    one argsort of the 2E endpoints, then union-find on their numbers."""
    if not node_a.size:
        return np.zeros(0, dtype=np.uint64), np.zeros(0, dtype=np.int64)
    nodes, local = compact(np.concatenate([node_a, node_b]))
    labels = ComponentLabeler(nodes.size)
    labels.add(local[: node_a.size], local[node_a.size :])
    # Nodes are ascending, so the smallest node index is the smallest fingerprint.
    return nodes, labels.labels()


def _job_forest(plan: TablePlan, k: int, jobs: list[SearchJob], threads: int, *parts: np.ndarray | str) -> Forest:
    """A bundle of jobs' edges (positions) over every fingerprint (``parts``), found on
    ``threads`` threads, reduced to a forest over fingerprint values.  A duplicate group
    becomes self-edges (fp, fp), which keep it a node.  Memory O(N) for a union-find over
    positions, so the jobs' edges are never all held."""
    values, _ = _all_fingerprints(*parts)
    labeler = ComponentLabeler(values.size)
    for left, right in _run_jobs(values, plan, k, jobs, _share_edge_blocks, DEFAULT_BLOCK_SIZE, threads):
        labeler.add(left, right)
    label = labeler.labels()
    linked = np.flatnonzero(label != np.arange(values.size))
    return _forest(values[linked], values[label[linked]])


def _merge_forests(*forests: Forest) -> Forest:
    """The union of forests, reduced again to one forest.  O(nodes log nodes): one sort of
    every forest's nodes, a search of each forest's (ascending) nodes among them, then
    union-find over each node's edge to its component's smallest; no argsort."""
    nodes = distinct(np.concatenate([forest[0] for forest in forests]))
    lefts, rights = [], []
    for forest_nodes, smallest in forests:
        # Ascending keys: numpy starts each search where the last one ended.
        local = np.searchsorted(nodes, forest_nodes)
        lefts.append(local)
        rights.append(local[smallest])
    labels = ComponentLabeler(nodes.size)
    labels.add(np.concatenate(lefts), np.concatenate(rights))
    return nodes, labels.labels()


def _tag_clusters(part: pd.DataFrame, forest: Forest, include_singletons: bool) -> pd.DataFrame:
    """Each row's cluster label: binary search in the sorted node list.  O(n log nodes)."""
    pd = _pandas()
    nodes, smallest = forest
    fingerprints = part[FINGERPRINT].to_numpy()
    where = np.minimum(search_sorted(nodes, fingerprints), max(nodes.size - 1, 0))
    found = nodes[where] == fingerprints if nodes.size else np.zeros(fingerprints.size, dtype=bool)
    label = fingerprints.copy()  # a singleton is its own cluster, named by its fingerprint
    label[found] = nodes[smallest[where[found]]]
    out = pd.DataFrame({KEY: part[KEY].reset_index(drop=True), "cluster": label})
    return out if include_singletons else out[found].reset_index(drop=True)


# --------------------------------------------------------------------------------------
# Jobs for the CLI
# --------------------------------------------------------------------------------------


def export_parquet(db: Database, path: str | os.PathLike[str], metadata: Mapping[bytes, bytes] | None = None) -> int:
    """Write the database's (key, fingerprint) rows to one Parquet file at ``path`` (a
    directory gets ``fingerprints.parquet`` inside it) and return the row count.

    Columns: ``key`` (string) and ``fingerprint`` (uint64), in insertion order, one row
    group per :data:`EXPORT_CHUNK` rows.  ``metadata`` goes into the file's schema (the CLI
    keeps the database's settings there, for import).  Reads with :meth:`Database.items`, which decodes
    every document anyway to get its key, so key and fingerprint come from the same read
    (a separate :meth:`Database.fingerprint_arrays` scan could disagree with it if a
    writer commits in between).  Memory O(chunk); time O(n).
    """
    try:
        import pyarrow as pa
        import pyarrow.parquet as pq
    except ImportError as error:
        raise DaskNotInstalledError(f"Parquet export needs pyarrow ({error})", DASK_INSTALL_HINT) from error
    target = Path(path)
    if target.is_dir():
        target = target / "fingerprints.parquet"
    # A link is followed, as the text exports follow one: what it names is replaced.  A FIFO
    # or a device cannot take a Parquet file (its footer points back into it) and would be
    # replaced by the rename: refused.
    target = Path(os.path.realpath(target))
    if target.exists() and not target.is_file():
        raise InvalidInputError(f"{path} is not a regular file: a Parquet export is written to one")
    schema = pa.schema([(KEY, pa.string()), (FINGERPRINT, pa.uint64())], metadata=metadata)
    written = 0
    # Written under another name and renamed over the target only when whole: an export cut
    # short (Ctrl-C) used to leave a valid-looking file of fewer rows in place of an earlier one.
    descriptor, partial = partial_beside(target)
    os.close(descriptor)
    try:
        with pq.ParquetWriter(partial, schema) as writer:
            for keys, fingerprints in _document_chunks(db, EXPORT_CHUNK):
                table = pa.table(
                    {KEY: pa.array(keys, pa.string()), FINGERPRINT: pa.array(np.array(fingerprints, dtype=np.uint64))},
                    schema=schema,
                )
                writer.write_table(table)
                written += len(keys)
        replace_durably(partial, target)
    except BaseException:
        partial.unlink(missing_ok=True)
        raise
    return written


def _document_chunks(db: Database, size: int) -> Iterator[tuple[list[str], list[int]]]:
    """(keys, fingerprints) of the database in insertion order, ``size`` at a time."""
    keys: list[str] = []
    fingerprints: list[int] = []
    for document in db.items(snapshot=True):  # one moment, as a backup needs
        keys.append(document.key)
        fingerprints.append(document.fingerprint)
        if len(keys) >= size:
            yield keys, fingerprints
            keys, fingerprints = [], []
    if keys:
        yield keys, fingerprints


def run_pairs_job(
    parquet_glob: str | os.PathLike[str],
    out_dir: str | os.PathLike[str],
    k: int | None = None,
    blocks: int | None = None,
    scheduler: str | None = None,
    workers: int | None = None,
) -> dict[str, Any]:
    """Run :func:`find_all` over Parquet (key, fingerprint) files and write the pairs as
    Parquet files (columns key_a, key_b, distance) into ``out_dir``, which must not already
    hold Parquet files.  Returns a summary: rows read, pairs written, tables, seconds, the
    scheduler address and worker count.

    ``scheduler``: None or ``"local"`` starts a local cluster of ``workers`` processes
    (default: one per CPU, one thread each) for the job and stops it after; any other
    string is the address of a running scheduler (``workers`` is then ignored).  ``k``
    defaults to 3.
    """
    summary = _run_parquet_job(
        parquet_glob,
        out_dir,
        scheduler,
        workers,
        k,
        blocks,
        lambda plan: find_all(parquet_glob, k=plan.k, blocks=plan.blocks),
    )
    summary["pairs"] = _parquet_rows(os.path.join(summary["out_dir"], "*.parquet"))
    return summary


def run_clusters_job(
    parquet_glob: str | os.PathLike[str],
    out_dir: str | os.PathLike[str],
    k: int | None = None,
    blocks: int | None = None,
    scheduler: str | None = None,
    workers: int | None = None,
    *,
    include_singletons: bool = False,
) -> dict[str, Any]:
    """Run :func:`clusters` over Parquet (key, fingerprint) files and write ``(key,
    cluster)`` rows as Parquet files into ``out_dir`` (which must not already hold Parquet
    files); ``cluster`` is the smallest fingerprint of the key's component.  Arguments and
    summary as :func:`run_pairs_job`, with ``clustered_keys`` (rows written) and
    ``clusters`` (distinct clusters, counted by reading the cluster column back) in place
    of ``pairs``.
    """
    summary = _run_parquet_job(
        parquet_glob,
        out_dir,
        scheduler,
        workers,
        k,
        blocks,
        lambda plan: clusters(parquet_glob, k=plan.k, blocks=plan.blocks, include_singletons=include_singletons),
    )
    import pyarrow.dataset as ds

    written = ds.dataset(summary["out_dir"], format="parquet").to_table(columns=["cluster"]).column("cluster")
    summary["clustered_keys"] = len(written)
    summary["clusters"] = int(distinct(written.to_numpy()).size) if len(written) else 0
    return summary


def _run_parquet_job(
    parquet_glob: str | os.PathLike[str],
    out_dir: str | os.PathLike[str],
    scheduler: str | None,
    workers: int | None,
    k: int | None,
    blocks: int | None,
    build: Callable[[TablePlan], dd.DataFrame],
) -> dict[str, Any]:
    """Write ``build(plan)`` as Parquet into ``out_dir`` on a cluster, for the plan of ``k``
    (default 3) and ``blocks``: a local cluster of ``workers`` processes (one thread each) for
    ``scheduler`` None or ``"local"``, else the running scheduler at that address.  Returns
    the rows read, seconds, scheduler, worker count, output directory, k, blocks and tables."""
    plan = _plan(3 if k is None else k, blocks)
    _dask()
    try:
        from dask.distributed import Client, LocalCluster
    except ImportError as error:  # Dask without its distributed scheduler
        raise DaskNotInstalledError(
            "the Parquet batch job needs the distributed package of Dask, which is not installed", DASK_INSTALL_HINT
        ) from error

    out = Path(out_dir)
    if out.exists() and any(out.glob("*.parquet")):
        raise InvalidInputError(f"{out} already holds Parquet files", "choose an empty or new output directory")
    local = scheduler in (None, "local")
    if workers is not None:
        # Processes of this machine for a local cluster (at most a few per core).
        workers = resolve_workers(workers) if local else check_int("workers", workers, minimum=1)
    started = time.perf_counter()
    cluster = None
    try:
        if local:
            # Its workers' logs stay quiet: a task's failure reaches the caller as the
            # exception itself, and a worker's "Compute Failed" traceback only repeated it.
            cluster = LocalCluster(
                n_workers=workers or os.cpu_count() or 1,
                threads_per_worker=1,
                processes=True,
                dashboard_address=":0",
                silence_logs=logging.CRITICAL,
            )
        with Client(cluster if cluster is not None else scheduler) as client:
            rows = _parquet_rows(parquet_glob)
            build(plan).to_parquet(os.fspath(out), write_index=False)
            address = client.scheduler.address
            worker_count = len(client.nthreads())
    finally:
        if cluster is not None:
            cluster.close()
    return {
        "rows": rows,
        "seconds": round(time.perf_counter() - started, 3),
        "scheduler": "local" if local else address,
        "workers": worker_count,
        "out_dir": os.fspath(out),
        "k": plan.k,
        "blocks": plan.blocks,
        "tables": len(plan.tables),
    }


def _parquet_files(source: str | os.PathLike[str]) -> list[str]:
    """The Parquet files of a path (a file, or a directory searched as pyarrow does) or a
    glob (sorted), in the order their rows are read."""
    import pyarrow.dataset as ds

    text = os.fspath(source)
    if any(ch in text for ch in "*?["):
        import glob as globbing

        files = sorted(globbing.glob(text))
        if not files:
            raise InvalidInputError(f"no Parquet files match {text}", argument="fingerprints", value=text, path=text)
        return files
    try:
        return list(ds.dataset(text, format="parquet").files)
    except FileNotFoundError:
        raise InvalidInputError(
            f"{text}: no such file or directory", argument="fingerprints", value=text, path=text
        ) from None


def _parquet_rows(source: str | os.PathLike[str]) -> int:
    """Row count of Parquet files (a path or glob) from their footers."""
    return sum(_parquet_file_rows(_parquet_files(source)))
