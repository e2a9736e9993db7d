"""``hexamer bench gpu``, steps 3-6: throughput on the device, each against a peer in the same run.

- generation: the DNA suite (1,080 bp prompts, 1,080 bp out) per shape and batch size, hexamer
  (bf16, token level) against ``transformers.generate`` on the same device, batch and weights;
- scoring: the window recipe (8,192-bp windows) in variants/s against the published per-variant
  recipe (``transformers``, one forward per window);
- batch-1 decode as a fraction of the measured copy bandwidth (the bytes one step must read);
- speculative decoding with a draft of the 500M shape against the target alone.

Each case checks that it fits the device's free memory first and is skipped (with the estimate)
when it does not; a :class:`Budget` skips the cases left when a step runs out of its time.
"""

from __future__ import annotations

import math
import statistics
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from hexamer.bench.backends import HexamerBackend, TransformersBackend, engine_step_times, load_hf_model
from hexamer.bench.report import BenchReport
from hexamer.bench.suite import suite_prompts

__all__ = [
    "Budget",
    "decode_bandwidth_report",
    "fits",
    "kv_bytes_per_token",
    "scoring_report",
    "speculative_report",
    "throughput_report",
]


@dataclass
class Budget:
    """Seconds a step may take; cases start only while some are left (a started case finishes)."""

    seconds: float
    start: float = field(default_factory=time.perf_counter)

    def left(self) -> float:
        return self.seconds - (time.perf_counter() - self.start)

    def spent(self) -> bool:
        return self.left() <= 0


def kv_bytes_per_token(config: Any, itemsize: int) -> int:
    """KV-cache bytes of one token, every layer (keys and values)."""
    return 2 * config.num_hidden_layers * config.num_key_value_heads * config.head_dim * itemsize


def fits(config: Any, device: torch.device, *, batch: int, tokens: int, itemsize: int = 2) -> str | None:
    """``None`` when weights + KV cache of ``batch`` rows × ``tokens`` fit the device's free
    memory with 20% to spare (activations, allocator), else why not (the case is skipped)."""
    from hexamer.model.memory import available_memory_bytes, format_bytes, parameter_count

    need = parameter_count(config) * itemsize + batch * tokens * kv_bytes_per_token(config, itemsize)
    free = available_memory_bytes(device)
    if free is not None and need * 1.2 > free:
        return f"needs ~{format_bytes(need * 1.2)}, {format_bytes(free)} free"
    return None


TRANSFORMERS_HINT = "transformers is not installed (pip install 'transformers>=4.56')"


def _has_transformers() -> bool:
    import importlib.util

    try:
        return importlib.util.find_spec("transformers") is not None
    except ImportError:
        return False


def _load(folder: Path, device: torch.device, dtype: str, **engine: Any) -> Any:
    from hexamer.carbon import Carbon

    return Carbon.from_pretrained(folder, dtype=dtype, device=device, **engine)


def _free(device: torch.device) -> None:
    import gc

    gc.collect()
    if device.type == "cuda":
        torch.cuda.empty_cache()


