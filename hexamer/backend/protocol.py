"""The :class:`Backend` protocol: the few model operations every pipeline needs.

A backend is where the model runs: :class:`~hexamer.backend.local.LocalBackend` (the weights in
this process, with the generation engine) or :class:`~hexamer.remote.backend.RemoteBackend` (a
vLLM, SGLang or hexamer server, read through its top-N log-probabilities). ``Carbon`` is the one
front end over either: it checks the user's options once and hands the backend checked engine
:class:`~hexamer.engine.Request` objects (generation) or a :class:`ScoreOptions` (scoring);
pipelines (``hexamer.vep``, ``hexamer.embed``, the server) take ``carbon.backend`` and call
these methods.

What a backend can do beyond the common operations is *declared*, never probed:

* ``kind``: ``"local"`` or ``"remote"``;
* ``supports_kv_sharing``: the backend runs the model in-process and can copy KV-cache rows, so
  it is also a :class:`PrefixSharingBackend` (the fast shared-prefix scorers of ``hexamer vep``);
* ``supports_embeddings``: it is also an :class:`EmbeddingBackend` (hidden states, pooled here
  by :mod:`hexamer.embed`);
* ``supports_served_embeddings``: it is also a :class:`ServedEmbeddingBackend`: whole sequences
  are sent where the model runs and pooled there by the same :mod:`hexamer.embed` code (hexamer's
  server; a vLLM or SGLang server pools its own way, so the operation refuses it by name).

An operation a backend does not support raises :class:`UnsupportedOperation` naming what to use
instead. docs/layout.md says how to add a backend.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Literal, Protocol, runtime_checkable

import numpy as np
import torch

from hexamer.backend.embedding_options import EmbeddingOptions
from hexamer.backend.inputs import DnaInputs, Prompt
from hexamer.backend.results import ScoreResult
from hexamer.backend.score_options import ScoreOptions
from hexamer.engine import Request, SamplingParams
from hexamer.engine.spec_config import SpecStats
from hexamer.tokenizer import CarbonTokenizer, DnaLayout

__all__ = [
    "SAMPLERS",
    "Backend",
    "BackendKind",
    "Decoding",
    "EmbeddingBackend",
    "Frontend",
    "OnDone",
    "OnProgress",
    "PrefixSharingBackend",
    "Sampler",
    "ServedEmbeddingBackend",
    "UnsupportedOperation",
]

BackendKind = Literal["local", "remote"]
#: Called with how many items (sequences) have just finished; ``None``: nobody listens.
OnProgress = Callable[[int], None] | None
#: Called with the generation requests that have just finished; ``None``: nobody listens.
OnDone = Callable[[Sequence[Request]], None] | None
#: where a served model draws 6-mers: here from its top-N (``client``), on the server, or either
Sampler = Literal["auto", "client", "server"]
SAMPLERS: tuple[str, ...] = ("auto", "client", "server")


class UnsupportedOperation(NotImplementedError):
    """The backend cannot do this (e.g. raw logits from a server); the message says what can."""


@dataclass(frozen=True)
class Decoding:
    """How requests are decoded, beyond their sampling options: ``sampler`` (a served model's
    choice: :data:`Sampler`), and speculative decoding with a ``draft`` backend drafting
    ``num_speculative`` 6-mers a round (an in-process model's). A backend refuses what it cannot
    do with :class:`UnsupportedOperation`."""

    sampler: Sampler = "auto"
    draft: Backend | None = None
    num_speculative: int | Literal["auto"] = "auto"

    def __post_init__(self) -> None:
        if self.sampler not in SAMPLERS:
            raise ValueError(f"sampler must be 'auto', 'client' or 'server', got {self.sampler!r}")


@runtime_checkable
class Backend(Protocol):
    """What pipelines may ask of a model, local or served.

    Sequences are DNA strings scored as ``<dna>sequence`` (``prefix`` before it where a method
    takes one), tokenised by :mod:`hexamer.backend.inputs`; base columns of
    :meth:`next_base_log_marginals` are in FNS order A, T, C, G (:data:`hexamer.fns.tables.BASE_INDEX`).
    """

    #: ``"local"`` or ``"remote"``
    kind: BackendKind
    #: True for a :class:`PrefixSharingBackend` (in-process model, KV-cache rows can be copied)
    supports_kv_sharing: bool
    #: True for an :class:`EmbeddingBackend` (hidden states)
    supports_embeddings: bool
    #: True for a :class:`ServedEmbeddingBackend` (sequences embedded where the model runs)
    supports_served_embeddings: bool
    tokenizer: CarbonTokenizer
    layout: DnaLayout

    @property
    def context_length(self) -> int:
        """Positions the model takes."""
        ...

    @property
    def max_prompt_tokens(self) -> int:
        """Longest scoring input (the context; one less on a server, for the completion token)."""
        ...

    @property
    def device(self) -> torch.device:
        """Where results are computed (``cpu`` for a server's answers)."""
        ...

    def fingerprint(self) -> str:
        """A short hash that changes when the scores could (weights, or server + model + top N):
        resumable jobs refuse a checkpoint made with another."""
        ...

    def dna_inputs(
        self, sequence: str, prefix: str = "", index: int = 0, *, validate: bool = True
    ) -> DnaInputs:
        """``prefix + <dna>sequence`` as ids and targets; ``ValueError`` naming sequence ``index``
        when it is not DNA (``validate``) or does not fit :attr:`max_prompt_tokens`."""
        ...

    def kmer_logits(self, rows: Sequence[Sequence[int]]) -> torch.Tensor:
        """``(B, T, 4**k)`` float32 logits of the 6-mer block at every position of right-padded
        token rows (one forward, no cache). Local only: a server returns top-N log-probabilities,
        not logits, so a remote backend raises :class:`UnsupportedOperation`."""
        ...

    def window_log_likelihoods(self, sequences: Sequence[str]) -> list[float]:
        """Per sequence, the float64 sum of FNS per-base log-probabilities of ``<dna>sequence``
        (not validated: non-ACGT 6-mers are ``<oov>`` and not scored). The VEP window LL."""
        ...

    def next_base_log_marginals(self, contexts: Sequence[str]) -> list[torch.Tensor]:
        """Per context (whole 6-mers), float64 ``log P(b)`` (A, T, C, G) of the base right after
        ``<dna>context``: the next token's FNS first-base marginal over the DNA block."""
        ...

    def score(
        self, sequences: Sequence[str], options: ScoreOptions, *, on_progress: OnProgress = None
    ) -> list[ScoreResult]:
        """``Carbon.score`` for a list (no warning: the front end warns)."""
        ...

    def base_logprobs(
        self, sequence: str, *, method: Literal["fns", "exact"] = "fns", prefix: str = ""
    ) -> np.ndarray:
        """``Carbon.base_logprobs``: ``(L, 4)`` per-base log-probabilities, columns A, C, G, T."""
        ...

    # ------------------------------------------------------------------ generation
    def check_generation_length(self, max_bp: object, max_new_tokens: object) -> None:
        """Refuse, before any prompt is read or work allocated, a length no prompt can have (more
        new tokens than the backend's context, or memory it cannot give); errors name the option."""
        ...

    def make_request(self, prompt: Prompt, params: SamplingParams) -> Request:
        """One engine request for a parsed prompt, checked against what this backend can run
        (``ValueError``; the front end names the prompt)."""
        ...

    def check_decoding(self, requests: Sequence[Request], decoding: Decoding) -> None:
        """Raise the error :meth:`generate` would raise for these requests decoded this way."""
        ...

    def generate(
        self, requests: Sequence[Request], decoding: Decoding, *, on_done: OnDone = None
    ) -> SpecStats | None:
        """Run checked requests to completion, filling them in place (a request the model failed
        is ``fail``-ed, the others go on); ``on_done`` hears of requests as they finish. Returns
        the speculative decoder's statistics when ``decoding.draft`` was used."""
        ...

    def close(self) -> None:
        """Release what the backend holds open (connections); a no-op where nothing is."""
        ...


@runtime_checkable
class Frontend(Protocol):
    """What a pipeline takes as ``carbon``: a front end over a backend (``hexamer.Carbon``).
    Pipelines type against this where importing ``Carbon`` would close an import cycle."""

    backend: Backend


@runtime_checkable
class EmbeddingBackend(Backend, Protocol):
    """A backend that gives hidden states (``supports_embeddings``): :mod:`hexamer.embed`."""

    @property
    def hidden_size(self) -> int: ...

    @property
    def num_layers(self) -> int: ...

    def hidden_states(self, rows: Sequence[Sequence[int]], layer: int) -> torch.Tensor:
        """``(B, T, hidden)`` float32 hidden states of right-padded token rows in Hugging Face's
        ``hidden_states`` numbering: 0 the embedding output, i the input of layer i,
        ``num_layers`` the final normed state."""
        ...


@runtime_checkable
class ServedEmbeddingBackend(Backend, Protocol):
    """A backend that embeds whole sequences where the model runs (``supports_served_embeddings``):
    the server chunks and pools them with :func:`hexamer.embed.embed_sequences`, so the vectors are
    those of a local model on the same weights. Where the server cannot (vLLM, SGLang: their
    ``/v1/embeddings`` pools otherwise), both methods raise :class:`UnsupportedOperation` naming why."""

    def embedding_shape(self) -> tuple[int, int]:
        """``(hidden_size, num_layers)`` of the served model, as :class:`EmbeddingBackend` has them."""
        ...

    def served_embeddings(
        self, sequences: Sequence[str], options: EmbeddingOptions
    ) -> list[np.ndarray | str]:
        """Per sequence (non-empty, normalised DNA text: :func:`hexamer.io.normalize_sequence`), in
        order, its float32 ``(hidden_size,)`` vector or the reason it has none (the server failed
        it; :func:`hexamer.model.finite.non_finite_output` for a NaN/inf model output). Requests
        are split to the server's limits; an error that is not one sequence's raises."""
        ...


@runtime_checkable
class PrefixSharingBackend(Backend, Protocol):
    """A backend that runs the model in-process (``supports_kv_sharing``): the fast scorers that
    run a shared prefix once and copy its KV cache, and read many positions from one forward."""

    def shared_prefix_log_likelihoods(
        self, groups: Sequence[Sequence[str]], *, batch_size: int, token_budget: int
    ) -> list[list[float]]:
        """Per group of DNA strings, the float64 window LL of each string *after* the tokens all
        strings of the group share (those terms are equal in every string and left out, so
        differences within a group equal differences of :meth:`window_log_likelihoods`)."""
        ...

    def next_base_log_marginals_at(self, sequence: str, offsets: Sequence[int]) -> list[torch.Tensor]:
        """For each ``offset`` (bp, a multiple of k, ascending), what :meth:`next_base_log_marginals`
        gives for ``sequence[:offset]``, from one causal forward over ``<dna>sequence[:max(offsets)]``."""
        ...
