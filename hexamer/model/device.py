"""What a device can run, checked before any weight is read: bfloat16 needs a GPU of compute
capability 8.0 or newer (Ampere); on an older card PyTorch either refuses deep inside a kernel or
emulates it many times slower, so a load asks for float16 or float32 instead."""

from __future__ import annotations

import torch

__all__ = ["BF16_MIN_CAPABILITY", "check_dtype_on_device"]

#: The oldest CUDA compute capability with native bfloat16 matmuls.
BF16_MIN_CAPABILITY = (8, 0)


def check_dtype_on_device(dtype: torch.dtype, device: torch.device | str) -> None:
    """Refuse (``ValueError``) ``dtype`` where ``device`` cannot run it natively: bfloat16 on a
    CUDA GPU older than :data:`BF16_MIN_CAPABILITY` (ROCm GPUs are left to PyTorch)."""
    device = torch.device(device)
    if device.type != "cuda" or dtype != torch.bfloat16 or torch.version.hip is not None:
        return
    index = device.index if device.index is not None else torch.cuda.current_device()
    capability = tuple(torch.cuda.get_device_capability(index))
    if capability < BF16_MIN_CAPABILITY:
        name = torch.cuda.get_device_name(index)
        raise ValueError(
            f"bfloat16 is not supported on {device} ({name}, compute capability "
            f"{capability[0]}.{capability[1]}; bfloat16 needs {BF16_MIN_CAPABILITY[0]}.{BF16_MIN_CAPABILITY[1]} "
            "or newer): load in float16 (--dtype float16) or float32"
        )
