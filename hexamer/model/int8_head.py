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

import torch

from hexamer.model.decode_step import int4_decoder
from hexamer.model.llama import LlamaModel
from hexamer.model.native import NativeKernels, native_kernels
from hexamer.model.quant import quantize_weight


class Int8PanelHead:
    """Scores a contiguous block of float32 LM-head rows from an int8 copy of them (per-row
    scales), quantized and packed on first use of each block and rebuilt when the head weight
    changes (its version counter moves); at most :attr:`MAX_BLOCKS` blocks are kept, blocks
    larger than :attr:`MAX_ROWS` (the whole vocabulary) are declined (``None``)."""

    MAX_ROWS = 65_536
    MAX_BLOCKS = 4

    def __init__(self, kernels: NativeKernels) -> None:
        self._kernels = kernels
        self._packed: dict[tuple[int, int], tuple[int, int, torch.Tensor, torch.Tensor]] = {}

    def __call__(self, hidden: torch.Tensor, weight: torch.Tensor, rows: slice) -> torch.Tensor | None:
        start, stop, step = rows.indices(weight.shape[0])
        n = stop - start
        if step != 1 or not 0 < n <= self.MAX_ROWS or torch.is_grad_enabled():
            return None
        if weight.device.type != "cpu" or weight.dtype != torch.float32 or hidden.dtype != torch.float32:
            return None
        key, stamp = (start, stop), (weight.data_ptr(), weight._version)
        entry = self._packed.get(key)
        if entry is None or entry[:2] != stamp:
            if entry is None and len(self._packed) >= self.MAX_BLOCKS:
                self._packed.pop(next(iter(self._packed)))
            codes, scales = quantize_weight(weight[start:stop], "lm_head")
            panels = self._kernels.pack_int8(codes, torch.float32)
            entry = self._packed[key] = (*stamp, panels, scales.contiguous())
        x = hidden.reshape(-1, hidden.shape[-1]).contiguous()
        logits = self._kernels.linear_int8(x, entry[2], entry[3], n)
        return logits.view(*hidden.shape[:-1], n)

    def __deepcopy__(self, memo: dict) -> Int8PanelHead:  # a copied model packs its own head
        return Int8PanelHead(self._kernels)


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
