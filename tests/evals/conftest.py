"""Fixtures for the eval tests: a tiny Carbon and real DNA from the shipped genome slices."""

from __future__ import annotations

from pathlib import Path

import pysam
import pytest

from hexamer import Carbon

DNA_DIR = Path(__file__).resolve().parents[2] / "hexamer" / "data" / "dna"


@pytest.fixture(scope="session")
def human_dna() -> str:
    """100 kbp of human chr20 (GRCh37), upper case, no N."""
    with pysam.FastxFile(str(DNA_DIR / "human_chr20.fa.gz")) as fx:
        return next(iter(fx)).sequence.upper()


@pytest.fixture(scope="session")
def lambda_dna() -> str:
    with pysam.FastxFile(str(DNA_DIR / "lambda_phage.fa.gz")) as fx:
        return next(iter(fx)).sequence.upper()


@pytest.fixture(scope="session")
def carbon(tiny_folder: Path) -> Carbon:
    return Carbon.from_pretrained(tiny_folder, max_batch_size=8)
