"""simdb.heap: while a search runs in a process with fixed malloc thresholds (as Dask starts
its workers), freed arrays are reused instead of mapped afresh, and afterwards the process's
own settings hold again.  Observed through minor page faults in a fresh process, since the
environment variables only take effect at process start."""

from __future__ import annotations

import json
import os
import platform
import subprocess
import sys
import textwrap

import pytest

pytestmark = pytest.mark.skipif(
    sys.platform != "linux" or platform.libc_ver()[0] != "glibc", reason="the heap settings are glibc's"
)

PHASES = textwrap.dedent(
    """
    import json, resource, sys
    import numpy as np
    import simdb.heap
    from simdb.allpairs import find_all

    def faults(work):
        before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
        work()
        return resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before

    def churn():
        # 512 KiB arrays, as the search's sub-shares make: over the 128 KiB threshold
        for _ in range(200):
            np.ones(1 << 16)

    # Before any search, whose freed arrays leave holes in the heap that serve any size.
    result = {"before": faults(churn)}
    outer, inner = simdb.heap.retained_heap(), simdb.heap.retained_heap()
    outer.__enter__()
    inner.__enter__()
    result["nested"] = faults(churn)
    inner.__exit__(None, None, None)
    result["outer_only"] = faults(churn)
    outer.__exit__(None, None, None)
    result["after"] = faults(churn)
    if sys.argv[1] == "unheld":  # the search as it would run without simdb.heap
        simdb.heap._fixed_threshold_libc = lambda: None
    values = np.random.default_rng(0).integers(0, 1 << 64, 1_000_000, dtype=np.uint64)
    result["search"] = faults(lambda: find_all(values, k=3, blocks=5, workers=1))
    print(json.dumps(result))
    """
)


def run_phases(environment: dict[str, str], search: str = "held") -> dict[str, int]:
    env = {name: value for name, value in os.environ.items() if not name.startswith("MALLOC_")}
    env.update(environment)
    done = subprocess.run([sys.executable, "-c", PHASES, search], env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    return dict(json.loads(done.stdout.splitlines()[-1]))


def test_a_search_under_a_fixed_trim_threshold_reuses_its_arrays_and_then_restores_it() -> None:
    fixed = {"MALLOC_TRIM_THRESHOLD_": "65536"}
    faults = run_phases(fixed)
    # Without the retained heap every 512 KiB temporary of the search is a fresh mapping
    # (about 100k faults for this search); with it, a few thousand.
    assert faults["search"] * 10 < run_phases(fixed, "unheld")["search"], faults
    # The process's fixed threshold maps each array afresh (200 arrays of 128 pages) ...
    assert faults["before"] > 200 * 100, faults
    # ... inside a retained section, even a nested one left, freed arrays are reused ...
    assert faults["nested"] * 10 < faults["before"], faults
    assert faults["outer_only"] * 10 < faults["before"], faults
    # ... and after the last one the fixed threshold holds again.
    assert faults["after"] > 200 * 100, faults


def test_a_process_with_adaptive_thresholds_is_left_alone() -> None:
    faults = run_phases({})
    # glibc's adaptive threshold already reuses the arrays, and simdb leaves it so.
    assert faults["before"] < 200 * 100 / 10, faults
    assert faults["after"] < 200 * 100 / 10, faults
