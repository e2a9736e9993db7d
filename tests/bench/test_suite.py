"""The DNA prompt suite is deterministic and each case has the property it is named after;
valid-DNA accounting matches hand counts."""

from __future__ import annotations

import pytest

from hexamer.bench.suite import (
    CASES,
    PROMPT_BP,
    TATA_BOX,
    kmer_ids_to_text,
    suite_prompt,
    suite_prompts,
    valid_dna,
)


def _frac(seq: str, letters: str) -> float:
    return sum(seq.count(b) for b in letters) / len(seq)


def test_seven_cases_of_1080_acgt_and_deterministic() -> None:
    assert list(CASES) == [
        "balanced",
        "CpG-rich",
        "AT-rich",
        "GC-rich",
        "ORF-like",
        "TATA-box-like",
        "CAG-repeat",
    ]
    for case in CASES:
        seq = suite_prompt(case).sequence
        assert len(seq) == PROMPT_BP == 1080 and len(seq) % 6 == 0
        assert set(seq) <= set("ACGT")
        assert suite_prompt(case).sequence == seq
    assert suite_prompt("balanced", seed=1).sequence != suite_prompt("balanced").sequence


def test_case_properties() -> None:
    s = {c: suite_prompt(c).sequence for c in CASES}
    assert 0.45 < _frac(s["balanced"], "GC") < 0.55
    assert _frac(s["AT-rich"], "AT") > 0.7
    assert _frac(s["GC-rich"], "GC") > 0.7
    cpg = s["CpG-rich"]
    observed = sum(cpg[i : i + 2] == "CG" for i in range(len(cpg) - 1))
    expected = cpg.count("C") * cpg.count("G") / len(cpg)
    assert observed / expected > 0.6 and _frac(cpg, "GC") > 0.5  # CpG-island criteria
    orf = s["ORF-like"]
    codons = [orf[i : i + 3] for i in range(0, len(orf), 3)]
    assert codons[0] == "ATG" and codons[-1] == "TAA"
    assert not {"TAA", "TAG", "TGA"} & set(codons[:-1])
    tata = s["TATA-box-like"]
    assert tata[1080 - 30 - len(TATA_BOX) : 1080 - 30] == TATA_BOX
    assert s["CAG-repeat"] == "CAG" * 360


def test_batch_prompts_cycle_cases_without_duplicates() -> None:
    prompts = suite_prompts(16, 60)
    assert [p.case for p in prompts[:8]] == [*CASES, "balanced"]
    random_cases = [p.sequence for p in prompts if p.case != "CAG-repeat"]
    assert len(set(random_cases)) == len(random_cases)
    with pytest.raises(ValueError, match="unknown prompt case"):
        suite_prompt("Z-DNA")


@pytest.mark.parametrize(
    ("output", "requested", "valid", "region", "exact"),
    [
        ("ACGTAC" * 2, 12, 12, 12, True),
        ("ACGTAC</dna>", 12, 6, 6, False),  # stopped early: 6 of 12
        ("ACGTACGGN", 9, 8, 9, False),  # N is not a valid base
        ("acgtAC", 6, 2, 6, False),  # lower case is not valid
        ("ACGT<oov>ACGT", 8, 4, 4, False),  # a tag ends the DNA region
        ("ACGT hello", 8, 4, 4, False),  # text ends it
        ("ACGTACGT", 6, 6, 8, False),  # extra bases are not counted (and not exact)
        ("", 6, 0, 0, False),
    ],
)
def test_valid_dna(output: str, requested: int, valid: int, region: int, exact: bool) -> None:
    v = valid_dna(output, requested)
    assert (v.valid_bp, v.region_bp, v.exact) == (valid, region, exact)
    assert v.fraction == pytest.approx(valid / requested)


def test_article_cag_example() -> None:
    # the article: 180 tokens decoded to 963 A/C/G/T characters -> 89.2% of 1,080 bp
    out = "CAG" * 321 + "<|endoftext|>" + "x" * 50
    assert valid_dna(out, 1080).fraction == pytest.approx(963 / 1080)


def test_kmer_ids_to_text() -> None:
    kmers = ("AAAAAA", "AAAAAT")
    assert kmer_ids_to_text([10, 11, 5, 10], 10, kmers, lambda i: f"<{i}>") == "AAAAAAAAAAAT<5>AAAAAA"
