"""What a step minimises, and what validation measures, from a model and a labelled batch.

* Token cross-entropy over the full vocabulary on **full** 6-mer labels (a tail token padded with
  ``A`` is skipped: its padding is not DNA, and CE cannot supervise only part of a token).
* FNS: :func:`hexamer.fns.fns_loss`, corrected variant (k-mer-only numerators, full-vocabulary
  denominator, ``valid_len`` tail masking), one term per real base.
* Weighted as ``(1 - w) * CE_per_token + w * FNS_per_base``; with gradient accumulation both means
  are taken over the whole optimizer step (``token_norm``/``base_norm``), not per micro-batch.

Only supervised positions reach the LM head: the hidden states are gathered first, so padding and
tags cost no logits. The head runs in float32 even under bf16 autocast (bf16 logits visibly hurt
base-level probabilities).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F

from hexamer.fns import fns_loss, kmer_digits, log_base_marginals
from hexamer.model import LlamaModel
from hexamer.train.data import IGNORE_INDEX, Batch

__all__ = ["LossParts", "base_accuracy", "batch_loss", "supervised_logits"]


@dataclass
class LossParts:
    """``loss`` to backpropagate; sums and counts (floats/ints) for logging."""

    loss: torch.Tensor
    ce_sum: float
    fns_sum: float
    n_tokens: int  # full-6-mer labels (CE targets)
    n_bases: int  # real bases (FNS targets)


def supervised_logits(model: LlamaModel, batch: Batch) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Float32 logits ``(N, V)`` at the supervised positions, their labels and real-base counts."""
    out = model(batch.input_ids, logits_at="none", return_hidden=True)
    keep = batch.labels != IGNORE_INDEX
    hidden = out.hidden[keep]
    device_type = hidden.device.type
    with torch.autocast(device_type=device_type, enabled=False):
        logits = model.compute_logits(hidden.float(), fp32=True)
    return logits, batch.labels[keep], batch.valid_len[keep]


def batch_loss(
    model: LlamaModel,
    batch: Batch,
    *,
    kmer_start: int,
    fns_weight: float,
    token_norm: int,
    base_norm: int,
    k: int = 6,
) -> LossParts:
    """The weighted CE/FNS objective of one micro-batch, normalised by the step's totals."""
    logits, labels, valid = supervised_logits(model, batch)
    loss = logits.sum() * 0.0  # keeps a graph when nothing is supervised
    ce_sum = fns_sum = 0.0
    full = valid == k
    n_tokens = int(full.sum())
    n_bases = int(valid.sum())
    if fns_weight < 1 and n_tokens:
        ce = F.cross_entropy(logits[full], labels[full], reduction="sum")
        loss = loss + (1 - fns_weight) * ce / max(token_norm, 1)
        ce_sum = float(ce.detach())
    if fns_weight > 0 and n_bases:
        res = fns_loss(logits, labels, kmer_start=kmer_start, k=k, valid_len=valid)
        bp = res.loss * res.n_bases  # sum of per-base NLLs
        loss = loss + fns_weight * bp / max(base_norm, 1)
        fns_sum = float(bp.detach())
    return LossParts(loss=loss, ce_sum=ce_sum, fns_sum=fns_sum, n_tokens=n_tokens, n_bases=n_bases)


def base_accuracy(
    logits: torch.Tensor, labels: torch.Tensor, valid: torch.Tensor, *, kmer_start: int, k: int = 6
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Per-position (``k``,) counts: bases right by the argmax of the FNS marginals, bases scored,
    and the summed FNS NLL (block-renormalised log marginals, as scoring uses)."""
    n = 4**k
    log_marg = log_base_marginals(logits[:, kmer_start : kmer_start + n])  # (N, k, 4), ATCG
    digits = kmer_digits(k, logits.device)[labels - kmer_start]  # (N, k)
    mask = torch.arange(k, device=logits.device) < valid[:, None]
    right = (log_marg.argmax(-1) == digits) & mask
    nll = -log_marg.gather(-1, digits[..., None]).squeeze(-1)
    return right.sum(0), mask.sum(0), torch.where(mask, nll, 0.0).sum(0)
