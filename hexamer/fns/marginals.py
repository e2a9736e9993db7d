"""Base-level views of a k-mer distribution: FNS marginals and exact within-token conditionals.

Input everywhere is ``kmer_logits`` of shape ``(..., 4**k)``: the logits of the DNA k-mer rows only,
in vocabulary order (the caller slices ``logits[..., kmer_start:kmer_start + 4**k]``). The k-mer
distribution is the **block softmax** ``p(v) = softmax(kmer_logits)[v]``, i.e. renormalised within
the DNA block: the probability the model gives to text tokens, tags or ``<oov>`` is never folded
into a base (the public FNS trainer adds it to base A; see :mod:`hexamer.fns.loss`). k is inferred
from the last dimension. Computation is in float32 (float64 if the input is float64), whatever the
input dtype, because bf16 rounding visibly changes base-level results.

Two ways of turning p into per-base probabilities for a target k-mer ``y = y_0 .. y_{k-1}``:

* **FNS marginals** (the published definition): ``P_j(b) = sum_{v: v_j = b} p(v)``. The FNS
  per-token score ``prod_j P_j(y_j)`` treats the k bases of one token as independent given the
  prefix; it is *not* ``p(y)`` and the k marginals do not form a chain rule.
* **Exact conditionals**: ``P(b_j = y_j | b_<j = y_<j, prefix) = p(y_<=j *) / p(y_<j *)``, where
  ``p(u *)`` is the total mass of the k-mers starting with ``u``. Their product over j telescopes to
  ``p(y)``, so they are the chain-rule factorisation of the token probability, strictly more
  faithful than the FNS product; for j = 0 both coincide (``P_0``).

Log-space results are computed with logsumexp reductions, so they stay finite and accurate where
the probabilities underflow.
"""

from __future__ import annotations

import torch

from hexamer.fns.tables import infer_k, onehot_map

__all__ = [
    "base_marginals",
    "block_softmax",
    "chain_log_prob",
    "exact_log_conditionals",
    "fns_log_prob",
    "log_base_marginals",
    "log_prefix_conditionals",
    "token_log_prob",
]


def compute_dtype(x: torch.Tensor) -> torch.dtype:
    """float64 stays float64; everything else (bf16, fp16, fp32) is computed in float32."""
    return torch.float64 if x.dtype == torch.float64 else torch.float32


def _prepare(kmer_logits: torch.Tensor) -> tuple[torch.Tensor, int]:
    if not isinstance(kmer_logits, torch.Tensor) or not kmer_logits.dtype.is_floating_point:
        raise TypeError("kmer_logits must be a floating-point tensor")
    if kmer_logits.dim() == 0:
        raise ValueError("kmer_logits must have a last dimension of size 4**k")
    k = infer_k(kmer_logits.shape[-1])
    return kmer_logits.to(compute_dtype(kmer_logits)), k


def _check_target(target: torch.Tensor, logits: torch.Tensor, n: int) -> torch.Tensor:
    if target.dtype.is_floating_point or target.dtype == torch.bool:
        raise TypeError(f"target must be an integer tensor of k-mer indices, got {target.dtype}")
    if tuple(target.shape) != tuple(logits.shape[:-1]):
        raise ValueError(
            f"target shape {tuple(target.shape)} must equal kmer_logits.shape[:-1] = {tuple(logits.shape[:-1])}"
        )
    if target.numel() and (int(target.min()) < 0 or int(target.max()) >= n):
        raise ValueError(f"target k-mer indices must lie in [0, {n})")
    return target.long()


def block_softmax(kmer_logits: torch.Tensor) -> torch.Tensor:
    """The k-mer distribution ``p``: softmax over the DNA block only (float32 or float64)."""
    x, _ = _prepare(kmer_logits)
    return torch.softmax(x, dim=-1)


def base_marginals(kmer_logits: torch.Tensor) -> torch.Tensor:
    """FNS marginals ``P_j(b)``, shape ``(..., k, 4)``, bases in ATCG order; each row sums to 1.

    One matmul of the block softmax with the ``(4**k, 4k)`` one-hot map.
    """
    x, k = _prepare(kmer_logits)
    probs = torch.softmax(x, dim=-1)
    table = onehot_map(k, probs.dtype, probs.device).reshape(4**k, 4 * k)
    return (probs @ table).unflatten(-1, (k, 4))


def _log_base_mass_exact(x: torch.Tensor, k: int) -> torch.Tensor:
    """``_log_base_mass`` by k separate logsumexps: never underflows, but exponentiates k times."""
    lead = x.dim() - 1
    cube = x.reshape(*x.shape[:-1], *([4] * k))
    out = []
    for j in range(k):
        dims = tuple(lead + i for i in range(k) if i != j)
        out.append(torch.logsumexp(cube, dim=dims) if dims else cube)
    return torch.stack(out, dim=-2)


