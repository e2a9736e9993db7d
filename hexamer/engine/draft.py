"""The draft side of speculative decoding: a small model that proposes the next few 6-mers.

:class:`DraftRunner` is what :meth:`hexamer.engine.Engine.attach_draft` attaches: the draft
:class:`~hexamer.model.LlamaModel`, a KV cache whose row ``i`` shadows row ``i`` of the engine's
(target) cache, and each speculative request's round-to-round state. The target's check is
:func:`hexamer.engine.verify.speculative_round`; the laws both sides sample from are built here
(:func:`token_law`, :func:`greedy_picks`), from the same :mod:`hexamer.fns` calls and request
constraints (masks, forced tail, top-p / top-k / min-p) the sampler uses, so the two agree exactly.

Invariant between rounds: the target cache holds every committed token but the last
(``SpecRow.t_pending``, fed first by the next verify); the draft cache holds all but
``SpecRow.d_pending`` (one token, or two after a round whose drafts were all accepted).
"""

from __future__ import annotations

import weakref
from dataclasses import dataclass, field
from typing import Literal

import torch

from hexamer.engine.admission import SpeculationRefused
from hexamer.engine.kv_manager import kv_bytes_per_token
from hexamer.engine.request import Request
from hexamer.engine.sampler import allowed_masks, kmer_filter
from hexamer.engine.spec_config import AdaptiveK, SpecStats
from hexamer.fns import (
    bp_greedy,
    bp_sampling_probs,
    kmer_index,
    kmer_mask_from_positions,
    product_distribution,
    sample_from_probs,
    token_greedy,
    token_sampling_probs,
)
from hexamer.model import KVCache, LlamaModel, pad_rows
from hexamer.model.finite import finite_rows, non_finite_output
from hexamer.model.memory import check_fits
from hexamer.tokenizer.layout import DnaLayout

__all__ = [
    "DraftRunner",
    "SpecRow",
    "estimate_draft_cost",
    "failing_non_finite",
    "feed_rows",
    "greedy_picks",
    "token_law",
]


# --------------------------------------------------------------------------- shared helpers


def feed_rows(
    model: LlamaModel,
    cache: KVCache,
    rows: list[int],
    seqs: list[list[int]],
    logits: Literal["all", "last", "none"],
    vocab_rows: tuple[int, int],
    pad_id: int,
) -> torch.Tensor | None:
    """Append each row's tokens to its cache row (right-padded to a common width, the padding
    rolled back afterwards). Returns k-mer logits ``(B, T, V)`` (``all``) or at each row's last real
    token ``(B, V)`` (``last``); None when there is nothing to feed or ``none`` is asked."""
    lengths = [len(s) for s in seqs]
    if not lengths or max(lengths) == 0:
        return None
    before = cache.lengths[torch.tensor(rows)].tolist()
    device = model.device
    batch = pad_rows(seqs, pad_id)
    ragged = batch.mask is not None
    at: Literal["all", "last", "none"] | torch.Tensor = logits
    if logits == "last" and ragged:
        at = torch.tensor([max(n - 1, 0) for n in lengths], device=device)
    out = model(
        batch.ids_on(device),
        kv_cache=cache,
        attention_mask=batch.mask_on(device),
        cache_rows=None if rows == list(range(cache.batch_size)) else rows,
        logits_at=at,
        vocab_rows=vocab_rows,
    )
    if ragged:
        cache.truncate(rows, [b + n for b, n in zip(before, lengths, strict=True)])
    return out.logits


def law_key(req: Request) -> tuple:
    """Requests with equal keys draw from laws built by one batched call."""
    p = req.params
    return (p.mode, p.temperature, p.top_p, p.top_k, p.min_p)


def _allowed_kmers(logits: torch.Tensor, allowed: torch.Tensor | None, req: Request) -> torch.Tensor | None:
    p = req.params
    kmers = kmer_mask_from_positions(allowed).to(logits.device) if allowed is not None else None
    return kmer_filter(logits, kmers, p.temperature, p.top_k, p.min_p)


