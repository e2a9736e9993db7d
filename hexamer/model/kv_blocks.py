"""The block pool of the paged KV cache: which fixed-size blocks are free, and who shares each.

Block 0 is the null block: every unused block-table entry points at it, so a forward over rows
that hold nothing (idle rows of a decode step, padding) reads and writes there harmlessly (the
mask hides it).

Blocks are handed out as runs of consecutive blocks wherever the pool allows: the attention
kernel reads a run as one stream, as it reads a contiguous cache, while blocks scattered over the
pool cost up to 2.8x (one page the hardware prefetcher cannot guess per block; figures in
docs/benchmarks.md). A free map (one byte per block) finds the lowest run that fits (first fit,
so a mostly idle pool keeps reusing the same, already touched memory); freed blocks merge with
their free neighbours by construction, so the pool defragments as rows finish.

Blocks can be content-addressed (:meth:`BlockPool.remember`: a full block of a prompt prefix, see
:mod:`hexamer.model.kv_prefix`). Such a block stays readable when its last holder lets it go: it
counts as free, and is handed out again (its content forgotten, ``on_evict``) only when no
never-cached free block is left, least recently used first.
"""

from __future__ import annotations

import re
from collections import OrderedDict
from collections.abc import Callable

__all__ = ["BLOCK_SIZE", "NULL_BLOCK", "BlockPool", "OutOfBlocks", "blocks_for"]

#: Tokens per block. 16 (vLLM's default): a sequence wastes under half a block on average (8 tokens,
#: 48 bp, against ~180 tokens of a 1 kb prompt); a block holds 16 x head_dim values per KV head, 4 KiB
#: in float32 at head dim 64, one page, so the attention kernel still reads whole pages in order;
#: and prefixes are shared at 96-bp granularity. 32 would halve the table but double the waste.
BLOCK_SIZE = 16
#: The block every unused table entry points at (never handed out, never freed).
NULL_BLOCK = 0

_FREE, _HELD, _CACHED = 1, 0, 2  # _CACHED: free, but its content may still be asked for
_FREE_RUN = re.compile(b"\x01+")


class OutOfBlocks(RuntimeError):
    """The pool has no free block left (the engine admits by free blocks, so it never meets this)."""


def blocks_for(tokens: int, block_size: int = BLOCK_SIZE) -> int:
    """Blocks that hold ``tokens`` slots."""
    return -(-tokens // block_size)


class BlockPool:
    """Free map and reference counts of ``num_blocks`` blocks (the null block included)."""

    def __init__(self, num_blocks: int) -> None:
        if num_blocks < 2:
            raise ValueError(
                f"a block pool needs at least 2 blocks (one is the null block), got {num_blocks}"
            )
        self.num_blocks = num_blocks
        self.refs = [0] * num_blocks
        self.refs[NULL_BLOCK] = 1
        self._map = bytearray([_FREE]) * num_blocks  # _FREE: nobody holds or has reserved it
        self._map[NULL_BLOCK] = _HELD
        self._n_free = num_blocks - 1  # _FREE and _CACHED blocks
        #: blocks taken out of the free map for a row that will fill them (:meth:`reserve`)
        self.n_reserved = 0
        self.remembered: set[int] = set()  # content-addressed blocks (held or _CACHED)
        self._lru: OrderedDict[int, None] = OrderedDict()  # the _CACHED blocks, least recent first
        self.on_evict: Callable[[int], None] = lambda block: None

    @property
    def n_free(self) -> int:
        """Blocks holding no token (free, or reserved but not filled yet)."""
        return self._n_free + self.n_reserved

    @property
    def n_unreserved(self) -> int:
        """Blocks nobody holds or has reserved."""
        return self._n_free

    @property
    def capacity(self) -> int:
        """Blocks that can hold tokens (all but the null block)."""
        return self.num_blocks - 1

    def _claim(self, n: int, after: int | None) -> list[int]:
        """``n`` blocks out of the free map, as few runs as the pool allows: right after block
        ``after`` when those are free (a row growing in place), else the lowest run that fits, else
        the longest runs left, lowest first."""
        if n > self._n_free:
            raise OutOfBlocks(f"KV cache out of blocks: {n} wanted, {self._n_free} of {self.capacity} free")
        if n == 0:
            return []
        m = self._map
        run = bytes([_FREE]) * n
        short = n - (self._n_free - len(self._lru))
        if short > 0:  # cached blocks go only when the never-cached ones run out
            self._evict(short)
        start = -1
        if after is not None and m.startswith(run, after + 1):
            start = after + 1
        if start < 0:
            start = m.find(run)
        if start >= 0:
            got = list(range(start, start + n))
        else:  # fragmented: the longest free runs first (fewest breaks), each in order
            runs = [match.span() for match in _FREE_RUN.finditer(m)]
            runs.sort(key=lambda r: (r[0] - r[1], r[0]))
            got = []
            for i, j in runs:
                got.extend(range(i, min(j, i + n - len(got))))
                if len(got) == n:
                    break
            got.sort()
        for b in got:
            m[b] = _HELD
        self._n_free -= n
        return got

    def take(self, n: int, after: int | None = None) -> list[int]:
        """``n`` free blocks, each now held once, as one run when the pool has one (the run right after
        block ``after`` when it is free); :class:`OutOfBlocks` (taking none) if fewer are free."""
        got = self._claim(n, after)
        for b in got:
            self.refs[b] = 1
        return got

    def _evict(self, n: int) -> None:
        """Forget the ``n`` least recently used cached free blocks (they become plain free blocks)."""
        for _ in range(min(n, len(self._lru))):
            block, _ = self._lru.popitem(last=False)
            self._map[block] = _FREE
            self.remembered.discard(block)
            self.on_evict(block)

    def remember(self, block: int) -> None:
        """``block`` (held) now holds content that may be asked for again: keep it when freed."""
        self.remembered.add(block)

    def revive(self, block: int) -> None:
        """One more holder of a remembered block, taking it back from the free ones if it was free."""
        if self.refs[block] == 0:
            del self._lru[block]
            self._map[block] = _HELD
            self._n_free -= 1
        self.refs[block] += 1

    def reserve(self, n: int) -> list[int]:
        """``n`` blocks set aside, unheld, for one row to fill in order (:meth:`fill`), one run when
        the pool has one; their memory is not touched until they are filled."""
        got = self._claim(n, None)
        self.n_reserved += n
        return got

    def fill(self, block: int) -> None:
        """A reserved block now holds tokens (held once)."""
        self.n_reserved -= 1
        self.refs[block] = 1

    def unreserve(self, blocks: list[int]) -> None:
        """Reserved blocks never filled go back to the free map."""
        for b in blocks:
            self._map[b] = _FREE
        self.n_reserved -= len(blocks)
        self._n_free += len(blocks)

    def share(self, block: int) -> None:
        """One more holder of ``block`` (a forked or broadcast row)."""
        if block != NULL_BLOCK:
            self.refs[block] += 1

    def drop(self, block: int) -> None:
        """One holder fewer; the block is free again when none is left."""
        if block == NULL_BLOCK:
            return
        refs = self.refs[block] - 1
        if refs < 0:
            raise RuntimeError(f"KV block {block} released more often than taken")
        self.refs[block] = refs
        if refs == 0:
            self._n_free += 1
            if block in self.remembered:
                self._map[block] = _CACHED
                self._lru[block] = None
            else:
                self._map[block] = _FREE

    def shared(self, block: int) -> bool:
        """Held by more than one row: a write must copy it first."""
        return block != NULL_BLOCK and self.refs[block] > 1
