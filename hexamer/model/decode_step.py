"""An int4 model's decode step through all decoder layers in one C call (``decode_step.c``).

Why: at batch 1 the int4 projections stream a few milliseconds of weights per step, and around
them each layer made about 10 Python-level calls (norms, q/k/v, attention, o, residual adds,
SwiGLU, down), each starting its own OpenMP thread team: 141 parallel regions and about 280
calls per 500M-shape step. :class:`Int4DecodeStep` runs the same arithmetic (bit for bit: the
same per-panel code and the same attention items) as one call with one thread team per step.

It is the model's :attr:`~hexamer.model.llama.LlamaModel.layers_kernel` (set by
:func:`use_int4_decode_step`, which the CPU fast path calls after the native linears are in
place), taken only where it applies: every decoder projection an int4 panel projection without
bias, float32 activations and norms, inference, a paged KV cache (float32 or bfloat16), one new
token per sequence and at most :data:`MAX_ROWS` sequences, no per-layer outputs asked for, and
the layers unchanged since it was built. Anything else returns ``None`` and the layers run one
module at a time, as before. The library is built, like the other kernels, on first use, and
checked against the per-module path on a tiny model before any model uses it.
"""

from __future__ import annotations

import ctypes
import functools
import itertools
import logging
import operator
import subprocess
from pathlib import Path
from typing import Any

import torch

from hexamer.model.config import ModelConfig
from hexamer.model.cpu import PanelLowbitLinear, use_cpu_linears
from hexamer.model.kv_cache import AttentionPlan, KVCache
from hexamer.model.llama import LlamaModel
from hexamer.model.native import FLAGS, build_library, native_disabled
from hexamer.model.quant import quantize_model

log = logging.getLogger(__name__)

_HERE = Path(__file__).parent
SOURCE = _HERE / "decode_step.c"
#: What decode_step.c includes (part of the build key).
INCLUDED = tuple(_HERE / n for n in ("lowbit_gemm.c", "decode_attention.c", "rms_norm.c", "simd.h"))
#: Most sequences per step (one register tile of rows in the kernels).
MAX_ROWS = 8
_ABI_VERSION = 1
#: Per-layer pointers, in the order of decode_step.c's ``L_*`` fields.
_FIELDS = 16
_status = "not used in this process"


class _Step(ctypes.Structure):
    """decode_step.c's ``step_t``."""

    _fields_ = [
        *((name, ctypes.c_int64) for name in ("M", "hidden", "ffn", "heads", "kv_heads", "head_dim", "S")),
        ("eps", ctypes.c_float),
        ("scale", ctypes.c_float),
        *((name, ctypes.c_void_p) for name in ("cos", "sin", "slots", "rows", "tab")),
        *((name, ctypes.c_int64) for name in ("tab_s", "bshift", "c_sb", "c_sh", "c_ss", "kv_bf16")),
        ("mask", ctypes.c_void_p),
        ("m_sb", ctypes.c_int64),
        ("m_st", ctypes.c_int64),
    ]


def decode_step_status() -> str:
    """Why the one-call decode step is (not) in use, for logs and benchmark notes."""
    return _status


@functools.cache
def decode_step_library() -> ctypes.CDLL | None:
    """The compiled step, built on first call and checked (:func:`check_decode_step`); ``None``
    (reason in :func:`decode_step_status`) where it cannot be built or fails the check."""
    global _status
    if native_disabled():
        _status = "disabled by HEXAMER_NATIVE=0"
        return None
    try:
        lib = _load(build_library("decode_step", (SOURCE,), FLAGS, INCLUDED))
        check_decode_step(lib)
    except (OSError, RuntimeError, subprocess.SubprocessError) as exc:
        _status = f"not available ({exc}); decoder layers run one module at a time"
        log.info("hexamer one-call decode step %s", _status)
        return None
    _status = "loaded"
    return lib


def _load(path: Path) -> ctypes.CDLL:
    lib = ctypes.CDLL(str(path))
    if lib.hx_step_abi_version() != _ABI_VERSION:
        raise RuntimeError(f"{path} has ABI {lib.hx_step_abi_version()}, expected {_ABI_VERSION}")
    ptr = ctypes.c_void_p
    lib.hx_int4_decode_step.argtypes = [ptr, ptr, ctypes.c_int64, ptr, ctypes.POINTER(_Step), ctypes.c_int]
    lib.hx_int4_decode_step.restype = ctypes.c_int
    return lib


