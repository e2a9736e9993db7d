"""Owns the paged KV cache: its block pool sized to a memory budget, which rows are free, and the
blocks each running request has reserved (requests are admitted by free blocks, not by rows)."""

from __future__ import annotations

import torch

from hexamer.engine.config import EngineConfig
from hexamer.model import KVCache, LlamaModel
from hexamer.model.kv_blocks import BLOCK_SIZE, blocks_for
from hexamer.model.memory import NotEnoughMemory, available_memory_bytes, check_fits, format_bytes


def kv_bytes_per_token(model: LlamaModel, dtype: torch.dtype | None = None) -> int:
    """Bytes one token occupies in the cache (keys + values of every layer)."""
    c = model.config
    itemsize = torch.empty((), dtype=dtype or model.kv_dtype).element_size()
    return 2 * c.num_hidden_layers * c.num_key_value_heads * c.head_dim * itemsize


class CacheManager:
    """Allocates cache rows and blocks to requests; sizes the cache to the work within a budget."""

    def __init__(self, model: LlamaModel, config: EngineConfig) -> None:
        self.model = model
        self.config = config
        self.max_rows = config.max_batch_size
        self.budget = config.kv_cache_bytes
        self.cache: KVCache | None = None
        self.free_rows: list[int] = []
        #: blocks reserved per running row (admission: a request starts only when its blocks fit)
        self.reservations: dict[int, int] = {}

    def check_row(self, n_tokens: int, what: str) -> None:
        """Refuse, before any work, a sequence of ``n_tokens`` whose KV cache can never be held: one
        row larger than the budget, or (no budget) than the free memory plus the cache it would
        replace. A cache that already holds such a row passes at once. ``what`` names the option."""
        cache = self.cache
        if self.budget is None and cache is not None and cache.max_len >= n_tokens:
            return
        per_token = min(kv_bytes_per_token(self.model), kv_bytes_per_token(self.model, self.model.dtype))
        need = n_tokens * per_token
        if self.budget is not None:
            if need > self.budget:
                raise ValueError(
                    f"{what}: the KV-cache budget of {format_bytes(self.budget)} cannot hold one sequence of "
                    f"{n_tokens:,} tokens ({format_bytes(need)})"
                )
            return
        free = available_memory_bytes(self.model.device)
        if free is not None and need > free + self.used_bytes:
            raise NotEnoughMemory(
                f"{what}: one sequence of {n_tokens:,} tokens needs {format_bytes(need)} of KV cache, more "
                f"than the {format_bytes(free + self.used_bytes)} free on {self.model.device}"
            )

    def pool_blocks(self, max_len: int, rows: int, dtype: torch.dtype | None = None) -> int:
        """Blocks of the pool for ``rows`` rows of up to ``max_len`` tokens: room for all of them at
        full length, or fewer when the budget holds fewer (at least one full-length sequence)."""
        full = rows * blocks_for(max_len)
        if self.budget is None:
            return full
        per_block = kv_bytes_per_token(self.model, dtype) * BLOCK_SIZE
        fit = self.budget // per_block
        if fit < blocks_for(max_len):
            per_row = blocks_for(max_len) * per_block
            raise ValueError(
                f"the KV-cache budget of {self.budget / 2**20:.1f} MiB cannot hold one sequence of {max_len} "
                f"tokens ({per_row / 2**20:.1f} MiB); raise the budget or shorten the request"
            )
        return min(full, int(fit))

    def ensure(self, max_len: int, wanted_rows: int) -> KVCache:
        """A cache whose rows hold up to ``max_len`` tokens, with the rows the work needs and a pool
        of blocks for them (within the budget; requests beyond it wait for blocks).

        An idle cache is resized to the work (a decode step may run all rows, so a 16-row cache
        would make a single request pay for 16); a busy one only when it must grow, which is refused.
        The pool is allocated untouched: its memory becomes resident as blocks are first written.
        """
        rows = min(wanted_rows, self.max_rows)
        # one row: the weights' dtype (see LlamaModel.kv_dtype for why and the figures)
        dtype = self.model.dtype if rows == 1 else None
        blocks = self.pool_blocks(max_len, rows, dtype)
        cache = self.cache
        idle = cache is not None and not self.reservations
        if (
            cache is None
            or cache.max_len < max_len
            or cache.batch_size < rows
            or cache.blocks_total < blocks
            or (idle and cache.batch_size != rows)
        ):
            if cache is not None and not idle:
                raise RuntimeError("cannot resize the KV cache while requests are running")
            check_fits(
                blocks * BLOCK_SIZE * kv_bytes_per_token(self.model, dtype),
                self.model.device,
                f"a KV cache of {blocks:,} blocks of {BLOCK_SIZE} tokens ({rows} row(s) of up to {max_len:,} tokens)",
                "ask for fewer or shorter sequences (--max-model-len, --max-num-seqs, --kv-cache-bytes)",
            )
            self.cache = None  # let the old pool go before the new one is made
            self.cache = cache = KVCache.for_model(self.model, rows, max_len, dtype=dtype, num_blocks=blocks)
            self.free_rows = list(range(rows))
            self.reservations = {}
        return cache

    def blocks_needed(self, tokens: int) -> int:
        """Blocks a sequence of ``tokens`` slots holds (at most a full row)."""
        cache = self.cache
        assert cache is not None
        return min(blocks_for(tokens, cache.block_size), cache.max_blocks)

    @property
    def blocks_available(self) -> int:
        """Blocks no running request holds or has set aside (0 before the cache exists): free ones,
        and cached prompt blocks nobody holds, which are evicted when needed. Every request's
        blocks are set aside when it is admitted, so this is what the next one can have."""
        cache = self.cache
        return cache.pool.n_unreserved if cache is not None else 0

    def blocks_to_grow(self, row: int, extra: int) -> int:
        """Blocks ``row`` must take from the pool to hold ``extra`` more slots (beyond those it holds
        or has set aside)."""
        cache = self.cache
        assert cache is not None
        res = cache.row_reserved[row]
        have = len(cache.row_blocks[row]) + (len(res) if res is not None else 0)
        return max(0, blocks_for(int(cache.lengths[row]) + extra, cache.block_size) - have)

    def allocate(self, tokens: int = 0, at_least: int | None = None, leave: int = 0) -> int | None:
        """A free row (lowest first, so full batches run rows in order) with blocks for ``tokens``
        slots set aside for it, or None when no row or not enough unreserved blocks are left.

        The blocks are set aside as one run where the pool has one (the kernel then reads the row as
        one stream) and filled as the row grows (:meth:`KVCache.grow`), so the memory in use follows
        the tokens held. With ``at_least`` (blocks), the row takes what the pool has beyond ``leave``
        blocks, down to ``at_least``, and takes the rest from the pool as it grows (the scheduler
        preempts when the pool runs out); without it, it takes all or nothing."""
        if not self.free_rows or self.cache is None:
            return None
        need = self.blocks_needed(tokens)
        floor = need if at_least is None else min(need, at_least)
        give = min(need, self.blocks_available - leave)
        if give < floor:
            return None
        self.free_rows.sort()
        row = self.free_rows.pop(0)
        self.reservations[row] = give
        self.cache.reserve(row, give)  # one run of blocks where the pool has one
        return row

    def release(self, row: int, remember: list[int] | None = None) -> None:
        """Free a row at once: its blocks go back to the pool and it can take the next request.
        ``remember``: the tokens the row holds from its start (a preempted request's prompt and
        output), whose full blocks stay in the prefix cache for its next prefill to find."""
        assert self.cache is not None
        if remember is not None and self.config.prefix_caching:
            self.cache.remember_prefix(row, remember)
        self.cache.reset([row])
        self.free_rows.append(row)
        self.reservations.pop(row, None)

    @property
    def used_bytes(self) -> int:
        if self.cache is None:
            return 0
        return sum(t.numel() * t.element_size() for t in (*self.cache.k, *self.cache.v))
