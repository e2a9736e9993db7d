"""int8 weight-only quantisation (``hexamer.model.quant``): the quantiser's error bound, the
reference layer against a float layer holding the dequantised weight, quantize -> load round
trips, the native and fallback paths, and clear refusals."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import torch
import torch.nn.functional as F

from hexamer.model import load_model
from hexamer.model import native as native_mod
from hexamer.model.cpu import PanelInt8Linear, use_cpu_linears
from hexamer.model.native import native_kernels
from hexamer.model.quant import (
    QUANT_METHOD,
    Int8Linear,
    folder_quantization,
    int8_activation_dtype,
    quantize_folder,
    quantize_weight,
)
from hexamer.synthetic import build_carbon_folder
from hexamer.testing.hangs import error_within


@pytest.fixture(scope="module")
def float_folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_carbon_folder(tmp_path_factory.mktemp("float") / "m")


@pytest.fixture(scope="module")
def int8_folder(float_folder: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return quantize_folder(float_folder, tmp_path_factory.mktemp("int8") / "q")


def _ids(vocab: int, seed: int = 0) -> torch.Tensor:
    return torch.randint(0, vocab, (2, 13), generator=torch.Generator().manual_seed(seed))


def test_quantize_weight_is_symmetric_per_channel_within_half_a_step() -> None:
    gen = torch.Generator().manual_seed(0)
    w = torch.randn(50, 70, generator=gen) * torch.rand(50, 1, generator=gen) * 3
    w[7] = 0  # an all-zero row
    q, scale = quantize_weight(w)
    assert q.dtype == torch.int8 and scale.dtype == torch.float32 and scale.shape == (50,)
    assert q.abs().max() == 127 and q[7].abs().max() == 0 and scale[7] == 1
    assert (q.abs().amax(1)[torch.arange(50) != 7] == 127).all()  # each row's largest weight -> 127
    err = (w - q.float() * scale[:, None]).abs()
    assert (err <= scale[:, None] / 2 * (1 + 1e-6)).all()
    with pytest.raises(ValueError, match=r"layer\.x: non-finite weight at \[1, 2\]"):
        bad = w.clone()
        bad[1, 2] = float("nan")
        quantize_weight(bad, "layer.x")
    with pytest.raises(ValueError, match="2-D float"):
        quantize_weight(torch.zeros(3, dtype=torch.float32))


def test_int8_linear_is_a_float_linear_on_the_dequantised_weight() -> None:
    lin = torch.nn.Linear(48, 20, bias=True).requires_grad_(False)
    ref = Int8Linear.from_linear(lin)
    x = torch.randn(3, 5, 48)
    want = F.linear(x.double(), ref.dequantized(torch.float64), lin.bias.double())
    torch.testing.assert_close(ref(x).double(), want, atol=1e-5, rtol=1e-5)
    assert ref(x.bfloat16()).dtype == torch.bfloat16
    ref.to(torch.bfloat16)  # the scales never follow a dtype change
    assert ref.weight.dtype == torch.int8 and ref.weight_scale.dtype == torch.float32
    assert set(ref.state_dict()) == {"weight", "weight_scale", "bias"}


@pytest.mark.parametrize(("name", "activations"), [("int8", torch.float32), ("int8-bf16", torch.bfloat16)])
def test_int8_dtype_names(name: str, activations: torch.dtype) -> None:
    assert int8_activation_dtype(name) == activations
    assert int8_activation_dtype("INT8") == torch.float32
    assert int8_activation_dtype("float32") is None and int8_activation_dtype(torch.float32) is None


def test_int8_model_matches_transformers_on_the_dequantised_weights(make_checkpoint: Any) -> None:
    """The peer: transformers' Llama with every projection replaced by q * scale in float32."""
    hf, path = make_checkpoint(num_key_value_heads=2)
    model, config = load_model(path, dtype="int8")
    quantized = [m for m in model.modules() if isinstance(m, Int8Linear)]
    assert len(quantized) == 7 * config.num_hidden_layers
    hf_dequant = __import__("copy").deepcopy(hf)
    with torch.no_grad():
        for i, layer in enumerate(model.layers):
            for part in ("self_attn", "mlp"):
                for name, child in getattr(layer, part).named_children():
                    if isinstance(child, Int8Linear):
                        target = getattr(getattr(hf_dequant.model.layers[i], part), name)
                        target.weight.copy_(child.dequantized())
    ids = _ids(config.vocab_size)
    with torch.inference_mode():
        ours = model(ids).logits
        theirs = hf_dequant(ids).logits
        float_logits = hf(ids).logits
    torch.testing.assert_close(ours, theirs, atol=1e-4, rtol=1e-4)
    assert (ours - float_logits).abs().max() > 1e-4  # it really is quantized
    if use_cpu_linears(model) == "native":
        assert isinstance(model.layers[0].mlp.down_proj, PanelInt8Linear)
        with torch.inference_mode():
            torch.testing.assert_close(model(ids).logits, theirs, atol=1e-4, rtol=1e-4)


