"""The prefix index (exact token prefixes, chains broken by eviction) and cached blocks in the pool
(kept when freed, evicted least recently used and only when no other block is free)."""

from __future__ import annotations

from hexamer.model.kv_blocks import BlockPool
from hexamer.model.kv_prefix import PrefixIndex


def test_index_matches_whole_block_prefixes_exactly() -> None:
    index = PrefixIndex(block_size=2)
    assert index.add([1, 2, 3, 4, 5], [7, 8]) == [7, 8]  # two full blocks; token 5 is not addressed
    assert index.match([1, 2, 3, 4, 9], 2) == [7, 8]
    assert index.match([1, 2, 3, 9], 2) == [7]
    assert index.match([2, 1, 3, 4], 2) == []
    assert index.add([1, 2, 6, 6], [9, 10]) == [10]  # block 0 is already [1, 2] in block 7
    assert index.match([1, 2, 6, 6], 2) == [7, 10]
    index.forget(7)  # the first block of both chains is gone: neither matches any more
    assert index.match([1, 2, 3, 4], 2) == [] and index.match([1, 2, 6, 6], 2) == []
    assert index.add([1, 2, 3, 4], [11, 8]) == [11]  # 8 still stands for [3, 4] after the dead 7
    index.count(4, 1)
    assert index.hit_rate == 0.25


def test_cached_blocks_are_free_but_evicted_last_and_least_recent_first() -> None:
    pool = BlockPool(6)  # blocks 1..5
    forgotten: list[int] = []
    pool.on_evict = forgotten.append
    a = pool.take(3)
    for b in a:
        pool.remember(b)
    pool.drop(a[1])
    pool.drop(a[0])
    pool.drop(a[2])
    assert pool.n_free == 5 and pool.n_unreserved == 5
    assert pool.take(2) == [4, 5] and forgotten == []  # never-cached blocks first
    pool.revive(1)  # a hit takes a cached free block back
    assert pool.n_free == 2 and pool.refs[1] == 1
    assert pool.take(1) == [2] and forgotten == [2]  # least recently freed of the cached: block 2
    pool.revive(1)
    assert pool.refs[1] == 2  # a held cached block just gains a holder
