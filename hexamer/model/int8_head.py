"""The DNA rows of a float32 LM head in int8, for int4 models' decoding.

Why: DNA generation scores only the head's DNA block (4,098 rows), but at the 500M shape that
block is 16.8 MB of float32 read at every step, next to about 190 MB of int4 projections: 8% of
the bytes of a batch-1 int4 step. With one float32 scale per row (``max|w| / 127``, as int8
weights, :func:`hexamer.model.quant.quantize_weight`) it is 4.2 MB, scored on the int8 panel
kernel (int8 widened to float32 in registers, float32 activations and sums: only the weights are
rounded). :class:`Int8PanelHead` replaces :class:`hexamer.model.cpu.PanelHead` as the model's
``head_kernel`` for int4 models only (:func:`use_int8_head`): models whose projections keep
float32 or int8 weights keep a float32 head. Fidelity: docs/quantization.md.
"""

from __future__ import annotations

from typing import Any

import torch

from hexamer.model.cpu import PanelHead
from hexamer.model.decode_step import int4_decoder
from hexamer.model.llama import LlamaModel
from hexamer.model.native import native_kernels
from hexamer.model.quant import quantize_weight


class Int8PanelHead(PanelHead):
    """Scores a contiguous block of float32 LM-head rows from an int8 copy of them (per-row
    scales), quantized and packed on first use of each block and rebuilt when the head weight
    changes (its version counter moves); at most :attr:`MAX_BLOCKS` blocks are kept, blocks
    larger than :attr:`MAX_ROWS` (the whole vocabulary) are declined (``None``)."""

    def accepts(self, hidden: torch.Tensor, weight: torch.Tensor) -> bool:
        return weight.device.type == "cpu" and weight.dtype == torch.float32 and hidden.dtype == torch.float32

    def pack(self, block: torch.Tensor) -> tuple[Any, ...]:
        codes, scales = quantize_weight(block, "lm_head")
        return self._kernels.pack_int8(codes, torch.float32), scales.contiguous()

    def product(self, x: torch.Tensor, packed: tuple[Any, ...], n: int, weight: torch.Tensor) -> torch.Tensor:
        return self._kernels.linear_int8(x, packed[0], packed[1], n)


def use_int8_head(model: LlamaModel) -> bool:
    """Score ``model``'s blocks of head rows with :class:`Int8PanelHead`: float32 CPU models
    whose decoder projections are all int4 panel projections, where the kernels build; True
    where it was switched on (else the model is left alone)."""
    if model.device.type != "cpu" or model.dtype != torch.float32 or not int4_decoder(model):
        return False
    kernels = native_kernels()
    if kernels is None:
        return False
    model.head_kernel = Int8PanelHead(kernels)
    return True
