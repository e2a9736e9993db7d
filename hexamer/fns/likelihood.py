"""Summed base-level log-likelihood of a scored DNA input, in float64 (the VEP window recipe's LL)."""

from __future__ import annotations

import math

import numpy as np
import torch

from hexamer.fns.marginals import base_marginals

__all__ = ["bp_log_likelihood", "bp_log_likelihoods"]


def bp_log_likelihood(kmer_logits: torch.Tensor, targets: np.ndarray, n_real: np.ndarray) -> float:
    """Sum over the real bases of ``log P_j(true base)``: FNS marginals in float64.

    ``kmer_logits[t]`` predicts target k-mer ``targets[t]`` (an index in the k-mer block) of which
    the first ``n_real[t]`` bases are real (0 for ``<oov>``). The marginals are sums of the float64
    block softmax, so this equals ``score_bases(...).per_base.sum()`` in float64 to ~1e-13 at a
    fraction of the cost (one ``exp`` per k-mer instead of one per k-mer and base position).
    """
    k = round(math.log(kmer_logits.shape[-1], 4))
    device = kmer_logits.device
    tgt = torch.from_numpy(np.where(n_real > 0, targets, 0).astype(np.int64)).to(device)
    real = torch.from_numpy(n_real.astype(np.int64)).to(device)
    digits = (tgt[:, None] // 4 ** torch.arange(k - 1, -1, -1, device=device)) % 4
    probs = base_marginals(kmer_logits.double()).gather(-1, digits[..., None]).squeeze(-1)
    mask = torch.arange(k, device=device) < real[:, None]
    return float(probs.log()[mask].sum())


def bp_log_likelihoods(
    kmer_logits: torch.Tensor, targets: np.ndarray, n_real: np.ndarray, lengths: list[int]
) -> list[float]:
    """:func:`bp_log_likelihood` of several rows at once: ``kmer_logits`` holds the rows' positions
    one after the other (``lengths[r]`` for row r), ``targets`` and ``n_real`` likewise; one float64
    marginal computation for all of them, then one sum per row."""
    k = round(math.log(kmer_logits.shape[-1], 4))
    device = kmer_logits.device
    tgt = torch.from_numpy(np.where(n_real > 0, targets, 0).astype(np.int64)).to(device)
    real = torch.from_numpy(n_real.astype(np.int64)).to(device)
    digits = (tgt[:, None] // 4 ** torch.arange(k - 1, -1, -1, device=device)) % 4
    probs = base_marginals(kmer_logits.double()).gather(-1, digits[..., None]).squeeze(-1)
    mask = torch.arange(k, device=device) < real[:, None]
    per_position = torch.where(mask, probs.log(), 0.0).sum(-1)
    row = torch.repeat_interleave(
        torch.arange(len(lengths), device=device), torch.tensor(lengths, device=device)
    )
    sums = torch.zeros(len(lengths), dtype=torch.float64, device=device).index_add_(0, row, per_position)
    return sums.tolist()
