"""``hexamer bench llamacpp``: hexamer against llama.cpp on the same weights, prompts and threads."""

from __future__ import annotations

import gc
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from hexamer.bench.llamacpp.backend import LlamaCppBackend
from hexamer.cache import cache_root

if TYPE_CHECKING:
    from hexamer.bench.llamacpp.parity import ParityReport
    from hexamer.bench.report import BenchReport
    from hexamer.carbon import Carbon


# ---------------------------------------------------------------------------------------- bench
def _timed_steps(carbon: Carbon) -> list[float]:
    """Record the wall time of every engine step of ``carbon`` (the first one holds the prefill)."""
    engine = carbon.engine
    times: list[float] = []
    step = type(engine).step

    def timed() -> Any:
        t0 = time.perf_counter()
        out = step(engine)
        times.append(time.perf_counter() - t0)
        return out

    engine.step = timed  # type: ignore[method-assign]
    return times


def _llamacpp_report(
    folder: str | os.PathLike[str], dtype: str, prompt_bp: int, new_bp: int, threads: int
) -> BenchReport:
    from hexamer.bench.report import BenchReport

    return BenchReport(
        name="llamacpp",
        title=f"hexamer vs llama.cpp generation ({Path(folder).name}, {dtype}, "
        f"{prompt_bp} bp in / {new_bp} bp out, {threads} threads each)",
        columns=["backend", "batch", "seconds", "bp/s", "× llama.cpp", "prefill s", "median step ms"],
        formats={
            "seconds": "{:.2f}",
            "bp/s": "{:,.1f}",
            "× llama.cpp": "{:.2f}×",
            "prefill s": "{:.2f}",
            "median step ms": "{:.1f}",
        },
    )


def _best_per_backend(
    carbon: Carbon,
    backend: LlamaCppBackend,
    step_times: list[float],
    prompts: list[str],
    *,
    new_bp: int,
    hexamer_modes: tuple[str, ...],
    repeats: int,
    log: Callable[[str], None],
) -> dict[str, tuple[float, float, float]]:
    """``name -> (seconds, prefill s, median step s)`` of each backend's fastest round on ``prompts``,
    after one short warm-up run each."""
    batch = len(prompts)
    best: dict[str, tuple[float, float, float]] = {}

    def run_hexamer(mode: str, items: list[str], bp: int) -> tuple[float, float]:
        step_times.clear()
        carbon.generate(items, max_bp=bp, mode=mode, temperature=1.0, seed=0)
        decode = step_times[1:] or step_times
        return step_times[0], float(np.median(decode))

    def run_llama(items: list[str], bp: int, b: int) -> tuple[float, float]:
        _, t = backend.generate(items, bp, batch=b, temperature=1.0, seed=0)
        return t.prefill_s, float(np.median(t.step_s)) if t.step_s else 0.0

    cases: dict[str, Callable[[], tuple[float, float]]] = {
        f"hexamer {mode} level": (lambda m=mode: run_hexamer(m, prompts, new_bp)) for mode in hexamer_modes
    }
    cases["llama.cpp"] = lambda: run_llama(prompts, new_bp, batch)
    run_hexamer("token", prompts[:1], 12)  # warm-up: allocations, oneDNN packing, KV contexts
    run_llama(prompts, 12, batch)
    for round_ in range(repeats):
        for name, fn in cases.items():
            gc.collect()
            t0 = time.perf_counter()
            prefill, step = fn()
            seconds = time.perf_counter() - t0
            if seconds < best.get(name, (float("inf"),))[0]:
                best[name] = (seconds, prefill, step)
            log(
                f"batch {batch}: {name} {batch * new_bp / seconds:,.1f} bp/s, prefill {prefill:.2f} s, "
                f"median step {1000 * step:.1f} ms (round {round_ + 1}/{repeats})"
            )
    return best


def _parity_gate(
    backend: LlamaCppBackend, carbon: Carbon, prompts: list[str], log: Callable[[str], None]
) -> ParityReport:
    """Load llama.cpp and check it computes what hexamer computes on ``prompts``; raises
    :class:`ParityError` when not. Returns the parity result for the notes."""
    backend.load()
    parity = backend.check_parity(carbon, prompts, raise_on_failure=False)
    log(parity.summary())
    parity.check()
    return parity


