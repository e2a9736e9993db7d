"""Runs the model for the engine: batched prefill and decode over cache rows, DNA-only logits.

Inside a DNA region only the 6-mer rows of the LM head matter (plus ``</dna>``), so the runner asks
the model for the contiguous block ``</dna>, <oov>, 6-mers`` — a view of the head, no copy — which
skips ~97% of Carbon's 155,776-row output matmul on every decode step. A step that holds a
text-mode request (whole-vocabulary sampling) asks for the full head instead, for every row; the
engine then hands DNA rows their block of it.
"""

from __future__ import annotations

import torch

from hexamer.engine.batching import padded_chunks
from hexamer.engine.config import EngineConfig
from hexamer.engine.draft import DraftRunner
from hexamer.engine.kv_manager import CacheManager
from hexamer.engine.logprobs import prompt_logprobs
from hexamer.engine.request import Request
from hexamer.model import LlamaModel, pad_rows
from hexamer.model.kv_blocks import BLOCK_SIZE
from hexamer.tokenizer.layout import DnaLayout

#: Most prompt tokens (padding included) per prefill forward on CPU, to keep activations in cache.
#: 500M shape, 16 prompts x 181 tokens, 2 threads: forwards of 4 prompts (724 tokens) took 12.5 s
#: vs 13.4 s as one 2,896-token forward (model only, medians of 4 interleaved rounds); through the
#: engine, min 12.4 vs 14.2 s with medians within noise (docs/benchmarks.md) -- a small gain at
#: best. On GPU one forward takes the whole batch.
PREFILL_CHUNK_TOKENS_CPU = 1024


