"""The machine line the issue benchmarks print: the CPU, and whether numpy sorts 64-bit
values with its AVX-512 kernels, which run several times slower on AMD Zen 4 than its AVX2
ones (simdb_cli/cpu_dispatch.py; "AMD Zen 4" in RESULTS.md).  Figures from machines that
differ here are not comparable."""

from __future__ import annotations

import os
import platform

import numpy as np
from simdb_cli.cpu_dispatch import first_cpu, read_first_cpu


def describe() -> str:
    """For example "2 cores, AMD EPYC (AuthenticAMD family 25), numpy 2.4.6 sorting on AVX2
    (NPY_DISABLE_CPU_FEATURES=X86_V4), Python 3.11.7"."""
    cpu = first_cpu(read_first_cpu())
    model = cpu.get("model name", platform.processor() or platform.machine())
    vendor = f" ({cpu['vendor_id']} family {cpu.get('cpu family', '?')})" if "vendor_id" in cpu else ""
    features = np._core._multiarray_umath.__cpu_features__
    avx512 = features.get("X86_V4", features.get("AVX512_SKX", False))
    setting = os.environ.get("NPY_DISABLE_CPU_FEATURES")
    kernels = "AVX-512" if avx512 else "AVX2 or less"
    shown = f" (NPY_DISABLE_CPU_FEATURES={setting})" if setting is not None else ""
    return (
        f"{os.cpu_count()} cores, {model}{vendor}, numpy {np.__version__} sorting on {kernels}{shown}, "
        f"Python {platform.python_version()}"
    )
