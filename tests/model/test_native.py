"""hexamer's C projection kernel (``panel_gemm.c``): same results as PyTorch / transformers,
deterministic across thread counts, and a clean fallback where it cannot be built."""

from __future__ import annotations

import copy
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
import torch
import torch.nn.functional as F

from hexamer.model import load_model
from hexamer.model import native as native_mod
from hexamer.model.cpu import (
    PackedLinear,
    PanelHead,
    PanelLinear,
    onednn_available,
    use_cpu_linears,
    use_native_linears,
)
from hexamer.model.native import native_kernels, native_status

HAVE_CC = shutil.which("cc") is not None or shutil.which("gcc") is not None


@pytest.fixture(scope="module")
def kernels() -> native_mod.NativeKernels:
    k = native_kernels()
    if k is None:
        if HAVE_CC:  # a machine with a compiler must build it: never hide a broken kernel as a skip
            pytest.fail(f"native kernels did not load although a C compiler exists: {native_status()}")
        pytest.skip(f"no C compiler: {native_status()}")
    return k


@contextmanager
def rebuilt_without_bf16_dot(
    cflags: str, cache: Path, monkeypatch: Any
) -> Iterator[native_mod.NativeKernels]:
    """The kernels compiled afresh into ``cache`` with ``cflags`` that take away the bf16 dot
    instruction (another CPU's path); the normal build is loaded again afterwards."""
    monkeypatch.setenv("HEXAMER_CACHE", str(cache))
    monkeypatch.setenv("HEXAMER_NATIVE_CFLAGS", cflags)
    native_kernels.cache_clear()
    try:
        built = native_kernels()
        assert built is not None and not built.bf16_dot, native_status()
        yield built
    finally:
        native_kernels.cache_clear()


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("n", [1, 31, 32, 33, 100])
@pytest.mark.parametrize("k", [1, 2, 3, 64, 129])
def test_linear_matches_torch_on_every_tile_shape(
    kernels: native_mod.NativeKernels, dtype: torch.dtype, n: int, k: int
) -> None:
    gen = torch.Generator().manual_seed(n * 1000 + k)
    w = torch.randn(n, k, generator=gen).to(dtype)
    panels = kernels.pack(w)
    pairs = dtype == torch.bfloat16 and kernels.bf16_dot  # k-pair panels pad K to even
    assert panels.numel() == -(-n // 32) * 32 * (k + k % 2 if pairs else k)
    assert torch.equal(kernels.unpack(panels, n, k), w)
    for m in (1, 2, 3, 7, 8, 9, 16, 17, 40):
        x = torch.randn(m, k, generator=gen).to(dtype)
        got = kernels.linear(x, panels, n)
        want = (x.double() @ w.double().T).float()  # products of bf16 values are exact in fp32
        torch.testing.assert_close(got, want, atol=1e-4 * max(1, k) ** 0.5, rtol=1e-5)


@pytest.mark.parametrize("n", [1, 31, 32, 100])
@pytest.mark.parametrize("m", [1, 3, 8, 17])
def test_bf16_output_is_the_fp32_output_rounded_once(
    kernels: native_mod.NativeKernels, n: int, m: int
) -> None:
    gen = torch.Generator().manual_seed(n + 100 * m)
    w, x = torch.randn(n, 67, generator=gen).bfloat16(), torch.randn(m, 67, generator=gen).bfloat16()
    panels = kernels.pack(w)
    got = kernels.linear(x, panels, n, torch.bfloat16)
    assert got.dtype == torch.bfloat16 and torch.equal(got, kernels.linear(x, panels, n).to(torch.bfloat16))
    with pytest.raises(ValueError, match=r"output dtype torch\.bfloat16 is not possible"):
        kernels.linear(x.float(), kernels.pack(w.float()), n, torch.bfloat16)


def test_bf16_rounding_keeps_nan_and_infinity(kernels: native_mod.NativeKernels) -> None:
    w = torch.ones(32, 2).bfloat16()
    x = torch.tensor([[float("nan"), 1.0], [float("inf"), 1.0], [3e38, 3e38]]).bfloat16()
    got = kernels.linear(x, kernels.pack(w), 32, torch.bfloat16)
    assert torch.equal(got.float().isnan(), kernels.linear(x, kernels.pack(w), 32).isnan())
    assert got[0].isnan().all() and (got[1] == float("inf")).all() and (got[2] == float("inf")).all()


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("n", [7, 64, 1000, 1024])
def test_rms_norm_rounds_like_the_reference(
    kernels: native_mod.NativeKernels, dtype: torch.dtype, n: int
) -> None:
    """Against the model's PyTorch RMSNorm (Hugging Face's maths): bf16 bit for bit; fp32 within
    one unit in the last place (only the summation of mean(x^2) differs)."""
    from hexamer.model.llama import RMSNorm

    gen = torch.Generator().manual_seed(n)
    norm = RMSNorm(n, 1e-5).to(dtype)
    with torch.no_grad():
        norm.weight.copy_(torch.rand(n, generator=gen) + 0.5)
    x = (torch.randn(4, 9, n, generator=gen) * 3).to(dtype)
    with torch.inference_mode():
        want = norm(x)
        got = kernels.rms_norm(x, norm.weight, norm.eps)
    assert got.shape == x.shape and got.dtype == dtype
    if dtype == torch.bfloat16:
        assert torch.equal(got, want)
    else:
        torch.testing.assert_close(got, want, atol=0, rtol=2.5e-7)
    with pytest.raises(ValueError, match="rms_norm takes"):
        kernels.rms_norm(x, norm.weight.double(), 1e-5)


def test_results_do_not_depend_on_thread_count(kernels: native_mod.NativeKernels) -> None:
    w = torch.randn(200, 96)
    x = torch.randn(19, 96)
    panels = kernels.pack(w)
    before = torch.get_num_threads()
    try:
        torch.set_num_threads(1)
        one = kernels.linear(x, panels, 200)
        torch.set_num_threads(max(2, before))
        many = kernels.linear(x, panels, 200)
    finally:
        torch.set_num_threads(before)
    assert torch.equal(one, many)  # each output is one thread's fixed-order sum


def test_pack_rejects_what_it_cannot_lay_out(kernels: native_mod.NativeKernels) -> None:
    with pytest.raises(ValueError, match="float16"):
        kernels.pack(torch.zeros(4, 4, dtype=torch.float16))
    with pytest.raises(ValueError, match="shape"):
        kernels.pack(torch.zeros(4))
    panels = kernels.pack(torch.zeros(4, 8, dtype=torch.bfloat16))
    with pytest.raises(ValueError, match="bfloat16 activations"):
        kernels.linear(torch.zeros(2, 8), panels, 4)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_panel_linear_is_a_drop_in_linear(kernels: native_mod.NativeKernels, dtype: torch.dtype) -> None:
    lin = torch.nn.Linear(40, 70, bias=True).to(dtype).requires_grad_(False)
    panel = PanelLinear(lin, kernels)
    x = torch.randn(2, 3, 40).to(dtype)
    tol = {"atol": 1e-5, "rtol": 1e-5} if dtype == torch.float32 else {"atol": 2e-2, "rtol": 2e-2}
    out = panel(x)
    assert out.shape == (2, 3, 70) and out.dtype == dtype
    torch.testing.assert_close(out, lin(x), **tol)
    assert torch.equal(panel.weight, lin.weight)  # unpacking is exact
    state = panel.state_dict()
    assert set(state) == {"weight", "bias"} and torch.equal(state["weight"], lin.weight)
    torch.testing.assert_close(copy.deepcopy(panel)(x), out, atol=0, rtol=0)
    torch.testing.assert_close(panel.dense()(x), lin(x), atol=0, rtol=0)
    assert "dtype=" in repr(panel)


def test_model_with_panel_linears_matches_transformers(make_checkpoint: Any) -> None:
    hf, path = make_checkpoint(num_key_value_heads=2)
    model, config = load_model(path)
    assert use_native_linears(model) == 7 * config.num_hidden_layers or native_kernels() is None
    if native_kernels() is None:
        pytest.skip(native_status())
    assert isinstance(model.layers[0].mlp.down_proj, PanelLinear)
    ids = torch.randint(0, config.vocab_size, (3, 21), generator=torch.Generator().manual_seed(3))
    with torch.inference_mode():
        ours = model(ids).logits
        theirs = hf(ids).logits
    torch.testing.assert_close(ours, theirs, atol=1e-4, rtol=1e-4)


def test_use_cpu_linears_prefers_native_then_onednn(make_checkpoint: Any, monkeypatch: Any) -> None:
    _, path = make_checkpoint()
    model, _ = load_model(path)
    onednn = "onednn" if onednn_available() else "torch"
    assert use_cpu_linears(model) == ("native" if native_kernels() is not None else onednn)
    onednn_model, _ = load_model(path)
    assert use_cpu_linears(onednn_model, onednn=True) == onednn
    assert not any(isinstance(m, PanelLinear) for m in onednn_model.modules())
    plain, _ = load_model(path)
    assert use_cpu_linears(plain, native=False, onednn=False) == "torch"

    monkeypatch.setattr(native_mod, "native_kernels", lambda: None)
    monkeypatch.setattr("hexamer.model.cpu.native_kernels", lambda: None)
    fallback, _ = load_model(path)
    assert use_cpu_linears(fallback) == ("onednn" if onednn_available() else "torch")
    assert not any(isinstance(m, PanelLinear) for m in fallback.modules())
    assert any(isinstance(m, PackedLinear) for m in fallback.modules()) == onednn_available()
    with pytest.raises(RuntimeError, match="native CPU kernels"):
        use_cpu_linears(load_model(path)[0], native=True)


def test_build_is_cached_and_failures_fall_back(tmp_path: Path, monkeypatch: Any) -> None:
    if not HAVE_CC:
        pytest.skip("no C compiler")
    monkeypatch.setenv("HEXAMER_CACHE", str(tmp_path))
    native_kernels.cache_clear()
    try:
        first = native_kernels()
        assert first is not None and first.path.parent == tmp_path / "native"
        assert [p.name for p in (tmp_path / "native").iterdir()] == [first.path.name]  # no temp left
        assert native_mod._build() == first.path  # second call reuses the cached library

        native_kernels.cache_clear()
        monkeypatch.setenv("HEXAMER_NATIVE", "0")
        assert native_kernels() is None and "HEXAMER_NATIVE=0" in native_status()

        native_kernels.cache_clear()
        monkeypatch.delenv("HEXAMER_NATIVE")
        monkeypatch.setenv("CC", "hexamer-no-such-compiler")
        assert native_kernels() is None and "no C compiler" in native_status()

        native_kernels.cache_clear()
        monkeypatch.setenv("CC", "false")  # a compiler that fails: no half-written library remains
        monkeypatch.setattr(native_mod, "cpu_signature", lambda: "another cpu")
        assert native_kernels() is None and "failed to compile" in native_status()
        assert [p.name for p in (tmp_path / "native").iterdir()] == [first.path.name]
    finally:
        native_kernels.cache_clear()


def test_bf16_models_use_the_native_kernel_too(make_checkpoint: Any) -> None:
    _, path = make_checkpoint()
    model, config = load_model(path, dtype=torch.bfloat16)
    chosen = use_cpu_linears(model)
    assert chosen == (
        "native" if native_kernels() is not None else "onednn" if onednn_available() else "torch"
    )
    dense, _ = load_model(path, dtype=torch.bfloat16)
    ids = torch.randint(0, config.vocab_size, (2, 11), generator=torch.Generator().manual_seed(5))
    with torch.inference_mode():
        torch.testing.assert_close(model(ids).logits, dense(ids).logits, atol=3e-2, rtol=3e-2)


def test_native_required_for_float16_says_why(make_checkpoint: Any) -> None:
    _, path = make_checkpoint()
    half, _ = load_model(path, dtype=torch.float16)
    with pytest.raises(RuntimeError, match="float32 and bfloat16 only"):
        use_cpu_linears(half, native=True)
    assert not any(isinstance(m, PanelLinear) for m in half.modules())


def test_bf16_widening_path_where_the_cpu_has_no_bf16_dot(tmp_path: Path, monkeypatch: Any) -> None:
    """The fp32-widening bf16 path (AVX2 / NEON machines), forced here by compiler flags."""
    first = native_kernels()
    if first is None or not first.bf16_dot:
        pytest.skip("this build already uses the widening path (covered by the tests above)")
    with rebuilt_without_bf16_dot("-mno-avx512bf16", tmp_path, monkeypatch) as widening:
        w = torch.randn(70, 33).to(torch.bfloat16)
        panels = widening.pack(w)
        assert panels.numel() == 96 * 33 and torch.equal(widening.unpack(panels, 70, 33), w)
        for m in (1, 5, 16):
            x = torch.randn(m, 33).to(torch.bfloat16)
            want = (x.double() @ w.double().T).float()
            torch.testing.assert_close(widening.linear(x, panels, 70), want, atol=1e-4, rtol=1e-5)
            got = widening.linear(x, panels, 70, torch.bfloat16)
            assert torch.equal(got, widening.linear(x, panels, 70).to(torch.bfloat16))


# ------------------------------------------------------------------------------------------
# the LM head and the whole native model


def test_panel_head_scores_a_block_of_rows_like_f_linear(kernels: native_mod.NativeKernels) -> None:
    gen = torch.Generator().manual_seed(11)
    head = PanelHead(kernels)
    for dtype in (torch.float32, torch.bfloat16):
        weight = torch.randn(300, 48, generator=gen).to(dtype)
        hidden = torch.randn(2, 3, 48, generator=gen).to(dtype)
        with torch.inference_mode():
            got = head(hidden, weight, slice(37, 290))
            want = F.linear(hidden, weight[37:290]).float()
            assert got is not None and got.shape == (2, 3, 253) and got.dtype == torch.float32
            if dtype == torch.bfloat16:
                assert torch.equal(got, want)  # rounded to bf16 before the upcast, as F.linear
            else:
                torch.testing.assert_close(got, want, atol=1e-5, rtol=1e-5)
            weight[40] += 1  # an in-place change is seen: the block is packed again
            torch.testing.assert_close(
                head(hidden, weight, slice(37, 290)), F.linear(hidden, weight[37:290]).float()
            )
            assert head(hidden, weight, slice(0, 300, 2)) is None  # not contiguous
            assert head(hidden.double(), weight, slice(0, 10)) is None
        assert head(hidden, weight, slice(0, 10)) is None  # autograd wants the plain path
    assert len(head._packed) <= PanelHead.MAX_BLOCKS


def test_fully_native_model_matches_transformers(make_checkpoint: Any) -> None:
    """Projections, norms, decode attention and the head all on hexamer's kernels: prefill and
    decode logits, whole vocabulary and a block of rows, against transformers."""
    from hexamer.model import KVCache
    from hexamer.model.llama import RMSNorm

    hf, path = make_checkpoint(num_key_value_heads=2, tie_word_embeddings=True)
    model, config = load_model(path)
    if use_cpu_linears(model) != "native":
        pytest.skip(native_status())
    assert model.head_kernel is not None
    assert all(m.kernel is not None for m in model.modules() if isinstance(m, RMSNorm))
    ids = torch.randint(0, config.vocab_size, (2, 10), generator=torch.Generator().manual_seed(12))
    with torch.inference_mode():
        want = hf(ids).logits
        cache = KVCache.for_model(model, 2, 16)
        prefill = model(ids[:, :7], kv_cache=cache).logits
        steps = [model(ids[:, i : i + 1], kv_cache=cache, vocab_rows=(40, 200)).logits for i in range(7, 10)]
    torch.testing.assert_close(prefill, want[:, :7], atol=1e-4, rtol=1e-4)
    torch.testing.assert_close(torch.cat(steps, 1), want[:, 7:, 40:200], atol=1e-4, rtol=1e-4)


# ------------------------------------------------------------------------------------------
# int8 weights (weight-only quantisation)


def _int8_case(n: int, k: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    gen = torch.Generator().manual_seed(seed)
    q = torch.randint(-127, 128, (n, k), generator=gen, dtype=torch.int8)
    return q, torch.rand(n, generator=gen) / 100 + 1e-4


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("n", [1, 31, 32, 33, 100])
@pytest.mark.parametrize("k", [1, 2, 3, 5, 64, 129])
def test_int8_linear_matches_the_dequantised_weight_on_every_tile_shape(
    kernels: native_mod.NativeKernels, dtype: torch.dtype, n: int, k: int
) -> None:
    """Against float64 on the dequantised weight (q * scale): the only difference is the fp32
    summation order, as for the float kernels."""
    q, scale = _int8_case(n, k, n * 1000 + k)
    panels = kernels.pack_int8(q, dtype)
    pairs = dtype == torch.bfloat16 and kernels.bf16_dot
    assert panels.dtype == torch.int8
    assert panels.numel() == -(-n // 32) * 32 * (k + k % 2 if pairs else k)
    assert torch.equal(kernels.unpack_int8(panels, n, k, dtype), q)
    w = q.double() * scale.double()[:, None]
    gen = torch.Generator().manual_seed(k)
    for m in (1, 2, 3, 7, 8, 9, 16, 17, 40):
        x = torch.randn(m, k, generator=gen).to(dtype)
        got = kernels.linear_int8(x, panels, scale, n)
        want = (x.double() @ w.T).float()
        bound = (x.double().abs() @ w.abs().T).max().item()  # fp32 rounding scales with sum |x w|
        torch.testing.assert_close(got, want, atol=1e-6 * max(bound, 1.0) * max(1, k) ** 0.5, rtol=1e-5)


@pytest.mark.parametrize("m", [1, 3, 8, 17])
def test_int8_bf16_output_is_the_fp32_output_rounded_once(kernels: native_mod.NativeKernels, m: int) -> None:
    q, scale = _int8_case(70, 67, m)
    panels = kernels.pack_int8(q, torch.bfloat16)
    x = torch.randn(m, 67).bfloat16()
    got = kernels.linear_int8(x, panels, scale, 70, torch.bfloat16)
    assert got.dtype == torch.bfloat16
    assert torch.equal(got, kernels.linear_int8(x, panels, scale, 70).to(torch.bfloat16))


def test_int8_kernel_rejects_mismatched_inputs(kernels: native_mod.NativeKernels) -> None:
    q, scale = _int8_case(40, 24, 0)
    with pytest.raises(ValueError, match="as int8"):
        kernels.pack_int8(q.float(), torch.float32)
    with pytest.raises(ValueError, match="float32 or bfloat16 activations"):
        kernels.pack_int8(q, torch.float16)
    panels = kernels.pack_int8(q, torch.float32)
    with pytest.raises(ValueError, match="scales"):
        kernels.linear_int8(torch.zeros(2, 24), panels, scale[:39], 40)
    with pytest.raises(ValueError, match="int8 panels do not hold"):
        kernels.linear_int8(torch.zeros(2, 25), panels, scale, 40)
    with pytest.raises(ValueError, match="output dtype"):
        kernels.linear_int8(torch.zeros(2, 24), panels, scale, 40, torch.bfloat16)


def test_int8_results_do_not_depend_on_thread_count(kernels: native_mod.NativeKernels) -> None:
    q, scale = _int8_case(200, 96, 5)
    x = torch.randn(19, 96)
    panels = kernels.pack_int8(q, torch.float32)
    before = torch.get_num_threads()
    try:
        torch.set_num_threads(1)
        one = kernels.linear_int8(x, panels, scale, 200)
        torch.set_num_threads(max(2, before))
        many = kernels.linear_int8(x, panels, scale, 200)
    finally:
        torch.set_num_threads(before)
    assert torch.equal(one, many)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_panel_int8_linear_matches_the_reference_int8_linear(
    kernels: native_mod.NativeKernels, dtype: torch.dtype
) -> None:
    from hexamer.model.cpu import PanelInt8Linear
    from hexamer.model.quant import Int8Linear

    lin = torch.nn.Linear(40, 70, bias=True).requires_grad_(False)
    ref = Int8Linear.from_linear(lin)
    panel = PanelInt8Linear(ref, kernels, dtype)
    x = torch.randn(2, 3, 40).to(dtype)
    with torch.inference_mode():
        out = panel(x)
        want = ref(x)
    assert out.shape == (2, 3, 70) and out.dtype == dtype
    tol = {"atol": 1e-5, "rtol": 1e-5} if dtype == torch.float32 else {"atol": 1e-2, "rtol": 1e-2}
    torch.testing.assert_close(out, want, **tol)
    assert torch.equal(panel.weight, ref.weight)  # unpacking is exact
    state = panel.state_dict()
    assert set(state) == {"weight", "weight_scale", "bias"} and state["weight"].dtype == torch.int8
    torch.testing.assert_close(copy.deepcopy(panel)(x), out, atol=0, rtol=0)
    assert "int8" in repr(panel)


def test_int8_avx2_build_matches(tmp_path: Path, monkeypatch: Any) -> None:
    """The same int8 kernels built without AVX-512 (the AVX2 path: widening, no VDPBF16PS)."""
    first = native_kernels()
    if first is None:
        pytest.skip(native_status())
    with rebuilt_without_bf16_dot("-mno-avx512f", tmp_path, monkeypatch) as avx2:
        for dtype in (torch.float32, torch.bfloat16):
            for n, k in ((70, 33), (32, 64), (5, 3)):
                q, scale = _int8_case(n, k, n + k)
                panels = avx2.pack_int8(q, dtype)
                assert panels.numel() == -(-n // 32) * 32 * k  # no k pairs without a bf16 dot
                assert torch.equal(avx2.unpack_int8(panels, n, k, dtype), q)
                w = q.double() * scale.double()[:, None]
                for m in (1, 5, 16):
                    x = torch.randn(m, k).to(dtype)
                    want = (x.double() @ w.T).float()
                    torch.testing.assert_close(
                        avx2.linear_int8(x, panels, scale, n), want, atol=1e-4, rtol=1e-5
                    )
