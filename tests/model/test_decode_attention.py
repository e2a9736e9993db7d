"""hexamer's C decode-attention kernel (``decode_attention.c``): the same attention as a float64
reference, the same cache contents as the PyTorch path bit for bit, the same logits as
``transformers`` through multi-step decoding, and clear errors for what it does not take."""

from __future__ import annotations

import shutil
from typing import Any

import pytest
import torch

from hexamer.model import KVCache, load_model
from hexamer.model import native as native_mod
from hexamer.model.cpu import use_cpu_linears, use_native_attention
from hexamer.model.kv_cache import gather_blocks
from hexamer.model.llama import DECODE_KERNEL_MAX_TOKENS
from hexamer.model.native import native_kernels, native_status
from hexamer.model.native_check import attention_reference
from hexamer.model.rope import apply_rope, rope_cos_sin

HAVE_CC = shutil.which("cc") is not None or shutil.which("gcc") is not None


@pytest.fixture(scope="module")
def kernels() -> native_mod.NativeKernels:
    k = native_kernels()
    if k is None:
        if HAVE_CC:
            pytest.fail(f"native kernels did not load although a C compiler exists: {native_status()}")
        pytest.skip(f"no C compiler: {native_status()}")
    return k


def _case(
    gen: torch.Generator, act: torch.dtype, cache: torch.dtype, b: int, t: int, h: int, g: int, d: int
) -> dict[str, Any]:
    """Random inputs: cache rows in shuffled order, ragged valid slots, new tokens at the end of
    each row (slots differ per row), YaRN-like scaled tables."""
    cache_rows, slots_total, s = b + 2, 70, 40 + t
    q = torch.randn(b, t, h, d, generator=gen).to(act)
    k_new, v_new = (torch.randn(b, t, g, d, generator=gen).to(act) for _ in range(2))
    k_cache, v_cache = (torch.randn(cache_rows, g, slots_total, d, generator=gen).to(cache) for _ in range(2))
    rows = torch.randperm(cache_rows, generator=gen)[:b]
    lengths = torch.randint(t, s - t + 1, (b,), generator=gen)
    slots = lengths[:, None] + torch.arange(t)  # (b, t): the new tokens follow each row's cache
    valid = torch.rand(b, s, generator=gen) < 0.8
    key = torch.arange(s)
    mask = ((key <= slots[..., None]) & valid[:, None, :]) | (key == slots[..., None])
    inv_freq = 1.0 / (10000 ** (torch.arange(0, d, 2).float() / d))
    cos, sin = rope_cos_sin(inv_freq, slots, 1.1, act)
    return dict(q=q, k=k_new, v=v_new, cos=cos, sin=sin, k_cache=k_cache, v_cache=v_cache, slots=slots,
                mask=mask[:, None], rows=rows)  # fmt: skip


def _pytorch_path(c: dict[str, Any], scale: float) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """What the model does without the kernel: rotate in the activation dtype, write, attend."""
    q = apply_rope(c["q"].transpose(1, 2), c["cos"], c["sin"]).transpose(1, 2)
    k = apply_rope(c["k"].transpose(1, 2), c["cos"], c["sin"]).transpose(1, 2)
    kc, vc = c["k_cache"].clone(), c["v_cache"].clone()
    rows, slots = c["rows"], c["slots"]
    kc[rows[:, None], :, slots] = k.to(kc.dtype)
    vc[rows[:, None], :, slots] = c["v"].to(vc.dtype)
    s = c["mask"].shape[-1]
    out = attention_reference(q.float(), kc[rows, :, :s], vc[rows, :, :s], c["mask"], scale)
    return out, kc, vc


@pytest.mark.parametrize("act,cache", [(torch.float32, torch.float32), (torch.bfloat16, torch.float32),
                                       (torch.bfloat16, torch.bfloat16)])  # fmt: skip
@pytest.mark.parametrize(
    "h,g,d", [(16, 8, 64), (32, 4, 96), (32, 8, 128), (4, 4, 16), (6, 2, 24), (8, 1, 32)]
)
@pytest.mark.parametrize("t", [1, 3])
def test_kernel_matches_the_pytorch_path(
    kernels: native_mod.NativeKernels, act: torch.dtype, cache: torch.dtype, h: int, g: int, d: int, t: int
) -> None:
    gen = torch.Generator().manual_seed(h * 1000 + d * 10 + t)
    c = _case(gen, act, cache, 3, t, h, g, d)
    want, want_k, want_v = _pytorch_path(c, d**-0.5)
    kc, vc = c["k_cache"].clone(), c["v_cache"].clone()
    got = kernels.decode_attention(c["q"], c["k"], c["v"], c["cos"], c["sin"], kc, vc, c["slots"], c["mask"],
                                   rows=c["rows"], scale=d**-0.5)  # fmt: skip
    # the cache holds exactly what the PyTorch path writes: rotation rounds the same way
    assert torch.equal(kc, want_k) and torch.equal(vc, want_v)
    assert got.shape == (3, t, h * d) and got.dtype == act
    tol = 1e-5 if act == torch.float32 else 8e-3  # bf16: the output is rounded once
    torch.testing.assert_close(got.double(), want.to(act).double(), atol=tol, rtol=tol)


