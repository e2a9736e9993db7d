"""Decides what the next engine step runs: a prefill of waiting requests, or one decode step.

Iteration-level (continuous) batching: requests join the running batch whenever a cache row is
free and leave it the moment they finish; every running request advances one token per decode step.
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
        """Prefill first (new requests start as soon as a row frees up), else decode all running."""
        admitted: list[Request] = []
        budget = self.prefill_token_budget
        cache = self.cache.cache
        max_len = cache.max_len if cache is not None else None
        width = 0
        while self.waiting:
            req = self.waiting[0]
            cost = len(req.prompt_ids)
            if admitted and cost > budget:
                break
            # prompts are left-padded to the longest one and padding takes cache slots: a short
            # prompt with a long output must not share a prefill with a long prompt if that would
            # overflow its row (it is admitted in the next step instead)
            new_width = max(width, cost)
            if (
                admitted
                and max_len is not None
                and any(new_width + r.n_tokens > max_len for r in (*admitted, req))
            ):
                break
            row = self.cache.allocate()
            if row is None:
                break
            self.waiting.popleft()
            req.row = row
            req.state = RequestState.RUNNING
            admitted.append(req)
            budget -= cost
            width = new_width
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
