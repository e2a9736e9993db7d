"""Fixtures for the model tests: tiny random Hugging Face Llama checkpoints saved to disk."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import torch

transformers = pytest.importorskip("transformers")

#: Small enough that a forward takes milliseconds on two CPU cores.
TINY: dict[str, Any] = {
    "vocab_size": 256,
    "hidden_size": 64,
    "intermediate_size": 128,
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "max_position_embeddings": 256,
    "bos_token_id": None,
    "eos_token_id": None,
    "pad_token_id": None,
}

CheckpointFactory = Callable[..., tuple[Any, Path]]


def randomize(model: torch.nn.Module) -> None:
    """Give every weight a fan-in-scaled random value (norm gains around 1).

    The default init (std 0.02) makes attention nearly uniform, which would hide RoPE or mask bugs
    below any tolerance; these weights give O(1) logits that react strongly to such bugs.
    """
    gen = torch.Generator().manual_seed(1234)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "norm" in name:
                p.copy_(torch.rand(p.shape, generator=gen) + 0.5)
            else:
                p.copy_(torch.randn(p.shape, generator=gen) / p.shape[-1] ** 0.5)


@pytest.fixture(scope="session")
def make_checkpoint(tmp_path_factory: pytest.TempPathFactory) -> CheckpointFactory:
    """Build a random ``LlamaForCausalLM`` from ``TINY`` + overrides and save it (safetensors)."""

    def build(max_shard_size: str | None = None, **overrides: Any) -> tuple[Any, Path]:
        torch.manual_seed(0)
        config = transformers.LlamaConfig(**(TINY | overrides))
        model = transformers.LlamaForCausalLM(config).eval()
        randomize(model)
        path = tmp_path_factory.mktemp("ckpt")
        kwargs = {"max_shard_size": max_shard_size} if max_shard_size else {}
        model.save_pretrained(path, **kwargs)
        return model, path

    return build
