import copy

import pytest
import torch

from hexamer.model.rope import apply_rope, rope_cos_sin, rope_frequencies
from hexamer.model.train_native import train_native_kernels
from hexamer.model.train_ops import (
    FusedAttention,
    FusedMLP,
    FusedRMSNorm,
    fused_rms_norm,
    fused_rope,
    fused_swiglu,
    use_fused_training_ops,
)

native = pytest.mark.skipif(train_native_kernels() is None, reason="training kernels not built here")


def _tables(b: int, t: int, d: int, dtype: torch.dtype) -> tuple[torch.Tensor, torch.Tensor]:
    from hexamer.model.config import RopeConfig

    inv, scale = rope_frequencies(RopeConfig(theta=10000.0), d)
    pos = torch.arange(t).expand(b, t) + torch.arange(b)[:, None]  # rows at different offsets
    return rope_cos_sin(inv, pos, scale, dtype)


def _ref_norm(x: torch.Tensor, w: torch.Tensor, eps: float) -> torch.Tensor:
    h = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps)
    return w * h


def _ref_rope(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    return apply_rope(x.transpose(1, 2), cos, sin).transpose(1, 2)


def _ref_swiglu(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    return torch.nn.functional.silu(a) * b


def test_gradcheck_float64():
    """The written-out backwards equal numerical derivatives (the PyTorch-op formulas, float64)."""
    gen = torch.Generator().manual_seed(0)
    x = torch.randn(2, 3, 8, generator=gen, dtype=torch.float64, requires_grad=True)
    w = torch.randn(8, generator=gen, dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(lambda x, w: fused_rms_norm(x, w, 1e-6), (x, w))
    q = torch.randn(2, 3, 2, 8, generator=gen, dtype=torch.float64, requires_grad=True)
    cos, sin = _tables(2, 3, 8, torch.float64)
    assert torch.autograd.gradcheck(lambda q: fused_rope(q, cos, sin), (q,))
    a = torch.randn(2, 3, 5, generator=gen, dtype=torch.float64, requires_grad=True)
    b = torch.randn(2, 3, 5, generator=gen, dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(fused_swiglu, (a, b))


def test_float64_matches_the_reference():
    gen = torch.Generator().manual_seed(1)
    x, w = torch.randn(3, 16, generator=gen, dtype=torch.float64), torch.randn(16, dtype=torch.float64)
    torch.testing.assert_close(fused_rms_norm(x, w, 1e-5), _ref_norm(x, w, 1e-5))
    q = torch.randn(2, 4, 3, 16, generator=gen, dtype=torch.float64)
    cos, sin = _tables(2, 4, 16, torch.float64)
    torch.testing.assert_close(fused_rope(q, cos, sin), _ref_rope(q, cos, sin))


def _compare(fn, ref, inputs, atol=1e-5, rtol=1e-5):
    """Outputs and input gradients of ``fn`` and ``ref`` under the same (non-uniform) output gradient."""
    ours = [t.clone().requires_grad_(t.is_floating_point()) for t in inputs]
    theirs = [t.clone().requires_grad_(t.is_floating_point()) for t in inputs]
    y1, y2 = fn(*ours), ref(*theirs)
    torch.testing.assert_close(y1, y2, atol=atol, rtol=rtol)
    weight = torch.linspace(-1, 1, y1.numel(), dtype=y1.dtype).view_as(y1)
    (y1 * weight).sum().backward()
    (y2 * weight).sum().backward()
    for a, b in zip(ours, theirs, strict=True):
        torch.testing.assert_close(a.grad, b.grad, atol=atol, rtol=rtol)


@native
@pytest.mark.parametrize("rows", [1, 7, 40])
def test_native_float32_matches_the_reference(rows: int):
    gen = torch.Generator().manual_seed(rows)
    x = torch.randn(rows, 3, 96, generator=gen) * 3
    w = torch.randn(96, generator=gen)
    _compare(lambda x, w: fused_rms_norm(x, w, 1e-6), lambda x, w: _ref_norm(x, w, 1e-6), [x, w])
    q = torch.randn(rows, 3, 4, 64, generator=gen)
    cos, sin = _tables(rows, 3, 64, torch.float32)
    _compare(lambda q: fused_rope(q, cos, sin), lambda q: _ref_rope(q, cos, sin), [q])
    a, b = torch.randn(rows, 3, 80, generator=gen) * 4, torch.randn(rows, 3, 80, generator=gen)
    _compare(fused_swiglu, _ref_swiglu, [a, b])


@native
def test_native_frozen_inputs_get_no_gradient():
    gen = torch.Generator().manual_seed(3)
    x, w = torch.randn(5, 32, generator=gen, requires_grad=True), torch.randn(32, generator=gen)
    fused_rms_norm(x, w, 1e-6).sum().backward()  # weight frozen: no partial sums kept
    assert x.grad is not None and w.grad is None
    a = torch.randn(4, 8, generator=gen, requires_grad=True)
    a_ref = a.detach().clone().requires_grad_(True)
    b = torch.randn(4, 8, generator=gen)  # frozen
    fused_swiglu(a, b).sum().backward()
    _ref_swiglu(a_ref, b).sum().backward()
    assert b.grad is None
    torch.testing.assert_close(a.grad, a_ref.grad, atol=1e-5, rtol=1e-5)


def test_autocast_keeps_the_plain_path_and_casts_layer_norms_once():
    from hexamer.model.config import ModelConfig
    from hexamer.model.llama import LlamaModel

    config = ModelConfig(
        vocab_size=32, hidden_size=32, intermediate_size=48, num_hidden_layers=1, num_attention_heads=2,
        num_key_value_heads=2, head_dim=16, max_position_embeddings=32, rms_norm_eps=1e-6,
    )  # fmt: skip
    model = LlamaModel(config)
    use_fused_training_ops(model)
    x = torch.randn(2, 3, 32)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        low = model.layers[0].input_layernorm(x)
        assert low.dtype == torch.bfloat16  # feeds projections only: the cast each would make, once
        assert model.norm(x).dtype == torch.float32  # the final norm: pooled in float32
        assert isinstance(model.norm, FusedRMSNorm)
        out = model(torch.randint(0, 32, (2, 5)), logits_at="none", return_hidden=True)
    assert out.hidden.dtype == torch.float32
    plain = model.layers[0].input_layernorm.weight * (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6))
    torch.testing.assert_close(low, plain.to(torch.bfloat16), atol=0, rtol=8e-3)


def test_fused_model_step_equals_the_plain_model():
    """One forward + backward of a tiny model (padding mask, GQA) with and without the switch:
    same loss and gradients to float32 rounding."""
    from hexamer.model.config import ModelConfig, RopeConfig
    from hexamer.model.llama import LlamaModel

    config = ModelConfig(
        vocab_size=64, hidden_size=64, intermediate_size=96, num_hidden_layers=2, num_attention_heads=4,
        num_key_value_heads=2, head_dim=16, max_position_embeddings=64, rms_norm_eps=1e-6,
        rope=RopeConfig(theta=10000.0),
    )  # fmt: skip
    torch.manual_seed(0)
    plain = LlamaModel(config)
    for p in plain.parameters():
        p.data.normal_(0, 0.2)
    fused = copy.deepcopy(plain)
    assert use_fused_training_ops(fused) == 2 * 4 + 1
    assert isinstance(fused.layers[0].mlp, FusedMLP) and isinstance(fused.layers[0].self_attn, FusedAttention)
    ids = torch.randint(0, 64, (3, 9))
    mask = torch.ones(3, 9, dtype=torch.bool)
    mask[1, 7:] = False
    losses = []
    for model in (plain, fused):
        out = model(ids, attention_mask=mask, logits_at="none", return_hidden=True)
        loss = (out.hidden.float() * mask[..., None]).pow(2).mean()
        loss.backward()
        losses.append(loss.detach())
    torch.testing.assert_close(losses[0], losses[1], atol=1e-6, rtol=1e-5)
    grads = dict(plain.named_parameters())
    for name, p in fused.named_parameters():
        if p.grad is None:
            assert grads[name].grad is None or not grads[name].grad.any(), name
            continue
        torch.testing.assert_close(p.grad, grads[name].grad, atol=1e-5, rtol=1e-4, msg=name)


@native
def test_native_bfloat16_rounds_as_autocast_does():
    """bf16 SwiGLU (both inputs bf16) and the rotation of bf16 q/k by float32 tables (float32 out,
    as ``x * cos`` promotes): the values and gradients of autograd on the same dtypes, to one
    bf16 rounding step."""
    gen = torch.Generator().manual_seed(5)
    a = (torch.randn(3, 7, 80, generator=gen) * 4).bfloat16()
    b = torch.randn(3, 7, 80, generator=gen).bfloat16()
    _compare(fused_swiglu, _ref_swiglu, [a, b], atol=2e-2, rtol=1e-2)
    y = fused_swiglu(a, b)
    assert y.dtype == torch.bfloat16
    assert (y.float() - _ref_swiglu(a, b).float()).abs().max() <= 0.02
    q = torch.randn(3, 7, 4, 64, generator=gen).bfloat16()
    cos, sin = _tables(3, 7, 64, torch.float32)
    rotated = fused_rope(q, cos, sin)
    assert rotated.dtype == torch.float32
    torch.testing.assert_close(rotated, _ref_rope(q, cos, sin), atol=1e-6, rtol=1e-6)
    # autograd rounds each of the two terms of q's gradient to bf16 before adding them (in bf16);
    # the kernel adds them in float32 and rounds once: within one bf16 step of it, and closer
    # to the float64 gradient
    _compare(lambda q: fused_rope(q, cos, sin), lambda q: _ref_rope(q, cos, sin), [q], atol=1.6e-2, rtol=1e-2)


def test_bf16_layers_attend_in_float32_and_return_float32_branches():
    """Under CPU bf16 autocast the fused attention runs its attention in float32 (autocast would
    run it in bf16) and both branches come back as float32 for the float32 residual stream: the
    step's loss and gradients stay closer to the float32 model's than the plain model's under the
    same autocast (bf16 attention), and within bf16 tolerance of float32."""
    from hexamer.model.config import ModelConfig, RopeConfig
    from hexamer.model.llama import LlamaModel

    config = ModelConfig(
        vocab_size=64, hidden_size=64, intermediate_size=96, num_hidden_layers=2, num_attention_heads=4,
        num_key_value_heads=2, head_dim=16, max_position_embeddings=64, rms_norm_eps=1e-6,
        rope=RopeConfig(theta=10000.0),
    )  # fmt: skip
    torch.manual_seed(1)
    plain = LlamaModel(config)
    for p in plain.parameters():
        p.data.normal_(0, 0.2)
    fused = copy.deepcopy(plain)
    use_fused_training_ops(fused)
    x = torch.randn(3, 9, 64)
    cos, sin = _tables(3, 9, 16, torch.float32)
    from hexamer.model.kv_cache import AttentionPlan

    with torch.autocast("cpu", dtype=torch.bfloat16):
        branch = fused.layers[0].self_attn(x.bfloat16(), cos, sin, AttentionPlan(mask=None))
        mlp = fused.layers[0].mlp(x.bfloat16())
    assert branch.dtype == mlp.dtype == torch.float32
    assert branch.to(torch.bfloat16).float().equal(branch)  # bf16 values (o_proj's), widened
    ids = torch.randint(0, 64, (3, 9))
    reference = copy.deepcopy(plain)
    results = {}
    for name, model, autocast in (("fp32", reference, False), ("plain", plain, True), ("fused", fused, True)):
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=autocast):
            out = model(ids, logits_at="none", return_hidden=True)
        loss = out.hidden.float().pow(2).mean()
        loss.backward()
        results[name] = torch.cat([p.grad.flatten() for p in model.parameters() if p.grad is not None])
    for name in ("plain", "fused"):
        cos_sim = torch.nn.functional.cosine_similarity(results[name], results["fp32"], dim=0)
        assert cos_sim > 0.995, (name, float(cos_sim))
    err = {n: (results[n] - results["fp32"]).norm() for n in ("plain", "fused")}
    assert err["fused"] <= err["plain"] * 1.05, err
