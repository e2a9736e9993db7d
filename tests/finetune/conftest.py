"""Fixtures for the fine-tuning tests: the tiny random Carbon folder and random DNA."""

from __future__ import annotations

import numpy as np
import pytest


def random_dna(n: int, length: int, seed: int = 0) -> list[str]:
    rng = np.random.default_rng(seed)
    return ["".join(rng.choice(list("ACGT"), size=length)) for _ in range(n)]


@pytest.fixture
def dna() -> list[str]:
    """Sequences of different lengths (a ragged batch), one with an N and a partial 6-mer."""
    seqs = random_dna(4, 40, seed=1)
    return [seqs[0], seqs[1][:23], seqs[2][:7] + "N" + seqs[2][8:30], seqs[3][:12]]
