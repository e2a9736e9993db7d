""":class:`RemoteBackend`: the :class:`~hexamer.backend.protocol.Backend` operations answered by a
vLLM, SGLang or hexamer server from its top-N log-probabilities.

Inputs are tokenised here (:mod:`hexamer.backend.inputs`: the same ids as locally) and sent as
token ids; the k-mer distributions are rebuilt and marginalised here (:mod:`hexamer.remote.marginals`).
Every list operation sends its requests concurrently (``max_in_flight`` at a time; scoring also
at most ``token_budget`` prompt tokens at a time). Generation draws each 6-mer here from the
server's top N or on the server's own sampler (:mod:`hexamer.remote.sampling`). Embeddings are
hexamer's server's own, pooled there by the library (:mod:`hexamer.remote.embeddings`; refused on
vLLM and SGLang, whose pooling differs). A server gives no logits, hidden states or KV cache:
:meth:`kmer_logits` raises :class:`~hexamer.backend.protocol.UnsupportedOperation`, and
``supports_kv_sharing`` and ``supports_embeddings`` are False.
"""

from __future__ import annotations

import asyncio
import hashlib
import os
import warnings
from collections.abc import Awaitable, Sequence
from pathlib import Path
from typing import Literal

import numpy as np
import torch

from hexamer.backend.embedding_options import EmbeddingOptions
from hexamer.backend.inputs import DnaInputs, Prompt, TokenizedInputs, next_base_ids
from hexamer.backend.protocol import Decoding, OnDone, OnProgress, UnsupportedOperation
from hexamer.backend.results import ScoreResult, bp_score_result, checked_base_logprobs
from hexamer.backend.score_options import ScoreOptions
from hexamer.engine import Request, SamplingParams
from hexamer.engine.spec_config import SpecStats
from hexamer.fns import log_base_marginals, log_prefix_conditionals, score_bases, score_tokens, to_acgt
from hexamer.fns.likelihood import bp_log_likelihood
from hexamer.model.config import MAX_POSITION_EMBEDDINGS, read_config_json
from hexamer.remote.embeddings import embedding_facts, served_embeddings
from hexamer.remote.errors import RemoteError, TopNWarning
from hexamer.remote.http import Connection, TokenGate
from hexamer.remote.marginals import Coverage, kmer_rows
from hexamer.remote.protocol import BACKENDS, ServerInfo, SglangFormat, Top, VllmFormat, detect, make_format
from hexamer.remote.sampling import client_generate, failing_on_500, server_generate, server_sampler_problem
from hexamer.tokenizer import CarbonTokenizer, ModelFolderError, resolve_model_dir
from hexamer.tokenizer.dna import oov_bases
from hexamer.validate import check_new_length

__all__ = ["RemoteBackend", "load_server_tokenizer"]

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
    if isinstance(value, int) and value > MAX_POSITION_EMBEDDINGS:
        raise ValueError(
            f"{Path(folder) / 'config.json'}: 'max_position_embeddings' is {value:,}, more than the "
            f"{MAX_POSITION_EMBEDDINGS:,} hexamer takes"
        )
    return int(value) if isinstance(value, int) and value > 0 else None


