import json
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F

from hexamer.finetune.embedding_rows import train_dna_block_only
from hexamer.finetune.fit import use_training_fast_paths
from hexamer.finetune.folders import load_classifier, new_classifier, save_classifier
from hexamer.finetune.head import HeadSettings
from hexamer.finetune.lora import add_lora, load_adapter, lora_modules, merge_lora, save_adapter
from hexamer.finetune.options import LORA_TARGETS, LoraOptions
from hexamer.finetune.task import TaskSpec

MULTI = TaskSpec("multiclass", ("y",), ("a", "b", "c"))


def _lora_model(folder: Path, targets=LORA_TARGETS, seed: int = 1):
    model = new_classifier(folder, HeadSettings(MULTI), seed=seed)
    add_lora(model, LoraOptions(rank=4, alpha=8.0, targets=targets), seed=seed)
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():  # B starts at zero: give it values so the adapter changes the output
        for module in lora_modules(model).values():
            module.lora_B.weight.copy_(torch.randn(module.lora_B.weight.shape, generator=gen) * 0.05)
    return model


def test_options_are_range_checked():
    for bad in ({"rank": 0}, {"alpha": 0.0}, {"dropout": 1.0}, {"targets": ("qkv",)}, {"targets": ()}):
        with pytest.raises(ValueError):
            LoraOptions(**bad)


def test_only_adapters_and_head_train(tiny_folder: Path):
    model = _lora_model(tiny_folder, targets=("q_proj", "down_proj"))
    trainable = {n for n, p in model.named_parameters() if p.requires_grad}
    assert "score.weight" in trainable
    assert all("lora_" in n or n == "score.weight" for n in trainable)
    assert len(lora_modules(model)) == 2 * model.backbone.config.num_hidden_layers


def test_merged_export_equals_adapter_forward(tiny_folder: Path, tmp_path: Path, dna):
    model = _lora_model(tiny_folder)
    rows = model.encode(dna)
    with torch.no_grad():
        plain = new_classifier(tiny_folder, HeadSettings(MULTI), seed=1)(rows.ids, rows.mask)
        adapted = model(rows.ids, rows.mask)
        assert (adapted - plain).abs().max() > 1e-3  # the adapter does change the output
        merge_lora(model)
        assert not lora_modules(model)
        torch.testing.assert_close(model(rows.ids, rows.mask), adapted, atol=1e-5, rtol=0)
    folder = save_classifier(model, tmp_path / "merged")
    with torch.no_grad():
        torch.testing.assert_close(load_classifier(folder)(rows.ids, rows.mask), adapted, atol=1e-5, rtol=0)


def test_saving_an_unmerged_model_as_head_folder_is_refused(tiny_folder: Path, tmp_path: Path):
    with pytest.raises(ValueError, match="merge"):
        save_classifier(_lora_model(tiny_folder), tmp_path / "x")


def test_adapter_round_trip_in_hexamer(tiny_folder: Path, tmp_path: Path, dna):
    model = _lora_model(tiny_folder, targets=("v_proj", "up_proj"))
    save_adapter(model, tmp_path / "adapter", base_model=str(tiny_folder))
    other = load_adapter(new_classifier(tiny_folder, HeadSettings(MULTI), seed=9), tmp_path / "adapter")
    rows = model.encode(dna)
    with torch.no_grad():
        torch.testing.assert_close(other(rows.ids, rows.mask), model(rows.ids, rows.mask), atol=1e-6, rtol=0)


