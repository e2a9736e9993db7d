"""Prefix caching for the paged KV cache: full blocks of prompt tokens stored once and shared.

A block of a row is *addressable* when it is full and its slots are the row's first tokens with
no padding before them (slot = position): its keys and values then depend only on the tokens up
to its end, so any later prompt that starts with the same tokens can use the block instead of
computing it. The index maps (the entry of the previous block, this block's 16 token ids) to the
block; an entry's serial number is never reused, so a chain whose earlier block was evicted can
never match again, and equal keys mean equal token prefixes exactly (no hash is trusted alone).
Blocks whose last holder let go stay in the pool as cached free blocks and are evicted least
recently used first, when the pool needs them (:class:`hexamer.model.kv_blocks.BlockPool`).
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

__all__ = ["PrefixIndex"]

_ROOT = 0  # the serial "before the first block"


@dataclass
class PrefixIndex:
    """Which blocks hold which token prefixes, with hit counts for ``/metrics``."""

    block_size: int

    def __post_init__(self) -> None:
        self._by_key: dict[tuple[int, tuple[int, ...]], tuple[int, int]] = {}  # -> (block, serial)
        self._key_of: dict[int, tuple[int, tuple[int, ...]]] = {}  # block -> its key
        self._serials = itertools.count(1)
        self.queried_blocks = 0  # full prompt blocks looked up
        self.hit_blocks = 0  # of those, found

    def _keys(self, ids: Sequence[int], n_blocks: int) -> Iterator[tuple[int, ...]]:
        bs = self.block_size
        return (tuple(ids[i * bs : (i + 1) * bs]) for i in range(n_blocks))

    def match(self, ids: Sequence[int], max_blocks: int) -> list[int]:
        """The blocks holding the longest cached prefix of ``ids``, at most ``max_blocks`` blocks."""
        blocks: list[int] = []
        serial = _ROOT
        for tokens in self._keys(ids, max_blocks):
            hit = self._by_key.get((serial, tokens))
            if hit is None:
                break
            blocks.append(hit[0])
            serial = hit[1]
        return blocks

    def count(self, queried: int, hit: int) -> None:
        """Record a prompt's lookup: ``queried`` full blocks it could have found, ``hit`` found."""
        self.queried_blocks += queried
        self.hit_blocks += hit

    def add(self, ids: Sequence[int], blocks: Sequence[int]) -> list[int]:
        """Address ``blocks[i]`` by the tokens of block i of ``ids`` (the row's first blocks); the
        prefixes already addressed (by these blocks or by others) are left as they are. Returns the
        blocks newly addressed."""
        added: list[int] = []
        serial = _ROOT
        for tokens, block in zip(self._keys(ids, len(blocks)), blocks, strict=True):
            key = (serial, tokens)
            hit = self._by_key.get(key)
            if hit is None:
                if block in self._key_of:  # the block already stands for another prefix
                    break
                hit = (block, next(self._serials))
                self._by_key[key] = hit
                self._key_of[block] = key
                added.append(block)
            serial = hit[1]
        return added

    def forget(self, block: int) -> None:
        """``block`` is handed out for other tokens: it no longer holds its prefix."""
        key = self._key_of.pop(block, None)
        if key is not None:
            del self._by_key[key]

    def addressed(self, block: int) -> bool:
        return block in self._key_of

    @property
    def hit_rate(self) -> float:
        """Fraction of looked-up prompt blocks that were found (0 before any lookup)."""
        return self.hit_blocks / self.queried_blocks if self.queried_blocks else 0.0