def test_quantize_then_load_round_trip(float_folder: Path, int8_folder: Path) -> None:
    config = json.loads((int8_folder / "config.json").read_text())
    qc = config["quantization_config"]
    assert qc["quant_method"] == QUANT_METHOD and qc["bits"] == 8 and qc["source_dtype"] == "float32"
    assert folder_quantization(int8_folder) == qc and folder_quantization(float_folder) is None
    assert (int8_folder / "tokenizer.json").is_file() and not list(int8_folder.parent.glob(".q-*"))
    from safetensors import safe_open

    with safe_open(str(int8_folder / "model.safetensors"), "pt") as f:
        assert f.get_tensor("model.layers.0.mlp.up_proj.weight").dtype == torch.int8
        assert f.get_tensor("model.layers.0.mlp.up_proj.weight_scale").dtype == torch.float32
        assert f.get_tensor("model.embed_tokens.weight").dtype == torch.float32

    on_the_fly, cfg = load_model(float_folder, dtype="int8")
    stored, _ = load_model(int8_folder)  # a quantized folder loads quantized by default
    for a, b in zip(on_the_fly.modules(), stored.modules(), strict=True):
        if isinstance(a, Int8Linear):
            assert isinstance(b, Int8Linear) and torch.equal(a.weight, b.weight)
            assert torch.equal(a.weight_scale, b.weight_scale)
    ids = _ids(cfg.vocab_size, 1)
    with torch.inference_mode():
        assert torch.equal(stored(ids).logits, on_the_fly(ids).logits)
    bf16, _ = load_model(int8_folder, dtype="bfloat16")  # a float dtype picks the activations
    assert bf16.dtype == torch.bfloat16 and isinstance(bf16.layers[0].mlp.up_proj, Int8Linear)


def test_carbon_loads_an_int8_folder_and_scores(float_folder: Path, int8_folder: Path) -> None:
    from hexamer import Carbon

    seq = "ACGTTGCA" * 30
    ref = Carbon.from_pretrained(float_folder).score([seq], level="bp")[0]
    for folder, dtype in ((int8_folder, "auto"), (float_folder, "int8"), (int8_folder, "int8-bf16")):
        carbon = Carbon.from_pretrained(folder, dtype=dtype)
        got = carbon.score([seq], level="bp")[0]
        assert got.n_scored == ref.n_scored
        assert abs(got.mean - ref.mean) < 0.05 * abs(ref.mean)


def test_fallback_path_without_native_kernels(int8_folder: Path, monkeypatch: Any) -> None:
    reference, cfg = load_model(int8_folder)
    ids = _ids(cfg.vocab_size, 2)
    with torch.inference_mode():
        want = reference(ids).logits
    monkeypatch.setattr(native_mod, "native_kernels", lambda: None)
    monkeypatch.setattr("hexamer.model.cpu.native_kernels", lambda: None)
    model, _ = load_model(int8_folder)
    assert use_cpu_linears(model) in ("onednn", "torch")
    assert not any(isinstance(m, PanelInt8Linear) for m in model.modules())
    assert isinstance(model.layers[0].self_attn.q_proj, Int8Linear)
    with torch.inference_mode():
        assert torch.equal(model(ids).logits, want)
    with pytest.raises(RuntimeError, match="native CPU kernels"):
        use_cpu_linears(load_model(int8_folder)[0], native=True)