def throughput_report(
    folders: dict[str, Path],
    device: torch.device,
    *,
    batches: Sequence[int],
    peer_batches: Sequence[int],
    prompt_bp: int,
    new_bp: int,
    budget: Budget,
    dtype: str = "bfloat16",
) -> BenchReport:
    """bp/s of the DNA suite per (shape, batch): hexamer against transformers at the same batch."""
    report = BenchReport(
        name="throughput",
        title=f"DNA suite: {prompt_bp:,} bp in / {new_bp:,} bp out, {dtype}, hexamer vs transformers.generate",
        columns=["shape", "batch", "backend", "seconds", "bp/s", "× transformers", "note"],
        formats={"seconds": "{:.2f}", "bp/s": "{:,.0f}", "× transformers": "{:.2f}×"},
    )
    tokens = -(-(prompt_bp + new_bp) // 6) + 4
    if not _has_transformers():
        peer_batches = ()
        report.notes.append(f"transformers peer skipped: {TRANSFORMERS_HINT}")
    for shape, folder in folders.items():
        carbon = _load(folder, device, dtype, max_batch_size=max(batches), max_model_len=tokens)
        hf = None
        for batch in batches:
            row = {"shape": shape, "batch": batch}
            why = fits(carbon.model.config, device, batch=batch, tokens=tokens)
            if why is not None or budget.spent():
                report.rows.append({**row, "backend": "hexamer", "note": why or "skipped: step time budget"})
                continue
            prompts = [p.sequence for p in suite_prompts(batch, prompt_bp)]
            backend = HexamerBackend(carbon, mode="token")
            backend.generate(prompts, min(new_bp, 36), seed=1)  # warm-up: this batch size's kernels
            run = backend.generate(prompts, new_bp, seed=0)
            ours = batch * new_bp / run.seconds
            report.rows.append({**row, "backend": "hexamer", "seconds": run.seconds, "bp/s": ours})
            if batch not in peer_batches or budget.spent():
                continue
            if hf is None:
                hf = load_hf_model(folder, dtype).to(device)
            peer = TransformersBackend(hf, carbon)
            peer.generate(prompts[: min(batch, 2)], 12, seed=1)
            ref = peer.generate(prompts, new_bp, seed=0)
            theirs = batch * new_bp / ref.seconds
            report.rows[-1]["× transformers"] = ours / theirs
            report.rows.append({**row, "backend": "transformers", "seconds": ref.seconds, "bp/s": theirs})
        del carbon, hf
        _free(device)
    report.notes.append(
        "hexamer: Carbon.generate(mode='token', temperature 1), bp/s = batch × new bp / wall seconds "
        "(prefill included); transformers: LlamaForCausalLM.generate on the same weights, restricted to "
        "the 6-mer block; one warm-up run per batch size first"
    )
    return report


def scoring_report(
    folder: Path, device: torch.device, *, sites: int, window: int, dtype: str = "bfloat16"
) -> BenchReport:
    """Window-recipe variant scores/s: the engine, the naive recipe and the published scripts' way."""
    from hexamer.bench.baselines.published_vep import PublishedScorer
    from hexamer.bench.vep import bench_vep
    from hexamer.demo import demo_data_files
    from hexamer.io.reference import Reference
    from hexamer.synthetic.vcf import write_random_vcf

    carbon = _load(folder, device, dtype)
    reference = next(p for p in demo_data_files() if "chr20" in p.name)
    report = BenchReport(
        name="scoring",
        title=f"Window recipe ({window:,}-bp windows, {dtype}): variants/s",
        columns=["method", "variants", "seconds", "variants/s", "× published"],
        formats={"seconds": "{:.2f}", "variants/s": "{:,.1f}", "× published": "{:.1f}×"},
    )
    with tempfile.TemporaryDirectory() as tmp:
        vcf = Path(tmp) / "sites.vcf"
        with Reference(reference) as ref:
            contig, length = next(iter(ref.lengths.items()))
        start = min(window, max(0, length - 3 * window))
        write_random_vcf(
            reference, vcf, n_sites=sites, alts_per_site=3, region=(contig, start, start + 2 * window)
        )
        b = bench_vep(carbon, vcf, reference, recipe="window", window=window)
        del carbon
        _free(device)
        runs = [
            ("hexamer engine", b.n_variants, b.engine_s),
            ("naive (hexamer model)", b.n_variants, b.naive_s),
        ]
        if _has_transformers():
            scorer = PublishedScorer(folder, dtype=dtype, device=device)
            t0 = time.perf_counter()
            published = scorer.scores(vcf, reference, recipe="window", window=window)
            runs.append(("published recipe (transformers)", len(published), time.perf_counter() - t0))
        else:
            report.notes.append(f"published recipe skipped: {TRANSFORMERS_HINT}")
    rate = runs[-1][1] / runs[-1][2] if len(runs) == 3 and runs[-1][2] else None
    for method, n, seconds in runs:
        per_s = n / seconds if seconds else math.inf
        report.rows.append(
            {
                "method": method,
                "variants": n,
                "seconds": seconds,
                "variants/s": per_s,
                "× published": per_s / rate if rate else None,
            }
        )
    report.notes.append(f"engine vs naive: max abs score difference = {b.max_abs_diff:.2e}")
    return report


def decode_bandwidth_report(
    folder: Path,
    device: torch.device,
    *,
    copy_bandwidth: float,
    new_bp: int,
    graphs: bool,
    dtype: str = "bfloat16",
) -> BenchReport:
    """Batch-1 decode step time against the bytes it must read: the fraction of copy bandwidth."""
    from hexamer.bench.roofline import decode_bytes

    report = BenchReport(
        name="decode_bandwidth",
        title=f"Batch-1 decode vs measured copy bandwidth ({folder.name}, {dtype})",
        columns=["decode step", "median ms", "GB read per step", "GB/s", "fraction of copy bandwidth"],
        formats={
            "median ms": "{:.3f}",
            "GB read per step": "{:.2f}",
            "GB/s": "{:,.0f}",
            "fraction of copy bandwidth": "{:.0%}",
        },
    )
    prompt = suite_prompts(1, 1080)[0].sequence
    fitted = {"max_model_len": -(-(1080 + new_bp) // 6) + 4}
    options: dict[str, dict[str, Any]] = {"static decode": {"static_decode": True, **fitted}}
    if graphs:
        options["static + CUDA graphs"] = {"compile_decode": True, **fitted}
        # what attending over the whole preallocated cache costs when max_model_len is the context
        options["static, max_model_len = context"] = {"static_decode": True}
    for name, engine in options.items():
        carbon = _load(folder, device, dtype, max_batch_size=1, **engine)
        carbon.generate(prompt, max_bp=min(new_bp, 60), mode="token", seed=1)  # warm-up (and capture)
        with engine_step_times(carbon.engine) as steps:
            carbon.generate(prompt, max_bp=new_bp, mode="token", seed=0)
        times = [e - s for kind, s, e in steps if kind == "decode"]
        step = statistics.median(times)
        itemsize = torch.empty((), dtype=getattr(torch, dtype)).element_size()
        layout = carbon.layout
        need = decode_bytes(
            carbon.model.config,
            batch=1,
            kv_len=(1080 + new_bp / 2) / 6,
            weight_bytes=itemsize,
            head_rows=layout.kmer_stop - layout.kmer_start,
        )
        report.rows.append(
            {
                "decode step": name,
                "median ms": step * 1e3,
                "GB read per step": need / 1e9,
                "GB/s": need / step / 1e9,
                "fraction of copy bandwidth": need / step / copy_bandwidth,
            }
        )
        del carbon
        _free(device)
    return report


def speculative_report(
    root: Path, device: torch.device, *, pair: Any, new_bp: int, dtype: str = "bfloat16"
) -> BenchReport:
    """Greedy generation of the target alone and with the draft: same bases, the speed-up."""
    from hexamer.bench.spec import build_spec_pair

    draft_dir, target_dir = build_spec_pair(root, pair)
    target = _load(target_dir, device, dtype, max_batch_size=1)
    draft = _load(draft_dir, device, dtype, max_batch_size=1)
    prompt = suite_prompts(1, 1080)[0].sequence
    report = BenchReport(
        name="speculative",
        title=f"Speculative decoding, draft {pair.draft.hidden_size}×{pair.draft.num_hidden_layers} layers, "
        f"target {pair.target.num_hidden_layers} layers ({dtype}, batch 1, greedy, {new_bp} bp)",
        columns=["run", "seconds", "bp/s", "speed-up", "same bases"],
        formats={"seconds": "{:.2f}", "bp/s": "{:,.0f}", "speed-up": "{:.2f}×"},
    )
    runs: dict[str, tuple[float, str]] = {}
    for name, extra in (("target alone", {}), ("with draft", {"draft": draft})):
        target.generate(prompt, max_bp=min(new_bp, 60), temperature=0, mode="token", **extra)  # warm-up
        t0 = time.perf_counter()
        gen = target.generate(prompt, max_bp=new_bp, temperature=0, mode="token", **extra)
        runs[name] = (time.perf_counter() - t0, gen.sequence)
    alone_s, alone = runs["target alone"]
    for name, (seconds, seq) in runs.items():
        report.rows.append(
            {
                "run": name,
                "seconds": seconds,
                "bp/s": new_bp / seconds,
                "speed-up": alone_s / seconds,
                "same bases": seq == alone,
                # exact in float32 (tests/engine); in bf16 the verify and decode kernels round apart
                "pass": seq == alone if dtype == "float32" else None,
            }
        )
    if dtype != "float32":
        report.notes.append(
            f"same bases: reported, not a pass/fail check in {dtype} (a near-tie may round apart between the "
            "draft's verify forward and the plain decode step; exactness is tested in float32)"
        )
    report.notes.append(
        "synthetic pair (hexamer.bench.spec): the target is the draft plus extra layers, so drafts are often accepted"
    )
    return report
