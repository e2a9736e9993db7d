"""``hexamer bench roofline``: how close decode and prefill come to this machine's limits.

Decode at small batch reads every weight once per step, so its floor is
``bytes read per step / memory bandwidth``; prefill is matmuls, so its floor is
``FLOPs / matmul FLOP/s``. Both limits are measured in the same run (a streaming read of a large
tensor; square-ish matmuls in float32 and bfloat16), and the model's work is counted from its
config (:func:`decode_bytes`, :func:`prefill_flops`), so the fractions need no vendor figures.
"""

from __future__ import annotations

import gc
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import torch

from hexamer.bench.common import gc_paused
from hexamer.bench.report import BenchReport
from hexamer.model.config import ModelConfig

if TYPE_CHECKING:
    from hexamer.carbon import Carbon

DTYPE_BYTES = {torch.float32: 4, torch.bfloat16: 2, torch.float16: 2}


# --------------------------------------------------------------------------- work per step


def layer_linear_params(config: ModelConfig) -> int:
    """Weights (and biases) of one decoder layer's seven projections."""
    h, f = config.hidden_size, config.intermediate_size
    q = config.num_attention_heads * config.head_dim
    kv = config.num_key_value_heads * config.head_dim
    params = h * q + 2 * h * kv + q * h + 3 * h * f
    if config.attention_bias:
        params += q + 2 * kv + h
    if config.mlp_bias:
        params += 2 * f + h
    return params


def decode_bytes(
    config: ModelConfig,
    *,
    batch: int,
    kv_len: float,
    weight_bytes: int,
    kv_bytes: int | None = None,
    head_rows: int,
) -> float:
    """Bytes one decode step must read: every layer's projections and norms, the final norm, the
    ``head_rows`` LM-head rows it scores, the batch's embedding rows and each row's KV cache
    (``kv_len`` cached tokens per row, keys and values, every layer)."""
    kv_bytes = weight_bytes if kv_bytes is None else kv_bytes
    h, n = config.hidden_size, config.num_hidden_layers
    weights = n * layer_linear_params(config) + (2 * n + 1) * h + head_rows * h + batch * h
    kv = 2 * n * batch * kv_len * config.num_key_value_heads * config.head_dim
    return float(weights * weight_bytes + kv * kv_bytes)


def prefill_flops(config: ModelConfig, *, batch: int, tokens: int, head_rows: int) -> float:
    """Useful FLOPs of a prefill of ``batch`` rows of ``tokens`` tokens: the projections
    (2 per weight per token), causal attention (QKᵀ and PV over the lower triangle) and the LM
    head for each row's last token only."""
    n = config.num_hidden_layers
    linear = 2.0 * n * layer_linear_params(config) * batch * tokens
    pairs = tokens * (tokens + 1) / 2
    attention = n * batch * 2 * 2.0 * config.num_attention_heads * config.head_dim * pairs
    head = 2.0 * batch * config.hidden_size * head_rows
    return linear + attention + head


def decode_flops(config: ModelConfig, *, batch: int, kv_len: float, head_rows: int) -> float:
    """FLOPs of one decode step (one new token per row)."""
    n = config.num_hidden_layers
    linear = 2.0 * n * layer_linear_params(config) * batch
    attention = n * batch * 2 * 2.0 * config.num_attention_heads * config.head_dim * kv_len
    return linear + attention + 2.0 * batch * config.hidden_size * head_rows


# --------------------------------------------------------------------------- machine limits


def _best(fn: Callable[[], object], repeats: int) -> float:
    fn()  # warm: page faults, thread pool, kernel selection
    best = float("inf")
    gc.collect()
    for _ in range(repeats):
        with gc_paused():
            start = time.perf_counter()
            fn()
            best = min(best, time.perf_counter() - start)
    return best


