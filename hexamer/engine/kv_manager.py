"""Owns the preallocated KV cache: how many rows fit a memory budget, and which rows are free."""

from __future__ import annotations

import torch

from hexamer.engine.config import EngineConfig
from hexamer.model import KVCache, LlamaModel
from hexamer.model.memory import NotEnoughMemory, available_memory_bytes, check_fits, format_bytes


def kv_bytes_per_token(model: LlamaModel, dtype: torch.dtype | None = None) -> int:
    """Bytes one token occupies in the cache (keys + values of every layer)."""
    c = model.config
    itemsize = torch.empty((), dtype=dtype or model.kv_dtype).element_size()
    return 2 * c.num_hidden_layers * c.num_key_value_heads * c.head_dim * itemsize


class CacheManager:
    """Allocates cache rows to requests; sizes the cache to the work at hand within a budget."""

    def __init__(self, model: LlamaModel, config: EngineConfig) -> None:
        self.model = model
        self.max_rows = config.max_batch_size
        self.budget = config.kv_cache_bytes
        self.cache: KVCache | None = None
        self.free_rows: list[int] = []

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

    def rows_for(self, max_len: int, wanted: int) -> int:
        """How many rows of ``max_len`` slots fit the budget (at most ``wanted`` and ``max_rows``)."""
        rows = min(wanted, self.max_rows)
        if self.budget is not None:
            per_row = kv_bytes_per_token(self.model) * max_len
            fit = self.budget // per_row
            if fit < 1:
                raise ValueError(
                    f"the KV-cache budget of {self.budget / 2**20:.1f} MiB cannot hold one sequence of {max_len} "
                    f"tokens ({per_row / 2**20:.1f} MiB); raise the budget or shorten the request"
                )
            rows = min(rows, int(fit))
        return rows

    def ensure(self, max_len: int, wanted_rows: int) -> KVCache:
        """A cache with room for ``max_len`` tokens in each of the rows the work needs.

        An idle cache is resized to the work (every decode step runs all rows, so a 16-row cache
        would make a single request pay for 16); a busy one only when it must grow, which is refused.
        """
        rows = self.rows_for(max_len, wanted_rows)
        cache = self.cache
        idle = cache is not None and sorted(self.free_rows) == list(range(cache.batch_size))
        if (
            cache is None
            or cache.max_len < max_len
            or cache.batch_size < rows
            or (idle and cache.batch_size != rows)
        ):
            if cache is not None and not idle:
                raise RuntimeError("cannot resize the KV cache while requests are running")
            # one row: the weights' dtype (see LlamaModel.kv_dtype for why and the figures)
            dtype = self.model.dtype if rows == 1 else None
            check_fits(
                rows * max_len * kv_bytes_per_token(self.model, dtype),
                self.model.device,
                f"a KV cache of {rows} row(s) x {max_len:,} tokens",
                "ask for fewer or shorter sequences (--max-model-len, --max-num-seqs, --kv-cache-bytes)",
            )
            self.cache = cache = KVCache.for_model(self.model, rows, max_len, dtype=dtype)
            self.free_rows = list(range(rows))
        return cache

    def allocate(self) -> int | None:
        """A free row (lowest first, so full batches run rows in order), or None."""
        if not self.free_rows:
            return None
        self.free_rows.sort()
        return self.free_rows.pop(0)

    def release(self, row: int) -> None:
        """Free a row at once: its slots are emptied and it can take the next request."""
        assert self.cache is not None
        self.cache.reset([row])
        self.free_rows.append(row)

    @property
    def used_bytes(self) -> int:
        if self.cache is None:
            return 0
        return sum(t.numel() * t.element_size() for t in (*self.cache.k, *self.cache.v))
