"""The one-call int4 decode step (``hexamer.model.decode_step``, ``decode_step.c``): the same
numbers as the per-module path at every row count it takes and at shapes with panel and group
tails, greedy generation unchanged, the fallback wherever it does not apply, and the self-check."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
import torch

from hexamer.model.config import ModelConfig
from hexamer.model.cpu import use_cpu_linears
from hexamer.model.decode_step import (
    MAX_ROWS,
    Int4DecodeStep,
    check_decode_step,
    decode_step_library,
    decode_step_status,
    use_int4_decode_step,
)
from hexamer.model.kv_cache import KVCache, gather_blocks
from hexamer.model.llama import LlamaModel
from hexamer.model.quant import quantize_folder, quantize_model
from hexamer.synthetic import build_carbon_folder


def _lib() -> Any:
    lib = decode_step_library()
    if lib is None:
        pytest.skip(decode_step_status())
    return lib


def _model(hidden: int = 72, ffn: int = 100, heads: int = 6, kv: int = 2, dim: int = 16) -> LlamaModel:
    """A random int4 model on the native kernels; widths not multiples of 16 or 32 by default."""
    config = ModelConfig(
        vocab_size=60, hidden_size=hidden, intermediate_size=ffn, num_hidden_layers=2,
        num_attention_heads=heads, num_key_value_heads=kv, head_dim=dim,
    )  # fmt: skip
    model = LlamaModel(config)
    gen = torch.Generator().manual_seed(3)
    with torch.no_grad():
        for p in model.parameters():
            p.copy_(torch.randn(p.shape, generator=gen) * 0.3)
    quantize_model(model, bits=4)
    assert use_cpu_linears(model, native=True) == "native"
    return model


class _Counting:
    """Counts the forwards the step took (returned a result for)."""

    def __init__(self, step: Int4DecodeStep) -> None:
        self.step, self.taken, self.declined = step, 0, 0

    def __call__(self, *args: Any) -> torch.Tensor | None:
        out = self.step(*args)
        self.taken += out is not None
        self.declined += out is None
        return out


@pytest.mark.parametrize(
    ("rows", "shape"),
    [(1, {}), (3, {}), (MAX_ROWS, {}), (1, {"hidden": 64, "ffn": 128, "heads": 4, "kv": 4, "dim": 32}),
     (2, {"hidden": 48, "ffn": 40, "heads": 3, "kv": 1, "dim": 24})],
)  # fmt: skip
def test_step_gives_the_per_module_numbers(rows: int, shape: dict[str, int]) -> None:
    lib = _lib()
    model = _model(**shape)
    counting = _Counting(Int4DecodeStep(model.layers, model.config, lib))
    c = model.config
    caches = [KVCache(2, rows, c.num_key_value_heads, c.head_dim, 40, block_size=4) for _ in range(2)]
    gen = torch.Generator().manual_seed(rows)
    prompt = torch.randint(0, 60, (rows, 6), generator=gen)
    valid = torch.ones(rows, 6, dtype=torch.bool)
    valid[-1, :3] = False  # the last row left-padded: rows at different lengths
    with torch.inference_mode():
        for cache in caches:
            model.layers_kernel = counting if cache is caches[0] else None
            model(prompt, kv_cache=cache, attention_mask=valid, logits_at="none")
        for _ in range(4):
            ids = torch.randint(0, 60, (rows, 1), generator=gen)
            model.layers_kernel = counting
            got = model(ids, kv_cache=caches[0], logits_at="last").logits
            model.layers_kernel = None
            want = model(ids, kv_cache=caches[1], logits_at="last").logits
            assert torch.equal(got, want)
    assert counting.taken == 4 and counting.declined == 1  # the prompt (6 tokens a row) ran per module
    n = int(caches[0].lengths.max())
    for a, b in zip(caches[0].k + caches[0].v, caches[1].k + caches[1].v, strict=True):
        assert torch.equal(gather_blocks(a, caches[0].table, n), gather_blocks(b, caches[1].table, n))


def test_a_subset_of_cache_rows_in_any_order() -> None:
    lib = _lib()
    model = _model()
    step = _Counting(Int4DecodeStep(model.layers, model.config, lib))
    c = model.config
    caches = [KVCache(2, 4, c.num_key_value_heads, c.head_dim, 32, block_size=8) for _ in range(2)]
    gen = torch.Generator().manual_seed(9)
    with torch.inference_mode():
        for cache in caches:
            model(torch.randint(0, 60, (4, 5), generator=torch.Generator().manual_seed(1)), kv_cache=cache)
        for rows in ([2, 0], [3], [1, 3, 0]):
            ids = torch.randint(0, 60, (len(rows), 1), generator=gen)
            model.layers_kernel = step
            got = model(ids, kv_cache=caches[0], cache_rows=rows, logits_at="last").logits
            model.layers_kernel = None
            assert torch.equal(got, model(ids, kv_cache=caches[1], cache_rows=rows, logits_at="last").logits)
    assert step.taken == 3


@pytest.fixture(scope="module")
def int4_folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    base = tmp_path_factory.mktemp("step")
    return quantize_folder(build_carbon_folder(base / "m"), base / "q", bits=4)


def test_greedy_generation_is_unchanged(int4_folder: Path) -> None:
    from hexamer import Carbon

    _lib()
    carbon = Carbon.from_pretrained(int4_folder, dtype="int4", native=True)
    step = carbon.model.layers_kernel
    assert isinstance(step, Int4DecodeStep)
    counting = _Counting(step)
    carbon.model.layers_kernel = counting
    prompts = ["ACGTTGCAAC" * 6, "TTGACCA" * 9]
    fast = [g.sequence for g in carbon.generate(prompts, max_bp=120, temperature=0.0)]
    assert counting.taken >= 19  # one per decode step: 20 6-mers each, the first from the prefill
    carbon.model.layers_kernel = None
    assert fast == [g.sequence for g in carbon.generate(prompts, max_bp=120, temperature=0.0)]


def test_a_copied_model_steps_on_its_own_weights() -> None:
    _lib()
    model = _model()
    assert use_int4_decode_step(model)
    copied = copy.deepcopy(model)
    step = copied.layers_kernel
    assert isinstance(step, Int4DecodeStep) and step is not model.layers_kernel and step.intact()
    assert step.layers is copied.layers
    with torch.no_grad():
        copied.layers[0].input_layernorm.weight.mul_(2)  # the copy's own norm, read in place
    c = model.config
    caches = [KVCache(2, 1, c.num_key_value_heads, c.head_dim, 16) for _ in range(2)]
    ids = torch.tensor([[5, 7, 9]])
    with torch.inference_mode():
        for cache in caches:
            copied(ids, kv_cache=cache, logits_at="none")
        got = copied(ids[:, :1], kv_cache=caches[0], logits_at="last").logits
        copied.layers_kernel = None
        assert torch.equal(got, copied(ids[:, :1], kv_cache=caches[1], logits_at="last").logits)
    assert not torch.equal(model.layers[0].input_layernorm.weight, copied.layers[0].input_layernorm.weight)


def test_declines_what_it_does_not_take() -> None:
    lib = _lib()
    model = _model()
    step = Int4DecodeStep(model.layers, model.config, lib)
    c = model.config
    cache = KVCache(2, MAX_ROWS + 1, c.num_key_value_heads, c.head_dim, 16, block_size=4)
    with torch.inference_mode():
        model(torch.zeros(MAX_ROWS + 1, 3, dtype=torch.long), kv_cache=cache, logits_at="none")
    plan = cache.plan_forward(None, MAX_ROWS + 1, 1, None)
    x = torch.zeros(MAX_ROWS + 1, 1, c.hidden_size)
    cos = sin = torch.zeros(MAX_ROWS + 1, 1, c.head_dim)
    with torch.inference_mode():
        assert step(x, cos, sin, plan) is None  # too many rows
        assert step(x[:1].double(), cos[:1].double(), sin[:1].double(), plan) is None  # not float32
    with torch.no_grad():
        assert step(x[:1], cos[:1], sin[:1], plan) is None  # a plan for other rows: mask shape differs
    with torch.enable_grad():
        assert step(x, cos, sin, plan) is None
    assert step.intact()
    norm = model.layers[0].post_attention_layernorm
    original = norm.weight
    norm.weight = torch.nn.Parameter(norm.weight.detach().clone())  # a new tensor: the pointer is stale
    assert not step.intact()
    norm.weight = original
    assert step.intact()
    model.layers[1].mlp.down_proj = torch.nn.Linear(c.intermediate_size, c.hidden_size)
    assert not step.intact()


def test_switched_on_only_for_int4_float32_native_models(monkeypatch: pytest.MonkeyPatch) -> None:
    _lib()
    model = _model()
    assert use_int4_decode_step(model) and isinstance(model.layers_kernel, Int4DecodeStep)
    plain = LlamaModel(model.config)
    use_cpu_linears(plain, native=True)  # float32 panels, not int4
    assert not use_int4_decode_step(plain) and plain.layers_kernel is None
    monkeypatch.setattr("hexamer.model.decode_step.decode_step_library", lambda: None)
    again = _model()
    assert not use_int4_decode_step(again) and again.layers_kernel is None


def test_self_check_catches_a_step_that_does_nothing() -> None:
    check_decode_step(_lib())

    class Broken:
        @staticmethod
        def hx_int4_decode_step(*args: Any) -> int:
            return 0  # leaves x as it came in

    with pytest.raises(RuntimeError, match="self-check failed"):
        check_decode_step(Broken())  # type: ignore[arg-type]


@pytest.mark.slow  # a compile: about 10 s on two shared cores
def test_the_build_without_vnni_passes_its_check(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Another CPU's path: the step compiled without AVX-512 VNNI (lowbit_gemm.c's plain C loops)
    agrees with the per-module path on the VNNI kernels (its self-check on load)."""
    _lib()
    monkeypatch.setenv("HEXAMER_CACHE", str(tmp_path))
    monkeypatch.setenv("HEXAMER_NATIVE_CFLAGS", "-mno-avx512vnni")
    decode_step_library.cache_clear()
    try:
        plain = decode_step_library()
        assert plain is not None and plain.hx_vnni() == 0, decode_step_status()
    finally:
        decode_step_library.cache_clear()
