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

from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any, Literal, overload

import numpy as np

from hexamer.backend.generation import (
    build_requests,
    check_n,
    check_stops,
    expand_prompts,
    finished_generations,
)
from hexamer.backend.inputs import DnaInputs, Prompt, full_prompt, parse_prompt
from hexamer.backend.results import Generation, ScoreResult, warn_unscored
from hexamer.backend.score_options import ScoreOptions
from hexamer.engine import Request, SamplingParams
from hexamer.engine.request import RequestState
from hexamer.engine.sampler import END, sample_next
from hexamer.remote.backend import RemoteBackend, load_server_tokenizer
from hexamer.remote.errors import RemoteError
from hexamer.remote.marginals import kmer_rows
from hexamer.remote.protocol import VllmFormat
from hexamer.validate import check_new_length

__all__ = ["RemoteCarbon", "Sampler", "load_server_tokenizer"]


#: where :meth:`RemoteCarbon.generate` draws 6-mers: here from the top-N, on the server, or either
Sampler = Literal["auto", "client", "server"]
#: options only the client sampler applies with the local engine's definitions (and their "off")
_CLIENT_ONLY = (("top_k", 0), ("min_p", 0.0), ("logprobs", False))


def _client_only(options: Mapping[str, Any]) -> list[str]:
    """The client-only options set in ``options`` (what ``sampler="server"`` refuses)."""
    return [name for name, off in _CLIENT_ONLY if options.get(name, off) != off]


