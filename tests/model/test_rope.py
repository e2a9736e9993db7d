"""RoPE frequencies, attention scaling and cos/sin tables against transformers' reference code."""

from __future__ import annotations

from typing import Any

import pytest
import torch

from hexamer.model import ModelConfig, apply_rope, rope_cos_sin, rope_frequencies
from tests.model.rope_settings import LLAMA3, YARN

transformers = pytest.importorskip("transformers")
from transformers.modeling_rope_utils import ROPE_INIT_FUNCTIONS  # noqa: E402
from transformers.models.llama.modeling_llama import LlamaRotaryEmbedding  # noqa: E402

CARBON_3B = {
    "hidden_size": 3072,
    "num_attention_heads": 32,
    "head_dim": 96,
    "max_position_embeddings": 131072,
}
SMALL = {"hidden_size": 64, "num_attention_heads": 4, "max_position_embeddings": 256}

CASES: list[tuple[dict[str, Any], dict[str, Any]]] = [
    (SMALL, {"rope_type": "default", "rope_theta": 10000.0}),
    (CARBON_3B, {"rope_type": "default", "rope_theta": 5e6}),
    (SMALL, {"rope_type": "linear", "factor": 2.5, "rope_theta": 10000.0}),
    (SMALL, LLAMA3),
    (
        CARBON_3B,
        {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 32768, "rope_theta": 5e6},
    ),
    (SMALL, YARN),
    (
        SMALL,
        {
            "rope_type": "yarn",
            "factor": 4.0,
            "original_max_position_embeddings": 64,
            "truncate": False,
            "beta_fast": 16.0,
            "beta_slow": 2.0,
            "rope_theta": 10000.0,
        },
    ),
    (
        SMALL,
        {
            "rope_type": "yarn",
            "factor": 8.0,
            "original_max_position_embeddings": 32,
            "mscale": 0.707,
            "mscale_all_dim": 1.0,
            "rope_theta": 10000.0,
        },
    ),
    (
        SMALL,
        {
            "rope_type": "yarn",
            "factor": 2.0,
            "original_max_position_embeddings": 128,
            "attention_factor": 1.3,
            "rope_theta": 10000.0,
        },
    ),
]


def _hf_config(dims: dict[str, Any], rope: dict[str, Any]) -> Any:
    return transformers.LlamaConfig(
        vocab_size=32, intermediate_size=8, num_hidden_layers=1, rope_parameters=dict(rope), **dims
    )


@pytest.mark.parametrize(("dims", "rope"), CASES)
def test_frequencies_match_transformers(dims: dict[str, Any], rope: dict[str, Any]) -> None:
    hf = _hf_config(dims, rope)
    if rope["rope_type"] == "default":
        ref, ref_scale = LlamaRotaryEmbedding.compute_default_rope_parameters(hf)
    else:
        ref, ref_scale = ROPE_INIT_FUNCTIONS[rope["rope_type"]](hf, "cpu")
    ours = ModelConfig.from_dict(hf.to_dict())
    inv_freq, scale = rope_frequencies(ours.rope, ours.head_dim)
    assert inv_freq.dtype == torch.float32 and inv_freq.shape == (ours.head_dim // 2,)
    torch.testing.assert_close(inv_freq, ref, rtol=1e-6, atol=0)
    assert scale == pytest.approx(ref_scale, rel=1e-12)


@pytest.mark.parametrize(("dims", "rope"), [CASES[1], CASES[4], CASES[5]])
def test_cos_sin_match_transformers_for_ragged_positions(dims: dict[str, Any], rope: dict[str, Any]) -> None:
    hf = _hf_config(dims, rope)
    emb = LlamaRotaryEmbedding(hf)
    positions = torch.tensor([[0, 1, 2, 3, 4], [7, 8, 9, 1000, 65535], [130000, 131071, 5, 5, 5]])
    x = torch.zeros(1, dtype=torch.float32)
    ref_cos, ref_sin = emb(x, positions)
    ours = ModelConfig.from_dict(hf.to_dict())
    inv_freq, scale = rope_frequencies(ours.rope, ours.head_dim)
    cos, sin = rope_cos_sin(inv_freq, positions, scale, torch.float32)
    torch.testing.assert_close(cos, ref_cos, rtol=0, atol=1e-6)
    torch.testing.assert_close(sin, ref_sin, rtol=0, atol=1e-6)
    cos16, _ = rope_cos_sin(inv_freq, positions, scale, torch.bfloat16)
    assert cos16.dtype == torch.bfloat16


def test_apply_rope_is_a_rotation_and_relative() -> None:
    torch.manual_seed(0)
    ours = ModelConfig.from_dict(
        {
            "vocab_size": 8,
            "hidden_size": 32,
            "intermediate_size": 8,
            "num_hidden_layers": 1,
            "num_attention_heads": 2,
        }
    )
    inv_freq, scale = rope_frequencies(ours.rope, ours.head_dim)
    q = torch.randn(1, 2, 1, 16, dtype=torch.float64)
    k = torch.randn(1, 2, 1, 16, dtype=torch.float64)

    def rotated(x: torch.Tensor, pos: int) -> torch.Tensor:
        cos, sin = rope_cos_sin(inv_freq, torch.tensor([[pos]]), scale, torch.float64)
        return apply_rope(x, cos, sin)

    # Norm-preserving, and q.k depends only on the distance between the two positions.
    torch.testing.assert_close(rotated(q, 37).norm(dim=-1), q.norm(dim=-1))
    a = (rotated(q, 10) * rotated(k, 3)).sum(-1)
    b = (rotated(q, 107) * rotated(k, 100)).sum(-1)
    torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-5)
