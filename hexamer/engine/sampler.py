"""Turns DNA-block logits into the next 6-mer for each request, with its own options and RNG.

Rows are grouped by (mode, temperature, top_p, top_k, min_p) so each group is one batched call
into :mod:`hexamer.fns`; every request draws from its own ``torch.Generator``, so its output does
not depend on which other requests share the batch. A request's ``repetition_penalty`` rescales
its own row first; ``return_logprobs`` records the raw model's log-probability of what was picked.
"""

from __future__ import annotations

from collections import defaultdict

import torch

from hexamer.engine.request import Request
from hexamer.fns import (
    bp_greedy,
    bp_sample,
    kmer_mask_from_positions,
    log_base_marginals,
    nucleus_mask,
    sample_from_probs,
    token_greedy,
    token_sample,
)

END = -1  # returned instead of a k-mer index when a request emits </dna>


def _allowed(requests: list[Request], k: int) -> torch.Tensor | None:
    return allowed_masks(requests, [r.n_generated for r in requests], k)


def allowed_masks(requests: list[Request], slots: list[int], k: int) -> torch.Tensor | None:
    """``(N, k, 4)`` base masks of new token ``slots[i]`` of ``requests[i]``, or None when free."""
    masks = [r.allowed_at(t) for r, t in zip(requests, slots, strict=True)]
    if all(m is None for m in masks):
        return None
    out = torch.ones((len(requests), k, 4), dtype=torch.bool)
    for i, m in enumerate(masks):
        if m is not None:
            out[i] = torch.from_numpy(m)
    return out


def _uniform(req: Request) -> torch.Tensor:
    return torch.rand(1, dtype=torch.float64, generator=req.generator)


def _sample_with_end(
    kmer_logits: torch.Tensor,
    end_logits: torch.Tensor,
    reqs: list[Request],
    allowed_kmers: torch.Tensor | None,
) -> list[int]:
    """Token mode with ``</dna>`` allowed: one distribution over [k-mers..., </dna>]."""
    p = reqs[0].params
    x = torch.cat([kmer_logits, end_logits[:, None]], dim=-1).to(torch.float64)
    if allowed_kmers is not None:
        keep = torch.cat([allowed_kmers, torch.ones_like(allowed_kmers[:, :1])], dim=-1)
        x = x.masked_fill(~keep.to(x.device), -torch.inf)
    if p.greedy:
        choice = x.argmax(-1)
    else:
        probs = torch.softmax(x / p.temperature, dim=-1)
        if p.top_p < 1:
            probs = torch.where(nucleus_mask(probs, p.top_p), probs, 0.0)
        probs = probs / probs.sum(-1, keepdim=True)
        u = torch.cat([_uniform(r) for r in reqs]).to(probs.device)
        choice = sample_from_probs(probs, u)
    n = kmer_logits.shape[-1]
    return [END if int(c) == n else int(c) for c in choice]


def repetition_penalised(kmer_logits: torch.Tensor, requests: list[Request]) -> torch.Tensor:
    """``kmer_logits`` with each request's ``repetition_penalty`` applied to the k-mers already in
    its prompt or output (``transformers``' rule: positive logits divided, negative multiplied);
    the input itself when no request asks for it (a copy otherwise: the input may be a view)."""
    rows = [i for i, r in enumerate(requests) if r.params.repetition_penalty != 1]
    if not rows:
        return kmer_logits
    x = kmer_logits.clone()
    for i in rows:
        r = requests[i]
        seen = sorted(set(r.prompt_kmers) | set(r.output_kmers))
        if seen:
            idx = torch.tensor(seen, device=x.device)
            v = x[i, idx]
            penalty = r.params.repetition_penalty
            x[i, idx] = torch.where(v > 0, v / penalty, v * penalty)
    return x


def kmer_filter(
    kmer_logits: torch.Tensor,
    allowed_kmers: torch.Tensor | None,
    temperature: float,
    top_k: int,
    min_p: float,
) -> torch.Tensor | None:
    """Token mode's ``top_k`` / ``min_p`` as a ``(B, 4**k)`` mask of the k-mers that may be drawn
    (combined with ``allowed_kmers``); None when nothing is filtered. Greedy picks are unchanged by
    either filter (both keep the most likely k-mer)."""
    if (top_k <= 0 and min_p <= 0) or temperature == 0:
        return allowed_kmers
    y = kmer_logits if allowed_kmers is None else kmer_logits.masked_fill(~allowed_kmers, -torch.inf)
    keep = torch.ones_like(y, dtype=torch.bool)
    if 0 < top_k < y.shape[-1]:
        keep &= y >= torch.topk(y, top_k, dim=-1).values[:, -1:]
    if min_p > 0:
        probs = torch.softmax(y.double() / temperature, dim=-1)
        keep &= probs >= min_p * probs.amax(-1, keepdim=True)
    return keep if allowed_kmers is None else keep & allowed_kmers


