"""The package ships ``py.typed``, so its annotations are part of the API: mypy, configured in
pyproject.toml ([tool.mypy]), must pass over simdb and cli (installed as simdb_cli)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def test_mypy_passes() -> None:
    pytest.importorskip("mypy")
    # simdb.distributed's annotations name dask types; without the extra they cannot resolve.
    pytest.importorskip("dask.dataframe", reason="the dask extra is not installed")
    run = subprocess.run(
        [sys.executable, "-m", "mypy", "--config-file", str(ROOT / "pyproject.toml")],
        check=False,
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert run.returncode == 0, f"mypy failed:\n{run.stdout}{run.stderr}"
