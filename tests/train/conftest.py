"""Fixtures for the training tests."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.train.helpers import periodic_dna, write_fasta


@pytest.fixture(scope="session")
def dna_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Two learnable sequences (3,000 and 2,400 bp)."""
    root = tmp_path_factory.mktemp("dna")
    return write_fasta(root / "train.fa", {"chrA": periodic_dna(3000, 1), "chrB": periodic_dna(2400, 2)})
