"""``Carbon``: the Python API for generation and base-level scoring with a Carbon-format model.

    from hexamer import Carbon
    m = Carbon.from_pretrained("path/to/Carbon-3B")
    m.generate(["ATGGCG...", "TTGACA..."], max_bp=1000, mode="bp", temperature=0.8, top_p=0.95, seed=0)
    m.score(["ACGT..."], level="bp")          # mean per-base log-likelihood + per-base arrays
    m.base_logprobs("ACGT...")                # (L, 4) log P(base | prefix), columns A, C, G, T

The CLI and the server are thin layers over this class.
"""

from __future__ import annotations

import os
import re
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal, overload

import numpy as np
import torch

from hexamer.engine import Engine, EngineConfig, Request, SamplingParams
from hexamer.fns import log_base_marginals, log_prefix_conditionals, score_bases, score_tokens, to_acgt
from hexamer.model import LlamaModel, RopeConfig, load_model, pad_rows
from hexamer.model.cpu import use_cpu_linears
from hexamer.tokenizer import CarbonTokenizer, resolve_model_dir
from hexamer.tokenizer.dna import encode_dna, oov_bases
from hexamer.tokenizer.segment import CLOSE_TAG, OPEN_TAG
from hexamer.validate import check_generation_fits, parse_device

if TYPE_CHECKING:
    from hexamer.engine.speculative import SpecStats

if TYPE_CHECKING:
    from hexamer.remote import RemoteCarbon

_ACGT = set("ACGT")
#: What a sequence may hold (either case): the IUPAC nucleotide codes, the rule of
#: :func:`hexamer.io.read_sequences`; anything but A/C/G/T sends its 6-mer to ``<oov>``.
_IUPAC = "ACGTUNRYKMSWBDHV"
_INVALID_CHAR = re.compile(f"[^{_IUPAC}{_IUPAC.lower()}]")


class UnscoredSequenceWarning(UserWarning):
    """:meth:`Carbon.score` got a sequence with no scorable base (every 6-mer holds a non-ACGT
    character): its ``mean`` is NaN and its ``status`` is ``"unscored"``."""


def sequence_problem(content: str) -> str | None:
    """Why ``content`` is not a DNA sequence (a character that is not an IUPAC nucleotide code),
    in the words the sequence readers use, or ``None``."""
    bad = _INVALID_CHAR.search(content)
    if bad is None:
        return None
    return (
        f"invalid character {bad.group()!r} at position {bad.start() + 1} "
        f"(allowed: IUPAC nucleotide codes {_IUPAC}, either case)"
    )


@dataclass
class Generation:
    """One generated continuation."""

    prompt: str
    sequence: str  # the new bases only
    finish_reason: str  # "length" or "end_tag"
    n_prompt_tokens: int
    n_new_tokens: int
    n_prompt_oov_bases: int  # prompt bases lost to <oov> chunks (non-ACGT characters)
    token_ids: list[int]
    #: with ``logprobs=True``: the raw model's log-probability of each new base (bp mode: its FNS
    #: marginal) or of each new 6-mer (token mode: log-softmax over the 6-mer block); else None
    logprobs: np.ndarray | None = None

    @property
    def n_bp(self) -> int:
        return len(self.sequence)


@dataclass
class ScoreResult:
    """Log-likelihood of one sequence under the model.

    ``mean`` is the mean log-probability over the scored bases (bp level) or full 6-mers (token
    level). ``per_base[i]`` is log P(base i | everything before it) at bp level, NaN where a base was
    not scored (inside an ``<oov>`` chunk); None at token level, where ``per_token`` is given.
    ``status`` is ``"ok"``, or ``"unscored"`` when nothing could be scored (``n_scored == 0``:
    every 6-mer holds a non-ACGT character); ``mean`` is then NaN and ``reason`` says why.
    """

    mean: float
    n_scored: int
    n_oov_bases: int
    per_base: np.ndarray | None = None
    per_token: np.ndarray | None = None
    status: str = "ok"
    reason: str | None = None

    def __post_init__(self) -> None:
        if self.n_scored == 0 and self.status == "ok":
            self.status = "unscored"
            self.mean = float("nan")
            self.reason = self.reason or (
                f"no base scored: all {self.n_oov_bases} bases are in <oov> 6-mers (a non-ACGT character)"
                if self.n_oov_bases
                else "nothing to score (token level scores whole 6-mers only)"
            )

    @property
    def sum(self) -> float:
        """Total log-likelihood of the scored bases (bp level) or 6-mers (token level), in nats:
        ``mean * n_scored``, summed in float64 from the per-position values when present."""
        values = self.per_base if self.per_base is not None else self.per_token
        if values is not None:
            return float(np.nansum(np.asarray(values, dtype=np.float64)))
        return float(self.mean) * self.n_scored


