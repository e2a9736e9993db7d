"""Generation throughput: hexamer (token level and bp level) against ``transformers.generate``.

All backends run the very same weights and dtype in one process, on the same random 1,080 bp
prompts, and produce the same number of new bases (the published Trainium2 workload: batch 16 and
batch 1, 1,080 bp in, 1,080 bp out). ``transformers`` is restricted to the 6-mer rows with a logits
processor so that every backend generates DNA; it samples at temperature 1 like hexamer.
"""

from __future__ import annotations

import gc
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path

import torch

from hexamer.bench.backends import hf_generate_dna
from hexamer.bench.common import kmer_only_processor
from hexamer.bench.report import BenchReport
from hexamer.bench.timing import MAX_TRUSTED_SPREAD
from hexamer.bench.tokenizer import random_dna


@dataclass
class GenerateBenchRow:
    backend: str
    batch: int
    prompt_bp: int
    new_bp: int
    seconds: float  # median of the rounds
    bp_per_s: float
    ratio_vs_transformers: float | None = None
    seconds_min: float | None = None
    seconds_max: float | None = None
    rounds: int = 1

    def as_dict(self) -> dict:
        return asdict(self)


def run_generate_bench(
    folder: str | Path,
    *,
    batch_sizes: tuple[int, ...] = (16, 1),
    prompt_bp: int = 1080,
    new_bp: int = 1080,
    dtype: str = "float32",
    backends: tuple[str, ...] = ("hexamer-token", "hexamer-bp", "transformers"),
    hf_static_cache: bool = False,
    repeats: int = 1,
    log: Callable[[str], None] = lambda _: None,
) -> list[GenerateBenchRow]:
    """Measure each backend at each batch size; returns one row per (backend, batch).

    Each backend runs once untimed (warm-up), then ``repeats`` (at least 3) rounds in alternating
    order; a row holds the median and the min/max (:mod:`hexamer.bench.timing`).
    """
    from hexamer import Carbon
    from hexamer.bench.timing import run_rounds

    torch_dtype = getattr(torch, dtype)
    rows: list[GenerateBenchRow] = []
    # every round feeds the same prompts: with prefix caching the rounds after the warm-up would skip
    # their prefill, which is not the workload measured (docs/engine.md: prefix caching)
    carbon = Carbon.from_pretrained(
        folder, dtype=torch_dtype, device="cpu", max_batch_size=max(batch_sizes), prefix_caching=False
    )
    layout = carbon.layout
    new_tokens = -(-new_bp // layout.k)
    hf_model = None
    if any(b.startswith("transformers") for b in backends):
        import transformers

        hf_model = transformers.LlamaForCausalLM.from_pretrained(folder, dtype=torch_dtype).eval()
        processor = kmer_only_processor(layout.kmer_start, layout.kmer_stop)

    for batch in batch_sizes:
        prompts = [random_dna(prompt_bp - prompt_bp % layout.k, seed=1000 + i) for i in range(batch)]

        def hexamer_run(mode: str, bp: int = new_bp, items: list[str] = prompts) -> None:
            carbon.generate(items, max_bp=bp, mode=mode, temperature=1.0, seed=0)

        def hf_run(tokens: int = new_tokens, items: list[str] = prompts) -> None:
            assert hf_model is not None
            out, enc = hf_generate_dna(
                hf_model, carbon.tokenizer, items, tokens, processor=processor, static_cache=hf_static_cache
            )
            assert out.shape[1] == enc["input_ids"].shape[1] + tokens

        cases: dict[str, Callable[[], None]] = {
            "hexamer-token": lambda: hexamer_run("token"),
            "hexamer-bp": lambda: hexamer_run("bp"),
            "transformers": hf_run,
        }
        gc.collect()
        timings = run_rounds(
            {name: cases[name] for name in backends},
            repeats,
            log=lambda msg, b=batch: log(f"batch {b}: {msg}"),
        )
        measured = {name: t.median for name, t in timings.items()}
        peer = measured.get("transformers")
        for name, seconds in measured.items():
            rows.append(
                GenerateBenchRow(
                    backend=name
                    if name != "transformers" or not hf_static_cache
                    else "transformers (static cache)",
                    batch=batch,
                    prompt_bp=prompt_bp,
                    new_bp=new_bp,
                    seconds=seconds,
                    bp_per_s=batch * new_bp / seconds,
                    ratio_vs_transformers=(peer / seconds) if peer else None,
                    seconds_min=timings[name].min,
                    seconds_max=timings[name].max,
                    rounds=len(timings[name].seconds),
                )
            )
    return rows


def generate_report(
    rows: list[GenerateBenchRow], *, prompt_bp: int, new_bp: int, dtype: str, repeats: int = 1
) -> BenchReport:
    """The rows as the shared table (JSON/Markdown/PNG), with the bp-vs-token cost per batch."""
    report = BenchReport(
        name="generate",
        title=f"generation, {prompt_bp} bp in / {new_bp} bp out, {dtype}, end to end "
        f"(median of {max(rows[0].rounds, 1) if rows else repeats} alternating rounds after a warm-up)",
        columns=("backend", "batch", "seconds", "s min/med/max", "bp/s", "× transformers"),
        rows=[
            {
                **r.as_dict(),
                "s min/med/max": f"{r.seconds_min or r.seconds:.3g} / {r.seconds:.3g} / "
                f"{r.seconds_max or r.seconds:.3g}",
                "bp/s": r.bp_per_s,
                "× transformers": r.ratio_vs_transformers,
            }
            for r in rows
        ],
        formats={"seconds": "{:.2f}", "bp/s": "{:,.1f}", "× transformers": "{:.2f}×"},
    )
    by_key = {(r.backend, r.batch): r for r in rows}
    for b in dict.fromkeys(r.batch for r in rows):
        tok, bp = by_key.get(("hexamer-token", b)), by_key.get(("hexamer-bp", b))
        if tok and bp:
            low = 100 * ((bp.seconds_min or bp.seconds) / (tok.seconds_max or tok.seconds) - 1)
            high = 100 * ((bp.seconds_max or bp.seconds) / (tok.seconds_min or tok.seconds) - 1)
            report.notes.append(
                f"batch {b}: bp-level costs {100 * (bp.seconds / tok.seconds - 1):+.1f}% vs token-level "
                f"(medians; {low:+.1f}% to {high:+.1f}% pairing the fastest and slowest rounds)"
            )
    unsteady = [
        f"{r.backend} batch {r.batch} {(r.seconds_max - r.seconds_min) / r.seconds:.0%}"
        for r in rows
        if r.seconds_min is not None
        and r.seconds_max is not None
        and r.seconds > 0
        and (r.seconds_max - r.seconds_min) / r.seconds > MAX_TRUSTED_SPREAD
    ]
    if unsteady:
        report.notes.insert(
            0,
            f"WARNING: timings are not steady enough to trust (rounds differ by {', '.join(unsteady)} "
            f"of their median, more than {MAX_TRUSTED_SPREAD:.0%}): re-run with more --repeats, a larger "
            "workload (no --quick) or on an idle machine before quoting these ratios.",
        )
    return report
