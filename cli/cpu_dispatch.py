"""numpy's sorts on AMD Zen 4: the command line keeps numpy off AVX-512 there.

numpy dispatches its quicksort and argsort of 64-bit values to x86-simd-sort's AVX-512
kernels wherever the CPU has AVX-512.  On AMD Zen 4 (family 0x19 with AVX-512) those kernels
store through ``vpcompressq`` to memory, which that core runs in microcode, and they are
slower than numpy's AVX2 kernels.  ``NPY_DISABLE_CPU_FEATURES`` set to numpy's AVX-512 group
sends every numpy kernel of the process to its AVX2 version instead: a large gain for the
sorts, a small loss elsewhere (Zen 4 runs 512-bit vectors as two 256-bit halves; ``np.exp``,
which simdb calls only on small arrays, loses its AVX-512 library).  Measured on a 2-core
Zen 4 machine with numpy 2.4.6 ("AMD Zen 4" in bench/RESULTS.md):

- sorting random uint64: 78 ns a value, against 17 ns;
- ``simdb.allpairs.find_all`` of 20M fingerprints: 12.0-12.2 s, against 5.8-6.5 s;
- ``simdb pairs`` on 10M documents: 6.7-7.1 s, against 4.8-5.8 s.

numpy reads the variable once, when it is imported, so this package (the ``simdb`` command)
sets it before anything imports numpy, on Linux, where ``/proc/cpuinfo`` names the CPU, and
with numpy 2.4 or later (:data:`FIRST_HELPED_NUMPY`).
Child processes inherit it: the workers of a local Dask cluster that the command starts.
The library never sets it: that would change the kernels of every numpy call in the program
that embeds it.  A variable the user already set, even to nothing, is left alone, so
``NPY_DISABLE_CPU_FEATURES=`` keeps numpy's choice.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Mapping

VARIABLE = "NPY_DISABLE_CPU_FEATURES"
#: Zen 4's family (Zen 3 shares it, without AVX-512); Zen 5 (0x1A) stores a compressed
#: vector at full speed.
ZEN4_FAMILY = 0x19
#: The first numpy whose sorts the setting helps.  numpy 2.4 regrouped its x86 targets, and
#: "X86_V4" turns its AVX-512 group off for AVX2 kernels.  numpy 2.0 and 2.3 sorted random
#: uint64 at 65-77 ns a value on the Zen 4 measured here whether or not "AVX512_SKX" (their
#: name for the group) was off, so older versions are left alone.
FIRST_HELPED_NUMPY = (2, 4)


def first_cpu(cpuinfo: str) -> dict[str, str]:
    """The fields of the first processor in ``/proc/cpuinfo`` text."""
    fields: dict[str, str] = {}
    for line in cpuinfo.splitlines():
        if not line.strip():
            if fields:
                break
            continue
        name, _, value = line.partition(":")
        fields[name.strip()] = value.strip()
    return fields


def is_zen4_with_avx512(cpuinfo: str) -> bool:
    """Whether ``/proc/cpuinfo`` text describes an AMD family 0x19 CPU with AVX-512."""
    cpu = first_cpu(cpuinfo)
    try:
        family = int(cpu.get("cpu family", ""))
    except ValueError:
        return False
    return (
        cpu.get("vendor_id") == "AuthenticAMD" and family == ZEN4_FAMILY and "avx512f" in cpu.get("flags", "").split()
    )


def avx512_group(numpy_version: str) -> str | None:
    """The ``NPY_DISABLE_CPU_FEATURES`` value that sends numpy's sorts to its AVX2 kernels, or
    None for a numpy where it does not (see :data:`FIRST_HELPED_NUMPY`)."""
    try:
        major_minor = tuple(int(part) for part in numpy_version.split(".")[:2])
    except ValueError:
        return None
    return "X86_V4" if major_minor >= FIRST_HELPED_NUMPY else None


def sort_dispatch_setting(
    environ: Mapping[str, str], cpuinfo: str, numpy_version: Callable[[], str | None]
) -> str | None:
    """The value to give ``NPY_DISABLE_CPU_FEATURES``, or None to leave the environment as it
    is: on a Zen 4 CPU with AVX-512, when neither numpy variable is set and numpy 2.4 or
    later is installed (``numpy_version`` is asked only then)."""
    if VARIABLE in environ or "NPY_ENABLE_CPU_FEATURES" in environ or not is_zen4_with_avx512(cpuinfo):
        return None
    version = numpy_version()
    return None if version is None else avx512_group(version)


def read_first_cpu(path: str = "/proc/cpuinfo") -> str:
    """The first processor's block of ``/proc/cpuinfo`` (empty where it cannot be read).
    Only that block is read: the kernel writes the file one CPU at a time, and on a machine
    of many cores the whole of it takes milliseconds."""
    lines: list[str] = []
    try:
        with open(path, encoding="utf-8", errors="replace") as cpuinfo:
            for line in cpuinfo:
                if not line.strip() and lines:
                    break
                lines.append(line)
    except OSError:
        return ""
    return "".join(lines)


def _installed_numpy() -> str | None:
    # Only on a Zen 4: importing importlib.metadata (email, zipfile and more) and reading
    # the version take about 25 ms, against about 0.6 s for the command's whole start.
    from importlib import metadata

    try:
        return metadata.version("numpy")
    except metadata.PackageNotFoundError:
        return None


def import_numpy_with(setting: str) -> None:
    """Import numpy with ``NPY_DISABLE_CPU_FEATURES`` set to ``setting``.  A numpy built to
    require those features refuses to start without them (RuntimeError): then the process
    runs again from the start as it was invoked, with the variable set to nothing, so that
    it keeps numpy's own choice."""
    os.environ[VARIABLE] = setting
    try:
        import numpy  # noqa: F401 -- numpy reads the variable here, once
    except RuntimeError:
        os.environ[VARIABLE] = ""
        sys.stdout.flush()
        sys.stderr.flush()
        os.execv(sys.executable, [sys.executable, *sys.orig_argv[1:]])


def keep_sorts_off_avx512_on_zen4() -> None:
    """Import numpy as :func:`sort_dispatch_setting` says (:func:`import_numpy_with`), where it
    says anything.  Does nothing once numpy is imported (it has chosen its kernels) or
    outside Linux.  Costs one read of the first CPU's ``/proc/cpuinfo`` block, and on a Zen 4
    a look at numpy's installed version."""
    if "numpy" in sys.modules or not sys.platform.startswith("linux"):
        return
    setting = sort_dispatch_setting(os.environ, read_first_cpu(), _installed_numpy)
    if setting is not None:
        import_numpy_with(setting)
