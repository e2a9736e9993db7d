"""``POST /v1/completions``: OpenAI's legacy completions, in vLLM's response format.

Generation samples over the whole vocabulary (text, DNA tags, 6-mers, EOS) from any prompt, as
vLLM does on Carbon; prompts are text or token ids (one or a list). Choice ``i * n + j`` is sample
j of prompt i, seeded ``seed + j`` (vLLM's convention for ``n > 1``). Logprobs are the raw model
distribution. ``prompt_logprobs`` (a vLLM extra) lists, per prompt token, ``None`` for the first
and then ``{token_id: {"logprob", "rank", "decoded_token"}}`` with the actual token first and the
top-N after it; those are computed from the single prefill forward.
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

from hexamer.engine import Request, RequestState, SamplingParams
from hexamer.engine.request import TokenLogprobs
from hexamer.server.detok import IncrementalDetokenizer, prompt_in_region
from hexamer.server.errors import ApiError, error_body
from hexamer.server.schemas import CompletionRequest
from hexamer.server.state import ServerState
from hexamer.server.streaming import DisconnectAwareStream, RawJSON, dumps, json_response, sse
from hexamer.server.worker import QueueFull, ShuttingDown, Submission

LOGPROB_FLOOR = -9999.0  # what OpenAI and vLLM send instead of -inf


def _floor(x: float) -> float:
    return max(float(x), LOGPROB_FLOOR)


@dataclass
class _Prompt:
    ids: list[int]
    text: str | None
    in_region: bool
    logprobs: TokenLogprobs | None = None  # filled from the choice that computed them


@dataclass
class _Choice:
    index: int
    prompt: _Prompt
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


def _refuse_unsupported(body: CompletionRequest) -> None:
    def no(param: str, what: str) -> None:
        raise ApiError(400, f"{param}: {what} is not supported by this server", param)

    if body.frequency_penalty not in (None, 0):
        no("frequency_penalty", "a non-zero frequency penalty")
    if body.presence_penalty not in (None, 0):
        no("presence_penalty", "a non-zero presence penalty")
    if body.repetition_penalty not in (None, 1):
        no("repetition_penalty", "a repetition penalty other than 1")
    if body.logit_bias:
        no("logit_bias", "logit bias")
    if body.use_beam_search:
        no("use_beam_search", "beam search")
    if body.best_of is not None and body.best_of != body.n:
        no("best_of", "best_of different from n")
    if body.suffix is not None:
        no("suffix", "a suffix")
    for name in ("guided_json", "guided_regex", "guided_choice", "guided_grammar"):
        if getattr(body, name) is not None:
            no(name, "guided decoding")
    if body.response_format is not None and body.response_format.get("type", "text") != "text":
        no("response_format", "a structured response format")
    if body.logits_processors:
        no("logits_processors", "custom logits processors")
    if body.prompt_embeds is not None:
        no("prompt_embeds", "prompt embeddings")
    if body.kv_transfer_params is not None:
        no("kv_transfer_params", "KV transfer")
    if body.priority != 0:
        no("priority", "priority scheduling")


def _check_ids(ids: list[int], vocab: int, where: str) -> None:
    bad = [t for t in ids if not 0 <= t < vocab]
    if bad:
        raise ApiError(
            400, f"{where}: token id {bad[0]} is out of range (vocabulary ids 0..{vocab - 1})", where
        )


def _prompts(state: ServerState, body: CompletionRequest) -> list[_Prompt]:
    raw = body.prompt
    if isinstance(raw, str):
        items: list[str | list[int]] = [raw]
    elif raw and all(isinstance(x, int) for x in raw):
        items = [list(raw)]  # type: ignore[arg-type]
    else:
        items = list(raw)  # type: ignore[arg-type]
    if not items:
        raise ApiError(400, "prompt: give at least one prompt", "prompt")
    if len(items) > state.settings.max_prompts:
        raise ApiError(
            400, f"prompt: {len(items)} prompts exceed the limit of {state.settings.max_prompts}", "prompt"
        )
    tok = state.tokenizer
    limit = state.max_prompt_chars
    for i, item in enumerate(items):  # every cheap check first, before any prompt is tokenised
        where = "prompt" if len(items) == 1 else f"prompt[{i}]"
        if isinstance(item, str) and len(item) > limit:
            raise ApiError(
                400,
                f"{where}: {len(item):,} characters exceed the server's max_prompt_chars of {limit:,} "
                f"(the context holds {state.max_len:,} tokens)",
                "prompt",
            )
        if not isinstance(item, str) and body.truncate_prompt_tokens is None and len(item) > state.max_len:
            raise ApiError(
                400,
                f"{where}: {len(item):,} token ids exceed the context of {state.max_len:,} tokens",
                "prompt",
            )
    out = []
    for i, item in enumerate(items):
        where = "prompt" if len(items) == 1 else f"prompt[{i}]"
        if isinstance(item, str):
            if not item:
                raise ApiError(400, f"{where}: the prompt is empty", "prompt")
            ids, text = tok.encode(item), item
        else:
            ids, text = list(item), None
            _check_ids(ids, state.vocab_size, where)
        if not ids:
            raise ApiError(400, f"{where}: the prompt has no tokens", "prompt")
        if body.truncate_prompt_tokens is not None:
            ids = ids[-body.truncate_prompt_tokens :]
            text = None
        out.append(_Prompt(ids, text, prompt_in_region(tok, ids)))
    return out


def _check_limits(state: ServerState, body: CompletionRequest, prompts: list[_Prompt]) -> int:
    """Validated ``max_tokens`` per choice (None = what the context leaves)."""
    s = state.settings
    if body.n > s.max_n:
        raise ApiError(400, f"n: {body.n} exceeds the limit of {s.max_n}", "n")
    for name in ("logprobs", "prompt_logprobs"):
        value = getattr(body, name)
        if value is not None and value > s.max_logprobs:
            raise ApiError(
                400, f"{name}: {value} exceeds the server's max_logprobs of {s.max_logprobs}", name
            )
    if body.stream and body.prompt_logprobs:
        raise ApiError(400, "prompt_logprobs are not available when stream=true", "prompt_logprobs")
    if body.stream_options is not None and not body.stream:
        raise ApiError(400, "stream_options can only be given with stream=true", "stream_options")
    if body.max_tokens == 0 and not body.echo:
        raise ApiError(400, "max_tokens: must be at least 1 (0 is only allowed with echo=true)", "max_tokens")
    if body.max_tokens is not None and body.max_tokens > s.max_tokens:
        raise ApiError(
            400, f"max_tokens: {body.max_tokens} exceeds the server limit of {s.max_tokens}", "max_tokens"
        )
    longest = max(len(p.ids) for p in prompts)
    if body.max_tokens is None:
        max_tokens = min(state.max_len - longest, s.max_tokens)
        if max_tokens < 1:
            raise ApiError(
                400, f"prompt: {longest} tokens leave no room in the context of {state.max_len}", "prompt"
            )
    else:
        max_tokens = body.max_tokens
    need = max(max_tokens, 1)
    if longest + need > state.max_len:
        raise ApiError(
            400,
            f"This model's maximum context length is {state.max_len} tokens. However, you requested "
            f"{longest + need} tokens ({longest} in the prompt, {need} in the completion). "
            "Please reduce the prompt or max_tokens.",
            "prompt",
        )
    if body.min_tokens > max(max_tokens, 1):
        raise ApiError(400, f"min_tokens: {body.min_tokens} exceeds max_tokens {max_tokens}", "min_tokens")
    for name in ("stop_token_ids", "allowed_token_ids"):
        ids = getattr(body, name)
        if ids is not None:
            _check_ids(ids, state.vocab_size, name)
    if body.allowed_token_ids is not None and not body.allowed_token_ids:
        raise ApiError(400, "allowed_token_ids: must not be empty", "allowed_token_ids")
    return max_tokens


#: stop strings per request: each one is searched in every streamed delta, on the event loop
MAX_STOP_STRINGS = 64


def _stops(body: CompletionRequest) -> list[str]:
    if body.stop is None:
        return []
    stops = [body.stop] if isinstance(body.stop, str) else list(body.stop)
    if len(stops) > MAX_STOP_STRINGS:
        raise ApiError(400, f"stop: {len(stops)} stop strings exceed the limit of {MAX_STOP_STRINGS}", "stop")
    return [s for s in stops if s]


def _prompt_size(body: CompletionRequest) -> int:
    """Characters (or token ids) in the prompts: what tokenising and validating them costs."""
    raw = body.prompt
    if isinstance(raw, str):
        return len(raw)
    return sum(len(x) if isinstance(x, str | list) else 1 for x in raw)


#: prompts longer than this (characters or ids in all) are prepared on the preparation threads
OFFLOAD_PROMPT_SIZE = 4096


class CompletionRun:
    """One completion request from submission to the response (plain or streamed)."""

    def __init__(
        self, state: ServerState, http: HttpRequest, body: CompletionRequest, prompts: list[_Prompt]
    ) -> None:
        self.state = state
        self.http = http
        self.body = body
        self.prompts = prompts
        self.max_tokens = _check_limits(state, body, self.prompts)
        self.echo_only = bool(body.echo) and body.max_tokens == 0
        self.stops = _stops(body)
        self.hold = max((len(s) for s in self.stops), default=1) - 1
        self.as_ids = bool(body.return_tokens_as_token_ids)
        self.id = f"cmpl-{body.request_id or secrets.token_hex(16)}"
        self.created = int(time.time())
        self.queue: asyncio.Queue[tuple[int, int, bool]] = asyncio.Queue()
        self.deadline = state.deadline(http.scope)
        prompt_lp = (
            body.prompt_logprobs
            if body.prompt_logprobs is not None
            else (body.logprobs if body.echo else None)
        )
        self.prompt_lp = prompt_lp
        loop = asyncio.get_running_loop()
        self.choices: list[_Choice] = []
        self.subs: list[Submission] = []
        tok = state.tokenizer
        for p in self.prompts:
            for j in range(body.n):
                params = SamplingParams(
                    mode="text",
                    temperature=1.0 if body.temperature is None else body.temperature,
                    top_p=1.0 if body.top_p is None else body.top_p,
                    top_k=max(body.top_k or 0, 0),
                    min_p=body.min_p or 0.0,
                    max_new_tokens=max(self.max_tokens, 1),
                    seed=None if body.seed is None else body.seed + j,
                    ignore_eos=body.ignore_eos,
                    stop_token_ids=tuple(body.stop_token_ids or ()),
                    min_tokens=body.min_tokens,
                    logprobs=body.logprobs,
                    prompt_logprobs=prompt_lp if j == 0 else None,
                    allowed_token_ids=tuple(body.allowed_token_ids) if body.allowed_token_ids else None,
                )
                req = Request(list(p.ids), params, eos_token_ids=state.eos_ids)
                index = len(self.choices)
                detok = IncrementalDetokenizer(
                    tok, skip_special_tokens=body.skip_special_tokens, in_region=p.in_region
                )
                self.choices.append(_Choice(index, p, req, detok))
                self.subs.append(Submission(req, index, loop, self.queue))
        state.check_deadline(self.deadline)  # late already (body upload, preparation): never queued
        try:
            state.worker.submit(self.subs)
        except QueueFull as exc:
            raise ApiError(429, str(exc)) from None
        except ShuttingDown as exc:
            raise ApiError(503, str(exc)) from None
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
        remaining = self.deadline - time.monotonic()
        if remaining <= 0:
            return None
        getter = asyncio.ensure_future(self.queue.get())
        waits: set[asyncio.Future[Any]] = {getter}
        if watcher is not None:
            waits.add(watcher)
        done, _ = await asyncio.wait(waits, timeout=remaining, return_when=asyncio.FIRST_COMPLETED)
        if getter in done:
            return getter.result()
        getter.cancel()
        if watcher is not None and watcher in done:
            raise ConnectionResetError("client disconnected")
        return None

    # ------------------------------------------------------------------ formatting
    def _token(self, token_id: int) -> str:
        return f"token_id:{token_id}" if self.as_ids else self.state.strings.text(token_id)

    def _legacy_logprobs(
        self, token_ids: list[int], rows: list[tuple[TokenLogprobs, int] | None], offset: int
    ) -> dict[str, Any]:
        """OpenAI's legacy ``logprobs`` object (vLLM: the token itself first, then the top N)."""
        n = self.body.logprobs or 0
        tokens: list[str] = []
        token_logprobs: list[float | None] = []
        tops: list[dict[str, float] | None] = []
        offsets: list[int] = []
        for tid, row in zip(token_ids, rows, strict=True):
            token = self._token(tid)
            offsets.append(offset)
            offset += len(token)
            tokens.append(token)
            if row is None:
                token_logprobs.append(None)
                tops.append(None)
                continue
            lp, r = row
            token_logprobs.append(_floor(lp.logprob[r]))
            entry: dict[str, float] = {token: _floor(lp.logprob[r])}
            for t, v in zip(lp.top_ids[r].tolist(), lp.top_logprobs[r].tolist(), strict=True):
                if len(entry) > n:
                    break
                entry.setdefault(self._token(t), _floor(v))
            tops.append(entry)
        return {
            "text_offset": offsets,
            "token_logprobs": token_logprobs,
            "tokens": tokens,
            "top_logprobs": tops,
        }

    def _prompt_rows(self, p: _Prompt) -> list[tuple[TokenLogprobs, int] | None]:
        lp = p.logprobs
        return [None] + ([(lp, i) for i in range(len(lp))] if lp is not None else [None] * (len(p.ids) - 1))

    def _output_rows(self, ch: _Choice, start: int, stop: int) -> list[tuple[TokenLogprobs, int] | None]:
        recs = ch.request.logprobs
        return [(recs[i], 0) if i < len(recs) else None for i in range(start, stop)]

    def _prompt_logprobs_json(self, p: _Prompt) -> RawJSON:
        """``[null, {"id": {"logprob", "rank", "decoded_token"}, ...}, ...]`` written directly (a
        top-4096 answer holds millions of entries; dict-building would dominate the request)."""
        lp = p.logprobs
        if lp is None:
            return RawJSON("null")
        js = self.state.strings.json
        parts = ["[null"]
        tops = lp.top_ids.tolist()
        top_lps = lp.top_logprobs.tolist()
        for i in range(len(lp)):
            tid = int(lp.token_ids[i])
            items = [
                f'"{tid}":{{"logprob":{_floor(lp.logprob[i])!r},"rank":{int(lp.rank[i])},"decoded_token":{js(tid)}}}'
            ]
            for rank, (t, v) in enumerate(zip(tops[i], top_lps[i], strict=True), start=1):
                if t != tid:
                    items.append(f'"{t}":{{"logprob":{_floor(v)!r},"rank":{rank},"decoded_token":{js(t)}}}')
            parts.append("{" + ",".join(items) + "}")
        return RawJSON(",".join(parts) + "]")

    def _prompt_text(self, p: _Prompt) -> str:
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
        logprobs = None
        if body.logprobs is not None:
            ids = (list(ch.prompt.ids) if body.echo else []) + out_ids
            rows = (self._prompt_rows(ch.prompt) if body.echo else []) + self._output_rows(
                ch, 0, len(out_ids)
            )
            logprobs = self._legacy_logprobs(ids, rows, 0)
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
        watcher = asyncio.ensure_future(_wait_disconnect(self.http))
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
        if self.prompt_lp:  # large answers (top-4096 prompt logprobs) are built off the event loop
            return json_response(await asyncio.to_thread(self._body_json))
        return json_response(self._body_json())

    def _body_json(self) -> str:
        return dumps(
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
                raise ApiError(503 if "shut down" in sub.error else 500, sub.error)

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
                    yield sse(error_body(503, self.subs[ch.index].error or "aborted"))
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


async def _wait_disconnect(http: HttpRequest) -> None:
    while True:
        message = await http.receive()
        if message["type"] == "http.disconnect":
            return


async def create_completion(state: ServerState, http: HttpRequest, body: CompletionRequest) -> Response:
    state.check_model(body.model)
    _refuse_unsupported(body)
    _stops(body)  # cheap checks before the prompts are tokenised
    if _prompt_size(body) > OFFLOAD_PROMPT_SIZE:  # tokenising is CPU work: never on the event loop
        prompts = await state.offload(lambda: _prompts(state, body))
    else:
        prompts = _prompts(state, body)
    run = CompletionRun(state, http, body, prompts)
    return await run.respond()
