"""Best-checkpoint folders: a probe's head beside hard links to the unchanged backbone, a LoRA
run's adapter at each improvement and its merged folder once, both loadable by hexamer and
transformers."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file, save_file

from hexamer.finetune import best_folder
from hexamer.finetune.best_folder import BACKBONE_STORE, BestWriter, frozen_backbone_files
from hexamer.finetune.fit import fit
from hexamer.finetune.folders import load_classifier, new_classifier, weight_files
from hexamer.finetune.head import HeadSettings
from hexamer.finetune.lora import LoraOptions, load_adapter, merge_lora
from hexamer.finetune.options import FitOptions
from hexamer.finetune.task import TaskSpec
from hexamer.synthetic import build_carbon_folder
from tests.finetune.conftest import gc_set, pearson_metric

REG = TaskSpec("regression", ("gc",))


def _inode(path: Path) -> int:
    return os.stat(path).st_ino


def _logits(folder: Path, seqs: tuple[str, ...]) -> torch.Tensor:
    model = load_classifier(folder)
    rows = model.encode(list(seqs))
    with torch.no_grad():
        return model(rows.ids, rows.mask)


def test_a_probe_links_the_base_backbone_and_loads_in_transformers(tiny_folder: Path, tmp_path: Path) -> None:
    transformers = pytest.importorskip("transformers")
    train, valid = gc_set(24, 30, seed=0), gc_set(12, 30, seed=1)
    options = FitOptions(method="probe", pooling="last", epochs=3, batch_size=8, lr=0.03, eval_every=1)
    result = fit(tiny_folder, train, valid, REG, options, tmp_path / "run", metric=pearson_metric)
    best = result.best_folder
    files = sorted(p.name for p in best.glob("*.safetensors"))
    assert (
        files == ["backbone-00001.safetensors", "score.safetensors"]
        and not (best / "model.safetensors").exists()
    )
    assert _inode(best / "backbone-00001.safetensors") == _inode(tiny_folder / "model.safetensors")  # no copy
    assert not (tmp_path / "run" / BACKBONE_STORE).exists()
    ours = _logits(best, valid.sequences)
    hf = transformers.AutoModelForSequenceClassification.from_pretrained(best)
    model = load_classifier(best)
    rows = model.encode(list(valid.sequences))
    with torch.no_grad():
        theirs = hf(input_ids=rows.ids, attention_mask=None if rows.mask is None else rows.mask.long()).logits
    torch.testing.assert_close(theirs, ours, atol=1e-4, rtol=0)


def test_each_improvement_writes_only_the_head(tiny_folder: Path, tmp_path: Path, monkeypatch) -> None:
    model = new_classifier(tiny_folder, HeadSettings(REG), seed=0)
    writer = BestWriter(model, tmp_path, FitOptions(method="probe"), tiny_folder)
    writer.save()
    first = _inode(tmp_path / "best" / "score.safetensors")
    with torch.no_grad():
        model.score.weight.add_(1.0)
    checks = []
    monkeypatch.setattr(best_folder, "_holds_backbone", lambda *a: checks.append(1) or True)
    writer.save()  # the backbone files are found once per run, not at each save
    assert checks == []
    assert _inode(tmp_path / "best" / "score.safetensors") != first  # a new head, atomically swapped in
    saved = load_file(str(tmp_path / "best" / "score.safetensors"))["score.weight"]
    torch.testing.assert_close(saved, model.score.weight.detach())


def test_another_filesystem_copies_the_backbone_once(tiny_folder: Path, tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setattr(best_folder, "_same_filesystem", lambda files, folder: False)
    model = new_classifier(tiny_folder, HeadSettings(REG), seed=0)
    files = frozen_backbone_files(model, tiny_folder, tmp_path)
    assert files == weight_files(tmp_path / BACKBONE_STORE)
    stored = _inode(files[0])
    assert (
        frozen_backbone_files(model, tiny_folder, tmp_path) == files and _inode(files[0]) == stored
    )  # reused
    BestWriter(model, tmp_path, FitOptions(method="probe"), tiny_folder).save()
    assert _inode(tmp_path / "best" / "backbone-00001.safetensors") == stored
    torch.testing.assert_close(
        _logits(tmp_path / "best", ("ACGTACGTAAGG",)), _logits_of(model, ("ACGTACGTAAGG",))
    )


def _logits_of(model, seqs: tuple[str, ...]) -> torch.Tensor:
    rows = model.encode(list(seqs))
    with torch.no_grad():
        return model(rows.ids, rows.mask)


def test_a_base_with_more_than_the_backbone_is_written_once(tmp_path: Path) -> None:
    base = build_carbon_folder(tmp_path / "base")
    tensors = load_file(str(base / "model.safetensors"))
    tensors["lm_head.weight"] = tensors["model.embed_tokens.weight"].clone()  # an untied LM head
    save_file(tensors, str(base / "model.safetensors"))
    model = new_classifier(base, HeadSettings(REG), seed=0)
    BestWriter(model, tmp_path / "run", FitOptions(method="probe"), base).save()
    store = weight_files(tmp_path / "run" / BACKBONE_STORE)
    assert "lm_head.weight" not in load_file(str(store[0]))
    assert _inode(tmp_path / "run" / "best" / "backbone-00001.safetensors") == _inode(store[0])
    torch.testing.assert_close(
        _logits(tmp_path / "run" / "best", ("ACGTAC",)), _logits_of(model, ("ACGTAC",))
    )


def test_lora_writes_the_adapter_per_improvement_and_merges_once(
    tiny_folder: Path, tmp_path: Path, monkeypatch
) -> None:
    whole = []
    real = best_folder.save_classifier
    monkeypatch.setattr(best_folder, "save_classifier", lambda *a, **k: whole.append(1) or real(*a, **k))
    train, valid = gc_set(16, 30, seed=0), gc_set(8, 30, seed=1)
    options = FitOptions(
        method="lora", steps=4, batch_size=8, lr=1e-2, eval_every=1, lora=LoraOptions(rank=2)
    )
    result = fit(tiny_folder, train, valid, REG, options, tmp_path / "run", metric=pearson_metric)
    assert sum(r["best"] for r in result.history) >= 1 and whole == [1]
    merged = merge_lora(
        load_adapter(new_classifier(tiny_folder, HeadSettings(REG, pooling="mean")), result.adapter_folder)
    )
    torch.testing.assert_close(
        _logits(result.best_folder, valid.sequences), _logits_of(merged, valid.sequences)
    )
    # a finished run resumed writes the same merged folder again, from the best adapter
    again = fit(tiny_folder, train, valid, REG, options, tmp_path / "run", metric=pearson_metric, resume=True)
    torch.testing.assert_close(
        _logits(again.best_folder, valid.sequences), _logits_of(merged, valid.sequences)
    )


class _Stop(Exception):
    pass


def test_a_killed_probe_resumes_to_the_same_linked_folder(tiny_folder: Path, tmp_path: Path) -> None:
    train, valid = gc_set(16, 30, seed=2), gc_set(8, 30, seed=3)
    options = FitOptions(method="probe", steps=6, batch_size=4, lr=0.03, eval_every=1, checkpoint_every=2)
    straight = fit(tiny_folder, train, valid, REG, options, tmp_path / "a", metric=pearson_metric)

    def stop(progress) -> None:
        if progress.step == 3:
            raise _Stop

    with pytest.raises(_Stop):
        fit(tiny_folder, train, valid, REG, options, tmp_path / "b", metric=pearson_metric, on_progress=stop)
    resumed = fit(tiny_folder, train, valid, REG, options, tmp_path / "b", metric=pearson_metric, resume=True)
    assert resumed.best_step == straight.best_step
    for result in (straight, resumed):
        assert _inode(result.best_folder / "backbone-00001.safetensors") == _inode(
            tiny_folder / "model.safetensors"
        )
    a = load_file(str(straight.best_folder / "score.safetensors"))["score.weight"]
    b = load_file(str(resumed.best_folder / "score.safetensors"))["score.weight"]
    assert torch.equal(a, b)
