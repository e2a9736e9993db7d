"""``load_model``: a checkpoint folder as a :class:`~hexamer.model.LlamaModel`, float or int8.

The one entry point above the two loaders: :mod:`hexamer.model.checkpoint` reads float checkpoints,
:mod:`hexamer.model.quant` int8 ones (a quantized folder, or a float folder loaded with an
``"int8"``/``"int8-bf16"`` dtype). Keeping the choice here lets the int8 loader build on the float
one without the two modules importing each other.
"""

from __future__ import annotations

from pathlib import Path

import torch

from hexamer.model import quant
from hexamer.model.checkpoint import load_float_model, read_folder_config
from hexamer.model.config import ModelConfig
from hexamer.model.llama import LlamaModel

__all__ = ["load_model"]


def load_model(
    path: str | Path,
    dtype: torch.dtype | str | None = torch.float32,
    device: torch.device | str = "cpu",
) -> tuple[LlamaModel, ModelConfig]:
    """Load ``path`` (a local checkpoint folder) as an eval-mode :class:`LlamaModel` in ``dtype``.

    Errors name the folder, file and tensor: missing ``config.json``, missing/unexpected tensors,
    wrong shapes, non-float storage.
    """
    folder, config = read_folder_config(path)
    qconfig = quant.folder_quantization(folder)
    if qconfig is not None or quant.int8_activation_dtype(dtype) is not None:
        return quant.load_int8(folder, config, qconfig, dtype, torch.device(device))
    return load_float_model(folder, dtype, device)
