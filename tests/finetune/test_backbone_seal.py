"""A head folder whose backbone is hard-linked to the base model's file refuses to load once that
file is rewritten in place, and loads as before when it was only touched or replaced by a new file."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import numpy as np
import pytest
import torch
from safetensors.torch import load_file, save_file

from hexamer.finetune.apply import Predictor
from hexamer.finetune.backbone_seal import SEAL
from hexamer.finetune.best_folder import save_linked_head
from hexamer.finetune.folders import load_classifier, new_classifier, weight_files
from hexamer.finetune.head import HeadSettings
from hexamer.finetune.shared import load_head_on
from hexamer.finetune.task import TaskSpec
from hexamer.model import load_model

REG = TaskSpec("regression", ("y",))
SEQS = ["ACGTACGTAAGGCTAGCTAGGATCGA", "GGCCTTAAGGACGTAC"]


def _linked(tiny_folder: Path, tmp_path: Path) -> tuple[Path, Path, np.ndarray]:
    """A private copy of the base model, a head folder linked to it, and the head's predictions."""
    base = tmp_path / "base"
    shutil.copytree(tiny_folder, base)
    model = new_classifier(base, HeadSettings(REG), seed=1)
    head = save_linked_head(model, tmp_path / "head", weight_files(base))
    return base, head, Predictor.load(head).predict(SEQS)


def test_the_seal_names_each_linked_file(tiny_folder: Path, tmp_path: Path) -> None:
    base, head, _ = _linked(tiny_folder, tmp_path)
    files = json.loads((head / SEAL).read_text(encoding="utf-8"))["files"]
    linked = [f.name for f in weight_files(head) if f.name != "score.safetensors"]
    assert sorted(files) == sorted(linked)
    for name, seal in files.items():
        assert os.path.samefile(head / name, base / "model.safetensors")
        assert seal["size"] == os.path.getsize(head / name) and len(seal["sha256"]) == 64


def test_a_base_rewritten_in_place_is_refused(tiny_folder: Path, tmp_path: Path) -> None:
    base, head, _ = _linked(tiny_folder, tmp_path)
    weights = base / "model.safetensors"
    tensors = load_file(str(weights))
    tensors["model.norm.weight"] = tensors["model.norm.weight"] + 0.5  # a retrained base ...
    save_file(tensors, str(tmp_path / "retrained.safetensors"), metadata={"format": "pt"})
    shutil.copyfile(tmp_path / "retrained.safetensors", weights)  # `cp` over it: the same inode
    assert os.path.samefile(weights, next(f for f in weight_files(head) if f.name.startswith("backbone")))
    with pytest.raises(ValueError, match="changed after this head was fit"):
        load_classifier(head)
    with pytest.raises(ValueError, match="changed after this head was fit"):
        Predictor.load(head)
    lm, _ = load_model(base)
    with pytest.raises(ValueError, match="changed after this head was fit"):
        load_head_on(head, lm, base)  # the same inode would otherwise count as the same backbone


def test_the_same_bytes_under_a_new_time_or_a_replaced_base_still_load(
    tiny_folder: Path, tmp_path: Path
) -> None:
    base, head, before = _linked(tiny_folder, tmp_path)
    weights = base / "model.safetensors"
    os.utime(weights, ns=(1, 1))  # touched: hashed again, same bytes
    np.testing.assert_allclose(Predictor.load(head).predict(SEQS), before, rtol=0, atol=0)
    tensors = load_file(str(weights))
    tensors["model.norm.weight"] = tensors["model.norm.weight"] + 0.5
    save_file(tensors, str(base / "new.safetensors"), metadata={"format": "pt"})
    os.replace(base / "new.safetensors", weights)  # a new file renamed over: the link keeps the old
    np.testing.assert_allclose(Predictor.load(head).predict(SEQS), before, rtol=0, atol=0)


def test_a_missing_or_unreadable_seal_entry_is_named(tiny_folder: Path, tmp_path: Path) -> None:
    _, head, _ = _linked(tiny_folder, tmp_path)
    seal = json.loads((head / SEAL).read_text(encoding="utf-8"))
    name = next(iter(seal["files"]))
    (head / SEAL).write_text(json.dumps({"files": {"../x.safetensors": seal["files"][name]}}))
    with pytest.raises(ValueError, match="is missing"):
        load_classifier(head)
    (head / SEAL).write_text(json.dumps({"files": {name: {"size": "big"}}}))
    with pytest.raises(ValueError, match="not a backbone seal"):
        load_classifier(head, dtype=torch.float32)
