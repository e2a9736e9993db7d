"""DNA-native endpoints (``/v1/dna/generate``, ``/v1/dna/score``, ``/v1/dna/vep``) and
``/v1/embeddings``: thin layers over :class:`~hexamer.Carbon`, :mod:`hexamer.vep` and
:mod:`hexamer.embed`, so a server answer equals the library's for the same inputs and seeds.

Generation goes through the shared engine (it batches with completions); scoring, VEP and
embeddings run as one job each on the engine thread, between decode steps.
"""

from __future__ import annotations

import asyncio
import base64
import re
import secrets
import time
from collections.abc import AsyncIterator, Callable
from typing import Any, TypeVar

import numpy as np
from starlette.requests import Request as HttpRequest
from starlette.responses import Response

from hexamer.embed import embed_sequences
from hexamer.embed.pooling import embedding_backend
from hexamer.engine import Request, RequestState, SamplingParams
from hexamer.engine.spec_config import SpecConfig, SpecStats
from hexamer.server.errors import ApiError, error_body
from hexamer.server.schemas import DnaGenerateRequest, DnaScoreRequest, DnaVepRequest, EmbeddingRequest
from hexamer.server.state import ServerState
from hexamer.server.streaming import DisconnectAwareStream, dumps, json_response, sse
from hexamer.server.worker import ShuttingDown, Submission, TimedOut
from hexamer.tokenizer.dna import kmers_to_bases
from hexamer.tokenizer.segment import OPEN_TAG
from hexamer.vep.engine import score_window_pairs
from hexamer.vep.recipes import WindowPair, pair_oov_bp, unscored_allele, variant_windows, window_tokens

T = TypeVar("T")
_NOT_IUPAC = re.compile(r"[^ACGTURYSWKMBDHVNacgturyswkmbdhvn\s]")
#: request work above this size (characters) is done on the preparation threads
OFFLOAD_CHARS = 4096


def dna_problem(seq: str) -> str | None:
    """Why ``seq`` is not DNA (IUPAC nucleotide codes), or None (one regex scan: megabases in
    milliseconds)."""
    bad = _NOT_IUPAC.search(seq)
    if bad is not None:
        return f"character {bad.start() + 1} is {bad.group()!r}, not a nucleotide code (A C G T or IUPAC N R Y ...)"
    return None


def _as_list(value: str | list[str], field: str, limit: int) -> list[str]:
    items = [value] if isinstance(value, str) else list(value)
    if not items:
        raise ApiError(400, f"{field}: give at least one", field)
    if len(items) > limit:
        raise ApiError(400, f"{field}: {len(items)} items exceed the limit of {limit}", field)
    return items


def _prefix(tags: list[str] | None, prefix: str) -> str:
    out = []
    for tag in tags or []:
        tag = tag.strip()
        if not tag:
            raise ApiError(400, "tags: empty tag", "tags")
        out.append(tag if tag.startswith("<") and tag.endswith(">") else f"<{tag}>")
    return "".join(out) + prefix


async def _job(state: ServerState, http: HttpRequest, fn: Callable[[], T]) -> T:
    """Run on the engine thread; a ValueError/TypeError from the library is the client's (400),
    and the request's timeout (counted from its arrival) is a 504."""
    deadline = state.deadline(http.scope)
    state.check_deadline(deadline)
    try:
        return await state.worker.run_job(fn, deadline)
    except ShuttingDown as exc:
        raise ApiError(503, str(exc)) from None
    except TimedOut:
        raise ApiError(504, state.timeout_message) from None
    except (ValueError, TypeError) as exc:
        raise ApiError(400, str(exc)) from None


