"""Decides what the next engine step runs: a prefill of waiting requests, or one decode step.

Iteration-level (continuous) batching over a paged KV cache: requests join the running batch
whenever a cache row and the blocks their prompt needs now are free, and leave it the moment they
finish (their blocks go back to the pool); every running request advances one token per decode
step.

A request is admitted by what it needs now, not by the most it may ever hold: when the pool has room
for everything it may generate, those blocks are set aside for it as one run (it never runs out, and
the attention kernel reads its row as one stream); when it has not, it starts with the blocks for
its prompt and takes more from the pool as it grows. When growing rows find the pool empty, the
newest request is preempted (vLLM's recompute mode): its blocks go back to the pool, it returns to the
head of the queue with what it has generated, and when blocks are free again one prefill of its
prompt and output rebuilds its row and it goes on where it stopped (same outputs: its sampler's
random state is its own). So a pool smaller than the work never fails a request: requests wait, or
are set back, in order of arrival.
"""

from __future__ import annotations

import itertools
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
    """Cache slots a request may fill when what it prefills is left-padded to ``width`` tokens: the
    padded prefill, every token it may still generate, and a speculative verify's lookahead."""
    lookahead = request.speculative.k_max if request.speculative is not None else 0
    return width + request.tokens_left + lookahead


def slots_now(request: Request, width: int) -> int:
    """Cache slots a request needs to start: its padded prefill and the first decode step's token. A
    speculative request (its draft model keeps a cache of its own, row for row) needs all of them."""
    if request.speculative is not None:
        return slots_reserved(request, width)
    return width + 1


class Scheduler:
    def __init__(self, cache: CacheManager, config: EngineConfig, kmer_start: int = 0) -> None:
        self.cache = cache
        self.prefill_token_budget = config.prefill_token_budget
        #: first k-mer id: what a DNA request's generated k-mers are fed back as (its re-prefill)
        self.kmer_start = kmer_start
        self.waiting: deque[Request] = deque()
        self.running: list[Request] = []
        self.preemptions = 0
        self._arrival: dict[int, int] = {}  # id(request) -> order of arrival
        self._counter = itertools.count()

    def add(self, request: Request) -> None:
        self._arrival[id(request)] = next(self._counter)
        self.waiting.append(request)

    @property
    def has_work(self) -> bool:
        return bool(self.waiting or self.running)

    @property
    def watermark(self) -> int:
        """Blocks admission leaves free while requests run (1% of the pool, vLLM's figure), so the
        rows growing into the pool do not preempt what was just admitted at the next step."""
        cache = self.cache.cache
        if cache is None or not self.running:
            return 0
        return max(1, cache.blocks_total // 100)

    def _growth(self) -> int:
        """Blocks the running rows take from the pool at the next decode step."""
        return sum(self.cache.blocks_to_grow(r.row, 1) for r in self.running if r.row is not None)

    def next_step(self) -> Step | None:
        """Prefill first (new requests start as soon as a row and the blocks they need now are
        free), else decode all running, preempting the newest ones first if their next tokens do not
        fit. Requests are admitted strictly in order of arrival: one whose blocks do not fit waits at
        the head of the queue until running ones finish and give theirs back."""
        admitted = self._admit()
        if admitted:
            self.running.extend(admitted)
            return Step("prefill", admitted)
        if self.running:
            self._make_room()
            return Step("decode", list(self.running))
        return None

    def _admit(self) -> list[Request]:
        admitted: list[Request] = []
        if not self.waiting or not self.cache.free_rows:
            return admitted
        budget = self.prefill_token_budget
        cache = self.cache.cache
        max_len = cache.max_len if cache is not None else None
        rows_free = len(self.cache.free_rows)
        keep = self._growth() + self.watermark  # blocks the running rows will want first
        spare = self.cache.blocks_available - keep
        width = 0
        while self.waiting and len(admitted) < rows_free:
            req = self.waiting[0]
            cost = len(req.prefill_ids)
            if admitted and cost > budget:
                break
            # prompts are left-padded to the longest one and padding takes cache slots: a short
            # prompt with a long output must not share a prefill with a long prompt if that would
            # overflow its row (it is admitted in the next step instead)
            new_width = max(width, cost)
            group = (*admitted, req)
            if admitted and max_len is not None and any(new_width + r.tokens_left > max_len for r in group):
                break
            if sum(self.cache.blocks_needed(slots_now(r, new_width)) for r in group) > spare:
                break
            self.waiting.popleft()
            admitted.append(req)
            budget -= cost
            width = new_width
        now = [self.cache.blocks_needed(slots_now(r, width)) for r in admitted]
        for i, req in enumerate(admitted):
            # everything it may fill when the pool has it (one run), else what it needs now
            row = self.cache.allocate(slots_reserved(req, width), now[i], leave=keep + sum(now[i + 1 :]))
            assert row is not None  # rows and blocks were counted above
            req.row = row
            req.state = RequestState.RUNNING
        return admitted

    def _make_room(self) -> None:
        """Preempt the newest running requests until the others' next tokens fit the pool."""
        while self._growth() > self.cache.blocks_available:
            plain = [r for r in self.running if r.speculative is None]
            if not plain or len(self.running) == 1:
                return  # one row always fits the pool (a budget below one full row is refused)
            self.preempt(max(plain, key=lambda r: self._arrival.get(id(r), -1)))

    def preempt(self, request: Request) -> None:
        """Take a running request's row and blocks back and put it at the head of the queue with what
        it generated; its next prefill (prompt + output) rebuilds its row."""
        assert request.row is not None
        self.running.remove(request)
        ids = request.prompt_ids + request.generated_ids(self.kmer_start)
        self.cache.release(request.row, remember=ids)
        request.row = None
        request.resume_ids = ids
        request.state = RequestState.WAITING
        request.preemptions += 1
        self.preemptions += 1
        # the queue stays in order of arrival: it goes in after any earlier-arrived request set back
        order = self._arrival.get(id(request), -1)
        pos = 0
        while pos < len(self.waiting) and self._arrival.get(id(self.waiting[pos]), -1) < order:
            pos += 1
        self.waiting.insert(pos, request)

    def retire(self, finished: list[Request]) -> None:
        for req in finished:
            if req in self.running:
                self.running.remove(req)
            if req.row is not None:
                self.cache.release(req.row)
                req.row = None
            self._arrival.pop(id(req), None)

    def cancel(self, request: Request) -> None:
        """Drop a request wherever it is; its cache row is freed at once."""
        if request in self.waiting:
            self.waiting.remove(request)
        request.finish("cancelled")
        self.retire([request])
