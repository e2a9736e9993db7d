"""Training fast path: RMSNorm, rotary embedding and SwiGLU as single autograd functions.

Autograd runs :mod:`hexamer.model.llama`'s norm as 6 kernels forward and about 10 backward, the
rotation as 5 and 7 (``rotate_half``'s slices, negation and concatenation, then zero-filled
slice gradients), SwiGLU as 2 and 4, each a pass over the activations, and keeps their
temporaries (the normalised rows, ``silu(gate)``) for the backward. Here each is one
:class:`torch.autograd.Function` whose backward is written out: on float32 CPU tensors it calls
the fused C kernels of :mod:`hexamer.model.train_native` (one or two passes, OpenMP), otherwise
the same formulas as a few PyTorch ops (float64 for the gradient checks, other devices). Saved
for the backward: the norm's input and per-row ``1/rms`` (not the normalised rows), the
rotation's tables only, SwiGLU's two inputs (not ``silu(gate)``).

:func:`use_fused_training_ops` switches a :class:`~hexamer.model.llama.LlamaModel`'s norms, MLPs
and attention modules to the subclasses below in place (same parameters, names, state dict), as
:mod:`hexamer.model.train_kernels` does for the linears. The maths is the reference's; results
differ from autograd on the plain model only by rounding (fused multiply-adds, summation order),
checked in ``tests/model/test_train_ops.py``.
"""

from __future__ import annotations

import contextlib
from typing import Any

import torch
import torch.nn.functional as F

from hexamer.model.kv_cache import AttentionPlan
from hexamer.model.llama import MLP, Attention, LlamaModel, RMSNorm
from hexamer.model.train_native import TrainKernels, train_native_kernels

__all__ = [
    "FusedAttention",
    "FusedMLP",
    "FusedRMSNorm",
    "fused_rms_norm",
    "fused_rope",
    "fused_swiglu",
    "use_fused_training_ops",
]

_EXACT = (torch.float32, torch.float64)
_LOW = (torch.bfloat16, torch.float16)


def _native(*tensors: torch.Tensor, bf16: bool = False) -> TrainKernels | None:
    """The C kernels when every tensor is a float32 CPU tensor (or, with ``bf16``, every one a
    bfloat16 one) and they are built, else None."""
    dtype = torch.bfloat16 if bf16 else torch.float32
    if not all(t.device.type == "cpu" and t.dtype == dtype for t in tensors):
        return None
    return train_native_kernels()


def _bf16_fused(x: torch.Tensor) -> tuple[torch.dtype, ...]:
    """``(bfloat16,)`` where the bf16 C kernels serve ``x`` (a CPU tensor, kernels built), else
    ``()``: without them bf16 keeps autograd's own ops, whose rounding the kernels reproduce."""
    return (torch.bfloat16,) if x.device.type == "cpu" and train_native_kernels() is not None else ()


# --------------------------------------------------------------------------------------- RMSNorm