def _layer_pointers(layer: torch.nn.Module) -> list[int] | None:
    """The 16 pointers decode_step.c takes for ``layer``, or None where it does not apply."""
    attn, mlp = layer.self_attn, layer.mlp
    projs = [attn.q_proj, attn.k_proj, attn.v_proj, attn.o_proj, mlp.gate_proj, mlp.up_proj, mlp.down_proj]
    if not all(isinstance(p, PanelLowbitLinear) and p.bits == 4 and p.bias is None for p in projs):
        return None
    norms = [layer.input_layernorm.weight, layer.post_attention_layernorm.weight]
    if any(w.dtype != torch.float32 or not w.is_contiguous() for w in norms):
        return None
    return [t.data_ptr() for p in projs for t in (p.panels, p.extra)] + [w.data_ptr() for w in norms]


class Int4DecodeStep:
    """``(x, cos, sin, plan) -> x after every decoder layer, or None`` for ``model``'s int4
    decoder (see the module docstring for when it applies). Holds the model's layers, not the
    model; a deep copy rebuilds its pointers from the copied layers."""

    def __init__(self, layers: torch.nn.ModuleList, config: ModelConfig, lib: ctypes.CDLL) -> None:
        self.layers, self.config, self._lib = layers, config, lib
        pointers = [_layer_pointers(layer) for layer in layers]
        if not layers or any(p is None for p in pointers):
            raise ValueError("not every decoder layer has int4 panel projections and float32 norms")
        self._weights = torch.tensor(pointers, dtype=torch.int64)
        self._eps = {layer.input_layernorm.eps for layer in layers} | {
            layer.post_attention_layernorm.eps for layer in layers
        }
        if len(self._eps) != 1:
            raise ValueError("the decoder layers' norms differ in eps")
        # what must still be in place for the pointers to hold: (dict, key, object) triples
        self._expect: list[tuple[dict, str, Any]] = [
            (layers._modules, str(i), m) for i, m in enumerate(layers)
        ]
        self._norms: list[torch.nn.Module] = []
        self._norm_weights: list[torch.Tensor] = []
        for layer in layers:
            attn, mlp = layer.self_attn, layer.mlp
            self._expect += [(layer._modules, n, getattr(layer, n)) for n in ("self_attn", "mlp")]
            self._expect += [
                (attn._modules, n, getattr(attn, n)) for n in ("q_proj", "k_proj", "v_proj", "o_proj")
            ]
            self._expect += [
                (mlp._modules, n, getattr(mlp, n)) for n in ("gate_proj", "up_proj", "down_proj")
            ]
            for n in ("input_layernorm", "post_attention_layernorm"):
                norm = getattr(layer, n)
                self._expect.append((layer._modules, n, norm))
                self._norms.append(norm)
                self._norm_weights.append(norm.weight)
        self._count = len(layers)
        # the same, as columns for a check that stays in C (about 400 lookups a step at 500M)
        self._dicts, self._keys, self._objects = (list(col) for col in zip(*self._expect, strict=True))

    def __deepcopy__(self, memo: dict) -> Int4DecodeStep:
        import copy

        return Int4DecodeStep(copy.deepcopy(self.layers, memo), self.config, self._lib)

    def intact(self) -> bool:
        """The layers are the ones the pointers were taken from (no module or norm swapped)."""
        found = map(dict.get, self._dicts, self._keys)
        weights = map(getattr, self._norms, itertools.repeat("weight"))
        return (
            len(self.layers) == self._count
            and all(map(operator.is_, found, self._objects))
            and all(map(operator.is_, weights, self._norm_weights))
        )

    def __call__(
        self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, plan: AttentionPlan
    ) -> torch.Tensor | None:
        cache, mask = plan.cache, plan.mask
        if cache is None or mask is None or plan.slots is None or torch.is_grad_enabled():
            return None
        b, t, hidden = x.shape
        c = self.config
        if t != 1 or not 0 < b <= MAX_ROWS or hidden != c.hidden_size:
            return None
        if x.dtype != torch.float32 or x.device.type != "cpu":
            return None
        k0, table = cache.k[0], cache.table_dev
        d, g = c.head_dim, c.num_key_value_heads
        if len(cache.k) != self._count or k0.dtype not in (torch.float32, torch.bfloat16) or k0.dim() != 4:
            return None
        bs, s = k0.shape[2], mask.shape[-1]
        if (k0.shape[0], k0.shape[3]) != (g, d) or not k0.is_contiguous() or bs & (bs - 1):
            return None
        if mask.dtype != torch.bool or mask.shape != (b, 1, 1, s) or mask.stride(-1) != 1:
            return None
        if (
            table.dtype != torch.int64
            or table.stride(-1) != 1
            or s > table.shape[1] * bs
            or cos.dtype != x.dtype
        ):
            return None
        if not self.intact():
            return None
        x = x.contiguous().clone()
        cos, sin = (v.expand(b, 1, d).contiguous() for v in (cos, sin))
        slots = plan.slots.to(torch.int64).expand(b, 1).contiguous()
        rows = None if plan.rows is None else plan.rows.to(torch.int64).contiguous()
        caches = torch.tensor(
            [p for kv in zip(cache.k, cache.v, strict=True) for p in (kv[0].data_ptr(), kv[1].data_ptr())],
            dtype=torch.int64,
        )
        step = _Step(
            b, hidden, c.intermediate_size, c.num_attention_heads, g, d, s, next(iter(self._eps)), d**-0.5,
            cos.data_ptr(), sin.data_ptr(), slots.data_ptr(), None if rows is None else rows.data_ptr(),
            table.data_ptr(), table.stride(0), bs.bit_length() - 1, k0.stride(1), k0.stride(0), k0.stride(2),
            int(k0.dtype == torch.bfloat16), mask.data_ptr(), mask.stride(0), mask.stride(2),
        )  # fmt: skip
        code = self._lib.hx_int4_decode_step(
            self._weights.data_ptr(), caches.data_ptr(), self._count, x.data_ptr(), ctypes.byref(step),
            torch.get_num_threads(),
        )  # fmt: skip
        if code == -1:
            raise MemoryError("no memory for the decode step's scratch")
        if code:
            return None
        return x


