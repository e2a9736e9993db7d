"""Shared fixtures: Carbon-format folders built locally (nothing is downloaded)."""

from __future__ import annotations

from pathlib import Path

import pytest

from hexamer.testing import build_carbon_folder
from hexamer.tokenizer import CarbonTokenizer


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