class _RMSNorm(torch.autograd.Function):
    @staticmethod
    def forward(ctx: Any, x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
        n = x.shape[-1]
        rows = x.contiguous().view(-1, n)
        kernels = _native(rows, weight) if weight.shape == (n,) else None
        if kernels is not None:
            y, rstd = kernels.rms_forward(rows, weight.contiguous(), eps)
        else:
            rstd = torch.rsqrt(rows.pow(2).mean(-1) + eps)
            y = weight * (rows * rstd[:, None])
        ctx.save_for_backward(rows, weight, rstd)
        return y.view(x.shape)

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> tuple[torch.Tensor | None, ...]:
        rows, weight, rstd = ctx.saved_tensors
        n = rows.shape[-1]
        g = grad.contiguous().view(-1, n)
        want_w = ctx.needs_input_grad[1]
        kernels = _native(g, rows, weight)
        if kernels is not None:
            gx, gw = kernels.rms_backward(g, rows, weight.contiguous(), rstd, want_w)
        else:
            normed = rows * rstd[:, None]
            gy = g * weight
            dot = (gy * normed).sum(-1, keepdim=True) / n
            gx = rstd[:, None] * (gy - normed * dot)
            gw = (g * normed).sum(0) if want_w else None
        return gx.view(grad.shape), gw, None


def fused_rms_norm(x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    """``weight * (x / sqrt(mean(x^2) + eps))`` over the last dimension; ``x`` and ``weight`` of
    one dtype, float32 or float64 (the reference computes float32 statistics for both)."""
    return _RMSNorm.apply(x, weight, eps)


class FusedRMSNorm(RMSNorm):
    """:class:`~hexamer.model.llama.RMSNorm` through :func:`fused_rms_norm` where it applies
    (float32/float64 input of the weight's dtype); under CPU autocast, with ``cast_output``, the
    output is cast to the autocast dtype once for the projections that read it: q, k and v (gate
    and up) would each cast it again, and their backward would cast three (two) gradients back
    and add them in float32; here they are added in bf16 before one cast back."""

    cast_output = False

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.dtype not in _EXACT or x.dtype != self.weight.dtype:
            y = super().forward(x)
        else:
            y = fused_rms_norm(x, self.weight, self.eps)
        if self.cast_output and x.device.type == "cpu" and torch.is_autocast_enabled("cpu"):
            return y.to(torch.get_autocast_dtype("cpu"))
        return y


class _CastingFusedRMSNorm(FusedRMSNorm):
    cast_output = True


# --------------------------------------------------------------------------------------- rotary


def _rotate(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, transpose: bool) -> torch.Tensor:
    """The rotation (or its transpose) of ``x`` ``(B, T, H, D)`` as PyTorch ops, tables ``(B, T, D)``."""
    half = x.shape[-1] // 2
    c, s = cos[:, :, None], sin[:, :, None]
    x1, x2 = x[..., :half], x[..., half:]
    if transpose:  # the transpose of [x1, x2] -> [-x2, x1] is [z1, z2] -> [z2, -z1]
        return x * c + torch.cat((x2 * s[..., half:], -(x1 * s[..., :half])), dim=-1)
    return x * c + torch.cat((-x2, x1), dim=-1) * s


class _Rope(torch.autograd.Function):
    @staticmethod
    def forward(ctx: Any, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
        ctx.save_for_backward(cos, sin)
        ctx.x_dtype = x.dtype
        tables = (*x.shape[:2], x.shape[-1])  # the kernel reads one (D,) row per (batch, token)
        fits = cos.shape == sin.shape == tables and x.dim() == 4 and x.shape[-1] % 2 == 0
        ctx.native = fits and x.dtype in (torch.float32, torch.bfloat16)
        kernels = _native(cos, sin) if ctx.native else None
        if kernels is not None:
            out = torch.float32 if x.dtype == torch.bfloat16 else x.dtype
            return kernels.rope(x.contiguous(), cos.contiguous(), sin.contiguous(), False, out)
        return _rotate(x, cos, sin, transpose=False)

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> tuple[torch.Tensor | None, ...]:
        cos, sin = ctx.saved_tensors
        kernels = _native(grad, cos, sin) if ctx.native else None
        if kernels is not None:
            gx = kernels.rope(grad.contiguous(), cos.contiguous(), sin.contiguous(), True, ctx.x_dtype)
        else:
            gx = _rotate(grad, cos, sin, transpose=True).to(ctx.x_dtype)
        return gx, None, None


def fused_rope(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """:func:`hexamer.model.rope.apply_rope` on ``x`` laid out ``(B, T, heads, head_dim)`` (as a
    projection's output is; no transpose first), tables ``(B, T, head_dim)``; no gradient for
    the tables. The output's dtype is the reference's (``x * cos`` promotes a bfloat16 ``x`` to
    the float32 tables' dtype under autocast)."""
    return _Rope.apply(x, cos, sin)


# --------------------------------------------------------------------------------------- SwiGLU


class _SwiGLU(torch.autograd.Function):
    @staticmethod
    def forward(ctx: Any, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        a, b = a.contiguous(), b.contiguous()
        ctx.save_for_backward(a, b)
        kernels = _native(a, b, bf16=a.dtype == torch.bfloat16) if a.shape == b.shape else None
        if kernels is not None:
            return kernels.swiglu_forward(a, b)
        return F.silu(a) * b

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> tuple[torch.Tensor | None, ...]:
        a, b = ctx.saved_tensors
        want_a, want_b = ctx.needs_input_grad[0], ctx.needs_input_grad[1]
        g = grad.to(a.dtype).contiguous()
        kernels = _native(g, a, b, bf16=a.dtype == torch.bfloat16) if a.shape == b.shape == g.shape else None
        if kernels is not None:
            return kernels.swiglu_backward(g, a, b, want_a, want_b)
        sg = torch.sigmoid(a)
        ga = g * b * (sg * (1 + a * (1 - sg))) if want_a else None
        gb = g * (a * sg) if want_b else None
        return ga, gb


def fused_swiglu(gate: torch.Tensor, up: torch.Tensor) -> torch.Tensor:
    """``silu(gate) * up`` for two tensors of one shape and dtype; the backward recomputes
    ``silu(gate)`` instead of keeping it. bfloat16 (CPU autocast) takes the C kernels only, which
    round as autocast's silu and multiply and their backwards do (checked in the tests)."""
    return _SwiGLU.apply(gate, up)


def _float_branch(y: torch.Tensor, projection: torch.nn.Module) -> torch.Tensor:
    """A layer branch's bf16 output as float32 under CPU autocast (float32 weights, so a float32
    residual stream): the residual add ``x + branch`` then adds two float32 tensors instead of
    promoting a bf16 one inside the add (PyTorch's mixed-dtype add is ~20x slower than a cast
    plus a float32 add at these shapes). The same values and, backward, the same bf16 gradient."""
    if y.dtype == torch.bfloat16 and y.device.type == "cpu" and torch.is_autocast_enabled("cpu"):
        weight = next(projection.parameters(), None)  # a LoRA module's first: its base weight
        if weight is not None and weight.dtype == torch.float32:
            return y.float()
    return y


class FusedMLP(MLP):
    """:class:`~hexamer.model.llama.MLP` with :func:`fused_swiglu` between the projections."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        gate, up = self.gate_proj(x), self.up_proj(x)
        if gate.dtype != up.dtype or gate.dtype not in (_EXACT + _bf16_fused(gate)):
            return _float_branch(self.down_proj(F.silu(gate) * up), self.down_proj)
        return _float_branch(self.down_proj(fused_swiglu(gate, up)), self.down_proj)


# --------------------------------------------------------------------------------------- attention


class FusedAttention(Attention):
    """:class:`~hexamer.model.llama.Attention` whose cache-less forward (training, scoring)
    rotates q and k with :func:`fused_rope` in the projections' ``(B, T, heads, D)`` layout;
    forwards over a KV cache are the parent's."""

    def forward(
        self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, plan: AttentionPlan
    ) -> torch.Tensor:
        if plan.cache is not None:
            return super().forward(x, cos, sin, plan)
        b, t, _ = x.shape
        cpu = x.device.type == "cpu"
        q = self.q_proj(x).view(b, t, self.n_heads, self.head_dim)
        k = self.k_proj(x).view(b, t, self.n_kv, self.head_dim)
        v = self.v_proj(x)
        if cpu and v.dtype in _LOW:
            v = v.float()  # before the transpose: a contiguous cast, not a strided one
        v = v.view(b, t, self.n_kv, self.head_dim).transpose(1, 2)
        same = q.dtype in _EXACT and q.dtype == k.dtype == cos.dtype == sin.dtype
        promoted = (
            q.dtype == k.dtype and q.dtype in _bf16_fused(q) and cos.dtype == sin.dtype == torch.float32
        )
        if same or promoted:
            q, k = fused_rope(q, cos, sin).transpose(1, 2), fused_rope(k, cos, sin).transpose(1, 2)
        else:  # other mixes: the plain ops, which promote as the reference does
            q, k = (_rotate(z, cos, sin, transpose=False).transpose(1, 2) for z in (q, k))
        dtype = q.dtype
        if cpu and dtype in _LOW:
            q, k = q.float(), k.float()  # CPU attention in float32, as the parent
        if cpu and v.dtype != q.dtype:
            v = v.to(q.dtype)
        # CPU autocast would cast q, k and v back to bf16 for its attention kernel, which is
        # about 2x slower than float32's at training shapes (forward + backward): it stays off here
        with torch.autocast("cpu", enabled=False) if cpu else contextlib.nullcontext():
            out = F.scaled_dot_product_attention(
                q, k, v, attn_mask=plan.mask, is_causal=plan.mask is None and t > 1,
                scale=self.head_dim**-0.5, enable_gqa=self.n_kv != self.n_heads,
            )  # fmt: skip
        # heads back in place first (a float32 copy), then one contiguous cast where one is due
        out = out.transpose(1, 2).reshape(b, t, self.n_heads * self.head_dim)
        if dtype in _LOW:
            out = out.to(dtype)
        return _float_branch(self.o_proj(out), self.o_proj)


# --------------------------------------------------------------------------------------- switch


def use_fused_training_ops(model: LlamaModel) -> int:
    """Switch ``model``'s norms, MLPs and attention modules to the fused subclasses in place (the
    class only: weights, names and requires_grad are untouched); returns how many. The decoder
    layers' norms also cast their output once under CPU autocast; the final norm does not (its
    output is pooled in float32)."""
    count = 0
    for layer in model.layers:
        for module in layer.modules():
            swaps = {RMSNorm: _CastingFusedRMSNorm, MLP: FusedMLP, Attention: FusedAttention}
            new = swaps.get(type(module))
            if new is not None:
                module.__class__ = new
                count += 1
    if type(model.norm) is RMSNorm:
        model.norm.__class__ = FusedRMSNorm
        count += 1
    return count
