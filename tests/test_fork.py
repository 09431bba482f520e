"""A process forked while a database is open: the child may neither use the parent's
handle nor open the database again (LMDB forbids both), and the parent loses nothing.

Before, a child kept writing through the inherited handle without any of LMDB's file
locks; once the parent had exited, a third process took the database for unused and reset
its lock file under the child, and acknowledged batches were lost (7 trials in 13), once
with a damaged table.  Each scenario runs in a process of its own, which forks."""

from __future__ import annotations

import pytest

from tests.conftest import run_python_or_fail_on_hang

pytestmark = pytest.mark.skipif(not hasattr(__import__("os"), "fork"), reason="needs fork")

_PARENT = """
import os, sys, threading
import simdb

path, scenario = sys.argv[1], sys.argv[2]
db = simdb.open(path, k=3)
db.add_many((f"p{i}", i * 0x9E3779B97F4A7C15 % 2**64) for i in range(500))
reading, release = threading.Event(), threading.Event()

def hold_a_read():
    with db._storage.read() as txn:  # a transaction live in another thread at the fork
        txn.get(b"x")
        reading.set()
        release.wait()

def write_in_a_loop():
    batch = 0
    while not release.is_set():
        db.add_many((f"w{batch}-{i}", (batch * 1000 + i) * 0x2545F4914F6CDD1D % 2**64) for i in range(500))
        batch += 1
        reading.set()

worker = threading.Thread(target=hold_a_read if scenario == "reading" else write_in_a_loop)
worker.start()
reading.wait()
child = os.fork()
if child == 0:
    outcomes = []
    for name, call in [
        ("query", lambda: db.query(5)),
        ("add", lambda: db.add("child", 1)),
        ("open", lambda: simdb.open(path)),
    ]:
        try:
            call()
            outcomes.append(f"{name}: no error")
        except simdb.InheritedHandleError:
            outcomes.append(f"{name}: refused")
        except Exception as error:
            outcomes.append(f"{name}: {type(error).__name__}")
    db.close()  # forgets the handle; must not close the parent's environment
    print("child", "; ".join(outcomes), flush=True)
    sys.exit(0)  # a normal exit: the interpreter's teardown runs
_, status = os.waitpid(child, 0)
assert status == 0, status
if scenario == "reading":
    # The parent's live read still holds its reader slot, with the parent's pid.
    slots = db._storage.env.readers()
    assert str(os.getpid()) in slots, slots
release.set()
worker.join()
assert "child" not in db
assert db.check()
db.add("after", 2)
db.close()
print("parent ok", flush=True)
"""


@pytest.mark.parametrize("scenario", ["reading", "writing"])
def test_a_forked_child_is_refused_the_parent_s_database_and_the_parent_loses_nothing(tmp_path, scenario: str) -> None:
    run = run_python_or_fail_on_hang(
        _PARENT,
        tmp_path / "db",
        scenario,
        timeout=120,
        hung="the child or the parent hung (a lock held by a parent thread at the fork?)",
    )
    assert run.returncode == 0, run.stderr[-2000:]
    assert run.stdout.splitlines() == ["child query: refused; add: refused; open: refused", "parent ok"]
