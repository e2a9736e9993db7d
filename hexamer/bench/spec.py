"""Speculative decoding benchmark: target alone vs target + draft, same prompts, same run.

Without real checkpoints, the pair is built so that the draft agrees with the target to a chosen
degree: the draft is a random shallow model and the target is the draft plus extra layers that start
as the identity (``o_proj`` and ``down_proj`` zero, so each block passes the residual stream
through) plus Gaussian noise of standard deviation ``noise`` on those two matrices. Noise 0 gives a
target that computes exactly what the draft computes (at many times the cost); more noise, less
agreement. The final norm is scaled up (``sharpness``) so next-token distributions are peaked like
a trained model's rather than nearly uniform, which is what random weights give.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import torch

from hexamer.bench.report import BenchReport
from hexamer.bench.timing import MIN_ROUNDS, Timing, put_spread_warning_first, run_rounds
from hexamer.bench.tokenizer import random_dna
from hexamer.synthetic import ModelShape

__all__ = ["FULL_PAIR", "QUICK_PAIR", "TINY_PAIR", "PairShape", "build_spec_pair", "run_spec_bench"]


@dataclass(frozen=True)
class PairShape:
    """A synthetic draft/target pair: the draft's shape, the layers the target adds on top of it, and
    the final-norm scale that peaks both models' next-token distributions."""

    draft: ModelShape
    extra_layers: int
    sharpness: float = 6.0

    @property
    def target(self) -> ModelShape:
        """The draft's shape with ``extra_layers`` more layers."""
        return replace(self.draft, num_hidden_layers=self.draft.num_hidden_layers + self.extra_layers)

    @property
    def tag(self) -> str:
        draft, target = self.draft.num_hidden_layers, self.target.num_hidden_layers
        return f"h{self.draft.hidden_size}-d{draft}-t{target}-s{self.sharpness:g}"


QUICK_PAIR = PairShape(
    ModelShape(hidden_size=256, intermediate_size=512, num_hidden_layers=1), extra_layers=7
)
FULL_PAIR = PairShape(
    ModelShape(hidden_size=512, intermediate_size=1536, num_attention_heads=8, num_key_value_heads=4),
    extra_layers=22,
)
#: seconds to build and run: the tiny test shape, one draft layer, two extra target layers
TINY_PAIR = PairShape(ModelShape(num_hidden_layers=1), extra_layers=2)


def _load_weights(folder: Path) -> dict[str, torch.Tensor]:
    from safetensors.torch import load_file

    return load_file(str(folder / "model.safetensors"))


def build_spec_pair(
    root: str | Path, shape: PairShape = FULL_PAIR, noise: float = 0.0, seed: int = 0
) -> tuple[Path, Path]:
    """``(draft_dir, target_dir)`` under ``root``, each built once (atomically) and reused."""
    from hexamer.synthetic import build_carbon_folder_once

    root = Path(root)
    base = build_carbon_folder_once(root / f"spec-base-{shape.tag}-{seed}", shape=shape.draft, seed=seed)
    draft = root / f"spec-draft-{shape.tag}-{seed}"
    if not (draft / "config.json").is_file():
        weights = _load_weights(base)
        weights["model.norm.weight"] = weights["model.norm.weight"] * shape.sharpness
        _write_folder(draft, shape.draft, weights)
    target = root / f"spec-target-{shape.tag}-{seed}-noise{noise:g}"
    if not (target / "config.json").is_file():
        from hexamer.synthetic import llama_config, random_llama_weights

        weights = _load_weights(draft)
        gen = torch.Generator().manual_seed(seed + 1)
        cfg = llama_config(_layout_of(base), shape.target, eos_id=0)
        extra = random_llama_weights({**cfg, "num_hidden_layers": shape.extra_layers}, seed=seed + 1)
        for i in range(shape.extra_layers):
            src, dst = f"model.layers.{i}.", f"model.layers.{shape.draft.num_hidden_layers + i}."
            for name, value in extra.items():
                if name.startswith(src):
                    suffix = name[len(src) :]
                    if suffix in ("self_attn.o_proj.weight", "mlp.down_proj.weight"):
                        value = torch.randn(value.shape, generator=gen) * noise
                    weights[dst + suffix] = value.contiguous()
        _write_folder(target, shape.target, weights)
    return draft, target


def _layout_of(folder: Path) -> Any:
    from hexamer.tokenizer import CarbonTokenizer

    return CarbonTokenizer.from_pretrained(folder).layout