# ---------------------------------------------------------------------------------------- generate
def prepare_generation(state: ServerState, body: DnaGenerateRequest) -> list[tuple[Request, int]]:
    """Validate a generation request and build its engine requests ``(request, prompt index)``,
    choice ``c = i * n + j`` at position c. Cheap checks (counts, lengths) come before any
    prompt is scanned or tokenised."""
    s = state.settings
    prompts = _as_list(body.prompt, "prompt", s.max_prompts)
    if body.n > s.max_n:
        raise ApiError(400, f"n: {body.n} exceeds the limit of {s.max_n}", "n")
    if (body.max_bp is None) == (body.max_tokens is None):
        raise ApiError(400, "give exactly one of max_bp and max_tokens", "max_bp")
    bp = body.max_bp if body.max_bp is not None else 6 * (body.max_tokens or 0)
    if bp > s.max_bp:
        raise ApiError(400, f"max_bp: {bp} bases exceed the server limit of {s.max_bp}", "max_bp")
    if body.mask is not None and len(body.mask.strip()) > bp:  # before it is parsed, once per choice
        raise ApiError(
            400, f"mask: covers {len(body.mask.strip())} bases but only {bp} will be generated", "mask"
        )
    limit = state.max_prompt_chars
    for i, text in enumerate(prompts):
        if len(text) > limit:
            where = "prompt" if len(prompts) == 1 else f"prompt[{i}]"
            raise ApiError(
                400,
                f"{where}: {len(text):,} characters exceed the server's max_prompt_chars of {limit:,}",
                "prompt",
            )
    prefix = _prefix(body.tags, body.prefix)
    spec = speculative_config(state, body)
    carbon = state.carbon
    out: list[tuple[Request, int]] = []
    for i, text in enumerate(prompts):
        where = "prompt" if len(prompts) == 1 else f"prompt[{i}]"
        dna = text[text.rfind(OPEN_TAG) + len(OPEN_TAG) :] if OPEN_TAG in text else text
        problem = dna_problem(dna)
        if problem:
            raise ApiError(400, f"{where}: {problem}", "prompt")
        for j in range(body.n):
            c = i * body.n + j
            try:
                params = SamplingParams(
                    mode=body.mode,
                    temperature=body.temperature,
                    top_p=body.top_p,
                    max_bp=body.max_bp,
                    max_new_tokens=body.max_tokens,
                    mask=body.mask,
                    seed=None if body.seed is None else body.seed + c,
                    stop_at_end_tag=body.stop_at_end_tag,
                )
                req, _ = carbon.make_request(text, i, prefix, params)
            except (ValueError, TypeError) as exc:
                raise ApiError(400, f"{where}: {exc}", "prompt") from None
            if req.total_len > state.max_len:
                raise ApiError(
                    400,
                    f"{where}: {len(req.prompt_ids)} prompt tokens + {req.n_tokens} new tokens exceed "
                    f"the server's max_model_len of {state.max_len}",
                    "prompt",
                )
            if spec is not None:
                use_draft(state, body, req, spec, where)
            out.append((req, i))
    return out


def speculative_config(state: ServerState, body: DnaGenerateRequest) -> SpecConfig | None:
    """The draft settings for a generation request, or None to decode without the draft.

    ``draft`` unset: speculative whenever the server has a draft model (the output's law is the
    same either way); ``true``: required (400 without one); ``false``: off. ``num_draft_tokens``
    (else ``--draft-tokens``, else adaptive) fixes the 6-mers drafted per round."""
    has_draft = state.worker.engine.draft is not None
    if body.draft and not has_draft:
        raise ApiError(400, "draft: this server has no draft model (start it with --draft-model)", "draft")
    if body.num_draft_tokens is not None and not (has_draft and body.draft is not False):
        raise ApiError(
            400, "num_draft_tokens: needs the server's draft model (and draft not false)", "num_draft_tokens"
        )
    if not has_draft or body.draft is False:
        return None
    k = body.num_draft_tokens or state.settings.draft_tokens
    return SpecConfig.from_option(k if k is not None else "auto")


def use_draft(
    state: ServerState, body: DnaGenerateRequest, req: Request, spec: SpecConfig, where: str
) -> None:
    """Mark ``req`` speculative when the draft can run it; a request the draft cannot run (such as
    ``stop_at_end_tag``) is a 400 when ``draft`` was asked for, else decoded without it."""
    draft = state.worker.engine.draft
    assert draft is not None
    req.speculative = spec
    try:
        draft.check(req)
    except ValueError as exc:
        req.speculative = None
        if body.draft:
            raise ApiError(400, f"{where}: {exc}", "draft") from None


