"""Generation options whatever the backend (local or served): samples per prompt, seeds, stop
strings, recorded log-probabilities and one checked engine request per prompt."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

import numpy as np

from hexamer.backend.inputs import Prompt
from hexamer.backend.results import Generation
from hexamer.engine import Request, SamplingParams
from hexamer.tokenizer import DnaLayout

__all__ = [
    "RequestMaker",
    "build_requests",
    "check_n",
    "check_stops",
    "cut_at_stop",
    "expand_prompts",
    "finished_generations",
    "new_logprobs",
    "sample_seeds",
]

_ACGT = set("ACGT")


class RequestMaker(Protocol):
    """A front end that turns one prompt into a checked engine request (``Carbon``)."""

    def make_request(
        self, text: str, index: int, prefix: str, params: SamplingParams
    ) -> tuple[Request, Prompt]: ...


def check_n(n: int, num_return_sequences: int | None) -> int:
    """``generate``'s samples per prompt (``n``, alias ``num_return_sequences``)."""
    if num_return_sequences is not None:
        if n not in (1, num_return_sequences):
            raise ValueError(f"n={n} and num_return_sequences={num_return_sequences} disagree: give one")
        n = num_return_sequences
    if not isinstance(n, int) or isinstance(n, bool) or n < 1:
        raise ValueError(f"n (num_return_sequences) must be a positive integer, got {n!r}")
    return n


def check_stops(stop: str | Sequence[str] | None) -> list[str]:
    """``generate``'s ``stop`` as a list of upper-case DNA strings."""
    stops = [stop] if isinstance(stop, str) else list(stop or [])
    for s in stops:
        if not isinstance(s, str) or not s or not set(s.upper()) <= _ACGT:
            raise ValueError(f"stop must be non-empty DNA strings of A/C/G/T, got {s!r}")
    return [s.upper() for s in stops]


def sample_seeds(seed: int | Sequence[int] | None, n_prompts: int, n: int) -> list[int | None]:
    """One seed per (prompt, sample): ``s + i * n + j`` from an int, ``seeds[i] + j`` from a list."""
    if seed is None:
        return [None] * (n_prompts * n)
    if isinstance(seed, Sequence) and not isinstance(seed, str):
        if len(seed) != n_prompts:
            raise ValueError(f"got {len(seed)} seeds for {n_prompts} prompts")
        return [int(s) + j for s in seed for j in range(n)]
    return [int(seed) + i for i in range(n_prompts * n)]


def expand_prompts(
    prompts: str | Sequence[str], n: int, seed: int | Sequence[int] | None
) -> tuple[bool, list[str], list[int | None]]:
    """``generate``'s prompts as one entry per (prompt, sample) with its seed (:func:`sample_seeds`),
    and whether the caller gets one :class:`Generation` back (one prompt string, ``n == 1``)."""
    items = [prompts] if isinstance(prompts, str) else list(prompts)
    seeds = sample_seeds(seed, len(items), n)
    return isinstance(prompts, str) and n == 1, [p for p in items for _ in range(n)], seeds


def finished_generations(
    items: Sequence[str],
    requests: Sequence[Request],
    parsed: Sequence[Prompt],
    layout: DnaLayout,
    *,
    mode: str,
    logprobs: bool,
    stops: list[str],
) -> list[Generation]:
    """One :class:`Generation` per finished request (token ids in the tokenizer's numbering, the end
    tag counted as a new token), cut at the first stop string where ``stops`` are given; a request
    the engine failed (NaN/inf logits) is a ``failed`` generation with its reason."""
    out = [
        Generation(
            prompt=text,
            sequence=req.bases(),
            finish_reason=req.finish_reason or "length",
            n_prompt_tokens=len(req.prompt_ids),
            n_new_tokens=req.n_generated + (1 if req.ended_with_tag else 0),
            n_prompt_oov_bases=p.n_oov_bases,
            token_ids=[layout.kmer_start + i for i in req.output_kmers]
            + ([layout.end_id] if req.ended_with_tag else []),
            logprobs=new_logprobs(req, mode) if logprobs else None,
            status="ok" if req.error is None else "failed",
            reason=req.error,
        )
        for text, req, p in zip(items, requests, parsed, strict=True)
    ]
    if stops:
        out = [cut_at_stop(g, stops, mode, len(p.forced), layout.k) for g, p in zip(out, parsed, strict=True)]
    return out


def new_logprobs(req: Request, mode: str) -> np.ndarray:
    """The recorded log-probabilities of the new bases (bp) or tokens (token), as ``sequence``."""
    if not req.dna_logprobs:
        return np.zeros(0, dtype=np.float64)
    values = np.concatenate(req.dna_logprobs).astype(np.float64)
    if mode == "token":
        return values
    values = values[len(req.forced) :]
    return values[: req.params.max_bp] if req.params.max_bp is not None else values


def cut_at_stop(gen: Generation, stops: list[str], mode: str, n_forced: int, k: int) -> Generation:
    """``gen`` ended before the first occurrence of any stop string (finish_reason ``stop``)."""
    import dataclasses

    hits = [i for i in (gen.sequence.find(s) for s in stops) if i >= 0]
    if not hits:
        return gen
    cut = min(hits)
    n_tokens = -(-(n_forced + cut) // k)
    lp = gen.logprobs
    if lp is not None:
        lp = lp[:cut] if mode == "bp" else lp[:n_tokens]
    return dataclasses.replace(
        gen,
        sequence=gen.sequence[:cut],
        finish_reason="stop",
        token_ids=gen.token_ids[:n_tokens],
        logprobs=lp,
    )


def build_requests(
    owner: RequestMaker,
    prompts: str | Sequence[str],
    *,
    seed: int | Sequence[int] | None,
    prefix: str,
    **options: object,
) -> tuple[list[Request], list[Prompt]]:
    """One checked engine request per prompt (``owner.make_request``), with ``generate``'s seed rule:
    ``seed=s`` gives prompt i seed ``s + i``; a list pins each prompt's seed."""
    items = [prompts] if isinstance(prompts, str) else list(prompts)
    if not items:
        raise ValueError("no prompts given")
    if isinstance(seed, Sequence) and not isinstance(seed, str):
        seeds = list(seed)
        if len(seeds) != len(items):
            raise ValueError(f"got {len(seeds)} seeds for {len(items)} prompts")
    else:
        seeds = [None if seed is None else int(seed) + i for i in range(len(items))]
    requests: list[Request] = []
    parsed: list[Prompt] = []
    for i, text in enumerate(items):
        params = SamplingParams(seed=seeds[i], **options)  # type: ignore[arg-type]
        req, p = owner.make_request(text, i, prefix, params)
        requests.append(req)
        parsed.append(p)
    return requests, parsed
