"""The oneDNN linear fast path changes speed, not results."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from hexamer.model import load_model
from hexamer.model.cpu import onednn_available, use_onednn_linears

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


def test_only_fp32_cpu_models_are_converted(tiny_folder: Path) -> None:
    bf16, _ = load_model(tiny_folder, dtype=torch.bfloat16)
    assert use_onednn_linears(bf16) == 0
