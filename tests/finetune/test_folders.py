import json
import shutil
from pathlib import Path

import pytest
import torch

from hexamer.finetune.folders import is_head_folder, load_classifier, new_classifier, save_classifier
from hexamer.finetune.head import HeadSettings
from hexamer.finetune.task import TaskSpec
from hexamer.model import load_model

transformers = pytest.importorskip("transformers")

MULTI = TaskSpec("multiclass", ("y",), ("a", "b", "c"))


def _hf_logits(hf_model, rows) -> torch.Tensor:
    mask = rows.mask if rows.mask is not None else torch.ones_like(rows.ids, dtype=torch.bool)
    with torch.no_grad():
        return hf_model(input_ids=rows.ids, attention_mask=mask.long()).logits


def test_hexamer_folder_gives_same_logits_in_transformers(tiny_folder: Path, tmp_path: Path, dna):
    model = new_classifier(tiny_folder, HeadSettings(MULTI), seed=3)
    folder = save_classifier(model, tmp_path / "head")
    config = json.loads((folder / "config.json").read_text())
    assert config["architectures"] == ["LlamaForSequenceClassification"]
    assert config["id2label"] == {"0": "a", "1": "b", "2": "c"} and config["label2id"]["c"] == 2
    assert config["problem_type"] == "single_label_classification"
    assert config["pad_token_id"] == model.pad_token_id
    for name in ("tokenizer.json", "dna_config.json", "tokenizer_config.json", "tokenizer.py"):
        assert (folder / name).is_file(), name
    rows = model.encode(dna)
    assert rows.mask is not None and rows.side == "right"  # a ragged batch: padding is exercised
    with torch.no_grad():
        ours = model(rows.ids, rows.mask)
    hf = transformers.AutoModelForSequenceClassification.from_pretrained(folder, dtype=torch.float32)
    assert hf.config.num_labels == 3
    torch.testing.assert_close(ours, _hf_logits(hf, rows), atol=1e-4, rtol=0)
    # hexamer reads its own folder back to the same logits
    again = load_classifier(folder)
    with torch.no_grad():
        torch.testing.assert_close(again(rows.ids, rows.mask), ours, atol=1e-6, rtol=0)
    assert again.settings == model.settings


def test_transformers_folder_predicts_the_same_in_hexamer(tiny_folder: Path, tmp_path: Path, dna):
    torch.manual_seed(0)
    hf = transformers.LlamaForSequenceClassification.from_pretrained(
        tiny_folder, num_labels=1, problem_type="regression", dtype=torch.float32
    )
    hf.save_pretrained(tmp_path / "hf")
    with pytest.raises(FileNotFoundError, match="tokenizer"):
        load_classifier(tmp_path / "hf")
    for name in ("tokenizer.json", "dna_config.json", "tokenizer_config.json", "special_tokens_map.json"):
        shutil.copy(tiny_folder / name, tmp_path / "hf" / name)
    model = load_classifier(tmp_path / "hf")
    assert model.task.kind == "regression" and model.task.num_labels == 1
    rows = model.encode(dna)
    with torch.no_grad():
        torch.testing.assert_close(model(rows.ids, rows.mask), _hf_logits(hf, rows), atol=1e-4, rtol=0)


def test_mean_pooling_and_layers(tiny_folder: Path, dna):
    mean = new_classifier(tiny_folder, HeadSettings(MULTI, pooling="mean", layer=1))
    rows = mean.encode(dna)
    with torch.no_grad():
        feats = mean.features(rows.ids, rows.mask)
        out = mean.backbone(rows.ids, attention_mask=rows.mask, logits_at="none", return_layer_hidden=True)
    n = rows.lengths[1]
    torch.testing.assert_close(feats[1], out.layer_hidden[1][1, 1 : n - 1].mean(0))
    with pytest.raises(ValueError, match="out of range"):
        new_classifier(tiny_folder, HeadSettings(MULTI, layer=3))
    with pytest.raises(ValueError, match="pooling"):
        HeadSettings(MULTI, pooling="max")


def test_folder_kinds_are_told_apart(tiny_folder: Path, tmp_path: Path):
    model = new_classifier(tiny_folder, HeadSettings(TaskSpec("binary", ("y",))))
    folder = save_classifier(model, tmp_path / "head")
    assert is_head_folder(folder) and not is_head_folder(tiny_folder)
    with pytest.raises(ValueError, match="head folder"):
        load_model(folder)
    with pytest.raises(ValueError, match="head folder"):
        new_classifier(folder, HeadSettings(TaskSpec("binary", ("y",))))
    with pytest.raises(ValueError, match="not a sequence-classification head folder"):
        load_classifier(tiny_folder)
    # a head folder whose config.json does not say so is still told apart by its weights
    config = json.loads((folder / "config.json").read_text())
    config.pop("architectures")
    (folder / "config.json").write_text(json.dumps(config))
    with pytest.raises(ValueError, match=r"score\.weight"):
        load_model(folder)


def test_too_long_sequence_is_refused(tiny_folder: Path):
    model = new_classifier(tiny_folder, HeadSettings(TaskSpec("regression", ("y",))))
    with pytest.raises(ValueError, match="context"):
        model.encode(["A" * 6 * 2048])
