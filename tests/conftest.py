"""Shared fixtures: Carbon-format folders built locally (nothing is downloaded)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import torch

from hexamer.synthetic import build_carbon_folder
from hexamer.synthetic.vcf import add_vcf_records, write_random_vcf
from hexamer.tokenizer import CarbonTokenizer

VEP_DATA = Path(__file__).resolve().parent / "data" / "vep"


@pytest.fixture(scope="session", autouse=True)
def one_thread() -> Iterator[None]:
    """Test models are far too small for two threads; one is faster and steadier on a busy machine
    (OpenMP threads spin-wait when another process holds a core). Tests that need more set it."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.fixture(scope="session")
def tiny_folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Tiny BPE + DNA block + random 2-layer Llama weights."""
    return build_carbon_folder(tmp_path_factory.mktemp("tiny") / "model")


@pytest.fixture(scope="session")
def real_vocab_folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The real Carbon vocabulary (Qwen3 BPE, DNA block at 151,669), no weights."""
    return build_carbon_folder(tmp_path_factory.mktemp("real") / "model", bpe="qwen3", weights=False)


@pytest.fixture(scope="session")
def tok(tiny_folder: Path) -> CarbonTokenizer:
    return CarbonTokenizer.from_pretrained(tiny_folder)


@pytest.fixture(scope="session")
def real_tok(real_vocab_folder: Path) -> CarbonTokenizer:
    return CarbonTokenizer.from_pretrained(real_vocab_folder)


@pytest.fixture(scope="session")
def job_vcf(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A VEP job: 24 sites of 1-2 SNV ALTs on the chr20 slice plus the real edge cases (malformed,
    symbolic, unknown contig...), enough records for several work units or shards."""
    path = tmp_path_factory.mktemp("vcf") / "job.vcf"
    fasta = VEP_DATA / "chr20_slice.fa.gz"
    write_random_vcf(fasta, path, n_sites=24, alts_per_site=2, region=("20", 300_000, 330_000), seed=5)
    add_vcf_records(path, VEP_DATA / "edge_cases.vcf")
    return path


@pytest.fixture(scope="session")
def overflow_folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The tiny model with finite weights (it loads) whose every output is NaN (a float32 overflow):
    what the run-time ``failed`` statuses of non-finite outputs are tested with."""
    from hexamer.testing import build_overflowing_folder

    return build_overflowing_folder(tmp_path_factory.mktemp("overflow") / "model")
