"""The target side of speculative decoding: one round = draft, verify in one forward, accept, roll back.

Per request and round, with ``k`` drafts (the request's own, capped so a round never drafts past
its last token):

1. the draft proposes ``d_1..d_k`` (:meth:`~hexamer.engine.draft.DraftRunner.propose`);
2. the target runs **one** forward over ``[last committed token, d_1, ..., d_k]`` and so has the
   law ``p_i`` target-only decoding would sample slot ``i`` from;
3. :func:`hexamer.fns.verify_draft` (sampled) or :func:`hexamer.fns.greedy_verify` (greedy) keeps a
   prefix of the drafts and adds one token of the target's;
4. both caches are rolled back to the committed tokens (:meth:`~hexamer.model.KVCache.truncate`:
   rows cut, slots behind them invalid, so a rejected draft can never be attended to).

Rows with different options share the forwards; each row's random numbers come from its own
generator in a fixed order (draft picks, then acceptance, then the final draw), so a request's
output does not depend on its batch.
"""

from __future__ import annotations

import torch

from hexamer.engine.draft import (
    DraftRunner,
    failing_non_finite,
    feed_rows,
    greedy_picks,
    law_key,
    token_law,
    uniforms,
)
from hexamer.engine.request import Request, RequestState
from hexamer.engine.sampler import allowed_masks
from hexamer.fns import greedy_verify, verify_draft
from hexamer.model import KVCache

__all__ = ["speculative_round"]


def _target_laws(
    requests: list[Request], ks: list[int], logits: torch.Tensor, k: int
) -> list[list[int] | torch.Tensor]:
    """Per request, the target's greedy picks (a list) or laws (``(k_i + 1, V)``) at its ``k_i + 1``
    scored slots, one batched call per law key."""
    by_key: dict[tuple, list[int]] = {}
    for i, r in enumerate(requests):
        by_key.setdefault(law_key(r), []).append(i)
    out: list[list[int] | torch.Tensor] = [[] for _ in requests]
    for idx in by_key.values():
        reqs = [requests[i] for i in idx]
        flat = torch.cat([logits[i, : ks[i] + 1] for i in idx])
        slots = [requests[i].n_generated + s for i in idx for s in range(ks[i] + 1)]
        owners = [requests[i] for i in idx for _ in range(ks[i] + 1)]
        allowed = allowed_masks(owners, slots, k)
        whole = (
            greedy_picks(flat, allowed, reqs[0])
            if reqs[0].params.greedy
            else token_law(flat, allowed, reqs[0])
        )
        offset = 0
        for i in idx:
            out[i] = whole[offset : offset + ks[i] + 1]
            offset += ks[i] + 1
    return out


@torch.inference_mode()
def speculative_round(
    target_cache: KVCache, draft: DraftRunner, requests: list[Request]
) -> tuple[list[Request], int]:
    """One draft-and-verify round for ``requests`` (all owned by ``draft``, unfinished); returns
    the requests that finished and the number of tokens emitted."""
    layout = draft.layout
    kmer0 = layout.kmer_start
    states = [draft.row(r) for r in requests]
    ks = [min(s.ctl.k, r.n_tokens - r.n_generated - 1) for s, r in zip(states, requests, strict=True)]
    proposal = draft.propose(requests, ks)
    t_before = [int(target_cache.lengths[r.row]) for r in requests]  # type: ignore[index]
    seqs = [s.t_pending + [kmer0 + d for d in ds] for s, ds in zip(states, proposal.drafts, strict=True)]
    rows = [r.row for r in requests]
    logits = feed_rows(draft.target, target_cache, rows, seqs, "all", draft.vocab_rows, kmer0)  # type: ignore[arg-type]
    assert logits is not None
    stats = draft.stats
    stats.target_forwards += 1
    # NaN/inf target logits at a request's scored slots fail it, as a draft's did in propose
    span = (
        torch.arange(logits.shape[1], device=logits.device)[None, :]
        <= torch.tensor(ks, device=logits.device)[:, None]
    )
    logits = failing_non_finite(logits.masked_fill(~span[..., None], 0.0), requests, "logits")
    laws = _target_laws(requests, ks, logits, layout.k)
    finished: list[Request] = []
    accepted: list[int] = []
    emitted: list[int] = []
    keep: list[int] = []
    total = 0
    for i, r in enumerate(requests):
        d = proposal.drafts[i]
        n = len(d)
        if r.error is not None:  # failed: no token is emitted, its rows are dropped with it
            accepted.append(0)
            emitted.append(0)
            keep.append(t_before[i])
            finished.append(r)
            continue
        if r.params.greedy:
            a, y = greedy_verify(d, laws[i])  # type: ignore[arg-type]
        else:
            p = laws[i]
            assert isinstance(p, torch.Tensor)
            q = torch.stack(proposal.laws[i]) if n else p[:0]  # type: ignore[arg-type]
            u_accept = uniforms(r, n) if n else torch.empty(0, dtype=torch.float64)
            a, y = verify_draft(p, q, torch.tensor(d, dtype=torch.int64), u_accept, uniforms(r, 1)[0])
        new = [*d[:a], y]
        for token in new:
            r.append(token)
        accepted.append(a)
        emitted.append(y)
        keep.append(t_before[i] + 1 + a)  # the target keeps its pending token and the accepted drafts
        total += len(new)
        for s in (stats, r.spec_stats):
            if s is not None:
                s.row_rounds += 1
                s.drafted += n
                s.accepted += a
                s.emitted += len(new)
                s.k_counts[n] += 1
        if r.state is RequestState.FINISHED:
            finished.append(r)
    target_cache.truncate(rows, keep)  # type: ignore[arg-type]
    draft.commit(requests, proposal, accepted, emitted)
    draft.forget(finished)
    return finished, total
