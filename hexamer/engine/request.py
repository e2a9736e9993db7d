"""One generation request and its state while the engine runs it."""

from __future__ import annotations

import itertools
import secrets
from dataclasses import dataclass, field
from enum import Enum

import numpy as np
import torch

from hexamer.engine.params import SamplingParams
from hexamer.tokenizer.dna import kmers_to_bases
from hexamer.tokenizer.layout import BASES

_ids = itertools.count()


class RequestState(Enum):
    WAITING = "waiting"
    RUNNING = "running"
    FINISHED = "finished"


@dataclass(eq=False)
class Request:
    """A prompt (token ids ending on a 6-mer boundary), the bases forced at the start of the first
    new token (a prompt's partial last 6-mer), and what has been generated so far.

    Forcing the partial tail instead of padding it with ``A`` keeps the continuation exact: the model
    never sees pad bases it would mistake for real ones.
    """

    prompt_ids: list[int]
    params: SamplingParams
    forced: str = ""
    k: int = 6
    request_id: int = field(default_factory=lambda: next(_ids))
    state: RequestState = RequestState.WAITING
    row: int | None = None
    output_kmers: list[int] = field(default_factory=list)  # k-mer indices (id - kmer_start)
    finish_reason: str | None = None
    ended_with_tag: bool = False

    def __post_init__(self) -> None:
        if not self.prompt_ids:
            raise ValueError("a request needs at least one prompt token")
        if any(b not in BASES for b in self.forced) or len(self.forced) >= self.k:
            raise ValueError(f"forced prefix must be fewer than {self.k} of A/C/G/T, got {self.forced!r}")
        p = self.params
        if p.max_bp is not None:
            self.n_tokens = -(-(len(self.forced) + p.max_bp) // self.k)
        else:
            self.n_tokens = int(p.max_new_tokens or 0)
        total = self.n_tokens * self.k
        constraint = np.ones((total, 4), dtype=bool)
        for i, base in enumerate(self.forced):
            constraint[i] = False
            constraint[i, BASES.index(base)] = True
        if p.mask_atcg is not None:
            start = len(self.forced)
            constraint[start : start + len(p.mask_atcg)] = p.mask_atcg
        self._constraint = constraint
        self._constrained_tokens = {
            t for t in range(self.n_tokens) if not constraint[t * self.k : (t + 1) * self.k].all()
        }
        # no seed: a fresh random one, never the global RNG (which would couple requests)
        self.generator = torch.Generator().manual_seed(p.seed if p.seed is not None else secrets.randbits(63))

    @property
    def total_len(self) -> int:
        """Cache slots this request needs: prompt plus every token it may generate."""
        return len(self.prompt_ids) + self.n_tokens

    @property
    def n_generated(self) -> int:
        return len(self.output_kmers)

    @property
    def last_token_index(self) -> int:
        return self.n_generated

    def allowed_now(self) -> np.ndarray | None:
        """``(k, 4)`` A,T,C,G mask for the next token, or None when unconstrained."""
        t = self.n_generated
        if t not in self._constrained_tokens:
            return None
        return self._constraint[t * self.k : (t + 1) * self.k]

    def append(self, kmer_index: int) -> None:
        self.output_kmers.append(int(kmer_index))
        if self.n_generated >= self.n_tokens:
            self.finish("length")

    def finish(self, reason: str) -> None:
        self.state = RequestState.FINISHED
        self.finish_reason = reason

    def bases(self) -> str:
        """New bases only: the forced prefix is removed and the output trimmed to ``max_bp``."""
        seq = kmers_to_bases(self.output_kmers, self.k)[len(self.forced) :]
        return seq[: self.params.max_bp] if self.params.max_bp is not None else seq
