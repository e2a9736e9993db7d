"""One generation request and its state while the engine runs it."""

from __future__ import annotations

import itertools
import secrets
from dataclasses import dataclass, field
from enum import Enum
from typing import TYPE_CHECKING, Protocol

import numpy as np
import torch

from hexamer.engine.params import SamplingParams
from hexamer.tokenizer.dna import kmers_to_bases
from hexamer.tokenizer.layout import BASES

if TYPE_CHECKING:
    from hexamer.engine.spec_config import SpecConfig, SpecStats

_ids = itertools.count()


@dataclass
class TokenLogprobs:
    """Log-probabilities of a run of tokens under the raw model distribution (mode="text").

    Row i: ``logprob[i]`` of the token at that position, its 1-based ``rank`` in the vocabulary
    (tokens with a log-probability at least as high), and the ``top_ids``/``top_logprobs`` of the
    N most likely tokens (N columns, best first; N may be 0). ``finite``: every logit they came from
    was finite (False: the model's output was NaN or infinite at some position, and the request
    that asked for them fails, as a generation with such logits does).
    """

    token_ids: np.ndarray
    logprob: np.ndarray
    rank: np.ndarray
    top_ids: np.ndarray
    top_logprobs: np.ndarray
    finite: bool = True

    def __len__(self) -> int:
        return len(self.token_ids)


class BaseChooser(Protocol):
    """Picks the k bases of a bp-mode request's next token itself, one after the other (rules that
    depend on the bases already chosen, inside the token too: :mod:`hexamer.design`). Given the
    token's ``(k, 4)`` float64 log-marginals (A, T, C, G) untempered and at the request's
    temperature (the same array when it is 0 or 1), it returns the k base codes (0-3, A, T, C, G)."""

    def choose(self, log_marginals: np.ndarray, sampling_log_marginals: np.ndarray) -> list[int]: ...


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
    #: mode="text": ids that end the request unless ``params.ignore_eos`` (the model's EOS ids)
    eos_token_ids: tuple[int, ...] = ()
    #: mode="text": every generated id (EOS/stop ids included), per-token logprob records, what
    #: stopped it (a stop token id) and the prompt's logprobs when asked for
    output_ids: list[int] = field(default_factory=list)
    logprobs: list[TokenLogprobs] = field(default_factory=list)
    stop_reason: int | None = None
    prompt_logprobs: TokenLogprobs | None = None
    #: DNA modes: k-mer indices of the prompt (for ``repetition_penalty``) and, with
    #: ``return_logprobs``, one array per new token (token mode: 1 value; bp mode: k, one per base)
    prompt_kmers: tuple[int, ...] = ()
    dna_logprobs: list[np.ndarray] = field(default_factory=list)
    #: DNA modes: decode speculatively with these draft settings when the engine has a draft
    #: model attached (docs/speculative.md); ``spec_stats`` is filled as it runs
    speculative: SpecConfig | None = None
    spec_stats: SpecStats | None = None
    #: why the request failed (finish_reason ``"error"``): the model's output was not finite
    error: str | None = None
    #: bp mode: picks each token's bases in place of the sampler (per-row rules; no draft)
    chooser: BaseChooser | None = None
    #: after a preemption: the tokens its next prefill feeds (prompt + every token generated so far:
    #: its cache row was given to others, and is computed again when it is admitted again)
    resume_ids: list[int] | None = None
    #: times the engine took its cache row back to let others go on (docs/engine.md)
    preemptions: int = 0

    def __post_init__(self) -> None:
        if not self.prompt_ids:
            raise ValueError("a request needs at least one prompt token")
        if self.params.mode == "text":
            if self.forced:
                raise ValueError("mode='text' requests take no forced bases")
            self.n_tokens = int(self.params.max_new_tokens or 0)
            self._constraint = np.ones((0, 4), dtype=bool)
            self._constrained_tokens: set[int] = set()
            p = self.params
            self.generator = torch.Generator().manual_seed(
                p.seed if p.seed is not None else secrets.randbits(63)
            )
            return
        if any(b not in BASES for b in self.forced) or len(self.forced) >= self.k:
            raise ValueError(f"forced prefix must be fewer than {self.k} of A/C/G/T, got {self.forced!r}")
        p = self.params
        self.n_tokens = p.new_tokens(len(self.forced), self.k)
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
    def prefill_ids(self) -> list[int]:
        """What its next prefill feeds: the prompt, or after a preemption the prompt and its output."""
        return self.resume_ids if self.resume_ids is not None else self.prompt_ids

    @property
    def tokens_left(self) -> int:
        """New tokens it may still generate."""
        return self.n_tokens - self.n_generated

    def generated_ids(self, kmer_start: int) -> list[int]:
        """The token ids it generated, as fed back to the model (DNA: ``kmer_start`` + each k-mer)."""
        return list(self.output_ids) if self.is_text else [kmer_start + i for i in self.output_kmers]

    @property
    def is_text(self) -> bool:
        return self.params.mode == "text"

    @property
    def n_generated(self) -> int:
        return len(self.output_ids) if self.is_text else len(self.output_kmers)

    @property
    def last_token_id(self) -> int:
        """Id of the newest token (text mode), to feed back in the next decode step."""
        return self.output_ids[-1]

    def banned_now(self) -> tuple[int, ...]:
        """Text mode: ids that may not be sampled yet (EOS and stop ids before ``min_tokens``)."""
        p = self.params
        if self.n_generated >= p.min_tokens:
            return ()
        return (*(() if p.ignore_eos else self.eos_token_ids), *p.stop_token_ids)

    def append_token(self, token_id: int) -> None:
        """Text mode: record one sampled id and finish on a stop id, EOS or the length limit."""
        token_id = int(token_id)
        self.output_ids.append(token_id)
        if token_id in self.params.stop_token_ids:
            self.stop_reason = token_id
            self.finish("stop")
        elif not self.params.ignore_eos and token_id in self.eos_token_ids:
            self.finish("stop")
        elif self.n_generated >= self.n_tokens:
            self.finish("length")

    @property
    def last_token_index(self) -> int:
        return self.n_generated

    def allowed_now(self) -> np.ndarray | None:
        """``(k, 4)`` A,T,C,G mask for the next token, or None when unconstrained."""
        return self.allowed_at(self.n_generated)

    def allowed_at(self, t: int) -> np.ndarray | None:
        """``(k, 4)`` A,T,C,G mask for new token ``t`` (0-based), or None when unconstrained."""
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

    def fail(self, error: str) -> None:
        """End the request with ``finish_reason`` ``"error"``: it cannot go on (``error`` says why);
        what it generated before stays."""
        self.error = error
        self.finish("error")

    def bases(self) -> str:
        """New bases only: the forced prefix is removed and the output trimmed to ``max_bp``."""
        seq = kmers_to_bases(self.output_kmers, self.k)[len(self.forced) :]
        return seq[: self.params.max_bp] if self.params.max_bp is not None else seq
