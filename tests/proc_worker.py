"""Worker processes for the process-level tests (run as ``python tests/proc_worker.py ROLE``).

Documents are written in groups: group g holds GROUP_SIZE keys ``g-0 .. g-N`` that all share
the fingerprint ``group_fingerprint(g)`` and are written in one batch, so any reader must see
a group whole or not at all.  Writers print ``ACK <g>`` only after the batch is committed.
"""

from __future__ import annotations

import os
import random
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import simdb

GROUP_SIZE = 10


def group_fingerprint(group: int) -> int:
    return random.Random(group).getrandbits(64)


def group_items(group: int, padding: int = 0) -> list[tuple[str, int, dict[str, str]]]:
    fingerprint = group_fingerprint(group)
    return [(f"{group}-{i}", fingerprint, {"pad": "x" * padding}) for i in range(GROUP_SIZE)]


def writer(path: str, first: int, count: int, remove_every: int = 0, padding: int = 0, map_size: int = 1 << 16) -> None:
    """Add groups first..first+count-1, one transaction each; optionally remove old groups."""
    with simdb.open(path, map_size=map_size) as db:
        for group in range(first, first + count):
            db.add_many(group_items(group, padding))
            print(f"ACK {group}", flush=True)
            if remove_every and group % remove_every == 0 and group - first >= remove_every:
                victim = group - remove_every
                db.remove_many(key for key, _, _ in group_items(victim))
                print(f"REMOVED {victim}", flush=True)


def merging_writer(path: str, first: int, count: int, remove_every: int) -> None:
    """:func:`writer` with the tables' merge policy shrunk (recent trees of 32 entries,
    levels 4x apart), so that nearly every commit runs merge steps at some level and a kill
    lands inside one; removals then also rewrite merged blocks."""
    from simdb.tables import Policy, Tables

    Tables.__init__.__defaults__ = (Policy(base=32, ratio=4, chunk=64),)
    writer(path, first, count, remove_every)


def writer_text(index: int) -> str:
    """The text the batch writer stores under ``w{index}``: about 2 KB of words."""
    rng = random.Random(index)
    return " ".join(f"word{rng.randrange(5_000)}" for _ in range(300))


def batch_writer(path: str, batch: int, count: int) -> None:
    """Add ``w0`` .. ``w{count-1}`` from text through one batching writer, flushing after
    every ``batch`` adds (``max_batch`` is larger, so no other flush happens) and printing
    ``ACK <n>`` once the first n keys are durable."""
    with simdb.open(path, map_size=1 << 16) as db, db.writer(max_batch=batch + 1, max_delay=3600) as writer:
        for index in range(count):
            writer.add(f"w{index}", text=writer_text(index), meta={"n": index})
            if (index + 1) % batch == 0:
                writer.flush()
                print(f"ACK {index + 1}", flush=True)


def remover(path: str, first: int, count: int) -> None:
    """Remove groups one transaction each, acknowledging each."""
    with simdb.open(path) as db:
        for group in range(first, first + count):
            db.remove_many(key for key, _, _ in group_items(group))
            print(f"ACK {group}", flush=True)


def compactor(path: str, rounds: int) -> None:
    with simdb.open(path) as db:
        for round_ in range(rounds):
            db.compact()
            print(f"ACK {round_}", flush=True)


def reader(path: str, groups: int, seconds: float) -> None:
    """Query groups until the time is up; a partial group or any error fails the process."""
    deadline = time.monotonic() + seconds
    queries = 0
    with simdb.open(path, readonly=True) as db:
        rng = random.Random(os.getpid())
        while time.monotonic() < deadline:
            group = rng.randrange(groups)
            matches = db.query(group_fingerprint(group), k=0)
            mine = [m for m in matches if m.key.startswith(f"{group}-")]
            if len(mine) not in (0, GROUP_SIZE):
                print(f"PARTIAL group {group}: {len(mine)} of {GROUP_SIZE}", flush=True)
                sys.exit(1)
            for match in mine:
                if match.fingerprint != group_fingerprint(group):
                    print(f"WRONG fingerprint for {match.key}", flush=True)
                    sys.exit(1)
            queries += 1
    print(f"QUERIES {queries}", flush=True)


if __name__ == "__main__":
    role, *args = sys.argv[1:]
    {
        "writer": writer,
        "merging_writer": merging_writer,
        "reader": reader,
        "remover": remover,
        "compactor": compactor,
        "batch_writer": batch_writer,
    }[role](args[0], *(int(a) if a.isdigit() else float(a) for a in args[1:]))