class DnaGenerateRun:
    def __init__(
        self,
        state: ServerState,
        http: HttpRequest,
        body: DnaGenerateRequest,
        built: list[tuple[Request, int]],
    ) -> None:
        self.state, self.http, self.body = state, http, body
        loop = asyncio.get_running_loop()
        self.queue: asyncio.Queue[tuple[int, int, bool]] = asyncio.Queue()
        self.requests = [req for req, _ in built]
        self.prompt_index = [i for _, i in built]
        self.subs = [Submission(req, c, loop, self.queue) for c, req in enumerate(self.requests)]
        self.deadline = state.deadline(http.scope)
        state.submit(self.subs, self.deadline)
        state.metrics.prompt_tokens.inc(sum(len(r.prompt_ids) for r in self.requests[:: body.n]))
        self.id = f"dnagen-{secrets.token_hex(12)}"
        self.created = int(time.time())
        self.finished = [False] * len(self.requests)
        self.sent_bp = [0] * len(self.requests)
        self.sent_tokens = [0] * len(self.requests)
        self.first: list[float | None] = [None] * len(self.requests)

    def cancel_unfinished(self) -> None:
        self.state.worker.cancel([s for s, done in zip(self.subs, self.finished, strict=True) if not done])

    def _new_bases(self, index: int, req: Request, count: int, finished: bool) -> str:
        """The bases of choice ``index`` not yet streamed, converting only the k-mers new since the
        last event (whole-sequence conversions every step would cost O(length^2) per stream)."""
        if finished:  # the request's own final sequence (a </dna> or trimmed last k-mer included)
            return req.bases()[self.sent_bp[index] :]
        done = self.sent_tokens[index]
        raw = kmers_to_bases(req.output_kmers[done:count], req.k)
        self.sent_tokens[index] = count
        offset = done * req.k - len(req.forced)  # position of raw[0] in the visible sequence
        if offset < 0:
            raw, offset = raw[-offset:], 0
        if req.params.max_bp is not None:
            raw = raw[: max(req.params.max_bp - offset, 0)]
        return raw[max(self.sent_bp[index] - offset, 0) :]

    def _event(self, index: int, count: int, finished: bool) -> None:
        if self.first[index] is None and count:
            self.first[index] = now = time.perf_counter()
            self.state.metrics.ttft.observe(now - self.subs[index].submitted_at)
        if finished:
            self.finished[index] = True
            if self.subs[index].error is not None:
                raise ApiError(503, self.subs[index].error or "aborted")

    async def _next(self, watcher: asyncio.Future[Any] | None) -> tuple[int, int, bool]:
        remaining = self.deadline - time.monotonic()
        if remaining <= 0:  # checked first: a busy queue always has an event ready
            raise ApiError(504, self.state.timeout_message)
        getter = asyncio.ensure_future(self.queue.get())
        waits: set[asyncio.Future[Any]] = {getter} | ({watcher} if watcher else set())
        done, _ = await asyncio.wait(waits, timeout=max(remaining, 0), return_when=asyncio.FIRST_COMPLETED)
        if getter in done:
            return getter.result()
        getter.cancel()
        if watcher is not None and watcher in done:
            raise ConnectionResetError
        raise ApiError(504, self.state.timeout_message)

    def _choice(self, c: int) -> dict[str, Any]:
        req = self.requests[c]
        seq = req.bases()
        return {
            "index": c,
            "prompt_index": self.prompt_index[c],
            "sequence": seq,
            "n_bp": len(seq),
            "n_new_tokens": req.n_generated + (1 if req.ended_with_tag else 0),
            "finish_reason": req.finish_reason or "length",
            **({"speculative": spec_summary(req.spec_stats)} if req.spec_stats is not None else {}),
        }

    def usage(self) -> dict[str, int]:
        prompt = sum(len(r.prompt_ids) for r in self.requests[:: self.body.n])
        done = sum(r.n_generated for r in self.requests)
        bp = sum(len(r.bases()) for r in self.requests if r.state is RequestState.FINISHED)
        return {
            "prompt_tokens": prompt,
            "completion_tokens": done,
            "total_tokens": prompt + done,
            "generated_bp": bp,
        }

    async def respond(self) -> Response:
        if self.body.stream:
            return DisconnectAwareStream(self._stream(), on_close=self.cancel_unfinished)
        watcher = asyncio.ensure_future(_wait_disconnect(self.http))
        try:
            while not all(self.finished):
                self._event(*await self._next(watcher))
        except ConnectionResetError:
            return Response(status_code=499)
        finally:
            watcher.cancel()
            self.cancel_unfinished()
        usage = self.usage()
        self.state.metrics.generated_bp.inc(usage["generated_bp"])
        self.http.state.usage = usage
        return json_response(
            dumps(
                {
                    "id": self.id,
                    "object": "dna.generation",
                    "created": self.created,
                    "model": self.state.model_name,
                    "choices": [self._choice(c) for c in range(len(self.requests))],
                    "usage": usage,
                }
            )
        )

    async def _stream(self) -> AsyncIterator[str]:
        try:
            while not all(self.finished):
                try:
                    index, count, finished = await self._next(None)
                    self._event(index, count, finished)
                except ApiError as exc:
                    yield sse(exc.body())
                    break
                req = self.requests[index]
                delta = self._new_bases(index, req, count, finished)
                self.sent_bp[index] += len(delta)
                self.state.metrics.generated_bp.inc(len(delta))
                if not delta and not finished:
                    continue
                yield sse(
                    {
                        "id": self.id,
                        "object": "dna.generation.chunk",
                        "created": self.created,
                        "model": self.state.model_name,
                        "choices": [
                            {
                                "index": index,
                                "prompt_index": self.prompt_index[index],
                                "delta": delta,
                                "finish_reason": (req.finish_reason or "length") if finished else None,
                            }
                        ],
                    }
                )
            self.http.state.usage = self.usage()
            yield "data: [DONE]\n\n"
        finally:
            self.cancel_unfinished()