def greedy_picks(logits: torch.Tensor, allowed: torch.Tensor | None, req: Request) -> list[int]:
    """Greedy k-mer per row (rows share ``req``'s options): per-base argmax in bp mode, else argmax."""
    if req.params.mode == "bp":
        return bp_greedy(logits, allowed=allowed).tolist()
    return token_greedy(logits, allowed_kmers=_allowed_kmers(logits, allowed, req)).tolist()


def per_base_law(logits: torch.Tensor, allowed: torch.Tensor | None, req: Request) -> torch.Tensor:
    """``(N, k, 4)``: bp mode's per-base laws (temperature, masks, per-base top-p)."""
    p = req.params
    return bp_sampling_probs(logits, temperature=p.temperature, top_p=p.top_p, allowed=allowed)


def token_law(logits: torch.Tensor, allowed: torch.Tensor | None, req: Request) -> torch.Tensor:
    """``(N, 4**k)`` float64: the law target-only decoding draws a 6-mer from, per row (bp mode:
    the product of the per-base laws; token mode: the filtered, tempered softmax)."""
    p = req.params
    if p.mode == "bp":
        return product_distribution(per_base_law(logits, allowed, req))
    kmers = _allowed_kmers(logits, allowed, req)
    return token_sampling_probs(logits, temperature=p.temperature, top_p=p.top_p, allowed_kmers=kmers)


def failing_non_finite(logits: torch.Tensor, requests: list[Request], what: str) -> torch.Tensor:
    """``logits`` (one row per request, any shape per row) with each non-finite row failing its
    request (:meth:`Request.fail`) and set to zeros, so the batch's laws stay computable; a failed
    request's picks are never used (:func:`hexamer.engine.verify.speculative_round` ends it)."""
    ok = finite_rows(logits)
    if bool(ok.all()):
        return logits
    for r, good in zip(requests, ok.tolist(), strict=True):
        if not good and r.error is None:
            r.fail(non_finite_output(what))
    shape = (-1,) + (1,) * (logits.dim() - 1)
    return torch.where(ok.reshape(shape), logits, torch.zeros_like(logits))


def uniforms(req: Request, n: int) -> torch.Tensor:
    """``n`` float64 uniforms from the request's own generator (never the global one)."""
    return torch.rand(n, dtype=torch.float64, generator=req.generator)


def _flops_per_token(model: LlamaModel, head_rows: int) -> float:
    c = model.config
    h, f, hd = c.hidden_size, c.intermediate_size, c.head_dim
    attn = h * hd * (2 * c.num_attention_heads + 2 * c.num_key_value_heads)
    return float(c.num_hidden_layers * (attn + 3 * h * f) + head_rows * h)


def estimate_draft_cost(target: LlamaModel, draft: LlamaModel, head_rows: int) -> float:
    """Draft forward cost relative to a target forward, from per-token FLOPs (floor 0.02)."""
    return max(0.02, _flops_per_token(draft, head_rows) / _flops_per_token(target, head_rows))


# --------------------------------------------------------------------------- the draft runner


@dataclass(eq=False)
class SpecRow:
    """One speculative request between rounds (see the module docstring's invariant)."""

    ctl: AdaptiveK
    t_pending: list[int] = field(default_factory=list)
    d_pending: list[int] = field(default_factory=list)


@dataclass
class Proposal:
    """What the draft proposed this round, per request: k-mer indices, the laws they were drawn
    from (None when greedy) and the draft cache's length before the round."""

    drafts: list[list[int]]
    laws: list[list[torch.Tensor | None]]
    before: list[int]


