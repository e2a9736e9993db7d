"""The int8 DNA rows of an int4 model's head (``hexamer.model.int8_head``): the logits of the
per-row int8 weight against float64, what it declines, repacking after a weight change, and
which models get it."""

from __future__ import annotations

import pytest
import torch

from hexamer.model.config import ModelConfig
from hexamer.model.cpu import use_cpu_linears
from hexamer.model.int8_head import Int8PanelHead, use_int8_head
from hexamer.model.llama import LlamaModel
from hexamer.model.native import native_kernels, native_status
from hexamer.model.quant import quantize_model, quantize_weight


def _head() -> Int8PanelHead:
    kernels = native_kernels()
    if kernels is None:
        pytest.skip(native_status())
    return Int8PanelHead(kernels)


@pytest.mark.parametrize(("rows", "width", "block"), [(1, 64, (3, 50)), (3, 37, (0, 17)), (9, 100, (10, 80))])
def test_logits_are_the_int8_rows_times_float64(rows: int, width: int, block: tuple[int, int]) -> None:
    head = _head()
    gen = torch.Generator().manual_seed(rows)
    weight, hidden = torch.randn(90, width, generator=gen), torch.randn(rows, 1, width, generator=gen)
    codes, scales = quantize_weight(weight[block[0] : block[1]])
    want = hidden.double() @ (codes.double() * scales.double()[:, None]).T
    with torch.inference_mode():
        got = head(hidden, weight, slice(*block))
    assert got is not None and got.shape == (rows, 1, block[1] - block[0]) and got.dtype == torch.float32
    torch.testing.assert_close(got.double(), want, atol=1e-4, rtol=1e-4)


def test_declines_and_repacks() -> None:
    head = _head()
    weight, hidden = torch.randn(40, 32), torch.randn(2, 32)
    with torch.inference_mode():
        assert head(hidden, weight, slice(0, 40, 2)) is None  # strided rows
        assert head(hidden.bfloat16(), weight.bfloat16(), slice(0, 8)) is None  # float32 only
        first = head(hidden, weight, slice(0, 8))
    assert head(hidden, weight, slice(0, 8)) is None  # autograd on
    with torch.no_grad():
        weight[:8] *= 2  # an in-place change moves the version: packed again
        again = head(hidden, weight, slice(0, 8))
    assert first is not None and again is not None
    torch.testing.assert_close(again, 2 * first, atol=1e-4, rtol=1e-4)


def test_only_int4_models_get_it() -> None:
    _head()
    config = ModelConfig(
        vocab_size=50, hidden_size=64, intermediate_size=96, num_hidden_layers=1, num_attention_heads=2,
        num_key_value_heads=1, head_dim=32,
    )  # fmt: skip
    plain = LlamaModel(config)
    use_cpu_linears(plain, native=True)
    assert not use_int8_head(plain) and not isinstance(plain.head_kernel, Int8PanelHead)
    int4 = LlamaModel(config)
    quantize_model(int4, bits=4)
    use_cpu_linears(int4, native=True)
    assert use_int8_head(int4) and isinstance(int4.head_kernel, Int8PanelHead)
