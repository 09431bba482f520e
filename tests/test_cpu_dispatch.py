"""The command line keeps numpy's sorts off AVX-512 on AMD Zen 4 (simdb_cli/cpu_dispatch.py):
the decision for each kind of CPU, environment and numpy version; and in real processes,
that the setting reaches numpy before numpy chooses its kernels, that a process which
imported numpy first is left alone, and that a numpy which refuses the setting gets the
process run again without it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from simdb_cli.cpu_dispatch import VARIABLE, first_cpu, is_zen4_with_avx512, read_first_cpu, sort_dispatch_setting


def cpuinfo(vendor: str, family: int | str, flags: str, processors: int = 2) -> str:
    """/proc/cpuinfo text of ``processors`` identical processors."""
    block = f"processor\t: {{n}}\nvendor_id\t: {vendor}\ncpu family\t: {family}\nmodel\t\t: 17\nflags\t\t: {flags}\n"
    return "\n".join(block.format(n=n) for n in range(processors)) + "\n"


ZEN4 = cpuinfo("AuthenticAMD", 25, "fpu sse2 avx2 avx512f avx512dq avx512vl")
ZEN3 = cpuinfo("AuthenticAMD", 25, "fpu sse2 avx2")  # same family, no AVX-512
ZEN5 = cpuinfo("AuthenticAMD", 26, "fpu sse2 avx2 avx512f")
INTEL_AVX512 = cpuinfo("GenuineIntel", 6, "fpu sse2 avx2 avx512f avx512dq")


def never_asked() -> str:
    raise AssertionError("numpy's version asked for where it cannot matter")


@pytest.mark.parametrize(
    ("text", "expected"),
    [(ZEN4, True), (ZEN3, False), (ZEN5, False), (INTEL_AVX512, False), ("", False)],
    ids=["zen4", "zen3", "zen5", "intel", "no cpuinfo"],
)
def test_only_zen4_with_avx512_is_recognised(text: str, expected: bool) -> None:
    assert is_zen4_with_avx512(text) is expected


def test_a_flag_word_inside_another_does_not_count() -> None:
    # "avx512f" must be a flag of its own, not a prefix of one.
    assert not is_zen4_with_avx512(cpuinfo("AuthenticAMD", 25, "avx512fx avx2"))
    assert not is_zen4_with_avx512(cpuinfo("AuthenticAMD", "twenty-five", "avx512f"))


def test_only_the_first_processor_is_read(tmp_path: Path) -> None:
    text = cpuinfo("AuthenticAMD", 25, "avx2", processors=1) + "\n" + cpuinfo("AuthenticAMD", 25, "avx512f", 1)
    assert first_cpu(text)["flags"] == "avx2"
    assert not is_zen4_with_avx512(text)
    source = tmp_path / "cpuinfo"
    source.write_text(text)
    read = read_first_cpu(str(source))
    assert "avx512f" not in read and first_cpu(read) == first_cpu(text)


def test_an_unreadable_cpuinfo_reads_as_nothing(tmp_path: Path) -> None:
    assert read_first_cpu(str(tmp_path / "missing")) == ""
    assert sort_dispatch_setting({}, read_first_cpu(str(tmp_path / "missing")), never_asked) is None


@pytest.mark.parametrize(
    ("version", "expected"),
    [
        ("2.4.6", "X86_V4"),
        ("2.4.0", "X86_V4"),
        ("2.5.0.dev0", "X86_V4"),
        ("3.0.0", "X86_V4"),
        ("2.3.5", None),  # measured: its sorts are as slow with or without AVX-512
        ("2.0.0", None),
        ("unknown", None),
    ],
)
def test_zen4_gets_the_setting_where_numpy_is_new_enough_to_gain(version: str, expected: str | None) -> None:
    assert sort_dispatch_setting({}, ZEN4, lambda: version) == expected


@pytest.mark.parametrize("text", [ZEN3, ZEN5, INTEL_AVX512, ""])
def test_other_cpus_are_left_alone(text: str) -> None:
    assert sort_dispatch_setting({}, text, never_asked) is None


@pytest.mark.parametrize(
    "environ",
    [{VARIABLE: ""}, {VARIABLE: "AVX512_ICL"}, {"NPY_ENABLE_CPU_FEATURES": "X86_V3"}],
    ids=["set empty", "set", "enable set"],
)
def test_a_users_own_numpy_setting_wins(environ: dict[str, str]) -> None:
    assert sort_dispatch_setting(environ, ZEN4, never_asked) is None


def test_without_numpy_installed_nothing_is_set() -> None:
    assert sort_dispatch_setting({}, ZEN4, lambda: None) is None


_PROBE = """
import json, os, simdb_cli
import numpy
features = numpy._core._multiarray_umath.__cpu_features__
print(json.dumps({"setting": os.environ.get("NPY_DISABLE_CPU_FEATURES"),
                  "features": {name: bool(on) for name, on in features.items()}}))
