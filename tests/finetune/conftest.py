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


def gc_set(n: int, length: int, seed: int):
    """Random DNA of varied GC content labelled with its z-scored GC fraction (a regression task
    a Carbon model can learn in a few steps)."""
    from hexamer.finetune.task import LabelledSet

    rng = np.random.default_rng(seed)
    seqs = []
    for p in rng.uniform(0.2, 0.8, n):
        seqs.append(
            "".join(rng.choice(list("ACGT"), size=length, p=[(1 - p) / 2, p / 2, p / 2, (1 - p) / 2]))
        )
    gc = np.array([(s.count("G") + s.count("C")) / length for s in seqs])
    labels = ((gc - 0.5) / 0.15).astype(np.float32)[:, None]
    return LabelledSet(tuple(f"row{i}" for i in range(n)), tuple(seqs), labels)


def pearson_metric(labels: np.ndarray, outputs: np.ndarray) -> float:
    return float(np.corrcoef(labels[:, 0], outputs[:, 0])[0, 1])