def test_unrotated_input_and_default_rows(kernels: native_mod.NativeKernels) -> None:
    gen = torch.Generator().manual_seed(5)
    c = _case(gen, torch.float32, torch.float32, 2, 1, 8, 2, 64)
    c["rows"] = torch.arange(2)
    want, want_k, _ = _pytorch_path(
        c | {"cos": torch.ones_like(c["cos"]), "sin": torch.zeros_like(c["sin"])}, 0.3
    )
    kc, vc = c["k_cache"].clone(), c["v_cache"].clone()
    got = kernels.decode_attention(
        c["q"], c["k"], c["v"], None, None, kc, vc, c["slots"], c["mask"], scale=0.3
    )
    assert torch.equal(kc, want_k)
    torch.testing.assert_close(got.double(), want, atol=1e-5, rtol=1e-5)


def test_results_do_not_depend_on_thread_count(kernels: native_mod.NativeKernels) -> None:
    c = _case(torch.Generator().manual_seed(9), torch.bfloat16, torch.float32, 4, 2, 16, 8, 64)
    outs = []
    threads = torch.get_num_threads()
    try:
        for n in (1, 2, 3):
            torch.set_num_threads(n)
            kc, vc = c["k_cache"].clone(), c["v_cache"].clone()
            args = (c["q"], c["k"], c["v"], c["cos"], c["sin"], kc, vc, c["slots"], c["mask"])
            outs.append(kernels.decode_attention(*args, rows=c["rows"], scale=0.125))
    finally:
        torch.set_num_threads(threads)
    assert torch.equal(outs[0], outs[1]) and torch.equal(outs[0], outs[2])


def test_masked_keys_contribute_nothing_even_when_huge(kernels: native_mod.NativeKernels) -> None:
    c = _case(torch.Generator().manual_seed(2), torch.float32, torch.float32, 1, 1, 2, 1, 64)
    hidden = ~c["mask"][0, 0, 0]
    c["k_cache"][c["rows"][0], :, : hidden.numel()][:, hidden] = 1e4  # would dominate the softmax
    want, _, _ = _pytorch_path(c, 0.125)
    c["v_cache"][c["rows"][0], :, : hidden.numel()][:, hidden] = float("nan")  # 0 * NaN would be NaN
    got = kernels.decode_attention(c["q"], c["k"], c["v"], c["cos"], c["sin"], c["k_cache"], c["v_cache"],
                                   c["slots"], c["mask"], rows=c["rows"], scale=0.125)  # fmt: skip
    assert torch.isfinite(got).all()
    torch.testing.assert_close(got.double(), want, atol=1e-5, rtol=1e-5)


def test_rejects_what_it_does_not_take(kernels: native_mod.NativeKernels) -> None:
    c = _case(torch.Generator().manual_seed(1), torch.float32, torch.float32, 2, 1, 4, 2, 16)
    base = [c[n] for n in ("q", "k", "v", "cos", "sin", "k_cache", "v_cache", "slots", "mask")]

    def call(**change: Any) -> None:
        names = ("q", "k", "v", "cos", "sin", "k_cache", "v_cache", "slots", "mask")
        args = [change.get(n, a) for n, a in zip(names, base, strict=True)]
        kernels.decode_attention(*args, rows=c["rows"], scale=0.25)

    with pytest.raises(ValueError, match="activations of one dtype"):
        call(q=c["q"].half())
    with pytest.raises(ValueError, match="activations of one dtype"):
        call(k=c["k"].bfloat16())
    with pytest.raises(ValueError, match="float32 or bfloat16 cache"):
        call(k_cache=c["k_cache"].half(), v_cache=c["v_cache"].half())
    with pytest.raises(ValueError, match="mask must be bool"):
        call(mask=c["mask"].float())
    with pytest.raises(ValueError, match="mask must be bool"):
        call(mask=torch.ones(2, 1, 1, 200, dtype=torch.bool))  # longer than the cache
    with pytest.raises(ValueError, match="KV heads"):
        call(k_cache=c["k_cache"][:, :1].contiguous(), v_cache=c["v_cache"][:, :1].contiguous())
    three = torch.randn(2, 1, 3, 16)
    with pytest.raises(ValueError, match="does not take 4 query heads over 3 KV heads"):
        kc, vc = (torch.zeros(4, 3, 70, 16) for _ in range(2))
        call(k=three, v=three, k_cache=kc, v_cache=vc)


