"""``/v1/dna/generate``: DNA continuation through the shared engine (it batches with completions),
streamed or whole, optionally speculative with the server's draft model; a choice equals
``Carbon.generate`` for the same prompt, options and seed."""

from __future__ import annotations

import asyncio
import secrets
import time
from collections.abc import AsyncIterator
from typing import Any

from starlette.requests import Request as HttpRequest
from starlette.responses import Response

from hexamer.backend.inputs import Prompt, full_prompt, parse_prompt
from hexamer.engine import ContextExceeded, Request, RequestState, SamplingParams, SpeculationRefused
from hexamer.engine.spec_config import SpecConfig, SpecStats
from hexamer.server.dna_requests import OFFLOAD_CHARS, as_list, dna_problem, tag_prefix
from hexamer.server.errors import ApiError
from hexamer.server.schemas import DnaGenerateRequest
from hexamer.server.state import ServerState
from hexamer.server.streaming import DisconnectAwareStream, dumps, json_response, sse, wait_disconnect
from hexamer.server.worker import Submission, next_progress
from hexamer.tokenizer.dna import kmers_to_bases
from hexamer.tokenizer.segment import OPEN_TAG

__all__ = [
    "DnaGenerateRun",
    "dna_generate",
    "prepare_generation",
    "spec_summary",
    "speculative_config",
    "use_draft",
]


# ---------------------------------------------------------------------------------------- generate
def prepare_generation(state: ServerState, body: DnaGenerateRequest) -> list[tuple[Request, int]]:
    """Validate a generation request and build its engine requests ``(request, prompt index)``,
    choice ``c = i * n + j`` at position c. Cheap checks (the server's limits: counts, lengths) come
    before any prompt is scanned or tokenised; whether the serving engine can run a request (its
    length, the draft) is the engine's one check (``Engine.make_request``, ``Engine.check``)."""
    s = state.settings
    prompts = as_list(body.prompt, "prompt", s.max_prompts)
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
    prefix = tag_prefix(body.tags, body.prefix)
    spec = speculative_config(state, body)
    out: list[tuple[Request, int]] = []
    for i, text in enumerate(prompts):
        where = "prompt" if len(prompts) == 1 else f"prompt[{i}]"
        dna = text[text.rfind(OPEN_TAG) + len(OPEN_TAG) :] if OPEN_TAG in text else text
        problem = dna_problem(dna)
        if problem:
            raise ApiError(400, f"{where}: {problem}", "prompt")
        parsed: Prompt | None = None
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
                if parsed is None:  # once per prompt, after its first choice's options are checked
                    parsed = parse_prompt(state.tokenizer, full_prompt(text, prefix), i)
                req = state.engine.make_request(parsed.ids, params, forced=parsed.forced)
            except ContextExceeded as exc:
                raise ApiError(
                    400,
                    f"{where}: {exc.prompt_tokens} prompt tokens + {exc.new_tokens} new tokens exceed "
                    f"the server's max_model_len of {exc.limit}",
                    "prompt",
                ) from None
            except (ValueError, TypeError) as exc:
                raise ApiError(400, f"{where}: {exc}", "prompt") from None
            if spec is not None:
                use_draft(state, body, req, spec, where)
            out.append((req, i))
    return out


def speculative_config(state: ServerState, body: DnaGenerateRequest) -> SpecConfig | None:
    """The draft settings for a generation request, or None to decode without the draft.

    ``draft`` unset: speculative whenever the server has a draft model (the output's law is the
    same either way); ``true``: required (400 without one); ``false``: off. ``num_draft_tokens``
    (else ``--draft-tokens``, else adaptive) fixes the 6-mers drafted per round."""
    has_draft = state.engine.has_draft
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
    req.speculative = spec
    try:
        state.engine.check(req)
    except SpeculationRefused as exc:
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
                raise ApiError(self.subs[index].error_status, self.subs[index].error or "aborted")

    async def _next(self, watcher: asyncio.Future[Any] | None) -> tuple[int, int, bool]:
        event = await next_progress(self.queue, self.deadline, watcher)
        if event is None:
            raise ApiError(504, self.state.timeout_message)
        return event

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
        watcher = asyncio.ensure_future(wait_disconnect(self.http))
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


async def dna_generate(state: ServerState, http: HttpRequest, body: DnaGenerateRequest) -> Response:
    state.check_model(body.model)
    size = len(body.prompt) if isinstance(body.prompt, str) else sum(len(p) for p in body.prompt)
    size += len(body.mask or "") * body.n
    if size > OFFLOAD_CHARS:  # scanning and tokenising prompts is CPU work: never on the event loop
        built = await state.offload(lambda: prepare_generation(state, body))
    else:
        built = prepare_generation(state, body)
    return await DnaGenerateRun(state, http, body, built).respond()