def test_native_int8_model_matches_the_reference(int8_folder: Path) -> None:
    if native_kernels() is None:
        pytest.skip(native_mod.native_status())
    for dtype, tol in (("int8", 1e-4), ("int8-bf16", 5e-2)):
        reference, cfg = load_model(int8_folder, dtype=dtype)
        model, _ = load_model(int8_folder, dtype=dtype)
        assert use_cpu_linears(model) == "native"
        ids = _ids(cfg.vocab_size, 3)
        with torch.inference_mode():
            torch.testing.assert_close(model(ids).logits, reference(ids).logits, atol=tol, rtol=tol)
        state = model.state_dict()
        assert state["layers.0.mlp.up_proj.weight"].dtype == torch.int8


def test_refusals(float_folder: Path, int8_folder: Path, tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="already quantized"):
        quantize_folder(int8_folder, tmp_path / "again")
    (tmp_path / "full").mkdir()
    (tmp_path / "full" / "x").write_text("x")
    with pytest.raises(FileExistsError, match="not an empty folder"):
        quantize_folder(float_folder, tmp_path / "full")
    other = tmp_path / "gptq"
    other.mkdir()
    config = json.loads((float_folder / "config.json").read_text())
    (other / "config.json").write_text(json.dumps(config | {"quantization_config": {"quant_method": "gptq"}}))
    with pytest.raises(ValueError, match="'gptq' is not supported"):
        load_model(other)
    from hexamer.train.init import starting_point

    with pytest.raises(ValueError, match="int8-quantized folder"):
        starting_point(str(int8_folder))


def test_a_corrupt_int8_folder_is_refused_by_name(int8_folder: Path, tmp_path: Path) -> None:
    import shutil

    from safetensors.torch import load_file, save_file

    bad = tmp_path / "bad"
    shutil.copytree(int8_folder, bad)
    tensors = load_file(str(bad / "model.safetensors"))
    tensors["model.layers.1.mlp.down_proj.weight_scale"][3] = 0
    save_file(tensors, str(bad / "model.safetensors"))
    with pytest.raises(ValueError, match=r"down_proj\.weight_scale.*finite and > 0"):
        load_model(bad)
    tensors["model.layers.1.mlp.down_proj.weight_scale"][3] = 1
    tensors["model.layers.0.self_attn.q_proj.weight"] = tensors[
        "model.layers.0.self_attn.q_proj.weight"
    ].float()
    save_file(tensors, str(bad / "model.safetensors"))
    with pytest.raises(ValueError, match=r"q_proj\.weight' .* stored as F32, expected I8"):
        load_model(bad)
    del tensors["model.layers.0.self_attn.q_proj.weight"]
    save_file(tensors, str(bad / "model.safetensors"))
    with pytest.raises(ValueError, match=r"missing tensor.*q_proj\.weight"):
        load_model(bad)


def test_float_only_tools_refuse_an_int8_folder(int8_folder: Path) -> None:
    """transformers itself only warns about an unknown quantization_config and would read the
    int8 codes as float weights, so hexamer's transformers and llama.cpp paths check first."""
    from hexamer.bench.backends import load_hf_model
    from hexamer.bench.baselines.published_vep import PublishedScorer
    from hexamer.bench.llamacpp import convert_to_gguf

    with pytest.raises(ValueError, match="transformers cannot load it"):
        load_hf_model(int8_folder, "float32")
    with pytest.raises(ValueError, match="GGUF converter cannot load it"):
        convert_to_gguf(int8_folder)
    with pytest.raises(ValueError, match="published transformers path cannot load it"):
        PublishedScorer(int8_folder)


