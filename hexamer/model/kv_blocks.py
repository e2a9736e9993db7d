"""The block pool of the paged KV cache: which fixed-size blocks are free, and who shares each.

Block 0 is the null block: every unused block-table entry points at it, so a forward over rows
that hold nothing (idle rows of a decode step, padding) reads and writes there harmlessly (the
mask hides it). Blocks are handed out lowest first and taken back last-in first-out, so a pool
that is mostly idle keeps reusing the same (already touched) memory.
"""

from __future__ import annotations

__all__ = ["BLOCK_SIZE", "NULL_BLOCK", "BlockPool", "OutOfBlocks", "blocks_for"]

#: Tokens per block. 16 (vLLM's default): a sequence wastes under half a block on average (8 tokens,
#: 48 bp, against ~180 tokens of a 1 kb prompt); a block holds 16 x head_dim values per KV head, 4 KiB
#: in float32 at head dim 64, one page, so the attention kernel still reads whole pages in order;
#: and prefixes are shared at 96-bp granularity. 32 would halve the table but double the waste.
BLOCK_SIZE = 16
#: The block every unused table entry points at (never handed out, never freed).
NULL_BLOCK = 0


class OutOfBlocks(RuntimeError):
    """The pool has no free block left (the engine admits by free blocks, so it never meets this)."""


def blocks_for(tokens: int, block_size: int = BLOCK_SIZE) -> int:
    """Blocks that hold ``tokens`` slots."""
    return -(-tokens // block_size)


class BlockPool:
    """Free list and reference counts of ``num_blocks`` blocks (the null block included)."""

    def __init__(self, num_blocks: int) -> None:
        if num_blocks < 2:
            raise ValueError(
                f"a block pool needs at least 2 blocks (one is the null block), got {num_blocks}"
            )
        self.num_blocks = num_blocks
        self.refs = [0] * num_blocks
        self.refs[NULL_BLOCK] = 1
        self._free = list(range(num_blocks - 1, 0, -1))  # pop() hands out the lowest first

    @property
    def n_free(self) -> int:
        """Blocks nobody holds."""
        return len(self._free)

    @property
    def capacity(self) -> int:
        """Blocks that can hold tokens (all but the null block)."""
        return self.num_blocks - 1

    def take(self, n: int) -> list[int]:
        """``n`` free blocks, each now held once; :class:`OutOfBlocks` (taking none) if fewer are free."""
        if n > len(self._free):
            raise OutOfBlocks(
                f"KV cache out of blocks: {n} wanted, {len(self._free)} of {self.capacity} free"
            )
        got = [self._free.pop() for _ in range(n)]
        for b in got:
            self.refs[b] = 1
        return got

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
            self._free.append(block)

    def shared(self, block: int) -> bool:
        """Held by more than one row: a write must copy it first."""
        return block != NULL_BLOCK and self.refs[block] > 1
