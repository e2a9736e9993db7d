"""The DNA id layout against the published numbers (tokenizer_fns.md §1)."""

from __future__ import annotations

import pytest

from hexamer.tokenizer import DnaLayout

CARBON = DnaLayout(dna_start_id=151_669)


def test_carbon_totals() -> None:
    assert CARBON.vocab_size == 155_776
    assert CARBON.dna_vocab_size == 4_107
    assert CARBON.n_unused == 8
    assert (CARBON.begin_id, CARBON.end_id, CARBON.oov_id) == (151_669, 151_670, 151_671)
    assert (CARBON.kmer_start, CARBON.kmer_stop) == (151_672, 155_768)
    assert CARBON.dna_config() == {
        "k": 6,
        "dna_start_id": 151669,
        "dna_vocab_size": 4107,
        "dna_special_tokens": ["<dna>", "</dna>", "<oov>"],
        "auto_dna_tags": False,
    }


@pytest.mark.parametrize(
    ("kmer", "index", "token_id"),
    [
        ("AAAAAA", 0, 151672),
        ("ATCGAA", 432, 152104),
        ("ATCGAT", 433, 152105),
        ("TTTTTT", 1365, 153037),
        ("CGAAAA", 2816, 154488),
        ("CCCCCC", 2730, 154402),
        ("CGATCG", 2843, 154515),
        ("CGTACG", 2891, 154563),
        ("GGGGGG", 4095, 155767),
    ],
)
def test_worked_kmer_ids(kmer: str, index: int, token_id: int) -> None:
    assert CARBON.kmer_id(kmer) == token_id
    assert CARBON.kmers[index] == kmer
    assert CARBON.kmer_of(token_id) == kmer
    assert CARBON.dna_token_string(token_id) == kmer


def test_strings_of_the_block() -> None:
    assert CARBON.dna_token_string(151_669) == "<dna>"
    assert CARBON.dna_token_string(151_671) == "<oov>"
    assert CARBON.dna_token_string(155_768) == "<unused_0>"
    assert CARBON.dna_token_string(155_775) == "<unused_7>"
    with pytest.raises(ValueError, match="outside the DNA block"):
        CARBON.dna_token_string(155_776)


def test_layout_rounds_to_128_for_any_base() -> None:
    for base in (0, 1, 426, 1000, 151_669):
        layout = DnaLayout(dna_start_id=base)
        assert layout.vocab_size % 128 == 0
        assert 0 <= layout.n_unused < 128
        assert layout.vocab_size - layout.kmer_stop == layout.n_unused


def test_bad_layouts() -> None:
    with pytest.raises(ValueError, match="k must be"):
        DnaLayout(dna_start_id=10, k=0)
    with pytest.raises(ValueError, match="dna_special_tokens"):
        DnaLayout(dna_start_id=10, special_tokens=("<a>", "<b>", "<c>"))
    with pytest.raises(ValueError, match="not one of A, C, G, T"):
        CARBON.kmer_id("ACGTAN")
