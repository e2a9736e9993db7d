"""Base-pair-level scores of a known DNA sequence from the model's k-mer logits.

Alignment: ``kmer_logits[..., t, :]`` is the distribution that *predicts* target token t (the model
output at the input position just before it, e.g. at ``<dna>`` for t = 0); the caller shifts.
Targets are k-mer indices (token id minus the first k-mer id). ``n_real[t]`` is the number of real
bases in target token t: k for a full k-mer, r (1..k-1) for the A-padded tail, 0 for ``<oov>`` or
any other non-k-mer target, which is skipped (its target value is then ignored). This is the
tokenizer's ``token_mask`` clipped at 0.

The sequence score is ``S_bp = mean over real bases of log P(true base)``, as in the Carbon report:

* ``method="fns"`` (published definition): ``P = P_j(b)``, the block-softmax marginal, each base
  scored independently of the other bases of its token.
* ``method="exact"``: ``P = P(b_j | b_<j of the true token, context)``, the within-token chain rule.
  Over a full token the k terms sum to the token log-probability; over a tail token's r real bases
  they sum to the log-probability of that r-base prefix (padding marginalised out, not scored).

:func:`score_tokens` gives the token-level score (block log-softmax of the true k-mer) for
comparison; note it scores the padded 'A's of a tail token as if they were real.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import torch

from hexamer.fns.marginals import exact_log_conditionals, log_base_marginals, token_log_prob
from hexamer.fns.tables import BASE_INDEX, infer_k

__all__ = ["BpScore", "TokenScore", "score_bases", "score_tokens", "targets_from_sequence"]


@dataclass(frozen=True)
class BpScore:
    """Per-base log-probabilities of a sequence (or a batch), with the mask of real bases.

    ``per_base`` ``(..., T, k)`` holds log P of each true base (0.0 where ``base_mask`` is False),
    ``n_bases`` and ``mean`` have the leading shape ``(...)``; ``mean`` is NaN for a sequence
    with no real base.
    """

    per_base: torch.Tensor
    base_mask: torch.Tensor
    n_bases: torch.Tensor
    mean: torch.Tensor

    @property
    def log_probs(self) -> torch.Tensor:
        """Real bases only, flattened in sequence order (row-major over any batch dimensions)."""
        return self.per_base[self.base_mask]


@dataclass(frozen=True)
class TokenScore:
    """Token-level log-probabilities ``per_token`` ``(..., T)`` (0.0 where ``mask`` is False) and their mean."""

    per_token: torch.Tensor
    mask: torch.Tensor
    mean: torch.Tensor

    @property
    def log_probs(self) -> torch.Tensor:
        return self.per_token[self.mask]


def _check_inputs(kmer_logits: torch.Tensor, targets: torch.Tensor) -> int:
    if not isinstance(kmer_logits, torch.Tensor) or not kmer_logits.dtype.is_floating_point:
        raise TypeError("kmer_logits must be a floating-point tensor of shape (..., T, 4**k)")
    if kmer_logits.dim() < 2:
        raise ValueError(f"kmer_logits must have shape (..., T, 4**k), got {tuple(kmer_logits.shape)}")
    k = infer_k(kmer_logits.shape[-1])
    if tuple(targets.shape) != tuple(kmer_logits.shape[:-1]):
        raise ValueError(
            f"targets shape {tuple(targets.shape)} must equal kmer_logits.shape[:-1] = {tuple(kmer_logits.shape[:-1])}"
        )
    if targets.dtype.is_floating_point or targets.dtype == torch.bool:
        raise TypeError(f"targets must be integer k-mer indices, got {targets.dtype}")
    return k


def score_bases(
    kmer_logits: torch.Tensor,
    targets: torch.Tensor,
    n_real: torch.Tensor,
    *,
    method: Literal["fns", "exact"] = "fns",
    valid: torch.Tensor | None = None,
) -> BpScore:
    """Score the real bases of the target tokens. Shapes: logits ``(..., T, 4**k)``, targets/n_real ``(..., T)``.

    ``valid`` (optional bool ``(..., T)``) drops whole tokens, e.g. batch padding; it is the same as
    setting their ``n_real`` to 0.
    """
    k = _check_inputs(kmer_logits, targets)
    if tuple(n_real.shape) != tuple(targets.shape):
        raise ValueError(
            f"n_real shape {tuple(n_real.shape)} must equal targets shape {tuple(targets.shape)}"
        )
    n_real = n_real.to(targets.device).long()
    if n_real.numel() and (int(n_real.min()) < 0 or int(n_real.max()) > k):
        raise ValueError(f"n_real must lie in 0..{k}")
    if valid is not None:
        if tuple(valid.shape) != tuple(targets.shape):
            raise ValueError(
                f"valid shape {tuple(valid.shape)} must equal targets shape {tuple(targets.shape)}"
            )
        n_real = torch.where(valid.to(torch.bool), n_real, 0)
    scored = n_real > 0
    tgt = targets.long()
    bad = scored & ((tgt < 0) | (tgt >= 4**k))
    if bad.any():
        raise ValueError(f"targets with n_real > 0 must be k-mer indices in [0, {4**k})")
    tgt = torch.where(scored, tgt, 0)

    if method == "fns":
        digits = (tgt[..., None] // 4 ** torch.arange(k - 1, -1, -1, device=tgt.device)) % 4
        lp = log_base_marginals(kmer_logits).gather(-1, digits[..., None]).squeeze(-1)
    elif method == "exact":
        lp = exact_log_conditionals(kmer_logits, tgt)
    else:
        raise ValueError(f"method must be 'fns' or 'exact', got {method!r}")

    base_mask = torch.arange(k, device=n_real.device) < n_real[..., None]
    per_base = torch.where(base_mask, lp, torch.zeros((), dtype=lp.dtype, device=lp.device))
    n_bases = base_mask.sum((-2, -1))
    mean = per_base.sum((-2, -1)) / n_bases
    return BpScore(per_base=per_base, base_mask=base_mask, n_bases=n_bases, mean=mean)


def score_tokens(
    kmer_logits: torch.Tensor, targets: torch.Tensor, valid: torch.Tensor | None = None
) -> TokenScore:
    """Token-level score: block log-softmax of each true k-mer and their mean over ``valid`` tokens."""
    k = _check_inputs(kmer_logits, targets)
    mask = torch.ones_like(targets, dtype=torch.bool) if valid is None else valid.to(torch.bool)
    if tuple(mask.shape) != tuple(targets.shape):
        raise ValueError(f"valid shape {tuple(mask.shape)} must equal targets shape {tuple(targets.shape)}")
    tgt = targets.long()
    if ((tgt < 0) | (tgt >= 4**k))[mask].any():
        raise ValueError(f"valid targets must be k-mer indices in [0, {4**k})")
    lp = token_log_prob(kmer_logits, torch.where(mask, tgt, 0))
    per_token = torch.where(mask, lp, torch.zeros((), dtype=lp.dtype, device=lp.device))
    return TokenScore(per_token=per_token, mask=mask, mean=per_token.sum(-1) / mask.sum(-1))


def targets_from_sequence(seq: str, k: int = 6) -> tuple[torch.Tensor, torch.Tensor]:
    """``(targets, n_real)`` for a raw DNA string, chunked like the Carbon tokenizer's DNA content.

    Upper-cases, cuts k-base chunks from the left, right-pads a short tail with 'A'; a chunk with any
    non-ACGT character (among its real bases) gets ``n_real = 0`` (the tokenizer emits ``<oov>``).
    """
    if k < 1:
        raise ValueError(f"k must be >= 1, got {k}")
    seq = seq.upper()
    targets: list[int] = []
    n_real: list[int] = []
    for start in range(0, len(seq), k):
        chunk = seq[start : start + k]
        if any(c not in BASE_INDEX for c in chunk):
            targets.append(0)
            n_real.append(0)
            continue
        f = 0
        for c in chunk.ljust(k, "A"):
            f = 4 * f + BASE_INDEX[c]
        targets.append(f)
        n_real.append(len(chunk))
    return torch.tensor(targets, dtype=torch.long), torch.tensor(n_real, dtype=torch.long)
