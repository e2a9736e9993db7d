"""Generation backends for the throughput benches: one small object per implementation.

A backend has a ``name``, ``available() -> (ok, reason)`` and
``generate(prompts, new_bp, *, seed) -> GenerationRun``: the decoded continuation of each prompt
(bases, plus whatever non-DNA text a backend emitted, so valid-DNA accounting can see it) and the
timings a serving benchmark reports (end to end, time to first token, one latency per decode step).
Prompts are plain 6-mer-aligned DNA; each backend wraps them in ``<dna>`` its own way. Any object
with these three members can join a run (the llama.cpp backend lives in ``hexamer.bench.llamacpp``).
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

import torch

from hexamer.bench.common import gc_paused, kmer_only_processor
from hexamer.bench.suite import kmer_ids_to_text

if TYPE_CHECKING:
    from hexamer.carbon import Carbon
    from hexamer.engine import Engine


@dataclass
class GenerationRun:
    """One timed ``generate`` call over a batch of prompts."""

    outputs: list[str]
    seconds: float  # wall time, end to end (tokenisation, prefill, decode, detokenisation)
    ttft_s: float | None = None  # start -> first new token of the batch
    itl_s: list[float] = field(default_factory=list)  # one latency per decode step (each row gains a token)

    @property
    def decode_steps(self) -> int:
        return len(self.itl_s)


@runtime_checkable
class Backend(Protocol):
    name: str

    def available(self) -> tuple[bool, str]: ...

    def generate(self, prompts: Sequence[str], new_bp: int, *, seed: int = 0) -> GenerationRun: ...


@dataclass
class UnavailableBackend:
    """A backend that cannot run here; it carries the reason for the report."""

    name: str
    reason: str

    def available(self) -> tuple[bool, str]:
        return False, self.reason

    def generate(self, prompts: Sequence[str], new_bp: int, *, seed: int = 0) -> GenerationRun:
        raise RuntimeError(f"{self.name} is not available: {self.reason}")


@contextmanager
def engine_step_times(engine: Engine) -> Iterator[list[tuple[str, float, float]]]:
    """Record ``(kind, start, end)`` of every engine step ("prefill" or "decode") while inside.

    The engine keeps only totals per kind; the benches need each step, so ``engine.step`` is wrapped
    on this instance for the duration and restored afterwards.
    """
    records: list[tuple[str, float, float]] = []
    original = engine.step

    def timed_step() -> Any:
        before = engine.stats.prefill_tokens
        start = time.perf_counter()
        out = original()
        end = time.perf_counter()
        records.append(("prefill" if engine.stats.prefill_tokens != before else "decode", start, end))
        return out

    engine.step = timed_step  # type: ignore[method-assign]
    try:
        yield records
    finally:
        del engine.step


class HexamerBackend:
    """``Carbon.generate`` at token level (sample a whole 6-mer) or bp level (FNS, base by base)."""

    def __init__(self, carbon: Carbon, mode: str = "token", name: str | None = None) -> None:
        if mode not in ("token", "bp"):
            raise ValueError(f"mode must be 'token' or 'bp', got {mode!r}")
        self.carbon = carbon
        self.mode = mode
        self.name = name or f"hexamer-{mode}"

    def available(self) -> tuple[bool, str]:
        return True, ""

    def generate(self, prompts: Sequence[str], new_bp: int, *, seed: int = 0) -> GenerationRun:
        with gc_paused(), engine_step_times(self.carbon.engine) as steps:
            start = time.perf_counter()
            gens = self.carbon.generate(
                list(prompts), max_bp=new_bp, mode=self.mode, temperature=1.0, seed=seed
            )
            seconds = time.perf_counter() - start
        first = next((e for kind, _, e in steps if kind == "prefill"), None)
        return GenerationRun(
            outputs=[g.sequence + ("</dna>" if g.finish_reason == "end_tag" else "") for g in gens],
            seconds=seconds,
            ttft_s=None if first is None else first - start,
            itl_s=[e - s for kind, s, e in steps if kind == "decode"],
        )


def load_hf_model(folder: str | Path, dtype: str) -> Any:
    """The same weights as ``transformers.LlamaForCausalLM`` in ``dtype`` (eval mode)."""
    import transformers

    from hexamer.model.quant import refuse_int8_folder

    refuse_int8_folder(folder, "transformers")
    return transformers.LlamaForCausalLM.from_pretrained(str(folder), dtype=getattr(torch, dtype)).eval()


def hf_generate_dna(
    model: Any,
    tokenizer: Any,
    prompts: Sequence[str],
    tokens: int,
    *,
    processor: Any,
    static_cache: bool = False,
    stopping: Any = None,
) -> tuple[Any, Any]:
    """``model.generate`` on left-padded ``<dna>`` prompts: exactly ``tokens`` new tokens sampled at
    temperature 1 (no top-p/top-k) through ``processor``; ``stopping`` is an optional stopping
    criterion (a step clock). Returns the output ids and the tokenizer's encoding."""
    import transformers

    enc = tokenizer([f"<dna>{p}" for p in prompts], padding=True, padding_side="left", return_tensors="pt")
    kwargs: dict[str, Any] = {"cache_implementation": "static"} if static_cache else {}
    if stopping is not None:
        kwargs["stopping_criteria"] = transformers.StoppingCriteriaList([stopping])
    with torch.inference_mode():
        out = model.generate(
            **enc,
            max_new_tokens=tokens,
            min_new_tokens=tokens,
            do_sample=True,
            temperature=1.0,
            top_p=1.0,
            top_k=0,
            logits_processor=transformers.LogitsProcessorList([processor]),
            pad_token_id=tokenizer.pad_token_id,
            **kwargs,
        )
    return out, enc


