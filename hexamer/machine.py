"""The machine a figure was measured on: CPU/GPU, threads, library versions.

Benchmark tables and evaluation reports both record it, so it lives here (product code never
imports :mod:`hexamer.bench`).
"""

from __future__ import annotations

import os
import platform
import sys
from pathlib import Path
from typing import Any

import torch

__all__ = ["cpu_name", "machine_info"]


def machine_info() -> dict[str, Any]:
    """What the figures depend on: CPU/GPU, threads, library versions."""
    info: dict[str, Any] = {
        "platform": platform.platform(),
        "processor": cpu_name(),
        "cpu_count": os.cpu_count(),
        "torch_threads": torch.get_num_threads(),
        "python": sys.version.split()[0],
        "torch": torch.__version__,
    }
    if torch.cuda.is_available():
        info["gpu"] = torch.cuda.get_device_name(0)
    from hexamer.model.native import native_status

    info["native_cpu_kernels"] = native_status()  # whether this process's CPU models used it
    return info


def cpu_name() -> str:
    """The CPU's model name (``/proc/cpuinfo``), else what :mod:`platform` knows."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"