class ModelRunner:
    def __init__(
        self,
        model: LlamaModel,
        layout: DnaLayout,
        cache: CacheManager,
        config: EngineConfig,
    ) -> None:
        self.model = model
        self.layout = layout
        self.cache = cache
        self.dna_only_logits = config.dna_only_logits
        self.prefix_caching = config.prefix_caching
        self.pad_id = 0
        prefill_chunk_tokens = config.prefill_chunk_tokens
        if prefill_chunk_tokens is None and model.device.type == "cpu":
            prefill_chunk_tokens = PREFILL_CHUNK_TOKENS_CPU
        self.prefill_chunk_tokens = prefill_chunk_tokens
        # Static-shape decode (one graph per batch size) pays off on GPUs, where launch overhead
        # dominates; on CPU attending only to the filled slots is cheaper, so it is opt-in there.
        on_gpu = model.device.type == "cuda"
        self.static_decode = on_gpu if config.static_decode is None else config.static_decode
        self._decode_fn = model.decode_static
        if config.compile_decode:
            self.static_decode = True
            self._decode_fn = torch.compile(
                model.decode_static, dynamic=False, mode="reduce-overhead" if on_gpu else "default"
            )

    def _dna_logits(self, logits: torch.Tensor) -> torch.Tensor:
        """(B, 2 + 4**k) logits: column 0 ``</dna>``, column 1 ``<oov>``, then the k-mers."""
        if self.dna_only_logits:
            return logits
        return logits[:, self.layout.end_id : self.layout.kmer_stop]

    def _vocab_rows(self, full: bool = False) -> tuple[int, int] | None:
        return (self.layout.end_id, self.layout.kmer_stop) if self.dna_only_logits and not full else None

    def _logits(self, logits: torch.Tensor, full: bool) -> torch.Tensor:
        return logits if full else self._dna_logits(logits)

    @torch.inference_mode()
    def prefill(self, requests: list[Request], full: bool = False) -> torch.Tensor:
        """Run the prompts of newly admitted requests into their rows; logits of their last token
        (the DNA block, or the whole vocabulary with ``full``). Requests asking for prompt
        logprobs get them here, from the same forward. On CPU the requests are cut into forwards
        of at most :data:`PREFILL_CHUNK_TOKENS_CPU` padded tokens (each left-padded to its own
        longest prompt); the numbers do not depend on how they are cut."""
        if not self.prefix_caching:
            lengths = [len(r.prefill_ids) for r in requests]
            rooms = self._widest(requests, [0] * len(requests))
            chunks = padded_chunks(
                requests, lengths, token_budget=self.prefill_chunk_tokens, max_widths=rooms
            )
            return torch.cat([self._prefill_forward(chunk, full) for chunk in chunks])
        # prefix caching: before each forward, the rows left take the blocks that earlier prompts
        # (earlier forwards of this step too) stored, and feed only the tokens after them
        logits: dict[int, torch.Tensor] = {}
        pending = list(requests)
        while pending:
            held = [self._share_prefix(r) for r in pending]
            tails = [len(r.prefill_ids) - n for r, n in zip(pending, held, strict=True)]
            rooms = self._widest(pending, held)
            chunk = next(
                padded_chunks(pending, tails, token_budget=self.prefill_chunk_tokens, max_widths=rooms)
            )
            chunk = chunk[: _first_repeat(chunk, held[: len(chunk)])]
            for r, row_logits in zip(
                chunk, self._prefill_forward(chunk, full, held[: len(chunk)]), strict=True
            ):
                logits[id(r)] = row_logits
            pending = pending[len(chunk) :]
        return torch.stack([logits[id(r)] for r in requests])

    def _widest(self, requests: list[Request], held: list[int]) -> list[int]:
        """The widest left-padded forward each request's prompt may join: its padding takes slots
        of its row, which must still hold its cached prefix (``held``) and every token it may
        generate after the prompt (a short prompt with a long answer has little to spare)."""
        cache = self.cache.cache
        assert cache is not None
        return [
            cache.max_len - n - (DraftRunner.slots_needed(r) - len(r.prefill_ids))
            for r, n in zip(requests, held, strict=True)
        ]

    def _share_prefix(self, request: Request) -> int:
        """Prompt tokens ``request``'s row already holds: the cached prefix it took now (only
        before its first forward; never for prompt logprobs, which need every prompt position, nor
        for speculative requests, whose prompts the draft feeds its own way)."""
        cache = self.cache.cache
        assert cache is not None and request.row is not None
        n = int(cache.lengths[request.row])
        if n or _wants_prompt_logprobs(request) or request.speculative is not None:
            return n
        return cache.share_prefix(request.row, request.prefill_ids)

    def _prefill_forward(
        self, requests: list[Request], full: bool, held: list[int] | None = None
    ) -> torch.Tensor:
        cache = self.cache.cache
        assert cache is not None
        device = self.model.device
        skip = held or [0] * len(requests)
        batch = pad_rows(
            [r.prefill_ids[n:] for r, n in zip(requests, skip, strict=True)], self.pad_id, side="left"
        )
        rows = [r.row for r in requests]
        want = [_wants_prompt_logprobs(r) for r in requests]
        out = self.model(
            batch.ids_on(device),
            kv_cache=cache,
            attention_mask=batch.mask_on(device),
            cache_rows=None if rows == list(range(cache.batch_size)) else rows,
            logits_at="last",
            vocab_rows=self._vocab_rows(full),
            return_hidden=any(want),
        )
        if self.prefix_caching:
            bs = cache.block_size
            for r, n in zip(requests, skip, strict=True):
                if r.speculative is None and not _wants_prompt_logprobs(r):
                    cache.prefix.count((len(r.prefill_ids) - 1) // bs, n // bs)
                    cache.remember_prefix(r.row, r.prefill_ids)  # type: ignore[arg-type]
        for i, r in enumerate(requests):
            if want[i]:
                assert out.hidden is not None
                hidden = out.hidden[i, batch.width - batch.lengths[i] : batch.width - 1]
                r.prompt_logprobs = prompt_logprobs(
                    self.model, hidden, r.prompt_ids, r.params.prompt_logprobs or 0
                )
        return self._logits(out.logits, full)

    @torch.inference_mode()
    def decode(
        self, requests: list[Request], tokens: dict[int, int], full: bool = False, only_rows: bool = False
    ) -> torch.Tensor:
        """One decode step; logits per request (the DNA block, or everything with ``full``).

        When most rows are busy, every cache row runs (idle ones masked): at decode batch sizes an
        extra row costs almost nothing and the cache need not be gathered. When most rows are idle
        (the tail of a batch), only the live rows run, gathering their part of the cache; so they do
        with ``only_rows``, when other rows are busy with work of their own (speculative rounds).
        """
        cache = self.cache.cache
        assert cache is not None
        device = self.model.device
        n = cache.batch_size
        if only_rows or (not self.static_decode and 2 * len(requests) <= n):
            ordered = sorted(requests, key=lambda r: r.row)
            ids = torch.tensor([[tokens[r.request_id]] for r in ordered], dtype=torch.int64)
            out = self.model(
                ids.to(device),
                kv_cache=cache,
                cache_rows=[r.row for r in ordered],
                logits_at="last",
                vocab_rows=self._vocab_rows(full),
            )
            logits = self._logits(out.logits, full)
            position = {r.request_id: i for i, r in enumerate(ordered)}
            return logits[torch.tensor([position[r.request_id] for r in requests], device=logits.device)]
        ids = torch.full((n, 1), self.pad_id, dtype=torch.int64)
        live = torch.zeros((n, 1), dtype=torch.bool)
        for r in requests:
            ids[r.row, 0] = tokens[r.request_id]
            live[r.row, 0] = True
        if self.static_decode:
            return self._decode_static(requests, ids, live[:, 0], full)
        all_live = bool(live.all())
        out = self.model(
            ids.to(device),
            kv_cache=cache,
            attention_mask=None if all_live else live.to(device),
            logits_at="last",
            vocab_rows=self._vocab_rows(full),
        )
        if not all_live:
            idle = [i for i in range(n) if not live[i, 0]]
            cache.reset(idle)
        logits = self._logits(out.logits, full)
        return logits[torch.tensor([r.row for r in requests], device=logits.device)]

    def _decode_static(
        self, requests: list[Request], ids: torch.Tensor, live: torch.Tensor, full: bool = False
    ) -> torch.Tensor:
        cache = self.cache.cache
        assert cache is not None
        device = self.model.device
        if int(cache.lengths.max()) + 1 > cache.max_len:
            raise ValueError(f"KV cache full: a row would exceed max_len={cache.max_len}")
        slots = cache.lengths.clone()
        rows = [r.row for r in requests]
        starts = slots[rows].tolist()
        cache.grow(rows, starts, [s + 1 for s in starts])  # type: ignore[arg-type]
        positions = cache.num_real_tokens()[:, None]
        cache.lengths += 1
        logits = self._decode_fn(
            ids.to(device), positions, slots.to(device), live.to(device), cache, self._vocab_rows(full)
        )
        idle = (~live).nonzero().flatten().tolist()
        if idle:
            cache.reset(idle)
        logits = self._logits(logits, full)
        return logits[torch.tensor([r.row for r in requests], device=logits.device)]


def _first_repeat(requests: list[Request], held: list[int], block: int = BLOCK_SIZE) -> int:
    """Length of the leading run of ``requests`` in which no prompt without a cached prefix starts
    with the same full block as an earlier one: a prompt that does waits for the next forward,
    where it finds that block (and what follows) cached instead of computing it again."""
    seen: set[tuple[int, ...]] = set()
    for i, (r, n) in enumerate(zip(requests, held, strict=True)):
        if n == 0 and len(r.prefill_ids) > block:
            key = tuple(r.prefill_ids[:block])
            if key in seen:
                return i
            seen.add(key)
    return len(requests)


def _wants_prompt_logprobs(request: Request) -> bool:
    """Its prefill must give the prompt's log-probabilities (asked for, and not given yet: a
    preempted request's prefill again gives none), so it computes every prompt position."""
    return request.is_text and request.params.prompt_logprobs is not None and request.prompt_logprobs is None
