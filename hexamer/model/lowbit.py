"""4-bit grouped weights and dynamic int8 activations: the format and its PyTorch reference.

Why: batch-1 decode reads every weight once per step, so 4-bit weights (half the bytes of int8)
make it faster; prefill and batched decode are compute-bound, and int8 x int8 dot products
(VNNI) do four times the work of float32 FMAs per instruction. Both need the activations of a
projection as int8: one scale per token and 32 inputs (as llama.cpp's Q8_0 blocks), ``amax /
127``, round to nearest even, computed on the fly (``lowbit_gemm.c`` does the same, bit for bit).
Per-group rather than per-token scales: an outlier channel then coarsens only its own group
(docs/quantization.md has the measurement).

int4 weights (:class:`Int4Linear`): groups of :data:`GROUP` = 32 inputs of one output channel
share a float16 scale; ``W[n, k] ~ q[n, k] * scale[n, k // 32]`` with ``q`` in [-8, 7]. The
scale is signed (as llama.cpp's Q4_0): ``scale = m / -8`` where ``m`` is the group's weight of
largest magnitude, so that weight is exactly ``-8 * scale`` and all 16 codes are used (a searched
least-squares scale, as llama.cpp's k-quants choose, lowers the weights' squared error by about
11% but did not improve the variant scores: docs/quantization.md). Group 32
rather than 128: at 4 bits the per-group scale carries the fidelity (docs/quantization.md has the
measurement); its cost is 0.5 bit per weight (4.5 bits in all, as Q4_0). Codes are stored as
``q + 8`` two per byte, the even input in the low nibble, each row padded with zero codes to a
multiple of 32 inputs.
"""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

__all__ = [
    "GROUP",
    "Int4Linear",
    "apply_keeping_scales",
    "dequantize_int4",
    "fake_quantize_activations",
    "padded_in_features",
    "quantize_int4",
]

#: Inputs per int4 scale.
GROUP = 32
#: Inputs per activation scale (fixed by the C kernels, whatever GROUP is).
ACT_GROUP = 32


