"""Broken model folders for tests of the non-finite paths: weights a load must refuse, or finite
weights whose every output overflows."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from hexamer.synthetic import build_carbon_folder

__all__ = ["OVERFLOW_TENSOR", "build_overflowing_folder", "poison_weights"]

#: the tensor :func:`build_overflowing_folder` makes huge
OVERFLOW_TENSOR = "model.layers.0.input_layernorm.weight"


def poison_weights(folder: str | os.PathLike[str], value: float, name: str = OVERFLOW_TENSOR) -> Path:
    """Fill tensor ``name`` of ``folder``'s single ``model.safetensors`` with ``value`` (in place).

    ``value=float("nan")``: a broken checkpoint that loading must refuse. A huge finite value (the
    default tensor, layer 0's input norm, set to float32's largest) passes the load check but
    makes every forward overflow to inf and then NaN: the run-time path of non-finite outputs."""
    import torch
    from safetensors.torch import load_file, save_file

    file = Path(folder) / "model.safetensors"
    tensors = load_file(str(file))
    tensors[name] = torch.full_like(tensors[name], value)
    save_file(tensors, str(file), metadata={"format": "pt"})
    return Path(folder)


def build_overflowing_folder(out: str | os.PathLike[str], **options: Any) -> Path:
    """:func:`build_carbon_folder` whose weights are all finite (the load check passes) but whose
    every output is NaN: layer 0's input norm is float32's largest value, so the normed hidden
    states overflow to inf. For tests of the ``failed`` statuses of non-finite outputs."""
    import torch

    folder = build_carbon_folder(out, **options)
    return poison_weights(folder, torch.finfo(torch.float32).max)
