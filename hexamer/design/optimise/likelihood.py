"""Naturalness: the model's base-level FNS log-likelihood per base of candidate sequences.

A whole sequence costs one forward (:meth:`~hexamer.backend.protocol.Backend.window_log_likelihoods`).
The single edits of one sequence, on a model in this process (a
:class:`~hexamer.backend.local.LocalBackend`), are scored by
:func:`~hexamer.design.optimise.edit_scores.edit_log_likelihoods`: the parent runs once, each edit
only from its edited 6-mer on, many edits per forward, and only the FNS marginals the likelihood
needs are computed. Elsewhere (a served model) each edited sequence is scored whole.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np

from hexamer.design.optimise.edits import apply_edit

if TYPE_CHECKING:
    from hexamer.backend.protocol import Backend

__all__ = ["LikelihoodScorer"]


class LikelihoodScorer:
    """Per-base FNS log-likelihood (nats per base) of sequences on ``backend``.

    ``shared=False`` scores every edit with its own batch-1 forward (on an in-process model with
    the same per-position arithmetic as the shared path,
    :func:`~hexamer.design.optimise.edit_scores.one_forward_each`): the reference the shared path
    is tested and benchmarked against."""

    def __init__(
        self, backend: Backend, *, shared: bool = True, batch_size: int = 4096, token_budget: int = 2048
    ) -> None:
        from hexamer.backend.local import LocalBackend

        if not 1 <= batch_size <= 65536:
            raise ValueError(f"batch_size must be in 1..65536, got {batch_size}")
        if not 1 <= token_budget <= 1 << 24:
            raise ValueError(f"token_budget must be in 1..{1 << 24}, got {token_budget}")
        self.backend = backend
        self.local = isinstance(backend, LocalBackend)
        self.shared = shared and self.local
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
        ``(pos, base)`` applied. ``parent_per_base`` (the parent's own, from :meth:`per_base`) is
        not needed by these scorers, which run the parent themselves; it stays for callers."""
        from hexamer.backend.local import LocalBackend
        from hexamer.design.optimise.edit_scores import edit_log_likelihoods, one_forward_each

        if not edits:
            return np.empty(0, dtype=np.float64)
        if not self.local:
            return self.per_base([apply_edit(parent, p, b) for p, b in edits])
        assert isinstance(self.backend, LocalBackend)
        if self.shared:
            totals = edit_log_likelihoods(
                self.backend, parent, edits, batch_size=self.batch_size, token_budget=self.token_budget
            )
        else:
            totals = one_forward_each(self.backend, [apply_edit(parent, p, b) for p, b in edits])
        return totals / len(parent)