def _log_base_mass(x: torch.Tensor, k: int) -> torch.Tensor:
    """Unnormalised ``log sum_{v: v_j = b} exp(x_v)``, shape ``(..., k, 4)``.

    One ``exp`` of the max-shifted logits, then plain sums per base (4x faster forward, 2x with
    backward, than k logsumexps). A base whose whole mass underflows (all its k-mers > ~87 nats
    (fp32) below the row's top) would come out ``-inf``; those rows are recomputed exactly, so the
    result never differs from the logsumexp form beyond rounding.
    """
    lead = x.dim() - 1
    top = x.amax(dim=-1, keepdim=True).detach()
    top = torch.where(torch.isfinite(top), top, torch.zeros_like(top))
    cube = torch.exp(x - top).reshape(*x.shape[:-1], *([4] * k))
    sums = [cube.sum(dim=tuple(lead + i for i in range(k) if i != j)) if k > 1 else cube for j in range(k)]
    mass = torch.stack(sums, dim=-2)
    underflow = (mass == 0).flatten(-2).any(-1)
    if not bool(underflow.any()):
        return mass.log() + top[..., None]
    # log(0) would put NaN into the backward pass even where the row is replaced: take log(1) there
    safe = torch.where(underflow[..., None, None], torch.ones_like(mass), mass)
    out = safe.log() + top[..., None]
    exact = torch.zeros_like(out)
    exact[underflow] = _log_base_mass_exact(x[underflow], k).to(out.dtype)
    return torch.where(underflow[..., None, None], exact, out)


def log_base_marginals(kmer_logits: torch.Tensor) -> torch.Tensor:
    """``log P_j(b)``, shape ``(..., k, 4)`` (ATCG order), computed stably in log space.

    ``log P_j(b) = logsumexp_{v: v_j = b} x_v - logsumexp_v x_v``; no probability is exponentiated,
    so bases far below the top stay finite (only all-``-inf`` k-mer groups give ``-inf``).
    """
    x, k = _prepare(kmer_logits)
    return _log_base_mass(x, k) - torch.logsumexp(x, dim=-1)[..., None, None]


def _prefix_levels(x: torch.Tensor, k: int) -> list[torch.Tensor]:
    """``levels[m]``: ``(..., 4**m)`` log-mass of every length-m prefix (``levels[0]`` = lse)."""
    levels = [x]
    for m in range(k - 1, -1, -1):
        levels.append(torch.logsumexp(levels[-1].unflatten(-1, (4**m, 4)), dim=-1))
    return levels[::-1]


def log_prefix_conditionals(kmer_logits: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    """Exact conditionals ``log P(b_j = b | b_<j = target_<j)``, shape ``(..., k, 4)`` (ATCG order).

    Row j is the 4-way distribution of base j given the target's first j bases (and the model's
    context): a chain-rule decoder or scorer uses this instead of the FNS marginal. Row 0 equals
    ``log_base_marginals(...)[..., 0, :]``. If the target prefix itself has probability 0 the
    row is ``-inf`` (the conditional is undefined; the chain product is 0 either way).
    """
    x, k = _prepare(kmer_logits)
    target = _check_target(target, x, 4**k)
    levels = _prefix_levels(x, k)
    rows = []
    for j in range(k):
        prefix = target // 4 ** (k - j)  # index of the length-j prefix
        children = levels[j + 1].unflatten(-1, (4**j, 4))
        idx = prefix[..., None, None].expand(*prefix.shape, 1, 4)
        child = children.gather(-2, idx).squeeze(-2)  # (..., 4): log-mass of prefix + b
        parent = levels[j].gather(-1, prefix[..., None])  # (..., 1)
        cond = torch.where(torch.isneginf(parent), torch.full_like(child, -torch.inf), child - parent)
        rows.append(cond)
    return torch.stack(rows, dim=-2)


def exact_log_conditionals(kmer_logits: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    """``log P(b_j = target_j | b_<j = target_<j)`` for each j, shape ``(..., k)``.

    Summing over j gives exactly ``log p(target)`` (see :func:`chain_log_prob`).
    """
    x, k = _prepare(kmer_logits)
    target = _check_target(target, x, 4**k)
    cond = log_prefix_conditionals(x, target)
    digits = (target[..., None] // 4 ** torch.arange(k - 1, -1, -1, device=target.device)) % 4
    return cond.gather(-1, digits[..., None]).squeeze(-1)


def chain_log_prob(kmer_logits: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    """Chain-rule score of a target k-mer: ``sum_j log P(y_j | y_<j)`` = ``log p(y)``, shape ``(...)``."""
    return exact_log_conditionals(kmer_logits, target).sum(-1)


def fns_log_prob(kmer_logits: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    """FNS score of a target k-mer: ``sum_j log P_j(y_j)`` (independent marginals), shape ``(...)``.

    This is not a log-probability of the token: the product of marginals is not normalised over
    k-mers. Divide by k for the per-base FNS score.
    """
    x, k = _prepare(kmer_logits)
    target = _check_target(target, x, 4**k)
    lm = log_base_marginals(x)
    digits = (target[..., None] // 4 ** torch.arange(k - 1, -1, -1, device=target.device)) % 4
    return lm.gather(-1, digits[..., None]).squeeze(-1).sum(-1)


def token_log_prob(kmer_logits: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    """Token-level ``log p(y)`` under the block softmax, shape ``(...)``."""
    x, k = _prepare(kmer_logits)
    target = _check_target(target, x, 4**k)
    return torch.log_softmax(x, dim=-1).gather(-1, target[..., None]).squeeze(-1)
