"""Training fast path on CPU: linear layers whose forward and both backward products run on oneDNN.

PyTorch's CPU ``F.linear`` / ``mm`` in float32 call MKL's SGEMM, which takes a generic code path on
non-Intel CPUs; oneDNN's matmul (the ``torch.ops.mkldnn._linear_pointwise`` kernel the inference
fast path in :mod:`hexamer.model.cpu` uses too) picks its kernels by instruction set instead. On the
project's AMD EPYC (AVX-512) a training step's three products per projection at batch 16 x 41
tokens (``y = x W^T``, ``dx = dy W``, ``dW = dy^T x``) run 1.2-1.8x faster there (measured in
docs/benchmarks.md, "Fine-tuning"). Same arithmetic, float32 accumulation; results differ from
``F.linear`` only by summation order (~1e-6 relative).

:func:`use_onednn_training_linears` switches the ``nn.Linear`` modules of a model to
:class:`OneDnnTrainLinear` in place: a subclass with the same parameters, names and state dict,
so saving, LoRA wrapping and merging see a plain linear. Under autocast, on other devices or
dtypes, it falls back to ``F.linear``. (The norms, rotary embedding and SwiGLU have their own
training path: :mod:`hexamer.model.train_ops`.)
"""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

__all__ = [
    "OneDnnTrainLinear",
    "drop_bf16_copies",
    "onednn_linear",
    "onednn_training_available",
    "use_onednn_training_linears",
]


def onednn_training_available() -> bool:
    """oneDNN's linear kernel is in this PyTorch build (CPU)."""
    return torch.backends.mkldnn.is_available() and hasattr(torch.ops.mkldnn, "_linear_pointwise")


def _product(x: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    """``x @ weight^T`` for 2-D ``x`` (rows) and ``weight`` (out, in), strided views allowed."""
    return torch.ops.mkldnn._linear_pointwise(x, weight, None, "none", [], "")


class _OneDnnLinear(torch.autograd.Function):
    @staticmethod
    def forward(ctx: Any, x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None) -> torch.Tensor:
        rows = x.reshape(-1, x.shape[-1])
        y = _product(rows, weight)
        if bias is not None:
            y = y + bias
        # the input is needed for the weight's gradient only (a frozen weight: not kept, as F.linear)
        ctx.save_for_backward(rows if ctx.needs_input_grad[1] else None, weight)
        ctx.has_bias = bias is not None
        return y.view(*x.shape[:-1], weight.shape[0])

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> tuple[torch.Tensor | None, ...]:
        rows, weight = ctx.saved_tensors
        g = grad.reshape(-1, grad.shape[-1])
        gx = gw = gb = None
        if ctx.needs_input_grad[0]:
            gx = _product(g, weight.t()).view(*grad.shape[:-1], weight.shape[1])
        if ctx.needs_input_grad[1]:
            gw = _product(g.t(), rows.t())
        if ctx.has_bias and ctx.needs_input_grad[2]:
            gb = g.sum(0)
        return gx, gw, gb


def onednn_linear(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None = None) -> torch.Tensor:
    """``F.linear(x, weight, bias)`` with the products (and their gradients) on oneDNN where it
    applies: float32 CPU tensors, no autocast; ``F.linear`` otherwise."""
    if (
        x.device.type != "cpu"
        or x.dtype != torch.float32
        or weight.dtype != torch.float32
        or torch.is_autocast_enabled("cpu")
        or x.numel() == 0
    ):
        return F.linear(x, weight, bias)
    return _OneDnnLinear.apply(x, weight, bias)


def _bf16_autocast(x: torch.Tensor) -> bool:
    return (
        x.device.type == "cpu"
        and torch.is_autocast_enabled("cpu")
        and torch.get_autocast_dtype("cpu") == torch.bfloat16
    )


class OneDnnTrainLinear(nn.Linear):
    """``nn.Linear`` computed by :func:`onednn_linear` (same parameters and state dict).

    Under CPU bf16 autocast a frozen float32 weight (LoRA's backbone) is cast to bf16 once and the
    copy kept until the weight changes (in-place updates bump its version), where autocast casts
    it again at every forward (it caches only the casts of weights that train); the values are
    autocast's, the products the same. :attr:`keep_frozen_bf16` turns it off."""

    keep_frozen_bf16 = True

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        w = self.weight
        if self.keep_frozen_bf16 and not w.requires_grad and w.dtype == torch.float32 and _bf16_autocast(x):
            bias = None if self.bias is None else self.bias.to(torch.bfloat16)
            return F.linear(x.to(torch.bfloat16), self.frozen_bf16(), bias)
        return onednn_linear(x, w, self.bias)

    def frozen_bf16(self) -> torch.Tensor:
        """The bf16 copy of the (frozen) weight, made again only when the weight has changed."""
        w = self.weight
        key = (w.data_ptr(), w._version, tuple(w.shape))
        cached = self.__dict__.get("_bf16_copy")
        if cached is None or cached[0] != key:
            with torch.no_grad():
                cached = (key, w.detach().to(torch.bfloat16))
            self.__dict__["_bf16_copy"] = cached
        return cached[1]


def drop_bf16_copies(model: nn.Module) -> None:
    """Free the bf16 copies of frozen weights that :class:`OneDnnTrainLinear` keeps (after training)."""
    for module in model.modules():
        module.__dict__.pop("_bf16_copy", None)


def use_onednn_training_linears(model: nn.Module) -> int:
    """Switch every plain ``nn.Linear`` in ``model`` to :class:`OneDnnTrainLinear` in place (the
    class only: weights, names and requires_grad are untouched); returns how many. Nothing is
    changed where oneDNN is not available."""
    if not onednn_training_available():
        return 0
    count = 0
    for module in model.modules():
        if type(module) is nn.Linear:
            module.__class__ = OneDnnTrainLinear
            count += 1
    return count
