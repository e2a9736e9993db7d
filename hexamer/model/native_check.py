"""The check every build of hexamer's C kernels passes before a model may use it: each kernel
against a float64 PyTorch reference on awkward shapes (panel remainders, odd K, every row-tile
size, ragged masks, shuffled KV blocks). ``kernels`` is a loaded
:class:`hexamer.model.native.NativeKernels`."""

from __future__ import annotations

from typing import Any

import torch

from hexamer.model.lowbit import check_lowbit_kernels


def self_check(kernels: Any) -> None:
    """A miscompiled or mis-dispatched kernel must never reach a model: compare with PyTorch on
    awkward shapes (panel remainder, odd K, every row-tile size) before first use."""
    gen = torch.Generator().manual_seed(0)
    for dtype in (torch.float32, torch.bfloat16):
        w = torch.randn(45, 37, generator=gen).to(dtype)
        panels = kernels.pack(w)
        if not torch.equal(kernels.unpack(panels, 45, 37), w):
            raise RuntimeError(f"self-check failed ({dtype} pack/unpack round trip)")
        for m in (1, 2, 5, 8, 13, 17):
            x = torch.randn(m, 37, generator=gen).to(dtype)
            got = kernels.linear(x, panels, 45)
            want = x.double() @ w.double().T
            if not torch.allclose(got.double(), want, atol=1e-4, rtol=1e-4):
                err = (got - want).abs().max().item()
                raise RuntimeError(f"self-check failed ({dtype}, {m} rows, max error {err:.3g})")
        check_int8(kernels, dtype, gen)
        check_attention(kernels, dtype, gen)
        x, w = torch.randn(3, 40, generator=gen).to(dtype), torch.rand(40, generator=gen).to(dtype)
        want = (x.double() * (x.double().pow(2).mean(-1, keepdim=True) + 1e-6).rsqrt() * w.double()).to(dtype)
        if not torch.allclose(kernels.rms_norm(x, w, 1e-6).double(), want.double(), atol=1e-2, rtol=1e-2):
            raise RuntimeError(f"self-check failed (rms_norm, {dtype})")
    check_lowbit_kernels(kernels, gen)


def check_int8(kernels: Any, dtype: torch.dtype, gen: torch.Generator) -> None:
    """int8 weights with ``dtype`` activations vs float64 on the dequantised weight."""
    q = torch.randint(-127, 128, (45, 37), generator=gen, dtype=torch.int8)
    scales = torch.rand(45, generator=gen) / 64
    panels = kernels.pack_int8(q, dtype)
    if not torch.equal(kernels.unpack_int8(panels, 45, 37, dtype), q):
        raise RuntimeError(f"self-check failed (int8 pack/unpack round trip for {dtype} activations)")
    for m in (1, 2, 5, 8, 13, 17):
        x = torch.randn(m, 37, generator=gen).to(dtype)
        got = kernels.linear_int8(x, panels, scales, 45)
        want = (x.double() @ q.double().T) * scales.double()
        if not torch.allclose(got.double(), want, atol=1e-4, rtol=1e-4):
            err = (got - want).abs().max().item()
            raise RuntimeError(f"self-check failed (int8 x {dtype}, {m} rows, max error {err:.3g})")


def check_attention(kernels: Any, dtype: torch.dtype, gen: torch.Generator) -> None:
    """Decode attention vs float64 on a ragged mask, a row subset and an odd head dim."""
    for d in (16, 24):
        q = torch.randn(2, 3, 4, d, generator=gen).to(dtype)
        k_new, v_new = (torch.randn(2, 3, 2, d, generator=gen).to(dtype) for _ in range(2))
        k, v = (torch.randn(3, 2, 40, d, generator=gen).to(dtype) for _ in range(2))
        mask = torch.rand(2, 1, 3, 37, generator=gen) < 0.7
        rows, slots = torch.tensor([2, 0]), torch.tensor([[30, 31, 36], [0, 5, 6]])
        mask[torch.arange(2)[:, None], 0, torch.arange(3), slots] = True
        got = kernels.decode_attention(
            q, k_new, v_new, None, None, k, v, slots, mask, rows=rows, scale=d**-0.5
        )
        # the same through a block table: rows cut into 8-slot blocks laid out in shuffled order
        table = torch.randperm(15, generator=gen).view(3, 5)
        kp, vp = (torch.empty(2, 15, 8, d, dtype=dtype) for _ in range(2))
        kp[:, table.reshape(-1)] = k.transpose(0, 1).reshape(2, 15, 8, d)
        vp[:, table.reshape(-1)] = v.transpose(0, 1).reshape(2, 15, 8, d)
        paged = kernels.decode_attention(
            q, k_new, v_new, None, None, kp, vp, slots, mask, rows=rows, scale=d**-0.5, block_table=table
        )
        k[rows[:, None], :, slots], v[rows[:, None], :, slots] = k_new, v_new
        want = attention_reference(q, k[rows, :, :37], v[rows, :, :37], mask, d**-0.5)
        if not torch.allclose(
            got.double(), want.to(dtype).double(), atol=2e-2 if dtype == torch.bfloat16 else 1e-5
        ):
            raise RuntimeError(f"self-check failed (decode attention, {dtype}, head dim {d})")
        stored = kp[:, table.reshape(-1)].reshape(2, 3, 40, d).transpose(0, 1)
        if not (torch.equal(paged, got) and torch.equal(stored, k)):
            raise RuntimeError(f"self-check failed (paged decode attention, {dtype}, head dim {d})")


def attention_reference(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask: torch.Tensor, scale: float
) -> torch.Tensor:
    """Plain float64 attention of q (B, T, H, D) over k, v (B, G, S, D): (B, T, H * D)."""
    b, t, h, d = q.shape
    q = q.transpose(1, 2)
    rep = h // k.shape[1]
    k, v = k.double().repeat_interleave(rep, 1), v.double().repeat_interleave(rep, 1)
    scores = (q.double() @ k.transpose(-1, -2)) * scale
    probs = scores.masked_fill(~mask, float("-inf")).softmax(-1)
    return (probs @ v).transpose(1, 2).reshape(b, t, h * d)
