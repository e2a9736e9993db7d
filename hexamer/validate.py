"""Range checks on numbers and names a user passes, shared by the Python API and the CLI.

Each check raises ``ValueError`` with a message that names the value and the accepted range, before
anything is allocated or loaded: ``torch.set_num_threads(100000)`` kills the process, a seed past
64 bits fails deep inside ``torch.Generator``, ``max_bp=10**12`` asks numpy for terabytes before
the context check, and ``torch.device("tpu:7")`` lists twenty device types hexamer cannot use.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import torch


__all__ = [
    "DTYPES",
    "SEED_MAX",
    "SEED_MIN",
    "check_dtype",
    "check_new_length",
    "check_seed",
    "check_threads",
    "max_threads",
    "parse_device",
]

#: Seeds ``torch.Generator.manual_seed`` takes: signed or unsigned 64-bit.
SEED_MIN = -(2**63)
SEED_MAX = 2**64 - 1
#: ``dtype`` names the model loader understands.
DTYPES = ("auto", "float32", "bfloat16", "float16", "fp32", "bf16", "fp16", "half")
#: int8 weights (``hexamer.model.quant``) with float32 or bfloat16 activations, int8 weights with
#: int8 activations, and int4 weights (with int8 activations, ``hexamer.model.lowbit``).
INT8_DTYPES = (
    "int8",
    "int8-fp32",
    "int8-float32",
    "int8-bf16",
    "int8-bfloat16",
    "int8-a8",
    "int4",
    "int4-bf16",
)
#: Device types hexamer runs on.
DEVICE_TYPES = ("cpu", "cuda", "mps")


def check_seed(seed: int, *, name: str = "seed") -> None:
    """A seed must be an integer that ``torch.Generator.manual_seed`` accepts."""
    if not isinstance(seed, int) or isinstance(seed, bool):
        raise ValueError(f"{name} must be an integer, got {seed!r}")
    if not SEED_MIN <= seed <= SEED_MAX:
        raise ValueError(f"{name} must lie in [-2**63, 2**64 - 1] (64 bits), got {seed}")


def max_threads() -> int:
    """The most PyTorch threads worth asking for: the CPU cores of this machine."""
    return os.cpu_count() or 1


def check_threads(threads: int, *, name: str = "threads") -> None:
    """At least 1 and at most :func:`max_threads` (more only slows PyTorch down; far more crashes it)."""
    limit = max_threads()
    if not 1 <= threads <= limit:
        raise ValueError(f"{name} must lie in [1, {limit}] (this machine's CPU cores), got {threads}")


def check_dtype(dtype: str, *, name: str = "dtype") -> None:
    if dtype not in DTYPES + INT8_DTYPES:
        raise ValueError(f"{name} must be one of {', '.join(DTYPES + INT8_DTYPES)}, got {dtype!r}")


def parse_device(device: str | torch.device | None) -> torch.device:
    """``device`` as a ``torch.device`` this machine has (None: cuda when present, else cpu).

    Refuses unknown or unusable types (``tpu``, ``meta``), a CUDA index past the devices present,
    and CUDA or MPS on a machine without them, each with a message that says what exists.
    """
    import torch

    if device is None:
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    try:
        dev = torch.device(device)
    except (RuntimeError, ValueError, TypeError):
        raise ValueError(
            f"unknown device {str(device)!r}: use cpu, cuda, cuda:N (N = GPU index) or mps"
        ) from None
    if dev.type not in DEVICE_TYPES:
        raise ValueError(f"device {str(device)!r}: hexamer runs on {', '.join(DEVICE_TYPES)}, not {dev.type}")
    if dev.type == "cuda":
        n = torch.cuda.device_count() if torch.cuda.is_available() else 0
        if n == 0:
            raise ValueError(f"device {str(device)!r}: no CUDA GPU is available on this machine (use cpu)")
        if dev.index is not None and dev.index >= n:
            raise ValueError(
                f"device {str(device)!r}: this machine has {n} CUDA GPU(s), cuda:0..cuda:{n - 1}"
            )
    if dev.type == "mps" and not torch.backends.mps.is_available():
        raise ValueError(f"device {str(device)!r}: MPS is not available on this machine (use cpu)")
    if dev.type == "cpu" and dev.index not in (None, 0):
        raise ValueError(f"device {str(device)!r}: the CPU has no index (use cpu)")
    return dev


def check_new_length(
    max_bp: object, max_new_tokens: object, k: int, context: int, limit: str = "model's context"
) -> int | None:
    """The new tokens ``max_bp`` (bases) or ``max_new_tokens`` ask for, refused (``ValueError`` naming
    the option) when they alone exceed ``context`` (``limit`` names it), before any prompt is read;
    None when the value is not a positive integer (the sampling options refuse it)."""
    name, value = ("max_bp", max_bp) if max_bp is not None else ("max_new_tokens", max_new_tokens)
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        return None
    n_new = -(-value // k) if name == "max_bp" else value
    if n_new > context:
        most = f"{context * k:,} bp" if name == "max_bp" else f"{context:,} tokens"
        raise ValueError(
            f"{name}={value:,} needs {n_new:,} new tokens, which exceeds the {limit} of {context:,} tokens "
            f"(at most {most} even after an empty prompt)"
        )
    return n_new
