"""Roofline arithmetic against hand computations, and the bench's fractions."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from hexamer import Carbon
from hexamer.bench.roofline import (
    MachineLimits,
    decode_bytes,
    decode_flops,
    layer_linear_params,
    measure_matmul_flops,
    measure_read_bandwidth,
    prefill_flops,
    roofline_summary,
    run_roofline_bench,
)
from hexamer.model.config import ModelConfig

# hidden 64, FFN 128, 2 layers, 4 query heads and 2 KV heads of 16
CONFIG = ModelConfig(
    vocab_size=1000,
    hidden_size=64,
    intermediate_size=128,
    num_hidden_layers=2,
    num_attention_heads=4,
    num_key_value_heads=2,
    head_dim=16,
)


def test_layer_params_by_hand() -> None:
    # q 64x64 + k,v 2 x 64x32 + o 64x64 + gate/up/down 3 x 64x128
    assert layer_linear_params(CONFIG) == 4096 + 4096 + 4096 + 24576 == 36864


def test_decode_bytes_by_hand() -> None:
    # weights: 2 layers x 36,864 + norms (2 per layer + final) x 64 + 100 head rows x 64 + 2 embedding rows x 64
    weights = 2 * 36864 + 5 * 64 + 100 * 64 + 2 * 64  # 80,576 values
    kv = 2 * 2 * 2 * 10 * 2 * 16  # k and v, 2 layers, batch 2, 10 cached tokens, 2 heads of 16 = 2,560
    assert (
        decode_bytes(CONFIG, batch=2, kv_len=10, weight_bytes=4, head_rows=100)
        == (weights + kv) * 4
        == 332544
    )
    assert (
        decode_bytes(CONFIG, batch=2, kv_len=10, weight_bytes=2, kv_bytes=4, head_rows=100)
        == weights * 2 + kv * 4
    )


def test_flops_by_hand() -> None:
    linear = 2 * 2 * 36864 * 2 * 10  # 2 FLOPs x 2 layers x params x 2 rows x 10 tokens
    attention = 2 * 2 * (2 * 2 * 4 * 16) * 55  # layers x rows x (QK + PV, 4 heads of 16) x 55 causal pairs
    head = 2 * 2 * 64 * 100  # last token of each row, 100 head rows
    assert prefill_flops(CONFIG, batch=2, tokens=10, head_rows=100) == linear + attention + head == 3031040
    assert (
        decode_flops(CONFIG, batch=1, kv_len=10, head_rows=100) == 2 * 2 * 36864 + 2 * 256 * 10 + 2 * 64 * 100
    )


def test_probes_measure_something() -> None:
    assert measure_read_bandwidth(8 * 2**20, repeats=1) > 1e8
    assert measure_matmul_flops(torch.float32, m=64, k=64, n=64, repeats=1) > 1e6


def test_bench_fractions(tiny_folder: Path) -> None:
    carbon = Carbon.from_pretrained(tiny_folder, max_batch_size=2)
    limits = MachineLimits(read_bandwidth=1e10, matmul_flops={"float32": 1e11, "bfloat16": 2e11})
    report = run_roofline_bench(carbon, batch_sizes=(1, 2), prompt_bp=60, new_bp=18, repeats=1, limits=limits)
    decode = [r for r in report.rows if r["item"].startswith("decode")]
    prefill = [r for r in report.rows if r["item"] == "prefill"]
    assert [r["batch"] for r in decode] == [1, 2] and len(prefill) == 2
    config = carbon.model.config
    head_rows = carbon.layout.kmer_stop - carbon.layout.end_id
    for r in decode:
        # 60 bp = 10 6-mers + <dna> = 11 cached tokens; 3 new tokens -> mean cache 11 + 1
        nbytes = decode_bytes(config, batch=r["batch"], kv_len=12, weight_bytes=4, head_rows=head_rows)
        flops = decode_flops(config, batch=r["batch"], kv_len=12, head_rows=head_rows)
        floor = max(nbytes / 1e10, flops / 1e11)
        assert r["bytes"] == nbytes and r["floor_seconds"] == pytest.approx(floor)
        assert r["% of limit"] == pytest.approx(100 * floor / r["seconds"])
    for r in prefill:
        flops = prefill_flops(config, batch=r["batch"], tokens=11, head_rows=head_rows)
        assert r["flops"] == flops and r["% of limit"] == pytest.approx(100 * flops / 1e11 / r["seconds"])
    summary = roofline_summary(report)
    assert set(summary) == {
        ("decode step (median)", 1),
        ("decode step (median)", 2),
        ("prefill", 1),
        ("prefill", 2),
    }
