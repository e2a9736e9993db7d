import pytest
import torch
from torch import nn

from hexamer.model.train_kernels import (
    OneDnnTrainLinear,
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
