"""The oneDNN linear fast path changes speed, not results."""

from __future__ import annotations

import copy
from pathlib import Path

import pytest
import torch

from hexamer.model import load_model
from hexamer.model.cpu import PackedLinear, _bf16_supported, onednn_available, use_onednn_linears

pytestmark = pytest.mark.skipif(not onednn_available(), reason="PyTorch built without oneDNN")


def test_packed_linears_match_dense(tiny_folder: Path) -> None:
    dense, _ = load_model(tiny_folder)
    packed, config = load_model(tiny_folder)
    assert use_onednn_linears(packed) == 7 * config.num_hidden_layers
    ids = torch.randint(0, config.vocab_size, (3, 17))
    mask = torch.ones(3, 17, dtype=torch.bool)
    mask[1, :5] = False
    with torch.inference_mode():
        a = dense(ids, attention_mask=mask).logits
        b = packed(ids, attention_mask=mask).logits
    torch.testing.assert_close(a, b, atol=1e-4, rtol=1e-4)


def test_bf16_only_where_native_and_fp16_never(tiny_folder: Path) -> None:
    dense, config = load_model(tiny_folder, dtype=torch.bfloat16)
    packed, _ = load_model(tiny_folder, dtype=torch.bfloat16)
    n = use_onednn_linears(packed)
    assert n == (7 * config.num_hidden_layers if _bf16_supported() else 0)
    ids = torch.randint(0, config.vocab_size, (2, 9))
    with torch.inference_mode():
        torch.testing.assert_close(dense(ids).logits, packed(ids).logits, atol=2e-2, rtol=2e-2)
    fp16, _ = load_model(tiny_folder, dtype=torch.float16)
    assert use_onednn_linears(fp16) == 0


def test_packed_linear_copies_and_state_dict() -> None:
    lin = torch.nn.Linear(8, 5)
    packed = PackedLinear(lin)
    x = torch.randn(3, 8)
    torch.testing.assert_close(packed(x), lin(x))
    torch.testing.assert_close(packed.state_dict()["weight"], lin.weight.detach())
    torch.testing.assert_close(copy.deepcopy(packed)(x), lin(x))
