"""Fixtures for the VEP tests: the tiny random model and the chr20 test slice (tests/data/vep)."""

from __future__ import annotations

from pathlib import Path

import pytest

from hexamer import Carbon

DATA = Path(__file__).resolve().parents[1] / "data" / "vep"
FASTA = DATA / "chr20_slice.fa.gz"
SLICE_VCF = DATA / "chr20_slice.vcf"
EDGE_VCF = DATA / "edge_cases.vcf"
MALFORMED_VCF = DATA / "malformed.vcf"
UNREADABLE_VCF = DATA / "unreadable_fields.vcf"
SAUREUS_FASTA = DATA / "saureus_nctc8325_slice.fa.gz"
SAUREUS_VCF = DATA / "saureus_rn4220.vcf"
REF_EQUALS_ALT_VCF = DATA / "ref_equals_alt.vcf"
MALFORMED_NUMBERS_VCF = DATA / "malformed_numbers.vcf"


@pytest.fixture(scope="session")
def carbon(tiny_folder: Path) -> Carbon:
    return Carbon.from_pretrained(tiny_folder)
