"""A head served on the language model's own decoder: recognised only when the backbone tensors
are the model's, and then predicting what the head loaded on its own predicts."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch
from safetensors.torch import load_file, save_file

from hexamer.finetune.apply import Predictor
from hexamer.finetune.best_folder import save_linked_head
from hexamer.finetune.folders import new_classifier, save_classifier, weight_files
from hexamer.finetune.head import HeadSettings
from hexamer.finetune.shared import load_served_head, same_backbone
from hexamer.finetune.task import TaskSpec
from hexamer.model import load_model

REG = TaskSpec("regression", ("y",))
SEQS = ["ACGTACGTAAGGCTAGCTAGGATCGA", "GGCCTTAAGGACGTAC", "TTTTAAAACCCCGGGGAT"]


def test_a_copied_or_linked_backbone_is_shared(tiny_folder: Path, tmp_path: Path) -> None:
    model = new_classifier(tiny_folder, HeadSettings(REG), seed=1)
    copied = save_classifier(model, tmp_path / "copied")  # a copy: compared tensor by tensor
    linked = save_linked_head(model, tmp_path / "linked", weight_files(tiny_folder))  # hard links
    lm, _ = load_model(tiny_folder)
    for folder in (copied, linked):
        assert same_backbone(folder, tiny_folder, torch.float32)
        predictor, shared = load_served_head(folder, lm, tiny_folder, device="cpu")
        assert (
            shared
            and predictor.model.backbone.layers is lm.layers
            and predictor.model.backbone.lm_head is None
        )
        np.testing.assert_allclose(
            predictor.predict(SEQS), Predictor.load(folder).predict(SEQS), rtol=1e-5, atol=1e-6
        )
    assert lm.lm_head is None or lm.lm_head.weight.numel()  # the served model keeps what it had


def test_a_changed_backbone_loads_in_full(tiny_folder: Path, tmp_path: Path) -> None:
    model = new_classifier(tiny_folder, HeadSettings(REG), seed=1)
    folder = save_classifier(model, tmp_path / "head")
    tensors = load_file(str(folder / "model.safetensors"))
    tensors["model.norm.weight"] = tensors["model.norm.weight"] + 1e-3  # a fine-tuned backbone
    save_file(tensors, str(folder / "model.safetensors"))
    lm, _ = load_model(tiny_folder)
    assert not same_backbone(folder, tiny_folder, torch.float32)
    predictor, shared = load_served_head(folder, lm, tiny_folder, device="cpu")
    assert not shared and predictor.model.backbone.layers is not lm.layers
    predictor, shared = load_served_head(folder, lm, None, device="cpu")  # no folder to compare with
    assert not shared
