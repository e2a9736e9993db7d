"""A tiny model with a 40-token context, so a few hundred bases already need windows."""

from __future__ import annotations

from pathlib import Path

import pytest

from hexamer import Carbon
from hexamer.synthetic import build_carbon_folder

CONTEXT = 40  # tokens: 39 DNA tokens (234 bp) after <dna>
DATA = Path(__file__).resolve().parents[1] / "data" / "vep"
CHR20 = DATA / "chr20_slice.fa.gz"  # bgzip + fai + gzi; bases 1-60,000 are the N telomere gap
OOV_FA = DATA / "oov.fa"  # plain + fai; contig t has NNNNN at 0-based 1,500-1,504 and an N at 2,200


@pytest.fixture(scope="session")
def short_folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_carbon_folder(tmp_path_factory.mktemp("short") / "model", max_position_embeddings=CONTEXT)


@pytest.fixture(scope="session")
def short_model(short_folder: Path) -> Carbon:
    return Carbon.from_pretrained(short_folder)
