"""The dinucleotide shuffle keeps what it promises (first and last base, every dinucleotide count)
and nothing more (the order changes, and it is a function of the seed)."""

from __future__ import annotations

import random
from collections import Counter

import pytest

from hexamer.demo.shuffle import dinucleotide_shuffle


def _pairs(s: str) -> Counter[str]:
    return Counter(s[i : i + 2] for i in range(len(s) - 1))


@pytest.mark.parametrize("seed", [0, 1, 2, 3])
def test_keeps_every_dinucleotide_count(seed: int) -> None:
    rng = random.Random(seed)
    seq = "".join(rng.choice("ACGT") for _ in range(3000)) + "AAAAAAAACGCGCG" + "GATTACA" * 20
    out = dinucleotide_shuffle(seq, seed)
    assert len(out) == len(seq) and out[0] == seq[0] and out[-1] == seq[-1]
    assert _pairs(out) == _pairs(seq)
    assert out != seq
    assert dinucleotide_shuffle(seq, seed) == out  # deterministic
    assert dinucleotide_shuffle(seq, seed + 10) != out


def test_walks_every_edge_even_with_skewed_graphs() -> None:
    # a vertex whose only exit is the final base, and runs of one base
    for seq in ["ACGTTTTTTTTA", "AAAAAAAAAC", "CA" * 50 + "G", "ACG"]:
        out = dinucleotide_shuffle(seq, 5)
        assert _pairs(out) == _pairs(seq) and out[0] == seq[0] and out[-1] == seq[-1]


def test_short_sequences_come_back_unchanged() -> None:
    assert dinucleotide_shuffle("", 0) == ""
    assert dinucleotide_shuffle("AC", 0) == "AC"