# ------------------------------------------------------------------------------------------
# in the model


def _native_model(path: Any, dtype: torch.dtype = torch.float32) -> Any:
    model, config = load_model(path, dtype=dtype)
    if use_cpu_linears(model) != "native":
        pytest.skip(native_status())
    assert all(layer.self_attn.decode_kernel is not None for layer in model.layers)
    return model, config


def test_decoding_matches_transformers_step_by_step(make_checkpoint: Any) -> None:
    """Prefill, then one-token steps and a 3-token chunk through the kernel, each against
    transformers' full forward at the same positions."""
    hf, path = make_checkpoint(num_key_value_heads=2)
    model, config = _native_model(path)
    ids = torch.randint(0, config.vocab_size, (2, 14), generator=torch.Generator().manual_seed(4))
    calls = []
    kernel = model.layers[0].self_attn.decode_kernel
    model.layers[0].self_attn.decode_kernel = lambda *a, **k: calls.append(a[0].shape) or kernel(*a, **k)
    with torch.inference_mode():
        want = hf(ids).logits
        cache = KVCache.for_model(model, 2, 32)
        got = [model(ids[:, :8], kv_cache=cache).logits]
        for i in range(8, 11):
            got.append(model(ids[:, i : i + 1], kv_cache=cache).logits)
        got.append(model(ids[:, 11:14], kv_cache=cache).logits)
    assert len(calls) == 4  # the prefill ran on SDPA, every later forward on the kernel
    torch.testing.assert_close(torch.cat(got, dim=1), want, atol=1e-4, rtol=1e-4)


def test_padded_rows_and_row_subsets_match_the_sdpa_path(make_checkpoint: Any) -> None:
    """Left padding, rows at different lengths and ``cache_rows`` subsets: the kernel and SDPA
    give the same logits and leave the same cache."""
    _, path = make_checkpoint(num_key_value_heads=1)
    model, config = _native_model(path)
    gen = torch.Generator().manual_seed(8)
    prompt = torch.randint(0, config.vocab_size, (3, 9), generator=gen)
    mask = torch.ones(3, 9, dtype=torch.bool)
    mask[1, :4] = False
    mask[2, :2] = False
    steps = [torch.randint(0, config.vocab_size, (3, 1), generator=gen) for _ in range(4)]
    results = []
    for use_kernel in (True, False):
        if not use_kernel:
            for layer in model.layers:
                layer.self_attn.decode_kernel = None
        with torch.inference_mode():
            cache = KVCache.for_model(model, 3, 24)
            logits = [model(prompt, kv_cache=cache, attention_mask=mask, logits_at="last").logits]
            for i, tok in enumerate(steps):
                rows = torch.tensor([2, 0]) if i % 2 else None  # a subset, out of order
                ids = tok[rows] if rows is not None else tok
                logits.append(model(ids, kv_cache=cache, cache_rows=rows, logits_at="last").logits)
        results.append((logits, cache))
    (fast, fast_cache), (slow, slow_cache) = results
    for a, b in zip(fast, slow, strict=True):
        torch.testing.assert_close(a, b, atol=1e-5, rtol=1e-5)
    # layer 0's keys depend on the embeddings alone: bit for bit; later layers up to summation order
    # (read through each cache's block table: the two pools may lay the rows out differently)
    assert fast_cache.row_blocks == slow_cache.row_blocks

    def rows(cache: KVCache, pools: list[torch.Tensor], layer: int) -> torch.Tensor:
        return gather_blocks(pools[layer], cache.table, cache.max_len)

    assert torch.equal(rows(fast_cache, fast_cache.k, 0), rows(slow_cache, slow_cache.k, 0))
    assert torch.equal(rows(fast_cache, fast_cache.v, 0), rows(slow_cache, slow_cache.v, 0))
    for layer in range(1, config.num_hidden_layers):
        got, want = rows(fast_cache, fast_cache.k, layer), rows(slow_cache, slow_cache.k, layer)
        torch.testing.assert_close(got, want, atol=1e-5, rtol=1e-5)