def padded_in_features(k: int) -> int:
    """``k`` rounded up to a whole number of groups (the stored row length)."""
    return -(-k // GROUP) * GROUP


def apply_keeping_scales(module: nn.Module, apply: Any, fn: Any, recurse: bool) -> None:
    """``Module._apply`` for a quantized linear: everything converts as usual but the
    ``weight_scale`` buffer, which only follows the device (``Module.to(dtype)`` would round the
    scales to the new float dtype)."""
    scale = module._buffers.pop("weight_scale")
    try:
        apply(fn, recurse)
    finally:
        module._buffers["weight_scale"] = scale.to(device=fn(scale[:0].float()).device)


def fake_quantize_activations(x: torch.Tensor) -> torch.Tensor:
    """``x`` (..., K) as float32 after a round trip through int8 with one scale per 32 inputs:
    ``round(x * (127 / amax)) * (amax / 127)``, the rounding the C kernels apply to every
    projection input."""
    x = x.float()
    k = x.shape[-1]
    kp = -(-k // ACT_GROUP) * ACT_GROUP
    groups = F.pad(x, (0, kp - k)).unflatten(-1, (kp // ACT_GROUP, ACT_GROUP))
    amax = groups.abs().amax(dim=-1, keepdim=True)
    inv = torch.where(amax > 0, 127.0 / amax, torch.zeros_like(amax))
    return (torch.round(groups * inv) * (amax / 127.0)).flatten(-2)[..., :k]


#: Rows quantized at a time (bounds the temporaries: a few MB whatever the matrix).
_ROW_CHUNK = 256


def quantize_int4(weight: torch.Tensor, name: str = "weight") -> tuple[torch.Tensor, torch.Tensor]:
    """``weight`` [N, K] as packed codes uint8 [N, Kp / 2] and float16 scales [N, Kp / 32]
    (``Kp`` = K rounded up to 32), a chunk of rows at a time (no full-size float32 copy of a large
    weight). Non-finite weights are refused."""
    if weight.dim() != 2 or not weight.is_floating_point():
        raise ValueError(
            f"{name}: can only quantize a 2-D float weight, got {weight.dtype} {tuple(weight.shape)}"
        )
    if not torch.isfinite(weight).all():
        bad = (~torch.isfinite(weight)).nonzero()[0].tolist()
        raise ValueError(f"{name}: non-finite weight at {bad}; refusing to quantize")
    n, k = weight.shape
    kp = padded_in_features(k)
    packed = torch.empty(n, kp // 2, dtype=torch.uint8, device=weight.device)
    scales = torch.empty(n, kp // GROUP, dtype=torch.float16, device=weight.device)
    for r in range(0, n, _ROW_CHUNK):  # a row chunk at a time: no full-size float32 copy
        groups = F.pad(weight[r : r + _ROW_CHUNK].detach().float(), (0, kp - k)).view(-1, kp // GROUP, GROUP)
        extreme = groups.gather(2, groups.abs().argmax(dim=2, keepdim=True)).squeeze(2)
        scale = (extreme / -8.0).to(torch.float16)  # rounded first: the codes are for this scale
        wide = scale.float()
        inv = torch.where(wide != 0, 1.0 / wide, torch.zeros_like(wide))
        q = (torch.round(groups * inv[..., None]).clamp_(-8, 7).to(torch.uint8) + 8).view(-1, kp)
        packed[r : r + _ROW_CHUNK] = q[:, 0::2] | (q[:, 1::2] << 4)
        scales[r : r + _ROW_CHUNK] = scale
    return packed, scales


def dequantize_int4(codes: torch.Tensor, scales: torch.Tensor, in_features: int) -> torch.Tensor:
    """The float32 weight [N, in_features] that packed int4 ``codes`` and ``scales`` stand for."""
    n = codes.shape[0]
    q = torch.stack([codes & 0xF, codes >> 4], dim=2).view(n, -1).to(torch.int16) - 8
    w = q.float().view(n, -1, GROUP) * scales.float()[..., None]
    return w.view(n, -1)[:, :in_features]


def _check_int4(codes: torch.Tensor, scales: torch.Tensor, in_features: int) -> None:
    kp = padded_in_features(in_features)
    n = codes.shape[0] if codes.dim() == 2 else -1
    if codes.dtype != torch.uint8 or codes.shape != (n, kp // 2):
        raise ValueError(f"int4 codes must be uint8 [N, {kp // 2}], got {codes.dtype} {tuple(codes.shape)}")
    if scales.dtype != torch.float16 or scales.shape != (n, kp // GROUP):
        raise ValueError(
            f"int4 scales must be float16 [{n}, {kp // GROUP}], got {scales.dtype} {tuple(scales.shape)}"
        )


class Int4Linear(nn.Module):
    """A bias-optional linear layer with grouped int4 weights and per-row int8 activations.

    ``forward`` is the reference of the C kernel: the input rounded through int8
    (:func:`fake_quantize_activations`) times the dequantised weight, in float32, rounded once to
    the input dtype. Inference only. The state dict holds ``weight`` (packed codes, uint8) and
    ``weight_scale`` (float16), the names of the on-disk format."""

    weight: torch.Tensor
    weight_scale: torch.Tensor

    def __init__(
        self, codes: torch.Tensor, scales: torch.Tensor, in_features: int, bias: torch.Tensor | None = None
    ) -> None:
        super().__init__()
        _check_int4(codes, scales, in_features)
        self.out_features, self.in_features = codes.shape[0], in_features
        self.register_buffer("weight", codes)
        self.register_buffer("weight_scale", scales)
        self.bias = None if bias is None else nn.Parameter(bias.detach(), requires_grad=False)

    @classmethod
    def from_linear(cls, linear: nn.Module, name: str = "weight") -> Int4Linear:
        """Quantize a float ``nn.Linear`` (or anything with ``weight``/``bias``)."""
        codes, scales = quantize_int4(linear.weight, name)
        bias = getattr(linear, "bias", None)
        return cls(codes, scales, linear.weight.shape[1], None if bias is None else bias.detach())

    def dequantized(self, dtype: torch.dtype = torch.float32) -> torch.Tensor:
        """The float weight the codes stand for."""
        return dequantize_int4(self.weight, self.weight_scale, self.in_features).to(dtype)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = F.linear(fake_quantize_activations(x), self.dequantized())
        if self.bias is not None:
            y = y + self.bias.float()
        return y.to(x.dtype)

    def _apply(self, fn: Any, recurse: bool = True) -> Int4Linear:
        # Module.to(dtype) would convert the float16 scales: they only follow the device
        apply_keeping_scales(self, super()._apply, fn, recurse)
        return self

    def extra_repr(self) -> str:
        return (
            f"in_features={self.in_features}, out_features={self.out_features}, int4 groups of {GROUP}, "
            "int8 activations"
        )


def check_lowbit_kernels(kernels: Any, gen: torch.Generator) -> None:
    """The int8-activation kernels of ``kernels`` (a :class:`~hexamer.model.native.NativeKernels`)
    against float64 on the dequantised weights and activations, at awkward shapes (a partial
    panel, K not a multiple of 4 or 32, every row-tile size); ``RuntimeError`` on a mismatch."""
    for n, k in ((45, 37), (16, 64), (33, 100)):
        w = torch.randn(n, k, generator=gen)
        q8 = torch.randint(-127, 128, (n, k), generator=gen, dtype=torch.int8)
        s8 = torch.rand(n, generator=gen) / 64
        codes, s4 = quantize_int4(w)
        panels8, sums = kernels.pack_w8(q8)
        panels4, ps4 = kernels.pack_w4(codes, s4, k)
        back = kernels.unpack_w4(panels4, ps4, n, k)
        if not (torch.equal(kernels.unpack_w8(panels8, n, k), q8) and torch.equal(back[0], codes)):
            raise RuntimeError(f"self-check failed (int8/int4 panel round trip, [{n}, {k}])")
        if not torch.equal(back[1], s4):
            raise RuntimeError(f"self-check failed (int4 scale round trip, [{n}, {k}])")
        for m in (1, 2, 5, 8, 9, 13, 17):
            x = torch.randn(m, k, generator=gen)
            xq = fake_quantize_activations(x).double()
            for name, got, want in (
                (
                    "int8",
                    kernels.linear_w8a8(x, panels8, sums, s8, n),
                    xq @ (q8.double() * s8.double()[:, None]).T,
                ),
                (
                    "int4",
                    kernels.linear_w4a8(x, panels4, ps4, n),
                    xq @ dequantize_int4(codes, s4, k).double().T,
                ),
            ):
                if not torch.allclose(got.double(), want, atol=1e-4, rtol=1e-4):
                    err = (got.double() - want).abs().max().item()
                    raise RuntimeError(
                        f"self-check failed ({name} x int8 activations, [{m}, {k}] x [{n}, {k}], max error {err:.3g})"
                    )
    check_fused_int4(kernels, gen)


def check_fused_int4(kernels: Any, gen: torch.Generator) -> None:
    """The one-call int4 projections (q/k/v side by side, SwiGLU's gate and up) against float64 on
    the dequantised weights: partial panels in each weight, every row-tile size."""
    for k, sizes in ((37, (45, 45, 16)), (100, (33, 33, 7))):
        weights = [quantize_int4(torch.randn(n, k, generator=gen)) for n in sizes]
        packed = [(*kernels.pack_w4(codes, s4, k), n) for (codes, s4), n in zip(weights, sizes, strict=True)]
        dense = [dequantize_int4(codes, s4, k).double() for codes, s4 in weights]
        for m in (1, 2, 5, 8, 9, 13, 17):
            xq = fake_quantize_activations(x := torch.randn(m, k, generator=gen)).double()
            outs = [xq @ w.T for w in dense]
            for got, want, name in (
                (kernels.linear_w4a8_multi(x, packed), torch.cat(outs, 1), "q/k/v"),
                (kernels.linear_w4a8_multi(x, packed[:2]), torch.cat(outs[:2], 1), "two weights"),
                (
                    kernels.swiglu_w4a8(x, packed[0][:2], packed[1][:2], sizes[0]),
                    F.silu(outs[0]) * outs[1],
                    "SwiGLU",
                ),
            ):
                if got.shape != want.shape or not torch.allclose(got.double(), want, atol=1e-4, rtol=1e-4):
                    raise RuntimeError(f"self-check failed (int4 {name} in one call, [{m}, {k}], {sizes})")
