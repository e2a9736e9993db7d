"""Fixtures for the training tests."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import torch

from tests.train.helpers import periodic_dna, write_fasta


@pytest.fixture(scope="session")
def dna_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Two learnable sequences (3,000 and 2,400 bp)."""
    root = tmp_path_factory.mktemp("dna")
    return write_fasta(root / "train.fa", {"chrA": periodic_dna(3000, 1), "chrB": periodic_dna(2400, 2)})


@pytest.fixture(autouse=True)
def one_thread() -> Iterator[None]:
    """Tiny models run fastest on one thread, and a busy machine makes two threads spin for ms."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)