def measure_read_bandwidth(n_bytes: int = 512 * 2**20, repeats: int = 5) -> float:
    """Streaming read bandwidth (bytes/s): the sum of a float32 tensor far larger than the caches."""
    x = torch.ones(max(1, n_bytes // 4), dtype=torch.float32)
    seconds = _best(lambda: x.sum(), repeats)
    return x.numel() * 4 / seconds


def measure_matmul_flops(
    dtype: torch.dtype, m: int = 2048, k: int = 1024, n: int = 3072, repeats: int = 5
) -> float:
    """FLOP/s of an ``(m, k) @ (k, n)`` matmul in ``dtype`` (the prefill's MLP shape by default)."""
    a = torch.randn(m, k).to(dtype)
    b = torch.randn(k, n).to(dtype)
    seconds = _best(lambda: torch.mm(a, b), repeats)
    return 2.0 * m * k * n / seconds


@dataclass
class MachineLimits:
    read_bandwidth: float  # bytes/s
    matmul_flops: dict[str, float]  # dtype name -> FLOP/s
    bandwidth_bytes: int = 512 * 2**20  # size of the tensor read
    matmul_m: int = 2048  # rows of the (m, 1024) @ (1024, 3072) matmul


def measure_limits(*, quick: bool = False, repeats: int = 5) -> MachineLimits:
    size = (128 if quick else 512) * 2**20
    m = 512 if quick else 2048
    return MachineLimits(
        read_bandwidth=measure_read_bandwidth(size, repeats),
        matmul_flops={
            name: measure_matmul_flops(getattr(torch, name), m=m, repeats=repeats)
            for name in ("float32", "bfloat16")
        },
        bandwidth_bytes=size,
        matmul_m=m,
    )


# --------------------------------------------------------------------------- the bench


def run_roofline_bench(
    carbon: Carbon,
    *,
    batch_sizes: tuple[int, ...] = (1, 16),
    prompt_bp: int = 1080,
    new_bp: int = 360,
    repeats: int = 3,
    quick: bool = False,
    limits: MachineLimits | None = None,
    log: Callable[[str], None] = lambda _: None,
) -> BenchReport:
    """Measure the limits, then decode and prefill of ``carbon`` against them, one row each."""
    from hexamer.bench.backends import HexamerBackend
    from hexamer.bench.suite import suite_prompts

    log("measuring memory bandwidth and matmul FLOP/s ...")
    limits = limits or measure_limits(quick=quick, repeats=repeats)
    model = carbon.model
    config = model.config
    dtype = model.dtype
    dtype_name = str(dtype).removeprefix("torch.")
    wbytes = DTYPE_BYTES[dtype]
    layout = carbon.layout
    head_rows = layout.kmer_stop - layout.end_id  # </dna>, <oov> and the 6-mers (decode's LM-head view)
    peak = limits.matmul_flops.get(dtype_name, limits.matmul_flops["float32"])
    bw = limits.read_bandwidth
    report = BenchReport(
        name="roofline",
        title=f"roofline: decode vs memory bandwidth, prefill vs matmul peak ({dtype_name})",
        columns=("item", "batch", "work", "measured", "limit", "% of limit"),
        formats={"% of limit": "{:.0f}%"},
    )
    report.rows.append(
        {
            "item": "memory read bandwidth",
            "batch": None,
            "work": f"sum of {limits.bandwidth_bytes // 2**20} MiB fp32",
            "measured": f"{bw / 1e9:.1f} GB/s",
            "limit": None,
            "% of limit": None,
            "value": bw,
        }
    )
    for name, flops in limits.matmul_flops.items():
        report.rows.append(
            {
                "item": f"matmul {name}",
                "batch": None,
                "work": f"({limits.matmul_m},1024)@(1024,3072)",
                "measured": f"{flops / 1e9:.0f} GFLOP/s",
                "limit": None,
                "% of limit": None,
                "value": flops,
            }
        )
    backend = HexamerBackend(carbon, "token")
    k = layout.k
    prompt_tokens = prompt_bp // k + 1  # + <dna>
    new_tokens = -(-new_bp // k)
    for batch in batch_sizes:
        prompts = [p.sequence for p in suite_prompts(batch, prompt_bp - prompt_bp % k)]
        backend.generate(prompts[:1], 2 * k)
        best_step = float("inf")
        best_prefill = float("inf")
        for r in range(repeats):
            log(f"roofline batch {batch}: run {r + 1}/{repeats} ...")
            run = backend.generate(prompts, new_bp)
            if run.itl_s:
                best_step = min(best_step, sorted(run.itl_s)[len(run.itl_s) // 2])
            if run.ttft_s is not None:
                best_prefill = min(best_prefill, run.ttft_s)
        kv_len = prompt_tokens + (new_tokens - 1) / 2  # mean cached length over the decode
        nbytes = decode_bytes(config, batch=batch, kv_len=kv_len, weight_bytes=wbytes, head_rows=head_rows)
        mem_floor = nbytes / bw
        flops = decode_flops(config, batch=batch, kv_len=kv_len, head_rows=head_rows)
        compute_floor = flops / peak
        floor = max(mem_floor, compute_floor)
        bound = "bandwidth" if mem_floor >= compute_floor else "matmul peak"
        report.rows.append(
            {
                "item": "decode step (median)",
                "batch": batch,
                "work": f"{nbytes / 1e9:.3f} GB read, {flops / 1e9:.1f} GFLOP",
                "measured": f"{1000 * best_step:.1f} ms",
                "limit": f"{1000 * floor:.1f} ms ({bound})",
                "% of limit": 100 * floor / best_step,
                "seconds": best_step,
                "floor_seconds": floor,
                "bytes": nbytes,
                "flops": flops,
                "achieved_bandwidth": nbytes / best_step,
            }
        )
        pf = prefill_flops(config, batch=batch, tokens=prompt_tokens, head_rows=head_rows)
        report.rows.append(
            {
                "item": "prefill",
                "batch": batch,
                "work": f"{pf / 1e9:.0f} GFLOP ({batch}×{prompt_tokens} tokens)",
                "measured": f"{best_prefill:.3f} s = {pf / best_prefill / 1e9:.0f} GFLOP/s",
                "limit": f"{pf / peak:.3f} s",
                "% of limit": 100 * (pf / peak) / best_prefill,
                "seconds": best_prefill,
                "floor_seconds": pf / peak,
                "flops": pf,
            }
        )
    report.notes.append(
        f"decode reads {head_rows:,} LM-head rows (DNA block) per step; KV length = mean over a "
        f"{prompt_tokens}+{new_tokens}-token generation; % of limit = floor time / measured time."
    )
    return report


def roofline_summary(report: BenchReport) -> dict[str, Any]:
    """The decode and prefill fractions by batch, for tests and summaries."""
    return {(r["item"], r["batch"]): r["% of limit"] for r in report.rows if r.get("% of limit") is not None}
