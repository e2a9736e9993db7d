import pytest
import torch
from torch import nn

from hexamer.model.train_kernels import (
    OneDnnTrainLinear,
    drop_bf16_copies,
    onednn_linear,
    onednn_training_available,
    use_onednn_training_linears,
)

pytestmark = pytest.mark.skipif(not onednn_training_available(), reason="no oneDNN in this PyTorch")


def _grads(fn, x, w, b):
    x, w = x.clone().requires_grad_(True), w.clone().requires_grad_(True)
    b = None if b is None else b.clone().requires_grad_(True)
    y = fn(x, w, b)
    (y * torch.linspace(-1, 1, y.numel()).view_as(y)).sum().backward()
    return y.detach(), x.grad, w.grad, None if b is None else b.grad


@pytest.mark.parametrize("bias", [False, True])
def test_forward_and_gradients_equal_f_linear(bias: bool):
    gen = torch.Generator().manual_seed(0)
    x = torch.randn(3, 7, 48, generator=gen)
    w = torch.randn(40, 48, generator=gen) / 7
    b = torch.randn(40, generator=gen) if bias else None
    ours = _grads(onednn_linear, x, w, b)
    ref = _grads(torch.nn.functional.linear, x, w, b)
    for got, want in zip(ours, ref, strict=True):
        if want is not None:
            torch.testing.assert_close(got, want, atol=1e-5, rtol=1e-5)


def test_non_contiguous_input_and_frozen_weight():
    gen = torch.Generator().manual_seed(1)
    x = torch.randn(5, 64, 6, generator=gen).transpose(1, 2)  # (5, 6, 64), strided
    w = torch.randn(32, 64, generator=gen)
    xa = x.clone().requires_grad_(True)
    xb = x.clone().requires_grad_(True)
    onednn_linear(xa, w).pow(2).sum().backward()
    torch.nn.functional.linear(xb, w).pow(2).sum().backward()
    torch.testing.assert_close(xa.grad, xb.grad, atol=1e-4, rtol=1e-5)


def test_autocast_and_other_dtypes_fall_back_to_f_linear():
    x, w = torch.randn(4, 16), torch.randn(8, 16)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        assert onednn_linear(x, w).dtype == torch.bfloat16
    assert onednn_linear(x.double(), w.double()).dtype == torch.float64


def test_switching_keeps_parameters_and_state_dict():
    model = nn.Sequential(nn.Linear(8, 4), nn.ReLU(), nn.Linear(4, 2, bias=False))
    before = {k: v.clone() for k, v in model.state_dict().items()}
    x = torch.randn(3, 8)
    want = model(x)
    assert use_onednn_training_linears(model) == 2
    assert all(isinstance(m, OneDnnTrainLinear) for m in (model[0], model[2]))
    assert isinstance(model[0], nn.Linear)
    assert set(model.state_dict()) == set(before)
    torch.testing.assert_close(model(x), want, atol=1e-6, rtol=1e-6)
    assert use_onednn_training_linears(model) == 0  # already switched


def test_a_frozen_weight_does_not_keep_the_input():
    """As F.linear: the input is saved for the weight's gradient only (LoRA's frozen projections)."""
    x = torch.randn(4, 16, requires_grad=True)
    frozen = onednn_linear(x, torch.randn(8, 16))
    trained = onednn_linear(x, torch.randn(8, 16, requires_grad=True))
    assert frozen.grad_fn.saved_tensors[0] is None
    assert trained.grad_fn.saved_tensors[0] is not None


def test_a_frozen_weight_is_cast_to_bf16_once_and_again_when_it_changes():
    """Under bf16 autocast a frozen weight's bf16 copy is kept across forwards (autocast would cast
    it every time): the same outputs and input gradients as F.linear under autocast, no weight
    gradient; an in-place change of the weight (a merge, a load) makes a new copy."""
    gen = torch.Generator().manual_seed(2)
    layer = nn.Linear(32, 24, bias=True)
    layer.requires_grad_(False)
    use_onednn_training_linears(layer)
    x = torch.randn(5, 32, generator=gen)
    for _ in range(2):
        xa, xb = x.clone().requires_grad_(True), x.clone().requires_grad_(True)
        with torch.autocast("cpu", dtype=torch.bfloat16):
            got = layer(xa)
            want = torch.nn.functional.linear(xb, layer.weight, layer.bias)
        assert got.dtype == want.dtype == torch.bfloat16
        torch.testing.assert_close(got, want, atol=0, rtol=0)
        got.float().pow(2).sum().backward()
        want.float().pow(2).sum().backward()
        torch.testing.assert_close(xa.grad, xb.grad, atol=0, rtol=0)
    first = layer.frozen_bf16()
    assert layer.frozen_bf16() is first  # kept
    with torch.no_grad():
        layer.weight.mul_(2)
    assert layer.frozen_bf16() is not first
    torch.testing.assert_close(layer.frozen_bf16(), (layer.weight * 1).bfloat16(), atol=0, rtol=0)
    layer.weight.requires_grad_(True)  # a trained weight: autocast's own per-forward cast
    with torch.autocast("cpu", dtype=torch.bfloat16):
        layer(x).float().sum().backward()
    assert layer.weight.grad is not None
    drop_bf16_copies(layer)
    assert "_bf16_copy" not in layer.__dict__