@pytest.mark.parametrize("onednn", [False, True], ids=["plain", "training-fast-paths"])
def test_one_step_equals_peft_on_transformers(tiny_folder: Path, tmp_path: Path, dna, onednn: bool):
    transformers = pytest.importorskip("transformers")
    peft = pytest.importorskip("peft")
    model = _lora_model(tiny_folder)
    if onednn:  # what fit trains with on a CPU
        use_training_fast_paths(model)
    save_adapter(model, tmp_path / "adapter", base_model=str(tiny_folder))
    config = json.loads((tmp_path / "adapter" / "adapter_config.json").read_text())
    assert config["peft_type"] == "LORA" and config["modules_to_save"] == ["score"]

    hf = transformers.LlamaForSequenceClassification.from_pretrained(
        tiny_folder, num_labels=3, dtype=torch.float32
    )
    peer = peft.PeftModel.from_pretrained(hf, tmp_path / "adapter", is_trainable=True)
    rows = model.encode(dna)
    labels = torch.tensor([0, 2, 1, 2])
    model.train()
    peer.train()
    ours = model(rows.ids, rows.mask)
    out = peer(input_ids=rows.ids, attention_mask=rows.mask.long(), labels=labels)
    torch.testing.assert_close(ours, out.logits, atol=1e-4, rtol=0)  # peft loads hexamer's adapter
    loss = F.cross_entropy(ours, labels)
    torch.testing.assert_close(loss, out.loss, atol=1e-5, rtol=0)
    loss.backward()
    out.loss.backward()
    peer_grads = {n: p.grad for n, p in peer.named_parameters() if p.requires_grad}
    checked = 0
    for name, module in lora_modules(model).items():
        for part in ("lora_A", "lora_B"):
            key = f"base_model.model.model.{name.removeprefix('backbone.')}.{part}.default.weight"
            torch.testing.assert_close(
                getattr(module, part).weight.grad, peer_grads[key], atol=1e-5, rtol=1e-4
            )
            checked += 1
    score_key = "base_model.model.score.modules_to_save.default.weight"
    torch.testing.assert_close(model.score.weight.grad, peer_grads[score_key], atol=1e-5, rtol=1e-4)
    assert checked == 2 * len(LORA_TARGETS) * model.backbone.config.num_hidden_layers


def test_full_step_with_onednn_linears_equals_transformers(tiny_folder: Path, tmp_path: Path, dna):
    """Full fine-tuning as fit runs it on a CPU (oneDNN linears): loss and every gradient equal
    transformers' LlamaForSequenceClassification on the same folder and batch."""
    transformers = pytest.importorskip("transformers")
    model = new_classifier(tiny_folder, HeadSettings(MULTI), seed=3)
    folder = save_classifier(model, tmp_path / "head")
    use_training_fast_paths(model)
    for p in model.parameters():
        p.requires_grad_(True)
    peer = transformers.AutoModelForSequenceClassification.from_pretrained(folder, dtype=torch.float32)
    rows = model.encode(dna)
    labels = torch.tensor([0, 2, 1, 2])
    model.train()
    peer.train()
    loss = F.cross_entropy(model(rows.ids, rows.mask), labels)
    out = peer(input_ids=rows.ids, attention_mask=rows.mask.long(), labels=labels)
    torch.testing.assert_close(loss, out.loss, atol=1e-5, rtol=0)
    loss.backward()
    out.loss.backward()
    peer_grads = {n: p.grad for n, p in peer.named_parameters()}
    for name, p in model.named_parameters():
        key = "model." + name.removeprefix("backbone.") if name.startswith("backbone.") else name
        torch.testing.assert_close(p.grad, peer_grads[key], atol=1e-5, rtol=1e-4, msg=name)


def test_full_step_training_the_dna_block_equals_transformers(tiny_folder: Path, tmp_path: Path, dna):
    """fit's full fine-tuning trains the DNA block of the embedding only: its gradient equals those
    rows of transformers' dense embedding gradient, and every other row's gradient there is zero."""
    transformers = pytest.importorskip("transformers")
    model = new_classifier(tiny_folder, HeadSettings(MULTI), seed=3)
    folder = save_classifier(model, tmp_path / "head")
    for p in model.parameters():
        p.requires_grad_(True)
    rows_param = train_dna_block_only(model)
    use_training_fast_paths(model)
    start = model.tokenizer.layout.dna_start_id
    peer = transformers.AutoModelForSequenceClassification.from_pretrained(folder, dtype=torch.float32)
    batch = model.encode(dna)
    labels = torch.tensor([0, 2, 1, 2])
    loss = F.cross_entropy(model(batch.ids, batch.mask), labels)
    out = peer(input_ids=batch.ids, attention_mask=batch.mask.long(), labels=labels)
    torch.testing.assert_close(loss, out.loss, atol=1e-5, rtol=0)
    loss.backward()
    out.loss.backward()
    dense = peer.model.embed_tokens.weight.grad
    stop = start + rows_param.shape[0]
    torch.testing.assert_close(rows_param.grad, dense[start:stop], atol=1e-5, rtol=1e-4)
    assert dense[:start].abs().sum() == 0 and dense[stop:].abs().sum() == 0
    assert model.backbone.embed_tokens.weight.grad is None
    with torch.no_grad():  # the trained rows are the table's own storage
        rows_param.add_(1.0)
    torch.testing.assert_close(model.backbone.embed_tokens.weight[start:stop], rows_param.detach())
    assert "model.embed_tokens.weight" in save_classifier_names(model)