class RemoteBackend(TokenizedInputs):
    """A Carbon-format model served by vLLM, SGLang or hexamer (``server_kind``).

    ``top_n`` (default 4**k = 4,096) log-probabilities are asked per position; vLLM must be started
    with ``--max-logprobs`` at least that large. ``max_in_flight`` bounds concurrent requests;
    429/503 answers and connection errors are retried ``max_retries`` times with backoff.
    ``tolerance`` (nats): warn (:class:`~hexamer.remote.errors.TopNWarning`) when k-mers missing
    from the top N could move a log-probability by more than this.
    """

    kind: Literal["remote"] = "remote"
    supports_kv_sharing = False
    supports_embeddings = False
    #: hexamer's server embeds (vLLM and SGLang are refused by name: their pooling differs)
    supports_served_embeddings = True

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
        try:  # whatever fails while setting up, the connection is not left open
            self._set_up(model, tokenizer, backend, top_n, context_length)
        except BaseException:
            self.connection.close()
            raise
        self.tolerance = tolerance
        self.last_coverage = Coverage()

    def _set_up(
        self,
        model: str | None,
        tokenizer: CarbonTokenizer | str | os.PathLike[str] | None,
        backend: str,
        top_n: int | None,
        context_length: int | None,
    ) -> None:
        """Ask the server what it is and serves, then load the tokenizer and fix the context."""
        info = self.connection.run(detect(self.connection, backend))
        if model is None:
            if not info.models:
                raise RemoteError(f"{self.url}/v1/models lists no model; pass model=...", url=self.url)
            model = info.models[0]
        elif info.models and model not in info.models:
            raise ValueError(f"{self.url} serves {', '.join(info.models)}, not {model!r}")
        self.served_model = model
        #: which server: ``"vllm"``, ``"sglang"`` or ``"hexamer"``
        self.server_kind = info.backend
        self.server_info = info
        self.tokenizer, folder = load_server_tokenizer(tokenizer, info, model)
        self.layout = self.tokenizer.layout
        self.top_n = int(top_n) if top_n is not None else self.layout.n_kmers
        if self.top_n < 1:
            raise ValueError(f"top_n must be >= 1, got {top_n}")
        self.format: VllmFormat | SglangFormat = make_format(self.server_kind, model)
        folder_context = None if context_length or info.max_model_len else _folder_context(folder)
        self._context_length = context_length or info.max_model_len or folder_context or _UNKNOWN_CONTEXT

    def __repr__(self) -> str:
        return (
            f"RemoteBackend({self.url!r}, model={self.served_model!r}, server={self.server_kind!r}, "
            f"top_n={self.top_n})"
        )

    def close(self) -> None:
        """Close the HTTP connections (the backend cannot be used afterwards)."""
        self.connection.close()

    # ---------------------------------------------------------------- declared facts
    @property
    def context_length(self) -> int:
        return self._context_length

    @property
    def max_prompt_tokens(self) -> int:
        """Longest prompt a scoring request can send: the served context less the one completion
        token that every prompt-logprobs request asks for (vLLM refuses prompt + max_tokens above
        ``max_model_len``)."""
        return self._context_length - 1

    @property
    def device(self) -> torch.device:
        return torch.device("cpu")

    def fingerprint(self) -> str:
        """Identifies the scorer for resumable jobs (server, model, server kind, top N)."""
        key = f"{self.url}|{self.served_model}|{self.server_kind}|{self.top_n}"
        return hashlib.sha256(key.encode()).hexdigest()[:16]

    # ---------------------------------------------------------------- what a server cannot give
    def kmer_logits(self, rows: Sequence[Sequence[int]]) -> torch.Tensor:
        raise UnsupportedOperation(
            f"{self.url} returns top-{self.top_n} log-probabilities, not logits; use score, base_logprobs, "
            "window_log_likelihoods or next_base_log_marginals"
        )

    # ---------------------------------------------------------------- embeddings
    def embedding_shape(self) -> tuple[int, int]:
        """``(hidden_size, num_layers)``, as hexamer's server announces them (others raise, naming why)."""
        facts = embedding_facts(self.server_info.hexamer, self.server_kind, self.url)
        return facts.hidden_size, facts.num_layers

    def served_embeddings(
        self, sequences: Sequence[str], options: EmbeddingOptions
    ) -> list[np.ndarray | str]:
        """Sequences sent to the server's ``/v1/embeddings`` with ``options``, which pools them with
        the library's code (:mod:`hexamer.remote.embeddings`)."""
        facts = embedding_facts(self.server_info.hexamer, self.server_kind, self.url)
        return served_embeddings(self.connection, self.served_model, facts, sequences, options)

    # ---------------------------------------------------------------- coverage
    def warn_coverage(self, cov: Coverage, what: str, *, stacklevel: int = 3) -> None:
        """Keep ``cov`` as :attr:`last_coverage`; a :class:`TopNWarning` when the top N missed mass."""
        self.last_coverage = cov
        message = cov.message(f"{what} via {self.url}", self.top_n, self.tolerance)
        if message:
            warnings.warn(message, TopNWarning, stacklevel=stacklevel)

    def _pred(
        self, tops: list[Top | None], start: int, n: int, targets: np.ndarray | None
    ) -> tuple[torch.Tensor, Coverage]:
        """k-mer logits predicting tokens ``start .. start + n - 1`` of the prompt."""
        return kmer_rows(tops[start : start + n], self.layout, self.top_n, targets=targets)

    # ---------------------------------------------------------------- scoring
    async def _score_one(
        self, inputs: DnaInputs, level: str, method: str, gate: TokenGate
    ) -> tuple[ScoreResult, Coverage]:
        ids, start, targets, n_real, content = inputs
        try:
            async with gate.hold(len(ids)):
                tops = await self.format.prompt_tops(self.connection, ids, self.top_n)
        except RemoteError as exc:
            if exc.status != 500:  # unreachable, refused, malformed: the whole call fails
                raise
            # the server failed this sequence (hexamer's answers 500 to a NaN/inf model output):
            # a failed result with the server's message; the other sequences go on
            k = self.layout.k
            full = int((n_real == k).sum()) if level == "token" else int(n_real.sum())
            failed = ScoreResult(
                mean=float("nan"),
                n_scored=full,
                n_oov_bases=oov_bases(n_real, len(content), k),
                status="failed",
                reason=f"the server failed it: {exc}",
            )
            return failed, Coverage()
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
            result = bp_score_result(s, len(content), n_oov)
        else:
            valid = torch.from_numpy(full)
            t = score_tokens(pred, tgt, valid=valid)
            per_token = np.where(full, t.per_token.numpy(), np.nan).astype(np.float32)
            result = ScoreResult(
                mean=float(t.mean), n_scored=int(full.sum()), n_oov_bases=n_oov, per_token=per_token
            )
        return result, cov

    def score(
        self, sequences: Sequence[str], options: ScoreOptions, *, on_progress: OnProgress = None
    ) -> list[ScoreResult]:
        """One prompt-logprobs request per sequence, concurrently: ``max_in_flight`` requests and
        at most ``token_budget`` prompt tokens at a time (one longer sequence goes alone), as the
        budget bounds one local forward. Token level is the block log-softmax of the true 6-mer,
        as locally."""
        inputs = [self.dna_inputs(s, options.prefix, i) for i, s in enumerate(sequences)]
        done = None if on_progress is None else (lambda _i, _r: on_progress(1))
        gate = TokenGate(options.token_budget)
        jobs = [self._score_one(x, options.level, options.method, gate) for x in inputs]
        pairs = self.connection.run_all(jobs, on_done=done)
        cov = Coverage()
        for _, c in pairs:
            cov = cov.merge(c)
        self.warn_coverage(cov, "score", stacklevel=4)
        return [r for r, _ in pairs]

    def base_logprobs(
        self, sequence: str, *, method: Literal["fns", "exact"] = "fns", prefix: str = ""
    ) -> np.ndarray:
        if method not in ("fns", "exact"):
            raise ValueError(f"method must be 'fns' or 'exact', got {method!r}")
        ids, start, targets, n_real, content = self.dna_inputs(sequence, prefix, 0)
        tops = self.connection.run(self.format.prompt_tops(self.connection, ids, self.top_n))
        logits, cov = self._pred(tops, start, len(targets), None)
        self.warn_coverage(cov, "base_logprobs", stacklevel=4)
        if method == "fns":
            lp = log_base_marginals(logits)
        else:
            tgt = torch.from_numpy(np.where(n_real > 0, targets, 0).astype(np.int64))
            lp = log_prefix_conditionals(logits, tgt)
            lp = torch.where(torch.from_numpy(n_real > 0)[:, None, None], lp, torch.nan)
        out = to_acgt(lp).reshape(-1, 4)[: len(content)].numpy().astype(np.float32)
        return checked_base_logprobs(out, n_real, self.layout.k)

    # ---------------------------------------------------------------- VEP operations
    async def _window_ll(self, seq: str) -> float:
        ids, start, targets, n_real, _ = self.dna_inputs(seq, "", 0, validate=False)
        tops = await self.format.prompt_tops(self.connection, ids, self.top_n)

        def finish() -> tuple[float, Coverage]:
            pred, cov = self._pred(tops, start, len(targets), None)
            return bp_log_likelihood(pred, targets, n_real), cov

        ll, cov = await asyncio.to_thread(finish)
        if cov.message("", self.top_n, self.tolerance):
            self.warn_coverage(cov, "VEP window")
        return ll

    def window_log_likelihoods(self, sequences: Sequence[str]) -> list[float]:
        """Each distinct sequence is one prompt-logprobs request, all concurrently."""
        todo = list(dict.fromkeys(sequences))
        values = dict(zip(todo, self.connection.run_all([self._window_ll(s) for s in todo]), strict=True))
        return [values[s] for s in sequences]

    async def _next_marginal(self, context: str) -> torch.Tensor:
        top = await self.format.next_top(self.connection, next_base_ids(self.layout, context), self.top_n)
        logits, cov = kmer_rows([top], self.layout, self.top_n)
        if cov.message("", self.top_n, self.tolerance):
            self.warn_coverage(cov, "next-base")
        return log_base_marginals(logits)[0, 0]

    def next_base_log_marginals(self, contexts: Sequence[str]) -> list[torch.Tensor]:
        """Each distinct context is one next-token request, all concurrently."""
        todo = list(dict.fromkeys(contexts))
        values = dict(zip(todo, self.connection.run_all([self._next_marginal(c) for c in todo]), strict=True))
        return [values[c] for c in contexts]

    # ---------------------------------------------------------------- generation
    def check_generation_length(self, max_bp: object, max_new_tokens: object) -> None:
        """Refuse, before any prompt is read, more new tokens than the served context."""
        check_new_length(max_bp, max_new_tokens, self.layout.k, self._context_length, "served context")

    def make_request(self, prompt: Prompt, params: SamplingParams) -> Request:
        """Checked against the served context (before its per-base table is allocated)."""
        k = self.layout.k
        params.check_fits(len(prompt.ids), len(prompt.forced), k, self._context_length, "served context")
        return Request(prompt.ids, params, forced=prompt.forced, k=k)

    def check_decoding(self, requests: Sequence[Request], decoding: Decoding) -> None:
        """No draft model (speculative decoding runs two models in this process), no
        ``repetition_penalty`` (transformers' rule divides positive logits and multiplies negative
        ones, and a server returns log-probabilities, whose signs are not the logits'); with
        ``sampler="server"``, the reason the server's sampler cannot take these requests."""
        self._on_server(requests, decoding)

    def _on_server(self, requests: Sequence[Request], decoding: Decoding) -> bool:
        """Whether the server's sampler runs these requests (``"auto"``: whenever it can)."""
        if any(r.params.repetition_penalty != 1 for r in requests):
            raise ValueError(
                "a served model takes no repetition_penalty: transformers' rule divides positive "
                "logits and multiplies negative ones, and a server returns log-probabilities, whose "
                "signs are not the logits' (generate with a local model for it)"
            )
        if decoding.draft is not None:
            raise UnsupportedOperation(
                "speculative decoding (draft=...) runs the draft and the target in this process; "
                "a served model takes no draft (generate with Carbon.from_pretrained for it)"
            )
        problem = server_sampler_problem(self.format, self.server_kind, requests)
        if decoding.sampler == "server" and problem is not None:
            raise ValueError(problem)
        return problem is None and decoding.sampler != "client"

    def generate(
        self, requests: Sequence[Request], decoding: Decoding, *, on_done: OnDone = None
    ) -> SpecStats | None:
        """Every request concurrently (``max_in_flight`` at a time), each on the client sampler
        (one request per 6-mer) or the server's (one request); a request the server fails with
        HTTP 500 is failed, the others go on."""
        if self._on_server(requests, decoding):
            fmt = self.format
            assert isinstance(fmt, VllmFormat)

            def run(r: Request) -> Awaitable[Request]:
                return server_generate(self.connection, fmt, self.layout, r)
        else:

            def run(r: Request) -> Awaitable[Request]:
                return client_generate(self.connection, self.format, self.layout, self.top_n, r)

        done = None if on_done is None else (lambda _i, r: on_done([r]))
        self.connection.run_all([failing_on_500(run, r) for r in requests], on_done=done)
        return None
