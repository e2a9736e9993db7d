"""hexamer.backend.inputs: the one place prompts and sequences become token ids."""

from __future__ import annotations

import numpy as np
import pytest

from hexamer.backend.inputs import dna_inputs, full_prompt, next_base_ids, parse_prompt, sequence_problem
from hexamer.tokenizer import CarbonTokenizer


def test_dna_inputs_match_the_tokenizer(tok: CarbonTokenizer) -> None:
    seq = "ACGTACGGTACCATNNACG"
    got = dna_inputs(tok, seq, "", 0, max_prompt_tokens=100, context_length=100)
    assert got.ids == tok.encode(f"<dna>{seq}")
    assert got.start == 1 and got.content == seq
    assert list(got.n_real) == [6, 6, 0, 1]
    assert got.targets[0] == tok.encode("<dna>ACGTAC")[1] - tok.layout.kmer_start
    prefixed = dna_inputs(tok, seq, "<mammalian_species>", 0, max_prompt_tokens=100, context_length=100)
    assert prefixed.start == len(tok.encode("<mammalian_species>")) + 1


def test_dna_inputs_refuse_what_is_not_dna_or_too_long(tok: CarbonTokenizer) -> None:
    with pytest.raises(ValueError, match="sequence 3: invalid character 'X'"):
        dna_inputs(tok, "ACGX", "", 3, max_prompt_tokens=100, context_length=100)
    assert (
        dna_inputs(tok, "ACGX", "", 3, max_prompt_tokens=100, context_length=100, validate=False).n_real[0]
        == 0
    )
    with pytest.raises(ValueError, match="less the one completion token"):
        dna_inputs(tok, "A" * 60, "", 0, max_prompt_tokens=9, context_length=10)
    with pytest.raises(ValueError, match="is empty"):
        dna_inputs(tok, "  ", "", 0, max_prompt_tokens=9, context_length=10)
    assert sequence_problem("ACGTRYN") is None and "position 3" in (sequence_problem("AC!") or "")


def test_parse_prompt_forces_the_partial_last_kmer(tok: CarbonTokenizer) -> None:
    p = parse_prompt(tok, full_prompt("ACGTACGG", "<mammalian_species>"), 0)
    assert p.ids == tok.encode("<mammalian_species><dna>ACGTAC") and p.forced == "GG"
    assert full_prompt("<dna>ACG", "<x>") == "<dna>ACG"
    with pytest.raises(ValueError, match="prompt 2 ends with a partial 6-mer 'NG'"):
        parse_prompt(tok, "ACGTACNG", 2)
    with pytest.raises(ValueError, match="remove the final </dna>"):
        parse_prompt(tok, "<dna>ACGTAC</dna>", 0)


def test_next_base_ids(tok: CarbonTokenizer) -> None:
    assert next_base_ids(tok.layout, "ACGTACNNNNNN") == tok.encode("<dna>ACGTACNNNNNN")
    assert np.array_equal(next_base_ids(tok.layout, ""), [tok.layout.begin_id])