def save_classifier_names(model) -> set[str]:
    from hexamer.finetune.folders import head_tensors

    return set(head_tensors(model, torch.float32))


def test_bf16_step_with_the_training_kernels_matches_transformers_autocast(
    tiny_folder: Path, tmp_path: Path, dna
):
    """fit's bf16 path (norms emitting bf16 once, oneDNN linears) against transformers under the
    same bf16 autocast: the loss within bf16 rounding, every gradient pointing the same way."""
    transformers = pytest.importorskip("transformers")
    model = new_classifier(tiny_folder, HeadSettings(MULTI), seed=3)
    folder = save_classifier(model, tmp_path / "head")
    for p in model.parameters():
        p.requires_grad_(True)
    use_training_fast_paths(model)
    peer = transformers.AutoModelForSequenceClassification.from_pretrained(folder, dtype=torch.float32)
    rows = model.encode(dna)
    labels = torch.tensor([0, 2, 1, 2])
    with torch.autocast("cpu", dtype=torch.bfloat16):
        loss = F.cross_entropy(model(rows.ids, rows.mask), labels)
        out = peer(input_ids=rows.ids, attention_mask=rows.mask.long(), labels=labels)
    torch.testing.assert_close(loss, out.loss.float(), atol=2e-2, rtol=0)
    loss.backward()
    out.loss.backward()
    peer_grads = {n: p.grad for n, p in peer.named_parameters()}
    for name, p in model.named_parameters():
        key = "model." + name.removeprefix("backbone.") if name.startswith("backbone.") else name
        cos = F.cosine_similarity(p.grad.flatten(), peer_grads[key].flatten(), dim=0)
        assert p.grad.dtype == torch.float32 and cos > 0.99, (name, float(cos))


def test_bf16_lora_step_with_the_fast_paths_matches_plain_autocast(tiny_folder: Path, dna):
    """LoRA under bf16 autocast with the CPU fast paths (frozen weights cast to bf16 once and kept,
    fused norms/RoPE/SwiGLU) against the same model on plain PyTorch ops under torch.autocast:
    the loss within 2e-2 (bf16 rounding of different summation orders), every adapter and head
    gradient within cosine 0.99; a second step reuses the kept copies and still agrees."""
    options = LoraOptions(rank=4, alpha=8, targets=LORA_TARGETS)
    fast = add_lora(new_classifier(tiny_folder, HeadSettings(MULTI), seed=3), options, seed=1)
    plain = add_lora(new_classifier(tiny_folder, HeadSettings(MULTI), seed=3), options, seed=1)
    with torch.no_grad():
        for (_, a), (_, b) in zip(
            lora_modules(fast).items(), lora_modules(plain).items(), strict=True
        ):  # a non-zero B, so the adapters' input gradients matter
            a.lora_B.weight.normal_(0, 0.05)
            b.lora_B.weight.copy_(a.lora_B.weight)
    use_training_fast_paths(fast)
    rows = fast.encode(dna)
    labels = torch.tensor([0, 2, 1, 2])
    for _ in range(2):
        losses = []
        for model in (fast, plain):
            model.zero_grad(set_to_none=True)
            with torch.autocast("cpu", dtype=torch.bfloat16):
                loss = F.cross_entropy(model(rows.ids, rows.mask), labels)
            loss.backward()
            losses.append(float(loss))
        assert abs(losses[0] - losses[1]) < 2e-2, losses
        trained = {n: p for n, p in fast.named_parameters() if p.requires_grad}
        reference = dict(plain.named_parameters())
        assert trained and all(p.grad.dtype == torch.float32 for p in trained.values())
        for name, p in trained.items():
            cos = F.cosine_similarity(p.grad.flatten(), reference[name].grad.flatten(), dim=0)
            assert cos > 0.99, (name, float(cos))
        assert all(p.grad is None for p in fast.backbone.parameters() if not p.requires_grad)
    kept = [m for m in fast.modules() if "_bf16_copy" in m.__dict__]
    assert len(kept) == len(lora_modules(fast))  # every adapted projection's frozen base weight
