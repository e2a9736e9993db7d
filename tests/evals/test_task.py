"""The task contract's shared pieces: what fits the model's context."""

from __future__ import annotations

from hexamer import Carbon
from hexamer.evals.task import EvalContext


def test_dna_fits_counts_whole_kmers_after_the_dna_token(carbon: Carbon) -> None:
    ctx = EvalContext(carbon=carbon)
    k, n = carbon.layout.k, carbon.context_length
    assert ctx.dna_fits() == k * (n - 1)
    assert ctx.dna_fits(new_tokens=5) == k * (n - 6)
