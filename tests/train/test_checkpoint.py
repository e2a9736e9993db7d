"""Training checkpoints read back: non-finite weights or optimizer moments are refused on resume,
naming the file and tensor, before a single step runs on them."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file, save_file

from hexamer.model.finite import NonFiniteWeightsError
from hexamer.train import train
from hexamer.train.checkpoint import OPTIMIZER_FILE, list_checkpoints
from tests.train.helpers import tiny_config


@pytest.mark.parametrize("file", ["model.safetensors", OPTIMIZER_FILE])
def test_resume_refuses_non_finite_checkpoint_tensors(dna_file: Path, tmp_path: Path, file: str) -> None:
    train(tiny_config(dna_file, tmp_path / "run", steps=4, stop_at=2), progress=False)
    path = list_checkpoints(tmp_path / "run")[-1] / file
    tensors = load_file(str(path))
    name = next(n for n, t in tensors.items() if t.is_floating_point() and t.numel() > 1)
    tensors[name] = torch.full_like(tensors[name], float("nan"))
    save_file(tensors, str(path), metadata={"format": "pt"})
    with pytest.raises(NonFiniteWeightsError, match=rf"'{name}' in .*{file} has \d+ NaN values"):
        train(tiny_config(dna_file, tmp_path / "run", steps=4, resume=True), progress=False)
