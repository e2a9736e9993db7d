"""The generation engine: a scheduler, a KV-cache manager, a model runner and a sampler.

    engine = Engine(model, tokenizer.layout, max_batch_size=16)
    engine.run([Request(prompt_ids, SamplingParams(max_bp=1000, seed=0)), ...])

Requests are admitted into free cache rows as they free up (continuous batching); each decode step
advances every running request by one 6-mer.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

import torch

from hexamer.engine.kv_manager import CacheManager
from hexamer.engine.request import Request, RequestState
from hexamer.engine.runner import ModelRunner
from hexamer.engine.sampler import END, sample_next
from hexamer.engine.scheduler import Scheduler
from hexamer.model import LlamaModel
from hexamer.tokenizer.layout import DnaLayout


@dataclass
class EngineStats:
    prefill_tokens: int = 0
    prefill_seconds: float = 0.0
    decode_steps: int = 0
    decode_tokens: int = 0
    decode_seconds: float = 0.0
    step_seconds: list[float] = field(default_factory=list)


class Engine:
    def __init__(
        self,
        model: LlamaModel,
        layout: DnaLayout,
        *,
        max_batch_size: int = 16,
        kv_cache_bytes: int | None = None,
        dna_only_logits: bool = True,
        prefill_token_budget: int = 8192,
        static_decode: bool | None = None,
        compile_decode: bool = False,
    ) -> None:
        self.model = model
        self.layout = layout
        self.cache = CacheManager(model, max_batch_size, kv_cache_bytes)
        self.runner = ModelRunner(model, layout, self.cache, dna_only_logits, static_decode, compile_decode)
        self.scheduler = Scheduler(self.cache, prefill_token_budget)
        self.stats = EngineStats()
        self.max_len = model.config.max_position_embeddings

    def check(self, request: Request) -> None:
        if request.total_len > self.max_len:
            raise ValueError(
                f"prompt of {len(request.prompt_ids)} tokens + {request.n_tokens} new tokens = {request.total_len} "
                f"exceeds the model's context of {self.max_len} tokens"
            )

    def add(self, request: Request) -> None:
        self.check(request)
        self.scheduler.add(request)

    def step(self) -> list[Request]:
        """Run one prefill or decode step; returns the requests that finished in it."""
        step = self.scheduler.next_step()
        if step is None:
            return []
        start = time.perf_counter()
        if step.kind == "prefill":
            logits = self.runner.prefill(step.requests)
            self.stats.prefill_tokens += sum(len(r.prompt_ids) for r in step.requests)
        else:
            tokens = {r.request_id: self._last_token(r) for r in step.requests}
            logits = self.runner.decode(step.requests, tokens)
        picks = sample_next(logits, step.requests, self.layout.k)
        finished = []
        for req, pick in zip(step.requests, picks, strict=True):
            if pick == END:
                req.ended_with_tag = True
                req.finish("end_tag")
            else:
                req.append(pick)
            if req.state is RequestState.FINISHED:
                finished.append(req)
        self.scheduler.retire(finished)
        elapsed = time.perf_counter() - start
        if step.kind == "prefill":
            self.stats.prefill_seconds += elapsed
        else:
            self.stats.decode_steps += 1
            self.stats.decode_tokens += len(step.requests)
            self.stats.decode_seconds += elapsed
        self.stats.step_seconds.append(elapsed)
        return finished

    def _last_token(self, req: Request) -> int:
        return self.layout.kmer_start + req.output_kmers[-1]

    def run(
        self, requests: Iterable[Request], on_step: Callable[[list[Request]], None] | None = None
    ) -> None:
        """Run requests to completion, sizing the KV cache for them first."""
        batch = list(requests)
        for r in batch:
            self.check(r)
        if not batch:
            return
        self.cache.ensure(max(r.total_len for r in batch), len(batch))
        for r in batch:
            self.scheduler.add(r)
        with torch.inference_mode():
            while self.scheduler.has_work:
                done = self.step()
                if on_step is not None:
                    on_step(done)
