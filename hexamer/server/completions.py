"""``POST /v1/completions``: OpenAI's legacy completions, in vLLM's response format.

Generation samples over the whole vocabulary (text, DNA tags, 6-mers, EOS) from any prompt, as
vLLM does on Carbon; prompts are text or token ids (one or a list). Choice ``i * n + j`` is sample
j of prompt i, seeded ``seed + j`` (vLLM's convention for ``n > 1``). Logprobs are the raw model
distribution. ``prompt_logprobs`` (a vLLM extra) lists, per prompt token, ``None`` for the first
and then ``{token_id: {"logprob", "rank", "decoded_token"}}`` with the actual token first and the
top-N after it; those are computed from the single prefill forward.

The request is checked and tokenised, and its engine requests built, in one pass by
:func:`~hexamer.server.completion_input.prepare_completion`; log-probabilities are shaped by
:mod:`~hexamer.server.completion_logprobs`.
"""

from __future__ import annotations

import asyncio
import secrets
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

from starlette.requests import Request as HttpRequest
from starlette.responses import Response

from hexamer.engine import Request, RequestState
from hexamer.engine.request import TokenLogprobs
from hexamer.server.completion_input import CompletionPrompt, PreparedCompletion, prepare_completion
from hexamer.server.completion_logprobs import (
    legacy_logprobs,
    legacy_logprobs_json,
    prompt_logprobs_json,
)
from hexamer.server.detok import IncrementalDetokenizer
from hexamer.server.errors import ApiError, error_body
from hexamer.server.schemas import CompletionRequest
from hexamer.server.state import ServerState
from hexamer.server.streaming import (
    DisconnectAwareStream,
    JsonPieces,
    RawJSON,
    json_stream,
    sse,
    wait_disconnect,
)
from hexamer.server.worker import Submission, next_progress

__all__ = ["CompletionRun", "create_completion"]


@dataclass
class _Choice:
    index: int
    prompt: CompletionPrompt
    request: Request
    detok: IncrementalDetokenizer
    text: str = ""
    n_seen: int = 0
    finished: bool = False
    finish_reason: str | None = None
    stop_reason: int | str | None = None
    emitted_chars: int = 0
    emitted_tokens: int = 0
    echoed: bool = False
    last_time: float | None = None
    first_time: float | None = None
    new_ids: list[int] = field(default_factory=list)


