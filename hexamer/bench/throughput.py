"""``hexamer bench throughput``: the Trainium2 article's DNA suite on every backend, in one run.

Batch 1 runs each of the seven suite prompts on its own (as the article's batch-1 suite); larger
batches run ``batch`` prompts cycling through the cases (the article's batch-16 sweep). Every
backend generates ``new_bp`` bases per prompt at temperature 1 from the same weights and dtype.
Reported per backend and batch: kbp/s of valid bases end to end, tokens/s, time to first token,
per-token (decode step) latency p50/p99 and the valid-DNA share. Rounds interleave the backends
and each keeps its best time per case, so a burst of load on a shared machine cannot favour one.
"""

from __future__ import annotations

import gc
import statistics
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from hexamer.bench.backends import (
    Backend,
    GenerationRun,
    HexamerBackend,
    TransformersBackend,
    UnavailableBackend,
    llamacpp_backend,
    load_hf_model,
)
from hexamer.bench.report import BenchReport
from hexamer.bench.suite import CASES, PROMPT_BP, suite_prompt, suite_prompts, valid_dna

BACKENDS = ("hexamer-token", "hexamer-bp", "transformers", "transformers-static", "llama.cpp")
PEER = "transformers"

COLUMNS = (
    "backend",
    "batch",
    "seconds",
    "kbp/s",
    "tok/s",
    "TTFT p50 (ms)",
    "ITL p50 (ms)",
    "ITL p99 (ms)",
    "valid DNA %",
    "× transformers",
)


def make_backends(
    folder: str | Path,
    names: Sequence[str],
    *,
    dtype: str = "float32",
    max_batch: int = 16,
    log: Callable[[str], None] = lambda _: None,
) -> list[Backend]:
    """Load each named backend once (hexamer's two modes share one model, transformers' two caches
    share one ``LlamaForCausalLM``)."""
    from hexamer import Carbon

    unknown = sorted(set(names) - set(BACKENDS))
    if unknown:
        raise ValueError(f"unknown backend(s) {unknown}; choose from {list(BACKENDS)}")
    import torch

    carbon = Carbon.from_pretrained(
        folder, dtype=getattr(torch, dtype), device="cpu", max_batch_size=max_batch
    )
    hf = None
    out: list[Backend] = []
    for name in names:
        if name.startswith("hexamer-"):
            out.append(HexamerBackend(carbon, name.removeprefix("hexamer-")))
        elif name.startswith("transformers"):
            try:
                hf = hf if hf is not None else load_hf_model(folder, dtype)
            except ImportError as exc:
                out.append(UnavailableBackend(name, f"transformers is not installed ({exc})"))
                continue
            out.append(TransformersBackend(hf, carbon, static_cache=name == "transformers-static"))
        else:
            log("preparing llama.cpp (build/convert on first use) ...")
            parity = [p.sequence for p in suite_prompts(2, 120)]
            out.append(llamacpp_backend(folder, dtype, log, carbon=carbon, parity_prompts=parity))
    return out


def percentile(values: Sequence[float], q: float) -> float | None:
    """Linear-interpolated percentile (as vLLM's bench reports), None for no values."""
    return float(np.percentile(np.asarray(values, dtype=np.float64), q)) if len(values) else None


def _groups(batch: int, prompt_bp: int, cases: Sequence[str]) -> list[tuple[str, list[str]]]:
    """Batch 1: one group per case. Larger batches: one group of ``batch`` prompts over the cases."""
    if batch == 1:
        return [(c, [suite_prompt(c, prompt_bp).sequence]) for c in cases]
    prompts = suite_prompts(batch, prompt_bp)
    return [(f"{batch} prompts", [p.sequence for p in prompts])]


