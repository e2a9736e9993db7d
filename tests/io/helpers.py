"""Random sequence records for the reader and writer tests (seeded, so every run is the same)."""

from __future__ import annotations

import random


def random_dna(rng: random.Random, n: int) -> str:
    return "".join(rng.choices("ACGT", k=n))


def random_records(seed: int, count: int, max_len: int, prefix: str) -> list[tuple[str, str]]:
    """``count`` records ``(prefix0, DNA of 1..max_len bp)``, ``(prefix1, ...)``, ..."""
    rng = random.Random(seed)
    return [(f"{prefix}{i}", random_dna(rng, rng.randint(1, max_len))) for i in range(count)]
