"""Every test vector of tokenizer_fns.md §2.8 and the rules of §2, against the real Carbon vocabulary
(the Qwen3 BPE shipped with hexamer) and, relative to the DNA block, against a tiny one."""

from __future__ import annotations

import pytest

from hexamer.tokenizer import CarbonTokenizer

# llama.cpp's Carbon fixture (ids produced from the real vocabulary)
LCPP_FIX = [
    ("hello", [14990]),
    ("Hello world!", [9707, 1879, 0]),
    ("<dna>ATCGAT</dna>", [151669, 152105, 151670]),
    ("<dna>ATCGATCGTACG</dna>", [151669, 152105, 154563, 151670]),
    ("<dna>atcgat</dna>", [151669, 152105, 151670]),
    ("<dna>ATCGAN</dna>", [151669, 151671, 151670]),
    ("<dna>ATCGA</dna>", [151669, 152104, 151670]),
    ("<dna>ATCGATCG</dna>", [151669, 152105, 154488, 151670]),
    ("hi <dna>ATCGAT</dna>!", [6023, 220, 151669, 152105, 151670, 0]),
    ("<dna></dna>", [151669, 151670]),
    ("<dna>ATCGAT", [151669, 152105]),
    ("<dna>ATCGAT</dna> <dna>CGTACG</dna>\n", [151669, 152105, 151670, 220, 151669, 154563, 151670, 198]),
]


@pytest.mark.parametrize(("text", "expected"), LCPP_FIX)
def test_llama_cpp_fixture_real_vocab(real_tok: CarbonTokenizer, text: str, expected: list[int]) -> None:
    assert real_tok.encode(text) == expected


def test_cccccc_text_vs_dna(real_tok: CarbonTokenizer) -> None:
    assert real_tok.encode("CCCCCC") == [91443]
    assert real_tok.encode("<dna>CCCCCC</dna>") == [151669, 154402, 151670]
    vocab = real_tok.get_vocab()
    assert vocab["CCCCCC"] == 91443  # the BPE entry wins, as in the official get_vocab
    assert len(vocab) == 155_775
    assert len(real_tok) == real_tok.vocab_size == 155_776
    assert real_tok.eos_token_id == real_tok.pad_token_id == 151_643


# The DNA-side cases, as offsets from the first k-mer (+ marks for tags), valid for any base vocabulary.
B, E, OOV = "<dna>", "</dna>", "<oov>"
RELATIVE = [
    ("<dna>ATCGAT</dna>", [B, 433, E]),
    ("<dna>ATCGATCGTACG</dna>", [B, 433, 2891, E]),
    ("<dna>atcgat</dna>", [B, 433, E]),
    ("<dna>ATCGAN</dna>", [B, OOV, E]),
    ("<dna>ATCGA</dna>", [B, 432, E]),
    ("<dna>ATCGATCG</dna>", [B, 433, 2816, E]),
    ("<dna></dna>", [B, E]),
    ("<dna>ATCGAT", [B, 433]),
    # RLX unit tests
    ("<dna>ATCGATCGATCG", [B, 433, 2843]),
    ("<dna>ATCGATATC", [B, 433, 384]),
    ("<dna>ATCGATN", [B, 433, OOV]),
    ("<dna>NNNNNN", [B, OOV]),
    ("<dna>AT", [B, 256]),
    # derived from the official rules (tokenizer_fns.md §2.4, §2.8)
    ("<dna>  ACGTAC \n</dna>", [B, 722, E]),  # ends stripped
    ("<dna>ACGTAC\nGTACGT</dna>", [B, 722, OOV, 1024, E]),  # inner newline: <oov>, frame not re-synchronised
    ("</dna>", [E]),
    ("<dna>", [B]),
    ("<dna>acgtac</dna>", [B, 722, E]),
]


def expand(tok: CarbonTokenizer, spec: list[int | str]) -> list[int]:
    marks = {B: tok.dna_begin_id, E: tok.dna_end_id, OOV: tok.oov_token_id}
    return [marks[x] if isinstance(x, str) else tok.kmer_start + x for x in spec]


@pytest.mark.parametrize(("text", "spec"), RELATIVE)
def test_dna_rules_relative_tiny(tok: CarbonTokenizer, text: str, spec: list[int | str]) -> None:
    assert tok.encode(text) == expand(tok, spec)


@pytest.mark.parametrize(("text", "spec"), RELATIVE)
def test_dna_rules_relative_real(real_tok: CarbonTokenizer, text: str, spec: list[int | str]) -> None:
    assert real_tok.encode(text) == expand(real_tok, spec)


def test_stray_close_tag_makes_preceding_text_dna(real_tok: CarbonTokenizer) -> None:
    # ACGT</dna>hi -> [ACGTAA, </dna>, BPE("hi")]
    assert real_tok.encode("ACGT</dna>hi") == [real_tok.kmer_start + 722 - 2, 151670, *real_tok.encode("hi")]


def test_text_segments_are_not_stripped(real_tok: CarbonTokenizer) -> None:
    assert real_tok.encode("hi <dna>ATCGAT</dna>!")[:2] == [6023, 220]
    assert real_tok.encode(" <dna></dna> ") == [220, 151669, 151670, 220]


def test_text_split_matches_rlx_example(real_tok: CarbonTokenizer) -> None:
    ids = real_tok.encode("hello<dna>ATCG</dna>world")
    assert ids == [*real_tok.encode("hello"), 151669, 152104, 151670, *real_tok.encode("world")]  # ATCGAA


def test_qwen_special_tokens_in_text(real_tok: CarbonTokenizer) -> None:
    assert real_tok.encode("<|endoftext|>") == [151643]
    assert real_tok.encode("a<|im_start|>b") == [*real_tok.encode("a"), 151644, *real_tok.encode("b")]


def test_auto_dna_tags_wraps_only_untagged_text(real_tok: CarbonTokenizer) -> None:
    assert real_tok.encode("ATCGAT", auto_dna_tags=True) == [151669, 152105, 151670]
    assert real_tok.encode("x<dna>ATCGAT", auto_dna_tags=True) == [*real_tok.encode("x"), 151669, 152105]
    assert real_tok.encode("ATCGAT", auto_dna_tags=False) != [151669, 152105, 151670]


def test_unicode_upper_case_can_change_length(tok: CarbonTokenizer) -> None:
    # str.upper() turns 'ß' into 'SS': the chunk frame moves by one and the chunk is <oov>.
    assert tok.encode("<dna>ßACGTACGTAC</dna>") == expand(tok, [B, OOV, 722, E])  # SSACGT | ACGTAC