def _write_folder(folder: Path, shape: Any, weights: dict[str, torch.Tensor]) -> None:
    """A complete folder (tokenizer + config from the builder, then our weights), renamed into place."""
    import shutil
    import tempfile

    from hexamer.synthetic import build_carbon_folder, save_safetensors

    folder.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{folder.name}-", dir=folder.parent))
    try:
        build_carbon_folder(staging, shape=shape, weights=False)
        save_safetensors(weights, staging)
        try:
            staging.rename(folder)
        except OSError:
            if not (folder / "config.json").is_file():
                raise
    finally:
        shutil.rmtree(staging, ignore_errors=True)


COLUMNS = (
    "pair",
    "mode",
    "decoding",
    "target bp/s",
    "spec bp/s",
    "speed-up",
    "speed-up range",
    "target s min/med/max",
    "spec s min/med/max",
    "acceptance",
    "accepted/fwd",
    "tokens/fwd",
    "mean k",
    "greedy same",
)


def _check_spec_options(
    target: str | Path | None,
    draft: str | Path | None,
    modes: Sequence[str],
    decodings: Sequence[str],
    temperature: float,
) -> None:
    if (target is None) != (draft is None):
        raise ValueError("give both target and draft folders, or neither")
    for m in modes:
        if m not in ("token", "bp"):
            raise ValueError(f"modes must be token and/or bp, got {m!r}")
    for d in decodings:
        if d not in ("greedy", "sampled"):
            raise ValueError(f"decodings must be greedy and/or sampled, got {d!r}")
    if "sampled" in decodings and not temperature > 0:
        raise ValueError(f"sampled runs need a temperature > 0, got {temperature!r}")


def _spec_pairs(
    target: str | Path | None,
    draft: str | Path | None,
    *,
    quick: bool,
    noises: Sequence[float] | None,
    shape: PairShape | None,
    cache_root: str | Path | None,
    log: Callable[[str], None],
) -> list[tuple[str, Path | str, Path | str]]:
    """``(label, target folder, draft folder)``: the given pair, or a synthetic pair per noise."""
    if target is not None and draft is not None:
        return [("given", target, draft)]
    if cache_root is None:
        from hexamer.cli.app import cache_dir

        cache_root = cache_dir()
    shape = shape or (QUICK_PAIR if quick else FULL_PAIR)
    pairs: list[tuple[str, Path | str, Path | str]] = []
    for noise in noises if noises is not None else ((0.0, 0.003) if quick else (0.0, 0.001, 0.002, 0.004)):
        log(f"building/using the synthetic pair {shape.tag}, noise {noise:g} ...")
        d_dir, t_dir = build_spec_pair(Path(cache_root) / "spec-bench", shape, noise)
        pairs.append((f"noise {noise:g}", t_dir, d_dir))
    return pairs


def _spec_row(
    label: str, mode: str, decoding: str, timings: dict[str, Timing], stats: Any, batch: int, new_bp: int
) -> dict[str, Any]:
    """One (pair, mode, decoding) row from the target-alone and speculative timings."""
    base, spec = timings["target"], timings["spec"]
    base_s, spec_s = base.median, spec.median
    same = None
    if decoding == "greedy":
        same = "yes" if [g.sequence for g in base.result] == [g.sequence for g in spec.result] else "NO"
    return {
        "pair": label,
        "mode": mode,
        "decoding": decoding,
        "target bp/s": batch * new_bp / base_s,
        "spec bp/s": batch * new_bp / spec_s,
        "speed-up": base_s / spec_s,
        "speed-up range": f"{base.min / spec.max:.2f}–{base.max / spec.min:.2f}×",
        "target s min/med/max": base.summary(),
        "spec s min/med/max": spec.summary(),
        "timings": {"target": base.as_dict(), "spec": spec.as_dict()},
        "acceptance": stats.acceptance_rate,
        "accepted/fwd": stats.accepted_per_forward,
        "tokens/fwd": stats.tokens_per_forward,
        "mean k": stats.mean_k,
        "greedy same": same,
        "case": f"{mode} {decoding}",  # plot label, not a column
    }


