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

    values = np.random.default_rng(0).integers(0, 1 << 64, 1_000_000, dtype=np.uint64)
    search = lambda: find_all(values, k=3, blocks=5, workers=1)
    result = {"search": faults(search), "after_search": faults(churn)}
    outer, inner = simdb.heap.retained_heap(), simdb.heap.retained_heap()
    outer.__enter__()
    inner.__enter__()
    result["nested"] = faults(churn)
    inner.__exit__(None, None, None)
    result["outer_only"] = faults(churn)
    outer.__exit__(None, None, None)
    result["after_both"] = faults(churn)
    simdb.heap._fixed_threshold_libc = lambda: None  # the search as it would run without
    result["search_unheld"] = faults(search)
    print(json.dumps(result))
    """
)


def run_phases(environment: dict[str, str]) -> dict[str, int]:
    env = {name: value for name, value in os.environ.items() if not name.startswith("MALLOC_")}
    env.update(environment)
    done = subprocess.run([sys.executable, "-c", PHASES], env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    return dict(json.loads(done.stdout.splitlines()[-1]))


def test_a_search_under_a_fixed_trim_threshold_reuses_its_arrays_and_then_restores_it() -> None:
    faults = run_phases({"MALLOC_TRIM_THRESHOLD_": "65536"})
    # Without the retained heap every 512 KiB temporary is a fresh mapping (about 100k
    # faults for this search); with it, a few thousand.
    assert faults["search"] * 10 < faults["search_unheld"], faults
    # Inside a retained section, even a nested one left, freed arrays are reused ...
    assert faults["nested"] * 10 < faults["after_both"], faults
    assert faults["outer_only"] * 10 < faults["after_both"], faults
    # ... and after the last one the process's fixed threshold holds again: each array is
    # mapped afresh (200 arrays of 128 pages).
    assert faults["after_search"] > 200 * 100, faults
    assert faults["after_both"] > 200 * 100, faults


def test_a_process_with_adaptive_thresholds_is_left_alone() -> None:
    faults = run_phases({})
    # glibc's adaptive threshold already reuses the arrays, with or without simdb.
    assert faults["after_search"] < 200 * 100 / 10, faults
    assert faults["after_both"] < 200 * 100 / 10, faults