def run_throughput_bench(
    backends: Sequence[Backend],
    *,
    batch_sizes: Sequence[int] = (16, 1),
    prompt_bp: int = PROMPT_BP,
    new_bp: int = PROMPT_BP,
    repeats: int = 1,
    cases: Sequence[str] | None = None,
    k: int = 6,
    title: str | None = None,
    log: Callable[[str], None] = lambda _: None,
) -> BenchReport:
    """Run the suite on every available backend; one row per (backend, batch)."""
    if prompt_bp % k:
        raise ValueError(f"prompt_bp must be a multiple of {k} (whole 6-mers), got {prompt_bp}")
    cases = list(cases or CASES)
    report = BenchReport(
        name="throughput",
        title=title or f"DNA suite: {prompt_bp} bp in / {new_bp} bp out, end to end",
        columns=COLUMNS,
        formats={
            "seconds": "{:.2f}",
            "kbp/s": "{:.3f}",
            "tok/s": "{:.1f}",
            "TTFT p50 (ms)": "{:.0f}",
            "ITL p50 (ms)": "{:.1f}",
            "ITL p99 (ms)": "{:.1f}",
            "valid DNA %": "{:.1f}",
            "× transformers": "{:.2f}×",
        },
    )
    live: list[Backend] = []
    for b in backends:
        ok, reason = b.available()
        if ok:
            live.append(b)
        else:
            report.notes.append(f"{b.name}: skipped — {reason}")
            log(f"{b.name}: skipped — {reason}")
    tokens_per_prompt = -(-new_bp // k)
    for batch in batch_sizes:
        groups = _groups(batch, prompt_bp, cases)
        for b in live:  # warm-up: allocations, oneDNN packing, lazy imports
            b.generate(groups[0][1], min(new_bp, 2 * k))
        best: dict[tuple[str, str], GenerationRun] = {}
        gc.collect()
        for round_ in range(repeats):
            for case, prompts in groups:
                for b in live:
                    run = b.generate(prompts, new_bp)
                    key = (b.name, case)
                    if key not in best or run.seconds < best[key].seconds:
                        best[key] = run
                    log(
                        f"batch {batch} {case} round {round_ + 1}/{repeats}: {b.name} "
                        f"{len(prompts) * new_bp / run.seconds:,.0f} bp/s"
                    )
        rows: list[dict[str, Any]] = []
        for b in live:
            runs = [(case, best[(b.name, case)]) for case, _ in groups]
            rows.append(_row(b.name, batch, runs, new_bp, tokens_per_prompt))
        peer = next((r for r in rows if r["backend"] == PEER), None)
        for r in rows:
            r["× transformers"] = r["kbp/s"] / peer["kbp/s"] if peer and peer["kbp/s"] else None
        report.rows.extend(rows)
    report.notes.append(
        "kbp/s counts valid bases (A/C/G/T inside the DNA region, at most the requested length) over "
        "wall time including tokenisation and prefill; ITL = one decode step (every row gains a 6-mer)."
    )
    return report


def _row(
    name: str, batch: int, runs: list[tuple[str, GenerationRun]], new_bp: int, tokens_per_prompt: int
) -> dict[str, Any]:
    seconds = sum(r.seconds for _, r in runs)
    checks = [valid_dna(out, new_bp) for _, r in runs for out in r.outputs]
    valid_bp = sum(c.valid_bp for c in checks)
    itl = [x for _, r in runs for x in r.itl_s]
    ttft = [r.ttft_s for _, r in runs if r.ttft_s is not None]
    n_prompts = len(checks)
    cases = [
        {
            "case": case,
            "seconds": r.seconds,
            "bp_per_s": sum(valid_dna(o, new_bp).valid_bp for o in r.outputs) / r.seconds,
            "valid_pct": 100 * statistics.fmean(valid_dna(o, new_bp).fraction for o in r.outputs),
            "outputs_head": [o[:60] for o in r.outputs[:2]],
        }
        for case, r in runs
    ]
    return {
        "backend": name,
        "batch": batch,
        "seconds": seconds,
        "kbp/s": valid_bp / seconds / 1000,
        "tok/s": n_prompts * tokens_per_prompt / seconds,
        "TTFT p50 (ms)": None if not ttft else 1000 * statistics.median(ttft),
        "ITL p50 (ms)": None if not itl else 1000 * percentile(itl, 50),  # type: ignore[operator]
        "ITL p99 (ms)": None if not itl else 1000 * percentile(itl, 99),  # type: ignore[operator]
        "valid DNA %": 100 * valid_bp / (new_bp * n_prompts) if n_prompts else None,
        "median elapsed (s)": statistics.median(r.seconds for _, r in runs),
        "exact outputs": sum(c.exact for c in checks),
        "prompts": n_prompts,
        "cases": cases,
    }
