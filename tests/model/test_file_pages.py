"""Giving back checkpoint pages: the model's outputs never change, and the pages of re-laid-out
weights leave the process's resident memory."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from torch import nn

from hexamer.model import load_model
from hexamer.model.cpu import use_cpu_linears
from hexamer.model.file_pages import release_file_pages


def _logits(model: nn.Module) -> torch.Tensor:
    ids = torch.arange(1, 40)[None]
    with torch.inference_mode():
        return model(ids).logits


def _files(folder: Path) -> list[Path]:
    return sorted(folder.glob("*.safetensors"))


def test_pages_no_tensor_reads_are_given_back_and_outputs_stay(tiny_folder: Path) -> None:
    model, _ = load_model(tiny_folder)
    if use_cpu_linears(model) == "torch":
        pytest.skip("no CPU kernel re-lays the linears out here")
    before = _logits(model)
    assert release_file_pages(model, _files(tiny_folder)) > 0  # the dense linears' pages
    assert torch.equal(_logits(model), before)


def test_even_pages_a_tensor_still_reads_read_the_same_after(tiny_folder: Path) -> None:
    """Every page of the mapping, the live weights' too: they are read back from the file."""
    model, _ = load_model(tiny_folder)
    before = _logits(model)
    assert release_file_pages(nn.Module(), _files(tiny_folder)) > 0
    assert torch.equal(_logits(model), before)
    # the model's own pages are left alone (other models of this process map the file too)
    assert release_file_pages(model, _files(tiny_folder)) < release_file_pages(
        nn.Module(), _files(tiny_folder)
    )


def test_nothing_mapped_nothing_asked(tmp_path: Path) -> None:
    assert release_file_pages(nn.Module(), [tmp_path / "absent.safetensors"]) == 0
