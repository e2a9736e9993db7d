"""``hexamer bench gpu``, step 1: the device and its two ceilings, measured in the same run.

Copy bandwidth (one device tensor copied into another: every byte read once and written once) is
the ceiling of small-batch decode, which reads every weight per step; the bf16 matmul rate is the
ceiling of prefill and large-batch decode. Both are measured, so the fractions the later steps
report need no vendor figures. On the CPU the same code runs on small tensors (the CI dry run).
"""

from __future__ import annotations

import platform
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

from hexamer.bench.report import BenchReport

__all__ = [
    "best_seconds",
    "environment_report",
    "git_commit",
    "measure_copy_bandwidth",
    "measure_matmul_rate",
    "sync",
]


def sync(device: torch.device) -> None:
    """Wait for the device's queued work (CUDA runs asynchronously; the CPU needs nothing)."""
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def best_seconds(fn: Callable[[], object], device: torch.device, repeats: int) -> float:
    """Best wall time of ``fn`` over ``repeats`` runs after one warm-up, device work included."""
    fn()
    sync(device)
    best = float("inf")
    for _ in range(max(1, repeats)):
        start = time.perf_counter()
        fn()
        sync(device)
        best = min(best, time.perf_counter() - start)
    return best


def measure_copy_bandwidth(device: torch.device, n_bytes: int, repeats: int = 5) -> float:
    """Bytes/s moved by ``dst.copy_(src)`` of an ``n_bytes`` tensor (read + write: 2 × n_bytes)."""
    src = torch.ones(max(1, n_bytes // 2), dtype=torch.bfloat16, device=device)
    dst = torch.empty_like(src)
    seconds = best_seconds(lambda: dst.copy_(src), device, repeats)
    return 2.0 * src.numel() * 2 / seconds


def measure_matmul_rate(
    device: torch.device, m: int, dtype: torch.dtype = torch.bfloat16, repeats: int = 5
) -> float:
    """FLOP/s of an ``(m, m) @ (m, m)`` matmul in ``dtype``."""
    a = torch.randn(m, m, device=device).to(dtype)
    b = torch.randn(m, m, device=device).to(dtype)
    seconds = best_seconds(lambda: torch.mm(a, b), device, repeats)
    return 2.0 * m**3 / seconds


def git_commit() -> str | None:
    """The checkout's commit (``None`` outside a git checkout): a report says what code it measured."""
    root = Path(__file__).resolve().parents[2]
    try:
        done = subprocess.run(
            ["git", "-C", str(root), "rev-parse", "--short=12", "HEAD"],
            capture_output=True,
            text=True,
            timeout=10,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return done.stdout.strip() or None


def device_facts(device: torch.device) -> dict[str, Any]:
    """Name, memory and versions of ``device`` (what every figure of the report depends on)."""
    facts: dict[str, Any] = {
        "device": str(device),
        "torch": torch.__version__,
        "python": platform.python_version(),
    }
    if device.type == "cuda":
        props = torch.cuda.get_device_properties(device)
        free, total = torch.cuda.mem_get_info(device)
        facts.update(
            name=props.name,
            memory_gib=total / 2**30,
            free_gib=free / 2**30,
            capability=f"{props.major}.{props.minor}",
            multiprocessors=props.multi_processor_count,
            cuda=torch.version.cuda,
            cudnn=torch.backends.cudnn.version(),
            gpus=torch.cuda.device_count(),
            tf32_matmul=torch.backends.cuda.matmul.allow_tf32,
        )
    else:
        from hexamer.machine import cpu_name

        facts.update(name=cpu_name(), threads=torch.get_num_threads())
    return facts


def environment_report(device: torch.device, *, copy_bytes: int, matmul_m: int) -> BenchReport:
    """One row of facts and measured ceilings (``copy GB/s``, ``bf16 TFLOP/s``)."""
    row = device_facts(device)
    row["copy GB/s"] = measure_copy_bandwidth(device, copy_bytes) / 1e9
    row["bf16 TFLOP/s"] = measure_matmul_rate(device, matmul_m) / 1e12
    report = BenchReport(
        name="environment",
        title=f"Device and measured ceilings ({row['name']})",
        columns=list(row),
        rows=[row],
        formats={
            "memory_gib": "{:.1f}",
            "free_gib": "{:.1f}",
            "copy GB/s": "{:,.0f}",
            "bf16 TFLOP/s": "{:,.1f}",
        },
    )
    report.notes.append(
        f"copy GB/s: dst.copy_(src) of a {copy_bytes / 2**20:,.0f} MiB bf16 tensor, bytes read + written, best of 5; "
        f"bf16 TFLOP/s: ({matmul_m}×{matmul_m}) @ ({matmul_m}×{matmul_m}), best of 5"
    )
    return report
