"""The block pool: lowest blocks first, last freed reused first, reference counts, all or nothing."""

from __future__ import annotations

import pytest

from hexamer.model.kv_blocks import NULL_BLOCK, BlockPool, OutOfBlocks, blocks_for


def test_take_share_drop() -> None:
    pool = BlockPool(5)
    assert pool.capacity == 4 and pool.n_free == 4
    a, b = pool.take(2)
    assert (a, b) == (1, 2) and pool.n_free == 2
    pool.share(a)
    assert pool.shared(a) and not pool.shared(b) and not pool.shared(NULL_BLOCK)
    pool.drop(a)
    assert pool.n_free == 2 and not pool.shared(a)
    pool.drop(a)
    assert pool.n_free == 3 and pool.take(1) == [a]  # the block just freed (already touched) first
    with pytest.raises(OutOfBlocks):
        pool.take(3)
    assert pool.n_free == 2  # a refused take takes nothing
    pool.drop(NULL_BLOCK)  # the null block is never freed
    assert pool.n_free == 2
    pool.drop(b)
    with pytest.raises(RuntimeError, match="released"):
        pool.drop(b)


def test_blocks_for() -> None:
    assert [blocks_for(n, 16) for n in (0, 1, 16, 17, 32)] == [0, 1, 1, 2, 2]
