"""``Carbon``: the Python API for generation, scoring and embeddings with a Carbon-format model,
loaded here or served.

    from hexamer import Carbon
    m = Carbon.from_pretrained("path/to/Carbon-3B")      # or Carbon.from_server("http://host:8000")
    m.generate(["ATGGCG...", "TTGACA..."], max_bp=1000, mode="bp", temperature=0.8, top_p=0.95, seed=0)
    m.score(["ACGT..."], level="bp")          # mean per-base log-likelihood + per-base arrays
    m.base_logprobs("ACGT...")                # (L, 4) log P(base | prefix), columns A, C, G, T

``Carbon`` is the one front end: it checks the user's options once and runs them on its backend
(``carbon.backend``, a :class:`~hexamer.backend.protocol.Backend`): a
:class:`~hexamer.backend.local.LocalBackend` (the weights in this process, with the generation
engine) or a :class:`~hexamer.remote.backend.RemoteBackend` (a vLLM, SGLang or hexamer server).
What a backend cannot do raises :class:`~hexamer.backend.protocol.UnsupportedOperation`. The CLI
and the server are thin layers over this class.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from typing import Any, Literal, overload

import numpy as np
import torch

from hexamer.backend.generation import (
    build_requests,
    check_n,
    check_stops,
    expand_prompts,
    finished_generations,
)
from hexamer.backend.inputs import DnaInputs, Prompt, full_prompt, parse_prompt
from hexamer.backend.local import LocalBackend
from hexamer.backend.protocol import Backend, Decoding, Sampler, UnsupportedOperation
from hexamer.backend.results import Generation, ScoreResult, warn_unscored
from hexamer.backend.score_options import ScoreOptions
from hexamer.embed.pooling import embed_sequences
from hexamer.engine import Engine, EngineConfig, Request, SamplingParams
from hexamer.engine.spec_config import SpecStats
from hexamer.model import LlamaModel, RopeConfig, load_model
from hexamer.model.cpu import use_cpu_linears
from hexamer.model.decode_step import use_int4_decode_step
from hexamer.model.file_pages import release_file_pages
from hexamer.model.finite import NonFiniteOutputError, non_finite_output
from hexamer.model.int8_head import use_int8_head
from hexamer.tokenizer import CarbonTokenizer, DnaLayout, resolve_model_dir
from hexamer.tokenizer.tags import check_prefix
from hexamer.validate import parse_device

__all__ = ["Carbon"]


class Carbon:
    """The front end: generation, scoring and embeddings over a :class:`~hexamer.backend.protocol.Backend`
    (``self.backend``): :meth:`from_pretrained` loads a model here (a
    :class:`~hexamer.backend.local.LocalBackend` with the generation engine), :meth:`from_server`
    reads a served one. Every method takes the same arguments whatever the backend. Pipelines take
    ``carbon.backend``."""

    #: where the model runs; pipelines call its operations (never this class's internals)
    backend: Backend
    tokenizer: CarbonTokenizer
    layout: DnaLayout

    def __init__(
        self,
        model: LlamaModel | Backend,
        tokenizer: CarbonTokenizer | None = None,
        *,
        engine: EngineConfig | None = None,
        **engine_options: Any,
    ) -> None:
        """``Carbon(model, tokenizer)``: a model of this process, with ``engine`` the engine's options
        (:class:`~hexamer.engine.EngineConfig`, or its fields as keywords, ``max_batch_size=32``,
        not both). ``Carbon(backend)``: the front end over any backend (what :meth:`from_server` builds)."""
        if isinstance(model, LlamaModel):
            if tokenizer is None:
                raise TypeError("Carbon(model, tokenizer) needs the model's tokenizer")
            backend: Backend = LocalBackend(model, tokenizer, engine_config(engine, engine_options))
        else:
            if tokenizer is not None or engine is not None or engine_options:
                raise TypeError(
                    "Carbon(backend) takes no tokenizer or engine options: the backend has its own"
                )
            backend = model
        self.backend = backend
        self.tokenizer = backend.tokenizer
        self.layout = backend.layout
        self.last_spec_stats: SpecStats | None = None  # set by generate(..., draft=...)

    @classmethod
    def from_pretrained(
        cls,
        name_or_path: str | os.PathLike[str],
        *,
        dtype: torch.dtype | str = "auto",
        device: str | torch.device | None = None,
        revision: str | None = None,
        onednn: bool | None = None,
        native: bool | None = None,
        engine: EngineConfig | None = None,
        **engine_options: Any,
    ) -> Carbon:
        """Load a local Carbon-format folder or a hub id (JSON + safetensors only, no remote code).

        ``dtype="auto"``: float32 on CPU (exact parity with the reference; see docs/benchmarks.md
        for bf16 on CPUs with native bf16), the checkpoint's dtype on GPU. On the CPU the decoder's
        linear layers run on hexamer's own kernel (``native``, default: on where a C compiler
        builds it; see :mod:`hexamer.model.native`), else on oneDNN's packed kernels (``onednn``);
        ``native=True`` fails loudly where the kernel is unavailable, ``onednn=True`` picks oneDNN.
        ``engine`` (or its fields as keywords, e.g. ``max_batch_size=32``): the engine's options,
        checked before the model is read.
        """
        config = engine_config(engine, engine_options)
        folder = resolve_model_dir(name_or_path, revision=revision)
        device = parse_device(device)  # None: cuda when present
        if dtype == "auto" and device.type == "cpu":
            dtype = torch.float32
        model, _ = load_model(folder, dtype=dtype, device=device)
        model.eval()
        # re-laid-out linears are left out under compile_decode (Inductor wants dense weights)
        relaid = (native or onednn or not config.compile_decode) and use_cpu_linears(
            model, native=native, onednn=onednn
        )
        if relaid == "native" and not config.compile_decode:  # (a C call would break the graph)
            use_int4_decode_step(model)  # int4 models: a decode step in one C call
            use_int8_head(model)  # int4 models: the head's DNA rows in int8
        # the file pages of weights the model no longer reads (re-laid-out, or copied to a GPU)
        release_file_pages(model, folder.glob("*.safetensors"))
        tokenizer = CarbonTokenizer.from_pretrained(folder)
        return cls(model, tokenizer, engine=config)

    @classmethod
    def from_server(
        cls, url: str, *, model: str | None = None, api_key: str | None = None, **options: Any
    ) -> Carbon:
        """The same API on a model served by vLLM, SGLang or hexamer (a
        :class:`~hexamer.remote.backend.RemoteBackend`; see :mod:`hexamer.remote`). ``options`` are
        the backend's: ``tokenizer=`` names the local folder or hub id to tokenise with (default:
        the served name), ``top_n``, ``max_in_flight``, ``timeout``, ``max_retries``,
        ``context_length``, ``tolerance``, ``backend`` (the server kind). Close it (or use it in a
        ``with`` block) to close its connections."""
        from hexamer.remote.backend import RemoteBackend

        return cls(RemoteBackend(url, model=model, api_key=api_key, **options))

    # ------------------------------------------------------------------ facts and lifetime
    @property
    def context_length(self) -> int:
        return self.backend.context_length

    @property
    def max_prompt_tokens(self) -> int:
        """Longest prompt :meth:`score` takes (the whole context here; one less on a server)."""
        return self.backend.max_prompt_tokens

    def fingerprint(self) -> str:
        """Identifies the scorer for resumable jobs (:meth:`Backend.fingerprint`)."""
        return self.backend.fingerprint()

    def close(self) -> None:
        """Release the backend's connections (a served model's; nothing for a local one)."""
        self.backend.close()

    def __enter__(self) -> Carbon:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _local(self, what: str) -> LocalBackend:
        """The in-process backend, or :class:`UnsupportedOperation` naming ``what`` needed it."""
        if not isinstance(self.backend, LocalBackend):
            raise UnsupportedOperation(
                f"{what} needs the model loaded in this process (Carbon.from_pretrained); "
                f"this Carbon runs on {self.backend!r}"
            )
        return self.backend

    @property
    def model(self) -> LlamaModel:
        """The decoder of a model loaded in this process."""
        return self._local("Carbon.model").model

    @property
    def engine(self) -> Engine:
        """The generation engine of a model loaded in this process."""
        return self._local("Carbon.engine").engine

    @property
    def engine_config(self) -> EngineConfig:
        """The engine's options, passed whole to every engine and Carbon built from this one."""
        return self._local("Carbon.engine_config").engine_config

    @property
    def n_parameters(self) -> int:
        """Parameters of the model (tied embeddings counted once)."""
        return sum(p.numel() for p in {id(p): p for p in self.model.parameters()}.values())

    def __repr__(self) -> str:
        if not isinstance(self.backend, LocalBackend):
            return f"Carbon({self.backend!r})"
        from pathlib import Path

        name = Path(self.tokenizer.name_or_path).name if self.tokenizer.name_or_path else "?"
        n = self.n_parameters
        size = f"{n / 1e9:.2f}B" if n >= 1e9 else f"{n / 1e6:.1f}M" if n >= 1e6 else f"{n / 1e3:.1f}K"
        p = next(self.model.parameters())
        cfg = self.model.config
        return (
            f"Carbon(model={name!r}, parameters={size}, dtype={str(p.dtype).removeprefix('torch.')}, "
            f"device={p.device}, context={self.context_length:,} tokens, layers={cfg.num_hidden_layers}, "
            f"hidden={cfg.hidden_size})"
        )

    def with_rope(self, rope: RopeConfig, *, max_position_embeddings: int) -> Carbon:
        """This model with another RoPE scaling and context window (e.g. YaRN x4 for long prompts,
        like ``--with_yarn`` of the published NIAH script), sharing weights and tokenizer; ``self``
        is left unchanged. Same effect as loading with ``rope_scaling`` patched into config.json."""
        import copy
        import dataclasses

        from hexamer.model import rope_frequencies
        from hexamer.model.config import MAX_POSITION_EMBEDDINGS

        if not 1 <= max_position_embeddings <= MAX_POSITION_EMBEDDINGS:
            raise ValueError(
                f"max_position_embeddings must lie in [1, {MAX_POSITION_EMBEDDINGS:,}], got {max_position_embeddings}"
            )
        model = copy.copy(self._local("with_rope").model)  # shallow: parameters and submodules are shared
        model.config = dataclasses.replace(
            self.model.config, rope=rope, max_position_embeddings=max_position_embeddings
        )
        model._inv_freq, model.rope_scale = rope_frequencies(rope, model.config.head_dim)
        model._inv_freq_cache = {}
        return Carbon(model, self.tokenizer, engine=self.engine_config)

    # ------------------------------------------------------------------ embeddings
    def embed(
        self,
        sequences: str | Sequence[str],
        *,
        pool: Literal["mean", "last", "sep"] = "mean",
        layer: int = -1,
        prefix: str = "",
        max_tokens: int | None = None,
        chunk_overlap: int | None = None,
        batch_size: int = 8,
    ) -> np.ndarray:
        """Embeddings of DNA sequences: ``(hidden,)`` float32 for one string, ``(n, hidden)`` for a
        list (:func:`hexamer.embed.embed_sequences`: mean over content tokens, the last content
        token or the ``</dna>`` separator, of any layer; long sequences chunked). A sequence that
        cannot be embedded raises ``ValueError`` naming it (``NonFiniteOutputError`` when the
        model's output was NaN or infinite); for files with bad records use
        ``hexamer.embed`` or ``hexamer embed``, which keep going. For a table:
        ``pandas.DataFrame(m.embed(seqs), index=ids)``. On a model served by ``hexamer serve`` the
        server chunks and pools with the same code (the same vectors; ``batch_size``: sequences per
        request); a vLLM or SGLang server, whose embeddings are pooled otherwise, raises
        :class:`~hexamer.backend.protocol.UnsupportedOperation`."""
        single = isinstance(sequences, str)
        items = [sequences] if single else list(sequences)
        if not items:
            raise ValueError("no sequences given")
        errors: dict[str, str] = {}
        records = [(f"sequence {i}", s) for i, s in enumerate(items)]
        vectors = []
        for ident, vector in embed_sequences(
            self,
            records,
            pool=pool,
            layer=layer,
            prefix=prefix,
            max_tokens=max_tokens,
            chunk_overlap=chunk_overlap,
            batch_size=batch_size,
            on_error=lambda i, reason: errors.setdefault(i, reason),
        ):
            if vector is None:
                reason = errors.get(ident, "could not be embedded")
                if reason == non_finite_output("embedding"):  # the model's fault, not the input's
                    raise NonFiniteOutputError(f"{ident}: {reason}")
                raise ValueError(f"{ident}: {reason}")
            vectors.append(vector)
        out = np.stack(vectors).astype(np.float32, copy=False)
        return out[0] if single else out

    # ------------------------------------------------------------------ prompts
    def parse_prompt(self, prompt: str, index: int = 0) -> Prompt:
        """Token ids of a generation prompt ending on a 6-mer boundary, plus the partial last
        6-mer to force (:func:`hexamer.backend.inputs.parse_prompt`)."""
        return parse_prompt(self.tokenizer, prompt, index)

    def make_request(
        self, text: str, index: int, prefix: str, params: SamplingParams
    ) -> tuple[Request, Prompt]:
        """One checked engine request for prompt ``index`` (``prefix<dna>text``) and its parsed
        :class:`~hexamer.backend.inputs.Prompt`; ``ValueError`` naming the prompt when it cannot
        run on the backend (:meth:`Backend.make_request`)."""
        p = self.parse_prompt(full_prompt(text, prefix), index)
        try:
            req = self.backend.make_request(p, params)
        except ValueError as exc:
            raise ValueError(f"prompt {index}: {exc}") from None
        return req, p

    def check_prompt(
        self,
        prompt: str,
        *,
        prefix: str = "",
        sampler: Sampler = "auto",
        logprobs: bool = False,
        **options: Any,
    ) -> None:
        """Raise the ``ValueError`` that :meth:`generate` would raise for this prompt and options
        (lets batch jobs report one bad record and go on with the rest); ``sampler="server"``
        also refuses a prompt the server's sampler cannot take."""
        self.check_generation_length(options.get("max_bp"), options.get("max_new_tokens"))
        req, _ = self.make_request(prompt, 0, prefix, SamplingParams(return_logprobs=logprobs, **options))
        self.backend.check_decoding([req], Decoding(sampler=sampler))

    def check_generation_length(self, max_bp: object, max_new_tokens: object) -> None:
        """Refuse, before any prompt is read or work allocated, a length no prompt can have: more new
        tokens than the context (or ``max_model_len``, or the served context), or a KV cache for them
        larger than the budget or the free memory. Errors name the option (other wrong values are
        :class:`SamplingParams`'s)."""
        self.backend.check_generation_length(max_bp, max_new_tokens)

    def check_sequence(self, sequence: str, *, prefix: str = "") -> None:
        """Raise the ``ValueError`` that :meth:`score` would raise for this sequence."""
        self.dna_inputs(sequence, prefix, 0)

    # ------------------------------------------------------------------ generation
    @overload
    def generate(self, prompts: str, **options: Any) -> Generation: ...
    @overload
    def generate(self, prompts: Sequence[str], **options: Any) -> list[Generation]: ...

    def generate(
        self,
        prompts: str | Sequence[str],
        *,
        max_bp: int | None = None,
        max_new_tokens: int | None = None,
        mode: Literal["bp", "token"] = "bp",
        temperature: float = 1.0,
        top_p: float = 1.0,
        top_k: int = 0,
        min_p: float = 0.0,
        repetition_penalty: float = 1.0,
        n: int = 1,
        num_return_sequences: int | None = None,
        stop: str | Sequence[str] | None = None,
        logprobs: bool = False,
        seed: int | Sequence[int] | None = None,
        mask: str | np.ndarray | None = None,
        prefix: str = "",
        stop_at_end_tag: bool = False,
        on_progress: Callable[[int], None] | None = None,
        sampler: Sampler = "auto",
        draft: Carbon | None = None,
        num_speculative: int | Literal["auto"] = "auto",
    ) -> Generation | list[Generation]:
        """Continue each prompt with new DNA.

        A prompt is plain DNA (``"ATGGCG..."``) or text ending inside an open ``<dna>`` region
        (``"<mammalian_species><dna>ATGGCG..."``); ``prefix`` (metadata tags) is put before plain DNA.
        With ``seed=s`` prompt i uses seed ``s + i``; a list pins each prompt's seed. A request's
        output depends only on its prompt, options and seed, never on the rest of the batch.
        ``on_progress(n_bp)`` is called as requests finish with the bases they produced.

        The options ``transformers`` and OpenAI-style servers offer: ``top_k`` / ``min_p`` filter
        whole 6-mers (token mode; bp mode filters each base with ``top_p``);
        ``repetition_penalty`` (1 = off) rescales the logits of 6-mers already in the prompt or
        output; ``n`` (alias ``num_return_sequences``) samples each prompt n times (returned
        prompt by prompt, sample j of prompt i with seed ``s + i * n + j``, or ``seeds[i] + j``);
        ``stop`` (DNA strings) cuts each sequence before the first occurrence of any of them
        (``finish_reason="stop"``); ``logprobs=True`` fills ``Generation.logprobs`` with the raw
        model's log-probability of every new base (bp) or 6-mer (token). ``mode="text"``
        (whole-vocabulary sampling of text) is the server's ``/v1/completions``, not this method.

        What depends on the backend. A model loaded here: ``draft`` (a smaller local model with the
        same tokenizer) turns on speculative decoding with ``num_speculative`` drafted 6-mers per
        round (``"auto"``: adaptive); the output is distributed exactly as without it (greedy:
        identical) and ``last_spec_stats`` reports acceptance (docs/speculative.md). A served model:
        ``sampler="client"`` picks every 6-mer here from the server's top-N next-token distribution
        with the local engine's sampler (bp mode always; the same seed gives the same output as a
        local model on the same weights), ``"server"`` (token mode on vLLM/hexamer, no mask, prompt
        on a 6-mer boundary, no ``top_k``/``min_p``/``logprobs``) makes one request per prompt on
        the server's own sampler, ``"auto"`` takes the server path whenever it can; a served model
        refuses ``repetition_penalty`` (its rule needs the signs of raw logits) and ``draft``.
        What a backend cannot do raises before any work (:class:`UnsupportedOperation` or
        ``ValueError`` naming it).
        """
        if mode == "text":
            raise ValueError(
                "Carbon.generate continues DNA (mode='bp' or 'token'); whole-vocabulary text generation "
                "is hexamer serve's /v1/completions (or hexamer.engine with SamplingParams(mode='text'))"
            )
        decoding = Decoding(sampler, None if draft is None else draft.backend, num_speculative)
        n = check_n(n, num_return_sequences)
        self.check_generation_length(max_bp, max_new_tokens)
        stops = check_stops(stop)
        extras = {"top_k": top_k, "min_p": min_p, "repetition_penalty": repetition_penalty}
        if draft is not None and (logprobs or repetition_penalty != 1):
            raise ValueError("speculative decoding (draft=...) takes no repetition_penalty or logprobs")
        single, items, seeds = expand_prompts(prompts, n, seed)
        requests, parsed = build_requests(
            self,
            items,
            seed=seeds,
            prefix=prefix,
            mode=mode,
            temperature=temperature,
            top_p=top_p,
            max_bp=max_bp,
            max_new_tokens=max_new_tokens,
            mask=mask,
            stop_at_end_tag=stop_at_end_tag,
            return_logprobs=logprobs,
            **{key: value for key, value in extras.items() if key != "repetition_penalty" or value != 1},
        )
        self.backend.check_decoding(requests, decoding)

        def progress(done: Sequence[Request]) -> None:
            if on_progress is not None:
                on_progress(sum(len(r.bases()) for r in done))

        stats = self.backend.generate(requests, decoding, on_done=None if on_progress is None else progress)
        if draft is not None:
            self.last_spec_stats = stats
        out = finished_generations(
            items, requests, parsed, self.layout, mode=mode, logprobs=logprobs, stops=stops
        )
        warn_unscored(out, stacklevel=2)  # failed generations (non-finite logits, server errors) warn once
        return out[0] if single else out

    # ------------------------------------------------------------------ scoring
    def dna_inputs(
        self, sequence: str, prefix: str = "", index: int = 0, *, validate: bool = True
    ) -> DnaInputs:
        """Token ids and targets of ``prefix + <dna>sequence`` (:func:`hexamer.backend.inputs.dna_inputs`
        within this model's longest prompt)."""
        return self.backend.dna_inputs(sequence, prefix, index, validate=validate)

    @overload
    def score(self, sequences: str, **options: Any) -> ScoreResult: ...
    @overload
    def score(self, sequences: Sequence[str], **options: Any) -> list[ScoreResult]: ...

    def score(
        self,
        sequences: str | Sequence[str],
        *,
        level: Literal["bp", "token"] = "bp",
        method: Literal["fns", "exact"] = "fns",
        prefix: str = "",
        token_budget: int = 16384,
        stride: int | None = None,
        on_progress: Callable[[int], None] | None = None,
    ) -> ScoreResult | list[ScoreResult]:
        """Log-likelihood of DNA sequences (each scored as ``prefix + <dna>seq``).

        bp level (default): mean over real bases of log P(base), from the FNS marginals
        (``method="fns"``, the published definition) or the exact within-token chain rule
        (``method="exact"``). Token level: mean log-probability of the full 6-mers (block softmax),
        the padded tail excluded. Bases in ``<oov>`` chunks are not scored and are counted.
        A sequence longer than the longest prompt raises ``ValueError``; with ``stride`` (bases, a
        multiple of 6) it is scored by strided sliding windows (:mod:`hexamer.tracks.windows`;
        sequences that fit are scored exactly as without it). ``token_budget`` bounds the prompt
        tokens at work at once: the padded tokens of one forward here, the prompt tokens of the
        requests in flight on a server. ``on_progress(n)`` is called as ``n`` sequences finish.
        """
        options = ScoreOptions(level, method, prefix, token_budget)
        single = isinstance(sequences, str)
        if stride is not None:
            from hexamer.tracks.windows import strided_score

            results = strided_score(
                self,
                sequences,
                stride=stride,
                level=level,
                method=method,
                prefix=prefix,
                token_budget=token_budget,
            )
            if on_progress is not None:
                on_progress(1 if single else len(results))
            return results
        results = self.backend.score(
            [sequences] if single else list(sequences), options, on_progress=on_progress
        )
        warn_unscored(results, stacklevel=2)
        return results[0] if single else results

    def base_logprobs(
        self,
        sequence: str,
        *,
        method: Literal["fns", "exact"] = "fns",
        prefix: str = "",
        stride: int | None = None,
    ) -> np.ndarray:
        """``(L, 4)`` log P(base at i = b | context) for every position, columns A, C, G, T.

        ``fns``: the FNS marginal of the token covering base i (context = all earlier tokens).
        ``exact``: additionally conditioned on the true earlier bases of the same token. Rows of
        bases inside ``<oov>`` chunks are NaN for ``exact`` (their in-token prefix is unknown).
        ``stride`` (bases, a multiple of 6): sequences longer than the longest prompt are read by
        strided sliding windows, each row from the window where its base has the most left context
        (:mod:`hexamer.tracks.windows`); without it they raise ``ValueError``. A model whose output
        is NaN or infinite raises :class:`~hexamer.model.finite.NonFiniteOutputError`.
        """
        check_prefix(prefix)  # before any window is planned with it
        if stride is not None:
            from hexamer.tracks.windows import strided_base_logprobs

            return strided_base_logprobs(self, sequence, stride=stride, method=method, prefix=prefix)
        return self.backend.base_logprobs(sequence, method=method, prefix=prefix)


def engine_config(engine: EngineConfig | None, options: dict[str, Any]) -> EngineConfig:
    """``engine``, or a config built from keyword options (today's ``Carbon(..., max_batch_size=4)``)."""
    if engine is not None and options:
        raise TypeError(
            f"give engine=EngineConfig(...) or engine options as keywords, not both (got {', '.join(sorted(options))})"
        )
    return EngineConfig.from_options(engine, **options)
