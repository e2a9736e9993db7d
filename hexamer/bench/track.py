"""``hexamer bench track``: bp/s of ``hexamer track`` and the fraction of the matmul peak it reaches.

A random-DNA contig of ``bp`` bases is tracked end to end (:func:`hexamer.tracks.run_tracks`:
FASTA reads, windows, forwards, track values, bigWig writing), and beside it, in alternating
rounds, the same windows' forwards alone (``Carbon.base_logprobs``), so the table shows what the
model costs and what everything else adds. FLOPs are counted from the config: every forward is a
prefill of its window (:func:`hexamer.bench.roofline.prefill_flops`) plus the LM head's 6-mer rows
at *every* position (a track needs each position's distribution); the peak is the matmul FLOP/s
measured in the same run (:func:`hexamer.bench.roofline.measure_matmul_flops`).
"""

from __future__ import annotations

import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from hexamer.bench.report import BenchReport
from hexamer.bench.roofline import measure_matmul_flops, prefill_flops
from hexamer.bench.timing import run_rounds, spread_warning
from hexamer.tracks import plan_windows, run_tracks, window_plan

if TYPE_CHECKING:
    from hexamer.carbon import Carbon

__all__ = ["run_track_bench", "track_flops"]


def track_flops(carbon: Carbon, window_tokens: list[int], prefix_tokens: int = 0) -> float:
    """FLOPs of the forwards of windows of ``window_tokens`` DNA tokens each (+ ``<dna>`` + prefix)."""
    config = carbon.model.config
    layout = carbon.layout
    head = 2.0 * config.hidden_size * (layout.kmer_stop - layout.kmer_start)
    total = 0.0
    for n in window_tokens:
        tokens = n + 1 + prefix_tokens
        total += prefill_flops(config, batch=1, tokens=tokens, head_rows=0) + head * tokens
    return total


def run_track_bench(
    carbon: Carbon,
    *,
    bp: int = 12_288,
    window: int | None = 6_144,
    stride: int | None = None,
    repeats: int = 3,
    seed: int = 0,
    peak: float | None = None,
    log: Callable[[str], None] = lambda _: None,
) -> BenchReport:
    """Time ``run_tracks`` (logprob, entropy, llr; bigWig) on ``bp`` random bases and the bare
    forwards of the same windows; report bp/s, GFLOP/s and the fraction of the matmul peak."""
    import torch

    if bp < 1:
        raise ValueError(f"bp must be >= 1, got {bp}")
    window, stride = window_plan(carbon, window=window, stride=stride)
    k = carbon.layout.k
    dtype = next(carbon.model.parameters()).dtype
    dtype_name = str(dtype).removeprefix("torch.")
    if peak is None:
        log(f"measuring the matmul peak ({dtype_name}) ...")
        peak = measure_matmul_flops(dtype if dtype in (torch.float32, torch.bfloat16) else torch.float32)
    seq = "".join(np.random.default_rng(seed).choice(list("ACGT"), bp))
    wins = plan_windows(bp, k=k, window_tokens=window // k, stride_tokens=stride // k)
    texts = [seq[w.start : w.end] for w in wins]
    flops = track_flops(carbon, [-(-len(t) // k) for t in texts])
    with tempfile.TemporaryDirectory(prefix="hexamer-bench-track-") as tmp:
        fasta = Path(tmp) / "bench.fa"
        fasta.write_text(">bench\n" + "\n".join(seq[i : i + 60] for i in range(0, bp, 60)) + "\n")
        cases: dict[str, Callable[[], Any]] = {
            "hexamer track (bigWig: logprob, entropy, llr)": lambda: run_tracks(
                carbon, fasta, Path(tmp) / "out", window=window, stride=stride, formats=("bigwig",)
            ),
            "forwards only (Carbon.base_logprobs)": lambda: [carbon.base_logprobs(t) for t in texts],
        }
        timings = run_rounds(cases, repeats, log=log)
    report = BenchReport(
        name="track",
        title=f"hexamer track: {bp:,} random bp, window {window:,} bp, stride {stride:,} bp ({dtype_name})",
        columns=("case", "forwards", "seconds (min / median / max)", "bp/s", "GFLOP/s", "% of matmul peak"),
        formats={"bp/s": "{:,.0f}", "GFLOP/s": "{:,.1f}", "% of matmul peak": "{:.1f}%"},
    )
    for name, timing in timings.items():
        seconds = timing.median
        report.rows.append(
            {
                "case": name,
                "forwards": len(texts),
                "seconds (min / median / max)": timing.summary(),
                "bp/s": bp / seconds,
                "GFLOP/s": flops / seconds / 1e9,
                "% of matmul peak": 100 * flops / seconds / peak,
                "flops": flops,
                **timing.as_dict(),
            }
        )
    report.rows.append(
        {
            "case": f"matmul peak {dtype_name} (2048×1024 @ 1024×3072)",
            "forwards": None,
            "seconds (min / median / max)": None,
            "bp/s": None,
            "GFLOP/s": peak / 1e9,
            "% of matmul peak": 100.0,
        }
    )
    report.notes.append(
        f"FLOPs per run {flops / 1e9:,.1f} G: {len(texts)} forwards of up to {window // k + 1} tokens, "
        "projections + causal attention + the 4,096 6-mer rows of the LM head at every position; "
        f"each base computed {sum(len(t) for t in texts) / bp:.2f}× (window / stride overlap)."
    )
    if (warning := spread_warning(timings)) is not None:
        report.notes.append(warning)
    return report
