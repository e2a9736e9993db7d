"""Memory estimates: the parameter count equals the model's, free memory is read, and a request
beyond it is refused with the estimate (weights at load, KV caches in the engine)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import torch

from hexamer.model import memory

from .conftest import TINY


@pytest.mark.parametrize(
    "overrides",
    [{}, {"tie_word_embeddings": True}, {"attention_bias": True, "mlp_bias": True}, {"head_dim": 32}],
)
def test_parameter_count_matches_the_model(overrides: dict[str, Any]) -> None:
    from hexamer.model import LlamaModel, ModelConfig
    from hexamer.model.memory import parameter_count

    config = ModelConfig.from_dict(TINY | {"model_type": "llama"} | overrides)
    with torch.device("meta"):
        model = LlamaModel(config)
    assert parameter_count(config) == sum(p.numel() for p in model.parameters())


def test_free_memory_is_known_on_linux() -> None:
    free = memory.available_memory_bytes("cpu")
    assert free is not None and free > 2**20


def test_check_fits_names_the_estimate(monkeypatch: Any) -> None:
    monkeypatch.setattr(memory, "available_memory_bytes", lambda device="cpu": 2**30)
    memory.check_fits(2**29, "cpu", "half")
    with pytest.raises(
        memory.NotEnoughMemory, match=r"a thing needs 2\.0 GiB, more than the 1\.0 GiB free on cpu; hint"
    ):
        memory.check_fits(2**31, "cpu", "a thing", "hint")
    assert memory.format_bytes(16 * 2**50) == "16.0 PiB" and memory.format_bytes(512) == "512 B"


def test_kv_cache_beyond_free_memory_is_refused(tiny_folder: Path, monkeypatch: Any) -> None:
    from hexamer import Carbon
    from hexamer.engine import EngineConfig
    from hexamer.engine.kv_manager import CacheManager

    carbon = Carbon.from_pretrained(tiny_folder)
    manager = CacheManager(carbon.model, EngineConfig(max_batch_size=64))
    monkeypatch.setattr(memory, "available_memory_bytes", lambda device="cpu": 2**20)
    with pytest.raises(
        memory.NotEnoughMemory,
        match=r"a KV cache of [\d,]+ blocks .*64 row\(s\) of up to 1,000,000 tokens\) needs",
    ):
        manager.ensure(1_000_000, 64)
    assert manager.cache is None
    manager.ensure(16, 2)  # small enough