def test_bf16_model_decodes_like_its_sdpa_path(make_checkpoint: Any) -> None:
    _, path = make_checkpoint(num_key_value_heads=2)
    model, config = _native_model(path, torch.bfloat16)
    ids = torch.randint(0, config.vocab_size, (2, 12), generator=torch.Generator().manual_seed(6))
    outs = []
    for use_kernel in (True, False):
        if not use_kernel:
            use_native_attention(model)  # idempotent; then switch off
            for layer in model.layers:
                layer.self_attn.decode_kernel = None
        with torch.inference_mode():
            cache = KVCache.for_model(model, 2, 16)
            model(ids[:, :6], kv_cache=cache)
            outs.append(torch.cat([model(ids[:, i : i + 1], kv_cache=cache).logits for i in range(6, 12)], 1))
    # one bf16 rounding of the attention output apart, carried through the layers
    torch.testing.assert_close(outs[0], outs[1], atol=5e-2, rtol=5e-2)


def test_long_chunks_and_fresh_prefill_stay_on_sdpa(make_checkpoint: Any) -> None:
    _, path = make_checkpoint()
    model, _ = _native_model(path)
    calls = []
    kernel = model.layers[0].self_attn.decode_kernel
    model.layers[0].self_attn.decode_kernel = lambda *a, **k: calls.append(1) or kernel(*a, **k)
    with torch.inference_mode():
        cache = KVCache.for_model(model, 1, 64)
        model(torch.zeros(1, 5, dtype=torch.long), kv_cache=cache)  # fresh prefill: SDPA
        model(torch.zeros(1, DECODE_KERNEL_MAX_TOKENS + 1, dtype=torch.long), kv_cache=cache)  # long chunk
        model(torch.zeros(1, 5, dtype=torch.long))  # no cache
        assert calls == []
        model(torch.zeros(1, DECODE_KERNEL_MAX_TOKENS, dtype=torch.long), kv_cache=cache)
    assert calls == [1]


def test_static_decode_step_uses_the_kernel(make_checkpoint: Any) -> None:
    """``decode_static`` (the compiled/CUDA-graph step) reads every slot through the mask."""
    hf, path = make_checkpoint()
    model, config = _native_model(path)
    ids = torch.randint(0, config.vocab_size, (2, 7), generator=torch.Generator().manual_seed(2))
    with torch.inference_mode():
        want = hf(ids).logits[:, -1]
        cache = KVCache.for_model(model, 2, 16)
        model(ids[:, :6], kv_cache=cache)
        slots = cache.lengths.clone()
        got = model.decode_static(ids[:, 6:], slots[:, None], slots, torch.ones(2, dtype=torch.bool), cache)
    torch.testing.assert_close(got, want, atol=1e-4, rtol=1e-4)


@pytest.mark.parametrize("d", [64, 24])
def test_block_runs_read_like_a_contiguous_cache(kernels: native_mod.NativeKernels, d: int) -> None:
    """Rows whose blocks are consecutive runs (whole, broken, reversed) give the contiguous
    cache's output bit for bit, and write the new keys where the table says."""
    gen = torch.Generator().manual_seed(7)
    b, g, h, s, bs = 3, 2, 4, 60, 8
    q = torch.randn(b, 1, h, d, generator=gen)
    k_new, v_new = (torch.randn(b, 1, g, d, generator=gen) for _ in range(2))
    kc, vc = (torch.randn(b, g, 64, d, generator=gen) for _ in range(2))
    slots = torch.tensor([[59], [40], [51]])
    mask = torch.rand(b, 1, 1, s, generator=gen) < 0.9
    mask[torch.arange(b), 0, 0, slots[:, 0]] = True
    table = torch.tensor(
        [[1, 2, 3, 4, 5, 6, 7, 8], [9, 10, 11, 20, 21, 12, 13, 14], [30, 29, 28, 27, 26, 25, 24, 23]]
    )
    kp, vp = (torch.zeros(g, 32, bs, d) for _ in range(2))
    kp[:, table.reshape(-1)] = kc.transpose(0, 1).reshape(g, b * 8, bs, d)
    vp[:, table.reshape(-1)] = vc.transpose(0, 1).reshape(g, b * 8, bs, d)
    want = kernels.decode_attention(q, k_new, v_new, None, None, kc, vc, slots, mask, scale=d**-0.5)
    got = kernels.decode_attention(
        q, k_new, v_new, None, None, kp, vp, slots, mask, scale=d**-0.5, block_table=table
    )
    assert torch.equal(got, want)
    assert torch.equal(gather_blocks(kp, table, 64), kc) and torch.equal(gather_blocks(vp, table, 64), vc)
