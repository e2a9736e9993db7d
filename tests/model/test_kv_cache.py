"""KVCache row operations: fork, truncate, broadcast give the same logits as recomputing."""

from __future__ import annotations

import pytest
import torch

from hexamer.model import KVCache, LlamaModel, ModelConfig

from .conftest import TINY


@pytest.fixture(scope="module")
def model() -> LlamaModel:
    torch.manual_seed(0)
    return LlamaModel(ModelConfig.from_dict(TINY | {"model_type": "llama"})).eval()


def _last_logits(model: LlamaModel, ids: list[int]) -> torch.Tensor:
    out = model(torch.tensor([ids]), logits_at="last").logits
    assert out is not None
    return out[0]


@torch.inference_mode()
def test_fork_continues_each_row_like_a_fresh_forward(model: LlamaModel) -> None:
    cache = KVCache.for_model(model, 2, 16)
    model(torch.tensor([[1, 2, 3], [4, 5, 6]]), kv_cache=cache, logits_at="none")
    forked = cache.fork([1, 0, 1], max_len=24)
    assert forked.batch_size == 3 and forked.max_len == 24
    assert forked.lengths.tolist() == [3, 3, 3]
    out = model(torch.tensor([[7], [8], [9]]), kv_cache=forked, logits_at="last").logits
    assert out is not None
    torch.testing.assert_close(out[0], _last_logits(model, [4, 5, 6, 7]), atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(out[1], _last_logits(model, [1, 2, 3, 8]), atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(out[2], _last_logits(model, [4, 5, 6, 9]), atol=1e-5, rtol=1e-5)
    with pytest.raises(ValueError, match="shorter"):
        cache.fork([0], max_len=8)


@torch.inference_mode()
def test_truncate_rolls_back_tokens(model: LlamaModel) -> None:
    cache = KVCache.for_model(model, 1, 16)
    model(torch.tensor([[1, 2, 3, 9, 9]]), kv_cache=cache, logits_at="none")
    cache.truncate([0], [3])
    assert cache.lengths.tolist() == [3]
    out = model(torch.tensor([[4]]), kv_cache=cache, logits_at="last").logits
    assert out is not None
    torch.testing.assert_close(out[0], _last_logits(model, [1, 2, 3, 4]), atol=1e-5, rtol=1e-5)
    with pytest.raises(ValueError, match="outside"):
        cache.truncate([0], [5])
    with pytest.raises(ValueError, match="lengths"):
        cache.truncate([0], [1, 2])


@torch.inference_mode()
def test_broadcast_copies_one_row_everywhere(model: LlamaModel) -> None:
    cache = KVCache.for_model(model, 3, 16)
    model(torch.tensor([[1, 2]]), kv_cache=cache, cache_rows=[0], logits_at="none")
    cache.broadcast(0)
    assert cache.lengths.tolist() == [2, 2, 2]
    out = model(torch.tensor([[3], [4], [5]]), kv_cache=cache, logits_at="last").logits
    assert out is not None
    for row, tok in enumerate((3, 4, 5)):
        torch.testing.assert_close(out[row], _last_logits(model, [1, 2, tok]), atol=1e-5, rtol=1e-5)
    with pytest.raises(ValueError, match="outside"):
        cache.broadcast(3)