def _method_note(backend: LlamaCppBackend, threads: int, repeats: int) -> str:
    return (
        f"same folder and dtype ({backend.outtype} GGUF from llama.cpp's converter), same prompts, "
        f"{threads} threads each, temperature 1 over the 4,096 6-mers, end to end "
        f"(tokenize + prefill + decode); best of {repeats} alternating rounds"
    )


def _batch_rows(best: dict[str, tuple[float, float, float]], batch: int, new_bp: int) -> list[dict[str, Any]]:
    """One row per backend at ``batch``, its speed relative to llama.cpp's."""
    peer = best["llama.cpp"][0]
    return [
        {
            "backend": name,
            "batch": batch,
            "seconds": seconds,
            "bp/s": batch * new_bp / seconds,
            "× llama.cpp": peer / seconds,
            "prefill s": prefill,
            "median step ms": 1000 * step,
        }
        for name, (seconds, prefill, step) in best.items()
    ]


def run_llamacpp_bench(
    *,
    quick: bool = False,
    log: Callable[[str], None] = print,
    shape: str | None = None,
    dtype: str = "float32",
    batch_sizes: tuple[int, ...] = (1, 16),
    prompt_bp: int = 1080,
    new_bp: int = 1080,
    repeats: int = 1,
    threads: int | None = None,
    hexamer_modes: tuple[str, ...] = ("token",),
    folder: str | os.PathLike[str] | None = None,
    llama_cpp_dir: str | os.PathLike[str] | None = None,
) -> BenchReport:
    """hexamer vs llama.cpp generation bp/s on the same weights and threads, after a parity gate.

    The folder is ``bench_model_folder(shape)`` (random weights, real vocabulary; default shape
    ``tiny`` with ``quick``, else ``500m``) unless given.
    ``threads`` (default: torch's current setting) is used by both. ``hexamer_modes`` adds
    ``"bp"`` (FNS base-level sampling) to the like-for-like token-level run. ``quick`` shrinks the
    workload (batch <= 4, 120 bp in / 60 bp out) to check the plumbing. Backends alternate within
    each of ``repeats`` rounds and keep their best time. Raises :class:`ParityError` before any
    timing when llama.cpp computes something else.
    """
    import torch

    from hexamer.bench.common import bench_model_folder
    from hexamer.bench.tokenizer import random_dna
    from hexamer.carbon import Carbon

    bad = [m for m in hexamer_modes if m not in ("token", "bp")]
    if bad or not hexamer_modes:
        raise ValueError(f"hexamer_modes must be a non-empty subset of token, bp; got {hexamer_modes}")
    shape = shape or ("tiny" if quick else "500m")
    if quick:
        batch_sizes = tuple(min(b, 4) for b in batch_sizes)
        prompt_bp, new_bp = min(prompt_bp, 120), min(new_bp, 60)
    torch_threads = torch.get_num_threads()
    threads = threads or torch_threads
    torch.set_num_threads(threads)
    backend = LlamaCppBackend(
        folder or bench_model_folder(shape, cache_root(), dtype),
        dtype=dtype,
        n_threads=threads,
        llama_cpp_dir=llama_cpp_dir,
        log=log,
    )
    try:
        ok, why = backend.available()
        if not ok:
            raise RuntimeError(f"llama.cpp benchmark unavailable: {why}")
        carbon = Carbon.from_pretrained(
            backend.folder, dtype=getattr(torch, dtype), device="cpu", max_batch_size=max(batch_sizes)
        )
        step_times = _timed_steps(carbon)
        k = carbon.layout.k
        prompt_bp -= prompt_bp % k
        prompts_all = [random_dna(prompt_bp, seed=1000 + i) for i in range(max(batch_sizes))]
        parity = _parity_gate(backend, carbon, prompts_all, log)
        report = _llamacpp_report(backend.folder, dtype, prompt_bp, new_bp, threads)
        for batch in batch_sizes:
            best = _best_per_backend(
                carbon,
                backend,
                step_times,
                prompts_all[:batch],
                new_bp=new_bp,
                hexamer_modes=hexamer_modes,
                repeats=repeats,
                log=log,
            )
            report.rows += _batch_rows(best, batch, new_bp)
        report.notes += [parity.summary(), *parity.documented, _method_note(backend, threads, repeats)]
        return report
    finally:
        backend.close()
        torch.set_num_threads(torch_threads)
