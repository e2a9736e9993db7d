"""KVCache row operations: fork, truncate, broadcast give the same logits as recomputing."""

from __future__ import annotations

import pytest
import torch

from hexamer.model import KVCache, LlamaModel, ModelConfig
from hexamer.model.kv_blocks import OutOfBlocks

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


@torch.inference_mode()
def test_blocks_follow_the_tokens_and_come_back(model: LlamaModel) -> None:
    cache = KVCache.for_model(model, 3, 64, num_blocks=6)
    assert (cache.blocks_total, cache.blocks_free, cache.block_size) == (6, 6, 16)
    model(torch.tensor([[1] * 20, [2] * 20]), kv_cache=cache, cache_rows=[0, 2], logits_at="none")
    assert [len(b) for b in cache.row_blocks] == [2, 0, 2] and cache.blocks_free == 2
    cache.truncate([0], [16])  # the second block holds nothing now
    assert cache.blocks_free == 3
    with pytest.raises(OutOfBlocks):  # 50 tokens need 4 blocks: none is taken
        model(torch.tensor([[3] * 50]), kv_cache=cache, cache_rows=[1], logits_at="none")
    assert cache.blocks_free == 3
    cache.reset()
    assert cache.blocks_free == 6 and int(cache.table.max()) == 0


@torch.inference_mode()
def test_forked_and_broadcast_rows_share_blocks_until_they_write(model: LlamaModel) -> None:
    cache = KVCache.for_model(model, 2, 48)
    model(torch.tensor([list(range(1, 21)), list(range(21, 41))]), kv_cache=cache, logits_at="none")
    forked = cache.fork([0, 0, 0, 1], max_len=64)
    assert forked.blocks_total - forked.blocks_free == 4  # each source block copied once
    assert forked.row_blocks[0] == forked.row_blocks[1] == forked.row_blocks[2]
    out = model(torch.tensor([[50], [51], [52], [53]]), kv_cache=forked, logits_at="last").logits
    assert out is not None
    # the three rows of prompt 0 wrote into its shared second block: two copies, the last writer kept it
    assert forked.blocks_total - forked.blocks_free == 6
    assert forked.row_blocks[0][0] == forked.row_blocks[1][0] == forked.row_blocks[2][0]  # full block: shared
    assert len({forked.row_blocks[r][1] for r in range(3)}) == 3
    for row, (prefix, tok) in enumerate([(0, 50), (0, 51), (0, 52), (1, 53)]):
        ids = [*range(1 + 20 * prefix, 21 + 20 * prefix), tok]
        torch.testing.assert_close(out[row], _last_logits(model, ids), atol=1e-5, rtol=1e-5)
    forked.reset()
    assert forked.blocks_free == forked.blocks_total
    cache.broadcast(1)
    assert cache.row_blocks[0] == cache.row_blocks[1] and cache.blocks_total - cache.blocks_free == 2
