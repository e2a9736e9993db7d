"""The design objective: ``oracle + weight · (model log-likelihood per base)``.

The likelihood term is the naturalness prior: it keeps an optimiser from walking to sequences the
language model finds implausible. With ``weight=0`` (or no scorer) the model is never run.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from hexamer.design.optimise.edits import apply_edit
from hexamer.design.optimise.likelihood import LikelihoodScorer
from hexamer.design.optimise.oracles import Oracle, checked_scores

__all__ = ["Objective", "Scores"]


@dataclass(frozen=True)
class Scores:
    """Per sequence: the objective and its two terms (``likelihood`` NaN when not computed)."""

    objective: np.ndarray
    oracle: np.ndarray
    likelihood: np.ndarray

    def row(self, i: int) -> tuple[float, float, float]:
        return float(self.objective[i]), float(self.oracle[i]), float(self.likelihood[i])


class Objective:
    """``oracle(seq) + weight · LL(seq)/len(seq)``; larger is better."""

    def __init__(
        self, oracle: Oracle, *, likelihood: LikelihoodScorer | None = None, weight: float = 0.0
    ) -> None:
        if not np.isfinite(weight) or weight < 0:
            raise ValueError(f"the likelihood weight must be finite and >= 0, got {weight}")
        if weight > 0 and likelihood is None:
            raise ValueError("a likelihood weight > 0 needs a LikelihoodScorer (a model)")
        self.oracle = oracle
        self.likelihood = likelihood if weight > 0 else None
        self.weight = float(weight)

    def _combine(self, seqs: Sequence[str], ll: np.ndarray) -> Scores:
        oracle = checked_scores(self.oracle(seqs), len(seqs), getattr(self.oracle, "name", "oracle"))
        total = oracle + self.weight * ll if self.likelihood is not None else oracle.copy()
        return Scores(total, oracle, ll)

    def score(self, sequences: Sequence[str]) -> Scores:
        """Scores of whole sequences (one forward each for the likelihood)."""
        seqs = list(sequences)
        ll = self.likelihood.per_base(seqs) if self.likelihood is not None else np.full(len(seqs), np.nan)
        return self._combine(seqs, ll)

    def score_edits(self, parent: str, parent_likelihood: float, edits: Sequence[tuple[int, str]]) -> Scores:
        """Scores of ``parent`` with each single edit applied; the likelihood through the
        shared-prefix path (``parent_likelihood``: the parent's own, per base)."""
        seqs = [apply_edit(parent, p, b) for p, b in edits]
        if not seqs:
            empty = np.empty(0)
            return Scores(empty, empty, empty)
        if self.likelihood is None:
            ll = np.full(len(seqs), np.nan)
        else:
            ll = self.likelihood.edits_per_base(parent, parent_likelihood, edits)
        return self._combine(seqs, ll)
