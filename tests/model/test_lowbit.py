"""4-bit grouped weights and int8 activations (``hexamer.model.lowbit``, ``lowbit_gemm.c``): the
quantiser's error bounds, the kernels against float64 on the dequantised weights and activations
at every tile shape, a model against transformers holding the dequantised weights, int4 folders
(write, load, refuse) and the fallback without the kernels."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest
import torch
import torch.nn.functional as F

from hexamer.model import load_model
from hexamer.model import native as native_mod
from hexamer.model.cpu import PanelLowbitLinear, PanelSwiGLU, use_cpu_linears
from hexamer.model.lowbit import (
    GROUP,
    Int4Linear,
    dequantize_int4,
    fake_quantize_activations,
    quantize_int4,
)
from hexamer.model.native import native_kernels
from hexamer.model.quant import Int8Linear, folder_quantization, int8_weight_bytes, quantize_folder
from hexamer.synthetic import build_carbon_folder


@pytest.fixture(scope="module")
def float_folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_carbon_folder(tmp_path_factory.mktemp("float") / "m")


@pytest.fixture(scope="module")
def int4_folder(float_folder: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return quantize_folder(float_folder, tmp_path_factory.mktemp("int4") / "q", bits=4)


def _kernels() -> Any:
    kernels = native_kernels()
    if kernels is None:
        pytest.skip(native_mod.native_status())
    return kernels


def _ids(vocab: int, seed: int = 0) -> torch.Tensor:
    return torch.randint(0, vocab, (2, 13), generator=torch.Generator().manual_seed(seed))


def test_int4_codes_are_within_half_a_step_and_use_all_16_levels() -> None:
    w = torch.randn(7, 70, generator=torch.Generator().manual_seed(1))
    w[3] = 0.0  # an all-zero row: scale 0, codes 0
    codes, scales = quantize_int4(w)
    assert codes.dtype == torch.uint8 and codes.shape == (7, 48)  # 70 -> 96 inputs, two per byte
    assert scales.dtype == torch.float16 and scales.shape == (7, 3)
    back = dequantize_int4(codes, scales, 70)
    step = scales.float().abs().repeat_interleave(GROUP, dim=1)[:, :70]
    err = (back - w).abs()
    # half a step, except a weight of the sign opposite to the group's extreme at +8 steps (one step)
    assert (err <= step / 2 + 1e-6).float().mean() > 0.99 and (err <= step + 1e-6).all()
    groups = torch.nn.functional.pad(w, (0, 26)).view(7, 3, GROUP)
    extreme = groups.gather(2, groups.abs().argmax(2, keepdim=True)).squeeze(2)
    torch.testing.assert_close(scales.float() * -8, extreme, atol=0, rtol=1e-3)  # fp16-rounded
    assert torch.equal(back[3], torch.zeros(70)) and (scales[3] == 0).all()
    levels = torch.stack([codes & 0xF, codes >> 4], 2).unique()
    assert levels.tolist() == list(range(16))
    with pytest.raises(ValueError, match="non-finite"):
        quantize_int4(torch.tensor([[1.0, float("nan")]]))


def test_int4_quantizes_in_row_chunks_as_a_whole() -> None:
    """Row chunks (256 rows) bound the temporaries; the result does not depend on them."""
    w = torch.randn(600, 40, generator=torch.Generator().manual_seed(2)).bfloat16()
    codes, scales = quantize_int4(w)
    one = [quantize_int4(w[i : i + 1]) for i in (0, 255, 256, 599)]
    for i, (c, s) in zip((0, 255, 256, 599), one, strict=True):
        assert torch.equal(codes[i : i + 1], c) and torch.equal(scales[i : i + 1], s)


def test_activations_round_per_group_within_half_a_step() -> None:
    x = torch.randn(5, 70)
    x[2] = 0.0
    x[3, 40] = 100.0  # an outlier coarsens only its own group of 32 inputs
    got = fake_quantize_activations(x)
    groups = torch.nn.functional.pad(x, (0, 26)).view(5, 3, 32)
    step = (groups.abs().amax(-1, keepdim=True) / 127).expand(5, 3, 32).reshape(5, 96)[:, :70]
    assert ((got - x).abs() <= step / 2 + 1e-6).all() and torch.equal(got[2], torch.zeros(70))
    assert step[3, 0] < 0.05 and step[3, 40] > 0.7
    assert torch.equal(fake_quantize_activations(x[:, :32]), got[:, :32])


def test_int4_linear_is_the_dequantised_linear_on_rounded_inputs() -> None:
    lin = torch.nn.Linear(40, 9, bias=True).requires_grad_(False)
    ref = Int4Linear.from_linear(lin)
    x = torch.randn(3, 4, 40)
    want = F.linear(fake_quantize_activations(x).double(), ref.dequantized(torch.float64), lin.bias.double())
    torch.testing.assert_close(ref(x).double(), want, atol=1e-5, rtol=1e-5)
    ref.to(torch.bfloat16)
    assert ref.weight_scale.dtype == torch.float16 and ref.weight.dtype == torch.uint8
    assert set(ref.state_dict()) == {"weight", "weight_scale", "bias"}


@pytest.mark.parametrize("k", [1, 31, 32, 33, 100, 256])
@pytest.mark.parametrize("n", [1, 15, 16, 17, 48])
def test_kernels_match_float64_at_every_tile_shape(n: int, k: int) -> None:
    """Rows 1-9 (each register tile), 16 (batched decode) and 300 (prefill); a partial column
    panel; K not a multiple of 4 or of the group."""
    kernels = _kernels()
    gen = torch.Generator().manual_seed(n * 1000 + k)
    w = torch.randn(n, k, generator=gen)
    codes, scales = quantize_int4(w)
    q8 = torch.randint(-127, 128, (n, k), generator=gen, dtype=torch.int8)
    s8 = torch.rand(n, generator=gen) + 0.01
    panels4, ps4 = kernels.pack_w4(codes, scales, k)
    panels8, sums = kernels.pack_w8(q8)
    w4 = dequantize_int4(codes, scales, k).double()
    w8 = q8.double() * s8.double()[:, None]
    for m in (1, 2, 3, 4, 5, 6, 7, 8, 9, 16, 300):
        x = torch.randn(m, k, generator=gen) * 3
        xq = fake_quantize_activations(x).double()
        got4 = kernels.linear_w4a8(x, panels4, ps4, n).double()
        got8 = kernels.linear_w8a8(x, panels8, sums, s8, n).double()
        torch.testing.assert_close(got4, xq @ w4.T, atol=1e-4, rtol=1e-5)
        torch.testing.assert_close(got8, xq @ w8.T, atol=1e-3, rtol=1e-5)


@pytest.mark.parametrize("k", [31, 33, 100, 256])
@pytest.mark.parametrize("sizes", [(16, 16, 16), (45, 45, 17), (1, 1, 33), (48, 48, 1)])
def test_one_call_projections_match_float64_at_every_tile_shape(sizes: tuple[int, int, int], k: int) -> None:
    """q/k/v side by side and SwiGLU's gate/up in one call, against float64 on the dequantised
    weights: every row-tile size, partial panels in each weight, K off the group size."""
    kernels = _kernels()
    gen = torch.Generator().manual_seed(sum(sizes) * 1000 + k)
    weights = [quantize_int4(torch.randn(n, k, generator=gen)) for n in sizes]
    packed = [
        (*kernels.pack_w4(codes, scales, k), n) for (codes, scales), n in zip(weights, sizes, strict=True)
    ]
    dense = [dequantize_int4(codes, scales, k).double() for codes, scales in weights]
    for m in (1, 2, 3, 4, 5, 6, 7, 8, 9, 16, 70):
        x = torch.randn(m, k, generator=gen) * 3
        outs = [fake_quantize_activations(x).double() @ w.T for w in dense]
        torch.testing.assert_close(
            kernels.linear_w4a8_multi(x, packed).double(), torch.cat(outs, 1), atol=1e-4, rtol=1e-5
        )
        torch.testing.assert_close(
            kernels.linear_w4a8_multi(x, packed[:2]).double(), torch.cat(outs[:2], 1), atol=1e-4, rtol=1e-5
        )
        got = kernels.swiglu_w4a8(x, packed[0][:2], packed[1][:2], sizes[0]).double()
        torch.testing.assert_close(got, F.silu(outs[0]) * outs[1], atol=1e-3, rtol=1e-4)  # products of ~50s


def test_one_call_projections_refuse_mismatched_weights() -> None:
    kernels = _kernels()
    codes, scales = quantize_int4(torch.randn(16, 64))
    panels, ps = kernels.pack_w4(codes, scales, 64)
    with pytest.raises(ValueError, match="int4 panels"):
        kernels.linear_w4a8_multi(torch.randn(2, 64), [(panels, ps, 16), (panels, ps, 32)])
    with pytest.raises(ValueError, match="2 or 3"):
        kernels.linear_w4a8_multi(torch.randn(2, 64), [(panels, ps, 16)])
    with pytest.raises(ValueError, match="int4 panels"):
        kernels.swiglu_w4a8(torch.randn(2, 96), (panels, ps), (panels, ps), 16)


def test_fused_int4_projections_give_the_same_results_in_any_call_order(make_checkpoint: Any) -> None:
    """q/k/v share one call and gate/up run as one SwiGLU call; a projection called alone, out of
    order or on another input gives what it gives unfused; the state dict and copies are unchanged."""
    _kernels()
    _, path = make_checkpoint(num_key_value_heads=2)
    model, config = load_model(path, dtype="int4")
    ids = _ids(config.vocab_size, seed=3)
    with torch.inference_mode():
        reference_logits = model(ids).logits
    keys = set(model.state_dict())
    assert use_cpu_linears(model) == "native"
    attn, mlp = model.layers[0].self_attn, model.layers[0].mlp
    assert isinstance(attn.q_proj, PanelLowbitLinear) and attn.q_proj.group is not None
    assert isinstance(mlp, PanelSwiGLU) and set(model.state_dict()) == keys
    x = torch.randn(3, 1, config.hidden_size)
    with torch.inference_mode():
        group, attn.q_proj.group = attn.q_proj.group, None
        alone = {name: getattr(attn, name)(x) for name in ("q_proj", "k_proj", "v_proj")}  # one call each
        attn.q_proj.group = group
        torch.testing.assert_close(alone["k_proj"], attn.k_proj.reference()(x), atol=1e-5, rtol=1e-5)
        assert torch.equal(attn.k_proj(x), alone["k_proj"])  # before q: runs alone
        assert torch.equal(attn.q_proj(x), alone["q_proj"])  # computes q, k and v
        assert torch.equal(attn.v_proj(x.clone()), alone["v_proj"])  # another input: runs alone
        assert torch.equal(attn.v_proj(x), alone["v_proj"]) and torch.equal(attn.k_proj(x), alone["k_proj"])
        want = mlp.down_proj(F.silu(mlp.gate_proj.reference()(x)) * mlp.up_proj.reference()(x))
        torch.testing.assert_close(mlp(x), want, atol=1e-5, rtol=1e-5)
        _close_but_for_rounding_flips(model(ids).logits, reference_logits)
        copied = copy.deepcopy(model)
        torch.testing.assert_close(copied(ids).logits, model(ids).logits, atol=1e-5, rtol=1e-5)


def test_int4_decode_with_fused_projections_generates_as_without(int4_folder: Path) -> None:
    """Decode steps (the attention kernel reading q/k/v as views of one call's output) give the
    tokens the separate calls give: greedy, batch 1 and 2."""
    from hexamer import Carbon
    from hexamer.model.llama import MLP

    _kernels()
    carbon = Carbon.from_pretrained(int4_folder, dtype="int4", native=True)
    carbon.model.layers_kernel = None  # module by module (the one-call step: test_decode_step.py)
    assert carbon.model.layers[0].self_attn.q_proj.group is not None
    prompts = ["ACGTTGCAAC" * 6, "TTGACCA" * 9]
    fused = [g.sequence for g in carbon.generate(prompts, max_bp=60, temperature=0.0)]
    alone = carbon.generate(prompts[0], max_bp=60, temperature=0.0).sequence
    for layer in carbon.model.layers:
        layer.self_attn.q_proj.group = None
        layer.mlp.__class__ = MLP
    separate = [g.sequence for g in carbon.generate(prompts, max_bp=60, temperature=0.0)]
    assert fused == separate and alone == carbon.generate(prompts[0], max_bp=60, temperature=0.0).sequence


def test_kernel_refuses_mismatched_panels() -> None:
    kernels = _kernels()
    codes, scales = quantize_int4(torch.randn(16, 64))
    panels, ps = kernels.pack_w4(codes, scales, 64)
    with pytest.raises(ValueError, match="int4 panels"):
        kernels.linear_w4a8(torch.randn(2, 96), panels, ps, 16)
    with pytest.raises(ValueError, match="float32"):
        kernels.linear_w4a8(torch.randn(2, 64).bfloat16(), panels, ps, 16)


def _with_rounded_inputs(hf: Any) -> Any:
    """transformers' model with every decoder projection's input rounded per row to int8."""
    for layer in hf.model.layers:
        for part in (layer.self_attn, layer.mlp):
            for child in part.children():
                if isinstance(child, torch.nn.Linear):
                    child.register_forward_pre_hook(lambda _m, args: (fake_quantize_activations(args[0]),))
    return hf


def _close_but_for_rounding_flips(got: torch.Tensor, want: torch.Tensor) -> None:
    """Logits equal to 2e-4 but for a few: a float32 difference of 1e-7 between two correct
    implementations can move an activation across a rounding boundary (one int8 step) in one
    layer, which shifts what follows by a small amount."""
    close = torch.isclose(got, want, atol=2e-4, rtol=2e-4)
    assert close.float().mean() > 0.8 and (got - want).abs().max() < 0.1, (got - want).abs().max()


@pytest.mark.parametrize("dtype", ["int4", "int8-a8"])
def test_model_matches_transformers_on_the_dequantised_weights(make_checkpoint: Any, dtype: str) -> None:
    """The peer: transformers' Llama holding q * scale, each projection's input rounded to int8."""
    hf, path = make_checkpoint(num_key_value_heads=2)
    model, config = load_model(path, dtype=dtype)
    kind = Int4Linear if dtype == "int4" else Int8Linear
    quantized = [m for m in model.modules() if isinstance(m, kind)]
    assert len(quantized) == 7 * config.num_hidden_layers
    peer = _with_rounded_inputs(copy.deepcopy(hf))
    with torch.no_grad():
        for i, layer in enumerate(model.layers):
            for part in ("self_attn", "mlp"):
                for name, child in getattr(layer, part).named_children():
                    if isinstance(child, kind):
                        getattr(getattr(peer.model.layers[i], part), name).weight.copy_(child.dequantized())
    ids = _ids(config.vocab_size)
    with torch.inference_mode():
        ours, theirs, float_logits = model(ids).logits, peer(ids).logits, hf(ids).logits
    _close_but_for_rounding_flips(ours, theirs)
    assert (ours - float_logits).abs().max() > 1e-2  # it really is quantized
    if use_cpu_linears(model) == "native":
        assert isinstance(model.layers[0].mlp.down_proj, PanelLowbitLinear)
        with torch.inference_mode():
            _close_but_for_rounding_flips(model(ids).logits, theirs)


def test_int4_folder_round_trip(float_folder: Path, int4_folder: Path) -> None:
    qc = json.loads((int4_folder / "config.json").read_text())["quantization_config"]
    assert qc["bits"] == 4 and qc["group_size"] == GROUP and folder_quantization(int4_folder) == qc
    from safetensors import safe_open

    with safe_open(str(int4_folder / "model.safetensors"), "pt") as f:
        assert f.get_tensor("model.layers.0.mlp.up_proj.weight").dtype == torch.uint8
        assert f.get_tensor("model.layers.0.mlp.up_proj.weight_scale").dtype == torch.float16
    on_the_fly, cfg = load_model(float_folder, dtype="int4")
    stored, _ = load_model(int4_folder)
    pairs = [
        (a, b)
        for a, b in zip(on_the_fly.modules(), stored.modules(), strict=True)
        if isinstance(a, Int4Linear)
    ]
    assert pairs and all(
        torch.equal(a.weight, b.weight) and torch.equal(a.weight_scale, b.weight_scale) for a, b in pairs
    )
    ids = _ids(cfg.vocab_size, 1)
    with torch.inference_mode():
        want = on_the_fly(ids).logits
        assert torch.equal(stored(ids).logits, want)
        if use_cpu_linears(stored) == "native":
            _close_but_for_rounding_flips(stored(ids).logits, want)
            state = stored.state_dict()
            assert state["layers.0.mlp.up_proj.weight"].dtype == torch.uint8
    held = sum(t.numel() * t.element_size() for t in [*on_the_fly.parameters(), *on_the_fly.buffers()])
    rope = sum(
        b.numel() * b.element_size() for n, b in on_the_fly.named_buffers() if "rotary" in n or "rope" in n
    )
    assert int8_weight_bytes(cfg, torch.float32, bits=4) == held - rope


def test_int4_refusals(float_folder: Path, int4_folder: Path, tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="int4 weights; dtype 'int8'"):
        load_model(int4_folder, dtype="int8")
    with pytest.raises(ValueError, match="already quantized"):
        quantize_folder(int4_folder, tmp_path / "again", bits=4)
    import shutil

    bad = tmp_path / "bad"
    shutil.copytree(int4_folder, bad)
    raw = json.loads((bad / "config.json").read_text())
    raw["quantization_config"]["group_size"] = 128
    (bad / "config.json").write_text(json.dumps(raw))
    with pytest.raises(ValueError, match="group_size 128 is not supported"):
        load_model(bad)


def test_fallback_without_native_kernels(int4_folder: Path, monkeypatch: Any) -> None:
    reference, cfg = load_model(int4_folder)
    ids = _ids(cfg.vocab_size, 2)
    with torch.inference_mode():
        want = reference(ids).logits
    monkeypatch.setattr("hexamer.model.cpu.native_kernels", lambda: None)
    model, _ = load_model(int4_folder)
    assert use_cpu_linears(model) in ("onednn", "torch")
    assert isinstance(model.layers[0].self_attn.q_proj, Int4Linear)
    with torch.inference_mode():
        assert torch.equal(model(ids).logits, want)


def test_carbon_scores_with_int4(float_folder: Path, int4_folder: Path) -> None:
    from hexamer import Carbon

    seq = "ACGTTGCA" * 30
    ref = Carbon.from_pretrained(float_folder).score([seq], level="bp")[0]
    cases = (
        (int4_folder, "auto"),
        (int4_folder, "int4-bf16"),
        (float_folder, "int4"),
        (float_folder, "int8-a8"),
    )
    for folder, dtype in cases:
        got = Carbon.from_pretrained(folder, dtype=dtype).score([seq], level="bp")[0]
        assert got.n_scored == ref.n_scored
        assert abs(got.mean - ref.mean) < 0.05 * abs(ref.mean)


@pytest.mark.slow
def test_the_path_without_vnni_gives_the_same_results(tmp_path: Path, monkeypatch: Any) -> None:
    """Another CPU's path: the library compiled without AVX-512 VNNI (plain C loops) passes the
    self-check and agrees with the VNNI build (the same integer sums and scale order)."""
    vnni = _kernels()
    codes, scales = quantize_int4(torch.randn(40, 100))
    x = torch.randn(19, 100)
    want = vnni.linear_w4a8(x, *vnni.pack_w4(codes, scales, 100), 40)
    monkeypatch.setenv("HEXAMER_CACHE", str(tmp_path))
    monkeypatch.setenv("HEXAMER_NATIVE_CFLAGS", "-mno-avx512vnni")
    native_kernels.cache_clear()
    try:
        plain = native_kernels()
        assert plain is not None and not plain.vnni, native_mod.native_status()
        got = plain.linear_w4a8(x, *plain.pack_w4(codes, scales, 100), 40)
        torch.testing.assert_close(got, want, atol=1e-5, rtol=1e-5)
        gate, up = plain.pack_w4(codes, scales, 100), plain.pack_w4(codes.flip(0), scales.flip(0), 100)
        torch.testing.assert_close(
            plain.swiglu_w4a8(x, gate, up, 40),
            vnni.swiglu_w4a8(
                x, vnni.pack_w4(codes, scales, 100), vnni.pack_w4(codes.flip(0), scales.flip(0), 100), 40
            ),
            atol=1e-5,
            rtol=1e-5,
        )
    finally:
        native_kernels.cache_clear()