def record_logprobs(raw: torch.Tensor, requests: list[Request], picks: list[int], mode: str, k: int) -> None:
    """Append the raw model's log-probability of each pick to requests that asked for it: token
    mode the k-mer's log-softmax over the k-mer block, bp mode each base's FNS marginal."""
    for j, r in enumerate(requests):
        if not r.params.return_logprobs or picks[j] == END:
            continue
        row = raw[j : j + 1].double()
        if mode == "token":
            value = torch.log_softmax(row, dim=-1)[0, picks[j]].reshape(1)
        else:
            digits = torch.tensor([(picks[j] // 4 ** (k - 1 - i)) % 4 for i in range(k)], device=row.device)
            value = log_base_marginals(row)[0].gather(-1, digits[:, None])[:, 0]
        r.dna_logprobs.append(value.cpu().numpy())


def _chosen(x: torch.Tensor, reqs: list[Request], temperature: float, k: int) -> list[int]:
    """bp mode with a :class:`~hexamer.engine.request.BaseChooser` per row: the marginals of the
    whole group at once (float64), then each row's chooser picks its bases."""
    xd = x.to(torch.float64)
    lm = log_base_marginals(xd).cpu().numpy()
    lmt = lm if temperature in (0, 1) else log_base_marginals(xd / temperature).cpu().numpy()
    out = []
    for i, r in enumerate(reqs):
        assert r.chooser is not None
        value = 0
        for b in r.chooser.choose(lm[i], lmt[i])[:k]:
            value = value * 4 + int(b)
        out.append(value)
    return out


def sample_next(logits: torch.Tensor, requests: list[Request], k: int = 6) -> list[int]:
    """Next k-mer index (or :data:`END`) for each request; ``logits`` is ``(B, 2 + 4**k)`` with
    ``</dna>`` in column 0 and ``<oov>`` (never sampled) in column 1."""
    end_logits = logits[:, 0]
    kmer_logits = logits[:, 2:]
    result: list[int] = [0] * len(requests)
    groups: dict[tuple, list[int]] = defaultdict(list)
    for i, r in enumerate(requests):
        p = r.params
        chosen = r.chooser is not None and p.mode == "bp"
        groups[(p.mode, p.temperature, p.top_p, p.stop_at_end_tag, p.top_k, p.min_p, chosen)].append(i)
    for (mode, temperature, top_p, with_end, top_k, min_p, chosen), rows in groups.items():
        reqs = [requests[i] for i in rows]
        sel = torch.tensor(rows, device=logits.device)
        raw = kmer_logits.index_select(0, sel)
        x = repetition_penalised(raw, reqs)
        allowed = _allowed(reqs, k)
        gens = [r.generator for r in reqs]
        if chosen:
            values = _chosen(x, reqs, temperature, k)
        elif mode == "bp":
            if temperature == 0:
                picked = bp_greedy(x, allowed=allowed)
            else:
                picked = bp_sample(x, temperature=temperature, top_p=top_p, allowed=allowed, generator=gens)
            values = picked.tolist()
        else:
            allowed_kmers = kmer_mask_from_positions(allowed) if allowed is not None else None
            allowed_kmers = kmer_filter(x, allowed_kmers, temperature, top_k, min_p)
            if with_end:
                values = _sample_with_end(x, end_logits.index_select(0, sel), reqs, allowed_kmers)
            elif temperature == 0:
                values = token_greedy(x, allowed_kmers=allowed_kmers).tolist()
            else:
                values = token_sample(
                    x, temperature=temperature, top_p=top_p, allowed_kmers=allowed_kmers, generator=gens
                ).tolist()
        record_logprobs(raw, reqs, values, mode, k)
        for i, v in zip(rows, values, strict=True):
            result[i] = v
    return result


def _text_filter(probs: torch.Tensor, top_k: int, top_p: float, min_p: float) -> torch.Tensor:
    if top_k > 0 and top_k < probs.shape[-1]:
        kth = torch.topk(probs, top_k, dim=-1).values[:, -1:]
        probs = torch.where(probs >= kth, probs, 0.0)
    if min_p > 0:
        probs = torch.where(probs >= min_p * probs.amax(-1, keepdim=True), probs, 0.0)
    if top_p < 1:
        probs = torch.where(nucleus_mask(probs, top_p), probs, 0.0)
    return probs


def _text_bans(reqs: list[Request], vocab: int, device: torch.device) -> torch.Tensor | None:
    """``(G, V)`` True where a token may not be sampled now, or None when nothing is banned."""
    banned = None
    for i, r in enumerate(reqs):
        allowed = r.params.allowed_token_ids
        ban_now = r.banned_now()
        if allowed is None and not ban_now:
            continue
        if banned is None:
            banned = torch.zeros((len(reqs), vocab), dtype=torch.bool)
        if allowed is not None:
            banned[i] = True
            banned[i, torch.tensor(allowed, dtype=torch.int64)] = False
        if ban_now:
            banned[i, torch.tensor(ban_now, dtype=torch.int64)] = True
    return None if banned is None else banned.to(device)


def sample_text(logits: torch.Tensor, requests: list[Request]) -> list[int]:
    """Next token id for text-mode requests from whole-vocabulary ``logits`` ``(B, V)``.

    Greedy at temperature 0; otherwise softmax at the temperature, then top-k, min-p and top-p,
    and one uniform from each request's own generator (so a request's draw never depends on its
    batch). Banned ids (``allowed_token_ids``, EOS before ``min_tokens``) are never picked.
    """
    result: list[int] = [0] * len(requests)
    groups: dict[tuple, list[int]] = defaultdict(list)
    for i, r in enumerate(requests):
        p = r.params
        groups[(p.temperature, p.top_p, p.top_k, p.min_p)].append(i)
    for (temperature, top_p, top_k, min_p), rows in groups.items():
        reqs = [requests[i] for i in rows]
        x = logits.index_select(0, torch.tensor(rows, device=logits.device)).to(torch.float32)
        banned = _text_bans(reqs, x.shape[-1], x.device)
        if banned is not None:
            x = x.masked_fill(banned, -torch.inf)
        if temperature == 0:
            values = x.argmax(-1).tolist()
        else:
            probs = _text_filter(torch.softmax(x / temperature, dim=-1), top_k, top_p, min_p)
            u = torch.cat([_uniform(r) for r in reqs]).to(probs.device)
            values = sample_from_probs(probs, u).tolist()
        for i, v in zip(rows, values, strict=True):
            result[i] = int(v)
    return result
