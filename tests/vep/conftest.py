"""Fixtures for the VEP tests: the tiny random model and the chr20 test slice (tests/data/vep)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import torch

from hexamer import Carbon

DATA = Path(__file__).resolve().parents[1] / "data" / "vep"
FASTA = DATA / "chr20_slice.fa.gz"
SLICE_VCF = DATA / "chr20_slice.vcf"
EDGE_VCF = DATA / "edge_cases.vcf"
MALFORMED_VCF = DATA / "malformed.vcf"


@pytest.fixture(scope="package", autouse=True)
def one_thread() -> Iterator[None]:
    """The tiny model's ops are far too small for two threads; one is faster and steadier on a busy
    machine (OpenMP threads spin-wait when another process holds a core)."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.fixture(scope="session")
def carbon(tiny_folder: Path) -> Carbon:
    return Carbon.from_pretrained(tiny_folder)
