"""Checkpoint loading: sharded indexes, dtypes, and clear errors for broken folders."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
import torch
from safetensors.torch import load_file, save_file

from hexamer.model import load_model, resolve_dtype
from hexamer.testing.hangs import error_within


def _rewrite(path: Path, change: Any) -> None:
    """Apply ``change`` to the tensors of a single-file checkpoint and save it back."""
    file = path / "model.safetensors"
    tensors = load_file(file)
    change(tensors)
    save_file(tensors, file, metadata={"format": "pt"})


def test_sharded_checkpoint_via_index(make_checkpoint: Any) -> None:
    hf, path = make_checkpoint(max_shard_size="40KB")
    index = json.loads((path / "model.safetensors.index.json").read_text())
    assert len(set(index["weight_map"].values())) > 2
    assert not (path / "model.safetensors").exists()
    model, _ = load_model(path)
    ids = torch.randint(0, 256, (2, 16), generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        assert (model(ids).logits - hf(ids).logits).abs().max().item() <= 1e-4


def test_loaded_model_is_frozen_and_on_device(make_checkpoint: Any) -> None:
    _, path = make_checkpoint(tie_word_embeddings=True)
    model, config = load_model(path, dtype="auto")
    assert config.dtype == "float32" and model.dtype == torch.float32
    assert model.device == torch.device("cpu") and not model.training
    assert all(not p.requires_grad and p.device.type == "cpu" for p in model.parameters())
    assert model.head_weight is model.embed_tokens.weight


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16, "bf16"])
def test_low_precision_load_converts_every_tensor(make_checkpoint: Any, dtype: Any) -> None:
    _, path = make_checkpoint()
    model, _ = load_model(path, dtype=dtype)
    want = resolve_dtype(dtype, _config(path))
    tensors = list(model.parameters()) + list(model.buffers())
    assert tensors and all(t.dtype == want for t in tensors)  # no float32 copy is kept anywhere
    with torch.no_grad():
        logits = model(torch.tensor([[1, 2, 3]])).logits
    assert logits.dtype == torch.float32 and torch.isfinite(logits).all()


def _config(path: Path) -> Any:
    from hexamer.model import ModelConfig

    return ModelConfig.from_file(path / "config.json")


def test_resolve_dtype_errors(make_checkpoint: Any) -> None:
    _, path = make_checkpoint()
    with pytest.raises(ValueError, match="unsupported dtype 'int2'"):
        load_model(path, dtype="int2")
    with pytest.raises(ValueError, match="unsupported dtype"):
        load_model(path, dtype=torch.float64)


def test_missing_folder_and_config(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match="model folder not found"):
        load_model(tmp_path / "nope")
    with pytest.raises(FileNotFoundError, match=r"config\.json not found in"):
        load_model(tmp_path)


def test_missing_weights_and_pickle_refused(make_checkpoint: Any) -> None:
    _, path = make_checkpoint()
    (path / "model.safetensors").rename(path / "pytorch_model.bin")
    with pytest.raises(FileNotFoundError, match="pickle checkpoints"):
        load_model(path)
    (path / "pytorch_model.bin").unlink()
    with pytest.raises(FileNotFoundError, match=r"no model\.safetensors"):
        load_model(path)


def test_missing_tensor_is_named(make_checkpoint: Any) -> None:
    _, path = make_checkpoint()
    _rewrite(path, lambda t: t.pop("model.layers.1.mlp.up_proj.weight"))
    with pytest.raises(ValueError) as info:
        load_model(path)
    assert "missing tensor(s)" in str(info.value) and "'model.layers.1.mlp.up_proj.weight'" in str(info.value)


def test_untied_checkpoint_without_head_is_rejected(make_checkpoint: Any) -> None:
    _, path = make_checkpoint(tie_word_embeddings=False)
    _rewrite(path, lambda t: t.pop("lm_head.weight"))
    with pytest.raises(ValueError, match=r"'lm_head\.weight'"):
        load_model(path)


def test_tied_checkpoint_may_store_the_head(make_checkpoint: Any) -> None:
    _, path = make_checkpoint(tie_word_embeddings=True)
    _rewrite(path, lambda t: t.__setitem__("lm_head.weight", t["model.embed_tokens.weight"].clone()))
    model, _ = load_model(path)
    assert model.lm_head is None


def test_wrong_shape_names_tensor_file_and_shapes(make_checkpoint: Any) -> None:
    _, path = make_checkpoint()
    _rewrite(path, lambda t: t.__setitem__("model.layers.0.self_attn.k_proj.weight", torch.zeros(64, 64)))
    with pytest.raises(ValueError) as info:
        load_model(path)
    msg = str(info.value)
    assert "'model.layers.0.self_attn.k_proj.weight'" in msg and "model.safetensors" in msg
    assert "[64, 64]" in msg and "[32, 64]" in msg


def test_unexpected_and_non_float_tensors(make_checkpoint: Any) -> None:
    _, path = make_checkpoint()
    _rewrite(path, lambda t: t.__setitem__("model.layers.2.mlp.up_proj.weight", torch.zeros(128, 64)))
    with pytest.raises(ValueError, match=r"unexpected tensor 'model\.layers\.2\.mlp\.up_proj\.weight'"):
        load_model(path)
    _rewrite(path, lambda t: t.pop("model.layers.2.mlp.up_proj.weight"))
    _rewrite(path, lambda t: t.__setitem__("model.norm.weight", torch.ones(64, dtype=torch.int32)))
    with pytest.raises(ValueError, match="stored as I32"):
        load_model(path)


def test_old_rotary_buffers_are_ignored(make_checkpoint: Any) -> None:
    _, path = make_checkpoint()
    _rewrite(path, lambda t: t.__setitem__("model.layers.0.self_attn.rotary_emb.inv_freq", torch.ones(8)))
    load_model(path)


def test_broken_index_files(make_checkpoint: Any) -> None:
    _, path = make_checkpoint(max_shard_size="40KB")
    index_path = path / "model.safetensors.index.json"
    index = json.loads(index_path.read_text())
    name, shard = next(iter(index["weight_map"].items()))

    (path / shard).rename(path / "gone.safetensors")
    with pytest.raises(FileNotFoundError, match=re.escape(f"shard '{shard}'")):
        load_model(path)
    (path / "gone.safetensors").rename(path / shard)

    other = next(s for s in index["weight_map"].values() if s != shard)
    broken = index | {"weight_map": index["weight_map"] | {name: other}}
    index_path.write_text(json.dumps(broken))
    with pytest.raises(
        ValueError, match=re.escape(f"'{name}' is listed in model.safetensors.index.json but absent")
    ):
        load_model(path)

    escaping = index | {"weight_map": index["weight_map"] | {name: "../elsewhere.safetensors"}}
    index_path.write_text(json.dumps(escaping))
    with pytest.raises(ValueError, match="lies outside"):
        load_model(path)

    index_path.write_text("{}")
    with pytest.raises(ValueError, match="no 'weight_map'"):
        load_model(path)


def test_non_llama_config_is_rejected(make_checkpoint: Any) -> None:
    _, path = make_checkpoint()
    raw = json.loads((path / "config.json").read_text())
    (path / "config.json").write_text(json.dumps(raw | {"model_type": "mistral"}))
    with pytest.raises(ValueError) as info:
        load_model(path)
    assert "config.json" in str(info.value) and "'model_type' is 'mistral'" in str(info.value)


def test_project_tiny_carbon_folder_matches_transformers(tiny_folder: Path) -> None:
    import transformers

    model, config = load_model(tiny_folder)
    hf = transformers.LlamaForCausalLM.from_pretrained(tiny_folder).eval()
    ids = torch.randint(0, config.vocab_size, (2, 24), generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        assert (model(ids).logits - hf(ids).logits).abs().max().item() <= 1e-4


def test_sharded_bf16_carbon_folder_auto_dtype(tmp_path: Path) -> None:
    from hexamer.synthetic import build_carbon_folder

    folder = build_carbon_folder(tmp_path / "m", shards=3, dtype="bfloat16", tie_word_embeddings=False)
    model, config = load_model(folder, dtype="auto")
    assert config.dtype == "bfloat16" and not config.tie_word_embeddings
    assert {p.dtype for p in model.parameters()} == {torch.bfloat16}


# ------------------------------------------------------------------ lying and absurd checkpoints
def _patch_config(path: Path, **changes: Any) -> None:
    raw = json.loads((path / "config.json").read_text())
    (path / "config.json").write_text(json.dumps(raw | changes))


def test_absurd_layer_count_is_refused_before_building(make_checkpoint: Any) -> None:
    import time

    _, path = make_checkpoint()
    _patch_config(path, num_hidden_layers=1_000_000)
    start = time.perf_counter()
    with pytest.raises(ValueError, match=r"'num_hidden_layers' is 1000000 but the safetensors files hold 2"):
        load_model(path)
    assert time.perf_counter() - start < 5  # building a 10^6-layer model (even on meta) takes minutes


def test_weights_larger_than_free_memory_are_refused(make_checkpoint: Any, monkeypatch: Any) -> None:
    from hexamer.model import memory

    _, path = make_checkpoint()
    monkeypatch.setattr(memory, "available_memory_bytes", lambda device="cpu": 1000)
    with pytest.raises(memory.NotEnoughMemory, match=r"parameters in float32 \(.*KiB\) needs .* free on cpu"):
        load_model(path)


def _header_bytes(file: Path) -> tuple[int, dict[str, Any]]:
    raw = file.read_bytes()
    n = int.from_bytes(raw[:8], "little")
    return n, json.loads(raw[8 : 8 + n])


def _write_header(file: Path, header: dict[str, Any], data: bytes) -> None:
    text = json.dumps(header).encode()
    file.write_bytes(len(text).to_bytes(8, "little") + text + data)


def test_lying_safetensors_headers_name_file_and_tensor(make_checkpoint: Any) -> None:
    _, path = make_checkpoint()
    file = path / "model.safetensors"
    original = file.read_bytes()
    n, header = _header_bytes(file)
    data = original[8 + n :]

    file.write_bytes(original[: len(original) // 2])  # truncated
    with pytest.raises(
        ValueError, match=r"tensor '.*' in .*model\.safetensors: data ends at byte .* truncated"
    ):
        load_model(path)

    file.write_bytes((10**9).to_bytes(8, "little") + original[8:100])  # header larger than the file
    with pytest.raises(
        ValueError, match=r"model\.safetensors is not a valid safetensors file: its header claims"
    ):
        load_model(path)

    file.write_bytes(b"\x01")
    with pytest.raises(ValueError, match="too short for a header"):
        load_model(path)

    name = "model.norm.weight"
    lying = json.loads(json.dumps(header))
    lying[name]["shape"] = [128]  # the offsets still span 64 floats
    _write_header(file, lying, data)
    with pytest.raises(
        ValueError, match=r"tensor 'model\.norm\.weight' in .*: shape \[128\] as F32 is 512 bytes"
    ):
        load_model(path)

    file.write_bytes(original)
    load_model(path)


def test_fifo_and_outside_symlinks_are_refused(make_checkpoint: Any, tmp_path: Path) -> None:
    import os

    _, path = make_checkpoint()
    file = path / "model.safetensors"
    file.rename(tmp_path / "elsewhere.safetensors")
    file.symlink_to(tmp_path / "elsewhere.safetensors")
    with pytest.raises(ValueError, match=r"is a symlink to .* outside the model folder"):
        load_model(path)
    file.unlink()
    file.symlink_to("/etc/passwd")
    with pytest.raises(ValueError, match="outside the model folder"):
        load_model(path)
    file.unlink()

    os.mkfifo(file)
    error = error_within(lambda: load_model(path), 10, "loading a FIFO")
    assert isinstance(error, ValueError) and "not a regular file" in str(error)
    file.unlink()

    # a symlink inside the folder is fine (and so is the hub cache's snapshots -> blobs layout)
    (tmp_path / "elsewhere.safetensors").rename(path / "real.safetensors")
    file.symlink_to("real.safetensors")
    load_model(path)


def test_hub_cache_symlinks_are_followed(make_checkpoint: Any, tmp_path: Path) -> None:
    _, path = make_checkpoint()
    repo = tmp_path / "models--org--name"
    (repo / "blobs").mkdir(parents=True)
    snapshot = repo / "snapshots" / "abc123"
    snapshot.mkdir(parents=True)
    for item in path.iterdir():
        blob = repo / "blobs" / f"blob-{item.name}"
        blob.write_bytes(item.read_bytes())
        (snapshot / item.name).symlink_to(Path("../../blobs") / blob.name)
    load_model(snapshot)


@pytest.mark.parametrize(
    ("field", "tensor"),
    [
        ("head_dim", "q_proj"),  # its RoPE table alone would need terabytes
        ("hidden_size", "embed_tokens"),
        ("vocab_size", "embed_tokens"),
        ("intermediate_size", "gate_proj"),
    ],
)
def test_absurd_dimensions_are_refused_before_building(make_checkpoint: Any, field: str, tensor: str) -> None:
    _, path = make_checkpoint()
    _patch_config(path, **{field: 10**12})
    with pytest.raises(
        ValueError, match=rf"config\.json does not match the weights: tensor '.*{tensor}.*'.*{field}"
    ):
        load_model(path)