class CompletionRun:
    """One completion request from submission to the response (plain or streamed)."""

    def __init__(
        self, state: ServerState, http: HttpRequest, body: CompletionRequest, prepared: PreparedCompletion
    ) -> None:
        self.state = state
        self.http = http
        self.body = body
        self.prompts = prepared.prompts
        self.max_tokens = prepared.max_tokens
        self.echo_only = bool(body.echo) and body.max_tokens == 0
        self.stops = prepared.stops
        self.hold = max((len(s) for s in self.stops), default=1) - 1
        self.as_ids = bool(body.return_tokens_as_token_ids)
        self.id = f"cmpl-{body.request_id or secrets.token_hex(16)}"
        self.created = int(time.time())
        self.queue: asyncio.Queue[tuple[int, int, bool]] = asyncio.Queue()
        self.deadline = state.deadline(http.scope)
        self.prompt_lp = prepared.prompt_logprobs
        loop = asyncio.get_running_loop()
        self.choices: list[_Choice] = []
        self.subs: list[Submission] = []
        tok = state.tokenizer
        for index, req in enumerate(prepared.requests):
            p = self.prompts[index // body.n]
            detok = IncrementalDetokenizer.after_prompt(
                tok, p.ids, skip_special_tokens=body.skip_special_tokens
            )
            self.choices.append(_Choice(index, p, req, detok))
            self.subs.append(Submission(req, index, loop, self.queue))
        state.submit(self.subs, self.deadline)
        state.metrics.prompt_tokens.inc(sum(len(p.ids) for p in self.prompts))

    # ------------------------------------------------------------------ progress
    def cancel_unfinished(self) -> None:
        self.state.worker.cancel([s for s, c in zip(self.subs, self.choices, strict=True) if not c.finished])

    def _advance(self, index: int, count: int, finished: bool) -> _Choice | None:
        """Apply one engine event; returns the choice if it changed."""
        ch = self.choices[index]
        if ch.finished:
            return None
        sub = self.subs[index]
        now = time.perf_counter()
        req = ch.request
        new = req.output_ids[ch.n_seen : count]
        ch.n_seen = count
        m = self.state.metrics
        if new:
            if ch.first_time is None:
                ch.first_time = now
                m.ttft.observe(now - sub.submitted_at)
            elif ch.last_time is not None:
                m.itl.observe(now - ch.last_time)
            ch.last_time = now
        if req.is_text and req.params.prompt_logprobs is not None and req.prompt_logprobs is not None:
            ch.prompt.logprobs = req.prompt_logprobs
        if sub.error is not None:
            ch.finished, ch.finish_reason = True, "abort"
            return ch
        if self.echo_only:
            ch.finished = finished
            ch.finish_reason = "length" if finished else None
            return ch
        ch.new_ids.extend(new)
        delta = ch.detok.push(new)
        if finished:
            delta += ch.detok.flush()
        start = max(0, len(ch.text) - self.hold)
        ch.text += delta
        if self.stops and delta:
            self._find_stop(ch, start)
        if not ch.finished and finished:
            ch.finished = True
            ch.finish_reason = "abort" if req.finish_reason == "cancelled" else req.finish_reason
            ch.stop_reason = req.stop_reason
        if ch.finished and req.state is not RequestState.FINISHED:
            self.state.worker.cancel([sub])  # a stop string ended it: free its row now
        return ch

    def _find_stop(self, ch: _Choice, start: int) -> None:
        best: tuple[int, str] | None = None
        for stop in self.stops:
            at = ch.text.find(stop, start)
            if at >= 0 and (best is None or at < best[0]):
                best = (at, stop)
        if best is not None:
            at, stop = best
            ch.text = ch.text[: at + (len(stop) if self.body.include_stop_str_in_output else 0)]
            ch.finished, ch.finish_reason, ch.stop_reason = True, "stop", stop

    async def _next_event(self, watcher: asyncio.Task[None] | None) -> tuple[int, int, bool] | None:
        """The next engine event, or None on timeout; raises ``ConnectionResetError`` on disconnect."""
        return await next_progress(self.queue, self.deadline, watcher)

    # ------------------------------------------------------------------ formatting
    def _token(self, token_id: int) -> str:
        return f"token_id:{token_id}" if self.as_ids else self.state.strings.text(token_id)

    def _legacy_logprobs(
        self, token_ids: list[int], rows: list[tuple[TokenLogprobs, int] | None], offset: int
    ) -> dict[str, Any]:
        """OpenAI's legacy ``logprobs`` object (vLLM: the token itself first, then the top N)."""
        return legacy_logprobs(token_ids, rows, offset, top_n=self.body.logprobs or 0, token_text=self._token)

    def _prompt_rows(self, p: CompletionPrompt) -> list[tuple[TokenLogprobs, int] | None]:
        lp = p.logprobs
        return [None] + ([(lp, i) for i in range(len(lp))] if lp is not None else [None] * (len(p.ids) - 1))

    def _output_rows(self, ch: _Choice, start: int, stop: int) -> list[tuple[TokenLogprobs, int] | None]:
        recs = ch.request.logprobs
        return [(recs[i], 0) if i < len(recs) else None for i in range(start, stop)]

    def _prompt_logprobs_json(self, p: CompletionPrompt) -> RawJSON | JsonPieces:
        return prompt_logprobs_json(p.logprobs, self.state.strings.json)

    def _prompt_text(self, p: CompletionPrompt) -> str:
        return p.text if p.text is not None else self.state.tokenizer.decode(p.ids)

    def usage(self) -> dict[str, int]:
        prompt = sum(len(p.ids) for p in self.prompts)
        completion = 0 if self.echo_only else sum(c.request.n_generated for c in self.choices)
        return {"prompt_tokens": prompt, "total_tokens": prompt + completion, "completion_tokens": completion}

    def _final_choice(self, ch: _Choice) -> dict[str, Any]:
        body = self.body
        out_ids = [] if self.echo_only else list(ch.request.output_ids)
        text = ch.text
        if body.echo:
            text = self._prompt_text(ch.prompt) + text
        logprobs: JsonPieces | None = None
        if body.logprobs is not None:
            ids = (list(ch.prompt.ids) if body.echo else []) + out_ids
            rows = (self._prompt_rows(ch.prompt) if body.echo else []) + self._output_rows(
                ch, 0, len(out_ids)
            )
            logprobs = legacy_logprobs_json(
                ids, rows, 0, top_n=self.body.logprobs or 0, token_text=self._token
            )  # written while it is sent: never whole in memory
        choice: dict[str, Any] = {
            "index": ch.index,
            "text": text,
            "logprobs": logprobs,
            "finish_reason": ch.finish_reason,
            "stop_reason": ch.stop_reason,
            "prompt_logprobs": self._prompt_logprobs_json(ch.prompt) if self.prompt_lp is not None else None,
        }
        if body.return_token_ids:
            choice["prompt_token_ids"] = list(ch.prompt.ids)
            choice["token_ids"] = out_ids
        return choice

    # ------------------------------------------------------------------ responses
    async def respond(self) -> Response:
        if self.body.stream:
            return DisconnectAwareStream(self._stream(), on_close=self.cancel_unfinished)
        watcher = asyncio.ensure_future(wait_disconnect(self.http))
        try:
            while not all(c.finished for c in self.choices):
                event = await self._next_event(watcher)
                if event is None:
                    raise ApiError(504, self.state.timeout_message)
                self._advance(*event)
        except ConnectionResetError:
            return Response(status_code=499)
        finally:
            watcher.cancel()
            self.cancel_unfinished()
        self._raise_worker_error()
        self.http.state.usage = self.usage()
        # written on worker threads while it is sent (top-4096 logprobs: hundreds of megabytes),
        # so the event loop and /health never wait on it and it is never whole in memory
        return json_stream(
            {
                "id": self.id,
                "object": "text_completion",
                "created": self.created,
                "model": self.state.model_name,
                "choices": [self._final_choice(c) for c in self.choices],
                "usage": self.usage(),
            }
        )

    def _raise_worker_error(self) -> None:
        for sub in self.subs:
            if sub.error is not None:
                raise ApiError(sub.error_status, sub.error)

    def _chunk(self, choice: dict[str, Any], usage: dict[str, int] | None = None) -> str:
        return sse(
            {
                "id": self.id,
                "object": "text_completion",
                "created": self.created,
                "model": self.state.model_name,
                "choices": [choice],
                "usage": usage,
            }
        )

    def _stream_choice(self, ch: _Choice) -> dict[str, Any] | None:
        body = self.body
        visible = len(ch.text) if ch.finished else max(ch.emitted_chars, len(ch.text) - self.hold)
        delta = ch.text[ch.emitted_chars : visible]
        offset = ch.emitted_chars
        ch.emitted_chars = visible
        new_ids, ch.new_ids = ch.new_ids, []
        start_tok = ch.emitted_tokens
        ch.emitted_tokens += len(new_ids)
        ids: list[int] = list(new_ids)
        rows = self._output_rows(ch, start_tok, start_tok + len(new_ids)) if body.logprobs is not None else []
        if body.echo and not ch.echoed:
            ch.echoed = True
            delta = self._prompt_text(ch.prompt) + delta
            ids = list(ch.prompt.ids) + ids
            if body.logprobs is not None:
                rows = self._prompt_rows(ch.prompt) + rows
            offset = 0
        if not delta and not ids and not ch.finished:
            return None
        choice: dict[str, Any] = {
            "index": ch.index,
            "text": delta,
            "logprobs": self._legacy_logprobs(ids, rows, offset) if body.logprobs is not None else None,
            "finish_reason": ch.finish_reason if ch.finished else None,
            "stop_reason": ch.stop_reason if ch.finished else None,
        }
        if body.return_token_ids:
            choice["token_ids"] = new_ids
        return choice

    async def _stream(self) -> AsyncIterator[str]:
        options = self.body.stream_options
        include_usage = bool(options and options.include_usage)
        continuous = include_usage and bool(options and options.continuous_usage_stats)
        try:
            while not all(c.finished for c in self.choices):
                event = await self._next_event(None)
                if event is None:
                    self.cancel_unfinished()
                    yield sse(error_body(504, self.state.timeout_message))
                    break
                ch = self._advance(*event)
                if ch is None:
                    continue
                if self.subs[ch.index].error is not None:
                    sub = self.subs[ch.index]
                    yield sse(error_body(sub.error_status, sub.error or "aborted"))
                    self.cancel_unfinished()
                    break
                choice = self._stream_choice(ch)
                if choice is not None:
                    yield self._chunk(choice, self._choice_usage(ch) if continuous else None)
            else:
                if include_usage:
                    usage = self.usage()
                    yield sse(
                        {
                            "id": self.id,
                            "object": "text_completion",
                            "created": self.created,
                            "model": self.state.model_name,
                            "choices": [],
                            "usage": usage,
                        }
                    )
            self.http.state.usage = self.usage()
            yield "data: [DONE]\n\n"
        finally:
            self.cancel_unfinished()

    def _choice_usage(self, ch: _Choice) -> dict[str, int]:
        prompt = len(ch.prompt.ids)
        done = ch.request.n_generated
        return {"prompt_tokens": prompt, "total_tokens": prompt + done, "completion_tokens": done}


async def create_completion(state: ServerState, http: HttpRequest, body: CompletionRequest) -> Response:
    state.check_model(body.model)
    prepared = await prepare_completion(state, body)
    return await CompletionRun(state, http, body, prepared).respond()