def spec_summary(stats: SpecStats) -> dict[str, int]:
    """What speculative decoding did for one choice: 6-mers drafted and accepted, target forwards."""
    return {
        "drafted_tokens": stats.drafted,
        "accepted_tokens": stats.accepted,
        "target_forwards": stats.row_rounds,
    }


async def _wait_disconnect(http: HttpRequest) -> None:
    while True:
        message = await http.receive()
        if message["type"] == "http.disconnect":
            return


async def dna_generate(state: ServerState, http: HttpRequest, body: DnaGenerateRequest) -> Response:
    state.check_model(body.model)
    size = len(body.prompt) if isinstance(body.prompt, str) else sum(len(p) for p in body.prompt)
    size += len(body.mask or "") * body.n
    if size > OFFLOAD_CHARS:  # scanning and tokenising prompts is CPU work: never on the event loop
        built = await state.offload(lambda: prepare_generation(state, body))
    else:
        built = prepare_generation(state, body)
    return await DnaGenerateRun(state, http, body, built).respond()


# ---------------------------------------------------------------------------------------- score
def _check_sequences(state: ServerState, items: list[str], field: str, prefix: str) -> None:
    for i, seq in enumerate(items):  # lengths first: they cost nothing
        if len(seq) > state.settings.max_bp:
            where = field if len(items) == 1 else f"{field}[{i}]"
            raise ApiError(
                400, f"{where}: {len(seq)} bases exceed the server limit of {state.settings.max_bp}", field
            )
    for i, seq in enumerate(items):
        where = field if len(items) == 1 else f"{field}[{i}]"
        problem = dna_problem(seq)
        if problem:
            raise ApiError(400, f"{where}: {problem}", field)
        try:
            state.carbon.check_sequence(seq, prefix=prefix)
        except (ValueError, TypeError) as exc:
            raise ApiError(400, f"{where}: {exc}", field) from None


