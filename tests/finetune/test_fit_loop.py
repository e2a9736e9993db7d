"""Gradient clipping folded into the fused AdamW step equals clip_grad_norm_ then the step."""

import pytest
import torch

from hexamer.finetune.fit_loop import clip_in_step


@pytest.mark.parametrize("max_norm", [0.5, 1e6])  # clipped, and a norm under the limit
@pytest.mark.parametrize("fused", [True, False])
def test_clip_in_step_equals_clip_grad_norm_then_step(max_norm: float, fused: bool):
    gen = torch.Generator().manual_seed(0)
    shapes = [(30, 20), (20,), (5, 30)]
    ours = [torch.randn(s, generator=gen).requires_grad_(True) for s in shapes]
    ref = [p.detach().clone().requires_grad_(True) for p in ours]
    opt_ours = torch.optim.AdamW(ours, lr=1e-2, weight_decay=0.01, fused=fused or None)
    opt_ref = torch.optim.AdamW(ref, lr=1e-2, weight_decay=0.01, fused=fused or None)
    for _ in range(3):
        for a, b in zip(ours, ref, strict=True):
            g = torch.randn(a.shape, generator=gen) * 5
            a.grad, b.grad = g.clone(), g.clone()
        clip_in_step(opt_ours, max_norm)
        opt_ours.step()
        torch.nn.utils.clip_grad_norm_(ref, max_norm)
        opt_ref.step()
        for a, b in zip(ours, ref, strict=True):
            torch.testing.assert_close(a, b, atol=1e-6, rtol=1e-6)
