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


def test_runs_grow_in_place_and_merge_when_freed() -> None:
    pool = BlockPool(11)  # blocks 1..10
    a = pool.take(3)
    b = pool.reserve(3)
    assert a == [1, 2, 3] and b == [4, 5, 6] and pool.n_free == 7 and pool.n_unreserved == 4
    assert pool.take(2, after=3) == [7, 8]  # 4 is reserved: the lowest run that fits instead
    pool.fill(b[0])
    assert pool.n_free == 4 and pool.refs[4] == 1
    pool.unreserve(b[1:])
    assert pool.take(2, after=4) == [5, 6]  # right after block 4: the row grows in place
    for blk in (2, 3, 6, 8):
        pool.drop(blk)
    # free: 2-3, 6, 8-10 (freed blocks merge with their free neighbours); no run of 4 is left: the
    # longest runs first (8-10, then 2)
    assert pool.take(4) == [2, 8, 9, 10] and pool.n_free == 2
    pool.drop(8)
    pool.drop(9)
    assert pool.take(2) == [8, 9]  # 8 came back next to 9: one run again


def test_a_fragmented_pool_hands_out_its_longest_runs() -> None:
    pool = BlockPool(9)  # blocks 1..8
    pool.take(8)
    for blk in (1, 3, 4, 6, 7, 8):
        pool.drop(blk)
    assert sorted(pool.take(4)) == [3, 6, 7, 8] and pool.take(2) == [1, 4]
