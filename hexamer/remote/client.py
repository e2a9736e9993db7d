"""``RemoteCarbon``: the ``Carbon`` API (score, base_logprobs, generate) served by a remote server.

    from hexamer import Carbon
    m = Carbon.from_server("http://host:8000", model="Carbon-3B", tokenizer="path/to/Carbon-3B")
    m.score(["ACGT..."], level="bp")          # base-level FNS scores from prompt log-probabilities
    m.base_logprobs("ACGT...")                # (L, 4), columns A, C, G, T
    m.generate("ATGGCG...", max_bp=300, mode="bp", seed=0)

Prompts are tokenised here (``<dna>`` + 6-mers, the same ids the local ``Carbon`` builds) and sent
as token ids, so the server never re-tokenises DNA. The server returns top-N log-probabilities;
the k-mer distributions are rebuilt and marginalised here with :mod:`hexamer.fns`
(see :mod:`hexamer.remote.marginals` for what happens when N does not cover the block).

* **Scoring**: one request per sequence with ``max_tokens=1`` and prompt log-probabilities.
* **bp-mode generation** (and token mode with a mask, a partial last 6-mer or on SGLang) runs
  *client-side*, one token per request: the server returns the next token's top-N distribution and
  hexamer picks the 6-mer with the same sampler as the local engine (same seeds, same masks, same
  exact lengths). Exact, but one round trip and one prompt pass per 6-mer: slow for long outputs
  (server-side prefix caching helps).
* **token-mode generation** on vLLM / hexamer runs on the server in one request, restricted to the
  DNA block with ``allowed_token_ids`` (the server's own sampler and seeds).
"""

from __future__ import annotations

import asyncio
import hashlib
import os
import warnings
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Literal, overload

import numpy as np
import torch

from hexamer.carbon import (
    Carbon,
    Generation,
    ScoreResult,
    UnscoredSequenceWarning,
    _Prompt,
    build_requests,
    check_n,
    check_stops,
    cut_at_stop,
    new_logprobs,
    sample_seeds,
)
from hexamer.engine import Request, SamplingParams
from hexamer.engine.request import RequestState
from hexamer.engine.sampler import END, sample_next
from hexamer.fns import log_base_marginals, log_prefix_conditionals, score_bases, score_tokens, to_acgt
from hexamer.model.config import read_config_json
from hexamer.remote.errors import RemoteError, TopNWarning
from hexamer.remote.http import Connection
from hexamer.remote.marginals import Coverage, kmer_rows
from hexamer.remote.protocol import BACKENDS, ServerInfo, SglangFormat, Top, VllmFormat, detect, make_format
from hexamer.tokenizer import CarbonTokenizer, ModelFolderError, resolve_model_dir
from hexamer.tokenizer.dna import encode_kmers, oov_bases

_UNKNOWN_CONTEXT = 2**31 - 1


def load_server_tokenizer(
    tokenizer: CarbonTokenizer | str | os.PathLike[str] | None, info: ServerInfo, model: str
) -> tuple[CarbonTokenizer, Path | None]:
    """The tokenizer named by the caller, else the server's model path (vLLM's ``root``) if it is a
    folder here or a hub id, else the served model name (a local folder or hub id). Returns
    (tokenizer, folder or None)."""
    if isinstance(tokenizer, CarbonTokenizer):
        return tokenizer, None
    candidates = [str(tokenizer)] if tokenizer is not None else [c for c in (info.root, model) if c]
    errors = []
    for name in candidates:
        hub_id = name.count("/") == 1 and not name.startswith(("/", "."))
        if name == info.root and not (Path(name).is_dir() or hub_id):  # a path on the server's disk
            continue
        try:
            folder = resolve_model_dir(name)
            return CarbonTokenizer.from_pretrained(folder), folder
        except (ModelFolderError, OSError, ValueError) as exc:
            errors.append(f"{name!r}: {exc}")
    raise ValueError(
        f"cannot load the tokenizer of served model {model!r} ({'; '.join(errors) or 'nothing to try'}); "
        "pass tokenizer=<local Carbon folder or hub id> (--tokenizer on the command line)"
    )


def _folder_context(folder: Path | None) -> int | None:
    if folder is None:
        return None
    try:
        value = read_config_json(Path(folder) / "config.json").get("max_position_embeddings")
    except FileNotFoundError:
        return None
    return int(value) if isinstance(value, int) and value > 0 else None