class TransformersBackend:
    """``transformers.generate`` sampling at temperature 1, restricted to the 6-mer rows.

    The logits processor keeps only the 4,096 6-mer columns, so the model generates DNA like the
    other backends (unrestricted, a random-weight model would wander into text). ``static_cache``
    selects transformers' preallocated cache (``cache_implementation="static"``).
    """

    def __init__(self, hf_model: Any, carbon: Carbon, *, static_cache: bool = False) -> None:
        self.model = hf_model
        self.tokenizer = carbon.tokenizer
        self.layout = carbon.layout
        self.static_cache = static_cache
        self.name = "transformers (static cache)" if static_cache else "transformers"

    def available(self) -> tuple[bool, str]:
        return True, ""

    def generate(self, prompts: Sequence[str], new_bp: int, *, seed: int = 0) -> GenerationRun:
        import transformers

        layout = self.layout
        stamps: list[float] = []

        class StepClock(transformers.StoppingCriteria):
            """Called once per generated token (batch-wide): timestamps for TTFT and ITL."""

            def __call__(self, input_ids: torch.Tensor, scores: torch.Tensor, **kwargs: Any) -> torch.Tensor:
                stamps.append(time.perf_counter())
                return torch.zeros(input_ids.shape[0], dtype=torch.bool, device=input_ids.device)

        tokens = -(-new_bp // layout.k)
        torch.manual_seed(seed)
        with gc_paused():
            start = time.perf_counter()
            out, enc = hf_generate_dna(
                self.model,
                self.tokenizer,
                prompts,
                tokens,
                processor=kmer_only_processor(layout.kmer_start, layout.kmer_stop),
                static_cache=self.static_cache,
                stopping=StepClock(),
            )
            outputs = [self._text(row)[:new_bp] for row in out[:, enc["input_ids"].shape[1] :].tolist()]
            seconds = time.perf_counter() - start
        return GenerationRun(
            outputs=outputs,
            seconds=seconds,
            ttft_s=stamps[0] - start if stamps else None,
            itl_s=[b - a for a, b in itertools.pairwise(stamps)],
        )

    def _text(self, ids: list[int]) -> str:
        layout = self.layout

        def other(i: int) -> str:
            return layout.dna_token_string(i) if layout.is_dna(i) else self.tokenizer.decode([i])

        return kmer_ids_to_text(ids, layout.kmer_start, layout.kmers, other)


class LlamaCppAdapter:
    """llama.cpp (``hexamer.bench.llamacpp.LlamaCppBackend``) behind this module's interface.

    The first ``available()`` loads the GGUF (converting it once) and runs llama.cpp's parity check
    against hexamer's model; a backend that computes something else is reported, never timed.
    """

    name = "llama.cpp"

    def __init__(
        self, backend: Any, carbon: Carbon | None = None, parity_prompts: Sequence[str] = ()
    ) -> None:
        self.backend = backend
        self.carbon = carbon
        self.parity_prompts = list(parity_prompts)
        self._checked: tuple[bool, str] | None = None

    def available(self) -> tuple[bool, str]:
        if self._checked is None:
            ok, why = self.backend.available()
            if ok and self.carbon is not None and self.parity_prompts:
                try:
                    report = self.backend.check_parity(
                        self.carbon, self.parity_prompts, raise_on_failure=False
                    )
                    report.check()
                except Exception as exc:  # ParityError, a failed conversion or load
                    ok, why = False, f"{type(exc).__name__}: {exc}"
            self._checked = (ok, why)
        return self._checked

    def generate(self, prompts: Sequence[str], new_bp: int, *, seed: int = 0) -> GenerationRun:
        with gc_paused():
            start = time.perf_counter()
            texts, t = self.backend.generate(
                list(prompts), new_bp, batch=len(prompts), temperature=1.0, seed=seed
            )
            seconds = time.perf_counter() - start
        return GenerationRun(
            outputs=list(texts), seconds=seconds, ttft_s=t.tokenize_s + t.prefill_s, itl_s=list(t.step_s)
        )


def llamacpp_backend(
    folder: str | Path,
    dtype: str,
    log: Callable[[str], None] = lambda _: None,
    *,
    carbon: Carbon | None = None,
    parity_prompts: Sequence[str] = (),
) -> Backend:
    """The llama.cpp backend when ``hexamer.bench.llamacpp`` and its library are present (parity-checked
    against ``carbon`` on ``parity_prompts``); otherwise an :class:`UnavailableBackend` saying why."""
    try:
        from hexamer.bench.llamacpp import LlamaCppBackend
    except ImportError as exc:
        return UnavailableBackend("llama.cpp", f"hexamer.bench.llamacpp is not importable ({exc})")
    try:
        backend = LlamaCppBackend(folder, dtype=dtype, log=log)
    except Exception as exc:  # a bad dtype or option must not end the run
        return UnavailableBackend("llama.cpp", f"{type(exc).__name__}: {exc}")
    return LlamaCppAdapter(backend, carbon, parity_prompts)