def _tokens(state: ServerState, seqs: list[str], prefix: str) -> int:
    extra = len(state.tokenizer.encode(prefix)) if prefix else 0
    k = state.carbon.layout.k
    return sum(extra + 1 + -(-len(s.strip()) // k) for s in seqs)


def _array(values: np.ndarray | None) -> list[float | None] | None:
    if values is None:
        return None
    return [None if not np.isfinite(v) else float(v) for v in values.tolist()]


async def dna_score(state: ServerState, http: HttpRequest, body: DnaScoreRequest) -> Response:
    state.check_model(body.model)
    seqs = _as_list(body.sequences, "sequences", state.settings.max_prompts)
    prefix = _prefix(body.tags, body.prefix)
    if sum(len(x) for x in seqs) > OFFLOAD_CHARS:
        await state.offload(lambda: _check_sequences(state, seqs, "sequences", prefix))
    else:
        _check_sequences(state, seqs, "sequences", prefix)
    results = await _job(
        state, http, lambda: state.carbon.score(seqs, level=body.level, method=body.method, prefix=prefix)
    )
    assert isinstance(results, list)
    data = []
    for i, r in enumerate(results):
        arr = r.per_base if body.level == "bp" else r.per_token
        item: dict[str, Any] = {
            "index": i,
            "mean": r.mean,
            "sum": float(np.nansum(arr)) if arr is not None else None,
            "n_scored": r.n_scored,
            "n_oov_bases": r.n_oov_bases,
        }
        if body.per_position:
            item["per_base" if body.level == "bp" else "per_token"] = _array(arr)
        data.append(item)
    state.metrics.scored_bp.inc(sum(len(s.strip()) for s in seqs))
    tokens = _tokens(state, seqs, prefix)
    http.state.usage = {"prompt_tokens": tokens}
    return json_response(
        dumps(
            {
                "object": "dna.score",
                "model": state.model_name,
                "level": body.level,
                "method": body.method,
                "data": data,
                "usage": {"prompt_tokens": tokens, "total_tokens": tokens},
            }
        )
    )


# ---------------------------------------------------------------------------------------- vep
async def dna_vep(state: ServerState, http: HttpRequest, body: DnaVepRequest) -> Response:
    """Window recipe of :mod:`hexamer.vep.recipes`: LL(alt window) - LL(ref window), with the
    same rules and the same shared-prefix scorer as ``hexamer vep``
    (:func:`hexamer.vep.engine.score_window_pairs`: equal-length indel windows; ``skipped`` with a
    reason for N alleles and for variants whose bases share a 6-mer with an N)."""
    state.check_model(body.model)
    if not body.variants:
        raise ApiError(400, "variants: give at least one variant", "variants")
    if len(body.variants) > state.settings.max_prompts:
        raise ApiError(
            400,
            f"variants: {len(body.variants)} exceed the limit of {state.settings.max_prompts}",
            "variants",
        )
    context = state.carbon.context_length
    k = state.carbon.layout.k
    rows: list[dict[str, Any]] = []
    work: list[tuple[int, WindowPair]] = []
    for i, v in enumerate(body.variants):
        row: dict[str, Any] = {"index": i, "id": v.id, "status": "ok", "score": None, "reason": None}
        rows.append(row)
        seq = v.sequence.strip().upper()
        ref, alt = v.ref.strip().upper(), v.alt.strip().upper()
        p0 = v.pos - body.position_base
        problem = dna_problem(seq)
        if problem:
            raise ApiError(400, f"variants[{i}].sequence: {problem}", "variants")
        if len(seq) > state.settings.max_bp:
            raise ApiError(
                400,
                f"variants[{i}].sequence: {len(seq)} bases exceed the limit of {state.settings.max_bp}",
                "variants",
            )
        if not ref or not alt or set(ref + alt) - set("ACGTN"):
            row.update(
                status="failed", reason=f"ref {v.ref!r} and alt {v.alt!r} must be non-empty A/C/G/T/N alleles"
            )
            continue
        if not 0 <= p0 <= len(seq) - len(ref):
            row.update(
                status="failed",
                reason=f"pos {v.pos} ({body.position_base}-based) puts ref outside the sequence of {len(seq)} bp",
            )
            continue
        if seq[p0 : p0 + len(ref)] != ref:
            row.update(
                status="ref_mismatch",
                reason=f"sequence has {seq[p0 : p0 + len(ref)]!r} at pos {v.pos}, not ref {ref!r}",
            )
            continue
        if "N" in ref + alt:
            row.update(
                status="skipped",
                reason="allele contains N: its 6-mer would be <oov> and its bases not scored",
            )
            continue
        if window_tokens(body.window, k) > context:
            row.update(
                status="failed",
                reason=f"a {body.window} bp window does not fit the model's context of {context} tokens",
            )
            continue
        pair = variant_windows(
            lambda a, b, seq=seq: seq[a:b], p0, ref, alt, len(seq), body.window, 1, k * (context - 1)
        )
        if pair is None:
            row.update(
                status="skipped",
                reason=f"the sequence ({len(seq)} bp) is too short to give this indel's ref and alt windows "
                "the same number of bases",
            )
            continue
        n_oov = pair_oov_bp(pair, rc_average=body.rc_average, k=k)
        row.update(
            window_start=pair.start,
            window_end=pair.start + len(pair.ref),
            n_scored_bp=len(pair.ref) - n_oov,
            n_oov_bp=n_oov,
        )
        unscored = unscored_allele(pair, rc_average=body.rc_average, k=k)
        if unscored is not None:
            row.update(status="skipped", reason=unscored)
            continue
        work.append((i, pair))

    def score_all() -> list[float]:
        return score_window_pairs(state.carbon, [p for _, p in work], rc_average=body.rc_average)

    scores = await _job(state, http, score_all) if work else []
    for (i, pair), score in zip(work, scores, strict=True):
        rows[i]["score"] = float(score)
        state.metrics.scored_bp.inc(len(pair.ref))
    http.state.usage = {"variants": len(rows)}
    return json_response(
        dumps(
            {
                "object": "dna.vep",
                "model": state.model_name,
                "recipe": "window",
                "window": body.window,
                "rc_average": body.rc_average,
                "position_base": body.position_base,
                "data": rows,
            }
        )
    )


# ---------------------------------------------------------------------------------------- embeddings
async def embeddings(state: ServerState, http: HttpRequest, body: EmbeddingRequest) -> Response:
    state.check_model(body.model)
    raw = body.input
    if isinstance(raw, str):
        items = [raw]
    elif raw and all(isinstance(x, str) for x in raw):
        items = list(raw)  # type: ignore[arg-type]
    elif not raw:
        raise ApiError(400, "input: give at least one sequence", "input")
    else:
        raise ApiError(400, "input: token-id input is not supported; send DNA sequences as strings", "input")
    if len(items) > state.settings.max_prompts:
        raise ApiError(
            400, f"input: {len(items)} sequences exceed the limit of {state.settings.max_prompts}", "input"
        )
    hidden = embedding_backend(state.carbon).hidden_size
    if body.dimensions is not None and body.dimensions != hidden:
        raise ApiError(400, f"dimensions: this model's embeddings have {hidden} dimensions", "dimensions")
    for i, seq in enumerate(items):
        where = "input" if len(items) == 1 else f"input[{i}]"
        if len(seq) > state.settings.max_bp:  # before any scan of the text
            raise ApiError(
                400, f"{where}: {len(seq)} bases exceed the limit of {state.settings.max_bp}", "input"
            )
        if not seq.strip():
            raise ApiError(400, f"{where}: the sequence is empty", "input")
        problem = dna_problem(seq)
        if problem:
            raise ApiError(400, f"{where}: {problem}", "input")
    errors: list[str] = []

    def run() -> list[np.ndarray | None]:
        records = [(str(i), s) for i, s in enumerate(items)]
        out = embed_sequences(
            state.carbon, records, pool=body.pool, layer=body.layer, prefix=body.prefix,
            on_error=lambda rid, reason: errors.append(f"input[{rid}]: {reason}"),
        )  # fmt: skip
        return [vec for _, vec in out]

    vectors = await _job(state, http, run)
    if errors:
        raise ApiError(400, errors[0], "input")
    data = []
    for i, vec in enumerate(vectors):
        assert vec is not None
        v = vec.astype(np.float32)
        if body.normalize:
            v = v / max(float(np.linalg.norm(v)), 1e-12)
        emb: Any = (
            base64.b64encode(v.astype("<f4").tobytes()).decode()
            if body.encoding_format == "base64"
            else v.tolist()
        )
        data.append({"index": i, "object": "embedding", "embedding": emb})
    tokens = _tokens(state, items, body.prefix) + len(items)
    http.state.usage = {"prompt_tokens": tokens}
    return json_response(
        dumps(
            {
                "id": f"embd-{secrets.token_hex(12)}",
                "object": "list",
                "created": int(time.time()),
                "model": state.model_name,
                "data": data,
                "usage": {"prompt_tokens": tokens, "total_tokens": tokens},
            }
        )
    )


__all__ = ["dna_generate", "dna_problem", "dna_score", "dna_vep", "embeddings", "error_body"]