"""


def _probe(environ: dict[str, str]) -> dict[str, object]:
    """What a fresh interpreter that imports simdb_cli before numpy ends up with."""
    run = subprocess.run([sys.executable, "-c", _PROBE], env=environ, capture_output=True, text=True, check=True)
    return json.loads(run.stdout)


def _without_numpy_settings() -> dict[str, str]:
    return {name: value for name, value in os.environ.items() if name not in (VARIABLE, "NPY_ENABLE_CPU_FEATURES")}


def test_the_command_line_process_sets_it_before_numpy_chooses_its_kernels() -> None:
    linux = sys.platform.startswith("linux") and os.path.exists("/proc/cpuinfo")
    text = ""
    if linux:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as source:
            text = source.read()
    expected = sort_dispatch_setting({}, text, lambda: np.__version__) if linux else None
    probed = _probe(_without_numpy_settings())
    assert probed["setting"] == expected
    features = probed["features"]
    assert isinstance(features, dict)
    if expected is not None:
        # numpy itself reports the group off: the setting arrived before its import.
        assert features.get(expected) is False


def test_the_command_line_process_keeps_a_users_empty_setting() -> None:
    probed = _probe({**_without_numpy_settings(), VARIABLE: ""})
    assert probed["setting"] == ""


def test_a_process_that_imported_numpy_first_is_left_alone() -> None:
    script = "import json, os, numpy, simdb_cli; print(json.dumps(os.environ.get('NPY_DISABLE_CPU_FEATURES')))"
    run = subprocess.run(
        [sys.executable, "-c", script], env=_without_numpy_settings(), capture_output=True, text=True, check=True
    )
    assert json.loads(run.stdout) is None


_REFUSED = """
import importlib.util, json, os, sys
print("start", flush=True)
spec = importlib.util.spec_from_file_location("cpu_dispatch", sys.argv[1])
module = importlib.util.module_from_spec(spec)
spec.loader.exec_module(module)
if "NPY_DISABLE_CPU_FEATURES" not in os.environ:
    module.import_numpy_with(sys.argv[2])
import numpy
print(json.dumps(os.environ["NPY_DISABLE_CPU_FEATURES"]))
"""


def test_a_numpy_that_refuses_the_setting_gets_the_process_run_again_without_it() -> None:
    # Turning off a feature of numpy's baseline (what a numpy built to require AVX-512 would
    # have) makes numpy refuse to start: the process must start again, as it was invoked,
    # with the variable set to nothing, and then import numpy.
    import simdb_cli.cpu_dispatch

    baseline = np._core._multiarray_umath.__cpu_baseline__
    if not baseline:
        pytest.skip("this numpy has no baseline features to refuse")
    run = subprocess.run(
        [sys.executable, "-c", _REFUSED, simdb_cli.cpu_dispatch.__file__, baseline[0]],
        env=_without_numpy_settings(),
        capture_output=True,
        text=True,
    )
    assert run.returncode == 0, run.stderr
    lines = run.stdout.splitlines()
    assert lines == ["start", "start", json.dumps("")]
