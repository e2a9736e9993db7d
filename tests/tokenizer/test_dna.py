"""The vectorised k-mer codec against a plain per-character restatement of the rules."""

from __future__ import annotations

import itertools
import random

import numpy as np
import pytest

from hexamer.tokenizer import DnaLayout, decode_kmers, encode_dna, encode_kmers, kmer_digits

LAYOUT = DnaLayout(dna_start_id=151_669)
KMER_IDS = {"".join(p): 151_672 + i for i, p in enumerate(itertools.product("ATCG", repeat=6))}


def plain(seq: str) -> tuple[list[int], list[int]]:
    seq = seq.upper()
    ids, real = [], []
    for i in range(0, len(seq), 6):
        chunk = seq[i : i + 6]
        n = len(chunk)
        tid = KMER_IDS.get(chunk + "A" * (6 - n), 151_671)
        ids.append(tid)
        real.append(0 if tid == 151_671 else n)
    return ids, real


@pytest.mark.parametrize("length", range(51))
def test_every_length_0_to_50(length: int) -> None:
    rng = random.Random(length)
    seq = "".join(rng.choice("ACGTacgt") for _ in range(length))
    enc = encode_dna(seq, LAYOUT)
    ids, real = plain(seq)
    assert enc.ids.tolist() == ids
    assert enc.n_real.tolist() == real
    assert enc.n_bases == length
    assert enc.pad_bases == (-length) % 6
    # round trip: decode gives the upper-cased bases plus the A pads
    assert decode_kmers(enc.ids, LAYOUT) == seq.upper() + "A" * enc.pad_bases


def test_random_with_invalid_characters() -> None:
    rng = random.Random(1)
    for _ in range(200):
        seq = "".join(rng.choice("ACGTNacgtn-*. \n") for _ in range(rng.randrange(0, 80)))
        enc = encode_dna(seq, LAYOUT)
        ids, real = plain(seq)
        assert enc.ids.tolist() == ids
        assert enc.n_real.tolist() == real


def test_tail_oov_has_mask_zero() -> None:
    enc = encode_dna("ACGTACGN", LAYOUT)
    assert enc.ids.tolist() == [KMER_IDS["ACGTAC"], 151_671]
    assert enc.n_real.tolist() == [6, 0]


def test_non_ascii_is_oov_and_unicode_upper_applies() -> None:
    assert encode_kmers("ACGTAé", LAYOUT).tolist() == [151_671]
    # 'ß'.upper() == 'SS' shifts the frame, exactly as Python's str.upper() in the official code
    assert encode_kmers("ßACGTACGTAC", LAYOUT).tolist() == [151_671, KMER_IDS["ACGTAC"]]


def test_bytes_input_and_large_input() -> None:
    rng = np.random.default_rng(0)
    seq = np.frombuffer(b"ACGT", dtype=np.uint8)[rng.integers(0, 4, 600_001)].tobytes()
    ids = encode_kmers(seq, LAYOUT)
    assert len(ids) == 100_001
    assert decode_kmers(ids, LAYOUT)[:600_001] == seq.decode()


def test_decode_rejects_non_kmers() -> None:
    with pytest.raises(ValueError, match="not a 6-mer id"):
        decode_kmers([151_671], LAYOUT)
    assert decode_kmers([], LAYOUT) == ""


def test_kmer_digits_atcg_order() -> None:
    digits = kmer_digits(np.array([KMER_IDS["ATCGAT"], KMER_IDS["GGGGGG"]]), LAYOUT)
    assert digits.tolist() == [[0, 1, 2, 3, 0, 1], [3, 3, 3, 3, 3, 3]]


@pytest.mark.parametrize("k", [1, 3, 4])
def test_other_k(k: int) -> None:
    layout = DnaLayout(dna_start_id=10, k=k)
    seq = "ACGTTGCA"
    ids = encode_kmers(seq, layout)
    assert len(ids) == -(-len(seq) // k)
    assert decode_kmers(ids, layout)[: len(seq)] == seq


def test_oov_base_count_matches_a_plain_count() -> None:
    rng = random.Random(7)
    for _ in range(200):
        seq = "".join(rng.choice("ACGTN") for _ in range(rng.randrange(0, 40)))
        plain_lost = sum(
            len(seq[i : i + 6]) for i in range(0, len(seq), 6) if set(seq[i : i + 6]) - set("ACGT")
        )
        assert encode_dna(seq, LAYOUT).n_oov_bases == plain_lost
