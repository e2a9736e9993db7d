"""From a server's top-N log-probabilities back to k-mer logits that :mod:`hexamer.fns` understands.

A server returns, per position, the N most likely tokens of the *full* vocabulary with their
log-softmax values. The k-mer rows of those values differ from the model's logits by one constant
per position (the full-vocabulary log-normaliser), and every FNS quantity is invariant to such a
shift (it renormalises over the DNA block), so the rows are used as k-mer logits directly: with all
4**k k-mers returned, the result equals the local computation up to float rounding.

**When N is smaller than the block** (or text tokens outrank some k-mers), missing k-mers are set
to ``-inf``, i.e. probability 0, the same approximation the published Carbon client makes. The
error is bounded: every missing k-mer is less likely than the N-th returned token, so the missing
mass is at most ``n_missing * exp(logprob of the N-th token)``, and :func:`marginal_error_bound`
turns that into the largest error any FNS log-marginal can carry, which :class:`Coverage` reports.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch

from hexamer.remote.protocol import Top
from hexamer.tokenizer.layout import DnaLayout


@dataclass
class Coverage:
    """How complete the returned k-mer distributions were, over all positions of a call."""

    positions: int = 0
    incomplete: int = 0  # positions missing at least one k-mer
    worst_bound: float = 0.0  # max error (nats) any FNS log-marginal may carry (marginal_error_bound)
    true_missing: int = 0  # positions whose true k-mer was not returned at all
    first_true_missing: int | None = None

    def merge(self, other: Coverage) -> Coverage:
        first = self.first_true_missing if self.first_true_missing is not None else other.first_true_missing
        return Coverage(
            positions=self.positions + other.positions,
            incomplete=self.incomplete + other.incomplete,
            worst_bound=max(self.worst_bound, other.worst_bound),
            true_missing=self.true_missing + other.true_missing,
            first_true_missing=first,
        )

    def message(self, where: str, top_n: int, tolerance: float) -> str | None:
        """A warning text when the approximation may matter, else None."""
        parts = []
        if self.worst_bound > tolerance:
            parts.append(
                f"{self.incomplete} of {self.positions} positions lacked some k-mers in the server's top "
                f"{top_n}; missing k-mers count as probability 0 (log-probabilities may be off by up to "
                f"{self.worst_bound:.3g} nats)"
            )
        if self.true_missing:
            parts.append(
                f"at {self.true_missing} positions (first: token {self.first_true_missing}) the true k-mer "
                "itself was not returned, so its token score is -inf"
            )
        if not parts:
            return None
        return (
            f"{where}: " + "; ".join(parts) + ". Ask for more log-probabilities (top_n=..., and start vLLM "
            "with --max-logprobs at least that large) for exact base-level scores."
        )


def marginal_error_bound(kmer_logprobs: np.ndarray, have: np.ndarray, threshold: float) -> float:
    """Largest possible error (nats) of any FNS log-marginal ``log P_j(b)`` of one position when
    the k-mers not in ``have`` are dropped, given that each of them has log-probability at most
    ``threshold``.

    With returned mass ``C`` (``S_jb`` of it on base b at j) and at most ``M`` (``M_jb``) missing,
    ``log P'_j(b) - log P_j(b) = log(S_jb / (S_jb + m_jb)) + log((C + m) / C)`` lies within
    ``[-log1p(M_jb / S_jb), log1p(M / C)]``.
    """
    k = round(math.log(kmer_logprobs.size, 4))
    unit = math.exp(threshold)
    probs = np.where(have, np.exp(np.where(have, kmer_logprobs, 0.0)), 0.0).reshape((4,) * k)
    lost = (~have).astype(np.float64).reshape((4,) * k)
    total = float(probs.sum())
    if total == 0.0:
        return math.inf
    worst = math.log1p(float(lost.sum()) * unit / total)
    for j in range(k):
        axes = tuple(a for a in range(k) if a != j)
        got = probs.sum(axis=axes)
        miss = lost.sum(axis=axes) * unit
        with np.errstate(divide="ignore", invalid="ignore"):
            ratio = np.where(miss > 0, miss / got, 0.0)
        worst = max(worst, float(np.log1p(ratio).max()))
    return worst


def kmer_rows(
    tops: Sequence[Top | None],
    layout: DnaLayout,
    top_n: int,
    *,
    extra: Sequence[int] = (),
    targets: Sequence[int] | None = None,
) -> tuple[torch.Tensor, Coverage]:
    """``(T, len(extra) + 4**k)`` float64 logits: the ``extra`` token ids' columns first (e.g.
    ``</dna>``, ``<oov>``), then the k-mer block; ``-inf`` where the server returned nothing.

    ``targets`` (k-mer indices, -1 to skip) are checked to be present, for :class:`Coverage`.
    A position with no data (``None``) is all ``-inf``.
    """
    n_kmers = layout.n_kmers
    width = len(extra) + n_kmers
    out = np.full((len(tops), width), -np.inf, dtype=np.float64)
    cov = Coverage(positions=len(tops))
    extra_col = {tid: c for c, tid in enumerate(extra)}
    for row, top in enumerate(tops):
        if top is None:
            continue
        ids, lps = top
        lps = np.where(lps <= -9999.0, -np.inf, lps)  # vLLM writes -inf as -9999.0
        rel = ids - layout.kmer_start
        is_kmer = (rel >= 0) & (rel < n_kmers)
        out[row, len(extra) + rel[is_kmer]] = lps[is_kmer]
        for tid, col in extra_col.items():
            hit = np.flatnonzero(ids == tid)
            if hit.size:
                out[row, col] = lps[hit[0]]
        kept = out[row, len(extra) :]
        have = np.isfinite(kept)
        missing = n_kmers - int(np.count_nonzero(have))
        if missing:  # every missing k-mer ranks below the server's N-th token
            threshold = float(np.sort(lps)[::-1][min(top_n, len(lps)) - 1]) if len(lps) else 0.0
            cov.incomplete += 1
            cov.worst_bound = max(cov.worst_bound, marginal_error_bound(kept, have, threshold))
        if targets is not None and targets[row] >= 0 and not np.isfinite(out[row, len(extra) + targets[row]]):
            cov.true_missing += 1
            if cov.first_true_missing is None:
                cov.first_true_missing = row
    return torch.from_numpy(out), cov
