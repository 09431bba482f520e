"""Worker for tests/test_tables.py's crash trials: applies a deterministic sequence of write
transactions to a tables layer (puts, deletes and inline merges, with a tiny policy so that
nearly every transaction merges) until killed, printing each committed step's number."""

from __future__ import annotations

import sys

import lmdb
import numpy as np

from simdb.plan import TablePlan
from simdb.storage import BareHandles
from simdb.tables import Policy, Tables

POLICY = Policy(base=64, ratio=2, chunk=48)
PLAN = TablePlan.create(3)


def step_changes(step: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Step ``step``'s new ids and fingerprints, and the earlier ids it deletes."""
    rng = np.random.default_rng(step)
    count = int(rng.integers(1, 120))
    ids = np.arange(step * 1000, step * 1000 + count, dtype=np.uint64)
    fingerprints = rng.integers(0, 1 << 64, count, dtype=np.uint64, endpoint=False)
    fingerprints[: count // 4] = fingerprints[0]  # repeats
    deleted = (
        np.array([(step - 3) * 1000 + i for i in range(0, 40, 3)], dtype=np.uint64)
        if step >= 3
        else np.empty(0, np.uint64)
    )
    return ids, fingerprints, deleted


def model(steps: int) -> dict[int, int]:
    """The (id -> fingerprint) contents after ``steps`` committed steps."""
    stored: dict[int, int] = {}
    for step in range(steps):
        ids, fingerprints, deleted = step_changes(step)
        stored.update(zip(ids.tolist(), fingerprints.tolist()))
        for doc_id in deleted.tolist():
            stored.pop(doc_id, None)
    return stored


def open_layer(path: str) -> tuple[lmdb.Environment, Tables]:
    env = lmdb.open(path, max_dbs=512, map_size=1 << 30)
    tables = Tables(PLAN, BareHandles(env), POLICY)
    with env.begin(write=True) as txn:
        tables.create(txn)
    return env, tables


def main(path: str) -> None:
    env, tables = open_layer(path)
    with env.begin() as txn:
        stored_ids, _ = tables.scan(txn)
    step = 0 if not len(stored_ids) else int(stored_ids.max()) // 1000 + 1
    stored = model(step)
    while True:
        ids, fingerprints, deleted = step_changes(step)
        present = [doc_id for doc_id in deleted.tolist() if doc_id in stored]
        with env.begin(write=True) as txn:
            tables.put_many(txn, ids, fingerprints)
            tables.delete_many(txn, present, [stored[doc_id] for doc_id in present])
            tables.merge(txn, budget=4096)
        stored.update(zip(ids.tolist(), fingerprints.tolist()))
        for doc_id in present:
            del stored[doc_id]
        print(step, flush=True)
        step += 1


if __name__ == "__main__":
    main(sys.argv[1])
