"""``hexamer bench gpu``, step 2: correctness on the device, each check against a peer.

- logits vs ``transformers`` on random token rows with the real vocabulary: float32 within
  :data:`F32_LOGIT_TOL`; bfloat16 within :data:`BF16_FACTOR` times transformers' own bf16 error
  (both against transformers in float32 on the same device);
- bp-level scores on the device vs the CPU engine (float32 both);
- greedy token-level generation identical to ``transformers.generate`` in float32;
- the decode paths (dynamic, static, static + CUDA graphs) giving the same tokens.

Every row carries ``pass`` (True/False) so the report's verdict needs no reading of numbers.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch

from hexamer.bench.common import kmer_only_processor
from hexamer.bench.report import BenchReport

__all__ = [
    "BF16_FACTOR",
    "F32_LOGIT_TOL",
    "F32_SCORE_TOL",
    "Peers",
    "decode_paths_report",
    "greedy_report",
    "logits_report",
    "scores_report",
]

#: float32 logits of hexamer and transformers on the same device differ by at most this.
F32_LOGIT_TOL = 1e-4
#: hexamer's bf16 logits may be at most this many times further from transformers' float32 logits
#: than transformers' own bf16 logits are (bf16 rounding differs by kernel; doubling it is a bug).
BF16_FACTOR = 2.0
#: mean bp-level log-likelihoods, device vs CPU engine, float32
F32_SCORE_TOL = 1e-4


class Peers:
    """The models a check needs, each loaded once: hexamer ``Carbon`` by (dtype, device, engine
    options) and ``transformers.LlamaForCausalLM`` by dtype, on the bench device."""

    def __init__(self, folder: Path, device: torch.device, max_batch_size: int = 8) -> None:
        self.folder = folder
        self.device = device
        self.max_batch_size = max_batch_size
        self._models: dict[Any, Any] = {}

    def carbon(self, dtype: str, device: torch.device | None = None, **engine: Any) -> Any:
        from hexamer.carbon import Carbon

        where = device or self.device
        engine = {"max_batch_size": self.max_batch_size, **engine}
        key = ("carbon", dtype, str(where), tuple(sorted(engine.items())))
        if key not in self._models:
            self._models[key] = Carbon.from_pretrained(self.folder, dtype=dtype, device=where, **engine)
        return self._models[key]

    def hf(self, dtype: str) -> Any:
        from hexamer.bench.backends import load_hf_model

        key = ("hf", dtype)
        if key not in self._models:
            self._models[key] = load_hf_model(self.folder, dtype).to(self.device)
        return self._models[key]

    def clear(self) -> None:
        self._models.clear()
        if self.device.type == "cuda":
            torch.cuda.empty_cache()


def random_dna_rows(layout: Any, rows: int, tokens: int, seed: int) -> torch.Tensor:
    """``(rows, tokens)`` ids: ``<dna>`` then random 6-mers of the real vocabulary."""
    gen = torch.Generator().manual_seed(seed)
    body = torch.randint(layout.kmer_start, layout.kmer_stop, (rows, tokens - 1), generator=gen)
    return torch.cat([torch.full((rows, 1), layout.begin_id), body], dim=1)


def _kmer_logits_hf(model: Any, ids: torch.Tensor, layout: Any) -> torch.Tensor:
    with torch.inference_mode():
        out = model(ids.to(model.device), attention_mask=torch.ones_like(ids).to(model.device)).logits
    return out[..., layout.kmer_start : layout.kmer_stop].float()


def _kmer_logits_hexamer(carbon: Any, ids: torch.Tensor, layout: Any) -> torch.Tensor:
    with torch.inference_mode():
        out = carbon.model(ids.to(carbon.model.device)).logits
    return out[..., layout.kmer_start : layout.kmer_stop].float()


def logits_report(peers: Peers, *, rows: int, tokens: int, seed: int = 0) -> BenchReport:
    """Max |Δ| of the 6-mer logits against transformers float32, for hexamer in float32 and bf16."""
    reference = peers.hf("float32")
    layout = peers.carbon("float32").layout
    ids = random_dna_rows(layout, rows, tokens, seed)
    ref = _kmer_logits_hf(reference, ids, layout)
    f32 = (_kmer_logits_hexamer(peers.carbon("float32"), ids, layout) - ref).abs().max().item()
    hf_bf16 = (_kmer_logits_hf(peers.hf("bfloat16"), ids, layout) - ref).abs().max().item()
    hx_bf16 = (_kmer_logits_hexamer(peers.carbon("bfloat16"), ids, layout) - ref).abs().max().item()
    bound = BF16_FACTOR * hf_bf16
    report = BenchReport(
        name="logits",
        title=f"Logits vs transformers float32 ({rows} rows × {tokens} tokens, vocabulary of {reference.config.vocab_size:,} ids)",
        columns=["dtype", "max abs diff, hexamer", "max abs diff, transformers", "bound", "pass"],
        formats={
            "max abs diff, hexamer": "{:.2e}",
            "max abs diff, transformers": "{:.2e}",
            "bound": "{:.2e}",
        },
    )
    report.rows.append(
        {
            "dtype": "float32",
            "max abs diff, hexamer": f32,
            "max abs diff, transformers": 0.0,
            "bound": F32_LOGIT_TOL,
            "pass": f32 <= F32_LOGIT_TOL,
        }
    )
    report.rows.append(
        {
            "dtype": "bfloat16",
            "max abs diff, hexamer": hx_bf16,
            "max abs diff, transformers": hf_bf16,
            "bound": bound,
            "pass": hx_bf16 <= bound,
        }
    )
    report.notes.append(
        f"the 6-mer block of the logits; bf16 bound = {BF16_FACTOR:g} × transformers' own bf16 error"
    )
    return report


def _per_base_diff(a: Any, b: Any) -> float:
    if a.per_base is None or b.per_base is None:
        return 0.0
    diff = np.abs(np.asarray(a.per_base, dtype=np.float64) - np.asarray(b.per_base, dtype=np.float64))
    return float(np.nanmax(diff)) if diff.size else 0.0


def scores_report(peers: Peers, sequences: Sequence[str]) -> BenchReport:
    """bp-level scores on the device (float32 and bf16) against the CPU engine in float32."""
    cpu = peers.carbon("float32", torch.device("cpu"))
    reference = cpu.score(list(sequences))
    report = BenchReport(
        name="scores",
        title=f"bp-level scores vs the CPU engine ({len(sequences)} sequences of {len(sequences[0]):,} bp)",
        columns=["dtype", "max abs diff, mean", "max abs diff, per base", "bound", "pass"],
        formats={"max abs diff, mean": "{:.2e}", "max abs diff, per base": "{:.2e}", "bound": "{:.1e}"},
    )
    for dtype in ("float32", "bfloat16"):
        got = peers.carbon(dtype).score(list(sequences))
        mean = max(abs(g.mean - r.mean) for g, r in zip(got, reference, strict=True))
        per_base = max(_per_base_diff(g, r) for g, r in zip(got, reference, strict=True))
        exact = dtype == "float32"
        report.rows.append(
            {
                "dtype": dtype,
                "max abs diff, mean": mean,
                "max abs diff, per base": per_base,
                "bound": F32_SCORE_TOL if exact else None,
                "pass": (mean <= F32_SCORE_TOL and math.isfinite(mean)) if exact else math.isfinite(mean),
            }
        )
    report.notes.append("bf16 row: reported, not bounded (its rounding is checked on the logits above)")
    return report


def _greedy_hf(model: Any, carbon: Any, prompt: str, tokens: int) -> list[int]:
    layout = carbon.layout
    ids = torch.tensor([carbon.tokenizer.encode(f"<dna>{prompt}")], device=model.device)
    with torch.inference_mode():
        out = model.generate(
            ids,
            attention_mask=torch.ones_like(ids),
            max_new_tokens=tokens,
            min_new_tokens=tokens,
            do_sample=False,
            logits_processor=[kmer_only_processor(layout.kmer_start, layout.kmer_stop)],
            pad_token_id=carbon.tokenizer.pad_token_id,
        )
    return out[0, ids.shape[1] :].tolist()


def _first_difference(a: Sequence[int], b: Sequence[int]) -> int | None:
    for i, (x, y) in enumerate(zip(a, b, strict=False)):
        if x != y:
            return i
    return None if len(a) == len(b) else min(len(a), len(b))


def greedy_report(peers: Peers, prompts: Sequence[str], tokens: int) -> BenchReport:
    """Greedy token-level generation of hexamer (float32, the engine) vs ``transformers.generate``."""
    carbon = peers.carbon("float32")
    k = carbon.layout.k  # whole 6-mers: a partial one is forced into the first new token, not a prompt token
    prompts = [p[: len(p) - len(p) % k] for p in prompts]
    gens = carbon.generate(prompts, max_new_tokens=tokens, mode="token", temperature=0)
    report = BenchReport(
        name="greedy",
        title=f"Greedy generation vs transformers.generate, float32 ({tokens} tokens)",
        columns=["prompt", "tokens", "first difference", "pass"],
    )
    for i, (prompt, gen) in enumerate(zip(prompts, gens, strict=True)):
        ref = _greedy_hf(peers.hf("float32"), carbon, prompt, tokens)
        diff = _first_difference(gen.token_ids, ref)
        report.rows.append({"prompt": i, "tokens": len(ref), "first difference": diff, "pass": diff is None})
    return report


def _path_tokens(carbon: Any, prompts: Sequence[str], tokens: int) -> dict[str, list[list[int]]]:
    out = {}
    for decoding, sampling in (("greedy", {"temperature": 0}), ("sampled", {"seed": 7})):
        gens = carbon.generate(list(prompts), max_new_tokens=tokens, mode="token", **sampling)
        out[decoding] = [g.token_ids for g in gens]
    return out


def decode_paths_report(peers: Peers, prompts: Sequence[str], tokens: int, *, graphs: bool) -> BenchReport:
    """The same greedy and seeded-sampled tokens from the dynamic, static and (``graphs``) compiled
    static decode step; the compiled step is CUDA graphs on a GPU. float32, so a near-tie of a
    random-weight model cannot flip on bf16 rounding that differs between kernels."""
    paths: dict[str, dict[str, Any]] = {"static": {"static_decode": True}}
    if graphs:
        paths["static + CUDA graphs"] = {"compile_decode": True}
    report = BenchReport(
        name="decode_paths",
        title=f"Decode paths give the same tokens (float32, {len(prompts)} prompts × {tokens} tokens)",
        columns=["path", "decoding", "same as dynamic", "pass", "error"],
    )
    reference = _path_tokens(peers.carbon("float32", static_decode=False), prompts, tokens)
    for path, options in paths.items():
        try:
            got = _path_tokens(peers.carbon("float32", **options), prompts, tokens)
        except Exception as exc:  # e.g. torch.compile unavailable: this path fails, the others are kept
            report.rows.append({"path": path, "pass": False, "error": f"{type(exc).__name__}: {exc}"[:300]})
            continue
        for decoding, ids in got.items():
            same = ids == reference[decoding]
            report.rows.append({"path": path, "decoding": decoding, "same as dynamic": same, "pass": same})
    if not graphs:
        report.notes.append("CUDA graphs: not run (they need a CUDA device)")
    return report