class RemoteCarbon:
    """A Carbon-format model served by vLLM, SGLang or hexamer, used through the ``Carbon`` API.

    ``top_n`` (default 4**k = 4,096) log-probabilities are asked per position; vLLM must be started
    with ``--max-logprobs`` at least that large. ``max_in_flight`` bounds concurrent requests;
    429/503 answers and connection errors are retried ``max_retries`` times with backoff.
    ``tolerance`` (nats): warn (:class:`~hexamer.remote.errors.TopNWarning`) when k-mers missing
    from the top N could move a log-probability by more than this.
    """

    is_remote = True

    def __init__(
        self,
        url: str,
        *,
        model: str | None = None,
        api_key: str | None = None,
        tokenizer: CarbonTokenizer | str | os.PathLike[str] | None = None,
        backend: Literal["auto", "vllm", "sglang", "hexamer"] = "auto",
        top_n: int | None = None,
        max_in_flight: int = 16,
        timeout: float = 600.0,
        max_retries: int = 5,
        context_length: int | None = None,
        tolerance: float = 1e-3,
    ) -> None:
        if backend not in ("auto", *BACKENDS):
            raise ValueError(f"backend must be 'auto' or one of {', '.join(BACKENDS)}, got {backend!r}")
        self.connection = Connection(
            url, api_key=api_key, timeout=timeout, max_in_flight=max_in_flight, max_retries=max_retries
        )
        self.url = self.connection.base_url
        try:
            info = self.connection.run(detect(self.connection, backend))
        except BaseException:
            self.connection.close()
            raise
        if model is None:
            if not info.models:
                self.connection.close()
                raise RemoteError(f"{self.url}/v1/models lists no model; pass model=...", url=self.url)
            model = info.models[0]
        elif info.models and model not in info.models:
            self.connection.close()
            raise ValueError(f"{self.url} serves {', '.join(info.models)}, not {model!r}")
        self.served_model = model
        self.backend = info.backend
        self.server_info = info
        self.tokenizer, folder = load_server_tokenizer(tokenizer, info, model)
        self.layout = self.tokenizer.layout
        self.top_n = int(top_n) if top_n is not None else self.layout.n_kmers
        if self.top_n < 1:
            raise ValueError(f"top_n must be >= 1, got {top_n}")
        self.format: VllmFormat | SglangFormat = make_format(self.backend, model)
        try:
            folder_context = None if context_length or info.max_model_len else _folder_context(folder)
        except ValueError:  # a config.json that is not a readable file (a FIFO, huge, outside the folder)
            self.connection.close()
            raise
        self.context_length = context_length or info.max_model_len or folder_context or _UNKNOWN_CONTEXT
        self.tolerance = tolerance
        self.last_coverage = Coverage()
        self._window_cache: dict[str, float] = {}
        self._next_cache: dict[str, torch.Tensor] = {}

    @property
    def max_prompt_tokens(self) -> int:
        """Longest prompt a scoring request can send: the served context less the one completion
        token that every prompt-logprobs request asks for (vLLM refuses prompt + max_tokens above
        ``max_model_len``)."""
        return self.context_length - 1

    def __repr__(self) -> str:
        return f"RemoteCarbon({self.url!r}, model={self.served_model!r}, backend={self.backend!r}, top_n={self.top_n})"

    def __enter__(self) -> RemoteCarbon:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Close the HTTP connections (the object cannot be used afterwards)."""
        self.connection.close()

    def fingerprint(self) -> str:
        """Identifies the scorer for resumable jobs (server, model, backend, top N)."""
        key = f"{self.url}|{self.served_model}|{self.backend}|{self.top_n}"
        return hashlib.sha256(key.encode()).hexdigest()[:16]

    # ------------------------------------------------------------------ inputs (same rules as Carbon)
    def _prompt(self, prompt: str, index: int) -> _Prompt:
        return Carbon._prompt(self, prompt, index)  # type: ignore[arg-type]  # uses layout + tokenizer only

    def _dna_inputs(
        self, sequence: str, prefix: str, index: int, *, validate: bool = True
    ) -> tuple[list[int], int, np.ndarray, np.ndarray, str]:
        return Carbon._dna_inputs(self, sequence, prefix, index, validate=validate)  # type: ignore[arg-type]

    def check_sequence(self, sequence: str, *, prefix: str = "") -> None:
        """Raise the ``ValueError`` that :meth:`score` would raise for this sequence."""
        self._dna_inputs(sequence, prefix, 0)

    def check_prompt(self, prompt: str, *, prefix: str = "", **options: Any) -> None:
        """Raise the ``ValueError`` that :meth:`generate` would raise for this prompt and options."""
        self._request(prompt, 0, prefix, SamplingParams(**options))

    def _request(self, text: str, index: int, prefix: str, params: SamplingParams) -> tuple[Request, _Prompt]:
        from hexamer.tokenizer.segment import OPEN_TAG

        full = (
            text
            if not isinstance(text, str) or OPEN_TAG in text or not prefix
            else f"{prefix}{OPEN_TAG}{text}"
        )
        p = self._prompt(full, index)
        req = Request(p.ids, params, forced=p.forced, k=self.layout.k)
        if req.total_len > self.context_length:
            raise ValueError(
                f"prompt {index}: prompt of {len(req.prompt_ids)} tokens + {req.n_tokens} new tokens = "
                f"{req.total_len} exceeds the served context of {self.context_length} tokens"
            )
        return req, p

    # ------------------------------------------------------------------ coverage
    def _warn(self, cov: Coverage, what: str) -> None:
        self.last_coverage = cov
        message = cov.message(f"{what} via {self.url}", self.top_n, self.tolerance)
        if message:
            warnings.warn(message, TopNWarning, stacklevel=3)

    def _pred(
        self, tops: list[Top | None], start: int, n: int, targets: np.ndarray | None
    ) -> tuple[torch.Tensor, Coverage]:
        """k-mer logits predicting tokens ``start .. start + n - 1`` of the prompt."""
        return kmer_rows(tops[start : start + n], self.layout, self.top_n, targets=targets)

    # ------------------------------------------------------------------ scoring
    async def _score_one(
        self, index: int, inputs: tuple, level: str, method: str
    ) -> tuple[ScoreResult, Coverage]:
        ids, start, targets, n_real, content = inputs
        tops = await self.format.prompt_tops(self.connection, ids, self.top_n)
        return await asyncio.to_thread(self._assemble, tops, start, targets, n_real, content, level, method)

    def _assemble(
        self,
        tops: list[Top | None],
        start: int,
        targets: np.ndarray,
        n_real: np.ndarray,
        content: str,
        level: str,
        method: str,
    ) -> tuple[ScoreResult, Coverage]:
        k = self.layout.k
        n = len(targets)
        full = n_real == k
        check = np.where(full, targets, -1) if level == "token" else None
        pred, cov = self._pred(tops, start, n, check)
        tgt = torch.from_numpy(np.where(n_real > 0, targets, 0).astype(np.int64))
        real = torch.from_numpy(n_real.astype(np.int64))
        n_oov = oov_bases(n_real, len(content), k)
        if level == "bp":
            s = score_bases(pred, tgt, real, method=method)  # type: ignore[arg-type]
            per_base = np.full(n * k, np.nan, dtype=np.float32)
            flat = s.per_base.reshape(-1).numpy()
            keep = s.base_mask.reshape(-1).numpy()
            per_base[keep] = flat[keep]
            result = ScoreResult(
                mean=float(s.mean),
                n_scored=int(s.n_bases),
                n_oov_bases=n_oov,
                per_base=per_base[: len(content)],
            )
        else:
            valid = torch.from_numpy(full)
            t = score_tokens(pred, tgt, valid=valid)
            per_token = np.where(full, t.per_token.numpy(), np.nan).astype(np.float32)
            result = ScoreResult(
                mean=float(t.mean), n_scored=int(full.sum()), n_oov_bases=n_oov, per_token=per_token
            )
        return result, cov

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
        on_progress: Callable[[int], None] | None = None,
    ) -> ScoreResult | list[ScoreResult]:
        """Same as :meth:`hexamer.Carbon.score`, from the server's prompt log-probabilities.

        Sequences are scored concurrently (``max_in_flight`` at a time). ``on_progress(1)`` is
        called as each finishes. Token level is the block log-softmax of the true 6-mer, as locally.
        """
        if level not in ("bp", "token"):
            raise ValueError(f"level must be 'bp' or 'token', got {level!r}")
        if method not in ("fns", "exact"):
            raise ValueError(f"method must be 'fns' or 'exact', got {method!r}")
        single = isinstance(sequences, str)
        items = [sequences] if single else list(sequences)
        inputs = [self._dna_inputs(s, prefix, i) for i, s in enumerate(items)]  # type: ignore[arg-type]
        done = None if on_progress is None else (lambda _i, _r: on_progress(1))
        pairs = self.connection.run_all(
            [self._score_one(i, x, level, method) for i, x in enumerate(inputs)], on_done=done
        )
        cov = Coverage()
        for _, c in pairs:
            cov = cov.merge(c)
        self._warn(cov, "score")
        results = [r for r, _ in pairs]
        unscored = [i for i, r in enumerate(results) if r.status != "ok"]
        if unscored:
            warnings.warn(
                f"{len(unscored)} of {len(results)} sequences have no scorable base (mean is NaN, status "
                f"'unscored'): sequence {', '.join(map(str, unscored[:10]))}",
                UnscoredSequenceWarning,
                stacklevel=2,
            )
        return results[0] if single else results

    def base_logprobs(
        self, sequence: str, *, method: Literal["fns", "exact"] = "fns", prefix: str = ""
    ) -> np.ndarray:
        """Same as :meth:`hexamer.Carbon.base_logprobs`: ``(L, 4)``, columns A, C, G, T."""
        if method not in ("fns", "exact"):
            raise ValueError(f"method must be 'fns' or 'exact', got {method!r}")
        ids, start, targets, n_real, content = self._dna_inputs(sequence, prefix, 0)
        tops = self.connection.run(self.format.prompt_tops(self.connection, ids, self.top_n))
        logits, cov = self._pred(tops, start, len(targets), None)
        self._warn(cov, "base_logprobs")
        if method == "fns":
            lp = log_base_marginals(logits)
        else:
            tgt = torch.from_numpy(np.where(n_real > 0, targets, 0).astype(np.int64))
            lp = log_prefix_conditionals(logits, tgt)
            lp = torch.where(torch.from_numpy(n_real > 0)[:, None, None], lp, torch.nan)
        return to_acgt(lp).reshape(-1, 4)[: len(content)].numpy().astype(np.float32)

    # ------------------------------------------------------------------ VEP hooks (hexamer.vep)
    async def _window_ll(self, seq: str) -> float:
        from hexamer.vep.recipes import bp_log_likelihood

        ids, start, targets, n_real, _ = self._dna_inputs(seq, "", 0, validate=False)
        tops = await self.format.prompt_tops(self.connection, ids, self.top_n)

        def finish() -> tuple[float, Coverage]:
            pred, cov = self._pred(tops, start, len(targets), None)
            return bp_log_likelihood(pred, targets, n_real), cov

        ll, cov = await asyncio.to_thread(finish)
        if cov.message("", self.top_n, self.tolerance):
            self._warn(cov, "VEP window")
        return ll

    def prefetch_windows(self, sequences: Sequence[str]) -> None:
        """Score these VEP windows concurrently and keep their LLs for :meth:`window_ll`."""
        todo = list(dict.fromkeys(sequences))
        values = self.connection.run_all([self._window_ll(s) for s in todo])
        self._window_cache = dict(zip(todo, values, strict=True))

    def window_ll(self, sequence: str) -> float:
        """The window recipe's LL of ``<dna>sequence`` (sum of FNS per-base log-probabilities)."""
        cached = self._window_cache.get(sequence)
        if cached is not None:
            return cached
        return self.connection.run(self._window_ll(sequence))

    async def _next_marginal(self, context: str) -> torch.Tensor:
        ids = [self.layout.begin_id, *encode_kmers(context, self.layout).tolist()]
        top = await self.format.next_top(self.connection, ids, self.top_n)
        logits, cov = kmer_rows([top], self.layout, self.top_n)
        if cov.message("", self.top_n, self.tolerance):
            self._warn(cov, "next-base")
        return log_base_marginals(logits)[0, 0]

    def prefetch_next_base(self, contexts: Sequence[str]) -> None:
        """Fetch the next-base marginals of these contexts concurrently (see :meth:`next_base_log_marginals`)."""
        todo = list(dict.fromkeys(contexts))
        values = self.connection.run_all([self._next_marginal(c) for c in todo])
        self._next_cache = dict(zip(todo, values, strict=True))

    def next_base_log_marginals(self, context: str) -> torch.Tensor:
        """float64 ``log P_0(b)`` (A, T, C, G order) of the base right after ``<dna>context``."""
        cached = self._next_cache.get(context)
        if cached is not None:
            return cached
        return self.connection.run(self._next_marginal(context))

    # ------------------------------------------------------------------ generation
    async def _client_generate(self, req: Request) -> Request:
        ids = list(req.prompt_ids)
        extra = (self.layout.end_id, self.layout.oov_id)
        while req.state is not RequestState.FINISHED:
            top = await self.format.next_top(self.connection, ids, self.top_n)
            logits, _ = kmer_rows([top], self.layout, self.top_n, extra=extra)
            (pick,) = sample_next(logits, [req], self.layout.k)
            if pick == END:
                req.ended_with_tag = True
                req.finish("end_tag")
            else:
                req.append(pick)
                ids.append(self.layout.kmer_start + pick)
        return req

    async def _server_generate(self, req: Request) -> Request:
        assert isinstance(self.format, VllmFormat)
        p = req.params
        lay = self.layout
        allowed = list(range(lay.kmer_start, lay.kmer_stop))
        stop = [lay.end_id] if p.stop_at_end_tag else []
        new, _ = await self.format.generate(
            self.connection,
            req.prompt_ids,
            n_tokens=req.n_tokens,
            temperature=p.temperature,
            top_p=p.top_p,
            seed=p.seed,
            allowed=allowed + stop,
            stop=stop,
        )
        for tid in new:
            if req.state is RequestState.FINISHED:
                break
            if tid == lay.end_id and p.stop_at_end_tag:
                req.ended_with_tag = True
                req.finish("end_tag")
            elif lay.kmer_start <= tid < lay.kmer_stop:
                req.append(tid - lay.kmer_start)
            else:
                raise RemoteError(
                    f"{self.connection.url(self.format.path)} generated token {tid}, outside the DNA block "
                    "despite allowed_token_ids",
                    url=self.connection.url(self.format.path),
                )
        if req.state is not RequestState.FINISHED:
            raise RemoteError(
                f"{self.connection.url(self.format.path)} returned {len(new)} tokens, {req.n_tokens} were asked",
                url=self.connection.url(self.format.path),
            )
        return req

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
        sampler: Literal["auto", "client", "server"] = "auto",
    ) -> Generation | list[Generation]:
        """Same options and outputs as :meth:`hexamer.Carbon.generate`.

        ``sampler="client"`` picks every 6-mer here from the server's top-N next-token distribution
        (bp mode always; the local engine's sampler, so the same seed gives the same output as the
        local ``Carbon`` on the same weights). ``"server"`` (token mode on vLLM/hexamer, no mask, prompt
        ending on a 6-mer boundary) makes one request per prompt and uses the server's sampler.
        ``"auto"`` takes the server path whenever it is possible.

        ``n``, ``stop`` and ``seed`` follow ``Carbon.generate``'s rules on either path (sample j of
        prompt i is its own request with seed ``s + i * n + j``; stop strings cut the output here).
        ``top_k``, ``min_p`` and ``logprobs`` run in the client sampler, with the local engine's
        definitions (``logprobs``: the raw model's log-probability of each new base or 6-mer,
        normalised over the 6-mer block as locally): the server's own sampler defines them
        differently (vLLM's log-probabilities are over the whole vocabulary), so ``sampler="server"``
        refuses them by name and ``"auto"`` takes the client path for them. ``repetition_penalty``
        is refused: transformers' rule depends on the sign of the raw logits, which a server's
        log-probabilities do not give.
        """
        if sampler not in ("auto", "client", "server"):
            raise ValueError(f"sampler must be 'auto', 'client' or 'server', got {sampler!r}")
        if repetition_penalty != 1:
            raise ValueError(
                "RemoteCarbon.generate takes no repetition_penalty: transformers' rule divides positive "
                "logits and multiplies negative ones, and a server returns log-probabilities, whose "
                "signs are not the logits' (generate locally with Carbon for it)"
            )
        n = check_n(n, num_return_sequences)
        stops = check_stops(stop)
        client_only = [
            name
            for name, value, off in (
                ("top_k", top_k, 0),
                ("min_p", min_p, 0.0),
                ("logprobs", logprobs, False),
            )
            if value != off
        ]
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
            top_k=top_k,
            min_p=min_p,
        )
        server_ok = (
            self.format.server_generation
            and mode == "token"
            and mask is None
            and not any(p.forced for p in parsed)
        )
        if sampler == "server" and not server_ok:
            raise ValueError(
                "sampler='server' needs mode='token', no mask, prompts ending on a 6-mer boundary and a "
                f"vLLM or hexamer server (this is {self.backend})"
            )
        if sampler == "server" and client_only:
            raise ValueError(
                f"sampler='server' does not take {', '.join(client_only)}: the server's sampler defines "
                "them differently; use sampler='client' (or 'auto'), which applies them as Carbon.generate does"
            )
        server_ok = server_ok and not client_only
        on_server = server_ok and sampler != "client"
        run = self._server_generate if on_server else self._client_generate
        done = None if on_progress is None else (lambda _i, r: on_progress(len(r.bases())))
        self.connection.run_all([run(r) for r in requests], on_done=done)
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
