"""A ``/v1/completions`` request checked before anything is queued: parameters this server does not
support are refused by name, the server's limits are enforced, the prompts (text or token ids) are
tokenised, and the engine requests are built. :func:`prepare_completion` is the one entry: every
check runs there, in one pass, and whether the engine can run a prompt (its length) is the
engine's own check (``Engine.check_length``, ``Engine.make_request``), worded as vLLM words it."""

from __future__ import annotations

from dataclasses import dataclass

from hexamer.engine import ContextExceeded, Request, SamplingParams
from hexamer.engine.request import TokenLogprobs
from hexamer.server.errors import ApiError
from hexamer.server.response_size import check_response_values, completion_terms
from hexamer.server.schemas import CompletionRequest
from hexamer.server.state import ServerState

__all__ = [
    "MAX_STOP_STRINGS",
    "OFFLOAD_PROMPT_SIZE",
    "CompletionPrompt",
    "PreparedCompletion",
    "check_limits",
    "check_token_ids",
    "prepare_completion",
    "prompt_size",
    "refuse_unsupported",
    "stop_strings",
    "tokenize_prompts",
]


@dataclass
class CompletionPrompt:
    """One prompt: its token ids and its text when given as text."""

    ids: list[int]
    text: str | None
    logprobs: TokenLogprobs | None = None  # filled from the choice that computed them


@dataclass
class PreparedCompletion:
    """A checked completion request: its prompts, one engine request per choice (choice
    ``i * n + j`` is sample j of prompt i), ``max_tokens`` per choice, the stop strings and the
    prompt log-probabilities asked for (``prompt_logprobs``, else ``logprobs`` with ``echo``)."""

    prompts: list[CompletionPrompt]
    requests: list[Request]
    max_tokens: int
    stops: list[str]
    prompt_logprobs: int | None


async def prepare_completion(state: ServerState, body: CompletionRequest) -> PreparedCompletion:
    """Check and tokenise ``body`` and build its engine requests; on the preparation threads when
    its prompts are long (tokenising is CPU work: never on the event loop)."""
    if prompt_size(body) > OFFLOAD_PROMPT_SIZE:
        return await state.offload(lambda: prepare_completion_now(state, body))
    return prepare_completion_now(state, body)


def prepare_completion_now(state: ServerState, body: CompletionRequest) -> PreparedCompletion:
    """:func:`prepare_completion` on this thread: unsupported parameters and the stop strings
    first (cheap), then the prompts, the limits, and the engine requests."""
    refuse_unsupported(body)
    stops = stop_strings(body)
    prompts = tokenize_prompts(state, body)
    max_tokens = check_limits(state, body, prompts)
    prompt_lp = (
        body.prompt_logprobs if body.prompt_logprobs is not None else (body.logprobs if body.echo else None)
    )
    requests = completion_requests(state, body, prompts, max_tokens, prompt_lp)
    return PreparedCompletion(prompts, requests, max_tokens, stops, prompt_lp)


def completion_requests(
    state: ServerState,
    body: CompletionRequest,
    prompts: list[CompletionPrompt],
    max_tokens: int,
    prompt_lp: int | None,
) -> list[Request]:
    """One engine request per choice (seed ``seed + j`` for sample j, vLLM's rule for ``n > 1``);
    only the first sample of a prompt computes its prompt log-probabilities."""
    out = []
    for p in prompts:
        for j in range(body.n):
            params = SamplingParams(
                mode="text",
                temperature=1.0 if body.temperature is None else body.temperature,
                top_p=1.0 if body.top_p is None else body.top_p,
                top_k=max(body.top_k or 0, 0),
                min_p=body.min_p or 0.0,
                max_new_tokens=max(max_tokens, 1),
                seed=None if body.seed is None else body.seed + j,
                ignore_eos=body.ignore_eos,
                stop_token_ids=tuple(body.stop_token_ids or ()),
                min_tokens=body.min_tokens,
                logprobs=body.logprobs,
                prompt_logprobs=prompt_lp if j == 0 else None,
                allowed_token_ids=tuple(body.allowed_token_ids) if body.allowed_token_ids else None,
            )
            out.append(state.engine.make_request(p.ids, params, eos_token_ids=state.eos_ids))
    return out


def refuse_unsupported(body: CompletionRequest) -> None:
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


def check_token_ids(ids: list[int], vocab: int, where: str) -> None:
    bad = [t for t in ids if not 0 <= t < vocab]
    if bad:
        raise ApiError(
            400, f"{where}: token id {bad[0]} is out of range (vocabulary ids 0..{vocab - 1})", where
        )


def tokenize_prompts(state: ServerState, body: CompletionRequest) -> list[CompletionPrompt]:
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
            check_token_ids(ids, state.vocab_size, where)
        if not ids:
            raise ApiError(400, f"{where}: the prompt has no tokens", "prompt")
        if body.truncate_prompt_tokens is not None:
            ids = ids[-body.truncate_prompt_tokens :]
            text = None
        out.append(CompletionPrompt(ids, text))
    return out


def check_limits(state: ServerState, body: CompletionRequest, prompts: list[CompletionPrompt]) -> int:
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
    try:
        state.engine.check_length(longest, need)
    except ContextExceeded as exc:
        raise ApiError(
            400,
            f"This model's maximum context length is {exc.limit} tokens. However, you requested "
            f"{longest + need} tokens ({longest} in the prompt, {need} in the completion). "
            "Please reduce the prompt or max_tokens.",
            "prompt",
        ) from None
    check_response_values(
        completion_terms(
            [len(p.ids) for p in prompts],
            n=body.n,
            max_tokens=0 if body.echo and body.max_tokens == 0 else max_tokens,
            logprobs=body.logprobs,
            prompt_logprobs=body.prompt_logprobs,
            echo=bool(body.echo),
        ),
        s.max_response_values,
        "ask for fewer logprobs / prompt_logprobs, fewer tokens or choices, or shorter prompts",
    )
    if body.min_tokens > max(max_tokens, 1):
        raise ApiError(400, f"min_tokens: {body.min_tokens} exceeds max_tokens {max_tokens}", "min_tokens")
    for name in ("stop_token_ids", "allowed_token_ids"):
        ids = getattr(body, name)
        if ids is not None:
            check_token_ids(ids, state.vocab_size, name)
    if body.allowed_token_ids is not None and not body.allowed_token_ids:
        raise ApiError(400, "allowed_token_ids: must not be empty", "allowed_token_ids")
    return max_tokens


#: stop strings per request: each one is searched in every streamed delta, on the event loop
MAX_STOP_STRINGS = 64


def stop_strings(body: CompletionRequest) -> list[str]:
    if body.stop is None:
        return []
    stops = [body.stop] if isinstance(body.stop, str) else list(body.stop)
    if len(stops) > MAX_STOP_STRINGS:
        raise ApiError(400, f"stop: {len(stops)} stop strings exceed the limit of {MAX_STOP_STRINGS}", "stop")
    return [s for s in stops if s]


def prompt_size(body: CompletionRequest) -> int:
    """Characters (or token ids) in the prompts: what tokenising and validating them costs."""
    raw = body.prompt
    if isinstance(raw, str):
        return len(raw)
    return sum(len(x) if isinstance(x, str | list) else 1 for x in raw)


#: prompts longer than this (characters or ids in all) are prepared on the preparation threads
OFFLOAD_PROMPT_SIZE = 4096