def _spec_report(
    batch: int, prompt_bp: int, new_bp: int, num_speculative: int | str, repeats: int
) -> BenchReport:
    return BenchReport(
        name="spec",
        title=(
            f"speculative decoding, batch {batch}, {prompt_bp} bp in / {new_bp} bp out, "
            f"k={num_speculative}, median of {repeats} alternating rounds after a warm-up"
        ),
        columns=COLUMNS,
        formats={
            "target bp/s": "{:,.1f}",
            "spec bp/s": "{:,.1f}",
            "speed-up": "{:.2f}×",
            "acceptance": "{:.1%}",
            "accepted/fwd": "{:.2f}",
            "tokens/fwd": "{:.2f}",
            "mean k": "{:.2f}",
        },
    )


def run_spec_bench(
    *,
    quick: bool = False,
    log: Callable[[str], None] = print,
    target: str | Path | None = None,
    draft: str | Path | None = None,
    noises: Sequence[float] | None = None,
    shape: PairShape | None = None,
    modes: Sequence[str] = ("token", "bp"),
    decodings: Sequence[str] = ("greedy", "sampled"),
    prompt_bp: int | None = None,
    new_bp: int | None = None,
    batch: int = 1,
    num_speculative: int | str = "auto",
    temperature: float = 1.0,
    repeats: int | None = None,
    cache_root: str | Path | None = None,
) -> BenchReport:
    """Target-alone vs speculative bp/s for each (pair, mode, decoding); one row each.

    ``target``/``draft``: real folders (one pair); otherwise a synthetic pair per ``noises`` value
    (built under ``cache_root``, default the hexamer cache). Every configuration times the target alone
    and speculative decoding on the same prompts: one warm-up run each, then ``repeats`` (at least 3)
    alternating rounds; the speed-up is the ratio of the medians, its range min/max over max/min.
    """
    from hexamer import Carbon
    from hexamer.engine.spec_config import SpecConfig

    _check_spec_options(target, draft, modes, decodings, temperature)
    config = SpecConfig.from_option(num_speculative)  # type: ignore[arg-type]
    prompt_bp = prompt_bp or (60 if quick else 300)
    new_bp = new_bp or (60 if quick else 300)
    repeats = max(repeats or MIN_ROUNDS, MIN_ROUNDS)
    pairs = _spec_pairs(
        target, draft, quick=quick, noises=noises, shape=shape, cache_root=cache_root, log=log
    )
    report = _spec_report(batch, prompt_bp, new_bp, num_speculative, repeats)
    prompts = [random_dna(prompt_bp - prompt_bp % 6 + 3, seed=2000 + i) for i in range(batch)]
    all_timings: dict[str, Timing] = {}
    for label, t_dir, d_dir in pairs:
        tgt = Carbon.from_pretrained(t_dir, dtype=torch.float32, device="cpu", max_batch_size=batch)
        drf = Carbon.from_pretrained(d_dir, dtype=torch.float32, device="cpu", max_batch_size=batch)
        log(
            f"{label}: target {tgt.model.config.num_hidden_layers} layers, "
            f"draft {drf.model.config.num_hidden_layers} layers"
        )
        for mode in modes:
            for decoding in decodings:
                temp = 0.0 if decoding == "greedy" else temperature
                options: dict[str, Any] = {"max_bp": new_bp, "mode": mode, "temperature": temp, "seed": 0}
                timings = run_rounds(
                    {
                        "target": lambda o=options, t=tgt: t.generate(prompts, **o),
                        "spec": lambda o=options, t=tgt, d=drf: t.generate(
                            prompts, draft=d, num_speculative=config, **o
                        ),
                    },
                    repeats,
                )
                all_timings.update({f"{label} {mode} {decoding} {k}": v for k, v in timings.items()})
                stats = tgt.last_spec_stats
                assert stats is not None
                row = _spec_row(label, mode, decoding, timings, stats, batch, new_bp)
                report.rows.append(row)
                log(
                    f"{label} {mode} {decoding}: target {row['target bp/s']:.1f} bp/s, spec {row['spec bp/s']:.1f} bp/s "
                    f"({row['speed-up']:.2f}×), {stats.summary()}"
                )
    put_spread_warning_first(report.notes, all_timings)
    report.notes.append(
        "speed-up = median target-alone time / median speculative time (range: fastest over slowest "
        "round and back), same prompts and options, end to end (prefill included); "
        "acceptance = accepted / drafted 6-mers; tokens/fwd counts the target's own token too (plain decoding = 1)."
    )
    if target is None:
        report.notes.append(
            "synthetic pairs: target = draft + extra near-identity layers (o_proj/down_proj ~ N(0, noise²)); "
            "noise 0 = the target computes what the draft computes."
        )
    return report
