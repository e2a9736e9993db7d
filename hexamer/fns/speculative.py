"""Speculative sampling maths: accept a draft's tokens so the output follows the target's law.

A draft proposes ``d_i ~ q_i``; the target's distributions at the same slots are ``p_i``. Draft
``i`` is accepted with probability ``min(1, p_i(d_i) / q_i(d_i))``, in order; at the first
rejection the replacement comes from ``norm(max(0, p_i - q_i))``, and after ``n`` acceptances a
bonus token comes from ``p_{n+1}``. For one slot P(emit y) = min(p(y), q(y)) + max(0, p(y) - q(y))
= p(y), so every emitted token is distributed exactly as sampling from ``p`` (Leviathan et al.
2023, Chen et al. 2023), whatever ``q`` is.

bp-level (FNS) decoding draws each base of a 6-mer independently from its per-base distribution,
so the law it samples a 6-mer from is the product of the per-base laws
(:func:`product_distribution`); using that product as ``p`` and ``q`` makes speculative bp output
exact too, and the acceptance ratio is a product of per-base ratios (:func:`product_prob`).
Pure torch; distributions are ``(..., V)`` float64 rows.
"""

from __future__ import annotations

import torch

from hexamer.fns.sampling import sample_from_probs

__all__ = [
    "accept_draft",
    "greedy_verify",
    "product_distribution",
    "product_prob",
    "residual_distribution",
    "verify_draft",
]


def product_distribution(per_base: torch.Tensor) -> torch.Tensor:
    """``(N, k, 4)`` per-position base distributions -> ``(N, 4**k)`` distribution of the k-mer whose
    bases are drawn independently (index = sum d_j 4**(k-1-j), first base most significant)."""
    n, k, _ = per_base.shape
    out = per_base[:, 0]
    for j in range(1, k):
        out = (out[:, :, None] * per_base[:, j, None, :]).reshape(n, -1)
    return out


def product_prob(per_base: torch.Tensor, kmers: torch.Tensor) -> torch.Tensor:
    """``(N,)`` probability of k-mer ``kmers[i]`` under row i's independent-bases law
    ``prod_j per_base[i, j, digit_j]`` (one entry of :func:`product_distribution`, without the table)."""
    _, k, _ = per_base.shape
    j = torch.arange(k, device=per_base.device)
    digits = (kmers.to(per_base.device)[:, None] // 4 ** (k - 1 - j)) % 4
    rows = torch.arange(per_base.shape[0], device=per_base.device)[:, None]
    return per_base[rows, j, digits].prod(-1)


def residual_distribution(p: torch.Tensor, q: torch.Tensor) -> torch.Tensor:
    """``norm(max(0, p - q))`` over the last dimension; ``p`` itself where the residual has no mass
    (only possible when p == q up to rounding, where a rejection cannot happen in exact arithmetic)."""
    res = torch.clamp(p - q, min=0.0)
    total = res.sum(-1, keepdim=True)
    return torch.where(total > 0, res / torch.where(total > 0, total, 1.0), p)


def accept_draft(p_draft: torch.Tensor, q_draft: torch.Tensor, uniforms: torch.Tensor) -> torch.Tensor:
    """How many leading drafts are accepted: draft i passes iff ``u_i * q_i(d_i) < p_i(d_i)``
    (probability ``min(1, p/q)``). Inputs ``(..., n)`` hold p and q *at the drafted tokens*."""
    ok = uniforms * q_draft < p_draft
    return torch.cumprod(ok.to(torch.int64), dim=-1).sum(-1)


def verify_draft(
    p: torch.Tensor, q: torch.Tensor, draft: torch.Tensor, u_accept: torch.Tensor, u_final: torch.Tensor
) -> tuple[int, int]:
    """One request's round: ``(accepted, token)``.

    ``p`` ``(n + 1, V)``: the target's law at each drafted slot and the one after; ``q`` ``(n, V)``:
    the laws the drafts ``draft`` ``(n,)`` were drawn from; ``u_accept`` ``(n,)`` and ``u_final``
    (a scalar) uniforms. ``token`` is the residual draw at the first rejection, or the bonus draw
    from ``p[n]`` when all ``n`` drafts pass.
    """
    n = int(draft.numel())
    a = 0
    if n:
        idx = torch.arange(n, device=p.device)
        d = draft.to(p.device)
        a = int(accept_draft(p[idx, d], q[idx, d], u_accept.to(p.device)))
    dist = residual_distribution(p[a], q[a]) if a < n else p[n]
    return a, int(sample_from_probs(dist, u_final.to(dist.device)))


def greedy_verify(draft: list[int], target_picks: list[int]) -> tuple[int, int]:
    """Greedy round: drafts are accepted while they equal the target's pick at their slot; the
    token emitted after them is the target's pick at the first mismatch (or the bonus slot), so the
    output equals target-only greedy decoding token for token. ``target_picks`` has ``n + 1`` entries."""
    a = 0
    while a < len(draft) and draft[a] == target_picks[a]:
        a += 1
    return a, target_picks[a]