class RemoteCarbon:
    """A Carbon-format model served by vLLM, SGLang or hexamer, used through the ``Carbon`` API.

    ``top_n`` (default 4**k = 4,096) log-probabilities are asked per position; vLLM must be started
    with ``--max-logprobs`` at least that large. ``max_in_flight`` bounds concurrent requests;
    429/503 answers and connection errors are retried ``max_retries`` times with backoff.
    ``tolerance`` (nats): warn (:class:`~hexamer.remote.errors.TopNWarning`) when k-mers missing
    from the top N could move a log-probability by more than this.
    """

    #: where the model runs: the server, through its top-N log-probabilities
    backend: RemoteBackend

    def __init__(self, url: str, **options: Any) -> None:
        """``options``: :class:`~hexamer.remote.backend.RemoteBackend`'s (``model``, ``api_key``,
        ``tokenizer``, ``backend`` = the server kind, ``top_n``, ``max_in_flight``, ``timeout``,
        ``max_retries``, ``context_length``, ``tolerance``)."""
        self.backend = RemoteBackend(url, **options)
        self.tokenizer = self.backend.tokenizer
        self.layout = self.backend.layout

    # the backend's facts, under the names RemoteCarbon always had
    url = property(lambda self: self.backend.url)
    served_model = property(lambda self: self.backend.served_model)
    server_kind = property(lambda self: self.backend.server_kind, doc="``vllm``, ``sglang`` or ``hexamer``")
    server_info = property(lambda self: self.backend.server_info)
    connection = property(lambda self: self.backend.connection)
    format = property(lambda self: self.backend.format)
    context_length = property(lambda self: self.backend.context_length)
    last_coverage = property(lambda self: self.backend.last_coverage)

    @property
    def top_n(self) -> int:
        return self.backend.top_n

    @top_n.setter
    def top_n(self, value: int) -> None:
        self.backend.top_n = value

    @property
    def tolerance(self) -> float:
        return self.backend.tolerance

    @tolerance.setter
    def tolerance(self, value: float) -> None:
        self.backend.tolerance = value

    @property
    def max_prompt_tokens(self) -> int:
        """Longest prompt a scoring request can send (the served context less one)."""
        return self.backend.max_prompt_tokens

    def __repr__(self) -> str:
        return (
            f"RemoteCarbon({self.url!r}, model={self.served_model!r}, backend={self.server_kind!r}, "
            f"top_n={self.top_n})"
        )

    def __enter__(self) -> RemoteCarbon:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Close the HTTP connections (the object cannot be used afterwards)."""
        self.backend.close()

    def fingerprint(self) -> str:
        """Identifies the scorer for resumable jobs (server, model, server kind, top N)."""
        return self.backend.fingerprint()

    # ------------------------------------------------------------------ inputs (same rules as Carbon)
    def dna_inputs(
        self, sequence: str, prefix: str = "", index: int = 0, *, validate: bool = True
    ) -> DnaInputs:
        return self.backend.dna_inputs(sequence, prefix, index, validate=validate)

    def check_sequence(self, sequence: str, *, prefix: str = "") -> None:
        """Raise the ``ValueError`` that :meth:`score` would raise for this sequence."""
        self.dna_inputs(sequence, prefix, 0)

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
        (with ``sampler="server"``, also when this prompt cannot take the server's sampler)."""
        self.check_generation_length(options.get("max_bp"), options.get("max_new_tokens"))
        _, p = self.make_request(prompt, 0, prefix, SamplingParams(**options))
        if sampler == "server":
            problem = self.server_sampler_problem(
                mode=options.get("mode", "bp"),
                mask=options.get("mask"),
                prompts=[p],
                client_only=_client_only({**options, "logprobs": logprobs}),
            )
            if problem is not None:
                raise ValueError(problem)

    def server_sampler_problem(
        self, *, mode: str, mask: object, prompts: Sequence[Prompt], client_only: Sequence[str]
    ) -> str | None:
        """Why ``sampler="server"`` cannot serve these prompts and options, or ``None`` when it can:
        the server's sampler draws whole 6-mers of plain token mode from a prompt of whole 6-mers
        (vLLM or hexamer servers), and defines ``client_only`` options its own way."""
        if not (self.format.server_generation and mode == "token" and mask is None):
            return (
                "sampler='server' needs mode='token', no mask and a vLLM or hexamer server "
                f"(this is {self.server_kind} with mode={mode!r}{', a mask' if mask is not None else ''})"
            )
        if any(p.forced for p in prompts):
            return (
                "sampler='server' needs prompts ending on a 6-mer boundary (the server samples whole 6-mers)"
            )
        if client_only:
            return (
                f"sampler='server' does not take {', '.join(client_only)}: the server's sampler defines "
                "them differently; use sampler='client' (or 'auto'), which applies them as Carbon.generate does"
            )
        return None

    def check_generation_length(self, max_bp: object, max_new_tokens: object) -> None:
        """Refuse, before any prompt is read, more new tokens than the served context."""
        check_new_length(max_bp, max_new_tokens, self.layout.k, self.context_length, "served context")

    def make_request(
        self, text: str, index: int, prefix: str, params: SamplingParams
    ) -> tuple[Request, Prompt]:
        """One request for prompt ``index``, checked against the served context (before its
        per-base table is allocated)."""
        p = parse_prompt(self.tokenizer, full_prompt(text, prefix), index)
        try:
            params.check_fits(len(p.ids), len(p.forced), self.layout.k, self.context_length, "served context")
        except ValueError as exc:
            raise ValueError(f"prompt {index}: {exc}") from None
        req = Request(p.ids, params, forced=p.forced, k=self.layout.k)
        return req, p

    # ------------------------------------------------------------------ scoring
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
        on_progress: Callable[[int], None] | None = None,
    ) -> ScoreResult | list[ScoreResult]:
        """Same as :meth:`hexamer.Carbon.score`, from the server's prompt log-probabilities.

        Sequences are scored concurrently (``max_in_flight`` at a time). ``on_progress(1)`` is
        called as each finishes. Token level is the block log-softmax of the true 6-mer, as locally.
        ``token_budget`` is checked as locally but bounds nothing here: the server batches.
        """
        options = ScoreOptions(level, method, prefix, token_budget)
        single = isinstance(sequences, str)
        items = [sequences] if single else list(sequences)
        results = self.backend.score(items, options, on_progress=on_progress)
        warn_unscored(results, stacklevel=2)
        return results[0] if single else results

    def base_logprobs(
        self, sequence: str, *, method: Literal["fns", "exact"] = "fns", prefix: str = ""
    ) -> np.ndarray:
        """Same as :meth:`hexamer.Carbon.base_logprobs`: ``(L, 4)``, columns A, C, G, T."""
        return self.backend.base_logprobs(sequence, method=method, prefix=prefix)

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
        sampler: Sampler = "auto",
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
        self.check_generation_length(max_bp, max_new_tokens)
        stops = check_stops(stop)
        client_only = _client_only({"top_k": top_k, "min_p": min_p, "logprobs": logprobs})
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
            top_k=top_k,
            min_p=min_p,
        )
        problem = self.server_sampler_problem(mode=mode, mask=mask, prompts=parsed, client_only=client_only)
        if sampler == "server" and problem is not None:
            raise ValueError(problem)
        on_server = problem is None and sampler != "client"
        run = self._server_generate if on_server else self._client_generate
        done = None if on_progress is None else (lambda _i, r: on_progress(len(r.bases())))
        self.connection.run_all([_failing_on_500(run, r) for r in requests], on_done=done)
        out = finished_generations(
            items, requests, parsed, self.layout, mode=mode, logprobs=logprobs, stops=stops
        )
        warn_unscored(out, stacklevel=2)  # prompts the server failed warn once
        return out[0] if single else out


async def _failing_on_500(run: Callable[[Request], Awaitable[Request]], request: Request) -> Request:
    """``run(request)``, the request failed (``finish_reason`` ``"error"``) when the server answers
    it HTTP 500 (hexamer's server does so for a NaN/inf model output): the other prompts go on."""
    try:
        return await run(request)
    except RemoteError as exc:
        if exc.status != 500:
            raise
        request.fail(f"the server failed it: {exc}")
        return request