def test_int8_weight_bytes_is_what_the_loaded_model_holds(int8_folder: Path) -> None:
    from hexamer.model.quant import int8_weight_bytes

    for dtype, activations in (("int8", torch.float32), ("int8-bf16", torch.bfloat16)):
        model, config = load_model(int8_folder, dtype=dtype)
        held = sum(t.numel() * t.element_size() for t in [*model.parameters(), *model.buffers()])
        rope = sum(
            b.numel() * b.element_size() for n, b in model.named_buffers() if "rotary" in n or "rope" in n
        )
        assert int8_weight_bytes(config, activations) == held - rope


def test_a_truncated_int8_folder_is_refused_before_reading(int8_folder: Path, tmp_path: Path) -> None:
    import shutil

    bad = tmp_path / "cut"
    shutil.copytree(int8_folder, bad)
    file = bad / "model.safetensors"
    data = file.read_bytes()
    file.write_bytes(data[: len(data) - 100])
    with pytest.raises(
        ValueError, match=r"model\.safetensors: data ends at byte .* \(the file is truncated\)"
    ):
        load_model(bad)
    file.write_bytes(data[:200])  # not even the whole header
    with pytest.raises(ValueError, match=r"header claims \d+ bytes but the file has 200"):
        load_model(bad)


def test_an_int8_config_the_weights_contradict_is_refused(int8_folder: Path, tmp_path: Path) -> None:
    import shutil

    bad = tmp_path / "cfg"
    shutil.copytree(int8_folder, bad)
    config = json.loads((bad / "config.json").read_text())
    (bad / "config.json").write_text(json.dumps(config | {"num_hidden_layers": 10**6}))
    with pytest.raises(ValueError, match=r"'num_hidden_layers' is 1000000 but the safetensors files hold 2"):
        load_model(bad)
    (bad / "config.json").write_text(json.dumps(config | {"intermediate_size": 10**9}))
    with pytest.raises(ValueError, match=r"config's 'intermediate_size' x 'hidden_size' make it"):
        load_model(bad)


def test_an_int8_model_beyond_free_memory_is_refused(int8_folder: Path, monkeypatch: Any) -> None:
    from hexamer.model import memory

    monkeypatch.setattr(memory, "available_memory_bytes", lambda device="cpu": 1000)
    with pytest.raises(
        memory.NotEnoughMemory, match=r"parameters in int8 with bfloat16 activations .* needs"
    ):
        load_model(int8_folder, dtype="int8-bf16")


def test_a_fifo_int8_weights_file_is_refused(int8_folder: Path, tmp_path: Path) -> None:
    import os
    import shutil

    bad = tmp_path / "fifo"
    shutil.copytree(int8_folder, bad)
    (bad / "model.safetensors").unlink()
    os.mkfifo(bad / "model.safetensors")
    error = error_within(lambda: load_model(bad), 10, "loading a FIFO")
    assert isinstance(error, ValueError) and "model.safetensors is not a regular file" in str(error)


def test_quantized_folders_are_read_into_memory_of_their_own(int8_folder: Path) -> None:
    """Not views of a mapping of the file: a mapped file keeps every page read in the process's
    RSS while any tensor views it (the 8B int4 folder's codes after they were packed)."""
    from safetensors import safe_open

    from hexamer.model.quant import read_tensors

    file = int8_folder / "model.safetensors"
    with safe_open(str(file), framework="pt", device="cpu") as f:
        want = {name: f.get_tensor(name) for name in f.keys()}  # noqa: SIM118 (safe_open has no __iter__)
    got = dict(read_tensors(file, sorted(want)))
    assert set(got) == set(want)
    for name, tensor in got.items():
        assert tensor.dtype == want[name].dtype and torch.equal(tensor, want[name]), name
        assert tensor.untyped_storage().nbytes() == tensor.numel() * tensor.element_size(), name