@dataclass
class _Prompt:
    ids: list[int]
    forced: str
    n_oov_bases: int


class Carbon:
    """A loaded model + tokenizer + generation engine."""

    def __init__(
        self,
        model: LlamaModel,
        tokenizer: CarbonTokenizer,
        *,
        engine: EngineConfig | None = None,
        **engine_options: Any,
    ) -> None:
        """``engine``: the engine's options (:class:`~hexamer.engine.EngineConfig`); or give its
        fields as keywords (``max_batch_size=32``), not both."""
        if model.config.vocab_size != len(tokenizer):
            raise ValueError(
                f"model vocab_size {model.config.vocab_size} != tokenizer vocabulary {len(tokenizer)}"
            )
        self.model = model
        self.tokenizer = tokenizer
        self.layout = tokenizer.layout
        self.last_spec_stats: SpecStats | None = None  # set by generate(..., draft=...)
        #: the engine's options, passed whole to every engine and Carbon built from this one
        self.engine_config = engine_config(engine, engine_options)
        self.engine = Engine(model, tokenizer.layout, self.engine_config)

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
        if native or onednn or not config.compile_decode:
            use_cpu_linears(model, native=native, onednn=onednn)
        tokenizer = CarbonTokenizer.from_pretrained(folder)
        return cls(model, tokenizer, engine=config)

    @classmethod
    def from_server(
        cls, url: str, *, model: str | None = None, api_key: str | None = None, **options: object
    ) -> RemoteCarbon:
        """The same API served by a vLLM / SGLang / hexamer server (see :mod:`hexamer.remote`);
        ``tokenizer=`` names the local folder or hub id to tokenise with (default: the served name)."""
        from hexamer.remote import RemoteCarbon

        return RemoteCarbon(url, model=model, api_key=api_key, **options)  # type: ignore[arg-type]

    @property
    def context_length(self) -> int:
        return self.model.config.max_position_embeddings

    @property
    def n_parameters(self) -> int:
        """Parameters of the model (tied embeddings counted once)."""
        return sum(p.numel() for p in {id(p): p for p in self.model.parameters()}.values())

    def __repr__(self) -> str:
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
        cannot be embedded raises ``ValueError`` naming it; for files with bad records use
        ``hexamer.embed`` or ``hexamer embed``, which keep going. For a table:
        ``pandas.DataFrame(m.embed(seqs), index=ids)``."""
        from hexamer.embed import embed_sequences

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
                raise ValueError(f"{ident}: {errors.get(ident, 'could not be embedded')}")
            vectors.append(vector)
        out = np.stack(vectors).astype(np.float32, copy=False)
        return out[0] if single else out

    @property
    def max_prompt_tokens(self) -> int:
        """Longest prompt :meth:`score` takes (the whole context here; one less on a server)."""
        return self.context_length

    def with_rope(self, rope: RopeConfig, *, max_position_embeddings: int) -> Carbon:
        """This model with another RoPE scaling and context window (e.g. YaRN x4 for long prompts,
        like ``--with_yarn`` of the published NIAH script), sharing weights and tokenizer; ``self``
        is left unchanged. Same effect as loading with ``rope_scaling`` patched into config.json."""
        import copy
        import dataclasses

        from hexamer.model import rope_frequencies

        if max_position_embeddings < 1:
            raise ValueError(f"max_position_embeddings must be >= 1, got {max_position_embeddings}")
        model = copy.copy(self.model)  # shallow: parameters and submodules are shared
        model.config = dataclasses.replace(
            self.model.config, rope=rope, max_position_embeddings=max_position_embeddings
        )
        model._inv_freq, model.rope_scale = rope_frequencies(rope, model.config.head_dim)
        model._inv_freq_cache = {}
        return Carbon(model, self.tokenizer, engine=self.engine_config)

    # ------------------------------------------------------------------ prompts
    def _prompt(self, prompt: str, index: int) -> _Prompt:
        """Token ids ending on a 6-mer boundary, plus the partial last 6-mer to force."""
        if not isinstance(prompt, str):
            raise TypeError(f"prompt {index} is a {type(prompt).__name__}, expected str")
        if not prompt.strip():
            raise ValueError(f"prompt {index} is empty; pass '<dna>' to generate without a DNA context")
        if OPEN_TAG in prompt:
            at = prompt.rfind(OPEN_TAG)
            prefix, content = prompt[:at], prompt[at + len(OPEN_TAG) :]
        else:
            prefix, content = "", prompt
        if CLOSE_TAG in content:
            raise ValueError(
                f"prompt {index} must end inside an open <dna> region (remove the final </dna>): "
                "generation continues the DNA"
            )
        content = content.strip()
        k = self.layout.k
        r = len(content) % k
        body, tail = content[: len(content) - r], content[len(content) - r :].upper()
        if not set(tail) <= _ACGT:
            raise ValueError(
                f"prompt {index} ends with a partial {k}-mer {tail!r} holding non-ACGT characters; "
                f"trim or fix the last {r} bases"
            )
        ids = self.tokenizer.encode(prefix) if prefix else []
        dna = encode_dna(body, self.layout)
        ids.append(self.layout.begin_id)
        ids.extend(dna.ids.tolist())
        return _Prompt(ids=ids, forced=tail, n_oov_bases=dna.n_oov_bases)

    def _request(self, text: str, index: int, prefix: str, params: SamplingParams) -> tuple[Request, _Prompt]:
        full = (
            text
            if not isinstance(text, str) or OPEN_TAG in text or not prefix
            else f"{prefix}{OPEN_TAG}{text}"
        )
        p = self._prompt(full, index)
        try:
            check_generation_fits(len(p.ids), len(p.forced), params, self.layout.k, self.engine.max_len)
            req = Request(p.ids, params, forced=p.forced, k=self.layout.k)
            if params.repetition_penalty != 1:
                start, stop = self.layout.kmer_start, self.layout.kmer_stop
                req.prompt_kmers = tuple(i - start for i in p.ids if start <= i < stop)
            self.engine.check(req)
        except ValueError as exc:
            raise ValueError(f"prompt {index}: {exc}") from None
        return req, p

    def check_prompt(self, prompt: str, *, prefix: str = "", **options: object) -> None:
        """Raise the ``ValueError`` that :meth:`generate` would raise for this prompt and options
        (lets batch jobs report one bad record and go on with the rest)."""
        self._request(prompt, 0, prefix, SamplingParams(**options))  # type: ignore[arg-type]

    def check_sequence(self, sequence: str, *, prefix: str = "") -> None:
        """Raise the ``ValueError`` that :meth:`score` would raise for this sequence."""
        self._dna_inputs(sequence, prefix, 0)

    # ------------------------------------------------------------------ generation
    @overload
    def generate(self, prompts: str, **options: object) -> Generation: ...
    @overload
    def generate(self, prompts: Sequence[str], **options: object) -> list[Generation]: ...

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
        draft: Carbon | None = None,
        num_speculative: int | Literal["auto"] = "auto",
    ) -> Generation | list[Generation]:
        """Continue each prompt with new DNA.

        A prompt is plain DNA (``"ATGGCG..."``) or text ending inside an open ``<dna>`` region
        (``"<mammalian_species><dna>ATGGCG..."``); ``prefix`` (metadata tags) is put before plain DNA.
        With ``seed=s`` prompt i uses seed ``s + i``; a list pins each prompt's seed. A request's
        output depends only on its prompt, options and seed, never on the rest of the batch.
        ``on_progress(n_bp)`` is called as requests finish with the bases they produced.
        ``draft`` (a smaller model with the same tokenizer) turns on speculative decoding with
        ``num_speculative`` drafted 6-mers per round (``"auto"``: adaptive); the output is distributed
        exactly as without it (greedy: identical) and ``last_spec_stats`` reports acceptance
        (docs/speculative.md).

        The options ``transformers`` and OpenAI-style servers offer: ``top_k`` / ``min_p`` filter
        whole 6-mers (token mode; bp mode filters each base with ``top_p``);
        ``repetition_penalty`` (1 = off) rescales the logits of 6-mers already in the prompt or
        output; ``n`` (alias ``num_return_sequences``) samples each prompt n times (returned
        prompt by prompt, sample j of prompt i with seed ``s + i * n + j``, or ``seeds[i] + j``);
        ``stop`` (DNA strings) cuts each sequence before the first occurrence of any of them
        (``finish_reason="stop"``); ``logprobs=True`` fills ``Generation.logprobs`` with the raw
        model's log-probability of every new base (bp) or 6-mer (token). ``mode="text"``
        (whole-vocabulary sampling of text) is the server's ``/v1/completions``, not this method.
        """
        if mode == "text":
            raise ValueError(
                "Carbon.generate continues DNA (mode='bp' or 'token'); whole-vocabulary text generation "
                "is hexamer serve's /v1/completions (or hexamer.engine with SamplingParams(mode='text'))"
            )
        n = check_n(n, num_return_sequences)
        stops = check_stops(stop)
        extras = {"top_k": top_k, "min_p": min_p, "repetition_penalty": repetition_penalty}
        if draft is not None and (logprobs or repetition_penalty != 1):
            raise ValueError("speculative decoding (draft=...) takes no repetition_penalty or logprobs")
        single = isinstance(prompts, str) and n == 1
        items = [prompts] if isinstance(prompts, str) else list(prompts)
        seeds = sample_seeds(seed, len(items), n)
        items = [p for p in items for _ in range(n)]
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

        def progress(done: list[Request]) -> None:
            if on_progress is not None and done:
                on_progress(sum(len(r.bases()) for r in done))

        if draft is None:
            self.engine.run(requests, on_step=progress)
        else:
            self.last_spec_stats = self._generate_speculative(draft, requests, num_speculative, progress)
        out = [
            Generation(
                prompt=text,
                sequence=req.bases(),
                finish_reason=req.finish_reason or "length",
                n_prompt_tokens=len(req.prompt_ids),
                n_new_tokens=req.n_generated + (1 if req.ended_with_tag else 0),
                n_prompt_oov_bases=p.n_oov_bases,
                token_ids=[self.layout.kmer_start + i for i in req.output_kmers]
                + ([self.layout.end_id] if req.ended_with_tag else []),
                logprobs=new_logprobs(req, mode) if logprobs else None,
            )
            for text, req, p in zip(items, requests, parsed, strict=True)
        ]
        if stops:
            out = [
                cut_at_stop(g, stops, mode, len(p.forced), self.layout.k)
                for g, p in zip(out, parsed, strict=True)
            ]
        return out[0] if single else out

    def _generate_speculative(
        self,
        draft: Carbon,
        requests: list[Request],
        num_speculative: int | Literal["auto"],
        on_step: Callable[[list[Request]], None],
    ) -> SpecStats:
        """Run ``requests`` speculatively with ``draft`` attached to this model's engine."""
        from hexamer.engine.speculative import SpecConfig, SpecStats, check_compatible

        check_compatible(self, draft)
        config = SpecConfig.from_option(num_speculative)
        for r in requests:
            r.speculative = config
        self.engine.attach_draft(draft.model)
        runner = self.engine.draft
        assert runner is not None
        runner.stats = SpecStats()
        self.engine.run(requests, on_step=on_step)
        return runner.stats

    # ------------------------------------------------------------------ scoring
    def _dna_inputs(
        self, sequence: str, prefix: str, index: int, *, validate: bool = True
    ) -> tuple[list[int], int, np.ndarray, np.ndarray, str]:
        """Token ids and targets of ``prefix + <dna>sequence``. ``validate`` refuses characters
        that are not IUPAC nucleotide codes (the sequence readers' rule); VEP windows cut from a
        reference skip it and score whatever the FASTA holds as ``<oov>``."""
        if not isinstance(sequence, str):
            raise TypeError(f"sequence {index} is a {type(sequence).__name__}, expected str")
        content = sequence.strip()
        if not content:
            raise ValueError(f"sequence {index} is empty")
        if validate and (problem := sequence_problem(content)) is not None:
            raise ValueError(f"sequence {index}: {problem}")
        dna = encode_dna(content, self.layout)
        ids = self.tokenizer.encode(prefix) if prefix else []
        start = len(ids) + 1
        ids = [*ids, self.layout.begin_id, *dna.ids.tolist()]
        if len(ids) > self.max_prompt_tokens:
            room = "" if self.max_prompt_tokens == self.context_length else " less the one completion token"
            raise ValueError(
                f"sequence {index} needs {len(ids)} tokens, more than the model's context of "
                f"{self.context_length}{room}"
            )
        return ids, start, dna.ids - self.layout.kmer_start, dna.n_real.astype(np.int64), content

    @torch.inference_mode()
    def _kmer_logits(self, batch: list[list[int]]) -> torch.Tensor:
        """(B, T, 4**k) fp32 k-mer logits for right-padded token rows (one forward, no cache)."""
        rows = pad_rows(batch, self.tokenizer.pad_token_id or 0)
        device = self.model.device
        out = self.model(
            rows.ids_on(device),
            attention_mask=rows.mask_on(device),
            logits_at="all",
            vocab_rows=(self.layout.kmer_start, self.layout.kmer_stop),
        )
        return out.logits

    def _batches(self, lengths: list[int], token_budget: int) -> list[list[int]]:
        order = sorted(range(len(lengths)), key=lambda i: lengths[i])
        batches: list[list[int]] = []
        current: list[int] = []
        for i in order:
            if current and (len(current) + 1) * lengths[i] > token_budget:
                batches.append(current)
                current = []
            current.append(i)
        if current:
            batches.append(current)
        return batches

    def score(
        self,
        sequences: str | Sequence[str],
        *,
        level: Literal["bp", "token"] = "bp",
        method: Literal["fns", "exact"] = "fns",
        prefix: str = "",
        token_budget: int = 16384,
        stride: int | None = None,
    ) -> ScoreResult | list[ScoreResult]:
        """Log-likelihood of DNA sequences (each scored as ``prefix + <dna>seq``).

        bp level (default): mean over real bases of log P(base), from the FNS marginals
        (``method="fns"``, the published definition) or the exact within-token chain rule
        (``method="exact"``). Token level: mean log-probability of the full 6-mers (block softmax),
        the padded tail excluded. Bases in ``<oov>`` chunks are not scored and are counted.
        A sequence longer than the context raises ``ValueError``; with ``stride`` (bases, a
        multiple of 6) it is scored by strided sliding windows (:mod:`hexamer.tracks.windows`;
        sequences that fit are scored exactly as without it).
        """
        if stride is not None:
            from hexamer.tracks.windows import strided_score

            return strided_score(
                self,
                sequences,
                stride=stride,
                level=level,
                method=method,
                prefix=prefix,
                token_budget=token_budget,
            )
        if level not in ("bp", "token"):
            raise ValueError(f"level must be 'bp' or 'token', got {level!r}")
        if method not in ("fns", "exact"):
            raise ValueError(f"method must be 'fns' or 'exact', got {method!r}")
        single = isinstance(sequences, str)
        items = [sequences] if single else list(sequences)
        inputs = [self._dna_inputs(s, prefix, i) for i, s in enumerate(items)]
        results: list[ScoreResult | None] = [None] * len(items)
        k = self.layout.k
        for group in self._batches([len(x[0]) for x in inputs], token_budget):
            logits = self._kmer_logits([inputs[i][0] for i in group])
            for row, i in enumerate(group):
                _, start, targets, n_real, content = inputs[i]
                n = len(targets)
                pred = logits[row, start - 1 : start - 1 + n]
                tgt = torch.from_numpy(np.where(n_real > 0, targets, 0))
                real = torch.from_numpy(n_real)
                n_oov = oov_bases(n_real, len(content), k)
                if level == "bp":
                    s = score_bases(pred, tgt, real, method=method)
                    per_base = np.full(n * k, np.nan, dtype=np.float32)
                    flat = s.per_base.reshape(-1).cpu().numpy()
                    keep = s.base_mask.reshape(-1).cpu().numpy()
                    per_base[keep] = flat[keep]
                    results[i] = ScoreResult(
                        mean=float(s.mean),
                        n_scored=int(s.n_bases),
                        n_oov_bases=n_oov,
                        per_base=per_base[: len(content)],
                    )
                else:
                    full = real == k
                    t = score_tokens(pred, tgt, valid=full)
                    per_token = np.where(full.numpy(), t.per_token.cpu().numpy(), np.nan).astype(np.float32)
                    results[i] = ScoreResult(
                        mean=float(t.mean), n_scored=int(full.sum()), n_oov_bases=n_oov, per_token=per_token
                    )
        final = [r for r in results if r is not None]
        unscored = [i for i, r in enumerate(final) if r.status != "ok"]
        if unscored:
            shown = ", ".join(map(str, unscored[:10])) + (" ..." if len(unscored) > 10 else "")
            warnings.warn(
                f"{len(unscored)} of {len(final)} sequences have no scorable base (every 6-mer holds a "
                f"non-ACGT character; mean is NaN, status 'unscored'): sequence {shown}",
                UnscoredSequenceWarning,
                stacklevel=2,
            )
        return final[0] if single else final

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
        ``stride`` (bases, a multiple of 6): sequences longer than the context are read by strided
        sliding windows, each row from the window where its base has the most left context
        (:mod:`hexamer.tracks.windows`); without it they raise ``ValueError``.
        """
        if stride is not None:
            from hexamer.tracks.windows import strided_base_logprobs

            return strided_base_logprobs(self, sequence, stride=stride, method=method, prefix=prefix)
        ids, start, targets, n_real, content = self._dna_inputs(sequence, prefix, 0)
        logits = self._kmer_logits([ids])[0, start - 1 : start - 1 + len(targets)]
        if method == "fns":
            lp = log_base_marginals(logits)
        elif method == "exact":
            tgt = torch.from_numpy(np.where(n_real > 0, targets, 0))
            lp = log_prefix_conditionals(logits, tgt)
            lp = torch.where(torch.from_numpy(n_real > 0)[:, None, None], lp, torch.nan)
        else:
            raise ValueError(f"method must be 'fns' or 'exact', got {method!r}")
        return to_acgt(lp).reshape(-1, 4)[: len(content)].cpu().numpy().astype(np.float32)


def engine_config(engine: EngineConfig | None, options: dict[str, Any]) -> EngineConfig:
    """``engine``, or a config built from keyword options (today's ``Carbon(..., max_batch_size=4)``)."""
    if engine is not None and options:
        raise TypeError(
            f"give engine=EngineConfig(...) or engine options as keywords, not both (got {', '.join(sorted(options))})"
        )
    return EngineConfig.from_options(engine, **options)


def check_n(n: int, num_return_sequences: int | None) -> int:
    """``generate``'s samples per prompt (``n``, alias ``num_return_sequences``), local or remote."""
    if num_return_sequences is not None:
        if n not in (1, num_return_sequences):
            raise ValueError(f"n={n} and num_return_sequences={num_return_sequences} disagree: give one")
        n = num_return_sequences
    if not isinstance(n, int) or isinstance(n, bool) or n < 1:
        raise ValueError(f"n (num_return_sequences) must be a positive integer, got {n!r}")
    return n


def check_stops(stop: str | Sequence[str] | None) -> list[str]:
    """``generate``'s ``stop`` as a list of upper-case DNA strings, local or remote."""
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
    owner: Carbon | RemoteCarbon,
    prompts: str | Sequence[str],
    *,
    seed: int | Sequence[int] | None,
    prefix: str,
    **options: object,
) -> tuple[list[Request], list[_Prompt]]:
    """One checked engine request per prompt (``owner._request``), with ``generate``'s seed rule:
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
    parsed: list[_Prompt] = []
    for i, text in enumerate(items):
        params = SamplingParams(seed=seeds[i], **options)  # type: ignore[arg-type]
        req, p = owner._request(text, i, prefix, params)
        requests.append(req)
        parsed.append(p)
    return requests, parsed
