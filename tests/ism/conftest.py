"""Fixtures for the ISM tests: the tiny random model and the committed VEP test FASTAs."""

from __future__ import annotations

from pathlib import Path

import pytest

from hexamer import Carbon

DATA = Path(__file__).resolve().parents[1] / "data" / "vep"
FASTA = DATA / "chr20_slice.fa.gz"  # contig "20"; real sequence from 60,001
OOV_FASTA = DATA / "oov.fa"  # contig "t": NNNNN at 1-based 1,501-1,505, N at 2,201
SLICE_VCF = DATA / "chr20_slice.vcf"
#: small windows and contexts keep every test at a few seconds on the tiny model
WINDOW = {"window": 240}
NEXT_BASE = {"recipe": "next_base", "context": 240, "context_grid": 60}


@pytest.fixture(scope="session")
def carbon(tiny_folder: Path) -> Carbon:
    return Carbon.from_pretrained(tiny_folder)
