"""The generation engine: a scheduler, a KV-cache manager, a model runner and a sampler.

    engine = Engine(model, tokenizer.layout, EngineConfig(max_batch_size=16))
    engine.run([Request(prompt_ids, SamplingParams(max_bp=1000, seed=0)), ...])

Requests are admitted, in order of arrival, when a cache row and the KV blocks they need now are
free, and the newest is preempted (computed again later) when the pool runs out (continuous
batching over a paged cache, docs/engine.md); each decode step
advances every running request by one 6-mer (or, for ``mode="text"`` requests, one token of the
whole vocabulary; both kinds share steps).

A server drives it step by step through its serving door, and nothing else: :meth:`Engine.reserve`
once, then :meth:`~Engine.make_request` / :meth:`~Engine.check` (the one place a request is
validated), :meth:`~Engine.add` (the only way in), :meth:`~Engine.cancel`, :attr:`~Engine.has_work`,
the counts (:attr:`~Engine.n_waiting`, :attr:`~Engine.n_running`, :attr:`~Engine.n_free_rows`) and
:meth:`~Engine.step`, which returns what it did (:class:`StepOutput`).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

import torch

from hexamer.engine.admission import ContextExceeded, SpeculationRefused
from hexamer.engine.config import EngineConfig
from hexamer.engine.draft import DraftRunner
from hexamer.engine.kv_manager import CacheManager
from hexamer.engine.logprobs import logprobs_of
from hexamer.engine.params import SamplingParams
from hexamer.engine.request import Request, RequestState
from hexamer.engine.runner import ModelRunner
from hexamer.engine.sampler import END, sample_next, sample_text
from hexamer.engine.scheduler import Scheduler
from hexamer.engine.verify import speculative_round
from hexamer.model import LlamaModel
from hexamer.model.finite import finite_rows, non_finite_output
from hexamer.model.kv_blocks import BLOCK_SIZE
from hexamer.tokenizer.layout import DnaLayout


@dataclass
class EngineStats:
    prefill_tokens: int = 0
    prefill_seconds: float = 0.0
    decode_steps: int = 0
    decode_tokens: int = 0
    decode_seconds: float = 0.0
    step_seconds: list[float] = field(default_factory=list)


@dataclass(frozen=True)
class StepOutput:
    """What one :meth:`Engine.step` did: ``kind`` (``"prefill"``, ``"decode"`` or ``"idle"``), the
    requests it advanced (each gained a token, or finished) and those that finished in it. The engine
    keeps no reference to them afterwards, so a finished request (its prompt log-probabilities: tens
    of megabytes at top-4096) lives only as long as its answer, not until the next step of an idle
    server."""

    kind: str
    advanced: tuple[Request, ...] = ()
    finished: tuple[Request, ...] = ()


class Engine:
    def __init__(self, model: LlamaModel, layout: DnaLayout, config: EngineConfig | None = None) -> None:
        self.model = model
        self.layout = layout
        self.config = config = config if config is not None else EngineConfig()
        self.cache = CacheManager(model, config)
        self.runner = ModelRunner(model, layout, self.cache, config)
        self.scheduler = Scheduler(self.cache, config, kmer_start=layout.kmer_start)
        self.stats = EngineStats()
        context = model.config.max_position_embeddings
        #: longest sequence (prompt + new tokens) taken: ``config.max_model_len``, at most the context
        self.max_len = min(config.max_model_len or context, context)
        #: the draft model for speculative requests (:meth:`attach_draft`), or None
        self.draft: DraftRunner | None = None

    # ------------------------------------------------------------------ the serving door
    def check_length(self, prompt_tokens: int, new_tokens: int) -> None:
        """:class:`ContextExceeded` when a prompt of ``prompt_tokens`` plus ``new_tokens`` new tokens
        does not fit one row (``max_len``: ``max_model_len``, at most the model's context)."""
        if prompt_tokens + new_tokens > self.max_len:
            raise ContextExceeded(prompt_tokens, new_tokens, self.max_len, self.limit_name)

    @property
    def limit_name(self) -> str:
        """What ``max_len`` is, for messages: the model's context, or the ``max_model_len`` below it."""
        if self.max_len == self.model.config.max_position_embeddings:
            return "model's context"
        return "max_model_len"

    def check(self, request: Request) -> None:
        """The one validation of a request this engine is asked to run: it fits a row
        (:class:`ContextExceeded`), and a speculative one can run on the draft model
        (:class:`SpeculationRefused`; it may still run without it). Reads only settings fixed at
        start-up, so a server may call it from any thread."""
        self.check_length(len(request.prompt_ids), request.n_tokens)
        if request.speculative is not None:
            if self.draft is None:
                raise SpeculationRefused("a speculative request needs a draft model (Engine.attach_draft)")
            self.draft.check(request)

    def make_request(
        self,
        prompt_ids: list[int],
        params: SamplingParams,
        *,
        forced: str = "",
        eos_token_ids: tuple[int, ...] = (),
    ) -> Request:
        """A checked request: its length is refused before its per-base constraint table (``max_bp``
        x 4 booleans) is allocated; a DNA request with a ``repetition_penalty`` knows its prompt's
        k-mers. Speculative settings are the caller's to add (then :meth:`check` again)."""
        k = self.layout.k
        params.check_fits(len(prompt_ids), len(forced), k, self.max_len, self.limit_name)
        if params.mode == "text":
            req = Request(list(prompt_ids), params, eos_token_ids=eos_token_ids)
        else:
            req = Request(list(prompt_ids), params, forced=forced, k=k)
        if params.repetition_penalty != 1:
            start, stop = self.layout.kmer_start, self.layout.kmer_stop
            req.prompt_kmers = tuple(i - start for i in prompt_ids if start <= i < stop)
        self.check(req)
        return req

    def add(self, request: Request) -> None:
        """The only way in: the request is checked (:meth:`check`), then waits for a free row."""
        self.check(request)
        self.scheduler.add(request)

    def cancel(self, request: Request) -> None:
        """Drop a request (waiting or running); its cache row is free for the next one at once."""
        self.scheduler.cancel(request)

    def cancel_running(self) -> list[Request]:
        """Cancel every running request (after a failed step) and return them; waiting ones stay."""
        failed = list(self.scheduler.running)
        for req in failed:
            self.scheduler.cancel(req)
        return failed

    @property
    def has_work(self) -> bool:
        """Requests are waiting or running."""
        return self.scheduler.has_work

    @property
    def n_waiting(self) -> int:
        return len(self.scheduler.waiting)

    @property
    def n_running(self) -> int:
        return len(self.scheduler.running)

    @property
    def rows(self) -> int:
        """Rows of the KV cache (0 before one is allocated): at most this many requests run at once."""
        cache = self.cache.cache
        return cache.batch_size if cache is not None else 0

    @property
    def n_free_rows(self) -> int:
        return len(self.cache.free_rows)

    @property
    def kv_blocks_total(self) -> int:
        """Blocks of the KV pool (0 before it is allocated); each holds ``kv_block_size`` tokens."""
        cache = self.cache.cache
        return cache.blocks_total if cache is not None else 0

    @property
    def kv_blocks_free(self) -> int:
        """Blocks of the KV pool holding no token."""
        cache = self.cache.cache
        return cache.blocks_free if cache is not None else 0

    @property
    def kv_blocks_reserved(self) -> int:
        """Blocks promised to running requests (a request is admitted only when its blocks fit)."""
        return self.kv_blocks_total - self.cache.blocks_available if self.cache.cache is not None else 0

    @property
    def prefix_cache_blocks(self) -> tuple[int, int]:
        """Prefix caching so far, in full prompt blocks: (looked up, found cached)."""
        cache = self.cache.cache
        return (cache.prefix.queried_blocks, cache.prefix.hit_blocks) if cache is not None else (0, 0)

    @property
    def n_preemptions(self) -> int:
        """Times a running request gave its KV blocks back so that others could go on (the pool ran
        out; it was computed again when blocks were free: docs/engine.md)."""
        return self.scheduler.preemptions

    @property
    def kv_block_size(self) -> int:
        return BLOCK_SIZE

    @property
    def kv_bytes(self) -> int:
        """Bytes the KV cache holds."""
        return self.cache.used_bytes

    @property
    def has_draft(self) -> bool:
        return self.draft is not None

    @property
    def draft_model(self) -> LlamaModel | None:
        return self.draft.model if self.draft is not None else None

    def reserve(self) -> int:
        """Allocate, once, the KV cache a server keeps: ``max_batch_size`` rows of up to ``max_len``
        tokens over a block pool of ``kv_cache_bytes`` (untouched until tokens arrive), and the draft
        model's like it when one is attached, so a request never meets an allocation; returns the
        rows."""
        cache = self.cache.ensure(self.max_len, self.config.max_batch_size)
        if self.draft is not None:
            self.draft.ensure_like(cache)
        return cache.batch_size

    def _pick(self, logits: torch.Tensor, requests: list[Request], full: bool) -> list[int]:
        """Next pick per request: a k-mer index (or END) for DNA modes, a token id for text mode."""
        if not full:
            return sample_next(logits, requests, self.layout.k)
        picks = [0] * len(requests)
        text = [i for i, r in enumerate(requests) if r.is_text]
        dna = [i for i, r in enumerate(requests) if not r.is_text]
        if dna:
            sel = torch.tensor(dna, device=logits.device)
            block = logits.index_select(0, sel)[:, self.layout.end_id : self.layout.kmer_stop]
            for i, v in zip(dna, sample_next(block, [requests[i] for i in dna], self.layout.k), strict=True):
                picks[i] = v
        sel = torch.tensor(text, device=logits.device)
        text_logits = logits.index_select(0, sel)
        text_reqs = [requests[i] for i in text]
        chosen = sample_text(text_logits, text_reqs)
        want = [j for j, r in enumerate(text_reqs) if r.params.logprobs is not None]
        for j in want:  # raw distribution, before temperature and filters
            r = text_reqs[j]
            rec = logprobs_of(text_logits[j : j + 1], torch.tensor([chosen[j]]), r.params.logprobs or 0)
            r.logprobs.append(rec)
        for i, v in zip(text, chosen, strict=True):
            picks[i] = v
        return picks

    def step(self) -> StepOutput:
        """Run one prefill or decode step; returns the requests it advanced and those that finished."""
        step = self.scheduler.next_step()
        if step is None:
            return StepOutput("idle")
        start = time.perf_counter()
        spec, plain = self._split_speculative(step.kind, step.requests)
        finished = self._advance(step.kind, plain, only_rows=bool(spec)) if plain else []
        emitted = len(plain)
        if spec:
            done, emitted_spec = self._speculative_step(step.kind, spec)
            finished += done
            emitted += emitted_spec
        self.scheduler.retire(finished)
        elapsed = time.perf_counter() - start
        if step.kind == "prefill":
            self.stats.prefill_tokens += sum(len(r.prefill_ids) for r in step.requests)
            self.stats.prefill_seconds += elapsed
        else:
            self.stats.decode_steps += 1
            self.stats.decode_tokens += emitted
            self.stats.decode_seconds += elapsed
        self.stats.step_seconds.append(elapsed)
        return StepOutput(step.kind, tuple(step.requests), tuple(finished))

    def _advance(self, kind: str, requests: list[Request], only_rows: bool = False) -> list[Request]:
        """One token for each (non-speculative) request: prefill or decode, then sample."""
        full = any(r.is_text for r in requests)
        if kind == "prefill":
            logits = self.runner.prefill(requests, full)
        else:
            tokens = {r.request_id: self._last_token(r) for r in requests}
            logits = self.runner.decode(requests, tokens, full, only_rows=only_rows)
        finished = []
        ok = finite_rows(logits)
        if kind == "prefill" and any(r.prompt_logprobs is not None for r in requests):
            # a prompt position's NaN/inf logits fail the request as the sampled row's would
            prompt_ok = [r.prompt_logprobs is None or r.prompt_logprobs.finite for r in requests]
            ok = ok & torch.tensor(prompt_ok, device=ok.device)
        if not bool(ok.all()):  # a NaN/inf row ends its request as failed; the others sample on
            keep = ok.cpu().tolist()
            for req, good in zip(requests, keep, strict=True):
                if not good:
                    req.fail(non_finite_output("logits"))
                    finished.append(req)
            requests = [r for r, good in zip(requests, keep, strict=True) if good]
            logits = logits[ok]
            if not requests:
                return finished
        picks = self._pick(logits, requests, full)
        for req, pick in zip(requests, picks, strict=True):
            if req.is_text:
                req.append_token(pick)
            elif pick == END:
                req.ended_with_tag = True
                req.finish("end_tag")
            else:
                req.append(pick)
            if req.state is RequestState.FINISHED:
                finished.append(req)
        return finished

    # ------------------------------------------------------------------ speculative decoding
    def attach_draft(self, model: LlamaModel | None) -> None:
        """Give the engine a draft model (same tokenizer) for requests with ``speculative`` set, or
        take it away (``None``); attaching the model already attached keeps its cache."""
        if model is None:
            self.draft = None
        elif self.draft is None or self.draft.model is not model:
            self.draft = DraftRunner(self.model, model, self.layout)

    def _split_speculative(self, kind: str, requests: list[Request]) -> tuple[list[Request], list[Request]]:
        """(speculative, plain): a prefill admits requests that asked for a draft and fit; a decode
        step continues those the draft runner owns."""
        draft = self.draft
        if draft is None:
            return [], requests
        cache = self.cache.cache
        assert cache is not None
        if kind == "prefill":
            spec = [r for r in requests if draft.takes(r, cache.max_len)]
        else:
            spec = [r for r in requests if draft.owns(r)]
        if not spec:
            return [], requests
        chosen = {id(r) for r in spec}
        return spec, [r for r in requests if id(r) not in chosen]

    def _speculative_step(self, kind: str, requests: list[Request]) -> tuple[list[Request], int]:
        """Prefill both caches, or run one draft-and-verify round; (finished, tokens emitted)."""
        draft = self.draft
        cache = self.cache.cache
        assert draft is not None and cache is not None
        start = time.perf_counter()
        if kind == "prefill":
            draft.prefill(requests, cache)
            finished, emitted = [], 0
        else:
            finished, emitted = speculative_round(cache, draft, requests)
        draft.stats.seconds += time.perf_counter() - start
        return finished, emitted

    def _last_token(self, req: Request) -> int:
        if req.is_text:
            return req.last_token_id
        return self.layout.kmer_start + req.output_kmers[-1]

    def run(
        self, requests: Iterable[Request], on_step: Callable[[list[Request]], None] | None = None
    ) -> None:
        """Run requests to completion, sizing the KV cache for them first. If a step or ``on_step``
        raises (a request's :class:`~hexamer.engine.request.BaseChooser` past its deadline, say),
        the requests still in the engine are dropped before the error goes on."""
        batch = list(requests)
        for r in batch:
            self.check(r)
        if not batch:
            return
        need = [DraftRunner.slots_needed(r) if self.draft is not None else r.total_len for r in batch]
        self.cache.ensure(max(need), len(batch))
        for r in batch:
            self.scheduler.add(r)
        try:
            with torch.inference_mode():
                while self.scheduler.has_work:
                    done = self.step()
                    if on_step is not None:
                        on_step(list(done.finished))
        except BaseException:
            for r in batch:
                if r.state is not RequestState.FINISHED:
                    self.scheduler.cancel(r)
            raise
