"""Naturalness: the model's base-level FNS log-likelihood per base of candidate sequences.

A whole sequence costs one forward (:meth:`~hexamer.backend.protocol.Backend.window_log_likelihoods`).
The single edits of one sequence are scored the way ``hexamer ism`` scores a region's SNVs: edits
inside one 6-mer share every token before it, so on a backend that ``supports_kv_sharing`` each
such group (the parent plus its edits there) runs its shared prefix once and only the tokens from
the edited 6-mer on (:meth:`~hexamer.backend.protocol.PrefixSharingBackend.shared_prefix_log_likelihoods`).
The prefix terms are equal within a group, so ``LL(edit) = LL(parent) + tail(edit) - tail(parent)``
is the edited sequence's own full log-likelihood.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, cast

import numpy as np

from hexamer.design.optimise.edits import apply_edit

if TYPE_CHECKING:
    from hexamer.backend.protocol import Backend

__all__ = ["LikelihoodScorer"]


class LikelihoodScorer:
    """Per-base FNS log-likelihood (nats per base) of sequences on ``backend``.

    ``shared=False`` (or a backend without ``supports_kv_sharing``) scores every edit with its own
    forward: the reference the shared-prefix path is tested and benchmarked against."""

    def __init__(
        self, backend: Backend, *, shared: bool = True, batch_size: int = 64, token_budget: int = 16384
    ) -> None:
        if not 1 <= batch_size <= 65536:
            raise ValueError(f"batch_size must be in 1..65536, got {batch_size}")
        if not 1 <= token_budget <= 1 << 24:
            raise ValueError(f"token_budget must be in 1..{1 << 24}, got {token_budget}")
        self.backend = backend
        self.shared = shared and bool(getattr(backend, "supports_kv_sharing", False))
        self.batch_size = batch_size
        self.token_budget = token_budget

    def per_base(self, sequences: Sequence[str]) -> np.ndarray:
        """``(n,)`` float64 log-likelihood per base, one forward per sequence."""
        totals = self.backend.window_log_likelihoods(list(sequences))
        return np.array([t / len(s) for t, s in zip(totals, sequences, strict=True)], dtype=np.float64)

    def edits_per_base(
        self, parent: str, parent_per_base: float, edits: Sequence[tuple[int, str]]
    ) -> np.ndarray:
        """``(len(edits),)`` log-likelihood per base of ``parent`` with each single edit
        ``(pos, base)`` applied; ``parent_per_base`` is the parent's own (from :meth:`per_base`)."""
        seqs = [apply_edit(parent, p, b) for p, b in edits]
        if not self.shared:
            return self.per_base(seqs)
        from hexamer.backend.protocol import PrefixSharingBackend

        fast = cast(PrefixSharingBackend, self.backend)
        k = self.backend.layout.k
        by_token: dict[int, list[int]] = {}
        for i, (pos, _) in enumerate(edits):
            by_token.setdefault(pos // k, []).append(i)
        groups = [[parent, *(seqs[i] for i in members)] for members in by_token.values()]
        tails = fast.shared_prefix_log_likelihoods(
            groups, batch_size=self.batch_size, token_budget=self.token_budget
        )
        total = parent_per_base * len(parent)
        out = np.empty(len(edits), dtype=np.float64)
        for members, tail in zip(by_token.values(), tails, strict=True):
            for i, t in zip(members, tail[1:], strict=True):
                out[i] = (total + t - tail[0]) / len(parent)
        return out