def int4_decoder(model: LlamaModel) -> bool:
    """Every decoder projection of ``model`` is an int4 panel projection without bias, and its
    norms are float32 (what :class:`Int4DecodeStep` takes)."""
    return bool(model.layers) and all(_layer_pointers(layer) is not None for layer in model.layers)


def use_int4_decode_step(model: LlamaModel) -> bool:
    """Run ``model``'s decode steps through :class:`Int4DecodeStep` where they apply; True where
    it was switched on (an int4 float32 CPU model on hexamer's native kernels, the library built
    and checked), else False and the model is left alone."""
    if model.device.type != "cpu" or model.dtype != torch.float32 or not int4_decoder(model):
        return False
    lib = decode_step_library()
    if lib is None:
        return False
    model.layers_kernel = Int4DecodeStep(model.layers, model.config, lib)
    return True


def check_decode_step(lib: ctypes.CDLL) -> None:
    """The one-call step against the per-module path on a tiny int4 model (odd widths: panel and
    group tails; grouped-query heads; paged caches with blocks of 4 and 16 slots, rows at
    different lengths): the hidden states must agree to float32 rounding; ``RuntimeError``
    otherwise."""
    gen = torch.Generator().manual_seed(0)
    config = ModelConfig(
        vocab_size=40, hidden_size=72, intermediate_size=100, num_hidden_layers=2, num_attention_heads=4,
        num_key_value_heads=2, head_dim=16,
    )  # fmt: skip
    model = LlamaModel(config)
    with torch.no_grad():
        for p in model.parameters():
            p.copy_(torch.randn(p.shape, generator=gen) * 0.3)
    quantize_model(model, bits=4)
    if use_cpu_linears(model, native=True) != "native":
        raise RuntimeError("self-check failed (no native int4 panels for the one-call step)")
    step = Int4DecodeStep(model.layers, config, lib)
    for block_size in (4, 16):
        caches = [KVCache(2, 3, 2, 16, 24, block_size=block_size) for _ in range(2)]
        prompt = torch.randint(0, 40, (3, 5), generator=gen)
        valid = torch.ones(3, 5, dtype=torch.bool)
        valid[1, :2] = False  # a left-padded row
        with torch.inference_mode():
            for cache in caches:
                model(prompt, kv_cache=cache, attention_mask=valid, logits_at="none")
            for i in range(3):
                ids = torch.randint(0, 40, (3, 1), generator=gen)
                got = _hidden_after_layers(model, ids, caches[0], step)
                want = _hidden_after_layers(model, ids, caches[1], None)
                if got is None or not torch.allclose(got, want, atol=1e-5, rtol=1e-5):
                    raise RuntimeError(
                        f"self-check failed (one-call int4 decode step, blocks of {block_size}, step {i})"
                    )


def _hidden_after_layers(
    model: LlamaModel, ids: torch.Tensor, cache: KVCache, step: Int4DecodeStep | None
) -> torch.Tensor | None:
    """The decoder's output for one new token per row, through ``step`` or module by module."""
    saved = model.layers_kernel
    model.layers_kernel = step
    try:
        return model(ids, kv_cache=cache, logits_at="none", return_hidden=True).hidden
    finally:
        model.layers_kernel = saved
