"""16-bit weights on CPU keep a float32 KV cache (attention runs in float32 there)."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from hexamer import Carbon
from hexamer.model import KVCache, load_model


def test_kv_dtype_by_device_and_dtype(tiny_folder: Path) -> None:
    fp32, _ = load_model(tiny_folder)
    bf16, _ = load_model(tiny_folder, dtype=torch.bfloat16)
    assert fp32.kv_dtype == torch.float32
    assert bf16.kv_dtype == torch.float32
    assert KVCache.for_model(bf16, 2, 8).k[0].dtype == torch.float32


def test_fp32_and_bf16_caches_decode_like_a_full_forward(tiny_folder: Path) -> None:
    model, config = load_model(tiny_folder, dtype=torch.bfloat16)
    ids = torch.randint(0, config.vocab_size, (2, 12))
    with torch.inference_mode():
        full = model(ids).logits.float()
        for dtype in (torch.float32, torch.bfloat16):
            cache = KVCache.for_model(model, 2, 12, dtype=dtype)
            model(ids[:, :8], kv_cache=cache)
            steps = [model(ids[:, i : i + 1], kv_cache=cache).logits.float() for i in range(8, 12)]
            torch.testing.assert_close(torch.cat(steps, 1), full[:, 8:], atol=0.1, rtol=0.05)
        with pytest.raises(ValueError, match="neither the model's"):
            model(ids[:, :2], kv_cache=KVCache.for_model(model, 2, 4, dtype=torch.float16))


def test_engine_cache_dtype_by_rows(tiny_folder: Path) -> None:
    carbon = Carbon.from_pretrained(tiny_folder, dtype=torch.bfloat16, max_batch_size=4)
    carbon.generate(["ACGTAC"] * 3, max_bp=12, seed=0)
    cache = carbon.engine.cache.cache
    assert cache is not None and cache.batch_size == 3 and cache.k[0].dtype == torch.float32
    carbon.generate("ACGTAC", max_bp=12, seed=0)
    cache = carbon.engine.cache.cache
    assert cache is not None and cache.batch_size == 1 and cache.k[0].dtype == torch.bfloat16