class DraftRunner:
    """The draft model, its KV cache (rows shadow the target's) and each request's round state."""

    def __init__(self, target: LlamaModel, draft: LlamaModel, layout: DnaLayout) -> None:
        if target.config.vocab_size != draft.config.vocab_size:
            raise ValueError(
                f"draft vocab_size {draft.config.vocab_size} != target vocab_size {target.config.vocab_size}"
            )
        if layout.kmer_stop > target.config.vocab_size:
            raise ValueError(
                f"DNA layout ends at {layout.kmer_stop}, beyond the models' {target.config.vocab_size} rows"
            )
        self.target, self.model, self.layout = target, draft, layout
        #: the draft's KV cache: row i holds request i's tokens (the target cache's row i), made by
        #: :meth:`ensure_like` to the target cache's shape
        self.cache: KVCache | None = None
        self.vocab_rows = (layout.kmer_start, layout.kmer_stop)
        self.draft_cost = estimate_draft_cost(target, draft, layout.n_kmers)
        self.stats = SpecStats()
        self.rows: weakref.WeakKeyDictionary[Request, SpecRow] = weakref.WeakKeyDictionary()

    # ------------------------------------------------------------------ admission
    def check(self, request: Request) -> None:
        """Raise :class:`SpeculationRefused` if ``request`` cannot be decoded speculatively."""
        p = request.params
        if p.mode == "text":
            raise SpeculationRefused(
                "speculative decoding continues DNA (mode 'bp' or 'token'), not mode='text'"
            )
        if p.stop_at_end_tag:
            raise SpeculationRefused("speculative decoding does not support stop_at_end_tag")
        if p.repetition_penalty != 1 or p.return_logprobs:
            raise SpeculationRefused("speculative decoding takes no repetition_penalty or logprobs")
        for name, model in (("target", self.target), ("draft", self.model)):
            limit = model.config.max_position_embeddings
            if request.total_len > limit:
                raise SpeculationRefused(
                    f"prompt of {len(request.prompt_ids)} tokens + {request.n_tokens} new tokens exceeds the "
                    f"{name} model's context of {limit} tokens"
                )

    @staticmethod
    def slots_needed(request: Request) -> int:
        """Target-cache slots a speculative request may touch: its tokens plus a verify's padding."""
        config = request.speculative
        return request.total_len + (config.k_max if config is not None else 0)

    def takes(self, request: Request, max_len: int) -> bool:
        """Whether a newly admitted request runs speculatively: it asked to, and its row has room for
        a verify's padding (otherwise it decodes plainly; its output has the same law either way)."""
        return request.speculative is not None and self.slots_needed(request) <= max_len

    def owns(self, request: Request) -> bool:
        return request in self.rows

    def row(self, request: Request) -> SpecRow:
        return self.rows[request]

    # ------------------------------------------------------------------ prefill
    def ensure_like(self, tcache: KVCache) -> KVCache:
        """The draft cache, (re)made to the target cache's rows and length when they differ (the
        target's is only remade while idle, so no draft row is in use then)."""
        cache = self.cache
        if cache is None or (cache.batch_size, cache.max_len) != (tcache.batch_size, tcache.max_len):
            self.cache = None  # free the old one before allocating
            dtype = self.model.dtype if tcache.batch_size == 1 else None  # the engine cache's rule
            need = tcache.batch_size * tcache.max_len * kv_bytes_per_token(self.model, dtype)
            what = f"the draft's KV cache of {tcache.batch_size} row(s) x {tcache.max_len:,} tokens"
            check_fits(need, self.model.device, what, "ask for fewer or shorter sequences")
            self.cache = cache = KVCache.for_model(self.model, tcache.batch_size, tcache.max_len, dtype=dtype)
        return cache

    @torch.inference_mode()
    def prefill(self, requests: list[Request], tcache: KVCache) -> None:
        """Both caches take every prompt token but the last, which the first round feeds."""
        dcache = self.ensure_like(tcache)
        rows = [r.row for r in requests]
        assert all(i is not None for i in rows)
        dcache.reset(rows)
        seqs = [r.prompt_ids[:-1] for r in requests]
        pad = self.layout.kmer_start
        feed_rows(self.target, tcache, rows, seqs, "none", self.vocab_rows, pad)  # type: ignore[arg-type]
        feed_rows(self.model, dcache, rows, seqs, "none", self.vocab_rows, pad)  # type: ignore[arg-type]
        for r in requests:
            assert r.speculative is not None
            last = r.prompt_ids[-1]
            self.rows[r] = SpecRow(AdaptiveK(r.speculative, self._cost(r)), [last], [last])
            r.spec_stats = SpecStats()

    def _cost(self, request: Request) -> float:
        config = request.speculative
        assert config is not None
        return config.draft_cost if config.draft_cost is not None else self.draft_cost

    # ------------------------------------------------------------------ proposals
    @torch.inference_mode()
    def propose(self, requests: list[Request], ks: list[int]) -> Proposal:
        """Draft ``ks[i]`` tokens for ``requests[i]``, one batched draft forward per draft step
        (rows stop as they reach their own k)."""
        dcache = self.cache
        assert dcache is not None
        kmer0 = self.layout.kmer_start
        out = Proposal([[] for _ in requests], [[] for _ in requests], [])
        out.before = [int(dcache.lengths[r.row]) for r in requests]  # type: ignore[index]
        group = [i for i, k in enumerate(ks) if k >= 1]
        step = 0
        while group:
            seqs = [
                self.rows[requests[i]].d_pending if step == 0 else [kmer0 + out.drafts[i][-1]] for i in group
            ]
            rows = [requests[i].row for i in group]
            logits = feed_rows(self.model, dcache, rows, seqs, "last", self.vocab_rows, kmer0)  # type: ignore[arg-type]
            assert logits is not None
            self.stats.draft_forwards += 1
            self._pick(requests, group, logits.to(self.target.device), step, out)
            step += 1
            group = [i for i in group if ks[i] > step]
        return out

    def _pick(
        self, requests: list[Request], group: list[int], logits: torch.Tensor, step: int, out: Proposal
    ) -> None:
        """Draft token at draft step ``step`` for each row of ``group`` (by law key), with its law."""
        by_key: dict[tuple, list[int]] = {}
        for j, i in enumerate(group):
            by_key.setdefault(law_key(requests[i]), []).append(j)
        k = self.layout.k
        for js in by_key.values():
            reqs = [requests[group[j]] for j in js]
            x = failing_non_finite(logits[torch.tensor(js, device=logits.device)], reqs, "draft model logits")
            allowed = allowed_masks(reqs, [r.n_generated + step for r in reqs], k)
            first = reqs[0]
            laws: list[torch.Tensor | None]
            if first.params.greedy:
                picks, laws = greedy_picks(x, allowed, first), [None] * len(reqs)
            elif first.params.mode == "bp":
                per_base = per_base_law(x, allowed, first)  # bases drawn one by one, as bp decoding does
                u = torch.stack([uniforms(r, k) for r in reqs]).to(per_base.device)
                picks = kmer_index(sample_from_probs(per_base, u)).tolist()
                laws = list(product_distribution(per_base).unbind(0))
            else:
                q = token_law(x, allowed, first)
                u = torch.cat([uniforms(r, 1) for r in reqs]).to(q.device)
                picks, laws = sample_from_probs(q, u).tolist(), list(q.unbind(0))
            for j, pick, law in zip(js, picks, laws, strict=True):
                out.drafts[group[j]].append(int(pick))
                out.laws[group[j]].append(law)

    # ------------------------------------------------------------------ after the verify
    def commit(
        self, requests: list[Request], proposal: Proposal, accepted: list[int], emitted: list[int]
    ) -> None:
        """Roll the draft cache back to the committed tokens and set each row's pending tokens:
        ``accepted[i]`` drafts were kept and ``emitted[i]`` (a k-mer index) was added after them."""
        dcache = self.cache
        assert dcache is not None
        kmer0 = self.layout.kmer_start
        rows: list[int] = []
        keep: list[int] = []
        for i, r in enumerate(requests):
            state = self.rows[r]
            d, a, y = proposal.drafts[i], accepted[i], emitted[i]
            if not d:
                state.d_pending = [*state.d_pending, kmer0 + y]
            elif a < len(d):
                rows.append(r.row)  # type: ignore[arg-type]
                keep.append(proposal.before[i] + len(state.d_pending) + a)
                state.d_pending = [kmer0 + y]
            else:  # all accepted: the draft never ran its last draft
                state.d_pending = [kmer0 + d[-1], kmer0 + y]
            state.t_pending = [kmer0 + y]
            state.ctl.update(len(d), a)
        dcache.truncate(rows, keep)

    def forget(self, requests: list[Request]) -> None:
        """Drop finished requests' state (their cache rows are reset when next taken)."""
        for r in requests:
            self.rows.pop(r, None)
