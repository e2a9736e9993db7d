"""Decides what the next engine step runs: a prefill of waiting requests, or one decode step.

Iteration-level (continuous) batching: requests join the running batch whenever a cache row and
the KV blocks they may fill are free, and leave it the moment they finish (their blocks go back to
the pool); every running request advances one token per decode step.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass

from hexamer.engine.config import EngineConfig
from hexamer.engine.kv_manager import CacheManager
from hexamer.engine.request import Request, RequestState


@dataclass
class Step:
    kind: str  # "prefill" or "decode"
    requests: list[Request]


def slots_reserved(request: Request, width: int) -> int:
    """Cache slots a request may fill when its prompt is left-padded to ``width`` tokens: the padded
    prompt, every token it may generate, and a speculative verify's lookahead."""
    lookahead = request.speculative.k_max if request.speculative is not None else 0
    return width + request.n_tokens + lookahead


class Scheduler:
    def __init__(self, cache: CacheManager, config: EngineConfig) -> None:
        self.cache = cache
        self.prefill_token_budget = config.prefill_token_budget
        self.waiting: deque[Request] = deque()
        self.running: list[Request] = []

    def add(self, request: Request) -> None:
        self.waiting.append(request)

    @property
    def has_work(self) -> bool:
        return bool(self.waiting or self.running)

    def next_step(self) -> Step | None:
        """Prefill first (new requests start as soon as a row and their blocks are free), else
        decode all running. Requests are admitted strictly in order of arrival: one whose blocks do
        not fit waits at the head of the queue until running ones finish and give theirs back."""
        admitted: list[Request] = []
        budget = self.prefill_token_budget
        cache = self.cache.cache
        max_len = cache.max_len if cache is not None else None
        rows_free = len(self.cache.free_rows)
        blocks_free = self.cache.blocks_available
        width = 0
        while self.waiting and len(admitted) < rows_free:
            req = self.waiting[0]
            cost = len(req.prompt_ids)
            if admitted and cost > budget:
                break
            # prompts are left-padded to the longest one and padding takes cache slots: a short
            # prompt with a long output must not share a prefill with a long prompt if that would
            # overflow its row (it is admitted in the next step instead)
            new_width = max(width, cost)
            group = (*admitted, req)
            if admitted and max_len is not None and any(new_width + r.n_tokens > max_len for r in group):
                break
            if sum(self.cache.blocks_needed(slots_reserved(r, new_width)) for r in group) > blocks_free:
                break
            self.waiting.popleft()
            admitted.append(req)
            budget -= cost
            width = new_width
        for req in admitted:
            row = self.cache.allocate(slots_reserved(req, width))
            assert row is not None  # rows and blocks were counted above
            req.row = row
            req.state = RequestState.RUNNING
        if admitted:
            self.running.extend(admitted)
            return Step("prefill", admitted)
        if self.running:
            return Step("decode", list(self.running))
        return None

    def retire(self, finished: list[Request]) -> None:
        for req in finished:
            if req in self.running:
                self.running.remove(req)
            if req.row is not None:
                self.cache.release(req.row)
                req.row = None

    def cancel(self, request: Request) -> None:
        """Drop a request wherever it is; its cache row is freed at once."""
        if request in self.waiting:
            self.waiting.remove(request)
        request.finish("cancelled")
        self.retire([request])
